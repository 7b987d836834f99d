//! Round trips of every format and compression (Tessera -> bytes -> Tessera is identity)
//! over every stored type with NULLs, empty strings, bytes that are not UTF-8 and extreme
//! values; damaged input gives typed errors naming row and column, never a panic.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BinaryArray, Date32Array, Float32Array, Float64Array, Int8Array, Int16Array, Int32Array, Int64Array,
    RecordBatch, StringArray, TimestampSecondArray, UInt8Array, UInt16Array, UInt32Array, UInt64Array,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};

use super::*;
use crate::text::MAX_CHUNK_BYTES;

/// Every stored type, nullable with NULLs and also non-nullable, with edge values.
pub(crate) fn edge_batch() -> RecordBatch {
    let ts = DataType::Timestamp(TimeUnit::Second, None);
    let schema = Arc::new(Schema::new(vec![
        Field::new("i8", DataType::Int8, true),
        Field::new("i16", DataType::Int16, true),
        Field::new("i32", DataType::Int32, true),
        Field::new("i64", DataType::Int64, true),
        Field::new("u8", DataType::UInt8, true),
        Field::new("u16", DataType::UInt16, true),
        Field::new("u32", DataType::UInt32, true),
        Field::new("u64", DataType::UInt64, false),
        Field::new("f32", DataType::Float32, true),
        Field::new("f64", DataType::Float64, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("b", DataType::Binary, true),
        Field::new("d", DataType::Date32, true),
        Field::new("t", ts, true),
        Field::new("n", DataType::Int32, false),
    ]));
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Int8Array::from(vec![Some(i8::MIN), Some(i8::MAX), None, Some(0), Some(-1)])),
        Arc::new(Int16Array::from(vec![Some(i16::MIN), Some(i16::MAX), None, Some(0), Some(-1)])),
        Arc::new(Int32Array::from(vec![Some(i32::MIN), Some(i32::MAX), None, Some(0), Some(-1)])),
        Arc::new(Int64Array::from(vec![Some(i64::MIN), Some(i64::MAX), None, Some(0), Some(-1)])),
        Arc::new(UInt8Array::from(vec![Some(0), Some(u8::MAX), None, Some(1), Some(2)])),
        Arc::new(UInt16Array::from(vec![Some(0), Some(u16::MAX), None, Some(1), Some(2)])),
        Arc::new(UInt32Array::from(vec![Some(0), Some(u32::MAX), None, Some(1), Some(2)])),
        Arc::new(UInt64Array::from(vec![0, u64::MAX, 1, 1 << 63, 42])),
        Arc::new(Float32Array::from(vec![Some(f32::MIN_POSITIVE), Some(f32::MAX), None, Some(-0.0), Some(f32::NAN)])),
        Arc::new(Float64Array::from(vec![Some(f64::INFINITY), Some(f64::NEG_INFINITY), None, Some(5e-324), Some(0.1)])),
        Arc::new(StringArray::from(vec![
            Some(""),
            Some("tab\tnl\nquote\"apos'back\\slash/"),
            None,
            Some("\\N"),
            Some("é \u{2028} \u{1}\u{7f}, \r\n\0 \u{1F600}"),
        ])),
        Arc::new(BinaryArray::from(vec![
            Some(&b""[..]),
            Some(&b"\xff\xfe\x00 not utf-8 \x80"[..]),
            None,
            Some(&b"\"\t\n,"[..]),
            Some(&b"\\N"[..]),
        ])),
        Arc::new(Date32Array::from(vec![Some(-25_567), Some(120_529), None, Some(0), Some(18_262)])),
        Arc::new(TimestampSecondArray::from(vec![Some(0), Some(i64::from(u32::MAX)), None, Some(1_577_934_245), Some(86_399)])),
        Arc::new(Int32Array::from(vec![1, 2, 3, 4, 5])),
    ];
    RecordBatch::try_new(schema, cols).unwrap()
}

pub(crate) fn write(format: Format, c: Compression, batches: &[RecordBatch]) -> Vec<u8> {
    let mut out = Vec::new();
    let schema = batches[0].schema();
    write_batches(format, &schema, batches.iter().cloned().map(Ok), &mut out, &WriteOptions { compression: c }).unwrap();
    out
}

pub(crate) fn read(format: Format, c: Compression, bytes: &[u8], schema: Option<SchemaRef>) -> Result<Vec<RecordBatch>> {
    let opts = ReadOptions { compression: c, schema, source: "test".into() };
    reader(format, Input::Stream(Box::new(bytes)), &opts)?.collect()
}

fn concat(batches: &[RecordBatch], schema: &SchemaRef) -> RecordBatch {
    arrow::compute::concat_batches(schema, batches).unwrap()
}

const COMPRESSIONS: [Compression; 3] = [Compression::None, Compression::Lz4, Compression::Zstd(3)];

#[test]
fn every_format_round_trips_every_type() {
    let b = edge_batch();
    let schema = b.schema();
    // Two batches, the second a slice (non-zero array offsets).
    let batches = vec![b.clone(), b.slice(1, 3)];
    let want = concat(&batches, &schema);
    for format in Format::ALL {
        for c in COMPRESSIONS {
            let bytes = write(format, c, &batches);
            let back = read(format, c, &bytes, Some(schema.clone())).unwrap_or_else(|e| panic!("{format} {c:?}: {e}"));
            let got = concat(&back, &schema);
            for (i, f) in schema.fields().iter().enumerate() {
                assert_eq!(got.column(i), want.column(i), "{format} {c:?} column {}", f.name());
            }
        }
    }
}

#[test]
fn formats_with_types_read_into_a_new_table() {
    let b = edge_batch();
    for format in [Format::Native, Format::RowBinaryWithNamesAndTypes, Format::Arrow, Format::ArrowStream, Format::Parquet] {
        let bytes = write(format, Compression::None, std::slice::from_ref(&b));
        let back = read(format, Compression::None, &bytes, None).unwrap();
        let got = concat(&back, &back[0].schema());
        for (i, f) in b.schema().fields().iter().enumerate() {
            let g = got.schema();
            let gf = g.field(i);
            assert_eq!(gf.name(), f.name());
            assert_eq!(gf.is_nullable(), f.is_nullable(), "{format} {}", f.name());
            // Native and RowBinary say String for Binary: valid UTF-8 reads as Utf8.
            let col = arrow::compute::cast(got.column(i), f.data_type()).unwrap();
            assert_eq!(&col, b.column(i), "{format} column {}", f.name());
        }
    }
}

#[test]
fn schemaless_formats_need_a_target() {
    for format in [Format::RowBinary, Format::Csv, Format::TabSeparated, Format::JsonEachRow] {
        let err = read(format, Compression::None, b"", None).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{format}: {err}");
    }
}

#[test]
fn native_bytes_match_clickhouse_layout() {
    // SELECT toNullable(1::Int8) a, NULL::Nullable(String) b, unhex('ff00') c FORMAT Native (chDB 26.9).
    let schema = Arc::new(Schema::new(vec![
        Field::new("a", DataType::Int8, true),
        Field::new("b", DataType::Utf8, true),
        Field::new("c", DataType::Binary, false),
    ]));
    let b = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int8Array::from(vec![Some(1)])),
            Arc::new(StringArray::from(vec![None::<&str>])),
            Arc::new(BinaryArray::from(vec![&b"\xff\x00"[..]])),
        ],
    )
    .unwrap();
    let bytes = write(Format::Native, Compression::None, &[b]);
    assert_eq!(
        bytes,
        b"\x03\x01\x01a\x0eNullable(Int8)\x00\x01\x01b\x10Nullable(String)\x01\x00\x01c\x06String\x02\xff\x00"
    );
}

#[test]
fn text_bytes_match_clickhouse() {
    // What chDB 26.9 writes for the same values (TSV, CSV, JSONEachRow).
    let schema = Arc::new(Schema::new(vec![
        Field::new("s", DataType::Utf8, false),
        Field::new("f", DataType::Float64, false),
        Field::new("d", DataType::Date32, false),
        Field::new("t", DataType::Timestamp(TimeUnit::Second, None), false),
        Field::new("z", DataType::Int32, true),
        Field::new("u", DataType::UInt64, false),
    ]));
    let b = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from(vec!["a'b\tc\\d/e"])),
            Arc::new(Float64Array::from(vec![1e-7])),
            Arc::new(Date32Array::from(vec![18_263])),
            Arc::new(TimestampSecondArray::from(vec![1_577_934_245])),
            Arc::new(Int32Array::from(vec![None])),
            Arc::new(UInt64Array::from(vec![1])),
        ],
    )
    .unwrap();
    let text = |f| String::from_utf8(write(f, Compression::None, std::slice::from_ref(&b))).unwrap();
    assert_eq!(text(Format::TabSeparated), "a\\'b\\tc\\\\d/e\t1e-7\t2020-01-02\t2020-01-02 03:04:05\t\\N\t1\n");
    assert_eq!(text(Format::Csv), "\"a'b\tc\\d/e\",1e-7,\"2020-01-02\",\"2020-01-02 03:04:05\",\\N,1\n");
    assert_eq!(
        text(Format::JsonEachRow),
        "{\"s\":\"a'b\\tc\\\\d\\/e\",\"f\":1e-7,\"d\":\"2020-01-02\",\"t\":\"2020-01-02 03:04:05\",\"z\":null,\"u\":1}\n"
    );
    assert_eq!(text(Format::CsvWithNames).lines().next(), Some("\"s\",\"f\",\"d\",\"t\",\"z\",\"u\""));
}

#[test]
fn damaged_input_is_a_typed_error_naming_row_and_column() {
    let b = edge_batch();
    let schema = b.schema();
    for format in Format::ALL {
        for c in [Compression::None, Compression::Lz4] {
            let bytes = write(format, c, std::slice::from_ref(&b));
            // Every truncation point of the first 600 bytes and a few past, and byte flips.
            let cuts: Vec<usize> = (0..bytes.len().min(600)).chain((600..bytes.len()).step_by(97)).collect();
            for cut in cuts {
                match read(format, c, &bytes[..cut], Some(schema.clone())) {
                    Ok(batches) => {
                        // A cut at a row boundary of a row format reads the rows before it;
                        // a binary format never reads all rows from a cut input. (A text
                        // line cut inside its last field is a shorter value: undetectable.)
                        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
                        let text = matches!(
                            format,
                            Format::TabSeparated | Format::TabSeparatedWithNames | Format::Csv | Format::CsvWithNames | Format::JsonEachRow
                        );
                        assert!(rows < b.num_rows() || (text && rows == b.num_rows()), "{format} cut {cut}: {rows} rows");
                    }
                    Err(Error::Corrupt { .. } | Error::InvalidArgument(_) | Error::NotImplemented(_)) => {}
                    Err(e) => panic!("{format} {c:?} cut {cut}: unexpected error {e:?}"),
                }
            }
            // Byte flips in compressed Arrow IPC: arrow-ipc 60 allocates the uncompressed
            // length a buffer claims before checking it, and a failed allocation aborts
            // the process (no unwinding to catch). Not tested until arrow-rs bounds it.
            if matches!(format, Format::Arrow | Format::ArrowStream) && c != Compression::None {
                continue;
            }
            for at in (0..bytes.len()).step_by(7) {
                let mut bad = bytes.clone();
                bad[at] ^= 0x5a;
                match read(format, c, &bad, Some(schema.clone())) {
                    Ok(_) | Err(Error::Corrupt { .. } | Error::InvalidArgument(_) | Error::NotImplemented(_)) => {}
                    Err(e) => panic!("{format} {c:?} flip at {at}: unexpected error {e:?}"),
                }
            }
        }
    }
}

#[test]
fn errors_name_row_and_column() {
    let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int32, false), Field::new("b", DataType::UInt8, true)]));
    let err = |f, bytes: &[u8]| read(f, Compression::None, bytes, Some(schema.clone())).unwrap_err().to_string();
    let e = err(Format::Csv, b"1,2\n3,300\n");
    assert!(e.contains("line 2, column 2 (b)") && e.contains("UInt8"), "{e}");
    let e = err(Format::TabSeparated, b"1\t2\nx\t3\n");
    assert!(e.contains("line 2, column 1 (a)"), "{e}");
    let e = err(Format::TabSeparated, b"1\t2\n\\N\t3\n");
    assert!(e.contains("line 2, column 1 (a)") && e.contains("NULL"), "{e}");
    let e = err(Format::JsonEachRow, b"{\"a\":1,\"b\":2}\n{\"a\":1,\"b\":\"z\"}\n");
    assert!(e.contains("row 2") && e.contains("column 2 (b)"), "{e}");
    let e = err(Format::JsonEachRow, b"{\"a\":1,\"c\":2}\n");
    assert!(e.contains("row 1") && e.contains("'c'"), "{e}");
    // RowBinary: row 2 is cut inside column b's null flag / value.
    let e = err(Format::RowBinary, b"\x01\x00\x00\x00\x00\x07\x02\x00\x00\x00\x00");
    assert!(e.contains("row 2, column 2 (b)"), "{e}");
    let e = err(Format::RowBinary, b"\x01\x00\x00\x00\x02\x07");
    assert!(e.contains("row 1, column 2 (b)") && e.contains("null flag"), "{e}");
    // Native: a block claiming more rows than it holds.
    let e = err(Format::Native, b"\x02\x05\x01a\x05Int32\x01\x00\x00\x00");
    assert!(e.contains("Native block 1") && e.contains("column 1 (a)"), "{e}");
}

#[test]
fn timestamps_outside_datetime_are_refused_naming_the_row() {
    let schema = Arc::new(Schema::new(vec![Field::new("t", DataType::Timestamp(TimeUnit::Second, None), true)]));
    let b = RecordBatch::try_new(schema.clone(), vec![Arc::new(TimestampSecondArray::from(vec![Some(1), None, Some(-1)]))]).unwrap();
    for format in [Format::Native, Format::RowBinary] {
        let mut out = Vec::new();
        let err = write_batches(format, &schema, [Ok(b.clone())], &mut out, &WriteOptions::default()).unwrap_err();
        assert!(matches!(&err, Error::InvalidArgument(m) if m.contains("row 3, column t")), "{err}");
    }
}

#[test]
fn format_and_compression_names() {
    assert_eq!(Format::parse("tsv").unwrap(), Format::TabSeparated);
    assert_eq!(Format::parse("ROWBINARYWITHNAMESANDTYPES").unwrap(), Format::RowBinaryWithNamesAndTypes);
    for f in Format::ALL {
        assert_eq!(Format::parse(f.name()).unwrap(), f);
    }
    assert!(matches!(Format::parse("xml"), Err(Error::InvalidArgument(_))));
    assert_eq!(Compression::parse("ZSTD(9)").unwrap(), Compression::Zstd(9));
    assert!(Compression::parse("zstd(0)").is_err());
}

/// The parallel path of `write_batches` (row-independent formats, batches serialized on the
/// rayon pool) writes exactly the bytes of one writer fed batch by batch, with and without
/// ClickHouse compressed blocks, over many batches of every stored type but timestamps
/// (which keep the sequential path).
#[test]
fn parallel_serialization_equals_the_sequential_writer() {
    let edge = edge_batch();
    let keep: Vec<usize> = (0..edge.num_columns()).filter(|&c| !matches!(edge.schema().field(c).data_type(), DataType::Timestamp(_, _))).collect();
    let base = edge.project(&keep).unwrap();
    let schema = base.schema();
    // 40 batches of different lengths (the edge rows repeated), enough to pass 1 MiB of LZ4 input.
    let batches: Vec<RecordBatch> = (0..40)
        .map(|i| {
            let reps: Vec<RecordBatch> = (0..(i % 7 + 1) * 300).map(|_| base.clone()).collect();
            arrow::compute::concat_batches(&schema, &reps).unwrap()
        })
        .collect();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
    for format in Format::ALL.into_iter().filter(|f| f.body_format().is_some()) {
        for compression in [Compression::None, Compression::Lz4] {
            let opts = WriteOptions { compression };
            let mut seq = Vec::new();
            {
                let mut w = writer(format, &schema, Box::new(&mut seq), &opts).unwrap();
                for b in &batches {
                    w.write(b).unwrap();
                }
                w.finish().unwrap();
            }
            let mut par = Vec::new();
            let stats = pool
                .install(|| write_batches(format, &schema, batches.iter().cloned().map(Ok), &mut par, &opts))
                .unwrap();
            assert_eq!(stats.rows, batches.iter().map(|b| b.num_rows() as u64).sum::<u64>());
            assert_eq!(stats.bytes, par.len() as u64);
            assert!(par == seq, "{format} {compression:?}: {} bytes parallel, {} sequential", par.len(), seq.len());
        }
    }
}

/// 12,000 copies of the edge batch with one more batch at position 3000: one row whose
/// string column holds `long` (a value longer than a chunk).
fn edge_batches_with(long: &str) -> Vec<RecordBatch> {
    let edge = edge_batch();
    let mut batches: Vec<RecordBatch> = (0..12_000).map(|_| edge.clone()).collect();
    let mut cols: Vec<ArrayRef> = edge.slice(0, 1).columns().to_vec();
    cols[10] = Arc::new(StringArray::from(vec![long]));
    batches.insert(3000, RecordBatch::try_new(edge.schema(), cols).unwrap());
    batches
}

/// TabSeparated and CSV are parsed a chunk of rows per thread (parallel parsing): over
/// several MiB of every stored type (CSV quoted fields with line breaks, `\r\n`, quotes and
/// commas; TSV escapes), plus one value longer than a chunk, reading on 3 threads and on 1
/// gives the rows written, with the header too; an error deep in the input names its line
/// (counted across quoted line breaks) and comes after whole batches of the rows before it.
#[test]
fn parallel_text_parsing_equals_the_rows_written() {
    // A value longer than a chunk, with line breaks, quotes and commas in it.
    let long: String = (0..200_000).map(|i| format!("row {i}, \"q\"\n\r\t\\")).collect();
    let batches = edge_batches_with(&long);
    let schema = batches[0].schema();
    let want = concat(&batches, &schema);
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let three = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
    for format in [Format::Csv, Format::CsvWithNames, Format::TabSeparated, Format::TabSeparatedWithNames] {
        let bytes = write(format, Compression::None, &batches);
        assert!(bytes.len() > 2 * MAX_CHUNK_BYTES, "{format}: {} bytes", bytes.len());
        for pool in [&one, &three] {
            let back = pool.install(|| read(format, Compression::None, &bytes, Some(schema.clone()))).unwrap();
            assert!(back.len() > 2, "{format}: {} batches (chunks)", back.len());
            let got = concat(&back, &schema);
            assert_eq!(got.num_rows(), want.num_rows(), "{format}");
            for (i, f) in schema.fields().iter().enumerate() {
                assert_eq!(got.column(i), want.column(i), "{format} column {}", f.name());
            }
        }
        // A row of one field after the first 20,000 rows.
        let cut = write(format, Compression::None, &batches[..4000]).len();
        let mut bad = bytes[..cut].to_vec();
        let line = bad.iter().filter(|&&c| c == b'\n').count() + 1;
        bad.extend_from_slice(b"7\n");
        bad.extend_from_slice(&bytes[cut..]);
        for pool in [&one, &three] {
            let (rows, err) = prefix_then_error(format, Compression::None, &bad, pool, &want);
            assert!(err.contains(&format!("line {line}: expected 15 fields, found 1")), "{format}: {err}");
            assert!(rows <= 4001 * 5 && rows > 0, "{format}: {rows} rows before the error");
        }
    }
}

/// CSV chunks are cut by quote parity; an unquoted field holding a quote (`ab"c`, data to
/// the grammar) flips the parity, so that the cuts land inside quoted fields with line
/// breaks: the parser notices, and the rows are read again cut by the grammar, giving the
/// same rows on 1 and 3 threads.
#[test]
fn csv_quote_in_an_unquoted_field_does_not_misplace_chunks() {
    let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Utf8, false), Field::new("b", DataType::Int64, false)]));
    let mut text = b"ab\"c,0\n".to_vec();
    let mut a = vec!["ab\"c".to_string()];
    for i in 1..600_000i64 {
        text.extend_from_slice(format!("\"x\n{i}\",{i}\n").as_bytes());
        a.push(format!("x\n{i}"));
    }
    assert!(text.len() > 2 * MAX_CHUNK_BYTES);
    let want = RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(StringArray::from(a)), Arc::new(Int64Array::from((0..600_000).collect::<Vec<i64>>()))],
    )
    .unwrap();
    for threads in [1, 3] {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        let back = pool.install(|| read(Format::Csv, Compression::None, &text, Some(schema.clone()))).unwrap();
        assert_eq!(concat(&back, &schema), want, "{threads} threads");
    }
}

/// RowBinary rows (and Native strings) are parsed in place from the reader's 1 MiB buffer, a
/// value at a time only for one across its end: several MiB of rows with strings up to
/// 5,000 bytes (so rows straddle the buffer's end at every kind of field) and NULLs read
/// back as written.
#[test]
fn rowbinary_rows_across_buffer_ends_read_back() {
    let edge = edge_batch();
    let schema = edge.schema();
    let mut batches = Vec::new();
    for i in 0..400usize {
        let mut cols: Vec<ArrayRef> = edge.columns().to_vec();
        let s: Vec<Option<String>> = (0..5).map(|r| (r != 2).then(|| "x".repeat((i * 37 + r * 1013) % 5000))).collect();
        cols[10] = Arc::new(StringArray::from(s));
        batches.push(RecordBatch::try_new(schema.clone(), cols).unwrap());
    }
    let want = concat(&batches, &schema);
    for format in [Format::RowBinary, Format::RowBinaryWithNamesAndTypes, Format::Native] {
        let bytes = write(format, Compression::None, &batches);
        assert!(bytes.len() > 3 << 20, "{format}: {} bytes", bytes.len());
        let back = read(format, Compression::None, &bytes, Some(schema.clone())).unwrap();
        assert_eq!(concat(&back, &schema), want, "{format}");
    }
}

/// JSONEachRow is parsed a chunk of rows per thread: several MiB of every stored type
/// (strings with quotes, escapes and braces), plus a value longer than a chunk, read on 3
/// threads and on 1 give the rows written; an unknown key after 19,996 rows names that row
/// and comes after whole batches of the rows before it; the rows as one `[ .. ]` array read
/// the same (on one thread).
#[test]
fn parallel_json_parsing_equals_the_rows_written() {
    let long: String = (0..200_000).map(|i| format!("{{row {i}}}, \"q\"\n\\[")).collect();
    let batches = edge_batches_with(&long);
    let schema = batches[0].schema();
    let want = concat(&batches, &schema);
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let three = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
    let bytes = write(Format::JsonEachRow, Compression::None, &batches);
    assert!(bytes.len() > 2 * MAX_CHUNK_BYTES, "{} bytes", bytes.len());
    for pool in [&one, &three] {
        let back = pool.install(|| read(Format::JsonEachRow, Compression::None, &bytes, Some(schema.clone()))).unwrap();
        assert!(back.len() > 2, "{} batches (chunks)", back.len());
        assert_eq!(concat(&back, &schema), want);
    }
    // An unknown key after the rows of the first 4,000 batches (19,996 rows).
    let cut = write(Format::JsonEachRow, Compression::None, &batches[..4000]).len();
    let before: usize = batches[..4000].iter().map(RecordBatch::num_rows).sum();
    let mut bad = bytes[..cut].to_vec();
    bad.extend_from_slice(b"{\"nope\":1}\n");
    bad.extend_from_slice(&bytes[cut..]);
    for pool in [&one, &three] {
        let (rows, err) = prefix_then_error(Format::JsonEachRow, Compression::None, &bad, pool, &want);
        // Byte: after `{"nope":`, where the key is known.
        assert!(err.contains(&format!("row {} (byte {})", before + 1, cut + 8)) && err.contains("names no column"), "{err}");
        assert!(rows <= before && rows > 0, "{rows} rows before the error");
    }
    // The same rows as one array, a row per line with commas.
    let mut array = b"[\n".to_vec();
    for (i, line) in bytes.split(|&c| c == b'\n').filter(|l| !l.is_empty()).enumerate() {
        if i > 0 {
            array.extend_from_slice(b",\n");
        }
        array.extend_from_slice(line);
    }
    array.extend_from_slice(b"\n]\n");
    let back = three.install(|| read(Format::JsonEachRow, Compression::None, &array, Some(schema.clone()))).unwrap();
    assert_eq!(concat(&back, &schema), want);
}

/// Reads `bytes` on `pool` up to its first error: the batches before it must be the next
/// rows of `want` (a prefix of it), none may follow it. Returns the rows and the error.
fn prefix_then_error(format: Format, c: Compression, bytes: &[u8], pool: &rayon::ThreadPool, want: &RecordBatch) -> (usize, String) {
    let schema = want.schema();
    let opts = ReadOptions { compression: c, schema: Some(schema), source: "t".into() };
    let got = pool.install(|| match reader(format, Input::Stream(Box::new(bytes)), &opts) {
        Ok(r) => r.collect::<Vec<_>>(),
        Err(e) => vec![Err(e)],
    });
    let (mut rows, mut err) = (0, None);
    for b in got {
        match b {
            Ok(b) => {
                assert!(err.is_none(), "{format} {c:?}: a batch after the error");
                assert_eq!(&b, &want.slice(rows, b.num_rows()), "{format} {c:?}: rows {rows}..");
                rows += b.num_rows();
            }
            Err(e) => err = Some(e.to_string()),
        }
    }
    (rows, err.unwrap_or_else(|| panic!("{format} {c:?}: no error")))
}

/// Native and RowBinary are parsed a chunk of whole blocks / rows per thread (their
/// lengths walked first), and ClickHouse compressed blocks are decompressed a group at a
/// time in parallel: over several MiB of every stored type plus one value longer than a
/// chunk, reading on 3 threads and on 1 gives the rows written, with and without LZ4 blocks;
/// damage deep in the input (a RowBinary null flag of 7, an implausible Native block, a
/// flipped byte in a compressed block) gives the same error on 3 threads as on 1, naming
/// its row, block or compressed block and byte, after whole batches of the rows before it
/// only (all the whole Native blocks before a damaged compressed block); a Native type
/// name that is not UTF-8 (a time zone in Latin-1) reads as on 1 thread. ArrowStream (a
/// chunk of whole IPC messages per thread) reads the same rows too, stops at its
/// end-of-stream marker, and names the message and rows before a stream cut short.
#[test]
fn parallel_binary_parsing_equals_the_rows_written() {
    let long = "y".repeat(MAX_CHUNK_BYTES + 12_345);
    let batches = edge_batches_with(&long);
    let schema = batches[0].schema();
    let want = concat(&batches, &schema);
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let three = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
    let formats = [Format::Native, Format::RowBinary, Format::RowBinaryWithNamesAndTypes, Format::ArrowStream];
    for format in formats {
        for c in [Compression::None, Compression::Lz4] {
            let bytes = write(format, c, &batches);
            if c == Compression::None {
                assert!(bytes.len() > 2 * MAX_CHUNK_BYTES, "{format}: {} bytes", bytes.len());
            }
            for pool in [&one, &three] {
                let back = pool.install(|| read(format, c, &bytes, Some(schema.clone()))).unwrap();
                let threads = pool.current_num_threads();
                // On 3 threads, parsed as chunks (a batch or more each).
                assert!(threads == 1 || back.len() > 2, "{format} {c:?}: {} batches", back.len());
                assert_eq!(concat(&back, &schema), want, "{format} {c:?} {threads} threads");
            }
        }
    }
    // Damage after the rows of the first 4,000 batches (19,996 rows, 4,000 Native blocks).
    let before: usize = batches[..4000].iter().map(RecordBatch::num_rows).sum();
    for (format, damage, says) in [
        // The first column (i8) is nullable: its null flag is 0 or 1.
        (Format::RowBinary, vec![7u8], format!("row {}, column 1 (i8): null flag 7", before + 1)),
        // One column, 2^40 rows (a VarUInt of 6 bytes).
        (Format::Native, vec![1u8, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20], "Native block 4001: 1 columns x 1099511627776 rows".to_string()),
    ] {
        let cut = write(format, Compression::None, &batches[..4000]).len();
        let full = write(format, Compression::None, &batches);
        let mut bad = full[..cut].to_vec();
        bad.extend_from_slice(&damage);
        bad.extend_from_slice(&full[cut..]);
        for pool in [&one, &three] {
            let (rows, err) = prefix_then_error(format, Compression::None, &bad, pool, &want);
            assert!(err.contains(&says), "{format}: {err}");
            assert!(rows <= before, "{format}: {rows} rows before the error");
        }
    }
    // ArrowStream: the end-of-stream marker ends the input (bytes after it are not read),
    // and a stream cut inside a message says which message, after how many rows.
    let full = write(Format::ArrowStream, Compression::None, &batches);
    for pool in [&one, &three] {
        let mut trailing = full.clone();
        trailing.extend_from_slice(b"not a message");
        let back = pool.install(|| read(Format::ArrowStream, Compression::None, &trailing, Some(schema.clone()))).unwrap();
        assert_eq!(concat(&back, &schema), want);
        let (rows, err) = prefix_then_error(Format::ArrowStream, Compression::None, &full[..full.len() * 2 / 3], pool, &want);
        assert!(err.contains("ArrowStream"), "{err}");
        assert!(rows > 0 && rows < want.num_rows(), "{rows} rows before the error");
        if pool.current_num_threads() > 1 {
            assert!(err.contains(&format!("(after row {rows})")), "{rows} rows: {err}");
        }
    }
    // `DateTime('UTC')` written as `DateTime('\xfcTC')` in every block: read lossily, as the
    // sequential reader reads it (the zone is not used).
    let mut latin = write(Format::Native, Compression::None, &batches);
    let (from, to) = (b"DateTime('UTC')".as_slice(), b"DateTime('\xfcTC')".as_slice());
    let mut at = 0;
    while let Some(i) = latin[at..].windows(from.len()).position(|w| w == from) {
        latin[at + i..at + i + to.len()].copy_from_slice(to);
        at += i + to.len();
    }
    for pool in [&one, &three] {
        let back = pool.install(|| read(Format::Native, Compression::None, &latin, Some(schema.clone()))).unwrap();
        assert_eq!(concat(&back, &schema), want, "Latin-1 zone, {} threads", pool.current_num_threads());
    }
    // A flipped byte in the payload of a compressed block in the middle (ClickHouse's
    // blocks, which carry checksums; Arrow IPC has none).
    for format in formats.into_iter().filter(|f| *f != Format::ArrowStream) {
        let mut bytes = write(format, Compression::Lz4, &batches);
        let at = bytes.len() / 2;
        bytes[at] ^= 0x55;
        let (rows_one, err_one) = prefix_then_error(format, Compression::Lz4, &bytes, &one, &want);
        let (rows_three, err_three) = prefix_then_error(format, Compression::Lz4, &bytes, &three, &want);
        // The whole blocks (rows) read before the damaged compressed block all come out
        // (RowBinary on 1 thread loses its batch in progress, 3 threads cut whole rows).
        if format == Format::Native {
            assert!(rows_one > 0, "{format}");
            assert_eq!(rows_three, rows_one, "{format}");
        } else {
            assert!(rows_three >= rows_one, "{format}: {rows_three} < {rows_one}");
        }
        // The same block and byte (on 1 thread the format reader adds the row it was in).
        let block = |e: &str| e.find("compressed block").map(|i| e[i..].to_string());
        assert!(block(&err_one).is_some_and(|b| b.contains("at byte") && b.ends_with("checksum mismatch")), "{format}: {err_one}");
        assert_eq!(block(&err_one), block(&err_three), "{format}");
    }
}

/// `batches` as arrow-rs's `ArrowWriter` writes them with `compression` and row groups of
/// `rows` rows.
fn arrow_writer_bytes(batches: &[RecordBatch], compression: parquet::basic::Compression, rows: usize) -> Vec<u8> {
    let props =
        parquet::file::properties::WriterProperties::builder().set_compression(compression).set_max_row_group_row_count(Some(rows)).build();
    let mut bytes = Vec::new();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut bytes, batches[0].schema(), Some(props)).unwrap();
    for b in batches {
        w.write(b).unwrap();
    }
    w.close().unwrap();
    bytes
}

/// Parquet files of several row groups are decoded a row group per thread: a file of ~60K
/// rows of every stored type in row groups of 7,000 rows reads back as written on 3 threads
/// and on 1, from a stream and from a file (positioned reads on one shared handle); a
/// damaged page header in row group 5 gives a typed error after whole batches of the rows
/// of the row groups before it only.
#[test]
fn parallel_parquet_row_groups_equal_the_rows_written() {
    let batches = edge_batches_with("long value");
    let schema = batches[0].schema();
    let want = concat(&batches, &schema);
    let bytes = arrow_writer_bytes(&batches, parquet::basic::Compression::LZ4_RAW, 7000);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.parquet");
    std::fs::write(&path, &bytes).unwrap();
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let three = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
    let opts = ReadOptions { compression: Compression::None, schema: Some(schema.clone()), source: "t".into() };
    for pool in [&one, &three] {
        let threads = pool.current_num_threads();
        let from_stream = pool.install(|| read(Format::Parquet, Compression::None, &bytes, Some(schema.clone()))).unwrap();
        assert_eq!(concat(&from_stream, &schema), want, "stream, {threads} threads");
        let from_file: Vec<RecordBatch> = pool
            .install(|| reader(Format::Parquet, Input::File(std::fs::File::open(&path).unwrap()), &opts)?.collect::<Result<_>>())
            .unwrap();
        assert_eq!(concat(&from_file, &schema), want, "file, {threads} threads");
    }
    // The page header of the first column of row group 5 overwritten.
    let meta = parquet::file::metadata::ParquetMetaDataReader::new().parse_and_finish(&bytes::Bytes::from(bytes.clone())).unwrap();
    assert!(meta.num_row_groups() > 6, "{} row groups", meta.num_row_groups());
    let at = meta.row_group(5).column(0).data_page_offset() as usize;
    let mut bad = bytes.clone();
    bad[at..at + 16].fill(0xff);
    for pool in [&one, &three] {
        let (rows, err) = prefix_then_error(Format::Parquet, Compression::None, &bad, pool, &want);
        assert!(err.contains("Parquet"), "{err}");
        assert!(rows <= 5 * 7000, "{rows} rows");
    }
}

/// Parquet output encodes up to a row group per thread in parallel and appends them in
/// order: 2.5M rows (row groups of 1,048,576: two full, one short) in batches of odd sizes,
/// written on 3 threads, are exactly the bytes arrow-rs's `ArrowWriter` writes with the
/// same properties, uncompressed and LZ4; the file reads back as written.
#[test]
fn parallel_parquet_writer_writes_the_bytes_of_arrow_writer() {
    let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, true), Field::new("s", DataType::Utf8, false)]));
    let (mut batches, mut at) = (Vec::new(), 0i64);
    for len in [65_536i64, 1, 300_000, 7, 999_999].iter().cycle() {
        if at >= 2_500_000 {
            break;
        }
        let n = (*len).min(2_500_000 - at);
        let a = Int64Array::from_iter((at..at + n).map(|v| (v % 97 != 0).then_some(v * 31 % 1_000_003)));
        let s = StringArray::from_iter_values((at..at + n).map(|v| format!("v{}", v % 5_000)));
        batches.push(RecordBatch::try_new(schema.clone(), vec![Arc::new(a), Arc::new(s)]).unwrap());
        at += n;
    }
    let three = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
    for (c, pc) in [(Compression::None, parquet::basic::Compression::UNCOMPRESSED), (Compression::Lz4, parquet::basic::Compression::LZ4_RAW)] {
        let ours = three.install(|| write(Format::Parquet, c, &batches));
        let theirs = arrow_writer_bytes(&batches, pc, crate::arrowfmt::PARQUET_ROW_GROUP_ROWS);
        assert!(ours == theirs, "{c:?}: {} bytes, ArrowWriter {}", ours.len(), theirs.len());
        let back = three.install(|| read(Format::Parquet, c, &ours, Some(schema.clone()))).unwrap();
        assert_eq!(concat(&back, &schema), concat(&batches, &schema), "{c:?}");
    }
}

/// Arrow IPC output (stream and file) encodes its record batch messages in parallel (two
/// batches per thread at a time) and writes them in order: on 3 threads, 40 batches of
/// every stored type are the bytes arrow-ipc's `StreamWriter` / `FileWriter` write
/// (the file's footer built as `FileWriter` builds it), uncompressed, LZ4 and ZSTD, and read
/// back as written (a file also from disk, decoded a few batches per thread, on 1 and 3
/// threads; damaged, it never panics); an answer of no batches is a valid empty stream or
/// file.
#[test]
fn parallel_arrow_ipc_writes_the_bytes_of_arrow_ipc_writers() {
    use arrow::ipc::writer::{FileWriter, IpcWriteOptions, StreamWriter};
    let edge = edge_batch();
    let schema = edge.schema();
    let batches: Vec<RecordBatch> = (0..40)
        .map(|i| {
            let reps: Vec<RecordBatch> = (0..(i % 7 + 1) * 300).map(|_| edge.clone()).collect();
            arrow::compute::concat_batches(&schema, &reps).unwrap()
        })
        .collect();
    let three = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
    for format in [Format::ArrowStream, Format::Arrow] {
        for (c, ct) in [
            (Compression::None, None),
            (Compression::Lz4, Some(arrow::ipc::CompressionType::LZ4_FRAME)),
            (Compression::Zstd(3), Some(arrow::ipc::CompressionType::ZSTD)),
        ] {
            let ours = three.install(|| write(format, c, &batches));
            let opts = IpcWriteOptions::default().try_with_compression(ct).unwrap();
            let mut theirs = Vec::new();
            if format == Format::Arrow {
                let mut w = FileWriter::try_new_with_options(&mut theirs, &schema, opts).unwrap();
                batches.iter().for_each(|b| w.write(b).unwrap());
                w.finish().unwrap();
            } else {
                let mut w = StreamWriter::try_new_with_options(&mut theirs, &schema, opts).unwrap();
                batches.iter().for_each(|b| w.write(b).unwrap());
                w.finish().unwrap();
            }
            assert!(ours == theirs, "{format} {c:?}: {} bytes, arrow-ipc {}", ours.len(), theirs.len());
            let back = three.install(|| read(format, c, &ours, Some(schema.clone()))).unwrap();
            assert_eq!(concat(&back, &schema), concat(&batches, &schema), "{format} {c:?}");
            if format == Format::Arrow {
                // From a file: batches decoded a few per thread, each thread with its own
                // reader over positioned reads; the same on 1 thread.
                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join("t.arrow");
                std::fs::write(&path, &ours).unwrap();
                let ropts = ReadOptions { compression: c, schema: Some(schema.clone()), source: "t".into() };
                let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
                for pool in [&one, &three] {
                    let got: Vec<RecordBatch> = pool
                        .install(|| reader(format, Input::File(std::fs::File::open(&path).unwrap()), &ropts)?.collect::<Result<_>>())
                        .unwrap();
                    assert_eq!(concat(&got, &schema), concat(&batches, &schema), "file {c:?} {} threads", pool.current_num_threads());
                }
                // A damaged body in the middle: never a panic; a typed error, or (damage
                // inside values, which IPC has no checksum for) other values.
                let mut bad = ours.clone();
                let at = bad.len() / 2;
                bad[at..at + 64].fill(0xee);
                std::fs::write(&path, &bad).unwrap();
                let want = concat(&batches, &schema);
                for pool in [&one, &three] {
                    let got = pool.install(|| match reader(format, Input::File(std::fs::File::open(&path).unwrap()), &ropts) {
                        Ok(r) => r.collect::<Vec<_>>(),
                        Err(e) => vec![Err(e)],
                    });
                    let mut rows = 0;
                    for b in got {
                        match b {
                            Ok(b) => {
                                if b != want.slice(rows, b.num_rows()) {
                                    // Damage inside values reads back as other values.
                                    break;
                                }
                                rows += b.num_rows();
                            }
                            Err(e) => {
                                assert!(matches!(e, Error::Corrupt { .. } | Error::Io { .. }), "{e:?}");
                                break;
                            }
                        }
                    }
                }
            }
            let mut empty = Vec::new();
            let opts = WriteOptions { compression: c };
            three.install(|| write_batches(format, &schema, std::iter::empty(), &mut empty, &opts)).unwrap();
            assert!(three.install(|| read(format, c, &empty, Some(schema.clone()))).unwrap().is_empty(), "{format} {c:?}");
        }
    }
}

/// JSONEachRow rows that follow each other on one line (`{..},{..}`, no line breaks) are
/// cut after whole objects and read on 3 threads as on 1; a stray `}` after the first row
/// of a multi-MiB input is an error naming row 2, after no more than that row.
#[test]
fn json_rows_on_one_line_and_a_stray_bracket() {
    let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, false), Field::new("s", DataType::Utf8, false)]));
    let n = 300_000i64;
    let mut text = Vec::new();
    for i in 0..n {
        text.extend_from_slice(format!("{{\"a\":{i},\"s\":\"x{{}}\\\"{i}\"}},").as_bytes());
    }
    assert!(text.len() > 2 * MAX_CHUNK_BYTES, "{} bytes", text.len());
    let want = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from((0..n).collect::<Vec<_>>())),
            Arc::new(StringArray::from((0..n).map(|i| format!("x{{}}\"{i}")).collect::<Vec<_>>())),
        ],
    )
    .unwrap();
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let three = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
    for pool in [&one, &three] {
        let back = pool.install(|| read(Format::JsonEachRow, Compression::None, &text, Some(schema.clone()))).unwrap();
        assert_eq!(concat(&back, &schema), want, "{} threads", pool.current_num_threads());
    }
    let mut bad = b"{\"a\":0,\"s\":\"x{}\\\"0\"}\n}\n".to_vec();
    bad.extend_from_slice(&text);
    for pool in [&one, &three] {
        let (rows, err) = prefix_then_error(Format::JsonEachRow, Compression::None, &bad, pool, &want);
        assert!(err.contains("row 2"), "{err}");
        assert!(rows <= 1, "{rows} rows");
    }
}

/// An ArrowStream batch whose body is empty (0 rows of fixed-width columns) is one that
/// arrow-ipc's `StreamDecoder` holds back until more bytes come: on 3 threads (a chunk
/// decoder per thread) it still comes out, and the batches after it too.
#[test]
fn arrow_stream_batches_with_empty_bodies_keep_the_rest() {
    let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
    let batch = |v: Vec<i64>| RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(v)) as ArrayRef]).unwrap();
    let batches = [batch(vec![]), batch(vec![1, 2, 3]), batch(vec![]), batch(vec![]), batch(vec![4, 5]), batch(vec![])];
    let mut bytes = Vec::new();
    {
        let mut w = arrow::ipc::writer::StreamWriter::try_new(&mut bytes, &schema).unwrap();
        for b in &batches {
            w.write(b).unwrap();
        }
        w.finish().unwrap();
    }
    let three = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
    for cut in [bytes.len(), bytes.len() - 8] {
        // With and without the end-of-stream marker.
        let back = three.install(|| read(Format::ArrowStream, Compression::None, &bytes[..cut], None)).unwrap();
        let values: Vec<i64> =
            back.iter().flat_map(|b| b.column(0).as_any().downcast_ref::<Int64Array>().unwrap().values().to_vec()).collect();
        assert_eq!(values, [1, 2, 3, 4, 5], "{cut} bytes");
    }
}
