"""The peers of bench_gemm --peer: one product timed in PyTorch (torch.mm in f32, which calls
MKL's sgemm on x86, and in bf16, oneDNN's kernel with f32 accumulation and a bf16 output, the
contract of mixprec's bf16 GEMM) and in BLIS's sgemm (Debian's libblis, whose run-time
dispatch picks the kernels written for this CPU) when scripts/peer_venv.sh has unpacked it.
Benchmark tooling only: nothing in mixprec imports it.

Prints one JSON line. Per peer: seconds per repetition; or {"probe": GFLOP/s} when a 512^3
product with the same transposes ran below --floor (PyTorch's bf16 on a CPU without a bf16
instruction: 0.6-1.4 GFLOP/s on a Zen 3, 15 s for one of GPT-2-small's products, minutes for
its output layer), so the shape itself was not run; or, for BLIS, a string saying why not.
"""

import argparse
import ctypes
import glob
import json
import os
import sys
import time

# scripts/peer_venv.sh unpacks Debian's libblis4-pthread here (no system install); a system-wide
# libblis is used when that is absent. Its pthread build, not the OpenMP one: PyTorch brings an
# OpenMP runtime of its own, and two in one process would contend for the cores.
_HERE = os.path.dirname(os.path.abspath(__file__))
_BLIS_GLOBS = [
    os.path.join(_HERE, "..", ".venv-peers", "blis", "usr", "lib", "*", "blis-pthread",
                 "libblis.so.4"),
    "/usr/lib/*/blis-pthread/libblis.so.4",
    "/usr/lib/*/blis-openmp/libblis.so.4",
]
_PROBE = 512

_CBLAS_ROW_MAJOR, _CBLAS_NO_TRANS, _CBLAS_TRANS = 101, 111, 112


def _seconds(call, reps):
    # The previous peer's threads may still spin after its last call (OpenMP's wait policy).
    time.sleep(0.25)
    call()  # warm-up: pages, packing buffers, thread pool
    out = []
    for _ in range(reps):
        start = time.perf_counter()
        call()
        out.append(time.perf_counter() - start)
    return out


class Product:
    """op(A) [m, k] times op(B) [k, n] in one peer; A is stored [k, m] when ta, B [n, k] when tb
    (the layouts bench_gemm hands OpenBLAS), operands uniform in [-1, 1)."""

    def __init__(self, torch, m, n, k, ta, tb):
        self.m, self.n, self.k, self.ta, self.tb = m, n, k, ta, tb
        self.a = torch.rand((k, m) if ta else (m, k)) * 2 - 1
        self.b = torch.rand((n, k) if tb else (k, n)) * 2 - 1
        self.c = torch.empty(m, n)

    def flops(self):
        return 2.0 * self.m * self.n * self.k

    def torch_call(self, torch, dtype):
        a, b = self.a.to(dtype), self.b.to(dtype)
        op_a, op_b = (a.t() if self.ta else a), (b.t() if self.tb else b)
        c = torch.empty(self.m, self.n, dtype=dtype)
        return lambda: torch.mm(op_a, op_b, out=c)

    def blis_call(self, lib):
        ptr = ctypes.POINTER(ctypes.c_float)
        pa, pb, pc = (ctypes.cast(t.data_ptr(), ptr) for t in (self.a, self.b, self.c))
        ta = _CBLAS_TRANS if self.ta else _CBLAS_NO_TRANS
        tb = _CBLAS_TRANS if self.tb else _CBLAS_NO_TRANS
        lda = self.m if self.ta else self.k
        ldb = self.k if self.tb else self.n
        return lambda: lib.cblas_sgemm(_CBLAS_ROW_MAJOR, ta, tb, self.m, self.n, self.k, 1.0, pa,
                                       lda, pb, ldb, 0.0, pc, self.n)


def _probe_gflops(make_call, product):
    """GFLOP/s of one warm call on the 512^3 product with the shape's transposes."""
    call = make_call(product)
    call()
    start = time.perf_counter()
    call()
    return product.flops() / (time.perf_counter() - start) * 1e-9


def _timed(make_call, shape, probe, reps, floor):
    rate = _probe_gflops(make_call, probe)
    if rate < floor:
        return {"probe": rate}
    return _seconds(make_call(shape), reps)


def _blis(threads):
    """(library, arch name) of the first libblis that loads, or (None, why not)."""
    why = "absent (scripts/peer_venv.sh unpacks Debian's libblis4-pthread)"
    for pattern in _BLIS_GLOBS:
        for path in sorted(glob.glob(pattern)):
            try:
                # Its own symbols first: PyTorch's libraries are already loaded, some globally.
                lib = ctypes.CDLL(path, mode=os.RTLD_LOCAL | os.RTLD_DEEPBIND)
                lib.bli_thread_set_num_threads(ctypes.c_long(threads))
                lib.bli_arch_query_id.restype = ctypes.c_int
                lib.bli_arch_string.restype = ctypes.c_char_p
                arch = lib.bli_arch_string(lib.bli_arch_query_id()).decode()
                ptr = ctypes.POINTER(ctypes.c_float)
                lib.cblas_sgemm.restype = None
                lib.cblas_sgemm.argtypes = [ctypes.c_int] * 6 + [
                    ctypes.c_float, ptr, ctypes.c_int, ptr, ctypes.c_int, ctypes.c_float, ptr,
                    ctypes.c_int]
                return lib, arch
            except (OSError, AttributeError) as e:
                why = f"{path} did not load: {e}"
    return None, why


def main():
    p = argparse.ArgumentParser(description=__doc__)
    for name in ("m", "n", "k", "reps", "threads"):
        p.add_argument("--" + name, type=int, required=True)
    p.add_argument("--ta", type=int, default=0, help="1: op(A) is A transposed")
    p.add_argument("--tb", type=int, default=0, help="1: op(B) is B transposed")
    p.add_argument("--floor", type=float, default=10.0,
                   help="GFLOP/s on the 512^3 probe below which the shape is not run")
    args = p.parse_args()
    try:
        import torch
    except ImportError as e:
        print(f"no PyTorch for {sys.executable}: {e}", file=sys.stderr)
        sys.exit(2)
    torch.set_num_threads(args.threads)
    torch.manual_seed(7)
    shape = Product(torch, args.m, args.n, args.k, args.ta, args.tb)
    probe = Product(torch, _PROBE, _PROBE, _PROBE, args.ta, args.tb)
    result = {"torch": torch.__version__}
    for key, dtype in (("torch_f32", torch.float32), ("torch_bf16", torch.bfloat16)):
        result[key] = _timed(lambda prod, d=dtype: prod.torch_call(torch, d), shape, probe,
                             args.reps, args.floor)
    lib, arch = _blis(args.threads)
    if lib is None:
        result["blis"] = arch
    else:
        result["blis_arch"] = arch
        result["blis_f32"] = _timed(lambda prod: prod.blis_call(lib), shape, probe, args.reps,
                                    args.floor)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
