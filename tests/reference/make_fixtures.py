#!/usr/bin/python3
"""PyTorch reference fixtures for mixprec's ops (forward and backward).

Regenerate with (Debian 12 packages python3-torch python3-numpy libopenblas0-pthread):

    /usr/bin/python3 tests/reference/make_fixtures.py

Writes tests/reference/fixtures/<op>_<dtype>.safetensors for dtype in {f32, bf16}. Each file
holds the op's inputs (by name), the forward output `out` (or `out_values`/`out_indices` for
ops with several outputs), a fixed random upstream gradient `grad_out` (`grad_out_values`)
and the autograd gradient `grad_<name>` of every differentiable input. The `__metadata__`
records torch_version, op, dtype, compute, semantics and each op argument as a JSON string.

Both dtypes of an op share the same random draws: the bf16 file's float tensors are the f32
file's tensors rounded to bf16 (round-to-nearest-even), then the op runs in bf16 the way
PyTorch CPU runs it (except `attention`, which is f32 math on bf16-rounded inputs).

The script also prints, for every bf16 fixture, how far PyTorch's bf16 result lies from the
f32 result on the same bf16-rounded inputs (the tolerance table in README.md). With
--update-readme it rewrites that table in README.md; with --check it regenerates in memory
and fails if any fixture file on disk differs.

The safetensors writer is self-contained (no `safetensors` package): 8-byte little-endian
header length, compact JSON header with "__metadata__" first, then tensors in header order,
header padded with spaces to a multiple of 8 bytes.
"""

import argparse
import json
import math
import os
import struct
import sys
import zlib

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")
README = os.path.join(HERE, "README.md")
TABLE_BEGIN = "<!-- tolerance-table:begin (written by make_fixtures.py --update-readme) -->"
TABLE_END = "<!-- tolerance-table:end -->"

# One intra-op thread: reduction order (and so rounding) does not depend on the machine's cores.
torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

# ---------------------------------------------------------------------------------------------
# safetensors writer
# ---------------------------------------------------------------------------------------------

_ST_DTYPE = {
    torch.float64: ("F64", "<f8"),
    torch.float32: ("F32", "<f4"),
    torch.bfloat16: ("BF16", None),  # raw bits via .view(torch.int16)
    torch.float16: ("F16", "<f2"),
    torch.int32: ("I32", "<i4"),
    torch.int64: ("I64", "<i8"),
    torch.uint8: ("U8", "u1"),
    torch.bool: ("BOOL", "u1"),
}


def tensor_bytes(t):
    t = t.detach().cpu().contiguous()
    name, np_dtype = _ST_DTYPE[t.dtype]
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().astype("<i2").tobytes()
    if t.dtype == torch.bool:
        return t.to(torch.uint8).numpy().tobytes()
    return t.numpy().astype(np_dtype).tobytes()


def safetensors_bytes(tensors, metadata):
    """tensors: list of (name, torch.Tensor); metadata: dict str -> str."""
    header = {}
    if metadata:
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())
        header["__metadata__"] = dict(metadata)
    blobs = []
    offset = 0
    for name, t in tensors:
        assert name != "__metadata__" and name not in header, name
        data = tensor_bytes(t)
        header[name] = {
            "dtype": _ST_DTYPE[t.dtype][0],
            "shape": list(t.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def read_safetensors(path):
    """Minimal reader, used to self-check written files (same checks as the C++ loader)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    data = raw[8 + n :]
    ranges = sorted(tuple(v["data_offsets"]) for k, v in header.items() if k != "__metadata__")
    pos = 0
    for b, e in ranges:
        assert b == pos, (path, "hole/overlap")
        pos = e
    assert pos == len(data), (path, "trailing bytes")
    return header


# ---------------------------------------------------------------------------------------------
# op registry
# ---------------------------------------------------------------------------------------------
#
# Each op builder runs after torch.manual_seed(seed(op)) and returns a dict:
#   inputs: list of (name, f32-or-integer tensor, differentiable: bool)
#   fn(t, dtype) -> dict of outputs ("out", or "out_values"/"out_indices"); `t` maps input
#       names to tensors already converted to the fixture dtype (integer tensors unchanged);
#       `dtype` is torch.float32 or torch.bfloat16.
#   args: op arguments recorded in the metadata (each as a JSON string)
#   doc: one-line semantics recorded in the metadata
#   compute_bf16: optional override of the metadata `compute` for the bf16 file

OPS = {}


def op(name):
    def register(builder):
        assert name not in OPS
        OPS[name] = builder
        return builder

    return register


def seed_of(name):
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


def randn(*shape, scale=1.0):
    # Drawn in f64 and rounded to f32: torch's f32 randn takes a vectorized Box-Muller path
    # whose bits depend on the CPU capability (AVX2 vs default), the f64 path does not.
    return (torch.randn(*shape, dtype=torch.float64) * scale).float()


# --- linear algebra --------------------------------------------------------------------------


@op("linear")
def _linear():
    # x [B,T,Din]=[2,3,13], weight [Dout,Din]=[11,13], bias [Dout]=[11]
    # out[b,t,o] = sum_i x[b,t,i] * weight[o,i] + bias[o]   -> [2,3,11]  (F.linear)
    x, w, b = randn(2, 3, 13), randn(11, 13, scale=0.3), randn(11, scale=0.5)
    return dict(
        inputs=[("x", x, True), ("weight", w, True), ("bias", b, True)],
        fn=lambda t, dt: {"out": F.linear(t["x"], t["weight"], t["bias"])},
        args={},
        doc="out = x @ weight^T + bias; x [B,T,Din], weight [Dout,Din], bias [Dout]",
    )


@op("matmul")
def _matmul():
    # a [M,K]=[5,13], b [K,N]=[13,7] -> out [5,7] = a @ b
    a, b = randn(5, 13), randn(13, 7)
    return dict(
        inputs=[("a", a, True), ("b", b, True)],
        fn=lambda t, dt: {"out": torch.matmul(t["a"], t["b"])},
        args={},
        doc="out = a @ b; a [M,K], b [K,N]",
    )


@op("bmm")
def _bmm():
    # a [Bt,M,K]=[3,5,11], b [Bt,K,N]=[3,11,7] -> out [3,5,7], out[i] = a[i] @ b[i]
    a, b = randn(3, 5, 11), randn(3, 11, 7)
    return dict(
        inputs=[("a", a, True), ("b", b, True)],
        fn=lambda t, dt: {"out": torch.bmm(t["a"], t["b"])},
        args={},
        doc="out[i] = a[i] @ b[i]; a [Bt,M,K], b [Bt,K,N]",
    )


# --- broadcasting elementwise binary ops ------------------------------------------------------
# a [4,1,5], b [3,1] broadcast to out [4,3,5] (b is aligned to the trailing dims: [1,3,1]).
# grad_a / grad_b are the broadcast gradients summed back to each input's shape.


def _binary(name, f, doc, b_away_from_zero=False):
    @op(name)
    def _b():
        a, b = randn(4, 1, 5), randn(3, 1)
        if b_away_from_zero:  # keep the divisor in [0.5, 2] in magnitude
            b = torch.sign(b) * (0.5 + 1.5 * torch.rand(3, 1))
        return dict(
            inputs=[("a", a, True), ("b", b, True)],
            fn=lambda t, dt: {"out": f(t["a"], t["b"])},
            args={},
            doc=doc + "; a [4,1,5], b [3,1] broadcast to out [4,3,5]",
        )


_binary("add", torch.add, "out = a + b")
_binary("sub", torch.sub, "out = a - b")
_binary("mul", torch.mul, "out = a * b")
_binary("div", torch.div, "out = a / b", b_away_from_zero=True)


@op("scale")
def _scale():
    # x [3,7,5]; out = x * 0.37 (Python scalar; note: a bf16 tensor times a Python scalar
    # multiplies by the scalar rounded to bf16, 0.369140625 — see README)
    x = randn(3, 7, 5)
    return dict(
        inputs=[("x", x, True)],
        fn=lambda t, dt: {"out": t["x"] * 0.37},
        args={"scale": 0.37},
        doc="out = x * scale (Python scalar); x [3,7,5]",
    )


# --- activations ------------------------------------------------------------------------------


@op("gelu")
def _gelu():
    # x [3,7,5] (scaled by 3 to reach the tails); out = x * Phi(x) (erf form)
    x = randn(3, 7, 5, scale=3.0)
    return dict(
        inputs=[("x", x, True)],
        fn=lambda t, dt: {"out": F.gelu(t["x"], approximate="none")},
        args={"approximate": "none"},
        doc="out = 0.5*x*(1+erf(x/sqrt(2))); x [3,7,5]",
    )


@op("gelu_tanh")
def _gelu_tanh():
    # x [3,7,5]; out = 0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3)))
    x = randn(3, 7, 5, scale=3.0)
    return dict(
        inputs=[("x", x, True)],
        fn=lambda t, dt: {"out": F.gelu(t["x"], approximate="tanh")},
        args={"approximate": "tanh"},
        doc="out = 0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3))); x [3,7,5]",
    )


@op("silu")
def _silu():
    # x [3,7,5]; out = x * sigmoid(x)
    x = randn(3, 7, 5, scale=3.0)
    return dict(
        inputs=[("x", x, True)],
        fn=lambda t, dt: {"out": F.silu(t["x"])},
        args={},
        doc="out = x * sigmoid(x); x [3,7,5]",
    )


@op("swiglu")
def _swiglu():
    # x [B,T,D]=[2,3,13], w1 [F,D]=[11,13], w3 [F,D]=[11,13]
    # out = silu(x @ w1^T) * (x @ w3^T) -> [2,3,11]  (before the down projection)
    x, w1, w3 = randn(2, 3, 13), randn(11, 13, scale=0.4), randn(11, 13, scale=0.4)
    return dict(
        inputs=[("x", x, True), ("w1", w1, True), ("w3", w3, True)],
        fn=lambda t, dt: {"out": F.silu(F.linear(t["x"], t["w1"])) * F.linear(t["x"], t["w3"])},
        args={},
        doc="out = silu(x @ w1^T) * (x @ w3^T); x [B,T,D], w1,w3 [F,D]",
    )


# --- pointwise math (autocast's fp32 list) -----------------------------------------------------
# x [3,7,5] drawn inside each function's domain; out = f(x), grad_x = grad_out * f'(x).


def uniform(lo, hi, *shape):
    # Drawn in f64 and rounded to f32, like randn.
    return (lo + (hi - lo) * torch.rand(*shape, dtype=torch.float64)).float()


def away_from_zero(lo, hi, *shape):
    # |x| in [lo, hi] with a random sign.
    return uniform(lo, hi, *shape) * torch.sign(torch.randn(*shape, dtype=torch.float64)).float()


def _pointwise(name, f, make_x, doc, args=None):
    @op(name)
    def _p():
        x = make_x()
        return dict(
            inputs=[("x", x, True)],
            fn=lambda t, dt: {"out": f(t["x"])},
            args=args or {},
            doc=doc + "; x [3,7,5]",
        )


_pointwise("exp", torch.exp, lambda: randn(3, 7, 5, scale=2.0), "out = exp(x)")
_pointwise("log", torch.log, lambda: uniform(0.05, 8.0, 3, 7, 5), "out = log(x), x in [0.05, 8]")
_pointwise("log1p", torch.log1p, lambda: uniform(-0.9, 3.0, 3, 7, 5),
           "out = log(1 + x), x in [-0.9, 3]")
_pointwise("expm1", torch.expm1, lambda: randn(3, 7, 5, scale=2.0), "out = exp(x) - 1")
_pointwise("sqrt", torch.sqrt, lambda: uniform(0.05, 8.0, 3, 7, 5), "out = sqrt(x), x in [0.05, 8]")
_pointwise("rsqrt", torch.rsqrt, lambda: uniform(0.05, 8.0, 3, 7, 5),
           "out = 1 / sqrt(x), x in [0.05, 8]")
_pointwise("reciprocal", torch.reciprocal, lambda: away_from_zero(0.25, 4.0, 3, 7, 5),
           "out = 1 / x, |x| in [0.25, 4]")
_pointwise("tanh", torch.tanh, lambda: randn(3, 7, 5, scale=2.0), "out = tanh(x)")
_pointwise("softplus", F.softplus, lambda: randn(3, 7, 5, scale=12.0),
           "out = log(1 + exp(x)), x where x > 20 (beta 1, threshold 20)",
           {"beta": 1.0, "threshold": 20.0})
_pointwise("softplus_beta2", lambda x: F.softplus(x, beta=2.0, threshold=5.0),
           lambda: randn(3, 7, 5, scale=4.0),
           "out = log(1 + exp(2x)) / 2, x where 2x > 5", {"beta": 2.0, "threshold": 5.0})
_pointwise("pow_scalar", lambda x: torch.pow(x, 2.5), lambda: uniform(0.1, 3.0, 3, 7, 5),
           "out = x^2.5, x in [0.1, 3]", {"exponent": 2.5})
_pointwise("pow_int", lambda x: torch.pow(x, 3.0), lambda: randn(3, 7, 5),
           "out = x^3 (negative x too)", {"exponent": 3.0})


# --- normalization ----------------------------------------------------------------------------


@op("rmsnorm")
def _rmsnorm():
    # x [2,3,13], weight [13]; out = x / sqrt(mean(x^2, -1, keepdim) + eps) * weight, eps=1e-5.
    # Written in torch ops (torch 1.13 has no RMSNorm); in bf16 every op runs in bf16.
    eps = 1e-5
    x, w = randn(2, 3, 13, scale=2.0), 1.0 + randn(13, scale=0.2)

    def fn(t, dt):
        x = t["x"]
        return {"out": x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * t["weight"]}

    return dict(
        inputs=[("x", x, True), ("weight", w, True)],
        fn=fn,
        args={"eps": eps},
        doc="out = x / sqrt(mean(x^2, -1) + eps) * weight; x [2,3,13], weight [13]",
    )


@op("layernorm")
def _layernorm():
    # x [2,3,13], weight [13], bias [13]; F.layer_norm over the last dim, eps=1e-5
    # out = (x - mean) / sqrt(var_biased + eps) * weight + bias
    eps = 1e-5
    x = randn(2, 3, 13, scale=2.0) + 0.5
    w, b = 1.0 + randn(13, scale=0.2), randn(13, scale=0.2)
    return dict(
        inputs=[("x", x, True), ("weight", w, True), ("bias", b, True)],
        fn=lambda t, dt: {"out": F.layer_norm(t["x"], (13,), t["weight"], t["bias"], eps)},
        args={"eps": eps, "normalized_shape": [13]},
        doc="out = (x-mean)/sqrt(var+eps)*weight+bias over the last dim (biased var); "
        "x [2,3,13], weight,bias [13]",
    )


# --- softmax family ---------------------------------------------------------------------------


def _logits_with_extremes():
    # [6,13]: rows 0-3 ordinary (randn*2); row 4 mixes logits near +80 and near -80;
    # row 5 sits around +100 (exp overflows f32 without the max subtraction).
    x = randn(6, 13, scale=2.0)
    row4 = torch.where(torch.arange(13) % 2 == 0, torch.tensor(80.0), torch.tensor(-80.0))
    x[4] = row4 + randn(13, scale=1.0)
    x[5] = 100.0 + randn(13, scale=1.0)
    return x


@op("softmax")
def _softmax():
    # x [6,13] (with +-80 and ~100 rows); out = softmax(x, dim=-1)
    x = _logits_with_extremes()
    return dict(
        inputs=[("x", x, True)],
        fn=lambda t, dt: {"out": torch.softmax(t["x"], dim=-1)},
        args={"dim": -1},
        doc="out = exp(x - max) / sum(exp(x - max)) over the last dim; x [6,13]",
    )


@op("log_softmax")
def _log_softmax():
    # x [6,13] (with +-80 and ~100 rows); out = log_softmax(x, dim=-1)
    x = _logits_with_extremes()
    return dict(
        inputs=[("x", x, True)],
        fn=lambda t, dt: {"out": torch.log_softmax(t["x"], dim=-1)},
        args={"dim": -1},
        doc="out = x - max - log(sum(exp(x - max))) over the last dim; x [6,13]",
    )


# --- attention and rope -----------------------------------------------------------------------


@op("attention")
def _attention():
    # q,k,v [B,H,T,Dh]=[2,3,7,5]; causal scaled-dot-product attention:
    #   s = q @ k^T * (1/sqrt(Dh)); s[i,j] = -inf for j > i; p = softmax(s, -1); out = p @ v
    # Always f32 math; the bf16 file's inputs are bf16, widened to f32, and out is rounded to
    # bf16 (autograd rounds grad_q/k/v back to bf16 through the casts).
    B, H, T, Dh = 2, 3, 7, 5
    q, k, v = randn(B, H, T, Dh), randn(B, H, T, Dh), randn(B, H, T, Dh)
    scale = 1.0 / math.sqrt(Dh)

    def fn(t, dt):
        q, k, v = t["q"].float(), t["k"].float(), t["v"].float()
        s = torch.matmul(q, k.transpose(-2, -1)) * scale
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        s = s.masked_fill(~mask, float("-inf"))
        out = torch.matmul(torch.softmax(s, dim=-1), v)
        return {"out": out.to(dt)}

    return dict(
        inputs=[("q", q, True), ("k", k, True), ("v", v, True)],
        fn=fn,
        args={"causal": True, "scale": scale},
        doc="out = softmax(mask_causal(q @ k^T * scale)) @ v; q,k,v [B,H,T,Dh], scale=1/sqrt(Dh)",
        compute_bf16="f32 math on bf16-rounded inputs",
    )


@op("rope")
def _rope():
    # x [B,H,T,Dh]=[2,3,7,10]; rotate-half RoPE (GPT-NeoX / LLaMA-HF), base theta=10000,
    # positions 0..T-1:
    #   inv_freq[i] = theta^(-2i/Dh), i < Dh/2;  ang[p,i] = p * inv_freq[i]
    #   cos = cat(cos(ang), cos(ang)) [T,Dh]; sin likewise  (computed in f64, stored in the
    #   fixture dtype; not differentiable)
    #   rotate_half(x) = cat(-x[..., Dh/2:], x[..., :Dh/2])
    #   out = x * cos + rotate_half(x) * sin
    B, H, T, Dh, theta = 2, 3, 7, 10, 10000.0
    x = randn(B, H, T, Dh)
    inv_freq = 1.0 / (theta ** (torch.arange(0, Dh, 2, dtype=torch.float64) / Dh))
    ang = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)
    emb = torch.cat([ang, ang], dim=-1)
    cos, sin = emb.cos().float(), emb.sin().float()

    def fn(t, dt):
        x = t["x"]
        half = x.shape[-1] // 2
        rot = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return {"out": x * t["cos"] + rot * t["sin"]}

    return dict(
        inputs=[("x", x, True), ("cos", cos, False), ("sin", sin, False)],
        fn=fn,
        args={"theta": theta, "convention": "rotate_half", "positions": "0..T-1"},
        doc="out = x*cos + rotate_half(x)*sin; x [B,H,T,Dh], cos,sin [T,Dh]",
    )


# --- embedding and loss -----------------------------------------------------------------------


@op("embedding")
def _embedding():
    # ids i64 [B,T]=[3,5] in [0,V) with repeats; weight [V,D]=[11,7]; out [3,5,7] = weight[ids]
    # grad_weight[v] = sum of grad_out rows whose id is v (zero rows for unused ids)
    ids = torch.randint(0, 11, (3, 5), dtype=torch.int64)
    ids[0, 0] = ids[2, 4] = ids[1, 2]  # guarantee a repeated id
    w = randn(11, 7)
    return dict(
        inputs=[("ids", ids, False), ("weight", w, True)],
        fn=lambda t, dt: {"out": F.embedding(t["ids"], t["weight"])},
        args={},
        doc="out[b,t] = weight[ids[b,t]]; ids i64 [B,T], weight [V,D]",
    )


def _cross_entropy(name, n_valid):
    @op(name)
    def _ce():
        # logits [N,V]=[7,13] (row 3 has +-80-scale logits), targets i64 [N] with
        # ignore_index=-100 entries; out = scalar mean over non-ignored rows of
        # -log_softmax(logits)[n, target[n]]; grad_out is a scalar
        N, V = 7, 13
        logits = randn(N, V, scale=2.0)
        logits[3] = randn(V, scale=40.0)
        targets = torch.randint(0, V, (N,), dtype=torch.int64)
        keep = torch.randperm(N)[:n_valid]
        ignored = torch.ones(N, dtype=torch.bool)
        ignored[keep] = False
        targets[ignored] = -100
        return dict(
            inputs=[("logits", logits, True), ("targets", targets, False)],
            fn=lambda t, dt: {
                "out": F.cross_entropy(t["logits"], t["targets"], ignore_index=-100,
                                       reduction="mean")
            },
            args={"ignore_index": -100, "reduction": "mean", "valid_targets": n_valid},
            doc="out = mean over n with targets[n] != -100 of -log_softmax(logits[n])[targets[n]]; "
            "logits [N,V], targets i64 [N]",
        )


_cross_entropy("cross_entropy", n_valid=5)
_cross_entropy("cross_entropy_one_valid", n_valid=1)


# --- reductions (over all elements -> scalar, and over dim=1 of [3,7,5] -> [3,5]) -------------


def _distinct(*shape):
    # Distinct values k/16 (exact in bf16) in random order: no ties for max/topk.
    n = int(np.prod(shape))
    return (torch.randperm(n).float() - n // 2).reshape(shape) / 16.0


def _reduction(name, f, doc, distinct=False, multi=False, args=None):
    @op(name)
    def _r():
        x = _distinct(3, 7, 5) if distinct else randn(3, 7, 5)
        return dict(
            inputs=[("x", x, True)],
            fn=f,
            args=args or {},
            doc=doc + "; x [3,7,5]",
        )


_reduction("sum_all", lambda t, dt: {"out": t["x"].sum()}, "out = sum of all elements (scalar)")
_reduction("sum_dim1", lambda t, dt: {"out": t["x"].sum(dim=1)}, "out = x.sum(dim=1) [3,5]",
           args={"dim": 1})
_reduction("mean_all", lambda t, dt: {"out": t["x"].mean()}, "out = mean of all elements (scalar)")
_reduction("mean_dim1", lambda t, dt: {"out": t["x"].mean(dim=1)}, "out = x.mean(dim=1) [3,5]",
           args={"dim": 1})
_reduction("max_all", lambda t, dt: {"out": t["x"].max()},
           "out = max of all elements (scalar); gradient goes to the (unique) argmax",
           distinct=True)


def _max_dim1(t, dt):
    v, i = t["x"].max(dim=1)
    return {"out_values": v, "out_indices": i}


_reduction("max_dim1", _max_dim1,
           "out_values, out_indices (i64) = x.max(dim=1) [3,5]; gradient goes to the argmax",
           distinct=True, args={"dim": 1})
_reduction("norm_all", lambda t, dt: {"out": torch.linalg.vector_norm(t["x"], 2)},
           "out = sqrt(sum of x^2) over all elements (scalar)", args={"ord": 2})
_reduction("norm_dim1", lambda t, dt: {"out": torch.linalg.vector_norm(t["x"], 2, dim=1)},
           "out = sqrt(sum(x^2, dim=1)) [3,5]", args={"ord": 2, "dim": 1})


@op("topk")
def _topk():
    # x [3,5,7] (distinct values); out_values, out_indices (i64) = topk(x, k=2, dim=-1,
    # largest=True, sorted=True) -> [3,5,2]; grad_x scatters grad_out_values to the indices
    x = _distinct(3, 5, 7)

    def fn(t, dt):
        v, i = torch.topk(t["x"], 2, dim=-1, largest=True, sorted=True)
        return {"out_values": v, "out_indices": i}

    return dict(
        inputs=[("x", x, True)],
        fn=fn,
        args={"k": 2, "dim": -1, "largest": True, "sorted": True},
        doc="out_values, out_indices = topk(x, 2, dim=-1); x [3,5,7]",
    )


# --- indexing and data movement ---------------------------------------------------------------


@op("gather")
def _gather():
    # x [5,7], index i64 [5,4] in [0,7) with repeats in a row; out[i,j] = x[i, index[i,j]]
    # -> [5,4]; grad_x accumulates repeats (scatter_add of grad_out)
    x = randn(5, 7)
    index = torch.randint(0, 7, (5, 4), dtype=torch.int64)
    index[0, 1] = index[0, 0]
    return dict(
        inputs=[("x", x, True), ("index", index, False)],
        fn=lambda t, dt: {"out": torch.gather(t["x"], 1, t["index"])},
        args={"dim": 1},
        doc="out[i,j] = x[i, index[i,j]]; x [5,7], index i64 [5,4]",
    )


@op("scatter_add")
def _scatter_add():
    # x [5,7], index i64 [3,7] in [0,5), src [3,7]
    # out = x.scatter_add(0, index, src): out[index[i,j], j] += src[i,j]  -> [5,7]
    # grad_x = grad_out; grad_src[i,j] = grad_out[index[i,j], j]
    x, src = randn(5, 7), randn(3, 7)
    index = torch.randint(0, 5, (3, 7), dtype=torch.int64)
    index[1, 2] = index[0, 2]  # guarantee a collision
    return dict(
        inputs=[("x", x, True), ("index", index, False), ("src", src, True)],
        fn=lambda t, dt: {"out": torch.scatter_add(t["x"], 0, t["index"], t["src"])},
        args={"dim": 0},
        doc="out = x; out[index[i,j], j] += src[i,j]; x [5,7], index i64 [3,7], src [3,7]",
    )


@op("index_add")
def _index_add():
    # x [6,5], index i64 [4] (with a duplicate), source [4,5]
    # out = x.index_add(0, index, source): out[index[i], :] += source[i, :]  -> [6,5]
    x, source = randn(6, 5), randn(4, 5)
    index = torch.tensor([4, 0, 4, 2], dtype=torch.int64)
    return dict(
        inputs=[("x", x, True), ("index", index, False), ("source", source, True)],
        fn=lambda t, dt: {"out": torch.index_add(t["x"], 0, t["index"], t["source"])},
        args={"dim": 0, "alpha": 1},
        doc="out = x; out[index[i]] += source[i]; x [6,5], index i64 [4], source [4,5]",
    )


@op("concat")
def _concat():
    # a [2,3,5], b [2,1,5], c [2,4,5]; out = cat([a,b,c], dim=1) -> [2,8,5]
    a, b, c = randn(2, 3, 5), randn(2, 1, 5), randn(2, 4, 5)
    return dict(
        inputs=[("a", a, True), ("b", b, True), ("c", c, True)],
        fn=lambda t, dt: {"out": torch.cat([t["a"], t["b"], t["c"]], dim=1)},
        args={"dim": 1},
        doc="out = cat([a,b,c], dim=1); a [2,3,5], b [2,1,5], c [2,4,5]",
    )


@op("slice")
def _slice():
    # x [3,7,5]; out = x[:, 1:6:2, :] -> [3,3,5] (stored contiguous); grad_x zero elsewhere
    x = randn(3, 7, 5)
    return dict(
        inputs=[("x", x, True)],
        fn=lambda t, dt: {"out": t["x"][:, 1:6:2, :]},
        args={"dim": 1, "start": 1, "stop": 6, "step": 2},
        doc="out = x[:, 1:6:2]; x [3,7,5]",
    )


@op("reshape")
def _reshape():
    # x [3,7,5]; out = x.reshape(15,7) (row-major order kept)
    x = randn(3, 7, 5)
    return dict(
        inputs=[("x", x, True)],
        fn=lambda t, dt: {"out": t["x"].reshape(15, 7)},
        args={"shape": [15, 7]},
        doc="out = x.reshape(15,7); x [3,7,5]",
    )


@op("transpose")
def _transpose():
    # x [3,7,5]; out = x.transpose(1,2) -> [3,5,7] (stored contiguous)
    x = randn(3, 7, 5)
    return dict(
        inputs=[("x", x, True)],
        fn=lambda t, dt: {"out": t["x"].transpose(1, 2)},
        args={"dim0": 1, "dim1": 2},
        doc="out = x.transpose(1,2); x [3,7,5]",
    )


# dropout: deliberately no fixture (PyTorch's RNG stream cannot be reproduced); see README.

# ---------------------------------------------------------------------------------------------
# running an op
# ---------------------------------------------------------------------------------------------

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}


# --- issue 18: the matmul family, fp32 reductions, losses and promote ops ---------------------


def _spec(inputs, fn, doc, args=None, compute_bf16=None):
    d = dict(inputs=inputs, fn=fn, args=args or {}, doc=doc)
    if compute_bf16:
        d["compute_bf16"] = compute_bf16
    return d


def _in_f32(f):
    # PyTorch 1.13 has no bf16 CPU kernel for some ops (prod, mse_loss, binary_cross_entropy):
    # their bf16 files run the f32 op on the bf16 inputs and round the result to bf16, which
    # is what autocast's fp32 row does.
    def g(t, dt):
        out = f({k: (v.float() if v.is_floating_point() else v) for k, v in t.items()})
        return {k: v.to(dt) if v.is_floating_point() else v for k, v in out.items()}
    return g


NO_BF16 = "f32 math on the bf16 inputs, rounded to bf16 (PyTorch 1.13 has no bf16 CPU kernel)"


@op("mm")
def _mm():
    a, b = randn(5, 13), randn(13, 7)
    return _spec([("a", a, True), ("b", b, True)], lambda t, dt: {"out": torch.mm(t["a"], t["b"])},
                 "out = a @ b; a [5,13], b [13,7] (torch.mm)")


@op("mv")
def _mv():
    a, v = randn(5, 13), randn(13)
    return _spec([("a", a, True), ("v", v, True)], lambda t, dt: {"out": torch.mv(t["a"], t["v"])},
                 "out = a @ v; a [5,13], v [13] (torch.mv)")


@op("dot")
def _dot():
    a, b = randn(17), randn(17)
    return _spec([("a", a, True), ("b", b, True)],
                 lambda t, dt: {"out": torch.dot(t["a"], t["b"])},
                 "out = sum(a * b); a [17], b [17] (torch.dot)")


@op("addmm")
def _addmm():
    i, m1, m2 = randn(7), randn(5, 13), randn(13, 7)
    return _spec([("input", i, True), ("m1", m1, True), ("m2", m2, True)],
                 lambda t, dt: {"out": torch.addmm(t["input"], t["m1"], t["m2"], beta=0.5,
                                                   alpha=1.5)},
                 "out = 0.5 * input + 1.5 * (m1 @ m2); input [7] broadcast, m1 [5,13], m2 [13,7]",
                 {"beta": 0.5, "alpha": 1.5})


@op("baddbmm")
def _baddbmm():
    i, b1, b2 = randn(3, 5, 7), randn(3, 5, 11), randn(3, 11, 7)
    return _spec([("input", i, True), ("b1", b1, True), ("b2", b2, True)],
                 lambda t, dt: {"out": torch.baddbmm(t["input"], t["b1"], t["b2"], beta=0.5,
                                                     alpha=2.0)},
                 "out = 0.5 * input + 2 * bmm(b1, b2); input [3,5,7], b1 [3,5,11], b2 [3,11,7]",
                 {"beta": 0.5, "alpha": 2.0})


def _matmul_case(name, sa, sb, doc):
    @op(name)
    def _m():
        a, b = randn(*sa), randn(*sb)
        return _spec([("a", a, True), ("b", b, True)],
                     lambda t, dt: {"out": torch.matmul(t["a"], t["b"])}, doc)


_matmul_case("matmul_batch_broadcast", (2, 1, 5, 6), (3, 6, 4),
             "out = a @ b with batch dims broadcast; a [2,1,5,6], b [3,6,4] -> [2,3,5,4]")
_matmul_case("matmul_vec_mat", (6,), (2, 6, 4), "out = a @ b; a [6] (a row), b [2,6,4] -> [2,4]")
_matmul_case("matmul_mat_vec", (2, 5, 6), (6,), "out = a @ b; a [2,5,6], b [6] (a column) -> [2,5]")
_matmul_case("matmul_vec_vec", (9,), (9,), "out = a @ b; a [9], b [9] -> [] (the dot product)")


def _einsum_case(name, eq, sa, sb=None):
    @op(name)
    def _e():
        ins = [("a", randn(*sa), True)] + ([("b", randn(*sb), True)] if sb else [])
        f = (lambda t, dt: {"out": torch.einsum(eq, t["a"], t["b"])}) if sb else (
            lambda t, dt: {"out": torch.einsum(eq, t["a"])})
        shapes = f"a {list(sa)}" + (f", b {list(sb)}" if sb else "")
        return _spec(ins, f, f"out = einsum('{eq}'); {shapes}", {"equation": eq})


_einsum_case("einsum_bmm", "bij,bjk->bik", (3, 4, 5), (3, 5, 6))
_einsum_case("einsum_implicit", "ij,kj", (4, 5), (6, 5))
_einsum_case("einsum_diagonal_sum", "iij,jk->ik", (4, 4, 5), (5, 3))
_einsum_case("einsum_ellipsis", "...ij,...jk->...ik", (2, 1, 3, 4), (5, 4, 2))
_einsum_case("einsum_single", "ijk->kj", (3, 4, 5))


def _signed(lo, hi, *shape):
    return away_from_zero(lo, hi, *shape)


@op("prod_all")
def _prod_all():
    x = _signed(0.8, 1.25, 3, 7, 5)
    return _spec([("x", x, True)], _in_f32(lambda t: {"out": t["x"].prod()}),
                 "out = product of all elements; x [3,7,5], |x| in [0.8, 1.25]",
                 compute_bf16=NO_BF16)


@op("prod_dim1_zeros")
def _prod_dim1_zeros():
    x = _signed(0.5, 2.0, 3, 7, 5)
    x[0, 2, 1] = 0.0  # one zero in a slice
    x[1, 3, 2] = 0.0  # two zeros in another
    x[1, 5, 2] = 0.0
    return _spec([("x", x, True)], _in_f32(lambda t: {"out": t["x"].prod(dim=1)}),
                 "out = x.prod(dim=1) [3,5]; x [3,7,5] with zeros (one in a slice, two in another)",
                 {"dim": 1}, compute_bf16=NO_BF16)


@op("cumsum_dim1")
def _cumsum():
    x = randn(3, 7, 5)
    return _spec([("x", x, True)], lambda t, dt: {"out": t["x"].cumsum(dim=1)},
                 "out = x.cumsum(dim=1); x [3,7,5]", {"dim": 1})


@op("logsumexp_dim1")
def _logsumexp():
    x = randn(3, 7, 5, scale=3.0)
    return _spec([("x", x, True)], lambda t, dt: {"out": torch.logsumexp(t["x"], dim=1)},
                 "out = log(sum(exp(x), dim=1)) [3,5]; x [3,7,5]", {"dim": 1})


def _ties(*shape):
    # Distinct magnitudes k/16 with some exact ties of opposite sign (the inf norm splits).
    x = _distinct(*shape)
    flat = x.view(-1)
    flat[1] = -flat[0]
    return x


def _norm_case(name, ord_, dim, make):
    @op(name)
    def _n():
        x = make()
        kw = {} if dim is None else {"dim": dim}
        what = "all elements" if dim is None else f"dim={dim}"
        args = {"ord": ord_ if ord_ != math.inf else "inf"}
        if dim is not None:
            args["dim"] = dim
        return _spec([("x", x, True)],
                     lambda t, dt: {"out": torch.linalg.vector_norm(t["x"], ord_, **kw)},
                     f"out = vector_norm(x, ord={ord_}) over {what}; x [3,7,5]", args)


_norm_case("vector_norm_l1_all", 1, None, lambda: randn(3, 7, 5))
_norm_case("vector_norm_l1_dim1", 1, 1, lambda: randn(3, 7, 5))
_norm_case("vector_norm_p3_dim1", 3, 1, lambda: randn(3, 7, 5))
_norm_case("vector_norm_inf_all", math.inf, None, lambda: _ties(3, 7, 5))
_norm_case("vector_norm_inf_dim1", math.inf, 1, lambda: _distinct(3, 7, 5))


def _pair(scale_t=1.0):
    return randn(4, 6), randn(4, 6, scale=scale_t)


@op("mse_loss")
def _mse():
    x, y = _pair()
    return _spec([("input", x, True), ("target", y, True)],
                 _in_f32(lambda t: {"out": F.mse_loss(t["input"], t["target"])}),
                 "out = mean((input - target)^2); input, target [4,6]",
                 {"reduction": "mean"}, compute_bf16=NO_BF16)


@op("l1_loss_sum")
def _l1():
    x, y = _pair()
    y[0, :3] = x[0, :3]  # equal elements: the gradient is 0 there
    return _spec([("input", x, True), ("target", y, True)],
                 lambda t, dt: {"out": F.l1_loss(t["input"], t["target"], reduction="sum")},
                 "out = sum(|input - target|); input, target [4,6], 3 elements equal",
                 {"reduction": "sum"})


@op("smooth_l1_loss")
def _smooth_l1():
    x, y = _pair()
    return _spec([("input", x, True), ("target", y, True)],
                 lambda t, dt: {"out": F.smooth_l1_loss(t["input"], t["target"], beta=0.5)},
                 "out = mean(smooth_l1(input - target, beta=0.5)); input, target [4,6]",
                 {"reduction": "mean", "beta": 0.5})


@op("kl_div_batchmean")
def _kl_div():
    x = torch.log_softmax(randn(4, 6).double(), dim=1).float()
    y = torch.softmax(randn(4, 6).double(), dim=1).float()
    return _spec([("input", x, True), ("target", y, True)],
                 lambda t, dt: {"out": F.kl_div(t["input"], t["target"], reduction="batchmean")},
                 "out = sum(target * (log(target) - input)) / 4; input log-probs, target probs [4,6]",
                 {"reduction": "batchmean"})


@op("kl_div_log_target")
def _kl_div_log():
    x = torch.log_softmax(randn(4, 6).double(), dim=1).float()
    y = torch.log_softmax(randn(4, 6).double(), dim=1).float()
    return _spec([("input", x, True), ("target", y, True)],
                 lambda t, dt: {"out": F.kl_div(t["input"], t["target"], reduction="sum",
                                                log_target=True)},
                 "out = sum(exp(target) * (target - input)); both log-probs [4,6]",
                 {"reduction": "sum", "log_target": True})


@op("bce_with_logits")
def _bce_logits():
    x, y = randn(4, 6, scale=5.0), uniform(0.0, 1.0, 4, 6)
    w, pw = uniform(0.5, 2.0, 4, 6), uniform(0.5, 3.0, 6)
    return _spec([("input", x, True), ("target", y, True), ("weight", w, False),
                  ("pos_weight", pw, False)],
                 lambda t, dt: {"out": F.binary_cross_entropy_with_logits(
                     t["input"], t["target"], weight=t["weight"], pos_weight=t["pos_weight"])},
                 "out = mean(weight * BCE-with-logits(input, target, pos_weight)); [4,6], "
                 "pos_weight [6]", {"reduction": "mean"})


@op("binary_cross_entropy")
def _bce():
    p, y = uniform(0.05, 0.95, 4, 6), uniform(0.0, 1.0, 4, 6)
    return _spec([("input", p, True), ("target", y, True)],
                 _in_f32(lambda t: {"out": F.binary_cross_entropy(t["input"], t["target"])}),
                 "out = mean(-(target log p + (1 - target) log(1 - p))); p in [0.05, 0.95] [4,6]",
                 {"reduction": "mean"}, compute_bf16=NO_BF16)


@op("nll_loss")
def _nll():
    x = torch.log_softmax(randn(5, 4).double(), dim=1).float()
    target = torch.tensor([2, 0, -100, 1, 2], dtype=torch.int64)
    w = torch.tensor([1.0, 2.0, 0.5, 1.5])
    return _spec([("input", x, True), ("target", target, False), ("weight", w, False)],
                 lambda t, dt: {"out": F.nll_loss(t["input"], t["target"], weight=t["weight"])},
                 "out = -sum(w[t] x[n, t]) / sum(w[t]) over kept rows; input [5,4], target i64 [5] "
                 "with one ignore_index (-100), weight [4]", {"reduction": "mean",
                                                             "ignore_index": -100})


@op("nll_loss_spatial")
def _nll_spatial():
    x = torch.log_softmax(randn(2, 4, 3).double(), dim=1).float()
    target = torch.tensor([[0, 3, 1], [2, 2, 0]], dtype=torch.int64)
    return _spec([("input", x, True), ("target", target, False)],
                 lambda t, dt: {"out": F.nll_loss(t["input"], t["target"], reduction="none")},
                 "out[n, d] = -input[n, target[n, d], d]; input [2,4,3], target i64 [2,3]",
                 {"reduction": "none"})


@op("cosine_similarity")
def _cosine():
    a, b = randn(4, 6), randn(1, 6)
    return _spec([("x1", a, True), ("x2", b, True)],
                 lambda t, dt: {"out": F.cosine_similarity(t["x1"], t["x2"], dim=1)},
                 "out = sum(x1 / |x1| * x2 / |x2|, dim=1); x1 [4,6], x2 [1,6] broadcast",
                 {"dim": 1, "eps": 1e-8})


@op("stack")
def _stack():
    a, b, c = randn(3, 4), randn(3, 4), randn(3, 4)
    return _spec([("a", a, True), ("b", b, True), ("c", c, True)],
                 lambda t, dt: {"out": torch.stack([t["a"], t["b"], t["c"]], dim=1)},
                 "out = stack([a, b, c], dim=1); each [3,4] -> [3,3,4]", {"dim": 1})


@op("addcmul")
def _addcmul():
    i, t1, t2 = randn(4, 1, 5), randn(3, 1), randn(4, 3, 5)
    return _spec([("input", i, True), ("t1", t1, True), ("t2", t2, True)],
                 lambda t, dt: {"out": torch.addcmul(t["input"], t["t1"], t["t2"], value=0.5)},
                 "out = input + 0.5 * t1 * t2; input [4,1,5], t1 [3,1], t2 [4,3,5]", {"value": 0.5})


@op("addcdiv")
def _addcdiv():
    i, t1 = randn(4, 1, 5), randn(3, 1)
    t2 = away_from_zero(0.5, 2.0, 4, 3, 5)
    return _spec([("input", i, True), ("t1", t1, True), ("t2", t2, True)],
                 lambda t, dt: {"out": torch.addcdiv(t["input"], t["t1"], t["t2"], value=-0.7)},
                 "out = input - 0.7 * t1 / t2; input [4,1,5], t1 [3,1], t2 [4,3,5], |t2| >= 0.5",
                 {"value": -0.7})


@op("where")
def _where():
    cond = torch.rand(4, 1, dtype=torch.float64) > 0.5
    cond[0, 0], cond[1, 0] = True, False
    x, y = randn(4, 5), randn(5)
    return _spec([("cond", cond, False), ("x", x, True), ("y", y, True)],
                 lambda t, dt: {"out": torch.where(t["cond"], t["x"], t["y"])},
                 "out = where(cond, x, y); cond bool [4,1], x [4,5], y [5]")


def _index_put_case(name, accumulate):
    @op(name)
    def _ip():
        x = randn(6, 5)
        if accumulate:
            index = torch.tensor([4, 0, -2, 2], dtype=torch.int64)  # -2 is 4 again
        else:
            index = torch.tensor([4, 0, -1, 2], dtype=torch.int64)
        values = randn(4, 5)
        return _spec([("x", x, True), ("index", index, False), ("values", values, True)],
                     lambda t, dt: {"out": t["x"].index_put((t["index"],), t["values"],
                                                            accumulate=accumulate)},
                     f"out = x.index_put((index,), values, accumulate={accumulate}); x [6,5], "
                     "index i64 [4] (negative counts from the end), values [4,5]",
                     {"accumulate": accumulate})


_index_put_case("index_put", False)
_index_put_case("index_put_accumulate", True)


@op("pow_tensor")
def _pow_tensor():
    x, e = uniform(0.1, 3.0, 4, 1, 5), randn(3, 1)
    return _spec([("x", x, True), ("exponent", e, True)],
                 lambda t, dt: {"out": torch.pow(t["x"], t["exponent"])},
                 "out = x ^ exponent; x [4,1,5] in [0.1, 3], exponent [3,1]")


def build(name):
    torch.manual_seed(seed_of(name))
    spec = OPS[name]()
    # Upstream gradients come from their own fixed seed (shape known only after the forward).
    spec["grad_seed"] = seed_of(name + "/grad_out")
    return spec


def run(spec, dtype, widen_from=None):
    """Runs forward + backward. dtype: compute/storage dtype of the float tensors.
    widen_from: if set (bf16), float inputs and grad_out are first rounded to that dtype and
    then widened to `dtype` (the f32 reference on bf16-rounded inputs).
    Returns (inputs, outputs, grad_outs, grads) as ordered lists of (name, tensor)."""

    def conv(x):
        if not x.is_floating_point():
            return x.clone()
        if widen_from is not None:
            x = x.to(widen_from)
        return x.to(dtype)

    leaves = {}
    inputs = []
    for name, x, diff in spec["inputs"]:
        t = conv(x).detach()
        if diff:
            t.requires_grad_(True)
        leaves[name] = t
        inputs.append((name, t))
    outs = spec["fn"](leaves, dtype)
    gen = torch.Generator().manual_seed(spec["grad_seed"])
    outputs, grad_outs, diff_outs, diff_grads = [], [], [], []
    for oname, o in outs.items():
        outputs.append((oname, o))
        if o.is_floating_point():
            g = conv(torch.randn(o.shape, generator=gen, dtype=torch.float64).float())
            gname = "grad_out" if oname == "out" else "grad_" + oname
            grad_outs.append((gname, g))
            diff_outs.append(o)
            diff_grads.append(g)
    torch.autograd.backward(diff_outs, diff_grads)
    grads = [("grad_" + n, leaves[n].grad) for n, _, d in spec["inputs"] if d]
    for n, g in grads:
        assert g is not None, n
    return inputs, outputs, grad_outs, grads


def fixture(name, dtype_name):
    spec = build(name)
    dtype = DTYPES[dtype_name]
    inputs, outputs, grad_outs, grads = run(spec, dtype)
    if dtype_name == "f32":
        compute = "f32"
    else:
        compute = spec.get("compute_bf16", "pytorch cpu bf16 ops")
    meta = {
        "torch_version": torch.__version__,
        "op": name,
        "dtype": dtype_name,
        "compute": compute,
        "semantics": spec["doc"],
    }
    for k, v in spec["args"].items():
        meta[k] = json.dumps(v)
    tensors = [(n, t.detach()) for n, t in inputs + outputs + grad_outs + grads]
    return safetensors_bytes(tensors, meta), spec


# ---------------------------------------------------------------------------------------------
# bf16 vs f32 comparison (tolerance guidance)
# ---------------------------------------------------------------------------------------------


def compare(name):
    """bf16 PyTorch result vs the f32 result on the same bf16-rounded inputs/grad_out.
    Returns rows (op, tensor, max_abs, max_rel, ref_scale, eq_pct)."""
    spec = build(name)
    _, out_b, _, grads_b = run(spec, torch.bfloat16)
    spec = build(name)
    _, out_f, _, grads_f = run(spec, torch.float32, widen_from=torch.bfloat16)
    rows = []
    for (n, b), (_, f) in zip(out_b + grads_b, out_f + grads_f):
        b, f = b.detach(), f.detach()
        if not b.is_floating_point():
            rows.append((name, n, None, None, None, 100.0 * (b == f).float().mean().item()))
            continue
        bd, fd = b.double(), f.double()
        d = (bd - fd).abs()
        scale = fd.abs().max().item()
        floor = max(scale * 1e-2, 1e-30)
        rel = (d / fd.abs().clamp_min(floor)).max().item()
        eq = 100.0 * (b == f.to(torch.bfloat16)).float().mean().item()
        rows.append((name, n, d.max().item(), rel, scale, eq))
    return rows


def format_table(rows):
    lines = [
        "| op | tensor | max abs diff | max rel diff | max abs(ref) | % == bf16(ref) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for op_name, n, a, r, s, eq in rows:
        if a is None:
            lines.append(f"| {op_name} | {n} | (integer) | | | {eq:.1f} |")
        else:
            lines.append(f"| {op_name} | {n} | {a:.3g} | {r:.3g} | {s:.3g} | {eq:.1f} |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="regenerate in memory; fail if a file on disk differs (writes nothing)")
    ap.add_argument("--update-readme", action="store_true",
                    help="rewrite the tolerance table in README.md")
    ap.add_argument("--only", nargs="*", help="op names to generate (default: all)")
    args = ap.parse_args()

    names = args.only or list(OPS)
    for n in names:
        if n not in OPS:
            sys.exit(f"unknown op {n!r}; known: {', '.join(OPS)}")
    os.makedirs(FIXTURES, exist_ok=True)
    total, bad = 0, []
    for name in names:
        for dn in DTYPES:
            data, _ = fixture(name, dn)
            path = os.path.join(FIXTURES, f"{name}_{dn}.safetensors")
            total += len(data)
            if args.check:
                old = open(path, "rb").read() if os.path.exists(path) else None
                if old != data:
                    bad.append(path)
                continue
            tmp = path + ".tmp"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
            read_safetensors(path)
    print(f"{len(names) * len(DTYPES)} fixtures, {total} bytes ({total / 1024:.1f} KiB)")
    if args.check:
        if bad:
            print("differ from regenerated:\n  " + "\n  ".join(bad))
            sys.exit(1)
        print("all fixtures match")
        return

    rows = [r for name in names for r in compare(name)]
    table = format_table(rows)
    print()
    print(f"bf16 (torch {torch.__version__} CPU) vs f32 on the same bf16-rounded inputs:")
    print(table)
    if args.update_readme:
        text = open(README).read()
        b, e = text.index(TABLE_BEGIN), text.index(TABLE_END)
        text = text[: b + len(TABLE_BEGIN)] + "\n" + table + "\n" + text[e:]
        with open(README, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
