#!/usr/bin/env python3
"""Scale benchmark of issue 9: Tessera from its on-disk store vs DuckDB (database file) and
chDB (MergeTree on disk), in one run, at one or more table sizes.

Usage:
    python3 scripts/bench-scale.py --rows 1000000,10000000 [--runs 3] [--threads 2]
        [--work DIR] [--tessera-bin PATH] [--engines tessera,duckdb,chdb] [--queries 19,33,34]
        [--seed 42] [--codec lz4] [--rss-method auto|time|rusage] [--json OUT.json] [--out-md OUT.md]
        [--keep]

Needs `pip install duckdb chdb` and a release `tessera` binary (default target/release/tessera).
Stdlib + duckdb + chdb only.

For each --rows value N (ascending), one engine at a time, every step in its own process:
  1. `tessera gen hits --rows N --seed S --out WORK/hits-N.parquet` (time, peak RSS, size).
  2. Tessera: `tessera load --db WORK/tessera-N hits FILE` (wall time of the process, peak RSS,
     size on disk = sum of the file sizes under the directory). Then every ClickBench query
     (datasets/clickbench/queries.sql, Q1..Q43 as `tessera bench` numbers them) is run once with
     `tessera query --db` to find the ones Tessera supports: exit code 4 (not implemented) means
     "unsupported", nothing is hard-coded; that run's answer is kept for the answer checks. Then
     `tessera bench --db WORK/tessera-N --queries SUPPORTED --runs R --threads T --json ..`
     (1 warm-up + R runs per query, every run decodes from the memory-mapped parts), and
     `tessera bench --load hits=FILE --queries 24 ..` for Q24 on a warm in-memory table.
  3. DuckDB: a child process creates WORK/duckdb-N.db with the column types of
     datasets/clickbench/create.sql (without its PRIMARY KEY: no index), `INSERT INTO hits BY NAME
     SELECT * FROM read_parquet(FILE)`, CHECKPOINT (timed: the load); a second, fresh child opens
     the file and runs the supported queries (official text), `SET threads = T`, 1 warm-up + R
     runs each, `fetchall()` every run.
  4. chDB: a child creates a MergeTree table in a `chdb.session.Session(WORK/chdb-N)` with
     create.sql as is (ClickBench's schema, PRIMARY KEY and settings), `INSERT INTO .. SELECT *
     FROM file(FILE, Parquet)` and `OPTIMIZE TABLE hits FINAL` (both timed: the load, so that no
     merge runs while queries are timed; merges are stopped during the insert, and without
     --keep the Parquet file, read by no later step, is deleted before OPTIMIZE, as the merge
     needs room for a second copy of the table; size on disk = bytes_on_disk of the active parts); a
     fresh child runs the queries with `SETTINGS max_threads = T`, 1 warm-up + R runs each.
Peak RSS is per process: every child runs under `/usr/bin/time -v` ("Maximum resident set
size") when it exists (--rss-method time), else under a small wrapper process that reads
`resource.getrusage(RUSAGE_CHILDREN).ru_maxrss` after the child exits (--rss-method rusage).
The Python children's peaks include the interpreter and the imported engine module. Every
child runs with TZ=UTC. Generated data is deleted as soon as a step no longer needs it
(each engine's store after its queries, the Parquet file after the size), unless --keep.

Output: Markdown (stdout, and --out-md): per size a table of the supported queries (Tessera
disk mean, DuckDB mean, chDB mean, ratio of Tessera to the best of the two), totals, load
time / peak RSS / size on disk per engine; the seconds-per-million-rows sweep of Q19, Q33,
Q34 and Q24; answer checks against DuckDB (benches/compare.py's checker); and the targets of
issue 9 as PASS/FAIL:
  - Q19, Q33, Q34: Tessera disk mean <= 0.5 x the best of DuckDB and chDB (each size);
  - Q19, Q33, Q34: Tessera s/M rows at the largest size <= 1.3 x at the smallest;
  - Q24 from disk <= 2 x Q24 on a warm in-memory table (each size);
  - `tessera load` peak RSS < 4 GiB at 100M rows (only checked when 100M rows is run; the
    measured peak at every size is listed).
--json writes everything (every run time, every command, RSS, sizes, load averages).
The exit code is 0 when every step ran (whatever the targets say), 1 otherwise.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benches"))
import compare as C  # noqa: E402  (benches/compare.py: query list, answer normalisation and checks)

CREATE_SQL = REPO / "datasets" / "clickbench" / "create.sql"
ENGINES = ("tessera", "duckdb", "chdb")
TARGET_QUERIES = (19, 33, 34)
SWEEP_QUERIES = (19, 33, 34, 24)
GIB = 1 << 30
log = C.log


def env_utc() -> dict:
    return C.child_env()


def loadavg() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def du(path: Path) -> int:
    """Bytes of the files under `path` (apparent sizes, as scripts/bench-storage.py)."""
    if not path.exists():
        return 0
    if path.is_file():
        return path.stat().st_size
    return sum((Path(d) / f).stat().st_size for d, _, fs in os.walk(path) for f in fs
               if not (Path(d) / f).is_symlink())


def rm(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists():
        path.unlink()


# --------------------------------------------------------------------------------------
# Running a child with its peak RSS
# --------------------------------------------------------------------------------------

RSS_METHOD = "time"


def run_measured(cmd: list[str], tag: str) -> dict:
    """Runs `cmd` in its own process; returns rc, wall seconds, peak RSS (bytes), stdout,
    stderr and the load averages before and after."""
    before = loadavg()
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        rss_file = Path(tmp) / "rss"
        if RSS_METHOD == "time":
            full = ["/usr/bin/time", "-v", "-o", str(rss_file)] + cmd
        else:
            full = [sys.executable, str(Path(__file__).resolve()), "--measure", str(rss_file), "--"] + cmd
        log(f"[{tag}] $ " + " ".join(cmd))
        t = time.perf_counter()
        r = subprocess.run(full, env=env_utc(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           errors="replace")
        wall = time.perf_counter() - t
        peak = 0
        if rss_file.exists():
            text = rss_file.read_text()
            if RSS_METHOD == "time":
                m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
                peak = int(m.group(1)) * 1024 if m else 0
            else:
                peak = int(text.strip() or 0)
    for line in r.stderr.splitlines():
        line = line.rstrip()
        if line and "\r" not in line and "%" not in line[-6:]:  # skip progress bars
            log(f"[{tag}] {line}")
    res = {"cmd": cmd, "rc": r.returncode, "wall_seconds": wall, "peak_rss_bytes": peak,
           "stdout": r.stdout, "stderr_tail": r.stderr.strip().splitlines()[-5:] if r.stderr.strip() else [],
           "loadavg_before": before, "loadavg_after": loadavg()}
    log(f"[{tag}] rc {r.returncode}, {wall:.2f} s, peak RSS {peak / (1 << 20):.0f} MiB")
    return res


def measure_main(out: str, cmd: list[str]) -> int:
    """--rss-method rusage: run `cmd`, then write the children's max RSS (bytes)."""
    import resource

    rc = subprocess.run(cmd).returncode
    Path(out).write_text(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024))
    return rc


# --------------------------------------------------------------------------------------
# DuckDB and chDB children (each step in its own process)
# --------------------------------------------------------------------------------------


def duckdb_ddl() -> str:
    """create.sql's column list for DuckDB (its types are DuckDB types too), without the
    PRIMARY KEY (DuckDB would build an ART index over it) and the MergeTree clauses."""
    text = re.sub(r"--[^\n]*", "", CREATE_SQL.read_text())
    body = text[text.index("(") + 1: text.rindex(")")]
    cols = [ln.strip().rstrip(",") for ln in body.splitlines()
            if ln.strip() and not ln.strip().upper().startswith("PRIMARY KEY")]
    return "CREATE TABLE hits (\n    " + ",\n    ".join(cols) + "\n)"


def chdb_ddl() -> str:
    """create.sql as is (ClickBench's ClickHouse schema: PRIMARY KEY, MergeTree, settings)."""
    text = re.sub(r"--[^\n]*", "", CREATE_SQL.read_text()).strip().rstrip(";")
    return text.replace("CREATE OR REPLACE TABLE hits", "CREATE TABLE bench.hits", 1)


def run_queries(run, spec: dict, tag: str) -> list[dict]:
    """1 warm-up + runs per query; `run(sql)` returns (rows, columns) of a full result."""
    all_sql = C.load_queries()
    out = []
    for q in spec["queries"]:
        # A ClickBench number, or {"label": "S1", "sql": ...} (scripts/bench-spill.py --sql).
        sql = C.strip_semicolon(q["sql"] if isinstance(q, dict) else all_sql[q - 1])
        q = q["label"] if isinstance(q, dict) else q
        try:
            rows, columns = run(sql)  # warm-up; its answer is the one checked
            times = []
            for _ in range(spec["runs"]):
                t = time.perf_counter()
                run(sql)
                times.append(time.perf_counter() - t)
        except Exception as ex:  # report and go on with the next query
            log(f"[{tag}] Q{q}: error: {ex}")
            out.append({"query": q, "error": str(ex)})
            continue
        r = {"query": q, "result_rows": len(rows), **C.summarize(times), "columns": columns,
             "rows": C.norm_rows(rows)}
        # As in benches/compare.py: the other engines' CSV text of a column DuckDB answers as
        # floats is read as a float (Q4's AVG(UserID), printed without an exponent).
        r["float_columns"] = [i for i in range(len(columns)) if any(isinstance(row[i], float) for row in rows)]
        r["seconds_per_million_rows"] = r["mean_seconds"] / (spec["table_rows"] / 1e6)
        out.append(r)
        log(f"[{tag}] {q if isinstance(q, str) else f'Q{q}':<4} mean {r['mean_seconds']:.4f} s  min {r['min_seconds']:.4f} s  rows {len(rows)}")
    return out


def child_duckdb_load(spec: dict) -> dict:
    import duckdb

    db = spec["db"]
    con = duckdb.connect(db)
    con.execute(f"SET threads = {spec['threads']}")
    t = time.perf_counter()
    con.execute(duckdb_ddl())
    con.execute(f"INSERT INTO hits BY NAME SELECT * FROM read_parquet({C.sql_str(spec['file'])})")
    con.execute("CHECKPOINT")
    load_seconds = time.perf_counter() - t
    rows = con.execute("SELECT COUNT(*) FROM hits").fetchone()[0]
    con.close()
    log(f"[duckdb] loaded {rows} rows into {db} in {load_seconds:.2f} s")
    return {"version": duckdb.__version__, "load_seconds": load_seconds, "table_rows": rows,
            "load_method": "CREATE TABLE hits (create.sql's columns and types, no PRIMARY KEY); "
                           "INSERT INTO hits BY NAME SELECT * FROM read_parquet(FILE); CHECKPOINT"}


def child_duckdb_query(spec: dict) -> dict:
    import duckdb

    con = duckdb.connect(spec["db"], read_only=True)
    con.execute(f"SET threads = {spec['threads']}")
    if spec.get("memory_limit"):
        # scripts/bench-spill.py: DuckDB under the same budget, spilling to temp_directory.
        con.execute(f"SET memory_limit = '{spec['memory_limit']}'")
        con.execute(f"SET temp_directory = {C.sql_str(spec['temp_directory'])}")
    rows = con.execute("SELECT COUNT(*) FROM hits").fetchone()[0]
    spec["table_rows"] = rows

    def run(sql):
        cur = con.execute(sql)
        res = cur.fetchall()
        return res, [d[0] for d in cur.description]

    results = run_queries(run, spec, "duckdb")
    # Untimed probes for ties at the LIMIT boundary (compare.py's checker uses them).
    all_sql = C.load_queries()
    for r in results:
        if isinstance(r["query"], str):
            continue
        lim = C.parse_limit(all_sql[r["query"] - 1]) if "error" not in r else None
        if lim is not None:
            limit, offset = lim
            lo = max(offset - 1, 0)
            sql = C.strip_semicolon(all_sql[r["query"] - 1])
            probe_sql = C.LIMIT_RE.sub("", sql) + f" LIMIT {limit + 2} OFFSET {lo}"
            r["probe"] = {"offset": lo, "rows": C.norm_rows(con.execute(probe_sql).fetchall())}
    con.close()
    return {"version": duckdb.__version__, "table_rows": rows, "queries": results}


def chdb_session(path: str):
    from chdb import session as chs

    sess = chs.Session(path)

    def q(sql: str, fmt: str = "CSV") -> str:
        res = sess.query(sql, fmt)
        if hasattr(res, "has_error") and res.has_error():
            raise RuntimeError(res.error_message())
        return bytes(res.bytes()).decode("utf-8", "replace")

    return sess, q


def child_chdb_load(spec: dict) -> dict:
    import chdb

    sess, q = chdb_session(spec["db"])
    try:
        ver = q("SELECT version()", "TSV").strip()
        q("CREATE DATABASE IF NOT EXISTS bench")
        q(chdb_ddl())
        th = spec["threads"]
        # No merges while inserting: at 100M rows on this VM's ~50 GB of free disk, merges
        # running beside the insert reserved room for a second copy of what they merged and
        # the insert failed ("Cannot reserve 268.18 MiB, not enough space"); OPTIMIZE FINAL
        # merges everything once the Parquet file is gone.
        q("SYSTEM STOP MERGES bench.hits")
        t = time.perf_counter()
        q(f"INSERT INTO bench.hits SELECT * FROM file({C.sql_str(spec['file'])}, Parquet) "
          f"SETTINGS max_threads = {th}, max_insert_threads = {th}")
        insert_seconds = time.perf_counter() - t
        if spec.get("drop_file"):
            # The last reader of the Parquet file: free its disk before OPTIMIZE FINAL, which
            # writes the merged part beside the inserted ones (at 100M rows, ~19 GB more).
            os.remove(spec["file"])
            log(f"[chdb] removed {spec['file']} (no later step reads it) before OPTIMIZE FINAL")
        parts_before = int(q("SELECT count() FROM system.parts WHERE database = 'bench' AND table = 'hits' "
                             "AND active", "TSV").strip())
        q("SYSTEM START MERGES bench.hits")
        t = time.perf_counter()
        q(f"OPTIMIZE TABLE bench.hits FINAL SETTINGS max_threads = {th}")
        optimize_seconds = time.perf_counter() - t
        parts, size = q("SELECT count(), sum(bytes_on_disk) FROM system.parts WHERE database = 'bench' "
                        "AND table = 'hits' AND active", "TSV").split()
        rows = int(q("SELECT count() FROM bench.hits", "TSV").strip())
    finally:
        sess.close()
    log(f"[chdb] loaded {rows} rows in {insert_seconds + optimize_seconds:.2f} s (insert {insert_seconds:.2f} s, "
        f"{parts_before} parts; OPTIMIZE FINAL {optimize_seconds:.2f} s, {parts} part(s))")
    return {"version": f"chdb {chdb.__version__}, ClickHouse {ver}", "table_rows": rows,
            "load_seconds": insert_seconds + optimize_seconds, "insert_seconds": insert_seconds,
            "optimize_seconds": optimize_seconds, "parts_after_insert": parts_before, "parts": int(parts),
            "active_parts_bytes": int(size),
            "load_method": "create.sql (MergeTree, PRIMARY KEY (CounterID, EventDate, UserID, EventTime, WatchID)); "
                           "SYSTEM STOP MERGES; INSERT INTO hits SELECT * FROM file(FILE, Parquet); SYSTEM START MERGES; OPTIMIZE TABLE hits FINAL"}


def child_chdb_query(spec: dict) -> dict:
    import chdb

    sess, q = chdb_session(spec["db"])
    try:
        q("USE bench")
        ver = q("SELECT version()", "TSV").strip()
        rows = int(q("SELECT count() FROM hits", "TSV").strip())
        spec["table_rows"] = rows
        th = spec["threads"]

        def run(sql):
            text = q(f"{sql} SETTINGS max_threads = {th}", "CSV")
            return C.parse_csv_rows(text, header=False), []

        results = run_queries(run, spec, "chdb")
    finally:
        sess.close()
    return {"version": f"chdb {chdb.__version__}, ClickHouse {ver}", "table_rows": rows, "queries": results}


CHILDREN = {"duckdb-load": child_duckdb_load, "duckdb-query": child_duckdb_query,
            "chdb-load": child_chdb_load, "chdb-query": child_chdb_query}


def run_py_child(kind: str, spec: dict) -> dict:
    """Runs one DuckDB/chDB step in a fresh Python process; returns its JSON plus the
    process's wall time and peak RSS."""
    with tempfile.TemporaryDirectory(prefix="bench-scale-child-") as tmp:
        spec_path, out_path = Path(tmp) / "spec.json", Path(tmp) / "out.json"
        spec_path.write_text(json.dumps(spec))
        m = run_measured([sys.executable, str(Path(__file__).resolve()), "--child", kind,
                          "--child-spec", str(spec_path), "--child-out", str(out_path)], kind)
        if m["rc"] != 0 or not out_path.exists():
            raise RuntimeError(f"{kind} child exited with {m['rc']}: {' | '.join(m['stderr_tail'])}")
        res = json.loads(out_path.read_text())
    res["process"] = {k: m[k] for k in ("cmd", "wall_seconds", "peak_rss_bytes", "loadavg_before", "loadavg_after")}
    return res


# --------------------------------------------------------------------------------------
# Tessera steps
# --------------------------------------------------------------------------------------


def tessera_detect(args, db: Path, table_rows: int) -> dict:
    """Runs each query once (`tessera query --db`): supported, unsupported (exit 4) or error;
    keeps the answers for the checks."""
    all_sql = C.load_queries()
    out = {"supported": [], "unsupported": {}, "errors": {}, "answers": {}, "first_run_seconds": {}}
    log(f"[tessera] running each of {len(args.query_list)} queries once from disk to find the supported ones")
    for q in args.query_list:
        cmd = [str(args.tessera_bin), "query", "--db", str(db), "--format", "CSVWithNames", "--threads", str(args.threads),
               all_sql[q - 1]]
        t = time.perf_counter()
        r = subprocess.run(cmd, env=env_utc(), capture_output=True, text=True, errors="replace")
        wall = time.perf_counter() - t
        last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
        if r.returncode == 0:
            out["supported"].append(q)
            out["answers"][q] = C.norm_rows(C.parse_csv_rows(r.stdout, header=True))
            out["first_run_seconds"][q] = wall
        elif r.returncode == 4:
            out["unsupported"][q] = last.removeprefix("error: ")
        else:
            out["errors"][q] = f"exit {r.returncode}: {last}"
            log(f"[tessera] Q{q}: {out['errors'][q]}")
    log(f"[tessera] supported: {','.join(map(str, out['supported']))}; unsupported: "
        f"{','.join(map(str, out['unsupported']))}")
    return out


def tessera_bench(args, source: list[str], queries: list[int], tag: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-scale-tessera-") as tmp:
        out = Path(tmp) / "bench.json"
        cmd = [str(args.tessera_bin), "bench", *source, "--queries", ",".join(map(str, queries)),
               "--runs", str(args.runs), "--threads", str(args.threads), "--json", str(out)]
        m = run_measured(cmd, tag)
        if m["rc"] != 0 or not out.exists():
            raise RuntimeError(f"tessera bench exited with {m['rc']}: {' | '.join(m['stderr_tail'])}")
        rep = json.loads(out.read_text())
    pt = rep["points"][0]
    return {"queries": pt["queries"], "table_rows": pt["table_rows"], "load_seconds": pt["load_seconds"],
            "peak_rss_bytes_self": pt.get("peak_rss_bytes"), "simd_level": rep.get("simd_level"),
            "git_hash": rep.get("git_hash"),
            "process": {k: m[k] for k in ("cmd", "wall_seconds", "peak_rss_bytes", "loadavg_before", "loadavg_after")}}


def run_size(args, n: int) -> dict:
    work = args.work
    res = {"rows": n, "started": now(), "loadavg_start": loadavg(), "engines": {}, "checks": []}
    pq = work / f"hits-{n}.parquet"
    if pq.exists() and args.reuse_parquet:
        log(f"[gen] reusing {pq}")
        res["gen"] = {"reused": True}
    else:
        m = run_measured([str(args.tessera_bin), "gen", "hits", "--rows", str(n), "--seed", str(args.seed),
                          "--out", str(pq)], "gen")
        if m["rc"] != 0:
            raise RuntimeError(f"tessera gen exited with {m['rc']}: {' | '.join(m['stderr_tail'])}")
        res["gen"] = {k: m[k] for k in ("cmd", "wall_seconds", "peak_rss_bytes", "loadavg_before", "loadavg_after")}
    res["parquet_bytes"] = du(pq)

    queries = list(args.query_list)
    if "tessera" in args.engines:
        log(f"=== Tessera, {n} rows ===")
        e = res["engines"]["tessera"] = {}
        db = work / f"tessera-{n}"
        rm(db)
        try:
            cmd = [str(args.tessera_bin), "load", "--db", str(db)]
            if args.codec:
                cmd += ["--codec", args.codec]
            m = run_measured(cmd + ["hits", str(pq)], "tessera load")
            if m["rc"] != 0:
                raise RuntimeError(f"tessera load exited with {m['rc']}: {' | '.join(m['stderr_tail'])}")
            e["load"] = {k: m[k] for k in ("cmd", "wall_seconds", "peak_rss_bytes", "stdout", "loadavg_before",
                                           "loadavg_after")}
            e["load_seconds"] = m["wall_seconds"]
            e["load_peak_rss_bytes"] = m["peak_rss_bytes"]
            e["size_bytes"] = du(db)
            det = tessera_detect(args, db, n)
            e["detect"] = det
            queries = det["supported"]
            if not queries:
                raise RuntimeError("Tessera supports none of the queries")
            e["disk"] = tessera_bench(args, ["--db", str(db)], queries, "tessera disk")
            e["table_rows"] = e["disk"]["table_rows"]
            if 24 in queries and not args.no_memory_q24 and n > args.memory_q24_max_rows:
                # SELECT * keeps all 105 columns resident: ~0.63 GiB per million rows
                # (18.5 GiB at 30M here), so a larger table would be OOM-killed.
                e["memory_q24"] = {"skipped": f"more than --memory-q24-max-rows ({args.memory_q24_max_rows:,}) rows"}
                log(f"Tessera in-memory Q24 skipped at {n:,} rows: {e['memory_q24']['skipped']}")
            elif 24 in queries and not args.no_memory_q24:
                try:
                    e["memory_q24"] = tessera_bench(args, ["--load", f"hits={pq}"], [24], "tessera memory")
                except Exception as ex:
                    log(f"error: Tessera in-memory Q24 failed: {ex}")
                    e["memory_q24"] = {"error": str(ex)}
        except Exception as ex:
            log(f"error: Tessera failed: {ex}")
            e["error"] = str(ex)
        if not args.keep:
            rm(db)
    res["queries"] = queries

    for eng in ("duckdb", "chdb"):
        if eng not in args.engines:
            continue
        log(f"=== {C.LABEL[eng]}, {n} rows ===")
        if not C.module_available(eng):
            res["engines"][eng] = {"error": f"Python module '{eng}' is not installed (pip install {eng})"}
            log(f"warning: {res['engines'][eng]['error']}")
            continue
        db = work / (f"duckdb-{n}.db" if eng == "duckdb" else f"chdb-{n}")
        rm(db)
        rm(Path(str(db) + ".wal"))
        spec = {"db": str(db), "file": str(pq), "threads": args.threads, "runs": args.runs, "queries": queries,
                "drop_file": eng == "chdb" and not args.keep}
        try:
            ld = run_py_child(f"{eng}-load", spec)
            e = res["engines"][eng] = {"load": ld, "version": ld["version"], "load_seconds": ld["load_seconds"],
                                       "load_peak_rss_bytes": ld["process"]["peak_rss_bytes"],
                                       "table_rows": ld["table_rows"]}
            e["size_bytes"] = ld["active_parts_bytes"] if eng == "chdb" else du(db) + du(Path(str(db) + ".wal"))
            e["dir_bytes"] = du(db)
            qr = run_py_child(f"{eng}-query", spec)
            e["queries"] = qr["queries"]
            e["query_process"] = qr["process"]
        except Exception as ex:
            log(f"error: {C.LABEL[eng]} failed: {ex}")
            res["engines"].setdefault(eng, {})["error"] = str(ex)
        if not args.keep:
            rm(db)
            rm(Path(str(db) + ".wal"))

    # Answer checks against DuckDB (Tessera: its detection run's answers; chDB: its warm-up).
    duck = res["engines"].get("duckdb", {})
    all_sql = C.load_queries()
    if "queries" in duck:
        ref = {x["query"]: x for x in duck["queries"] if "error" not in x}
        tes = res["engines"].get("tessera", {}).get("detect", {}).get("answers", {})
        ch = {x["query"]: x for x in res["engines"].get("chdb", {}).get("queries", []) if "error" not in x}
        for q in queries:
            if q not in ref:
                continue
            for eng, rows in (("tessera", tes.get(q)), ("chdb", ch.get(q, {}).get("rows"))):
                if rows is None:
                    continue
                try:
                    c = C.check_answer(all_sql[q - 1], ref[q], rows, eng)
                except Exception as ex:
                    c = {"status": "ERROR", "detail": str(ex)}
                c.update(query=q, engine=eng)
                res["checks"].append(c)
    if not args.keep:
        rm(pq)
    res["finished"] = now()
    res["loadavg_end"] = loadavg()
    return res


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


# --------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------


def qmean(size: dict, eng: str, q: int, mode: str = "disk"):
    e = size["engines"].get(eng, {})
    if eng == "tessera":
        src = e.get("disk" if mode == "disk" else "memory_q24", {}).get("queries", [])
    else:
        src = e.get("queries", [])
    for x in src:
        if x["query"] == q and "mean_seconds" in x:
            return x["mean_seconds"]
    return None


def fs(x) -> str:
    return "n/a" if x is None else f"{x:.4f}"


def fmib(b) -> str:
    return "n/a" if not b else f"{b / (1 << 20):,.0f} MiB"


def fr(a, b) -> str:
    return "n/a" if a is None or not b else f"{a / b:.2f}x"


def best_peer(size: dict, q: int):
    peers = [(qmean(size, e, q), e) for e in ("duckdb", "chdb") if qmean(size, e, q) is not None]
    return min(peers) if peers else (None, None)


def human_rows(n: int) -> str:
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else (f"{n // 1000}k" if n % 1000 == 0 else str(n))


def report(res: dict) -> tuple[str, dict]:
    md = []
    a, m = res["args"], res["machine"]
    md.append(f"# Scale benchmark: {', '.join(human_rows(s['rows']) + ' rows' for s in res['sizes'])}")
    md.append("")
    md.append(f"`{res['command']}`, {res['started']} .. {res['finished']}.")
    md.append(f"Machine: {m['cpu_model']}, {m['vcpus']} vCPUs, {m['memory_bytes'] / GIB:.1f} GiB RAM, {m['os']}; "
              f"load average (1/5/15 min) at start {res['loadavg_start']}, at end {res['loadavg_end']}.")
    vers = []
    for s in res["sizes"]:
        t = s["engines"].get("tessera", {})
        if t.get("disk"):
            vers.append(f"Tessera {res.get('tessera_version', '?')}, {t['disk'].get('simd_level')} kernels")
        for e in ("duckdb", "chdb"):
            if s["engines"].get(e, {}).get("version"):
                vers.append(f"{C.LABEL[e]} {s['engines'][e]['version']}")
        if vers:
            break
    md.append("Engines: " + "; ".join(vers) + ".")
    md.append(f"Method: {a['threads']} threads per engine; per query 1 warm-up + {a['runs']} timed runs, mean "
              "seconds; one engine at a time, every load and every query phase in its own process; peak RSS "
              f"per process ({'/usr/bin/time -v' if a['rss_method'] == 'time' else 'getrusage(RUSAGE_CHILDREN)'}); "
              "Tessera reads from its on-disk store (`tessera bench --db`), DuckDB from its database file, "
              "chDB from a MergeTree table (OPTIMIZE FINAL after the insert). Ratio = Tessera / best of "
              "DuckDB and chDB (below 1x: Tessera is faster).")
    md.append("")
    targets = []
    for s in res["sizes"]:
        n = s["rows"]
        md.append(f"## {human_rows(n)} rows ({n:,})")
        md.append("")
        t = s["engines"].get("tessera", {})
        for e in ENGINES:
            if s["engines"].get(e, {}).get("error"):
                md.append(f"- {C.LABEL[e]} FAILED: {s['engines'][e]['error']}")
        det = t.get("detect", {})
        if det.get("unsupported"):
            md.append("- Unsupported by Tessera (exit 4 at their first run, not compared): " + ", ".join(
                f"Q{q} ({why})" for q, why in sorted(det["unsupported"].items(), key=lambda kv: int(kv[0]))))
        if det.get("errors"):
            md.append("- Tessera errors: " + ", ".join(f"Q{q} ({why})" for q, why in det["errors"].items()))
        md.append("")
        rows = []
        qs = s["queries"]
        for q in qs:
            tm, dm, cm = qmean(s, "tessera", q), qmean(s, "duckdb", q), qmean(s, "chdb", q)
            bp, be = best_peer(s, q)
            rows.append([f"Q{q}", fs(tm), fs(dm), fs(cm), C.LABEL.get(be, "n/a"), fr(tm, bp)])
        ran = [e for e in ENGINES if any(qmean(s, e, q) is not None for q in qs)]
        common = [q for q in qs if all(qmean(s, e, q) is not None for e in ran)]
        tot = {e: sum(qmean(s, e, q) for q in common) if e in ran else None for e in ENGINES}
        btot = min([tot[e] for e in ("duckdb", "chdb") if tot[e] is not None], default=None)
        label = "Total (sum of means)" if common == qs else f"Total ({len(common)} queries every engine ran)"
        rows.append([label, fs(tot["tessera"]), fs(tot["duckdb"]), fs(tot["chdb"]), "", fr(tot["tessera"], btot)])
        md.append(C.render(["Query", "Tessera disk mean (s)", "DuckDB mean (s)", "chDB mean (s)", "best peer",
                            "Tessera / best"], rows, True))
        md.append("")
        mem = t.get("memory_q24", {})
        lrows = [["input Parquet (`tessera gen`, ZSTD)", fs(s.get("gen", {}).get("wall_seconds")),
                  fmib(s.get("gen", {}).get("peak_rss_bytes")), "", fmib(s.get("parquet_bytes"))]]
        if t.get("load"):
            lrows.append(["Tessera (`tessera load`, LZ4, parts of 2^21 rows, no OPTIMIZE)", fs(t["load_seconds"]),
                          fmib(t["load_peak_rss_bytes"]),
                          fmib(t.get("disk", {}).get("process", {}).get("peak_rss_bytes")), fmib(t.get("size_bytes"))])
        if mem.get("queries"):
            lrows.append(["Tessera in memory (Q24 only: `--load hits=FILE`, all 105 columns)",
                          fs(mem["load_seconds"]), "", fmib(mem["process"]["peak_rss_bytes"]), ""])
        for e in ("duckdb", "chdb"):
            x = s["engines"].get(e, {})
            if x.get("load"):
                lrows.append([C.LABEL[e] + (" (database file)" if e == "duckdb" else
                                            f" (MergeTree, {x['load'].get('parts')} part(s) after OPTIMIZE)"),
                              fs(x["load_seconds"]), fmib(x["load_peak_rss_bytes"]),
                              fmib(x.get("query_process", {}).get("peak_rss_bytes")), fmib(x.get("size_bytes"))])
        md.append(C.render(["Step", "time (s)", "load peak RSS", "query process peak RSS", "size on disk"],
                           lrows, True))
        md.append("")
        if s["engines"].get("chdb", {}).get("load"):
            cl = s["engines"]["chdb"]["load"]
            md.append(f"chDB load = INSERT {cl['insert_seconds']:.2f} s ({cl['parts_after_insert']} parts) + "
                      f"OPTIMIZE FINAL {cl['optimize_seconds']:.2f} s. Tessera load time is the whole "
                      "`tessera load` process (read, sort by the primary key, encode, compress, fsync).")
            md.append("")
        bad = [c for c in s["checks"] if c["status"] not in ("OK",)]
        ok = [c for c in s["checks"] if c["status"] == "OK"]
        if s["checks"]:
            md.append(f"Answer checks against DuckDB: {len(ok)} OK of {len(s['checks'])}"
                      + ("" if not bad else "; " + "; ".join(
                          f"Q{c['query']} {C.LABEL[c['engine']]} {c['status']}: {c['detail']}" for c in bad)) + ".")
            md.append("")
        # Targets of this size.
        for q in TARGET_QUERIES:
            tm = qmean(s, "tessera", q)
            bp, be = best_peer(s, q)
            if tm is None or bp is None:
                targets.append((f"{human_rows(n)}: Q{q} <= 0.5x best of DuckDB/chDB", "N/A", "not measured"))
            else:
                targets.append((f"{human_rows(n)}: Q{q} <= 0.5x best of DuckDB/chDB",
                                "PASS" if tm <= 0.5 * bp else "FAIL",
                                f"Tessera {tm:.4f} s, {C.LABEL[be]} {bp:.4f} s: {tm / bp:.2f}x"))
        d24, m24 = qmean(s, "tessera", 24), qmean(s, "tessera", 24, "memory")
        if d24 is None or m24 is None:
            why = (s["engines"].get("tessera", {}).get("memory_q24") or {}).get("skipped", "not measured")
            targets.append((f"{human_rows(n)}: Q24 disk <= 2x in memory", "N/A", why))
        else:
            targets.append((f"{human_rows(n)}: Q24 disk <= 2x in memory", "PASS" if d24 <= 2 * m24 else "FAIL",
                            f"disk {d24:.4f} s, memory {m24:.4f} s: {d24 / m24:.2f}x"))

    # Sweep: seconds per million rows.
    sizes = res["sizes"]
    md.append("## Seconds per million rows (mean / M rows)")
    md.append("")
    srows = []
    series = [("tessera", "disk", "Tessera disk"), ("tessera", "memory", "Tessera memory"),
              ("duckdb", "disk", "DuckDB"), ("chdb", "disk", "chDB")]
    for q in SWEEP_QUERIES:
        for eng, mode, label in series:
            if mode == "memory" and q != 24:
                continue
            vals = [qmean(s, eng, q, mode) for s in sizes]
            spm = [None if v is None else v / (s["rows"] / 1e6) for v, s in zip(vals, sizes)]
            if all(x is None for x in spm):
                continue
            growth = fr(spm[-1], spm[0]) if len(sizes) > 1 else ""
            srows.append([f"Q{q}", label] + [("n/a" if x is None else f"{x:.4f}") for x in spm] + [growth])
    md.append(C.render(["Query", "engine"] + [human_rows(s["rows"]) for s in sizes] + ["largest / smallest"],
                       srows, True))
    md.append("")
    for q in TARGET_QUERIES:
        name = f"Q{q} s/M rows at {human_rows(sizes[-1]['rows'])} <= 1.3x at {human_rows(sizes[0]['rows'])}"
        a0, a1 = qmean(sizes[0], "tessera", q), qmean(sizes[-1], "tessera", q)
        if len(sizes) < 2:
            targets.append((f"Q{q} s/M rows largest <= 1.3x smallest", "N/A", "needs two sizes"))
        elif a0 is None or a1 is None:
            targets.append((name, "N/A", "not measured"))
        else:
            s0, s1 = a0 / (sizes[0]["rows"] / 1e6), a1 / (sizes[-1]["rows"] / 1e6)
            targets.append((name, "PASS" if s1 <= 1.3 * s0 else "FAIL", f"{s1:.4f} vs {s0:.4f} s/M: {s1 / s0:.2f}x"))
    peaks = ", ".join(f"{human_rows(s['rows'])} {fmib(s['engines'].get('tessera', {}).get('load_peak_rss_bytes'))}"
                      for s in sizes)
    big = [s for s in sizes if s["rows"] >= 100_000_000]
    if big:
        p = big[-1]["engines"].get("tessera", {}).get("load_peak_rss_bytes")
        targets.append(("`tessera load` peak RSS < 4 GiB at 100M", "N/A" if not p else
                        ("PASS" if p < 4 * GIB else "FAIL"), f"measured: {peaks}"))
    else:
        targets.append(("`tessera load` peak RSS < 4 GiB at 100M", "NOT RUN",
                        f"no size of 100M rows in this run; measured: {peaks}"))
    md.append("## Targets (issue 9)")
    md.append("")
    md.append("| Target | result | measured |")
    md.append("|---|---|---|")
    md += [f"| {t[0]} | {t[1]} | {t[2]} |" for t in targets]
    md.append("")
    md.append("Note: DuckDB and chDB load all 105 columns into their own stores; so does `tessera load`. "
              "Tessera's in-memory Q24 run loads every column too (`SELECT *`). Times come from one run on "
              "the machine above; see the load averages for what else ran.")
    return "\n".join(md), {"targets": [{"target": t[0], "result": t[1], "measured": t[2]} for t in targets]}


def main() -> int:
    global RSS_METHOD
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="1000000", help="table sizes, comma-separated (e.g. 1000000,10000000)")
    ap.add_argument("--seed", type=int, default=42, help="seed of `tessera gen hits`")
    ap.add_argument("--runs", type=int, default=3, help="timed runs per query, after 1 warm-up")
    ap.add_argument("--threads", type=int, default=2, help="threads per engine")
    ap.add_argument("--queries", default="1-43",
                    help="ClickBench queries to try (e.g. 19,24,33,34; default all 43: the ones Tessera rejects "
                         "are listed as unsupported)")
    ap.add_argument("--engines", default="tessera,duckdb,chdb")
    ap.add_argument("--codec", help="codec of `tessera load` (default: its default, lz4)")
    ap.add_argument("--work", type=Path, default=Path("bench-scale-work"), help="directory for the generated data")
    ap.add_argument("--tessera-bin", type=Path, default=REPO / "target" / "release" / "tessera")
    ap.add_argument("--rss-method", choices=["auto", "time", "rusage"], default="auto",
                    help="peak RSS per child: /usr/bin/time -v (auto when present) or getrusage(RUSAGE_CHILDREN)")
    ap.add_argument("--no-memory-q24", action="store_true", help="skip Tessera's in-memory Q24 run")
    ap.add_argument("--memory-q24-max-rows", type=int, default=30_000_000,
                    help="skip the in-memory Q24 run above this many rows (it holds every column: "
                         "~0.63 GiB per million rows)")
    ap.add_argument("--reuse-parquet", action="store_true", help="reuse WORK/hits-N.parquet if it exists")
    ap.add_argument("--keep", action="store_true", help="keep the generated data and stores")
    ap.add_argument("--json", type=Path, help="write everything to this JSON file")
    ap.add_argument("--out-md", type=Path, help="also write the Markdown report to this file")
    ap.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    ap.add_argument("--child-spec", help=argparse.SUPPRESS)
    ap.add_argument("--child-out", help=argparse.SUPPRESS)
    ap.add_argument("--measure", help=argparse.SUPPRESS)
    if len(sys.argv) > 2 and sys.argv[1] == "--measure":
        sep = sys.argv.index("--")
        return measure_main(sys.argv[2], sys.argv[sep + 1:])
    args = ap.parse_args()
    if args.child:
        spec = json.loads(Path(args.child_spec).read_text())
        Path(args.child_out).write_text(json.dumps(CHILDREN[args.child](spec)))
        return 0

    try:
        sizes = sorted({int(x.replace("_", "")) for x in args.rows.split(",") if x.strip()})
    except ValueError:
        ap.error("--rows takes integers, comma-separated")
    if not sizes or min(sizes) < 1 or args.runs < 1 or args.threads < 1:
        ap.error("--rows, --runs and --threads must be at least 1")
    ql = []
    for part in args.queries.split(","):
        lo, _, hi = part.strip().partition("-")
        ql += list(range(int(lo), int(hi or lo) + 1))
    n_sql = len(C.load_queries())
    if any(not 1 <= q <= n_sql for q in ql):
        ap.error(f"queries are 1..{n_sql}")
    args.query_list = sorted(set(ql))
    args.engines = [e.strip().lower() for e in args.engines.split(",") if e.strip()]
    for e in args.engines:
        if e not in ENGINES:
            ap.error(f"unknown engine {e!r} (known: {', '.join(ENGINES)})")
    if args.rss_method == "auto":
        args.rss_method = "time" if Path("/usr/bin/time").exists() else "rusage"
    RSS_METHOD = args.rss_method
    args.tessera_bin = args.tessera_bin.resolve()
    if not args.tessera_bin.exists():
        ap.error(f"{args.tessera_bin} does not exist (cargo build --release, or --tessera-bin)")
    args.work = args.work.resolve()
    args.work.mkdir(parents=True, exist_ok=True)

    ver = subprocess.run([str(args.tessera_bin), "--version"], capture_output=True, text=True).stdout.strip()
    res = {"command": "python3 scripts/bench-scale.py " + " ".join(sys.argv[1:]), "started": now(),
           "loadavg_start": loadavg(), "machine": C.machine_info(), "tessera_version": ver,
           "args": {"rows": sizes, "runs": args.runs, "threads": args.threads, "queries": args.query_list,
                    "engines": args.engines, "seed": args.seed, "codec": args.codec or "lz4 (default)",
                    "rss_method": args.rss_method, "tessera_bin": str(args.tessera_bin)},
           "sizes": []}
    failed = False
    for n in sizes:
        try:
            s = run_size(args, n)
        except Exception as ex:
            log(f"error: {n} rows: {ex}")
            s = {"rows": n, "error": str(ex), "engines": {}, "queries": [], "checks": []}
        failed |= bool(s.get("error")) or any(e.get("error") for e in s["engines"].values())
        res["sizes"].append(s)
        if args.json:  # after every size, so that a long run leaves its results behind
            args.json.write_text(json.dumps(res, indent=1, default=str))
    res["finished"] = now()
    res["loadavg_end"] = loadavg()
    text, extra = report(res)
    res.update(extra)
    res["report_markdown"] = text
    print(text, flush=True)
    if args.out_md:
        args.out_md.write_text(text + "\n")
    if args.json:
        args.json.write_text(json.dumps(res, indent=1, default=str))
        log(f"wrote {args.json}")
    if not args.keep:
        try:
            args.work.rmdir()  # only when empty
        except OSError:
            pass
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
