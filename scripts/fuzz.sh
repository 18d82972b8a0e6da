#!/usr/bin/env bash
# Fuzzes the safetensors reader with libFuzzer: scripts/fuzz.sh [SECONDS] (default 300).
# Installs clang and the libFuzzer runtime, builds build-fuzz-clang (clang, ASan + UBSan,
# -DMIXPREC_FUZZ=ON), fuzzes for SECONDS starting from the kept corpus plus fresh seeds, then
# merges the corpus, the seeds and the new finds into a minimal tests/fuzz/safetensors
# (-set_cover_merge=1, the set-cover variant of -merge=1). A crash leaves its input as
# build-fuzz-clang/fuzz/crash-* and fails the script.
# Environment: FUZZ_JOBS (parallel fuzzing processes, default 1), FUZZ_MAX_LEN (default 4096).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-300}
jobs=${FUZZ_JOBS:-1}
max_len=${FUZZ_MAX_LEN:-4096}
corpus=tests/fuzz/safetensors
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
cmake --build "$build" --parallel "$(nproc)" --target safetensors_fuzz write_safetensors_seeds

# ---- fuzz: new finds go to a scratch folder, then everything is merged into a minimal corpus
root=$(pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$corpus" "$work/new" "$work/seeds" "$work/merged"
"$build/fuzz/write_safetensors_seeds" "$work/seeds"
fuzzer=$root/$build/fuzz/safetensors_fuzz
echo "fuzz: ${seconds}s, $jobs job(s), inputs up to $max_len bytes, corpus $corpus" \
  "($(find "$corpus" -type f | wc -l) files)"
# Run from the build folder: crash inputs and the jobs' logs land there, not in the sources.
(cd "$build/fuzz" && "$fuzzer" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 \
  -rss_limit_mb=2048 -dict="$root/fuzz/safetensors.dict" -jobs="$jobs" -workers="$jobs" \
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
