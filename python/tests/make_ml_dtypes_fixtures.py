#!/work/venv-peers/bin/python
"""ml_dtypes' decodings and casts, for python/tests/test_ml_dtypes_agreement.py.

    python/tests/make_ml_dtypes_fixtures.py          # writes fixtures/ml_dtypes.npz
    python/tests/make_ml_dtypes_fixtures.py --check  # writes nothing; exit 1 on a change

Runs with a Python that has ml_dtypes and numpy from PyPI, kept outside the repository (e.g.
`python3 -m venv /work/venv-peers && /work/venv-peers/bin/pip install ml_dtypes numpy`).
Made with ml_dtypes 0.6.0 and numpy 2.4.6 (Python 3.11.7); the versions are also stored in
the file (`generator`). The test compares mixprec against the file everywhere and, where
ml_dtypes is importable, against ml_dtypes itself.

fixtures/ml_dtypes.npz holds, for each of bf16, f16, f8_e4m3fn, f8_e5m2 (and f4_e2m1fn,
f8_e8m0fnu):
* decode_<fmt>: uint32 [2^bits], the f32 bit pattern ml_dtypes widens every encoding to;
* cast_<fmt>: the encoding ml_dtypes rounds each `grid` value to (np.float32 -> type, its
  astype: round to nearest even, no saturation), uint16 or uint8, for the first four, and
  cast_f8_e8m0fnu (ml_dtypes' E8M0 rounding: nearest power of two, ties up);
and `grid`: uint32, the f32 inputs (see make_grid): every bf16 rounding midpoint and its two
f32 neighbours' worth of ties, every f16 and fp8 midpoint (both signs) with the values one f32 ulp
either side (positive), each format's overflow threshold region, f32 subnormals and specials, and random
f32 bit patterns.
"""

import argparse
import io
import pathlib
import sys

import ml_dtypes
import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
OUT = HERE / "fixtures" / "ml_dtypes.npz"

FORMATS = {
    "bf16": (ml_dtypes.bfloat16, 16),
    "f16": (np.float16, 16),
    "f8_e4m3fn": (ml_dtypes.float8_e4m3fn, 8),
    "f8_e5m2": (ml_dtypes.float8_e5m2, 8),
    "f4_e2m1fn": (ml_dtypes.float4_e2m1fn, 4),
    "f8_e8m0fnu": (ml_dtypes.float8_e8m0fnu, 8),
}
CAST_FORMATS = ["bf16", "f16", "f8_e4m3fn", "f8_e5m2"]


def decoded(fmt):
    t, bits = FORMATS[fmt]
    storage = np.uint16 if bits == 16 else np.uint8
    enc = np.arange(1 << bits, dtype=storage)
    return enc.view(t).astype(np.float32).view(np.uint32)


def midpoints_f32(fmt):
    """f32 bit patterns of the midpoints between neighbouring finite values of fmt (both
    signs), and of the positive values one f32 ulp below and above each."""
    t, _ = FORMATS[fmt]
    with np.errstate(invalid="ignore"):
        vals = decoded(fmt).view(np.float32).astype(np.float64)
    vals = np.unique(vals[np.isfinite(vals) & (vals >= 0)])
    mids = (vals[:-1] + vals[1:]) / 2
    assert np.all(mids.astype(np.float32).astype(np.float64) == mids)  # all exact in f32
    m = mids.astype(np.float32).view(np.uint32)
    return np.concatenate([m, m - 1, m + 1, m | np.uint32(0x80000000)])


def overflow_region(fmt):
    """Values around max finite and the first value that rounds past it, both signs."""
    info = ml_dtypes.finfo(FORMATS[fmt][0])
    row_max, eps = float(info.max), float(info.eps)
    edge = np.float32(row_max * (1 + eps / 2))  # the rounding boundary above max
    with np.errstate(over="ignore"):
        around = [np.float32(row_max), edge, np.float32(row_max * 2), np.float32(row_max * 4)]
    bits = np.array(around, dtype=np.float32).view(np.uint32)
    steps = np.arange(-64, 65, dtype=np.int64)
    near = (bits[:, None].astype(np.int64) + steps[None, :]).ravel().astype(np.uint32)
    return np.concatenate([near, near | np.uint32(0x80000000)])


def make_grid():
    rng = np.random.default_rng(20261130)
    parts = [
        # every bf16 midpoint (bf16 bits << 16 | 0x8000: the ties of f32 -> bf16)
        (np.arange(1 << 16, dtype=np.uint32) << 16) | np.uint32(0x8000),
        # and a random eighth of them one f32 ulp either side
        ((rng.integers(0, 1 << 16, 8192, dtype=np.uint32) << 16) | np.uint32(0x7FFF)),
        ((rng.integers(0, 1 << 16, 8192, dtype=np.uint32) << 16) | np.uint32(0x8001)),
        midpoints_f32("f16"),
        midpoints_f32("f8_e4m3fn"),
        midpoints_f32("f8_e5m2"),
    ]
    for fmt in CAST_FORMATS:
        parts.append(overflow_region(fmt))
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1.0, -1.0], np.float32)
    parts.append(specials.view(np.uint32))
    parts.append(np.array([0x7F800001, 0xFF800001, 0x7FC00001, 0x7FBFFFFF, 0xFFFFFFFF,
                           0x7F7FFFFF, 0xFF7FFFFF, 0x00000001, 0x80000001, 0x007FFFFF,
                           0x00800000, 0x80800000], dtype=np.uint32))
    parts.append(rng.integers(0, 1 << 32, 16384, dtype=np.uint64).astype(np.uint32))
    # f32 subnormals and tiny normals
    parts.append(rng.integers(0, 0x01000000, 1024, dtype=np.uint32))
    return np.unique(np.concatenate(parts))


def build():
    grid = make_grid()
    x = grid.view(np.float32)
    arrays = {"grid": grid}
    for fmt in FORMATS:
        arrays[f"decode_{fmt}"] = decoded(fmt)
    with np.errstate(over="ignore", invalid="ignore"):
        for fmt in CAST_FORMATS:
            t, bits = FORMATS[fmt]
            storage = np.uint16 if bits == 16 else np.uint8
            arrays[f"cast_{fmt}"] = x.astype(t).view(storage)
        # E8M0 (the MX scale): ml_dtypes' own rounding (mixprec's rounding="ml_dtypes")
        arrays["cast_f8_e8m0fnu"] = x.astype(ml_dtypes.float8_e8m0fnu).view(np.uint8)
    arrays["generator"] = np.array(
        f"ml_dtypes {ml_dtypes.__version__}, numpy {np.__version__}, "
        f"Python {sys.version.split()[0]}")
    return arrays


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed file")
    args = ap.parse_args()
    arrays = build()
    if args.check:
        old = np.load(OUT)
        changed = [k for k in arrays if k != "generator" and not np.array_equal(old[k], arrays[k])]
        print("unchanged" if not changed else f"changed: {', '.join(changed)}")
        return 1 if changed else 0
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    OUT.write_bytes(buf.getvalue())
    print(f"{OUT}: {len(arrays['grid'])} f32 inputs, {OUT.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
