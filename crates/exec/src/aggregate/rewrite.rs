//! Aggregations answered another way than by the hash GROUP BY of `run`: from the
//! table's metadata, or COUNT(DISTINCT) rewritten as a GROUP BY of the distinct values.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::row::{RowConverter, SortField};
use tessera_common::{Error, Result, Settings};

use super::{execute, group_by};
use super::output::{apply_having, order_and_limit};
use crate::Profile;
use crate::accum::Accumulator;
use crate::context::QueryContext;
use crate::expr::evaluate as evaluate_expr;
use crate::plan::{AggExpr, AggFunc, AggOutput, AggregatePlan, OrderLimit, ScalarExpr};

/// `SELECT COUNT(*), MIN(c), MAX(c) .. FROM t` with no WHERE and no GROUP BY, answered
/// from the table's metadata: the row count from part row counts (Parquet footers), MIN and
/// MAX from the min/max index (the minimum of the per-range minimums, through the same
/// accumulator as the rows would go: one NULL handling and order). No column is read.
/// `None` when an aggregate needs the rows.
pub(super) fn from_metadata(plan: &AggregatePlan) -> Result<Option<(RecordBatch, Profile)>> {
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
                let per_range = if a.func == AggFunc::Min { lo } else { hi };
                acc.resize(1);
                acc.update(&vec![0; per_range.len()], Some(&per_range), None)?;
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
pub(super) fn distinct_as_groups(
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
    // Strings are kept as 128-bit hashes, as ClickHouse's `uniqExact` does: no key bytes
    // copied or compared (ClickBench Q6, 10M rows: 0.25 -> 0.13 s).
    let hashed = matches!(plan.scalar_type(&x), DataType::Utf8 | DataType::Binary);
    let (batches, mut profile) = group_by(&distinct_rows(plan, vec![x]), settings, pool, query, hashed)?;
    // NULL is one group of the GROUP BY; COUNT(DISTINCT) skips it.
    let n: usize = batches.iter().map(|b| b.num_rows() - b.column(0).null_count()).sum();
    let count: ArrayRef = Arc::new(arrow::array::Int64Array::from(vec![n as i64]));
    let out = one_group_output(plan, &vec![count; plan.aggs.len()])?;
    profile.groups = 1;
    Ok(Some((out, profile)))
}

/// `SELECT keys FROM t [WHERE ..] GROUP BY keys` over `plan`'s table and WHERE (`keys` over
/// its columns and computed expressions): the distinct values the COUNT(DISTINCT) rewrites
/// aggregate, one output column per key.
fn distinct_rows(plan: &AggregatePlan, keys: Vec<ScalarExpr>) -> AggregatePlan {
    AggregatePlan {
        table: plan.table.clone(),
        filter: plan.filter.clone(),
        output: (0..keys.len()).map(|i| (format!("k{i}"), AggOutput::Key(i))).collect(),
        visible: keys.len(),
        keys,
        computed: plan.computed.clone(),
        aggs: Vec::new(),
        projections: Vec::new(),
        having: None,
        order: OrderLimit::default(),
    }
}

/// Whether `f` counts distinct values per group: `COUNT(DISTINCT)`, and ClickHouse's
/// approximate `uniq`, `uniqHLL12`, `uniqCombined`, whose exact answer is within their
/// error bounds. Per group over fixed-width keys and values the GROUP BY of pairs below
/// answers all four exactly: faster than a sketch per group (`uniq(UserID)` per RegionID,
/// 10M rows, 2 threads: 0.43 s with sampling sets, 0.11 s as pairs). Global counts keep
/// their sketches (bounded memory, and faster than the exact count there).
fn counts_distinct(f: AggFunc) -> bool {
    matches!(f, AggFunc::CountDistinct | AggFunc::Uniq | AggFunc::UniqHll12 | AggFunc::UniqCombined)
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
pub(super) fn distinct_per_group(
    plan: &AggregatePlan,
    settings: &Settings,
    pool: &rayon::ThreadPool,
    query: &QueryContext,
) -> Result<Option<(Vec<RecordBatch>, Profile)>> {
    let Some(x) = plan.aggs.first().and_then(|a| a.input) else { return Ok(None) };
    if plan.keys.is_empty() || !plan.aggs.iter().all(|a| counts_distinct(a.func) && a.input == Some(x)) {
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
    let (batches, inner) = execute(&distinct_rows(plan, plan.keys.iter().copied().chain([x]).collect()), settings, pool, query)?;
    // A GROUP BY answers with at least one batch; were it ever none, the plan runs as written.
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
        aggs: plan.aggs.iter().map(|_| AggExpr { func: AggFunc::Count, input: Some(ScalarExpr::Column(nk)) }).collect(),
        projections: plan.projections.clone(),
        having: plan.having.clone(),
        output: plan.output.clone(),
        visible: plan.visible,
        order: plan.order.clone(),
    };
    let (out, profile) = execute(&outer, settings, pool, query)?;
    Ok(Some((out, Profile { layout: inner.layout, rows_in: inner.rows_in, ..profile })))
}

/// `SELECT keys, COUNT(DISTINCT x) [, ..], other aggregates .. GROUP BY keys ..` (ClickBench
/// Q10: SUM, COUNT, AVG beside the distinct count): the other aggregates run as their own
/// GROUP BY (no set per group), the distinct counts as [`distinct_per_group`]'s GROUP BY of
/// (keys, x) pairs, and the two answers are joined on the keys (both have every group of
/// the filtered rows) before projections, HAVING and ORDER BY / LIMIT. Two scans of the
/// table instead of one, each without a hash set per group: the sets are what made Q10
/// slow. Same shapes as [`distinct_per_group`] (fixed-width keys and `x`); `None` otherwise.
pub(super) fn distinct_beside_others(
    plan: &AggregatePlan,
    settings: &Settings,
    pool: &rayon::ThreadPool,
    query: &QueryContext,
) -> Result<Option<(Vec<RecordBatch>, Profile)>> {
    let is_distinct = |a: &AggExpr| counts_distinct(a.func);
    let Some(x) = plan.aggs.iter().find(|a| is_distinct(a)).and_then(|a| a.input) else { return Ok(None) };
    // GROUP BY .. LIMIT without ORDER BY keeps the first keys in table order
    // (`optimize_trivial_group_by_limit_query`): the plain path does that.
    if plan.keys.is_empty()
        || (plan.order.order_by.is_empty() && plan.order.limit.is_some())
        || plan.aggs.iter().all(is_distinct)
        || plan.aggs.iter().any(|a| is_distinct(a) && a.input != Some(x))
    {
        return Ok(None);
    }
    let string = |e: &ScalarExpr| matches!(plan.scalar_type(e), DataType::Utf8 | DataType::Binary);
    if plan.keys.iter().chain([&x]).any(string) {
        return Ok(None);
    }
    let plan = &super::with_key_tiebreak(plan);
    let nk = plan.keys.len();
    let keys_out = || (0..nk).map(|i| (format!("k{i}"), AggOutput::Key(i)));
    let others: Vec<usize> = (0..plan.aggs.len()).filter(|&j| !is_distinct(&plan.aggs[j])).collect();
    let bare = |aggs: Vec<AggExpr>| {
        let n = aggs.len();
        AggregatePlan {
            output: keys_out().chain((0..n).map(|j| (format!("a{j}"), AggOutput::Agg(j)))).collect(),
            visible: nk + n,
            aggs,
            projections: Vec::new(),
            having: None,
            order: OrderLimit::default(),
            ..plan.clone()
        }
    };
    let counts_plan = bare(vec![AggExpr { func: AggFunc::CountDistinct, input: Some(x) }]);
    let Some((counts, profile)) = distinct_per_group(&counts_plan, settings, pool, query)? else { return Ok(None) };
    // The counts are held while the other aggregates run, and both answers, their key rows
    // and the join's map while they are joined: all of it is the query's memory.
    let batch_bytes = |b: &[RecordBatch]| b.iter().map(RecordBatch::get_array_memory_size).sum::<usize>();
    let mut accounted = 0;
    query.resize(&mut accounted, batch_bytes(&counts), "COUNT(DISTINCT) per group")?;
    let joined = (|| {
        let (main, main_profile) =
            execute(&bare(others.iter().map(|&j| plan.aggs[j].clone()).collect()), settings, pool, query)?;
        query.resize(&mut accounted, 2 * (batch_bytes(&counts) + batch_bytes(&main)), "COUNT(DISTINCT) per group")?;
        let out = join_counts(plan, &others, &main, &counts, nk, query, &mut accounted)?;
        Ok::<_, Error>((out, main_profile))
    })();
    query.shrink(accounted);
    let ((out, groups), main_profile) = joined?;
    let profile = Profile { groups, rows_in: main_profile.rows_in, ..main_profile }.and(&profile);
    Ok(Some((vec![out], profile)))
}

/// The answer of [`distinct_beside_others`] from the other aggregates' groups (`main`:
/// keys, then the aggregates `others` in order) and the distinct counts (`counts`: keys,
/// then the count), joined on the keys; and the number of groups.
fn join_counts(
    plan: &AggregatePlan,
    others: &[usize],
    main: &[RecordBatch],
    counts: &[RecordBatch],
    nk: usize,
    query: &QueryContext,
    accounted: &mut usize,
) -> Result<(RecordBatch, usize)> {
    let (Some(main_schema), Some(counts_schema)) = (main.first().map(|b| b.schema()), counts.first().map(|b| b.schema())) else {
        return Err(Error::internal("an aggregation answered without a batch"));
    };
    let main = arrow::compute::concat_batches(&main_schema, main)?;
    let counts = arrow::compute::concat_batches(&counts_schema, counts)?;
    // Join: each group of `main` finds its distinct count by its key row (NULL keys equal).
    let fields: Vec<SortField> = main.columns()[..nk].iter().map(|c| SortField::new(c.data_type().clone())).collect();
    let conv = RowConverter::new(fields)?;
    let count_keys = conv.convert_columns(&counts.columns()[..nk])?;
    let main_keys = conv.convert_columns(&main.columns()[..nk])?;
    let rows_bytes = count_keys.size() + main_keys.size() + count_keys.num_rows() * 32;
    query.resize(accounted, *accounted + rows_bytes, "COUNT(DISTINCT) per group")?;
    let at: HashMap<&[u8], usize> = (0..count_keys.num_rows()).map(|r| (count_keys.row(r).data(), r)).collect();
    let picks = (0..main_keys.num_rows())
        .map(|r| at.get(main_keys.row(r).data()).map(|&i| i as u32))
        .collect::<Option<Vec<u32>>>()
        .ok_or_else(|| Error::internal("a group without its distinct count"))?;
    let distinct = arrow::compute::take(counts.column(nk), &arrow::array::UInt32Array::from(picks), None)?;
    let values: Vec<ArrayRef> = (0..plan.aggs.len())
        .map(|j| match others.binary_search(&j) {
            Ok(k) => main.column(nk + k).clone(),
            Err(_) => distinct.clone(),
        })
        .collect();
    let out = groups_output(plan, &main.columns()[..nk], &values, main.num_rows())?;
    Ok((out, main.num_rows()))
}

/// The answer of a key-less aggregation from its aggregates' values (`values[j]` one row,
/// aggregate `j`): output columns, projections, HAVING, ORDER BY / LIMIT.
fn one_group_output(plan: &AggregatePlan, values: &[ArrayRef]) -> Result<RecordBatch> {
    if !plan.keys.is_empty() {
        return Err(Error::internal("group key without GROUP BY"));
    }
    groups_output(plan, &[], values, 1)
}

/// The answer of an aggregation from its groups: `keys[i]` the values of key `i` and
/// `values[j]` those of aggregate `j`, `rows` groups; output columns, projections, HAVING,
/// ORDER BY / LIMIT (ties as the plan's order leaves them: callers break them by the keys
/// first, see `with_key_tiebreak`).
fn groups_output(plan: &AggregatePlan, keys: &[ArrayRef], values: &[ArrayRef], rows: usize) -> Result<RecordBatch> {
    let mut cols: Vec<Option<ArrayRef>> = Vec::with_capacity(plan.output.len());
    for (_, o) in &plan.output {
        cols.push(match o {
            AggOutput::Agg(j) => Some(values.get(*j).ok_or_else(|| Error::internal("aggregate out of range"))?.clone()),
            AggOutput::Key(i) => Some(keys.get(*i).ok_or_else(|| Error::internal("group key without GROUP BY"))?.clone()),
            AggOutput::Expr(_) => None,
        });
    }
    let base = cols.clone();
    for (c, (_, o)) in cols.iter_mut().zip(&plan.output) {
        if let AggOutput::Expr(p) = o {
            *c = Some(evaluate_expr(&plan.projections[*p], &base, rows)?);
        }
    }
    let cols: Vec<ArrayRef> = cols.into_iter().map(|c| c.expect("every output computed")).collect();
    let fields: Vec<Field> =
        plan.output.iter().zip(&cols).map(|((name, _), c)| Field::new(name, c.data_type().clone(), true)).collect();
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)?;
    order_and_limit(apply_having(batch, plan.having.as_ref())?, &plan.order, plan.visible)
}
