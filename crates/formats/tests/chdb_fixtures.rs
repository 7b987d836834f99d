//! Byte compatibility with ClickHouse without Python: files chDB wrote (see
//! `fixtures/README.md`; made by `tests/chdb_formats.py --write-fixtures`) are read by
//! Tessera to the values chDB's own TabSeparated shows, and Tessera writes the same rows
//! back to exactly chDB's bytes (Native, RowBinaryWithNamesAndTypes, TabSeparated,
//! CSVWithNames, JSONEachRow). chDB's MergeTree `.bin` column files check the ClickHouse
//! compressed blocks (CityHash128 checksums, LZ4 and ZSTD).

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use tessera_formats::{Compression, Format, Input, ReadOptions, WriteOptions, block, reader, write_batches};

fn fixture(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The table `e` of `tests/chdb_formats.py` as Tessera stores it.
fn schema() -> SchemaRef {
    let n = |name: &str, dt: DataType| Field::new(name, dt, true);
    Arc::new(Schema::new(vec![
        Field::new("u", DataType::UInt64, false),
        n("i8", DataType::Int8),
        n("i16", DataType::Int16),
        n("i32", DataType::Int32),
        n("i64", DataType::Int64),
        n("u8", DataType::UInt8),
        n("u16", DataType::UInt16),
        n("u32", DataType::UInt32),
        n("f32", DataType::Float32),
        n("f64", DataType::Float64),
        n("s", DataType::Utf8),
        Field::new("b", DataType::Binary, false),
        n("d", DataType::Date32),
        n("t", DataType::Timestamp(TimeUnit::Second, None)),
        Field::new("n", DataType::Int32, false),
    ]))
}

fn read_all(format: Format, bytes: &[u8]) -> RecordBatch {
    let opts = ReadOptions { compression: Compression::None, schema: Some(schema()), source: format.name().into() };
    let batches: Vec<RecordBatch> = reader(format, Input::Stream(Box::new(bytes)), &opts)
        .unwrap_or_else(|e| panic!("{format}: {e}"))
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("{format}: {e}"));
    arrow::compute::concat_batches(&schema(), &batches).unwrap()
}

fn write(format: Format, b: &RecordBatch) -> Vec<u8> {
    let mut out = Vec::new();
    write_batches(format, &b.schema(), [Ok(b.clone())], &mut out, &WriteOptions::default()).unwrap();
    out
}

const FORMATS: [Format; 7] = [
    Format::Native,
    Format::RowBinaryWithNamesAndTypes,
    Format::TabSeparated,
    Format::CsvWithNames,
    Format::JsonEachRow,
    Format::Parquet,
    Format::ArrowStream,
];

#[test]
fn chdb_files_read_to_chdb_values() {
    let reference = fixture("edge.reference.tsv");
    for format in FORMATS {
        let b = read_all(format, &fixture(&format!("edge.{}", format.name())));
        let tsv = write(Format::TabSeparated, &b);
        assert_eq!(String::from_utf8_lossy(&tsv), String::from_utf8_lossy(&reference), "{format}");
        assert_eq!(tsv, reference, "{format}");
    }
}

#[test]
fn tessera_writes_chdb_bytes() {
    let b = read_all(Format::Native, &fixture("edge.Native"));
    for format in [Format::RowBinaryWithNamesAndTypes, Format::TabSeparated, Format::CsvWithNames, Format::JsonEachRow] {
        let want = fixture(&format!("edge.{}", format.name()));
        assert_eq!(write(format, &b), want, "{format}");
    }
    // Native: the same layout and length; only the values under NULLs may differ
    // (ClickHouse leaves whatever was computed there, Tessera writes 0).
    let (ours, theirs) = (write(Format::Native, &b), fixture("edge.Native"));
    assert_eq!(ours.len(), theirs.len());
    let differing = ours.iter().zip(&theirs).filter(|(a, b)| a != b).count();
    assert!(differing <= 8, "{differing} bytes differ");
    assert_eq!(write(Format::TabSeparated, &read_all(Format::Native, &ours)), fixture("edge.reference.tsv"));
}

#[test]
fn chdb_compressed_blocks_decode() {
    for (name, lz) in [("mergetree_u_lz4.bin", true), ("mergetree_u_zstd.bin", false)] {
        let raw = fixture(name);
        let mut out = Vec::new();
        block::CompressedReader::new(raw.as_slice(), name.into()).read_to_end(&mut out).unwrap();
        let vals: Vec<u64> = out.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(vals, (0..10_000u64).map(|i| i * 7919).collect::<Vec<_>>(), "{name}");
        // The method byte says which codec chDB used; the first block's checksum is ours.
        assert_eq!(raw[16], if lz { 0x82 } else { 0x90 });
        let size = u32::from_le_bytes(raw[17..21].try_into().unwrap()) as usize;
        assert_eq!(block::checksum(&raw[16..16 + size]), raw[..16], "{name}");
    }
}
