#!/usr/bin/python3
"""PyTorch reference fixtures for mixprec's optimizers (SGD, AdamW) over 10 steps.

Regenerate with (Debian 12 packages python3-torch python3-numpy libopenblas0-pthread):

    /usr/bin/python3 tests/reference/make_optim_fixtures.py           # writes fixtures/optim_*
    /usr/bin/python3 tests/reference/make_optim_fixtures.py --check   # exit 1 if a file would change

Each case optimizes two f32 parameters, `w` [7,5] (weight decay applies) and `b` [5] (in a
second parameter group with weight_decay 0: mixprec marks it no_weight_decay), through 10
steps with fixed random gradients. A file holds `<p>.init`, `<p>.grad.<k>` and
`<p>.after.<k>` (the parameter after step k, k = 0..9) for p in {w, b}, all F32; the
`__metadata__` records torch_version, optimizer, semantics and each hyperparameter as JSON.

The same steps are also run in f64 (same inputs widened); the script prints how far the f32
trajectory lies from it, which bounds what "matches within f32 rounding" can mean.
Deterministic: seeds come from a CRC32 of the case name, random values are drawn in f64
and rounded to f32 (as make_fixtures.py does), one intra-op thread.
"""

import argparse
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_fixtures import randn, read_safetensors, safetensors_bytes, seed_of  # noqa: E402

FIXTURES = os.path.join(HERE, "fixtures")
STEPS = 10
SHAPES = {"w": (7, 5), "b": (5,)}

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

# case -> (optimizer class, hyperparameters (lr and weight_decay apply to w; b gets wd 0), doc)
CASES = {
    "optim_sgd_nesterov": (
        torch.optim.SGD,
        dict(lr=0.05, momentum=0.9, dampening=0.0, nesterov=True, weight_decay=0.01),
        "torch.optim.SGD, momentum + Nesterov + L2 weight decay",
    ),
    "optim_sgd_dampening": (
        torch.optim.SGD,
        dict(lr=0.1, momentum=0.8, dampening=0.25, nesterov=False, weight_decay=0.0),
        "torch.optim.SGD, momentum with dampening",
    ),
    "optim_adamw": (
        torch.optim.AdamW,
        dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1),
        "torch.optim.AdamW (decoupled decay, bias correction, eps after sqrt), amsgrad off",
    ),
    "optim_adamw_eps": (
        torch.optim.AdamW,
        dict(lr=0.003, betas=(0.8, 0.99), eps=1e-3, weight_decay=0.5),
        "torch.optim.AdamW with gradients ~eps (eps matters) and strong decay",
    ),
}


def inputs(name):
    torch.manual_seed(seed_of(name))
    init = {p: randn(*s) for p, s in SHAPES.items()}
    # Gradient scale per step varies over two decades; the _eps case keeps them near eps.
    scale = 1e-3 if name.endswith("_eps") else 1.0
    grads = [{p: randn(*s, scale=scale * 10 ** (k % 3 - 1)) for p, s in SHAPES.items()}
             for k in range(STEPS)]
    return init, grads


def trajectory(cls, hyper, init, grads, dtype):
    params = {p: torch.nn.Parameter(t.to(dtype).clone()) for p, t in init.items()}
    opt_args = dict(hyper)
    opt = cls([{"params": [params["w"]]},
               {"params": [params["b"]], "weight_decay": 0.0}], **opt_args)
    after = []
    for g in grads:
        for p, t in params.items():
            t.grad = g[p].to(dtype).clone()
        opt.step()
        after.append({p: t.detach().clone() for p, t in params.items()})
    return after


def build(name):
    cls, hyper, doc = CASES[name]
    init, grads = inputs(name)
    after = trajectory(cls, hyper, init, grads, torch.float32)
    after64 = trajectory(cls, hyper, init, grads, torch.float64)
    tensors = [(f"{p}.init", init[p]) for p in SHAPES]
    for k in range(STEPS):
        tensors += [(f"{p}.grad.{k}", grads[k][p]) for p in SHAPES]
    for k in range(STEPS):
        tensors += [(f"{p}.after.{k}", after[k][p]) for p in SHAPES]
    meta = {"torch_version": torch.__version__, "optimizer": cls.__name__, "semantics": doc,
            "steps": json.dumps(STEPS), "b_weight_decay": json.dumps(0.0)}
    meta.update({k: json.dumps(v) for k, v in hyper.items()})
    # Distance of the f32 trajectory from the f64 one, relative to the parameter's scale.
    worst = 0.0
    for k in range(STEPS):
        for p in SHAPES:
            ref = after64[k][p]
            d = (after[k][p].double() - ref).abs().max().item() / ref.abs().max().item()
            worst = max(worst, d)
    return safetensors_bytes(tensors, meta), worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 if any fixture file would change")
    args = ap.parse_args()
    changed = []
    os.makedirs(FIXTURES, exist_ok=True)
    for name in CASES:
        data, worst = build(name)
        path = os.path.join(FIXTURES, name + ".safetensors")
        old = open(path, "rb").read() if os.path.exists(path) else None
        if old != data:
            changed.append(name)
            if not args.check:
                with open(path, "wb") as f:
                    f.write(data)
                read_safetensors(path)
        print(f"{name:22s} {len(data):6d} bytes  max |f32 - f64| / max|p| over 10 steps: "
              f"{worst:.3g}")
    if args.check and changed:
        print("would change:", ", ".join(changed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
