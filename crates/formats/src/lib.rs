//! Tessera's data formats, out and in: one [`Format`] registry with a writer
//! ([`writer`], [`write_batches`]) and a reader ([`reader`]) per format, shared by the
//! engine (`Database::write_query`, `INSERT INTO t FORMAT F`) and the CLI
//! (`tessera query --format`, `tessera load --format`).
//!
//! | format (ClickHouse's name, case-insensitive) | code | carries names / types | compression |
//! |---|---|---|---|
//! | `Native` | [`native`] (Tessera's) | both | ClickHouse compressed blocks |
//! | `RowBinary`, `RowBinaryWithNames`, `RowBinaryWithNamesAndTypes` | [`rowbinary`] (Tessera's) | none / names / both | ClickHouse compressed blocks |
//! | `TabSeparated` (`TSV`), `TabSeparatedWithNames` (`TSVWithNames`) | [`text`] (Tessera's) | none / names | ClickHouse compressed blocks |
//! | `CSV`, `CSVWithNames` | [`text`] (Tessera's) | none / names | ClickHouse compressed blocks |
//! | `JSONEachRow` | [`json`] (Tessera's) | names | ClickHouse compressed blocks |
//! | `Arrow` (IPC file), `ArrowStream` (IPC stream) | arrow-ipc | both | IPC body buffers (LZ4 frame, ZSTD) |
//! | `Parquet` | parquet | both | column chunks (LZ4_RAW, ZSTD) |
//!
//! The text formats are Tessera's own code rather than arrow-csv / arrow-json because
//! ClickHouse's definitions differ from those crates' in what decides compatibility: NULL
//! as `\N`, strings always quoted in CSV, TabSeparated escapes, floats as ClickHouse
//! prints them (`1e-7`, `nan`, `-inf`), bytes that are not UTF-8 kept as they are, and
//! `DateTime` as `YYYY-MM-DD hh:mm:ss`.
//!
//! **Types.** Tessera's column types map to ClickHouse's as ClickHouse's own Arrow
//! mapping does: Int8..Int64 and UInt8..UInt64 to the same names, Float32/64, Utf8 and
//! Binary to `String`, Date32 to `Date32`, Timestamp (seconds, UTC) to `DateTime('UTC')`.
//! A column is `Nullable(T)` in Native and RowBinary when its field is nullable
//! ([`Field::is_nullable`](arrow::datatypes::Field::is_nullable)); the engine marks a query's
//! output fields non-nullable where the answer holds no NULL, so `SELECT number FROM
//! numbers(10)` is `UInt64` as in ClickHouse. Reading, `Nullable(T)` gives a nullable field,
//! `T` a non-nullable one; `Date` (UInt16 days), `DateTime[('tz')]`, `DateTime64(P[, 'tz'])`
//! (floored to seconds), `FixedString(N)` (as bytes) and `Bool` (as UInt8) are read too;
//! other ClickHouse types are [`Error::NotImplemented`] naming the column.
//!
//! **Compression** ([`Compression`]): for Native, RowBinary and the text formats the
//! output is cut into ClickHouse compressed blocks ([`block`]: CityHash128 checksum,
//! method byte, sizes; LZ4 or ZSTD), what ClickHouse's native protocol, `clickhouse-client
//! --compression` and `clickhouse-compressor` use. Arrow and Parquet compress inside the
//! format, as ClickHouse's `output_format_arrow_compression_method` and
//! `output_format_parquet_compression_method` do.
//!
//! **Errors.** Bad input is [`Error::Corrupt`] whose detail names the row (from 1, in input
//! order) and the column (from 1, with its name): `row 17, column 2 (s): ...`. A reader never
//! panics on its input and allocates in proportion to the bytes it has read, not to sizes the
//! input claims.

#![warn(missing_docs)]

pub mod block;
mod builder;
mod chtype;
mod conform;
pub mod json;
pub mod native;
mod parallel;
mod arrowfmt;
pub mod rowbinary;
pub mod text;

use std::io::{Read, Write};
use std::path::PathBuf;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, SchemaRef};
pub use tessera_common::{Error, FileSink, Result};

pub use chtype::{clickhouse_type, parse_clickhouse_type};
pub use conform::{conform, normalize_schema};

/// Rows per batch the row-oriented readers (RowBinary, text, JSON) produce: 65,536, the
/// chunk (morsel) size of Tessera's tables (`tessera_io::CHUNK_ROWS`).
pub const READ_BATCH_ROWS: usize = 65_536;

/// Bytes the writers gather before they write to their sink: the row formats flush their
/// buffer at this size, and Native hands a column's data of at least this size to the sink
/// as it is (no copy). A `BufWriter` put around the sink should have this capacity: a
/// larger one copies those pieces into its buffer first (10% of a 100M-row `UInt64` Native
/// read with a 1 MiB `BufWriter`), a smaller one splits nothing that matters. Around a
/// file, [`FileSink`] of this capacity (page-aligned writes) is faster than `BufWriter`.
pub const SINK_BUFFER_BYTES: usize = 1 << 16;

/// A data format, named as ClickHouse names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// ClickHouse `Native`: columns block by block.
    Native,
    /// ClickHouse `RowBinary`: rows of values, no header.
    RowBinary,
    /// `RowBinaryWithNames`: a header of column names, then `RowBinary`.
    RowBinaryWithNames,
    /// `RowBinaryWithNamesAndTypes`: names and ClickHouse type names, then `RowBinary`.
    RowBinaryWithNamesAndTypes,
    /// `TabSeparated` (`TSV`): ClickHouse escapes, NULL as `\N`, no header.
    TabSeparated,
    /// `TabSeparatedWithNames` (`TSVWithNames`): a line of names, then `TabSeparated`.
    TabSeparatedWithNames,
    /// `CSV`: strings and dates quoted, NULL as `\N`, no header.
    Csv,
    /// `CSVWithNames`: a line of quoted names, then `CSV`.
    CsvWithNames,
    /// `JSONEachRow`: one JSON object per line.
    JsonEachRow,
    /// `Parquet`.
    Parquet,
    /// `Arrow`: the Arrow IPC file format.
    Arrow,
    /// `ArrowStream`: the Arrow IPC stream format.
    ArrowStream,
}

impl Format {
    /// Every format, in the order of the module table.
    pub const ALL: [Format; 12] = [
        Format::Native,
        Format::RowBinary,
        Format::RowBinaryWithNames,
        Format::RowBinaryWithNamesAndTypes,
        Format::TabSeparated,
        Format::TabSeparatedWithNames,
        Format::Csv,
        Format::CsvWithNames,
        Format::JsonEachRow,
        Format::Parquet,
        Format::Arrow,
        Format::ArrowStream,
    ];

    /// The format called `name`, ASCII case-insensitive, with ClickHouse's aliases (`TSV`,
    /// `TSVWithNames`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] listing the known names.
    pub fn parse(name: &str) -> Result<Format> {
        let n = name.trim().to_ascii_lowercase();
        let f = match n.as_str() {
            "native" => Format::Native,
            "rowbinary" => Format::RowBinary,
            "rowbinarywithnames" => Format::RowBinaryWithNames,
            "rowbinarywithnamesandtypes" => Format::RowBinaryWithNamesAndTypes,
            "tabseparated" | "tsv" => Format::TabSeparated,
            "tabseparatedwithnames" | "tsvwithnames" => Format::TabSeparatedWithNames,
            "csv" => Format::Csv,
            "csvwithnames" => Format::CsvWithNames,
            "jsoneachrow" => Format::JsonEachRow,
            "parquet" => Format::Parquet,
            "arrow" => Format::Arrow,
            "arrowstream" => Format::ArrowStream,
            _ => {
                let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
                return Err(Error::InvalidArgument(format!("unknown format '{name}': use one of {}", names.join(", "))));
            }
        };
        Ok(f)
    }

    /// ClickHouse's name of the format.
    pub fn name(self) -> &'static str {
        match self {
            Format::Native => "Native",
            Format::RowBinary => "RowBinary",
            Format::RowBinaryWithNames => "RowBinaryWithNames",
            Format::RowBinaryWithNamesAndTypes => "RowBinaryWithNamesAndTypes",
            Format::TabSeparated => "TabSeparated",
            Format::TabSeparatedWithNames => "TabSeparatedWithNames",
            Format::Csv => "CSV",
            Format::CsvWithNames => "CSVWithNames",
            Format::JsonEachRow => "JSONEachRow",
            Format::Parquet => "Parquet",
            Format::Arrow => "Arrow",
            Format::ArrowStream => "ArrowStream",
        }
    }

    /// Whether the input carries the column types, so that it can be read without a
    /// target schema (into a new table).
    pub fn carries_types(self) -> bool {
        matches!(
            self,
            Format::Native | Format::RowBinaryWithNamesAndTypes | Format::Parquet | Format::Arrow | Format::ArrowStream
        )
    }

    /// Whether [`Compression`] is the format's own (Arrow, Parquet) rather than ClickHouse
    /// compressed blocks around the whole output.
    pub fn compresses_inside(self) -> bool {
        matches!(self, Format::Parquet | Format::Arrow | Format::ArrowStream)
    }

    /// For the row formats, whose batches serialize independently of one another after a
    /// header and cost enough per value to gain from [`write_batches`]' parallel path: the
    /// format of the body, i.e. without its header (`CSVWithNames` -> `CSV`). `None` for
    /// the others (Arrow and Parquet; Native, whose blocks are mostly copies of the column
    /// buffers: serialized in parallel it was slower by the extra copy, 0.17 s against
    /// 0.16 s for 6M rows of the Mixed case, where RowBinary gained 10%, CSV 15%, JSON 20%).
    fn body_format(self) -> Option<Format> {
        Some(match self {
            Format::RowBinary | Format::TabSeparated | Format::Csv | Format::JsonEachRow => self,
            Format::RowBinaryWithNames | Format::RowBinaryWithNamesAndTypes => Format::RowBinary,
            Format::TabSeparatedWithNames => Format::TabSeparated,
            Format::CsvWithNames => Format::Csv,
            Format::Native | Format::Parquet | Format::Arrow | Format::ArrowStream => return None,
        })
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Compression of a format's bytes (see the crate docs for where it applies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// No compression (the default).
    #[default]
    None,
    /// LZ4 (ClickHouse method 0x82; Arrow LZ4 frame; Parquet LZ4_RAW).
    Lz4,
    /// ZSTD at the given level (ClickHouse method 0x90; ClickHouse's default level is 1).
    Zstd(i32),
}

impl Compression {
    /// `none`, `lz4`, `zstd` (level 1, ClickHouse's default) or `zstd(LEVEL)`, ASCII
    /// case-insensitive.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for another name or a level outside 1..=22.
    pub fn parse(s: &str) -> Result<Compression> {
        let l = s.trim().to_ascii_lowercase();
        let bad = || Error::InvalidArgument(format!("compression '{s}': use none, lz4, zstd or zstd(LEVEL 1..22)"));
        Ok(match l.as_str() {
            "none" | "" => Compression::None,
            "lz4" => Compression::Lz4,
            "zstd" => Compression::Zstd(1),
            _ => {
                let level = l.strip_prefix("zstd(").and_then(|r| r.strip_suffix(')')).ok_or_else(bad)?;
                let level: i32 = level.trim().parse().map_err(|_| bad())?;
                if !(1..=22).contains(&level) {
                    return Err(bad());
                }
                Compression::Zstd(level)
            }
        })
    }
}

/// How to write a format.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// Compression (see [`Compression`]).
    pub compression: Compression,
}

/// How to read a format.
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    /// Compression the input was written with (ClickHouse compressed blocks for the
    /// non-Arrow formats; Arrow and Parquet say it themselves and ignore this).
    pub compression: Compression,
    /// The schema the batches must have (an existing table's): columns are matched by
    /// name where the input names them (else by position) and converted to its types.
    /// Required for formats that carry no types ([`Format::carries_types`]).
    pub schema: Option<SchemaRef>,
    /// What to call the input in errors (a file path, `<stdin>`).
    pub source: PathBuf,
}

/// Writes record batches in a format to a byte sink, one batch at a time.
pub trait BatchWriter {
    /// Writes one batch (its schema must be the writer's). Nothing of earlier batches is
    /// kept, except what a Parquet row group buffers before it is flushed.
    ///
    /// # Errors
    /// [`Error::Io`] from the sink; [`Error::InvalidArgument`] for a value the format
    /// cannot hold (a timestamp outside ClickHouse's `DateTime` range), naming row and column.
    fn write(&mut self, batch: &RecordBatch) -> Result<()>;

    /// Writes what the format puts at the end (footer, last compressed block) and flushes.
    ///
    /// # Errors
    /// As [`BatchWriter::write`].
    fn finish(self: Box<Self>) -> Result<()>;
}

/// A format's reader: batches in input order, each with [`BatchReader::schema`].
pub trait BatchReader: Iterator<Item = Result<RecordBatch>> {
    /// The schema of every batch: the target schema when one was given, else the input's
    /// (converted to the types Tessera executes, see [`normalize_schema`]).
    fn schema(&self) -> SchemaRef;
}

/// Bytes and rows a [`write_batches`] call wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Rows written.
    pub rows: u64,
    /// Bytes written to the sink (after compression).
    pub bytes: u64,
}

/// A writer of `format` for batches of `schema` into `out`.
///
/// # Errors
/// [`Error::NotImplemented`] for a column type the format cannot write; [`Error::Io`].
pub fn writer<'a>(
    format: Format,
    schema: &SchemaRef,
    out: Box<dyn Write + Send + 'a>,
    opts: &WriteOptions,
) -> Result<Box<dyn BatchWriter + 'a>> {
    if format.compresses_inside() {
        return arrowfmt::writer(format, schema, out, opts.compression);
    }
    let out = compressed(out, opts.compression);
    Ok(match format {
        Format::Native => Box::new(native::NativeWriter::new(schema, out)?),
        Format::RowBinary | Format::RowBinaryWithNames | Format::RowBinaryWithNamesAndTypes => {
            Box::new(rowbinary::RowBinaryWriter::new(format, schema, out)?)
        }
        Format::TabSeparated | Format::TabSeparatedWithNames | Format::Csv | Format::CsvWithNames => {
            Box::new(text::TextWriter::new(format, schema, out)?)
        }
        Format::JsonEachRow => Box::new(json::JsonWriter::new(schema, out)?),
        Format::Parquet | Format::Arrow | Format::ArrowStream => unreachable!("handled above"),
    })
}

/// `out` as it is, or inside ClickHouse compressed blocks (the formats that do not compress
/// inside themselves).
fn compressed<'a>(out: Box<dyn Write + Send + 'a>, compression: Compression) -> Box<dyn Write + Send + 'a> {
    match compression {
        Compression::None => out,
        c => Box::new(block::CompressedWriter::new(out, c)),
    }
}

/// Writes `batches` (each of `schema`) in `format` to `out` batch by batch, then
/// finishes the format (footer, flush). The serialized output is never held whole.
///
/// # Errors
/// The first error of `batches`, or of the writer (see [`BatchWriter::write`]).
pub fn write_batches<'a>(
    format: Format,
    schema: &SchemaRef,
    batches: impl IntoIterator<Item = Result<RecordBatch>>,
    out: impl Write + Send + 'a,
    opts: &WriteOptions,
) -> Result<WriteStats> {
    let counter = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let sink = Counting { inner: out, bytes: counter.clone() };
    // Row-independent formats serialize batches in parallel (ClickHouse's parallel
    // formatting), unless a value can fail to convert (timestamps outside DateTime's
    // range), whose error names its row in the whole output.
    let per_row_errors = schema.fields().iter().any(|f| matches!(f.data_type(), DataType::Timestamp(_, _)));
    if let Some(body) = format.body_format().filter(|_| !per_row_errors && rayon::current_num_threads() > 1) {
        return write_parallel(format, body, schema, batches, Box::new(sink), opts).map(|rows| WriteStats {
            rows,
            bytes: counter.load(std::sync::atomic::Ordering::Relaxed),
        });
    }
    let mut w = writer(format, schema, Box::new(sink), opts)?;
    let mut rows = 0u64;
    for b in batches {
        let b = b?;
        rows += b.num_rows() as u64;
        w.write(&b)?;
    }
    w.finish()?;
    Ok(WriteStats { rows, bytes: counter.load(std::sync::atomic::Ordering::Relaxed) })
}

/// Batches serialized per group of [`PARALLEL_BATCHES`] on the rayon pool, written in order.
const PARALLEL_BATCHES: usize = 16;

/// [`write_batches`] for a format whose batches serialize independently: the header (what
/// `format`'s writer writes before any row), then each batch serialized in `body` (the
/// format without header) into its own buffer, groups of batches in parallel, written to
/// `out` (through the compressor, if any) in order while the next group is encoded.
/// Returns the rows written.
fn write_parallel<'a>(
    format: Format,
    body: Format,
    schema: &SchemaRef,
    batches: impl IntoIterator<Item = Result<RecordBatch>>,
    out: Box<dyn Write + Send + 'a>,
    opts: &WriteOptions,
) -> Result<u64> {
    use rayon::prelude::*;
    let none = WriteOptions { compression: Compression::None };
    let encode = |f: Format, b: Option<&RecordBatch>, v: &mut Vec<u8>| -> Result<()> {
        v.clear();
        let mut w = writer(f, schema, Box::new(&mut *v), &none)?;
        if let Some(b) = b {
            w.write(b)?;
        }
        w.finish()
    };
    let mut out = compressed(out, opts.compression);
    // One buffer per batch of a group, reused from group to group (no fresh pages per
    // batch); two sets: one group's output is written while the next group is encoded.
    let mut bufs: Vec<Vec<u8>> = vec![Vec::new(); PARALLEL_BATCHES];
    let mut written: Vec<Vec<u8>> = vec![Vec::new(); PARALLEL_BATCHES];
    encode(format, None, &mut bufs[0])?;
    out.write_all(&bufs[0]).map_err(out_err)?;
    let (mut rows, mut group, mut ready) = (0u64, Vec::with_capacity(PARALLEL_BATCHES), 0);
    let mut batches = batches.into_iter().peekable();
    while batches.peek().is_some() || ready > 0 {
        group.clear();
        while group.len() < PARALLEL_BATCHES {
            match batches.next() {
                Some(Ok(b)) => group.push(b),
                Some(Err(e)) => {
                    // The rows before the error are written first.
                    write_all(&mut out, &bufs[..ready])?;
                    out.flush().map_err(out_err)?;
                    return Err(e);
                }
                None => break,
            }
        }
        std::mem::swap(&mut bufs, &mut written);
        let write = || write_all(&mut out, &written[..ready]);
        let encode_group = || {
            group
                .par_iter()
                .zip(bufs.par_iter_mut())
                .try_for_each(|(b, v)| {
                    if b.num_rows() > 0 {
                        return encode(body, Some(b), v);
                    }
                    v.clear();
                    Ok(())
                })
        };
        let (w, e) = rayon::join(write, encode_group);
        w?;
        e?;
        ready = group.len();
        rows += group.iter().map(|b| b.num_rows() as u64).sum::<u64>();
    }
    out.flush().map_err(out_err)?;
    Ok(rows)
}

/// Writes `bufs` to `out` in order.
fn write_all(out: &mut impl Write, bufs: &[Vec<u8>]) -> Result<()> {
    bufs.iter().try_for_each(|v| out.write_all(v).map_err(out_err))
}

/// A sink that counts the bytes passed through.
struct Counting<W> {
    inner: W,
    bytes: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Where a reader's bytes come from: a file (Arrow IPC files and Parquet read it in place)
/// or any stream (those two formats then buffer the stream in memory first, since their
/// footers are at the end).
pub enum Input<'a> {
    /// A file opened for reading.
    File(std::fs::File),
    /// Any byte stream (stdin, a pipe, a slice).
    Stream(Box<dyn Read + Send + 'a>),
}

/// A reader of `format` over `input`.
///
/// # Errors
/// [`Error::InvalidArgument`] for a format without types and no `opts.schema`;
/// [`Error::Corrupt`] for a bad header; [`Error::NotImplemented`] for ClickHouse types
/// Tessera does not store; [`Error::Io`].
pub fn reader<'a>(format: Format, input: Input<'a>, opts: &ReadOptions) -> Result<Box<dyn BatchReader + Send + 'a>> {
    if !format.carries_types() && opts.schema.is_none() {
        return Err(Error::InvalidArgument(format!(
            "format {format} carries no column types: read it into an existing table (INSERT INTO t FORMAT {format}, \
             or `tessera load` into a table created first)"
        )));
    }
    if format.compresses_inside() {
        return arrowfmt::reader(format, input, opts);
    }
    let raw: Box<dyn Read + Send + 'a> = match input {
        Input::File(f) => Box::new(f),
        Input::Stream(s) => s,
    };
    let src: Box<dyn Read + Send + 'a> = match opts.compression {
        Compression::None => raw,
        _ => Box::new(block::CompressedReader::new(raw, opts.source.clone())),
    };
    let src = std::io::BufReader::with_capacity(1 << 20, src);
    Ok(match format {
        Format::Native => native::reader(src, opts)?,
        Format::RowBinary | Format::RowBinaryWithNames | Format::RowBinaryWithNamesAndTypes => {
            rowbinary::reader(format, src, opts)?
        }
        Format::TabSeparated | Format::TabSeparatedWithNames | Format::Csv | Format::CsvWithNames => {
            Box::new(text::TextReader::new(format, src, opts)?)
        }
        Format::JsonEachRow => json::reader(src, opts)?,
        Format::Parquet | Format::Arrow | Format::ArrowStream => unreachable!("handled above"),
    })
}

/// `Error::Corrupt` for input `source` with `detail`.
pub(crate) fn corrupt(source: &std::path::Path, detail: impl Into<String>) -> Error {
    Error::Corrupt { path: source.to_path_buf(), detail: detail.into() }
}

/// The error for `e` reading input `source`: damage found by a layer below (ClickHouse
/// compressed blocks: `InvalidData`; a cut stream: `UnexpectedEof`) is
/// [`Error::Corrupt`], anything else [`Error::Io`].
pub(crate) fn in_err(source: &std::path::Path, e: std::io::Error) -> Error {
    match e.kind() {
        std::io::ErrorKind::InvalidData | std::io::ErrorKind::UnexpectedEof => corrupt(source, e.to_string()),
        _ => Error::Io { path: source.to_path_buf(), source: e },
    }
}

/// `Error::Io` for an error writing the output.
pub(crate) fn out_err(e: std::io::Error) -> Error {
    Error::Io { path: "<output>".into(), source: e }
}

#[cfg(test)]
mod tests;
