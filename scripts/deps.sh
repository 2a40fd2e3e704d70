#!/usr/bin/env bash
# Installs the Debian packages fragscope needs that are missing (sourced by demo.sh/test.sh).
# Runs `apt-get update` once, only when something is missing.
set -euo pipefail

FRAGSCOPE_PACKAGES=(build-essential cmake ninja-build pkg-config git python3
  qt6-base-dev qt6-svg-dev libqcustomplot-dev libsqlite3-dev libfmt-dev zlib1g-dev
  sqlite3 xvfb xauth imagemagick clang gdb dpkg-dev file appstream desktop-file-utils)

fragscope_install_deps() {
  local missing=()
  for p in "${FRAGSCOPE_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  if ((${#missing[@]})); then
    echo "fragscope: installing missing Debian packages: ${missing[*]}" >&2
    if [[ $(id -u) -ne 0 ]]; then
      echo "fragscope: not root; run: sudo apt-get install ${missing[*]}" >&2
      return 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  if [[ ! -e /usr/local/cuda/include/cupti.h && ! -e /usr/include/cupti.h ]]; then
    echo "fragscope: CUPTI headers not found under /usr/local/cuda; install the CUDA Toolkit" \
         "(or: apt-get install nvidia-cuda-toolkit libcupti-dev)" >&2
    return 1
  fi
}

# Configures and builds into build/$1 (release by default).
fragscope_build() {
  local preset=${1:-release}
  local root
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  cmake --preset "$preset" -S "$root" >/dev/null
  cmake --build "$root/build/$preset" -j "$(nproc)"
}
