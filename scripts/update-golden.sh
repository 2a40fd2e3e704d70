#!/usr/bin/env bash
# Rewrites the golden outputs under tests/golden/ from the current build (the text and JSON of
# info, state, report, collapse, whatif, compare and export timeline on fixed generated
# sessions; tests/golden/tst_golden.cpp), then shows what changed. Run it when a change to an
# output is meant, read the diff, and commit it with the change.
# Usage: scripts/update-golden.sh   (FRAGSCOPE_PRESET=dev|release|asan, default dev; the build
# folder build/$FRAGSCOPE_PRESET must be configured: `cmake --preset dev`)
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${FRAGSCOPE_PRESET:-dev}
cmake --build "build/$preset" --target fragscope tst_golden
FRAGSCOPE_UPDATE_GOLDEN=1 QT_QPA_PLATFORM=offscreen "build/$preset/tests/golden/tst_golden"
git status --short tests/golden
git --no-pager diff --stat tests/golden
