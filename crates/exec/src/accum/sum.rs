//! `SUM(x)` and `AVG(x)` of numbers: a sum and a count per group, in the width of SUM's
//! output type ([`AggFunc::output_type`]): integers of up to 32 bits sum in i64 (no
//! overflow below 2^31 rows a group), 64-bit integers in i128 (DuckDB's HUGEINT: no
//! overflow below 2^63 rows), floats in f64, in row order.

use std::any::Any;
use std::sync::Arc;

use arrow::array::*;
use arrow::datatypes::*;
use tessera_common::Result;
use tessera_kernels::{Kernels, SelectInt};

use super::{GroupsAccumulator, Num, OrdVal, bad_input, decode_exact, for_rows, one_group_mask, same, with_num};
use crate::plan::AggFunc;
use crate::spill::{Dec, Enc, Pod};

/// The sum of a group, in its width.
pub(super) trait SumNum: Pod + Default + std::ops::AddAssign + std::fmt::Debug + Send + Sync + 'static {
    /// Whether the families' integer `sum` kernels add these (not floats: their sums stay
    /// sequential, so answers do not depend on the ISA).
    const KERNELS: bool;
    fn of<N: Num>(v: N) -> Self;
    /// The kernel's sum of a batch ([`SumNum::KERNELS`] only).
    fn of_kernel(s: i128) -> Self;
    fn to_f64(self) -> f64;
    fn ord(self) -> OrdVal<'static>;
    /// The SUM output: Int64, Decimal128(38, 0) or Float64.
    fn emit(vals: impl Iterator<Item = Option<Self>>) -> Result<ArrayRef>;
}

impl SumNum for i64 {
    const KERNELS: bool = true;
    fn of<N: Num>(v: N) -> Self {
        v.to_i64()
    }
    fn of_kernel(s: i128) -> Self {
        s as i64
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn ord(self) -> OrdVal<'static> {
        OrdVal::Int(self as i128)
    }
    fn emit(vals: impl Iterator<Item = Option<Self>>) -> Result<ArrayRef> {
        Ok(Arc::new(Int64Array::from_iter(vals)))
    }
}

impl SumNum for i128 {
    const KERNELS: bool = true;
    fn of<N: Num>(v: N) -> Self {
        v.to_i128()
    }
    fn of_kernel(s: i128) -> Self {
        s
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn ord(self) -> OrdVal<'static> {
        OrdVal::Int(self)
    }
    fn emit(vals: impl Iterator<Item = Option<Self>>) -> Result<ArrayRef> {
        Ok(Arc::new(Decimal128Array::from_iter(vals).with_precision_and_scale(38, 0)?))
    }
}

impl SumNum for f64 {
    const KERNELS: bool = false;
    fn of<N: Num>(v: N) -> Self {
        v.to_f64()
    }
    fn of_kernel(s: i128) -> Self {
        s as f64
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn ord(self) -> OrdVal<'static> {
        OrdVal::Float(self)
    }
    fn emit(vals: impl Iterator<Item = Option<Self>>) -> Result<ArrayRef> {
        Ok(Arc::new(Float64Array::from_iter(vals)))
    }
}

/// SUM or AVG (`func`) of numeric input `t`: the sums in the width of SUM's output type.
pub(super) fn new(func: AggFunc, t: &DataType) -> Box<dyn GroupsAccumulator> {
    let avg = func == AggFunc::Avg;
    match AggFunc::Sum.output_type(Some(t)) {
        DataType::Float64 => Box::new(SumAvg::<f64> { avg, sums: Vec::new(), count: Vec::new() }),
        DataType::Decimal128(_, _) => Box::new(SumAvg::<i128> { avg, sums: Vec::new(), count: Vec::new() }),
        _ => Box::new(SumAvg::<i64> { avg, sums: Vec::new(), count: Vec::new() }),
    }
}

#[derive(Debug)]
struct SumAvg<S> {
    avg: bool,
    sums: Vec<S>,
    /// Non-NULL inputs per group.
    count: Vec<i64>,
}

impl<S: SumNum> SumAvg<S> {
    fn avg_of(&self, g: usize) -> f64 {
        self.sums[g].to_f64() / self.count[g] as f64
    }
}

impl<S: SumNum> GroupsAccumulator for SumAvg<S> {
    fn reserve(&mut self, n: usize) {
        self.sums.reserve(n);
        self.count.reserve(n);
    }

    fn resize(&mut self, n: usize) {
        self.sums.resize(n, S::default());
        self.count.resize(n, 0);
    }

    fn memory_size(&self) -> usize {
        self.sums.capacity() * std::mem::size_of::<S>() + self.count.capacity() * 8
    }

    fn update(&mut self, gids: &[u32], input: Option<&ArrayRef>, sel: Option<&[u32]>) -> Result<()> {
        let Some(arr) = input else { return Err(tessera_common::Error::internal("SUM without input")) };
        let nulls = arr.logical_nulls();
        let (sums, count) = (&mut self.sums, &mut self.count);
        with_num!(arr, vals => for_rows(gids, vals, sel, nulls.as_ref(), |g, v| {
            sums[g] += S::of(v);
            count[g] += 1;
        }), _ => return Err(bad_input(arr)));
        Ok(())
    }

    fn update_one(&mut self, g: usize, input: Option<&ArrayRef>, sel: Option<&[u32]>, _rows: usize, kern: &Kernels) -> bool {
        let Some(arr) = input else { return false };
        if !S::KERNELS {
            return false;
        }
        let (mask, valid) = one_group_mask(arr, sel, kern);
        let sum = tessera_common::int_like_dispatch!(arr.data_type(), A => {
            let k = <<A as ArrowPrimitiveType>::Native as SelectInt>::of(kern);
            (k.sum)(arr.as_primitive::<A>().values(), mask.as_deref())
        }, _ => return false);
        self.sums[g] += S::of_kernel(sum);
        self.count[g] += valid as i64;
        true
    }

    fn merge(&mut self, pairs: &[(u32, u32)], other: &dyn GroupsAccumulator) {
        let other = same::<Self>(other);
        for &(d, s) in pairs {
            self.sums[d as usize] += other.sums[s as usize];
            self.count[d as usize] += other.count[s as usize];
        }
    }

    fn encode(&self, e: &mut Enc<'_>) {
        e.slice(&self.count);
        e.slice(&self.sums);
    }

    fn decode(&mut self, d: &mut Dec<'_>, groups: usize) -> Result<()> {
        self.count = decode_exact(d, groups, "count")?;
        self.sums = decode_exact(d, groups, "sum")?;
        Ok(())
    }

    fn value(&self, g: u32) -> OrdVal<'_> {
        let g = g as usize;
        match (self.count[g], self.avg) {
            (0, _) => OrdVal::Null,
            (_, true) => OrdVal::Float(self.avg_of(g)),
            (_, false) => self.sums[g].ord(),
        }
    }

    fn emit(&self, gids: &[u32], _dt: &DataType) -> Result<ArrayRef> {
        let valid = |g: u32| self.count[g as usize] > 0;
        if self.avg {
            return Ok(Arc::new(Float64Array::from_iter(gids.iter().map(|&g| valid(g).then(|| self.avg_of(g as usize))))));
        }
        S::emit(gids.iter().map(|&g| valid(g).then(|| self.sums[g as usize])))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
