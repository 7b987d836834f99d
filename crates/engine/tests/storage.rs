//! On-disk tables through the engine: SQL DDL/DML, restarts, granule skipping, merges.

use arrow::array::{Array, AsArray, Int64Array};
use arrow::datatypes::Int64Type;
use tessera_engine::Database;

fn count(db: &Database, sql: &str) -> i64 {
    let b = db.sql(sql).unwrap();
    b[0].column(0).as_primitive::<Int64Type>().value(0)
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
