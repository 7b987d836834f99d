#!/usr/bin/env python3
"""Tessera vs DuckDB vs chDB vs DataFusion on the same ClickBench `hits` Parquet file, in one run.

Each engine runs in its own subprocess, one after the other, with the same methodology
(ClickBench's): load the table first (load time reported apart), then per query one
warm-up run followed by --runs timed runs; mean, min and median per query; the total is
the sum of the means. Peak memory is each child's own VmHWM (/proc/self/status), read by
the child at its end: `tessera bench` reports it as peak_rss_bytes, the Python children
read it the same way.

Answers are checked: Tessera's (and chDB's) result of each query is compared with
DuckDB's, allowing for rows that tie on the ORDER BY key at the LIMIT boundary.

Throughput mode (`--mode throughput --concurrency 1,2 --duration 20`): after the load and
one warm-up run per query, N client threads of the same process share one database (one
DuckDB connection with a cursor per client, one chDB session, one Tessera `Database` via
`tessera bench --mode throughput`) and send the queries round robin until the duration
is over; QPS = queries completed / wall seconds, with latency p50/p90/p99.

DataFusion (the `datafusion` Python bindings) loads the file into an in-memory table (`CREATE
TABLE hits AS SELECT * FROM` the registered Parquet file) with `target_partitions` = threads
and identifier normalization off (the official queries spell columns in CamelCase,
unquoted); a query DataFusion rejects is listed as unsupported for it. No throughput mode
for DataFusion.

See benches/README.md. Python 3.11, stdlib + `duckdb` + `chdb` + `datafusion`
(pip install duckdb chdb datafusion).
"""

from __future__ import annotations

import argparse
import collections
import csv
import datetime as dt
import decimal
import io
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
QUERIES_FILE = REPO / "datasets" / "clickbench" / "queries.sql"
ENGINES = ("tessera", "duckdb", "chdb", "datafusion")
PEERS = ENGINES[1:]
LABEL = {"tessera": "Tessera", "duckdb": "DuckDB", "chdb": "chDB", "datafusion": "DataFusion"}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------
# Shared helpers (parent and children)
# --------------------------------------------------------------------------------------


def vm_hwm_bytes() -> int:
    """Peak resident set size of this process (VmHWM), bytes; 0 where unknown."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def parse_query_list(spec: str) -> list[int]:
    """ "19,33,34", "1-43" or "1..43" (ranges inclusive) -> query numbers, in order."""
    out: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        m = re.fullmatch(r"(\d+)\s*(?:-|\.\.)\s*(\d+)", part)
        if m:
            lo, hi = int(m.group(1)), int(m.group(2))
            if lo > hi:
                raise ValueError(part)
            out.extend(range(lo, hi + 1))
        else:
            out.append(int(part))
    return out


def load_queries() -> list[str]:
    with open(QUERIES_FILE) as f:
        return [line.strip() for line in f if line.strip()]


def strip_semicolon(sql: str) -> str:
    return sql.strip().rstrip(";").rstrip()


def percentile(sorted_times: list[float], p: float) -> float:
    """Nearest-rank percentile (as `tessera bench --mode throughput`)."""
    if not sorted_times:
        return float("nan")
    i = min(max(int(-(-p / 100 * len(sorted_times) // 1)), 1), len(sorted_times)) - 1
    return sorted_times[i]


def throughput_runs(run_query, sqls: list[str], concurrency: list[int], duration: float, cursor_factory) -> list:
    """QPS of `sqls` sent round robin by N client threads for `duration` seconds, for each
    N in `concurrency`. `cursor_factory()` gives each client its own handle;
    `run_query(handle, sql)` runs one query to completion."""
    out = []
    for n in concurrency:
        lock = threading.Lock()
        state = {"next": 0, "error": None}
        lat: list[list[float]] = [[] for _ in sqls]
        start = time.perf_counter()

        def client():
            h = cursor_factory()
            while True:
                with lock:
                    if state["error"] or time.perf_counter() - start >= duration:
                        return
                    i = state["next"]
                    state["next"] += 1
                q = i % len(sqls)
                t = time.perf_counter()
                try:
                    run_query(h, sqls[q])
                except Exception as ex:  # stop the run, report the first error
                    with lock:
                        state["error"] = ex
                    return
                with lock:
                    lat[q].append(time.perf_counter() - t)

        threads = [threading.Thread(target=client) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - start
        if state["error"]:
            raise state["error"]
        allt = sorted(x for l in lat for x in l)
        out.append({"concurrency": n, "wall_seconds": wall, "completed": len(allt), "qps": len(allt) / wall,
                    "p50_seconds": percentile(allt, 50), "p90_seconds": percentile(allt, 90),
                    "p99_seconds": percentile(allt, 99)})
        log(f"  concurrency {n}: {len(allt)} queries in {wall:.2f} s = {len(allt) / wall:.2f} QPS")
    return out


def summarize(times: list[float]) -> dict:
    return {
        "times_seconds": times,
        "mean_seconds": sum(times) / len(times),
        "min_seconds": min(times),
        "median_seconds": statistics.median(times),
    }


_TS_RE = re.compile(r"^(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d)(\.\d*)?(Z|[+-]\d\d:?\d\d)?$")


def norm_value(v) -> str:
    """Canonical text of one result value, so that Python objects (DuckDB) and CSV text
    (Tessera, chDB) compare: integers exactly, floats to 6 significant digits, timestamps
    as 'YYYY-MM-DD HH:MM:SS[.frac]', NULL as '' (CSV cannot tell NULL from '')."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, (float, decimal.Decimal)):
        return _norm_float(float(v))
    if isinstance(v, dt.datetime):
        return _norm_ts(v.isoformat(sep=" "))
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).decode("utf-8", "replace")
    s = str(v)
    if s in ("true", "false"):
        return "1" if s == "true" else "0"
    if re.fullmatch(r"[+-]?\d+", s):
        return str(int(s))
    if re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[+-]?(inf|nan)", s, re.I):
        return _norm_float(float(s))
    if _TS_RE.match(s):
        return _norm_ts(s)
    return s


def _as_float_text(s: str) -> str:
    """A value of a column the reference answers as float, normalized as a float."""
    try:
        return _norm_float(float(s))
    except ValueError:
        return s


def _norm_float(x: float) -> str:
    if x != x:
        return "nan"
    if x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.6g}"


def _norm_ts(s: str) -> str:
    m = _TS_RE.match(s)
    if not m:
        return s
    frac = (m.group(3) or "").rstrip("0")
    if frac == ".":
        frac = ""
    return f"{m.group(1)} {m.group(2)}{frac}"


def norm_rows(rows) -> list[list[str]]:
    return [[norm_value(v) for v in r] for r in rows]


def parse_csv_rows(text: str, header: bool) -> list[list[str]]:
    rows = list(csv.reader(io.StringIO(text)))
    if header and rows:
        rows = rows[1:]
    return rows


# --------------------------------------------------------------------------------------
# Children: each engine runs in its own process
# --------------------------------------------------------------------------------------


def parquet_kind_duckdb(con, path: str) -> dict:
    """How the file stores EventTime/EventDate/strings: the generated file stores
    TIMESTAMP/DATE/UTF8; the official hits.parquet stores Int64 seconds, UInt16 days and
    bare BINARY strings."""
    cols = con.execute(
        "DESCRIBE SELECT * FROM read_parquet(?, binary_as_string = true)", [path]
    ).fetchall()
    types = {c[0]: c[1].upper() for c in cols}
    return {
        "columns": len(cols),
        "event_time_int": "INT" in types.get("EventTime", ""),
        "event_date_int": "INT" in types.get("EventDate", ""),
    }


def sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


# Seconds each engine's process waits between its load and its first query, as `tessera
# bench` does after loading (SETTLE_SECONDS in crates/cli/src/bench.rs: the first heavy
# query right after a load of gigabytes ran up to 2x slower on the 2-vCPU VM).
SETTLE_SECONDS = 2


def settle() -> None:
    time.sleep(SETTLE_SECONDS)


def child_duckdb(args) -> dict:
    import duckdb

    baseline = vm_hwm_bytes()
    con = duckdb.connect(":memory:")
    con.execute(f"SET threads = {args.threads}")
    kind = parquet_kind_duckdb(con, args.file)
    replace = []
    if kind["event_time_int"]:
        replace.append("make_timestamp(EventTime::BIGINT * 1000000) AS EventTime")
    if kind["event_date_int"]:
        replace.append("(DATE '1970-01-01' + EventDate::INTEGER) AS EventDate")
    star = "*" + (f" REPLACE ({', '.join(replace)})" if replace else "")
    load_sql = (
        f"CREATE TABLE hits AS SELECT {star} FROM read_parquet({sql_str(args.file)}, binary_as_string = true)"
    )
    t = time.perf_counter()
    con.execute(load_sql)
    load_seconds = time.perf_counter() - t
    table_rows = con.execute("SELECT COUNT(*) FROM hits").fetchone()[0]
    log(f"[duckdb] loaded {table_rows} rows x {kind['columns']} columns in {load_seconds:.2f} s")
    settle()

    all_sql = load_queries()
    results = []
    for q in args.query_list:
        sql = strip_semicolon(all_sql[q - 1])
        cur = con.execute(sql)
        rows = cur.fetchall()  # warm-up; its answer is the one checked
        columns = [d[0] for d in cur.description]
        times = []
        for _ in range(args.runs):
            t = time.perf_counter()
            con.execute(sql).fetchall()
            times.append(time.perf_counter() - t)
        r = {"query": q, "sql": sql, "result_rows": len(rows), **summarize(times)}
        r["columns"] = columns
        r["rows"] = norm_rows(rows)
        # Columns DuckDB answers as floats: the other engines' CSV text of them is read as a
        # float too (ClickHouse prints 2.529459191942271e18 as 2529459191942271000, which
        # would otherwise compare as an integer).
        r["float_columns"] = [i for i in range(len(columns))
                              if any(isinstance(row[i], float) for row in rows)]
        # Untimed probe for ties at the LIMIT boundary: the same query with one more row
        # on each side of the window.
        lim = parse_limit(sql)
        if lim is not None:
            limit, offset = lim
            lo = max(offset - 1, 0)
            probe_sql = LIMIT_RE.sub("", sql) + f" LIMIT {limit + 2} OFFSET {lo}"
            r["probe"] = {"offset": lo, "rows": norm_rows(con.execute(probe_sql).fetchall())}
        log(f"[duckdb] Q{q:<3} mean {r['mean_seconds']:.4f} s  min {r['min_seconds']:.4f} s  rows {len(rows)}")
        results.append(r)
    tp = None
    if args.mode == "throughput":
        sqls = [strip_semicolon(all_sql[q - 1]) for q in args.query_list]
        log(f"[duckdb] throughput: concurrency {args.concurrency}, {args.duration} s each")
        tp = throughput_runs(lambda cur, sql: cur.execute(sql).fetchall(), sqls,
                             [int(x) for x in args.concurrency.split(",")], args.duration, con.cursor)
    return {
        "throughput": tp,
        "engine": "duckdb",
        "version": duckdb.__version__,
        "load_method": "in-memory database; CREATE TABLE hits AS SELECT * FROM read_parquet(FILE) (all columns)",
        "load_seconds": load_seconds,
        "table_rows": table_rows,
        "queries": results,
        "baseline_rss_bytes": baseline,
        "peak_rss_bytes": vm_hwm_bytes(),
    }


def child_datafusion(args) -> dict:
    import datafusion
    from datafusion import SessionConfig, SessionContext

    baseline = vm_hwm_bytes()
    cfg = (
        SessionConfig()
        .with_target_partitions(args.threads)
        .set("datafusion.sql_parser.enable_ident_normalization", "false")
        .set("datafusion.execution.parquet.binary_as_string", "true")
    )
    ctx = SessionContext(cfg)
    ctx.register_parquet("hits_file", args.file)
    fields = ctx.table("hits_file").schema()
    cols = []
    for f in fields:
        t = str(f.type)
        if f.name == "EventTime" and t.startswith(("int", "uint")):
            cols.append('to_timestamp_seconds("EventTime") AS "EventTime"')
        elif f.name == "EventDate" and t.startswith(("int", "uint")):
            cols.append('CAST(CAST("EventDate" AS INT) AS DATE) AS "EventDate"')
        else:
            cols.append(f'"{f.name}"')
    t = time.perf_counter()
    ctx.sql(f"CREATE TABLE hits AS SELECT {', '.join(cols)} FROM hits_file").collect()
    load_seconds = time.perf_counter() - t
    table_rows = ctx.sql("SELECT COUNT(*) AS c FROM hits").to_pylist()[0]["c"]
    log(f"[datafusion] loaded {table_rows} rows x {len(cols)} columns in {load_seconds:.2f} s")
    settle()

    def rows_of(sql):
        df = ctx.sql(sql)
        names = df.schema().names
        return names, [[r[n] for n in names] for r in df.to_pylist()]

    all_sql = load_queries()
    results, unsupported = [], {}
    for q in args.query_list:
        sql = strip_semicolon(all_sql[q - 1])
        try:
            columns, rows = rows_of(sql)  # warm-up; its answer is the one checked
        except Exception as ex:  # planning or execution error: not comparable
            unsupported[str(q)] = f"DataFusion: {str(ex).splitlines()[0][:200]}"
            log(f"[datafusion] Q{q:<3} unsupported: {unsupported[str(q)]}")
            continue
        times = []
        for _ in range(args.runs):
            t = time.perf_counter()
            ctx.sql(sql).collect()
            times.append(time.perf_counter() - t)
        r = {"query": q, "sql": sql, "result_rows": len(rows), **summarize(times)}
        r["columns"] = columns
        r["rows"] = norm_rows(rows)
        log(f"[datafusion] Q{q:<3} mean {r['mean_seconds']:.4f} s  min {r['min_seconds']:.4f} s  rows {len(rows)}")
        results.append(r)
    if args.mode == "throughput":
        log("[datafusion] no throughput mode: latency runs only")
    return {
        "throughput": None,
        "engine": "datafusion",
        "version": datafusion.__version__,
        "load_method": "in-memory table; CREATE TABLE hits AS SELECT * FROM the registered Parquet file (all columns)",
        "load_seconds": load_seconds,
        "table_rows": table_rows,
        "queries": results,
        "unsupported": unsupported,
        "baseline_rss_bytes": baseline,
        "peak_rss_bytes": vm_hwm_bytes(),
    }


def child_chdb(args) -> dict:
    from chdb import session as chs
    import chdb

    baseline = vm_hwm_bytes()
    tmp = tempfile.mkdtemp(prefix="compare-chdb-")
    sess = chs.Session(tmp)
    try:

        def q(sql: str, fmt: str = "CSV") -> str:
            res = sess.query(sql, fmt)
            if hasattr(res, "has_error") and res.has_error():
                raise RuntimeError(res.error_message())
            return bytes(res.bytes()).decode("utf-8", "replace")

        ch_version = q("SELECT version()", "TSV").strip()
        desc = parse_csv_rows(q(f"DESCRIBE file({sql_str(args.file)}, Parquet)", "CSVWithNames"), header=True)
        types = {r[0]: r[1] for r in desc}
        replace = []
        if "Int" in types.get("EventTime", "") and "DateTime" not in types.get("EventTime", ""):
            replace.append("toDateTime(EventTime, 'UTC') AS EventTime")
        if "Int" in types.get("EventDate", ""):
            replace.append("toDate(EventDate) AS EventDate")
        star = "*" + (f" REPLACE ({', '.join(replace)})" if replace else "")
        if args.chdb_engine == "mergetree":
            engine = "MergeTree ORDER BY tuple()"
        else:
            engine = "Memory"
        load_sql = (
            f"CREATE TABLE hits ENGINE = {engine} AS SELECT {star} FROM file({sql_str(args.file)}, Parquet) "
            f"SETTINGS max_threads = {args.threads}, max_insert_threads = {args.threads}"
        )
        t = time.perf_counter()
        q(load_sql)
        insert_seconds = time.perf_counter() - t
        optimize_seconds = 0.0
        if args.chdb_engine == "mergetree":
            # Merge the inserted parts now, so that no background merge runs while queries
            # are timed; counted in the load time.
            t = time.perf_counter()
            q(f"OPTIMIZE TABLE hits FINAL SETTINGS max_threads = {args.threads}")
            optimize_seconds = time.perf_counter() - t
        load_seconds = insert_seconds + optimize_seconds
        table_rows = int(q("SELECT COUNT(*) FROM hits", "TSV").strip())
        parts = q("SELECT count() FROM system.parts WHERE table = 'hits' AND active", "TSV").strip()
        nullable = q("SELECT countIf(type LIKE 'Nullable%') FROM system.columns WHERE table = 'hits'", "TSV").strip()
        log(
            f"[chdb] loaded {table_rows} rows x {len(desc)} columns into {engine} in {load_seconds:.2f} s "
            f"(insert {insert_seconds:.2f} s, optimize {optimize_seconds:.2f} s; {parts} active parts; "
            f"{nullable} Nullable columns)"
        )
        settle()

        all_sql = load_queries()
        results = []
        for n in args.query_list:
            sql = strip_semicolon(all_sql[n - 1]) + f" SETTINGS max_threads = {args.threads}"
            text = q(sql)  # warm-up; its answer is the one checked
            times = []
            for _ in range(args.runs):
                t = time.perf_counter()
                q(sql)
                times.append(time.perf_counter() - t)
            rows = parse_csv_rows(text, header=False)
            r = {"query": n, "sql": sql, "result_rows": len(rows), **summarize(times)}
            r["rows"] = norm_rows(rows)
            log(f"[chdb] Q{n:<3} mean {r['mean_seconds']:.4f} s  min {r['min_seconds']:.4f} s  rows {len(rows)}")
            results.append(r)
        tp = None
        if args.mode == "throughput":
            sqls = [strip_semicolon(all_sql[n - 1]) + f" SETTINGS max_threads = {args.threads}" for n in args.query_list]
            log(f"[chdb] throughput: concurrency {args.concurrency}, {args.duration} s each (one shared session)")
            tp = throughput_runs(lambda _h, sql: q(sql), sqls, [int(x) for x in args.concurrency.split(",")],
                                 args.duration, lambda: None)
        return {
            "throughput": tp,
            "engine": "chdb",
            "version": f"chdb {chdb.__version__}, ClickHouse {ch_version}",
            "load_method": f"session; CREATE TABLE hits ENGINE = {engine} AS SELECT * FROM file(FILE, Parquet) "
            + ("+ OPTIMIZE TABLE hits FINAL " if args.chdb_engine == "mergetree" else "")
            + "(all columns)",
            "load_seconds": load_seconds,
            "insert_seconds": insert_seconds,
            "optimize_seconds": optimize_seconds,
            "table_rows": table_rows,
            "queries": results,
            "baseline_rss_bytes": baseline,
            "peak_rss_bytes": vm_hwm_bytes(),
        }
    finally:
        try:
            sess.close()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def child_main(args) -> int:
    args.query_list = parse_query_list(args.queries)
    fn = {"duckdb": child_duckdb, "chdb": child_chdb, "datafusion": child_datafusion}[args.child]
    out = fn(args)
    with open(args.child_out, "w") as f:
        json.dump(out, f)
    return 0


# --------------------------------------------------------------------------------------
# Parent
# --------------------------------------------------------------------------------------


def module_available(name: str) -> bool:
    r = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, text=True)
    return r.returncode == 0


def ensure_tessera(bin_path: Path) -> None:
    if bin_path.exists():
        return
    log(f"{bin_path} not found: building it (cargo build --release -p tessera-cli)")
    subprocess.run(["cargo", "build", "--release", "-p", "tessera-cli"], cwd=REPO, check=True)
    if not bin_path.exists():
        raise SystemExit(f"error: cargo build succeeded but {bin_path} does not exist")


def resolve_dataset(args) -> Path:
    if args.file:
        p = Path(args.file).resolve()
        if not p.exists():
            raise SystemExit(f"error: {p} does not exist")
        return p
    data_dir = Path(os.environ.get("TESSERA_DATA_DIR", REPO / ".tessera-cache"))
    p = (data_dir / f"hits-{args.rows}-seed{args.seed}.parquet").resolve()
    if not p.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        ensure_tessera(args.tessera_bin)
        log(f"generating {args.rows} rows (seed {args.seed}) into {p}")
        tmp = p.with_suffix(".parquet.partial")
        subprocess.run(
            [str(args.tessera_bin), "gen", "hits", "--rows", str(args.rows), "--seed", str(args.seed), "--out", str(tmp)],
            check=True,
        )
        tmp.rename(p)
    return p


def child_env() -> dict:
    env = dict(os.environ)
    env["TZ"] = "UTC"  # same calendar for every engine (dates, extract(minute ...))
    return env


def run_tessera(args, path: Path, queries: list[int]) -> dict:
    """`tessera bench` in its own process. A query Tessera does not support yet (exit
    code 4, "Qn is not supported yet") is dropped and the bench is run again without it."""
    queries = list(queries)
    unsupported: dict[int, str] = {}
    with tempfile.TemporaryDirectory(prefix="compare-tessera-") as tmp:
        out = Path(tmp) / "tessera.json"
        while True:
            if not queries:
                raise RuntimeError("no query is supported: " + "; ".join(unsupported.values()))
            cmd = [
                str(args.tessera_bin), "bench", "--load", f"hits={path}",
                "--queries", ",".join(map(str, queries)), "--runs", str(args.runs),
                "--threads", str(args.threads), "--json", str(out),
            ]
            log("[tessera] " + " ".join(cmd))
            r = subprocess.run(cmd, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for line in (r.stdout + r.stderr).splitlines():
                log(f"[tessera] {line}")
            if r.returncode == 0:
                break
            m = re.search(r"Q(\d+) is not supported", r.stderr)
            if r.returncode == 4 and m and int(m.group(1)) in queries:
                q = int(m.group(1))
                unsupported[q] = r.stderr.strip().splitlines()[-1]
                log(f"warning: Tessera does not support Q{q} yet; running the others")
                queries.remove(q)
                continue
            last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
            raise RuntimeError(f"tessera bench exited with {r.returncode}: {last}")
        rep = json.loads(out.read_text())
        if args.mode == "throughput":
            tout = Path(tmp) / "tessera-throughput.json"
            cmd = [
                str(args.tessera_bin), "bench", "--load", f"hits={path}", "--queries", ",".join(map(str, queries)),
                "--threads", str(args.threads), "--mode", "throughput", "--concurrency", args.concurrency,
                "--duration", str(args.duration), "--json", str(tout),
            ]
            log("[tessera] " + " ".join(cmd))
            r = subprocess.run(cmd, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for line in (r.stdout + r.stderr).splitlines():
                log(f"[tessera] {line}")
            if r.returncode != 0:
                raise RuntimeError(f"tessera bench --mode throughput exited with {r.returncode}")
            trep = json.loads(tout.read_text())
    if args.mode == "throughput":
        rep["throughput"] = [
            {"concurrency": t["concurrency"], "wall_seconds": t["wall_seconds"], "completed": t["completed"],
             "qps": t["qps"], "p50_seconds": t["latency"]["p50_seconds"], "p90_seconds": t["latency"]["p90_seconds"],
             "p99_seconds": t["latency"]["p99_seconds"]}
            for t in (p["throughput"] for p in trep.get("points", []) if p.get("throughput"))
        ]
    ver = subprocess.run([str(args.tessera_bin), "--version"], capture_output=True, text=True).stdout.strip()
    rep["engine"] = "tessera"
    rep["version"] = ver
    rep["unsupported"] = {str(k): v for k, v in unsupported.items()}
    rep["load_method"] = ("register_parquet (lazy) + preload of the columns the queries read "
                          "(only those columns are loaded)")
    return rep


def run_py_child(engine: str, args, path: Path, queries: list[int]) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"compare-{engine}-") as tmp:
        out = Path(tmp) / f"{engine}.json"
        cmd = [
            sys.executable, str(Path(__file__).resolve()), "--child", engine, "--child-out", str(out),
            "--file", str(path), "--queries", ",".join(map(str, queries)), "--runs", str(args.runs),
            "--threads", str(args.threads), "--chdb-engine", args.chdb_engine,
            "--mode", args.mode, "--concurrency", args.concurrency, "--duration", str(args.duration),
        ]
        r = subprocess.run(cmd, env=child_env())
        if r.returncode != 0:
            raise RuntimeError(f"{engine} child exited with {r.returncode}")
        return json.loads(out.read_text())


def tessera_answer(args, path: Path, sql: str) -> list[list[str]]:
    cmd = [str(args.tessera_bin), "query", "--load", f"hits={path}", "--format", "CSVWithNames",
           "--threads", str(args.threads), sql]
    r = subprocess.run(cmd, env=child_env(), capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"tessera query failed ({r.returncode}): {r.stderr.strip()}")
    return norm_rows(parse_csv_rows(r.stdout, header=True))


# ---- answer checks -------------------------------------------------------------------

LIMIT_RE = re.compile(r"\s+LIMIT\s+(\d+)(?:\s+OFFSET\s+(\d+))?\s*$", re.I)


def parse_limit(sql: str):
    m = LIMIT_RE.search(strip_semicolon(sql))
    if not m:
        return None
    return int(m.group(1)), int(m.group(2) or 0)


def split_top(s: str, sep: str = ",") -> list[str]:
    """Splits on `sep` outside parentheses and quotes."""
    out, depth, cur, quote = [], 0, [], None
    for ch in s:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = None
            continue
        if ch in "'\"`":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == sep and depth == 0:
            out.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def top_level_select_list(sql: str) -> str | None:
    """The text between SELECT and the FROM that is outside parentheses and quotes
    (`extract(minute FROM EventTime)` has a FROM of its own)."""
    m = re.match(r"\s*SELECT\s+", sql, re.I)
    if not m:
        return None
    depth, quote, i = 0, None, m.end()
    while i < len(sql):
        ch = sql[i]
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"`":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0 and re.match(r"\sFROM\s", sql[i:i + 6], re.I):
            return sql[m.end():i].strip()
        i += 1
    return None


def _canon_expr(e: str) -> str:
    return re.sub(r"\s+", "", e).lower()


def order_key_indices(sql: str, columns: list[str]) -> list[int] | None:
    """Indices of the result columns that the ORDER BY items are, or None when some
    ORDER BY item is not among the output columns."""
    sql = strip_semicolon(sql)
    select_list = top_level_select_list(sql)
    o = re.search(r"\sORDER\s+BY\s+(.*?)(\s+LIMIT\s+\d+.*)?$", sql, re.I | re.S)
    if select_list is None or not o:
        return None
    items = []  # (alias, expr) per output column
    for it in split_top(select_list):
        if it == "*":
            items.extend((c, c) for c in columns)
            continue
        a = re.match(r"^(.*?)\s+AS\s+([A-Za-z_][A-Za-z0-9_]*)$", it, re.I | re.S)
        items.append((a.group(2), a.group(1)) if a else (it, it))
    idx = []
    for ob in split_top(o.group(1)):
        ob = re.sub(r"\s+(ASC|DESC)(\s+NULLS\s+(FIRST|LAST))?$", "", ob.strip(), flags=re.I)
        found = None
        for i, (alias, expr) in enumerate(items):
            if ob.lower() == alias.lower() or _canon_expr(ob) == _canon_expr(expr):
                found = i
                break
        if found is None:
            return None
        idx.append(found)
    return idx


def multiset_diff(a: list[list[str]], b: list[list[str]]):
    ca = collections.Counter(tuple(r) for r in a)
    cb = collections.Counter(tuple(r) for r in b)
    return list((ca - cb).elements()), list((cb - ca).elements())


def check_answer(sql: str, ref: dict, other_rows: list[list[str]], other: str) -> dict:
    """Compares `other_rows` with DuckDB's answer `ref` (which carries the rows, the
    column names and the boundary probe)."""
    ref_rows = ref["rows"]
    res = {"status": "OK", "detail": ""}
    float_cols = ref.get("float_columns", [])
    if float_cols:
        other_rows = [[_as_float_text(v) if i in float_cols else v for i, v in enumerate(r)]
                      for r in other_rows]
    if len(ref_rows) != len(other_rows):
        res.update(status="MISMATCH", detail=f"row count: DuckDB {len(ref_rows)}, {other} {len(other_rows)}")
        res["duckdb_rows"], res[f"{other}_rows"] = ref_rows, other_rows
        return res
    lim = parse_limit(sql)
    keys = order_key_indices(sql, ref.get("columns", []))
    if lim is None:
        only_ref, only_other = multiset_diff(ref_rows, other_rows)
        if only_ref or only_other:
            res.update(status="MISMATCH", detail="rows differ (no LIMIT: full multiset compared)")
            res["only_duckdb"], res[f"only_{other}"] = only_ref, only_other
        else:
            res["detail"] = f"{len(ref_rows)} rows, full multiset equal"
        return res
    if keys is None and not re.search(r"\sORDER\s+BY\s", sql, re.I):
        res["detail"] = (f"{len(ref_rows)} rows; LIMIT without ORDER BY: any {len(ref_rows)} rows are a valid "
                         "answer, so only the row count is compared")
        return res
    if keys is None:
        only_ref, only_other = multiset_diff(ref_rows, other_rows)
        if only_ref or only_other:
            res.update(status="DIFFERENT",
                       detail="rows differ, but the ORDER BY key is not in the output, so ties cannot be ruled out")
            res["only_duckdb"], res[f"only_{other}"] = only_ref, only_other
        else:
            res["detail"] = f"{len(ref_rows)} rows, full multiset equal"
        return res

    def key(r):
        return tuple(r[i] for i in keys)

    ref_keys = sorted(key(r) for r in ref_rows)
    oth_keys = sorted(key(r) for r in other_rows)
    if ref_keys != oth_keys:
        res.update(status="MISMATCH", detail="ORDER BY key values differ")
        res["duckdb_keys"], res[f"{other}_keys"] = [list(k) for k in ref_keys], [list(k) for k in oth_keys]
        res["duckdb_rows"], res[f"{other}_rows"] = ref_rows, other_rows
        return res
    # Which key values tie across the window boundary (from DuckDB's probe, which has one
    # more row on each side): rows with those keys may legitimately differ.
    limit, offset = lim
    boundary = set()
    probe = ref.get("probe")
    if ref_rows:
        if probe is None:
            boundary = {key(ref_rows[0]), key(ref_rows[-1])}
        else:
            prow = probe["rows"]
            start = offset - probe["offset"]  # index of the window's first row in the probe
            end = start + len(ref_rows) - 1  # its last row
            if start > 0 and start < len(prow) and key(prow[start - 1]) == key(prow[start]):
                boundary.add(key(prow[start]))
            if end + 1 < len(prow) and key(prow[end]) == key(prow[end + 1]):
                boundary.add(key(prow[end]))
    a = [r for r in ref_rows if key(r) not in boundary]
    b = [r for r in other_rows if key(r) not in boundary]
    only_ref, only_other = multiset_diff(a, b)
    if only_ref or only_other:
        res.update(status="MISMATCH", detail="keys equal but rows off the tie boundary differ")
        res["only_duckdb"], res[f"only_{other}"] = only_ref, only_other
        return res
    n_tied = len(ref_rows) - len(a)
    if n_tied:
        bkeys = ", ".join("/".join(k) for k in sorted(boundary))
        res["detail"] = (f"{len(ref_rows)} rows; keys equal; {len(a)} rows equal in full, {n_tied} rows tie "
                         f"at the LIMIT boundary (key {bkeys}) and are compared by key only")
        res["tied_rows_identical"] = not multiset_diff(
            [r for r in ref_rows if key(r) in boundary], [r for r in other_rows if key(r) in boundary]
        )[0]
    else:
        res["detail"] = f"{len(ref_rows)} rows; no tie at the boundary; full rows equal"
    return res


# ---- report ---------------------------------------------------------------------------


def machine_info() -> dict:
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("model name", "Model", "CPU part")):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = 0
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem = int(line.split()[1]) * 1024
    except OSError:
        pass
    return {"cpu_model": cpu, "vcpus": os.cpu_count(), "memory_bytes": mem,
            "os": platform.platform(), "python": platform.python_version()}


def fmt_s(x) -> str:
    return "n/a" if x is None else f"{x:.4f}"


def fmt_ratio(a, b) -> str:
    return "n/a" if a is None or b is None or b == 0 else f"{a / b:.2f}x"


def mib(b) -> str:
    return "n/a" if not b else f"{b / (1 << 20):.0f} MiB"


def render(headers: list[str], rows: list[list[str]], markdown: bool) -> str:
    if markdown:
        out = ["| " + " | ".join(headers) + " |",
               "|" + "|".join("---" if i == 0 else "---:" for i in range(len(headers))) + "|"]
        out += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(out)
    w = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = lambda cells: "  ".join(c.ljust(w[0]) if i == 0 else c.rjust(w[i]) for i, c in enumerate(cells))
    out = [line(headers), "  ".join("-" * x for x in w)]
    out += [line(r) for r in rows]
    return "\n".join(out)


def report(res: dict, markdown: bool) -> str:
    eng = res["engines"]
    queries = res["queries"]

    def qmean(e, q):
        r = eng.get(e)
        if not r or "queries" not in r:
            return None
        for x in r["queries"]:
            if x["query"] == q:
                return x["mean_seconds"]
        return None

    ran = [e for e in ENGINES if eng.get(e) and "queries" in eng[e]]
    # Totals over the queries every engine that ran has a time for, so that they compare.
    common = [q for q in queries if all(qmean(e, q) is not None for e in ran)]

    def total(e):
        if e not in ran:
            return None
        return sum(qmean(e, q) for q in common)

    def field(e, k):
        r = eng.get(e)
        return r.get(k) if r and "queries" in r else None

    shown = [e for e in ENGINES if e in eng]
    peers = [e for e in shown if e != "tessera"]

    def best(vals):
        vals = [v for v in vals if v is not None]
        return min(vals) if vals else None

    headers = (["Query"] + [f"{LABEL[e]} mean" for e in shown] + [f"Tessera/{LABEL[e]}" for e in peers]
               + (["Tessera/best"] if len(peers) > 1 else []))
    rows = []

    def row(label, vals, fmt=fmt_s, ratios=True):
        t = vals.get("tessera")
        r = [label] + [fmt(vals.get(e)) for e in shown]
        if ratios:
            r += [fmt_ratio(t, vals.get(e)) for e in peers]
            if len(peers) > 1:
                r.append(fmt_ratio(t, best(vals.get(e) for e in peers)))
        else:
            r += [""] * (len(peers) + (len(peers) > 1))
        rows.append(r)

    for q in queries:
        row(f"Q{q}", {e: qmean(e, q) for e in shown})
    total_label = "Total (sum of means)" if common == queries else f"Total (sum of means, {len(common)} common queries)"
    row(total_label, {e: total(e) for e in shown})
    row("Load (s, apart)", {e: field(e, "load_seconds") for e in shown}, ratios=False)
    row("Peak RSS (VmHWM)", {e: field(e, "peak_rss_bytes") for e in shown}, fmt=mib)

    m = res["machine"]
    a = res["args"]
    out = []
    out.append(f"Dataset: {res['dataset']} ({res.get('table_rows', '?')} rows)")
    out.append(f"Machine: {m['cpu_model']}, {m['vcpus']} vCPUs, {m['memory_bytes'] / (1 << 30):.1f} GiB RAM; {m['os']}")
    out.append(f"Method: {a['threads']} threads per engine; per query 1 warm-up + {a['runs']} timed runs; "
               "times in seconds; ratio = Tessera mean / other mean (above 1x: Tessera is slower)")
    for e in ENGINES:
        r = eng.get(e)
        if r is None:
            continue
        if "error" in r:
            out.append(f"  {LABEL[e]}: SKIPPED: {r['error']}")
        else:
            out.append(f"  {LABEL[e]}: {r.get('version', '?')}; load: {r.get('load_method', '?')}")
            for q, why in r.get("unsupported", {}).items():
                out.append(f"  {LABEL[e]}: Q{q} skipped: {why}")
    out.append("")
    out.append(render(headers, rows, markdown))
    out.append("")
    tps = {e: eng[e].get("throughput") for e in ran if eng[e].get("throughput")}
    if tps:
        conc = sorted({t["concurrency"] for v in tps.values() for t in v})

        def qps(e, c):
            return next((t["qps"] for t in tps.get(e, []) if t["concurrency"] == c), None)

        th = ["Concurrency", "Tessera QPS", "DuckDB QPS", "chDB QPS", "Tessera/DuckDB", "Tessera/chDB"]
        tr = []
        for c in conc:
            t, d, ch = qps("tessera", c), qps("duckdb", c), qps("chdb", c)
            f = lambda x: "n/a" if x is None else f"{x:.2f}"
            tr.append([str(c), f(t), f(d), f(ch), fmt_ratio(t, d), fmt_ratio(t, ch)])
        out.append(f"Throughput: queries {','.join(map(str, queries))} sent round robin by N clients sharing one "
                   f"database for {a.get('duration')} s after the latency runs; {a['threads']} threads per query; "
                   "ratio = Tessera QPS / other QPS (above 1x: Tessera serves more)")
        out.append("")
        out.append(render(th, tr, markdown))
        out.append("")
    notes = ["Load times are not comparable one to one: DuckDB and chDB load all 105 columns into their "
             "native tables; Tessera registers the Parquet file lazily and loads only the columns the "
             "queries read."]
    if "tessera" in eng and "queries" in eng["tessera"]:
        tr = eng["tessera"]
        notes.append(f"Tessera build: {tr.get('version', '?')}; kernels: {tr.get('simd_level', '?')}; "
                     f"CPU SIMD: {','.join(tr.get('machine', {}).get('simd_available', []))}.")
    base = [f"{LABEL[e]} {mib(eng[e].get('baseline_rss_bytes'))}" for e in PEERS
            if e in eng and "queries" in eng[e]]
    if base:
        notes.append("Peak RSS is each engine process's own VmHWM; the Python children include the interpreter "
                     "and the imported library (VmHWM right after import: " + ", ".join(base) + ").")
    for n in notes:
        out.append("Note: " + n)
    if res.get("checks"):
        out.append("")
        out.append("Answer checks (against DuckDB):")
        for c in res["checks"]:
            out.append(f"  Q{c['query']:<3} {LABEL[c['engine']]:<8} {c['status']:<9} {c['detail']}")
            for k, v in c.items():
                if k.startswith(("only_", "duckdb_", "tessera_", "chdb_", "datafusion_")) and v:
                    out.append(f"        {k}: {v}")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--file", help="the hits Parquet file")
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows of the generated file (without --file)")
    ap.add_argument("--seed", type=int, default=42, help="seed of the generated file (without --file)")
    ap.add_argument("--queries", default="19,33,34", help="ClickBench query numbers: comma-separated, ranges allowed (1-43 or 1..43)")
    ap.add_argument("--runs", type=int, default=10, help="timed runs per query, after 1 warm-up")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="threads per engine (default: vCPUs)")
    ap.add_argument("--engines", default="tessera,duckdb,chdb,datafusion")
    ap.add_argument("--tessera-bin", type=Path, default=REPO / "target" / "release" / "tessera")
    ap.add_argument("--chdb-engine", choices=["mergetree", "memory"], default="mergetree",
                    help="table engine chDB loads into (default MergeTree, as ClickBench's ClickHouse)")
    ap.add_argument("--no-check", action="store_true", help="skip the answer checks")
    ap.add_argument("--mode", choices=["latency", "throughput"], default="latency",
                    help="throughput: also measure QPS with --concurrency clients after the latency runs")
    ap.add_argument("--concurrency", default="1", help="throughput mode: client threads, comma-separated")
    ap.add_argument("--duration", type=float, default=20.0, help="throughput mode: seconds per concurrency")
    ap.add_argument("--json", type=Path, help="write all results to this file")
    ap.add_argument("--markdown", action="store_true", help="print the result table as Markdown")
    ap.add_argument("--child", choices=list(PEERS), help=argparse.SUPPRESS)
    ap.add_argument("--child-out", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.child:
        return child_main(args)

    if args.runs < 1 or (args.threads or 0) < 1:
        ap.error("--runs and --threads must be at least 1")
    try:
        queries = parse_query_list(args.queries)
    except ValueError:
        ap.error(f"--queries {args.queries!r}: expected numbers and ranges, e.g. 19,33,34 or 1-43")
    all_sql = load_queries()
    for q in queries:
        if not 1 <= q <= len(all_sql):
            ap.error(f"query {q} is out of range 1..{len(all_sql)}")
    engines = [e.strip().lower() for e in args.engines.split(",") if e.strip()]
    for e in engines:
        if e not in ENGINES:
            ap.error(f"unknown engine {e!r} (known: {', '.join(ENGINES)})")
    args.tessera_bin = args.tessera_bin.resolve()
    if "tessera" in engines or not args.file:
        ensure_tessera(args.tessera_bin)
    path = resolve_dataset(args)

    res = {"dataset": str(path), "args": {"queries": queries, "runs": args.runs, "threads": args.threads,
                                           "mode": args.mode, "concurrency": args.concurrency,
                                           "duration": args.duration,
                                           "engines": engines, "chdb_engine": args.chdb_engine},
           "machine": machine_info(), "queries": queries, "engines": {}, "checks": [],
           "unix_time": int(time.time())}
    for e in engines:
        if e in PEERS and not module_available(e):
            msg = f"Python module '{e}' is not installed (pip install {e}); skipping {LABEL[e]}"
            log(f"warning: {msg}")
            res["engines"][e] = {"error": msg}
            continue
        log(f"=== {LABEL[e]} ===")
        try:
            r = run_tessera(args, path, queries) if e == "tessera" else run_py_child(e, args, path, queries)
        except Exception as ex:  # report and go on with the other engines
            log(f"error: {LABEL[e]} failed: {ex}")
            res["engines"][e] = {"error": str(ex)}
            continue
        res["engines"][e] = r
        res.setdefault("table_rows", r.get("table_rows"))
        if r.get("table_rows") != res["table_rows"]:
            log(f"warning: {LABEL[e]} loaded {r.get('table_rows')} rows, another engine {res['table_rows']}")

    duck = res["engines"].get("duckdb")
    if not args.no_check and duck and "queries" in duck:
        ref = {x["query"]: x for x in duck["queries"]}
        for e in ("tessera", "chdb", "datafusion"):
            r = res["engines"].get(e)
            if not r or "queries" not in r:
                continue
            for q in queries:
                sql = all_sql[q - 1]
                try:
                    if str(q) in r.get("unsupported", {}):
                        c = {"status": "SKIPPED", "detail": f"not supported by {LABEL[e]}"}
                        c.update(query=q, engine=e)
                        res["checks"].append(c)
                        continue
                    if e == "tessera":
                        log(f"[check] tessera query Q{q}")
                        rows = tessera_answer(args, path, sql)
                        tq = next((x for x in r["queries"] if x["query"] == q), None)
                        if tq and tq.get("result_rows") != len(rows):
                            log(f"warning: Q{q}: tessera bench reported {tq.get('result_rows')} rows, "
                                f"tessera query returned {len(rows)}")
                    else:
                        rows = next(x for x in r["queries"] if x["query"] == q)["rows"]
                    c = check_answer(sql, ref[q], rows, e)
                except Exception as ex:
                    c = {"status": "ERROR", "detail": str(ex)}
                c.update(query=q, engine=e)
                res["checks"].append(c)
    elif not args.no_check:
        log("note: answer checks need DuckDB's answers; skipped")

    text = report(res, args.markdown)
    print(text, flush=True)
    if args.json:
        args.json.write_text(json.dumps(res, indent=1, default=str))
        log(f"wrote {args.json}")
    bad = [c for c in res["checks"] if c["status"] in ("MISMATCH", "ERROR")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
