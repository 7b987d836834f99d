//! Approximate distinct counts, ClickHouse's functions by name, each deterministic (the
//! answer does not depend on the thread count or the order rows arrive in):
//!
//! - `uniq`: adaptive sampling (Flajolet's "adaptive sampling", 1990; ClickHouse's
//!   `UniquesHashSet`): a group keeps the 64-bit hashes of its values whose lowest `skip`
//!   bits are zero, at most [`SAMPLE_MAX`] of them; past that, `skip` grows by one and half
//!   of the hashes go. The estimate is `kept * 2^skip`: exact up to 65,536 distinct values,
//!   about 1% relative error above.
//! - `uniqHLL12` and `uniqCombined`: HyperLogLog (Flajolet, Fusy, Gandouet, Meunier 2007)
//!   with 2^12 and 2^17 one-byte registers (standard errors 1.04 / sqrt(2^P): 1.6% and
//!   0.29%), with the linear-counting correction for small estimates; a group starts as an
//!   exact set of hashes and turns into registers past 2^P / 8 of them, when its 8-byte
//!   values would outgrow the registers (HyperLogLog++'s sparse start, Heule, Nunkesser,
//!   Hall 2013; ClickHouse's `uniqCombined` does the same), so small groups (up to 512 and
//!   16,384 values) are counted exactly. No empirical bias table (HyperLogLog++'s and
//!   ClickHouse's): estimates between 2.5 and 5 times the register count carry the raw
//!   estimator's few-percent bias.
//!
//! Values are hashed as the engine hashes keys (`hash_u64` of the value's bit pattern,
//! `hash_bytes` of a string), so equal values count once; NULLs are skipped. Output Int64.

use std::any::Any;
use std::sync::Arc;

use arrow::array::*;
use arrow::datatypes::*;
use tessera_common::{Error, Result};
use tessera_kernels::{hash_bytes, hash_u64};

use super::{FastSet, GroupsAccumulator, Num, OrdVal, bad_input, for_rows, for_strings, is_string, same, set_bytes, with_num};
use crate::spill::{Dec, Enc, corrupt};

/// Most hashes a `uniq` group keeps (ClickHouse's `UNIQUES_HASH_MAX_SIZE`).
const SAMPLE_MAX: usize = 1 << 16;

/// `uniq` over input type `t`.
pub(super) fn sampling(t: &DataType) -> Box<dyn GroupsAccumulator> {
    Box::new(Uniq::<Sample> { string: is_string(t), sketches: Vec::new(), heap: 0 })
}

/// `uniqHLL12` (`P` = 12) or `uniqCombined` (`P` = 17) over input type `t`.
pub(super) fn hll<const P: u32>(t: &DataType) -> Box<dyn GroupsAccumulator> {
    Box::new(Uniq::<Hll<P>> { string: is_string(t), sketches: Vec::new(), heap: 0 })
}

/// A group's summary of the hashes of its values.
trait Sketch: Default + Clone + std::fmt::Debug + Send + Sync + 'static {
    fn insert(&mut self, h: u64);
    fn merge(&mut self, other: &Self);
    fn estimate(&self) -> u64;
    /// Heap bytes (from capacities: cheap).
    fn heap(&self) -> usize;
    fn encode(&self, e: &mut Enc<'_>);
    fn decode(d: &mut Dec<'_>) -> Result<Self>;
}

/// `uniq`'s adaptive sample: the hashes with `skip` low zero bits.
#[derive(Debug, Clone, Default)]
struct Sample {
    hashes: FastSet<u64>,
    skip: u8,
}

impl Sample {
    fn kept(h: u64, skip: u8) -> bool {
        h & ((1u64 << skip) - 1) == 0
    }

    /// Raises `skip` until at most [`SAMPLE_MAX`] hashes are kept.
    fn shrink(&mut self) {
        while self.hashes.len() > SAMPLE_MAX {
            self.skip += 1;
            let skip = self.skip;
            self.hashes.retain(|&h| Sample::kept(h, skip));
        }
    }
}

impl Sketch for Sample {
    #[inline]
    fn insert(&mut self, h: u64) {
        if Sample::kept(h, self.skip) && self.hashes.insert(h) && self.hashes.len() > SAMPLE_MAX {
            self.shrink();
        }
    }

    fn merge(&mut self, other: &Self) {
        if other.skip > self.skip {
            self.skip = other.skip;
            let skip = self.skip;
            self.hashes.retain(|&h| Sample::kept(h, skip));
        }
        let skip = self.skip;
        self.hashes.extend(other.hashes.iter().copied().filter(|&h| Sample::kept(h, skip)));
        self.shrink();
    }

    fn estimate(&self) -> u64 {
        (self.hashes.len() as u64) << self.skip
    }

    fn heap(&self) -> usize {
        set_bytes::<u64>(self.hashes.capacity())
    }

    fn encode(&self, e: &mut Enc<'_>) {
        e.put(self.skip);
        encode_hashes(e, &self.hashes);
    }

    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        let skip: u8 = d.get()?;
        let hashes = decode_hashes(d)?;
        if skip > 63 || hashes.len() > SAMPLE_MAX || !hashes.iter().all(|&h| Sample::kept(h, skip)) {
            return Err(corrupt(format!("a uniq sample of {} hashes at skip {skip}", hashes.len())));
        }
        Ok(Sample { hashes, skip })
    }
}

/// A HyperLogLog sketch of 2^`P` registers, exact (a set of hashes) while that is smaller.
#[derive(Debug, Clone)]
enum Hll<const P: u32> {
    Exact(FastSet<u64>),
    /// Register `h >> (64 - P)` holds the largest rank (leading zeros + 1) of the other
    /// bits of any hash `h` that went to it.
    Registers(Box<[u8]>),
}

impl<const P: u32> Default for Hll<P> {
    fn default() -> Self {
        Hll::Exact(FastSet::default())
    }
}

impl<const P: u32> Hll<P> {
    const REGISTERS: usize = 1 << P;
    /// Hashes an exact set holds before it turns into registers: 8 bytes each.
    const EXACT_MAX: usize = Self::REGISTERS / 8;
    /// The largest rank: all of the hash's `64 - P` bits below the index zero.
    const MAX_RANK: u32 = 64 - P + 1;

    #[inline]
    fn add_to(regs: &mut [u8], h: u64) {
        let i = (h >> (64 - P)) as usize;
        let rank = ((h << P).leading_zeros() + 1).min(Self::MAX_RANK) as u8;
        regs[i] = regs[i].max(rank);
    }

    fn to_registers(set: &FastSet<u64>) -> Box<[u8]> {
        let mut regs = vec![0u8; Self::REGISTERS].into_boxed_slice();
        for &h in set {
            Self::add_to(&mut regs, h);
        }
        regs
    }
}

impl<const P: u32> Sketch for Hll<P> {
    #[inline]
    fn insert(&mut self, h: u64) {
        match self {
            Hll::Registers(regs) => Self::add_to(regs, h),
            Hll::Exact(set) => {
                if set.insert(h) && set.len() > Self::EXACT_MAX {
                    *self = Hll::Registers(Self::to_registers(set));
                }
            }
        }
    }

    fn merge(&mut self, other: &Self) {
        match other {
            Hll::Exact(set) => set.iter().for_each(|&h| self.insert(h)),
            Hll::Registers(theirs) => {
                if let Hll::Exact(set) = self {
                    *self = Hll::Registers(Self::to_registers(set));
                }
                if let Hll::Registers(regs) = self {
                    for (a, &b) in regs.iter_mut().zip(theirs.iter()) {
                        *a = (*a).max(b);
                    }
                }
            }
        }
    }

    fn estimate(&self) -> u64 {
        let regs = match self {
            Hll::Exact(set) => return set.len() as u64,
            Hll::Registers(regs) => regs,
        };
        let m = Self::REGISTERS as f64;
        // 2^-r, exactly, from its exponent bits (r <= 64 - P + 1 < 1023).
        let sum: f64 = regs.iter().map(|&r| f64::from_bits((1023 - r as u64) << 52)).sum();
        let zeros = regs.iter().filter(|&&r| r == 0).count();
        let alpha = 0.7213 / (1.0 + 1.079 / m);
        let raw = alpha * m * m / sum;
        let e = if raw <= 2.5 * m && zeros > 0 { m * (m / zeros as f64).ln() } else { raw };
        e.round() as u64
    }

    fn heap(&self) -> usize {
        match self {
            Hll::Exact(set) => set_bytes::<u64>(set.capacity()),
            Hll::Registers(regs) => regs.len(),
        }
    }

    fn encode(&self, e: &mut Enc<'_>) {
        match self {
            Hll::Exact(set) => {
                e.put(0u8);
                encode_hashes(e, set);
            }
            Hll::Registers(regs) => {
                e.put(1u8);
                e.bytes(regs);
            }
        }
    }

    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        match d.get::<u8>()? {
            0 => {
                let set = decode_hashes(d)?;
                if set.len() > Self::EXACT_MAX {
                    return Err(corrupt(format!("an exact HyperLogLog set of {} hashes", set.len())));
                }
                Ok(Hll::Exact(set))
            }
            1 => {
                let regs = d.bytes()?;
                if regs.len() != Self::REGISTERS || regs.iter().any(|&r| r as u32 > Self::MAX_RANK) {
                    return Err(corrupt(format!("{} HyperLogLog registers, {} of ranks <= {} expected", regs.len(), Self::REGISTERS, Self::MAX_RANK)));
                }
                Ok(Hll::Registers(regs.into()))
            }
            t => Err(corrupt(format!("a HyperLogLog sketch of kind {t}"))),
        }
    }
}

/// Writes a set of hashes: its length, then the hashes.
fn encode_hashes(e: &mut Enc<'_>, set: &FastSet<u64>) {
    let v: Vec<u64> = set.iter().copied().collect();
    e.slice(&v);
}

/// Reads a set [`encode_hashes`] wrote.
fn decode_hashes(d: &mut Dec<'_>) -> Result<FastSet<u64>> {
    let v: Vec<u64> = d.slice()?;
    let mut set = FastSet::default();
    set.reserve(v.len());
    set.extend(v);
    Ok(set)
}

/// An approximate distinct count per group: one [`Sketch`] each.
#[derive(Debug)]
struct Uniq<S> {
    /// The input holds strings (hashed with `hash_bytes`; the radix scatter cannot carry
    /// them).
    string: bool,
    sketches: Vec<S>,
    /// Heap bytes of the sketches (kept as they change).
    heap: usize,
}

impl<S: Sketch> Uniq<S> {
    #[inline(always)]
    fn insert(sketches: &mut [S], heap: &mut usize, g: usize, h: u64) {
        let s = &mut sketches[g];
        let before = s.heap();
        s.insert(h);
        *heap = *heap + s.heap() - before;
    }
}

impl<S: Sketch> GroupsAccumulator for Uniq<S> {
    fn reserve(&mut self, n: usize) {
        self.sketches.reserve(n);
    }

    fn resize(&mut self, n: usize) {
        self.sketches.resize_with(n, S::default);
    }

    fn memory_size(&self) -> usize {
        self.sketches.capacity() * std::mem::size_of::<S>() + self.heap
    }

    fn update(&mut self, gids: &[u32], input: Option<&ArrayRef>, sel: Option<&[u32]>) -> Result<()> {
        let Some(arr) = input else { return Err(Error::internal("uniq without input")) };
        let (sketches, heap) = (&mut self.sketches, &mut self.heap);
        if for_strings(gids, arr, sel, |g, v| Self::insert(sketches, heap, g, hash_bytes(v))) {
            return Ok(());
        }
        let nulls = arr.logical_nulls();
        with_num!(arr, vals => for_rows(gids, vals, sel, nulls.as_ref(), |g, v| {
            Self::insert(sketches, heap, g, hash_u64(v.bits()))
        }), _ => return Err(bad_input(arr)));
        Ok(())
    }

    fn merge(&mut self, pairs: &[(u32, u32)], other: &dyn GroupsAccumulator) {
        let other = same::<Self>(other);
        for &(d, s) in pairs {
            let sk = &mut self.sketches[d as usize];
            let before = sk.heap();
            sk.merge(&other.sketches[s as usize]);
            self.heap = self.heap + sk.heap() - before;
        }
    }

    fn encode(&self, e: &mut Enc<'_>) {
        e.put(self.sketches.len() as u64);
        self.sketches.iter().for_each(|s| s.encode(e));
    }

    fn decode(&mut self, d: &mut Dec<'_>, groups: usize) -> Result<()> {
        let n = d.len(1)?;
        if n != groups {
            return Err(corrupt(format!("{n} uniq states for {groups} groups")));
        }
        self.sketches = (0..n).map(|_| S::decode(d)).collect::<Result<_>>()?;
        self.heap = self.sketches.iter().map(S::heap).sum();
        Ok(())
    }

    fn value(&self, g: u32) -> OrdVal<'_> {
        OrdVal::Int(self.sketches[g as usize].estimate() as i128)
    }

    fn emit(&self, gids: &[u32], _dt: &DataType) -> Result<ArrayRef> {
        Ok(Arc::new(Int64Array::from_iter_values(gids.iter().map(|&g| self.sketches[g as usize].estimate() as i64))))
    }

    fn scatterable(&self) -> bool {
        !self.string
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
