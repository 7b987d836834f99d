//! Partial (per-worker) aggregation state and the final merge of partials.
//!
//! A worker starts with one hash table (pre-aggregation: cheap when keys repeat). Once it
//! holds more than `group_by_two_level_threshold` groups the worker changes strategy:
//!
//! - **Scatter** (inputs without NULLs): the table is frozen and every further row is
//!   radix-partitioned by the top bits of its key hash into per-partition buffers of
//!   (key, hash, aggregate inputs). Writes are sequential, so the cost per row does not
//!   grow with the number of groups; the final phase aggregates each partition in a
//!   cache-sized table (Leis et al., SIGMOD 2014; DuckDB's radix-partitioned aggregation
//!   switches pre-aggregation off the same way when keys hardly repeat, PR 15321).
//! - **Two-level** (an aggregate input has NULLs): one hash table per radix partition.
//!
//! The final phase runs one task per partition: it aggregates that partition's scattered
//! rows of every worker, then merges the partition's groups of the frozen tables.
//!
//! **External GROUP BY**: a worker whose state passes its share of
//! `max_bytes_before_external_group_by` moves it to disk ([`Partial::spill_partitions`]:
//! per radix partition, a run of its groups, [`TABLE_RUN`], and a run of its scattered rows as
//! they are, [`ROWS_RUN`], in the worker's [`SpillFile`]) and starts again empty (late in its
//! input it writes only its largest partitions and goes on with the others). The final
//! task of a partition then also reads that partition's runs back, one at a time, and merges
//! them: memory holds about one partition per worker instead of all groups (ClickHouse's
//! external aggregation writes two-level buckets the same way and merges them bucket by
//! bucket).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, PrimitiveArray};
use arrow::datatypes::*;
use rayon::prelude::*;
use tessera_common::{Error, Result};

use crate::accum::Accumulator;
use crate::context::QueryContext;
use crate::hashtable::{GroupTable, Radix};
use crate::keys::{GroupKey, KeyArena};
use crate::scatter::{partition_counts, scatter_column};
use crate::spill::{Dec, Enc, Run, SpillFile, corrupt};
use tessera_kernels::Kernels;

/// Aggregate input values of scattered rows, in their native width (dates as Int32 days,
/// timestamps as Int64 seconds: the accumulators keep the logical type).
macro_rules! raw_vals {
    ($($variant:ident($native:ty, $arrow:ty) = $tag:literal),* $(,)?) => {
        #[derive(Debug)]
        pub(crate) enum RawVals {
            /// COUNT(*), or COUNT(col) of a string column without NULLs: no values.
            None,
            $($variant(Vec<$native>),)*
        }

        impl RawVals {
            fn empty_like(input: Option<&ArrayRef>, capacity: usize) -> RawVals {
                let Some(arr) = input else { return RawVals::None };
                match arr.data_type() {
                    $(t if t == &<$arrow>::DATA_TYPE => RawVals::$variant(Vec::with_capacity(capacity)),)*
                    DataType::Date32 => RawVals::I32(Vec::with_capacity(capacity)),
                    DataType::Timestamp(TimeUnit::Second, _) => RawVals::I64(Vec::with_capacity(capacity)),
                    _ => RawVals::None,
                }
            }

            /// Radix scatter of aggregate `a`'s input: the value of input row `rows[j]` (or
            /// `j`) goes to partition `pids[j]`, whose values vector gets room for
            /// `counts[p]` more first (see [`scatter_column`], also for `combine`). The vectors of aggregate `a`
            /// must have this input's type ([`RawVals::empty_like`] made them from it).
            fn scatter_from<K>(
                input: Option<&ArrayRef>,
                rows: Option<&[u32]>,
                pids: &[u16],
                counts: &[usize],
                parts: &mut [Scattered<K>],
                a: usize,
                combine: bool,
            ) -> Result<()> {
                let Some(arr) = input else { return Ok(()) };
                macro_rules! go {
                    ($v:ident, $t:ty) => {{
                        let src = arr.as_primitive::<$t>().values();
                        let mut vecs = Vec::with_capacity(parts.len());
                        for s in parts.iter_mut() {
                            match &mut s.vals[a] {
                                RawVals::$v(v) => vecs.push(v),
                                _ => return Err(Error::internal("scattered values of another type")),
                            }
                        }
                        // SAFETY: `counts` counts `pids` (the caller's contract), and
                        // `vecs` holds one vector per partition, in partition order.
                        unsafe { scatter_column(vecs, pids, counts, combine, |j| src[rows.map_or(j, |r| r[j] as usize)]) };
                    }};
                }
                match arr.data_type() {
                    $(t if t == &<$arrow>::DATA_TYPE => go!($variant, $arrow),)*
                    DataType::Date32 => go!(I32, Date32Type),
                    DataType::Timestamp(TimeUnit::Second, _) => go!(I64, TimestampSecondType),
                    DataType::Utf8 | DataType::Binary => {}
                    other => return Err(Error::internal(format!("scatter of aggregate input {other}"))),
                }
                Ok(())
            }

            /// Appends the values to a spill buffer: a tag byte for the type, then the values.
            fn encode(&self, e: &mut Enc<'_>) {
                match self {
                    RawVals::None => e.put(0u8),
                    $(RawVals::$variant(v) => {
                        e.put($tag as u8);
                        e.slice(v);
                    })*
                }
            }

            /// Reads values [`RawVals::encode`] wrote.
            fn decode(d: &mut Dec<'_>) -> Result<RawVals> {
                Ok(match d.get::<u8>()? {
                    0 => RawVals::None,
                    $($tag => RawVals::$variant(d.slice()?),)*
                    t => return Err(corrupt(format!("aggregate input type tag {t}"))),
                })
            }

            /// Number of values (`None` for `RawVals::None`, which holds none).
            fn len(&self) -> Option<usize> {
                match self {
                    RawVals::None => None,
                    $(RawVals::$variant(v) => Some(v.len()),)*
                }
            }

            /// Lowers the reserved capacity to at most `cap` values (keeps at least `len`).
            fn shrink_to(&mut self, cap: usize) {
                match self {
                    RawVals::None => {}
                    $(RawVals::$variant(v) => v.shrink_to(cap),)*
                }
            }

            /// Bytes a value takes (0 for none).
            fn width(&self) -> usize {
                match self {
                    RawVals::None => 0,
                    $(RawVals::$variant(_) => std::mem::size_of::<$native>(),)*
                }
            }

            /// Reserves room for at least `additional` more values, exactly (no doubling).
            fn reserve_exact(&mut self, additional: usize) {
                match self {
                    RawVals::None => {}
                    $(RawVals::$variant(v) => v.reserve_exact(additional),)*
                }
            }

            /// Bytes reserved for the values.
            fn memory_size(&self) -> usize {
                match self {
                    RawVals::None => 0,
                    $(RawVals::$variant(v) => v.capacity() * std::mem::size_of::<$native>(),)*
                }
            }

            /// Removes the values (capacity kept).
            fn clear(&mut self) {
                match self {
                    RawVals::None => {}
                    $(RawVals::$variant(v) => v.clear(),)*
                }
            }

            /// The values as an array; they are cleared. With `keep` the vector keeps its
            /// capacity (the array is a copy), else its buffer becomes the array's (no copy).
            fn drain_to_array(&mut self, keep: bool) -> Option<ArrayRef> {
                match self {
                    RawVals::None => None,
                    $(RawVals::$variant(v) => {
                        let a = if keep {
                            let a = PrimitiveArray::<$arrow>::from_iter_values(v.iter().copied());
                            v.clear();
                            a
                        } else {
                            PrimitiveArray::<$arrow>::new(std::mem::take(v).into(), None)
                        };
                        Some(Arc::new(a) as ArrayRef)
                    })*
                }
            }
        }
    };
}

raw_vals!(
    I8(i8, Int8Type) = 1,
    I16(i16, Int16Type) = 2,
    I32(i32, Int32Type) = 3,
    I64(i64, Int64Type) = 4,
    U8(u8, UInt8Type) = 5,
    U16(u16, UInt16Type) = 6,
    U32(u32, UInt32Type) = 7,
    U64(u64, UInt64Type) = 8,
    F32(f32, Float32Type) = 9,
    F64(f64, Float64Type) = 10,
);

/// Bytes a scattered row takes in the radix buffers with these aggregate inputs and keys
/// like `keys`: its key (inline part, and the mean heap bytes of `keys` for key types that
/// own some), its hash where the key type keeps it, its values in native width; at least 1.
pub(crate) fn scattered_row_bytes<K: GroupKey>(keys: &[K], inputs: &[Option<&ArrayRef>]) -> usize {
    let hash = if K::SCATTER_HASH { 8 } else { 0 };
    let heap = if std::mem::needs_drop::<K>() && !keys.is_empty() {
        keys.iter().map(|k| k.heap_bytes()).sum::<usize>() / keys.len()
    } else {
        0
    };
    let vals: usize = inputs.iter().map(|i| RawVals::empty_like(*i, 0).width()).sum();
    (std::mem::size_of::<K>() + heap + hash + vals).max(1)
}

/// Rows a radix partition's buffers reserve for `rows` rows spread over `partitions`:
/// the mean share, an eighth more for the spread of a partition's count, and 16.
fn buffer_rows_per_partition(rows: usize, partitions: usize) -> usize {
    let share = rows / partitions.max(1);
    share + share / 8 + 16
}

/// Radix-scatters rows into `parts`: key `keys[j]` (moved out; `keys` is left empty) and
/// hash `hashes[j]` go to partition `pids[j]`, with the aggregate inputs of input row
/// `rows[j]` (or `j`); through write-combining buffers where the kernel family says so
/// ([`Kernels::write_combining_scatter`]).
fn scatter_rows<K: GroupKey>(
    parts: &mut [Scattered<K>],
    keys: &mut Vec<K>,
    hashes: &[u64],
    pids: &[u16],
    inputs: &[Option<&ArrayRef>],
    rows: Option<&[u32]>,
    kern: &Kernels,
) -> Result<()> {
    if keys.len() != pids.len() || hashes.len() != pids.len() {
        return Err(Error::internal("scatter of rows with unequal keys, hashes and partitions"));
    }
    let counts = partition_counts(pids, parts.len());
    let combine = kern.write_combining_scatter();
    if std::mem::needs_drop::<K>() {
        for (k, &p) in keys.iter().zip(pids) {
            parts[p as usize].key_heap += k.heap_bytes();
        }
    }
    let mut moved = keys.drain(..);
    // SAFETY (both): `counts` counts `pids`; one vector per partition, in order.
    unsafe {
        scatter_column(parts.iter_mut().map(|s| &mut s.keys).collect(), pids, &counts, combine, |_| {
            moved.next().expect("as many keys as partition ids (checked above)")
        });
        if K::SCATTER_HASH {
            scatter_column(parts.iter_mut().map(|s| &mut s.hashes).collect(), pids, &counts, combine, |j| hashes[j]);
        }
    }
    drop(moved);
    for (a, input) in inputs.iter().enumerate() {
        RawVals::scatter_from(*input, rows, pids, &counts, parts, a, combine)?;
    }
    Ok(())
}

/// First byte of a spilled run: a partition's groups ([`GroupTable::encode`]) ...
pub(crate) const TABLE_RUN: u8 = 0;
/// ... or its scattered rows, not aggregated ([`Scattered`]).
pub(crate) const ROWS_RUN: u8 = 1;

/// Rows of one radix partition, not yet aggregated.
#[derive(Debug)]
pub(crate) struct Scattered<K> {
    keys: Vec<K>,
    /// Heap bytes owned by `keys` ([`GroupKey::heap_bytes`]).
    key_heap: usize,
    /// The keys' hashes, or none when the key type does not scatter them
    /// ([`GroupKey::SCATTER_HASH`]; [`Scattered::hashes`] computes them).
    hashes: Vec<u64>,
    vals: Vec<RawVals>,
}

impl<K> Scattered<K> {
    fn len(&self) -> usize {
        self.keys.len()
    }

    /// The rows' hashes: those scattered, or computed from the keys (the same function in
    /// every family) when the key type does not scatter them.
    fn hashes(&mut self, kern: &Kernels) -> Vec<u64>
    where
        K: GroupKey,
    {
        if self.hashes.len() == self.keys.len() {
            std::mem::take(&mut self.hashes)
        } else {
            let mut h = Vec::new();
            K::hash_batch(&self.keys, kern, &mut h);
            h
        }
    }

    /// Appends the rows to a spill buffer (a rows run, tag [`ROWS_RUN`]) and clears them,
    /// keeping the buffers' capacity.
    fn encode_and_clear(&mut self, out: &mut Vec<u8>)
    where
        K: GroupKey,
    {
        // Hashes the key type recomputes (fixed-width keys) are not written: 8 bytes a row
        // less to write and read, and the final phase hashes them with the family's kernel.
        let hashes = if K::SCATTER_HASH { self.hashes(Kernels::scalar()) } else { Vec::new() };
        let mut e = Enc(out);
        e.put(ROWS_RUN);
        e.put(self.keys.len() as u64);
        K::encode_all(&self.keys, &mut e);
        e.slice(&hashes);
        e.put(self.vals.len() as u64);
        for v in &mut self.vals {
            v.encode(&mut e);
            v.clear();
        }
        self.keys.clear();
        self.hashes.clear();
        self.key_heap = 0;
    }

    /// Rows a rows run holds; string key bytes are copied into `arena`.
    ///
    /// # Safety
    /// As [`GroupKey::decode`]: the rows must not be used after `arena` is dropped.
    unsafe fn decode(d: &mut Dec<'_>, arena: &mut KeyArena) -> Result<Self>
    where
        K: GroupKey,
    {
        let n = d.len(1)?;
        let mut keys = Vec::new();
        // SAFETY: the caller does not use the rows after `arena` is dropped.
        unsafe { K::decode_all(d, n, arena, &mut keys)? };
        let key_heap = if std::mem::needs_drop::<K>() { keys.iter().map(|k| k.heap_bytes()).sum() } else { 0 };
        let hashes: Vec<u64> = d.slice()?;
        let m = d.len(1)?;
        let vals = (0..m).map(|_| RawVals::decode(d)).collect::<Result<Vec<_>>>()?;
        let hashes_ok = hashes.len() == n || (hashes.is_empty() && !K::SCATTER_HASH);
        if !hashes_ok || vals.iter().any(|v| v.len().is_some_and(|l| l != n)) || !d.is_empty() {
            return Err(corrupt(format!("a rows run of {n} keys does not match its hashes and values")));
        }
        Ok(Scattered { keys, key_heap, hashes, vals })
    }

    /// Aggregates the rows into `t` (keys stored with `store`) and clears them; with `keep`
    /// the buffers keep their capacity for more rows, else the values' buffers are handed to
    /// the accumulators without a copy (the final phase, which drops the rows after).
    fn drain_into(
        &mut self,
        t: &mut GroupTable<K>,
        gids: &mut Vec<u32>,
        kern: &Kernels,
        store: impl FnMut(&K) -> K,
        keep: bool,
    ) -> Result<()>
    where
        K: GroupKey,
    {
        gids.clear();
        let hashes = self.hashes(kern);
        t.find_or_insert_batch(&self.keys, &hashes, kern, store, gids);
        t.sync_accs();
        for (acc, vals) in t.accs.iter_mut().zip(&mut self.vals) {
            acc.update(gids, vals.drain_to_array(keep).as_ref(), None)?;
        }
        self.keys.clear();
        self.hashes.clear();
        self.key_heap = 0;
        Ok(())
    }

    /// Lowers the buffers' reserved capacity to at most `cap` rows (keeps the rows held).
    fn shrink_to(&mut self, cap: usize) {
        self.keys.shrink_to(cap);
        self.hashes.shrink_to(cap);
        for v in &mut self.vals {
            v.shrink_to(cap);
        }
    }

    /// Sets the buffers' reserved capacity to `cap` rows, or the rows held if more: lowers
    /// it, or grows it exactly (no doubling).
    fn fit(&mut self, cap: usize)
    where
        K: GroupKey,
    {
        self.shrink_to(cap);
        let more = cap.saturating_sub(self.len());
        self.keys.reserve_exact(more);
        if K::SCATTER_HASH {
            self.hashes.reserve_exact(more);
        }
        for v in &mut self.vals {
            v.reserve_exact(more);
        }
    }

    /// Bytes the rows held take (their keys' inline part and heap, hashes and values), the
    /// capacity beyond them aside.
    fn used_bytes(&self) -> usize {
        self.keys.len() * std::mem::size_of::<K>()
            + self.key_heap
            + self.hashes.len() * 8
            + self.vals.iter().map(|v| v.len().unwrap_or(0) * v.width()).sum::<usize>()
    }

    /// Bytes reserved for keys (inline part and heap), hashes and values.
    fn memory_size(&self) -> usize {
        self.keys.capacity() * std::mem::size_of::<K>()
            + self.key_heap
            + self.hashes.capacity() * 8
            + self.vals.iter().map(|v| v.memory_size()).sum::<usize>()
    }
}

/// A worker's partial aggregate.
pub(crate) enum Partial<K> {
    /// One table (while small).
    Single(GroupTable<K>),
    /// One table per radix partition.
    Two(Vec<GroupTable<K>>),
    /// A frozen pre-aggregation table plus raw rows per radix partition. After the first
    /// [`Partial::flush`] or partial spill ([`Partial::spill_partitions`] with a selection),
    /// `flushed` holds one table per radix partition (the frozen table's groups and the
    /// flushed rows, or an empty table where the partition was written) and `frozen` is
    /// empty.
    /// While `probe`, a row whose key the frozen table holds updates it there and only the
    /// other rows are scattered (see [`Partial::add`]). While `copies`, scattered string
    /// keys are copies in the worker's key arena instead of borrowing their morsels (see
    /// [`Partial::copy_keys`]).
    Scatter { frozen: GroupTable<K>, parts: Vec<Scattered<K>>, flushed: Vec<GroupTable<K>>, probe: bool, copies: bool },
    /// One table whose groups are fixed in advance: rows of other keys are dropped
    /// (`GROUP BY .. LIMIT n` without ORDER BY aggregates the first `n` keys only, see
    /// `Settings::optimize_trivial_group_by_limit_query`).
    Fixed(GroupTable<K>),
}

impl<K: GroupKey> Partial<K> {
    /// Whether nothing was aggregated.
    pub(crate) fn is_empty(&self) -> bool {
        match self {
            Partial::Single(t) | Partial::Fixed(t) => t.len() == 0,
            Partial::Two(parts) => parts.iter().all(|t| t.len() == 0),
            Partial::Scatter { frozen, parts, flushed, .. } => {
                frozen.len() == 0 && parts.iter().all(|p| p.len() == 0) && flushed.iter().all(|t| t.len() == 0)
            }
        }
    }

    /// Groups held, or an upper bound (scattered rows count as groups).
    pub(crate) fn size(&self) -> usize {
        match self {
            Partial::Single(t) | Partial::Fixed(t) => t.len(),
            Partial::Two(parts) => parts.iter().map(|t| t.len()).sum(),
            Partial::Scatter { frozen, parts, flushed, .. } => {
                frozen.len() + parts.iter().map(|p| p.len()).sum::<usize>() + flushed.iter().map(|t| t.len()).sum::<usize>()
            }
        }
    }

    /// Bytes held: hash tables, plus reserved radix-partition buffers when scattering.
    pub(crate) fn memory_size(&self) -> usize {
        match self {
            Partial::Single(t) | Partial::Fixed(t) => t.memory_size(),
            Partial::Two(parts) => parts.iter().map(|t| t.memory_size()).sum(),
            Partial::Scatter { frozen, parts, flushed, .. } => {
                frozen.memory_size()
                    + parts.iter().map(|p| p.memory_size()).sum::<usize>()
                    + flushed.iter().map(|t| t.memory_size()).sum::<usize>()
            }
        }
    }

    /// What [`Partial::memory_size`] is spent on, for memory-limit errors.
    pub(crate) fn operator(&self) -> &'static str {
        match self {
            Partial::Scatter { .. } => "GROUP BY radix-partition buffers",
            _ => "GROUP BY hash table",
        }
    }

    /// Leaves the single-table state for the query's partitioning `radix`: scatter when
    /// `scatter` (no NULL inputs), else split into a two-level table.
    /// `expect_rows` is the number of rows this worker will probably still add: buffers are
    /// reserved for it up front, so they never grow by copying (untouched capacity costs
    /// address space only).
    pub(crate) fn grow_up(
        &mut self,
        radix: Radix,
        scatter: bool,
        expect_rows: usize,
        inputs: &[Option<&ArrayRef>],
        new_accs: &impl Fn() -> Vec<Accumulator>,
    ) {
        let Partial::Single(_) = self else { return };
        let Partial::Single(t) = std::mem::replace(self, Partial::Two(Vec::new())) else { unreachable!() };
        *self = if scatter {
            let per_part = buffer_rows_per_partition(expect_rows, radix.partitions());
            let parts = (0..radix.partitions())
                .map(|_| Scattered {
                    keys: Vec::with_capacity(per_part),
                    key_heap: 0,
                    hashes: Vec::with_capacity(if K::SCATTER_HASH { per_part } else { 0 }),
                    vals: inputs.iter().map(|i| RawVals::empty_like(*i, per_part)).collect(),
                })
                .collect();
            Partial::Scatter { frozen: t, parts, flushed: Vec::new(), probe: true, copies: false }
        } else {
            Partial::Two(t.split(radix, new_accs))
        };
    }

    /// The partial as the final phase takes it: a [`Partial::Fixed`] table is a single one.
    pub(crate) fn unfix(self) -> Self {
        match self {
            Partial::Fixed(t) => Partial::Single(t),
            p => p,
        }
    }

    /// Whether raw rows are scattered (their keys borrow the morsels they came from, unless
    /// [`Partial::copies_keys`]).
    pub(crate) fn is_scatter(&self) -> bool {
        matches!(self, Partial::Scatter { .. })
    }

    /// The radix partitioning of a two-level or scattering state (from its partition
    /// count); `None` for a single table.
    fn radix(&self) -> Option<Radix> {
        match self {
            Partial::Two(parts) => Some(Radix::with_partitions(parts.len())),
            Partial::Scatter { parts, .. } => Some(Radix::with_partitions(parts.len())),
            Partial::Single(_) | Partial::Fixed(_) => None,
        }
    }

    /// Rows the radix buffers reserve in all for `rows` more rows
    /// ([`buffer_rows_per_partition`] for each partition; 0 unless scattering).
    pub(crate) fn buffer_rows(&self, rows: usize) -> usize {
        let Partial::Scatter { parts, .. } = self else { return 0 };
        buffer_rows_per_partition(rows, parts.len()) * parts.len()
    }

    /// Whether scattered rows' keys are copies in the worker's arena (see
    /// [`Partial::copy_keys`]): their morsels need not be kept.
    pub(crate) fn copies_keys(&self) -> bool {
        matches!(self, Partial::Scatter { copies: true, .. })
    }

    /// Copies the borrowed bytes of the scattered rows' keys into `arena`, and from now on
    /// those of every row scattered (through spills too), until the next [`Partial::flush`]
    /// or [`Partial::borrow_keys`]: the rows then stay raw until the final phase instead of
    /// being aggregated into per-partition tables whenever their morsels pass the retention
    /// limit. Each row is then probed once, in a final table built one partition at a time,
    /// instead of once in a worker's flush table (which holds all the worker's groups: far
    /// past the caches at 100M rows) and its group once more in the final merge; it costs
    /// memory by rows, not by groups, so the caller asks for it only when the rows to come
    /// fit its budget (`aggregate::CopyChoice`). Does nothing unless scattering keys that
    /// borrow.
    ///
    /// # Safety
    /// `arena` outlives every key of this partial that points into it: the worker's arena,
    /// which `aggregate::run` keeps until the final tables are dropped, or replaces only
    /// after a spill wrote every table and row.
    pub(crate) unsafe fn copy_keys(&mut self, arena: &mut KeyArena) {
        let Partial::Scatter { parts, copies, .. } = self else { return };
        if !K::BORROWS || *copies {
            return;
        }
        for r in parts.iter_mut() {
            // SAFETY: the caller's contract.
            unsafe { copy_all(&mut r.keys, arena) };
        }
        *copies = true;
    }

    /// Whether scattered rows stay raw until the final phase (or a spill): their keys borrow
    /// no morsel (fixed-width keys, or copies, [`Partial::copy_keys`]), so nothing makes the
    /// worker flush them.
    pub(crate) fn rows_stay_raw(&self) -> bool {
        !K::BORROWS || self.copies_keys()
    }

    /// Rows scattered from now on borrow their morsels' bytes again (after a spill that
    /// wrote them all: the estimate that chose [`Partial::copy_keys`] did not hold). Keys
    /// already copied stay valid.
    pub(crate) fn borrow_keys(&mut self) {
        if let Partial::Scatter { copies, .. } = self {
            *copies = false;
        }
    }

    /// Aggregates the scattered rows into per-partition tables (while `flushed` is empty,
    /// the frozen table is split into them first), a partition at a time so each table is
    /// cache-sized while its rows go in, and copies their new keys into `arena` (unless
    /// they are copies there already, [`Partial::copy_keys`]): afterwards no key of this
    /// partial points into a morsel, and the keys of rows scattered next borrow their
    /// morsels again. Returns the rows aggregated and the new groups they made (0 and 0
    /// unless scattering).
    /// Pre-aggregation on flush bounds a string GROUP BY's memory by its groups instead of
    /// its rows (DuckDB's radix-partitioned aggregation also aggregates partitioned data
    /// before it grows unbounded).
    pub(crate) fn flush(
        &mut self,
        arena: &mut KeyArena,
        new_accs: &impl Fn() -> Vec<Accumulator>,
        gids: &mut Vec<u32>,
        kern: &Kernels,
    ) -> Result<(usize, usize)> {
        let Partial::Scatter { frozen, parts, flushed, copies, .. } = self else { return Ok((0, 0)) };
        if flushed.is_empty() {
            *flushed = std::mem::replace(frozen, GroupTable::new(new_accs(), 0)).split(Radix::with_partitions(parts.len()), new_accs);
        }
        let copied = std::mem::take(copies);
        let (mut rows, mut groups) = (0, 0);
        for (t, r) in flushed.iter_mut().zip(parts.iter_mut()) {
            rows += r.len();
            let before = t.len();
            // SAFETY: the worker's arena outlives its tables (`aggregate::run`); copied keys
            // point into it already.
            r.drain_into(t, gids, kern, |k| if copied { k.clone() } else { unsafe { k.persist(arena) } }, true)?;
            groups += t.len() - before;
        }
        Ok((rows, groups))
    }

    /// Per radix partition, the bytes writing it to disk frees (its table and its scattered
    /// rows, as reserved) and the bytes it holds on to if kept; `None` for a single table or
    /// fixed groups. The two differ for scattered rows that stay raw until the final phase
    /// ([`Partial::rows_stay_raw`]): kept, they hold the rows' bytes, the capacity beyond
    /// them being reset after the spill ([`Partial::fit_buffers`]). Rows of borrowed keys
    /// are flushed before a spill, and their buffers' capacity counts as it is (the spill
    /// then caps it, [`Partial::shrink_buffers`]). A frozen table (before the first flush or
    /// partial spill) counts as an even share.
    pub(crate) fn partition_bytes(&self) -> Option<Vec<(usize, usize)>> {
        match self {
            Partial::Single(_) | Partial::Fixed(_) => None,
            Partial::Two(parts) => Some(parts.iter().map(|t| (t.memory_size(), t.memory_size())).collect()),
            Partial::Scatter { frozen, parts, flushed, .. } => {
                let share = frozen.memory_size() / parts.len().max(1);
                let table = |p: usize| flushed.get(p).map_or(share, |t| t.memory_size());
                let raw = self.rows_stay_raw();
                let bytes = parts.iter().enumerate().map(|(p, r)| {
                    let frees = table(p) + r.memory_size();
                    (frees, if raw { table(p) + r.used_bytes() } else { frees })
                });
                Some(bytes.collect())
            }
        }
    }

    /// Hands the state to `write` as runs, a radix partition at a time (its number, the
    /// run's bytes and how many groups or rows they hold: the partition's groups,
    /// [`TABLE_RUN`], and its scattered rows as they are, [`ROWS_RUN`]: the scatter path
    /// does not aggregate before the final phase, on disk either), and leaves those
    /// partitions empty, the radix buffers' capacity kept: what a worker writes to disk when
    /// it spills. `select[p]` says which partitions go (`None`: all; a single table is
    /// split by the query's `radix` and written whole). Keys are not copied: `write` runs
    /// while the morsels scattered keys borrow are alive.
    pub(crate) fn spill_partitions(
        &mut self,
        radix: Radix,
        new_accs: &impl Fn() -> Vec<Accumulator>,
        select: Option<&[bool]>,
        mut write: impl FnMut(usize, &[u8], usize) -> Result<()>,
    ) -> Result<()> {
        let empty = || GroupTable::new(new_accs(), 0);
        let goes = |p: usize| select.is_none_or(|s| s[p]);
        let mut buf = Vec::new();
        let mut table = |p: usize, t: &GroupTable<K>, rows: Option<&mut Scattered<K>>| -> Result<()> {
            if t.len() > 0 {
                buf.clear();
                buf.push(TABLE_RUN);
                t.encode(&mut buf);
                write(p, &buf, t.len())?;
            }
            if let Some(rows) = rows.filter(|r| r.len() > 0) {
                let n = rows.len();
                buf.clear();
                rows.encode_and_clear(&mut buf);
                write(p, &buf, n)?;
            }
            Ok(())
        };
        match self {
            // Its key set would be lost; `aggregate::run` never spills one (it is small).
            Partial::Fixed(_) => return Err(Error::internal("a GROUP BY table of fixed groups spilled")),
            Partial::Single(t) => {
                for (p, t) in std::mem::replace(t, empty()).split(radix, new_accs).iter().enumerate() {
                    table(p, t, None)?;
                }
            }
            Partial::Two(parts) => {
                for (p, t) in parts.iter_mut().enumerate().filter(|(p, _)| goes(*p)) {
                    table(p, &std::mem::replace(t, empty()), None)?;
                }
            }
            Partial::Scatter { frozen, parts, flushed, .. } => {
                // The frozen table is small (at most the two-level threshold's groups).
                let tables = if flushed.is_empty() {
                    std::mem::replace(frozen, empty()).split(Radix::with_partitions(parts.len()), new_accs)
                } else {
                    std::mem::take(flushed)
                };
                let mut kept = Vec::with_capacity(if select.is_some() { parts.len() } else { 0 });
                for (p, (t, rows)) in tables.into_iter().zip(parts.iter_mut()).enumerate() {
                    if goes(p) {
                        table(p, &t, Some(rows))?;
                        if select.is_some() {
                            kept.push(empty());
                        }
                    } else {
                        kept.push(t);
                    }
                }
                // The partitions kept go on as flushed tables (the frozen one is split).
                *flushed = kept;
            }
        }
        Ok(())
    }

    /// Caps the reserved capacity of the radix buffers at about `rows` rows in all: their
    /// vectors double as rows come in, and a spilling worker's emptied buffers must not hold
    /// its budget by themselves. Does nothing unless scattering.
    pub(crate) fn shrink_buffers(&mut self, rows: usize) {
        let Partial::Scatter { parts, .. } = self else { return };
        let per_part = rows / parts.len().max(1) + 16;
        for p in parts {
            p.shrink_to(per_part);
        }
    }

    /// Gives each radix buffer room for its share of `rows` more rows
    /// ([`buffer_rows_per_partition`]) beside the rows it holds, exactly: after a
    /// partial spill of rows that are not aggregated before the final phase, the kept
    /// partitions neither hold the capacity their doublings left nor double again, and the
    /// written ones do not regrow by doubling, so the state grows as the rows come in and
    /// the estimate that chose what to write holds (without it Q33 under 1 GiB wrote as much
    /// over twice the spills). Does nothing unless scattering.
    pub(crate) fn fit_buffers(&mut self, rows: usize) {
        let Partial::Scatter { parts, .. } = self else { return };
        let per_part = buffer_rows_per_partition(rows, parts.len());
        for p in parts {
            p.fit(p.len() + per_part);
        }
    }

    /// Adds the selected rows of a morsel (`sel`, or all `rows`) to the one group of a
    /// key-less aggregation (`key` the unit key, `hash` its hash): no key per row and no
    /// probe; each aggregate takes the kernels of [`Accumulator::update_one`] where it can,
    /// else [`Accumulator::update`]. Returns `false`, adding nothing, unless this is a
    /// single-level table (the forced two-level path keeps the general route).
    #[allow(clippy::too_many_arguments)] // reason: `add`'s inputs plus the unit key and the kernels
    pub(crate) fn add_unit(
        &mut self,
        key: &K,
        hash: u64,
        inputs: &[Option<&ArrayRef>],
        sel: Option<&[u32]>,
        rows: usize,
        kern: &Kernels,
        scratch: &mut Scratch,
    ) -> Result<bool> {
        let Partial::Single(t) = self else { return Ok(false) };
        let arena = &mut scratch.arena;
        // SAFETY: the worker's arena outlives its tables (`aggregate::run`).
        let g = t.find_or_insert_with(key, hash, |k| unsafe { k.persist(arena) });
        t.sync_accs();
        for (acc, input) in t.accs.iter_mut().zip(inputs) {
            if !acc.update_one(g as usize, *input, sel, rows, kern) {
                scratch.gids.clear();
                scratch.gids.resize(rows, g);
                acc.update(&scratch.gids, *input, sel)?;
            }
        }
        Ok(true)
    }

    /// Adds the selected rows of a morsel: `keys[i]`/`hashes[i]` belong to input row
    /// `sel[i]` (or `i`). `scratch` holds reusable buffers; `kern` probes the tables.
    pub(crate) fn add(
        &mut self,
        keys: &mut Vec<K>,
        hashes: &[u64],
        inputs: &[Option<&ArrayRef>],
        sel: Option<&[u32]>,
        scratch: &mut Scratch,
        kern: &Kernels,
    ) -> Result<()> {
        match self {
            Partial::Single(t) => {
                scratch.gids.clear();
                let arena = &mut scratch.arena;
                // SAFETY: the worker's arena outlives its tables (`aggregate::run`).
                t.find_or_insert_batch(keys, hashes, kern, |k| unsafe { k.persist(arena) }, &mut scratch.gids);
                t.sync_accs();
                for (acc, input) in t.accs.iter_mut().zip(inputs) {
                    acc.update(&scratch.gids, *input, sel)?;
                }
            }
            Partial::Two(parts) => {
                scratch.buckets.resize_with(parts.len(), Vec::new);
                for b in &mut scratch.buckets {
                    b.clear();
                }
                let radix = Radix::with_partitions(parts.len());
                for (i, &h) in hashes.iter().enumerate() {
                    scratch.buckets[radix.of(h)].push(i as u32);
                }
                for (t, bucket) in parts.iter_mut().zip(&scratch.buckets) {
                    if bucket.is_empty() {
                        continue;
                    }
                    scratch.gids.clear();
                    scratch.rows.clear();
                    for &i in bucket {
                        let i = i as usize;
                        // SAFETY: the worker's arena outlives its tables (`aggregate::run`).
                        let arena = &mut scratch.arena;
                        scratch.gids.push(t.find_or_insert_with(&keys[i], hashes[i], |k| unsafe { k.persist(arena) }));
                        scratch.rows.push(sel.map_or(i as u32, |s| s[i]));
                    }
                    t.sync_accs();
                    for (acc, input) in t.accs.iter_mut().zip(inputs) {
                        acc.update(&scratch.gids, *input, Some(&scratch.rows))?;
                    }
                }
            }
            Partial::Scatter { frozen, parts, probe, copies, .. } if *probe && frozen.len() > 0 => {
                // Pre-aggregation against the frozen table (at most the two-level
                // threshold's groups: cache-sized): rows of keys it holds update it, the
                // rest are scattered. Keys that repeat (Q6's empty SearchPhrase: ~80% of the
                // rows) then cost no radix buffer, no retained morsel and no final-phase
                // work. A worker stops probing once fewer than half of a morsel's rows
                // hit (near-unique keys: Q33's WatchID), as DuckDB turns pre-aggregation off.
                let hits = update_held(frozen, keys, hashes, inputs, sel, scratch, kern)?;
                let n = keys.len();
                scratch.pids.clear();
                scratch.misses.clear();
                scratch.miss_hashes.clear();
                // The misses stay in `keys` (compacted in place) for the scatter.
                let mut kept = 0;
                let radix = Radix::with_partitions(parts.len());
                for (i, &g) in scratch.found.iter().enumerate() {
                    if g == u32::MAX {
                        scratch.pids.push(radix.of(hashes[i]) as u16);
                        scratch.misses.push(sel.map_or(i as u32, |s| s[i]));
                        scratch.miss_hashes.push(hashes[i]);
                        keys.swap(kept, i);
                        kept += 1;
                    }
                }
                keys.truncate(kept);
                if hits * 2 < n {
                    *probe = false;
                }
                if *copies {
                    // SAFETY: the worker's arena outlives its radix buffers (`aggregate::run`).
                    unsafe { copy_all(keys, &mut scratch.arena) };
                }
                scatter_rows(parts, keys, &scratch.miss_hashes, &scratch.pids, inputs, Some(&scratch.misses), kern)?;
            }
            Partial::Fixed(t) => {
                // Rows of other keys are dropped.
                update_fixed(t, keys, hashes, inputs, sel, scratch, kern)?;
            }
            Partial::Scatter { parts, copies, .. } => {
                if *copies {
                    // SAFETY: the worker's arena outlives its radix buffers (`aggregate::run`).
                    unsafe { copy_all(keys, &mut scratch.arena) };
                }
                scratch.pids.clear();
                scratch.pids.resize(hashes.len(), 0);
                (kern.partition_ids)(hashes, Radix::with_partitions(parts.len()).bits(), &mut scratch.pids);
                scatter_rows(parts, keys, hashes, &scratch.pids, inputs, sel, kern)?;
            }
        }
        Ok(())
    }
}

/// Replaces each key by its copy in `arena` ([`GroupKey::persist`]): the keys a partial
/// that copies its keys scatters ([`Partial::copy_keys`]).
///
/// # Safety
/// As [`GroupKey::persist`]: the keys are not used after `arena` is dropped.
unsafe fn copy_all<K: GroupKey>(keys: &mut [K], arena: &mut KeyArena) {
    for k in keys {
        // SAFETY: the caller's contract.
        *k = unsafe { k.persist(arena) };
    }
}

/// Rows of a morsel whose key `t` holds (`keys[i]`/`hashes[i]` of input row `sel[i]` or
/// `i`) update their groups there; the others are left alone. Returns how many rows hit, and
/// leaves in `scratch.found` each row's group id, or `u32::MAX` where `t` lacks the key.
/// Used by a frozen pre-aggregation table ([`Partial::Scatter`], inlined: Q6 measured 18%
/// slower through a call) and a [`Partial::Fixed`] one ([`update_fixed`]).
#[inline(always)]
fn update_held<K: GroupKey>(
    t: &mut GroupTable<K>,
    keys: &[K],
    hashes: &[u64],
    inputs: &[Option<&ArrayRef>],
    sel: Option<&[u32]>,
    scratch: &mut Scratch,
    kern: &Kernels,
) -> Result<usize> {
    scratch.found.clear();
    scratch.gids.clear();
    scratch.rows.clear();
    let found = &mut scratch.found;
    t.find_batch(keys, hashes, kern, |_, g| found.push(g.unwrap_or(u32::MAX)));
    for (i, &g) in scratch.found.iter().enumerate() {
        if g != u32::MAX {
            scratch.gids.push(g);
            scratch.rows.push(sel.map_or(i as u32, |s| s[i]));
        }
    }
    if !scratch.gids.is_empty() {
        for (acc, input) in t.accs.iter_mut().zip(inputs) {
            acc.update(&scratch.gids, *input, Some(&scratch.rows))?;
        }
    }
    Ok(scratch.gids.len())
}

/// [`update_held`] for a [`Partial::Fixed`] table, out of line: [`Partial::add`]'s other
/// paths measured 3% slower on Q29 with a second inlined copy inside.
#[inline(never)]
fn update_fixed<K: GroupKey>(
    t: &mut GroupTable<K>,
    keys: &[K],
    hashes: &[u64],
    inputs: &[Option<&ArrayRef>],
    sel: Option<&[u32]>,
    scratch: &mut Scratch,
    kern: &Kernels,
) -> Result<usize> {
    update_held(t, keys, hashes, inputs, sel, scratch, kern)
}

/// Reusable per-worker buffers, and the worker's key arena.
#[derive(Default)]
pub(crate) struct Scratch {
    /// Copies of the string keys this worker's tables and radix buffers hold; must outlive
    /// them and every table they are merged into.
    pub(crate) arena: KeyArena,
    gids: Vec<u32>,
    /// Radix partition of each selected row (scatter).
    pids: Vec<u16>,
    rows: Vec<u32>,
    /// Input rows of the scattered rows when some rows hit the frozen table.
    misses: Vec<u32>,
    /// Group id in the frozen table of each row, or `u32::MAX`.
    found: Vec<u32>,
    /// Hashes of the rows the frozen table does not hold.
    miss_hashes: Vec<u64>,
    buckets: Vec<Vec<u32>>,
}

impl Scratch {
    pub(crate) fn new() -> Self {
        Scratch::default()
    }
}

/// The runs the workers of one query spilled: their files, and per radix partition where
/// its runs are.
#[derive(Debug, Default)]
pub(crate) struct Spilled {
    files: Vec<SpillFile>,
    runs: Vec<Vec<SpilledRun>>,
}

/// One spilled run of a partition: its file (an index into [`Spilled`]'s), where it lies,
/// and the groups or rows it holds.
#[derive(Debug, Clone, Copy)]
struct SpilledRun {
    file: usize,
    run: Run,
    items: usize,
}

impl Spilled {
    /// Adds a worker's file and its runs per partition (`runs[p]`: each run and the
    /// groups or rows it holds).
    pub(crate) fn add(&mut self, file: SpillFile, runs: Vec<Vec<(Run, usize)>>) {
        let f = self.files.len();
        self.files.push(file);
        self.runs.resize_with(self.runs.len().max(runs.len()), Vec::new);
        for (p, rs) in runs.into_iter().enumerate() {
            self.runs[p].extend(rs.into_iter().map(|(run, items)| SpilledRun { file: f, run, items }));
        }
    }

    /// Whether anything was spilled.
    pub(crate) fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Runs written, in all.
    pub(crate) fn run_count(&self) -> usize {
        self.runs.iter().map(|r| r.len()).sum()
    }

    /// Bytes written to the files (compressed).
    pub(crate) fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.len()).sum()
    }
}

/// What one partition's final task consumes.
struct PartitionInput<K> {
    tables: Vec<GroupTable<K>>,
    rows: Vec<Scattered<K>>,
    runs: Vec<SpilledRun>,
}

/// Final phase over the query's radix partitions (`radix`, which every partial and spilled
/// run was made with): builds each non-empty partition's final table (from the partials'
/// pieces and the spilled runs) and hands it to `finish`, whose results are returned, so
/// that only the partitions in flight are in memory. Runs on the current rayon pool.
/// Memory is accounted in `query`: each partition's final table is added when built and
/// released after `finish`, the partition's inputs released once merged; cancellation is
/// checked per partition and per run.
pub(crate) fn finalize_partitioned<K: GroupKey, R: Send>(
    radix: Radix,
    partials: Vec<Partial<K>>,
    spilled: &Spilled,
    new_accs: &(impl Fn() -> Vec<Accumulator> + Sync),
    kern: &Kernels,
    query: &QueryContext,
    finish: &(impl Fn(GroupTable<K>) -> Result<R> + Sync),
) -> Result<Vec<R>> {
    // Partition p of one worker must meet partition p of the others.
    if partials.iter().filter_map(Partial::radix).any(|r| r != radix) || spilled.runs.len() > radix.partitions() {
        return Err(Error::internal("GROUP BY partials with different radix partitions"));
    }
    let prepared: Vec<(Vec<GroupTable<K>>, Option<Vec<Scattered<K>>>)> = partials
        .into_par_iter()
        .map(|p| match p {
            Partial::Single(t) | Partial::Fixed(t) => (t.split(radix, new_accs), None),
            Partial::Two(parts) => (parts, None),
            Partial::Scatter { frozen, parts, flushed, .. } if !flushed.is_empty() => {
                debug_assert_eq!(frozen.len(), 0);
                (flushed, Some(parts))
            }
            Partial::Scatter { frozen, parts, .. } => (frozen.split(radix, new_accs), Some(parts)),
        })
        .collect();
    let mut inputs: Vec<PartitionInput<K>> = (0..radix.partitions())
        .map(|p| PartitionInput {
            tables: Vec::new(),
            rows: Vec::new(),
            runs: spilled.runs.get(p).cloned().unwrap_or_default(),
        })
        .collect();
    for (tables, rows) in prepared {
        for (p, t) in tables.into_iter().enumerate() {
            if t.len() > 0 {
                inputs[p].tables.push(t);
            }
        }
        for (p, r) in rows.into_iter().flatten().enumerate() {
            if r.len() > 0 {
                inputs[p].rows.push(r);
            }
        }
    }
    // The per-partition pieces replace the workers' tables: account them at their own size
    // (splitting gives each piece its own slot array, so the pieces can add up to more than
    // the tables they came from), so that releasing them below never under-counts.
    let split_bytes: usize = inputs
        .iter()
        .map(|i| {
            i.tables.iter().map(|t| t.memory_size()).sum::<usize>() + i.rows.iter().map(|r| r.memory_size()).sum::<usize>()
        })
        .sum();
    let mut accounted = query.memory_usage();
    query.resize(&mut accounted, split_bytes, "GROUP BY radix partitions")?;
    inputs
        .into_par_iter()
        .filter(|i| !i.tables.is_empty() || !i.rows.is_empty() || !i.runs.is_empty())
        .map(|mut input| -> Result<R> {
            query.check_cancelled()?;
            // Keys read back from runs are copied here; dropped after the final table.
            let mut arena = KeyArena::default();
            let input_bytes = input.tables.iter().map(|t| t.memory_size()).sum::<usize>()
                + input.rows.iter().map(|r| r.memory_size()).sum::<usize>();
            // Groups and rows of the pieces in memory.
            let input_items = input.tables.iter().map(|t| t.len()).sum::<usize>() + input.rows.iter().map(|r| r.len()).sum::<usize>();
            let mut f = if input.rows.is_empty() && !input.tables.is_empty() {
                // Merge into the largest partial: fewest inserts.
                let big = (0..input.tables.len()).max_by_key(|&i| input.tables[i].len()).unwrap_or(0);
                input.tables.swap_remove(big)
            } else {
                // Room for every row and every group of the pieces (an upper bound on the
                // groups): the keys, hashes and states never grow by copying.
                GroupTable::new(new_accs(), input_items)
            };
            let mut gids = Vec::new();
            for mut r in input.rows {
                // Keys that borrow a morsel stay valid: the aggregation keeps the morsels
                // of unflushed rows until the final tables are dropped. (Copying new groups'
                // string keys into the arena for locality measured slower on Q34: its URLs
                // hardly repeat, so the copies cost more than the later hits gain.)
                r.drain_into(&mut f, &mut gids, kern, K::clone, false)?;
            }
            for t in &input.tables {
                f.merge_from(t, kern);
            }
            query.grow(f.memory_size(), "GROUP BY merge of radix partitions")?;
            query.shrink(input_bytes);
            // The arena is still empty here: only keys read back from runs go into it.
            let mut accounted = f.memory_size();
            // Groups or rows merged so far, and in the runs still to come.
            let mut seen = input_items;
            let mut ahead: usize = input.runs.iter().map(|r| r.items).sum();
            for &SpilledRun { file, run, items } in &input.runs {
                query.check_cancelled()?;
                // Room for the groups the runs ahead will add, at the rate of new groups per
                // item merged so far: rows all distinct (Q33) take one reservation instead of
                // a slot rebuild and copies at every doubling; repeated keys reserve little.
                // Nothing merged yet (no partition in memory): the first run grows the table
                // as it goes, since its rows may repeat keys.
                let expect = (ahead as u128 * f.len() as u128 / seen.max(1) as u128) as usize + f.len();
                if expect > f.capacity() {
                    f.reserve(expect - f.len());
                    query.resize(&mut accounted, f.memory_size() + arena.memory_size(), "GROUP BY merge of spilled partitions")?;
                }
                seen += items;
                ahead -= items;
                let bytes = spilled.files[file].read(run)?;
                query.grow(bytes.len(), "GROUP BY merge of spilled partitions")?;
                let merged = match bytes.split_first() {
                    // SAFETY: `f` holds the keys, and is dropped before `arena`: `finish`
                    // below consumes it, in this closure.
                    Some((&TABLE_RUN, run)) => unsafe { f.merge_encoded(run, new_accs(), &mut arena, kern) },
                    Some((&ROWS_RUN, run)) => {
                        // SAFETY: as above; the rows are aggregated into `f` at once.
                        match unsafe { Scattered::decode(&mut Dec::new(run), &mut arena) } {
                            Ok(mut rows) => rows.drain_into(&mut f, &mut gids, kern, K::clone, false),
                            Err(e) => Err(e),
                        }
                    }
                    _ => Err(corrupt("a run of unknown kind".into())),
                };
                query.shrink(bytes.len());
                merged?;
                query.resize(&mut accounted, f.memory_size() + arena.memory_size(), "GROUP BY merge of spilled partitions")?;
            }
            let out = finish(f);
            query.shrink(accounted);
            out
        })
        .collect()
}

/// Whether scattered rows can carry the aggregate inputs: none may hold NULLs
/// (`may_have_nulls[i]` for each input column).
pub(crate) fn scatter_ok(may_have_nulls: &[bool]) -> bool {
    !may_have_nulls.iter().any(|&n| n)
}
