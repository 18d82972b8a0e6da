#!/usr/bin/python3
"""torchtitan's training steps replayed in plain PyTorch, for mixprec's agreement test.

The models and the training step are rebuilt here from torchtitan's own code (pytorch/torchtitan
b5bcd76c66d0acb1a08b176d9639425bc55e0b2a: models/llama3, qwen3 and deepseek_v3, common/attention,
rope, moe, token_dispatcher, feed_forward and decoder, and components/optimizer's MoE
load-balancing hook) and, for GPT, which torchtitan lacks, from karpathy/nanoGPT's model.py
(3adf61e154c3fe3fca428ad6bc3818b27a3b8291). No code is copied from either. What comes from
mixprec is its config (read as the torchtitan flavor it describes), its trainer's LR schedule and
its parameter names, mapped onto torchtitan's names and layouts (tok_embeddings,
layers.N.attention.qkv_linear.wq, ComplexRoPE's interleaved pairs, stacked GroupedExperts,
router.gate, expert_bias_E, shared_experts). Each batch row is one document (causal attention
within the row, positions from 0), as torchtitan's packed block-causal masks make it.

Everything is float64: the replay then carries no rounding of its own, and what separates it from
mixprec's f32 run is mixprec's f32 arithmetic alone. (torchtitan's grouped expert GEMMs cast to
bf16 and its RoPE caches are f32; a float32 training run is replayed, so neither applies.)

Runs on Debian 12's python3-torch (torch 1.13; Python 3.11 for tomllib) or a newer torch.

    /usr/bin/python3 tests/reference/titan_replay.py run DIR --family F [--mutate NAME]...
        DIR/config.toml         mixprec's config (as to_toml writes it)
        DIR/init.safetensors    the initial parameters, mixprec's names (f32)
        DIR/batches.safetensors "inputs" and "targets", i64 [steps, B, T]
        writes DIR/replay.safetensors, and DIR/replay-NAME.safetensors for each --mutate: every
        parameter after the last step in mixprec's names (F64), "buffer.<name>" for the expert
        biases, "loss" and "grad_norm" F64 [steps], and for MoE "counts" I64 [steps, blocks * E].
    /usr/bin/python3 tests/reference/titan_replay.py selftest

Mutations (each a deliberate mistake the agreement test must catch): head_mapping (mixprec's
rotate-half rows of wq/wk, or of MLA's rope rows, used unpermuted under ComplexRoPE),
rope_layout (rotate-half where torchtitan pairs neighbours, or the reverse), rope_scaling
(Llama 3.1's scaling or YaRN dropped), idle_expert_skip (experts as separate parameters: one no
token chose has no gradient and skips the AdamW step), bias_sign (the expert-bias update moves
toward imbalance), qk_norm_off (Qwen 3 without its q/k norms).

Exit status 0 on success; otherwise non-zero with a one-line message on stderr.
"""

import argparse
import math
import os
import sys
import tomllib

import torch
import torch.nn as nn
import torch.nn.functional as F

from hf_models import InputError, check, read_safetensors, run_command, write_safetensors

FAMILIES = ("gpt", "llama3", "qwen3", "moe", "deepseek_v3")
MUTATIONS = ("head_mapping", "rope_layout", "rope_scaling", "idle_expert_skip", "bias_sign",
             "qk_norm_off")
DT = torch.float64

# ---------------------------------------------------------------------------------------------
# settings: mixprec's config read as the torchtitan flavor it describes
# ---------------------------------------------------------------------------------------------


def yarn_mscale(factor, mscale):
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def rope_settings(m):
    """torchtitan's RoPE.Config fields from [model.rope_scaling]. torchtitan's RoPE is a pure
    rotation: a config whose YaRN would scale cos and sin (mixprec's attention factor) has no
    torchtitan equivalent and is refused."""
    rs = m["rope_scaling"]
    kind = rs["type"]
    out = {"theta": float(m["rope_theta"]), "scaling": "none"}
    if kind == "llama3":
        out.update(scaling="llama", factor=rs["factor"], low=rs["low_freq_factor"],
                   high=rs["high_freq_factor"],
                   original=rs["original_max_position_embeddings"])
    elif kind == "yarn":
        original = rs["original_max_position_embeddings"] or m["max_seq_len"]
        a, b = rs["mscale"], rs["mscale_all_dim"]
        factor = rs["attention_factor"] or (
            yarn_mscale(rs["factor"], a) / yarn_mscale(rs["factor"], b) if a and b
            else yarn_mscale(rs["factor"], 1.0))
        check(abs(factor - 1.0) < 1e-12, f"[model.rope_scaling] scales cos/sin by {factor}: "
              "torchtitan's YaRN is a pure rotation (set mscale = mscale_all_dim)")
        out.update(scaling="yarn", factor=rs["factor"], beta_fast=rs["beta_fast"],
                   beta_slow=rs["beta_slow"], original=original, truncate=rs["truncate"],
                   mscale=rs["mscale_all_dim"])
    else:
        check(kind == "none", f"[model.rope_scaling] type {kind!r} is not known here")
    return out


def model_settings(m, family):
    check(m["kind"] == family, f"model.kind is {m['kind']!r}, but --family is {family!r}")
    heads = m["n_heads"]
    kv = m["n_kv_heads"] or heads
    s = {"family": family, "vocab": m["vocab_size"], "dim": m["d_model"],
         "layers": m["n_layers"], "heads": heads, "kv_heads": kv,
         "head_dim": m["head_dim"] or m["d_model"] // heads, "ffn": m["d_ff"],
         "eps": m["norm_eps"], "tied": m["tie_embeddings"], "max_seq_len": m["max_seq_len"],
         "qk_norm": m["qk_norm"], "rope": rope_settings(m)}
    check(heads % kv == 0, "model.n_heads must be a multiple of model.n_kv_heads")
    if family == "gpt":  # nanoGPT: fixed shape
        check(m["norm"] == "layernorm" and m["mlp"] == "gelu" and m["positions"] == "learned"
              and m["bias"] and s["tied"], "gpt: nanoGPT has LayerNorm, GELU, learned "
              "positions, biases and a tied output (model.norm, mlp, positions, bias, "
              "tie_embeddings)")
        check(m["d_ff"] == 4 * m["d_model"], "gpt: nanoGPT's MLP is 4 * model.d_model wide")
        check(kv == heads and s["head_dim"] * heads == m["d_model"],
              "gpt: nanoGPT has d_model / n_heads wide heads, no GQA")
        check(m["norm_eps"] == 1e-5, "gpt: nanoGPT's LayerNorm eps is 1e-5 (model.norm_eps)")
        return s
    check(m["norm"] == "rmsnorm" and m["mlp"] == "swiglu" and m["positions"] == "rope"
          and not m["bias"], f"{family}: torchtitan's has RMSNorm, SwiGLU, RoPE, no biases")
    check(s["qk_norm"] == (family == "qwen3"), "model.qk_norm is Qwen 3's alone here")
    # Qwen 3 is CosSinRoPE (rotate-half); Llama 3 and DeepSeek-V3 are ComplexRoPE.
    s["rope_layout"] = "half" if family == "qwen3" else "pairs"
    if family in ("moe", "deepseek_v3"):
        e = m["moe"]
        check(e["capacity_factor"] == 0, "model.moe.capacity_factor: torchtitan drops no token")
        check(e["aux_loss_weight"] == 0 and e["z_loss_weight"] == 0,
              "model.moe.aux_loss_weight and z_loss_weight must be 0 (torchtitan has neither)")
        check(e["idle_experts"] == "step", "model.moe.idle_experts must be \"step\" "
              "(torchtitan's stacked GroupedExperts)")
        groups = e["n_expert_groups"]
        check(groups == 0 or e["n_experts"] // groups >= 2,
              "torchtitan's group-limited routing needs >= 2 experts per group")
        s["moe"] = {"experts": e["n_experts"], "top_k": e["top_k"], "score": e["score_func"],
                    "route_norm": e["route_norm"], "route_scale": e["route_scale"],
                    "groups": groups or None, "limited": e["n_limited_groups"] or None,
                    "shared": e["n_shared_experts"], "dense_layers": e["n_dense_layers"],
                    "dense_ffn": e["dense_d_ff"], "coeff": e["load_balance_coeff"] or None}
    if family == "deepseek_v3":
        check("mla" in m, "deepseek_v3: the config has no [model.mla]")
        a = m["mla"]
        s["mla"] = {k: a[k] for k in ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
                                      "qk_rope_head_dim", "v_head_dim")}
    return s


def training_settings(toml):
    t, o, sch = toml["training"], toml["optimizer"], toml["lr_scheduler"]
    check(t.get("precision", "fp32") in ("fp32", "float32"),
          f"training.precision is {t.get('precision')!r}: an fp32 run is replayed")
    check(t["local_batch_size"] in (0, t["batch_size"]), "one micro-batch per step only")
    check(t["grad_clip_value"] == 0, "training.grad_clip_value: torchtitan clips by norm only")
    check(o["name"] == "adamw", "optimizer.name must be adamw")
    check(o["weight_decay_params"] in ("all", "matrices"), "optimizer.weight_decay_params?")
    steps = t["steps"]
    return {"steps": steps, "lr": o["lr"], "betas": (o["beta1"], o["beta2"]), "eps": o["eps"],
            "weight_decay": o["weight_decay"], "decay_all": o["weight_decay_params"] == "all",
            "grad_clip": t["grad_clip"],
            # mixprec's trainer caps the warm-up below the run's length
            "warmup": min(sch["warmup_steps"], max(steps - 1, 0)), "decay": sch["decay"],
            "min_lr": o["lr"] * sch["min_lr_ratio"]}


# ---------------------------------------------------------------------------------------------
# RoPE (torchtitan common/rope.py): frequencies, and the two ways of rotating
# ---------------------------------------------------------------------------------------------


def inverse_frequencies(dim, r, mutate=None):
    """dim / 2 frequencies theta^(-2i/dim), changed by Llama 3.1's scaling (slow wavelengths
    divided by the factor, fast ones kept, a linear blend between) or YaRN (a ramp over the
    pair index between the beta_fast and beta_slow correction dims, clamped to [0, dim - 1])."""
    f = 1.0 / r["theta"] ** (torch.arange(0, dim, 2, dtype=DT) / dim)
    if mutate == "rope_scaling" or r["scaling"] == "none":
        return f
    if r["scaling"] == "llama":
        wavelen = 2 * math.pi / f
        slow = wavelen > r["original"] / r["low"]
        fast = wavelen < r["original"] / r["high"]
        s = (r["original"] / wavelen - r["low"]) / (r["high"] - r["low"])
        blend = (1 - s) * f / r["factor"] + s * f
        return torch.where(slow, f / r["factor"], torch.where(fast, f, blend))
    if r["factor"] <= 1.0:  # torchtitan applies YaRN only to a real extension
        return f

    def correction_dim(turns):
        return dim * math.log(r["original"] / (turns * 2 * math.pi)) / (2 * math.log(r["theta"]))

    low, high = correction_dim(r["beta_fast"]), correction_dim(r["beta_slow"])
    if r["truncate"]:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(dim // 2, dtype=DT) - low) / (high - low)).clamp(0, 1)
    return f / r["factor"] * ramp + f * (1 - ramp)


class Rope:
    """Rotates [B, T, N, D] by position: "pairs" (ComplexRoPE: (x[2i], x[2i+1]) is one complex
    number) or "half" (CosSinRoPE: x[i] pairs with x[i + D/2], rotate_half)."""

    def __init__(self, dim, r, layout, seq_len, mutate):
        if mutate == "rope_layout":
            layout = "half" if layout == "pairs" else "pairs"
        self.layout = layout
        f = inverse_frequencies(dim, r, mutate)
        self.angles = torch.outer(torch.arange(seq_len, dtype=DT), f)  # [T, D/2]

    def __call__(self, x):
        a = self.angles[: x.shape[1]]
        if self.layout == "pairs":
            z = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
            turn = torch.polar(torch.ones_like(a), a)[:, None, :]
            return torch.view_as_real(z * turn).flatten(-2)
        a = torch.cat((a, a), dim=-1)[:, None, :]
        x1, x2 = x.chunk(2, dim=-1)
        return x * a.cos() + torch.cat((-x2, x1), dim=-1) * a.sin()


def pair_rows(width, offset, rope, heads):
    """Row order taking rotate-half rows to ComplexRoPE's: in each of `heads` blocks of `width`
    rows, the `rope` rows from `offset` go from [x0 .. x(r/2-1), y0 .. y(r/2-1)] to
    [x0, y0, x1, y1, ...] (torchtitan's Llama adapter does the same to HF's q/k rows)."""
    order = []
    for h in range(heads):
        base = h * width
        order += range(base, base + offset)
        for i in range(rope // 2):
            order += [base + offset + i, base + offset + rope // 2 + i]
        order += range(base + offset + rope, base + width)
    return torch.tensor(order)


# ---------------------------------------------------------------------------------------------
# torchtitan's modules (parameter names as its state dict has them)
# ---------------------------------------------------------------------------------------------


def linear(n_in, n_out):
    return nn.Linear(n_in, n_out, bias=False, dtype=DT)


class RMSNorm(nn.Module):
    """torch.nn.RMSNorm, which torchtitan uses (torch 1.13 has none)."""

    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim, dtype=DT))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def attend(q, k, v, scale):
    """Causal attention of q [B, T, N, D] on k, v [B, T, Nkv, D] -> [B, T, N * Dv]; kv head j
    serves query heads j*g .. j*g+g-1 (SDPA's enable_gqa)."""
    g = q.shape[2] // k.shape[2]
    q, k, v = q.transpose(1, 2), k.repeat_interleave(g, 2).transpose(1, 2), \
        v.repeat_interleave(g, 2).transpose(1, 2)
    t = q.shape[2]
    scores = (q @ k.transpose(-1, -2)) * scale
    scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v
    return out.transpose(1, 2).flatten(2)


class QKVLinear(nn.Module):
    def __init__(self, s):
        super().__init__()
        d, hd = s["dim"], s["head_dim"]
        self.wq = linear(d, s["heads"] * hd)
        self.wk = linear(d, s["kv_heads"] * hd)
        self.wv = linear(d, s["kv_heads"] * hd)


class GQAttention(nn.Module):
    """torchtitan's GQAttention: q/k/v projections to heads, q_norm/k_norm (Qwen 3) over each
    head before RoPE, scale head_dim^-1/2, wo. (torchtitan fuses wq/wk/wv into one wqkv by
    default; its checkpoints split it back: the same products.)"""

    def __init__(self, s, rope, mutate):
        super().__init__()
        self.s, self.rope = s, rope
        self.qkv_linear = QKVLinear(s)
        self.wo = linear(s["heads"] * s["head_dim"], s["dim"])
        self.use_qk_norm = s["qk_norm"] and mutate != "qk_norm_off"
        if s["qk_norm"]:
            self.q_norm = RMSNorm(s["head_dim"], s["eps"])
            self.k_norm = RMSNorm(s["head_dim"], s["eps"])

    def forward(self, x):
        b, t, _ = x.shape
        hd = self.s["head_dim"]
        q = self.qkv_linear.wq(x).view(b, t, -1, hd)
        k = self.qkv_linear.wk(x).view(b, t, -1, hd)
        v = self.qkv_linear.wv(x).view(b, t, -1, hd)
        if self.use_qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        return self.wo(attend(self.rope(q), self.rope(k), v, hd ** -0.5))


class MLAttention(nn.Module):
    """torchtitan's DeepSeek-V3 Attention (multi-head latent attention): q = wq(x) or
    wq_b(q_norm(wq_a(x))), per head [nope | rope]; wkv_a(x) = [latent | one shared rope key];
    k_nope and v per head from wkv_b(kv_norm(latent)); RoPE on the rope parts only; softmax
    scale (nope + rope)^-1/2, times (0.1 mscale ln(factor) + 1)^2 under YaRN."""

    def __init__(self, s, rope, mutate):
        super().__init__()
        a, d, h = s["mla"], s["dim"], s["heads"]
        self.a, self.rope = a, rope
        qk = a["qk_nope_head_dim"] + a["qk_rope_head_dim"]
        if a["q_lora_rank"] == 0:
            self.wq = linear(d, h * qk)
        else:
            self.wq_a = linear(d, a["q_lora_rank"])
            self.q_norm = RMSNorm(a["q_lora_rank"], s["eps"])
            self.wq_b = linear(a["q_lora_rank"], h * qk)
        self.wkv_a = linear(d, a["kv_lora_rank"] + a["qk_rope_head_dim"])
        self.kv_norm = RMSNorm(a["kv_lora_rank"], s["eps"])
        self.wkv_b = linear(a["kv_lora_rank"], h * (a["qk_nope_head_dim"] + a["v_head_dim"]))
        self.wo = linear(h * a["v_head_dim"], d)
        self.scale = qk ** -0.5
        r = s["rope"]
        if r["scaling"] == "yarn" and r["factor"] > 1.0 and mutate != "rope_scaling":
            self.scale *= yarn_mscale(r["factor"], r["mscale"]) ** 2

    def forward(self, x):
        a = self.a
        b, t, _ = x.shape
        nope, rope = a["qk_nope_head_dim"], a["qk_rope_head_dim"]
        q = self.wq(x) if a["q_lora_rank"] == 0 else self.wq_b(self.q_norm(self.wq_a(x)))
        q_nope, q_pe = q.view(b, t, -1, nope + rope).split([nope, rope], dim=-1)
        latent, k_pe = self.wkv_a(x).split([a["kv_lora_rank"], rope], dim=-1)
        q = torch.cat((q_nope, self.rope(q_pe)), dim=-1)
        k_pe = self.rope(k_pe.unsqueeze(2))
        kv = self.wkv_b(self.kv_norm(latent)).view(b, t, -1, nope + a["v_head_dim"])
        k_nope, v = kv.split([nope, a["v_head_dim"]], dim=-1)
        k = torch.cat((k_nope, k_pe.expand(-1, -1, k_nope.shape[2], -1)), dim=-1)
        return self.wo(attend(q, k, v, self.scale))


class FeedForward(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.w1, self.w2, self.w3 = linear(d, hidden), linear(hidden, d), linear(d, hidden)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class GroupedExperts(nn.Module):
    """Every routed expert's SwiGLU, stacked: w1_EFD, w3_EFD [E, F, D], w2_EDF [E, D, F] are one
    parameter each, so an expert no token chose still gets a (zero) gradient slice and the AdamW
    step. Mutation idle_expert_skip: one parameter per expert weight, an idle one untouched."""

    def __init__(self, d, hidden, n, per_expert):
        super().__init__()
        self.n, self.per_expert = n, per_expert
        shapes = {"w1_EFD": (hidden, d), "w2_EDF": (d, hidden), "w3_EFD": (hidden, d)}
        for name, shape in shapes.items():
            if per_expert:
                setattr(self, name, nn.ParameterList(
                    nn.Parameter(torch.empty(shape, dtype=DT)) for _ in range(n)))
            else:
                setattr(self, name, nn.Parameter(torch.empty((n, *shape), dtype=DT)))

    def forward(self, x, counts):
        """x: the routed rows in expert order, counts[e] of them for expert e."""
        outs, start = [], 0
        for e, c in enumerate(counts.tolist()):
            if c == 0 and self.per_expert:
                continue
            rows = x[start:start + c]
            start += c
            h = F.silu(rows @ self.w1_EFD[e].t()) * (rows @ self.w3_EFD[e].t())
            outs.append(h @ self.w2_EDF[e].t())
        return torch.cat(outs)


class RoutedExperts(nn.Module):
    def __init__(self, d, hidden, n, per_expert):
        super().__init__()
        self.inner_experts = GroupedExperts(d, hidden, n, per_expert)


class Router(nn.Module):
    """TokenChoiceTopKRouter: sigmoid or softmax scores of gate(x); experts chosen by score +
    expert bias, from the num_limited_groups groups with the best top-2 sums; gates = the
    unbiased scores, / (their sum + 1e-20) when route_norm, times route_scale."""

    def __init__(self, d, c):
        super().__init__()
        self.c = c
        self.gate = linear(d, c["experts"])

    def forward(self, x, bias):
        c = self.c
        logits = self.gate(x)
        scores = torch.sigmoid(logits) if c["score"] == "sigmoid" else logits.softmax(-1)
        choice = scores.detach() if bias is None else scores.detach() + bias
        if c["groups"]:
            grouped = choice.unflatten(-1, (c["groups"], -1))
            group_score = grouped.topk(2, dim=-1).values.sum(-1)
            kept = group_score.topk(c["limited"], dim=-1).indices
            drop = torch.ones_like(group_score, dtype=torch.bool).scatter(-1, kept, False)
            choice = grouped.masked_fill(drop.unsqueeze(-1), float("-inf")).flatten(-2)
        ids = choice.topk(c["top_k"], dim=-1).indices
        gates = scores.gather(-1, ids)
        if c["route_norm"]:
            gates = gates / (gates.sum(-1, keepdim=True) + 1e-20)
        return gates * c["route_scale"], ids


class MoE(nn.Module):
    """torchtitan's MoE with the local (EP = 1) dispatcher: tokens sorted by expert (stable),
    run by the grouped experts, scaled by their gates after the experts and scatter-added back;
    shared experts (one FFN of n_shared * F) on every token, added. Counts the tokens each
    expert got while training (tokens_per_expert_E) for the bias update."""

    def __init__(self, d, hidden, c, per_expert):
        super().__init__()
        self.c = c
        self.router = Router(d, c)
        self.routed_experts = RoutedExperts(d, hidden, c["experts"], per_expert)
        if c["shared"]:
            self.shared_experts = FeedForward(d, hidden * c["shared"])
        if c["coeff"]:
            self.register_buffer("expert_bias_E", torch.zeros(c["experts"], dtype=DT))
        self.register_buffer("tokens_per_expert_E", torch.zeros(c["experts"], dtype=torch.int64))

    def forward(self, x3):
        x = x3.flatten(0, 1)
        k = self.c["top_k"]
        gates, ids = self.router(x, getattr(self, "expert_bias_E", None))
        counts = torch.bincount(ids.flatten(), minlength=self.c["experts"])
        self.tokens_per_expert_E += counts
        order = torch.sort(ids.flatten(), stable=True).indices
        token = order // k
        y = self.routed_experts.inner_experts(x[token], counts) * gates.flatten()[order, None]
        out = torch.zeros_like(x).index_add(0, token, y)
        if self.c["shared"]:
            out = out + self.shared_experts(x)
        return out.view_as(x3)


class Block(nn.Module):
    def __init__(self, s, layer, rope, mutate):
        super().__init__()
        self.attention_norm = RMSNorm(s["dim"], s["eps"])
        mla = s["family"] == "deepseek_v3"
        self.attention = (MLAttention if mla else GQAttention)(s, rope, mutate)
        self.ffn_norm = RMSNorm(s["dim"], s["eps"])
        c = s.get("moe")
        if c and layer >= c["dense_layers"]:
            self.moe = MoE(s["dim"], s["ffn"], c, mutate == "idle_expert_skip")
        else:
            self.feed_forward = FeedForward(s["dim"], c["dense_ffn"] if c else s["ffn"])

    def forward(self, x):
        x = x + self.attention(self.attention_norm(x))
        mlp = self.moe if hasattr(self, "moe") else self.feed_forward
        return x + mlp(self.ffn_norm(x))


class Decoder(nn.Module):
    """torchtitan's Decoder: tok_embeddings, layers (a ModuleDict), norm, lm_head; tied flavors
    share one weight between tok_embeddings and lm_head."""

    def __init__(self, s, mutate):
        super().__init__()
        if s["family"] == "deepseek_v3":
            rope_dim = s["mla"]["qk_rope_head_dim"]
        else:
            rope_dim = s["head_dim"]
        rope = Rope(rope_dim, s["rope"], s["rope_layout"], s["max_seq_len"], mutate)
        self.tok_embeddings = nn.Embedding(s["vocab"], s["dim"], dtype=DT)
        self.layers = nn.ModuleDict({str(i): Block(s, i, rope, mutate)
                                     for i in range(s["layers"])})
        self.norm = RMSNorm(s["dim"], s["eps"])
        self.lm_head = linear(s["dim"], s["vocab"])
        if s["tied"]:
            self.lm_head.weight = self.tok_embeddings.weight

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        for layer in self.layers.values():
            h = layer(h)
        return self.lm_head(self.norm(h))

    def moe_layers(self):
        return [(int(i), b.moe) for i, b in self.layers.items() if hasattr(b, "moe")]


# ---------------------------------------------------------------------------------------------
# nanoGPT (karpathy/nanoGPT model.py), for the gpt family
# ---------------------------------------------------------------------------------------------


class NanoAttention(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.heads = s["heads"]
        self.c_attn = nn.Linear(s["dim"], 3 * s["dim"], dtype=DT)
        self.c_proj = nn.Linear(s["dim"], s["dim"], dtype=DT)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.heads, -1) for z in self.c_attn(x).split(d, dim=2))
        return self.c_proj(attend(q, k, v, (d // self.heads) ** -0.5))


class NanoMLP(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.c_fc = nn.Linear(s["dim"], 4 * s["dim"], dtype=DT)
        self.c_proj = nn.Linear(4 * s["dim"], s["dim"], dtype=DT)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))


class NanoBlock(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.ln_1 = nn.LayerNorm(s["dim"], eps=1e-5, dtype=DT)
        self.attn = NanoAttention(s)
        self.ln_2 = nn.LayerNorm(s["dim"], eps=1e-5, dtype=DT)
        self.mlp = NanoMLP(s)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class NanoGPT(nn.Module):
    """Token and learned position embeddings (wte, wpe), LayerNorm blocks with biases, ln_f, and
    lm_head tied to wte; dropout 0."""

    def __init__(self, s):
        super().__init__()
        self.transformer = nn.ModuleDict({
            "wte": nn.Embedding(s["vocab"], s["dim"], dtype=DT),
            "wpe": nn.Embedding(s["max_seq_len"], s["dim"], dtype=DT),
            "h": nn.ModuleList(NanoBlock(s) for _ in range(s["layers"])),
            "ln_f": nn.LayerNorm(s["dim"], eps=1e-5, dtype=DT)})
        self.lm_head = nn.Linear(s["dim"], s["vocab"], bias=False, dtype=DT)
        self.transformer.wte.weight = self.lm_head.weight

    def forward(self, tokens):
        t = tokens.shape[1]
        x = self.transformer.wte(tokens) + self.transformer.wpe(torch.arange(t))
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))

    def moe_layers(self):
        return []


# ---------------------------------------------------------------------------------------------
# mixprec's parameters <-> the replay's: names and layouts
# ---------------------------------------------------------------------------------------------


class Link:
    """mixprec tensor `ours` is rows `rows` (all when None) of replay tensor `theirs`, in row
    order `order` (replay row r = our row order[r]; None: the same order)."""

    def __init__(self, ours, theirs, rows=None, order=None):
        self.ours, self.theirs, self.rows, self.order = ours, theirs, rows, order


def rope_order(width, offset, rope, heads, s, mutate):
    """ComplexRoPE wants pairs on neighbouring rows; mixprec's rotate-half rows are permuted per
    head (mutation head_mapping: not permuted)."""
    if s["rope_layout"] != "pairs" or mutate == "head_mapping":
        return None
    return pair_rows(width, offset, rope, heads)


def titan_links(s, mutate):
    """Every mixprec parameter's place in torchtitan's model."""
    links = [Link("tok_emb.weight", "tok_embeddings.weight"),
             Link("final_norm.weight", "norm.weight")]
    if not s["tied"]:
        links.append(Link("lm_head.weight", "lm_head.weight"))
    hd, c = s["head_dim"], s.get("moe")
    for i in range(s["layers"]):
        ours, tt = f"blocks.{i}.", f"layers.{i}."
        links += [Link(ours + "attn_norm.weight", tt + "attention_norm.weight"),
                  Link(ours + "mlp_norm.weight", tt + "ffn_norm.weight")]
        if s["family"] == "deepseek_v3":
            a = s["mla"]
            nope, rope = a["qk_nope_head_dim"], a["qk_rope_head_dim"]
            q_order = rope_order(nope + rope, nope, rope, s["heads"], s, mutate)
            kv_order = rope_order(a["kv_lora_rank"] + rope, a["kv_lora_rank"], rope, 1, s, mutate)
            q_names = ["wq"] if a["q_lora_rank"] == 0 else ["wq_b"]
            plain = ["wkv_b", "wo", "kv_norm.weight"]
            if a["q_lora_rank"]:
                plain += ["wq_a", "q_norm.weight"]
            links += [Link(ours + "attn." + n, tt + "attention." + n + ".weight", None, q_order)
                      for n in q_names]
            links.append(Link(ours + "attn.wkv_a", tt + "attention.wkv_a.weight", None, kv_order))
            links += [Link(ours + "attn." + n,
                           tt + "attention." + n + ("" if n.endswith(".weight") else ".weight"))
                      for n in plain]
        else:
            q_order = rope_order(hd, 0, hd, s["heads"], s, mutate)
            k_order = rope_order(hd, 0, hd, s["kv_heads"], s, mutate)
            qkv = tt + "attention.qkv_linear."
            links += [Link(ours + "attn.wq", qkv + "wq.weight", None, q_order),
                      Link(ours + "attn.wk", qkv + "wk.weight", None, k_order),
                      Link(ours + "attn.wv", qkv + "wv.weight"),
                      Link(ours + "attn.wo", tt + "attention.wo.weight")]
            if s["qk_norm"]:
                links += [Link(ours + "attn.q_norm.weight", tt + "attention.q_norm.weight"),
                          Link(ours + "attn.k_norm.weight", tt + "attention.k_norm.weight")]
        ffn = {"w_gate": "w1", "w_up": "w3", "w_down": "w2"}
        if c and i >= c["dense_layers"]:
            links.append(Link(ours + "moe.router", tt + "moe.router.gate.weight"))
            experts = tt + "moe.routed_experts.inner_experts."
            stacked = {"w_gate": "w1_EFD", "w_up": "w3_EFD", "w_down": "w2_EDF"}
            links += [Link(ours + "moe.experts." + n, experts + m) for n, m in stacked.items()]
            if c["shared"]:
                links += [Link(ours + "moe.shared_experts." + n,
                               tt + "moe.shared_experts." + m + ".weight") for n, m in ffn.items()]
        else:
            links += [Link(ours + "mlp." + n, tt + "feed_forward." + m + ".weight")
                      for n, m in ffn.items()]
    return links


def nanogpt_links(s):
    d = s["dim"]
    links = [Link("tok_emb.weight", "transformer.wte.weight"),
             Link("pos_emb.weight", "transformer.wpe.weight"),
             Link("final_norm.weight", "transformer.ln_f.weight"),
             Link("final_norm.bias", "transformer.ln_f.bias")]
    for i in range(s["layers"]):
        ours, h = f"blocks.{i}.", f"transformer.h.{i}."
        for n, m in (("attn_norm", "ln_1"), ("mlp_norm", "ln_2")):
            links += [Link(ours + n + ".weight", h + m + ".weight"),
                      Link(ours + n + ".bias", h + m + ".bias")]
        for j, n in enumerate(("wq", "wk", "wv")):  # c_attn = [q; k; v] rows
            rows = slice(j * d, (j + 1) * d)
            links += [Link(ours + "attn." + n, h + "attn.c_attn.weight", rows),
                      Link(ours + "attn." + n + "_bias", h + "attn.c_attn.bias", rows)]
        for n, m in (("attn.wo", "attn.c_proj"), ("mlp.w_up", "mlp.c_fc"),
                     ("mlp.w_down", "mlp.c_proj")):
            links += [Link(ours + n, h + m + ".weight"), Link(ours + n + "_bias", h + m + ".bias")]
    return links


def stacked_view(model):
    """name -> tensor, with per-expert parameters (idle_expert_skip) stacked under the stacked
    name, so both layouts map the same way."""
    named = dict(model.named_parameters())
    out, lists = {}, {}
    for name, p in named.items():
        head, _, last = name.rpartition(".")
        if head.rpartition(".")[2] in ("w1_EFD", "w2_EDF", "w3_EFD") and last.isdigit():
            lists.setdefault(head, []).append((int(last), p))
        else:
            out[name] = p
    for name, parts in lists.items():
        out[name] = [p for _, p in sorted(parts)]
    return out


def load_ours(model, links, ours):
    """Copies mixprec's tensors into the replay's parameters; every one must be used and every
    replay parameter filled (the message names the tensor)."""
    params = stacked_view(model)
    filled = {name: 0 for name in params}
    used = set()
    with torch.no_grad():
        for link in links:
            check(link.ours in ours, f"init: no tensor {link.ours!r} (replay's {link.theirs})")
            check(link.theirs in params, f"replay has no parameter {link.theirs!r}")
            src = ours[link.ours].to(DT)
            if link.order is not None:
                src = src[link.order]
            dst = params[link.theirs]
            if isinstance(dst, list):  # per-expert parameters
                check(src.shape[0] == len(dst), f"{link.ours}: {src.shape[0]} experts")
                for e, p in enumerate(dst):
                    p.copy_(src[e])
                filled[link.theirs] += sum(p.numel() for p in dst)
            else:
                target = dst if link.rows is None else dst[link.rows]
                check(target.shape == src.shape, f"{link.ours}: shape {list(src.shape)}, the "
                      f"replay's {link.theirs} wants {list(target.shape)}")
                target.copy_(src)
                filled[link.theirs] += src.numel()
            used.add(link.ours)
    extra = sorted(set(ours) - used)
    check(not extra, f"init: tensors the replay has no place for: {extra}")
    for name, n in filled.items():
        p = params[name]
        size = sum(q.numel() for q in p) if isinstance(p, list) else p.numel()
        check(n == size, f"replay parameter {name!r}: {n} of {size} values given")


def dump_ours(model, links):
    """The replay's parameters under mixprec's names and layouts (the inverse of load_ours)."""
    params = stacked_view(model)
    out = {}
    for link in links:
        t = params[link.theirs]
        t = torch.stack([p.detach() for p in t]) if isinstance(t, list) else t.detach()
        if link.rows is not None:
            t = t[link.rows]
        if link.order is not None:
            back = torch.empty_like(t)
            back[link.order] = t
            t = back
        out[link.ours] = t.clone()
    return out


# ---------------------------------------------------------------------------------------------
# the training step
# ---------------------------------------------------------------------------------------------


def learning_rate(tr, step):
    """mixprec's trainer schedule: linear warm-up to lr over warmup steps, then cosine to min_lr
    over the rest of the run (or constant)."""
    if step < tr["warmup"]:
        return tr["lr"] * (step + 1) / tr["warmup"]
    if tr["decay"] == "constant":
        return tr["lr"]
    progress = min((step - tr["warmup"]) / (tr["steps"] - tr["warmup"]), 1.0)
    return tr["min_lr"] + (tr["lr"] - tr["min_lr"]) * (1 + math.cos(math.pi * progress)) / 2


def param_groups(model, tr):
    """torchtitan's default_adamw: one group, weight decay on every parameter. With
    weight_decay_params = "matrices", nanoGPT's configure_optimizers rule: decay on tensors of
    two or more dimensions only."""
    params = list(model.parameters())
    if tr["decay_all"]:
        return [{"params": params, "weight_decay": tr["weight_decay"]}]
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": tr["weight_decay"]},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


def update_expert_bias(model, mutate):
    """components/optimizer's load-balancing pre-hook, run before each optimizer step: per MoE
    layer delta = coeff * sign(mean(counts) - counts), centred, added to expert_bias_E (an
    under-loaded expert is raised); the counts restart. Returns the step's counts."""
    counts = []
    for _, moe in model.moe_layers():
        n = moe.tokens_per_expert_E.clone()
        counts.append(n)
        if moe.c["coeff"]:
            gap = n.to(DT).mean() - n.to(DT)
            delta = moe.c["coeff"] * torch.sign(-gap if mutate == "bias_sign" else gap)
            moe.expert_bias_E += delta - delta.mean()
        moe.tokens_per_expert_E.zero_()
    return torch.cat(counts) if counts else None


def replay(s, tr, init, inputs, targets, mutate=None):
    """Trains from `init` (mixprec's names) on the batches; returns mixprec-named results."""
    if s["family"] == "gpt":
        model, links = NanoGPT(s), nanogpt_links(s)
    else:
        model, links = Decoder(s, mutate), titan_links(s, mutate)
    load_ours(model, links, init)
    model.train()
    groups = param_groups(model, tr)
    opt = torch.optim.AdamW(groups, lr=tr["lr"], betas=tr["betas"], eps=tr["eps"],
                            foreach=False)
    params = [p for g in groups for p in g["params"]]
    losses, norms, counts = [], [], []
    for step in range(inputs.shape[0]):
        for g in opt.param_groups:
            g["lr"] = learning_rate(tr, step)
        opt.zero_grad(set_to_none=True)  # an unused parameter then has no gradient
        logits = model(inputs[step])
        loss = F.cross_entropy(logits.flatten(0, 1), targets[step].flatten())
        loss.backward()
        with_grad = [p for p in params if p.grad is not None]
        norm = torch.sqrt(sum((p.grad ** 2).sum() for p in with_grad))
        if tr["grad_clip"] > 0:  # torch.nn.utils.clip_grad_norm_
            coef = min(tr["grad_clip"] / (norm.item() + 1e-6), 1.0)
            for p in with_grad:
                p.grad.mul_(coef)
        step_counts = update_expert_bias(model, mutate)
        opt.step()
        losses.append(loss.item())
        norms.append(norm.item())
        if step_counts is not None:
            counts.append(step_counts)
    out = dump_ours(model, links)
    for i, moe in model.moe_layers():
        if moe.c["coeff"]:
            out[f"buffer.blocks.{i}.moe.expert_bias"] = moe.expert_bias_E.clone()
    out["loss"] = torch.tensor(losses, dtype=DT)
    out["grad_norm"] = torch.tensor(norms, dtype=DT)
    if counts:
        out["counts"] = torch.stack(counts)
    return out


# ---------------------------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------------------------


def read_config(path):
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise InputError(f"{path}: {e}") from None


def run(folder, family, mutations):
    toml = read_config(os.path.join(folder, "config.toml"))
    s, tr = model_settings(toml["model"], family), training_settings(toml)
    init = read_safetensors(os.path.join(folder, "init.safetensors"))
    batches = read_safetensors(os.path.join(folder, "batches.safetensors"))
    check("inputs" in batches and "targets" in batches, "batches: 'inputs' and 'targets'")
    inputs, targets = batches["inputs"].to(torch.int64), batches["targets"].to(torch.int64)
    check(inputs.dim() == 3 and inputs.shape == targets.shape,
          "batches: inputs and targets must both be [steps, B, T]")
    check(inputs.shape[2] <= s["max_seq_len"], "batches: T exceeds model.max_seq_len")
    for mutate in [None] + list(mutations):
        out = replay(s, tr, init, inputs, targets, mutate)
        name = "replay.safetensors" if mutate is None else f"replay-{mutate}.safetensors"
        write_safetensors(os.path.join(folder, name), sorted(out.items()))


# A DeepSeek-V3 with every MLA piece (q through wq_a, q_norm, wq_b), YaRN over all three bands of
# its 8 rope frequencies, a dense first block and the MoE of the moe family, for the selftest.
SELFTEST_DSV3 = """
[model]
kind = "deepseek_v3"
vocab_size = 64
d_model = 32
n_layers = 2
n_heads = 2
n_kv_heads = 0
head_dim = 0
d_ff = 16
max_seq_len = 16
norm = "rmsnorm"
norm_eps = 1e-5
mlp = "swiglu"
positions = "rope"
rope_theta = 10000.0
tie_embeddings = false
bias = false
qk_norm = false
[model.moe]
n_experts = 16
top_k = 2
capacity_factor = 0.0
aux_loss_weight = 0.0
z_loss_weight = 0.0
score_func = "sigmoid"
route_norm = true
route_scale = 2.5
n_expert_groups = 4
n_limited_groups = 2
n_shared_experts = 1
n_dense_layers = 1
dense_d_ff = 48
load_balance_coeff = 0.01
idle_experts = "step"
[model.rope_scaling]
type = "yarn"
factor = 4.0
low_freq_factor = 1.0
high_freq_factor = 4.0
original_max_position_embeddings = 64
beta_fast = 32.0
beta_slow = 1.0
mscale = 0.7
mscale_all_dim = 0.7
attention_factor = 0.0
truncate = true
[model.mla]
q_lora_rank = 24
kv_lora_rank = 16
qk_nope_head_dim = 8
qk_rope_head_dim = 16
v_head_dim = 8
[training]
steps = 4
batch_size = 2
local_batch_size = 0
seq_len = 16
precision = "fp32"
grad_clip = 1.0
grad_clip_value = 0.0
[optimizer]
name = "adamw"
lr = 0.01
weight_decay = 0.1
weight_decay_params = "all"
beta1 = 0.9
beta2 = 0.95
eps = 1e-8
[lr_scheduler]
warmup_steps = 2
decay = "cosine"
min_lr_ratio = 0.1
"""


def dsv3_ours(s, gen):
    """Random mixprec-named DeepSeek-V3 parameters for SELFTEST_DSV3 (norm gains near 1)."""
    a, c, d, h = s["mla"], s["moe"], s["dim"], s["heads"]
    qk, f, e = a["qk_nope_head_dim"] + a["qk_rope_head_dim"], s["ffn"], c["experts"]
    shapes = {"tok_emb.weight": (s["vocab"], d), "lm_head.weight": (s["vocab"], d),
              "final_norm.weight": (d,)}
    for i in range(s["layers"]):
        b = f"blocks.{i}."
        shapes.update({b + "attn_norm.weight": (d,), b + "mlp_norm.weight": (d,),
                       b + "attn.wq_a": (a["q_lora_rank"], d),
                       b + "attn.q_norm.weight": (a["q_lora_rank"],),
                       b + "attn.wq_b": (h * qk, a["q_lora_rank"]),
                       b + "attn.wkv_a": (a["kv_lora_rank"] + a["qk_rope_head_dim"], d),
                       b + "attn.kv_norm.weight": (a["kv_lora_rank"],),
                       b + "attn.wkv_b": (h * (a["qk_nope_head_dim"] + a["v_head_dim"]),
                                          a["kv_lora_rank"]),
                       b + "attn.wo": (d, h * a["v_head_dim"])})
        if i < c["dense_layers"]:
            ff = c["dense_ffn"]
            shapes.update({b + "mlp.w_gate": (ff, d), b + "mlp.w_up": (ff, d),
                           b + "mlp.w_down": (d, ff)})
        else:
            shapes.update({b + "moe.router": (e, d), b + "moe.experts.w_gate": (e, f, d),
                           b + "moe.experts.w_up": (e, f, d), b + "moe.experts.w_down": (e, d, f)})
            for n, shape in (("w_gate", (f, d)), ("w_up", (f, d)), ("w_down", (d, f))):
                shapes[b + "moe.shared_experts." + n] = shape
    return {n: (1 + 0.1 * torch.randn(sh, generator=gen, dtype=DT)) if n.endswith("norm.weight")
            else 0.3 * torch.randn(sh, generator=gen, dtype=DT) for n, sh in shapes.items()}


def selftest_rope_rows():
    """The permutation makes ComplexRoPE on the permuted rows what rotate-half is on mixprec's
    (per head, for GQA and for MLA's rope rows): the rotated projections agree row for row."""
    gen = torch.Generator().manual_seed(3)
    r = {"theta": 10000.0, "scaling": "none"}
    for width, offset, rope, heads in ((16, 0, 16, 3), (24, 8, 16, 2), (20, 16, 4, 1)):
        w = torch.randn(heads * width, 8, generator=gen, dtype=DT)
        x = torch.randn(1, 5, 8, generator=gen, dtype=DT)
        order = pair_rows(width, offset, rope, heads)

        def rotated(weight, layout):
            y = (x @ weight.t()).view(1, 5, heads, width)
            spin = Rope(rope, r, layout, 5, None)
            return torch.cat((y[..., :offset], spin(y[..., offset:offset + rope]),
                              y[..., offset + rope:]), dim=-1).flatten(2)

        ours = rotated(w, "half")
        theirs = rotated(w[order], "pairs")
        diff = (theirs - ours[..., order]).abs().max().item()
        check(diff < 1e-12, f"ComplexRoPE on permuted rows differs by {diff}")
        wrong = (rotated(w, "pairs") - ours).abs().max().item()
        check(wrong > 1e-3, "ComplexRoPE on unpermuted rows should differ")
    print("ok      rope rows: ComplexRoPE on permuted rows == rotate-half on mixprec's rows "
          "(GQA heads, MLA q and kv_a rope rows)")


def selftest_frequencies():
    """Llama 3.1 scaling keeps the fast band, slows the slow band 8x, blends between; YaRN
    likewise over its ramp."""
    f = inverse_frequencies(16, {"theta": 500000.0, "scaling": "none"})
    g = inverse_frequencies(16, {"theta": 500000.0, "scaling": "llama", "factor": 8.0,
                                 "low": 1.0, "high": 4.0, "original": 64})
    wavelen = 2 * math.pi / f
    check(torch.equal(g[wavelen < 16], f[wavelen < 16]), "llama: fast band moved")
    check(torch.allclose(g[wavelen > 64], f[wavelen > 64] / 8), "llama: slow band not / 8")
    mid = (wavelen >= 16) & (wavelen <= 64)
    check(bool(mid.any()) and bool(((g[mid] < f[mid]) & (g[mid] > f[mid] / 8)).all()),
          "llama: the middle band is not blended")
    y = inverse_frequencies(16, {"theta": 10000.0, "scaling": "yarn", "factor": 4.0,
                                 "beta_fast": 32.0, "beta_slow": 1.0, "original": 64,
                                 "truncate": True})
    f = inverse_frequencies(16, {"theta": 10000.0, "scaling": "none"})
    ratio = (f / y).tolist()
    check(abs(ratio[0] - 1) < 1e-15 and abs(ratio[-1] - 4) < 1e-12 and 1 < ratio[1] < 4,
          f"yarn ratios {ratio}")
    print("ok      frequencies: llama3 scaling and YaRN move the bands as specified")


def selftest_dsv3():
    """A DeepSeek-V3 replay round-trips mixprec's names, routes with an idle expert, moves its
    biases, and each mutation changes where it ends."""
    toml = tomllib.loads(SELFTEST_DSV3)
    s, tr = model_settings(toml["model"], "deepseek_v3"), training_settings(toml)
    gen = torch.Generator().manual_seed(11)
    init = dsv3_ours(s, gen)
    model = Decoder(s, None)
    links = titan_links(s, None)
    load_ours(model, links, init)
    back = dump_ours(model, links)
    check(all(torch.equal(back[n], init[n]) for n in init), "dsv3: names do not round-trip")
    inputs = torch.randint(0, s["vocab"], (4, 2, 16), generator=gen)
    targets = torch.randint(0, s["vocab"], (4, 2, 16), generator=gen)
    base = replay(s, tr, init, inputs, targets)
    check(bool((base["counts"] == 0).any()), "dsv3: no expert was idle in any step")
    check(float(base["buffer.blocks.1.moe.expert_bias"].abs().max()) > 0, "dsv3: bias still")
    moved = {}
    for mutate in ("head_mapping", "rope_layout", "rope_scaling", "idle_expert_skip",
                   "bias_sign"):
        other = replay(s, tr, init, inputs, targets, mutate)
        moved[mutate] = max(float((other[n] - base[n]).norm() / base[n].norm()) for n in init)
        check(moved[mutate] > 1e-4, f"dsv3: mutation {mutate} moved the weights by only "
              f"{moved[mutate]:.2e}")
    print("ok      deepseek_v3: names round-trip, idle experts, biases move; mutations move the "
          "weights by " + ", ".join(f"{k} {v:.1e}" for k, v in moved.items()))


def selftest():
    selftest_rope_rows()
    selftest_frequencies()
    selftest_dsv3()
    print("selftest passed")


class OneLineParser(argparse.ArgumentParser):
    def error(self, message):
        raise InputError(f"usage: {message}")


def make_parser():
    parser = OneLineParser(prog="titan_replay.py", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    p = sub.add_parser("run", help="replay a run's steps")
    p.add_argument("dir")
    p.add_argument("--family", required=True, choices=FAMILIES)
    p.add_argument("--mutate", action="append", default=[], choices=MUTATIONS)
    p.set_defaults(run=lambda a: run(a.dir, a.family, a.mutate))
    p = sub.add_parser("selftest", help="check the replay's pieces against themselves")
    p.set_defaults(run=lambda a: selftest())
    return parser


def main(argv=None):
    torch.set_num_threads(1)  # the test machine's cores are shared
    return run_command(make_parser(), "titan_replay.py", argv)


if __name__ == "__main__":
    sys.exit(main())
