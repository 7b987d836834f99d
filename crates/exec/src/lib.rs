//! Tessera's execution engine: vectorized, morsel-driven operators over in-memory chunked
//! tables.
//!
//! - [`plan`]: the physical plans (aggregation, scan) the SQL front end builds;
//! - [`expr`]: typed scalar expressions and their vectorized evaluator;
//! - [`filter`]: WHERE to selection vectors;
//! - hash GROUP BY specialised by key layout, two-phase with radix partitions, fused top-N;
//! - [`pool`]: rayon pools sized by `max_threads`, morsel-driven scheduling.

#![warn(missing_docs)]

mod accum;
mod aggregate;
pub mod context;
pub mod expr;
pub mod filter;
mod hashtable;
mod keys;
mod morsel;
mod partial;
pub mod plan;
pub mod pool;
mod prewhere;
pub mod prune;
mod scan;
mod scatter;
mod sort;
mod spill;
mod topn_filter;

/// Deterministic data for the unit tests: splitmix64 with a fixed seed.
#[cfg(test)]
pub(crate) struct TestRng(pub(crate) u64);

#[cfg(test)]
impl TestRng {
    /// The next 64 random bits.
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use tessera_common::{Result, Settings};

pub use context::{CancelToken, QueryContext, ServerMemory};
pub use plan::*;
pub use pool::Pools;
#[doc(hidden)]
pub use hashtable::bench as probe_bench;

/// What a query did, for tests and `EXPLAIN`-like output.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Profile {
    /// Key layout of a GROUP BY (`fixed64`, `fixed128`, `string`, `fixed128+string`,
    /// `serialized`, `unit`); `None` for scans.
    pub layout: Option<&'static str>,
    /// Groups in the final result before LIMIT.
    pub groups: usize,
    /// Radix partitions the final phase ran over (256 to 1,024, see the
    /// `group_by_radix_bits` setting); 0 when it merged single tables.
    pub radix_partitions: usize,
    /// Rows that passed the filter (for a top-N scan, those that also passed the running
    /// bound of `use_top_k_dynamic_filtering`, which depends on the scheduling).
    pub rows_in: usize,
    /// Bytes of the final hash tables (keys, hashes, slots, states), summed; the final
    /// phase holds only the partitions in flight at a time, not all of them.
    pub hash_table_bytes: usize,
    /// The most bytes the query's accounted buffers held at once (see [`QueryContext`]).
    pub peak_memory_bytes: usize,
    /// Morsels none of whose rows could be in the answer, so the query's other columns were
    /// not read for them: no row passed the WHERE (PREWHERE), or the top-N bound of
    /// `use_top_k_dynamic_filtering` excluded them (by their min/max index, unread, or
    /// after reading its key column).
    pub morsels_skipped: usize,
    /// Rows the query condition cache (`use_query_condition_cache`) left out before any
    /// of their columns was read: granules earlier queries found holding no row of a WHERE
    /// conjunct, of the whole WHERE, or within a top-N scan's bound.
    pub condition_cache_rows_skipped: usize,
    /// Morsels where under a quarter of the rows passed the WHERE and the query's other
    /// columns were read at those rows only (late materialization after PREWHERE; GROUP BY
    /// and scans of a table read from disk).
    pub morsels_compacted: usize,
    /// Morsels where a WHERE conjunct on an integer column stored sparsely (nearly all
    /// zero) was evaluated on the column's non-zero rows only (ClickBench Q2's
    /// `AdvEngineID <> 0`; see `ColumnSource::load_morsel_sparse`).
    pub morsels_sparse: usize,
    /// Times a GROUP BY worker aggregated its scattered rows early to release the streamed
    /// morsels their string keys borrowed (see `aggregate::scatter_retained_bytes`).
    pub partial_flushes: usize,
    /// Times a GROUP BY worker had its scattered rows take copies of their string keys
    /// instead of flushing them, so that they stay raw until the final phase (the rest of
    /// its input fit its budget; see `aggregate::CopyChoice` and `Partial::copy_keys`).
    pub scatter_key_copies: usize,
    /// External GROUP BY: times a worker wrote its groups to disk (0: the query ran in
    /// memory), the runs written (up to two per radix partition and spill: groups, rows),
    /// and their bytes on disk (after `temporary_files_codec`).
    pub spills: usize,
    /// See [`Profile::spills`].
    pub spilled_runs: usize,
    /// See [`Profile::spills`].
    pub spilled_bytes: u64,
}

impl Profile {
    /// The profile of a query answered by this one's work and `other`'s (two aggregations
    /// joined): counts and bytes added, the peak the larger; layout, groups and rows this
    /// one's.
    pub(crate) fn and(self, other: &Profile) -> Profile {
        Profile {
            radix_partitions: self.radix_partitions.max(other.radix_partitions),
            hash_table_bytes: self.hash_table_bytes + other.hash_table_bytes,
            peak_memory_bytes: self.peak_memory_bytes.max(other.peak_memory_bytes),
            morsels_skipped: self.morsels_skipped + other.morsels_skipped,
            condition_cache_rows_skipped: self.condition_cache_rows_skipped + other.condition_cache_rows_skipped,
            morsels_compacted: self.morsels_compacted + other.morsels_compacted,
            morsels_sparse: self.morsels_sparse + other.morsels_sparse,
            partial_flushes: self.partial_flushes + other.partial_flushes,
            scatter_key_copies: self.scatter_key_copies + other.scatter_key_copies,
            spills: self.spills + other.spills,
            spilled_runs: self.spilled_runs + other.spilled_runs,
            spilled_bytes: self.spilled_bytes + other.spilled_bytes,
            ..self
        }
    }
}

/// Runs `plan` with `settings` on a pool from `pools`; returns the answer as one batch.
///
/// # Errors
/// I/O or corruption while loading columns, overflow in SUM, or resource errors.
pub fn execute(plan: &Plan, settings: &Settings, pools: &Pools) -> Result<(RecordBatch, Profile)> {
    let query = QueryContext::new(settings.max_memory_usage, CancelToken::new())
        .with_temporary_data_limit(settings.max_temporary_data_on_disk_size);
    execute_in(plan, settings, pools, &query)
}

/// Runs `plan` like [`execute`], accounting memory and checking cancellation in `query`.
///
/// # Errors
/// As [`execute`], plus [`tessera_common::Error::ResourcesExhausted`] when the query's
/// buffers exceed the context's limit and [`tessera_common::Error::Cancelled`].
pub fn execute_in(
    plan: &Plan,
    settings: &Settings,
    pools: &Pools,
    query: &QueryContext,
) -> Result<(RecordBatch, Profile)> {
    let (batches, profile) = execute_batches_in(plan, settings, pools, query)?;
    let batch = match <[RecordBatch; 1]>::try_from(batches) {
        Ok([b]) => b,
        Err(batches) => arrow::compute::concat_batches(&batches[0].schema(), &batches)?,
    };
    Ok((batch, profile))
}

/// An answer's batches in order, as [`execute_stream_in`] hands them to its consumer.
pub type Batches<'a> = dyn Iterator<Item = Result<RecordBatch>> + 'a;

/// Runs `plan` like [`execute_batches_in`] and hands its answer to `consume`: the answer's
/// schema and an iterator over its batches, in order. A scan without ORDER BY or LIMIT
/// (`SELECT cols FROM t [WHERE ..]`, `numbers(N)`) streams: each morsel's rows reach
/// `consume` while the workers go on with later morsels, so the answer is never held whole
/// (memory about two morsels per worker) and writing it overlaps computing it; `consume`
/// runs on the calling thread. Other plans compute their answer first (GROUP BY and ORDER BY
/// need all input), then hand it over. The schema's fields are nullable only where a value
/// may be NULL: for a streamed scan, a column that may hold NULLs (or an expression over one
/// or with a NULL constant); otherwise a column of the answer that holds a NULL.
/// When `consume` returns before the iterator ends, the scan stops. Workers waiting for
/// `consume` to take their batches run other jobs of their pool meanwhile, so `consume`
/// may itself run a query on the same pool.
///
/// # Errors
/// As [`execute_in`], and `consume`'s error (the scan then stops). An error of the scan
/// after `consume` saw some batches is returned even if `consume` succeeded: the iterator
/// ended early.
pub fn execute_stream_in<R>(
    plan: &Plan,
    settings: &Settings,
    pools: &Pools,
    query: &QueryContext,
    consume: impl FnOnce(SchemaRef, &mut Batches<'_>) -> Result<R>,
) -> Result<(R, Profile)> {
    query.check_cancelled()?;
    let pruned = prune::pruned_plan(plan)?;
    let plan = pruned.as_ref().unwrap_or(plan);
    let Plan::Scan(p) = plan else { return consume_whole(plan, settings, pools, query, consume) };
    if !scan::streams(p) {
        return consume_whole(plan, settings, pools, query, consume);
    }
    let pool = pools.get(settings.max_threads)?;
    let input = scan::open(p, query)?;
    let schema = scan::stream_schema(p, &input);
    // Two morsels in flight per worker: enough to keep them busy while the consumer writes.
    let (tx, rx) = scan::morsel_channel(settings.max_threads.max(1) * 2);
    let mut order = scan::TableOrder::new(rx, p, schema.clone());
    let (consumed, produced) = std::thread::scope(|s| {
        let producer = s.spawn(|| scan::execute_stream(p, &input, settings, &pool, query, tx));
        let consumed = consume(schema, &mut order);
        // The receiver goes: workers still sending stop at their next morsel.
        drop(order);
        let produced = producer.join().unwrap_or_else(|_| Err(tessera_common::Error::internal("a scan thread panicked")));
        (consumed, produced)
    });
    let r = consumed?;
    let mut profile = match produced {
        Ok(profile) => profile,
        // The scan stopped because `consume` returned early, not because the query was.
        Err(tessera_common::Error::Cancelled) if query.check_cancelled().is_ok() => Profile::default(),
        Err(e) => return Err(e),
    };
    profile.peak_memory_bytes = query.peak_memory_usage();
    Ok((r, profile))
}

/// [`execute_stream_in`] for a plan that does not stream: the whole answer first.
fn consume_whole<R>(
    plan: &Plan,
    settings: &Settings,
    pools: &Pools,
    query: &QueryContext,
    consume: impl FnOnce(SchemaRef, &mut Batches<'_>) -> Result<R>,
) -> Result<(R, Profile)> {
    let (batches, profile) = execute_batches_in(plan, settings, pools, query)?;
    let schema = tighten_nullability(&batches);
    let r = consume(schema, &mut batches.into_iter().map(Ok))?;
    Ok((r, profile))
}

/// The schema of `batches` (all of one schema) with a field nullable only if a batch holds
/// a NULL in it.
fn tighten_nullability(batches: &[RecordBatch]) -> SchemaRef {
    let Some(first) = batches.first() else { return Arc::new(arrow::datatypes::Schema::empty()) };
    let schema = first.schema();
    let fields: Vec<arrow::datatypes::Field> = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let nulls = batches.iter().any(|b| b.column(i).null_count() > 0);
            f.as_ref().clone().with_nullable(f.is_nullable() && nulls)
        })
        .collect();
    Arc::new(arrow::datatypes::Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// Runs `plan` like [`execute_in`] and returns the answer as the operators produced it: one
/// or more batches (an external sort's merge emits up to 65,536 rows per batch), not
/// copied into one. Never an empty list: an empty answer is one batch of no rows.
///
/// # Errors
/// As [`execute_in`].
pub fn execute_batches_in(
    plan: &Plan,
    settings: &Settings,
    pools: &Pools,
    query: &QueryContext,
) -> Result<(Vec<RecordBatch>, Profile)> {
    query.check_cancelled()?;
    // Granule skipping: a source with statistics narrows the table to the morsels the
    // WHERE clause may match (prune.rs); other tables run as they are.
    let pruned = prune::pruned_plan(plan)?;
    let plan = pruned.as_ref().unwrap_or(plan);
    let pool = pools.get(settings.max_threads)?;
    if let Plan::Scan(p) = plan
        && let Some((batch, mut profile)) = scan::execute_late(p, settings, &pool, query)?
    {
        profile.peak_memory_bytes = query.peak_memory_usage();
        return Ok((vec![batch], profile));
    }
    let (batches, mut profile) = match plan {
        Plan::Aggregate(p) => aggregate::execute(p, settings, &pool, query),
        Plan::Scan(p) => scan::execute(p, settings, &pool, query),
    }?;
    profile.peak_memory_bytes = query.peak_memory_usage();
    Ok((batches, profile))
}
