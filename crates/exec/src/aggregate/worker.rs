//! A worker's partial aggregation state ([`Worker`]): its table, radix buffers and key
//! arena, the morsels its scattered rows borrow, and its choices between flushing those
//! rows, copying their keys and spilling to disk.

use arrow::array::ArrayRef;
use tessera_common::{Result, Settings, TemporaryFilesCodec};

use super::{Ctx, extract_unit};
use crate::accum::Accumulator;
use crate::hashtable::Radix;
use crate::keys::{GroupKey, KeyArena};
use crate::partial::{Partial, Scratch};
use crate::spill::{Run, SpillFile};

/// Bytes of streamed morsels a worker keeps for the string keys of its scattered rows
/// before it flushes them into its per-partition tables ([`Partial::flush`]) or copies the
/// keys ([`CopyChoice`]): 256 MiB until its first flush, 1 GiB after it, at most an eighth
/// of the query's budget (`max_memory_usage`, else `max_server_memory_usage`) shared by the
/// `max_threads` workers. The memory of a string GROUP BY then grows with its groups, plus
/// this much per worker, not with the rows read. A worker that flushed once will flush
/// again (copying keys pays off only for rows that do not repeat): larger flushes put more
/// rows into each radix partition's table while it is in cache (Q34 at 100M rows from disk,
/// 2 threads: 33 -> 10 flushes, 8.28 -> 7.58 s, means of 4 alternated runs). The radix
/// buffers are reserved for the first budget's rows (`aggregate::run`), and grow by
/// doubling past them.
pub(super) fn scatter_retained_bytes(settings: &Settings, flushed: bool) -> usize {
    let default: usize = if flushed { 1 << 30 } else { 256 << 20 };
    let budget = if settings.max_memory_usage > 0 { settings.max_memory_usage } else { settings.max_server_memory_usage };
    match budget {
        0 => default,
        b => default.min(usize::try_from(b / 8).unwrap_or(usize::MAX) / settings.max_threads.max(1)),
    }
}

/// Bytes of GROUP BY state the workers of a query may hold, in all, with their scattered
/// rows' string keys copied ([`Partial::copy_keys`]) when no external GROUP BY limit
/// applies; under one, three quarters of each worker's share of it.
pub(super) const COPIED_KEYS_MAX_BYTES: usize = 4 << 30;

/// What a worker whose retained morsels passed their budget weighs to copy its scattered
/// rows' string keys ([`Partial::copy_keys`]) rather than flush the rows.
#[derive(Debug, Clone, Copy)]
pub(super) struct CopyChoice {
    /// The last flush made fewer new groups than half its rows, or a full spill ended an
    /// earlier copying ([`Worker::keep_flushing`]).
    pub(super) keep_flushing: bool,
    /// Whether the worker flushed before.
    pub(super) flushed: bool,
    /// Bytes a row's key arrays take (a copy's bytes, about).
    pub(super) key_row_bytes: usize,
    /// Bytes a scattered row takes in the radix buffers.
    pub(super) row_bytes: usize,
    /// Bytes of state the worker holds now.
    pub(super) state_bytes: usize,
    /// Rows the radix buffers will take if the rest of the input stays raw.
    pub(super) rows_to_come: usize,
    /// Bytes of state the worker may hold with copied keys.
    pub(super) limit: usize,
}

impl CopyChoice {
    /// Rows whose keys are copied cost their key bytes and radix-buffer room each, and are
    /// probed once, in the final phase; a flush probes each row in tables of all the
    /// worker's groups (DRAM-bound at 100M rows: 45-200 ns a row here), and the final phase
    /// each of its groups again, but holds memory by groups and copies a key once per group.
    /// Copy when what the rest of the input would take fits the limit, unless the last flush
    /// reduced the rows to under half as many groups (Q34's URLs at 100M rows: 0.15-0.2
    /// after the first flushes; Q19's keys: 0.6-0.9), and before any flush only if a key's
    /// bytes are at most a radix-buffer row's (Q19's mostly empty search phrases; copying
    /// Q34's ~90-byte URLs at 10M rows made it 0.32 -> 0.36 s).
    pub(super) fn copies(&self) -> bool {
        let fits = self.state_bytes.saturating_add(self.rows_to_come.saturating_mul(self.row_bytes + self.key_row_bytes)) <= self.limit;
        !self.keep_flushing && (self.flushed || self.key_row_bytes <= self.row_bytes) && fits
    }
}

pub(super) struct Worker<K> {
    pub(super) table: Partial<K>,
    pub(super) keys: Vec<K>,
    pub(super) hashes: Vec<u64>,
    pub(super) scratch: Scratch,
    pub(super) rows_in: usize,
    /// Morsels this worker has taken.
    pub(super) morsels: usize,
    /// Bytes of `table` accounted in the query context.
    pub(super) accounted: usize,
    /// Bytes of the key arena (`scratch.arena`) accounted in the query.
    pub(super) arena_accounted: usize,
    /// Key arrays of the morsels whose string bytes scattered rows still borrow (until
    /// the next [`Partial::flush`] or [`Worker::copy_keys`]), and their bytes accounted in
    /// the query.
    pub(super) retained: Vec<ArrayRef>,
    pub(super) retained_bytes: usize,
    pub(super) gids: Vec<u32>,
    pub(super) flushes: usize,
    /// Whether scattered rows must be flushed rather than have their keys copied
    /// ([`Worker::copy_keys`]): the last flush made fewer new groups than half its rows, or
    /// a full spill ended the copying (its estimate did not hold).
    pub(super) keep_flushing: bool,
    /// Times the scattered rows took copies of their keys ([`Worker::copy_keys`]).
    pub(super) key_copies: usize,
    /// External GROUP BY: this worker's temporary file, its runs per radix partition, and
    /// how many times it spilled.
    pub(super) spill: Option<SpillFile>,
    pub(super) runs: Vec<Vec<(Run, usize)>>,
    pub(super) spills: usize,
    /// `rows_in` at the last spill.
    pub(super) rows_at_spill: usize,
    /// Bytes a scattered row takes in the radix buffers ([`scattered_row_bytes`]; set at
    /// the first morsel).
    pub(super) row_bytes: usize,
}

impl<K: GroupKey> Worker<K> {
    /// Without GROUP BY: adds `n` rows (`sel` of the morsel, `inputs` per aggregate) to the
    /// one group of a single table and accounts its size; `false` when the worker's table is
    /// not a single one (nothing added).
    pub(super) fn add_to_unit(
        &mut self,
        ctx: &Ctx<'_>,
        extract: &impl Fn(&[&ArrayRef], Option<&[u32]>, usize, &mut Vec<K>),
        inputs: &[Option<&ArrayRef>],
        sel: Option<&[u32]>,
        n: usize,
    ) -> Result<bool> {
        let unit = extract_unit(extract);
        K::hash_batch(std::slice::from_ref(&unit), ctx.kern, &mut self.hashes);
        if !self.table.add_unit(&unit, self.hashes[0], inputs, sel, n, ctx.kern, &mut self.scratch)? {
            return Ok(false);
        }
        ctx.query.resize(&mut self.accounted, self.table.memory_size(), self.table.operator())?;
        Ok(true)
    }

    /// Bytes of GROUP BY state the worker holds (tables, radix buffers, key arena, retained
    /// morsels).
    pub(super) fn state_bytes(&self) -> usize {
        self.accounted + self.arena_accounted + self.retained_bytes
    }

    /// Aggregates the scattered rows into per-partition tables ([`Partial::flush`]), after
    /// which no key points into a morsel: lets the retained morsels go and accounts the
    /// tables and the key arena anew.
    pub(super) fn flush(&mut self, ctx: &Ctx<'_>, new_accs: &impl Fn() -> Vec<Accumulator>) -> Result<()> {
        self.flushes += 1;
        let (rows, groups) = self.table.flush(&mut self.scratch.arena, new_accs, &mut self.gids, ctx.kern)?;
        self.keep_flushing |= groups * 2 < rows;
        self.release_retained(ctx)
    }

    /// Lets the retained morsels go (no key points into them any more) and accounts the
    /// tables and the key arena anew.
    pub(super) fn release_retained(&mut self, ctx: &Ctx<'_>) -> Result<()> {
        self.retained.clear();
        ctx.query.shrink(std::mem::take(&mut self.retained_bytes));
        ctx.query.resize(&mut self.accounted, self.table.memory_size(), self.table.operator())?;
        ctx.query.resize(&mut self.arena_accounted, self.scratch.arena.memory_size(), "GROUP BY string keys")
    }

    /// Has the scattered rows' string keys copied ([`Partial::copy_keys`]) instead of
    /// flushing them: lets the retained morsels go, gives the radix buffers room for the
    /// `left_rows` rows still to come, and accounts the state anew.
    pub(super) fn copy_keys(&mut self, ctx: &Ctx<'_>, left_rows: usize) -> Result<()> {
        // SAFETY: the worker's arena outlives every key pointing into it: `run` keeps every
        // worker's arena until the final tables are dropped, and `Worker::spill` replaces
        // it only after writing every table and row.
        unsafe { self.table.copy_keys(&mut self.scratch.arena) };
        self.key_copies += 1;
        self.table.fit_buffers(left_rows);
        self.release_retained(ctx)
    }

    /// This worker's rows still to come when it has taken morsel `m`: the morsels left
    /// shared by the workers, at its rate of rows per morsel so far (at least one more
    /// morsel's: a worker may take one more than its share).
    pub(super) fn rows_left(&self, ctx: &Ctx<'_>, morsels: usize, m: usize) -> usize {
        let per_morsel = self.rows_in / self.morsels.max(1);
        (morsels.saturating_sub(m + 1) / ctx.settings.max_threads.max(1) * per_morsel).max(per_morsel)
    }

    /// The query's radix partitioning ([`Ctx::radix`]), its groups estimated from this
    /// worker's: those it holds, scaled from the morsels it took to all of them (an upper
    /// bound where workers see the same keys). Only keys with bytes outside the table's
    /// entries (strings, serialized keys) count their groups: their final tables compare
    /// key bytes and outgrow the cache first. Fixed-width keys keep 256 partitions (1,024
    /// measured Q5 +8%, Q9 +5% at 100M rows, where the string keys of Q17 and Q19 gained
    /// 26% and 31%).
    pub(super) fn radix(&self, ctx: &Ctx<'_>) -> Radix {
        let morsels = ctx.plan.table.chunk_lens().len();
        let wide = K::BORROWS || std::mem::needs_drop::<K>();
        ctx.radix(|| if wide { self.table.size().saturating_mul(morsels) / self.morsels.max(1) } else { 0 })
    }

    /// Writes the radix partitions `select` says (`None`: all) to the worker's temporary
    /// file (created on first use), a run each, noting where; counts a spill if it wrote a
    /// run (selected partitions may hold nothing).
    pub(super) fn write_partitions(&mut self, ctx: &Ctx<'_>, new_accs: &impl Fn() -> Vec<Accumulator>, select: Option<&[bool]>) -> Result<()> {
        let radix = self.radix(ctx);
        if self.spill.is_none() {
            let lz4 = ctx.settings.temporary_files_codec == TemporaryFilesCodec::Lz4;
            self.spill = Some(SpillFile::create(&ctx.settings.temporary_directory(), lz4)?);
            self.runs = vec![Vec::new(); radix.partitions()];
        }
        let (file, runs) = (self.spill.as_mut().expect("created above"), &mut self.runs);
        let mut wrote = false;
        self.table.spill_partitions(radix, new_accs, select, |p, run, items| {
            runs[p].push((file.append(run, ctx.query)?, items));
            wrote = true;
            Ok(())
        })?;
        self.spills += usize::from(wrote);
        Ok(())
    }

    /// External GROUP BY: writes every group to the worker's temporary file, one run per
    /// radix partition, and empties the tables, the key arena and the retained morsels.
    /// `keep_rows`: the radix buffers keep room for about that many rows.
    pub(super) fn spill(&mut self, ctx: &Ctx<'_>, new_accs: &impl Fn() -> Vec<Accumulator>, keep_rows: usize) -> Result<()> {
        self.write_partitions(ctx, new_accs, None)?;
        self.table.shrink_buffers(keep_rows);
        if self.table.copies_keys() {
            self.table.borrow_keys();
            self.keep_flushing = true;
        }
        // Nothing points into the arena or the retained morsels any more: the tables that
        // did are written and dropped, the radix buffers were drained.
        self.scratch.arena = KeyArena::default();
        self.retained.clear();
        ctx.query.shrink(std::mem::take(&mut self.retained_bytes));
        ctx.query.resize(&mut self.arena_accounted, 0, "GROUP BY string keys")?;
        ctx.query.resize(&mut self.accounted, self.table.memory_size(), self.table.operator())
    }

    /// External GROUP BY, a part at a time: writes the largest radix partitions until the
    /// state is down to `target` bytes, the others going on aggregating in memory, so that
    /// a worker whose state passes its limit late in its input writes what the rest of its
    /// input needs room for, not all of it (DuckDB's radix-partitioned aggregation also
    /// spills partitions one by one). Scattered rows are aggregated first when they borrow
    /// morsels, which can then be let go. `false`, nothing written, when the state is not
    /// per-partition ([`Partial::partition_bytes`]) or what spilling cannot free (the key
    /// arena kept partitions point into, the radix buffers) passes half of `target` by
    /// itself: [`Worker::spill`] then writes everything; `true` also when no partition
    /// needed writing (the radix buffers' unused capacity was what passed the limit, and
    /// resizing them is all it takes). `left_rows`: the rows this worker will probably
    /// still add (the radix buffers of rows that are not aggregated before the final phase
    /// are sized for them).
    pub(super) fn spill_some(
        &mut self,
        ctx: &Ctx<'_>,
        new_accs: &impl Fn() -> Vec<Accumulator>,
        target: usize,
        keep_rows: usize,
        left_rows: usize,
    ) -> Result<bool> {
        if !self.retained.is_empty() {
            self.flush(ctx, new_accs)?;
        }
        let Some(bytes) = self.table.partition_bytes() else { return Ok(false) };
        let fixed = self.state_bytes().saturating_sub(bytes.iter().map(|b| b.0).sum());
        if fixed >= target / 2 {
            return Ok(false);
        }
        let mut order: Vec<usize> = (0..bytes.len()).collect();
        order.sort_unstable_by_key(|&p| std::cmp::Reverse(bytes[p].1));
        let mut select = vec![false; bytes.len()];
        let mut left: usize = bytes.iter().map(|b| b.1).sum();
        for p in order {
            if fixed + left <= target {
                break;
            }
            select[p] = true;
            left -= bytes[p].1;
        }
        // Nothing to write when the capacity the radix buffers doubled into passed the
        // limit, not their rows: resizing them below is all it takes.
        if select.contains(&true) {
            self.write_partitions(ctx, new_accs, Some(&select))?;
        }
        if self.table.rows_stay_raw() {
            self.table.fit_buffers(left_rows);
        } else {
            // Flushed into tables every `scatter_retained_bytes`: room for a flush's rows.
            self.table.shrink_buffers(keep_rows);
        }
        ctx.query.resize(&mut self.accounted, self.table.memory_size(), self.table.operator())?;
        Ok(true)
    }
}

