//! Lazy materialization of a string GROUP BY key (`group_by_lazy_string_keys`, key layout
//! `hash128+row`): a GROUP BY of one string column whose answer is a short ORDER BY .. LIMIT
//! groups by the key's hash and a row per group, then reads the answer's strings back from
//! the table. Its answers are checked against a naive count (any valid order of ties) and
//! against the same query with the setting off, from memory, disk and streamed Parquet, with WHERE
//! (selections and compacted morsels), 1 and 3 threads, the partitioned path and spills.

use std::collections::HashMap;
use std::sync::Arc;

use tessera::arrow::array::*;
use tessera::arrow::datatypes::*;
use tessera::{Database, Settings};

/// Rows of the test table: key `k` (`u`, a URL-like string) appears `k + 1` times for
/// `k < TOP` (distinct counts: the top of `ORDER BY COUNT(*) DESC` has no ties), once for
/// the other keys; rows in a scrambled order, `x` the row number.
const TOP: usize = 60;
const KEYS: usize = 40_000;

fn key(k: usize) -> String {
    format!("https://example.com/{}/page-{k}", ["news", "mail", "video", ""][k % 4])
}

fn rows() -> Vec<(String, i64)> {
    let mut keys: Vec<usize> = (0..KEYS).flat_map(|k| std::iter::repeat_n(k, if k < TOP { k + 1 } else { 1 })).collect();
    // A fixed permutation (multiplication by a number prime to the length).
    let n = keys.len();
    let step = (1..).map(|i| 7919 * i + 1).find(|s| gcd(*s, n) == 1).unwrap();
    keys = (0..n).map(|i| keys[(i * step) % n]).collect();
    keys.into_iter().enumerate().map(|(i, k)| (key(k), i as i64)).collect()
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

fn batches(rows: &[(String, i64)]) -> (SchemaRef, Vec<RecordBatch>) {
    let schema = Arc::new(Schema::new(vec![Field::new("u", DataType::Utf8, false), Field::new("x", DataType::Int64, false)]));
    let batches = rows
        .chunks(7_000)
        .map(|c| {
            let u = StringArray::from_iter_values(c.iter().map(|r| r.0.as_str()));
            let x = Int64Array::from_iter_values(c.iter().map(|r| r.1));
            RecordBatch::try_new(schema.clone(), vec![Arc::new(u), Arc::new(x)]).unwrap()
        })
        .collect();
    (schema, batches)
}

fn memory(rows: &[(String, i64)]) -> Database {
    let (schema, batches) = batches(rows);
    let db = Database::new();
    db.register_batches("t", schema, &batches).unwrap();
    db
}

/// The rows in an on-disk table of 3 parts, granules of 512 rows, block cache off.
fn disk(rows: &[(String, i64)], dir: &std::path::Path) -> Database {
    let (schema, batches) = batches(rows);
    let db = Database::open(dir).unwrap();
    db.create_table("t", schema, tessera::TableOptions { granule_rows: 512, ..Default::default() }).unwrap();
    for part in batches.chunks(3) {
        db.insert("t", part).unwrap();
    }
    db.set_block_cache_size(0);
    db
}

/// The rows in a Parquet file (written by Tessera), queried streaming.
fn parquet(rows: &[(String, i64)], dir: &std::path::Path) -> Database {
    let path = dir.join("t.parquet");
    let file = std::fs::File::create(&path).unwrap();
    memory(rows).write_query("SELECT * FROM t", tessera::Format::Parquet, &Default::default(), file).unwrap();
    let db = Database::new();
    db.register_parquet_streaming("t", &path, None).unwrap();
    db
}

fn settings(threads: usize, variant: usize, lazy: bool) -> Settings {
    let mut s = Settings::default();
    s.max_threads = threads;
    s.group_by_lazy_string_keys = lazy;
    match variant {
        0 => {}
        1 => s.group_by_two_level_threshold = 0,
        _ => s.set("max_bytes_before_external_group_by", "4096").unwrap(),
    }
    s
}

fn strings(b: &RecordBatch, c: usize) -> Vec<String> {
    b.column(c).as_string::<i32>().iter().map(|v| v.unwrap().to_string()).collect()
}

fn ints(b: &RecordBatch, c: usize) -> Vec<i64> {
    let a = tessera::arrow::compute::cast(b.column(c), &DataType::Int64).unwrap();
    a.as_primitive::<Int64Type>().values().to_vec()
}

fn one(out: Vec<RecordBatch>) -> RecordBatch {
    tessera::arrow::compute::concat_batches(&out[0].schema(), &out).unwrap()
}

/// `SELECT u, COUNT(*) .. WHERE x % m = r GROUP BY u ORDER BY c DESC LIMIT n OFFSET o` is
/// a valid answer: each row's count is its key's, the counts are the naive top's (ties in
/// any order), no key twice.
fn check_top_counts(rows: &[(String, i64)], got: &RecordBatch, m: i64, r: i64, n: usize, o: usize, ctx: &str) {
    let mut counts: HashMap<&str, i64> = HashMap::new();
    for (u, x) in rows {
        if x % m == r {
            *counts.entry(u.as_str()).or_default() += 1;
        }
    }
    let mut want: Vec<i64> = counts.values().copied().collect();
    want.sort_unstable_by(|a, b| b.cmp(a));
    let want: Vec<i64> = want.into_iter().skip(o).take(n).collect();
    let (us, cs) = (strings(got, 0), ints(got, 1));
    assert_eq!(cs, want, "{ctx}: counts");
    for (u, c) in us.iter().zip(&cs) {
        assert_eq!(counts.get(u.as_str()), Some(c), "{ctx}: count of {u}");
    }
    let mut distinct = us.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), us.len(), "{ctx}: a key twice");
}

/// Queries whose answers have no ties (distinct counts at the top, sums of distinct row
/// numbers), so the lazy and the string layouts give the same rows in the same order.
const EXACT: &[&str] = &[
    "SELECT u, COUNT(*) AS c FROM t GROUP BY u ORDER BY c DESC LIMIT 10",
    "SELECT 1, u, COUNT(*) AS c FROM t GROUP BY 1, u ORDER BY c DESC LIMIT 10",
    "SELECT u, u AS v, COUNT(*) AS c, SUM(x) AS s FROM t GROUP BY u ORDER BY c DESC LIMIT 7 OFFSET 3",
    "SELECT COUNT(*) AS c, MIN(x) FROM t GROUP BY u ORDER BY c DESC LIMIT 5",
    "SELECT u, SUM(x) AS s FROM t GROUP BY u HAVING COUNT(*) > 2 ORDER BY s DESC LIMIT 12",
    "SELECT u, COUNT(*) * 2 AS c2, MAX(u) FROM t WHERE x < 5000 GROUP BY u ORDER BY SUM(x) DESC LIMIT 9",
];

#[test]
fn lazy_string_keys_give_the_string_layouts_answers() {
    let rows = rows();
    let (dir, files) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for (source, db) in [("memory", memory(&rows)), ("disk", disk(&rows, dir.path())), ("parquet", parquet(&rows, files.path()))] {
        for threads in [1, 3] {
            for variant in 0..3 {
                for sql in EXACT {
                    // (LIMIT + OFFSET at most 12: within a streamed Parquet file's 16.)
                    let ctx = format!("{source}, {threads} threads, variant {variant}: {sql}");
                    let (lazy, profile) = db.sql_profiled(sql, Some(&settings(threads, variant, true))).unwrap();
                    assert_eq!(profile.layout, Some("hash128+row"), "{ctx}");
                    assert_eq!(profile.spills > 0, variant == 2, "{ctx}: spills");
                    let strict = db.sql_with(sql, &settings(threads, variant, false)).unwrap();
                    assert_eq!(one(lazy), one(strict), "{ctx}");
                }
                // With WHERE, counts tie: any order of the tied keys is right.
                let tops: &[(i64, i64, usize, usize)] =
                    if source == "parquet" { &[(3, 0, 10, 0), (7, 2, 12, 4)] } else { &[(3, 0, 10, 0), (7, 2, 25, 4), (1, 0, 1000, 0)] };
                for &(m, r, n, o) in tops {
                    let sql = format!("SELECT u, COUNT(*) AS c FROM t WHERE x % {m} = {r} GROUP BY u ORDER BY c DESC LIMIT {n} OFFSET {o}");
                    let ctx = format!("{source}, {threads} threads, variant {variant}: {sql}");
                    let (got, profile) = db.sql_profiled(&sql, Some(&settings(threads, variant, true))).unwrap();
                    assert_eq!(profile.layout, Some("hash128+row"), "{ctx}");
                    check_top_counts(&rows, &one(got), m, r, n, o, &ctx);
                }
            }
        }
        // A selective WHERE (morsels compacted to their kept rows, read at those rows).
        let sql = "SELECT u, COUNT(*) AS c FROM t WHERE x IN (5, 77, 1234, 30000, 40001) GROUP BY u ORDER BY c DESC LIMIT 3";
        let got = one(db.sql_with(sql, &settings(2, 0, true)).unwrap());
        let want = one(db.sql_with(sql, &settings(2, 0, false)).unwrap());
        assert_eq!(ints(&got, 1), ints(&want, 1), "{source}: {sql}");
        let picked: Vec<String> = [5, 77, 1234, 30000, 40001].iter().map(|&i| rows[i].0.clone()).collect();
        assert!(strings(&got, 0).iter().all(|u| picked.contains(u)), "{source}: {sql}");
    }
}

/// Where the answer needs the key's strings before the top rows are chosen (ORDER BY the
/// key, HAVING or an expression over it, no LIMIT or a long one), or the key is not a
/// plain string column without NULLs, the strings are grouped as they are.
#[test]
fn lazy_string_keys_only_where_the_answer_allows() {
    let db = memory(&rows());
    for sql in [
        "SELECT u, COUNT(*) AS c FROM t GROUP BY u ORDER BY u LIMIT 10",
        "SELECT u, COUNT(*) AS c FROM t GROUP BY u ORDER BY c DESC, u DESC LIMIT 10",
        "SELECT u, COUNT(*) AS c FROM t GROUP BY u HAVING u LIKE '%video%' ORDER BY c DESC LIMIT 10",
        "SELECT length(u) AS l, COUNT(*) AS c FROM t GROUP BY u ORDER BY c DESC LIMIT 10",
        "SELECT u, COUNT(*) AS c FROM t GROUP BY u ORDER BY c DESC LIMIT 1001",
        "SELECT u, COUNT(*) AS c FROM t GROUP BY u ORDER BY c DESC",
        "SELECT lower(u) AS l, COUNT(*) AS c FROM t GROUP BY lower(u) ORDER BY c DESC LIMIT 10",
        "SELECT CASE WHEN x % 2 = 0 THEN u END AS n, COUNT(*) AS c FROM t GROUP BY n ORDER BY c DESC LIMIT 10",
    ] {
        let (_, profile) = db.sql_profiled(sql, Some(&settings(2, 0, true))).unwrap();
        assert_ne!(profile.layout, Some("hash128+row"), "{sql}");
    }
    // A streamed Parquet file (whose rows are read a morsel at a time) reads back 16 rows
    // at most.
    let files = tempfile::tempdir().unwrap();
    let pq = parquet(&rows(), files.path());
    for (limit, lazy) in [(16, true), (17, false)] {
        let sql = format!("SELECT u, COUNT(*) AS c FROM t GROUP BY u ORDER BY c DESC LIMIT {limit}");
        let (_, profile) = pq.sql_profiled(&sql, Some(&settings(2, 0, true))).unwrap();
        assert_eq!(profile.layout == Some("hash128+row"), lazy, "{sql}");
    }
    // The setting off.
    let (_, profile) =
        db.sql_profiled("SELECT u, COUNT(*) AS c FROM t GROUP BY u ORDER BY c DESC LIMIT 10", Some(&settings(2, 0, false))).unwrap();
    assert_eq!(profile.layout, Some("string"));
}
