//! PREWHERE by condition: the WHERE clause's conjuncts evaluated one at a time, cheapest
//! first, each reading its columns only for morsels where a row is still in, and evaluated
//! only on the rows still in when they are few.
//!
//! ClickHouse moves the conditions of a WHERE to PREWHERE and orders them so that cheap,
//! selective conditions run first (`optimize_move_to_prewhere`, and the per-step
//! `PREWHERE` chain of its MergeTree reader); DuckDB reorders filter conjuncts by a cost
//! estimate (`ExpressionHeuristics`). Here a conjunct's cost class comes from its shape and
//! the types of its columns ([`cost`]); ties keep the written order.
//!
//! `WHERE a AND b` keeps a row iff every conjunct is TRUE (FALSE and UNKNOWN both drop it),
//! so the order changes only the work, not the answer; a conjunct that would fail on a row
//! (an expression error) is not evaluated on rows an earlier conjunct dropped, as in
//! ClickHouse's short-circuit evaluation.

use std::ops::Range;

use arrow::array::{ArrayRef, BooleanBufferBuilder};
use arrow::buffer::BooleanBuffer;
use arrow::datatypes::{DataType, Schema};
use tessera_common::Result;
use tessera_kernels::Kernels;

use crate::filter::{Selection, evaluate, selection};
use crate::morsel::{Input, MorselColumns};
use crate::plan::{Predicate, predicate_columns};

/// Below this share of a morsel's rows still in, a conjunct is evaluated on those rows only
/// (gathered), above it on the whole morsel (no gather).
pub(crate) const GATHER_BELOW: f64 = 0.25;

/// Below this share of a morsel's rows left in by the query condition cache, the WHERE
/// starts from those rows (its first step gathered), above it from the whole morsel: a
/// gathered read of cached granules skips the blocks of the others, where a whole read
/// decodes them all (10M rows from disk, no block cache, 2 threads: Q22 0.081-0.086 s with
/// a quarter, 0.046-0.047 s with a half; Q23 0.177-0.178 s, 0.123-0.126 s).
const CACHED_BELOW: f64 = 0.5;

/// One conjunct and the columns it reads (ascending).
#[derive(Debug)]
struct Step {
    pred: Predicate,
    cols: Vec<usize>,
    /// [`cost`] class.
    cost: u8,
    /// Its key in the table's query condition cache ([`condition_key`]); `None`: not cached.
    cache_key: Option<u128>,
    /// The one integer column it reads where it is not TRUE at zero ([`sparse_column`]):
    /// evaluated on that column's non-zero rows only where the source stores them sparsely.
    sparse: Option<usize>,
}

/// The WHERE clause of a query as ordered PREWHERE steps.
#[derive(Debug, Default)]
pub(crate) struct Prewhere {
    steps: Vec<Step>,
    /// The table's schema, for the cost of an extra step.
    schema: Option<Schema>,
    /// The query condition cache's key of the whole WHERE when it has several conjuncts,
    /// all cacheable: its rows are known exactly once a morsel is done, whichever steps ran
    /// on which rows (ClickHouse caches the whole filter too). `None` otherwise.
    whole: Option<u128>,
}

/// Relative cost per row of evaluating `p` over columns of `schema`: 0 fixed-width
/// comparisons, 1 string comparisons (equality, emptiness), 2 general expressions,
/// 3 LIKE (a substring search per row). A compound costs its most expensive part.
fn cost(p: &Predicate, schema: &Schema) -> u8 {
    let is_string = |c: usize| {
        matches!(
            schema.fields().get(c).map(|f| f.data_type()),
            Some(DataType::Utf8 | DataType::Binary | DataType::LargeUtf8 | DataType::LargeBinary | DataType::Utf8View)
        )
    };
    match p {
        Predicate::Const(_) => 0,
        Predicate::Cmp { column, .. } => u8::from(is_string(*column)),
        Predicate::CmpColumns { left, right, .. } => u8::from(is_string(*left) || is_string(*right)),
        Predicate::Not(p) => cost(p, schema),
        Predicate::And(ps) | Predicate::Or(ps) => ps.iter().map(|p| cost(p, schema)).max().unwrap_or(0),
        Predicate::Expr(_) => 2,
        Predicate::Like { .. } => 3,
    }
}

/// The query condition cache's key of conjunct `p` (a hash of its plan form: column
/// positions, operator, constants), or `None` when its value may depend on more than the
/// row (a general expression: `rand()`, `now()`) or it is a bare constant.
fn condition_key(p: &Predicate) -> Option<u128> {
    (!has_expr(p) && !matches!(p, Predicate::Const(_))).then(|| xxhash_rust::xxh3::xxh3_128(format!("{p:?}").as_bytes()))
}

/// The column of a conjunct that reads one integer column, holds no general expression and
/// is not TRUE where that column is zero (FALSE or UNKNOWN: `c <> 0`, `c = 3`, `c > 0`):
/// its rows are among the column's non-zero ones, so where a source stores the column
/// sparsely ([`Input::read_sparse`]) it is evaluated on those only. `None` otherwise.
fn sparse_column(p: &Predicate, cols: &[usize], schema: &Schema) -> Option<usize> {
    let &[c] = cols else { return None };
    let dt = schema.fields().get(c)?.data_type();
    if has_expr(p) || !tessera_common::is_int_like(dt) {
        return None;
    }
    let zero = arrow::compute::cast(&arrow::array::Int64Array::from(vec![0i64]), dt).ok()?;
    let mut at = vec![None; schema.fields().len()];
    at[c] = Some(zero);
    let held = evaluate(p, &at, 1, Kernels::scalar()).ok()?;
    (!held.value(0)).then_some(c)
}

/// Whether `p` holds a general expression (which may fail on a row).
pub(crate) fn has_expr(p: &Predicate) -> bool {
    match p {
        Predicate::Expr(_) => true,
        Predicate::Not(p) => has_expr(p),
        Predicate::And(ps) | Predicate::Or(ps) => ps.iter().any(has_expr),
        Predicate::Cmp { .. } | Predicate::CmpColumns { .. } | Predicate::Const(_) | Predicate::Like { .. } => false,
    }
}

impl Prewhere {
    /// The steps of `filter` over a table of `schema`: its top-level conjuncts (nested ANDs
    /// flattened), cheapest first.
    /// `use_cache`: the query condition cache (`use_query_condition_cache`) tells which
    /// granules of a morsel can hold rows of a conjunct evaluated by an earlier query, and
    /// conjuncts evaluated on whole morsels are recorded there.
    pub(crate) fn new(filter: Option<&Predicate>, schema: &Schema, use_cache: bool) -> Self {
        fn flatten(p: &Predicate, out: &mut Vec<Predicate>) {
            match p {
                Predicate::And(ps) => ps.iter().for_each(|p| flatten(p, out)),
                p => out.push(p.clone()),
            }
        }
        let mut conjuncts = Vec::new();
        if let Some(f) = filter {
            flatten(f, &mut conjuncts);
        }
        let mut steps: Vec<Step> = conjuncts
            .into_iter()
            .map(|pred| {
                let mut cols = Vec::new();
                predicate_columns(&pred, &mut cols);
                cols.sort_unstable();
                cols.dedup();
                let cost = cost(&pred, schema);
                let cache_key = if use_cache { condition_key(&pred) } else { None };
                let sparse = sparse_column(&pred, &cols, schema);
                Step { pred, cols, cost, cache_key, sparse }
            })
            .collect();
        // Stable: equal costs keep the written order.
        steps.sort_by_key(|s| s.cost);
        let whole = match filter {
            Some(f) if use_cache && steps.len() > 1 && steps.iter().all(|s| s.cache_key.is_some()) => condition_key(f),
            _ => None,
        };
        Prewhere { steps, schema: Some(schema.clone()), whole }
    }

    /// Reads the WHERE columns of morsel `m` (`len` rows) into `mcols` step by step and
    /// returns the rows where the whole WHERE is TRUE (`None`: every row). Stops as soon as
    /// no row is left, so later steps' columns are not read for that morsel.
    ///
    /// # Errors
    /// Errors of reading the columns ([`Input::read`]) or of evaluating a conjunct.
    pub(crate) fn select(
        &self,
        input: &Input<'_>,
        m: usize,
        len: usize,
        mcols: &mut MorselColumns<'_>,
        kern: &Kernels,
    ) -> Result<Selection> {
        self.select_with(input, m, len, mcols, kern, None, None)
    }

    /// The number of rows of morsel `m` that [`Prewhere::select`] keeps, for a query that
    /// needs only that (`SELECT COUNT(*) .. WHERE`): a one-step WHERE counts its bitmap's
    /// set bits instead of building a selection vector (ClickBench Q2: 35% of its time went
    /// to the vector).
    pub(crate) fn count(
        &self,
        input: &Input<'_>,
        m: usize,
        len: usize,
        mcols: &mut MorselColumns<'_>,
        kern: &Kernels,
    ) -> Result<usize> {
        match self.steps.as_slice() {
            [] => Ok(len),
            [step] => match self.cached_rows(input, m, len, None) {
                None => {
                    if let Some(kept) = step.on_sparse(input, m, len, mcols, kern)? {
                        return Ok(kept.len());
                    }
                    Ok(step.on_morsel(input, m, len, mcols, kern)?.count_set_bits())
                }
                start => Ok(self.select_from(input, m, len, mcols, kern, None, None, start)?.map_or(len, |s| s.len())),
            },
            _ => Ok(self.select(input, m, len, mcols, kern)?.map_or(len, |s| s.len())),
        }
    }

    /// As [`Prewhere::select`], with one more condition `extra` that every kept row must
    /// meet too (a top-N bound, see [`crate::topn_filter`]): evaluated after the steps of at
    /// most its cost and after the general expressions when the WHERE has some, so that
    /// whether a row's expression is evaluated (and may fail) does not depend on it.
    ///
    /// `extra_key`: the query condition cache's key of "the WHERE and the final value of
    /// `extra`" (a top-N scan's, [`crate::topn_filter::TopNFilter::cache_key`]): the kept
    /// rows are recorded under it (a superset of the rows within the final bound, as the
    /// bound only tightens), and its earlier records leave granules out like a conjunct's.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn select_with(
        &self,
        input: &Input<'_>,
        m: usize,
        len: usize,
        mcols: &mut MorselColumns<'_>,
        kern: &Kernels,
        extra: Option<Predicate>,
        extra_key: Option<u128>,
    ) -> Result<Selection> {
        let start = self.cached_rows(input, m, len, extra_key);
        self.select_from(input, m, len, mcols, kern, extra, extra_key, start)
    }

    /// [`Prewhere::select_with`] from the rows `start` (what the query condition cache
    /// left in).
    #[allow(clippy::too_many_arguments)]
    fn select_from(
        &self,
        input: &Input<'_>,
        m: usize,
        len: usize,
        mcols: &mut MorselColumns<'_>,
        kern: &Kernels,
        extra: Option<Predicate>,
        extra_key: Option<u128>,
        start: Selection,
    ) -> Result<Selection> {
        // The whole WHERE's rows are known exactly at the end unless `extra` took some, or
        // `extra_key`'s records did (before a top-N scan has a bound, its earlier runs'
        // records already leave out granules with WHERE rows past the final bound).
        let record_whole = self.whole.filter(|_| extra.is_none() && extra_key.is_none());
        let extra = extra.map(|pred| {
            let mut cols = Vec::new();
            predicate_columns(&pred, &mut cols);
            Step { pred, cols, cost: 0, cache_key: None, sparse: None }
        });
        // After the steps at most as costly as it (they are sorted by cost), and after every
        // general expression.
        let at = extra.as_ref().map_or(0, |e| {
            let c = self.schema.as_ref().map_or(u8::MAX, |schema| cost(&e.pred, schema));
            let general = self.steps.iter().rposition(|s| has_expr(&s.pred)).map_or(0, |i| i + 1);
            general.max(self.steps.partition_point(|s| s.cost <= c))
        });
        let steps = self.steps[..at].iter().chain(extra.as_ref()).chain(&self.steps[at..]);
        let mut sel = start;
        for step in steps {
            if sel.as_ref().is_some_and(|s| s.is_empty()) {
                break;
            }
            sel = match sel {
                Some(rows) if (rows.len() as f64) < GATHER_BELOW * len as f64 => {
                    // Few rows left: the step's columns at those rows only (a streamed
                    // column decodes only the blocks holding them), evaluated there. A
                    // column the query reads after the WHERE is not read whole either: the
                    // rows left are fewer still, and the query reads it at those
                    // (`Input::compact`).
                    let mut gathered: Vec<Option<ArrayRef>> = vec![None; mcols.cols.len()];
                    for (&c, a) in step.cols.iter().zip(input.read_rows(m, &step.cols, &rows, mcols)?) {
                        gathered[c] = Some(a);
                    }
                    let bits = evaluate(&step.pred, &gathered, rows.len(), kern)?;
                    Some(rows.iter().zip(bits.iter()).filter(|(_, b)| *b).map(|(&r, _)| r).collect())
                }
                sel => match (step.on_sparse(input, m, len, mcols, kern)?, sel) {
                    (Some(kept), None) => Some(kept),
                    (Some(kept), Some(rows)) => Some(intersect_rows(&rows, &kept)),
                    (None, sel) => {
                        let bits = step.on_morsel(input, m, len, mcols, kern)?;
                        match sel {
                            None => selection(&bits, kern),
                            Some(rows) => Some(rows.into_iter().filter(|&r| bits.value(r as usize)).collect()),
                        }
                    }
                },
            };
        }
        for key in record_whole.into_iter().chain(extra_key) {
            input.record_condition(key, m, &held(&sel, len));
        }
        Ok(sel)
    }

    /// The rows of morsel `m` (`len` rows) that the query condition cache leaves in: the
    /// granules where every cached conjunct may hold (`None`: every row, or nothing known).
    fn cached_rows(&self, input: &Input<'_>, m: usize, len: usize, extra_key: Option<u128>) -> Selection {
        // A general expression may fail on a row: skipping granules by the cache would
        // decide whether it is evaluated there.
        if self.steps.iter().any(|s| has_expr(&s.pred)) {
            return None;
        }
        let mut left: Option<Vec<Range<u32>>> = None;
        for key in self.steps.iter().filter_map(|s| s.cache_key).chain(self.whole).chain(extra_key) {
            let Some(rows) = input.condition_rows(key, m) else { continue };
            left = Some(match left {
                None => rows,
                Some(prev) => intersect(&prev, &rows),
            });
        }
        // Worth it only when the first step would then read a few granules (gathered) or
        // none: otherwise it reads the whole morsel anyway.
        let left = left?;
        let rows = left.iter().map(|r| (r.end - r.start) as usize).sum::<usize>();
        if rows as f64 >= CACHED_BELOW * len as f64 {
            return None;
        }
        input.cache_skip(len - rows);
        Some(left.into_iter().flatten().collect())
    }
}

impl Step {
    /// One bit per row of morsel `m` (`len` rows), set where this step is TRUE: its columns
    /// read whole into `mcols` and evaluated on every row, recorded in the query condition
    /// cache when it is cached.
    fn on_morsel(&self, input: &Input<'_>, m: usize, len: usize, mcols: &mut MorselColumns<'_>, kern: &Kernels) -> Result<BooleanBuffer> {
        input.read(m, &self.cols, mcols)?;
        let bits = evaluate(&self.pred, &mcols.cols, len, kern)?;
        if let Some(key) = self.cache_key {
            input.record_condition(key, m, &bits);
        }
        Ok(bits)
    }

    /// The rows of morsel `m` (`len` rows) where this step is TRUE, evaluated on its
    /// column's non-zero rows only, when it may be ([`Step::sparse`]) and the source stores
    /// the column sparsely there ([`Input::read_sparse`]). `None`: evaluate it the usual way.
    fn on_sparse(&self, input: &Input<'_>, m: usize, len: usize, mcols: &mut MorselColumns<'_>, kern: &Kernels) -> Result<Selection> {
        let Some(c) = self.sparse else { return Ok(None) };
        let Some((rows, values)) = input.read_sparse(m, c, len, mcols)? else { return Ok(None) };
        let mut at: Vec<Option<ArrayRef>> = vec![None; mcols.cols.len()];
        at[c] = Some(values);
        let bits = evaluate(&self.pred, &at, rows.len(), kern)?;
        // Not recorded in the query condition cache: reading the non-zero rows again is
        // about as cheap as the cache's lookup, and the recording (a bitmap of the morsel's
        // rows, counted per granule) was a fifth of ClickBench Q2's time at 10M rows.
        Ok(Some(rows.iter().zip(bits.iter()).filter(|(_, b)| *b).map(|(&r, _)| r).collect()))
    }
}

/// The rows in both `a` and `b` (each ascending).
fn intersect_rows(a: &[u32], b: &[u32]) -> Vec<u32> {
    let (mut i, mut j, mut out) = (0, 0, Vec::with_capacity(a.len().min(b.len())));
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out
}

/// One bit per row of a `len`-row morsel, set at the rows of `sel`.
fn held(sel: &Selection, len: usize) -> BooleanBuffer {
    let mut held = BooleanBufferBuilder::new(len);
    match sel {
        None => held.append_n(len, true),
        Some(rows) => {
            held.append_n(len, false);
            rows.iter().for_each(|&r| held.set_bit(r as usize, true));
        }
    }
    held.finish()
}

/// The intersection of two lists of ascending, disjoint ranges.
fn intersect(a: &[Range<u32>], b: &[Range<u32>]) -> Vec<Range<u32>> {
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        let (lo, hi) = (a[i].start.max(b[j].start), a[i].end.min(b[j].end));
        if lo < hi {
            out.push(lo..hi);
        }
        if a[i].end < b[j].end {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int32Array, StringArray};
    use arrow::datatypes::Field;
    use tessera_common::Table;
    use tessera_kernels::CmpOp;

    use super::*;
    use crate::context::{CancelToken, QueryContext};
    use crate::plan::{LikePattern, Value};

    fn schema() -> Schema {
        Schema::new(vec![Field::new("n", DataType::Int32, true), Field::new("s", DataType::Utf8, true)])
    }

    /// A conjunct is evaluated on a column's non-zero rows only when it reads one integer-like
    /// column (dates and timestamps too), holds no expression and is not TRUE at zero.
    #[test]
    fn sparse_conjuncts_are_those_zero_fails() {
        use arrow::datatypes::TimeUnit;
        let schema = Schema::new(vec![
            Field::new("i", DataType::Int32, true),
            Field::new("u", DataType::UInt8, true),
            Field::new("d", DataType::Date32, true),
            Field::new("t", DataType::Timestamp(TimeUnit::Second, None), true),
            Field::new("f", DataType::Float64, true),
            Field::new("s", DataType::Utf8, true),
        ]);
        let cmp = |column: usize, op: CmpOp, v: i128| Predicate::Cmp { column, op, value: Value::Int(v) };
        let cases = [
            (cmp(0, CmpOp::NotEq, 0), Some(0)),
            (cmp(0, CmpOp::Eq, 3), Some(0)),
            (cmp(0, CmpOp::Gt, 0), Some(0)),
            (cmp(0, CmpOp::Eq, 0), None),
            (cmp(0, CmpOp::Gt, -1), None),
            (Predicate::Not(Box::new(cmp(0, CmpOp::Eq, 0))), Some(0)),
            (Predicate::Or(vec![cmp(0, CmpOp::Eq, 2), cmp(0, CmpOp::Eq, 5)]), Some(0)),
            (Predicate::Or(vec![cmp(0, CmpOp::Eq, 2), cmp(1, CmpOp::Eq, 5)]), None),
            (cmp(1, CmpOp::NotEq, 0), Some(1)),
            (cmp(1, CmpOp::Lt, 1), None),
            (cmp(2, CmpOp::Gt, 15_000), Some(2)),
            (cmp(2, CmpOp::NotEq, 0), Some(2)),
            (cmp(3, CmpOp::NotEq, 0), Some(3)),
            (cmp(3, CmpOp::LtEq, 0), None),
            (Predicate::Cmp { column: 4, op: CmpOp::NotEq, value: Value::Float(0.0) }, None),
            (Predicate::Cmp { column: 5, op: CmpOp::NotEq, value: Value::Bytes(Vec::new()) }, None),
        ];
        for (p, want) in cases {
            let mut cols = Vec::new();
            predicate_columns(&p, &mut cols);
            cols.sort_unstable();
            cols.dedup();
            assert_eq!(sparse_column(&p, &cols, &schema), want, "{p:?}");
        }
    }

    /// The conjuncts of `WHERE s LIKE '%b%' AND s <> '' AND n > k` (NULLs included), run
    /// step by step (gathered or not), keep exactly the rows the whole WHERE keeps.
    #[test]
    fn steps_cheapest_first_and_same_rows_as_the_whole_where() {
        let like = Predicate::Like { column: 1, pattern: LikePattern::Contains(b"b".to_vec()) };
        let ne = Predicate::Cmp { column: 1, op: CmpOp::NotEq, value: Value::Bytes(Vec::new()) };
        let kern = Kernels::scalar();
        let len = 1000;
        let n: Int32Array = (0..len).map(|i| (i % 7 != 3).then_some((i * 37 % 101) as i32)).collect();
        let s: StringArray =
            (0..len).map(|i| (i % 11 != 5).then(|| ["", "abc", "xyz", "bb", "a"][i * 13 % 5].to_string())).collect();
        let schema = Arc::new(schema());
        let table = Table::from_columns("t", schema.clone(), vec![vec![Arc::new(n)], vec![Arc::new(s)]]).unwrap();
        let query = QueryContext::new(0, CancelToken::new());
        let input = Input::open(&table, &[0, 1], &query).unwrap();
        // Thresholds from "keeps almost all" (no gather) to "keeps few" (gather).
        for k in [-1, 50, 95, 200] {
            let gt = Predicate::Cmp { column: 0, op: CmpOp::Gt, value: Value::Int(k) };
            let filter = Predicate::And(vec![like.clone(), Predicate::And(vec![ne.clone(), gt.clone()])]);
            let pw = Prewhere::new(Some(&filter), &schema, false);
            let order: Vec<&Predicate> = pw.steps.iter().map(|s| &s.pred).collect();
            assert_eq!(order, vec![&gt, &ne, &like]);
            let mut mcols = input.morsel();
            let got = pw.select(&input, 0, len, &mut mcols, kern).unwrap();
            let mut all = input.morsel();
            input.read(0, &[0, 1], &mut all).unwrap();
            let want = selection(&evaluate(&filter, &all.cols, len, kern).unwrap(), kern);
            assert_eq!(got, want, "n > {k}");
        }
    }

    /// A source that keeps its columns in memory and a condition cache of 8-row granules.
    #[derive(Debug)]
    struct Recording {
        cols: Vec<ArrayRef>,
        /// (condition, morsel) -> held, per granule.
        records: std::sync::Mutex<std::collections::HashMap<(u128, usize), Vec<bool>>>,
    }

    const GRANULE: usize = 8;

    impl tessera_common::ColumnSource for Recording {
        fn load_columns(&self, indices: &[usize]) -> Result<Vec<Vec<ArrayRef>>> {
            Ok(indices.iter().map(|&c| vec![self.cols[c].clone()]).collect())
        }

        fn condition_rows(&self, condition: u128, morsel: usize) -> Option<Vec<Range<u32>>> {
            let records = self.records.lock().unwrap();
            let held = records.get(&(condition, morsel))?;
            Some(held.iter().enumerate().filter(|(_, h)| **h).map(|(g, _)| (g * GRANULE) as u32..((g + 1) * GRANULE) as u32).collect())
        }

        fn record_condition(&self, condition: u128, morsel: usize, held: &BooleanBuffer) {
            let per = (0..held.len() / GRANULE).map(|g| held.slice(g * GRANULE, GRANULE).count_set_bits() > 0).collect();
            self.records.lock().unwrap().insert((condition, morsel), per);
        }
    }

    /// A top-N scan's records narrow where it starts, so what it keeps is not the whole
    /// WHERE's rows and must not be recorded as such: a later plain WHERE still finds
    /// every row. Records of each conjunct and of the whole WHERE made on whole morsels
    /// leave out only granules without rows.
    #[test]
    fn a_top_n_record_is_not_taken_for_the_where() {
        let kern = Kernels::scalar();
        let len = 64;
        let n: ArrayRef = Arc::new((0..len).map(|i| Some(i as i32 % 5)).collect::<Int32Array>());
        let s: ArrayRef = Arc::new((0..len).map(|i| Some(if i % 3 == 0 { "" } else { "x" })).collect::<StringArray>());
        let source = Arc::new(Recording { cols: vec![n, s], records: Default::default() });
        let schema = Arc::new(schema());
        let table = Table::lazy("t", schema.clone(), vec![len], Some(source.clone())).unwrap();
        let query = QueryContext::new(0, CancelToken::new());
        let input = Input::open(&table, &[0, 1], &query).unwrap();
        let gt = Predicate::Cmp { column: 0, op: CmpOp::Gt, value: Value::Int(0) };
        let ne = Predicate::Cmp { column: 1, op: CmpOp::NotEq, value: Value::Bytes(Vec::new()) };
        let filter = Predicate::And(vec![gt, ne]);
        let pw = Prewhere::new(Some(&filter), &schema, true);
        let mut all = input.morsel();
        input.read(0, &[0, 1], &mut all).unwrap();
        let want = selection(&evaluate(&filter, &all.cols, len, kern).unwrap(), kern);
        assert!(want.as_ref().is_some_and(|w| w.len() > 20));
        // A top-N key whose earlier run kept granule 0 only.
        let topn_key = 7u128;
        source.records.lock().unwrap().insert((topn_key, 0), (0..len / GRANULE).map(|g| g == 0).collect());
        let got = pw.select_with(&input, 0, len, &mut input.morsel(), kern, None, Some(topn_key)).unwrap();
        assert!(got.as_ref().is_some_and(|r| r.iter().all(|&r| (r as usize) < GRANULE)));
        // The plain WHERE, twice: the first run records, the second reads the records.
        for _ in 0..2 {
            assert_eq!(pw.select(&input, 0, len, &mut input.morsel(), kern).unwrap(), want);
            assert_eq!(pw.count(&input, 0, len, &mut input.morsel(), kern).unwrap(), want.as_ref().map_or(len, |w| w.len()));
        }
        let whole = pw.whole.expect("a WHERE of two cacheable conjuncts has a whole key");
        assert_eq!(source.records.lock().unwrap().get(&(whole, 0)).map(|h| h.iter().filter(|h| **h).count()), Some(len / GRANULE));
    }
}
