//! `Arrow` (IPC file), `ArrowStream` (IPC stream) and `Parquet`, on arrow-rs's writers
//! and readers. The batches are written as Tessera holds them (Utf8, Binary, Date32,
//! Timestamp(Second)); ClickHouse reads Utf8 and Binary as `String`. Compression is the
//! format's own: IPC body buffers in LZ4 frame or ZSTD, Parquet column chunks in LZ4_RAW or
//! ZSTD. Parquet row groups hold [`PARQUET_ROW_GROUP_ROWS`] rows, buffered (encoded) by the
//! writer until full, as every Parquet writer does.

use std::io::{Read, Write};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::ipc::CompressionType;
use arrow::ipc::writer::{FileWriter, IpcWriteOptions, StreamWriter};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::properties::WriterProperties;
use tessera_common::{Error, Result};

use crate::{BatchReader, BatchWriter, Compression, Format, Input, READ_BATCH_ROWS, ReadOptions, corrupt, out_err};

/// Rows per Parquet row group written: 1,048,576 (the parquet crate's default; ClickHouse
/// writes 1,000,000).
pub(crate) const PARQUET_ROW_GROUP_ROWS: usize = 1 << 20;

enum Inner<'a> {
    File(FileWriter<Box<dyn Write + Send + 'a>>),
    Stream(StreamWriter<Box<dyn Write + Send + 'a>>),
    Parquet(ArrowWriter<Box<dyn Write + Send + 'a>>),
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
            if format == Format::Arrow {
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
            Inner::Parquet(ArrowWriter::try_new(out, schema.clone(), Some(props)).map_err(pq_err)?)
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
            Inner::Parquet(w) => w.write(batch).map_err(pq_err),
        }
    }

    fn finish(self: Box<Self>) -> Result<()> {
        match self.0 {
            Inner::File(mut w) => {
                w.finish().map_err(ipc_err)?;
                w.into_inner().map_err(ipc_err)?.flush().map_err(out_err)
            }
            Inner::Stream(mut w) => {
                w.finish().map_err(ipc_err)?;
                w.into_inner().map_err(ipc_err)?.flush().map_err(out_err)
            }
            Inner::Parquet(w) => {
                let mut out = w.into_inner().map_err(pq_err)?;
                out.flush().map_err(out_err)
            }
        }
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
            let src: Box<dyn Read + Send + 'a> = match input {
                Input::File(f) => Box::new(f),
                Input::Stream(s) => s,
            };
            let r = arrow::ipc::reader::StreamReader::try_new(std::io::BufReader::with_capacity(1 << 20, src), None).map_err(&bad)?;
            let schema = r.schema();
            let b = bad.clone();
            fit(Box::new(r.map(move |x| x.map_err(&b))), schema)
        }
        Format::Arrow => {
            let b = bad.clone();
            match input {
                Input::File(f) => {
                    let r = arrow::ipc::reader::FileReader::try_new(std::io::BufReader::new(f), None).map_err(&bad)?;
                    let schema = r.schema();
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
            let source = opts.source.clone();
            let pbad = move |e: parquet::errors::ParquetError| corrupt(&source, format!("Parquet: {e}"));
            fn open_pq<T: parquet::file::reader::ChunkReader + 'static>(
                src: T,
                pbad: &dyn Fn(parquet::errors::ParquetError) -> Error,
            ) -> Result<(parquet::arrow::arrow_reader::ParquetRecordBatchReader, SchemaRef)> {
                let b = ParquetRecordBatchReaderBuilder::try_new(src).map_err(pbad)?;
                let schema = b.schema().clone();
                Ok((b.with_batch_size(READ_BATCH_ROWS).build().map_err(pbad)?, schema))
            }
            let io = |e: std::io::Error| Error::Io { path: opts.source.clone(), source: e };
            let (reader, schema) = match input {
                Input::File(f) => open_pq(f, &pbad)?,
                Input::Stream(mut s) => {
                    let mut all = Vec::new();
                    s.read_to_end(&mut all).map_err(io)?;
                    open_pq(bytes::Bytes::from(all), &pbad)?
                }
            };
            let b = bad.clone();
            fit(Box::new(reader.map(move |x| x.map_err(&b))), schema)
        }
        other => Err(Error::internal(format!("{other} is not an arrow-rs format"))),
    }
}
