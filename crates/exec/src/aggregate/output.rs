//! The answer of a hash GROUP BY: the top-N candidates of each final table (a bounded
//! buffer with a threshold on the first ORDER BY key), their output columns, HAVING, and the
//! exact ORDER BY / LIMIT / OFFSET of the rows that remain.

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, RecordBatch};
use arrow::compute::{SortColumn, SortOptions, lexsort_to_indices, take_record_batch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use tessera_common::float::canonical_array;
use tessera_common::{Error, Result};

use super::Ctx;
use crate::accum::OrdVal;
use crate::context::QueryContext;
use crate::expr::{Expr, evaluate as evaluate_expr};
use crate::hashtable::GroupTable;
use crate::keys::{GroupKey, TieKey, key_array};
use crate::plan::{AggOutput, AggregatePlan, OrderLimit, SortKey};

/// Top-N buffers above this size fall back to materialising all groups and sorting.
const MAX_TOP_N: usize = 100_000;

/// Keeps the rows of `batch` (the aggregation's output columns) where `having` is TRUE;
/// all of them without a HAVING.
pub(super) fn apply_having(batch: RecordBatch, having: Option<&Expr>) -> Result<RecordBatch> {
    let Some(having) = having else { return Ok(batch) };
    let cols: Vec<Option<ArrayRef>> = batch.columns().iter().cloned().map(Some).collect();
    let keep = evaluate_expr(having, &cols, batch.num_rows())?;
    let keep = keep.as_boolean_opt().ok_or_else(|| Error::internal("HAVING of a non-boolean type"))?;
    Ok(arrow::compute::filter_record_batch(&batch, &crate::expr::true_mask(keep))?)
}

pub(super) fn output_schema(ctx: &Ctx<'_>) -> Result<SchemaRef> {
    let plan = ctx.plan;
    let accs: Vec<DataType> = ctx.new_accs()?.iter().map(|a| a.output_type()).collect();
    let fields: Vec<Field> = plan
        .output
        .iter()
        .map(|(name, src)| {
            let dt: DataType = match src {
                // A lazy key's bytes until its strings are read (`read_lazy_keys`).
                AggOutput::Key(_) if ctx.lazy_key => DataType::Binary,
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
pub(super) fn select_groups<'k, K: GroupKey>(
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
    // A [`TopBuffer`] holds up to twice `limit` candidates.
    let reserved = limit.saturating_mul(2).min(t.len()) * entry;
    query.grow(reserved, "ORDER BY ... LIMIT top-N buffer")?;
    let out = top_groups(t, &order.order_by, plan, decode, tie, limit, query);
    query.shrink(reserved);
    out
}

/// The best `limit` groups of `t` under `keys` (see [`select_groups`]), best first.
fn top_groups<'k, K: GroupKey>(
    t: &'k GroupTable<K>,
    keys: &[SortKey],
    plan: &AggregatePlan,
    decode: &impl Fn(&'k K, usize) -> OrdVal<'k>,
    tie: Option<&TieKey>,
    limit: usize,
    query: &QueryContext,
) -> Result<Vec<u32>> {
    if limit == 0 {
        return Ok(Vec::new());
    }
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
    if let (Some(counts), Some(tk)) = (first_counts, tie) {
        // `tie` exists only when every ORDER BY key after the first is a packed group key.
        return top_counts_packed(t, counts, keys[0].descending, tk, limit, query);
    }
    let order = |a: &(Vec<OrdVal<'k>>, u32), b: &(Vec<OrdVal<'k>>, u32)| cmp_all(&a.0, &b.0, keys);
    let mut best: TopBuffer<(Vec<OrdVal<'k>>, u32)> = TopBuffer::new(limit, t.len());
    for g in 0..t.len() as u32 {
        if g % 65_536 == 0 {
            query.check_cancelled()?;
        }
        if let Some((worst, _)) = best.worst() {
            // Threshold check against the worst kept candidate, key by key, without
            // materialising this group's sort values (most groups stop at the first key).
            if let (Some(c), OrdVal::Int(w)) = (first_counts, &worst[0]) {
                let v = i128::from(c[g as usize]);
                let ord = if keys[0].descending { w.cmp(&v) } else { v.cmp(w) };
                if ord.is_gt() {
                    continue;
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
        best.push((keys.iter().map(|k| val(g, k)).collect(), g), order);
    }
    Ok(best.finish(order).into_iter().map(|(_, g)| g).collect())
}

/// The best `limit` of a stream of candidates under an order (less is better), in amortised
/// O(1) per candidate: candidates are appended until there are `2 * limit`, then a
/// selection (`select_nth_unstable_by`, linear) keeps the best `limit`, and the worst of
/// those becomes the threshold a caller checks before pushing (a candidate must be better).
/// A vector kept sorted by insertion instead moved `limit` entries per candidate: Q40's
/// `LIMIT 10 OFFSET 1000` over 650K groups spent a third of its time there (100M rows).
/// ClickHouse's sorting with a limit and DuckDB's top-N keep a boundary value the same way.
struct TopBuffer<E> {
    items: Vec<E>,
    limit: usize,
    /// Whether `items[limit - 1]` is the threshold (set by a compaction).
    bounded: bool,
}

impl<E> TopBuffer<E> {
    /// A buffer for the best `limit` of at most `candidates` candidates.
    fn new(limit: usize, candidates: usize) -> Self {
        TopBuffer { items: Vec::with_capacity(limit.saturating_mul(2).min(candidates)), limit, bounded: false }
    }

    /// The candidate a new one must beat, once there is one (at least `limit` kept; none
    /// while `limit` is 0).
    fn worst(&self) -> Option<&E> {
        self.limit.checked_sub(1).and_then(|i| self.items.get(i)).filter(|_| self.bounded)
    }

    /// Adds a candidate (better than [`TopBuffer::worst`], the caller checked).
    fn push(&mut self, e: E, order: impl Fn(&E, &E) -> std::cmp::Ordering) {
        self.items.push(e);
        if self.items.len() >= self.limit.saturating_mul(2).max(1) {
            self.keep_best(&order);
            self.bounded = true;
        }
    }

    /// Keeps the best `limit` candidates, the worst of them at `limit - 1`.
    fn keep_best(&mut self, order: &impl Fn(&E, &E) -> std::cmp::Ordering) {
        if self.items.len() > self.limit && self.limit > 0 {
            self.items.select_nth_unstable_by(self.limit - 1, order);
        }
        self.items.truncate(self.limit);
    }

    /// The best `limit` candidates, best first.
    fn finish(mut self, order: impl Fn(&E, &E) -> std::cmp::Ordering) -> Vec<E> {
        self.keep_best(&order);
        self.items.sort_unstable_by(order);
        self.items
    }
}

/// The top-`limit` groups of `t` ordered by a COUNT (`counts`, DESC when `descending`)
/// and then by the packed group keys of `tie`: the loop reads a count and a packed key per
/// group and compares integers only (Q33, Q19: millions of groups tied at `COUNT = 1`).
/// Best first, like [`select_groups`]; `limit` is above 0 ([`top_groups`] answers 0).
fn top_counts_packed<K: GroupKey>(
    t: &GroupTable<K>,
    counts: &[i64],
    descending: bool,
    tie: &TieKey,
    limit: usize,
    query: &QueryContext,
) -> Result<Vec<u32>> {
    // The count mapped so that a smaller value sorts first.
    let rank = |c: i64| if descending { -i128::from(c) } else { i128::from(c) };
    let packed = |g: usize| t.keys[g].packed().unwrap_or(0);
    // (rank, tie words, group); once bounded, the worst kept entry's rank and first tie
    // word are kept beside it so most groups cost two integer compares.
    let order = |a: &(i128, Vec<u64>, u32), b: &(i128, Vec<u64>, u32)| (a.0, &a.1).cmp(&(b.0, &b.1));
    let mut best: TopBuffer<(i128, Vec<u64>, u32)> = TopBuffer::new(limit, t.len());
    let (mut worst_rank, mut worst_first) = (i128::MAX, u64::MAX);
    let first = tie.first_int();
    let n = t.len().min(counts.len());
    for start in (0..n).step_by(65_536) {
        query.check_cancelled()?;
        let end = n.min(start + 65_536);
        let mut i = start;
        while i < end {
            let full = best.worst().is_some();
            if let (true, Some(part)) = (full, first) {
                // Skip loop: nearly every group loses to the worst candidate on its count,
                // or ties it and loses on the first key word; one count and one key read,
                // integer compares and no branch but the loop's per group. (The worst
                // count is its rank undone: counts fit i64.)
                let worst_count = (if descending { -worst_rank } else { worst_rank }) as i64;
                while i < end {
                    let c = counts[i];
                    let beats = if descending { c > worst_count } else { c < worst_count };
                    if beats || (c == worst_count && part.of_int(packed(i)) <= worst_first) {
                        break;
                    }
                    i += 1;
                }
                if i == end {
                    break;
                }
            }
            let g = i;
            i += 1;
            let r = rank(counts[g]);
            if full && r > worst_rank {
                continue;
            }
            let p = packed(g);
            if let Some(worst) = best.worst().filter(|_| r == worst_rank) {
                let first = tie.first_of(p);
                if first > worst_first || (first == worst_first && !tie.cmp(p, &worst.1).is_lt()) {
                    continue;
                }
            }
            best.push((r, tie.of(p), g as u32), order);
            if let Some(w) = best.worst() {
                (worst_rank, worst_first) = (w.0, w.1[0]);
            }
        }
    }
    Ok(best.finish(order).into_iter().map(|(_, _, g)| g).collect())
}

pub(super) fn emit<'k, K>(
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
    use super::TopBuffer;
    use proptest::prelude::*;

    /// The candidates a caller would push (better than the threshold) through a buffer.
    fn top(values: &[(u8, u32)], limit: usize) -> Vec<(u8, u32)> {
        let order = |a: &(u8, u32), b: &(u8, u32)| a.cmp(b);
        let mut best = TopBuffer::new(limit, values.len());
        for &v in values {
            if best.worst().is_some_and(|w| !order(&v, w).is_lt()) {
                continue;
            }
            best.push(v, order);
        }
        best.finish(order)
    }

    proptest! {
        /// The best `limit` of a stream, best first, equal to a full sort's prefix; values
        /// tie often on the first field (as counts do) and never on both.
        #[test]
        fn top_buffer_keeps_the_best(firsts in prop::collection::vec(0u8..4, 0..600), limit in 0usize..40) {
            let values: Vec<(u8, u32)> = firsts.iter().enumerate().map(|(i, &c)| (c, (i as u32).wrapping_mul(2_654_435_761))).collect();
            let mut sorted = values.clone();
            sorted.sort();
            sorted.truncate(limit);
            prop_assert_eq!(top(&values, limit), sorted);
        }
    }
}
