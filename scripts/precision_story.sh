#!/usr/bin/env bash
# The precision story, measured: trains the default model (configs/moe_small.toml) five times
# with the same seed, steps and data, one precision recipe each, then prints a table (final
# validation loss, tokens/s, peak tensor memory, skipped steps, f16 underflow fraction) and
# draws their curves into one plot.
#
#   scripts/precision_story.sh [STEPS] [extra `mixprec train` arguments...]
#   scripts/precision_story.sh fp8 [STEPS] [...]   # FP8 / MX recipes on configs/llama3_debug.toml
#   scripts/precision_story.sh fp8-moe [STEPS] [...]   # ... and on configs/deepseek_moe_debug.toml
#
# Recipes: fp32; bf16-mixed (bf16 compute, f32 masters); fp16-mixed with dynamic loss
# scaling; fp16-mixed without scaling (gradients below 2^-24 flush to zero); bf16-pure (no f32
# masters: bf16 weights and AdamW state, stochastic rounding). With `fp8`: bf16-mixed and every
# linear recipe of amp/linear_recipe.h (15-20 minutes each on 2 cores of a Zen 5 at 600
# steps). With `fp8-moe`: bf16-mixed and torchtitan's MoE spellings on the DeepSeek-style MoE
# debug model (the experts' grouped GEMMs by [quantize.grouped_mm.*] where the recipe has one).
# Runs go to outputs/precision/<recipe>/ or outputs/<set>/<recipe>/; a finished run is
# reused and an interrupted one resumes from its last checkpoint, so rerunning continues.
set -euo pipefail
cd "$(dirname "$0")/.."
set_name=precision
config=configs/moe_small.toml
case "${1:-}" in
  fp8) set_name=fp8 config=configs/llama3_debug.toml; shift ;;
  fp8-moe) set_name=fp8-moe config=configs/deepseek_moe_debug.toml; shift ;;
esac
steps=${1:-600}
shift || true
scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --parallel "$(nproc)" --target mixprec_cli >/dev/null
out=outputs/$set_name
declare -A recipes=(
  [fp32]="fp32"
  [bf16-mixed]="bf16-mixed"
  [fp16-mixed]="fp16-mixed"
  [fp16-unscaled]="params=f16,compute=f16,reduce=f32,output=f32,loss_scaling=false"
  [bf16-pure-sr]="bf16-pure"
)
order=(fp32 bf16-mixed fp16-mixed fp16-unscaled bf16-pure-sr)
if [ "$set_name" = fp8 ]; then  # a recipe's name is a --precision spelling (bf16-mixed + it)
  order=(bf16-mixed tensorwise rowwise rowwise_with_gw_hp te_delayed te_current te_blockwise
         deepseek_v3 deepseek_v3_ue8m0 mxfp8_cublas mxfp8_cublas_rceil te_nvfp4)
  for name in "${order[@]:1}"; do recipes[$name]=$name; done
  # NVFP4 with the last block kept in bf16, as NVIDIA's NVFP4 pretraining keeps its final blocks
  recipes[te_nvfp4-last-block-bf16]="params=bf16,compute=bf16,reduce=f32,linear=te_nvfp4,linear_skip=lm_head|blocks.7."
  order+=(te_nvfp4-last-block-bf16)
fi
# bf16-mixed again with two other seeds (init and data order): the seed-to-seed spread the FP8
# recipes' differences are held to (README, "the margin").
declare -A run_args=()
if [ "$set_name" != precision ]; then
  recipes[bf16-mixed-seed2]=bf16-mixed recipes[bf16-mixed-seed3]=bf16-mixed
  run_args[bf16-mixed-seed2]="--set training.seed=4321"
  run_args[bf16-mixed-seed3]="--set training.seed=777"
fi
if [ "$set_name" = fp8-moe ]; then  # torchtitan's float8 and MX converters for MoE models
  mixed="params=bf16,compute=bf16,reduce=f32,linear_skip=lm_head"
  recipes[rowwise+grouped]="$mixed,linear=rowwise,grouped=rowwise,grouped_fqns=experts"
  recipes[mxfp8+grouped]="$mixed,linear=mxfp8_cublas_rceil,grouped=mxfp8,grouped_fqns=experts"
  recipes[tensorwise]=tensorwise        # torchtitan's default: experts stay in bf16
  order=(bf16-mixed rowwise+grouped mxfp8+grouped tensorwise)
fi
[ "$set_name" != precision ] && order+=(bf16-mixed-seed2 bf16-mixed-seed3)
extra=()
# The monitor's per-tensor FP8 figures on log steps only: every step's would cost the FP8 runs
# about a quarter of their speed, and the table's figures come from log steps anyway.
[ "$set_name" != precision ] && extra=(--set metrics.fp8_stats=log_steps)
# A finished run leaves a compact record (scripts/compact_metrics.py, committed with the
# README's table): a later checkout without the run directory reads the record instead of
# training that recipe again.
records=docs/precision_story/$set_name
mkdir -p "$records"
# A record ends with its last eval: reused only when that is at this story's step count.
finished() { tail -n 1 "$1" 2>/dev/null | grep -q "\"type\": *\"eval\", *\"step\": *$steps,"; }
sources=()
for name in "${order[@]}"; do
  if [ ! -d "$out/$name" ] && finished "$records/$name.jsonl"; then
    echo "== $name: the record $records/$name.jsonl ($steps steps)"
    sources+=("$records/$name.jsonl")
    continue
  fi
  echo "== $name (${recipes[$name]}), $steps steps"
  build/mixprec train "$config" --precision "${recipes[$name]}" --steps "$steps" \
    --run-dir "$out/$name" --resume --progress lines \
    --set checkpoint.export_bf16=false --set metrics.plot=false "${extra[@]}" \
    ${run_args[$name]:-} "$@"
  if command -v python3 >/dev/null; then
    python3 scripts/compact_metrics.py "$out/$name/metrics.jsonl" "$records/$name.jsonl"
  fi
  sources+=("$out/$name")
done
dirs=("${sources[@]}")
echo
build/mixprec summary --markdown "${dirs[@]}"
build/mixprec plot "${dirs[@]}" -o "$out/$set_name.png" | tail -1
