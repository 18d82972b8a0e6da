#!/work/venv-peers/bin/python
"""Peer fixtures for mixprec's FP4 E2M1 and E8M0 numerics: ml_dtypes and torchao.

    python tests/reference/make_fp4_fixtures.py           # writes fixtures/fp4/
    python tests/reference/make_fp4_fixtures.py --check   # writes nothing; exit 1 on a change

Runs with a Python that has ml_dtypes, numpy, torch and torchao from PyPI, kept outside the
repository (e.g. /work/venv-peers, see make_fp8_fixtures.py). Made with ml_dtypes 0.6.0,
numpy 2.4.6, torch 2.15.0 (CPU) and torchao 0.18.0; the versions are also written into each
file's `__metadata__`. About 90 seconds: every one of the 2^32 f32 patterns is cast twice.
tests/unit/numerics/fp4_test.cpp, e8m0_test.cpp and fp4_exhaustive_test.cpp read the files.

fixtures/fp4/ml_dtypes.safetensors (ml_dtypes' numpy casts):
* `e2m1.decode` F32 [16], `e8m0.decode` F32 [256]: every encoding as ml_dtypes widens it.
* `e2m1.from_bf16` U8 [65536]: ml_dtypes.bfloat16 -> float4_e2m1fn of every bf16 pattern
  (index = the bf16 bits; one nibble per byte, as ml_dtypes stores it).
* `e2m1.from_f32.run_start` I64 [k] and `.run_value` U8 [k]: np.float32 -> float4_e2m1fn of
  all 2^32 f32 patterns, run-length coded over the bit patterns in increasing order: the
  input u32 bits x give run_value[j] for the last j with run_start[j] <= x.
* `e8m0.from_f32.run_start` / `.run_value`: the same for np.float32 -> float8_e8m0fnu.
* `e2m1.from_f64.in` F64 [n] and `.out` U8 [n]: np.float64 -> float4_e2m1fn at every rounding
  boundary (the midpoints between neighbours, +-0.25 past 6, both signs) and 1 to 3 f64 ulps
  either side, plus zeros, tiny and huge values, infinities and NaNs of both signs.
  ml_dtypes casts an f64 through f32 (two roundings), so next to a midpoint its result is
  not the single rounding mixprec's f64 cast gives; fp4_test checks both facts.

fixtures/fp4/torchao.safetensors (torchao.prototype.mx_formats.kernels, CPU):
* `pack.nibbles` U8 [1024] (seeded random nibbles) and `pack.packed` U8 [512] =
  pack_uint4(nibbles), the packing of torch.float4_e2m1fn_x2 in NVFP4Tensor and MXTensor.
* `cast.in` F32 [n] and `cast.out` U8 [n]: f32_to_f4_unpacked (torchao's own bit-twiddled
  RNE cast) of the boundary values above rounded to f32, random values, +-inf; NaN is left
  out (torchao documents no NaN handling: NaN comes out as 0x3, -NaN as 0xB).
* `nvfp4.in` F32 [8, 64]: rows of normal values times 2^u (u uniform in +-6), a zero row and
  rows with a zero block, tiny values and one large outlier; torchao.prototype.mx_formats.
  nvfp4_tensor.nvfp4_quantize (block 16) of it with one level of scaling
  (`nvfp4.one_level.scale` U8 [8, 4], the E4M3 bits, and `.data` U8 [8, 32], pack_uint4) and
  with two, under `nvfp4.two_level.per_tensor_scale` F32 [1] = per_tensor_amax_to_scale of
  the tensor's amax (`nvfp4.two_level.scale`, `.data`).

`--only ml_dtypes|torchao` rebuilds one file (the ml_dtypes one takes the 90 seconds).
"""

import argparse
import os
import sys

import fixture_files
import ml_dtypes
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures", "fp4")
F4, E8, BF16 = ml_dtypes.float4_e2m1fn, ml_dtypes.float8_e8m0fnu, ml_dtypes.bfloat16
E2M1_POSITIVE = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
ST_DTYPES = {np.dtype(np.float32): "F32", np.dtype(np.float64): "F64",
             np.dtype(np.int64): "I64", np.dtype(np.uint8): "U8"}


def versions():
    v = {"ml_dtypes": ml_dtypes.__version__, "numpy": np.__version__,
         "generator": "tests/reference/make_fp4_fixtures.py"}
    return v


def cast(a, dtype):
    with np.errstate(all="ignore"):
        return a.astype(dtype)


def f32_runs(dtype, chunk=1 << 24):
    """Run-length code of u8(cast(f32 bits x)) over x = 0 .. 2^32-1."""
    starts, values, prev = [], [], None
    for c in range(0, 1 << 32, chunk):
        bits = np.arange(c, c + chunk, dtype=np.uint64).astype(np.uint32)
        r = cast(bits.view(np.float32), dtype).view(np.uint8)
        if prev is None or r[0] != prev:
            starts.append(c)
            values.append(r[0])
        for i in np.flatnonzero(r[1:] != r[:-1]) + 1:
            starts.append(c + int(i))
            values.append(r[i])
        prev = r[-1]
    return np.array(starts, dtype=np.int64), np.array(values, dtype=np.uint8)


def f64_probes():
    """Rounding boundaries of E2M1 and f64 neighbours, both signs, and special values."""
    pos = E2M1_POSITIVE
    edges = [(a + b) / 2 for a, b in zip(pos, pos[1:])] + [6.25, 6.5, 7.0, 8.0]
    out = []
    for m in edges:
        x = np.float64(m)
        near = [x]
        for _ in range(3):
            near = [np.nextafter(near[0], -np.inf)] + near + [np.nextafter(near[-1], np.inf)]
        out += near
    out += pos + [1e-300, 5e-324, 0.1, 2.9, 5.9, 1e300, np.inf, np.nan]
    out = np.array(out, dtype=np.float64)
    return np.concatenate([out, -out])


def build_ml_dtypes():
    t = {}
    t["e2m1.decode"] = np.arange(16, dtype=np.uint8).view(F4).astype(np.float32)
    t["e8m0.decode"] = np.arange(256, dtype=np.uint8).view(E8).astype(np.float32)
    t["e2m1.from_bf16"] = cast(np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(BF16),
                               F4).view(np.uint8)
    for name, dtype in (("e2m1", F4), ("e8m0", E8)):
        starts, values = f32_runs(dtype)
        t[f"{name}.from_f32.run_start"], t[f"{name}.from_f32.run_value"] = starts, values
        print(f"{name}: {len(starts)} runs over the 2^32 f32 patterns")
    probes = f64_probes()
    t["e2m1.from_f64.in"], t["e2m1.from_f64.out"] = probes, cast(probes, F4).view(np.uint8)
    return t, versions()


def build_torchao():
    import torch
    import torchao
    from torchao.prototype.mx_formats.kernels import f32_to_f4_unpacked, pack_uint4

    g = np.random.default_rng(33)
    t = {}
    nibbles = g.integers(0, 16, size=1024, dtype=np.uint8)
    t["pack.nibbles"] = nibbles
    t["pack.packed"] = pack_uint4(torch.from_numpy(nibbles)).numpy()
    boundary = f64_probes()
    boundary = boundary[np.isfinite(boundary) | np.isinf(boundary)]
    boundary = boundary[~np.isnan(boundary)]
    spread = g.standard_normal(512) * np.exp2(g.uniform(-4, 4, size=512))
    x = np.concatenate([cast(boundary, np.float32), spread.astype(np.float32)])
    t["cast.in"] = x
    t["cast.out"] = f32_to_f4_unpacked(torch.from_numpy(x)).numpy()
    t.update(nvfp4_cases(g))
    meta = versions()
    meta.update({"torch": torch.__version__, "torchao": torchao.__version__})
    return t, meta


def nvfp4_cases(g):
    import torch
    from torchao.prototype.mx_formats.nvfp4_tensor import (nvfp4_quantize,
                                                           per_tensor_amax_to_scale)

    x = g.standard_normal((8, 64)) * np.exp2(g.uniform(-6, 6, size=(8, 1)))
    x *= np.exp2(g.uniform(-2, 2, size=(1, 64)))
    x[2] = 0  # a zero row: every block scale clamps up to 2^-6
    x[3, 16:32] = 0  # a zero block among others
    x[4] *= 1e-6  # scales below E4M3's smallest normal
    x[5, 7] = 3000.0  # an outlier: the tensor amax, and a block scale at 448 under two levels
    x = torch.from_numpy(x.astype(np.float32))
    t = {"nvfp4.in": x.numpy()}
    scale, data = nvfp4_quantize(x, block_size=16)
    t["nvfp4.one_level.scale"] = scale.view(torch.uint8).numpy()
    t["nvfp4.one_level.data"] = data.numpy()
    pts = per_tensor_amax_to_scale(torch.amax(torch.abs(x)))
    scale, data = nvfp4_quantize(x, block_size=16, per_tensor_scale=pts)
    t["nvfp4.two_level.per_tensor_scale"] = pts.reshape(1).numpy()
    t["nvfp4.two_level.scale"] = scale.view(torch.uint8).numpy()
    t["nvfp4.two_level.data"] = data.numpy()
    return t


def safetensors_bytes(tensors, metadata):
    entries = {}
    for name, a in tensors.items():
        a = np.ascontiguousarray(a)
        entries[name] = (ST_DTYPES[a.dtype], a.shape, a.astype(a.dtype.newbyteorder("<")).tobytes())
    return fixture_files.safetensors_bytes(entries, metadata)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 on a change")
    ap.add_argument("--only", choices=("ml_dtypes", "torchao"), help="build one file only")
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    changed = []
    for name, build in (("ml_dtypes", build_ml_dtypes), ("torchao", build_torchao)):
        if args.only and name != args.only:
            continue
        path = os.path.join(OUT, name + ".safetensors")
        if fixture_files.write_fixture(path, safetensors_bytes(*build()), args.check):
            changed.append(path)
    if args.check and changed:
        sys.exit("would change: " + ", ".join(changed))


if __name__ == "__main__":
    main()
