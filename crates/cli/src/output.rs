//! Printing answers: pretty table, CSV, TSV, JSON (one array of objects).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use tessera_engine::{Error, Result};

use crate::Format;

/// Binary columns (strings of files that store bare BINARY) are shown as UTF-8 with
/// invalid bytes replaced; the engine itself keeps the bytes.
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

/// Prints `batches` to stdout in `format`.
pub(crate) fn print(batches: &[RecordBatch], format: Format) -> Result<()> {
    if batches.is_empty() {
        return Ok(()); // a statement without an answer (SET)
    }
    let batches: Vec<RecordBatch> = batches.iter().map(displayable).collect::<Result<_>>()?;
    // Each format is rendered into memory, then written: an I/O error on stdout (e.g. the
    // reader went away) stays an I/O error the caller can recognise.
    let mut buf: Vec<u8> = Vec::new();
    match format {
        Format::Table => {
            let t = arrow::util::pretty::pretty_format_batches(&batches)?;
            buf.extend_from_slice(format!("{t}\n").as_bytes());
        }
        Format::Csv | Format::Tsv => {
            let delim = if format == Format::Csv { b',' } else { b'\t' };
            let mut w = arrow::csv::WriterBuilder::new().with_header(true).with_delimiter(delim).build(&mut buf);
            for b in &batches {
                w.write(b)?;
            }
        }
        Format::Json => {
            let mut w = arrow::json::ArrayWriter::new(&mut buf);
            let refs: Vec<&RecordBatch> = batches.iter().collect();
            w.write_batches(&refs)?;
            w.finish()?;
            buf.push(b'\n');
        }
    }
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(&buf)
        .and_then(|()| out.flush())
        .map_err(|e| Error::Io { path: "<stdout>".into(), source: e })?;
    Ok(())
}
