#!/work/venv-peers/bin/python
"""Peer fixtures for mixprec's te_nvfp4 cast and GEMM: Transformer Engine's own NVFP4 reference
quantizer and GEMM (transformer_engine/pytorch/custom_recipes/reference_nvfp4.py, which TE's
tests hold its CUDA kernels to bit for bit), run on the CPU.

    python tests/reference/make_nvfp4_fixtures.py           # writes fixtures/nvfp4/te.safetensors
    python tests/reference/make_nvfp4_fixtures.py --check   # writes nothing; exit 1 on a change

Needs torch and TE's pure-Python wheel in a venv outside the repository:
`/work/venv-peers/bin/pip install torch safetensors numpy && /work/venv-peers/bin/pip install
--no-deps transformer_engine==2.20.2`. That wheel's framework package cannot import without
TE's CUDA extension, so this script loads the reference module's files by path, with stand-ins
for the two base classes it subclasses (Quantizer, QuantizedTensorStorage) and nothing else.
Made with torch 2.15.0 and transformer_engine 2.20.2 (versions also in `__metadata__`).
tests/reference/nvfp4_fixture_test.cpp reads the file.

fixtures/nvfp4/te.safetensors (x [64, 128], w [48, 128], dy [64, 48]: bf16 values stored as
F32, rows and 16-blocks of different magnitudes, no -0.0, one outlier):
* `x`, `w`, `dy`: the inputs.
* `x.1x16.{data,scale,amax}`: NVFP4QuantizerRef (1x16, no RHT) of x, rowwise: data U8 [64, 64]
  packed two E2M1 a byte (element 2i low nibble), scale U8 [64, 8] E4M3 bits, amax F32 [1].
* `w.16x16.{data,scale,amax}`: w with 16x16 blocks (TE's weight quantizer): scale [48, 8], one
  row per row of w (TE repeats a 16x16 block's scale over its 16 rows).
* `x.t_rht.{data,scale,amax}`, `dy.t_rht.{...}`: the columnwise casts with the RHT (TE's input
  and grad-output quantizers): x^T [128, 64] and dy^T [48, 64], each 16 along tokens
  transformed by TE's signed Hadamard matrix, amax after the transform.
* `fprop` F32 [64, 48]: TE's qgemm of x.1x16 and w.16x16 (y = x·w^T, alpha from the amaxes).
* `wgrad` F32 [48, 128]: TE's qgemm of dy.t_rht and x.t_rht (dw = dy^T·x, GEMMType.WGRAD).
"""

import argparse
import enum
import importlib.util
import os
import sys
import types

import numpy as np
import torch

import fixture_files

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures", "nvfp4", "te.safetensors")
TE_VERSION = "2.20.2"


def load_te_reference():
    """reference_nvfp4 and the module it calls, from the installed wheel's files."""
    import importlib.metadata as md
    dist = md.distribution("transformer_engine")
    if dist.version != TE_VERSION:
        sys.exit(f"transformer_engine {dist.version} installed; the fixtures were made with {TE_VERSION}")
    root = os.path.join(str(dist.locate_file("")), "transformer_engine", "pytorch", "custom_recipes")

    class Quantizer:  # the attributes reference_nvfp4 reads of TE's base class
        def __init__(self, rowwise=True, columnwise=True):
            self.rowwise_usage, self.columnwise_usage = rowwise, columnwise

    class QuantizedTensorStorage:
        pass

    def package(name, path=None):
        m = types.ModuleType(name)
        m.__path__ = [path] if path else []
        sys.modules[name] = m
        return m

    package("transformer_engine")
    package("transformer_engine.pytorch")
    package("transformer_engine.pytorch.tensor")
    qt = package("transformer_engine.pytorch.quantized_tensor")
    qt.Quantizer, qt.QuantizedTensorStorage = Quantizer, QuantizedTensorStorage
    package("transformer_engine.pytorch.tensor.utils").is_custom = lambda *a, **k: True
    package("transformer_engine.pytorch.custom_recipes", root)
    mods = {}
    for name in ("reference_utils", "gemm", "reference_nvfp4"):
        full = f"transformer_engine.pytorch.custom_recipes.{name}"
        spec = importlib.util.spec_from_file_location(full, os.path.join(root, name + ".py"))
        mods[name] = importlib.util.module_from_spec(spec)
        sys.modules[full] = mods[name]
        spec.loader.exec_module(mods[name])
    return mods


def varied(g, rows, cols):
    x = g.standard_normal((rows, cols))
    x *= np.exp2(3 * ((np.arange(cols) // 16) % 4))[None, :] * np.exp2(-(np.arange(rows) % 5))[:, None]
    x[1, 3] = 3e3
    x[x == 0] = 1.0  # no -0.0: TE's reference maps it to +0, the hardware cast (and mixprec) to -0
    return torch.from_numpy(x).to(torch.bfloat16)


def raw(t):
    t = t.contiguous()
    if t.dtype == torch.float8_e4m3fn:
        t = t.view(torch.uint8)
    names = {torch.uint8: "U8", torch.float32: "F32"}
    return names[t.dtype], tuple(t.shape), t.numpy().tobytes()


def build():
    te = load_te_reference()
    ref, utils, gemm = te["reference_nvfp4"], te["reference_utils"], te["gemm"]
    g = np.random.default_rng(41)
    x, w, dy = varied(g, 64, 128), varied(g, 48, 128), varied(g, 64, 48)
    t = {"x": x.float(), "w": w.float(), "dy": dy.float()}

    def quantizer(tile, rht):
        return ref.NVFP4QuantizerRef(dtype=utils.Fp4Formats.E2M1, quant_tile_shape=tile,
                                     with_rht=rht, rowwise=True, columnwise=True)

    qx = quantizer((1, 16), True).quantize(x)      # TE's input quantizer: RHT for columnwise
    qw = quantizer((16, 16), False).quantize(w)    # its weight quantizer: 16x16, no RHT
    qdy = quantizer((1, 16), True).quantize(dy)    # its grad quantizer (stochastic rounding off)
    t["x.1x16.data"], t["x.1x16.scale"], t["x.1x16.amax"] = qx.data, qx.scale, qx.global_amax_row
    t["w.16x16.data"], t["w.16x16.scale"], t["w.16x16.amax"] = qw.data, qw.scale, qw.global_amax_row
    t["x.t_rht.data"], t["x.t_rht.scale"], t["x.t_rht.amax"] = qx.data_t, qx.scale_t, qx.global_amax_col
    t["dy.t_rht.data"], t["dy.t_rht.scale"], t["dy.t_rht.amax"] = qdy.data_t, qdy.scale_t, qdy.global_amax_col
    q = quantizer((1, 16), False)
    t["fprop"] = q.qgemm(qx.data, qw.data, None, torch.float32, qx.scale, qw.scale,
                         gemm_type=gemm.GEMMType.FPROP, qresult_x=qx, qresult_w=qw)
    t["wgrad"] = q.qgemm(qdy.data_t, qx.data_t, None, torch.float32, qdy.scale_t, qx.scale_t,
                         gemm_type=gemm.GEMMType.WGRAD, qresult_x=qdy, qresult_w=qx)
    meta = {"torch": torch.__version__, "transformer_engine": TE_VERSION,
            "generator": "tests/reference/make_nvfp4_fixtures.py"}
    return {k: raw(v) for k, v in t.items()}, meta


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    entries, meta = build()
    changed = fixture_files.write_fixture(OUT, fixture_files.safetensors_bytes(entries, meta), args.check)
    sys.exit(1 if changed and args.check else 0)


if __name__ == "__main__":
    main()
