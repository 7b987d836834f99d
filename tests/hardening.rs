//! Regressions for the defects fuzzing found (issue 14): a stack overflow on long OR chains,
//! LIKE escapes lost in the SQL lexer, the float order (-0.0, NaN) in GROUP BY, ORDER BY,
//! comparisons and MIN/MAX, internal errors on bad SQL, answers that changed with the thread
//! count at LIMIT ties, and memory accounting of serialized group keys.

use std::sync::Arc;

use tessera::arrow::array::*;
use tessera::arrow::datatypes::*;
use tessera::{Database, Error};

/// A NaN with the sign bit set (what `inf - inf` gives on x86).
fn neg_nan() -> f64 {
    f64::from_bits(f64::NAN.to_bits() | (1 << 63))
}

/// Registers `cols` as table `name`, cut into batches of `chunk` rows (several morsels).
fn register(db: &Database, name: &str, cols: Vec<(&str, ArrayRef)>, chunk: usize) {
    let schema = Arc::new(Schema::new(
        cols.iter().map(|(n, a)| Field::new(*n, a.data_type().clone(), true)).collect::<Vec<_>>(),
    ));
    let rows = cols[0].1.len();
    let batches: Vec<RecordBatch> = (0..rows)
        .step_by(chunk)
        .map(|s| {
            let len = chunk.min(rows - s);
            RecordBatch::try_new(schema.clone(), cols.iter().map(|(_, a)| a.slice(s, len)).collect()).unwrap()
        })
        .collect();
    db.register_batches(name, schema, &batches).unwrap();
}

fn one(db: &Database, sql: &str) -> RecordBatch {
    let out = db.sql(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    tessera::arrow::compute::concat_batches(&out[0].schema(), &out).unwrap()
}

fn i64s(b: &RecordBatch, c: usize) -> Vec<i64> {
    b.column(c).as_primitive::<Int64Type>().values().to_vec()
}

fn f64s(b: &RecordBatch, c: usize) -> Vec<f64> {
    let a = tessera::arrow::compute::cast(b.column(c), &DataType::Float64).unwrap();
    a.as_primitive::<Float64Type>().iter().map(|v| v.unwrap_or(-12345.0)).collect()
}

fn strs(b: &RecordBatch, c: usize) -> Vec<String> {
    let a = tessera::arrow::compute::cast(b.column(c), &DataType::Utf8).unwrap();
    a.as_string::<i32>().iter().map(|v| v.unwrap_or("NULL").to_string()).collect()
}

#[test]
fn long_or_chains_run_on_a_small_stack() {
    let db = Database::new();
    let v: ArrayRef = Arc::new(Int32Array::from_iter_values((0..50_000).map(|i| i % 10_000)));
    register(&db, "t", vec![("v", v)], 8192);
    // 2 MiB is the default stack of a spawned thread: an embedding application may plan
    // and run from one; the workers' stacks are the same size.
    let handle = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            for terms in [2_500usize, 20_000] {
                let sql = format!(
                    "SELECT COUNT(*) FROM t WHERE {}",
                    (0..terms).map(|i| format!("v = {}", i * 3)).collect::<Vec<_>>().join(" OR ")
                );
                let expect = (0..50_000).filter(|i| (i % 10_000) % 3 == 0 && (i % 10_000) / 3 < terms).count();
                assert_eq!(i64s(&one(&db, &sql), 0), vec![expect as i64], "{terms} OR terms");
                // The same chain under AND NOT, nested in parentheses.
                let sql = format!(
                    "SELECT COUNT(*) FROM t WHERE v >= 0 AND NOT ({})",
                    (0..terms).map(|i| format!("(v = {})", i * 3)).collect::<Vec<_>>().join(" OR ")
                );
                assert_eq!(i64s(&one(&db, &sql), 0), vec![50_000 - expect as i64]);
            }
            // 300 levels of parentheses and NOT are fine; deeper than the parser's depth
            // limit is a typed error, not a crash.
            let nested = format!("SELECT COUNT(*) FROM t WHERE {}v = 3{}", "NOT (NOT (".repeat(150), "))".repeat(150));
            assert_eq!(i64s(&one(&db, &nested), 0), vec![5]);
            let deep = format!("SELECT COUNT(*) FROM t WHERE {}v = 1{}", "NOT (".repeat(5_000), ")".repeat(5_000));
            assert!(matches!(db.sql(&deep), Err(Error::Parse(_))), "{:?}", db.sql(&deep).err());
        })
        .unwrap();
    handle.join().expect("no stack overflow");
}

#[test]
fn like_escapes_reach_the_pattern() {
    let db = Database::new();
    let vals = ["%", "a%b", "50%", "a_b", "axb", r"a\b", "", "plain"];
    let s: ArrayRef = Arc::new(StringArray::from(vals.to_vec()));
    register(&db, "t", vec![("s", s)], 3);
    let matching = |sql: &str| {
        let b = one(&db, &format!("SELECT s FROM t WHERE {sql} ORDER BY s"));
        strs(&b, 0)
    };
    assert_eq!(matching(r"s LIKE '\%'"), vec!["%"]);
    // ClickHouse: `\\` in the literal is one backslash, which then escapes `%` in LIKE.
    assert_eq!(matching(r"s LIKE '\\%'"), vec!["%"]);
    assert_eq!(matching(r"s LIKE '%\%%'"), vec!["%", "50%", "a%b"]);
    assert_eq!(matching(r"s NOT LIKE '%\%%'").len(), vals.len() - 3);
    assert_eq!(matching(r"s LIKE 'a\_b'"), vec!["a_b"]);
    assert_eq!(matching(r"s LIKE '%\\\\%'"), vec![r"a\b"]);
    assert_eq!(matching(r"s = 'a\\b'"), vec![r"a\b"]);
    assert_eq!(matching(r"s = 'a\x25b'"), vec!["a%b"]);
    assert!(matches!(db.sql(r"SELECT s FROM t WHERE s LIKE 'a\\'"), Err(Error::Parse(_))));
}

fn float_table(db: &Database) {
    // g: group; x: values with both zeros, NaNs of both signs and infinities.
    let g: ArrayRef = Arc::new(Int32Array::from(vec![1, 1, 1, 2, 2, 2, 3, 3, 4, 4]));
    let x = vec![neg_nan(), f64::NAN, neg_nan(), 1.0, neg_nan(), -2.0, -0.0, 0.0, f64::INFINITY, 5.0];
    let x64: ArrayRef = Arc::new(Float64Array::from(x.clone()));
    let x32: ArrayRef = Arc::new(Float32Array::from(x.iter().map(|&v| v as f32).collect::<Vec<_>>()));
    let k: ArrayRef = Arc::new(Int32Array::from((0..10).collect::<Vec<i32>>()));
    register(db, "f", vec![("g", g), ("x", x64), ("y", x32), ("k", k)], 4);
}

#[test]
fn min_max_follow_the_float_order() {
    let db = Database::new();
    float_table(&db);
    for col in ["x", "y"] {
        for threads in [1, 3] {
            let b = one(
                &db,
                &format!("SELECT g, MIN({col}), MAX({col}) FROM f GROUP BY g ORDER BY g SETTINGS max_threads = {threads}"),
            );
            let (min, max) = (f64s(&b, 1), f64s(&b, 2));
            // group 1: all NaN; 2: NaN among numbers; 3: both zeros; 4: inf and 5.
            assert!(min[0].is_nan() && max[0].is_nan(), "{col}: all-NaN group gives NaN, got {min:?} {max:?}");
            assert_eq!((min[1], max[1].is_nan()), (-2.0, true), "{col}");
            assert_eq!((min[2], max[2]), (0.0, 0.0), "{col}");
            assert_eq!((min[3], max[3]), (5.0, f64::INFINITY), "{col}");
            let g = one(&db, &format!("SELECT MIN({col}), MAX({col}) FROM f WHERE g = 1"));
            assert!(f64s(&g, 0)[0].is_nan() && f64s(&g, 1)[0].is_nan());
            let g = one(&db, &format!("SELECT MIN({col}), MAX({col}) FROM f"));
            assert_eq!(f64s(&g, 0)[0], -2.0);
            assert!(f64s(&g, 1)[0].is_nan());
        }
    }
}

#[test]
fn nan_and_zero_keys_form_one_group_each() {
    let db = Database::new();
    float_table(&db);
    for col in ["x", "y"] {
        for settings in ["max_threads = 1", "max_threads = 3, group_by_force_serialized = 1"] {
            let sql = format!("SELECT {col}, COUNT(*) FROM f GROUP BY {col} ORDER BY {col} SETTINGS {settings}");
            let b = one(&db, &sql);
            let keys = f64s(&b, 0);
            // -2, 0 (both zeros), 1, 5, inf, NaN (all four).
            assert_eq!(keys.len(), 6, "{sql}: {keys:?}");
            assert_eq!(&keys[..5], &[-2.0, 0.0, 1.0, 5.0, f64::INFINITY]);
            assert!(keys[5].is_nan());
            assert_eq!(keys[1].to_bits(), 0, "the zero group shows +0.0");
            assert_eq!(i64s(&b, 1), vec![1, 2, 1, 1, 1, 4]);
        }
    }
}

#[test]
fn order_by_and_comparisons_follow_the_float_order() {
    let db = Database::new();
    float_table(&db);
    // -0.0 and 0.0 tie, so the second key decides: k DESC puts row 7 (0.0) before row 6.
    let b = one(&db, "SELECT k FROM f WHERE g = 3 ORDER BY x, k DESC");
    assert_eq!(strs(&b, 0), vec!["7", "6"]);
    // NaNs of both signs after +inf (NULLS LAST has no NULLs here), ties in row order.
    let b = one(&db, "SELECT k FROM f ORDER BY x");
    assert_eq!(strs(&b, 0), vec!["5", "6", "7", "3", "9", "8", "0", "1", "2", "4"]);
    let b = one(&db, "SELECT k FROM f ORDER BY y DESC LIMIT 5");
    assert_eq!(strs(&b, 0), vec!["0", "1", "2", "4", "8"]);
    // Against a literal: NaN is above every number.
    assert_eq!(i64s(&one(&db, "SELECT COUNT(*) FROM f WHERE x > 1"), 0), vec![6]);
    assert_eq!(i64s(&one(&db, "SELECT COUNT(*) FROM f WHERE y >= 5"), 0), vec![6]);
    assert_eq!(i64s(&one(&db, "SELECT COUNT(*) FROM f WHERE x <= 1"), 0), vec![4]);
    assert_eq!(i64s(&one(&db, "SELECT COUNT(*) FROM f WHERE x = 0"), 0), vec![2]);
    assert_eq!(i64s(&one(&db, "SELECT COUNT(*) FROM f WHERE x <> 0"), 0), vec![8]);
    // Column against column: same order (NaN = NaN, -0.0 = 0.0, NaN > inf).
    let db2 = Database::new();
    let a: ArrayRef = Arc::new(Float64Array::from(vec![neg_nan(), -0.0, f64::NAN, f64::INFINITY, 1.0]));
    let c: ArrayRef = Arc::new(Float64Array::from(vec![f64::NAN, 0.0, f64::INFINITY, neg_nan(), 2.0]));
    register(&db2, "p", vec![("a", a), ("c", c)], 2);
    let count = |w: &str| i64s(&one(&db2, &format!("SELECT COUNT(*) FROM p WHERE {w}")), 0)[0];
    assert_eq!(count("a = c"), 2);
    assert_eq!(count("a > c"), 1);
    assert_eq!(count("a < c"), 2);
    assert_eq!(count("a >= c"), 3);
}

#[test]
fn bad_sql_gets_typed_errors() {
    let db = Database::new();
    float_table(&db);
    assert!(matches!(db.sql("SELECT FROM f"), Err(Error::Parse(_))), "{:?}", db.sql("SELECT FROM f"));
    assert!(matches!(db.sql(r"SELECT k FROM f WHERE x = 'a\xZZ'"), Err(Error::Parse(_))));
    // Reserved words the parser would take as aliases hide typos.
    assert!(matches!(db.sql("SELECT k BY FROM f"), Err(Error::Parse(_))));
    assert!(matches!(db.sql("SELECT COUNT(*) FROM f NOT WHERE k = 1"), Err(Error::Parse(_))));
    assert_eq!(one(&db, r#"SELECT k AS "by" FROM f WHERE g = 3 ORDER BY 1"#).schema().field(0).name(), "by");
}

/// Many groups tie on the ORDER BY key at the LIMIT boundary: the answer must not depend on
/// the thread count or the path (ties broken by the group key; scans by row position).
#[test]
fn limit_ties_are_deterministic() {
    let db = Database::new();
    let n = 200_000;
    let a: ArrayRef = Arc::new(Int64Array::from_iter_values((0..n).map(|i| (i * 7919) % 50_000)));
    let s: ArrayRef = Arc::new(StringArray::from_iter_values((0..n).map(|i| format!("s{}", (i * 31) % 9_999))));
    let c: ArrayRef = Arc::new(Int32Array::from_iter_values((0..n).map(|i| (i % 4) as i32)));
    register(&db, "t", vec![("a", a), ("s", s), ("c", c)], 10_000);
    let queries = [
        "SELECT a, COUNT(*) AS n FROM t GROUP BY a ORDER BY n DESC LIMIT 10",
        "SELECT s, c, COUNT(*) AS n FROM t GROUP BY s, c ORDER BY n DESC LIMIT 7 OFFSET 3",
        "SELECT c, COUNT(*) FROM t GROUP BY a, c ORDER BY c LIMIT 5",
        "SELECT a FROM t GROUP BY a LIMIT 4",
        "SELECT a, s FROM t ORDER BY c LIMIT 10",
        "SELECT a, s FROM t WHERE c = 2 LIMIT 10 OFFSET 5",
    ];
    for q in queries {
        let answers: Vec<String> = [1, 2, 3, 4]
            .iter()
            .flat_map(|t| {
                let two_level = format!("{q} SETTINGS max_threads = {t}, group_by_two_level_threshold = 0");
                [format!("{q} SETTINGS max_threads = {t}"), two_level]
            })
            .filter(|sql| !(sql.contains("two_level") && !sql.contains("GROUP BY")))
            .map(|sql| {
                let b = one(&db, &sql);
                format!("{:?}", (0..b.num_columns()).map(|c| strs(&b, c)).collect::<Vec<_>>())
            })
            .collect();
        assert!(answers.windows(2).all(|w| w[0] == w[1]), "{q}: {answers:#?}");
    }
    // The scan LIMIT without ORDER BY returns the first rows in table order.
    let b = one(&db, "SELECT c FROM t WHERE c = 2 LIMIT 3 OFFSET 1 SETTINGS max_threads = 3");
    assert_eq!(strs(&b, 0), vec!["2", "2", "2"]);
    let b = one(&db, "SELECT a FROM t LIMIT 3 SETTINGS max_threads = 4");
    assert_eq!(strs(&b, 0), vec!["0", "7919", "15838"]);
}

/// Serialized group keys own heap memory that `max_memory_usage` must count: 200k unique
/// 6-key groups (~100 bytes of key each) exceed 16 MB.
#[test]
fn serialized_keys_count_against_max_memory_usage() {
    let db = Database::new();
    let n = 200_000;
    let mut cols: Vec<(&str, ArrayRef)> = Vec::new();
    let names = ["a", "b", "c", "d", "e", "f"];
    for (j, name) in names.iter().enumerate() {
        cols.push((name, Arc::new(StringArray::from_iter_values((0..n).map(|i| format!("{j}-{i:012}"))))));
    }
    register(&db, "w", cols, 16_384);
    let sql = "SELECT a, b, c, d, e, f, COUNT(*) FROM w GROUP BY a, b, c, d, e, f";
    let unlimited = db.sql_profiled(sql, None).unwrap();
    let rows: usize = unlimited.0.iter().map(|b| b.num_rows()).sum();
    assert_eq!(rows, n);
    assert!(unlimited.1.peak_memory_bytes > n * 6 * 16, "keys' heap counted: {}", unlimited.1.peak_memory_bytes);
    let limited = db.sql(&format!("{sql} SETTINGS max_memory_usage = 16000000"));
    assert!(matches!(limited, Err(Error::ResourcesExhausted(_))), "{:?}", limited.map(|b| b.len()));
}

/// `toMinute` of a NULL timestamp is NULL in a scan's output (it was the minute of the slot's
/// arbitrary value), on both scan paths.
#[test]
fn minute_of_null_timestamp_is_null() {
    let db = Database::new();
    let ts: ArrayRef = Arc::new(TimestampSecondArray::from(vec![Some(1_373_600_061), None, Some(1_373_600_125)]));
    let k: ArrayRef = Arc::new(Int32Array::from(vec![1, 2, 3]));
    register(&db, "t", vec![("ts", ts), ("k", k)], 2);
    for lazy in [0, 1] {
        let b = one(&db, &format!("SELECT toMinute(ts) AS m, k FROM t ORDER BY k LIMIT 3 SETTINGS query_plan_optimize_lazy_materialization = {lazy}"));
        assert_eq!(strs(&b, 0), vec!["34", "NULL", "35"]);
    }
    assert_eq!(strs(&one(&db, "SELECT toMinute(ts) FROM t WHERE k = 2"), 0), vec!["NULL"]);
}

/// `GROUP BY .. LIMIT n` without ORDER BY aggregates only the first `n + OFFSET` keys of the
/// input (`optimize_trivial_group_by_limit_query`): each returned group's aggregates equal
/// the full aggregation's, for every layout, thread count and path, with WHERE and OFFSET;
/// the groups are the first keys in input order, whatever the threads; with the setting off,
/// or when the first eighth of the rows holds too few keys, every group is aggregated.
#[test]
fn group_by_limit_without_order_by_aggregates_the_first_keys_exactly() {
    let db = Database::new();
    let n = 120_000i64;
    let a: ArrayRef = Arc::new(Int64Array::from_iter_values((0..n).map(|i| (i * 7919) % 5_000)));
    let s: ArrayRef = Arc::new(StringArray::from_iter((0..n).map(|i| (i % 13 != 0).then(|| format!("s{}", (i * 31) % 997)))));
    let v: ArrayRef = Arc::new(Int32Array::from_iter_values((0..n).map(|i| (i % 101) as i32)));
    // `late` has 2 distinct values until the last eighth of the rows, then 500.
    let late: ArrayRef = Arc::new(Int64Array::from_iter_values((0..n).map(|i| if i < n / 8 * 7 { i % 2 } else { i % 500 })));
    register(&db, "t", vec![("a", a), ("s", s), ("v", v), ("late", late)], 8_192);
    let shapes = [
        ("a", "SUM(v) AS x, COUNT(*) AS c, MIN(s) AS m", "", "LIMIT 10"),
        ("s", "SUM(v) AS x, COUNT(*) AS c, MAX(a) AS m", "WHERE v > 50", "LIMIT 5 OFFSET 3"),
        ("a, s", "SUM(v) AS x, COUNT(*) AS c, COUNT(DISTINCT v) AS m", "", "LIMIT 7"),
        ("late", "SUM(v) AS x, COUNT(*) AS c, AVG(a) AS m", "", "LIMIT 20"),
    ];
    for (keys, aggs, filter, limit) in shapes {
        let full = one(&db, &format!("SELECT {keys}, {aggs} FROM t {filter} GROUP BY {keys}"));
        let nk = keys.split(',').count();
        let rows = |b: &RecordBatch| {
            let cols: Vec<Vec<String>> = (0..b.num_columns()).map(|c| strs(b, c)).collect();
            (0..b.num_rows()).map(|i| cols.iter().map(|c| c[i].clone()).collect::<Vec<_>>()).collect::<Vec<_>>()
        };
        let full_rows: std::collections::HashMap<Vec<String>, Vec<String>> =
            rows(&full).into_iter().map(|r| (r[..nk].to_vec(), r)).collect();
        let mut answers = Vec::new();
        for settings in ["max_threads = 1", "max_threads = 3", "max_threads = 2, group_by_two_level_threshold = 0",
                         "max_threads = 2, group_by_force_serialized = 1", "max_threads = 2, optimize_trivial_group_by_limit_query = 0"] {
            let sql = format!("SELECT {keys}, {aggs} FROM t {filter} GROUP BY {keys} {limit} SETTINGS {settings}");
            let b = one(&db, &sql);
            let want = limit.split_whitespace().nth(1).unwrap().parse::<usize>().unwrap();
            assert_eq!(b.num_rows(), want, "{sql}");
            let got = rows(&b);
            for (i, r) in got.iter().enumerate() {
                assert_eq!(full_rows.get(&r[..nk]), Some(r), "{sql}: row {i}");
            }
            answers.push((settings, got));
        }
        // The same groups whatever the threads and path (the setting off picks others).
        let on: Vec<_> = answers.iter().filter(|(s, _)| !s.contains("optimize")).map(|(_, r)| r).collect();
        assert!(on.windows(2).all(|w| w[0] == w[1]), "{keys} {limit}: {answers:#?}");
    }
    // The first keys in input order: a = 0, 7919 % 5000, ... (sorted by key in the answer).
    let b = one(&db, "SELECT a, COUNT(*) FROM t GROUP BY a LIMIT 3");
    let mut first: Vec<i64> = (0..3).map(|i| (i * 7919) % 5_000).collect();
    first.sort();
    assert_eq!(i64s(&b, 0), first);
    assert_eq!(i64s(&b, 1), vec![24; 3]);
    // Setting off: the first groups in key order.
    let b = one(&db, "SELECT a FROM t GROUP BY a LIMIT 3 SETTINGS optimize_trivial_group_by_limit_query = 0");
    assert_eq!(i64s(&b, 0), vec![0, 1, 2]);
}

/// Per-group COUNT(DISTINCT x) over fixed-width keys runs as a GROUP BY of the (key, x)
/// pairs, then a count per key: equal to a naive count with NULL keys (one group), NULL
/// values (not counted), floats (-0.0 = 0.0, one NaN), HAVING, ORDER BY and LIMIT, with
/// 1 and 3 threads and the forced two-level path.
#[test]
fn count_distinct_per_group_equals_a_naive_count() {
    use std::collections::{BTreeMap, BTreeSet};
    let db = Database::new();
    let n = 90_000usize;
    let key = |i: usize| (i % 17 != 5).then_some(((i * 7) % 23) as i32);
    let val = |i: usize| (i % 11 != 0).then_some(((i * 7919) % 3_001) as i64);
    let fl = |i: usize| match i % 9 {
        0 => Some(-0.0),
        1 => Some(0.0),
        2 => Some(f64::NAN),
        3 => None,
        _ => Some(((i * 13) % 701) as f64 / 4.0),
    };
    let k: ArrayRef = Arc::new(Int32Array::from_iter((0..n).map(key)));
    let v: ArrayRef = Arc::new(Int64Array::from_iter((0..n).map(val)));
    let f: ArrayRef = Arc::new(Float64Array::from_iter((0..n).map(fl)));
    register(&db, "t", vec![("k", k), ("v", v), ("f", f)], 8_192);
    let mut by_v: BTreeMap<Option<i32>, BTreeSet<i64>> = BTreeMap::new();
    let mut by_f: BTreeMap<Option<i32>, BTreeSet<u64>> = BTreeMap::new();
    for i in 0..n {
        let sv = by_v.entry(key(i)).or_default();
        if let Some(x) = val(i) {
            sv.insert(x);
        }
        let sf = by_f.entry(key(i)).or_default();
        if let Some(x) = fl(i) {
            sf.insert(if x == 0.0 { 0 } else if x.is_nan() { u64::MAX } else { x.to_bits() });
        }
    }
    let text = |k: &Option<i32>| k.map_or("NULL".to_string(), |k| k.to_string());
    for settings in ["max_threads = 1", "max_threads = 3", "max_threads = 2, group_by_two_level_threshold = 0"] {
        let b = one(&db, &format!("SELECT k, COUNT(DISTINCT v) AS u, COUNT(DISTINCT f) AS w FROM t GROUP BY k ORDER BY k SETTINGS {settings}"));
        let want_k: Vec<String> = by_v.keys().map(text).collect();
        let mut got_k = strs(&b, 0);
        // NULLS LAST: the naive map has NULL first.
        got_k.rotate_right(1);
        assert_eq!(got_k, want_k, "{settings}");
        let mut u = i64s(&b, 1);
        u.rotate_right(1);
        assert_eq!(u, by_v.values().map(|s| s.len() as i64).collect::<Vec<_>>(), "{settings}");
        let b = one(&db, &format!("SELECT k, COUNT(DISTINCT f) AS w FROM t GROUP BY k ORDER BY k NULLS FIRST SETTINGS {settings}"));
        assert_eq!(i64s(&b, 1), by_f.values().map(|s| s.len() as i64).collect::<Vec<_>>(), "{settings}");
        // HAVING and a top-N on the count.
        let b = one(&db, &format!(
            "SELECT k, COUNT(DISTINCT v) AS u FROM t WHERE v > 100 GROUP BY k HAVING COUNT(DISTINCT v) > 5 ORDER BY u DESC, k LIMIT 4 SETTINGS {settings}"
        ));
        let mut want: Vec<(i64, Option<i32>)> = Vec::new();
        let mut sets: BTreeMap<Option<i32>, BTreeSet<i64>> = BTreeMap::new();
        for i in 0..n {
            if let Some(x) = val(i).filter(|&x| x > 100) {
                sets.entry(key(i)).or_default().insert(x);
            }
        }
        for (k, s) in &sets {
            if s.len() > 5 {
                want.push((-(s.len() as i64), *k));
            }
        }
        want.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.is_none().cmp(&b.1.is_none())).then(a.1.cmp(&b.1)));
        want.truncate(4);
        assert_eq!(strs(&b, 0), want.iter().map(|w| text(&w.1)).collect::<Vec<_>>(), "{settings}");
        assert_eq!(i64s(&b, 1), want.iter().map(|w| -w.0).collect::<Vec<_>>(), "{settings}");
    }
}

/// Top-N dynamic filtering over keys with NULLs (NULLS LAST: a LIMIT past the non-NULL
/// rows reaches them; NULLS FIRST is not filtered), dates, descending strings and ties:
/// the same rows as the unfiltered scan, computed independently here for one case.
#[test]
fn top_k_dynamic_filtering_keeps_nulls_ties_and_order() {
    let db = Database::new();
    let n = 50_000usize;
    let k = |i: usize| (i % 5 != 0).then_some(((i * 7919) % 1_000) as i64);
    let a: ArrayRef = Arc::new(Int64Array::from_iter((0..n).map(k)));
    let d: ArrayRef = Arc::new(Date32Array::from_iter((0..n).map(|i| (i % 7 != 3).then_some(((i * 31) % 400) as i32))));
    let s: ArrayRef = Arc::new(StringArray::from_iter((0..n).map(|i| (i % 9 != 4).then(|| format!("v{}", (i * 13) % 777)))));
    let r: ArrayRef = Arc::new(Int64Array::from_iter_values((0..n).map(|i| i as i64)));
    register(&db, "t", vec![("a", a), ("d", d), ("s", s), ("r", r)], 1_024);
    let queries = [
        "SELECT a, r FROM t ORDER BY a LIMIT 20",
        "SELECT a, r FROM t WHERE r % 3 = 1 ORDER BY a DESC LIMIT 15 OFFSET 7",
        "SELECT a, r FROM t ORDER BY a LIMIT 1000",
        "SELECT a, r FROM t ORDER BY a NULLS FIRST LIMIT 20",
        "SELECT d, s, r FROM t ORDER BY d DESC, s LIMIT 30",
        "SELECT s, r FROM t WHERE s LIKE '%7%' ORDER BY s DESC LIMIT 40",
        "SELECT s, r FROM t ORDER BY s LIMIT 999 OFFSET 1",
    ];
    for q in queries {
        let mut answers = Vec::new();
        for settings in ["max_threads = 1", "max_threads = 3", "max_threads = 2, use_top_k_dynamic_filtering = 0"] {
            let b = one(&db, &format!("{q} SETTINGS {settings}"));
            answers.push(format!("{:?}", (0..b.num_columns()).map(|c| strs(&b, c)).collect::<Vec<_>>()));
        }
        assert!(answers.windows(2).all(|w| w[0] == w[1]), "{q}: {answers:#?}");
    }
    // ORDER BY a LIMIT 1000 by hand: the 40,000 non-NULL keys in order, ties by position.
    let mut want: Vec<(i64, usize)> = (0..n).filter_map(|i| k(i).map(|v| (v, i))).collect();
    want.sort();
    let b = one(&db, "SELECT a, r FROM t ORDER BY a LIMIT 1000");
    assert_eq!(i64s(&b, 0), want[..1000].iter().map(|&(v, _)| v).collect::<Vec<_>>());
    assert_eq!(i64s(&b, 1), want[..1000].iter().map(|&(_, i)| i as i64).collect::<Vec<_>>());
    // An expression that fails on a row the bound would drop (a late row with a large
    // key) fails the query whatever the scheduling: no dynamic filtering then.
    let b: ArrayRef = Arc::new(Int64Array::from_iter_values((0..n).map(|i| if i == n - 3 { 0 } else { 1 + (i % 3) as i64 })));
    let k: ArrayRef = Arc::new(Int64Array::from_iter_values((0..n).map(|i| i as i64)));
    register(&db, "e", vec![("k", k), ("b", b)], 1_024);
    for threads in [1, 2, 3] {
        for q in ["SELECT intDiv(k, b) AS x, k FROM e ORDER BY k LIMIT 10", "SELECT k FROM e WHERE intDiv(k, b) >= 0 ORDER BY k LIMIT 10"] {
            let sql = format!("{q} SETTINGS max_threads = {threads}");
            assert!(db.sql(&sql).is_err(), "{sql}: the division by zero of row {} must fail the query", n - 3);
        }
    }
    // A LIMIT past the non-NULL keys: the NULL rows follow, in table order.
    let b = one(&db, "SELECT r FROM t WHERE r < 100 ORDER BY a LIMIT 90");
    let nulls: Vec<i64> = (0..100).filter(|i| i % 5 == 0).map(|i| i as i64).collect();
    assert_eq!(i64s(&b, 0)[80..], nulls[..10]);
}

/// COUNT(DISTINCT x) beside other aggregates per group (ClickBench Q10's shape) runs as
/// two GROUP BYs joined on the keys: every group's SUM, COUNT(*), COUNT(v), AVG, MIN and
/// distinct count equal a naive computation, with NULL keys and values, a projection over
/// two aggregates, HAVING on the distinct count, and ORDER BY an aggregate with ties
/// (broken by the key) and LIMIT, for 1 and 3 threads and the forced two-level path.
#[test]
fn count_distinct_beside_other_aggregates_equals_a_naive_computation() {
    use std::collections::{BTreeMap, BTreeSet};
    let db = Database::new();
    let n = 80_000usize;
    let key = |i: usize| (i % 19 != 7).then_some(((i * 13) % 41) as i16);
    let val = |i: usize| (i % 10 != 3).then_some(((i * 7919) % 2_003) as i64);
    let w = |i: usize| ((i * 31) % 1_000) as i32;
    let k: ArrayRef = Arc::new(Int16Array::from_iter((0..n).map(key)));
    let v: ArrayRef = Arc::new(Int64Array::from_iter((0..n).map(val)));
    let wc: ArrayRef = Arc::new(Int32Array::from_iter_values((0..n).map(w)));
    register(&db, "t", vec![("k", k), ("v", v), ("w", wc)], 4_096);
    #[derive(Default)]
    struct G {
        sum_w: i64,
        rows: i64,
        vals: i64,
        min_v: Option<i64>,
        set: BTreeSet<i64>,
    }
    let mut groups: BTreeMap<Option<i16>, G> = BTreeMap::new();
    for i in (0..n).filter(|&i| w(i) >= 100) {
        let g = groups.entry(key(i)).or_default();
        g.sum_w += w(i) as i64;
        g.rows += 1;
        if let Some(x) = val(i) {
            g.vals += 1;
            g.min_v = Some(g.min_v.map_or(x, |m| m.min(x)));
            g.set.insert(x);
        }
    }
    let text = |k: &Option<i16>| k.map_or("NULL".to_string(), |k| k.to_string());
    for settings in ["max_threads = 1", "max_threads = 3", "max_threads = 2, group_by_two_level_threshold = 0"] {
        let sql = format!(
            "SELECT k, SUM(w) AS s, COUNT(*) AS c, COUNT(v) AS cv, AVG(w) AS a, MIN(v) AS m, COUNT(DISTINCT v) AS u, \
             COUNT(DISTINCT v) + COUNT(*) AS uc FROM t WHERE w >= 100 GROUP BY k ORDER BY k SETTINGS {settings}"
        );
        let b = one(&db, &sql);
        let mut order: Vec<&Option<i16>> = groups.keys().collect();
        order.rotate_left(1); // NULLS LAST
        assert_eq!(strs(&b, 0), order.iter().map(|k| text(k)).collect::<Vec<_>>(), "{sql}");
        let g = |f: &dyn Fn(&G) -> String| order.iter().map(|k| f(&groups[*k])).collect::<Vec<_>>();
        assert_eq!(strs(&b, 1), g(&|g| g.sum_w.to_string()), "{sql}");
        assert_eq!(strs(&b, 2), g(&|g| g.rows.to_string()), "{sql}");
        assert_eq!(strs(&b, 3), g(&|g| g.vals.to_string()), "{sql}");
        let avg = f64s(&b, 4);
        for (a, k) in avg.iter().zip(&order) {
            let gr = &groups[*k];
            assert!((a - gr.sum_w as f64 / gr.rows as f64).abs() < 1e-9, "{sql}: AVG of {k:?}");
        }
        assert_eq!(strs(&b, 5), g(&|g| g.min_v.map_or("NULL".into(), |m| m.to_string())), "{sql}");
        assert_eq!(strs(&b, 6), g(&|g| g.set.len().to_string()), "{sql}");
        assert_eq!(strs(&b, 7), g(&|g| (g.set.len() as i64 + g.rows).to_string()), "{sql}");
        // HAVING on the distinct count, top-N on COUNT(*) with ties broken by the key.
        let sql = format!(
            "SELECT k, COUNT(*) AS c, COUNT(DISTINCT v) AS u FROM t WHERE w >= 100 GROUP BY k \
             HAVING COUNT(DISTINCT v) > 40 ORDER BY c DESC LIMIT 5 SETTINGS {settings}"
        );
        let b = one(&db, &sql);
        let mut want: Vec<(i64, Option<i16>, usize)> =
            groups.iter().filter(|(_, g)| g.set.len() > 40).map(|(k, g)| (-g.rows, *k, g.set.len())).collect();
        want.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.is_none().cmp(&b.1.is_none())).then(a.1.cmp(&b.1)));
        want.truncate(5);
        assert_eq!(strs(&b, 0), want.iter().map(|w| text(&w.1)).collect::<Vec<_>>(), "{sql}");
        assert_eq!(i64s(&b, 1), want.iter().map(|w| -w.0).collect::<Vec<_>>(), "{sql}");
        assert_eq!(i64s(&b, 2), want.iter().map(|w| w.2 as i64).collect::<Vec<_>>(), "{sql}");
    }
}

/// An ORDER BY over more rows than one thread sorts alone (each worker's rows sorted in
/// parallel, then merged) gives the naive sort's order, ties in table order, at 1, 2 and 3
/// threads: a whole answer, a window past a large OFFSET (late materialization of the
/// window's other columns) and descending keys.
#[test]
fn large_order_by_matches_a_naive_sort() {
    let n = 1_300_000i64;
    let k: Vec<i32> = (0..n).map(|i| (i * 7919 % 1000) as i32).collect();
    let v: Vec<i64> = (0..n).collect();
    let s: Vec<String> = (0..n).map(|i| format!("s{}", i % 97)).collect();
    let db = Database::new();
    register(
        &db,
        "t",
        vec![
            ("k", Arc::new(Int32Array::from(k.clone())) as ArrayRef),
            ("v", Arc::new(Int64Array::from(v.clone())) as ArrayRef),
            ("s", Arc::new(StringArray::from(s.clone())) as ArrayRef),
        ],
        65_536,
    );
    // Ties on k keep table order (v ascending).
    let mut asc: Vec<usize> = (0..n as usize).collect();
    asc.sort_by_key(|&i| (k[i], i));
    let mut desc: Vec<usize> = (0..n as usize).collect();
    desc.sort_by_key(|&i| (std::cmp::Reverse(k[i]), i));
    for threads in [1, 2, 3] {
        let sql = format!("SELECT v FROM t ORDER BY k SETTINGS max_threads = {threads}");
        let b = db.sql(&sql).unwrap();
        let got: Vec<i64> = b.iter().flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec()).collect();
        assert_eq!(got, asc.iter().map(|&i| v[i]).collect::<Vec<_>>(), "{sql}");
        let sql = format!("SELECT s, v FROM t ORDER BY k DESC LIMIT 7 OFFSET 800000 SETTINGS max_threads = {threads}");
        let b = one(&db, &sql);
        let want = &desc[800_000..800_007];
        assert_eq!(i64s(&b, 1), want.iter().map(|&i| v[i]).collect::<Vec<_>>(), "{sql}");
        assert_eq!(strs(&b, 0), want.iter().map(|&i| s[i].clone()).collect::<Vec<_>>(), "{sql}");
    }
}
