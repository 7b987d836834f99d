//! Control-byte groups: the probe of the group hash table, a group of slots at a time.
//!
//! Swiss tables (abseil's `flat_hash_map`, Rust's hashbrown) keep one **control byte** per
//! slot beside the slots themselves: [`EMPTY`] (`0x80`), or the 7-bit **tag** of the hash of
//! the key the slot holds (`0x00..=0x7f`, [`tag_of`]). A probe loads the control bytes of a
//! group of consecutive slots and compares all of them with the tag at once; only the slots
//! whose tag matched have their key compared, and the first [`EMPTY`] byte ends the probe.
//!
//! ```text
//!  ctrl:  [ 0x13 | 0x80 | 0x5a | 0x13 | 0x80 | ... ]
//!           slot0  slot1  slot2  slot3  slot4
//!  probe for tag 0x13 from slot 0, one 16-wide group:
//!         match_tag   = 0b...01001   (slots 0 and 3: compare their keys)
//!         match_empty = 0b...10010   (slot 1 is the first empty: the key is absent)
//! ```
//!
//! Probing is **linear**: the key's home slot, then the following slots in order, wrapping
//! at the end. The group width only changes how many slots one step compares, never which
//! slot a key ends up in, so a table has the same layout under every family and the scalar
//! twin ([`Swar`], 8 slots in a `u64`) defines every result.
//!
//! | family   | group type | slots per step | compare                                   |
//! |----------|------------|---------------:|-------------------------------------------|
//! | `scalar` | [`Swar`]   | 8              | SWAR zero-byte test on a `u64`             |
//! | `avx2`   | `avx2`     | 32             | `vpcmpeqb` + `vpmovmskb`                   |
//! | `avx512` | `avx512`   | 64             | `vpcmpeqb` into a mask register            |
//! | `neon`   | `neon`     | 16             | `cmeq` + `shrn` narrowing (4 bits a slot)  |
//! | `sve`    | `sve`      | 64             | `cmpeq` into a predicate, `MAX_WIDTH` bytes in steps of the vector length |
//!
//! Families reach their group through [`crate::Kernels::with_group`], which runs a
//! [`GroupTask`] inside a function compiled with the family's target features, so the
//! group's intrinsics inline into the task's probe loop (one dispatch per batch of keys,
//! never per row).

/// Control byte of an empty slot. A full slot's byte is its tag, whose top bit is clear.
pub const EMPTY: u8 = 0x80;

/// Widest group of any family, in slots (a cache line of control bytes). Every group width
/// is a power of two dividing it, so groups loaded at multiples of their width tile a
/// 64-byte-aligned control array of at least `MAX_WIDTH` slots and never straddle a cache
/// line.
pub const MAX_WIDTH: usize = 64;

/// The control byte of a key with hash `h`: 7 bits of the hash (47..54) that neither the
/// home slot (low bits) nor the radix partition (at most the top 10 bits) use, for tables
/// up to 2^47 slots.
#[inline(always)]
pub const fn tag_of(h: u64) -> u8 {
    ((h >> 47) & 0x7f) as u8
}

/// The slots of a group that matched, lowest first: one bit per slot, slot `i` at bit
/// `i << shift` (`shift` is 0 for one bit a slot, 2 for NEON's 4-bit nibbles, 3 for
/// [`Swar`]'s bytes). May hold false positives for tag matches (never for empties), which
/// the key compare rejects; never misses a true match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BitMask {
    bits: u64,
    shift: u32,
}

impl BitMask {
    /// A mask of `bits` with slot `i` at bit `i << shift`.
    #[inline(always)]
    pub const fn new(bits: u64, shift: u32) -> Self {
        BitMask { bits, shift }
    }

    /// Whether any slot matched.
    #[inline(always)]
    pub const fn any(self) -> bool {
        self.bits != 0
    }

    /// The lowest matching slot, if any.
    #[inline(always)]
    pub const fn lowest(self) -> Option<usize> {
        if self.bits == 0 { None } else { Some((self.bits.trailing_zeros() >> self.shift) as usize) }
    }

    /// Keeps only the slots from `n` on (a group that starts before a probe's home slot).
    #[inline(always)]
    pub const fn from_slot(self, n: usize) -> Self {
        let b = (n as u32) << self.shift;
        BitMask { bits: if b >= 64 { 0 } else { self.bits & !((1u64 << b) - 1) }, shift: self.shift }
    }

    /// Keeps only the slots below `n` (a group read past a probe's range).
    #[inline(always)]
    pub const fn below(self, n: usize) -> Self {
        let b = (n as u32) << self.shift;
        BitMask { bits: if b >= 64 { self.bits } else { self.bits & ((1u64 << b) - 1) }, shift: self.shift }
    }
}

impl Iterator for BitMask {
    type Item = usize;
    #[inline(always)]
    fn next(&mut self) -> Option<usize> {
        let i = self.lowest()?;
        self.bits &= self.bits - 1;
        Some(i)
    }
}

/// A group of control bytes loaded from a table, compared a group at a time.
///
/// # Safety
/// For implementors:
/// [`Group::match_tag`] must report every slot whose byte equals the tag (false positives
/// allowed), and [`Group::match_empty`] exactly the slots holding [`EMPTY`].
pub unsafe trait Group: Copy {
    /// Slots per group (at most [`MAX_WIDTH`]).
    const WIDTH: usize;

    /// Loads the `WIDTH` control bytes at `ctrl`.
    ///
    /// # Safety
    /// 1. `ctrl .. ctrl + WIDTH` is readable (any alignment).
    /// 2. The CPU has the family's target features.
    unsafe fn load(ctrl: *const u8) -> Self;

    /// Slots whose byte is `tag` (a value below `0x80`).
    ///
    /// # Safety
    /// The CPU has the family's target features.
    unsafe fn match_tag(self, tag: u8) -> BitMask;

    /// Slots that are [`EMPTY`].
    ///
    /// # Safety
    /// The CPU has the family's target features.
    unsafe fn match_empty(self) -> BitMask;
}

/// Work generic over a family's [`Group`] (a probe loop over a batch of keys), run by
/// [`crate::Kernels::with_group`] with the family's features enabled. Implementations
/// mark `run` and what it calls on the probe path `#[inline(always)]`, so that all of it
/// compiles inside the family's function.
pub trait GroupTask {
    /// What the work returns.
    type Output;
    /// Does the work with group type `G`.
    fn run<G: Group>(self) -> Self::Output;
}

/// The portable group: 8 control bytes in a `u64`, compared with SWAR arithmetic
/// (hashbrown's generic group). The scalar family's group and the reference twin.
#[derive(Debug, Clone, Copy)]
pub struct Swar(u64);

const LSB: u64 = 0x0101_0101_0101_0101;
const MSB: u64 = 0x8080_8080_8080_8080;

// SAFETY: `match_tag` flags every byte equal to the tag: for such a byte `x ^ tag` is 0, so
// `(x - LSB)` borrows into its top bit while `!x` has it set (a borrow from a lower byte can
// only add false positives above a true zero byte); `match_empty` flags exactly the bytes
// with the top bit set, and only EMPTY has it (tags are below 0x80).
unsafe impl Group for Swar {
    const WIDTH: usize = 8;

    #[inline(always)]
    unsafe fn load(ctrl: *const u8) -> Self {
        // SAFETY: the caller guarantees 8 readable bytes (condition 1); unaligned read.
        Swar(u64::from_le(unsafe { ctrl.cast::<u64>().read_unaligned() }))
    }

    #[inline(always)]
    unsafe fn match_tag(self, tag: u8) -> BitMask {
        let x = self.0 ^ (LSB * tag as u64);
        BitMask::new(x.wrapping_sub(LSB) & !x & MSB, 3)
    }

    #[inline(always)]
    unsafe fn match_empty(self) -> BitMask {
        BitMask::new(self.0 & MSB, 3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(ctrl: &[u8], tag: Option<u8>) -> Vec<usize> {
        (0..ctrl.len()).filter(|&i| Some(ctrl[i]) == tag || (tag.is_none() && ctrl[i] == EMPTY)).collect()
    }

    #[test]
    fn swar_matches_every_equal_byte_and_exactly_the_empties() {
        let mut seed = 7u64;
        for _ in 0..20_000 {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let ctrl: Vec<u8> = (0..8).map(|i| {
                let b = (seed >> (i * 8)) as u8;
                if b & 3 == 0 { EMPTY } else { b & 0x7f }
            }).collect();
            let tag = (seed >> 57) as u8 & 0x7f;
            // SAFETY: 8 readable bytes; no features needed.
            let g = unsafe { Swar::load(ctrl.as_ptr()) };
            let got: Vec<usize> = unsafe { g.match_tag(tag) }.collect();
            for i in bytes(&ctrl, Some(tag)) {
                assert!(got.contains(&i), "{ctrl:?} tag {tag}: missed slot {i}");
            }
            for &i in &got {
                assert!(i < 8);
            }
            let empty: Vec<usize> = unsafe { g.match_empty() }.collect();
            assert_eq!(empty, bytes(&ctrl, None));
        }
    }

    #[test]
    fn bitmask_iterates_lowest_first_and_cuts() {
        let m = BitMask::new(0b1000_1000_0000_1000, 2);
        assert_eq!(m.collect::<Vec<_>>(), vec![0, 2, 3]);
        assert_eq!(m.below(3).collect::<Vec<_>>(), vec![0, 2]);
        assert_eq!(BitMask::new(u64::MAX, 0).below(64).count(), 64);
        assert_eq!(m.from_slot(2).collect::<Vec<_>>(), vec![2, 3]);
        assert_eq!(m.from_slot(0), m);
        assert_eq!(BitMask::new(u64::MAX, 0).from_slot(64).count(), 0);
        assert_eq!(BitMask::new(0, 0).lowest(), None);
        assert_eq!(tag_of(u64::MAX), 0x7f);
    }
}
