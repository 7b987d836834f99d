//! Printing answers: a pretty table (`--format table`, the default), or any format of
//! `tessera_formats` written batch by batch (`--format Native|CSV|..`) to standard output
//! or `--out FILE`. Binary columns are shown as UTF-8 with invalid bytes replaced in the
//! pretty table only; every format keeps the bytes.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use tessera_engine::{CancelToken, Compression, Database, Error, Format, Profile, Result, WriteOptions};

/// Binary columns (strings of files that store bare BINARY) as UTF-8 with invalid bytes
/// replaced, for the pretty table.
fn displayable(b: &RecordBatch) -> Result<RecordBatch> {
    let mut fields = Vec::new();
    let mut cols: Vec<ArrayRef> = Vec::new();
    for (f, c) in b.schema().fields().iter().zip(b.columns()) {
        if c.data_type() == &DataType::Binary {
            let bin = c.as_binary::<i32>();
            let s: StringArray = (0..bin.len())
                .map(|i| bin.is_valid(i).then(|| String::from_utf8_lossy(bin.value(i)).into_owned()))
                .collect();
            fields.push(Field::new(f.name(), DataType::Utf8, true));
            cols.push(Arc::new(s));
        } else {
            fields.push(f.as_ref().clone());
            cols.push(c.clone());
        }
    }
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)?)
}

/// Runs `sql` and writes its answer: the pretty table when `format` is `None` (rendered
/// whole: it needs every row's width), else `format` batch by batch with `compression`,
/// to `out` or standard output.
pub(crate) fn answer(
    db: &Database,
    sql: &str,
    format: Option<Format>,
    compression: Compression,
    out: Option<&Path>,
    cancel: &CancelToken,
) -> Result<Profile> {
    let mut sink: Box<dyn Write + Send> = match out {
        Some(p) => Box::new(tessera_engine::FileSink::with_capacity(
            tessera_engine::SINK_BUFFER_BYTES,
            std::fs::File::create(p).map_err(|e| Error::Io { path: p.into(), source: e })?,
        )),
        None => Box::new(std::io::BufWriter::with_capacity(tessera_engine::SINK_BUFFER_BYTES, std::io::stdout())),
    };
    let name = out.map_or_else(|| "<stdout>".into(), |p| p.to_path_buf());
    let io = |e: std::io::Error| Error::Io { path: name.clone(), source: e };
    let profile = match format {
        None => {
            let (batches, p) = db.sql_in(sql, None, cancel)?;
            if !batches.is_empty() {
                sink.write_all(&render_table(&batches)?).map_err(io)?;
            }
            p
        }
        Some(f) => {
            let opts = WriteOptions { compression };
            let (_, p) = db.write_query_in(sql, None, cancel, f, &opts, &mut sink).map_err(|e| match e {
                Error::Io { path, source } if path.as_os_str() == "<output>" => Error::Io { path: name.clone(), source },
                other => other,
            })?;
            p
        }
    };
    sink.flush().map_err(io)?;
    Ok(profile)
}

/// `batches` (at least one) as a pretty table.
pub(crate) fn render_table(batches: &[RecordBatch]) -> Result<Vec<u8>> {
    let batches: Vec<RecordBatch> = batches.iter().map(displayable).collect::<Result<_>>()?;
    let t = arrow::util::pretty::pretty_format_batches(&batches)?;
    Ok(format!("{t}\n").into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float64Array, Int64Array, TimestampSecondArray};
    use arrow::datatypes::Float64Type;

    /// What `--format TSV` writes reads back through Tessera's own ClickBench TSV reader
    /// (`tessera_io::read_tsv`) to the same values, NULLs and special floats included.
    #[test]
    fn tsv_output_reads_back_through_the_tsv_reader() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("s", DataType::Utf8, true),
            Field::new("f", DataType::Float64, true),
            Field::new("n", DataType::Int64, true),
            Field::new("t", DataType::Timestamp(arrow::datatypes::TimeUnit::Second, None), true),
        ]));
        let b = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(vec![Some(""), None, Some("a,\"b'"), Some("x\ty\nz\\w\r\0"), Some("\\N")])),
                Arc::new(Float64Array::from(vec![Some(f64::NAN), Some(f64::INFINITY), Some(f64::NEG_INFINITY), None, Some(1.5)])),
                Arc::new(Int64Array::from(vec![Some(1), None, Some(-3), Some(i64::MAX), Some(0)])),
                Arc::new(TimestampSecondArray::from(vec![Some(1_373_000_000), None, Some(0), Some(86_399), Some(-1)])),
            ],
        )
        .unwrap();
        let mut out = Vec::new();
        tessera_engine::Format::parse("TSV").unwrap();
        tessera_formats_write(&b, &mut out);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.tsv");
        std::fs::write(&path, &out).unwrap();
        let t = tessera_io::read_tsv("t", &path, schema, None).unwrap();
        let back = t.columns(&[0, 1, 2, 3]).unwrap();
        for (c, chunks) in back.iter().enumerate() {
            let got = arrow::compute::concat(&chunks.iter().map(|a| a.as_ref()).collect::<Vec<_>>()).unwrap();
            let want = b.column(c);
            if c == 1 {
                // NaN != NaN: compare the floats bitwise.
                let (g, w) = (got.as_primitive::<Float64Type>(), want.as_primitive::<Float64Type>());
                for i in 0..w.len() {
                    assert_eq!(g.is_null(i), w.is_null(i));
                    assert!(w.is_null(i) || g.value(i).to_bits() == w.value(i).to_bits(), "row {i}");
                }
            } else {
                assert_eq!(&got, want, "column {c}");
            }
        }
    }

    fn tessera_formats_write(b: &RecordBatch, out: &mut Vec<u8>) {
        let db = Database::new();
        db.register_batches("t", b.schema(), std::slice::from_ref(b)).unwrap();
        db.write_query("SELECT * FROM t", Format::TabSeparated, &WriteOptions::default(), out).unwrap();
    }
}
