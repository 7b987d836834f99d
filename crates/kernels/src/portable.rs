//! The `portable` family: lane code on the [`wide`] crate, for targets and CPUs that no
//! hand-written family covers (x86-64 without AVX2, aarch64 baseline code, riscv64, wasm32).
//!
//! `wide`'s 128-bit types compile to whatever the target enables at build time (SSE2 on any
//! x86-64, NEON on aarch64, `simd128` on wasm32 when enabled, plain arrays elsewhere), so
//! this family needs no runtime detection: it runs on every CPU of the target and is
//! dispatched below the ISA families and above `scalar`.
//!
//! Hand-written here: comparisons of the 8-, 16- and 32-bit integer types to bitmaps
//! (signed lane compares; unsigned values with the sign bit flipped), the "string is (not) empty" test
//! over offsets, the substring search's first/last-byte filter (16 candidate positions a
//! step) and the probe's control-byte group (16 bytes, hashbrown's SSE2 group). Hashing keeps
//! the scalar bodies: `wide` has no 64-bit lane multiply below AVX-512, and an emulated one
//! is slower than the scalar `mul`. Every other kernel is the scalar body.
//!
//! No function here is `unsafe` for a reason of its own: they share the families'
//! signatures (`unsafe fn`), and none reads or writes outside its slices.

use wide::{CmpEq, CmpGt, i8x16, i16x8, i32x4, u8x16};

use crate::scalar;
use crate::{CmpOp, KernelInt};

family_defaults!(inline);

/// Per-type comparison of a slice with a constant into bitmap words.
trait Cmp: KernelInt {
    fn bitmap(values: &[Self], op: CmpOp, c: Self, out: &mut Vec<u64>);
}

/// `$t` compared in lanes of the signed type `$s` (`$v` = its 128-bit vector of `$lanes`):
/// signed types as they are, unsigned ones with the sign bit flipped (`$flip`), which maps
/// their order onto the signed order. The operator is matched once per word of 64 values,
/// so each of the six inner loops is straight-line lane code.
macro_rules! cmp_lanes {
    ($t:ty, $s:ty, $v:ident, $lanes:expr, $flip:expr) => {
        impl Cmp for $t {
            #[inline(always)]
            fn bitmap(values: &[$t], op: CmpOp, c: $t, out: &mut Vec<u64>) {
                let flip = $v::splat($flip);
                let cv = $v::splat(c as $s) ^ flip;
                #[inline(always)]
                fn fold(values: &[$t], flip: $v, f: impl Fn($v) -> i32) -> u64 {
                    let lane_bits = (1u64 << $lanes) - 1;
                    let mut w = 0u64;
                    for (j, chunk) in values.chunks_exact($lanes).enumerate() {
                        let mut a = [0 as $s; $lanes];
                        for (d, &x) in a.iter_mut().zip(chunk) {
                            *d = x as $s;
                        }
                        w |= (f($v::new(a) ^ flip) as u64 & lane_bits) << (j * $lanes);
                    }
                    w
                }
                crate::cmp_by_words(values, op, c, out, |run| match op {
                    CmpOp::Eq => fold(run, flip, |v| v.cmp_eq(cv).move_mask()),
                    CmpOp::NotEq => !fold(run, flip, |v| v.cmp_eq(cv).move_mask()),
                    CmpOp::Gt => fold(run, flip, |v| v.cmp_gt(cv).move_mask()),
                    CmpOp::LtEq => !fold(run, flip, |v| v.cmp_gt(cv).move_mask()),
                    CmpOp::Lt => fold(run, flip, |v| cv.cmp_gt(v).move_mask()),
                    CmpOp::GtEq => !fold(run, flip, |v| cv.cmp_gt(v).move_mask()),
                })
            }
        }
    };
}

cmp_lanes!(i8, i8, i8x16, 16, 0);
cmp_lanes!(u8, i8, i8x16, 16, i8::MIN);
cmp_lanes!(i16, i16, i16x8, 8, 0);
cmp_lanes!(u16, i16, i16x8, 8, i16::MIN);
cmp_lanes!(i32, i32, i32x4, 4, 0);
cmp_lanes!(u32, i32, i32x4, 4, i32::MIN);

/// 64-bit values keep the scalar kernel: below SSE4.2 (and on NEON) `wide` builds 64-bit
/// lane compares from 32-bit ones, which measured 0.5x the scalar loop.
macro_rules! cmp_scalar_body {
    ($($t:ty),*) => {$(
        impl Cmp for $t {
            #[inline(always)]
            fn bitmap(values: &[$t], op: CmpOp, c: $t, out: &mut Vec<u64>) {
                scalar::cmp_scalar(values, op, c, out)
            }
        }
    )*};
}
cmp_scalar_body!(i64, u64);

/// `values[i] <op> c` into bitmap words: [`scalar::cmp_scalar`].
///
/// # Safety
/// None beyond the signature shared with the ISA families (no CPU feature is needed).
#[inline]
pub(crate) unsafe fn cmp<T: KernelInt>(values: &[T], op: CmpOp, c: T, out: &mut Vec<u64>) {
    // Route through the per-type implementation; T is one of the eight kernel ints.
    crate::cmp_by_type!(values, op, c, out)
}

#[inline(always)]
fn cmp_typed<T: Cmp>(values: &[T], op: CmpOp, c: T, out: &mut Vec<u64>) {
    T::bitmap(values, op, c, out)
}

/// Bitmap of empty (or non-empty) strings from offsets: [`scalar::str_empty`].
///
/// # Safety
/// None beyond the shared signature.
#[inline]
pub(crate) unsafe fn str_empty(offsets: &[i32], want_empty: bool, out: &mut Vec<u64>) {
    let n = offsets.len().saturating_sub(1);
    out.reserve(n.div_ceil(64));
    let flip = if want_empty { 0 } else { u64::MAX };
    let mut start = 0;
    while start + 64 <= n {
        // offsets[start ..= start + 64]: 65 values, all inside `offsets` (n + 1 of them).
        let o = &offsets[start..start + 65];
        let mut w = 0u64;
        for j in 0..16 {
            let at = 4 * j;
            let a = i32x4::new([o[at], o[at + 1], o[at + 2], o[at + 3]]);
            let b = i32x4::new([o[at + 1], o[at + 2], o[at + 3], o[at + 4]]);
            w |= (a.cmp_eq(b).move_mask() as u64 & 0xf) << at;
        }
        out.push(w ^ flip);
        start += 64;
    }
    if start < n {
        scalar::str_empty(&offsets[start..], want_empty, out);
    }
}

/// Loads 16 bytes of `s` from `at` (`at + 16 <= s.len()`).
#[inline(always)]
fn load16(s: &[u8], at: usize) -> u8x16 {
    let mut a = [0u8; 16];
    a.copy_from_slice(&s[at..at + 16]);
    u8x16::new(a)
}

/// Bits of the 16 bytes of `v` equal to `b`.
#[inline(always)]
fn eq_mask(v: u8x16, b: u8x16) -> u32 {
    (v.cmp_eq(b).move_mask() as u32) & 0xffff
}

/// Substring test with the first/last-byte filter ([`crate::first_last_search`]): 16
/// candidate positions a step.
#[inline(always)]
fn contains_one(hay: &[u8], needle: &[u8]) -> bool {
    let (Some(&first), Some(&last)) = (needle.first(), needle.last()) else { return true };
    let k = needle.len();
    let (first_b, last_b) = (u8x16::splat(first), u8x16::splat(last));
    crate::first_last_search::<16>(hay, needle, memchr_one, |pos| {
        // The driver calls with pos + 15 + k - 1 < hay.len(): both loads are inside `hay`.
        u64::from(eq_mask(load16(hay, pos), first_b) & eq_mask(load16(hay, pos + k - 1), last_b))
    })
}

#[inline(always)]
fn memchr_one(hay: &[u8], b: u8) -> bool {
    let bv = u8x16::splat(b);
    let mut pos = 0;
    while pos + 16 <= hay.len() {
        if eq_mask(load16(hay, pos), bv) != 0 {
            return true;
        }
        pos += 16;
    }
    hay[pos..].contains(&b)
}

/// Bitmap of strings containing `needle`: [`scalar::contains`].
///
/// # Safety
/// None beyond the shared signature.
#[inline]
pub(crate) unsafe fn contains(offsets: &[i32], data: &[u8], needle: &[u8], out: &mut Vec<u64>) {
    let k = needle.len();
    let (first, last) = crate::needle_ends(needle);
    let (first_b, last_b) = (u8x16::splat(first), u8x16::splat(last));
    crate::first_last_rows::<16>(
        offsets,
        data,
        needle,
        out,
        // The driver calls with pos + 16 + k - 1 <= data.len(): both loads are inside `data`.
        |pos| u64::from(eq_mask(load16(data, pos), first_b) & eq_mask(load16(data, pos + k - 1), last_b)),
        |s| contains_one(s, needle),
    )
}

// ---------------------------------------------------------------------------------------
// Hash-table probe: 16 control bytes a step
// ---------------------------------------------------------------------------------------

/// 16 control bytes in a `wide::u8x16` (an SSE2 register on x86-64, NEON on aarch64).
#[derive(Clone, Copy)]
pub(crate) struct Group(u8x16);

// SAFETY: `cmp_eq` flags exactly the bytes equal to the tag and `move_mask` moves each
// byte's top bit to bit i, so both masks are exact (EMPTY is the only byte with its top bit
// set).
unsafe impl crate::group::Group for Group {
    const WIDTH: usize = 16;

    #[inline(always)]
    unsafe fn load(ctrl: *const u8) -> Self {
        // SAFETY: 16 readable bytes at `ctrl` (the caller's condition 1); `[u8; 16]` has
        // alignment 1.
        Group(u8x16::new(unsafe { ctrl.cast::<[u8; 16]>().read() }))
    }

    #[inline(always)]
    unsafe fn match_tag(self, tag: u8) -> crate::group::BitMask {
        crate::group::BitMask::new(u64::from(eq_mask(self.0, u8x16::splat(tag))), 0)
    }

    #[inline(always)]
    unsafe fn match_empty(self) -> crate::group::BitMask {
        crate::group::BitMask::new((self.0.move_mask() as u32 & 0xffff) as u64, 0)
    }
}
