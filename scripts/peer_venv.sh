#!/usr/bin/env bash
# The peers the benchmarks compare against, in a virtual environment of their own
# (.venv-peers, git-ignored): PyTorch 2.x for bench_train_step --peer (bench/torch_peer.py:
# eager and torch.compile). Benchmark tools only: nothing in mixprec imports them.
#   scripts/peer_venv.sh            # then: build/bench/bench_train_step --peer
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv-peers
.venv-peers/bin/pip install --quiet --upgrade pip
# torch.compile (Inductor) compiles C++ with the system g++ at run time.
.venv-peers/bin/pip install --quiet "torch>=2.4" numpy
.venv-peers/bin/python -c "import torch; print('PyTorch', torch.__version__, 'in .venv-peers')"
