//! Filter/project scans (no aggregation): `SELECT cols FROM t WHERE .. ORDER BY .. LIMIT n`.
//! Each worker keeps only its best `offset + limit` rows (top-N on Arrow sort kernels), so
//! memory stays bounded by the limit, not by the table.
//!
//! Answers do not depend on the thread count or on which worker took which morsel: rows
//! that tie on every ORDER BY key come in table order (a hidden row-position key ends the
//! sort), and `LIMIT` without ORDER BY returns the first rows in table order.

use std::sync::Arc;

use std::sync::atomic::{AtomicUsize, Ordering};

use arrow::array::{ArrayRef, AsArray, RecordBatch, UInt8Array, UInt32Array, UInt64Array};
use arrow::compute::{concat_batches, take};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimestampSecondType};
use tessera_common::{ColumnChunks, Error, Result, Settings};

use crate::Profile;
use crate::aggregate::order_and_limit;
use crate::context::QueryContext;
use crate::filter::{evaluate, morsel_columns, selection};
use crate::plan::{OrderLimit, ScalarExpr, ScanPlan, SortKey};
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
    let sorted = !plan.order.order_by.is_empty();
    // With ORDER BY, a hidden last column holds each row's position in the table, the last
    // sort key: ties come out in table order whatever the scheduling.
    let mut fields: Vec<Field> =
        plan.output.iter().map(|(name, e)| Field::new(name, e.data_type(&plan.table), true)).collect();
    let mut order = plan.order.clone();
    if sorted {
        fields.push(Field::new("__row", DataType::UInt64, false));
        order.order_by.push(SortKey { output: fields.len() - 1, descending: false, nulls_first: false });
    }
    let schema: SchemaRef = Arc::new(Schema::new(fields));
    let chunk_lens = plan.table.chunk_lens();
    let chunk_starts: Vec<u64> = chunk_lens
        .iter()
        .scan(0u64, |acc, &l| {
            let start = *acc;
            *acc += l as u64;
            Some(start)
        })
        .collect();
    let want = order.limit.map(|l| l.saturating_add(order.offset));
    let local = OrderLimit { order_by: order.order_by.clone(), limit: want, offset: 0 };
    let all_cols = schema.fields().len();
    let kern = settings.kernels()?;
    // LIMIT without ORDER BY: rows that passed, per finished morsel (`usize::MAX` until
    // then). Morsel `m` is skipped once the finished morsels before it hold `want` rows.
    let passed_in: Vec<AtomicUsize> = (0..chunk_lens.len()).map(|_| AtomicUsize::new(usize::MAX)).collect();
    let enough_before = |m: usize, w: usize| {
        let mut rows = 0usize;
        for p in &passed_in[..m] {
            match p.load(Ordering::Acquire) {
                usize::MAX => return false,
                n => rows += n,
            }
            if rows >= w {
                return true;
            }
        }
        false
    };
    let parts = run_morsels(
        pool,
        settings.max_threads,
        chunk_lens.len(),
        || (Vec::<(usize, RecordBatch)>::new(), 0usize, 0usize, 0usize),
        |(kept, kept_rows, passed, accounted), m| {
            query.check_cancelled()?;
            if let Some(w) = want
                && !sorted
                && enough_before(m, w)
            {
                passed_in[m].store(0, Ordering::Release);
                return Ok(());
            }
            let len = chunk_lens[m];
            let mcols = morsel_columns(cols, m);
            let sel = match &plan.filter {
                Some(f) => selection(&evaluate(f, &mcols, len, kern)?, kern),
                None => None,
            };
            if sel.as_ref().is_some_and(|s| s.is_empty()) {
                passed_in[m].store(0, Ordering::Release);
                return Ok(());
            }
            let idx = sel.map(UInt32Array::from);
            let mut out = Vec::with_capacity(all_cols);
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
            if sorted {
                let base = chunk_starts[m];
                let rows: UInt64Array = match &idx {
                    Some(i) => i.values().iter().map(|&r| base + r as u64).collect(),
                    None => (0..len as u64).map(|r| base + r).collect(),
                };
                out.push(Arc::new(rows));
            }
            let batch = RecordBatch::try_new(schema.clone(), out)?;
            *passed += batch.num_rows();
            *kept_rows += batch.num_rows();
            passed_in[m].store(batch.num_rows(), Ordering::Release);
            kept.push((m, batch));
            // Top-N: compact to the best `want` rows once twice that many are kept, so the
            // work stays linear in the input (each row is sorted O(1) times on average).
            if let Some(w) = want
                && sorted
                && *kept_rows > w.saturating_mul(2).max(MIN_COMPACT_ROWS)
            {
                let merged = concat_batches(&schema, kept.iter().map(|(_, b)| b))?;
                let best = order_and_limit(merged, &local, all_cols)?;
                *kept_rows = best.num_rows();
                *kept = vec![(m, best)];
            }
            let bytes = kept.iter().map(|(_, b)| b.get_array_memory_size()).sum();
            let op = if sorted { "ORDER BY ... LIMIT top-N buffer" } else { "scan output buffer" };
            query.resize(accounted, bytes, op)?;
            Ok(())
        },
    )?;
    let rows_in = parts.iter().map(|(_, _, passed, _)| passed).sum();
    let mut batches: Vec<(usize, RecordBatch)> = parts.into_iter().flat_map(|(b, _, _, _)| b).collect();
    // Table order (the top-N order is restored by the sort below).
    batches.sort_by_key(|(m, _)| *m);
    let merged = concat_batches(&schema, batches.iter().map(|(_, b)| b))?;
    let out = order_and_limit(merged, &order, plan.visible)?;
    Ok((out, Profile { rows_in, ..Profile::default() }))
}
