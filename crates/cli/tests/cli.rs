//! The `tessera` binary on bad input and damaged databases: typed errors with their exit
//! codes (2 bad argument, 1 data error), warnings on stderr, output formats end to end.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::Schema;

/// Runs the `tessera` binary: directly, or through `TESSERA_TEST_RUNNER` (e.g.
/// `qemu-aarch64 -L / -cpu max`, set by scripts/check-aarch64.sh) where it cannot be exec'd
/// natively.
fn tessera(args: &[&str]) -> Output {
    let exe = env!("CARGO_BIN_EXE_tessera");
    let mut cmd = match std::env::var("TESSERA_TEST_RUNNER") {
        Ok(r) if !r.trim().is_empty() => {
            let mut parts = r.split_whitespace();
            let mut c = Command::new(parts.next().expect("non-empty runner"));
            c.args(parts).arg(exe);
            c
        }
        _ => Command::new(exe),
    };
    cmd.args(args).output().expect("run tessera")
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exit code")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Writes a Parquet file of the given columns.
fn parquet(path: &Path, cols: Vec<(&str, ArrayRef)>) {
    let batch = if cols.is_empty() {
        RecordBatch::new_empty(Arc::new(Schema::empty()))
    } else {
        RecordBatch::try_from_iter(cols).unwrap()
    };
    let file = std::fs::File::create(path).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    if batch.num_columns() > 0 {
        w.write(&batch).unwrap();
    }
    w.close().unwrap();
}

fn three_columns(path: &Path, n: i64) {
    parquet(
        path,
        vec![
            ("a", Arc::new(Int64Array::from((0..n).collect::<Vec<_>>())) as ArrayRef),
            ("b", Arc::new(StringArray::from((0..n).map(|i| format!("b{i}")).collect::<Vec<_>>())) as ArrayRef),
            ("c", Arc::new(Int64Array::from((0..n).map(|i| i * 2).collect::<Vec<_>>())) as ArrayRef),
        ],
    );
}

#[test]
fn query_on_a_missing_db_directory_is_an_error_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("no/such/dir");
    let o = tessera(&["query", "--db", db.to_str().unwrap(), "SELECT COUNT(*) FROM t"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("does not exist"), "{}", stderr(&o));
    assert!(!dir.path().join("no").exists());
    let o = tessera(&["bench", "--db", db.to_str().unwrap(), "--queries", "1", "--runs", "1"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(!dir.path().join("no").exists());
}

#[test]
fn load_into_an_existing_table_from_a_file_with_fewer_columns_names_them() {
    let dir = tempfile::tempdir().unwrap();
    let (db, full, fewer) = (dir.path().join("db"), dir.path().join("full.parquet"), dir.path().join("fewer.parquet"));
    three_columns(&full, 100);
    parquet(&fewer, vec![("a", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef)]);
    let o = tessera(&["load", "--db", db.to_str().unwrap(), "e", full.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = tessera(&["load", "--db", db.to_str().unwrap(), "e", fewer.to_str().unwrap()]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("invalid argument") && e.contains("lacks the table's column(s) b, c"), "{e}");
    // The same columns in another order load (matched by name).
    let reordered = dir.path().join("reordered.parquet");
    parquet(
        &reordered,
        vec![
            ("c", Arc::new(Int64Array::from(vec![10])) as ArrayRef),
            ("a", Arc::new(Int64Array::from(vec![5])) as ArrayRef),
            ("b", Arc::new(StringArray::from(vec!["x"])) as ArrayRef),
        ],
    );
    let o = tessera(&["load", "--db", db.to_str().unwrap(), "e", reordered.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = tessera(&["query", "--db", db.to_str().unwrap(), "--format", "TSVWithNames", "SELECT b, c FROM e WHERE a = 5"]);
    assert_eq!(stdout(&o), "b\tc\nb5\t10\nx\t10\n", "{}", stderr(&o));
}

#[test]
fn zero_column_parquet_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("nocols.parquet");
    parquet(&f, vec![]);
    let spec = format!("t={}", f.display());
    let o = tessera(&["query", "--load", &spec, "SELECT * FROM t"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("no columns"), "{}", stderr(&o));
}

#[test]
fn repeated_load_of_one_table_name_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.parquet"), dir.path().join("b.parquet"));
    three_columns(&a, 10);
    three_columns(&b, 20);
    let (sa, sb) = (format!("t={}", a.display()), format!("T={}", b.display()));
    let o = tessera(&["query", "--load", &sa, "--load", &sb, "SELECT COUNT(*) FROM t"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("loaded twice"), "{}", stderr(&o));
}

#[test]
fn damaged_database_is_refused_and_copied_parts_are_detached_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let (db, f) = (dir.path().join("db"), dir.path().join("f.parquet"));
    three_columns(&f, 2000);
    for _ in 0..2 {
        let o = tessera(&["load", "--db", db.to_str().unwrap(), "e", f.to_str().unwrap()]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
    }
    let q = |format: &str| tessera(&["query", "--db", db.to_str().unwrap(), "--format", format, "SELECT COUNT(*) AS n FROM e"]);
    assert_eq!(stdout(&q("TSVWithNames")), "n\n4000\n");
    // A copy of a part under another part name: detached, not counted, a warning.
    let t = db.join("e");
    let copy = t.join("0000000005_0000000005_0");
    std::fs::create_dir(&copy).unwrap();
    for e in std::fs::read_dir(t.join("0000000001_0000000001_0")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), copy.join(e.file_name())).unwrap();
    }
    let o = q("TSVWithNames");
    assert_eq!((code(&o), stdout(&o).as_str()), (0, "n\n4000\n"), "{}", stderr(&o));
    assert!(stderr(&o).contains("warning: table e: part directory 0000000005_0000000005_0 is not in manifest.txt"), "{}", stderr(&o));
    assert!(t.join("detached/unexpected_0000000005_0000000005_0").is_dir());
    // A deleted part: refused, naming the table and the part; exit 1.
    std::fs::remove_dir_all(t.join("0000000001_0000000001_0")).unwrap();
    let o = q("csv");
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("table e: part 0000000001_0000000001_0 (2000 rows) is listed in manifest.txt but its directory is missing"), "{e}");
    assert_eq!(stdout(&o), "");
    // A deleted table.json: corrupt, naming the directory (not "unknown table").
    std::fs::remove_file(t.join("table.json")).unwrap();
    let o = q("csv");
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert!(stderr(&o).contains("table.json is missing"), "{}", stderr(&o));
}

#[test]
fn csv_and_json_tell_null_from_empty_string_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let db = db.to_str().unwrap();
    for sql in [
        "CREATE TABLE x (k INT NOT NULL, s TEXT) ENGINE = MergeTree ORDER BY (k)",
        "INSERT INTO x VALUES (1, ''), (2, NULL), (3, 'a,b')",
    ] {
        let o = tessera(&["query", "--db", db, sql]);
        assert_eq!(code(&o), 0, "{sql}: {}", stderr(&o));
    }
    // ClickHouse's formats: NULL is \N in CSV and TSV, null in JSON; '' is "" in CSV.
    let o = tessera(&["query", "--db", db, "--format", "CSVWithNames", "SELECT k, s FROM x ORDER BY k"]);
    assert_eq!(stdout(&o), "\"k\",\"s\"\n1,\"\"\n2,\\N\n3,\"a,b\"\n", "{}", stderr(&o));
    let o = tessera(&["query", "--db", db, "--format", "jsoneachrow", "SELECT k, s FROM x ORDER BY k"]);
    assert_eq!(stdout(&o), "{\"k\":1,\"s\":\"\"}\n{\"k\":2,\"s\":null}\n{\"k\":3,\"s\":\"a,b\"}\n", "{}", stderr(&o));
    let o = tessera(&["query", "--db", db, "--format", "tsvwithnames", "SELECT k, s FROM x ORDER BY k"]);
    assert_eq!(stdout(&o), "k\ts\n1\t\n2\t\\N\n3\ta,b\n", "{}", stderr(&o));
    let o = tessera(&["query", "--db", db, "--format", "json", "SELECT k FROM x"]);
    assert_eq!(code(&o), 2, "an unknown format name is a bad argument");
}

/// A Parquet file with only some of the hits columns gets the official types column by
/// column: EventTime stored as Int64 seconds becomes a timestamp, so `toMinute` works.
#[test]
fn subset_of_hits_columns_gets_the_hits_types() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("sub.parquet");
    parquet(
        &f,
        vec![
            ("EventTime", Arc::new(Int64Array::from(vec![1_373_600_000 + 61, 1_373_600_000 + 125])) as ArrayRef),
            ("Extra", Arc::new(Int64Array::from(vec![7, 8])) as ArrayRef),
        ],
    );
    let load = format!("hits={}", f.display());
    let o = tessera(&["query", "--load", &load, "--format", "TSVWithNames", "SELECT toMinute(EventTime) AS m, Extra FROM hits ORDER BY m"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "m\tExtra\n34\t7\n35\t8\n");
}

/// A Parquet file of `n` rows in row groups of `rg` rows: `k` (13 values), `s` (17 values),
/// `seq` (the row number), so keys repeat across row groups and insert blocks.
fn row_groups(path: &Path, n: i64, rg: usize) {
    let batch = RecordBatch::try_from_iter(vec![
        ("k", Arc::new(Int64Array::from((0..n).map(|i| (i * 7919) % 13).collect::<Vec<_>>())) as ArrayRef),
        ("s", Arc::new(StringArray::from((0..n).map(|i| format!("s{}", (i * 31) % 17)).collect::<Vec<_>>())) as ArrayRef),
        ("seq", Arc::new(Int64Array::from((0..n).collect::<Vec<_>>())) as ArrayRef),
    ])
    .unwrap();
    let props = parquet::file::properties::WriterProperties::builder().set_max_row_group_row_count(Some(rg)).build();
    let file = std::fs::File::create(path).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

/// `tessera load` streams row groups into parts of at most `--max-insert-block-rows`
/// rows (whole row groups: 2 of 1,000 rows); the answers equal a single-part load's (ties at ORDER BY .. LIMIT included: each
/// block is sorted stably and blocks keep file order), and after `--optimize` the one
/// merged part holds the rows in exactly the single-part order.
#[test]
fn multi_part_load_and_optimize_answer_like_a_single_part_load() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f.parquet");
    row_groups(&f, 20_000, 1000);
    let load = |db: &str, extra: &[&str]| {
        let db = dir.path().join(db);
        let mut args = vec!["load", "--db", db.to_str().unwrap(), "--order-by", "k,s", "--granule-rows", "100"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["t", f.to_str().unwrap()]);
        let o = tessera(&args);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        (db, stderr(&o))
    };
    let (one, e1) = load("one", &[]);
    assert!(e1.contains("20000 rows, 1 parts"), "{e1}");
    let (many, e2) = load("many", &["--max-insert-block-rows", "2500"]);
    assert!(e2.contains("20000 rows, 10 parts"), "{e2}");
    let (merged, e3) = load("merged", &["--max-insert-block-rows", "2500", "--optimize"]);
    assert!(e3.contains("merged 10 parts") && e3.contains("20000 rows, 1 parts"), "{e3}");
    let answer = |db: &Path, sql: &str| {
        let o = tessera(&["query", "--db", db.to_str().unwrap(), "--format", "TSVWithNames", sql]);
        assert_eq!(code(&o), 0, "{sql}: {}", stderr(&o));
        stdout(&o)
    };
    let queries = [
        "SELECT COUNT(*) FROM t",
        "SELECT k, COUNT(*) AS c, SUM(seq) AS s FROM t GROUP BY k ORDER BY k",
        "SELECT k, s, seq FROM t ORDER BY k, s LIMIT 50",
        "SELECT seq FROM t WHERE s = 's3' AND k = 4 ORDER BY seq LIMIT 7",
        "SELECT s, MIN(seq), MAX(seq) FROM t WHERE k >= 11 GROUP BY s ORDER BY s",
    ];
    for q in queries {
        let want = answer(&one, q);
        assert_eq!(answer(&many, q), want, "{q}");
        assert_eq!(answer(&merged, q), want, "{q}");
    }
    // Table order (LIMIT without ORDER BY): the merged part is the single-part sort.
    let q = "SELECT k, s, seq FROM t LIMIT 100000";
    assert_eq!(answer(&merged, q), answer(&one, q));
}

/// A Parquet file damaged in its 7th row group: the load fails with a typed error (exit
/// 1) after committing the blocks before it, which stay whole and queryable; no partial
/// part is left behind, and the message says what was committed.
#[test]
fn corrupt_row_group_mid_stream_keeps_the_parts_committed_before_it() {
    use std::io::{Seek, SeekFrom, Write};

    use parquet::file::reader::FileReader;
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f.parquet");
    row_groups(&f, 10_000, 1000);
    let meta = parquet::file::reader::SerializedFileReader::new(std::fs::File::open(&f).unwrap()).unwrap().metadata().clone();
    let col = meta.row_group(6).column(1);
    let start = col.dictionary_page_offset().unwrap_or(col.data_page_offset()) as u64;
    let mut file = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
    file.seek(SeekFrom::Start(start)).unwrap();
    file.write_all(&vec![0xFF; col.compressed_size() as usize]).unwrap();
    drop(file);
    let db = dir.path().join("db");
    let o = tessera(&["load", "--db", db.to_str().unwrap(), "--max-insert-block-rows", "2000", "t", f.to_str().unwrap()]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("row group 6"), "{e}");
    assert!(e.contains("committing 6000 of 10000 rows as 3 part(s)"), "{e}");
    let o = tessera(&["query", "--db", db.to_str().unwrap(), "--format", "TSVWithNames", "SELECT COUNT(*) AS n, MAX(seq) AS m FROM t"]);
    assert_eq!((code(&o), stdout(&o).as_str()), (0, "n\tm\n6000\t5999\n"), "{}", stderr(&o));
    let left: Vec<String> =
        std::fs::read_dir(db.join("t")).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(!left.iter().any(|n| n.starts_with("tmp_")), "{left:?}");
    assert_eq!(left.len(), 5, "table.json, manifest.txt and 3 parts: {left:?}");
}

/// A Parquet column of a type Tessera lacks (Boolean) no longer refuses the file: it is
/// left out with a warning naming it, queries over the other columns run, and a query
/// naming it is an unknown column (exit 3).
#[test]
fn unsupported_parquet_column_is_left_out_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("b.parquet");
    parquet(
        &f,
        vec![
            ("a", Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef),
            ("flag", Arc::new(arrow::array::BooleanArray::from(vec![true, false, true])) as ArrayRef),
        ],
    );
    let spec = format!("t={}", f.display());
    let o = tessera(&["query", "--load", &spec, "--format", "TSVWithNames", "SELECT SUM(a) AS s FROM t"]);
    assert_eq!((code(&o), stdout(&o).as_str()), (0, "s\n6\n"), "{}", stderr(&o));
    assert!(stderr(&o).contains("warning:") && stderr(&o).contains("flag (Boolean)"), "{}", stderr(&o));
    let o = tessera(&["query", "--load", &spec, "SELECT flag FROM t"]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    let db = dir.path().join("db");
    let o = tessera(&["load", "--db", db.to_str().unwrap(), "t", f.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stderr(&o).contains("flag (Boolean)"), "{}", stderr(&o));
}
