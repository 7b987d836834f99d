//! ClickHouse type names to and from the Arrow types Tessera stores.

use arrow::datatypes::{DataType, Field, TimeUnit};
use tessera_common::{Error, Result};

/// How a ClickHouse column is laid out on the wire (Native and RowBinary), with the Arrow
/// type Tessera stores it as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChType {
    /// The wire layout of one non-NULL value.
    pub(crate) wire: Wire,
    /// `Nullable(..)`.
    pub(crate) nullable: bool,
}

/// The fixed-width Arrow types ClickHouse stores the same way (little-endian).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Prim {
    Int8,
    Int16,
    Int32,
    Int64,
    UInt8,
    UInt16,
    UInt32,
    UInt64,
    Float32,
    Float64,
    Date32,
}

impl Prim {
    pub(crate) fn of(dt: &DataType) -> Option<Prim> {
        Some(match dt {
            DataType::Int8 => Prim::Int8,
            DataType::Int16 => Prim::Int16,
            DataType::Int32 => Prim::Int32,
            DataType::Int64 => Prim::Int64,
            DataType::UInt8 => Prim::UInt8,
            DataType::UInt16 => Prim::UInt16,
            DataType::UInt32 => Prim::UInt32,
            DataType::UInt64 => Prim::UInt64,
            DataType::Float32 => Prim::Float32,
            DataType::Float64 => Prim::Float64,
            DataType::Date32 => Prim::Date32,
            _ => return None,
        })
    }

    pub(crate) fn dt(self) -> DataType {
        match self {
            Prim::Int8 => DataType::Int8,
            Prim::Int16 => DataType::Int16,
            Prim::Int32 => DataType::Int32,
            Prim::Int64 => DataType::Int64,
            Prim::UInt8 => DataType::UInt8,
            Prim::UInt16 => DataType::UInt16,
            Prim::UInt32 => DataType::UInt32,
            Prim::UInt64 => DataType::UInt64,
            Prim::Float32 => DataType::Float32,
            Prim::Float64 => DataType::Float64,
            Prim::Date32 => DataType::Date32,
        }
    }

    pub(crate) fn width(self) -> usize {
        match self {
            Prim::Int8 | Prim::UInt8 => 1,
            Prim::Int16 | Prim::UInt16 => 2,
            Prim::Int32 | Prim::UInt32 | Prim::Float32 | Prim::Date32 => 4,
            Prim::Int64 | Prim::UInt64 | Prim::Float64 => 8,
        }
    }
}

/// The wire layout of one ClickHouse value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wire {
    /// Little-endian fixed-width value stored as the Arrow type (`Int8`..`UInt64`,
    /// `Float32/64`, `Date32`).
    Fixed(Prim),
    /// `Bool`: one byte, read as UInt8.
    Bool,
    /// `Date`: UInt16 days since 1970-01-01, read as Date32.
    Date,
    /// `DateTime`: UInt32 seconds, read as Timestamp(Second).
    DateTime,
    /// `DateTime64(P)`: Int64 in units of 10^-P s, read as Timestamp(Second) (floored).
    DateTime64(u32),
    /// `String`: VarUInt length, then bytes.
    String,
    /// `FixedString(N)`: N bytes, read as Binary.
    FixedString(usize),
    /// `Nothing` (only as `Nullable(Nothing)`, the type of `NULL`): every value is NULL;
    /// Native writes one placeholder byte `'0'` per row, as ClickHouse does. Written, never
    /// read (no column of Tessera's tables has this type).
    Nothing,
}

impl Wire {
    /// Bytes per value for fixed-width layouts, `None` for `String`.
    pub(crate) fn width(self) -> Option<usize> {
        Some(match self {
            Wire::Fixed(p) => p.width(),
            Wire::Bool => 1,
            Wire::Date => 2,
            Wire::DateTime => 4,
            Wire::DateTime64(_) => 8,
            Wire::String => return None,
            Wire::FixedString(n) => n,
            Wire::Nothing => 1,
        })
    }

    /// The Arrow type Tessera stores values of this layout as.
    pub(crate) fn arrow_type(self) -> DataType {
        match self {
            Wire::Fixed(p) => p.dt(),
            Wire::Bool => DataType::UInt8,
            Wire::Date => DataType::Date32,
            Wire::DateTime | Wire::DateTime64(_) => DataType::Timestamp(TimeUnit::Second, None),
            Wire::String => DataType::Utf8,
            Wire::FixedString(_) => DataType::Binary,
            Wire::Nothing => DataType::Null,
        }
    }
}

/// The ClickHouse type name Tessera writes for `field` (see the crate docs):
/// `Int8`..`UInt64`, `Float32`, `Float64`, `String` (Utf8 and Binary), `Date32`,
/// `DateTime('UTC')`, each inside `Nullable(..)` when the field is nullable.
///
/// # Errors
/// [`Error::NotImplemented`] for an Arrow type Tessera does not store.
pub fn clickhouse_type(field: &Field) -> Result<String> {
    let base = match field.data_type() {
        DataType::Int8 => "Int8",
        DataType::Int16 => "Int16",
        DataType::Int32 => "Int32",
        DataType::Int64 => "Int64",
        DataType::UInt8 => "UInt8",
        DataType::UInt16 => "UInt16",
        DataType::UInt32 => "UInt32",
        DataType::UInt64 => "UInt64",
        DataType::Float32 => "Float32",
        DataType::Float64 => "Float64",
        DataType::Utf8 | DataType::Binary => "String",
        DataType::Date32 => "Date32",
        DataType::Timestamp(TimeUnit::Second, None) => "DateTime('UTC')",
        // The type of NULL: every value is NULL, so the column is Nullable whatever its field says.
        DataType::Null => return Ok("Nullable(Nothing)".to_string()),
        other => {
            return Err(Error::NotImplemented(format!(
                "column {} of type {other}: no ClickHouse type for it in Tessera's formats",
                field.name()
            )));
        }
    };
    Ok(if field.is_nullable() { format!("Nullable({base})") } else { base.to_string() })
}

/// Parses a ClickHouse type name (as Native and `RowBinaryWithNamesAndTypes` carry it)
/// into its wire layout. `column` names the column in errors.
///
/// # Errors
/// [`Error::NotImplemented`] for types Tessera does not store (`Array`, `LowCardinality`,
/// `Decimal`, ...); the caller turns it into a message naming the column.
pub fn parse_clickhouse_type(name: &str) -> Result<(DataType, bool)> {
    let t = parse(name)?;
    Ok((t.wire.arrow_type(), t.nullable))
}

pub(crate) fn parse(name: &str) -> Result<ChType> {
    let name = name.trim();
    if let Some(inner) = strip_call(name, "Nullable") {
        let t = parse(inner)?;
        if t.nullable {
            return Err(Error::NotImplemented(format!("type {name}")));
        }
        return Ok(ChType { wire: t.wire, nullable: true });
    }
    let wire = match name {
        "Int8" => Wire::Fixed(Prim::Int8),
        "Int16" => Wire::Fixed(Prim::Int16),
        "Int32" => Wire::Fixed(Prim::Int32),
        "Int64" => Wire::Fixed(Prim::Int64),
        "UInt8" => Wire::Fixed(Prim::UInt8),
        "UInt16" => Wire::Fixed(Prim::UInt16),
        "UInt32" => Wire::Fixed(Prim::UInt32),
        "UInt64" => Wire::Fixed(Prim::UInt64),
        "Float32" => Wire::Fixed(Prim::Float32),
        "Float64" => Wire::Fixed(Prim::Float64),
        "Date32" => Wire::Fixed(Prim::Date32),
        "Bool" => Wire::Bool,
        "Date" => Wire::Date,
        "String" => Wire::String,
        "DateTime" => Wire::DateTime,
        _ => {
            if strip_call(name, "DateTime").is_some() {
                Wire::DateTime
            } else if let Some(args) = strip_call(name, "DateTime64") {
                let p = args.split(',').next().unwrap_or("").trim();
                match p.parse::<u32>() {
                    Ok(p) if p <= 9 => Wire::DateTime64(p),
                    _ => return Err(Error::NotImplemented(format!("type {name}"))),
                }
            } else if let Some(n) = strip_call(name, "FixedString") {
                match n.trim().parse::<usize>() {
                    Ok(n) if n > 0 && n <= 1 << 20 => Wire::FixedString(n),
                    _ => return Err(Error::NotImplemented(format!("type {name}"))),
                }
            } else {
                return Err(Error::NotImplemented(format!("ClickHouse type {name}")));
            }
        }
    };
    Ok(ChType { wire, nullable: false })
}

/// The layout Tessera writes for an Arrow type (the inverse of [`parse`] on the names
/// [`clickhouse_type`] gives).
pub(crate) fn wire_of(dt: &DataType) -> Option<Wire> {
    if let Some(p) = Prim::of(dt) {
        return Some(Wire::Fixed(p));
    }
    Some(match dt {
        DataType::Utf8 | DataType::Binary => Wire::String,
        DataType::Timestamp(TimeUnit::Second, None) => Wire::DateTime,
        DataType::Null => Wire::Nothing,
        _ => return None,
    })
}

/// `inner` of `Name(inner)`.
fn strip_call<'a>(s: &'a str, func: &str) -> Option<&'a str> {
    s.strip_prefix(func)?.trim_start().strip_prefix('(')?.strip_suffix(')')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for dt in [
            DataType::Int8,
            DataType::UInt64,
            DataType::Float32,
            DataType::Utf8,
            DataType::Date32,
            DataType::Timestamp(TimeUnit::Second, None),
        ] {
            for nullable in [false, true] {
                let name = clickhouse_type(&Field::new("c", dt.clone(), nullable)).unwrap();
                assert_eq!(parse_clickhouse_type(&name).unwrap(), (dt.clone(), nullable), "{name}");
            }
        }
        assert_eq!(clickhouse_type(&Field::new("c", DataType::Binary, true)).unwrap(), "Nullable(String)");
        assert_eq!(parse_clickhouse_type("DateTime64(3, 'UTC')").unwrap().0, DataType::Timestamp(TimeUnit::Second, None));
        assert_eq!(parse_clickhouse_type("FixedString(4)").unwrap().0, DataType::Binary);
        assert!(matches!(parse_clickhouse_type("Array(UInt8)"), Err(Error::NotImplemented(_))));
        assert!(matches!(parse_clickhouse_type("LowCardinality(String)"), Err(Error::NotImplemented(_))));
        assert!(matches!(parse_clickhouse_type("Nullable(Nullable(Int8))"), Err(Error::NotImplemented(_))));
    }
}
