//! ClickHouse's text formats `TabSeparated` (`TSV`), `TabSeparatedWithNames`, `CSV` and
//! `CSVWithNames`, and the value text they share with `JSONEachRow`.
//!
//! | value | TabSeparated | CSV |
//! |---|---|---|
//! | NULL | `\N` | `\N` (reading: also an empty unquoted field) |
//! | string | escaped: `\b \f \n \r \t \0 \\ \'` | always in `"`, `"` doubled |
//! | bytes not UTF-8 | as they are | as they are |
//! | Date32 / DateTime | `2020-01-02` / `2020-01-02 03:04:05` (UTC) | the same in `"` |
//! | floats | shortest text that reads back: `0.1`, `1e-7`, `1e21`, `-0`, `nan`, `inf`, `-inf` | same |
//!
//! Floats follow ClickHouse (its double-conversion setup): decimal notation when the
//! decimal exponent is in -6..21, else `d.ddde±x` without a `+`. A row ends at `\n` (CSV
//! also accepts `\r\n`; a quoted CSV field may hold line breaks). Reading, a line's field
//! count must match the columns; with names, the header's names are matched to the target
//! columns (target columns it lacks get NULL, or are an error when not nullable).

use std::io::{BufRead, Write};

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{
    DataType, Date32Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, SchemaRef, TimeUnit,
    TimestampSecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use tessera_common::{Error, Result};

use crate::builder::{ColumnBuilder, show, write_date, write_datetime};
use crate::native::StrView;
use crate::{BatchReader, BatchWriter, Format, READ_BATCH_ROWS, ReadOptions, corrupt, out_err};

/// Appends `v` in decimal.
pub(crate) fn write_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// Appends `v` in decimal.
pub(crate) fn write_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// Appends a float as ClickHouse writes it; `sci` is Rust's shortest round-trip text in
/// scientific notation (`{:e}`: `1.5e0`, `-1e-7`, `0e0`).
fn write_float_sci(out: &mut Vec<u8>, sci: &str) {
    let (neg, body) = match sci.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, sci),
    };
    let (mant, exp) = body.split_once('e').unwrap_or((body, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: Vec<u8> = mant.bytes().filter(|c| c.is_ascii_digit()).collect();
    if neg {
        out.push(b'-');
    }
    if (-6..21).contains(&exp) {
        if exp >= 0 {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                out.extend_from_slice(&digits);
                out.extend(std::iter::repeat_n(b'0', int_len - digits.len()));
            } else {
                out.extend_from_slice(&digits[..int_len]);
                out.push(b'.');
                out.extend_from_slice(&digits[int_len..]);
            }
        } else {
            out.extend_from_slice(b"0.");
            out.extend(std::iter::repeat_n(b'0', (-exp - 1) as usize));
            out.extend_from_slice(&digits);
        }
    } else {
        out.push(digits[0]);
        if digits.len() > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        out.push(b'e');
        write_i64(out, i64::from(exp));
    }
}

/// Appends a Float64 as ClickHouse's text formats write it (`nan`, `inf`, `-inf` too).
pub(crate) fn write_f64(out: &mut Vec<u8>, v: f64) {
    if v.is_nan() {
        out.extend_from_slice(b"nan");
    } else if v.is_infinite() {
        out.extend_from_slice(if v > 0.0 { b"inf" } else { b"-inf" });
    } else {
        let mut s = String::new();
        let _ = std::fmt::write(&mut s, format_args!("{v:e}"));
        write_float_sci(out, &s);
    }
}

/// Appends a Float32 (its own shortest digits, as ClickHouse writes Float32).
pub(crate) fn write_f32(out: &mut Vec<u8>, v: f32) {
    if v.is_nan() || v.is_infinite() {
        write_f64(out, f64::from(v));
    } else {
        let mut s = String::new();
        let _ = std::fmt::write(&mut s, format_args!("{v:e}"));
        write_float_sci(out, &s);
    }
}

/// A column of a batch being written as text.
pub(crate) enum TextCol<'b> {
    /// Signed integers (any width).
    Int(Box<dyn Fn(usize) -> i64 + 'b>),
    /// Unsigned integers (any width).
    UInt(Box<dyn Fn(usize) -> u64 + 'b>),
    F32(&'b arrow::array::Float32Array),
    F64(&'b arrow::array::Float64Array),
    Date(&'b arrow::array::Date32Array),
    Time(&'b arrow::array::TimestampSecondArray),
    Str(StrView<'b>),
    /// Types Tessera computes but does not store (128-bit sums as Decimal128(38, 0),
    /// Boolean): Arrow's display text, as a number or `true`/`false`.
    Other(arrow::util::display::ArrayFormatter<'b>),
}

impl<'b> TextCol<'b> {
    /// The text view of `col`.
    ///
    /// # Errors
    /// [`Error::NotImplemented`] for a type Tessera does not store.
    pub(crate) fn new(col: &'b ArrayRef) -> Result<Self> {
        Ok(match col.data_type() {
            DataType::Int8 => {
                let a = col.as_primitive::<Int8Type>();
                TextCol::Int(Box::new(move |i| i64::from(a.value(i))))
            }
            DataType::Int16 => {
                let a = col.as_primitive::<Int16Type>();
                TextCol::Int(Box::new(move |i| i64::from(a.value(i))))
            }
            DataType::Int32 => {
                let a = col.as_primitive::<Int32Type>();
                TextCol::Int(Box::new(move |i| i64::from(a.value(i))))
            }
            DataType::Int64 => {
                let a = col.as_primitive::<Int64Type>();
                TextCol::Int(Box::new(move |i| a.value(i)))
            }
            DataType::UInt8 => {
                let a = col.as_primitive::<UInt8Type>();
                TextCol::UInt(Box::new(move |i| u64::from(a.value(i))))
            }
            DataType::UInt16 => {
                let a = col.as_primitive::<UInt16Type>();
                TextCol::UInt(Box::new(move |i| u64::from(a.value(i))))
            }
            DataType::UInt32 => {
                let a = col.as_primitive::<UInt32Type>();
                TextCol::UInt(Box::new(move |i| u64::from(a.value(i))))
            }
            DataType::UInt64 => {
                let a = col.as_primitive::<UInt64Type>();
                TextCol::UInt(Box::new(move |i| a.value(i)))
            }
            DataType::Float32 => TextCol::F32(col.as_primitive::<Float32Type>()),
            DataType::Float64 => TextCol::F64(col.as_primitive::<Float64Type>()),
            DataType::Date32 => TextCol::Date(col.as_primitive::<Date32Type>()),
            DataType::Timestamp(TimeUnit::Second, None) => TextCol::Time(col.as_primitive::<TimestampSecondType>()),
            DataType::Utf8 | DataType::Binary => TextCol::Str(StrView::of(col.as_ref())),
            DataType::Decimal128(_, _) | DataType::Boolean => {
                TextCol::Other(arrow::util::display::ArrayFormatter::try_new(col.as_ref(), &Default::default())?)
            }
            other => return Err(Error::NotImplemented(format!("writing a column of type {other} as text"))),
        })
    }
}

/// ClickHouse's TabSeparated escaping of `s`.
pub(crate) fn tsv_escape(out: &mut Vec<u8>, s: &[u8]) {
    let mut start = 0;
    for (i, &c) in s.iter().enumerate() {
        let esc = match c {
            b'\\' => b'\\',
            b'\t' => b't',
            b'\n' => b'n',
            b'\r' => b'r',
            0 => b'0',
            8 => b'b',
            12 => b'f',
            b'\'' => b'\'',
            _ => continue,
        };
        out.extend_from_slice(&s[start..i]);
        out.extend_from_slice(&[b'\\', esc]);
        start = i + 1;
    }
    out.extend_from_slice(&s[start..]);
}

/// `s` in CSV double quotes (inner quotes doubled).
pub(crate) fn csv_quote(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    let mut start = 0;
    for (i, &c) in s.iter().enumerate() {
        if c == b'"' {
            out.extend_from_slice(&s[start..=i]);
            out.push(b'"');
            start = i + 1;
        }
    }
    out.extend_from_slice(&s[start..]);
    out.push(b'"');
}

/// Writes batches as TabSeparated or CSV rows (after a header line of names).
pub struct TextWriter<'a> {
    out: Box<dyn Write + Send + 'a>,
    csv: bool,
    buf: Vec<u8>,
}

impl<'a> TextWriter<'a> {
    /// A writer of `format` (TabSeparated, CSV, or their `WithNames`); writes the header.
    ///
    /// # Errors
    /// [`Error::Io`].
    pub fn new(format: Format, schema: &SchemaRef, mut out: Box<dyn Write + Send + 'a>) -> Result<Self> {
        let csv = matches!(format, Format::Csv | Format::CsvWithNames);
        let mut buf = Vec::new();
        if matches!(format, Format::CsvWithNames | Format::TabSeparatedWithNames) {
            for (i, f) in schema.fields().iter().enumerate() {
                if i > 0 {
                    buf.push(if csv { b',' } else { b'\t' });
                }
                if csv {
                    csv_quote(&mut buf, f.name().as_bytes());
                } else {
                    tsv_escape(&mut buf, f.name().as_bytes());
                }
            }
            buf.push(b'\n');
            out.write_all(&buf).map_err(out_err)?;
            buf.clear();
        }
        Ok(TextWriter { out, csv, buf })
    }
}

impl BatchWriter for TextWriter<'_> {
    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let cols: Vec<(TextCol<'_>, Option<&arrow::buffer::NullBuffer>)> =
            batch.columns().iter().map(|c| Ok((TextCol::new(c)?, c.nulls()))).collect::<Result<_>>()?;
        let (sep, csv) = (if self.csv { b',' } else { b'\t' }, self.csv);
        for r in 0..batch.num_rows() {
            for (c, (tc, nulls)) in cols.iter().enumerate() {
                if c > 0 {
                    self.buf.push(sep);
                }
                if nulls.is_some_and(|n| n.is_null(r)) {
                    self.buf.extend_from_slice(b"\\N");
                    continue;
                }
                let out = &mut self.buf;
                match tc {
                    TextCol::Int(f) => write_i64(out, f(r)),
                    TextCol::UInt(f) => write_u64(out, f(r)),
                    TextCol::F32(a) => write_f32(out, a.value(r)),
                    TextCol::F64(a) => write_f64(out, a.value(r)),
                    TextCol::Date(a) => {
                        if csv {
                            out.push(b'"');
                        }
                        write_date(out, i64::from(a.value(r)));
                        if csv {
                            out.push(b'"');
                        }
                    }
                    TextCol::Time(a) => {
                        if csv {
                            out.push(b'"');
                        }
                        write_datetime(out, a.value(r));
                        if csv {
                            out.push(b'"');
                        }
                    }
                    TextCol::Other(f) => {
                        use std::io::Write as _;
                        let _ = write!(out, "{}", f.value(r));
                    }
                    TextCol::Str(a) => {
                        if csv {
                            csv_quote(out, a.get(r));
                        } else {
                            tsv_escape(out, a.get(r));
                        }
                    }
                }
            }
            self.buf.push(b'\n');
            if self.buf.len() >= 1 << 16 {
                self.out.write_all(&self.buf).map_err(out_err)?;
                self.buf.clear();
            }
        }
        self.out.write_all(&self.buf).map_err(out_err)?;
        self.buf.clear();
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> Result<()> {
        self.out.flush().map_err(out_err)
    }
}

/// One field of a row being read: its bytes in the row scratch buffer, and how it was
/// written.
#[derive(Clone, Copy)]
struct FieldRef {
    start: usize,
    end: usize,
    /// CSV: the field was in quotes (so `\N` and emptiness are data).
    quoted: bool,
    /// TabSeparated: the field was exactly `\N`.
    null: bool,
}

/// Reads TabSeparated or CSV rows into batches of the target schema.
pub struct TextReader<R: BufRead> {
    src: R,
    opts: ReadOptions,
    csv: bool,
    schema: SchemaRef,
    /// For each input field, the target column it fills.
    map: Vec<usize>,
    line: Vec<u8>,
    scratch: Vec<u8>,
    fields: Vec<FieldRef>,
    /// Lines (rows) read so far, the header included.
    lines: u64,
    done: bool,
}

impl<R: BufRead> TextReader<R> {
    /// Reads the header line (if `format` has one) and matches it to `opts.schema`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for header names the target lacks, or target columns the
    /// header lacks that are not nullable; [`Error::Io`].
    pub fn new(format: Format, src: R, opts: &ReadOptions) -> Result<Self> {
        let schema = opts.schema.clone().expect("checked by reader()");
        let csv = matches!(format, Format::Csv | Format::CsvWithNames);
        let mut r = TextReader {
            src,
            opts: opts.clone(),
            csv,
            map: (0..schema.fields().len()).collect(),
            schema,
            line: Vec::new(),
            scratch: Vec::new(),
            fields: Vec::new(),
            lines: 0,
            done: false,
        };
        if matches!(format, Format::CsvWithNames | Format::TabSeparatedWithNames) {
            if !r.next_row()? {
                r.done = true;
                return Ok(r);
            }
            let mut map = Vec::new();
            for f in &r.fields {
                let name = String::from_utf8_lossy(&r.scratch[f.start..f.end]).into_owned();
                let c = r.schema.fields().iter().position(|t| t.name() == &name)
                    .or_else(|| r.schema.fields().iter().position(|t| t.name().eq_ignore_ascii_case(&name)))
                    .ok_or_else(|| Error::InvalidArgument(format!(
                        "{}: the header names column {name} that the table does not have", r.opts.source.display()
                    )))?;
                map.push(c);
            }
            for (c, f) in r.schema.fields().iter().enumerate() {
                if !map.contains(&c) && !f.is_nullable() {
                    return Err(Error::InvalidArgument(format!(
                        "{}: the header lacks column {} ({}), which is not nullable",
                        r.opts.source.display(),
                        c + 1,
                        f.name()
                    )));
                }
            }
            r.map = map;
        }
        Ok(r)
    }

    fn bad(&self, detail: String) -> Error {
        corrupt(&self.opts.source, format!("line {}: {detail}", self.lines))
    }

    /// Reads the next row's fields into `scratch`/`fields`; `false` at the end of input.
    fn next_row(&mut self) -> Result<bool> {
        self.line.clear();
        let n = self.src.read_until(b'\n', &mut self.line).map_err(|e| crate::in_err(&self.opts.source, e))?;
        if n == 0 {
            return Ok(false);
        }
        self.lines += 1;
        self.scratch.clear();
        self.fields.clear();
        if self.csv {
            self.split_csv()?;
        } else {
            if self.line.last() == Some(&b'\n') {
                self.line.pop();
            }
            self.split_tsv()?;
        }
        Ok(true)
    }

    fn split_tsv(&mut self) -> Result<()> {
        let line = std::mem::take(&mut self.line);
        for raw in line.split(|&c| c == b'\t') {
            let start = self.scratch.len();
            if raw == b"\\N" {
                self.fields.push(FieldRef { start, end: start, quoted: false, null: true });
                continue;
            }
            let mut i = 0;
            while i < raw.len() {
                let c = raw[i];
                if c != b'\\' {
                    let run = raw[i..].iter().position(|&b| b == b'\\').unwrap_or(raw.len() - i);
                    self.scratch.extend_from_slice(&raw[i..i + run]);
                    i += run;
                    continue;
                }
                let Some(&e) = raw.get(i + 1) else {
                    self.line = line;
                    return Err(self.bad("a field ends with a lone backslash".into()));
                };
                i += 2;
                let b = match e {
                    b'b' => 8,
                    b'f' => 12,
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'0' => 0,
                    b'a' => 7,
                    b'v' => 11,
                    b'x' => {
                        let hex = raw.get(i..i + 2).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok());
                        match hex {
                            Some(v) => {
                                i += 2;
                                v
                            }
                            None => {
                                self.line = line;
                                return Err(self.bad("bad \\x escape".into()));
                            }
                        }
                    }
                    other => other,
                };
                self.scratch.push(b);
            }
            self.fields.push(FieldRef { start, end: self.scratch.len(), quoted: false, null: false });
        }
        self.line = line;
        Ok(())
    }

    fn split_csv(&mut self) -> Result<()> {
        let mut i = 0;
        loop {
            let start = self.scratch.len();
            if self.line.get(i) == Some(&b'"') {
                // Quoted: up to the closing quote ("" is one quote), across lines.
                i += 1;
                loop {
                    if i >= self.line.len() {
                        let n = self.src.read_until(b'\n', &mut self.line).map_err(|e| crate::in_err(&self.opts.source, e))?;
                        if n == 0 {
                            return Err(self.bad("a quoted field is not closed before the end of input".into()));
                        }
                        self.lines += 1;
                        continue;
                    }
                    let c = self.line[i];
                    if c == b'"' {
                        if self.line.get(i + 1) == Some(&b'"') {
                            self.scratch.push(b'"');
                            i += 2;
                            continue;
                        }
                        i += 1;
                        break;
                    }
                    self.scratch.push(c);
                    i += 1;
                }
                self.fields.push(FieldRef { start, end: self.scratch.len(), quoted: true, null: false });
            } else {
                let run = self.line[i..].iter().position(|&b| b == b',' || b == b'\n').unwrap_or(self.line.len() - i);
                let mut raw = &self.line[i..i + run];
                if self.line.get(i + run) != Some(&b',') && raw.last() == Some(&b'\r') {
                    raw = &raw[..raw.len() - 1];
                }
                self.scratch.extend_from_slice(raw);
                self.fields.push(FieldRef { start, end: self.scratch.len(), quoted: false, null: raw == b"\\N" });
                i += run;
            }
            match self.line.get(i) {
                Some(b',') => i += 1,
                Some(b'\n') | None => return Ok(()),
                Some(b'\r') if self.line.get(i + 1).is_none_or(|&c| c == b'\n') => return Ok(()),
                Some(&c) => {
                    return Err(self.bad(format!("field {} : unexpected {} after a quoted value", self.fields.len(), show(&[c]))));
                }
            }
        }
    }

    fn read_batch(&mut self) -> Result<Option<RecordBatch>> {
        let fields = self.schema.fields().clone();
        let mut builders = fields
            .iter()
            .map(|f| ColumnBuilder::new(f.data_type(), f.is_nullable(), 1024))
            .collect::<Result<Vec<_>>>()?;
        let filled: Vec<bool> = (0..fields.len()).map(|c| self.map.contains(&c)).collect();
        let mut n = 0;
        let first_line = self.lines + 1;
        while n < READ_BATCH_ROWS && !builders.iter().any(ColumnBuilder::is_full) {
            if !self.next_row()? {
                self.done = true;
                break;
            }
            if self.fields.len() != self.map.len() {
                return Err(self.bad(format!("expected {} fields, found {}", self.map.len(), self.fields.len())));
            }
            for (k, f) in self.fields.iter().enumerate() {
                let c = self.map[k];
                let text = &self.scratch[f.start..f.end];
                let b = &mut builders[c];
                let res = if f.null || (self.csv && !f.quoted && text.is_empty() && !b.is_bytes()) {
                    if f.null || fields[c].is_nullable() { b.push_null() } else { b.push_text(b"0") }
                } else if self.csv && !f.quoted && text.is_empty() && fields[c].is_nullable() {
                    b.push_null()
                } else {
                    b.push_bytes(text)
                };
                res.map_err(|m| {
                    corrupt(&self.opts.source, format!("line {}, column {} ({}): {m}", self.lines, c + 1, fields[c].name()))
                })?;
            }
            for (c, b) in builders.iter_mut().enumerate() {
                if !filled[c] {
                    b.push_null().map_err(|m| corrupt(&self.opts.source, m))?;
                }
            }
            n += 1;
        }
        if n == 0 {
            return Ok(None);
        }
        let mut cols = Vec::with_capacity(builders.len());
        for (c, b) in builders.iter_mut().enumerate() {
            cols.push(b.finish().map_err(|(r, m)| {
                corrupt(&self.opts.source, format!("row {} of lines {first_line}.., column {} ({}): {m}", r + 1, c + 1, fields[c].name()))
            })?);
        }
        Ok(Some(RecordBatch::try_new(self.schema.clone(), cols)?))
    }
}

impl<R: BufRead> Iterator for TextReader<R> {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.read_batch() {
            Ok(Some(b)) => Some(Ok(b)),
            Ok(None) => None,
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

impl<R: BufRead + Send> BatchReader for TextReader<R> {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

/// Shared by the tests: the float text of `v`.
#[cfg(test)]
pub(crate) fn f64_text(v: f64) -> String {
    let mut out = Vec::new();
    write_f64(&mut out, v);
    String::from_utf8(out).expect("ASCII")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_as_clickhouse_writes_them() {
        // The texts chDB 26.9 writes for these values (TSV).
        for (v, want) in [
            (1e-7, "1e-7"),
            (1e20, "100000000000000000000"),
            (1e21, "1e21"),
            (0.1 + 0.2, "0.30000000000000004"),
            (5e-324, "5e-324"),
            (1.797_693_134_862_315_7e308, "1.7976931348623157e308"),
            (-0.0, "-0"),
            (0.000_001, "0.000001"),
            (1.5, "1.5"),
            (-123.0, "-123"),
            (f64::NAN, "nan"),
            (f64::NEG_INFINITY, "-inf"),
        ] {
            assert_eq!(f64_text(v), want);
        }
        for (v, want) in [(1.5f32, "1.5"), (3.402_823_5e38, "3.4028235e38"), (1e-45, "1e-45"), (123_456_789.0, "123456790"), (0.1, "0.1")] {
            let mut out = Vec::new();
            write_f32(&mut out, v);
            assert_eq!(String::from_utf8(out).unwrap(), want);
        }
    }

    #[test]
    fn escapes() {
        let mut out = Vec::new();
        tsv_escape(&mut out, b"a'b\tc\\d/e\n\0\x08\x0c\r\xff");
        assert_eq!(out, b"a\\'b\\tc\\\\d/e\\n\\0\\b\\f\\r\xff");
        out.clear();
        csv_quote(&mut out, b"a\"b");
        assert_eq!(out, b"\"a\"\"b\"");
    }
}
