//! External GROUP BY (spilling to temporary files) and the process-wide memory cap: answers
//! equal the in-memory path for every key layout, with NULLs, 1 and 3 threads; temporary
//! files never outlive the query, nor a killed process; concurrent queries over
//! `max_server_memory_usage` fail cleanly or finish.

use std::io::BufRead;
use std::path::Path;
use std::sync::Arc;

use tessera::arrow::array::*;
use tessera::arrow::datatypes::*;
use tessera::{Database, Error, Settings};

const ROWS: usize = 60_000;

/// A table `t` of `ROWS` rows in batches of 8,192: ~20,000 distinct `k`, strings with
/// NULLs and empty strings, NULLs in `kn`, `vn` and the date `d`, a float column with -0.0
/// and NaN, a `UInt8` and a timestamp column.
fn database() -> Database {
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("k32", DataType::Int32, false),
        Field::new("s", DataType::Utf8, true),
        Field::new("v", DataType::Int64, false),
        Field::new("f", DataType::Float64, false),
        Field::new("kn", DataType::Int64, true),
        Field::new("vn", DataType::Int32, true),
        Field::new("u", DataType::UInt8, false),
        Field::new("d", DataType::Date32, true),
        Field::new("ts", DataType::Timestamp(TimeUnit::Second, None), false),
    ]));
    let mut batches = Vec::new();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for start in (0..ROWS).step_by(8192) {
        let n = 8192.min(ROWS - start);
        let r: Vec<u64> = (0..n).map(|_| next()).collect();
        let k: Vec<i64> = r.iter().map(|x| (x % 20_000) as i64 - 10_000).collect();
        let k32: Vec<i32> = r.iter().map(|x| ((x >> 20) % 7) as i32).collect();
        let s: Vec<Option<String>> = r
            .iter()
            .map(|x| match (x >> 32) % 50 {
                0 => None,
                1 => Some(String::new()),
                m => Some(format!("url-{}-{}", (x >> 8) % 9_000, "p".repeat(m as usize))),
            })
            .collect();
        let v: Vec<i64> = r.iter().map(|x| ((x >> 3) % 1_000_000) as i64 - 500_000).collect();
        let f: Vec<f64> = r
            .iter()
            .map(|x| match (x >> 40) % 100 {
                0 => f64::NAN,
                1 => -0.0,
                m => m as f64 * 0.5,
            })
            .collect();
        let kn: Vec<Option<i64>> =
            r.iter().map(|x| ((x >> 16) % 10 != 0).then_some(((x >> 24) % 15_000) as i64)).collect();
        let vn: Vec<Option<i32>> =
            r.iter().map(|x| ((x >> 28) % 4 != 0).then_some(((x >> 44) % 1000) as i32)).collect();
        batches.push(
            RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(Int64Array::from(k)),
                    Arc::new(Int32Array::from(k32)),
                    Arc::new(StringArray::from(s)),
                    Arc::new(Int64Array::from(v)),
                    Arc::new(Float64Array::from(f)),
                    Arc::new(Int64Array::from(kn)),
                    Arc::new(Int32Array::from(vn)),
                    Arc::new(UInt8Array::from_iter_values(r.iter().map(|x| (x >> 50) as u8))),
                    Arc::new(Date32Array::from_iter(r.iter().map(|x| ((x >> 12) % 9 != 0).then_some(((x >> 36) % 400) as i32)))),
                    Arc::new(TimestampSecondArray::from_iter_values(r.iter().map(|x| 1_370_000_000 + ((x >> 22) % 50_000) as i64))),
                ],
            )
            .unwrap(),
        );
    }
    let db = Database::new();
    db.register_batches("t", schema, &batches).unwrap();
    db
}

/// The rows of [`database`] in an on-disk table (granules of 1,024 rows, block cache off):
/// its morsels are streamed, so scattered string keys borrow them and are aggregated into
/// per-partition tables as the worker goes (flushes), the path a spill of Q19 from disk
/// takes.
fn disk_database(dir: &Path) -> Database {
    let mem = database();
    let batches = mem.sql("SELECT * FROM t").unwrap();
    let disk = Database::open(dir).unwrap();
    let schema = batches[0].schema();
    disk.create_table("t", schema, tessera::TableOptions { granule_rows: 1024, ..Default::default() }).unwrap();
    disk.insert("t", &batches).unwrap();
    disk.set_block_cache_size(0);
    disk
}

/// One query per key layout (and the NULL / non-scatterable paths), each ordered by all its
/// keys so that the answer is fully defined, plus top-N shapes.
const QUERIES: &[&str] = &[
    // fixed64, scattered rows (no NULL inputs)
    "SELECT k, COUNT(*), SUM(v), MIN(v), MAX(f), AVG(v) FROM t GROUP BY k ORDER BY k",
    // fixed128
    "SELECT k32, k, COUNT(*) AS c, SUM(v) FROM t GROUP BY k32, k ORDER BY k32, k",
    // string, with a NULL key and the empty string
    "SELECT s, COUNT(*), SUM(v), MIN(f) FROM t GROUP BY s ORDER BY s",
    // fixed + string
    "SELECT k32, s, COUNT(*), MAX(v) FROM t GROUP BY k32, s ORDER BY k32, s",
    // NULL keys and NULL inputs (two-level tables), string MIN/MAX and COUNT(DISTINCT)
    // (states with heap bytes)
    "SELECT kn, COUNT(vn), SUM(vn), MIN(s), MAX(s), COUNT(DISTINCT s), COUNT(DISTINCT vn) FROM t GROUP BY kn ORDER BY kn",
    // top-N over spilled partitions (ties broken by the key)
    "SELECT k, COUNT(*) AS c FROM t GROUP BY k ORDER BY c DESC, k LIMIT 10",
    "SELECT s, SUM(v) AS x FROM t WHERE k > 0 GROUP BY s ORDER BY x DESC LIMIT 5",
];

fn settings(threads: usize) -> Settings {
    let mut s = Settings::default();
    s.max_threads = threads;
    s
}

#[test]
fn spilled_group_by_equals_in_memory_for_every_layout() {
    let db = database();
    let tmp = tempfile::tempdir().unwrap();
    for sql in QUERIES {
        let mut base = settings(1);
        base.max_bytes_ratio_before_external_group_by = 0.0;
        base.max_server_memory_usage = 0;
        let (want, profile) = db.sql_profiled(sql, Some(&base)).unwrap();
        assert_eq!(profile.spills, 0, "{sql}");
        let want = format!("{want:?}");
        for threads in [1, 3] {
            // The last case spills 1,024 radix partitions (`group_by_radix_bits`).
            for (threshold, serialized, radix_bits) in [(100_000, false, 0), (256, false, 0), (256, true, 0), (256, false, 10)] {
                let mut s = settings(threads);
                s.group_by_radix_bits = radix_bits;
                if serialized {
                    s.temporary_files_codec = tessera::TemporaryFilesCodec::None;
                }
                s.max_bytes_before_external_group_by = 32 << 10;
                s.group_by_two_level_threshold = threshold;
                s.group_by_force_serialized = serialized;
                s.tmp_path = Some(tmp.path().to_path_buf());
                let case = format!("{sql} / {threads} threads, threshold {threshold}, serialized {serialized}, radix bits {radix_bits}");
                let (got, profile) = db.sql_profiled(sql, Some(&s)).unwrap_or_else(|e| panic!("{case}: {e}"));
                assert_eq!(format!("{got:?}"), want, "{case}");
                assert!(
                    profile.spills > 0 && profile.spilled_runs > 0 && profile.spilled_bytes > 0,
                    "{case}: {profile:?}"
                );
                let partitions = if radix_bits == 0 { 256 } else { 1 << radix_bits };
                assert_eq!(profile.radix_partitions, partitions, "{case}");
                assert_no_files(tmp.path());
            }
        }
    }
}

/// ORDER BY without LIMIT (and with LIMITs past the top-N and late-materialization paths),
/// over every column type, NULLs first and last, with OFFSET and WHERE: sorted runs spilled
/// and merged give the in-memory answer exactly, with 1 and 3 threads and either codec.
const SORTS: &[&str] = &[
    "SELECT * FROM t ORDER BY k, s",
    "SELECT s, f, kn, u FROM t ORDER BY s DESC, f, u",
    "SELECT kn, vn, s FROM t ORDER BY vn DESC NULLS FIRST, kn NULLS FIRST",
    "SELECT ts, d, u, k32 FROM t WHERE k > 0 ORDER BY d DESC, ts, u DESC",
    "SELECT f, k FROM t ORDER BY f DESC",
    "SELECT k, s FROM t ORDER BY s LIMIT 100000 OFFSET 50",
    "SELECT k, v, s FROM t ORDER BY v DESC LIMIT 30000 OFFSET 20000",
    "SELECT s, k FROM t WHERE kn IS NOT NULL ORDER BY s, k LIMIT 10 OFFSET 30000",
];

/// All rows of `batches` in one batch, to compare answers batch boundaries aside.
/// A worker whose state passes its limit late in its input writes only its largest
/// partitions and keeps aggregating the others in memory: with limits swept from an eighth
/// of the in-memory state to all of it (so spills come at every point of the input, whole
/// or partial), every layout's answer equals the in-memory one, on 1 and 3 threads, from
/// memory and from an on-disk table.
#[test]
fn late_partial_spills_equal_in_memory_for_every_layout() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    for (on_disk, db) in [(false, database()), (true, disk_database(dir.path()))] {
        for sql in QUERIES {
            for threads in [1, 3] {
                let mut base = settings(threads);
                base.max_bytes_ratio_before_external_group_by = 0.0;
                base.max_server_memory_usage = 0;
                base.group_by_two_level_threshold = 256;
                let (want, profile) = db.sql_profiled(sql, Some(&base)).unwrap();
                assert_eq!(profile.spills, 0, "{sql}");
                let want = format!("{want:?}");
                let mut spilled = 0;
                // Whether a spill wrote some partitions only: a whole spill writes a run of
                // rows for each of the 256 radix partitions (they all hold rows by then), so
                // fewer than 256 runs per spill means some spill was partial.
                let mut partial = false;
                for eighths in 1..=8 {
                    let mut s = base.clone();
                    s.max_bytes_before_external_group_by = (profile.hash_table_bytes * eighths / 8).max(1) as u64;
                    s.tmp_path = Some(tmp.path().to_path_buf());
                    let case = format!("{sql} / {threads} threads, limit {eighths}/8 of the state");
                    let (got, p) = db.sql_profiled(sql, Some(&s)).unwrap_or_else(|e| panic!("{case}: {e}"));
                    assert_eq!(format!("{got:?}"), want, "{case}");
                    spilled += p.spills;
                    partial |= p.spills > 0 && p.spilled_runs < p.spills * 256;
                    assert_no_files(tmp.path());
                }
                assert!(spilled > 0, "{sql} / {threads} threads: no limit spilled");
                // The scattered rows of fixed-width keys (the first two queries, in memory;
                // the on-disk copy's columns are nullable, so its aggregation takes
                // per-partition tables) are not aggregated before the final phase: a late
                // limit writes only part of them.
                if !on_disk && threads == 1 && QUERIES[..2].contains(sql) {
                    assert!(partial, "{sql}: every spill wrote every partition");
                }
            }
        }
    }
}

/// Aggregates without GROUP BY whose one group's state passes the limit (distinct values
/// of two columns beside COUNT(*)): the state spills, the answer equals the in-memory one
/// with 1 and 3 threads, and no file is left. (A row of the unit key takes no bytes in the
/// radix buffers: sizing them by it divided by zero.)
#[test]
fn keyless_aggregates_over_the_limit_equal_in_memory() {
    let db = database();
    let tmp = tempfile::tempdir().unwrap();
    for sql in ["SELECT COUNT(*), COUNT(DISTINCT s), COUNT(DISTINCT k) FROM t"] {
        let mut base = settings(1);
        base.max_bytes_ratio_before_external_group_by = 0.0;
        base.max_server_memory_usage = 0;
        let want = format!("{:?}", db.sql_profiled(sql, Some(&base)).unwrap().0);
        for threads in [1, 3] {
            let mut s = settings(threads);
            s.max_bytes_before_external_group_by = 32 << 10;
            s.tmp_path = Some(tmp.path().to_path_buf());
            let (got, p) = db.sql_profiled(sql, Some(&s)).unwrap_or_else(|e| panic!("{sql} / {threads} threads: {e}"));
            assert_eq!(format!("{got:?}"), want, "{sql} / {threads} threads");
            assert!(p.spills > 0, "{sql} / {threads} threads: {p:?}");
            assert_no_files(tmp.path());
        }
    }
}

fn one(batches: &[RecordBatch]) -> RecordBatch {
    tessera::arrow::compute::concat_batches(&batches[0].schema(), batches).unwrap()
}

#[test]
fn external_sort_equals_in_memory_for_every_type() {
    let db = database();
    let tmp = tempfile::tempdir().unwrap();
    for sql in SORTS {
        let mut base = settings(1);
        base.max_bytes_ratio_before_external_sort = 0.0;
        base.max_server_memory_usage = 0;
        let (want, profile) = db.sql_profiled(sql, Some(&base)).unwrap();
        assert_eq!(profile.spills, 0, "{sql}");
        let want = one(&want);
        assert!(want.num_rows() >= 10, "{sql}");
        for threads in [1, 3] {
            for codec in [tessera::TemporaryFilesCodec::Lz4, tessera::TemporaryFilesCodec::None] {
                let mut s = settings(threads);
                s.max_bytes_before_external_sort = 64 << 10;
                s.temporary_files_codec = codec;
                s.tmp_path = Some(tmp.path().to_path_buf());
                let case = format!("{sql} / {threads} threads, {codec:?}");
                let (got, profile) = db.sql_profiled(sql, Some(&s)).unwrap_or_else(|e| panic!("{case}: {e}"));
                assert_eq!(one(&got), want, "{case}");
                assert!(profile.spills > 0 && profile.spilled_runs > 0 && profile.spilled_bytes > 0, "{case}: {profile:?}");
                assert_no_files(tmp.path());
            }
        }
    }
    // The temporary-data limit and a missing tmp_path are clean errors here too.
    let mut s = settings(2);
    s.max_bytes_before_external_sort = 64 << 10;
    s.tmp_path = Some(tmp.path().to_path_buf());
    s.max_temporary_data_on_disk_size = 50_000;
    let e = db.sql_profiled(SORTS[0], Some(&s)).unwrap_err();
    assert!(e.to_string().contains("max_temporary_data_on_disk_size = 50000"), "{e}");
    assert_no_files(tmp.path());
    s.max_temporary_data_on_disk_size = 0;
    s.tmp_path = Some(tmp.path().join("missing"));
    assert!(matches!(db.sql_profiled(SORTS[0], Some(&s)), Err(Error::Io { .. })));
    // By SQL, and the answer's rows all there.
    db.sql(&format!("SET tmp_path = '{}'", tmp.path().display())).unwrap();
    db.sql("SET max_bytes_before_external_sort = 100000").unwrap();
    let (got, profile) = db.sql_profiled("SELECT v FROM t ORDER BY v", None).unwrap();
    assert!(profile.spills > 0, "{profile:?}");
    let got = one(&got);
    assert_eq!(got.num_rows(), ROWS);
    let v = got.column(0).as_primitive::<Int64Type>();
    assert!(v.values().windows(2).all(|w| w[0] <= w[1]));
    assert_no_files(tmp.path());
}

/// ORDER BY over the groups of a GROUP BY, without a LIMIT or past the top-N: partitions'
/// groups sorted and spilled as runs, merged, give the in-memory answer (HAVING and OFFSET
/// included), one table or radix partitions, 1 and 3 threads.
#[test]
fn external_sort_of_groups_equals_in_memory() {
    let db = database();
    let tmp = tempfile::tempdir().unwrap();
    let queries = [
        "SELECT k, COUNT(*) AS c, SUM(v) FROM t GROUP BY k ORDER BY c DESC",
        "SELECT s, MIN(f), COUNT(*) AS c FROM t GROUP BY s HAVING COUNT(*) > 1 ORDER BY c DESC, MIN(f)",
        "SELECT kn, k32, SUM(vn) AS x FROM t GROUP BY kn, k32 ORDER BY x NULLS FIRST LIMIT 100000 OFFSET 10",
    ];
    for sql in queries {
        let mut base = settings(1);
        base.max_bytes_ratio_before_external_sort = 0.0;
        base.max_bytes_ratio_before_external_group_by = 0.0;
        base.max_server_memory_usage = 0;
        let (want, profile) = db.sql_profiled(sql, Some(&base)).unwrap();
        assert_eq!(profile.spills, 0, "{sql}");
        let want = one(&want);
        assert!(want.num_rows() > 1000, "{sql}: {}", want.num_rows());
        for threads in [1, 3] {
            for two_level in [100_000, 256] {
                let mut s = base.clone();
                s.max_threads = threads;
                s.group_by_two_level_threshold = two_level;
                s.max_bytes_before_external_sort = 16 << 10;
                s.tmp_path = Some(tmp.path().to_path_buf());
                let case = format!("{sql} / {threads} threads, two-level threshold {two_level}");
                let (got, profile) = db.sql_profiled(sql, Some(&s)).unwrap_or_else(|e| panic!("{case}: {e}"));
                assert_eq!(one(&got), want, "{case}");
                assert!(profile.spills > 0 && profile.spilled_bytes > 0, "{case}: {profile:?}");
                assert_no_files(tmp.path());
            }
        }
    }
}

/// Sorts and answers past `debug_sort_run_bytes` (256 MiB by default, 16 KiB here): rows
/// sorted into runs in memory and merged, unsorted answers of scans and GROUP BY handed out in
/// several batches; answers equal the one-batch path and nothing goes to disk.
#[test]
fn sorted_runs_in_memory_and_multi_batch_answers_equal_one_batch() {
    let db = database();
    let queries = [
        SORTS[0],
        SORTS[5],
        SORTS[6],
        // Top-N over runs in memory: the runs are compacted to the best 2,100 rows.
        "SELECT k, s, v FROM t ORDER BY s DESC, v LIMIT 2000 OFFSET 100",
        "SELECT s, k FROM t WHERE v > 0",
        "SELECT s, k FROM t LIMIT 20000 OFFSET 9000",
        "SELECT k, s, COUNT(*) FROM t GROUP BY k, s",
        "SELECT k, COUNT(*) AS c FROM t GROUP BY k HAVING COUNT(*) > 2 ORDER BY c, k DESC",
    ];
    for sql in queries {
        let mut base = settings(2);
        base.max_bytes_ratio_before_external_sort = 0.0;
        base.max_server_memory_usage = 0;
        let (want, _) = db.sql_profiled(sql, Some(&base)).unwrap();
        let want = &one(&want);
        let mut s = base.clone();
        s.debug_sort_run_bytes = 16 << 10;
        s.group_by_two_level_threshold = 256;
        let (got, profile) = db.sql_profiled(sql, Some(&s)).unwrap();
        assert_eq!(profile.spills, 0, "{sql}");
        if sql.contains("ORDER BY") || sql.contains("LIMIT") {
            // (The merge's batches hold up to 65,536 rows: one batch here.)
            assert_eq!(&one(&got), want, "{sql}");
        } else {
            assert!(got.len() > 1, "{sql}: one batch");
            // No order: the same rows (as a sorted multiset).
            let sorted = |b: &RecordBatch| {
                let mut rows: Vec<String> = (0..b.num_rows()).map(|i| format!("{:?}", b.slice(i, 1).columns())).collect();
                rows.sort_unstable();
                rows
            };
            assert_eq!(sorted(&one(&got)), sorted(want), "{sql}");
        }
    }
}

/// A LIMIT query that spills on every morsel (300k rows in 4,096-row morsels, a 16 KiB
/// threshold) keeps at most 16 disk runs per worker by merging them into their best
/// `offset + limit` rows: the answer still equals the in-memory one.
#[test]
fn limit_runs_on_disk_are_compacted() {
    let n = 300_000usize;
    let schema = Arc::new(Schema::new(vec![
        Field::new("x", DataType::Int64, false),
        Field::new("s", DataType::Utf8, false),
    ]));
    let batches: Vec<RecordBatch> = (0..n)
        .step_by(4096)
        .map(|start| {
            let rows = start..(start + 4096).min(n);
            let x = Int64Array::from_iter_values(rows.clone().map(|i| ((i as i64) * 7919) % 100_003));
            let s = StringArray::from_iter_values(rows.map(|i| format!("row-{}", i % 977)));
            RecordBatch::try_new(schema.clone(), vec![Arc::new(x), Arc::new(s)]).unwrap()
        })
        .collect();
    let db = Database::new();
    db.register_batches("big", schema, &batches).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    for sql in [
        "SELECT x, s FROM big ORDER BY x DESC LIMIT 5000 OFFSET 100",
        "SELECT s, x FROM big ORDER BY s, x LIMIT 70000 OFFSET 3",
    ] {
        let mut base = settings(2);
        base.max_bytes_ratio_before_external_sort = 0.0;
        base.max_server_memory_usage = 0;
        let (want, _) = db.sql_profiled(sql, Some(&base)).unwrap();
        for threads in [1, 2] {
            let mut s = base.clone();
            s.max_threads = threads;
            s.max_bytes_before_external_sort = 16 << 10;
            s.tmp_path = Some(tmp.path().to_path_buf());
            let (got, profile) = db.sql_profiled(sql, Some(&s)).unwrap();
            assert_eq!(one(&got), one(&want), "{sql} / {threads} threads");
            assert!(profile.spills > 16 * threads, "{sql}: {profile:?}");
            assert!(profile.spilled_runs <= 16 * threads, "{sql}: {profile:?}");
            assert_no_files(tmp.path());
        }
    }
}

fn assert_no_files(dir: &Path) {
    let left: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

#[test]
fn temporary_data_limit_and_bad_tmp_path_are_clean_errors() {
    let db = database();
    let tmp = tempfile::tempdir().unwrap();
    let mut s = settings(2);
    s.max_bytes_before_external_group_by = 32 << 10;
    s.tmp_path = Some(tmp.path().to_path_buf());
    s.max_temporary_data_on_disk_size = 10_000;
    let e = db.sql_profiled(QUERIES[0], Some(&s)).unwrap_err();
    assert!(matches!(e, Error::ResourcesExhausted(_)), "{e}");
    assert!(e.to_string().contains("max_temporary_data_on_disk_size = 10000"), "{e}");
    assert_no_files(tmp.path());
    s.max_temporary_data_on_disk_size = 0;
    s.tmp_path = Some(tmp.path().join("missing"));
    let e = db.sql_profiled(QUERIES[0], Some(&s)).unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e}");
    assert!(e.to_string().contains("missing"), "{e}");
    // Settings by SQL.
    db.sql(&format!("SET tmp_path = '{}'", tmp.path().display())).unwrap();
    db.sql("SET max_bytes_before_external_group_by = 32768").unwrap();
    let (_, profile) = db.sql_profiled(QUERIES[1], None).unwrap();
    assert!(profile.spills > 0);
    assert_no_files(tmp.path());
}

/// A query that would pass `max_server_memory_usage` spills (the default threshold is half
/// of the cap when the query has no limit of its own) and finishes; with spilling off it
/// fails naming the cap. Concurrent queries that together pass the cap fail cleanly or
/// finish with the right answer, and give every byte back.
#[test]
fn server_memory_cap_spills_or_fails_cleanly() {
    let db = database();
    let sql = QUERIES[0];
    // One worker: the peak does not depend on how threads interleave.
    let mut free = settings(1);
    free.max_bytes_ratio_before_external_group_by = 0.0;
    free.max_server_memory_usage = 0;
    db.sql("SET max_server_memory_usage = 0").unwrap();
    let (want, profile) = db.sql_profiled(sql, Some(&free)).unwrap();
    let need = profile.peak_memory_bytes;
    assert!(need > 1 << 20, "{profile:?}");
    // Below what the query needs in memory, above what it needs spilling (the answer's
    // 19,000 rows are materialised and sorted whatever the budget).
    let cap = need * 3 / 4;
    db.sql(&format!("SET max_server_memory_usage = {cap}")).unwrap();
    // A query's own value is ignored: the database's cap holds.
    let e = db.sql_profiled(sql, Some(&free)).unwrap_err();
    assert!(e.to_string().contains(&format!("max_server_memory_usage = {cap}")), "{e}");
    assert_eq!(db.server_memory().query_bytes(), 0);
    let spilling = settings(1);
    let (got, profile) = db.sql_profiled(sql, Some(&spilling)).unwrap();
    assert_eq!(format!("{got:?}"), format!("{want:?}"));
    assert!(profile.spills > 0, "{profile:?}");
    // Eight at once, spilling off, each under its own limit but together over the cap.
    let mut own = free.clone();
    own.max_threads = 2;
    own.max_memory_usage = need as u64 * 2;
    let db = &db;
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8).map(|_| scope.spawn(|| db.sql_profiled(sql, Some(&own)))).collect();
        for h in handles {
            match h.join().unwrap() {
                Ok((got, _)) => assert_eq!(format!("{got:?}"), format!("{want:?}")),
                Err(e) => assert!(matches!(e, Error::ResourcesExhausted(_)), "{e}"),
            }
        }
    });
    assert_eq!(db.server_memory().query_bytes(), 0);
}

/// The variable that makes this test binary the child of the kill test.
const CHILD: &str = "TESSERA_SPILL_KILL_CHILD";

/// A process killed while spilling leaves no temporary file (they have no name), and the
/// next database on the same `tmp_path` spills there as usual.
#[test]
fn killed_while_spilling_leaves_nothing_behind() {
    let db = database();
    let mut s = settings(2);
    s.max_bytes_before_external_group_by = 32 << 10;
    if let Some(dir) = std::env::var_os(CHILD) {
        s.tmp_path = Some(dir.into());
        let start = std::time::Instant::now();
        // Spill until killed (at most a minute, so an orphan cannot run forever).
        while start.elapsed().as_secs() < 60 {
            let (_, p) = db.sql_profiled(QUERIES[4], Some(&s)).unwrap();
            println!("spilled {}", p.spilled_bytes);
        }
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // Through `TESSERA_TEST_RUNNER` (qemu-aarch64, set by scripts/check-aarch64.sh) where the
    // binary cannot be exec'd natively, as the storage crash test does.
    let exe = std::env::current_exe().unwrap();
    let mut child = match std::env::var("TESSERA_TEST_RUNNER") {
        Ok(r) if !r.trim().is_empty() => {
            let mut parts = r.split_whitespace();
            let mut c = std::process::Command::new(parts.next().expect("non-empty runner"));
            c.args(parts).arg(exe);
            c
        }
        _ => std::process::Command::new(exe),
    };
    let mut child = child
        .args(["--exact", "killed_while_spilling_leaves_nothing_behind", "--nocapture", "--test-threads=1"])
        .env(CHILD, tmp.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    // Two queries done: the child is spilling its third.
    let mut spilled = 0;
    while spilled < 2 {
        let line = lines.next().expect("child ended early").unwrap();
        spilled += usize::from(line.starts_with("spilled "));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_no_files(tmp.path());
    s.tmp_path = Some(tmp.path().to_path_buf());
    let (_, p) = db.sql_profiled(QUERIES[4], Some(&s)).unwrap();
    assert!(p.spills > 0);
    assert_no_files(tmp.path());
}

