#!/usr/bin/env python3
"""Spilling benchmark of issue 11 (external GROUP BY, external sort): ClickBench queries (default Q19 and Q33) from
Tessera's on-disk store under memory budgets, next to the unlimited run and to DuckDB under
the same `memory_limit`, in one run.

Usage:
    python3 scripts/bench-spill.py --rows 30000000 [--budgets 1GiB,4GiB] [--queries 19,33]
        [--sql 'SELECT ..' ...] [--runs 3] [--threads 2] [--work DIR] [--tessera-bin PATH]
        [--no-duckdb] [--keep] [--json OUT.json] [--out-md OUT.md]

`--sql` adds statements of your own (S1, S2, ..; repeatable), e.g. an external sort:
`--queries '' --sql 'SELECT EventTime, UserID, URL FROM hits ORDER BY EventTime, UserID
LIMIT 10 OFFSET 25000000'`.

Needs `pip install duckdb` and a release `tessera` binary (default target/release/tessera).

Steps (each in its own process, one at a time; scripts/bench-scale.py's helpers; one engine
at a time, its store deleted before the next one's is made unless --keep, since the 100M-row
stores do not fit this machine's disk together):
  1. `tessera gen hits --rows N` into WORK/hits-N.parquet and `tessera load --db WORK/tessera-N`,
     unless they exist.
  2. Per query, per budget (unlimited first): `tessera bench --db WORK/tessera-N
     --block-cache-size 0 --queries Q --runs R --threads T [--set max_memory_usage=B]`: mean
     seconds, the process's peak RSS (`/usr/bin/time -v`), and what the warm-up run spilled
     (bytes on disk, runs). The decoded-block cache is off: it is not part of a query's budget.
  3. DuckDB's database file WORK/duckdb-N.db (create.sql's columns; then the Parquet file is
     deleted), and per query and budget a fresh process opens it read-only with
     `SET threads = T`, `SET memory_limit = B` and `SET temp_directory = WORK/duckdb-tmp`.
Targets (issue 11): under a budget, peak RSS <= 1.5 x the budget, time <= 2 x the unlimited
run, and not slower than DuckDB under the same limit.
Peak RSS includes the memory-mapped part pages a query touched (file-backed, reclaimable by the
kernel), and for DuckDB the interpreter.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("bench_scale", REPO / "scripts" / "bench-scale.py")
S = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(S)
C = S.C
log = C.log
GIB = 1 << 30


def parse_bytes(text: str) -> int:
    t = text.strip().lower()
    for suffix, mult in (("gib", GIB), ("mib", 1 << 20), ("gb", 10**9), ("mb", 10**6)):
        if t.endswith(suffix):
            return int(float(t[: -len(suffix)]) * mult)
    return int(t)


def tessera_run(args, db: Path, q, budget: int) -> dict:
    """`q`: a ClickBench number or an `--sql` label (S1..)."""
    with tempfile.TemporaryDirectory(prefix="bench-spill-") as tmp:
        out = Path(tmp) / "bench.json"
        # An own statement runs beside Q1 (a metadata answer: microseconds), as S1.
        which = ["--queries", "1", "--sql", args.sql_of[q]] if isinstance(q, str) else ["--queries", str(q)]
        cmd = [str(args.tessera_bin), "bench", "--db", str(db), "--block-cache-size", "0", *which,
               "--runs", str(args.runs), "--threads", str(args.threads), "--json", str(out)]
        if budget:
            cmd += ["--set", f"max_memory_usage={budget}"]
        m = S.run_measured(cmd, f"tessera Q{q} {fmt_budget(budget)}")
        res = {"cmd": cmd, "rc": m["rc"], "peak_rss_bytes": m["peak_rss_bytes"], "stderr_tail": m["stderr_tail"]}
        if m["rc"] == 0 and out.exists():
            r = json.loads(out.read_text())["points"][0]["queries"][-1]
            res.update({k: r[k] for k in ("mean_seconds", "min_seconds", "median_seconds", "times_seconds",
                                          "peak_memory_bytes", "spills", "spilled_runs", "spilled_bytes")})
        return res


def duckdb_run(args, duck: Path, q, budget: int) -> dict:
    item = {"label": q, "sql": args.sql_of[q]} if isinstance(q, str) else q
    spec = {"db": str(duck), "threads": args.threads, "queries": [item], "runs": args.runs}
    if budget:
        tmpdir = args.work / "duckdb-tmp"
        tmpdir.mkdir(parents=True, exist_ok=True)
        spec.update({"memory_limit": f"{budget // (1 << 20)}MiB", "temp_directory": str(tmpdir)})
    try:
        r = S.run_py_child("duckdb-query", spec)
    except RuntimeError as ex:
        return {"error": str(ex)}
    qr = r["queries"][0]
    out = {"peak_rss_bytes": r["process"]["peak_rss_bytes"], "version": r["version"]}
    if "error" in qr:
        out["error"] = qr["error"]
    else:
        out.update({k: qr[k] for k in ("mean_seconds", "min_seconds", "median_seconds", "times_seconds")})
    return out


def fmt_budget(b: int) -> str:
    return "unlimited" if not b else (f"{b / GIB:g} GiB" if b >= GIB else f"{b / (1 << 20):g} MiB")


def parquet(args, n: int) -> Path:
    pq = args.work / f"hits-{n}.parquet"
    if not pq.exists():
        m = S.run_measured([str(args.tessera_bin), "gen", "hits", "--rows", str(n), "--seed", str(args.seed),
                            "--out", str(pq)], "gen")
        if m["rc"] != 0:
            raise RuntimeError(f"tessera gen exited with {m['rc']}")
    return pq


def tessera_store(args, n: int) -> Path:
    db = args.work / f"tessera-{n}"
    if not db.exists():
        m = S.run_measured([str(args.tessera_bin), "load", "--db", str(db), "hits", str(parquet(args, n))],
                           "tessera load")
        if m["rc"] != 0:
            raise RuntimeError(f"tessera load exited with {m['rc']}")
    return db


def duckdb_store(args, n: int) -> Path:
    duck = args.work / f"duckdb-{n}.db"
    if not duck.exists():
        S.run_py_child("duckdb-load", {"db": str(duck), "file": str(parquet(args, n)), "threads": args.threads})
    return duck


def report(res: dict) -> str:
    lines = [f"# Spilling queries under memory budgets ({res['rows']:,} generated rows, {res['threads']} threads)", "",
             *[f"{label}: `{sql}`" for label, sql in res.get("sql", {}).items()], "",
             f"Machine: {res['machine']}; {res['date']}; {res['git']}; load average at start {res['loadavg_start']}.",
             f"Method: `{res['command']}`; per query and budget one process, 1 warm-up + {res['runs']} runs, mean "
             "seconds; Tessera from its on-disk store with the decoded-block cache off; DuckDB from its database "
             "file, read-only, `memory_limit` = the budget. Peak RSS = the process's VmHWM (`/usr/bin/time -v`), "
             "which for Tessera includes the mapped part pages it read.", "",
             "| Query | Budget | Tessera s | Tessera peak RSS | accounted peak | spilled | vs unlimited | DuckDB s | "
             "DuckDB peak RSS | Tessera/DuckDB | RSS <= 1.5x budget | time <= 2x unlimited | <= DuckDB |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|"]
    for q, per in res["queries"].items():
        base = per[0]["tessera"].get("mean_seconds")
        for row in per:
            b, t, d = row["budget"], row["tessera"], row.get("duckdb", {})
            tm, dm = t.get("mean_seconds"), d.get("mean_seconds")
            spilled = (f"{t['spilled_bytes'] / (1 << 20):.0f} MiB in {t['spilled_runs']} runs"
                       if t.get("spills") else ("0" if tm is not None else "-"))
            ok = lambda c: "-" if c is None else ("PASS" if c else "FAIL")  # noqa: E731
            lines.append("| " + " | ".join([
                q if isinstance(q, str) else f"Q{q}", fmt_budget(b),
                f"{tm:.2f}" if tm is not None else f"error (rc {t['rc']})",
                S.fmib(t.get("peak_rss_bytes")),
                S.fmib(t.get("peak_memory_bytes")),
                spilled,
                f"{tm / base:.2f}x" if tm and base else "-",
                f"{dm:.2f}" if dm is not None else (d.get("error", "-")[:40] if d else "-"),
                S.fmib(d.get("peak_rss_bytes")) if d else "-",
                f"{tm / dm:.2f}x" if tm and dm else "-",
                ok(None if not b or tm is None else t["peak_rss_bytes"] <= 1.5 * b),
                ok(None if not b or tm is None or not base else tm <= 2 * base),
                ok(None if not b or tm is None else (dm is None or tm <= dm)),
            ]) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=30_000_000)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--queries", default="19,33")
    ap.add_argument("--sql", action="append", default=[], help="a statement of your own (S1, S2, ..)")
    ap.add_argument("--budgets", default="1GiB,4GiB", help="max_memory_usage / memory_limit values")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--work", type=Path, default=Path("bench-spill-work"))
    ap.add_argument("--tessera-bin", type=Path, default=REPO / "target" / "release" / "tessera")
    ap.add_argument("--no-duckdb", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the generated stores")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--out-md", type=Path)
    args = ap.parse_args()
    try:
        queries = C.parse_query_list(args.queries) if args.queries.strip() else []
        budgets = [0] + [parse_bytes(b) for b in args.budgets.split(",") if b.strip()]
    except ValueError:
        ap.error("--queries takes numbers (19,33) and --budgets sizes (1GiB,4GiB)")
    args.sql_of = {f"S{i + 1}": sql for i, sql in enumerate(args.sql)}
    queries += list(args.sql_of)
    if not queries:
        ap.error("nothing to run: give --queries or --sql")
    S.RSS_METHOD = "time" if Path("/usr/bin/time").exists() else "rusage"
    args.work = args.work.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    m = C.machine_info()
    ver = S.subprocess.run([str(args.tessera_bin), "--version"], capture_output=True, text=True).stdout.strip()
    res = {"rows": args.rows, "threads": args.threads, "runs": args.runs, "date": S.now(),
           "machine": f"{m['cpu_model']}, {m['vcpus']} vCPUs, {m['memory_bytes'] / GIB:.1f} GiB RAM, {m['os']}",
           "git": ver, "command": "python3 scripts/bench-spill.py " + " ".join(sys.argv[1:]),
           "loadavg_start": S.loadavg(), "sql": args.sql_of, "queries": {q: [{"budget": b} for b in budgets] for q in queries}}
    # One engine at a time, its store deleted before the next is made (unless --keep): the
    # 100M-row stores do not fit the disk together.
    db = tessera_store(args, args.rows)
    for q in queries:
        for row in res["queries"][q]:
            row["tessera"] = tessera_run(args, db, q, row["budget"])
    if not args.keep:
        S.rm(db)
    if not args.no_duckdb:
        duck = duckdb_store(args, args.rows)
        if not args.keep:
            S.rm(args.work / f"hits-{args.rows}.parquet")
        for q in queries:
            for row in res["queries"][q]:
                row["duckdb"] = duckdb_run(args, duck, q, row["budget"])
        if not args.keep:
            S.rm(duck)
    if not args.keep:
        S.rm(args.work / f"hits-{args.rows}.parquet")
        S.rm(args.work / "duckdb-tmp")
    md = report(res)
    print(md)
    if args.out_md:
        args.out_md.write_text(md)
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
