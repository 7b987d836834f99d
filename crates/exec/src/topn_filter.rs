//! Top-N dynamic filtering of `ORDER BY col [, ..] LIMIT n` scans (ClickHouse's
//! `use_top_k_dynamic_filtering`, 25.x; DuckDB's dynamic filters pushed from a TopN into its
//! scans, 1.2).
//!
//! A scan that keeps the best `want = n + OFFSET` rows learns, as it goes, a **bound** on the
//! first sort key: once some worker holds `want` rows whose first keys are all at most `b`
//! (ascending; at least `b` descending), no row with a first key past `b` can be in the
//! answer, whatever the later keys and the row-position tie-breaker say. Each worker keeps
//! the first keys of its best `want` rows ([`TopNFilter::offer`]) and publishes the last
//! one; the tightest bound of all workers is shared. A morsel then
//!
//! - is not read at all when its min/max index (a source's per-morsel statistics,
//!   `ColumnSource::morsel_min_max`: the granules of a part) lies wholly past the bound
//!   ([`TopNFilter::skips`]), and morsels with an index are visited best minimum first, so
//!   the bound tightens early;
//! - else runs `col <= b` (`>=` descending) as a PREWHERE step ([`TopNFilter::predicate`])
//!   placed by cost among the WHERE's conditions (before a LIKE over URLs in ClickBench Q24,
//!   after a cheaper emptiness test in Q26), so the more costly conditions and the output
//!   columns are read and evaluated only on the rows that can still enter the answer.
//!
//! Not used when the WHERE holds a general expression or an output is computed: an
//! expression that fails on some row (`intDiv` by zero) would then fail or not depending on
//! when the bound arrived, i.e. on the scheduling.
//!
//! The bound is inclusive (a row equal to it may still win on a later key or its row
//! position), NULL keys never pass it (NULLS LAST: they rank after every bound), and the
//! answer is exactly the unfiltered scan's. Only for keys whose order is a comparison
//! kernel's (integers, dates, timestamps, strings bytewise; not floats, whose NaN/-0.0
//! order is the sort's own) and `want` up to [`MAX_ROWS`].

use std::sync::Mutex;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::compute::{SortOptions, concat, sort_to_indices, take};
use arrow::datatypes::DataType;
use tessera_common::{Result, Table};
use tessera_kernels::CmpOp;

use crate::plan::{Predicate, Value};

/// Largest `LIMIT + OFFSET` filtered dynamically (ClickHouse's
/// `query_plan_max_limit_for_top_k_optimization` default): each morsel merges its passing
/// keys with the worker's best `want`, so the work per morsel grows with it.
pub(crate) const MAX_ROWS: usize = 1000;

/// The shared bound of one scan, and the order its morsels are visited in.
#[derive(Debug)]
pub(crate) struct TopNFilter {
    /// The table column of the first sort key.
    column: usize,
    descending: bool,
    want: usize,
    /// The tightest bound published so far.
    bound: Mutex<Option<Value>>,
    /// Per-morsel (min, max) of the key column, when the source keeps them.
    index: Option<(ArrayRef, ArrayRef)>,
    /// Morsels in visiting order: best minimum (maximum, descending) first when indexed.
    order: Vec<usize>,
    /// The query condition cache's key of "the WHERE and the final bound" ([`TopNFilter::cached`]).
    cache_key: Option<u128>,
}

impl TopNFilter {
    /// The filter of a scan whose first sort key is table column `column` of `table`, or
    /// `None` when it does not apply (a type outside the kernels' order, NULLS FIRST, no
    /// LIMIT or one above [`MAX_ROWS`]).
    pub(crate) fn new(table: &Table, column: usize, descending: bool, nulls_first: bool, want: Option<usize>) -> Option<Self> {
        let want = want.filter(|&w| (1..=MAX_ROWS).contains(&w))?;
        if nulls_first || !supported(table.schema().field(column).data_type()) {
            return None;
        }
        let morsels = table.chunk_lens().len();
        let index = table.morsel_min_max(column);
        let order = match &index {
            Some((lo, hi)) => {
                let (first, opts) = if descending { (hi, SortOptions { descending: true, nulls_first: false }) } else { (lo, SortOptions { descending: false, nulls_first: false }) };
                match sort_to_indices(first, Some(opts), None) {
                    Ok(idx) => idx.values().iter().map(|&i| i as usize).collect(),
                    Err(_) => (0..morsels).collect(),
                }
            }
            None => (0..morsels).collect(),
        };
        Some(TopNFilter { column, descending, want, bound: Mutex::new(None), index, order, cache_key: None })
    }

    /// This filter with a key in the query condition cache (ClickHouse's
    /// `use_query_condition_cache_for_top_k`) for a scan of `table` with WHERE `filter`
    /// (no general expression): the granules that held a row within the bound are
    /// recorded under it, so the same query over the same parts (the key holds the WHERE,
    /// the sort key, `want` and [`Table::data_id`]) reads only them. A superset of the
    /// answer's granules is recorded (the bound only tightens), and the data id keeps a
    /// table whose parts changed (a part more could tighten the bound, a part less loosen
    /// it) from using the entries. Without a data id, no key.
    pub(crate) fn cached(mut self, filter: Option<&Predicate>, table: &Table) -> Self {
        self.cache_key = table.data_id().map(|id| {
            let text = format!("top-N {filter:?} col {} desc {} want {} data {id}", self.column, self.descending, self.want);
            xxhash_rust::xxh3::xxh3_128(text.as_bytes())
        });
        self
    }

    /// The key of [`TopNFilter::cached`], if any.
    pub(crate) fn cache_key(&self) -> Option<u128> {
        self.cache_key
    }

    /// The morsel to visit `i`-th.
    pub(crate) fn morsel(&self, i: usize) -> usize {
        self.order[i]
    }

    /// The current bound as a PREWHERE condition on the key column (`None` before any
    /// worker has held `want` rows).
    pub(crate) fn predicate(&self) -> Option<Predicate> {
        let value = self.bound.lock().expect("top-N bound lock").clone()?;
        let op = if self.descending { CmpOp::GtEq } else { CmpOp::LtEq };
        Some(Predicate::Cmp { column: self.column, op, value })
    }

    /// Whether morsel `m` holds no row that can pass the current bound, by its min/max
    /// index (a morsel whose keys are all NULL holds none once there is a bound).
    pub(crate) fn skips(&self, m: usize) -> bool {
        let Some((lo, hi)) = &self.index else { return false };
        let Some(bound) = self.bound.lock().expect("top-N bound lock").clone() else { return false };
        let edge = if self.descending { hi } else { lo };
        match value_at(edge, m) {
            None => true,
            Some(v) => self.worse(&v, &bound),
        }
    }

    /// Adds the first keys `keys` of rows a worker just kept to its best keys `best` (at
    /// most `want`, in order), and publishes the last of them as the bound once there are
    /// `want`.
    ///
    /// # Errors
    /// Arrow's errors from sorting or taking the keys (none expected for the types here).
    pub(crate) fn offer(&self, best: &mut Option<ArrayRef>, keys: &ArrayRef) -> Result<()> {
        if keys.is_empty() {
            return Ok(());
        }
        let all = match best.take() {
            Some(b) => concat(&[b.as_ref(), keys.as_ref()])?,
            None => keys.clone(),
        };
        let opts = SortOptions { descending: self.descending, nulls_first: false };
        let idx = sort_to_indices(&all, Some(opts), Some(self.want))?;
        let kept = take(&all, &idx, None)?;
        if kept.len() == self.want
            && let Some(v) = value_at(&kept, self.want - 1)
        {
            let mut bound = self.bound.lock().expect("top-N bound lock");
            if bound.as_ref().is_none_or(|b| self.worse(b, &v)) {
                *bound = Some(v);
            }
        }
        *best = Some(kept);
        Ok(())
    }

    /// Whether key `a` ranks strictly after key `b`.
    fn worse(&self, a: &Value, b: &Value) -> bool {
        let after = match (a, b) {
            (Value::Int(x), Value::Int(y)) => x > y,
            (Value::Bytes(x), Value::Bytes(y)) => x > y,
            _ => return false,
        };
        let before = match (a, b) {
            (Value::Int(x), Value::Int(y)) => x < y,
            (Value::Bytes(x), Value::Bytes(y)) => x < y,
            _ => return false,
        };
        if self.descending { before } else { after }
    }
}

/// Key types whose order is the comparison kernels' and the sort's alike.
fn supported(dt: &DataType) -> bool {
    tessera_common::is_int_like(dt) || matches!(dt, DataType::Utf8 | DataType::Binary)
}

/// Value `i` of `arr` in the filter's domain; `None` for NULL or another type.
fn value_at(arr: &ArrayRef, i: usize) -> Option<Value> {
    if arr.is_null(i) {
        return None;
    }
    Some(tessera_common::int_like_dispatch!(arr.data_type(),
        A => Value::Int(i128::from(arr.as_primitive::<A>().value(i))),
        _ => match arr.data_type() {
            DataType::Utf8 => Value::Bytes(arr.as_string::<i32>().value(i).as_bytes().to_vec()),
            DataType::Binary => Value::Bytes(arr.as_binary::<i32>().value(i).to_vec()),
            _ => return None,
        }
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, StringArray};

    use super::*;

    fn filter(descending: bool, want: usize) -> TopNFilter {
        TopNFilter { column: 0, descending, want, bound: Mutex::new(None), index: None, order: vec![0], cache_key: None }
    }

    #[test]
    fn bound_is_the_last_of_the_best_want_keys_and_only_tightens() {
        let f = filter(false, 3);
        let mut best = None;
        let k: ArrayRef = Arc::new(Int64Array::from(vec![Some(9), None, Some(4)]));
        f.offer(&mut best, &k).unwrap();
        // Two non-NULL keys and a NULL (last): no bound yet.
        assert_eq!(f.predicate(), None);
        let k: ArrayRef = Arc::new(Int64Array::from(vec![7, 12]));
        f.offer(&mut best, &k).unwrap();
        assert_eq!(f.predicate(), Some(Predicate::Cmp { column: 0, op: CmpOp::LtEq, value: Value::Int(9) }));
        // Another worker's looser bound does not widen it.
        let mut other = None;
        f.offer(&mut other, &(Arc::new(Int64Array::from(vec![20, 30, 40])) as ArrayRef)).unwrap();
        assert_eq!(f.predicate(), Some(Predicate::Cmp { column: 0, op: CmpOp::LtEq, value: Value::Int(9) }));
        f.offer(&mut other, &(Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef)).unwrap();
        assert_eq!(f.predicate(), Some(Predicate::Cmp { column: 0, op: CmpOp::LtEq, value: Value::Int(3) }));
    }

    #[test]
    fn descending_strings_bound_from_below() {
        let f = filter(true, 2);
        let mut best = None;
        let k: ArrayRef = Arc::new(StringArray::from(vec!["b", "zz", "a", "z"]));
        f.offer(&mut best, &k).unwrap();
        assert_eq!(f.predicate(), Some(Predicate::Cmp { column: 0, op: CmpOp::GtEq, value: Value::Bytes(b"z".to_vec()) }));
        assert!(f.worse(&Value::Bytes(b"y".to_vec()), &Value::Bytes(b"z".to_vec())));
        assert!(!f.worse(&Value::Bytes(b"z".to_vec()), &Value::Bytes(b"z".to_vec())));
    }
}
