//! ClickHouse `TabSeparated` reader (the format of the official ClickBench `hits.tsv`).
//!
//! The file is memory-mapped and cut into pieces that end at a raw `'\n'` (a raw newline
//! always ends a row: newlines inside values are escaped as `\n`). Pieces are parsed in
//! parallel on the rayon pool, each into chunks of at most [`CHUNK_ROWS`] rows; the table's
//! chunks are the pieces' chunks in file order.
//!
//! ```text
//!  file:   | row row row ... row\n | row row ... row\n | ... | row ... row[\n] |
//!  pieces: |  ~CHUNK_ROWS rows     |  ~CHUNK_ROWS rows |     |   the rest      |
//!  chunks: one per piece, or more when a piece holds more than CHUNK_ROWS rows
//! ```

mod field;

use std::fs::File;
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use arrow::array::{Array, ArrayRef, AsArray, BinaryArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use memmap2::Mmap;
use rayon::prelude::*;
use tessera_common::{Error, Result, Table};

use crate::CHUNK_ROWS;
use field::ColumnBuilder;

/// Bytes sampled at the start of the file to estimate the row length, hence the piece size.
const SAMPLE_BYTES: usize = 4 << 20;

/// Smallest piece, in bytes: below this, per-task overhead outweighs the parallelism gained.
const MIN_PIECE_BYTES: usize = 64 << 10;

/// Reads a ClickHouse `TabSeparated` file into an in-memory table named `name`.
///
/// **Format** (as ClickHouse writes it, e.g. ClickBench `hits.tsv`): no header; fields
/// separated by `'\t'`, rows ended by `'\n'` (the last row may lack it; an empty file is a
/// table of 0 rows). `'\r'` is data. Inside string fields ClickHouse escapes are undone:
/// `\t` `\n` `\r` `\0` `\b` `\f` `\a` `\v` `\\` `\'` `\xHH`, and a backslash before any other
/// byte stands for that byte. A field that is exactly `\N` is NULL: allowed in nullable
/// columns, an error in NOT NULL ones.
///
/// **Types** come from `schema`, one field per column in order:
/// Int8..Int64 and UInt8..UInt64 (decimal, optional sign, range-checked), Float32/64 (Rust
/// float syntax, incl. `inf`, `nan`), Utf8 and Binary (unescaped bytes), Date32
/// (`YYYY-MM-DD`, days since 1970-01-01), Timestamp(Second, None) (`YYYY-MM-DD hh:mm:ss`, read
/// as UTC; a `.fraction` is dropped). A Utf8 column any of whose values is not valid UTF-8 is
/// stored as Binary, and the returned table's schema says Binary for it: no byte is lost,
/// and Tessera treats Binary as a string type. Nullability is the schema's.
///
/// **Chunks** have at most [`CHUNK_ROWS`] rows (also fewer when a chunk's strings pass 1 GiB).
///
/// `progress`, if given, is called after each piece with the bytes parsed so far (out of the
/// file size), never concurrently and with increasing values.
///
/// The file must not be truncated or modified while it is read (it is memory-mapped; the
/// map is released before this returns).
///
/// # Errors
/// * [`Error::Io`] if the file cannot be opened or mapped.
/// * [`Error::Corrupt`] for the first bad row in file order: detail
///   `"line N (byte B), column C (name): ..."` (N and C from 1; B the row's byte offset) for
///   a bad number, date, escape, an out-of-range value or `\N` in a NOT NULL column, and
///   `"line N (byte B): expected K fields, found F"` for a wrong field count.
/// * [`Error::NotImplemented`] for a schema type the reader cannot parse,
///   [`Error::InvalidArgument`] for a schema without columns.
pub fn read_tsv(
    name: &str,
    path: &Path,
    schema: SchemaRef,
    progress: Option<&(dyn Fn(u64) + Sync)>,
) -> Result<Table> {
    let fields = schema.fields();
    if fields.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "TSV table {name}: schema without columns"
        )));
    }
    if let Some(f) = fields.iter().find(|f| !field::is_parseable(f.data_type())) {
        return Err(Error::not_implemented(format!(
            "TSV column {} of type {}",
            f.name(),
            f.data_type()
        )));
    }
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(io)?;
    if file.metadata().map_err(io)?.len() == 0 {
        return Table::from_columns(name, schema.clone(), vec![Vec::new(); fields.len()]);
    }
    // SAFETY: `Mmap::map` requires that the file not be modified or truncated while mapped
    // (a truncation makes access to the lost pages fault with SIGBUS; a modification changes
    // bytes behind a `&[u8]`). Like ripgrep and other mmap-based readers we cannot enforce
    // this against other processes; it is the documented contract of `read_tsv`, and the map
    // lives only for the duration of this call.
    let map = unsafe { Mmap::map(&file) }.map_err(io)?;
    #[cfg(unix)]
    {
        // Pieces are parsed roughly front to back: ask for aggressive read-ahead. Only a hint.
        let _ = map.advise(memmap2::Advice::Sequential);
    }
    let data: &[u8] = &map;

    let pieces = split_pieces(data);
    let first_error = AtomicUsize::new(usize::MAX);
    let done = Mutex::new(0u64);
    let parsed: Vec<Option<Result<Vec<Vec<ArrayRef>>, RowError>>> = pieces
        .par_iter()
        .enumerate()
        .map(|(i, range)| {
            // A piece after one that failed is not needed: the earliest error is reported.
            if i > first_error.load(Ordering::Relaxed) {
                return None;
            }
            let result = parse_piece(data, range.clone(), &schema);
            match &result {
                Err(_) => {
                    first_error.fetch_min(i, Ordering::Relaxed);
                }
                Ok(_) => {
                    if let Some(progress) = progress {
                        let mut done = done.lock().unwrap_or_else(|e| e.into_inner());
                        *done += range.len() as u64;
                        progress(*done);
                    }
                }
            }
            Some(result)
        })
        .collect();

    let mut columns: Vec<Vec<ArrayRef>> = vec![Vec::new(); fields.len()];
    for piece in parsed {
        match piece {
            Some(Ok(chunks)) => {
                for chunk in chunks {
                    for (column, array) in columns.iter_mut().zip(chunk) {
                        column.push(array);
                    }
                }
            }
            Some(Err(e)) => return Err(e.into_error(path, data, &schema)),
            None => {
                return Err(Error::internal(
                    "TSV piece skipped without an earlier error",
                ));
            }
        }
    }
    drop(map);

    // A Utf8 column with any non-UTF-8 chunk becomes Binary as a whole.
    let mut out_fields = Vec::with_capacity(fields.len());
    for (f, column) in fields.iter().zip(columns.iter_mut()) {
        let binary = f.data_type() == &DataType::Utf8
            && column.iter().any(|a| a.data_type() == &DataType::Binary);
        if binary {
            for array in column.iter_mut() {
                if let Some(s) = array.as_string_opt::<i32>() {
                    *array = Arc::new(BinaryArray::from(s.clone()));
                }
            }
        }
        let dt = if binary {
            DataType::Binary
        } else {
            f.data_type().clone()
        };
        out_fields.push(Field::new(f.name(), dt, f.is_nullable()));
    }
    Table::from_columns(name, Arc::new(Schema::new(out_fields)), columns)
}

/// Cuts `data` into byte ranges ending just after a `'\n'` (the last one at the end of the
/// data), each expected to hold about [`CHUNK_ROWS`] rows judging by the rows of the first
/// [`SAMPLE_BYTES`].
fn split_pieces(data: &[u8]) -> Vec<Range<usize>> {
    let sample = &data[..data.len().min(SAMPLE_BYTES)];
    let rows = memchr::memchr_iter(b'\n', sample).count().max(1);
    let piece_bytes = (sample.len() / rows)
        .saturating_mul(CHUNK_ROWS)
        .max(MIN_PIECE_BYTES);
    let mut pieces = Vec::with_capacity(data.len() / piece_bytes + 1);
    let mut start = 0;
    while start < data.len() {
        let tentative = start.saturating_add(piece_bytes);
        let end = if tentative >= data.len() {
            data.len()
        } else {
            memchr::memchr(b'\n', &data[tentative..]).map_or(data.len(), |i| tentative + i + 1)
        };
        pieces.push(start..end);
        start = end;
    }
    pieces
}

/// The first bad row of a piece.
#[derive(Debug)]
struct RowError {
    /// File offset of the row's first byte.
    row_start: usize,
    /// Column index from 0, or `None` for a field-count error.
    column: Option<usize>,
    detail: String,
}

impl RowError {
    /// The [`Error::Corrupt`] with the 1-based line number (newlines before the row + 1).
    fn into_error(self, path: &Path, data: &[u8], schema: &Schema) -> Error {
        let line = memchr::memchr_iter(b'\n', &data[..self.row_start]).count() + 1;
        let at = format!("line {line} (byte {})", self.row_start);
        let detail = match self.column {
            Some(c) => format!(
                "{at}, column {} ({}): {}",
                c + 1,
                schema.field(c).name(),
                self.detail
            ),
            None => format!("{at}: {}", self.detail),
        };
        Error::Corrupt {
            path: path.to_path_buf(),
            detail,
        }
    }
}

/// Parses the rows of `data[range]` into chunks: `result[k][c]` is column `c` of chunk `k`.
fn parse_piece(
    data: &[u8],
    range: Range<usize>,
    schema: &Schema,
) -> Result<Vec<Vec<ArrayRef>>, RowError> {
    let bytes = &data[range.clone()];
    let fields = schema.fields();
    let n = fields.len();
    let new_builders = |capacity: usize| -> Vec<ColumnBuilder> {
        fields
            .iter()
            .map(|f| ColumnBuilder::new(f.data_type(), f.is_nullable(), capacity))
            .collect()
    };
    // Capacity guess: rows of this piece if they are as long as its first one, capped.
    let first_row = memchr::memchr(b'\n', bytes).map_or(bytes.len(), |i| i + 1);
    let capacity = (bytes.len() / first_row.max(1)).clamp(1, CHUNK_ROWS);

    let mut chunks = Vec::new();
    let mut builders = new_builders(capacity);
    let mut rows = 0;
    let mut pos = 0;
    while pos < bytes.len() {
        let row_start = pos;
        let error = |column, detail| RowError {
            row_start: range.start + row_start,
            column,
            detail,
        };
        if n > 1 && bytes[pos] == b'\n' {
            return Err(error(
                None,
                format!("expected {n} fields, found an empty line"),
            ));
        }
        for (c, builder) in builders.iter_mut().enumerate() {
            let end = builder.push(bytes, pos).map_err(|d| error(Some(c), d))?;
            let last = c + 1 == n;
            match (bytes.get(end), last) {
                (Some(b'\t'), false) | (Some(b'\n') | None, true) => pos = end + 1,
                (Some(b'\t'), true) => {
                    return Err(error(None, format!("expected {n} fields, found more")));
                }
                _ => return Err(error(None, format!("expected {n} fields, found {}", c + 1))),
            }
        }
        rows += 1;
        if rows == CHUNK_ROWS || builders.iter().any(ColumnBuilder::is_full) {
            let full = std::mem::replace(&mut builders, new_builders(capacity));
            chunks.push(full.into_iter().map(ColumnBuilder::finish).collect());
            rows = 0;
        }
    }
    if rows > 0 {
        chunks.push(builders.into_iter().map(ColumnBuilder::finish).collect());
    }
    Ok(chunks)
}

#[cfg(test)]
mod tests;
