//! Decoding a block: checksum, codec, light encoding, every length and index checked.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BinaryArray, PrimitiveArray, StringArray};
use arrow::buffer::{BooleanBuffer, Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow::datatypes::{ArrowPrimitiveType, DataType, Float32Type, Float64Type};

use super::{DResult, Encoding, HEADER_LEN, IntNative, MAX_PAYLOAD, block_len, lz4_prefix, u32_at, var_parts};

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
        let ids = le_u32s(idx, width);
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
    if enc == Encoding::Sparse as u8 {
        if nulls.is_some() {
            return Err("sparse block with NULLs".into());
        }
        // The rows past the non-zero ones are bounded by nothing in the payload: bounded
        // here as the payloads are (a damaged row count must not ask for 32 GiB).
        if rows.saturating_mul(std::mem::size_of::<A::Native>()) > MAX_PAYLOAD {
            return Err(format!("sparse block declares {rows} rows: more than {MAX_PAYLOAD} bytes decoded"));
        }
        let (at, vals) = sparse_parts::<A::Native>(r, rows)?;
        let mut out = vec![A::Native::from_i128(0); rows];
        for (&i, v) in at.iter().zip(vals) {
            out[i as usize] = v;
        }
        return Ok(Arc::new(PrimitiveArray::<A>::new(ScalarBuffer::from(out), None).with_data_type(A::DATA_TYPE)));
    }
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

/// `bytes` as little-endian unsigned integers of `width` bytes (1, 2 or 4; 4 for any other):
/// dictionary indexes, sparse positions. One loop per width (a generic one copied each value
/// through a 4-byte array).
fn le_u32s(bytes: &[u8], width: usize) -> Vec<u32> {
    match width {
        1 => bytes.iter().map(|&b| u32::from(b)).collect(),
        2 => bytes.chunks_exact(2).map(|c| u32::from(u16::from_le_bytes([c[0], c[1]]))).collect(),
        _ => bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
    }
}

/// A sparse block's positions (strictly ascending, each below `rows`) and values, read
/// from `r` ([`Encoding::Sparse`]); every other row is zero.
fn sparse_parts<T: IntNative>(r: &mut Reader<'_>, rows: usize) -> DResult<(Vec<u32>, Vec<T>)> {
    let n = r.u32()? as usize;
    if n > rows {
        return Err(format!("sparse block of {rows} rows declares {n} values"));
    }
    let width = r.u8()? as usize;
    let bytes = match width {
        1 | 2 | 4 => r.take(n.checked_mul(width).ok_or("length overflow")?)?,
        w => return Err(format!("bad sparse position width {w}")),
    };
    let at = le_u32s(bytes, width);
    if at.windows(2).any(|w| w[0] >= w[1]) || at.last().is_some_and(|&l| l as usize >= rows) {
        return Err(format!("sparse positions not ascending within {rows} rows"));
    }
    let size = std::mem::size_of::<T>();
    let vals = r.take(n.checked_mul(size).ok_or("length overflow")?)?.chunks_exact(size).map(T::get_le).collect();
    Ok((at, vals))
}

/// Whether the block at the start of `buf` is sparse ([`Encoding::Sparse`]), by its header's
/// encoding byte alone (nothing verified).
pub(crate) fn is_sparse(buf: &[u8]) -> bool {
    buf.get(9) == Some(&(Encoding::Sparse as u8))
}

/// A sparse block's non-zero rows: the block's row count, their positions (ascending) and
/// their values.
pub(crate) type SparseRows = (usize, Vec<u32>, ArrayRef);

/// The non-zero rows of an integer block ([`Encoding::Sparse`]), or `None` when the block is
/// not sparse (only its header is read then). `verify`: as [`decode_block`]'s.
pub(crate) fn read_block_sparse(buf: &[u8], dt: &DataType, verify: bool) -> DResult<Option<SparseRows>> {
    if !is_sparse(buf) {
        return Ok(None);
    }
    let (_, rows, payload) = open_block(buf, verify)?;
    let mut r = Reader { buf: payload.bytes(), pos: 0 };
    if read_nulls(&mut r, rows)?.is_some() {
        return Err("sparse block with NULLs".into());
    }
    let out = tessera_common::int_like_dispatch!(dt, A => {
        let (at, vals) = sparse_parts::<<A as ArrowPrimitiveType>::Native>(&mut r, rows)?;
        (rows, at, Arc::new(PrimitiveArray::<A>::new(ScalarBuffer::from(vals), None).with_data_type(A::DATA_TYPE)) as ArrayRef)
    }, _ => return Err(format!("a sparse block of type {dt}")));
    if r.pos != r.buf.len() {
        return Err(format!("{} trailing payload bytes", r.buf.len() - r.pos));
    }
    Ok(Some(out))
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

