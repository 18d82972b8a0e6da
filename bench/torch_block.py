#!/usr/bin/python3
"""PyTorch 1.13 timing of one GPT block (pre-LayerNorm, causal self-attention, GELU MLP; the
Block of ../shared/peers/torch_gpt.py), forward + backward of sum(out * g), for bench_block.

usage: /usr/bin/python3 bench/torch_block.py --mode {fp32,autocast_bf16} [--reps N]
Prints one JSON line: {"mode": ..., "median_ms": ..., "reps": ...}.
"""
import argparse, json, math, statistics, time

import torch
import torch.nn as nn
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--mode", required=True, choices=["fp32", "autocast_bf16"])
p.add_argument("--reps", type=int, default=10)
p.add_argument("--threads", type=int, default=2)
p.add_argument("--B", type=int, default=8)
p.add_argument("--T", type=int, default=256)
p.add_argument("--d", type=int, default=256)
p.add_argument("--heads", type=int, default=4)
a = p.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self, d, h, T):
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.fc_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.register_buffer("mask", torch.tril(torch.ones(T, T, dtype=torch.bool)))

    def attn(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.h, C // self.h).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = F.softmax(att.masked_fill(~self.mask[:T, :T], float("-inf")), dim=-1)
        return self.proj((att @ v).transpose(1, 2).contiguous().view(B, T, C))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc_proj(F.gelu(self.fc(self.ln2(x))))


blk = Block(a.d, a.heads, a.T)
x = torch.randn(a.B, a.T, a.d, requires_grad=True)
g = torch.randn(a.B, a.T, a.d)


def step():
    if a.mode == "autocast_bf16":
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            out = blk(x)
    else:
        out = blk(x)
    (out.float() * g).sum().backward()


for _ in range(2):
    step()
times = []
for _ in range(a.reps):
    t0 = time.perf_counter()
    step()
    times.append(time.perf_counter() - t0)
print(json.dumps({"mode": a.mode, "median_ms": 1e3 * statistics.median(times), "reps": a.reps}))
