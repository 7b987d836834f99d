//! Randomized differential test of hash GROUP BY against a naive `HashMap` aggregation:
//! random key types and counts, cardinalities from 1 to 1e6, 1..8 threads, with the
//! partitioned (two-level) path and the serialized key layout forced in some cases.

use std::collections::HashMap;
use std::sync::Arc;

use tessera::arrow::array::*;
use tessera::arrow::datatypes::*;
use tessera::{Database, Settings};

/// splitmix64: a tiny seeded generator so the test is reproducible.
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

#[derive(Debug, Clone, Copy)]
enum KeyType {
    I8,
    I16,
    I32,
    I64,
    U64,
    F64,
    Str,
}

const KEY_TYPES: [KeyType; 7] = [KeyType::I8, KeyType::I16, KeyType::I32, KeyType::I64, KeyType::U64, KeyType::F64, KeyType::Str];

/// A key column: Arrow array + the per-row text the naive side groups on.
fn key_column(t: KeyType, ids: &[u64]) -> (ArrayRef, DataType, Vec<String>) {
    // Map ids to values that exercise signs, extremes and -0.0/0.0.
    match t {
        KeyType::I8 => {
            let v: Vec<i8> = ids.iter().map(|&i| (i % 256) as u8 as i8).collect();
            let s = v.iter().map(|x| x.to_string()).collect();
            (Arc::new(Int8Array::from(v)), DataType::Int8, s)
        }
        KeyType::I16 => {
            let v: Vec<i16> = ids.iter().map(|&i| (i as i64 - 500) as i16).collect();
            let s = v.iter().map(|x| x.to_string()).collect();
            (Arc::new(Int16Array::from(v)), DataType::Int16, s)
        }
        KeyType::I32 => {
            let v: Vec<i32> = ids.iter().map(|&i| if i == 1 { i32::MIN } else { i as i32 * -7 }).collect();
            let s = v.iter().map(|x| x.to_string()).collect();
            (Arc::new(Int32Array::from(v)), DataType::Int32, s)
        }
        KeyType::I64 => {
            let v: Vec<i64> = ids.iter().map(|&i| if i == 2 { i64::MAX } else { (i as i64).wrapping_mul(0x1234_5678_9abc) }).collect();
            let s = v.iter().map(|x| x.to_string()).collect();
            (Arc::new(Int64Array::from(v)), DataType::Int64, s)
        }
        KeyType::U64 => {
            let v: Vec<u64> = ids.iter().map(|&i| u64::MAX - i).collect();
            let s = v.iter().map(|x| x.to_string()).collect();
            (Arc::new(UInt64Array::from(v)), DataType::UInt64, s)
        }
        KeyType::F64 => {
            let v: Vec<f64> = ids.iter().map(|&i| if i == 0 { -0.0 } else { i as f64 * 0.25 - 3.0 }).collect();
            let s = v.iter().map(|x| format!("{:?}", x + 0.0)).collect();
            (Arc::new(Float64Array::from(v)), DataType::Float64, s)
        }
        KeyType::Str => {
            let v: Vec<String> = ids
                .iter()
                .map(|&i| if i == 0 { String::new() } else { format!("s{}{}", i, "x".repeat((i % 40) as usize)) })
                .collect();
            let s = v.clone();
            (Arc::new(StringArray::from(v)), DataType::Utf8, s)
        }
    }
}

fn cell(a: &ArrayRef, i: usize) -> String {
    if a.is_null(i) {
        return "NULL".into();
    }
    match a.data_type() {
        DataType::Int8 => a.as_primitive::<Int8Type>().value(i).to_string(),
        DataType::Int16 => a.as_primitive::<Int16Type>().value(i).to_string(),
        DataType::Int32 => a.as_primitive::<Int32Type>().value(i).to_string(),
        DataType::Int64 => a.as_primitive::<Int64Type>().value(i).to_string(),
        DataType::UInt64 => a.as_primitive::<UInt64Type>().value(i).to_string(),
        DataType::Float64 => format!("{:?}", a.as_primitive::<Float64Type>().value(i)),
        DataType::Utf8 => a.as_string::<i32>().value(i).to_string(),
        other => panic!("unexpected {other}"),
    }
}

#[derive(Default, Clone, Copy, Debug, PartialEq)]
struct Naive {
    count: i64,
    sum: i64,
    min: i32,
    max: i32,
}

#[test]
fn group_by_matches_naive_hashmap() {
    let mut rng = Rng(20261130);
    let cards: [u64; 7] = [1, 2, 17, 1000, 30_000, 200_000, 1_000_000];
    for case in 0..28 {
        let rows = [0usize, 1, 1000, 50_000, 150_000][rng.below(5) as usize].max(if case < 3 { 0 } else { 1 });
        let card = cards[case % cards.len()];
        let nkeys = 1 + rng.below(3) as usize;
        let types: Vec<KeyType> = (0..nkeys).map(|_| KEY_TYPES[rng.below(7) as usize]).collect();
        let threads = 1 + rng.below(8) as usize;
        let forced_two_level = rng.below(2) == 0;
        let forced_serialized = rng.below(4) == 0;
        let chunk = 1 + rng.below(20_000) as usize;
        // A 64-group two-level threshold with 3 rows in 4 on 8 hot keys: the frozen
        // pre-aggregation table is probed and hit before rows are scattered.
        let small_threshold = !forced_two_level && rng.below(2) == 0;

        // One id per row and key; keys are functions of a shared group id so that the
        // number of groups is about `card` whatever the key count.
        let gids: Vec<u64> = (0..rows)
            .map(|_| if small_threshold && rng.below(4) != 0 { rng.below(card.min(8)) } else { rng.below(card) })
            .collect();
        let mut fields = Vec::new();
        let mut arrays = Vec::new();
        let mut texts = Vec::new();
        for (k, t) in types.iter().enumerate() {
            // With several keys the first repeats across groups (an eighth of the values),
            // so top-N ties on the count and the first key go to the later keys.
            let ids: Vec<u64> = if k == 0 && nkeys > 1 {
                gids.iter().map(|&g| g % (card / 8).max(1)).collect()
            } else {
                gids.iter().map(|&g| g.wrapping_mul(k as u64 * 2 + 1) % card.max(1)).collect()
            };
            let (a, dt, s) = key_column(*t, &ids);
            fields.push(Field::new(format!("k{k}"), dt, false));
            arrays.push(a);
            texts.push(s);
        }
        let vals: Vec<i32> = (0..rows).map(|_| rng.below(2001) as i32 - 1000).collect();
        fields.push(Field::new("v", DataType::Int32, false));
        arrays.push(Arc::new(Int32Array::from(vals.clone())));
        let schema = Arc::new(Schema::new(fields));
        let mut batches = Vec::new();
        let mut start = 0;
        while start < rows {
            let len = chunk.min(rows - start);
            let cols: Vec<ArrayRef> = arrays.iter().map(|a| a.slice(start, len)).collect();
            batches.push(RecordBatch::try_new(schema.clone(), cols).unwrap());
            start += len;
        }
        let db = Database::new();
        db.register_batches("t", schema, &batches).unwrap();

        let mut naive: HashMap<Vec<String>, Naive> = HashMap::new();
        for r in 0..rows {
            let key: Vec<String> = texts.iter().map(|t| t[r].clone()).collect();
            let e = naive.entry(key).or_insert(Naive { count: 0, sum: 0, min: i32::MAX, max: i32::MIN });
            e.count += 1;
            e.sum += vals[r] as i64;
            e.min = e.min.min(vals[r]);
            e.max = e.max.max(vals[r]);
        }

        let keys: Vec<String> = (0..nkeys).map(|k| format!("k{k}")).collect();
        let sql = format!(
            "SELECT {}, COUNT(*), SUM(v), MIN(v), MAX(v), AVG(v) FROM t GROUP BY {}",
            keys.join(", "),
            keys.join(", ")
        );
        let mut s = Settings::default();
        s.max_threads = threads;
        s.group_by_two_level_threshold = if forced_two_level {
            0
        } else if small_threshold {
            64
        } else {
            100_000
        };
        s.group_by_force_serialized = forced_serialized;
        // Automatic radix bits (8 at these sizes) or 256 to 1,024 partitions forced.
        let radix_bits = [0, 10, 9, 8][case % 4];
        s.group_by_radix_bits = radix_bits;
        let ctx = format!(
            "case {case}: rows={rows} card={card} types={types:?} threads={threads} two_level={forced_two_level} \
             serialized={forced_serialized} small_threshold={small_threshold} radix_bits={radix_bits}"
        );
        let (out, profile) = db.sql_profiled(&sql, Some(&s)).unwrap_or_else(|e| panic!("{ctx}: {e}"));
        let b = &out[0];
        assert_eq!(b.num_rows(), naive.len(), "{ctx}: group count");
        assert_eq!(profile.groups, naive.len(), "{ctx}");
        if forced_serialized {
            assert_eq!(profile.layout, Some("serialized"), "{ctx}");
        }
        if profile.radix_partitions > 0 {
            // A forced count is the one used; automatic keeps 256 at these sizes.
            assert_eq!(profile.radix_partitions, 1 << radix_bits.max(8), "{ctx}");
        }
        for r in 0..b.num_rows() {
            let key: Vec<String> = (0..nkeys).map(|k| cell(b.column(k), r)).collect();
            let want = naive.get(&key).unwrap_or_else(|| panic!("{ctx}: unexpected group {key:?}"));
            let got = Naive {
                count: b.column(nkeys).as_primitive::<Int64Type>().value(r),
                sum: b.column(nkeys + 1).as_primitive::<Int64Type>().value(r),
                min: b.column(nkeys + 2).as_primitive::<Int32Type>().value(r),
                max: b.column(nkeys + 3).as_primitive::<Int32Type>().value(r),
            };
            assert_eq!(&got, want, "{ctx}: group {key:?}");
            let avg = b.column(nkeys + 4).as_primitive::<Float64Type>().value(r);
            assert!((avg - want.sum as f64 / want.count as f64).abs() < 1e-9, "{ctx}: avg");
        }

        // Top-N with tie-breaking keys must be exact, in both directions. Reference: the
        // naive groups ordered by count, then every key by its column's natural order (the
        // keys make a group unique, so the answer is one list).
        let sort_k = |k: usize, a: &String, b: &String| match types[k] {
            KeyType::Str => a.cmp(b),
            KeyType::F64 => a.parse::<f64>().unwrap().total_cmp(&b.parse::<f64>().unwrap()),
            KeyType::U64 => a.parse::<u64>().unwrap().cmp(&b.parse::<u64>().unwrap()),
            _ => a.parse::<i64>().unwrap().cmp(&b.parse::<i64>().unwrap()),
        };
        let top_n = |descending: bool, offset: usize, limit: usize, what: &str| {
            // The count one way, every key the other way round.
            let (c_dir, k_dir) = if descending { ("DESC", "ASC") } else { ("ASC", "DESC") };
            let order: Vec<String> = keys.iter().map(|k| format!("{k} {k_dir}")).collect();
            let sql = format!(
                "SELECT {}, COUNT(*) AS c FROM t GROUP BY {} ORDER BY c {c_dir}, {} LIMIT {limit} OFFSET {offset}",
                keys.join(", "),
                keys.join(", "),
                order.join(", ")
            );
            let out = db.sql_with(&sql, &s).unwrap_or_else(|e| panic!("{ctx}: {e}"));
            let got: Vec<(i64, Vec<String>)> = (0..out[0].num_rows())
                .map(|r| {
                    let ks = (0..nkeys).map(|k| cell(out[0].column(k), r)).collect();
                    (out[0].column(nkeys).as_primitive::<Int64Type>().value(r), ks)
                })
                .collect();
            let mut reference: Vec<(i64, Vec<String>)> = naive.iter().map(|(k, v)| (v.count, k.clone())).collect();
            reference.sort_by(|a, b| {
                let mut o = a.0.cmp(&b.0);
                for k in 0..nkeys {
                    o = o.then_with(|| sort_k(k, &b.1[k], &a.1[k]));
                }
                if descending { o.reverse() } else { o }
            });
            let want: Vec<(i64, Vec<String>)> = reference.into_iter().skip(offset).take(limit).collect();
            assert_eq!(got, want, "{ctx}: {what}");
        };
        top_n(true, 2, 7, "top-N");
        top_n(false, 1, 5, "top-N ascending");
    }
}

#[test]
fn global_aggregate_over_no_rows_returns_one_row() {
    let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int32, false)]));
    let b = RecordBatch::try_new(schema.clone(), vec![Arc::new(Int32Array::from(vec![1, 2, 3]))]).unwrap();
    let db = Database::new();
    db.register_batches("t", schema, &[b]).unwrap();
    let out = db.sql("SELECT COUNT(*), SUM(v), MIN(v) FROM t WHERE v > 10").unwrap();
    assert_eq!(out[0].num_rows(), 1);
    assert_eq!(out[0].column(0).as_primitive::<Int64Type>().value(0), 0);
    assert!(out[0].column(1).is_null(0));
    assert!(out[0].column(2).is_null(0));
    let out = db.sql("SELECT COUNT(*), SUM(v), MAX(v) FROM t WHERE v >= 2").unwrap();
    assert_eq!(out[0].column(0).as_primitive::<Int64Type>().value(0), 2);
    assert_eq!(out[0].column(1).as_primitive::<Int64Type>().value(0), 5);
    assert_eq!(out[0].column(2).as_primitive::<Int32Type>().value(0), 3);
}

/// Top-N by COUNT over groups that all tie on the count and on the first key: the answer is
/// decided by the second key alone, whichever worker and partition holds each group (Q33's
/// shape: millions of groups with `COUNT(*) = 1`).
#[test]
fn top_n_by_count_breaks_ties_on_every_key() {
    let n: i64 = 200_000;
    // k1 scrambles the row number (7919 is prime to 8n, so no two rows share it) and has
    // both signs; every (k0, k1) pair is unique, so every group has COUNT(*) = 1.
    let k1: Vec<i64> = (0..n).map(|i| (i * 7919) % (8 * n) - 4 * n).collect();
    let schema = Arc::new(Schema::new(vec![Field::new("k0", DataType::Int32, false), Field::new("k1", DataType::Int64, false)]));
    let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(Int32Array::from(vec![5; n as usize])), Arc::new(Int64Array::from(k1.clone()))]).unwrap();
    let db = Database::new();
    db.register_batches("t", schema, &[batch]).unwrap();
    let mut sorted = k1.clone();
    sorted.sort_unstable();
    for threads in [1, 3] {
        let mut s = Settings::default();
        s.max_threads = threads;
        for (order, want) in [
            ("c DESC, k0, k1", sorted[..4].to_vec()),
            ("c DESC", sorted[..4].to_vec()),
            ("c DESC, k0 DESC, k1 DESC", sorted.iter().rev().take(4).copied().collect::<Vec<_>>()),
        ] {
            let sql = format!("SELECT k0, k1, COUNT(*) AS c FROM t GROUP BY k0, k1 ORDER BY {order} LIMIT 4");
            let out = db.sql_with(&sql, &s).unwrap();
            let got: Vec<i64> = out.iter().flat_map(|b| b.column(1).as_primitive::<Int64Type>().values().to_vec()).collect();
            assert_eq!(got, want, "{order}, {threads} threads");
        }
    }
}
