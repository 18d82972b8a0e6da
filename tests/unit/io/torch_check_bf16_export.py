"""Independent check of a bf16 weights export, with PyTorch and no mixprec code.

usage: /usr/bin/python3 torch_check_bf16_export.py EXPORT.safetensors F32_REFERENCE.safetensors

Both files are parsed here by hand (8-byte little-endian header length, JSON header,
torch.frombuffer; PyTorch 1.13 has no safetensors package). Every tensor of the export must be
BF16, and bit-equal to PyTorch's own rounding (f32 .to(torch.bfloat16), nearest even) of the
same-named F32 tensor of the reference. Prints "OK <count>" and exits 0, else exits 1.
"""
import json
import struct
import sys

import torch

DTYPES = {"BF16": torch.bfloat16, "F32": torch.float32}


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    data = blob[8 + n:]
    tensors = {}
    for name, e in header.items():
        begin, end = e["data_offsets"]
        dtype = DTYPES[e["dtype"]]
        if end == begin:
            t = torch.empty(0, dtype=dtype)
        else:
            t = torch.frombuffer(bytearray(data[begin:end]), dtype=dtype)
        tensors[name] = (e["dtype"], t.reshape(e["shape"]))
    return tensors, meta


def main():
    exported, meta = read_safetensors(sys.argv[1])
    reference, _ = read_safetensors(sys.argv[2])
    errors = []
    if meta.get("format") != "pt":
        errors.append("metadata format is %r, not 'pt'" % meta.get("format"))
    if set(exported) != set(reference):
        errors.append("names differ: %s vs %s" % (sorted(exported), sorted(reference)))
    for name in sorted(set(exported) & set(reference)):
        dtype_name, t = exported[name]
        _, ref = reference[name]
        if dtype_name != "BF16" or t.dtype != torch.bfloat16:
            errors.append("%s: dtype %s" % (name, dtype_name))
            continue
        if t.shape != ref.shape:
            errors.append("%s: shape %s, expected %s" % (name, list(t.shape), list(ref.shape)))
            continue
        expected = ref.to(torch.bfloat16)
        if not torch.equal(t.view(torch.int16), expected.view(torch.int16)):
            bad = (t.view(torch.int16) != expected.view(torch.int16)).nonzero()[0].tolist()
            errors.append("%s: element %s is %r, PyTorch rounds to %r"
                          % (name, bad, t[tuple(bad)].item(), expected[tuple(bad)].item()))
    for e in errors:
        print(e)
    if errors:
        sys.exit(1)
    print("OK %d" % len(exported))


if __name__ == "__main__":
    main()
