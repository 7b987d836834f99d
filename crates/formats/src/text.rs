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

use std::collections::VecDeque;
use std::io::{BufRead, Read, Write};

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
    tessera_common::bytes::push_decimal_u64(out, v);
}

/// Appends `v` in decimal.
pub(crate) fn write_i64(out: &mut Vec<u8>, v: i64) {
    tessera_common::bytes::push_decimal_i64(out, v);
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
            // `Null`: every value is NULL, so the formatter is never asked for one.
            DataType::Decimal128(_, _) | DataType::Boolean | DataType::Null => {
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
        let cols: Vec<(TextCol<'_>, Option<arrow::buffer::NullBuffer>)> =
            batch.columns().iter().map(|c| Ok((TextCol::new(c)?, c.logical_nulls()))).collect::<Result<_>>()?;
        let (sep, csv) = (if self.csv { b',' } else { b'\t' }, self.csv);
        for r in 0..batch.num_rows() {
            for (c, (tc, nulls)) in cols.iter().enumerate() {
                if c > 0 {
                    self.buf.push(sep);
                }
                if nulls.as_ref().is_some_and(|n| n.is_null(r)) {
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
            if self.buf.len() >= crate::SINK_BUFFER_BYTES {
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

/// Least bytes of input one parsing task takes (ClickHouse's parallel parsing cuts its
/// input into segments of `min_chunk_bytes_for_parallel_parsing`, 10 MiB there; smaller
/// here so that a few MiB of input already keep every worker busy).
pub(crate) const MIN_CHUNK_BYTES: usize = 1 << 20;

/// Most bytes of input a chunk takes unless one row is longer.
pub(crate) const MAX_CHUNK_BYTES: usize = 4 << 20;

/// Bytes of the next chunk after one of `bytes` holding `rows` rows: about a batch
/// ([`READ_BATCH_ROWS`]) of rows that long, within [`MIN_CHUNK_BYTES`]..[`MAX_CHUNK_BYTES`].
pub(crate) fn next_chunk_bytes(bytes: usize, rows: u64) -> usize {
    (bytes / (rows as usize).max(1) * READ_BATCH_ROWS).clamp(MIN_CHUNK_BYTES, MAX_CHUNK_BYTES)
}

/// `parse` applied to each chunk, on the threads of the current rayon pool when there are
/// several.
pub(crate) fn parse_chunks<C: Sync, P: Send>(chunks: &[C], parse: impl Fn(&C) -> P + Sync + Send) -> Vec<P> {
    if chunks.len() > 1 {
        use rayon::prelude::*;
        chunks.par_iter().map(parse).collect()
    } else {
        chunks.iter().map(parse).collect()
    }
}

/// The end (one past its line break) of the last complete row in `bytes`, which starts at
/// a row boundary; `None` when no row ends in it. TabSeparated rows end at every `\n`. CSV
/// rows end at a `\n` outside quotes: with `exact`, following the grammar
/// [`Rows::split_row`] parses (a quote opens a quoted field only at a field's start, `""`
/// inside it is one quote), a field at a time; else by quote parity, a `\n` after an even
/// number of quotes (ClickHouse's CSV segmentation), counted with SIMD. Parity agrees with
/// the grammar unless an unquoted field holds a quote; a chunk that parity cut inside a
/// quoted field is found by its parser ([`Chunk::cut_in_quotes`]) and read again exactly.
fn rows_end(bytes: &[u8], csv: bool, exact: bool) -> Option<usize> {
    if !csv {
        return memchr::memrchr(b'\n', bytes).map(|i| i + 1);
    }
    if !exact {
        let mut quotes = bytecount::count(bytes, b'"');
        let mut end = bytes.len();
        while let Some(nl) = memchr::memrchr(b'\n', &bytes[..end]) {
            quotes -= bytecount::count(&bytes[nl..end], b'"');
            if quotes.is_multiple_of(2) {
                return Some(nl + 1);
            }
            end = nl;
        }
        return None;
    }
    let (mut i, mut end, mut field_start) = (0, None, true);
    loop {
        if field_start && bytes.get(i) == Some(&b'"') {
            i += 1;
            loop {
                i += memchr::memchr(b'"', &bytes[i..])? + 1;
                if bytes.get(i) != Some(&b'"') {
                    break;
                }
                i += 1;
            }
            field_start = false;
            continue;
        }
        let Some(k) = memchr::memchr2(b',', b'\n', &bytes[i..]) else { return end };
        i += k;
        if bytes[i] == b'\n' {
            end = Some(i + 1);
        }
        i += 1;
        field_start = true;
    }
}

/// Lines a chunk of input spans: its line breaks, and a last line without one.
fn line_count(chunk: &[u8]) -> u64 {
    let breaks = bytecount::count(chunk, b'\n') as u64;
    breaks + u64::from(chunk.last().is_some_and(|&c| c != b'\n'))
}

/// What parsing a chunk of rows needs, shared by the parsing tasks.
struct Rows {
    source: std::path::PathBuf,
    csv: bool,
    schema: SchemaRef,
    /// For each input field, the target column it fills.
    map: Vec<usize>,
    /// Whether a target column is filled by some input field (the others get NULL).
    filled: Vec<bool>,
}

/// The row scratch of one parsing task: a row's unescaped field bytes and where each lies.
#[derive(Default)]
struct RowScratch {
    bytes: Vec<u8>,
    fields: Vec<FieldRef>,
}

impl Rows {
    fn bad(&self, line: u64, detail: String) -> Error {
        corrupt(&self.source, format!("line {line}: {detail}"))
    }

    /// Splits the row starting at `*pos` of `bytes` into `row` (fields unescaped) and moves
    /// `*pos` past its line break; `*line` is the number of the last line read (a quoted
    /// CSV field may span lines). `false` when `bytes` ends inside a quoted field and more
    /// input follows them (`!last`).
    fn split_row(&self, bytes: &[u8], last: bool, pos: &mut usize, line: &mut u64, row: &mut RowScratch) -> Result<bool> {
        row.bytes.clear();
        row.fields.clear();
        *line += 1;
        if self.csv {
            return self.split_csv(bytes, last, pos, line, row);
        }
        let rest = &bytes[*pos..];
        let len = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
        *pos += (len + 1).min(rest.len());
        for raw in rest[..len].split(|&c| c == b'\t') {
            let start = row.bytes.len();
            if raw == b"\\N" {
                row.fields.push(FieldRef { start, end: start, quoted: false, null: true });
                continue;
            }
            let mut i = 0;
            while i < raw.len() {
                let Some(k) = memchr::memchr(b'\\', &raw[i..]) else {
                    row.bytes.extend_from_slice(&raw[i..]);
                    break;
                };
                row.bytes.extend_from_slice(&raw[i..i + k]);
                i += k;
                let Some(&e) = raw.get(i + 1) else {
                    return Err(self.bad(*line, "a field ends with a lone backslash".into()));
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
                        let Some(v) = hex else { return Err(self.bad(*line, "bad \\x escape".into())) };
                        i += 2;
                        v
                    }
                    other => other,
                };
                row.bytes.push(b);
            }
            row.fields.push(FieldRef { start, end: row.bytes.len(), quoted: false, null: false });
        }
        Ok(true)
    }

    fn split_csv(&self, bytes: &[u8], last: bool, pos: &mut usize, line: &mut u64, row: &mut RowScratch) -> Result<bool> {
        let mut i = *pos;
        loop {
            let start = row.bytes.len();
            if bytes.get(i) == Some(&b'"') {
                // Quoted: up to the closing quote ("" is one quote), across lines.
                i += 1;
                loop {
                    let Some(q) = memchr::memchr(b'"', &bytes[i..]) else {
                        if !last {
                            return Ok(false);
                        }
                        *line += line_count(&bytes[i..]).saturating_sub(1);
                        return Err(self.bad(*line, "a quoted field is not closed before the end of input".into()));
                    };
                    let text = &bytes[i..i + q];
                    *line += memchr::memchr_iter(b'\n', text).count() as u64;
                    row.bytes.extend_from_slice(text);
                    i += q + 1;
                    if bytes.get(i) != Some(&b'"') {
                        break;
                    }
                    row.bytes.push(b'"');
                    i += 1;
                }
                row.fields.push(FieldRef { start, end: row.bytes.len(), quoted: true, null: false });
            } else {
                let run = memchr::memchr2(b',', b'\n', &bytes[i..]).unwrap_or(bytes.len() - i);
                let mut raw = &bytes[i..i + run];
                if bytes.get(i + run) != Some(&b',') && raw.last() == Some(&b'\r') {
                    raw = &raw[..raw.len() - 1];
                }
                row.bytes.extend_from_slice(raw);
                row.fields.push(FieldRef { start, end: row.bytes.len(), quoted: false, null: raw == b"\\N" });
                i += run;
            }
            match bytes.get(i) {
                Some(b',') => i += 1,
                Some(b'\n') => {
                    *pos = i + 1;
                    return Ok(true);
                }
                None => {
                    *pos = i;
                    return Ok(true);
                }
                Some(b'\r') if bytes.get(i + 1).is_none_or(|&c| c == b'\n') => {
                    *pos = (i + 2).min(bytes.len());
                    return Ok(true);
                }
                Some(&c) => {
                    return Err(self.bad(
                        *line,
                        format!("field {} : unexpected {} after a quoted value", row.fields.len(), show(&[c])),
                    ));
                }
            }
        }
    }

    /// Parses a chunk whose first line is line `first_line + 1` (`last`: the input ends
    /// with it) into batches of at most [`READ_BATCH_ROWS`] rows; an error ends the list.
    fn parse_chunk(&self, bytes: &[u8], first_line: u64, last: bool) -> Chunk {
        let mut out = Chunk { batches: Vec::new(), cut_in_quotes: false };
        let (mut pos, mut line, mut row) = (0, first_line, RowScratch::default());
        while pos < bytes.len() {
            match self.parse_batch(bytes, last, &mut pos, &mut line, &mut row) {
                Ok(Some(b)) => out.batches.push(Ok(b)),
                Ok(None) => {
                    out.cut_in_quotes = true;
                    break;
                }
                Err(e) => {
                    out.batches.push(Err(e));
                    break;
                }
            }
        }
        out
    }

    /// Parses rows from `bytes[*pos..]` into one batch (at least one row: `*pos` is before
    /// the end); `None` when the chunk turns out to end inside a quoted field.
    fn parse_batch(
        &self,
        bytes: &[u8],
        last: bool,
        pos: &mut usize,
        line: &mut u64,
        row: &mut RowScratch,
    ) -> Result<Option<RecordBatch>> {
        let fields = self.schema.fields();
        let mut builders =
            fields.iter().map(|f| ColumnBuilder::new(f.data_type(), f.is_nullable(), 1024)).collect::<Result<Vec<_>>>()?;
        let mut n = 0;
        let first_line = *line + 1;
        while n < READ_BATCH_ROWS && *pos < bytes.len() && !builders.iter().any(ColumnBuilder::is_full) {
            if !self.split_row(bytes, last, pos, line, row)? {
                return Ok(None);
            }
            if row.fields.len() != self.map.len() {
                return Err(self.bad(*line, format!("expected {} fields, found {}", self.map.len(), row.fields.len())));
            }
            for (k, f) in row.fields.iter().enumerate() {
                let c = self.map[k];
                let text = &row.bytes[f.start..f.end];
                let b = &mut builders[c];
                let res = if f.null || (self.csv && !f.quoted && text.is_empty() && !b.is_bytes()) {
                    if f.null || fields[c].is_nullable() { b.push_null() } else { b.push_text(b"0") }
                } else if self.csv && !f.quoted && text.is_empty() && fields[c].is_nullable() {
                    b.push_null()
                } else {
                    b.push_bytes(text)
                };
                res.map_err(|m| corrupt(&self.source, format!("line {line}, column {} ({}): {m}", c + 1, fields[c].name())))?;
            }
            for (c, b) in builders.iter_mut().enumerate() {
                if !self.filled[c] {
                    b.push_null().map_err(|m| corrupt(&self.source, m))?;
                }
            }
            n += 1;
        }
        let mut cols = Vec::with_capacity(builders.len());
        for (c, b) in builders.iter_mut().enumerate() {
            cols.push(b.finish().map_err(|(r, m)| {
                corrupt(&self.source, format!("row {} of lines {first_line}.., column {} ({}): {m}", r + 1, c + 1, fields[c].name()))
            })?);
        }
        Ok(Some(RecordBatch::try_new(self.schema.clone(), cols)?))
    }
}

/// What parsing one chunk gave.
struct Chunk {
    /// Its batches in order; an error is last.
    batches: Vec<Result<RecordBatch>>,
    /// The chunk ends inside a quoted CSV field: quote parity cut it where the grammar
    /// does not end a row (a quote inside an unquoted field), so it is read again.
    cut_in_quotes: bool,
}

/// Reads `src` into `buf` until `buf` holds at least `want` bytes and `cut(buf)` finds where
/// its whole rows end (what `cut` returns), reading twice as much while a row is longer;
/// `None` at the end of input (`eof` set: all of `buf` is rows). Shared by the readers that
/// parse chunks of rows in parallel ([`TextReader`], [`crate::parallel::ParallelChunks`]).
pub(crate) fn read_chunk<T>(
    src: &mut impl BufRead,
    buf: &mut Vec<u8>,
    eof: &mut bool,
    want: usize,
    source: &std::path::Path,
    cut: impl Fn(&[u8]) -> Option<T>,
) -> Result<Option<T>> {
    let mut want = want;
    loop {
        if !*eof && buf.len() < want {
            // Straight into `buf`: a BufReader passes reads larger than its buffer through
            // once it is empty, so the bytes are copied once, not twice.
            let need = want - buf.len();
            buf.reserve(need);
            let got = src.by_ref().take(need as u64).read_to_end(buf).map_err(|e| crate::in_err(source, e))?;
            if got < need {
                *eof = true;
            }
        }
        if *eof {
            return Ok(None);
        }
        if let Some(end) = cut(buf) {
            return Ok(Some(end));
        }
        // A row longer than the chunk: read twice as much before looking again.
        want = buf.len() * 2;
    }
}

/// A reader that parses its input a group of chunks at a time ([`next_batch`]).
pub(crate) trait ChunkedReader {
    /// Parsed batches not yet returned, in input order (an error is last), and whether
    /// the input is done.
    fn ready(&mut self) -> (&mut VecDeque<Result<RecordBatch>>, &mut bool);
    /// Parses the next chunks into [`ChunkedReader::ready`]; `false` at the end of input.
    fn fill(&mut self) -> Result<bool>;
}

/// The next batch of a [`ChunkedReader`]: the first error ends the input, after the
/// batches before it.
pub(crate) fn next_batch(r: &mut impl ChunkedReader) -> Option<Result<RecordBatch>> {
    loop {
        let (ready, done) = r.ready();
        if *done {
            return None;
        }
        match ready.pop_front() {
            Some(Ok(b)) => return Some(Ok(b)),
            Some(Err(e)) => {
                *done = true;
                ready.clear();
                return Some(Err(e));
            }
            None => match r.fill() {
                Ok(true) => {}
                Ok(false) => {
                    *r.ready().1 = true;
                    return None;
                }
                Err(e) => r.ready().0.push_back(Err(e)),
            },
        }
    }
}

/// Reads TabSeparated or CSV rows into batches of the target schema.
///
/// Parallel parsing (as ClickHouse's `input_format_parallel_parsing`): the input is read in
/// chunks of whole rows (1-4 MiB, cut after the last row that ends in them), one chunk
/// per thread of the current rayon pool is parsed at a time, each on its own thread, and
/// their batches come out in input order. A chunk's batches end at the chunk (so batches
/// may hold fewer than [`READ_BATCH_ROWS`] rows). The first error ends the input: every
/// whole batch before it comes out first, then the error, as when reading row by row.
pub struct TextReader<R: BufRead> {
    src: R,
    rows: Rows,
    /// Input read and not yet parsed; starts at a row boundary.
    buf: Vec<u8>,
    /// Lines before `buf` (the header included).
    lines: u64,
    /// Bytes a chunk takes: about [`READ_BATCH_ROWS`] rows at the rows' length so far.
    chunk_bytes: usize,
    /// Batches parsed and not yet returned, in input order (an error is last).
    ready: VecDeque<Result<RecordBatch>>,
    /// CSV chunks are cut by the grammar, not by quote parity (see [`rows_end`]): after
    /// parity cut a quoted field once.
    exact: bool,
    eof: bool,
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
        let n = schema.fields().len();
        let rows = Rows { source: opts.source.clone(), csv, map: (0..n).collect(), filled: vec![true; n], schema };
        let mut r = TextReader {
            src,
            rows,
            buf: Vec::new(),
            lines: 0,
            chunk_bytes: MIN_CHUNK_BYTES,
            ready: VecDeque::new(),
            exact: false,
            eof: false,
            done: false,
        };
        if matches!(format, Format::CsvWithNames | Format::TabSeparatedWithNames) {
            let end = r.read_rows(1, true)?;
            if end == 0 {
                r.done = true;
                return Ok(r);
            }
            let (mut pos, mut row) = (0, RowScratch::default());
            r.rows.split_row(&r.buf[..end], true, &mut pos, &mut r.lines, &mut row)?;
            r.buf.drain(..pos);
            let mut map = Vec::new();
            for f in &row.fields {
                let name = String::from_utf8_lossy(&row.bytes[f.start..f.end]).into_owned();
                let fields = r.rows.schema.fields();
                let c = fields.iter().position(|t| t.name() == &name)
                    .or_else(|| fields.iter().position(|t| t.name().eq_ignore_ascii_case(&name)))
                    .ok_or_else(|| Error::InvalidArgument(format!(
                        "{}: the header names column {name} that the table does not have", opts.source.display()
                    )))?;
                map.push(c);
            }
            for (c, f) in r.rows.schema.fields().iter().enumerate() {
                if !map.contains(&c) && !f.is_nullable() {
                    return Err(Error::InvalidArgument(format!(
                        "{}: the header lacks column {} ({}), which is not nullable",
                        opts.source.display(),
                        c + 1,
                        f.name()
                    )));
                }
            }
            r.rows.filled = (0..n).map(|c| map.contains(&c)).collect();
            r.rows.map = map;
        }
        Ok(r)
    }

    /// Reads input until `buf` holds at least `want` bytes with a row ending in them, or
    /// the input ends; returns where `buf`'s whole rows end (all of it at the end of input),
    /// found as [`rows_end`] does (`exact`).
    fn read_rows(&mut self, want: usize, exact: bool) -> Result<usize> {
        let csv = self.rows.csv;
        let end = read_chunk(&mut self.src, &mut self.buf, &mut self.eof, want, &self.rows.source, |b| rows_end(b, csv, exact))?;
        Ok(end.unwrap_or(self.buf.len()))
    }

    /// Parses the next chunks, one per thread of the rayon pool, into `ready`; `false` at
    /// the end of input.
    fn fill_chunks(&mut self) -> Result<bool> {
        // (bytes, lines before them, whether the input ends with them)
        let mut chunks: Vec<(Vec<u8>, u64, bool)> = Vec::new();
        while chunks.len() < rayon::current_num_threads().max(1) {
            let end = self.read_rows(self.chunk_bytes, self.exact)?;
            if end == 0 {
                break;
            }
            let rest = self.buf.split_off(end);
            let chunk = std::mem::replace(&mut self.buf, rest);
            let lines = line_count(&chunk);
            // About a batch of rows per chunk, within the bounds.
            self.chunk_bytes = next_chunk_bytes(chunk.len(), lines);
            chunks.push((chunk, self.lines, self.eof && self.buf.is_empty()));
            self.lines += lines;
        }
        let rows = &self.rows;
        let parse = |(bytes, first, last): &(Vec<u8>, u64, bool)| rows.parse_chunk(bytes, *first, *last);
        let parsed: Vec<Chunk> = parse_chunks(&chunks, parse);
        for (k, chunk) in parsed.into_iter().enumerate() {
            if chunk.cut_in_quotes {
                // Parity cut this chunk inside a quoted field: the rows from its start are
                // read again, cut by the grammar from now on.
                self.exact = true;
                self.lines = chunks[k].1;
                let mut again: Vec<u8> = chunks.drain(k..).flat_map(|(bytes, _, _)| bytes).collect();
                again.append(&mut self.buf);
                self.buf = again;
                return Ok(true);
            }
            let failed = chunk.batches.last().is_some_and(|b| b.is_err());
            self.ready.extend(chunk.batches);
            if failed {
                break;
            }
        }
        Ok(!chunks.is_empty())
    }
}

impl<R: BufRead> ChunkedReader for TextReader<R> {
    fn ready(&mut self) -> (&mut VecDeque<Result<RecordBatch>>, &mut bool) {
        (&mut self.ready, &mut self.done)
    }

    fn fill(&mut self) -> Result<bool> {
        self.fill_chunks()
    }
}

impl<R: BufRead> Iterator for TextReader<R> {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        next_batch(self)
    }
}

impl<R: BufRead + Send> BatchReader for TextReader<R> {
    fn schema(&self) -> SchemaRef {
        self.rows.schema.clone()
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
