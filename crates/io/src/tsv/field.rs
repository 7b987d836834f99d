//! Per-column builders of the TSV reader: each parses one field starting at a byte position
//! and appends its value, returning the position of the delimiter that ends the field.
//!
//! A field ends at the first raw `'\t'` or `'\n'` (or the end of the piece): ClickHouse
//! escapes both inside values, so they never occur raw in a field.

use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanBufferBuilder};
use arrow::buffer::NullBuffer;
use arrow::datatypes::DataType;
use tessera_common::Values;
use tessera_common::calendar::{days_from_civil, days_in_month};

/// Bytes of string data after which a chunk is closed early, well below the 2 GiB (i32
/// offsets) an Arrow Binary/Utf8 array can hold, so that one more field cannot overflow it.
pub(super) const STRING_BYTES_FLUSH: usize = 1 << 30;

/// Seconds per day.
const SECS_PER_DAY: i64 = 86_400;

/// Parses the fields of one column of one chunk.
pub(super) struct ColumnBuilder {
    values: Values,
    /// Validity, for nullable columns only (`\N` is an error in NOT NULL columns).
    nulls: Option<BooleanBufferBuilder>,
}

/// Whether the TSV reader can parse a column of this type.
pub(super) fn is_parseable(dt: &DataType) -> bool {
    // Every type Tessera stores has a text form here.
    tessera_common::is_supported_type(dt)
}

impl ColumnBuilder {
    /// A builder for a column of type `dt` (one accepted by [`is_parseable`]).
    ///
    /// # Panics
    /// If `dt` is not parseable (checked by the caller before parsing starts).
    pub(super) fn new(dt: &DataType, nullable: bool, capacity: usize) -> Self {
        let values = Values::new(dt, capacity)
            .unwrap_or_else(|| panic!("TSV column type {dt} was not checked by is_parseable"));
        ColumnBuilder {
            values,
            nulls: nullable.then(|| BooleanBufferBuilder::new(capacity)),
        }
    }

    /// Whether the chunk holds so much string data that it should be closed now.
    pub(super) fn is_full(&self) -> bool {
        self.values.string_bytes() >= STRING_BYTES_FLUSH
    }

    /// Parses the field starting at `bytes[pos]` and appends it; returns the index of the
    /// `'\t'` or `'\n'` that ends it, or `bytes.len()`.
    ///
    /// # Errors
    /// A message for the row error: bad value, value out of range, `\N` in a NOT NULL column.
    pub(super) fn push(&mut self, bytes: &[u8], pos: usize) -> Result<usize, String> {
        if bytes.get(pos) == Some(&b'\\')
            && bytes.get(pos + 1) == Some(&b'N')
            && ends_field(bytes, pos + 2)
        {
            let Some(nulls) = &mut self.nulls else {
                return Err("NULL (\\N) in a NOT NULL column".to_string());
            };
            nulls.append(false);
            self.values.push_default();
            return Ok(pos + 2);
        }
        if let Some(nulls) = &mut self.nulls {
            nulls.append(true);
        }
        match &mut self.values {
            Values::I8(v) => push_signed(v, bytes, pos, "Int8"),
            Values::I16(v) => push_signed(v, bytes, pos, "Int16"),
            Values::I32(v) => push_signed(v, bytes, pos, "Int32"),
            Values::I64(v) => push_signed(v, bytes, pos, "Int64"),
            Values::U8(v) => push_unsigned(v, bytes, pos, "UInt8"),
            Values::U16(v) => push_unsigned(v, bytes, pos, "UInt16"),
            Values::U32(v) => push_unsigned(v, bytes, pos, "UInt32"),
            Values::U64(v) => push_unsigned(v, bytes, pos, "UInt64"),
            Values::F32(v) => push_float(v, bytes, pos),
            Values::F64(v) => push_float(v, bytes, pos),
            Values::Date(v) => {
                let end = field_end(bytes, pos);
                v.push(
                    parse_date(&bytes[pos..end])
                        .ok_or_else(|| invalid("date (YYYY-MM-DD)", bytes, pos))?,
                );
                Ok(end)
            }
            Values::Time(v) => {
                let end = field_end(bytes, pos);
                v.push(
                    parse_datetime(&bytes[pos..end])
                        .ok_or_else(|| invalid("date-time (YYYY-MM-DD hh:mm:ss)", bytes, pos))?,
                );
                Ok(end)
            }
            Values::Bytes { offsets, data, .. } => {
                let end = unescape_into(data, bytes, pos)?;
                let offset = i32::try_from(data.len())
                    .map_err(|_| "more than 2 GiB of string data in one chunk".to_string())?;
                offsets.push(offset);
                Ok(end)
            }
        }
    }

    /// The chunk as an Arrow array. A Utf8 column whose bytes are not valid UTF-8 comes out
    /// as Binary (the caller then makes the whole column Binary).
    pub(super) fn finish(mut self) -> ArrayRef {
        let nulls = self
            .nulls
            .map(|mut b| NullBuffer::new(b.finish()))
            .filter(|n| n.null_count() > 0);
        self.values.take_array(nulls).unwrap_or_else(|(binary, _)| Arc::new(binary))
    }
}

/// Whether position `i` ends a field: a raw tab, a raw newline or the end of the piece.
fn ends_field(bytes: &[u8], i: usize) -> bool {
    matches!(bytes.get(i), None | Some(b'\t' | b'\n'))
}

/// Index of the tab or newline ending the field that starts at `pos`, or `bytes.len()`.
pub(super) fn field_end(bytes: &[u8], pos: usize) -> usize {
    memchr::memchr2(b'\t', b'\n', &bytes[pos..]).map_or(bytes.len(), |i| pos + i)
}

/// The field starting at `pos` as text for an error message (lossy UTF-8, at most 64 bytes).
pub(super) fn field_text(bytes: &[u8], pos: usize) -> String {
    let field = &bytes[pos..field_end(bytes, pos)];
    let cut = &field[..field.len().min(64)];
    let dots = if cut.len() < field.len() { "..." } else { "" };
    format!("'{}{dots}'", String::from_utf8_lossy(cut))
}

fn invalid(what: &str, bytes: &[u8], pos: usize) -> String {
    format!("invalid {what} {}", field_text(bytes, pos))
}

fn out_of_range(ty: &str, bytes: &[u8], pos: usize) -> String {
    format!("value {} out of range for {ty}", field_text(bytes, pos))
}

/// Parses an optional sign and decimal digits ending the field: `(negative, magnitude, end)`.
/// `Ok(None)` magnitude means more than 20 digits' worth (out of u64 range).
fn parse_digits(bytes: &[u8], pos: usize) -> Result<(bool, Option<u64>, usize), String> {
    let mut i = pos;
    let negative = match bytes.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let digits = i;
    let mut magnitude = Some(0u64);
    while let Some(&b) = bytes.get(i) {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        magnitude = magnitude
            .and_then(|m| m.checked_mul(10))
            .and_then(|m| m.checked_add(u64::from(d)));
        i += 1;
    }
    if i == digits || !ends_field(bytes, i) {
        return Err(invalid("integer", bytes, pos));
    }
    Ok((negative, magnitude, i))
}

fn push_signed<T: TryFrom<i64>>(
    v: &mut Vec<T>,
    bytes: &[u8],
    pos: usize,
    ty: &str,
) -> Result<usize, String> {
    let (negative, magnitude, end) = parse_digits(bytes, pos)?;
    let value = magnitude
        .and_then(|m| {
            if negative {
                0i64.checked_sub_unsigned(m)
            } else {
                i64::try_from(m).ok()
            }
        })
        .and_then(|x| T::try_from(x).ok())
        .ok_or_else(|| out_of_range(ty, bytes, pos))?;
    v.push(value);
    Ok(end)
}

fn push_unsigned<T: TryFrom<u64>>(
    v: &mut Vec<T>,
    bytes: &[u8],
    pos: usize,
    ty: &str,
) -> Result<usize, String> {
    let (negative, magnitude, end) = parse_digits(bytes, pos)?;
    let value = magnitude
        .filter(|&m| !negative || m == 0)
        .and_then(|m| T::try_from(m).ok())
        .ok_or_else(|| out_of_range(ty, bytes, pos))?;
    v.push(value);
    Ok(end)
}

/// Floats as Rust's `str::parse` reads them: `1`, `-2.5`, `1e-3`, `inf`, `nan`...
fn push_float<T: std::str::FromStr>(
    v: &mut Vec<T>,
    bytes: &[u8],
    pos: usize,
) -> Result<usize, String> {
    let end = field_end(bytes, pos);
    let value = std::str::from_utf8(&bytes[pos..end])
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| invalid("number", bytes, pos))?;
    v.push(value);
    Ok(end)
}

/// Unescapes the string field starting at `pos` into `out`; returns the field's end.
///
/// Escapes (ClickHouse `TabSeparated`): `\b` `\f` `\n` `\r` `\t` `\0` `\a` `\v` give the
/// control byte, `\xHH` the byte 0xHH, a backslash before any other byte gives that byte
/// (`\\` `\'` `\"` `\/`). A backslash ending the field is an error: it cannot come from
/// ClickHouse, which escapes tabs and newlines.
fn unescape_into(out: &mut Vec<u8>, bytes: &[u8], pos: usize) -> Result<usize, String> {
    let mut i = pos;
    loop {
        let Some(k) = memchr::memchr3(b'\t', b'\n', b'\\', &bytes[i..]) else {
            out.extend_from_slice(&bytes[i..]);
            return Ok(bytes.len());
        };
        let j = i + k;
        out.extend_from_slice(&bytes[i..j]);
        if bytes[j] != b'\\' {
            return Ok(j);
        }
        let (byte, len) = match bytes.get(j + 1) {
            None | Some(b'\t' | b'\n') => {
                return Err(format!(
                    "backslash at the end of field {}",
                    field_text(bytes, pos)
                ));
            }
            Some(b'x') => {
                let hex = bytes
                    .get(j + 2..j + 4)
                    .and_then(|h| std::str::from_utf8(h).ok());
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => (b, 4),
                    None => {
                        return Err(format!(
                            "bad \\x escape in field {}",
                            field_text(bytes, pos)
                        ));
                    }
                }
            }
            Some(&c) => (unescape_byte(c), 2),
        };
        out.push(byte);
        i = j + len;
    }
}

fn unescape_byte(c: u8) -> u8 {
    match c {
        b'b' => 0x08,
        b'f' => 0x0c,
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'0' => 0,
        b'a' => 0x07,
        b'v' => 0x0b,
        other => other,
    }
}

/// `YYYY-MM-DD` -> days since 1970-01-01 (proleptic Gregorian); `None` if malformed or not
/// a real date.
pub(super) fn parse_date(s: &[u8]) -> Option<i32> {
    if s.len() != 10 || s[4] != b'-' || s[7] != b'-' {
        return None;
    }
    let year = digits(&s[0..4])? as i64;
    let month = digits(&s[5..7])?;
    let day = digits(&s[8..10])?;
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    i32::try_from(days_from_civil(year, month, day)).ok()
}

/// `YYYY-MM-DD hh:mm:ss` (UTC; an optional `.fraction` is dropped, i.e. floored) -> seconds
/// since 1970-01-01 00:00:00; `None` if malformed.
pub(super) fn parse_datetime(s: &[u8]) -> Option<i64> {
    if s.len() < 19 || s[10] != b' ' || s[13] != b':' || s[16] != b':' {
        return None;
    }
    let fraction = &s[19..];
    if !fraction.is_empty()
        && (fraction[0] != b'.' || fraction.len() == 1 || digits(&fraction[1..]).is_none())
    {
        return None;
    }
    let days = i64::from(parse_date(&s[..10])?);
    let (h, m, sec) = (
        digits(&s[11..13])?,
        digits(&s[14..16])?,
        digits(&s[17..19])?,
    );
    if h > 23 || m > 59 || sec > 59 {
        return None;
    }
    Some(days * SECS_PER_DAY + i64::from(h * 3600 + m * 60 + sec))
}

/// ASCII digits (at most 18 of them) as a number.
fn digits(s: &[u8]) -> Option<u32> {
    let mut v: u64 = 0;
    for &b in s {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.saturating_mul(10) + u64::from(b - b'0');
    }
    u32::try_from(v).ok().or(Some(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_times() {
        assert_eq!(parse_date(b"1970-01-01"), Some(0));
        assert_eq!(parse_date(b"1969-12-31"), Some(-1));
        assert_eq!(parse_date(b"2013-07-15"), Some(15_901));
        assert_eq!(parse_date(b"2000-02-29"), Some(11_016));
        assert_eq!(parse_date(b"0000-03-01"), Some(-719_468));
        for bad in [
            &b"1900-02-29"[..],
            b"2013-13-01",
            b"2013-00-10",
            b"2013-04-31",
            b"2013-7-15",
            b"2013/07/15",
            b"",
        ] {
            assert_eq!(parse_date(bad), None, "{}", String::from_utf8_lossy(bad));
        }
        assert_eq!(
            parse_datetime(b"2013-07-15 10:47:34"),
            Some(15_901 * 86_400 + 38_854)
        );
        assert_eq!(parse_datetime(b"1969-12-31 23:59:59"), Some(-1));
        assert_eq!(parse_datetime(b"1970-01-01 00:00:01.999"), Some(1));
        for bad in [
            &b"2013-07-15 24:00:00"[..],
            b"2013-07-15T10:47:34",
            b"2013-07-15 10:47",
            b"2013-07-15 10:47:34.",
            b"2013-07-15 10:47:34Z",
        ] {
            assert_eq!(
                parse_datetime(bad),
                None,
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn integers_are_range_checked() {
        let mut v: Vec<i8> = Vec::new();
        assert_eq!(push_signed(&mut v, b"-128\tx", 0, "Int8"), Ok(4));
        assert_eq!(push_signed(&mut v, b"+127", 0, "Int8"), Ok(4));
        assert!(
            push_signed(&mut v, b"128", 0, "Int8")
                .unwrap_err()
                .contains("out of range for Int8")
        );
        assert!(
            push_signed(&mut v, b"1x", 0, "Int8")
                .unwrap_err()
                .contains("invalid integer '1x'")
        );
        assert!(push_signed(&mut v, b"", 0, "Int8").is_err());
        assert!(push_signed(&mut v, b"-", 0, "Int8").is_err());
        assert_eq!(v, [-128, 127]);
        let mut w: Vec<i64> = Vec::new();
        push_signed(&mut w, b"-9223372036854775808", 0, "Int64").unwrap();
        push_signed(&mut w, b"9223372036854775807", 0, "Int64").unwrap();
        assert!(push_signed(&mut w, b"9223372036854775808", 0, "Int64").is_err());
        assert!(push_signed(&mut w, b"99999999999999999999999", 0, "Int64").is_err());
        assert_eq!(w, [i64::MIN, i64::MAX]);
        let mut u: Vec<u64> = Vec::new();
        push_unsigned(&mut u, b"18446744073709551615", 0, "UInt64").unwrap();
        push_unsigned(&mut u, b"-0", 0, "UInt64").unwrap();
        assert!(push_unsigned(&mut u, b"-1", 0, "UInt64").is_err());
        assert_eq!(u, [u64::MAX, 0]);
    }

    #[test]
    fn escapes() {
        let mut out = Vec::new();
        let field = br"a\tb\nc\\d\re\0f\'g\bh\fi\x41\/\q";
        let mut input = field.to_vec();
        input.extend_from_slice(b"\tnext");
        assert_eq!(unescape_into(&mut out, &input, 0), Ok(field.len()));
        assert_eq!(out, b"a\tb\nc\\d\re\0f'g\x08h\x0ci\x41/q");
        assert!(
            unescape_into(&mut Vec::new(), b"ab\\\tc", 0)
                .unwrap_err()
                .contains("backslash at the end")
        );
        assert!(unescape_into(&mut Vec::new(), b"ab\\", 0).is_err());
        assert!(unescape_into(&mut Vec::new(), b"\\xZZ", 0).is_err());
    }
}
