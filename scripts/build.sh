#!/usr/bin/env bash
# Configures and builds mixprec: scripts/build.sh [BUILD_DIR] [extra cmake arguments...]
# Default: an optimised (Release) build in ./build.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}
shift || true
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$build_dir" --parallel "$(nproc)"
