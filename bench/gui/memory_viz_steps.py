#!/usr/bin/env python3
"""The Python half of memory_viz's trace plot, timed step by step: a baseline for
bench_gui_open_trace.

`python -m torch.cuda._memory_viz trace_plot SNAPSHOT -o OUT.html` (torch/cuda/_memory_viz.py:
main, trace_plot, _format_viz) loads the snapshot with pickle.load, pickles it again, pads it to
a multiple of 3 bytes, base64-encodes it, embeds that in a JSON list in an HTML page and writes
the page. The browser then decodes the base64, unpickles it in JavaScript, processes the trace
and draws. This script does the Python steps with the standard library (torch need not be
installed, and its import is not counted); the browser's half cannot be timed here, so the total
is a lower bound of memory_viz's time to its first picture.

  memory_viz_steps.py SNAPSHOT OUT.html
prints one JSON object: seconds per step and in all.
"""
import base64
import json
import pickle
import sys
import time


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    clock = time.perf_counter
    t = [clock()]
    with open(sys.argv[1], "rb") as f:
        data = pickle.load(f)
    t.append(clock())
    buffer = pickle.dumps(data)
    buffer += b"\0" * (3 - len(buffer) % 3)
    t.append(clock())
    encoded = base64.b64encode(buffer).decode("utf-8")
    t.append(clock())
    page = json.dumps([{"name": "snapshot.pickle", "base64": encoded}])
    t.append(clock())
    with open(sys.argv[2], "w") as f:
        f.write("<!DOCTYPE html><html><body><script type=\"module\">const local_files = "
                + page + "</script></body></html>\n")
    t.append(clock())
    steps = ["pickle_load", "pickle_dumps", "base64", "json", "write_html"]
    out = {s + "_s": round(t[i + 1] - t[i], 3) for i, s in enumerate(steps)}
    out["total_s"] = round(t[-1] - t[0], 3)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
