#!/usr/bin/env bash
# scripts/screenshots.sh OUTDIR: renders fragscope-gui at 1920x1080 in several states (overview,
# first collapsed frame selected, heatmap zoomed on it, a precursor selected) plus report images,
# for a simulated session and for an imported real PyTorch snapshot from ../shared/data.
# Uses Xvfb when FRAGSCOPE_XVFB=1 and xvfb-run exists, else Qt's offscreen platform.
# FRAGSCOPE_BIN selects the folder holding `fragscope` and gui/fragscope-gui (default: the first
# of build/release/app, build/dev/app, build/gui/app that has both).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: scripts/screenshots.sh OUTDIR}
bin=${FRAGSCOPE_BIN:-}
if [[ -z "$bin" ]]; then
  for d in "$root/build/release/app" "$root/build/dev/app" "$root/build/gui/app"; do
    if [[ -x "$d/fragscope" && -x "$d/gui/fragscope-gui" ]]; then bin=$d; break; fi
  done
fi
[[ -n "$bin" ]] || { echo "screenshots.sh: build fragscope and fragscope-gui first (or set FRAGSCOPE_BIN)" >&2; exit 1; }
data=${FRAGSCOPE_DATA:-$root/../shared/data}
mkdir -p "$out"

gui() {
  if [[ "${FRAGSCOPE_XVFB:-0}" == 1 ]] && command -v xvfb-run >/dev/null; then
    xvfb-run -a -s "-screen 0 1920x1080x24" "$bin/gui/fragscope-gui" "$@"
  else
    QT_QPA_PLATFORM=offscreen "$bin/gui/fragscope-gui" "$@"
  fi
}

echo "== simulated video-diffusion run (synthetic data) =="
"$bin/fragscope" simulate -o "$out/simulated.fragscope" --frames 24 --steps 20 --seed 17
gui --screenshots "$out/simulated" "$out/simulated.fragscope"
for v in heatmap timeline histogram memmap; do
  "$bin/fragscope" export "$v" "$out/simulated.fragscope" -o "$out/simulated/cli-$v.png" --size 1600x900
  "$bin/fragscope" export "$v" "$out/simulated.fragscope" -o "$out/simulated/cli-$v.svg" --size 1600x900
done

snap="$data/pytorch-snapshots/decomfl.pickle"
if [[ -f "$snap" ]] && "$bin/fragscope" --help | grep -q '^  import '; then
  echo "== imported real PyTorch snapshot: $(basename "$snap") =="
  "$bin/fragscope" import "$snap" -o "$out/snapshot.fragscope"
  gui --screenshots "$out/snapshot" "$out/snapshot.fragscope"
  "$bin/fragscope" export heatmap "$out/snapshot.fragscope" -o "$out/snapshot/cli-heatmap.png" --size 1600x900
else
  echo "== no real snapshot at $snap (or no import command): skipped ==" >&2
fi
if "$bin/fragscope" --version | grep -q '^video metrics built'; then
  echo "== fragscope ab study of tests/ab/gen_frames.py (synthetic frames) =="
  rm -rf "$out/ab-study"
  FRAGSCOPE_NO_PROGRESS=1 "$bin/fragscope" ab -o "$out/ab-study" -- python3 \
    "$root/tests/ab/gen_frames.py" --out '{run}' --alloc-break 7 --content-break 12
  gui --screenshots "$out/ab" "$out/ab-study"
  mv "$out/ab/study-1.png" "$out/ab/study.png"
  "$bin/fragscope" export frames "$out/ab-study" --frame 7 -o "$out/ab/frame7.png"
else
  echo "== no video metrics in this build: the ab study skipped ==" >&2
fi
echo "== screenshots in $out =="
find "$out" -name '*.png' | sort
