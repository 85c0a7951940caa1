#!/usr/bin/env python3
"""A big Nsight Systems export to time `jobprof process --slice-by` on:
W NVTX ranges `q` (one per query), S CPU samples in each with a chain of D
frames (200 x 1000 x 12 by default: 200,000 samples, 2.4 M chain rows,
100 MB), in the schema of tests/nsys/profiles.rs. Writes DIR/big.sqlite and
the placeholder DIR/big.nsys-rep the export stands beside.

  python3 benches/gen-nsys-slices.py DIR [W S D]
  /usr/bin/time -f '%e s %M KiB' jobprof process DIR/big.nsys-rep --slice-by nvtx:q
"""
import os
import sqlite3
import sys

here = os.path.dirname(os.path.abspath(__file__))
src = open(os.path.join(here, "..", "tests", "nsys", "profiles.rs")).read()
start = src.index('pub(super) const SCHEMA: &str = "') + len('pub(super) const SCHEMA: &str = "')
schema = src[start:src.index('";', start)]

out = sys.argv[1]
W, S, D = (int(x) for x in (sys.argv[2:5] if len(sys.argv) >= 5 else (200, 1000, 12)))
os.makedirs(out, exist_ok=True)
path = os.path.join(out, "big.sqlite")
if os.path.exists(path):
    os.remove(path)
MAIN = (77 << 24) | 77
db = sqlite3.connect(path)
db.executescript(schema)
db.execute("INSERT INTO EXPORT_META_DATA VALUES ('EXPORT_PRODUCT_VERSION', '2024.1.1.59'),"
           " ('EXPORT_SCHEMA_VERSION', '3.11.1')")
db.executemany("INSERT INTO StringIds VALUES (?, ?)",
               [(i, f"fn{i}") for i in range(200)] + [(1000, "/opt/app/engine")])
db.execute("INSERT INTO PROCESSES VALUES (?, 77, '/opt/app/engine')", (77 << 24,))
events, chains, ranges, sid = [], [], [], 0
for w in range(W):
    t0 = w * 1_000_000
    ranges.append((t0, t0 + 900_000, 59, "q", MAIN, 0))
    for k in range(S):
        sid += 1
        events.append((sid, t0 + k * (900_000 // S), 0, 1, MAIN, 1))
        chains.extend((sid, (sid * 7 + d * 13) % 200, 1000, None, None, d) for d in range(D))
db.executemany("INSERT INTO COMPOSITE_EVENTS VALUES (?, ?, ?, ?, ?, ?)", events)
db.executemany("INSERT INTO SAMPLING_CALLCHAINS (id, symbol, module, kernelMode, unresolved,"
               " stackDepth) VALUES (?, ?, ?, ?, ?, ?)", chains)
db.executemany("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId)"
               " VALUES (?, ?, ?, ?, ?, ?)", ranges)
db.commit()
open(os.path.join(out, "big.nsys-rep"), "w").write("the export beside it is read\n")
print(f"{path}: {len(events)} samples, {len(chains)} chain rows, {W} ranges")
