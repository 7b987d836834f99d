#!/usr/bin/env python3
"""DuckDB's or chDB's side of `tessera bench --suite sysbench`: one engine per process.

Argument: a JSON object from the Rust side (crates/cli/src/sysbench.rs) with engine
("duckdb" | "chdb"), parquet (the generated sbtest file), dir (a scratch directory for the
engine's database, removed by the caller), table_size, seed, workloads, concurrency (list),
duration (seconds per workload and concurrency), range_size, insert_batch, templates
({workload: SQL text with {a} / {b}}), threads (per query), vcpus.

The table is loaded from the Parquet file: DuckDB into a database file with PRIMARY KEY (id)
(an ART index), chDB into `MergeTree ORDER BY id` (then OPTIMIZE FINAL, as Tessera merges its
parts). Then, as on the Rust side: read workloads at every concurrency, then `insert` at every
concurrency; one warm-up statement per read workload; clients are threads of this process
(DuckDB: a cursor each; chDB: one session shared, the only way it runs in one process;
its query condition cache is off, or `scan` would skip every granule after the first run);
each statement's time is the engine call and fetching its answer. Answers are checked (rows
per range, one row per point, scan counts 0): a wrong one exits with status 1.
Prints {version, load_seconds, results: [...]} (fields as WorkloadResult in sysbench.rs).
"""

import json
import math
import os
import random
import resource
import sys
import threading
import time


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def nearest_rank(sorted_times, p):
    if not sorted_times:
        return math.nan
    i = min(max(math.ceil(p / 100 * len(sorted_times)), 1), len(sorted_times)) - 1
    return sorted_times[i]


class DuckDB:
    def __init__(self, spec):
        import duckdb
        self.version = duckdb.__version__
        os.makedirs(spec["dir"], exist_ok=True)
        self.con = duckdb.connect(os.path.join(spec["dir"], "sbtest.duckdb"))
        self.con.execute(f"SET threads = {int(spec['threads'])}")
        self.local = threading.local()

    def load(self, parquet):
        self.con.execute("CREATE TABLE sbtest (id UBIGINT PRIMARY KEY, k UINTEGER NOT NULL, c VARCHAR NOT NULL, "
                         "pad VARCHAR NOT NULL)")
        self.con.execute(f"INSERT INTO sbtest SELECT id, k, c, pad FROM read_parquet('{parquet}')")
        self.con.execute("CHECKPOINT")

    def rows(self, sql):
        """Runs sql; returns its rows as a list of tuples."""
        cur = getattr(self.local, "cur", None)
        if cur is None:
            cur = self.local.cur = self.con.cursor()
        return cur.execute(sql).fetchall()

    def run(self, sql):
        cur = getattr(self.local, "cur", None)
        if cur is None:
            cur = self.local.cur = self.con.cursor()
        cur.execute(sql)


class ChDB:
    def __init__(self, spec):
        import chdb
        from chdb import session
        self.version = chdb.__version__
        self.s = session.Session(os.path.join(spec["dir"], "chdb"))
        self.threads = int(spec["threads"])

    def load(self, parquet):
        self.s.query("CREATE TABLE sbtest (id UInt64, k UInt32, c String, pad String) ENGINE = MergeTree ORDER BY id")
        self.s.query(f"INSERT INTO sbtest SELECT id, k, c, pad FROM file('{parquet}', Parquet)")
        self.s.query("OPTIMIZE TABLE sbtest FINAL")

    def rows(self, sql):
        # The query condition cache (ClickHouse 25.3+, on by default) remembers the granules a
        # WHERE matched no row in and skips them the next time: `scan` would read nothing.
        settings = f"max_threads = {self.threads}, use_query_condition_cache = 0"
        out = self.s.query(f"{sql} SETTINGS {settings}", "TabSeparated").bytes()
        return [tuple(line.split(b"\t")) for line in out.split(b"\n") if line]

    def run(self, sql):
        self.s.query(sql)


def read_statement(workload, t, rnd, n, span):
    if workload == "point_select":
        return t.replace("{a}", str(rnd.randint(1, n))), 1
    if workload == "scan":
        return t, 1
    span = min(span, n)
    a = rnd.randint(1, n - span + 1)
    return t.replace("{a}", str(a)).replace("{b}", str(a + span - 1)), 1 if workload == "sum_ranges" else span


def check(workload, sql, rows, want):
    if len(rows) != want:
        sys.exit(f"sysbench {workload}: {sql} returned {len(rows)} rows, expected {want}")
    if workload == "scan" and int(rows[0][0]) != 0:
        sys.exit(f"sysbench scan: {sql} counted {rows[0][0]} rows, expected 0")


def clients(concurrency, duration, step):
    """Runs `concurrency` threads calling step(client, n) -> (seconds, rows) for `duration`."""
    out = [None] * concurrency
    errors = []
    start = time.perf_counter()

    def client(i):
        times, rows, n = [], 0, 0
        try:
            while time.perf_counter() - start < duration and not errors:
                t, r = step(i, n)
                times.append(t)
                rows += r
                n += 1
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)
        out[i] = (times, rows)

    c0 = cpu()
    ts = [threading.Thread(target=client, args=(i,)) for i in range(concurrency)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall, cpus = time.perf_counter() - start, cpu() - c0
    if errors:
        raise errors[0]
    times = sorted(t for o in out for t in o[0])
    return times, sum(o[1] for o in out), wall, cpus


def result(engine, workload, c, vcpus, times, rows, wall, cpus):
    return {
        "engine": engine, "workload": workload, "concurrency": c,
        "subscription": "under-subscribed" if c < vcpus else "fully-subscribed",
        "queries": len(times), "wall_seconds": wall, "qps": len(times) / wall, "rows_per_second": rows / wall,
        "p50_seconds": nearest_rank(times, 50), "p90_seconds": nearest_rank(times, 90),
        "p99_seconds": nearest_rank(times, 99), "max_seconds": times[-1] if times else math.nan,
        "cpu_percent": 100 * cpus / wall,
    }


def main():
    spec = json.loads(sys.argv[1])
    engine = {"duckdb": DuckDB, "chdb": ChDB}[spec["engine"]](spec)
    name, n, span, vcpus = spec["engine"], int(spec["table_size"]), int(spec["range_size"]), int(spec["vcpus"])
    t0 = time.perf_counter()
    engine.load(spec["parquet"])
    load_seconds = time.perf_counter() - t0
    results = []
    reads = [w for w in spec["workloads"] if w != "insert"]
    for c in spec["concurrency"]:
        for w in reads:
            t = spec["templates"][w]
            sql, want = read_statement(w, t, random.Random(spec["seed"]), n, span)
            check(w, sql, engine.rows(sql), want)  # warm-up

            def step(client, k, w=w, t=t):
                sql, want = read_statement(w, t, random.Random(hash((spec["seed"], client, k))), n, span)
                t0 = time.perf_counter()
                rows = engine.rows(sql)
                secs = time.perf_counter() - t0
                check(w, sql, rows, want)
                return secs, n if w == "scan" else len(rows)

            r = result(name, w, c, vcpus, *clients(c, spec["duration"], step))
            print(f"{name} {w} c={c}: {r['qps']:.1f} QPS p99 {r['p99_seconds'] * 1e3:.3f} ms", file=sys.stderr)
            results.append(r)
    if "insert" in spec["workloads"]:
        batch = int(spec["insert_batch"])
        rnd = random.Random(spec["seed"] ^ 0x1A5E47)
        digits = lambda groups: "-".join("".join(rnd.choice("0123456789") for _ in range(11)) for _ in range(groups))
        pool = [(digits(10), digits(5)) for _ in range(batch)]
        head = spec["templates"]["insert"]
        lock = threading.Lock()
        next_id = [n + 1]
        for c in spec["concurrency"]:
            def step(client, k):
                with lock:
                    first = next_id[0]
                    next_id[0] += batch
                r = random.Random(hash((spec["seed"], first)))
                sql = head + ",".join(f"({first + i},{r.randint(1, n)},'{cv}','{pv}')" for i, (cv, pv) in enumerate(pool))
                t0 = time.perf_counter()
                engine.run(sql)
                return time.perf_counter() - t0, batch

            r = result(name, "insert", c, vcpus, *clients(c, spec["duration"], step))
            print(f"{name} insert c={c}: {r['qps']:.1f} QPS ({r['rows_per_second']:.0f} rows/s)", file=sys.stderr)
            results.append(r)
        want = next_id[0] - 1
        got = [int(v) for v in engine.rows("SELECT COUNT(*), COUNT(DISTINCT id), MAX(id) FROM sbtest")[0]]
        if got != [want, want, want]:
            sys.exit(f"sysbench insert: COUNT(*), COUNT(DISTINCT id), MAX(id) = {got}, expected {want} each")
    print(json.dumps({"version": engine.version, "load_seconds": load_seconds, "results": results}))


if __name__ == "__main__":
    main()
