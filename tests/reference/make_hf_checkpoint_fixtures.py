#!/work/venv-peers/bin/python
"""Hugging Face checkpoint folders written by `transformers` itself, for mixprec's HF import.

    tests/reference/make_hf_checkpoint_fixtures.py          # writes fixtures/hf_checkpoints/
    tests/reference/make_hf_checkpoint_fixtures.py --check  # writes nothing; exit 1 on a change
    tests/reference/make_hf_checkpoint_fixtures.py --only llama qwen3   # some families only

Runs with a Python that has torch, transformers, safetensors and numpy from PyPI, kept outside
the repository (e.g. `python3 -m venv /work/venv-peers && /work/venv-peers/bin/pip install
torch transformers safetensors numpy`). Made with torch 2.15.0+cu132 (CPU), transformers
5.24.0, safetensors 0.8.0, numpy 2.4.6 (Python 3.11). The versions are also written into
every expected.safetensors' `__metadata__`. Nothing is downloaded: every model is built from
a config in this file (FAMILIES below) with random weights.

Writes tests/reference/fixtures/hf_checkpoints/<family>/ for four families:

* llama (LlamaForCausalLM): grouped-query attention (4 heads, 2 kv heads of 16), RMSNorm eps
  1e-5, SwiGLU 192 wide, rope_theta 500000 with Llama 3.1's rope scaling (rope_type
  "llama3", factor 8, low 1, high 4, original_max_position_embeddings 64, so that with heads
  of 16 the three frequency bands (kept, blended, slowed) all turn within the 24 positions
  of `greedy`), untied output (Llama 3.1 8B's).
* qwen3 (Qwen3ForCausalLM): 4 heads, 2 kv heads, head_dim 24 beside hidden 64 (q is 96
  wide), per-head q/k RMSNorm, rope_theta 1e6, eps 1e-6, tied output (Qwen3-0.6B's).
* gpt2 (GPT2LMHeadModel): LayerNorm, activation_function "gelu_new" (GPT-2's tanh GELU, the
  family's default), learned positions (n_positions 64), biases, tied output; bos = eos =
  255 (the last id, as GPT-2's <|endoftext|> is 50256 of 50257).
* deepseek_v3 (DeepseekV3ForCausalLM): MLA (4 heads, q_lora_rank 24, kv_lora_rank 32, nope 16
  + rope 8, v 16, rope_interleave), rope_theta 10000 without scaling, first_k_dense_replace 1
  (layer 0 a dense SwiGLU 128 wide), layer 1 MoE: 8 routed experts of 32 in n_group 4,
  topk_group 2, num_experts_per_tok 2, sigmoid scores + e_score_correction_bias (noaux_tc),
  norm_topk_prob, routed_scaling_factor 2.5, one shared expert; num_mtp_layers 0; untied.

Every family: vocab 256 (mixprec's byte vocabulary, so a byte corpus trains on it), hidden 64,
2 layers, float32. Each folder holds what `model.save_pretrained(folder,
safe_serialization=True)` wrote (config.json, model.safetensors, generation_config.json;
transformers 5 writes `rope_parameters` with `rope_theta` inside it, no top-level
`rope_theta` / `rope_scaling`, and DeepSeek's experts per expert, as the hub files are),
copied byte for byte, plus expected.safetensors (written with safetensors.torch.save, whose
`__metadata__` keys come out in hash-map order, different on every run: the script rewrites
the header with them sorted, same length, the tensors' bytes untouched):

    input_ids  I64 [2, 16]          seeded random ids in [0, vocab)
    logits     F32 [2, 16, vocab]   model(input_ids).logits, eval mode, f32, eager attention
                                    (and DeepSeek's experts "eager": transformers' per-expert
                                    loop, not its default grouped_mm)
    greedy     I64 [1, 8 + 16]      model.generate(input_ids[:1, :8], max_new_tokens=16,
                                    do_sample=False) with eos_token_id unset (16 argmax steps,
                                    never stopped early; KV cache), the 8 prompt ids first;
                                    its ids 8.. are the argmax of the logits at 7..

    __metadata__ (strings): family, architecture, generator, torch / transformers /
    safetensors / numpy versions, seed, attn_implementation (and experts_implementation for
    deepseek_v3), weight_init, greedy (the call), and the smallest margins
    in the run: greedy_min_margin (top-1 minus top-2 logit over the 16 generated steps) and,
    for deepseek_v3, router_min_margin (over every token of both forwards: the gap between
    the last kept and the first dropped group score, and between the k-th and (k+1)-th
    allowed expert score, both with the bias), so a reader knows how far f32 rounding is from
    flipping a choice. The seeds in FAMILIES are chosen so that both are at least 1e-3 and
    the 16 greedy ids hold at least 8 distinct values (the script refuses to write a family
    otherwise: a small random model easily falls into repeating one id, and such a run hardly
    depends on the positions).

Weights: transformers' own init is replaced, so the values do not depend on the CPU (torch's
f32 normal_ takes a vectorized path whose bits depend on the CPU capability): every
parameter is drawn in float64 from one seeded generator per family, in name order, and
rounded to f32: matrices and embeddings N(0, 0.1) (std large enough that attention is far
from uniform, so RoPE and head-mapping mistakes move the logits), norm gains 1 + N(0, 0.1),
biases N(0, 0.02) (norm gains of exactly 1 and zero biases would hide a mix-up of them);
DeepSeek's e_score_correction_bias (a buffer) U(0, 0.1) (HF's init is zeros; real checkpoints'
are not). Tied output weights are the embedding's (one parameter).

What `logits` tells apart (max |difference| / max |logits|, transformers itself with one
setting changed): the same weights run in f64: 5e-7 to 8e-7 (f32 rounding); llama without
its rope scaling 0.32; qwen3 with rope_theta 1e4: 0.50; gpt2 with exact-erf "gelu" instead of
"gelu_new": 2.7e-4 (its greedy ids stay the same: only `logits` shows it); deepseek_v3 with
rope_interleave false: 0.59. So 1e-5 separates an implementation's rounding from a mistake.

Deterministic: one intra-op thread, torch.use_deterministic_algorithms(True), seeded inputs;
re-running gives byte-identical files (checked by running twice). The folders' files depend
only on the versions above; expected.safetensors' logits come from f32 CPU kernels and may
change in their last bits on another CPU (compare with tolerances; --check would then report
expected.safetensors as changed).
"""

import argparse
import json
import os
import struct
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures", "hf_checkpoints")

import numpy  # noqa: E402
import safetensors  # noqa: E402
import safetensors.torch  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import (  # noqa: E402
    DeepseekV3Config, DeepseekV3ForCausalLM, GPT2Config, GPT2LMHeadModel, LlamaConfig,
    LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM)

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)
transformers.logging.set_verbosity_error()
transformers.utils.logging.disable_progress_bar()

VOCAB = 256
BATCH, PROMPT, NEW_TOKENS = 2, 16, 16
GREEDY_PROMPT = 8  # greedy continues input_ids[:1, :8]
WEIGHT_STD, GAIN_STD, BIAS_STD = 0.1, 0.1, 0.02
ATTN = "eager"
# A greedy step or routing choice closer than this is refused (pick another seed): f32
# rounding in another implementation must not flip it.
MIN_MARGIN = 1e-3
# Fewer distinct ids among the 16 greedy ones is refused (pick another seed): a run stuck on
# one id (a small random model's fixed point) hardly depends on the positions.
MIN_DISTINCT = 8

# family -> (config class, model class, config keyword arguments, seed)
FAMILIES = {
    "llama": (LlamaConfig, LlamaForCausalLM, dict(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=192, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
        rms_norm_eps=1e-5, tie_word_embeddings=False,
        rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                         "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 64}), 101),
    "qwen3": (Qwen3Config, Qwen3ForCausalLM, dict(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=24, max_position_embeddings=128,
        rms_norm_eps=1e-6, tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}), 902),
    "gpt2": (GPT2Config, GPT2LMHeadModel, dict(
        vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=64,
        activation_function="gelu_new", layer_norm_epsilon=1e-5, tie_word_embeddings=True,
        bos_token_id=VOCAB - 1, eos_token_id=VOCAB - 1), 803),
    "deepseek_v3": (DeepseekV3Config, DeepseekV3ForCausalLM, dict(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
        n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2, n_group=4, topk_group=2,
        first_k_dense_replace=1, norm_topk_prob=True, routed_scaling_factor=2.5,
        q_lora_rank=24, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8,
        v_head_dim=16, max_position_embeddings=64, rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, rope_interleave=True,
        num_mtp_layers=0, tie_word_embeddings=False), 1104),
}


def versions():
    return {"generator": "tests/reference/make_hf_checkpoint_fixtures.py",
            "torch": torch.__version__, "transformers": transformers.__version__,
            "safetensors": safetensors.__version__, "numpy": numpy.__version__}


def is_gain(name):
    """LayerNorm / RMSNorm weights: the model's, each block's, Qwen 3's q/k and DeepSeek's
    latent norms."""
    leaf = name.rsplit(".", 1)
    return leaf[-1] == "weight" and ("norm" in leaf[0] or leaf[0].split(".")[-1].startswith("ln_"))


def draw_weights(model, seed):
    """Replaces every parameter (and DeepSeek's expert biases) with values drawn in f64 from
    one generator, in name order, rounded to f32."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters(), key=lambda e: e[0]):
            if is_gain(name):
                v = 1 + GAIN_STD * torch.randn(p.shape, generator=gen, dtype=torch.float64)
            elif p.dim() == 1:
                v = BIAS_STD * torch.randn(p.shape, generator=gen, dtype=torch.float64)
            else:
                v = WEIGHT_STD * torch.randn(p.shape, generator=gen, dtype=torch.float64)
            p.copy_(v.to(p.dtype))
        for name, b in sorted(model.named_buffers(), key=lambda e: e[0]):
            if name.endswith("e_score_correction_bias"):
                b.copy_((0.1 * torch.rand(b.shape, generator=gen, dtype=torch.float64)).to(b.dtype))


class RouterMargins:
    """The smallest gaps of DeepSeek-V3's routing decisions (group and expert choice) over
    every token the routers see, recomputed from their logits as DeepseekV3TopkRouter does."""

    def __init__(self, model):
        self.smallest = float("inf")
        self.handles = []
        for module in model.modules():
            if type(module).__name__ == "DeepseekV3TopkRouter":
                self.handles.append(module.register_forward_hook(self.hook))

    def hook(self, router, inputs, outputs):
        logits = outputs[0].double()
        scores = logits.sigmoid() + router.e_score_correction_bias.double()
        e, g = router.num_experts, router.num_group
        grouped = scores.view(-1, g, e // g)
        group_scores = grouped.topk(2, dim=-1)[0].sum(-1).sort(dim=-1, descending=True)[0]
        k = router.topk_group
        if k < g:
            self.note(group_scores[:, k - 1] - group_scores[:, k])
        kept = group_scores[:, k - 1:k]  # the last kept group's score
        group_of = grouped.topk(2, dim=-1)[0].sum(-1)
        allowed = (group_of >= kept).repeat_interleave(e // g, dim=1)
        choice = scores.masked_fill(~allowed, float("-inf")).sort(dim=-1, descending=True)[0]
        if router.top_k < allowed.sum(-1).min():
            self.note(choice[:, router.top_k - 1] - choice[:, router.top_k])

    def note(self, gaps):
        self.smallest = min(self.smallest, float(gaps.min()))

    def close(self):
        for h in self.handles:
            h.remove()


def build_family(family):
    """(files: name -> bytes, the folder's and expected.safetensors, the config, the
    expected file's metadata)."""
    config_class, model_class, kwargs, seed = FAMILIES[family]
    torch.manual_seed(seed)
    config = config_class(**kwargs)
    model = model_class(config).eval()
    model.set_attn_implementation(ATTN)
    experts = None
    if model._can_set_experts_implementation():  # DeepSeek-V3: the per-expert loop, not grouped_mm
        experts = ATTN
        model.set_experts_implementation(experts)
    draw_weights(model, seed)
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, family)
        model.save_pretrained(folder, safe_serialization=True)
        files = {}
        for name in sorted(os.listdir(folder)):
            with open(os.path.join(folder, name), "rb") as f:
                files[name] = f.read()

    gen = torch.Generator().manual_seed(seed + 1000)
    input_ids = torch.randint(0, VOCAB, (BATCH, PROMPT), generator=gen, dtype=torch.int64)
    margins = RouterMargins(model)
    with torch.no_grad():
        logits = model(input_ids).logits.float().contiguous()
        # No early stop: 16 argmax steps whatever the ids (the folder keeps the family's eos).
        model.generation_config.eos_token_id = None
        model.generation_config.pad_token_id = 0  # unused (one row); silences a warning
        out = model.generate(input_ids[:1, :GREEDY_PROMPT], max_new_tokens=NEW_TOKENS,
                             do_sample=False, output_scores=True,
                             return_dict_in_generate=True)
    margins.close()
    greedy = out.sequences.contiguous()
    assert greedy.shape == (1, GREEDY_PROMPT + NEW_TOKENS), greedy.shape
    assert torch.equal(greedy[:, :GREEDY_PROMPT], input_ids[:1, :GREEDY_PROMPT])
    top2 = torch.stack(out.scores).float().topk(2, dim=-1)[0]
    greedy_margin = float((top2[..., 0] - top2[..., 1]).min())

    for what, m in (("greedy", greedy_margin), ("router", margins.smallest)):
        if m < MIN_MARGIN:
            sys.exit(f"{family}: a {what} choice is {m:.3g} from a tie (< {MIN_MARGIN}); "
                     "choose another seed in FAMILIES")
    distinct = len(set(greedy[0, GREEDY_PROMPT:].tolist()))
    if distinct < MIN_DISTINCT:
        sys.exit(f"{family}: greedy repeats itself ({distinct} distinct ids of {NEW_TOKENS}); "
                 "choose another seed in FAMILIES")
    # The first generated token is the argmax of model(input_ids[:1, :8])'s last position,
    # which causal attention makes `logits`' position 7 too.
    assert int(greedy[0, GREEDY_PROMPT]) == int(logits[0, GREEDY_PROMPT - 1].argmax())
    meta = versions()
    meta.update({"family": family, "architecture": model_class.__name__,
                 "attn_implementation": ATTN, "seed": str(seed),
                 "weight_init": f"f64 N(0, {WEIGHT_STD}) matrices, 1 + N(0, {GAIN_STD}) norm "
                                f"gains, N(0, {BIAS_STD}) biases, rounded to f32",
                 "greedy": f"generate(input_ids[:1, :{GREEDY_PROMPT}], "
                           f"max_new_tokens={NEW_TOKENS}, "
                           "do_sample=False), eos_token_id unset",
                 "greedy_min_margin": f"{greedy_margin:.6g}"})
    if margins.handles:
        meta["router_min_margin"] = f"{margins.smallest:.6g}"
    if experts:
        meta["experts_implementation"] = experts
    expected = {"input_ids": input_ids, "logits": logits, "greedy": greedy}
    files["expected.safetensors"] = sorted_metadata(safetensors.torch.save(expected, metadata=meta))
    return files, config, meta


def sorted_metadata(blob):
    """safetensors.torch.save's file with its `__metadata__` keys in sorted order: the package
    keeps them in a hash map, whose order differs from run to run. Same header length (the
    keys move, nothing else), the tensors' bytes untouched."""
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    header["__metadata__"] = dict(sorted(header["__metadata__"].items()))
    text = json.dumps(header, separators=(",", ":")).encode("ascii")
    assert len(text) <= n, (len(text), n)
    out = blob[:8] + text + b" " * (n - len(text)) + blob[8 + n:]
    loaded = safetensors.torch.load(out)
    assert all(torch.equal(loaded[k], v) for k, v in safetensors.torch.load(blob).items())
    return out

# Each model as a mixprec config, written beside it (mixprec.toml): what
# tests/reference/hf_checkpoint_fixture_test.cpp imports the folder into, and what
# `mixprec train FOLDER/mixprec.toml --init-from FOLDER` runs.
TRAINING_TOML = """\
[training]
steps = 1
batch_size = 2
seq_len = 32
precision = "fp32"
eval_every = 0
"""
MIXPREC_TOML = {
    "llama": """\
# The model transformers wrote in this folder, as a mixprec config (make_hf_checkpoint_fixtures.py
# builds it from the same sizes): mixprec train THIS --init-from THIS_FOLDER imports it.
[model]
kind = "llama3"
vocab_size = 256
d_model = 64
n_layers = 2
n_heads = 4
n_kv_heads = 2
d_ff = 192
max_seq_len = 128
norm = "rmsnorm"
norm_eps = 1e-5
mlp = "swiglu"
positions = "rope"
rope_theta = 500000.0
tie_embeddings = false
bias = false

[model.rope_scaling]
type = "llama3"
factor = 8.0
low_freq_factor = 1.0
high_freq_factor = 4.0
original_max_position_embeddings = 64

""" + TRAINING_TOML,
    "qwen3": """\
# The model transformers wrote in this folder, as a mixprec config (make_hf_checkpoint_fixtures.py
# builds it from the same sizes): mixprec train THIS --init-from THIS_FOLDER imports it.
[model]
kind = "qwen3"
vocab_size = 256
d_model = 64
n_layers = 2
n_heads = 4
n_kv_heads = 2
head_dim = 24
d_ff = 128
max_seq_len = 128
norm = "rmsnorm"
norm_eps = 1e-6
mlp = "swiglu"
positions = "rope"
rope_theta = 1000000.0
tie_embeddings = true
bias = false
qk_norm = true

""" + TRAINING_TOML,
    "gpt2": """\
# The model transformers wrote in this folder, as a mixprec config (make_hf_checkpoint_fixtures.py
# builds it from the same sizes): mixprec train THIS --init-from THIS_FOLDER imports it.
[model]
kind = "gpt"
vocab_size = 256
d_model = 64
n_layers = 2
n_heads = 4
d_ff = 256
max_seq_len = 64
norm = "layernorm"
norm_eps = 1e-5
mlp = "gelu_tanh"
positions = "learned"
tie_embeddings = true
bias = true

""" + TRAINING_TOML,
    "deepseek_v3": """\
# The model transformers wrote in this folder, as a mixprec config (make_hf_checkpoint_fixtures.py
# builds it from the same sizes): mixprec train THIS --init-from THIS_FOLDER imports it.
[model]
kind = "deepseek_v3"
vocab_size = 256
d_model = 64
n_layers = 2
n_heads = 4
d_ff = 32
max_seq_len = 64
norm = "rmsnorm"
norm_eps = 1e-6
mlp = "swiglu"
positions = "rope"
rope_theta = 10000.0
tie_embeddings = false
bias = false

[model.mla]
q_lora_rank = 24
kv_lora_rank = 32
qk_nope_head_dim = 16
qk_rope_head_dim = 8
v_head_dim = 16

[model.moe]
n_experts = 8
top_k = 2
n_shared_experts = 1
score_func = "sigmoid"
route_norm = true
route_scale = 2.5
n_expert_groups = 4
n_limited_groups = 2
n_dense_layers = 1
dense_d_ff = 128
capacity_factor = 0.0
load_balance_coeff = 1e-3
aux_loss_weight = 0.0
z_loss_weight = 0.0

""" + TRAINING_TOML,
}


def write(path, blob, check):
    """Writes blob to path unless check; returns whether the file changes."""
    old = open(path, "rb").read() if os.path.exists(path) else None
    if old != blob and not check:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(blob)
    return old != blob


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 on a change")
    ap.add_argument("--only", nargs="+", choices=sorted(FAMILIES), help="these families only")
    ap.add_argument("--print-configs", action="store_true",
                    help="also print each family's config.json")
    args = ap.parse_args()
    changed, rows, total = [], [], 0
    for family in args.only or FAMILIES:
        files, config, meta = build_family(family)
        files["mixprec.toml"] = MIXPREC_TOML[family].encode()
        folder = os.path.join(OUT, family)
        for name, blob in files.items():
            rel = os.path.join(family, name)
            differs = write(os.path.join(folder, name), blob, args.check)
            if differs:
                changed.append(rel)
            rows.append((rel, len(blob), differs))
            total += len(blob)
        if os.path.isdir(folder):  # a file this run does not write
            for name in sorted(set(os.listdir(folder)) - set(files)):
                changed.append(os.path.join(family, name) + " (not written by this script)")
                if not args.check:
                    os.remove(os.path.join(folder, name))
        margin = f"greedy margin {meta['greedy_min_margin']}"
        if "router_min_margin" in meta:
            margin += f", router margin {meta['router_min_margin']}"
        print(f"{family}: {meta['architecture']}, {margin}")
        if args.print_configs:
            print(files["config.json"].decode())
    width = max(len(r[0]) for r in rows)
    print(f"\n{'file':<{width}}  {'bytes':>8}")
    for rel, size, differs in rows:
        print(f"{rel:<{width}}  {size:>8}{'  (changed)' if differs else ''}")
    print(f"{'total':<{width}}  {total:>8}")
    if args.check and changed:
        sys.exit("would change: " + ", ".join(changed))


if __name__ == "__main__":
    main()
