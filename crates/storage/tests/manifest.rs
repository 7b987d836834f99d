//! The table manifest: lost, renamed, copied or replaced part directories and a lost
//! `table.json` are detected at open instead of answering from the remaining parts;
//! unlisted parts are moved to `detached/`; version 1 tables are migrated.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use tessera_common::Error;
use tessera_storage::{Store, TABLE_FORMAT_VERSION, TableOptions};

const P1: &str = "0000000001_0000000001_0";
const P2: &str = "0000000002_0000000002_0";

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false), Field::new("s", DataType::Utf8, true)]))
}

fn batch(first: i64, n: i64) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from((first..first + n).collect::<Vec<_>>())),
            Arc::new(StringArray::from((first..first + n).map(|i| format!("v{i}")).collect::<Vec<_>>())),
        ],
    )
    .unwrap()
}

/// Table `t` with two parts of 2,000 rows each (keys 0..2000 and 2000..4000).
fn make() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let opts = TableOptions { order_by: vec!["k".into()], granule_rows: 256, ..TableOptions::default() };
    let t = store.create_table("t", schema(), opts).unwrap();
    t.insert(&[batch(0, 2000)]).unwrap();
    t.insert(&[batch(2000, 2000)]).unwrap();
    let table = dir.path().join("t");
    (dir, table)
}

/// Rows and the sum of keys of table `t`.
fn count(dir: &Path) -> Result<(usize, i64), Error> {
    let store = Store::open(dir)?;
    let t = store.table("t").ok_or_else(|| Error::UnknownTable("t".into()))?;
    let cols = t.snapshot()?.columns(&[0])?;
    let keys = cols[0].iter().flat_map(|a| {
        use arrow::array::AsArray;
        a.as_primitive::<arrow::datatypes::Int64Type>().values().to_vec()
    });
    Ok(keys.fold((0, 0), |(n, s), k| (n + 1, s + k)))
}

const FULL: (usize, i64) = (4000, 4000 * 3999 / 2);

fn expect_corrupt(dir: &Path, path_end: &Path, needles: &[&str]) {
    match count(dir) {
        Err(Error::Corrupt { path, detail }) => {
            assert!(path.ends_with(path_end), "path {} should end with {}", path.display(), path_end.display());
            for n in needles {
                assert!(detail.contains(n), "detail {detail:?} lacks {n:?}");
            }
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

#[test]
fn intact_table_reads_all_rows_and_the_manifest_lists_its_parts() {
    let (dir, table) = make();
    assert_eq!(count(dir.path()).unwrap(), FULL);
    let m = std::fs::read_to_string(table.join("manifest.txt")).unwrap();
    assert!(m.starts_with("tessera table manifest 1\ntable\t"), "{m}");
    assert!(m.contains(&format!("part\t{P1}\t2000\t")) && m.contains(&format!("part\t{P2}\t2000\t")), "{m}");
    let store = Store::open(dir.path()).unwrap();
    assert!(store.warnings().is_empty());
    assert!(store.table("t").unwrap().detached_parts().unwrap().is_empty());
}

#[test]
fn deleted_part_directory_is_corrupt_naming_table_and_part() {
    let (dir, table) = make();
    std::fs::remove_dir_all(table.join(P1)).unwrap();
    expect_corrupt(dir.path(), &Path::new("t").join(P1), &["table t", P1, "2000 rows", "missing"]);
}

#[test]
fn renamed_part_directory_is_corrupt() {
    let (dir, table) = make();
    std::fs::rename(table.join(P2), table.join("0000000007_0000000007_0")).unwrap();
    expect_corrupt(dir.path(), &Path::new("t").join(P2), &["table t", P2, "missing"]);
    // Nothing was moved while the table is refused.
    assert!(table.join("0000000007_0000000007_0").is_dir());
}

#[test]
fn part_replaced_by_a_copy_of_another_is_corrupt() {
    let (dir, table) = make();
    std::fs::remove_dir_all(table.join(P2)).unwrap();
    copy_dir(&table.join(P1), &table.join(P2));
    expect_corrupt(dir.path(), &Path::new(P2).join("checksums.txt"), &["table t", P2, "manifest.txt records"]);
}

#[test]
fn copied_part_directory_is_detached_not_counted() {
    let (dir, table) = make();
    let copy = "0000000003_0000000003_0";
    copy_dir(&table.join(P1), &table.join(copy));
    {
        let store = Store::open(dir.path()).unwrap();
        let w = store.warnings();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains(copy) && w[0].contains("detached"), "{w:?}");
        let t = store.table("t").unwrap();
        assert_eq!(t.detached_parts().unwrap(), vec![format!("unexpected_{copy}")]);
        assert_eq!(t.num_rows(), 4000);
        // The next insert takes number 3 again: no clash with the detached copy.
        t.insert(&[batch(4000, 10)]).unwrap();
        assert_eq!(t.num_rows(), 4010);
    }
    assert_eq!(count(dir.path()).unwrap().0, 4010);
    let store = Store::open(dir.path()).unwrap();
    assert!(store.warnings().is_empty());
    // A second copy under the same name goes to its own detached directory.
    copy_dir(&table.join(P1), &table.join("0000000009_0000000009_0"));
    drop(store);
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.table("t").unwrap().detached_parts().unwrap().len(), 2);
}

#[test]
fn deleted_table_json_is_corrupt_naming_the_directory() {
    let (dir, table) = make();
    std::fs::remove_file(table.join("table.json")).unwrap();
    match Store::open(dir.path()) {
        Err(Error::Corrupt { path, detail }) => {
            assert_eq!(path, table);
            assert!(detail.contains("table.json is missing") && detail.contains("2 part(s)"), "{detail}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

#[test]
fn deleted_or_damaged_manifest_is_corrupt() {
    let (dir, table) = make();
    std::fs::remove_file(table.join("manifest.txt")).unwrap();
    expect_corrupt(dir.path(), &Path::new("t").join("manifest.txt"), &["table t", "missing", "2 part directories"]);
    let (dir, table) = make();
    let m = std::fs::read_to_string(table.join("manifest.txt")).unwrap();
    // Dropping a part line (a hand edit) breaks the manifest's own checksum.
    let edited: String = m.lines().filter(|l| !l.contains(P1)).map(|l| format!("{l}\n")).collect();
    std::fs::write(table.join("manifest.txt"), edited).unwrap();
    expect_corrupt(dir.path(), &Path::new("t").join("manifest.txt"), &["table t", "checksum mismatch"]);
}

#[test]
fn edited_table_json_is_corrupt() {
    let (dir, table) = make();
    let p = table.join("table.json");
    let text = std::fs::read_to_string(&p).unwrap().replace("\"granule_rows\": 256", "\"granule_rows\": 512");
    std::fs::write(&p, text).unwrap();
    expect_corrupt(dir.path(), &Path::new("t").join("table.json"), &["table t", "table.json was modified"]);
}

/// Rewrites `table.json` as format version `v` (and optionally drops the manifest).
fn set_version(table: &Path, v: u32, drop_manifest: bool) {
    let p = table.join("table.json");
    let text = std::fs::read_to_string(&p).unwrap();
    let want = format!("\"format_version\": {TABLE_FORMAT_VERSION}");
    assert!(text.contains(&want), "{text}");
    std::fs::write(&p, text.replace(&want, &format!("\"format_version\": {v}"))).unwrap();
    if drop_manifest {
        std::fs::remove_file(table.join("manifest.txt")).unwrap();
    }
}

#[test]
fn version_1_table_is_migrated() {
    let (dir, table) = make();
    set_version(&table, 1, true);
    {
        let store = Store::open(dir.path()).unwrap();
        let w = store.warnings();
        assert!(w.len() == 1 && w[0].contains("migrated from table format 1 to 2"), "{w:?}");
        assert_eq!(store.table("t").unwrap().num_rows(), 4000);
    }
    assert!(table.join("manifest.txt").is_file());
    assert!(std::fs::read_to_string(table.join("table.json")).unwrap().contains("\"format_version\": 2"));
    let store = Store::open(dir.path()).unwrap();
    assert!(store.warnings().is_empty());
    drop(store);
    assert_eq!(count(dir.path()).unwrap(), FULL);
}

#[test]
fn interrupted_migration_resumes_and_a_downgrade_cannot_bypass_the_manifest() {
    // table.json still says 1, the manifest was written: a crash mid-migration.
    let (dir, table) = make();
    set_version(&table, 1, false);
    assert_eq!(count(dir.path()).unwrap(), FULL);
    assert!(std::fs::read_to_string(table.join("table.json")).unwrap().contains("\"format_version\": 2"));
    // Version 1 with a part missing from a manifest that lists it: still corruption.
    let (dir, table) = make();
    set_version(&table, 1, false);
    std::fs::remove_dir_all(table.join(P2)).unwrap();
    expect_corrupt(dir.path(), &Path::new("t").join(P2), &["table t", "missing"]);
}

#[test]
fn future_version_is_refused() {
    let (dir, table) = make();
    set_version(&table, 3, false);
    expect_corrupt(dir.path(), &Path::new("t").join("table.json"), &["unsupported format version 3"]);
}

#[test]
fn merge_commits_through_the_manifest() {
    let (dir, table) = make();
    {
        let store = Store::open(dir.path()).unwrap();
        assert!(store.table("t").unwrap().optimize().unwrap());
    }
    let m = std::fs::read_to_string(table.join("manifest.txt")).unwrap();
    assert!(m.contains("part\t0000000001_0000000002_1\t4000\t") && !m.contains(P1), "{m}");
    // A crash after the manifest write but before the inputs were deleted: they come back
    // and are removed at open (covered by the merged part), with a warning.
    copy_dir(&table.join("0000000001_0000000002_1"), &table.join(P1));
    let store = Store::open(dir.path()).unwrap();
    let w = store.warnings();
    assert!(w.len() == 1 && w[0].contains(&format!("removed part directory {P1}")) && w[0].contains("covered by part 0000000001_0000000002_1"), "{w:?}");
    assert!(!table.join(P1).exists());
    drop(store);
    assert_eq!(count(dir.path()).unwrap(), FULL);
}

#[test]
fn read_only_open_of_a_missing_directory_fails_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no/such/dir");
    match Store::open_existing(&missing) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("no/such/dir") && m.contains("does not exist"), "{m}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    assert!(!dir.path().join("no").exists());
}
