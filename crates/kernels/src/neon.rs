//! NEON kernels (aarch64 Advanced SIMD: every aarch64 core, Graviton 2/3/4, Apple M,
//! Cortex-A72).
//!
//! Hand-written: 64-bit key hashing (NEON has no 64-bit lane multiply: `fmix64`'s
//! multiplies are built from `umull` and `mul`/`mla` on 32-bit halves), comparisons to bitmaps (lane masks narrowed to bytes, then
//! weighted and pairwise-added into one 64-bit word: NEON has no movemask), "string is
//! (not) empty" over offsets, and `LIKE '%x%'` over a column's bytes (the same words from
//! first/last-byte compares). The other kernels are the scalar bodies compiled with NEON.
//!
//! Every function is `unsafe` only because it needs the CPU features named in its
//! `#[target_feature]`; none reads or writes outside its slices.

use std::arch::aarch64::*;

use crate::scalar::{self, FMIX1, FMIX2, FOLD, SEED0, SEED1};
use crate::{CmpOp, KernelInt};

family_defaults!(target_feature(enable = "neon"));

/// `a * b` modulo 2^64 per 64-bit lane, from 32-bit multiplies.
#[inline(always)]
unsafe fn mul64(a: uint64x2_t, b: uint64x2_t) -> uint64x2_t {
    // SAFETY: register-only NEON intrinsics; callers are NEON functions.
    unsafe {
        let (a_lo, a_hi) = (vmovn_u64(a), vshrn_n_u64::<32>(a));
        let (b_lo, b_hi) = (vmovn_u64(b), vshrn_n_u64::<32>(b));
        let cross = vmla_u32(vmul_u32(a_hi, b_lo), a_lo, b_hi); // low 32 bits of the cross terms
        vaddq_u64(vmull_u32(a_lo, b_lo), vshll_n_u32::<32>(cross))
    }
}

#[inline(always)]
unsafe fn fmix(x: uint64x2_t) -> uint64x2_t {
    // SAFETY: register-only NEON intrinsics.
    unsafe {
        let x = veorq_u64(x, vshrq_n_u64::<33>(x));
        let x = mul64(x, vdupq_n_u64(FMIX1));
        let x = veorq_u64(x, vshrq_n_u64::<33>(x));
        let x = mul64(x, vdupq_n_u64(FMIX2));
        veorq_u64(x, vshrq_n_u64::<33>(x))
    }
}

/// # Safety
/// The CPU must have NEON.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn hash_u64(keys: &[u64], out: &mut [u64]) {
    assert_eq!(keys.len(), out.len(), "hash output length");
    let seed = vdupq_n_u64(SEED0);
    let mut i = 0;
    while i + 2 <= keys.len() {
        // SAFETY: i + 2 <= len of both slices.
        unsafe {
            let x = vld1q_u64(keys.as_ptr().add(i));
            vst1q_u64(out.as_mut_ptr().add(i), fmix(veorq_u64(x, seed)));
        }
        i += 2;
    }
    scalar::hash_u64_batch(&keys[i..], &mut out[i..]);
}

/// # Safety
/// The CPU must have NEON.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn hash_u128(keys: &[u128], out: &mut [u64]) {
    assert_eq!(keys.len(), out.len(), "hash output length");
    let s0 = vdupq_n_u64(SEED0);
    let s1 = vdupq_n_u64(SEED1);
    let fold = vdupq_n_u64(FOLD);
    let mut i = 0;
    while i + 2 <= keys.len() {
        // SAFETY: i + 2 <= len: `ld2` reads keys i and i + 1 (32 bytes) de-interleaved into
        // low words and high words; a 16-byte store of 2 hashes.
        unsafe {
            let kv = vld2q_u64(keys.as_ptr().add(i).cast::<u64>());
            let (lo, hi) = (kv.0, kv.1);
            let m = mul64(veorq_u64(hi, s1), fold);
            let rot = vorrq_u64(vshlq_n_u64::<32>(m), vshrq_n_u64::<32>(m));
            vst1q_u64(out.as_mut_ptr().add(i), fmix(veorq_u64(veorq_u64(lo, s0), rot)));
        }
        i += 2;
    }
    scalar::hash_u128_batch(&keys[i..], &mut out[i..]);
}

/// One bitmap word from four 16-lane byte masks (0xff / 0x00 per lane), lane `16 * j + i`
/// of mask `j` giving bit `16 * j + i`.
#[inline(always)]
unsafe fn masks_to_word(m: [uint8x16_t; 4]) -> u64 {
    // SAFETY: register-only NEON intrinsics.
    unsafe {
        let weights: [u8; 16] = [1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128];
        let w = vld1q_u8(weights.as_ptr());
        let a = vandq_u8(m[0], w);
        let b = vandq_u8(m[1], w);
        let c = vandq_u8(m[2], w);
        let d = vandq_u8(m[3], w);
        // Three pairwise adds fold each run of 8 weighted lanes into one byte.
        let ab = vpaddq_u8(a, b);
        let cd = vpaddq_u8(c, d);
        let abcd = vpaddq_u8(ab, cd);
        let x = vpaddq_u8(abcd, abcd);
        vgetq_lane_u64::<0>(vreinterpretq_u64_u8(x))
    }
}

/// Per-type comparison of 16 values to a constant, giving a 16-lane byte mask.
trait Cmp16: KernelInt {
    /// # Safety
    /// NEON; `p` points at 16 readable values.
    unsafe fn mask16(p: *const Self, op: CmpOp, c: Self) -> uint8x16_t;
}

macro_rules! cmp_ops {
    ($v:expr, $c:expr, $op:expr, $eq:ident, $gt:ident, $ge:ident, $not:ident) => {
        match $op {
            CmpOp::Eq => $eq($v, $c),
            CmpOp::NotEq => $not($eq($v, $c)),
            CmpOp::Gt => $gt($v, $c),
            CmpOp::GtEq => $ge($v, $c),
            CmpOp::Lt => $gt($c, $v),
            CmpOp::LtEq => $ge($c, $v),
        }
    };
}

#[inline(always)]
unsafe fn not64(x: uint64x2_t) -> uint64x2_t {
    // SAFETY: register-only.
    unsafe { vreinterpretq_u64_u32(vmvnq_u32(vreinterpretq_u32_u64(x))) }
}

macro_rules! cmp16_8 {
    ($t:ty, $ld:ident, $dup:ident, $eq:ident, $gt:ident, $ge:ident) => {
        impl Cmp16 for $t {
            #[inline(always)]
            unsafe fn mask16(p: *const $t, op: CmpOp, c: $t) -> uint8x16_t {
                // SAFETY: 16 readable values at p (caller); NEON.
                unsafe {
                    let v = $ld(p);
                    let c = $dup(c);
                    cmp_ops!(v, c, op, $eq, $gt, $ge, vmvnq_u8)
                }
            }
        }
    };
}
cmp16_8!(i8, vld1q_s8, vdupq_n_s8, vceqq_s8, vcgtq_s8, vcgeq_s8);
cmp16_8!(u8, vld1q_u8, vdupq_n_u8, vceqq_u8, vcgtq_u8, vcgeq_u8);

macro_rules! cmp16_16 {
    ($t:ty, $ld:ident, $dup:ident, $eq:ident, $gt:ident, $ge:ident) => {
        impl Cmp16 for $t {
            #[inline(always)]
            unsafe fn mask16(p: *const $t, op: CmpOp, c: $t) -> uint8x16_t {
                // SAFETY: 16 readable values at p (caller); NEON.
                unsafe {
                    let c = $dup(c);
                    let a = cmp_ops!($ld(p), c, op, $eq, $gt, $ge, vmvnq_u16);
                    let b = cmp_ops!($ld(p.add(8)), c, op, $eq, $gt, $ge, vmvnq_u16);
                    vcombine_u8(vmovn_u16(a), vmovn_u16(b))
                }
            }
        }
    };
}
cmp16_16!(i16, vld1q_s16, vdupq_n_s16, vceqq_s16, vcgtq_s16, vcgeq_s16);
cmp16_16!(u16, vld1q_u16, vdupq_n_u16, vceqq_u16, vcgtq_u16, vcgeq_u16);

macro_rules! cmp16_32 {
    ($t:ty, $ld:ident, $dup:ident, $eq:ident, $gt:ident, $ge:ident) => {
        impl Cmp16 for $t {
            #[inline(always)]
            unsafe fn mask16(p: *const $t, op: CmpOp, c: $t) -> uint8x16_t {
                // SAFETY: 16 readable values at p (caller); NEON.
                unsafe {
                    let c = $dup(c);
                    let m = |k: usize| cmp_ops!($ld(p.add(4 * k)), c, op, $eq, $gt, $ge, vmvnq_u32);
                    let lo = vcombine_u16(vmovn_u32(m(0)), vmovn_u32(m(1)));
                    let hi = vcombine_u16(vmovn_u32(m(2)), vmovn_u32(m(3)));
                    vcombine_u8(vmovn_u16(lo), vmovn_u16(hi))
                }
            }
        }
    };
}
cmp16_32!(i32, vld1q_s32, vdupq_n_s32, vceqq_s32, vcgtq_s32, vcgeq_s32);
cmp16_32!(u32, vld1q_u32, vdupq_n_u32, vceqq_u32, vcgtq_u32, vcgeq_u32);

macro_rules! cmp16_64 {
    ($t:ty, $ld:ident, $dup:ident, $eq:ident, $gt:ident, $ge:ident) => {
        impl Cmp16 for $t {
            #[inline(always)]
            unsafe fn mask16(p: *const $t, op: CmpOp, c: $t) -> uint8x16_t {
                // SAFETY: 16 readable values at p (caller); NEON.
                unsafe {
                    let c = $dup(c);
                    let m = |k: usize| vmovn_u64(cmp_ops!($ld(p.add(2 * k)), c, op, $eq, $gt, $ge, not64));
                    let q = |k: usize| vmovn_u32(vcombine_u32(m(2 * k), m(2 * k + 1)));
                    let lo = vcombine_u16(q(0), q(1));
                    let hi = vcombine_u16(q(2), q(3));
                    vcombine_u8(vmovn_u16(lo), vmovn_u16(hi))
                }
            }
        }
    };
}
cmp16_64!(i64, vld1q_s64, vdupq_n_s64, vceqq_s64, vcgtq_s64, vcgeq_s64);
cmp16_64!(u64, vld1q_u64, vdupq_n_u64, vceqq_u64, vcgtq_u64, vcgeq_u64);

/// # Safety
/// The CPU must have NEON.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn cmp<T: KernelInt>(values: &[T], op: CmpOp, c: T, out: &mut Vec<u64>) {
    crate::cmp_by_type!(values, op, c, out)
}

#[inline(always)]
fn cmp_typed<T: Cmp16>(values: &[T], op: CmpOp, c: T, out: &mut Vec<u64>) {
    crate::cmp_by_words(values, op, c, out, |run| {
        let p = run.as_ptr();
        // SAFETY: the run holds 64 values, read as four runs of 16; NEON is enabled in the
        // caller (`cmp`), into which this function and the run loop are inlined.
        unsafe {
            masks_to_word([T::mask16(p, op, c), T::mask16(p.add(16), op, c), T::mask16(p.add(32), op, c), T::mask16(p.add(48), op, c)])
        }
    })
}

/// Bitmap of strings containing `needle`: [`scalar::contains`], 64 starts a step over the
/// strings' bytes as one haystack ([`crate::first_last_rows`]): four 16-byte compares with
/// the first byte and four with the last, folded into one word by [`masks_to_word`].
///
/// # Safety
/// The CPU must have NEON.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn contains(offsets: &[i32], data: &[u8], needle: &[u8], out: &mut Vec<u64>) {
    let k = needle.len();
    let (first, last) = crate::needle_ends(needle);
    crate::first_last_rows::<64>(
        offsets,
        data,
        needle,
        out,
        // SAFETY: the driver calls with pos + 64 + k - 1 <= offsets[n] <= data.len(), so the
        // eight 16-byte loads (at pos + 16j and pos + k - 1 + 16j, j < 4) are inside `data`;
        // NEON is enabled for this function, into which the closure is inlined.
        |pos| unsafe {
            let (p, q) = (data.as_ptr().add(pos), data.as_ptr().add(pos + k - 1));
            let (first_b, last_b) = (vdupq_n_u8(first), vdupq_n_u8(last));
            let m = |j: usize| vandq_u8(vceqq_u8(vld1q_u8(p.add(16 * j)), first_b), vceqq_u8(vld1q_u8(q.add(16 * j)), last_b));
            masks_to_word([m(0), m(1), m(2), m(3)])
        },
        |s| scalar::contains_one(s, needle),
    )
}

/// # Safety
/// The CPU must have NEON.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn str_empty(offsets: &[i32], want_empty: bool, out: &mut Vec<u64>) {
    let n = offsets.len().saturating_sub(1);
    out.reserve(n.div_ceil(64));
    let flip = if want_empty { 0 } else { u64::MAX };
    let mut start = 0;
    while start + 64 <= n {
        let p = offsets.as_ptr();
        // SAFETY: the highest index read is start + 63 + 1 <= n = offsets.len() - 1.
        let w = unsafe {
            let m = |base: usize| {
                let e = |k: usize| vceqq_s32(vld1q_s32(p.add(base + 4 * k)), vld1q_s32(p.add(base + 4 * k + 1)));
                let lo = vcombine_u16(vmovn_u32(e(0)), vmovn_u32(e(1)));
                let hi = vcombine_u16(vmovn_u32(e(2)), vmovn_u32(e(3)));
                vcombine_u8(vmovn_u16(lo), vmovn_u16(hi))
            };
            masks_to_word([m(start), m(start + 16), m(start + 32), m(start + 48)])
        };
        out.push(w ^ flip);
        start += 64;
    }
    if start < n {
        scalar::str_empty(&offsets[start..], want_empty, out);
    }
}

// ---------------------------------------------------------------------------------------
// Hash-table probe: 16 control bytes a step
// ---------------------------------------------------------------------------------------

/// 16 control bytes in a `q` register.
#[derive(Clone, Copy)]
pub(crate) struct Group(uint8x16_t);

/// NEON has no movemask: `shrn` narrows each 16-bit lane of a byte-compare result by 4,
/// leaving 4 bits a byte in a `u64` (folly F14, zstd); one bit of each nibble is kept.
#[inline]
#[target_feature(enable = "neon")]
fn nibble_mask(eq: uint8x16_t) -> crate::group::BitMask {
    let narrowed = vshrn_n_u16::<4>(vreinterpretq_u16_u8(eq));
    let bits = vget_lane_u64::<0>(vreinterpret_u64_u8(narrowed));
    crate::group::BitMask::new(bits & 0x8888_8888_8888_8888, 2)
}

// SAFETY: `cmeq` flags exactly the bytes equal to the tag (0xff) and `cmlt #0` exactly those
// with the top bit set (EMPTY is the only such byte); `nibble_mask` keeps bit 4i + 3 of
// slot i, set iff the byte was 0xff.
unsafe impl crate::group::Group for Group {
    const WIDTH: usize = 16;

    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn load(ctrl: *const u8) -> Self {
        // SAFETY: 16 readable bytes (the caller's condition 1); `ld1` has no alignment need.
        Group(unsafe { vld1q_u8(ctrl) })
    }

    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn match_tag(self, tag: u8) -> crate::group::BitMask {
        nibble_mask(vceqq_u8(self.0, vdupq_n_u8(tag)))
    }

    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn match_empty(self) -> crate::group::BitMask {
        nibble_mask(vreinterpretq_u8_s8(vshrq_n_s8::<7>(vreinterpretq_s8_u8(self.0))))
    }
}

/// Runs `task` with this family's [`Group`], compiled with its features.
///
/// # Safety
/// The CPU must have NEON.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn with_group<T: crate::group::GroupTask>(task: T) -> T::Output {
    task.run::<Group>()
}
