//! Type mapping from the Arrow types the Parquet reader produces to the types Tessera
//! executes on: [`table_type`] decides at open time, [`convert`] applies it to each chunk.

use arrow::array::{Array, ArrayRef, AsArray, PrimitiveArray};
use arrow::compute::{CastOptions, cast_with_options};
use arrow::datatypes::{
    DataType, Date32Type, Date64Type, Int64Type, TimeUnit, TimestampSecondType,
};
use arrow::error::ArrowError;
use std::sync::Arc;

/// Milliseconds per day, for Date64 (ms since epoch) -> Date32 (days since epoch).
const MS_PER_DAY: i64 = 86_400_000;

/// The Tessera type a file column of Arrow type `file` is read as, without a target type.
///
/// `None` if Tessera has no mapping (nested types, Boolean, Decimal, Time, Interval...).
pub(super) fn native_type(file: &DataType) -> Option<DataType> {
    use DataType::*;
    Some(match file {
        Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64 | Float32 | Float64
        | Date32 | Utf8 | Binary => file.clone(),
        LargeUtf8 | Utf8View => Utf8,
        LargeBinary | BinaryView | FixedSizeBinary(_) => Binary,
        Timestamp(_, _) => Timestamp(TimeUnit::Second, None),
        Date64 => Date32,
        Dictionary(_, value) => native_type(value)?,
        _ => return None,
    })
}

/// The Tessera type of a column whose native type (see [`native_type`]) is `native` and
/// whose target type is `target`; `None` if no lossless (or range-checked) conversion exists.
///
/// Binary stays Binary when the target says Utf8: the bytes may not be UTF-8, and Tessera
/// treats Binary as a string type.
pub(super) fn target_type(native: &DataType, target: &DataType) -> Option<DataType> {
    use DataType::*;
    if native == target {
        return Some(target.clone());
    }
    let ok = match (native, target) {
        (n, t) if n.is_integer() && t.is_integer() => true,
        (n, Float32 | Float64) if n.is_integer() => true,
        (Float32, Float64) => true,
        (n, Timestamp(TimeUnit::Second, None)) if n.is_integer() => true,
        (n, Date32) if n.is_integer() => true,
        (Binary, Utf8) => return Some(Binary),
        (Utf8, Binary) => true,
        _ => false,
    };
    ok.then(|| target.clone())
}

/// Converts one chunk to `to`, a type returned by [`native_type`] or [`target_type`] for
/// the chunk's type. Integer narrowing is checked; timestamps are floored to seconds and
/// Date64 to days (so `-1 ms` is `-1 s`, day `-1`); nulls stay null.
///
/// # Errors
/// A message naming the value problem (overflow) or an unsupported pair (a bug in the
/// caller's mapping); the caller adds file, column and row group.
pub(super) fn convert(array: &ArrayRef, to: &DataType) -> Result<ArrayRef, String> {
    use DataType::*;
    let from = array.data_type();
    if from == to {
        return Ok(Arc::clone(array));
    }
    let converted = match (from, to) {
        (Dictionary(_, value), _) => {
            let plain = cast_checked(array, value)?;
            return convert(&plain, to);
        }
        (Timestamp(unit, _), Timestamp(TimeUnit::Second, None)) => {
            let per_second: i64 = match unit {
                TimeUnit::Second => 1,
                TimeUnit::Millisecond => 1_000,
                TimeUnit::Microsecond => 1_000_000,
                TimeUnit::Nanosecond => 1_000_000_000,
            };
            let ticks = cast_checked(array, &Int64)?;
            let secs: PrimitiveArray<TimestampSecondType> = ticks
                .as_primitive::<Int64Type>()
                .unary(|t| t.div_euclid(per_second));
            Arc::new(secs) as ArrayRef
        }
        (Date64, Date32) => {
            let days: PrimitiveArray<Date32Type> = array
                .as_primitive::<Date64Type>()
                .try_unary(|ms| {
                    i32::try_from(ms.div_euclid(MS_PER_DAY)).map_err(|_| {
                        ArrowError::ComputeError(format!(
                            "Date64 value {ms} ms is out of Date32 range"
                        ))
                    })
                })
                .map_err(|e| e.to_string())?;
            Arc::new(days) as ArrayRef
        }
        (f, Date32) if f.is_integer() => cast_checked(&cast_checked(array, &Int32)?, to)?,
        (f, Timestamp(TimeUnit::Second, None)) if f.is_integer() => {
            cast_checked(&cast_checked(array, &Int64)?, to)?
        }
        _ => cast_checked(array, to)?,
    };
    if converted.data_type() != to {
        return Err(format!(
            "conversion produced {}, expected {to}",
            converted.data_type()
        ));
    }
    Ok(converted)
}

/// Arrow `cast` that fails instead of producing NULL on overflow (`safe: false`).
fn cast_checked(array: &ArrayRef, to: &DataType) -> Result<ArrayRef, String> {
    let options = CastOptions {
        safe: false,
        ..Default::default()
    };
    cast_with_options(array, to, &options)
        .map_err(|e| format!("cannot convert {} to {to}: {e}", array.data_type()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{
        Date64Array, DictionaryArray, Int32Array, LargeStringArray, TimestampMillisecondArray,
        UInt16Array, UInt64Array,
    };
    use arrow::datatypes::Int8Type;

    #[test]
    fn every_native_type_is_supported_and_converts() {
        let samples: Vec<ArrayRef> = vec![
            Arc::new(LargeStringArray::from(vec!["a", "b"])),
            Arc::new(Date64Array::from(vec![-1, 86_400_000])),
            Arc::new(TimestampMillisecondArray::from(vec![-1, 1_500]).with_timezone("+01:00")),
            Arc::new(DictionaryArray::<Int8Type>::from_iter(["x", "y", "x"])),
        ];
        for a in samples {
            let to = native_type(a.data_type()).unwrap();
            assert!(tessera_common::is_supported_type(&to), "{to}");
            let out = convert(&a, &to).unwrap();
            assert_eq!(out.data_type(), &to);
            assert_eq!(out.len(), a.len());
        }
    }

    #[test]
    fn floors_negative_times() {
        let ts: ArrayRef = Arc::new(TimestampMillisecondArray::from(vec![-1, -1000, -1001, 999]));
        let out = convert(&ts, &DataType::Timestamp(TimeUnit::Second, None)).unwrap();
        let out = out.as_primitive::<TimestampSecondType>();
        assert_eq!(out.values().as_ref(), &[-1, -1, -2, 0]);
        let d: ArrayRef = Arc::new(Date64Array::from(vec![-1, 0, MS_PER_DAY]));
        let out = convert(&d, &DataType::Date32).unwrap();
        assert_eq!(
            out.as_primitive::<Date32Type>().values().as_ref(),
            &[-1, 0, 1]
        );
    }

    #[test]
    fn checked_integer_targets() {
        let big: ArrayRef = Arc::new(UInt64Array::from(vec![1, u64::MAX]));
        assert!(convert(&big, &DataType::Int64).is_err());
        let days: ArrayRef = Arc::new(UInt16Array::from(vec![Some(15_900), None]));
        let out = convert(&days, &DataType::Date32).unwrap();
        assert_eq!(out.null_count(), 1);
        assert_eq!(out.as_primitive::<Date32Type>().value(0), 15_900);
        let neg: ArrayRef = Arc::new(Int32Array::from(vec![-5]));
        assert!(convert(&neg, &DataType::UInt8).is_err());
        assert_eq!(
            target_type(&DataType::Binary, &DataType::Utf8),
            Some(DataType::Binary)
        );
        assert_eq!(target_type(&DataType::Utf8, &DataType::Int32), None);
    }
}
