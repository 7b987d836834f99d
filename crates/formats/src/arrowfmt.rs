//! `Arrow` (IPC file), `ArrowStream` (IPC stream) and `Parquet`, on arrow-rs's writers
//! and readers. The batches are written as Tessera holds them (Utf8, Binary, Date32,
//! Timestamp(Second)); ClickHouse reads Utf8 and Binary as `String`. Compression is the
//! format's own: IPC body buffers in LZ4 frame or ZSTD, Parquet column chunks in LZ4_RAW or
//! ZSTD. Parquet row groups hold [`PARQUET_ROW_GROUP_ROWS`] rows, buffered (encoded) by the
//! writer until full, as every Parquet writer does.

use std::io::{Read, Write};

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, SchemaRef};
use arrow::ipc::CompressionType;
use arrow::ipc::writer::{FileWriter, IpcWriteOptions, StreamWriter};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::properties::WriterProperties;
use tessera_common::{Error, Result};

use crate::parallel::{Framing, ParallelChunks, Position, Walk};
use crate::{BatchReader, BatchWriter, Compression, Format, Input, READ_BATCH_ROWS, ReadOptions, corrupt, out_err};

/// Rows per Parquet row group written: 1,048,576 (the parquet crate's default; ClickHouse
/// writes 1,000,000).
pub(crate) const PARQUET_ROW_GROUP_ROWS: usize = 1 << 20;

enum Inner<'a> {
    File(FileWriter<Box<dyn Write + Send + 'a>>),
    Stream(StreamWriter<Box<dyn Write + Send + 'a>>),
    ParIpc(Box<IpcOut<'a>>),
    Parquet(Box<ParquetOut<'a>>),
}

struct ArrowBatchWriter<'a>(Inner<'a>);

fn ipc_err(e: arrow::error::ArrowError) -> Error {
    match e {
        arrow::error::ArrowError::IoError(_, source) => out_err(source),
        other => Error::from(other),
    }
}

fn pq_err(e: parquet::errors::ParquetError) -> Error {
    match e {
        parquet::errors::ParquetError::External(b) => match b.downcast::<std::io::Error>() {
            Ok(io) => out_err(*io),
            Err(b) => Error::Internal(format!("parquet: {b}")),
        },
        other => Error::Internal(format!("parquet: {other}")),
    }
}

pub(crate) fn writer<'a>(
    format: Format,
    schema: &SchemaRef,
    out: Box<dyn Write + Send + 'a>,
    compression: Compression,
) -> Result<Box<dyn BatchWriter + 'a>> {
    let inner = match format {
        Format::Arrow | Format::ArrowStream => {
            let c = match compression {
                Compression::None => None,
                Compression::Lz4 => Some(CompressionType::LZ4_FRAME),
                Compression::Zstd(_) => Some(CompressionType::ZSTD),
            };
            let opts = IpcWriteOptions::default().try_with_compression(c).map_err(ipc_err)?;
            let dictionaries = schema.fields().iter().any(|f| matches!(f.data_type(), arrow::datatypes::DataType::Dictionary(..)));
            if rayon::current_num_threads() > 1 && !dictionaries {
                Inner::ParIpc(Box::new(IpcOut::new(out, schema, opts, format == Format::Arrow)?))
            } else if format == Format::Arrow {
                Inner::File(FileWriter::try_new_with_options(out, schema, opts).map_err(ipc_err)?)
            } else {
                Inner::Stream(StreamWriter::try_new_with_options(out, schema, opts).map_err(ipc_err)?)
            }
        }
        Format::Parquet => {
            let c = match compression {
                Compression::None => parquet::basic::Compression::UNCOMPRESSED,
                Compression::Lz4 => parquet::basic::Compression::LZ4_RAW,
                Compression::Zstd(level) => parquet::basic::Compression::ZSTD(
                    parquet::basic::ZstdLevel::try_new(level).map_err(|e| Error::InvalidArgument(e.to_string()))?,
                ),
            };
            let props = WriterProperties::builder().set_compression(c).set_max_row_group_row_count(Some(PARQUET_ROW_GROUP_ROWS)).build();
            let (file, factory) =
                ArrowWriter::try_new(out, schema.clone(), Some(props)).and_then(ArrowWriter::into_serialized_writer).map_err(pq_err)?;
            Inner::Parquet(Box::new(ParquetOut {
                file,
                factory,
                schema: schema.clone(),
                groups: Vec::new(),
                written: 0,
                last_rows: 0,
                held_bytes: 0,
            }))
        }
        other => return Err(Error::internal(format!("{other} is not an arrow-rs format"))),
    };
    Ok(Box::new(ArrowBatchWriter(inner)))
}

impl BatchWriter for ArrowBatchWriter<'_> {
    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        match &mut self.0 {
            Inner::File(w) => w.write(batch).map_err(ipc_err),
            Inner::Stream(w) => w.write(batch).map_err(ipc_err),
            Inner::ParIpc(w) => w.write(batch),
            Inner::Parquet(w) => w.write(batch),
        }
    }

    fn finish(self: Box<Self>) -> Result<()> {
        match self.0 {
            Inner::File(mut w) => {
                w.finish().map_err(ipc_err)?;
                w.into_inner().map_err(ipc_err)?.flush().map_err(out_err)
            }
            Inner::ParIpc(w) => w.finish(),
            Inner::Stream(mut w) => {
                w.finish().map_err(ipc_err)?;
                w.into_inner().map_err(ipc_err)?.flush().map_err(out_err)
            }
            Inner::Parquet(mut w) => {
                w.encode(true)?;
                let mut out = w.file.into_inner().map_err(pq_err)?;
                out.flush().map_err(out_err)
            }
        }
    }
}

/// An encoded IPC message and its (padded header, body) lengths.
type Message = (Vec<u8>, (usize, usize));

/// Arrow IPC output (stream or file) with its record batch messages encoded in parallel
/// (arrow-ipc's writers compress a batch's buffers on the calling thread): batches are
/// held, two per thread of the current rayon pool, each encoded into its message on a
/// thread of the pool (arrow-ipc's `IpcDataGenerator` and `write_message`, as its writers
/// do) and written in order. The header is what arrow-ipc's `StreamWriter` / `FileWriter`
/// write first (magic, schema message); a file's footer (the schema and each message's
/// offset and lengths) is built as `FileWriter` builds it: the same bytes as arrow-ipc's
/// writers (tested). Schemas without dictionaries only (a dictionary is sent once per
/// stream, which batches encoded apart cannot know).
struct IpcOut<'a> {
    out: Box<dyn Write + Send + 'a>,
    opts: IpcWriteOptions,
    schema: SchemaRef,
    held: Vec<RecordBatch>,
    /// Bytes written so far (the next message's offset).
    offset: usize,
    /// For a file: each message's block, for the footer.
    blocks: Option<Vec<arrow::ipc::Block>>,
}

impl<'a> IpcOut<'a> {
    fn new(mut out: Box<dyn Write + Send + 'a>, schema: &SchemaRef, opts: IpcWriteOptions, file: bool) -> Result<Self> {
        // The header as arrow-ipc's writer writes it (nothing after it is kept).
        let header = if file {
            let mut w = FileWriter::try_new_with_options(Vec::new(), schema, opts.clone()).map_err(ipc_err)?;
            std::mem::take(w.get_mut())
        } else {
            let mut w = StreamWriter::try_new_with_options(Vec::new(), schema, opts.clone()).map_err(ipc_err)?;
            std::mem::take(w.get_mut())
        };
        out.write_all(&header).map_err(out_err)?;
        let blocks = file.then(Vec::new);
        Ok(IpcOut { out, opts, schema: schema.clone(), held: Vec::new(), offset: header.len(), blocks })
    }

    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.held.push(batch.clone());
        if self.held.len() >= 2 * rayon::current_num_threads() {
            self.encode()?;
        }
        Ok(())
    }

    /// Encodes the held batches in parallel and writes their messages in order.
    fn encode(&mut self) -> Result<()> {
        use arrow::ipc::writer::{DictionaryTracker, IpcDataGenerator, IpcWriteContext, write_message};
        use rayon::prelude::*;
        let opts = &self.opts;
        let messages: Vec<Message> = self
            .held
            .par_iter()
            .map(|b| -> std::result::Result<_, arrow::error::ArrowError> {
                let mut tracker = DictionaryTracker::new(false);
                let (_, message) = IpcDataGenerator::default().encode(b, &mut tracker, opts, &mut IpcWriteContext::default())?;
                let mut out = Vec::new();
                let lens = write_message(&mut out, message, opts)?;
                Ok((out, lens))
            })
            .collect::<std::result::Result<_, _>>()
            .map_err(ipc_err)?;
        self.held.clear();
        for (m, (header, body)) in messages {
            self.out.write_all(&m).map_err(out_err)?;
            if let Some(blocks) = &mut self.blocks {
                blocks.push(arrow::ipc::Block::new(self.offset as i64, header as i32, body as i64));
            }
            self.offset += header + body;
        }
        Ok(())
    }

    /// The rest of the messages, the end-of-stream marker and, for a file, the footer, its
    /// length and the closing magic.
    fn finish(mut self) -> Result<()> {
        self.encode()?;
        self.out.write_all(&IPC_END).map_err(out_err)?;
        if let Some(blocks) = &self.blocks {
            let mut fbb = flatbuffers::FlatBufferBuilder::new();
            let dictionaries = fbb.create_vector::<arrow::ipc::Block>(&[]);
            let record_batches = fbb.create_vector(blocks);
            let mut tracker = arrow::ipc::writer::DictionaryTracker::new(true);
            let schema = arrow::ipc::convert::IpcSchemaEncoder::new()
                .with_dictionary_tracker(&mut tracker)
                .schema_to_fb_offset(&mut fbb, &self.schema);
            let root = {
                let mut footer = arrow::ipc::FooterBuilder::new(&mut fbb);
                footer.add_version(arrow::ipc::MetadataVersion::V5);
                footer.add_schema(schema);
                footer.add_dictionaries(dictionaries);
                footer.add_recordBatches(record_batches);
                footer.finish()
            };
            fbb.finish(root, None);
            let data = fbb.finished_data();
            self.out.write_all(data).map_err(out_err)?;
            self.out.write_all(&(data.len() as i32).to_le_bytes()).map_err(out_err)?;
            self.out.write_all(b"ARROW1").map_err(out_err)?;
        }
        self.out.flush().map_err(out_err)
    }
}

/// Parquet output with its row groups encoded in parallel: arrow-rs's `ArrowWriter`
/// encodes a row group's columns one after another on the calling thread; here the batches
/// of up to one row group per thread of the current rayon pool are held, each row group is
/// encoded by its own column writers on a thread of the pool (arrow-rs's
/// `ArrowRowGroupWriterFactory`, as its docs show for columns), and the encoded column
/// chunks are appended in order: the same bytes as `ArrowWriter` with the same properties.
struct ParquetOut<'a> {
    file: parquet::file::writer::SerializedFileWriter<Box<dyn Write + Send + 'a>>,
    factory: parquet::arrow::arrow_writer::ArrowRowGroupWriterFactory,
    schema: SchemaRef,
    /// The batches of the row groups not written yet (each at most
    /// [`PARQUET_ROW_GROUP_ROWS`] rows; only the last may be short).
    groups: Vec<Vec<RecordBatch>>,
    /// Row groups written.
    written: usize,
    /// Rows of the last group held, and bytes of all batches held.
    last_rows: usize,
    held_bytes: usize,
}

/// Bytes of batches held for parallel encoding past which the full row groups are
/// encoded even if fewer than the threads (wide rows).
const PARQUET_HELD_BYTES: usize = 256 << 20;

impl ParquetOut<'_> {
    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let mut rest = batch.clone();
        while rest.num_rows() > 0 {
            if self.groups.is_empty() || self.last_rows == PARQUET_ROW_GROUP_ROWS {
                self.groups.push(Vec::new());
                self.last_rows = 0;
            }
            let take = (PARQUET_ROW_GROUP_ROWS - self.last_rows).min(rest.num_rows());
            let part = rest.slice(0, take);
            self.held_bytes += part.get_array_memory_size();
            self.groups.last_mut().expect("a group").push(part);
            self.last_rows += take;
            rest = rest.slice(take, rest.num_rows() - take);
        }
        let full = self.groups.len() - usize::from(self.last_rows < PARQUET_ROW_GROUP_ROWS);
        if full >= rayon::current_num_threads().max(1) || (full > 0 && self.held_bytes >= PARQUET_HELD_BYTES) {
            self.encode(false)?;
        }
        Ok(())
    }

    /// Encodes and writes the full row groups held, and (`last`) the short one too.
    fn encode(&mut self, last: bool) -> Result<()> {
        use rayon::prelude::*;
        let keep = if !last && self.last_rows < PARQUET_ROW_GROUP_ROWS { self.groups.pop() } else { None };
        let groups = std::mem::take(&mut self.groups);
        let (factory, schema, first) = (&self.factory, &self.schema, self.written);
        let encode = |(i, batches): (usize, &Vec<RecordBatch>)| -> parquet::errors::Result<Vec<_>> {
            let mut writers = factory.create_column_writers(first + i)?;
            for b in batches {
                let mut w = writers.iter_mut();
                for (field, col) in schema.fields().iter().zip(b.columns()) {
                    for leaf in parquet::arrow::arrow_writer::compute_leaves(field, col)? {
                        w.next().expect("a writer per leaf").write(&leaf)?;
                    }
                }
            }
            writers.into_iter().map(|w| w.close()).collect()
        };
        let chunks: Vec<_> = if groups.len() > 1 {
            groups.par_iter().enumerate().map(encode).collect::<parquet::errors::Result<_>>()
        } else {
            groups.iter().enumerate().map(encode).collect::<parquet::errors::Result<_>>()
        }
        .map_err(pq_err)?;
        for group in chunks {
            let mut rg = self.file.next_row_group().map_err(pq_err)?;
            for chunk in group {
                chunk.append_to_row_group(&mut rg).map_err(pq_err)?;
            }
            rg.close().map_err(pq_err)?;
            self.written += 1;
        }
        self.held_bytes = keep.iter().flatten().map(RecordBatch::get_array_memory_size).sum();
        if keep.is_none() {
            self.last_rows = 0;
        }
        self.groups.extend(keep);
        Ok(())
    }
}

/// Runs `f`, turning a panic inside arrow-rs's readers into [`Error::Corrupt`]: arrow-ipc
/// 60 slices buffers at offsets read from a damaged file without checking them first, and
/// the promise here is a typed error for bad input, never a panic.
fn guard<T>(source: &std::path::Path, f: impl FnOnce() -> Result<T>) -> Result<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p.downcast_ref::<String>().map(String::as_str).or_else(|| p.downcast_ref::<&str>().copied()).unwrap_or("");
            Err(corrupt(source, format!("the Arrow/Parquet reader failed on damaged input: {msg}")))
        }
    }
}

/// Batches of an arrow-rs reader, fitted to the target (or normalized) schema.
struct Fitted<I> {
    inner: I,
    schema: SchemaRef,
    opts: ReadOptions,
    rows: u64,
    done: bool,
    /// The first batch, read at open when there is no target schema.
    pending: Option<RecordBatch>,
}

impl<I: Iterator<Item = Result<RecordBatch>>> Iterator for Fitted<I> {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let next = match self.pending.take() {
            Some(b) => Some(Ok(b)),
            None => guard(&self.opts.source, || Ok(self.inner.next())).unwrap_or_else(|e| Some(Err(e))),
        };
        let r = match next? {
            Ok(b) => crate::conform::conform(&b, &self.schema, &self.opts.source).map_err(|e| match e {
                Error::Corrupt { path, detail } => {
                    Error::Corrupt { path, detail: format!("rows {}..{}: {detail}", self.rows + 1, self.rows + b.num_rows() as u64) }
                }
                other => other,
            }),
            Err(e) => Err(e),
        };
        match &r {
            Ok(b) => self.rows += b.num_rows() as u64,
            Err(_) => self.done = true,
        }
        Some(r)
    }
}

impl<I: Iterator<Item = Result<RecordBatch>> + Send> BatchReader for Fitted<I> {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

pub(crate) fn reader<'a>(format: Format, input: Input<'a>, opts: &ReadOptions) -> Result<Box<dyn BatchReader + Send + 'a>> {
    guard(&opts.source.clone(), move || open(format, input, opts))
}

fn open<'a>(format: Format, input: Input<'a>, opts: &ReadOptions) -> Result<Box<dyn BatchReader + Send + 'a>> {
    let source = opts.source.clone();
    let bad = move |e: arrow::error::ArrowError| match e {
        arrow::error::ArrowError::IoError(_, io)
            if !matches!(
                io.kind(),
                std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::InvalidData | std::io::ErrorKind::InvalidInput
            ) =>
        {
            Error::Io { path: source.clone(), source: io }
        }
        other => corrupt(&source, format!("{format}: {other}")),
    };
    let fit = |mut inner: Box<dyn Iterator<Item = Result<RecordBatch>> + Send + 'a>,
               file_schema: SchemaRef|
     -> Result<Box<dyn BatchReader + Send + 'a>> {
        let mut pending = None;
        let schema = match &opts.schema {
            Some(s) => s.clone(),
            None => {
                // Binary columns: the first batch decides Utf8
                // (every value valid UTF-8) or Binary, as in the RowBinary reader.
                let first = match inner.next() {
                    Some(b) => Some(crate::rowbinary::utf8_where_valid(&b?)?),
                    None => None,
                };
                let s = match &first {
                    Some(b) => crate::conform::normalize_schema(&b.schema())?,
                    None => crate::conform::normalize_schema(&file_schema)?,
                };
                pending = first;
                s
            }
        };
        Ok(Box::new(Fitted { inner, schema, opts: opts.clone(), rows: 0, done: false, pending }))
    };
    match format {
        Format::ArrowStream => {
            let mut src: Box<dyn Read + Send + 'a> = match input {
                Input::File(f) => Box::new(f),
                Input::Stream(s) => s,
            };
            if rayon::current_num_threads() > 1 {
                let mut head = Vec::new();
                match IpcStreamFraming::open(&mut src, &mut head, bad.clone()) {
                    Ok(Some((framing, schema))) => {
                        let at = Position { units: 1, rows: 0, bytes: head.len() as u64 };
                        let src = std::io::BufReader::with_capacity(1 << 20, src);
                        return fit(Box::new(ParallelChunks::new(src, framing, schema.clone(), opts.source.clone(), at, None)), schema);
                    }
                    // Dictionaries, or a first message that is not a schema: arrow-ipc's
                    // reader reads the stream from its start (and reports what is wrong).
                    Ok(None) | Err(_) => src = Box::new(std::io::Cursor::new(head).chain(src)),
                }
            }
            let r = arrow::ipc::reader::StreamReader::try_new(std::io::BufReader::with_capacity(1 << 20, src), None).map_err(&bad)?;
            let schema = r.schema();
            let b = bad.clone();
            fit(Box::new(r.map(move |x| x.map_err(&b))), schema)
        }
        Format::Arrow => {
            let b = bad.clone();
            match input {
                Input::File(f) => {
                    let len = f.metadata().map_err(|e| Error::Io { path: opts.source.clone(), source: e })?.len();
                    let file = std::sync::Arc::new(f);
                    let r = arrow::ipc::reader::FileReader::try_new(tessera_io::PreadReader::new(file.clone(), 0, len), None)
                        .map_err(&bad)?;
                    let schema = r.schema();
                    if rayon::current_num_threads() > 1 && r.num_batches() > 1 {
                        // The footer (verified by the reader above) gives the batches' blocks.
                        if let Some(batches) = IpcFileBatches::open(file, len, schema.clone(), b.clone()).map_err(&bad)? {
                            let total = batches.blocks.len();
                            return fit(Box::new(Rounds::new(batches, total, IPC_BATCHES_PER_TASK)), schema);
                        }
                    }
                    fit(Box::new(r.map(move |x| x.map_err(&b))), schema)
                }
                Input::Stream(mut s) => {
                    let mut all = Vec::new();
                    s.read_to_end(&mut all).map_err(|e| Error::Io { path: opts.source.clone(), source: e })?;
                    let r = arrow::ipc::reader::FileReader::try_new(std::io::Cursor::new(all), None).map_err(&bad)?;
                    let schema = r.schema();
                    fit(Box::new(r.map(move |x| x.map_err(&b))), schema)
                }
            }
        }
        Format::Parquet => {
            let io = |e: std::io::Error| Error::Io { path: opts.source.clone(), source: e };
            let (batches, schema) = match input {
                Input::File(f) => {
                    parquet_batches(tessera_io::FileRange::whole(std::sync::Arc::new(f)).map_err(io)?, bad, &opts.source)?
                }
                Input::Stream(mut s) => {
                    let mut all = Vec::new();
                    s.read_to_end(&mut all).map_err(io)?;
                    parquet_batches(bytes::Bytes::from(all), bad, &opts.source)?
                }
            };
            fit(batches, schema)
        }
        other => Err(Error::internal(format!("{other} is not an arrow-rs format"))),
    }
}

/// Batches from a reader, in order.
type Batches<'a> = Box<dyn Iterator<Item = Result<RecordBatch>> + Send + 'a>;

/// Row groups decoded at once in parallel only while each decodes to at most this many
/// bytes ([`decoded_bytes`]): a group of them is held decoded until returned.
const PARALLEL_ROW_GROUP_BYTES: i64 = 64 << 20;

/// About the bytes row group `g` decodes to: 8 a value for fixed-width columns, the
/// string bytes (the footer's size statistics: `unencoded_byte_array_data_bytes`, which a
/// dictionary does not shrink) plus an offset a value for strings; `None` when a string
/// column's size is not in the footer (older writers).
fn decoded_bytes(g: &parquet::file::metadata::RowGroupMetaData) -> Option<i64> {
    use parquet::basic::Type;
    g.columns()
        .iter()
        .map(|c| match c.column_type() {
            Type::BYTE_ARRAY => c.unencoded_byte_array_data_bytes().map(|b| b + 4 * c.num_values()),
            Type::FIXED_LEN_BYTE_ARRAY => Some(i64::from(c.column_descr().type_length()) * c.num_values()),
            _ => Some(8 * c.num_values()),
        })
        .sum()
}

/// The batches of Parquet `src` and its schema: row groups decoded in parallel
/// ([`RowGroups`]) when the current rayon pool has several threads and the file several
/// row groups that each decode to at most [`PARALLEL_ROW_GROUP_BYTES`], else arrow-rs's
/// reader streaming one batch at a time. `bad` maps the decoder's errors.
fn parquet_batches<'a, T: parquet::file::reader::ChunkReader + Clone + 'static>(
    src: T,
    bad: impl Fn(arrow::error::ArrowError) -> Error + Clone + Send + Sync + 'a,
    source: &std::path::Path,
) -> Result<(Batches<'a>, SchemaRef)> {
    use parquet::arrow::arrow_reader::ArrowReaderMetadata;
    let pbad = |e: parquet::errors::ParquetError| corrupt(source, format!("Parquet: {e}"));
    let meta = ArrowReaderMetadata::load(&src, Default::default()).map_err(pbad)?;
    let schema = meta.schema().clone();
    let groups = meta.metadata().row_groups();
    if rayon::current_num_threads() > 1
        && groups.len() > 1
        && groups.iter().all(|g| decoded_bytes(g).is_some_and(|b| b <= PARALLEL_ROW_GROUP_BYTES))
    {
        let total = meta.metadata().num_row_groups();
        let rg = RowGroups { src, meta, bad, source: source.to_path_buf() };
        return Ok((Box::new(Rounds::new(rg, total, 1)), schema));
    }
    let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(src, meta)
        .with_batch_size(READ_BATCH_ROWS)
        .build()
        .map_err(pbad)?;
    Ok((Box::new(reader.map(move |x| x.map_err(&bad))), schema))
}

/// A Parquet file's row groups, each decoded by its own arrow-rs reader over the shared
/// source (positioned reads), a row group per task of [`Rounds`].
struct RowGroups<T, B> {
    src: T,
    meta: parquet::arrow::arrow_reader::ArrowReaderMetadata,
    bad: B,
    source: std::path::PathBuf,
}

impl<T, B> RangeDecoder for RowGroups<T, B>
where
    T: parquet::file::reader::ChunkReader + Clone + 'static,
    B: Fn(arrow::error::ArrowError) -> Error + Sync,
{
    fn decode(&self, range: std::ops::Range<usize>) -> Vec<Result<RecordBatch>> {
        let mut out = Vec::new();
        for rg in range {
            let batches = self.row_group(rg);
            let failed = batches.last().is_some_and(|b| b.is_err());
            out.extend(batches);
            if failed {
                break;
            }
        }
        out
    }
}

impl<T, B> RowGroups<T, B>
where
    T: parquet::file::reader::ChunkReader + Clone + 'static,
    B: Fn(arrow::error::ArrowError) -> Error + Sync,
{
    /// The batches of row group `rg`; an error is the last.
    fn row_group(&self, rg: usize) -> Vec<Result<RecordBatch>> {
        let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(self.src.clone(), self.meta.clone())
            .with_batch_size(READ_BATCH_ROWS)
            .with_row_groups(vec![rg])
            .build();
        match reader {
            Ok(r) => {
                let mut out = Vec::new();
                for b in r {
                    let failed = b.is_err();
                    out.push(b.map_err(&self.bad));
                    if failed {
                        break;
                    }
                }
                out
            }
            Err(e) => vec![Err(corrupt(&self.source, format!("Parquet row group {} (from 1): {e}", rg + 1)))],
        }
    }
}

/// The record batches of an Arrow IPC file, [`IPC_BATCHES_PER_TASK`] consecutive ones per
/// task of [`Rounds`]: each batch's block (its offset and lengths, from the footer read
/// once) is read with positioned reads ([`tessera_io::PreadReader`]) into an aligned buffer
/// and decoded by arrow-ipc's `FileDecoder`, shared by the tasks. Files without
/// dictionaries only.
struct IpcFileBatches<B> {
    file: std::sync::Arc<std::fs::File>,
    /// The file's length: a block must lie within it.
    len: u64,
    blocks: Vec<arrow::ipc::Block>,
    decoder: arrow::ipc::reader::FileDecoder,
    bad: B,
}

/// Batches one task of [`IpcFileBatches`] decodes.
const IPC_BATCHES_PER_TASK: usize = 4;

impl<B> IpcFileBatches<B> {
    /// The batches of `file` (`len` bytes, of `schema`); `None` for a file with
    /// dictionaries (read by arrow-ipc's `FileReader`, which keeps them).
    fn open(
        file: std::sync::Arc<std::fs::File>,
        len: u64,
        schema: SchemaRef,
        bad: B,
    ) -> std::result::Result<Option<Self>, arrow::error::ArrowError> {
        let mut tail = [0u8; 10];
        let start = len.checked_sub(10).ok_or_else(|| arrow::error::ArrowError::ParseError("file too short".into()))?;
        tessera_io::PreadReader::new(file.clone(), start, len).read_exact(&mut tail)?;
        let footer_len = arrow::ipc::reader::read_footer_length(tail)? as u64;
        let at = start.checked_sub(footer_len).ok_or_else(|| arrow::error::ArrowError::ParseError("footer past the file".into()))?;
        let mut bytes = vec![0u8; footer_len as usize];
        tessera_io::PreadReader::new(file.clone(), at, start).read_exact(&mut bytes)?;
        let footer = arrow::ipc::root_as_footer(&bytes)
            .map_err(|e| arrow::error::ArrowError::ParseError(format!("Unable to get root as footer: {e:?}")))?;
        if footer.dictionaries().is_some_and(|d| !d.is_empty()) {
            return Ok(None);
        }
        let blocks = footer.recordBatches().map(|b| b.iter().copied().collect()).unwrap_or_default();
        let decoder = arrow::ipc::reader::FileDecoder::new(schema, footer.version());
        Ok(Some(IpcFileBatches { file, len, blocks, decoder, bad }))
    }
}

impl<B: Fn(arrow::error::ArrowError) -> Error + Sync> IpcFileBatches<B> {
    /// Batch `i`, read and decoded.
    fn batch(&self, i: usize) -> std::result::Result<Option<RecordBatch>, arrow::error::ArrowError> {
        let block = &self.blocks[i];
        let (offset, len) = (block.offset(), i64::from(block.metaDataLength()) + block.bodyLength());
        // Checked against the file before the buffer is allocated (a damaged footer can
        // claim any length).
        let (Ok(offset), Ok(len)) = (u64::try_from(offset), usize::try_from(len)) else {
            return Err(arrow::error::ArrowError::ParseError(format!("record batch {i}: offset {offset}, length {len}")));
        };
        if offset.checked_add(len as u64).is_none_or(|end| end > self.len) {
            return Err(arrow::error::ArrowError::ParseError(format!(
                "record batch {i}: {len} bytes at offset {offset} pass the end of the file ({} bytes)",
                self.len
            )));
        }
        let mut buf = arrow::buffer::MutableBuffer::from_len_zeroed(len);
        tessera_io::PreadReader::new(self.file.clone(), offset, offset.saturating_add(len as u64)).read_exact(buf.as_slice_mut())?;
        self.decoder.read_record_batch(block, &buf.into())
    }
}

impl<B: Fn(arrow::error::ArrowError) -> Error + Sync> RangeDecoder for IpcFileBatches<B> {
    fn decode(&self, range: std::ops::Range<usize>) -> Vec<Result<RecordBatch>> {
        let mut out = Vec::with_capacity(range.len());
        for i in range {
            match self.batch(i) {
                Ok(Some(b)) => out.push(Ok(b)),
                Ok(None) => {}
                Err(e) => {
                    out.push(Err((self.bad)(e)));
                    break;
                }
            }
        }
        out
    }
}

/// An Arrow IPC stream's messages as the units of [`ParallelChunks`] (parallel parsing):
/// each chunk of whole messages is decoded by its own arrow-ipc `StreamDecoder`, given the
/// stream's schema message first, so record batches (and their LZ4/ZSTD buffers) decode on
/// every thread. Streams without dictionaries only: a dictionary batch must be seen by
/// every batch after it, so those streams take arrow-ipc's `StreamReader`. The
/// end-of-stream marker ends the input (the bytes after it are not read), as for
/// `StreamReader`.
struct IpcStreamFraming<B> {
    /// The stream's first message (its schema), as read.
    schema_message: Vec<u8>,
    bad: B,
}

/// The end-of-stream marker of an IPC stream (format V5): the continuation marker and a
/// metadata length of 0.
const IPC_END: [u8; 8] = [0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0];

/// The prefix of the IPC message at the start of `buf`: its length in bytes and the
/// metadata's (0: the end-of-stream marker). Both the current framing (continuation marker
/// `0xFFFFFFFF`, then the metadata length) and the pre-1.0 one (the length alone).
fn ipc_prefix(buf: &[u8]) -> std::result::Result<(usize, usize), Walk> {
    let word = |at: usize| buf.get(at..at + 4).map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]])).ok_or(Walk::Short);
    let (prefix, meta) = match word(0)? {
        0xFFFF_FFFF => (8, word(4)?),
        len => (4, len),
    };
    // The length is an i32 in the format: a negative one is damage (not a reason to read
    // the rest of the input looking for its end).
    Ok((prefix, i32::try_from(meta).map_err(|_| Walk::Bad)? as usize))
}

/// The IPC message at the start of `buf`: its length and rows (those of a record batch),
/// or `None` for the end-of-stream marker.
fn ipc_message(buf: &[u8]) -> std::result::Result<Option<(usize, u64)>, Walk> {
    let (prefix, meta) = ipc_prefix(buf)?;
    if meta == 0 {
        return Ok(None);
    }
    let metadata = buf.get(prefix..prefix + meta).ok_or(Walk::Short)?;
    let message = arrow::ipc::root_as_message(metadata).map_err(|_| Walk::Bad)?;
    let body = usize::try_from(message.bodyLength()).map_err(|_| Walk::Bad)?;
    let len = (prefix + meta).checked_add(body).ok_or(Walk::Bad)?;
    if buf.len() < len {
        return Err(Walk::Short);
    }
    let rows = match message.header_type() {
        arrow::ipc::MessageHeader::RecordBatch => {
            let batch = message.header_as_record_batch().ok_or(Walk::Bad)?;
            u64::try_from(batch.length()).map_err(|_| Walk::Bad)?
        }
        // Nothing else is expected after the schema of a stream without dictionaries
        // (arrow-ipc's `StreamReader` fails on the rest too).
        _ => return Err(Walk::Bad),
    };
    Ok(Some((len, rows)))
}

impl<B: Fn(arrow::error::ArrowError) -> Error> IpcStreamFraming<B> {
    /// Reads the stream's first message from `src` into `head`; the framing and the schema
    /// when it is a schema without dictionary or nested fields, else `None` (`head` holds
    /// the bytes read, for a reader that starts over and reports what is wrong).
    fn open(src: &mut impl Read, head: &mut Vec<u8>, bad: B) -> Result<Option<(Self, SchemaRef)>> {
        let io = |e: std::io::Error| bad(arrow::error::ArrowError::IoError(e.to_string(), e));
        // Appends `n` more bytes of `src` to `head`; false at the end of input before them.
        let mut more = |head: &mut Vec<u8>, n: usize| -> Result<bool> {
            Ok(src.by_ref().take(n as u64).read_to_end(head).map_err(io)? == n)
        };
        // A schema message is a few KiB; larger claims are damage.
        const MOST: usize = 64 << 20;
        if !more(head, 4)? {
            return Ok(None);
        }
        if head[..4] == [0xFF; 4] && !more(head, 4)? {
            return Ok(None);
        }
        let Ok((prefix, meta)) = ipc_prefix(head) else { return Ok(None) };
        if meta == 0 || meta > MOST || !more(head, meta)? {
            return Ok(None);
        }
        let (body, schema) = match arrow::ipc::root_as_message(&head[prefix..]) {
            Ok(m) => match m.header_as_schema().map(arrow::ipc::convert::try_fb_to_schema) {
                Some(Ok(schema)) => (usize::try_from(m.bodyLength()).unwrap_or(usize::MAX), std::sync::Arc::new(schema)),
                _ => return Ok(None),
            },
            Err(_) => return Ok(None),
        };
        if body > MOST || !more(head, body)? {
            return Ok(None);
        }
        // Flat columns only (a dictionary can hide inside nested or run-end encoded ones).
        let flat = |t: &DataType| {
            t.is_primitive()
                || matches!(
                    t,
                    DataType::Boolean
                        | DataType::Null
                        | DataType::Utf8
                        | DataType::LargeUtf8
                        | DataType::Utf8View
                        | DataType::Binary
                        | DataType::LargeBinary
                        | DataType::BinaryView
                        | DataType::FixedSizeBinary(_)
                )
        };
        if !schema.fields().iter().all(|f| flat(f.data_type())) {
            return Ok(None);
        }
        Ok(Some((IpcStreamFraming { schema_message: head.clone(), bad }, schema)))
    }
}

impl<B: Fn(arrow::error::ArrowError) -> Error + Sync> Framing for IpcStreamFraming<B> {
    fn unit(&self, buf: &[u8]) -> std::result::Result<(usize, u64), Walk> {
        // The end-of-stream marker ends the walk as damage would: the chunk that starts
        // with it is parsed (to nothing) and nothing after it is read.
        ipc_message(buf)?.ok_or(Walk::Bad)
    }

    fn parse(&self, bytes: &[u8], at: Position) -> Vec<Result<RecordBatch>> {
        let mut out = Vec::new();
        let mut decoder = arrow::ipc::reader::StreamDecoder::new();
        let at_message = |i: u64, rows: u64, e: arrow::error::ArrowError| {
            (self.bad)(arrow::error::ArrowError::ParseError(format!("message {} (after row {rows}): {e}", at.units + i + 1)))
        };
        if let Err(e) = decoder.decode(&mut arrow::buffer::Buffer::from(self.schema_message.as_slice())) {
            out.push(Err(at_message(0, at.rows, e)));
            return out;
        }
        // One copy of the chunk, which the decoded arrays keep (no copy per buffer).
        let data = arrow::buffer::Buffer::from(bytes);
        let (mut pos, mut i, mut rows) = (0usize, 0u64, at.rows);
        while pos < bytes.len() {
            let len = match ipc_message(&bytes[pos..]) {
                Ok(Some((len, _))) => len,
                Ok(None) => break,
                // Fewer bytes than a message's prefix at the end of the input: its end, as
                // for arrow-ipc's `StreamReader` (a chunk ends inside a message only there).
                Err(Walk::Short) if bytes.len() - pos < 8 => break,
                Err(walk) => {
                    // Damage or a truncated last message: the decoder's own error, if any.
                    let mut rest = data.slice(pos);
                    let e = match decoder.decode(&mut rest).and_then(|_| decoder.finish()) {
                        Err(e) => e,
                        Ok(()) => arrow::error::ArrowError::ParseError(match walk {
                            Walk::Short => "truncated message".into(),
                            Walk::Bad => "damaged message".into(),
                        }),
                    };
                    out.push(Err(at_message(i, rows, e)));
                    break;
                }
            };
            // The decoder returns a batch as soon as it has one, and holds back one whose
            // body is empty (no column bytes: 0 rows, or no columns) until more bytes come:
            // it is given the message until all of it is taken.
            let mut message = data.slice_with_length(pos, len);
            if let Err(e) = drain(&mut decoder, &mut message, &mut out, &mut rows) {
                out.push(Err(at_message(i, rows, e)));
                return out;
            }
            pos += len;
            i += 1;
        }
        // A batch held back at the end of the chunk comes out with an end-of-stream marker.
        let mut end = arrow::buffer::Buffer::from(&IPC_END[..]);
        if let Err(e) = drain(&mut decoder, &mut end, &mut out, &mut rows) {
            out.push(Err(at_message(i, rows, e)));
        }
        out
    }
}

/// Feeds all of `bytes` to `decoder`, pushing the batches it returns to `out` (and
/// counting their rows).
fn drain(
    decoder: &mut arrow::ipc::reader::StreamDecoder,
    bytes: &mut arrow::buffer::Buffer,
    out: &mut Vec<Result<RecordBatch>>,
    rows: &mut u64,
) -> std::result::Result<(), arrow::error::ArrowError> {
    loop {
        match decoder.decode(bytes)? {
            Some(b) => {
                *rows += b.num_rows() as u64;
                out.push(Ok(b));
            }
            None => return Ok(()),
        }
    }
}

/// What [`Rounds`] decodes: units (row groups, record batches) by index.
trait RangeDecoder: Sync {
    /// The batches of units `range`, in order; an error is the last.
    fn decode(&self, range: std::ops::Range<usize>) -> Vec<Result<RecordBatch>>;
}

/// Batches decoded in rounds: each round, every thread of the current rayon pool decodes
/// `per_task` consecutive units, and the batches come out in unit order; the first error
/// ends them.
struct Rounds<D> {
    decoder: D,
    /// The next unit to decode, and how many there are.
    next: usize,
    total: usize,
    per_task: usize,
    ready: std::collections::VecDeque<Result<RecordBatch>>,
}

impl<D: RangeDecoder> Rounds<D> {
    fn new(decoder: D, total: usize, per_task: usize) -> Self {
        Rounds { decoder, next: 0, total, per_task: per_task.max(1), ready: Default::default() }
    }
}

impl<D: RangeDecoder> Iterator for Rounds<D> {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        use rayon::prelude::*;
        loop {
            if let Some(b) = self.ready.pop_front() {
                if b.is_err() {
                    self.ready.clear();
                    self.next = self.total;
                }
                return Some(b);
            }
            if self.next >= self.total {
                return None;
            }
            let (next, per, total) = (self.next, self.per_task, self.total);
            let tasks: Vec<std::ops::Range<usize>> = (0..rayon::current_num_threads().max(1))
                .map(|t| (next + t * per).min(total)..(next + (t + 1) * per).min(total))
                .filter(|r| !r.is_empty())
                .collect();
            self.next = tasks.last().map_or(total, |r| r.end);
            let decoded: Vec<Vec<Result<RecordBatch>>> = tasks.into_par_iter().map(|r| self.decoder.decode(r)).collect();
            for batches in decoded {
                let failed = batches.last().is_some_and(|b| b.is_err());
                self.ready.extend(batches);
                if failed {
                    break;
                }
            }
        }
    }
}
