//! The generator is a pure function of (rows, seed, row index).

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::Int64Type;
use rayon::prelude::*;
use tessera_datasets::hits;
use tessera_datasets::{GenOptions, HitsGenerator, generate_batch};

fn concat(batches: &[RecordBatch]) -> RecordBatch {
    arrow::compute::concat_batches(&hits::schema(), batches).expect("same schema")
}

#[test]
fn same_seed_same_batches_whatever_the_cut_and_threads() {
    let opts = GenOptions::new(200_000).with_seed(42);
    let a = generate_batch(&opts, 1_000, 30_000);
    let b = generate_batch(&opts, 1_000, 30_000);
    assert_eq!(a, b);
    assert_eq!(a.schema(), hits::schema());
    assert_eq!(a.num_rows(), 30_000);

    // The same rows cut differently and generated in parallel, in another thread pool.
    let generator = HitsGenerator::new(&opts);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();
    let parts: Vec<RecordBatch> = pool.install(|| {
        [(1_000u64, 7_777usize), (8_777, 1), (8_778, 22_222)]
            .par_iter()
            .map(|&(s, n)| generator.generate_batch(s, n))
            .collect()
    });
    assert_eq!(concat(&parts), a);
    // A slice of a batch equals the batch of the slice.
    assert_eq!(generate_batch(&opts, 11_000, 5), a.slice(10_000, 5));
}

#[test]
fn different_seeds_differ() {
    let a = generate_batch(&GenOptions::new(100_000).with_seed(1), 0, 10_000);
    let b = generate_batch(&GenOptions::new(100_000).with_seed(2), 0, 10_000);
    assert_ne!(a, b);
    for name in ["WatchID", "UserID", "URL", "EventTime", "ClientIP"] {
        let (x, y) = (
            a.column_by_name(name).unwrap(),
            b.column_by_name(name).unwrap(),
        );
        let same = (0..x.len())
            .filter(|&i| x.slice(i, 1) == y.slice(i, 1))
            .count();
        assert!(
            same < x.len() / 10,
            "{name}: {same} equal rows of {}",
            x.len()
        );
    }
}

#[test]
fn no_nulls_and_unique_watch_ids() {
    let b = generate_batch(&GenOptions::new(50_000), 0, 50_000);
    assert_eq!(b.num_columns(), 105);
    for (f, c) in b.schema().fields().iter().zip(b.columns()) {
        assert_eq!(c.null_count(), 0, "{}", f.name());
        assert_eq!(c.data_type(), f.data_type(), "{}", f.name());
    }
    let mut w: Vec<i64> = b.column(0).as_primitive::<Int64Type>().values().to_vec();
    w.sort_unstable();
    w.dedup();
    // 4 rows repeat the WatchID of the row before them (Q33).
    assert_eq!(w.len(), 50_000 - 4);
}
