//! Small byte-copy helpers for hot loops that append many short values.

/// Appends `s` to `out`. Values of at most 16 bytes (most digits, codes, short strings) are
/// copied with two overlapping fixed-size moves instead of a call to `memcpy`, whose call
/// and size dispatch cost more than the copy itself for a few bytes (29% of the samples of
/// `toString(number)` over 10M rows before); longer values use `extend_from_slice`.
/// The result is exactly `out ++ s`; reads stay within `s`.
#[inline(always)]
pub fn extend_short(out: &mut Vec<u8>, s: &[u8]) {
    let n = s.len();
    if n > 16 {
        out.extend_from_slice(s);
        return;
    }
    out.reserve(16);
    let len = out.len();
    let dst = out.as_mut_ptr();
    // SAFETY: (1) `reserve(16)` leaves at least 16 bytes of capacity past `len`, and every
    // write below lands in `len..len + n` with `n <= 16`; (2) the reads are of `s[..k]` and
    // `s[n - k..]` with `k <= n`, inside `s`; (3) unaligned reads and writes are used for
    // the multi-byte moves; (4) `out` and `s` cannot overlap (`out` is borrowed mutably);
    // (5) every byte of `len..len + n` is written before `set_len` (the head and tail
    // moves overlap to cover all of it), so no uninitialized byte becomes visible.
    unsafe {
        let d = dst.add(len);
        let p = s.as_ptr();
        if n >= 8 {
            d.cast::<u64>().write_unaligned(p.cast::<u64>().read_unaligned());
            d.add(n - 8).cast::<u64>().write_unaligned(p.add(n - 8).cast::<u64>().read_unaligned());
        } else if n >= 4 {
            d.cast::<u32>().write_unaligned(p.cast::<u32>().read_unaligned());
            d.add(n - 4).cast::<u32>().write_unaligned(p.add(n - 4).cast::<u32>().read_unaligned());
        } else if n > 0 {
            *d = *p;
            *d.add(n / 2) = *p.add(n / 2);
            *d.add(n - 1) = *p.add(n - 1);
        }
        out.set_len(len + n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
