"""mixprec against ml_dtypes: every encoding of bf16, f16, e4m3, e5m2 (and e2m1, e8m0)
decoded, and a grid of f32 values cast, compared with fixtures/ml_dtypes.npz (made by
make_ml_dtypes_fixtures.py from ml_dtypes 0.6.0) everywhere and with ml_dtypes itself where it
is importable.

The comparison is bit for bit, except that NaNs compare as NaN with the same sign, because the
NaN payloads differ by design (README, "NaN encodings"): mixprec keeps a NaN's top payload bits
with the quiet bit set in bf16 and f16 (as x86's F16C and VCVTNEPS2BF16) and gives the fp8
formats their all-ones NaN, where ml_dtypes narrows every NaN to bf16 as 0x7FC0 and to e5m2 as
0x7E, NumPy keeps a signalling NaN's f16 payload without the quiet bit, and NumPy widens a
signalling f16 NaN without setting it. Every non-NaN input and encoding agrees bit for bit."""

import pathlib
import unittest

import numpy as np

import mixprec

FIXTURE = pathlib.Path(__file__).resolve().parent / "fixtures" / "ml_dtypes.npz"
DECODE_FORMATS = ["bf16", "f16", "f8_e4m3fn", "f8_e5m2", "f4_e2m1fn", "f8_e8m0fnu"]
CAST_FORMATS = ["bf16", "f16", "f8_e4m3fn", "f8_e5m2"]

try:
    import ml_dtypes
except ImportError:
    ml_dtypes = None

ML_TYPES = {}
if ml_dtypes is not None:
    ML_TYPES = {"bf16": ml_dtypes.bfloat16, "f16": np.float16,
                "f8_e4m3fn": ml_dtypes.float8_e4m3fn, "f8_e5m2": ml_dtypes.float8_e5m2,
                "f4_e2m1fn": ml_dtypes.float4_e2m1fn, "f8_e8m0fnu": ml_dtypes.float8_e8m0fnu}
BITS = {"bf16": 16, "f16": 16, "f8_e4m3fn": 8, "f8_e5m2": 8, "f4_e2m1fn": 4, "f8_e8m0fnu": 8}


def storage(fmt):
    return np.uint16 if BITS[fmt] == 16 else np.uint8


def mismatches_f32(ours, theirs):
    """Indices where two f32 bit arrays differ, NaNs compared by NaN-ness and sign."""
    a, b = ours.view(np.float32), theirs.view(np.float32)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    sign_a, sign_b = (ours >> 31) == 1, (theirs >> 31) == 1
    same = np.where(nan_a | nan_b, nan_a & nan_b & (sign_a == sign_b), ours == theirs)
    return np.flatnonzero(~same)


def mismatches_enc(ours, theirs, fmt):
    """Indices where two encoding arrays differ, NaN encodings compared by sign."""
    nan_a = np.isnan(mixprec.decode(ours, fmt))
    nan_b = np.isnan(mixprec.decode(theirs, fmt))
    sign = np.uint32(1 << (BITS[fmt] - 1))
    sa, sb = (ours & sign) != 0, (theirs & sign) != 0
    same = np.where(nan_a | nan_b, nan_a & nan_b & (sa == sb), ours == theirs)
    return np.flatnonzero(~same)


class Fixture(unittest.TestCase):
    """Against the committed file: runs everywhere."""

    @classmethod
    def setUpClass(cls):
        cls.data = np.load(FIXTURE)

    def test_decode_every_encoding(self):
        for fmt in DECODE_FORMATS:
            with self.subTest(fmt=fmt):
                enc = np.arange(1 << BITS[fmt], dtype=storage(fmt))
                ours = mixprec.decode(enc, fmt).view(np.uint32)
                bad = mismatches_f32(ours, self.data[f"decode_{fmt}"])
                self.assertEqual(len(bad), 0, f"{fmt}: encodings {enc[bad[:8]]} differ")

    def test_cast_grid(self):
        grid = self.data["grid"].view(np.float32)
        self.assertGreater(len(grid), 1 << 16)
        for fmt in CAST_FORMATS:
            with self.subTest(fmt=fmt):
                ours = mixprec.cast(grid, fmt)
                bad = mismatches_enc(ours, self.data[f"cast_{fmt}"], fmt)
                self.assertEqual(len(bad), 0,
                                 f"{fmt}: f32 inputs {self.data['grid'][bad[:8]]} differ")

    def test_cast_grid_e8m0(self):
        ours = mixprec.cast(self.data["grid"].view(np.float32), "e8m0", rounding="ml_dtypes")
        bad = np.flatnonzero(ours != self.data["cast_f8_e8m0fnu"])
        self.assertEqual(len(bad), 0, f"e8m0: f32 inputs {self.data['grid'][bad[:8]]} differ")

    def test_nan_bits_where_they_differ(self):
        """Outside NaN payloads the decodings are bit-identical; list what differs."""
        enc = np.arange(1 << 16, dtype=np.uint16)
        ours = mixprec.decode(enc, "f16").view(np.uint32)
        theirs = self.data["decode_f16"]
        differ = np.flatnonzero(ours != theirs)
        # only signalling NaNs (exponent all ones, quiet bit clear, payload non-zero)
        self.assertTrue(np.all((enc[differ] & 0x7C00) == 0x7C00))
        self.assertTrue(np.all((enc[differ] & 0x0200) == 0))
        self.assertTrue(np.all(ours[differ] == theirs[differ] | 0x00400000))


@unittest.skipIf(ml_dtypes is None, "ml_dtypes is not importable (the fixture test runs)")
class Live(unittest.TestCase):
    """Against the installed ml_dtypes: the same, plus a million random f32 values."""

    def test_decode_every_encoding(self):
        for fmt in DECODE_FORMATS:
            with self.subTest(fmt=fmt):
                enc = np.arange(1 << BITS[fmt], dtype=storage(fmt))
                with np.errstate(invalid="ignore"):
                    theirs = enc.view(ML_TYPES[fmt]).astype(np.float32).view(np.uint32)
                bad = mismatches_f32(mixprec.decode(enc, fmt).view(np.uint32), theirs)
                self.assertEqual(len(bad), 0, f"{fmt}: encodings {enc[bad[:8]]} differ")

    def test_cast_random_and_grid(self):
        rng = np.random.default_rng(1)
        x = np.concatenate([
            rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint64).astype(np.uint32),
            np.load(FIXTURE)["grid"]]).view(np.float32)
        for fmt in CAST_FORMATS:
            with self.subTest(fmt=fmt):
                with np.errstate(over="ignore", invalid="ignore"):
                    theirs = x.astype(ML_TYPES[fmt]).view(storage(fmt))
                bad = mismatches_enc(mixprec.cast(x, fmt), theirs, fmt)
                self.assertEqual(len(bad), 0, f"{fmt}: inputs {x.view(np.uint32)[bad[:8]]}")

    def test_cast_e8m0(self):
        rng = np.random.default_rng(2)
        x = rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint64).astype(np.uint32).view(np.float32)
        with np.errstate(over="ignore", invalid="ignore"):
            theirs = x.astype(ml_dtypes.float8_e8m0fnu).view(np.uint8)
        ours = mixprec.cast(x, "e8m0", rounding="ml_dtypes")
        bad = np.flatnonzero(ours != theirs)
        self.assertEqual(len(bad), 0, f"e8m0: inputs {x.view(np.uint32)[bad[:8]]}")

    def test_tensor_numpy_is_ml_dtypes(self):
        t = mixprec.Tensor.from_numpy(np.float32([1.5, -2.0])).to("bf16")
        self.assertEqual(t.numpy().dtype, np.dtype(ml_dtypes.bfloat16))
        back = mixprec.Tensor.from_numpy(t.numpy())
        self.assertEqual(back.dtype, "bf16")


if __name__ == "__main__":
    unittest.main()
