"""A DuckDB worker for benches/job.sh: TPC-H-shaped queries on 8 threads.

Builds lineitem/orders/customer-like tables from range() (no TPC-H extension
offline), then reads query names from the FIFO argv[1], one a line, runs
each and writes its name to argv[2] (appending) when done. `quit` ends it.
A query is repeated until it has run for at least SECONDS (default 1), as
a benchmark's timed iteration would.
Usage: python3 duckdb_worker.py CMD_FIFO DONE_FILE [ROWS] [SECONDS]
"""

import sys
import time

import duckdb

ROWS = int(sys.argv[3]) if len(sys.argv) > 3 else 3_000_000
SECONDS = float(sys.argv[4]) if len(sys.argv) > 4 else 1.0

QUERIES = {
    "q01": """select l_returnflag, l_linestatus, sum(l_quantity), sum(l_extendedprice),
               sum(l_extendedprice * (1 - l_discount)), avg(l_quantity), count(*)
               from lineitem where l_shipdate <= 2400 group by all order by all""",
    "q03": """select l_orderkey, sum(l_extendedprice * (1 - l_discount)) as revenue, o_orderdate
               from customer join orders on c_custkey = o_custkey
               join lineitem on l_orderkey = o_orderkey
               where c_mktsegment = 3 and o_orderdate < 1200 and l_shipdate > 1200
               group by l_orderkey, o_orderdate order by revenue desc limit 10""",
    "q05": """select c_nationkey, sum(l_extendedprice * (1 - l_discount)) as revenue
               from customer join orders on c_custkey = o_custkey
               join lineitem on l_orderkey = o_orderkey
               group by c_nationkey order by revenue desc""",
    "q06": """select sum(l_extendedprice * l_discount) from lineitem
               where l_shipdate between 400 and 800 and l_discount between 0.05 and 0.07
               and l_quantity < 24""",
    "q09": """select o_orderdate % 7 as y, count(distinct l_partkey % 997),
               sum(l_extendedprice) from lineitem join orders on l_orderkey = o_orderkey
               group by y order by y""",
    "q13": """select c_count, count(*) from (select c_custkey, count(o_orderkey) as c_count
               from customer left join orders on c_custkey = o_custkey group by c_custkey)
               group by c_count order by all""",
    "q18": """select o_custkey, o_orderkey, sum(l_quantity) q from orders
               join lineitem on o_orderkey = l_orderkey group by all
               having sum(l_quantity) > 180 order by q desc limit 100""",
    "q21": """select l_suppkey, rank() over (partition by l_suppkey % 50 order by l_extendedprice) r
               from lineitem where l_orderkey % 3 = 0 qualify r = 1 order by all limit 20""",
}


def main():
    con = duckdb.connect()
    con.execute("SET threads=8")
    n = ROWS
    con.execute(
        f"""create table lineitem as select i // 4 as l_orderkey, (i * 7919) % 200000 as l_partkey,
        (i * 31) % 10000 as l_suppkey, (i % 50) + 1 as l_quantity,
        ((i * 13) % 100000) / 10.0 as l_extendedprice, (i % 11) / 100.0 as l_discount,
        (i * 17) % 2500 as l_shipdate, i % 3 as l_returnflag, i % 2 as l_linestatus
        from range({n}) t(i)"""
    )
    con.execute(
        f"""create table orders as select i as o_orderkey, (i * 7) % ({n} // 40) as o_custkey,
        (i * 3) % 2500 as o_orderdate from range({n} // 4) t(i)"""
    )
    con.execute(
        f"""create table customer as select i as c_custkey, i % 25 as c_nationkey,
        i % 5 as c_mktsegment from range({n} // 40) t(i)"""
    )
    with open(sys.argv[2], "a") as done:
        done.write("ready\n")
    while True:
        with open(sys.argv[1]) as cmds:
            for line in cmds:
                q = line.strip()
                if q == "quit":
                    return
                if q in QUERIES:
                    start = time.monotonic()
                    con.execute(QUERIES[q]).fetchall()
                    while time.monotonic() - start < SECONDS:
                        con.execute(QUERIES[q]).fetchall()
                with open(sys.argv[2], "a") as done:
                    done.write(q + "\n")


if __name__ == "__main__":
    main()
