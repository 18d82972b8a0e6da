#!/usr/bin/python3
"""Independent float64 reference of HF's Llama, GPT-2, Qwen 3, DeepSeek-V3 for mixprec's HF I/O.

Debian has no `transformers` (nor the `safetensors` Python package), so this file rebuilds
the math of LlamaForCausalLM, GPT2LMHeadModel, Qwen3ForCausalLM and DeepseekV3ForCausalLM in
plain PyTorch from Hugging Face's published definitions (no code copied from transformers),
reads and writes the Hugging Face checkpoint layout (config.json + model.safetensors, or
model-0000k-of-0000n.safetensors shards + model.safetensors.index.json) with its own
safetensors codec, and computes logits in float64 from the stored weights (F32 or BF16,
widened before any arithmetic).

DeepSeek-V3 (model_type "deepseek_v3"): MLA attention (q LoRA or a single q_proj, latent kv,
decoupled RoPE with rope_interleave, YaRN), dense SwiGLU layers below first_k_dense_replace,
then sigmoid-routed group-limited top-k experts plus shared experts. Its router runs in f64
(HF: f32); a routing decision that is an exact tie (which HF would settle by torch.topk's
unspecified order) is refused. Multi-token-prediction layers (model.layers.<L+k>.*) are
skipped, as HF does; FP8 checkpoints are not read.

Run with Debian 12's python3-torch (torch 1.13):

    /usr/bin/python3 tests/reference/hf_models.py logits DIR TOKENS OUT
        DIR: HF checkpoint folder; TOKENS: safetensors with "tokens" (integer [B, T]);
        OUT: safetensors with "logits" F32 [B, T, vocab] and "logits_f64" F64.
    /usr/bin/python3 tests/reference/hf_models.py init DIR
        --family llama|gpt2|qwen3|deepseek_v3 --config JSON
        --seed N [--dtype f32|bf16] [--shard-bytes N]
        Writes DIR/config.json (the JSON plus model_type, architectures, torch_dtype) and
        seeded random weights (matrices and biases ~ N(0, 0.02), norm weights 1 + N(0, 0.1);
        deepseek_v3's router weights N(0, 1/hidden_size) and e_score_correction_bias
        0.5 |N(0, 1)|, the bias F32 whatever --dtype).
    /usr/bin/python3 tests/reference/hf_models.py selftest

Exit status 0 on success; otherwise non-zero with a one-line message on stderr.
"""

import argparse
import ctypes
import itertools
import json
import math
import os
import re
import struct
import sys
import tempfile

import torch
import torch.nn as nn

# ---------------------------------------------------------------------------------------------
# safetensors
# ---------------------------------------------------------------------------------------------

ST_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U8": torch.uint8, "BOOL": torch.bool,
}
ST_NAMES = {v: k for k, v in ST_DTYPES.items()}
SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"


class InputError(Exception):
    """A problem with the inputs (bad file, bad config); reported as one line on stderr."""


def check(cond, msg):
    if not cond:
        raise InputError(msg)


def tensor_bytes(t):
    t = t.detach().contiguous()
    return ctypes.string_at(t.data_ptr(), t.numel() * t.element_size()) if t.numel() else b""


def safetensors_bytes(tensors, metadata=None):
    """tensors: list of (name, tensor) in file order. Compact header, padded to 8 bytes."""
    assert sys.byteorder == "little"
    header = {"__metadata__": dict(metadata or {"format": "pt"})}
    blobs, offset = [], 0
    for name, t in tensors:
        check(name not in header, f"duplicate tensor name {name!r}")
        check(t.dtype in ST_NAMES, f"{name}: dtype {t.dtype} cannot be written")
        data = tensor_bytes(t)
        header[name] = {"dtype": ST_NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def write_safetensors(path, tensors, metadata=None):
    with open(path, "wb") as f:
        f.write(safetensors_bytes(tensors, metadata))


def parse_header(raw, path):
    check(len(raw) >= 8, f"{path}: shorter than 8 bytes")
    (n,) = struct.unpack("<Q", raw[:8])
    check(8 + n <= len(raw), f"{path}: header length {n} runs past the end of the file")
    try:
        header = json.loads(bytes(raw[8:8 + n]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise InputError(f"{path}: header is not JSON ({e})") from None
    check(isinstance(header, dict), f"{path}: header is not a JSON object")
    header.pop("__metadata__", None)
    return header, 8 + n


def read_safetensors(path):
    """Returns {name: tensor} in header order; checks dtypes, sizes and exact data coverage."""
    with open(path, "rb") as f:
        raw = bytearray(f.read())
    header, base = parse_header(raw, path)
    out, spans = {}, []
    for name, e in header.items():
        check(e.get("dtype") in ST_DTYPES, f"{path}: {name}: unknown dtype {e.get('dtype')!r}")
        dtype, shape, (b, end) = ST_DTYPES[e["dtype"]], e["shape"], e["data_offsets"]
        numel = math.prod(shape)
        size = numel * torch.empty((), dtype=dtype).element_size()
        check(0 <= b <= end and end - b == size, f"{path}: {name}: data_offsets {[b, end]} "
              f"do not match shape {shape} {e['dtype']}")
        check(base + end <= len(raw), f"{path}: {name}: data runs past the end of the file")
        spans.append((b, end))
        if numel == 0:
            out[name] = torch.empty(shape, dtype=dtype)
        else:
            flat = torch.frombuffer(raw, dtype=dtype, count=numel, offset=base + b)
            out[name] = flat.clone().reshape(shape)
    pos = 0
    for b, end in sorted(spans):
        check(b == pos, f"{path}: data section has a hole or an overlap at byte {b}")
        pos = end
    check(base + pos == len(raw), f"{path}: {len(raw) - base - pos} trailing bytes")
    return out


def read_checkpoint_tensors(folder):
    """All tensors of an HF folder: model.safetensors, or shards listed by the index json."""
    index_path = os.path.join(folder, INDEX_FILE)
    if not os.path.exists(index_path):
        return read_safetensors(os.path.join(folder, SINGLE_FILE))
    with open(index_path) as f:
        index = json.load(f)
    weight_map = index.get("weight_map")
    check(isinstance(weight_map, dict), f"{index_path}: no weight_map object")
    tensors, total = {}, 0
    for shard in dict.fromkeys(weight_map.values()):
        check(os.path.basename(shard) == shard, f"{index_path}: bad shard name {shard!r}")
        part = read_safetensors(os.path.join(folder, shard))
        listed = {k for k, v in weight_map.items() if v == shard}
        check(set(part) == listed, f"{shard}: holds {sorted(set(part) - listed)} not in the "
              f"weight_map, lacks {sorted(listed - set(part))}")
        for name, t in part.items():
            tensors[name] = t
            total += t.numel() * t.element_size()
    declared = index.get("metadata", {}).get("total_size")
    check(declared is None or declared == total,
          f"{index_path}: metadata.total_size {declared} but the tensors hold {total} bytes")
    return tensors


def shard_plan(tensors, shard_bytes):
    """Groups tensors in order; a new shard starts when the next tensor would pass the limit."""
    shards, size = [[]], 0
    for name, t in tensors:
        n = t.numel() * t.element_size()
        if shards[-1] and size + n > shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append((name, t))
        size += n
    return shards


def write_checkpoint_tensors(folder, tensors, shard_bytes=None):
    """Writes model.safetensors, or shards plus the index when the total exceeds shard_bytes."""
    total = sum(t.numel() * t.element_size() for _, t in tensors)
    if shard_bytes is None or total <= shard_bytes:
        write_safetensors(os.path.join(folder, SINGLE_FILE), tensors)
        return [SINGLE_FILE]
    shards = shard_plan(tensors, shard_bytes)
    names = [f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors" for k in range(len(shards))]
    weight_map = {}
    for file_name, part in zip(names, shards):
        write_safetensors(os.path.join(folder, file_name), part)
        weight_map.update((name, file_name) for name, _ in part)
    with open(os.path.join(folder, INDEX_FILE), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
        f.write("\n")
    return names + [INDEX_FILE]


# ---------------------------------------------------------------------------------------------
# shared pieces
# ---------------------------------------------------------------------------------------------


def causal_attention(q, k, v, scale):
    """q, k, v: [B, H, T, D]. Softmax(q k^T * scale) v with keys after the query masked out."""
    t = q.shape[-2]
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    future = torch.ones(t, t, dtype=torch.bool).triu(1)
    scores = scores.masked_fill(future, float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v)


def split_heads(x, heads):
    b, t, _ = x.shape
    return x.view(b, t, heads, -1).transpose(1, 2)


def merge_heads(x):
    b, h, t, d = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d)


def cfg_get(cfg, key, default):
    value = cfg.get(key)
    return default if value is None else value


def cfg_int(cfg, key):
    check(isinstance(cfg.get(key), int), f"config.json: {key!r} missing or not an integer")
    return cfg[key]


# ---------------------------------------------------------------------------------------------
# Llama (LlamaForCausalLM)
# ---------------------------------------------------------------------------------------------


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def llama3_scaled(inv_freq, rs):
    """Llama 3.1's rope_scaling (rope_type "llama3"), from its published definition: a
    frequency whose wavelength exceeds original / low_freq_factor positions is divided by
    factor, one under original / high_freq_factor is kept, and between the two the result
    blends f / factor and f linearly in original / wavelength."""
    factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    original = rs["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv_freq
    s = (original / wavelen - low) / (high - low)
    blended = (1 - s) * inv_freq / factor + s * inv_freq
    out = torch.where(wavelen > original / low, inv_freq / factor, blended)
    return torch.where(wavelen < original / high, inv_freq, out)


def rope_cos_sin(t, head_dim, theta, scaling=None):
    """cos, sin [T, head_dim]: angle pos * theta^(-2i/head_dim) (scaled per `scaling`, a
    config.json rope_scaling), duplicated over both halves."""
    inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    if scaling is not None:
        inv_freq = llama3_scaled(inv_freq, scaling)
    angles = torch.outer(torch.arange(t, dtype=torch.float64), inv_freq)
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos(), angles.sin()


class LlamaAttention(nn.Module):
    """Llama's attention; with c["qk_norm"] Qwen 3's: an RMSNorm over each head's head_dim
    features of q and of k (one weight [head_dim] each, eps rms_norm_eps), applied after the
    projection is split into heads and before RoPE. v is not normalised."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        h, kv, d, bias = c["heads"], c["kv_heads"], c["head_dim"], c["attention_bias"]
        self.q_proj = nn.Linear(c["hidden"], h * d, bias=bias)
        self.k_proj = nn.Linear(c["hidden"], kv * d, bias=bias)
        self.v_proj = nn.Linear(c["hidden"], kv * d, bias=bias)
        self.o_proj = nn.Linear(h * d, c["hidden"], bias=bias)
        if c["qk_norm"]:
            self.q_norm = RMSNorm(d, c["eps"])
            self.k_norm = RMSNorm(d, c["eps"])

    def forward(self, x, cos, sin):
        c = self.c
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, c["heads"], c["head_dim"])
        k = self.k_proj(x).view(b, t, c["kv_heads"], c["head_dim"])
        if c["qk_norm"]:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        v = split_heads(self.v_proj(x), c["kv_heads"])
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        group = c["heads"] // c["kv_heads"]  # repeat_kv: kv head j serves j*g .. j*g+g-1
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        out = causal_attention(q, k, v, 1.0 / math.sqrt(c["head_dim"]))
        return self.o_proj(merge_heads(out))


class LlamaMLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        hid, inter, bias = c["hidden"], c["intermediate"], c["mlp_bias"]
        self.gate_proj = nn.Linear(hid, inter, bias=bias)
        self.up_proj = nn.Linear(hid, inter, bias=bias)
        self.down_proj = nn.Linear(inter, hid, bias=bias)

    def forward(self, x):
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input_layernorm = RMSNorm(c["hidden"], c["eps"])
        self.self_attn = LlamaAttention(c)
        self.post_attention_layernorm = RMSNorm(c["hidden"], c["eps"])
        self.mlp = LlamaMLP(c)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab"], c["hidden"])
        self.layers = nn.ModuleList(LlamaDecoderLayer(c) for _ in range(c["layers"]))
        self.norm = RMSNorm(c["hidden"], c["eps"])


class LlamaForCausalLM(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c = self.settings(cfg)
        self.c = c
        self.model = LlamaModel(c)
        self.lm_head = nn.Linear(c["hidden"], c["vocab"], bias=False)

    def embedding(self):
        return self.model.embed_tokens

    def forward(self, tokens):
        cos, sin = rope_cos_sin(tokens.shape[1], self.c["head_dim"], self.c["rope_theta"],
                                self.c["rope_scaling"])
        x = self.model.embed_tokens(tokens)
        for layer in self.model.layers:
            x = layer(x, cos, sin)
        return self.lm_head(self.model.norm(x))


def llama_settings(cfg):
    """HF LlamaConfig fields (and their defaults) that the math depends on."""
    check(cfg_get(cfg, "hidden_act", "silu") == "silu", "llama: only hidden_act 'silu' is known")
    scaling = cfg.get("rope_scaling")
    if scaling is not None:
        kind = scaling.get("rope_type", scaling.get("type"))
        check(kind == "llama3", "llama: rope_scaling of type %r is not supported" % kind)
    hidden, heads = cfg_int(cfg, "hidden_size"), cfg_int(cfg, "num_attention_heads")
    kv_heads = cfg_get(cfg, "num_key_value_heads", heads)
    check(heads % kv_heads == 0, "llama: num_attention_heads % num_key_value_heads != 0")
    head_dim = cfg_get(cfg, "head_dim", hidden // heads)
    check(head_dim % 2 == 0 and (cfg.get("head_dim") or hidden % heads == 0),
          "llama: head_dim must be even and hidden_size divisible by num_attention_heads")
    return {
        "hidden": hidden, "heads": heads, "kv_heads": kv_heads, "head_dim": head_dim,
        "intermediate": cfg_int(cfg, "intermediate_size"), "vocab": cfg_int(cfg, "vocab_size"),
        "layers": cfg_int(cfg, "num_hidden_layers"), "eps": cfg_get(cfg, "rms_norm_eps", 1e-6),
        "rope_theta": float(cfg_get(cfg, "rope_theta", 10000.0)),
        "rope_scaling": scaling,
        "attention_bias": bool(cfg_get(cfg, "attention_bias", False)),
        "mlp_bias": bool(cfg_get(cfg, "mlp_bias", False)),
        "tied": bool(cfg_get(cfg, "tie_word_embeddings", False)),
        "qk_norm": False,
    }


LlamaForCausalLM.settings = staticmethod(llama_settings)


# ---------------------------------------------------------------------------------------------
# Qwen 3 (Qwen3ForCausalLM): Llama's decoder with per-head q/k RMSNorm before RoPE, head_dim
# from the config, its own config defaults
# ---------------------------------------------------------------------------------------------


def qwen3_settings(cfg):
    """HF Qwen3Config fields (and its defaults, which are not Llama's: head_dim 128, 32 kv
    heads when the key is absent, eps 1e-6) that the math depends on. Sliding-window layers
    (use_sliding_window, layer_types) are not modelled: refused."""
    check(cfg_get(cfg, "hidden_act", "silu") == "silu", "qwen3: only hidden_act 'silu' is known")
    check(cfg.get("rope_scaling") is None, "qwen3: rope_scaling is not supported here")
    heads, layers = cfg_int(cfg, "num_attention_heads"), cfg_int(cfg, "num_hidden_layers")
    kv_heads = cfg.get("num_key_value_heads", 32)
    kv_heads = heads if kv_heads is None else kv_heads
    check(heads % kv_heads == 0, "qwen3: num_attention_heads % num_key_value_heads != 0")
    head_dim = cfg_get(cfg, "head_dim", 128)
    check(head_dim % 2 == 0, "qwen3: head_dim must be even")
    window = cfg.get("sliding_window", 4096) if cfg_get(cfg, "use_sliding_window", False) else None
    first_windowed = cfg_get(cfg, "max_window_layers", 28)
    types = cfg.get("layer_types") or [
        "sliding_attention" if window is not None and i >= first_windowed else "full_attention"
        for i in range(layers)]
    check(all(t == "full_attention" for t in types),
          f"qwen3: sliding-window layers are not modelled (layer_types {types})")
    return {
        "hidden": cfg_int(cfg, "hidden_size"), "heads": heads, "kv_heads": kv_heads,
        "head_dim": head_dim, "intermediate": cfg_int(cfg, "intermediate_size"),
        "vocab": cfg_int(cfg, "vocab_size"), "layers": layers,
        "eps": cfg_get(cfg, "rms_norm_eps", 1e-6),
        "rope_theta": float(cfg_get(cfg, "rope_theta", 10000.0)), "rope_scaling": None,
        "attention_bias": bool(cfg_get(cfg, "attention_bias", False)), "mlp_bias": False,
        "tied": bool(cfg_get(cfg, "tie_word_embeddings", False)), "qk_norm": True,
    }


class Qwen3ForCausalLM(LlamaForCausalLM):
    settings = staticmethod(qwen3_settings)


# ---------------------------------------------------------------------------------------------
# DeepSeek-V3 (DeepseekV3ForCausalLM): multi-head latent attention (MLA) whose RoPE acts on a
# separate slice of each head (optionally YaRN-scaled), dense SwiGLU layers first, then a
# mixture of experts routed by sigmoid scores (group-limited top-k) plus shared experts
# ---------------------------------------------------------------------------------------------

# HF builds q_a_layernorm and kv_a_layernorm without passing rms_norm_eps: RMSNorm's own 1e-6.
DSV3_LATENT_EPS = 1e-6
DSV3_YARN_KEYS = {"type", "rope_type", "rope_theta", "factor", "original_max_position_embeddings",
                  "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "attention_factor",
                  "truncate"}


def yarn_mscale(factor, mscale=1.0):
    """YaRN's magnitude factor 1 + 0.1 * mscale * ln(factor); exactly 1 when factor <= 1."""
    return 1.0 if factor <= 1 else 1.0 + 0.1 * mscale * math.log(factor)


def yarn_correction_range(dim, theta, original, beta_fast, beta_slow, truncate):
    """The frequency indices [low, high] over which YaRN moves from keeping a frequency to
    dividing it by the factor. The index whose pair turns `turns` times over `original`
    positions solves original * theta^(-2i/dim) = 2 pi turns; beta_fast gives low, beta_slow
    high; rounded outwards (floor, ceil) unless truncate is false, clipped to [0, dim - 1]."""
    def index(turns):
        return dim * math.log(original / (2 * math.pi * turns)) / (2 * math.log(theta))
    low, high = index(beta_fast), index(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    return max(low, 0), min(high, dim - 1)


def yarn_inv_freq(dim, theta, y):
    """theta^(-2i/dim) for i < dim/2, blended towards itself / factor by a ramp that is 0 up to
    the correction range's low index and 1 from its high index on."""
    inv_freq = theta ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    low, high = yarn_correction_range(dim, theta, y["original"], y["beta_fast"], y["beta_slow"],
                                      y["truncate"])
    if high == low:
        high += 0.001
    ramp = ((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    return inv_freq / y["factor"] * ramp + inv_freq * (1 - ramp)


def dsv3_cos_sin(t, c):
    """cos, sin [T, qk_rope_head_dim] as rope_cos_sin, from YaRN's frequencies when configured,
    both multiplied by YaRN's attention_factor."""
    d, y = c["rope_dim"], c["yarn"]
    if y is None:
        inv_freq, amplitude = c["rope_theta"] ** (
            -torch.arange(0, d, 2, dtype=torch.float64) / d), 1.0
    else:
        inv_freq, amplitude = yarn_inv_freq(d, c["rope_theta"], y), y["attention_factor"]
    angles = torch.outer(torch.arange(t, dtype=torch.float64), inv_freq)
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos() * amplitude, angles.sin() * amplitude


def deinterleave(x):
    """Last dim [x0, x1, x2, x3, ...] -> [x0, x2, ..., x1, x3, ...]: the adjacent pairs that
    DeepSeek's checkpoints rotate together become the (i, i + D/2) pairs of rotate_half."""
    return torch.cat((x[..., 0::2], x[..., 1::2]), dim=-1)


def swiglu(hidden, inter):
    return LlamaMLP({"hidden": hidden, "intermediate": inter, "mlp_bias": False})


class DeepseekV3Attention(nn.Module):
    """MLA. q = q_proj(x), or q_b_proj(q_a_layernorm(q_a_proj(x))) with a q LoRA rank; each
    head's q is [nope | rot]. kv_a_proj_with_mqa(x) = [latent (kv_lora_rank) | k_rot], k_rot
    one head that every head shares; kv_b_proj(kv_a_layernorm(latent)) is per head
    [k_nope | v]. RoPE turns only the rot parts (de-interleaved first with rope_interleave)."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        h, hid, dqk = c["heads"], c["hidden"], c["nope_dim"] + c["rope_dim"]
        if c["q_lora_rank"] is None:
            self.q_proj = nn.Linear(hid, h * dqk, bias=False)
        else:
            self.q_a_proj = nn.Linear(hid, c["q_lora_rank"], bias=False)
            self.q_a_layernorm = RMSNorm(c["q_lora_rank"], DSV3_LATENT_EPS)
            self.q_b_proj = nn.Linear(c["q_lora_rank"], h * dqk, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(hid, c["kv_lora_rank"] + c["rope_dim"], bias=False)
        self.kv_a_layernorm = RMSNorm(c["kv_lora_rank"], DSV3_LATENT_EPS)
        self.kv_b_proj = nn.Linear(c["kv_lora_rank"], h * (c["nope_dim"] + c["v_dim"]),
                                   bias=False)
        self.o_proj = nn.Linear(h * c["v_dim"], hid, bias=False)

    def forward(self, x, cos, sin):
        c = self.c
        b, t, _ = x.shape
        h, dn, dr = c["heads"], c["nope_dim"], c["rope_dim"]
        if c["q_lora_rank"] is None:
            q = self.q_proj(x)
        else:
            q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x)))
        q_nope, q_rot = q.view(b, t, h, dn + dr).transpose(1, 2).split([dn, dr], dim=-1)
        latent, k_rot = self.kv_a_proj_with_mqa(x).split([c["kv_lora_rank"], dr], dim=-1)
        kv = self.kv_b_proj(self.kv_a_layernorm(latent)).view(b, t, h, -1).transpose(1, 2)
        k_nope, v = kv.split([dn, c["v_dim"]], dim=-1)
        k_rot = k_rot.view(b, 1, t, dr)
        if c["rope_interleave"]:
            q_rot, k_rot = deinterleave(q_rot), deinterleave(k_rot)
        q_rot = q_rot * cos + rotate_half(q_rot) * sin
        k_rot = k_rot * cos + rotate_half(k_rot) * sin
        q = torch.cat((q_nope, q_rot), dim=-1)
        k = torch.cat((k_nope, k_rot.expand(b, h, t, dr)), dim=-1)
        return self.o_proj(merge_heads(causal_attention(q, k, v, c["softmax_scale"])))


def refuse_ties(values, k, what):
    """The top-k of each row must be unique: a tie between the k-th and the (k+1)-th value
    leaves HF's pick to torch.topk's tie order, which nothing specifies."""
    if k >= values.shape[-1]:
        return
    top = values.topk(k + 1, dim=-1).values
    tied = (top[:, k - 1] == top[:, k]).nonzero().flatten()
    if tied.numel():
        row = int(tied[0])
        raise InputError(f"{what}: the top-{k} of token {row} is a tie (value "
                         f"{top[row, k].item()!r} in and out); HF's pick would be arbitrary")


def route(scores, bias, c, where="deepseek_v3"):
    """Experts [N, k] and their weights [N, k] for sigmoid scores [N, E], as HF's noaux_tc
    router: choice = scores + e_score_correction_bias; a group's score is the sum of its two
    best choices; only the topk_group best groups stay, the other groups' choices become 0.0
    (not -inf); the k best choices win; their weights are the scores without the bias,
    divided by (sum + 1e-20) with norm_topk_prob, times routed_scaling_factor."""
    n, e = scores.shape
    groups, per = c["n_group"], e // c["n_group"]
    choice = scores + bias
    group_score = choice.view(n, groups, per).topk(2, dim=-1).values.sum(-1)
    refuse_ties(group_score, c["topk_group"], f"{where}: group selection")
    kept = group_score.topk(c["topk_group"], dim=-1).indices
    keep = torch.zeros(n, groups, dtype=torch.bool).scatter(1, kept, True)
    choice = choice.masked_fill(~keep.repeat_interleave(per, dim=1), 0.0)
    refuse_ties(choice, c["top_k"], f"{where}: expert selection")
    experts = choice.topk(c["top_k"], dim=-1).indices
    weights = scores.gather(1, experts)
    if c["norm_topk_prob"]:
        weights = weights / (weights.sum(-1, keepdim=True) + 1e-20)
    return experts, weights * c["routed_scaling_factor"]


class DeepseekV3Router(nn.Module):
    """mlp.gate: weight [E, hidden] and e_score_correction_bias [E] (a buffer in HF, stored
    in the checkpoint); logits in float64 here (HF: float32)."""

    def __init__(self, c, layer_idx):
        super().__init__()
        self.c, self.layer_idx = c, layer_idx
        self.weight = nn.Parameter(torch.empty(c["experts"], c["hidden"]))
        self.e_score_correction_bias = nn.Parameter(torch.empty(c["experts"]))

    def forward(self, x):
        scores = torch.sigmoid(torch.matmul(x, self.weight.t()))
        return route(scores, self.e_score_correction_bias, self.c,
                     f"deepseek_v3: layer {self.layer_idx}")


class DeepseekV3MoE(nn.Module):
    """Routed SwiGLU experts (width moe_intermediate_size), each token's output the weighted
    sum of its top-k experts, plus the shared experts (one SwiGLU of width
    moe_intermediate_size * n_shared_experts) on every token."""

    def __init__(self, c, layer_idx):
        super().__init__()
        self.experts = nn.ModuleList(swiglu(c["hidden"], c["moe_intermediate"])
                                     for _ in range(c["experts"]))
        self.gate = DeepseekV3Router(c, layer_idx)
        self.shared_experts = swiglu(c["hidden"], c["moe_intermediate"] * c["shared_experts"])

    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])
        experts, weights = self.gate(flat)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            token, slot = torch.where(experts == e)
            if token.numel():  # run on every token: a row's result must not hang on the others'
                out.index_add_(0, token, expert(flat)[token] * weights[token, slot, None])
        return out.view_as(x) + self.shared_experts(x)


class DeepseekV3DecoderLayer(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.input_layernorm = RMSNorm(c["hidden"], c["eps"])
        self.self_attn = DeepseekV3Attention(c)
        self.post_attention_layernorm = RMSNorm(c["hidden"], c["eps"])
        self.mlp = (DeepseekV3MoE(c, layer_idx) if layer_idx >= c["first_k_dense_replace"]
                    else swiglu(c["hidden"], c["intermediate"]))

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class DeepseekV3Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab"], c["hidden"])
        self.layers = nn.ModuleList(DeepseekV3DecoderLayer(c, i) for i in range(c["layers"]))
        self.norm = RMSNorm(c["hidden"], c["eps"])


class DeepseekV3ForCausalLM(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c = deepseek_v3_settings(cfg)
        self.c = c
        self.model = DeepseekV3Model(c)
        self.lm_head = nn.Linear(c["hidden"], c["vocab"], bias=False)

    def embedding(self):
        return self.model.embed_tokens

    def forward(self, tokens):
        cos, sin = dsv3_cos_sin(tokens.shape[1], self.c)
        x = self.model.embed_tokens(tokens)
        for layer in self.model.layers:
            x = layer(x, cos, sin)
        return self.lm_head(self.model.norm(x))

    def init_tensor(self, name, noise, dtype):
        """init's exceptions to N(0, 0.02): router weights N(0, 1/hidden), so that the router
        logits spread by about 1 and routing is rarely close to a tie; the correction bias
        0.5 * |N(0, 1)|, large enough to change the routing, and positive, so that choices stay
        above the 0.0 of masked groups (an exact tie otherwise); stored F32 whatever --dtype,
        as in DeepSeek's checkpoints."""
        if name.endswith(".mlp.gate.weight"):
            return (noise / math.sqrt(self.c["hidden"])).to(dtype)
        if name.endswith(".mlp.gate.e_score_correction_bias"):
            return (0.5 * noise.abs()).to(torch.float32)
        return None


def dsv3_int(cfg, key, default, least=1):
    value = cfg.get(key, default)
    check(isinstance(value, int) and not isinstance(value, bool) and value >= least,
          f"deepseek_v3: {key!r} must be an integer >= {least} (got {value!r})")
    return value


def dsv3_number(value, what):
    check(isinstance(value, (int, float)) and not isinstance(value, bool),
          f"deepseek_v3: {what} must be a number (got {value!r})")
    return float(value)


def dsv3_bool(cfg, key, default):
    value = cfg.get(key, default)
    check(isinstance(value, bool), f"deepseek_v3: {key!r} must be true or false (got {value!r})")
    return value


def dsv3_rope(cfg, max_positions):
    """(rope_theta, yarn settings or None) from rope_scaling (or transformers 5's
    rope_parameters when rope_scaling is absent), as transformers >= 4.56.2 reads them: an
    explicit factor is used as given (4.51 - 4.55 replaced it by max_position_embeddings /
    original_max_position_embeddings); original_max_position_embeddings defaults to a
    top-level key of that name, then to max_position_embeddings; beta_fast / beta_slow 32 / 1
    when absent or 0; truncate true; attention_factor mscale(f, mscale) / mscale(f,
    mscale_all_dim) when both are non-zero, else mscale(f, 1)."""
    rs = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
    check(isinstance(rs, dict), "deepseek_v3: rope_scaling must be an object or null")
    theta = rs.get("rope_theta", cfg_get(cfg, "rope_theta", 10000.0))
    theta = dsv3_number(theta, "rope_theta")
    check(theta > 1, f"deepseek_v3: rope_theta must be above 1 (got {theta})")
    kind = rs.get("rope_type", rs.get("type", "default"))
    if kind == "default":
        extra = sorted(set(rs) - {"type", "rope_type", "rope_theta"})
        check(not extra, f"deepseek_v3: rope_scaling keys {extra} with rope_type 'default'")
        return theta, None
    check(kind == "yarn", f"deepseek_v3: rope_scaling of type {kind!r} is not supported "
          f"(only 'yarn' or none)")
    extra = sorted(set(rs) - DSV3_YARN_KEYS)
    check(not extra, f"deepseek_v3: rope_scaling keys {extra} are not modelled")
    factor = dsv3_number(rs.get("factor"), "rope_scaling.factor")
    check(factor > 0, f"deepseek_v3: rope_scaling.factor must be positive (got {factor})")
    original, top = rs.get("original_max_position_embeddings"), cfg.get(
        "original_max_position_embeddings")
    check(original is None or top is None or original == top,
          f"deepseek_v3: original_max_position_embeddings is {top} at the top level but "
          f"{original} in rope_scaling")
    original = dsv3_number(next(v for v in (original, top, max_positions) if v is not None),
                           "original_max_position_embeddings")
    check(original > 0, "deepseek_v3: original_max_position_embeddings must be positive")
    mscale, mscale_all_dim = rs.get("mscale"), rs.get("mscale_all_dim")
    for key, value in (("mscale", mscale), ("mscale_all_dim", mscale_all_dim)):
        if value is not None:
            dsv3_number(value, f"rope_scaling.{key}")
    attention_factor = rs.get("attention_factor")
    if attention_factor is None:
        attention_factor = (yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all_dim)
                            if mscale and mscale_all_dim else yarn_mscale(factor))
    truncate = rs.get("truncate", True)
    check(isinstance(truncate, bool), "deepseek_v3: rope_scaling.truncate must be true or false")
    return theta, {
        "factor": factor, "original": original, "truncate": truncate,
        "beta_fast": dsv3_number(rs.get("beta_fast") or 32, "rope_scaling.beta_fast"),
        "beta_slow": dsv3_number(rs.get("beta_slow") or 1, "rope_scaling.beta_slow"),
        "attention_factor": dsv3_number(attention_factor, "rope_scaling.attention_factor"),
        "mscale_all_dim": mscale_all_dim or 0,
    }


def deepseek_v3_settings(cfg):
    """HF DeepseekV3Config fields that the math depends on, with its defaults when a key is
    absent (q_lora_rank 1536, kv_lora_rank 512, head dims 128 / 64 / 128, 256 routed experts
    of width 2048, 1 shared, top-8 of 8 groups keeping 4, first_k_dense_replace 3,
    routed_scaling_factor 2.5, norm_topk_prob and rope_interleave true, eps 1e-6, theta 1e4,
    num_key_value_heads 128, max_position_embeddings 4096); the sizes hidden_size,
    intermediate_size, num_hidden_layers, num_attention_heads and vocab_size must be given.
    q_lora_rank null means a single q_proj (HF tests `is None`; 0 would build a zero-rank
    q_a_proj, so it is refused). Refused: attention_bias, num_key_value_heads other than
    num_attention_heads, hidden_act other than silu, and values of the remote-code keys that
    HF's class ignores (scoring_func, topk_method, moe_layer_freq) other than DeepSeek-V3's."""
    check(cfg_get(cfg, "hidden_act", "silu") == "silu",
          "deepseek_v3: only hidden_act 'silu' is known")
    check(cfg.get("attention_bias", False) is False, "deepseek_v3: attention_bias is not modelled")
    for key, only in (("scoring_func", "sigmoid"), ("topk_method", "noaux_tc"),
                      ("moe_layer_freq", 1)):
        check(cfg.get(key, only) == only, f"deepseek_v3: {key} {cfg.get(key)!r}: HF's class "
              f"ignores the key and computes as if it were {only!r}; refused")
    heads = cfg_int(cfg, "num_attention_heads")
    kv_heads = cfg.get("num_key_value_heads", 128)
    check(kv_heads is None or kv_heads == heads, f"deepseek_v3: num_key_value_heads {kv_heads} "
          f"(128 when absent) must equal num_attention_heads {heads}")
    q_lora_rank = cfg.get("q_lora_rank", 1536)
    check(q_lora_rank is None or (isinstance(q_lora_rank, int) and q_lora_rank >= 1),
          f"deepseek_v3: q_lora_rank must be null (a single q_proj) or an integer >= 1 (got "
          f"{q_lora_rank!r}; HF would build a q_a_proj of that rank)")
    experts = dsv3_int(cfg, "n_routed_experts", 256)
    n_group, topk_group = dsv3_int(cfg, "n_group", 8), dsv3_int(cfg, "topk_group", 4)
    check(experts % n_group == 0 and experts // n_group >= 2, f"deepseek_v3: n_routed_experts "
          f"{experts} must split into n_group {n_group} groups of at least 2")
    check(topk_group <= n_group, f"deepseek_v3: topk_group {topk_group} > n_group {n_group}")
    top_k = dsv3_int(cfg, "num_experts_per_tok", 8)
    check(top_k <= experts, f"deepseek_v3: num_experts_per_tok {top_k} > n_routed_experts")
    rope_dim = dsv3_int(cfg, "qk_rope_head_dim", 64)
    check(rope_dim % 2 == 0, "deepseek_v3: qk_rope_head_dim must be even")
    nope_dim = dsv3_int(cfg, "qk_nope_head_dim", 128)
    max_positions = dsv3_int(cfg, "max_position_embeddings", 4096)
    theta, yarn = dsv3_rope(cfg, max_positions)
    scale = (nope_dim + rope_dim) ** -0.5
    if yarn is not None and yarn["mscale_all_dim"]:
        scale *= yarn_mscale(yarn["factor"], yarn["mscale_all_dim"]) ** 2
    eps = dsv3_number(cfg.get("rms_norm_eps", 1e-6), "rms_norm_eps")
    return {
        "vocab": cfg_int(cfg, "vocab_size"), "hidden": cfg_int(cfg, "hidden_size"),
        "intermediate": cfg_int(cfg, "intermediate_size"),
        "layers": cfg_int(cfg, "num_hidden_layers"), "heads": heads,
        "q_lora_rank": q_lora_rank, "kv_lora_rank": dsv3_int(cfg, "kv_lora_rank", 512),
        "nope_dim": nope_dim, "rope_dim": rope_dim, "v_dim": dsv3_int(cfg, "v_head_dim", 128),
        "moe_intermediate": dsv3_int(cfg, "moe_intermediate_size", 2048),
        "experts": experts, "shared_experts": dsv3_int(cfg, "n_shared_experts", 1),
        "top_k": top_k, "n_group": n_group, "topk_group": topk_group,
        "first_k_dense_replace": dsv3_int(cfg, "first_k_dense_replace", 3, least=0),
        "norm_topk_prob": dsv3_bool(cfg, "norm_topk_prob", True),
        "routed_scaling_factor": dsv3_number(cfg.get("routed_scaling_factor", 2.5),
                                             "routed_scaling_factor"),
        "eps": eps, "rope_theta": theta, "yarn": yarn,
        "rope_interleave": dsv3_bool(cfg, "rope_interleave", True),
        "softmax_scale": scale, "tied": dsv3_bool(cfg, "tie_word_embeddings", False),
    }


# ---------------------------------------------------------------------------------------------
# GPT-2 (GPT2LMHeadModel)
# ---------------------------------------------------------------------------------------------


class Conv1D(nn.Module):
    """HF's GPT-2 linear layer: y = x @ W + b with W stored [in, out]."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out))
        self.bias = nn.Parameter(torch.empty(n_out))

    def forward(self, x):
        return torch.matmul(x, self.weight) + self.bias


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


def gelu_erf(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


GPT2_ACTIVATIONS = {"gelu": gelu_erf, "gelu_new": gelu_tanh, "gelu_pytorch_tanh": gelu_tanh,
                    "relu": torch.relu, "silu": nn.functional.silu, "swish": nn.functional.silu}


class GPT2Attention(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.c, self.layer_idx = c, layer_idx
        self.c_attn = Conv1D(c["n_embd"], 3 * c["n_embd"])
        self.c_proj = Conv1D(c["n_embd"], c["n_embd"])

    def forward(self, x):
        c = self.c
        q, k, v = self.c_attn(x).split(c["n_embd"], dim=-1)
        q, k, v = (split_heads(t, c["n_head"]) for t in (q, k, v))
        scale = 1.0 / math.sqrt(c["n_embd"] // c["n_head"]) if c["scale_attn"] else 1.0
        if c["scale_by_layer"]:
            scale /= self.layer_idx + 1
        return self.c_proj(merge_heads(causal_attention(q, k, v, scale)))


class GPT2MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = Conv1D(c["n_embd"], c["n_inner"])
        self.c_proj = Conv1D(c["n_inner"], c["n_embd"])
        self.act = GPT2_ACTIVATIONS[c["activation"]]

    def forward(self, x):
        return self.c_proj(self.act(self.c_fc(x)))


class GPT2Block(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c["n_embd"], eps=c["eps"])
        self.attn = GPT2Attention(c, layer_idx)
        self.ln_2 = nn.LayerNorm(c["n_embd"], eps=c["eps"])
        self.mlp = GPT2MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.wte = nn.Embedding(c["vocab"], c["n_embd"])
        self.wpe = nn.Embedding(c["n_positions"], c["n_embd"])
        self.h = nn.ModuleList(GPT2Block(c, i) for i in range(c["n_layer"]))
        self.ln_f = nn.LayerNorm(c["n_embd"], eps=c["eps"])


class GPT2LMHeadModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c = gpt2_settings(cfg)
        self.c = c
        self.transformer = GPT2Model(c)
        self.lm_head = nn.Linear(c["n_embd"], c["vocab"], bias=False)

    def embedding(self):
        return self.transformer.wte

    def forward(self, tokens):
        t = tokens.shape[1]
        check(t <= self.c["n_positions"], f"gpt2: {t} tokens but n_positions is "
              f"{self.c['n_positions']}")
        m = self.transformer
        x = m.wte(tokens) + m.wpe(torch.arange(t))
        for block in m.h:
            x = block(x)
        return self.lm_head(m.ln_f(x))


def gpt2_settings(cfg):
    """HF GPT2Config fields (and their defaults) that the math depends on."""
    n_embd, n_head = cfg_int(cfg, "n_embd"), cfg_int(cfg, "n_head")
    check(n_embd % n_head == 0, "gpt2: n_embd is not divisible by n_head")
    activation = cfg_get(cfg, "activation_function", "gelu_new")
    check(activation in GPT2_ACTIVATIONS, f"gpt2: unknown activation_function {activation!r}")
    return {
        "n_embd": n_embd, "n_head": n_head, "n_layer": cfg_int(cfg, "n_layer"),
        "vocab": cfg_int(cfg, "vocab_size"), "n_positions": cfg_int(cfg, "n_positions"),
        "n_inner": cfg_get(cfg, "n_inner", 4 * n_embd), "activation": activation,
        "eps": cfg_get(cfg, "layer_norm_epsilon", 1e-5),
        "scale_attn": bool(cfg_get(cfg, "scale_attn_weights", True)),
        "scale_by_layer": bool(cfg_get(cfg, "scale_attn_by_inverse_layer_idx", False)),
        "tied": bool(cfg_get(cfg, "tie_word_embeddings", True)),
    }


# ---------------------------------------------------------------------------------------------
# HF checkpoint <-> model
# ---------------------------------------------------------------------------------------------

FAMILIES = {"llama": LlamaForCausalLM, "gpt2": GPT2LMHeadModel, "qwen3": Qwen3ForCausalLM,
            "deepseek_v3": DeepseekV3ForCausalLM}
# Buffers (not parameters) that older HF checkpoints carry: GPT-2's causal masks, Llama's
# rotary inv_freq cache. They are skipped when reading.
IGNORED_SUFFIXES = {"gpt2": (".attn.bias", ".attn.masked_bias"),
                    "llama": (".rotary_emb.inv_freq",), "qwen3": (".rotary_emb.inv_freq",),
                    "deepseek_v3": (".rotary_emb.inv_freq",)}


def build_model(cfg):
    family = cfg.get("model_type")
    check(family in FAMILIES,
          f"config.json: model_type {family!r} is not one of {sorted(FAMILIES)}")
    return FAMILIES[family](cfg).to(torch.float64)


def hf_parameters(model):
    """(HF name, parameter) in module order; lm_head is left out when tied to the embedding."""
    return [(n, p) for n, p in model.named_parameters()
            if not (n == "lm_head.weight" and model.c["tied"])]


def canonical_name(name, family):
    if family == "gpt2" and not name.startswith(("transformer.", "lm_head.")):
        return "transformer." + name
    return name


def is_mtp_tensor(name, family, model):
    """DeepSeek-V3's multi-token-prediction layers follow the decoder's as model.layers.<L+k>.*;
    HF's DeepseekV3ForCausalLM has no module for them and leaves them unread."""
    found = re.match(r"model\.layers\.(\d+)\.", name) if family == "deepseek_v3" else None
    return found is not None and int(found.group(1)) >= model.c["layers"]


def checkpoint_names(model, family, tensors):
    """Canonical HF names, buffers (and DeepSeek-V3's MTP layers) dropped; a tied
    lm_head.weight must equal the embedding."""
    tensors = {canonical_name(k, family): v for k, v in tensors.items()
               if not k.endswith(IGNORED_SUFFIXES[family])
               and not is_mtp_tensor(k, family, model)}
    embed_name = "transformer.wte.weight" if family == "gpt2" else "model.embed_tokens.weight"
    if model.c["tied"] and "lm_head.weight" in tensors:
        head, embed = tensors.pop("lm_head.weight"), tensors.get(embed_name)
        check(embed is not None and head.dtype == embed.dtype and torch.equal(head, embed),
              "tie_word_embeddings is true but lm_head.weight differs from the embedding")
    return tensors


def load_weights(model, family, tensors):
    tensors = checkpoint_names(model, family, tensors)
    expected = dict(hf_parameters(model))
    missing, unexpected = sorted(set(expected) - set(tensors)), sorted(set(tensors) - set(expected))
    check(not missing and not unexpected,
          f"tensor names: missing {missing}, unexpected {unexpected}")
    with torch.no_grad():
        for name, param in expected.items():
            t = tensors[name]
            check(t.is_floating_point(), f"{name}: dtype {t.dtype} is not a float type")
            check(tuple(t.shape) == tuple(param.shape),
                  f"{name}: shape {list(t.shape)}, expected {list(param.shape)}")
            param.copy_(t.to(torch.float64))
    if model.c["tied"]:
        model.lm_head.weight = model.embedding().weight


def load_config(folder):
    path = os.path.join(folder, "config.json")
    try:
        with open(path) as f:
            cfg = json.load(f)
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: {e}") from None
    check(isinstance(cfg, dict), f"{path}: not a JSON object")
    return cfg


def load_checkpoint(folder):
    cfg = load_config(folder)
    model = build_model(cfg)
    load_weights(model, cfg["model_type"], read_checkpoint_tensors(folder))
    return model.eval()


def logits_of(model, tokens):
    check(tokens.dim() == 2 and not tokens.is_floating_point(), "tokens must be an integer [B, T]")
    check(tokens.shape[1] > 0, "tokens: T must be at least 1")
    tokens = tokens.to(torch.int64)
    vocab = model.c["vocab"]
    check(bool(((tokens >= 0) & (tokens < vocab)).all()), f"tokens outside [0, {vocab})")
    with torch.no_grad():
        return model(tokens)


def random_weights(model, seed, dtype):
    """(name, tensor) in HF order: N(0, 0.02), norm weights 1 + N(0, 0.1); drawn in f64. A
    model's init_tensor (DeepSeek-V3's router) may make other use of a tensor's draw."""
    torch.manual_seed(seed)
    special = getattr(model, "init_tensor", lambda name, noise, dtype: None)
    out = []
    for name, p in hf_parameters(model):
        noise = torch.randn(p.shape, dtype=torch.float64)
        t = special(name, noise, dtype)
        if t is None:
            is_norm = re.search(r"(norm|\bln_\w+)\.weight$", name) is not None
            t = (1.0 + 0.1 * noise if is_norm else 0.02 * noise).to(dtype)
        out.append((name, t))
    return out


def init_checkpoint(folder, family, cfg, seed, dtype_name="f32", shard_bytes=None):
    check(family in FAMILIES, f"unknown family {family!r}")
    check(cfg.get("model_type", family) == family, f"config model_type is not {family!r}")
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype_name]
    cfg = dict(cfg, model_type=family, architectures=[FAMILIES[family].__name__],
               torch_dtype={"f32": "float32", "bf16": "bfloat16"}[dtype_name])
    tensors = random_weights(build_model(cfg), seed, dtype)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    write_checkpoint_tensors(folder, tensors, shard_bytes)
    return tensors


# ---------------------------------------------------------------------------------------------
# self-test
# ---------------------------------------------------------------------------------------------

SELFTEST_LLAMA = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
                  "num_hidden_layers": 2, "intermediate_size": 96, "vocab_size": 50,
                  "rope_theta": 500000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": False}
SELFTEST_GPT2 = {"n_embd": 48, "n_head": 4, "n_layer": 2, "vocab_size": 50, "n_positions": 32,
                 "n_inner": None, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5}
# Heads of 24 beside hidden 64 / 4 heads; eps tiny so that a head's scale cancels exactly.
SELFTEST_QWEN3 = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
                  "head_dim": 24, "num_hidden_layers": 2, "intermediate_size": 96,
                  "vocab_size": 50, "rope_theta": 1e6, "rms_norm_eps": 1e-12,
                  "tie_word_embeddings": True}
SELFTEST_SHARD_BYTES = 20000


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and tensor_bytes(a) == tensor_bytes(b)


def check_roundtrip(folder, written, n_files, shard_bytes=None):
    files = sorted(os.listdir(folder))
    check(len(files) == n_files + 1, f"{folder}: expected {n_files} files besides config, "
          f"got {files}")
    got = read_checkpoint_tensors(folder)
    check(list(got) == [n for n, _ in written], f"{folder}: tensor names or order differ")
    for name, t in written:
        check(same_bits(got[name], t), f"{folder}: {name} does not read back bit-identically")
    copy = folder + "_copy"
    os.makedirs(copy)
    write_checkpoint_tensors(copy, list(got.items()), shard_bytes)
    for name in (f for f in files if f != "config.json"):
        with open(os.path.join(folder, name), "rb") as a, open(os.path.join(copy, name), "rb") as b:
            check(a.read() == b.read(), f"{name}: rewriting what was read changes the bytes")


def selftest_roundtrip(tmp):
    llama_dir, gpt2_dir = os.path.join(tmp, "llama"), os.path.join(tmp, "gpt2")
    llama = init_checkpoint(llama_dir, "llama", SELFTEST_LLAMA, 1, "bf16", SELFTEST_SHARD_BYTES)
    n_shards = len(shard_plan(llama, SELFTEST_SHARD_BYTES))
    check(n_shards > 2, "the llama checkpoint should be sharded")
    check_roundtrip(llama_dir, llama, n_shards + 1, SELFTEST_SHARD_BYTES)
    gpt2 = init_checkpoint(gpt2_dir, "gpt2", SELFTEST_GPT2, 2, "f32")
    check_roundtrip(gpt2_dir, gpt2, 1)
    check("lm_head.weight" not in dict(gpt2), "tied gpt2 must not write lm_head.weight")
    print(f"ok  (a) bit-identical read-back: llama bf16 in {n_shards} shards + index "
          f"({len(llama)} tensors), gpt2 f32 single file ({len(gpt2)} tensors); "
          f"rewriting what was read gives the same files")
    return llama_dir, gpt2_dir


def duplicate_kv_heads(weight, kv_heads, group, interleave):
    """[kv*D, in] -> [kv*g*D, in], as repeat_kv (interleave=True) or tiled (False)."""
    w = weight.view(kv_heads, -1, weight.shape[-1])
    w = w.repeat_interleave(group, dim=0) if interleave else w.repeat(group, 1, 1)
    return w.reshape(-1, weight.shape[-1])


def mha_copy(gqa, interleave):
    cfg = dict(SELFTEST_LLAMA, model_type="llama",
               num_key_value_heads=SELFTEST_LLAMA["num_attention_heads"])
    mha = build_model(cfg)
    kv, group = gqa.c["kv_heads"], gqa.c["heads"] // gqa.c["kv_heads"]
    state = gqa.state_dict()
    for name in list(state):
        if name.endswith(("k_proj.weight", "v_proj.weight")):
            state[name] = duplicate_kv_heads(state[name], kv, group, interleave)
    mha.load_state_dict(state)
    return mha.eval()


def selftest_gqa(llama_dir, tokens):
    gqa = load_checkpoint(llama_dir)
    ref = logits_of(gqa, tokens)
    diff = (logits_of(mha_copy(gqa, True), tokens) - ref).abs().max().item()
    check(diff < 1e-12, f"GQA differs from MHA with repeat_kv-duplicated heads by {diff}")
    wrong = (logits_of(mha_copy(gqa, False), tokens) - ref).abs().max().item()
    check(wrong > 1e-6, "tiling kv heads should change the logits (test is not sensitive)")
    print(f"ok  (b) GQA == MHA with kv heads duplicated as repeat_kv (max diff {diff:.1e}; "
          f"tiled instead: {wrong:.1e})")


def selftest_causal(folder, tokens, label):
    model = load_checkpoint(folder)
    changed = tokens.clone()
    changed[:, -1] = (changed[:, -1] + 1) % model.c["vocab"]
    a, b = logits_of(model, tokens), logits_of(model, changed)
    early = (a[:, :-1] - b[:, :-1]).abs().max().item()
    last = (a[:, -1] - b[:, -1]).abs().max().item()
    check(early == 0.0 and last > 1e-6, f"{label}: not causal (earlier {early}, last {last})")
    print(f"ok  (c) {label} causal: changing the last token moves only the last position "
          f"(earlier diff {early}, last diff {last:.1e})")


def selftest_rope():
    """rotate_half form == complex rotation of the pairs (i, i + D/2) by pos * theta^(-2i/D)."""
    t, d, theta = 7, 16, 500000.0
    x = torch.randn(t, d, dtype=torch.float64, generator=torch.Generator().manual_seed(8))
    cos, sin = rope_cos_sin(t, d, theta)
    ours = x * cos + rotate_half(x) * sin
    pos = torch.arange(t, dtype=torch.float64)[:, None]
    freq = torch.tensor([theta ** (-2.0 * i / d) for i in range(d // 2)], dtype=torch.float64)
    z = torch.complex(x[:, :d // 2], x[:, d // 2:]) * torch.polar(torch.ones_like(pos * freq),
                                                                  pos * freq)
    diff = (ours - torch.cat((z.real, z.imag), dim=-1)).abs().max().item()
    check(diff < 1e-12, f"rotary embedding differs from the pairwise rotation by {diff}")
    print(f"ok      rotary: rotate_half form == rotation of pairs (i, i+D/2) (max diff {diff:.1e})")


def selftest_tied(tmp, tokens):
    """Tied llama (no lm_head.weight in the file) == untied llama whose lm_head is the embedding."""
    tied_dir, untied_dir = os.path.join(tmp, "tied"), os.path.join(tmp, "untied")
    tied = init_checkpoint(tied_dir, "llama", dict(SELFTEST_LLAMA, tie_word_embeddings=True), 3)
    check("lm_head.weight" not in dict(tied), "tied llama must not write lm_head.weight")
    untied = tied + [("lm_head.weight", dict(tied)["model.embed_tokens.weight"])]
    os.makedirs(untied_dir)
    with open(os.path.join(untied_dir, "config.json"), "w") as f:
        json.dump(dict(SELFTEST_LLAMA, model_type="llama"), f)
    write_checkpoint_tensors(untied_dir, untied)
    diff = (logits_of(load_checkpoint(tied_dir), tokens)
            - logits_of(load_checkpoint(untied_dir), tokens)).abs().max().item()
    check(diff == 0.0, f"tied and untied llama differ by {diff}")
    print("ok      tie_word_embeddings: tied llama == untied llama with lm_head = embed_tokens")


def selftest_qwen3(tmp, tokens):
    """Qwen 3's names and shapes; its q/k norms act per head: scaling one head's q_proj rows,
    or one kv head's k_proj rows, leaves the logits as they were (not so without the norms)."""
    folder = os.path.join(tmp, "qwen3")
    written = dict(init_checkpoint(folder, "qwen3", SELFTEST_QWEN3, 4))
    shapes = {"model.layers.1.self_attn.q_norm.weight": (24,),
              "model.layers.1.self_attn.k_norm.weight": (24,),
              "model.layers.0.self_attn.q_proj.weight": (96, 64),
              "model.layers.0.self_attn.k_proj.weight": (48, 64),
              "model.layers.0.self_attn.o_proj.weight": (64, 96)}
    for name, shape in shapes.items():
        check(tuple(written[name].shape) == shape, f"qwen3: {name} is not {shape}")
    check("lm_head.weight" not in written, "tied qwen3 must not write lm_head.weight")
    selftest_causal(folder, tokens, "qwen3")
    model = load_checkpoint(folder)
    ref = logits_of(model, tokens)
    attn = model.model.layers[0].self_attn
    with torch.no_grad():
        attn.q_proj.weight[24:48] *= 5.0
        attn.k_proj.weight[:24] *= 0.2
    diff = (logits_of(model, tokens) - ref).abs().max().item()
    check(diff < 1e-8, f"qwen3: rescaling one head's q/k rows moved the logits by {diff}")
    model.c["qk_norm"] = False  # the same weights without the norms' effect
    unnormed = (logits_of(model, tokens) - ref).abs().max().item()
    check(unnormed > 1e-6, "qwen3: turning the q/k norms off should change the logits")
    print(f"ok      qwen3: q_norm/k_norm [head_dim], q_proj [heads*head_dim, hidden]; a head's "
          f"scale cancels (max diff {diff:.1e}; without the norms {unnormed:.1e})")


# DeepSeek-V3, small: q LoRA rank 16, latent 24, heads of 8 + 8 (q, k) and 12 (v); layer 0
# dense (48 wide = one expert of 16 + two shared), layers 1-2 MoE: 8 experts in 4 groups, top-3
# of the best 2 groups. YaRN over 8 rotary features with an original context of 64 (theta
# 1e4): frequency 0 kept, 1 half-blended, 2-3 divided by 4; mscale 0.9 / mscale_all_dim 0.7
# so that both the cos/sin amplitude and the softmax scale move.
SELFTEST_DSV3 = {"vocab_size": 50, "hidden_size": 32, "intermediate_size": 48,
                 "moe_intermediate_size": 16, "num_hidden_layers": 3, "first_k_dense_replace": 1,
                 "num_attention_heads": 4, "num_key_value_heads": 4, "q_lora_rank": 16,
                 "kv_lora_rank": 24, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8,
                 "v_head_dim": 12, "n_routed_experts": 8, "n_shared_experts": 2,
                 "num_experts_per_tok": 3, "n_group": 4, "topk_group": 2,
                 "routed_scaling_factor": 2.5, "norm_topk_prob": True, "rms_norm_eps": 1e-6,
                 "rope_theta": 10000.0, "max_position_embeddings": 256,
                 "rope_scaling": {"type": "yarn", "factor": 4.0,
                                  "original_max_position_embeddings": 64, "beta_fast": 32,
                                  "beta_slow": 1, "mscale": 0.9, "mscale_all_dim": 0.7},
                 "tie_word_embeddings": False}
# DeepSeek-V3's own config.json (sizes kept: only its settings are computed, nothing is built).
DSV3_671B = {"vocab_size": 129280, "hidden_size": 7168, "intermediate_size": 18432,
             "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128,
             "max_position_embeddings": 163840, "n_routed_experts": 256, "n_group": 8,
             "rope_scaling": {"type": "yarn", "factor": 40,
                              "original_max_position_embeddings": 4096, "beta_fast": 32,
                              "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}}


def write_folder(folder, cfg, tensors):
    os.makedirs(folder)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f)
    write_checkpoint_tensors(folder, tensors)


def dsv3_model(cfg, state):
    model = build_model(dict(cfg, model_type="deepseek_v3"))
    model.load_state_dict(state)
    return model.eval()


def selftest_dsv3_layout(tmp, tokens):
    """Names, shapes and dtypes init writes; MTP layers are skipped, other strays refused."""
    folder = os.path.join(tmp, "dsv3")
    written = init_checkpoint(folder, "deepseek_v3", SELFTEST_DSV3, 5, "bf16")
    shapes = {"model.layers.0.self_attn.q_a_proj.weight": (16, 32),
              "model.layers.0.self_attn.q_a_layernorm.weight": (16,),
              "model.layers.0.self_attn.q_b_proj.weight": (64, 16),
              "model.layers.0.self_attn.kv_a_proj_with_mqa.weight": (32, 32),
              "model.layers.0.self_attn.kv_a_layernorm.weight": (24,),
              "model.layers.0.self_attn.kv_b_proj.weight": (80, 24),
              "model.layers.0.self_attn.o_proj.weight": (32, 48),
              "model.layers.0.mlp.gate_proj.weight": (48, 32),
              "model.layers.0.mlp.down_proj.weight": (32, 48),
              "model.layers.1.mlp.gate.weight": (8, 32),
              "model.layers.1.mlp.gate.e_score_correction_bias": (8,),
              "model.layers.2.mlp.experts.7.up_proj.weight": (16, 32),
              "model.layers.2.mlp.experts.7.down_proj.weight": (32, 16),
              "model.layers.2.mlp.shared_experts.gate_proj.weight": (32, 32),
              "model.layers.2.mlp.shared_experts.down_proj.weight": (32, 32),
              "lm_head.weight": (50, 32)}
    named = dict(written)
    for name, shape in shapes.items():
        check(name in named and tuple(named[name].shape) == shape,
              f"deepseek_v3: {name} is not {shape}")
    check("model.layers.1.mlp.gate_proj.weight" not in named
          and "model.layers.0.mlp.gate.weight" not in named, "deepseek_v3: dense/MoE layers mixed")
    check(len(named) == 3 + 3 * 9 + 3 + 2 * (2 + 3 * 9), f"deepseek_v3: {len(named)} tensors")
    biases = [t for n, t in written if n.endswith("e_score_correction_bias")]
    check(all(t.dtype == torch.float32 and bool((t > 0).all()) for t in biases),
          "deepseek_v3: the correction bias should be F32 and positive")
    check(all(t.dtype == torch.bfloat16 for n, t in written if "e_score" not in n),
          "deepseek_v3: --dtype bf16 not followed")
    ref = logits_of(load_checkpoint(folder), tokens)
    mtp = dict(SELFTEST_DSV3, model_type="deepseek_v3", num_nextn_predict_layers=1)
    extra = [("model.layers.3.eh_proj.weight", torch.zeros(32, 64)),
             ("model.layers.3.self_attn.q_a_proj.weight", torch.zeros(16, 32)),
             ("model.layers.3.shared_head.head.weight", torch.zeros(50, 32))]
    write_folder(os.path.join(tmp, "dsv3_mtp"), mtp, written + extra)
    diff = (logits_of(load_checkpoint(os.path.join(tmp, "dsv3_mtp")), tokens) - ref).abs().max()
    check(diff.item() == 0.0, "deepseek_v3: MTP tensors changed the logits")
    write_folder(os.path.join(tmp, "dsv3_stray"), mtp,
                 written + [("model.layers.2.mlp.experts.8.up_proj.weight", torch.zeros(16, 32))])
    try:
        load_checkpoint(os.path.join(tmp, "dsv3_stray"))
        refused = False
    except InputError as e:
        refused = "experts.8" in str(e)
    check(refused, "deepseek_v3: a stray expert tensor was not refused")
    print(f"ok      deepseek_v3: {len(named)} tensors (q_a/q_b, kv_a_proj_with_mqa [latent|rot], "
          f"kv_b, router + F32 correction bias, experts, shared experts); model.layers.3.* (MTP) "
          f"skipped, a stray expert refused")
    selftest_causal(folder, tokens, "deepseek_v3")
    return folder


def rope_rows_to_half(state, c):
    """Each head's q rot rows and kv_a's k_rot rows reordered [0, 2, 4, ..., 1, 3, 5, ...]."""
    dn, dr, r = c["nope_dim"], c["rope_dim"], c["kv_lora_rank"]
    order = torch.cat((torch.arange(0, dr, 2), torch.arange(1, dr, 2)))
    state = dict(state)
    for name in list(state):
        w = state[name]
        if name.endswith(("q_proj.weight", "q_b_proj.weight")):
            w = w.view(c["heads"], dn + dr, -1)
            w = torch.cat((w[:, :dn], w[:, dn:][:, order]), dim=1)
            state[name] = w.reshape(-1, w.shape[-1])
        elif name.endswith("kv_a_proj_with_mqa.weight"):
            state[name] = torch.cat((w[:r], w[r:][order]))
    return state


def selftest_dsv3_interleave(folder, tokens):
    """rope_interleave true == false on weights whose rot rows are moved to the half layout."""
    model = load_checkpoint(folder)
    ref = logits_of(model, tokens)
    plain = dict(SELFTEST_DSV3, rope_interleave=False)
    moved = logits_of(dsv3_model(plain, rope_rows_to_half(model.state_dict(), model.c)), tokens)
    diff = (moved - ref).abs().max().item()
    check(diff < 1e-12, f"deepseek_v3: interleaved rope differs from half layout by {diff}")
    wrong = (logits_of(dsv3_model(plain, model.state_dict()), tokens) - ref).abs().max().item()
    check(wrong > 1e-6, "deepseek_v3: rope_interleave should matter (test is not sensitive)")
    print(f"ok      deepseek_v3: rope_interleave true == false with q/k rot rows permuted to "
          f"[0,2,..,1,3,..] (max diff {diff:.1e}; unpermuted: {wrong:.1e})")


def selftest_dsv3_identical_experts(folder, tokens):
    """All routed experts equal f, norm_topk_prob: the MoE is routed_scaling_factor * f(x) +
    shared(x), which is one dense SwiGLU whose hidden units are f's (up rows scaled) and the
    shared experts'; so all-dense layers of width 16 + 2 * 16 = 48 give the same logits."""
    model = load_checkpoint(folder)
    state, dense = model.state_dict(), {}
    rsf = model.c["routed_scaling_factor"]
    for name in list(state):  # expert e := expert 0
        found = re.match(r"(.*\.mlp\.experts\.)\d+(\..*)", name)
        if found:
            state[name] = state[f"{found[1]}0{found[2]}"].clone()
    for name, w in state.items():
        found = re.match(r"(.*\.mlp\.)(experts\.\d+|shared_experts|gate)\.(\w+)", name)
        if found is None:
            dense[name] = w
        elif found[2] == "experts.0":
            shared = state[f"{found[1]}shared_experts.{found[3]}.weight"]
            w = w * rsf if found[3] == "up_proj" else w
            dim = 1 if found[3] == "down_proj" else 0
            dense[f"{found[1]}{found[3]}.weight"] = torch.cat((w, shared), dim=dim)
    moe = dsv3_model(SELFTEST_DSV3, state)
    ref = logits_of(moe, tokens)
    flat = logits_of(dsv3_model(dict(SELFTEST_DSV3, first_k_dense_replace=3), dense), tokens)
    diff = (flat - ref).abs().max().item()
    check(diff < 1e-10, f"deepseek_v3: identical experts differ from the dense MLP by {diff}")
    moe.c["norm_topk_prob"] = False
    wrong = (logits_of(moe, tokens) - ref).abs().max().item()
    check(wrong > 1e-6, "deepseek_v3: norm_topk_prob should matter (test is not sensitive)")
    print(f"ok      deepseek_v3: identical experts with norm_topk_prob == dense SwiGLU [expert "
          f"(up x {rsf}) | shared] (max diff {diff:.1e}; without the norm: {wrong:.1e})")


def selftest_dsv3_groups(folder, tokens):
    """One group, or all groups kept, is no limit; keeping 2 of 4 groups changes the routing."""
    model = load_checkpoint(folder)
    limited = logits_of(model, tokens)
    model.c.update(n_group=1, topk_group=1)
    one = logits_of(model, tokens)
    model.c.update(n_group=4, topk_group=4)
    diff = (logits_of(model, tokens) - one).abs().max().item()
    check(diff == 0.0, f"deepseek_v3: n_group 1 differs from 4 groups all kept by {diff}")
    wrong = (limited - one).abs().max().item()
    check(wrong > 1e-6, "deepseek_v3: topk_group 2 of 4 should change the routing")
    print(f"ok      deepseek_v3: n_group 1 == 4 groups all kept (diff {diff}); keeping 2 of 4 "
          f"moves the logits by {wrong:.1e}")


def brute_top_sets(values, k):
    """Every k-set none of whose members is below a non-member (more than one when tied)."""
    n = len(values)
    out = []
    for chosen in itertools.combinations(range(n), k):
        rest = [values[i] for i in range(n) if i not in chosen]
        if not rest or min(values[i] for i in chosen) >= max(rest):
            out.append(frozenset(chosen))
    return out


def selftest_dsv3_router():
    """route() against enumeration: group scores as the best pair sum, every choice of kept
    groups, masked choices 0.0, every top-k set; a tie anywhere must be refused. Scores and
    biases are drawn so that choices go negative (masked experts then win) and masked zeros
    tie (refused)."""
    gen = torch.Generator().manual_seed(11)
    counts = {"unique": 0, "tie refused": 0, "masked expert chosen": 0}
    for experts, groups, keep, k, norm in ((8, 4, 2, 3, True), (4, 2, 1, 3, True),
                                           (9, 3, 2, 4, False), (8, 1, 1, 3, True)):
        c = {"n_group": groups, "topk_group": keep, "top_k": k, "norm_topk_prob": norm,
             "routed_scaling_factor": 1.5}
        per = experts // groups
        for _ in range(150):
            scores = torch.sigmoid(2 * torch.randn(1, experts, dtype=torch.float64, generator=gen))
            bias = 0.6 * torch.randn(experts, dtype=torch.float64, generator=gen)
            s, choice = scores[0].tolist(), (scores[0] + bias).tolist()
            pair = [max(choice[i] + choice[j] for i, j in
                        itertools.combinations(range(g * per, (g + 1) * per), 2))
                    for g in range(groups)]
            kept_sets = brute_top_sets(pair, keep)
            expert_sets = {chosen for kept in kept_sets for chosen in brute_top_sets(
                [choice[i] if i // per in kept else 0.0 for i in range(experts)], k)}
            try:
                got, weights = route(scores, bias, c)
            except InputError:
                check(len(kept_sets) > 1 or len(expert_sets) > 1, "router refused a clear case")
                counts["tie refused"] += 1
                continue
            check(len(kept_sets) == 1 and len(expert_sets) == 1, "router did not refuse a tie")
            (chosen,) = expert_sets
            order = got[0].argsort()
            check(got[0][order].tolist() == sorted(chosen), f"router chose {got.tolist()}, "
                  f"enumeration {sorted(chosen)}")
            want = torch.tensor([s[i] for i in sorted(chosen)], dtype=torch.float64)
            want = (want / (want.sum() + 1e-20) if norm else want) * 1.5
            check((weights[0][order] - want).abs().max().item() < 1e-15, "router weights differ")
            counts["unique"] += 1
            counts["masked expert chosen"] += any(i // per not in kept_sets[0] for i in chosen)
    check(all(counts.values()), f"router test did not reach every case: {counts}")
    print(f"ok      deepseek_v3: routing == enumeration over 600 draws ({counts['unique']} "
          f"unique, {counts['masked expert chosen']} of them with a masked group's 0.0 beating "
          f"a negative choice; {counts['tie refused']} ties refused)")


def selftest_dsv3_yarn():
    """DeepSeek-V3's own YaRN numbers; interleaved RoPE as a rotation of adjacent pairs."""
    c = deepseek_v3_settings(DSV3_671B)
    y = c["yarn"]
    low, high = yarn_correction_range(64, 1e4, 4096, 32, 1, False)
    check(yarn_correction_range(64, 1e4, 4096, 32, 1, True) == (10, 23)
          and 10.47 < low < 10.48 and 22.51 < high < 22.52
          and yarn_correction_range(8, 1e4, 64, 32, 1, True) == (0, 2),
          "deepseek_v3: YaRN correction range is not [10, 23] ([10.47, 22.51] untruncated; "
          "[0, 2] for 8 features, original 64)")
    check(abs(c["softmax_scale"] - 0.135234) < 1e-6 and y["attention_factor"] == 1.0,
          f"deepseek_v3: softmax scale {c['softmax_scale']}, cos/sin factor "
          f"{y['attention_factor']} (expected 0.135234 = 192^-0.5 * 1.873854, 1.0)")
    check((c["q_lora_rank"], c["kv_lora_rank"], c["experts"], c["top_k"], c["topk_group"],
           c["first_k_dense_replace"], c["rope_interleave"]) == (1536, 512, 256, 8, 4, 3, True),
          "deepseek_v3: DeepseekV3Config's defaults are not applied")
    base = 1e4 ** (-torch.arange(0, 64, 2, dtype=torch.float64) / 64)
    ratio = base / yarn_inv_freq(64, 1e4, y)
    check(bool((ratio[:11] == 1).all()) and (ratio[23:] - 40).abs().max().item() < 1e-12
          and bool(((ratio[11:23] > 1) & (ratio[11:23] < 40)).all()),
          "deepseek_v3: YaRN frequencies are not kept to 10, divided by 40 from 23")
    t = 9
    small = deepseek_v3_settings(SELFTEST_DSV3)
    cos, sin = dsv3_cos_sin(t, small)
    x = torch.randn(t, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(9))
    ours = deinterleave(x) * cos + rotate_half(deinterleave(x)) * sin
    angle = torch.outer(torch.arange(t, dtype=torch.float64), yarn_inv_freq(8, 1e4, small["yarn"]))
    z = torch.complex(x[:, 0::2], x[:, 1::2]) * torch.polar(
        torch.full_like(angle, small["yarn"]["attention_factor"]), angle)
    diff = (ours - torch.cat((z.real, z.imag), dim=-1)).abs().max().item()
    check(diff < 1e-12, f"deepseek_v3: interleaved rope differs from the pair rotation by {diff}")
    amp = yarn_mscale(4.0, 0.9) / yarn_mscale(4.0, 0.7)
    check(abs(small["yarn"]["attention_factor"] - amp) < 1e-15 and abs(
        small["softmax_scale"] - 16 ** -0.5 * yarn_mscale(4.0, 0.7) ** 2) < 1e-15,
        "deepseek_v3: attention_factor / softmax scale of the small config")
    print(f"ok      deepseek_v3: YaRN of DeepSeek-V3 (range [10, 23], softmax scale "
          f"{c['softmax_scale']:.6f}, cos/sin x1); interleaved rope == rotation of pairs "
          f"(2i, 2i+1) (max diff {diff:.1e})")


def selftest_dsv3_attention():
    """The attention module against a token-by-token loop written from MLA's definition, with
    RoPE as DeepSeek states it: the adjacent pairs (2i, 2i+1) of q's and k's rot slices turned
    as complex numbers by pos * f_i, scaled by the YaRN attention_factor."""
    c = deepseek_v3_settings(SELFTEST_DSV3)
    attn = DeepseekV3Attention(c).to(torch.float64)
    gen = torch.Generator().manual_seed(13)
    with torch.no_grad():
        for p in attn.parameters():
            p.copy_(torch.randn(p.shape, dtype=torch.float64, generator=gen) * 0.3 + (
                1.0 if p.dim() == 1 else 0.0))
    t, x = 7, torch.randn(1, 7, c["hidden"], dtype=torch.float64, generator=gen)
    with torch.no_grad():
        cos, sin = dsv3_cos_sin(t, c)
        got = attn(x, cos, sin)[0]
        dn, dr, dv, r = c["nope_dim"], c["rope_dim"], c["v_dim"], c["kv_lora_rank"]
        freq = yarn_inv_freq(dr, c["rope_theta"], c["yarn"])
        amp = c["yarn"]["attention_factor"]

        def turn(vec, pos):
            z = torch.complex(vec[0::2], vec[1::2]) * torch.polar(amp * torch.ones_like(freq),
                                                                  pos * freq)
            return torch.cat((z.real, z.imag))  # any fixed order: q and k share it

        def rms(vec, weight):
            return vec / torch.sqrt(vec.pow(2).mean() + 1e-6) * weight  # HF's RMSNorm default

        qs, ks, vs = [], [], []
        for i in range(t):
            q = attn.q_b_proj.weight @ rms(attn.q_a_proj.weight @ x[0, i],
                                           attn.q_a_layernorm.weight)
            kv = attn.kv_a_proj_with_mqa.weight @ x[0, i]
            kvb = attn.kv_b_proj.weight @ rms(kv[:r], attn.kv_a_layernorm.weight)
            k_rot = turn(kv[r:], i)
            qs.append([torch.cat((q[h * (dn + dr):h * (dn + dr) + dn],
                                  turn(q[h * (dn + dr) + dn:(h + 1) * (dn + dr)], i)))
                       for h in range(c["heads"])])
            ks.append([torch.cat((kvb[h * (dn + dv):h * (dn + dv) + dn], k_rot))
                       for h in range(c["heads"])])
            vs.append([kvb[h * (dn + dv) + dn:(h + 1) * (dn + dv)] for h in range(c["heads"])])
        rows = []
        for i in range(t):
            heads = []
            for h in range(c["heads"]):
                logits = torch.stack([qs[i][h] @ ks[j][h] for j in range(i + 1)])
                p = torch.softmax(logits * c["softmax_scale"], dim=0)
                heads.append(sum(p[j] * vs[j][h] for j in range(i + 1)))
            rows.append(attn.o_proj.weight @ torch.cat(heads))
        diff = (got - torch.stack(rows)).abs().max().item()
    check(diff < 1e-12, f"deepseek_v3: MLA differs from the token-by-token loop by {diff}")
    print(f"ok      deepseek_v3: MLA (q LoRA, latent kv, shared k_rot, YaRN) == token-by-token "
          f"loop with complex pair rotation (max diff {diff:.1e})")


def selftest_dsv3_variants(tmp, tokens):
    """A single q_proj (q_lora_rank null), tied, no rope_scaling; and configs that are refused."""
    folder = os.path.join(tmp, "dsv3_plain")
    cfg = dict(SELFTEST_DSV3, q_lora_rank=None, tie_word_embeddings=True, rope_scaling=None,
               first_k_dense_replace=0)
    named = dict(init_checkpoint(folder, "deepseek_v3", cfg, 6))
    check(tuple(named["model.layers.0.self_attn.q_proj.weight"].shape) == (64, 32)
          and "model.layers.0.self_attn.q_a_proj.weight" not in named
          and "lm_head.weight" not in named, "deepseek_v3: q_proj / tied layout")
    selftest_causal(folder, tokens, "deepseek_v3 (q_proj, tied, all MoE)")
    refusals = {"q_lora_rank 0": dict(cfg, q_lora_rank=0),
                "kv heads absent (128)": {k: v for k, v in cfg.items()
                                          if k != "num_key_value_heads"},
                "attention_bias": dict(cfg, attention_bias=True),
                "rope linear": dict(cfg, rope_scaling={"type": "linear", "factor": 2.0}),
                "yarn without factor": dict(cfg, rope_scaling={"type": "yarn"}),
                "groups of 1": dict(cfg, n_group=8, topk_group=4),
                "softmax scoring": dict(cfg, scoring_func="softmax")}
    for label, bad in refusals.items():
        try:
            deepseek_v3_settings(bad)
            refused = False
        except InputError:
            refused = True
        check(refused, f"deepseek_v3: {label} was not refused")
    print(f"ok      deepseek_v3: q_lora_rank null -> q_proj, tied; refused: "
          f"{', '.join(refusals)}")


def selftest_dsv3(tmp, tokens):
    folder = selftest_dsv3_layout(tmp, tokens)
    selftest_dsv3_interleave(folder, tokens)
    selftest_dsv3_identical_experts(folder, tokens)
    selftest_dsv3_groups(folder, tokens)
    selftest_dsv3_router()
    selftest_dsv3_yarn()
    selftest_dsv3_attention()
    selftest_dsv3_variants(tmp, tokens)
    return folder


def selftest_cli(tmp, folders, tokens):
    """The logits command end to end; its F32 output is the F64 one rounded."""
    tok_path = os.path.join(tmp, "tokens.safetensors")
    write_safetensors(tok_path, [("tokens", tokens)])
    for folder in folders:
        out = os.path.join(tmp, "logits.safetensors")
        check(main(["logits", folder, tok_path, out]) == 0, "logits command failed")
        got = read_safetensors(out)
        ref = logits_of(load_checkpoint(folder), tokens)
        check(same_bits(got["logits_f64"], ref), "logits_f64 differs from the in-process run")
        check(same_bits(got["logits"], ref.float()), "logits is not logits_f64 rounded to f32")
    print(f"ok      logits command: F32 == round(F64) for llama, gpt2 and deepseek_v3, "
          f"shape {list(got['logits'].shape)}")


def selftest():
    with tempfile.TemporaryDirectory(prefix="hf_models_selftest_") as tmp:
        llama_dir, gpt2_dir = selftest_roundtrip(tmp)
        tokens = torch.randint(0, 50, (2, 11), generator=torch.Generator().manual_seed(7))
        selftest_gqa(llama_dir, tokens)
        selftest_causal(llama_dir, tokens, "llama")
        selftest_causal(gpt2_dir, tokens, "gpt2")
        selftest_rope()
        selftest_tied(tmp, tokens)
        selftest_qwen3(tmp, tokens)
        dsv3_dir = selftest_dsv3(tmp, tokens)
        selftest_cli(tmp, (llama_dir, gpt2_dir, dsv3_dir), tokens)
    print("selftest passed")


# ---------------------------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------------------------


class OneLineParser(argparse.ArgumentParser):
    def error(self, message):
        raise InputError(f"usage: {message}")


def run_logits(args):
    tokens = read_safetensors(args.tokens)
    check("tokens" in tokens, f"{args.tokens}: no tensor named 'tokens'")
    logits = logits_of(load_checkpoint(args.dir), tokens["tokens"])
    write_safetensors(args.out, [("logits", logits.float()), ("logits_f64", logits)])


def run_init(args):
    try:
        cfg = json.loads(args.config)
    except ValueError as e:
        raise InputError(f"--config is not JSON ({e})") from None
    check(isinstance(cfg, dict), "--config must be a JSON object")
    check(args.shard_bytes is None or args.shard_bytes > 0, "--shard-bytes must be positive")
    init_checkpoint(args.dir, args.family, cfg, args.seed, args.dtype, args.shard_bytes)


def make_parser():
    parser = OneLineParser(prog="hf_models.py", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    p = sub.add_parser("logits", help="f64 logits of an HF checkpoint folder")
    p.add_argument("dir")
    p.add_argument("tokens", help="safetensors file with 'tokens' (integer [B, T])")
    p.add_argument("out", help="safetensors file to write: logits F32, logits_f64 F64")
    p.set_defaults(run=run_logits)
    p = sub.add_parser("init", help="write a seeded random HF checkpoint")
    p.add_argument("dir")
    p.add_argument("--family", required=True, choices=sorted(FAMILIES))
    p.add_argument("--config", required=True, help="config.json contents as a JSON string")
    p.add_argument("--seed", required=True, type=int)
    p.add_argument("--dtype", default="f32", choices=["f32", "bf16"])
    p.add_argument("--shard-bytes", type=int, default=None)
    p.set_defaults(run=run_init)
    p = sub.add_parser("selftest", help="check this reference against itself")
    p.set_defaults(run=lambda args: selftest())
    return parser


def run_command(parser, program, argv=None):
    """Runs the parsed subcommand; any failure becomes one line on stderr and exit status 1."""
    try:
        args = parser.parse_args(argv)
        args.run(args)
    except InputError as e:
        message = str(e)
    except Exception as e:  # anything else (torch, OS): still one line, with its type
        message = f"{type(e).__name__}: {e}"
    else:
        return 0
    print(program + ": error: " + " ".join(message.split()), file=sys.stderr)
    return 1


def main(argv=None):
    return run_command(make_parser(), "hf_models.py", argv)


if __name__ == "__main__":
    sys.exit(main())
