//! On-disk tables through the engine: SQL DDL/DML, restarts, granule skipping, merges.

use arrow::array::{Array, AsArray, Int64Array};
use arrow::datatypes::Int64Type;
use tessera_engine::Database;

fn count(db: &Database, sql: &str) -> i64 {
    let b = db.sql(sql).unwrap();
    b[0].column(0).as_primitive::<Int64Type>().value(0)
}

/// `rows` generated hits rows (seed `seed`) as batches of `per` rows.
fn generated_hits(rows: u64, seed: u64, per: usize) -> Vec<arrow::array::RecordBatch> {
    let opts = tessera_datasets::GenOptions::new(rows).with_seed(seed);
    (0..rows).step_by(per).map(|s| tessera_datasets::generate_batch(&opts, s, per)).collect()
}


/// A database in a temporary directory with `batches` of hits in table `hits` (ORDER BY
/// CounterID, granules of 1,024 rows), one insert (a part) per slice of `inserts`, and an
/// in-memory database with the same rows.
fn hits_on_disk_and_in_memory(
    batches: &[arrow::array::RecordBatch],
    inserts: &[std::ops::Range<usize>],
) -> (tempfile::TempDir, Database, Database) {
    let schema = tessera_datasets::hits::schema();
    let dir = tempfile::tempdir().unwrap();
    let disk = Database::open(dir.path()).unwrap();
    disk.create_table(
        "hits",
        schema.clone(),
        tessera_engine::TableOptions { order_by: vec!["CounterID".into()], granule_rows: 1024, ..Default::default() },
    )
    .unwrap();
    for r in inserts {
        disk.insert("hits", &batches[r.clone()]).unwrap();
    }
    let mem = Database::new();
    mem.register_batches("hits", schema, batches).unwrap();
    (dir, disk, mem)
}

#[test]
fn create_insert_query_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Database::open(dir.path()).unwrap();
        db.sql("CREATE TABLE t (k INT NOT NULL, d DATE NOT NULL, s TEXT, v BIGINT) ENGINE = MergeTree ORDER BY (k, d)")
            .unwrap();
        db.sql("INSERT INTO t VALUES (3, '2013-07-03', 'c', 30), (1, '2013-07-01', NULL, 10), (2, '2013-07-02', 'b', NULL)")
            .unwrap();
        db.sql("INSERT INTO t (k, d) VALUES (1, '2013-07-05')").unwrap();
        assert_eq!(count(&db, "SELECT COUNT(*) FROM t"), 4);
        assert_eq!(count(&db, "SELECT COUNT(*) FROM t WHERE k = 1"), 2);
        assert!(db.sql("INSERT INTO t VALUES (NULL, '2013-07-01', 'x', 1)").is_err());
        assert!(db.sql("INSERT INTO t VALUES ('nope', '2013-07-01', 'x', 1)").is_err());
        assert!(db.sql("CREATE TABLE t (a INT)").is_err());
        db.sql("CREATE TABLE IF NOT EXISTS t (a INT)").unwrap();
    }
    let db = Database::open(dir.path()).unwrap();
    assert_eq!(db.disk_table("t").unwrap().num_parts(), 2);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM t WHERE d >= '2013-07-02'"), 3);
    db.sql("OPTIMIZE TABLE t FINAL").unwrap();
    assert_eq!(db.disk_table("t").unwrap().num_parts(), 1);
    let b = db.sql("SELECT k, s, v FROM t ORDER BY k, d").unwrap();
    let k: Vec<i32> = b[0].column(0).as_primitive::<arrow::datatypes::Int32Type>().values().to_vec();
    assert_eq!(k, vec![1, 1, 2, 3]);
    assert_eq!(b[0].column(1).null_count(), 2);
    let v = b[0].column(2).as_any().downcast_ref::<Int64Array>().unwrap();
    assert_eq!(v.iter().collect::<Vec<_>>(), vec![Some(10), None, None, Some(30)]);
    drop(db);
    let db = Database::open(dir.path()).unwrap();
    assert_eq!(count(&db, "SELECT MAX(v) FROM t WHERE s = 'c'"), 30);
}

/// WHERE clauses of ClickBench Q20 and Q37-Q43 (Q40, Q41 and Q43 as their key conditions
/// only: the planner does not support their CASE / IN / DATE_TRUNC yet).
const SKIP_CASES: [(&str, &str); 8] = [
    ("Q20", "UserID = 435090932899640449"),
    ("Q37", "CounterID = 62 AND EventDate >= '2013-07-01' AND EventDate <= '2013-07-31' AND DontCountHits = 0 AND IsRefresh = 0 AND URL <> ''"),
    ("Q38", "CounterID = 62 AND EventDate >= '2013-07-01' AND EventDate <= '2013-07-31' AND DontCountHits = 0 AND IsRefresh = 0 AND Title <> ''"),
    ("Q39", "CounterID = 62 AND EventDate >= '2013-07-01' AND EventDate <= '2013-07-31' AND IsRefresh = 0 AND IsLink <> 0 AND IsDownload = 0"),
    ("Q40", "CounterID = 62 AND EventDate >= '2013-07-01' AND EventDate <= '2013-07-31' AND IsRefresh = 0"),
    ("Q41", "CounterID = 62 AND EventDate >= '2013-07-01' AND EventDate <= '2013-07-31' AND IsRefresh = 0 AND RefererHash = 3594120000172545465"),
    ("Q42", "CounterID = 62 AND EventDate >= '2013-07-01' AND EventDate <= '2013-07-31' AND IsRefresh = 0 AND DontCountHits = 0 AND URLHash = 2868770270353813622"),
    ("Q43", "CounterID = 62 AND EventDate >= '2013-07-14' AND EventDate <= '2013-07-15' AND IsRefresh = 0 AND DontCountHits = 0"),
];

#[test]
fn granule_skipping_on_generated_hits_reads_few_granules_and_same_answers() {
    let rows = 200_000u64;
    let batches = generated_hits(rows, 42, 50_000);
    let schema = tessera_datasets::hits::schema();
    let dir = tempfile::tempdir().unwrap();
    let disk = Database::open(dir.path()).unwrap();
    let key = ["CounterID", "EventDate", "UserID", "EventTime", "WatchID"];
    let t = disk
        .create_table(
            "hits",
            schema.clone(),
            tessera_engine::TableOptions {
                order_by: key.iter().map(|s| s.to_string()).collect(),
                granule_rows: 1024,
                ..Default::default()
            },
        )
        .unwrap();
    disk.insert("hits", &batches[..2]).unwrap();
    disk.insert("hits", &batches[2..]).unwrap();
    let mem = Database::new();
    mem.register_batches("hits", schema.clone(), &batches).unwrap();
    for (q, cond) in SKIP_CASES {
        let sql = format!("SELECT COUNT(*) FROM hits WHERE {cond}");
        t.take_last_prune();
        let on_disk = count(&disk, &sql);
        let (kept, total) = t.take_last_prune().expect("the WHERE clause reached the source");
        assert_eq!(on_disk, count(&mem, &sql), "{q}");
        assert_eq!(total, 196, "{q}: 2 parts of 100,000 rows in granules of 1,024");
        eprintln!("{q}: {kept}/{total} granules, {on_disk} rows match");
        if q == "Q20" {
            assert!(kept * 5 <= total, "Q20: bloom filters on UserID skip most granules: {kept} of {total}");
        } else {
            assert!(on_disk > 0, "{q}: the generator makes CounterID 62 rows in July 2013");
            assert!(kept * 10 <= total, "{q}: read {kept} of {total} granules");
        }
    }
    // No false negatives from the bloom filters (UserID, EventTime and WatchID have them):
    // values present in the data, sampled across both parts, count the same from disk and
    // from memory, and at least once.
    for col in ["UserID", "WatchID", "EventTime"] {
        let i = schema.index_of(col).unwrap();
        for pick in (0..rows as usize).step_by(9_973) {
            let (b, r) = (pick / 50_000, pick % 50_000);
            let v = arrow::util::display::array_value_to_string(batches[b].column(i), r).unwrap();
            let lit = if col == "EventTime" { format!("'{}'", v.replace('T', " ")) } else { v };
            let sql = format!("SELECT COUNT(*) FROM hits WHERE {col} = {lit}");
            let on_disk = count(&disk, &sql);
            assert!(on_disk > 0, "{sql}: the value is in the data");
            assert_eq!(on_disk, count(&mem, &sql), "{sql}");
        }
    }
    // Whole queries that Tessera runs give the same number of rows from disk and memory.
    for q in [20, 37, 38, 39, 42] {
        let sql = tessera_datasets::hits::query(q).unwrap();
        let rows = |db: &Database| db.sql(sql).unwrap().iter().map(|b| b.num_rows()).sum::<usize>();
        assert_eq!(rows(&disk), rows(&mem), "Q{q}");
    }
}

/// Late materialization (`LIMIT` scans read the WHERE/ORDER BY columns, then the other
/// columns of the answer's rows only) gives the same answers as reading every column, from
/// disk (granule reads) and from memory, at 1 and 3 threads; disk and memory agree where the
/// ORDER BY keys are unique (elsewhere ties follow each table's own row order).
#[test]
fn late_materialization_matches_reading_every_column() {
    let rows = 60_000u64;
    let batches = generated_hits(rows, 5, 20_000);
    let schema = tessera_datasets::hits::schema();
    let dir = tempfile::tempdir().unwrap();
    let disk = Database::open(dir.path()).unwrap();
    disk.create_table(
        "hits",
        schema.clone(),
        tessera_engine::TableOptions {
            order_by: vec!["CounterID".into(), "EventDate".into()],
            granule_rows: 512,
            ..Default::default()
        },
    )
    .unwrap();
    disk.insert("hits", &batches[..1]).unwrap();
    disk.insert("hits", &batches[1..]).unwrap();
    let mem = Database::new();
    mem.register_batches("hits", schema, &batches).unwrap();
    let text = |db: &Database, sql: &str| {
        let b = db.sql(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        let b = arrow::compute::concat_batches(&b[0].schema(), &b).unwrap();
        let opts = arrow::util::display::FormatOptions::default().with_null("NULL");
        let cols: Vec<_> =
            b.columns().iter().map(|c| arrow::util::display::ArrayFormatter::try_new(c, &opts).unwrap()).collect();
        let mut out = format!("{:?}\n", b.schema().fields().iter().map(|f| f.name()).collect::<Vec<_>>());
        for r in 0..b.num_rows() {
            out += &cols.iter().map(|c| c.value(r).to_string()).collect::<Vec<_>>().join("|");
            out.push('\n');
        }
        out
    };
    let queries = [
        // ClickBench Q24-Q27 shapes.
        "SELECT * FROM hits WHERE URL LIKE '%google%' ORDER BY EventTime LIMIT 10",
        "SELECT SearchPhrase FROM hits WHERE SearchPhrase <> '' ORDER BY EventTime LIMIT 10",
        "SELECT SearchPhrase FROM hits WHERE SearchPhrase <> '' ORDER BY SearchPhrase LIMIT 10",
        "SELECT SearchPhrase, URL FROM hits WHERE SearchPhrase <> '' ORDER BY EventTime, SearchPhrase LIMIT 10",
        "SELECT WatchID, Title, toMinute(EventTime) AS m FROM hits ORDER BY WatchID DESC LIMIT 7 OFFSET 5",
        "SELECT * FROM hits LIMIT 3",
        "SELECT URL, CounterID FROM hits WHERE CounterID = 62 LIMIT 4 OFFSET 2",
        "SELECT Title FROM hits WHERE URL = 'no such url' ORDER BY EventTime LIMIT 5",
        // An OFFSET past the late path's row cap stays in phase 1; an OFFSET past the end.
        "SELECT * FROM hits ORDER BY EventTime, WatchID LIMIT 65536 OFFSET 100",
        "SELECT URL, Title FROM hits ORDER BY EventTime LIMIT 5 OFFSET 70000",
        "SELECT URL, EventTime FROM hits ORDER BY EventTime DESC LIMIT 3 OFFSET 59990",
    ];
    for sql in queries {
        for db in [&disk, &mem] {
            for threads in [1, 3] {
                let lazy = text(db, &format!("{sql} SETTINGS max_threads = {threads}"));
                let eager = text(
                    db,
                    &format!("{sql} SETTINGS max_threads = {threads}, query_plan_optimize_lazy_materialization = 0"),
                );
                assert_eq!(lazy, eager, "{sql} ({threads} threads)");
            }
        }
    }
    // WatchID is unique: the same rows from disk and memory.
    let q = "SELECT WatchID, URL, EventTime FROM hits WHERE URL <> '' ORDER BY WatchID LIMIT 20";
    assert_eq!(text(&disk, q), text(&mem, q));
}

/// Top-N dynamic filtering (`use_top_k_dynamic_filtering`) returns exactly the unfiltered
/// scan's rows, from disk (morsels visited and skipped by their min/max index) and from
/// memory, with 1 and 3 threads: ascending and descending integer, date, timestamp and
/// string keys, ties (broken by row position), several keys, OFFSET, a LIKE, a general
/// expression and a WHERE nothing passes; from disk, an ORDER BY on the sort key skips
/// morsels without reading them.
#[test]
fn top_k_dynamic_filtering_matches_the_unfiltered_scan() {
    let rows = 60_000u64;
    let batches = generated_hits(rows, 11, 20_000);
    let schema = tessera_datasets::hits::schema();
    let dir = tempfile::tempdir().unwrap();
    let disk = Database::open(dir.path()).unwrap();
    disk.create_table(
        "hits",
        schema.clone(),
        tessera_engine::TableOptions {
            order_by: vec!["CounterID".into(), "EventDate".into()],
            granule_rows: 512,
            ..Default::default()
        },
    )
    .unwrap();
    disk.insert("hits", &batches[..1]).unwrap();
    disk.insert("hits", &batches[1..]).unwrap();
    let mem = Database::new();
    mem.register_batches("hits", schema, &batches).unwrap();
    let text = |db: &Database, sql: &str| {
        let b = db.sql(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        let b = arrow::compute::concat_batches(&b[0].schema(), &b).unwrap();
        let opts = arrow::util::display::FormatOptions::default().with_null("NULL");
        let cols: Vec<_> =
            b.columns().iter().map(|c| arrow::util::display::ArrayFormatter::try_new(c, &opts).unwrap()).collect();
        (0..b.num_rows())
            .map(|r| cols.iter().map(|c| c.value(r).to_string()).collect::<Vec<_>>().join("|") + "\n")
            .collect::<String>()
    };
    let queries = [
        "SELECT * FROM hits WHERE URL LIKE '%google%' ORDER BY EventTime LIMIT 10",
        "SELECT SearchPhrase, EventTime FROM hits WHERE SearchPhrase <> '' ORDER BY EventTime LIMIT 10",
        "SELECT SearchPhrase FROM hits WHERE SearchPhrase <> '' ORDER BY SearchPhrase LIMIT 10",
        "SELECT SearchPhrase, URL FROM hits WHERE SearchPhrase <> '' ORDER BY EventTime, SearchPhrase LIMIT 10",
        "SELECT WatchID, EventDate FROM hits ORDER BY EventDate DESC LIMIT 25 OFFSET 40",
        "SELECT CounterID, UserID FROM hits ORDER BY CounterID LIMIT 30",
        "SELECT CounterID, UserID FROM hits ORDER BY CounterID DESC, UserID LIMIT 12 OFFSET 3",
        "SELECT URL, RegionID FROM hits WHERE RegionID + 1 > 100 ORDER BY URL DESC LIMIT 9",
        "SELECT Title FROM hits WHERE Title <> '' ORDER BY Title LIMIT 1000",
        "SELECT Title FROM hits WHERE URL = 'no such url' ORDER BY EventTime LIMIT 5",
        "SELECT ResolutionWidth, WatchID FROM hits ORDER BY ResolutionWidth LIMIT 50",
    ];
    for sql in queries {
        for db in [&disk, &mem] {
            for threads in [1, 3] {
                let on = text(db, &format!("{sql} SETTINGS max_threads = {threads}"));
                let off =
                    text(db, &format!("{sql} SETTINGS max_threads = {threads}, use_top_k_dynamic_filtering = 0"));
                assert_eq!(on, off, "{sql} ({threads} threads)");
                assert!(!on.is_empty() || sql.contains("no such"), "{sql}: no rows");
            }
        }
    }
    let sql = "SELECT CounterID, WatchID FROM hits ORDER BY CounterID LIMIT 10 SETTINGS max_threads = 1";
    let (_, on) = disk.sql_profiled(sql, None).unwrap();
    let (_, off) = disk.sql_profiled(&sql.replace("max_threads = 1", "max_threads = 1, use_top_k_dynamic_filtering = 0"), None).unwrap();
    assert_eq!(off.morsels_skipped, 0);
    assert!(on.morsels_skipped > 0, "{on:?}");
}

/// `COUNT(*)` without WHERE is answered from part row counts: no column is read.
#[test]
fn count_star_from_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path()).unwrap();
    db.sql("CREATE TABLE t (k INT NOT NULL, s TEXT) ENGINE = MergeTree ORDER BY (k)").unwrap();
    db.sql("INSERT INTO t VALUES (1, 'a'), (2, NULL), (3, 'c')").unwrap();
    db.sql("INSERT INTO t VALUES (4, 'd')").unwrap();
    let (b, profile) = db.sql_profiled("SELECT COUNT(*) AS n, count() FROM t", None).unwrap();
    assert_eq!(profile.layout, Some("metadata"));
    assert_eq!(b[0].column(0).as_primitive::<Int64Type>().values().to_vec(), vec![4]);
    assert_eq!(b[0].column(1).as_primitive::<Int64Type>().values().to_vec(), vec![4]);
    assert_eq!(db.sql("SELECT COUNT(*) FROM t LIMIT 0").unwrap().iter().map(|b| b.num_rows()).sum::<usize>(), 0);
    // With a WHERE clause or COUNT(col) the rows are read.
    let (_, profile) = db.sql_profiled("SELECT COUNT(s) FROM t", None).unwrap();
    assert_ne!(profile.layout, Some("metadata"));
    assert_eq!(count(&db, "SELECT COUNT(s) FROM t"), 3);
}

/// A string column of more than 2 GiB in one part (past arrow's 32-bit offsets) inserts,
/// queries and merges: 2,200 rows of 1 MiB strings in two input chunks that share one
/// 1.1 GiB buffer (so the test holds 1.1 GiB, not 2.2), sorted by a key that interleaves
/// the chunks, then a second part and OPTIMIZE (2,400 rows, 2.4 GiB of strings in one
/// part). The strings compress to almost nothing, so the disk holds a few MB.
#[test]
fn string_column_past_2_gib_inserts_queries_and_merges() {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, RecordBatch, StringBuilder};
    use arrow::datatypes::{DataType, Field, Schema};
    use tessera_engine::TableOptions;

    const N: usize = 1100;
    const LEN: usize = 1 << 20;
    // Row i: its number, then 'x' up to 1 MiB; every 100th row ends in 'y'.
    let value = |i: usize| {
        let mut s = format!("{i:06}");
        s.push_str(&"x".repeat(LEN - 7));
        s.push(if i % 100 == 0 { 'y' } else { 'x' });
        s
    };
    let mut b = StringBuilder::with_capacity(N, N * LEN);
    for i in 0..N {
        b.append_value(value(i));
    }
    let base: ArrayRef = Arc::new(b.finish());
    let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false), Field::new("s", DataType::Utf8, false)]));
    let batch = |ids: Vec<i64>| {
        let s = base.slice(0, ids.len());
        RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(ids)), s]).unwrap()
    };
    // Chunk 0 row i has id 2199 - i, chunk 1 row i has id 1099 - i: value(i) either way.
    let chunk0 = batch((0..N as i64).map(|i| 2 * N as i64 - 1 - i).collect());
    let chunk1 = batch((0..N as i64).map(|i| N as i64 - 1 - i).collect());
    let value_of_id = |id: usize| value(if id >= 2 * N { id - 2 * N } else { (N - 1) - (id % N) });
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path()).unwrap();
    let opts = TableOptions { order_by: vec!["id".into()], granule_rows: 16, ..TableOptions::default() };
    db.create_table("t", schema.clone(), opts).unwrap();
    db.insert("t", &[chunk0, chunk1]).unwrap();
    let check = |db: &Database, rows: usize, ids: &[usize], list: bool| {
        assert_eq!(count(db, "SELECT COUNT(*) FROM t"), rows as i64);
        let want: Vec<i64> = (0..rows).filter(|&id| value_of_id(id).ends_with('y')).map(|id| id as i64).collect();
        assert_eq!(count(db, "SELECT COUNT(*) FROM t WHERE s LIKE '%y'"), want.len() as i64);
        if list {
            let b = db.sql("SELECT id FROM t WHERE s LIKE '%xy' ORDER BY id").unwrap();
            let got: Vec<i64> = b.iter().flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec()).collect();
            assert_eq!(got, want);
        }
        for &id in ids {
            let b = db.sql(&format!("SELECT s FROM t WHERE id = {id}")).unwrap();
            let s: Vec<&str> = b.iter().flat_map(|b| b.column(0).as_string::<i32>().iter().flatten().collect::<Vec<_>>()).collect();
            assert_eq!(s.len(), 1, "id {id}");
            assert!(s[0] == value_of_id(id), "id {id}: bytes differ");
        }
    };
    check(&db, 2 * N, &[0, 1100, 2199], false);
    // A second part of 200 rows, then one merged part of 2.4 GiB of strings.
    db.insert("t", &[batch((2 * N as i64..2 * N as i64 + 200).collect())]).unwrap();
    assert_eq!(db.disk_table("t").unwrap().num_parts(), 2);
    assert!(db.optimize("t").unwrap());
    assert_eq!(db.disk_table("t").unwrap().num_parts(), 1);
    check(&db, 2 * N + 200, &[0, 1099, 1500, 2199, 2200, 2399], true);
}

/// Queries over on-disk tables read a morsel at a time. PREWHERE reads the WHERE columns
/// first and the others only for morsels where a row passed; the arrays a query holds
/// count in `max_memory_usage` (a limit below one morsel fails cleanly while reading, and
/// the database answers the next query); peak memory stays far below the columns' size;
/// the decoded-block cache never holds more than its budget.
#[test]
fn streaming_reads_prewhere_memory_limit_and_cache_budget() {
    let rows = 100_000u64;
    let batches = generated_hits(rows, 11, 25_000);
    let (_dir, disk, mem) = hits_on_disk_and_in_memory(&batches, &[0..2, 2..batches.len()]);
    let morsels = disk.table("hits").unwrap().chunk_lens().len();
    assert_eq!(morsels, 2 * 50_000usize.div_ceil(8 * 1024));

    // PREWHERE: no row passes, so no morsel reads ResolutionWidth or Title.
    let none = "SELECT COUNT(*), SUM(ResolutionWidth) FROM hits WHERE URL LIKE '%no-such-url%'";
    let (b, profile) = disk.sql_profiled(none, None).unwrap();
    assert_eq!(profile.morsels_skipped, morsels);
    assert_eq!(b[0].column(0).as_primitive::<Int64Type>().value(0), 0);
    assert!(b[0].column(1).is_null(0));
    let (b, profile) = disk.sql_profiled("SELECT Title FROM hits WHERE URL LIKE '%no-such-url%'", None).unwrap();
    assert_eq!((b.iter().map(|b| b.num_rows()).sum::<usize>(), profile.morsels_skipped), (0, morsels));
    // Some rows pass: same answers as in memory.
    for sql in [
        "SELECT COUNT(*), SUM(ResolutionWidth) FROM hits WHERE URL LIKE '%google%'",
        "SELECT SearchPhrase, COUNT(*) AS c FROM hits WHERE SearchPhrase <> '' GROUP BY SearchPhrase ORDER BY c DESC, SearchPhrase LIMIT 10",
        "SELECT URL, COUNT(*) AS c FROM hits GROUP BY URL ORDER BY c DESC, URL LIMIT 10",
        "SELECT WatchID, ClientIP, COUNT(*) AS c, SUM(IsRefresh) FROM hits WHERE SearchPhrase <> '' GROUP BY WatchID, ClientIP ORDER BY c DESC, WatchID LIMIT 10",
    ] {
        let text = |db: &Database| format!("{:?}", db.sql(sql).unwrap());
        assert_eq!(text(&disk), text(&mem), "{sql}");
    }

    // Memory: the URL column is read morsel by morsel, never whole.
    let url_bytes: usize = mem.table("hits").unwrap().columns(&[13]).unwrap()[0].iter().map(|a| a.get_array_memory_size()).sum();
    assert_eq!(mem.table("hits").unwrap().schema().field(13).name(), "URL");
    let mut s = tessera_engine::Settings::default();
    s.max_threads = 2;
    let (_, profile) = disk.sql_profiled("SELECT COUNT(*) FROM hits WHERE URL LIKE '%google%'", Some(&s)).unwrap();
    assert!(profile.peak_memory_bytes > 0, "the arrays read are accounted");
    assert!(profile.peak_memory_bytes * 3 < url_bytes, "peak {} bytes vs URL column {url_bytes}", profile.peak_memory_bytes);
    s.max_memory_usage = 10_000;
    let err = disk.sql_with("SELECT COUNT(*) FROM hits WHERE URL LIKE '%google%'", &s).unwrap_err();
    assert!(matches!(err, tessera_engine::Error::ResourcesExhausted(_)), "{err}");
    assert!(err.to_string().contains("reading columns"), "{err}");
    assert_eq!(count(&disk, "SELECT COUNT(*) FROM hits WHERE URL LIKE '%google%'"), count(&mem, "SELECT COUNT(*) FROM hits WHERE URL LIKE '%google%'"));

    // The decoded-block cache keeps to its budget while queries fill it.
    disk.set_block_cache_size(1 << 20);
    for sql in ["SELECT COUNT(*) FROM hits WHERE URL LIKE '%google%'", "SELECT SUM(ResolutionWidth), COUNT(*) FROM hits WHERE Title <> ''"] {
        for _ in 0..2 {
            let want = format!("{:?}", mem.sql(sql).unwrap());
            assert_eq!(format!("{:?}", disk.sql(sql).unwrap()), want);
            let held = disk.block_cache_bytes();
            assert!(held > 0 && held <= 1 << 20, "{sql}: cache holds {held} bytes");
        }
    }

    // A scan of a column larger than the cache puts less than half the budget of it there
    // (plus the block that crosses the half), instead of cycling all of it through: the
    // cache is 3/4 of URL's decoded size. A second scan adds at most as much again, of the
    // blocks that were not cached (threads take the morsels in a different order).
    let budget = (url_bytes as u64) * 3 / 4;
    let biggest_morsel = disk
        .table("hits")
        .unwrap()
        .columns(&[13])
        .unwrap()[0]
        .iter()
        .map(|a| a.get_array_memory_size() as u64)
        .max()
        .unwrap();
    disk.set_block_cache_size(budget);
    let sql = "SELECT COUNT(*) FROM hits WHERE URL LIKE '%google%'";
    assert_eq!(count(&disk, sql), count(&mem, sql));
    let held = disk.block_cache_bytes();
    assert!(held > 0, "the first blocks of URL are cached");
    assert!(held < budget / 2 + biggest_morsel, "cache holds {held} of {budget} bytes: URL's scan is not admitted whole");
    assert_eq!(count(&disk, sql), count(&mem, sql));
    assert!(disk.block_cache_bytes() <= budget);
}

/// A string GROUP BY over streamed morsels keeps the morsels its scattered rows borrow only
/// up to a budget (an eighth of `max_memory_usage` over the threads), then aggregates them into its
/// per-partition tables with the keys copied to its arena: same answers as in memory, for
/// the string and fixed+string layouts, with 1 and 3 threads; Q34's shape with 1 thread
/// under a limit of 3/4 of what it holds without flushing.
#[test]
fn string_group_by_flushes_scattered_rows_under_a_memory_limit() {
    let rows = 200_000u64;
    let batches = generated_hits(rows, 5, 25_000);
    let (_dir, disk, mem) = hits_on_disk_and_in_memory(&batches, &[0..batches.len()]);
    disk.set_block_cache_size(0);
    for (sql, shrinks) in [
        ("SELECT URL, COUNT(*) AS c FROM hits GROUP BY URL ORDER BY c DESC, URL LIMIT 10", true),
        ("SELECT URL, MIN(EventDate), SUM(IsRefresh), COUNT(*) FROM hits WHERE URL <> '' GROUP BY URL ORDER BY URL DESC LIMIT 7", false),
        ("SELECT CounterID, URL, COUNT(*) AS c FROM hits GROUP BY CounterID, URL ORDER BY c DESC, CounterID, URL LIMIT 10", false),
    ] {
        let want = format!("{:?}", mem.sql(sql).unwrap());
        for threads in [1, 3] {
            let mut s = tessera_engine::Settings::default();
            s.max_threads = threads;
            s.group_by_two_level_threshold = 64;
            // Without a limit the budget (256 MiB) is never reached: no flush.
            let (got, unflushed) = disk.sql_profiled(sql, Some(&s)).unwrap();
            assert_eq!(format!("{got:?}"), want, "{sql}, {threads} threads, no limit");
            assert_eq!(unflushed.partial_flushes, 0);
            // Q34's shape with one worker: three quarters of that (the URL column alone
            // takes ~20 MB). Elsewhere the arena copies of the groups' keys (most rows are a
            // new group at this size, and each worker holds most groups) take about what the
            // borrowed morsels did, and the limit only forces flushes.
            let limit = if threads == 1 && shrinks { unflushed.peak_memory_bytes * 3 / 4 } else { unflushed.peak_memory_bytes * 2 };
            s.max_memory_usage = limit as u64;
            let (got, profile) = disk.sql_profiled(sql, Some(&s)).unwrap_or_else(|e| panic!("{sql}, {threads} threads: {e}"));
            assert_eq!(format!("{got:?}"), want, "{sql}, {threads} threads");
            assert!(profile.partial_flushes > 0, "{sql}, {threads} threads: no flush");
            assert!(profile.peak_memory_bytes <= limit);
        }
    }
}

/// A string GROUP BY whose rows hardly repeat (Q19's shape: most rows a group of their
/// own) over streamed morsels: once the morsels its scattered rows borrow pass their budget
/// (an eighth of `max_memory_usage`, shared by the threads), a worker whose rest of the
/// input fits three quarters of its external GROUP BY share (by default half of
/// `max_memory_usage`, shared by the threads) copies the rows' keys instead of flushing
/// them (URLs: after a flush that did not halve the rows; the choice itself is unit-tested
/// in `aggregate`), and they stay raw until the final phase. Same answers as in memory
/// under a range of limits (some flush, some copy, some copy and then spill or flush), with
/// 1 and 3 threads, with and without a WHERE, within the limit.
#[test]
fn string_group_by_copies_keys_instead_of_flushing_rows_that_do_not_repeat() {
    let batches = generated_hits(200_000, 11, 25_000);
    let (_dir, disk, mem) = hits_on_disk_and_in_memory(&batches, &[0..3, 3..batches.len()]);
    disk.set_block_cache_size(0);
    for sql in [
        "SELECT WatchID, URL, COUNT(*) AS c FROM hits GROUP BY WatchID, URL ORDER BY c DESC, WatchID, URL LIMIT 10",
        "SELECT UserID, URL, MIN(EventDate), SUM(IsRefresh), COUNT(*) FROM hits WHERE SearchPhrase = '' GROUP BY UserID, URL ORDER BY UserID DESC, URL LIMIT 7",
    ] {
        let want = format!("{:?}", mem.sql(sql).unwrap());
        let mut s = tessera_engine::Settings::default();
        s.group_by_two_level_threshold = 64;
        s.max_threads = 1;
        let peak = disk.sql_profiled(sql, Some(&s)).unwrap().1.peak_memory_bytes;
        let (mut copied, mut flushed, mut copied_then_more) = (0, 0, 0);
        for threads in [1, 3] {
            s.max_threads = threads;
            for tenths in [15, 20, 25, 30, 40, 50, 60] {
                s.max_memory_usage = (peak * tenths / 10) as u64;
                let (got, p) = disk.sql_profiled(sql, Some(&s)).unwrap_or_else(|e| panic!("{sql}, {threads} threads: {e}"));
                assert_eq!(format!("{got:?}"), want, "{sql}, {threads} threads, limit {}", s.max_memory_usage);
                assert!(p.peak_memory_bytes as u64 <= s.max_memory_usage);
                copied += p.scatter_key_copies;
                flushed += p.partial_flushes;
                if p.scatter_key_copies > 0 && (p.spills > 0 || p.partial_flushes > 0) {
                    copied_then_more += 1;
                }
            }
        }
        assert!(copied > 0 && flushed > 0 && copied_then_more > 0, "{sql}: {copied} copies, {flushed} flushes, {copied_then_more}");
    }
}

/// External GROUP BY from disk: string keys borrow streamed morsels until a flush or a
/// spill, and spilled runs hold scattered rows and tables; answers equal the in-memory path.
#[test]
fn external_group_by_from_disk_equals_in_memory() {
    let batches = generated_hits(100_000, 9, 25_000);
    let (_dir, disk, mem) = hits_on_disk_and_in_memory(&batches, &[0..2, 2..batches.len()]);
    disk.set_block_cache_size(0);
    let tmp = tempfile::tempdir().unwrap();
    for sql in [
        "SELECT URL, COUNT(*) AS c FROM hits GROUP BY URL ORDER BY c DESC, URL LIMIT 10",
        "SELECT UserID, SearchPhrase, COUNT(*) AS c FROM hits GROUP BY UserID, SearchPhrase ORDER BY c DESC, UserID, SearchPhrase LIMIT 10",
        "SELECT WatchID, ClientIP, COUNT(*) AS c, SUM(IsRefresh), AVG(ResolutionWidth) FROM hits GROUP BY WatchID, ClientIP ORDER BY c DESC, WatchID LIMIT 10",
        "SELECT RegionID, MIN(URL), MAX(Title), COUNT(DISTINCT UserID) FROM hits GROUP BY RegionID ORDER BY RegionID",
    ] {
        let want = format!("{:?}", mem.sql(sql).unwrap());
        for threads in [1, 3] {
            let mut s = tessera_engine::Settings::default();
            s.max_threads = threads;
            s.group_by_two_level_threshold = 64;
            s.max_bytes_before_external_group_by = 256 << 10;
            s.tmp_path = Some(tmp.path().to_path_buf());
            let (got, profile) = disk.sql_profiled(sql, Some(&s)).unwrap_or_else(|e| panic!("{sql}, {threads} threads: {e}"));
            assert_eq!(format!("{got:?}"), want, "{sql}, {threads} threads");
            assert!(profile.spills > 0, "{sql}, {threads} threads: no spill");
            assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
        }
    }
}

/// `MIN`/`MAX` without WHERE come from the parts' min/max indexes (with `COUNT(*)` from
/// row counts): the same answers as reading the rows, NULLs skipped, an all-NULL column
/// gives NULL; floats (whose NaN/-0.0 order the index does not follow) read the rows.
#[test]
fn min_max_from_the_min_max_index() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path()).unwrap();
    db.sql("CREATE TABLE t (k INT NOT NULL, v BIGINT, s TEXT, n INT, f DOUBLE) ENGINE = MergeTree ORDER BY (k)").unwrap();
    db.sql("INSERT INTO t VALUES (5, -7, 'pear', NULL, 1.5), (2, NULL, 'apple', NULL, -0.0)").unwrap();
    db.sql("INSERT INTO t VALUES (9, 40, NULL, NULL, 3.0), (-3, 12, 'zebra', NULL, 2.0)").unwrap();
    let sql = "SELECT MIN(k), MAX(k), COUNT(*), MIN(v), MAX(v), MIN(n), MAX(n) FROM t";
    let (b, profile) = db.sql_profiled(sql, None).unwrap();
    assert_eq!(profile.layout, Some("metadata"));
    let b = &b[0];
    let int = |c: usize| b.column(c).as_primitive::<arrow::datatypes::Int32Type>().value(0);
    let big = |c: usize| b.column(c).as_primitive::<Int64Type>().value(0);
    assert_eq!((int(0), int(1), big(2), big(3), big(4)), (-3, 9, 4, -7, 40));
    assert!(b.column(5).is_null(0) && b.column(6).is_null(0));
    // The same through the rows (a WHERE clause that keeps every row).
    let via_rows = db.sql_profiled(&format!("{sql} WHERE k > -100"), None).unwrap();
    assert_ne!(via_rows.1.layout, Some("metadata"));
    assert_eq!(format!("{:?}", via_rows.0[0].columns()), format!("{:?}", b.columns()));
    let (_, profile) = db.sql_profiled("SELECT MIN(f), MAX(f) FROM t", None).unwrap();
    assert_ne!(profile.layout, Some("metadata"));
    // ClickBench Q7's shape on generated hits, from two parts.
    let rows = 30_000u64;
    let batches = generated_hits(rows, 3, 10_000);
    let schema = tessera_datasets::hits::schema();
    db.create_table("hits", schema.clone(), tessera_engine::TableOptions { granule_rows: 1000, ..Default::default() }).unwrap();
    db.insert("hits", &batches[..1]).unwrap();
    db.insert("hits", &batches[1..]).unwrap();
    let mem = Database::new();
    mem.register_batches("hits", schema, &batches).unwrap();
    let q = "SELECT MIN(EventDate), MAX(EventDate), MIN(EventTime), MAX(UserID), MIN(CounterID) FROM hits";
    let (b, profile) = db.sql_profiled(q, None).unwrap();
    assert_eq!(profile.layout, Some("metadata"));
    assert_eq!(format!("{b:?}"), format!("{:?}", mem.sql(q).unwrap()));
}

/// Rows of a query's answer as text lines, NULL spelled out.
fn answer_text(db: &Database, sql: &str) -> String {
    let b = db.sql(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let b = arrow::compute::concat_batches(&b[0].schema(), &b).unwrap();
    let opts = arrow::util::display::FormatOptions::default().with_null("NULL");
    let cols: Vec<_> = b.columns().iter().map(|c| arrow::util::display::ArrayFormatter::try_new(c, &opts).unwrap()).collect();
    (0..b.num_rows()).map(|r| cols.iter().map(|c| c.value(r).to_string()).collect::<Vec<_>>().join("|") + "\n").collect()
}

/// The query condition cache (`use_query_condition_cache`) changes no answer. Each query
/// runs three times with it (1 and 3 threads, so later runs read what earlier ones
/// recorded) and must give the answer of a run without it: single conjuncts (LIKE, NOT
/// LIKE, emptiness, comparisons, an OR), whole WHEREs of several conjuncts, a WHERE with a
/// general expression, aggregations and top-N scans (ascending, descending, OFFSET, ties on
/// the sort key), over NULLs too; again after an insert (a part whose rows enter the top-N
/// answers) and after a merge. A repeated selective WHERE leaves rows out by the cache,
/// and none when the setting is off.
#[test]
fn query_condition_cache_changes_no_answer() {
    let batches = generated_hits(60_000, 11, 20_000);
    let (_dir, disk, _mem) = hits_on_disk_and_in_memory(&batches, &[0..1, 1..3]);
    let queries = [
        "SELECT COUNT(*) FROM hits WHERE URL LIKE '%google%'",
        "SELECT COUNT(*) FROM hits WHERE URL NOT LIKE '%google%'",
        "SELECT SearchPhrase, MIN(URL), COUNT(*) AS c FROM hits WHERE RegionID = 229 AND SearchPhrase <> '' \
         GROUP BY SearchPhrase ORDER BY c DESC, SearchPhrase LIMIT 10",
        "SELECT COUNT(*), MIN(Title) FROM hits WHERE Title LIKE '%Google%' AND URL NOT LIKE '%.google.%' AND SearchPhrase <> ''",
        "SELECT * FROM hits WHERE URL LIKE '%google%' ORDER BY EventTime LIMIT 10",
        "SELECT SearchPhrase, EventTime FROM hits WHERE SearchPhrase <> '' ORDER BY EventTime LIMIT 10",
        "SELECT SearchPhrase FROM hits WHERE SearchPhrase <> '' ORDER BY SearchPhrase DESC LIMIT 10 OFFSET 5",
        "SELECT WatchID, EventTime FROM hits WHERE RegionID = 229 OR AdvEngineID <> 0 ORDER BY EventTime DESC LIMIT 7 OFFSET 2",
        "SELECT ResolutionWidth, WatchID FROM hits WHERE ResolutionWidth <> 0 ORDER BY ResolutionWidth LIMIT 50",
        "SELECT CounterID, COUNT(*) FROM hits WHERE IsRefresh = 0 AND URL LIKE '%google%' GROUP BY CounterID ORDER BY CounterID",
        "SELECT COUNT(*), SUM(RegionID) FROM hits WHERE URL LIKE '%google%' AND RegionID + 1 > 100",
        "SELECT WatchID FROM hits WHERE URL = 'no such url' ORDER BY EventTime LIMIT 5",
    ];
    let check = |stage: &str| {
        for sql in queries {
            let off = answer_text(&disk, &format!("{sql} SETTINGS use_query_condition_cache = 0"));
            assert!(!off.is_empty() || sql.contains("no such"), "{sql}: no rows");
            for threads in [1, 3, 1] {
                let on = answer_text(&disk, &format!("{sql} SETTINGS max_threads = {threads}"));
                assert_eq!(on, off, "{stage}: {sql} ({threads} threads)");
            }
        }
    };
    check("two parts");
    // A top-N scan's records (WHERE and bound) must not pass for the WHERE's own: a count
    // with the same WHERE after the top-N ran counts every row. End to end here (whether a
    // worker starts before a bound depends on the scheduling); `prewhere.rs`'s
    // `a_top_n_record_is_not_taken_for_the_where` pins that case.
    let filter = "WHERE RegionID <> 229 AND SearchPhrase <> ''";
    let off = answer_text(&disk, &format!("SELECT COUNT(*), SUM(RegionID) FROM hits {filter} SETTINGS use_query_condition_cache = 0"));
    for threads in [1, 2, 3, 8] {
        answer_text(&disk, &format!("SELECT WatchID FROM hits {filter} ORDER BY CounterID DESC LIMIT 10 SETTINGS max_threads = {threads}"));
    }
    for threads in [1, 3] {
        let on = answer_text(&disk, &format!("SELECT COUNT(*), SUM(RegionID) FROM hits {filter} SETTINGS max_threads = {threads}"));
        assert_eq!(on, off, "count after a top-N scan with the same WHERE ({threads} threads)");
    }
    let sql = "SELECT COUNT(*) FROM hits WHERE URL LIKE '%google%'";
    let (_, on) = disk.sql_profiled(sql, None).unwrap();
    let (_, off) = disk.sql_profiled(&format!("{sql} SETTINGS use_query_condition_cache = 0"), None).unwrap();
    assert!(on.condition_cache_rows_skipped > 0, "{on:?}");
    assert_eq!(off.condition_cache_rows_skipped, 0);
    // A third part, from another seed: new rows for every answer, the top-N ones included.
    disk.insert("hits", &generated_hits(20_000, 12, 20_000)).unwrap();
    check("three parts");
    disk.sql("OPTIMIZE TABLE hits FINAL").unwrap();
    check("merged");

    // NULLs: a row whose condition is UNKNOWN is not TRUE, and NOT of it is not TRUE either.
    let schema = std::sync::Arc::new(arrow::datatypes::Schema::new(vec![
        arrow::datatypes::Field::new("k", arrow::datatypes::DataType::Int64, false),
        arrow::datatypes::Field::new("s", arrow::datatypes::DataType::Utf8, true),
        arrow::datatypes::Field::new("v", arrow::datatypes::DataType::Int64, true),
    ]));
    disk.create_table("t", schema.clone(), tessera_engine::TableOptions { order_by: vec!["k".into()], granule_rows: 4, ..Default::default() })
        .unwrap();
    let k = Int64Array::from_iter_values(0..200);
    let s = arrow::array::StringArray::from_iter((0..200).map(|i| match i % 9 {
        0 => None,
        1 if i > 100 => Some("abc".to_string()),
        _ => Some(format!("x{i}")),
    }));
    let v = Int64Array::from_iter((0..200).map(|i| (i % 7 != 0).then_some(i % 50)));
    let batch = arrow::array::RecordBatch::try_new(schema, vec![std::sync::Arc::new(k), std::sync::Arc::new(s), std::sync::Arc::new(v)]).unwrap();
    disk.insert("t", &[batch]).unwrap();
    for sql in [
        "SELECT k FROM t WHERE s LIKE '%b%' ORDER BY k",
        "SELECT k FROM t WHERE s NOT LIKE '%b%' ORDER BY k",
        "SELECT k FROM t WHERE NOT (v > 40) ORDER BY k",
        "SELECT k, s FROM t WHERE v > 40 AND s <> 'x12' ORDER BY v DESC LIMIT 5",
        "SELECT COUNT(*) FROM t WHERE v = 3 OR s = 'abc'",
    ] {
        let off = answer_text(&disk, &format!("{sql} SETTINGS use_query_condition_cache = 0"));
        for _ in 0..3 {
            assert_eq!(answer_text(&disk, sql), off, "{sql}");
        }
    }
}

/// A table of (`k` Int64, `s` Utf8) whose source gives the lengths of `s` but refuses to
/// give its values: a query that uses `s` only through `length(s)`, `s = ''` or
/// `s <> ''` must not read them.
#[derive(Debug)]
struct LengthsOnly {
    /// (k, s) of each morsel.
    chunks: Vec<(arrow::array::ArrayRef, arrow::array::ArrayRef)>,
}

impl tessera_common::ColumnSource for LengthsOnly {
    fn load_columns(&self, indices: &[usize]) -> tessera_common::Result<Vec<Vec<arrow::array::ArrayRef>>> {
        self.load_morsels(indices, &(0..self.chunks.len()).collect::<Vec<_>>())
    }

    fn reads_morsels(&self) -> bool {
        true
    }

    fn load_morsels(&self, indices: &[usize], morsels: &[usize]) -> tessera_common::Result<Vec<Vec<arrow::array::ArrayRef>>> {
        indices
            .iter()
            .map(|&c| match c {
                0 => Ok(morsels.iter().map(|&m| self.chunks[m].0.clone()).collect()),
                _ => Err(tessera_common::Error::internal("the values of s were read")),
            })
            .collect()
    }

    fn load_morsel_sizes(&self, column: usize, morsel: usize) -> Option<tessera_common::Result<arrow::array::ArrayRef>> {
        (column == 1).then(|| {
            let s = self.chunks[morsel].1.as_string::<i32>();
            let sizes: arrow::array::UInt32Array = s.iter().map(|v| v.map(|v| v.len() as u32)).collect();
            Ok(std::sync::Arc::new(sizes) as arrow::array::ArrayRef)
        })
    }
}

/// Strings with NULLs, empty values and multi-byte characters, `k` its row number.
fn length_rows(n: i64) -> (arrow::array::ArrayRef, arrow::array::ArrayRef) {
    let k: arrow::array::ArrayRef = std::sync::Arc::new(Int64Array::from_iter_values(0..n));
    let s: arrow::array::ArrayRef = std::sync::Arc::new(arrow::array::StringArray::from_iter((0..n).map(|i| match i % 11 {
        0 => None,
        1 | 2 => Some(String::new()),
        3 => Some("é日".repeat((i % 7) as usize)),
        _ => Some(format!("v{}", i * 7919 % 1000)),
    })));
    (k, s)
}

/// Queries that use a string column only through its lengths (`length(s)`, `s = ''`,
/// `s <> ''`, in WHERE, aggregates, outputs, top-N) read its sizes, not its values, and
/// answer as over the values in memory; a query that needs the values reads them.
#[test]
fn lengths_only_queries_read_sizes_not_values() {
    let schema = std::sync::Arc::new(arrow::datatypes::Schema::new(vec![
        arrow::datatypes::Field::new("k", arrow::datatypes::DataType::Int64, false),
        arrow::datatypes::Field::new("s", arrow::datatypes::DataType::Utf8, true),
    ]));
    let (k, s) = length_rows(3_000);
    let cuts = [(0, 1_000), (1_000, 1_100), (1_100, 3_000)];
    let chunks = cuts.iter().map(|&(a, b)| (k.slice(a, b - a), s.slice(a, b - a))).collect();
    let lens: Vec<usize> = cuts.iter().map(|&(a, b)| b - a).collect();
    let sizes_db = Database::new();
    let table = tessera_common::Table::lazy("t", schema.clone(), lens, Some(std::sync::Arc::new(LengthsOnly { chunks }))).unwrap();
    sizes_db.register_table(table);
    let mem = Database::new();
    let batch = arrow::array::RecordBatch::try_new(schema, vec![k, s]).unwrap();
    mem.register_batches("t", batch.schema(), &[batch]).unwrap();
    for sql in [
        "SELECT COUNT(*) FROM t WHERE s <> ''",
        "SELECT COUNT(*) FROM t WHERE s = ''",
        "SELECT k % 5 AS g, AVG(length(s)) AS l, COUNT(*) AS c FROM t WHERE s <> '' GROUP BY g ORDER BY l DESC, g",
        "SELECT SUM(length(s)), MAX(length(s)), COUNT(length(s)) FROM t",
        "SELECT k, length(s) FROM t WHERE k > 990 AND k < 1110 ORDER BY k",
        "SELECT k FROM t WHERE length(s) > 4 OR s = '' ORDER BY length(s) DESC, k LIMIT 7",
        "SELECT k FROM t WHERE NOT (s <> '') ORDER BY k LIMIT 5",
    ] {
        assert_eq!(answer_text(&sizes_db, sql), answer_text(&mem, sql), "{sql}");
    }
    let err = sizes_db.sql("SELECT MIN(s) FROM t WHERE length(s) > 2").unwrap_err().to_string();
    assert!(err.contains("values of s were read"), "{err}");
    assert!(sizes_db.sql("SELECT COUNT(*) FROM t WHERE s LIKE 'v%'").is_err());
}

/// From disk, string columns read as sizes (plain and dictionary blocks, every codec,
/// NULLs, empty and multi-byte values, several parts) answer as the values in memory.
#[test]
fn lengths_only_queries_from_disk_equal_in_memory() {
    let schema = std::sync::Arc::new(arrow::datatypes::Schema::new(vec![
        arrow::datatypes::Field::new("k", arrow::datatypes::DataType::Int64, false),
        arrow::datatypes::Field::new("s", arrow::datatypes::DataType::Utf8, true),
        arrow::datatypes::Field::new("d", arrow::datatypes::DataType::Utf8, false),
    ]));
    let (k, s) = length_rows(20_000);
    let d: arrow::array::ArrayRef =
        std::sync::Arc::new(arrow::array::StringArray::from_iter_values((0..20_000).map(|i| ["", "a", "bb", "ccc"][i % 4])));
    let batch = arrow::array::RecordBatch::try_new(schema.clone(), vec![k, s, d]).unwrap();
    let mem = Database::new();
    mem.register_batches("t", schema.clone(), std::slice::from_ref(&batch)).unwrap();
    for codec in [tessera_engine::Codec::Lz4, tessera_engine::Codec::Zstd(3), tessera_engine::Codec::None] {
        let dir = tempfile::tempdir().unwrap();
        let disk = Database::open(dir.path()).unwrap();
        let options = tessera_engine::TableOptions { order_by: vec!["k".into()], granule_rows: 1_000, codec, ..Default::default() };
        disk.create_table("t", schema.clone(), options).unwrap();
        disk.insert("t", &[batch.slice(0, 7_000)]).unwrap();
        disk.insert("t", &[batch.slice(7_000, 13_000)]).unwrap();
        for sql in [
            "SELECT k % 3 AS g, AVG(length(s)) AS l, SUM(length(d)), COUNT(*) FROM t WHERE s <> '' GROUP BY g ORDER BY g",
            "SELECT COUNT(*) FROM t WHERE d = '' OR s = ''",
            "SELECT k, length(s), length(d) FROM t WHERE length(s) > 10 ORDER BY k LIMIT 20",
        ] {
            assert_eq!(answer_text(&disk, sql), answer_text(&mem, sql), "{codec:?}: {sql}");
        }
    }
}

/// Late materialization after the WHERE: where few rows of a morsel pass (under a quarter),
/// GROUP BY and scans read their other columns at those rows only and work on the morsel
/// compacted to them. Selective WHEREs over generated hits (string, computed and
/// lengths-only keys and inputs, `SELECT *` top-N with row positions, a keyless aggregate)
/// give the in-memory answers from two parts, with 1 and 3 threads, the condition cache
/// on (later runs start from its granules) and off.
#[test]
fn compacted_morsels_give_the_in_memory_answers() {
    let batches = generated_hits(40_000, 17, 10_000);
    let (_dir, disk, mem) = hits_on_disk_and_in_memory(&batches, &[0..2, 2..4]);
    let (few, all) = (answer_text(&mem, "SELECT COUNT(*) FROM hits WHERE URL LIKE '%google%'"), 40_000);
    let few: usize = few.trim().parse().unwrap();
    assert!(few > 0 && few * 4 < all, "the WHERE must keep few rows: {few}");
    let queries = [
        "SELECT SearchPhrase, MIN(URL), MIN(Title), COUNT(*) AS c, COUNT(DISTINCT UserID) FROM hits \
         WHERE Title LIKE '%Google%' AND URL NOT LIKE '%.google.%' AND SearchPhrase <> '' \
         GROUP BY SearchPhrase ORDER BY c DESC, SearchPhrase LIMIT 10",
        "SELECT UserID, extract(minute FROM EventTime) AS m, SearchPhrase, COUNT(*) AS c FROM hits \
         WHERE URL LIKE '%google%' GROUP BY UserID, m, SearchPhrase ORDER BY c DESC, UserID, m, SearchPhrase LIMIT 15",
        "SELECT CounterID, AVG(length(URL)) AS l, COUNT(*) FROM hits WHERE URL LIKE '%google%' AND Referer <> '' \
         GROUP BY CounterID ORDER BY l DESC, CounterID LIMIT 20",
        "SELECT COUNT(*), SUM(ResolutionWidth), MIN(Title), MAX(URL) FROM hits WHERE URL LIKE '%google%'",
        "SELECT * FROM hits WHERE URL LIKE '%google%' ORDER BY EventTime, WatchID LIMIT 10",
        "SELECT WatchID, URL, length(Title) FROM hits WHERE URL LIKE '%google%' AND SearchPhrase <> '' ORDER BY WatchID",
        "SELECT SearchPhrase, URL FROM hits WHERE URL LIKE '%google%' ORDER BY SearchPhrase, URL LIMIT 12 OFFSET 3",
        // ~13% of rows have a search phrase: the LIKE runs gathered on those, and the
        // outputs are then taken from the URLs it read (not decoded again).
        "SELECT URL, Title, COUNT(*) AS c FROM hits WHERE SearchPhrase <> '' AND URL LIKE '%a%' \
         GROUP BY URL, Title ORDER BY c DESC, URL, Title LIMIT 25",
        "SELECT URL, SearchPhrase FROM hits WHERE SearchPhrase <> '' AND URL LIKE '%o%' ORDER BY URL, SearchPhrase LIMIT 30",
    ];
    for sql in queries {
        assert!(!answer_text(&mem, sql).is_empty(), "an empty answer shows nothing: {sql}");
    }
    let mut compacted = vec![0; queries.len()];
    for cache in [1, 0] {
        for threads in [1, 3] {
            for (q, sql) in queries.iter().enumerate() {
                let set = format!("SET use_query_condition_cache = {cache}");
                disk.sql(&set).unwrap();
                disk.sql(&format!("SET max_threads = {threads}")).unwrap();
                for run in 0..2 {
                    assert_eq!(answer_text(&disk, sql), answer_text(&mem, sql), "{set}, {threads} threads, run {run}: {sql}");
                    compacted[q] += disk.sql_profiled(sql, None).unwrap().1.morsels_compacted;
                }
            }
        }
    }
    for (sql, n) in queries.iter().zip(compacted) {
        assert!(n > 0, "no morsel compacted: {sql}");
    }
}

/// Integer columns that are nearly all zero are stored sparsely (`AdvEngineID` of generated
/// hits: about 1 row in 170 is not zero), and a WHERE conjunct that zero fails is evaluated
/// on the non-zero rows alone: the answers are the in-memory table's, for conditions that
/// hold at zero too (not read sparsely), after another conjunct (rows intersected), with
/// expressions (not read sparsely), in counts, GROUP BY, top-N and row outputs, 1 and 3
/// threads, with and without the query condition cache; through the decoded-block cache,
/// which keeps the sparse reads (a repeat finds them there) and then the column whole too.
#[test]
fn sparse_columns_answer_as_in_memory() {
    let batches = generated_hits(60_000, 21, 20_000);
    let (dir, disk, mem) = hits_on_disk_and_in_memory(&batches, &[0..2, 2..3]);
    // AdvEngineID's blocks are sparse (encoding 4, byte 9 of a block).
    let adv = tessera_datasets::hits::schema().index_of("AdvEngineID").unwrap();
    let part = std::fs::read_dir(dir.path().join("hits")).unwrap().map(|e| e.unwrap().path()).find(|p| p.is_dir() && !p.ends_with("detached")).unwrap();
    assert_eq!(std::fs::read(part.join(format!("c{adv}.bin"))).unwrap()[9], 4);
    let queries = [
        ("SELECT COUNT(*) FROM hits WHERE AdvEngineID <> 0", true),
        ("SELECT COUNT(*) FROM hits WHERE NOT (AdvEngineID = 0)", true),
        ("SELECT AdvEngineID, COUNT(*) FROM hits WHERE AdvEngineID <> 0 GROUP BY AdvEngineID ORDER BY COUNT(*) DESC, AdvEngineID", true),
        ("SELECT COUNT(*), SUM(AdvEngineID), MIN(WatchID) FROM hits WHERE AdvEngineID > 2", true),
        ("SELECT WatchID, AdvEngineID, URL FROM hits WHERE AdvEngineID = 2 ORDER BY WatchID LIMIT 15", true),
        ("SELECT WatchID, AdvEngineID FROM hits WHERE RegionID <> 229 AND AdvEngineID <> 0 ORDER BY WatchID DESC LIMIT 20", true),
        ("SELECT COUNT(*), SUM(RegionID) FROM hits WHERE AdvEngineID <> 0 AND URL LIKE '%a%'", true),
        ("SELECT COUNT(*) FROM hits WHERE AdvEngineID = 0", false),
        ("SELECT COUNT(*) FROM hits WHERE AdvEngineID >= 0 AND AdvEngineID < 3", false),
        ("SELECT COUNT(*) FROM hits WHERE AdvEngineID + 1 > 1", false),
        ("SELECT COUNT(*) FROM hits WHERE AdvEngineID <> 0 OR RegionID = 229", false),
    ];
    for (sql, sparse) in queries {
        let want = answer_text(&mem, sql);
        assert!(!want.is_empty() && want != "0\n", "{sql}: no rows");
        for (threads, cache) in [(1, 0), (3, 0), (3, 1), (1, 1)] {
            let q = format!("{sql} SETTINGS max_threads = {threads}, use_query_condition_cache = {cache}");
            assert_eq!(answer_text(&disk, &q), want, "{q}");
        }
        let (_, p) = disk.sql_profiled(&format!("{sql} SETTINGS use_query_condition_cache = 0"), None).unwrap();
        assert_eq!(p.morsels_sparse > 0, sparse, "{sql}: {p:?}");
    }
    // The sparse reads go through the decoded-block cache: a query that reads AdvEngineID
    // only sparsely fills an empty cache, and a repeat answers from it (adding nothing).
    disk.set_block_cache_size(1 << 30);
    let q = "SELECT COUNT(*), SUM(AdvEngineID) FROM hits WHERE AdvEngineID <> 0 SETTINGS use_query_condition_cache = 0";
    let want = answer_text(&mem, q);
    assert_eq!(answer_text(&disk, q), want);
    let held = disk.block_cache_bytes();
    assert!(held > 0, "no sparse read cached");
    let (hits, misses) = disk.block_cache_hits_misses();
    assert_eq!(answer_text(&disk, q), want);
    let (hits_after, misses_after) = disk.block_cache_hits_misses();
    assert!(hits_after > hits && misses_after == misses, "hits {hits} -> {hits_after}, misses {misses} -> {misses_after}");
    assert_eq!(disk.block_cache_bytes(), held, "a repeated sparse read put more in the cache");
    let (_, p) = disk.sql_profiled(q, None).unwrap();
    assert!(p.morsels_sparse > 0, "{p:?}");
    // With the decoded-block cache holding AdvEngineID whole too (read by a query that
    // needs every row), the sparse reads give the same answers.
    answer_text(&disk, "SELECT SUM(AdvEngineID), COUNT(*) FROM hits");
    for (sql, _) in queries {
        assert_eq!(answer_text(&disk, sql), answer_text(&mem, sql), "{sql} (block cache)");
    }
}

/// The decoded-block cache gives way to queries under `max_server_memory_usage`: with the
/// cache holding more than the cap leaves a query, the query still runs (the cache evicts
/// what it needs first) and answers as without the cache; a query that needs more than the
/// cap without any cache is still refused, and the cache is left as it was.
#[test]
fn block_cache_gives_way_to_queries_under_the_server_cap() {
    let batches = generated_hits(60_000, 31, 20_000);
    let (_dir, disk, mem) = hits_on_disk_and_in_memory(&batches, &[0..3]);
    disk.set_block_cache_size(1 << 30);
    let fill = "SELECT COUNT(*), MIN(URL), MIN(Title), MIN(Referer), SUM(WatchID % 7) FROM hits";
    assert_eq!(answer_text(&disk, fill), answer_text(&mem, fill));
    let cached = disk.block_cache_bytes();
    assert!(cached > 8 << 20, "{cached} bytes cached");
    let q = "SELECT URL, COUNT(*) AS c FROM hits GROUP BY URL ORDER BY c DESC, URL LIMIT 5";
    // A cap that the cache alone nearly fills: the GROUP BY's table does not fit beside it.
    disk.sql(&format!("SET max_server_memory_usage = {}", cached + (2 << 20))).unwrap();
    assert_eq!(answer_text(&disk, q), answer_text(&mem, q));
    assert!(disk.block_cache_bytes() < cached, "{} of {cached} bytes still cached", disk.block_cache_bytes());
    // Without room even for the query alone: refused, naming the cap, and the cache is
    // left alone (evicting would not have helped).
    disk.sql("SET max_server_memory_usage = 0").unwrap();
    answer_text(&disk, fill);
    let before = disk.block_cache_bytes();
    assert!(before > 8 << 20, "{before} bytes cached");
    disk.sql("SET max_server_memory_usage = 4096").unwrap();
    let e = disk.sql(q).unwrap_err().to_string();
    assert!(e.contains("max_server_memory_usage = 4096"), "{e}");
    assert!(disk.block_cache_bytes() >= before, "{} of {before} bytes still cached", disk.block_cache_bytes());
}
