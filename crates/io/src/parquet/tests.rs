use super::*;
use arrow::array::{
    AsArray, BinaryArray, BinaryViewArray, BooleanArray, Date32Array, Date64Array, DictionaryArray,
    Float32Array, Float64Array, Int8Array, Int16Array, Int32Array, Int64Array, LargeBinaryArray,
    LargeStringArray, ListArray, RecordBatch, StringArray, StringViewArray,
    TimestampMicrosecondArray, TimestampMillisecondArray, TimestampNanosecondArray,
    TimestampSecondArray, UInt8Array, UInt16Array, UInt32Array, UInt64Array,
};
use arrow::datatypes::{
    DataType, Date32Type, Int8Type, Int16Type, Int32Type, Int64Type, TimeUnit, TimestampSecondType,
};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

const TS: DataType = DataType::Timestamp(TimeUnit::Second, None);

/// Writes `batch` to `dir/name` with row groups of at most `row_group_rows` rows.
fn write(dir: &Path, name: &str, batch: &RecordBatch, row_group_rows: usize) -> PathBuf {
    write_with(dir, name, batch, row_group_rows, Compression::UNCOMPRESSED)
}

fn write_with(
    dir: &Path,
    name: &str,
    batch: &RecordBatch,
    row_group_rows: usize,
    compression: Compression,
) -> PathBuf {
    let path = dir.join(name);
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(row_group_rows))
        .set_compression(compression)
        .build();
    let file = File::create(&path).unwrap();
    let mut w = ArrowWriter::try_new(file, batch.schema(), Some(props)).unwrap();
    w.write(batch).unwrap();
    w.close().unwrap();
    path
}

/// A batch of nullable columns (OPTIONAL in the Parquet file).
fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
    RecordBatch::try_from_iter_with_nullable(columns.into_iter().map(|(n, a)| (n, a, true)))
        .unwrap()
}

/// The loaded column `c` of `t`, all chunks concatenated.
fn column(t: &Table, c: usize) -> ArrayRef {
    let chunks = t.columns(&[c]).unwrap().remove(0);
    let refs: Vec<&dyn Array> = chunks.iter().map(|a| a.as_ref()).collect();
    arrow::compute::concat(&refs).unwrap()
}

fn is_corrupt(e: &Error, needle: &str) -> bool {
    matches!(e, Error::Corrupt { detail, .. } if detail.contains(needle))
}

#[test]
fn native_type_mapping() {
    let dir = tempfile::tempdir().unwrap();
    let ms =
        TimestampMillisecondArray::from(vec![-1_500, 1_000, 1_999]).with_timezone("Europe/Moscow");
    let b = batch(vec![
        ("i8", Arc::new(Int8Array::from(vec![-1, 0, 1])) as ArrayRef),
        ("i16", Arc::new(Int16Array::from(vec![-300, 0, 300]))),
        (
            "i32",
            Arc::new(Int32Array::from(vec![i32::MIN, 0, i32::MAX])),
        ),
        (
            "i64",
            Arc::new(Int64Array::from(vec![i64::MIN, 0, i64::MAX])),
        ),
        ("u8", Arc::new(UInt8Array::from(vec![0, 1, 255]))),
        ("u16", Arc::new(UInt16Array::from(vec![0, 1, 65_535]))),
        ("u32", Arc::new(UInt32Array::from(vec![0, 1, u32::MAX]))),
        ("u64", Arc::new(UInt64Array::from(vec![0, 1, u64::MAX]))),
        (
            "f32",
            Arc::new(Float32Array::from(vec![0.5, -1.0, f32::INFINITY])),
        ),
        ("f64", Arc::new(Float64Array::from(vec![0.25, -2.0, 1e300]))),
        ("d32", Arc::new(Date32Array::from(vec![-1, 0, 15_900]))),
        ("d64", Arc::new(Date64Array::from(vec![-1, 0, 86_400_000]))),
        ("s", Arc::new(StringArray::from(vec!["a", "", "ünï"]))),
        (
            "ls",
            Arc::new(LargeStringArray::from(vec!["x", "yy", "zzz"])),
        ),
        (
            "sv",
            Arc::new(StringViewArray::from(vec![
                "short",
                "a string longer than twelve",
                "",
            ])),
        ),
        (
            "b",
            Arc::new(BinaryArray::from(vec![&b"\xff"[..], b"", b"ok"])),
        ),
        (
            "lb",
            Arc::new(LargeBinaryArray::from(vec![&b"\x00"[..], b"\xc3", b""])),
        ),
        (
            "bv",
            Arc::new(BinaryViewArray::from(vec![&b"\x80"[..], b"view", b""])),
        ),
        ("ts_s", Arc::new(TimestampSecondArray::from(vec![-1, 0, 1]))),
        ("ts_ms", Arc::new(ms)),
        (
            "ts_us",
            Arc::new(TimestampMicrosecondArray::from(vec![
                -1, 1_000_000, 2_500_000,
            ])),
        ),
        (
            "ts_ns",
            Arc::new(TimestampNanosecondArray::from(vec![-1, 0, 3_000_000_001])),
        ),
        (
            "dict",
            Arc::new(DictionaryArray::<Int32Type>::from_iter(["p", "q", "p"])),
        ),
    ]);
    let path = write(dir.path(), "all.parquet", &b, 2);
    let t = open_parquet("all", &path, None).unwrap();
    let types: Vec<String> = t
        .schema()
        .fields()
        .iter()
        .map(|f| format!("{}:{}", f.name(), f.data_type()))
        .collect();
    assert_eq!(
        types.join(" "),
        "i8:Int8 i16:Int16 i32:Int32 i64:Int64 u8:UInt8 u16:UInt16 u32:UInt32 u64:UInt64 \
         f32:Float32 f64:Float64 d32:Date32 d64:Date32 s:Utf8 ls:Utf8 sv:Utf8 b:Binary \
         lb:Binary bv:Binary ts_s:Timestamp(s) ts_ms:Timestamp(s) ts_us:Timestamp(s) \
         ts_ns:Timestamp(s) dict:Utf8"
    );
    assert_eq!(t.num_rows(), 3);
    assert_eq!(t.chunk_lens(), &[2, 1]);
    t.load_all().unwrap();
    for c in 0..13 {
        // Same types: values as written (Date64 floored to days below).
        if c != 11 {
            assert_eq!(column(&t, c).as_ref(), b.column(c).as_ref(), "column {c}");
        }
    }
    assert_eq!(
        column(&t, 11)
            .as_primitive::<Date32Type>()
            .values()
            .as_ref(),
        &[-1, 0, 1]
    );
    let strs = |c| {
        column(&t, c)
            .as_string::<i32>()
            .iter()
            .map(|s| s.unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(strs(13), ["x", "yy", "zzz"]);
    assert_eq!(strs(14), ["short", "a string longer than twelve", ""]);
    assert_eq!(strs(22), ["p", "q", "p"]);
    let bins = |c| {
        column(&t, c)
            .as_binary::<i32>()
            .iter()
            .map(|s| s.unwrap().to_vec())
            .collect::<Vec<_>>()
    };
    assert_eq!(bins(15), [b"\xff".to_vec(), vec![], b"ok".to_vec()]);
    assert_eq!(bins(16), [b"\x00".to_vec(), b"\xc3".to_vec(), vec![]]);
    assert_eq!(bins(17), [b"\x80".to_vec(), b"view".to_vec(), vec![]]);
    let secs = |c| {
        column(&t, c)
            .as_primitive::<TimestampSecondType>()
            .values()
            .to_vec()
    };
    assert_eq!(secs(18), [-1, 0, 1]);
    assert_eq!(
        secs(19),
        [-2, 1, 1],
        "ms floored, time zone dropped (UTC instants)"
    );
    assert_eq!(secs(20), [-1, 1, 2]);
    assert_eq!(secs(21), [-1, 0, 3]);
}

#[test]
fn chunks_align_across_row_groups_larger_than_a_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let n = 220_000;
    let b = batch(vec![
        (
            "id",
            Arc::new(Int64Array::from_iter_values(0..n as i64)) as ArrayRef,
        ),
        (
            "small",
            Arc::new(Int8Array::from_iter_values((0..n).map(|i| (i % 100) as i8))),
        ),
        (
            "s",
            Arc::new(StringArray::from_iter_values(
                (0..n).map(|i| format!("v{i}")),
            )),
        ),
    ]);
    let path = write(dir.path(), "big.parquet", &b, 150_000);
    for granularity in [
        LoadGranularity::PerColumnChunk,
        LoadGranularity::PerRowGroup,
    ] {
        let source = ParquetSource::open(&path, None)
            .unwrap()
            .with_granularity(granularity);
        assert_eq!(
            source.chunk_lens(),
            &[65_536, 65_536, 18_928, 65_536, 4_464]
        );
        let cols = source.load_columns(&[2, 0, 1, 0]).unwrap();
        assert_eq!(cols.len(), 4);
        for (k, &len) in source.chunk_lens().iter().enumerate() {
            let lens: Vec<usize> = cols.iter().map(|c| c[k].len()).collect();
            assert!(
                lens.iter().all(|&l| l == len),
                "{granularity:?} chunk {k}: {lens:?}"
            );
        }
        let mut row = 0i64;
        // cols = [s, id, small, id]
        for ((ids, small), s) in cols[1].iter().zip(&cols[2]).zip(&cols[0]) {
            let ids = ids.as_primitive::<Int64Type>();
            let small = small.as_primitive::<Int8Type>();
            let s = s.as_string::<i32>();
            for i in 0..ids.len() {
                assert_eq!(ids.value(i), row);
                assert_eq!(small.value(i) as i64, row % 100);
                assert_eq!(s.value(i), format!("v{row}"));
                row += 1;
            }
        }
        assert_eq!(row, n as i64);
    }
}

/// Streaming reads (a row selection per row group, pages found by the offset index or
/// skipped by their headers without one) give exactly the chunks of a whole-column read,
/// for any subset of chunks and columns, NULLs, dictionary and plain strings.
#[test]
fn morsel_reads_equal_whole_column_reads() {
    let dir = tempfile::tempdir().unwrap();
    let n = 330_000;
    let b = batch(vec![
        ("id", Arc::new(Int64Array::from_iter_values(0..n as i64)) as ArrayRef),
        ("opt", Arc::new(Int32Array::from_iter((0..n).map(|i| (i % 7 != 0).then_some(i as i32))))),
        ("dict", Arc::new(StringArray::from_iter_values((0..n).map(|i| format!("k{}", i % 50))))),
        ("uniq", Arc::new(StringArray::from_iter((0..n).map(|i| (i % 11 != 0).then(|| format!("value-{i}")))))),
    ]);
    for offset_index in [true, false] {
        let path = dir.path().join(format!("m-{offset_index}.parquet"));
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(140_000))
            .set_data_page_row_count_limit(5_000)
            .set_write_batch_size(1_000)
            .set_offset_index_disabled(!offset_index)
            .set_compression(Compression::ZSTD(Default::default()))
            .build();
        let mut w = ArrowWriter::try_new(File::create(&path).unwrap(), b.schema(), Some(props)).unwrap();
        w.write(&b).unwrap();
        w.close().unwrap();
        let source = ParquetSource::open(&path, None).unwrap().streaming(true);
        assert!(source.reads_morsels());
        assert_eq!(source.chunk_lens(), &[65_536, 65_536, 8_928, 65_536, 65_536, 8_928, 50_000]);
        let all: Vec<usize> = (0..4).collect();
        let whole = source.load_columns(&all).unwrap();
        let subsets: [&[usize]; 6] = [&[0], &[2], &[6], &[1, 3, 4], &[0, 1, 2, 3, 4, 5, 6], &[2, 5]];
        for morsels in subsets {
            for cols in [vec![0], vec![3, 1], all.clone()] {
                let got = source.load_morsels(&cols, morsels).unwrap();
                assert_eq!(got.len(), cols.len());
                for (i, &c) in cols.iter().enumerate() {
                    assert_eq!(got[i].len(), morsels.len());
                    for (j, &m) in morsels.iter().enumerate() {
                        assert_eq!(&got[i][j], &whole[c][m], "offset index {offset_index}, column {c}, morsel {m}");
                    }
                }
            }
        }
        let e = source.load_morsels(&[0], &[7]).unwrap_err();
        assert!(matches!(e, Error::Internal(_)), "{e}");
        let e = source.load_morsels(&[0], &[3, 1]).unwrap_err();
        assert!(matches!(e, Error::Internal(_)), "{e}");
        // A streaming table keeps nothing: every morsel read goes to the file.
        let t = open_parquet_streaming("t", &path, None).unwrap();
        assert!(t.streams());
        let got = t.morsel_columns(&[1], &[4]).unwrap();
        assert_eq!(&got[0][0], &whole[1][4]);
        assert!(t.resident_columns(&[1]).iter().all(Option::is_none));
    }
}

/// MIN/MAX from the row groups' statistics: one entry per row group, NULL for an all-NULL
/// row group, converted to the table type (Int64 seconds -> timestamp); refused (`None`)
/// for floats, truncated string statistics and a file written without statistics.
#[test]
fn min_max_from_row_group_statistics() {
    use parquet::file::properties::EnabledStatistics;
    let dir = tempfile::tempdir().unwrap();
    let n = 30_000;
    let b = batch(vec![
        ("i", Arc::new(Int64Array::from_iter_values((0..n).map(|i| (i * 7919) % 10_007 - 5_000))) as ArrayRef),
        ("n", Arc::new(Int32Array::from_iter((0..n).map(|i| (i >= 10_000).then_some(-(i as i32)))))),
        ("s", Arc::new(StringArray::from_iter_values((0..n).map(|i| format!("k{:05}", (i * 31) % 20_011))))),
        ("long", Arc::new(StringArray::from_iter_values((0..n).map(|i| format!("{}{i}", "x".repeat(100)))))),
        ("f", Arc::new(Float64Array::from_iter_values((0..n).map(|i| i as f64)))),
        ("ts", Arc::new(Int64Array::from_iter_values((0..n).map(|i| 1_370_000_000 + i * 3)))),
    ]);
    let write_props = |props: WriterProperties, name: &str| {
        let path = dir.path().join(name);
        let mut w = ArrowWriter::try_new(File::create(&path).unwrap(), b.schema(), Some(props)).unwrap();
        w.write(&b).unwrap();
        w.close().unwrap();
        path
    };
    let path = write_props(
        WriterProperties::builder()
            .set_max_row_group_row_count(Some(10_000))
            .set_statistics_truncate_length(Some(16))
            .build(),
        "stats.parquet",
    );
    let target = Schema::new(vec![Field::new("ts", TS, true)]);
    let source = ParquetSource::open(&path, None).unwrap();
    let typed = ParquetSource::open(&path, Some(&target)).unwrap();
    let whole = source.load_columns(&[0, 1, 2]).unwrap();
    // Row group g holds chunks g (10,000 rows each < CHUNK_ROWS).
    for (c, col) in whole.iter().enumerate() {
        let (lo, hi) = source.min_max(c).unwrap();
        assert_eq!((lo.len(), hi.len()), (3, 3));
        for (g, chunk) in col.iter().enumerate() {
            if c == 2 {
                let s = chunk.as_string::<i32>();
                assert_eq!(lo.as_string::<i32>().value(g), arrow::compute::min_string(s).unwrap());
                assert_eq!(hi.as_string::<i32>().value(g), arrow::compute::max_string(s).unwrap());
                continue;
            }
            let lo64 = arrow::compute::cast(&lo, &DataType::Int64).unwrap();
            let hi64 = arrow::compute::cast(&hi, &DataType::Int64).unwrap();
            let c64 = arrow::compute::cast(chunk, &DataType::Int64).unwrap();
            let want_lo = arrow::compute::min(c64.as_primitive::<Int64Type>());
            let want_hi = arrow::compute::max(c64.as_primitive::<Int64Type>());
            assert_eq!(lo64.as_primitive::<Int64Type>().is_valid(g).then(|| lo64.as_primitive::<Int64Type>().value(g)), want_lo, "column {c} row group {g}");
            assert_eq!(hi64.as_primitive::<Int64Type>().is_valid(g).then(|| hi64.as_primitive::<Int64Type>().value(g)), want_hi, "column {c} row group {g}");
        }
    }
    // Column "n" is all NULL in row group 0.
    assert!(source.min_max(1).unwrap().0.is_null(0));
    assert!(source.min_max(3).is_none(), "truncated statistics");
    assert!(source.min_max(4).is_none(), "floats");
    let (lo, hi) = typed.min_max(5).unwrap();
    assert_eq!(lo.data_type(), &TS);
    assert_eq!(lo.as_primitive::<TimestampSecondType>().value(0), 1_370_000_000);
    assert_eq!(hi.as_primitive::<TimestampSecondType>().value(2), 1_370_000_000 + (n - 1) * 3);
    let bare = write_props(
        WriterProperties::builder().set_statistics_enabled(EnabledStatistics::None).build(),
        "nostats.parquet",
    );
    let source = ParquetSource::open(&bare, None).unwrap();
    assert!((0..6).all(|c| source.min_max(c).is_none()), "no statistics");
}

#[test]
fn columns_are_loaded_lazily() {
    let dir = tempfile::tempdir().unwrap();
    let b = batch(vec![
        (
            "a",
            Arc::new(Int64Array::from_iter_values(0..1000)) as ArrayRef,
        ),
        (
            "b",
            Arc::new(StringArray::from_iter_values(
                (0..1000).map(|i| format!("{i:0>100}")),
            )),
        ),
        ("c", Arc::new(Int32Array::from_iter_values(0..1000))),
    ]);
    let path = write(dir.path(), "lazy.parquet", &b, 300);
    let t = open_parquet("lazy", &path, None).unwrap();
    assert_eq!(t.memory_size(), 0, "open reads no column");
    let c = t.columns(&[2]).unwrap();
    let after_c = t.memory_size();
    assert!(
        after_c > 0 && after_c < 50_000,
        "only column c is in memory: {after_c} bytes"
    );
    assert_eq!(c[0].len(), 4);
    assert_eq!(c[0][3].as_primitive::<Int32Type>().value(99), 999);
    t.columns(&[1]).unwrap();
    assert!(t.memory_size() > after_c + 100_000);
}

/// A file laid out like ClickBench's hits.parquet / hits_N.parquet, read with a target
/// schema like create.sql's.
#[test]
fn target_schema_conversions() {
    let dir = tempfile::tempdir().unwrap();
    let b = batch(vec![
        (
            "WatchID",
            Arc::new(Int64Array::from(vec![1, -2])) as ArrayRef,
        ),
        ("JavaEnable", Arc::new(Int64Array::from(vec![0, 1]))),
        (
            "Title",
            Arc::new(BinaryArray::from(vec![&b"caf\xe9"[..], b"ok"])),
        ),
        (
            "EventTime",
            Arc::new(Int64Array::from(vec![1_373_846_400, 0])),
        ),
        ("EventDate", Arc::new(UInt16Array::from(vec![15_901, 0]))),
        ("CounterID", Arc::new(Int16Array::from(vec![62, -1]))),
        ("UserID", Arc::new(Int32Array::from(vec![Some(7), Some(8)]))),
        (
            "ClientEventTime",
            Arc::new(UInt32Array::from(vec![4_000_000_000, 1])),
        ),
        ("LocalEventDate", Arc::new(Int16Array::from(vec![-1, 2]))),
        ("URL", Arc::new(StringArray::from(vec!["http://a", "b"]))),
        ("Extra", Arc::new(UInt8Array::from(vec![5, 6]))),
    ]);
    let path = write(dir.path(), "hits.parquet", &b, 1);
    let target = Arc::new(Schema::new(vec![
        Field::new("URL", DataType::Utf8, false),
        Field::new("watchid", DataType::Int64, false),
        Field::new("JavaEnable", DataType::Int16, false),
        Field::new("Title", DataType::Utf8, false),
        Field::new("EventTime", TS, false),
        Field::new("EventDate", DataType::Date32, false),
        Field::new("CounterID", DataType::Int32, false),
        Field::new("UserID", DataType::Int64, false),
        Field::new("ClientEventTime", TS, false),
        Field::new("LocalEventDate", DataType::Date32, true),
    ]));
    let t = open_parquet("hits", &path, Some(target)).unwrap();
    let types: Vec<String> = t
        .schema()
        .fields()
        .iter()
        .map(|f| {
            format!(
                "{}:{}{}",
                f.name(),
                f.data_type(),
                if f.is_nullable() { "?" } else { "" }
            )
        })
        .collect();
    assert_eq!(
        types.join(" "),
        "WatchID:Int64 JavaEnable:Int16 Title:Binary EventTime:Timestamp(s) EventDate:Date32 \
         CounterID:Int32 UserID:Int64 ClientEventTime:Timestamp(s) LocalEventDate:Date32? URL:Utf8 \
         Extra:UInt8?",
        "file order, file names, target types; Binary stays Binary; extra column kept"
    );
    t.load_all().unwrap();
    assert_eq!(
        column(&t, 1).as_primitive::<Int16Type>().values().as_ref(),
        &[0, 1]
    );
    assert_eq!(column(&t, 2).as_binary::<i32>().value(0), b"caf\xe9");
    assert_eq!(
        column(&t, 3)
            .as_primitive::<TimestampSecondType>()
            .values()
            .as_ref(),
        &[1_373_846_400, 0]
    );
    assert_eq!(
        column(&t, 4).as_primitive::<Date32Type>().values().as_ref(),
        &[15_901, 0]
    );
    assert_eq!(
        column(&t, 5).as_primitive::<Int32Type>().values().as_ref(),
        &[62, -1]
    );
    assert_eq!(
        column(&t, 7)
            .as_primitive::<TimestampSecondType>()
            .values()
            .as_ref(),
        &[4_000_000_000, 1]
    );
    assert_eq!(
        column(&t, 8).as_primitive::<Date32Type>().values().as_ref(),
        &[-1, 2]
    );
    assert_eq!(
        column(&t, 10)
            .as_primitive::<arrow::datatypes::UInt8Type>()
            .values()
            .as_ref(),
        &[5, 6]
    );
    // Nullable in the file, NOT NULL in the target: no validity buffer left.
    for chunk in t.columns(&[6]).unwrap()[0].iter() {
        assert!(chunk.nulls().is_none());
    }
}

#[test]
fn target_errors() {
    let dir = tempfile::tempdir().unwrap();
    let b = batch(vec![
        (
            "big",
            Arc::new(Int64Array::from(vec![1, 2, 40_000])) as ArrayRef,
        ),
        ("s", Arc::new(StringArray::from(vec!["a", "b", "c"]))),
        (
            "n",
            Arc::new(Int32Array::from(vec![Some(1), None, Some(3)])),
        ),
    ]);
    let path = write(dir.path(), "t.parquet", &b, 2);
    let target = |fields: Vec<Field>| Some(Arc::new(Schema::new(fields)));

    let e = open_parquet(
        "t",
        &path,
        target(vec![Field::new("nope", DataType::Int32, false)]),
    )
    .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("no column nope") && m.contains("the file has:")),
        "{e}"
    );

    let e = open_parquet(
        "t",
        &path,
        target(vec![Field::new("s", DataType::Int32, false)]),
    )
    .unwrap_err();
    assert!(
        is_corrupt(
            &e,
            "column s of type Utf8 cannot be converted to target type Int32"
        ),
        "{e}"
    );

    let e = open_parquet(
        "t",
        &path,
        target(vec![Field::new("s", DataType::Boolean, false)]),
    )
    .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");

    // Overflow is found when the column is read, naming file, column and row group.
    let t = open_parquet(
        "t",
        &path,
        target(vec![Field::new("big", DataType::Int16, false)]),
    )
    .unwrap();
    assert_eq!(t.schema().field(0).data_type(), &DataType::Int16);
    let e = t.columns(&[0]).unwrap_err();
    assert!(is_corrupt(&e, "row group 1, column big"), "{e}");
    assert!(e.to_string().contains("t.parquet"), "{e}");
    assert!(t.columns(&[1]).is_ok(), "other columns still load");

    let t = open_parquet(
        "t",
        &path,
        target(vec![Field::new("n", DataType::Int32, false)]),
    )
    .unwrap();
    let e = t.columns(&[2]).unwrap_err();
    assert!(is_corrupt(&e, "row group 0, column n: 1 NULLs"), "{e}");
    // The same column without target stays nullable and keeps its NULL.
    let t = open_parquet("t", &path, None).unwrap();
    assert!(t.schema().field(2).is_nullable());
    assert_eq!(column(&t, 2).null_count(), 1);
}

/// Columns of unsupported types are left out (and listed) when other columns remain; the
/// remaining columns read correctly, also after a nested column (several leaves); only a
/// file with no usable column, or a target naming such a column, is refused.
#[test]
fn unsupported_types_are_skipped_unless_nothing_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let list = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
        Some(vec![Some(1), Some(2)]),
        None,
        Some(vec![]),
    ]);
    let b = batch(vec![
        ("a", Arc::new(Int32Array::from(vec![1, 2, 3])) as ArrayRef),
        ("flag", Arc::new(BooleanArray::from(vec![true, false, true]))),
        ("l", Arc::new(list)),
        ("s", Arc::new(StringArray::from(vec!["x", "y", "z"]))),
    ]);
    let path = write(dir.path(), "bool.parquet", &b, 2);
    let src = ParquetSource::open(&path, None).unwrap();
    let names: Vec<&str> = src.skipped_columns().iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["flag", "l"]);
    assert_eq!(src.skipped_columns()[0].1, DataType::Boolean);
    let t = open_parquet("t", &path, None).unwrap();
    let fields: Vec<&str> = t.schema().fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(fields, ["a", "s"]);
    let a = column(&t, 0);
    assert_eq!(a.as_primitive::<Int32Type>().values().to_vec(), vec![1, 2, 3]);
    let s = column(&t, 1);
    assert_eq!(s.as_string::<i32>().iter().flatten().collect::<Vec<_>>(), ["x", "y", "z"]);
    // A target naming the Boolean column: refused, naming it.
    let flag = Arc::new(Schema::new(vec![Field::new("flag", DataType::Int32, false)]));
    let e = open_parquet("t", &path, Some(flag)).unwrap_err();
    assert!(
        matches!(&e, Error::NotImplemented(m) if m.contains("flag") && m.contains("Boolean")),
        "{e}"
    );
    let b = batch(vec![("flag", Arc::new(BooleanArray::from(vec![true])) as ArrayRef)]);
    let path = write(dir.path(), "onlybool.parquet", &b, 10);
    let e = open_parquet("t", &path, None).unwrap_err();
    assert!(
        matches!(&e, Error::NotImplemented(m) if m.contains("flag") && m.contains("Boolean")),
        "{e}"
    );

    let list = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![Some(vec![Some(1)])]);
    let b = batch(vec![("l", Arc::new(list) as ArrayRef)]);
    let path = write(dir.path(), "list.parquet", &b, 10);
    let e = open_parquet("t", &path, None).unwrap_err();
    assert!(
        matches!(&e, Error::NotImplemented(m) if m.contains("column l")),
        "{e}"
    );
}

#[test]
fn empty_file_has_no_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let b = batch(vec![(
        "a",
        Arc::new(Int32Array::from(Vec::<i32>::new())) as ArrayRef,
    )]);
    let path = write(dir.path(), "empty.parquet", &b, 10);
    let t = open_parquet("t", &path, None).unwrap();
    assert_eq!(t.num_rows(), 0);
    assert!(t.chunk_lens().is_empty());
    assert!(t.columns(&[0]).unwrap()[0].is_empty());
}

/// A valid Parquet file without columns cannot be a table: a typed error at open, not an
/// internal error when a query expands `*`.
#[test]
fn file_without_columns_is_an_invalid_argument() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nocols.parquet");
    let schema = Arc::new(arrow::datatypes::Schema::empty());
    let file = File::create(&path).unwrap();
    let w = ArrowWriter::try_new(file, schema, None).unwrap();
    w.close().unwrap();
    match open_parquet("t", &path, None) {
        Err(Error::InvalidArgument(m)) => {
            assert!(m.contains("nocols.parquet") && m.contains("no columns"), "{m}")
        }
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

#[test]
fn file_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.parquet");
    let e = open_parquet("t", &missing, None).unwrap_err();
    assert!(
        matches!(&e, Error::Io { path, .. } if path == &missing),
        "{e}"
    );

    for (name, bytes) in [
        ("empty", Vec::new()),
        (
            "garbage",
            b"this is not a parquet file at all, just text\n".repeat(10),
        ),
        ("magic_only", b"PAR1PAR1".to_vec()),
        (
            "bad_footer_len",
            [&b"PAR1"[..], &[0xff; 4], b"PAR1"].concat(),
        ),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let e = open_parquet("t", &path, None).unwrap_err();
        assert!(
            matches!(&e, Error::Corrupt { path: p, .. } if p == &path),
            "{name}: {e}"
        );
    }

    let b = batch(vec![(
        "a",
        Arc::new(Int64Array::from_iter_values(0..10_000)) as ArrayRef,
    )]);
    let good = write(dir.path(), "good.parquet", &b, 5_000);
    let bytes = std::fs::read(&good).unwrap();
    for cut in [bytes.len() - 1, bytes.len() - 9, bytes.len() / 2, 4] {
        let path = dir.path().join(format!("cut{cut}"));
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let e = open_parquet("t", &path, None).unwrap_err();
        assert!(matches!(&e, Error::Corrupt { .. }), "cut at {cut}: {e}");
    }

    // Truncated after open: the footer was fine, the column chunks are gone.
    let path = dir.path().join("shrinks.parquet");
    std::fs::write(&path, &bytes).unwrap();
    let t = open_parquet("t", &path, None).unwrap();
    File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(100)
        .unwrap();
    let e = t.columns(&[0]).unwrap_err();
    assert!(matches!(&e, Error::Corrupt { .. }), "{e}");
}

/// Flips bytes all over the column data of compressed and uncompressed files: every load
/// must return `Ok` (the flip hit a value) or `Error::Corrupt`, never panic or another error.
#[test]
fn flipped_bytes_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let n = 3_000;
    let b = batch(vec![
        (
            "i",
            Arc::new(Int64Array::from_iter_values(
                (0..n).map(|i| i * 7919 % 1000),
            )) as ArrayRef,
        ),
        (
            "s",
            Arc::new(StringArray::from_iter_values(
                (0..n).map(|i| format!("s{}", i % 37)),
            )),
        ),
        (
            "n",
            Arc::new(Int32Array::from_iter(
                (0..n).map(|i| (i % 5 != 0).then_some(i as i32)),
            )),
        ),
    ]);
    let mut corrupt_seen = 0;
    for compression in [
        Compression::UNCOMPRESSED,
        Compression::SNAPPY,
        Compression::ZSTD(Default::default()),
        Compression::LZ4_RAW,
    ] {
        let good = write_with(dir.path(), "good.parquet", &b, 1_000, compression);
        let bytes = std::fs::read(&good).unwrap();
        let data_end = bytes.len()
            - 8
            - u32::from_le_bytes(bytes[bytes.len() - 8..bytes.len() - 4].try_into().unwrap())
                as usize;
        let path = dir.path().join("flipped.parquet");
        for pos in (4..data_end).step_by(29) {
            let mut bad = bytes.clone();
            bad[pos] ^= 0x5a;
            std::fs::write(&path, &bad).unwrap();
            let t = open_parquet("t", &path, None).expect("footer untouched");
            let streamed = ParquetSource::open(&path, None).expect("footer untouched").streaming(true);
            let morsels: Vec<usize> = (0..streamed.chunk_lens().len()).collect();
            for result in [t.load_all(), streamed.load_morsels(&[0, 1, 2], &morsels).map(drop)] {
                match result {
                    Ok(()) => {}
                    Err(Error::Corrupt { detail, .. }) => {
                        assert!(detail.contains("row group"), "{detail}");
                        corrupt_seen += 1;
                    }
                    Err(e) => panic!("{compression:?} flip at {pos}: {e}"),
                }
            }
        }
    }
    assert!(corrupt_seen > 10, "{corrupt_seen}");
}
