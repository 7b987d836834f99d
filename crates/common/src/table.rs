//! In-memory tables: columns stored as Arrow arrays cut into chunks that are aligned
//! across all columns of a table. Chunk `i` of every column covers the same rows, so a chunk
//! index is a **morsel**: the unit of work a thread takes from the scheduler.
//!
//! A table may be backed by a [`ColumnSource`] (a Parquet file): columns are then read on
//! first use and kept in memory, so a query that touches 6 of 105 columns reads 6.

use std::ops::Range;
use std::sync::{Arc, Mutex};

use arrow::array::ArrayRef;
use arrow::buffer::BooleanBuffer;
use arrow::datatypes::{DataType, SchemaRef, TimeUnit};

use crate::{Error, Result};

/// One column of a table: its chunks, aligned with every other column's chunks.
pub type ColumnChunks = Arc<Vec<ArrayRef>>;

/// Produces the columns of a table on demand (e.g. a Parquet file).
pub trait ColumnSource: Send + Sync + std::fmt::Debug {
    /// Reads the columns at `indices` (schema positions). Each returned column must have
    /// exactly the chunk lengths of [`Table::chunk_lens`] and the schema's data type.
    ///
    /// # Errors
    /// I/O or corruption errors naming the file.
    fn load_columns(&self, indices: &[usize]) -> Result<Vec<Vec<ArrayRef>>>;

    /// Whether [`ColumnSource::load_morsels`] reads only the listed morsels (cheaper than
    /// whole columns). When `false` (the default), [`Table::morsel_columns`] loads and
    /// keeps whole columns instead, as a query would.
    fn reads_morsels(&self) -> bool {
        false
    }

    /// Whether [`ColumnSource::load_morsel_rows`] decodes less than the whole morsel for a
    /// few rows (a part decodes only the blocks holding them). When `false` (the default), a
    /// query that reads a morsel's column at some rows reads it whole and keeps it for the
    /// rest of the morsel's work ([`Table::reads_rows`]).
    fn reads_rows(&self) -> bool {
        false
    }

    /// Reads chunks `morsels` (ascending chunk indices) of the columns at `indices`: for
    /// each column, one array per listed morsel, in that order, of the morsel's length.
    /// Late materialization uses it to fetch the other columns of a few rows. The default
    /// reads whole columns and keeps the listed chunks; sources that can read one morsel
    /// (granules of a part) override it.
    ///
    /// # Errors
    /// As [`ColumnSource::load_columns`].
    fn load_morsels(&self, indices: &[usize], morsels: &[usize]) -> Result<Vec<Vec<ArrayRef>>> {
        let cols = self.load_columns(indices)?;
        cols.into_iter()
            .map(|c| {
                morsels
                    .iter()
                    .map(|&m| c.get(m).cloned().ok_or_else(|| Error::internal(format!("morsel {m} out of range"))))
                    .collect()
            })
            .collect()
    }

    /// Rows `rows` (ascending, distinct positions within morsel `morsel`) of the columns at
    /// `indices`: per column one array of `rows.len()` values, in `rows` order. Late
    /// materialization and PREWHERE's few-rows path fetch a few rows with it; sources that
    /// store granules override it to decode only the blocks holding those rows. The default
    /// reads the whole morsel ([`ColumnSource::load_morsels`]) and takes the rows.
    ///
    /// # Errors
    /// As [`ColumnSource::load_columns`].
    fn load_morsel_rows(&self, indices: &[usize], morsel: usize, rows: &[u32]) -> Result<Vec<ArrayRef>> {
        let idx = arrow::array::UInt32Array::from(rows.to_vec());
        self.load_morsels(indices, &[morsel])?
            .into_iter()
            .map(|mut c| {
                let a = c.pop().ok_or_else(|| Error::internal(format!("morsel {morsel} not read")))?;
                Ok(arrow::compute::take(&a, &idx, None)?)
            })
            .collect()
    }

    /// Min/max index of column `column`: the minimum and maximum of each range of rows
    /// (granule runs), as two arrays of the column's type (NULL for a range without a
    /// non-NULL value), covering every row of the source; `None` (the default) when the
    /// source keeps no such statistics for the column. `MIN(col)`/`MAX(col)` without WHERE
    /// are answered from it, no column read. Sources return it only for types whose order
    /// is the engine's (integers, dates, timestamps, strings bytewise), not floats.
    fn min_max(&self, _column: usize) -> Option<(ArrayRef, ArrayRef)> {
        None
    }

    /// Min/max index of column `column` at the granularity of the source's chunks (the
    /// table's morsels): entry `i` bounds every value of chunk `i` (NULL when the chunk has
    /// no non-NULL value), in chunk order, one entry per chunk. `None` (the default) when the
    /// source cannot give it (a Parquet row group may hold several chunks, and an empty one
    /// none). Queries use it to skip or order morsels (top-N dynamic filtering); same type
    /// rules as [`ColumnSource::min_max`].
    fn morsel_min_max(&self, _column: usize) -> Option<(ArrayRef, ArrayRef)> {
        None
    }

    /// Granule skipping hook: given conditions every row of the answer satisfies (a
    /// conjunction of [`ColumnRange`]s from the WHERE clause), a source that keeps per-range
    /// statistics (min/max, a sparse primary index) may return a narrower source holding
    /// only the morsels that can contain such rows, with their chunk lengths. `None` (the
    /// default) means "read everything". Conditions on columns the source has no
    /// statistics for are ignored, so the returned source may still hold rows that fail
    /// them: the filter is always applied afterwards.
    fn prune(&self, _ranges: &[ColumnRange]) -> Option<PrunedSource> {
        None
    }

    /// Query condition cache (ClickHouse's `use_query_condition_cache`): the rows of morsel
    /// `morsel` where the condition whose hash is `condition` may be TRUE, as ascending,
    /// disjoint row ranges within the morsel (empty: on no row), from what
    /// [`ColumnSource::record_condition`] recorded for earlier queries. `None` (the default)
    /// when nothing is known of this condition in this morsel. The answer is coarse (whole
    /// granules): the condition must still be evaluated on the rows returned.
    fn condition_rows(&self, _condition: u128, _morsel: usize) -> Option<Vec<Range<u32>>> {
        None
    }

    /// Records where the condition whose hash is `condition` is TRUE in morsel `morsel`:
    /// `held` has one bit per row of the morsel, set where it is TRUE (FALSE and NULL
    /// unset), evaluated on every row. The condition's value must depend on the row only
    /// (no `rand()`, no `now()`). Sources that keep a condition cache remember it per
    /// granule; the default does nothing.
    fn record_condition(&self, _condition: u128, _morsel: usize, _held: &BooleanBuffer) {}

    /// The byte length of each value of string or binary column `column` in morsel
    /// `morsel`: a `UInt32Array` of the morsel's length, NULL where the value is. Queries
    /// that read a column only through `length()` or a comparison with `''` read this
    /// instead of the values (ClickHouse's `.size` subcolumn). `None` (the default): the
    /// source cannot do better than reading the values.
    fn load_morsel_sizes(&self, _column: usize, _morsel: usize) -> Option<Result<ArrayRef>> {
        None
    }

    /// The rows of morsel `morsel` where integer column `column` is not zero (positions in
    /// the morsel, ascending) and its values there (an array of the column's type, no
    /// NULLs), when the source stores the morsel that way (ClickHouse's sparse
    /// serialization of columns that are nearly all default values): every other row of the
    /// morsel is zero. A filter that zero fails (`AdvEngineID <> 0`, ClickBench Q2) is then
    /// evaluated on those values only. `None` (the default): not stored sparsely.
    fn load_morsel_sparse(&self, _column: usize, _morsel: usize) -> Option<Result<(Vec<u32>, ArrayRef)>> {
        None
    }

    /// Identity of the data behind this source: two sources (two queries' snapshots of a
    /// table, pruned or not) with the same id read the same set of immutable parts, so the
    /// same rows. A condition that depends on every row of the table (a top-N bound) is
    /// cached under it. `None` (the default) when the source cannot tell.
    fn data_id(&self) -> Option<u64> {
        None
    }
}

/// A constant bound of a [`ColumnRange`], in the column's domain: integers, dates (days)
/// and timestamps (seconds) as `Int`, strings and binaries as `Bytes` (compared bytewise).
#[derive(Debug, Clone, PartialEq)]
pub enum RangeValue {
    /// An integer in the column's domain (may lie outside the column type's range).
    Int(i128),
    /// Bytes of a string or binary value.
    Bytes(Vec<u8>),
}

/// `lower <(=) column <(=) upper` for one column; `None` bounds are open. NULLs never
/// satisfy a range (SQL comparisons with NULL are not true).
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnRange {
    /// Column index (schema position).
    pub column: usize,
    /// Lower bound and whether it is inclusive.
    pub lower: Option<(RangeValue, bool)>,
    /// Upper bound and whether it is inclusive.
    pub upper: Option<(RangeValue, bool)>,
}

/// What [`ColumnSource::prune`] returns: a source over the kept morsels only.
#[derive(Debug, Clone)]
pub struct PrunedSource {
    /// Rows of each kept morsel, in order.
    pub chunk_lens: Vec<usize>,
    /// Reads the kept morsels (same column contract as [`ColumnSource::load_columns`]).
    pub source: Arc<dyn ColumnSource>,
}

/// Whether Tessera's execution supports columns of this type.
///
/// Supported: Int8..Int64, UInt8..UInt64, Float32/64, Utf8, Binary, Date32 and
/// Timestamp(Second, no time zone). Loaders convert other encodings (LargeUtf8, other
/// timestamp units) to these.
pub fn is_supported_type(dt: &DataType) -> bool {
    use DataType::*;
    matches!(
        dt,
        Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64 | Float32 | Float64
            | Utf8 | Binary | Date32
    ) || matches!(dt, Timestamp(TimeUnit::Second, None))
}

/// A named table held in memory, possibly filled lazily from a [`ColumnSource`].
#[derive(Debug)]
pub struct Table {
    name: String,
    schema: SchemaRef,
    chunk_lens: Vec<usize>,
    num_rows: usize,
    columns: Mutex<Vec<Option<ColumnChunks>>>,
    source: Option<Arc<dyn ColumnSource>>,
}

impl Table {
    /// A table whose columns are all in memory. `columns[c][k]` is chunk `k` of column `c`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the column count, types or chunk lengths disagree, or a
    /// type is not supported.
    pub fn from_columns(name: &str, schema: SchemaRef, columns: Vec<Vec<ArrayRef>>) -> Result<Self> {
        if columns.len() != schema.fields().len() {
            return Err(Error::InvalidArgument(format!(
                "table {name}: {} columns for a schema of {}",
                columns.len(),
                schema.fields().len()
            )));
        }
        let chunk_lens: Vec<usize> = columns
            .first()
            .map(|c| c.iter().map(|a| a.len()).collect())
            .unwrap_or_default();
        let table = Table::lazy(name, schema, chunk_lens, None)?;
        let checked = table.check_columns(&(0..columns.len()).collect::<Vec<_>>(), columns)?;
        *table.columns.lock().expect("table lock") = checked.into_iter().map(Some).collect();
        Ok(table)
    }

    /// A table whose columns come from `source` on first use. `chunk_lens` gives the row
    /// count of each chunk (morsel), the same for every column.
    ///
    /// # Errors
    /// [`Error::NotImplemented`] if the schema has a type Tessera cannot execute on.
    pub fn lazy(
        name: &str,
        schema: SchemaRef,
        chunk_lens: Vec<usize>,
        source: Option<Arc<dyn ColumnSource>>,
    ) -> Result<Self> {
        for f in schema.fields() {
            if !is_supported_type(f.data_type()) {
                return Err(Error::not_implemented(format!(
                    "column {} of type {}",
                    f.name(),
                    f.data_type()
                )));
            }
        }
        let n = schema.fields().len();
        Ok(Table {
            name: name.to_string(),
            schema,
            num_rows: chunk_lens.iter().sum(),
            chunk_lens,
            columns: Mutex::new(vec![None; n]),
            source,
        })
    }

    /// The table name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The schema (column names and types).
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The rows of morsel `m` where a condition may be TRUE, from the source's query
    /// condition cache ([`ColumnSource::condition_rows`]); `None` when unknown or the
    /// table has no source.
    pub fn condition_rows(&self, condition: u128, m: usize) -> Option<Vec<Range<u32>>> {
        self.source.as_ref()?.condition_rows(condition, m)
    }

    /// Records where a condition is TRUE in morsel `m` ([`ColumnSource::record_condition`]).
    pub fn record_condition(&self, condition: u128, m: usize, held: &BooleanBuffer) {
        if let Some(s) = &self.source {
            s.record_condition(condition, m, held);
        }
    }

    /// The value lengths of string column `c` in morsel `m`, from the source when it can
    /// read them without the values ([`ColumnSource::load_morsel_sizes`]); `None` otherwise.
    pub fn morsel_sizes(&self, c: usize, m: usize) -> Option<Result<ArrayRef>> {
        self.source.as_ref()?.load_morsel_sizes(c, m)
    }

    /// The non-zero rows of integer column `c` in morsel `m` and their values, from the
    /// source when it stores them sparsely ([`ColumnSource::load_morsel_sparse`]); `None`
    /// otherwise.
    pub fn morsel_sparse(&self, c: usize, m: usize) -> Option<Result<(Vec<u32>, ArrayRef)>> {
        self.source.as_ref()?.load_morsel_sparse(c, m)
    }

    /// Identity of the rows of this table's source ([`ColumnSource::data_id`]).
    pub fn data_id(&self) -> Option<u64> {
        self.source.as_ref()?.data_id()
    }

    /// Total rows.
    pub fn num_rows(&self) -> usize {
        self.num_rows
    }

    /// Rows of each chunk (morsel), in order.
    pub fn chunk_lens(&self) -> &[usize] {
        &self.chunk_lens
    }

    /// Index of a column by name: exact match first, then ASCII case-insensitive (as SQL
    /// identifiers are).
    pub fn column_index(&self, name: &str) -> Option<usize> {
        let fields = self.schema.fields();
        fields
            .iter()
            .position(|f| f.name() == name)
            .or_else(|| fields.iter().position(|f| f.name().eq_ignore_ascii_case(name)))
    }

    /// The columns at `indices`, reading those not yet in memory from the source.
    ///
    /// # Errors
    /// Errors of the source (I/O, corruption) or a source that broke its contract.
    pub fn columns(&self, indices: &[usize]) -> Result<Vec<ColumnChunks>> {
        let mut cols = self.columns.lock().map_err(|_| Error::internal("table lock poisoned"))?;
        let missing: Vec<usize> = indices
            .iter()
            .copied()
            .filter(|&i| cols.get(i).is_some_and(|c| c.is_none()))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        if let Some(&bad) = indices.iter().find(|&&i| i >= cols.len()) {
            return Err(Error::internal(format!("column index {bad} out of range")));
        }
        if !missing.is_empty() {
            let source = self.source.as_ref().ok_or_else(|| {
                Error::internal(format!("table {}: column without data and no source", self.name))
            })?;
            let loaded = source.load_columns(&missing)?;
            let checked = self.check_columns(&missing, loaded)?;
            for (i, col) in missing.iter().zip(checked) {
                cols[*i] = Some(col);
            }
        }
        Ok(indices.iter().map(|&i| cols[i].clone().expect("loaded above")).collect())
    }

    /// Whether queries should read this table a morsel at a time (its source
    /// [reads morsels](ColumnSource::reads_morsels), e.g. the parts of an on-disk table)
    /// instead of loading whole columns first and keeping them (in-memory tables, Parquet).
    pub fn streams(&self) -> bool {
        self.source.as_ref().is_some_and(|s| s.reads_morsels())
    }

    /// The min/max index of column `c` from the table's source ([`ColumnSource::min_max`]);
    /// `None` without one.
    pub fn min_max(&self, c: usize) -> Option<(ArrayRef, ArrayRef)> {
        let (lo, hi) = self.source.as_ref()?.min_max(c)?;
        let dt = self.schema.fields().get(c)?.data_type();
        (lo.data_type() == dt && hi.data_type() == dt && lo.len() == hi.len()).then_some((lo, hi))
    }

    /// The per-morsel min/max index of column `c` ([`ColumnSource::morsel_min_max`]): one
    /// entry per chunk of [`Table::chunk_lens`]; `None` without one.
    pub fn morsel_min_max(&self, c: usize) -> Option<(ArrayRef, ArrayRef)> {
        let (lo, hi) = self.source.as_ref()?.morsel_min_max(c)?;
        let dt = self.schema.fields().get(c)?.data_type();
        let n = self.chunk_lens.len();
        (lo.data_type() == dt && hi.data_type() == dt && lo.len() == n && hi.len() == n).then_some((lo, hi))
    }

    /// The columns at `indices` that are in memory now (`None` for the others); reads
    /// nothing.
    pub fn resident_columns(&self, indices: &[usize]) -> Vec<Option<ColumnChunks>> {
        let cols = self.columns.lock().expect("table lock");
        indices.iter().map(|&i| cols.get(i).cloned().flatten()).collect()
    }

    /// Chunks `morsels` (ascending) of the columns at `indices`, for late materialization:
    /// columns in memory are sliced from there; the others are read from a source that
    /// [reads morsels](ColumnSource::reads_morsels) for those morsels only and not kept, or
    /// else loaded whole and kept like [`Table::columns`]. `out[i][j]` is morsel
    /// `morsels[j]` of column `indices[i]`.
    ///
    /// # Errors
    /// Errors of the source, or a source that broke its contract (lengths, types).
    pub fn morsel_columns(&self, indices: &[usize], morsels: &[usize]) -> Result<Vec<Vec<ArrayRef>>> {
        if let Some(&bad) = indices.iter().find(|&&i| i >= self.schema.fields().len()) {
            return Err(Error::internal(format!("column index {bad} out of range")));
        }
        if let Some(&bad) = morsels.iter().find(|&&m| m >= self.chunk_lens.len()) {
            return Err(Error::internal(format!("morsel {bad} out of range")));
        }
        if self.source.as_ref().is_none_or(|s| !s.reads_morsels()) {
            let cols = self.columns(indices)?;
            return Ok(cols.iter().map(|c| morsels.iter().map(|&m| c[m].clone()).collect()).collect());
        }
        let cached: Vec<Option<ColumnChunks>> = {
            let cols = self.columns.lock().map_err(|_| Error::internal("table lock poisoned"))?;
            indices.iter().map(|&i| cols[i].clone()).collect()
        };
        let missing: Vec<usize> = indices.iter().zip(&cached).filter(|(_, c)| c.is_none()).map(|(&i, _)| i).collect();
        let mut read = if missing.is_empty() {
            Vec::new()
        } else {
            let source = self.source.as_ref().ok_or_else(|| {
                Error::internal(format!("table {}: column without data and no source", self.name))
            })?;
            source.load_morsels(&missing, morsels)?
        }
        .into_iter();
        let mut out = Vec::with_capacity(indices.len());
        for (&i, c) in indices.iter().zip(cached) {
            let chunks: Vec<ArrayRef> = match c {
                Some(c) => morsels.iter().map(|&m| c[m].clone()).collect(),
                None => read.next().ok_or_else(|| Error::internal("column source returned a wrong column count"))?,
            };
            let field = self.schema.field(i);
            let ok = chunks.len() == morsels.len()
                && chunks.iter().zip(morsels).all(|(a, &m)| a.len() == self.chunk_lens[m] && a.data_type() == field.data_type());
            if !ok {
                return Err(Error::internal(format!(
                    "table {}: column {} read for morsels {:?}.. has the wrong shape",
                    self.name,
                    field.name(),
                    &morsels[..morsels.len().min(4)]
                )));
            }
            out.push(chunks);
        }
        Ok(out)
    }

    /// Whether reading a few rows of a column not in memory costs less than its whole
    /// morsel ([`ColumnSource::reads_rows`]).
    pub fn reads_rows(&self) -> bool {
        self.source.as_ref().is_some_and(|s| s.reads_morsels() && s.reads_rows())
    }

    /// Rows `rows` (ascending, distinct positions within morsel `m`) of the columns at
    /// `indices`, one array of `rows.len()` values per column: taken from the columns in
    /// memory, else read from a source that [reads morsels](ColumnSource::reads_morsels)
    /// ([`ColumnSource::load_morsel_rows`]: only the blocks holding the rows) and not kept,
    /// else loaded whole and kept like [`Table::columns`].
    ///
    /// # Errors
    /// Errors of the source, or a source that broke its contract (lengths, types); an
    /// index or row out of range is an internal error.
    pub fn morsel_rows(&self, indices: &[usize], m: usize, rows: &[u32]) -> Result<Vec<ArrayRef>> {
        let len = *self.chunk_lens.get(m).ok_or_else(|| Error::internal(format!("morsel {m} out of range")))?;
        if rows.iter().any(|&r| r as usize >= len) || rows.windows(2).any(|w| w[0] >= w[1]) {
            return Err(Error::internal(format!("rows of morsel {m} out of range or not ascending")));
        }
        let idx = arrow::array::UInt32Array::from(rows.to_vec());
        let take = |a: &ArrayRef| Ok(arrow::compute::take(a, &idx, None)?);
        if self.source.as_ref().is_none_or(|s| !s.reads_morsels()) {
            return self.columns(indices)?.iter().map(|c| take(&c[m])).collect();
        }
        let cached = self.resident_columns(indices);
        let missing: Vec<usize> = indices.iter().zip(&cached).filter(|(_, c)| c.is_none()).map(|(&i, _)| i).collect();
        let mut read = if missing.is_empty() {
            Vec::new()
        } else {
            let source = self.source.as_ref().ok_or_else(|| Error::internal("streamed table without a source"))?;
            source.load_morsel_rows(&missing, m, rows)?
        }
        .into_iter();
        let mut out = Vec::with_capacity(indices.len());
        for (&i, c) in indices.iter().zip(cached) {
            let a = match c {
                Some(c) => take(&c[m])?,
                None => read.next().ok_or_else(|| Error::internal("column source returned a wrong column count"))?,
            };
            let field = self.schema.fields().get(i).ok_or_else(|| Error::internal(format!("column index {i} out of range")))?;
            if a.len() != rows.len() || a.data_type() != field.data_type() {
                return Err(Error::internal(format!("table {}: rows of column {} read with the wrong shape", self.name, field.name())));
            }
            out.push(a);
        }
        Ok(out)
    }

    /// A table over the morsels that may hold rows satisfying all of `ranges` (see
    /// [`ColumnSource::prune`]); `None` when the table has no source or the source cannot
    /// skip anything. Columns already in memory are not carried over: the narrower table
    /// reads them from the source again.
    ///
    /// # Errors
    /// As [`Table::lazy`].
    pub fn prune(&self, ranges: &[ColumnRange]) -> Result<Option<Table>> {
        let Some(source) = &self.source else { return Ok(None) };
        if ranges.is_empty() {
            return Ok(None);
        }
        match source.prune(ranges) {
            Some(p) => Table::lazy(&self.name, self.schema.clone(), p.chunk_lens, Some(p.source)).map(Some),
            None => Ok(None),
        }
    }

    /// Loads every column now (what `Database::load` does after registering a file).
    ///
    /// # Errors
    /// As [`Table::columns`].
    pub fn load_all(&self) -> Result<()> {
        let all: Vec<usize> = (0..self.schema.fields().len()).collect();
        self.columns(&all).map(|_| ())
    }

    /// Bytes held in memory by the loaded columns (Arrow buffer sizes).
    pub fn memory_size(&self) -> usize {
        let cols = self.columns.lock().expect("table lock");
        cols.iter()
            .flatten()
            .flat_map(|c| c.iter())
            .map(|a| a.get_array_memory_size())
            .sum()
    }

    fn check_columns(&self, indices: &[usize], columns: Vec<Vec<ArrayRef>>) -> Result<Vec<ColumnChunks>> {
        if columns.len() != indices.len() {
            return Err(Error::internal("column source returned a wrong column count"));
        }
        let mut out = Vec::with_capacity(columns.len());
        for (&i, chunks) in indices.iter().zip(columns) {
            let field = self.schema.field(i);
            let lens: Vec<usize> = chunks.iter().map(|a| a.len()).collect();
            if lens != self.chunk_lens {
                return Err(Error::InvalidArgument(format!(
                    "table {}: column {} has chunks {:?}.., expected {:?}..",
                    self.name,
                    field.name(),
                    &lens[..lens.len().min(4)],
                    &self.chunk_lens[..self.chunk_lens.len().min(4)]
                )));
            }
            if let Some(bad) = chunks.iter().find(|a| a.data_type() != field.data_type()) {
                return Err(Error::InvalidArgument(format!(
                    "table {}: column {} has type {}, schema says {}",
                    self.name,
                    field.name(),
                    bad.data_type(),
                    field.data_type()
                )));
            }
            out.push(Arc::new(chunks));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int32Array, StringArray};
    use arrow::datatypes::{Field, Schema};

    #[test]
    fn aligned_chunks_are_checked() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int32, false),
            Field::new("s", DataType::Utf8, false),
        ]));
        let a: ArrayRef = Arc::new(Int32Array::from(vec![1, 2, 3]));
        let s: ArrayRef = Arc::new(StringArray::from(vec!["x", "y", "z"]));
        let s2: ArrayRef = Arc::new(StringArray::from(vec!["x", "y"]));
        let t = Table::from_columns("t", schema.clone(), vec![vec![a.clone()], vec![s]]).unwrap();
        assert_eq!(t.num_rows(), 3);
        assert_eq!(t.column_index("S"), Some(1));
        assert!(Table::from_columns("t", schema, vec![vec![a], vec![s2]]).is_err());
    }
}
