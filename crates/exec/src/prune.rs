//! Granule skipping: the part of a WHERE clause a storage source can use to skip morsels.
//!
//! Only the top-level conjunction is used: each `column <op> constant` with an integer
//! (also dates and timestamps) or string constant becomes a [`ColumnRange`]; `OR`, `NOT`,
//! `<>`, float constants and column-vs-column comparisons are ignored (they can only make
//! the kept set larger, never wrong, since the full filter still runs on what is read).

use std::sync::Arc;

use tessera_common::{ColumnRange, RangeValue, Result, Table};

use crate::plan::{CmpOp, Plan, Predicate, Value};

/// The column ranges implied by `filter` (see the module docs).
pub fn key_ranges(filter: &Predicate) -> Vec<ColumnRange> {
    let mut out = Vec::new();
    collect(filter, &mut out);
    out
}

fn collect(p: &Predicate, out: &mut Vec<ColumnRange>) {
    match p {
        Predicate::And(v) => v.iter().for_each(|q| collect(q, out)),
        Predicate::Cmp { column, op, value } => {
            let v = match value {
                Value::Int(i) => RangeValue::Int(*i),
                Value::Bytes(b) => RangeValue::Bytes(b.clone()),
                Value::Float(_) => return,
            };
            let (lower, upper) = match op {
                CmpOp::Eq => (Some((v.clone(), true)), Some((v, true))),
                CmpOp::Lt => (None, Some((v, false))),
                CmpOp::LtEq => (None, Some((v, true))),
                CmpOp::Gt => (Some((v, false)), None),
                CmpOp::GtEq => (Some((v, true)), None),
                CmpOp::NotEq => return,
            };
            out.push(ColumnRange { column: *column, lower, upper });
        }
        _ => {}
    }
}

/// `plan` over a narrower table when its table's source can skip morsels for the plan's
/// WHERE clause; `None` otherwise.
///
/// # Errors
/// As [`Table::prune`].
pub(crate) fn pruned_plan(plan: &Plan) -> Result<Option<Plan>> {
    let filter = match plan {
        Plan::Aggregate(p) => &p.filter,
        Plan::Scan(p) => &p.filter,
    };
    let Some(f) = filter else { return Ok(None) };
    let Some(table) = plan.table().prune(&key_ranges(f))? else { return Ok(None) };
    let table: Arc<Table> = Arc::new(table);
    let mut out = plan.clone();
    match &mut out {
        Plan::Aggregate(p) => p.table = table,
        Plan::Scan(p) => p.table = table,
    }
    Ok(Some(out))
}
