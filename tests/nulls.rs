//! NULL handling end to end: SQL three-valued logic in WHERE, NULL-skipping aggregates,
//! NULL group keys, against a naive computation over the same rows.

use std::collections::HashMap;
use std::sync::Arc;

use tessera::arrow::array::*;
use tessera::arrow::datatypes::*;
use tessera::Database;

fn table() -> (Database, Vec<Option<i32>>, Vec<Option<String>>) {
    let n = 30_000;
    let v: Vec<Option<i32>> = (0..n).map(|i| if i % 5 == 0 { None } else { Some((i * 7919 % 1000) as i32) }).collect();
    let s: Vec<Option<String>> = (0..n).map(|i| if i % 3 == 0 { None } else { Some(format!("x{}", i % 4)) }).collect();
    let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int32, true), Field::new("s", DataType::Utf8, true)]));
    let mut batches = Vec::new();
    for start in (0..n).step_by(7000) {
        let end = (start + 7000).min(n);
        batches.push(
            RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(Int32Array::from(v[start..end].to_vec())),
                    Arc::new(StringArray::from(s[start..end].to_vec())),
                ],
            )
            .unwrap(),
        );
    }
    let db = Database::new();
    db.register_batches("n", schema, &batches).unwrap();
    (db, v, s)
}

/// Runs `sql`, whose first output column is a string GROUP BY key, and calls `check` with
/// each row's key, batch and row index; returns the number of rows.
fn for_each_group(db: &Database, sql: &str, mut check: impl FnMut(Option<String>, &RecordBatch, usize)) -> usize {
    let out = db.sql(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let mut seen = 0;
    for b in &out {
        let keys = b.column(0).as_string::<i32>();
        for r in 0..b.num_rows() {
            check(keys.is_valid(r).then(|| keys.value(r).to_string()), b, r);
            seen += 1;
        }
    }
    seen
}

fn count(db: &Database, sql: &str) -> i64 {
    db.sql(sql).unwrap()[0].column(0).as_primitive::<Int64Type>().value(0)
}

#[test]
fn where_uses_three_valued_logic() {
    let (db, v, s) = table();
    // Kleene logic on Option<bool>.
    let gt = |x: &Option<i32>| x.map(|x| x > 500);
    let is_x1 = |x: &Option<String>| x.as_ref().map(|x| x == "x1");
    let not = |a: Option<bool>| a.map(|a| !a);
    let and = |a: Option<bool>, b: Option<bool>| match (a, b) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    };
    let or = |a: Option<bool>, b: Option<bool>| match (a, b) {
        (Some(true), _) | (_, Some(true)) => Some(true),
        (Some(false), Some(false)) => Some(false),
        _ => None,
    };
    let naive = |f: &dyn Fn(usize) -> Option<bool>| (0..v.len()).filter(|&i| f(i) == Some(true)).count() as i64;
    assert_eq!(count(&db, "SELECT COUNT(*) FROM n WHERE v > 500"), naive(&|i| gt(&v[i])));
    assert_eq!(count(&db, "SELECT COUNT(*) FROM n WHERE NOT (v > 500)"), naive(&|i| not(gt(&v[i]))));
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM n WHERE NOT (v > 500 AND s = 'x1')"),
        naive(&|i| not(and(gt(&v[i]), is_x1(&s[i]))))
    );
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM n WHERE NOT (v > 500 OR s = 'x1')"),
        naive(&|i| not(or(gt(&v[i]), is_x1(&s[i]))))
    );
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM n WHERE v > 500 OR NOT (s = 'x1')"),
        naive(&|i| or(gt(&v[i]), not(is_x1(&s[i]))))
    );
}

#[test]
fn aggregates_skip_nulls_and_null_keys_group() {
    let (db, v, s) = table();
    let out = db.sql("SELECT s, COUNT(*), COUNT(v), SUM(v), MIN(v) FROM n GROUP BY s").unwrap();
    let b = &out[0];
    let mut naive: HashMap<Option<String>, (i64, i64, i64, i32)> = HashMap::new();
    for (x, k) in v.iter().zip(&s) {
        let e = naive.entry(k.clone()).or_insert((0, 0, 0, i32::MAX));
        e.0 += 1;
        if let Some(x) = x {
            e.1 += 1;
            e.2 += *x as i64;
            e.3 = e.3.min(*x);
        }
    }
    assert_eq!(b.num_rows(), naive.len(), "NULL is one group");
    let keys = b.column(0).as_string::<i32>();
    for r in 0..b.num_rows() {
        let k = keys.is_valid(r).then(|| keys.value(r).to_string());
        let want = naive[&k];
        let got = (
            b.column(1).as_primitive::<Int64Type>().value(r),
            b.column(2).as_primitive::<Int64Type>().value(r),
            b.column(3).as_primitive::<Int64Type>().value(r),
            b.column(4).as_primitive::<Int32Type>().value(r),
        );
        assert_eq!(got, want, "group {k:?}");
    }
}

/// MIN/MAX of strings and COUNT(DISTINCT) skip NULLs (a group of only NULLs gets NULL and
/// 0), per group and through the two-level path; HAVING keeps only the groups where its
/// condition is TRUE (NULL is not).
#[test]
fn string_min_max_count_distinct_and_having_with_nulls() {
    let (db, v, s) = table();
    // Key: v % 7 (NULL for NULL v); group 3 keeps only its rows with NULL strings.
    type Acc = (Option<String>, Option<String>, std::collections::HashSet<String>, i64);
    let mut naive: HashMap<Option<i32>, Acc> = HashMap::new();
    for (x, t) in v.iter().zip(&s) {
        let k = x.map(|x| x % 7);
        if !(t.is_none() || k.is_some_and(|k| k != 3)) {
            continue;
        }
        let e = naive.entry(k).or_insert((None, None, Default::default(), 0));
        e.3 += 1;
        if let Some(t) = t {
            e.0 = Some(e.0.take().map_or(t.clone(), |m: String| m.min(t.clone())));
            e.1 = Some(e.1.take().map_or(t.clone(), |m: String| m.max(t.clone())));
            e.2.insert(t.clone());
        }
    }
    assert!(naive[&Some(3)].1.is_none(), "a group of only NULL strings");
    let mut counts: Vec<i64> = naive.values().map(|e| e.3).collect();
    counts.sort();
    let cut = counts[counts.len() / 2];
    for settings in ["", " SETTINGS group_by_two_level_threshold = 0, max_threads = 3"] {
        let sql = format!(
            "SELECT v % 7 AS k, MIN(s), MAX(s), COUNT(DISTINCT s), COUNT(*) FROM n WHERE s IS NULL OR v % 7 <> 3 \
             GROUP BY k HAVING MAX(s) IS NULL OR COUNT(*) > {cut}{settings}"
        );
        let out = db.sql(&sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        let mut got = HashMap::new();
        for b in &out {
            for r in 0..b.num_rows() {
                let k = b.column(0).as_primitive::<Int64Type>();
                let k = k.is_valid(r).then(|| k.value(r) as i32);
                let st = |c: usize| {
                    let a = b.column(c).as_string::<i32>();
                    a.is_valid(r).then(|| a.value(r).to_string())
                };
                let n = |c: usize| b.column(c).as_primitive::<Int64Type>().value(r);
                got.insert(k, (st(1), st(2), n(3), n(4)));
            }
        }
        let want: HashMap<_, _> = naive
            .iter()
            .filter(|(_, e)| e.1.is_none() || e.3 > cut)
            .map(|(k, e)| (*k, (e.0.clone(), e.1.clone(), e.2.len() as i64, e.3)))
            .collect();
        assert!(!want.is_empty() && want.len() < naive.len(), "the HAVING test keeps some groups and drops others");
        assert_eq!(got, want, "{sql}");
    }
}

/// Global COUNT(DISTINCT x) (run as a GROUP BY on x, counting non-NULL groups) skips NULLs,
/// honours WHERE, projections over it, HAVING and LIMIT, and counts 0 on no rows; single-
/// and two-level, numbers, strings and expressions.
#[test]
fn global_count_distinct_skips_nulls() {
    let (db, v, s) = table();
    let distinct = |f: &dyn Fn(usize) -> Option<String>| {
        (0..v.len()).filter_map(f).collect::<std::collections::HashSet<_>>().len() as i64
    };
    let dv = distinct(&|i| v[i].map(|x| x.to_string()));
    let ds = distinct(&|i| s[i].clone());
    let dv_where = distinct(&|i| v[i].filter(|&x| x > 500).map(|x| x.to_string()));
    let dmod = distinct(&|i| v[i].map(|x| (x % 13).to_string()));
    assert!(dv > 100 && ds == 4 && dmod == 13);
    for settings in ["", " SETTINGS group_by_two_level_threshold = 0, max_threads = 3", " SETTINGS max_threads = 1"] {
        let q = |sql: &str| format!("{sql}{settings}");
        assert_eq!(count(&db, &q("SELECT COUNT(DISTINCT v) FROM n")), dv);
        assert_eq!(count(&db, &q("SELECT uniqExact(s) FROM n")), ds);
        assert_eq!(count(&db, &q("SELECT COUNT(DISTINCT v) FROM n WHERE v > 500")), dv_where);
        assert_eq!(count(&db, &q("SELECT COUNT(DISTINCT v % 13) FROM n")), dmod);
        assert_eq!(count(&db, &q("SELECT COUNT(DISTINCT s) FROM n WHERE v < 0")), 0);
        // Strings are counted by their 128-bit hashes: many values, NULLs, empty strings
        // (v % 13 = 0 gives ''), a selection.
        assert_eq!(count(&db, &q("SELECT COUNT(DISTINCT toString(v)) FROM n")), dv);
        assert_eq!(count(&db, &q("SELECT COUNT(DISTINCT toString(v)) FROM n WHERE v > 500")), dv_where);
        let with_empty = "SELECT COUNT(DISTINCT CASE WHEN v % 13 = 0 THEN '' ELSE toString(v % 13) END) FROM n";
        assert_eq!(count(&db, &q(with_empty)), dmod);
        let out = db.sql(&q("SELECT COUNT(DISTINCT v) * 2 AS d2, COUNT(DISTINCT v) AS d FROM n")).unwrap();
        assert_eq!(out[0].column(0).as_primitive::<Int64Type>().value(0), 2 * dv);
        assert_eq!(out[0].column(1).as_primitive::<Int64Type>().value(0), dv);
        let rows = |sql: &str| db.sql(&q(sql)).unwrap().iter().map(|b| b.num_rows()).sum::<usize>();
        assert_eq!(rows("SELECT COUNT(DISTINCT s) AS d FROM n HAVING d > 4"), 0);
        assert_eq!(rows("SELECT COUNT(DISTINCT s) AS d FROM n HAVING d = 4"), 1);
        assert_eq!(rows("SELECT COUNT(DISTINCT s) FROM n LIMIT 0"), 0);
    }
}

#[test]
fn between_and_select_distinct_with_nulls() {
    let (db, v, s) = table();
    let naive = |f: &dyn Fn(usize) -> Option<bool>| (0..v.len()).filter(|&i| f(i) == Some(true)).count() as i64;
    let between = |i: usize| v[i].map(|x| (100..=300).contains(&x));
    assert_eq!(count(&db, "SELECT COUNT(*) FROM n WHERE v BETWEEN 100 AND 300"), naive(&between));
    // NOT BETWEEN of NULL is NULL: those rows are in neither answer.
    assert_eq!(count(&db, "SELECT COUNT(*) FROM n WHERE v NOT BETWEEN 100 AND 300"), naive(&|i| between(i).map(|b| !b)));
    assert_eq!(count(&db, "SELECT COUNT(*) FROM n WHERE v BETWEEN 300 AND 100"), 0);
    let s_between = |i: usize| s[i].as_ref().map(|x| x.as_str() >= "x1" && x.as_str() <= "x2");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM n WHERE s BETWEEN 'x1' AND 'x2'"), naive(&s_between));
    // A constant the comparison kernels do not take (a fraction on an integer column).
    assert_eq!(count(&db, "SELECT COUNT(*) FROM n WHERE v BETWEEN 99.5 AND 300.5"), naive(&between));

    // SELECT DISTINCT = GROUP BY the select list: NULL is one value, ORDER BY and LIMIT apply.
    let strings = |sql: &str| -> Vec<Option<String>> {
        let out = db.sql(sql).unwrap();
        out.iter().flat_map(|b| b.column(0).as_string::<i32>().iter().map(|x| x.map(str::to_string)).collect::<Vec<_>>()).collect()
    };
    let set: std::collections::BTreeSet<Option<String>> = s.iter().filter(|x| x.is_some()).cloned().collect();
    let mut want: Vec<Option<String>> = set.into_iter().collect();
    want.push(None);
    assert_eq!(strings("SELECT DISTINCT s FROM n ORDER BY s NULLS LAST"), want);
    assert_eq!(strings("SELECT DISTINCT s FROM n ORDER BY s NULLS LAST LIMIT 2"), want[..2].to_vec());
    let pairs = db.sql("SELECT DISTINCT s, v FROM n WHERE v BETWEEN 0 AND 50").unwrap();
    let got: usize = pairs.iter().map(|b| b.num_rows()).sum();
    let want: std::collections::HashSet<(Option<String>, i32)> =
        (0..v.len()).filter(|&i| v[i].is_some_and(|x| x <= 50)).map(|i| (s[i].clone(), v[i].unwrap())).collect();
    assert_eq!(got, want.len());
    assert!(count(&db, "SELECT COUNT(*) FROM n WHERE v BETWEEN 0 AND 50") > want.len() as i64);
    for sql in ["SELECT DISTINCT COUNT(*) FROM n", "SELECT DISTINCT s FROM n GROUP BY s", "SELECT DISTINCT ON (s) s FROM n"] {
        assert!(matches!(db.sql(sql), Err(tessera::Error::NotImplemented(_))), "{sql}");
    }
}

/// ORDER BY an expression the DISTINCT list does not hold is `NotImplemented` (ClickHouse
/// runs DISTINCT first and orders by the dropped column anyway), not an error that talks of
/// a GROUP BY the query does not have; ordering by a select-list item or position works.
#[test]
fn select_distinct_order_by_outside_the_list() {
    let (db, _, _) = table();
    match db.sql("SELECT DISTINCT s FROM n ORDER BY v") {
        Err(tessera::Error::NotImplemented(m)) => assert!(m.contains("SELECT DISTINCT") && m.contains("v"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(db.sql("SELECT DISTINCT s AS x FROM n ORDER BY x NULLS LAST").is_ok());
    assert!(db.sql("SELECT DISTINCT s FROM n ORDER BY 1").is_ok());
    assert!(matches!(db.sql("SELECT DISTINCT s FROM n ORDER BY 0"), Err(tessera::Error::Plan(_))));
}

/// `any(x)` (ClickHouse) / `any_value(x)` (DuckDB) return a non-NULL value of the group when
/// it has one (Tessera: the group's minimum, the same on every run), NULL otherwise.
#[test]
fn any_returns_a_value_of_the_group() {
    let (db, v, s) = table();
    let b = db.sql("SELECT s, any(v) AS a, any_value(v) AS b, anyLast(s) AS c FROM n GROUP BY s").unwrap();
    let mut groups: HashMap<Option<String>, Vec<i32>> = HashMap::new();
    for (vi, si) in v.iter().zip(&s) {
        let e = groups.entry(si.clone()).or_default();
        if let Some(x) = vi {
            e.push(*x);
        }
    }
    let mut seen = 0;
    for batch in &b {
        let keys = batch.column(0).as_string::<i32>();
        let (a, bv) = (batch.column(1).as_primitive::<Int32Type>(), batch.column(2).as_primitive::<Int32Type>());
        let c = batch.column(3).as_string::<i32>();
        for i in 0..batch.num_rows() {
            let key = keys.is_valid(i).then(|| keys.value(i).to_string());
            let vals = &groups[&key];
            assert!(vals.contains(&a.value(i)), "any(v) of group {key:?} is one of its values");
            assert_eq!(a.value(i), bv.value(i));
            assert_eq!(c.is_valid(i), key.is_some(), "anyLast(s) is NULL only where every s is NULL");
            seen += 1;
        }
    }
    assert_eq!(seen, groups.len());
}

/// The variances (ClickHouse and SQL names) and the approximate distinct counts skip NULLs,
/// per group and through the two-level path with three threads: a group whose inputs are
/// all NULL gets NULL (variances) or 0 (uniq); groups this small are counted exactly by
/// `uniq` and `uniqCombined`.
#[test]
fn variances_and_approximate_uniq_skip_nulls() {
    let (db, v, s) = table();
    // Per key (s): the non-NULL values of v, and the distinct ones.
    let mut naive: HashMap<Option<String>, Vec<f64>> = HashMap::new();
    for (x, t) in v.iter().zip(&s) {
        // Key "x1": only the rows whose value is row 1's (variances 0).
        if t.as_deref() == Some("x1") && *x != v[1] {
            continue;
        }
        let e = naive.entry(t.clone()).or_default();
        if let Some(x) = x {
            e.push(*x as f64);
        }
    }
    let close = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => (a - b).abs() <= 1e-9 * a.abs().max(1.0),
        (a, b) => a == b,
    };
    for settings in ["", " SETTINGS group_by_two_level_threshold = 0, max_threads = 3"] {
        let sql = format!(
            "SELECT s, varPop(v), var_samp(v), stddevPop(v), stddev(v), uniq(v), uniqHLL12(v), uniqCombined(v), \
             uniq(s), COUNT(v) FROM n WHERE s IS NULL OR s <> 'x1' OR v = {} GROUP BY s{settings}",
            v[1].unwrap()
        );
        let seen = for_each_group(&db, &sql, |key, b, r| {
            let vals = &naive[&key];
            let f = |c: usize| {
                let a = b.column(c).as_primitive::<Float64Type>();
                a.is_valid(r).then(|| a.value(r))
            };
            let i = |c: usize| b.column(c).as_primitive::<Int64Type>().value(r);
            let n = vals.len() as f64;
            let mean = vals.iter().sum::<f64>() / n;
            let m2: f64 = vals.iter().map(|x| (x - mean) * (x - mean)).sum();
            let pop = (n > 0.0).then(|| m2 / n);
            let samp = (n > 1.0).then(|| m2 / (n - 1.0));
            assert_eq!(i(9), vals.len() as i64, "{sql}: COUNT(v) of {key:?}");
            assert!(close(f(1), pop), "{sql}: varPop of {key:?}: {:?} vs {pop:?}", f(1));
            assert!(close(f(2), samp), "{sql}: var_samp of {key:?}: {:?} vs {samp:?}", f(2));
            assert!(close(f(3), pop.map(f64::sqrt)), "{sql}: stddevPop of {key:?}");
            assert!(close(f(4), samp.map(f64::sqrt)), "{sql}: stddev of {key:?}");
            let distinct = vals.iter().map(|x| *x as i64).collect::<std::collections::HashSet<_>>().len() as i64;
            assert_eq!((i(5), i(7)), (distinct, distinct), "{sql}: uniq, uniqCombined of {key:?}");
            // uniqHLL12 is exact up to 512 values, then within 5%.
            let hll = i(6);
            assert!(hll == distinct || (distinct > 512 && (hll - distinct).abs() * 20 <= distinct), "{sql}: {hll} vs {distinct}");
            assert_eq!(i(8), key.is_some() as i64, "{sql}: uniq(s) of {key:?}");
        });
        assert_eq!(seen, naive.len(), "{sql}");
    }
    assert!(naive[&Some("x1".to_string())].len() > 1 && naive[&None].len() > 1);
    // Integer keys and values: the approximate counts per group run as the exact GROUP BY of
    // pairs, beside other aggregates too; NULL values skipped, a NULL key its own group.
    let sql = "SELECT v % 7 AS k, uniq(v), uniqHLL12(v), uniqCombined(v), COUNT(DISTINCT v), SUM(v) FROM n GROUP BY k ORDER BY k";
    for b in &db.sql(sql).unwrap() {
        for r in 0..b.num_rows() {
            let c = |j: usize| b.column(j).as_primitive::<Int64Type>().value(r);
            assert_eq!((c(1), c(2), c(3)), (c(4), c(4), c(4)), "{sql}: row {r}");
        }
    }
    // No value: NULL variances, uniq 0.
    let out = db.sql("SELECT varPop(v), stddevSamp(v), uniq(v) FROM n WHERE v IS NULL").unwrap();
    assert!(out[0].column(0).is_null(0) && out[0].column(1).is_null(0));
    assert_eq!(out[0].column(2).as_primitive::<Int64Type>().value(0), 0);
    assert!(matches!(db.sql("SELECT varPop(s) FROM n"), Err(tessera::Error::TypeMismatch(_))));
}

/// Exact quantiles per group with NULLs, single- and two-level: `median` and
/// `quantile_cont` interpolate (DuckDB), `quantile_disc` takes the lower value and
/// ClickHouse's `quantileExact` / `medianExact` the upper one; ClickHouse's parametric
/// syntax and DuckDB's two-argument one; levels 0 and 1 give the extremes; a group without
/// values gives NULL; a level outside [0, 1] is a plan error.
#[test]
fn quantiles_skip_nulls_and_follow_each_engine() {
    let (db, v, s) = table();
    let mut naive: HashMap<Option<String>, Vec<i32>> = HashMap::new();
    for (x, t) in v.iter().zip(&s) {
        let e = naive.entry(t.clone()).or_default();
        if let Some(x) = x {
            e.push(*x);
        }
    }
    for vals in naive.values_mut() {
        vals.sort();
    }
    let cont = |a: &[i32], l: f64| {
        let pos = l * (a.len() - 1) as f64;
        let lo = pos.floor() as usize;
        let hi = (lo + 1).min(a.len() - 1);
        a[lo] as f64 + (pos - lo as f64) * (a[hi] - a[lo]) as f64
    };
    let exact = |a: &[i32], l: f64| a[((l * a.len() as f64) as usize).min(a.len() - 1)];
    let disc = |a: &[i32], l: f64| a[((l * a.len() as f64).ceil() as usize).saturating_sub(1)];
    for settings in ["", " SETTINGS group_by_two_level_threshold = 0, max_threads = 3"] {
        let sql = format!(
            "SELECT s, median(v), quantile_cont(v, 0.3), quantile(0.9)(v), quantile_disc(v, 0.5), quantile(v, 0.25), \
             quantileExact(0.5)(v), medianExact(v), quantileExact(0)(v), quantileExact(1)(v) FROM n GROUP BY s{settings}"
        );
        let seen = for_each_group(&db, &sql, |key, b, r| {
            let a = &naive[&key];
            let f = |c: usize| b.column(c).as_primitive::<Float64Type>().value(r);
            let i = |c: usize| b.column(c).as_primitive::<Int32Type>().value(r);
            let close = |x: f64, y: f64| (x - y).abs() <= 1e-9 * y.abs().max(1.0);
            assert!(close(f(1), cont(a, 0.5)) && close(f(2), cont(a, 0.3)) && close(f(3), cont(a, 0.9)), "{sql}: {key:?}");
            assert_eq!((i(4), i(5)), (disc(a, 0.5), disc(a, 0.25)), "{sql}: quantile_disc of {key:?}");
            assert_eq!((i(6), i(7)), (exact(a, 0.5), exact(a, 0.5)), "{sql}: quantileExact of {key:?}");
            assert_eq!((i(8), i(9)), (a[0], a[a.len() - 1]), "{sql}: levels 0 and 1 of {key:?}");
        });
        assert_eq!(seen, naive.len(), "{sql}");
    }
    let out = db.sql("SELECT median(v), quantileExact(0.5)(v) FROM n WHERE v IS NULL").unwrap();
    assert!(out[0].column(0).is_null(0) && out[0].column(1).is_null(0));
    for bad in ["SELECT quantile(1.5)(v) FROM n", "SELECT quantile_cont(v, -0.1) FROM n", "SELECT quantile_cont(v, s) FROM n"] {
        assert!(matches!(db.sql(bad), Err(tessera::Error::Plan(_))), "{bad}");
    }
    assert!(matches!(db.sql("SELECT uniq(0.5)(v) FROM n"), Err(tessera::Error::NotImplemented(_))));
    assert!(matches!(db.sql("SELECT median(s) FROM n"), Err(tessera::Error::TypeMismatch(_))));
}
