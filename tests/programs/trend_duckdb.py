"""A benchmark worker for tests/trend.rs: DuckDB (from PyPI) running two
TPC-H-shaped queries, each ITERATIONS times, every iteration in its own
capture window (`jobprof-record start/stop --query qN_iterK`, asked of the
test's driver: a line on stdout, `ok` back on stdin; run by the driver outside
this process, as a job's benchmark driver runs beside the engine). With
INJECT=1, q1 computes one more expression (the position of 'ab' in a quarter
of the 60-character pads, which is never there: a naive substring search,
whose compare loop is duckdb::FindStrInStr, a named function of the wheel's
stripped library, and memchr: about half of that run's q1 samples), the
injected regression the test must find. Each window runs its query several
times, so that a replicate has about 300 samples at 997 Hz: with under 100 (3
and 24 runs), one stray sample was over a point of the query, and a leaf met
once in each of the four q6 replicates of a run whose q6 did not change was
flagged (+1.9 points). With INJECT=2, q1 changes its plan instead: one
more grouping key, whether the hash of the row's pad is even, hashes every
row (duckdb's string hash) and turns the perfect hash aggregate (small known
key ranges) into a hash aggregate: functions vanish and appear (the plan
change issue 58 describes).

usage: trend_duckdb.py READY ITERATIONS INJECT
"""
import os
import sys
import time

import duckdb

ready, iterations, inject = sys.argv[1:4]

con = duckdb.connect()
# One thread: with two, every short query hands its tasks over with futex
# wake-ups whose cost follows the machine's load, so the kernel's share of
# a run moved with the load (1-3% of q6 between runs on a busy machine).
con.execute("SET threads=1")
con.execute(
    """CREATE TABLE lineitem AS SELECT i AS l_orderkey,
         (i % 50) + 1 AS l_quantity, ((i * 13) % 100000) / 100.0 AS l_extendedprice,
         (i % 11) / 100.0 AS l_discount, (i % 9) / 100.0 AS l_tax,
         chr(CAST(65 + (i % 3) AS INTEGER)) AS l_returnflag,
         chr(CAST(70 + (i % 2) AS INTEGER)) AS l_linestatus,
         DATE '1992-01-01' + CAST(i % 2500 AS INTEGER) AS l_shipdate,
         'c' || (i % 1000) AS l_comment, repeat('a', 60) || (i % 1000) AS l_pad
       FROM range(1000000) t(i)"""
)
EXTRA = (
    ", sum(CASE WHEN l_orderkey % 4 = 0 THEN strpos(l_pad, 'ab') END)"
    if inject == "1"
    else ""
)
GROUP = "1, 2, hash(l_pad) % 2 = 0" if inject == "2" else "1, 2"
QUERIES = {
    # TPC-H Q1's shape: a grouped aggregation over most rows.
    "q1": (
        9,
        "SELECT l_returnflag, l_linestatus, sum(l_quantity),"
        " sum(l_extendedprice * (1 - l_discount)),"
        " sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)), avg(l_discount),"
        " count(*)" + EXTRA + " FROM lineitem WHERE l_shipdate <= DATE '1998-09-01'"
        " GROUP BY " + GROUP + " ORDER BY 1, 2",
    ),
    # TPC-H Q6's shape: a filtered sum; short, so run 96 times per window.
    "q6": (
        96,
        "SELECT sum(l_extendedprice * l_discount) FROM lineitem"
        " WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01'"
        " AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24",
    ),
}

deadline = time.time() + 300
while not os.path.exists(ready):
    if time.time() > deadline:
        sys.exit("the sidecar never became ready")
    time.sleep(0.02)


def driver(*args):
    print(*args, flush=True)
    answer = sys.stdin.readline()
    if answer != "ok\n":
        sys.exit(f"the driver failed {' '.join(args)}: {answer!r}")


for q, (repeat, sql) in QUERIES.items():
    for it in range(1, int(iterations) + 1):
        driver("start", "--query", f"{q}_iter{it}")
        for _ in range(repeat):
            con.execute(sql).fetchall()
        driver("stop", "--query", f"{q}_iter{it}")
driver("shutdown")
