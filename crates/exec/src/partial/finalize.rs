//! The final phase over radix partitions: each partition's pieces of every worker (tables,
//! scattered rows) and its spilled runs merged into one final table, a partition per task.

use rayon::prelude::*;
use tessera_common::{Error, Result};

use super::{Partial, ROWS_RUN, Scattered, TABLE_RUN};
use crate::accum::Accumulator;
use crate::context::QueryContext;
use crate::hashtable::{GroupTable, Radix};
use crate::keys::{GroupKey, KeyArena};
use crate::spill::{Dec, Run, SpillFile, corrupt};
use tessera_kernels::Kernels;

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
