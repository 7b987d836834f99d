//! Lazy string GROUP BY keys ([`Layout::LazyStr`](crate::keys::Layout::LazyStr), `Settings::group_by_lazy_string_keys`):
//! when a GROUP BY of one string column may take them, and how the answer's strings are
//! read back from the table once its rows are chosen.

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, RecordBatch};
use tessera_common::{Error, Result};

use crate::context::QueryContext;
use crate::keys::LazyKey;
use crate::morsel::read_rows_at;
use crate::plan::{AggOutput, AggregatePlan, ScalarExpr};

/// Most answer rows (LIMIT plus OFFSET) of a GROUP BY with [`Layout::LazyStr`](crate::keys::Layout::LazyStr) over a table
/// in memory or one that reads rows (on disk: each row may read a block of the key's
/// column back) ...
const LAZY_KEYS_MAX_ROWS: usize = 1_000;
/// ... and over other streamed tables (Parquet), where each row may decode a whole morsel
/// of the key's column.
const LAZY_KEYS_MAX_MORSEL_READS: usize = 16;

/// Whether `plan`'s answer allows [`Layout::LazyStr`](crate::keys::Layout::LazyStr) (`Settings::group_by_lazy_string_keys`):
/// one key, a table column; an ORDER BY .. LIMIT of at most [`LAZY_KEYS_MAX_ROWS`] rows
/// ([`LAZY_KEYS_MAX_MORSEL_READS`] from a streamed table that does not read rows) whose sort
/// keys, HAVING and expressions do not read the key (they see its hash until the answer's
/// rows are chosen). The caller checks the key's type and NULLs (the layout `Str`).
pub(super) fn lazy_key_fits(plan: &AggregatePlan) -> bool {
    let key_outputs: Vec<usize> =
        plan.output.iter().enumerate().filter(|(_, (_, o))| *o == AggOutput::Key(0)).map(|(i, _)| i).collect();
    let reads_key = |e: &crate::expr::Expr| {
        let mut cols = Vec::new();
        e.columns(&mut cols);
        cols.iter().any(|c| key_outputs.contains(c))
    };
    matches!(plan.keys.as_slice(), [ScalarExpr::Column(_)])
        && plan.order.limit.is_some_and(|l| {
            let most = if plan.table.streams() && !plan.table.reads_rows() { LAZY_KEYS_MAX_MORSEL_READS } else { LAZY_KEYS_MAX_ROWS };
            l.saturating_add(plan.order.offset) <= most
        })
        && !plan.order.order_by.is_empty()
        && plan.order.order_by.iter().all(|k| !key_outputs.contains(&k.output))
        && plan.having.as_ref().is_none_or(|h| !reads_key(h))
        && plan.output.iter().all(|(_, o)| match o {
            AggOutput::Expr(p) => !reads_key(&plan.projections[*p]),
            _ => true,
        })
}

/// The answer of a [`Layout::LazyStr`](crate::keys::Layout::LazyStr) GROUP BY with its key columns' strings: each key
/// output holds [`LazyKey`] bytes naming a row of its group, whose value is read from the
/// table ([`read_rows_at`]; once for a key output listed twice).
pub(super) fn read_lazy_keys(
    batches: Vec<RecordBatch>,
    plan: &AggregatePlan,
    pool: &rayon::ThreadPool,
    query: &QueryContext,
) -> Result<Vec<RecordBatch>> {
    let ScalarExpr::Column(col) = plan.keys[0] else { return Err(Error::internal("a lazy GROUP BY key is not a column")) };
    let key_type = plan.scalar_type(&plan.keys[0]);
    // The strings of one key column's `LazyKey` bytes.
    let read = |keys: &ArrayRef| -> Result<ArrayRef> {
        let keys = keys.as_binary_opt::<i32>().ok_or_else(|| Error::internal("lazy GROUP BY keys are not binary"))?;
        let at: Vec<(usize, u32)> = keys
            .iter()
            .map(|k| k.and_then(LazyKey::row_of).ok_or_else(|| Error::internal("a lazy GROUP BY key names no row")))
            .collect::<Result<_>>()?;
        read_rows_at(&plan.table, &[col], &at, pool, query)?.pop().ok_or_else(|| Error::internal("no column read"))
    };
    batches
        .into_iter()
        .map(|b| {
            let mut fields: Vec<arrow::datatypes::FieldRef> = b.schema().fields().iter().cloned().collect();
            let mut cols = b.columns().to_vec();
            let mut strings: Option<ArrayRef> = None;
            for j in 0..cols.len() {
                if plan.output[j].1 != AggOutput::Key(0) {
                    continue;
                }
                // Every key output holds the same keys: read once.
                let s = match &strings {
                    Some(s) => s.clone(),
                    None => strings.insert(read(&cols[j])?).clone(),
                };
                cols[j] = s;
                fields[j] = Arc::new(fields[j].as_ref().clone().with_data_type(key_type.clone()));
            }
            Ok(RecordBatch::try_new(Arc::new(arrow::datatypes::Schema::new(fields)), cols)?)
        })
        .collect()
}
