"""DataFusion (Rust, tokio, stripped to .dynsym) for tests/engines.rs: a
group-by, a sort, a join and a window query in SQL on 4 partitions and a
4-thread runtime, each in its own capture window (see engine_driver.py)."""
import os

import engine_driver

# tokio's runtime reads its worker count from here when it is built.
os.environ["TOKIO_WORKER_THREADS"] = str(engine_driver.THREADS)
import datafusion  # noqa: E402
import pyarrow as pa  # noqa: E402

N = 400_000
ctx = datafusion.SessionContext(
    datafusion.SessionConfig().with_target_partitions(engine_driver.THREADS)
)
t = pa.table(
    {
        "k": [i % 1000 for i in range(N)],
        "v": [(i * 7919) % 100_003 for i in range(N)],
        "s": [f"item-{i % 5000}" for i in range(N)],
    }
)
ctx.register_record_batches("t", [t.to_batches(max_chunksize=N // 8)])
ctx.register_record_batches(
    "dim", [pa.table({"k": list(range(1000)), "w": [i * 3 for i in range(1000)]}).to_batches()]
)


def sql(text):
    return lambda: ctx.sql(text).collect()


engine_driver.run(
    [
        ("q1", sql("SELECT k, sum(v), avg(v), count(*) FROM t GROUP BY k")),
        ("q2", sql("SELECT k, v FROM t ORDER BY v, k")),
        ("q3", sql("SELECT w, max(v) FROM t JOIN dim ON t.k = dim.k GROUP BY w")),
        (
            "q4",
            sql(
                "SELECT max(r) FROM (SELECT row_number() OVER "
                "(PARTITION BY k ORDER BY v) AS r FROM t)"
            ),
        ),
    ]
)
