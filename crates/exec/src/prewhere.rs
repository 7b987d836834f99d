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

use arrow::array::ArrayRef;
use arrow::datatypes::{DataType, Schema};
use tessera_common::Result;
use tessera_kernels::Kernels;

use crate::filter::{Selection, evaluate, selection};
use crate::morsel::{Input, MorselColumns};
use crate::plan::{Predicate, predicate_columns};

/// Below this share of a morsel's rows still in, a conjunct is evaluated on those rows only
/// (gathered), above it on the whole morsel (no gather).
const GATHER_BELOW: f64 = 0.25;

/// One conjunct and the columns it reads (ascending).
#[derive(Debug)]
struct Step {
    pred: Predicate,
    cols: Vec<usize>,
    /// [`cost`] class.
    cost: u8,
}

/// The WHERE clause of a query as ordered PREWHERE steps.
#[derive(Debug, Default)]
pub(crate) struct Prewhere {
    steps: Vec<Step>,
    /// The table's schema, for the cost of an extra step.
    schema: Option<Schema>,
    /// Columns the query reads after the WHERE (sorted): a step on few rows still reads
    /// these whole, as they will be needed anyway; the others only at those rows.
    later: Vec<usize>,
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
    /// flattened), cheapest first. `later`: the columns the query reads after the WHERE.
    pub(crate) fn new(filter: Option<&Predicate>, schema: &Schema, later: &[usize]) -> Self {
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
                Step { pred, cols, cost }
            })
            .collect();
        // Stable: equal costs keep the written order.
        steps.sort_by_key(|s| s.cost);
        let mut later = later.to_vec();
        later.sort_unstable();
        later.dedup();
        Prewhere { steps, schema: Some(schema.clone()), later }
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
        self.select_with(input, m, len, mcols, kern, None)
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
            [step] => {
                input.read(m, &step.cols, mcols)?;
                Ok(evaluate(&step.pred, &mcols.cols, len, kern)?.count_set_bits())
            }
            _ => Ok(self.select(input, m, len, mcols, kern)?.map_or(len, |s| s.len())),
        }
    }

    /// As [`Prewhere::select`], with one more condition `extra` that every kept row must
    /// meet too (a top-N bound, see [`crate::topn_filter`]): evaluated after the steps of at
    /// most its cost and after the general expressions when the WHERE has some, so that
    /// whether a row's expression is evaluated (and may fail) does not depend on it.
    pub(crate) fn select_with(
        &self,
        input: &Input<'_>,
        m: usize,
        len: usize,
        mcols: &mut MorselColumns<'_>,
        kern: &Kernels,
        extra: Option<Predicate>,
    ) -> Result<Selection> {
        let extra = extra.map(|pred| {
            let mut cols = Vec::new();
            predicate_columns(&pred, &mut cols);
            Step { pred, cols, cost: 0 }
        });
        // After the steps at most as costly as it (they are sorted by cost), and after every
        // general expression.
        let at = extra.as_ref().map_or(0, |e| {
            let c = self.schema.as_ref().map_or(u8::MAX, |schema| cost(&e.pred, schema));
            let general = self.steps.iter().rposition(|s| has_expr(&s.pred)).map_or(0, |i| i + 1);
            general.max(self.steps.partition_point(|s| s.cost <= c))
        });
        let steps = self.steps[..at].iter().chain(extra.as_ref()).chain(&self.steps[at..]);
        let mut sel: Selection = None;
        for step in steps {
            sel = match sel {
                Some(rows) if (rows.len() as f64) < GATHER_BELOW * len as f64 => {
                    // Few rows left: the step's columns at those rows only (a streamed
                    // column decodes only the blocks holding them), evaluated there.
                    let whole: Vec<usize> =
                        step.cols.iter().copied().filter(|c| self.later.binary_search(c).is_ok()).collect();
                    input.read(m, &whole, mcols)?;
                    let mut gathered: Vec<Option<ArrayRef>> = vec![None; mcols.cols.len()];
                    for (&c, a) in step.cols.iter().zip(input.read_rows(m, &step.cols, &rows, mcols)?) {
                        gathered[c] = Some(a);
                    }
                    let bits = evaluate(&step.pred, &gathered, rows.len(), kern)?;
                    Some(rows.iter().zip(bits.iter()).filter(|(_, b)| *b).map(|(&r, _)| r).collect())
                }
                sel => {
                    input.read(m, &step.cols, mcols)?;
                    let bits = evaluate(&step.pred, &mcols.cols, len, kern)?;
                    match sel {
                        None => selection(&bits, kern),
                        Some(rows) => Some(rows.into_iter().filter(|&r| bits.value(r as usize)).collect()),
                    }
                }
            };
            if sel.as_ref().is_some_and(|s| s.is_empty()) {
                break;
            }
        }
        Ok(sel)
    }
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
            let pw = Prewhere::new(Some(&filter), &schema, &[]);
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
}
