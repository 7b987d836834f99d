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
//! The final phase ([`finalize`]) runs one task per partition: it aggregates that
//! partition's scattered rows of every worker, then merges the partition's groups of the
//! frozen tables. The rows themselves, their scatter and their spill encoding are in
//! [`scattered`].
//!
//! **External GROUP BY**: a worker whose state passes its share of
//! `max_bytes_before_external_group_by` moves it to disk ([`Partial::spill_partitions`]:
//! per radix partition, a run of its groups, [`TABLE_RUN`], and a run of its scattered rows as
//! they are, [`ROWS_RUN`], in the worker's [`SpillFile`](crate::spill::SpillFile)) and
//! starts again empty (late in its input it writes only its largest partitions and goes on
//! with the others). The final task of a partition then also reads that partition's runs
//! back, one at a time, and merges them: memory holds about one partition per worker
//! instead of all groups (ClickHouse's external aggregation writes two-level buckets the
//! same way and merges them bucket by bucket).

use arrow::array::ArrayRef;
use tessera_common::{Error, Result};

use crate::accum::Accumulator;
use crate::hashtable::{GroupTable, Radix};
use crate::keys::{GroupKey, KeyArena};
use tessera_kernels::Kernels;

mod finalize;
mod scattered;

pub(crate) use finalize::{Spilled, finalize_partitioned};
use scattered::{Scattered, buffer_rows_per_partition, scatter_rows};
pub(crate) use scattered::scattered_row_bytes;

/// First byte of a spilled run: a partition's groups ([`GroupTable::encode`]) ...
pub(crate) const TABLE_RUN: u8 = 0;
/// ... or its scattered rows, not aggregated ([`Scattered`]).
pub(crate) const ROWS_RUN: u8 = 1;

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
            let parts = (0..radix.partitions()).map(|_| Scattered::with_capacity(inputs, per_part)).collect();
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

/// Whether scattered rows can carry the aggregate inputs: none may hold NULLs
/// (`may_have_nulls[i]` for each input column).
pub(crate) fn scatter_ok(may_have_nulls: &[bool]) -> bool {
    !may_have_nulls.iter().any(|&n| n)
}
