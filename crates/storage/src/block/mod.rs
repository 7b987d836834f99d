//! Compressed, checksummed blocks: one block holds the values of consecutive granules of
//! one column, lightly encoded (plain, dictionary or frame-of-reference bit-packing), then
//! compressed with the column's codec. See the crate docs for the byte layout.
//!
//! Decoding never trusts the bytes: every length and index is checked, and the checksum is
//! verified before anything else is read (by the part reader the first time a process
//! reads a block: see `Part::verified`). Errors come back as a detail string that the
//! caller wraps with the file, part, column and byte offset.
//!
//! `write` encodes and compresses a block, `read` checks and decodes one (whole, or only
//! its string lengths), `lz4_prefix` decodes the start of an LZ4 block.

mod lz4_prefix;
mod read;
mod write;

pub(crate) use lz4_prefix::lz4_prefix;
pub(crate) use read::{decode_block, read_block, read_block_sizes, read_block_sparse, is_sparse, sizes_of};
pub(crate) use write::write_block;

use arrow::array::{Array, AsArray};
use arrow::datatypes::DataType;
use serde::{Deserialize, Serialize};

/// Bytes of the block header.
pub(crate) const HEADER_LEN: usize = 24;

/// Largest uncompressed payload a block may declare (a guard against absurd allocations
/// from damaged headers; real blocks are 64 KiB-1 MiB, or one granule of long strings).
const MAX_PAYLOAD: usize = 1 << 30;

/// Decoding errors: a detail message, wrapped by the caller with file, part and column.
pub(crate) type DResult<T> = std::result::Result<T, String>;

/// Compression codec of a column's blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Codec {
    /// Stored as is.
    None,
    /// LZ4 block format (`lz4_flex`): fast to decompress; the default.
    #[default]
    Lz4,
    /// Zstandard at the given level (1..=22; 3 is zstd's default).
    Zstd(i32),
}

impl Codec {
    fn id(self) -> u8 {
        match self {
            Codec::None => 0,
            Codec::Lz4 => 1,
            Codec::Zstd(_) => 2,
        }
    }

    /// Parses `none`, `lz4`, `zstd` or `zstd(LEVEL)` / `zstd:LEVEL` (case-insensitive).
    pub fn parse(s: &str) -> Option<Codec> {
        let s = s.trim().to_ascii_lowercase();
        match s.as_str() {
            "none" => Some(Codec::None),
            "lz4" => Some(Codec::Lz4),
            "zstd" => Some(Codec::Zstd(3)),
            _ => {
                let rest = s.strip_prefix("zstd")?;
                let lvl = rest.trim_start_matches(['(', ':']).trim_end_matches(')').trim();
                lvl.parse().ok().filter(|l| (1..=22).contains(l)).map(Codec::Zstd)
            }
        }
    }
}

/// Light encodings applied before the codec; chosen per block by encoded size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Plain = 0,
    Dict = 1,
    For = 2,
    /// Strings: each value's length in the narrowest width (1 or 2 bytes), then the bytes.
    Sized = 3,
    /// Integers, at least 15/16 of them zero, no NULLs: the non-zero values' positions and
    /// the values (ClickHouse's sparse serialization).
    Sparse = 4,
}


/// Integer natives as i128 and back (values always fit: they came from the same type).
pub(crate) trait IntNative: Copy {
    fn to_i128(self) -> i128;
    fn from_i128(v: i128) -> Self;
    /// Appends the value's little-endian bytes.
    fn put_le(self, out: &mut Vec<u8>);
    /// The value of `b`'s first `size_of::<Self>()` little-endian bytes (`b` holds them).
    fn get_le(b: &[u8]) -> Self;
}

macro_rules! int_native {
    ($($t:ty),*) => {$(
        impl IntNative for $t {
            #[inline]
            fn to_i128(self) -> i128 { self as i128 }
            #[inline]
            fn from_i128(v: i128) -> Self { v as $t }
            #[inline]
            fn put_le(self, out: &mut Vec<u8>) { out.extend_from_slice(&self.to_le_bytes()) }
            #[inline]
            fn get_le(b: &[u8]) -> Self {
                <$t>::from_le_bytes(b[..std::mem::size_of::<$t>()].try_into().expect("checked length"))
            }
        }
    )*};
}
int_native!(i8, i16, i32, i64, u8, u16, u32, u64);

/// Bytes per value of a fixed-width type, `None` for strings and binaries.
pub(crate) fn fixed_width(dt: &DataType) -> Option<usize> {
    dt.primitive_width()
}

/// Uncompressed size of `arr` in plain encoding, bytes (values + offsets; nulls ignored).
pub(crate) fn plain_size(arr: &dyn Array) -> usize {
    match fixed_width(arr.data_type()) {
        Some(w) => w * arr.len(),
        None => {
            let (offs, _) = var_parts(arr);
            (offs[arr.len()] - offs[0]) as usize + 4 * (arr.len() + 1)
        }
    }
}

/// The offsets and value bytes of a Utf8 or Binary array.
fn var_parts(arr: &dyn Array) -> (&[i32], &[u8]) {
    match arr.data_type() {
        DataType::Utf8 => {
            let a = arr.as_string::<i32>();
            (a.value_offsets(), a.values().as_slice())
        }
        _ => {
            let a = arr.as_binary::<i32>();
            (a.value_offsets(), a.values().as_slice())
        }
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// The total length (header + stored bytes) of the block starting at `buf[0]`, checking
/// that it fits in `buf`.
pub(crate) fn block_len(buf: &[u8]) -> DResult<usize> {
    if buf.len() < HEADER_LEN {
        return Err(format!("truncated block header ({} of {HEADER_LEN} bytes)", buf.len()));
    }
    let stored = u32_at(buf, 20) as usize;
    let len = HEADER_LEN + stored;
    if buf.len() < len {
        return Err(format!("truncated block: {len} bytes declared, {} present", buf.len()));
    }
    Ok(len)
}


#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use arrow::array::{ArrayRef, BinaryArray, Int64Array, StringArray};

    #[test]
    fn encodings_are_chosen_by_size_and_round_trip() {
        let ints: ArrayRef = Arc::new(Int64Array::from((0..10_000).map(|i| 1_000_000 + i % 100).collect::<Vec<i64>>()));
        let strs: ArrayRef = Arc::new(StringArray::from((0..10_000).map(|i| format!("v{}", i % 7)).collect::<Vec<_>>()));
        for (arr, enc) in [(ints, Encoding::For), (strs, Encoding::Dict)] {
            for codec in [Codec::None, Codec::Lz4, Codec::Zstd(3)] {
                let mut out = Vec::new();
                write_block(arr.as_ref(), codec, true, &mut out).unwrap();
                assert_eq!(out[9], enc as u8);
                let back = read_block(&out, arr.data_type()).unwrap();
                assert_eq!(back.as_ref(), arr.as_ref());
            }
        }
    }

    /// Integer blocks with at least 15/16 zeros and no NULLs are sparse: they read back
    /// whole (every type, position widths 1, 2 and 4, sliced arrays), and their non-zero
    /// rows alone ([`read_block_sparse`]); one more non-zero value, a NULL, or encodings
    /// off, and they are not. Damaged positions are an error.
    #[test]
    fn mostly_zero_integer_blocks_are_sparse() {
        use arrow::array::{Date32Array, Int16Array, UInt8Array};
        use arrow::datatypes::TimeUnit;
        // Every `every`-th row (from row 7) non-zero: 1..=4, signs alternating.
        let sparse = |n: usize, every: usize| -> Vec<i64> {
            (0..n).map(|i| if i % every == 7 { (1 + (i / every) % 4) as i64 * if (i / every) % 2 == 0 { 1 } else { -1 } } else { 0 }).collect()
        };
        let cases: Vec<(ArrayRef, Encoding)> = vec![
            (Arc::new(Int64Array::from(sparse(200, 17))), Encoding::Sparse),
            (Arc::new(Int16Array::from(sparse(60_000, 97).iter().map(|&v| v as i16).collect::<Vec<_>>())), Encoding::Sparse),
            (Arc::new(UInt8Array::from(sparse(70_000, 20).iter().map(|&v| v.unsigned_abs() as u8).collect::<Vec<_>>())), Encoding::Sparse),
            (Arc::new(Date32Array::from(sparse(5_000, 30).iter().map(|&v| v as i32).collect::<Vec<_>>())), Encoding::Sparse),
            (arrow::compute::cast(&Int64Array::from(sparse(5_000, 30)), &DataType::Timestamp(TimeUnit::Second, None)).unwrap(), Encoding::Sparse),
            // One in 15 non-zero: not sparse.
            (Arc::new(Int64Array::from(sparse(3_000, 15))), Encoding::For),
            // A NULL: not sparse.
            (Arc::new(Int64Array::from(sparse(3_000, 100).into_iter().enumerate().map(|(i, v)| (i != 5).then_some(v)).collect::<Vec<_>>())), Encoding::For),
            // Fewer than 16 rows: not sparse.
            (Arc::new(Int64Array::from(vec![0i64; 15])), Encoding::For),
        ];
        for (whole, enc) in cases {
            for arr in [whole.clone(), whole.slice(3, whole.len() - 5)] {
                for (codec, encode) in [(Codec::None, true), (Codec::Lz4, true), (Codec::Lz4, false)] {
                    let mut out = Vec::new();
                    write_block(arr.as_ref(), codec, encode, &mut out).unwrap();
                    let want = if encode && !(enc == Encoding::Sparse && arr.len() < 16) { enc } else { Encoding::Plain };
                    assert_eq!(out[9], want as u8, "{} rows of {}", arr.len(), arr.data_type());
                    assert_eq!(read_block(&out, arr.data_type()).unwrap().as_ref(), arr.as_ref());
                    let rows = read_block_sparse(&out, arr.data_type(), true).unwrap();
                    if want != Encoding::Sparse {
                        assert!(rows.is_none());
                        continue;
                    }
                    let (n, at, values) = rows.unwrap();
                    assert_eq!(n, arr.len());
                    let zero = arrow::compute::cast(&Int64Array::from(vec![0i64]), arr.data_type()).unwrap();
                    let nonzero: Vec<u32> = (0..arr.len()).filter(|&i| arr.slice(i, 1).as_ref() != zero.as_ref()).map(|i| i as u32).collect();
                    assert_eq!(at, nonzero);
                    let idx = arrow::array::UInt32Array::from(at.clone());
                    assert_eq!(values.as_ref(), arrow::compute::take(&arr, &idx, None).unwrap().as_ref());
                }
            }
        }
        // Damaged positions (checksum rewritten): out of order, past the rows, too many.
        let arr = Int64Array::from(sparse(64, 16));
        let mut good = Vec::new();
        write_block(&arr, Codec::None, true, &mut good).unwrap();
        // Payload: null flag, n u32, width u8 (1), positions 7, 23, 39, 55.
        assert_eq!(&good[HEADER_LEN..HEADER_LEN + 10], &[0, 4, 0, 0, 0, 1, 7, 23, 39, 55]);
        for (at, byte, says) in [(HEADER_LEN + 7, 5, "not ascending"), (HEADER_LEN + 9, 64, "not ascending"), (HEADER_LEN + 1, 65, "declares 65 values"), (HEADER_LEN + 5, 3, "bad sparse position width")] {
            let mut out = good.clone();
            out[at] = byte;
            let h = xxhash_rust::xxh3::xxh3_64(&out[8..]);
            out[..8].copy_from_slice(&h.to_le_bytes());
            assert!(read_block(&out, &DataType::Int64).unwrap_err().contains(says), "{says}");
            assert!(read_block_sparse(&out, &DataType::Int64, true).unwrap_err().contains(says), "{says}");
        }
        // A damaged row count (4 billion rows for 4 values) is an error, not a 32 GiB zeroed
        // allocation.
        let mut out = good.clone();
        out[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        let h = xxhash_rust::xxh3::xxh3_64(&out[8..]);
        out[..8].copy_from_slice(&h.to_le_bytes());
        assert!(read_block(&out, &DataType::Int64).unwrap_err().contains("sparse block declares 4294967295 rows"));
    }

    /// Strings of at most 255 or 65,535 bytes are stored with 1- or 2-byte lengths, longer
    /// ones with u32 offsets; each reads back (sliced arrays too, NULLs, empty values), and
    /// their sizes come from the lengths or offsets alone.
    #[test]
    fn string_blocks_store_lengths_when_short() {
        let long = "x".repeat(70_000);
        let cases: [(Vec<Option<String>>, Encoding, u8); 3] = [
            ((0..3_000).map(|i| (i % 11 != 3).then(|| format!("{}", i * 7919))).collect(), Encoding::Sized, 1),
            ((0..300).map(|i| Some("é".repeat(i % 200))).chain([None, Some(String::new())]).collect(), Encoding::Sized, 2),
            (vec![Some("a".into()), None, Some(long.clone()), Some(String::new())], Encoding::Plain, 0),
        ];
        for (rows, enc, width) in cases {
            let whole = StringArray::from(rows);
            for arr in [whole.clone(), whole.slice(1, whole.len() - 1)] {
                for (codec, encode) in [(Codec::None, true), (Codec::Lz4, true), (Codec::Zstd(3), true), (Codec::Lz4, false)] {
                    let mut out = Vec::new();
                    write_block(&arr, codec, encode, &mut out).unwrap();
                    // Without light encodings, plain.
                    let enc = if encode { enc } else { Encoding::Plain };
                    assert_eq!(out[9], enc as u8);
                    if enc == Encoding::Sized {
                        // The width byte follows the null flag and bitmap (codec none only).
                        if codec == Codec::None {
                            let at = HEADER_LEN + 1 + if arr.null_count() > 0 { arr.len().div_ceil(8) } else { 0 };
                            assert_eq!(out[at], width);
                        }
                    }
                    let back = read_block(&out, &DataType::Utf8).unwrap();
                    assert_eq!(back.as_ref(), &arr as &dyn Array, "{enc:?} {codec:?}");
                    let sizes = read_block_sizes(&out, &DataType::Utf8, true).unwrap();
                    assert_eq!(sizes, sizes_of(&arr).unwrap(), "{enc:?} {codec:?}");
                }
            }
        }
        // Lengths that add up past the value bytes are an error.
        let arr = StringArray::from(vec!["ab", "cd"]);
        let mut out = Vec::new();
        write_block(&arr, Codec::None, true, &mut out).unwrap();
        assert_eq!(out[9], Encoding::Sized as u8);
        out[HEADER_LEN + 2] = 9;
        let h = xxhash_rust::xxh3::xxh3_64(&out[8..]);
        out[..8].copy_from_slice(&h.to_le_bytes());
        assert!(read_block(&out, &DataType::Utf8).unwrap_err().contains("payload too short"));
    }

    /// A plain string block is checked as arrow checks a `StringArray` (with `simdutf8`
    /// and a scan of the offsets): valid UTF-8 of every script reads back; bytes that are
    /// not UTF-8, or an offset inside a character, are an error, never an invalid array.
    #[test]
    fn string_blocks_are_utf8_at_every_row() {
        let good: ArrayRef = Arc::new(StringArray::from(vec![Some("ab"), None, Some("é"), Some(""), Some("日本語 текст"), Some("z")]));
        let mut out = Vec::new();
        write_block(good.as_ref(), Codec::None, false, &mut out).unwrap();
        assert_eq!(read_block(&out, &DataType::Utf8).unwrap().as_ref(), good.as_ref());
        for (bytes, says) in [
            (vec![&b"ok"[..], b"\xff"], "invalid UTF-8 at byte 2"),
            // "é" cut in two rows: the whole data is UTF-8, a row is not.
            (vec![&b"a"[..], b"\xc3", b"\xa9"], "offset 2 is inside a UTF-8 character"),
        ] {
            let bin: ArrayRef = Arc::new(arrow::array::BinaryArray::from(bytes));
            let mut out = Vec::new();
            write_block(bin.as_ref(), Codec::None, false, &mut out).unwrap();
            assert_eq!(read_block(&out, &DataType::Binary).unwrap().as_ref(), bin.as_ref());
            let e = read_block(&out, &DataType::Utf8).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
    }

    /// A dictionary block is checked through its entries: valid ones read back as strings,
    /// an entry that is not UTF-8 is an error naming the dictionary and the byte.
    #[test]
    fn dictionary_string_blocks_check_their_entries() {
        for (entries, bad) in [(vec![&b"ab"[..], "é".as_bytes(), b""], false), (vec![&b"ab"[..], b"\xff", b""], true)] {
            let rows: Vec<&[u8]> = (0..3000).map(|i| entries[i % 3]).collect();
            let bin: ArrayRef = Arc::new(arrow::array::BinaryArray::from(rows));
            let mut out = Vec::new();
            write_block(bin.as_ref(), Codec::None, true, &mut out).unwrap();
            assert_eq!(out[9], Encoding::Dict as u8);
            match read_block(&out, &DataType::Utf8) {
                Ok(s) => {
                    assert!(!bad);
                    assert_eq!(s.as_string::<i32>().iter().map(|v| v.unwrap().as_bytes()).collect::<Vec<_>>(), bin.as_binary::<i32>().iter().map(|v| v.unwrap()).collect::<Vec<_>>());
                }
                Err(e) => assert!(bad && e.contains("in dictionary: invalid UTF-8 at byte 2"), "{e}"),
            }
        }
    }

    /// A fixed-seed xorshift64 generator for test data.
    pub(super) fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    /// Frame-of-reference blocks of every bit width read back exactly, for signed and
    /// unsigned types of every size, at the ends of each type's range and with row counts
    /// that end a block's packed words part-way (the last values' loads fall short of 8
    /// bytes). The writer packs when that is smaller: at 8,191 rows and more, every width
    /// below the type's; 64 bits, which it never writes, from a block made by hand.
    #[test]
    fn for_blocks_of_every_bit_width_round_trip() {
        use arrow::array::{Int8Array, Int16Array, Int32Array, UInt8Array, UInt16Array, UInt32Array, UInt64Array};
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        for rows in [1usize, 7, 8_191, 8_192] {
            for bits in 1..=64u32 {
                let span = |w: u32| if bits >= w { u64::MAX >> (64 - w) } else { (1u64 << bits) - 1 };
                let raw: Vec<u64> = (0..rows).map(|i| match i % 5 { 0 => 0, 1 => u64::MAX, _ => next() }).collect();
                let arrs: Vec<ArrayRef> = vec![
                    Arc::new(Int64Array::from(raw.iter().map(|&r| i64::MIN.wrapping_add((r & span(64)) as i64)).collect::<Vec<_>>())),
                    Arc::new(Int64Array::from(raw.iter().map(|&r| i64::MAX.wrapping_sub((r & span(64)) as i64)).collect::<Vec<_>>())),
                    Arc::new(UInt64Array::from(raw.iter().map(|&r| r & span(64)).collect::<Vec<_>>())),
                    Arc::new(UInt64Array::from(raw.iter().map(|&r| u64::MAX - (r & span(64))).collect::<Vec<_>>())),
                    Arc::new(Int32Array::from(raw.iter().map(|&r| i32::MIN.wrapping_add((r & span(32)) as i32)).collect::<Vec<_>>())),
                    Arc::new(UInt32Array::from(raw.iter().map(|&r| (r & span(32)) as u32).collect::<Vec<_>>())),
                    Arc::new(Int16Array::from(raw.iter().map(|&r| i16::MAX.wrapping_sub((r & span(16)) as i16)).collect::<Vec<_>>())),
                    Arc::new(UInt16Array::from(raw.iter().map(|&r| (r & span(16)) as u16).collect::<Vec<_>>())),
                    Arc::new(Int8Array::from(raw.iter().map(|&r| i8::MIN.wrapping_add((r & span(8)) as i8)).collect::<Vec<_>>())),
                    Arc::new(UInt8Array::from(raw.iter().map(|&r| (r & span(8)) as u8).collect::<Vec<_>>())),
                ];
                for arr in arrs {
                    let mut out = Vec::new();
                    write_block(arr.as_ref(), Codec::None, true, &mut out).unwrap();
                    let back = read_block(&out, arr.data_type()).unwrap();
                    assert_eq!(back.as_ref(), arr.as_ref(), "{} rows, {bits} bits, {}, encoding {}", rows, arr.data_type(), out[9]);
                    let width = 8 * arr.data_type().primitive_width().unwrap() as u32;
                    if rows >= 8_191 && bits < width {
                        assert_eq!(out[9], Encoding::For as u8, "{rows} rows, {bits} bits, {}", arr.data_type());
                    }
                }
            }
        }
        // 64-bit packing, made by hand: lo = i64::MIN, 130 rows of `i * 0x0123_4567_89ab_cdef`.
        let rows = 130usize;
        let packed: Vec<u64> = (0..rows as u64).map(|i| i.wrapping_mul(0x0123_4567_89ab_cdef)).collect();
        let mut payload = vec![0u8];
        payload.extend_from_slice(&i128::from(i64::MIN).to_le_bytes());
        payload.push(64);
        packed.iter().for_each(|w| payload.extend_from_slice(&w.to_le_bytes()));
        let block = hand_block(Encoding::For, rows, &payload);
        let want: Vec<i64> = packed.iter().map(|&p| i64::MIN.wrapping_add(p as i64)).collect();
        assert_eq!(read_block(&block, &DataType::Int64).unwrap().as_primitive::<arrow::datatypes::Int64Type>().values().to_vec(), want);
        // Width 0 (one value) with a damaged row count: an error, not a 32 GiB array.
        let mut payload = vec![0u8];
        payload.extend_from_slice(&7i128.to_le_bytes());
        payload.push(0);
        let e = read_block(&hand_block(Encoding::For, u32::MAX as usize, &payload), &DataType::Int64).unwrap_err();
        assert!(e.contains("4294967295 rows of one value"), "{e}");
        let small = read_block(&hand_block(Encoding::For, 3, &payload), &DataType::Int64).unwrap();
        assert_eq!(small.as_primitive::<arrow::datatypes::Int64Type>().values().to_vec(), vec![7, 7, 7]);
    }

    /// An uncompressed block of `rows` rows in encoding `enc` holding `payload`, with its
    /// checksum.
    fn hand_block(enc: Encoding, rows: usize, payload: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; 8];
        b.push(Codec::None.id());
        b.push(enc as u8);
        b.extend_from_slice(&[0, 0]);
        b.extend_from_slice(&(rows as u32).to_le_bytes());
        b.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        b.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        b.extend_from_slice(payload);
        let sum = xxhash_rust::xxh3::xxh3_64(&b[8..]);
        b[..8].copy_from_slice(&sum.to_le_bytes());
        b
    }

    /// Dictionary blocks with 1-, 2- and 4-byte indexes (up to 70,000 entries) and NULLs
    /// read back as written, and their sizes are their entries' lengths; an index past the
    /// dictionary is an error naming it.
    #[test]
    fn dictionary_blocks_of_every_index_width_round_trip() {
        for (rows, distinct) in [(5_000usize, 7usize), (20_000, 3_000), (300_000, 70_000)] {
            // The first rows repeat a few values, or the writer gives the dictionary up.
            let value = |i: usize| if i < 8_192 { i % 10 } else { (i * 7_919) % distinct };
            let arr: ArrayRef = Arc::new(StringArray::from(
                (0..rows).map(|i| (i % 11 != 3).then(|| format!("v{}", value(i)))).collect::<Vec<_>>(),
            ));
            for codec in [Codec::None, Codec::Lz4] {
                let mut out = Vec::new();
                write_block(arr.as_ref(), codec, true, &mut out).unwrap();
                assert_eq!(out[9], Encoding::Dict as u8, "{rows} rows");
                assert_eq!(read_block(&out, &DataType::Utf8).unwrap().as_ref(), arr.as_ref());
                let sizes = read_block_sizes(&out, &DataType::Utf8, true).unwrap();
                let want: Vec<Option<u32>> = arr.as_string::<i32>().iter().map(|v| v.map(|v| v.len() as u32)).collect();
                assert_eq!(sizes.iter().collect::<Vec<_>>(), want);
            }
        }
        // Row 0's index set to the entry count (1-byte indexes, no NULLs, codec none).
        let arr: ArrayRef = Arc::new(StringArray::from((0..3_000).map(|i| format!("v{}", i % 5)).collect::<Vec<_>>()));
        let mut out = Vec::new();
        write_block(arr.as_ref(), Codec::None, true, &mut out).unwrap();
        let p = HEADER_LEN + 1;
        let n = u32_at(&out, p) as usize;
        let dict_len = u32_at(&out, p + 4 + 4 * n) as usize;
        out[p + 4 + 4 * (n + 1) + dict_len + 1] = n as u8;
        let sum = xxhash_rust::xxh3::xxh3_64(&out[8..]);
        out[..8].copy_from_slice(&sum.to_le_bytes());
        let e = read_block(&out, &DataType::Utf8).unwrap_err();
        assert!(e.contains("dictionary index 5 out of range (5 entries)"), "{e}");
        let e = read_block_sizes(&out, &DataType::Utf8, true).unwrap_err();
        assert!(e.contains("dictionary index 5 out of range (5 entries)"), "{e}");
        // One 1 MiB entry on 2,100 rows: 2.2 GB of values, past 32-bit offsets, for both.
        let mut payload = vec![0u8];
        payload.extend_from_slice(&1u32.to_le_bytes());
        payload.extend_from_slice(&0u32.to_le_bytes());
        payload.extend_from_slice(&(1u32 << 20).to_le_bytes());
        payload.resize(payload.len() + (1 << 20), b'a');
        payload.push(1);
        payload.resize(payload.len() + 2_100, 0);
        let block = hand_block(Encoding::Dict, 2_100, &payload);
        assert!(read_block(&block, &DataType::Utf8).unwrap_err().contains("longer than 2 GiB"));
        assert!(read_block_sizes(&block, &DataType::Utf8, true).unwrap_err().contains("longer than 2 GiB"));
    }

    /// A compressed block whose checksum is right but whose header declares a payload
    /// size other than what its LZ4 or Zstandard stream holds (a writer bug, or bytes made
    /// to look valid) is an error from the codec's step, never a panic or an array of
    /// other length; the same for a stream cut short.
    #[test]
    fn compressed_blocks_must_hold_the_declared_payload() {
        let arr: ArrayRef = Arc::new(StringArray::from((0..2_000).map(|i| format!("https://example.com/{}", i * 7919)).collect::<Vec<_>>()));
        let reseal = |b: &mut Vec<u8>| {
            let h = xxhash_rust::xxh3::xxh3_64(&b[8..]);
            b[..8].copy_from_slice(&h.to_le_bytes());
        };
        for codec in [Codec::Lz4, Codec::Zstd(3)] {
            let mut good = Vec::new();
            write_block(arr.as_ref(), codec, false, &mut good).unwrap();
            let plen = u32_at(&good, 16);
            for declared in [0, 1, plen - 1, plen + 1, plen * 2] {
                let mut b = good.clone();
                b[16..20].copy_from_slice(&declared.to_le_bytes());
                reseal(&mut b);
                let e = read_block(&b, &DataType::Utf8).unwrap_err();
                assert!(e.contains("lz4") || e.contains("zstd"), "{codec:?}, {declared} of {plen} bytes: {e}");
            }
            // The stream cut short (the stored size follows, the checksum is made right).
            let mut b = good.clone();
            let stored = u32_at(&b, 20);
            b.truncate(b.len() - 10);
            b[20..24].copy_from_slice(&(stored - 10).to_le_bytes());
            reseal(&mut b);
            assert!(read_block(&b, &DataType::Utf8).is_err(), "{codec:?} cut short");
        }
    }

    /// [`read_block_sizes`] gives the lengths [`read_block`]'s values have, NULLs as 0
    /// with their validity, for plain and dictionary blocks, strings and binaries, every
    /// codec; a plain block whose offsets disagree with its declared payload is an error.
    #[test]
    fn block_sizes_are_the_value_lengths() {
        let strs: ArrayRef = Arc::new(StringArray::from(
            (0..9_000).map(|i| (i % 13 != 4).then(|| "é/".repeat(i % 40) + &i.to_string())).collect::<Vec<_>>(),
        ));
        let dict: ArrayRef = Arc::new(StringArray::from((0..9_000).map(|i| format!("v{}", i % 7)).collect::<Vec<_>>()));
        let bins: ArrayRef =
            Arc::new(BinaryArray::from_iter((0..3_000).map(|i| (i % 5 != 0).then(|| vec![0xffu8; i % 70]))));
        let empty: ArrayRef = Arc::new(StringArray::from(Vec::<&str>::new()));
        for arr in [strs, dict, bins, empty] {
            for codec in [Codec::None, Codec::Lz4, Codec::Zstd(3)] {
                for encode in [false, true] {
                    let mut out = Vec::new();
                    write_block(arr.as_ref(), codec, encode, &mut out).unwrap();
                    let sizes = read_block_sizes(&out, arr.data_type(), true).unwrap();
                    assert_eq!(sizes, sizes_of(read_block(&out, arr.data_type()).unwrap().as_ref()).unwrap());
                    assert_eq!(sizes.len(), arr.len());
                    assert_eq!(sizes.null_count(), arr.null_count());
                }
            }
        }
        // A plain block whose header declares one payload byte more than its offsets say.
        let small: ArrayRef = Arc::new(StringArray::from(vec!["abc", "", "de"]));
        let mut out = Vec::new();
        write_block(small.as_ref(), Codec::None, false, &mut out).unwrap();
        out.push(b'x');
        let plen = u32_at(&out, 16) + 1;
        out[16..20].copy_from_slice(&plen.to_le_bytes());
        let stored = u32_at(&out, 20) + 1;
        out[20..24].copy_from_slice(&stored.to_le_bytes());
        let sum = xxhash_rust::xxh3::xxh3_64(&out[8..]);
        out[..8].copy_from_slice(&sum.to_le_bytes());
        assert!(read_block_sizes(&out, &DataType::Utf8, true).unwrap_err().contains("offsets"));
    }

    #[test]
    fn codec_names_parse() {
        assert_eq!(Codec::parse("ZSTD(9)"), Some(Codec::Zstd(9)));
        assert_eq!(Codec::parse("zstd"), Some(Codec::Zstd(3)));
        assert_eq!(Codec::parse("lz4"), Some(Codec::Lz4));
        assert_eq!(Codec::parse("zstd(99)"), None);
    }
}
