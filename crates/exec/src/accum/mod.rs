//! Aggregate states: one [`GroupsAccumulator`] per aggregate of a GROUP BY, holding the
//! state of every group indexed by group id, with the update / merge / emit steps of
//! two-phase aggregation (DataFusion's `GroupsAccumulator` split): each function keeps its
//! own state in its own width ([`count`], [`sum`], [`min_max`], [`distinct`], [`variance`],
//! [`uniq`], [`quantile`]), and [`Accumulator::new`] is the one place that maps a function and an input
//! type to a state. Adding an aggregate is an [`AggFunc`] variant (name, output type), a
//! state type, and one line there.
//!
//! Inputs arrive as Arrow arrays of the planned input type, or of its native width when
//! they went through the radix scatter (`Date32` as `Int32`, `Timestamp(Second)` as
//! `Int64`, no NULLs). NULL inputs are skipped by every function; a group without a
//! non-NULL input gives NULL, except for the counts (0).

mod count;
mod distinct;
mod min_max;
mod quantile;
mod sum;
mod uniq;
mod variance;

use std::any::Any;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use arrow::array::*;
use arrow::buffer::NullBuffer;
use arrow::datatypes::*;
use tessera_common::float::cmp_f64;
use tessera_common::{Error, Result};

use crate::filter::string_parts;
use crate::plan::{AggExpr, AggFunc};
use crate::spill::{Dec, Enc, corrupt};
use tessera_kernels::Kernels;

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

/// The state of one aggregate function for every group of a hash table, indexed by group
/// id from 0. A state is created empty (0 groups) and grown with
/// [`GroupsAccumulator::resize`] before rows of new groups are added.
pub(crate) trait GroupsAccumulator: std::fmt::Debug + Send + Sync + Any {
    /// Reserves room for `n` more groups (no growth copies up to there).
    fn reserve(&mut self, n: usize);

    /// Grows the state to `n` groups; new groups start empty.
    fn resize(&mut self, n: usize);

    /// Bytes held by the state (vectors at their capacity, and heap bytes per group).
    fn memory_size(&self) -> usize;

    /// Adds input rows: row `i` of the batch belongs to group `gids[i]` and reads input row
    /// `sel[i]` (or `i` without a selection) of `input` (`None`: COUNT(*), or a COUNT whose
    /// input has no NULLs and was not carried). NULL inputs are skipped.
    ///
    /// # Errors
    /// [`Error::Internal`] for an input type the state was not made for (a bug).
    fn update(&mut self, gids: &[u32], input: Option<&ArrayRef>, sel: Option<&[u32]>) -> Result<()>;

    /// Adds the selected rows of `input` (rows `sel`, or all `rows` of it) to the one group
    /// `g`, with the kernel family's masked kernels where the function has them. The
    /// key-less aggregation (`SELECT SUM(x), .. FROM t`) tries this before
    /// [`GroupsAccumulator::update`]; `false` (the default) means nothing was added.
    fn update_one(&mut self, _g: usize, _input: Option<&ArrayRef>, _sel: Option<&[u32]>, _rows: usize, _kern: &Kernels) -> bool {
        false
    }

    /// Merges partial states: for each `(dst, src)`, group `src` of `other` into group `dst`
    /// of `self` (final phase of two-phase aggregation). `self` must be sized.
    ///
    /// # Panics
    /// If `other` is not a state of the same aggregate (a broken internal contract).
    fn merge(&mut self, pairs: &[(u32, u32)], other: &dyn GroupsAccumulator);

    /// Appends the state of every group to a spill buffer (external GROUP BY).
    fn encode(&self, e: &mut Enc<'_>);

    /// Reads the states of `groups` groups [`GroupsAccumulator::encode`] wrote, into this
    /// empty state of the same aggregate.
    ///
    /// # Errors
    /// [`Error::Corrupt`] on truncated bytes or a group count other than `groups`.
    fn decode(&mut self, d: &mut Dec<'_>, groups: usize) -> Result<()>;

    /// The final value of group `g`, for ordering (top-N).
    fn value(&self, g: u32) -> OrdVal<'_>;

    /// The per-group values when they are counts that are never NULL (COUNT, COUNT(*)),
    /// as [`GroupsAccumulator::value`] gives them one by one: the top-N by count reads
    /// them directly.
    fn counts(&self) -> Option<&[i64]> {
        None
    }

    /// Final values of groups `gids`, in that order, as an array of type `dt` (the
    /// aggregate's output type).
    ///
    /// # Errors
    /// [`Error::Internal`] if a state does not fit its output type (a bug).
    fn emit(&self, gids: &[u32], dt: &DataType) -> Result<ArrayRef>;

    /// Whether the radix-partition scatter can carry this aggregate's input (it keeps
    /// fixed-width values only).
    fn scatterable(&self) -> bool {
        true
    }

    fn as_any(&self) -> &dyn Any;
}

/// `other` as the state type `T` of the aggregate being merged into.
///
/// # Panics
/// If `other` is another state type: merging states of different aggregates is a bug.
fn same<T: 'static>(other: &dyn GroupsAccumulator) -> &T {
    other.as_any().downcast_ref::<T>().expect("merge of states of different aggregates")
}

/// An aggregate's state for every group: its function, input type and
/// [`GroupsAccumulator`].
#[derive(Debug)]
pub(crate) struct Accumulator {
    func: AggFunc,
    input_type: Option<DataType>,
    state: Box<dyn GroupsAccumulator>,
}

impl Accumulator {
    /// A state for `agg` whose input column has type `input_type` (None for COUNT(*)).
    ///
    /// # Errors
    /// [`Error::TypeMismatch`] for SUM/AVG/variances over non-numbers,
    /// [`Error::NotImplemented`] for MIN/MAX/COUNT(DISTINCT)/uniq over other types than
    /// numbers, dates, timestamps, strings.
    pub(crate) fn new(agg: &AggExpr, input_type: Option<DataType>) -> Result<Self> {
        let func = agg.func;
        // The input rules are `AggFunc`'s (the planner checks the same ones at plan time).
        let t = match input_type.as_ref() {
            t if func.needs_number() => numeric(func, t)?,
            t if func.needs_value() => orderable(func, t)?,
            t => t.unwrap_or(&DataType::Null),
        };
        let state: Box<dyn GroupsAccumulator> = match func {
            AggFunc::CountStar | AggFunc::Count => Box::new(count::Count::default()),
            AggFunc::Sum | AggFunc::Avg => sum::new(func, t),
            AggFunc::Min => min_max::new(false, t)?,
            AggFunc::Max => min_max::new(true, t)?,
            AggFunc::CountDistinct => distinct::new(t),
            AggFunc::Uniq => uniq::sampling(t),
            AggFunc::UniqHll12 => uniq::hll::<12>(t),
            AggFunc::UniqCombined => uniq::hll::<17>(t),
            AggFunc::Quantile(kind, level) => quantile::new(kind, level, t)?,
            AggFunc::VarPop | AggFunc::VarSamp | AggFunc::StddevPop | AggFunc::StddevSamp => Box::new(variance::Variance::new(func)),
        };
        Ok(Accumulator { func: agg.func, input_type, state })
    }

    /// The output type of this aggregate.
    pub(crate) fn output_type(&self) -> DataType {
        self.func.output_type(self.input_type.as_ref())
    }

    /// See [`GroupsAccumulator::scatterable`].
    pub(crate) fn scatterable(&self) -> bool {
        self.state.scatterable()
    }

    /// See [`GroupsAccumulator::reserve`].
    pub(crate) fn reserve(&mut self, n: usize) {
        self.state.reserve(n)
    }

    /// See [`GroupsAccumulator::resize`].
    pub(crate) fn resize(&mut self, n: usize) {
        self.state.resize(n)
    }

    /// See [`GroupsAccumulator::memory_size`].
    pub(crate) fn memory_size(&self) -> usize {
        self.state.memory_size()
    }

    /// See [`GroupsAccumulator::update_one`].
    pub(crate) fn update_one(&mut self, g: usize, input: Option<&ArrayRef>, sel: Option<&[u32]>, rows: usize, kern: &Kernels) -> bool {
        self.state.update_one(g, input, sel, rows, kern)
    }

    /// See [`GroupsAccumulator::update`].
    pub(crate) fn update(&mut self, gids: &[u32], input: Option<&ArrayRef>, sel: Option<&[u32]>) -> Result<()> {
        self.state.update(gids, input, sel)
    }

    /// See [`GroupsAccumulator::merge`].
    pub(crate) fn merge(&mut self, pairs: &[(u32, u32)], other: &Accumulator) {
        self.state.merge(pairs, other.state.as_ref())
    }

    /// See [`GroupsAccumulator::encode`].
    pub(crate) fn encode(&self, e: &mut Enc<'_>) {
        self.state.encode(e)
    }

    /// See [`GroupsAccumulator::decode`].
    pub(crate) fn decode(&mut self, d: &mut Dec<'_>, groups: usize) -> Result<()> {
        self.state.decode(d, groups)
    }

    /// See [`GroupsAccumulator::value`].
    pub(crate) fn value(&self, g: u32) -> OrdVal<'_> {
        self.state.value(g)
    }

    /// See [`GroupsAccumulator::counts`].
    pub(crate) fn counts(&self) -> Option<&[i64]> {
        self.state.counts()
    }

    /// See [`GroupsAccumulator::emit`].
    pub(crate) fn emit(&self, gids: &[u32]) -> Result<ArrayRef> {
        self.state.emit(gids, &self.output_type())
    }
}

fn type_name(t: Option<&DataType>) -> String {
    t.map_or("*".to_string(), |t| t.to_string())
}

/// The input type of an aggregate over numbers.
fn numeric(func: AggFunc, t: Option<&DataType>) -> Result<&DataType> {
    t.filter(|t| t.is_numeric())
        .ok_or_else(|| Error::TypeMismatch(format!("{func:?} needs a numeric argument, got {}", type_name(t))))
}

/// The input type of an aggregate over ordered values: numbers, dates, timestamps, strings.
fn orderable(func: AggFunc, t: Option<&DataType>) -> Result<&DataType> {
    t.filter(|t| t.is_numeric() || t.is_temporal() || is_string(t))
        .ok_or_else(|| Error::not_implemented(format!("{func:?} over {}", type_name(t))))
}

fn is_string(dt: &DataType) -> bool {
    matches!(dt, DataType::Utf8 | DataType::Binary)
}

/// A number of the input, widened.
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
    fn bits(self) -> u64 { tessera_common::float::canonical_f64(self).to_bits() }
}

/// Runs `$body` with `$vals` bound to the values (`&[T]`, `T: Num`) of the number, date or
/// timestamp array `$arr`, one monomorphic body per native type; `$other` for other types.
macro_rules! with_num {
    ($arr:expr, $vals:ident => $body:expr, _ => $other:expr) => {
        tessera_common::int_like_dispatch!($arr.data_type(), A => {
            let $vals: &[<A as ArrowPrimitiveType>::Native] = $arr.as_primitive::<A>().values();
            $body
        }, _ => match $arr.data_type() {
            DataType::Float32 => {
                let $vals: &[f32] = $arr.as_primitive::<Float32Type>().values();
                $body
            }
            DataType::Float64 => {
                let $vals: &[f64] = $arr.as_primitive::<Float64Type>().values();
                $body
            }
            _ => $other,
        })
    };
}
use with_num;

/// [`Error::Internal`] for an input a state was not made for.
fn bad_input(arr: &ArrayRef) -> Error {
    Error::internal(format!("aggregate input of type {}", arr.data_type()))
}

/// Calls `f(group, value)` for each row of a batch (row `i` in group `gids[i]` reads value
/// `sel[i]`, or `i`), skipping NULLs: one loop without checks when there is neither a
/// selection nor a NULL.
#[inline(always)]
fn for_rows<T: Copy>(gids: &[u32], vals: &[T], sel: Option<&[u32]>, nulls: Option<&NullBuffer>, mut f: impl FnMut(usize, T)) {
    match (sel, nulls) {
        (None, None) => {
            for (&g, &v) in gids.iter().zip(vals) {
                f(g as usize, v);
            }
        }
        _ => {
            for (i, &g) in gids.iter().enumerate() {
                let r = sel.map_or(i, |s| s[i] as usize);
                if nulls.is_some_and(|n| n.is_null(r)) {
                    continue;
                }
                f(g as usize, vals[r]);
            }
        }
    }
}

/// [`for_rows`] over the non-NULL values of a string or binary array: `f(group, bytes)`.
/// `false` if `arr` holds no strings.
fn for_strings(gids: &[u32], arr: &ArrayRef, sel: Option<&[u32]>, mut f: impl FnMut(usize, &[u8])) -> bool {
    if !is_string(arr.data_type()) {
        return false;
    }
    let nulls = arr.logical_nulls();
    let (offsets, data) = string_parts(arr);
    for (i, &g) in gids.iter().enumerate() {
        let r = sel.map_or(i, |s| s[i] as usize);
        if nulls.as_ref().is_none_or(|n| n.is_valid(r)) {
            f(g as usize, &data[offsets[r] as usize..offsets[r + 1] as usize]);
        }
    }
    true
}

/// The rows a one-group update adds, as a bitmap over `arr` (the selection AND the valid
/// rows; `None`: all rows), and how many there are.
fn one_group_mask(arr: &ArrayRef, sel: Option<&[u32]>, kern: &Kernels) -> (Option<Vec<u64>>, usize) {
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
    let valid = mask.as_deref().map_or(len, |m| (kern.count)(m, len));
    (mask, valid)
}

/// Reads a vector of exactly `groups` values [`Enc::slice`] wrote.
fn decode_exact<T: crate::spill::Pod>(d: &mut Dec<'_>, groups: usize, what: &str) -> Result<Vec<T>> {
    let v: Vec<T> = d.slice()?;
    if v.len() != groups {
        return Err(corrupt(format!("{} {what} states for {groups} groups", v.len())));
    }
    Ok(v)
}

/// Heap bytes of a hash set of `cap` slots of `T` (one control byte per slot).
fn set_bytes<T>(cap: usize) -> usize {
    cap * (std::mem::size_of::<T>() + 1)
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
    use crate::plan::{QuantileKind, QuantileLevel, ScalarExpr};
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

    /// Rows `0..n` of a column of every kind the aggregates take: integers with NULLs and
    /// extremes, floats with -0.0, NaN and infinities, strings with NULLs and empties.
    fn columns(n: usize) -> Vec<ArrayRef> {
        let x = |i: usize| (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20;
        vec![
            Arc::new(Int32Array::from_iter((0..n).map(|i| (i % 11 != 4).then(|| (x(i) % 1000) as i32 - 500)))),
            Arc::new(Int64Array::from_iter_values((0..n).map(|i| match i {
                3 => i64::MIN,
                4 => i64::MAX,
                _ => 1_000_000_000 + (x(i) % 97) as i64,
            }))),
            Arc::new(Float64Array::from_iter((0..n).map(|i| match i % 101 {
                7 => Some(-0.0),
                8 => Some(0.0),
                9 => None,
                _ => Some((x(i) % 5000) as f64 / 8.0 - 300.0),
            }))),
            // NaN (both signs), infinities, -0.0 among ordinary values, in some groups only.
            Arc::new(Float64Array::from_iter_values((0..n).map(|i| match i {
                10 => f64::NAN,
                11 => -f64::NAN,
                12 => f64::INFINITY,
                13 => f64::NEG_INFINITY,
                14 => -0.0,
                _ => (x(i) % 777) as f64 * 0.5,
            }))),
            Arc::new(Float32Array::from_iter((0..n).map(|i| match i % 97 {
                1 => Some(f32::NAN),
                2 => None,
                3 => Some(-0.0),
                _ => Some((x(i) % 300) as f32 - 150.0),
            }))),
            Arc::new(StringArray::from_iter((0..n).map(|i| match i % 13 {
                5 => None,
                6 => Some(String::new()),
                _ => Some(format!("v{}", x(i) % 3000)),
            }))),
        ]
    }

    const FUNCS: [AggFunc; 18] = [
        AggFunc::Quantile(QuantileKind::Cont, QuantileLevel::HALF),
        AggFunc::Quantile(QuantileKind::Exact, QuantileLevel::HALF),
        AggFunc::Quantile(QuantileKind::Disc, QuantileLevel::HALF),
        AggFunc::Quantile(QuantileKind::Cont, LEVEL_03),
        AggFunc::CountStar,
        AggFunc::Count,
        AggFunc::Sum,
        AggFunc::Avg,
        AggFunc::Min,
        AggFunc::Max,
        AggFunc::CountDistinct,
        AggFunc::Uniq,
        AggFunc::UniqHll12,
        AggFunc::UniqCombined,
        AggFunc::VarPop,
        AggFunc::VarSamp,
        AggFunc::StddevPop,
        AggFunc::StddevSamp,
    ];

    const LEVEL_03: QuantileLevel = match QuantileLevel::new(0.3) {
        Some(l) => l,
        None => unreachable!(),
    };

    /// Equal arrays, floats within a relative 1e-12 (merging partial variances adds in
    /// another order than one pass does).
    fn assert_close(a: &ArrayRef, b: &ArrayRef, what: &str) {
        if a.data_type() != &DataType::Float64 {
            assert_eq!(a.to_data(), b.to_data(), "{what}");
            return;
        }
        let (a, b) = (a.as_primitive::<Float64Type>(), b.as_primitive::<Float64Type>());
        assert_eq!(a.len(), b.len(), "{what}");
        for i in 0..a.len() {
            assert_eq!(a.is_valid(i), b.is_valid(i), "{what}: NULL at {i}");
            let (x, y) = (a.value(i), b.value(i));
            let ok = x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-12 * x.abs().max(y.abs());
            assert!(ok, "{what}: {x} vs {y} at {i}");
        }
    }

    /// The two-phase path: rows spread over three partial states (each its own group ids,
    /// in reverse order), merged into a final state, which goes through a spill
    /// (encode, decode) and emits what one state fed every row emits; `value` agrees
    /// with `emit`. Every aggregate over every input type it takes.
    #[test]
    fn partial_merge_and_spill_equal_one_state() {
        let n = 30_000;
        let groups = 7u32;
        let gid = |i: usize| ((i as u64).wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as u32 % groups;
        for arr in columns(n) {
            let dt = arr.data_type().clone();
            for func in FUNCS {
                let input = (func != AggFunc::CountStar).then_some(ScalarExpr::Column(0));
                let agg = AggExpr { func, input };
                let new = || Accumulator::new(&agg, input.map(|_| dt.clone()));
                let Ok(mut one) = new() else {
                    let quantile_of_strings = matches!(func, AggFunc::Quantile(..)) && !dt.is_numeric();
                    assert!(quantile_of_strings || (func.needs_number() && !dt.is_numeric()), "{func:?} over {dt} is refused");
                    continue;
                };
                let input_arr = input.map(|_| &arr);
                one.resize(groups as usize);
                let all: Vec<u32> = (0..n).map(gid).collect();
                one.update(&all, input_arr, None).unwrap();

                let mut parts = Vec::new();
                for k in 0..3 {
                    let sel: Vec<u32> = (0..n as u32).filter(|&i| i % 3 == k).collect();
                    // Partial group id = groups - 1 - final group id.
                    let gids: Vec<u32> = sel.iter().map(|&i| groups - 1 - gid(i as usize)).collect();
                    let mut p = new().unwrap();
                    p.resize(groups as usize);
                    p.update(&gids, input_arr, Some(&sel)).unwrap();
                    parts.push(p);
                }
                let mut fin = new().unwrap();
                fin.resize(groups as usize);
                let pairs: Vec<(u32, u32)> = (0..groups).map(|g| (g, groups - 1 - g)).collect();
                for p in parts.iter().rev() {
                    fin.merge(&pairs, p);
                }
                let mut buf = Vec::new();
                fin.encode(&mut Enc(&mut buf));
                let mut back = new().unwrap();
                back.decode(&mut Dec::new(&buf), groups as usize).unwrap();
                let order: Vec<u32> = (0..groups).collect();
                let want = one.emit(&order).unwrap();
                assert_eq!(want.data_type(), &one.output_type(), "{func:?} over {dt}");
                assert_close(&want, &fin.emit(&order).unwrap(), &format!("{func:?} over {dt}, merged"));
                assert_close(&want, &back.emit(&order).unwrap(), &format!("{func:?} over {dt}, spilled"));
                assert!(buf.len() > 8 && back.decode(&mut Dec::new(&buf[..buf.len() - 1]), groups as usize).is_err());
                for g in order {
                    let single = one.emit(&[g]).unwrap();
                    match one.value(g) {
                        OrdVal::Null => assert!(single.is_null(0), "{func:?} over {dt}"),
                        v => assert!(single.is_valid(0) && v != OrdVal::Null, "{func:?} over {dt}"),
                    }
                }
            }
        }
    }

    /// One group's state over `vals` (no NULLs), emitted.
    fn one_group(func: AggFunc, arr: ArrayRef) -> ArrayRef {
        let agg = AggExpr { func, input: Some(ScalarExpr::Column(0)) };
        let mut a = Accumulator::new(&agg, Some(arr.data_type().clone())).unwrap();
        a.resize(1);
        a.update(&vec![0; arr.len()], Some(&arr), None).unwrap();
        a.emit(&[0]).unwrap()
    }

    fn f64_of(a: ArrayRef) -> Option<f64> {
        let a = a.as_primitive::<Float64Type>();
        a.is_valid(0).then(|| a.value(0))
    }

    /// Variances against a two-pass reference, on values with a large mean (where
    /// `SUM(x^2) - SUM(x)^2 / n` cancels); NULL for no value, and for the sample ones below
    /// two values.
    #[test]
    fn variance_matches_two_pass_reference() {
        let vals: Vec<f64> = (0..10_001).map(|i| 1e9 + ((i * 7919) % 1000) as f64 * 0.25).collect();
        let n = vals.len() as f64;
        let mean = vals.iter().sum::<f64>() / n;
        let m2: f64 = vals.iter().map(|x| (x - mean) * (x - mean)).sum();
        let arr: ArrayRef = Arc::new(Float64Array::from(vals));
        let cases = [
            (AggFunc::VarPop, m2 / n),
            (AggFunc::VarSamp, m2 / (n - 1.0)),
            (AggFunc::StddevPop, (m2 / n).sqrt()),
            (AggFunc::StddevSamp, (m2 / (n - 1.0)).sqrt()),
        ];
        for (func, want) in cases {
            let got = f64_of(one_group(func, arr.clone())).unwrap();
            assert!((got - want).abs() <= 1e-9 * want, "{func:?}: {got} vs {want}");
        }
        let one: ArrayRef = Arc::new(Int32Array::from(vec![5]));
        assert_eq!(f64_of(one_group(AggFunc::VarPop, one.clone())), Some(0.0));
        assert_eq!(f64_of(one_group(AggFunc::StddevSamp, one.clone())), None);
        assert_eq!(f64_of(one_group(AggFunc::VarSamp, one)), None);
        let none: ArrayRef = Arc::new(Int32Array::from(vec![None, None]));
        assert_eq!(f64_of(one_group(AggFunc::VarPop, none)), None);
        // A NaN or an infinity makes the variance NaN (ClickHouse's answer), not 0.
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let arr: ArrayRef = Arc::new(Float64Array::from(vec![1.0, bad, 2.0]));
            for func in [AggFunc::VarPop, AggFunc::StddevSamp] {
                assert!(f64_of(one_group(func, arr.clone())).unwrap().is_nan(), "{func:?} with {bad}");
            }
        }
    }

    /// The approximate distinct counts: exact while a group is small (`uniq` up to 65,536
    /// values, `uniqHLL12` up to 512, `uniqCombined` up to 16,384), within their error
    /// bounds above (at least 3 standard errors), over integers and strings.
    #[test]
    fn approximate_uniq_is_exact_when_small_and_close_when_large() {
        let ints = |d: u64| -> ArrayRef {
            // Each value twice, so duplicates are seen.
            Arc::new(UInt64Array::from_iter_values((0..2 * d).map(|i| (i % d).wrapping_mul(0x9E37_79B9_7F4A_7C15))))
        };
        let strs = |d: u64| -> ArrayRef { Arc::new(StringArray::from_iter_values((0..2 * d).map(|i| format!("u{}", i % d)))) };
        let est = |func, arr| one_group(func, arr).as_primitive::<Int64Type>().value(0) as f64;
        for make in [&ints as &dyn Fn(u64) -> ArrayRef, &strs] {
            // Errors at 3 standard errors: sampling at skip 1-4 keeps >= 32K hashes (0.6%);
            // HyperLogLog 1.04 / sqrt(2^P): 1.6% and 0.29%.
            for (func, exact_to, rel_err) in
                [(AggFunc::Uniq, 65_536, 0.02), (AggFunc::UniqHll12, 512, 0.049), (AggFunc::UniqCombined, 16_384, 0.0087)]
            {
                for d in [1, 100, exact_to, exact_to + 1, 3 * exact_to, 1_000_000] {
                    let got = est(func, make(d));
                    if d <= exact_to {
                        assert_eq!(got, d as f64, "{func:?} of {d} values is exact");
                    } else {
                        let err = (got - d as f64).abs() / d as f64;
                        assert!(err <= rel_err, "{func:?} of {d} values: {got} ({:.2}% off)", err * 100.0);
                    }
                }
            }
        }
    }
}
