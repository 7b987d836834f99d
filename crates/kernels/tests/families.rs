//! Every kernel of every family this CPU supports agrees with the scalar twin, bit for bit,
//! on edge cases first (length 0, 1, vector width +-1, unaligned sub-slices, all/none
//! selected, MIN/MAX of each type, empty strings, strings longer than a vector) and then on
//! random inputs from a fixed seed.
//!
//! On x86_64 this covers `avx2` and `avx512` where the CPU has them; under qemu
//! (`scripts/check-aarch64.sh`) it covers `neon` and `sve` at each vector length.

use tessera_kernels::{CmpOp, IntKernels, Kernels, SelectInt, SimdLevel};

/// splitmix64: a fixed-seed generator, so failures reproduce.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Lengths around every vector width (4, 8, 16, 32, 64 lanes) plus a few big ones.
fn lengths() -> Vec<usize> {
    let mut v = vec![0, 1, 2, 3];
    for w in [4usize, 8, 16, 32, 64, 128] {
        v.extend([w - 1, w, w + 1]);
    }
    v.extend([200, 1000, 4099]);
    v
}

fn families() -> Vec<&'static Kernels> {
    let fams: Vec<&'static Kernels> = SimdLevel::available()
        .into_iter()
        .filter(|l| *l != SimdLevel::Scalar)
        .map(|l| Kernels::for_level(l).expect("available level has a table"))
        .collect();
    eprintln!(
        "families under test: {:?}",
        fams.iter().map(|k| k.level.name()).collect::<Vec<_>>()
    );
    fams
}

fn scalar() -> &'static Kernels {
    Kernels::scalar()
}

/// A buffer with `pad` elements before the slice, so the slice starts unaligned.
fn unaligned<T: Copy>(v: &[T], pad: usize, fill: T) -> Vec<T> {
    let mut b = vec![fill; pad];
    b.extend_from_slice(v);
    b
}

#[test]
fn dispatch_names_and_errors() {
    assert_eq!(SimdLevel::parse("AVX512").unwrap(), SimdLevel::Avx512);
    assert!(SimdLevel::parse("sse9").is_err());
    assert_eq!(
        Kernels::for_setting("scalar").unwrap().level,
        SimdLevel::Scalar
    );
    assert!(SimdLevel::available().contains(&SimdLevel::Scalar));
    // A family of the other arch is never compiled.
    #[cfg(target_arch = "x86_64")]
    assert!(matches!(
        Kernels::for_level(SimdLevel::Sve),
        Err(tessera_kernels::SimdLevelError::NotCompiled(_))
    ));
    #[cfg(target_arch = "aarch64")]
    assert!(matches!(
        Kernels::for_level(SimdLevel::Avx2),
        Err(tessera_kernels::SimdLevelError::NotCompiled(_))
    ));
    let best = Kernels::best().level;
    assert_eq!(best, *SimdLevel::available().iter().max().unwrap());
}

#[test]
fn hashes_agree() {
    let mut rng = Rng(1);
    for fam in families() {
        for n in lengths() {
            for pad in [0usize, 1, 3] {
                let mut v64: Vec<u64> = (0..n).map(|_| rng.next()).collect();
                if n > 2 {
                    v64[0] = 0;
                    v64[1] = u64::MAX;
                    v64[2] = 1 << 63;
                }
                let b64 = unaligned(&v64, pad, 7);
                let keys = &b64[pad..];
                let (mut a, mut b) = (vec![0u64; n], vec![0u64; n]);
                (scalar().hash_u64)(keys, &mut a);
                (fam.hash_u64)(keys, &mut b);
                assert_eq!(a, b, "{} hash_u64 n={n} pad={pad}", fam.level);

                let v128: Vec<u128> = (0..n)
                    .map(|i| (rng.next() as u128) << 64 | v64[i] as u128)
                    .collect();
                let b128 = unaligned(&v128, pad, 7);
                (scalar().hash_u128)(&b128[pad..], &mut a);
                (fam.hash_u128)(&b128[pad..], &mut b);
                assert_eq!(a, b, "{} hash_u128 n={n} pad={pad}", fam.level);
            }
        }
        // Extremes of u128.
        let ext = [
            0u128,
            u128::MAX,
            1,
            1 << 64,
            u64::MAX as u128,
            1 << 127,
            0,
            0,
            0,
        ];
        let (mut a, mut b) = (vec![0u64; ext.len()], vec![0u64; ext.len()]);
        (scalar().hash_u128)(&ext, &mut a);
        (fam.hash_u128)(&ext, &mut b);
        assert_eq!(a, b, "{} hash_u128 extremes", fam.level);
    }
}

fn random_strings(rng: &mut Rng, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let len = match i % 7 {
                0 => 0,
                1 => rng.below(17) as usize,
                2 => 17 + rng.below(48) as usize,
                3 => 64 + rng.below(300) as usize,
                _ => rng.below(120) as usize,
            };
            (0..len)
                .map(|_| {
                    if i % 3 == 0 {
                        b'a' + rng.below(3) as u8
                    } else {
                        rng.next() as u8
                    }
                })
                .collect()
        })
        .collect()
}

fn arrow_layout(strs: &[Vec<u8>]) -> (Vec<i32>, Vec<u8>) {
    let mut offsets = vec![0i32];
    let mut data = Vec::new();
    for s in strs {
        data.extend_from_slice(s);
        offsets.push(data.len() as i32);
    }
    (offsets, data)
}

#[test]
fn string_kernels_agree() {
    let mut rng = Rng(2);
    for fam in families() {
        // Every length 0..=300 once, then random mixes.
        let mut strs: Vec<Vec<u8>> = (0..=300usize)
            .map(|l| (0..l).map(|i| (i * 31 + l) as u8).collect())
            .collect();
        strs.extend(random_strings(&mut rng, 3000));
        let refs: Vec<&[u8]> = strs.iter().map(|s| s.as_slice()).collect();
        let (mut a, mut b) = (vec![0u64; refs.len()], vec![0u64; refs.len()]);
        (scalar().hash_strs)(&refs, &mut a);
        (fam.hash_strs)(&refs, &mut b);
        assert_eq!(a, b, "{} hash_strs", fam.level);

        for n in lengths() {
            let part = &strs[strs.len() - n.min(strs.len())..];
            let mut variants = vec![part.to_vec()];
            variants.push(vec![Vec::new(); n]); // all empty
            variants.push(vec![b"x".to_vec(); n]); // none empty
            for v in &variants {
                let (offsets, _data) = arrow_layout(v);
                for want in [true, false] {
                    let (mut a, mut b) = (Vec::new(), Vec::new());
                    (scalar().str_empty)(&offsets, want, &mut a);
                    (fam.str_empty)(&offsets, want, &mut b);
                    assert_eq!(a, b, "{} str_empty n={n} want_empty={want}", fam.level);
                }
                // Offsets that do not start at 0 (a sliced Arrow array).
                if n > 1 {
                    let (mut a, mut b) = (Vec::new(), Vec::new());
                    (scalar().str_empty)(&offsets[1..], false, &mut a);
                    (fam.str_empty)(&offsets[1..], false, &mut b);
                    assert_eq!(a, b, "{} str_empty sliced n={n}", fam.level);
                }
            }
        }
    }
}

#[test]
fn contains_agrees() {
    let mut rng = Rng(3);
    for fam in families() {
        let needles: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"a".to_vec(),
            b"ab".to_vec(),
            b"aba".to_vec(),
            b"google".to_vec(),
            b"abcabcab".to_vec(),
            vec![b'a'; 33],
            (0..40u8).map(|i| b'a' + i % 3).collect(),
        ];
        let mut strs = random_strings(&mut rng, 2000);
        // Plant needles at the start, the end, and across 32-byte boundaries.
        for (i, s) in strs.iter_mut().enumerate() {
            let nd = &needles[i % needles.len()];
            match i % 5 {
                0 => s.splice(0..0, nd.iter().copied()).for_each(drop),
                1 => s.extend_from_slice(nd),
                2 if s.len() > 40 => s.splice(30..30, nd.iter().copied()).for_each(drop),
                _ => {}
            }
        }
        strs.push(b"goog".to_vec()); // shorter than the needle
        let (offsets, data) = arrow_layout(&strs);
        for nd in &needles {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            (scalar().contains)(&offsets, &data, nd, &mut a);
            (fam.contains)(&offsets, &data, nd, &mut b);
            assert_eq!(
                a,
                b,
                "{} contains {:?}",
                fam.level,
                String::from_utf8_lossy(nd)
            );
            let hits: u32 = a.iter().map(|w| w.count_ones()).sum();
            assert!(
                hits > 0,
                "planted needle {:?} found nowhere",
                String::from_utf8_lossy(nd)
            );
        }
        for n in lengths() {
            let (o, d) = arrow_layout(&strs[..n.min(strs.len())]);
            let (mut a, mut b) = (Vec::new(), Vec::new());
            (scalar().contains)(&o, &d, b"ab", &mut a);
            (fam.contains)(&o, &d, b"ab", &mut b);
            assert_eq!(a, b, "{} contains n={n}", fam.level);
        }
    }
}

/// The whole-column search (`first_last_rows`) at its edges, against the scalar kernel: a
/// needle whose pieces end one string and start the next (no match), sliced offsets not
/// starting at 0, empty strings, a bitmap appended after an earlier word, a match in the
/// last bytes, and inputs around one vector of starts (16 to 64 bytes, either side).
#[test]
fn contains_does_not_match_across_strings() {
    let needles: [&[u8]; 5] = [b"google", b"gg", b"g", b"ge", b"oog"];
    for fam in families() {
        for nd in needles {
            let strs: Vec<Vec<u8>> = (0..300)
                .map(|i| match i % 6 {
                    0 => b"xxgoo".to_vec(),
                    1 => b"glexx".to_vec(),
                    2 => Vec::new(),
                    3 => b"ag".to_vec(),
                    4 => [&b"zz"[..], nd, b"q"].concat(),
                    _ => (0..i % 70).map(|j| b"gole"[j % 4]).collect(),
                })
                .chain([[&b"ab"[..], nd].concat()])
                .collect();
            let (offsets, data) = arrow_layout(&strs);
            let n = strs.len();
            for (lo, hi) in [(0, n), (1, n), (7, 200), (3, 4), (5, 9), (0, 1), (0, 2), (6, 13), (6, 19), (n - 2, n), (n - 1, n)] {
                let o = &offsets[lo..=hi];
                let (mut a, mut b) = (vec![u64::MAX], vec![u64::MAX]);
                (scalar().contains)(o, &data, nd, &mut a);
                (fam.contains)(o, &data, nd, &mut b);
                assert_eq!(a, b, "{} contains {:?}, strings {lo}..{hi}", fam.level, String::from_utf8_lossy(nd));
            }
        }
        // "xxgoo" then "glexx", 100 times: the bytes hold "google" 100 times, no string does.
        let strs: Vec<Vec<u8>> = (0..200).map(|i| if i % 2 == 0 { b"xxgoo".to_vec() } else { b"glexx".to_vec() }).collect();
        let (offsets, data) = arrow_layout(&strs);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        (scalar().contains)(&offsets, &data, b"google", &mut a);
        (fam.contains)(&offsets, &data, b"google", &mut b);
        assert_eq!(a, vec![0; 4]);
        assert_eq!(b, a, "{} found a match across strings", fam.level);
    }
}

trait Gen: SelectInt + std::fmt::Debug + PartialEq {
    fn from_u64(x: u64) -> Self;
}
macro_rules! gen_int {
    ($($t:ty),*) => {$(
        impl Gen for $t {
            fn from_u64(x: u64) -> $t { x as $t }
        }
    )*};
}
gen_int!(i8, i16, i32, i64, u8, u16, u32, u64);

fn check_int<T: Gen>(fam: &Kernels, rng: &mut Rng, ty: &str) {
    let s: &IntKernels<T> = scalar().int::<T>();
    let f: &IntKernels<T> = fam.int::<T>();
    for n in lengths() {
        for pad in [0usize, 1] {
            // Small alphabet (many equal values) half of the time, full range otherwise.
            let small = rng.below(2) == 0;
            let mut v: Vec<T> = (0..n)
                .map(|_| T::from_u64(if small { rng.below(5) } else { rng.next() }))
                .collect();
            if n >= 2 {
                v[0] = T::MIN;
                v[n - 1] = T::MAX;
            }
            let buf = unaligned(&v, pad, T::MIN);
            let vals = &buf[pad..];
            let mut consts = vec![T::MIN, T::MAX, T::from_u64(0), T::from_u64(2)];
            if n > 0 {
                consts.push(vals[rng.below(n as u64) as usize]);
            }
            for c in consts {
                for op in CmpOp::ALL {
                    let (mut a, mut b) = (Vec::new(), Vec::new());
                    (s.cmp)(vals, op, c, &mut a);
                    (f.cmp)(vals, op, c, &mut b);
                    assert_eq!(a, b, "{} cmp {ty} n={n} pad={pad} {op:?} {c:?}", fam.level);
                }
            }
            let words = n.div_ceil(64);
            let sels: Vec<Option<Vec<u64>>> = vec![
                None,
                Some(vec![0; words]),
                Some(vec![u64::MAX; words]),
                Some((0..words).map(|_| rng.next()).collect()),
            ];
            for sel in &sels {
                let sel = sel.as_deref();
                assert_eq!(
                    (s.sum)(vals, sel),
                    (f.sum)(vals, sel),
                    "{} sum {ty} n={n}",
                    fam.level
                );
                assert_eq!(
                    (s.min)(vals, sel),
                    (f.min)(vals, sel),
                    "{} min {ty} n={n}",
                    fam.level
                );
                assert_eq!(
                    (s.max)(vals, sel),
                    (f.max)(vals, sel),
                    "{} max {ty} n={n}",
                    fam.level
                );
            }
        }
    }
    // Sums of extremes stay exact (no lane overflow).
    let big = vec![T::MAX; 5000];
    assert_eq!(
        (s.sum)(&big, None),
        (f.sum)(&big, None),
        "{} sum of MAX {ty}",
        fam.level
    );
    let small = vec![T::MIN; 5000];
    assert_eq!(
        (s.sum)(&small, None),
        (f.sum)(&small, None),
        "{} sum of MIN {ty}",
        fam.level
    );
}

#[test]
fn int_kernels_agree() {
    let mut rng = Rng(4);
    for fam in families() {
        check_int::<i8>(fam, &mut rng, "i8");
        check_int::<i16>(fam, &mut rng, "i16");
        check_int::<i32>(fam, &mut rng, "i32");
        check_int::<i64>(fam, &mut rng, "i64");
        check_int::<u8>(fam, &mut rng, "u8");
        check_int::<u16>(fam, &mut rng, "u16");
        check_int::<u32>(fam, &mut rng, "u32");
        check_int::<u64>(fam, &mut rng, "u64");
    }
}

#[test]
fn selection_and_partition_kernels_agree() {
    let mut rng = Rng(5);
    for fam in families() {
        for n in lengths() {
            // Garbage above `n` in the last word must be ignored.
            let words: Vec<u64> = (0..n.div_ceil(64) + 1).map(|_| rng.next()).collect();
            for w in [
                words.clone(),
                vec![0; words.len()],
                vec![u64::MAX; words.len()],
            ] {
                assert_eq!(
                    (scalar().count)(&w, n),
                    (fam.count)(&w, n),
                    "{} count n={n}",
                    fam.level
                );
                let (mut a, mut b) = (vec![9u32], vec![9u32]); // appends after existing content
                (scalar().bitmap_to_indices)(&w, n, &mut a);
                (fam.bitmap_to_indices)(&w, n, &mut b);
                assert_eq!(a, b, "{} bitmap_to_indices n={n}", fam.level);
            }
            let hashes: Vec<u64> = (0..n).map(|_| rng.next()).collect();
            for bits in 1..=16 {
                let (mut a, mut b) = (vec![0u16; n], vec![0u16; n]);
                (scalar().partition_ids)(&hashes, bits, &mut a);
                (fam.partition_ids)(&hashes, bits, &mut b);
                assert_eq!(a, b, "{} partition_ids n={n} bits={bits}", fam.level);
            }
        }
    }
}

#[test]
fn minute_of_hour_agrees() {
    let mut rng = Rng(6);
    for fam in families() {
        let mut ts: Vec<i64> = vec![
            0,
            -1,
            59,
            60,
            -60,
            -61,
            3599,
            3600,
            -3600,
            1_373_897_879,
            (1 << 46) - 1,
            -(1 << 46) + 1,
            1 << 46,
            -(1 << 46),
            i64::MAX,
            i64::MIN,
            i64::MAX - 59,
        ];
        for _ in 0..5000 {
            let t = match rng.below(3) {
                0 => 1_370_000_000 + rng.below(100_000_000) as i64, // 2013-ish
                1 => rng.next() as i64 >> rng.below(20),
                _ => (rng.below(1 << 20) as i64 - (1 << 19)) * 60 + rng.below(3) as i64 - 1,
            };
            ts.push(t);
        }
        for n in lengths().into_iter().chain([ts.len()]) {
            for pad in [0usize, 1] {
                let buf = unaligned(&ts[..n.min(ts.len())], pad, 0);
                let (mut a, mut b) = (Vec::new(), vec![7u8; 3]); // output is cleared first
                (scalar().minute_of_hour)(&buf[pad..], &mut a);
                (fam.minute_of_hour)(&buf[pad..], &mut b);
                assert_eq!(a, b, "{} minute_of_hour n={n} pad={pad}", fam.level);
            }
        }
    }
}

/// What a group reports at one offset of a control-byte array: the slots matching `tag`
/// (false positives dropped, as a probe's key compare drops them) and the empty slots, both
/// as slot indices below the group width.
struct GroupMatches {
    width: usize,
    tags: Vec<usize>,
    empties: Vec<usize>,
}

struct Probe<'a> {
    ctrl: &'a [u8],
    at: usize,
    tag: u8,
}

impl tessera_kernels::group::GroupTask for Probe<'_> {
    type Output = GroupMatches;
    fn run<G: tessera_kernels::group::Group>(self) -> GroupMatches {
        assert!(self.at + G::WIDTH <= self.ctrl.len());
        // SAFETY: G::WIDTH bytes from `at` are in the slice (asserted); `with_group` runs this
        // with the family's features.
        let g = unsafe { G::load(self.ctrl.as_ptr().add(self.at)) };
        let tags = unsafe { g.match_tag(self.tag) }.filter(|&i| self.ctrl[self.at + i] == self.tag).collect();
        let empties = unsafe { g.match_empty() }.collect();
        GroupMatches { width: G::WIDTH, tags, empties }
    }
}

/// The probe's control-byte compares: each family's group finds exactly the slots the
/// bytes say (every tag match, exactly the empties), at every offset of arrays with all,
/// none and random slots full, tags at the group edges, and the tag values 0 and 0x7f.
#[test]
fn group_probe_agrees() {
    use tessera_kernels::group::{EMPTY, MAX_WIDTH};
    let mut rng = Rng(13);
    let mut fams = families();
    fams.push(scalar());
    let mut arrays: Vec<Vec<u8>> = vec![vec![EMPTY; 3 * MAX_WIDTH], vec![0; 3 * MAX_WIDTH], vec![0x7f; 3 * MAX_WIDTH]];
    for fill in [1u64, 4, 8] {
        for _ in 0..40 {
            arrays.push(
                (0..3 * MAX_WIDTH)
                    .map(|_| if rng.below(8) < fill { (rng.below(4) as u8 * 0x25) & 0x7f } else { EMPTY })
                    .collect(),
            );
        }
    }
    for fam in fams {
        for ctrl in &arrays {
            for at in 0..=2 * MAX_WIDTH {
                for tag in [0u8, 0x25, 0x4a, 0x7f] {
                    let m = fam.with_group(Probe { ctrl, at, tag });
                    let want_tags: Vec<usize> = (0..m.width).filter(|&i| ctrl[at + i] == tag).collect();
                    let want_empty: Vec<usize> = (0..m.width).filter(|&i| ctrl[at + i] == EMPTY).collect();
                    assert_eq!(m.tags, want_tags, "{} tag {tag:#x} at {at}", fam.level);
                    assert_eq!(m.empties, want_empty, "{} empties at {at}", fam.level);
                }
            }
        }
    }
}
