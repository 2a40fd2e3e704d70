#!/usr/bin/env bash
# Installs what is missing, builds, and runs the default test suite through ctest, then lists the
# tests that skipped and why (e.g. the real-trace tests when FRAGSCOPE_DATA is not found).
# Usage: scripts/test.sh [ctest args…]   (FRAGSCOPE_PRESET=dev|release|asan|tsan, default release;
# tsan builds and runs only the tests labelled threads, under ThreadSanitizer)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
fragscope_install_deps
preset=${FRAGSCOPE_PRESET:-release}
fragscope_build "$preset"
export QT_QPA_PLATFORM=${QT_QPA_PLATFORM:-offscreen}
# Default label set: everything except benchmarks, fuzzing and long runs.
labels=(-LE 'bench|fuzz|slow')
[[ $preset == tsan ]] && labels+=(-L threads)
rc=0
ctest --test-dir "build/$preset" --output-on-failure -j "$(nproc)" "${labels[@]}" "$@" || rc=$?
# Qt Test prints "SKIP   : Class::test() reason" and the location on the next line; ctest keeps
# every test's output in LastTest.log.
log="build/$preset/Testing/Temporary/LastTest.log"
# Python's unittest (-v) prints "test_name (module.Class) ... skipped 'reason'"; a suite that was
# not built (no OpenCV, no CUPTI) prints a SKIP line of its own (tests/CMakeLists.txt).
if [[ -f $log ]] && grep -q -e '^SKIP   :' -e " \.\.\. skipped '" "$log"; then
  echo
  echo "Skipped tests ($preset):"
  {
    grep '^SKIP   :' "$log" | sed 's/^SKIP   : /  /' || true
    grep " \.\.\. skipped '" "$log" | sed 's/^/  /' || true
  } | sort -u
fi
exit "$rc"
