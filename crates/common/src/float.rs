//! Tessera's one order of floating-point values, used by GROUP BY, ORDER BY, comparisons,
//! MIN/MAX and top-N alike (DuckDB's order):
//!
//! - `-0.0` equals `0.0` (one group, equal in `=`, no order between them);
//! - every NaN is one value, whatever its sign and payload bits;
//! - NaN is greater than every number, `+inf` included (so `MAX` over values with a NaN is
//!   NaN, `MIN` skips NaN unless every value is NaN, `x > 1` holds for a NaN `x`, and
//!   `ORDER BY x` puts NaNs after `+inf`, before NULLs under the default NULLS LAST).
//!
//! The functions map a float to its canonical representative (`+0.0` for both zeros, the
//! positive quiet NaN for every NaN); on canonical values IEEE's `total_cmp` is exactly this
//! order, so Arrow's sort and comparison kernels (which use `total_cmp`) follow it once
//! their inputs are canonical ([`canonical_array`]).

use std::cmp::Ordering;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, PrimitiveArray};
use arrow::datatypes::{DataType, Float32Type, Float64Type};

/// The canonical representative of `x`: `+0.0` for `±0.0`, `f64::NAN` for every NaN.
#[inline(always)]
pub fn canonical_f64(x: f64) -> f64 {
    if x.is_nan() { f64::NAN } else { x + 0.0 }
}

/// [`canonical_f64`] for `f32`.
#[inline(always)]
pub fn canonical_f32(x: f32) -> f32 {
    if x.is_nan() { f32::NAN } else { x + 0.0 }
}

/// Compares two floats in Tessera's order (see the module docs).
#[inline]
pub fn cmp_f64(a: f64, b: f64) -> Ordering {
    canonical_f64(a).total_cmp(&canonical_f64(b))
}

/// `a` if it comes first in Tessera's order, else `b`: the MIN step (NaN only wins over NaN).
#[inline(always)]
pub fn min_f64(a: f64, b: f64) -> f64 {
    if a.is_nan() || b < a { b } else { a }
}

/// The larger of `a` and `b` in Tessera's order: the MAX step (NaN wins over everything).
#[inline(always)]
pub fn max_f64(a: f64, b: f64) -> f64 {
    if b > a || b.is_nan() { b } else { a }
}

/// `arr` with its float values made canonical, for Arrow kernels that order by `total_cmp`
/// (sort, column-vs-column comparison). Returns `arr` itself (no copy) when it is not a
/// float array or holds no `-0.0` and no NaN. NULLs stay NULL.
pub fn canonical_array(arr: &ArrayRef) -> ArrayRef {
    macro_rules! go {
        ($t:ty, $canon:expr) => {{
            let a = arr.as_primitive::<$t>();
            // Bit patterns, not `==`: `-0.0 == 0.0` and `NaN != NaN`.
            if a.values().iter().all(|&v| $canon(v).to_bits() == v.to_bits()) {
                return arr.clone();
            }
            let vals: Vec<_> = a.values().iter().map(|&v| $canon(v)).collect();
            Arc::new(PrimitiveArray::<$t>::new(vals.into(), a.nulls().cloned())) as ArrayRef
        }};
    }
    match arr.data_type() {
        DataType::Float64 => go!(Float64Type, canonical_f64),
        DataType::Float32 => go!(Float32Type, canonical_f32),
        _ => arr.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Float64Array;

    #[test]
    fn order_and_steps() {
        let neg_nan = f64::from_bits(f64::NAN.to_bits() | (1 << 63));
        assert_eq!(cmp_f64(-0.0, 0.0), Ordering::Equal);
        assert_eq!(cmp_f64(neg_nan, f64::NAN), Ordering::Equal);
        assert_eq!(cmp_f64(neg_nan, f64::INFINITY), Ordering::Greater);
        assert_eq!(cmp_f64(f64::NEG_INFINITY, -1.0), Ordering::Less);
        // MIN skips NaN unless all are NaN; MAX takes NaN.
        assert_eq!([3.0, neg_nan, 1.0].into_iter().fold(f64::NAN, min_f64), 1.0);
        assert!([neg_nan, f64::NAN].into_iter().fold(f64::NAN, min_f64).is_nan());
        assert!([3.0, neg_nan, 1.0].into_iter().fold(f64::NEG_INFINITY, max_f64).is_nan());
        assert_eq!([3.0, f64::INFINITY].into_iter().fold(f64::NEG_INFINITY, max_f64), f64::INFINITY);
        assert_eq!(canonical_f64(-0.0).to_bits(), 0);
        assert_eq!(canonical_f64(neg_nan).to_bits(), f64::NAN.to_bits());
    }

    #[test]
    fn canonical_array_copies_only_when_needed() {
        let clean: ArrayRef = Arc::new(Float64Array::from(vec![Some(1.0), None, Some(f64::INFINITY)]));
        assert!(Arc::ptr_eq(&canonical_array(&clean), &clean));
        let neg_nan = f64::from_bits(f64::NAN.to_bits() | (1 << 63));
        let dirty: ArrayRef = Arc::new(Float64Array::from(vec![Some(-0.0), None, Some(neg_nan)]));
        let c = canonical_array(&dirty);
        let c = c.as_primitive::<Float64Type>();
        assert_eq!(c.value(0).to_bits(), 0);
        assert!(c.is_null(1));
        assert_eq!(c.value(2).to_bits(), f64::NAN.to_bits());
    }
}
