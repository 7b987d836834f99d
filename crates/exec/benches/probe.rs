//! Criterion benchmarks of the group hash table's probe, per key layout, kernel family and
//! table size: ids `probe/<layout>/<family>/<groups>`, so runs on two machines (x86 and
//! Graviton) line up by name.
//!
//! Each case builds a table of `groups` distinct keys, then times the lookup of one batch of
//! 64K keys (a morsel) through the batched probe (`find_batch`, as the frozen table's probe
//! runs): 7 in 8 keys are random groups of the table (a hit: one key compare), 1 in 8 are
//! absent (a miss, ended by an empty slot). Sizes: 16K groups (the table in L2), 1M
//! (L3-sized on this machine's 32 MiB L3), 8M (DRAM).
//!
//! ```text
//! cargo bench -p tessera-exec --bench probe                   # everything
//! cargo bench -p tessera-exec --bench probe -- 'fixed128/'    # one layout
//! ```

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use tessera_exec::probe_bench::ProbeTable;
use tessera_kernels::{Kernels, SimdLevel};

const BATCH: usize = 1 << 16;
const GROUPS: [(usize, &str); 3] = [(1 << 14, "16K"), (1 << 20, "1M"), (1 << 23, "8M")];

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

fn families() -> Vec<&'static Kernels> {
    SimdLevel::available().into_iter().map(|l| Kernels::for_level(l).expect("available")).collect()
}

/// `groups` distinct keys from `make`, and a probe batch: 7 in 8 of them, 1 in 8 new.
fn inputs<K: Copy>(groups: usize, make: impl Fn(u64) -> K) -> (Vec<K>, Vec<K>) {
    let keys: Vec<K> = (0..groups as u64).map(&make).collect();
    let mut r = Rng(groups as u64);
    let probe = (0..BATCH)
        .map(|_| {
            let x = r.next();
            if x % 8 == 0 { make(groups as u64 + x % (1 << 40)) } else { keys[(x >> 3) as usize % groups] }
        })
        .collect();
    (keys, probe)
}

macro_rules! bench_layout {
    ($c:expr, $name:literal, $k:ty, $make:expr) => {{
        let mut g = $c.benchmark_group(concat!("probe/", $name));
        g.throughput(Throughput::Elements(BATCH as u64));
        g.sample_size(20);
        for (groups, label) in GROUPS {
            let (keys, probe) = inputs::<$k>(groups, $make);
            let hashes = ProbeTable::<$k>::hashes(&probe);
            let table = ProbeTable::<$k>::build(&keys);
            assert_eq!(table.groups(), groups);
            let hits = table.lookup(&probe, &hashes, Kernels::scalar());
            for fam in families() {
                assert_eq!(table.lookup(&probe, &hashes, fam), hits, "{} finds what scalar finds", fam.level);
                g.bench_with_input(BenchmarkId::new(fam.level.name(), label), &fam, |b, fam| {
                    b.iter(|| table.lookup(&probe, &hashes, fam))
                });
            }
        }
        g.finish();
    }};
}

fn probe(c: &mut Criterion) {
    bench_layout!(c, "fixed64", u64, |i: u64| i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    bench_layout!(c, "fixed128", u128, |i: u64| (i as u128) << 64 | i.wrapping_mul(31) as u128);
    // URL-like keys: a shared prefix, then the number (strings leaked for the bench's life).
    bench_layout!(c, "string", &'static [u8], |i: u64| -> &'static [u8] {
        Box::leak(format!("http://example.com/page/{i}").into_bytes().into_boxed_slice())
    });
}

criterion_group!(benches, probe);
criterion_main!(benches);
