"""mixprec.Tensor to and from NumPy, and through DLPack (NumPy; PyTorch where importable)."""

import unittest

import numpy as np

import mixprec

try:
    import torch
except ImportError:
    torch = None


class NumPy(unittest.TestCase):
    def test_native_dtypes_round_trip(self):
        cases = {
            "f64": np.arange(6, dtype=np.float64).reshape(2, 3) / 3,
            "f32": np.float32([[1.5, -2.25], [0.0, 1e-30]]),
            "f16": np.float16([1.0, 65504.0, -0.5]),
            "i64": np.int64([1, -2, 1 << 40]),
            "i32": np.int32([[7], [-8]]),
            "u8": np.uint8([0, 255, 7]),
            "bool": np.array([True, False, True]),
        }
        for name, a in cases.items():
            with self.subTest(dtype=name):
                t = mixprec.Tensor.from_numpy(a)
                self.assertEqual(t.dtype, name)
                self.assertEqual(t.shape, a.shape)
                out = t.numpy()
                self.assertEqual(out.dtype, a.dtype)
                np.testing.assert_array_equal(out, a)
                np.testing.assert_array_equal(np.asarray(t), a)

    def test_bit_patterns(self):
        bits = mixprec.cast(np.float32([1.0, -3.5, 448.0]), "e4m3")
        t = mixprec.Tensor.from_numpy(bits, dtype="e4m3")
        self.assertEqual(t.dtype, "f8_e4m3fn")
        np.testing.assert_array_equal(t.numpy(bits=True), bits)
        np.testing.assert_array_equal(t.to("f32").numpy(), [1.0, -3.5, 448.0])
        b16 = mixprec.cast(np.float32([1.0, 2.0]), "bf16")
        t16 = mixprec.Tensor.from_numpy(b16, dtype="bf16")
        self.assertEqual(t16.numpy(bits=True).dtype, np.uint16)
        np.testing.assert_array_equal(t16.numpy(bits=True), b16)

    def test_values_converted_when_dtype_given(self):
        t = mixprec.Tensor.from_numpy(np.float32([1 + 2**-9] * 4), dtype="bf16")
        np.testing.assert_array_equal(t.numpy(bits=True), [0x3F80] * 4)
        s = mixprec.Tensor.from_numpy(np.float32([1 + 2**-9] * 4000), dtype="bf16",
                                      rounding="stochastic", seed=3)
        self.assertGreater(int(np.sum(s.numpy(bits=True) == 0x3F81)), 0)

    def test_to_and_views(self):
        a = np.arange(12, dtype=np.float32).reshape(3, 4)
        t = mixprec.Tensor.from_numpy(a)
        self.assertEqual(t.transpose(0, 1).shape, (4, 3))
        np.testing.assert_array_equal(t.transpose(0, 1).numpy(), a.T)
        np.testing.assert_array_equal(t.reshape([2, 6]).numpy(), a.reshape(2, 6))
        np.testing.assert_array_equal(t.to("f16").to("f32").numpy(), a)
        self.assertEqual(len(t), 3)
        self.assertEqual(t.numel, 12)
        self.assertEqual(t.nbytes, 48)
        self.assertIn("f32", repr(t))
        self.assertEqual(mixprec.full([2], 0.1, "bf16").numpy(bits=True).tolist(), [0x3DCD] * 2)
        self.assertEqual(mixprec.zeros([2, 2], "i64").numpy().tolist(), [[0, 0], [0, 0]])
        self.assertEqual(mixprec.empty_meta([1000, 1000], "bf16").nbytes, 2_000_000)

    def test_numpy_shares_memory_and_keeps_tensor_alive(self):
        view = mixprec.Tensor.from_numpy(np.float32([1, 2, 3])).numpy()
        import gc
        gc.collect()
        np.testing.assert_array_equal(view, [1, 2, 3])

    def test_errors(self):
        with self.assertRaisesRegex(mixprec.Error, "has no mixprec dtype"):
            mixprec.Tensor.from_numpy(np.uint16([1]))
        with self.assertRaisesRegex(mixprec.Error, "unknown format"):
            mixprec.Tensor.from_numpy(np.float32([1]), dtype="bf17")
        with self.assertRaisesRegex(mixprec.Error, "meta tensor"):
            mixprec.empty_meta([2]).numpy()


class DLPack(unittest.TestCase):
    def test_numpy_consumes_and_produces(self):
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        t = mixprec.from_dlpack(a)
        np.testing.assert_array_equal(t.numpy(), a)
        np.testing.assert_array_equal(mixprec.from_dlpack(a.T).numpy(), a.T)  # strided
        self.assertEqual(t.__dlpack_device__(), (1, 0))
        np.testing.assert_array_equal(np.from_dlpack(t), a)
        # a capsule not consumed frees its tensor
        t.__dlpack__()

    @unittest.skipIf(torch is None, "torch is not importable")
    def test_torch_round_trip(self):
        for dtype in [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
                      torch.int32, torch.uint8]:
            with self.subTest(dtype=str(dtype)):
                x = (torch.arange(12) - 3).reshape(3, 4).to(dtype)
                t = mixprec.from_dlpack(x)
                back = torch.from_dlpack(t)
                self.assertEqual(back.dtype, dtype)
                self.assertTrue(torch.equal(back, x))
                xt = x.t()  # strided
                self.assertTrue(torch.equal(torch.from_dlpack(mixprec.from_dlpack(xt)), xt))
        # bf16 bits agree with mixprec's cast
        x = torch.tensor([1.0, 3.14159, -2.5])
        t = mixprec.from_dlpack(x.to(torch.bfloat16))
        np.testing.assert_array_equal(t.numpy(bits=True),
                                      mixprec.cast(x.numpy(), "bf16"))
        # torch shares mixprec's memory: the tensor lives while torch's view does
        shared = torch.from_dlpack(mixprec.Tensor.from_numpy(np.float32([4, 5])))
        self.assertEqual(shared.tolist(), [4.0, 5.0])


if __name__ == "__main__":
    unittest.main()
