//! Parts of every format version this build reads ([`tessera_storage::MIN_FORMAT_VERSION`]
//! to [`tessera_storage::FORMAT_VERSION`]) read back the rows they were written with.

use std::path::Path;

use arrow::array::AsArray;
use arrow::datatypes::UInt64Type;
use tessera_storage::Store;

/// Copies the directory tree `from` into `to`.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// `tests/fixtures/part-format-1` was written by a build of format 1 (string blocks with
/// u32 offsets): `SELECT number AS n, toString(number * 7919) AS s, concat('http://example.com/',
/// toString(number % 13)) AS u FROM numbers(3000)` inserted into `t (n UInt64, s String, u
/// String)`. This build reads its rows, and a part it writes from them is format 2 (short
/// strings stored with lengths) and reads back the same.
#[test]
fn format_1_parts_read_back() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/part-format-1"), dir.path());
    let check = |dir: &Path, version: u32| {
        let store = Store::open(dir).unwrap();
        let t = store.table("t").unwrap().snapshot().unwrap();
        let cols = t.columns(&[0, 1, 2]).unwrap();
        let mut row = 0u64;
        for ((n, s), u) in cols[0].iter().zip(cols[1].iter()).zip(cols[2].iter()) {
            let (n, s, u) = (n.as_primitive::<UInt64Type>(), s.as_string::<i32>(), u.as_string::<i32>());
            for i in 0..n.len() {
                assert_eq!(n.value(i), row, "format {version}");
                assert_eq!(s.value(i), (row * 7919).to_string(), "format {version}, row {row}");
                assert_eq!(u.value(i), format!("http://example.com/{}", row % 13), "format {version}, row {row}");
                row += 1;
            }
        }
        assert_eq!(row, 3000, "format {version}");
        let meta = std::fs::read_to_string(dir.join("t/0000000001_0000000001_0/meta.json")).unwrap();
        assert!(meta.contains(&format!("\"format_version\": {version}")), "{meta}");
        // Column `s`'s first block: plain (u32 offsets, encoding 0) in format 1, sized
        // (encoding 3) since format 2. Byte 9 of a block is its encoding.
        let block = std::fs::read(dir.join("t/0000000001_0000000001_0/c1.bin")).unwrap();
        assert_eq!(block[9], if version == 1 { 0 } else { 3 }, "format {version}");
        (t, cols)
    };
    let (t, cols) = check(dir.path(), 1);
    // A format-2 part beside the format-1 one, then both merged into one format-2 part.
    {
        let store = Store::open(dir.path()).unwrap();
        let table = store.table("t").unwrap();
        let more = arrow::array::RecordBatch::try_new(
            t.schema().clone(),
            vec![
                std::sync::Arc::new(arrow::array::UInt64Array::from(vec![Some(7u64)])),
                std::sync::Arc::new(arrow::array::StringArray::from(vec![Some("x")])),
                std::sync::Arc::new(arrow::array::StringArray::from(vec![Some("y")])),
            ],
        )
        .unwrap();
        table.insert(&[more]).unwrap();
        assert!(table.optimize().unwrap());
        let merged = table.snapshot().unwrap();
        let cols = merged.columns(&[0, 1, 2]).unwrap();
        let (mut n, mut last) = (0, None);
        for ((a, b), c) in cols[0].iter().zip(cols[1].iter()).zip(cols[2].iter()) {
            let (a, b, c) = (a.as_primitive::<UInt64Type>(), b.as_string::<i32>(), c.as_string::<i32>());
            for i in 0..a.len() {
                let want = if n < 3000 { (n as u64, (n as u64 * 7919).to_string(), format!("http://example.com/{}", n % 13)) } else { (7, "x".into(), "y".into()) };
                assert_eq!((a.value(i), b.value(i).to_string(), c.value(i).to_string()), want, "merged row {n}");
                n += 1;
                last = Some(a.value(i));
            }
        }
        assert_eq!((n, last), (3001, Some(7)));
    }
    let schema = t.schema().clone();
    let batches: Vec<arrow::array::RecordBatch> = (0..cols[0].len())
        .map(|c| arrow::array::RecordBatch::try_new(schema.clone(), vec![cols[0][c].clone(), cols[1][c].clone(), cols[2][c].clone()]).unwrap())
        .collect();
    let again = tempfile::tempdir().unwrap();
    let store = Store::open(again.path()).unwrap();
    let t2 = store.create_table("t", schema, Default::default()).unwrap();
    t2.insert(&batches).unwrap();
    check(again.path(), tessera_storage::FORMAT_VERSION);
}

/// `tests/fixtures/part-format-2` was written by a build of format 2 (integer blocks plain
/// or frame-of-reference): `tessera load --order-by n --granule-rows 1024 t` of a Parquet
/// file of `n UInt64 = 0..3000, a Int16 = if(n % 97 = 5, n % 7 + 1, 0)` (31 non-zero).
/// This build reads it; a part it writes from the same rows is format 3, `a` sparse
/// (encoding 4); both merged give the rows back.
#[test]
fn format_2_parts_read_back() {
    use arrow::datatypes::Int16Type;
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/part-format-2"), dir.path());
    let want = |n: u64| if n % 97 == 5 { (n % 7 + 1) as i16 } else { 0 };
    let rows_of = |t: &tessera_common::Table| {
        let cols = t.columns(&[0, 1]).unwrap();
        let mut rows = Vec::new();
        for (n, a) in cols[0].iter().zip(cols[1].iter()) {
            let (n, a) = (n.as_primitive::<UInt64Type>(), a.as_primitive::<Int16Type>());
            rows.extend((0..n.len()).map(|i| (n.value(i), a.value(i))));
        }
        rows
    };
    let part = |dir: &Path| {
        let t = dir.join("t");
        let mut parts: Vec<_> = std::fs::read_dir(&t).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir() && !p.ends_with("detached")).collect();
        parts.sort();
        parts
    };
    let store = Store::open(dir.path()).unwrap();
    let t = store.table("t").unwrap();
    let old = rows_of(&t.snapshot().unwrap());
    assert_eq!(old, (0..3000).map(|n| (n, want(n))).collect::<Vec<_>>());
    let p1 = part(dir.path()).pop().unwrap();
    assert!(std::fs::read_to_string(p1.join("meta.json")).unwrap().contains("\"format_version\": 2"));
    assert_eq!(std::fs::read(p1.join("c1.bin")).unwrap()[9], 2, "frame of reference in format 2");
    // The same rows again, written by this build.
    let batch = arrow::array::RecordBatch::try_new(
        t.snapshot().unwrap().schema().clone(),
        vec![
            std::sync::Arc::new(arrow::array::UInt64Array::from((0..3000).collect::<Vec<u64>>())),
            std::sync::Arc::new(arrow::array::Int16Array::from((0..3000).map(want).collect::<Vec<i16>>())),
        ],
    )
    .unwrap();
    t.insert(&[batch]).unwrap();
    let p2 = part(dir.path()).pop().unwrap();
    assert!(std::fs::read_to_string(p2.join("meta.json")).unwrap().contains(&format!("\"format_version\": {}", tessera_storage::FORMAT_VERSION)));
    assert_eq!(std::fs::read(p2.join("c1.bin")).unwrap()[9], 4, "sparse since format 3");
    assert!(t.optimize().unwrap());
    let mut merged = rows_of(&t.snapshot().unwrap());
    merged.sort_unstable();
    let mut twice: Vec<_> = (0..3000).flat_map(|n| [(n, want(n)); 2]).collect();
    twice.sort_unstable();
    assert_eq!(merged, twice);
}
