//! Lazy Parquet tables: [`open_parquet`] reads only the footer; [`ParquetSource`] reads the
//! columns a query touches, all row groups in parallel, on first use.
//!
//! Chunks (morsels) never span row groups: row group `g` of `n` rows gives
//! `ceil(n / CHUNK_ROWS)` chunks, all of [`CHUNK_ROWS`] rows but the last.
//!
//! ```text
//!  file:    | row group 0 (150,000 rows)        | row group 1 (70,000 rows) |
//!  chunks:  | 65,536     | 65,536     | 18,928  | 65,536          | 4,464   |
//! ```
//!
//! Reading: one rayon task per (row group, column) reads that column chunk's bytes with one
//! positioned read (`pread`, so tasks share the file handle without a seek race), then
//! decodes it with the parquet crate's Arrow reader and converts each batch to the table
//! type (see [`open_parquet`] for the mapping). A decoder panic on a corrupt page is caught
//! and reported as [`Error::Corrupt`].

mod convert;

use std::fmt;
use std::fs::File;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, make_array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use bytes::{Buf, Bytes};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection,
    RowSelectionPolicy, RowSelector,
};
use parquet::errors::ParquetError;
use parquet::file::metadata::{ColumnChunkMetaData, PageIndexPolicy};
use parquet::file::reader::{ChunkReader, Length};
use rayon::prelude::*;
use tessera_common::{ColumnSource, Error, Result, Table, is_supported_type};

use crate::CHUNK_ROWS;

/// How [`ParquetSource::load_columns`] cuts its work into rayon tasks.
///
/// Measured on 2026-11-30 with a one-off timing harness (release, 2 vCPUs shared with other builds, so
/// ±20 % noise; 16 M rows, 6 Int64 + 2 Int16 + 2 string columns, ZSTD, best of 5):
///
/// | file | columns read | per column chunk | per row group |
/// |---|---|---|---|
/// | 16 row groups | 4 | 346 ms | 335 ms |
/// | 16 row groups | 10 | 975 ms | 1054 ms |
/// | 1 row group | 4 | 443 ms | 617 ms |
/// | 1 row group | 10 | 1004 ms | 1064 ms |
///
/// Equal when row groups outnumber threads; per column chunk wins when they do not (a
/// single row group is otherwise decoded by one thread), so it is the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LoadGranularity {
    /// One task per (row group, column).
    PerColumnChunk,
    /// One task per row group, decoding all requested columns through one projection.
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "only forced by tests and benchmarks")
    )]
    PerRowGroup,
}

/// Opens the Parquet file at `path` as a lazy table named `name`.
///
/// Reads only the footer: the table's schema and chunk lengths are known at once, column
/// data is read by [`Table::columns`] on first use (see [`ParquetSource`]).
///
/// **Types.** Each top-level file column becomes one table column, in file order, named as
/// in the file, nullable as in the file (but NOT NULL when `target` says so, checked when
/// the column is read):
///
/// | file (Arrow type from the Parquet reader) | table type |
/// |---|---|
/// | Int8..Int64, UInt8..UInt64, Float32/64, Date32, Utf8, Binary | same |
/// | LargeUtf8, Utf8View | Utf8 |
/// | LargeBinary, BinaryView, FixedSizeBinary | Binary (no UTF-8 check: no byte is lost) |
/// | Timestamp(any unit, any time zone) | Timestamp(Second, None), floored to seconds (UTC) |
/// | Date64 | Date32, floored to days |
/// | Dictionary(_, V) | as V, unpacked |
///
/// **Target.** With `target` (columns by name, exact then ASCII case-insensitive match, like
/// the hits schema of ClickBench's `create.sql`), each file column it names is converted to
/// the target type: integer to integer with a range check; integer to Float32/64;
/// Float32 to Float64; integer to Timestamp(Second) as seconds since 1970-01-01 UTC (how the
/// official `hits.parquet` stores `EventTime`); integer to Date32 as days since 1970-01-01
/// (`EventDate` there is UInt16 days). Binary stays Binary when the target says Utf8 (the
/// partitioned `hits_N.parquet` store strings as bare BINARY, not always valid UTF-8), so the
/// table type is then Binary. File columns the target does not name keep their own mapping.
///
/// # Errors
/// * [`Error::Io`] if the file cannot be opened (missing, no permission).
/// * [`Error::InvalidArgument`] if `target` names a column the file lacks (naming the
///   file's and the schema's columns).
/// * [`Error::Corrupt`] if it is not a Parquet file or its footer is bad, or `target` names
///   a type the file column cannot be
///   converted to.
/// * [`Error::NotImplemented`] naming the columns and types when no column has a type with
///   a mapping (nested, Boolean, Decimal, Time...), or when `target` names such a column.
///   Otherwise columns of such types are left out of the table (a query naming one gets
///   [`Error::UnknownColumn`]) and listed by [`ParquetSource::skipped_columns`], so a file
///   with, say, one Boolean column still serves queries over its other columns.
/// * [`Error::InvalidArgument`] if `target` has a type Tessera does not execute on, or the
///   file has no columns.
pub fn open_parquet(name: &str, path: &Path, target: Option<SchemaRef>) -> Result<Table> {
    lazy_table(name, ParquetSource::open(path, target.as_deref())?)
}

/// Opens the Parquet file at `path` as a table that queries read a morsel at a time
/// (see [`ParquetSource::streaming`]): nothing is kept between queries, a query holds
/// about one chunk per worker of the columns it reads. Types, target and errors as
/// [`open_parquet`].
///
/// # Errors
/// As [`open_parquet`].
pub fn open_parquet_streaming(name: &str, path: &Path, target: Option<SchemaRef>) -> Result<Table> {
    lazy_table(name, ParquetSource::open(path, target.as_deref())?.streaming(true))
}

/// A [`Table`] named `name` over `source` (schema and chunk lengths from its footer).
fn lazy_table(name: &str, source: ParquetSource) -> Result<Table> {
    let schema = Arc::clone(source.schema());
    let chunk_lens = source.chunk_lens().to_vec();
    Table::lazy(name, schema, chunk_lens, Some(Arc::new(source)))
}

/// A Parquet file as a [`ColumnSource`]: the footer parsed at open, columns decoded on
/// demand. Built by [`ParquetSource::open`]; [`open_parquet`] wraps it in a [`Table`].
///
/// The file stays open; a file replaced on disk after open is still read from the old
/// inode (Unix), one truncated after open gives [`Error::Corrupt`] or [`Error::Io`].
pub struct ParquetSource {
    path: PathBuf,
    file: Arc<File>,
    file_len: u64,
    metadata: ArrowReaderMetadata,
    schema: SchemaRef,
    /// Rows of each chunk of each row group.
    row_group_chunks: Vec<Vec<usize>>,
    /// `row_group_chunks` flattened: the table's chunk lengths.
    chunk_lens: Vec<usize>,
    /// File root (top-level field) index of each table column.
    roots: Vec<usize>,
    /// File leaf (column chunk) index of each table column.
    leaves: Vec<usize>,
    /// File columns left out of the table: name and file type.
    skipped: Vec<(String, arrow::datatypes::DataType)>,
    granularity: LoadGranularity,
    /// Whether queries read this file a morsel at a time ([`ParquetSource::streaming`]).
    streaming: bool,
    /// Row group and chunk within it of each table chunk (morsel).
    morsel_at: Vec<(usize, usize)>,
}

impl fmt::Debug for ParquetSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ParquetSource")
            .field("path", &self.path)
            .field("file_len", &self.file_len)
            .field("columns", &self.schema.fields().len())
            .field("row_groups", &self.row_group_chunks.len())
            .field("chunks", &self.chunk_lens.len())
            .field("streaming", &self.streaming)
            .finish_non_exhaustive()
    }
}

impl ParquetSource {
    /// Opens `path` and parses its footer; `target` as in [`open_parquet`].
    ///
    /// # Errors
    /// As [`open_parquet`].
    pub fn open(path: &Path, target: Option<&Schema>) -> Result<Self> {
        let io = |source| Error::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        let file_len = file.metadata().map_err(io)?.len();
        let load = |policy| {
            guard(
                path,
                || "footer".to_string(),
                || {
                    let options = ArrowReaderOptions::new().with_offset_index_policy(policy);
                    ArrowReaderMetadata::load(&file, options)
                        .map_err(|e| corrupt(path, format!("footer: {e}")))
                },
            )
        };
        // The offset index (page locations), where the writer kept one, lets a morsel read
        // fetch and decode only the pages holding its rows. It is only an accelerator: one
        // that does not parse or does not fit the footer is ignored (pages are then found
        // by their headers), never a reason to refuse the file.
        let metadata = match load(PageIndexPolicy::Optional) {
            Ok(m) if offset_index_fits(m.metadata(), file_len) => m,
            _ => load(PageIndexPolicy::Skip)?,
        };

        let file_schema = metadata.schema();
        if file_schema.fields().is_empty() {
            return Err(Error::InvalidArgument(format!(
                "{}: the Parquet file has no columns; a table needs at least one",
                path.display()
            )));
        }
        if let Some(target) = target {
            check_target(path, file_schema, target)?;
        }
        let parquet_meta = metadata.metadata();
        let descr = parquet_meta.file_metadata().schema_descr();
        // The leaf of each top-level field; nested fields have several (or a repeated one).
        let mut leaf_of_root = vec![None; file_schema.fields().len()];
        let mut leaf_count = vec![0usize; file_schema.fields().len()];
        for leaf in 0..descr.num_columns() {
            let r = descr.get_column_root_idx(leaf);
            if r < leaf_of_root.len() {
                leaf_of_root[r] = Some(leaf);
                leaf_count[r] += 1;
            }
        }
        let unsupported = |f: &Field| {
            format!(
                "Parquet column {} of type {} in {}",
                f.name(),
                f.data_type(),
                path.display()
            )
        };
        let mut fields = Vec::with_capacity(file_schema.fields().len());
        let (mut roots, mut leaves, mut skipped) = (Vec::new(), Vec::new(), Vec::new());
        for (r, f) in file_schema.fields().iter().enumerate() {
            let leaf = leaf_of_root[r].filter(|_| leaf_count[r] == 1);
            let Some((native, leaf)) = convert::native_type(f.data_type()).zip(leaf) else {
                if target.is_some_and(|t| find_field(t, f.name()).is_some()) {
                    return Err(Error::not_implemented(unsupported(f)));
                }
                skipped.push((f.name().clone(), f.data_type().clone()));
                continue;
            };
            roots.push(r);
            leaves.push(leaf);
            let mut nullable = f.is_nullable();
            let mut table_type = native.clone();
            if let Some(t) = target.and_then(|t| find_field(t, f.name())) {
                table_type = convert::target_type(&native, t.data_type()).ok_or_else(|| {
                    corrupt(
                        path,
                        format!(
                            "column {} of type {} cannot be converted to target type {}",
                            f.name(),
                            f.data_type(),
                            t.data_type()
                        ),
                    )
                })?;
                nullable &= t.is_nullable();
            }
            fields.push(Field::new(f.name(), table_type, nullable));
        }
        if fields.is_empty() {
            let all: Vec<String> = file_schema.fields().iter().map(|f| unsupported(f)).collect();
            return Err(Error::not_implemented(format!(
                "no column of a supported type: {}",
                all.join("; ")
            )));
        }

        let mut row_group_chunks = Vec::with_capacity(parquet_meta.num_row_groups());
        for (g, rg) in parquet_meta.row_groups().iter().enumerate() {
            let rows = usize::try_from(rg.num_rows())
                .map_err(|_| corrupt(path, format!("row group {g}: {} rows", rg.num_rows())))?;
            if rg.num_columns() != descr.num_columns() {
                return Err(corrupt(
                    path,
                    format!(
                        "row group {g}: {} columns, schema has {}",
                        rg.num_columns(),
                        descr.num_columns()
                    ),
                ));
            }
            for (field, &leaf) in fields.iter().zip(&leaves) {
                column_chunk_range(path, file_len, g, field.name(), rg.column(leaf))?;
            }
            row_group_chunks.push(split_rows(rows));
        }
        let chunk_lens = row_group_chunks.iter().flatten().copied().collect();
        let morsel_at = row_group_chunks
            .iter()
            .enumerate()
            .flat_map(|(g, chunks)| (0..chunks.len()).map(move |k| (g, k)))
            .collect();
        Ok(ParquetSource {
            path: path.to_path_buf(),
            file: Arc::new(file),
            file_len,
            metadata,
            schema: Arc::new(Schema::new(fields)),
            row_group_chunks,
            chunk_lens,
            roots,
            leaves,
            skipped,
            granularity: LoadGranularity::PerColumnChunk,
            streaming: false,
            morsel_at,
        })
    }

    /// With `on`, queries read this file a morsel at a time
    /// ([`ColumnSource::reads_morsels`]): the columns of one chunk are decoded when a
    /// worker takes it and dropped after, so a query's memory does not grow with the file
    /// (DuckDB's and ClickHouse's Parquet scans). Without (the default), a query loads the
    /// columns it reads whole and the table keeps them for later queries.
    #[must_use]
    pub fn streaming(mut self, on: bool) -> Self {
        self.streaming = on;
        self
    }

    /// The table schema: file columns in file order with their Tessera types.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Rows of each chunk (morsel), row group by row group (see the module docs).
    pub fn chunk_lens(&self) -> &[usize] {
        &self.chunk_lens
    }

    /// The file read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// File columns left out of the table because Tessera has no type for them (nested,
    /// Boolean, Decimal, Time...): name and file type, in file order. Empty for most files.
    pub fn skipped_columns(&self) -> &[(String, arrow::datatypes::DataType)] {
        &self.skipped
    }

    /// Rows of each row group, in file order.
    pub fn row_group_rows(&self) -> Vec<usize> {
        self.row_group_chunks.iter().map(|c| c.iter().sum()).collect()
    }

    /// Decodes columns `indices` of the row groups `groups` only (a loader streams the
    /// file this way, a block of row groups at a time): `result[i]` is column
    /// `indices[i]` as the chunks of those row groups, in order; every column gets the
    /// same chunk lengths. (Row group, column) pairs are decoded in parallel on the rayon
    /// pool.
    ///
    /// # Errors
    /// As [`ColumnSource::load_columns`]; [`Error::Internal`] for a row group out of range.
    pub fn load_row_groups(
        &self,
        indices: &[usize],
        groups: std::ops::Range<usize>,
    ) -> Result<Vec<Vec<ArrayRef>>> {
        if groups.end > self.row_group_chunks.len() {
            return Err(Error::internal(format!(
                "row groups {groups:?} out of range (0..{})",
                self.row_group_chunks.len()
            )));
        }
        self.load_groups(indices, groups)
    }

    /// Forces a task granularity (tests and benchmarks).
    #[cfg(test)]
    pub(crate) fn with_granularity(mut self, granularity: LoadGranularity) -> Self {
        self.granularity = granularity;
        self
    }

    /// Decodes columns `cols` (ascending, distinct schema positions) of row group `g`:
    /// `result[i][k]` is chunk `k` of the row group for column `cols[i]`.
    fn read_row_group(&self, g: usize, cols: &[usize]) -> Result<Vec<Vec<ArrayRef>>> {
        let path = &self.path;
        let fields = self.schema.fields();
        let what = || {
            let names: Vec<&str> = cols.iter().map(|&c| fields[c].name().as_str()).collect();
            format!("row group {g}, column {}", names.join(", "))
        };
        let rg = self.metadata.metadata().row_group(g);
        let mut ranges = Vec::with_capacity(cols.len());
        for &c in cols {
            let (start, len) =
                column_chunk_range(path, self.file_len, g, fields[c].name(), rg.column(self.leaves[c]))?;
            let mut buf = vec![0; len];
            read_exact_at(&self.file, &mut buf, start).map_err(|source| {
                if source.kind() == std::io::ErrorKind::UnexpectedEof {
                    corrupt(
                        path,
                        format!("{}: file ends inside a column chunk (truncated?)", what()),
                    )
                } else {
                    Error::Io {
                        path: path.clone(),
                        source,
                    }
                }
            })?;
            ranges.push((start, Bytes::from(buf)));
        }
        let bytes = ColumnChunkBytes {
            file_len: self.file_len,
            ranges,
        };
        let expected = &self.row_group_chunks[g];

        guard(path, what, || {
            // Table columns map to increasing file roots: the batch keeps `cols`' order.
            let mask = ProjectionMask::roots(
                self.metadata.parquet_schema(),
                cols.iter().map(|&c| self.roots[c]),
            );
            let reader =
                ParquetRecordBatchReaderBuilder::new_with_metadata(bytes, self.metadata.clone())
                    .with_row_groups(vec![g])
                    .with_projection(mask)
                    .with_batch_size(CHUNK_ROWS)
                    .build()
                    .map_err(|e| corrupt(path, format!("{}: {e}", what())))?;
            let mut out: Vec<Vec<ArrayRef>> = vec![Vec::with_capacity(expected.len()); cols.len()];
            for (k, batch) in reader.enumerate() {
                let batch = batch.map_err(|e| corrupt(path, format!("{}: {e}", what())))?;
                if expected.get(k) != Some(&batch.num_rows()) || batch.num_columns() != cols.len() {
                    return Err(corrupt(
                        path,
                        format!(
                            "{}: batch {k} has {} rows, the footer gives chunks of {expected:?}",
                            what(),
                            batch.num_rows()
                        ),
                    ));
                }
                for (i, &c) in cols.iter().enumerate() {
                    out[i].push(self.to_table_array(g, c, batch.column(i))?);
                }
            }
            if out.first().map_or(0, Vec::len) != expected.len() {
                return Err(corrupt(
                    path,
                    format!(
                        "{}: {} batches decoded, the footer gives {} rows",
                        what(),
                        out[0].len(),
                        expected.iter().sum::<usize>()
                    ),
                ));
            }
            Ok(out)
        })
    }

    /// Decodes chunks `ks` (ascending) of row group `g` for table column `c`, one array
    /// per chunk, reading the column chunk through [`FileRange`] (positioned reads
    /// of the pages the row selection needs).
    fn read_chunks(&self, g: usize, ks: &[usize], c: usize) -> Result<Vec<ArrayRef>> {
        let path = &self.path;
        let field = self.schema.field(c);
        let what = || format!("row group {g}, column {}", field.name());
        let lens = &self.row_group_chunks[g];
        let rg = self.metadata.metadata().row_group(g);
        let (start, len) = column_chunk_range(path, self.file_len, g, field.name(), rg.column(self.leaves[c]))?;
        let mut selectors = Vec::with_capacity(2 * ks.len() + 1);
        let mut pos = 0;
        for &k in ks {
            let first = k * CHUNK_ROWS;
            if first > pos {
                selectors.push(RowSelector::skip(first - pos));
            }
            selectors.push(RowSelector::select(lens[k]));
            pos = first + lens[k];
        }
        let total: usize = lens.iter().sum();
        if total > pos {
            selectors.push(RowSelector::skip(total - pos));
        }
        let reader = FileRange {
            file: Arc::clone(&self.file),
            file_len: self.file_len,
            start,
            end: start + len as u64,
        };
        guard(path, what, || {
            let mask = ProjectionMask::roots(self.metadata.parquet_schema(), [self.roots[c]]);
            let batches = ParquetRecordBatchReaderBuilder::new_with_metadata(reader, self.metadata.clone())
                .with_row_groups(vec![g])
                .with_projection(mask)
                .with_row_selection(RowSelection::from(selectors))
                .with_row_selection_policy(RowSelectionPolicy::Selectors)
                .with_batch_size(CHUNK_ROWS)
                .build()
                .map_err(|e| corrupt(path, format!("{}: {e}", what())))?;
            let mut out = Vec::with_capacity(ks.len());
            for batch in batches {
                let batch = batch.map_err(|e| corrupt(path, format!("{}: {e}", what())))?;
                let expected = ks.get(out.len()).map(|&k| lens[k]);
                if expected != Some(batch.num_rows()) || batch.num_columns() != 1 {
                    return Err(corrupt(
                        path,
                        format!("{}: batch of {} rows where the footer gives chunk lengths {lens:?}", what(), batch.num_rows()),
                    ));
                }
                out.push(self.to_table_array(g, c, batch.column(0))?);
            }
            if out.len() != ks.len() {
                return Err(corrupt(path, format!("{}: {} of {} chunks decoded", what(), out.len(), ks.len())));
            }
            Ok(out)
        })
    }

    /// Converts one decoded batch column to column `c`'s table type, checking NOT NULL.
    fn to_table_array(&self, g: usize, c: usize, array: &ArrayRef) -> Result<ArrayRef> {
        let field = self.schema.field(c);
        let converted = convert::convert(array, field.data_type()).map_err(|e| {
            corrupt(
                &self.path,
                format!("row group {g}, column {}: {e}", field.name()),
            )
        })?;
        if field.is_nullable() || converted.nulls().is_none() {
            return Ok(converted);
        }
        if converted.null_count() > 0 {
            return Err(corrupt(
                &self.path,
                format!(
                    "row group {g}, column {}: {} NULLs in a column the target declares NOT NULL",
                    field.name(),
                    converted.null_count()
                ),
            ));
        }
        // All valid: drop the validity buffer so the array matches its NOT NULL field.
        let data = converted.into_data().into_builder().nulls(None).build()?;
        Ok(make_array(data))
    }
}

impl ColumnSource for ParquetSource {
    /// Reads the columns at `indices` for every row group, in parallel on the rayon pool.
    ///
    /// # Errors
    /// [`Error::Io`] on a failed read, [`Error::Corrupt`] (naming file, row group and column)
    /// on a bad page, a value out of the target type's range, or NULLs in a NOT NULL target
    /// column; [`Error::Internal`] for an index out of range.
    fn load_columns(&self, indices: &[usize]) -> Result<Vec<Vec<ArrayRef>>> {
        self.load_groups(indices, 0..self.row_group_chunks.len())
    }

    fn reads_morsels(&self) -> bool {
        self.streaming
    }

    /// The row groups' min/max statistics of column `column`, one entry per row group (NULL
    /// for a row group whose values are all NULL), converted to the table type. `None` when
    /// any row group lacks exact statistics (missing, or truncated as writers do for long
    /// strings), when the statistics' sort order (the file's column order; signed for files
    /// without one) is not the type's, and for floats.
    fn min_max(&self, column: usize) -> Option<(ArrayRef, ArrayRef)> {
        use arrow::array::{Array, BooleanArray};
        use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
        let field = self.schema.fields().get(column)?;
        if matches!(field.data_type(), DataType::Float16 | DataType::Float32 | DataType::Float64) {
            return None;
        }
        let meta = self.metadata.metadata();
        let file_field = self.metadata.schema().fields().get(*self.roots.get(column)?)?;
        let descr = meta.file_metadata().schema_descr();
        let leaf = self.leaves[column];
        // Statistics follow the writer's column order; a file without one (old writers)
        // compared as signed, which is wrong for unsigned integers and strings.
        let written = meta.file_metadata().column_order(leaf).sort_order();
        if written != descr.column(leaf).sort_order() || written == parquet::basic::SortOrder::UNDEFINED {
            return None;
        }
        let conv = StatisticsConverter::from_column_index(leaf, file_field, descr).ok()?;
        let rgs = meta.row_groups();
        let mins = conv.row_group_mins(rgs.iter()).ok()?;
        let maxes = conv.row_group_maxes(rgs.iter()).ok()?;
        let exact = |a: &BooleanArray, g: usize| a.is_valid(g) && a.value(g);
        let min_exact = conv.row_group_is_min_value_exact(rgs.iter()).ok()?;
        let max_exact = conv.row_group_is_max_value_exact(rgs.iter()).ok()?;
        let nulls = conv.row_group_null_counts(rgs.iter()).ok()?;
        if mins.len() != rgs.len() || maxes.len() != rgs.len() {
            return None;
        }
        for (g, rg) in rgs.iter().enumerate() {
            let rows = u64::try_from(rg.num_rows()).ok()?;
            let all_null = nulls.is_valid(g) && nulls.value(g) == rows;
            let known = mins.is_valid(g) && maxes.is_valid(g) && exact(&min_exact, g) && exact(&max_exact, g);
            if !(known || all_null) {
                return None;
            }
        }
        let lo = convert::convert(&mins, field.data_type()).ok()?;
        let hi = convert::convert(&maxes, field.data_type()).ok()?;
        Some((lo, hi))
    }

    /// Reads the listed chunks only: one rayon task per (row group, column) decodes the
    /// rows of that row group's listed chunks through a row selection. With an offset
    /// index in the file only the pages holding those rows (and the dictionary page) are
    /// read from disk; without one, the pages before them are skipped by their headers.
    ///
    /// # Errors
    /// As [`ColumnSource::load_columns`].
    fn load_morsels(&self, indices: &[usize], morsels: &[usize]) -> Result<Vec<Vec<ArrayRef>>> {
        let n = self.schema.fields().len();
        if let Some(bad) = indices.iter().find(|&&i| i >= n) {
            return Err(Error::internal(format!("column index {bad} out of range (0..{n})")));
        }
        // Listed chunks grouped by row group, in order.
        let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
        for &m in morsels {
            let &(g, k) = self
                .morsel_at
                .get(m)
                .ok_or_else(|| Error::internal(format!("morsel {m} out of range")))?;
            match groups.last_mut() {
                Some((last, ks)) if *last == g && ks.last().is_some_and(|&p| p < k) => ks.push(k),
                Some((last, _)) if *last >= g => {
                    return Err(Error::internal("morsels must be ascending and distinct"));
                }
                _ => groups.push((g, vec![k])),
            }
        }
        let tasks: Vec<(usize, &[usize], usize)> = groups
            .iter()
            .flat_map(|(g, ks)| indices.iter().map(move |&c| (*g, ks.as_slice(), c)))
            .collect();
        let decoded: Vec<Vec<ArrayRef>> = tasks
            .par_iter()
            .map(|&(g, ks, c)| self.read_chunks(g, ks, c))
            .collect::<Result<_>>()?;
        // Tasks are row group major, column minor: gather each column's chunks in order.
        let mut out: Vec<Vec<ArrayRef>> = vec![Vec::with_capacity(morsels.len()); indices.len()];
        for (t, chunks) in decoded.into_iter().enumerate() {
            out[t % indices.len()].extend(chunks);
        }
        Ok(out)
    }
}

impl ParquetSource {
    /// [`ColumnSource::load_columns`] restricted to the row groups `groups` (in range).
    fn load_groups(
        &self,
        indices: &[usize],
        groups: std::ops::Range<usize>,
    ) -> Result<Vec<Vec<ArrayRef>>> {
        let n = self.schema.fields().len();
        if let Some(bad) = indices.iter().find(|&&i| i >= n) {
            return Err(Error::internal(format!(
                "column index {bad} out of range (0..{n})"
            )));
        }
        let mut wanted = indices.to_vec();
        wanted.sort_unstable();
        wanted.dedup();
        let row_groups = groups.filter(|&g| !self.row_group_chunks[g].is_empty());
        let tasks: Vec<(usize, Vec<usize>)> = match self.granularity {
            LoadGranularity::PerColumnChunk => row_groups
                .flat_map(|g| wanted.iter().map(move |&c| (g, vec![c])))
                .collect(),
            LoadGranularity::PerRowGroup => row_groups.map(|g| (g, wanted.clone())).collect(),
        };
        let decoded: Vec<Vec<Vec<ArrayRef>>> = tasks
            .par_iter()
            .map(|(g, cols)| self.read_row_group(*g, cols))
            .collect::<Result<_>>()?;

        let mut columns: Vec<Vec<ArrayRef>> =
            vec![Vec::with_capacity(self.chunk_lens.len()); wanted.len()];
        // Tasks are ordered by row group, so appending keeps chunk order.
        for ((_, cols), chunks) in tasks.iter().zip(decoded) {
            for (c, col_chunks) in cols.iter().zip(chunks) {
                let pos = wanted
                    .binary_search(c)
                    .map_err(|_| Error::internal("task column not wanted"))?;
                columns[pos].extend(col_chunks);
            }
        }
        indices
            .iter()
            .map(|i| {
                wanted
                    .binary_search(i)
                    .map(|pos| columns[pos].clone())
                    .map_err(|_| Error::internal("requested column not decoded"))
            })
            .collect()
    }
}

/// Chunk lengths of a row group of `rows` rows: full [`CHUNK_ROWS`] chunks, then the rest.
fn split_rows(rows: usize) -> Vec<usize> {
    let mut lens = vec![CHUNK_ROWS; rows / CHUNK_ROWS];
    if !rows.is_multiple_of(CHUNK_ROWS) {
        lens.push(rows % CHUNK_ROWS);
    }
    lens
}

/// `(start, length)` in bytes of a column chunk, checked against the file length (the
/// parquet crate's `byte_range` panics on negative values).
fn column_chunk_range(
    path: &Path,
    file_len: u64,
    g: usize,
    column: &str,
    meta: &ColumnChunkMetaData,
) -> Result<(u64, usize)> {
    let start = meta
        .dictionary_page_offset()
        .unwrap_or_else(|| meta.data_page_offset());
    let len = meta.compressed_size();
    match (u64::try_from(start), u64::try_from(len)) {
        (Ok(s), Ok(l)) if s.checked_add(l).is_some_and(|end| end <= file_len) => {
            let l =
                usize::try_from(l).map_err(|_| corrupt(path, "column chunk larger than memory"))?;
            Ok((s, l))
        }
        _ => Err(corrupt(
            path,
            format!(
                "row group {g}, column {column}: column chunk at byte {start}, {len} bytes, \
                 outside the file of {file_len} bytes"
            ),
        )),
    }
}

/// Whether the offset index of every column chunk that has one is consistent with the
/// footer: pages inside their column chunk, in order, the first at row 0, every first row
/// inside the row group.
fn offset_index_fits(meta: &parquet::file::metadata::ParquetMetaData, file_len: u64) -> bool {
    let Some(index) = meta.page_index() else { return true };
    meta.row_groups().iter().enumerate().all(|(g, rg)| {
        rg.columns().iter().enumerate().all(|(c, col)| {
            let Some(oi) = index.offset_index(g, c) else { return true };
            let locations = oi.page_locations();
            let Ok((start, len)) = column_chunk_range(Path::new(""), file_len, g, "", col) else {
                return false;
            };
            let end = start + len as u64;
            let mut prev: Option<(i64, u64)> = None;
            !locations.is_empty()
                && locations.iter().all(|p| {
                    let (Ok(off), Ok(size)) = (u64::try_from(p.offset), u64::try_from(p.compressed_page_size)) else {
                        return false;
                    };
                    let ok = off >= start
                        && off.checked_add(size).is_some_and(|e| e <= end)
                        && p.first_row_index >= 0
                        && p.first_row_index < rg.num_rows().max(1)
                        && match prev {
                            None => p.first_row_index == 0,
                            Some((row, o)) => p.first_row_index > row && off >= o,
                        };
                    prev = Some((p.first_row_index, off + size));
                    ok
                })
        })
    })
}

/// Checks that every column of `target` exists in the file and has a supported type.
fn check_target(path: &Path, file_schema: &Schema, target: &Schema) -> Result<()> {
    for t in target.fields() {
        if !is_supported_type(t.data_type()) {
            return Err(Error::InvalidArgument(format!(
                "target column {} has type {}, which Tessera does not execute on",
                t.name(),
                t.data_type()
            )));
        }
        if find_field(file_schema, t.name()).is_none() {
            let names = |s: &Schema| s.fields().iter().map(|f| f.name().as_str()).collect::<Vec<_>>().join(", ");
            return Err(Error::InvalidArgument(format!(
                "{}: no column {} (the file has: {}; the schema asks for: {})",
                path.display(),
                t.name(),
                names(file_schema),
                names(target)
            )));
        }
    }
    Ok(())
}

/// The field named `name`: exact match first, then ASCII case-insensitive.
fn find_field<'a>(schema: &'a Schema, name: &str) -> Option<&'a Field> {
    let fields = schema.fields();
    fields
        .iter()
        .find(|f| f.name() == name)
        .or_else(|| fields.iter().find(|f| f.name().eq_ignore_ascii_case(name)))
        .map(|f| f.as_ref())
}

fn corrupt(path: &Path, detail: impl Into<String>) -> Error {
    Error::Corrupt {
        path: path.to_path_buf(),
        detail: detail.into(),
    }
}

/// Runs `f`, turning a panic inside the parquet decoder (a corrupt file may still trigger
/// one) into [`Error::Corrupt`] naming `what()`.
fn guard<T>(path: &Path, what: impl Fn() -> String, f: impl FnOnce() -> Result<T>) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let msg = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("decoder panic");
        Err(corrupt(path, format!("{}: {msg}", what())))
    })
}

/// Reads exactly `buf.len()` bytes at `offset` without moving a shared file cursor.
fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
    }
    #[cfg(windows)]
    {
        let (mut buf, mut offset) = (buf, offset);
        while !buf.is_empty() {
            match std::os::windows::fs::FileExt::seek_read(file, buf, offset) {
                Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// A byte range of a Parquet file (one column chunk, or the whole file) as the parquet
/// decoder's [`ChunkReader`], read on demand with positioned reads (`pread`): threads
/// share the file handle without a shared cursor (the parquet crate's `ChunkReader` for
/// `File` seeks a cloned handle, whose cursor its clones share, so concurrent readers of
/// one `File` would race), and the decoder fetches only the pages a row selection needs.
/// A read outside the range (corrupt page sizes) fails.
#[derive(Clone)]
pub struct FileRange {
    file: Arc<File>,
    file_len: u64,
    /// The byte range.
    start: u64,
    end: u64,
}

impl FileRange {
    /// All of `file`.
    ///
    /// # Errors
    /// The error of reading the file's length.
    pub fn whole(file: Arc<File>) -> std::io::Result<Self> {
        let file_len = file.metadata()?.len();
        Ok(FileRange { file, file_len, start: 0, end: file_len })
    }

    fn check(&self, start: u64, len: u64) -> parquet::errors::Result<()> {
        if start < self.start || start.checked_add(len).is_none_or(|e| e > self.end) {
            return Err(ParquetError::EOF(format!(
                "read of {len} bytes at offset {start} is outside the column chunk"
            )));
        }
        Ok(())
    }
}

impl Length for FileRange {
    fn len(&self) -> u64 {
        self.file_len
    }
}

/// Sequential reads of a file from a position up to `end` (a [`FileRange`]'s, or the
/// file's length), with positioned reads (`pread`) at a cursor of its own: any number of
/// them, on any threads, share one file handle (a cloned `File` would share its cursor).
/// Seeks move only this cursor.
pub struct PreadReader {
    file: Arc<File>,
    pos: u64,
    end: u64,
}

impl PreadReader {
    /// Reads of `file` from `start`, ending at `end` (bytes past it read as the end of
    /// input).
    pub fn new(file: Arc<File>, start: u64, end: u64) -> Self {
        PreadReader { file, pos: start, end }
    }
}

impl std::io::Seek for PreadReader {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        let (base, delta) = match to {
            std::io::SeekFrom::Start(p) => (p, 0),
            std::io::SeekFrom::End(d) => (self.end, d),
            std::io::SeekFrom::Current(d) => (self.pos, d),
        };
        self.pos = base
            .checked_add_signed(delta)
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "seek before the start of the file"))?;
        Ok(self.pos)
    }
}

impl std::io::Read for PreadReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = usize::try_from(self.end.saturating_sub(self.pos)).unwrap_or(usize::MAX);
        let n = buf.len().min(left);
        if n == 0 {
            return Ok(0);
        }
        read_exact_at(&self.file, &mut buf[..n], self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl ChunkReader for FileRange {
    // Page headers are read through this; 8 KiB holds a header and the start of its page.
    type T = std::io::BufReader<PreadReader>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        self.check(start, 0)?;
        let inner = PreadReader { file: Arc::clone(&self.file), pos: start, end: self.end };
        Ok(std::io::BufReader::with_capacity(8 << 10, inner))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        self.check(start, length as u64)?;
        let mut buf = vec![0; length];
        read_exact_at(&self.file, &mut buf, start)?;
        Ok(Bytes::from(buf))
    }
}

/// The column chunks one task reads, already in memory, served to the parquet decoder at
/// their file offsets (zero-copy slices). A read outside them (corrupt page sizes) fails.
struct ColumnChunkBytes {
    file_len: u64,
    /// `(file offset, bytes)` of each column chunk.
    ranges: Vec<(u64, Bytes)>,
}

impl ColumnChunkBytes {
    /// `len` bytes at file offset `start`, or all bytes to the end of its column chunk.
    fn slice(&self, start: u64, len: Option<usize>) -> parquet::errors::Result<Bytes> {
        for (s, b) in &self.ranges {
            let Some(off) = start.checked_sub(*s) else {
                continue;
            };
            let Ok(off) = usize::try_from(off) else {
                continue;
            };
            // Column chunks may be adjacent: an open-ended read starting at the end of one
            // belongs to the next.
            let fits = match len {
                None => off < b.len(),
                Some(n) => off.checked_add(n).is_some_and(|end| end <= b.len()),
            };
            if fits {
                return Ok(b.slice(off..len.map_or(b.len(), |n| off + n)));
            }
        }
        Err(ParquetError::EOF(format!(
            "read of {} bytes at offset {start} is outside the column chunk",
            len.map_or_else(|| "all".to_string(), |n| n.to_string())
        )))
    }
}

impl Length for ColumnChunkBytes {
    fn len(&self) -> u64 {
        self.file_len
    }
}

impl ChunkReader for ColumnChunkBytes {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(self.slice(start, None)?.reader())
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        self.slice(start, Some(length))
    }
}

#[cfg(test)]
mod tests;
