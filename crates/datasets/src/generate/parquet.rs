//! Writing a generated table to one Parquet file: batches are generated in parallel (rayon)
//! a wave at a time, while the calling thread encodes the previous wave in row order, its
//! columns encoded in parallel too (arrow-rs's `ArrowColumnWriter`s, the parallel half of
//! `ArrowWriter`).
//!
//! ```text
//!   producer thread: [wave k+1: batches generated in parallel] ──channel(1)──┐
//!   calling thread:  wave k: per batch, 105 column writers encode + ZSTD ◄────┘
//!                    (rayon); per row group, chunks appended in column order → tmp file
//!   at the end:      footer, rename tmp → path
//! ```

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::sync_channel;
use std::time::{Duration, Instant};

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{DataType, SchemaRef, TimeUnit, TimestampSecondType};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_writer::{ArrowColumnChunk, ArrowColumnWriter, compute_leaves};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::ColumnPath;
use rayon::prelude::*;
use tessera_common::{Error, Result};

use super::{GenOptions, HitsGenerator};

/// What [`write_parquet`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct GenReport {
    /// Rows written.
    pub rows: u64,
    /// Row groups in the file.
    pub row_groups: usize,
    /// Size of the file in bytes.
    pub file_bytes: u64,
    /// Wall time of generation and writing.
    pub elapsed: Duration,
}

/// Columns whose values are (nearly) unique per row: dictionary encoding only costs time
/// there (the writer would fall back to plain after the first dictionary page anyway).
const NO_DICTIONARY: [&str; 12] = [
    "WatchID",
    "EventTime",
    "ClientEventTime",
    "LocalEventTime",
    "UserID",
    "URL",
    "Referer",
    "Title",
    "OriginalURL",
    "FUniqID",
    "URLHash",
    "RefererHash",
];

/// Generates the `opts.rows`-row `hits` table and writes it to `path` as Parquet.
///
/// The file has [`crate::hits::parquet_schema`] (timestamps in milliseconds: Parquet has no
/// seconds unit), ZSTD pages at `opts.zstd_level`, row groups of `opts.row_group_rows` rows
/// (the last may be shorter) and the Arrow schema in its metadata. It is written to a
/// temporary file beside `path`, then renamed to `path` (replacing it), so `path` never
/// holds a partial file. `progress` is called with the rows written so far after each
/// batch, from the calling thread.
///
/// # Errors
/// [`Error::InvalidArgument`] for bad `opts` (see [`GenOptions::validate`]) or a `path`
/// without a file name; [`Error::Io`] if the file cannot be created, written or renamed
/// (the temporary file is removed).
pub fn write_parquet(
    path: &Path,
    opts: &GenOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<GenReport> {
    opts.validate()?;
    let started = Instant::now();
    let tmp = temp_path(path).ok_or_else(|| {
        Error::InvalidArgument(format!("output path {} has no file name", path.display()))
    })?;
    let written = write_file(&tmp, opts, progress);
    let row_groups = match written {
        Ok(n) => n,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    };
    if let Err(source) = std::fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::Io {
            path: path.to_path_buf(),
            source,
        });
    }
    let file_bytes = std::fs::metadata(path)
        .map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?
        .len();
    Ok(GenReport {
        rows: opts.rows,
        row_groups,
        file_bytes,
        elapsed: started.elapsed(),
    })
}

/// Writes the whole table to `tmp`; returns the row group count.
fn write_file(tmp: &Path, opts: &GenOptions, progress: &(dyn Fn(u64) + Sync)) -> Result<usize> {
    let io_err = |e: parquet::errors::ParquetError| Error::Io {
        path: tmp.to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    };
    let file = File::create(tmp).map_err(|source| Error::Io {
        path: tmp.to_path_buf(),
        source,
    })?;
    let level = ZstdLevel::try_new(opts.zstd_level)
        .map_err(|e| Error::InvalidArgument(format!("zstd level: {e}")))?;
    let mut props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(level))
        .set_max_row_group_row_count(Some(opts.row_group_rows));
    for name in NO_DICTIONARY {
        props = props.set_column_dictionary_enabled(ColumnPath::from(name), false);
    }
    let schema = crate::hits::parquet_schema();
    let writer = ArrowWriter::try_new(
        BufWriter::with_capacity(1 << 20, file),
        Arc::clone(&schema),
        Some(props.build()),
    )
    .map_err(io_err)?;
    // The low-level half of ArrowWriter: one column writer per column and row group, fed
    // in parallel, then the chunks appended in column order.
    let (mut file_writer, factory) = writer.into_serialized_writer().map_err(io_err)?;

    let generator = HitsGenerator::new(opts);
    let batch_rows = opts.batch_rows as u64;
    let batches = opts.rows.div_ceil(batch_rows);
    let wave = (rayon::current_num_threads() * 2).max(2) as u64;
    let rows = opts.rows;
    let group_rows = opts.row_group_rows;
    let mut row_groups = 0usize;
    std::thread::scope(|scope| -> Result<()> {
        let (tx, rx) = sync_channel::<Result<Vec<RecordBatch>>>(1);
        let generator = &generator;
        scope.spawn(move || {
            let mut first = 0;
            while first < batches {
                let last = (first + wave).min(batches);
                let out: Result<Vec<RecordBatch>> = (first..last)
                    .into_par_iter()
                    .map(|b| {
                        let start = b * batch_rows;
                        let len = batch_rows.min(rows - start) as usize;
                        generator
                            .try_generate_batch(start, len)
                            .and_then(|b| to_file_schema(&b))
                    })
                    .collect();
                let failed = out.is_err();
                // A send error means the writer stopped (on an error of its own).
                if tx.send(out).is_err() || failed {
                    return;
                }
                first = last;
            }
        });
        let mut group: Option<Vec<ArrowColumnWriter>> = None;
        let mut in_group = 0usize;
        let mut done = 0u64;
        for wave in rx {
            for batch in wave? {
                let mut offset = 0;
                while offset < batch.num_rows() {
                    let writers = match &mut group {
                        Some(w) => w,
                        None => {
                            group.insert(factory.create_column_writers(row_groups).map_err(io_err)?)
                        }
                    };
                    let take = (batch.num_rows() - offset).min(group_rows - in_group);
                    encode(writers, &schema, &batch.slice(offset, take)).map_err(io_err)?;
                    offset += take;
                    in_group += take;
                    done += take as u64;
                    if in_group == group_rows {
                        if let Some(w) = group.take() {
                            flush_group(&mut file_writer, w).map_err(io_err)?;
                        }
                        row_groups += 1;
                        in_group = 0;
                    }
                }
                progress(done);
            }
        }
        if let Some(w) = group.take() {
            flush_group(&mut file_writer, w).map_err(io_err)?;
            row_groups += 1;
        }
        Ok(())
    })?;
    let meta = file_writer.close().map_err(io_err)?;
    debug_assert_eq!(meta.num_row_groups(), row_groups);
    Ok(meta.num_row_groups())
}

/// Encodes the columns of `batch` into the column writers of the open row group, one rayon
/// task per column.
fn encode(
    writers: &mut [ArrowColumnWriter],
    schema: &SchemaRef,
    batch: &RecordBatch,
) -> parquet::errors::Result<()> {
    writers
        .par_iter_mut()
        .zip(batch.columns().par_iter())
        .zip(schema.fields().par_iter())
        .try_for_each(|((writer, column), field)| {
            for leaf in compute_leaves(field, column)? {
                writer.write(&leaf)?;
            }
            Ok(())
        })
}

/// Closes the column writers of a row group (in parallel: each compresses its last page)
/// and appends their chunks to the file in column order.
fn flush_group<W: std::io::Write + Send>(
    file: &mut SerializedFileWriter<W>,
    writers: Vec<ArrowColumnWriter>,
) -> parquet::errors::Result<()> {
    let chunks: Vec<ArrowColumnChunk> = writers
        .into_par_iter()
        .map(ArrowColumnWriter::close)
        .collect::<parquet::errors::Result<_>>()?;
    let mut row_group = file.next_row_group()?;
    for chunk in chunks {
        chunk.append_to_row_group(&mut row_group)?;
    }
    row_group.close()?;
    Ok(())
}

/// The batch with its timestamps converted from seconds to milliseconds.
fn to_file_schema(batch: &RecordBatch) -> Result<RecordBatch> {
    let columns: Vec<ArrayRef> = batch
        .columns()
        .iter()
        .map(|col| match col.data_type() {
            DataType::Timestamp(TimeUnit::Second, _) => {
                let secs = col.as_primitive::<TimestampSecondType>();
                let millis: arrow::array::TimestampMillisecondArray = secs.unary(|s| s * 1000);
                Arc::new(millis) as ArrayRef
            }
            _ => Arc::clone(col),
        })
        .collect();
    RecordBatch::try_new(crate::hits::parquet_schema(), columns)
        .map_err(|e| Error::internal(format!("hits batch to file schema: {e}")))
}

/// The temporary file beside `path`: `.<name>.tmp-<pid>`; `None` without a file name.
fn temp_path(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?;
    Some(path.with_file_name(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    )))
}
