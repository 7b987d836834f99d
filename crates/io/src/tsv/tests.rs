use super::*;
use arrow::array::AsArray;
use arrow::datatypes::{
    Date32Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, TimeUnit,
    TimestampSecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use std::io::Write;
use std::path::PathBuf;

fn schema(fields: &[(&str, DataType, bool)]) -> SchemaRef {
    Arc::new(Schema::new(
        fields
            .iter()
            .map(|(n, t, null)| Field::new(*n, t.clone(), *null))
            .collect::<Vec<_>>(),
    ))
}

fn file(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::File::create(&path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
    path
}

/// Column `c` of `t`, chunks concatenated.
fn column(t: &Table, c: usize) -> ArrayRef {
    let chunks = t.columns(&[c]).unwrap().remove(0);
    let refs: Vec<&dyn Array> = chunks.iter().map(|a| a.as_ref()).collect();
    arrow::compute::concat(&refs).unwrap()
}

fn corrupt_detail(r: Result<Table>) -> String {
    match r {
        Err(Error::Corrupt { detail, .. }) => detail,
        Err(e) => panic!("expected Corrupt, got {e}"),
        Ok(_) => panic!("expected Corrupt, got a table"),
    }
}

#[test]
fn every_type_and_nulls() {
    let dir = tempfile::tempdir().unwrap();
    let s = schema(&[
        ("i8", DataType::Int8, false),
        ("i16", DataType::Int16, false),
        ("i32", DataType::Int32, true),
        ("i64", DataType::Int64, false),
        ("u8", DataType::UInt8, false),
        ("u16", DataType::UInt16, false),
        ("u32", DataType::UInt32, false),
        ("u64", DataType::UInt64, false),
        ("f32", DataType::Float32, false),
        ("f64", DataType::Float64, true),
        ("d", DataType::Date32, false),
        ("t", DataType::Timestamp(TimeUnit::Second, None), false),
        ("s", DataType::Utf8, true),
    ]);
    let text = "-128\t-32768\t\\N\t-9223372036854775808\t0\t0\t0\t0\t1.5\t\\N\t1970-01-01\t1970-01-01 00:00:00\t\\N\n\
                127\t32767\t2147483647\t9223372036854775807\t255\t65535\t4294967295\t18446744073709551615\t-inf\t1e-3\t2013-07-15\t2013-07-15 10:47:34\t\n";
    let path = file(&dir, "types.tsv", text.as_bytes());
    let t = read_tsv("t", &path, s.clone(), None).unwrap();
    assert_eq!(t.num_rows(), 2);
    assert_eq!(
        t.schema().as_ref(),
        s.as_ref(),
        "schema kept (valid UTF-8 stays Utf8)"
    );
    assert_eq!(
        column(&t, 0).as_primitive::<Int8Type>().values().as_ref(),
        &[-128, 127]
    );
    assert_eq!(
        column(&t, 1).as_primitive::<Int16Type>().values().as_ref(),
        &[-32768, 32767]
    );
    let i32s = column(&t, 2);
    assert!(i32s.is_null(0));
    assert_eq!(i32s.as_primitive::<Int32Type>().value(1), i32::MAX);
    assert_eq!(
        column(&t, 3).as_primitive::<Int64Type>().values().as_ref(),
        &[i64::MIN, i64::MAX]
    );
    assert_eq!(
        column(&t, 4).as_primitive::<UInt8Type>().values().as_ref(),
        &[0, 255]
    );
    assert_eq!(
        column(&t, 5).as_primitive::<UInt16Type>().values().as_ref(),
        &[0, 65535]
    );
    assert_eq!(
        column(&t, 6).as_primitive::<UInt32Type>().values().as_ref(),
        &[0, u32::MAX]
    );
    assert_eq!(
        column(&t, 7).as_primitive::<UInt64Type>().values().as_ref(),
        &[0, u64::MAX]
    );
    assert_eq!(
        column(&t, 8)
            .as_primitive::<Float32Type>()
            .values()
            .as_ref(),
        &[1.5, f32::NEG_INFINITY]
    );
    let f64s = column(&t, 9);
    assert!(f64s.is_null(0));
    assert_eq!(f64s.as_primitive::<Float64Type>().value(1), 1e-3);
    assert_eq!(
        column(&t, 10)
            .as_primitive::<Date32Type>()
            .values()
            .as_ref(),
        &[0, 15_901]
    );
    assert_eq!(
        column(&t, 11)
            .as_primitive::<TimestampSecondType>()
            .values()
            .as_ref(),
        &[0, 15_901 * 86_400 + 38_854]
    );
    let strs = column(&t, 12);
    assert!(strs.is_null(0));
    assert_eq!(strs.as_string::<i32>().value(1), "");
    // NOT NULL columns carry no validity buffer.
    assert!(t.columns(&[0]).unwrap()[0][0].nulls().is_none());
}

#[test]
fn escapes_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let s = schema(&[
        ("s", DataType::Utf8, false),
        ("b", DataType::Binary, false),
        ("n", DataType::Int32, false),
    ]);
    let values: [&[u8]; 6] = [
        b"plain",
        b"tab\there",
        b"new\nline",
        b"back\\slash\\N",
        b"\r\0\x08\x0c'",
        b"",
    ];
    // Escape as ClickHouse does.
    let escape = |v: &[u8]| -> Vec<u8> {
        let mut out = Vec::new();
        for &b in v {
            match b {
                b'\t' => out.extend_from_slice(b"\\t"),
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\\' => out.extend_from_slice(b"\\\\"),
                b'\r' => out.extend_from_slice(b"\\r"),
                0 => out.extend_from_slice(b"\\0"),
                0x08 => out.extend_from_slice(b"\\b"),
                0x0c => out.extend_from_slice(b"\\f"),
                b'\'' => out.extend_from_slice(b"\\'"),
                _ => out.push(b),
            }
        }
        out
    };
    let mut text = Vec::new();
    for (i, v) in values.iter().enumerate() {
        text.extend(escape(v));
        text.push(b'\t');
        text.extend(escape(v));
        text.extend(format!("\t{i}\n").bytes());
    }
    let path = file(&dir, "esc.tsv", &text);
    let t = read_tsv("t", &path, s, None).unwrap();
    let strs = column(&t, 0);
    let bins = column(&t, 1);
    for (i, v) in values.iter().enumerate() {
        assert_eq!(strs.as_string::<i32>().value(i).as_bytes(), *v, "row {i}");
        assert_eq!(bins.as_binary::<i32>().value(i), *v, "row {i}");
    }
    assert_eq!(
        column(&t, 2).as_primitive::<Int32Type>().values().as_ref(),
        &[0, 1, 2, 3, 4, 5]
    );
}

#[test]
fn invalid_utf8_makes_the_column_binary() {
    let dir = tempfile::tempdir().unwrap();
    let s = schema(&[("a", DataType::Utf8, false), ("b", DataType::Utf8, false)]);
    let n = 200_000;
    let mut text = Vec::new();
    for i in 0..n {
        text.extend(format!("a{i}\t").bytes());
        if i == n - 3 {
            text.extend_from_slice(b"caf\xe9 \\xff");
        } else {
            text.extend(format!("b{i}").bytes());
        }
        text.push(b'\n');
    }
    let path = file(&dir, "utf8.tsv", &text);
    let t = read_tsv("t", &path, s, None).unwrap();
    assert!(t.chunk_lens().len() >= 4, "{:?}", t.chunk_lens());
    assert_eq!(t.schema().field(0).data_type(), &DataType::Utf8);
    assert_eq!(t.schema().field(1).data_type(), &DataType::Binary);
    let b = column(&t, 1);
    assert_eq!(b.as_binary::<i32>().value(n - 3), b"caf\xe9 \xff");
    assert_eq!(b.as_binary::<i32>().value(0), b"b0");
    assert_eq!(
        column(&t, 0).as_string::<i32>().value(n - 1),
        format!("a{}", n - 1)
    );
}

#[test]
fn chunks_and_progress() {
    let dir = tempfile::tempdir().unwrap();
    let s = schema(&[("id", DataType::Int64, false), ("s", DataType::Utf8, false)]);
    let n = 300_000i64;
    let text: String = (0..n).map(|i| format!("{i}\tv{}\n", i % 10)).collect();
    let path = file(&dir, "big.tsv", text.as_bytes());
    let seen = Mutex::new(Vec::new());
    let record = |bytes: u64| seen.lock().unwrap().push(bytes);
    let t = read_tsv("t", &path, s, Some(&record)).unwrap();
    assert_eq!(t.num_rows(), n as usize);
    assert!(
        t.chunk_lens().iter().all(|&l| l > 0 && l <= CHUNK_ROWS),
        "{:?}",
        t.chunk_lens()
    );
    assert!(t.chunk_lens().len() >= 5);
    let ids = column(&t, 0);
    assert!(
        ids.as_primitive::<Int64Type>()
            .values()
            .iter()
            .copied()
            .eq(0..n)
    );
    let seen = seen.into_inner().unwrap();
    assert!(
        seen.len() > 1 && seen.windows(2).all(|w| w[0] < w[1]),
        "{seen:?}"
    );
    assert_eq!(*seen.last().unwrap(), text.len() as u64);
}

#[test]
fn bad_rows_name_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let s = schema(&[
        ("a", DataType::Int64, false),
        ("b", DataType::Int16, false),
        ("c", DataType::Utf8, false),
    ]);
    let good: String = (0..150_000)
        .map(|i| format!("{i}\t{}\tx\n", i % 100))
        .collect();
    let cases: [(&str, &str); 9] = [
        ("1\tabc\tx\n", "column 2 (b): invalid integer 'abc'"),
        (
            "1\t40000\tx\n",
            "column 2 (b): value '40000' out of range for Int16",
        ),
        ("1\t\tx\n", "column 2 (b): invalid integer ''"),
        ("1.5\t1\tx\n", "column 1 (a): invalid integer '1.5'"),
        ("1\t2\n", "expected 3 fields, found 2"),
        ("1\t2\tx\textra\n", "expected 3 fields, found more"),
        (
            "\\N\t2\tx\n",
            "column 1 (a): NULL (\\N) in a NOT NULL column",
        ),
        (
            "1\t2\tab\\\n",
            "column 3 (c): backslash at the end of field",
        ),
        ("1\t2\r\tx\n", "column 2 (b): invalid integer '2\r'"),
    ];
    for (bad, expected) in cases {
        let text = format!("{good}{bad}{good}");
        let path = file(&dir, "bad.tsv", text.as_bytes());
        let detail = corrupt_detail(read_tsv("t", &path, s.clone(), None));
        let prefix = format!("line 150001 (byte {})", good.len());
        assert!(detail.starts_with(&prefix), "{detail}");
        assert!(detail.contains(expected), "{detail} / {expected}");
    }
    // The earliest bad row wins when several pieces fail.
    let text = format!("{good}1\tx\tx\n{good}1\ty\tx\n");
    let path = file(&dir, "two.tsv", text.as_bytes());
    assert!(corrupt_detail(read_tsv("t", &path, s.clone(), None)).contains("'x'"));
    // First line.
    let path = file(&dir, "first.tsv", b"x\t1\ty\n");
    assert!(
        corrupt_detail(read_tsv("t", &path, s, None)).starts_with("line 1 (byte 0), column 1 (a)")
    );
}

#[test]
fn empty_file_newline_only_and_missing_trailing_newline() {
    let dir = tempfile::tempdir().unwrap();
    let one = schema(&[("s", DataType::Utf8, false)]);
    let two = schema(&[("a", DataType::Int32, false), ("s", DataType::Utf8, false)]);

    let t = read_tsv("t", &file(&dir, "empty.tsv", b""), two.clone(), None).unwrap();
    assert_eq!(t.num_rows(), 0);
    assert!(t.chunk_lens().is_empty());
    assert_eq!(t.schema().field(1).data_type(), &DataType::Utf8);

    let t = read_tsv("t", &file(&dir, "nl.tsv", b"\n"), one.clone(), None).unwrap();
    assert_eq!(t.num_rows(), 1);
    assert_eq!(column(&t, 0).as_string::<i32>().value(0), "");

    let t = read_tsv(
        "t",
        &file(&dir, "notrail.tsv", b"1\ta\n2\tb\r"),
        two.clone(),
        None,
    )
    .unwrap();
    assert_eq!(t.num_rows(), 2);
    assert_eq!(
        column(&t, 1).as_string::<i32>().value(1),
        "b\r",
        "'\\r' is data"
    );

    let detail = corrupt_detail(read_tsv(
        "t",
        &file(&dir, "blank.tsv", b"1\ta\n\n2\tb\n"),
        two,
        None,
    ));
    assert!(
        detail.starts_with("line 2 (byte 4): expected 2 fields, found an empty line"),
        "{detail}"
    );
}

#[test]
fn argument_and_file_errors() {
    let dir = tempfile::tempdir().unwrap();
    let s = schema(&[("a", DataType::Int32, false)]);
    let missing = dir.path().join("missing.tsv");
    let e = read_tsv("t", &missing, s, None).unwrap_err();
    assert!(
        matches!(&e, Error::Io { path, .. } if path == &missing),
        "{e}"
    );

    let path = file(&dir, "x.tsv", b"1\n");
    let e = read_tsv(
        "t",
        &path,
        schema(&[("flag", DataType::Boolean, false)]),
        None,
    )
    .unwrap_err();
    assert!(
        matches!(&e, Error::NotImplemented(m) if m.contains("flag")),
        "{e}"
    );
    let e = read_tsv("t", &path, schema(&[]), None).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
}

#[test]
fn pieces_end_at_newlines() {
    let data = b"aaaa\nbb\ncccccc\nd";
    assert_eq!(split_pieces(data), vec![0..data.len()]);
    let big: Vec<u8> = b"0123456789\n".repeat(500_000);
    let pieces = split_pieces(&big);
    assert!(pieces.len() >= 7, "{}", pieces.len());
    for p in &pieces {
        assert!(p.start == 0 || big[p.start - 1] == b'\n');
        assert!(p.len() / 11 <= CHUNK_ROWS + 1);
    }
}

/// Block-by-block reads ([`TsvBlocks`]) give the rows of a whole read, in order, and the
/// column types are decided before the first block: only the Utf8 column holding a
/// non-UTF-8 value (a `\xff` escape in a late piece, or a raw invalid byte) is Binary, in
/// every block.
#[test]
fn blocks_read_like_the_whole_file_and_decide_types_first() {
    let dir = tempfile::tempdir().unwrap();
    let s = schema(&[
        ("k", DataType::Int64, false),
        ("a", DataType::Utf8, false),
        ("b", DataType::Utf8, true),
        ("c", DataType::Utf8, false),
    ]);
    let n = 200_000;
    let mut text = Vec::new();
    for i in 0..n {
        write!(text, "{i}\ta{}\t", i % 97).unwrap();
        match i {
            150_000 => text.extend_from_slice(b"x\\xffy"),
            7 => text.extend_from_slice(b"\\N"),
            _ => write!(text, "b\\t{i}").unwrap(),
        }
        text.push(b'\t');
        if i == 199_998 {
            text.extend_from_slice(b"raw\xfe");
        } else {
            text.extend_from_slice("é\\\\".as_bytes());
        }
        if i + 1 < n {
            text.push(b'\n');
        }
    }
    let path = file(&dir, "blocks.tsv", &text);
    let blocks = TsvBlocks::open(&path, s.clone()).unwrap();
    assert_eq!(blocks.rows(), n);
    assert!(blocks.pieces() >= 3, "{} pieces", blocks.pieces());
    let types: Vec<DataType> = blocks.schema().fields().iter().map(|f| f.data_type().clone()).collect();
    assert_eq!(types, [DataType::Int64, DataType::Utf8, DataType::Binary, DataType::Binary]);
    let whole = read_tsv("t", &path, s.clone(), None).unwrap();
    assert_eq!(whole.schema(), blocks.schema());
    let mut got: Vec<Vec<ArrayRef>> = vec![Vec::new(); 4];
    for k in 0..blocks.pieces() {
        let part = blocks.read(k..k + 1, None).unwrap();
        for (c, chunks) in part.into_iter().enumerate() {
            assert!(chunks.iter().all(|a| a.data_type() == &types[c]), "piece {k} column {c}");
            got[c].extend(chunks);
        }
    }
    for c in 0..4 {
        let refs: Vec<&dyn Array> = got[c].iter().map(|a| a.as_ref()).collect();
        assert_eq!(&arrow::compute::concat(&refs).unwrap(), &column(&whole, c), "column {c}");
    }
    let b = column(&whole, 2);
    assert_eq!(b.as_binary::<i32>().value(150_000), b"x\xffy");
    assert!(b.is_null(7));
    assert_eq!(column(&whole, 3).as_binary::<i32>().value(199_998), b"raw\xfe");
    assert_eq!(column(&whole, 3).as_binary::<i32>().value(0), "é\\".as_bytes());
    assert!(blocks.read(0..blocks.pieces() + 1, None).is_err());
    // Clean UTF-8 everywhere: the asked-for types stay.
    let clean = file(&dir, "clean.tsv", b"1\tx\ty\tz\n2\t\\N\\t\t\\\\\tw\n");
    let blocks = TsvBlocks::open(&clean, schema(&[("k", DataType::Int64, false), ("a", DataType::Utf8, true), ("b", DataType::Utf8, false), ("c", DataType::Utf8, false)])).unwrap();
    assert_eq!(blocks.rows(), 2);
    assert!(blocks.schema().fields().iter().skip(1).all(|f| f.data_type() == &DataType::Utf8));
    // An empty file: no rows, no pieces.
    let empty = file(&dir, "empty.tsv", b"");
    let blocks = TsvBlocks::open(&empty, s).unwrap();
    assert_eq!((blocks.rows(), blocks.pieces()), (0, 0));
    assert!(blocks.read(0..0, None).unwrap().iter().all(Vec::is_empty));
}
