//! Portable scalar kernels: the reference twin of every SIMD family.
//!
//! Every kernel here is the definition of its result: the AVX2, AVX-512, NEON and SVE
//! families must return bit-identical output for every input (the tests in
//! `tests/families.rs` check it). The bodies are plain loops over fixed-size blocks (64 rows
//! for bitmaps) that LLVM can auto-vectorise; they are `#[inline(always)]` generics so that a
//! family module can also compile them under its own `#[target_feature]` where hand-written
//! intrinsics do not pay. No `unsafe` here.
//!
//! # The hash functions
//! Fixed-width keys use the MurmurHash3 64-bit finaliser (`fmix64`, Appleby 2011): two
//! 64x64 -> low-64 multiplies, shifts and xors. Unlike a 64x64 -> 128 folded multiply it maps
//! onto vector lanes (AVX-512DQ `vpmullq`, SVE `mul z.d`; emulated from 32-bit multiplies on
//! AVX2 and NEON), and it avalanches fully, so the top bits (radix partition), low bits
//! (slot) and middle bits (tag) of one 64-bit hash are independent.
//!
//! Byte strings up to 16 bytes are loaded as one or two little-endian words and mixed the
//! same way (no per-byte loop). Longer strings use XXH3-64: a CRC32C hash (one instruction
//! per 8 bytes on both ISAs, SSE4.2 `crc32q` / Armv8 `crc32cx`, four streams over
//! interleaved words for 128 bits of state) was built and measured slower on URL-sized
//! strings (20 ns vs 15 ns per 90-byte string), so it was dropped; see [`hash_bytes`].

use std::cmp::Ordering;

/// Comparison operator of a predicate `column <op> constant`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// `=`
    Eq,
    /// `<>` / `!=`
    NotEq,
    /// `<`
    Lt,
    /// `<=`
    LtEq,
    /// `>`
    Gt,
    /// `>=`
    GtEq,
}

impl CmpOp {
    /// Every operator, for tests and benchmarks.
    pub const ALL: [CmpOp; 6] = [CmpOp::Eq, CmpOp::NotEq, CmpOp::Lt, CmpOp::LtEq, CmpOp::Gt, CmpOp::GtEq];

    /// The operator with its operands swapped (`c < x` is `x > c`).
    pub fn flip(self) -> Self {
        match self {
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::LtEq => CmpOp::GtEq,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::GtEq => CmpOp::LtEq,
            other => other,
        }
    }

    /// Whether `ord` (the ordering of left vs right) satisfies the operator.
    #[inline]
    pub fn holds(self, ord: Ordering) -> bool {
        use Ordering::*;
        match self {
            CmpOp::Eq => ord == Equal,
            CmpOp::NotEq => ord != Equal,
            CmpOp::Lt => ord == Less,
            CmpOp::LtEq => ord != Greater,
            CmpOp::Gt => ord == Greater,
            CmpOp::GtEq => ord != Less,
        }
    }
}

// ---------------------------------------------------------------------------------------
// Hashing
// ---------------------------------------------------------------------------------------

/// Seed xor-ed into a 64-bit key before mixing (digits of pi), so that key 0 does not hash
/// to 0.
pub const SEED0: u64 = 0x243f_6a88_85a3_08d3;
/// Seed of the high word of a 128-bit key (digits of pi).
pub const SEED1: u64 = 0x1319_8a2e_0370_7344;
/// MurmurHash3 `fmix64` multipliers.
pub const FMIX1: u64 = 0xff51_afd7_ed55_8ccd;
/// MurmurHash3 `fmix64` multipliers.
pub const FMIX2: u64 = 0xc4ce_b9fe_1a85_ec53;
/// Odd multiplier that folds the high word of a 128-bit key (or the second word of a
/// string) into the low one (golden ratio).
pub const FOLD: u64 = 0x9e37_79b9_7f4a_7c15;

/// MurmurHash3's 64-bit finaliser: a bijection on `u64` with full avalanche.
#[inline(always)]
pub const fn fmix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(FMIX1);
    x ^= x >> 33;
    x = x.wrapping_mul(FMIX2);
    x ^ (x >> 33)
}

/// 64-bit hash of a 64-bit key (packed fixed-width keys, zero-extended narrower ints).
#[inline(always)]
pub const fn hash_u64(x: u64) -> u64 {
    fmix64(x ^ SEED0)
}

/// Folds two words into one before `fmix64`: `lo ^ SEED0 ^ rotl((hi ^ SEED1) * FOLD, 32)`.
/// The rotation brings the well-mixed high half of the product down to the low bits.
#[inline(always)]
pub const fn fold2(lo: u64, hi: u64) -> u64 {
    lo ^ SEED0 ^ (hi ^ SEED1).wrapping_mul(FOLD).rotate_left(32)
}

/// 64-bit hash of a 128-bit key (packed fixed-width keys, Q19/Q33).
#[inline(always)]
pub const fn hash_u128(x: u128) -> u64 {
    fmix64(fold2(x as u64, (x >> 64) as u64))
}

/// Reads up to 8 bytes little-endian, zero-padded.
#[inline(always)]
pub fn load_le_padded(b: &[u8]) -> u64 {
    debug_assert!(b.len() <= 8);
    let mut buf = [0u8; 8];
    buf[..b.len()].copy_from_slice(b);
    u64::from_le_bytes(buf)
}

#[inline(always)]
fn word(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// 64-bit hash of a byte string.
///
/// - `len <= 8`: `fmix64(w ^ SEED0 ^ len * FOLD)` with `w` the zero-padded word;
/// - `9..=16`: `fmix64(fold2(first 8 bytes, last 8 bytes ^ len))` (the words overlap);
/// - `> 16`: XXH3-64 (seedless; `xxhash-rust`), which is vectorised inside (SSE2 / NEON)
///   and measured faster than a four-stream CRC32C hash on URL-sized strings here (15 vs
///   20 ns per 90-byte string, AMD Zen 5), so every family uses it.
#[inline(always)]
pub fn hash_bytes(s: &[u8]) -> u64 {
    let len = s.len();
    if len <= 8 {
        return fmix64(load_le_short(s) ^ SEED0 ^ (len as u64).wrapping_mul(FOLD));
    }
    if len <= 16 {
        return fmix64(fold2(word(s, 0), word(s, len - 8) ^ len as u64));
    }
    xxhash_rust::xxh3::xxh3_64(s)
}

/// 128-bit hash of a byte string: XXH3-128 (seedless; `xxhash-rust`). What a distinct
/// count keeps instead of the string (ClickHouse's `uniqExact` keeps SipHash-128 of
/// strings): two different strings get the same hash with probability 2^-128 per pair,
/// about 10^-26 for the 10^6 distinct values of a column of 10^8 rows.
#[inline(always)]
pub fn hash128_bytes(s: &[u8]) -> u128 {
    xxhash_rust::xxh3::xxh3_128(s)
}

/// Up to 8 bytes as a little-endian word, zero-padded, without a `memcpy` call: two
/// overlapping 4-byte loads (4..=8 bytes) or three byte loads (1..=3 bytes).
#[inline(always)]
fn load_le_short(s: &[u8]) -> u64 {
    let len = s.len();
    debug_assert!(len <= 8);
    if len >= 4 {
        let lo = u32::from_le_bytes(s[..4].try_into().expect("4 bytes")) as u64;
        let hi = u32::from_le_bytes(s[len - 4..].try_into().expect("4 bytes")) as u64;
        // The high load starts at byte len - 4: shift it there (it rewrites bytes it shares
        // with the low load with the same values).
        lo | (hi << (8 * (len - 4)))
    } else if len > 0 {
        (s[0] as u64) | (s[len / 2] as u64) << (8 * (len / 2)) | (s[len - 1] as u64) << (8 * (len - 1))
    } else {
        0
    }
}

/// `out[i] = hash_u64(keys[i])`.
///
/// # Panics
/// If `out.len() != keys.len()`.
#[inline(always)]
pub fn hash_u64_batch(keys: &[u64], out: &mut [u64]) {
    assert_eq!(keys.len(), out.len(), "hash output length");
    for (o, &k) in out.iter_mut().zip(keys) {
        *o = hash_u64(k);
    }
}

/// `out[i] = hash_u128(keys[i])`.
///
/// # Panics
/// If `out.len() != keys.len()`.
#[inline(always)]
pub fn hash_u128_batch(keys: &[u128], out: &mut [u64]) {
    assert_eq!(keys.len(), out.len(), "hash output length");
    for (o, &k) in out.iter_mut().zip(keys) {
        *o = hash_u128(k);
    }
}

/// `out[i] = hash_bytes(strs[i])`.
///
/// # Panics
/// If `out.len() != strs.len()`.
#[inline(always)]
pub fn hash_strs_batch(strs: &[&[u8]], out: &mut [u64]) {
    assert_eq!(strs.len(), out.len(), "hash output length");
    for (o, s) in out.iter_mut().zip(strs) {
        *o = hash_bytes(s);
    }
}

// ---------------------------------------------------------------------------------------
// Comparisons to bitmaps
// ---------------------------------------------------------------------------------------

/// Appends to `out` a bitmap of `values[i] <op> c`: bit `i % 64` of word `i / 64`, for
/// `i in 0..values.len()`; unused high bits of the last word are zero.
/// Floats compare with IEEE semantics (NaN compares unequal to everything).
#[inline(always)]
pub fn cmp_scalar<T: PartialOrd + Copy>(values: &[T], op: CmpOp, c: T, out: &mut Vec<u64>) {
    match op {
        CmpOp::Eq => pack(values, out, |v| v == c),
        CmpOp::NotEq => pack(values, out, |v| v != c),
        CmpOp::Lt => pack(values, out, |v| v < c),
        CmpOp::LtEq => pack(values, out, |v| v <= c),
        CmpOp::Gt => pack(values, out, |v| v > c),
        CmpOp::GtEq => pack(values, out, |v| v >= c),
    }
}

/// Packs `f(values[i])` into bitmap words appended to `out`.
#[inline(always)]
pub fn pack<T: Copy>(values: &[T], out: &mut Vec<u64>, f: impl Fn(T) -> bool) {
    out.reserve(values.len().div_ceil(64));
    let mut chunks = values.chunks_exact(64);
    for chunk in &mut chunks {
        let mut w = 0u64;
        for (i, &v) in chunk.iter().enumerate() {
            w |= (f(v) as u64) << i;
        }
        out.push(w);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = 0u64;
        for (i, &v) in rest.iter().enumerate() {
            w |= (f(v) as u64) << i;
        }
        out.push(w);
    }
}

/// Appends to `out` the bitmap of `f(string i)` for the `offsets.len() - 1` strings of an
/// Arrow-style offsets/data pair (string `i` is `data[offsets[i]..offsets[i + 1]]`): the
/// row loop shared by the string predicates of every family.
///
/// # Panics
/// If an offset is out of `data`'s bounds or offsets decrease (a malformed array).
#[inline(always)]
pub fn pack_strings(offsets: &[i32], data: &[u8], out: &mut Vec<u64>, f: impl Fn(&[u8]) -> bool) {
    let n = offsets.len().saturating_sub(1);
    out.reserve(n.div_ceil(64));
    let mut start = 0;
    while start < n {
        let end = (start + 64).min(n);
        let mut w = 0u64;
        for i in start..end {
            w |= (f(&data[offsets[i] as usize..offsets[i + 1] as usize]) as u64) << (i - start);
        }
        out.push(w);
        start = end;
    }
}

/// Appends to `out` a bitmap of "string `i` is empty" (`want_empty`) or "is not empty"
/// (`!want_empty`) for the `offsets.len() - 1` strings of an Arrow-style offsets buffer.
/// Reads lengths only, never bytes.
#[inline(always)]
pub fn str_empty(offsets: &[i32], want_empty: bool, out: &mut Vec<u64>) {
    let n = offsets.len().saturating_sub(1);
    out.reserve(n.div_ceil(64));
    let mut start = 0;
    while start < n {
        let end = (start + 64).min(n);
        let mut w = 0u64;
        for i in start..end {
            let empty = offsets[i + 1] == offsets[i];
            w |= ((empty == want_empty) as u64) << (i - start);
        }
        out.push(w);
        start = end;
    }
}

/// Appends to `out` a bitmap of `string[i] <op> c` for the strings of an Arrow-style
/// variable-length column: string `i` is `data[offsets[i]..offsets[i + 1]]`, so
/// `offsets.len()` is rows + 1. Comparison is bytewise (memcmp), as in ClickHouse and DuckDB.
///
/// # Panics
/// If an offset is out of `data`'s bounds or offsets decrease (a malformed array).
pub fn cmp_bytes(offsets: &[i32], data: &[u8], op: CmpOp, c: &[u8], out: &mut Vec<u64>) {
    if c.is_empty() && matches!(op, CmpOp::Eq | CmpOp::NotEq) {
        str_empty(offsets, op == CmpOp::Eq, out);
        return;
    }
    pack_strings(offsets, data, out, |s| match op {
        CmpOp::Eq => s == c,
        CmpOp::NotEq => s != c,
        // The first bytes settle most orderings without a call to memcmp.
        _ => op.holds(match (s.first(), c.first()) {
            (Some(a), Some(b)) if a != b => a.cmp(b),
            _ => s.cmp(c),
        }),
    });
}

/// Whether `hay` contains `needle` (`LIKE '%needle%'`); the empty needle is in every string.
#[inline(always)]
pub fn contains_one(hay: &[u8], needle: &[u8]) -> bool {
    if needle.is_empty() {
        return true;
    }
    if needle.len() > hay.len() {
        return false;
    }
    // First-byte filter, then verify (memchr's idea without the SIMD).
    let (first, rest) = (needle[0], &needle[1..]);
    let last_start = hay.len() - needle.len();
    hay[..=last_start].iter().enumerate().any(|(i, &b)| b == first && &hay[i + 1..i + needle.len()] == rest)
}

/// Appends to `out` a bitmap of "string `i` contains `needle`" (`LIKE '%needle%'`, bytewise,
/// case-sensitive) for the strings of an Arrow-style offsets/data pair.
///
/// # Panics
/// If an offset is out of `data`'s bounds or offsets decrease (a malformed array).
#[inline(always)]
pub fn contains(offsets: &[i32], data: &[u8], needle: &[u8], out: &mut Vec<u64>) {
    pack_strings(offsets, data, out, |s| contains_one(s, needle))
}

// ---------------------------------------------------------------------------------------
// Aggregates over a selection
// ---------------------------------------------------------------------------------------

/// Integer types the aggregate and comparison kernels take.
pub trait KernelInt: Copy + Ord + Send + Sync + 'static {
    /// The type's minimum.
    const MIN: Self;
    /// The type's maximum.
    const MAX: Self;
    /// The value widened to i128 (exact for every width).
    fn to_i128(self) -> i128;
    /// The value widened to i64 (exact for every width below 64 bits; wraps for `u64`).
    fn to_i64(self) -> i64;
}
macro_rules! kernel_int {
    ($($t:ty),*) => {$(
        impl KernelInt for $t {
            const MIN: $t = <$t>::MIN;
            const MAX: $t = <$t>::MAX;
            #[inline(always)]
            fn to_i128(self) -> i128 { self as i128 }
            #[inline(always)]
            fn to_i64(self) -> i64 { self as i64 }
        }
    )*};
}
kernel_int!(i8, i16, i32, i64, u8, u16, u32, u64);

/// Checks the selection bitmap covers `n` rows.
#[inline(always)]
fn check_sel(sel: Option<&[u64]>, n: usize) {
    if let Some(s) = sel {
        assert!(s.len() >= n.div_ceil(64), "selection bitmap too short");
    }
}

/// All-ones for a selected row, zero otherwise (bit `i % 64` of `word`).
#[inline(always)]
fn lane_mask(word: u64, i: usize) -> i64 {
    -((word >> (i % 64) & 1) as i64)
}

/// Exact sum of the selected values (`sel`: bitmap, bit `i` selects `values[i]`; `None`
/// selects all), as i128: no overflow for any input that fits in memory.
///
/// Branch-free: a row's value is masked by its selection bit. Values narrower than 64 bits
/// add up in i64 per block of 2^16 rows; 64-bit values are split into a low 32-bit half
/// (u64 sums) and a high half (i64 sums) per block, then combined in i128.
///
/// # Panics
/// If `sel` has fewer than `values.len().div_ceil(64)` words.
#[inline(always)]
pub fn sum<T: KernelInt>(values: &[T], sel: Option<&[u64]>) -> i128 {
    check_sel(sel, values.len());
    const BLOCK: usize = 1 << 16;
    let mut total = 0i128;
    for (b, block) in values.chunks(BLOCK).enumerate() {
        let base = b * BLOCK;
        let word = |i: usize| sel.map_or(u64::MAX, |s| s[(base + i) / 64]);
        if std::mem::size_of::<T>() < 8 {
            let mut acc = 0i64;
            for (i, &v) in block.iter().enumerate() {
                acc += v.to_i64() & lane_mask(word(i), i);
            }
            total += acc as i128;
        } else {
            let (mut lo, mut hi) = (0u64, 0i64);
            for (i, &v) in block.iter().enumerate() {
                let x = v.to_i128();
                let m = lane_mask(word(i), i);
                lo += (x as u64 & 0xffff_ffff) & m as u64;
                hi += ((x >> 32) as i64) & m;
            }
            total += ((hi as i128) << 32) + lo as i128;
        }
    }
    total
}

/// Minimum of the selected values; `None` when no value is selected.
///
/// # Panics
/// If `sel` has fewer than `values.len().div_ceil(64)` words.
#[inline(always)]
pub fn min<T: KernelInt>(values: &[T], sel: Option<&[u64]>) -> Option<T> {
    masked_extreme(values, sel, T::MAX, Ord::min)
}

/// Maximum of the selected values; `None` when no value is selected.
///
/// # Panics
/// If `sel` has fewer than `values.len().div_ceil(64)` words.
#[inline(always)]
pub fn max<T: KernelInt>(values: &[T], sel: Option<&[u64]>) -> Option<T> {
    masked_extreme(values, sel, T::MIN, Ord::max)
}

/// Folds the selected values with `pick` (min or max), branch-free: an unselected row
/// contributes `identity`, the value `pick` never prefers.
#[inline(always)]
fn masked_extreme<T: KernelInt>(values: &[T], sel: Option<&[u64]>, identity: T, pick: fn(T, T) -> T) -> Option<T> {
    check_sel(sel, values.len());
    match sel {
        None => values.iter().copied().reduce(pick),
        Some(s) => {
            if count(s, values.len()) == 0 {
                return None;
            }
            let mut m = identity;
            for (i, &v) in values.iter().enumerate() {
                let on = s[i / 64] >> (i % 64) & 1 == 1;
                m = pick(m, if on { v } else { identity });
            }
            Some(m)
        }
    }
}

/// Number of set bits among the first `len` bits of the bitmap (`COUNT(*)` over a
/// selection).
///
/// # Panics
/// If `words` has fewer than `len.div_ceil(64)` words.
#[inline(always)]
pub fn count(words: &[u64], len: usize) -> usize {
    let full = len / 64;
    let mut n: usize = words[..full].iter().map(|w| w.count_ones() as usize).sum();
    if !len.is_multiple_of(64) {
        n += (words[full] & ((1u64 << (len % 64)) - 1)).count_ones() as usize;
    }
    n
}

/// Appends to `out` the indices of the set bits among the first `len` bits of the bitmap,
/// ascending: a bitmap turned into a selection vector.
///
/// # Panics
/// If `words` has fewer than `len.div_ceil(64)` words, or `len > u32::MAX`.
#[inline(always)]
pub fn bitmap_to_indices(words: &[u64], len: usize, out: &mut Vec<u32>) {
    assert!(len <= u32::MAX as usize, "selection longer than u32");
    let nw = len.div_ceil(64);
    for (wi, &w0) in words[..nw].iter().enumerate() {
        let mut w = if wi + 1 == nw && !len.is_multiple_of(64) { w0 & ((1u64 << (len % 64)) - 1) } else { w0 };
        while w != 0 {
            out.push((wi * 64) as u32 + w.trailing_zeros());
            w &= w - 1;
        }
    }
}

// ---------------------------------------------------------------------------------------
// Radix partitioning
// ---------------------------------------------------------------------------------------

/// `out[i] = hashes[i] >> (64 - bits)`: the radix partition of each row from the top
/// `bits` bits of its hash (`1 <= bits <= 16`).
///
/// # Panics
/// If `bits` is not in `1..=16` or `out.len() != hashes.len()`.
#[inline(always)]
pub fn partition_ids(hashes: &[u64], bits: u32, out: &mut [u16]) {
    assert!((1..=16).contains(&bits), "partition bits must be 1..=16");
    assert_eq!(hashes.len(), out.len(), "partition id output length");
    let shift = 64 - bits;
    for (o, &h) in out.iter_mut().zip(hashes) {
        *o = (h >> shift) as u16;
    }
}

// ---------------------------------------------------------------------------------------
// Date parts
// ---------------------------------------------------------------------------------------

/// Minute of hour of one timestamp in seconds since the Unix epoch (UTC).
#[inline(always)]
pub fn minute_of(t: i64) -> u8 {
    t.div_euclid(60).rem_euclid(60) as u8
}

/// Writes `out[i] = minute of hour of ts[i]` where `ts` are seconds since the Unix epoch
/// (UTC; ClickHouse `toMinute`, SQL `extract(minute FROM ts)`). Negative times work
/// (Euclidean division). `out` is cleared first.
#[inline(always)]
pub fn minute_of_hour(ts: &[i64], out: &mut Vec<u8>) {
    out.clear();
    out.extend(ts.iter().map(|&t| minute_of(t)));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bits(words: &[u64], n: usize) -> Vec<bool> {
        (0..n).map(|i| words[i / 64] >> (i % 64) & 1 == 1).collect()
    }

    #[test]
    fn cmp_scalar_matches_naive_around_block_edges() {
        for n in [0usize, 1, 63, 64, 65, 127, 128, 200] {
            let v: Vec<i32> = (0..n as i32).map(|i| (i * 7919) % 13 - 6).collect();
            for op in CmpOp::ALL {
                let mut out = Vec::new();
                cmp_scalar(&v, op, 0, &mut out);
                assert_eq!(out.len(), n.div_ceil(64));
                let want: Vec<bool> = v.iter().map(|x| op.holds(x.cmp(&0))).collect();
                assert_eq!(bits(&out, n), want, "n={n} op={op:?}");
            }
        }
        let mut out = Vec::new();
        cmp_scalar(&[i64::MIN, i64::MAX], CmpOp::Gt, i64::MIN, &mut out);
        assert_eq!(bits(&out, 2), vec![false, true]);
    }

    #[test]
    fn cmp_bytes_empty_and_order() {
        let strs = ["", "a", "http://x", "", "b"];
        let mut offsets = vec![0i32];
        let mut data = Vec::new();
        for s in strs {
            data.extend_from_slice(s.as_bytes());
            offsets.push(data.len() as i32);
        }
        let run = |op, c: &str| {
            let mut out = Vec::new();
            cmp_bytes(&offsets, &data, op, c.as_bytes(), &mut out);
            bits(&out, strs.len())
        };
        assert_eq!(run(CmpOp::NotEq, ""), vec![false, true, true, false, true]);
        assert_eq!(run(CmpOp::Eq, ""), vec![true, false, false, true, false]);
        assert_eq!(run(CmpOp::Eq, "a"), vec![false, true, false, false, false]);
        assert_eq!(run(CmpOp::Lt, "b"), vec![true, true, false, true, false]);
    }

    #[test]
    fn minutes() {
        let mut out = Vec::new();
        // 2013-07-15 14:17:59 UTC = 1373897879
        minute_of_hour(&[1373897879, 0, 59, 60, -1], &mut out);
        assert_eq!(out, vec![17, 0, 0, 1, 59]);
    }

    #[test]
    fn hashes_spread_high_and_low_bits() {
        let mut hi = std::collections::HashSet::new();
        let mut lo = std::collections::HashSet::new();
        for x in 0..4096u64 {
            let h = hash_u64(x);
            hi.insert(h >> 56);
            lo.insert(h & 255);
        }
        assert!(hi.len() > 240 && lo.len() > 240, "{} {}", hi.len(), lo.len());
        assert_ne!(hash_u128(1), hash_u128(1 << 64));
        assert_eq!(hash_bytes(b"abc"), hash_bytes(b"abc"));
        // Short loads: each length 0..=8 is the zero-padded little-endian word.
        for len in 0..=8usize {
            let b: Vec<u8> = (1..=len as u8).collect();
            assert_eq!(load_le_short(&b), load_le_padded(&b), "len {len}");
        }
        // Length matters even where the padded words agree.
        assert_ne!(hash_bytes(b"a"), hash_bytes(b"a\0"));
        assert_ne!(hash_bytes(&[0u8; 16]), hash_bytes(&[0u8; 17]));
        // Long strings differing in one byte anywhere hash differently.
        let base = vec![b'x'; 100];
        let hb = hash_bytes(&base);
        for i in 0..100 {
            let mut s = base.clone();
            s[i] = b'y';
            assert_ne!(hash_bytes(&s), hb, "byte {i}");
        }
    }

    #[test]
    fn selection_helpers() {
        let words = [0b1011u64, 1 << 63];
        assert_eq!(count(&words, 128), 4);
        assert_eq!(count(&words, 64), 3);
        let mut idx = Vec::new();
        bitmap_to_indices(&words, 128, &mut idx);
        assert_eq!(idx, vec![0, 1, 3, 127]);
        assert_eq!(sum(&[1i64, 2, 3, 4], Some(&[0b1010])), 6);
        assert_eq!(min(&[5u8, 2, 9], Some(&[0b101])), Some(5));
        assert_eq!(max(&[5u8, 2, 9], Some(&[0])), None);
        let mut pids = vec![0u16; 3];
        partition_ids(&[0, u64::MAX, 1 << 63], 8, &mut pids);
        assert_eq!(pids, vec![0, 255, 128]);
        partition_ids(&[0, u64::MAX, 1 << 63], 10, &mut pids);
        assert_eq!(pids, vec![0, 1023, 512]);
    }
}
