"""pyarrow (Arrow C++ compute and Acero, full symbol tables) for
tests/engines.rs: a group-by, a sort, a hash join and string kernels on a
4-thread pool, each in its own capture window (see engine_driver.py)."""
import engine_driver
import pyarrow as pa
import pyarrow.compute as pc

pa.set_cpu_count(engine_driver.THREADS)
pa.set_io_thread_count(engine_driver.THREADS)

N = 400_000
t = pa.table(
    {
        "k": [i % 1000 for i in range(N)],
        "v": [(i * 7919) % 100_003 for i in range(N)],
        "s": [f"item-{i % 5000}-{(i * 31) % 977}" for i in range(N)],
    }
)
dim = pa.table({"k": list(range(1000)), "w": [i * 3 for i in range(1000)]})

engine_driver.run(
    [
        ("q1", lambda: t.group_by("k").aggregate([("v", "sum"), ("v", "mean"), ("v", "count")])),
        ("q2", lambda: t.sort_by([("v", "ascending"), ("k", "ascending")])),
        ("q3", lambda: t.join(dim, "k").group_by("w").aggregate([("v", "max")])),
        (
            "q4",
            lambda: pc.sum(
                pc.utf8_length(pc.replace_substring_regex(pc.utf8_upper(t["s"]), "[0-9]+", "#"))
            ),
        ),
    ]
)
