//! SVE kernels (aarch64 Scalable Vector Extension; Graviton 3 (256-bit), Graviton 4 and
//! Neoverse V2 (128-bit), A64FX (512-bit)). Vector-length agnostic: the same code runs at
//! every vector length, with `whilelo` predicates covering the tail (no scalar epilogue).
//!
//! SVE intrinsics are not stable in Rust, so the hand-written kernels are `asm!` loops in
//! `#[target_feature(enable = "sve")]` functions: 64-bit key hashing (`mul z.d` is a 64-bit
//! lane multiply, which NEON lacks), 32-bit keys widened by `ld1w` into 64-bit lanes, and
//! 128-bit keys de-interleaved by `ld2d`. The comparison, empty-string and string-hash
//! kernels are NEON's (bitmaps are NEON-shaped; the string hash is per string); the rest
//! are the scalar bodies compiled with SVE enabled, which LLVM may vectorise with SVE.
//!
//! Every function is `unsafe` only because it needs the CPU features named in its
//! `#[target_feature]`; none reads or writes outside its slices (predicated loads and
//! stores touch only active lanes).

use std::arch::asm;

use crate::scalar::{FMIX1, FMIX2, FOLD, SEED0, SEED1};

family_defaults!(target_feature(enable = "sve,neon"));
pub(crate) use crate::neon::{cmp, hash_strs, str_empty};

/// `hash_u64` and `hash_u32`: the same loop, differing only in the load that brings the keys
/// into 64-bit lanes (`ld1d`, or `ld1w` which zero-extends 32-bit keys).
macro_rules! sve_hash_fixed {
    ($name:ident, $t:ty, $load:literal) => {
        /// # Safety
        /// The CPU must have SVE and NEON.
        #[target_feature(enable = "sve,neon")]
        pub(crate) unsafe fn $name(keys: &[$t], out: &mut [u64]) {
            assert_eq!(keys.len(), out.len(), "hash output length");
            if keys.is_empty() {
                return;
            }
            // SAFETY: lanes i..min(i + VL/64, n) are active under p0 = whilelo(i, n), so the
            // predicated load and st1d touch only keys[0..n] and out[0..n]; the asm clobbers
            // only the registers listed.
            unsafe {
                asm!(
                    "mov {i}, #0",
                    "dup z1.d, {s0}",
                    "dup z2.d, {m1}",
                    "dup z3.d, {m2}",
                    "whilelo p0.d, {i}, {n}",
                    "2:",
                    $load,
                    "eor z0.d, z0.d, z1.d",
                    "lsr z4.d, z0.d, #33",
                    "eor z0.d, z0.d, z4.d",
                    "mul z0.d, p0/m, z0.d, z2.d",
                    "lsr z4.d, z0.d, #33",
                    "eor z0.d, z0.d, z4.d",
                    "mul z0.d, p0/m, z0.d, z3.d",
                    "lsr z4.d, z0.d, #33",
                    "eor z0.d, z0.d, z4.d",
                    "st1d {{z0.d}}, p0, [{dst}, {i}, lsl #3]",
                    "incd {i}",
                    "whilelo p0.d, {i}, {n}",
                    "b.first 2b",
                    src = in(reg) keys.as_ptr(),
                    dst = in(reg) out.as_mut_ptr(),
                    n = in(reg) keys.len(),
                    i = out(reg) _,
                    s0 = in(reg) SEED0,
                    m1 = in(reg) FMIX1,
                    m2 = in(reg) FMIX2,
                    out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _,
                    out("p0") _,
                    options(nostack),
                );
            }
        }
    };
}

sve_hash_fixed!(hash_u64, u64, "ld1d {{z0.d}}, p0/z, [{src}, {i}, lsl #3]");
sve_hash_fixed!(hash_u32, u32, "ld1w {{z0.d}}, p0/z, [{src}, {i}, lsl #2]");

/// # Safety
/// The CPU must have SVE and NEON.
#[target_feature(enable = "sve,neon")]
pub(crate) unsafe fn hash_u128(keys: &[u128], out: &mut [u64]) {
    assert_eq!(keys.len(), out.len(), "hash output length");
    if keys.is_empty() {
        return;
    }
    // SAFETY: p0 = whilelo(i, n) activates keys i..; `ld2d` reads the two words of each
    // active key (16 bytes at src + 16 * i, as src advances by 2 vector lengths per VL/64
    // keys), st1d writes one hash per active lane of out[0..n].
    unsafe {
        asm!(
            "mov {i}, #0",
            "dup z2.d, {s0}",
            "dup z3.d, {s1}",
            "dup z4.d, {fold}",
            "dup z5.d, {m1}",
            "dup z6.d, {m2}",
            "whilelo p0.d, {i}, {n}",
            "2:",
            "ld2d {{z0.d, z1.d}}, p0/z, [{src}]",
            // m = rotl((hi ^ SEED1) * FOLD, 32)
            "eor z1.d, z1.d, z3.d",
            "mul z1.d, p0/m, z1.d, z4.d",
            "lsl z7.d, z1.d, #32",
            "lsr z1.d, z1.d, #32",
            "orr z1.d, z1.d, z7.d",
            // x = lo ^ SEED0 ^ m, then fmix64
            "eor z0.d, z0.d, z2.d",
            "eor z0.d, z0.d, z1.d",
            "lsr z7.d, z0.d, #33",
            "eor z0.d, z0.d, z7.d",
            "mul z0.d, p0/m, z0.d, z5.d",
            "lsr z7.d, z0.d, #33",
            "eor z0.d, z0.d, z7.d",
            "mul z0.d, p0/m, z0.d, z6.d",
            "lsr z7.d, z0.d, #33",
            "eor z0.d, z0.d, z7.d",
            "st1d {{z0.d}}, p0, [{dst}, {i}, lsl #3]",
            "addvl {src}, {src}, #2",
            "incd {i}",
            "whilelo p0.d, {i}, {n}",
            "b.first 2b",
            src = inout(reg) keys.as_ptr() => _,
            dst = in(reg) out.as_mut_ptr(),
            n = in(reg) keys.len(),
            i = out(reg) _,
            s0 = in(reg) SEED0,
            s1 = in(reg) SEED1,
            fold = in(reg) FOLD,
            m1 = in(reg) FMIX1,
            m2 = in(reg) FMIX2,
            out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _, out("v5") _, out("v6") _, out("v7") _,
            out("p0") _,
            options(nostack),
        );
    }
}

// ---------------------------------------------------------------------------------------
// Hash-table probe: 64 control bytes a step, in steps of the vector length
// ---------------------------------------------------------------------------------------

/// 64 control bytes starting at a pointer. SVE registers cannot be held in Rust values, so
/// each compare loads the bytes itself: `min(VL, 64)` bytes per `ld1b` under a `whilelo`
/// predicate (one step at 512 bits and more, four at 128), compared into a predicate that
/// `str` writes out as one bit per byte.
#[derive(Clone, Copy)]
pub(crate) struct Group(*const u8);

impl Group {
    /// Bit i set where byte i of the group satisfies the compare `cmp` (an SVE instruction
    /// writing p1 from z0 under p0, with the tag in z1).
    #[inline]
    #[target_feature(enable = "sve,neon")]
    unsafe fn matches<const EMPTIES: bool>(self, tag: u8) -> u64 {
        let mut bits = 0u64;
        let mut off = 0usize;
        while off < crate::group::MAX_WIDTH {
            // A predicate register is VL/8 bytes, at most 256 (2048-bit vectors).
            let mut pred = [0u8; 32];
            let mut vl: usize;
            // SAFETY: p0 = whilelo(off, MAX_WIDTH) activates lanes off..min(off + VL, 64)
            // only, so the predicated load reads inside the 64 bytes the caller vouched for
            // (`load`'s condition 1); `str p1` writes VL/8 <= 32 bytes into `pred`; the asm
            // clobbers only the registers listed.
            unsafe {
                if EMPTIES {
                    asm!(
                        "whilelo p0.b, {off}, {end}",
                        "ld1b {{z0.b}}, p0/z, [{base}, {off}]",
                        "cmplt p1.b, p0/z, z0.b, #0",
                        "str p1, [{buf}]",
                        "cntb {vl}",
                        off = in(reg) off,
                        end = in(reg) crate::group::MAX_WIDTH,
                        base = in(reg) self.0,
                        buf = in(reg) pred.as_mut_ptr(),
                        vl = out(reg) vl,
                        out("v0") _, out("p0") _, out("p1") _,
                        options(nostack),
                    );
                } else {
                    asm!(
                        "whilelo p0.b, {off}, {end}",
                        "ld1b {{z0.b}}, p0/z, [{base}, {off}]",
                        "dup z1.b, {tag:w}",
                        "cmpeq p1.b, p0/z, z0.b, z1.b",
                        "str p1, [{buf}]",
                        "cntb {vl}",
                        off = in(reg) off,
                        end = in(reg) crate::group::MAX_WIDTH,
                        base = in(reg) self.0,
                        tag = in(reg) tag as u32,
                        buf = in(reg) pred.as_mut_ptr(),
                        vl = out(reg) vl,
                        out("v0") _, out("v1") _, out("p0") _, out("p1") _,
                        options(nostack),
                    );
                }
            }
            // Lanes past the 64th are inactive, so their predicate bits are zero.
            bits |= u64::from_le_bytes(pred[..8].try_into().expect("8 bytes")) << off;
            off += vl;
        }
        bits
    }
}

// SAFETY: `cmpeq` flags exactly the bytes equal to the tag and `cmplt #0` exactly those
// with the top bit set (EMPTY is the only such byte); predicate bit i is byte lane i.
unsafe impl crate::group::Group for Group {
    const WIDTH: usize = crate::group::MAX_WIDTH;

    #[inline]
    #[target_feature(enable = "sve,neon")]
    unsafe fn load(ctrl: *const u8) -> Self {
        Group(ctrl)
    }

    #[inline]
    #[target_feature(enable = "sve,neon")]
    unsafe fn match_tag(self, tag: u8) -> crate::group::BitMask {
        // SAFETY: the caller's conditions of `load` and the features carry over.
        crate::group::BitMask::new(unsafe { self.matches::<false>(tag) }, 0)
    }

    #[inline]
    #[target_feature(enable = "sve,neon")]
    unsafe fn match_empty(self) -> crate::group::BitMask {
        // SAFETY: as above.
        crate::group::BitMask::new(unsafe { self.matches::<true>(0) }, 0)
    }
}

/// Runs `task` with this family's [`Group`], compiled with its features.
///
/// # Safety
/// The CPU must have SVE and NEON.
#[target_feature(enable = "sve,neon")]
pub(crate) unsafe fn with_group<T: crate::group::GroupTask>(task: T) -> T::Output {
    task.run::<Group>()
}
