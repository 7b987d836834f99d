//! `MIN(x)` and `MAX(x)` (and `any(x)`, answered as MIN) of numbers, dates, timestamps and
//! strings, each in its own width; floats in Tessera's order (`tessera_common::float`: NaN
//! above `+inf`, `-0.0` = `0.0`), strings bytewise.

use std::any::Any;
use std::sync::Arc;

use arrow::array::*;
use arrow::buffer::ScalarBuffer;
use arrow::datatypes::*;
use tessera_common::float::{canonical_f32, canonical_f64, cmp_f64, max_f64, min_f64};
use tessera_common::{Error, Result};
use tessera_kernels::{KernelInt, Kernels, SelectInt};

use super::{GroupsAccumulator, OrdVal, bad_input, decode_exact, for_rows, for_strings, int_array, is_string, one_group_mask, same};
use crate::spill::{Dec, Enc, Pod, corrupt};

/// MIN (`max == false`) or MAX over input type `t`.
///
/// # Errors
/// [`Error::NotImplemented`] for types other than numbers, dates, timestamps and strings.
pub(super) fn new(max: bool, t: &DataType) -> Result<Box<dyn GroupsAccumulator>> {
    if is_string(t) {
        return Ok(Box::new(MinMaxBytes { max, vals: Vec::new(), heap: 0 }));
    }
    fn of<T: Extreme>(max: bool) -> Box<dyn GroupsAccumulator> {
        Box::new(MinMax::<T> { max, vals: Vec::new(), seen: Vec::new() })
    }
    Ok(tessera_common::int_like_dispatch!(t, A => of::<<A as ArrowPrimitiveType>::Native>(max), _ => match t {
        DataType::Float32 => of::<f32>(max),
        DataType::Float64 => of::<f64>(max),
        _ => return Err(Error::not_implemented(format!("MIN/MAX over {t}"))),
    }))
}

/// A fixed-width value MIN/MAX keep in the input's own width.
pub(super) trait Extreme: Pod + PartialEq + std::fmt::Debug + Send + Sync + 'static + ArrowNativeType {
    /// The identity of MIN (the top of the order) and of MAX (its bottom).
    const TOP: Self;
    const BOTTOM: Self;
    /// Whether [`Extreme::kernel`] has the families' masked kernels (integers).
    const KERNEL: bool;
    /// The smaller (or with `max` the larger) of `a` and `b`.
    fn pick(max: bool, a: Self, b: Self) -> Self;
    /// The minimum or maximum of the rows of `vals` in `mask` with the kernel family's
    /// masked kernel: `None` when the type has none (floats), `Some(None)` for no rows.
    fn kernel(max: bool, vals: &[Self], mask: Option<&[u64]>, kern: &Kernels) -> Option<Option<Self>>;
    fn ord(self) -> OrdVal<'static>;
    /// Tessera's total order of the values (floats: NaN last, -0.0 = 0.0).
    fn total_cmp(a: &Self, b: &Self) -> std::cmp::Ordering;
    fn to_f64(self) -> f64;
    /// An array of output type `dt` (the input type) of the values.
    fn emit(vals: impl Iterator<Item = Option<Self>>, dt: &DataType) -> Result<ArrayRef>;
}

macro_rules! extreme_int {
    ($($t:ty),*) => {$(impl Extreme for $t {
        const KERNEL: bool = true;
        const TOP: Self = <$t>::MAX;
        const BOTTOM: Self = <$t>::MIN;
        #[inline(always)]
        fn pick(max: bool, a: Self, b: Self) -> Self {
            if max { a.max(b) } else { a.min(b) }
        }
        fn kernel(max: bool, vals: &[Self], mask: Option<&[u64]>, kern: &Kernels) -> Option<Option<Self>> {
            let k = <$t as SelectInt>::of(kern);
            Some(if max { (k.max)(vals, mask) } else { (k.min)(vals, mask) })
        }
        fn ord(self) -> OrdVal<'static> {
            OrdVal::Int(KernelInt::to_i128(self))
        }
        fn total_cmp(a: &Self, b: &Self) -> std::cmp::Ordering {
            a.cmp(b)
        }
        fn to_f64(self) -> f64 {
            self as f64
        }
        fn emit(vals: impl Iterator<Item = Option<Self>>, dt: &DataType) -> Result<ArrayRef> {
            // Values came from the input type, so the conversion back is exact.
            int_array(vals.map(|v| v.map(KernelInt::to_i128)), dt)
        }
    })*};
}
extreme_int!(i8, i16, i32, i64, u8, u16, u32, u64);

impl Extreme for f64 {
    const KERNEL: bool = false;
    const TOP: Self = f64::NAN;
    const BOTTOM: Self = f64::NEG_INFINITY;
    #[inline(always)]
    fn pick(max: bool, a: Self, b: Self) -> Self {
        if max { max_f64(a, b) } else { min_f64(a, b) }
    }
    fn kernel(_: bool, _: &[Self], _: Option<&[u64]>, _: &Kernels) -> Option<Option<Self>> {
        None
    }
    fn ord(self) -> OrdVal<'static> {
        OrdVal::Float(self)
    }
    fn total_cmp(a: &Self, b: &Self) -> std::cmp::Ordering {
        cmp_f64(*a, *b)
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn emit(vals: impl Iterator<Item = Option<Self>>, _dt: &DataType) -> Result<ArrayRef> {
        Ok(Arc::new(Float64Array::from_iter(vals.map(|v| v.map(canonical_f64)))))
    }
}

impl Extreme for f32 {
    const KERNEL: bool = false;
    const TOP: Self = f32::NAN;
    const BOTTOM: Self = f32::NEG_INFINITY;
    #[inline(always)]
    fn pick(max: bool, a: Self, b: Self) -> Self {
        // Exact: every f32 is an f64, and the pick is one of the two.
        f64::pick(max, a as f64, b as f64) as f32
    }
    fn kernel(_: bool, _: &[Self], _: Option<&[u64]>, _: &Kernels) -> Option<Option<Self>> {
        None
    }
    fn ord(self) -> OrdVal<'static> {
        OrdVal::Float(self as f64)
    }
    fn total_cmp(a: &Self, b: &Self) -> std::cmp::Ordering {
        cmp_f64(*a as f64, *b as f64)
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn emit(vals: impl Iterator<Item = Option<Self>>, _dt: &DataType) -> Result<ArrayRef> {
        Ok(Arc::new(Float32Array::from_iter(vals.map(|v| v.map(canonical_f32)))))
    }
}

/// The values of `arr` as `T`: the input's native type (a date arrives as `Int32` after the
/// radix scatter, a timestamp as `Int64`: same width, same values).
pub(super) fn natives<T: ArrowNativeType>(arr: &ArrayRef) -> Option<&[T]> {
    let any: &dyn Any = tessera_common::int_like_dispatch!(arr.data_type(), A => arr.as_primitive::<A>().values(), _ => match arr.data_type() {
        DataType::Float32 => arr.as_primitive::<Float32Type>().values(),
        DataType::Float64 => arr.as_primitive::<Float64Type>().values(),
        _ => return None,
    });
    any.downcast_ref::<ScalarBuffer<T>>().map(|b| &b[..])
}

#[derive(Debug)]
struct MinMax<T> {
    max: bool,
    vals: Vec<T>,
    /// Whether the group has a non-NULL value (else its value is NULL).
    seen: Vec<bool>,
}

impl<T: Extreme> GroupsAccumulator for MinMax<T> {
    fn reserve(&mut self, n: usize) {
        self.vals.reserve(n);
        self.seen.reserve(n);
    }

    fn resize(&mut self, n: usize) {
        self.vals.resize(n, if self.max { T::BOTTOM } else { T::TOP });
        self.seen.resize(n, false);
    }

    fn memory_size(&self) -> usize {
        self.vals.capacity() * std::mem::size_of::<T>() + self.seen.capacity()
    }

    fn update(&mut self, gids: &[u32], input: Option<&ArrayRef>, sel: Option<&[u32]>) -> Result<()> {
        let Some(arr) = input else { return Err(Error::internal("MIN/MAX without input")) };
        let vals = natives::<T>(arr).ok_or_else(|| bad_input(arr))?;
        let (max, out, seen) = (self.max, &mut self.vals, &mut self.seen);
        for_rows(gids, vals, sel, arr.logical_nulls().as_ref(), |g, v| {
            out[g] = T::pick(max, out[g], v);
            seen[g] = true;
        });
        Ok(())
    }

    fn update_one(&mut self, g: usize, input: Option<&ArrayRef>, sel: Option<&[u32]>, _rows: usize, kern: &Kernels) -> bool {
        let Some((arr, vals)) = input.filter(|_| T::KERNEL).and_then(|a| Some((a, natives::<T>(a)?))) else { return false };
        let (mask, _) = one_group_mask(arr, sel, kern);
        let Some(m) = T::kernel(self.max, vals, mask.as_deref(), kern) else { return false };
        if let Some(m) = m {
            self.vals[g] = T::pick(self.max, self.vals[g], m);
            self.seen[g] = true;
        }
        true
    }

    fn merge(&mut self, pairs: &[(u32, u32)], other: &dyn GroupsAccumulator) {
        let other = same::<Self>(other);
        for &(d, s) in pairs {
            let (d, s) = (d as usize, s as usize);
            self.vals[d] = T::pick(self.max, self.vals[d], other.vals[s]);
            self.seen[d] |= other.seen[s];
        }
    }

    fn encode(&self, e: &mut Enc<'_>) {
        e.slice(&self.vals);
        let seen: Vec<u8> = self.seen.iter().map(|&b| b as u8).collect();
        e.slice(&seen);
    }

    fn decode(&mut self, d: &mut Dec<'_>, groups: usize) -> Result<()> {
        self.vals = decode_exact(d, groups, "min/max")?;
        self.seen = decode_exact::<u8>(d, groups, "min/max flag")?.into_iter().map(|b| b != 0).collect();
        Ok(())
    }

    fn value(&self, g: u32) -> OrdVal<'_> {
        let g = g as usize;
        if self.seen[g] { self.vals[g].ord() } else { OrdVal::Null }
    }

    fn emit(&self, gids: &[u32], dt: &DataType) -> Result<ArrayRef> {
        T::emit(gids.iter().map(|&g| self.seen[g as usize].then(|| self.vals[g as usize])), dt)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// MIN/MAX of strings: a copy of the group's extreme (`None`: no value yet).
#[derive(Debug)]
struct MinMaxBytes {
    max: bool,
    vals: Vec<Option<Vec<u8>>>,
    /// Heap bytes of `vals`.
    heap: usize,
}

impl MinMaxBytes {
    /// Makes `v` group `g`'s value if it is better.
    #[inline]
    fn offer(&mut self, g: usize, v: &[u8]) {
        let better = match &self.vals[g] {
            None => true,
            Some(cur) => if self.max { v > cur.as_slice() } else { v < cur.as_slice() },
        };
        if better {
            let cur = self.vals[g].get_or_insert_with(Vec::new);
            let before = cur.capacity();
            cur.clear();
            cur.extend_from_slice(v);
            self.heap += cur.capacity() - before;
        }
    }
}

impl GroupsAccumulator for MinMaxBytes {
    fn reserve(&mut self, n: usize) {
        self.vals.reserve(n);
    }

    fn resize(&mut self, n: usize) {
        self.vals.resize_with(n, || None);
    }

    fn memory_size(&self) -> usize {
        self.vals.capacity() * std::mem::size_of::<Option<Vec<u8>>>() + self.heap
    }

    fn update(&mut self, gids: &[u32], input: Option<&ArrayRef>, sel: Option<&[u32]>) -> Result<()> {
        let Some(arr) = input else { return Err(Error::internal("MIN/MAX without input")) };
        if !for_strings(gids, arr, sel, |g, v| self.offer(g, v)) {
            return Err(bad_input(arr));
        }
        Ok(())
    }

    fn merge(&mut self, pairs: &[(u32, u32)], other: &dyn GroupsAccumulator) {
        let other = same::<Self>(other);
        for &(d, s) in pairs {
            if let Some(v) = &other.vals[s as usize] {
                self.offer(d as usize, v);
            }
        }
    }

    fn encode(&self, e: &mut Enc<'_>) {
        e.put(self.vals.len() as u64);
        for v in &self.vals {
            e.put(v.is_some() as u8);
            e.bytes(v.as_deref().unwrap_or_default());
        }
    }

    fn decode(&mut self, d: &mut Dec<'_>, groups: usize) -> Result<()> {
        let n = d.len(9)?;
        if n != groups {
            return Err(corrupt(format!("{n} min/max states for {groups} groups")));
        }
        self.vals = Vec::with_capacity(n);
        self.heap = 0;
        for _ in 0..n {
            let some = d.get::<u8>()? != 0;
            let b = d.bytes()?;
            self.heap += if some { b.len() } else { 0 };
            self.vals.push(some.then(|| b.to_vec()));
        }
        Ok(())
    }

    fn value(&self, g: u32) -> OrdVal<'_> {
        self.vals[g as usize].as_deref().map_or(OrdVal::Null, OrdVal::Bytes)
    }

    fn emit(&self, gids: &[u32], dt: &DataType) -> Result<ArrayRef> {
        let bin: BinaryArray = gids.iter().map(|&g| self.vals[g as usize].as_deref()).collect();
        let bin: ArrayRef = Arc::new(bin);
        // MIN/MAX of valid UTF-8 strings are among them: the cast cannot fail.
        Ok(arrow::compute::cast(&bin, dt)?)
    }

    fn scatterable(&self) -> bool {
        false
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
