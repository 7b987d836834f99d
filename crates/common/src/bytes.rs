//! Byte helpers for hot loops: appending many short values, checking string data.

/// Appends `s` to `out`. Values of at most 16 bytes (most digits, codes, short strings) are
/// copied with two overlapping fixed-size moves instead of a call to `memcpy`, whose call
/// and size dispatch cost more than the copy itself for a few bytes (29% of the samples of
/// `toString(number)` over 10M rows before); longer values one `copy_nonoverlapping`.
/// The result is exactly `out ++ s`; reads stay within `s`.
#[inline(always)]
pub fn extend_short(out: &mut Vec<u8>, s: &[u8]) {
    out.reserve(s.len());
    let len = out.len();
    // SAFETY: `reserve` leaves `s.len()` bytes of capacity past `len`, all of which
    // `copy_bytes` writes before `set_len` exposes them.
    unsafe {
        copy_bytes(out.as_mut_ptr().add(len), s);
        out.set_len(len + s.len());
    }
}

/// Writes `s` at `dst` ([`extend_short`]'s copy): values of at most 16 bytes with two
/// overlapping fixed-size moves, longer ones with `copy_nonoverlapping`.
///
/// # Safety
/// `dst..dst + s.len()` must be valid for writes and not overlap `s`. Exactly those bytes
/// are written, all of them; reads stay within `s`.
#[inline(always)]
pub unsafe fn copy_bytes(dst: *mut u8, s: &[u8]) {
    let n = s.len();
    let p = s.as_ptr();
    // SAFETY: (1) the caller's `dst..dst + n` is writable and disjoint from `s`; (2) the
    // moves read `s[..k]` and `s[n - k..]` with `k <= n` and write the same ranges of
    // `dst`, and together cover all of `0..n` (they overlap when `n < 2k`); (3) unaligned
    // reads and writes are used for the multi-byte moves.
    unsafe {
        if n > 16 {
            std::ptr::copy_nonoverlapping(p, dst, n);
        } else if n >= 8 {
            dst.cast::<u64>().write_unaligned(p.cast::<u64>().read_unaligned());
            dst.add(n - 8).cast::<u64>().write_unaligned(p.add(n - 8).cast::<u64>().read_unaligned());
        } else if n >= 4 {
            dst.cast::<u32>().write_unaligned(p.cast::<u32>().read_unaligned());
            dst.add(n - 4).cast::<u32>().write_unaligned(p.add(n - 4).cast::<u32>().read_unaligned());
        } else if n > 0 {
            *dst = *p;
            *dst.add(n / 2) = *p.add(n / 2);
            *dst.add(n - 1) = *p.add(n - 1);
        }
    }
}

/// The eight decimal digits of `x < 10^8`, leading zeros included, as ASCII bytes: byte
/// `i` of the result (bits `8i..8i+8`) is the `i`th digit, most significant first. All
/// digits at once in one register (SWAR): `x` is split into two 4-digit halves in 32-bit
/// lanes, each into two 2-digit quarters in 16-bit lanes, each into two digits in bytes,
/// every split by a multiply-shift that divides all lanes at once (exact for the lanes'
/// ranges: `v * 10486 >> 20` is `v / 100` for `v < 43,699`, `v * 103 >> 10` is `v / 10`
/// for `v < 179`), no lane's product reaching the next lane's bits.
#[inline(always)]
fn eight_digits(x: u32) -> u64 {
    debug_assert!(x < 100_000_000);
    let x = u64::from(x);
    let v = x / 10_000 | (x % 10_000) << 32;
    let q = (v * 10_486 >> 20) & 0x0000_007f_0000_007f;
    let v = q | (v - q * 100) << 16;
    let q = (v * 103 >> 10) & 0x000f_000f_000f_000f;
    let v = q | (v - q * 10) << 8;
    v + 0x3030_3030_3030_3030
}

/// Appends `v` in decimal (the text of `v.to_string()`): eight digits at a time
/// ([`eight_digits`]), each group stored with one 8-byte write straight into `out`.
/// Formatting into a stack buffer two digits at a time and copying (`itoa`) made the
/// copy's 8-byte load wait on the buffer's 2-byte stores (a failed store-to-load forward):
/// half of `toString(number)`'s own samples.
#[inline]
pub fn push_decimal_u64(out: &mut Vec<u8>, v: u64) {
    /// Writes 8 bytes at `d`: the digits of `x < 10^8` without leading zeros ("0" for 0),
    /// then padding; returns the digit count.
    #[inline(always)]
    unsafe fn head(d: *mut u8, x: u32) -> usize {
        let n = x.checked_ilog10().map_or(1, |l| l as usize + 1);
        // SAFETY: the caller's `d..d + 8` is writable.
        unsafe { d.cast::<[u8; 8]>().write_unaligned((eight_digits(x) >> (8 * (8 - n))).to_le_bytes()) };
        n
    }
    /// Writes the 8 digits of `x < 10^8` at `d`, leading zeros included.
    #[inline(always)]
    unsafe fn full(d: *mut u8, x: u32) {
        // SAFETY: the caller's `d..d + 8` is writable.
        unsafe { d.cast::<[u8; 8]>().write_unaligned(eight_digits(x).to_le_bytes()) }
    }
    const E8: u64 = 100_000_000;
    out.reserve(24);
    let len = out.len();
    // SAFETY: (1) `reserve(24)` leaves at least 24 bytes of capacity past `len`; the writes
    // are 8 bytes each, at `len + k` with `k <= 12` (a head of at most 4 digits before two
    // full groups: u64::MAX has 20 digits), so all stay within `len..len + 20`; (2) the
    // first `n` bytes written are the digits and every one of them is written (a head
    // writes its `k` digits, each group 8 more), the bytes past `n` are padding that
    // `set_len` leaves out, so no uninitialized byte becomes part of `out`.
    unsafe {
        let d = out.as_mut_ptr().add(len);
        let n = if v < E8 {
            head(d, v as u32)
        } else {
            let (hi, lo) = (v / E8, (v % E8) as u32);
            let k = if hi < E8 {
                head(d, hi as u32)
            } else {
                let k = head(d, (hi / E8) as u32);
                full(d.add(k), (hi % E8) as u32);
                k + 8
            };
            full(d.add(k), lo);
            k + 8
        };
        out.set_len(len + n);
    }
}

/// Appends `v` in decimal (the text of `v.to_string()`); see [`push_decimal_u64`].
#[inline]
pub fn push_decimal_i64(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    push_decimal_u64(out, v.unsigned_abs());
}

/// Checks that every row of string data is UTF-8: `values[offsets[i]..offsets[i + 1]]` for
/// each `i`, where the offsets are monotonic and within `values` (the caller's invariant, as
/// arrow's arrays keep it). The rows' whole range is checked at once with SIMD (`simdutf8`;
/// std's `from_utf8` was 12% of a `URL LIKE` query's samples from disk, and slower still on
/// Cyrillic text), then every offset inside it must start a character (not point at a
/// continuation byte, 0x80..=0xBF): the bytes between two character boundaries of valid
/// UTF-8 are valid UTF-8. What arrow's `StringArray::try_new` checks, faster.
///
/// # Errors
/// A message naming the first byte that is not UTF-8, or the offset inside a character.
pub fn check_utf8_rows(offsets: &[i32], values: &[u8]) -> Result<(), String> {
    let (Some(&first), Some(&last)) = (offsets.first(), offsets.last()) else { return Ok(()) };
    let (first, last) = (first as usize, last as usize);
    let data = values.get(first..last).ok_or("string offsets past the data")?;
    if simdutf8::basic::from_utf8(data).is_err() {
        let at = std::str::from_utf8(data).err().map_or(0, |e| e.valid_up_to()) + first;
        return Err(format!("invalid UTF-8 at byte {at}"));
    }
    match offsets.iter().find(|&&o| (o as usize) < last && (0x80..0xC0).contains(&values[o as usize])) {
        Some(o) => Err(format!("offset {o} is inside a UTF-8 character")),
        None => Ok(()),
    }
}

/// `b` as a `StringArray` (the same buffers, no copy) when every value is UTF-8
/// ([`check_utf8_rows`]).
///
/// # Errors
/// As [`check_utf8_rows`].
pub fn binary_to_utf8(b: &arrow::array::BinaryArray) -> Result<arrow::array::StringArray, String> {
    use arrow::array::Array;
    check_utf8_rows(b.offsets(), b.values())?;
    // SAFETY: `new_unchecked` needs (1) offsets monotonic and within `values` and a null
    // buffer of the array's length: `b` is a valid `BinaryArray`, whose constructors check
    // both, and these are its own buffers; (2) every value valid UTF-8, with offsets on
    // character boundaries: checked just above.
    Ok(unsafe { arrow::array::StringArray::new_unchecked(b.offsets().clone(), b.values().clone(), b.nulls().cloned()) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_rows_are_checked_as_arrow_checks_them() {
        use arrow::array::{Array, BinaryArray, StringArray};
        let rows: Vec<Option<&[u8]>> = vec![
            Some(b"ab"),
            None,
            Some("é".as_bytes()),
            Some(b""),
            Some("日本語 текст".as_bytes()),
            Some(b"\xff"),
            Some(b"\xc3"),
            Some(b"\xa9z"),
        ];
        let all = BinaryArray::from(rows);
        // Every slice of the rows agrees with arrow's own check, and a valid one converts.
        for start in 0..all.len() {
            for len in 0..=all.len() - start {
                let b = all.slice(start, len);
                let arrow_ok = StringArray::try_new(b.offsets().clone(), b.values().clone(), b.nulls().cloned()).is_ok();
                match binary_to_utf8(&b) {
                    Ok(s) => {
                        assert!(arrow_ok, "{start}+{len}");
                        assert_eq!(s.len(), b.len());
                        for i in 0..len {
                            assert_eq!(s.is_valid(i), b.is_valid(i));
                            assert_eq!(s.value(i).as_bytes(), b.value(i));
                        }
                    }
                    Err(e) => assert!(!arrow_ok, "{start}+{len}: {e}"),
                }
            }
        }
        // The messages name the byte.
        assert_eq!(check_utf8_rows(&[0, 2, 3], b"ok\xff"), Err("invalid UTF-8 at byte 2".to_string()));
        assert_eq!(check_utf8_rows(&[0, 1, 2, 3], b"a\xc3\xa9"), Err("offset 2 is inside a UTF-8 character".to_string()));
    }

    #[test]
    fn extend_short_appends_exactly_the_bytes() {
        let src: Vec<u8> = (0..40u8).map(|b| b.wrapping_mul(37).wrapping_add(11)).collect();
        let mut out = Vec::new();
        let mut expected = Vec::new();
        for n in 0..=40 {
            for start in [0, 1, 40 - n].into_iter().filter(|s| s + n <= 40) {
                let s = &src[start..start + n];
                extend_short(&mut out, s);
                expected.extend_from_slice(s);
                assert_eq!(out, expected, "n {n}, start {start}");
            }
        }
        // A full vector grows.
        let mut v = vec![1u8; 3];
        v.shrink_to_fit();
        extend_short(&mut v, b"abcdefgh");
        assert_eq!(v, b"\x01\x01\x01abcdefgh");
    }

    #[test]
    fn decimals_are_the_digits_std_writes() {
        let mut edges: Vec<u64> = vec![0, u64::MAX, u64::MAX - 1, i64::MAX as u64, i64::MAX as u64 + 1];
        let mut p = 1u64;
        while let Some(next) = p.checked_mul(10) {
            edges.extend([p - 1, p, p + 1]);
            p = next;
        }
        edges.extend([p - 1, p, p + 1]);
        // Fixed-seed random values of every width (xorshift, shifted to 1..=64 bits).
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            edges.push(x >> (i % 64));
        }
        let mut out = b"x".to_vec();
        let mut expected = b"x".to_vec();
        for &v in &edges {
            push_decimal_u64(&mut out, v);
            expected.extend_from_slice(v.to_string().as_bytes());
            let s = v as i64;
            push_decimal_i64(&mut out, s);
            expected.extend_from_slice(s.to_string().as_bytes());
            push_decimal_i64(&mut out, s.wrapping_neg());
            expected.extend_from_slice(s.wrapping_neg().to_string().as_bytes());
        }
        assert_eq!(String::from_utf8(out).unwrap(), String::from_utf8(expected).unwrap());
        // Every value of each 4-digit lane of the SWAR split, beside a few of the other.
        for a in 0..10_000u32 {
            for b in [a, 9_999 - a, 0, 9_999] {
                for x in [a * 10_000 + b, b * 10_000 + a] {
                    assert_eq!(eight_digits(x).to_le_bytes(), *format!("{x:08}").as_bytes(), "{x}");
                }
            }
        }
        let mut v = Vec::new();
        push_decimal_i64(&mut v, i64::MIN);
        assert_eq!(v, b"-9223372036854775808");
    }
}
