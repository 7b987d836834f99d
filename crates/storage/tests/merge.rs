//! Streaming inserts and merges: chunked inserts are sorted stably, OPTIMIZE's k-way merge
//! of many parts with equal keys across parts equals a stable sort of all rows (part order,
//! then row order), with and without a sort key, on granules and blocks of odd sizes.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::compute::concat;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use tessera_storage::{Store, TableOptions};

/// SplitMix64.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

type Row = (Option<i32>, Option<String>, i64);

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int32, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("seq", DataType::Int64, false),
    ]))
}

/// `n` rows with few distinct keys (and NULLs), `seq` numbering rows from `first`.
fn batch(rng: &mut Rng, n: usize, first: i64) -> (RecordBatch, Vec<Row>) {
    let rows: Vec<Row> = (0..n)
        .map(|i| {
            let v = rng.next();
            let k = (v % 11 != 0).then_some((v % 5) as i32);
            let s = (v % 13 != 0).then(|| format!("s{}", (v >> 20) % 3));
            (k, s, first + i as i64)
        })
        .collect();
    let b = RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int32Array::from(rows.iter().map(|r| r.0).collect::<Vec<_>>())),
            Arc::new(StringArray::from(rows.iter().map(|r| r.1.clone()).collect::<Vec<_>>())),
            Arc::new(Int64Array::from(rows.iter().map(|r| r.2).collect::<Vec<_>>())),
        ],
    )
    .unwrap();
    (b, rows)
}

/// Every row of the table in table order (parts in order, rows in part order).
fn table_rows(store: &Store) -> Vec<Row> {
    let t = store.table("t").unwrap().snapshot().unwrap();
    let cols = t.columns(&[0, 1, 2]).unwrap();
    let cat = |c: usize| concat(&cols[c].iter().map(|a| a.as_ref()).collect::<Vec<_>>()).unwrap();
    let (k, s, q) = (cat(0), cat(1), cat(2));
    let k = k.as_any().downcast_ref::<Int32Array>().unwrap();
    let s = s.as_any().downcast_ref::<StringArray>().unwrap();
    let q = q.as_any().downcast_ref::<Int64Array>().unwrap();
    (0..k.len())
        .map(|i| (k.is_valid(i).then(|| k.value(i)), s.is_valid(i).then(|| s.value(i).to_string()), q.value(i)))
        .collect()
}

/// Arrow's row-format order of the key (k, s): NULLs first, then ascending.
fn key(r: &Row) -> (Option<i32>, Option<String>) {
    (r.0, r.1.clone())
}

fn run(order_by: &[&str], granule_rows: usize) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let opts = TableOptions {
        order_by: order_by.iter().map(|s| s.to_string()).collect(),
        granule_rows,
        ..TableOptions::default()
    };
    let t = store.create_table("t", schema(), opts).unwrap();
    let mut rng = Rng(granule_rows as u64);
    let mut inserted: Vec<Row> = Vec::new();
    // Part sizes: one row, exact granules and morsels, odd sizes; several batches per insert
    // (chunked input) for some.
    let sizes: [&[usize]; 9] = [&[1], &[granule_rows], &[granule_rows * 8], &[377, 5], &[1000], &[2, 3, 4], &[granule_rows * 8 + 1], &[640, 641], &[13]];
    for chunks in sizes {
        let mut batches = Vec::new();
        let mut expect_part = Vec::new();
        for &n in chunks {
            let (b, rows) = batch(&mut rng, n, inserted.len() as i64 + expect_part.len() as i64);
            batches.push(b);
            expect_part.extend(rows);
        }
        t.insert(&batches).unwrap();
        if !order_by.is_empty() {
            expect_part.sort_by_key(key); // stable
        }
        inserted.extend(expect_part);
    }
    assert_eq!(t.num_parts(), sizes.len());
    // Before the merge: each part sorted stably, parts in insert order.
    assert_eq!(table_rows(&store), inserted);
    assert!(t.optimize().unwrap());
    assert_eq!(t.num_parts(), 1);
    let mut want = inserted.clone();
    if !order_by.is_empty() {
        want.sort_by_key(key); // stable: part order, then row order
    }
    let got = table_rows(&store);
    assert_eq!(got.len(), want.len());
    assert_eq!(got, want);
    // The sparse primary index of the merged part holds each granule's first key.
    let p = &t.parts()[0];
    if !order_by.is_empty() {
        let pk = p.primary_index()[0].as_any().downcast_ref::<Int32Array>().unwrap();
        for g in 0..p.granules() {
            assert_eq!(pk.is_valid(g).then(|| pk.value(g)), want[g * granule_rows].0, "granule {g}");
        }
    }
    // Reopened from disk, same rows.
    drop(store);
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(table_rows(&store), want);
}

#[test]
fn merge_of_many_parts_with_equal_keys_is_a_stable_sort() {
    for gr in [1, 7, 64, 8192] {
        run(&["k", "s"], gr);
    }
}

#[test]
fn merge_without_a_sort_key_concatenates_parts_in_order() {
    run(&[], 5);
}

#[test]
fn chunked_insert_with_differently_cut_columns_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let t = store.create_table("t", schema(), TableOptions::default()).unwrap();
    let (b, _) = batch(&mut Rng(1), 10, 0);
    let cols: Vec<Vec<ArrayRef>> = vec![
        vec![b.column(0).slice(0, 4), b.column(0).slice(4, 6)],
        vec![b.column(1).clone()],
        vec![b.column(2).slice(0, 4), b.column(2).slice(4, 6)],
    ];
    let e = t.insert_chunks(&cols, &|_| {}).unwrap_err();
    assert!(matches!(e, tessera_common::Error::InvalidArgument(_)), "{e}");
    assert_eq!(t.num_parts(), 0);
    let left: Vec<_> = std::fs::read_dir(dir.path().join("t")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), 2, "only table.json and the manifest: {left:?}");
}
