#!/usr/bin/env python3
"""chDB's side of `tessera bench --suite formats`: one case per process.

Argument: a JSON object {op, sql, format, compression, path, structure, dir, runs}.
* op "read": `sql INTO OUTFILE path [COMPRESSION 'lz4'] FORMAT format` (Arrow/Parquet
  compress inside the format through settings instead);
* op "write memory" / "write disk": `INSERT INTO t FROM INFILE path .. FORMAT format` into a
  `Memory` / `MergeTree ORDER BY tuple()` table of `structure` (in session directory dir).
Runs the statement `runs` times in one process (as Tessera's runs share its process) and
prints the run of median time: {seconds, cpu_seconds, peak_rss_bytes, bytes} measured
around the statement, as the Rust side measures Tessera: wall time, process CPU time, RSS
sampled every 10 ms.
"""

import json
import os
import resource
import sys
import threading
import time

from chdb import session

INSIDE = {"parquet": "output_format_parquet_compression_method", "arrow": "output_format_arrow_compression_method",
          "arrowstream": "output_format_arrow_compression_method"}
VALUES = {"parquet": {"none": "none", "lz4": "lz4", "zstd": "zstd"},
          "arrow": {"none": "none", "lz4": "lz4_frame", "zstd": "zstd"}}


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run_once(s, spec):
    """One run of the case in session `s`: {seconds, cpu_seconds, peak_rss_bytes, bytes}."""
    fmt, comp, path = spec["format"], spec["compression"], spec["path"]
    key = fmt.lower()
    inside = INSIDE.get(key)
    if spec["op"] == "read":
        if os.path.exists(path):
            os.remove(path)
        if inside:
            setting = f"{inside} = '{VALUES['parquet' if key == 'parquet' else 'arrow'][comp]}'"
            sql = f"{spec['sql']} INTO OUTFILE '{path}' FORMAT {fmt} SETTINGS {setting}"
        else:
            c = "" if comp == "none" else f" COMPRESSION '{comp}'"
            sql = f"{spec['sql']} INTO OUTFILE '{path}'{c} FORMAT {fmt}"
    else:
        engine = "Memory" if spec["op"] == "write memory" else "MergeTree ORDER BY tuple()"
        s.query("DROP TABLE IF EXISTS w")
        s.query(f"CREATE TABLE w ({spec['structure']}) ENGINE = {engine}")
        c = "" if comp == "none" or inside else f" COMPRESSION '{comp}'"
        sql = f"INSERT INTO w FROM INFILE '{path}'{c} FORMAT {fmt}"
    peak = [rss()]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], rss())
            time.sleep(0.01)

    t = threading.Thread(target=sample)
    t.start()
    c0, t0 = cpu(), time.perf_counter()
    s.query(sql)
    secs, cpus = time.perf_counter() - t0, cpu() - c0
    stop.set()
    t.join()
    peak[0] = max(peak[0], rss())
    if spec["op"] != "read":
        s.query("DROP TABLE IF EXISTS w")
    return {"seconds": secs, "cpu_seconds": cpus, "peak_rss_bytes": peak[0], "bytes": os.path.getsize(path)}


def main():
    spec = json.loads(sys.argv[1])
    s = session.Session(spec["dir"])
    runs = sorted((run_once(s, spec) for _ in range(max(1, spec.get("runs", 1)))), key=lambda r: r["seconds"])
    print(json.dumps(runs[len(runs) // 2]))


if __name__ == "__main__":
    main()
