//! Randomized differential test of expressions and aggregates against a naive row-at-a-time
//! evaluator: random expression trees (arithmetic, comparisons, AND/OR/NOT, IN, CASE,
//! IS NULL, LIKE, coalesce, length, substring) over typed columns with NULLs and edge values
//! (integer extremes, -0.0, NaN, +-inf, empty strings), as WHERE conditions, aggregate
//! inputs (SUM, MIN, MAX, COUNT, COUNT(DISTINCT)) and GROUP BY keys, at 1-3 threads with
//! the two-level path forced in some queries. Fixed seed; a mismatch prints the SQL.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use tessera::arrow::array::*;
use tessera::arrow::datatypes::*;
use tessera::{Database, Settings};

/// splitmix64: a tiny seeded generator so the test is reproducible.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len() as u64) as usize]
    }
}

/// A value of the naive evaluator.
#[derive(Debug, Clone, PartialEq)]
enum V {
    Null,
    /// Signed integers (Int32/Int64 columns, negative literals, Int64 results).
    I(i64),
    /// Unsigned integers (UInt8 columns, non-negative literals, UInt64 results).
    U(u64),
    F(f64),
    S(String),
    B(bool),
}

impl V {
    fn f(&self) -> f64 {
        match *self {
            V::I(i) => i as f64,
            V::U(u) => u as f64,
            V::F(f) => f,
            _ => unreachable!("not a number: {self:?}"),
        }
    }
    fn i128(&self) -> i128 {
        match *self {
            V::I(i) => i as i128,
            V::U(u) => u as i128,
            _ => unreachable!("not an integer: {self:?}"),
        }
    }
}

/// Tessera's float order: -0.0 = 0.0, NaN one value above +inf.
fn canon(f: f64) -> f64 {
    if f.is_nan() {
        f64::NAN
    } else if f == 0.0 {
        0.0
    } else {
        f
    }
}
fn cmp_f(a: f64, b: f64) -> Ordering {
    canon(a).total_cmp(&canon(b))
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Ty {
    Signed,
    Unsigned,
    Float,
    Bool,
}

/// A generated expression: SQL text, its type and a naive evaluator.
struct Gen {
    sql: String,
    ty: Ty,
    eval: Box<dyn Fn(&Row) -> V>,
}

#[derive(Debug, Clone)]
struct Row {
    a: Option<i32>,
    b: Option<i64>,
    u: u8,
    f: Option<f64>,
    s: Option<String>,
    k: i32,
}

fn like(s: &[u8], p: &[u8]) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some((b'%', rest)) => (0..=s.len()).any(|i| like(&s[i..], rest)),
        Some((b'_', rest)) => !s.is_empty() && like(&s[1..], rest),
        Some((b'\\', rest)) if !rest.is_empty() => s.first() == Some(&rest[0]) && like(&s[1..], &rest[1..]),
        Some((c, rest)) => s.first() == Some(c) && like(&s[1..], rest),
    }
}

fn numeric(r: &mut Rng, depth: u32) -> Gen {
    let leaf = depth == 0 || r.below(3) == 0;
    if leaf {
        return match r.below(7) {
            0 => Gen { sql: "a".into(), ty: Ty::Signed, eval: Box::new(|x| x.a.map_or(V::Null, |v| V::I(v as i64))) },
            1 => Gen { sql: "b".into(), ty: Ty::Signed, eval: Box::new(|x| x.b.map_or(V::Null, V::I)) },
            2 => Gen { sql: "u".into(), ty: Ty::Unsigned, eval: Box::new(|x| V::U(x.u as u64)) },
            3 => Gen { sql: "f".into(), ty: Ty::Float, eval: Box::new(|x| x.f.map_or(V::Null, V::F)) },
            4 => {
                let v = *r.pick(&[0u64, 1, 2, 7, 255, 3_000_000_000, u32::MAX as u64 + 1]);
                Gen { sql: v.to_string(), ty: Ty::Unsigned, eval: Box::new(move |_| V::U(v)) }
            }
            5 => {
                let v = *r.pick(&[-1i64, -7, -3_000_000_000]);
                Gen { sql: format!("({v})"), ty: Ty::Signed, eval: Box::new(move |_| V::I(v)) }
            }
            _ => {
                let v = *r.pick(&[1.5f64, -2.25, 0.5]);
                Gen { sql: format!("({v})"), ty: Ty::Float, eval: Box::new(move |_| V::F(v)) }
            }
        };
    }
    match r.below(7) {
        0..=2 => {
            let (l, rr) = (numeric(r, depth - 1), numeric(r, depth - 1));
            let op = *r.pick(&["+", "-", "*", "/"]);
            let ty = if op == "/" || l.ty == Ty::Float || rr.ty == Ty::Float {
                Ty::Float
            } else if op != "-" && l.ty == Ty::Unsigned && rr.ty == Ty::Unsigned {
                Ty::Unsigned
            } else {
                Ty::Signed
            };
            let sql = format!("({} {op} {})", l.sql, rr.sql);
            let (le, re) = (l.eval, rr.eval);
            Gen {
                sql,
                ty,
                eval: Box::new(move |x| {
                    let (p, q) = (le(x), re(x));
                    if p == V::Null || q == V::Null {
                        return V::Null;
                    }
                    match ty {
                        Ty::Float => {
                            let (p, q) = (p.f(), q.f());
                            V::F(match op {
                                "+" => p + q,
                                "-" => p - q,
                                "*" => p * q,
                                _ => p / q,
                            })
                        }
                        Ty::Unsigned => {
                            let (p, q) = (p.i128() as u64, q.i128() as u64);
                            V::U(if op == "+" { p.wrapping_add(q) } else { p.wrapping_mul(q) })
                        }
                        _ => {
                            let (p, q) = (p.i128() as i64, q.i128() as i64);
                            V::I(match op {
                                "+" => p.wrapping_add(q),
                                "-" => p.wrapping_sub(q),
                                _ => p.wrapping_mul(q),
                            })
                        }
                    }
                }),
            }
        }
        3 => {
            // `%` by a positive constant (no division by zero, no i64::MIN % -1).
            let l = numeric(r, depth - 1);
            let d = *r.pick(&[2u64, 3, 7]);
            let ty = match l.ty {
                Ty::Float => Ty::Float,
                Ty::Unsigned => Ty::Unsigned,
                _ => Ty::Signed,
            };
            let le = l.eval;
            Gen {
                sql: format!("({} % {d})", l.sql),
                ty,
                eval: Box::new(move |x| match le(x) {
                    V::Null => V::Null,
                    V::F(f) => V::F(f % d as f64),
                    V::U(u) if ty == Ty::Unsigned => V::U(u % d),
                    v => V::I((v.i128() as i64) % d as i64),
                }),
            }
        }
        4 => {
            // CASE WHEN cond THEN e ELSE small constant END.
            let c = boolean(r, depth - 1);
            let t = numeric(r, depth - 1);
            let e = *r.pick(&[0u64, 5]);
            let ty = match t.ty {
                Ty::Float => Ty::Float,
                Ty::Unsigned => Ty::Unsigned,
                _ => Ty::Signed,
            };
            let (ce, te) = (c.eval, t.eval);
            Gen {
                sql: format!("(CASE WHEN {} THEN {} ELSE {e} END)", c.sql, t.sql),
                ty,
                eval: Box::new(move |x| {
                    if ce(x) == V::B(true) {
                        match (te(x), ty) {
                            (V::Null, _) => V::Null,
                            (V::F(f), _) => V::F(f),
                            (v, Ty::Unsigned) => V::U(v.i128() as u64),
                            (v, _) => V::I(v.i128() as i64),
                        }
                    } else if ty == Ty::Float {
                        V::F(e as f64)
                    } else if ty == Ty::Unsigned {
                        V::U(e)
                    } else {
                        V::I(e as i64)
                    }
                }),
            }
        }
        5 => {
            let t = numeric(r, depth - 1);
            let ty = match t.ty {
                Ty::Float => Ty::Float,
                Ty::Unsigned => Ty::Unsigned,
                _ => Ty::Signed,
            };
            let te = t.eval;
            Gen {
                sql: format!("coalesce({}, 1)", t.sql),
                ty,
                eval: Box::new(move |x| match (te(x), ty) {
                    (V::Null, Ty::Float) => V::F(1.0),
                    (V::Null, Ty::Unsigned) => V::U(1),
                    (V::Null, _) => V::I(1),
                    (V::F(f), _) => V::F(f),
                    (v, Ty::Unsigned) => V::U(v.i128() as u64),
                    (v, _) => V::I(v.i128() as i64),
                }),
            }
        }
        _ if r.below(2) == 0 => Gen {
            sql: "length(s)".into(),
            ty: Ty::Unsigned,
            eval: Box::new(|x| x.s.as_ref().map_or(V::Null, |s| V::U(s.len() as u64))),
        },
        _ => {
            // substring in characters (ClickHouse's rules for offset and length).
            let offset = r.below(9) as i64 - 4;
            let length = [None, Some(-2), Some(-1), Some(0), Some(1), Some(2), Some(5)][r.below(7) as usize];
            let sql = match length {
                Some(n) => format!("length(substring(s, {offset}, {n}))"),
                None => format!("length(substr(s, {offset}))"),
            };
            Gen {
                sql,
                ty: Ty::Unsigned,
                eval: Box::new(move |x| {
                    let Some(s) = &x.s else { return V::Null };
                    let chars: Vec<char> = s.chars().collect();
                    let l = chars.len() as i64;
                    if offset == 0 {
                        return V::U(0);
                    }
                    let start = if offset > 0 { offset - 1 } else { l + offset };
                    let end = match length {
                        None => l,
                        Some(n) if n >= 0 => start + n,
                        Some(n) => l + n,
                    };
                    let (a, b) = (start.clamp(0, l), end.clamp(start.clamp(0, l), l));
                    V::U(chars[a as usize..b as usize].iter().map(|c| c.len_utf8() as u64).sum())
                }),
            }
        }
    }
}

fn boolean(r: &mut Rng, depth: u32) -> Gen {
    let kind = if depth == 0 { r.below(4) } else { r.below(8) };
    let b = |v: Option<bool>| v.map_or(V::Null, V::B);
    match kind {
        0 | 1 => {
            let (l, rr) = (numeric(r, depth.saturating_sub(1)), numeric(r, depth.saturating_sub(1)));
            let op = *r.pick(&["=", "<>", "<", "<=", ">", ">="]);
            let float = l.ty == Ty::Float || rr.ty == Ty::Float;
            let (le, re) = (l.eval, rr.eval);
            Gen {
                sql: format!("({} {op} {})", l.sql, rr.sql),
                ty: Ty::Bool,
                eval: Box::new(move |x| {
                    let (p, q) = (le(x), re(x));
                    if p == V::Null || q == V::Null {
                        return V::Null;
                    }
                    let o = if float { cmp_f(p.f(), q.f()) } else { p.i128().cmp(&q.i128()) };
                    V::B(match op {
                        "=" => o.is_eq(),
                        "<>" => o.is_ne(),
                        "<" => o.is_lt(),
                        "<=" => o.is_le(),
                        ">" => o.is_gt(),
                        _ => o.is_ge(),
                    })
                }),
            }
        }
        2 => {
            // (pattern as written, ESCAPE character, the pattern with backslash escapes).
            let (written, escape, p) = *r.pick(&[
                ("%", None, "%"),
                ("a%", None, "a%"),
                ("%b%", None, "%b%"),
                ("_", None, "_"),
                ("a_", None, "a_"),
                ("%.%/%", None, "%.%/%"),
                ("b\\%c", None, "b\\%c"),
                ("", None, ""),
                ("%c", None, "%c"),
                ("b!%c", Some('!'), "b\\%c"),
                ("%!_%", Some('!'), "%\\_%"),
                ("a#%", Some('#'), "a\\%"),
                ("%!!%", Some('!'), "%\\!%"),
            ]);
            let neg = r.below(3) == 0;
            let escape = escape.map(|c| format!(" ESCAPE '{c}'")).unwrap_or_default();
            Gen {
                sql: format!("(s {}LIKE '{written}'{escape})", if neg { "NOT " } else { "" }),
                ty: Ty::Bool,
                eval: Box::new(move |x| b(x.s.as_ref().map(|s| like(s.as_bytes(), p.as_bytes()) != neg))),
            }
        }
        3 => {
            let t = numeric(r, depth.saturating_sub(1));
            let neg = r.below(2) == 0;
            let te = t.eval;
            Gen {
                sql: format!("({} IS {}NULL)", t.sql, if neg { "NOT " } else { "" }),
                ty: Ty::Bool,
                eval: Box::new(move |x| V::B((te(x) == V::Null) != neg)),
            }
        }
        4 => {
            let col = *r.pick(&["a", "b", "u"]);
            let neg = r.below(2) == 0;
            let list: Vec<i64> = (0..1 + r.below(3)).map(|_| *r.pick(&[-1i64, 0, 1, 7, 255, i32::MAX as i64])).collect();
            let items = list.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", ");
            Gen {
                sql: format!("({col} {}IN ({items}))", if neg { "NOT " } else { "" }),
                ty: Ty::Bool,
                eval: Box::new(move |x| {
                    let v = match col {
                        "a" => x.a.map(|v| v as i64),
                        "b" => x.b,
                        _ => Some(x.u as i64),
                    };
                    b(v.map(|v| list.contains(&v) != neg))
                }),
            }
        }
        5 => {
            let t = boolean(r, depth - 1);
            let te = t.eval;
            Gen {
                sql: format!("(NOT {})", t.sql),
                ty: Ty::Bool,
                eval: Box::new(move |x| match te(x) {
                    V::B(v) => V::B(!v),
                    other => other,
                }),
            }
        }
        _ => {
            let (l, rr) = (boolean(r, depth - 1), boolean(r, depth - 1));
            let and = kind == 6;
            let (le, re) = (l.eval, rr.eval);
            Gen {
                sql: format!("({} {} {})", l.sql, if and { "AND" } else { "OR" }, rr.sql),
                ty: Ty::Bool,
                eval: Box::new(move |x| {
                    let (p, q) = (le(x), re(x));
                    let (p, q) = (if let V::B(v) = p { Some(v) } else { None }, if let V::B(v) = q { Some(v) } else { None });
                    b(if and {
                        match (p, q) {
                            (Some(false), _) | (_, Some(false)) => Some(false),
                            (Some(true), Some(true)) => Some(true),
                            _ => None,
                        }
                    } else {
                        match (p, q) {
                            (Some(true), _) | (_, Some(true)) => Some(true),
                            (Some(false), Some(false)) => Some(false),
                            _ => None,
                        }
                    })
                }),
            }
        }
    }
}

fn rows(rng: &mut Rng, n: usize) -> Vec<Row> {
    let ints = [i32::MIN, i32::MAX, -1, 0, 1, 7, 255];
    let longs = [i64::MIN, i64::MAX, -1, 0, 1, 3, 1 << 40];
    let floats = [-0.0, 0.0, f64::NAN, -f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1.5, -2.25, 1e300];
    let strs = ["", "a", "ab", "b%c", "http://www.x.com/y", "Zz", "a_c", "ÿé", "a!b", "bxc"];
    (0..n)
        .map(|i| Row {
            a: match rng.below(10) {
                0 => None,
                1..=3 => Some(*rng.pick(&ints)),
                _ => Some(rng.below(2000) as i32 - 1000),
            },
            b: match rng.below(10) {
                0 => None,
                1..=3 => Some(*rng.pick(&longs)),
                _ => Some(rng.next() as i64 >> rng.below(64)),
            },
            u: rng.below(256) as u8,
            f: match rng.below(10) {
                0 => None,
                1..=4 => Some(*rng.pick(&floats)),
                _ => Some((rng.below(20000) as f64 - 10000.0) / 8.0),
            },
            s: if rng.below(8) == 0 { None } else { Some(rng.pick(&strs).to_string()) },
            k: (i % 5) as i32,
        })
        .collect()
}

fn table(data: &[Row]) -> Database {
    let schema = Arc::new(Schema::new(vec![
        Field::new("a", DataType::Int32, true),
        Field::new("b", DataType::Int64, true),
        Field::new("u", DataType::UInt8, false),
        Field::new("f", DataType::Float64, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("k", DataType::Int32, false),
    ]));
    // Several batches: several morsels.
    let batches: Vec<RecordBatch> = data
        .chunks(700)
        .map(|c| {
            let cols: Vec<ArrayRef> = vec![
                Arc::new(Int32Array::from(c.iter().map(|r| r.a).collect::<Vec<_>>())),
                Arc::new(Int64Array::from(c.iter().map(|r| r.b).collect::<Vec<_>>())),
                Arc::new(UInt8Array::from(c.iter().map(|r| r.u).collect::<Vec<_>>())),
                Arc::new(Float64Array::from(c.iter().map(|r| r.f).collect::<Vec<_>>())),
                Arc::new(StringArray::from(c.iter().map(|r| r.s.clone()).collect::<Vec<_>>())),
                Arc::new(Int32Array::from(c.iter().map(|r| r.k).collect::<Vec<_>>())),
            ];
            RecordBatch::try_new(schema.clone(), cols).unwrap()
        })
        .collect();
    let db = Database::new();
    db.register_batches("t", schema, &batches).unwrap();
    db
}

/// A cell of an answer as a naive value (integers of every width as I/U, Decimal128 sums
/// as I when they fit, else F).
fn cell(a: &ArrayRef, i: usize) -> V {
    if a.is_null(i) {
        return V::Null;
    }
    match a.data_type() {
        DataType::Int32 => V::I(a.as_primitive::<Int32Type>().value(i) as i64),
        DataType::Int64 => V::I(a.as_primitive::<Int64Type>().value(i)),
        DataType::UInt8 => V::U(a.as_primitive::<UInt8Type>().value(i) as u64),
        DataType::UInt64 => V::U(a.as_primitive::<UInt64Type>().value(i)),
        DataType::Float64 => V::F(a.as_primitive::<Float64Type>().value(i)),
        DataType::Decimal128(_, 0) => {
            let v = a.as_primitive::<Decimal128Type>().value(i);
            i64::try_from(v).map_or(V::F(v as f64), V::I)
        }
        DataType::Utf8 => V::S(a.as_string::<i32>().value(i).to_string()),
        other => panic!("unexpected answer type {other}"),
    }
}

fn same(got: &V, want: &V, bound: f64) -> bool {
    match (got, want) {
        (V::F(g), w @ (V::F(_) | V::I(_) | V::U(_))) | (w @ (V::I(_) | V::U(_)), V::F(g)) => {
            let w = w.f();
            cmp_f(*g, w).is_eq() || (g - w).abs() <= (1e-9 * g.abs().max(w.abs()).max(1.0)).max(bound)
        }
        (g @ (V::I(_) | V::U(_)), w @ (V::I(_) | V::U(_))) => g.i128() == w.i128(),
        _ => got == want,
    }
}

/// The naive aggregates of one group: SUM, MIN, MAX, COUNT, COUNT(DISTINCT); and the
/// rounding bound of a float SUM in any order (1e-9 of the sum of magnitudes).
fn naive_aggs(vals: &[V], ty: Ty) -> (Vec<V>, f64) {
    let present: Vec<&V> = vals.iter().filter(|v| **v != V::Null).collect();
    let sum = if present.is_empty() {
        V::Null
    } else if ty == Ty::Float {
        V::F(present.iter().map(|v| v.f()).sum())
    } else {
        let s: i128 = present.iter().map(|v| v.i128()).sum();
        i64::try_from(s).map_or(V::F(s as f64), V::I)
    };
    let order = |a: &&V, b: &&V| if ty == Ty::Float { cmp_f(a.f(), b.f()) } else { a.i128().cmp(&b.i128()) };
    let min = present.iter().copied().min_by(order).cloned().unwrap_or(V::Null);
    let max = present.iter().copied().max_by(order).cloned().unwrap_or(V::Null);
    let mut distinct: Vec<String> = present
        .iter()
        .map(|v| if ty == Ty::Float { format!("{:?}", canon(v.f()).to_bits()) } else { v.i128().to_string() })
        .collect();
    distinct.sort();
    distinct.dedup();
    let bound = if ty == Ty::Float { 1e-9 * present.iter().map(|v| v.f().abs()).filter(|f| f.is_finite()).sum::<f64>() } else { 0.0 };
    (vec![sum, min, max, V::I(present.len() as i64), V::I(distinct.len() as i64)], bound)
}

fn settings(rng: &mut Rng) -> Settings {
    let mut s = Settings::default();
    s.max_threads = 1 + rng.below(3) as usize;
    if rng.below(3) == 0 {
        s.group_by_two_level_threshold = 0;
    }
    s
}

#[test]
fn expressions_against_naive_evaluator() {
    let mut rng = Rng(20261201);
    let data = rows(&mut rng, 2500);
    let db = table(&data);
    for q in 0..300 {
        let depth = 1 + rng.below(3) as u32;
        let e = numeric(&mut rng, depth);
        let w = boolean(&mut rng, depth);
        let sql = format!(
            "SELECT k, SUM({e}), MIN({e}), MAX({e}), COUNT({e}), COUNT(DISTINCT {e}) FROM t WHERE {w} GROUP BY k ORDER BY k",
            e = e.sql,
            w = w.sql
        );
        let s = settings(&mut rng);
        let mut groups: BTreeMap<i32, Vec<V>> = BTreeMap::new();
        for r in &data {
            if (w.eval)(r) == V::B(true) {
                groups.entry(r.k).or_default().push((e.eval)(r));
            }
        }
        let got = db.sql_with(&sql, &s).unwrap_or_else(|err| panic!("query {q}: {sql}\n{err}"));
        let got: Vec<Vec<V>> = got
            .iter()
            .flat_map(|b| (0..b.num_rows()).map(move |i| b.columns().iter().map(|c| cell(c, i)).collect::<Vec<_>>()))
            .collect();
        assert_eq!(got.len(), groups.len(), "query {q}: group count\n{sql}");
        for (row, (k, vals)) in got.iter().zip(&groups) {
            let mut want = vec![V::I(*k as i64)];
            let (aggs, bound) = naive_aggs(vals, e.ty);
            want.extend(aggs);
            for (c, (g, w)) in row.iter().zip(&want).enumerate() {
                assert!(same(g, w, if c == 1 { bound } else { 0.0 }), "query {q}, k = {k}, column {c}: got {g:?}, want {w:?}\n{sql}\nsettings {s:?}");
            }
        }
    }
}

#[test]
fn computed_keys_against_naive_evaluator() {
    let mut rng = Rng(7_2026);
    let data = rows(&mut rng, 2100);
    let db = table(&data);
    for q in 0..150 {
        let depth = 1 + rng.below(2) as u32;
        let e = numeric(&mut rng, depth);
        // A WHERE keeping no row, a few, most or all: computed keys are evaluated on the
        // kept rows of sparse morsels only.
        let cut = *rng.pick(&[0u8, 20, 100, 200, 255]);
        let sql = format!("SELECT {} AS x, COUNT(*) AS c FROM t WHERE u < {cut} GROUP BY x", e.sql);
        let s = settings(&mut rng);
        // Group keys in Tessera's float order: -0.0 with 0.0, NaNs together.
        let key = |v: &V| match v {
            V::F(f) => format!("F{:?}", canon(*f).to_bits()),
            V::Null => "NULL".to_string(),
            v => format!("I{}", v.i128()),
        };
        let mut want: HashMap<String, i64> = HashMap::new();
        for r in data.iter().filter(|r| r.u < cut) {
            *want.entry(key(&(e.eval)(r))).or_default() += 1;
        }
        let got = db.sql_with(&sql, &s).unwrap_or_else(|err| panic!("query {q}: {sql}\n{err}"));
        let mut have: HashMap<String, i64> = HashMap::new();
        for b in &got {
            for i in 0..b.num_rows() {
                let k = key(&cell(b.column(0), i));
                let V::I(c) = cell(b.column(1), i) else { panic!("count") };
                assert!(have.insert(k.clone(), c).is_none(), "query {q}: key {k} twice\n{sql}");
            }
        }
        assert_eq!(have, want, "query {q}: {sql}\nsettings {s:?}");

        // The same expression as a key beside every column it can read: a function of the
        // other keys, computed per group after the aggregation.
        let sql = format!("SELECT a, b, u, f, s, {} AS x, COUNT(*) AS c FROM t GROUP BY a, b, u, f, s, x", e.sql);
        let mut groups: HashMap<String, (String, i64)> = HashMap::new();
        for r in &data {
            let x = key(&(e.eval)(r));
            let g = format!("{:?} {:?} {} {:?} {:?} {x}", r.a, r.b, r.u, r.f.map(|f| canon(f).to_bits()), r.s);
            groups.entry(g).or_insert_with(|| (x, 0)).1 += 1;
        }
        let mut want: Vec<(String, i64)> = groups.into_values().collect();
        want.sort();
        let got = db.sql_with(&sql, &s).unwrap_or_else(|err| panic!("query {q}: {sql}\n{err}"));
        let mut have: Vec<(String, i64)> = Vec::new();
        for b in &got {
            for i in 0..b.num_rows() {
                let V::I(c) = cell(b.column(6), i) else { panic!("count") };
                have.push((key(&cell(b.column(5), i)), c));
            }
        }
        have.sort();
        assert_eq!(have, want, "query {q}: {sql}\nsettings {s:?}");
    }
}

/// Calendar SQL end to end: `GROUP BY ALL` / `ORDER BY ALL`, `INTERVAL` in both spellings,
/// typed `DATE` constants, `toDateTime`, and the errors of each. Expected values checked
/// with chDB 26.9 and DuckDB 2.0.
#[test]
fn calendar_sql() {
    // 2020-01-31 (18292), 2020-02-29 (18321), 2021-01-03 a Sunday (18630), 2021-01-04 a
    // Monday (18631), NULL.
    let days = vec![Some(18292), Some(18321), Some(18630), Some(18631), None];
    let schema = Arc::new(Schema::new(vec![Field::new("d", DataType::Date32, true)]));
    let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(Date32Array::from(days))]).unwrap();
    let db = Database::new();
    db.register_batches("c", schema, &[batch]).unwrap();
    let ints = |sql: &str| -> Vec<Vec<i64>> {
        let batches = db.sql(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        let mut rows = Vec::new();
        for b in &batches {
            for i in 0..b.num_rows() {
                rows.push(
                    b.columns()
                        .iter()
                        .map(|c| {
                            let c = tessera::arrow::compute::cast(c, &DataType::Int64).unwrap();
                            c.as_primitive::<Int64Type>().value(i)
                        })
                        .collect(),
                );
            }
        }
        rows
    };
    // Months start on 2020-01-01 (18262), 2020-02-01 (18293), 2021-01-01 (18628).
    assert_eq!(
        ints("SELECT toStartOfMonth(d) m, count(*) FROM c WHERE d IS NOT NULL GROUP BY ALL ORDER BY ALL"),
        vec![vec![18262, 1], vec![18293, 1], vec![18628, 2]]
    );
    assert_eq!(
        ints("SELECT toStartOfWeek(d) w, toMonday(d), count(*) FROM c WHERE d IS NOT NULL GROUP BY ALL ORDER BY ALL DESC"),
        vec![vec![18630, 18631, 1], vec![18630, 18624, 1], vec![18315, 18316, 1], vec![18287, 18288, 1]]
    );
    // Month arithmetic clips to the month's end; the date stays a date.
    assert_eq!(
        ints("SELECT d + INTERVAL 1 MONTH FROM c WHERE d IS NOT NULL ORDER BY 1"),
        vec![vec![18321], vec![18350], vec![18661], vec![18662]]
    );
    assert_eq!(ints("SELECT count(*) FROM c WHERE d >= DATE '2021-01-04' - INTERVAL '1 day'"), vec![vec![2]]);
    assert_eq!(ints("SELECT count(*) FROM c WHERE d < INTERVAL 1 YEAR + DATE '2019-03-01'"), vec![vec![2]]);
    assert_eq!(ints("SELECT toDateTime('2020-01-31 10:00:00') + INTERVAL 90 MINUTE"), vec![vec![1_580_470_200]]);
    assert_eq!(ints("SELECT extract(dow FROM d), extract(isodow FROM d) FROM c WHERE d = '2021-01-03'"), vec![vec![0, 7]]);
    // Errors: typed, never a panic.
    for (sql, want) in [
        ("SELECT INTERVAL 1 DAY - d FROM c", "an interval can be added"),
        ("SELECT 1 + INTERVAL 1 DAY", "an interval is added to a date or timestamp"),
        ("SELECT d + INTERVAL 'x' DAY FROM c", "constant integer"),
        ("SELECT d + INTERVAL 9223372036854775807 DAY FROM c", "overflow"),
        ("SELECT count(*) FROM c WHERE 'a' LIKE 'a!' ESCAPE '!'", "ends with its escape character"),
        ("SELECT count(*) FROM c WHERE 'a' LIKE 'a' ESCAPE 'ab'", "one character"),
    ] {
        let err = db.sql(sql).expect_err(sql).to_string();
        assert!(err.contains(want), "{sql}: {err}");
    }
}
