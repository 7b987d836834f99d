//! Round trip of every stored type through every codec, with and without the light
//! encodings, random data from a fixed seed (proptest); plus sort order and merges.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BinaryArray, Date32Array, Float32Array, Float64Array, Int8Array, Int16Array, Int32Array,
    Int64Array, RecordBatch, StringArray, TimestampSecondArray, UInt8Array, UInt16Array, UInt32Array, UInt64Array,
};
use arrow::compute::concat;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use tessera_storage::{Codec, Store, TableOptions};

/// SplitMix64: a tiny deterministic generator for the column contents.
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

fn all_types() -> Vec<DataType> {
    vec![
        DataType::Int8,
        DataType::Int16,
        DataType::Int32,
        DataType::Int64,
        DataType::UInt8,
        DataType::UInt16,
        DataType::UInt32,
        DataType::UInt64,
        DataType::Float32,
        DataType::Float64,
        DataType::Utf8,
        DataType::Binary,
        DataType::Date32,
        DataType::Timestamp(TimeUnit::Second, None),
    ]
}

/// A column of `n` values: `shape` 0 = full range, 1 = narrow range (frame of reference
/// pays), 2 = few distinct values (dictionary pays); `nulls` = every ~7th value NULL.
fn column(dt: &DataType, n: usize, shape: u8, nulls: bool, rng: &mut Rng) -> ArrayRef {
    let mut raw = |_: usize| -> Option<u64> {
        let v = rng.next();
        if nulls && v % 7 == 0 {
            return None;
        }
        Some(match shape {
            0 => v,
            1 => 1_000_000 + (v >> 40) % 5000,
            _ => (v >> 50) % 9,
        })
    };
    let vals: Vec<Option<u64>> = (0..n).map(&mut raw).collect();
    macro_rules! prim {
        ($arr:ty, $t:ty) => {
            Arc::new(<$arr>::from(vals.iter().map(|v| v.map(|x| x as $t)).collect::<Vec<_>>())) as ArrayRef
        };
    }
    match dt {
        DataType::Int8 => prim!(Int8Array, i8),
        DataType::Int16 => prim!(Int16Array, i16),
        DataType::Int32 => prim!(Int32Array, i32),
        DataType::Int64 => prim!(Int64Array, i64),
        DataType::UInt8 => prim!(UInt8Array, u8),
        DataType::UInt16 => prim!(UInt16Array, u16),
        DataType::UInt32 => prim!(UInt32Array, u32),
        DataType::UInt64 => prim!(UInt64Array, u64),
        DataType::Float32 => Arc::new(Float32Array::from(
            vals.iter().map(|v| v.map(|x| (x % 100_000) as f32 / 7.0)).collect::<Vec<_>>(),
        )),
        DataType::Float64 => Arc::new(Float64Array::from(
            vals.iter().map(|v| v.map(|x| x as f64 / 3.0)).collect::<Vec<_>>(),
        )),
        DataType::Utf8 => Arc::new(StringArray::from(
            vals.iter().map(|v| v.map(|x| format!("s{}é{}", x % 1000, "x".repeat((x % 13) as usize)))).collect::<Vec<_>>(),
        )),
        DataType::Binary => {
            let owned: Vec<Option<Vec<u8>>> = vals.iter().map(|v| v.map(|x| x.to_le_bytes()[..(x % 9) as usize].to_vec())).collect();
            Arc::new(BinaryArray::from(owned.iter().map(|v| v.as_deref()).collect::<Vec<_>>()))
        }
        DataType::Date32 => Arc::new(Date32Array::from(vals.iter().map(|v| v.map(|x| (x % 40_000) as i32)).collect::<Vec<_>>())),
        _ => Arc::new(TimestampSecondArray::from(vals.iter().map(|v| v.map(|x| (x >> 33) as i64)).collect::<Vec<_>>())),
    }
}

fn read_all(store: &Store, name: &str) -> Vec<ArrayRef> {
    let t = store.table(name).unwrap().snapshot().unwrap();
    let n = t.schema().fields().len();
    let cols = t.columns(&(0..n).collect::<Vec<_>>()).unwrap();
    cols.iter()
        .enumerate()
        .map(|(c, chunks)| {
            if chunks.is_empty() {
                arrow::array::new_empty_array(t.schema().field(c).data_type())
            } else {
                concat(&chunks.iter().map(|a| a.as_ref()).collect::<Vec<_>>()).unwrap()
            }
        })
        .collect()
}

fn codec_of(i: u8) -> Codec {
    match i % 3 {
        0 => Codec::None,
        1 => Codec::Lz4,
        _ => Codec::Zstd(1 + (i as i32 % 5)),
    }
}

proptest! {
    #![proptest_config(Config { cases: 24, rng_seed: RngSeed::Fixed(7), failure_persistence: None, ..Config::default() })]

    /// Every type, codec and encoding comes back bit for bit (values and NULLs), across
    /// several parts and a reopen.
    #[test]
    fn every_type_and_codec_round_trips(
        rows in prop::collection::vec(0usize..3000, 1..4),
        granule_rows in 1usize..700,
        codec in 0u8..6,
        encodings in any::<bool>(),
        shape in 0u8..3,
        nulls in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let types = all_types();
        let schema: SchemaRef = Arc::new(Schema::new(
            types.iter().enumerate().map(|(i, t)| Field::new(format!("c{i}"), t.clone(), nulls)).collect::<Vec<_>>(),
        ));
        let mut rng = Rng(seed);
        let batches: Vec<RecordBatch> = rows
            .iter()
            .map(|&n| {
                let cols = types.iter().map(|t| column(t, n, shape, nulls, &mut rng)).collect();
                RecordBatch::try_new(schema.clone(), cols).unwrap()
            })
            .collect();
        {
            let store = Store::open(dir.path()).unwrap();
            let opts = TableOptions { codec: codec_of(codec), granule_rows, encodings, ..TableOptions::default() };
            let t = store.create_table("t", schema.clone(), opts).unwrap();
            for b in &batches {
                t.insert(std::slice::from_ref(b)).unwrap();
            }
        }
        let store = Store::open(dir.path()).unwrap();
        let got = read_all(&store, "t");
        for (c, col) in got.iter().enumerate() {
            let want = concat(&batches.iter().map(|b| b.column(c).as_ref()).collect::<Vec<_>>()).unwrap();
            prop_assert_eq!(col.as_ref(), want.as_ref(), "column {} ({})", c, types[c]);
        }
    }
}

#[test]
fn rows_are_sorted_by_the_key_and_merges_keep_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let schema: SchemaRef = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int32, false),
        Field::new("s", DataType::Utf8, false),
        Field::new("v", DataType::Int64, false),
    ]));
    let store = Store::open(dir.path()).unwrap();
    let opts = TableOptions { order_by: vec!["k".into(), "s".into()], granule_rows: 100, ..TableOptions::default() };
    let t = store.create_table("t", schema.clone(), opts).unwrap();
    let mut rng = Rng(1);
    let mut all = Vec::new();
    for _ in 0..4 {
        let k: Vec<i32> = (0..1000).map(|_| (rng.next() % 50) as i32).collect();
        let s: Vec<String> = (0..1000).map(|_| format!("u{}", rng.next() % 20)).collect();
        let v: Vec<i64> = (0..1000).map(|_| rng.next() as i64).collect();
        for i in 0..1000 {
            all.push((k[i], s[i].clone(), v[i]));
        }
        let b = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(Int32Array::from(k)), Arc::new(StringArray::from(s)), Arc::new(Int64Array::from(v))],
        )
        .unwrap();
        t.insert(&[b]).unwrap();
    }
    assert_eq!(t.num_parts(), 4);
    let check = |store: &Store| {
        let cols = read_all(store, "t");
        let k = cols[0].as_any().downcast_ref::<Int32Array>().unwrap();
        let s = cols[1].as_any().downcast_ref::<StringArray>().unwrap();
        let v = cols[2].as_any().downcast_ref::<Int64Array>().unwrap();
        let mut got: Vec<(i32, String, i64)> = (0..k.len()).map(|i| (k.value(i), s.value(i).to_string(), v.value(i))).collect();
        let parts = store.table("t").unwrap().parts();
        // Sorted within each part.
        let mut start = 0;
        for p in &parts {
            let seg = &got[start..start + p.rows()];
            assert!(seg.windows(2).all(|w| (w[0].0, &w[0].1) <= (w[1].0, &w[1].1)));
            // The sparse primary index holds the first key of each granule.
            let pk = p.primary_index()[0].as_any().downcast_ref::<Int32Array>().unwrap();
            for g in 0..p.granules() {
                assert_eq!(pk.value(g), seg[g * 100].0);
            }
            start += p.rows();
        }
        got.sort();
        let mut want = all.clone();
        want.sort();
        assert_eq!(got, want);
    };
    check(&store);
    // A reader's snapshot taken before the merge still reads every row after the merge has
    // replaced (and deleted) the parts it maps.
    let before = t.snapshot().unwrap();
    assert!(t.optimize().unwrap());
    let old_rows: usize = before.columns(&[2]).unwrap()[0].iter().map(|a| a.len()).sum();
    assert_eq!(old_rows, 4000);
    assert_eq!(before.chunk_lens().len(), 4 * 2, "4 parts of 10 granules = 2 morsels each");
    assert_eq!(t.num_parts(), 1);
    assert!(!t.optimize().unwrap());
    check(&store);
    drop(store);
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.table("t").unwrap().num_parts(), 1);
    check(&store);
    // Only the merged part's directory is left.
    let dirs: Vec<String> = std::fs::read_dir(dir.path().join("t"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n != "table.json" && n != "manifest.txt")
        .collect();
    assert_eq!(dirs, vec!["0000000001_0000000004_1".to_string()]);
}
