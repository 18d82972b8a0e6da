#!/usr/bin/python3
"""Independent float64 reference of HF's Llama, GPT-2 and Qwen 3, for mixprec's HF import/export.

Debian has no `transformers` (nor the `safetensors` Python package), so this file rebuilds
the math of LlamaForCausalLM, GPT2LMHeadModel and Qwen3ForCausalLM in plain PyTorch from
Hugging Face's published definitions (no code copied from transformers), reads and writes the
Hugging Face checkpoint layout (config.json + model.safetensors, or
model-0000k-of-0000n.safetensors shards + model.safetensors.index.json) with its own
safetensors codec, and computes logits in float64 from the stored weights (F32 or BF16,
widened before any arithmetic).

Run with Debian 12's python3-torch (torch 1.13):

    /usr/bin/python3 tests/reference/hf_models.py logits DIR TOKENS OUT
        DIR: HF checkpoint folder; TOKENS: safetensors with "tokens" (integer [B, T]);
        OUT: safetensors with "logits" F32 [B, T, vocab] and "logits_f64" F64.
    /usr/bin/python3 tests/reference/hf_models.py init DIR --family llama|gpt2|qwen3 --config JSON
        --seed N [--dtype f32|bf16] [--shard-bytes N]
        Writes DIR/config.json (the JSON plus model_type, architectures, torch_dtype) and
        seeded random weights (matrices and biases ~ N(0, 0.02), norm weights 1 + N(0, 0.1)).
    /usr/bin/python3 tests/reference/hf_models.py selftest

Exit status 0 on success; otherwise non-zero with a one-line message on stderr.
"""

import argparse
import ctypes
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

FAMILIES = {"llama": LlamaForCausalLM, "gpt2": GPT2LMHeadModel, "qwen3": Qwen3ForCausalLM}
# Buffers (not parameters) that older HF checkpoints carry: GPT-2's causal masks, Llama's
# rotary inv_freq cache. They are skipped when reading.
IGNORED_SUFFIXES = {"gpt2": (".attn.bias", ".attn.masked_bias"),
                    "llama": (".rotary_emb.inv_freq",), "qwen3": (".rotary_emb.inv_freq",)}


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


def checkpoint_names(model, family, tensors):
    """Canonical HF names, buffers dropped; a tied lm_head.weight must equal the embedding."""
    tensors = {canonical_name(k, family): v for k, v in tensors.items()
               if not k.endswith(IGNORED_SUFFIXES[family])}
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
    """(name, tensor) in HF order: N(0, 0.02), norm weights 1 + N(0, 0.1); drawn in f64."""
    torch.manual_seed(seed)
    out = []
    for name, p in hf_parameters(model):
        noise = torch.randn(p.shape, dtype=torch.float64)
        is_norm = re.search(r"(norm|\bln_\w+)\.weight$", name) is not None
        out.append((name, (1.0 + 0.1 * noise if is_norm else 0.02 * noise).to(dtype)))
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


def selftest_cli(tmp, llama_dir, gpt2_dir, tokens):
    """The logits command end to end; its F32 output is the F64 one rounded."""
    tok_path = os.path.join(tmp, "tokens.safetensors")
    write_safetensors(tok_path, [("tokens", tokens)])
    for folder in (llama_dir, gpt2_dir):
        out = os.path.join(tmp, "logits.safetensors")
        check(main(["logits", folder, tok_path, out]) == 0, "logits command failed")
        got = read_safetensors(out)
        ref = logits_of(load_checkpoint(folder), tokens)
        check(same_bits(got["logits_f64"], ref), "logits_f64 differs from the in-process run")
        check(same_bits(got["logits"], ref.float()), "logits is not logits_f64 rounded to f32")
    print(f"ok      logits command: F32 == round(F64) for both families, shape "
          f"{list(got['logits'].shape)}")


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
        selftest_cli(tmp, llama_dir, gpt2_dir, tokens)
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


def main(argv=None):
    try:
        args = make_parser().parse_args(argv)
        args.run(args)
    except InputError as e:
        message = str(e)
    except Exception as e:  # anything else (torch, OS): still one line, with its type
        message = f"{type(e).__name__}: {e}"
    else:
        return 0
    print("hf_models.py: error: " + " ".join(message.split()), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
