//! Counter-based randomness: every random value is `splitmix64(seed ^ salt ^ index)`, so a
//! row's values depend only on (seed, row index) and never on thread count or batch cut.

/// The golden-ratio increment of splitmix64 (Steele, Lea, Flood: "Fast splittable
/// pseudorandom number generators", OOPSLA 2014).
pub(crate) const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// The splitmix64 output function (a bijection on `u64`).
#[inline]
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `splitmix64(seed ^ salt ^ index)`: the hash of `index` in the stream named `salt`.
///
/// The index is spread by the golden ratio first, so that `index ^ salt` collisions between
/// two streams need indexes ~2^60 apart (never within one table).
#[inline]
pub(crate) fn hash(seed: u64, salt: u64, index: u64) -> u64 {
    mix64(seed ^ salt ^ index.wrapping_mul(GOLDEN).wrapping_add(GOLDEN))
}

/// A further independent draw from an already mixed value.
#[inline]
pub(crate) fn rehash(h: u64, salt: u64) -> u64 {
    mix64(h ^ salt)
}

/// The top 53 bits of `h` as a uniform float in `[0, 1)`.
#[inline]
pub(crate) fn unit(h: u64) -> f64 {
    (h >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// `h` reduced to `[0, n)` without division (Lemire's multiply-shift), `n >= 1`. Uses the
/// high bits of `h`: pass a full 64-bit hash, never a shifted one.
#[inline]
pub(crate) fn below(h: u64, n: u64) -> u64 {
    ((h as u128 * n as u128) >> 64) as u64
}

/// A bijection on `[0, 2^bits)` (`1 <= bits <= 64`): odd multiplies and xor-shifts, each
/// invertible modulo `2^bits`. Used where distinct inputs must give distinct outputs
/// (WatchID, ClientIP, the word digits of a string value).
#[inline]
pub(crate) fn permute(x: u64, key: u64, bits: u32) -> u64 {
    debug_assert!((1..=64).contains(&bits));
    let mask = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let half = bits.div_ceil(2);
    let mut z = (x ^ key) & mask;
    z = z.wrapping_mul(0xBF58_476D_1CE4_E5B9) & mask;
    z ^= z >> half;
    z = z.wrapping_mul(0x94D0_49BB_1331_11EB) & mask;
    z ^= z >> half;
    z = z.wrapping_add(key.rotate_left(17)) & mask;
    z = z.wrapping_mul(GOLDEN | 1) & mask;
    z ^ (z >> half)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn permute_is_a_bijection_on_small_domains() {
        for bits in [1u32, 5, 10, 16] {
            let n = 1u64 << bits;
            let set: HashSet<u64> = (0..n).map(|x| permute(x, 0xDEAD_BEEF, bits)).collect();
            assert_eq!(set.len() as u64, n);
            assert!(set.iter().all(|&v| v < n));
        }
    }

    #[test]
    fn unit_and_below_ranges() {
        for i in 0..10_000 {
            let h = hash(7, 11, i);
            let u = unit(h);
            assert!((0.0..1.0).contains(&u));
            assert!(below(h, 13) < 13);
        }
        assert_eq!(below(u64::MAX, 1), 0);
    }
}
