//! Encoding a block: the light encoding chosen by size, the codec, the header.

use arrow::array::{Array, AsArray};
use arrow::datatypes::ArrowPrimitiveType;

use super::{Codec, Encoding, IntNative, fixed_width, plain_size, var_parts};

/// Appends one block holding all of `arr` to `out`. `encode` allows dictionary and
/// frame-of-reference encodings (each used only where it makes the block smaller), sparse
/// integer blocks (no NULLs and at least 15/16 zeros, [`Encoding::Sparse`]) and strings
/// stored with their lengths ([`Encoding::Sized`]); without it blocks are plain.
///
/// # Errors
/// A message if the codec fails (only possible for zstd with a bad level).
pub(crate) fn write_block(arr: &dyn Array, codec: Codec, encode: bool, out: &mut Vec<u8>) -> Result<(), String> {
    let rows = arr.len();
    let mut p = Vec::with_capacity(plain_size(arr) + rows / 8 + 16);
    let nulls = arr.logical_nulls().filter(|n| n.null_count() > 0);
    let has_nulls = nulls.is_some();
    match nulls {
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
    let enc = tessera_common::int_like_dispatch!(arr.data_type(), A => encode_ints::<A>(arr, encode && !has_nulls, encode, &mut p), _ => {
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

/// Rows of a block per non-zero value at most for [`Encoding::Sparse`]: at least 15/16 of
/// the rows zero (ClickHouse's `ratio_of_defaults_for_sparse_serialization`, 0.9375).
const SPARSE_RATIO: usize = 16;

/// Encodes an integer block into `p`: sparse when `sparse` (light encodings on, no NULLs)
/// and nearly every value is zero, else frame-of-reference when `encode` and smaller than
/// plain, else plain.
fn encode_ints<A: ArrowPrimitiveType>(arr: &dyn Array, sparse: bool, encode: bool, p: &mut Vec<u8>) -> Encoding
where
    A::Native: IntNative,
{
    let a = arr.as_primitive::<A>();
    let vals: &[A::Native] = a.values();
    if sparse && encode_sparse(vals, p) {
        return Encoding::Sparse;
    }
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

/// Appends `vals` as [`Encoding::Sparse`] (non-zero count, position width, positions, values)
/// if at most one value in [`SPARSE_RATIO`] is non-zero; `false` (nothing written) otherwise.
fn encode_sparse<T: IntNative>(vals: &[T], p: &mut Vec<u8>) -> bool {
    let most = vals.len() / SPARSE_RATIO;
    if most == 0 {
        return false;
    }
    let mut at: Vec<u32> = Vec::with_capacity(most);
    for (i, v) in vals.iter().enumerate() {
        if v.to_i128() != 0 {
            if at.len() == most {
                return false;
            }
            at.push(i as u32);
        }
    }
    let width = sparse_position_width(vals.len());
    p.extend_from_slice(&(at.len() as u32).to_le_bytes());
    p.push(width as u8);
    for &i in &at {
        p.extend_from_slice(&i.to_le_bytes()[..width]);
    }
    for &i in &at {
        vals[i as usize].put_le(p);
    }
    true
}

/// Bytes of a sparse block's positions: the narrowest of 1, 2, 4 that holds `rows - 1`.
fn sparse_position_width(rows: usize) -> usize {
    match rows {
        0..=256 => 1,
        257..=65_536 => 2,
        _ => 4,
    }
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

