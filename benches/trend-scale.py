#!/usr/bin/env python3
"""Synthetic series for `jobprof trend` at scale (docs/trend.md#scale):
RUNS result directories of QUERIES queries x WORKERS workers x REPS
iterations, every capture a processed capture's files (capture.json from the
demo fixture, an empty perf.data, a stacks.folded of 1,500 stacks over 400
functions, 3-28 frames deep; 20 distinct files hard-linked, so the tree
takes little disk). With FOLDED_FROM, every stacks.folded under that
directory (e.g. real captures) is used instead of the 20 synthetic files.

usage: benches/trend-scale.py OUT [RUNS QUERIES WORKERS REPS [FOLDED_FROM]]
then:  /usr/bin/time -v jobprof trend OUT/run_* -o OUT-trend -q
       (benches/trend.sh does both, and times it against an older build)
"""
import os
import random
import shutil
import sys

out = sys.argv[1]
runs, queries, workers, reps = (int(a) for a in (sys.argv[2:6] or [100, 22, 8, 1]))
folded_from = sys.argv[6] if len(sys.argv) > 6 else None
random.seed(1)
repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
capture_json = os.path.join(
    repo, "fixtures/result_dir_demo/profiles/perf/worker_0/q01/capture.json"
)
src = os.path.join(out, ".src")
os.makedirs(src, exist_ok=True)
funcs = [f"ns::Class{i}::method{i}" for i in range(400)]
files = []
if folded_from:
    for top, _, names in sorted(os.walk(folded_from)):
        if "stacks.folded" in names:
            path = os.path.join(src, f"f{len(files)}.folded")
            shutil.copyfile(os.path.join(top, "stacks.folded"), path)
            files.append(path)
    if not files:
        sys.exit(f"{folded_from}: no stacks.folded under it")
for k in range(0 if folded_from else 20):
    lines = {}
    for _ in range(1500):
        st = ["worker"] + [random.choice(funcs[:40]) for _ in range(3)]
        st += [random.choice(funcs) for _ in range(random.randint(0, 25))]
        key = ";".join(st)
        lines[key] = lines.get(key, 0) + random.randint(1, 50) * 1001001
    path = os.path.join(src, f"f{k}.folded")
    with open(path, "w") as f:
        for s, c in lines.items():
            f.write(f"{s} {c}\n")
    files.append(path)
empty = os.path.join(src, "perf.data")
open(empty, "w").close()
for r in range(runs):
    for w in range(workers):
        for q in range(queries):
            for it in range(1, reps + 1):
                name = f"q{q:02d}_iter{it}" if reps > 1 else f"q{q:02d}"
                d = os.path.join(out, f"run_{r:03d}/profiles/perf/worker_{w}/{name}")
                os.makedirs(d, exist_ok=True)
                os.link(random.choice(files), os.path.join(d, "stacks.folded"))
                os.link(capture_json, os.path.join(d, "capture.json"))
                os.link(empty, os.path.join(d, "perf.data"))
print(runs * queries * workers * reps, "captures under", out)
