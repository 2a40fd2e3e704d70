"""fragscope fleet: analyse many sessions and snapshots on a Dask cluster (docs/fleet.md).

Each file is one Dask task that runs the fragscope CLI on a worker: ``fragscope report --json``
and, with ``--alloc-conf``, ``fragscope whatif --json`` under those settings (snapshots and
traces are imported first, into the worker's temporary folder). The C++ engine does the work;
Dask only schedules it: a local cluster by default (``--workers N``), or an existing cluster
(``--scheduler ADDRESS``) whose workers can read the files (shared storage) and run the same
fragscope. The results are gathered into one table (CSV or JSON) and a short fleet report.

A file that fails is a row with its error, never a lost run. A worker that dies mid-task is
Dask's business: the scheduler gives the task to another worker (up to
``distributed.scheduler.allowed-failures`` times), and the row says it was rescheduled.

Run it as ``fragscope fleet …`` (the C++ CLI runs this file with Debian's /usr/bin/python3, which
sees python3-distributed) or ``/usr/bin/python3 fragscope_fleet.py …``. Tests and benchmarks
import it and call :func:`run_fleet` with their own client.
"""

import argparse
import collections
import csv
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

__all__ = ["analyse_file", "collect_inputs", "run_fleet", "fleet_report", "main"]

# Input files a folder contributes (anything else given by name is tried too).
INPUT_SUFFIXES = (".fragscope", ".pickle", ".pkl", ".pt.trace.json", ".pt.trace.json.gz",
                  ".sqlite")

OUTCOMES = ("healthy", "collapsed", "oom", "collapsed_and_oom", "error")


def collect_inputs(paths):
    """Files named, plus the input files under folders named (sorted, recursive)."""
    out = []
    for p in paths:
        if os.path.isdir(p):
            found = []
            for root, dirs, files in os.walk(p):
                dirs.sort()
                for f in sorted(files):
                    if f.endswith(INPUT_SUFFIXES):
                        found.append(os.path.join(root, f))
            out.extend(found)
        else:
            out.append(p)
    return out


def _run(cmd, timeout):
    env = dict(os.environ, FRAGSCOPE_NO_PROGRESS="1")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                          check=False)


def _failure(what, proc):
    lines = [l for l in (proc.stderr or "").splitlines() if l.strip()]
    why = lines[-1] if lines else "no message"
    return "{} exited with status {}: {}".format(what, proc.returncode, why)


def _count(items):
    """'a=2;b=1' (most frequent first, then by name)."""
    c = collections.Counter(items)
    return ";".join("{}={}".format(k, n) for k, n in sorted(c.items(), key=lambda x: (-x[1], x[0])))


def _verdict(c):
    """A collapse's verdict as a short label: allocator_related[:MECHANISM] or
    no_allocator_precursor (docs/analysis.md "Verdict"); None when the report gives none."""
    v = c.get("verdict")
    if v is None:
        return None
    if isinstance(v, dict):
        if "allocator_related" in v:
            if not v["allocator_related"]:
                return "no_allocator_precursor"
            return "allocator_related" + (":" + v["mechanism"] if v.get("mechanism") else "")
        return v.get("headline") or json.dumps(v, sort_keys=True)
    return str(v)


def _report_figures(rep):
    """The figures a fleet row keeps from one `report --json` (all of them the engine's)."""
    tracks = rep.get("tracks", [])
    collapses = rep.get("collapses", [])
    ooms = rep.get("ooms", [])
    kinds = set()
    for c in collapses:
        for p in c.get("precursors", []):
            if not p.get("background", False) and p.get("kind"):
                kinds.add(p["kind"])
    verdicts = [v for v in (_verdict(c) for c in collapses) if v is not None]
    return {
        "synthetic": bool(rep.get("synthetic", False)),
        "devices": len({t.get("device") for t in tracks}),
        "events": rep.get("events", 0),
        # The busiest track's: a session may hold a driver and a framework level per device.
        "peak_reserved_bytes": max((int(t.get("peak_reserved_bytes", 0)) for t in tracks),
                                   default=0),
        "max_fragmentation_ratio": max((float(t.get("max_fragmentation_ratio", 0.0))
                                        for t in tracks), default=0.0),
        "frames": len(rep.get("frames", [])),
        "collapses": len(collapses),
        "collapse_frames": ";".join(str(c.get("collapse", {}).get("first_frame", c.get("frame")))
                                    for c in collapses),
        "verdicts": _count(verdicts),
        "precursor_kinds": ";".join(sorted(kinds)),
        "ooms": len(ooms),
        "oom_causes": _count(o.get("cause", "unknown") for o in ooms),
    }


def _run_figures(run):
    devices = run.get("devices", {}) or {}
    return {
        "peak_reserved_bytes": max((int(d.get("peak_reserved_bytes", 0))
                                    for d in devices.values()), default=0),
        "ooms": sum(int(d.get("ooms", 0)) for d in devices.values()),
    }


def _whatif_figures(wi, confs):
    """Replay under the recorded settings, then one entry per --alloc-conf, in order."""
    runs = wi.get("runs", [])
    base = next((r for r in runs if r.get("recorded_settings")), runs[0] if runs else {})
    settings = []
    others = [r for r in runs if r is not base]
    for i, conf in enumerate(confs):
        r = next((x for x in others if x.get("alloc_conf") == conf),
                 others[i] if i < len(others) else None)
        entry = {"alloc_conf": conf}
        entry.update(_run_figures(r) if r else {"peak_reserved_bytes": None, "ooms": None})
        settings.append(entry)
    return _run_figures(base), settings


def analyse_file(path, fragscope="fragscope", alloc_confs=(), timeout=None):
    """One task: the fragscope CLI on one file, on whichever worker runs it. Never raises for a
    bad file: the row carries the error."""
    started = time.time()
    row = {"file": path, "status": "ok", "error": "", "host": socket.gethostname()}
    try:
        from distributed import get_worker
        row["worker"] = get_worker().address
    except Exception:  # run outside a worker (serial use, tests)
        row["worker"] = ""
    tmp = None
    try:
        session = path
        if not os.path.exists(path):
            raise RuntimeError("{}: no such file".format(path))
        if not path.endswith(".fragscope"):
            tmp = tempfile.mkdtemp(prefix="fragscope-fleet-")
            session = os.path.join(tmp, os.path.basename(path) + ".fragscope")
            p = _run([fragscope, "import", path, "-o", session, "--no-index", "--quiet"], timeout)
            if p.returncode != 0:
                raise RuntimeError(_failure("fragscope import", p))
        p = _run([fragscope, "report", session, "--json", "--quiet"], timeout)
        if p.returncode != 0:
            raise RuntimeError(_failure("fragscope report", p))
        row.update(_report_figures(json.loads(p.stdout)))
        if alloc_confs:
            cmd = [fragscope, "whatif", session, "--json"]
            for c in alloc_confs:
                cmd += ["--alloc-conf", c]
            p = _run(cmd, timeout)
            if p.returncode != 0:
                row["whatif_error"] = _failure("fragscope whatif", p)
            else:
                base, settings = _whatif_figures(json.loads(p.stdout), list(alloc_confs))
                row["replay_peak_reserved_bytes"] = base["peak_reserved_bytes"]
                row["replay_ooms"] = base["ooms"]
                row["settings"] = settings
    except subprocess.TimeoutExpired as e:
        row["status"] = "error"
        row["error"] = "{}: timed out after {} s ({})".format(path, e.timeout, e.cmd[1])
    except (RuntimeError, OSError, ValueError) as e:
        row["status"] = "error"
        row["error"] = str(e)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    row["seconds"] = round(time.time() - started, 3)
    return row


def outcome(row):
    if row.get("status") != "ok":
        return "error"
    c, o = row.get("collapses", 0) > 0, row.get("ooms", 0) > 0
    return "collapsed_and_oom" if c and o else "collapsed" if c else "oom" if o else "healthy"


def _helps(base_peak, base_ooms, s):
    """A setting helps a run when it removes OOMs (fewer than the recorded settings' replay) or,
    with no more OOMs, lowers peak reserved: model against model (docs/whatif.md)."""
    if s.get("ooms") is None or base_ooms is None:
        return None
    if s["ooms"] < base_ooms:
        return "removes_ooms"
    if s["ooms"] == base_ooms and s["peak_reserved_bytes"] < base_peak:
        return "lowers_peak"
    return None


def fleet_report(rows, alloc_confs, seconds=None, workers=None):
    """The fleet's short report: runs by outcome, the most common precursor kinds among the
    collapsed runs, the setting that helps the most runs, and retries."""
    by_outcome = collections.Counter(outcome(r) for r in rows)
    collapsed = [r for r in rows if r.get("status") == "ok" and r.get("collapses", 0) > 0]
    kinds = collections.Counter()
    for r in collapsed:
        for k in filter(None, r.get("precursor_kinds", "").split(";")):
            kinds[k] += 1
    settings = []
    for conf in alloc_confs:
        removes = lowers = tried = 0
        for r in rows:
            for s in r.get("settings", []):
                if s["alloc_conf"] != conf:
                    continue
                tried += 1
                h = _helps(r.get("replay_peak_reserved_bytes"), r.get("replay_ooms"), s)
                removes += h == "removes_ooms"
                lowers += h == "lowers_peak"
        settings.append({"alloc_conf": conf, "runs": tried, "helps": removes + lowers,
                         "removes_ooms": removes, "lowers_peak_reserved": lowers})
    best = max(settings, key=lambda s: (s["helps"], s["removes_ooms"]), default=None)
    rep = {
        "runs": len(rows),
        "analysed": sum(1 for r in rows if r.get("status") == "ok"),
        "failed": by_outcome.get("error", 0),
        "by_outcome": {k: by_outcome.get(k, 0) for k in OUTCOMES},
        "collapsed_runs": len(collapsed),
        "precursor_kinds": [{"kind": k, "runs": n}
                            for k, n in sorted(kinds.items(), key=lambda x: (-x[1], x[0]))],
        "settings": settings,
        "best_setting": best["alloc_conf"] if best and best["helps"] > 0 else None,
        "rescheduled_runs": sum(1 for r in rows if r.get("attempts", 1) > 1),
    }
    if seconds is not None:
        rep["seconds"] = round(seconds, 3)
        rep["runs_per_minute"] = round(60.0 * len(rows) / seconds, 3) if seconds > 0 else None
    if workers is not None:
        rep["workers"] = workers
    return rep


def report_text(rep):
    out = []
    head = "fragscope fleet: {} runs ({} analysed, {} failed)".format(
        rep["runs"], rep["analysed"], rep["failed"])
    if "seconds" in rep:
        head += " in {:.1f} s".format(rep["seconds"])
        if rep.get("workers"):
            head += " on {} workers".format(rep["workers"])
        if rep.get("runs_per_minute"):
            head += ": {:.1f} runs/min".format(rep["runs_per_minute"])
    out.append(head)
    out.append("Runs by outcome: " + ", ".join(
        "{} {}".format(k.replace("_", " "), n) for k, n in rep["by_outcome"].items()))
    if rep["collapsed_runs"]:
        out.append("Most common precursor kinds among the {} collapsed runs: {}".format(
            rep["collapsed_runs"], ", ".join(
                "{} ({} run{})".format(p["kind"], p["runs"], "" if p["runs"] == 1 else "s")
                for p in rep["precursor_kinds"][:5])
            or "none"))
    for s in rep["settings"]:
        out.append("Setting {}: helps {} of {} runs (removes OOMs in {}, lowers peak reserved in "
                   "{}), against each run's replay under its recorded settings".format(
                       s["alloc_conf"], s["helps"], s["runs"], s["removes_ooms"],
                       s["lowers_peak_reserved"]))
    if rep["settings"]:
        out.append("Setting that helps the most runs: {}".format(rep["best_setting"] or "none"))
    if rep["rescheduled_runs"]:
        out.append("Rescheduled after a worker died (Dask's retry): {} runs".format(
            rep["rescheduled_runs"]))
    return "\n".join(out)


def _suspicious(dask_scheduler, keys):
    """Times each task was on a worker that died (Dask's own count, TaskState.suspicious)."""
    return {k: (dask_scheduler.tasks[k].suspicious if k in dask_scheduler.tasks else 0)
            for k in keys}


def _picklable_by_value():
    # Workers of an existing cluster need not have this module: send its functions by value.
    try:
        import cloudpickle
        mod = sys.modules.get(__name__)
        if __name__ != "__main__" and mod is not None:
            cloudpickle.register_pickle_by_value(mod)
    except (ImportError, AttributeError, ValueError):
        pass


def run_fleet(client, files, fragscope, alloc_confs=(), timeout=None, on_row=None):
    """Submits one task per file to client and returns the rows in the files' order. on_row(row,
    done, total) is called as each task finishes (progress); each row's attempts and rescheduling
    note are filled in once the last has finished."""
    from distributed import as_completed
    _picklable_by_value()
    futures = {}
    for i, f in enumerate(files):
        key = "fragscope-fleet-{}-{}".format(i, os.path.basename(f))
        fut = client.submit(analyse_file, f, fragscope, tuple(alloc_confs), timeout, key=key,
                            pure=False)
        futures[fut] = i
    rows = [None] * len(files)
    done = 0
    for fut in as_completed(list(futures)):
        i = futures[fut]
        try:
            row = fut.result()
        except Exception as e:  # KilledWorker after too many deaths, or a lost connection
            row = {"file": files[i], "status": "error", "worker": "", "host": "",
                   "error": "{}: the task failed on the cluster: {}: {}".format(
                       files[i], type(e).__name__, e)}
        rows[i] = row
        done += 1
        if on_row:
            on_row(row, done, len(files))
    # Reschedules, asked once for every task (the futures still hold them on the scheduler): a
    # question per task cost a round trip to the scheduler each, a fifth of a short task's time.
    try:
        suspicious = client.run_on_scheduler(_suspicious, keys=[f.key for f in futures])
    except Exception:
        suspicious = {}
    for fut, i in futures.items():
        n = suspicious.get(fut.key, 0)
        rows[i]["attempts"] = 1 + n
        if n:
            rows[i]["note"] = ("rescheduled {} time(s): a worker died while it held the task "
                               "(Dask's retry)".format(n))
        fut.release()
    return rows


BASE_COLUMNS = ["file", "status", "error", "attempts", "note", "worker", "host", "seconds",
                "synthetic", "devices", "events", "peak_reserved_bytes",
                "max_fragmentation_ratio", "frames", "collapses", "collapse_frames", "verdicts",
                "precursor_kinds", "ooms", "oom_causes", "replay_peak_reserved_bytes",
                "replay_ooms", "whatif_error"]


def write_csv(path, rows, alloc_confs):
    cols = list(BASE_COLUMNS)
    for c in alloc_confs:
        cols += ["{} peak_reserved_bytes".format(c), "{} ooms".format(c)]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            flat = dict(r)
            for s in r.get("settings", []):
                flat["{} peak_reserved_bytes".format(s["alloc_conf"])] = s["peak_reserved_bytes"]
                flat["{} ooms".format(s["alloc_conf"])] = s["ooms"]
            w.writerow(flat)


def write_json(path, rows, rep):
    with open(path, "w") as f:
        json.dump({"schema": "fragscope-fleet", "version": 1, "fleet": rep, "runs": rows}, f,
                  indent=1)
        f.write("\n")


def _default_fragscope():
    return os.environ.get("FRAGSCOPE_BIN") or shutil.which("fragscope") or "fragscope"


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="fragscope fleet",
        description="Analyse many sessions and snapshots on a Dask cluster: one task per file "
                    "runs `fragscope report --json` (and `whatif` under each --alloc-conf) on a "
                    "worker; the results are gathered into one table and a fleet report.",
        epilog="Exit status: 0 every file analysed, 2 some files failed (each is a row with its "
               "error), 1 the cluster failed, 64 usage error. docs/fleet.md explains how to start "
               "a Dask scheduler and workers on a cluster.")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="session, snapshot or trace files, or folders (searched for " +
                        ", ".join(INPUT_SUFFIXES) + ")")
    p.add_argument("-o", "--output", required=True, metavar="OUT.csv|OUT.json",
                   help="the table to write: CSV or JSON, by the extension")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="local cluster of N worker processes, one task at a time each "
                        "(default: the CPU count)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="an existing Dask scheduler (tcp://host:8786) instead of a local "
                        "cluster; its workers must read the files and run fragscope")
    p.add_argument("--alloc-conf", action="append", default=[], metavar="CONF",
                   help="also replay each run under this PYTORCH_CUDA_ALLOC_CONF (repeatable)")
    p.add_argument("--fragscope", default=_default_fragscope(), metavar="BIN",
                   help="the fragscope binary the workers run (default: the one that started "
                        "this command, else fragscope on PATH)")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="give up on a file after this long (a row with the error)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    a = p.parse_args(argv)
    if not a.output.endswith((".csv", ".json")):
        p.error("-o must name a .csv or .json file")
    if a.workers is not None and a.workers < 1:
        p.error("--workers must be at least 1")
    if a.workers is not None and a.scheduler:
        p.error("--workers makes a local cluster; --scheduler uses an existing one: not both")
    return a


def main(argv=None):
    try:
        a = parse_args(sys.argv[1:] if argv is None else argv)
    except SystemExit as e:
        return 64 if e.code not in (0, None) else 0
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        print("fragscope fleet: needs Dask distributed (Debian: apt-get install "
              "python3-distributed) for {}".format(sys.executable), file=sys.stderr)
        return 1
    # Absolute: the workers of a cluster run elsewhere, and see shared storage at the same paths.
    files = [os.path.abspath(f) for f in collect_inputs(a.paths)]
    if not files:
        print("fragscope fleet: no input files in {}".format(" ".join(a.paths)), file=sys.stderr)
        return 64
    started = time.time()

    def progress(row, done, total):
        if a.quiet:
            return
        what = row["error"] if row["status"] != "ok" else "{}, {} collapses, {} OOMs".format(
            outcome(row).replace("_", " "), row.get("collapses", 0), row.get("ooms", 0))
        print("[{}/{}] {}: {}".format(done, total, row["file"], what), file=sys.stderr,
              flush=True)

    cluster = None
    try:
        if a.scheduler:
            client = Client(a.scheduler, timeout="30s")
        else:
            n = a.workers or os.cpu_count() or 1
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                   dashboard_address=None, silence_logs=40)
            client = Client(cluster)
        with client:
            rows = run_fleet(client, files, a.fragscope, a.alloc_conf, a.timeout, progress)
            workers = len(client.scheduler_info().get("workers", {})) or len(
                {r.get("worker") for r in rows if r.get("worker")})
    except OSError as e:
        print("fragscope fleet: cannot reach the Dask scheduler {}: {}".format(
            a.scheduler or "(local)", e), file=sys.stderr)
        return 1
    finally:
        if cluster is not None:
            cluster.close()
    rep = fleet_report(rows, a.alloc_conf, time.time() - started, workers)
    if a.output.endswith(".json"):
        write_json(a.output, rows, rep)
    else:
        write_csv(a.output, rows, a.alloc_conf)
    print(report_text(rep))
    print("Table: {}".format(a.output))
    return 2 if rep["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
