#!/usr/bin/env python3
"""PyTorch 2.x peer of bench_train_step: the same model shapes trained on the CPU, eager or
under torch.compile (Inductor), in fp32 or under torch.autocast("cpu", torch.bfloat16).
Prints one JSON line (tokens/s median and range over the timed steps, peak RSS, losses).

A benchmark tool, never a mixprec dependency: run it with a Python that has PyTorch 2.x,
e.g. a virtual environment made by `python3 -m venv v && v/bin/pip install torch`.

The model is bench_train_step's: GPT-2-style blocks (LayerNorm, fused qkv, exact GELU MLP of
4 d; linears without biases, as the bench builds config S), learned positions, tied
embeddings, byte vocabulary; or its MoE variant (8 experts of the same MLP, softmax router,
top-2 renormalised, Switch aux loss 0.01 on the blocks' mean, dropless). AdamW (betas
0.9/0.95, weight decay 0.1, PyTorch's fused CPU kernel) with global norm clipping at 1.0;
random tokens, as the mixprec side uses by default.

    v/bin/python bench/torch_peer.py --mode autocast_bf16 --compile --d_model 768 --n_layer 12
"""
import argparse
import json
import math
import os
import resource
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
p.add_argument("--mode", choices=["fp32", "autocast_bf16"], required=True)
p.add_argument("--compile", action="store_true", help="torch.compile the model (Inductor)")
p.add_argument("--moe", action="store_true")
p.add_argument("--steps", type=int, default=10, help="timed steps")
p.add_argument("--warmup", type=int, default=3, help="untimed steps first (compilation runs here)")
p.add_argument("--threads", type=int, default=2)
p.add_argument("--vocab", type=int, default=256)
p.add_argument("--d_model", type=int, default=256)
p.add_argument("--n_layer", type=int, default=4)
p.add_argument("--n_head", type=int, default=4)
p.add_argument("--T", type=int, default=256)
p.add_argument("--B", type=int, default=8)
p.add_argument("--n_expert", type=int, default=8)
p.add_argument("--top_k", type=int, default=2)
p.add_argument("--seed", type=int, default=1337)
args = p.parse_args()
if int(torch.__version__.split(".")[0]) < 2:
    sys.exit(f"torch_peer.py: PyTorch 2.x wanted, this Python has {torch.__version__}")

torch.set_num_threads(args.threads)
torch.manual_seed(args.seed)


class Attention(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.h, C // self.h).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class Mlp(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, 4 * d, bias=False)
        self.out = nn.Linear(4 * d, d, bias=False)

    def forward(self, x):
        return self.out(F.gelu(self.fc(x)))


class Moe(nn.Module):
    def __init__(self, d, n_expert, top_k):
        super().__init__()
        self.top_k = top_k
        self.router = nn.Linear(d, n_expert, bias=False)
        self.experts = nn.ModuleList(Mlp(d) for _ in range(n_expert))

    def forward(self, x):
        B, T, C = x.shape
        flat = x.reshape(-1, C)
        probs = F.softmax(self.router(flat).float(), dim=-1)
        top_p, top_i = probs.topk(self.top_k, dim=-1)
        gates = top_p / top_p.sum(dim=-1, keepdim=True)
        n_expert = probs.shape[1]
        routed = F.one_hot(top_i, n_expert).sum(dim=1).float()  # [N, E]
        aux = n_expert * torch.sum(routed.mean(dim=0) / self.top_k * probs.mean(dim=0))
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            rows, slot = torch.where(top_i == e)
            if rows.numel() == 0:
                continue
            y = expert(flat[rows]) * gates[rows, slot].unsqueeze(1).to(flat.dtype)
            out = out.index_add(0, rows, y.to(out.dtype))
        return out.view(B, T, C), aux


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        d = args.d_model
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = Attention(d, args.n_head)
        self.mlp = Moe(d, args.n_expert, args.top_k) if args.moe else Mlp(d)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        if args.moe:
            m, aux = self.mlp(self.ln2(x))
            return x + m, aux
        return x + self.mlp(self.ln2(x)), x.new_zeros(())


class Gpt(nn.Module):
    def __init__(self):
        super().__init__()
        d = args.d_model
        self.wte = nn.Embedding(args.vocab, d)
        self.wpe = nn.Embedding(args.T, d)
        self.blocks = nn.ModuleList(Block() for _ in range(args.n_layer))
        self.ln_f = nn.LayerNorm(d)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        aux = x.new_zeros(())
        for b in self.blocks:
            x, a = b(x)
            aux = aux + a
        logits = F.linear(self.ln_f(x), self.wte.weight)  # tied
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))
        return ce + 0.01 * aux / args.n_layer if args.moe else ce  # mixprec: the blocks' mean


model = Gpt()
n_params = sum(t.numel() for t in model.parameters())
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1,
                        fused=True)
forward = torch.compile(model) if args.compile else model
gen = torch.Generator().manual_seed(args.seed)


def train_step():
    tokens = torch.randint(args.vocab, (args.B, args.T + 1), generator=gen)
    with torch.autocast("cpu", torch.bfloat16, enabled=args.mode == "autocast_bf16"):
        loss = forward(tokens[:, :-1], tokens[:, 1:])
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.item()


losses, seconds = [], []
started = time.perf_counter()
for step in range(args.warmup + args.steps):
    t0 = time.perf_counter()
    losses.append(train_step())
    if step >= args.warmup:
        seconds.append(time.perf_counter() - t0)
    print(f"step {step} loss {losses[-1]:.4f} {1e3 * (time.perf_counter() - t0):.0f} ms",
          file=sys.stderr, flush=True)
tokens = args.B * args.T
print(json.dumps({
    "torch": torch.__version__, "mode": args.mode, "compile": args.compile, "moe": args.moe,
    "threads": torch.get_num_threads(), "n_params": n_params, "B": args.B, "T": args.T,
    "tokens_per_s": tokens / statistics.median(seconds),
    "tokens_per_s_min": tokens / max(seconds), "tokens_per_s_max": tokens / min(seconds),
    "step_ms": 1e3 * statistics.median(seconds),
    "warmup_s": round(time.perf_counter() - started - sum(seconds), 1),  # compilation included
    "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    "loss_first": losses[0], "loss_last": losses[-1],
}))
