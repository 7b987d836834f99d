#!/usr/bin/env python3
"""Format compatibility of Tessera with ClickHouse (chDB), both directions.

A chDB table `e` holds every type Tessera stores, nullable and not, with NULLs, empty
strings, bytes that are not UTF-8, extreme values, NaN/inf/-0, the ends of Date32 and
DateTime, plus 3,000 generated rows. The reference is chDB's own
`SELECT * FROM e ORDER BY u FORMAT TabSeparated`.

* chDB -> Tessera: chDB writes `e` in each format (Arrow and Parquet also LZ4 and ZSTD);
  `tessera load --format F` reads it into a table created with Tessera's DDL, and, for the
  formats that carry types, into a new table typed from the input; Tessera's TSV of the
  table must equal the reference byte for byte.
* Tessera -> chDB: Tessera writes the table in each format (Arrow and Parquet also LZ4 and
  ZSTD); chDB reads the file (`file(path, F, structure)`), and its TSV must equal the
  reference. For the row formats (RowBinary*, TSV, CSV, JSONEachRow) Tessera's bytes must
  also equal chDB's bytes for the same query.
* ClickHouse compressed blocks (Native/RowBinary/text `--compression lz4|zstd`): chDB does
  not read them from files, so the script checks Tessera's block reader on the `.bin`
  column files of a chDB MergeTree table (LZ4 and ZSTD codecs, CityHash128 checksums):
  `tessera load --format RowBinary --compression lz4` of `u.bin` gives chDB's values.

`--write-fixtures DIR` also writes the small files the Rust tests
(`crates/formats/tests/chdb_fixtures.rs`) check without Python.

Exits 1 on any mismatch, printing each; the last line is `N passed, N failed`.
"""

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import chdb
from chdb import session

COLUMNS = [
    ("u", "UInt64", "UInt64 NOT NULL"),
    ("i8", "Nullable(Int8)", "Int8"),
    ("i16", "Nullable(Int16)", "Int16"),
    ("i32", "Nullable(Int32)", "Int32"),
    ("i64", "Nullable(Int64)", "Int64"),
    ("u8", "Nullable(UInt8)", "UInt8"),
    ("u16", "Nullable(UInt16)", "UInt16"),
    ("u32", "Nullable(UInt32)", "UInt32"),
    ("f32", "Nullable(Float32)", "Float32"),
    ("f64", "Nullable(Float64)", "Float64"),
    ("s", "Nullable(String)", "String"),
    ("b", "String", "BYTEA NOT NULL"),
    ("d", "Nullable(Date32)", "DATE"),
    ("t", "Nullable(DateTime('UTC'))", "DateTime"),
    ("n", "Int32", "Int32 NOT NULL"),
]
STRUCTURE = ", ".join(f"{n} {t}" for n, t, _ in COLUMNS)
TESSERA_DDL = "CREATE TABLE e (" + ", ".join(f"{n} {t}" for n, _, t in COLUMNS) + ") ENGINE = MergeTree ORDER BY (u)"

EDGE_ROWS = r"""
(0, -128, -32768, -2147483648, -9223372036854775808, 0, 0, 0, 1.1754944e-38, inf, '', '', '1900-01-01', '1970-01-01 00:00:00', 1),
(1, 127, 32767, 2147483647, 9223372036854775807, 255, 65535, 4294967295, 3.4028235e38, -inf,
 'tab\tnl\nquote"apos\'back\\slash/', unhex('FFFE00206E6F7420757466382080'), '2299-12-31', '2106-02-07 06:28:15', 2),
(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '', NULL, NULL, 3),
(3, 0, 0, 0, 0, 1, 1, 1, -0., 5e-324, '\\N', '\\N', '1970-01-01', '2020-01-02 03:04:05', 4),
(4, -1, -1, -1, -1, 2, 2, 2, nan, 0.1, 'é \u2028 \x01\x7f, \r\n\0 😀', unhex('22090A2C'), '2020-01-01', '1970-01-01 23:59:59', 5)
"""

GENERATED = """
INSERT INTO e SELECT number + 5, toInt8(number % 256), toInt16(number * 7), if(number % 11 = 0, NULL, toInt32(number * 1000003)),
  toInt64(number) * -1000000007, toUInt8(number % 200), toUInt16(number % 60000), toUInt32(number * 99991),
  toFloat32(number) / 7, if(number % 13 = 0, NULL, number / 3), if(number % 5 = 0, NULL, repeat(toString(number), number % 4)),
  unhex(hex(number * 31)), toDate32('1950-01-01') + number * 17, toDateTime('2000-01-01 00:00:00', 'UTC') + number * 86413,
  toInt32(number)
FROM numbers(3000)
"""

# Formats both sides read and write; (format, chDB settings to write it, Tessera's --compression).
FORMATS = ["Native", "RowBinary", "RowBinaryWithNames", "RowBinaryWithNamesAndTypes", "TabSeparated",
           "TabSeparatedWithNames", "CSV", "CSVWithNames", "JSONEachRow", "Parquet", "Arrow", "ArrowStream"]
TYPED = {"Native", "RowBinaryWithNamesAndTypes", "Parquet", "Arrow", "ArrowStream"}
# Formats whose types say exactly what the table holds, so a new table typed from chDB's
# file prints like the reference (ClickHouse writes DateTime to Arrow and Parquet as UInt32).
EXACT_TYPES = {"Native", "RowBinaryWithNamesAndTypes"}
ROW_FORMATS = {"RowBinary", "RowBinaryWithNames", "RowBinaryWithNamesAndTypes", "TabSeparated",
               "TabSeparatedWithNames", "CSV", "CSVWithNames", "JSONEachRow"}
INSIDE = {
    "Parquet": {"none": "output_format_parquet_compression_method='none'",
                "lz4": "output_format_parquet_compression_method='lz4'",
                "zstd": "output_format_parquet_compression_method='zstd'"},
    "Arrow": {"none": "output_format_arrow_compression_method='none'",
              "lz4": "output_format_arrow_compression_method='lz4_frame'",
              "zstd": "output_format_arrow_compression_method='zstd'"},
    "ArrowStream": {"none": "output_format_arrow_compression_method='none'",
                    "lz4": "output_format_arrow_compression_method='lz4_frame'",
                    "zstd": "output_format_arrow_compression_method='zstd'"},
}
# JSONEachRow: Tessera quotes NaN/inf (output_format_json_quote_denormals = 1) so they read back.
# Arrow: chDB's default types String as Arrow utf8 even where its bytes are not UTF-8, which
# Arrow forbids (arrow-rs refuses such a file with a typed error); as binary it is valid.
# Parquet likewise (UTF8-annotated BYTE_ARRAY; the parquet crate refuses it).
CHDB_WRITE_SETTINGS = {"JSONEachRow": "output_format_json_quote_denormals=1",
                       "Parquet": "output_format_parquet_string_as_string=0",
                       "Arrow": "output_format_arrow_string_as_string=0",
                       "ArrowStream": "output_format_arrow_string_as_string=0"}


class Check:
    def __init__(self):
        self.passed = 0
        self.failed = []

    def eq(self, what, got: bytes, want: bytes):
        if got == want:
            self.passed += 1
            return
        gl, wl = got.split(b"\n"), want.split(b"\n")
        first = next((i for i, (a, b) in enumerate(zip(gl, wl)) if a != b), min(len(gl), len(wl)))
        detail = (f"first difference at line {first + 1}:\n      got  {gl[first] if first < len(gl) else b'<end>'!r}\n"
                  f"      want {wl[first] if first < len(wl) else b'<end>'!r}")
        self.failed.append(f"{what}: {len(got)} bytes vs {len(want)}; {detail}")
        print(f"MISMATCH {self.failed[-1]}", flush=True)

    def fail(self, what, msg):
        self.failed.append(f"{what}: {msg}")
        print(f"FAIL {what}: {msg}", flush=True)


def esc(s):
    """`s` for a single-quoted SQL string."""
    return s.replace("\\", "\\\\").replace("'", "\\'")


def run(cmd, stdin=None):
    r = subprocess.run(cmd, input=stdin, capture_output=True, env={**os.environ, "TZ": "UTC"})
    return r.returncode, r.stdout, r.stderr.decode(errors="replace")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tessera", default="target/release/tessera", help="the tessera binary")
    ap.add_argument("--write-fixtures", metavar="DIR", help="also write the Rust tests' chDB fixtures here")
    args = ap.parse_args()
    tessera = str(Path(args.tessera).resolve())
    if not Path(tessera).exists():
        sys.exit(f"{tessera} does not exist: build it with cargo build --release")
    print(f"chDB {chdb.__version__}, tessera {tessera}")
    check = Check()
    work = Path(tempfile.mkdtemp(prefix="chdb-formats-"))
    try:
        s = session.Session(str(work / "chdb"))
        s.query("SET session_timezone = 'UTC'")
        s.query(f"CREATE TABLE e ({STRUCTURE}) ENGINE = Memory")
        s.query(f"INSERT INTO e VALUES {EDGE_ROWS}")
        s.query(GENERATED)
        q = "SELECT * FROM e ORDER BY u"
        reference = s.query(q, "TabSeparated").bytes()
        print(f"reference: {len(reference.splitlines())} rows")

        def chdb_bytes(fmt, comp="none"):
            settings = [x for x in (CHDB_WRITE_SETTINGS.get(fmt), INSIDE.get(fmt, {}).get(comp)) if x]
            sql = q + (" SETTINGS " + ", ".join(settings) if settings else "")
            return s.query(sql, fmt).bytes()

        def tessera_db(name):
            d = work / name
            code, _, err = run([tessera, "query", "--db", str(d), TESSERA_DDL])
            if code != 0:
                raise RuntimeError(f"tessera CREATE TABLE: {err}")
            return d

        # chDB -> Tessera.
        for fmt in FORMATS:
            for comp in (["none", "lz4", "zstd"] if fmt in INSIDE else ["none"]):
                what = f"chDB -> Tessera {fmt} ({comp})"
                f = work / f"chdb.{fmt}.{comp}.data"
                f.write_bytes(chdb_bytes(fmt, comp))
                targets = [("ddl", tessera_db(f"a-{fmt}-{comp}"))]
                if fmt in EXACT_TYPES:
                    targets.append(("typed from the input", work / f"n-{fmt}-{comp}"))
                for how, d in targets:
                    code, _, err = run([tessera, "load", "--db", str(d), "--format", fmt, "e", str(f)])
                    if code != 0:
                        check.fail(f"{what}, {how}", f"load exit {code}: {err.strip()}")
                        continue
                    code, out, err = run([tessera, "query", "--db", str(d), "--format", "TSV", q])
                    if code != 0:
                        check.fail(f"{what}, {how}", f"query exit {code}: {err.strip()}")
                        continue
                    check.eq(f"{what}, {how}", out, reference)

        # Tessera -> chDB: the table Tessera holds (loaded from chDB's Native above).
        src = work / "a-Native-none"
        for fmt in FORMATS:
            for comp in (["none", "lz4", "zstd"] if fmt in INSIDE else ["none"]):
                what = f"Tessera -> chDB {fmt} ({comp})"
                f = work / f"tessera.{fmt}.{comp}.data"
                code, _, err = run([tessera, "query", "--db", str(src), "--format", fmt, "--compression", comp,
                                    "--out", str(f), q])
                if code != 0:
                    check.fail(what, f"tessera exit {code}: {err.strip()}")
                    continue
                structures = [STRUCTURE] + (["(from the file)"] if fmt in TYPED else [])
                for st in structures:
                    arg = "" if st == "(from the file)" else f", '{esc(st)}'"
                    # Types chDB infers from the file may differ (Binary, timestamps): compare
                    # the values cast to the table's types.
                    cols = "*" if arg else ", ".join(f"CAST({n}, '{esc(t)}') AS {n}" for n, t, _ in COLUMNS)
                    try:
                        got = s.query(f"SELECT {cols} FROM file('{f}', {fmt}{arg}) ORDER BY u", "TabSeparated").bytes()
                    except Exception as e:  # chDB raises on a file it cannot read
                        check.fail(what, f"chDB: {e}")
                        continue
                    check.eq(f"{what}, chDB structure {'given' if arg else 'from the file'}", got, reference)
                if fmt in ROW_FORMATS:
                    check.eq(f"{what}: Tessera's bytes equal chDB's", f.read_bytes(), chdb_bytes(fmt))

        # Tessera's own compressed blocks round-trip through Tessera (chDB reads them only
        # over its native protocol).
        for fmt in ["Native", "RowBinaryWithNamesAndTypes", "CSVWithNames", "JSONEachRow"]:
            for comp in ["lz4", "zstd"]:
                what = f"Tessera -> Tessera {fmt} in ClickHouse compressed blocks ({comp})"
                f = work / f"tessera.{fmt}.{comp}.data"
                run([tessera, "query", "--db", str(src), "--format", fmt, "--compression", comp, "--out", str(f), q])
                d = tessera_db(f"c-{fmt}-{comp}")
                code, _, err = run([tessera, "load", "--db", str(d), "--format", fmt, "--compression", comp, "e", str(f)])
                if code != 0:
                    check.fail(what, f"load exit {code}: {err.strip()}")
                    continue
                _, out, _ = run([tessera, "query", "--db", str(d), "--format", "TSV", q])
                check.eq(what, out, reference)

        # ClickHouse's compressed blocks as chDB writes them: MergeTree column files.
        ms = s  # one chDB session per process
        ms.query("CREATE DATABASE IF NOT EXISTS db")
        for codec in ["LZ4", "ZSTD(3)", "NONE"]:
            name = "m_" + codec.split("(")[0].lower()
            ms.query(f"CREATE TABLE db.{name} (u UInt64 CODEC({codec})) ENGINE = MergeTree ORDER BY u "
                     "SETTINGS min_bytes_for_wide_part = 0, min_rows_for_wide_part = 0")
            ms.query(f"INSERT INTO db.{name} SELECT number * 7919 FROM numbers(200000)")
            bins = glob.glob(str(work / "chdb" / "data" / "db" / name / "*" / "u.bin"))
            if len(bins) != 1:
                check.fail(f"chDB MergeTree {codec}", f"expected one u.bin, found {bins}")
                continue
            d = work / f"mt-{name}"
            run([tessera, "query", "--db", str(d), "CREATE TABLE m (u UInt64 NOT NULL) ORDER BY (u)"])
            comp = {"LZ4": "lz4", "ZSTD(3)": "zstd", "NONE": "none"}[codec]
            # A .bin file of codec NONE still has block framing (method 0x02): read as lz4 framing too.
            code, _, err = run([tessera, "load", "--db", str(d), "--format", "RowBinary", "--compression",
                                comp if comp != "none" else "lz4", "m", bins[0]])
            if code != 0:
                check.fail(f"chDB MergeTree {codec} blocks", f"load exit {code}: {err.strip()}")
                continue
            _, out, _ = run([tessera, "query", "--db", str(d), "--format", "TSV", "SELECT u FROM m ORDER BY u"])
            want = ms.query(f"SELECT u FROM db.{name} ORDER BY u", "TabSeparated").bytes()
            check.eq(f"chDB MergeTree {codec} compressed blocks read by Tessera", out, want)
            if args.write_fixtures and codec != "NONE":
                fx = Path(args.write_fixtures)
                fx.mkdir(parents=True, exist_ok=True)
                small = f"m_small_{name}"
                ms.query(f"CREATE TABLE db.{small} (u UInt64 CODEC({codec})) ENGINE = MergeTree ORDER BY u "
                         "SETTINGS min_bytes_for_wide_part = 0, min_rows_for_wide_part = 0")
                ms.query(f"INSERT INTO db.{small} SELECT number * 7919 FROM numbers(10000)")
                b = glob.glob(str(work / "chdb" / "data" / "db" / small / "*" / "u.bin"))[0]
                shutil.copy(b, fx / f"mergetree_u_{comp}.bin")

        if args.write_fixtures:
            fx = Path(args.write_fixtures)
            fx.mkdir(parents=True, exist_ok=True)
            small = "SELECT * FROM e WHERE u < 5 OR u % 997 = 0 ORDER BY u"
            for fmt in ["Native", "RowBinaryWithNamesAndTypes", "TabSeparated", "CSVWithNames", "JSONEachRow",
                        "Parquet", "ArrowStream"]:
                settings = CHDB_WRITE_SETTINGS.get(fmt)
                sql = small + (f" SETTINGS {settings}" if settings else "")
                (fx / f"edge.{fmt}").write_bytes(s.query(sql, fmt).bytes())
            (fx / "edge.reference.tsv").write_bytes(s.query(small, "TabSeparated").bytes())
            (fx / "README.md").write_text(
                "Files written by chDB " + chdb.__version__ + " with `python3 tests/chdb_formats.py --write-fixtures "
                "crates/formats/tests/fixtures` (table `e` of that script, rows `u < 5 OR u % 997 = 0`; MergeTree "
                "`u.bin` files of 10,000 UInt64 values `number * 7919` with CODEC(LZ4) and CODEC(ZSTD(3))). "
                "Read by `crates/formats/tests/chdb_fixtures.rs`.\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for f in check.failed:
        print(f"failed: {f}")
    print(f"{check.passed} passed, {len(check.failed)} failed")
    sys.exit(1 if check.failed else 0)


if __name__ == "__main__":
    main()
