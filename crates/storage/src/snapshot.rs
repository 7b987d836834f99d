//! A snapshot of a disk table's parts feeding one query: the [`ColumnSource`] the executor
//! reads (morsels of granules, block-level row reads, per-morsel min/max, granule pruning).

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arrow::array::{Array, ArrayRef, StructArray, UInt32Array};
use arrow::datatypes::{DataType, Field};
use arrow::buffer::BooleanBuffer;
use rayon::prelude::*;
use tessera_common::{ColumnRange, ColumnSource, Error, PrunedSource, RangeValue, Result};

use crate::cache::{BlockCache, BlockKey};
use crate::conditions::ConditionCache;
use crate::part::{self, Part, Stats};
use crate::table::{DiskTable, PartList};

/// Granules `g0..g1` of part `part` of a snapshot: one morsel.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Morsel {
    pub(crate) part: usize,
    pub(crate) g0: usize,
    pub(crate) g1: usize,
}

/// Set in the column field of a decoded-block cache key whose entry is a morsel's sparse
/// read of the column (its non-zero rows and values, [`sparse_of`]) rather than its decoded
/// blocks.
const SPARSE_KEY: u32 = 1 << 31;

/// The decoded-block cache's key of granules `g0..g1` of column `c` of `part` (`c` with
/// [`SPARSE_KEY`] set for its sparse read).
fn block_key(part: &Part, c: u32, g0: usize, g1: usize) -> BlockKey {
    (part.uid, c, g0 as u32, g1 as u32)
}

/// A sparse read as the cache keeps it: a struct of `row` (UInt32) and `value` arrays
/// ([`sparse_of`] reads it back); `None` if the two lengths differ.
fn sparse_pair(rows: &[u32], values: &ArrayRef) -> Option<ArrayRef> {
    let fields = vec![Field::new("row", DataType::UInt32, false), Field::new("value", values.data_type().clone(), false)];
    let columns: Vec<ArrayRef> = vec![Arc::new(UInt32Array::from(rows.to_vec())), values.clone()];
    StructArray::try_new(fields.into(), columns, None).ok().map(|s| Arc::new(s) as ArrayRef)
}

/// The non-zero rows and values of a cached sparse read ([`sparse_pair`]).
fn sparse_of(cached: &ArrayRef) -> Result<(Vec<u32>, ArrayRef)> {
    let pair = cached.as_any().downcast_ref::<StructArray>();
    let rows = pair.and_then(|p| p.column(0).as_any().downcast_ref::<UInt32Array>());
    match (pair, rows) {
        (Some(pair), Some(rows)) if pair.num_columns() == 2 => Ok((rows.values().to_vec(), pair.column(1).clone())),
        _ => Err(Error::internal("a cached sparse read is not a (row, value) struct")),
    }
}

/// The caches a snapshot reads through, shared by the tables of one database.
#[derive(Debug, Clone, Default)]
pub struct Caches {
    /// Decoded blocks ([`BlockCache`]); `None`: every read decodes.
    pub blocks: Option<Arc<BlockCache>>,
    /// Per-granule results of WHERE conditions ([`ConditionCache`]); `None`: none kept.
    pub conditions: Option<Arc<ConditionCache>>,
}

/// A consistent set of parts feeding one query ([`ColumnSource`]).
#[derive(Debug)]
pub(crate) struct Snapshot {
    pub(crate) table: Arc<DiskTable>,
    pub(crate) parts: PartList,
    pub(crate) morsels: Vec<Morsel>,
    /// The decoded-block and query condition caches it reads through.
    pub(crate) caches: Caches,
    /// Per column: decoded bytes this snapshot put into the block cache ([`Snapshot::admits`]).
    admitted: Vec<AtomicU64>,
}

impl Snapshot {
    pub(crate) fn new(table: Arc<DiskTable>, parts: PartList, morsels: Vec<Morsel>, caches: &Caches) -> Self {
        let admitted = (0..table.schema().fields().len()).map(|_| AtomicU64::new(0)).collect();
        Snapshot { table, parts, morsels, caches: caches.clone(), admitted }
    }

    /// The part and granule lengths of morsel `m`.
    fn granules_of(&self, m: usize) -> Option<(&Part, impl Iterator<Item = (usize, usize)> + '_)> {
        let mo = *self.morsels.get(m)?;
        let part = &self.parts.get(mo.part)?.1;
        Some((&**part, (mo.g0..mo.g1).map(move |g| (g, part.granule_len(g)))))
    }

    /// Whether decoded array `a` of column `c` goes into the decoded-block cache: while
    /// this snapshot (one query's read of the table) has put less than half the cache's
    /// budget of that column there. A scan of a column larger than the cache would only push its
    /// own blocks, and every hot column's, out before any could be read again (URL over
    /// 100M rows of hits decodes ~9 GB through a 2 GiB cache: Q22 and Q28 ran 13-17% faster
    /// with the cache off than through it); a query that reads a few blocks of it (Q24's
    /// late materialization) still caches them. ClickHouse's uncompressed cache is skipped
    /// by large reads the same way (`merge_tree_max_bytes_to_use_cache`).
    fn admits(&self, c: usize, a: &ArrayRef, cache: &BlockCache) -> bool {
        let Some(admitted) = self.admitted.get(c) else { return false };
        cache.takes() && admitted.fetch_add(a.get_array_memory_size() as u64, Ordering::Relaxed) < cache.capacity() / 2
    }

    /// Puts `a` (of column `c`) in the cache under `key` if [`Snapshot::admits`] it.
    fn admit(&self, c: usize, key: BlockKey, a: &ArrayRef, cache: &BlockCache) {
        if self.admits(c, a, cache) {
            cache.insert(key, a);
        }
    }

    /// Granules `g0..g1` of column `c` of `part`, decoded, through the decoded-block cache
    /// (taken from it when there, put in it when [`Snapshot::admits`] says so). The mapped
    /// compressed pages are not needed once decoded: dropped from the process's page
    /// tables (they stay in the OS page cache), so a query's resident set holds its decoded
    /// arrays, not every file byte it read.
    fn read_cached(&self, part: &Part, c: usize, g0: usize, g1: usize) -> Result<ArrayRef> {
        let key = block_key(part, c as u32, g0, g1);
        if let Some(a) = self.caches.blocks.as_ref().and_then(|cache| cache.get(&key)) {
            return Ok(a);
        }
        let a = part.read_granules(c, g0, g1)?;
        part.release(c, g0, g1);
        if let Some(cache) = &self.caches.blocks {
            self.admit(c, key, &a, cache);
        }
        Ok(a)
    }

    pub(crate) fn chunk_lens(&self) -> Vec<usize> {
        self.morsels
            .iter()
            .map(|m| {
                let p = &self.parts[m.part].1;
                (m.g0..m.g1).map(|g| p.granule_len(g)).sum()
            })
            .collect()
    }

    /// Whether granule `g` of `p` may hold rows satisfying every range.
    fn may_match(p: &Part, g: usize, ranges: &[ColumnRange]) -> bool {
        ranges.iter().all(|r| match (&p.stats[r.column], r) {
            (Stats::Int(s), _) => match s[g] {
                None => false,
                Some((lo, hi)) => {
                    let low_ok = match &r.lower {
                        Some((RangeValue::Int(v), incl)) => hi > *v || (*incl && hi == *v),
                        _ => true,
                    };
                    let high_ok = match &r.upper {
                        Some((RangeValue::Int(v), incl)) => lo < *v || (*incl && lo == *v),
                        _ => true,
                    };
                    low_ok && high_ok
                }
            },
            (Stats::Bytes(s), _) => match &s[g] {
                None => false,
                Some((lo, hi)) => {
                    let low_ok = match &r.lower {
                        Some((RangeValue::Bytes(v), incl)) => hi.as_slice() > v.as_slice() || (*incl && hi == v),
                        _ => true,
                    };
                    let high_ok = match &r.upper {
                        Some((RangeValue::Bytes(v), incl)) => lo.as_slice() < v.as_slice() || (*incl && lo == v),
                        _ => true,
                    };
                    low_ok && high_ok
                }
            },
            (Stats::None, _) => true,
        }) && ranges.iter().all(|r| {
            // Equality: the bloom filter, where the column has one.
            let (Some((lo, true)), Some((hi, true))) = (&r.lower, &r.upper) else { return true };
            if lo != hi || !p.blooms.has(r.column) {
                return true;
            }
            let h = match (lo, &p.stats[r.column]) {
                (RangeValue::Int(v), Stats::Int(_)) => part::bloom_hash_int(*v),
                (RangeValue::Bytes(b), Stats::Bytes(_)) => part::bloom_hash_bytes(b),
                _ => return true,
            };
            p.blooms.may_contain(r.column, g, h).unwrap_or(true)
        })
    }
}

impl ColumnSource for Snapshot {
    /// Decodes the columns at `indices` for every morsel, (column, morsel) pairs in
    /// parallel on the rayon pool.
    fn load_columns(&self, indices: &[usize]) -> Result<Vec<Vec<ArrayRef>>> {
        self.load_morsels(indices, &(0..self.morsels.len()).collect::<Vec<_>>())
    }

    fn reads_morsels(&self) -> bool {
        true
    }

    fn reads_rows(&self) -> bool {
        true
    }

    /// Decodes only the granules of `morsels` (late materialization of a few rows), (column,
    /// morsel) pairs in parallel on the rayon pool.
    fn load_morsels(&self, indices: &[usize], morsels: &[usize]) -> Result<Vec<Vec<ArrayRef>>> {
        if let Some(&bad) = morsels.iter().find(|&&m| m >= self.morsels.len()) {
            return Err(Error::internal(format!("morsel {bad} out of range")));
        }
        let tasks: Vec<(usize, usize)> = indices.iter().flat_map(|&c| morsels.iter().map(move |&m| (c, m))).collect();
        let arrays = tasks
            .par_iter()
            .map(|&(c, m)| {
                let mo = self.morsels[m];
                self.read_cached(&self.parts[mo.part].1, c, mo.g0, mo.g1)
            })
            .collect::<Result<Vec<_>>>()?;
        let n = morsels.len();
        let mut it = arrays.into_iter();
        Ok(indices.iter().map(|_| it.by_ref().take(n).collect()).collect())
    }

    /// Decodes only the blocks of morsel `morsel` that hold `rows` (whole blocks, each
    /// once; a block holds one or more granules), columns in parallel on the rayon pool,
    /// and takes the rows. A morsel in the decoded-block cache is taken from there.
    fn load_morsel_rows(&self, indices: &[usize], morsel: usize, rows: &[u32]) -> Result<Vec<ArrayRef>> {
        let mo = *self.morsels.get(morsel).ok_or_else(|| Error::internal(format!("morsel {morsel} out of range")))?;
        let part = &self.parts[mo.part].1;
        let first_row = mo.g0 * part.granule_rows;
        let idx = arrow::array::UInt32Array::from(rows.to_vec());
        indices
            .par_iter()
            .map(|&c| {
                if rows.is_empty() {
                    let field = self.table.schema().fields().get(c).ok_or_else(|| Error::internal("column out of range"))?;
                    return Ok(arrow::array::new_empty_array(field.data_type()));
                }
                if let Some(cache) = &self.caches.blocks
                    && let Some(a) = cache.get(&block_key(part, c as u32, mo.g0, mo.g1))
                {
                    return Ok(arrow::compute::take(&a, &idx, None)?);
                }
                // Block runs holding the rows, merged: [g0, g1) granule ranges.
                let mut runs: Vec<(usize, usize)> = Vec::new();
                for &r in rows {
                    let g = mo.g0 + r as usize / part.granule_rows;
                    if runs.last().is_some_and(|&(_, e)| g < e) {
                        continue;
                    }
                    let (b0, b1) = (part.block_start(c, g).max(mo.g0), part.block_end(c, g).min(mo.g1));
                    match runs.last_mut() {
                        Some((_, e)) if *e == b0 => *e = b1,
                        _ => runs.push((b0, b1)),
                    }
                }
                // Each row's position in the concatenation of the runs' rows.
                let mut at = Vec::with_capacity(rows.len());
                let (mut run, mut base) = (0, 0usize);
                for &r in rows {
                    let row = first_row + r as usize;
                    while row >= runs[run].1 * part.granule_rows {
                        base += (runs[run].0..runs[run].1).map(|g| part.granule_len(g)).sum::<usize>();
                        run += 1;
                    }
                    let pos = base + row - runs[run].0 * part.granule_rows;
                    at.push(u32::try_from(pos).map_err(|_| Error::internal("row position past u32"))?);
                }
                let mut pieces = Vec::with_capacity(runs.len());
                for &(g0, g1) in &runs {
                    // A run is cached as a granule range of its own: the next query that
                    // fetches rows there (Q24's late materialization of `SELECT *`, 105
                    // columns of 10 rows) does not decode its blocks again.
                    pieces.push(self.read_cached(part, c, g0, g1)?);
                }
                // Interleave from the pieces, not a concatenation of them: no string column
                // past 32-bit offsets, and only the taken rows copied.
                let refs: Vec<&dyn arrow::array::Array> = pieces.iter().map(|a| a.as_ref()).collect();
                let starts: Vec<usize> = pieces
                    .iter()
                    .scan(0usize, |acc, a| {
                        let s = *acc;
                        *acc += a.len();
                        Some(s)
                    })
                    .collect();
                let picks: Vec<(usize, usize)> = at
                    .iter()
                    .map(|&p| {
                        let k = starts.partition_point(|&s| s <= p as usize) - 1;
                        (k, p as usize - starts[k])
                    })
                    .collect();
                Ok(arrow::compute::interleave(&refs, &picks)?)
            })
            .collect()
    }

    /// The min/max of each morsel (granule run) of the snapshot ([`Snapshot::morsel_min_max`]).
    fn min_max(&self, column: usize) -> Option<(ArrayRef, ArrayRef)> {
        self.morsel_min_max(column)
    }

    /// The min/max of each morsel (granule run) of the snapshot, from its granules' index,
    /// for integer, date, timestamp and string columns (floats: the engine's NaN/-0.0 order
    /// is not the index's). One entry per morsel, in morsel order, so a query can skip or
    /// order its morsels by them.
    fn morsel_min_max(&self, column: usize) -> Option<(ArrayRef, ArrayRef)> {
        use arrow::compute::{SortOptions, concat, sort_to_indices, take};
        let dt = self.table.schema().fields().get(column)?.data_type();
        if matches!(dt, arrow::datatypes::DataType::Float32 | arrow::datatypes::DataType::Float64) {
            return None;
        }
        if self.morsels.is_empty() {
            let empty = arrow::array::new_empty_array(dt);
            return Some((empty.clone(), empty));
        }
        // Per morsel, the position (in the concatenation of the morsels' granule entries)
        // of the least minimum and of the greatest maximum; NULL (a granule without a
        // non-NULL value) only where every granule of the morsel is NULL.
        let mut los = Vec::with_capacity(self.morsels.len());
        let mut his = Vec::with_capacity(self.morsels.len());
        let (mut lo_at, mut hi_at) = (Vec::with_capacity(self.morsels.len()), Vec::with_capacity(self.morsels.len()));
        let mut base = 0u32;
        for m in &self.morsels {
            let (lo, hi) = self.parts[m.part].1.min_max.get(column)?;
            if lo.len() < m.g1 || hi.len() < m.g1 || m.g1 <= m.g0 {
                return None;
            }
            let (lo, hi) = (lo.slice(m.g0, m.g1 - m.g0), hi.slice(m.g0, m.g1 - m.g0));
            let first = |a: &ArrayRef, descending: bool| {
                let opts = SortOptions { descending, nulls_first: false };
                sort_to_indices(a, Some(opts), Some(1)).ok().and_then(|i| i.values().first().copied())
            };
            lo_at.push(base + first(&lo, false)?);
            hi_at.push(base + first(&hi, true)?);
            base += u32::try_from(lo.len()).ok()?;
            los.push(lo);
            his.push(hi);
        }
        let pick = |v: &[ArrayRef], at: Vec<u32>| {
            let all = concat(&v.iter().map(|a| a.as_ref()).collect::<Vec<_>>()).ok()?;
            take(&all, &arrow::array::UInt32Array::from(at), None).ok()
        };
        Some((pick(&los, lo_at)?, pick(&his, hi_at)?))
    }

    /// Granules recorded as holding no row where the condition is TRUE are left out;
    /// granules never evaluated are kept.
    fn condition_rows(&self, condition: u128, morsel: usize) -> Option<Vec<Range<u32>>> {
        let cache = self.caches.conditions.as_ref()?;
        let (part, granules) = self.granules_of(morsel)?;
        let bits = cache.get(part.uid, condition)?;
        let (mut known, mut at, mut rows) = (false, 0u32, Vec::<Range<u32>>::new());
        for (g, len) in granules {
            let len = u32::try_from(len).ok()?;
            let held = bits.get(g);
            known |= held.is_some();
            if held != Some(false) {
                match rows.last_mut() {
                    Some(r) if r.end == at => r.end = at + len,
                    _ => rows.push(at..at + len),
                }
            }
            at += len;
        }
        known.then_some(rows)
    }

    /// From the decoded-block cache when the morsel's values are there, else from the
    /// blocks' offsets only ([`Part::read_granule_sizes`]).
    fn load_morsel_sizes(&self, column: usize, morsel: usize) -> Option<Result<ArrayRef>> {
        let mo = *self.morsels.get(morsel)?;
        let part = &self.parts[mo.part].1;
        if let Some(cache) = &self.caches.blocks
            && let Some(a) = cache.get(&block_key(part, column as u32, mo.g0, mo.g1))
        {
            return Some(crate::block::sizes_of(a.as_ref()).map(|s| Arc::new(s) as ArrayRef).map_err(Error::internal));
        }
        let read = || {
            let a = part.read_granule_sizes(column, mo.g0, mo.g1)?;
            part.release(column, mo.g0, mo.g1);
            Ok(a)
        };
        Some(read())
    }

    /// From the blocks when every block of the morsel's granules is sparse
    /// ([`Part::read_granules_sparse`]), through the decoded-block cache: the positions and
    /// values are kept there under the column's sparse key ([`SPARSE_KEY`]), apart from
    /// its whole decoded blocks (the non-zero values are fewer than a whole morsel's). A
    /// repeated `WHERE AdvEngineID <> 0` (ClickBench Q2) then neither decompresses nor
    /// parses a block.
    fn load_morsel_sparse(&self, column: usize, morsel: usize) -> Option<Result<(Vec<u32>, ArrayRef)>> {
        let mo = *self.morsels.get(morsel)?;
        let part = &self.parts[mo.part].1;
        if column >= self.table.schema().fields().len() {
            return None;
        }
        let key = block_key(part, column as u32 | SPARSE_KEY, mo.g0, mo.g1);
        if let Some(cached) = self.caches.blocks.as_ref().and_then(|cache| cache.get(&key)) {
            return Some(sparse_of(&cached));
        }
        // Only integer blocks are ever sparse (`block::write_block`): another column answers
        // `None` from its first block's header. The mapped pages stay (no `Part::release`):
        // a sparse block is a few KiB, and dropping them made each later read fault them in
        // again (with TLB shootdowns: 50% of ClickBench Q2's time at 10M rows).
        let read = part.read_granules_sparse(column, mo.g0, mo.g1).transpose()?;
        if let (Ok((rows, values)), Some(cache)) = (&read, self.caches.blocks.as_ref().filter(|c| c.takes()))
            && let Some(pair) = sparse_pair(rows, values)
        {
            self.admit(column, key, &pair, cache);
        }
        Some(read)
    }

    /// A hash of the ids of the snapshot's parts (a pruned snapshot has its table's).
    fn data_id(&self) -> Option<u64> {
        let uids: Vec<u8> = self.parts.iter().flat_map(|(_, p)| p.uid.to_le_bytes()).collect();
        Some(xxhash_rust::xxh3::xxh3_64(&uids))
    }

    fn record_condition(&self, condition: u128, morsel: usize, held: &BooleanBuffer) {
        let Some(cache) = &self.caches.conditions else { return };
        let Some((part, granules)) = self.granules_of(morsel) else { return };
        let granules: Vec<(usize, usize)> = granules.collect();
        if granules.iter().map(|&(_, len)| len).sum::<usize>() != held.len() {
            return;
        }
        let Some(bits) = cache.entry(part.uid, condition, part.granules) else { return };
        let mut at = 0;
        for (g, len) in granules {
            bits.record(g, held.slice(at, len).count_set_bits() > 0);
            at += len;
        }
    }

    /// Keeps granules whose min/max (and, for the leading sort-key column, the sparse
    /// primary index) admit every range; consecutive kept granules of one part form
    /// morsels of up to 8 granules, never crossing a multiple of 8.
    fn prune(&self, ranges: &[ColumnRange]) -> Option<PrunedSource> {
        let ranges: Vec<ColumnRange> =
            ranges.iter().filter(|r| r.column < self.table.schema().fields().len()).cloned().collect();
        if ranges.is_empty() {
            return None;
        }
        let mut morsels = Vec::new();
        let (mut kept, mut total) = (0, 0);
        for m in &self.morsels {
            let p = &self.parts[m.part].1;
            let mut run: Option<usize> = None;
            for g in m.g0..m.g1 {
                total += 1;
                if Self::may_match(p, g, &ranges) {
                    kept += 1;
                    run.get_or_insert(g);
                } else if let Some(s) = run.take() {
                    morsels.push(Morsel { part: m.part, g0: s, g1: g });
                }
            }
            if let Some(s) = run {
                morsels.push(Morsel { part: m.part, g0: s, g1: m.g1 });
            }
        }
        *self.table.last_prune.lock().expect("prune lock") = Some((kept, total));
        let snap = Snapshot::new(self.table.clone(), self.parts.clone(), morsels, &self.caches);
        Some(PrunedSource { chunk_lens: snap.chunk_lens(), source: Arc::new(snap) })
    }
}
