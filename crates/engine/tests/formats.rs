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
