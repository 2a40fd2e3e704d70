#!/usr/bin/env bash
# GPU check of the capture engine, for a machine with an NVIDIA GPU (docs/capture.md).
#
#   scripts/gpu-check.sh --prepare   (here, on the dev machine) builds the CLI (the recorder)
#                                    and copies it with every shared library it needs but
#                                    glibc's (xz-packed) into build/gpu-carry/, to be carried to
#                                    the GPU machine
#   scripts/gpu-check.sh             (on the GPU machine) builds the agent and the workload,
#                                    records the workload and compares the session with the
#                                    workload's own counts; prints the agent's overhead; runs
#                                    `fragscope ab` on a tiny PyTorch generation (docs/ab.md)
#
# The GPU machine has CUDA, CMake and Python but no Qt, fmt or SQLite: the agent needs only CUPTI
# and is compiled directly; the recorder comes from build/gpu-carry (or a CMake build there
# when the development packages happen to be installed).
# Outputs go to $OUT (default build/gpu-check-out): gpu-check.log, summary.txt, result.txt,
# info.json, and details.tar.gz (the sessions, the recorder's and workloads' output). Every step
# says its name; a step that cannot go on names itself and exits non-zero; a count that does not
# match is reported and the check goes on to the next step (so one run shows everything), then
# exits non-zero. Designed to finish in well under 4 minutes.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CUDA=${CUDA_HOME:-/usr/local/cuda}
CARRY=$ROOT/build/gpu-carry

if [[ ${1:-} == --prepare ]]; then
    set -e
    B=$ROOT/build/gpu-carry-build
    # RPATH (not RUNPATH: it also serves the libraries' own needs) bin/../lib; the backslash keeps
    # $ORIGIN from the shell that runs the link command.
    cmake -S "$ROOT" -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DFRAGSCOPE_BUILD_TESTS=OFF -DFRAGSCOPE_BUILD_BENCH=OFF \
        -DCMAKE_EXE_LINKER_FLAGS='-static-libstdc++ -static-libgcc -Wl,--disable-new-dtags,-rpath,\$ORIGIN/../lib' \
        >/dev/null
    cmake --build "$B" -j2 --target fragscope fragscope-inject
    rm -rf "$CARRY"
    mkdir -p "$CARRY/bin" "$CARRY/lib"
    cp "$B/app/fragscope" "$CARRY/bin/"
    strip "$CARRY/bin/fragscope"
    cp "$B/capture/agent/libfragscope-inject.so" "$CARRY/lib/"
    # The video module for the ab step (without OpenCV's ≈ 240 libraries, 70 MB packed: it loads
    # where the machine has OpenCV 4.6's own, and the step is skipped elsewhere).
    if cmake --build "$B" -j2 --target fragscope-video 2>/dev/null; then
        mkdir -p "$CARRY/lib/fragscope"
        cp "$B/core/video/libfragscope-video.so" "$CARRY/lib/fragscope/"
        strip "$CARRY/lib/fragscope/libfragscope-video.so"
    fi
    # Every runtime library but glibc's own (the CLI links Qt through the recorder and the
    # exports; the GPU machine has neither Qt nor SQLite nor fmt), packed with xz to fit what
    # travels (≈ 77 MB of libraries, ≈ 20 MB packed).
    ldd "$CARRY/bin/fragscope" | awk '/=>/ {print $3}' |
        grep -v -E '/(libc|libm|libdl|libpthread|librt|libresolv|ld-linux[^/]*)\.so' |
        while read -r lib; do cp -L "$lib" "$CARRY/lib/"; done
    tar -C "$CARRY" -cJf "$CARRY/libs.tar.xz" lib
    rm -rf "$CARRY/lib"
    du -sh "$CARRY"
    echo "prepared $CARRY: carry the path build/gpu-carry to the GPU machine"
    exit 0
fi

OUT=${OUT:-$ROOT/build/gpu-check-out}
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/fragscope-gpu-check.XXXXXX)
D=$WORK/details # packed into $OUT/details.tar.gz on exit (few files come back from some machines)
mkdir -p "$D"
LOG=$OUT/gpu-check.log
: >"$LOG"
rm -f "$OUT/summary.txt" "$OUT/result.txt" "$OUT/info.json" "$OUT/details.tar.gz"
STEP=start
MISMATCHES=()
pack() {
    tar -C "$WORK" -czf "$OUT/details.tar.gz" details 2>/dev/null
    rm -rf "$WORK"
}
trap pack EXIT
say() { echo "$*" | tee -a "$LOG"; }
step() {
    STEP=$1
    say "== step: $1 (${SECONDS} s)"
}
fail() {
    say "gpu-check: FAILED at step '$STEP': $*"
    echo "FAILED step=$STEP: $*" >"$OUT/result.txt"
    ((${#MISMATCHES[@]})) && printf 'also: %s\n' "${MISMATCHES[@]}" >>"$OUT/result.txt"
    exit 1
}
mismatch() { # a finding that does not stop the check
    say "gpu-check: MISMATCH at step '$STEP': $*"
    MISMATCHES+=("step=$STEP: $*")
}
run() { # run with a time limit, log everything
    local limit=$1
    shift
    timeout "$limit" "$@" >>"$LOG" 2>&1
}

step environment
command -v nvidia-smi >/dev/null && nvidia-smi -L | tee -a "$LOG" || say "(nvidia-smi not found)"
[[ -x $CUDA/bin/nvcc ]] || fail "nvcc not found under $CUDA (set CUDA_HOME)"
CUPTI_LIB=""
for d in "$CUDA/extras/CUPTI/lib64" "$CUDA/lib64" "$CUDA/targets/x86_64-linux/lib"; do
    [[ -e $d/libcupti.so ]] && CUPTI_LIB=$d && break
done
[[ -n $CUPTI_LIB ]] || fail "libcupti.so not found under $CUDA"
CUPTI_INC=$CUDA/include
[[ -e $CUPTI_INC/cupti.h ]] || CUPTI_INC=$CUDA/extras/CUPTI/include
say "CUDA $CUDA, CUPTI $CUPTI_LIB, $("$CUDA/bin/nvcc" --version | tail -1), $(uname -r)"

step build-agent
# Same sources and flags as capture/agent/CMakeLists.txt, without CMake's dependency checks.
# (agent.cpp, decode.cpp, callbacks.cpp, nvtx_mem.cpp, nvtx_inject.cpp, the protocol, and the
# PyTorch bridge with its Python half compiled in as a string, as capture/pytorch/CMakeLists.txt
# generates it.)
python3 - "$ROOT/capture/pytorch/bridge.py" "$WORK/bridge_script.cpp" <<'PY' || fail "cannot embed bridge.py"
import sys
src = open(sys.argv[1]).read()
open(sys.argv[2], "w").write('namespace fs::agent {\nextern const char* const kBridgeScript;\n'
                             'const char* const kBridgeScript = R"FSPY(' + src + ')FSPY";\n}\n')
PY
run 120 g++ -std=c++20 -O2 -fPIC -shared -fvisibility=hidden -fvisibility-inlines-hidden -pthread \
    -I"$ROOT" -I"$CUPTI_INC" -I"$CUDA/include" \
    "$ROOT"/capture/agent/*.cpp "$ROOT"/capture/protocol/*.cpp "$ROOT"/capture/pytorch/*.cpp \
    "$WORK/bridge_script.cpp" \
    -Wl,--version-script="$ROOT/capture/agent/exports.map" -static-libstdc++ -static-libgcc \
    -L"$CUPTI_LIB" -lcupti -ldl -Wl,-rpath,"$CUPTI_LIB" -o "$WORK/libfragscope-inject.so" ||
    fail "g++ could not build libfragscope-inject.so (see $LOG)"
export FRAGSCOPE_AGENT=$WORK/libfragscope-inject.so
# The agent is also the NVTX tool (heaps, regions, frames, metrics); said here so that a carried
# recorder older than that change still routes NVTX to it.
export NVTX_INJECTION64_PATH=$FRAGSCOPE_AGENT

step build-workload
run 120 "$CUDA/bin/nvcc" -O2 -o "$WORK/workload" "$ROOT/tests/gpu/workload.cu" -lcuda -ldl ||
    fail "nvcc could not build tests/gpu/workload.cu (see $LOG)"

step recorder
FRAGSCOPE=""
if [[ -x $CARRY/bin/fragscope ]]; then
    # The recorder finds them in bin/../lib through its RPATH (not LD_LIBRARY_PATH, which the
    # workloads it starts would inherit: Debian 12's libstdc++ is older than theirs).
    tar -C "$CARRY" -xJf "$CARRY/libs.tar.xz" >>"$LOG" 2>&1 || say "cannot unpack $CARRY/libs.tar.xz"
    "$CARRY/bin/fragscope" --version >>"$LOG" 2>&1 && FRAGSCOPE=$CARRY/bin/fragscope
    [[ -n $FRAGSCOPE ]] || say "carried recorder does not run here (see $LOG); trying a local build"
fi
if [[ -z $FRAGSCOPE ]]; then
    B=$WORK/build
    if run 60 cmake -S "$ROOT" -B "$B" -DCMAKE_BUILD_TYPE=Release \
        -DFRAGSCOPE_BUILD_TESTS=OFF -DFRAGSCOPE_BUILD_BENCH=OFF &&
        run 150 cmake --build "$B" -j"$(nproc)" --target fragscope; then
        FRAGSCOPE=$B/app/fragscope
    else
        fail "no recorder: build/gpu-carry is missing or unusable and a build here failed (needs
Qt 6, QCustomPlot, SQLite and fmt development packages). Run 'scripts/gpu-check.sh --prepare' on the dev machine and carry build/gpu-carry."
    fi
fi
say "recorder: $FRAGSCOPE"

FRAMES=24
REPLAYS=200
step baseline
# Best of three without the agent: the workload times itself after CUDA is initialised.
BEST=""
for i in 1 2 3; do
    env -u NVTX_INJECTION64_PATH timeout 60 "$WORK/workload" $FRAMES $REPLAYS >"$WORK/baseline.out" 2>>"$LOG"
    rc=$?
    line=$(grep '^WORKLOAD' "$WORK/baseline.out") ||
        fail "the workload failed without the agent (exit $rc; is there a GPU? see $LOG)"
    [[ $rc -eq 0 ]] ||
        fail "the workload's own checks failed without the agent (exit $rc; 3: the 1 PiB allocations did not fail with out-of-memory; see $LOG)"
    say "without agent: $line"
    s=$(sed -n 's/.*seconds=\([0-9.]*\).*/\1/p' <<<"$line")
    if [[ -z $BEST ]] || awk "BEGIN{exit !($s < $BEST)}"; then BEST=$s; fi
    BASE_LINE=$line
done

step record
SESSION=$D/gpu.fragscope
rm -f "$SESSION"
BEST_REC=""
for i in 1 2 3; do
    rm -f "$SESSION"
    FRAGSCOPE_NO_PROGRESS=1 timeout 90 "$FRAGSCOPE" record -o "$SESSION" -- "$WORK/workload" $FRAMES $REPLAYS \
        >"$D/record.stdout" 2>"$D/record.stderr"
    rc=$?
    cat "$D/record.stderr" >>"$LOG"
    [[ $rc -ne 3 ]] || fail "the workload under the agent: the 1 PiB allocations did not fail with out-of-memory (see record.stderr in details.tar.gz)"
    [[ $rc -eq 0 ]] || fail "fragscope record exited with $rc (agent and recorder messages in details.tar.gz: record.stderr)"
    line=$(grep '^WORKLOAD' "$D/record.stdout") || fail "the workload printed no counts under the agent"
    say "with agent:    $line"
    s=$(sed -n 's/.*seconds=\([0-9.]*\).*/\1/p' <<<"$line")
    if [[ -z $BEST_REC ]] || awk "BEGIN{exit !($s < $BEST_REC)}"; then BEST_REC=$s; REC_LINE=$line; fi
done
grep -q "agent disabled" "$D/record.stderr" && fail "the agent disabled itself: $(grep 'agent disabled' "$D/record.stderr")"

step verify
"$FRAGSCOPE" info --json "$SESSION" >"$OUT/info.json" 2>>"$LOG" || fail "fragscope info could not open the session"
python3 - "$OUT/info.json" "$SESSION" "$REC_LINE" "$BEST" "$BEST_REC" <<'PY' | tee -a "$LOG" "$OUT/summary.txt"
import json, sqlite3, sys
info = json.load(open(sys.argv[1]))
db = sqlite3.connect(f"file:{sys.argv[2]}?mode=ro", uri=True)  # the session is plain SQLite
q = lambda sql: db.execute(sql).fetchone()[0] or 0
w = dict(kv.split("=") for kv in sys.argv[3].split()[1:])
w = {k: float(v) for k, v in w.items()}
base, rec = float(sys.argv[4]), float(sys.argv[5])
rows = [
    # (what, session value, expected, exact?)  levels: 0 driver, 1 pool, 2 framework
    ("cudaMalloc allocations (driver level)", q("SELECT COUNT(*) FROM allocations WHERE level=0"), w["cuda_malloc"], True),
    ("cudaMallocAsync allocations (pool level)", q("SELECT COUNT(*) FROM allocations WHERE level=1"), w["malloc_async"], True),
    ("NVTX heaps (framework regions, kind pool)", q("SELECT COUNT(*) FROM regions WHERE level=2 AND kind=1"), w["nvtx_heaps"], True),
    ("NVTX regions (framework allocations)", q("SELECT COUNT(*) FROM allocations WHERE level=2"), w["nvtx_regions"], True),
    ("NVTX region bytes", q("SELECT SUM(size) FROM allocations WHERE level=2"), w["nvtx_region_bytes"], True),
    ("NVTX region frees (unregister + reset + heap end)", q("SELECT COUNT(*) FROM allocations WHERE level=2 AND free_ns IS NOT NULL"), w["nvtx_region_frees"], True),
    ("graph launches", info["graph_launches"], w["graph_launches"], True),
    ("graph launches with an exec id", q("SELECT COUNT(*) FROM graph_launches WHERE exec_id <> 0"), w["graph_launches"], True),
    ("distinct graph exec ids", q("SELECT COUNT(DISTINCT exec_id) FROM graph_launches WHERE exec_id <> 0"), w["graph_execs"], True),
    ("OOM events", q("SELECT COUNT(*) FROM ooms"), w["ooms"], True),
    ("OOM events requesting 1 PiB", q("SELECT COUNT(*) FROM ooms WHERE requested_bytes = 1 << 50"), w["ooms"], True),
    ("frames (NVTX 'frame N')", info["frames"], w["frames"], True),
    ("frame metrics (NVTX 'metric')", info["frame_metrics"], w["metrics"], True),
    # GRAPH_TRACE reports a graph's replay as one record, not its nodes' kernels (CUPTI's
    # CUpti_ActivityGraphTrace2): kernels are the plain launches.
    ("kernels (plain launches; graph nodes come as launches)", info["kernels"], w["kernels"], True),
    ("regions (>= cudaMalloc'd + VMM + NVTX heaps)", info["regions"], w["cuda_malloc"] + w["vmm_reserves"] + w["nvtx_heaps"], False),
]
bad = 0
print(f"{'':50} {'session':>10} {'workload':>10}")
for name, got, want, exact in rows:
    ok = got == want if exact else got >= want
    bad += not ok
    print(f"{name:50} {got:>10} {int(want):>10}  {'ok' if ok else 'MISMATCH'}")
h = info["health"]
print(f"dropped records {h['dropped_records']}, anomalies {h['anomaly_total']}, ended abruptly {h['ended_abruptly']}")
for kind, n in db.execute("SELECT kind, COUNT(*) FROM anomalies GROUP BY kind"):
    print(f"  anomaly {kind}: {n}")
print(f"agent overhead: workload {base:.3f} s without, {rec:.3f} s with the agent (best of 3): "
      f"{(rec / base - 1) * 100:+.1f} %")
sys.exit(1 if bad else 0)
PY
[[ ${PIPESTATUS[0]} -eq 0 ]] || mismatch "the session does not match the workload's counts (see summary.txt)"

step pytorch
# PyTorch's caching allocator through the agent's bridge (docs/capture.md, "PyTorch blocks"):
# tests/capture/pytorch_workload.py makes known tensor allocations inside record_function("frame
# N") ranges and writes torch.cuda.memory._snapshot()'s final state; the recorded session's final
# framework-level state must equal it. Then the bridge's overhead on an allocator-heavy loop.
python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" >>"$LOG" 2>&1 ||
    fail "python3 cannot import a CUDA-enabled torch"
PT_SESSION=$D/pytorch.fragscope
rm -f "$PT_SESSION"
FRAGSCOPE_NO_PROGRESS=1 timeout 120 "$FRAGSCOPE" record -o "$PT_SESSION" -- python3 \
    "$ROOT/tests/capture/pytorch_workload.py" "$D/pytorch-state.json" --wait-recording --frames 8 \
    >"$D/pytorch.stdout" 2>"$D/pytorch.stderr"
rc=$?
cat "$D/pytorch.stdout" "$D/pytorch.stderr" >>"$LOG"
[[ $rc -eq 0 ]] || fail "fragscope record of the PyTorch workload exited with $rc (see pytorch.stderr in details.tar.gz)"
PT_RUNS=${PT_RUNS:-3} # runs per variant (the best is kept)
pt_time() { # best of PT_RUNS of the loop's own time, and its allocator calls: pt_time CMD...
    local best="" s line calls=0 i
    for ((i = 0; i < PT_RUNS; ++i)); do
        line=$(FRAGSCOPE_NO_PROGRESS=1 timeout 120 "$@" 2>>"$LOG" | grep '^ACTIONS ')
        s=$(sed -n 's/^ACTIONS [0-9]* SECONDS //p' <<<"$line")
        [[ -n $s ]] || fail "the PyTorch benchmark loop printed nothing ($*)"
        calls=$(sed -n 's/^ACTIONS \([0-9]*\) .*/\1/p' <<<"$line")
        if [[ -z $best ]] || awk "BEGIN{exit !($s < $best)}"; then best=$s; fi
    done
    echo "$best:$calls"
}
# Three loops: allocator-bound (no other work), model-like (20 us of work per allocation), and a
# real model's training steps. Each plain, under the agent with --no-pytorch, with the history on
# but nobody draining it (torch's own cost), and with the bridge.
PT_TIMES=""
for L in 0 20 model; do
    if [[ $L == model ]]; then
        cmd=(python3 "$ROOT/bench/capture/pytorch_model_workload.py" 40)
    else
        cmd=(python3 "$ROOT/bench/capture/pytorch_bench_workload.py" 3000 "$L")
    fi
    b=$(pt_time "${cmd[@]}")
    o=$(pt_time "$FRAGSCOPE" record --no-pytorch -o "$WORK/pt-off.fragscope" -- "${cmd[@]}")
    h=$(BENCH_HISTORY=1 pt_time "${cmd[@]}")
    r=$(pt_time "$FRAGSCOPE" record -o "$WORK/pt-loop-$L.fragscope" -- "${cmd[@]}")
    for v in "$b" "$o" "$h" "$r"; do
        [[ $v == *:* ]] || fail "a PyTorch benchmark loop ($L) printed nothing (see $LOG)"
    done
    PT_TIMES="$PT_TIMES $L/$b/$o/$h/$r"
done
PT_RUNS=$PT_RUNS python3 - "$PT_SESSION" "$D/pytorch-state.json" "$WORK" $PT_TIMES <<'PY' | tee -a "$LOG" "$OUT/summary.txt"
import json, os, sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
st = json.load(open(sys.argv[2]))
blocks = sorted([list(r) for r in db.execute(
    "SELECT address, size FROM allocations WHERE level=2 AND free_ns IS NULL")])
segs = sorted([list(r) for r in db.execute(
    "SELECT address, size FROM regions WHERE level=2 AND kind=0 AND destroy_ns IS NULL")])
frames = db.execute("SELECT COUNT(*) FROM frames").fetchone()[0]
meta = dict(db.execute("SELECT key, value FROM meta WHERE key LIKE 'pytorch.%'"))
lost = db.execute("SELECT COALESCE(SUM(value),0) FROM capture_health WHERE kind='dropped_records'").fetchone()[0]
rows = [("live blocks equal _snapshot()'s active blocks", len(blocks), len(st["blocks"]), blocks == st["blocks"]),
        ("live segments equal _snapshot()'s segments", len(segs), len(st["segments"]), segs == st["segments"]),
        ("frames from record_function('frame N')", frames, st["frames"], frames == st["frames"]),
        ("trace entries lost", lost, 0, lost == 0)]
print(f"PyTorch {st['torch']}: bridge {meta.get('pytorch.bridge', '(none)')}")
bad = 0
for name, got, want, ok in rows:
    bad += not ok
    print(f"{name:50} {got:>10} {want:>10}  {'ok' if ok else 'MISMATCH'}")
def run(spec):  # "s:calls" of one variant
    s, calls = spec.split(":")
    return float(s), int(calls)
for spec in sys.argv[4:]:
    label, *variants = spec.split("/")
    (base, calls), (off, _), (hist, _), (rec, _) = (run(v) for v in variants)
    what = ("a transformer's training steps" if label == "model"
            else f"{label} us of work per allocation")
    loop = sqlite3.connect(f"file:{sys.argv[3]}/pt-loop-{label}.fragscope?mode=ro", uri=True)
    m = dict(loop.execute("SELECT key, value FROM meta WHERE key LIKE 'pytorch.bridge_%'"))
    pct = lambda t: f"{(t / base - 1) * 100:+.1f} %"
    print(f"PyTorch bridge overhead, {what} ({calls} allocator calls, best of {os.environ['PT_RUNS']}): "
          f"{base:.4f} s plain, {off:.4f} s agent with --no-pytorch ({pct(off)}), {hist:.4f} s "
          f"history on without the bridge ({pct(hist)}), {rec:.4f} s with the bridge ({pct(rec)}, "
          f"{(rec - base) / max(calls, 1) * 1e9:+.0f} ns/call); drained "
          f"{m.get('pytorch.bridge_entries')} entries in {m.get('pytorch.bridge_drains')} drains, "
          f"{int(m.get('pytorch.bridge_gil_ns', 0)) / 1e6:.1f} ms holding the GIL "
          f"({int(m.get('pytorch.bridge_snapshot_ns', 0)) / 1e6:.1f} ms of it in torch's "
          f"_snapshot), lost {m.get('pytorch.bridge_lost_entries')}")
sys.exit(1 if bad else 0)
PY
[[ ${PIPESTATUS[0]} -eq 0 ]] || mismatch "the PyTorch session's final state differs from torch's own snapshot (see summary.txt)"

step ab
# The causal check (docs/ab.md) on a tiny real PyTorch generation: tests/ab/torch_generation.py,
# a small conv decoder with cudnn.benchmark on, writing PNG frames; baseline, repeat, no-caching
# and expandable, every run recorded (--record). It needs torch with CUDA (checked again here) and
# fragscope's video module (libfragscope-video.so and OpenCV's libraries, which do not travel in
# build/gpu-carry: too large); without either the step says why and is skipped, not failed.
AB_DIR=$D/ab-study
if ! python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" >>"$LOG" 2>&1; then
    say "ab: skipped: python3 cannot import a CUDA-enabled torch" | tee -a "$OUT/summary.txt"
else
    rm -rf "$AB_DIR"
    FRAGSCOPE_NO_PROGRESS=1 timeout 240 "$FRAGSCOPE" ab -o "$AB_DIR" --record -- python3 \
        "$ROOT/tests/ab/torch_generation.py" --out '{run}' --frames 20 \
        >"$D/ab.stdout" 2>"$D/ab.stderr"
    rc=$?
    cat "$D/ab.stdout" "$D/ab.stderr" >>"$LOG"
    if [[ ! -e $AB_DIR/study.json ]] && grep -q "video module" "$D/ab.stderr"; then
        say "ab: skipped: this fragscope cannot load its video module here ($(grep -m1 'video module' "$D/ab.stderr"))" |
            tee -a "$OUT/summary.txt"
    elif [[ ! -e $AB_DIR/study.json ]]; then
        mismatch "fragscope ab wrote no study (exit $rc; see ab.stderr in details.tar.gz)"
    else
        # The verdicts and the figures behind them, and the time fragscope adds per run.
        python3 - "$AB_DIR/study.json" <<'PY' | tee -a "$LOG" "$OUT/summary.txt"
import json, sys
s = json.load(open(sys.argv[1]))
runs = [r for a in s["arms"] for r in a["runs"]]
print(f"ab: {len(runs)} runs, " + ", ".join(
    f"{r['folder']} exit {r['exit_status']} {r['frames']} frames {r['seconds']:.1f} s"
    for r in runs))
if s.get("problem"):
    print(f"ab: no verdict: {s['problem']}")
nf = s["noise_floor"]
print(f"ab: noise floor over {nf['samples']} frames: identical={nf['identical']} "
      f"psnr_min_db={nf['psnr_min_db']} ssim_min={nf['ssim_min']}")
for c in s["collapses"]:
    arms = ", ".join(f"{k}: bad={v['bad']} psnr={v['psnr_db']} ssim={v['ssim']}"
                     for k, v in c["arms"].items())
    print(f"ab: frame {c['frame']}: {c['verdict']} ({arms}); session: {c['session_verdict']}")
if not s["collapses"]:
    print("ab: the baseline has no collapse (nothing to judge; the study ran end to end)")
sys.exit(1 if s.get("problem") else 0)
PY
        [[ ${PIPESTATUS[0]} -eq 0 ]] || mismatch "the study's baseline cannot be compared (see summary.txt)"
    fi
fi

if ((${#MISMATCHES[@]})); then
    printf 'MISMATCH %s\n' "${MISMATCHES[@]}" >"$OUT/result.txt"
    say "gpu-check: FAILED, ${#MISMATCHES[@]} mismatch(es) (outputs in $OUT)"
    exit 1
fi
echo "OK" >"$OUT/result.txt"
say "gpu-check: OK (outputs in $OUT)"
