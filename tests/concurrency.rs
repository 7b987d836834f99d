//! Queries under load: many client threads sharing one `Database` get the serial answers;
//! `max_memory_usage` fails only the query that exceeds it; a `CancelToken` stops a query.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tessera::arrow::array::{ArrayRef, RecordBatch, UInt64Array};
use tessera::arrow::datatypes::{DataType, Field, Schema};
use tessera::{CancelToken, Database, Error, Settings};

const ROWS: usize = 200_000;
const SEED: u64 = 11;

/// Queries whose answers are fully determined (every ORDER BY ends in the group keys, so
/// no ties at the LIMIT boundary), covering each key layout, the scan and the global
/// aggregate.
const QUERIES: &[&str] = &[
    "SELECT COUNT(*) FROM hits",
    "SELECT SUM(AdvEngineID), COUNT(*), AVG(ResolutionWidth) FROM hits",
    "SELECT RegionID, COUNT(*) AS c FROM hits GROUP BY RegionID ORDER BY c DESC, RegionID LIMIT 10",
    "SELECT UserID, extract(minute FROM EventTime) AS m, SearchPhrase, COUNT(*) AS c FROM hits \
     GROUP BY UserID, m, SearchPhrase ORDER BY c DESC, UserID, m, SearchPhrase LIMIT 10",
    "SELECT WatchID, ClientIP, COUNT(*) AS c, SUM(IsRefresh), AVG(ResolutionWidth) FROM hits \
     GROUP BY WatchID, ClientIP ORDER BY c DESC, WatchID, ClientIP LIMIT 10",
    "SELECT URL, COUNT(*) AS c FROM hits GROUP BY URL ORDER BY c DESC, URL LIMIT 10",
    "SELECT WatchID, URL FROM hits ORDER BY EventTime, WatchID LIMIT 20",
];

/// The Q33 shape: one group per row (WatchID is unique), so its tables grow with the input.
const Q33_LIKE: &str = "SELECT WatchID, ClientIP, COUNT(*) AS c, SUM(IsRefresh), AVG(ResolutionWidth) \
                        FROM hits GROUP BY WatchID, ClientIP ORDER BY c DESC, WatchID, ClientIP LIMIT 10";

/// A generated hits table of `ROWS` rows, registered in memory (no file).
fn database() -> Arc<Database> {
    static BATCHES: OnceLock<Vec<RecordBatch>> = OnceLock::new();
    let batches = BATCHES.get_or_init(|| {
        let opts = tessera::datasets::GenOptions::new(ROWS as u64).with_seed(SEED);
        (0..ROWS)
            .step_by(65_536)
            .map(|start| tessera::datasets::generate_batch(&opts, start as u64, (ROWS - start).min(65_536)))
            .collect()
    });
    let db = Database::new();
    db.register_batches("hits", tessera::datasets::hits::schema(), batches).unwrap();
    Arc::new(db)
}

#[test]
fn concurrent_clients_get_the_serial_answers() {
    let db = database();
    let serial: Vec<Vec<RecordBatch>> = QUERIES.iter().map(|q| db.sql(q).unwrap()).collect();
    let count = tessera::arrow::util::display::array_value_to_string(serial[0][0].column(0), 0).unwrap();
    assert_eq!(count, ROWS.to_string());
    // Each client walks the queries from its own starting point with its own settings
    // (1..4 threads, the forced radix-partitioned path), so different operators overlap.
    let clients = 4;
    let deadline = Instant::now() + Duration::from_secs(10);
    std::thread::scope(|s| {
        for c in 0..clients {
            let (db, serial) = (&db, &serial);
            s.spawn(move || {
                let mut settings = Settings { max_threads: 1 + c % 4, ..Settings::default() };
                if c % 2 == 1 {
                    settings.group_by_two_level_threshold = 0;
                }
                for round in 0..4 {
                    for i in 0..QUERIES.len() {
                        let q = (i + c * 2 + round) % QUERIES.len();
                        let got = db.sql_with(QUERIES[q], &settings).unwrap();
                        assert_eq!(got, serial[q], "client {c} round {round}: {}", QUERIES[q]);
                    }
                    if Instant::now() > deadline {
                        break; // bounded in time on a slow or busy machine
                    }
                }
            });
        }
    });
}

#[test]
fn max_memory_usage_fails_only_the_query_over_it() {
    let db = database();
    let want = db.sql(Q33_LIKE).unwrap();
    let (_, profile) = db.sql_profiled(Q33_LIKE, None).unwrap();
    // The final phase builds, emits and drops one partition's table at a time: the peak
    // holds less than all final tables together.
    assert!(profile.peak_memory_bytes > 0 && profile.hash_table_bytes > 0, "{profile:?}");
    assert!(profile.peak_memory_bytes < profile.hash_table_bytes * 2, "{profile:?}");

    // 1 MB: far below the Q33 tables (200k groups), far above COUNT(*)'s needs.
    let low = format!("{Q33_LIKE} SETTINGS max_memory_usage = 1000000");
    match db.sql(&low) {
        Err(Error::ResourcesExhausted(m)) => {
            assert!(m.contains("max_memory_usage = 1000000") && m.contains("GROUP BY"), "{m}")
        }
        other => panic!("expected ResourcesExhausted, got {other:?}"),
    }
    let count = db.sql("SELECT COUNT(*) FROM hits SETTINGS max_memory_usage = 1000000").unwrap();
    assert_eq!(count, db.sql("SELECT COUNT(*) FROM hits").unwrap());

    // The same limit through `Settings` and `SET`, and a limit that fits.
    let s = Settings { max_memory_usage: 1_000_000, max_threads: 1, ..Settings::default() };
    assert!(matches!(db.sql_with(Q33_LIKE, &s), Err(Error::ResourcesExhausted(_))));
    let fits = Settings { max_memory_usage: 4 * profile.peak_memory_bytes as u64, ..Settings::default() };
    assert_eq!(db.sql_with(Q33_LIKE, &fits).unwrap(), want);
    let limited = database();
    limited.sql("SET max_memory_usage = 1000000").unwrap();
    assert!(matches!(limited.sql(Q33_LIKE), Err(Error::ResourcesExhausted(_))));

    // A query without a limit running at the same time as failing ones is unaffected.
    std::thread::scope(|sc| {
        let failing = sc.spawn(|| {
            for _ in 0..5 {
                assert!(matches!(db.sql(&low), Err(Error::ResourcesExhausted(_))));
            }
        });
        for _ in 0..3 {
            assert_eq!(db.sql(Q33_LIKE).unwrap(), want);
        }
        failing.join().unwrap();
    });
}

/// A table of `rows` distinct pseudo-random UInt64 keys in 65,536-row chunks.
fn distinct_keys(rows: usize) -> Database {
    let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::UInt64, false)]));
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let batches: Vec<RecordBatch> = (0..rows)
        .step_by(65_536)
        .map(|start| {
            let keys: UInt64Array = (start..(start + 65_536).min(rows))
                .map(|_| {
                    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15); // distinct: a Weyl sequence
                    x
                })
                .collect();
            RecordBatch::try_new(schema.clone(), vec![Arc::new(keys) as ArrayRef]).unwrap()
        })
        .collect();
    let db = Database::new();
    db.register_batches("t", schema, &batches).unwrap();
    db
}

#[test]
fn cancel_stops_a_running_query() {
    let db = distinct_keys(2_000_000);
    let sql = "SELECT k, COUNT(*) AS c FROM t GROUP BY k ORDER BY c DESC, k LIMIT 10";

    let before = CancelToken::new();
    before.cancel();
    assert!(matches!(db.sql_cancellable(sql, &before), Err(Error::Cancelled)));

    // The client repeats the query until it fails, so the cancel lands while one runs
    // however fast the machine is; after cancel() it must stop within a generous bound.
    let token = CancelToken::new();
    std::thread::scope(|s| {
        let client = s.spawn(|| {
            let mut done = 0;
            loop {
                match db.sql_cancellable(sql, &token) {
                    Ok(b) => {
                        assert_eq!(b[0].num_rows(), 10);
                        done += 1;
                    }
                    Err(e) => return (e, done),
                }
            }
        });
        std::thread::sleep(Duration::from_millis(150));
        let t = Instant::now();
        token.cancel();
        let (err, _) = client.join().unwrap();
        assert!(matches!(err, Error::Cancelled), "{err:?}");
        assert!(t.elapsed() < Duration::from_secs(2), "cancel took {:?}", t.elapsed());
    });
    // The database stays usable.
    assert_eq!(db.sql(sql).unwrap()[0].num_rows(), 10);
}
