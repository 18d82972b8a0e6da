"""safetensors files from Python."""

import pathlib
import tempfile
import unittest

import numpy as np

import mixprec
from support import SOURCE_DIR


class Safetensors(unittest.TestCase):
    def test_round_trip(self):
        with tempfile.TemporaryDirectory() as d:
            path = pathlib.Path(d) / "w.safetensors"
            w = mixprec.Tensor.from_numpy(np.float32([[1, 2], [3, 4]])).to("bf16")
            mixprec.save_safetensors(path, {"w": w, "b": np.int64([7, 8]),
                                            "mask": np.array([True, False])},
                                     metadata={"format": "pt"})
            loaded = mixprec.load_safetensors(path)
            self.assertEqual(sorted(loaded), ["b", "mask", "w"])
            self.assertEqual(loaded["w"].dtype, "bf16")
            np.testing.assert_array_equal(loaded["w"].to("f32").numpy(), [[1, 2], [3, 4]])
            np.testing.assert_array_equal(loaded["b"].numpy(), [7, 8])
            tensors, meta = mixprec.load_safetensors(str(path), metadata=True)
            self.assertEqual(meta, {"format": "pt"})
            self.assertEqual(tensors["mask"].numpy().tolist(), [True, False])

    def test_reads_the_reference_fixtures(self):
        path = SOURCE_DIR / "tests/reference/fixtures/add_bf16.safetensors"
        if not path.exists():
            self.skipTest(f"{path} absent")
        tensors = mixprec.load_safetensors(path)
        self.assertTrue(tensors)
        for t in tensors.values():
            self.assertEqual(t.numpy().shape, t.shape)

    def test_errors(self):
        with tempfile.TemporaryDirectory() as d:
            bad = pathlib.Path(d) / "bad.safetensors"
            bad.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all")
            with self.assertRaises(mixprec.Error) as e:
                mixprec.load_safetensors(bad)
            self.assertIn(str(bad), str(e.exception))
            missing = pathlib.Path(d) / "missing.safetensors"
            with self.assertRaisesRegex(mixprec.Error, "missing.safetensors"):
                mixprec.load_safetensors(missing)


if __name__ == "__main__":
    unittest.main()
