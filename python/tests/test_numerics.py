"""mixprec.dtypes(), cast() and decode(): formats, rounding modes, overflow, f64 inputs."""

import unittest

import numpy as np

import mixprec
from support import cli_error


class Dtypes(unittest.TestCase):
    def test_table(self):
        rows = {r["name"]: r for r in mixprec.dtypes()}
        for name in ["f64", "f32", "tf32", "bf16", "f16", "f8_e4m3fn", "f8_e5m2", "f4_e2m1fn",
                     "f8_e8m0fnu", "i32", "i64", "u8", "bool"]:
            self.assertIn(name, rows)
        self.assertEqual(rows["f8_e4m3fn"]["max"], 448.0)
        self.assertEqual(rows["f8_e5m2"]["max"], 57344.0)
        self.assertEqual(rows["bf16"]["max"], float(np.float32(3.3895313892515355e38)))
        self.assertEqual(rows["f16"]["min_subnormal"], 2.0 ** -24)
        self.assertFalse(rows["f8_e4m3fn"]["has_inf"])
        self.assertIn("e4m3", rows["f8_e4m3fn"]["aliases"])
        self.assertEqual(rows["bf16"]["encoding_dtype"], "uint16")
        self.assertEqual(rows["f8_e5m2"]["encoding_dtype"], "uint8")
        self.assertEqual(rows["bf16"]["ml_dtypes"], "bfloat16")
        self.assertFalse(rows["tf32"]["tensor_dtype"])
        self.assertTrue(rows["f8_e8m0fnu"]["cast_target"])
        self.assertFalse(rows["f64"]["cast_target"])
        self.assertEqual(rows["i64"]["kind"], "int")


class Cast(unittest.TestCase):
    def test_bf16_nearest_even(self):
        x = np.array([1.0, 3.14159, -2.5, 0.0, -0.0, np.inf, -np.inf], np.float32)
        bits = mixprec.cast(x, "bf16")
        self.assertEqual(bits.dtype, np.uint16)
        self.assertEqual(list(bits), [0x3F80, 0x4049, 0xC020, 0, 0x8000, 0x7F80, 0xFF80])
        # ties to even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7
        self.assertEqual(mixprec.cast(np.float32([1 + 2**-8, 1 + 3 * 2**-8]), "bf16").tolist(),
                         [0x3F80, 0x3F82])

    def test_shapes_and_dtypes(self):
        x = np.arange(12, dtype=np.float32).reshape(3, 4)
        for fmt, dt in [("bf16", np.uint16), ("f16", np.uint16), ("e4m3", np.uint8),
                        ("e5m2", np.uint8), ("e2m1", np.uint8), ("tf32", np.uint32),
                        ("f32", np.uint32)]:
            out = mixprec.cast(x, fmt)
            self.assertEqual(out.shape, (3, 4), fmt)
            self.assertEqual(out.dtype, dt, fmt)
        # non-contiguous input
        self.assertEqual(mixprec.cast(x.T, "bf16").shape, (4, 3))
        self.assertEqual(mixprec.cast(x[:, ::2], "f16").tolist(),
                         mixprec.cast(np.ascontiguousarray(x[:, ::2]), "f16").tolist())

    def test_toward_zero(self):
        x = np.float32([1 + 3 * 2**-9, -(1 + 3 * 2**-9), 1e6])
        self.assertEqual(mixprec.cast(x, "bf16", rounding="rtz").tolist()[:2], [0x3F80, 0xBF80])
        # toward zero a finite value never overflows (IEEE): 1e6 -> e4m3 max 448
        self.assertEqual(mixprec.cast(x[2:], "e4m3", rounding="rtz").tolist(), [0x7E])
        self.assertEqual(mixprec.cast(x[2:], "e4m3").tolist(), [0x7F])  # NaN, no inf

    def test_saturate_and_conventions(self):
        x = np.float32([1e6, -np.inf])
        self.assertEqual(mixprec.cast(x, "e5m2").tolist(), [0x7C, 0xFC])
        self.assertEqual(mixprec.cast(x, "e5m2", saturate=True).tolist(), [0x7B, 0xFB])
        # ml_dtypes' convention keeps inf under saturation
        self.assertEqual(mixprec.cast(x, "e5m2", saturate=True, overflow="ml_dtypes").tolist(),
                         [0x7B, 0xFC])

    def test_stochastic(self):
        x = np.full(100000, 1 + 2**-9, np.float32)  # a quarter of the way from 1 to 1 + 2^-7
        a = mixprec.cast(x, "bf16", rounding="stochastic", seed=7)
        b = mixprec.cast(x, "bf16", rounding="stochastic", seed=7)
        c = mixprec.cast(x, "bf16", rounding="stochastic", seed=8)
        np.testing.assert_array_equal(a, b)
        self.assertFalse(np.array_equal(a, c))
        self.assertEqual(set(a.tolist()), {0x3F80, 0x3F81})
        self.assertAlmostEqual(float(np.mean(a == 0x3F81)), 0.25, delta=0.01)
        # element i draws Philox word index_base + i: a shifted call gives the shifted bits
        tail = mixprec.cast(x[10:], "bf16", rounding="stochastic", seed=7, index_base=10)
        np.testing.assert_array_equal(tail, a[10:])
        # from f64 the same words are drawn
        d = mixprec.cast(x.astype(np.float64), "bf16", rounding="stochastic", seed=7)
        np.testing.assert_array_equal(a, d)

    def test_f64_single_rounding(self):
        # 1 + 2^-8 + 2^-40: f32 first would make it the tie 1 + 2^-8 (-> 1.0); once: up
        v = np.float64(1 + 2**-8 + 2**-40)
        self.assertEqual(mixprec.cast(np.array([v]), "bf16").tolist(), [0x3F81])
        self.assertEqual(mixprec.cast(np.array([v], np.float32), "bf16").tolist(), [0x3F80])
        # Python lists and ints go through f64
        self.assertEqual(mixprec.cast([1, 2, 16777217], "f32").view(np.float32).tolist(),
                         [1.0, 2.0, 16777216.0])
        self.assertEqual(mixprec.cast(np.float64([0.1]), "tf32").tolist(),
                         mixprec.cast(np.float32([0.1]), "tf32").tolist())
        self.assertEqual(mixprec.cast(np.float64([5.0, 7.0]), "e2m1").tolist(), [0x6, 0x7])

    def test_tf32_and_e2m1(self):
        x = np.float32([1 + 2**-11, 1 + 3 * 2**-11])
        self.assertEqual(mixprec.decode(mixprec.cast(x, "tf32"), "tf32").tolist(),
                         [1.0, 1 + 2**-9])
        vals = np.float32([0, 0.5, 1, 1.5, 2, 3, 4, 6, 100, -0.25])
        self.assertEqual(mixprec.decode(mixprec.cast(vals, "e2m1"), "e2m1").tolist(),
                         [0, 0.5, 1, 1.5, 2, 3, 4, 6, 6, -0.0])

    def test_e8m0_roundings(self):
        x = np.float32([1.0, 1.5, 3.0, 0.75])
        self.assertEqual(mixprec.cast(x, "e8m0", rounding="floor").tolist(), [127, 127, 128, 126])
        self.assertEqual(mixprec.cast(x, "e8m0", rounding="ceil").tolist(), [127, 128, 129, 127])
        self.assertEqual(mixprec.cast(x, "e8m0", rounding="ml_dtypes").tolist(),
                         [127, 128, 129, 127])
        with self.assertRaisesRegex(mixprec.Error, "e8m0 rounds by floor"):
            mixprec.cast(x, "e8m0")

    def test_errors_name_the_input(self):
        with self.assertRaises(mixprec.Error) as e:
            mixprec.cast(np.float32([1]), "bf17")
        self.assertIsInstance(e.exception, ValueError)
        self.assertIn("unknown format 'bf17'", str(e.exception))
        expected = cli_error("dtype", "cast", "1", "--to", "bf17")
        if expected is not None:
            self.assertEqual(str(e.exception), expected)
        with self.assertRaisesRegex(mixprec.Error, "not a narrowing target"):
            mixprec.cast(np.float32([1]), "i32")
        with self.assertRaisesRegex(mixprec.Error, "rounding"):
            mixprec.cast(np.float32([1]), "bf16", rounding="up")
        with self.assertRaisesRegex(mixprec.Error, "not a 16-bit bf16 pattern"):
            mixprec.decode(np.array([70000]), "bf16")
        with self.assertRaisesRegex(mixprec.Error, "integer array"):
            mixprec.decode(np.float32([1]), "bf16")


class Decode(unittest.TestCase):
    def test_round_trip_every_encoding(self):
        for fmt, bits in [("bf16", 16), ("f16", 16), ("e4m3", 8), ("e5m2", 8)]:
            enc = np.arange(1 << bits, dtype=np.uint16 if bits == 16 else np.uint8)
            vals = mixprec.decode(enc, fmt)
            self.assertEqual(vals.dtype, np.float32)
            back = mixprec.cast(vals, fmt)
            finite = ~np.isnan(vals)
            np.testing.assert_array_equal(back[finite], enc[finite], fmt)

    def test_input_widths(self):
        # int8 views of fp8 (as torch hands them over) and wide ints in range
        self.assertEqual(mixprec.decode(np.int8([-1, 0x38]), "e4m3")[1], 1.0)
        self.assertEqual(mixprec.decode(np.int64([0x3F80]), "bf16").tolist(), [1.0])
        self.assertEqual(mixprec.decode(np.uint8([0x7F, 0x80]), "e8m0").tolist(), [1.0, 2.0])

    def test_isa(self):
        self.assertIn(mixprec.isa(), ["avx2", "scalar"])


if __name__ == "__main__":
    unittest.main()
