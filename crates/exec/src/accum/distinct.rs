//! `COUNT(DISTINCT x)` (ClickHouse `uniqExact`): the distinct non-NULL values of each group
//! in a hash set, exact. Floats are distinct in Tessera's order (`-0.0` = `0.0`, one NaN),
//! strings bytewise.

use std::any::Any;
use std::hash::Hash;
use std::sync::Arc;

use arrow::array::*;
use arrow::datatypes::*;
use tessera_common::{Error, Result};

use super::{FastSet, GroupsAccumulator, Num, OrdVal, bad_input, for_rows, for_strings, is_string, same, set_bytes, with_num};
use crate::spill::{Dec, Enc, corrupt};

/// COUNT(DISTINCT) over input type `t` (numbers, dates, timestamps or strings).
pub(super) fn new(t: &DataType) -> Box<dyn GroupsAccumulator> {
    if is_string(t) {
        Box::new(Distinct::<Box<[u8]>>::default())
    } else {
        Box::new(Distinct::<u64>::default())
    }
}

/// A value a distinct set holds: a fixed-width value's bit pattern ([`Num::bits`]) or a
/// string's bytes.
pub(super) trait DistinctValue: Hash + Eq + std::fmt::Debug + Send + Sync + Sized + 'static {
    /// Whether the radix scatter can carry the input.
    const SCATTER: bool;
    /// Adds the batch's values to their groups' sets, counting new heap bytes in `heap`.
    fn add(sets: &mut [FastSet<Self>], heap: &mut usize, gids: &[u32], arr: &ArrayRef, sel: Option<&[u32]>) -> Result<()>;
    /// Heap bytes of the value beyond its slot.
    fn heap(&self) -> usize;
    fn encode(&self, e: &mut Enc<'_>);
    fn decode(d: &mut Dec<'_>) -> Result<Self>;
}

impl DistinctValue for u64 {
    const SCATTER: bool = true;
    fn add(sets: &mut [FastSet<Self>], heap: &mut usize, gids: &[u32], arr: &ArrayRef, sel: Option<&[u32]>) -> Result<()> {
        let nulls = arr.logical_nulls();
        with_num!(arr, vals => for_rows(gids, vals, sel, nulls.as_ref(), |g, v| {
            let set = &mut sets[g];
            let before = set.capacity();
            if set.insert(v.bits()) && set.capacity() != before {
                *heap += set_bytes::<u64>(set.capacity() - before);
            }
        }), _ => return Err(bad_input(arr)));
        Ok(())
    }
    fn heap(&self) -> usize {
        0
    }
    fn encode(&self, e: &mut Enc<'_>) {
        e.put(*self);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        d.get()
    }
}

impl DistinctValue for Box<[u8]> {
    const SCATTER: bool = false;
    fn add(sets: &mut [FastSet<Self>], heap: &mut usize, gids: &[u32], arr: &ArrayRef, sel: Option<&[u32]>) -> Result<()> {
        let strings = for_strings(gids, arr, sel, |g, v| {
            let set = &mut sets[g];
            if !set.contains(v) {
                let before = set.capacity();
                set.insert(v.into());
                *heap += set_bytes::<Box<[u8]>>(set.capacity() - before) + v.len().next_multiple_of(16);
            }
        });
        if strings { Ok(()) } else { Err(bad_input(arr)) }
    }
    fn heap(&self) -> usize {
        self.len().next_multiple_of(16)
    }
    fn encode(&self, e: &mut Enc<'_>) {
        e.bytes(self);
    }
    fn decode(d: &mut Dec<'_>) -> Result<Self> {
        Ok(d.bytes()?.into())
    }
}

#[derive(Debug)]
struct Distinct<V> {
    sets: Vec<FastSet<V>>,
    /// Heap bytes of the sets (kept as they grow, not recounted).
    heap: usize,
}

impl<V> Default for Distinct<V> {
    fn default() -> Self {
        Distinct { sets: Vec::new(), heap: 0 }
    }
}

impl<V: DistinctValue + Clone> GroupsAccumulator for Distinct<V> {
    fn reserve(&mut self, n: usize) {
        self.sets.reserve(n);
    }

    fn resize(&mut self, n: usize) {
        self.sets.resize_with(n, FastSet::default);
    }

    fn memory_size(&self) -> usize {
        self.sets.capacity() * std::mem::size_of::<FastSet<V>>() + self.heap
    }

    fn update(&mut self, gids: &[u32], input: Option<&ArrayRef>, sel: Option<&[u32]>) -> Result<()> {
        let Some(arr) = input else { return Err(Error::internal("COUNT(DISTINCT) without input")) };
        V::add(&mut self.sets, &mut self.heap, gids, arr, sel)
    }

    fn merge(&mut self, pairs: &[(u32, u32)], other: &dyn GroupsAccumulator) {
        let other = same::<Self>(other);
        for &(d, s) in pairs {
            let set = &mut self.sets[d as usize];
            let before = set.capacity();
            for v in &other.sets[s as usize] {
                if !set.contains(v) {
                    self.heap += v.heap();
                    set.insert(v.clone());
                }
            }
            self.heap += set_bytes::<V>(set.capacity() - before);
        }
    }

    fn encode(&self, e: &mut Enc<'_>) {
        e.put(self.sets.len() as u64);
        for set in &self.sets {
            e.put(set.len() as u64);
            for v in set {
                v.encode(e);
            }
        }
    }

    fn decode(&mut self, d: &mut Dec<'_>, groups: usize) -> Result<()> {
        let n = d.len(8)?;
        if n != groups {
            return Err(corrupt(format!("{n} distinct sets for {groups} groups")));
        }
        self.sets = Vec::with_capacity(n);
        self.heap = 0;
        for _ in 0..n {
            let m = d.len(8)?;
            let mut set = FastSet::default();
            set.reserve(m);
            for _ in 0..m {
                let v = V::decode(d)?;
                self.heap += v.heap();
                set.insert(v);
            }
            self.heap += set_bytes::<V>(set.capacity());
            self.sets.push(set);
        }
        Ok(())
    }

    fn value(&self, g: u32) -> OrdVal<'_> {
        OrdVal::Int(self.sets[g as usize].len() as i128)
    }

    fn emit(&self, gids: &[u32], _dt: &DataType) -> Result<ArrayRef> {
        Ok(Arc::new(Int64Array::from_iter_values(gids.iter().map(|&g| self.sets[g as usize].len() as i64))))
    }

    fn scatterable(&self) -> bool {
        V::SCATTER
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
