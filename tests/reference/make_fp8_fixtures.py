#!/work/venv-peers/bin/python
"""Peer fixtures for mixprec's FP8 / MX numerics: torchao and DeepSeek-V3's own code.

    python tests/reference/make_fp8_fixtures.py --deepseek-kernel PATH/inference/kernel.py
    python tests/reference/make_fp8_fixtures.py --deepseek-kernel ... --check   # exit 1 on change

Runs with a Python that has torch, torchao, triton and numpy from PyPI, kept
outside the repository (e.g. `python3 -m venv /work/venv-peers && /work/venv-peers/bin/pip
install torch torchao ml_dtypes safetensors numpy`). Made with torch 2.15.0+cu132 (CPU),
torchao 0.18.0, triton 3.9.0, ml_dtypes 0.6.0, and DeepSeek-V3's inference/kernel.py at
commit 9b4e9788e4a3a731f7567338ed15d3ec549ce03b. The versions are also written into every
file's `__metadata__`. tests/reference/fp8_fixture_test.cpp reads the files.

Writes tests/reference/fixtures/fp8/:

* torchao_linear.safetensors: `Float8Linear` (convert_to_float8_training, emulate=True) of
  a one-Linear module (bias=False, in 256, out 128) on x [2, 32, 256], for the recipes
  tensorwise, rowwise, rowwise_with_gw_hp (Float8LinearConfig.from_recipe_name), with the
  module and inputs in bf16 and in f32. Inputs `x`, `w`, `dy` (BF16; the f32 runs use the
  same values widened, so both runs see the same numbers); outputs `<recipe>.<dtype>.y`,
  `.dx`, `.dw` (torchao's y, x.grad, w.grad). The f32 outputs keep only the first 16 rows of
  each ([8, 128], [8, 256], [8, 256]; every row still depends on the whole computation)
  to keep the files small.
* torchao_quant.safetensors: torchao's own cast of each FP8 operand of the three recipes
  (hp_tensor_to_float8_dynamic with the recipe's dtype, granularity, axis and pow2 flag, as
  Float8Linear's forward / backward call it), stored in mixprec's operand layout [rows,
  contraction]: `<operand>.<spec>.data` (F8_E4M3 / F8_E5M2) and `<operand>.<spec>.scale`
  (F32 [rows or 1, 1], torchao's multiplicative `_scale`); the data keeps the first 32 rows
  (the zero rows among them), the scales all rows. Operands: x, xT, w, wT, dy, dyT
  (T: transposed, so the contraction is the token dim or the output dim), specs
  e4m3_tensor, e5m2_tensor, e4m3_row_pow2, e4m3_tensor_pow2. Also `probe` [16, 256] F32
  (values that are not bf16, rows of chosen amax) under e4m3_tensor, e5m2_tensor, e4m3_row,
  e4m3_row_pow2.
* mx.safetensors: torchao.prototype.mx_formats.mx_tensor.to_mx (e4m3, block 32) of `mx.in`
  (BF16 [16, 256]) and `mx.in_f32` (F32), scale modes FLOOR and RCEIL: `<in>.<mode>.data`
  (F8_E4M3) and `<in>.<mode>.e8m0` (U8, the biased E8M0 exponent; 2^(e-127), 255 = NaN).
* deepseek.safetensors: DeepSeek-V3 kernel.py `act_quant` (block 128, scale_fmt None and
  "ue8m0") on `ds.in` (BF16 [16, 256]) and `ds.in_f32` (F32 [16, 256], rows whose amax/448
  sits next to a power of two): `<in>.<fmt>.y` (F8_E4M3) and `.s` (F32 [16, 2]); and
  `weight_dequant` of `ds.w` (F8_E4M3 [144, 136]) with `ds.w_scale` (F32 [2, 2]) under
  default dtype bf16: `ds.w_dequant` (BF16).

DeepSeek's kernel runs as published (imported from --deepseek-kernel, not copied) under the
Triton interpreter (TRITON_INTERPRET=1) on CPU tensors. triton 3.9.0's interpreter does not
round f32 -> fp8e4nv as the GPU does (runtime/interpreter.py `_convert_float`): the round-up
is OR-ed into the exponent field instead of added (a mantissa carry into an odd exponent
field halves the value), ties round away from zero, and subnormal results are truncated; and
its f32 -> bf16 store conversion truncates. The GPU lowers `.to(tl.float8e4nv)` to
cvt.rn.satfinite (nearest even, saturating) and the bf16 store to cvt.rn.bf16.f32. So the
script replaces those two conversions with torch's RNE (saturating for fp8) casts while the
kernel runs; everything else (amax, clamp, the division, log2/ceil/exp2) is the kernel's own
code as the interpreter runs it. It prints how many bytes the unpatched interpreter gets
differently; the files hold the patched run.

Deterministic: one intra-op thread, inputs drawn in f64 from seeded generators and rounded.
"""

import argparse
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures", "fp8")
os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported

import fixture_files  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

TOKENS, IN, OUT_F = 64, 256, 128
RECIPES = ("tensorwise", "rowwise", "rowwise_with_gw_hp")
F32_ROWS = 8
QUANT_ROWS = 32
E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2


def versions(extra=None):
    import torchao
    import triton

    v = {"torch": torch.__version__, "torchao": torchao.__version__, "triton": triton.__version__,
         "generator": "tests/reference/make_fp8_fixtures.py"}
    try:
        import ml_dtypes

        v["ml_dtypes"] = ml_dtypes.__version__
    except ImportError:
        pass
    v.update(extra or {})
    return v


def spread(rows, cols, seed, row_oct, col_oct):
    """Normal values times 2^u per row and per column (u uniform in ±row_oct / ±col_oct)."""
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(rows, cols, dtype=torch.float64, generator=g)
    r = torch.exp2((torch.rand(rows, 1, dtype=torch.float64, generator=g) * 2 - 1) * row_oct)
    c = torch.exp2((torch.rand(1, cols, dtype=torch.float64, generator=g) * 2 - 1) * col_oct)
    return base * r * c


# ---- torchao Float8Linear --------------------------------------------------------------------

def linear_inputs():
    x = spread(TOKENS, IN, 1, 6, 3)
    x[5] = 0  # an all-zero token: amax 0, torchao's 1e-12 clamp
    w = spread(OUT_F, IN, 2, 4, 2) * 0.05
    dy = spread(TOKENS, OUT_F, 3, 5, 3) * 1e-3
    dy[9] = 0  # a zero token of the gradient
    dy[:, 7] = 0  # and a zero output channel (wgrad's dYᵀ row)
    return (x.to(torch.bfloat16).view(2, TOKENS // 2, IN), w.to(torch.bfloat16),
            dy.to(torch.bfloat16).view(2, TOKENS // 2, OUT_F))


def run_linear(recipe, dtype, x, w, dy):
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    cfg = Float8LinearConfig.from_recipe_name(recipe)
    cfg = type(cfg)(**{**cfg.__dict__, "emulate": True})
    m = torch.nn.Sequential(torch.nn.Linear(IN, OUT_F, bias=False))
    with torch.no_grad():
        m[0].weight.copy_(w.to(torch.float32))
    m = m.to(dtype)
    convert_to_float8_training(m, config=cfg)
    assert type(m[0]).__name__ == "Float8Linear", type(m[0])
    xi = x.to(dtype).clone().requires_grad_(True)
    y = m(xi)
    y.backward(dy.to(dtype))
    return y.detach(), xi.grad.detach(), m[0].weight.grad.detach()


# ---- torchao's cast of each operand ----------------------------------------------------------

def torchao_cast(t, fp8, granularity, axis, pow2):
    """hp_tensor_to_float8_dynamic as Float8Linear calls it: (fp8 data, f32 scale)."""
    from torchao.float8.config import ScalingGranularity
    from torchao.float8.float8_scaling_utils import (get_maybe_axiswise_dim,
                                                     hp_tensor_to_float8_dynamic)
    from torchao.float8.float8_training_tensor import LinearMMConfig

    g = ScalingGranularity.AXISWISE if granularity == "row" else ScalingGranularity.TENSORWISE
    q = hp_tensor_to_float8_dynamic(t, fp8, LinearMMConfig(), scaling_granularity=g,
                                    axiswise_dim=get_maybe_axiswise_dim(axis, g),
                                    round_scales_to_power_of_2=pow2)
    return q._data, q._scale.to(torch.float32)


def ours_layout(data, scale, transposed):
    """torchao's tensor (and keepdim scale) in mixprec's [rows, contraction] layout."""
    if transposed:
        data, scale = data.t(), scale.t()
    rows = data.shape[0]
    scale = scale.reshape(-1, 1) if scale.numel() == rows else scale.reshape(1, 1)
    return data.contiguous(), scale.contiguous()


# (operand, spec) -> (hp tensor as torchao holds it, axiswise dim, transposed to ours?)
# torchao holds x [tokens, in], wT [in, out], dy [tokens, out]. Ours: x [tokens, in] (output
# A), w [out, in] (output B), dy [tokens, out] (grad_input A), wT [in, out] (grad_input B),
# dyT [out, tokens] and xT [in, tokens] (grad_weight A and B).
def operand_table(x2, w, dy2):
    wt = w.t().contiguous()
    return {
        "x": (x2, -1, False), "w": (wt, 0, True), "dy": (dy2, -1, False),
        "wT": (wt, -1, False), "dyT": (dy2, 0, True), "xT": (x2, 0, True),
    }


SPECS = {  # name -> (fp8 dtype, granularity, pow2)
    "e4m3_tensor": (E4M3, "tensor", False), "e5m2_tensor": (E5M2, "tensor", False),
    "e4m3_row_pow2": (E4M3, "row", True), "e4m3_tensor_pow2": (E4M3, "tensor", True),
    "e4m3_row": (E4M3, "row", False),
}
# What each recipe quantizes (Float8LinearConfig.from_recipe_name), deduplicated.
QUANT_CASES = [
    ("x", "e4m3_tensor"), ("w", "e4m3_tensor"), ("dy", "e5m2_tensor"),  # tensorwise
    ("x", "e4m3_row_pow2"), ("w", "e4m3_row_pow2"), ("dy", "e4m3_row_pow2"),  # rowwise
    ("wT", "e4m3_row_pow2"), ("dyT", "e4m3_row_pow2"), ("xT", "e4m3_row_pow2"),
    ("wT", "e4m3_tensor_pow2"),  # rowwise_with_gw_hp's grad_input weight
    ("wT", "e4m3_tensor"), ("dyT", "e5m2_tensor"), ("xT", "e4m3_tensor"),  # tensorwise, first rows
]


def probe_input():
    """F32 rows that are not bf16 values, with chosen amax: plain, tiny, huge, zero, and amax
    whose f64 quotient 448 / amax rounds to the f32 just below a power of two (where
    torchao's exp2(floor(log2(scale))) and an exact floor may part)."""
    p = spread(16, IN, 4, 8, 2).to(torch.float32)
    p[3] = 0
    p[4] *= 1e-30
    p[5] = p[5] / p[5].abs().max() * 5e4
    for i, k in zip(range(6, 16), (-3, -2, -1, 0, 1, 2, 3, 4, 6, 9)):
        target = float(np.nextafter(np.float32(2.0 ** k), np.float32(0)))  # 2^k (1 - 2^-24)
        amax = np.float32(448.0 / target)
        while np.float32(448.0 / np.float64(amax)) != np.float32(target):
            amax = np.nextafter(amax, np.float32(np.inf))
        row = p[i] / p[i].abs().max() * float(amax) * 0.999
        row[17] = float(amax)
        p[i] = row
    return p


# ---- torchao MX ------------------------------------------------------------------------------

def mx_input(dtype):
    m = spread(16, IN, 5, 10, 2)
    m[2, 32:64] = 0  # a zero block: FLOOR 2^-127
    m[3, :32] *= 1e-38  # f32-subnormal amax block (flushes in bf16? no: bf16 keeps them)
    m[4, 64:96] = 448.0 * 2 ** torch.arange(32, dtype=torch.float64) / 2 ** 31  # block at 448
    m[5, 96:128] = 480.0  # FLOOR scale 1: clamps to 448
    return m.to(dtype)


def run_mx(t, mode_name):
    from torchao.prototype.mx_formats.config import ScaleCalculationMode
    from torchao.prototype.mx_formats.mx_tensor import to_mx

    scale, data = to_mx(t.contiguous(), E4M3, 32, getattr(ScaleCalculationMode, mode_name))
    e8m0 = scale.view(torch.uint8).reshape(t.shape[0], t.shape[1] // 32)
    return data.view(E4M3).reshape(t.shape).contiguous(), e8m0.contiguous()


# ---- DeepSeek-V3 kernel.py under the Triton interpreter --------------------------------------

def load_deepseek(path):
    spec = importlib.util.spec_from_file_location("deepseek_v3_kernel", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class _RneFp8Cast:
    """While active, the interpreter's f32 -> fp8e4nv conversion is torch's RNE saturating cast
    (what cvt.rn.satfinite.e4m3x2.f32 does on the GPU) and its f32 -> bf16 conversion torch's
    RNE cast (cvt.rn.bf16.f32; the interpreter truncates); every other one is untouched."""

    def __enter__(self):
        import triton.language as tl
        from triton.runtime import interpreter

        self.mod, self.orig = interpreter, interpreter._convert_float

        def convert(inp, in_dtype, out_dtype, rounding_mode):
            if in_dtype == tl.float32 and out_dtype == tl.float8e4nv:
                t = torch.from_numpy(np.ascontiguousarray(inp, dtype=np.float32))
                q = t.clamp(-448.0, 448.0).to(E4M3)
                return q.view(torch.uint8).numpy().reshape(inp.shape)
            if in_dtype == tl.float32 and out_dtype == tl.bfloat16:
                t = torch.from_numpy(np.ascontiguousarray(inp, dtype=np.float32))
                return t.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16).reshape(
                    inp.shape)
            return self.orig(inp, in_dtype, out_dtype, rounding_mode)

        interpreter._convert_float = convert
        return self

    def __exit__(self, *exc):
        self.mod._convert_float = self.orig


def deepseek_inputs():
    b = spread(16, IN, 6, 8, 2)
    b[1] = 0  # amax clamps to 1e-4
    b[2] *= 1e-7  # tiny block: the 1e-4 clamp
    f = spread(16, IN, 7, 6, 2).to(torch.float32)
    # rows whose amax / 448 is 2^k (1 + 2^-23) or 2^k (1 - 2^-24): ue8m0's log2 / ceil
    for i, (k, up) in enumerate([(-8, 1), (-3, 1), (0, 1), (2, 1), (5, 1), (-4, 0), (1, 0)]):
        r = 8 + i
        s = np.float32(2.0 ** k)
        s = np.nextafter(s, np.float32(np.inf if up else 0))
        amax = np.float32(s * np.float32(448))
        f[r] = f[r] / f[r].abs().max() * float(amax) * 0.99
        f[r, 3] = float(amax)
        f[r, 200] = -float(amax)
    return b.to(torch.bfloat16), f


def run_deepseek(ds, path):
    x_bf16, x_f32 = deepseek_inputs()
    out, notes = {"ds.in": x_bf16, "ds.in_f32": x_f32}, {}
    for name, x in (("ds.in", x_bf16), ("ds.in_f32", x_f32)):
        for fmt in (None, "ue8m0"):
            raw_y, raw_s = ds.act_quant(x.contiguous(), 128, fmt)
            with _RneFp8Cast():
                y, s = ds.act_quant(x.contiguous(), 128, fmt)
            assert torch.equal(raw_s, s)
            key = f"{name}.{fmt or 'f32'}"
            out[key + ".y"], out[key + ".s"] = y, s
            notes[key] = int((raw_y.view(torch.uint8) != y.view(torch.uint8)).sum())
    g = torch.Generator().manual_seed(8)
    w = (torch.randn(144, 136, dtype=torch.float64, generator=g) * 100).clamp(-448, 448)
    w = w.to(torch.float32).to(E4M3)
    ws = (torch.rand(2, 2, dtype=torch.float64, generator=g) * 1e-2 + 1e-3).to(torch.float32)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)  # as fp8_cast_bf16.py runs it
    try:
        raw = ds.weight_dequant(w, ws)
        with _RneFp8Cast():
            out["ds.w_dequant"] = ds.weight_dequant(w, ws)
    finally:
        torch.set_default_dtype(old)
    notes["ds.w_dequant"] = int((raw.view(torch.int16) != out["ds.w_dequant"].view(
        torch.int16)).sum())
    out["ds.w"], out["ds.w_scale"] = w, ws
    return out, notes


# ---- the file writer ------------------------------------------------------------------------

# safetensors' own save orders __metadata__ differently from run to run (a hash map), so the
# files are written here: compact JSON header, metadata keys sorted, tensors in name order,
# header padded with spaces to a multiple of 8 (as make_fixtures.py writes its files).
ST_DTYPES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.uint8: "U8",
             E4M3: "F8_E4M3", E5M2: "F8_E5M2"}


def safetensors_bytes(tensors, metadata):
    entries = {}
    for name, t in tensors.items():
        t = t.detach().contiguous()
        data = t.view(torch.uint8).numpy().tobytes() if t.dtype.itemsize == 1 else (
            t.view(torch.int16 if t.dtype == torch.bfloat16 else torch.int32).numpy().tobytes())
        entries[name] = (ST_DTYPES[t.dtype], t.shape, data)
    return fixture_files.safetensors_bytes(entries, metadata)


# ---- main ------------------------------------------------------------------------------------

def build(args):
    files = {}
    x, w, dy = linear_inputs()
    lin = {"x": x, "w": w, "dy": dy}
    for recipe in RECIPES:
        for dname, dtype in (("bf16", torch.bfloat16), ("f32", torch.float32)):
            y, dx, dw = run_linear(recipe, dtype, x, w, dy)
            y, dx = y.reshape(TOKENS, OUT_F), dx.reshape(TOKENS, IN)
            if dtype == torch.float32:
                y, dx, dw = y[:F32_ROWS], dx[:F32_ROWS], dw[:F32_ROWS]
            for k, v in (("y", y), ("dx", dx), ("dw", dw)):
                lin[f"{recipe}.{dname}.{k}"] = v.contiguous()
    meta = versions({"f32_rows": str(F32_ROWS), "recipes": ",".join(RECIPES)})
    files["torchao_linear"] = (lin, meta)

    quant = {}
    x2, dy2 = x.reshape(TOKENS, IN), dy.reshape(TOKENS, OUT_F)
    ops = operand_table(x2, w, dy2)
    for operand, spec in QUANT_CASES:
        t, axis, transposed = ops[operand]
        fp8, gran, pow2 = SPECS[spec]
        data, scale = ours_layout(*torchao_cast(t, fp8, gran, axis, pow2), transposed)
        quant[f"{operand}.{spec}.data"] = data[:QUANT_ROWS].contiguous()
        quant[f"{operand}.{spec}.scale"] = scale
    probe = probe_input()
    quant["probe"] = probe
    for spec in ("e4m3_tensor", "e5m2_tensor", "e4m3_row", "e4m3_row_pow2"):
        fp8, gran, pow2 = SPECS[spec]
        data, scale = ours_layout(*torchao_cast(probe, fp8, gran, -1, pow2), False)
        quant[f"probe.{spec}.data"], quant[f"probe.{spec}.scale"] = data, scale
    files["torchao_quant"] = (quant, versions())

    mx = {}
    for name, dtype in (("mx.in", torch.bfloat16), ("mx.in_f32", torch.float32)):
        t = mx_input(dtype)
        mx[name] = t
        for mode in ("FLOOR", "RCEIL"):
            mx[f"{name}.{mode}.data"], mx[f"{name}.{mode}.e8m0"] = run_mx(t, mode)
    files["mx"] = (mx, versions())

    ds_tensors, notes = run_deepseek(load_deepseek(args.deepseek_kernel), args.deepseek_kernel)
    ds_meta = versions({"deepseek_v3_commit": args.deepseek_commit,
                        "interpreter_fp8_bytes_differing": ",".join(
                            f"{k}={v}" for k, v in notes.items())})
    files["deepseek"] = (ds_tensors, ds_meta)
    for k, v in notes.items():
        print(f"{k}: {v} elements differ with the unpatched interpreter casts")
    return files


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--deepseek-kernel", required=True,
                    help="DeepSeek-V3's inference/kernel.py (a checkout at the commit below)")
    ap.add_argument("--deepseek-commit", default="9b4e9788e4a3a731f7567338ed15d3ec549ce03b",
                    help="the DeepSeek-V3 commit the kernel was read at (recorded only)")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 on a change")
    args = ap.parse_args()
    if not os.path.isfile(args.deepseek_kernel):
        sys.exit(f"--deepseek-kernel: no file {args.deepseek_kernel}")
    os.makedirs(OUT, exist_ok=True)
    changed = []
    for name, (tensors, meta) in build(args).items():
        path = os.path.join(OUT, name + ".safetensors")
        if fixture_files.write_fixture(path, safetensors_bytes(tensors, meta), args.check):
            changed.append(path)
    if args.check and changed:
        sys.exit("would change: " + ", ".join(changed))


if __name__ == "__main__":
    main()
