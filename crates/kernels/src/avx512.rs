//! AVX-512 kernels (x86_64, F/BW/DQ/VL; Skylake-SP, Ice Lake, Sapphire Rapids, Zen 4/5).
//!
//! Hand-written: 64-bit key hashing with `vpmullq` and `vprolq` (8 keys per instruction),
//! comparisons straight into mask registers (`vpcmp*` gives the bitmap word itself),
//! "string is (not) empty" over offsets, minute-of-hour with `vcvtqq2pd`, radix partition
//! ids with `vpmovqb`, and bitmap -> selection vector with `vpcompressd` into a register
//! followed by a plain store (the memory-destination form is microcoded on Zen 4/5, LLVM
//! issue 133568). String hashing and the substring search reuse the AVX2 code (their inner
//! loops are one string at a time); the rest are the scalar bodies compiled with AVX-512.

use std::arch::x86_64::*;

use crate::scalar::{self, FMIX1, FMIX2, FOLD, SEED0, SEED1};
use crate::{CmpOp, KernelInt};

family_defaults!(target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,sse4.2,popcnt"));
pub(crate) use crate::avx2::hash_strs;

#[inline(always)]
unsafe fn fmix(x: __m512i) -> __m512i {
    // SAFETY: register-only AVX-512 F/DQ intrinsics; callers enable them.
    unsafe {
        let x = _mm512_xor_si512(x, _mm512_srli_epi64::<33>(x));
        let x = _mm512_mullo_epi64(x, _mm512_set1_epi64(FMIX1 as i64));
        let x = _mm512_xor_si512(x, _mm512_srli_epi64::<33>(x));
        let x = _mm512_mullo_epi64(x, _mm512_set1_epi64(FMIX2 as i64));
        _mm512_xor_si512(x, _mm512_srli_epi64::<33>(x))
    }
}

/// # Safety
/// The CPU must have AVX-512 F/BW/DQ/VL, AVX2, SSE4.2 and POPCNT.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,sse4.2,popcnt")]
pub(crate) unsafe fn hash_u64(keys: &[u64], out: &mut [u64]) {
    assert_eq!(keys.len(), out.len(), "hash output length");
    let seed = _mm512_set1_epi64(SEED0 as i64);
    let mut i = 0;
    while i + 8 <= keys.len() {
        // SAFETY: i + 8 <= len of both slices; unaligned 64-byte load and store.
        unsafe {
            let x = _mm512_loadu_si512(keys.as_ptr().add(i).cast());
            _mm512_storeu_si512(out.as_mut_ptr().add(i).cast(), fmix(_mm512_xor_si512(x, seed)));
        }
        i += 8;
    }
    scalar::hash_u64_batch(&keys[i..], &mut out[i..]);
}

/// # Safety
/// The CPU must have AVX-512 F/BW/DQ/VL, AVX2, SSE4.2 and POPCNT.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,sse4.2,popcnt")]
pub(crate) unsafe fn hash_u128(keys: &[u128], out: &mut [u64]) {
    assert_eq!(keys.len(), out.len(), "hash output length");
    let s0 = _mm512_set1_epi64(SEED0 as i64);
    let s1 = _mm512_set1_epi64(SEED1 as i64);
    let fold = _mm512_set1_epi64(FOLD as i64);
    let even = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14);
    let odd = _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15);
    let mut i = 0;
    while i + 8 <= keys.len() {
        // SAFETY: i + 8 <= len: two 64-byte loads cover keys i..i+8 (lo, hi little-endian),
        // one 64-byte store of 8 hashes.
        unsafe {
            let p = keys.as_ptr().add(i).cast::<u64>();
            let a = _mm512_loadu_si512(p.cast());
            let b = _mm512_loadu_si512(p.add(8).cast());
            let lo = _mm512_permutex2var_epi64(a, even, b);
            let hi = _mm512_permutex2var_epi64(a, odd, b);
            let m = _mm512_rol_epi64::<32>(_mm512_mullo_epi64(_mm512_xor_si512(hi, s1), fold));
            let h = fmix(_mm512_xor_si512(_mm512_xor_si512(lo, s0), m));
            _mm512_storeu_si512(out.as_mut_ptr().add(i).cast(), h);
        }
        i += 8;
    }
    scalar::hash_u128_batch(&keys[i..], &mut out[i..]);
}

/// Bitmap of strings containing `needle`: [`scalar::contains`], 64 starts a step over the
/// strings' bytes as one haystack ([`crate::first_last_rows`]).
///
/// # Safety
/// The CPU must have AVX-512 F/BW/DQ/VL, AVX2, SSE4.2 and POPCNT.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,sse4.2,popcnt")]
pub(crate) unsafe fn contains(offsets: &[i32], data: &[u8], needle: &[u8], out: &mut Vec<u64>) {
    let k = needle.len();
    let (first, last) = crate::needle_ends(needle);
    let (first_b, last_b) = (_mm512_set1_epi8(first as i8), _mm512_set1_epi8(last as i8));
    crate::first_last_rows::<64>(
        offsets,
        data,
        needle,
        out,
        // SAFETY: 1. the driver calls with pos + 64 + k - 1 <= offsets[n] <= data.len(), so
        // both 64-byte loads are inside `data`; 2. AVX-512BW is enabled for this function,
        // into which the closure is inlined.
        |pos| unsafe {
            let a = _mm512_loadu_si512(data.as_ptr().add(pos).cast());
            let b = _mm512_loadu_si512(data.as_ptr().add(pos + k - 1).cast());
            _mm512_cmpeq_epi8_mask(a, first_b) & _mm512_cmpeq_epi8_mask(b, last_b)
        },
        // SAFETY: as 2. above; the AVX2 search needs a subset of these features.
        |s| unsafe { crate::avx2::contains_one(s, needle) },
    )
}

/// # Safety
/// The CPU must have AVX-512 F/BW/DQ/VL, AVX2, SSE4.2 and POPCNT.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,sse4.2,popcnt")]
pub(crate) unsafe fn str_empty(offsets: &[i32], want_empty: bool, out: &mut Vec<u64>) {
    let n = offsets.len().saturating_sub(1);
    out.reserve(n.div_ceil(64));
    let flip = if want_empty { 0 } else { u64::MAX };
    let mut start = 0;
    while start + 64 <= n {
        let mut w = 0u64;
        for j in 0..4 {
            let at = start + 16 * j;
            // SAFETY: at + 17 <= start + 65 <= n + 1 = offsets.len().
            let eq = unsafe {
                let a = _mm512_loadu_si512(offsets.as_ptr().add(at).cast());
                let b = _mm512_loadu_si512(offsets.as_ptr().add(at + 1).cast());
                _mm512_cmpeq_epi32_mask(a, b) as u64
            };
            w |= eq << (16 * j);
        }
        out.push(w ^ flip);
        start += 64;
    }
    if start < n {
        scalar::str_empty(&offsets[start..], want_empty, out);
    }
}

/// # Safety
/// The CPU must have AVX-512 F/BW/DQ/VL, AVX2, SSE4.2 and POPCNT.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,sse4.2,popcnt")]
pub(crate) unsafe fn minute_of_hour(ts: &[i64], out: &mut Vec<u8>) {
    out.clear();
    out.reserve(ts.len());
    let limit = _mm512_set1_epi64(1 << 46);
    let neg_limit = _mm512_set1_epi64(-(1 << 46));
    let inv60 = _mm512_set1_pd(1.0 / 60.0);
    let sixty = _mm512_set1_pd(60.0);
    let zero = _mm512_setzero_pd();
    let one = _mm512_set1_pd(1.0);
    let mut i = 0;
    while i + 8 <= ts.len() {
        // SAFETY: i + 8 <= len for the load; the 8 bytes written go to reserved capacity
        // and are counted by set_len right after.
        unsafe {
            let t = _mm512_loadu_si512(ts.as_ptr().add(i).cast());
            let ok = _mm512_cmplt_epi64_mask(t, limit) & _mm512_cmpgt_epi64_mask(t, neg_limit);
            if ok != 0xff {
                out.extend(ts[i..i + 8].iter().map(|&t| scalar::minute_of(t)));
                i += 8;
                continue;
            }
            let f = _mm512_cvtepi64_pd(t); // exact: |t| < 2^46
            let q = _mm512_roundscale_pd::<{ _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC }>(_mm512_mul_pd(f, inv60));
            let r = _mm512_sub_pd(f, _mm512_mul_pd(q, sixty));
            let q = _mm512_mask_add_pd(q, _mm512_cmp_pd_mask::<_CMP_GE_OQ>(r, sixty), q, one);
            let q = _mm512_mask_sub_pd(q, _mm512_cmp_pd_mask::<_CMP_LT_OQ>(r, zero), q, one);
            let h = _mm512_roundscale_pd::<{ _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC }>(_mm512_mul_pd(q, inv60));
            let m = _mm512_sub_pd(q, _mm512_mul_pd(h, sixty));
            let m = _mm512_mask_sub_pd(m, _mm512_cmp_pd_mask::<_CMP_GE_OQ>(m, sixty), m, sixty);
            let m = _mm512_mask_add_pd(m, _mm512_cmp_pd_mask::<_CMP_LT_OQ>(m, zero), m, sixty);
            let bytes = _mm512_cvtepi64_epi8(_mm512_cvtpd_epi64(m)); // 8 bytes in the low lane
            let dst = out.as_mut_ptr().add(out.len());
            std::ptr::write_unaligned(dst.cast::<i64>(), _mm_cvtsi128_si64(bytes));
            out.set_len(out.len() + 8);
        }
        i += 8;
    }
    out.extend(ts[i..].iter().map(|&t| scalar::minute_of(t)));
}

/// # Safety
/// The CPU must have AVX-512 F/BW/DQ/VL, AVX2, SSE4.2 and POPCNT.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,sse4.2,popcnt")]
pub(crate) unsafe fn partition_ids(hashes: &[u64], bits: u32, out: &mut [u16]) {
    assert!((1..=16).contains(&bits), "partition bits must be 1..=16");
    assert_eq!(hashes.len(), out.len(), "partition id output length");
    let shift = _mm_cvtsi32_si128((64 - bits) as i32);
    let mut i = 0;
    while i + 8 <= hashes.len() {
        // SAFETY: i + 8 <= len: a 64-byte load and a 16-byte store inside the slices.
        unsafe {
            let h = _mm512_loadu_si512(hashes.as_ptr().add(i).cast());
            let p = _mm512_cvtepi64_epi16(_mm512_srl_epi64(h, shift));
            _mm_storeu_si128(out.as_mut_ptr().add(i).cast(), p);
        }
        i += 8;
    }
    scalar::partition_ids(&hashes[i..], bits, &mut out[i..]);
}

/// # Safety
/// The CPU must have AVX-512 F/BW/DQ/VL, AVX2, SSE4.2 and POPCNT.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,sse4.2,popcnt")]
pub(crate) unsafe fn bitmap_to_indices(words: &[u64], len: usize, out: &mut Vec<u32>) {
    assert!(len <= u32::MAX as usize, "selection longer than u32");
    let nw = len.div_ceil(64);
    assert!(words.len() >= nw, "bitmap too short");
    // Every 16-bit piece may write 16 lanes: keep 16 spare slots past the worst case.
    out.reserve(len + 16);
    let step = _mm512_set1_epi32(16);
    for (wi, &w0) in words[..nw].iter().enumerate() {
        let w = if wi + 1 == nw && !len.is_multiple_of(64) { w0 & ((1u64 << (len % 64)) - 1) } else { w0 };
        if w == 0 {
            continue;
        }
        let base = (wi * 64) as i32;
        let mut idx = _mm512_add_epi32(
            _mm512_set1_epi32(base),
            _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        );
        for piece in 0..4 {
            let m = (w >> (16 * piece)) as u16;
            if m != 0 {
                // SAFETY: capacity >= len + 16 >= out.len() + 16 (at most `len` indices are
                // ever pushed), so the 64-byte store stays inside the allocation; only the
                // popcount(m) lanes written by the compress are counted by set_len.
                unsafe {
                    let c = _mm512_maskz_compress_epi32(m, idx);
                    _mm512_storeu_si512(out.as_mut_ptr().add(out.len()).cast(), c);
                    out.set_len(out.len() + m.count_ones() as usize);
                }
            }
            idx = _mm512_add_epi32(idx, step);
        }
    }
}

/// Per-type comparison of 64 values to a constant into one bitmap word, with mask compares.
/// The predicate is a const parameter (`_MM_CMPINT_*`), so the run loop of each operator is
/// its own loop with the compare instruction fixed (no per-vector dispatch on the operator).
trait Cmp64: KernelInt {
    /// # Safety
    /// AVX-512 F/BW; `p` points at 64 readable values.
    unsafe fn word<const OP: i32>(p: *const Self, c: Self) -> u64;
}

macro_rules! cmp64_impl {
    ($t:ty, $set1:ident, $cmp:ident) => {
        impl Cmp64 for $t {
            #[inline(always)]
            unsafe fn word<const OP: i32>(p: *const $t, c: $t) -> u64 {
                // SAFETY: the caller guarantees 64 readable values at p and AVX-512 F/BW.
                unsafe {
                    let cv = $set1(c as _);
                    let per = 64 / std::mem::size_of::<$t>();
                    let mut w = 0u64;
                    for j in 0..64 / per {
                        let v = _mm512_loadu_si512(p.add(j * per).cast());
                        w |= ($cmp::<OP>(v, cv) as u64) << (j * per % 64);
                    }
                    w
                }
            }
        }
    };
}

cmp64_impl!(i8, _mm512_set1_epi8, _mm512_cmp_epi8_mask);
cmp64_impl!(u8, _mm512_set1_epi8, _mm512_cmp_epu8_mask);
cmp64_impl!(i16, _mm512_set1_epi16, _mm512_cmp_epi16_mask);
cmp64_impl!(u16, _mm512_set1_epi16, _mm512_cmp_epu16_mask);
cmp64_impl!(i32, _mm512_set1_epi32, _mm512_cmp_epi32_mask);
cmp64_impl!(u32, _mm512_set1_epi32, _mm512_cmp_epu32_mask);
cmp64_impl!(i64, _mm512_set1_epi64, _mm512_cmp_epi64_mask);
cmp64_impl!(u64, _mm512_set1_epi64, _mm512_cmp_epu64_mask);

/// # Safety
/// The CPU must have AVX-512 F/BW/DQ/VL, AVX2, SSE4.2 and POPCNT.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,sse4.2,popcnt")]
pub(crate) unsafe fn cmp<T: KernelInt>(values: &[T], op: CmpOp, c: T, out: &mut Vec<u64>) {
    crate::cmp_by_type!(values, op, c, out)
}

#[inline(always)]
fn cmp_typed<T: Cmp64>(values: &[T], op: CmpOp, c: T, out: &mut Vec<u64>) {
    macro_rules! with {
        ($pred:ident) => {
            // SAFETY: each run holds exactly 64 values; AVX-512 is enabled in the caller
            // (`cmp`), into which this function and the run loop are inlined.
            crate::cmp_by_words(values, op, c, out, |run| unsafe { T::word::<$pred>(run.as_ptr(), c) })
        };
    }
    // Greater-than is "not less or equal", greater-or-equal "not less than".
    match op {
        CmpOp::Eq => with!(_MM_CMPINT_EQ),
        CmpOp::NotEq => with!(_MM_CMPINT_NE),
        CmpOp::Lt => with!(_MM_CMPINT_LT),
        CmpOp::LtEq => with!(_MM_CMPINT_LE),
        CmpOp::Gt => with!(_MM_CMPINT_NLE),
        CmpOp::GtEq => with!(_MM_CMPINT_NLT),
    }
}

// ---------------------------------------------------------------------------------------
// Hash-table probe: 64 control bytes a step
// ---------------------------------------------------------------------------------------

/// 64 control bytes in a `zmm` register.
#[derive(Clone, Copy)]
pub(crate) struct Group(__m512i);

// SAFETY: `vpcmpeqb` into a mask register flags exactly the bytes equal to the tag, and
// `vpmovb2m` exactly those with the top bit set (EMPTY is the only such byte).
unsafe impl crate::group::Group for Group {
    const WIDTH: usize = 64;

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,sse4.2,popcnt")]
    unsafe fn load(ctrl: *const u8) -> Self {
        // SAFETY: 64 readable bytes (the caller's condition 1); `loadu` has no alignment need.
        Group(unsafe { _mm512_loadu_si512(ctrl.cast()) })
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,sse4.2,popcnt")]
    unsafe fn match_tag(self, tag: u8) -> crate::group::BitMask {
        crate::group::BitMask::new(_mm512_cmpeq_epi8_mask(self.0, _mm512_set1_epi8(tag as i8)), 0)
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,sse4.2,popcnt")]
    unsafe fn match_empty(self) -> crate::group::BitMask {
        crate::group::BitMask::new(_mm512_movepi8_mask(self.0), 0)
    }
}

/// Runs `task` with this family's [`Group`], compiled with its features.
///
/// # Safety
/// The CPU must have AVX-512 F/BW/DQ/VL, AVX2, SSE4.2 and POPCNT.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,sse4.2,popcnt")]
pub(crate) unsafe fn with_group<T: crate::group::GroupTask>(task: T) -> T::Output {
    task.run::<Group>()
}
