#!/usr/bin/env bash
# Installs every Debian package mixprec needs. Idempotent; silent when all are present.
set -euo pipefail

PACKAGES=(
  cmake ninja-build g++ pkg-config   # build
  libgtest-dev libgmock-dev          # tests
  libbenchmark-dev                   # bench/
  libcli11-dev libfmt-dev            # the mixprec command
  nlohmann-json3-dev                 # safetensors headers
  libtomlplusplus-dev                # TOML training configs (configs/*.toml)
  libopenblas-dev                    # sgemm (found by name via pkg-config openblas)
  libsentencepiece-dev               # subword tokenizers: mixprec tokenizer train, [model] tokenizer
  libonig-dev libutf8proc-dev        # tokenizer.json: pre-tokenizer regexes, Unicode normalization
  zlib1g-dev                         # gzip'd tokenizer.json files (the committed real tokenizers)
  python3-protobuf                   # tests: TensorBoard event files read by Google's protobuf
  clang-format                       # style check in CI
  fortunes                           # default training corpus (/usr/share/games/fortunes)
  gnuplot-nox                        # loss-curve PNGs (mixprec plot, src/report)
  libopenmpi-dev openmpi-bin         # FSDP over MPI (src/dist; the tests run mpirun -np 2)
  pybind11-dev python3-dev           # the Python module (python/; MIXPREC_BUILD_PYTHON)
  python3-numpy                      # its arrays, and its tests (python/tests)
  python3-venv python3-pip           # pip install . (pyproject.toml, scikit-build-core)
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null; then
    echo "setup: run as root, or install sudo, to install: ${missing[*]}" >&2
    exit 1
  fi
  sudo_cmd=(sudo)
fi
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
  --no-install-recommends "${missing[@]}" >/dev/null
