//! Damage to each kind of file of a part is reported as `Error::Corrupt` naming the file,
//! the part and (for column blocks) the column and byte offset: never a panic, never a
//! wrong answer.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Int32Array, RecordBatch, StringArray, TimestampSecondArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use tessera_common::Error;
use tessera_storage::{Store, TableOptions};

const PART: &str = "0000000001_0000000001_0";

/// A table `t` with one part of 5,000 rows (granules of 512) in a fresh directory.
fn make() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let schema: SchemaRef = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int32, false),
        Field::new("url", DataType::Utf8, false),
        Field::new("ts", DataType::Timestamp(TimeUnit::Second, None), false),
    ]));
    let store = Store::open(dir.path()).unwrap();
    let t = store
        .create_table("t", schema.clone(), TableOptions { order_by: vec!["k".into(), "url".into()], granule_rows: 512, ..TableOptions::default() })
        .unwrap();
    let n = 5000;
    let b = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int32Array::from((0..n).map(|i| i / 10).collect::<Vec<i32>>())),
            Arc::new(StringArray::from((0..n).map(|i| format!("http://example.com/{}", i * 7919 % 1000)).collect::<Vec<_>>())),
            Arc::new(TimestampSecondArray::from((0..n).map(|i| 1_373_000_000 + i as i64 * 13).collect::<Vec<i64>>())),
        ],
    )
    .unwrap();
    t.insert(&[b]).unwrap();
    let part = dir.path().join("t").join(PART);
    assert!(part.is_dir());
    (dir, part)
}

/// Opens the store and reads every column; returns the first error.
fn open_and_read(dir: &Path) -> Result<usize, Error> {
    let store = Store::open(dir)?;
    let t = store.table("t").unwrap().snapshot()?;
    let cols = t.columns(&[0, 1, 2])?;
    Ok(cols[0].iter().map(|a| a.len()).sum())
}

fn expect_corrupt(dir: &Path, file: &str, needles: &[&str]) {
    match open_and_read(dir) {
        Err(Error::Corrupt { path, detail }) => {
            assert!(path.ends_with(Path::new(PART).join(file)), "path {} for {file}", path.display());
            assert!(detail.contains(&format!("part {PART}")), "detail {detail:?}");
            for n in needles {
                assert!(detail.contains(n), "detail {detail:?} lacks {n:?}");
            }
        }
        other => panic!("{file}: expected Corrupt, got {other:?}"),
    }
}

fn flip(path: &Path, at: usize) {
    let mut b = std::fs::read(path).unwrap();
    let at = at.min(b.len() - 1);
    b[at] ^= 0x20;
    std::fs::write(path, b).unwrap();
}

fn truncate(path: &Path, by: u64) {
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    let len = f.metadata().unwrap().len();
    f.set_len(len - by).unwrap();
}

#[test]
fn intact_part_reads() {
    let (dir, _) = make();
    assert_eq!(open_and_read(dir.path()).unwrap(), 5000);
}

#[test]
fn flipped_bytes_in_column_blocks_name_column_and_offset() {
    for (file, column) in [("c0.bin", "column k"), ("c1.bin", "column url"), ("c2.bin", "column ts")] {
        let len = std::fs::metadata(make().1.join(file)).unwrap().len() as usize;
        for at in [0, 9, 13, len / 2, len - 1] {
            let (dir, part) = make();
            flip(&part.join(file), at);
            expect_corrupt(dir.path(), file, &[column, "block at byte offset"]);
        }
    }
}

#[test]
fn damaged_index_meta_and_checksum_files_fail_at_open() {
    for file in ["marks.mrk", "primary.idx", "minmax.idx", "bloom.idx", "meta.json", "checksums.txt"] {
        for at in [0usize, 5, 17, 10_000_000] {
            let (dir, part) = make();
            flip(&part.join(file), at);
            expect_corrupt(dir.path(), file, &[]);
        }
    }
}

#[test]
fn truncated_files_fail() {
    for file in ["c0.bin", "c1.bin", "marks.mrk", "primary.idx", "minmax.idx", "bloom.idx", "meta.json"] {
        let (dir, part) = make();
        truncate(&part.join(file), 3);
        expect_corrupt(dir.path(), file, &["size"]);
    }
    let (dir, part) = make();
    truncate(&part.join("checksums.txt"), 5);
    expect_corrupt(dir.path(), "checksums.txt", &[]);
}

#[test]
fn missing_files_fail() {
    for file in ["c1.bin", "marks.mrk", "primary.idx", "minmax.idx", "bloom.idx", "meta.json", "checksums.txt"] {
        let (dir, part) = make();
        std::fs::remove_file(part.join(file)).unwrap();
        expect_corrupt(dir.path(), file, &["missing file"]);
    }
}

#[test]
fn wrong_format_version_is_named() {
    let (dir, part) = make();
    let p = part.join("checksums.txt");
    let now = tessera_storage::FORMAT_VERSION;
    let good = std::fs::read_to_string(&p).unwrap();
    for v in [0, tessera_storage::MIN_FORMAT_VERSION - 1, now + 1] {
        std::fs::write(&p, good.replacen(&format!("tessera part format {now}"), &format!("tessera part format {v}"), 1)).unwrap();
        expect_corrupt(dir.path(), "checksums.txt", &[&format!("unsupported part format version {v}")]);
    }
}

/// Reading a column's non-zero rows (`morsel_sparse`, the sparse WHERE path) never passes a
/// damaged block: a block that is not sparse is left to the whole read, which still checks
/// its checksum, and a damaged sparse block is `Corrupt`, whichever read comes first. Blocks
/// are stored without a codec, so a flipped value byte decodes and only the checksum tells.
#[test]
fn sparse_reads_check_checksums() {
    // `k` (frame of reference) is not sparse, `a` is (1 row in 50 not zero).
    let dir = tempfile::tempdir().unwrap();
    let schema: SchemaRef = Arc::new(Schema::new(vec![Field::new("k", DataType::Int32, false), Field::new("a", DataType::Int32, false)]));
    let store = Store::open(dir.path()).unwrap();
    let opts = TableOptions { order_by: vec!["k".into()], granule_rows: 512, codec: tessera_storage::Codec::None, ..TableOptions::default() };
    let table = store.create_table("t", schema.clone(), opts).unwrap();
    let b = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int32Array::from((0..5000).map(|i| i * 3).collect::<Vec<i32>>())),
            Arc::new(Int32Array::from((0..5000).map(|i| if i % 50 == 3 { i } else { 0 }).collect::<Vec<i32>>())),
        ],
    )
    .unwrap();
    table.insert(&[b]).unwrap();
    drop((table, store));
    let copy = || {
        let to = tempfile::tempdir().unwrap();
        for (from, into) in [(dir.path().join("t"), to.path().join("t")), (dir.path().join("t").join(PART), to.path().join("t").join(PART))] {
            std::fs::create_dir_all(&into).unwrap();
            for e in std::fs::read_dir(&from).unwrap() {
                let e = e.unwrap();
                if e.file_type().unwrap().is_file() {
                    std::fs::copy(e.path(), into.join(e.file_name())).unwrap();
                }
            }
        }
        to
    };
    let block = |c: usize| std::fs::read(dir.path().join("t").join(PART).join(format!("c{c}.bin"))).unwrap();
    assert_eq!((block(0)[9], block(1)[9]), (2, 4), "k frame of reference, a sparse");
    // A value byte of `k`'s first block (past the header, null flag, base and width).
    let d = copy();
    flip(&d.path().join("t").join(PART).join("c0.bin"), 24 + 1 + 16 + 1 + 100);
    let t = Store::open(d.path()).unwrap().table("t").unwrap().snapshot().unwrap();
    assert!((0..t.chunk_lens().len()).all(|m| t.morsel_sparse(0, m).is_none()));
    assert!(matches!(t.columns(&[0]), Err(Error::Corrupt { .. })), "k after a sparse probe");
    // A value of `a`'s first block (its last byte), read sparse first or whole first.
    for sparse_first in [true, false] {
        let d = copy();
        let len = u32::from_le_bytes(block(1)[20..24].try_into().unwrap()) as usize;
        flip(&d.path().join("t").join(PART).join("c1.bin"), 24 + len - 1);
        let t = Store::open(d.path()).unwrap().table("t").unwrap().snapshot().unwrap();
        let sparse = || match t.morsel_sparse(1, 0) {
            Some(Err(Error::Corrupt { detail, .. })) => assert!(detail.contains("column a"), "{detail}"),
            other => panic!("sparse first {sparse_first}: expected Corrupt, got {:?}", other.map(|r| r.map(|(rows, _)| rows.len()))),
        };
        if sparse_first {
            sparse();
        }
        assert!(matches!(t.columns(&[1]), Err(Error::Corrupt { .. })), "sparse first {sparse_first}");
        sparse();
    }
}
