//! The column types execution, storage and the loaders treat alike, dispatched once.
//!
//! Tessera's columns are the types of [`crate::is_supported_type`]. Many kernels are
//! written once over an Arrow primitive type `A` and instantiated per type; the macros here
//! hold the one `match` from a runtime [`DataType`](arrow::datatypes::DataType) to that
//! instantiation, so adding an integer-like type touches this file, not every caller.
//!
//! - [`integer_dispatch!`]: `Int8..Int64`, `UInt8..UInt64`.
//! - [`int_like_dispatch!`]: those, `Date32` (days, `i32`) and `Timestamp(Second)` (`i64`):
//!   every type whose values are integers in memory and order like them.
//!
//! Floats, strings and binaries stay with the caller's fallback arm: their semantics
//! (NaN order, bytes) differ per use.

use arrow::datatypes::{DataType, TimeUnit};

/// Evaluates `$body` with type alias `$A` bound to the Arrow primitive type
/// (`arrow::datatypes::Int8Type`, ...) of an integer column type `$dt`
/// (`Int8..Int64`, `UInt8..UInt64`); evaluates `$other` for any other type. `$dt` is
/// evaluated once.
///
/// ```
/// use tessera_common::arrow::array::{ArrayRef, AsArray, Int16Array};
/// use tessera_common::arrow::datatypes::ArrowPrimitiveType;
/// let a: ArrayRef = std::sync::Arc::new(Int16Array::from(vec![3, -4]));
/// let sum = tessera_common::integer_dispatch!(a.data_type(), A => {
///     a.as_primitive::<A>().values().iter().map(|&v| v as i64).sum::<i64>()
/// }, _ => 0);
/// assert_eq!(sum, -1);
/// ```
#[macro_export]
macro_rules! integer_dispatch {
    ($dt:expr, $A:ident => $body:expr, _ => $other:expr) => {
        match $dt {
            $crate::arrow::datatypes::DataType::Int8 => { type $A = $crate::arrow::datatypes::Int8Type; $body }
            $crate::arrow::datatypes::DataType::Int16 => { type $A = $crate::arrow::datatypes::Int16Type; $body }
            $crate::arrow::datatypes::DataType::Int32 => { type $A = $crate::arrow::datatypes::Int32Type; $body }
            $crate::arrow::datatypes::DataType::Int64 => { type $A = $crate::arrow::datatypes::Int64Type; $body }
            $crate::arrow::datatypes::DataType::UInt8 => { type $A = $crate::arrow::datatypes::UInt8Type; $body }
            $crate::arrow::datatypes::DataType::UInt16 => { type $A = $crate::arrow::datatypes::UInt16Type; $body }
            $crate::arrow::datatypes::DataType::UInt32 => { type $A = $crate::arrow::datatypes::UInt32Type; $body }
            $crate::arrow::datatypes::DataType::UInt64 => { type $A = $crate::arrow::datatypes::UInt64Type; $body }
            _ => $other,
        }
    };
}

/// [`integer_dispatch!`] over the integer-like types: the integers, `Date32`
/// (`Date32Type`, days as `i32`) and `Timestamp(Second, _)` (`TimestampSecondType`,
/// seconds as `i64`; Tessera's tables hold no time zone, see [`crate::is_supported_type`]).
#[macro_export]
macro_rules! int_like_dispatch {
    ($dt:expr, $A:ident => $body:expr, _ => $other:expr) => {
        match $dt {
            $crate::arrow::datatypes::DataType::Date32 => { type $A = $crate::arrow::datatypes::Date32Type; $body }
            $crate::arrow::datatypes::DataType::Timestamp($crate::arrow::datatypes::TimeUnit::Second, _) => {
                type $A = $crate::arrow::datatypes::TimestampSecondType;
                $body
            }
            dt => $crate::integer_dispatch!(dt, $A => $body, _ => $other),
        }
    };
}

/// Whether `dt` is one of [`int_like_dispatch!`]'s types.
pub fn is_int_like(dt: &DataType) -> bool {
    dt.is_integer() || matches!(dt, DataType::Date32 | DataType::Timestamp(TimeUnit::Second, _))
}

#[cfg(test)]
mod tests {
    use arrow::datatypes::{ArrowPrimitiveType, DataType, TimeUnit};

    use super::is_int_like;

    /// Bytes per value of the type the macro picks, or 0 when it takes the fallback.
    fn width(dt: &DataType) -> usize {
        crate::int_like_dispatch!(dt, A => std::mem::size_of::<<A as ArrowPrimitiveType>::Native>(), _ => 0)
    }

    #[test]
    fn dispatch_picks_the_native_type_of_every_int_like_type() {
        use DataType::*;
        let cases = [
            (Int8, 1),
            (Int16, 2),
            (Int32, 4),
            (Int64, 8),
            (UInt8, 1),
            (UInt16, 2),
            (UInt32, 4),
            (UInt64, 8),
            (Date32, 4),
            (Timestamp(TimeUnit::Second, None), 8),
            (Float32, 0),
            (Float64, 0),
            (Utf8, 0),
            (Binary, 0),
            (Timestamp(TimeUnit::Millisecond, None), 0),
        ];
        for (dt, w) in cases {
            assert_eq!(width(&dt), w, "{dt}");
            assert_eq!(is_int_like(&dt), w > 0, "{dt}");
        }
        let ints = |dt: &DataType| crate::integer_dispatch!(dt, A => A::DATA_TYPE == *dt, _ => false);
        assert!(ints(&Int64) && ints(&UInt8));
        assert!(!ints(&Date32) && !ints(&Timestamp(TimeUnit::Second, None)) && !ints(&Float64));
    }
}
