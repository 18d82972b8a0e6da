#!/usr/bin/env bash
# Set-up, optimised build, and every test (unit, exhaustive, CLI) through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh build
ctest --test-dir build --output-on-failure --parallel "$(nproc)"
