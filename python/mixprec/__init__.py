"""mixprec from Python: number formats and casts over NumPy arrays, tensors (NumPy and
DLPack), safetensors files, precision policies, and the trainer.

    >>> import numpy as np, mixprec
    >>> mixprec.cast(np.float32([1.0, 3.14159]), "bf16")          # encodings, uint16
    array([16256, 16457], dtype=uint16)
    >>> mixprec.decode(_, "bf16")
    array([1.   , 3.140625], dtype=float32)

Errors from bad input are mixprec.Error (a ValueError) with the message `mixprec` prints.
"""

import numpy as _np

from ._mixprec import (  # noqa: F401
    Error,
    Policy,
    Tensor,
    cast,
    config_toml,
    decode,
    empty_meta,
    from_dlpack,
    full,
    isa,
    ones,
    parse_policy,
    preset_names,
    train,
    zeros,
)
from . import _mixprec

if _mixprec._pybind11_version < (2, 12) and int(_np.__version__.split(".")[0]) >= 2:
    raise ImportError(
        f"mixprec was built with pybind11 {'.'.join(map(str, _mixprec._pybind11_version))}, "
        f"which cannot read NumPy {_np.__version__}'s arrays: use NumPy 1.x (Debian's "
        "python3-numpy) or rebuild with pybind11 >= 2.12 (pip install . does)")

try:  # ml_dtypes' NumPy types for bf16 and the float8s, where installed and working
    import ml_dtypes as _ml_dtypes
except Exception:  # noqa: BLE001 - absent, or built for another NumPy (AttributeError)
    _ml_dtypes = None

__version__ = "0.1.0"
__all__ = [
    "Error", "Policy", "Tensor", "cast", "config_toml", "decode", "dtypes", "empty_meta",
    "from_dlpack", "full", "isa", "load_safetensors", "ml_dtype", "ones", "parse_policy",
    "preset_names", "save_safetensors", "train", "zeros",
]

# mixprec format -> ml_dtypes type name.
_ML_DTYPES_NAMES = {
    "bf16": "bfloat16",
    "f16": "float16",
    "f8_e4m3fn": "float8_e4m3fn",
    "f8_e5m2": "float8_e5m2",
    "f4_e2m1fn": "float4_e2m1fn",
    "f8_e8m0fnu": "float8_e8m0fnu",
}
# NumPy dtype name (ml_dtypes' included) -> mixprec dtype.
_FROM_NUMPY = {
    "float64": "f64",
    "float32": "f32",
    "float16": "f16",
    "int64": "i64",
    "int32": "i32",
    "uint8": "u8",
    "bool": "bool",
    "bfloat16": "bf16",
    "float8_e4m3fn": "f8_e4m3fn",
    "float8_e5m2": "f8_e5m2",
    "float4_e2m1fn": "f4_e2m1fn",
}
_NARROW_FLOATS = {"bf16", "f16", "f8_e4m3fn", "f8_e5m2", "f4_e2m1fn"}


def dtypes():
    """Every format (tensor dtypes, tf32, the E8M0 scale) with its properties, as dicts."""
    rows = _mixprec.dtypes()
    for row in rows:
        row["ml_dtypes"] = _ML_DTYPES_NAMES.get(row["name"])
    return rows


def _canonical(name):
    for row in _mixprec.dtypes():
        if name.lower() == row["name"] or name.lower() in row["aliases"]:
            return row["name"]
    # Not a known spelling: let the C++ side raise mixprec.Error with the CLI's message.
    return _mixprec.zeros([0], name).dtype


def ml_dtype(name):
    """ml_dtypes' NumPy type for a mixprec format ("bf16" -> ml_dtypes.bfloat16), or None when
    ml_dtypes is not installed (f16 is NumPy's own float16)."""
    canonical = _canonical(name)
    if canonical == "f16":
        return _np.dtype(_np.float16)
    if _ml_dtypes is None or canonical not in _ML_DTYPES_NAMES:
        return None
    return _np.dtype(getattr(_ml_dtypes, _ML_DTYPES_NAMES[canonical]))


def _from_numpy(array, dtype=None, **convert):
    """A new tensor with a copy of `array`'s elements.

    NumPy's float64/float32/float16/int64/int32/uint8/bool and ml_dtypes' bfloat16/float8s
    map to their dtypes. With `dtype`, an unsigned or signed integer array of the dtype's
    width holds bit patterns (uint16 for bf16, uint8 for fp8); any other array is converted
    (rounded once, with Tensor.to's keyword arguments)."""
    a = _np.ascontiguousarray(array)
    natural = _FROM_NUMPY.get(a.dtype.name)
    if dtype is None:
        if natural is None:
            raise Error(
                f"[Tensor.from_numpy] NumPy dtype {a.dtype} has no mixprec dtype (float64, "
                "float32, float16, int64, int32, uint8, bool and ml_dtypes' bfloat16, "
                "float8_e4m3fn, float8_e5m2 have); pass dtype= for bit patterns")
        target = natural
    else:
        target = _canonical(dtype)
    if natural == target:
        return Tensor._from_bytes(a.reshape(-1).view(_np.uint8), list(a.shape), target)
    row = next(r for r in _mixprec.dtypes() if r["name"] == target)
    if target in _NARROW_FLOATS and a.dtype.kind in "ui" and a.dtype.itemsize == row["itemsize"]:
        return Tensor._from_bytes(a.reshape(-1).view(_np.uint8), list(a.shape), target)
    if natural is None:
        raise Error(
            f"[Tensor.from_numpy] a {a.dtype} array is neither {target} values nor "
            f"{target} bit patterns ({row['numpy']})")
    source = Tensor._from_bytes(a.reshape(-1).view(_np.uint8), list(a.shape), natural)
    return source.to(target, **convert)


def _numpy(self, bits=False):
    """The elements as a NumPy array sharing this tensor's memory (a copy for a strided view).

    bf16, fp8 and fp4 come as ml_dtypes' types when ml_dtypes is importable, else (and with
    bits=True) as their bit patterns: uint16 for bf16 and f16 (f16 as float16 unless bits),
    uint8 for fp8 and fp4."""
    raw = self._bits()
    if bits:
        return raw
    if self.dtype == "f16":
        return raw.view(_np.float16)
    if self.dtype in _ML_DTYPES_NAMES and _ml_dtypes is not None:
        return raw.view(getattr(_ml_dtypes, _ML_DTYPES_NAMES[self.dtype]))
    return raw


def _array(self, dtype=None, copy=None):
    a = self.numpy()
    return a if dtype is None else a.astype(dtype)


Tensor.from_numpy = staticmethod(_from_numpy)
Tensor.numpy = _numpy
Tensor.__array__ = _array


def _as_tensor(value):
    if isinstance(value, Tensor):
        return value
    if hasattr(value, "__dlpack__") and not isinstance(value, _np.ndarray):
        return from_dlpack(value)  # torch.Tensor and the like
    return _from_numpy(value)


def load_safetensors(path, metadata=False):
    """{name: Tensor} of a safetensors file; with metadata=True, (tensors, metadata)."""
    return _mixprec._load_safetensors(str(path), metadata)


def save_safetensors(path, tensors, metadata=None):
    """Writes {name: Tensor | NumPy array | DLPack producer} atomically (in the dict's order)."""
    converted = {str(k): _as_tensor(v) for k, v in tensors.items()}
    _mixprec._save_safetensors(str(path), converted, dict(metadata or {}))
