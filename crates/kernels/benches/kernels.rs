//! Criterion micro-benchmarks: every kernel in every family this CPU runs, on shared data
//! generators. Benchmark ids are `kernel/family/size`, e.g. `filter_eq_i32/avx512/1M`, so
//! runs on two machines (x86 and Graviton) line up by name.
//!
//! ```text
//! cargo bench -p tessera-kernels                       # everything
//! cargo bench -p tessera-kernels -- 'hash_u128/'       # one kernel, every family
//! cargo bench -p tessera-kernels -- '/avx512/'         # one family
//! ```
//! Throughput is reported in elements (rows) per second.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use tessera_kernels::{CmpOp, Kernels, SimdLevel};

/// Rows per benchmark input: 1M (a partition-sized batch, past L2) and 64K (one morsel).
const SIZES: [(usize, &str); 2] = [(1 << 16, "64K"), (1 << 20, "1M")];

/// splitmix64, fixed seed: the same inputs on every machine.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

mod data {
    use super::Rng;

    pub(crate) fn u64s(n: usize) -> Vec<u64> {
        let mut r = Rng(1);
        (0..n).map(|_| r.next()).collect()
    }
    pub(crate) fn u128s(n: usize) -> Vec<u128> {
        let mut r = Rng(2);
        (0..n).map(|_| (r.next() as u128) << 64 | r.next() as u128).collect()
    }
    /// Values 0..100: `= 42` selects ~1%, `< 50` ~50%.
    pub(crate) fn small_ints<T: TryFrom<u64>>(n: usize) -> Vec<T> {
        let mut r = Rng(3);
        (0..n).map(|_| T::try_from(r.next() % 100).ok().expect("fits")).collect()
    }
    /// Timestamps in July 2013, like hits.EventTime.
    pub(crate) fn timestamps(n: usize) -> Vec<i64> {
        let mut r = Rng(4);
        (0..n).map(|_| 1_372_636_800 + (r.next() % (31 * 86_400)) as i64).collect()
    }
    /// URL-like strings (~60-120 bytes, `http://` prefix), ~2% containing "google", or
    /// short phrases with 87% empty (like hits.SearchPhrase) when `short`.
    pub(crate) fn strings(n: usize, short: bool) -> (Vec<i32>, Vec<u8>) {
        let mut r = Rng(if short { 5 } else { 6 });
        let mut offsets = vec![0i32];
        let mut data = Vec::new();
        for _ in 0..n {
            if short {
                if r.next() % 100 < 87 {
                    offsets.push(data.len() as i32);
                    continue;
                }
                let len = 5 + r.next() % 30;
                data.extend((0..len).map(|_| b'a' + (r.next() % 26) as u8));
            } else {
                data.extend_from_slice(b"http://");
                let len = 50 + r.next() % 70;
                let plant = r.next() % 50 == 0;
                for i in 0..len {
                    if plant && i == len / 2 {
                        data.extend_from_slice(b"google");
                    }
                    data.push(b'a' + (r.next() % 26) as u8);
                }
            }
            offsets.push(data.len() as i32);
        }
        (offsets, data)
    }
    pub(crate) fn views<'a>(offsets: &[i32], data: &'a [u8]) -> Vec<&'a [u8]> {
        offsets.windows(2).map(|w| &data[w[0] as usize..w[1] as usize]).collect()
    }
}

fn families() -> Vec<&'static Kernels> {
    SimdLevel::available().into_iter().map(|l| Kernels::for_level(l).expect("available")).collect()
}

fn bench_hashes(c: &mut Criterion) {
    for (n, label) in SIZES {
        let k64 = data::u64s(n);
        let k128 = data::u128s(n);
        let (uo, ud) = data::strings(n, false);
        let urls = data::views(&uo, &ud);
        let (so, sd) = data::strings(n, true);
        let phrases = data::views(&so, &sd);
        let mut out = vec![0u64; n];
        for k in families() {
            let fam = k.level.name();
            let mut g = c.benchmark_group("hash");
            g.throughput(Throughput::Elements(n as u64));
            g.bench_function(BenchmarkId::new(format!("hash_u64/{fam}"), label), |b| b.iter(|| (k.hash_u64)(black_box(&k64), &mut out)));
            g.bench_function(BenchmarkId::new(format!("hash_u128/{fam}"), label), |b| b.iter(|| (k.hash_u128)(black_box(&k128), &mut out)));
            g.bench_function(BenchmarkId::new(format!("hash_str_url/{fam}"), label), |b| b.iter(|| (k.hash_strs)(black_box(&urls), &mut out)));
            g.bench_function(BenchmarkId::new(format!("hash_str_phrase/{fam}"), label), |b| b.iter(|| (k.hash_strs)(black_box(&phrases), &mut out)));
            g.finish();
        }
    }
}

fn bench_filters(c: &mut Criterion) {
    for (n, label) in SIZES {
        let i8s: Vec<i8> = data::small_ints(n);
        let i16s: Vec<i16> = data::small_ints(n);
        let i32s: Vec<i32> = data::small_ints(n);
        let i64s: Vec<i64> = data::small_ints(n);
        let u64s: Vec<u64> = data::small_ints(n);
        let (uo, ud) = data::strings(n, false);
        let (so, _) = data::strings(n, true);
        let mut out = Vec::with_capacity(n / 64 + 1);
        for k in families() {
            let fam = k.level.name();
            let mut g = c.benchmark_group("filter");
            g.throughput(Throughput::Elements(n as u64));
            macro_rules! cmp {
                ($name:literal, $v:expr, $t:ident, $op:expr, $c:expr) => {
                    g.bench_function(BenchmarkId::new(format!("{}/{fam}", $name), label), |b| {
                        b.iter(|| {
                            out.clear();
                            (k.$t.cmp)(black_box(&$v), $op, $c, &mut out)
                        })
                    });
                };
            }
            cmp!("filter_eq_i8", i8s, i8, CmpOp::Eq, 42);
            cmp!("filter_eq_i16", i16s, i16, CmpOp::Eq, 42);
            cmp!("filter_eq_i32", i32s, i32, CmpOp::Eq, 42);
            cmp!("filter_lt_i32", i32s, i32, CmpOp::Lt, 50);
            cmp!("filter_eq_i64", i64s, i64, CmpOp::Eq, 42);
            cmp!("filter_ge_u64", u64s, u64, CmpOp::GtEq, 50);
            g.bench_function(BenchmarkId::new(format!("filter_str_not_empty/{fam}"), label), |b| {
                b.iter(|| {
                    out.clear();
                    (k.str_empty)(black_box(&so), false, &mut out)
                })
            });
            g.bench_function(BenchmarkId::new(format!("like_contains_google/{fam}"), label), |b| {
                b.iter(|| {
                    out.clear();
                    (k.contains)(black_box(&uo), &ud, b"google", &mut out)
                })
            });
            g.finish();
        }
    }
}

fn bench_aggregates_and_partitions(c: &mut Criterion) {
    for (n, label) in SIZES {
        let i64s: Vec<i64> = data::u64s(n).into_iter().map(|x| x as i64 >> 8).collect();
        let i32s: Vec<i32> = data::small_ints(n);
        let u8s: Vec<u8> = data::small_ints(n);
        let half: Vec<u64> = data::u64s(n.div_ceil(64));
        let hashes = data::u64s(n);
        let ts = data::timestamps(n);
        let mut pids = vec![0u16; n];
        let mut idx = Vec::with_capacity(n);
        let mut mins = Vec::with_capacity(n);
        for k in families() {
            let fam = k.level.name();
            let mut g = c.benchmark_group("agg");
            g.throughput(Throughput::Elements(n as u64));
            g.bench_function(BenchmarkId::new(format!("sum_i64/{fam}"), label), |b| b.iter(|| (k.i64.sum)(black_box(&i64s), None)));
            g.bench_function(BenchmarkId::new(format!("sum_i64_sel50/{fam}"), label), |b| {
                b.iter(|| (k.i64.sum)(black_box(&i64s), Some(&half)))
            });
            g.bench_function(BenchmarkId::new(format!("sum_u8/{fam}"), label), |b| b.iter(|| (k.u8.sum)(black_box(&u8s), None)));
            g.bench_function(BenchmarkId::new(format!("min_i32/{fam}"), label), |b| b.iter(|| (k.i32.min)(black_box(&i32s), None)));
            g.bench_function(BenchmarkId::new(format!("max_i64/{fam}"), label), |b| b.iter(|| (k.i64.max)(black_box(&i64s), None)));
            g.bench_function(BenchmarkId::new(format!("count_sel/{fam}"), label), |b| b.iter(|| (k.count)(black_box(&half), n)));
            g.bench_function(BenchmarkId::new(format!("bitmap_to_indices_50pct/{fam}"), label), |b| {
                b.iter(|| {
                    idx.clear();
                    (k.bitmap_to_indices)(black_box(&half), n, &mut idx)
                })
            });
            g.bench_function(BenchmarkId::new(format!("partition_ids_8bit/{fam}"), label), |b| {
                b.iter(|| (k.partition_ids)(black_box(&hashes), 8, &mut pids))
            });
            g.bench_function(BenchmarkId::new(format!("minute_of_hour/{fam}"), label), |b| {
                b.iter(|| (k.minute_of_hour)(black_box(&ts), &mut mins))
            });
            g.finish();
        }
    }
}

criterion_group! {
    name = benches;
    // Short runs: ~40 kernels x families x 2 sizes; medians are stable at this length here.
    config = Criterion::default().sample_size(20).warm_up_time(std::time::Duration::from_millis(300)).measurement_time(std::time::Duration::from_secs(1));
    targets = bench_hashes, bench_filters, bench_aggregates_and_partitions
}
criterion_main!(benches);
