//! AVX2 kernels (x86_64, with SSE4.2 and POPCNT).
//!
//! Hand-written: 64-bit key hashing (AVX2 has no 64-bit lane multiply, so `fmix64`'s
//! multiplies are built from three `vpmuludq`/`vpmulld`), comparisons to bitmaps through `vpcmpgt`/`vpcmpeq` + `vmovmskp*`,
//! "string is (not) empty" over offsets, minute-of-hour in `f64` lanes, and the substring
//! search (first/last-byte filter, Muła's "SIMD-friendly algorithms for substring searching").
//! The other kernels are the scalar bodies compiled with these features.
//!
//! Every function is `unsafe` only because it needs the CPU features named in its
//! `#[target_feature]`; none reads or writes outside its slices.

use std::arch::x86_64::*;

use crate::scalar::{self, FMIX1, FMIX2, FOLD, SEED0, SEED1};
use crate::{CmpOp, KernelInt};

family_defaults!(target_feature(enable = "avx2,sse4.2,popcnt"));

/// `a * b` modulo 2^64 per 64-bit lane, from 32-bit multiplies.
#[inline(always)]
pub(crate) unsafe fn mul64(a: __m256i, b: __m256i) -> __m256i {
    // SAFETY: AVX2 intrinsics on registers only; callers are AVX2 functions.
    unsafe {
        let lo = _mm256_mul_epu32(a, b); // lo(a) * lo(b), full 64 bits
        let b_swapped = _mm256_shuffle_epi32::<0b10_11_00_01>(b);
        let cross = _mm256_mullo_epi32(a, b_swapped); // 32-bit lanes: lo(a)*hi(b), hi(a)*lo(b)
        let cross_sum = _mm256_add_epi32(cross, _mm256_srli_epi64::<32>(cross));
        _mm256_add_epi64(lo, _mm256_slli_epi64::<32>(cross_sum))
    }
}

#[inline(always)]
unsafe fn fmix(x: __m256i) -> __m256i {
    // SAFETY: register-only AVX2 intrinsics.
    unsafe {
        let m1 = _mm256_set1_epi64x(FMIX1 as i64);
        let m2 = _mm256_set1_epi64x(FMIX2 as i64);
        let x = _mm256_xor_si256(x, _mm256_srli_epi64::<33>(x));
        let x = mul64(x, m1);
        let x = _mm256_xor_si256(x, _mm256_srli_epi64::<33>(x));
        let x = mul64(x, m2);
        _mm256_xor_si256(x, _mm256_srli_epi64::<33>(x))
    }
}

/// # Safety
/// The CPU must have AVX2, SSE4.2 and POPCNT.
#[target_feature(enable = "avx2,sse4.2,popcnt")]
pub(crate) unsafe fn hash_u64(keys: &[u64], out: &mut [u64]) {
    assert_eq!(keys.len(), out.len(), "hash output length");
    let seed = _mm256_set1_epi64x(SEED0 as i64);
    let mut i = 0;
    while i + 4 <= keys.len() {
        // SAFETY: i + 4 <= len of both slices; unaligned loads/stores.
        unsafe {
            let x = _mm256_loadu_si256(keys.as_ptr().add(i).cast());
            let h = fmix(_mm256_xor_si256(x, seed));
            _mm256_storeu_si256(out.as_mut_ptr().add(i).cast(), h);
        }
        i += 4;
    }
    scalar::hash_u64_batch(&keys[i..], &mut out[i..]);
}

/// # Safety
/// The CPU must have AVX2, SSE4.2 and POPCNT.
#[target_feature(enable = "avx2,sse4.2,popcnt")]
pub(crate) unsafe fn hash_u128(keys: &[u128], out: &mut [u64]) {
    assert_eq!(keys.len(), out.len(), "hash output length");
    let s0 = _mm256_set1_epi64x(SEED0 as i64);
    let s1 = _mm256_set1_epi64x(SEED1 as i64);
    let fold = _mm256_set1_epi64x(FOLD as i64);
    let mut i = 0;
    while i + 4 <= keys.len() {
        // SAFETY: i + 4 <= len: two 32-byte loads cover keys i..i+4 (u128 is lo, hi in
        // little-endian order), one 32-byte store of 4 hashes.
        unsafe {
            let p = keys.as_ptr().add(i).cast::<__m256i>();
            let a = _mm256_loadu_si256(p); // lo0 hi0 lo1 hi1
            let b = _mm256_loadu_si256(p.add(1)); // lo2 hi2 lo3 hi3
            let lo = _mm256_unpacklo_epi64(a, b); // lo0 lo2 lo1 lo3
            let hi = _mm256_unpackhi_epi64(a, b); // hi0 hi2 hi1 hi3
            let m = mul64(_mm256_xor_si256(hi, s1), fold);
            let rot = _mm256_or_si256(_mm256_slli_epi64::<32>(m), _mm256_srli_epi64::<32>(m));
            let h = fmix(_mm256_xor_si256(_mm256_xor_si256(lo, s0), rot));
            let h = _mm256_permute4x64_epi64::<0b11_01_10_00>(h); // back to 0 1 2 3
            _mm256_storeu_si256(out.as_mut_ptr().add(i).cast(), h);
        }
        i += 4;
    }
    scalar::hash_u128_batch(&keys[i..], &mut out[i..]);
}

/// # Safety
/// The CPU must have AVX2, SSE4.2 and POPCNT.
#[target_feature(enable = "avx2,sse4.2,popcnt")]
pub(crate) unsafe fn str_empty(offsets: &[i32], want_empty: bool, out: &mut Vec<u64>) {
    let n = offsets.len().saturating_sub(1);
    out.reserve(n.div_ceil(64));
    let flip = if want_empty { 0 } else { u64::MAX };
    let mut start = 0;
    while start + 64 <= n {
        let mut w = 0u64;
        for j in 0..8 {
            let at = start + 8 * j;
            // SAFETY: at + 9 <= start + 64 + 1 <= n + 1 = offsets.len().
            let eq = unsafe {
                let a = _mm256_loadu_si256(offsets.as_ptr().add(at).cast());
                let b = _mm256_loadu_si256(offsets.as_ptr().add(at + 1).cast());
                _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(a, b))) as u32 as u64
            };
            w |= eq << (8 * j);
        }
        out.push(w ^ flip);
        start += 64;
    }
    if start < n {
        scalar::str_empty(&offsets[start..], want_empty, out);
    }
}

/// Bitmask of 32 bytes `== b`.
#[inline(always)]
unsafe fn eq_mask(v: __m256i, b: __m256i) -> u32 {
    // SAFETY: register-only AVX2 intrinsics.
    unsafe { _mm256_movemask_epi8(_mm256_cmpeq_epi8(v, b)) as u32 }
}

/// Substring test with the first/last-byte filter ([`crate::first_last_search`]): 32
/// candidate positions at a time.
#[inline(always)]
pub(crate) unsafe fn contains_one(hay: &[u8], needle: &[u8]) -> bool {
    let (Some(&first), Some(&last)) = (needle.first(), needle.last()) else { return true };
    let k = needle.len();
    // SAFETY: register-only broadcasts; callers are AVX2 functions (this one is inlined
    // into them).
    let (first_b, last_b) = unsafe { (_mm256_set1_epi8(first as i8), _mm256_set1_epi8(last as i8)) };
    crate::first_last_search::<32>(
        hay,
        needle,
        // SAFETY: as above.
        |h, b| unsafe { memchr_one(h, b) },
        // SAFETY: the driver calls with pos + 31 + k - 1 < hay.len(): both 32-byte loads
        // are inside `hay`.
        |pos| unsafe {
            let a = _mm256_loadu_si256(hay.as_ptr().add(pos).cast());
            let b = _mm256_loadu_si256(hay.as_ptr().add(pos + k - 1).cast());
            u64::from(eq_mask(a, first_b) & eq_mask(b, last_b))
        },
    )
}

#[inline(always)]
unsafe fn memchr_one(hay: &[u8], b: u8) -> bool {
    // SAFETY: register-only broadcast.
    let bv = unsafe { _mm256_set1_epi8(b as i8) };
    let mut pos = 0;
    while pos + 32 <= hay.len() {
        // SAFETY: pos + 32 <= len.
        if unsafe { eq_mask(_mm256_loadu_si256(hay.as_ptr().add(pos).cast()), bv) } != 0 {
            return true;
        }
        pos += 32;
    }
    hay[pos..].contains(&b)
}

/// # Safety
/// The CPU must have AVX2, SSE4.2 and POPCNT.
#[target_feature(enable = "avx2,sse4.2,popcnt")]
pub(crate) unsafe fn contains(offsets: &[i32], data: &[u8], needle: &[u8], out: &mut Vec<u64>) {
    let k = needle.len();
    let (first, last) = crate::needle_ends(needle);
    let (first_b, last_b) = (_mm256_set1_epi8(first as i8), _mm256_set1_epi8(last as i8));
    crate::first_last_rows::<32>(
        offsets,
        data,
        needle,
        out,
        // SAFETY: 1. the driver calls with pos + 32 + k - 1 <= offsets[n] <= data.len(), so
        // both 32-byte loads are inside `data`; 2. AVX2 is enabled for this function, into
        // which the closure is inlined.
        |pos| unsafe {
            let a = _mm256_loadu_si256(data.as_ptr().add(pos).cast());
            let b = _mm256_loadu_si256(data.as_ptr().add(pos + k - 1).cast());
            u64::from(eq_mask(a, first_b) & eq_mask(b, last_b))
        },
        // SAFETY: as 2. above.
        |s| unsafe { contains_one(s, needle) },
    )
}

/// # Safety
/// The CPU must have AVX2, SSE4.2 and POPCNT.
#[target_feature(enable = "avx2,sse4.2,popcnt")]
pub(crate) unsafe fn minute_of_hour(ts: &[i64], out: &mut Vec<u8>) {
    out.clear();
    out.reserve(ts.len());
    // i64 -> f64 exactly for |t| < 2^51: add the bits of 2^52 + 2^51, reinterpret, subtract.
    let magic_i = _mm256_set1_epi64x(0x4338_0000_0000_0000);
    let magic_f = _mm256_set1_pd(6_755_399_441_055_744.0);
    let limit = _mm256_set1_epi64x(1 << 46);
    let neg_limit = _mm256_set1_epi64x(-(1 << 46));
    let inv60 = _mm256_set1_pd(1.0 / 60.0);
    let sixty = _mm256_set1_pd(60.0);
    let mut i = 0;
    while i + 4 <= ts.len() {
        // SAFETY: i + 4 <= len for the load; the 4 bytes written go to reserved capacity
        // and are counted by set_len right after.
        unsafe {
            let t = _mm256_loadu_si256(ts.as_ptr().add(i).cast());
            let in_range = _mm256_and_si256(_mm256_cmpgt_epi64(limit, t), _mm256_cmpgt_epi64(t, neg_limit));
            if _mm256_movemask_pd(_mm256_castsi256_pd(in_range)) != 0b1111 {
                out.extend(ts[i..i + 4].iter().map(|&t| scalar::minute_of(t)));
                i += 4;
                continue;
            }
            let f = _mm256_sub_pd(_mm256_castsi256_pd(_mm256_add_epi64(t, magic_i)), magic_f);
            // minutes = floor(t / 60), corrected for a quotient rounded across an integer
            let q = _mm256_floor_pd(_mm256_mul_pd(f, inv60));
            let r = _mm256_sub_pd(f, _mm256_mul_pd(q, sixty));
            let q = _mm256_add_pd(q, _mm256_and_pd(_mm256_cmp_pd::<_CMP_GE_OQ>(r, sixty), _mm256_set1_pd(1.0)));
            let q = _mm256_sub_pd(q, _mm256_and_pd(_mm256_cmp_pd::<_CMP_LT_OQ>(r, _mm256_setzero_pd()), _mm256_set1_pd(1.0)));
            // minute = q - 60 * floor(q / 60), same correction
            let h = _mm256_floor_pd(_mm256_mul_pd(q, inv60));
            let m = _mm256_sub_pd(q, _mm256_mul_pd(h, sixty));
            let m = _mm256_sub_pd(m, _mm256_and_pd(_mm256_cmp_pd::<_CMP_GE_OQ>(m, sixty), sixty));
            let m = _mm256_add_pd(m, _mm256_and_pd(_mm256_cmp_pd::<_CMP_LT_OQ>(m, _mm256_setzero_pd()), sixty));
            let m32 = _mm256_cvtpd_epi32(m); // 4 x i32 in 0..60
            let bytes = _mm_shuffle_epi8(m32, _mm_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1));
            let dst = out.as_mut_ptr().add(out.len());
            std::ptr::write_unaligned(dst.cast::<i32>(), _mm_cvtsi128_si32(bytes));
            out.set_len(out.len() + 4);
        }
        i += 4;
    }
    out.extend(ts[i..].iter().map(|&t| scalar::minute_of(t)));
}

/// Per-type comparison of 64 values to a constant, giving one bitmap word.
trait Cmp64: KernelInt {
    /// Bit `i` set where lane `i` of the 64 values at `p` is `== c` (`GT = false`) or
    /// `> c` (`GT = true`; `SWAP`: `c > lane`). The other operators are the complements
    /// of these words (`<>`, `<=`, `>=`), taken once per word.
    ///
    /// # Safety
    /// AVX2; `p` points at 64 readable values.
    unsafe fn word<const GT: bool, const SWAP: bool>(p: *const Self, c: Self) -> u64;
}

/// `a > b` per lane for signed (as is) or unsigned (sign bit flipped) integers; the lane
/// masks of a run of 64 become one word by `$collect`.
macro_rules! cmp64_impl {
    ($t:ty, $set1:ident, $cmpgt:ident, $cmpeq:ident, $flip:expr, $collect:ident) => {
        impl Cmp64 for $t {
            #[inline(always)]
            unsafe fn word<const GT: bool, const SWAP: bool>(p: *const $t, c: $t) -> u64 {
                const PER: usize = 32 / std::mem::size_of::<$t>();
                // SAFETY: the caller guarantees 64 readable values at p and AVX2.
                unsafe {
                    let flip = $set1($flip);
                    let cv = _mm256_xor_si256($set1(c as _), flip);
                    let mut lanes = [_mm256_setzero_si256(); 64 / PER];
                    for (j, l) in lanes.iter_mut().enumerate() {
                        let v = _mm256_xor_si256(_mm256_loadu_si256(p.add(j * PER).cast()), flip);
                        *l = match (GT, SWAP) {
                            (false, _) => $cmpeq(v, cv),
                            (true, false) => $cmpgt(v, cv),
                            (true, true) => $cmpgt(cv, v),
                        };
                    }
                    $collect(&lanes)
                }
            }
        }
    };
}

/// One bit per 8-bit lane of two vectors.
#[inline(always)]
unsafe fn collect8(l: &[__m256i; 2]) -> u64 {
    // SAFETY: register-only.
    unsafe { _mm256_movemask_epi8(l[0]) as u32 as u64 | (_mm256_movemask_epi8(l[1]) as u32 as u64) << 32 }
}
/// One bit per 16-bit lane of four vectors: pairs packed to bytes with signed saturation
/// (all-ones stays all-ones), which interleaves the 128-bit halves; `vpermq` restores the
/// order, and `vpmovmskb` takes 32 lanes at once.
#[inline(always)]
unsafe fn collect16(l: &[__m256i; 4]) -> u64 {
    // SAFETY: register-only.
    unsafe {
        let lo = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packs_epi16(l[0], l[1]));
        let hi = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packs_epi16(l[2], l[3]));
        _mm256_movemask_epi8(lo) as u32 as u64 | (_mm256_movemask_epi8(hi) as u32 as u64) << 32
    }
}
/// One bit per 32-bit lane of eight vectors.
#[inline(always)]
unsafe fn collect32(l: &[__m256i; 8]) -> u64 {
    let mut w = 0u64;
    for (j, v) in l.iter().enumerate() {
        // SAFETY: register-only.
        w |= (unsafe { _mm256_movemask_ps(_mm256_castsi256_ps(*v)) } as u32 as u64) << (j * 8);
    }
    w
}
/// One bit per 64-bit lane of sixteen vectors.
#[inline(always)]
unsafe fn collect64(l: &[__m256i; 16]) -> u64 {
    let mut w = 0u64;
    for (j, v) in l.iter().enumerate() {
        // SAFETY: register-only.
        w |= (unsafe { _mm256_movemask_pd(_mm256_castsi256_pd(*v)) } as u32 as u64) << (j * 4);
    }
    w
}

cmp64_impl!(i8, _mm256_set1_epi8, _mm256_cmpgt_epi8, _mm256_cmpeq_epi8, 0, collect8);
cmp64_impl!(u8, _mm256_set1_epi8, _mm256_cmpgt_epi8, _mm256_cmpeq_epi8, i8::MIN, collect8);
cmp64_impl!(i16, _mm256_set1_epi16, _mm256_cmpgt_epi16, _mm256_cmpeq_epi16, 0, collect16);
cmp64_impl!(u16, _mm256_set1_epi16, _mm256_cmpgt_epi16, _mm256_cmpeq_epi16, i16::MIN, collect16);
cmp64_impl!(i32, _mm256_set1_epi32, _mm256_cmpgt_epi32, _mm256_cmpeq_epi32, 0, collect32);
cmp64_impl!(u32, _mm256_set1_epi32, _mm256_cmpgt_epi32, _mm256_cmpeq_epi32, i32::MIN, collect32);
cmp64_impl!(i64, _mm256_set1_epi64x, _mm256_cmpgt_epi64, _mm256_cmpeq_epi64, 0, collect64);
cmp64_impl!(u64, _mm256_set1_epi64x, _mm256_cmpgt_epi64, _mm256_cmpeq_epi64, i64::MIN, collect64);

/// # Safety
/// The CPU must have AVX2, SSE4.2 and POPCNT.
#[target_feature(enable = "avx2,sse4.2,popcnt")]
pub(crate) unsafe fn cmp<T: KernelInt>(values: &[T], op: CmpOp, c: T, out: &mut Vec<u64>) {
    // Route through the per-type implementation; T is one of the eight kernel ints.
    crate::cmp_by_type!(values, op, c, out)
}

#[inline(always)]
fn cmp_typed<T: Cmp64>(values: &[T], op: CmpOp, c: T, out: &mut Vec<u64>) {
    // One loop per operator (the operator is not matched per vector); `<>`, `<=` and `>=`
    // complement the words of `=`, `>` and `<`.
    // SAFETY: each run holds exactly 64 values; AVX2 is enabled in the caller (`cmp`),
    // into which this function and the run loop are inlined.
    macro_rules! words {
        ($gt:literal, $swap:literal, $not:literal) => {
            crate::cmp_by_words(values, op, c, out, |run| {
                let w = unsafe { T::word::<$gt, $swap>(run.as_ptr(), c) };
                if $not { !w } else { w }
            })
        };
    }
    match op {
        CmpOp::Eq => words!(false, false, false),
        CmpOp::NotEq => words!(false, false, true),
        CmpOp::Gt => words!(true, false, false),
        CmpOp::LtEq => words!(true, false, true),
        CmpOp::Lt => words!(true, true, false),
        CmpOp::GtEq => words!(true, true, true),
    }
}

// ---------------------------------------------------------------------------------------
// Hash-table probe: 32 control bytes a step
// ---------------------------------------------------------------------------------------

/// 32 control bytes in a `ymm` register.
#[derive(Clone, Copy)]
pub(crate) struct Group(__m256i);

// SAFETY: `vpcmpeqb` flags exactly the bytes equal to the tag and `vpmovmskb` moves each
// byte's top bit to bit i, so both masks are exact (EMPTY is the only byte with its top bit set).
unsafe impl crate::group::Group for Group {
    const WIDTH: usize = 32;

    #[inline]
    #[target_feature(enable = "avx2,sse4.2,popcnt")]
    unsafe fn load(ctrl: *const u8) -> Self {
        // SAFETY: 32 readable bytes (the caller's condition 1); `loadu` has no alignment need.
        Group(unsafe { _mm256_loadu_si256(ctrl.cast()) })
    }

    #[inline]
    #[target_feature(enable = "avx2,sse4.2,popcnt")]
    unsafe fn match_tag(self, tag: u8) -> crate::group::BitMask {
        let eq = _mm256_cmpeq_epi8(self.0, _mm256_set1_epi8(tag as i8));
        crate::group::BitMask::new(_mm256_movemask_epi8(eq) as u32 as u64, 0)
    }

    #[inline]
    #[target_feature(enable = "avx2,sse4.2,popcnt")]
    unsafe fn match_empty(self) -> crate::group::BitMask {
        crate::group::BitMask::new(_mm256_movemask_epi8(self.0) as u32 as u64, 0)
    }
}

/// Runs `task` with this family's [`Group`], compiled with its features.
///
/// # Safety
/// The CPU must have AVX2, SSE4.2 and POPCNT.
#[target_feature(enable = "avx2,sse4.2,popcnt")]
pub(crate) unsafe fn with_group<T: crate::group::GroupTask>(task: T) -> T::Output {
    task.run::<Group>()
}
