"""Query generation of the differential fuzzer (scripts/fuzz.py): the edge-value table,
the column metadata, the query spec with its rendering for Tessera and for DuckDB, the
grammar-based generator, and the constructs outside the subset, invalid and malformed SQL.
"""

import collections
import datetime
import math
import random
import re
import struct

# ---------------------------------------------------------------------------------------
# Edge-value table.
# ---------------------------------------------------------------------------------------

INT_POOLS = {
    "TINYINT": [-128, 127, -127, 126, -1, 0, 1, 2, 7, 42, -42, 100],
    "SMALLINT": [-32768, 32767, -1, 0, 1, 2, 127, 128, 255, 256, -129, 1000],
    "INTEGER": [-2147483648, 2147483647, -2147483647, -1, 0, 1, 2, 65535, 65536, -65536, 1000000, 42],
    "BIGINT": [-9223372036854775808, 9223372036854775807, -9223372036854775807, -1, 0, 1, 2,
               4294967296, -4294967296, 9007199254740993, -9007199254740993, 42],
    "UTINYINT": [0, 1, 2, 127, 128, 254, 255, 42],
    "USMALLINT": [0, 1, 2, 255, 256, 32767, 32768, 65534, 65535, 42],
    "UINTEGER": [0, 1, 2, 2147483647, 2147483648, 4294967294, 4294967295, 65536, 42],
    "UBIGINT": [0, 1, 2, 9223372036854775807, 9223372036854775808, 18446744073709551614,
                18446744073709551615, 4294967296, 42],
}
# Finite values whose sums do not depend on the order of addition beyond the tolerance:
# no large values of both signs (cancellation), so parallel and serial sums agree.
FLOAT_POOLS = {
    "FLOAT": ["0.0", "-0.0", "nan", "-nan", "inf", "-inf", "1.5", "-2.25", "0.1", "-0.1",
              "3.4028235e38", "1e-45", "16777216", "16777217", "1", "-1", "0.5", "100.25"],
    "DOUBLE": ["0.0", "-0.0", "nan", "-nan", "inf", "-inf", "1.5", "-2.25", "0.1", "-0.1",
               "1e300", "5e-324", "2.2250738585072014e-308", "9007199254740993", "1", "-1",
               "0.5", "-123456.75", "1e15"],
}
STRING_POOL = ["", " ", "a", "A", "ab", "abc", "abd", "abc ", " abc", "b", "%", "_", "\\",
               "a%b", "a_b", "a\\b", "100%", "x_y_z", "\t", "tab\there", "line\nbreak",
               "\r\n", "\u00e9", "e", "\u00c9", "na\u00efve", "\u65e5\u672c\u8a9e",
               "\u65e5\u672c", "\U0001F600", "\U0001F600x", "it's", "a" * 17, "a" * 64,
               "abc" * 30, "Z", "zz", "%%", "a\\%", "50% off_"]
BINARY_POOL = ["", "00", "ff", "616263", "6162", "00616263", "fffe", "61" * 20, "80", "7f"]
DATE_POOL = ["1970-01-01", "1969-12-31", "2000-02-29", "2013-07-01", "2013-07-15", "1900-01-01",
             "2099-12-31", "0001-01-01", "9999-12-31", "2013-07-02"]
TS_POOL = ["1970-01-01 00:00:00", "1969-12-31 23:59:59", "1969-12-31 23:58:30",
           "1900-01-01 00:00:01", "1960-06-15 12:34:56", "2013-07-15 10:20:30",
           "2013-07-15 10:20:31", "2013-07-15 10:21:00", "2038-01-19 03:14:08",
           "2099-12-31 23:59:59", "2000-02-29 12:00:00", "1901-12-13 20:45:52"]


def sql_str(s):
    return "'" + s.replace("'", "''") + "'"


def edge_columns():
    """(name, DuckDB type, list of SQL literals of the pool) of every edge column."""
    cols = []
    for ty, pool in INT_POOLS.items():
        short = {"TINYINT": "i8", "SMALLINT": "i16", "INTEGER": "i32", "BIGINT": "i64",
                 "UTINYINT": "u8", "USMALLINT": "u16", "UINTEGER": "u32", "UBIGINT": "u64"}[ty]
        lits = [str(v) for v in pool]
        cols += [(short, ty, lits), (short + "_2", ty, lits)]
    for ty, pool in FLOAT_POOLS.items():
        short = "f32" if ty == "FLOAT" else "f64"
        lits = [f"'{v}'::{ty}" for v in pool]
        cols += [(short, ty, lits), (short + "_2", ty, lits)]
    lits = [sql_str(s) for s in STRING_POOL]
    cols += [("s", "VARCHAR", lits), ("s_2", "VARCHAR", lits)]
    lits = [f"from_hex('{h}')" for h in BINARY_POOL]
    cols += [("bin", "BLOB", lits), ("bin_2", "BLOB", lits)]
    lits = [f"DATE '{d}'" for d in DATE_POOL]
    cols += [("d", "DATE", lits), ("d_2", "DATE", lits)]
    lits = [f"TIMESTAMP '{t}'" for t in TS_POOL]
    cols += [("ts", "TIMESTAMP", lits), ("ts_2", "TIMESTAMP", lits)]
    cols.append(("k", "INTEGER", [str(v) for v in range(10)]))
    cols.append(("g", "VARCHAR", [sql_str(v) for v in ["red", "green", "blue", "", "x%y"]]))
    return cols


def make_edge_table(con, path, rows, seed):
    """Writes the edge table to `path` (Parquet, row groups of 40,960 rows) with DuckDB.

    Each value is drawn by index from its column's pool with DuckDB's `hash` of (row,
    column, seed): NULL in 10% of rows, one of the first three values of the pool in ~36%
    (ties for GROUP BY and ORDER BY), any value otherwise."""
    select = ["id", "('v' || (id % 5000)::VARCHAR) AS hc"]
    for n, (name, ty, lits) in enumerate(edge_columns()):
        h = f"hash(id, {n}, {seed})"
        idx = (f"(CASE WHEN {h} % 10 = 0 THEN NULL WHEN ({h} // 10) % 10 < 4 THEN 1 + ({h} // 100) % {min(3, len(lits))} "
               f"ELSE 1 + ({h} // 100) % {len(lits)} END)::BIGINT")
        select.append(f"([{', '.join(lits)}]::{ty}[])[{idx}] AS {name}")
    con.execute(f"COPY (SELECT {', '.join(select)} FROM (SELECT range::BIGINT AS id FROM range({rows}))) "
                f"TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE 40000)")


# ---------------------------------------------------------------------------------------
# Schema: what the generator knows about each column.
# ---------------------------------------------------------------------------------------

class Column:
    def __init__(self, name, ttype, dtype):
        self.name = name
        self.ttype = ttype          # Tessera's Arrow type name
        self.dtype = dtype          # DuckDB's type name
        self.kind = kind_of(ttype)  # int | float | str | bin | date | ts | other
        self.samples = []           # distinct non-NULL values (Python), sorted by the RNG
        self.card = 0               # distinct non-NULL values
        self.nulls = 0

    def __repr__(self):
        return f"{self.name}:{self.ttype}"


def kind_of(ttype):
    if ttype in ("Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64"):
        return "int"
    if ttype in ("Float32", "Float64"):
        return "float"
    if ttype in ("Utf8", "LargeUtf8", "Utf8View"):
        return "str"
    if ttype in ("Binary", "LargeBinary", "BinaryView"):
        return "bin"
    if ttype == "Date32":
        return "date"
    if ttype.startswith("Timestamp"):
        return "ts"
    return "other"


INT_RANGE = {"Int8": (-2**7, 2**7 - 1), "Int16": (-2**15, 2**15 - 1), "Int32": (-2**31, 2**31 - 1),
             "Int64": (-2**63, 2**63 - 1), "UInt8": (0, 2**8 - 1), "UInt16": (0, 2**16 - 1),
             "UInt32": (0, 2**32 - 1), "UInt64": (0, 2**64 - 1)}


def load_schema(con, hello, rng):
    tables = {}
    for tname, cols in hello["tables"].items():
        dtypes = {r[0]: r[1] for r in con.execute(f"DESCRIBE {tname}").fetchall()}
        out = []
        for name, ttype in cols:
            c = Column(name, ttype, dtypes.get(name, "?"))
            if c.kind == "other":
                continue
            vals = [r[0] for r in con.execute(f'SELECT DISTINCT "{name}" FROM {tname} WHERE "{name}" IS NOT NULL').fetchall()]
            c.card = len(vals)
            c.nulls = con.execute(f'SELECT COUNT(*) - COUNT("{name}") FROM {tname}').fetchone()[0]
            vals.sort(key=lambda v: repr(v))
            rng.shuffle(vals)
            c.samples = vals[:200]
            out.append(c)
        tables[tname] = out
    return tables


# ---------------------------------------------------------------------------------------
# Query spec and rendering.
#
# A query is a dict:
#   table, items [{'expr', 'alias'}], star, where (predicate tree), group [ref],
#   order [{'ref', 'desc', 'nulls'}], limit, offset, limit_comma, settings [(k, v)],
#   extra (a construct outside the subset, applied to the rendered clauses), cat.
# Expressions: ('col', name) | ('minute', name, style) | ('agg', func, expr or None).
# References (GROUP BY / ORDER BY): ('expr', expr) | ('alias', item index) | ('pos', item index).
# Predicates: ('cmp', op, lhs, rhs) with ('col', name) or ('lit', sql_text) operands,
#   ('like', name, pattern_sql, negated), ('and', a, b), ('or', a, b), ('not', a),
#   ('orlist', [atoms]), ('paren', a, depth).
# ---------------------------------------------------------------------------------------

def render_expr(e, duck):
    if e[0] == "col":
        return quote_ident(e[1])
    if e[0] == "minute":
        col = quote_ident(e[1])
        if duck:
            return f"minute({col})"
        return {"extract": f"extract(minute FROM {col})", "toMinute": f"toMinute({col})",
                "minute": f"minute({col})"}[e[2]]
    if e[0] == "agg":
        fn, arg = e[1], e[2]
        if arg is None:
            return "COUNT(*)"
        if duck and fn in VARIANCES:
            return exact_variance(fn, render_expr(arg, duck))
        if fn in QUANTILES and QUANTILES[fn] is not None:
            return f"{fn}({render_expr(arg, duck)}, {QUANTILES[fn]})"
        return f"{fn}({render_expr(arg, duck)})"
    if e[0] == "raw":
        return e[1]
    raise ValueError(e)


def quote_ident(name):
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        return name
    return '"' + name.replace('"', '""') + '"'


PREC = {"or": 1, "orlist": 1, "and": 2, "not": 3}


def render_pred(p, duck, parent=0):
    t = p[0]
    if t == "cmp":
        return f"{render_operand(p[2], duck)} {p[1]} {render_operand(p[3], duck)}"
    if t == "like":
        neg = "NOT " if p[3] else ""
        pat = p[2]
        esc = " ESCAPE '\\'" if duck and "\\" in pat else ""
        return f"{quote_ident(p[1])} {neg}LIKE {sql_str(pat)}{esc}"
    if t == "raw":
        return p[1] if not duck else p[2]
    if t == "paren":
        inner = render_pred(p[1], duck, 0)
        return "(" * p[2] + inner + ")" * p[2]
    if t == "orlist":
        s = " OR ".join(render_pred(a, duck, 1) for a in p[1])
        return f"({s})" if parent > 1 else s
    prec = PREC[t]
    if t == "not":
        s = "NOT " + render_pred(p[1], duck, prec)
    else:
        op = " AND " if t == "and" else " OR "
        s = render_pred(p[1], duck, prec) + op + render_pred(p[2], duck, prec)
    return f"({s})" if parent > prec or (parent == 3) else s


def render_operand(o, duck):
    if o[0] == "col":
        return quote_ident(o[1])
    return o[1]


def item_name(q, i):
    it = q["items"][i]
    return it["alias"]


def render_ref(q, ref, duck):
    if ref[0] == "expr":
        return render_expr(ref[1], duck)
    if ref[0] == "alias":
        return q["items"][ref[1]]["alias"]
    return str(ref[1] + 1)


def render_parts(q, duck):
    """The clauses of `q` as a dict of SQL fragments, for Tessera or DuckDB."""
    parts = {}
    if q.get("star"):
        sel = "*"
    else:
        sel = ", ".join(render_expr(it["expr"], duck) + (f" AS {it['alias']}" if it["alias"] else "")
                        for it in q["items"])
    parts["select"] = sel
    parts["from"] = q["table"]
    parts["where"] = render_pred(q["where"], duck) if q.get("where") else ""
    parts["group"] = ", ".join(render_ref(q, r, duck) for r in q.get("group", []))
    parts["having"] = ""
    keys = []
    for o in q.get("order", []):
        s = render_ref(q, o["ref"], duck)
        if o["desc"] is not None:
            s += " DESC" if o["desc"] else " ASC"
        nulls = o["nulls"]
        if duck and nulls is None:
            nulls = "LAST"  # Tessera's documented default, both directions
        if nulls:
            s += f" NULLS {nulls}"
        keys.append(s)
    parts["order"] = ", ".join(keys)
    lim, off = q.get("limit"), q.get("offset")
    if lim is not None and off is not None and q.get("limit_comma") and not duck:
        parts["limit"] = f"LIMIT {off}, {lim}"
    else:
        s = []
        if lim is not None:
            s.append(f"LIMIT {lim}")
        if off is not None:
            s.append(f"OFFSET {off}")
        parts["limit"] = " ".join(s)
    parts["settings"] = "" if duck or not q.get("settings") else \
        "SETTINGS " + ", ".join(f"{k} = {v}" for k, v in q["settings"])
    return parts


def assemble(parts):
    s = f"SELECT {parts['select']} FROM {parts['from']}"
    if parts["where"]:
        s += f" WHERE {parts['where']}"
    if parts["group"]:
        s += f" GROUP BY {parts['group']}"
    if parts["having"]:
        s += f" HAVING {parts['having']}"
    if parts["order"]:
        s += f" ORDER BY {parts['order']}"
    if parts["limit"]:
        s += f" {parts['limit']}"
    if parts["settings"]:
        s += f" {parts['settings']}"
    return s


def render(q, duck):
    parts = render_parts(q, duck)
    extra = q.get("extra")
    if extra is not None:
        return EXTRAS[extra[0]][1](q, parts, duck, extra[1])
    return assemble(parts)


# ---------------------------------------------------------------------------------------
# Generator.
# ---------------------------------------------------------------------------------------

AGGS = ["COUNT", "SUM", "AVG", "MIN", "MAX", "VAR_POP", "VAR_SAMP", "STDDEV_POP", "STDDEV_SAMP", "MEDIAN",
        "QUANTILE_CONT", "QUANTILE_DISC"]
# Exact quantiles, rendered as `median(x)`, `quantile_cont(x, 0.3)`, `quantile_disc(x, 0.7)`.
QUANTILES = {"MEDIAN": None, "QUANTILE_CONT": "0.3", "QUANTILE_DISC": "0.7"}
# Variances of integer columns of up to 32 bits only, checked against the exact value:
# DuckDB's side computes n*SUM(x^2) - SUM(x)^2 in HUGEINT (exact), rounded once to a double,
# since DuckDB's own var_samp (Welford's update in doubles) is 4e-8 off on values near
# 2^31 where Tessera's shifted sums are exact. (Float columns: DuckDB raises an
# out-of-range error where infinities make the result infinite or NaN.)
VARIANCES = AGGS[5:9]
NARROW_INTS = ["Int8", "Int16", "Int32", "UInt8", "UInt16", "UInt32"]


def exact_variance(fn, col):
    """DuckDB SQL for variance `fn` of integer column `col`, exact up to one rounding."""
    x = f"{col}::HUGEINT"
    n = f"COUNT({col})"
    m2n = f"({n} * SUM({x} * {x}) - SUM({x}) * SUM({x}))::DOUBLE"
    samp = fn.endswith("SAMP")
    den = f"({n} * ({n} - 1))" if samp else f"({n} * {n})"
    v = f"CASE WHEN {n} > {1 if samp else 0} THEN {m2n} / {den}::DOUBLE END"
    return f"sqrt({v})" if fn.startswith("STDDEV") else v
OPS = ["=", "<>", "<", "<=", ">", ">="]


class Gen:
    def __init__(self, rng, tables, simd_levels, avoid=()):
        self.r = rng
        # Known open bugs whose triggers are not generated (--avoid), to let other
        # failures surface: a = MIN/MAX of floats, c = floats compared or sorted (b, c),
        # d = LIKE escapes, e = long OR lists, m = minute() of a nullable timestamp.
        self.avoid = set(avoid)
        self.tables = tables
        self.simd_levels = simd_levels
        self.by_type = {t: collections.defaultdict(list) for t in tables}
        for t, cols in tables.items():
            for c in cols:
                self.by_type[t][c.ttype].append(c)
        self.alias_n = 0

    # -- helpers
    def cols(self, t, kinds=None, card_max=None):
        if kinds is None:
            kinds = ["int", "float", "str", "bin", "date", "ts"]
        if "c" in self.avoid:
            kinds = [k for k in kinds if k != "float"]
        cs = [c for c in self.tables[t] if c.kind in kinds]
        if card_max is not None:
            small = [c for c in cs if c.card <= card_max]
            if small:
                cs = small
        return cs

    def col(self, t, kinds=None, card_max=None):
        return self.r.choice(self.cols(t, kinds, card_max))

    def alias(self):
        self.alias_n += 1
        return f"a{self.alias_n}"

    def scalar(self, t, card_max=None):
        r = self.r
        ts_cols = self.cols(t, ["ts"])
        if "m" in self.avoid:
            ts_cols = [c for c in ts_cols if c.nulls == 0]
        if ts_cols and r.random() < 0.15:
            return ("minute", r.choice(ts_cols).name, r.choice(["extract", "toMinute", "minute"]))
        return ("col", self.col(t, None, card_max).name)

    def agg(self, t):
        r = self.r
        f = r.choice(AGGS)
        if f == "COUNT":
            if r.random() < 0.5:
                return ("agg", "COUNT", None)
            return ("agg", "COUNT", ("col", self.col(t).name))
        if f in ("SUM", "AVG"):
            return ("agg", f, ("col", self.col(t, ["int", "float"]).name))
        if f in QUANTILES:
            # DuckDB's syntax (Tessera takes it too); integer columns: DuckDB's median of a
            # date is a timestamp, Tessera refuses it.
            col = self.col(t, ["int"]).name
            return ("agg", f, ("col", col))
        if f in VARIANCES:
            narrow = [c for c in self.cols(t, ["int"]) if c.ttype in NARROW_INTS]
            if narrow:
                return ("agg", f, ("col", self.r.choice(narrow).name))
            return ("agg", "SUM", ("col", self.col(t, ["int", "float"]).name))
        kinds = ["int", "date", "ts"] if "a" in self.avoid else ["int", "float", "date", "ts"]
        return ("agg", f, ("col", self.col(t, kinds).name))

    # -- literals of a column's domain
    def literal(self, c):
        r = self.r
        x = r.random()
        if c.kind == "int":
            lo, hi = INT_RANGE[c.ttype]
            if c.samples and x < 0.6:
                v = r.choice(c.samples) + r.choice([0, 0, 0, -1, 1])
            elif x < 0.85:
                v = r.choice([lo, hi, lo - 1, hi + 1, 0, -1, 1, lo + 1, hi - 1])
            else:
                v = r.randint(-1000, 1000)
            if r.random() < 0.05 and abs(v) < 2**50:
                return f"{v}.0"
            return str(v)
        if c.kind == "float":
            f32 = c.ttype == "Float32"
            finite = [v for v in c.samples if isinstance(v, float) and math.isfinite(v)]
            if finite and x < 0.6:
                v = r.choice(finite)
            elif x < 0.8:
                v = r.choice([0.0, -0.0, 1.0, -1.0, 0.5, 1.5, -2.25, 100.25])
            elif f32:
                v = r.randint(-2**24, 2**24) / r.choice([1, 2, 4, 8])
            else:
                v = r.choice([0.1, -0.1, 1e300, -1e300, 5e-324, 1e15, 9007199254740993.0, 2.5e-8])
            if f32 and float_as_f32(v) != v:
                v = 1.5  # DuckDB compares FLOAT with a literal in single precision
            if v == int(v) and abs(v) < 2**53 and r.random() < 0.3:
                s = str(int(v))
                return s if math.copysign(1, v) > 0 or v != 0 else "-0"
            return float_sql(v)
        if c.kind == "str":
            ok = [s for s in c.samples if "\\" not in s]
            if ok and x < 0.6:
                s = r.choice(ok)
                if r.random() < 0.2 and s:
                    s = s[: r.randrange(len(s))]
            else:
                s = r.choice([s for s in STRING_POOL if "\\" not in s] + ["zzz", "http://", "\u00ff"])
            return sql_str(s)
        if c.kind == "bin":
            s = r.choice(["", "a", "ab", "abc", "abd", "aaaaaaaaaaaaaaaaaaaa", "b", "z"])
            return sql_str(s)
        if c.kind == "date":
            try:
                d = r.choice(c.samples) + datetime.timedelta(days=r.choice([0, 0, -1, 1]))
            except (OverflowError, IndexError):
                d = None
            if d is None or x >= 0.7:
                d = datetime.date.fromisoformat(r.choice(DATE_POOL))
            s = sql_str(d.isoformat())
            return ("DATE " + s) if r.random() < 0.2 else s
        if c.kind == "ts":
            try:
                t = r.choice(c.samples) + datetime.timedelta(seconds=r.choice([0, 0, -1, 1, 60]))
            except (OverflowError, IndexError):
                t = None
            if t is None or x >= 0.7:
                t = datetime.datetime.fromisoformat(r.choice(TS_POOL))
            if r.random() < 0.15:
                return sql_str(t.date().isoformat())
            s = sql_str(t.strftime("%Y-%m-%d %H:%M:%S"))
            return ("TIMESTAMP " + s) if r.random() < 0.2 else s
        raise ValueError(c)

    def like_pattern(self, c):
        r = self.r
        ok = [s for s in c.samples if "\\" not in s]
        if ok and r.random() < 0.7:
            s = r.choice(ok)
            if s:
                a = r.randrange(len(s))
                b = r.randrange(a, min(len(s), a + 8) + 1)
                text = s[a:b] if r.random() < 0.7 else s
            else:
                text = s
        else:
            text = r.choice(["", "a", "b", "%", "_", "a%", "_b", "abc", "\u00e9", "\t", "\n", "zzz", "it's", "50%"])
        if "d" in self.avoid:
            text = text.replace("%", "").replace("_", "")
        lit = text.replace("%", "\\%").replace("_", "\\_")
        shape = r.choice(["exact", "prefix", "suffix", "contains", "contains", "all"])
        if shape == "prefix":
            pat = lit + "%" * r.choice([1, 1, 2])
        elif shape == "suffix":
            pat = "%" + lit
        elif shape == "contains":
            pat = "%" + lit + "%"
        elif shape == "all":
            pat = r.choice(["%", "%%", ""])
        else:
            pat = lit
        if pat.endswith("\\"):
            pat = pat[:-1]
        return pat

    def atom(self, t):
        r = self.r
        x = r.random()
        strs = self.cols(t, ["str"])
        if strs and x < 0.2:
            c = r.choice(strs)
            return ("like", c.name, self.like_pattern(c), r.random() < 0.3)
        if x < 0.35:
            # column vs column of one type
            pairs = [cs for cs in self.by_type[t].values() if len(cs) >= 2
                     and not ("c" in self.avoid and cs[0].kind == "float")]
            if pairs:
                cs = r.choice(pairs)
                a, b = r.sample(cs, 2)
                if r.random() < 0.1:
                    b = a
                return ("cmp", r.choice(OPS), ("col", a.name), ("col", b.name))
        c = self.col(t)
        lit = ("lit", self.literal(c))
        op = r.choice(OPS)
        if r.random() < 0.2:
            return ("cmp", op, lit, ("col", c.name))
        return ("cmp", op, ("col", c.name), lit)

    def pred(self, t, depth=0):
        r = self.r
        x = r.random()
        if depth >= 3 or x < 0.4:
            p = self.atom(t)
        elif x < 0.65:
            p = ("and", self.pred(t, depth + 1), self.pred(t, depth + 1))
        elif x < 0.9:
            p = ("or", self.pred(t, depth + 1), self.pred(t, depth + 1))
        else:
            p = ("not", self.pred(t, depth + 1))
        if r.random() < 0.05:
            p = ("paren", p, r.randint(1, 3))
        return p

    def settings(self):
        r = self.r
        s = []
        if r.random() < 0.5:
            s.append(("max_threads", str(r.choice([1, 1, 2, 3, 4, 8]))))
        if r.random() < 0.3:
            s.append(("group_by_two_level_threshold", str(r.choice([0, 0, 1, 16, 1000]))))
        if r.random() < 0.2:
            s.append(("group_by_force_serialized", "1"))
        if r.random() < 0.3:
            s.append(("simd_level", sql_str(r.choice(self.simd_levels))))
        # Spills: a GROUP BY past this many bytes of state writes its partitions to
        # temporary files, an ORDER BY its sorted runs, then both merge them back.
        if r.random() < 0.1:
            s.append(("max_bytes_before_external_group_by", str(r.choice([1, 4096, 100000]))))
        if r.random() < 0.1:
            s.append(("max_bytes_before_external_sort", str(r.choice([1, 4096, 100000]))))
        return s

    def order_and_limit(self, q, outputs, hidden, p_limit=0.8):
        """Adds ORDER BY / LIMIT / OFFSET. `outputs`: references to the visible items;
        `hidden`: references to expressions allowed as hidden keys."""
        r = self.r
        q["order"], q["limit"], q["offset"] = [], None, None
        if r.random() < 0.85:
            keys = r.sample(outputs, r.randint(1, len(outputs))) if outputs else []
            used_hidden = False
            if hidden and (r.random() < 0.2 or not keys):
                keys.insert(r.randrange(len(keys) + 1), r.choice(hidden))
                used_hidden = True
            # Make the answer determined by the keys, or leave it for run-wise comparison.
            if used_hidden or r.random() < 0.8:
                for o in outputs:
                    if o not in keys:
                        keys.append(o)
            q["order"] = [{"ref": k, "desc": r.choice([None, False, True]),
                           "nulls": r.choice([None, None, "FIRST", "LAST"])} for k in keys]
            if r.random() < p_limit:
                q["limit"] = r.choice([0, 1, 2, 3, 5, 10, 10, 20, 50, 100, 1000])
            if r.random() < 0.25:
                q["offset"] = r.choice([0, 1, 2, 5, 10, 100, 100000])
                q["limit_comma"] = q["limit"] is not None and r.random() < 0.3
        elif r.random() < 0.15:
            q["limit"] = r.choice([0, 1, 5, 20])

    def valid(self):
        r = self.r
        self.alias_n = 0
        t = r.choice(list(self.tables))
        q = {"table": t, "items": [], "group": [], "cat": "valid"}
        shape = r.random()
        if shape < 0.3:
            # scan
            if r.random() < 0.04 and "c" not in self.avoid:
                q["star"] = True
                q["items"] = [{"expr": ("col", c.name), "alias": None} for c in self.tables[t]]
            else:
                for _ in range(r.randint(1, 4)):
                    q["items"].append({"expr": self.scalar(t), "alias": self.alias() if r.random() < 0.3 else None})
            outputs = [("pos", i) if r.random() < 0.3 else
                       (("alias", i) if q["items"][i]["alias"] and r.random() < 0.5 else ("expr", q["items"][i]["expr"]))
                       for i in range(len(q["items"]))]
            if q.get("star"):
                outputs = [("pos", i) for i in range(len(q["items"]))]
            hidden = [("expr", self.scalar(t))]
            self.order_and_limit(q, outputs, hidden, p_limit=0.95)
            if not q["order"] and q["limit"] is None and r.random() < 0.8:
                q["limit"] = r.choice([0, 1, 5, 20])  # keeps unordered scans small
        elif shape < 0.8:
            # GROUP BY
            keys = []
            for _ in range(r.choice([1, 1, 1, 2, 2, 3])):
                k = self.scalar(t, card_max=2000 if r.random() < 0.8 else None)
                if k not in keys:
                    keys.append(k)
            items = []
            for k in keys:
                if r.random() < 0.85:
                    items.append({"expr": k, "alias": self.alias() if r.random() < 0.3 else None})
            for _ in range(r.randint(1, 3)):
                items.append({"expr": self.agg(t), "alias": self.alias() if r.random() < 0.3 else None})
            r.shuffle(items)
            q["items"] = items
            for k in keys:
                idx = [i for i, it in enumerate(items) if it["expr"] == k]
                if idx and r.random() < 0.6:
                    i = idx[0]
                    if items[i]["alias"] and r.random() < 0.5:
                        q["group"].append(("alias", i))
                    else:
                        q["group"].append(("pos", i))
                else:
                    q["group"].append(("expr", k))
            outputs = []
            for i, it in enumerate(items):
                x = r.random()
                if x < 0.3:
                    outputs.append(("pos", i))
                elif it["alias"] and x < 0.6:
                    outputs.append(("alias", i))
                else:
                    outputs.append(("expr", it["expr"]))
            hidden = [("expr", k) for k in keys if all(it["expr"] != k for it in items)] + [("expr", self.agg(t))]
            self.order_and_limit(q, outputs, hidden)
        else:
            # global aggregate
            q["items"] = [{"expr": self.agg(t), "alias": self.alias() if r.random() < 0.3 else None}
                          for _ in range(r.randint(1, 5))]
            if r.random() < 0.2:
                q["order"] = [{"ref": ("pos", 0), "desc": r.choice([None, True]), "nulls": None}]
            q["limit"] = r.choice([None] * 8 + [0, 1])
            q["offset"] = r.choice([None] * 8 + [0, 1])
        if "where" not in q and r.random() < 0.75:
            q["where"] = self.pred(t)
        if r.random() < 0.25:
            q["settings"] = self.settings()
        return q

    def wide(self):
        """A long OR list or deeply nested parentheses."""
        r = self.r
        q = self.valid()
        c = self.col(q["table"], ["int"])
        if r.random() < 0.7:
            n = r.choice([100, 500, 1000, 2000, 2500, 3000, 5000])
            q["where"] = ("orlist", [("cmp", "=", ("col", c.name), ("lit", str(v))) for v in range(n)])
            q["cat"] = "wide"
        else:
            q["where"] = ("paren", self.atom(q["table"]), r.choice([10, 30, 45, 60, 100, 200]))
            q["cat"] = "deep"
        return q

    def generate(self):
        r = self.r
        x = r.random()
        if x < 0.001 and "e" not in self.avoid:
            return self.wide()
        if x < 0.06:
            q = self.valid()
            q["cat"] = "unsupported"
            q["extra"] = (r.choice(UNSUPPORTED), r.random())
            return q
        if x < 0.09:
            q = self.valid()
            q["cat"] = "invalid"
            q["extra"] = (r.choice(INVALID), r.random())
            return q
        if x < 0.12:
            q = self.valid()
            q["cat"] = "malformed"
            q["extra"] = ("malformed", r.random())
            return q
        return self.valid()


def float_sql(v):
    if v == 0 and math.copysign(1, v) < 0:
        return "-0.0"
    s = repr(v)
    return s


def float_as_f32(v):
    try:
        return struct.unpack("f", struct.pack("f", v))[0]
    except OverflowError:
        return float("inf")


# ---------------------------------------------------------------------------------------
# Constructs outside the subset (expected NotImplemented), semantically invalid queries
# (a specific typed error), malformed SQL (a parse or plan error). Each: name ->
# (expected error kinds, function(q, parts, duck, u) -> SQL) with u a uniform random value.
# ---------------------------------------------------------------------------------------

def _first_col(q, kinds, u):
    cols = [c for c in SCHEMA[q["table"]] if c.kind in kinds]
    return cols[int(u * len(cols)) % len(cols)].name if cols else None


def _with(parts, **kw):
    p = dict(parts)
    p.update(kw)
    return assemble(p)


def _where_and(parts, cond):
    return f"({parts['where']}) AND {cond}" if parts["where"] else cond


def _unsup_having(q, parts, duck, u):
    if not parts["group"]:
        c = _first_col(q, ["int"], u)
        return _with(parts, select=f"{c}, COUNT(*)", group=c, having="COUNT(*) > 1", order="", limit="")
    return _with(parts, having="COUNT(*) > 1")


def _unsup_col_pred(make):
    def f(q, parts, duck, u):
        c = _first_col(q, ["int"], u)
        return _with(parts, where=_where_and(parts, make(c)))
    return f


def _unsup_select_prefix(prefix):
    def f(q, parts, duck, u):
        return _with(parts, select=prefix + parts["select"])
    return f


def _unsup_select_item(make, group_ok=False):
    def f(q, parts, duck, u):
        c = _first_col(q, ["int"], u)
        s = _first_col(q, ["str"], u)
        item = make(c, s)
        if parts["group"] or any(it["expr"][0] == "agg" for it in q["items"]):
            return _with(parts, select=f"COUNT(*), {item}" if group_ok else item + ", " + parts["select"],
                         order="", limit="")
        return _with(parts, select=parts["select"] + ", " + item)
    return f


def _unsup_from(make):
    def f(q, parts, duck, u):
        return _with(parts, **{"from": make(q["table"])})
    return f


def _narrow_int(q, u):
    """An integer column narrower than 64 bits (the first integer column if none)."""
    cols = [c for c in SCHEMA[q["table"]] if c.kind == "int" and c.ttype not in ("Int64", "UInt64")]
    return cols[int(u * len(cols)) % len(cols)].name if cols else _first_col(q, ["int"], u)


def _unsup_like(q, parts, duck, u):
    s = _first_col(q, ["str"], u)
    pat = ["a_c%", "%a%b%", "_", "%_%", "a%b", "%\u00e9_"][int(u * 6)]
    return _with(parts, where=_where_and(parts, f"{s} LIKE '{pat}'"))


def _unsup_int_frac(q, parts, duck, u):
    c = _first_col(q, ["int"], u)
    return _with(parts, where=_where_and(parts, f"{c} > 2.5"))


def _unsup_minmax_str(q, parts, duck, u):
    s = _first_col(q, ["str"], u)
    fn = "MIN" if u < 0.5 else "MAX"
    return _with(parts, select=f"{fn}({s})", group="", order="", limit="")


ASCII_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

UNSUPPORTED = [
    "distinct", "having", "count_distinct", "in", "between", "is_null", "case", "arith",
    "constant", "like_underscore", "ilike", "like_escape", "minmax_str", "function",
    "subquery", "cte", "union", "join", "window", "extract_hour", "agg_expr", "where_expr",
    "two_literals", "int_vs_fraction", "rollup", "bare_column_where",
]
INVALID = [
    "unknown_column", "unknown_table", "not_grouped", "agg_in_where", "order_pos_0",
    "order_pos_big", "group_pos_agg", "limit_negative", "string_vs_number", "sum_string",
    "minute_of_int", "cols_of_two_types", "limit_string",
]

EXTRAS = {
    "distinct": (["NotImplemented"], _unsup_select_prefix("DISTINCT ")),
    "having": (["NotImplemented"], _unsup_having),
    "count_distinct": (["NotImplemented"], _unsup_select_item(lambda c, s: f"COUNT(DISTINCT {c})", True)),
    "in": (["NotImplemented"], _unsup_col_pred(lambda c: f"{c} IN (0, 1, 2)")),
    "between": (["NotImplemented"], _unsup_col_pred(lambda c: f"{c} BETWEEN 0 AND 10")),
    "is_null": (["NotImplemented"], _unsup_col_pred(lambda c: f"{c} IS NOT NULL")),
    "case": (["NotImplemented"], _unsup_select_item(lambda c, s: f"CASE WHEN {c} > 0 THEN 1 ELSE 0 END")),
    "arith": (["NotImplemented"], _unsup_select_item(lambda c, s: f"{c} + 1")),
    "constant": (["NotImplemented"], _unsup_select_item(lambda c, s: "1")),
    "like_underscore": (["NotImplemented"], _unsup_like),
    "ilike": (["NotImplemented"], lambda q, p, d, u: _with(p, where=_where_and(p, f"{_first_col(q, ['str'], u)} ILIKE 'a%'"))),
    "like_escape": (["NotImplemented"], lambda q, p, d, u: _with(p, where=_where_and(p, f"{_first_col(q, ['str'], u)} LIKE 'a!%%' ESCAPE '!'"))),
    "minmax_str": (["NotImplemented"], _unsup_minmax_str),
    # Tessera's lower() is ClickHouse's: ASCII letters only (lowerUTF8 is the Unicode one);
    # DuckDB's lower() maps every letter, so DuckDB gets the ASCII-only mapping.
    "function": (["NotImplemented"], lambda q, p, d, u: _unsup_select_item(
        lambda c, s: f"translate({s}, '{ASCII_UPPER}', '{ASCII_UPPER.lower()}')" if d else f"lower({s})")(q, p, d, u)),
    "subquery": (["NotImplemented"], _unsup_from(lambda t: f"(SELECT * FROM {t}) AS sub")),
    "cte": (["NotImplemented"], lambda q, p, d, u: f"WITH w AS (SELECT * FROM {q['table']}) " + _with(p, **{"from": "w"})),
    "union": (["NotImplemented"], lambda q, p, d, u: f"{_with(p, order='', limit='', settings='')} UNION ALL {_with(p, order='', limit='', settings='')}"),
    "join": (["NotImplemented"], _unsup_from(lambda t: f"{t} JOIN {t} AS other ON true")),
    "window": (["NotImplemented"], _unsup_select_item(lambda c, s: "row_number() OVER ()")),
    "extract_hour": (["NotImplemented"], lambda q, p, d, u: _with(p, select=f"extract(hour FROM {_first_col(q, ['ts'], u)})", group="", order="", limit="")),
    # Narrow integers only, as for where_expr: on 64-bit columns `c + 1` wraps in Tessera
    # (ClickHouse's Int64 arithmetic, documented in README) where DuckDB sums exactly.
    "agg_expr": (["NotImplemented"], lambda q, p, d, u: _with(p, select=f"SUM({_narrow_int(q, u)} + 1)", group="", order="", limit="")),
    # On 64-bit columns the engines part ways at overflow: Tessera wraps like ClickHouse
    # (Int64 max + 1 is Int64 min), DuckDB rewrites `c + 1 > 5` to `c > 4` (or raises an
    # overflow error), so the comparison runs on narrower integers only.
    "where_expr": (["NotImplemented"], lambda q, p, d, u: _with(p, where=_where_and(p, f"{_narrow_int(q, u)} + 1 > 5"))),
    "two_literals": (["NotImplemented"], _unsup_col_pred(lambda c: "1 = 1")),
    "int_vs_fraction": (["NotImplemented"], _unsup_int_frac),
    "rollup": (["NotImplemented"], lambda q, p, d, u: _with(p, select=f"{_first_col(q, ['int'], u)}, COUNT(*)", group=f"ROLLUP ({_first_col(q, ['int'], u)})", order="", limit="")),
    # An integer as a condition: ClickHouse and DuckDB take it (non-zero is true), Tessera
    # asks for a boolean condition (TypeMismatch).
    "bare_column_where": (["NotImplemented", "TypeMismatch"], _unsup_col_pred(lambda c: c)),
    # Semantically invalid.
    "unknown_column": (["UnknownColumn"], lambda q, p, d, u: _with(p, where=_where_and(p, "no_such_column = 1"))),
    "unknown_table": (["UnknownTable"], lambda q, p, d, u: _with(p, **{"from": "no_such_table"})),
    "not_grouped": (["Plan"], lambda q, p, d, u: _with(p, select=f"{_first_col(q, ['int'], u)}, COUNT(*)", group="", order="", limit="")),
    "agg_in_where": (["Plan"], _unsup_col_pred(lambda c: f"COUNT({c}) > 1")),
    "order_pos_0": (["Plan"], lambda q, p, d, u: _with(p, order="0")),
    "order_pos_big": (["Plan"], lambda q, p, d, u: _with(p, select=p["select"] if not q.get("star") else "*", order="999")),
    "group_pos_agg": (["Plan"], lambda q, p, d, u: _with(p, select="COUNT(*)", group="1", order="", limit="")),
    "limit_negative": (["Plan"], lambda q, p, d, u: _with(p, limit="LIMIT -1")),
    "limit_string": (["Plan"], lambda q, p, d, u: _with(p, limit="LIMIT 'x'")),
    "string_vs_number": (["TypeMismatch"], lambda q, p, d, u: _with(p, where=_where_and(p, f"{_first_col(q, ['str'], u)} = 5"))),
    "sum_string": (["TypeMismatch"], lambda q, p, d, u: _with(p, select=f"SUM({_first_col(q, ['str'], u)})", group="", order="", limit="")),
    "minute_of_int": (["TypeMismatch"], lambda q, p, d, u: _with(p, select=f"toMinute({_first_col(q, ['int'], u)})" if not d else f"minute({_first_col(q, ['int'], u)})", group="", order="", limit="")),
    "cols_of_two_types": (["TypeMismatch"], lambda q, p, d, u: _with(p, where=_where_and(p, _two_types(q, u)))),
    # Both engines get the same mutation of the same text: DuckDB's rendering (no SETTINGS,
    # no `LIMIT m, n`, explicit NULLS; LIKE escapes add an ESCAPE clause Tessera refuses).
    "malformed": (["Parse", "Plan"], lambda q, p, d, u: _malform(assemble(render_parts(q, True)), u)),
}


def _two_types(q, u):
    cols = [c for c in SCHEMA[q["table"]] if c.kind in ("int", "float")]
    a = cols[int(u * len(cols)) % len(cols)]
    others = [c for c in cols if c.ttype != a.ttype]
    b = others[int(u * 7919) % len(others)] if others else a
    return f"{quote_ident(a.name)} < {quote_ident(b.name)}"


TOKEN_RE = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|\w+|<>|<=|>=|\S")
JUNK = [",", "(", ")", "FROM", "SELECT", "WHERE", "'", "AND", "ORDER", "BY", "=", ";", "@", "GROUP", "..", "LIMIT"]


def _malform(sql, u):
    rng = random.Random(int(u * 2**32))
    toks = TOKEN_RE.findall(sql)
    op = rng.choice(["delete", "duplicate", "truncate", "swap", "insert", "unterminated"])
    i = rng.randrange(len(toks))
    if op == "delete":
        del toks[i]
    elif op == "duplicate":
        toks.insert(i, toks[i])
    elif op == "truncate":
        toks = toks[:max(1, i)]
    elif op == "swap" and i + 1 < len(toks):
        toks[i], toks[i + 1] = toks[i + 1], toks[i]
    elif op == "insert":
        toks.insert(i, rng.choice(JUNK))
    else:
        toks.append("'unterminated")
    return " ".join(toks)


SCHEMA = {}


