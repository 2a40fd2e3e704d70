"""bench_fleet: `fragscope fleet` throughput, sessions per minute, with 1 and then 2 local Dask
workers on the same simulated sessions (goal: 2 workers >= 1.7x one; exit status 1 when
missed). Prints both figures,
their ratio, the serial CLI run over the same files as a baseline measured in the same run, and
the load average (the machine may be shared: a busy machine lowers the scaling). The machine's own
ceiling is measured in the same run too: the same CLI calls two at a time without Dask (what two
workers could at best reach) and a pure-CPU loop on one and two processes; on a machine whose two
CPUs do not scale (shared cores) no fleet can reach 1.7x, and the ratio to the ceiling says how
much Dask itself loses.

usage: /usr/bin/python3 bench_fleet.py [SESSIONS] [--frames F] [--steps S] [--repeat R]
(FRAGSCOPE_CLI names the fragscope binary; a Release build is the one to time.)
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "app", "python"))

import fragscope_fleet  # noqa: E402

FRAGSCOPE = os.environ.get("FRAGSCOPE_CLI", "fragscope")
CONF = "expandable_segments:True"


def load():
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def fleet_minutes(files, workers):
    """Sessions per minute of one fleet run on a fresh local cluster of `workers` processes;
    the cluster's start is not counted (a long fleet pays it once), the tasks' whole run is."""
    from distributed import Client, LocalCluster
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=None, silence_logs=50) as cluster, \
            Client(cluster) as client:
        client.wait_for_workers(workers)
        start = time.perf_counter()
        rows = fragscope_fleet.run_fleet(client, files, FRAGSCOPE, [CONF])
        seconds = time.perf_counter() - start
    bad = [r for r in rows if r["status"] != "ok"]
    if bad:
        raise SystemExit("bench_fleet: {} rows failed: {}".format(len(bad), bad[0]["error"]))
    return 60.0 * len(files) / seconds


def serial_minutes(files):
    start = time.perf_counter()
    for f in files:
        fragscope_fleet.analyse_file(f, FRAGSCOPE, (CONF,))
    return 60.0 * len(files) / (time.perf_counter() - start)


def parallel_minutes(files, n):
    """The CLI on the files n at a time, without Dask: the most n workers could reach."""
    from concurrent.futures import ThreadPoolExecutor
    start = time.perf_counter()
    with ThreadPoolExecutor(n) as pool:
        list(pool.map(lambda f: fragscope_fleet.analyse_file(f, FRAGSCOPE, (CONF,)), files))
    return 60.0 * len(files) / (time.perf_counter() - start)


SPIN = "x = 0\nfor i in range(4_000_000):\n    x += i * i\n"


def spin_scaling():
    """A pure-CPU loop, 4 runs on one process after another, then on two processes at once:
    the machine's scaling from one CPU to two for work that shares nothing."""
    def batch(parallel):
        start = time.perf_counter()
        for _ in range(4 // parallel):
            procs = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(parallel)]
            for q in procs:
                q.wait()
        return time.perf_counter() - start
    return batch(1) / batch(2)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("sessions", nargs="?", type=int, default=40)
    p.add_argument("--frames", type=int, default=24)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--repeat", type=int, default=3, help="runs per configuration (median)")
    a = p.parse_args()
    work = tempfile.mkdtemp(prefix="bench_fleet-")
    try:
        files = []
        for i in range(a.sessions):
            path = os.path.join(work, "run{:03d}.fragscope".format(i))
            subprocess.run([FRAGSCOPE, "simulate", "-o", path, "--frames", str(a.frames),
                            "--steps", str(a.steps), "--seed", str(i + 1)],
                           check=True, capture_output=True)
            files.append(path)
        print("bench_fleet: {} simulated sessions ({} frames x {} steps), report + whatif {} "
              "each; {} CPUs; {}".format(a.sessions, a.frames, a.steps, CONF, os.cpu_count(),
                                         load()), flush=True)
        serial_minutes(files[:4])  # not timed: the binary, its libraries and files in cache
        base = serial_minutes(files)
        print("baseline, the CLI on each file in turn (no Dask): {:.1f} sessions/min; {}".format(
            base, load()), flush=True)
        par = parallel_minutes(files, 2)
        spin = spin_scaling()
        print("ceiling, the same CLI calls two at a time (no Dask): {:.1f} sessions/min, {:.2f}x "
              "the serial run; a pure-CPU loop on two processes: {:.2f}x one; {}".format(
                  par, par / base, spin, load()), flush=True)
        one, two = [], []
        for r in range(a.repeat):  # interleaved, so that a change in load hits both
            one.append(fleet_minutes(files, 1))
            two.append(fleet_minutes(files, 2))
            print("run {}: 1 worker {:.1f}, 2 workers {:.1f} sessions/min; {}".format(
                r + 1, one[-1], two[-1], load()), flush=True)
        m1, m2 = statistics.median(one), statistics.median(two)
        print("fleet throughput (median of {}): 1 worker {:.1f} sessions/min, 2 workers {:.1f} "
              "sessions/min, ratio {:.2f}x (goal >= 1.7x); {}".format(a.repeat, m1, m2, m2 / m1,
                                                                      load()))
        print("against the ceiling: 2 workers reach {:.0%} of the CLI two at a time; the "
              "machine scales {:.2f}x from one CPU to two".format(m2 / par, spin))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if m2 / m1 < 1.7:
        raise SystemExit("bench_fleet: goal missed: 2 workers {:.2f}x one (goal >= 1.7x)".format(
            m2 / m1))


if __name__ == "__main__":
    main()
