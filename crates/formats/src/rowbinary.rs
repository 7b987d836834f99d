//! ClickHouse `RowBinary`, `RowBinaryWithNames` and `RowBinaryWithNamesAndTypes`.
//!
//! ```text
//!  RowBinary:                  row row ...
//!  RowBinaryWithNames:         VarUInt columns | String name * columns | row row ...
//!  RowBinaryWithNamesAndTypes: VarUInt columns | String name * columns | String type * columns | row ...
//!  row:   value * columns
//!  value: T           as in Native (little-endian fixed width; String = VarUInt length + bytes)
//!         Nullable(T) UInt8 1 = NULL (nothing follows), or 0 then the value of T
//! ```
//!
//! Without names, columns are the target schema's in order; with names, they are matched
//! to it by name. The reader makes batches of [`READ_BATCH_ROWS`](crate::READ_BATCH_ROWS).

use std::io::{self, BufRead, Write};
use std::sync::Arc;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use tessera_common::{Error, Result};

use crate::builder::ColumnBuilder;
use crate::chtype::{self, Wire};
use crate::parallel::{Framing, ParallelChunks, Position, Walk};
use crate::native::{
    FixedBytes, MAX_STRING_BYTES, StrView, fixed_bytes, layouts, put_string, put_varuint, read_string, read_varuint, varuint_at,
};
use crate::{BatchReader, BatchWriter, Format, READ_BATCH_ROWS, ReadOptions, corrupt, out_err};

/// Writes batches as RowBinary rows (after the header of the `WithNames` variants).
pub struct RowBinaryWriter<'a> {
    out: Box<dyn Write + Send + 'a>,
    schema: SchemaRef,
    layouts: Vec<(Wire, String)>,
    buf: Vec<u8>,
    rows: u64,
}

impl<'a> RowBinaryWriter<'a> {
    /// A writer of `format` (one of the three RowBinary formats) for batches of `schema`;
    /// writes the header now.
    ///
    /// # Errors
    /// [`Error::NotImplemented`] for a column type without a ClickHouse type; [`Error::Io`].
    pub fn new(format: Format, schema: &SchemaRef, mut out: Box<dyn Write + Send + 'a>) -> Result<Self> {
        let layouts = layouts(schema)?;
        let mut buf = Vec::new();
        if format != Format::RowBinary {
            put_varuint(&mut buf, schema.fields().len() as u64);
            for f in schema.fields() {
                put_string(&mut buf, f.name().as_bytes());
            }
            if format == Format::RowBinaryWithNamesAndTypes {
                for (_, t) in &layouts {
                    put_string(&mut buf, t.as_bytes());
                }
            }
            out.write_all(&buf).map_err(out_err)?;
            buf.clear();
        }
        Ok(RowBinaryWriter { out, schema: schema.clone(), layouts, buf, rows: 0 })
    }
}

/// One column of a batch being written row by row.
enum Cells<'b> {
    Fixed(FixedBytes, usize),
    Str(StrView<'b>),
}

impl BatchWriter for RowBinaryWriter<'_> {
    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let cols: Vec<(Cells<'_>, Option<Option<arrow::buffer::NullBuffer>>)> = batch
            .columns()
            .iter()
            .zip(&self.layouts)
            .zip(self.schema.fields())
            .map(|((col, (wire, _)), f)| {
                let cells = match wire {
                    Wire::String => Cells::Str(StrView::of(col.as_ref())),
                    w => Cells::Fixed(fixed_bytes(col.as_ref(), *w, f.name(), self.rows)?, w.width().unwrap_or(0)),
                };
                Ok((cells, (f.is_nullable() || *wire == Wire::Nothing).then(|| col.logical_nulls())))
            })
            .collect::<Result<_>>()?;
        for r in 0..batch.num_rows() {
            for (cells, nullable) in &cols {
                if let Some(nulls) = nullable {
                    if nulls.as_ref().is_some_and(|n| n.is_null(r)) {
                        self.buf.push(1);
                        continue;
                    }
                    self.buf.push(0);
                }
                match cells {
                    Cells::Fixed(b, w) => self.buf.extend_from_slice(&b.bytes()[r * w..(r + 1) * w]),
                    Cells::Str(view) => put_string(&mut self.buf, view.get(r)),
                }
            }
            if self.buf.len() >= crate::SINK_BUFFER_BYTES {
                self.out.write_all(&self.buf).map_err(out_err)?;
                self.buf.clear();
            }
        }
        self.out.write_all(&self.buf).map_err(out_err)?;
        self.buf.clear();
        self.rows += batch.num_rows() as u64;
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> Result<()> {
        self.out.flush().map_err(out_err)
    }
}

/// One input column: its wire layout, nullability, and the target column it fills.
#[derive(Clone)]
struct InCol {
    wire: Wire,
    nullable: bool,
    name: String,
}

/// Reads RowBinary rows into batches.
pub struct RowBinaryReader<R: BufRead> {
    src: R,
    opts: ReadOptions,
    cols: Vec<InCol>,
    /// The schema the builders make (the input's); each batch is then fitted to `schema`.
    input_schema: SchemaRef,
    schema: SchemaRef,
    rows: u64,
    done: bool,
    tmp: Vec<u8>,
    /// The first batch, read at open when there is no target schema.
    pending: Option<RecordBatch>,
    /// Whether `schema` is decided (batches are fitted to it).
    fitted: bool,
}

impl<R: BufRead> RowBinaryReader<R> {
    /// Reads the header (if `format` has one) and matches it to `opts.schema`.
    ///
    /// # Errors
    /// [`Error::Corrupt`] for a bad header, [`Error::InvalidArgument`] for names the
    /// target lacks, [`Error::NotImplemented`] for unsupported types.
    pub fn new(format: Format, mut src: R, opts: &ReadOptions) -> Result<Self> {
        let bad = |e: io::Error| match e.kind() {
            io::ErrorKind::UnexpectedEof | io::ErrorKind::InvalidData => corrupt(&opts.source, format!("{format} header: {e}")),
            _ => Error::Io { path: opts.source.clone(), source: e },
        };
        let mut cols = Vec::new();
        let mut input_fields = Vec::new();
        if format == Format::RowBinary {
            let target = opts.schema.as_ref().expect("checked by reader()");
            for f in target.fields() {
                let wire = chtype::wire_of(f.data_type())
                    .ok_or_else(|| Error::NotImplemented(format!("column {} of type {}", f.name(), f.data_type())))?;
                cols.push(InCol { wire, nullable: f.is_nullable(), name: f.name().clone() });
                input_fields.push(f.as_ref().clone());
            }
        } else {
            let n = read_varuint(&mut src).map_err(bad)?.unwrap_or(0);
            if n > 1 << 20 {
                return Err(corrupt(&opts.source, format!("{format} header: {n} columns")));
            }
            let mut names = Vec::new();
            for _ in 0..n {
                let s = read_string(&mut src, 1 << 20).map_err(bad)?.ok_or_else(|| bad(io::ErrorKind::UnexpectedEof.into()))?;
                names.push(String::from_utf8_lossy(&s).into_owned());
            }
            for (i, name) in names.into_iter().enumerate() {
                let (wire, nullable, dt) = if format == Format::RowBinaryWithNamesAndTypes {
                    let t = read_string(&mut src, 1 << 20).map_err(bad)?.ok_or_else(|| bad(io::ErrorKind::UnexpectedEof.into()))?;
                    let t = String::from_utf8_lossy(&t).into_owned();
                    let ch = chtype::parse(&t).map_err(|e| {
                        Error::NotImplemented(format!("{}: column {} ({name}): {e}", opts.source.display(), i + 1))
                    })?;
                    // Strings of unknown encoding are built as bytes, typed Utf8 per batch when valid.
                    let dt = if ch.wire == Wire::String { DataType::Binary } else { ch.wire.arrow_type() };
                    (ch.wire, ch.nullable, dt)
                } else {
                    let target = opts.schema.as_ref().expect("checked by reader()");
                    let f = target
                        .fields()
                        .iter()
                        .find(|f| f.name() == &name)
                        .or_else(|| target.fields().iter().find(|f| f.name().eq_ignore_ascii_case(&name)))
                        .ok_or_else(|| {
                            Error::InvalidArgument(format!(
                                "{}: the input has column {name} that the table does not",
                                opts.source.display()
                            ))
                        })?;
                    let wire = chtype::wire_of(f.data_type())
                        .ok_or_else(|| Error::NotImplemented(format!("column {} of type {}", f.name(), f.data_type())))?;
                    (wire, f.is_nullable(), f.data_type().clone())
                };
                input_fields.push(Field::new(&name, dt, nullable));
                cols.push(InCol { wire, nullable, name });
            }
        }
        let input_schema = Arc::new(Schema::new(input_fields));
        let schema = opts.schema.clone().unwrap_or_else(|| input_schema.clone());
        let mut r = RowBinaryReader {
            src,
            opts: opts.clone(),
            cols,
            input_schema,
            schema,
            rows: 0,
            done: false,
            tmp: Vec::new(),
            pending: None,
            fitted: opts.schema.is_some(),
        };
        if opts.schema.is_none() {
            // Without a target, the first batch decides: a String column is Utf8 when its
            // values there are valid UTF-8, else Binary; later batches are fitted to it.
            let first = r.read_batch()?;
            match first {
                Some(b) => {
                    r.schema = b.schema();
                    r.pending = Some(b);
                }
                None => r.schema = crate::conform::normalize_schema(&utf8_schema(&r.input_schema))?,
            }
            r.fitted = true;
        }
        Ok(r)
    }

    fn err(&self, c: usize, e: impl std::fmt::Display) -> Error {
        corrupt(&self.opts.source, format!("row {}, column {} ({}): {e}", self.rows + 1, c + 1, self.cols[c].name))
    }

    /// Reads exactly `n` bytes of column `c` into `tmp`.
    fn take(&mut self, c: usize, n: usize) -> Result<()> {
        self.tmp.clear();
        crate::native::read_n(&mut self.src, n as u64, &mut self.tmp).map_err(|e| self.io(c, e))
    }

    fn io(&self, c: usize, e: io::Error) -> Error {
        match e.kind() {
            io::ErrorKind::UnexpectedEof | io::ErrorKind::InvalidData => self.err(c, e),
            _ => Error::Io { path: self.opts.source.clone(), source: e },
        }
    }

    fn read_batch(&mut self) -> Result<Option<RecordBatch>> {
        let mut builders = self
            .input_schema
            .fields()
            .iter()
            .map(|f| ColumnBuilder::new(f.data_type(), f.is_nullable(), READ_BATCH_ROWS.min(1024)))
            .collect::<Result<Vec<_>>>()?;
        let mut n = 0;
        let mut spans = Vec::with_capacity(self.cols.len());
        'rows: while n < READ_BATCH_ROWS && !builders.iter().any(ColumnBuilder::is_full) {
            if !self.cols.is_empty() {
                // As many whole rows as the reader's buffer holds, parsed in place.
                let buf = match self.src.fill_buf() {
                    Ok(b) => b,
                    Err(e) => return Err(self.io(0, e)),
                };
                let (mut pos, mut parsed, mut failed) = (0, 0, None);
                while n + parsed < READ_BATCH_ROWS {
                    let Some(len) = row_spans(&buf[pos..], &self.cols, &mut spans) else { break };
                    if let Err(e) = push_row(&buf[pos..pos + len], &self.cols, &spans, &mut builders) {
                        failed = Some(e);
                        break;
                    }
                    pos += len;
                    parsed += 1;
                    if builders.iter().any(ColumnBuilder::is_full) {
                        break;
                    }
                }
                self.src.consume(pos);
                n += parsed;
                self.rows += parsed as u64;
                if let Some((c, m)) = failed {
                    return Err(self.err(c, m));
                }
                if parsed > 0 {
                    continue;
                }
            }
            // A row across the buffer's end, the end of input, or an error to report: a
            // value at a time.
            for c in 0..self.cols.len() {
                if c == 0 {
                    let at_end = match self.src.fill_buf() {
                        Ok(b) => b.is_empty(),
                        Err(e) => return Err(self.io(0, e)),
                    };
                    if at_end {
                        self.done = true;
                        break 'rows;
                    }
                }
                let (wire, nullable) = (self.cols[c].wire, self.cols[c].nullable);
                if nullable {
                    self.take(c, 1)?;
                    match self.tmp[0] {
                        0 => {}
                        1 => {
                            builders[c].push_null().map_err(|m| self.err(c, m))?;
                            continue;
                        }
                        b => return Err(self.err(c, format!("null flag {b} (must be 0 or 1)"))),
                    }
                }
                let len = match wire.width() {
                    Some(w) => w,
                    None => {
                        let len = read_varuint(&mut self.src)
                            .and_then(|v| v.ok_or_else(|| io::ErrorKind::UnexpectedEof.into()))
                            .map_err(|e| self.io(c, e))?;
                        if len > MAX_STRING_BYTES {
                            return Err(self.err(c, format!("string of {len} bytes")));
                        }
                        len as usize
                    }
                };
                self.take(c, len)?;
                builders[c].push_wire(wire, &self.tmp).map_err(|m| self.err(c, m))?;
            }
            if self.cols.is_empty() {
                self.done = true;
                break;
            }
            n += 1;
            self.rows += 1;
        }
        if n == 0 {
            return Ok(None);
        }
        let first_row = self.rows - n as u64;
        let mut arrays = Vec::with_capacity(builders.len());
        for (c, b) in builders.iter_mut().enumerate() {
            let a = b.finish().map_err(|(r, m)| {
                corrupt(&self.opts.source, format!("row {}, column {} ({}): {m}", first_row + r as u64 + 1, c + 1, self.cols[c].name))
            })?;
            arrays.push(a);
        }
        let batch = RecordBatch::try_new(self.input_schema.clone(), arrays)?;
        let batch = utf8_where_valid(&batch)?;
        if !self.fitted {
            return Ok(Some(batch));
        }
        crate::conform::conform(&batch, &self.schema, &self.opts.source).map(Some).map_err(|e| match e {
            Error::Corrupt { path, detail } => Error::Corrupt { path, detail: format!("rows {}..{}: {detail}", first_row + 1, self.rows) },
            other => other,
        })
    }
}

impl<'s> RowBinaryReader<&'s [u8]> {
    /// A reader of `bytes` (whole rows, `rows` before them) laid out as `head`'s input,
    /// into its schema.
    fn rows_of(head: &RowBinaryFraming, bytes: &'s [u8], rows: u64) -> Self {
        RowBinaryReader {
            src: bytes,
            opts: head.opts.clone(),
            cols: head.cols.clone(),
            input_schema: head.input_schema.clone(),
            schema: head.schema.clone(),
            rows,
            done: false,
            tmp: Vec::new(),
            pending: None,
            fitted: true,
        }
    }
}

/// Rows walked per [`Framing::unit`] call.
const WALK_ROWS: u64 = 4096;

/// RowBinary input cut into chunks of whole rows ([`crate::parallel`]).
struct RowBinaryFraming {
    opts: ReadOptions,
    cols: Vec<InCol>,
    input_schema: SchemaRef,
    schema: SchemaRef,
    /// The bytes of every row when all columns are fixed-width and not nullable.
    row_bytes: Option<usize>,
}

impl Framing for RowBinaryFraming {
    fn unit(&self, buf: &[u8]) -> std::result::Result<(usize, u64), Walk> {
        if let Some(w) = self.row_bytes {
            // All the whole rows at once.
            let rows = buf.len() / w.max(1);
            return if rows == 0 { Err(Walk::Short) } else { Ok((rows * w, rows as u64)) };
        }
        // The whole rows at the start of `buf`, a run at a time (a call per row costs as
        // much as the walk).
        let (mut pos, mut rows) = (0, 0);
        while rows < WALK_ROWS {
            match row_len(&buf[pos..], &self.cols) {
                Ok(len) => {
                    pos += len;
                    rows += 1;
                }
                Err(e) if rows == 0 => return Err(e),
                Err(_) => break,
            }
        }
        Ok((pos, rows))
    }

    fn parse(&self, bytes: &[u8], at: Position) -> Vec<Result<RecordBatch>> {
        RowBinaryReader::rows_of(self, bytes, at.rows).collect()
    }
}

/// The length of the row at the start of `buf` ([`Walk::Bad`] where [`row_spans`] would
/// refuse it: a null flag other than 0 or 1, a string longer than [`MAX_STRING_BYTES`]).
#[inline]
fn row_len(buf: &[u8], cols: &[InCol]) -> std::result::Result<usize, Walk> {
    let mut pos = 0;
    for col in cols {
        if col.nullable {
            match buf.get(pos) {
                None => return Err(Walk::Short),
                Some(0) => pos += 1,
                Some(1) => {
                    pos += 1;
                    continue;
                }
                Some(_) => return Err(Walk::Bad),
            }
        }
        pos += match col.wire.width() {
            Some(w) => w,
            None => {
                let rest = buf.get(pos..).ok_or(Walk::Short)?;
                let (n, k) = match varuint_at(rest) {
                    Some(v) => v,
                    None if rest.len() >= 10 => return Err(Walk::Bad),
                    None => return Err(Walk::Short),
                };
                if n > MAX_STRING_BYTES {
                    return Err(Walk::Bad);
                }
                k + n as usize
            }
        };
    }
    if pos > buf.len() { Err(Walk::Short) } else { Ok(pos) }
}

/// A reader of RowBinary `src` (one of the three formats): rows are parsed in parallel on
/// the current rayon pool's threads when it has several ([`crate::parallel`]), else one
/// after another.
///
/// # Errors
/// As [`RowBinaryReader::new`].
pub(crate) fn reader<'a, R: BufRead + Send + 'a>(
    format: Format,
    src: R,
    opts: &ReadOptions,
) -> Result<Box<dyn BatchReader + Send + 'a>> {
    let head = RowBinaryReader::new(format, src, opts)?;
    if head.done || head.cols.is_empty() || rayon::current_num_threads() <= 1 {
        return Ok(Box::new(head));
    }
    let RowBinaryReader { src, opts, cols, input_schema, schema, rows, pending, .. } = head;
    let row_bytes = cols.iter().map(|c| if c.nullable { None } else { c.wire.width() }).sum::<Option<usize>>();
    let source = opts.source.clone();
    let framing = RowBinaryFraming { opts, cols, input_schema, schema: schema.clone(), row_bytes };
    Ok(Box::new(ParallelChunks::new(src, framing, schema, source, Position { units: rows, rows, bytes: 0 }, pending)))
}

/// Where the values of the row at the start of `buf` lie (`spans[c]`: column `c`'s value
/// bytes, `None` for a NULL) and the row's length, if all of it is there, its null flags
/// are 0 or 1 and its strings at most [`MAX_STRING_BYTES`] (else the value-at-a-time path
/// reads it and says what is wrong).
#[inline]
fn row_spans(buf: &[u8], cols: &[InCol], spans: &mut Vec<Option<std::ops::Range<usize>>>) -> Option<usize> {
    spans.clear();
    let mut pos = 0;
    for col in cols {
        if col.nullable {
            pos += 1;
            match *buf.get(pos - 1)? {
                0 => {}
                1 => {
                    spans.push(None);
                    continue;
                }
                _ => return None,
            }
        }
        let len = match col.wire.width() {
            Some(w) => w,
            None => {
                let (n, k) = varuint_at(buf.get(pos..)?)?;
                if n > MAX_STRING_BYTES {
                    return None;
                }
                pos += k;
                n as usize
            }
        };
        if pos + len > buf.len() {
            return None;
        }
        spans.push(Some(pos..pos + len));
        pos += len;
    }
    Some(pos)
}

/// Appends the values of one whole row (`buf`, laid out as `spans` says: [`row_spans`]) to
/// `builders`; `(column, message)` for a value its column refuses.
#[inline]
fn push_row(
    buf: &[u8],
    cols: &[InCol],
    spans: &[Option<std::ops::Range<usize>>],
    builders: &mut [ColumnBuilder],
) -> std::result::Result<(), (usize, String)> {
    for (c, ((col, span), b)) in cols.iter().zip(spans).zip(builders.iter_mut()).enumerate() {
        match span {
            None => b.push_null(),
            Some(r) => b.push_wire(col.wire, &buf[r.clone()]),
        }
        .map_err(|m| (c, m))?;
    }
    Ok(())
}

/// `schema` with Binary fields as Utf8.
fn utf8_schema(schema: &Schema) -> Schema {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| {
            let dt = if f.data_type() == &DataType::Binary { DataType::Utf8 } else { f.data_type().clone() };
            Field::new(f.name(), dt, f.is_nullable())
        })
        .collect();
    Schema::new(fields)
}

/// `batch` with each Binary column whose values are all valid UTF-8 as Utf8.
pub(crate) fn utf8_where_valid(batch: &RecordBatch) -> Result<RecordBatch> {
    if !batch.columns().iter().any(|c| c.data_type() == &DataType::Binary) {
        return Ok(batch.clone());
    }
    let mut fields = Vec::new();
    let mut cols = Vec::new();
    for (f, c) in batch.schema().fields().iter().zip(batch.columns()) {
        if c.data_type() == &DataType::Binary
            && let Some(s) = crate::conform::utf8(c.as_binary::<i32>())
        {
            fields.push(Field::new(f.name(), DataType::Utf8, f.is_nullable()));
            cols.push(Arc::new(s) as arrow::array::ArrayRef);
        } else {
            fields.push(f.as_ref().clone());
            cols.push(c.clone());
        }
    }
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)?)
}

impl<R: BufRead> Iterator for RowBinaryReader<R> {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(b) = self.pending.take() {
            return Some(Ok(b));
        }
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

impl<R: BufRead + Send> BatchReader for RowBinaryReader<R> {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}
