#!/usr/bin/env python3
"""Differential SQL fuzzer: random queries through Tessera and DuckDB, answers compared.

    python3 scripts/fuzz.py --worker target/release/examples/sql_worker \
        --tessera target/release/tessera --seed 1 --queries 2000 --out fuzz-report.txt

A seeded grammar-based generator writes queries over two tables, both Parquet files that
both engines read:

* ``hits``: the ClickBench table from Tessera's own generator (``tessera gen hits``),
* ``edge``: edge values of every column type Tessera executes (Int8..Int64, UInt8..UInt64,
  Float32/64, Utf8, Binary, Date32, Timestamp), written by DuckDB: NULLs, +0.0/-0.0, NaN
  with both sign bits, +-inf, integer extremes, empty strings, LIKE metacharacters, tabs,
  newlines, non-ASCII, timestamps before 1970, many duplicates.

Tessera holds the tables as ``--source`` says: in memory (the default), streamed from the
Parquet files by every query, or as on-disk tables (``disk``: sort keys, granule size,
number of parts and a merge drawn from the seed), so the part reader's granule pruning,
PREWHERE, sparse blocks and caches answer the same random queries. A tenth of the queries
spill their GROUP BY and a tenth their ORDER BY (tiny ``max_bytes_before_external_*``).

Most queries are in the SQL subset README.md documents; a small share use constructs
outside it (Tessera must answer ``NotImplemented``), semantically invalid queries (a
specific typed error), or malformed SQL (``Parse``/``Plan``). Tessera runs in a long-lived
worker process (``examples/sql_worker.rs``, one JSON line per query); a worker that dies
(stack overflow, abort) is a crash and is restarted, one that does not answer in time is a
hang. Failures are shrunk (clauses, select items, predicate subtrees, OR lists dropped while
the failure stays the same) and grouped by the shape of the shrunk query.

Answers are compared so that the comparison never depends on what SQL leaves undetermined:
with ORDER BY over all visible outputs row by row; with ORDER BY over some outputs the key
sequence row by row and the rows within each run of equal keys as multisets (runs cut by
LIMIT/OFFSET only by key); without ORDER BY as multisets (with a LIMIT, Tessera's rows
must be a sub-multiset of DuckDB's unlimited answer). Floats: relative tolerance 1e-9
(absolute 1e-9 near zero), -0.0 == 0.0, every NaN equal to every NaN; integers exactly
(SUM of 64-bit integers is Decimal128(38,0) in Tessera, HUGEINT in DuckDB); dates and
timestamps by value.

Exit status: 0 when no crash, panic, internal error, hang or answer mismatch occurred
(outside the allow-list below), 1 otherwise, 2 on a setup error.
"""

import argparse
import collections
import copy
import datetime
import decimal
import itertools
import json
import math
import os
import random
import re
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import duckdb

from fuzz_sql import EXTRAS, SCHEMA, Gen, load_schema, make_edge_table, render

# ---------------------------------------------------------------------------------------
# Allow-list of known, explained differences. Each entry: (name, reason, predicate over a
# failure record). Keep it tiny: only documented semantic choices, never a wrong answer.
# ---------------------------------------------------------------------------------------
INTERVAL_UNITS = r"year|quarter|month|week|day|hour|minute|second|millisecond|microsecond"

ALLOW_LIST = [
    # (name, why, predicate over {"q", "outcome", "detail", "sql"}).
    ("implicit-alias-interval-unit",
     "ClickHouse takes a bare interval unit after a select item as its alias (`SELECT UserID "
     "minute` names the column `minute`; chDB 4.4 / ClickHouse 26.9 answers it) where DuckDB "
     "reserves the word: Tessera follows ClickHouse",
     lambda r: r["outcome"] == "accepted-invalid"
     and (m := re.search(r'syntax error at or near "(' + INTERVAL_UNITS + r')"', r["detail"], re.I)) is not None
     and re.search(r"[\w)]\s+" + m.group(1) + r"\s*(,|\bFROM\b)", r["sql"], re.I) is not None),
]

QUERY_TIMEOUT_S = 60.0

# ---------------------------------------------------------------------------------------
# Engines.
# ---------------------------------------------------------------------------------------

class Worker:
    """The Tessera worker process: one JSON line in, one JSON line out."""

    def __init__(self, cmd, log_path):
        self.cmd = cmd
        self.log_path = log_path
        self.proc = None
        self.hello = None
        self.restarts = 0

    def start(self):
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log)
        line = self._readline(120)
        if line is None:
            raise RuntimeError(f"worker did not start: {self.cmd} (see {self.log_path})")
        self.hello = json.loads(line)

    def _readline(self, timeout):
        r, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not r:
            return None
        line = self.proc.stdout.readline()
        return line.decode() if line else ""

    def stop(self):
        if self.proc is not None:
            try:
                self.proc.kill()
            except ProcessLookupError:
                pass
            self.proc.wait()
            self.proc = None
            self.log.close()

    def stderr_tail(self):
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, 2)
                f.seek(max(0, f.tell() - 2000))
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def send(self, sql):
        """Starts `sql`; `receive` gets the answer (DuckDB runs the query meanwhile)."""
        try:
            self.proc.stdin.write((json.dumps(sql) + "\n").encode())
            self.proc.stdin.flush()
            self.sent = True
        except (BrokenPipeError, OSError):
            self.sent = False

    def receive(self, timeout=QUERY_TIMEOUT_S):
        """A dict: {"ok": True, "types", "rows"} / {"ok": False, "kind", "msg"}; kind
        "Crash" when the worker died, "Hang" when it did not answer in time (either way it
        is restarted)."""
        line = self._readline(timeout) if self.sent else ""
        if line:
            return json.loads(line)
        if line is None:
            res = {"ok": False, "kind": "Hang", "msg": f"no answer in {timeout:.0f} s"}
        else:
            self.proc.wait()
            res = {"ok": False, "kind": "Crash",
                   "msg": f"worker exited with status {self.proc.returncode}: {self.stderr_tail()[-600:]}"}
        self.stop()
        self.restarts += 1
        self.start()
        return res

    def query(self, sql, timeout=QUERY_TIMEOUT_S):
        self.send(sql)
        return self.receive(timeout)


class Duck:
    def __init__(self, con):
        self.con = con

    def query(self, sql, timeout=QUERY_TIMEOUT_S):
        timer = threading.Timer(timeout, self.con.interrupt)
        timer.start()
        try:
            cur = self.con.execute(sql)
            rows = cur.fetchall()
            return {"ok": True, "rows": rows, "types": [str(d[1]) for d in cur.description]}
        except duckdb.Error as e:
            return {"ok": False, "kind": type(e).__name__, "msg": str(e).splitlines()[0][:300]}
        finally:
            timer.cancel()


# ---------------------------------------------------------------------------------------
# Value normalisation and comparison.
# ---------------------------------------------------------------------------------------

EPOCH = datetime.datetime(1970, 1, 1)
EPOCH_DATE = datetime.date(1970, 1, 1)
TS_FACTOR = {"Timestamp(s)": 10**6, "Timestamp(ms)": 10**3, "Timestamp(us)": 1, "Timestamp(ns)": None}


def norm_tessera(v, ty):
    if v is None:
        return None
    if ty in ("Float32", "Float64"):
        if isinstance(v, str):
            return float(v.replace("-nan", "nan"))
        return float(v)
    if ty == "Date32":
        return ("date", v)
    if ty.startswith("Timestamp"):
        f = TS_FACTOR.get(ty)
        return ("ts", v * f if f else v // 1000)
    if ty in ("Binary", "LargeBinary", "BinaryView"):
        return ("bin", v)
    if ty.startswith("Decimal"):
        return decimal.Decimal(v) if isinstance(v, str) else v
    return v


def norm_duck(v):
    if v is None:
        return None
    if isinstance(v, bool):
        return v
    if isinstance(v, datetime.datetime):
        return ("ts", (v - EPOCH) // datetime.timedelta(microseconds=1))
    if isinstance(v, datetime.date):
        return ("date", (v - EPOCH_DATE).days)
    if isinstance(v, (bytes, bytearray)):
        return ("bin", bytes(v).hex())
    if isinstance(v, decimal.Decimal):
        return int(v) if v == v.to_integral_value() else v
    return v


def num(v):
    return isinstance(v, (int, float, decimal.Decimal)) and not isinstance(v, bool)


def eq(a, b):
    if a is None or b is None:
        return a is None and b is None
    if num(a) and num(b):
        if isinstance(a, float) or isinstance(b, float):
            a, b = float(a), float(b)
            if math.isnan(a) or math.isnan(b):
                return math.isnan(a) and math.isnan(b)
            if math.isinf(a) or math.isinf(b):
                return a == b
            return abs(a - b) <= max(1e-9 * max(abs(a), abs(b)), 1e-9)
        return a == b
    return type(a) is type(b) and a == b


def row_eq(x, y):
    return len(x) == len(y) and all(eq(a, b) for a, b in zip(x, y))


def canon(v):
    """A sort key under which eq-equal values sort together (floats rounded)."""
    if v is None:
        return (0, 0)
    if isinstance(v, int) and not isinstance(v, bool):
        return (2, v)  # exact: rounding would merge distinct integers and misalign rows
    if isinstance(v, decimal.Decimal) and v.is_finite() and v == v.to_integral_value():
        return (2, int(v))  # as the int it equals (DuckDB's integral decimals arrive as ints)
    if num(v):
        f = float(v)
        if math.isnan(f):
            return (1, 0)
        if f == 0:
            return (2, 0)
        return (2, float(f"{f:.6g}"))
    if isinstance(v, tuple):
        return (3, v[0], str(v[1]))
    return (4, str(v))


def multiset_eq(a, b):
    if len(a) != len(b):
        return False
    sa = sorted(a, key=lambda r: [canon(v) for v in r])
    sb = sorted(b, key=lambda r: [canon(v) for v in r])
    if all(row_eq(x, y) for x, y in zip(sa, sb)):
        return True
    # Floats equal within the tolerance can still round to different sort keys and
    # misalign the sorted rows.
    return sub_multiset(a, b)


def sub_multiset(a, b):
    """Every row of `a` has its own row in `b` (with multiplicity), floats within the
    tolerance: the rows equal exactly are paired first, then each other row of `a` with the
    closest row of `b` within the tolerance among those with equal non-float columns (a
    column is a float column if either side holds a float there). Closest, not first: the
    tolerance is not transitive (AVGs 1073741823.0 and 1073741823.5 are within 1e-9 of each
    other), and taking the first candidate left a later row of a correct answer without its
    own pair (fuzz seed 20261207). With exact matching only, a LIMIT's rows whose AVG or
    VAR_POP differed from DuckDB's in the last bit were "not in DuckDB's unlimited answer"
    (seed 20261208). Greedy, not a full matching: it can refuse a correct answer only when
    distinct values lie within the tolerance of each other."""
    def exact_key(r):
        # Typed: Python's True == 1 (same hash), which `eq` tells apart (rows that differ only
        # so go to the matching within the tolerance below).
        return tuple((type(v).__name__, "nan" if isinstance(v, float) and math.isnan(v) else v) for v in r)
    left_b = collections.Counter(exact_key(y) for y in b)
    rest_a = []
    for x in a:
        k = exact_key(x)
        if left_b[k] > 0:
            left_b[k] -= 1
        else:
            rest_a.append(x)
    if not rest_a:
        return True
    rest_b = []
    for y in b:
        k = exact_key(y)
        if left_b[k] > 0:
            left_b[k] -= 1
            rest_b.append(y)
    floats = {i for r in itertools.chain(rest_a, rest_b) for i, v in enumerate(r) if isinstance(v, float)}
    exact = lambda r: tuple(canon(v) for i, v in enumerate(r) if i not in floats)

    def distance(x, y):
        return sum(abs(float(x[i]) - float(y[i])) / max(abs(float(x[i])), abs(float(y[i])), 1e-300)
                   for i in floats if num(x[i]) and num(y[i]) and not math.isnan(float(x[i])) and not math.isinf(float(x[i])))
    buckets = collections.defaultdict(list)
    for y in rest_b:
        buckets[exact(y)].append(y)
    for x in rest_a:
        left = buckets[exact(x)]
        best = min(((distance(x, y), j) for j, y in enumerate(left) if row_eq(x, y)), default=None)
        if best is None:
            return False
        del left[best[1]]
    return True


def compare_plan(q):
    """How to compare the answers of `q`: ("rows", None) when the order is determined,
    ("runs", key output indices), ("multiset", None), ("subset", None) or ("count", None)."""
    n_vis = len(q["items"])
    order = q.get("order", [])
    if not order:
        return ("subset", None) if (q.get("limit") is not None or q.get("offset")) else ("multiset", None)
    idx = []
    hidden = False
    for o in order:
        ref = o["ref"]
        if ref[0] in ("pos", "alias"):
            idx.append(ref[1])
            continue
        found = [i for i, it in enumerate(q["items"]) if it["expr"] == ref[1]]
        if found:
            idx.append(found[0])
        else:
            hidden = True
    if hidden and set(range(n_vis)) <= set(idx):
        return ("rows", None)
    if not hidden:
        seen = []
        for i in idx:
            if i not in seen:
                seen.append(i)
        return ("runs", seen)
    if q.get("limit") is None and not q.get("offset"):
        return ("multiset", None)
    return ("count", None)


def compare(q, trows, drows, duck_full=None):
    """None when equal, else a short description of the difference."""
    mode, keys = compare_plan(q)
    if trows and drows and len(trows[0]) != len(drows[0]):
        return f"column count {len(trows[0])} vs DuckDB {len(drows[0])}"
    if mode == "subset":
        if len(trows) != len(drows):
            return f"{len(trows)} rows vs DuckDB {len(drows)}"
        if duck_full is not None and not sub_multiset(trows, duck_full):
            return "rows not in DuckDB's unlimited answer"
        return None
    if mode == "count":
        return None if len(trows) == len(drows) else f"{len(trows)} rows vs DuckDB {len(drows)}"
    if len(trows) != len(drows):
        return f"{len(trows)} rows vs DuckDB {len(drows)}" + first_diff(trows, drows)
    if mode == "multiset":
        return None if multiset_eq(trows, drows) else "different rows (multiset)" + first_diff(
            sorted(trows, key=lambda r: [canon(v) for v in r]), sorted(drows, key=lambda r: [canon(v) for v in r]))
    if mode == "rows":
        for i, (x, y) in enumerate(zip(trows, drows)):
            if not row_eq(x, y):
                return f"row {i}: {show(x)} vs DuckDB {show(y)}"
        return None
    # runs. Keys after a float key are not checked: float keys equal within the tolerance
    # are ties here, while the engines may see them apart (AVG's last bit) and order the
    # rows by the next key.
    cut = []
    for i in keys:
        cut.append(i)
        if any(isinstance(r[i], float) for r in trows + drows):
            break
    keys = cut

    def kk(r):
        return [r[i] for i in keys]
    for i, (x, y) in enumerate(zip(trows, drows)):
        if not row_eq(kk(x), kk(y)):
            return f"row {i} keys: {show(kk(x))} vs DuckDB {show(kk(y))}"
    start = 0
    n = len(drows)
    cut_start = bool(q.get("offset"))
    cut_end = q.get("limit") is not None and n == q["limit"]
    while start < n:
        end = start + 1
        while end < n and row_eq(kk(drows[end]), kk(drows[start])):
            end += 1
        edge = (start == 0 and cut_start) or (end == n and cut_end)
        if not edge and not multiset_eq(trows[start:end], drows[start:end]):
            return f"rows {start}..{end} (equal keys) differ: {show(trows[start])} vs DuckDB {show(drows[start])}"
        start = end
    return None


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if not row_eq(x, y):
            return f"; first difference at {i}: {show(x)} vs DuckDB {show(y)}"
    if len(a) != len(b):
        extra = a[len(b)] if len(a) > len(b) else b[len(a)]
        return f"; first extra row: {show(extra)}"
    return ""


def show(row):
    s = repr(row)
    return s if len(s) < 300 else s[:300] + "..."


# ---------------------------------------------------------------------------------------
# Running one query and classifying the outcome.
# ---------------------------------------------------------------------------------------

FATAL = {"crash", "panic", "internal", "hang", "mismatch", "worker-bad-answer"}


def expected_kinds(q):
    if q.get("extra") is None:
        return None
    return EXTRAS[q["extra"][0]][0]


def run_one(q, worker, duck):
    """Runs `q` on both engines: (outcome, detail, tessera SQL, DuckDB SQL). Outcomes:
    equal, mismatch, crash, panic, internal, hang, tessera-error (Tessera typed error where
    DuckDB succeeded on an in-subset query), duckdb-error (DuckDB failed, Tessera not),
    both-error, expected-error (the typed error a construct outside the subset should get),
    wrong-error-kind, accepted-invalid (Tessera answered what DuckDB rejects as invalid),
    worker-bad-answer."""
    tsql = render(q, duck=False)
    dsql = render(q, duck=True)
    worker.send(tsql)
    d = duck.query(dsql)  # while Tessera runs
    t = worker.receive()
    kind = t.get("kind")
    if not t["ok"]:
        if kind in ("Crash", "Hang", "Panic", "Internal"):
            return (kind.lower(), t["msg"][:800], tsql, dsql)
        if kind in ("WorkerUnsupportedType", "BadRequest"):
            return ("worker-bad-answer", t["msg"], tsql, dsql)
    exp = expected_kinds(q)
    if not t["ok"]:
        if exp is not None:
            if q["cat"] == "unsupported" and kind in ("Plan", "TypeMismatch", "UnknownColumn") and not d["ok"]:
                # A construct the expression layer now runs, added to a query that both
                # engines reject (a column neither grouped nor aggregated, an alias the
                # construct's select list dropped, ...).
                return ("both-error", f"{kind} / DuckDB {d['kind']}", tsql, dsql)
            if kind in exp:
                return ("expected-error", kind, tsql, dsql)
            if q["cat"] == "malformed" and kind in ("UnknownColumn", "UnknownTable", "TypeMismatch", "NotImplemented", "InvalidArgument"):
                return ("expected-error", kind, tsql, dsql)
            # The query the construct was added to may fail first, for its own reason.
            base = worker.query(render(dict(q, extra=None), duck=False))
            if not base["ok"] and base.get("kind") == kind:
                return ("expected-error", kind, tsql, dsql)
            return ("wrong-error-kind", f"{kind} (expected {'/'.join(exp)}): {t['msg'][:300]}", tsql, dsql)
        if d["ok"]:
            return ("tessera-error", f"{kind}: {t['msg'][:300]}", tsql, dsql)
        return ("both-error", f"{kind} / DuckDB {d['kind']}", tsql, dsql)
    if not d["ok"]:
        if exp is not None and q["cat"] in ("invalid", "malformed"):
            return ("accepted-invalid", f"DuckDB: {d['msg'][:300]}", tsql, dsql)
        return ("duckdb-error", f"{d['kind']}: {d['msg'][:300]}", tsql, dsql)
    try:
        trows = [[norm_tessera(v, ty) for v, ty in zip(r, t["types"])] for r in t["rows"]]
    except (TypeError, ValueError) as e:
        return ("worker-bad-answer", f"cannot read Tessera's answer: {e}", tsql, dsql)
    drows = [[norm_duck(v) for v in r] for r in d["rows"]]
    full = None
    if q.get("extra") is None and compare_plan(q)[0] == "subset":
        # Tessera's rows must be among DuckDB's unlimited answer (checked when small).
        qq = dict(q, limit=None, offset=None)
        f = duck.query(f"SELECT * FROM ({render(qq, duck=True)}) LIMIT 3001")
        if f["ok"] and len(f["rows"]) <= 3000:
            full = [[norm_duck(v) for v in r] for r in f["rows"]]
    if q.get("extra") is not None:
        # Outside the subset (or mutated) but answered by both. A construct Tessera
        # silently ignored shows as a multiset difference when LIMIT/OFFSET cannot cut.
        if q["cat"] != "unsupported" or q.get("limit") is not None or q.get("offset") or \
                q["extra"][0] in ("union", "join"):
            return ("unchecked", "", tsql, dsql)
        if multiset_eq(trows, drows):
            return ("equal", "", tsql, dsql)
        return ("mismatch", "different rows (multiset)" + first_diff(
            sorted(trows, key=lambda r: [canon(v) for v in r]), sorted(drows, key=lambda r: [canon(v) for v in r])),
            tsql, dsql)
    diff = compare(q, trows, drows, full)
    if diff is not None and compare_plan(q)[0] in ("rows", "count"):
        # Hidden ORDER BY keys: a float key (AVG, a float column) whose values differ in
        # the last bits, or are tied in one engine and not in the other, may legitimately
        # order rows differently. Judge again with the hidden keys shown, where keys within
        # the tolerance count as ties.
        q2 = expose_hidden(q)
        worker.send(render(q2, duck=False))
        d2 = duck.query(render(q2, duck=True))
        t2 = worker.receive()
        if t2["ok"] and d2["ok"]:
            t2rows = [[norm_tessera(v, ty) for v, ty in zip(r, t2["types"])] for r in t2["rows"]]
            d2rows = [[norm_duck(v) for v in r] for r in d2["rows"]]
            if compare(q2, t2rows, d2rows) is None:
                diff = None
    if diff is None:
        return ("equal", "", tsql, dsql)
    return ("mismatch", diff, tsql, dsql)


def expose_hidden(q):
    """`q` with its hidden ORDER BY keys added to the SELECT list (same order, same rows)."""
    q2 = copy.deepcopy(q)
    for o in q2.get("order", []):
        ref = o["ref"]
        if ref[0] == "expr" and all(it["expr"] != ref[1] for it in q2["items"]):
            q2["items"].append({"expr": ref[1], "alias": None})
    q2["star"] = False
    return q2


# ---------------------------------------------------------------------------------------
# Shrinking.
# ---------------------------------------------------------------------------------------

def pred_children(p):
    t = p[0]
    if t in ("and", "or"):
        return [p[1], p[2]]
    if t in ("not", "paren"):
        return [p[1]]
    if t == "orlist":
        n = len(p[1])
        out = []
        if n > 1:
            out += [("orlist", p[1][: n // 2]), ("orlist", p[1][n // 2:])]
            if n > 8:
                out += [("orlist", p[1][: n * 3 // 4]), ("orlist", p[1][: n * 9 // 10])]
        return out
    return []


def pred_variants(p):
    """Smaller predicates: each child, and the node with one child shrunk."""
    out = list(pred_children(p))
    t = p[0]
    if t in ("and", "or"):
        for i in (1, 2):
            for v in pred_variants(p[i]):
                n = list(p)
                n[i] = v
                out.append(tuple(n))
    elif t in ("not",):
        out += [("not", v) for v in pred_variants(p[1])]
    elif t == "paren" and p[2] > 1:
        out.append(("paren", p[1], p[2] // 2))
        out.append(("paren", p[1], p[2] - 1))
    return out


def drop_item(q, i):
    """`q` without select item i (references to it become expressions or are dropped)."""
    q = copy_q(q)
    expr = q["items"][i]["expr"]

    def fix(ref):
        if ref[0] in ("pos", "alias"):
            if ref[1] == i:
                return ("expr", expr)
            if ref[1] > i:
                return (ref[0], ref[1] - 1)
        return ref
    del q["items"][i]
    q["group"] = [fix(r) for r in q.get("group", [])]
    q["order"] = [dict(o, ref=fix(o["ref"])) for o in q.get("order", [])]
    q["star"] = False
    return q


def copy_q(q):
    return copy.deepcopy(q)


def shrink_candidates(q):
    c = []
    if q.get("settings"):
        c.append(dict(copy_q(q), settings=[]))
        for i in range(len(q["settings"])):
            n = copy_q(q)
            del n["settings"][i]
            c.append(n)
    if q.get("offset") is not None:
        c.append(dict(copy_q(q), offset=None, limit_comma=False))
    if q.get("limit") is not None:
        c.append(dict(copy_q(q), limit=None, limit_comma=False))
    if q.get("where") is not None:
        c.append(dict(copy_q(q), where=None))
        for v in pred_variants(q["where"])[:40]:
            c.append(dict(copy_q(q), where=v))
    for i in range(len(q.get("order", []))):
        n = copy_q(q)
        del n["order"][i]
        c.append(n)
    if len(q["items"]) > 1:
        for i in range(len(q["items"])):
            c.append(drop_item(q, i))
    for i in range(len(q.get("group", []))):
        n = copy_q(q)
        del n["group"][i]
        c.append(n)
    for i, o in enumerate(q.get("order", [])):
        if o["nulls"] is not None or o["desc"] is not None:
            n = copy_q(q)
            n["order"][i] = dict(o, nulls=None, desc=None)
            c.append(n)
    for i, it in enumerate(q["items"]):
        if it["alias"] and not any(r == ("alias", i) for r in q.get("group", []) + [o["ref"] for o in q.get("order", [])]):
            n = copy_q(q)
            n["items"][i] = dict(it, alias=None)
            c.append(n)
    return c


def shrink(q, outcome, detail, worker, duck, budget_s):
    """Greedy shrinking: take any smaller query with the same outcome (and error kind)."""
    deadline = time.time() + budget_s
    key = (outcome, detail.split(":")[0] if outcome in ("tessera-error", "wrong-error-kind") else "")
    best = q
    steps = 0
    improved = True
    while improved and time.time() < deadline:
        improved = False
        for cand in shrink_candidates(best):
            if time.time() >= deadline:
                break
            steps += 1
            try:
                res = run_one(cand, worker, duck)
            except Exception:  # noqa: BLE001 - a candidate the renderer cannot express
                continue
            k = (res[0], res[1].split(":")[0] if res[0] in ("tessera-error", "wrong-error-kind") else "")
            if k == key:
                best = cand
                improved = True
                break
    return best, steps


def shape(sql, table=None):
    """The shape of a query: literals, numbers and aliases replaced, columns replaced by
    their types, for grouping failures."""
    s = re.sub(r"'(?:[^']|'')*'", "'?'", sql)
    if table in SCHEMA:
        types = {c.name: c.ttype for c in SCHEMA[table]}
        s = re.sub(r"\b[A-Za-z_][A-Za-z0-9_]*\b", lambda m: f"<{types[m.group(0)]}>" if m.group(0) in types else m.group(0), s)
    s = re.sub(r"\b\d+(\.\d+)?(e[+-]?\d+)?\b", "N", s)
    s = re.sub(r"\ba\d+\b", "alias", s)
    s = re.sub(r"SETTINGS .*", "", s)
    return s


def features(q):
    """A coarse signature of an unshrunk query (to limit shrinking per kind of query)."""
    f = set()
    for it in q["items"]:
        e = it["expr"]
        if e[0] == "agg":
            arg = e[2]
            f.add(e[1] + "(" + (col_kind(q, arg[1]) if arg else "*") + ")")
    if q.get("group"):
        f.add("group")
    if q.get("order"):
        f.add("order")
    return tuple(sorted(f)) + (q["table"], q["cat"], q.get("extra", [None])[0] if q.get("extra") else None)


def col_kind(q, name):
    for c in SCHEMA[q["table"]]:
        if c.name == name:
            return c.ttype
    return "?"


# ---------------------------------------------------------------------------------------
# Main loop.
# ---------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--rows", type=int, default=30000, help="rows of the generated hits table")
    ap.add_argument("--edge-rows", type=int, default=70000, help="rows of the edge-value table (> 65,536: two morsels)")
    ap.add_argument("--out", default="fuzz-report.txt", help="report file")
    ap.add_argument("--worker", required=True, help="the sql_worker example binary")
    ap.add_argument("--tessera", help="the tessera CLI binary (to generate hits)")
    ap.add_argument("--hits", help="an existing hits Parquet file instead of generating one")
    ap.add_argument("--data-dir", help="where data goes (default: a temp dir, deleted at exit)")
    ap.add_argument("--time-limit", type=float, default=0, help="stop after this many seconds (0: none)")
    ap.add_argument("--shrink-budget", type=float, default=0.25, help="share of the run time spent shrinking")
    ap.add_argument("--duckdb-threads", type=int, default=1)
    ap.add_argument("--source", choices=["memory", "stream", "disk"], default="memory",
                    help="how Tessera holds the tables: in memory (register_parquet), streamed from the "
                    "Parquet files at each query, or on-disk tables (a layout drawn from the seed: sort "
                    "keys, granule rows, parts, merged or not)")
    ap.add_argument("--avoid", default="", help="comma-separated known bugs whose triggers are not "
                    "generated: a (MIN/MAX of floats), c (floats compared/sorted/grouped), d (LIKE "
                    "escapes), e (long OR lists), m (minute() of nullable timestamps)")
    args = ap.parse_args()

    t0 = time.time()
    tmp = args.data_dir or tempfile.mkdtemp(prefix="tessera-fuzz-")
    os.makedirs(tmp, exist_ok=True)
    try:
        return run(args, tmp, t0)
    finally:
        if not args.data_dir:
            shutil.rmtree(tmp, ignore_errors=True)


def run(args, tmp, t0):
    hits = args.hits or os.path.join(tmp, "hits.parquet")
    if not args.hits:
        if not args.tessera:
            print("fuzz: give --hits FILE or --tessera BIN to generate one", file=sys.stderr)
            return 2
        subprocess.run([args.tessera, "gen", "hits", "--rows", str(args.rows), "--seed", str(args.seed),
                        "--out", hits], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    edge = os.path.join(tmp, "edge.parquet")
    con = duckdb.connect()
    con.execute(f"SET threads = {args.duckdb_threads}")
    make_edge_table(con, edge, args.edge_rows, args.seed)
    for name, path in (("hits", hits), ("edge", edge)):
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM read_parquet('{path}')")
    worker_args, layout = worker_source_args(args, tmp, hits, edge)
    worker = Worker([args.worker] + worker_args, os.path.join(tmp, "worker.log"))
    worker.start()
    rng = random.Random(args.seed)
    SCHEMA.update(load_schema(con, worker.hello, rng))
    level = worker.hello.get("simd_level", "scalar")
    family = ["scalar", "portable", "avx2", "avx512"] if level in ("scalar", "portable", "avx2", "avx512") \
        else ["scalar", "portable", "neon", "sve"]
    simd_levels = family[: family.index(level) + 1] if level in family else ["scalar"]
    gen = Gen(rng, SCHEMA, simd_levels, [a for a in args.avoid.split(",") if a])
    duck = Duck(con)
    setup_s = time.time() - t0
    print(f"fuzz: seed {args.seed}, hits {args.rows} rows, edge {args.edge_rows} rows, "
          f"source {args.source}{layout}, tessera {worker.hello.get('git')} ({level}), duckdb {duckdb.__version__}, "
          f"setup {setup_s:.1f} s",
          flush=True)

    counts = collections.Counter()
    err_kinds = collections.Counter()
    classes = {}      # shape of shrunk SQL -> record
    shrunk_per_feature = collections.Counter()
    unshrunk = collections.Counter()  # failures not shrunk (budget): only in the full list
    shrink_s = 0.0
    failures = []
    t_start = time.time()
    done = 0
    last_progress = t_start
    for n in range(args.queries):
        if args.time_limit and time.time() - t0 > args.time_limit:
            break
        q = gen.generate()
        outcome, detail, tsql, dsql = run_one(q, worker, duck)
        done += 1
        counts[outcome] += 1
        if outcome in ("tessera-error", "expected-error", "wrong-error-kind"):
            err_kinds[(q["cat"], outcome, detail.split(":")[0].split(" ")[0])] += 1
        allowed = next((a for a in ALLOW_LIST if a[2]({"q": q, "outcome": outcome, "detail": detail, "sql": tsql})), None)
        if allowed:
            counts["allow-listed"] += 1
            continue
        if outcome in FATAL or outcome in ("tessera-error", "wrong-error-kind", "accepted-invalid"):
            rec = {"n": n, "outcome": outcome, "detail": detail, "sql": tsql, "duck_sql": dsql, "cat": q["cat"]}
            feat = (outcome,) + features(q)
            elapsed = time.time() - t_start
            if shrunk_per_feature[feat] < 2 and shrink_s < args.shrink_budget * max(elapsed, 30):
                shrunk_per_feature[feat] += 1
                ts = time.time()
                small, steps = shrink(q, outcome, detail, worker, duck, budget_s=10)
                shrink_s += time.time() - ts
                o2, d2, t2, dd2 = run_one(small, worker, duck)
                if o2 == outcome:
                    rec.update(small_sql=t2, small_duck_sql=dd2, small_detail=d2, shrink_steps=steps)
            failures.append(rec)
            if "small_sql" in rec:
                cl = classes.setdefault((outcome, shape(rec["small_sql"], q["table"])), {"count": 0, "example": rec})
                cl["count"] += 1
            else:
                unshrunk[outcome] += 1
        if time.time() - last_progress > 30:
            last_progress = time.time()
            el = last_progress - t_start
            print(f"fuzz: {done} queries, {done / el:.1f} q/s, " + summary_counts(counts), flush=True)
    elapsed = time.time() - t_start
    worker.stop()
    fatal = sum(counts[k] for k in FATAL)
    line = (f"fuzz summary: seed {args.seed}, source {args.source}{layout}, {done} queries in {elapsed:.1f} s ({done / max(elapsed, 1e-9):.1f} q/s, "
            f"{shrink_s:.0f} s shrinking), " + summary_counts(counts) +
            f", worker restarts {worker.restarts}")
    kinds = ", ".join(f"{c}/{o}/{k}: {v}" for (c, o, k), v in sorted(err_kinds.items()))
    unshrunk_line = ", ".join(f"{k} {v}" for k, v in sorted(unshrunk.items())) or "none"
    write_report(args, line, kinds, classes, failures, unshrunk_line)
    print(line)
    print(f"fuzz errors by kind (category/outcome/kind: count): {kinds}")
    print(f"fuzz: {len(classes)} distinct failure classes (shrunk queries); failures not shrunk: "
          f"{unshrunk_line}; report in {args.out}")
    ordered = sorted(classes.items(), key=lambda kv: (kv[0][0] not in FATAL, kv[0][0], -kv[1]["count"]))
    for (outcome, _), cl in ordered[:80]:
        ex = cl["example"]
        print(f"  [{outcome} x{cl['count']}] {ex['small_sql'][:300]}")
    return 1 if fatal else 0


# The sort keys an on-disk edge table may get (floats with NaN and -0.0, strings with LIKE
# metacharacters, binaries, NULLs in every one) and ClickBench's key for hits.
EDGE_SORT_COLUMNS = ["i8", "i64", "u64", "f32", "f64", "s", "bin", "d", "ts", "k", "g"]
HITS_SORT_KEY = ["CounterID", "EventDate", "UserID", "EventTime", "WatchID"]


def worker_source_args(args, tmp, hits, edge):
    """The worker's arguments for `args.source`, and a description of the layout. The disk
    layout comes from its own RNG, so a seed generates the same queries for every source."""
    if args.source != "disk":
        flags = ["--source", args.source] if args.source != "memory" else []
        return flags + [f"hits={hits}", f"edge={edge}"], ""
    rng = random.Random(f"layout-{args.seed}")
    granule = rng.choice([16, 100, 1000, 8192])
    parts = rng.choice([1, 2, 3, 4])
    optimize = parts > 1 and rng.random() < 0.3
    hits_key = HITS_SORT_KEY if rng.random() < 0.7 else []
    edge_key = rng.sample(EDGE_SORT_COLUMNS, rng.choice([0, 1, 1, 2]))
    store = os.path.join(tmp, "store")
    shutil.rmtree(store, ignore_errors=True)
    flags = ["--source", "disk", "--store", store, "--granule-rows", str(granule), "--parts", str(parts)]
    flags += ["--optimize"] if optimize else []
    layout = (f" (granules of {granule} rows, {parts} part(s){' merged' if optimize else ''}, hits by "
              f"{','.join(hits_key) or 'file order'}, edge by {','.join(edge_key) or 'file order'})")
    flags += ["--order-by", f"hits={','.join(hits_key)}", "--order-by", f"edge={','.join(edge_key)}"]
    return flags + [f"hits={hits}", f"edge={edge}"], layout


def summary_counts(c):
    keys = ["equal", "mismatch", "tessera-error", "duckdb-error", "both-error", "expected-error",
            "wrong-error-kind", "accepted-invalid", "crash", "panic", "internal", "hang",
            "worker-bad-answer", "unchecked", "allow-listed"]
    return ", ".join(f"{k} {c[k]}" for k in keys)


def write_report(args, line, kinds, classes, failures, unshrunk_line):
    with open(args.out, "w") as f:
        f.write(line + "\n")
        f.write(f"failures not shrunk (shrinking budget; listed at the end): {unshrunk_line}\n")
        f.write(f"errors by kind (category/outcome/kind: count): {kinds}\n\n")
        f.write(f"== {len(classes)} failure classes (grouped by the shape of the shrunk query)\n\n")
        order = sorted(classes.items(), key=lambda kv: (kv[0][0] not in FATAL, kv[0][0], -kv[1]["count"]))
        for i, ((outcome, _), cl) in enumerate(order, 1):
            ex = cl["example"]
            f.write(f"-- class {i}: {outcome}, {cl['count']} queries (category {ex['cat']})\n")
            if "small_sql" in ex:
                f.write(f"shrunk:        {ex['small_sql']}\n")
                if ex["small_duck_sql"] != ex["small_sql"]:
                    f.write(f"shrunk DuckDB: {ex['small_duck_sql']}\n")
                f.write(f"shrunk detail: {ex['small_detail']}\n")
            f.write(f"original:      {ex['sql']}\n")
            f.write(f"detail:        {ex['detail']}\n\n")
        f.write(f"== all {len(failures)} failures\n\n")
        for rec in failures:
            f.write(f"#{rec['n']} {rec['outcome']} ({rec['cat']}): {rec['detail']}\n  tessera: {rec['sql']}\n")
            if rec["duck_sql"] != rec["sql"]:
                f.write(f"  duckdb:  {rec['duck_sql']}\n")
            if "small_sql" in rec:
                f.write(f"  shrunk:  {rec['small_sql']}\n")
            f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
