#!/usr/bin/python3
"""Reference RoPE scaling values (llama3, yarn) for tests/unit/ops/rope_scaling_test.cpp.

    /usr/bin/python3 tests/reference/make_rope_fixtures.py           # writes the header
    /usr/bin/python3 tests/reference/make_rope_fixtures.py --check   # exit 1 if it would change
    /usr/bin/python3 tests/reference/make_rope_fixtures.py --hf-source \\
        .../transformers/modeling_rope_utils.py                      # also cross-check HF's code

Writes tests/reference/fixtures/rope_scaling_fixtures.h: per configuration the scaling
parameters (with Hugging Face's config.json key names), the expected inverse frequencies and
the expected attention factor (the cos/sin multiplier), all f64 as exact hex-float literals.
Standard library only: no torch, no numpy, no transformers needed.

Where the formulas come from. transformers was not importable here (no torch), so the
functions below restate, in float64 Python, what transformers' modeling_rope_utils.py
computes in `_compute_llama3_parameters` and `_compute_yarn_parameters` (read in the
v4.56.0 wheel; `truncate` first appears in v4.55.0 with GPT-OSS, default True; v4.56.0 made
an explicit `factor` win over max_position_embeddings / original_max_position_embeddings),
and torchtitan's llama3 / deepseek_v3 `precompute_freqs_cis` (the same formulas). They are
written from the published formulas, not from mixprec's C++.

transformers computes in float32; these values are float64. With --hf-source the script also
runs transformers' own two functions (parsed out of the given modeling_rope_utils.py, e.g.
from `pip download --no-deps transformers==4.56.0`) against a small float64 stand-in for the
few torch calls they make, and checks that they give the same numbers (max relative
difference printed; must be <= 1e-15). The stand-in never enters the fixture: the header is
written from the restated formulas alone.
"""

import argparse
import ast
import math
import os
import sys
import types
import typing

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures", "rope_scaling_fixtures.h")

# name -> (head_dim, rope_theta, rope_scaling as in config.json, note). rope_type llama3 keys
# are all required by HF; yarn's optional ones are left out when the checkpoint leaves them out.
CASES = {
    "llama3_1_8b": (
        128, 500000.0,
        dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
             original_max_position_embeddings=8192),
        "Llama 3.1 8B config.json",
    ),
    "torchtitan_llama3_debugmodel": (
        16, 500000.0,
        dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
             original_max_position_embeddings=8192),
        "torchtitan llama3 debugmodel: dim 256 / 16 heads, its default llama scaling",
    ),
    "llama3_narrow_band": (
        64, 10000.0,
        dict(rope_type="llama3", factor=4.0, low_freq_factor=2.0, high_freq_factor=3.0,
             original_max_position_embeddings=1024),
        "synthetic: several frequencies in the smooth band, two boundaries crossed",
    ),
    "deepseek_v3": (
        64, 10000.0,
        dict(rope_type="yarn", factor=40.0, beta_fast=32.0, beta_slow=1.0, mscale=1.0,
             mscale_all_dim=1.0, original_max_position_embeddings=4096),
        "DeepSeek-V3 config.json (qk_rope_head_dim 64); mscale / mscale_all_dim = 1",
    ),
    "qwen_yarn_4x": (
        128, 1000000.0,
        dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=32768),
        "Qwen long-context recipe (factor 4 over 32768), no mscale: 0.1 ln 4 + 1",
    ),
    "gpt_oss_no_truncate": (
        64, 150000.0,
        dict(rope_type="yarn", factor=32.0, beta_fast=32.0, beta_slow=1.0,
             original_max_position_embeddings=4096, truncate=False),
        "GPT-OSS config.json: truncate false (fractional correction range)",
    ),
    "yarn_mscale_ratio": (
        32, 10000.0,
        dict(rope_type="yarn", factor=16.0, mscale=1.0, mscale_all_dim=0.5,
             original_max_position_embeddings=2048),
        "synthetic: mscale != mscale_all_dim, attention factor is their ratio",
    ),
    "yarn_explicit_attention_factor": (
        128, 500000.0,
        dict(rope_type="yarn", factor=8.0, beta_fast=16.0, beta_slow=2.0,
             attention_factor=1.25, original_max_position_embeddings=8192),
        "synthetic: attention_factor given, other betas",
    ),
    "yarn_degenerate_range": (
        32, 10000.0,
        dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=6),
        "synthetic: both correction bounds clamp to 0, the ramp's +0.001 guard",
    ),
    "yarn_high_past_half": (
        64, 10000.0,
        dict(rope_type="yarn", factor=8.0, original_max_position_embeddings=65536),
        "synthetic: the ramp's upper end past Dh/2 - 1 (HF bounds it by Dh - 1 only)",
    ),
    "yarn_range_above_dim": (
        16, 10.0,
        dict(rope_type="yarn", factor=2.0, original_max_position_embeddings=1 << 40),
        "synthetic: correction range past dim - 1 (low > high after the clamp)",
    ),
}

# DeepSeek-V3 attention: softmax_scale * mscale^2 with mscale = yarn_get_mscale(factor,
# mscale_all_dim); a few more points of the helper.
MSCALE_POINTS = [(40.0, 1.0), (40.0, 0.707), (4.0, 1.0), (1.0, 1.0), (0.5, 1.0), (32.0, 0.0)]


# ---- the formulas, float64 --------------------------------------------------------------------

def default_inv_freq(dim, base):
    # 1 / base^(2i/dim), i < dim/2 (the exponent formed as HF does: arange(0, dim, 2) / dim).
    return [1.0 / (base ** (float(k) / dim)) for k in range(0, dim, 2)]


def get_mscale(scale, mscale=1.0):
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def llama3(dim, base, rs):
    factor = rs["factor"]
    lo_f, hi_f = rs["low_freq_factor"], rs["high_freq_factor"]
    old_len = rs["original_max_position_embeddings"]
    low_freq_wavelen = old_len / lo_f
    high_freq_wavelen = old_len / hi_f
    out = []
    for f in default_inv_freq(dim, base):
        wavelen = 2 * math.pi / f
        if wavelen < high_freq_wavelen:  # high frequencies: unchanged
            out.append(f)
        elif wavelen > low_freq_wavelen:  # low frequencies: divided by factor
            out.append(f / factor)
        else:  # in between: blend by where old_len / wavelen sits in [lo_f, hi_f]
            smooth = (old_len / wavelen - lo_f) / (hi_f - lo_f)
            out.append((1 - smooth) * f / factor + smooth * f)
    return out, 1.0


def yarn(dim, base, rs, max_position_embeddings=None):
    factor = rs["factor"]
    original = rs.get("original_max_position_embeddings") or max_position_embeddings
    beta_fast = rs.get("beta_fast") or 32
    beta_slow = rs.get("beta_slow") or 1
    truncate = rs.get("truncate", True)
    attention_factor = rs.get("attention_factor")
    mscale, mscale_all_dim = rs.get("mscale"), rs.get("mscale_all_dim")
    if attention_factor is None:
        if mscale and mscale_all_dim:
            attention_factor = get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim)
        else:
            attention_factor = get_mscale(factor)

    def correction_dim(rotations):
        # the dimension whose wavelength turns `rotations` times over `original` positions
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    out = []
    for i, k in enumerate(range(0, dim, 2)):
        pos_freq = base ** (float(k) / dim)
        extrapolation, interpolation = 1.0 / pos_freq, 1.0 / (factor * pos_freq)
        ramp = min(max((i - low) / (high - low), 0.0), 1.0)
        keep = 1 - ramp  # share of the unscaled (extrapolated) frequency
        out.append(interpolation * (1 - keep) + extrapolation * keep)
    return out, attention_factor


def compute(dim, base, rs):
    return (llama3 if rs["rope_type"] == "llama3" else yarn)(dim, base, rs)


# ---- optional cross-check against transformers' own code ---------------------------------------

class _Vec:
    """A float64 1-D stand-in for the torch tensor operations HF's two functions use."""

    def __init__(self, v):
        self.v = [x for x in v]

    def _zip(self, o, f):
        if isinstance(o, _Vec):
            return _Vec(f(a, b) for a, b in zip(self.v, o.v))
        return _Vec(f(a, o) for a in self.v)

    def float(self):
        return _Vec(float(x) for x in self.v)

    def to(self, *a, **k):
        return self.float() if k.get("dtype") is not None else self

    __add__ = lambda s, o: s._zip(o, lambda a, b: a + b)
    __radd__ = lambda s, o: s._zip(o, lambda a, b: b + a)
    __sub__ = lambda s, o: s._zip(o, lambda a, b: a - b)
    __rsub__ = lambda s, o: s._zip(o, lambda a, b: b - a)
    __mul__ = lambda s, o: s._zip(o, lambda a, b: a * b)
    __rmul__ = lambda s, o: s._zip(o, lambda a, b: b * a)
    __truediv__ = lambda s, o: s._zip(o, lambda a, b: a / b)
    __rtruediv__ = lambda s, o: s._zip(o, lambda a, b: b / a)
    __rpow__ = lambda s, o: s._zip(o, lambda a, b: b ** a)
    __lt__ = lambda s, o: s._zip(o, lambda a, b: a < b)
    __gt__ = lambda s, o: s._zip(o, lambda a, b: a > b)
    __invert__ = lambda s: _Vec(not a for a in s.v)


def _torch_stand_in():
    t = types.SimpleNamespace(float=float, float32=float, int64=int)
    t.arange = lambda *a, **k: _Vec(float(x) for x in range(*a))
    t.clamp = lambda x, lo, hi: _Vec(min(max(a, lo), hi) for a in x.v)
    t.where = lambda c, a, b: _Vec(
        (a.v[i] if isinstance(a, _Vec) else a) if c.v[i] else (b.v[i] if isinstance(b, _Vec) else b)
        for i in range(len(c.v)))
    t.Tensor = _Vec
    return t


def hf_functions(path):
    tree = ast.parse(open(path, encoding="utf-8").read())
    wanted = {"_compute_default_rope_parameters", "_compute_llama3_parameters",
              "_compute_yarn_parameters"}
    body = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in wanted]
    for n in body:
        n.decorator_list = []
    ns = {"math": math, "torch": _torch_stand_in(), "Optional": typing.Optional,
          "PretrainedConfig": object}
    exec(compile(ast.Module(body=body, type_ignores=[]), path, "exec"), ns)
    return ns


def hf_compute(ns, dim, base, rs):
    # max_position_embeddings: the post-scaling length, original · factor, as HF recommends
    # (v4.55 and earlier derived yarn's factor from it; v4.56 warns when they disagree).
    post = int(rs["original_max_position_embeddings"] * rs["factor"])
    cfg = types.SimpleNamespace(rope_theta=base, head_dim=dim, hidden_size=dim,
                                num_attention_heads=1, rope_scaling=dict(rs),
                                max_position_embeddings=post)
    fn = ns["_compute_llama3_parameters" if rs["rope_type"] == "llama3" else "_compute_yarn_parameters"]
    inv, att = fn(cfg, None)
    return inv.v, att


# ---- the header ---------------------------------------------------------------------------------

def cpp_double(x):
    return float(x).hex().replace("0x1.0000000000000p", "0x1p")


def render():
    lines = [
        "// Generated by tests/reference/make_rope_fixtures.py (float64 restatement of Hugging Face",
        "// transformers' llama3 and yarn RoPE parameters); do not edit, regenerate.",
        "#pragma once",
        "",
        "#include <cstdint>",
        "",
        "namespace mixprec::rope_fixtures {",
        "",
        "// Generated tables, laid out as the script writes them.",
        "// clang-format off",
        "// The rope_scaling keys as config.json spells them; has_* false: the key is absent.",
        "struct Case {",
        "  const char* name;",
        "  const char* rope_type;",
        "  int64_t head_dim;",
        "  double rope_theta;",
        "  double factor;",
        "  double low_freq_factor, high_freq_factor;  // llama3",
        "  int64_t original_max_position_embeddings;",
        "  bool has_beta_fast, has_beta_slow, has_mscale, has_mscale_all_dim, has_attention_factor;",
        "  double beta_fast, beta_slow, mscale, mscale_all_dim, attention_factor;  // yarn",
        "  bool truncate;",
        "  double expected_attention_factor;",
        "  const double* expected_inv_freq;  // head_dim / 2 values",
        "};",
        "",
    ]
    for name, (dim, base, rs, note) in CASES.items():
        inv, _ = compute(dim, base, rs)
        lines.append(f"// {note}")
        lines.append(f"inline constexpr double k_{name}_inv_freq[{len(inv)}] = {{")
        for j in range(0, len(inv), 3):
            lines.append("    " + ", ".join(cpp_double(x) for x in inv[j:j + 3]) + ",")
        lines.append("};")
    lines.append("")
    lines.append("inline constexpr Case kCases[] = {")
    for name, (dim, base, rs, note) in CASES.items():
        _, att = compute(dim, base, rs)

        def opt(key):
            return ("true" if key in rs else "false", cpp_double(rs.get(key, 0.0)))

        bf, bs, ms, msa, af = (opt(k) for k in
                               ("beta_fast", "beta_slow", "mscale", "mscale_all_dim",
                                "attention_factor"))
        lines.append(
            f"    {{\"{name}\", \"{rs['rope_type']}\", {dim}, {cpp_double(base)}, "
            f"{cpp_double(rs['factor'])}, {cpp_double(rs.get('low_freq_factor', 0.0))}, "
            f"{cpp_double(rs.get('high_freq_factor', 0.0))}, "
            f"{rs['original_max_position_embeddings']}, {bf[0]}, {bs[0]}, {ms[0]}, {msa[0]}, "
            f"{af[0]}, {bf[1]}, {bs[1]}, {ms[1]}, {msa[1]}, {af[1]}, "
            f"{'true' if rs.get('truncate', True) else 'false'}, {cpp_double(att)}, "
            f"k_{name}_inv_freq}},")
    lines.append("};")
    lines.append("")
    lines.append("// yarn_get_mscale(scale, mscale) = 0.1·mscale·ln(scale) + 1, 1 for scale <= 1.")
    lines.append("struct MscalePoint {")
    lines.append("  double scale, mscale, expected;")
    lines.append("};")
    lines.append("inline constexpr MscalePoint kMscalePoints[] = {")
    for s, m in MSCALE_POINTS:
        lines.append(f"    {{{cpp_double(s)}, {cpp_double(m)}, {cpp_double(get_mscale(s, m))}}},")
    lines.append("};")
    lines.append("")
    lines.append("// clang-format on")
    lines.append("")
    lines.append("}  // namespace mixprec::rope_fixtures")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 on a difference")
    ap.add_argument("--hf-source", help="transformers' modeling_rope_utils.py to cross-check")
    args = ap.parse_args()

    for name, (dim, base, rs, _) in CASES.items():
        inv, att = compute(dim, base, rs)
        changed = sum(1 for a, b in zip(inv, default_inv_freq(dim, base)) if a != b)
        line = f"{name:32s} dim {dim:3d}  attention_factor {att:.17g}  {changed}/{len(inv)} scaled"
        if args.hf_source:
            hinv, hatt = hf_compute(hf_functions(args.hf_source), dim, base, rs)
            rel = max(abs(a - b) / abs(b) for a, b in zip(inv, hinv))
            rel = max(rel, abs(att - hatt) / abs(hatt))
            line += f"  vs transformers' code: max rel diff {rel:.3g}"
            if rel > 1e-15:
                print(line)
                sys.exit(f"{name}: differs from transformers' code")
        print(line)

    text = render()
    old = open(OUT, encoding="utf-8").read() if os.path.exists(OUT) else None
    if args.check:
        if old != text:
            sys.exit(f"{OUT} would change")
        print("fixture up to date")
        return
    if old != text:
        with open(OUT, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
