//! Writing a part: [`PartWriter`] takes sorted rows granule by granule and writes the
//! column files, marks and indexes.

use super::*;
use tessera_common::FileSink;

/// Writes one part into an existing empty directory as its rows arrive, already sorted by
/// the sort key, in batches of any length ([`PartWriter::write`]). Each column is cut into
/// granules and blocks as its rows arrive and appended to its file, so the writer holds at
/// most [`ENCODE_BATCH`] morsels ([`GRANULES_PER_MORSEL`] granules each) or
/// [`ENCODE_BATCH_BYTES`] of pending rows per column besides the caller's batch (encoded in
/// parallel when they are complete), never a whole column: a column of any total size is written as long
/// as each granule fits in an arrow array (under 2 GiB of string bytes).
/// [`PartWriter::finish`] writes the index files, `meta.json` and `checksums.txt` and
/// fsyncs every file and the directory.
///
/// ```text
///  write(batch 1) write(batch 2) ...        rows in sort-key order
///     |              |
///     v              v
///  per column: pending rows -> granules -> blocks (>= 256 KiB or a morsel) -> cN.bin
///              + marks, per-granule min/max, bloom filter, first key (primary.idx)
/// ```
pub(crate) struct PartWriter {
    dir: PathBuf,
    layout: Layout,
    columns: Vec<ColumnWriter>,
    rows: usize,
}

impl PartWriter {
    /// Creates the column files of a new part in `dir`.
    ///
    /// # Errors
    /// [`Error::Io`] naming the file.
    pub(crate) fn new(dir: &Path, layout: &Layout) -> Result<PartWriter> {
        let columns =
            (0..layout.schema.fields().len()).map(|c| ColumnWriter::create(dir, c, layout)).collect::<Result<_>>()?;
        Ok(PartWriter { dir: dir.to_path_buf(), layout: layout.clone(), columns, rows: 0 })
    }

    /// Appends `rows` rows (in sort-key order after the rows written before): column `c`
    /// is `get(c)`, called once per column, columns in parallel on the rayon pool.
    ///
    /// # Errors
    /// [`Error::Internal`] if `get(c)` has another length or type than the column;
    /// [`Error::InvalidArgument`] if a granule passes arrow's 2 GiB offsets; [`Error::Io`];
    /// errors of `get`.
    pub(crate) fn write(&mut self, rows: usize, get: &(dyn Fn(usize) -> Result<ArrayRef> + Sync)) -> Result<()> {
        if rows == 0 {
            return Ok(());
        }
        let schema = &self.layout.schema;
        self.columns.par_iter_mut().try_for_each(|w| {
            let a = get(w.c)?;
            let f = schema.field(w.c);
            if a.len() != rows || a.data_type() != f.data_type() {
                return Err(Error::internal(format!(
                    "column {}: got {} rows of {}, expected {rows} of {}",
                    f.name(),
                    a.len(),
                    a.data_type(),
                    f.data_type()
                )));
            }
            w.push(a);
            w.flush(false, schema)
        })?;
        self.rows += rows;
        Ok(())
    }

    /// Writes a whole part column by column (a vertical merge): `fill(c, sink)` produces
    /// all `rows` rows of column `c` in order, in pieces of any length passed to `sink`.
    /// Columns run in parallel on the rayon pool, so about one column per thread is in
    /// flight. Call on a fresh writer, then [`PartWriter::finish`].
    ///
    /// # Errors
    /// [`Error::Internal`] if a column gets another row count or type, or rows were already
    /// written; as [`PartWriter::write`]; errors of `fill`.
    pub(crate) fn write_columns(
        &mut self,
        rows: usize,
        fill: &(dyn Fn(usize, &mut dyn FnMut(ArrayRef) -> Result<()>) -> Result<()> + Sync),
    ) -> Result<()> {
        if self.rows != 0 {
            return Err(Error::internal("write_columns on a part writer that has rows"));
        }
        let schema = &self.layout.schema;
        self.columns.par_iter_mut().try_for_each(|w| {
            let f = schema.field(w.c);
            let mut got = 0usize;
            fill(w.c, &mut |a: ArrayRef| {
                if a.data_type() != f.data_type() {
                    return Err(Error::internal(format!("column {}: got {}, expected {}", f.name(), a.data_type(), f.data_type())));
                }
                got += a.len();
                w.push(a);
                w.flush(false, schema)
            })?;
            if got != rows {
                return Err(Error::internal(format!("column {}: got {got} rows, expected {rows}", f.name())));
            }
            Ok(())
        })?;
        self.rows = rows;
        Ok(())
    }

    /// Writes the last granules, the index files, `meta.json` and `checksums.txt`, and
    /// fsyncs everything.
    ///
    /// # Errors
    /// [`Error::Io`] naming the file; [`Error::Internal`] for a part without rows.
    pub(crate) fn finish(mut self) -> Result<()> {
        if self.rows == 0 {
            return Err(Error::internal("a part needs at least one row"));
        }
        let schema = self.layout.schema.clone();
        self.columns.par_iter_mut().try_for_each(|w| w.flush(true, &schema).and_then(|()| w.close()))?;
        let (dir, layout, outs, rows) = (&self.dir, &self.layout, &self.columns, self.rows);
        let ncols = schema.fields().len();
        let gr = layout.granule_rows;
        let granules = granule_count(rows, gr);
        let mut files: Vec<(String, u64, u64)> = Vec::new();
        for (c, o) in outs.iter().enumerate() {
            files.push((format!("c{c}.bin"), o.len, o.hasher.digest()));
        }
        // marks.mrk
        let mut marks = Vec::with_capacity(16 + ncols * granules * 12 + 8);
        marks.extend_from_slice(MARKS_MAGIC);
        for v in [FORMAT_VERSION, ncols as u32, granules as u32] {
            marks.extend_from_slice(&v.to_le_bytes());
        }
        for o in outs {
            for &(off, row) in &o.marks {
                marks.extend_from_slice(&off.to_le_bytes());
                marks.extend_from_slice(&row.to_le_bytes());
            }
        }
        finish_index(&mut marks);
        // primary.idx: first row of each granule, for each sort-key column.
        let mut primary = index_header(PRIMARY_MAGIC, layout.sort_key.len(), granules);
        for &k in &layout.sort_key {
            let first = outs[k].firsts.finish(|| format!("primary index of column {}", schema.field(k).name()))?;
            block::write_block(first.as_ref(), Codec::None, false, &mut primary).map_err(Error::Internal)?;
        }
        finish_index(&mut primary);
        // minmax.idx
        let mut minmax = index_header(MINMAX_MAGIC, ncols, granules);
        for (c, o) in outs.iter().enumerate() {
            for side in [&o.mins, &o.maxs] {
                let a = side.finish(|| format!("min/max index of column {}", schema.field(c).name()))?;
                block::write_block(a.as_ref(), Codec::None, false, &mut minmax).map_err(Error::Internal)?;
            }
        }
        finish_index(&mut minmax);
        // bloom.idx: column list, then per column and granule a word count and the words.
        let mut bloom = index_header(BLOOM_MAGIC, layout.bloom.len(), granules);
        for &c in &layout.bloom {
            bloom.extend_from_slice(&(c as u32).to_le_bytes());
        }
        for &c in &layout.bloom {
            for words in &outs[c].blooms {
                bloom.extend_from_slice(&(words.len() as u32).to_le_bytes());
                for w in words {
                    bloom.extend_from_slice(&w.to_le_bytes());
                }
            }
        }
        finish_index(&mut bloom);
        let meta = PartMeta {
            format_version: FORMAT_VERSION,
            rows,
            granule_rows: gr,
            granules,
            columns: schema
                .fields()
                .iter()
                .zip(&layout.codecs)
                .map(|(f, codec)| ColumnMeta {
                    name: f.name().clone(),
                    data_type: type_name(f.data_type()).unwrap_or("?").to_string(),
                    nullable: f.is_nullable(),
                    codec: *codec,
                })
                .collect(),
            sort_key: layout.sort_key.clone(),
        };
        let meta = serde_json::to_vec_pretty(&meta).map_err(|e| Error::internal(format!("meta.json: {e}")))?;
        for (name, bytes) in [
            ("marks.mrk", &marks),
            ("primary.idx", &primary),
            ("minmax.idx", &minmax),
            ("bloom.idx", &bloom),
            ("meta.json", &meta),
        ] {
            write_synced(&dir.join(name), bytes)?;
            files.push((name.to_string(), bytes.len() as u64, xxhash_rust::xxh3::xxh3_64(bytes)));
        }
        let mut sums = format!("tessera part format {FORMAT_VERSION}\n");
        for (name, len, hash) in &files {
            sums.push_str(&format!("{name}\t{len}\t{hash:016x}\n"));
        }
        let self_hash = xxhash_rust::xxh3::xxh3_64(sums.as_bytes());
        sums.push_str(&format!("end\t{self_hash:016x}\n"));
        write_synced(&dir.join("checksums.txt"), sums.as_bytes())?;
        sync_dir(dir)
    }
}

/// Granules compacted into one array at a time by [`PerGranule`]: a one-row arrow array
/// costs some 300 bytes of headers and buffers, which for 12,000 granules (100M rows) x 105
/// columns x (min, max) would be ~750 MB; compacted, ~1.2 bytes of overhead per granule.
const COMPACT_GRANULES: usize = 256;

/// One value per granule (a min, a max, a first key) as one-row arrays, concatenated every
/// [`COMPACT_GRANULES`] granules.
#[derive(Default)]
struct PerGranule {
    done: Vec<ArrayRef>,
    pending: Vec<ArrayRef>,
}

impl PerGranule {
    fn push(&mut self, a: ArrayRef, what: impl Fn() -> String) -> Result<()> {
        self.pending.push(a);
        if self.pending.len() >= COMPACT_GRANULES {
            let a = concat_pieces(&self.pending, what)?;
            self.done.push(a);
            self.pending.clear();
        }
        Ok(())
    }

    /// All values, one per granule in order.
    fn finish(&self, what: impl Fn() -> String) -> Result<ArrayRef> {
        let all: Vec<ArrayRef> = self.done.iter().chain(&self.pending).cloned().collect();
        concat_pieces(&all, what)
    }
}

/// Morsels of one column encoded in parallel per [`ColumnWriter::flush`] round, and their
/// uncompressed bytes: a round stops at either (bounds the encoded bytes held before they
/// are appended to the file; a round always takes at least one morsel).
const ENCODE_BATCH: usize = 16;
const ENCODE_BATCH_BYTES: usize = 64 << 20;

/// How a column's granules are encoded and indexed: all that encoding a morsel needs (no
/// file, so morsels encode in parallel).
#[derive(Clone, Copy)]
struct Encode {
    codec: Codec,
    encodings: bool,
    with_bloom: bool,
    is_key: bool,
}

/// One morsel of a column, encoded: its blocks (bytes, and the rows of each granule in
/// the block) and its granules' index entries, in order.
struct Encoded {
    blocks: Vec<(Vec<u8>, Vec<usize>)>,
    mins: Vec<ArrayRef>,
    maxs: Vec<ArrayRef>,
    blooms: Vec<Vec<u64>>,
    firsts: Vec<ArrayRef>,
}

impl Encode {
    /// Groups the granules of a morsel (or of the part's last rows) into blocks: a block
    /// is closed at the first granule boundary where it holds at least
    /// [`MIN_BLOCK_BYTES`] uncompressed bytes, or at the morsel's end.
    /// `c` and `name` (column index and name) are for errors.
    fn morsel(&self, granules: &[ArrayRef], c: usize, name: &str) -> Result<Encoded> {
        let one = UInt32Array::from(vec![0u32]);
        let mut e = Encoded { blocks: Vec::new(), mins: Vec::new(), maxs: Vec::new(), blooms: Vec::new(), firsts: Vec::new() };
        let (mut block, mut bytes) = (Vec::new(), 0);
        for (i, gran) in granules.iter().enumerate() {
            bytes += block::plain_size(gran.as_ref());
            let (lo, hi) = min_max(gran.as_ref())?;
            e.mins.push(lo);
            e.maxs.push(hi);
            if self.with_bloom {
                e.blooms.push(bloom_of(gran.as_ref()));
            }
            if self.is_key {
                // A copy: a one-row slice would keep the whole granule's buffers alive.
                e.firsts.push(take(gran.as_ref(), &one, None)?);
            }
            block.push(gran.clone());
            if i + 1 == granules.len() || bytes >= MIN_BLOCK_BYTES {
                let arr = concat_pieces(&block, || format!("column {name}"))?;
                let mut out = Vec::new();
                block::write_block(arr.as_ref(), self.codec, self.encodings, &mut out)
                    .map_err(|e| Error::InvalidArgument(format!("column {c} ({name}): {e}")))?;
                e.blocks.push((out, block.iter().map(|g| g.len()).collect()));
                block.clear();
                bytes = 0;
            }
        }
        Ok(e)
    }
}

/// One column file of a [`PartWriter`]: rows not yet cut into blocks, and what the index
/// files need of the granules written.
struct ColumnWriter {
    c: usize,
    path: PathBuf,
    /// Writes of whole pages (faster into the page cache than a `BufWriter`'s).
    file: FileSink<File>,
    /// xxh3 of the bytes written so far (streaming; equals `xxh3_64` of the whole file).
    hasher: xxhash_rust::xxh3::Xxh3Default,
    /// Bytes written so far.
    len: u64,
    /// Bytes whose writeback to disk was started ([`start_writeback`]).
    writeback_from: u64,
    enc: Encode,
    granule_rows: usize,
    /// Rows received but not written, in order; `pending_rows` in all.
    pending: VecDeque<ArrayRef>,
    pending_rows: usize,
    /// Uncompressed bytes of `pending` (as [`block::plain_size`] counts them).
    pending_bytes: usize,
    /// Per granule written: (byte offset of its block, first row inside the block).
    marks: Vec<(u64, u32)>,
    /// Per granule: min and max (copies, not slices of the data).
    mins: PerGranule,
    maxs: PerGranule,
    blooms: Vec<Vec<u64>>,
    /// Sort-key columns: a copy of each granule's first row.
    firsts: PerGranule,
}

impl ColumnWriter {
    fn create(dir: &Path, c: usize, layout: &Layout) -> Result<ColumnWriter> {
        let path = dir.join(format!("c{c}.bin"));
        let file = File::create(&path).map_err(io(&path))?;
        Ok(ColumnWriter {
            c,
            path,
            file: FileSink::with_capacity(1 << 20, file),
            hasher: xxhash_rust::xxh3::Xxh3Default::new(),
            len: 0,
            writeback_from: 0,
            enc: Encode {
                codec: layout.codecs[c],
                encodings: layout.encodings,
                with_bloom: layout.bloom.contains(&c),
                is_key: layout.sort_key.contains(&c),
            },
            granule_rows: layout.granule_rows,
            pending: VecDeque::new(),
            pending_rows: 0,
            pending_bytes: 0,
            marks: Vec::new(),
            mins: PerGranule::default(),
            maxs: PerGranule::default(),
            blooms: Vec::new(),
            firsts: PerGranule::default(),
        })
    }

    fn push(&mut self, a: ArrayRef) {
        if !a.is_empty() {
            self.pending_rows += a.len();
            self.pending_bytes += block::plain_size(a.as_ref());
            self.pending.push_back(a);
        }
    }

    /// Writes every full morsel of pending rows (`last`: and the rest). The morsels are
    /// encoded and compressed in parallel on the rayon pool, [`ENCODE_BATCH`] at a time,
    /// then appended to the file in order, so one column (a single-column table, or the
    /// widest column of a load) does not serialize the write on one core.
    fn flush(&mut self, last: bool, schema: &Schema) -> Result<()> {
        let morsel = self.granule_rows.saturating_mul(GRANULES_PER_MORSEL);
        if !last && self.pending_rows < ENCODE_BATCH * morsel && self.pending_bytes < ENCODE_BATCH_BYTES {
            // Not a round's worth yet: rows arrive a morsel at a time, and a round of one
            // morsel would encode on one core.
            return Ok(());
        }
        loop {
            let (mut batch, mut batch_bytes) = (Vec::new(), 0usize);
            while batch.len() < ENCODE_BATCH
                && batch_bytes < ENCODE_BATCH_BYTES
                && (self.pending_rows >= morsel || (last && self.pending_rows > 0))
            {
                // A morsel as its granules, each one array (only a granule must stay under
                // arrow's 2 GiB of string bytes, not a morsel).
                let n = morsel.min(self.pending_rows);
                let mut granules = Vec::with_capacity(GRANULES_PER_MORSEL);
                let mut done = 0;
                while done < n {
                    let len = self.granule_rows.min(n - done);
                    let g = self.take(len, schema)?;
                    let b = block::plain_size(g.as_ref());
                    batch_bytes += b;
                    self.pending_bytes = self.pending_bytes.saturating_sub(b);
                    granules.push(g);
                    done += len;
                }
                batch.push(granules);
            }
            if batch.is_empty() {
                return Ok(());
            }
            let (enc, c, name) = (self.enc, self.c, schema.field(self.c).name());
            let encoded: Vec<Encoded> = if batch.len() == 1 {
                vec![enc.morsel(&batch[0], c, name)?]
            } else {
                batch.par_iter().map(|a| enc.morsel(a, c, name)).collect::<Result<_>>()?
            };
            drop(batch);
            for e in encoded {
                self.append(e, name)?;
            }
        }
    }

    /// The next `n` pending rows as one array.
    fn take(&mut self, n: usize, schema: &Schema) -> Result<ArrayRef> {
        let mut pieces = Vec::new();
        let mut need = n;
        while need > 0 {
            let a = self.pending.pop_front().ok_or_else(|| Error::internal("column writer: fewer pending rows than counted"))?;
            if a.len() <= need {
                need -= a.len();
                pieces.push(a);
            } else {
                pieces.push(a.slice(0, need));
                self.pending.push_front(a.slice(need, a.len() - need));
                need = 0;
            }
        }
        self.pending_rows -= n;
        concat_pieces(&pieces, || format!("column {}", schema.field(self.c).name()))
    }

    /// Appends an encoded morsel: its blocks to the file, its granules to the marks and
    /// index entries.
    fn append(&mut self, e: Encoded, name: &str) -> Result<()> {
        let what = || format!("min/max index of column {name}");
        for (bytes, granules) in e.blocks {
            let mut row = 0u32;
            for g in granules {
                self.marks.push((self.len, row));
                row += g as u32;
            }
            self.file.write_all(&bytes).map_err(io(&self.path))?;
            self.hasher.update(&bytes);
            self.len += bytes.len() as u64;
        }
        for (lo, hi) in e.mins.into_iter().zip(e.maxs) {
            self.mins.push(lo, what)?;
            self.maxs.push(hi, what)?;
        }
        self.blooms.extend(e.blooms);
        for f in e.firsts {
            self.firsts.push(f, what)?;
        }
        // The bytes the sink has written (it gathers up to 1 MiB and writes whole pages).
        let written = self.file.written();
        if written - self.writeback_from >= WRITEBACK_BYTES {
            start_writeback(self.file.get_ref(), self.writeback_from, written - self.writeback_from);
            self.writeback_from = written;
        }
        Ok(())
    }

    /// Flushes and fsyncs the file.
    fn close(&mut self) -> Result<()> {
        self.file.flush().map_err(io(&self.path))?;
        self.file.get_ref().sync_all().map_err(io(&self.path))
    }
}

/// Bytes of a column file after which its writeback to disk is started while the part is
/// still being written ([`start_writeback`]).
const WRITEBACK_BYTES: u64 = 2 << 20;

/// Starts writing bytes `from .. from + len` of `file` to disk without waiting (Linux
/// `sync_file_range(SYNC_FILE_RANGE_WRITE)`, as RocksDB's `bytes_per_sync`), so the fsync
/// that makes the part durable ([`ColumnWriter::close`]) finds little left to write: an
/// insert of 80 MB of strings spent 124 ms in that fsync otherwise. A hint: failures are
/// ignored (the fsync reports them). Elsewhere a no-op.
fn start_writeback(file: &File, from: u64, len: u64) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: the descriptor is open (borrowed from `file` for the call); the call reads
        // no memory of this process, only starts writeback of the file's dirty pages.
        unsafe {
            libc::sync_file_range(file.as_raw_fd(), from as libc::off64_t, len as libc::off64_t, libc::SYNC_FILE_RANGE_WRITE);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, from, len);
}

fn index_header(magic: &[u8; 4], n: usize, granules: usize) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(magic);
    for x in [FORMAT_VERSION, n as u32, granules as u32] {
        v.extend_from_slice(&x.to_le_bytes());
    }
    v
}

fn finish_index(v: &mut Vec<u8>) {
    let h = xxhash_rust::xxh3::xxh3_64(v);
    v.extend_from_slice(&h.to_le_bytes());
}

/// The least and the greatest non-NULL value, in byte order, of a string or binary array
/// given as its offsets, bytes and nulls, in one pass: a value is compared with each bound
/// by its first 8 bytes (one unaligned big-endian load, masked to its length) first, its
/// bytes only when those tie, so most values cost two integer compares instead of two
/// `memcmp` calls (as arrow's `min_string` and `max_string`, one pass each, did: 17% of an
/// insert of 10M short strings). `None` without values.
fn bytes_min_max<'a>(offsets: &[i32], data: &'a [u8], nulls: Option<&arrow::buffer::NullBuffer>) -> Option<(&'a [u8], &'a [u8])> {
    // The first 8 bytes of `data[start..end]`, zero-padded, as a big-endian integer: ordered
    // as the bytes are, except that a value ties with its zero-padded extensions (its bytes
    // decide then).
    let prefix = |start: usize, end: usize| -> u64 {
        let len = end - start;
        match data.get(start..start + 8) {
            Some(w) => {
                let p = u64::from_be_bytes(w.try_into().expect("8 bytes"));
                if len >= 8 { p } else { p & !(u64::MAX.checked_shr(8 * len as u32).unwrap_or(0)) }
            }
            None => data[start..end].iter().enumerate().fold(0, |p, (i, &c)| p | u64::from(c) << (56 - 8 * i)),
        }
    };
    let mut best: Option<((u64, &'a [u8]), (u64, &'a [u8]))> = None;
    for (i, w) in offsets.windows(2).enumerate() {
        if nulls.is_some_and(|n| n.is_null(i)) {
            continue;
        }
        let (start, end) = (w[0] as usize, w[1] as usize);
        let p = prefix(start, end);
        let v = &data[start..end];
        match &mut best {
            None => best = Some(((p, v), (p, v))),
            Some(((lo_p, lo), (hi_p, hi))) => {
                if p < *lo_p || (p == *lo_p && v < *lo) {
                    (*lo_p, *lo) = (p, v);
                }
                if p > *hi_p || (p == *hi_p && v > *hi) {
                    (*hi_p, *hi) = (p, v);
                }
            }
        }
    }
    best.map(|((_, lo), (_, hi))| (lo, hi))
}

/// Minimum and maximum of the non-NULL values of `arr`, as one-row arrays (NULL when all
/// values are NULL). Floats: `arrow`'s total order (NaN is largest).
fn min_max(arr: &dyn Array) -> Result<(ArrayRef, ArrayRef)> {
    use arrow::compute::kernels::aggregate as agg;
    fn prim<A: ArrowPrimitiveType>(arr: &dyn Array) -> (ArrayRef, ArrayRef) {
        let a = arr.as_primitive::<A>();
        let lo = PrimitiveArray::<A>::from_iter([agg::min(a)]).with_data_type(a.data_type().clone());
        let hi = PrimitiveArray::<A>::from_iter([agg::max(a)]).with_data_type(a.data_type().clone());
        (Arc::new(lo), Arc::new(hi))
    }
    use arrow::datatypes::{Float32Type, Float64Type};
    Ok(tessera_common::int_like_dispatch!(arr.data_type(), A => prim::<A>(arr), _ => match arr.data_type() {
        DataType::Float32 => prim::<Float32Type>(arr),
        DataType::Float64 => prim::<Float64Type>(arr),
        DataType::Utf8 => {
            let a = arr.as_string::<i32>();
            let (lo, hi) = bytes_min_max(a.value_offsets(), a.value_data(), a.nulls()).unzip();
            // Both are values of `a`, so valid UTF-8.
            fn text(b: Option<&[u8]>) -> Option<&str> {
                b.map(|b| std::str::from_utf8(b).expect("a value of a string array"))
            }
            (Arc::new(StringArray::from(vec![text(lo)])) as ArrayRef, Arc::new(StringArray::from(vec![text(hi)])) as ArrayRef)
        }
        DataType::Binary => {
            let a = arr.as_binary::<i32>();
            let (lo, hi) = bytes_min_max(a.value_offsets(), a.value_data(), a.nulls()).unzip();
            (Arc::new(BinaryArray::from(vec![lo])) as ArrayRef, Arc::new(BinaryArray::from(vec![hi])) as ArrayRef)
        }
        other => return Err(Error::not_implemented(format!("storing type {other}"))),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::compute::kernels::aggregate as agg;

    /// The one-pass min/max equals arrow's min_string/max_string on strings that tie on
    /// their first 8 bytes, differ only after a zero byte, are empty or NULL, or are random.
    #[test]
    fn string_min_max_equals_arrows() {
        let mut cases: Vec<Vec<Option<String>>> = vec![
            vec![],
            vec![None, None],
            vec![Some(String::new()), None, Some("a".into())],
            vec![Some("abcdefgh".into()), Some("abcdefgh\0".into()), Some("abcdefg".into()), Some("abcdefgha".into())],
            vec![Some("ab".into()), Some("ab\0".into()), Some("ab\0\0".into()), Some("a".into()), Some("b".into())],
            vec![Some("\u{ff}".into()), Some("\u{100}".into()), Some("zzzzzzzzzzzz".into()), Some("é".into())],
        ];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..200 {
            let n = (x % 50) as usize;
            cases.push(
                (0..n)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        // Short strings over a small alphabet: many prefix ties.
                        (x % 11 != 0).then(|| (0..(x >> 8) % 12).map(|i| ['a', 'b', '\0', 'é'][((x >> (16 + 2 * i)) % 4) as usize]).collect())
                    })
                    .collect(),
            );
        }
        for c in cases {
            let a = StringArray::from(c.clone());
            let (lo, hi) = min_max(&a).unwrap();
            assert_eq!(lo.as_string::<i32>().iter().next().flatten(), agg::min_string(&a), "{c:?}");
            assert_eq!(hi.as_string::<i32>().iter().next().flatten(), agg::max_string(&a), "{c:?}");
            let b = BinaryArray::from(c.iter().map(|v| v.as_deref().map(str::as_bytes)).collect::<Vec<_>>());
            let (lo, hi) = min_max(&b).unwrap();
            assert_eq!(lo.as_binary::<i32>().iter().next().flatten(), agg::min_binary(&b), "{c:?}");
            assert_eq!(hi.as_binary::<i32>().iter().next().flatten(), agg::max_binary(&b), "{c:?}");
        }
    }
}
