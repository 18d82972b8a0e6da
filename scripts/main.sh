#!/usr/bin/env bash
# Set-up, optimised build, and the main job: train the default model (configs/moe_small.toml,
# a small mixture-of-experts transformer) on the default corpus (Debian's fortunes) in
# bf16-mixed precision for a few minutes, then print a sample of generated text.
# Extra arguments go to `mixprec train` (e.g. --steps 100, --precision fp32).
# Run again, it resumes from the newest checkpoint in outputs/moe_small (a finished run only
# prints a new sample).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh build
# libgomp spins 300,000 times before an idle thread sleeps; on a machine shared with other
# jobs a descheduled thread then stalls every parallel region (measured: 3x slower steps).
# A short spin costs nothing measurable on an idle machine.
export GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-20000}
build/mixprec train configs/moe_small.toml --resume "$@"
echo
echo "== sample (mixprec sample outputs/moe_small --prompt 'The ')"
build/mixprec sample outputs/moe_small --prompt "The " --tokens 400 --temperature 0.8 --top-k 40
