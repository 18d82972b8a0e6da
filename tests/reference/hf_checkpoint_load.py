#!/usr/bin/env python3
"""Loads a folder mixprec exported with transformers' from_pretrained and compares its logits
with a fixture's (tests/reference/hf_checkpoint_fixture_test.cpp runs it when the Python it
finds has transformers; MIXPREC_TRANSFORMERS_PYTHON names one).

    hf_checkpoint_load.py EXPORTED_FOLDER EXPECTED_SAFETENSORS

Prints one JSON line: {"max_abs_diff": ..., "max_abs_logit": ..., "greedy_equal": ...}.
"""
import json
import sys

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

torch.set_num_threads(1)
folder, expected_path = sys.argv[1], sys.argv[2]
expected = load_file(expected_path)
kwargs = {"attn_implementation": "eager", "torch_dtype": torch.float32}
try:
    model = AutoModelForCausalLM.from_pretrained(folder, experts_implementation="eager", **kwargs)
except TypeError:
    model = AutoModelForCausalLM.from_pretrained(folder, **kwargs)
model.eval()
with torch.no_grad():
    logits = model(expected["input_ids"]).logits
    greedy = expected["greedy"]
    prompt = greedy[:, :8]
    out = model.generate(prompt, max_new_tokens=greedy.shape[1] - 8, do_sample=False,
                         eos_token_id=None, pad_token_id=0)
print(json.dumps({
    "max_abs_diff": float((logits - expected["logits"]).abs().max()),
    "max_abs_logit": float(expected["logits"].abs().max()),
    "greedy_equal": bool(torch.equal(out, greedy)),
}))
