//! Bad input gets a typed error, never a panic: SQL, tables, columns, types, files,
//! settings.

use std::sync::Arc;

use tessera::arrow::array::{Int32Array, RecordBatch, StringArray};
use tessera::arrow::datatypes::{DataType, Field, Schema};
use tessera::{Database, Error};

fn db() -> Database {
    let schema = Arc::new(Schema::new(vec![
        Field::new("a", DataType::Int32, false),
        Field::new("s", DataType::Utf8, false),
    ]));
    let b = RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(Int32Array::from(vec![1, 2, 2])), Arc::new(StringArray::from(vec!["x", "y", "y"]))],
    )
    .unwrap();
    let db = Database::new();
    db.register_batches("t", schema, &[b]).unwrap();
    db
}

#[test]
fn sql_errors_are_typed() {
    let db = db();
    assert!(matches!(db.sql("SELEC a FROM t"), Err(Error::Parse(_))));
    assert!(matches!(db.sql(""), Err(Error::Parse(_))));
    assert!(matches!(db.sql("SELECT a FROM nope"), Err(Error::UnknownTable(t)) if t == "nope"));
    assert!(matches!(db.sql("SELECT zz FROM t"), Err(Error::UnknownColumn { column, .. }) if column == "zz"));
    assert!(matches!(db.sql("SELECT a FROM t WHERE s = 3"), Err(Error::TypeMismatch(_))));
    assert!(matches!(db.sql("SELECT a FROM t WHERE a = 'x'"), Err(Error::TypeMismatch(_))));
    assert!(matches!(db.sql("SELECT a FROM t WHERE a = s"), Err(Error::TypeMismatch(_))));
    assert!(matches!(db.sql("SELECT SUM(s) FROM t"), Err(Error::TypeMismatch(_))));
    assert!(matches!(db.sql("SELECT a, COUNT(*) FROM t"), Err(Error::Plan(_))));
    assert!(matches!(db.sql("SELECT a FROM t GROUP BY 5"), Err(Error::Plan(_))));
    assert!(matches!(db.sql("SELECT a FROM t ORDER BY 3"), Err(Error::Plan(_))));
    assert!(matches!(db.sql("SELECT a FROM t LIMIT -1"), Err(Error::Plan(_))));
    assert!(matches!(db.sql("SELECT SUM(DISTINCT a) FROM t"), Err(Error::NotImplemented(_))));
    assert!(matches!(db.sql("SELECT a FROM t WHERE a IN (SELECT a FROM t)"), Err(Error::NotImplemented(_))));
    assert!(matches!(db.sql("SELECT a FROM t, t AS u"), Err(Error::NotImplemented(_))));
    assert!(matches!(db.sql("SELECT a FROM t UNION ALL SELECT a FROM t"), Err(Error::NotImplemented(_))));
    assert!(matches!(db.sql("DELETE FROM t"), Err(Error::NotImplemented(_))));
    assert!(matches!(db.sql("SELECT 1; SELECT 2"), Err(Error::InvalidArgument(_))));
    assert!(matches!(db.sql("SET max_threads = 'many'"), Err(Error::InvalidArgument(_))));
    assert!(matches!(db.sql("SET no_such_setting = 1"), Err(Error::InvalidArgument(_))));
    assert!(matches!(db.sql("SELECT a FROM t SETTINGS max_threads = 99999"), Err(Error::InvalidArgument(_))));
    assert!(matches!(db.sql("SET max_threads = -1"), Err(Error::InvalidArgument(m)) if m.contains("non-negative")));
    assert!(matches!(db.sql("SELECT x.a FROM t"), Err(Error::UnknownTable(_))));
    assert!(matches!(db.sql("SELECT a.b.c FROM t"), Err(Error::NotImplemented(_))));
    // Qualified names by table name or alias work.
    assert_eq!(db.sql("SELECT u.a, t.s FROM t AS u WHERE u.a = 2").unwrap_or_else(|e| panic!("{e}"))[0].num_rows(), 2);
    // The errors did not break the database.
    assert_eq!(db.sql("SELECT COUNT(*) FROM t").unwrap()[0].num_rows(), 1);
}

/// Expressions: unknown functions, wrong argument types, invalid regexes, integer division
/// by zero (ClickHouse: `intDiv` and `%` by zero are errors, `/` gives inf/NaN), HAVING on
/// a column that is neither grouped nor aggregated.
#[test]
fn expression_errors_are_typed() {
    let db = db();
    let err = |sql: &str| db.sql(sql).err().unwrap_or_else(|| panic!("{sql}: no error"));
    assert!(matches!(err("SELECT no_such_fn(a), COUNT(*) FROM t GROUP BY 1"), Error::NotImplemented(m) if m.contains("no_such_fn")));
    assert!(matches!(err("SELECT length(a), COUNT(*) FROM t GROUP BY 1"), Error::TypeMismatch(_)));
    assert!(matches!(err("SELECT s + 1, COUNT(*) FROM t GROUP BY 1"), Error::TypeMismatch(_)));
    assert!(matches!(err("SELECT SUM(length(s) + s) FROM t"), Error::TypeMismatch(_)));
    assert!(matches!(err("SELECT COUNT(*) FROM t WHERE a + 1"), Error::TypeMismatch(_)));
    assert!(matches!(err("SELECT COUNT(*) FROM t WHERE s AND a = 1"), Error::TypeMismatch(_)));
    assert!(matches!(err("SELECT CASE WHEN a = 1 THEN s ELSE a END, COUNT(*) FROM t GROUP BY 1"), Error::TypeMismatch(_)));
    assert!(matches!(
        err("SELECT REGEXP_REPLACE(s, '(unclosed', ''), COUNT(*) FROM t GROUP BY 1"),
        Error::InvalidArgument(m) if m.contains("regular expression")
    ));
    assert!(matches!(err("SELECT REGEXP_REPLACE(s, s, ''), COUNT(*) FROM t GROUP BY 1"), Error::Plan(_)));
    assert!(matches!(err("SELECT length(s, s), COUNT(*) FROM t GROUP BY 1"), Error::Plan(_)));
    assert!(matches!(err("SELECT DATE_TRUNC('eon', a), COUNT(*) FROM t GROUP BY 1"), Error::InvalidArgument(_)));
    assert!(matches!(err("SELECT SUM(intDiv(a, a - 1)) FROM t"), Error::InvalidArgument(m) if m.contains("division by zero")));
    assert!(matches!(err("SELECT SUM(a % (a - a)) FROM t"), Error::InvalidArgument(m) if m.contains("division by zero")));
    assert!(matches!(err("SELECT a, COUNT(*) FROM t GROUP BY a HAVING s = 'x'"), Error::Plan(_)));
    assert!(matches!(err("SELECT a, COUNT(*) FROM t GROUP BY a HAVING COUNT(*)"), Error::TypeMismatch(_)));
    assert!(matches!(err("SELECT COUNT(*) FROM t WHERE s LIKE 'a%b\\\\'"), Error::Parse(_)));
    // Rows WHERE drops never fail a query: a = 1 divides by zero, a = 2 gives 2.
    let b = db.sql("SELECT intDiv(a, a - 1) AS q, COUNT(*), SUM(intDiv(a, a - 1)) FROM t WHERE a > 1 GROUP BY q").unwrap();
    assert_eq!(b[0].num_rows(), 1);
    assert_eq!(b[0].column(0).as_any().downcast_ref::<tessera::arrow::array::Int64Array>().unwrap().value(0), 2);
    assert_eq!(b[0].column(1).as_any().downcast_ref::<tessera::arrow::array::Int64Array>().unwrap().value(0), 2);
    assert_eq!(b[0].column(2).as_any().downcast_ref::<tessera::arrow::array::Decimal128Array>().unwrap().value(0), 4);
    // Expressions in a scan's SELECT list, evaluated on the rows WHERE keeps only.
    let b = db.sql("SELECT a + 1 AS x, intDiv(a, a - 1) FROM t WHERE a > 1 ORDER BY x DESC LIMIT 1").unwrap();
    assert_eq!(b[0].column(0).as_any().downcast_ref::<tessera::arrow::array::Int64Array>().unwrap().value(0), 3);
    assert_eq!(b[0].column(1).as_any().downcast_ref::<tessera::arrow::array::Int64Array>().unwrap().value(0), 2);
    // Float division by zero is not an error: inf (ClickHouse).
    let b = db.sql("SELECT MAX(a / (a - a)) FROM t").unwrap();
    let v = b[0].column(0).as_any().downcast_ref::<tessera::arrow::array::Float64Array>().unwrap().value(0);
    assert_eq!(v, f64::INFINITY);
    // The errors did not break the database.
    assert_eq!(db.sql("SELECT COUNT(*) FROM t WHERE s LIKE 'y%y' OR a IN (1)").unwrap()[0].num_rows(), 1);
}

#[test]
fn settings_by_sql() {
    let db = db();
    db.sql("SET max_threads = 1").unwrap();
    assert_eq!(db.settings().max_threads, 1);
    let out = db.sql("SELECT a, COUNT(*) AS c FROM t GROUP BY a ORDER BY c DESC SETTINGS max_threads = 2").unwrap();
    assert_eq!(out[0].num_rows(), 2);
    assert_eq!(db.settings().max_threads, 1, "a query's SETTINGS do not leak");
}

#[test]
fn file_errors_are_typed() {
    let db = Database::new();
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.parquet");
    assert!(matches!(db.register_parquet("h", &missing), Err(Error::Io { .. })));
    let garbage = dir.path().join("garbage.parquet");
    std::fs::write(&garbage, b"this is not parquet at all, not even close").unwrap();
    assert!(matches!(db.register_parquet("h", &garbage), Err(Error::Corrupt { .. })));

    // A valid file cut short: the error names the file.
    let good = dir.path().join("good.parquet");
    let opts = tessera::datasets::GenOptions::new(1000).with_seed(1);
    tessera::datasets::write_parquet(&good, &opts, &|_| {}).unwrap();
    let bytes = std::fs::read(&good).unwrap();
    let cut = dir.path().join("cut.parquet");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    match db.register_parquet("h", &cut) {
        Err(Error::Corrupt { path, .. }) => assert_eq!(path, cut),
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert!(matches!(db.load("nope"), Err(Error::UnknownTable(_))));
}
