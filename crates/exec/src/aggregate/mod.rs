//! Hash GROUP BY: two-phase (partial, then final) aggregation over morsels, with the key
//! layout chosen per query and a fused top-N for ORDER BY ... LIMIT.
//!
//! 1. **Partial** (morsel-driven): each worker filters a morsel to a selection vector,
//!    extracts and hashes its keys, finds the group ids in its own table and updates the
//!    aggregate states. A table that grows past `group_by_two_level_threshold` groups
//!    switches to two levels (radix partitions on the top hash bits: 256, or up to 1,024
//!    when the first worker to switch expects more than 64K groups a partition,
//!    [`Radix`]).
//! 2. **Final**: with one worker the partial table is final. Otherwise, small single-level
//!    tables merge into the first; else all tables go two-level and the partitions are
//!    merged in parallel, one task per partition, into disjoint final tables (ClickHouse's
//!    parallel merge of two-level tables; Leis et al. 2014). No single-threaded merge of
//!    a large table ever happens.
//!    **External GROUP BY**: a worker whose tables pass its share of
//!    `max_bytes_before_external_group_by` writes them to a temporary file, one run per
//!    radix partition, and goes on empty (or, late in its input, writes its largest
//!    partitions and goes on with the others); the final phase reads each partition's runs
//!    back and merges them with the partition's in-memory groups (`partial::finalize`).
//! 3. **Top-N**: partitions are key-disjoint, so each final table keeps its best
//!    `offset + limit` groups (a bounded sorted buffer with a threshold check on the first
//!    sort key); only those candidates are materialised, then sorted exactly with every
//!    ORDER BY key. All groups are never sorted.
//!
//! Here: the plan, the key layout and both phases (`run`), and the fixed groups of `GROUP
//! BY .. LIMIT` without ORDER BY (`first_keys`). Beside it: `worker` (a worker's partial
//! state and its flush / copy / spill choices), `rewrite` (plans answered from metadata or
//! rewritten before the hash aggregation: COUNT(DISTINCT) as a GROUP BY of the distinct
//! values), `kept` (computed keys and inputs evaluated on the rows WHERE keeps), `lazy`
//! (lazy string keys: when they apply, the answer's strings read back), `output` (top-N
//! candidates, output columns, HAVING, ORDER BY / LIMIT).

mod kept;
mod lazy;
mod output;
mod rewrite;
mod worker;

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::compute::concat_batches;
use tessera_common::{Error, Result, Settings};

use crate::Profile;
use crate::accum::{Accumulator, OrdVal};
use crate::context::QueryContext;
use crate::hashtable::{GroupTable, Radix};
use crate::keys::{GroupKey, KeyArena, KeyReader, Layout, LazyKey, NULL_HASH, TieKey, choose_layout};
use crate::morsel::{Input, MorselColumns, Passed};
use crate::partial::{Partial, Scratch, Spilled, finalize_partitioned, scatter_ok, scattered_row_bytes};
use crate::plan::{AggFunc, AggOutput, AggregatePlan, OrderLimit, Plan, ScalarExpr, SortKey};
use crate::pool::run_morsels;
use crate::prewhere::Prewhere;
use crate::sort::SortSpill;
use tessera_kernels::Kernels;

use kept::eval_kept;
use lazy::{lazy_key_fits, read_lazy_keys};
use worker::{COPIED_KEYS_MAX_BYTES, CopyChoice, Worker, scatter_retained_bytes};
pub(crate) use output::order_and_limit;
use output::{apply_having, emit, output_schema, select_groups};
use rewrite::{distinct_as_groups, distinct_beside_others, distinct_per_group, from_metadata};

struct Ctx<'a> {
    plan: &'a AggregatePlan,
    input: &'a Input<'a>,
    /// The WHERE clause as PREWHERE steps (its columns read first), and the other columns.
    prewhere: Prewhere,
    other_cols: Vec<usize>,
    settings: &'a Settings,
    pool: &'a rayon::ThreadPool,
    /// The kernel family of this query.
    kern: &'static Kernels,
    query: &'a QueryContext,
    /// The top-N's tie-break keys read from packed keys (fixed layouts; see [`TieKey`]).
    tie: Option<TieKey>,
    /// Groups to fix in advance ([`first_keys_wanted`]).
    first_keys: Option<usize>,
    /// `SELECT COUNT(*) [, COUNT(*) ..] .. WHERE ..` without GROUP BY: a morsel's kept rows
    /// are counted ([`Prewhere::count`]), not selected.
    count_only: bool,
    /// The radix partitioning of this query's two-level tables, chosen once ([`Ctx::radix`]).
    radix: std::sync::OnceLock<Radix>,
    /// The key is a [`LazyKey`] ([`Layout::LazyStr`]): its output column holds the keys'
    /// bytes (binary) until [`read_lazy_keys`] reads the strings.
    lazy_key: bool,
}

impl Ctx<'_> {
    /// The array of `e` in a morsel of `len` rows of which WHERE keeps `sel`: a column's
    /// array, or a computed expression (see [`eval_kept`]).
    fn scalar_array(&self, e: &ScalarExpr, mcols: &MorselColumns<'_>, len: usize, sel: Option<&[u32]>) -> Result<ArrayRef> {
        match *e {
            ScalarExpr::Computed(i) => eval_kept(&self.plan.computed[i], &mcols.cols, len, sel),
            ScalarExpr::Column(c) => Ok(mcols.get(c)?.clone()),
            ScalarExpr::Minute(_) => Err(Error::internal("minute() as an aggregate input is planned as an expression")),
        }
    }

    /// Morsel `m` (`len` rows) filtered by WHERE (PREWHERE: its columns read first), then
    /// its columns `cols` read ([`Input::read_passed`]: at the kept rows only when few are),
    /// or `None` when no row passes. Checks for cancellation first.
    fn filtered_morsel(&self, m: usize, len: usize, cols: &[usize]) -> Result<Option<Passed<'_>>> {
        self.query.check_cancelled()?;
        let mut mcols = self.input.morsel();
        let sel = self.prewhere.select(self.input, m, len, &mut mcols, self.kern)?;
        if sel.as_ref().map_or(len, |s| s.len()) == 0 {
            return Ok(None);
        }
        self.input.read_passed(m, len, cols, sel, mcols).map(Some)
    }

    /// The input array of each aggregate in a morsel (`None` for COUNT(*)).
    fn agg_inputs(&self, mcols: &MorselColumns<'_>, len: usize, sel: Option<&[u32]>) -> Result<Vec<Option<ArrayRef>>> {
        let mut done: Vec<(ScalarExpr, ArrayRef)> = Vec::new();
        let mut out = Vec::with_capacity(self.plan.aggs.len());
        for a in &self.plan.aggs {
            out.push(match &a.input {
                None => None,
                Some(e) => Some(match done.iter().find(|(d, _)| d == e) {
                    Some((_, arr)) => arr.clone(),
                    None => {
                        let arr = self.scalar_array(e, mcols, len, sel)?;
                        done.push((*e, arr.clone()));
                        arr
                    }
                }),
            });
        }
        Ok(out)
    }

    /// The array of each key in a morsel: its column's, or the computed expression's.
    fn key_arrays(&self, mcols: &MorselColumns<'_>, len: usize, sel: Option<&[u32]>) -> Result<Vec<ArrayRef>> {
        self.plan
            .keys
            .iter()
            .map(|k| match k {
                ScalarExpr::Computed(_) => self.scalar_array(k, mcols, len, sel),
                k => Ok(mcols.get(k.column())?.clone()),
            })
            .collect()
    }

    /// The query's radix partitioning: `group_by_radix_bits` when set, else chosen from
    /// `groups()`, an estimate of the query's groups, by the first worker that leaves its
    /// single table (every worker's partitions must be the same ones). With
    /// `group_by_two_level_threshold = 0` workers leave it before their first row: no
    /// groups to estimate from, 256 partitions.
    fn radix(&self, groups: impl FnOnce() -> usize) -> Radix {
        *self.radix.get_or_init(|| match self.settings.group_by_radix_bits {
            0 => Radix::for_groups(groups()),
            bits => Radix::with_bits(bits),
        })
    }

    fn new_accs(&self) -> Result<Vec<Accumulator>> {
        self.plan.aggs.iter().map(|a| Accumulator::new(a, a.input.map(|e| self.plan.scalar_type(&e)))).collect()
    }
}

/// `plan` with every group key appended to its ORDER BY as a tie-break (hidden outputs for
/// keys not in the SELECT list) when it has ORDER BY or LIMIT: groups are unique by key, so
/// the order is total and the answer does not depend on the thread count, the scheduling or
/// the ISA. LIMIT without ORDER BY returns the first groups in key order. Costs only the key
/// comparisons of rows that tie on every ORDER BY key.
fn with_key_tiebreak(plan: &AggregatePlan) -> AggregatePlan {
    let mut plan = plan.clone();
    if plan.order.order_by.is_empty() && plan.order.limit.is_none() {
        return plan;
    }
    for k in 0..plan.keys.len() {
        let src = AggOutput::Key(k);
        let output = match plan.output.iter().position(|(_, o)| *o == src) {
            Some(i) => i,
            None => {
                plan.output.push((format!("__key{k}"), src));
                plan.output.len() - 1
            }
        };
        if !plan.order.order_by.iter().any(|s| s.output == output) {
            plan.order.order_by.push(SortKey { output, descending: false, nulls_first: false });
        }
    }
    plan
}

/// A worker whose table holds more than `group_by_two_level_threshold / EARLY_SPLIT` groups
/// while more than [`EARLY_SPLIT_ROWS`] of its rows are still to come goes radix-partitioned
/// then, not at the threshold: a table of 20K groups stays in the L2 cache, one of 100K
/// (ClickHouse's default threshold) does not, and the rows still to come would probe it.
/// 10M rows of hits, 2 threads, min of 10 runs, AMD EPYC: Q13 0.058 -> 0.046 s, Q14 0.143
/// -> 0.088, Q15 0.069 -> 0.052, Q31 0.051 -> 0.040, Q35 0.50 -> 0.45; switching at 20K
/// whatever the rows left made Q37/Q38/Q40 (~60K rows, 50K groups) 27-36% slower.
const EARLY_SPLIT: usize = 5;
/// See [`EARLY_SPLIT`].
const EARLY_SPLIT_ROWS: usize = 200_000;

/// Runs an aggregation plan, reading the table a morsel at a time.
pub(crate) fn execute(
    plan: &AggregatePlan,
    settings: &Settings,
    pool: &rayon::ThreadPool,
    query: &QueryContext,
) -> Result<(Vec<RecordBatch>, Profile)> {
    if let Some((batch, profile)) = from_metadata(plan)? {
        return Ok((vec![batch], profile));
    }
    if let Some((batch, profile)) = distinct_as_groups(plan, settings, pool, query)? {
        return Ok((vec![batch], profile));
    }
    if let Some(answer) = distinct_per_group(plan, settings, pool, query)? {
        return Ok(answer);
    }
    if let Some(answer) = distinct_beside_others(plan, settings, pool, query)? {
        return Ok(answer);
    }
    group_by(plan, settings, pool, query, false)
}

/// The hash GROUP BY of `plan`, with the key layout [`choose_layout`] picks, or with
/// `hashed` its single string key kept as a 128-bit hash ([`Layout::Hash128`]): then the
/// answer's key column holds `""` for every group but the NULL key's (NULL), for callers
/// that need only the number of groups.
pub(super) fn group_by(
    plan: &AggregatePlan,
    settings: &Settings,
    pool: &rayon::ThreadPool,
    query: &QueryContext,
    hashed: bool,
) -> Result<(Vec<RecordBatch>, Profile)> {
    let first_keys = first_keys_wanted(plan, settings);
    let lazy = !hashed && settings.group_by_lazy_string_keys && lazy_key_fits(plan);
    let plan = &with_key_tiebreak(plan);
    let table = &plan.table;
    let keys: Vec<_> = plan.keys.iter().map(|k| (*k, plan.scalar_type(k))).collect();
    let whole = Plan::Aggregate(plan.clone());
    let used = whole.columns_used();
    // The columns read after PREWHERE: those the keys and aggregates read (PREWHERE may
    // have read a filter column for a few rows only, see `Prewhere::select`).
    let other_cols = Plan::Aggregate(AggregatePlan { filter: None, ..plan.clone() }).columns_used();
    let input = Input::open(table, &used, query)?.with_sized(&whole.sized_columns());
    let has_nulls: Vec<bool> = keys.iter().map(|(k, _)| input.may_be_null(k, &plan.computed)).collect();
    let (mut layout, specs) = choose_layout(&keys, &has_nulls, settings.group_by_force_serialized);
    if hashed {
        if specs.len() != 1 || specs[0].width != 0 {
            return Err(Error::internal("a hashed GROUP BY takes one string key"));
        }
        layout = Layout::Hash128;
    } else if lazy && layout == Layout::Str {
        layout = Layout::LazyStr;
    }
    let kern = settings.kernels()?;
    let reader = KeyReader { specs, kern, borrow: std::marker::PhantomData };
    let prewhere = Prewhere::new(plan.filter.as_ref(), table.schema(), settings.use_query_condition_cache);
    // ORDER BY an aggregate, then group keys only (the tie-break `with_key_tiebreak` adds):
    // ties on the aggregate compare the keys as one integer of the packed key.
    let tie = match layout {
        Layout::Fixed64 | Layout::Fixed128 if plan.order.order_by.len() > 1 => plan.order.order_by[1..]
            .iter()
            .map(|k| match plan.output[k.output].1 {
                AggOutput::Key(i) => Some((i, k.descending)),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()
            .and_then(|keys| TieKey::new(&reader.specs, &keys)),
        _ => None,
    };
    let count_only = plan.keys.is_empty() && plan.aggs.iter().all(|a| a.func == AggFunc::CountStar);
    let radix = std::sync::OnceLock::new();
    let lazy_key = layout == Layout::LazyStr;
    let ctx = Ctx { plan, input: &input, prewhere, other_cols, settings, pool, query, kern, tie, first_keys, count_only, radix, lazy_key };
    let r = &reader;
    let (batches, mut profile) = match layout {
        Layout::Unit => run::<(), _, _>(&ctx, |_, _, n, out| {
            out.clear();
            out.resize(n, ());
        }, |_, _| OrdVal::Null)?,
        Layout::Fixed64 => run::<u64, _, _>(&ctx, |a, s, n, out| r.fixed64(a, s, n, out), |k, i| {
            r.packed_value(i, *k as u128)
        })?,
        Layout::Fixed128 => run::<u128, _, _>(&ctx, |a, s, n, out| r.fixed128(a, s, n, out), |k, i| {
            r.packed_value(i, *k)
        })?,
        Layout::Str => run::<&[u8], _, _>(&ctx, |a, s, _, out| r.string(a, s, out), |k, _| OrdVal::Bytes(k))?,
        Layout::FixedStr => run::<(u128, &[u8]), _, _>(&ctx, |a, s, n, out| r.fixed_string(a, s, n, out), |k, i| {
            if r.specs[i].width == 0 { OrdVal::Bytes(k.1) } else { r.packed_value(i, k.0) }
        })?,
        Layout::Serialized => run::<Box<[u8]>, _, _>(&ctx, |a, s, n, out| r.serialized(a, s, n, out), |k, i| {
            r.serialized_value(i, k)
        })?,
        Layout::Hash128 => run::<u128, _, _>(&ctx, |a, s, n, out| r.hash128(a, s, n, out), |k, _| {
            if *k == NULL_HASH { OrdVal::Null } else { OrdVal::Bytes(b"") }
        })?,
        Layout::LazyStr => {
            let (batches, profile) =
                run::<LazyKey, _, _>(&ctx, |a, s, n, out| r.lazy_str(a, s, n, out), |k, _| OrdVal::Bytes(k.bytes()))?;
            (read_lazy_keys(batches, plan, pool, query)?, profile)
        }
    };
    profile.layout = Some(layout.name());
    Ok((batches, input.profile(profile)))
}

fn run<K, E, D>(ctx: &Ctx<'_>, extract: E, decode: D) -> Result<(Vec<RecordBatch>, Profile)>
where
    K: GroupKey,
    E: Fn(&[&ArrayRef], Option<&[u32]>, usize, &mut Vec<K>) + Sync,
    D: for<'k> Fn(&'k K, usize) -> OrdVal<'k> + Sync,
{
    let plan = ctx.plan;
    let threshold = ctx.settings.group_by_two_level_threshold;
    let chunk_lens = plan.table.chunk_lens();
    ctx.new_accs()?; // validates the aggregate types once
    let new_accs = || ctx.new_accs().expect("validated above");
    let input_nulls: Vec<bool> = plan.aggs.iter().filter_map(|a| a.input).map(|e| ctx.input.may_be_null(&e, &plan.computed)).collect();
    // String states (MIN/MAX, COUNT(DISTINCT) of strings) need their bytes: those aggregate
    // through per-partition hash tables instead of scattered rows.
    let scatter = scatter_ok(&input_nulls) && new_accs().iter().all(|a| a.scatterable());
    let total_rows = plan.table.num_rows();
    // External GROUP BY: a worker spills once its state passes its share of the threshold.
    let spill_limit = ctx
        .settings
        .external_group_by_bytes()
        .map(|b| usize::try_from(b).unwrap_or(usize::MAX) / ctx.settings.max_threads.max(1));
    let copy_limit = spill_limit.map_or(COPIED_KEYS_MAX_BYTES / ctx.settings.max_threads.max(1), |l| l / 4 * 3);
    // Declared before the tables, dropped after them: the arenas and morsel arrays string
    // keys point into.
    let mut arenas: Vec<KeyArena> = Vec::new();
    let mut retained: Vec<ArrayRef> = Vec::new();
    let mut first_arena = KeyArena::default();
    let fixed = first_keys(ctx, &extract, &mut first_arena)?;
    arenas.push(first_arena);

    // Phase 1: partial aggregation per worker.
    let workers = run_morsels(
        ctx.pool,
        ctx.settings.max_threads,
        chunk_lens.len(),
        || Worker {
            table: match &fixed {
                Some(f) => Partial::Fixed(f.same_keys(new_accs())),
                None => Partial::Single(GroupTable::new(new_accs(), 0)),
            },
            keys: Vec::new(),
            hashes: Vec::new(),
            scratch: Scratch::new(),
            rows_in: 0,
            morsels: 0,
            accounted: 0,
            arena_accounted: 0,
            retained: Vec::new(),
            retained_bytes: 0,
            gids: Vec::new(),
            flushes: 0,
            keep_flushing: false,
            key_copies: 0,
            spill: None,
            runs: Vec::new(),
            spills: 0,
            rows_at_spill: 0,
            row_bytes: std::mem::size_of::<K>().max(1),
        },
        |w: &mut Worker<K>, m| {
            let len = chunk_lens[m];
            w.morsels += 1;
            if ctx.count_only {
                ctx.query.check_cancelled()?;
                let n = ctx.prewhere.count(ctx.input, m, len, &mut ctx.input.morsel(), ctx.kern)?;
                if n == 0 {
                    ctx.input.skip();
                    return Ok(());
                }
                w.rows_in += n;
                if w.add_to_unit(ctx, &extract, &vec![None; plan.aggs.len()], None, n)? {
                    return Ok(());
                }
                return Err(Error::internal("COUNT(*) without GROUP BY in a table of keys"));
            }
            let Some(Passed { cols: mcols, sel, len, at }) = ctx.filtered_morsel(m, len, &ctx.other_cols)? else {
                ctx.input.skip();
                return Ok(());
            };
            let sel = sel.as_deref();
            let n = sel.map_or(len, |s| s.len());
            w.rows_in += n;
            let owned_keys = ctx.key_arrays(&mcols, len, sel)?;
            let key_arrays: Vec<&ArrayRef> = owned_keys.iter().collect();
            // Bytes of the key arrays that are the query's memory (streamed, or computed);
            // a resident table's arrays are not.
            let key_bytes: usize = if K::BORROWS {
                ctx.plan
                    .keys
                    .iter()
                    .zip(&key_arrays)
                    .filter(|(k, _)| at.is_some() || matches!(k, ScalarExpr::Computed(_)) || ctx.input.is_streamed(k.column()))
                    .map(|(_, a)| a.get_array_memory_size())
                    .sum()
            } else {
                0
            };
            // Bytes of a row's key arrays: what retaining or copying its key takes, about.
            let key_row_bytes = key_bytes / len.max(1);
            let mut add = || -> Result<()> {
                let owned = ctx.agg_inputs(&mcols, len, sel)?;
                let inputs: Vec<Option<&ArrayRef>> = owned.iter().map(|a| a.as_ref()).collect();
                if plan.keys.is_empty() && w.add_to_unit(ctx, &extract, &inputs, sel, n)? {
                    return Ok(());
                }
                extract(&key_arrays, sel, n, &mut w.keys);
                if K::ROW {
                    // The row in the morsel of each key: the kept rows' positions.
                    for (i, k) in w.keys.iter_mut().enumerate() {
                        let r = sel.map_or(i as u32, |s| s[i]);
                        let r = at.as_ref().map_or(r, |at| at[r as usize]);
                        k.set_row((m as u64) << 32 | r as u64);
                    }
                }
                w.row_bytes = scattered_row_bytes(&w.keys, &inputs);
                let row_bytes = w.row_bytes;
                K::hash_batch(&w.keys, ctx.kern, &mut w.hashes);
                // A worker may take any share of the morsels: reserve for all rows not yet
                // seen (an upper bound; capacity never touched costs address space only).
                let mut expect = total_rows.saturating_sub(w.rows_in - n);
                if K::BORROWS && key_bytes > 0 {
                    // Scattered rows will be flushed after about this many rows (from this
                    // morsel's key bytes per row): buffers sized for all rows would hold
                    // memory in proportion to the table. They are reused after a flush.
                    // (Only a single table reserves: before the first flush.)
                    let per_flush = scatter_retained_bytes(ctx.settings, false) / key_row_bytes.max(1);
                    expect = expect.min(per_flush + per_flush / 8);
                }
                if let Some(limit) = spill_limit {
                    // A spilling worker empties its buffers at a whole spill (a partial one
                    // resizes them, `Partial::fit_buffers`): they need to hold one spill's
                    // rows, and take at most half of its budget.
                    expect = expect.min(limit / 2 / row_bytes);
                }
                if threshold == 0 {
                    let radix = w.radix(ctx);
                    w.table.grow_up(radix, scatter, expect, &inputs, &new_accs);
                }
                w.table.add(&mut w.keys, &w.hashes, &inputs, sel, &mut w.scratch, ctx.kern)?;
                let size = w.table.size();
                if size > threshold || (size > threshold / EARLY_SPLIT && {
                    // This worker's rows still to come, at the rate its morsels kept so far.
                    let left = chunk_lens.len().saturating_sub(m + 1) / ctx.settings.max_threads.max(1);
                    w.rows_in / w.morsels * left > EARLY_SPLIT_ROWS
                }) {
                    let radix = w.radix(ctx);
                    w.table.grow_up(radix, scatter, expect.saturating_sub(n), &inputs, &new_accs);
                }
                if w.table.size() >= u32::MAX as usize / 2 {
                    return Err(Error::ResourcesExhausted("more than 2^31 groups in one thread".into()));
                }
                ctx.query.resize(&mut w.accounted, w.table.memory_size(), w.table.operator())?;
                ctx.query.resize(&mut w.arena_accounted, w.scratch.arena.memory_size(), "GROUP BY string keys")
            };
            let added = add();
            // Key slices into this morsel's arrays must not outlive them: tables hold arena
            // copies, scattered rows borrow until flushed, so their morsels are retained.
            w.keys.clear();
            let copies = K::BORROWS && w.table.copies_keys();
            if K::BORROWS && w.table.is_scatter() && !copies {
                // First, so that even on an error below nothing points to freed bytes.
                w.retained.extend(key_arrays.iter().map(|a| Arc::clone(a)));
                ctx.query.grow(key_bytes, "GROUP BY string keys")?;
                w.retained_bytes += key_bytes;
                if w.retained_bytes > scatter_retained_bytes(ctx.settings, w.flushes > 0) {
                    let left = w.rows_left(ctx, chunk_lens.len(), m);
                    let choice = CopyChoice {
                        keep_flushing: w.keep_flushing,
                        flushed: w.flushes > 0,
                        key_row_bytes,
                        row_bytes: w.row_bytes,
                        state_bytes: w.state_bytes(),
                        rows_to_come: w.table.buffer_rows(left),
                        limit: copy_limit,
                    };
                    if choice.copies() {
                        w.copy_keys(ctx, left)?;
                    } else {
                        w.flush(ctx, &new_accs)?;
                    }
                }
            }
            added?;
            if copies && w.state_bytes() > copy_limit {
                // The copied keys' rows passed the budget (more rows came than estimated):
                // they are aggregated, and the next ones borrow.
                w.flush(ctx, &new_accs)?;
            }
            // A fixed table holds at most FIRST_KEYS_MAX groups: it never spills.
            if let Some(limit) = spill_limit
                && w.state_bytes() > limit
                && !matches!(w.table, Partial::Fixed(_))
            {
                let keep_rows = limit / 2 / w.row_bytes;
                // The bytes this worker's rows still to come will add: its morsels' rate of
                // rows so far (at least one more morsel's: a worker may take one more than
                // its share), the state's rate of bytes per row since its last spill.
                let left = w.rows_left(ctx, chunk_lens.len(), m);
                let since = (w.rows_in - w.rows_at_spill).max(1);
                let growth = if w.table.is_scatter() && w.table.rows_stay_raw() {
                    // Rows not aggregated before the final phase: each adds its bytes and
                    // its copied key bytes (an upper bound: rows the frozen table holds add
                    // none), in the room `Partial::fit_buffers` reserves for them; the
                    // state's bytes count capacity that doubling left unused.
                    w.table.buffer_rows(left) * (w.row_bytes + key_row_bytes)
                } else {
                    (w.state_bytes() as u128 * left as u128 / since as u128) as usize
                };
                // Late in its input (the rest fits in half the limit), the worker writes the
                // largest partitions until the rest has room; else everything.
                if growth >= limit / 2 || !w.spill_some(ctx, &new_accs, limit - growth, keep_rows, left)? {
                    w.spill(ctx, &new_accs, keep_rows)?;
                }
                w.rows_at_spill = w.rows_in;
            }
            Ok(())
        },
    )?;
    let mut partials: Vec<Partial<K>> = Vec::with_capacity(workers.len());
    let mut arena_bytes = 0;
    let mut rows_in = 0;
    let mut partial_flushes = 0;
    let mut scatter_key_copies = 0;
    let mut spills = 0;
    let mut spilled = Spilled::default();
    for w in workers {
        rows_in += w.rows_in;
        partial_flushes += w.flushes;
        scatter_key_copies += w.key_copies;
        spills += w.spills;
        if let Some(file) = w.spill {
            spilled.add(file, w.runs);
        }
        arena_bytes += w.arena_accounted + w.retained_bytes;
        arenas.push(w.scratch.arena);
        retained.extend(w.retained);
        if !w.table.is_empty() {
            partials.push(w.table.unfix());
        }
    }
    let _release = ReleaseOnDrop { query: ctx.query, bytes: arena_bytes };

    // Phases 2 and 3: final aggregation, then per final table the top-N candidates (or
    // all groups) materialised; each table is dropped once emitted.
    let schema = output_schema(ctx)?;
    // External sort of the groups (ORDER BY without LIMIT, or a LIMIT past the top-N
    // buffer): once the emitted groups pass `max_bytes_before_external_sort`, a partition's
    // groups are sorted and written as a run instead of kept (see crate::sort); every group
    // key ends the ORDER BY (`with_key_tiebreak`), so the merge is the in-memory order.
    let all_cols = schema.fields().len();
    let run_order = OrderLimit {
        order_by: plan.order.order_by.clone(),
        limit: plan.order.limit.map(|l| l.saturating_add(plan.order.offset)),
        offset: 0,
    };
    let sort_limit = ctx
        .settings
        .external_sort_bytes()
        .filter(|_| !plan.order.order_by.is_empty() && run_order.limit.is_none_or(|w| w > EXTERNAL_SORT_MIN_ROWS))
        .map(|b| usize::try_from(b).unwrap_or(usize::MAX));
    let emitted = std::sync::atomic::AtomicUsize::new(0);
    let sort_spill = std::sync::Mutex::new(SortSpill::default());
    let finish = |t: GroupTable<K>| -> Result<(RecordBatch, usize, usize)> {
        let gids = select_groups(&t, &plan.order, plan, &decode, ctx.tie.as_ref(), ctx.query)?;
        let b = emit(&t, &gids, plan, &schema, &decode)?;
        let bytes = b.get_array_memory_size();
        if let Some(limit) = sort_limit
            && emitted.fetch_add(bytes, std::sync::atomic::Ordering::Relaxed) + bytes > limit
        {
            emitted.fetch_sub(bytes, std::sync::atomic::Ordering::Relaxed);
            let b = apply_having(b, plan.having.as_ref())?;
            let sorted = order_and_limit(b, &run_order, all_cols)?;
            let mut spill = sort_spill.lock().map_err(|_| Error::internal("sort spill lock poisoned"))?;
            spill.write_run(&sorted, ctx.settings, ctx.query)?;
            return Ok((RecordBatch::new_empty(schema.clone()), t.len(), t.memory_size()));
        }
        ctx.query.grow(bytes, "GROUP BY output")?;
        Ok((b, t.len(), t.memory_size()))
    };
    let total: usize = partials.iter().map(|t| t.size()).sum();
    let all_single = partials.iter().all(|t| matches!(t, Partial::Single(_)));
    let two_level = !spilled.is_empty() || !all_single || (partials.len() > 1 && total > threshold.max(1));
    // The partitioning the workers used (the default if none left its single table).
    let radix = ctx.radix(|| 0);
    let mut finals: Vec<(RecordBatch, usize, usize)> = if !two_level && partials.len() <= 1 {
        match partials.pop() {
            Some(Partial::Single(t)) => vec![finish(t)?],
            _ => vec![],
        }
    } else if !two_level {
        let mut tables: Vec<GroupTable<K>> = partials
            .into_iter()
            .filter_map(|p| match p {
                Partial::Single(t) => Some(t),
                _ => None,
            })
            .collect();
        tables.sort_by_key(|t| std::cmp::Reverse(t.len()));
        let mut first = tables.remove(0);
        let before = first.memory_size();
        for t in &tables {
            first.merge_from(t, ctx.kern);
        }
        ctx.query.grow(first.memory_size().saturating_sub(before), "GROUP BY merge")?;
        vec![finish(first)?]
    } else {
        ctx.pool.install(|| finalize_partitioned(radix, partials, &spilled, &new_accs, ctx.kern, ctx.query, &finish))?
    };
    let groups: usize = finals.iter().map(|f| f.1).sum();
    let hash_table_bytes = finals.iter().map(|f| f.2).sum();
    if plan.keys.is_empty() && groups == 0 {
        // A global aggregate over no rows still returns one row (COUNT = 0, SUM = NULL).
        let mut t = GroupTable::new(ctx.new_accs()?, 1);
        t.find_or_insert(&extract_unit::<K>(&extract), 0);
        t.sync_accs();
        finals = vec![finish(t)?];
    }
    let batches: Vec<RecordBatch> = finals.into_iter().map(|f| f.0).collect();
    let sort_spill = sort_spill.into_inner().map_err(|_| Error::internal("sort spill lock poisoned"))?;
    let profile = |sort: &SortSpill| {
        let (sort_runs, sort_bytes) = sort.runs_and_bytes();
        Profile {
            layout: None,
            groups,
            radix_partitions: if two_level { radix.partitions() } else { 0 },
            rows_in,
            hash_table_bytes,
            partial_flushes,
            scatter_key_copies,
            spills: spills + sort.spills,
            spilled_runs: spilled.run_count() + sort_runs,
            spilled_bytes: spilled.bytes() + sort_bytes,
            ..Profile::default()
        }
    };
    let big = batches.iter().map(RecordBatch::get_array_memory_size).sum::<usize>() > crate::sort::concat_max_bytes(ctx.settings);
    if big && plan.order.order_by.is_empty() {
        // Many groups in no order: handed out per partition, not copied into one batch (no
        // string column past Arrow's 32-bit offsets).
        let out: Vec<RecordBatch> =
            batches.into_iter().map(|b| apply_having(b, plan.having.as_ref())).collect::<Result<_>>()?;
        let keep: Vec<usize> = (0..plan.visible).collect();
        let out = crate::sort::offset_limit(out, &schema, plan.order.offset, plan.order.limit, &keep)?;
        return Ok((out, profile(&sort_spill)));
    }
    if big || !sort_spill.is_empty() {
        // The groups kept in memory are sorted runs too; the answer is the merge.
        let mut memory = Vec::with_capacity(batches.len());
        for b in batches.into_iter().filter(|b| b.num_rows() > 0) {
            let b = apply_having(b, plan.having.as_ref())?;
            memory.push(vec![order_and_limit(b, &run_order, all_cols)?]);
        }
        let keep: Vec<usize> = (0..plan.visible).collect();
        let (order_by, offset, limit) = (&plan.order.order_by, plan.order.offset, plan.order.limit);
        let out = crate::sort::merge(
            crate::sort::Merge { schema: &schema, spills: std::slice::from_ref(&sort_spill), memory, order_by, offset, limit, keep: &keep },
            ctx.query,
        )?;
        return Ok((out, profile(&sort_spill)));
    }
    let batch = concat_batches(&schema, &batches)?;
    // The per-table outputs are copied into one batch: account it in their place.
    let parts_bytes: usize = batches.iter().map(|b| b.get_array_memory_size()).sum();
    drop(batches);
    ctx.query.shrink(parts_bytes);
    ctx.query.grow(batch.get_array_memory_size(), "GROUP BY output")?;
    let batch = apply_having(batch, plan.having.as_ref())?;
    ctx.query.grow(batch.get_array_memory_size(), "ORDER BY sort of the groups")?;
    let out = order_and_limit(batch, &plan.order, plan.visible)?;
    Ok((vec![out], profile(&sort_spill)))
}

/// Most groups [`first_keys`] fixes in advance (`LIMIT` plus `OFFSET`).
const FIRST_KEYS_MAX: usize = 65_536;

/// The groups [`first_keys`] fixes for `plan` (as written, before `with_key_tiebreak`):
/// `LIMIT` plus `OFFSET` of a `GROUP BY .. LIMIT n` without ORDER BY and HAVING, up to
/// [`FIRST_KEYS_MAX`].
fn first_keys_wanted(plan: &AggregatePlan, settings: &Settings) -> Option<usize> {
    if !settings.optimize_trivial_group_by_limit_query
        || plan.keys.is_empty()
        || !plan.order.order_by.is_empty()
        || plan.having.is_some()
    {
        return None;
    }
    let want = plan.order.limit?.saturating_add(plan.order.offset);
    (1..=FIRST_KEYS_MAX).contains(&want).then_some(want)
}

/// `GROUP BY .. LIMIT n` without ORDER BY and HAVING, where any `n` groups are a correct
/// answer (see `Settings::optimize_trivial_group_by_limit_query`): a table of the first
/// `n + OFFSET` distinct keys of the input in input order (so the answer does not change
/// from run to run or with the thread count), which the workers then aggregate exactly,
/// dropping the rows of every other key. It looks through the first eighth of the rows at
/// most (at least one morsel); `None` when they hold fewer keys, or the query is not of
/// that shape: every group is then aggregated. ClickHouse caps the groups the same way
/// (`optimize_trivial_group_by_limit_query`, 26.5) but per thread; here the key set is
/// chosen once, so the aggregates stay exact with any number of threads.
fn first_keys<K: GroupKey>(
    ctx: &Ctx<'_>,
    extract: &impl Fn(&[&ArrayRef], Option<&[u32]>, usize, &mut Vec<K>),
    arena: &mut KeyArena,
) -> Result<Option<GroupTable<K>>> {
    let plan = ctx.plan;
    // (Keys carrying rows, `LazyKey`, need an ORDER BY: never fixed in advance.)
    let Some(want) = ctx.first_keys.filter(|_| !K::ROW) else { return Ok(None) };
    let budget = plan.table.num_rows() / 8;
    // The keys' columns only: the aggregates' inputs are read when the workers run.
    let mut key_cols = Vec::new();
    for k in &plan.keys {
        plan.scalar_columns(k, &mut key_cols);
    }
    let (mut seen, mut keys, mut hashes) = (0, Vec::new(), Vec::new());
    let mut table = GroupTable::<K>::new(Vec::new(), want);
    for (m, &len) in plan.table.chunk_lens().iter().enumerate() {
        if m > 0 && seen >= budget {
            break;
        }
        seen += len;
        let Some(Passed { cols: mcols, sel, len, .. }) = ctx.filtered_morsel(m, len, &key_cols)? else { continue };
        let sel = sel.as_deref();
        let n = sel.map_or(len, |s| s.len());
        let owned = ctx.key_arrays(&mcols, len, sel)?;
        let arrays: Vec<&ArrayRef> = owned.iter().collect();
        extract(&arrays, sel, n, &mut keys);
        K::hash_batch(&keys, ctx.kern, &mut hashes);
        for (k, &h) in keys.iter().zip(&hashes) {
            // SAFETY: `run` keeps the arena with the workers' arenas, declared before and
            // dropped after every table made from this one.
            table.find_or_insert_with(k, h, |k| unsafe { k.persist(arena) });
            if table.len() == want {
                break;
            }
        }
        // The keys may borrow this morsel's arrays: gone before they are.
        keys.clear();
        if table.len() == want {
            return Ok(Some(table));
        }
    }
    Ok(None)
}

/// A LIMIT (plus OFFSET) at or below this many rows keeps the groups' top-N candidates in
/// memory; above it, or without a LIMIT, the groups may be sorted externally.
const EXTERNAL_SORT_MIN_ROWS: usize = 65_536;

/// Gives back bytes accounted in a query when dropped.
struct ReleaseOnDrop<'q> {
    query: &'q QueryContext,
    bytes: usize,
}

impl Drop for ReleaseOnDrop<'_> {
    fn drop(&mut self) {
        self.query.shrink(self.bytes);
    }
}

/// The unit key `()` of a key-less aggregation, produced through the extractor.
fn extract_unit<K>(extract: &impl Fn(&[&ArrayRef], Option<&[u32]>, usize, &mut Vec<K>)) -> K {
    let mut v = Vec::with_capacity(1);
    extract(&[], Some(&[]), 1, &mut v);
    v.pop().expect("unit extractor yields one key")
}

#[cfg(test)]
mod tests {
    use super::{CopyChoice, scatter_retained_bytes};
    use tessera_common::Settings;

    /// 256 MiB a worker until its first flush, 1 GiB after; at most an eighth of the
    /// query's budget (`max_memory_usage`, else `max_server_memory_usage`) over the threads.
    #[test]
    fn retention_grows_after_the_first_flush() {
        let none = Settings { max_threads: 2, max_memory_usage: 0, max_server_memory_usage: 0, ..Settings::default() };
        assert_eq!(scatter_retained_bytes(&none, false), 256 << 20);
        assert_eq!(scatter_retained_bytes(&none, true), 1 << 30);
        let big = Settings { max_memory_usage: 64 << 30, ..none.clone() };
        assert_eq!(scatter_retained_bytes(&big, true), 1 << 30);
        let four = Settings { max_memory_usage: 4 << 30, ..none.clone() };
        assert_eq!(scatter_retained_bytes(&four, false), 256 << 20);
        assert_eq!(scatter_retained_bytes(&four, true), 256 << 20, "4 GiB / 8 / 2 threads");
        let one = Settings { max_memory_usage: 1 << 30, ..none.clone() };
        assert_eq!(scatter_retained_bytes(&one, false), 64 << 20);
        assert_eq!(scatter_retained_bytes(&one, true), 64 << 20);
        // No query limit: the server's budget (256 GiB over 64 threads: 512 MiB a worker).
        let server = Settings { max_threads: 64, max_server_memory_usage: 256 << 30, ..none };
        assert_eq!(scatter_retained_bytes(&server, false), 256 << 20);
        assert_eq!(scatter_retained_bytes(&server, true), 512 << 20);
    }

    /// Q19's shape at 100M rows (first decision of a worker: ~11M rows in, 40M to come,
    /// short keys, no flush yet, 4 GiB limit) copies; Q34's (~90-byte URLs) flushes first,
    /// copies after a flush that did not halve its rows, and keeps flushing after one that
    /// did; nothing copies past the limit.
    #[test]
    fn copy_or_flush() {
        let q19 = CopyChoice {
            keep_flushing: false,
            flushed: false,
            key_row_bytes: 12,
            row_bytes: 40,
            state_bytes: 800 << 20,
            rows_to_come: 40_000_000,
            limit: 4 << 30,
        };
        assert!(q19.copies());
        assert!(!CopyChoice { rows_to_come: 80_000_000, ..q19 }.copies(), "past the limit");
        assert!(!CopyChoice { keep_flushing: true, ..q19 }.copies());
        let q34 = CopyChoice { key_row_bytes: 95, row_bytes: 24, rows_to_come: 2_000_000, ..q19 };
        assert!(!q34.copies(), "long keys: a flush first");
        assert!(CopyChoice { flushed: true, ..q34 }.copies(), "the flush did not halve the rows");
        assert!(!CopyChoice { flushed: true, keep_flushing: true, ..q34 }.copies());
    }
}
