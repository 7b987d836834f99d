#!/usr/bin/env python3
"""Storage benchmarks of issue 4: load speed and on-disk size of the hits table in
Tessera (LZ4 and ZSTD), DuckDB and chDB (ClickHouse MergeTree), from one Parquet file.

Usage: python3 scripts/bench-storage.py HITS.parquet WORKDIR [TESSERA_BINARY]
Needs `pip install duckdb chdb`. Prints one line per system; WORKDIR is wiped first.
With TESSERA_ONLY=1 only Tessera's loads run. Each system's output is deleted after it is
measured (10M rows take 2-3 GB each) unless KEEP=1.
"""
import os
import shutil
import subprocess
import sys
import time

src, work = sys.argv[1], sys.argv[2]
tessera = sys.argv[3] if len(sys.argv) > 3 else "target/release/tessera"
create_sql = open(os.path.join(os.path.dirname(__file__), "..", "datasets", "clickbench", "create.sql")).read()
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)


def du(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def report(name, rows, secs, size):
    print(f"{name:<28} {rows:>10} rows  load {secs:7.1f} s  {rows / secs / 1e6:6.2f} M rows/s  {size / 2**20:8.1f} MiB")


rows = None
print(f"{'parquet (input, ZSTD)':<28} {'':>10}       {'':>7}                      {du(src) / 2**20:8.1f} MiB")

for codec in ["lz4", "zstd(3)"]:
    db = os.path.join(work, f"tessera-{codec[:4]}")
    t = time.time()
    subprocess.run([tessera, "load", "--db", db, "--codec", codec, "hits", src], check=True, stderr=subprocess.DEVNULL)
    secs = time.time() - t
    import duckdb  # noqa: E402  (also used to count rows)
    if rows is None:
        rows = duckdb.connect().execute(f"SELECT COUNT(*) FROM read_parquet('{src}')").fetchall()[0][0]
    report(f"tessera {codec}", rows, secs, du(db))
    if not os.environ.get("KEEP"):
        shutil.rmtree(db)

if os.environ.get("TESSERA_ONLY"):
    sys.exit(0)

import duckdb  # noqa: E402

path = os.path.join(work, "duck.db")
con = duckdb.connect(path)
t = time.time()
con.execute(f"CREATE TABLE hits AS SELECT * FROM read_parquet('{src}')")
con.execute("CHECKPOINT")
secs = time.time() - t
con.close()
report("duckdb " + duckdb.__version__, rows, secs, du(path))
if not os.environ.get("KEEP"):
    os.remove(path)

from chdb import session  # noqa: E402

path = os.path.join(work, "chdb")
s = session.Session(path)
s.query("CREATE DATABASE IF NOT EXISTS bench")
s.query("USE bench")
ddl = create_sql.split(";")[0].replace("CREATE OR REPLACE TABLE hits", "CREATE TABLE bench.hits")
ddl = ddl.split("SETTINGS")[0]
s.query(ddl)
t = time.time()
s.query(f"INSERT INTO bench.hits SELECT * FROM file('{os.path.abspath(src)}', Parquet)")
secs = time.time() - t
size = int(str(s.query("SELECT sum(bytes_on_disk) FROM system.parts WHERE database = 'bench' AND table = 'hits' AND active", "CSV")).strip())
parts = str(s.query("SELECT count() FROM system.parts WHERE database = 'bench' AND table = 'hits' AND active", "CSV")).strip()
report(f"chdb MergeTree ({parts} parts)", rows, secs, size)
s.close()
