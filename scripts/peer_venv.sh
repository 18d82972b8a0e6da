#!/usr/bin/env bash
# The peers the benchmarks compare against, in a virtual environment of their own
# (.venv-peers, git-ignored): PyTorch 2.x for bench_train_step --peer (bench/torch_peer.py:
# eager and torch.compile) and bench_gemm --peer (bench/gemm_peer.py: torch.mm, and BLIS's
# sgemm from Debian's libblis4-pthread, unpacked into .venv-peers/blis rather than installed,
# so that the system's BLAS alternatives stay as they are). Benchmark tools only: nothing in
# mixprec imports them.
#   scripts/peer_venv.sh            # then: build/bench/bench_train_step --peer, bench_gemm --peer
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv-peers
.venv-peers/bin/pip install --quiet --upgrade pip
# torch.compile (Inductor) compiles C++ with the system g++ at run time.
.venv-peers/bin/pip install --quiet "torch>=2.4" numpy
.venv-peers/bin/python -c "import torch; print('PyTorch', torch.__version__, 'in .venv-peers')"
# BLIS (its kernels chosen for the CPU at run time): the reference for bench_gemm's products.
# Optional: without it bench_gemm --peer shows BLIS as absent.
rm -rf .venv-peers/blis && mkdir -p .venv-peers/blis
# apt's messages are shown only if this fails (as root it warns that it cannot sandbox).
if log=$(cd .venv-peers/blis && apt-get download libblis4-pthread 2>&1 &&
  dpkg -x libblis4-pthread_*.deb . && rm libblis4-pthread_*.deb) &&
  ls .venv-peers/blis/usr/lib/*/blis-pthread/libblis.so.4 >/dev/null 2>&1; then
  echo "BLIS $(ls .venv-peers/blis/usr/lib/*/blis-pthread/libblis.so.4) in .venv-peers/blis"
else
  echo "$log" >&2
  echo "BLIS not unpacked (no Debian libblis4-pthread here; apt-get update first?):" \
    "bench_gemm --peer will show it as absent" >&2
fi
