//! Golden-file SQL tests: each `tests/golden/queries/NN_name.sql` holds one query whose
//! answer on the generated hits table (300,000 rows, seed 7) DuckDB computed into
//! `NN_name.jsonl` (`tests/golden/make_golden.py` regenerates them).
//!
//! The first line of a query file says how to compare: `-- compare: exact` (every row and
//! column, in order) or `-- compare: column N` (only column N, in order: for queries whose
//! ORDER BY ties let engines return different tied rows, e.g. ClickBench Q33 where every
//! count is 1).

use std::path::{Path, PathBuf};

use serde_json::Value as Json;
use tessera::arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use tessera::arrow::datatypes::*;
use tessera::{Database, Settings};

const ROWS: u64 = 300_000;
const SEED: u64 = 7;

fn dataset() -> PathBuf {
    // One file per test binary run, shared by the tests of this file.
    static ONCE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ONCE.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("golden");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("hits-{ROWS}-seed{SEED}.parquet"));
        let opts = tessera::datasets::GenOptions::new(ROWS).with_seed(SEED);
        tessera::datasets::write_parquet(&path, &opts, &|_| {}).unwrap();
        path
    })
    .clone()
}

fn cell(a: &ArrayRef, i: usize) -> Json {
    if a.is_null(i) {
        return Json::Null;
    }
    match a.data_type() {
        DataType::Int8 => a.as_primitive::<Int8Type>().value(i).into(),
        DataType::Int16 => a.as_primitive::<Int16Type>().value(i).into(),
        DataType::Int32 => a.as_primitive::<Int32Type>().value(i).into(),
        DataType::Int64 => a.as_primitive::<Int64Type>().value(i).into(),
        DataType::UInt8 => a.as_primitive::<UInt8Type>().value(i).into(),
        DataType::UInt64 => a.as_primitive::<UInt64Type>().value(i).into(),
        DataType::Float64 => a.as_primitive::<Float64Type>().value(i).into(),
        // 128-bit sums: compared as f64 (relative 1e-9), as the golden JSON holds them.
        DataType::Decimal128(_, 0) => (a.as_primitive::<Decimal128Type>().value(i) as f64).into(),
        DataType::Utf8 => a.as_string::<i32>().value(i).into(),
        DataType::Date32 => {
            let d = a.as_primitive::<Date32Type>().value_as_date(i).unwrap();
            d.format("%Y-%m-%d").to_string().into()
        }
        DataType::Timestamp(TimeUnit::Second, None) => {
            let t = a.as_primitive::<TimestampSecondType>().value_as_datetime(i).unwrap();
            t.format("%Y-%m-%d %H:%M:%S").to_string().into()
        }
        other => panic!("golden: unexpected type {other}"),
    }
}

fn same(a: &Json, b: &Json) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) if a.is_f64() || b.is_f64() => (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0),
        _ => a == b,
    }
}

fn rows(batches: &[RecordBatch]) -> Vec<Vec<Json>> {
    let mut out = Vec::new();
    for b in batches {
        for r in 0..b.num_rows() {
            out.push(b.columns().iter().map(|c| cell(c, r)).collect());
        }
    }
    out
}

/// Runs every golden query under `settings`, checks it against DuckDB's answer, and returns
/// (file name, rows) per query.
fn run_all(settings: &Settings) -> Vec<(String, Vec<Vec<Json>>)> {
    let db = Database::with_settings(settings.clone());
    db.register_parquet_with_schema("hits", &dataset(), tessera::datasets::hits::schema()).unwrap();
    check_all(&db, settings)
}

/// A database directory holding the golden dataset as an on-disk `hits` table (three parts,
/// sorted by ClickBench's key, granules of 2,048 rows: 8-granule morsels of 16,384 rows),
/// made once per test binary run.
fn disk_dataset() -> PathBuf {
    static ONCE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ONCE.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("golden/disk-hits-{ROWS}-seed{SEED}"));
        let _ = std::fs::remove_dir_all(&dir);
        let mem = Database::new();
        mem.register_parquet_with_schema("hits", &dataset(), tessera::datasets::hits::schema()).unwrap();
        let schema = tessera::datasets::hits::schema();
        // The answer's fields are nullable; the table's are the hits schema's.
        let batches: Vec<RecordBatch> = mem
            .sql("SELECT * FROM hits")
            .unwrap()
            .into_iter()
            .map(|b| RecordBatch::try_new(schema.clone(), b.columns().to_vec()).unwrap())
            .collect();
        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
        assert_eq!(rows as u64, ROWS);
        let disk = Database::open(&dir).unwrap();
        let options = tessera::TableOptions {
            order_by: ["CounterID", "EventDate", "UserID", "EventTime", "WatchID"].map(String::from).to_vec(),
            granule_rows: 2048,
            ..Default::default()
        };
        disk.create_table("hits", schema.clone(), options).unwrap();
        let all = tessera::arrow::compute::concat_batches(&schema, &batches).unwrap();
        let third = all.num_rows().div_ceil(3);
        for start in (0..all.num_rows()).step_by(third) {
            disk.insert("hits", &[all.slice(start, third.min(all.num_rows() - start))]).unwrap();
        }
        assert_eq!(disk.disk_table("hits").unwrap().num_parts(), 3);
        dir
    })
    .clone()
}

/// Runs every golden query on `db` under `settings` and checks it against DuckDB's answer.
fn check_all(db: &Database, settings: &Settings) -> Vec<(String, Vec<Vec<Json>>)> {
    let mut answers = Vec::new();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/queries");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sql"))
        .collect();
    files.sort();
    assert!(files.len() >= 22, "golden queries missing");
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let mode = text.lines().next().unwrap().trim_start_matches("-- compare:").trim().to_string();
        let sql: String = text.lines().filter(|l| !l.starts_with("--")).collect::<Vec<_>>().join("\n");
        let want: Vec<Vec<Json>> = std::fs::read_to_string(f.with_extension("jsonl"))
            .unwrap_or_else(|e| panic!("{}: no golden answer ({e}); run tests/golden/make_golden.py", f.display()))
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let got = rows(&db.sql_with(&sql, settings).unwrap_or_else(|e| panic!("{}: {e}", f.display())));
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        assert_eq!(got.len(), want.len(), "{name}: row count (settings {settings:?})");
        let cols: Option<usize> = mode.strip_prefix("column ").map(|n| n.trim().parse::<usize>().unwrap() - 1);
        for (r, (g, w)) in got.iter().zip(&want).enumerate() {
            match cols {
                Some(c) => assert!(same(&g[c], &w[c]), "{name}: row {r} column {}: got {} want {}", c + 1, g[c], w[c]),
                None => {
                    assert_eq!(g.len(), w.len(), "{name}: columns");
                    for (c, (x, y)) in g.iter().zip(w).enumerate() {
                        assert!(same(x, y), "{name}: row {r} column {}: got {x} want {y}\n got {g:?}\nwant {w:?}", c + 1);
                    }
                }
            }
        }
        answers.push((name, got));
    }
    answers
}

#[test]
fn golden_answers_default_settings() {
    run_all(&Settings::default());
}

/// The same answers from every kernel family this build and CPU run (scalar, AVX2 and
/// AVX-512 on x86_64; NEON and SVE on aarch64), forced per query with `simd_level`.
#[test]
fn golden_answers_every_simd_level() {
    for level in tessera::SimdLevel::available() {
        let mut s = Settings::default();
        s.set("simd_level", level.name()).unwrap();
        run_all(&s);
    }
}

#[test]
fn golden_answers_one_thread_and_forced_paths() {
    let mut s = Settings::default();
    s.max_threads = 1;
    run_all(&s);
    s.max_threads = 3;
    s.group_by_two_level_threshold = 0;
    run_all(&s);
    s.group_by_force_serialized = true;
    s.max_threads = 2;
    run_all(&s);
}

/// Answers are the same, byte for byte (tied rows at a LIMIT included), whatever the thread
/// count and aggregation path: ties are broken by the group key or the row position.
#[test]
fn golden_answers_identical_across_threads() {
    let mut s = Settings::default();
    s.max_threads = 1;
    let reference = run_all(&s);
    for (threads, two_level) in [(2, false), (3, false), (3, true)] {
        s.max_threads = threads;
        s.group_by_two_level_threshold = if two_level { 0 } else { Settings::default().group_by_two_level_threshold };
        for ((name, want), (_, got)) in reference.iter().zip(run_all(&s)) {
            assert_eq!(
                serde_json::to_string(&got).unwrap(),
                serde_json::to_string(want).unwrap(),
                "{name}: {threads} threads (two-level forced: {two_level}) differs from 1 thread"
            );
        }
    }
}

/// On-disk tables are read a morsel at a time (streaming, PREWHERE, late materialization):
/// the golden answers again, from three parts, at 1 and 3 threads and on the forced
/// two-level path, without the decoded-block cache, then twice with it (cold, then warm:
/// every block from the cache).
#[test]
fn golden_answers_from_disk_streaming() {
    let db = Database::open(&disk_dataset()).unwrap();
    let mut s = Settings::default();
    db.set_block_cache_size(0);
    for (threads, two_level) in [(1, false), (3, false), (3, true)] {
        s.max_threads = threads;
        s.group_by_two_level_threshold = if two_level { 0 } else { Settings::default().group_by_two_level_threshold };
        check_all(&db, &s);
    }
    assert_eq!(db.block_cache_bytes(), 0);
    db.set_block_cache_size(64 << 20);
    s = Settings::default();
    let cold = check_all(&db, &s);
    let cached = db.block_cache_bytes();
    assert!(cached > 0 && cached <= 64 << 20, "cache holds {cached} bytes");
    let warm = check_all(&db, &s);
    assert_eq!(serde_json::to_string(&cold).unwrap(), serde_json::to_string(&warm).unwrap());
    assert!(db.block_cache_bytes() <= 64 << 20);
}

/// A Parquet file registered for streaming is read a morsel at a time too (row selections
/// over the file's offset index, PREWHERE, late materialization): the golden answers at 1
/// and 3 threads and on the forced two-level path, and nothing kept in the table after.
#[test]
fn golden_answers_from_parquet_streaming() {
    let db = Database::new();
    db.register_parquet_streaming("hits", &dataset(), Some(tessera::datasets::hits::schema())).unwrap();
    let table = db.table("hits").unwrap();
    assert!(table.streams());
    let mut s = Settings::default();
    for (threads, two_level) in [(1, false), (3, false), (3, true)] {
        s.max_threads = threads;
        s.group_by_two_level_threshold = if two_level { 0 } else { Settings::default().group_by_two_level_threshold };
        check_all(&db, &s);
    }
    let all: Vec<usize> = (0..table.schema().fields().len()).collect();
    assert!(table.resident_columns(&all).iter().all(Option::is_none), "a streaming table keeps no column");
}
