//! External sort: `ORDER BY` whose rows outgrow their share of the query's memory
//! (ClickHouse's `max_bytes_before_external_sort`, DuckDB's larger-than-memory sort).
//!
//! A worker whose buffered rows pass its share of the threshold sorts them
//! ([`sorted_picks`]: row-format keys; the in-memory path's order, since every sort here
//! ends on a unique key) and writes them to its temporary [`SpillFile`] as one **sorted
//! run**: blocks of about [`BLOCK_BYTES`] (Arrow IPC stream encoding, then the file's codec),
//! so that merging holds about one block per run. With a LIMIT, a run keeps only its first
//! `offset + limit` rows: no later row can be in the answer.
//!
//! The final phase is a k-way merge (a binary heap of run cursors) over the disk runs and
//! the workers' last in-memory rows. Keys are compared as Arrow row-format bytes
//! ([`arrow::row`], memcmp-comparable; floats canonical first, as the in-memory sort sees
//! them). Every scan sort ends on the row's position in the table, so no two rows tie and the
//! merged order is exactly the in-memory one, whatever the threads and spill points. The
//! merge skips `OFFSET` rows, stops after `LIMIT`, and emits batches of at most
//! [`OUT_ROWS`] rows; the answer is held in memory (the API returns it whole).
//!
//! Memory of the merge: a decoded block and its row-format keys per run (up to about two
//! per run between prunings of the used-up blocks), plus the answer. The runs are merged in
//! one pass: with the default thresholds a 20 GB input makes tens of runs. Small budgets
//! with many threads make many more (a run per worker share), and disk runs of a LIMIT query
//! are not compacted to the best `offset + limit` rows: see issue 11's notes.

use std::cmp::Ordering;
use std::io::Cursor;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch, UInt32Array};
use arrow::compute::{SortOptions, interleave};
use arrow::datatypes::SchemaRef;
use arrow::ipc::reader::StreamReader;
use arrow::ipc::writer::StreamWriter;
use arrow::row::{RowConverter, Rows, SortField};
use tessera_common::float::canonical_array;
use tessera_common::{Result, Settings, TemporaryFilesCodec};

use crate::context::QueryContext;
use crate::plan::SortKey;
use crate::spill::{Run, SpillFile, corrupt};

/// Target bytes of one block of a sorted run (rows are cut to about this size).
pub(crate) const BLOCK_BYTES: usize = 1 << 20;

/// Bytes of rows an operator copies into one batch at most (an in-memory sort's input, a
/// GROUP BY's output): past it the answer is merged from sorted runs or handed out in
/// several batches. Twice [`Settings::sort_run_bytes`]: 512 MiB by default, well below the
/// 2 GiB one string column's 32-bit offsets can address.
pub(crate) fn concat_max_bytes(settings: &Settings) -> usize {
    settings.sort_run_bytes().saturating_mul(2)
}

/// Fewest rows of a run's block (wide rows make fewer per block; 16 rows of a few MiB each
/// stay far below the 2 GiB a string column can hold).
const MIN_BLOCK_ROWS: usize = 16;

/// Most rows of one output batch of the merge.
pub(crate) const OUT_ROWS: usize = 65_536;

fn row_converter(schema: &SchemaRef, order_by: &[SortKey]) -> Result<RowConverter> {
    Ok(RowConverter::new(
        order_by
            .iter()
            .map(|k| {
                let dt = schema.field(k.output).data_type().clone();
                SortField::new_with_options(dt, SortOptions { descending: k.descending, nulls_first: k.nulls_first })
            })
            .collect(),
    )?)
}

/// The keys `order_by` of `batch` in row format (floats canonical, as every Tessera sort
/// sees them).
fn row_keys(converter: &RowConverter, batch: &RecordBatch, order_by: &[SortKey]) -> Result<Rows> {
    let cols: Vec<ArrayRef> = order_by.iter().map(|k| canonical_array(batch.column(k.output))).collect();
    Ok(converter.convert_columns(&cols)?)
}

/// The positions of `batch`'s rows in `order_by` order, only the first `want` when given;
/// see [`sorted_picks`]. Same order as Arrow's `lexsort_to_indices` on canonical floats.
///
/// # Errors
/// Arrow errors converting the keys.
pub(crate) fn row_format_indices(batch: &RecordBatch, order_by: &[SortKey], want: Option<usize>) -> Result<UInt32Array> {
    let picks = sorted_picks(std::slice::from_ref(batch), order_by, want)?;
    Ok(picks.into_iter().map(|(_, r)| r as u32).collect())
}

/// The rows of `batches` (all with one schema) in `order_by` order as (batch, row), only
/// the first `want` when given, without copying the batches into one: keys compared as
/// row-format bytes (DataFusion sorts on several keys the same way), ties in input order.
/// Each entry carries its key's first 32 bytes (big-endian, so byte order is integer order):
/// most comparisons end there, on data the sort moves anyway, without a cache miss into
/// the row bytes, and keys no longer than that never reach them.
///
/// # Errors
/// Arrow errors converting the keys; more than 4G rows in one batch.
pub(crate) fn sorted_picks(batches: &[RecordBatch], order_by: &[SortKey], want: Option<usize>) -> Result<Vec<(usize, usize)>> {
    let Some(first) = batches.first() else { return Ok(Vec::new()) };
    let schema = first.schema();
    let converter = row_converter(&schema, order_by)?;
    if batches.len() > u32::MAX as usize || batches.iter().any(|b| b.num_rows() > u32::MAX as usize) {
        return Err(tessera_common::Error::internal("sort of more than 4G rows in one batch"));
    }
    let n: usize = batches.iter().map(RecordBatch::num_rows).sum();
    // Keys of at most 32 bytes (two or three fixed-width keys and the row position) are
    // compared on the entries alone, and their row bytes are dropped batch by batch; longer
    // ones keep the row bytes for ties past the prefix.
    let long = fixed_key_bytes(&schema, order_by).is_none_or(|b| b > 32);
    let mut rows: Vec<Rows> = Vec::new();
    let mut keyed: Vec<([u128; 2], u32, u32)> = Vec::with_capacity(n);
    for (bi, batch) in batches.iter().enumerate() {
        let r = row_keys(&converter, batch, order_by)?;
        for i in 0..r.num_rows() {
            let b = r.row(i);
            let b = b.as_ref();
            let mut p = [0u8; 32];
            let k = b.len().min(32);
            p[..k].copy_from_slice(&b[..k]);
            let (hi, lo) = p.split_at(16);
            let hi = u128::from_be_bytes(hi.try_into().expect("16 bytes"));
            let lo = u128::from_be_bytes(lo.try_into().expect("16 bytes"));
            keyed.push(([hi, lo], bi as u32, i as u32));
        }
        if long {
            rows.push(r);
        }
    }
    let cmp = |a: &([u128; 2], u32, u32), b: &([u128; 2], u32, u32)| {
        a.0.cmp(&b.0)
            .then_with(|| {
                if long {
                    rows[a.1 as usize].row(a.2 as usize).cmp(&rows[b.1 as usize].row(b.2 as usize))
                } else {
                    Ordering::Equal
                }
            })
            .then((a.1, a.2).cmp(&(b.1, b.2)))
    };
    match want {
        Some(w) if w < n => {
            if w > 0 {
                keyed.select_nth_unstable_by(w - 1, cmp);
            }
            keyed.truncate(w);
            keyed.sort_unstable_by(cmp);
        }
        _ => keyed.sort_unstable_by(cmp),
    }
    Ok(keyed.into_iter().map(|(_, b, r)| (b as usize, r as usize)).collect())
}

/// Bytes of a row-format key of `order_by` over `schema` when every key column is of a
/// fixed width (a validity byte and the value each), else `None`.
fn fixed_key_bytes(schema: &SchemaRef, order_by: &[SortKey]) -> Option<usize> {
    order_by.iter().map(|k| schema.field(k.output).data_type().primitive_width().map(|w| w + 1)).sum()
}

/// Memory a sort of `rows` rows of `batches`' schema needs besides the rows themselves
/// ([`sorted_picks`]: an entry per row, and the row-format keys unless they are fixed-width
/// and at most 32 bytes; those of variable width are estimated at 32 bytes a row). The
/// scan counts it with the rows it keeps, so a budget holds the sort too.
pub(crate) fn sort_bytes(schema: &SchemaRef, order_by: &[SortKey], rows: usize) -> usize {
    let entry = std::mem::size_of::<([u128; 2], u32, u32)>();
    let keys = match fixed_key_bytes(schema, order_by) {
        Some(b) if b <= 32 => 0,
        Some(b) => b + 8,
        None => 40,
    };
    rows.saturating_mul(entry + keys)
}

/// The rows `picks` of `batches`, in that order, as batches of about [`BLOCK_BYTES`]
/// handed to `each` one at a time (so a sorted copy of all rows never exists at once).
///
/// # Errors
/// Arrow errors; whatever `each` returns.
pub(crate) fn for_each_block(
    batches: &[RecordBatch],
    picks: &[(usize, usize)],
    mut each: impl FnMut(RecordBatch) -> Result<()>,
) -> Result<()> {
    let Some(first) = batches.first() else { return Ok(()) };
    let bytes: usize = batches.iter().map(RecordBatch::get_array_memory_size).sum();
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    let per_row = bytes / rows.max(1);
    let block = (BLOCK_BYTES / per_row.max(1)).clamp(MIN_BLOCK_ROWS, 65_536);
    let all: Vec<usize> = (0..first.num_columns()).collect();
    for chunk in picks.chunks(block) {
        each(take_picks(batches, chunk, &all)?)?;
    }
    Ok(())
}

/// One worker's sorted runs on disk.
#[derive(Debug, Default)]
pub(crate) struct SortSpill {
    file: Option<SpillFile>,
    /// Per run, its blocks in order.
    runs: Vec<Vec<Run>>,
    /// Times the worker spilled.
    pub(crate) spills: usize,
    /// Bytes of the files [`SortSpill::compact_for_limit`] replaced.
    earlier_bytes: u64,
}

/// Disk runs of one worker in a LIMIT query past which they are merged into one (see
/// [`SortSpill::compact_for_limit`]).
pub(crate) const MAX_LIMIT_RUNS: usize = 16;

impl SortSpill {
    /// Writes `sorted` (rows already in sort order) as one run of blocks.
    ///
    /// # Errors
    /// As [`SpillFile::append`]; [`tessera_common::Error::Io`] when `tmp_path` cannot hold a
    /// temporary file.
    pub(crate) fn write_run(&mut self, sorted: &RecordBatch, settings: &Settings, query: &QueryContext) -> Result<()> {
        self.write_run_batches(std::slice::from_ref(sorted), settings, query)
    }

    /// Writes the batches of one sorted run (in order) as one run of blocks.
    ///
    /// # Errors
    /// As [`SortSpill::write_run`].
    pub(crate) fn write_run_batches(&mut self, run: &[RecordBatch], settings: &Settings, query: &QueryContext) -> Result<()> {
        self.write_blocks(settings, query, |emit| {
            for sorted in run {
                let rows = block_rows(sorted);
                for start in (0..sorted.num_rows()).step_by(rows) {
                    emit(sorted.slice(start, rows.min(sorted.num_rows() - start)))?;
                }
            }
            Ok(())
        })
    }

    /// Writes the rows `picks` of `batches` (see [`sorted_picks`]) as one run, a block at
    /// a time: the sorted rows are never all copied at once.
    ///
    /// # Errors
    /// As [`SortSpill::write_run`].
    pub(crate) fn write_picks(
        &mut self,
        batches: &[RecordBatch],
        picks: &[(usize, usize)],
        settings: &Settings,
        query: &QueryContext,
    ) -> Result<()> {
        self.write_blocks(settings, query, |emit| for_each_block(batches, picks, emit))
    }

    /// Writes the blocks `produce` hands to its callback, in order, as one run (none if no
    /// block has a row).
    fn write_blocks(
        &mut self,
        settings: &Settings,
        query: &QueryContext,
        produce: impl FnOnce(&mut dyn FnMut(RecordBatch) -> Result<()>) -> Result<()>,
    ) -> Result<()> {
        let dir = settings.temporary_directory();
        let lz4 = settings.temporary_files_codec == TemporaryFilesCodec::Lz4;
        let mut blocks = Vec::new();
        let mut buf = Vec::new();
        let file = &mut self.file;
        produce(&mut |block: RecordBatch| {
            if block.num_rows() == 0 {
                return Ok(());
            }
            if file.is_none() {
                *file = Some(SpillFile::create(&dir, lz4)?);
            }
            buf.clear();
            let mut w = StreamWriter::try_new(&mut buf, &block.schema())?;
            w.write(&block)?;
            w.finish()?;
            drop(w);
            blocks.push(file.as_mut().expect("created above").append(&buf, query)?);
            Ok(())
        })?;
        if !blocks.is_empty() {
            self.runs.push(blocks);
            self.spills += 1;
        }
        Ok(())
    }

    /// With more than [`MAX_LIMIT_RUNS`] runs of a LIMIT query, merges them into one run of
    /// their best `want` rows (a new file; the old one is freed): a worker that spills again
    /// and again under a small share keeps at most that many runs of at most `want` rows,
    /// not most of its input.
    ///
    /// # Errors
    /// As [`merge`] and [`SortSpill::write_run`].
    pub(crate) fn compact_for_limit(
        &mut self,
        schema: &SchemaRef,
        order_by: &[SortKey],
        want: usize,
        settings: &Settings,
        query: &QueryContext,
    ) -> Result<()> {
        if self.runs.len() <= MAX_LIMIT_RUNS {
            return Ok(());
        }
        let all: Vec<usize> = (0..schema.fields().len()).collect();
        let mut compact = SortSpill::default();
        let old = std::slice::from_ref(&*self);
        compact.write_blocks(settings, query, |emit| {
            let m = Merge { schema, spills: old, memory: Vec::new(), order_by, offset: 0, limit: Some(want), keep: &all };
            merge_into(m, query, &mut |b| {
                emit(b)?;
                Ok(0)
            })
        })?;
        compact.spills = self.spills;
        compact.earlier_bytes = self.earlier_bytes + self.file.as_ref().map_or(0, SpillFile::len);
        *self = compact;
        Ok(())
    }

    /// Whether nothing was written.
    pub(crate) fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Runs written and their bytes on disk (files already compacted away included).
    pub(crate) fn runs_and_bytes(&self) -> (usize, u64) {
        (self.runs.len(), self.earlier_bytes + self.file.as_ref().map_or(0, SpillFile::len))
    }
}

/// Rows per block: about [`BLOCK_BYTES`], between 1,024 and 65,536.
fn block_rows(batch: &RecordBatch) -> usize {
    let per_row = batch.get_array_memory_size() / batch.num_rows().max(1);
    (BLOCK_BYTES / per_row.max(1)).clamp(MIN_BLOCK_ROWS, 65_536)
}

/// Where a run's rows come from.
enum Source<'a> {
    /// Sorted rows in memory (batches in order), handed out a block at a time.
    Memory { batches: std::vec::IntoIter<RecordBatch>, batch: Option<RecordBatch>, next: usize },
    /// A run on disk: its blocks in `file`.
    Disk { file: &'a SpillFile, blocks: std::vec::IntoIter<Run> },
}

impl Source<'_> {
    /// The next block and the bytes it adds to the query: a disk block's decoded message
    /// (its arrays are slices of it); nothing for a memory block, a slice of rows the scan
    /// already accounts.
    fn next_block(&mut self) -> Result<Option<(RecordBatch, usize)>> {
        match self {
            Source::Memory { batches, batch, next } => loop {
                if let Some(b) = batch.as_ref().filter(|b| *next < b.num_rows()) {
                    let n = block_rows(b).min(b.num_rows() - *next);
                    let block = b.slice(*next, n);
                    *next += n;
                    return Ok(Some((block, 0)));
                }
                match batches.next() {
                    Some(b) => (*batch, *next) = (Some(b), 0),
                    None => return Ok(None),
                }
            },
            Source::Disk { file, blocks } => {
                let Some(run) = blocks.next() else { return Ok(None) };
                let bytes = file.read(run)?;
                let len = bytes.len();
                let mut reader = StreamReader::try_new(Cursor::new(bytes), None)
                    .map_err(|e| corrupt(format!("sort run block: {e}")))?;
                match reader.next() {
                    Some(Ok(b)) if b.num_rows() == 0 => Err(corrupt("sort run block without rows".into())),
                    Some(Ok(b)) => Ok(Some((b, len))),
                    Some(Err(e)) => Err(corrupt(format!("sort run block: {e}"))),
                    None => Err(corrupt("sort run block without rows".into())),
                }
            }
        }
    }
}

/// A run's position in the merge: its current block (index into the held blocks), the
/// block's keys in row format, and the next row.
struct RunCursor<'a> {
    source: Source<'a>,
    /// Bytes the current block adds to the query (see [`Source::next_block`]).
    bytes: usize,
    held: usize,
    keys: Rows,
    row: usize,
    len: usize,
}

/// The input and shape of a merge: every worker's disk runs (`spills`) and in-memory
/// sorted runs (`memory`, each a list of batches in order), all with `schema`, ordered by
/// `order_by` (whose last key makes rows unique, or ties go by run); the answer skips
/// `offset` rows, keeps at most `limit` and has the columns `keep`.
pub(crate) struct Merge<'a> {
    pub(crate) schema: &'a SchemaRef,
    pub(crate) spills: &'a [SortSpill],
    pub(crate) memory: Vec<Vec<RecordBatch>>,
    pub(crate) order_by: &'a [SortKey],
    pub(crate) offset: usize,
    pub(crate) limit: Option<usize>,
    pub(crate) keep: &'a [usize],
}

/// Merges sorted runs into the answer (see [`Merge`]). The held blocks are accounted in
/// `query` while the merge runs; the answer's bytes stay accounted when it returns (a
/// caller that keeps the answer as working state shrinks them).
///
/// # Errors
/// Reading or decoding a run ([`tessera_common::Error::Io`], `Corrupt`), Arrow errors,
/// and [`tessera_common::Error::ResourcesExhausted`] / `Cancelled` from `query`.
pub(crate) fn merge(m: Merge<'_>, query: &QueryContext) -> Result<Vec<RecordBatch>> {
    let (schema, keep) = (m.schema, m.keep);
    let mut out: Vec<RecordBatch> = Vec::new();
    merge_into(m, query, &mut |b| {
        let bytes = b.get_array_memory_size();
        out.push(b);
        Ok(bytes)
    })?;
    if out.is_empty() {
        out.push(RecordBatch::new_empty(Arc::new(schema.project(keep)?)));
    }
    Ok(out)
}

/// [`merge`], handing each output batch to `emit` as it is made; `emit` returns the bytes
/// of it that stay in memory (accounted in `query` when the merge returns; 0 for a batch
/// written away).
///
/// # Errors
/// As [`merge`], and whatever `emit` returns.
pub(crate) fn merge_into(
    m: Merge<'_>,
    query: &QueryContext,
    emit: &mut dyn FnMut(RecordBatch) -> Result<usize>,
) -> Result<()> {
    let Merge { schema, spills, memory, order_by, offset, limit, keep } = m;
    let converter = row_converter(schema, order_by)?;
    let mut sources: Vec<Source<'_>> = Vec::new();
    for s in spills {
        if let Some(file) = &s.file {
            for run in &s.runs {
                sources.push(Source::Disk { file, blocks: run.clone().into_iter() });
            }
        }
    }
    for run in memory {
        sources.push(Source::Memory { batches: run.into_iter(), batch: None, next: 0 });
    }
    let mut held: Vec<RecordBatch> = Vec::new();
    let mut held_bytes = 0usize;
    let mut accounted = 0usize;
    // A block read back must have the runs' columns (a damaged file is an error, not a
    // panic in the key conversion).
    let keys_of = |b: &RecordBatch| {
        let same = b.num_columns() == schema.fields().len()
            && b.columns().iter().zip(schema.fields()).all(|(c, f)| c.data_type() == f.data_type());
        if !same {
            return Err(corrupt(format!("sort run block with columns {:?}", b.schema().fields())));
        }
        row_keys(&converter, b, order_by)
    };
    let mut cursors: Vec<RunCursor<'_>> = Vec::with_capacity(sources.len());
    for mut source in sources {
        if let Some((b, bytes)) = source.next_block()? {
            let keys = keys_of(&b)?;
            held_bytes += bytes + keys.size();
            cursors.push(RunCursor { source, bytes, held: held.len(), keys, row: 0, len: b.num_rows() });
            held.push(b);
        }
    }
    query.resize(&mut accounted, held_bytes, "ORDER BY external sort merge")?;

    // Min-heap of cursor indices; ties (only without a unique last key) go to the lower run.
    let less = |cs: &[RunCursor<'_>], a: usize, b: usize| -> bool {
        match cs[a].keys.row(cs[a].row).cmp(&cs[b].keys.row(cs[b].row)) {
            Ordering::Less => true,
            Ordering::Greater => false,
            Ordering::Equal => a < b,
        }
    };
    let mut heap: Vec<usize> = (0..cursors.len()).collect();
    for i in (0..heap.len() / 2).rev() {
        sift_down(&mut heap, i, &cursors, &less);
    }

    let mut skip = offset;
    let mut left = limit.unwrap_or(usize::MAX);
    let mut out_bytes = 0usize;
    let mut picks: Vec<(usize, usize)> = Vec::with_capacity(OUT_ROWS);
    while left > 0 && !heap.is_empty() {
        let c = heap[0];
        let cur = &mut cursors[c];
        if skip > 0 {
            skip -= 1;
        } else {
            picks.push((cur.held, cur.row));
            left -= 1;
        }
        cur.row += 1;
        let mut exhausted = false;
        if cur.row == cur.len {
            // The block is used up: the next one (the old one stays held while picks point
            // into it).
            match cur.source.next_block()? {
                Some((b, bytes)) => {
                    cur.keys = keys_of(&b)?;
                    cur.row = 0;
                    cur.len = b.num_rows();
                    cur.held = held.len();
                    cur.bytes = bytes;
                    held_bytes += bytes + cur.keys.size();
                    held.push(b);
                    query.resize(&mut accounted, held_bytes + out_bytes, "ORDER BY external sort merge")?;
                }
                None => exhausted = true,
            }
        }
        if exhausted {
            let last = heap.pop().expect("heap not empty");
            if !heap.is_empty() {
                heap[0] = last;
            }
        }
        if !heap.is_empty() {
            sift_down(&mut heap, 0, &cursors, &less);
        }
        // Emit the picks when a batch is full or the merge is done; drop the blocks no
        // cursor is on once they pile up (also while OFFSET rows are being skipped).
        let done = left == 0 || heap.is_empty();
        if picks.len() == OUT_ROWS || held.len() > 2 * cursors.len() + 8 || done {
            query.check_cancelled()?;
            if !picks.is_empty() {
                let batch = take_picks(&held, &picks, keep)?;
                out_bytes += emit(batch)?;
                picks.clear();
            }
            let mut kept: Vec<RecordBatch> = Vec::with_capacity(cursors.len());
            held_bytes = 0;
            for cur in &mut cursors {
                if cur.row < cur.len {
                    let b = held[cur.held].clone();
                    held_bytes += cur.bytes + cur.keys.size();
                    cur.held = kept.len();
                    kept.push(b);
                }
            }
            held = kept;
            query.resize(&mut accounted, held_bytes + out_bytes, "ORDER BY external sort merge")?;
        }
    }
    // The answer stays accounted until the query ends; the merge's blocks do not.
    drop(held);
    query.resize(&mut accounted, out_bytes, "ORDER BY external sort merge")?;
    Ok(())
}

/// OFFSET and LIMIT over `batches` in order, by slicing (no copy into one batch), keeping
/// columns `keep`; one empty batch of `schema`'s `keep` columns when no row is left.
///
/// # Errors
/// Arrow errors projecting.
pub(crate) fn offset_limit(
    batches: impl IntoIterator<Item = RecordBatch>,
    schema: &SchemaRef,
    offset: usize,
    limit: Option<usize>,
    keep: &[usize],
) -> Result<Vec<RecordBatch>> {
    let (mut skip, mut left) = (offset, limit.unwrap_or(usize::MAX));
    let mut out = Vec::new();
    for b in batches {
        if left == 0 {
            break;
        }
        if skip >= b.num_rows() {
            skip -= b.num_rows();
            continue;
        }
        let n = (b.num_rows() - skip).min(left);
        out.push(b.slice(skip, n).project(keep)?);
        (skip, left) = (0, left - n);
    }
    if out.is_empty() {
        out.push(RecordBatch::new_empty(Arc::new(schema.project(keep)?)));
    }
    Ok(out)
}

/// The rows `picks` (held block, row) of columns `keep`, in order.
fn take_picks(held: &[RecordBatch], picks: &[(usize, usize)], keep: &[usize]) -> Result<RecordBatch> {
    let schema = Arc::new(held[0].schema().project(keep)?);
    let mut cols = Vec::with_capacity(keep.len());
    for &c in keep {
        let arrays: Vec<&dyn Array> = held.iter().map(|b| b.column(c).as_ref()).collect();
        cols.push(interleave(&arrays, picks)?);
    }
    Ok(RecordBatch::try_new(schema, cols)?)
}

fn sift_down<F>(heap: &mut [usize], mut i: usize, cursors: &[RunCursor<'_>], less: &F)
where
    F: Fn(&[RunCursor<'_>], usize, usize) -> bool,
{
    loop {
        let (l, r) = (2 * i + 1, 2 * i + 2);
        let mut m = i;
        if l < heap.len() && less(cursors, heap[l], heap[m]) {
            m = l;
        }
        if r < heap.len() && less(cursors, heap[r], heap[m]) {
            m = r;
        }
        if m == i {
            return;
        }
        heap.swap(i, m);
        i = m;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float64Array, Int32Array, StringArray, UInt64Array};
    use arrow::compute::{SortColumn, lexsort_to_indices};
    use arrow::datatypes::{DataType, Field, Schema};

    /// A run block whose columns are not the merge's (a damaged temporary file) is
    /// `Error::Corrupt`, not a panic in the key conversion; a good run merges.
    #[test]
    fn a_block_of_other_columns_is_corrupt_not_a_panic() {
        use crate::context::{CancelToken, QueryContext};
        let settings = Settings::default();
        let query = QueryContext::new(0, CancelToken::new());
        let ints = Arc::new(Schema::new(vec![Field::new("i", DataType::Int32, true)]));
        let batch = RecordBatch::try_new(ints.clone(), vec![Arc::new(Int32Array::from(vec![1, 2, 3]))]).unwrap();
        let mut spill = SortSpill::default();
        spill.write_run(&batch, &settings, &query).unwrap();
        let key = [SortKey { output: 0, descending: false, nulls_first: false }];
        let m = Merge { schema: &ints, spills: std::slice::from_ref(&spill), memory: vec![vec![batch]], order_by: &key, offset: 1, limit: Some(4), keep: &[0] };
        let good = merge(m, &query).unwrap();
        let got: Vec<i32> = good.iter().flat_map(|b| b.column(0).as_any().downcast_ref::<Int32Array>().unwrap().values().to_vec()).collect();
        assert_eq!(got, vec![1, 2, 2, 3]);
        let strs = Arc::new(Schema::new(vec![Field::new("s", DataType::Utf8, true)]));
        let m = Merge { schema: &strs, spills: &[spill], memory: vec![], order_by: &key, offset: 0, limit: None, keep: &[0] };
        let e = merge(m, &query).unwrap_err();
        assert!(matches!(e, tessera_common::Error::Corrupt { .. }), "{e}");
    }

    /// The row-format sort gives Arrow's `lexsort_to_indices` order (canonical floats) for
    /// every direction and NULL placement, whole and with a limit; a unique last key leaves
    /// no ties whose order could differ.
    #[test]
    fn row_format_sort_equals_lexsort() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let n = 20_000;
        let r: Vec<u64> = (0..n).map(|_| next()).collect();
        let ints = Int32Array::from_iter(r.iter().map(|v| (v % 7 != 0).then_some((v >> 8) as i32 % 50)));
        let floats = Float64Array::from_iter(r.iter().map(|v| match (v >> 16) % 20 {
            0 => None,
            1 => Some(f64::NAN),
            2 => Some(-0.0),
            3 => Some(0.0),
            m => Some(m as f64 - 10.5),
        }));
        let strs = StringArray::from_iter(r.iter().map(|v| match (v >> 24) % 30 {
            0 => None,
            1 => Some(String::new()),
            m => Some(format!("s{}", m % 9)),
        }));
        let pos = UInt64Array::from_iter_values(0..n as u64);
        let schema = Arc::new(Schema::new(vec![
            Field::new("i", DataType::Int32, true),
            Field::new("f", DataType::Float64, true),
            Field::new("s", DataType::Utf8, true),
            Field::new("p", DataType::UInt64, false),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![Arc::new(ints), Arc::new(floats), Arc::new(strs), Arc::new(pos)],
        )
        .unwrap();
        for case in 0..32u32 {
            let keys: Vec<SortKey> = [(case % 3) as usize, ((case / 3) % 3) as usize, 3]
                .iter()
                .enumerate()
                .map(|(j, &c)| SortKey {
                    output: c,
                    descending: (case >> j) & 1 == 1,
                    nulls_first: (case >> (j + 2)) & 1 == 1,
                })
                .collect();
            for want in [None, Some(0), Some(1), Some(777), Some(n)] {
                let cols: Vec<SortColumn> = keys
                    .iter()
                    .map(|k| SortColumn {
                        values: canonical_array(batch.column(k.output)),
                        options: Some(SortOptions { descending: k.descending, nulls_first: k.nulls_first }),
                    })
                    .collect();
                let expect = lexsort_to_indices(&cols, want).unwrap();
                let got = row_format_indices(&batch, &keys, want).unwrap();
                assert_eq!(got, expect, "keys {keys:?}, want {want:?}");
            }
        }
    }
}
