//! One part: immutable sorted rows of a table in a directory of files (crate docs give the
//! layout). [`write_part`] writes one into a fresh directory and fsyncs it; [`Part::open`]
//! verifies and maps one.

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

/// Sorts rows by the sort key: the permutation that orders `keys` (NULLs first, ascending).
pub(crate) fn sort_permutation(keys: &[ArrayRef]) -> Result<Option<UInt32Array>> {
    if keys.is_empty() {
        return Ok(None);
    }
    let rows_n = keys[0].len();
    if rows_n > u32::MAX as usize {
        return Err(Error::InvalidArgument(format!("{rows_n} rows in one part; at most 2^32-1")));
    }
    let fields = keys.iter().map(|k| arrow::row::SortField::new(k.data_type().clone())).collect();
    let conv = arrow::row::RowConverter::new(fields)?;
    let rows = conv.convert_columns(keys)?;
    let mut idx: Vec<u32> = (0..rows_n as u32).collect();
    idx.par_sort_unstable_by(|&a, &b| rows.row(a as usize).cmp(&rows.row(b as usize)));
    if idx.iter().enumerate().all(|(i, &v)| i as u32 == v) {
        return Ok(None);
    }
    Ok(Some(UInt32Array::from(idx)))
}

/// What a column writer returns: its marks and per-granule min/max.
struct ColumnOut {
    marks: Vec<(u64, u32)>,
    mins: ArrayRef,
    maxs: ArrayRef,
    file_len: u64,
    hash: u64,
    blooms: Vec<Vec<u64>>,
}

/// Writes a part of `rows` rows into the existing empty directory `dir`: column `c` is
/// `get(c)` reordered by `perm` (the sort permutation, `None` if already sorted); `done`
/// is called with each finished column index. Every file and the directory are fsynced.
///
/// # Errors
/// I/O errors naming the file; errors of `get`.
pub(crate) fn write_part(
    dir: &Path,
    layout: &Layout,
    rows: usize,
    perm: Option<&UInt32Array>,
    get: &(dyn Fn(usize) -> Result<ArrayRef> + Sync),
    done: &(dyn Fn(usize) + Sync),
) -> Result<()> {
    let schema = &layout.schema;
    let ncols = schema.fields().len();
    let gr = layout.granule_rows;
    let granules = granule_count(rows, gr);
    let outs: Vec<ColumnOut> = (0..ncols)
        .into_par_iter()
        .map(|c| {
            let col = get(c)?;
            if col.len() != rows {
                return Err(Error::InvalidArgument(format!(
                    "column {} has {} rows, expected {rows}",
                    schema.field(c).name(),
                    col.len()
                )));
            }
            let col = match perm {
                Some(p) => take(col.as_ref(), p, None)?,
                None => col,
            };
            let out = write_column(dir, c, &col, layout, gr)?;
            done(c);
            Ok(out)
        })
        .collect::<Result<_>>()?;

    let mut files: Vec<(String, u64, u64)> = Vec::new();
    for (c, o) in outs.iter().enumerate() {
        files.push((format!("c{c}.bin"), o.file_len, o.hash));
    }
    // marks.mrk
    let mut marks = Vec::with_capacity(16 + ncols * granules * 12 + 8);
    marks.extend_from_slice(MARKS_MAGIC);
    for v in [FORMAT_VERSION, ncols as u32, granules as u32] {
        marks.extend_from_slice(&v.to_le_bytes());
    }
    for o in &outs {
        for &(off, row) in &o.marks {
            marks.extend_from_slice(&off.to_le_bytes());
            marks.extend_from_slice(&row.to_le_bytes());
        }
    }
    finish_index(&mut marks);
    // primary.idx: first row of each granule, for each sort-key column.
    let firsts = UInt32Array::from((0..granules).map(|g| (g * gr) as u32).collect::<Vec<_>>());
    let mut primary = index_header(PRIMARY_MAGIC, layout.sort_key.len(), granules);
    for &k in &layout.sort_key {
        let col = match perm {
            Some(p) => take(get(k)?.as_ref(), p, None)?,
            None => get(k)?,
        };
        let first = take(col.as_ref(), &firsts, None)?;
        block::write_block(first.as_ref(), Codec::None, false, &mut primary).map_err(Error::Internal)?;
    }
    finish_index(&mut primary);
    // minmax.idx
    let mut minmax = index_header(MINMAX_MAGIC, ncols, granules);
    for o in &outs {
        block::write_block(o.mins.as_ref(), Codec::None, false, &mut minmax).map_err(Error::Internal)?;
        block::write_block(o.maxs.as_ref(), Codec::None, false, &mut minmax).map_err(Error::Internal)?;
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
    for (name, bytes) in
        [("marks.mrk", &marks), ("primary.idx", &primary), ("minmax.idx", &minmax), ("bloom.idx", &bloom), ("meta.json", &meta)]
    {
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

fn write_column(dir: &Path, c: usize, col: &ArrayRef, layout: &Layout, gr: usize) -> Result<ColumnOut> {
    let (codec, encodings) = (layout.codecs[c], layout.encodings);
    let with_bloom = layout.bloom.contains(&c);
    let mut blooms = Vec::new();
    let path = dir.join(format!("c{c}.bin"));
    let rows = col.len();
    let granules = granule_count(rows, gr);
    let mut buf = Vec::new();
    let mut marks = Vec::with_capacity(granules);
    let mut mins = Vec::with_capacity(granules);
    let mut maxs = Vec::with_capacity(granules);
    let mut g = 0;
    while g < granules {
        let start = g * gr;
        let mut end_g = g;
        let mut bytes = 0;
        // Grow the block granule by granule until it is big enough or hits a morsel boundary.
        loop {
            let s = end_g * gr;
            let len = gr.min(rows - s);
            let gran = col.slice(s, len);
            bytes += block::plain_size(gran.as_ref());
            let (lo, hi) = min_max(gran.as_ref())?;
            if with_bloom {
                blooms.push(bloom_of(gran.as_ref()));
            }
            mins.push(lo);
            maxs.push(hi);
            marks.push((buf.len() as u64, (s - start) as u32));
            end_g += 1;
            if end_g >= granules || bytes >= MIN_BLOCK_BYTES || end_g % GRANULES_PER_MORSEL == 0 {
                break;
            }
        }
        let end = (end_g * gr).min(rows);
        block::write_block(col.slice(start, end - start).as_ref(), codec, encodings, &mut buf)
            .map_err(|e| Error::InvalidArgument(format!("column {c}: {e}")))?;
        g = end_g;
    }
    write_synced(&path, &buf)?;
    let mins = concat(&mins.iter().map(|a| a.as_ref()).collect::<Vec<_>>())?;
    let maxs = concat(&maxs.iter().map(|a| a.as_ref()).collect::<Vec<_>>())?;
    Ok(ColumnOut { marks, mins, maxs, file_len: buf.len() as u64, hash: xxhash_rust::xxh3::xxh3_64(&buf), blooms })
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
            _ => Ok(concat(&pieces.iter().map(|a| a.as_ref()).collect::<Vec<_>>())?),
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
