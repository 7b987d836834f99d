//! Formats through the engine: `write_query`, `INSERT .. FORMAT` (atomic on disk),
//! `numbers()`, the seed query.

use arrow::array::AsArray;
use arrow::datatypes::{Int8Type, UInt64Type};
use tessera_engine::{Compression, Database, Error, Format, Input, WriteOptions};

fn native(db: &Database, sql: &str) -> Vec<u8> {
    let mut out = Vec::new();
    db.write_query(sql, Format::Native, &WriteOptions::default(), &mut out).unwrap();
    out
}

#[test]
fn seed_query_runs_as_written() {
    let db = Database::new();
    let b = db.sql("select (number % 256)::Int8 a, number b, toString(number) c from numbers(300000) order by b limit 3 offset 254").unwrap();
    let a = b[0].column(0).as_primitive::<Int8Type>();
    assert_eq!(a.values().to_vec(), vec![-2, -1, 0]); // 254, 255, 256 wrap as ClickHouse's CAST
    assert_eq!(b[0].column(1).as_primitive::<UInt64Type>().values().to_vec(), vec![254, 255, 256]);
    assert_eq!(b[0].column(2).as_string::<i32>().value(2), "256");
    let n = db.sql("SELECT COUNT(*), SUM(number), MIN(number), MAX(number) FROM numbers(10, 1000000)").unwrap();
    assert_eq!(n[0].num_rows(), 1);
    let sum = n[0].column(1).as_primitive::<arrow::datatypes::Decimal128Type>().value(0);
    assert_eq!(sum, (10..1_000_010i128).sum::<i128>());
}

#[test]
fn nullable_only_where_the_answer_holds_a_null() {
    let db = Database::new();
    // SELECT number FROM numbers(2) FORMAT Native, as ClickHouse writes it.
    assert_eq!(
        native(&db, "SELECT number FROM numbers(2)"),
        b"\x01\x02\x06number\x06UInt64\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00"
    );
    assert_eq!(native(&db, "SELECT number FROM numbers(0)"), b""); // no rows: no bytes
    let out = native(&db, "SELECT CASE WHEN number = 1 THEN NULL ELSE number END AS x FROM numbers(2)");
    assert!(out.windows(16).any(|w| w == b"Nullable(UInt64)"), "{out:?}");
}

/// `SELECT NULL` (type `Nullable(Nothing)`) and a query without FROM (ClickHouse's
/// `system.one`), in each format as ClickHouse 26.9 (chDB) writes `SELECT NULL AS x, 1 AS y
/// FROM numbers(2)`.
#[test]
fn null_columns_and_select_without_from() {
    let db = Database::new();
    let cases: [(&str, &[u8]); 8] = [
        ("TabSeparated", b"\\N\t1\n\\N\t1\n"),
        ("TSVWithNames", b"x\ty\n\\N\t1\n\\N\t1\n"),
        ("CSV", b"\\N,1\n\\N,1\n"),
        ("CSVWithNames", b"\"x\",\"y\"\n\\N,1\n\\N,1\n"),
        ("JSONEachRow", b"{\"x\":null,\"y\":1}\n{\"x\":null,\"y\":1}\n"),
        ("Native", b"\x02\x02\x01x\x11Nullable(Nothing)\x01\x0100\x01y\x05UInt8\x01\x01"),
        ("RowBinary", b"\x01\x01\x01\x01"),
        ("RowBinaryWithNamesAndTypes", b"\x02\x01x\x01y\x11Nullable(Nothing)\x05UInt8\x01\x01\x01\x01"),
    ];
    for (format, want) in cases {
        let mut out = Vec::new();
        let sql = "SELECT NULL AS x, 1::UInt8 AS y FROM numbers(2)";
        db.write_query(sql, Format::parse(format).unwrap(), &WriteOptions::default(), &mut out).unwrap();
        assert_eq!(out, want, "{format}: {:?}", String::from_utf8_lossy(&out));
    }
    let b = db.sql("SELECT 1 + 1 AS two, substring('hello', 2, 3) AS s, dummy").unwrap();
    assert_eq!(b.iter().map(|b| b.num_rows()).sum::<usize>(), 1);
    assert_eq!(b[0].column(0).as_primitive::<UInt64Type>().value(0), 2);
    assert_eq!(b[0].column(1).as_string::<i32>().value(0), "ell");
    assert_eq!(b[0].column(2).as_primitive::<arrow::datatypes::UInt8Type>().value(0), 0);
    let none = db.sql("SELECT 1 AS x WHERE 1 = 0").unwrap();
    assert_eq!(none.iter().map(|b| b.num_rows()).sum::<usize>(), 0);
}

#[test]
fn insert_format_is_all_or_nothing_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path()).unwrap();
    db.sql("CREATE TABLE t (k UInt32 NOT NULL, s String) ENGINE = MergeTree ORDER BY (k)").unwrap();
    db.sql("INSERT INTO t FORMAT CSV\n1,\"a\"\n2,\\N\n").unwrap();
    let count = |db: &Database| db.sql("SELECT COUNT(*) FROM t").unwrap()[0].column(0).as_primitive::<arrow::datatypes::Int64Type>().value(0);
    assert_eq!(count(&db), 2);
    // Row 70,000 is bad: nothing of the 69,999 rows before it is inserted.
    let mut csv = String::new();
    for i in 0..70_000 {
        csv.push_str(&if i == 69_999 { "x,\"bad\"\n".to_string() } else { format!("{i},\"v{i}\"\n") });
    }
    let err = db.sql_with_input("INSERT INTO t FORMAT CSV", Input::Stream(Box::new(csv.as_bytes())), Compression::None).unwrap_err();
    assert!(matches!(&err, Error::Corrupt { detail, .. } if detail.contains("line 70000, column 1 (k)")), "{err}");
    assert_eq!(count(&db), 2);
    // Columns by name, in another order, from a ZSTD-compressed RowBinaryWithNamesAndTypes stream.
    let src = Database::new();
    let mut bytes = Vec::new();
    let opts = WriteOptions { compression: Compression::Zstd(3) };
    src.write_query("SELECT toString(number) AS s, number + 10 AS k FROM numbers(100)", Format::RowBinaryWithNamesAndTypes, &opts, &mut bytes)
        .unwrap();
    let n = db.insert_format("t", Format::RowBinaryWithNamesAndTypes, Input::Stream(Box::new(bytes.as_slice())), Compression::Zstd(3)).unwrap();
    assert_eq!((n, count(&db)), (100, 102));
    let b = db.sql("SELECT k, s FROM t WHERE k = 57").unwrap();
    assert_eq!(b[0].column(1).as_string::<i32>().value(0), "47");
    let err = db.sql("INSERT INTO t FORMAT Native").unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    let err = db.sql("INSERT INTO nope FORMAT CSV\n1\n").unwrap_err();
    assert!(matches!(err, Error::UnknownTable(_)), "{err}");
}

/// The rows of `bytes` (in `format`), as one batch.
fn read_back(format: Format, bytes: &[u8]) -> arrow::array::RecordBatch {
    let reader = tessera_engine::read_format(format, Input::Stream(Box::new(bytes)), &tessera_engine::ReadOptions::default()).unwrap();
    let schema = reader.schema();
    let batches: Vec<_> = reader.map(Result::unwrap).collect();
    arrow::compute::concat_batches(&schema, &batches).unwrap()
}

/// A scan without ORDER BY streams into the writer: what it writes reads back as the rows
/// `sql` returns, in table order, on 1 to 3 threads (morsels finish out of order there);
/// its fields are nullable where a value may be NULL.
#[test]
fn scans_stream_into_the_writer_in_table_order() {
    let sql = "SELECT number, toString(number * 7) AS s, CASE WHEN number % 5 = 0 THEN NULL ELSE number END AS n \
               FROM numbers(700000) WHERE number % 3 <> 1";
    for threads in [1, 2, 3] {
        let db = Database::new();
        db.set("max_threads", &threads.to_string()).unwrap();
        let whole = db.sql(sql).unwrap();
        let whole = arrow::compute::concat_batches(&whole[0].schema(), &whole).unwrap();
        assert_eq!(whole.num_rows(), 466_667);
        for format in [Format::Native, Format::RowBinaryWithNamesAndTypes, Format::Parquet] {
            let mut out = Vec::new();
            let stats = db.write_query(sql, format, &WriteOptions::default(), &mut out).unwrap();
            assert_eq!(stats.rows, 466_667);
            let got = read_back(format, &out);
            assert_eq!(got.num_rows(), whole.num_rows(), "{format:?}, {threads} threads");
            for c in 0..3 {
                assert_eq!(got.column(c).to_data(), whole.column(c).to_data(), "column {c}, {format:?}, {threads} threads");
            }
            let nullable: Vec<bool> = got.schema().fields().iter().map(|f| f.is_nullable()).collect();
            assert_eq!(nullable, [false, false, true], "{format:?}");
        }
    }
}

/// A streamed answer is never held whole: under a `max_memory_usage` of a small part of the
/// answer, writing it succeeds where returning it fails; an empty streamed answer writes what
/// an empty answer of any plan writes.
#[test]
fn a_streamed_answer_stays_under_a_small_memory_limit() {
    let db = Database::new();
    db.set("max_threads", "2").unwrap();
    db.set("max_memory_usage", &(16u64 << 20).to_string()).unwrap();
    // 4M rows of (UInt64, String): ~70 MB as Arrow arrays.
    let sql = "SELECT number, toString(number) AS s FROM numbers(4000000)";
    let err = db.sql(sql).unwrap_err();
    assert!(matches!(err, Error::ResourcesExhausted(_)), "{err}");
    let mut out = Vec::new();
    let stats = db.write_query(sql, Format::RowBinary, &WriteOptions::default(), &mut out).unwrap();
    assert_eq!(stats.rows, 4_000_000);
    assert_eq!(&out[..17], b"\x00\x00\x00\x00\x00\x00\x00\x00\x010\x01\x00\x00\x00\x00\x00\x00");
    assert_eq!(out.len() as u64, stats.bytes);
    // No row passes: the same bytes as an aggregate's empty answer (a CSV header).
    let mut empty = Vec::new();
    db.write_query("SELECT number AS x FROM numbers(1000000) WHERE number > 2000000", Format::CsvWithNames, &WriteOptions::default(), &mut empty)
        .unwrap();
    let mut agg = Vec::new();
    db.write_query("SELECT number AS x FROM numbers(10) GROUP BY number HAVING number > 20", Format::CsvWithNames, &WriteOptions::default(), &mut agg)
        .unwrap();
    assert_eq!((empty.as_slice(), agg.as_slice()), (&b"\"x\"\n"[..], &b"\"x\"\n"[..]));
}

/// A sink that fails after `left` bytes.
struct FailingSink {
    left: usize,
}

impl std::io::Write for FailingSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.len() > self.left {
            return Err(std::io::Error::other("disk full"));
        }
        self.left -= buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A streamed scan ends with the error of whichever side failed: the writer's (the workers
/// stop), the query's (an expression failing at a late row, after rows were written), or
/// cancellation; the database answers the next query.
#[test]
fn a_streamed_scan_reports_errors_of_either_side() {
    let db = Database::new();
    db.set("max_threads", "2").unwrap();
    let sql = "SELECT number, toString(number) AS s FROM numbers(5000000)";
    let err = db.write_query(sql, Format::Native, &WriteOptions::default(), FailingSink { left: 3 << 20 }).unwrap_err();
    assert!(err.to_string().contains("disk full"), "{err}");
    // Row 3,000,000 does not convert: rows before it were written, and the call fails.
    let bad = "SELECT CAST(if(number = 3000000, 'x', toString(number)) AS Int64) AS v FROM numbers(5000000)";
    let mut out = Vec::new();
    let err = db.write_query(bad, Format::Native, &WriteOptions::default(), &mut out).unwrap_err();
    assert!(!matches!(err, Error::Io { .. } | Error::Cancelled), "{err}");
    let token = tessera_engine::CancelToken::new();
    token.cancel();
    let err = db.write_query_in(sql, None, &token, Format::Native, &WriteOptions::default(), std::io::sink()).unwrap_err();
    assert!(matches!(err, Error::Cancelled), "{err}");
    let mut out = Vec::new();
    assert_eq!(db.write_query("SELECT number FROM numbers(3)", Format::Csv, &WriteOptions::default(), &mut out).unwrap().rows, 3);
    assert_eq!(out, b"0\n1\n2\n");
}

/// Into a table without sort key, `INSERT .. FORMAT` writes the part while the input is
/// parsed: a bad row after several written batches still inserts nothing and leaves no
/// temporary directory; a good input reads back whole, in input order.
#[test]
fn streamed_insert_without_sort_key_is_all_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path()).unwrap();
    db.sql("CREATE TABLE t (k UInt64 NOT NULL, s String)").unwrap();
    let mut csv = String::new();
    for i in 0..400_000u64 {
        csv.push_str(&if i == 399_990 { "x,\"bad\"\n".to_string() } else { format!("{i},\"v{}\"\n", i * 3) });
    }
    let err = db.sql_with_input("INSERT INTO t FORMAT CSV", Input::Stream(Box::new(csv.as_bytes())), Compression::None).unwrap_err();
    assert!(matches!(&err, Error::Corrupt { detail, .. } if detail.contains("line 399991, column 1 (k)")), "{err}");
    let count = |db: &Database| db.sql("SELECT COUNT(*) FROM t").unwrap()[0].column(0).as_primitive::<arrow::datatypes::Int64Type>().value(0);
    assert_eq!(count(&db), 0);
    let files = walk(dir.path());
    assert_eq!(files.len(), 3, "{files:?}"); // t, t/table.json, t/manifest.txt: no temporary part
    // Native, written by a streamed scan: 600,000 rows in order.
    let mut bytes = Vec::new();
    Database::new()
        .write_query("SELECT number AS k, toString(number * 3) AS s FROM numbers(600000)", Format::Native, &WriteOptions::default(), &mut bytes)
        .unwrap();
    let n = db.insert_format("t", Format::Native, Input::Stream(Box::new(bytes.as_slice())), Compression::None).unwrap();
    assert_eq!((n, count(&db)), (600_000, 600_000));
    let b = db.sql("SELECT SUM(k), MIN(s), MAX(s) FROM t WHERE k % 1000 = 999").unwrap();
    let sum = b[0].column(0).as_primitive::<arrow::datatypes::Decimal128Type>().value(0);
    assert_eq!(sum, (0..600_000i128).filter(|k| k % 1000 == 999).sum::<i128>());
    let first = db.sql("SELECT k, s FROM t LIMIT 3 OFFSET 299999").unwrap();
    assert_eq!(first[0].column(0).as_primitive::<UInt64Type>().values().to_vec(), vec![299_999, 300_000, 300_001]);
    assert_eq!(first[0].column(1).as_string::<i32>().value(1), "900000");
}

/// Paths under `dir`, recursively, relative to it.
fn walk(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        out.push(p.strip_prefix(dir).unwrap().display().to_string());
        if p.is_dir() {
            out.extend(walk(&p).into_iter().map(|q| format!("{}/{q}", p.file_name().unwrap().to_string_lossy())));
        }
    }
    out
}

/// The consumer of a streamed answer may run another query on the same pool while the
/// scan's workers wait for it (they run the other query's work meanwhile): no deadlock.
#[test]
fn a_streamed_answer_s_consumer_may_run_queries() {
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let db = Database::new();
        db.set("max_threads", "2").unwrap();
        let out = db.sql_stream_in("SELECT number FROM numbers(5000000)", None, &Default::default(), |_, batches| {
            let (mut rows, mut inner) = (0usize, Vec::new());
            for b in batches {
                rows += b?.num_rows();
                if inner.len() < 3 {
                    // The scan's workers have filled the channel and wait by now.
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    let c = db.sql("SELECT COUNT(*) FROM numbers(3000000) WHERE number % 7 = 1").unwrap();
                    inner.push(c[0].column(0).as_primitive::<arrow::datatypes::Int64Type>().value(0));
                }
            }
            Ok((rows, inner))
        });
        let _ = done_tx.send(out.map(|(r, _)| r));
    });
    let got = done_rx.recv_timeout(std::time::Duration::from_secs(120)).expect("the streamed query and its consumer's queries deadlocked");
    let inner = (0..3_000_000u64).filter(|n| n % 7 == 1).count() as i64;
    assert_eq!(got.unwrap(), Some((5_000_000, vec![inner; 3])));
}
