//! The start of an LZ4 block's payload without decoding the rest (a string block's
//! lengths, [`super::read_block_sizes`]).

use super::DResult;

/// The first `at_least` bytes (or a few more, never past `capacity`) of the payload of
/// the LZ4 block `src` (the block format lz4_flex writes: sequences of a token, literals,
/// a 2-byte match offset and a match length), decoded sequence by sequence and stopped
/// once enough is out (a match is copied only up to `at_least`). Every length and offset is
/// checked against `src` and the output, and no more than LZ4's largest ratio (255:1) of
/// `src` is ever asked for.
pub(crate) fn lz4_prefix(src: &[u8], at_least: usize, capacity: usize) -> DResult<Vec<u8>> {
    let corrupt = |what: &str| format!("lz4: {what}");
    if at_least > src.len().saturating_mul(255).saturating_add(16) {
        return Err(corrupt("more bytes wanted than the block can hold"));
    }
    let mut out: Vec<u8> = Vec::with_capacity(at_least.min(capacity) + 64);
    let mut i = 0usize;
    let length = |i: &mut usize, base: usize| -> DResult<usize> {
        let mut n = base;
        if base == 15 {
            loop {
                let b = *src.get(*i).ok_or_else(|| corrupt("truncated length"))?;
                *i += 1;
                n = n.checked_add(b as usize).ok_or_else(|| corrupt("length overflow"))?;
                if b != 255 {
                    break;
                }
            }
        }
        Ok(n)
    };
    while out.len() < at_least {
        let token = *src.get(i).ok_or_else(|| corrupt("block ends before the wanted bytes"))?;
        i += 1;
        let lits = length(&mut i, (token >> 4) as usize)?;
        let lit = src.get(i..i.checked_add(lits).ok_or_else(|| corrupt("length overflow"))?).ok_or_else(|| corrupt("truncated literals"))?;
        if out.len() + lits > capacity {
            return Err(corrupt("more bytes than the header declares"));
        }
        out.extend_from_slice(lit);
        i += lits;
        if out.len() >= at_least || i == src.len() {
            break;
        }
        let off = src.get(i..i + 2).ok_or_else(|| corrupt("truncated match offset"))?;
        let off = u16::from_le_bytes([off[0], off[1]]) as usize;
        i += 2;
        if off == 0 || off > out.len() {
            return Err(corrupt("match offset outside the output"));
        }
        let n = length(&mut i, (token & 15) as usize)?.checked_add(4).ok_or_else(|| corrupt("length overflow"))?;
        if out.len() + n > capacity {
            return Err(corrupt("more bytes than the header declares"));
        }
        // Only what is still wanted of it. The match may overlap what it produces (offset
        // < length): copied in strides of the offset (one byte repeated at offset 1).
        let n = n.min(at_least - out.len());
        let start = out.len() - off;
        if off == 1 {
            let b = out[start];
            out.resize(out.len() + n, b);
            continue;
        }
        let mut done = 0;
        while done < n {
            let k = (n - done).min(off);
            out.extend_from_within(start + done..start + done + k);
            done += k;
        }
    }
    if out.len() < at_least {
        return Err(corrupt("block ends before the wanted bytes"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::tests::xorshift;

    /// Every prefix [`lz4_prefix`] decodes is the start of what lz4_flex decompresses, on
    /// text, runs (overlapping matches), incompressible bytes and the empty input; cut or
    /// damaged streams are errors, not panics.
    #[test]
    fn lz4_prefixes_are_the_start_of_the_payload() {
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        let text: Vec<u8> = (0..20_000).map(|i| b"http://example.com/page?id="[i % 27] ^ ((i / 500) as u8 & 1)).collect();
        let runs: Vec<u8> = (0..5_000).map(|i| (i / 700) as u8).collect();
        let noise: Vec<u8> = (0..3_000).map(|_| next() as u8).collect();
        let offsets: Vec<u8> = (0..2_000u32).flat_map(|i| (i * 37 + i % 5).to_le_bytes()).collect();
        for data in [text, runs, noise, offsets, Vec::new(), vec![7u8]] {
            let packed = lz4_flex::block::compress(&data);
            for at in [0, 1, 2, 15, 16, 255, 256, 4_000, data.len() / 2, data.len()] {
                if at > data.len() {
                    continue;
                }
                let got = lz4_prefix(&packed, at, data.len()).unwrap();
                assert!(got.len() >= at && got.len() <= data.len());
                assert_eq!(got, data[..got.len()], "prefix of {at} bytes");
            }
            assert!(lz4_prefix(&packed, data.len() + 1, data.len() + 10).is_err());
            if data.len() > 100 {
                assert!(lz4_prefix(&packed, data.len(), data.len() - 1).is_err());
                assert!(lz4_prefix(&packed[..packed.len() / 2], data.len(), data.len()).is_err());
                for k in 0..packed.len().min(200) {
                    let mut bad = packed.clone();
                    bad[k] ^= 0x5a;
                    let _ = lz4_prefix(&bad, data.len(), data.len());
                }
            }
        }
    }
}
