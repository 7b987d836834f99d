//! Filter/project scans (no aggregation): `SELECT cols FROM t WHERE .. ORDER BY .. LIMIT n`.
//! Each worker keeps only its best `offset + limit` rows (top-N on Arrow sort kernels), so
//! memory stays bounded by the limit, not by the table.
//!
//! Answers do not depend on the thread count or on which worker took which morsel: rows
//! that tie on every ORDER BY key come in table order (a hidden row-position key ends the
//! sort), and `LIMIT` without ORDER BY returns the first rows in table order.

use std::sync::Arc;

use std::sync::atomic::{AtomicUsize, Ordering};

use arrow::array::{
    Array, ArrayRef, AsArray, RecordBatch, RecordBatchOptions, UInt8Array, UInt32Array, UInt64Array,
};
use arrow::buffer::BooleanBuffer;
use arrow::compute::{concat_batches, take};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimestampSecondType, UInt64Type};
use tessera_kernels::Kernels;
use tessera_common::{Result, Settings};

use crate::Profile;
use crate::aggregate::order_and_limit;
use crate::context::QueryContext;
use crate::morsel::{Input, Passed, read_rows_at};
use crate::prewhere::Prewhere;
use crate::plan::{OrderLimit, Plan, ScalarExpr, ScanPlan, SortKey};
use crate::pool::run_morsels;
use crate::sort::{self, SortSpill};
use crate::topn_filter::TopNFilter;

/// Kept rows below which a worker's top-N buffer is not compacted.
const MIN_COMPACT_ROWS: usize = 65_536;

/// Kept rows (all workers) above which an ORDER BY sorts each worker's rows in parallel and
/// merges the runs, instead of sorting them all on one thread.
const PARALLEL_SORT_ROWS: usize = 1 << 20;

/// Runs a scan plan, reading the table a morsel at a time; the answer in one or more
/// batches.
pub(crate) fn execute(
    plan: &ScanPlan,
    settings: &Settings,
    pool: &rayon::ThreadPool,
    query: &QueryContext,
) -> Result<(Vec<RecordBatch>, Profile)> {
    let input = open(plan, query)?;
    let (batch, profile) = run(plan, &input, settings, pool, query, false, None)?;
    Ok((batch, input.profile(profile)))
}

/// Whether [`execute_stream`] streams `plan`: a scan without ORDER BY or LIMIT (its answer
/// is the table's rows in table order, each morsel's as soon as it and the morsels before
/// it are done). A LIMIT keeps the answer small, and takes the late-materializing path.
pub(crate) fn streams(plan: &ScanPlan) -> bool {
    plan.order.order_by.is_empty() && plan.order.limit.is_none()
}

/// Where a streamed scan's workers send each morsel's answer: (morsel, its batches, none
/// when no row passed), over a channel to its [`TableOrder`].
///
/// The answers not yet taken by the receiver are bounded by morsel number, not by count:
/// morsel `m` is sent once `m < taken + window`, where `taken` is the number of morsels
/// the receiver has passed on in table order, or once its answer fits in [`WINDOW_BYTES`]
/// with the other answers sent and not yet passed on (small answers: `(number % 256)::Int8`
/// makes 64 KiB a morsel, and workers held to a few morsels ahead waited in turns with the
/// receiver). A bound on the channel alone does not bound memory: while one worker is slow
/// on morsel `k` (on a machine with fewer cores than threads, descheduled), the receiver
/// must drain the channel to find `k`, and the other workers' later morsels pile up in its
/// reorder map (795 MB of a 100M-row `numbers` read into Native on 2 vCPUs). The worker
/// holding morsel `taken` is never held back; see [`send_morsel`] for what else ends a
/// wait.
pub(crate) struct MorselSender {
    tx: std::sync::mpsc::Sender<(usize, Vec<RecordBatch>)>,
    taken: Arc<Taken>,
    window: usize,
    /// A worker's morsel failed: the scan ends with that error, and no worker waits for
    /// morsels that will not come.
    failed: std::sync::atomic::AtomicBool,
}

thread_local! {
    /// The streamed scans (their [`MorselSender`]'s address) whose workers are working on
    /// this thread, innermost last: a worker can run on top of another worker of its own
    /// scan (rayon runs a pending job while a thread waits in a join or `yield_now`).
    static STREAMING: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Marks a worker of the streamed scan `tx` as working on this thread until dropped.
struct Streaming(usize);

impl Streaming {
    fn enter(tx: &MorselSender) -> Self {
        let id = tx as *const MorselSender as usize;
        STREAMING.with(|s| s.borrow_mut().push(id));
        Streaming(id)
    }

    /// Whether another worker of the same scan is working lower on this thread's stack.
    fn nested(&self) -> bool {
        STREAMING.with(|s| s.borrow().iter().filter(|&&id| id == self.0).count() > 1)
    }
}

impl Drop for Streaming {
    fn drop(&mut self) {
        STREAMING.with(|s| {
            let mut s = s.borrow_mut();
            if let Some(i) = s.iter().rposition(|&id| id == self.0) {
                s.remove(i);
            }
        });
    }
}

/// Bytes of morsel answers a streamed scan's workers may have sent beyond their morsel
/// window ([`MorselSender`]), not yet passed on by the receiver: 8 MiB.
const WINDOW_BYTES: usize = 8 << 20;

/// What a streamed scan's receiver has passed on, shared with its senders.
#[derive(Debug, Default)]
pub(crate) struct Taken {
    /// Morsels passed on, in table order.
    morsels: AtomicUsize,
    /// Bytes ([`answer_bytes`]) of the morsels sent and not yet passed on.
    bytes: AtomicUsize,
}

impl Taken {
    /// The receiver has passed on the morsel before `next`, whose answer is `batches`.
    fn passed(&self, next: usize, batches: &[RecordBatch]) {
        self.bytes.fetch_sub(answer_bytes(batches), Ordering::AcqRel);
        self.morsels.store(next, Ordering::Release);
    }
}

/// Bytes of a morsel's answer, as [`Taken::bytes`] counts them.
fn answer_bytes(batches: &[RecordBatch]) -> usize {
    batches.iter().map(|b| b.get_array_memory_size()).sum()
}

/// The receiving end of a [`MorselSender`] and what it has taken, for a [`TableOrder`].
pub(crate) type MorselReceiver = (std::sync::mpsc::Receiver<(usize, Vec<RecordBatch>)>, Arc<Taken>);

/// A channel for a streamed scan with `window` morsels in flight beyond the receiver's
/// position (at least 1).
pub(crate) fn morsel_channel(window: usize) -> (MorselSender, MorselReceiver) {
    let (tx, rx) = std::sync::mpsc::channel();
    let taken = Arc::new(Taken::default());
    let sender = MorselSender { tx, taken: taken.clone(), window: window.max(1), failed: Default::default() };
    (sender, (rx, taken))
}

/// The input of a scan plan: the columns it reads.
pub(crate) fn open<'a>(plan: &'a ScanPlan, query: &'a QueryContext) -> Result<Input<'a>> {
    let whole = Plan::Scan(plan.clone());
    Ok(Input::open(&plan.table, &whole.columns_used(), query)?.with_sized(&whole.sized_columns()))
}

/// The schema of a streamed scan's answer: nullable where a value may be NULL (a column
/// that may hold NULLs, or an expression over one or with a NULL constant).
pub(crate) fn stream_schema(plan: &ScanPlan, input: &Input<'_>) -> SchemaRef {
    let fields: Vec<Field> = plan.output[..plan.visible]
        .iter()
        .map(|(name, e)| Field::new(name, output_type(plan, e), input.may_be_null(e, &plan.computed)))
        .collect();
    Arc::new(Schema::new(fields))
}

/// The type of output expression `e` of `plan`.
fn output_type(plan: &ScanPlan, e: &ScalarExpr) -> DataType {
    match e {
        ScalarExpr::Computed(i) => plan.computed[*i].data_type(),
        e => e.data_type(&plan.table),
    }
}

/// Runs a scan plan that [`streams`] over `input` ([`open`]), sending each morsel's answer
/// to `tx` as its worker finishes it, in any order (the receiver restores table order:
/// [`TableOrder`]); returns once every morsel is sent. A send to a receiver that is gone
/// ends the scan with [`tessera_common::Error::Cancelled`].
pub(crate) fn execute_stream(
    plan: &ScanPlan,
    input: &Input<'_>,
    settings: &Settings,
    pool: &rayon::ThreadPool,
    query: &QueryContext,
    tx: MorselSender,
) -> Result<Profile> {
    let (_, profile) = run(plan, input, settings, pool, query, false, Some(&tx))?;
    Ok(input.profile(profile))
}

/// How long a worker waits for the receiver while `taken` does not move at all before it
/// sends beyond the window: a receiver that takes nothing for this long is blocked
/// (writing to a full pipe) or waits for a worker that cannot go on (a cycle of workers
/// of two streamed scans run on top of each other's waits), and one morsel more per second
/// and worker costs little memory, where waiting on could hang.
const STALLED: std::time::Duration = std::time::Duration::from_secs(1);

/// Sends a morsel's answer to a streamed scan's receiver once the receiver is within the
/// sender's window of it ([`MorselSender`]). Until then the worker runs other jobs of its
/// pool (rayon's `yield_now`), else sleeps 100 us: a worker blocked in a plain wait would
/// hold its pool thread, and a consumer that waits for another query on the same pool (an
/// embedder's closure running one) would wait forever. A wait ends without the window
/// when a worker of the scan failed (its morsel will never come; the scan ends with its
/// error), when this worker runs on top of another worker of its own scan on this thread
/// (which holds an earlier morsel and cannot go on until this one returns), or when
/// `taken` has not moved for [`STALLED`]. The query's cancellation, or a receiver that is
/// gone, ends it with [`tessera_common::Error::Cancelled`].
fn send_morsel(tx: &MorselSender, item: (usize, Vec<RecordBatch>), me: &Streaming, query: &QueryContext) -> Result<()> {
    let (mut seen, mut since) = (usize::MAX, std::time::Instant::now());
    let bytes = answer_bytes(&item.1);
    // Whether the answer's bytes are counted already (it went by WINDOW_BYTES); every other
    // way out of the wait counts them after it.
    let counted = loop {
        let taken = tx.taken.morsels.load(Ordering::Acquire);
        if item.0 < taken + tx.window || tx.failed.load(Ordering::Acquire) || me.nested() {
            break false;
        }
        let fits = |b: usize| (b + bytes <= WINDOW_BYTES).then_some(b + bytes);
        if tx.taken.bytes.fetch_update(Ordering::AcqRel, Ordering::Acquire, fits).is_ok() {
            break true;
        }
        if Arc::strong_count(&tx.taken) == 1 {
            return Err(tessera_common::Error::Cancelled);
        }
        query.check_cancelled()?;
        if taken != seen {
            (seen, since) = (taken, std::time::Instant::now());
        } else if since.elapsed() > STALLED {
            break false;
        }
        if rayon::yield_now() != Some(rayon::Yield::Executed) {
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
    };
    if !counted {
        tx.taken.bytes.fetch_add(bytes, Ordering::AcqRel);
    }
    tx.tx.send(item).map_err(|_| tessera_common::Error::Cancelled)
}

/// Puts a streamed scan's morsels back in table order and applies its OFFSET (it has no
/// LIMIT, see [`streams`]):
/// an iterator over the answer's batches, fed by the [`MorselSender`]'s receiver. It holds
/// the morsels that finished before an earlier one (about one per worker).
pub(crate) struct TableOrder {
    rx: std::sync::mpsc::Receiver<(usize, Vec<RecordBatch>)>,
    /// `next` and the bytes not yet passed on, shared with the senders ([`MorselSender`]).
    taken: Arc<Taken>,
    /// Morsels received ahead of `next`.
    early: std::collections::BTreeMap<usize, Vec<RecordBatch>>,
    next: usize,
    ready: std::collections::VecDeque<RecordBatch>,
    skip: usize,
    keep: Vec<usize>,
    /// The answer's schema, for the one empty batch of an answer without rows.
    schema: SchemaRef,
    emitted: bool,
}

impl TableOrder {
    pub(crate) fn new((rx, taken): MorselReceiver, plan: &ScanPlan, schema: SchemaRef) -> Self {
        TableOrder {
            rx,
            taken,
            early: Default::default(),
            next: 0,
            ready: Default::default(),
            skip: plan.order.offset,
            keep: (0..plan.visible).collect(),
            schema,
            emitted: false,
        }
    }
}

impl Iterator for TableOrder {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Result<RecordBatch>> {
        loop {
            while let Some(b) = self.ready.pop_front() {
                if self.skip >= b.num_rows() {
                    self.skip -= b.num_rows();
                    continue;
                }
                let out = b.slice(self.skip, b.num_rows() - self.skip).project(&self.keep);
                self.skip = 0;
                self.emitted = true;
                return Some(out.map_err(Into::into));
            }
            match self.early.remove(&self.next) {
                Some(batches) => {
                    self.next += 1;
                    self.taken.passed(self.next, &batches);
                    self.ready.extend(batches);
                }
                None => match self.rx.recv() {
                    Ok((m, batches)) => {
                        self.early.insert(m, batches);
                    }
                    // Every sender is gone: all morsels are in, or the scan failed (its
                    // error is the producer's to report). An answer without rows is one
                    // empty batch, as from the other plans.
                    Err(_) if !self.emitted => {
                        self.emitted = true;
                        return Some(Ok(RecordBatch::new_empty(self.schema.clone())));
                    }
                    Err(_) => return None,
                },
            }
        }
    }
}

/// Runs a scan plan; with `with_rows` the answer gets one more column after the visible
/// ones: each row's position in the table (`UInt64`).
///
/// With ORDER BY, a worker whose kept rows pass its share of
/// `max_bytes_before_external_sort` writes them to disk as a sorted run, and the answer is
/// a merge of the runs (see [`crate::sort`]).
fn run(
    plan: &ScanPlan,
    input: &Input<'_>,
    settings: &Settings,
    pool: &rayon::ThreadPool,
    query: &QueryContext,
    with_rows: bool,
    stream: Option<&MorselSender>,
) -> Result<(Vec<RecordBatch>, Profile)> {
    let sorted = !plan.order.order_by.is_empty();
    debug_assert!(stream.is_none() || (!sorted && !with_rows));
    // With ORDER BY, a hidden last column holds each row's position in the table, the last
    // sort key: ties come out in table order whatever the scheduling.
    let mut fields: Vec<Field> = plan
        .output
        .iter()
        .map(|(name, e)| Field::new(name, output_type(plan, e), true))
        .collect();
    let mut order = plan.order.clone();
    let row_col = (sorted || with_rows).then_some(fields.len());
    if let Some(r) = row_col {
        fields.push(Field::new("__row", DataType::UInt64, false));
        if sorted {
            order.order_by.push(SortKey { output: r, descending: false, nulls_first: false });
        }
    }
    let schema: SchemaRef = Arc::new(Schema::new(fields));
    let chunk_lens = plan.table.chunk_lens();
    let chunk_starts = chunk_starts(chunk_lens);
    let want = order.limit.map(|l| l.saturating_add(order.offset));
    let local = OrderLimit { order_by: order.order_by.clone(), limit: want, offset: 0 };
    let all_cols = schema.fields().len();
    let kern = settings.kernels()?;
    // Top-N dynamic filtering on the first sort key, when it is a plain column and no
    // expression could fail on the rows it drops (see crate::topn_filter).
    let general = plan.filter.as_ref().is_some_and(crate::prewhere::has_expr)
        || plan.output.iter().any(|(_, e)| matches!(e, ScalarExpr::Computed(_)));
    let topn = order.order_by.first().filter(|_| sorted && !general && settings.use_top_k_dynamic_filtering).and_then(|k| {
        match plan.output.get(k.output) {
            Some((_, ScalarExpr::Column(c))) => TopNFilter::new(&plan.table, *c, k.descending, k.nulls_first, want)
                .map(|f| if settings.use_query_condition_cache { f.cached(plan.filter.as_ref(), &plan.table) } else { f })
                .map(|f| (f, k.output)),
            _ => None,
        }
    });
    // External sort: a worker writes a sorted run once its rows pass its share.
    let spill_limit = settings
        .external_sort_bytes()
        .filter(|_| sorted)
        .map(|b| usize::try_from(b).unwrap_or(usize::MAX) / settings.max_threads.max(1));
    // PREWHERE: the filter's columns first; the outputs only for morsels with a row left.
    let mut output_cols: Vec<usize> = Vec::new();
    for (_, e) in &plan.output {
        match e {
            ScalarExpr::Computed(i) => plan.computed[*i].columns(&mut output_cols),
            e => output_cols.push(e.column()),
        }
    }
    output_cols.sort_unstable();
    output_cols.dedup();
    let prewhere = Prewhere::new(plan.filter.as_ref(), plan.table.schema(), settings.use_query_condition_cache);
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
    let work = |ScanWorker { kept, kept_rows, passed, accounted, runs, runs_bytes, spill, topn_best }: &mut ScanWorker,
                m: usize|
     -> Result<()> {
            query.check_cancelled()?;
            let m = topn.as_ref().map_or(m, |(t, _)| t.morsel(m));
            if let Some((t, _)) = &topn
                && t.skips(m)
            {
                if let Some(key) = t.cache_key() {
                    input.record_condition(key, m, &BooleanBuffer::new_unset(chunk_lens[m]));
                }
                input.skip();
                return Ok(());
            }
            if let Some(w) = want
                && !sorted
                && enough_before(m, w)
            {
                passed_in[m].store(0, Ordering::Release);
                return Ok(());
            }
            let len = chunk_lens[m];
            let mut mcols = input.morsel();
            let bound = topn.as_ref().and_then(|(t, _)| t.predicate());
            let key = topn.as_ref().and_then(|(t, _)| t.cache_key());
            let sel = prewhere.select_with(input, m, len, &mut mcols, kern, bound, key)?;
            if sel.as_ref().is_some_and(|s| s.is_empty()) {
                passed_in[m].store(0, Ordering::Release);
                input.skip();
                return Ok(());
            }
            // The outputs, at the kept rows only when few are (`at`: their row numbers).
            let Passed { cols: mcols, sel, len, at } = input.read_passed(m, len, &output_cols, sel, mcols)?;
            let idx = sel.map(UInt32Array::from);
            let mut out = Vec::with_capacity(all_cols);
            // Computed outputs: evaluated on the kept rows only.
            let mut kept_cols: Option<Vec<Option<ArrayRef>>> = None;
            for (_, e) in &plan.output {
                if let ScalarExpr::Computed(i) = e {
                    if kept_cols.is_none() {
                        let cols = mcols
                            .cols
                            .iter()
                            .map(|c| match (c, &idx) {
                                (Some(a), Some(i)) => take(a, i, None).map(Some),
                                (c, _) => Ok(c.clone()),
                            })
                            .collect::<std::result::Result<Vec<_>, _>>()?;
                        kept_cols = Some(cols);
                    }
                    let n = idx.as_ref().map_or(len, |i| i.len());
                    out.push(crate::expr::evaluate(&plan.computed[*i], kept_cols.as_deref().unwrap_or(&[]), n)?);
                    continue;
                }
                let arr = mcols.get(e.column())?;
                let arr = match &idx {
                    Some(i) => take(arr, i, None)?,
                    None => arr.clone(),
                };
                out.push(project(e, arr, kern));
            }
            if row_col.is_some() {
                let base = chunk_starts[m];
                let rows: UInt64Array = match (&at, &idx) {
                    (Some(at), _) => at.iter().map(|&r| base + r as u64).collect(),
                    (None, Some(i)) => i.values().iter().map(|&r| base + r as u64).collect(),
                    (None, None) => (0..len as u64).map(|r| base + r).collect(),
                };
                out.push(Arc::new(rows));
            }
            let batch = RecordBatch::try_new(schema.clone(), out)?;
            if let Some((t, key)) = &topn {
                t.offer(topn_best, batch.column(*key))?;
            }
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
            // The kept rows and, for ORDER BY, what sorting them will take.
            let mut bytes: usize = kept.iter().map(|(_, b)| b.get_array_memory_size()).sum::<usize>()
                + if sorted { sort::sort_bytes(&schema, &local.order_by, *kept_rows) } else { 0 };
            if let Some(limit) = spill_limit
                && bytes + *runs_bytes > limit
            {
                // External sort: the kept rows sorted straight into a run on disk, and the
                // runs in memory after them.
                if !kept.is_empty() {
                    let batches: Vec<RecordBatch> = kept.drain(..).map(|(_, b)| b).collect();
                    *kept_rows = 0;
                    bytes = 0;
                    let picks = sort::sorted_picks(&batches, &local.order_by, local.limit)?;
                    spill.write_picks(&batches, &picks, settings, query)?;
                }
                for run in runs.drain(..) {
                    spill.write_run_batches(&run, settings, query)?;
                }
                *runs_bytes = 0;
                if let Some(w) = want {
                    spill.compact_for_limit(&schema, &local.order_by, w, settings, query)?;
                }
            } else if sorted && bytes > settings.sort_run_bytes() {
                // A sorted run in memory: no sort (nor final concatenation) past it, so no
                // string column outgrows Arrow's 32-bit offsets.
                let run = sorted_run(std::mem::take(kept), &local)?;
                *kept_rows = 0;
                bytes = 0;
                *runs_bytes += run.iter().map(RecordBatch::get_array_memory_size).sum::<usize>();
                runs.push(run);
                // Top-N: the runs together keep at most the best `want` rows once they hold
                // twice that many (one merge, as the compaction of `kept` above).
                let run_rows: usize = runs.iter().flatten().map(RecordBatch::num_rows).sum();
                if let Some(w) = want
                    && runs.len() > 1
                    && run_rows > w.saturating_mul(2)
                {
                    let all: Vec<usize> = (0..all_cols).collect();
                    let best = sort::merge(
                        sort::Merge { schema: &schema, spills: &[], memory: std::mem::take(runs), order_by: &local.order_by, offset: 0, limit: Some(w), keep: &all },
                        query,
                    )?;
                    *runs_bytes = best.iter().map(RecordBatch::get_array_memory_size).sum();
                    // The merge left its output accounted; the worker accounts it below.
                    query.shrink(*runs_bytes);
                    *runs = vec![best];
                }
            }
            let op = if sorted { "ORDER BY ... LIMIT top-N buffer" } else { "scan output buffer" };
            query.resize(accounted, bytes + *runs_bytes, op)?;
            Ok(())
    };
    let parts = run_morsels(pool, settings.max_threads, chunk_lens.len(), ScanWorker::default, |w, m| {
        let Some(tx) = stream else { return work(w, m) };
        let me = Streaming::enter(tx);
        // Marks the scan failed unless the morsel is sent (an error or a panic on the way).
        struct Failed<'a>(&'a std::sync::atomic::AtomicBool);
        impl Drop for Failed<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Release);
            }
        }
        let failed = Failed(&tx.failed);
        work(w, m)?;
        // Streamed: the morsel's answer goes to the receiver at once (nothing when no row
        // passed), and the worker keeps nothing.
        let batches = w.kept.drain(..).map(|(_, b)| b).collect();
        w.kept_rows = 0;
        query.resize(&mut w.accounted, 0, "scan output buffer")?;
        send_morsel(tx, (m, batches), &me, query)?;
        std::mem::forget(failed);
        Ok(())
    })?;
    let rows_in = parts.iter().map(|w| w.passed).sum();
    let keep: Vec<usize> = (0..plan.visible).chain(row_col.filter(|_| with_rows)).collect();
    let profile = Profile { rows_in, ..Profile::default() };
    if !sorted {
        // Table order; OFFSET and LIMIT by slicing, the rows not copied into one batch.
        let mut batches: Vec<(usize, RecordBatch)> = parts.into_iter().flat_map(|w| w.kept).collect();
        batches.sort_by_key(|(m, _)| *m);
        let out = sort::offset_limit(batches.into_iter().map(|(_, b)| b), &schema, order.offset, order.limit, &keep)?;
        return Ok((out, profile));
    }
    let kept_bytes: usize = parts.iter().flat_map(|w| &w.kept).map(|(_, b)| b.get_array_memory_size()).sum();
    let kept_rows: usize = parts.iter().map(|w| w.kept_rows).sum();
    if kept_bytes > sort::concat_max_bytes(settings)
        || parts.iter().any(|w| !w.spill.is_empty() || !w.runs.is_empty())
        || (parts.len() > 1 && kept_rows > PARALLEL_SORT_ROWS)
    {
        // Runs on disk or in memory, or many rows: every worker's last rows become one more
        // sorted run (the workers' runs sorted in parallel), and the answer is the merge
        // (see crate::sort).
        let mut spills = Vec::with_capacity(parts.len());
        let mut last = Vec::with_capacity(parts.len());
        let mut memory = Vec::with_capacity(parts.len());
        for w in parts {
            memory.extend(w.runs);
            last.push(w.kept);
            spills.push(w.spill);
        }
        let sorted: Vec<Vec<RecordBatch>> = {
            use rayon::prelude::*;
            pool.install(|| last.into_par_iter().map(|kept| sorted_run(kept, &local)).collect::<Result<_>>())?
        };
        memory.extend(sorted);
        let out = sort::merge(
            sort::Merge { schema: &schema, spills: &spills, memory, order_by: &order.order_by, offset: order.offset, limit: order.limit, keep: &keep },
            query,
        )?;
        let (spilled_runs, spilled_bytes) =
            spills.iter().map(SortSpill::runs_and_bytes).fold((0, 0), |(r, b), (r2, b2)| (r + r2, b + b2));
        let spills = spills.iter().map(|s| s.spills).sum();
        return Ok((out, Profile { spills, spilled_runs, spilled_bytes, ..profile }));
    }
    let mut batches: Vec<(usize, RecordBatch)> = parts.into_iter().flat_map(|w| w.kept).collect();
    // Table order (the top-N order is restored by the sort below).
    batches.sort_by_key(|(m, _)| *m);
    let merged = concat_batches(&schema, batches.iter().map(|(_, b)| b))?;
    let out = order_and_limit(merged, &order, all_cols)?;
    Ok((vec![out.project(&keep)?], profile))
}

/// `kept` sorted by `order` (the first `order.limit` rows), as batches of about
/// [`sort::BLOCK_BYTES`]: no copy of all rows into one batch.
fn sorted_run(kept: Vec<(usize, RecordBatch)>, order: &OrderLimit) -> Result<Vec<RecordBatch>> {
    let batches: Vec<RecordBatch> = kept.into_iter().map(|(_, b)| b).collect();
    let picks = sort::sorted_picks(&batches, &order.order_by, order.limit)?;
    let mut run = Vec::new();
    sort::for_each_block(&batches, &picks, |b| {
        run.push(b);
        Ok(())
    })?;
    Ok(run)
}

/// One scan worker's rows: the batches it kept (with their morsel), sorted runs in memory
/// and on disk, and its counts.
#[derive(Default)]
struct ScanWorker {
    kept: Vec<(usize, RecordBatch)>,
    kept_rows: usize,
    /// Rows that passed the filter.
    passed: usize,
    /// Bytes of `kept` and `runs` accounted in the query.
    accounted: usize,
    /// Sorted runs in memory, each a list of batches in order.
    runs: Vec<Vec<RecordBatch>>,
    runs_bytes: usize,
    spill: SortSpill,
    /// First sort keys of the best rows this worker kept (top-N dynamic filtering).
    topn_best: Option<ArrayRef>,
}

/// Late materialization of `ORDER BY .. LIMIT n` and `LIMIT n` scans (ClickHouse's lazy
/// reading of top-N rows, DuckDB's late materialization): first only the WHERE and ORDER BY
/// columns are read and the answer's row positions found; then the other columns are read
/// for the morsels holding those rows only, and the rows picked out. `SELECT * .. ORDER BY
/// EventTime LIMIT 10` (ClickBench Q24-Q27) thus decodes two columns of the table, not 105.
/// `None` when the plan has no LIMIT, a LIMIT past [`MAX_LATE_ROWS`], or no column to defer.
/// An OFFSET stays in phase 1 (`LIMIT 10 OFFSET 8000000` sorts keys and row positions,
/// then fetches ten rows).
///
/// # Errors
/// As [`execute`], plus the source's errors while reading.
pub(crate) fn execute_late(
    plan: &ScanPlan,
    settings: &Settings,
    pool: &rayon::ThreadPool,
    query: &QueryContext,
) -> Result<Option<(RecordBatch, Profile)>> {
    let Some(limit) = plan.order.limit.filter(|_| settings.query_plan_optimize_lazy_materialization) else {
        return Ok(None);
    };
    if plan.output.iter().any(|(_, e)| matches!(e, ScalarExpr::Computed(_))) {
        // Computed outputs read several columns: the plain path.
        return Ok(None);
    }
    // The answer's rows are fetched, not the skipped ones: an OFFSET costs phase 1 only
    // (sort keys and row positions), however large.
    if limit > MAX_LATE_ROWS {
        return Ok(None);
    }
    // Phase 1: the answer's rows, from the filter and sort-key columns.
    let mut early: Vec<(String, ScalarExpr)> = Vec::new();
    let mut order_by = Vec::with_capacity(plan.order.order_by.len());
    for k in &plan.order.order_by {
        let (name, e) = &plan.output[k.output];
        let output = early.iter().position(|(_, x)| x == e).unwrap_or_else(|| {
            early.push((name.clone(), *e));
            early.len() - 1
        });
        order_by.push(SortKey { output, ..*k });
    }
    let first = ScanPlan {
        table: plan.table.clone(),
        filter: plan.filter.clone(),
        output: early,
        computed: Vec::new(),
        visible: 0,
        order: OrderLimit { order_by, limit: plan.order.limit, offset: plan.order.offset },
    };
    let first_cols = Plan::Scan(first.clone()).columns_used();
    let mut wanted: Vec<usize> = plan.output[..plan.visible].iter().map(|(_, e)| e.column()).collect();
    wanted.sort_unstable();
    wanted.dedup();
    if wanted.iter().all(|c| first_cols.binary_search(c).is_ok()) {
        return Ok(None);
    }
    let input = Input::open(&plan.table, &first_cols, query)?.with_sized(&Plan::Scan(first.clone()).sized_columns());
    let (rows, profile) = run(&first, &input, settings, pool, query, true, None)?;
    let rows = concat_batches(&rows[0].schema(), &rows)?;
    let profile = input.profile(profile);
    drop(input);
    let rows = rows.column(0).as_primitive::<UInt64Type>();

    // Phase 2: the visible columns at those rows.
    let starts = chunk_starts(plan.table.chunk_lens());
    let located: Vec<(usize, u32)> = rows
        .values()
        .iter()
        .map(|&r| {
            let m = starts.partition_point(|&s| s <= r) - 1;
            (m, (r - starts[m]) as u32)
        })
        .collect();
    let fetched = read_rows_at(&plan.table, &wanted, &located, pool, query)?;
    let kern = settings.kernels()?;
    let mut out = Vec::with_capacity(plan.visible);
    let mut fields = Vec::with_capacity(plan.visible);
    for (name, e) in &plan.output[..plan.visible] {
        let arr = fetched[wanted.binary_search(&e.column()).expect("column fetched")].clone();
        out.push(project(e, arr, kern));
        fields.push(Field::new(name, e.data_type(&plan.table), true));
    }
    let batch = RecordBatch::try_new_with_options(
        Arc::new(Schema::new(fields)),
        out,
        &RecordBatchOptions::new().with_row_count(Some(located.len())),
    )?;
    Ok(Some((batch, profile)))
}

/// Rows a LIMIT may ask for (OFFSET not counted) and still take the late-materialization
/// path (past it, reading whole columns costs no more than fetching that many rows' morsels).
const MAX_LATE_ROWS: usize = 65_536;

/// The position in the table of each chunk's first row.
fn chunk_starts(chunk_lens: &[usize]) -> Vec<u64> {
    chunk_lens
        .iter()
        .scan(0u64, |acc, &l| {
            let start = *acc;
            *acc += l as u64;
            Some(start)
        })
        .collect()
}

/// The value of `e` for rows whose column `e.column()` is `arr`.
fn project(e: &ScalarExpr, arr: ArrayRef, kern: &Kernels) -> ArrayRef {
    match e {
        // Computed outputs are evaluated by the caller, never projected from one column.
        ScalarExpr::Column(_) | ScalarExpr::Computed(_) => arr,
        ScalarExpr::Minute(_) => {
            let mut mins = Vec::new();
            (kern.minute_of_hour)(arr.as_primitive::<TimestampSecondType>().values(), &mut mins);
            let nulls = arr.logical_nulls();
            Arc::new(UInt8Array::new(mins.into(), nulls)) as ArrayRef
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One batch of a morsel's answer taking `bytes` bytes.
    fn answer(bytes: usize) -> Vec<RecordBatch> {
        let a: ArrayRef = Arc::new(arrow::array::UInt8Array::from(vec![0u8; bytes]));
        vec![RecordBatch::try_from_iter([("a", a)]).unwrap()]
    }

    /// A worker's morsel beyond the receiver's window waits for the receiver; the morsel
    /// the receiver waits for never does, so a slow worker cannot make the others' later
    /// morsels pile up in memory. Small answers go beyond the window while their bytes fit
    /// WINDOW_BYTES, and the receiver's passing a morsel on gives its bytes back.
    #[test]
    fn streamed_morsels_wait_for_the_receivers_window() {
        let query = QueryContext::default();
        let (tx, (rx, taken)) = morsel_channel(2);
        // Answers larger than half of WINDOW_BYTES: the morsel window alone lets them by.
        let big = WINDOW_BYTES / 2 + 1;
        std::thread::scope(|s| {
            let worker = s.spawn(|| {
                let me = Streaming::enter(&tx);
                [1, 2, 3].into_iter().try_for_each(|m| send_morsel(&tx, (m, answer(big)), &me, &query))
            });
            // Morsel 1 is inside the window (morsels 0 and 1, nothing taken yet).
            assert_eq!(rx.recv().unwrap().0, 1);
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert!(rx.try_recv().is_err(), "morsel 2 was sent before morsel 0 was taken");
            // The receiver takes morsel 0 (a slow worker's), then 1: 2 and 3 may come.
            taken.passed(1, &[]);
            assert_eq!(rx.recv().unwrap().0, 2);
            taken.passed(2, &answer(big));
            assert_eq!(rx.recv().unwrap().0, 3);
            worker.join().unwrap().unwrap();
        });
        // Small answers go beyond the morsel window while their bytes fit WINDOW_BYTES.
        let (tx, (rx, taken)) = morsel_channel(1);
        let small = answer(1000);
        let per = answer_bytes(&small);
        let fit = WINDOW_BYTES / per;
        std::thread::scope(|s| {
            let worker = s.spawn(|| {
                let me = Streaming::enter(&tx);
                (1..=fit + 1).try_for_each(|m| send_morsel(&tx, (m, small.clone()), &me, &query))
            });
            for m in 1..=fit {
                assert_eq!(rx.recv().unwrap().0, m);
            }
            assert_eq!(taken.bytes.load(Ordering::Acquire), fit * per);
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert!(rx.try_recv().is_err(), "morsel {} was sent past WINDOW_BYTES", fit + 1);
            // The receiver passes morsels 0 (sent by no one here) and 1 on.
            taken.passed(1, &[]);
            taken.passed(2, &small);
            assert_eq!(rx.recv().unwrap().0, fit + 1);
            worker.join().unwrap().unwrap();
        });
        // A receiver that is gone ends a wait with Cancelled.
        let (tx, receiver) = morsel_channel(1);
        drop(receiver);
        let me = Streaming::enter(&tx);
        assert!(matches!(send_morsel(&tx, (5, Vec::new()), &me, &query), Err(tessera_common::Error::Cancelled)));
        drop(me);
        // A failed worker ends the others' waits (its morsel will never come), and so does
        // a worker of the same scan lower on this thread's stack.
        let (tx, (rx, _taken)) = morsel_channel(1);
        tx.failed.store(true, Ordering::Release);
        let me = Streaming::enter(&tx);
        send_morsel(&tx, (5, Vec::new()), &me, &query).unwrap();
        assert_eq!(rx.recv().unwrap().0, 5);
        tx.failed.store(false, Ordering::Release);
        let inner = Streaming::enter(&tx);
        assert!(inner.nested() && !Streaming::enter(&morsel_channel(1).0).nested());
        send_morsel(&tx, (9, Vec::new()), &inner, &query).unwrap();
        assert_eq!(rx.recv().unwrap().0, 9);
    }
}
