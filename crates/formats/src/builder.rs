//! Column builders of the row-oriented readers (RowBinary, TabSeparated, CSV, JSONEachRow):
//! one per column of the target schema, fed a value at a time, finished into an Arrow array
//! per batch. Also the calendar arithmetic the text formats share.

use arrow::array::{ArrayRef, BooleanBufferBuilder};
use arrow::buffer::NullBuffer;
use arrow::datatypes::DataType;
use tessera_common::calendar::{civil_from_days, days_from_civil, days_in_month};
use tessera_common::{Error, Result, Values};

use crate::chtype::Wire;

/// String bytes in one batch's column after which the reader closes the batch early,
/// well below the 2 GiB an Arrow Utf8/Binary array (i32 offsets) can hold.
pub(crate) const STRING_BYTES_FLUSH: usize = 1 << 30;

/// Seconds per day.
const SECS_PER_DAY: i64 = 86_400;

/// The values of one column of one batch being read.
pub(crate) struct ColumnBuilder {
    values: Values,
    nulls: Option<BooleanBufferBuilder>,
}

impl ColumnBuilder {
    /// A builder for a column of type `dt`, nullable or not.
    ///
    /// # Errors
    /// [`Error::NotImplemented`] for a type Tessera does not store.
    pub(crate) fn new(dt: &DataType, nullable: bool, capacity: usize) -> Result<Self> {
        let values = Values::new(dt, capacity)
            .ok_or_else(|| Error::NotImplemented(format!("reading a column of type {dt}")))?;
        Ok(ColumnBuilder { values, nulls: nullable.then(|| BooleanBufferBuilder::new(capacity)) })
    }

    /// Whether the string bytes passed [`STRING_BYTES_FLUSH`].
    pub(crate) fn is_full(&self) -> bool {
        self.values.string_bytes() >= STRING_BYTES_FLUSH
    }

    fn valid(&mut self) {
        if let Some(n) = &mut self.nulls {
            n.append(true);
        }
    }

    /// Appends NULL.
    ///
    /// # Errors
    /// A message for a NULL in a non-nullable column.
    pub(crate) fn push_null(&mut self) -> std::result::Result<(), String> {
        let Some(n) = &mut self.nulls else { return Err("NULL in a non-nullable column".into()) };
        n.append(false);
        self.values.push_default();
        Ok(())
    }

    /// Appends the string value `b` (already unescaped; parsed as text for a column of
    /// another type).
    ///
    /// # Errors
    /// A message when `b` does not parse for the column's type, or when the batch's string
    /// bytes would pass 2 GiB ([`Values::push_bytes`]).
    pub(crate) fn push_bytes(&mut self, b: &[u8]) -> std::result::Result<(), String> {
        if !self.values.is_bytes() {
            return self.push_text(b);
        }
        self.values.push_bytes(b)?;
        self.valid();
        Ok(())
    }

    /// Whether the column holds strings (text readers pass such fields unparsed).
    pub(crate) fn is_bytes(&self) -> bool {
        self.values.is_bytes()
    }

    /// Appends the value written as text `t` (ClickHouse's text forms: decimal integers,
    /// floats with `nan`/`inf`, `YYYY-MM-DD`, `YYYY-MM-DD hh:mm:ss` or Unix seconds; strings
    /// as they are).
    ///
    /// # Errors
    /// A message saying what does not parse.
    pub(crate) fn push_text(&mut self, t: &[u8]) -> std::result::Result<(), String> {
        let s = || std::str::from_utf8(t).map_err(|_| format!("cannot parse {} as a number", show(t)));
        fn int<T: std::str::FromStr>(s: &str, ty: &str) -> std::result::Result<T, String> {
            s.parse::<T>().map_err(|_| format!("cannot parse {} as {ty}", show(s.as_bytes())))
        }
        match &mut self.values {
            Values::I8(v) => v.push(int(s()?, "Int8")?),
            Values::I16(v) => v.push(int(s()?, "Int16")?),
            Values::I32(v) => v.push(int(s()?, "Int32")?),
            Values::I64(v) => v.push(int(s()?, "Int64")?),
            Values::U8(v) => v.push(int(s()?, "UInt8")?),
            Values::U16(v) => v.push(int(s()?, "UInt16")?),
            Values::U32(v) => v.push(int(s()?, "UInt32")?),
            Values::U64(v) => v.push(int(s()?, "UInt64")?),
            Values::F32(v) => v.push(parse_f32(t).ok_or_else(|| format!("cannot parse {} as Float32", show(t)))?),
            Values::F64(v) => v.push(parse_float(t).ok_or_else(|| format!("cannot parse {} as Float64", show(t)))?),
            Values::Date(v) => v.push(parse_date(t).ok_or_else(|| format!("cannot parse {} as a date", show(t)))?),
            Values::Time(v) => v.push(parse_datetime(t).ok_or_else(|| format!("cannot parse {} as a DateTime", show(t)))?),
            Values::Bytes { .. } => self.values.push_bytes(t)?,
        }
        self.valid();
        Ok(())
    }

    /// Appends one value in ClickHouse's binary layout `wire` (little-endian; `b` holds
    /// exactly `wire.width()` bytes, or the string bytes for `String`).
    ///
    /// # Errors
    /// A message when `wire` does not fit the column's type.
    pub(crate) fn push_wire(&mut self, wire: Wire, b: &[u8]) -> std::result::Result<(), String> {
        fn le<const N: usize>(b: &[u8]) -> [u8; N] {
            let mut a = [0u8; N];
            a.copy_from_slice(&b[..N]);
            a
        }
        match (&mut self.values, wire) {
            (Values::I8(v), Wire::Fixed(_)) => v.push(b[0] as i8),
            (Values::I16(v), Wire::Fixed(_)) => v.push(i16::from_le_bytes(le(b))),
            (Values::I32(v) | Values::Date(v), Wire::Fixed(_)) => v.push(i32::from_le_bytes(le(b))),
            (Values::I64(v), Wire::Fixed(_)) => v.push(i64::from_le_bytes(le(b))),
            (Values::U8(v), Wire::Fixed(_) | Wire::Bool) => v.push(b[0]),
            (Values::U16(v), Wire::Fixed(_)) => v.push(u16::from_le_bytes(le(b))),
            (Values::U32(v), Wire::Fixed(_)) => v.push(u32::from_le_bytes(le(b))),
            (Values::U64(v), Wire::Fixed(_)) => v.push(u64::from_le_bytes(le(b))),
            (Values::F32(v), Wire::Fixed(_)) => v.push(f32::from_le_bytes(le(b))),
            (Values::F64(v), Wire::Fixed(_)) => v.push(f64::from_le_bytes(le(b))),
            (Values::Date(v), Wire::Date) => v.push(i32::from(u16::from_le_bytes(le(b)))),
            (Values::Time(v), Wire::DateTime) => v.push(i64::from(u32::from_le_bytes(le(b)))),
            (Values::Time(v), Wire::DateTime64(p)) => v.push(i64::from_le_bytes(le(b)).div_euclid(10i64.pow(p))),
            (Values::Bytes { .. }, Wire::String | Wire::FixedString(_)) => self.values.push_bytes(b)?,
            _ => return Err(format!("a {wire:?} value does not fit this column")),
        }
        self.valid();
        Ok(())
    }

    /// The values so far as one array (the builder is left empty).
    ///
    /// # Errors
    /// `(row, message)` for the first value of a Utf8 column that is not valid UTF-8
    /// (`row` from 0 in this batch).
    pub(crate) fn finish(&mut self) -> std::result::Result<ArrayRef, (usize, String)> {
        let nulls = self.nulls.as_mut().map(|n| NullBuffer::new(n.finish()));
        self.values
            .take_array(nulls)
            .map_err(|(_, row)| (row, "bytes that are not valid UTF-8 for a Utf8 column (store it as Binary)".into()))
    }
}

/// `"text"` for messages: at most 40 bytes, invalid UTF-8 replaced.
pub(crate) fn show(t: &[u8]) -> String {
    let s = String::from_utf8_lossy(&t[..t.len().min(40)]);
    if t.len() > 40 { format!("'{s}...'") } else { format!("'{s}'") }
}

/// A float in ClickHouse's text forms: Rust's syntax plus `nan`, `-nan`, `inf`, `-inf`,
/// `+inf`, `infinity` (any case).
pub(crate) fn parse_float(t: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(t).ok()?;
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let v = if body.eq_ignore_ascii_case("nan") {
        f64::NAN
    } else if body.eq_ignore_ascii_case("inf") || body.eq_ignore_ascii_case("infinity") {
        f64::INFINITY
    } else if body.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        body.parse::<f64>().ok()?
    } else {
        return None;
    };
    Some(if neg { -v } else { v })
}

/// A Float32 in the text forms of [`parse_float`], rounded once (from the text, not
/// through f64).
pub(crate) fn parse_f32(t: &[u8]) -> Option<f32> {
    let s = std::str::from_utf8(t).ok()?;
    let body = s.strip_prefix(['-', '+']).unwrap_or(s);
    if body.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return s.parse::<f32>().ok();
    }
    parse_float(t).map(|v| v as f32)
}

/// `YYYY-MM-DD` (or a day number) to days since 1970-01-01.
pub(crate) fn parse_date(t: &[u8]) -> Option<i32> {
    if t.len() == 10 && t[4] == b'-' && t[7] == b'-' {
        let y = digits(&t[0..4])? as i64;
        let m = digits(&t[5..7])?;
        let d = digits(&t[8..10])?;
        if !(1..=12).contains(&m) || d == 0 || d > days_in_month(y, m) {
            return None;
        }
        return i32::try_from(days_from_civil(y, m, d)).ok();
    }
    std::str::from_utf8(t).ok()?.parse::<i32>().ok()
}

/// `YYYY-MM-DD hh:mm:ss` (also with `T`, a `.fraction` dropped, a trailing `Z`), a date
/// alone (midnight), or Unix seconds, to seconds since 1970-01-01 00:00:00 UTC.
pub(crate) fn parse_datetime(t: &[u8]) -> Option<i64> {
    if t.len() >= 10 && t[4] == b'-' {
        let days = i64::from(parse_date(&t[..10])?);
        if t.len() == 10 {
            return Some(days * SECS_PER_DAY);
        }
        let mut rest = &t[10..];
        if rest.len() < 9 || !matches!(rest[0], b' ' | b'T') || rest[3] != b':' || rest[6] != b':' {
            return None;
        }
        let (h, mi, s) = (digits(&rest[1..3])?, digits(&rest[4..6])?, digits(&rest[7..9])?);
        if h > 23 || mi > 59 || s > 59 {
            return None;
        }
        rest = &rest[9..];
        if let Some(frac) = rest.strip_prefix(b".") {
            let n = frac.iter().take_while(|c| c.is_ascii_digit()).count();
            if n == 0 {
                return None;
            }
            rest = &frac[n..];
        }
        if !(rest.is_empty() || rest == b"Z") {
            return None;
        }
        return Some(days * SECS_PER_DAY + i64::from(h * 3600 + mi * 60 + s));
    }
    if !t.is_empty() && t.iter().all(u8::is_ascii_digit) {
        return std::str::from_utf8(t).ok()?.parse::<i64>().ok();
    }
    None
}

fn digits(s: &[u8]) -> Option<u32> {
    let mut v = 0u32;
    for &c in s {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u32::from(c - b'0');
    }
    Some(v)
}

/// Appends `YYYY-MM-DD` of day `days` (years outside 0..=9999 as they come, with a sign).
pub(crate) fn write_date(out: &mut Vec<u8>, days: i64) {
    let (y, m, d) = civil_from_days(days);
    if (0..=9999).contains(&y) {
        let y = y as u32;
        out.extend_from_slice(&[
            b'0' + (y / 1000) as u8,
            b'0' + (y / 100 % 10) as u8,
            b'0' + (y / 10 % 10) as u8,
            b'0' + (y % 10) as u8,
        ]);
    } else {
        out.extend_from_slice(y.to_string().as_bytes());
    }
    out.extend_from_slice(&[b'-', b'0' + (m / 10) as u8, b'0' + (m % 10) as u8, b'-', b'0' + (d / 10) as u8, b'0' + (d % 10) as u8]);
}

/// Appends `YYYY-MM-DD hh:mm:ss` of Unix second `secs` (UTC).
pub(crate) fn write_datetime(out: &mut Vec<u8>, secs: i64) {
    write_date(out, secs.div_euclid(SECS_PER_DAY));
    let s = secs.rem_euclid(SECS_PER_DAY) as u32;
    let (h, mi, se) = (s / 3600, s / 60 % 60, s % 60);
    out.extend_from_slice(&[
        b' ',
        b'0' + (h / 10) as u8,
        b'0' + (h % 10) as u8,
        b':',
        b'0' + (mi / 10) as u8,
        b'0' + (mi % 10) as u8,
        b':',
        b'0' + (se / 10) as u8,
        b'0' + (se % 10) as u8,
    ]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calendar_round_trips() {
        for days in [-719_528i64, -1, 0, 1, 18_262, 2_932_896, 100_000] {
            let mut s = Vec::new();
            write_date(&mut s, days);
            assert_eq!(parse_date(&s).map(i64::from), Some(days), "{}", String::from_utf8_lossy(&s));
        }
        let mut s = Vec::new();
        write_datetime(&mut s, 1_577_934_245);
        assert_eq!(s, b"2020-01-02 03:04:05");
        assert_eq!(parse_datetime(b"2020-01-02 03:04:05"), Some(1_577_934_245));
        assert_eq!(parse_datetime(b"2020-01-02T03:04:05.123Z"), Some(1_577_934_245));
        assert_eq!(parse_datetime(b"1577934245"), Some(1_577_934_245));
        assert_eq!(parse_datetime(b"2020-02-30 00:00:00"), None);
        assert_eq!(parse_datetime(b"2020-01-02 24:00:00"), None);
        assert_eq!(parse_float(b"-nan").map(f64::is_nan), Some(true));
        assert_eq!(parse_float(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_float(b"1e-7"), Some(1e-7));
        assert_eq!(parse_float(b"abc"), None);
    }
}
