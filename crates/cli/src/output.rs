//! Printing answers: pretty table, CSV, TSV, JSON (one array of objects).
//!
//! What each format does with the values that are easy to confuse:
//!
//! | value          | csv            | tsv (ClickHouse TabSeparated) | json                 |
//! |----------------|----------------|-------------------------------|----------------------|
//! | NULL           | empty field    | `\N`                          | `null`               |
//! | `''`           | `""`           | empty field                   | `""`                 |
//! | NaN, +inf, -inf| `NaN` `inf` `-inf` | `nan` `inf` `-inf`        | `"nan"` `"inf"` `"-inf"` |
//! | tab, newline   | quoted field   | `\t` `\n` (also `\r` `\0` `\\` `\b` `\f`) | JSON escapes |
//!
//! CSV follows RFC 4180 as DuckDB and ClickHouse write it: a field is quoted when it is
//! empty or holds a comma, a double quote (doubled inside) or a line break, so NULL (an
//! empty unquoted field) and `''` (`""`) stay apart. TSV uses ClickHouse's TabSeparated
//! escapes and is read back by Tessera's TSV reader (`tessera_io::read_tsv`), after its
//! header line of column names (ClickHouse's `TSVWithNames`). JSON keeps every field of
//! every row (NULL is `null`) and, since JSON numbers have no NaN or infinities, writes
//! them as the strings ClickHouse writes with `output_format_json_quote_denormals = 1`.

use std::fmt::Write as _;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Float32Type, Float64Type, Schema};
use arrow::util::display::{ArrayFormatter, FormatOptions};
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
    // Each format is rendered into memory, then written: an I/O error on stdout (e.g. the
    // reader went away) stays an I/O error the caller can recognise.
    let buf = render(batches, format)?;
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(&buf)
        .and_then(|()| out.flush())
        .map_err(|e| Error::Io { path: "<stdout>".into(), source: e })?;
    Ok(())
}

/// `batches` (at least one; all with the first one's schema) rendered in `format`.
pub(crate) fn render(batches: &[RecordBatch], format: Format) -> Result<Vec<u8>> {
    let batches: Vec<RecordBatch> = batches.iter().map(displayable).collect::<Result<_>>()?;
    let mut out = String::new();
    match format {
        Format::Table => {
            let t = arrow::util::pretty::pretty_format_batches(&batches)?;
            out = format!("{t}\n");
        }
        Format::Csv => {
            let schema = batches[0].schema();
            let names: Vec<String> = schema.fields().iter().map(|f| csv_field(f.name())).collect();
            out.push_str(&names.join(","));
            out.push('\n');
            let opts = FormatOptions::default();
            for_each_row(&batches, &opts, &mut out, |out, col, fmt, c, r| {
                if c > 0 {
                    out.push(',');
                }
                if !col.is_null(r) {
                    out.push_str(&csv_field(&fmt.value(r).to_string()));
                }
            })?;
        }
        Format::Tsv => {
            let schema = batches[0].schema();
            let names: Vec<String> = schema.fields().iter().map(|f| tsv_escape(f.name())).collect();
            out.push_str(&names.join("\t"));
            out.push('\n');
            let opts = FormatOptions::default().with_timestamp_format(Some("%Y-%m-%d %H:%M:%S"));
            for_each_row(&batches, &opts, &mut out, |out, col, fmt, c, r| {
                if c > 0 {
                    out.push('\t');
                }
                if col.is_null(r) {
                    out.push_str("\\N");
                } else if let Some(special) = non_finite(col.as_ref(), r) {
                    out.push_str(special);
                } else {
                    out.push_str(&tsv_escape(&fmt.value(r).to_string()));
                }
            })?;
        }
        Format::Json => {
            let schema = batches[0].schema();
            let keys: Vec<String> = schema.fields().iter().map(|f| json_string(f.name())).collect();
            out.push('[');
            let opts = FormatOptions::default();
            let mut first_row = true;
            for b in &batches {
                let fmts = formatters(b, &opts)?;
                for r in 0..b.num_rows() {
                    if !first_row {
                        out.push(',');
                    }
                    first_row = false;
                    out.push('{');
                    for (c, (col, fmt)) in b.columns().iter().zip(&fmts).enumerate() {
                        if c > 0 {
                            out.push(',');
                        }
                        out.push_str(&keys[c]);
                        out.push(':');
                        json_value(&mut out, col.as_ref(), fmt, r);
                    }
                    out.push('}');
                }
            }
            out.push_str("]\n");
        }
    }
    Ok(out.into_bytes())
}

/// One formatter per column of `b`.
fn formatters<'a>(b: &'a RecordBatch, opts: &FormatOptions<'a>) -> Result<Vec<ArrayFormatter<'a>>> {
    b.columns().iter().map(|c| Ok(ArrayFormatter::try_new(c.as_ref(), opts)?)).collect()
}

/// Calls `cell(out, column, formatter, column index, row index)` for every cell, row by
/// row, with a newline after each row.
fn for_each_row(
    batches: &[RecordBatch],
    opts: &FormatOptions<'_>,
    out: &mut String,
    mut cell: impl FnMut(&mut String, &ArrayRef, &ArrayFormatter<'_>, usize, usize),
) -> Result<()> {
    for b in batches {
        let fmts = formatters(b, opts)?;
        for r in 0..b.num_rows() {
            for (c, (col, fmt)) in b.columns().iter().zip(&fmts).enumerate() {
                cell(out, col, fmt, c, r);
            }
            out.push('\n');
        }
    }
    Ok(())
}

/// `"nan"`-style text for a NaN or infinite float at row `i`, `None` otherwise.
fn non_finite(col: &dyn Array, i: usize) -> Option<&'static str> {
    let v = match col.data_type() {
        DataType::Float64 => col.as_primitive::<Float64Type>().value(i),
        DataType::Float32 => f64::from(col.as_primitive::<Float32Type>().value(i)),
        _ => return None,
    };
    if v.is_nan() {
        Some("nan")
    } else if v == f64::INFINITY {
        Some("inf")
    } else if v == f64::NEG_INFINITY {
        Some("-inf")
    } else {
        None
    }
}

/// A CSV field: quoted when empty or when it holds `,` `"` `\r` `\n` (quotes doubled).
fn csv_field(s: &str) -> String {
    if s.is_empty() || s.contains([',', '"', '\r', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// ClickHouse TabSeparated escaping: `\\` `\t` `\n` `\r` `\0` `\b` `\f`.
fn tsv_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\0' => out.push_str("\\0"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c => out.push(c),
        }
    }
    out
}

fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// Appends the JSON value of row `i` of `col`: `null`, a number (integers, decimals,
/// finite floats), `"nan"`/`"inf"`/`"-inf"`, or a string (text, dates, timestamps).
fn json_value(out: &mut String, col: &dyn Array, fmt: &ArrayFormatter<'_>, i: usize) {
    if col.is_null(i) {
        out.push_str("null");
        return;
    }
    if let Some(special) = non_finite(col, i) {
        let _ = write!(out, "\"{special}\"");
        return;
    }
    match col.data_type() {
        // serde_json prints the shortest text that reads back as the same float.
        DataType::Float64 => out.push_str(&serde_json::to_string(&col.as_primitive::<Float64Type>().value(i)).unwrap_or_default()),
        DataType::Float32 => out.push_str(&serde_json::to_string(&col.as_primitive::<Float32Type>().value(i)).unwrap_or_default()),
        dt if dt.is_integer() || matches!(dt, DataType::Decimal128(..) | DataType::Decimal256(..)) => {
            let _ = write!(out, "{}", fmt.value(i));
        }
        DataType::Boolean => {
            let _ = write!(out, "{}", fmt.value(i));
        }
        _ => out.push_str(&json_string(&fmt.value(i).to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float64Array, Int64Array, TimestampSecondArray};

    fn batch() -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("s", DataType::Utf8, true),
            Field::new("f", DataType::Float64, true),
            Field::new("n", DataType::Int64, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(vec![Some(""), None, Some("a,\"b\""), Some("x\ty\nz\\w\r\0"), Some("\\N")])),
                Arc::new(Float64Array::from(vec![Some(f64::NAN), Some(f64::INFINITY), Some(f64::NEG_INFINITY), None, Some(1.5)])),
                Arc::new(Int64Array::from(vec![Some(1), None, Some(-3), Some(i64::MAX), Some(0)])),
            ],
        )
        .unwrap()
    }

    fn text(format: Format) -> String {
        String::from_utf8(render(&[batch()], format).unwrap()).unwrap()
    }

    #[test]
    fn csv_tells_null_from_empty_string() {
        assert_eq!(
            text(Format::Csv),
            "s,f,n\n\"\",NaN,1\n,inf,\n\"a,\"\"b\"\"\",-inf,-3\n\"x\ty\nz\\w\r\0\",,9223372036854775807\n\\N,1.5,0\n"
        );
    }

    #[test]
    fn json_keeps_null_fields_and_quotes_non_finite_floats() {
        let v: serde_json::Value = serde_json::from_str(&text(Format::Json)).unwrap();
        let rows = v.as_array().unwrap();
        assert_eq!(rows.len(), 5);
        assert_eq!(rows[0], serde_json::json!({"s": "", "f": "nan", "n": 1}));
        assert_eq!(rows[1], serde_json::json!({"s": null, "f": "inf", "n": null}));
        assert_eq!(rows[2], serde_json::json!({"s": "a,\"b\"", "f": "-inf", "n": -3}));
        assert_eq!(rows[3], serde_json::json!({"s": "x\ty\nz\\w\r\0", "f": null, "n": i64::MAX}));
        assert_eq!(rows[4], serde_json::json!({"s": "\\N", "f": 1.5, "n": 0}));
        // Every row lists every column, in order.
        assert!(text(Format::Json).starts_with("[{\"s\":\"\",\"f\":\"nan\",\"n\":1},{\"s\":null,"));
    }

    #[test]
    fn tsv_uses_clickhouse_escapes() {
        assert_eq!(
            text(Format::Tsv),
            "s\tf\tn\n\tnan\t1\n\\N\tinf\t\\N\na,\"b\"\t-inf\t-3\nx\\ty\\nz\\\\w\\r\\0\t\\N\t9223372036854775807\n\\\\N\t1.5\t0\n"
        );
    }

    /// What `--format tsv` writes (after its header line) reads back through Tessera's
    /// TSV reader to the same values, NULLs and special floats included.
    #[test]
    fn tsv_round_trips_through_the_tsv_reader() {
        let ts = TimestampSecondArray::from(vec![Some(1_373_000_000), None, Some(0), Some(86_399), Some(-1)]);
        let b = batch();
        let mut cols = b.columns().to_vec();
        cols.push(Arc::new(ts));
        let mut fields: Vec<Field> = b.schema().fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.push(Field::new("t", DataType::Timestamp(arrow::datatypes::TimeUnit::Second, None), true));
        let schema = Arc::new(Schema::new(fields));
        let b = RecordBatch::try_new(schema.clone(), cols).unwrap();
        let out = String::from_utf8(render(std::slice::from_ref(&b), Format::Tsv).unwrap()).unwrap();
        let body = out.split_once('\n').unwrap().1;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.tsv");
        std::fs::write(&path, body).unwrap();
        let t = tessera_io::read_tsv("t", &path, schema, None).unwrap();
        let back = t.columns(&[0, 1, 2, 3]).unwrap();
        for (c, chunks) in back.iter().enumerate() {
            let got = arrow::compute::concat(&chunks.iter().map(|a| a.as_ref()).collect::<Vec<_>>()).unwrap();
            let want = b.column(c);
            assert_eq!(got.len(), want.len());
            for i in 0..want.len() {
                assert_eq!(got.is_null(i), want.is_null(i), "column {c} row {i}");
            }
            if c == 1 {
                // NaN != NaN: compare the floats bitwise.
                let (g, w) = (got.as_primitive::<Float64Type>(), want.as_primitive::<Float64Type>());
                for i in 0..w.len() {
                    assert!(w.is_null(i) || g.value(i).to_bits() == w.value(i).to_bits() || (g.value(i).is_nan() && w.value(i).is_nan()), "row {i}");
                }
            } else {
                assert_eq!(&got, want, "column {c}");
            }
        }
    }
}
