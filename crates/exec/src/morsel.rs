//! The input side of the morsel pipeline: the columns of one morsel at a time.
//!
//! A query opens an [`Input`] over the columns it reads. For a table whose source reads
//! morsels (the parts of an on-disk table, [`Table::streams`]) nothing is read up front:
//! each worker reads the columns of the morsel it took, works on them and drops them, so a
//! query holds about `threads x one morsel` of decoded data (plus what its operators keep),
//! whatever the table size. The bytes a morsel's columns hold are accounted in the query's
//! `max_memory_usage` while they live ([`MorselColumns`] gives them back on drop). Other
//! tables (in memory, Parquet files registered for queries) load the columns once and keep
//! them, and a morsel is a zero-copy slice of them.
//!
//! PREWHERE (ClickHouse's name; late materialization of filter inputs): operators read a
//! morsel's WHERE columns first, evaluate the filter, and read the other columns only when
//! some row passed ([`Input::read`] twice). On a selective filter most morsels never decode
//! the wide columns. The unit is the morsel (up to 8 granules of 8,192 rows).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use arrow::array::{Array, ArrayRef, AsArray};
use tessera_common::{ColumnChunks, Error, Result, Table};

use crate::Profile;
use crate::context::QueryContext;
use crate::filter::Selection;
use crate::prewhere::GATHER_BELOW;

/// A morsel after its WHERE, with the query's other columns read ([`Input::read_passed`]):
/// its columns, the rows kept (`None`: all `len`), and when it was compacted to the kept
/// rows, their row numbers in the morsel (its arrays are then `len` rows long, copies or
/// fresh reads, none a resident table's).
pub(crate) struct Passed<'q> {
    pub(crate) cols: MorselColumns<'q>,
    pub(crate) sel: Selection,
    pub(crate) len: usize,
    pub(crate) at: Option<Vec<u32>>,
}

/// Columns a query reads, by table column.
pub(crate) struct Input<'a> {
    table: &'a Table,
    /// Columns in memory for the whole query (all of them unless the table streams).
    resident: Vec<Option<ColumnChunks>>,
    query: &'a QueryContext,
    /// Morsels dropped after their WHERE columns (see [`Input::skipped`]).
    skipped: AtomicUsize,
    /// Rows the query condition cache left out (see [`Input::cache_skipped`]).
    cache_skipped: AtomicUsize,
    /// Morsels compacted to the rows that passed the WHERE ([`Input::compact`]).
    compacted: AtomicUsize,
    /// Morsels whose column was read as its non-zero rows ([`Input::read_sparse`]).
    sparse: AtomicUsize,
    /// Per table column: the query reads only its values' lengths ([`Input::with_sized`]).
    sized: Vec<bool>,
}

/// The columns read so far of one morsel, indexed by table column (`None` elsewhere); the
/// bytes read for it stay accounted in the query until this is dropped.
pub(crate) struct MorselColumns<'q> {
    pub(crate) cols: Vec<Option<ArrayRef>>,
    /// Columns read at some rows only ([`Input::read_rows`]): the column, those rows
    /// (ascending) and its values there, kept so that reading it again at fewer of those
    /// rows (after the next WHERE step, or [`Input::compact`]) decodes nothing again.
    some_rows: Vec<(usize, Arc<[u32]>, ArrayRef)>,
    accounted: usize,
    query: &'q QueryContext,
}

impl MorselColumns<'_> {
    /// The array of table column `c`.
    ///
    /// # Errors
    /// [`Error::Internal`] if the column was not read.
    pub(crate) fn get(&self, c: usize) -> Result<&ArrayRef> {
        self.cols.get(c).and_then(|a| a.as_ref()).ok_or_else(|| Error::internal(format!("column {c} not read")))
    }
}

impl Drop for MorselColumns<'_> {
    fn drop(&mut self) {
        self.query.shrink(self.accounted);
    }
}

impl<'a> Input<'a> {
    /// An input over columns `used` of `table`: loads them whole now unless the table
    /// streams (then columns already in memory are used, the others read per morsel).
    ///
    /// # Errors
    /// Errors of the table's source while loading.
    pub(crate) fn open(table: &'a Table, used: &[usize], query: &'a QueryContext) -> Result<Self> {
        let mut resident = vec![None; table.schema().fields().len()];
        let loaded = if table.streams() {
            table.resident_columns(used)
        } else {
            table.columns(used)?.into_iter().map(Some).collect()
        };
        for (&c, col) in used.iter().zip(loaded) {
            resident[c] = col;
        }
        let sized = vec![false; resident.len()];
        Ok(Input {
            table,
            resident,
            query,
            skipped: AtomicUsize::new(0),
            cache_skipped: AtomicUsize::new(0),
            compacted: AtomicUsize::new(0),
            sparse: AtomicUsize::new(0),
            sized,
        })
    }

    /// This input with string columns `cols` read as their values' lengths only, where
    /// the table's source can ([`Table::morsel_sizes`]; columns in memory are used as
    /// they are). The query must use those columns only through their lengths
    /// (`length(c)`, `c = ''`, `c <> ''`: [`crate::plan::Plan::sized_columns`]): such a
    /// column is read as an array of its type whose offsets and NULLs are the column's and
    /// whose bytes are all zero ([`zero_bytes`]).
    pub(crate) fn with_sized(mut self, cols: &[usize]) -> Self {
        for &c in cols {
            if let Some(s) = self.sized.get_mut(c) {
                *s = true;
            }
        }
        self
    }

    /// No column of a morsel yet; [`Input::read`] fills it.
    pub(crate) fn morsel(&self) -> MorselColumns<'a> {
        MorselColumns { cols: vec![None; self.resident.len()], some_rows: Vec::new(), accounted: 0, query: self.query }
    }

    /// The rows of morsel `m` where the condition with cache key `key` may be TRUE, from
    /// the table's query condition cache (`None`: unknown).
    pub(crate) fn condition_rows(&self, key: u128, m: usize) -> Option<Vec<std::ops::Range<u32>>> {
        self.table.condition_rows(key, m)
    }

    /// Records in the table's query condition cache where the condition with cache key
    /// `key` is TRUE in morsel `m` (`held`: one bit per row, every row evaluated).
    pub(crate) fn record_condition(&self, key: u128, m: usize, held: &arrow::buffer::BooleanBuffer) {
        self.table.record_condition(key, m, held);
    }

    /// Adds the columns `which` of morsel `m` to `into` (those it lacks): sliced from memory
    /// or read from the table's source, accounted in the query.
    ///
    /// # Errors
    /// Errors of the source; [`Error::ResourcesExhausted`] when the read columns would
    /// take the query past `max_memory_usage`; [`Error::Cancelled`].
    pub(crate) fn read(&self, m: usize, which: &[usize], into: &mut MorselColumns<'_>) -> Result<()> {
        let mut missing = Vec::new();
        for &c in which {
            if into.cols[c].is_some() {
                continue;
            }
            match &self.resident[c] {
                Some(chunks) => {
                    into.cols[c] = Some(chunks.get(m).cloned().ok_or_else(|| Error::internal(format!("morsel {m} out of range")))?)
                }
                None if self.sized[c] => match self.table.morsel_sizes(c, m) {
                    Some(sizes) => {
                        let sizes = sizes?;
                        if Some(&sizes.len()) != self.table.chunk_lens().get(m) {
                            return Err(Error::internal(format!("value sizes of column {c} do not match morsel {m}'s rows")));
                        }
                        let (a, own) = zero_bytes(&sizes, self.table.schema().field(c).data_type())?;
                        // The lengths, plus the zeroed bytes when they are the morsel's own.
                        let bytes = sizes.get_array_memory_size() + own;
                        self.query.grow(bytes, "reading columns")?;
                        into.accounted += bytes;
                        into.cols[c] = Some(a);
                    }
                    None => missing.push(c),
                },
                None => missing.push(c),
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        missing.sort_unstable();
        missing.dedup();
        self.query.check_cancelled()?;
        let read = self.table.morsel_columns(&missing, &[m])?;
        let bytes: usize = read.iter().flatten().map(|a| a.get_array_memory_size()).sum();
        self.query.grow(bytes, "reading columns")?;
        into.accounted += bytes;
        for (c, mut arrays) in missing.into_iter().zip(read) {
            into.cols[c] = arrays.pop();
        }
        Ok(())
    }

    /// The rows of morsel `m` (`len` rows) where integer column `c` is not zero and its
    /// values there, when the table's source stores them sparsely
    /// ([`Table::morsel_sparse`]) and the column is not in `into` or in memory already;
    /// accounted and kept in `into` as the column at those rows (a later read at some of
    /// them, such as the rows a filter on it kept, decodes nothing again).
    ///
    /// # Errors
    /// As [`Input::read`]; [`Error::Internal`] if the source's rows are not within the morsel.
    pub(crate) fn read_sparse(&self, m: usize, c: usize, len: usize, into: &mut MorselColumns<'_>) -> Result<Option<(Arc<[u32]>, ArrayRef)>> {
        if into.cols[c].is_some() || self.resident[c].is_some() || self.sized[c] {
            return Ok(None);
        }
        let Some(read) = self.table.morsel_sparse(c, m) else { return Ok(None) };
        let (rows, values) = read?;
        if rows.len() != values.len() || rows.last().is_some_and(|&r| r as usize >= len) {
            return Err(Error::internal(format!("non-zero rows of column {c} do not match morsel {m}")));
        }
        let bytes = values.get_array_memory_size() + rows.len() * 4;
        self.query.grow(bytes, "reading columns")?;
        into.accounted += bytes;
        let rows: Arc<[u32]> = rows.into();
        into.some_rows.retain(|(k, _, _)| *k != c);
        into.some_rows.push((c, rows.clone(), values.clone()));
        self.sparse.fetch_add(1, Ordering::Relaxed);
        Ok(Some((rows, values)))
    }

    /// Rows `rows` (ascending) of the columns `which` of morsel `m`, one array of
    /// `rows.len()` values per column: taken from `from` where it holds the column (whole,
    /// or at rows including these), else read for those rows only ([`Table::morsel_rows`]:
    /// a streamed column decodes only the blocks holding them), accounted and kept in
    /// `from`; a column read for its lengths only, or one whose source cannot read fewer
    /// rows than the morsel ([`Table::reads_rows`]), is read whole into `from` first.
    ///
    /// # Errors
    /// As [`Input::read`].
    pub(crate) fn read_rows(&self, m: usize, which: &[usize], rows: &[u32], from: &mut MorselColumns<'_>) -> Result<Vec<ArrayRef>> {
        // Read whole and kept in `from`, then taken like the rest: lengths (a few bytes a
        // row), and every column of a source that would decode the whole morsel anyway
        // (a later read of other rows then decodes nothing again).
        let whole: Vec<usize> =
            which.iter().copied().filter(|&c| from.cols[c].is_none() && (self.sized[c] || !self.table.reads_rows())).collect();
        self.read(m, &whole, from)?;
        let idx = arrow::array::UInt32Array::from(rows.to_vec());
        // Columns held at other rows: where those include these, their positions there.
        let mut held: Vec<Option<(ArrayRef, arrow::array::UInt32Array)>> = vec![None; which.len()];
        for (h, &c) in held.iter_mut().zip(which) {
            if from.cols[c].is_some() {
                continue;
            }
            if let Some((_, at, a)) = from.some_rows.iter().find(|(k, _, _)| *k == c)
                && let Some(pos) = positions(at, rows)
            {
                *h = Some((a.clone(), pos));
            }
        }
        let missing: Vec<usize> =
            which.iter().zip(&held).filter(|(c, h)| from.cols[**c].is_none() && h.is_none()).map(|(&c, _)| c).collect();
        if !missing.is_empty() {
            self.query.check_cancelled()?;
        }
        let mut read = if missing.is_empty() { Vec::new() } else { self.table.morsel_rows(&missing, m, rows)? }.into_iter();
        let shared: Option<Arc<[u32]>> = (!missing.is_empty()).then(|| rows.into());
        let mut out = Vec::with_capacity(which.len());
        for (&c, h) in which.iter().zip(held) {
            let a = match (&from.cols[c], h) {
                (Some(a), _) => arrow::compute::take(a, &idx, None)?,
                (None, Some((a, pos))) => arrow::compute::take(&a, &pos, None)?,
                (None, None) => {
                    let a = read.next().ok_or_else(|| Error::internal("rows read for a wrong column count"))?;
                    let bytes = a.get_array_memory_size();
                    self.query.grow(bytes, "reading columns")?;
                    from.accounted += bytes;
                    from.some_rows.retain(|(k, _, _)| *k != c);
                    let at = shared.clone().ok_or_else(|| Error::internal("rows of a column read without a missing column"))?;
                    from.some_rows.push((c, at, a.clone()));
                    a
                }
            };
            out.push(a);
        }
        Ok(out)
    }

    /// Reads columns `which` of morsel `m` (`len` rows) once its WHERE kept `sel` (`None`:
    /// every row; `from` holds what the WHERE read). When under [`GATHER_BELOW`] of the rows
    /// are kept and a streamed column of `which` is still unread, only those rows are read
    /// (late materialization, ClickHouse's PREWHERE: ClickBench Q23 keeps ~4,000 of 100M
    /// rows, spread over nearly every morsel, and decoded every URL and Title block for
    /// them) and the morsel is compacted to them ([`Input::compact`]); else `which` is read
    /// whole into `from`.
    ///
    /// # Errors
    /// As [`Input::read`].
    pub(crate) fn read_passed(
        &self,
        m: usize,
        len: usize,
        which: &[usize],
        sel: Selection,
        mut from: MorselColumns<'a>,
    ) -> Result<Passed<'a>> {
        match sel {
            Some(rows)
                if (rows.len() as f64) < GATHER_BELOW * len as f64
                    && which.iter().any(|&c| from.cols[c].is_none() && self.is_streamed(c)) =>
            {
                Ok(Passed { cols: self.compact(m, which, &rows, from)?, sel: None, len: rows.len(), at: Some(rows) })
            }
            sel => {
                self.read(m, which, &mut from)?;
                Ok(Passed { cols: from, sel, len, at: None })
            }
        }
    }

    /// Morsel `m`'s columns `which` at its rows `rows` only, as a morsel of `rows.len()`
    /// rows (late materialization after the WHERE: a streamed column decodes only the
    /// blocks holding those rows); taken from `from` where it holds them, and `from` is
    /// released before the compacted columns are accounted in the query.
    ///
    /// # Errors
    /// As [`Input::read_rows`].
    fn compact(&self, m: usize, which: &[usize], rows: &[u32], mut from: MorselColumns<'a>) -> Result<MorselColumns<'a>> {
        let arrays = self.read_rows(m, which, rows, &mut from)?;
        drop(from);
        let mut out = self.morsel();
        for (&c, a) in which.iter().zip(arrays) {
            let bytes = a.get_array_memory_size();
            self.query.grow(bytes, "reading columns")?;
            out.accounted += bytes;
            out.cols[c] = Some(a);
        }
        self.compacted.fetch_add(1, Ordering::Relaxed);
        Ok(out)
    }

    /// `base` with this input's counts: morsels skipped, rows the query condition cache
    /// left out, morsels compacted, morsels read sparsely.
    pub(crate) fn profile(&self, base: Profile) -> Profile {
        Profile {
            morsels_skipped: self.skipped(),
            condition_cache_rows_skipped: self.cache_skipped(),
            morsels_compacted: self.compacted.load(Ordering::Relaxed),
            morsels_sparse: self.sparse.load(Ordering::Relaxed),
            ..base
        }
    }

    /// Records that no row of a morsel could be in the answer (none passed the WHERE, or
    /// the top-N bound excluded it, read or not), so its other columns were not read.
    pub(crate) fn skip(&self) {
        self.skipped.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts `rows` left out by the query condition cache.
    pub(crate) fn cache_skip(&self, rows: usize) {
        self.cache_skipped.fetch_add(rows, Ordering::Relaxed);
    }

    /// Rows the query condition cache left out before any of their columns was read.
    pub(crate) fn cache_skipped(&self) -> usize {
        self.cache_skipped.load(Ordering::Relaxed)
    }

    /// Morsels whose WHERE columns were read and that no row passed: their other columns
    /// were never read (PREWHERE's saving).
    pub(crate) fn skipped(&self) -> usize {
        self.skipped.load(Ordering::Relaxed)
    }

    /// Whether column `c` is read per morsel (its arrays are the query's memory) rather
    /// than held by the table for the whole query.
    pub(crate) fn is_streamed(&self, c: usize) -> bool {
        self.resident[c].is_none()
    }

    /// Whether column `c` may hold NULLs: counted for a column in memory, the schema's
    /// nullability for a streamed one (not read to find out).
    pub(crate) fn may_have_nulls(&self, c: usize) -> bool {
        match &self.resident[c] {
            Some(chunks) => chunks.iter().any(|a| a.null_count() > 0),
            None => self.table.schema().field(c).is_nullable(),
        }
    }

    /// Whether `e` (an expression of a plan whose computed expressions are `computed`) may
    /// be NULL in a row: its column may hold NULLs, or the expression reads such a column or
    /// has a NULL constant.
    pub(crate) fn may_be_null(&self, e: &crate::plan::ScalarExpr, computed: &[crate::expr::Expr]) -> bool {
        match *e {
            crate::plan::ScalarExpr::Computed(i) => {
                let x = &computed[i];
                let mut cols = Vec::new();
                x.columns(&mut cols);
                x.has_null_literal() || cols.iter().any(|&c| self.may_have_nulls(c))
            }
            ref e => self.may_have_nulls(e.column()),
        }
    }
}

/// A string or binary array of type `dt` whose values have the lengths `sizes` (a
/// `UInt32Array`; NULL where it is NULL) and all-zero bytes, for a query that only looks
/// at lengths. The bytes are one shared zeroed buffer (grown to the largest morsel seen, up
/// to [`SHARED_ZEROS_MAX`]), not a copy per morsel; a morsel with more string bytes than
/// that gets a zeroed buffer of its own, freed with it. Returns the array and the bytes of
/// such an own buffer (0 when shared).
///
/// # Errors
/// [`Error::Internal`] if `sizes` is not a `UInt32Array` or `dt` not a string or binary
/// type; [`Error::InvalidArgument`] for a morsel past 2 GiB of values (as when its values
/// are read).
/// The largest zeroed buffer [`zero_bytes`] keeps for the process (64 MiB: a morsel of
/// 65,536 URLs holds ~6 MB).
const SHARED_ZEROS_MAX: usize = 64 << 20;

/// Columns `columns` of `table` at rows `at` (morsel, row in the morsel), one array per
/// column with a value per entry of `at`, in its order (entries may repeat): each morsel
/// holding rows reads just those rows ([`Table::morsel_rows`]: from disk, only the blocks
/// holding them), the morsels in parallel on `pool`. The rows read are accounted in the
/// query's memory while they are gathered. Late materialization reads its answer's columns
/// this way (a `LIMIT` scan's rows, a lazy string GROUP BY key's answer rows).
///
/// # Errors
/// The table's read errors; [`Error::Cancelled`] when the query is;
/// [`Error::ResourcesExhausted`] past `max_memory_usage`.
pub(crate) fn read_rows_at(
    table: &Table,
    columns: &[usize],
    at: &[(usize, u32)],
    pool: &rayon::ThreadPool,
    query: &QueryContext,
) -> Result<Vec<ArrayRef>> {
    // Per morsel holding rows, those rows (ascending, distinct).
    let mut order = at.to_vec();
    order.sort_unstable();
    order.dedup();
    let mut by_morsel: Vec<(usize, Vec<u32>)> = Vec::new();
    for (m, r) in order {
        match by_morsel.last_mut() {
            Some((lm, rows)) if *lm == m => rows.push(r),
            _ => by_morsel.push((m, vec![r])),
        }
    }
    let per_morsel: Vec<Vec<ArrayRef>> = {
        use rayon::prelude::*;
        pool.install(|| {
            by_morsel
                .par_iter()
                .map(|(m, rows)| {
                    query.check_cancelled()?;
                    table.morsel_rows(columns, *m, rows)
                })
                .collect::<Result<_>>()
        })?
    };
    let mut fetched: Vec<Vec<ArrayRef>> = vec![Vec::with_capacity(by_morsel.len()); columns.len()];
    for arrays in per_morsel {
        for (c, a) in arrays.into_iter().enumerate() {
            fetched[c].push(a);
        }
    }
    let bytes: usize = fetched.iter().flatten().map(|a| a.get_array_memory_size()).sum();
    let mut accounted = 0;
    query.resize(&mut accounted, bytes, "late materialization")?;
    let picks: Vec<(usize, usize)> = at
        .iter()
        .map(|&(m, r)| {
            let j = by_morsel.partition_point(|(lm, _)| *lm < m);
            let k = by_morsel[j].1.binary_search(&r).expect("row listed");
            (j, k)
        })
        .collect();
    let out = columns
        .iter()
        .zip(&fetched)
        .map(|(&c, chunks)| {
            if picks.is_empty() {
                return Ok(arrow::array::new_empty_array(table.schema().field(c).data_type()));
            }
            let refs: Vec<&dyn Array> = chunks.iter().map(|a| a.as_ref()).collect();
            Ok(arrow::compute::interleave(&refs, &picks)?)
        })
        .collect();
    query.shrink(accounted);
    out
}

fn zero_bytes(sizes: &ArrayRef, dt: &arrow::datatypes::DataType) -> Result<(ArrayRef, usize)> {
    use arrow::array::{BinaryArray, StringArray};
    use arrow::buffer::{Buffer, OffsetBuffer};
    use arrow::datatypes::UInt32Type;
    static ZEROS: std::sync::Mutex<Option<Buffer>> = std::sync::Mutex::new(None);
    let sizes = sizes.as_primitive_opt::<UInt32Type>().ok_or_else(|| Error::internal("value sizes are not UInt32"))?;
    let mut offsets = Vec::with_capacity(sizes.len() + 1);
    let mut end = 0i64;
    offsets.push(0i32);
    for &n in sizes.values() {
        end += i64::from(n);
        offsets.push(i32::try_from(end).map_err(|_| Error::InvalidArgument("a morsel holds over 2 GiB of string bytes".into()))?);
    }
    let len = end as usize;
    let own = if len > SHARED_ZEROS_MAX { len } else { 0 };
    let values = if own > 0 {
        Buffer::from_vec(vec![0u8; len])
    } else {
        let mut zeros = ZEROS.lock().unwrap_or_else(|e| e.into_inner());
        if zeros.as_ref().is_none_or(|z| z.len() < len) {
            *zeros = Some(Buffer::from_vec(vec![0u8; len.next_power_of_two()]));
        }
        zeros.as_ref().expect("just set").slice_with_length(0, len)
    };
    // SAFETY: the offsets start at 0, never decrease (sums of lengths) and end at
    // `values.len()`; the NULL buffer is `sizes`', of the same length. For `StringArray`,
    // every byte is 0, a one-byte UTF-8 character, so every offset is a character boundary
    // and every value valid UTF-8.
    let offsets = unsafe { OffsetBuffer::new_unchecked(offsets.into()) };
    let nulls = sizes.nulls().cloned();
    let a: ArrayRef = match dt {
        // SAFETY: as above.
        arrow::datatypes::DataType::Utf8 => Arc::new(unsafe { StringArray::new_unchecked(offsets, values, nulls) }),
        // SAFETY: as above (any bytes are valid binary values).
        arrow::datatypes::DataType::Binary => Arc::new(unsafe { BinaryArray::new_unchecked(offsets, values, nulls) }),
        other => return Err(Error::internal(format!("value sizes of a {other} column"))),
    };
    Ok((a, own))
}

/// Positions in `within` (ascending) of each of `rows` (ascending), or `None` if one of
/// them is not there.
fn positions(within: &[u32], rows: &[u32]) -> Option<arrow::array::UInt32Array> {
    let mut out = Vec::with_capacity(rows.len());
    let mut i = 0;
    for &r in rows {
        while within.get(i).is_some_and(|&w| w < r) {
            i += 1;
        }
        if within.get(i) != Some(&r) {
            return None;
        }
        out.push(i as u32);
    }
    Some(out.into())
}

#[cfg(test)]
mod zero_bytes_tests {
    use arrow::array::{BinaryArray, StringArray, UInt32Array};
    use arrow::datatypes::DataType;

    use super::*;

    /// Lengths and NULLs come back as given, in a shared buffer for small morsels and a
    /// private one past [`SHARED_ZEROS_MAX`]; a morsel past 2 GiB is an error.
    #[test]
    fn lengths_and_nulls_are_kept() {
        let big = (SHARED_ZEROS_MAX / 2 + 1) as u32;
        for sizes in [vec![Some(3), None, Some(0), Some(70)], vec![Some(big), Some(0), None, Some(big)], vec![]] {
            let arr: ArrayRef = Arc::new(UInt32Array::from(sizes.clone()));
            let (s, _) = zero_bytes(&arr, &DataType::Utf8).unwrap();
            let s = s.as_any().downcast_ref::<StringArray>().unwrap();
            let got: Vec<Option<u32>> = (0..s.len()).map(|i| s.is_valid(i).then(|| s.value(i).len() as u32)).collect();
            assert_eq!(got, sizes);
            assert!(s.iter().flatten().all(|v| v.bytes().all(|b| b == 0)));
            let (b, _) = zero_bytes(&arr, &DataType::Binary).unwrap();
            assert_eq!(b.as_any().downcast_ref::<BinaryArray>().unwrap().null_count(), sizes.iter().filter(|v| v.is_none()).count());
        }
        let huge: ArrayRef = Arc::new(UInt32Array::from(vec![u32::MAX / 2 + 1, u32::MAX / 2 + 1]));
        assert!(matches!(zero_bytes(&huge, &DataType::Utf8), Err(Error::InvalidArgument(_))));
        assert!(zero_bytes(&huge, &DataType::Int32).is_err());
    }
}

#[cfg(test)]
mod positions_tests {
    use super::positions;

    /// Positions of rows in a superset of them; `None` when one is missing.
    #[test]
    fn positions_of_rows_in_a_superset() {
        let at = |w: &[u32], r: &[u32]| positions(w, r).map(|p| p.values().to_vec());
        assert_eq!(at(&[], &[]), Some(vec![]));
        assert_eq!(at(&[3, 7, 9], &[]), Some(vec![]));
        assert_eq!(at(&[3, 7, 9], &[3, 7, 9]), Some(vec![0, 1, 2]));
        assert_eq!(at(&[3, 7, 9, 20], &[7, 20]), Some(vec![1, 3]));
        assert_eq!(at(&[3, 7, 9], &[8]), None);
        assert_eq!(at(&[3, 7, 9], &[9, 10]), None);
        assert_eq!(at(&[], &[0]), None);
    }
}
