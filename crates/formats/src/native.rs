//! ClickHouse `Native`: what `SELECT .. FORMAT Native` writes and `INSERT .. FORMAT Native`
//! reads (a file or pipe, no protocol packets around it: no block info, no custom
//! serialization flags, as ClickHouse's format with client revision 0).
//!
//! ```text
//!  stream: block block ... (to the end of input; a block may have 0 rows)
//!  block:  VarUInt columns | VarUInt rows | column * columns
//!  column: String name | String type | data
//!  String: VarUInt length | bytes          VarUInt: LEB128, 7 bits a byte, low first
//!  data:   T          rows values, little-endian (Int8..UInt64, Float32/64, Date32 Int32 days,
//!                     Date UInt16 days, DateTime UInt32 s, DateTime64 Int64); String: a
//!                     String per row; FixedString(N): N bytes per row
//!          Nullable(T) rows bytes of null map (1 = NULL), then the data of T with a
//!                     default value (0, empty) at the NULL rows
//! ```
//!
//! The writer makes one block per batch of rows (a non-null fixed-width column is written
//! straight from the Arrow buffer); an answer without rows is no bytes at all, as
//! ClickHouse writes it. The reader returns one batch per block.

use std::io::{self, BufRead, Read, Write};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::buffer::{BooleanBuffer, NullBuffer};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use tessera_common::{Error, Result};

use crate::builder::STRING_BYTES_FLUSH;
use crate::chtype::{self, ChType, Wire};
use crate::parallel::{Framing, ParallelChunks, Position, Walk};
use crate::{BatchReader, BatchWriter, ReadOptions, corrupt, out_err};

/// Largest column count, name or type length, and string value accepted on input.
const MAX_COLUMNS: u64 = 1 << 20;
const MAX_NAME_BYTES: u64 = 1 << 20;
pub(crate) const MAX_STRING_BYTES: u64 = 1 << 30;
/// Largest row count of one block accepted on input (ClickHouse blocks are ~65k rows).
const MAX_BLOCK_ROWS: u64 = 1 << 31;

/// Appends `v` as a VarUInt (LEB128).
#[inline]
pub(crate) fn put_varuint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends a ClickHouse `String`: VarUInt length, then the bytes.
#[inline]
pub(crate) fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    put_varuint(out, s.len() as u64);
    tessera_common::bytes::extend_short(out, s);
}

/// Appends a column of ClickHouse `String`s, one per row of `view` (a NULL row, per
/// `nulls`, as the empty string): [`put_string`] for all rows with one capacity check.
pub(crate) fn put_strings(out: &mut Vec<u8>, view: &StrView<'_>, nulls: Option<&arrow::buffer::NullBuffer>) {
    let rows = view.offsets.len().saturating_sub(1);
    let Some(&first) = view.offsets.first() else { return };
    // A row writes at most 5 VarUInt bytes (its length is under 2^31 < 2^35) and its bytes.
    let bound = (view.offsets[rows] - first) as usize + 5 * rows;
    out.reserve(bound);
    let start = out.len();
    let mut at = start;
    let dst = out.as_mut_ptr();
    for i in 0..rows {
        let s = if nulls.is_some_and(|n| n.is_null(i)) { &[][..] } else { view.get(i) };
        let mut n = s.len();
        // SAFETY: (1) the writes of all rows stay within the `bound` bytes reserved past
        // `start`: row `i` writes at most 5 length bytes and `s.len()` bytes, and the
        // lengths of the rows written sum to at most the offsets' span (a NULL row writes
        // none of its bytes); (2) `copy_bytes` writes exactly `dst + at .. + s.len()`,
        // outside `s` (which `view` borrows, not `out`); (3) every byte of `start..at` is
        // written before `set_len`.
        unsafe {
            while n >= 0x80 {
                *dst.add(at) = (n as u8) | 0x80;
                n >>= 7;
                at += 1;
            }
            *dst.add(at) = n as u8;
            at += 1;
            tessera_common::bytes::copy_bytes(dst.add(at), s);
        }
        at += s.len();
    }
    debug_assert!(at - start <= bound);
    // SAFETY: see (3) above.
    unsafe { out.set_len(at) };
}

/// Reads a VarUInt; `Ok(None)` at the end of input before its first byte.
pub(crate) fn read_varuint(r: &mut impl BufRead) -> io::Result<Option<u64>> {
    let mut v = 0u64;
    for i in 0..10 {
        let byte = {
            let buf = r.fill_buf()?;
            match buf.first() {
                Some(&b) => b,
                None if i == 0 => return Ok(None),
                None => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "truncated VarUInt")),
            }
        };
        r.consume(1);
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(Some(v));
        }
    }
    Err(io::Error::new(io::ErrorKind::InvalidData, "VarUInt longer than 10 bytes"))
}

/// The VarUInt at the start of `buf` and its length in bytes, if `buf` holds all of it
/// (and it is at most 10 bytes).
#[inline(always)]
pub(crate) fn varuint_at(buf: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &byte) in buf.iter().take(10).enumerate() {
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// Reads exactly `n` bytes into `out` (appending), growing it as the bytes arrive rather
/// than by `n` up front, so a corrupt size cannot make it allocate more than the input has.
pub(crate) fn read_n(r: &mut impl BufRead, n: u64, out: &mut Vec<u8>) -> io::Result<()> {
    let buf = r.fill_buf()?;
    if buf.len() as u64 >= n {
        // All of it in the reader's buffer (the usual case for values of a row or a block).
        out.extend_from_slice(&buf[..n as usize]);
        r.consume(n as usize);
        return Ok(());
    }
    out.reserve(n.min(64 << 20) as usize);
    let got = r.take(n).read_to_end(out)? as u64;
    if got < n {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, format!("truncated: {got} of {n} bytes")));
    }
    Ok(())
}

/// Reads a `String` of at most `max` bytes; `Ok(None)` at the end of input.
pub(crate) fn read_string(r: &mut impl BufRead, max: u64) -> io::Result<Option<Vec<u8>>> {
    let Some(n) = read_varuint(r)? else { return Ok(None) };
    if n > max {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("string of {n} bytes (at most {max})")));
    }
    let mut v = Vec::new();
    read_n(r, n, &mut v)?;
    Ok(Some(v))
}

/// The little-endian value bytes of fixed-width column `col` of wire layout `wire`,
/// with 0 at NULL rows (as ClickHouse writes them), into `out`; or `None` when the Arrow
/// buffer can be written as it is (no NULL, little-endian target, same width).
///
/// # Errors
/// [`Error::InvalidArgument`] naming `row_base + row` and the column for a timestamp
/// outside `DateTime`'s range.
pub(crate) fn fixed_bytes(col: &dyn Array, wire: Wire, name: &str, row_base: u64) -> Result<FixedBytes> {
    let len = col.len();
    if wire == Wire::Nothing {
        return Ok(FixedBytes::Owned(vec![b'0'; len]));
    }
    if let Wire::Fixed(p) = wire {
        let w = p.width();
        let data = col.to_data();
        let raw = data.buffers()[0].slice_with_length(data.offset() * w, len * w);
        if col.null_count() == 0 && cfg!(target_endian = "little") {
            return Ok(FixedBytes::Shared(raw));
        }
        let mut v = Vec::with_capacity(raw.len());
        for (i, chunk) in raw.as_slice().chunks_exact(w).enumerate() {
            if col.is_null(i) {
                v.extend(std::iter::repeat_n(0u8, w));
            } else if cfg!(target_endian = "little") {
                v.extend_from_slice(chunk);
            } else {
                v.extend(chunk.iter().rev());
            }
        }
        return Ok(FixedBytes::Owned(v));
    }
    // DateTime: Timestamp(Second) i64 to UInt32.
    let ts = col.as_primitive::<arrow::datatypes::TimestampSecondType>();
    let mut v = Vec::with_capacity(len * 4);
    for i in 0..len {
        let s = if ts.is_null(i) { 0 } else { ts.value(i) };
        let s = u32::try_from(s).map_err(|_| {
            Error::InvalidArgument(format!(
                "row {}, column {name}: timestamp {s} s is outside ClickHouse DateTime's range (1970-01-01 00:00:00 .. \
                 2106-02-07 06:28:15 UTC)",
                row_base + i as u64 + 1
            ))
        })?;
        v.extend_from_slice(&s.to_le_bytes());
    }
    Ok(FixedBytes::Owned(v))
}

/// Value bytes of a fixed-width column: the Arrow buffer itself, or a converted copy.
pub(crate) enum FixedBytes {
    /// The Arrow values buffer as it is (shared, not copied).
    Shared(arrow::buffer::Buffer),
    /// A converted copy.
    Owned(Vec<u8>),
}

impl FixedBytes {
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            FixedBytes::Shared(b) => b.as_slice(),
            FixedBytes::Owned(v) => v,
        }
    }
}

/// A Utf8 or Binary column's offsets and value bytes, looked up once per batch so that the
/// writers' per-value loops do no type match or downcast.
#[derive(Clone, Copy)]
pub(crate) struct StrView<'a> {
    offsets: &'a [i32],
    values: &'a [u8],
}

impl<'a> StrView<'a> {
    /// The view of `col`, a Utf8 or Binary column.
    ///
    /// # Panics
    /// If `col` is neither (the writers' layouts send only those here).
    pub(crate) fn of(col: &'a dyn Array) -> StrView<'a> {
        match col.data_type() {
            DataType::Utf8 => {
                let a = col.as_string::<i32>();
                StrView { offsets: a.value_offsets(), values: a.value_data() }
            }
            _ => {
                let a = col.as_binary::<i32>();
                StrView { offsets: a.value_offsets(), values: a.value_data() }
            }
        }
    }

    /// The bytes of value `i`.
    #[inline(always)]
    pub(crate) fn get(&self, i: usize) -> &'a [u8] {
        &self.values[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }
}

/// Wire layout and ClickHouse type name of every field of `schema`.
pub(crate) fn layouts(schema: &Schema) -> Result<Vec<(Wire, String)>> {
    schema
        .fields()
        .iter()
        .map(|f| {
            let name = chtype::clickhouse_type(f)?;
            let wire = chtype::wire_of(f.data_type()).ok_or_else(|| Error::NotImplemented(format!("column {}", f.name())))?;
            Ok((wire, name))
        })
        .collect()
}

/// Writes batches as Native blocks.
pub struct NativeWriter<'a> {
    out: Box<dyn Write + Send + 'a>,
    schema: SchemaRef,
    layouts: Vec<(Wire, String)>,
    buf: Vec<u8>,
    rows: u64,
}

impl<'a> NativeWriter<'a> {
    /// A writer of batches of `schema` into `out`.
    ///
    /// # Errors
    /// [`Error::NotImplemented`] for a column type without a ClickHouse type.
    pub fn new(schema: &SchemaRef, out: Box<dyn Write + Send + 'a>) -> Result<Self> {
        Ok(NativeWriter { out, schema: schema.clone(), layouts: layouts(schema)?, buf: Vec::new(), rows: 0 })
    }

    fn block(&mut self, batch: &RecordBatch) -> Result<()> {
        self.buf.clear();
        put_varuint(&mut self.buf, batch.num_columns() as u64);
        put_varuint(&mut self.buf, batch.num_rows() as u64);
        for (c, col) in batch.columns().iter().enumerate() {
            let field = self.schema.field(c);
            let (wire, ty) = &self.layouts[c];
            put_string(&mut self.buf, field.name().as_bytes());
            put_string(&mut self.buf, ty.as_bytes());
            if field.is_nullable() || *wire == Wire::Nothing {
                let start = self.buf.len();
                self.buf.resize(start + col.len(), 0);
                if let Some(n) = col.logical_nulls() {
                    for (i, valid) in n.iter().enumerate() {
                        self.buf[start + i] = u8::from(!valid);
                    }
                }
            }
            match wire {
                Wire::String => put_strings(&mut self.buf, &StrView::of(col.as_ref()), col.nulls()),
                _ => match fixed_bytes(col.as_ref(), *wire, field.name(), self.rows)? {
                    // Large borrowed buffers go straight to the sink (no copy).
                    FixedBytes::Shared(b) if b.len() >= crate::SINK_BUFFER_BYTES => {
                        self.out.write_all(&self.buf).map_err(out_err)?;
                        self.buf.clear();
                        self.out.write_all(b.as_slice()).map_err(out_err)?;
                    }
                    fb => self.buf.extend_from_slice(fb.bytes()),
                },
            }
        }
        self.out.write_all(&self.buf).map_err(out_err)?;
        self.rows += batch.num_rows() as u64;
        Ok(())
    }
}

impl BatchWriter for NativeWriter<'_> {
    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        self.block(batch)
    }

    fn finish(mut self: Box<Self>) -> Result<()> {
        self.out.flush().map_err(out_err)
    }
}

/// Reads Native blocks as batches.
pub struct NativeReader<R: BufRead> {
    src: R,
    opts: ReadOptions,
    schema: SchemaRef,
    /// The first block, read at open to learn the schema.
    pending: Option<RecordBatch>,
    blocks: u64,
    rows: u64,
    done: bool,
}

impl<R: BufRead> NativeReader<R> {
    /// Opens the stream and reads its first block (for the schema).
    ///
    /// # Errors
    /// As the blocks: [`Error::Corrupt`], [`Error::NotImplemented`], [`Error::Io`].
    pub fn new(src: R, opts: &ReadOptions) -> Result<Self> {
        let mut r = NativeReader {
            src,
            opts: opts.clone(),
            schema: opts.schema.clone().unwrap_or_else(|| Arc::new(Schema::empty())),
            pending: None,
            blocks: 0,
            rows: 0,
            done: false,
        };
        match r.read_block()? {
            Some(b) => {
                if opts.schema.is_none() {
                    r.schema = b.schema();
                }
                let b = crate::conform::conform(&b, &r.schema, &r.opts.source)?;
                r.pending = Some(b);
            }
            None => r.done = true,
        }
        Ok(r)
    }

    fn io(&self, e: io::Error, what: &str) -> Error {
        match e.kind() {
            io::ErrorKind::UnexpectedEof | io::ErrorKind::InvalidData => {
                corrupt(&self.opts.source, format!("Native block {} (after row {}): {what}: {e}", self.blocks + 1, self.rows))
            }
            _ => Error::Io { path: self.opts.source.clone(), source: e },
        }
    }

    /// The next block in the input's own types; `None` at the end.
    fn read_block(&mut self) -> Result<Option<RecordBatch>> {
        let Some(ncols) = read_varuint(&mut self.src).map_err(|e| self.io(e, "column count"))? else { return Ok(None) };
        let nrows = read_varuint(&mut self.src)
            .map_err(|e| self.io(e, "row count"))?
            .ok_or_else(|| corrupt(&self.opts.source, format!("Native block {}: truncated after the column count", self.blocks + 1)))?;
        if ncols > MAX_COLUMNS || nrows > MAX_BLOCK_ROWS {
            return Err(corrupt(
                &self.opts.source,
                format!("Native block {}: {ncols} columns x {nrows} rows is not a plausible block", self.blocks + 1),
            ));
        }
        let rows = nrows as usize;
        let mut fields = Vec::with_capacity(ncols as usize);
        let mut cols: Vec<ArrayRef> = Vec::with_capacity(ncols as usize);
        for c in 0..ncols as usize {
            let at = |what: &str| format!("column {} {what}", c + 1);
            let name = read_string(&mut self.src, MAX_NAME_BYTES)
                .map_err(|e| self.io(e, &at("name")))?
                .ok_or_else(|| self.io(io::ErrorKind::UnexpectedEof.into(), &at("name")))?;
            let name = String::from_utf8_lossy(&name).into_owned();
            let ty = read_string(&mut self.src, MAX_NAME_BYTES)
                .map_err(|e| self.io(e, &at("type")))?
                .ok_or_else(|| self.io(io::ErrorKind::UnexpectedEof.into(), &at("type")))?;
            let ty = String::from_utf8_lossy(&ty).into_owned();
            let ch = chtype::parse(&ty).map_err(|e| match e {
                Error::NotImplemented(m) => Error::NotImplemented(format!(
                    "{}: Native column {} ({name}): {m}",
                    self.opts.source.display(),
                    c + 1
                )),
                other => other,
            })?;
            let label = format!("column {} ({name})", c + 1);
            let col = self.read_column(&ch, rows, &label)?;
            fields.push(Field::new(name, col.data_type().clone(), ch.nullable));
            cols.push(col);
        }
        self.blocks += 1;
        self.rows += nrows;
        let schema = Arc::new(Schema::new(fields));
        RecordBatch::try_new_with_options(schema, cols, &arrow::array::RecordBatchOptions::new().with_row_count(Some(rows)))
            .map_err(|e| corrupt(&self.opts.source, format!("Native block {}: {e}", self.blocks)))
            .map(Some)
    }

    fn read_column(&mut self, ch: &ChType, rows: usize, label: &str) -> Result<ArrayRef> {
        let nulls = if ch.nullable {
            let mut map = Vec::new();
            read_n(&mut self.src, rows as u64, &mut map).map_err(|e| self.io(e, &format!("{label} null map")))?;
            Some(NullBuffer::new(BooleanBuffer::from_iter(map.iter().map(|&b| b == 0))))
        } else {
            None
        };
        let dt = ch.wire.arrow_type();
        let arr: ArrayRef = match ch.wire {
            Wire::String => {
                // Strings in a column of unknown encoding: read as bytes, typed Utf8 when
                // valid. Offsets and bytes are appended straight to their buffers; the bytes'
                // buffer is sized from the first strings' mean length, so it rarely regrows.
                let mut offsets: Vec<i32> = Vec::with_capacity(rows + 1);
                offsets.push(0);
                let mut data: Vec<u8> = Vec::new();
                let too_big = || {
                    Error::NotImplemented(format!(
                        "{}: Native block {} {label}: strings past 1 GiB in one block",
                        self.opts.source.display(),
                        self.blocks + 1
                    ))
                };
                let mut v = Vec::new();
                let mut r = 0;
                while r < rows {
                    // As many whole strings as the reader's buffer holds, parsed in place.
                    let (parsed, used) = match self.src.fill_buf() {
                        Ok(buf) => {
                            let (mut pos, mut parsed) = (0, 0);
                            while r + parsed < rows {
                                let Some((n, len)) = varuint_at(&buf[pos..]) else { break };
                                let n = n as usize;
                                if n as u64 > MAX_STRING_BYTES || buf.len() - pos - len < n || data.len() + n > STRING_BYTES_FLUSH {
                                    break;
                                }
                                let start = pos + len;
                                data.extend_from_slice(&buf[start..start + n]);
                                // At most STRING_BYTES_FLUSH (1 GiB) bytes: fits an i32.
                                offsets.push(data.len() as i32);
                                pos = start + n;
                                parsed += 1;
                            }
                            (parsed, pos)
                        }
                        Err(_) => (0, 0),
                    };
                    if parsed > 0 {
                        if r == 0 && parsed < rows {
                            data.reserve((rows - parsed) * (data.len() / parsed + 1));
                        }
                        self.src.consume(used);
                        r += parsed;
                        continue;
                    }
                    // A string across the buffer's end (or an error to report): one at a time.
                    let n = read_varuint(&mut self.src)
                        .and_then(|n| n.ok_or_else(|| io::ErrorKind::UnexpectedEof.into()))
                        .map_err(|e| self.io(e, &format!("row {}, {label}", self.rows + r as u64 + 1)))?;
                    if n > MAX_STRING_BYTES {
                        return Err(corrupt(
                            &self.opts.source,
                            format!("row {}, {label}: string of {n} bytes", self.rows + r as u64 + 1),
                        ));
                    }
                    if data.len() + n as usize > STRING_BYTES_FLUSH {
                        return Err(too_big());
                    }
                    v.clear();
                    read_n(&mut self.src, n, &mut v)
                        .map_err(|e| self.io(e, &format!("row {}, {label}", self.rows + r as u64 + 1)))?;
                    data.extend_from_slice(&v);
                    offsets.push(data.len() as i32);
                    r += 1;
                }
                // Offsets start at 0 and never decrease (each adds a length).
                let offsets = arrow::buffer::OffsetBuffer::new(offsets.into());
                let bin = arrow::array::BinaryArray::new(offsets, data.into(), None);
                match crate::conform::utf8(&bin) {
                    Some(s) => Arc::new(s),
                    None => Arc::new(bin),
                }
            }
            wire => {
                let w = wire.width().expect("fixed width");
                let mut raw = Vec::new();
                read_n(&mut self.src, (rows * w) as u64, &mut raw).map_err(|e| {
                    let row = self.rows + (raw.len() / w.max(1)) as u64 + 1;
                    self.io(e, &format!("row {row}, {label}"))
                })?;
                decode_fixed(wire, &dt, &raw, rows)?
            }
        };
        Ok(match nulls {
            Some(n) => {
                let data = arr.to_data().into_builder().nulls(Some(n)).build()?;
                arrow::array::make_array(data)
            }
            None => arr,
        })
    }
}

/// `rows` values of wire layout `wire` from little-endian `raw` as an array of `dt`.
fn decode_fixed(wire: Wire, dt: &DataType, raw: &[u8], rows: usize) -> Result<ArrayRef> {
    use arrow::array::PrimitiveArray;
    use arrow::buffer::ScalarBuffer;
    use arrow::datatypes::*;
    fn le<T: ArrowPrimitiveType, const N: usize>(raw: &[u8], f: impl Fn([u8; N]) -> T::Native) -> ArrayRef {
        let v: Vec<T::Native> = raw.chunks_exact(N).map(|c| f(c.try_into().expect("N bytes"))).collect();
        Arc::new(PrimitiveArray::<T>::new(ScalarBuffer::from(v), None))
    }
    Ok(match (wire, dt) {
        (_, DataType::Int8) => le::<Int8Type, 1>(raw, i8::from_le_bytes),
        (_, DataType::UInt8) => le::<UInt8Type, 1>(raw, u8::from_le_bytes),
        (_, DataType::Int16) => le::<Int16Type, 2>(raw, i16::from_le_bytes),
        (_, DataType::UInt16) => le::<UInt16Type, 2>(raw, u16::from_le_bytes),
        (_, DataType::Int32) => le::<Int32Type, 4>(raw, i32::from_le_bytes),
        (_, DataType::UInt32) => le::<UInt32Type, 4>(raw, u32::from_le_bytes),
        (_, DataType::Int64) => le::<Int64Type, 8>(raw, i64::from_le_bytes),
        (_, DataType::UInt64) => le::<UInt64Type, 8>(raw, u64::from_le_bytes),
        (_, DataType::Float32) => le::<Float32Type, 4>(raw, f32::from_le_bytes),
        (_, DataType::Float64) => le::<Float64Type, 8>(raw, f64::from_le_bytes),
        (Wire::Date, _) => le::<Date32Type, 2>(raw, |b| i32::from(u16::from_le_bytes(b))),
        (Wire::Fixed(_), DataType::Date32) => le::<Date32Type, 4>(raw, i32::from_le_bytes),
        (Wire::DateTime, _) => le::<TimestampSecondType, 4>(raw, |b| i64::from(u32::from_le_bytes(b))),
        (Wire::DateTime64(p), _) => {
            let scale = 10i64.pow(p);
            le::<TimestampSecondType, 8>(raw, |b| i64::from_le_bytes(b).div_euclid(scale))
        }
        (Wire::FixedString(n), _) => {
            let offsets: Vec<i32> = (0..=rows).map(|i| (i * n) as i32).collect();
            if raw.len() > i32::MAX as usize {
                return Err(Error::NotImplemented("FixedString column past 2 GiB in one block".into()));
            }
            Arc::new(arrow::array::BinaryArray::new(
                arrow::buffer::OffsetBuffer::new(ScalarBuffer::from(offsets)),
                raw.to_vec().into(),
                None,
            ))
        }
        (w, dt) => return Err(Error::internal(format!("Native: no decoder for {w:?} as {dt}"))),
    })
}

impl<'s> NativeReader<&'s [u8]> {
    /// A reader of `bytes` (whole blocks, `at` the blocks and rows before them) into
    /// `schema`.
    fn at(bytes: &'s [u8], opts: &ReadOptions, schema: SchemaRef, at: Position) -> Self {
        NativeReader { src: bytes, opts: opts.clone(), schema, pending: None, blocks: at.units, rows: at.rows, done: false }
    }
}

/// Native input cut into chunks of whole blocks ([`crate::parallel`]).
struct NativeFraming {
    opts: ReadOptions,
    schema: SchemaRef,
}

impl Framing for NativeFraming {
    fn unit(&self, buf: &[u8]) -> std::result::Result<(usize, u64), Walk> {
        block_len(buf)
    }

    fn parse(&self, bytes: &[u8], at: Position) -> Vec<Result<RecordBatch>> {
        NativeReader::at(bytes, &self.opts, self.schema.clone(), at).collect()
    }
}

/// The VarUInt at `buf[*pos..]`, moving `pos` past it.
#[inline(always)]
fn walk_varuint(buf: &[u8], pos: &mut usize) -> std::result::Result<u64, Walk> {
    match varuint_at(&buf[*pos..]) {
        Some((v, n)) => {
            *pos += n;
            Ok(v)
        }
        None if buf.len() - *pos >= 10 => Err(Walk::Bad),
        None => Err(Walk::Short),
    }
}

/// Moves `pos` past `n` bytes of `buf`.
#[inline(always)]
fn walk_skip(buf: &[u8], pos: &mut usize, n: u64) -> std::result::Result<(), Walk> {
    match (*pos as u64).checked_add(n) {
        Some(end) if end <= buf.len() as u64 => {
            *pos = end as usize;
            Ok(())
        }
        _ => Err(Walk::Short),
    }
}

/// The length in bytes and the rows of the Native block at the start of `buf`, found from
/// its counts, types and string lengths ([`Walk::Bad`] where [`NativeReader`] would refuse
/// the block, so that it reports why).
fn block_len(buf: &[u8]) -> std::result::Result<(usize, u64), Walk> {
    let mut pos = 0;
    let ncols = walk_varuint(buf, &mut pos)?;
    let nrows = walk_varuint(buf, &mut pos)?;
    if ncols > MAX_COLUMNS || nrows > MAX_BLOCK_ROWS {
        return Err(Walk::Bad);
    }
    for _ in 0..ncols {
        let n = walk_varuint(buf, &mut pos)?;
        if n > MAX_NAME_BYTES {
            return Err(Walk::Bad);
        }
        walk_skip(buf, &mut pos, n)?;
        let n = walk_varuint(buf, &mut pos)?;
        if n > MAX_NAME_BYTES {
            return Err(Walk::Bad);
        }
        let start = pos;
        walk_skip(buf, &mut pos, n)?;
        // As the reader takes it (bytes that are not UTF-8 replaced).
        let ch = chtype::parse(&String::from_utf8_lossy(&buf[start..pos])).map_err(|_| Walk::Bad)?;
        if ch.nullable {
            walk_skip(buf, &mut pos, nrows)?;
        }
        match ch.wire.width() {
            Some(w) => walk_skip(buf, &mut pos, nrows.checked_mul(w as u64).ok_or(Walk::Bad)?)?,
            None => {
                // String bytes of the column so far: past STRING_BYTES_FLUSH the reader
                // refuses the block, so the walk stops there too (without reading it all).
                let mut data = 0usize;
                for _ in 0..nrows {
                    // Strings under 128 bytes (a one-byte length) without the general
                    // VarUInt path; `pos` past the end is caught at the next read or below.
                    let n = match buf.get(pos) {
                        Some(&len) if len < 0x80 => {
                            pos += 1 + len as usize;
                            len as usize
                        }
                        Some(_) => {
                            let n = walk_varuint(buf, &mut pos)?;
                            if n > MAX_STRING_BYTES {
                                return Err(Walk::Bad);
                            }
                            pos = pos.saturating_add(n as usize);
                            n as usize
                        }
                        None => return Err(Walk::Short),
                    };
                    data += n;
                    if data > STRING_BYTES_FLUSH {
                        return Err(Walk::Bad);
                    }
                }
                if pos > buf.len() {
                    return Err(Walk::Short);
                }
            }
        }
    }
    Ok((pos, nrows))
}

/// A reader of Native `src`: blocks are decoded in parallel on the current rayon pool's
/// threads when it has several ([`crate::parallel`]), else one after another.
///
/// # Errors
/// As [`NativeReader::new`].
pub(crate) fn reader<'a, R: BufRead + Send + 'a>(src: R, opts: &ReadOptions) -> Result<Box<dyn BatchReader + Send + 'a>> {
    let head = NativeReader::new(src, opts)?;
    if head.done || rayon::current_num_threads() <= 1 {
        return Ok(Box::new(head));
    }
    let NativeReader { src, opts, schema, pending, blocks, rows, .. } = head;
    let source = opts.source.clone();
    let framing = NativeFraming { opts, schema: schema.clone() };
    Ok(Box::new(ParallelChunks::new(src, framing, schema, source, Position { units: blocks, rows, bytes: 0 }, pending)))
}

impl<R: BufRead> Iterator for NativeReader<R> {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(b) = self.pending.take() {
            return Some(Ok(b));
        }
        if self.done {
            return None;
        }
        match self.read_block() {
            Ok(Some(b)) => Some(crate::conform::conform(&b, &self.schema, &self.opts.source)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

impl<R: BufRead + Send> BatchReader for NativeReader<R> {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}
