//! Aggregate state of all groups, one accumulator per aggregate, indexed by group id
//! (the `GroupsAccumulator` design of DataFusion): `update` from input rows, `merge` partial
//! states (two-phase aggregation), `emit` the final values.

use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use arrow::array::*;
use arrow::buffer::NullBuffer;
use arrow::datatypes::*;
use tessera_common::float::{canonical_f64, cmp_f64, max_f64, min_f64};
use tessera_common::{Error, Result};

use crate::filter::string_parts;
use crate::plan::{AggExpr, AggFunc};
use crate::spill::{Dec, Enc, corrupt};
use tessera_kernels::{IntKernels, KernelInt, Kernels, SelectInt};

/// A value to order groups by (top-N), borrowed from a state or a key.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum OrdVal<'a> {
    Null,
    Int(i128),
    Float(f64),
    Bytes(&'a [u8]),
}

impl OrdVal<'_> {
    /// Total order: NULL first, then by value; floats in Tessera's order
    /// (`tessera_common::float`: -0.0 = 0.0, NaN one value above every number).
    pub(crate) fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        use std::cmp::Ordering::*;
        match (self, other) {
            (OrdVal::Null, OrdVal::Null) => Equal,
            (OrdVal::Null, _) => Less,
            (_, OrdVal::Null) => Greater,
            (OrdVal::Int(a), OrdVal::Int(b)) => a.cmp(b),
            (OrdVal::Float(a), OrdVal::Float(b)) => cmp_f64(*a, *b),
            (OrdVal::Int(a), OrdVal::Float(b)) => cmp_f64(*a as f64, *b),
            (OrdVal::Float(a), OrdVal::Int(b)) => cmp_f64(*a, *b as f64),
            (OrdVal::Bytes(a), OrdVal::Bytes(b)) => a.cmp(b),
            (OrdVal::Bytes(_), _) => Greater,
            (_, OrdVal::Bytes(_)) => Less,
        }
    }
}

#[derive(Debug)]
enum Sums {
    /// Inputs of at most 32 bits: an i64 sum cannot overflow below 2^32 rows per group.
    Narrow(Vec<i64>),
    /// 64-bit integer inputs.
    Wide(Vec<i128>),
    Float(Vec<f64>),
}

/// The distinct values of each group (COUNT(DISTINCT)).
#[derive(Debug)]
enum Distinct {
    /// Fixed-width values by bit pattern (sign-extended integers, canonical float bits).
    Fixed(Vec<FastSet<u64>>),
    /// Strings.
    Bytes(Vec<FastSet<Box<[u8]>>>),
}

/// State of one aggregate for every group of a hash table.
#[derive(Debug)]
pub(crate) struct Accumulator {
    func: AggFunc,
    input_type: Option<DataType>,
    /// Non-NULL inputs per group (rows for COUNT(*)).
    count: Vec<i64>,
    sums: Option<Sums>,
    /// MIN/MAX of integer-like inputs.
    ext_int: Vec<i128>,
    /// MIN/MAX of float inputs.
    ext_float: Vec<f64>,
    /// MIN/MAX of string inputs (valid where `count > 0`).
    ext_bytes: Vec<Vec<u8>>,
    distinct: Option<Distinct>,
    /// Heap bytes of `ext_bytes` and `distinct` (kept as they grow, not recounted).
    heap: usize,
}

trait Num: Copy {
    fn to_i64(self) -> i64;
    fn to_i128(self) -> i128;
    fn to_f64(self) -> f64;
    /// A bit pattern equal for equal values of one type (distinct sets).
    fn bits(self) -> u64;
}

macro_rules! num_int {
    ($($t:ty),*) => {$(impl Num for $t {
        #[inline(always)] fn to_i64(self) -> i64 { self as i64 }
        #[inline(always)] fn to_i128(self) -> i128 { self as i128 }
        #[inline(always)] fn to_f64(self) -> f64 { self as f64 }
        #[inline(always)] fn bits(self) -> u64 { self as i64 as u64 }
    })*};
}
num_int!(i8, i16, i32, i64, u8, u16, u32, u64);
impl Num for f32 {
    fn to_i64(self) -> i64 { self as i64 }
    fn to_i128(self) -> i128 { self as i128 }
    fn to_f64(self) -> f64 { self as f64 }
    fn bits(self) -> u64 { tessera_common::float::canonical_f32(self).to_bits() as u64 }
}
impl Num for f64 {
    fn to_i64(self) -> i64 { self as i64 }
    fn to_i128(self) -> i128 { self as i128 }
    fn to_f64(self) -> f64 { self }
    fn bits(self) -> u64 { canonical_f64(self).to_bits() }
}

fn is_string(dt: &DataType) -> bool {
    matches!(dt, DataType::Utf8 | DataType::Binary)
}

/// Reads the distinct sets [`Accumulator::encode`] wrote (a count, then per set a count and
/// its values, each read by `read`, which also gives the value's own heap bytes); adds their
/// heap bytes to `heap`.
fn decode_sets<T: std::hash::Hash + Eq>(
    d: &mut Dec<'_>,
    heap: &mut usize,
    mut read: impl FnMut(&mut Dec<'_>) -> Result<(T, usize)>,
) -> Result<Vec<FastSet<T>>> {
    let n = d.len(8)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let m = d.len(8)?;
        let mut set = FastSet::default();
        set.reserve(m);
        for _ in 0..m {
            let (v, bytes) = read(d)?;
            *heap += bytes;
            set.insert(v);
        }
        *heap += set_bytes::<T>(set.capacity());
        out.push(set);
    }
    Ok(out)
}

/// Heap bytes of a distinct set of `cap` slots of `T` (one control byte per slot).
fn set_bytes<T>(cap: usize) -> usize {
    cap * (std::mem::size_of::<T>() + 1)
}

fn is_float(dt: &DataType) -> bool {
    matches!(dt, DataType::Float32 | DataType::Float64)
}

fn is_wide(dt: &DataType) -> bool {
    matches!(dt, DataType::Int64 | DataType::UInt64 | DataType::Timestamp(_, _))
}

impl Accumulator {
    /// A state for `agg` whose input column has type `input_type` (None for COUNT(*)).
    ///
    /// # Errors
    /// [`Error::TypeMismatch`] for SUM/AVG over non-numbers, [`Error::NotImplemented`] for
    /// MIN/MAX/COUNT(DISTINCT) over other types than numbers, dates, timestamps, strings.
    pub(crate) fn new(agg: &AggExpr, input_type: Option<DataType>) -> Result<Self> {
        let numeric = input_type.as_ref().is_some_and(|t| t.is_numeric() || t.is_temporal());
        let string = input_type.as_ref().is_some_and(is_string);
        let mut distinct = None;
        let sums = match agg.func {
            AggFunc::Sum | AggFunc::Avg => {
                let t = input_type.as_ref().filter(|t| t.is_numeric()).ok_or_else(|| {
                    Error::TypeMismatch(format!(
                        "{:?} needs a numeric argument, got {}",
                        agg.func,
                        input_type.as_ref().map_or("*".to_string(), |t| t.to_string())
                    ))
                })?;
                Some(if is_float(t) {
                    Sums::Float(Vec::new())
                } else if is_wide(t) {
                    Sums::Wide(Vec::new())
                } else {
                    Sums::Narrow(Vec::new())
                })
            }
            AggFunc::CountDistinct if string => {
                distinct = Some(Distinct::Bytes(Vec::new()));
                None
            }
            AggFunc::CountDistinct if numeric => {
                distinct = Some(Distinct::Fixed(Vec::new()));
                None
            }
            AggFunc::Min | AggFunc::Max | AggFunc::CountDistinct if !numeric && !string => {
                return Err(Error::not_implemented(format!(
                    "{:?} over {}",
                    agg.func,
                    input_type.map_or("*".to_string(), |t| t.to_string())
                )));
            }
            _ => None,
        };
        Ok(Accumulator {
            func: agg.func,
            input_type,
            count: Vec::new(),
            sums,
            ext_int: Vec::new(),
            ext_float: Vec::new(),
            ext_bytes: Vec::new(),
            distinct,
            heap: 0,
        })
    }

    fn string_input(&self) -> bool {
        self.input_type.as_ref().is_some_and(is_string)
    }

    /// Whether the radix-partition scatter can carry this aggregate's input (it keeps
    /// fixed-width values only).
    pub(crate) fn scatterable(&self) -> bool {
        !(self.string_input() && matches!(self.func, AggFunc::Min | AggFunc::Max | AggFunc::CountDistinct))
    }

    fn is_min_max(&self) -> bool {
        matches!(self.func, AggFunc::Min | AggFunc::Max)
    }

    fn float_input(&self) -> bool {
        self.input_type.as_ref().is_some_and(is_float)
    }

    /// Reserves room for `n` more groups (no growth copies up to there).
    pub(crate) fn reserve(&mut self, n: usize) {
        self.count.reserve(n);
        match &mut self.sums {
            Some(Sums::Narrow(v)) => v.reserve(n),
            Some(Sums::Wide(v)) => v.reserve(n),
            Some(Sums::Float(v)) => v.reserve(n),
            None => {}
        }
        if self.is_min_max() {
            if self.string_input() {
                self.ext_bytes.reserve(n);
            } else if self.float_input() {
                self.ext_float.reserve(n);
            } else {
                self.ext_int.reserve(n);
            }
        }
        match &mut self.distinct {
            Some(Distinct::Fixed(v)) => v.reserve(n),
            Some(Distinct::Bytes(v)) => v.reserve(n),
            None => {}
        }
    }

    /// Grows the state to `n` groups (new groups start empty).
    pub(crate) fn resize(&mut self, n: usize) {
        self.count.resize(n, 0);
        match &mut self.sums {
            Some(Sums::Narrow(v)) => v.resize(n, 0),
            Some(Sums::Wide(v)) => v.resize(n, 0),
            Some(Sums::Float(v)) => v.resize(n, 0.0),
            None => {}
        }
        match &mut self.distinct {
            Some(Distinct::Fixed(v)) => v.resize_with(n, FastSet::default),
            Some(Distinct::Bytes(v)) => v.resize_with(n, FastSet::default),
            None => {}
        }
        if self.is_min_max() {
            let max = self.func == AggFunc::Max;
            if self.string_input() {
                self.ext_bytes.resize_with(n, Vec::new);
            } else if self.float_input() {
                // The identities of Tessera's float order: NaN is above +inf.
                self.ext_float.resize(n, if max { f64::NEG_INFINITY } else { f64::NAN });
            } else {
                self.ext_int.resize(n, if max { i128::MIN } else { i128::MAX });
            }
        }
    }

    /// Bytes held by the state.
    pub(crate) fn memory_size(&self) -> usize {
        let sums = match &self.sums {
            Some(Sums::Narrow(v)) => v.capacity() * 8,
            Some(Sums::Wide(v)) => v.capacity() * 16,
            Some(Sums::Float(v)) => v.capacity() * 8,
            None => 0,
        };
        let sets = match &self.distinct {
            Some(Distinct::Fixed(v)) => v.capacity() * std::mem::size_of::<FastSet<u64>>(),
            Some(Distinct::Bytes(v)) => v.capacity() * std::mem::size_of::<FastSet<Box<[u8]>>>(),
            None => 0,
        };
        self.count.capacity() * 8
            + sums
            + self.ext_int.capacity() * 16
            + self.ext_float.capacity() * 8
            + self.ext_bytes.capacity() * std::mem::size_of::<Vec<u8>>()
            + sets
            + self.heap
    }

    /// Adds string `v` to group `g` (MIN/MAX/COUNT(DISTINCT) of strings).
    #[inline]
    fn add_bytes(&mut self, g: usize, v: &[u8]) {
        match self.func {
            AggFunc::Min | AggFunc::Max => {
                let cur = &mut self.ext_bytes[g];
                let better = self.count[g] == 0 || if self.func == AggFunc::Min { v < cur.as_slice() } else { v > cur.as_slice() };
                if better {
                    let before = cur.capacity();
                    cur.clear();
                    cur.extend_from_slice(v);
                    self.heap += cur.capacity() - before;
                }
            }
            AggFunc::CountDistinct => {
                if let Some(Distinct::Bytes(sets)) = &mut self.distinct {
                    let set = &mut sets[g];
                    if !set.contains(v) {
                        let before = set.capacity();
                        set.insert(v.into());
                        self.heap += set_bytes::<Box<[u8]>>(set.capacity() - before) + v.len().next_multiple_of(16);
                    }
                }
            }
            _ => {}
        }
        self.count[g] += 1;
    }

    /// Adds the selected rows of `input` (rows `sel`, or all `rows` of it) to the one group
    /// `g` with the kernel family's masked `sum` / `min` / `max` (COUNT, SUM, AVG, MIN, MAX
    /// of integers, dates and timestamps; COUNT(*) without input). The key-less aggregation
    /// (`SELECT SUM(x), .. FROM t`) takes this path instead of a group id per row. Returns
    /// `false`, having changed nothing, for the other aggregates and types (floats: their
    /// sums stay sequential, so answers do not depend on the ISA), which go through
    /// [`Accumulator::update`].
    pub(crate) fn update_one(&mut self, g: usize, input: Option<&ArrayRef>, sel: Option<&[u32]>, rows: usize, kern: &Kernels) -> bool {
        let Some(arr) = input else {
            self.count[g] += rows as i64;
            return true;
        };
        if self.distinct.is_some() || self.float_input() || matches!(self.sums, Some(Sums::Float(_))) {
            return false;
        }
        // The rows to add as a bitmap over the input: the selection AND the valid rows.
        let len = arr.len();
        let nulls = arr.logical_nulls();
        let mask: Option<Vec<u64>> = match (sel, &nulls) {
            (None, None) => None,
            (None, Some(n)) => Some(n.inner().bit_chunks().iter_padded().collect()),
            (Some(s), n) => {
                let mut words = vec![0u64; len.div_ceil(64)];
                for &r in s {
                    words[r as usize / 64] |= 1 << (r % 64);
                }
                if let Some(n) = n {
                    for (w, v) in words.iter_mut().zip(n.inner().bit_chunks().iter_padded()) {
                        *w &= v;
                    }
                }
                Some(words)
            }
        };
        let mask = mask.as_deref();
        let valid = mask.map_or(len, |m| (kern.count)(m, len));
        tessera_common::int_like_dispatch!(arr.data_type(), A => {
            let vals = arr.as_primitive::<A>().values();
            self.update_one_int(g, vals, mask, valid, <<A as ArrowPrimitiveType>::Native as SelectInt>::of(kern))
        }, _ => return false);
        true
    }

    fn update_one_int<T: KernelInt>(&mut self, g: usize, vals: &[T], mask: Option<&[u64]>, valid: usize, k: &IntKernels<T>) {
        match (self.func, &mut self.sums) {
            (_, Some(Sums::Narrow(s))) => s[g] += (k.sum)(vals, mask) as i64,
            (_, Some(Sums::Wide(s))) => s[g] += (k.sum)(vals, mask),
            (AggFunc::Min, _) => {
                if let Some(m) = (k.min)(vals, mask) {
                    self.ext_int[g] = self.ext_int[g].min(KernelInt::to_i128(m));
                }
            }
            (AggFunc::Max, _) => {
                if let Some(m) = (k.max)(vals, mask) {
                    self.ext_int[g] = self.ext_int[g].max(KernelInt::to_i128(m));
                }
            }
            _ => {}
        }
        self.count[g] += valid as i64;
    }

    /// Adds input rows: row `i` of the batch belongs to group `gids[i]` and reads input row
    /// `sel[i]` (or `i` without selection) of `input`. State must be sized (`resize`).
    pub(crate) fn update(&mut self, gids: &[u32], input: Option<&ArrayRef>, sel: Option<&[u32]>) -> Result<()> {
        let Some(arr) = input else {
            for &g in gids {
                self.count[g as usize] += 1;
            }
            return Ok(());
        };
        let nulls = arr.logical_nulls();
        macro_rules! go {
            ($t:ty) => {
                self.update_typed(gids, arr.as_primitive::<$t>().values(), sel, nulls.as_ref())
            };
        }
        tessera_common::int_like_dispatch!(arr.data_type(), A => go!(A), _ => match arr.data_type() {
            DataType::Float32 => go!(Float32Type),
            DataType::Float64 => go!(Float64Type),
            DataType::Utf8 | DataType::Binary if self.func == AggFunc::Count => {
                for (i, &g) in gids.iter().enumerate() {
                    let r = sel.map_or(i, |s| s[i] as usize);
                    if nulls.as_ref().is_none_or(|n| n.is_valid(r)) {
                        self.count[g as usize] += 1;
                    }
                }
            }
            DataType::Utf8 | DataType::Binary => {
                let (offsets, data) = string_parts(arr);
                for (i, &g) in gids.iter().enumerate() {
                    let r = sel.map_or(i, |s| s[i] as usize);
                    if nulls.as_ref().is_none_or(|n| n.is_valid(r)) {
                        self.add_bytes(g as usize, &data[offsets[r] as usize..offsets[r + 1] as usize]);
                    }
                }
            }
            other => return Err(Error::internal(format!("aggregate input of type {other}"))),
        });
        Ok(())
    }

    fn update_typed<T: Num>(&mut self, gids: &[u32], vals: &[T], sel: Option<&[u32]>, nulls: Option<&NullBuffer>) {
        // One monomorphic loop per (state kind, selection): the branch on the kind is
        // outside the row loop.
        macro_rules! rows {
            (|$g:ident, $v:ident| $body:expr) => {{
                match (sel, nulls) {
                    (None, None) => {
                        for (&$g, &$v) in gids.iter().zip(vals) {
                            let $g = $g as usize;
                            $body;
                        }
                    }
                    _ => {
                        for (i, &$g) in gids.iter().enumerate() {
                            let r = sel.map_or(i, |s| s[i] as usize);
                            if nulls.is_some_and(|n| n.is_null(r)) {
                                continue;
                            }
                            let $g = $g as usize;
                            let $v = vals[r];
                            $body;
                        }
                    }
                }
            }};
        }
        let count = &mut self.count;
        if let Some(Distinct::Fixed(sets)) = &mut self.distinct {
            let heap = &mut self.heap;
            rows!(|g, v| {
                let set = &mut sets[g];
                let before = set.capacity();
                if set.insert(v.bits()) && set.capacity() != before {
                    *heap += set_bytes::<u64>(set.capacity() - before);
                }
                count[g] += 1
            });
            return;
        }
        match (self.func, &mut self.sums) {
            (AggFunc::Count | AggFunc::CountStar | AggFunc::CountDistinct, _) => rows!(|g, _v| count[g] += 1),
            (_, Some(Sums::Narrow(s))) => rows!(|g, v| {
                s[g] += v.to_i64();
                count[g] += 1
            }),
            (_, Some(Sums::Wide(s))) => rows!(|g, v| {
                s[g] += v.to_i128();
                count[g] += 1
            }),
            (_, Some(Sums::Float(s))) => rows!(|g, v| {
                s[g] += v.to_f64();
                count[g] += 1
            }),
            (AggFunc::Min, None) if self.input_type.as_ref().is_some_and(is_float) => {
                let e = &mut self.ext_float;
                rows!(|g, v| {
                    e[g] = min_f64(e[g], v.to_f64());
                    count[g] += 1
                })
            }
            (AggFunc::Max, None) if self.input_type.as_ref().is_some_and(is_float) => {
                let e = &mut self.ext_float;
                rows!(|g, v| {
                    e[g] = max_f64(e[g], v.to_f64());
                    count[g] += 1
                })
            }
            (AggFunc::Min, None) => {
                let e = &mut self.ext_int;
                rows!(|g, v| {
                    e[g] = e[g].min(v.to_i128());
                    count[g] += 1
                })
            }
            (AggFunc::Max, None) => {
                let e = &mut self.ext_int;
                rows!(|g, v| {
                    e[g] = e[g].max(v.to_i128());
                    count[g] += 1
                })
            }
            (AggFunc::Sum | AggFunc::Avg, None) => unreachable!("SUM/AVG always have sums"),
        }
    }

    /// Appends the state of every group to a spill buffer (external GROUP BY).
    pub(crate) fn encode(&self, e: &mut Enc<'_>) {
        e.slice(&self.count);
        match &self.sums {
            Some(Sums::Narrow(v)) => e.slice(v),
            Some(Sums::Wide(v)) => e.slice(v),
            Some(Sums::Float(v)) => e.slice(v),
            None => {}
        }
        e.slice(&self.ext_int);
        e.slice(&self.ext_float);
        e.put(self.ext_bytes.len() as u64);
        for b in &self.ext_bytes {
            e.bytes(b);
        }
        match &self.distinct {
            Some(Distinct::Fixed(sets)) => {
                e.put(sets.len() as u64);
                for set in sets {
                    e.put(set.len() as u64);
                    for &v in set {
                        e.put(v);
                    }
                }
            }
            Some(Distinct::Bytes(sets)) => {
                e.put(sets.len() as u64);
                for set in sets {
                    e.put(set.len() as u64);
                    for v in set {
                        e.bytes(v);
                    }
                }
            }
            None => {}
        }
    }

    /// Reads the states of `groups` groups [`Accumulator::encode`] wrote, into this empty
    /// state of the same aggregate.
    ///
    /// # Errors
    /// [`Error::Corrupt`] on truncated bytes or a group count other than `groups`.
    pub(crate) fn decode(&mut self, d: &mut Dec<'_>, groups: usize) -> Result<()> {
        fn check<T>(v: Vec<T>, groups: usize, what: &str) -> Result<Vec<T>> {
            if v.is_empty() || v.len() == groups {
                Ok(v)
            } else {
                Err(corrupt(format!("{} {what} states for {groups} groups", v.len())))
            }
        }
        self.count = d.slice()?;
        if self.count.len() != groups {
            return Err(corrupt(format!("{} counts for {groups} groups", self.count.len())));
        }
        match &mut self.sums {
            Some(Sums::Narrow(v)) => *v = check(d.slice()?, groups, "sum")?,
            Some(Sums::Wide(v)) => *v = check(d.slice()?, groups, "sum")?,
            Some(Sums::Float(v)) => *v = check(d.slice()?, groups, "sum")?,
            None => {}
        }
        self.ext_int = check(d.slice()?, groups, "min/max")?;
        self.ext_float = check(d.slice()?, groups, "min/max")?;
        let n = d.len(8)?;
        let mut ext_bytes = Vec::with_capacity(n);
        for _ in 0..n {
            let b = d.bytes()?.to_vec();
            self.heap += b.capacity();
            ext_bytes.push(b);
        }
        self.ext_bytes = check(ext_bytes, groups, "min/max")?;
        match &mut self.distinct {
            Some(Distinct::Fixed(sets)) => {
                *sets = check(decode_sets(d, &mut self.heap, |d| Ok((d.get::<u64>()?, 0)))?, groups, "distinct")?;
            }
            Some(Distinct::Bytes(sets)) => {
                let read = |d: &mut Dec<'_>| {
                    let v: Box<[u8]> = d.bytes()?.into();
                    let heap = v.len().next_multiple_of(16);
                    Ok((v, heap))
                };
                *sets = check(decode_sets(d, &mut self.heap, read)?, groups, "distinct")?;
            }
            None => {}
        }
        // Vectors a state keeps for every group, written empty, start at their identities.
        self.resize(groups);
        Ok(())
    }

    /// Merges partial states: for each `(dst, src)`, group `src` of `other` into group `dst`
    /// of `self` (final phase of two-phase aggregation). `self` must be sized.
    pub(crate) fn merge(&mut self, pairs: &[(u32, u32)], other: &Accumulator) {
        for &(d, s) in pairs {
            self.count[d as usize] += other.count[s as usize];
        }
        match (&mut self.sums, &other.sums) {
            (Some(Sums::Narrow(a)), Some(Sums::Narrow(b))) => pairs.iter().for_each(|&(d, s)| a[d as usize] += b[s as usize]),
            (Some(Sums::Wide(a)), Some(Sums::Wide(b))) => pairs.iter().for_each(|&(d, s)| a[d as usize] += b[s as usize]),
            (Some(Sums::Float(a)), Some(Sums::Float(b))) => pairs.iter().for_each(|&(d, s)| a[d as usize] += b[s as usize]),
            _ => {}
        }
        match (&mut self.distinct, &other.distinct) {
            (Some(Distinct::Fixed(a)), Some(Distinct::Fixed(b))) => {
                for &(d, s) in pairs {
                    let set = &mut a[d as usize];
                    let before = set.capacity();
                    set.extend(b[s as usize].iter().copied());
                    self.heap += set_bytes::<u64>(set.capacity() - before);
                }
            }
            (Some(Distinct::Bytes(a)), Some(Distinct::Bytes(b))) => {
                for &(d, s) in pairs {
                    let set = &mut a[d as usize];
                    let before = set.capacity();
                    for v in &b[s as usize] {
                        if !set.contains(v) {
                            self.heap += v.len().next_multiple_of(16);
                            set.insert(v.clone());
                        }
                    }
                    self.heap += set_bytes::<Box<[u8]>>(set.capacity() - before);
                }
            }
            _ => {}
        }
        if self.is_min_max() && self.string_input() {
            let max = self.func == AggFunc::Max;
            for &(d, s) in pairs {
                let (d, s) = (d as usize, s as usize);
                // `count` was merged above: the source group holds a value iff it counted one.
                if other.count[s] == 0 {
                    continue;
                }
                let (cur, v) = (&self.ext_bytes[d], &other.ext_bytes[s]);
                let first = self.count[d] == other.count[s];
                if first || (max && v > cur) || (!max && v < cur) {
                    let before = self.ext_bytes[d].capacity();
                    self.ext_bytes[d].clone_from(v);
                    self.heap += self.ext_bytes[d].capacity().saturating_sub(before);
                }
            }
        } else if self.is_min_max() {
            let max = self.func == AggFunc::Max;
            if self.float_input() {
                for &(d, s) in pairs {
                    let (a, b) = (self.ext_float[d as usize], other.ext_float[s as usize]);
                    self.ext_float[d as usize] = if max { max_f64(a, b) } else { min_f64(a, b) };
                }
            } else {
                for &(d, s) in pairs {
                    let (a, b) = (self.ext_int[d as usize], other.ext_int[s as usize]);
                    self.ext_int[d as usize] = if max { a.max(b) } else { a.min(b) };
                }
            }
        }
    }

    /// The final value of group `g`, for ordering (top-N).
    pub(crate) fn value(&self, g: u32) -> OrdVal<'_> {
        let g = g as usize;
        let n = self.count[g];
        match self.func {
            AggFunc::Count | AggFunc::CountStar => OrdVal::Int(n as i128),
            AggFunc::CountDistinct => OrdVal::Int(self.distinct_len(g) as i128),
            _ if n == 0 => OrdVal::Null,
            AggFunc::Sum => match &self.sums {
                Some(Sums::Narrow(s)) => OrdVal::Int(s[g] as i128),
                Some(Sums::Wide(s)) => OrdVal::Int(s[g]),
                Some(Sums::Float(s)) => OrdVal::Float(s[g]),
                None => OrdVal::Null,
            },
            AggFunc::Avg => OrdVal::Float(self.avg(g)),
            AggFunc::Min | AggFunc::Max => {
                if self.string_input() {
                    OrdVal::Bytes(&self.ext_bytes[g])
                } else if self.float_input() {
                    OrdVal::Float(self.ext_float[g])
                } else {
                    OrdVal::Int(self.ext_int[g])
                }
            }
        }
    }

    /// The per-group values of COUNT / COUNT(*) (never NULL), as [`Accumulator::value`]
    /// gives them one by one; `None` for the other aggregates.
    pub(crate) fn counts(&self) -> Option<&[i64]> {
        matches!(self.func, AggFunc::Count | AggFunc::CountStar).then_some(self.count.as_slice())
    }

    fn distinct_len(&self, g: usize) -> usize {
        match &self.distinct {
            Some(Distinct::Fixed(v)) => v[g].len(),
            Some(Distinct::Bytes(v)) => v[g].len(),
            None => 0,
        }
    }

    fn avg(&self, g: usize) -> f64 {
        let n = self.count[g] as f64;
        match &self.sums {
            Some(Sums::Narrow(s)) => s[g] as f64 / n,
            Some(Sums::Wide(s)) => s[g] as f64 / n,
            Some(Sums::Float(s)) => s[g] / n,
            None => f64::NAN,
        }
    }

    /// The output type of this aggregate.
    pub(crate) fn output_type(&self) -> DataType {
        self.func.output_type(self.input_type.as_ref())
    }

    /// Final values of groups `gids`, in that order.
    ///
    /// # Errors
    /// [`Error::Internal`] if a state does not fit its output type (a bug).
    pub(crate) fn emit(&self, gids: &[u32]) -> Result<ArrayRef> {
        let valid = |g: u32| self.count[g as usize] > 0;
        Ok(match self.func {
            AggFunc::Count | AggFunc::CountStar => {
                Arc::new(Int64Array::from_iter_values(gids.iter().map(|&g| self.count[g as usize])))
            }
            AggFunc::CountDistinct => {
                Arc::new(Int64Array::from_iter_values(gids.iter().map(|&g| self.distinct_len(g as usize) as i64)))
            }
            AggFunc::Min | AggFunc::Max if self.string_input() => {
                let bin: BinaryArray =
                    gids.iter().map(|&g| valid(g).then(|| self.ext_bytes[g as usize].as_slice())).collect();
                let bin: ArrayRef = Arc::new(bin);
                // MIN/MAX of valid UTF-8 strings are among them: the cast cannot fail.
                arrow::compute::cast(&bin, &self.output_type())?
            }
            AggFunc::Avg => Arc::new(Float64Array::from_iter(
                gids.iter().map(|&g| valid(g).then(|| self.avg(g as usize))),
            )),
            AggFunc::Sum => match &self.sums {
                Some(Sums::Float(s)) => {
                    Arc::new(Float64Array::from_iter(gids.iter().map(|&g| valid(g).then(|| s[g as usize]))))
                }
                Some(Sums::Narrow(s)) => {
                    Arc::new(Int64Array::from_iter(gids.iter().map(|&g| valid(g).then(|| s[g as usize]))))
                }
                Some(Sums::Wide(s)) => Arc::new(
                    Decimal128Array::from_iter(gids.iter().map(|&g| valid(g).then(|| s[g as usize])))
                        .with_precision_and_scale(38, 0)?,
                ),
                None => return Err(Error::internal("SUM without state")),
            },
            AggFunc::Min | AggFunc::Max => {
                let dt = self.output_type();
                if self.float_input() {
                    let a: ArrayRef = Arc::new(Float64Array::from_iter(
                        gids.iter().map(|&g| valid(g).then(|| canonical_f64(self.ext_float[g as usize]))),
                    ));
                    arrow::compute::cast(&a, &dt)?
                } else {
                    // Values came from the input type, so the conversion back is exact.
                    int_array(gids.iter().map(|&g| valid(g).then(|| self.ext_int[g as usize])), &dt)?
                }
            }
        })
    }
}

/// Builds an array of integer-like type `dt` (ints, Date32, Timestamp(Second)) from i128
/// values that are known to fit.
///
/// # Errors
/// [`Error::Overflow`] if a value does not fit `dt`; [`Error::Internal`] for other types.
pub(crate) fn int_array(vals: impl Iterator<Item = Option<i128>>, dt: &DataType) -> Result<ArrayRef> {
    macro_rules! build {
        ($t:ty) => {{
            // Sized from the values (the default, 1,024 values, made each of the 256
            // partitions' ten top-N candidates of a query hold 8 KiB per column).
            let mut b = PrimitiveBuilder::<$t>::with_capacity(vals.size_hint().0);
            for v in vals {
                match v {
                    Some(v) => b.append_value(
                        <<$t as ArrowPrimitiveType>::Native>::try_from(v)
                            .map_err(|_| Error::Overflow(format!("{v} does not fit {dt}")))?,
                    ),
                    None => b.append_null(),
                }
            }
            Arc::new(b.finish()) as ArrayRef
        }};
    }
    Ok(tessera_common::int_like_dispatch!(dt, A => build!(A), _ => return Err(Error::internal(format!("int_array of {dt}")))))
}

/// A hasher for distinct-value sets: MurmurHash3's `fmix64` of each word, the engine's
/// string hash for bytes (the values are hashed once each, no DoS concern: the sets live
/// for one query).
#[derive(Default, Clone, Copy)]
pub(crate) struct MixHasher(u64);

impl Hasher for MixHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0 = tessera_kernels::hash_u64(self.0 ^ tessera_kernels::hash_bytes(bytes));
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = tessera_kernels::hash_u64(self.0 ^ v);
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
}

/// `HashSet` with [`MixHasher`].
pub(crate) type FastSet<T> = std::collections::HashSet<T, BuildHasherDefault<MixHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::ScalarExpr;
    use tessera_kernels::SimdLevel;

    /// The one-group path (the families' masked kernels) equals the per-row path with
    /// every row in group 0, for every aggregate, integer-like type, NULL pattern and
    /// selection, in every kernel family this CPU runs, across two morsels.
    #[test]
    fn update_one_equals_update_per_row() {
        let n = 1_037;
        let x = |i: usize| (i as i64).wrapping_mul(0x9E37_79B9_7F4A_7C15u64 as i64);
        let nulls = |i: usize| i % 7 != 3;
        let arrays: Vec<ArrayRef> = vec![
            Arc::new(Int8Array::from_iter((0..n).map(|i| nulls(i).then(|| x(i) as i8)))),
            Arc::new(Int16Array::from_iter_values((0..n).map(|i| x(i) as i16))),
            Arc::new(Int32Array::from_iter((0..n).map(|i| nulls(i).then(|| x(i) as i32)))),
            Arc::new(Int64Array::from_iter((0..n).map(|i| nulls(i).then(|| if i == 5 { i64::MIN } else if i == 6 { i64::MAX } else { x(i) })))),
            Arc::new(UInt8Array::from_iter_values((0..n).map(|i| x(i) as u8))),
            Arc::new(UInt16Array::from_iter((0..n).map(|i| nulls(i).then(|| x(i) as u16)))),
            Arc::new(UInt32Array::from_iter_values((0..n).map(|i| x(i) as u32))),
            Arc::new(UInt64Array::from_iter((0..n).map(|i| nulls(i).then(|| if i == 9 { u64::MAX } else { x(i) as u64 })))),
            Arc::new(Date32Array::from_iter((0..n).map(|i| nulls(i).then(|| x(i) as i32 % 40_000)))),
            Arc::new(TimestampSecondArray::from_iter_values((0..n).map(|i| x(i) % 2_000_000_000))),
            // Sliced: the null bitmap starts mid-word.
            Arc::new(Int32Array::from_iter((0..n + 5).map(|i| nulls(i).then(|| x(i) as i32))).slice(5, n)),
        ];
        let every_third: Vec<u32> = (0..n as u32).filter(|i| i % 3 == 1).collect();
        let sels: [Option<&[u32]>; 3] = [None, Some(&every_third), Some(&[])];
        for level in SimdLevel::available() {
            let kern = Kernels::for_level(level).unwrap();
            for arr in &arrays {
                let dt = arr.data_type().clone();
                for func in [AggFunc::Count, AggFunc::Sum, AggFunc::Avg, AggFunc::Min, AggFunc::Max] {
                    if matches!(func, AggFunc::Sum | AggFunc::Avg) && !dt.is_numeric() {
                        continue;
                    }
                    let agg = AggExpr { func, input: Some(ScalarExpr::Column(0)) };
                    for sel in sels {
                        let rows = sel.map_or(n, |s| s.len());
                        let mut one = Accumulator::new(&agg, Some(dt.clone())).unwrap();
                        let mut per_row = Accumulator::new(&agg, Some(dt.clone())).unwrap();
                        one.resize(1);
                        per_row.resize(1);
                        for _ in 0..2 {
                            assert!(one.update_one(0, Some(arr), sel, rows, kern));
                            per_row.update(&vec![0; rows], Some(arr), sel).unwrap();
                        }
                        assert_eq!(
                            one.emit(&[0]).unwrap().to_data(),
                            per_row.emit(&[0]).unwrap().to_data(),
                            "{level:?} {func:?} over {dt}, selection {:?}",
                            sel.map(|s| s.len())
                        );
                    }
                }
            }
            let mut star = Accumulator::new(&AggExpr { func: AggFunc::CountStar, input: None }, None).unwrap();
            star.resize(1);
            assert!(star.update_one(0, None, None, 10, kern) && star.update_one(0, None, Some(&[1, 2]), 2, kern));
            assert_eq!(star.emit(&[0]).unwrap().as_primitive::<Int64Type>().value(0), 12);
        }
    }
}
