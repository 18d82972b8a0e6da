#!/usr/bin/env bash
# Set-up, optimised build, and the main job. Until the trainer lands, the main job prints the
# number-formats table and casts a few values that show where each format rounds or overflows.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh build
build/mixprec dtype info
echo
build/mixprec dtype cast 0.1 65520 1e-8 464 --to bf16,f16,e4m3,e5m2,tf32
