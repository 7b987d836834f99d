//! Exact quantiles (`median`, `quantile_cont`, `quantile_disc`, `quantileExact`, ...): each
//! group keeps all its non-NULL values in their own width, and the answer picks among them
//! sorted in Tessera's order (`select_nth_unstable`, O(n) a group) as [`QuantileKind`] says.
//! Memory grows with the rows (ClickHouse's `quantileExact` keeps every value the same way);
//! the state is accounted and spills with the GROUP BY.

use std::any::Any;
use std::sync::Arc;

use arrow::array::*;
use arrow::datatypes::*;
use tessera_common::{Error, Result};

use super::min_max::{Extreme, natives};
use super::{GroupsAccumulator, OrdVal, bad_input, for_rows, same};
use crate::plan::{QuantileKind, QuantileLevel};
use crate::spill::{Dec, Enc, corrupt};

/// A quantile of kind `kind` at `level` over input type `t` (numbers, dates, timestamps).
///
/// # Errors
/// [`Error::NotImplemented`] for other input types.
pub(super) fn new(kind: QuantileKind, level: QuantileLevel, t: &DataType) -> Result<Box<dyn GroupsAccumulator>> {
    fn of<T: Extreme>(kind: QuantileKind, level: QuantileLevel) -> Box<dyn GroupsAccumulator> {
        Box::new(Quantile::<T> { kind, level: level.get(), vals: Vec::new(), heap: 0 })
    }
    Ok(tessera_common::int_like_dispatch!(t, A => of::<<A as ArrowPrimitiveType>::Native>(kind, level), _ => match t {
        DataType::Float32 => of::<f32>(kind, level),
        DataType::Float64 => of::<f64>(kind, level),
        _ => return Err(Error::not_implemented(format!("quantiles over {t}"))),
    }))
}

#[derive(Debug)]
struct Quantile<T> {
    kind: QuantileKind,
    level: f64,
    /// The values of each group, unsorted.
    vals: Vec<Vec<T>>,
    /// Heap bytes of `vals` (capacities).
    heap: usize,
}

/// What a quantile answers: one of the values, or an interpolation between two.
enum Pick<T> {
    Value(T),
    Float(f64),
}

impl<T: Extreme> Quantile<T> {
    /// The quantile of group `g`, `None` without values.
    fn pick(&self, g: usize) -> Option<Pick<T>> {
        let vals = &self.vals[g];
        let n = vals.len();
        if n == 0 {
            return None;
        }
        let mut v = vals.clone();
        let mut nth = |i: usize| *v.select_nth_unstable_by(i, T::total_cmp).1;
        let l = self.level;
        Some(match self.kind {
            QuantileKind::Exact => Pick::Value(nth(((l * n as f64) as usize).min(n - 1))),
            QuantileKind::Disc => Pick::Value(nth(((l * n as f64).ceil() as usize).saturating_sub(1).min(n - 1))),
            QuantileKind::Cont => {
                let pos = l * (n - 1) as f64;
                let lo = (pos.floor() as usize).min(n - 1);
                let a = nth(lo).to_f64();
                if lo + 1 >= n || pos == lo as f64 {
                    Pick::Float(a)
                } else {
                    // After selecting `lo`, the next value in order is the least of the rest.
                    let b = v[lo + 1..].iter().copied().min_by(T::total_cmp).expect("lo + 1 < n").to_f64();
                    // Equal neighbours (infinities among them) need no interpolation.
                    Pick::Float(if a == b { a } else { a + (pos - lo as f64) * (b - a) })
                }
            }
        })
    }
}

impl<T: Extreme> GroupsAccumulator for Quantile<T> {
    fn reserve(&mut self, n: usize) {
        self.vals.reserve(n);
    }

    fn resize(&mut self, n: usize) {
        self.vals.resize_with(n, Vec::new);
    }

    fn memory_size(&self) -> usize {
        self.vals.capacity() * std::mem::size_of::<Vec<T>>() + self.heap
    }

    fn update(&mut self, gids: &[u32], input: Option<&ArrayRef>, sel: Option<&[u32]>) -> Result<()> {
        let Some(arr) = input else { return Err(Error::internal("quantile without input")) };
        let vals = natives::<T>(arr).ok_or_else(|| bad_input(arr))?;
        let (groups, heap) = (&mut self.vals, &mut self.heap);
        for_rows(gids, vals, sel, arr.logical_nulls().as_ref(), |g, v| {
            let group = &mut groups[g];
            let before = group.capacity();
            group.push(v);
            *heap += (group.capacity() - before) * std::mem::size_of::<T>();
        });
        Ok(())
    }

    fn merge(&mut self, pairs: &[(u32, u32)], other: &dyn GroupsAccumulator) {
        let other = same::<Self>(other);
        for &(d, s) in pairs {
            let group = &mut self.vals[d as usize];
            let before = group.capacity();
            group.extend_from_slice(&other.vals[s as usize]);
            self.heap += (group.capacity() - before) * std::mem::size_of::<T>();
        }
    }

    fn encode(&self, e: &mut Enc<'_>) {
        e.put(self.vals.len() as u64);
        for v in &self.vals {
            e.slice(v);
        }
    }

    fn decode(&mut self, d: &mut Dec<'_>, groups: usize) -> Result<()> {
        let n = d.len(8)?;
        if n != groups {
            return Err(corrupt(format!("{n} quantile states for {groups} groups")));
        }
        self.vals = (0..n).map(|_| d.slice::<T>()).collect::<Result<_>>()?;
        self.heap = self.vals.iter().map(|v| v.capacity() * std::mem::size_of::<T>()).sum();
        Ok(())
    }

    fn value(&self, g: u32) -> OrdVal<'_> {
        match self.pick(g as usize) {
            None => OrdVal::Null,
            Some(Pick::Value(v)) => v.ord(),
            Some(Pick::Float(f)) => OrdVal::Float(f),
        }
    }

    fn emit(&self, gids: &[u32], dt: &DataType) -> Result<ArrayRef> {
        if self.kind == QuantileKind::Cont {
            let vals = gids.iter().map(|&g| match self.pick(g as usize) {
                Some(Pick::Float(f)) => Some(f),
                Some(Pick::Value(v)) => Some(v.to_f64()),
                None => None,
            });
            return Ok(Arc::new(Float64Array::from_iter(vals)));
        }
        let vals = gids.iter().map(|&g| match self.pick(g as usize) {
            Some(Pick::Value(v)) => Some(v),
            _ => None,
        });
        T::emit(vals, dt)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
