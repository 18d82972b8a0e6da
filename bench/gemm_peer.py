"""The peers of bench_gemm --peer: one product timed in PyTorch 2.x (torch.mm in f32, which
calls MKL's sgemm on x86, and in bf16, oneDNN's kernel with f32 accumulation and a bf16
output, the contract of mixprec's bf16 GEMM) and in BLIS's sgemm (Debian's libblis, whose
run-time dispatch picks the kernels written for this CPU) when scripts/peer_venv.sh has
unpacked it. Benchmark tooling only: nothing in mixprec imports it.

Prints one JSON line: seconds per repetition for each peer, or why a peer has none.
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
# A peer whose first call runs slower than this is reported from that call alone (PyTorch's
# bf16 on a CPU without a bf16 instruction: about 0.7 GFLOP/s on a Zen 3, 15 s a product).
_SLOW_SECONDS = 1.0

_CBLAS_ROW_MAJOR, _CBLAS_NO_TRANS, _CBLAS_TRANS = 101, 111, 112


def _times(call, reps):
    call()  # warm-up: pages, packing buffers, thread pool
    out = []
    for _ in range(reps):
        start = time.perf_counter()
        call()
        out.append(time.perf_counter() - start)
    return out


def _timed_or_slow(call, reps):
    # The previous peer's threads may still spin after its last call (OpenMP's wait policy).
    time.sleep(0.25)
    start = time.perf_counter()
    call()
    first = time.perf_counter() - start
    if first > _SLOW_SECONDS:
        return {"slow": first}
    return _times(call, reps)


def _blis(threads):
    for pattern in _BLIS_GLOBS:
        for path in sorted(glob.glob(pattern)):
            lib = ctypes.CDLL(path)
            lib.bli_thread_set_num_threads(ctypes.c_long(threads))
            lib.bli_arch_query_id.restype = ctypes.c_int
            lib.bli_arch_string.restype = ctypes.c_char_p
            arch = lib.bli_arch_string(lib.bli_arch_query_id()).decode()
            return lib, arch
    return None, None


def main():
    p = argparse.ArgumentParser(description=__doc__)
    for name in ("m", "n", "k", "reps", "threads"):
        p.add_argument("--" + name, type=int, required=True)
    p.add_argument("--ta", type=int, default=0, help="1: op(A) is A transposed")
    p.add_argument("--tb", type=int, default=0, help="1: op(B) is B transposed")
    args = p.parse_args()
    m, n, k = args.m, args.n, args.k
    result = {}
    try:
        import torch
    except ImportError as e:
        print(f"no PyTorch for {sys.executable}: {e}", file=sys.stderr)
        sys.exit(2)
    torch.set_num_threads(args.threads)
    torch.manual_seed(7)
    result["torch"] = torch.__version__
    # A is stored [K, M] when transposed, B [N, K]: the same layouts bench_gemm hands OpenBLAS.
    a = torch.rand((k, m) if args.ta else (m, k)) * 2 - 1
    b = torch.rand((n, k) if args.tb else (k, n)) * 2 - 1
    op_a = a.t() if args.ta else a
    op_b = b.t() if args.tb else b
    c = torch.empty(m, n)
    result["torch_f32"] = _timed_or_slow(lambda: torch.mm(op_a, op_b, out=c), args.reps)
    a16, b16 = a.bfloat16(), b.bfloat16()
    op_a16 = a16.t() if args.ta else a16
    op_b16 = b16.t() if args.tb else b16
    c16 = torch.empty(m, n, dtype=torch.bfloat16)
    result["torch_bf16"] = _timed_or_slow(lambda: torch.mm(op_a16, op_b16, out=c16), args.reps)

    lib, arch = _blis(args.threads)
    if lib is None:
        result["blis"] = "absent (scripts/peer_venv.sh unpacks Debian's libblis4-pthread)"
    else:
        result["blis_arch"] = arch
        ptr = ctypes.POINTER(ctypes.c_float)
        pa = ctypes.cast(a.data_ptr(), ptr)
        pb = ctypes.cast(b.data_ptr(), ptr)
        pc = ctypes.cast(c.data_ptr(), ptr)
        lib.cblas_sgemm.restype = None
        lib.cblas_sgemm.argtypes = [ctypes.c_int] * 3 + [ctypes.c_int] * 3 + [
            ctypes.c_float, ptr, ctypes.c_int, ptr, ctypes.c_int, ctypes.c_float, ptr,
            ctypes.c_int]

        def sgemm():
            lib.cblas_sgemm(_CBLAS_ROW_MAJOR, _CBLAS_TRANS if args.ta else _CBLAS_NO_TRANS,
                            _CBLAS_TRANS if args.tb else _CBLAS_NO_TRANS, m, n, k, 1.0, pa,
                            m if args.ta else k, pb, k if args.tb else n, 0.0, pc, n)

        result["blis_f32"] = _timed_or_slow(sgemm, args.reps)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
