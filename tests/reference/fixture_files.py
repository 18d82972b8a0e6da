"""What the fixture scripts share: safetensors bytes from raw tensors, and writing a fixture
file or, under --check, only reporting that it would change."""

import json
import os
import struct


def safetensors_bytes(entries, metadata):
    """entries: name -> (safetensors dtype, shape, little-endian bytes); names sorted, header
    padded to 8 bytes, so the same tensors always give the same file."""
    header, blobs, offset = {"__metadata__": dict(sorted(metadata.items()))}, [], 0
    for name in sorted(entries):
        dtype, shape, data = entries[name]
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("ascii")
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def write_fixture(path, blob, check):
    """Writes blob to path unless check; prints its size; returns whether the file changes."""
    old = open(path, "rb").read() if os.path.exists(path) else None
    name = os.path.splitext(os.path.basename(path))[0]
    print(f"{name}: {len(blob)} bytes{'' if old == blob else ' (changed)'}")
    if old != blob and not check:
        with open(path, "wb") as f:
            f.write(blob)
    return old != blob
