#!/usr/bin/env bash
# Installs every Debian package mixprec needs. Idempotent; silent when all are present.
set -euo pipefail

PACKAGES=(
  cmake ninja-build g++ pkg-config   # build
  libgtest-dev libgmock-dev          # tests
  libbenchmark-dev                   # bench/
  libcli11-dev libfmt-dev            # the mixprec command
  nlohmann-json3-dev                 # safetensors headers
  clang-format                       # style check in CI
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
"${sudo_cmd[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
  "${missing[@]}" >/dev/null
