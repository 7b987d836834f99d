//! One part: immutable sorted rows of a table in a directory of files (crate docs give the
//! layout). [`write_part`] writes one into a fresh directory and fsyncs it; [`Part::open`]
//! verifies and maps one.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BinaryArray, PrimitiveArray, StringArray, UInt32Array};
use arrow::compute::{concat, take};
use arrow::datatypes::{ArrowPrimitiveType, DataType, Field, Schema, SchemaRef};
use memmap2::{Advice, Mmap};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use tessera_common::{Error, Result};

use crate::block::{self, Codec, IntNative, int_dispatch};

/// Version of the part format this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// Granules per morsel: morsels (and therefore blocks) never cross a multiple of this
/// granule index, so a morsel never decompresses a block another morsel also needs.
/// 8 granules of 8,192 rows = 65,536 rows, the in-memory readers' chunk size.
pub(crate) const GRANULES_PER_MORSEL: usize = 8;

/// A block is closed at the first granule boundary where it holds at least this many
/// uncompressed bytes (or at a morsel boundary). 256 KiB sits inside ClickHouse's
/// 64 KiB-1 MiB block range: large enough for LZ4/ZSTD to find matches, small enough to
/// decompress into L2 cache. With the morsel cap, fixed-width blocks are 64 KiB (Int8,
/// 8 granules) to 256 KiB; a single granule of long strings may exceed 1 MiB.
pub(crate) const MIN_BLOCK_BYTES: usize = 256 * 1024;

const MARKS_MAGIC: &[u8; 4] = b"TSMK";
const PRIMARY_MAGIC: &[u8; 4] = b"TSPK";
const MINMAX_MAGIC: &[u8; 4] = b"TSMM";
const BLOOM_MAGIC: &[u8; 4] = b"TSBF";

/// Bloom filter bits per distinct value of a granule (~1% false positives with 3 probes).
const BLOOM_BITS_PER_VALUE: usize = 10;
/// Probes per value.
const BLOOM_PROBES: u64 = 3;

/// Hash of an integer-like value for the bloom filters (its value as i128, little-endian).
pub(crate) fn bloom_hash_int(v: i128) -> u64 {
    xxhash_rust::xxh3::xxh3_64(&v.to_le_bytes())
}

/// Hash of a string or binary value for the bloom filters.
pub(crate) fn bloom_hash_bytes(v: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(v)
}

/// Whether the bloom filter `words` (a power-of-two count of u64) may contain `hash`.
pub(crate) fn bloom_may_contain(words: &[u64], hash: u64) -> bool {
    if words.is_empty() {
        return false;
    }
    let mask = (words.len() as u64 * 64) - 1;
    let (h1, h2) = (hash, (hash >> 32) | 1);
    (0..BLOOM_PROBES).all(|i| {
        let bit = h1.wrapping_add(i.wrapping_mul(h2)) & mask;
        words[(bit / 64) as usize] & (1 << (bit % 64)) != 0
    })
}

/// A bloom filter over the non-NULL values of `arr`, sized by their distinct count.
fn bloom_of(arr: &dyn Array) -> Vec<u64> {
    fn ints<A: ArrowPrimitiveType>(arr: &dyn Array) -> Vec<u64>
    where
        A::Native: IntNative,
    {
        let a = arr.as_primitive::<A>();
        (0..a.len()).filter(|&i| a.is_valid(i)).map(|i| bloom_hash_int(a.value(i).to_i128())).collect()
    }
    let mut hashes: Vec<u64> = int_dispatch!(arr.data_type(), A => ints::<A>(arr), _ => match arr.data_type() {
        DataType::Utf8 => arr.as_string::<i32>().iter().flatten().map(|v| bloom_hash_bytes(v.as_bytes())).collect(),
        DataType::Binary => arr.as_binary::<i32>().iter().flatten().map(bloom_hash_bytes).collect(),
        _ => Vec::new(),
    });
    hashes.sort_unstable();
    hashes.dedup();
    let bits = (hashes.len() * BLOOM_BITS_PER_VALUE).max(64).next_power_of_two();
    let mut words = vec![0u64; bits / 64];
    let mask = bits as u64 - 1;
    for h in hashes {
        let (h1, h2) = (h, (h >> 32) | 1);
        for i in 0..BLOOM_PROBES {
            let bit = h1.wrapping_add(i.wrapping_mul(h2)) & mask;
            words[(bit / 64) as usize] |= 1 << (bit % 64);
        }
    }
    words
}

/// Per-column settings of a part.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct ColumnMeta {
    pub(crate) name: String,
    #[serde(rename = "type")]
    pub(crate) data_type: String,
    pub(crate) nullable: bool,
    pub(crate) codec: Codec,
}

/// `meta.json` of a part.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct PartMeta {
    pub(crate) format_version: u32,
    pub(crate) rows: usize,
    pub(crate) granule_rows: usize,
    pub(crate) granules: usize,
    pub(crate) columns: Vec<ColumnMeta>,
    /// Column indices of the sort key, major first.
    pub(crate) sort_key: Vec<usize>,
}

/// How to write a part: schema, sort key, codecs, granule size.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub(crate) schema: SchemaRef,
    pub(crate) sort_key: Vec<usize>,
    pub(crate) codecs: Vec<Codec>,
    pub(crate) granule_rows: usize,
    pub(crate) encodings: bool,
    /// Columns with a per-granule bloom filter (for `column = constant`).
    pub(crate) bloom: Vec<usize>,
}

/// Arrow type name as stored in `meta.json`.
pub(crate) fn type_name(dt: &DataType) -> Option<&'static str> {
    use DataType::*;
    Some(match dt {
        Int8 => "Int8",
        Int16 => "Int16",
        Int32 => "Int32",
        Int64 => "Int64",
        UInt8 => "UInt8",
        UInt16 => "UInt16",
        UInt32 => "UInt32",
        UInt64 => "UInt64",
        Float32 => "Float32",
        Float64 => "Float64",
        Utf8 => "Utf8",
        Binary => "Binary",
        Date32 => "Date32",
        Timestamp(arrow::datatypes::TimeUnit::Second, None) => "TimestampSecond",
        _ => return None,
    })
}

/// Inverse of [`type_name`].
pub(crate) fn parse_type(s: &str) -> Option<DataType> {
    use DataType::*;
    Some(match s {
        "Int8" => Int8,
        "Int16" => Int16,
        "Int32" => Int32,
        "Int64" => Int64,
        "UInt8" => UInt8,
        "UInt16" => UInt16,
        "UInt32" => UInt32,
        "UInt64" => UInt64,
        "Float32" => Float32,
        "Float64" => Float64,
        "Utf8" => Utf8,
        "Binary" => Binary,
        "Date32" => Date32,
        "TimestampSecond" => Timestamp(arrow::datatypes::TimeUnit::Second, None),
        _ => return None,
    })
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io { path: path.to_path_buf(), source }
}

/// Writes `bytes` to `path` and fsyncs it.
pub(crate) fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f = File::create(path).map_err(io(path))?;
    f.write_all(bytes).map_err(io(path))?;
    f.sync_all().map_err(io(path))
}

/// Fsyncs a directory (makes its entries - created, renamed files - durable).
pub(crate) fn sync_dir(path: &Path) -> Result<()> {
    File::open(path).and_then(|f| f.sync_all()).map_err(io(path))
}

fn granule_count(rows: usize, granule_rows: usize) -> usize {
    rows.div_ceil(granule_rows)
}

/// Rows of one batch a [`PartWriter`] takes at a time from sorting or merging: one morsel
/// of the layout ([`GRANULES_PER_MORSEL`] granules), so the arrays built per batch are as
/// bounded as the granules themselves.
pub(crate) fn batch_rows(layout: &Layout) -> usize {
    layout.granule_rows.saturating_mul(GRANULES_PER_MORSEL)
}

/// Concatenates `pieces` (one column) into one array, naming the column when the result
/// would pass arrow's 32-bit offsets (2 GiB of string bytes in one granule or block).
pub(crate) fn concat_pieces(pieces: &[ArrayRef], what: impl Fn() -> String) -> Result<ArrayRef> {
    match pieces {
        [one] => Ok(one.clone()),
        many => concat(&many.iter().map(|a| a.as_ref()).collect::<Vec<_>>()).map_err(|e| {
            Error::InvalidArgument(format!(
                "{}: {e} (one granule must hold under 2 GiB of string bytes: use fewer rows per granule)",
                what()
            ))
        }),
    }
}

/// Writes one part into an existing empty directory as its rows arrive, already sorted by
/// the sort key, in batches of any length ([`PartWriter::write`]). Each column is cut into
/// granules and blocks as its rows arrive and appended to its file, so the writer holds at
/// most one morsel ([`GRANULES_PER_MORSEL`] granules) of pending rows per column besides
/// the caller's batch, never a whole column: a column of any total size is written as long
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

/// One column file of a [`PartWriter`]: rows not yet cut into blocks, and what the index
/// files need of the granules written.
struct ColumnWriter {
    c: usize,
    path: PathBuf,
    file: std::io::BufWriter<File>,
    /// xxh3 of the bytes written so far (streaming; equals `xxh3_64` of the whole file).
    hasher: xxhash_rust::xxh3::Xxh3Default,
    /// Bytes written so far.
    len: u64,
    codec: Codec,
    encodings: bool,
    granule_rows: usize,
    with_bloom: bool,
    is_key: bool,
    /// Rows received but not written, in order; `pending_rows` in all.
    pending: VecDeque<ArrayRef>,
    pending_rows: usize,
    /// Per granule written: (byte offset of its block, first row inside the block).
    marks: Vec<(u64, u32)>,
    /// Per granule: min and max (copies, not slices of the data).
    mins: PerGranule,
    maxs: PerGranule,
    blooms: Vec<Vec<u64>>,
    /// Sort-key columns: a copy of each granule's first row.
    firsts: PerGranule,
    /// Scratch buffer of one encoded block.
    block: Vec<u8>,
}

impl ColumnWriter {
    fn create(dir: &Path, c: usize, layout: &Layout) -> Result<ColumnWriter> {
        let path = dir.join(format!("c{c}.bin"));
        let file = File::create(&path).map_err(io(&path))?;
        Ok(ColumnWriter {
            c,
            path,
            file: std::io::BufWriter::with_capacity(1 << 20, file),
            hasher: xxhash_rust::xxh3::Xxh3Default::new(),
            len: 0,
            codec: layout.codecs[c],
            encodings: layout.encodings,
            granule_rows: layout.granule_rows,
            with_bloom: layout.bloom.contains(&c),
            is_key: layout.sort_key.contains(&c),
            pending: VecDeque::new(),
            pending_rows: 0,
            marks: Vec::new(),
            mins: PerGranule::default(),
            maxs: PerGranule::default(),
            blooms: Vec::new(),
            firsts: PerGranule::default(),
            block: Vec::new(),
        })
    }

    fn push(&mut self, a: ArrayRef) {
        if !a.is_empty() {
            self.pending_rows += a.len();
            self.pending.push_back(a);
        }
    }

    /// Writes every full morsel of pending rows (`last`: and the rest).
    fn flush(&mut self, last: bool, schema: &Schema) -> Result<()> {
        let morsel = self.granule_rows.saturating_mul(GRANULES_PER_MORSEL);
        while self.pending_rows >= morsel || (last && self.pending_rows > 0) {
            let n = morsel.min(self.pending_rows);
            self.write_morsel(n, schema)?;
        }
        Ok(())
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

    /// Writes `n` rows (a morsel, or the part's last rows) as granules grouped into blocks:
    /// a block is closed at the first granule boundary where it holds at least
    /// [`MIN_BLOCK_BYTES`] uncompressed bytes, or at the morsel's end.
    fn write_morsel(&mut self, n: usize, schema: &Schema) -> Result<()> {
        let gr = self.granule_rows;
        let one = UInt32Array::from(vec![0u32]);
        let (mut block, mut bytes, mut block_rows, mut done) = (Vec::new(), 0, 0, 0);
        while done < n {
            let len = gr.min(n - done);
            let gran = self.take(len, schema)?;
            bytes += block::plain_size(gran.as_ref());
            let (lo, hi) = min_max(gran.as_ref())?;
            let what = || format!("min/max index of column {}", schema.field(self.c).name());
            self.mins.push(lo, what)?;
            self.maxs.push(hi, what)?;
            if self.with_bloom {
                self.blooms.push(bloom_of(gran.as_ref()));
            }
            if self.is_key {
                // A copy: a one-row slice would keep the whole granule's buffers alive.
                self.firsts.push(take(gran.as_ref(), &one, None)?, what)?;
            }
            self.marks.push((self.len, block_rows as u32));
            block_rows += len;
            done += len;
            block.push(gran);
            if done >= n || bytes >= MIN_BLOCK_BYTES {
                let arr = concat_pieces(&block, || format!("column {}", schema.field(self.c).name()))?;
                self.block.clear();
                block::write_block(arr.as_ref(), self.codec, self.encodings, &mut self.block)
                    .map_err(|e| Error::InvalidArgument(format!("column {}: {e}", self.c)))?;
                self.file.write_all(&self.block).map_err(io(&self.path))?;
                self.hasher.update(&self.block);
                self.len += self.block.len() as u64;
                block.clear();
                (bytes, block_rows) = (0, 0);
            }
        }
        Ok(())
    }

    /// Flushes and fsyncs the file.
    fn close(&mut self) -> Result<()> {
        self.file.flush().map_err(io(&self.path))?;
        self.file.get_ref().sync_all().map_err(io(&self.path))
    }
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
    Ok(int_dispatch!(arr.data_type(), A => prim::<A>(arr), _ => match arr.data_type() {
        DataType::Float32 => prim::<Float32Type>(arr),
        DataType::Float64 => prim::<Float64Type>(arr),
        DataType::Utf8 => {
            let a = arr.as_string::<i32>();
            (Arc::new(StringArray::from(vec![agg::min_string(a)])) as ArrayRef,
             Arc::new(StringArray::from(vec![agg::max_string(a)])) as ArrayRef)
        }
        DataType::Binary => {
            let a = arr.as_binary::<i32>();
            (Arc::new(BinaryArray::from(vec![agg::min_binary(a)])) as ArrayRef,
             Arc::new(BinaryArray::from(vec![agg::max_binary(a)])) as ArrayRef)
        }
        other => return Err(Error::not_implemented(format!("storing type {other}"))),
    }))
}

/// Per-granule min/max of one column in a form cheap to compare with [`tessera_common::RangeValue`].
#[derive(Debug)]
pub(crate) enum Stats {
    /// Integers, dates, timestamps: `None` for an all-NULL granule.
    Int(Vec<Option<(i128, i128)>>),
    /// Strings and binaries, bytewise.
    Bytes(Vec<Option<(Vec<u8>, Vec<u8>)>>),
    /// Floats: not used for skipping.
    None,
}

fn stats_of(mins: &ArrayRef, maxs: &ArrayRef) -> Stats {
    fn ints<A: ArrowPrimitiveType>(mins: &ArrayRef, maxs: &ArrayRef) -> Stats
    where
        A::Native: IntNative,
    {
        let (lo, hi) = (mins.as_primitive::<A>(), maxs.as_primitive::<A>());
        Stats::Int(
            (0..lo.len())
                .map(|g| (lo.is_valid(g) && hi.is_valid(g)).then(|| (lo.value(g).to_i128(), hi.value(g).to_i128())))
                .collect(),
        )
    }
    fn bytes(lo: &dyn Array, hi: &dyn Array, val: impl Fn(&dyn Array, usize) -> Vec<u8>) -> Stats {
        Stats::Bytes((0..lo.len()).map(|g| (lo.is_valid(g) && hi.is_valid(g)).then(|| (val(lo, g), val(hi, g)))).collect())
    }
    int_dispatch!(mins.data_type(), A => ints::<A>(mins, maxs), _ => match mins.data_type() {
        DataType::Utf8 => bytes(mins.as_ref(), maxs.as_ref(), |a, g| a.as_string::<i32>().value(g).as_bytes().to_vec()),
        DataType::Binary => bytes(mins.as_ref(), maxs.as_ref(), |a, g| a.as_binary::<i32>().value(g).to_vec()),
        _ => Stats::None,
    })
}

/// The table a part directory belongs to (its parent directory's name), for messages.
fn table_of(dir: &Path) -> String {
    dir.parent().and_then(|p| p.file_name()).map_or_else(|| "?".into(), |n| n.to_string_lossy().into_owned())
}

/// An open, verified part: column files mapped, marks, primary index and min/max in memory.
#[derive(Debug)]
pub struct Part {
    pub(crate) name: String,
    pub(crate) dir: PathBuf,
    pub(crate) rows: usize,
    pub(crate) granule_rows: usize,
    pub(crate) granules: usize,
    /// xxh3 of `checksums.txt` (which covers every other file): the part's identity in the
    /// table manifest.
    pub(crate) sums_hash: u64,
    /// Process-unique id of this opened part: its decoded blocks' key in the block cache.
    pub(crate) uid: u64,
    schema: SchemaRef,
    maps: Vec<Mmap>,
    /// `marks[c][g]`: byte offset of the block holding granule `g` of column `c`, and the
    /// granule's first row inside that block.
    marks: Vec<Vec<(u64, u32)>>,
    /// First sort-key tuple of each granule (one array of `granules` values per key column).
    pub(crate) primary: Vec<ArrayRef>,
    pub(crate) stats: Vec<Stats>,
    /// `min_max[c]`: per-granule minimums and maximums of column `c` (the column's type).
    pub(crate) min_max: Vec<(ArrayRef, ArrayRef)>,
    /// `blooms[c]`: per-granule bloom filters of column `c`, if it has them.
    pub(crate) blooms: Vec<Option<Vec<Vec<u64>>>>,
}

impl Part {
    fn corrupt(&self, file: &str, detail: String) -> Error {
        Error::Corrupt { path: self.dir.join(file), detail: format!("table {}: part {}: {detail}", table_of(&self.dir), self.name) }
    }

    /// Opens the part in `dir` (named `name`), verifying its checksums file, the checksums
    /// of its metadata and index files, the sizes of its column files, and that its schema
    /// equals `schema`.
    ///
    /// # Errors
    /// [`Error::Corrupt`] naming the file and what is wrong (missing file, wrong format
    /// version, bad checksum, truncated file); [`Error::Io`] for other I/O failures.
    pub(crate) fn open(dir: &Path, name: &str, schema: &SchemaRef) -> Result<Part> {
        let table = table_of(dir);
        let corrupt =
            |file: &str, detail: String| Error::Corrupt { path: dir.join(file), detail: format!("table {table}: part {name}: {detail}") };
        let read = |file: &str| -> Result<Vec<u8>> {
            let p = dir.join(file);
            std::fs::read(&p).map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => corrupt(file, "missing file".into()),
                _ => Error::Io { path: p.clone(), source: e },
            })
        };
        let sums = read("checksums.txt")?;
        let text = std::str::from_utf8(&sums).map_err(|_| corrupt("checksums.txt", "not UTF-8".into()))?;
        let mut lines = text.lines();
        let head = lines.next().unwrap_or("");
        let version = head.strip_prefix("tessera part format ").and_then(|v| v.parse::<u32>().ok());
        match version {
            Some(FORMAT_VERSION) => {}
            Some(v) => {
                return Err(corrupt(
                    "checksums.txt",
                    format!("unsupported part format version {v} (this build reads version {FORMAT_VERSION})"),
                ));
            }
            None => return Err(corrupt("checksums.txt", format!("bad header line {head:?} at byte offset 0"))),
        }
        let body_end = text.rfind("end\t").ok_or_else(|| corrupt("checksums.txt", "no end line (truncated)".into()))?;
        let want = text[body_end + 4..].trim();
        let got = format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&sums[..body_end]));
        if want != got {
            return Err(corrupt("checksums.txt", format!("checksum mismatch (stored {want}, computed {got})")));
        }
        let mut listed: Vec<(String, u64, String)> = Vec::new();
        for (i, line) in text[..body_end].lines().enumerate().skip(1) {
            let f: Vec<&str> = line.split('\t').collect();
            let (Some(n), Some(l), Some(h)) = (f.first(), f.get(1).and_then(|l| l.parse().ok()), f.get(2)) else {
                return Err(corrupt("checksums.txt", format!("bad line {}: {line:?}", i + 1)));
            };
            listed.push((n.to_string(), l, h.to_string()));
        }
        let mut small = std::collections::HashMap::new();
        for (file, len, hash) in &listed {
            let p = dir.join(file);
            let actual = std::fs::metadata(&p)
                .map_err(|e| match e.kind() {
                    std::io::ErrorKind::NotFound => corrupt(file, "missing file".into()),
                    _ => Error::Io { path: p.clone(), source: e },
                })?
                .len();
            if actual != *len {
                return Err(corrupt(file, format!("size {actual} bytes, checksums.txt says {len} (truncated or extended)")));
            }
            if !file.ends_with(".bin") {
                let bytes = read(file)?;
                let got = format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&bytes));
                if &got != hash {
                    return Err(corrupt(file, format!("checksum mismatch (stored {hash}, computed {got})")));
                }
                small.insert(file.clone(), bytes);
            }
        }
        let take_small = |small: &mut std::collections::HashMap<String, Vec<u8>>, f: &str| {
            small.remove(f).ok_or_else(|| corrupt("checksums.txt", format!("{f} is not listed")))
        };
        let meta_bytes = take_small(&mut small, "meta.json")?;
        let meta: PartMeta =
            serde_json::from_slice(&meta_bytes).map_err(|e| corrupt("meta.json", format!("bad JSON: {e}")))?;
        if meta.format_version != FORMAT_VERSION {
            return Err(corrupt(
                "meta.json",
                format!("unsupported part format version {} (this build reads version {FORMAT_VERSION})", meta.format_version),
            ));
        }
        let file_schema: Vec<Field> = meta
            .columns
            .iter()
            .map(|c| {
                parse_type(&c.data_type)
                    .map(|t| Field::new(&c.name, t, c.nullable))
                    .ok_or_else(|| corrupt("meta.json", format!("unknown type {} of column {}", c.data_type, c.name)))
            })
            .collect::<Result<_>>()?;
        if Schema::new(file_schema).fields() != schema.fields() {
            return Err(corrupt("meta.json", "schema differs from the table's".into()));
        }
        let ncols = meta.columns.len();
        if meta.granule_rows == 0 || meta.granules != granule_count(meta.rows, meta.granule_rows) || meta.rows == 0 {
            return Err(corrupt("meta.json", format!("inconsistent rows {} / granules {}", meta.rows, meta.granules)));
        }
        if meta.sort_key.iter().any(|&k| k >= ncols) {
            return Err(corrupt("meta.json", "sort key column out of range".into()));
        }
        let g = meta.granules;
        // marks
        let marks_bytes = take_small(&mut small, "marks.mrk")?;
        let body = check_index(&marks_bytes, MARKS_MAGIC, ncols, g).map_err(|d| corrupt("marks.mrk", d))?;
        if body.len() != ncols * g * 12 {
            return Err(corrupt("marks.mrk", format!("{} mark bytes, expected {}", body.len(), ncols * g * 12)));
        }
        let marks: Vec<Vec<(u64, u32)>> = body
            .chunks_exact(g * 12)
            .map(|col| {
                col.chunks_exact(12)
                    .map(|m| (u64::from_le_bytes(m[..8].try_into().expect("8")), u32::from_le_bytes(m[8..].try_into().expect("4"))))
                    .collect()
            })
            .collect();
        // primary index and min/max
        let prim_bytes = take_small(&mut small, "primary.idx")?;
        let body = check_index(&prim_bytes, PRIMARY_MAGIC, meta.sort_key.len(), g).map_err(|d| corrupt("primary.idx", d))?;
        let key_types: Vec<DataType> = meta.sort_key.iter().map(|&k| schema.field(k).data_type().clone()).collect();
        let primary = read_blocks(body, &key_types, g).map_err(|d| corrupt("primary.idx", d))?;
        let mm_bytes = take_small(&mut small, "minmax.idx")?;
        let body = check_index(&mm_bytes, MINMAX_MAGIC, ncols, g).map_err(|d| corrupt("minmax.idx", d))?;
        let mm_types: Vec<DataType> = schema.fields().iter().flat_map(|f| [f.data_type().clone(), f.data_type().clone()]).collect();
        let mm = read_blocks(body, &mm_types, g).map_err(|d| corrupt("minmax.idx", d))?;
        let stats = mm.chunks_exact(2).map(|p| stats_of(&p[0], &p[1])).collect();
        let min_max = mm.chunks_exact(2).map(|p| (p[0].clone(), p[1].clone())).collect();
        let bloom_bytes = take_small(&mut small, "bloom.idx")?;
        let blooms = read_blooms(&bloom_bytes, ncols, g).map_err(|d| corrupt("bloom.idx", d))?;
        // column files
        let mut maps = Vec::with_capacity(ncols);
        for c in 0..ncols {
            let file = format!("c{c}.bin");
            let p = dir.join(&file);
            if !listed.iter().any(|(n, ..)| *n == file) {
                return Err(corrupt("checksums.txt", format!("{file} is not listed")));
            }
            let f = File::open(&p).map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => corrupt(&file, "missing file".into()),
                _ => Error::Io { path: p.clone(), source: e },
            })?;
            // SAFETY: parts are immutable once renamed into place: Tessera never writes to
            // or truncates a committed column file (merges write new parts and delete old
            // directories, which leaves existing mappings valid on Unix). Another process
            // modifying the file would be outside the format's contract; every block read
            // from the map is bounds-checked and checksum-verified before use.
            let map = unsafe { Mmap::map(&f) }.map_err(|e| Error::Io { path: p.clone(), source: e })?;
            // Morsels read whole blocks in file order: tell the kernel to read ahead.
            let _ = map.advise(Advice::Sequential);
            maps.push(map);
        }
        for (c, m) in marks.iter().enumerate() {
            let len = maps[c].len() as u64;
            if m.iter().any(|&(off, _)| off >= len) || m.windows(2).any(|w| w[0].0 > w[1].0) {
                return Err(corrupt(&format!("c{c}.bin"), "marks point outside the file or go backwards".into()));
            }
        }
        Ok(Part {
            name: name.to_string(),
            dir: dir.to_path_buf(),
            rows: meta.rows,
            granule_rows: meta.granule_rows,
            granules: g,
            sums_hash: xxhash_rust::xxh3::xxh3_64(&sums),
            uid: crate::cache::next_part_id(),
            schema: schema.clone(),
            maps,
            marks,
            primary,
            stats,
            min_max,
            blooms,
        })
    }

    /// The part's directory name (`MIN_MAX_LEVEL`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Rows in the part.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Granules in the part (the last one may be shorter).
    pub fn granules(&self) -> usize {
        self.granules
    }

    /// The sparse primary index: for each sort-key column (major first), an array of one
    /// value per granule, the key of the granule's first row.
    pub fn primary_index(&self) -> &[ArrayRef] {
        &self.primary
    }

    /// Rows of granule `g`.
    pub(crate) fn granule_len(&self, g: usize) -> usize {
        self.granule_rows.min(self.rows - g * self.granule_rows)
    }

    /// The granule after the last one of column `c` stored in the block that holds granule
    /// `g` (`g < granules`): reading up to it decodes no block twice.
    pub(crate) fn block_end(&self, c: usize, g: usize) -> usize {
        let marks = &self.marks[c];
        let mut end = g + 1;
        while end < self.granules && marks[end].0 == marks[g].0 {
            end += 1;
        }
        end
    }

    /// Drops the pages of the blocks of column `c` from granule `g0`'s block (and 256 KiB
    /// before it) up to granule `g1`'s block (`g1 == granules`: to the end) from this process's
    /// page tables, keeping them in the OS page cache. A merge reads each input part once,
    /// front to back: without this the resident set grows by every input byte read through
    /// the maps. Only a hint: errors are ignored.
    pub(crate) fn release(&self, c: usize, g0: usize, g1: usize) {
        let (map, marks) = (&self.maps[c], &self.marks[c]);
        if g0 >= g1 || g0 >= self.granules {
            return;
        }
        // Also the bytes just before: the kernel's fault-around maps up to 64 KiB of cached
        // pages around each fault, pages of earlier, already released blocks included.
        const SLACK: usize = 256 * 1024;
        let start = (marks[g0].0 as usize).saturating_sub(SLACK);
        let end = if g1 < self.granules { marks[g1].0 as usize } else { map.len() };
        if start < end && end <= map.len() {
            // SAFETY: `map` is a read-only MAP_SHARED mapping of a file (`Mmap::map`), never
            // written (see `Part::open`). For a shared file mapping MADV_DONTNEED only
            // removes page-table entries: a later access faults the same file bytes back in
            // from the page cache (madvise(2)), so slices borrowed from the map, here or in
            // concurrent queries, keep reading the same bytes. memmap2 checks the range
            // against the map and aligns its start down to a page.
            let _ = unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start) };
        }
    }

    /// Decodes rows of granules `g0..g1` of column `c`, verifying every block read.
    ///
    /// # Errors
    /// [`Error::Corrupt`] naming the part, the column file, the column and the block's byte
    /// offset.
    pub(crate) fn read_granules(&self, c: usize, g0: usize, g1: usize) -> Result<ArrayRef> {
        let field = self.schema.field(c);
        let map = &self.maps[c];
        let marks = &self.marks[c];
        let mut pieces: Vec<ArrayRef> = Vec::new();
        let mut g = g0;
        while g < g1 {
            let (off, r0) = marks[g];
            let mut end = g + 1;
            while end < g1 && marks[end].0 == off {
                end += 1;
            }
            let want: usize = (g..end).map(|x| self.granule_len(x)).sum();
            let err = |d: String| {
                self.corrupt(&format!("c{c}.bin"), format!("column {}, block at byte offset {off}: {d}", field.name()))
            };
            let buf = &map[off as usize..];
            let len = block::block_len(buf).map_err(err)?;
            let _ = map.advise_range(Advice::WillNeed, off as usize, len);
            let arr = block::read_block(buf, field.data_type()).map_err(err)?;
            if r0 as usize + want > arr.len() {
                return Err(err(format!("block has {} rows, marks need rows {}..{}", arr.len(), r0, r0 as usize + want)));
            }
            if arr.null_count() > 0 && !field.is_nullable() {
                return Err(err("NULLs in a NOT NULL column".into()));
            }
            pieces.push(if r0 == 0 && want == arr.len() { arr } else { arr.slice(r0 as usize, want) });
            g = end;
        }
        match pieces.len() {
            1 => Ok(pieces.pop().expect("one piece")),
            _ => concat_pieces(&pieces, || format!("column {} of part {}, granules {g0}..{g1}", field.name(), self.name)),
        }
    }
}

fn read_blooms(bytes: &[u8], ncols: usize, granules: usize) -> block::DResult<Vec<Option<Vec<Vec<u64>>>>> {
    if bytes.len() < 24 {
        return Err(format!("truncated: {} bytes", bytes.len()));
    }
    let n = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes")) as usize;
    let mut body = check_index(bytes, BLOOM_MAGIC, n, granules)?;
    let mut pos = 16;
    let mut u32_at = |body: &mut &[u8]| -> block::DResult<usize> {
        if body.len() < 4 {
            return Err(format!("truncated at byte offset {pos}"));
        }
        let v = u32::from_le_bytes(body[..4].try_into().expect("4 bytes")) as usize;
        *body = &body[4..];
        pos += 4;
        Ok(v)
    };
    let mut cols = Vec::with_capacity(n);
    for _ in 0..n {
        let c = u32_at(&mut body)?;
        if c >= ncols {
            return Err(format!("bloom filter for column {c} of {ncols}"));
        }
        cols.push(c);
    }
    let mut out = vec![None; ncols];
    for c in cols {
        let mut per = Vec::with_capacity(granules);
        for _ in 0..granules {
            let w = u32_at(&mut body)?;
            if !w.is_power_of_two() || body.len() < w * 8 {
                return Err(format!("bad bloom filter of {w} words for column {c}"));
            }
            per.push(body[..w * 8].chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes"))).collect());
            body = &body[w * 8..];
        }
        out[c] = Some(per);
    }
    if !body.is_empty() {
        return Err(format!("{} trailing bytes", body.len()));
    }
    Ok(out)
}

/// Checks magic, version, counts and trailing checksum of an index file; returns its body.
fn check_index<'a>(bytes: &'a [u8], magic: &[u8; 4], n: usize, granules: usize) -> block::DResult<&'a [u8]> {
    if bytes.len() < 24 {
        return Err(format!("truncated: {} bytes", bytes.len()));
    }
    let (body, tail) = bytes.split_at(bytes.len() - 8);
    let want = u64::from_le_bytes(tail.try_into().expect("8 bytes"));
    if xxhash_rust::xxh3::xxh3_64(body) != want {
        return Err(format!("checksum mismatch over bytes 0..{}", body.len()));
    }
    if &body[..4] != magic {
        return Err("bad magic at byte offset 0".into());
    }
    let word = |i: usize| u32::from_le_bytes(body[4 + 4 * i..8 + 4 * i].try_into().expect("4 bytes")) as usize;
    if word(0) != FORMAT_VERSION as usize {
        return Err(format!("unsupported format version {} at byte offset 4 (this build reads {FORMAT_VERSION})", word(0)));
    }
    if word(1) != n || word(2) != granules {
        return Err(format!("header says {} columns x {} granules, expected {n} x {granules}", word(1), word(2)));
    }
    Ok(&body[16..])
}

fn read_blocks(mut body: &[u8], types: &[DataType], granules: usize) -> block::DResult<Vec<ArrayRef>> {
    let mut out = Vec::with_capacity(types.len());
    let mut pos = 16;
    for dt in types {
        let len = block::block_len(body).map_err(|d| format!("byte offset {pos}: {d}"))?;
        let arr = block::read_block(body, dt).map_err(|d| format!("byte offset {pos}: {d}"))?;
        if arr.len() != granules {
            return Err(format!("byte offset {pos}: {} entries, expected {granules}", arr.len()));
        }
        out.push(arr);
        body = &body[len..];
        pos += len;
    }
    if !body.is_empty() {
        return Err(format!("{} trailing bytes", body.len()));
    }
    Ok(out)
}
