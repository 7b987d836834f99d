//! Filter/project scans (no aggregation): `SELECT cols FROM t WHERE .. ORDER BY .. LIMIT n`.
//! Each worker keeps only its best `offset + limit` rows (top-N on Arrow sort kernels), so
//! memory stays bounded by the limit, not by the table.

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, RecordBatch, UInt8Array, UInt32Array};
use arrow::compute::{concat_batches, take};
use arrow::datatypes::{Field, Schema, SchemaRef, TimestampSecondType};
use tessera_common::{ColumnChunks, Error, Result, Settings};

use crate::Profile;
use crate::aggregate::order_and_limit;
use crate::context::QueryContext;
use crate::filter::{evaluate, morsel_columns, selection};
use crate::plan::{OrderLimit, ScalarExpr, ScanPlan};
use crate::pool::run_morsels;

/// Kept rows below which a worker's top-N buffer is not compacted.
const MIN_COMPACT_ROWS: usize = 65_536;

/// Runs a scan plan.
pub(crate) fn execute(
    plan: &ScanPlan,
    cols: &[Option<ColumnChunks>],
    settings: &Settings,
    pool: &rayon::ThreadPool,
    query: &QueryContext,
) -> Result<(RecordBatch, Profile)> {
    let schema: SchemaRef = Arc::new(Schema::new(
        plan.output
            .iter()
            .map(|(name, e)| Field::new(name, e.data_type(&plan.table), true))
            .collect::<Vec<_>>(),
    ));
    let chunk_lens = plan.table.chunk_lens();
    let want = plan.order.limit.map(|l| l.saturating_add(plan.order.offset));
    let local = OrderLimit { order_by: plan.order.order_by.clone(), limit: want, offset: 0 };
    let all_cols = plan.output.len();
    let kern = settings.kernels()?;
    let parts = run_morsels(
        pool,
        settings.max_threads,
        chunk_lens.len(),
        || (Vec::<RecordBatch>::new(), 0usize, 0usize, 0usize),
        |(kept, kept_rows, passed, accounted), m| {
            query.check_cancelled()?;
            if want.is_some_and(|w| plan.order.order_by.is_empty() && *kept_rows >= w) {
                return Ok(());
            }
            let len = chunk_lens[m];
            let mcols = morsel_columns(cols, m);
            let sel = match &plan.filter {
                Some(f) => selection(&evaluate(f, &mcols, len, kern)?, kern),
                None => None,
            };
            if sel.as_ref().is_some_and(|s| s.is_empty()) {
                return Ok(());
            }
            let idx = sel.map(UInt32Array::from);
            let mut out = Vec::with_capacity(plan.output.len());
            for (_, e) in &plan.output {
                let arr = mcols[e.column()].as_ref().ok_or_else(|| Error::internal("scan column not loaded"))?;
                let arr = match &idx {
                    Some(i) => take(arr, i, None)?,
                    None => arr.clone(),
                };
                out.push(match e {
                    ScalarExpr::Column(_) => arr,
                    ScalarExpr::Minute(_) => {
                        let mut mins = Vec::new();
                        (kern.minute_of_hour)(arr.as_primitive::<TimestampSecondType>().values(), &mut mins);
                        Arc::new(UInt8Array::from(mins)) as ArrayRef
                    }
                });
            }
            let batch = RecordBatch::try_new(schema.clone(), out)?;
            *passed += batch.num_rows();
            *kept_rows += batch.num_rows();
            kept.push(batch);
            // Top-N: compact to the best `want` rows once twice that many are kept, so the
            // work stays linear in the input (each row is sorted O(1) times on average).
            if let Some(w) = want
                && !plan.order.order_by.is_empty() && *kept_rows > w.saturating_mul(2).max(MIN_COMPACT_ROWS) {
                    let merged = concat_batches(&schema, kept.iter())?;
                    let best = order_and_limit(merged, &local, all_cols)?;
                    *kept_rows = best.num_rows();
                    *kept = vec![best];
                }
            let bytes = kept.iter().map(|b| b.get_array_memory_size()).sum();
            let op = if plan.order.order_by.is_empty() { "scan output buffer" } else { "ORDER BY ... LIMIT top-N buffer" };
            query.resize(accounted, bytes, op)?;
            Ok(())
        },
    )?;
    let rows_in = parts.iter().map(|(_, _, passed, _)| passed).sum();
    let batches: Vec<RecordBatch> = parts.into_iter().flat_map(|(b, _, _, _)| b).collect();
    let merged = concat_batches(&schema, &batches)?;
    let out = order_and_limit(merged, &plan.order, plan.visible)?;
    Ok((out, Profile { rows_in, ..Profile::default() }))
}
