"""Velox (pyvelox 0.2.0: a 274 MB libvelox.so with only .dynsym, folly
thread pools, deep templates) for tests/engines.rs: a group-by, a sort, a
hash join and string functions, each plan on 4 drivers over in-memory
vectors made by Arrow (pyvelox 0.2.0's data generator fails; Arrow arrays
with an offset are refused, so each batch is its own), each query in its
own capture window (see engine_driver.py)."""
import engine_driver
import pyarrow as pa
from pyvelox.arrow import to_velox
from pyvelox.plan_builder import PlanBuilder
from pyvelox.runner import LocalRunner

N = 400_000
BATCHES = 8


def batch(lo, hi):
    r = range(lo, hi)
    return to_velox(
        pa.record_batch(
            {
                "k": pa.array([i % 1000 for i in r], pa.int64()),
                "v": pa.array([(i * 7919) % 100_003 for i in r], pa.int64()),
                "s": pa.array([f"item-{i % 5000}-{(i * 31) % 977}" for i in r]),
            }
        )
    )


t = [batch(i, i + N // BATCHES) for i in range(0, N, N // BATCHES)]
dim = to_velox(
    pa.record_batch(
        {
            "dk": pa.array(range(1000), pa.int64()),
            "w": pa.array([i * 3 for i in range(1000)], pa.int64()),
        }
    )
)


def run(plan):
    for _ in LocalRunner(plan.get_plan_node()).execute(max_drivers=engine_driver.THREADS):
        pass


def q3():
    b = PlanBuilder()
    build = b.new_builder().values([dim]).get_plan_node()
    run(b.values(t).hash_join(["k"], ["dk"], build, ["w", "v"]).aggregate(["w"], ["max(v)"]))


engine_driver.run(
    [
        ("q1", lambda: run(PlanBuilder().values(t).aggregate(["k"], ["sum(v)", "avg(v)", "count(v)"]))),
        ("q2", lambda: run(PlanBuilder().values(t).order_by(["v", "k"]))),
        ("q3", q3),
        (
            "q4",
            lambda: run(
                PlanBuilder()
                .values(t)
                .project(["length(regexp_replace(upper(s), '[0-9]+', '#')) AS l"])
                .aggregate([], ["sum(l)"])
            ),
        ),
    ]
)
