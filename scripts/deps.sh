#!/usr/bin/env bash
# Installs the Debian packages fragscope needs that are missing (sourced by demo.sh/test.sh).
# Runs `apt-get update` once, only when something is missing.
set -euo pipefail

FRAGSCOPE_PACKAGES=(build-essential cmake ninja-build pkg-config git python3
  qt6-base-dev qt6-svg-dev libqcustomplot-dev libsqlite3-dev libfmt-dev zlib1g-dev libboost-math-dev libssl-dev
  libopencv-dev ffmpeg python3-distributed
  sqlite3 xvfb xauth imagemagick clang clang-format gdb dpkg-dev file appstream desktop-file-utils)

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
  fragscope_install_cupti
}

# Capture (the CUPTI agent, record/launch/attach/ps) needs CUPTI. The CUDA Toolkit under
# /usr/local/cuda has it; otherwise Debian's nvidia-cuda-toolkit + libcupti-dev (non-free) are
# installed when the configured archives offer them. Without CUPTI everything else still builds:
# CMake then turns FRAGSCOPE_CAPTURE off and says so.
fragscope_install_cupti() {
  if [[ -e /usr/local/cuda/include/cupti.h || -e /usr/include/cupti.h ]]; then
    return 0
  fi
  local offered
  offered=$(apt-cache policy libcupti-dev nvidia-cuda-toolkit 2>/dev/null | grep -c 'Candidate: [0-9]' || true)
  if [[ $(id -u) -eq 0 && $offered -eq 2 ]]; then
    echo "fragscope: installing CUPTI from Debian: nvidia-cuda-toolkit libcupti-dev" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      nvidia-cuda-toolkit libcupti-dev >/dev/null && return 0
  fi
  echo "fragscope: CUPTI not found (no CUDA Toolkit under /usr/local/cuda, and Debian's" \
       "nvidia-cuda-toolkit/libcupti-dev are not offered by the configured archives): building" \
       "without capture (record, launch, attach, ps). Everything else works." >&2
}

# Configures and builds into build/$1 (release by default).
fragscope_build() {
  local preset=${1:-release}
  local root
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  cmake --preset "$preset" -S "$root" >/dev/null
  # The tsan preset builds only the tests of the thread hand-offs (tests/CMakeLists.txt).
  local targets=()
  [[ $preset == tsan ]] && targets=(--target thread_tests)
  cmake --build "$root/build/$preset" -j "$(nproc)" "${targets[@]}"
}
