//! Compressed, checksummed blocks: one block holds the values of consecutive granules of
//! one column, lightly encoded (plain, dictionary or frame-of-reference bit-packing), then
//! compressed with the column's codec. See the crate docs for the byte layout.
//!
//! Decoding never trusts the bytes: every length and index is checked, and the checksum is
//! verified before anything else is read (by the part reader the first time a process
//! reads a block: see `Part::verified`). Errors come back as a detail string that the
//! caller wraps with the file, part, column and byte offset.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BinaryArray, PrimitiveArray, StringArray};
use arrow::buffer::{BooleanBuffer, Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow::datatypes::{ArrowPrimitiveType, DataType, Float32Type, Float64Type};
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
}


/// Integer natives as i128 and back (values always fit: they came from the same type).
pub(crate) trait IntNative: Copy {
    fn to_i128(self) -> i128;
    fn from_i128(v: i128) -> Self;
}

macro_rules! int_native {
    ($($t:ty),*) => {$(
        impl IntNative for $t {
            #[inline]
            fn to_i128(self) -> i128 { self as i128 }
            #[inline]
            fn from_i128(v: i128) -> Self { v as $t }
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

/// Appends one block holding all of `arr` to `out`. `encode` allows dictionary and
/// frame-of-reference encodings (each used only where it makes the block smaller) and
/// strings stored with their lengths ([`Encoding::Sized`]); without it blocks are plain.
///
/// # Errors
/// A message if the codec fails (only possible for zstd with a bad level).
pub(crate) fn write_block(arr: &dyn Array, codec: Codec, encode: bool, out: &mut Vec<u8>) -> Result<(), String> {
    let rows = arr.len();
    let mut p = Vec::with_capacity(plain_size(arr) + rows / 8 + 16);
    match arr.logical_nulls().filter(|n| n.null_count() > 0) {
        Some(nulls) => {
            p.push(1);
            let mut bits = vec![0u8; rows.div_ceil(8)];
            for (i, valid) in nulls.iter().enumerate() {
                bits[i / 8] |= (valid as u8) << (i % 8);
            }
            p.extend_from_slice(&bits);
        }
        None => p.push(0),
    }
    let enc = tessera_common::int_like_dispatch!(arr.data_type(), A => encode_ints::<A>(arr, encode, &mut p), _ => {
        match fixed_width(arr.data_type()) {
            Some(_) => {
                let data = arr.to_data();
                let w = fixed_width(arr.data_type()).unwrap_or(1);
                p.extend_from_slice(&data.buffers()[0].as_slice()[data.offset() * w..(data.offset() + rows) * w]);
                Encoding::Plain
            }
            None => encode_var(arr, encode, &mut p),
        }
    });
    let stored: std::borrow::Cow<'_, [u8]> = match codec {
        Codec::None => p.as_slice().into(),
        Codec::Lz4 => lz4_flex::block::compress(&p).into(),
        Codec::Zstd(level) => zstd::bulk::compress(&p, level).map_err(|e| format!("zstd level {level}: {e}"))?.into(),
    };
    let start = out.len();
    out.extend_from_slice(&[0u8; 8]);
    out.push(codec.id());
    out.push(enc as u8);
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&(rows as u32).to_le_bytes());
    out.extend_from_slice(&(p.len() as u32).to_le_bytes());
    out.extend_from_slice(&(stored.len() as u32).to_le_bytes());
    out.extend_from_slice(&stored);
    let sum = xxhash_rust::xxh3::xxh3_64(&out[start + 8..]);
    out[start..start + 8].copy_from_slice(&sum.to_le_bytes());
    Ok(())
}

fn encode_ints<A: ArrowPrimitiveType>(arr: &dyn Array, encode: bool, p: &mut Vec<u8>) -> Encoding
where
    A::Native: IntNative,
{
    let a = arr.as_primitive::<A>();
    let vals: &[A::Native] = a.values();
    if encode && !vals.is_empty() {
        let (mut lo, mut hi) = (vals[0].to_i128(), vals[0].to_i128());
        for v in vals {
            let v = v.to_i128();
            lo = lo.min(v);
            hi = hi.max(v);
        }
        let bits = 128 - ((hi - lo) as u128).leading_zeros() as usize;
        let packed = (vals.len() * bits).div_ceil(64) * 8 + 17;
        if packed < std::mem::size_of_val(vals) {
            p.extend_from_slice(&lo.to_le_bytes());
            p.push(bits as u8);
            let mut acc: u128 = 0;
            let mut n = 0usize;
            for v in vals {
                acc |= ((v.to_i128() - lo) as u128) << n;
                n += bits;
                if n >= 64 {
                    p.extend_from_slice(&(acc as u64).to_le_bytes());
                    acc >>= 64;
                    n -= 64;
                }
            }
            if n > 0 {
                p.extend_from_slice(&(acc as u64).to_le_bytes());
            }
            return Encoding::For;
        }
    }
    p.extend_from_slice(a.values().inner().as_slice());
    Encoding::Plain
}

/// Rows after which a block whose values are more than 3/4 distinct stays plain.
const DICT_SAMPLE: usize = 4096;

fn encode_var(arr: &dyn Array, encode: bool, p: &mut Vec<u8>) -> Encoding {
    let (offs, values) = var_parts(arr);
    let rows = arr.len();
    let base = offs[0];
    let value = |i: usize| &values[offs[i] as usize..offs[i + 1] as usize];
    if encode && rows > 0 {
        // Dictionary: distinct values in order of first appearance, then one index per row.
        // The table holds dictionary ids, hashed by their value's xxh3 (no SipHash, no key
        // copies); a first sample of mostly distinct values gives up early (unique strings
        // such as URLs or ids would otherwise hash half the block before giving up).
        let mut ids: hashbrown::HashTable<u32> = hashbrown::HashTable::with_capacity(rows.min(DICT_SAMPLE));
        let mut dict: Vec<&[u8]> = Vec::new();
        let mut dict_bytes = 0usize;
        let plain = (offs[rows] - base) as usize + 4 * (rows + 1);
        let mut idx = Vec::with_capacity(rows);
        let mut gave_up = false;
        for i in 0..rows {
            let v = value(i);
            let h = xxhash_rust::xxh3::xxh3_64(v);
            let id = match ids.find(h, |&id| dict[id as usize] == v) {
                Some(&id) => id,
                None => {
                    let id = dict.len() as u32;
                    dict.push(v);
                    dict_bytes += v.len();
                    ids.insert_unique(h, id, |&id| xxhash_rust::xxh3::xxh3_64(dict[id as usize]));
                    id
                }
            };
            idx.push(id);
            if dict_bytes + 4 * dict.len() > plain / 2 || (i + 1 == DICT_SAMPLE && dict.len() * 4 > DICT_SAMPLE * 3) {
                gave_up = true;
                break;
            }
        }
        let width = match dict.len() {
            0..=256 => 1,
            257..=65_536 => 2,
            _ => 4,
        };
        if !gave_up && dict_bytes + 4 * (dict.len() + 1) + width * rows + 5 < plain {
            p.extend_from_slice(&(dict.len() as u32).to_le_bytes());
            let mut off = 0u32;
            p.extend_from_slice(&off.to_le_bytes());
            for d in &dict {
                off += d.len() as u32;
                p.extend_from_slice(&off.to_le_bytes());
            }
            for d in &dict {
                p.extend_from_slice(d);
            }
            p.push(width as u8);
            for id in idx {
                p.extend_from_slice(&id.to_le_bytes()[..width]);
            }
            return Encoding::Dict;
        }
    }
    // Lengths, not offsets, in one or two bytes when every value is that short: an 8-byte
    // value took 12 bytes with its u32 offset, and offsets that only grow compress badly
    // (LZ4 was 41% of the samples of loading 30M `toString(number)` values).
    let longest = || offs.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
    let width = match encode.then(longest) {
        Some(0..=0xff) => 1,
        Some(0x100..=0xffff) => 2,
        _ => 0,
    };
    if width == 0 {
        for &o in offs {
            p.extend_from_slice(&((o - base) as u32).to_le_bytes());
        }
        p.extend_from_slice(&values[base as usize..offs[rows] as usize]);
        return Encoding::Plain;
    }
    p.push(width as u8);
    if width == 1 {
        p.extend(offs.windows(2).map(|w| (w[1] - w[0]) as u8));
    } else {
        for w in offs.windows(2) {
            p.extend_from_slice(&((w[1] - w[0]) as u16).to_le_bytes());
        }
    }
    p.extend_from_slice(&values[base as usize..offs[rows] as usize]);
    Encoding::Sized
}

/// The offsets (from 0) of the `rows` values of a plain or sized string block (`enc`), read
/// from `r`: u32 offsets, or a width byte and lengths ([`Encoding::Sized`]). The last
/// offset is the length of the value bytes that follow (unchecked).
fn var_offsets(r: &mut Reader<'_>, rows: usize, enc: u8) -> DResult<Vec<u32>> {
    if enc == Encoding::Plain as u8 {
        return r.u32s(rows + 1);
    }
    if enc != Encoding::Sized as u8 {
        return Err(format!("encoding {enc} is not a plain or sized string block"));
    }
    let width = r.u8()? as usize;
    let lens = match width {
        1 | 2 => r.take(rows.checked_mul(width).ok_or("length overflow")?)?,
        w => return Err(format!("bad length width {w}")),
    };
    let mut offs = Vec::with_capacity(rows + 1);
    offs.push(0u32);
    // At most 2^16 - 1 bytes a value and 2^32 - 1 rows: the sum fits a u64.
    let mut end = 0u64;
    if width == 1 {
        offs.extend(lens.iter().map(|&l| {
            end += u64::from(l);
            end as u32
        }));
    } else {
        offs.extend(lens.chunks_exact(2).map(|c| {
            end += u64::from(u16::from_le_bytes([c[0], c[1]]));
            end as u32
        }));
    }
    if end > i32::MAX as u64 {
        return Err("string data longer than 2 GiB".into());
    }
    Ok(offs)
}

/// Reads bytes of a payload with bounds checks.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> DResult<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len()).ok_or_else(|| {
            format!("payload too short: need {n} bytes at payload offset {} of {}", self.pos, self.buf.len())
        })?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self) -> DResult<u8> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> DResult<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }
    fn u32s(&mut self, n: usize) -> DResult<Vec<u32>> {
        let b = self.take(n.checked_mul(4).ok_or("length overflow")?)?;
        Ok(b.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes"))).collect())
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

/// Decodes the block at the start of `buf` as an array of type `dt`. Verifies the checksum
/// first.
pub(crate) fn read_block(buf: &[u8], dt: &DataType) -> DResult<ArrayRef> {
    decode_block(buf, dt, true)
}

/// [`read_block`], verifying the checksum only when `verify` (a block this process
/// verified already is not hashed again: see `Part::verified`). Every length, offset and
/// index is checked either way.
pub(crate) fn decode_block(buf: &[u8], dt: &DataType, verify: bool) -> DResult<ArrayRef> {
    let (enc, rows, payload) = open_block(buf, verify)?;
    decode_payload(payload.bytes(), payload.whole(), rows, enc, dt)
}

/// The payload of a block: its stored bytes (codec none) or the decompressed ones, as an
/// Arrow buffer that plain string values can be sliced out of without a copy.
enum Payload<'a> {
    Stored(&'a [u8]),
    Decoded(Buffer),
}

impl Payload<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Payload::Stored(b) => b,
            Payload::Decoded(b) => b.as_slice(),
        }
    }

    /// The buffer the payload is, when it is one.
    fn whole(&self) -> Option<&Buffer> {
        match self {
            Payload::Stored(_) => None,
            Payload::Decoded(b) => Some(b),
        }
    }
}

/// The encoding, row count and payload of the block at the start of `buf`, its checksum
/// verified first when `verify`.
fn open_block(buf: &[u8], verify: bool) -> DResult<(u8, usize, Payload<'_>)> {
    let len = block_len(buf)?;
    if verify {
        check_sum(buf, len)?;
    }
    let codec = buf[8];
    let enc = buf[9];
    let rows = u32_at(buf, 12) as usize;
    let plen = u32_at(buf, 16) as usize;
    if plen > MAX_PAYLOAD {
        return Err(format!("block declares {plen} payload bytes"));
    }
    let stored = &buf[HEADER_LEN..len];
    if codec == 1 && plen > stored.len().saturating_mul(255).saturating_add(16) {
        return Err(format!("block declares {plen} payload bytes from {} LZ4 bytes", stored.len()));
    }
    // Both codecs decode into fresh capacity of `plen` bytes (a zero-filled buffer was 3% of
    // `AVG(length(URL))`, Q28, from disk at 100M rows) and write at most that much: more is
    // the codec's error, less is checked here.
    let (name, out) = match codec {
        0 => return Ok((enc, rows, Payload::Stored(stored))),
        1 => ("lz4", lz4_flex::block::decompress(stored, plen).map_err(|e| format!("lz4: {e}"))?),
        2 => ("zstd", zstd::bulk::decompress(stored, plen).map_err(|e| format!("zstd: {e}"))?),
        c => return Err(format!("unknown codec id {c}")),
    };
    if out.len() != plen {
        return Err(format!("{name} gave {} bytes, header says {plen}", out.len()));
    }
    Ok((enc, rows, Payload::Decoded(Buffer::from_vec(out))))
}

/// Checks the stored checksum of the `len`-byte block at the start of `buf`.
fn check_sum(buf: &[u8], len: usize) -> DResult<()> {
    let want = u64::from_le_bytes(buf[..8].try_into().expect("8 bytes"));
    let got = xxhash_rust::xxh3::xxh3_64(&buf[8..len]);
    if want != got {
        return Err(format!("block checksum mismatch (stored {want:016x}, computed {got:016x})"));
    }
    Ok(())
}

/// The byte length of each value of the string or binary block at the start of `buf` (NULL
/// where the value is NULL), without decoding its values where the layout allows:
/// a plain (or sized) block's payload starts with the NULL bitmap and the value offsets (or
/// lengths), so only that prefix is decompressed (an LZ4 block decoded up to there,
/// [`lz4_prefix`]; a URL block of 8,192 rows decompresses 33 KB of its ~750 KB); a
/// dictionary block's lengths are its entries' lengths looked up by the row indexes, its
/// values never built. Zstandard blocks are decoded whole. ClickHouse reads the `.size`
/// subcolumn of a String for `length(s)` and `s = ''` the same way (its sizes are a
/// separate stream). Verifies the checksum first; a plain or sized block's last offset
/// must be the length of the value bytes its header implies, a dictionary block's values
/// must fit 2 GiB as when decoded. `verify`: as [`decode_block`]'s.
pub(crate) fn read_block_sizes(buf: &[u8], dt: &DataType, verify: bool) -> DResult<arrow::array::UInt32Array> {
    let len = block_len(buf)?;
    let (codec, enc, rows, plen) = (buf[8], buf[9], u32_at(buf, 12) as usize, u32_at(buf, 16) as usize);
    let sized = enc == Encoding::Sized as u8;
    if matches!(dt, DataType::Utf8 | DataType::Binary) && enc == Encoding::Dict as u8 {
        // Each row's length is its entry's: the values are never built.
        let (_, rows, payload) = open_block(buf, verify)?;
        let mut r = Reader { buf: payload.bytes(), pos: 0 };
        let nulls = read_nulls(&mut r, rows)?;
        let dict = Dict::read(&mut r, rows)?;
        if r.pos != r.buf.len() {
            return Err(format!("{} trailing payload bytes", r.buf.len() - r.pos));
        }
        let sizes: Vec<u32> = dict.ids.iter().map(|&id| dict.lens[id as usize]).collect();
        return Ok(arrow::array::UInt32Array::new(ScalarBuffer::from(sizes), nulls));
    }
    if !matches!(dt, DataType::Utf8 | DataType::Binary) || !(sized || enc == Encoding::Plain as u8) || !matches!(codec, 0 | 1) {
        let arr = decode_block(buf, dt, verify)?;
        return sizes_of(arr.as_ref());
    }
    if verify {
        check_sum(buf, len)?;
    }
    if plen > MAX_PAYLOAD {
        return Err(format!("block declares {plen} payload bytes"));
    }
    let stored = &buf[HEADER_LEN..len];
    // At most the flag, a full bitmap and the offsets (or the width and lengths).
    let lengths = if sized { rows.saturating_mul(2).saturating_add(1) } else { rows.saturating_add(1).saturating_mul(4) };
    let head = rows.div_ceil(8).saturating_add(1).saturating_add(lengths).min(plen);
    let decoded;
    let prefix: &[u8] = if codec == 0 {
        if stored.len() != plen {
            return Err(format!("uncompressed block holds {} bytes, header says {plen}", stored.len()));
        }
        &stored[..head]
    } else {
        decoded = lz4_prefix(stored, head, plen)?;
        &decoded
    };
    let mut r = Reader { buf: prefix, pos: 0 };
    let nulls = read_nulls(&mut r, rows)?;
    let offs = var_offsets(&mut r, rows, enc)?;
    let bytes = plen - r.pos;
    check_offsets(&offs, bytes)?;
    let sizes: Vec<u32> = offs.windows(2).map(|w| w[1] - w[0]).collect();
    Ok(arrow::array::UInt32Array::new(ScalarBuffer::from(sizes), nulls))
}

/// The byte lengths of the values of a string or binary array (NULL where the value is),
/// as [`read_block_sizes`] gives them.
pub(crate) fn sizes_of(arr: &dyn Array) -> DResult<arrow::array::UInt32Array> {
    let (offs, _) = match arr.data_type() {
        DataType::Utf8 | DataType::Binary => var_parts(arr),
        other => return Err(format!("sizes of a {other} column")),
    };
    let sizes: Vec<u32> = offs.windows(2).map(|w| (w[1] - w[0]) as u32).collect();
    Ok(arrow::array::UInt32Array::new(ScalarBuffer::from(sizes), arr.logical_nulls()))
}

/// The first `at_least` bytes (or a few more, never past `capacity`) of the payload of
/// the LZ4 block `src` (the block format lz4_flex writes: sequences of a token, literals,
/// a 2-byte match offset and a match length), decoded sequence by sequence and stopped
/// once enough is out (a match is copied only up to `at_least`). Every length and offset is
/// checked against `src` and the output, and no more than LZ4's largest ratio (255:1) of
/// `src` is ever asked for.
pub(crate) fn lz4_prefix(src: &[u8], at_least: usize, capacity: usize) -> DResult<Vec<u8>> {
    let corrupt = |what: &str| format!("lz4: {what}");
    if at_least > src.len().saturating_mul(255).saturating_add(16) {
        return Err(corrupt("more bytes wanted than the block can hold"));
    }
    let mut out: Vec<u8> = Vec::with_capacity(at_least.min(capacity) + 64);
    let mut i = 0usize;
    let length = |i: &mut usize, base: usize| -> DResult<usize> {
        let mut n = base;
        if base == 15 {
            loop {
                let b = *src.get(*i).ok_or_else(|| corrupt("truncated length"))?;
                *i += 1;
                n = n.checked_add(b as usize).ok_or_else(|| corrupt("length overflow"))?;
                if b != 255 {
                    break;
                }
            }
        }
        Ok(n)
    };
    while out.len() < at_least {
        let token = *src.get(i).ok_or_else(|| corrupt("block ends before the wanted bytes"))?;
        i += 1;
        let lits = length(&mut i, (token >> 4) as usize)?;
        let lit = src.get(i..i.checked_add(lits).ok_or_else(|| corrupt("length overflow"))?).ok_or_else(|| corrupt("truncated literals"))?;
        if out.len() + lits > capacity {
            return Err(corrupt("more bytes than the header declares"));
        }
        out.extend_from_slice(lit);
        i += lits;
        if out.len() >= at_least || i == src.len() {
            break;
        }
        let off = src.get(i..i + 2).ok_or_else(|| corrupt("truncated match offset"))?;
        let off = u16::from_le_bytes([off[0], off[1]]) as usize;
        i += 2;
        if off == 0 || off > out.len() {
            return Err(corrupt("match offset outside the output"));
        }
        let n = length(&mut i, (token & 15) as usize)?.checked_add(4).ok_or_else(|| corrupt("length overflow"))?;
        if out.len() + n > capacity {
            return Err(corrupt("more bytes than the header declares"));
        }
        // Only what is still wanted of it. The match may overlap what it produces (offset
        // < length): copied in strides of the offset (one byte repeated at offset 1).
        let n = n.min(at_least - out.len());
        let start = out.len() - off;
        if off == 1 {
            let b = out[start];
            out.resize(out.len() + n, b);
            continue;
        }
        let mut done = 0;
        while done < n {
            let k = (n - done).min(off);
            out.extend_from_within(start + done..start + done + k);
            done += k;
        }
    }
    if out.len() < at_least {
        return Err(corrupt("block ends before the wanted bytes"));
    }
    Ok(out)
}

/// The null flag and bitmap that start every payload: `None` when the block has no NULLs.
fn read_nulls(r: &mut Reader<'_>, rows: usize) -> DResult<Option<NullBuffer>> {
    match r.u8()? {
        0 => Ok(None),
        1 => Ok(Some(NullBuffer::new(BooleanBuffer::new(Buffer::from_slice_ref(r.take(rows.div_ceil(8))?), 0, rows)))),
        f => Err(format!("bad null flag {f}")),
    }
}

/// A dictionary-encoded string block's dictionary and row indexes, checked: the entries'
/// offsets run monotonic from 0 to the length of `bytes`, every index names an entry, and
/// the rows' values add up to at most 2 GiB (`i32` offsets).
struct Dict<'a> {
    /// Offsets of the entries in `bytes` (entries + 1 of them).
    offs: Vec<u32>,
    /// Length of each entry.
    lens: Vec<u32>,
    bytes: &'a [u8],
    /// Each row's entry.
    ids: Vec<u32>,
    /// Bytes of all the rows' values.
    total: usize,
}

impl<'a> Dict<'a> {
    /// Reads the dictionary (entry count, offsets, bytes) and the `rows` indexes (a width
    /// byte, then 1, 2 or 4 bytes each) from `r`.
    fn read(r: &mut Reader<'a>, rows: usize) -> DResult<Self> {
        let n = r.u32()? as usize;
        let offs = r.u32s(n.checked_add(1).ok_or("length overflow")?)?;
        let len = *offs.last().unwrap_or(&0) as usize;
        check_offsets(&offs, len)?;
        let bytes = r.take(len)?;
        let width = r.u8()? as usize;
        let idx = match width {
            1 | 2 | 4 => r.take(rows.checked_mul(width).ok_or("length overflow")?)?,
            w => return Err(format!("bad dictionary index width {w}")),
        };
        // One loop per width (the generic one copied each index through a 4-byte array).
        let ids: Vec<u32> = match width {
            1 => idx.iter().map(|&b| u32::from(b)).collect(),
            2 => idx.chunks_exact(2).map(|c| u32::from(u16::from_le_bytes([c[0], c[1]]))).collect(),
            _ => idx.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
        };
        if let Some(&id) = ids.iter().max().filter(|&&id| id as usize >= n) {
            return Err(format!("dictionary index {id} out of range ({n} entries)"));
        }
        let lens: Vec<u32> = offs.windows(2).map(|w| w[1] - w[0]).collect();
        // At most 2^32 rows of at most 2^31 bytes: the sum fits a u64.
        let total: u64 = ids.iter().map(|&id| u64::from(lens[id as usize])).sum();
        if total > i32::MAX as u64 {
            return Err("string data longer than 2 GiB".into());
        }
        Ok(Dict { offs, lens, bytes, ids, total: total as usize })
    }
}

/// Decodes a payload; `whole` is the buffer `payload` spans, when there is one.
fn decode_payload(payload: &[u8], whole: Option<&Buffer>, rows: usize, enc: u8, dt: &DataType) -> DResult<ArrayRef> {
    let mut r = Reader { buf: payload, pos: 0 };
    let nulls = read_nulls(&mut r, rows)?;
    let arr = tessera_common::int_like_dispatch!(dt, A => decode_ints::<A>(&mut r, rows, enc, nulls)?, _ => match dt {
        DataType::Float32 => plain_prim::<Float32Type>(&mut r, rows, enc, nulls)?,
        DataType::Float64 => plain_prim::<Float64Type>(&mut r, rows, enc, nulls)?,
        DataType::Utf8 | DataType::Binary => decode_var(&mut r, whole, rows, enc, nulls, dt)?,
        other => return Err(format!("type {other} is not stored by this format")),
    });
    if r.pos != payload.len() {
        return Err(format!("{} trailing payload bytes", payload.len() - r.pos));
    }
    Ok(arr)
}

fn plain_prim<A: ArrowPrimitiveType>(r: &mut Reader<'_>, rows: usize, enc: u8, nulls: Option<NullBuffer>) -> DResult<ArrayRef> {
    if enc != Encoding::Plain as u8 {
        return Err(format!("encoding {enc} is not valid for {}", A::DATA_TYPE));
    }
    let w = std::mem::size_of::<A::Native>();
    let bytes = r.take(rows.checked_mul(w).ok_or("length overflow")?)?;
    let values = ScalarBuffer::<A::Native>::new(Buffer::from_slice_ref(bytes), 0, rows);
    Ok(Arc::new(PrimitiveArray::<A>::new(values, nulls).with_data_type(A::DATA_TYPE)))
}

fn decode_ints<A: ArrowPrimitiveType>(r: &mut Reader<'_>, rows: usize, enc: u8, nulls: Option<NullBuffer>) -> DResult<ArrayRef>
where
    A::Native: IntNative,
{
    if enc != Encoding::For as u8 {
        return plain_prim::<A>(r, rows, enc, nulls);
    }
    let lo = i128::from_le_bytes(r.take(16)?.try_into().expect("16 bytes"));
    let bits = r.u8()? as usize;
    if bits > 64 {
        return Err(format!("bit width {bits} > 64"));
    }
    let words = r.take((rows.checked_mul(bits).ok_or("length overflow")?).div_ceil(64) * 8)?;
    // Values are `lo + packed` in `i128`, cut to the type (at most 64 bits: `IntNative`),
    // so the low 64 bits of the sum, wrapping `u64` arithmetic on `lo`'s low bits, give the
    // same value.
    let base = lo as u64;
    // One value repeated (width 0) is the only encoding whose rows the payload does not
    // bound, so bound the array as payloads are (a damaged row count must not ask for 32 GiB).
    if bits == 0 && rows.saturating_mul(std::mem::size_of::<A::Native>()) > MAX_PAYLOAD {
        return Err(format!("block declares {rows} rows of one value: more than {MAX_PAYLOAD} bytes decoded"));
    }
    let mut out: Vec<A::Native> = Vec::with_capacity(rows);
    if bits == 0 {
        out.resize(rows, A::Native::from_i128(lo));
    } else {
        // Each value from one unaligned load at its first bit's byte: 8 bytes hold it and
        // the up to 7 bits before it for widths up to 56, 16 bytes beyond. No state carries
        // from row to row (an accumulator refilled a word at a time did, and was most of a
        // 63-bit `UserID` block's decoding).
        let mask = u64::MAX >> (64 - bits);
        if bits <= 56 {
            out.extend((0..rows).map(|i| {
                let bit = i * bits;
                let v = (u64::from_le_bytes(load_le(words, bit / 8)) >> (bit % 8)) & mask;
                A::Native::from_i128(base.wrapping_add(v) as i128)
            }));
        } else {
            out.extend((0..rows).map(|i| {
                let bit = i * bits;
                let v = (u128::from_le_bytes(load_le(words, bit / 8)) >> (bit % 8)) as u64 & mask;
                A::Native::from_i128(base.wrapping_add(v) as i128)
            }));
        }
    }
    Ok(Arc::new(PrimitiveArray::<A>::new(ScalarBuffer::from(out), nulls).with_data_type(A::DATA_TYPE)))
}

/// The `N` bytes of `words` from `at`, zero past its end (a block's last packed values).
#[inline(always)]
fn load_le<const N: usize>(words: &[u8], at: usize) -> [u8; N] {
    match words.get(at..at + N) {
        Some(w) => w.try_into().expect("N bytes"),
        None => {
            let mut w = [0u8; N];
            let tail = &words[at.min(words.len())..];
            w[..tail.len()].copy_from_slice(tail);
            w
        }
    }
}

fn check_offsets(offs: &[u32], len: usize) -> DResult<()> {
    if offs.first() != Some(&0) || offs.windows(2).any(|w| w[0] > w[1]) || offs.last().is_some_and(|&l| l as usize != len) {
        return Err("string offsets are not monotonic from 0 to the data length".into());
    }
    if len > i32::MAX as usize {
        return Err("string data longer than 2 GiB".into());
    }
    Ok(())
}

fn decode_var(
    r: &mut Reader<'_>,
    whole: Option<&Buffer>,
    rows: usize,
    enc: u8,
    nulls: Option<NullBuffer>,
    dt: &DataType,
) -> DResult<ArrayRef> {
    // Utf8 columns validate UTF-8 once per block (`utf8_ok`): a dictionary block its
    // dictionary's entries, not every row; a plain one its whole data.
    let mut utf8_ok = false;
    let (offsets, values): (Vec<i32>, Buffer) = if enc == Encoding::Dict as u8 {
        let dict = Dict::read(r, rows)?;
        if *dt == DataType::Utf8 {
            // The dictionary's entries, checked as a plain block's rows are (below).
            let entries: Vec<i32> = dict.offs.iter().map(|&o| o as i32).collect();
            tessera_common::bytes::check_utf8_rows(&entries, dict.bytes)
                .map_err(|e| format!("bad string data in dictionary: {e}"))?;
            utf8_ok = true;
        }
        // The offsets first (each row's entry length added up), then the bytes into a
        // buffer of exactly their length: no growth, and short entries copied without a
        // `memcpy` call.
        let mut offsets = Vec::with_capacity(rows + 1);
        offsets.push(0i32);
        // Never past `dict.total` <= i32::MAX (`Dict::read`).
        let mut end = 0i32;
        for &id in &dict.ids {
            end += dict.lens[id as usize] as i32;
            offsets.push(end);
        }
        let mut values: Vec<u8> = Vec::with_capacity(dict.total);
        let dst = values.as_mut_ptr();
        for (&id, &at) in dict.ids.iter().zip(&offsets) {
            let start = dict.offs[id as usize] as usize;
            let entry = &dict.bytes[start..start + dict.lens[id as usize] as usize];
            // SAFETY: `at` is the sum of the lengths of the rows before this one, and `at +
            // entry.len()` of those up to it, at most `dict.total`, the capacity of `values`,
            // so the write stays inside its allocation; `entry` lies in the block's payload,
            // not in `values`.
            unsafe { tessera_common::bytes::copy_bytes(dst.add(at as usize), entry) };
        }
        // SAFETY: the loop above wrote every byte of `0..dict.total`: each row's range
        // `offsets[i]..offsets[i + 1]`, and those ranges tile it.
        unsafe { values.set_len(dict.total) };
        (offsets, Buffer::from_vec(values))
    } else if enc == Encoding::Plain as u8 || enc == Encoding::Sized as u8 {
        let offs = var_offsets(r, rows, enc)?;
        let len = *offs.last().unwrap_or(&0) as usize;
        check_offsets(&offs, len)?;
        let start = r.pos;
        let bytes = r.take(len)?;
        let offs: Vec<i32> = offs.into_iter().map(|o| o as i32).collect();
        if *dt == DataType::Utf8 {
            // Every row is UTF-8 (one SIMD check of the whole data and a scan of the offsets).
            tessera_common::bytes::check_utf8_rows(&offs, bytes).map_err(|e| format!("bad string data: {e}"))?;
            utf8_ok = true;
        }
        let values = match whole {
            Some(b) => b.slice_with_length(start, len),
            None => Buffer::from_slice_ref(bytes),
        };
        (offs, values)
    } else {
        return Err(format!("encoding {enc} is not valid for {dt}"));
    };
    let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
    if utf8_ok {
        if nulls.as_ref().is_some_and(|n| n.len() != rows) || offsets.len() != rows + 1 {
            return Err("null bitmap or offsets do not match the row count".into());
        }
        // SAFETY: `new_unchecked` needs offsets that are monotonic, start within and end
        // within `values`, lie on UTF-8 char boundaries, and delimit valid UTF-8; and a null
        // buffer of the array's length. (1) Dictionary blocks: the offsets were built above
        // as running sums of the rows' entry lengths (monotonic from 0, last = values.len()),
        // and each row's range holds a copy of its whole entry, each entry checked to be
        // valid UTF-8, so every row's bytes and every boundary are valid. (2) Plain and sized blocks: `check_offsets` made the offsets
        // monotonic from 0 to `values.len()`, and `check_utf8_rows` checked every row's
        // bytes to be UTF-8 between character boundaries. (3) The lengths are checked just
        // above.
        return Ok(Arc::new(unsafe { StringArray::new_unchecked(offsets, values, nulls) }));
    }
    Ok(match dt {
        DataType::Utf8 => Arc::new(
            StringArray::try_new(offsets, values, nulls).map_err(|e| format!("bad string data: {e}"))?,
        ),
        _ => Arc::new(
            BinaryArray::try_new(offsets, values, nulls).map_err(|e| format!("bad binary data: {e}"))?,
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};

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
    fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
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

    /// Every prefix [`lz4_prefix`] decodes is the start of what lz4_flex decompresses, on
    /// text, runs (overlapping matches), incompressible bytes and the empty input; cut or
    /// damaged streams are errors, not panics.
    #[test]
    fn lz4_prefixes_are_the_start_of_the_payload() {
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        let text: Vec<u8> = (0..20_000).map(|i| b"http://example.com/page?id="[i % 27] ^ ((i / 500) as u8 & 1)).collect();
        let runs: Vec<u8> = (0..5_000).map(|i| (i / 700) as u8).collect();
        let noise: Vec<u8> = (0..3_000).map(|_| next() as u8).collect();
        let offsets: Vec<u8> = (0..2_000u32).flat_map(|i| (i * 37 + i % 5).to_le_bytes()).collect();
        for data in [text, runs, noise, offsets, Vec::new(), vec![7u8]] {
            let packed = lz4_flex::block::compress(&data);
            for at in [0, 1, 2, 15, 16, 255, 256, 4_000, data.len() / 2, data.len()] {
                if at > data.len() {
                    continue;
                }
                let got = lz4_prefix(&packed, at, data.len()).unwrap();
                assert!(got.len() >= at && got.len() <= data.len());
                assert_eq!(got, data[..got.len()], "prefix of {at} bytes");
            }
            assert!(lz4_prefix(&packed, data.len() + 1, data.len() + 10).is_err());
            if data.len() > 100 {
                assert!(lz4_prefix(&packed, data.len(), data.len() - 1).is_err());
                assert!(lz4_prefix(&packed[..packed.len() / 2], data.len(), data.len()).is_err());
                for k in 0..packed.len().min(200) {
                    let mut bad = packed.clone();
                    bad[k] ^= 0x5a;
                    let _ = lz4_prefix(&bad, data.len(), data.len());
                }
            }
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
