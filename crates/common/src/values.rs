//! The values of one column being built row by row, in native width: one vector per
//! column type Tessera stores ([`crate::is_supported_type`]). The row readers (the TSV
//! loader, RowBinary, TabSeparated, CSV, JSONEachRow) parse into it and turn it into an
//! Arrow array per batch; adding a storable type adds a variant here and a parse arm in each
//! reader, nothing else.

use std::sync::Arc;

use arrow::array::{ArrayRef, BinaryArray, PrimitiveArray, StringArray};
use arrow::buffer::{Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Date32Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type,
    TimeUnit, TimestampSecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};

/// A column's values so far. Rows under a NULL hold a placeholder ([`Values::push_default`]);
/// validity is the caller's.
#[derive(Debug)]
pub enum Values {
    /// `Int8`.
    I8(Vec<i8>),
    /// `Int16`.
    I16(Vec<i16>),
    /// `Int32`.
    I32(Vec<i32>),
    /// `Int64`.
    I64(Vec<i64>),
    /// `UInt8`.
    U8(Vec<u8>),
    /// `UInt16`.
    U16(Vec<u16>),
    /// `UInt32`.
    U32(Vec<u32>),
    /// `UInt64`.
    U64(Vec<u64>),
    /// `Float32`.
    F32(Vec<f32>),
    /// `Float64`.
    F64(Vec<f64>),
    /// `Date32`: days since 1970-01-01.
    Date(Vec<i32>),
    /// `Timestamp(Second)`: seconds since 1970-01-01 00:00:00 UTC.
    Time(Vec<i64>),
    /// `Utf8` (`utf8`) or `Binary`: value `i` is `data[offsets[i]..offsets[i + 1]]`;
    /// `offsets` starts with 0 and never decreases.
    Bytes {
        /// One more than the values.
        offsets: Vec<i32>,
        /// The values' bytes, back to back.
        data: Vec<u8>,
        /// The column is `Utf8` (its bytes are checked when the array is made).
        utf8: bool,
    },
}

impl Values {
    /// Empty values of column type `dt` with room for `capacity` rows; `None` for a type
    /// Tessera does not store.
    pub fn new(dt: &DataType, capacity: usize) -> Option<Values> {
        fn v<T>(capacity: usize) -> Vec<T> {
            Vec::with_capacity(capacity)
        }
        Some(match dt {
            DataType::Int8 => Values::I8(v(capacity)),
            DataType::Int16 => Values::I16(v(capacity)),
            DataType::Int32 => Values::I32(v(capacity)),
            DataType::Int64 => Values::I64(v(capacity)),
            DataType::UInt8 => Values::U8(v(capacity)),
            DataType::UInt16 => Values::U16(v(capacity)),
            DataType::UInt32 => Values::U32(v(capacity)),
            DataType::UInt64 => Values::U64(v(capacity)),
            DataType::Float32 => Values::F32(v(capacity)),
            DataType::Float64 => Values::F64(v(capacity)),
            DataType::Date32 => Values::Date(v(capacity)),
            DataType::Timestamp(TimeUnit::Second, None) => Values::Time(v(capacity)),
            DataType::Utf8 | DataType::Binary => {
                let mut offsets = Vec::with_capacity(capacity + 1);
                offsets.push(0);
                Values::Bytes { offsets, data: Vec::new(), utf8: dt == &DataType::Utf8 }
            }
            _ => return None,
        })
    }

    /// Appends the placeholder stored under a NULL: zero, or an empty string.
    pub fn push_default(&mut self) {
        match self {
            Values::I8(v) => v.push(0),
            Values::I16(v) => v.push(0),
            Values::I32(v) | Values::Date(v) => v.push(0),
            Values::I64(v) | Values::Time(v) => v.push(0),
            Values::U8(v) => v.push(0),
            Values::U16(v) => v.push(0),
            Values::U32(v) => v.push(0),
            Values::U64(v) => v.push(0),
            Values::F32(v) => v.push(0.0),
            Values::F64(v) => v.push(0.0),
            // `data` fits i32 offsets: `push_bytes` refuses a value that would pass them.
            Values::Bytes { offsets, data, .. } => offsets.push(data.len() as i32),
        }
    }

    /// Appends the string value `b` to a `Utf8` or `Binary` column (its UTF-8 is checked by
    /// [`Values::take_array`]).
    ///
    /// # Errors
    /// A message, nothing appended, when this is not a string column or when the column's
    /// bytes would pass the 2 GiB an Arrow array's i32 offsets address (readers close their
    /// batches long before; a single value of more than 1 GiB can still get here).
    pub fn push_bytes(&mut self, b: &[u8]) -> Result<(), String> {
        let Values::Bytes { offsets, data, .. } = self else { return Err("a string value for a column of numbers".into()) };
        let end = i32::try_from(data.len() + b.len())
            .map_err(|_| format!("more than 2 GiB of string data in one batch (a value of {} bytes)", b.len()))?;
        data.extend_from_slice(b);
        offsets.push(end);
        Ok(())
    }

    /// Whether the column holds strings (`Utf8` or `Binary`).
    pub fn is_bytes(&self) -> bool {
        matches!(self, Values::Bytes { .. })
    }

    /// Bytes of string data so far (0 for other types): readers close a batch before this
    /// nears the 2 GiB an Arrow `Utf8`/`Binary` array (i32 offsets) can hold.
    pub fn string_bytes(&self) -> usize {
        match self {
            Values::Bytes { data, .. } => data.len(),
            _ => 0,
        }
    }

    /// The values so far as an Arrow array with validity `nulls` (one bit per row); the
    /// values are left empty, ready for the next batch.
    ///
    /// # Errors
    /// For a `Utf8` column whose bytes are not valid UTF-8: the same values as a
    /// `BinaryArray` and the row (from 0) of the first invalid value, for the caller to
    /// store as `Binary` or to report.
    pub fn take_array(&mut self, nulls: Option<NullBuffer>) -> Result<ArrayRef, (BinaryArray, usize)> {
        fn prim<T: ArrowPrimitiveType>(v: &mut Vec<T::Native>, nulls: Option<NullBuffer>) -> ArrayRef {
            Arc::new(PrimitiveArray::<T>::new(ScalarBuffer::from(std::mem::take(v)), nulls))
        }
        Ok(match self {
            Values::I8(v) => prim::<Int8Type>(v, nulls),
            Values::I16(v) => prim::<Int16Type>(v, nulls),
            Values::I32(v) => prim::<Int32Type>(v, nulls),
            Values::I64(v) => prim::<Int64Type>(v, nulls),
            Values::U8(v) => prim::<UInt8Type>(v, nulls),
            Values::U16(v) => prim::<UInt16Type>(v, nulls),
            Values::U32(v) => prim::<UInt32Type>(v, nulls),
            Values::U64(v) => prim::<UInt64Type>(v, nulls),
            Values::F32(v) => prim::<Float32Type>(v, nulls),
            Values::F64(v) => prim::<Float64Type>(v, nulls),
            Values::Date(v) => prim::<Date32Type>(v, nulls),
            Values::Time(v) => prim::<TimestampSecondType>(v, nulls),
            Values::Bytes { offsets, data, utf8 } => {
                let offs = OffsetBuffer::new(ScalarBuffer::from(std::mem::replace(offsets, vec![0])));
                let data = Buffer::from_vec(std::mem::take(data));
                if !*utf8 {
                    return Ok(Arc::new(BinaryArray::new(offs, data, nulls)));
                }
                // `try_new` checks the bytes once (valid UTF-8, offsets on char boundaries).
                match StringArray::try_new(offs.clone(), data.clone(), nulls.clone()) {
                    Ok(s) => Arc::new(s),
                    Err(_) => {
                        let row = offs
                            .windows(2)
                            .position(|w| std::str::from_utf8(&data[w[0] as usize..w[1] as usize]).is_err())
                            .unwrap_or(0);
                        return Err((BinaryArray::new(offs, data, nulls), row));
                    }
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{Array, AsArray};
    use arrow::buffer::NullBuffer;
    use arrow::datatypes::{DataType, Int16Type, TimeUnit};

    use super::Values;

    fn push_str(v: &mut Values, b: &[u8]) {
        v.push_bytes(b).expect("a string column");
    }

    #[test]
    fn every_stored_type_has_values_and_others_none() {
        for dt in [
            DataType::Int8,
            DataType::UInt64,
            DataType::Float32,
            DataType::Date32,
            DataType::Timestamp(TimeUnit::Second, None),
            DataType::Utf8,
            DataType::Binary,
        ] {
            let mut v = Values::new(&dt, 4).expect("stored type");
            v.push_default();
            let a = v.take_array(None).expect("valid");
            assert_eq!((a.data_type(), a.len()), (&dt, 1), "{dt}");
            assert_eq!(v.take_array(None).expect("valid").len(), 0, "{dt}: left empty");
        }
        assert!(Values::new(&DataType::LargeUtf8, 1).is_none());
        assert!(Values::new(&DataType::Timestamp(TimeUnit::Millisecond, None), 1).is_none());
    }

    #[test]
    fn arrays_keep_values_and_nulls_and_name_the_bad_utf8_row() {
        let mut v = Values::new(&DataType::Int16, 3).unwrap();
        if let Values::I16(x) = &mut v {
            x.extend([7, 0, -3]);
        }
        let a = v.take_array(Some(NullBuffer::from(vec![true, false, true]))).unwrap();
        let a = a.as_primitive::<Int16Type>();
        assert_eq!((a.value(0), a.is_null(1), a.value(2)), (7, true, -3));

        let mut s = Values::new(&DataType::Utf8, 3).unwrap();
        for b in [&b"ab"[..], "é".as_bytes(), b""] {
            push_str(&mut s, b);
        }
        let a = s.take_array(None).unwrap();
        assert_eq!(a.as_string::<i32>().iter().collect::<Vec<_>>(), vec![Some("ab"), Some("é"), Some("")]);

        push_str(&mut s, b"ok");
        push_str(&mut s, b"x\xff");
        let (binary, row) = s.take_array(None).unwrap_err();
        assert_eq!((row, binary.value(1)), (1, &b"x\xff"[..]));

        // Valid as a whole, but a value ends inside a character.
        let e = "é".as_bytes();
        push_str(&mut s, &e[..1]);
        push_str(&mut s, &e[1..]);
        assert_eq!(s.take_array(None).unwrap_err().1, 0);

        assert!(Values::new(&DataType::Int8, 1).unwrap().push_bytes(b"x").is_err());

        let mut b = Values::new(&DataType::Binary, 1).unwrap();
        push_str(&mut b, b"\xff");
        assert_eq!(b.take_array(None).unwrap().as_binary::<i32>().value(0), b"\xff");
    }
}
