//! Fitting the batches a reader decoded to a target schema (an existing table's), or to
//! the types Tessera executes when there is none.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, RecordBatchOptions, new_null_array};
use arrow::compute::{CastOptions, cast_with_options};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use tessera_common::{Error, Result};

use crate::corrupt;

/// The schema Tessera stores for an input schema: LargeUtf8/Utf8View to Utf8,
/// LargeBinary/BinaryView/FixedSizeBinary to Binary, timestamps of any unit and zone to
/// Timestamp(Second) (UTC), Date64 to Date32, Boolean to UInt8, Float16 to Float32,
/// dictionaries to their values; the supported types as they are. Nullability is kept.
///
/// # Errors
/// [`Error::NotImplemented`] naming the first column of another type (lists, structs,
/// decimals).
pub fn normalize_schema(schema: &Schema) -> Result<SchemaRef> {
    let fields = schema
        .fields()
        .iter()
        .map(|f| {
            let dt = normalize(f.data_type()).ok_or_else(|| {
                Error::NotImplemented(format!("column {} of type {}: Tessera does not store this type", f.name(), f.data_type()))
            })?;
            Ok(Field::new(f.name(), dt, f.is_nullable()))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Arc::new(Schema::new(fields)))
}

fn normalize(dt: &DataType) -> Option<DataType> {
    use DataType::*;
    Some(match dt {
        Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64 | Float32 | Float64 | Utf8 | Binary | Date32 => dt.clone(),
        LargeUtf8 | Utf8View => Utf8,
        LargeBinary | BinaryView | FixedSizeBinary(_) => Binary,
        Timestamp(_, _) => Timestamp(TimeUnit::Second, None),
        Date64 => Date32,
        Boolean => UInt8,
        Float16 => Float32,
        Dictionary(_, v) => return normalize(v),
        _ => return None,
    })
}

/// `batch` with the columns of `target`, in its order and types: each target column is
/// the input column of the same name (exact, else ASCII case-insensitive), converted
/// (strings checked to be UTF-8 for Utf8 columns, timestamps floored to seconds).
///
/// # Errors
/// [`Error::InvalidArgument`] naming the target columns the input lacks (unless nullable:
/// those become NULL) and input columns the target lacks; [`Error::Corrupt`] naming row
/// and column for a value that does not convert (bytes that are not UTF-8, NULL in a
/// non-nullable column, out of range).
pub fn conform(batch: &RecordBatch, target: &SchemaRef, source: &Path) -> Result<RecordBatch> {
    let have = batch.schema();
    if have.fields() == target.fields() {
        return Ok(batch.clone());
    }
    let find = |n: &str| {
        have.fields()
            .iter()
            .position(|f| f.name() == n)
            .or_else(|| have.fields().iter().position(|f| f.name().eq_ignore_ascii_case(n)))
    };
    let extra: Vec<&str> = have
        .fields()
        .iter()
        .filter(|h| !target.fields().iter().any(|f| f.name().eq_ignore_ascii_case(h.name())))
        .map(|f| f.name().as_str())
        .collect();
    if !extra.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "{}: the input has column(s) {} that the table does not",
            source.display(),
            extra.join(", ")
        )));
    }
    let mut cols = Vec::with_capacity(target.fields().len());
    for (c, f) in target.fields().iter().enumerate() {
        let label = format!("column {} ({})", c + 1, f.name());
        let col = match find(f.name()) {
            Some(i) => convert(batch.column(i), f.data_type()).map_err(|m| corrupt(source, format!("{label}: {m}")))?,
            None if f.is_nullable() => new_null_array(f.data_type(), batch.num_rows()),
            None => {
                return Err(Error::InvalidArgument(format!(
                    "{}: the input lacks {label}, which is not nullable",
                    source.display()
                )));
            }
        };
        if !f.is_nullable() && col.null_count() > 0 {
            let row = (0..col.len()).find(|&r| col.is_null(r)).unwrap_or(0);
            return Err(corrupt(source, format!("row {} of the batch, {label}: NULL in a non-nullable column", row + 1)));
        }
        cols.push(col);
    }
    Ok(RecordBatch::try_new_with_options(
        target.clone(),
        cols,
        &RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )?)
}

/// `b` as a Utf8 array when every value is valid UTF-8 (no copy), else `None`.
pub(crate) fn utf8(b: &arrow::array::BinaryArray) -> Option<arrow::array::StringArray> {
    tessera_common::bytes::binary_to_utf8(b).ok()
}

/// `col` as type `to`; the message says what did not convert (with the row for strings).
fn convert(col: &ArrayRef, to: &DataType) -> std::result::Result<ArrayRef, String> {
    let from = col.data_type();
    if from == to {
        return Ok(col.clone());
    }
    let opts = CastOptions { safe: false, ..Default::default() };
    let cast = |a: &ArrayRef, t: &DataType| cast_with_options(a, t, &opts).map_err(|e| e.to_string());
    if to == &DataType::Utf8 && from == &DataType::Binary {
        if let Some(s) = utf8(col.as_binary::<i32>()) {
            return Ok(Arc::new(s));
        }
    }
    if to == &DataType::Utf8 && matches!(from, DataType::Binary | DataType::LargeBinary | DataType::BinaryView) {
        if let Err(e) = cast(col, to) {
            let bin = cast(col, &DataType::Binary)?;
            let b = bin.as_binary::<i32>();
            let row = (0..b.len()).find(|&i| b.is_valid(i) && std::str::from_utf8(b.value(i)).is_err());
            return Err(match row {
                Some(r) => format!("row {} of the batch holds bytes that are not valid UTF-8 (the column is Utf8)", r + 1),
                None => e,
            });
        }
    }
    match (from, to) {
        (f, DataType::Timestamp(TimeUnit::Second, None)) if f.is_integer() => {
            cast(&cast(col, &DataType::Int64)?, to)
        }
        (f, DataType::Date32) if f.is_integer() => cast(&cast(col, &DataType::Int32)?, to),
        (DataType::Timestamp(unit, _), DataType::Timestamp(TimeUnit::Second, None)) => {
            // Floor to seconds (arrow's cast truncates toward zero).
            let per = match unit {
                TimeUnit::Second => 1,
                TimeUnit::Millisecond => 1_000,
                TimeUnit::Microsecond => 1_000_000,
                TimeUnit::Nanosecond => 1_000_000_000,
            };
            let raw = cast(col, &DataType::Int64)?;
            let floored: arrow::array::Int64Array =
                raw.as_primitive::<arrow::datatypes::Int64Type>().unary(|v: i64| v.div_euclid(per));
            cast(&(Arc::new(floored) as ArrayRef), to)
        }
        (DataType::Dictionary(_, _), _) => {
            let v = cast(col, &normalize(from).unwrap_or(to.clone()))?;
            convert(&v, to)
        }
        _ => cast(col, to),
    }
}
