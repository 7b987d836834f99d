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
    let blocks = TsvBlocks::open(path, schema)?;
    let columns = blocks.read(0..blocks.pieces(), progress)?;
    Table::from_columns(name, blocks.schema().clone(), columns)
}

/// A `TabSeparated` file read a block of rows at a time, so that `tessera load` writes parts
/// with memory bounded by one block instead of the file (the format and errors are those of
/// [`read_tsv`], which reads every block at once).
///
/// [`TsvBlocks::open`] maps the file, cuts it into pieces of about [`CHUNK_ROWS`] rows (each
/// ends at a raw `'\n'`), counts the rows and decides each column's type before any block
/// is parsed: a Utf8 column is Binary when any of its values, unescaped, is not valid UTF-8,
/// so that every block has the same schema. That check is one pass over the bytes: a piece
/// that is valid UTF-8 and holds no `\x` escape (the only escape that can produce a non-UTF-8
/// byte; removing the other escapes' backslashes keeps valid UTF-8 valid) needs nothing
/// more; the other pieces are parsed once to find the columns concerned.
///
/// The file must not be truncated or modified while this value lives (it is
/// memory-mapped; see the SAFETY note in [`TsvBlocks::open`]).
pub struct TsvBlocks {
    path: std::path::PathBuf,
    /// `None` for an empty file (nothing to map).
    map: Option<Mmap>,
    /// The schema asked for, which the parser follows (Utf8 stays Utf8 there).
    parse_schema: SchemaRef,
    /// The table schema: `parse_schema` with the Utf8 columns that hold non-UTF-8 values
    /// as Binary.
    schema: SchemaRef,
    pieces: Vec<Range<usize>>,
    rows: usize,
}

impl std::fmt::Debug for TsvBlocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TsvBlocks")
            .field("path", &self.path)
            .field("pieces", &self.pieces.len())
            .field("rows", &self.rows)
            .finish_non_exhaustive()
    }
}

impl TsvBlocks {
    /// Maps `path`, splits it into pieces and decides the column types (see the type docs).
    ///
    /// # Errors
    /// As [`read_tsv`]: [`Error::Io`], [`Error::NotImplemented`], [`Error::InvalidArgument`],
    /// and [`Error::Corrupt`] for the first bad row of a piece that had to be parsed to
    /// decide a column's type.
    pub fn open(path: &Path, schema: SchemaRef) -> Result<Self> {
        let fields = schema.fields();
        if fields.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "TSV file {}: schema without columns",
                path.display()
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
        let empty = TsvBlocks {
            path: path.to_path_buf(),
            map: None,
            parse_schema: schema.clone(),
            schema: schema.clone(),
            pieces: Vec::new(),
            rows: 0,
        };
        if file.metadata().map_err(io)?.len() == 0 {
            return Ok(empty);
        }
        // SAFETY: `Mmap::map` requires that the file not be modified or truncated while mapped
        // (a truncation makes access to the lost pages fault with SIGBUS; a modification
        // changes bytes behind a `&[u8]`). Like ripgrep and other mmap-based readers we cannot
        // enforce this against other processes; it is the documented contract of `TsvBlocks`
        // (and `read_tsv`), and the map lives only as long as this value.
        let map = unsafe { Mmap::map(&file) }.map_err(io)?;
        #[cfg(unix)]
        {
            // Pieces are parsed roughly front to back: ask for aggressive read-ahead. Only a hint.
            let _ = map.advise(memmap2::Advice::Sequential);
        }
        let data: &[u8] = &map;
        let pieces = split_pieces(data);
        // Rows (a raw newline always ends a row; the last row may lack it) and the pieces
        // whose strings may not all be UTF-8.
        let scan: Vec<(usize, bool)> = pieces
            .par_iter()
            .map(|r| {
                let bytes = &data[r.clone()];
                let rows = memchr::memchr_iter(b'\n', bytes).count();
                let clean = std::str::from_utf8(bytes).is_ok()
                    && memchr::memmem::find(bytes, b"\\x").is_none();
                (rows, clean)
            })
            .collect();
        let mut rows: usize = scan.iter().map(|s| s.0).sum();
        if data.last() != Some(&b'\n') {
            rows += 1;
        }
        let utf8: Vec<usize> = (0..fields.len())
            .filter(|&c| fields[c].data_type() == &DataType::Utf8)
            .collect();
        let mut binary = vec![false; fields.len()];
        if !utf8.is_empty() {
            let suspects: Vec<usize> = (0..pieces.len()).filter(|&i| !scan[i].1).collect();
            let found: Vec<Vec<usize>> = suspects
                .par_iter()
                .map(|&i| {
                    let chunks = parse_piece(data, pieces[i].clone(), &schema)
                        .map_err(|e| e.into_error(path, data, &schema))?;
                    Ok(utf8
                        .iter()
                        .copied()
                        .filter(|&c| chunks.iter().any(|k| k[c].data_type() == &DataType::Binary))
                        .collect())
                })
                .collect::<Result<_>>()?;
            for c in found.into_iter().flatten() {
                binary[c] = true;
            }
        }
        let out_fields: Vec<Field> = fields
            .iter()
            .zip(&binary)
            .map(|(f, &b)| {
                let dt = if b { DataType::Binary } else { f.data_type().clone() };
                Field::new(f.name(), dt, f.is_nullable())
            })
            .collect();
        Ok(TsvBlocks {
            map: Some(map),
            schema: Arc::new(Schema::new(out_fields)),
            pieces,
            rows,
            ..empty
        })
    }

    /// The table schema: the asked-for schema, with Utf8 columns holding non-UTF-8 values
    /// as Binary (no byte is lost; Tessera treats Binary as a string type).
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Rows in the file.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Pieces of about [`CHUNK_ROWS`] rows the file was cut into (the unit of [`TsvBlocks::read`]).
    pub fn pieces(&self) -> usize {
        self.pieces.len()
    }

    /// Parses pieces `range` in parallel on the rayon pool: `result[c]` is column `c` as
    /// chunks of at most [`CHUNK_ROWS`] rows, in file order, of [`TsvBlocks::schema`]'s types.
    /// `progress`, if given, gets the bytes of the range parsed so far, increasing.
    ///
    /// # Errors
    /// [`Error::Corrupt`] for the first bad row in file order (as [`read_tsv`]);
    /// [`Error::Internal`] for a range out of bounds.
    pub fn read(
        &self,
        range: Range<usize>,
        progress: Option<&(dyn Fn(u64) + Sync)>,
    ) -> Result<Vec<Vec<ArrayRef>>> {
        let fields = self.schema.fields();
        let mut columns: Vec<Vec<ArrayRef>> = vec![Vec::new(); fields.len()];
        let Some(map) = &self.map else {
            return if range.is_empty() {
                Ok(columns)
            } else {
                Err(Error::internal("TSV pieces out of range (empty file)"))
            };
        };
        let pieces = self
            .pieces
            .get(range)
            .ok_or_else(|| Error::internal("TSV pieces out of range"))?;
        let data: &[u8] = map;
        let schema = &self.parse_schema;
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
                let result = parse_piece(data, range.clone(), schema);
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
        for piece in parsed {
            match piece {
                Some(Ok(chunks)) => {
                    for chunk in chunks {
                        for (column, array) in columns.iter_mut().zip(chunk) {
                            column.push(array);
                        }
                    }
                }
                Some(Err(e)) => return Err(e.into_error(&self.path, data, schema)),
                None => {
                    return Err(Error::internal(
                        "TSV piece skipped without an earlier error",
                    ));
                }
            }
        }
        // A column decided Binary has Utf8 chunks where its values are valid UTF-8.
        for (f, column) in fields.iter().zip(columns.iter_mut()) {
            for array in column.iter_mut() {
                if array.data_type() == f.data_type() {
                    continue;
                }
                match array.as_string_opt::<i32>() {
                    Some(s) if f.data_type() == &DataType::Binary => {
                        *array = Arc::new(BinaryArray::from(s.clone()));
                    }
                    _ => {
                        return Err(Error::internal(format!(
                            "TSV column {}: a chunk of type {} in a column of type {} \
                             (was the file modified while read?)",
                            f.name(),
                            array.data_type(),
                            f.data_type()
                        )));
                    }
                }
            }
        }
        Ok(columns)
    }
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
