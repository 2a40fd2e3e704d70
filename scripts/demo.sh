#!/usr/bin/env bash
# The main job: simulate a video-generation session and open it. With a display the GUI opens
# on it; without one it renders offscreen, writes screenshots and heatmap PNGs under demo-out/,
# and prints the report.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
fragscope_install_deps
fragscope_build release
bin=build/release/app
out=${FRAGSCOPE_DEMO_OUT:-demo-out}
mkdir -p "$out"
session="$out/demo.fragscope"
echo "== simulating a 24-frame video-diffusion run (synthetic data) =="
"$bin/fragscope" simulate -o "$session" --frames 24 --steps 20 --seed 17
if [[ -n "${DISPLAY:-}" ]]; then
  "$bin/gui/fragscope-gui" "$session" &
else
  echo "== no \$DISPLAY: rendering the GUI offscreen into $out/ =="
  QT_QPA_PLATFORM=offscreen "$bin/gui/fragscope-gui" --screenshots "$out" "$session"
fi
"$bin/fragscope" export heatmap "$session" -o "$out/heatmap.png" --size 1600x900
"$bin/fragscope" export timeline "$session" -o "$out/timeline.png" --size 1600x900
"$bin/fragscope" report "$session"
echo "== outputs in $out/ =="
ls -1 "$out"
