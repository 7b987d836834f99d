//! Portable scalar kernels: the reference twin of every SIMD family.
//!
//! Loops are written over fixed-size blocks (64 rows for bitmaps) so that LLVM can
//! auto-vectorise them; no `unsafe` here.

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
    pub fn holds(self, ord: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::*;
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

// Odd 64-bit constants (digits of pi), as in foldhash/wyhash-style folded multiplies.
const S0: u64 = 0x243f_6a88_85a3_08d3;
const S1: u64 = 0x1319_8a2e_0370_7344;
const S2: u64 = 0xa409_3822_299f_31d0;

#[inline(always)]
fn folded_mul(a: u64, b: u64) -> u64 {
    let full = (a as u128).wrapping_mul(b as u128);
    (full as u64) ^ ((full >> 64) as u64)
}

/// 64-bit hash of a 64-bit key: two folded multiplies, so that both the high bits
/// (radix partition) and the low bits (slot) are well mixed.
#[inline]
pub fn hash_u64(x: u64) -> u64 {
    folded_mul(folded_mul(x ^ S0, S1), S2)
}

/// 64-bit hash of a 128-bit key (packed fixed-width keys).
#[inline]
pub fn hash_u128(x: u128) -> u64 {
    let lo = x as u64;
    let hi = (x >> 64) as u64;
    folded_mul(folded_mul(lo ^ S0, S1) ^ hi, S2)
}

/// 64-bit hash of a byte string (XXH3-64, seedless).
#[inline]
pub fn hash_bytes(b: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(b)
}

/// Appends to `out` a bitmap of `values[i] <op> c`: bit `i % 64` of word `i / 64`, for
/// `i in 0..values.len()`; unused high bits of the last word are zero.
/// Floats compare with IEEE semantics (NaN compares unequal to everything).
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

#[inline(always)]
fn pack<T: Copy>(values: &[T], out: &mut Vec<u64>, f: impl Fn(T) -> bool) {
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

/// Appends to `out` a bitmap of `string[i] <op> c` for the strings of an Arrow-style
/// variable-length column: string `i` is `data[offsets[i]..offsets[i + 1]]`, so
/// `offsets.len()` is rows + 1. Comparison is bytewise (memcmp), as in ClickHouse and DuckDB.
///
/// # Panics
/// If an offset is out of `data`'s bounds or offsets decrease (a malformed array).
pub fn cmp_bytes(offsets: &[i32], data: &[u8], op: CmpOp, c: &[u8], out: &mut Vec<u64>) {
    let n = offsets.len().saturating_sub(1);
    let lens = offsets.windows(2).map(|w| (w[1] - w[0]) as usize);
    if c.is_empty() && matches!(op, CmpOp::Eq | CmpOp::NotEq) {
        // "string is (not) empty": lengths only, no byte access.
        let want_empty = op == CmpOp::Eq;
        let lens: Vec<usize> = lens.collect();
        pack(&lens, out, |l| (l == 0) == want_empty);
        return;
    }
    let mut words = vec![0u64; n.div_ceil(64)];
    for (i, w) in offsets.windows(2).enumerate() {
        let s = &data[w[0] as usize..w[1] as usize];
        let hit = match op {
            CmpOp::Eq => s == c,
            CmpOp::NotEq => s != c,
            _ => op.holds(s.cmp(c)),
        };
        words[i / 64] |= (hit as u64) << (i % 64);
    }
    out.extend_from_slice(&words);
}

/// Writes `out[i] = minute of hour of ts[i]` where `ts` are seconds since the Unix epoch
/// (UTC; ClickHouse `toMinute`, SQL `extract(minute FROM ts)`). Negative times work
/// (Euclidean division). `out` is cleared first.
pub fn minute_of_hour(ts: &[i64], out: &mut Vec<u8>) {
    out.clear();
    out.extend(ts.iter().map(|&t| t.div_euclid(60).rem_euclid(60) as u8));
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
            for op in [CmpOp::Eq, CmpOp::NotEq, CmpOp::Lt, CmpOp::LtEq, CmpOp::Gt, CmpOp::GtEq] {
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
    }
}
