#!/usr/bin/env bash
# Installs what is missing, builds, and runs the default test suite through ctest.
# Usage: scripts/test.sh [ctest args…]   (FRAGSCOPE_PRESET=dev|release|asan, default release)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
fragscope_install_deps
preset=${FRAGSCOPE_PRESET:-release}
fragscope_build "$preset"
export QT_QPA_PLATFORM=${QT_QPA_PLATFORM:-offscreen}
# Default label set: everything except benchmarks, fuzzing and long runs.
ctest --test-dir "build/$preset" --output-on-failure -j "$(nproc)" -LE 'bench|fuzz|slow' "$@"
