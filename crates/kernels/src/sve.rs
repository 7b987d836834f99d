//! SVE kernels (aarch64 Scalable Vector Extension; Graviton 3 (256-bit), Graviton 4 and
//! Neoverse V2 (128-bit), A64FX (512-bit)). Vector-length agnostic: the same code runs at
//! every vector length, with `whilelo` predicates covering the tail (no scalar epilogue).
//!
//! SVE intrinsics are not stable in Rust, so the hand-written kernels are `asm!` loops in
//! `#[target_feature(enable = "sve")]` functions: 64-bit key hashing (`mul z.d` is a 64-bit
//! lane multiply, which NEON lacks), 32-bit keys widened by `ld1w` into 64-bit lanes, and
//! 128-bit keys de-interleaved by `ld2d`; comparisons of the eight integer types with a
//! constant and the empty-string test over offsets, compared into predicates (`cmpeq`,
//! `cmpgt`/`cmphi` and the rest, signed and unsigned) that `str` writes out and a few
//! word operations compact into bitmaps; the substring search's first/last-byte filter
//! (`cmpeq` of the first byte, then of the last byte under that predicate, a vector of
//! candidate positions a step). The string hash is NEON's (it works per string); the rest
//! are the scalar bodies compiled with SVE enabled, which LLVM may vectorise with SVE.
//!
//! Every function is `unsafe` only because it needs the CPU features named in its
//! `#[target_feature]`; none reads or writes outside its slices (predicated loads and
//! stores touch only active lanes).

use std::arch::asm;

use crate::scalar::{self, FMIX1, FMIX2, FOLD, SEED0, SEED1};
use crate::{CmpOp, KernelInt};

family_defaults!(target_feature(enable = "sve,neon"));
pub(crate) use crate::neon::hash_strs;

/// A fixed-width key hash whose `$load` brings the keys into 64-bit lanes (`hash_u64`:
/// `ld1d`).
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
// Comparisons into bitmaps: predicates stored, then compacted
// ---------------------------------------------------------------------------------------

/// Values per block of the compare loop: the stored predicates of a block of 64-bit values
/// take `BLOCK` bytes (one predicate bit per byte of a lane).
const BLOCK: usize = 4096;
/// Bytes of the predicate buffer: a block's predicates plus one more predicate register
/// (at most 256 bytes, 2048-bit vectors), since the last `str` writes a whole register.
const PRED_BYTES: usize = BLOCK + 256;

/// One compare loop over `{n}` lanes of size `$sz` (`b`, `h`, `s`, `d`; `$inc` its `inc`
/// instruction): `$pre` runs once (a broadcast of the constant), then per vector `$ld`
/// loads lanes `{i}..` into z0 (and z1), `$cmp` compares z0 with z1 into p1 under p0 =
/// whilelo(i, n), and `str p1` appends the predicate (VL/8 bytes) at `{buf}`, which
/// advances. The operands (`src`, `n`, `buf` and what `$pre`/`$ld` name) follow the `;`.
macro_rules! pred_loop {
    ($sz:literal, $inc:literal, $pre:literal, $ld:literal, $cmp:literal; $($operands:tt)*) => {
        asm!(
            "mov {i}, #0",
            $pre,
            concat!("whilelo p0.", $sz, ", {i}, {n}"),
            "2:",
            $ld,
            concat!($cmp, " p1.", $sz, ", p0/z, z0.", $sz, ", z1.", $sz),
            "str p1, [{buf}]",
            "addpl {buf}, {buf}, #1",
            concat!($inc, " {i}"),
            concat!("whilelo p0.", $sz, ", {i}, {n}"),
            "b.first 2b",
            $($operands)*
            i = out(reg) _,
            out("v0") _, out("v1") _, out("p0") _, out("p1") _,
            options(nostack),
        )
    };
}

/// Per-type compare of up to [`BLOCK`] values with a constant into `pred` (lane `i` at
/// predicate bit `i * size_of::<Self>()`).
trait SveCmp: KernelInt {
    /// # Safety
    /// SVE; `values.len() <= BLOCK`; `pred` holds [`PRED_BYTES`] bytes.
    unsafe fn block(values: &[Self], op: CmpOp, c: Self, pred: &mut [u8; PRED_BYTES]);
}

/// One `SveCmp` impl: `$sz` lane size letter, `$inc` its `inc` instruction, `$ld` the load
/// (register offset scaled by the lane size), `$dup` the broadcast of the constant, and the
/// six compare mnemonics (signed or unsigned) in the order Eq, NotEq, Lt, LtEq, Gt, GtEq.
macro_rules! sve_cmp_impl {
    ($t:ty, $sz:literal, $inc:literal, $ld:literal, $dup:literal,
     [$eq:literal, $ne:literal, $lt:literal, $le:literal, $gt:literal, $ge:literal]) => {
        impl SveCmp for $t {
            #[inline]
            #[target_feature(enable = "sve,neon")]
            unsafe fn block(values: &[$t], op: CmpOp, c: $t, pred: &mut [u8; PRED_BYTES]) {
                debug_assert!(values.len() <= BLOCK);
                let (src, n, buf, c) = (values.as_ptr(), values.len(), pred.as_mut_ptr(), c as u64);
                // SAFETY: p0 = whilelo(i, n) activates lanes i..n only, so the predicated
                // loads read values[0..n]; each `str p1` writes VL/8 bytes at buf, which
                // advances by VL/8 per VL/size lanes: at most n * size / 8 + VL/8 <=
                // BLOCK + 256 = PRED_BYTES bytes in all (size <= 8, n <= BLOCK, VL <= 2048
                // bits). The asm clobbers only the registers listed.
                unsafe {
                    match op {
                        CmpOp::Eq => pred_loop!($sz, $inc, $dup, $ld, $eq; src = in(reg) src, c = in(reg) c, n = in(reg) n, buf = inout(reg) buf => _,),
                        CmpOp::NotEq => pred_loop!($sz, $inc, $dup, $ld, $ne; src = in(reg) src, c = in(reg) c, n = in(reg) n, buf = inout(reg) buf => _,),
                        CmpOp::Lt => pred_loop!($sz, $inc, $dup, $ld, $lt; src = in(reg) src, c = in(reg) c, n = in(reg) n, buf = inout(reg) buf => _,),
                        CmpOp::LtEq => pred_loop!($sz, $inc, $dup, $ld, $le; src = in(reg) src, c = in(reg) c, n = in(reg) n, buf = inout(reg) buf => _,),
                        CmpOp::Gt => pred_loop!($sz, $inc, $dup, $ld, $gt; src = in(reg) src, c = in(reg) c, n = in(reg) n, buf = inout(reg) buf => _,),
                        CmpOp::GtEq => pred_loop!($sz, $inc, $dup, $ld, $ge; src = in(reg) src, c = in(reg) c, n = in(reg) n, buf = inout(reg) buf => _,),
                    }
                }
            }
        }
    };
}

sve_cmp_impl!(i8, "b", "incb", "ld1b {{z0.b}}, p0/z, [{src}, {i}]", "dup z1.b, {c:w}", ["cmpeq", "cmpne", "cmplt", "cmple", "cmpgt", "cmpge"]);
sve_cmp_impl!(u8, "b", "incb", "ld1b {{z0.b}}, p0/z, [{src}, {i}]", "dup z1.b, {c:w}", ["cmpeq", "cmpne", "cmplo", "cmpls", "cmphi", "cmphs"]);
sve_cmp_impl!(i16, "h", "inch", "ld1h {{z0.h}}, p0/z, [{src}, {i}, lsl #1]", "dup z1.h, {c:w}", ["cmpeq", "cmpne", "cmplt", "cmple", "cmpgt", "cmpge"]);
sve_cmp_impl!(u16, "h", "inch", "ld1h {{z0.h}}, p0/z, [{src}, {i}, lsl #1]", "dup z1.h, {c:w}", ["cmpeq", "cmpne", "cmplo", "cmpls", "cmphi", "cmphs"]);
sve_cmp_impl!(i32, "s", "incw", "ld1w {{z0.s}}, p0/z, [{src}, {i}, lsl #2]", "dup z1.s, {c:w}", ["cmpeq", "cmpne", "cmplt", "cmple", "cmpgt", "cmpge"]);
sve_cmp_impl!(u32, "s", "incw", "ld1w {{z0.s}}, p0/z, [{src}, {i}, lsl #2]", "dup z1.s, {c:w}", ["cmpeq", "cmpne", "cmplo", "cmpls", "cmphi", "cmphs"]);
sve_cmp_impl!(i64, "d", "incd", "ld1d {{z0.d}}, p0/z, [{src}, {i}, lsl #3]", "dup z1.d, {c}", ["cmpeq", "cmpne", "cmplt", "cmple", "cmpgt", "cmpge"]);
sve_cmp_impl!(u64, "d", "incd", "ld1d {{z0.d}}, p0/z, [{src}, {i}, lsl #3]", "dup z1.d, {c}", ["cmpeq", "cmpne", "cmplo", "cmpls", "cmphi", "cmphs"]);

/// Keeps bit `size * j` of `x` for each lane `j`, compacted to bit `j` (64 / size lanes).
#[inline(always)]
fn compact(x: u64, size: usize) -> u64 {
    match size {
        1 => x,
        2 => {
            let mut x = x & 0x5555_5555_5555_5555;
            x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
            x = (x | (x >> 2)) & 0x0f0f_0f0f_0f0f_0f0f;
            x = (x | (x >> 4)) & 0x00ff_00ff_00ff_00ff;
            x = (x | (x >> 8)) & 0x0000_ffff_0000_ffff;
            (x | (x >> 16)) & 0xffff_ffff
        }
        4 => {
            let mut x = x & 0x1111_1111_1111_1111;
            x = (x | (x >> 3)) & 0x0303_0303_0303_0303;
            x = (x | (x >> 6)) & 0x000f_000f_000f_000f;
            x = (x | (x >> 12)) & 0x0000_00ff_0000_00ff;
            (x | (x >> 24)) & 0xffff
        }
        // Bit 0 of each byte: the multiply moves byte k's bit to bit 56 + k, with no carries
        // (every partial product lands on its own bit).
        _ => ((x & 0x0101_0101_0101_0101).wrapping_mul(0x0102_0408_1020_4080)) >> 56,
    }
}

/// Appends the bitmap words of `n` lanes of `size` bytes from stored predicates.
#[inline(always)]
fn append_bitmap(pred: &[u8; PRED_BYTES], n: usize, size: usize, out: &mut Vec<u64>) {
    let per = 64 / size; // lanes per predicate word
    for w in 0..n.div_ceil(64) {
        let mut word = 0u64;
        for q in 0..size {
            let at = (w * size + q) * 8;
            let x = u64::from_le_bytes(pred[at..at + 8].try_into().expect("8 bytes"));
            word |= compact(x, size) << (q * per);
        }
        out.push(word);
    }
}

/// # Safety
/// The CPU must have SVE and NEON.
#[target_feature(enable = "sve,neon")]
pub(crate) unsafe fn cmp<T: KernelInt>(values: &[T], op: CmpOp, c: T, out: &mut Vec<u64>) {
    // Route through the per-type implementation; T is one of the eight kernel ints.
    crate::cmp_by_type!(values, op, c, out)
}

#[inline(always)]
fn cmp_typed<T: SveCmp>(values: &[T], op: CmpOp, c: T, out: &mut Vec<u64>) {
    out.reserve(values.len().div_ceil(64));
    let mut pred = [0u8; PRED_BYTES];
    for block in values.chunks(BLOCK) {
        pred.fill(0);
        // SAFETY: at most BLOCK values, a PRED_BYTES buffer; SVE is enabled in the caller
        // (`cmp`), into which this function is inlined.
        unsafe { T::block(block, op, c, &mut pred) };
        append_bitmap(&pred, block.len(), std::mem::size_of::<T>(), out);
    }
}

/// # Safety
/// The CPU must have SVE and NEON.
#[target_feature(enable = "sve,neon")]
pub(crate) unsafe fn str_empty(offsets: &[i32], want_empty: bool, out: &mut Vec<u64>) {
    let n = offsets.len().saturating_sub(1);
    out.reserve(n.div_ceil(64));
    let mut pred = [0u8; PRED_BYTES];
    let mut start = 0;
    while start < n {
        let len = (n - start).min(BLOCK);
        pred.fill(0);
        // offsets[start ..= start + len] are read: lanes i < len of both loads.
        let (src, src2, buf) = (offsets[start..].as_ptr(), offsets[start + 1..].as_ptr(), pred.as_mut_ptr());
        // SAFETY: p0 = whilelo(i, len): the loads read offsets[start + i] and
        // offsets[start + 1 + i] for i < len, inside `offsets` (n + 1 = start + len + 1 at
        // most); `str` writes len * 4 / 8 + VL/8 <= PRED_BYTES bytes (see `SveCmp`).
        unsafe {
            if want_empty {
                pred_loop!("s", "incw", "", "ld1w {{z0.s}}, p0/z, [{src}, {i}, lsl #2]\nld1w {{z1.s}}, p0/z, [{src2}, {i}, lsl #2]", "cmpeq";
                    src = in(reg) src, src2 = in(reg) src2, n = in(reg) len, buf = inout(reg) buf => _,);
            } else {
                pred_loop!("s", "incw", "", "ld1w {{z0.s}}, p0/z, [{src}, {i}, lsl #2]\nld1w {{z1.s}}, p0/z, [{src2}, {i}, lsl #2]", "cmpne";
                    src = in(reg) src, src2 = in(reg) src2, n = in(reg) len, buf = inout(reg) buf => _,);
            }
        }
        append_bitmap(&pred, len, 4, out);
        start += len;
    }
}

// ---------------------------------------------------------------------------------------
// Substring search: first/last-byte filter a vector of positions at a time
// ---------------------------------------------------------------------------------------

/// Start positions `pos..min(pos + VL, end)` of `hay` whose byte is `first` and whose byte
/// `k - 1` further is `last`, as bits of `buf` (bit j = position pos + j); returns VL bytes.
///
/// # Safety
/// SVE; `end + k - 1 <= hay.len()` and `k >= 1`.
#[inline]
#[target_feature(enable = "sve,neon")]
unsafe fn candidates(hay: &[u8], pos: usize, end: usize, k: usize, first: u8, last: u8, buf: &mut [u8; 32]) -> usize {
    let vl: usize;
    // SAFETY: p0 = whilelo(pos, end) activates positions pos..end only: the first load reads
    // hay[pos..end], the second hay[pos + k - 1..end + k - 1], inside `hay` by the caller's
    // condition; `str p1` writes VL/8 <= 32 bytes.
    unsafe {
        asm!(
            "whilelo p0.b, {pos}, {end}",
            "ld1b {{z0.b}}, p0/z, [{hay}, {pos}]",
            "ld1b {{z1.b}}, p0/z, [{hay2}, {pos}]",
            "dup z2.b, {f:w}",
            "dup z3.b, {l:w}",
            "cmpeq p1.b, p0/z, z0.b, z2.b",
            "cmpeq p1.b, p1/z, z1.b, z3.b",
            "str p1, [{buf}]",
            "cntb {vl}",
            pos = in(reg) pos,
            end = in(reg) end,
            hay = in(reg) hay.as_ptr(),
            hay2 = in(reg) hay.as_ptr().add(k - 1),
            f = in(reg) first as u32,
            l = in(reg) last as u32,
            buf = in(reg) buf.as_mut_ptr(),
            vl = out(reg) vl,
            out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("p0") _, out("p1") _,
            options(nostack),
        );
    }
    vl
}

/// Whether `needle` occurs in `hay`: candidates from [`candidates`], verified with a slice
/// compare (Muła's first/last-byte filter).
#[inline]
#[target_feature(enable = "sve,neon")]
unsafe fn contains_one(hay: &[u8], needle: &[u8]) -> bool {
    let k = needle.len();
    if k == 0 {
        return true;
    }
    if k > hay.len() {
        return false;
    }
    let end = hay.len() - k + 1; // start positions 0..end
    let mut buf = [0u8; 32];
    let mut pos = 0;
    while pos < end {
        // SAFETY: end + k - 1 = hay.len(); k >= 1; SVE is enabled here.
        let vl = unsafe { candidates(hay, pos, end, k, needle[0], needle[k - 1], &mut buf) };
        for (b, &byte) in buf[..vl / 8].iter().enumerate() {
            let mut m = byte;
            while m != 0 {
                let at = pos + 8 * b + m.trailing_zeros() as usize;
                if k <= 2 || hay[at + 1..at + k - 1] == needle[1..k - 1] {
                    return true;
                }
                m &= m - 1;
            }
        }
        pos += vl;
    }
    false
}

/// # Safety
/// The CPU must have SVE and NEON.
#[target_feature(enable = "sve,neon")]
pub(crate) unsafe fn contains(offsets: &[i32], data: &[u8], needle: &[u8], out: &mut Vec<u64>) {
    // SAFETY: SVE is enabled for this function, into which the closure is inlined.
    scalar::pack_strings(offsets, data, out, |s| unsafe { contains_one(s, needle) })
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
