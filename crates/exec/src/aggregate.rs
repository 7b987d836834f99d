//! Hash GROUP BY: two-phase (partial, then final) aggregation over morsels, with the key
//! layout chosen per query and a fused top-N for ORDER BY ... LIMIT.
//!
//! 1. **Partial** (morsel-driven): each worker filters a morsel to a selection vector,
//!    extracts and hashes its keys, finds the group ids in its own table and updates the
//!    aggregate states. A table that grows past `group_by_two_level_threshold` groups
//!    switches to two levels (256 radix partitions on the top hash bits).
//! 2. **Final**: with one worker the partial table is final. Otherwise, small single-level
//!    tables merge into the first; else all tables go two-level and the 256 partitions are
//!    merged in parallel, one task per partition, into disjoint final tables (ClickHouse's
//!    parallel merge of two-level tables; Leis et al. 2014). No single-threaded merge of
//!    a large table ever happens.
//!    **External GROUP BY**: a worker whose tables pass its share of
//!    `max_bytes_before_external_group_by` writes them to a temporary file, one run per
//!    radix partition, and goes on empty; the final phase reads each partition's runs back
//!    and merges them with the partition's in-memory groups (partial.rs).
//! 3. **Top-N**: partitions are key-disjoint, so each final table keeps its best
//!    `offset + limit` groups (a bounded sorted buffer with a threshold check on the first
//!    sort key); only those candidates are materialised, then sorted exactly with every
//!    ORDER BY key. All groups are never sorted.

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, RecordBatch};
use arrow::compute::{SortColumn, SortOptions, concat_batches, lexsort_to_indices, take_record_batch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use tessera_common::float::canonical_array;
use tessera_common::{Error, Result, Settings, TemporaryFilesCodec};

use crate::Profile;
use crate::accum::{Accumulator, OrdVal};
use crate::context::QueryContext;
use crate::expr::{Expr, evaluate as evaluate_expr};
use crate::hashtable::{GroupTable, PARTITIONS};
use crate::keys::{GroupKey, KeyArena, KeyReader, Layout, TieKey, choose_layout, key_array};
use crate::morsel::{Input, MorselColumns};
use crate::partial::{Partial, Scratch, Spilled, finalize_partitioned, scatter_ok};
use crate::plan::{AggFunc, AggOutput, AggregatePlan, OrderLimit, Plan, ScalarExpr, SortKey};
use crate::pool::run_morsels;
use crate::prewhere::Prewhere;
use crate::sort::SortSpill;
use crate::spill::{Run, SpillFile};
use tessera_kernels::Kernels;

/// Top-N buffers above this size fall back to materialising all groups and sorting.
const MAX_TOP_N: usize = 100_000;

/// Bytes of streamed morsels a worker keeps for the string keys of its scattered rows
/// before it flushes them into its per-partition tables ([`Partial::flush`]): 256 MiB, or
/// when `max_memory_usage` is set, an eighth of it shared by the `max_threads` workers. The
/// memory of a string GROUP BY then grows with its groups, plus this much per worker, not
/// with the rows read.
fn scatter_retained_bytes(settings: &Settings) -> usize {
    const DEFAULT: usize = 256 << 20;
    match settings.max_memory_usage {
        0 => DEFAULT,
        limit => DEFAULT.min(usize::try_from(limit / 8).unwrap_or(usize::MAX) / settings.max_threads.max(1)),
    }
}

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

    fn new_accs(&self) -> Result<Vec<Accumulator>> {
        self.plan.aggs.iter().map(|a| Accumulator::new(a, a.input.map(|e| self.plan.scalar_type(&e)))).collect()
    }
}

/// `e` over a morsel of `len` rows (columns `mcols`) of which WHERE keeps `sel` (`None`:
/// all). Evaluated on the whole morsel when the filter keeps more than half of it, else (and
/// when the whole morsel fails, e.g. an integer division by zero in a row WHERE drops) on
/// the kept rows only, spread back to their positions: dropped rows then hold a kept row's
/// value and are never read. So only rows WHERE keeps can make the query fail.
fn eval_kept(e: &Expr, mcols: &[Option<ArrayRef>], len: usize, sel: Option<&[u32]>) -> Result<ArrayRef> {
    let Some(s) = sel else { return evaluate_expr(e, mcols, len) };
    if s.len() * 2 > len
        && let Ok(a) = evaluate_expr(e, mcols, len)
    {
        return Ok(a);
    }
    if s.is_empty() {
        return Ok(arrow::array::new_null_array(&e.data_type(), len));
    }
    let idx = arrow::array::UInt32Array::from(s.to_vec());
    // Only the columns `e` reads (the morsel also holds the other keys' columns: Q40's URL).
    let mut used = Vec::new();
    e.columns(&mut used);
    let mut taken: Vec<Option<ArrayRef>> = vec![None; mcols.len()];
    for c in used {
        if let Some(a) = mcols.get(c).and_then(|a| a.as_ref())
            && taken[c].is_none()
        {
            taken[c] = Some(arrow::compute::take(a, &idx, None)?);
        }
    }
    let compact = evaluate_expr(e, &taken, s.len())?;
    spread(&compact, s, len)
}

/// `compact` (the values of rows `sel` of a morsel of `len` rows, in order) spread back to
/// the morsel's positions; the other rows hold values that are never read. A string or
/// binary result shares `compact`'s bytes, the other rows empty values between them, so no
/// byte is copied (copying a kept value into each of them took 70% of Q40's time).
fn spread(compact: &ArrayRef, sel: &[u32], len: usize) -> Result<ArrayRef> {
    Ok(match compact.data_type() {
        DataType::Utf8 => Arc::new(spread_bytes(compact.as_string::<i32>(), sel, len)?),
        DataType::Binary => Arc::new(spread_bytes(compact.as_binary::<i32>(), sel, len)?),
        _ => {
            let mut pos = vec![0u32; len];
            for (j, &r) in sel.iter().enumerate() {
                pos[r as usize] = j as u32;
            }
            arrow::compute::take(compact, &arrow::array::UInt32Array::from(pos), None)?
        }
    })
}

/// [`spread`] of a byte array: offsets only, over `compact`'s values buffer.
fn spread_bytes<T: arrow::datatypes::ByteArrayType<Offset = i32>>(
    compact: &arrow::array::GenericByteArray<T>,
    sel: &[u32],
    len: usize,
) -> Result<arrow::array::GenericByteArray<T>> {
    use arrow::array::Array;
    let src = compact.value_offsets();
    let mut offsets: Vec<i32> = Vec::with_capacity(len + 1);
    offsets.push(src[0]);
    let mut valid = compact.nulls().map(|_| arrow::array::BooleanBufferBuilder::new(len));
    for (j, &r) in sel.iter().enumerate() {
        let r = r as usize;
        if r < offsets.len() - 1 || r >= len {
            return Err(Error::internal("selection out of order or past the morsel"));
        }
        // Rows before `r` that WHERE dropped: empty values at the current end.
        let end = *offsets.last().expect("starts with one offset");
        let gap = r - (offsets.len() - 1);
        offsets.resize(offsets.len() + gap, end);
        offsets.push(src[j + 1]);
        if let Some(v) = &mut valid {
            v.append_n(gap, true);
            v.append(compact.is_valid(j));
        }
    }
    let end = *offsets.last().expect("starts with one offset");
    let gap = len + 1 - offsets.len();
    offsets.resize(len + 1, end);
    if let Some(v) = &mut valid {
        v.append_n(gap, true);
    }
    let nulls = valid.map(|mut v| arrow::buffer::NullBuffer::new(v.finish()));
    let offsets = arrow::buffer::OffsetBuffer::new(offsets.into());
    // SAFETY: the offsets are monotonic (checked by `OffsetBuffer::new`) and every value is
    // either one of `compact`'s values (the same offsets into the same buffer: for strings,
    // valid UTF-8) or empty at the end offset of one of them (a character boundary); all
    // lie within `compact`'s values buffer, which the new array shares.
    Ok(unsafe { arrow::array::GenericByteArray::new_unchecked(offsets, compact.values().clone(), nulls) })
}

/// Keeps the rows of `batch` (the aggregation's output columns) where `having` is TRUE;
/// all of them without a HAVING.
fn apply_having(batch: RecordBatch, having: Option<&Expr>) -> Result<RecordBatch> {
    let Some(having) = having else { return Ok(batch) };
    let cols: Vec<Option<ArrayRef>> = batch.columns().iter().cloned().map(Some).collect();
    let keep = evaluate_expr(having, &cols, batch.num_rows())?;
    let keep = keep.as_boolean_opt().ok_or_else(|| Error::internal("HAVING of a non-boolean type"))?;
    Ok(arrow::compute::filter_record_batch(&batch, &crate::expr::true_mask(keep))?)
}

/// Whether key or aggregate input `e` may be NULL in a row: its column may hold NULLs, or
/// the expression reads such a column or has a NULL constant.
fn may_have_nulls(plan: &AggregatePlan, input: &Input<'_>, e: &ScalarExpr) -> bool {
    match *e {
        ScalarExpr::Computed(i) => {
            let x = &plan.computed[i];
            let mut cols = Vec::new();
            x.columns(&mut cols);
            x.has_null_literal() || cols.iter().any(|&c| input.may_have_nulls(c))
        }
        e => input.may_have_nulls(e.column()),
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

/// `SELECT COUNT(*), MIN(c), MAX(c) .. FROM t` with no WHERE and no GROUP BY, answered
/// from the table's metadata: the row count from part row counts (Parquet footers), MIN and
/// MAX from the min/max index (the minimum of the per-granule minimums, through the same
/// accumulator as the rows would go: one NULL handling and order). No column is read.
/// `None` when an aggregate needs the rows.
fn from_metadata(plan: &AggregatePlan) -> Result<Option<(RecordBatch, Profile)>> {
    if plan.filter.is_some() || !plan.keys.is_empty() {
        return Ok(None);
    }
    let rows = plan.table.num_rows();
    let mut values = Vec::with_capacity(plan.aggs.len());
    for a in &plan.aggs {
        let v: ArrayRef = match (a.func, a.input) {
            (AggFunc::CountStar, _) => Arc::new(arrow::array::Int64Array::from(vec![rows as i64])),
            (AggFunc::Min | AggFunc::Max, Some(ScalarExpr::Column(c))) => {
                let Some((lo, hi)) = plan.table.min_max(c) else { return Ok(None) };
                let Ok(mut acc) = Accumulator::new(a, Some(lo.data_type().clone())) else { return Ok(None) };
                let per_granule = if a.func == AggFunc::Min { lo } else { hi };
                acc.resize(1);
                acc.update(&vec![0; per_granule.len()], Some(&per_granule), None)?;
                acc.emit(&[0])?
            }
            _ => return Ok(None),
        };
        values.push(v);
    }
    let out = one_group_output(plan, &values)?;
    Ok(Some((out, Profile { layout: Some("metadata"), groups: 1, rows_in: rows, ..Profile::default() })))
}

/// `SELECT COUNT(DISTINCT x) [, COUNT(DISTINCT x) ..] FROM t [WHERE ..]` (no GROUP BY):
/// run as `SELECT x FROM t [WHERE ..] GROUP BY x`, counting the non-NULL groups, so the
/// distinct values go through the radix-partitioned two-phase GROUP BY, its key layouts and
/// its parallel final phase, instead of one hash set per worker merged on one thread
/// (DuckDB plans distinct aggregates as a hash aggregate on the distinct arguments too).
/// `None` when the plan has another shape.
fn distinct_as_groups(
    plan: &AggregatePlan,
    settings: &Settings,
    pool: &rayon::ThreadPool,
    query: &QueryContext,
) -> Result<Option<(RecordBatch, Profile)>> {
    let Some(first) = plan.aggs.first() else { return Ok(None) };
    let Some(x) = first.input else { return Ok(None) };
    if !plan.keys.is_empty() || !plan.aggs.iter().all(|a| a.func == AggFunc::CountDistinct && a.input == Some(x)) {
        return Ok(None);
    }
    let groups = AggregatePlan {
        table: plan.table.clone(),
        filter: plan.filter.clone(),
        keys: vec![x],
        computed: plan.computed.clone(),
        aggs: Vec::new(),
        projections: Vec::new(),
        having: None,
        output: vec![("x".into(), AggOutput::Key(0))],
        visible: 1,
        order: OrderLimit::default(),
    };
    let (batches, mut profile) = execute(&groups, settings, pool, query)?;
    // NULL is one group of the GROUP BY; COUNT(DISTINCT) skips it.
    let n: usize = batches.iter().map(|b| b.num_rows() - b.column(0).null_count()).sum();
    let count: ArrayRef = Arc::new(arrow::array::Int64Array::from(vec![n as i64]));
    let out = one_group_output(plan, &vec![count; plan.aggs.len()])?;
    profile.groups = 1;
    Ok(Some((out, profile)))
}

/// Rows per chunk of the table of distinct pairs that [`distinct_per_group`] aggregates.
const PAIR_CHUNK: usize = 65_536;

/// `SELECT keys, COUNT(DISTINCT x) [, COUNT(DISTINCT x) ..] FROM t [WHERE ..] GROUP BY keys
/// [HAVING ..] [ORDER BY ..]`: run as `SELECT keys, COUNT(x) FROM (SELECT keys, x FROM t
/// [WHERE ..] GROUP BY keys, x) GROUP BY keys ..`, so the distinct pairs go through the
/// radix-partitioned two-phase GROUP BY (one table of pairs, cache-sized partitions)
/// instead of a hash set per group, each insert a cache miss once the sets outgrow the
/// cache (DuckDB plans distinct aggregates the same way). COUNT(x) skips the NULL `x` of a
/// group, as COUNT(DISTINCT x) does. `None` when the plan has another shape.
fn distinct_per_group(
    plan: &AggregatePlan,
    settings: &Settings,
    pool: &rayon::ThreadPool,
    query: &QueryContext,
) -> Result<Option<(Vec<RecordBatch>, Profile)>> {
    let Some(x) = plan.aggs.first().and_then(|a| a.input) else { return Ok(None) };
    if plan.keys.is_empty() || !plan.aggs.iter().all(|a| a.func == AggFunc::CountDistinct && a.input == Some(x)) {
        return Ok(None);
    }
    // Fixed-width keys and values only: a table of (string, value) pairs measured slower
    // than the per-group sets of 64-bit values (Q11, Q12, Q14 at 10M rows: 1.3-1.8x), while
    // Q9's (RegionID, UserID) pairs took half the time of its sets.
    let string = |e: &ScalarExpr| matches!(plan.scalar_type(e), DataType::Utf8 | DataType::Binary);
    if plan.keys.iter().chain([&x]).any(string) {
        return Ok(None);
    }
    let nk = plan.keys.len();
    let mut keys = plan.keys.clone();
    keys.push(x);
    let pairs = AggregatePlan {
        table: plan.table.clone(),
        filter: plan.filter.clone(),
        keys,
        computed: plan.computed.clone(),
        aggs: Vec::new(),
        projections: Vec::new(),
        having: None,
        output: (0..=nk).map(|i| (format!("k{i}"), AggOutput::Key(i))).collect(),
        visible: nk + 1,
        order: OrderLimit::default(),
    };
    let (batches, inner) = execute(&pairs, settings, pool, query)?;
    let Some(schema) = batches.first().map(|b| b.schema()) else { return Ok(None) };
    // Zero-copy slices, so that the outer aggregation has morsels for every worker.
    let mut columns: Vec<Vec<ArrayRef>> = vec![Vec::new(); nk + 1];
    for b in &batches {
        for start in (0..b.num_rows()).step_by(PAIR_CHUNK) {
            let len = PAIR_CHUNK.min(b.num_rows() - start);
            for (c, col) in columns.iter_mut().enumerate() {
                col.push(b.column(c).slice(start, len));
            }
        }
    }
    let table = Arc::new(tessera_common::Table::from_columns("distinct pairs", schema, columns)?);
    let outer = AggregatePlan {
        table,
        filter: None,
        keys: (0..nk).map(ScalarExpr::Column).collect(),
        computed: Vec::new(),
        aggs: plan.aggs.iter().map(|_| crate::plan::AggExpr { func: AggFunc::Count, input: Some(ScalarExpr::Column(nk)) }).collect(),
        projections: plan.projections.clone(),
        having: plan.having.clone(),
        output: plan.output.clone(),
        visible: plan.visible,
        order: plan.order.clone(),
    };
    let (out, profile) = execute(&outer, settings, pool, query)?;
    Ok(Some((out, Profile { layout: inner.layout, rows_in: inner.rows_in, ..profile })))
}

/// The answer of a key-less aggregation from its aggregates' values (`values[j]` one row,
/// aggregate `j`): output columns, projections, HAVING, ORDER BY / LIMIT.
fn one_group_output(plan: &AggregatePlan, values: &[ArrayRef]) -> Result<RecordBatch> {
    let mut cols: Vec<Option<ArrayRef>> = Vec::with_capacity(plan.output.len());
    for (_, o) in &plan.output {
        cols.push(match o {
            AggOutput::Agg(j) => Some(values[*j].clone()),
            AggOutput::Expr(_) => None,
            AggOutput::Key(_) => return Err(Error::internal("group key without GROUP BY")),
        });
    }
    let base = cols.clone();
    for (c, (_, o)) in cols.iter_mut().zip(&plan.output) {
        if let AggOutput::Expr(p) = o {
            *c = Some(evaluate_expr(&plan.projections[*p], &base, 1)?);
        }
    }
    let cols: Vec<ArrayRef> = cols.into_iter().map(|c| c.expect("every output computed")).collect();
    let fields: Vec<Field> =
        plan.output.iter().zip(&cols).map(|((name, _), c)| Field::new(name, c.data_type().clone(), true)).collect();
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)?;
    order_and_limit(apply_having(batch, plan.having.as_ref())?, &plan.order, plan.visible)
}

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
    let first_keys = first_keys_wanted(plan, settings);
    let plan = &with_key_tiebreak(plan);
    let table = &plan.table;
    let keys: Vec<_> = plan.keys.iter().map(|k| (*k, plan.scalar_type(k))).collect();
    let whole = Plan::Aggregate(plan.clone());
    let used = whole.columns_used();
    let filter_cols = whole.filter_columns();
    let other_cols: Vec<usize> = used.iter().copied().filter(|c| filter_cols.binary_search(c).is_err()).collect();
    let input = Input::open(table, &used, query)?;
    let has_nulls: Vec<bool> = keys.iter().map(|(k, _)| may_have_nulls(plan, &input, k)).collect();
    let (layout, specs) = choose_layout(&keys, &has_nulls, settings.group_by_force_serialized);
    let kern = settings.kernels()?;
    let reader = KeyReader { specs, kern, borrow: std::marker::PhantomData };
    let prewhere = Prewhere::new(plan.filter.as_ref(), table.schema());
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
    let ctx = Ctx { plan, input: &input, prewhere, other_cols, settings, pool, query, kern, tie, first_keys };
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
    };
    profile.layout = Some(layout.name());
    profile.morsels_skipped = input.skipped();
    Ok((batches, profile))
}

struct Worker<K> {
    table: Partial<K>,
    keys: Vec<K>,
    hashes: Vec<u64>,
    scratch: Scratch,
    rows_in: usize,
    /// Bytes of `table` accounted in the query context.
    accounted: usize,
    /// Bytes of the key arena (`scratch.arena`) accounted in the query.
    arena_accounted: usize,
    /// Key arrays of the morsels whose string bytes scattered rows still borrow (until
    /// the next [`Partial::flush`]), and their bytes accounted in the query.
    retained: Vec<ArrayRef>,
    retained_bytes: usize,
    gids: Vec<u32>,
    flushes: usize,
    /// External GROUP BY: this worker's temporary file, its runs per radix partition, and
    /// how many times it spilled.
    spill: Option<SpillFile>,
    runs: Vec<Vec<Run>>,
    spills: usize,
}

impl<K: GroupKey> Worker<K> {
    /// Bytes of GROUP BY state the worker holds (tables, radix buffers, key arena, retained
    /// morsels).
    fn state_bytes(&self) -> usize {
        self.accounted + self.arena_accounted + self.retained_bytes
    }

    /// External GROUP BY: writes every group to the worker's temporary file, one run per
    /// radix partition, and empties the tables, the key arena and the retained morsels.
    /// `keep_rows`: the radix buffers keep room for about that many rows.
    fn spill(&mut self, ctx: &Ctx<'_>, new_accs: &impl Fn() -> Vec<Accumulator>, keep_rows: usize) -> Result<()> {
        if self.spill.is_none() {
            let lz4 = ctx.settings.temporary_files_codec == TemporaryFilesCodec::Lz4;
            self.spill = Some(SpillFile::create(&ctx.settings.temporary_directory(), lz4)?);
            self.runs = vec![Vec::new(); PARTITIONS];
        }
        let (file, runs) = (self.spill.as_mut().expect("created above"), &mut self.runs);
        self.table.spill_partitions(new_accs, |p, run| {
            runs[p].push(file.append(run, ctx.query)?);
            Ok(())
        })?;
        self.table.shrink_buffers(keep_rows);
        // Nothing points into the arena or the retained morsels any more: the tables that
        // did are written and dropped, the radix buffers were drained.
        self.scratch.arena = KeyArena::default();
        self.retained.clear();
        ctx.query.shrink(std::mem::take(&mut self.retained_bytes));
        self.spills += 1;
        ctx.query.resize(&mut self.arena_accounted, 0, "GROUP BY string keys")?;
        ctx.query.resize(&mut self.accounted, self.table.memory_size(), self.table.operator())
    }
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
    let input_nulls: Vec<bool> = plan.aggs.iter().filter_map(|a| a.input).map(|e| may_have_nulls(plan, ctx.input, &e)).collect();
    // String states (MIN/MAX, COUNT(DISTINCT) of strings) need their bytes: those aggregate
    // through per-partition hash tables instead of scattered rows.
    let scatter = scatter_ok(&input_nulls) && new_accs().iter().all(|a| a.scatterable());
    let total_rows = plan.table.num_rows();
    let retain_limit = scatter_retained_bytes(ctx.settings);
    // External GROUP BY: a worker spills once its state passes its share of the threshold.
    let spill_limit = ctx
        .settings
        .external_group_by_bytes()
        .map(|b| usize::try_from(b).unwrap_or(usize::MAX) / ctx.settings.max_threads.max(1));
    // Bytes a scattered row takes in the radix buffers (key, hash, ~8 bytes per input).
    let row_bytes = std::mem::size_of::<K>() + 8 + 8 * plan.aggs.len();
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
            accounted: 0,
            arena_accounted: 0,
            retained: Vec::new(),
            retained_bytes: 0,
            gids: Vec::new(),
            flushes: 0,
            spill: None,
            runs: Vec::new(),
            spills: 0,
        },
        |w: &mut Worker<K>, m| {
            ctx.query.check_cancelled()?;
            let len = chunk_lens[m];
            let mut mcols = ctx.input.morsel();
            let sel = ctx.prewhere.select(ctx.input, m, len, &mut mcols, ctx.kern)?;
            let sel = sel.as_deref();
            let n = sel.map_or(len, |s| s.len());
            if n == 0 {
                ctx.input.skip();
                return Ok(());
            }
            ctx.input.read(m, &ctx.other_cols, &mut mcols)?;
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
                    .filter(|(k, _)| matches!(k, ScalarExpr::Computed(_)) || ctx.input.is_streamed(k.column()))
                    .map(|(_, a)| a.get_array_memory_size())
                    .sum()
            } else {
                0
            };
            let mut add = || -> Result<()> {
                let owned = ctx.agg_inputs(&mcols, len, sel)?;
                let inputs: Vec<Option<&ArrayRef>> = owned.iter().map(|a| a.as_ref()).collect();
                if plan.keys.is_empty() {
                    let unit = extract_unit(&extract);
                    K::hash_batch(std::slice::from_ref(&unit), ctx.kern, &mut w.hashes);
                    if w.table.add_unit(&unit, w.hashes[0], &inputs, sel, n, ctx.kern, &mut w.scratch)? {
                        return ctx.query.resize(&mut w.accounted, w.table.memory_size(), w.table.operator());
                    }
                }
                extract(&key_arrays, sel, n, &mut w.keys);
                K::hash_batch(&w.keys, ctx.kern, &mut w.hashes);
                // A worker may take any share of the morsels: reserve for all rows not yet
                // seen (an upper bound; capacity never touched costs address space only).
                let mut expect = total_rows.saturating_sub(w.rows_in - n);
                if K::BORROWS && key_bytes > 0 {
                    // Scattered rows will be flushed after about this many rows (from this
                    // morsel's key bytes per row): buffers sized for all rows would hold
                    // memory in proportion to the table. They are reused after a flush.
                    let per_flush = retain_limit / (key_bytes / len).max(1);
                    expect = expect.min(per_flush + per_flush / 8);
                }
                if let Some(limit) = spill_limit {
                    // A spilling worker empties its buffers at every spill: they need to
                    // hold one spill's rows, and take at most half of its budget.
                    expect = expect.min(limit / 2 / row_bytes);
                }
                if threshold == 0 {
                    w.table.grow_up(scatter, expect, &inputs, &new_accs);
                }
                w.table.add(&mut w.keys, &w.hashes, &inputs, sel, &mut w.scratch, ctx.kern)?;
                if w.table.size() > threshold {
                    w.table.grow_up(scatter, expect.saturating_sub(n), &inputs, &new_accs);
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
            if K::BORROWS && w.table.is_scatter() {
                // First, so that even on an error below nothing points to freed bytes.
                w.retained.extend(key_arrays.iter().map(|a| Arc::clone(a)));
                ctx.query.grow(key_bytes, "GROUP BY string keys")?;
                w.retained_bytes += key_bytes;
                if w.retained_bytes > retain_limit {
                    w.flushes += 1;
                    w.table.flush(&mut w.scratch.arena, &new_accs, &mut w.gids, ctx.kern)?;
                    w.retained.clear();
                    ctx.query.shrink(std::mem::take(&mut w.retained_bytes));
                    ctx.query.resize(&mut w.accounted, w.table.memory_size(), w.table.operator())?;
                    ctx.query.resize(&mut w.arena_accounted, w.scratch.arena.memory_size(), "GROUP BY string keys")?;
                }
            }
            added?;
            // A fixed table holds at most FIRST_KEYS_MAX groups: it never spills.
            if let Some(limit) = spill_limit
                && w.state_bytes() > limit
                && !matches!(w.table, Partial::Fixed(_))
            {
                w.spill(ctx, &new_accs, limit / 2 / row_bytes)?;
            }
            Ok(())
        },
    )?;
    let mut partials: Vec<Partial<K>> = Vec::with_capacity(workers.len());
    let mut arena_bytes = 0;
    let mut rows_in = 0;
    let mut partial_flushes = 0;
    let mut spills = 0;
    let mut spilled = Spilled::default();
    for w in workers {
        rows_in += w.rows_in;
        partial_flushes += w.flushes;
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
        ctx.pool.install(|| finalize_partitioned(partials, &spilled, &new_accs, ctx.kern, ctx.query, &finish))?
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
            two_level,
            rows_in,
            hash_table_bytes,
            partial_flushes,
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
    let Some(want) = ctx.first_keys else { return Ok(None) };
    let budget = plan.table.num_rows() / 8;
    let (mut seen, mut keys, mut hashes) = (0, Vec::new(), Vec::new());
    let mut table = GroupTable::<K>::new(Vec::new(), want);
    for (m, &len) in plan.table.chunk_lens().iter().enumerate() {
        if m > 0 && seen >= budget {
            break;
        }
        seen += len;
        ctx.query.check_cancelled()?;
        let mut mcols = ctx.input.morsel();
        let sel = ctx.prewhere.select(ctx.input, m, len, &mut mcols, ctx.kern)?;
        let sel = sel.as_deref();
        let n = sel.map_or(len, |s| s.len());
        if n == 0 {
            continue;
        }
        ctx.input.read(m, &ctx.other_cols, &mut mcols)?;
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

fn output_schema(ctx: &Ctx<'_>) -> Result<SchemaRef> {
    let plan = ctx.plan;
    let accs: Vec<DataType> = ctx.new_accs()?.iter().map(|a| a.output_type()).collect();
    let fields: Vec<Field> = plan
        .output
        .iter()
        .map(|(name, src)| {
            let dt: DataType = match src {
                AggOutput::Key(i) => plan.scalar_type(&plan.keys[*i]),
                AggOutput::Agg(j) => accs[*j].clone(),
                AggOutput::Expr(p) => plan.projections[*p].data_type(),
            };
            Field::new(name, dt, true)
        })
        .collect();
    Ok(Arc::new(Schema::new(fields)))
}

fn sort_value<'k, K>(
    t: &'k GroupTable<K>,
    g: u32,
    out: AggOutput,
    decode: &impl Fn(&'k K, usize) -> OrdVal<'k>,
) -> OrdVal<'k> {
    match out {
        AggOutput::Key(i) => decode(&t.keys[g as usize], i),
        AggOutput::Agg(j) => t.accs[j].value(g),
        // `select_groups` never orders by a projection (it keeps every group instead).
        AggOutput::Expr(_) => OrdVal::Null,
    }
}

/// Compares two values under one sort key (direction and NULL placement).
fn cmp_key(a: &OrdVal<'_>, b: &OrdVal<'_>, k: &SortKey) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    match (matches!(a, OrdVal::Null), matches!(b, OrdVal::Null)) {
        (true, true) => Equal,
        (true, false) => if k.nulls_first { Less } else { Greater },
        (false, true) => if k.nulls_first { Greater } else { Less },
        _ => {
            let o = a.cmp(b);
            if k.descending { o.reverse() } else { o }
        }
    }
}

fn cmp_all(a: &[OrdVal<'_>], b: &[OrdVal<'_>], keys: &[SortKey]) -> std::cmp::Ordering {
    for ((x, y), k) in a.iter().zip(b).zip(keys) {
        let o = cmp_key(x, y, k);
        if o.is_ne() {
            return o;
        }
    }
    std::cmp::Ordering::Equal
}

/// The groups of `t` that can appear in the answer.
fn select_groups<'k, K: GroupKey>(
    t: &'k GroupTable<K>,
    order: &OrderLimit,
    plan: &AggregatePlan,
    decode: &impl Fn(&'k K, usize) -> OrdVal<'k>,
    tie: Option<&TieKey>,
    query: &QueryContext,
) -> Result<Vec<u32>> {
    let all = || Ok((0..t.len() as u32).collect());
    if plan.having.is_some()
        || order.order_by.iter().any(|k| matches!(plan.output[k.output].1, AggOutput::Expr(_)))
    {
        // HAVING drops groups after this, and projections have no per-group value here:
        // every group is a candidate.
        return all();
    }
    let Some(limit) = order.limit.map(|l| l.saturating_add(order.offset)) else { return all() };
    if order.order_by.is_empty() {
        return Ok((0..t.len().min(limit) as u32).collect());
    }
    if limit > MAX_TOP_N {
        return all();
    }
    let entry = std::mem::size_of::<(Vec<OrdVal<'k>>, u32)>() + order.order_by.len() * std::mem::size_of::<OrdVal<'k>>();
    query.grow(limit.min(t.len()) * entry, "ORDER BY ... LIMIT top-N buffer")?;
    let keys = &order.order_by;
    let val = |g: u32, k: &SortKey| sort_value(t, g, plan.output[k.output].1, decode);
    // ORDER BY COUNT(..) first (Q33, Q34, Q19): the threshold check reads the counts as
    // integers, not through a sort value per group.
    let first_counts = match plan.output[keys[0].output].1 {
        AggOutput::Agg(j) => t.accs[j].counts(),
        _ => None,
    };
    // The ORDER BY keys after the first as one integer per group (`tie`), when they are
    // packed group keys: ties on the first key then cost one compare.
    let tie = tie.filter(|_| t.keys.first().is_some_and(|k| k.packed().is_some()));
    // `best` is sorted best-first and holds at most `limit` candidates; `worst_tie` caches
    // the tie key of its last one.
    let mut best: Vec<(Vec<OrdVal<'k>>, u32)> = Vec::with_capacity(limit + 1);
    let mut worst_tie: Option<Vec<u64>> = None;
    for g in 0..t.len() as u32 {
        if limit == 0 {
            break;
        }
        if g % 65_536 == 0 {
            query.check_cancelled()?;
        }
        if best.len() == limit {
            // Threshold check against the worst kept candidate, key by key, without
            // materialising this group's sort values (most groups stop at the first key).
            let worst = &best[limit - 1].0;
            if let (Some(c), OrdVal::Int(w)) = (first_counts, &worst[0]) {
                let v = i128::from(c[g as usize]);
                let ord = if keys[0].descending { w.cmp(&v) } else { v.cmp(w) };
                if ord.is_gt() {
                    continue;
                }
                if ord.is_eq()
                    && let Some(tk) = tie
                    && let Some(packed) = t.keys[g as usize].packed()
                {
                    let wt = worst_tie.get_or_insert_with(|| {
                        tk.of(t.keys[best[limit - 1].1 as usize].packed().expect("fixed layout"))
                    });
                    if !tk.cmp(packed, wt).is_lt() {
                        continue;
                    }
                }
            }
            let mut ord = std::cmp::Ordering::Equal;
            for (k, w) in keys.iter().zip(worst) {
                ord = cmp_key(&val(g, k), w, k);
                if ord.is_ne() {
                    break;
                }
            }
            if !ord.is_lt() {
                continue;
            }
        }
        let v: Vec<OrdVal<'k>> = keys.iter().map(|k| val(g, k)).collect();
        let pos = best.partition_point(|(b, _)| !cmp_all(b, &v, keys).is_gt());
        best.insert(pos, (v, g));
        best.truncate(limit);
        worst_tie = None;
    }
    Ok(best.into_iter().map(|(_, g)| g).collect())
}

fn emit<'k, K>(
    t: &'k GroupTable<K>,
    gids: &[u32],
    plan: &AggregatePlan,
    schema: &SchemaRef,
    decode: &impl Fn(&'k K, usize) -> OrdVal<'k>,
) -> Result<RecordBatch> {
    let mut cols: Vec<ArrayRef> = Vec::with_capacity(plan.output.len());
    for ((_, src), field) in plan.output.iter().zip(schema.fields()) {
        cols.push(match src {
            AggOutput::Key(i) => {
                let vals: Vec<OrdVal<'k>> = gids.iter().map(|&g| decode(&t.keys[g as usize], *i)).collect();
                key_array(field.data_type(), &vals)?
            }
            AggOutput::Agg(j) => t.accs[*j].emit(gids)?,
            // Placeholder, computed below from the other outputs.
            AggOutput::Expr(_) => arrow::array::new_null_array(field.data_type(), 0),
        });
    }
    if plan.output.iter().any(|(_, o)| matches!(o, AggOutput::Expr(_))) {
        let base: Vec<Option<ArrayRef>> = plan
            .output
            .iter()
            .zip(&cols)
            .map(|((_, o), c)| (!matches!(o, AggOutput::Expr(_))).then(|| c.clone()))
            .collect();
        for (i, (_, o)) in plan.output.iter().enumerate() {
            if let AggOutput::Expr(p) = o {
                cols[i] = evaluate_expr(&plan.projections[*p], &base, gids.len())?;
            }
        }
    }
    Ok(RecordBatch::try_new(schema.clone(), cols)?)
}

/// Rows above which a sort on two or more keys compares Arrow row-format keys (one memcmp
/// per comparison) instead of Arrow's column-by-column `lexsort_to_indices`.
const ROW_FORMAT_SORT_ROWS: usize = 8_192;

/// Sorts `batch` by the ORDER BY keys (exactly; only the top `offset + limit` rows when
/// there is a limit), applies OFFSET/LIMIT and keeps the first `visible` columns.
pub(crate) fn order_and_limit(batch: RecordBatch, order: &OrderLimit, visible: usize) -> Result<RecordBatch> {
    let want = order.limit.map(|l| l.saturating_add(order.offset));
    let batch = if order.order_by.is_empty() {
        batch
    } else if order.order_by.len() > 1 && batch.num_rows() > ROW_FORMAT_SORT_ROWS {
        let idx = crate::sort::row_format_indices(&batch, &order.order_by, want)?;
        take_record_batch(&batch, &idx)?
    } else {
        let sort_cols: Vec<SortColumn> = order
            .order_by
            .iter()
            .map(|k| SortColumn {
                // Arrow sorts floats by `total_cmp`: Tessera's order once canonical.
                values: canonical_array(batch.column(k.output)),
                options: Some(SortOptions { descending: k.descending, nulls_first: k.nulls_first }),
            })
            .collect();
        let idx = lexsort_to_indices(&sort_cols, want.map(|w| w.min(batch.num_rows())))?;
        take_record_batch(&batch, &idx)?
    };
    let start = order.offset.min(batch.num_rows());
    let end = want.unwrap_or(usize::MAX).min(batch.num_rows());
    let batch = batch.slice(start, end.saturating_sub(start));
    Ok(batch.project(&(0..visible).collect::<Vec<_>>())?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, BinaryArray, Int32Array, StringArray};

    /// `spread` puts each kept value at its row (strings sharing the compact bytes, NULLs
    /// kept), for sliced inputs, selections at both ends, empty gaps and fixed-width types.
    #[test]
    fn spread_puts_kept_values_at_their_rows() {
        let base = StringArray::from(vec![Some("zz"), Some("ab"), None, Some(""), Some("жёлтый"), Some("x")]);
        let compact: ArrayRef = Arc::new(base.slice(1, 5)); // "ab", NULL, "", "жёлтый", "x"
        for sel in [vec![0u32, 3, 4, 8, 9], vec![2, 5, 6, 7, 11], vec![0, 1, 2, 3, 4]] {
            let len = 12;
            let out = spread(&compact, &sel, len).unwrap();
            assert_eq!(out.len(), len);
            let out = out.as_string::<i32>();
            let kept = compact.as_string::<i32>();
            for (j, &r) in sel.iter().enumerate() {
                assert_eq!(out.is_valid(r as usize), kept.is_valid(j), "{sel:?} row {r}");
                if kept.is_valid(j) {
                    assert_eq!(out.value(r as usize), kept.value(j), "{sel:?} row {r}");
                }
            }
        }
        let bin: ArrayRef = Arc::new(BinaryArray::from(vec![&b"\xff\x00"[..], b"q"]));
        let out = spread(&bin, &[1, 4], 6).unwrap();
        assert_eq!(out.as_binary::<i32>().value(1), b"\xff\x00");
        assert_eq!(out.as_binary::<i32>().value(4), b"q");
        let ints: ArrayRef = Arc::new(Int32Array::from(vec![Some(7), None]));
        let out = spread(&ints, &[0, 5], 6).unwrap();
        assert_eq!(out.as_primitive::<arrow::datatypes::Int32Type>().value(0), 7);
        assert!(out.is_null(5));
        assert!(spread(&compact, &[3, 1, 2, 4, 5], 12).is_err());
    }
}
