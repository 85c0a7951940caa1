"""polars (Rust, rayon pool, v0-mangled symbols, jemalloc) for
tests/engines.rs: a group-by, a sort, a join and regex string work on a
4-thread pool, each in its own capture window (see engine_driver.py)."""
import os

import engine_driver

os.environ["POLARS_MAX_THREADS"] = str(engine_driver.THREADS)
import polars as pl  # noqa: E402 (the pool size is read at import)

N = 400_000
df = pl.DataFrame(
    {
        "k": [i % 1000 for i in range(N)],
        "v": [(i * 7919) % 100_003 for i in range(N)],
        "s": [f"item-{i % 5000}-{(i * 31) % 977}" for i in range(N)],
    }
)
dim = pl.DataFrame({"k": list(range(1000)), "w": [i * 3 for i in range(1000)]})
assert pl.thread_pool_size() == engine_driver.THREADS

engine_driver.run(
    [
        ("q1", lambda: df.group_by("k").agg(pl.col("v").sum().alias("s"), pl.col("v").mean().alias("m"), pl.len())),
        ("q2", lambda: df.sort(["v", "k"])),
        ("q3", lambda: df.join(dim, on="k").group_by("w").agg(pl.col("v").max())),
        (
            "q4",
            lambda: df.select(
                pl.col("s").str.contains(r"-4[0-9]+-9").sum().alias("hits"),
                pl.col("s").str.replace_all(r"[0-9]+", "#").str.len_bytes().sum().alias("bytes"),
            ),
        ),
    ]
)
