#!/usr/bin/env bash
# Fuzzes a reader with libFuzzer: scripts/fuzz.sh [TARGET] [SECONDS]. TARGET is safetensors (the
# checkpoint reader, the default), config (the TOML config loader and --set overrides),
# tokenizer_model (sentencepiece .model files: mixprec's checks, then the library's encode and
# decode) or jsonl (the JSONL document reader); SECONDS defaults to 300. Installs clang and the libFuzzer runtime, builds build-fuzz-clang
# (clang, ASan + UBSan, -DMIXPREC_FUZZ=ON), fuzzes for SECONDS (or FUZZ_RUNS executions)
# starting from the kept corpus plus fresh seeds, then merges the corpus, the seeds and the new
# finds into a minimal tests/fuzz/TARGET (-set_cover_merge=1, the set-cover variant of
# -merge=1). A crash leaves its input as build-fuzz-clang/fuzz/TARGET/crash-* and fails the
# script.
# Environment: FUZZ_JOBS (parallel fuzzing processes, default 1), FUZZ_RUNS (stop after this
# many executions instead of SECONDS), FUZZ_MAX_LEN (default 8192; longer seeds are cut to it),
# FUZZ_TIMEOUT (seconds one input may take, default 120: a niced fuzzer on a busy machine can
# be starved for many seconds, which is not a hang of its own).
# The deep seeds nest 40k-80k levels, as deep as the inputs that overflowed the stack before the
# depth bound: FUZZ_MAX_LEN=262144 reaches them whole, at a tenth of the speed.
set -euo pipefail
cd "$(dirname "$0")/.."

target=${1:-safetensors}
seconds=${2:-300}
case "$target" in
  safetensors | config | tokenizer_model | jsonl) ;;
  *) echo "fuzz: unknown target '$target' (safetensors, config, tokenizer_model or jsonl)" >&2
     exit 2 ;;
esac
jobs=${FUZZ_JOBS:-1}
runs=${FUZZ_RUNS:--1}
max_len=${FUZZ_MAX_LEN:-8192}
corpus=tests/fuzz/$target
build=build-fuzz-clang

# ---- packages (as scripts/setup.sh does) ---------------------------------
scripts/setup.sh
missing=()
for p in clang libclang-rt-14-dev libomp-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "fuzz: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends "${missing[@]}" >/dev/null
fi

# ---- build ---------------------------------------------------------------
# -O1 and line tables: quick to build, fast enough to fuzz, asserts kept, readable reports.
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" -DMIXPREC_FUZZ=ON \
  -DMIXPREC_BUILD_TESTS=OFF -DMIXPREC_BUILD_BENCH=OFF >/dev/null
seed_writers=()
case "$target" in
  safetensors) seed_writers=(write_safetensors_seeds) ;;
  tokenizer_model) seed_writers=(write_tokenizer_seeds) ;;
esac
cmake --build "$build" --parallel "$(nproc)" --target "${target}_fuzz" "${seed_writers[@]}"

# `count` copies of `unit`, on one line.
repeat() { printf "$2%.0s" $(seq "$1"); }

# The config seeds: the shipped configs, one with overrides after the "--" line, and keys,
# tables, inline tables and arrays nested as deep as those that overflowed the stack before.
write_config_seeds() {
  local dir=$1
  cp configs/*.toml "$dir"/
  { cat configs/tiny.toml; printf '\n--\ntraining.lr=1e-2\nmodel.moe.top_k=1\nrun_dir=x\n'; } \
    >"$dir/overrides"
  { printf a; repeat 50000 .a; printf ' = 1\n'; } >"$dir/deep_dotted_key"
  { printf '[t'; repeat 50000 .t; printf ']\nx = 1\n'; } >"$dir/deep_table_header"
  { printf 'a = '; repeat 40000 '{b = '; printf 1; repeat 40000 '}'; printf '\n'; } \
    >"$dir/deep_inline_tables"
  { printf 'a = '; repeat 80000 '['; repeat 80000 ']'; printf '\n'; } >"$dir/deep_arrays"
  { cat configs/tiny.toml; printf '\n--\ntraining'; repeat 50000 .a; printf '=1\n'; } \
    >"$dir/deep_override"
}

# The JSONL seeds: Hugging Face-style lines, escapes, blank and CRLF lines, the refusals (not an
# object, no string "text", deep nesting, bad UTF-8) and a long document.
write_jsonl_seeds() {
  local dir=$1
  printf '{"text": "first doc\\nwith two lines", "url": "x"}\n\n{"timestamp": 1, "text": "caf\\u00e9"}\r\n{"text": ""}' \
    >"$dir/documents"
  printf '{"text": "\\ud83d\\ude00 \\u0000 \\t \\" \\\\ \\/"}\n{"meta": {"a": [1, 2.5e300, null, true]}, "text": "x"}\n' \
    >"$dir/escapes"
  printf '{"text": 3}\n[1, 2]\n{"text": "ok"}\n' >"$dir/refused"
  { repeat 2000 '['; printf '\n'; } >"$dir/deep"
  printf '{"text": "ok"}\n\xff\xfe\n' >"$dir/not_utf8"
  { printf '{"text": "'; repeat 1000 'lorem ipsum '; printf '"}\n'; } >"$dir/long"
}

# ---- fuzz: new finds go to a scratch folder, then everything is merged into a minimal corpus
root=$(pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$corpus" "$work/new" "$work/seeds" "$work/merged"
case "$target" in
  safetensors) "$build/fuzz/write_safetensors_seeds" "$work/seeds" ;;
  config) write_config_seeds "$work/seeds" ;;
  tokenizer_model) "$build/fuzz/write_tokenizer_seeds" "$work/seeds" ;;
  jsonl) write_jsonl_seeds "$work/seeds" ;;
esac
fuzzer=$root/$build/fuzz/${target}_fuzz
echo "fuzz: $target, ${seconds}s or $runs runs, $jobs job(s), inputs up to $max_len bytes, corpus $corpus" \
  "($(find "$corpus" -type f | wc -l) files)"
# Run from a folder of the target's own under the build: crash inputs and the jobs' logs
# (fuzz-N.log) land there, not in the sources, and two targets fuzzed at once keep apart.
limit=(-max_total_time="$seconds")
[ "$runs" != -1 ] && limit=(-runs="$runs")
mkdir -p "$build/fuzz/$target"
(cd "$build/fuzz/$target" && "$fuzzer" "${limit[@]}" -max_len="$max_len" -timeout="${FUZZ_TIMEOUT:-120}" \
  -rss_limit_mb=2048 -dict="$root/fuzz/$target.dict" -jobs="$jobs" -workers="$jobs" \
  -print_final_stats=1 "$work/new" "$root/$corpus" "$work/seeds")
# Rebuilt from scratch so the corpus stays a small set covering every edge seen so far: a set
# cover (fewest inputs, not the first-found ones) of plain edges (not hit counts, which keep
# ~4x as many files); the fuzzer finds the rest again from it within seconds.
"$fuzzer" -set_cover_merge=1 -use_counters=0 -max_len="$max_len" "$work/merged" \
  "$root/$corpus" "$work/new" "$work/seeds" 2>&1 | tail -n 1
find "$corpus" -type f -delete
cp "$work/merged"/* "$corpus"/
echo "fuzz: corpus $corpus now holds $(find "$corpus" -type f | wc -l) files," \
  "$(du -sh "$corpus" | cut -f1)"
