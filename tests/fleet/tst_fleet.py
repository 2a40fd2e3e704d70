"""tst_fleet: `fragscope fleet` (app/python/fragscope_fleet.py) on a local Dask cluster.

Forty small simulated sessions: two local workers give exactly the figures of running the CLI on
each file in turn; a corrupt file is a row with its error while the other 39 complete; a worker
killed during the run loses nothing, and the rows it held say they were rescheduled. Each test
starts its own local cluster and stops it. Runs with Debian's /usr/bin/python3 (the one that sees
python3-distributed); skips when Dask is missing, fails instead when CI is set.
"""

import collections
import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "app", "python"))

import fragscope_fleet  # noqa: E402

FRAGSCOPE = os.environ.get("FRAGSCOPE_CLI", "fragscope")
CONFS = ["expandable_segments:True", "max_split_size_mb:128"]
# Three devices: roomy (healthy), tight (OOMs and collapses), very tight.
CAPACITIES = ["85899345920", "40000000000", "30000000000"]
RUNS = 40

try:
    import distributed  # noqa: F401
    HAVE_DASK = True
except ImportError:
    HAVE_DASK = False


def cli(*args, check=True):
    env = dict(os.environ, FRAGSCOPE_NO_PROGRESS="1")
    p = subprocess.run([FRAGSCOPE] + list(args), capture_output=True, text=True, env=env,
                       timeout=600, check=False)
    if check and p.returncode != 0:
        raise AssertionError("fragscope {} failed ({}): {}".format(" ".join(args), p.returncode,
                                                                   p.stderr))
    return p


def serial_figures(path):
    """What the CLI says about one file, run by hand: the figures a fleet row must equal, read
    here independently of the fleet's own code."""
    rep = json.loads(cli("report", path, "--json").stdout)
    tracks = rep["tracks"]
    wi = json.loads(cli("whatif", path, "--json", *sum([["--alloc-conf", c] for c in CONFS],
                                                       [])).stdout)
    runs = wi["runs"]
    # The first run is the replay under the recorded settings, then one per --alloc-conf.
    assert runs[0]["recorded_settings"], "whatif's first run should be the recorded settings"

    def peak(run):
        return max(d["peak_reserved_bytes"] for d in run["devices"].values())

    def ooms(run):
        return sum(d["ooms"] for d in run["devices"].values())

    return {
        "peak_reserved_bytes": max(t["peak_reserved_bytes"] for t in tracks),
        "max_fragmentation_ratio": max(t["max_fragmentation_ratio"] for t in tracks),
        "devices": len({t["device"] for t in tracks}),
        "events": rep["events"],
        "frames": len(rep["frames"]),
        "collapses": len(rep["collapses"]),
        "ooms": len(rep["ooms"]),
        "oom_causes": collections.Counter(o["cause"] for o in rep["ooms"]),
        "replay": (peak(runs[0]), ooms(runs[0])),
        "settings": [(r["alloc_conf"], peak(r), ooms(r)) for r in runs[1:]],
    }


def row_figures(row):
    causes = collections.Counter()
    for part in filter(None, row["oom_causes"].split(";")):
        k, n = part.split("=")
        causes[k] = int(n)
    return {
        "peak_reserved_bytes": row["peak_reserved_bytes"],
        "max_fragmentation_ratio": row["max_fragmentation_ratio"],
        "devices": row["devices"],
        "events": row["events"],
        "frames": row["frames"],
        "collapses": row["collapses"],
        "ooms": row["ooms"],
        "oom_causes": causes,
        "replay": (row["replay_peak_reserved_bytes"], row["replay_ooms"]),
        "settings": [(s["alloc_conf"], s["peak_reserved_bytes"], s["ooms"])
                     for s in row["settings"]],
    }


@unittest.skipUnless(HAVE_DASK or os.environ.get("CI"),
                     "Dask distributed is missing: apt-get install python3-distributed")
class TestFleet(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tst_fleet-")
        cls.files = []
        for i in range(RUNS):
            path = os.path.join(cls.dir, "run{:02d}.fragscope".format(i))
            cli("simulate", "-o", path, "--frames", "3", "--steps", "1", "--seed", str(i + 1),
                "--capacity", CAPACITIES[i % len(CAPACITIES)])
            cls.files.append(path)
        cls.serial = {f: serial_figures(f) for f in cls.files}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def assert_row_matches(self, row):
        self.assertEqual(row["status"], "ok", row.get("error"))
        self.assertEqual(row_figures(row), self.serial[row["file"]], row["file"])

    def test_cli_two_workers_equal_serial(self):
        out = os.path.join(self.dir, "fleet.json")
        p = cli("fleet", self.dir, "--workers", "2", "--alloc-conf", CONFS[0], "--alloc-conf",
                CONFS[1], "-o", out)
        # Progress as tasks finish: one line per file.
        progress = re.findall(r"^\[(\d+)/{}\] ".format(RUNS), p.stderr, re.M)
        self.assertEqual([int(k) for k in progress], list(range(1, RUNS + 1)), p.stderr)
        with open(out) as f:
            table = json.load(f)
        rows = table["runs"]
        self.assertEqual([r["file"] for r in rows], self.files)  # a folder, in name order
        for r in rows:
            self.assert_row_matches(r)
        self.assertEqual(len({r["worker"] for r in rows}), 2, "both workers took tasks")
        # The fleet report, against the serial figures: runs by outcome and the best setting.
        rep = table["fleet"]
        want = collections.Counter()
        for s in self.serial.values():
            c, o = s["collapses"] > 0, s["ooms"] > 0
            want["collapsed_and_oom" if c and o else "collapsed" if c else "oom" if o
                 else "healthy"] += 1
        self.assertEqual({k: v for k, v in rep["by_outcome"].items() if v}, dict(want))
        self.assertGreater(want["collapsed_and_oom"] + want["collapsed"], 0)
        helped = collections.Counter()
        for s in self.serial.values():
            bp, bo = s["replay"]
            for conf, peak, ooms in s["settings"]:
                helped[conf] += ooms < bo or (ooms == bo and peak < bp)
        best = max(CONFS, key=lambda c: helped[c])
        self.assertEqual(rep["best_setting"], best if helped[best] else None)
        self.assertEqual({s["alloc_conf"]: s["helps"] for s in rep["settings"]}, dict(helped))
        self.assertIn("Setting that helps the most runs", p.stdout)
        self.assertEqual(rep["workers"], 2)

    def test_corrupt_file_and_killed_worker_lose_nothing(self):
        from distributed import Client, LocalCluster
        files = list(self.files[:RUNS - 1])
        bad = os.path.join(self.dir, "corrupt.fragscope")
        with open(bad, "wb") as f:
            f.write(b"SQLite format 3\0" + b"\xff" * 4000)
        files.insert(RUNS // 2, bad)
        killed = []
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                          dashboard_address=None, silence_logs=50) as cluster, \
                Client(cluster) as client:
            pids = client.run(os.getpid)

            def on_row(row, done, total):
                # At the first result, SIGKILL the other worker: it is busy with a task.
                if killed:
                    return
                victim = next(a for a in pids if a != row.get("worker"))
                os.kill(pids[victim], signal.SIGKILL)
                killed.append(victim)

            rows = fragscope_fleet.run_fleet(client, files, FRAGSCOPE, CONFS, None, on_row)
        self.assertEqual(len(killed), 1)
        self.assertEqual([r["file"] for r in rows], files)
        errors = [r for r in rows if r["status"] != "ok"]
        self.assertEqual(len(errors), 1)
        self.assertEqual(errors[0]["file"], bad)
        self.assertIn("corrupt.fragscope", errors[0]["error"])  # names the file
        for r in rows:
            if r["file"] != bad:
                self.assert_row_matches(r)
        rescheduled = [r for r in rows if r["attempts"] > 1]
        self.assertGreater(len(rescheduled), 0, "the killed worker's task was rescheduled")
        for r in rescheduled:
            self.assertIn("rescheduled", r["note"])
        rep = fragscope_fleet.fleet_report(rows, CONFS)
        self.assertEqual(rep["failed"], 1)
        self.assertEqual(rep["analysed"], RUNS - 1)
        self.assertEqual(rep["rescheduled_runs"], len(rescheduled))

    def test_csv_and_missing_file(self):
        out = os.path.join(self.dir, "fleet.csv")
        missing = os.path.join(self.dir, "missing.pickle")
        p = cli("fleet", self.files[0], missing, "--workers", "1", "--quiet", "-o", out,
                check=False)
        self.assertEqual(p.returncode, 2, p.stderr)  # a file failed: its row says why
        self.assertNotIn("[1/2]", p.stderr)  # --quiet: no progress
        with open(out) as f:
            rows = list(csv.DictReader(f))
        self.assertEqual([r["file"] for r in rows], [self.files[0], missing])
        self.assertEqual(rows[0]["status"], "ok")
        self.assertEqual(int(rows[0]["peak_reserved_bytes"]),
                         self.serial[self.files[0]]["peak_reserved_bytes"])
        self.assertEqual(rows[1]["status"], "error")
        self.assertIn("missing.pickle: no such file", rows[1]["error"])


class TestFleetFigures(unittest.TestCase):
    """Known answers for the row and the fleet report, on hand-made CLI outputs."""

    def test_row_from_report(self):
        rep = {
            "synthetic": False, "events": 10,
            "tracks": [{"device": 0, "peak_reserved_bytes": 100, "max_fragmentation_ratio": 0.5},
                       {"device": 0, "peak_reserved_bytes": 300, "max_fragmentation_ratio": 0.2},
                       {"device": 1, "peak_reserved_bytes": 200, "max_fragmentation_ratio": 0.7}],
            "frames": [{}, {}, {}],
            "collapses": [
                {"collapse": {"first_frame": 4},
                 "verdict": {"allocator_related": True, "mechanism": "workspace_fallback"},
                 "precursors": [{"kind": "region_released", "background": False},
                                {"kind": "graph_launch", "background": True}]},
                {"collapse": {"first_frame": 9},
                 "verdict": {"allocator_related": False, "mechanism": None},
                 "precursors": [{"kind": "oom", "background": False}]}],
            "ooms": [{"cause": "fragmentation"}, {"cause": "capacity"},
                     {"cause": "fragmentation"}],
        }
        f = fragscope_fleet._report_figures(rep)
        # Peak and max F: the largest over tracks (300 B on device 0's second track; F 0.7);
        # devices: 0 and 1. Background precursors left out; causes counted, most first.
        self.assertEqual(f["peak_reserved_bytes"], 300)
        self.assertEqual(f["max_fragmentation_ratio"], 0.7)
        self.assertEqual(f["devices"], 2)
        self.assertEqual(f["collapses"], 2)
        self.assertEqual(f["collapse_frames"], "4;9")
        self.assertEqual(f["precursor_kinds"], "oom;region_released")
        self.assertEqual(f["oom_causes"], "fragmentation=2;capacity=1")
        self.assertEqual(f["verdicts"],
                         "allocator_related:workspace_fallback=1;no_allocator_precursor=1")

    def test_fleet_report_counts_help(self):
        # Run a: the setting removes OOMs (3 -> 0); run b: same OOMs (0), lower peak; run c:
        # higher peak: no help; run d: failed. Best: the setting, helping 2 runs.
        conf = "expandable_segments:True"
        rows = [
            {"status": "ok", "collapses": 1, "ooms": 3, "precursor_kinds": "oom;split",
             "replay_peak_reserved_bytes": 100, "replay_ooms": 3,
             "settings": [{"alloc_conf": conf, "peak_reserved_bytes": 120, "ooms": 0}]},
            {"status": "ok", "collapses": 1, "ooms": 0, "precursor_kinds": "split",
             "replay_peak_reserved_bytes": 100, "replay_ooms": 0,
             "settings": [{"alloc_conf": conf, "peak_reserved_bytes": 90, "ooms": 0}]},
            {"status": "ok", "collapses": 0, "ooms": 0, "precursor_kinds": "",
             "replay_peak_reserved_bytes": 100, "replay_ooms": 0, "attempts": 2,
             "settings": [{"alloc_conf": conf, "peak_reserved_bytes": 110, "ooms": 0}]},
            {"status": "error", "error": "x: bad"},
        ]
        rep = fragscope_fleet.fleet_report(rows, [conf])
        self.assertEqual(rep["by_outcome"], {"healthy": 1, "collapsed": 1, "oom": 0,
                                             "collapsed_and_oom": 1, "error": 1})
        self.assertEqual(rep["precursor_kinds"], [{"kind": "split", "runs": 2},
                                                  {"kind": "oom", "runs": 1}])
        self.assertEqual(rep["settings"], [{"alloc_conf": conf, "runs": 3, "helps": 2,
                                            "removes_ooms": 1, "lowers_peak_reserved": 1}])
        self.assertEqual(rep["best_setting"], conf)
        self.assertEqual(rep["rescheduled_runs"], 1)


class TestFleetCommand(unittest.TestCase):
    """The C++ CLI's side: help and usage without starting a cluster."""

    def test_help_and_usage(self):
        p = cli("fleet", "--help")
        self.assertIn("--scheduler ADDRESS", p.stdout)
        self.assertIn("docs/fleet.md", p.stdout)
        self.assertEqual(cli("fleet", check=False).returncode, 64)
        self.assertEqual(cli("fleet", "x.fragscope", check=False).returncode, 64)  # no -o
        p = cli("fleet", "x.fragscope", "-o", "out.txt", check=False)
        self.assertEqual(p.returncode, 64)  # the script's own check: .csv or .json
        self.assertIn("-o must name a .csv or .json file", p.stderr)
        p = cli("fleet", "x.fragscope", "-o", "o.csv", "--workers", "2", "--scheduler",
                "tcp://127.0.0.1:1", check=False)
        self.assertEqual(p.returncode, 64)


if __name__ == "__main__":
    unittest.main()
