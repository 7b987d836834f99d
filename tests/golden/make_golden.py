#!/usr/bin/env python3
"""Regenerates the golden answers of tests/golden/queries/*.sql with DuckDB.

The dataset is the generated hits table (rows/seed below, the same the Rust test
`tests/golden.rs` generates), written by the tessera CLI. Each answer is stored as JSON
lines, one row per line, values as JSON numbers/strings (dates 'YYYY-MM-DD', timestamps
'YYYY-MM-DD HH:MM:SS'). Run from the repository root:

    pip install duckdb && python3 tests/golden/make_golden.py
"""
import datetime
import decimal
import json
import os
import pathlib
import subprocess
import sys

ROWS = 300_000
SEED = 7
ROOT = pathlib.Path(__file__).resolve().parents[2]
QUERIES = ROOT / "tests" / "golden" / "queries"


def value(v):
    if isinstance(v, datetime.datetime):
        return v.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(v, datetime.date):
        return v.strftime("%Y-%m-%d")
    if isinstance(v, decimal.Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return v


def main():
    import duckdb

    data = ROOT / ".tessera-cache" / f"hits-golden-{ROWS}-seed{SEED}.parquet"
    if not data.exists():
        data.parent.mkdir(exist_ok=True)
        subprocess.run(
            ["cargo", "run", "--release", "-q", "-p", "tessera-cli", "--", "gen", "hits",
             "--rows", str(ROWS), "--seed", str(SEED), "--out", str(data)],
            check=True, cwd=ROOT)
    con = duckdb.connect()
    con.execute(f"CREATE TABLE hits AS SELECT * FROM read_parquet('{data}')")
    for q in sorted(QUERIES.glob("*.sql")):
        sql = "\n".join(l for l in q.read_text().splitlines() if not l.startswith("--"))
        rows = con.execute(sql).fetchall()
        out = q.with_suffix(".jsonl")
        out.write_text("".join(json.dumps([value(v) for v in r]) + "\n" for r in rows))
        print(f"{q.name}: {len(rows)} rows")


if __name__ == "__main__":
    sys.exit(main())
