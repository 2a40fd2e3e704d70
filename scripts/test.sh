#!/usr/bin/env bash
# Installs what is missing, builds, and runs the default test suite through ctest, then lists the
# tests that skipped and why (e.g. the real-trace tests when FRAGSCOPE_DATA is not found).
# Usage: scripts/test.sh [ctest args…]   (FRAGSCOPE_PRESET=dev|release|asan, default release)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
fragscope_install_deps
preset=${FRAGSCOPE_PRESET:-release}
fragscope_build "$preset"
export QT_QPA_PLATFORM=${QT_QPA_PLATFORM:-offscreen}
# Default label set: everything except benchmarks, fuzzing and long runs.
rc=0
ctest --test-dir "build/$preset" --output-on-failure -j "$(nproc)" -LE 'bench|fuzz|slow' "$@" || rc=$?
# Qt Test prints "SKIP   : Class::test() reason" and the location on the next line; ctest keeps
# every test's output in LastTest.log.
log="build/$preset/Testing/Temporary/LastTest.log"
if [[ -f $log ]] && grep -q '^SKIP   :' "$log"; then
  echo
  echo "Skipped tests ($preset):"
  grep '^SKIP   :' "$log" | sed 's/^SKIP   : /  /' | sort -u
fi
exit "$rc"
