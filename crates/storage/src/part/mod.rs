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

use crate::block::{self, Codec, IntNative};

/// Version of the part format this build writes. Version 2 added string blocks with value
/// lengths instead of offsets (encoding 3), version 3 sparse integer blocks (encoding 4);
/// this build reads versions [`MIN_FORMAT_VERSION`]..=`FORMAT_VERSION`.
pub const FORMAT_VERSION: u32 = 3;

/// The oldest part format version this build reads.
pub const MIN_FORMAT_VERSION: u32 = 1;

/// `Ok` if this build reads parts of format version `v`; else the message naming it.
pub(crate) fn check_version(v: u32) -> Result<(), String> {
    if (MIN_FORMAT_VERSION..=FORMAT_VERSION).contains(&v) {
        return Ok(());
    }
    Err(format!("unsupported part format version {v} (this build reads versions {MIN_FORMAT_VERSION} to {FORMAT_VERSION})"))
}

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

/// Whether the bloom filter `words` (a power-of-two count of u64, little-endian, as
/// `bloom.idx` stores them) may contain `hash`.
pub(crate) fn bloom_may_contain(words: &[u8], hash: u64) -> bool {
    if words.len() < 8 {
        return false;
    }
    let mask = (words.len() as u64 / 8 * 64) - 1;
    let (h1, h2) = (hash, (hash >> 32) | 1);
    (0..BLOOM_PROBES).all(|i| {
        let bit = h1.wrapping_add(i.wrapping_mul(h2)) & mask;
        let at = (bit / 64) as usize * 8;
        let word = u64::from_le_bytes(words[at..at + 8].try_into().expect("8 bytes"));
        word & (1 << (bit % 64)) != 0
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
    let mut hashes: Vec<u64> = tessera_common::int_like_dispatch!(arr.data_type(), A => ints::<A>(arr), _ => match arr.data_type() {
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
    tessera_common::int_like_dispatch!(mins.data_type(), A => ints::<A>(mins, maxs), _ => match mins.data_type() {
        DataType::Utf8 => bytes(mins.as_ref(), maxs.as_ref(), |a, g| a.as_string::<i32>().value(g).as_bytes().to_vec()),
        DataType::Binary => bytes(mins.as_ref(), maxs.as_ref(), |a, g| a.as_binary::<i32>().value(g).to_vec()),
        _ => Stats::None,
    })
}

mod reader;
mod writer;

pub use reader::Part;
pub(crate) use writer::*;
