//! Writing parts from sorted or mergeable input without ever holding a whole column:
//! [`write_sorted`] sorts one insert block (chunked columns) by the sort key and writes it
//! as a part; [`merge_parts`] merges sorted parts into one with a k-way streaming merge
//! (ClickHouse's `MergingSortedTransform`, in its vertical form). Both hand the [`PartWriter`] batches of one
//! morsel of rows built with arrow's `interleave`, so no array grows past a morsel of
//! rows however large a column is in all.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef};
use arrow::compute::interleave;
use arrow::row::{RowConverter, Rows, SortField};
use rayon::prelude::*;
use tessera_common::{Error, Result};

use crate::part::{Layout, Part, PartWriter, batch_rows, concat_pieces};

/// Writes the rows of `columns` (`columns[c]` = column `c` in chunks; every column has the
/// same chunk lengths) sorted by `layout`'s sort key into the empty directory `dir` as one
/// part, calling `progress(rows)` after each batch written. The sort is stable: rows with
/// equal keys keep their input order. Memory: the input, the sort keys in arrow's row
/// format (about 1 byte + the value width per key column per row), 4 bytes per row of
/// permutation, and one morsel of output rows per column.
///
/// # Errors
/// [`Error::InvalidArgument`] for more than 2^32-1 rows, chunk lengths that differ between
/// columns, or a granule over 2 GiB of strings; [`Error::Io`].
pub(crate) fn write_sorted(
    dir: &std::path::Path,
    layout: &Layout,
    columns: &[Vec<ArrayRef>],
    progress: &(dyn Fn(usize) + Sync),
) -> Result<()> {
    let lens: Vec<usize> = columns.first().map(|c| c.iter().map(|a| a.len()).collect()).unwrap_or_default();
    if let Some(c) = columns.iter().position(|c| c.len() != lens.len() || c.iter().zip(&lens).any(|(a, &l)| a.len() != l)) {
        return Err(Error::InvalidArgument(format!(
            "column {} is chunked differently from column {}",
            layout.schema.field(c).name(),
            layout.schema.field(0).name()
        )));
    }
    let rows: usize = lens.iter().sum();
    if rows > u32::MAX as usize {
        return Err(Error::InvalidArgument(format!("{rows} rows in one part; at most 2^32-1")));
    }
    if layout.sort_key.is_empty() {
        // No sort key: the rows go in as they are, slices of the chunks (no copy).
        let mut chunks = (0..lens.len()).map(|k| Ok(columns.iter().map(|c| c[k].clone()).collect()));
        return match write_unsorted(dir, layout, &mut chunks, progress)? {
            0 => Err(Error::internal("a part needs at least one row")),
            _ => Ok(()),
        };
    }
    let mut w = PartWriter::new(dir, layout)?;
    let batch = batch_rows(layout).max(1);
    // The rows in sort-key order, as (chunk, row in chunk) through the chunks' starts.
    let fields = layout.sort_key.iter().map(|&k| SortField::new(layout.schema.field(k).data_type().clone())).collect();
    let conv = RowConverter::new(fields)?;
    let mut keys = conv.empty_rows(rows, 0);
    for (k, _) in lens.iter().enumerate().filter(|(_, l)| **l > 0) {
        let chunk: Vec<ArrayRef> = layout.sort_key.iter().map(|&c| columns[c][k].clone()).collect();
        conv.append(&mut keys, &chunk)?;
    }
    let mut perm: Vec<u32> = (0..rows as u32).collect();
    // Stable: equal keys keep input order.
    perm.par_sort_by(|&a, &b| keys.row(a as usize).cmp(&keys.row(b as usize)));
    let starts: Vec<usize> = lens.iter().scan(0, |s, &l| { let v = *s; *s += l; Some(v) }).collect();
    let locate = |r: usize| {
        let k = starts.partition_point(|&s| s <= r) - 1;
        (k, r - starts[k])
    };
    for b0 in (0..rows).step_by(batch) {
        let b1 = (b0 + batch).min(rows);
        let idx: Vec<(usize, usize)> = perm[b0..b1].iter().map(|&r| locate(r as usize)).collect();
        w.write(b1 - b0, &|c| {
            let chunks: Vec<&dyn Array> = columns[c].iter().map(|a| a.as_ref()).collect();
            interleave(&chunks, &idx).map_err(|e| {
                Error::InvalidArgument(format!("column {}: {e} (a granule must hold under 2 GiB of strings)", layout.schema.field(c).name()))
            })
        })?;
        progress(b1 - b0);
    }
    w.finish()
}

/// Writes the rows of `chunks` (each one chunk of every column, in table column order) into
/// the empty directory `dir` as one part in the order they come, as the iterator produces
/// them, calling `progress(rows)` after each batch written: a table without sort key takes
/// an insert this way, so the input is parsed while earlier rows are encoded and never held
/// whole. Returns the rows written; none write no part (and leave `dir` empty).
///
/// # Errors
/// As [`write_sorted`], and the iterator's errors.
pub(crate) fn write_unsorted(
    dir: &std::path::Path,
    layout: &Layout,
    chunks: &mut dyn Iterator<Item = Result<Vec<ArrayRef>>>,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<u64> {
    if !layout.sort_key.is_empty() {
        return Err(Error::internal("write_unsorted for a table with a sort key"));
    }
    let batch = batch_rows(layout).max(1);
    let mut w: Option<PartWriter> = None;
    let mut rows = 0u64;
    for cols in chunks {
        let cols = cols?;
        let len = cols.first().map_or(0, |a| a.len());
        if len == 0 {
            continue;
        }
        if rows + len as u64 > u32::MAX as u64 {
            return Err(Error::InvalidArgument(format!("{} rows in one part; at most 2^32-1", rows + len as u64)));
        }
        let w = match &mut w {
            Some(w) => w,
            None => w.insert(PartWriter::new(dir, layout)?),
        };
        for off in (0..len).step_by(batch) {
            let n = batch.min(len - off);
            w.write(n, &|c| Ok(cols[c].slice(off, n)))?;
            progress(n);
        }
        rows += len as u64;
    }
    if let Some(w) = w {
        w.finish()?;
    }
    Ok(rows)
}

/// Where one input part of a merge stands: its next row, and the sort keys of the granules
/// around it in arrow's row format.
struct Cursor {
    /// Next row of the part to output.
    pos: usize,
    /// Sort keys of part rows `kstart..kstart + keys.num_rows()` (`None` before the first
    /// read).
    keys: Option<Rows>,
    kstart: usize,
}

impl Cursor {
    fn key_end(&self) -> usize {
        self.kstart + self.keys.as_ref().map_or(0, |k| k.num_rows())
    }
}

/// Decoded rows `start..start + arr.len()` of one column of one input part.
#[derive(Default)]
struct Window {
    start: usize,
    arr: Option<ArrayRef>,
}

impl Window {
    fn end(&self) -> usize {
        self.start + self.arr.as_ref().map_or(0, |a| a.len())
    }

    /// Part rows `lo..hi` of column `c` of `p`, reading blocks as needed. `lo` must not be
    /// before this window's start (merges read each part front to back); rows before `lo`
    /// are dropped, so a window holds the rows of at most this batch plus one block.
    fn rows(&mut self, p: &Part, c: usize, lo: usize, hi: usize) -> Result<ArrayRef> {
        if lo < self.start {
            return Err(Error::internal("merge read a part backwards"));
        }
        if hi > self.end() {
            let gr = p.granule_rows;
            let g0 = self.end() / gr;
            let g1 = p.block_end(c, hi.div_ceil(gr) - 1);
            let new = p.read_granules(c, g0, g1)?;
            // Decoded: the file pages of these blocks are not needed again.
            p.release(c, g0, g1);
            // `end()` is a granule boundary (windows end where a read ended) and `lo <= end()`
            // (each batch continues where the last one stopped).
            let tail = self.arr.as_ref().filter(|_| lo < self.end()).map(|a| a.slice(lo - self.start, self.end() - lo));
            (self.start, self.arr) = match tail {
                Some(t) => (lo, Some(concat_pieces(&[t, new], || format!("merge of column {c}"))?)),
                None => (g0 * gr, Some(new)),
            };
        }
        let a = self.arr.as_ref().ok_or_else(|| Error::internal("merge window empty"))?;
        Ok(a.slice(lo - self.start, hi - lo))
    }
}

/// Merges `parts` (each sorted by `layout`'s sort key) into one part written into the empty
/// directory `dir`: a k-way merge of the parts' rows by key, ties going to the earlier part
/// (the order of `parts`) and then to the earlier row, so the merge is stable.
///
/// Vertical, like ClickHouse's vertical merge algorithm: first the sort-key columns alone
/// are merged into the "row sources" (for each output row, the input part it comes from: 2
/// bytes per row), then every column is written on its own by following them, columns in
/// parallel on the rayon pool. Each input part is read front to back a block at a time,
/// and the pages of decoded blocks are released, so memory is bounded by about (threads x
/// parts x one block) plus one morsel of output per thread and the row sources, whatever
/// the table's size.
///
/// # Errors
/// [`Error::Corrupt`] from reading a damaged part; [`Error::Io`]; [`Error::InvalidArgument`]
/// for more than 2^32-1 rows or 65,536 parts.
pub(crate) fn merge_parts(dir: &std::path::Path, layout: &Layout, parts: &[Arc<Part>]) -> Result<()> {
    let total: usize = parts.iter().map(|p| p.rows).sum();
    if total > u32::MAX as usize || parts.len() > 1 << 16 {
        return Err(Error::InvalidArgument(format!(
            "merge of {} parts, {total} rows: at most 65,536 parts and 2^32-1 rows",
            parts.len()
        )));
    }
    let sources = row_sources(layout, parts)?;
    let k = parts.len();
    let batch = batch_rows(layout).max(1);
    let mut w = PartWriter::new(dir, layout)?;
    w.write_columns(total, &|c, sink| {
        let mut windows: Vec<Window> = (0..k).map(|_| Window::default()).collect();
        let mut pos = vec![0usize; k];
        let (mut count, mut slot, mut seen) = (vec![0usize; k], vec![0usize; k], vec![0usize; k]);
        for chunk in sources.chunks(batch) {
            count.iter_mut().for_each(|n| *n = 0);
            for &i in chunk {
                count[i as usize] += 1;
            }
            // Rows taken from each part: a contiguous range, in part order.
            let used: Vec<usize> = (0..k).filter(|&i| count[i] > 0).collect();
            let mut arrays = Vec::with_capacity(used.len());
            for (s, &i) in used.iter().enumerate() {
                slot[i] = s;
                seen[i] = 0;
                arrays.push(windows[i].rows(&parts[i], c, pos[i], pos[i] + count[i])?);
                pos[i] += count[i];
            }
            if let [one] = arrays.as_slice() {
                sink(one.clone())?;
                continue;
            }
            let idx: Vec<(usize, usize)> = chunk
                .iter()
                .map(|&i| {
                    let i = i as usize;
                    seen[i] += 1;
                    (slot[i], seen[i] - 1)
                })
                .collect();
            let refs: Vec<&dyn Array> = arrays.iter().map(|a| a.as_ref()).collect();
            sink(interleave(&refs, &idx).map_err(|e| {
                Error::InvalidArgument(format!("merge of column {}: {e}", layout.schema.field(c).name()))
            })?)?;
        }
        Ok(())
    })?;
    w.finish()
}

/// The input part of each output row of a merge of `parts` (ClickHouse's "rows sources"):
/// a k-way merge over the sort-key columns only, with a binary heap of part cursors.
fn row_sources(layout: &Layout, parts: &[Arc<Part>]) -> Result<Vec<u16>> {
    let total: usize = parts.iter().map(|p| p.rows).sum();
    if layout.sort_key.is_empty() {
        return Ok(parts.iter().enumerate().flat_map(|(i, p)| std::iter::repeat_n(i as u16, p.rows)).collect());
    }
    let conv = RowConverter::new(
        layout.sort_key.iter().map(|&k| SortField::new(layout.schema.field(k).data_type().clone())).collect(),
    )?;
    // Sort keys of the next run of granules (up to one morsel's worth) of part `i`.
    let refill = |i: usize, cur: &mut Cursor| -> Result<()> {
        let p = &parts[i];
        let g0 = cur.pos / p.granule_rows;
        let g1 = (g0 + crate::part::GRANULES_PER_MORSEL).min(p.granules);
        let cols = layout.sort_key.iter().map(|&k| p.read_granules(k, g0, g1)).collect::<Result<Vec<_>>>()?;
        for &k in &layout.sort_key {
            p.release(k, g0, g1);
        }
        cur.keys = Some(conv.convert_columns(&cols)?);
        cur.kstart = g0 * p.granule_rows;
        Ok(())
    };
    let mut cursors: Vec<Cursor> = Vec::with_capacity(parts.len());
    for i in 0..parts.len() {
        let mut cur = Cursor { pos: 0, keys: None, kstart: 0 };
        if parts[i].rows > 0 {
            refill(i, &mut cur)?;
        }
        cursors.push(cur);
    }
    let mut heap: Vec<usize> = (0..parts.len()).filter(|&i| parts[i].rows > 0).collect();
    for h in (0..heap.len() / 2).rev() {
        sift_down(&mut heap, h, &cursors);
    }
    let mut sources = Vec::with_capacity(total);
    while let Some(&i) = heap.first() {
        sources.push(i as u16);
        let cur = &mut cursors[i];
        cur.pos += 1;
        if cur.pos == parts[i].rows {
            heap.swap_remove(0);
        } else if cur.pos == cur.key_end() {
            refill(i, cur)?;
        }
        sift_down(&mut heap, 0, &cursors);
    }
    Ok(sources)
}

/// Whether part `a`'s next row sorts before part `b`'s (ties: the earlier part first).
fn before(cursors: &[Cursor], a: usize, b: usize) -> bool {
    let (ca, cb) = (&cursors[a], &cursors[b]);
    match (&ca.keys, &cb.keys) {
        (Some(ka), Some(kb)) => {
            ka.row(ca.pos - ca.kstart).cmp(&kb.row(cb.pos - cb.kstart)).then(a.cmp(&b)) == std::cmp::Ordering::Less
        }
        _ => a < b,
    }
}

/// Restores the min-heap property of `heap` (part indices ordered by [`before`]) below
/// position `h`.
fn sift_down(heap: &mut [usize], mut h: usize, cursors: &[Cursor]) {
    loop {
        let (l, r) = (2 * h + 1, 2 * h + 2);
        let mut m = h;
        if l < heap.len() && before(cursors, heap[l], heap[m]) {
            m = l;
        }
        if r < heap.len() && before(cursors, heap[r], heap[m]) {
            m = r;
        }
        if m == h {
            return;
        }
        heap.swap(h, m);
        h = m;
    }
}
