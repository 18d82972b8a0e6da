#!/usr/bin/env bash
# The precision story, measured: trains the default model (configs/moe_small.toml) five times
# with the same seed, steps and data, one precision recipe each, then prints a table (final
# validation loss, tokens/s, peak tensor memory, skipped steps, f16 underflow fraction) and
# draws their curves into one plot.
#
#   scripts/precision_story.sh [STEPS] [extra `mixprec train` arguments...]
#
# Recipes: fp32; bf16-mixed (bf16 compute, f32 masters); fp16-mixed with dynamic loss
# scaling; fp16-mixed without scaling (gradients below 2^-24 flush to zero); bf16-pure (no f32
# masters: bf16 weights and AdamW state, stochastic rounding). Runs go to
# outputs/precision/<recipe>/ (a finished run is reused, so rerunning only re-reports).
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-600}
shift || true
scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --parallel "$(nproc)" --target mixprec_cli >/dev/null
out=outputs/precision
declare -A recipes=(
  [fp32]="fp32"
  [bf16-mixed]="bf16-mixed"
  [fp16-mixed]="fp16-mixed"
  [fp16-unscaled]="params=f16,compute=f16,reduce=f32,output=f32,loss_scaling=false"
  [bf16-pure-sr]="bf16-pure"
)
order=(fp32 bf16-mixed fp16-mixed fp16-unscaled bf16-pure-sr)
for name in "${order[@]}"; do
  echo "== $name (${recipes[$name]}), $steps steps"
  build/mixprec train configs/moe_small.toml --precision "${recipes[$name]}" --steps "$steps" \
    --run-dir "$out/$name" --resume --progress lines \
    --set checkpoint.export_bf16=false --set metrics.plot=false "$@"
done
dirs=()
for name in "${order[@]}"; do dirs+=("$out/$name"); done
echo
build/mixprec summary --markdown "${dirs[@]}"
build/mixprec plot "${dirs[@]}" -o "$out/precision.png" | tail -1
