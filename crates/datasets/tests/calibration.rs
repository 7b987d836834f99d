//! Calibration of the `hits` generator against the published statistics of ClickBench's
//! real table (datasets/README.md), measured by real counting on 1,000,000 generated rows.
//!
//! Run in release: `cargo test -p tessera-datasets --release --test calibration -- --nocapture`
//! prints the table of target vs measured values used in the README.

use std::collections::{HashMap, HashSet};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Date32Type, Int16Type, Int32Type, Int64Type, TimestampSecondType};
use rayon::prelude::*;
use tessera_datasets::{GenOptions, HitsGenerator};

const ROWS: u64 = 1_000_000;
const BATCH: u64 = 1 << 16;
/// Rows of the real table: published counts are divided by it.
const FULL: f64 = 99_997_497.0;

/// The columns the statistics need, one `Vec` per column over all rows.
struct Data {
    user: Vec<i64>,
    time: Vec<i64>,
    date: Vec<i32>,
    watch: Vec<i64>,
    ip: Vec<i32>,
    region: Vec<i32>,
    counter: Vec<i32>,
    adv: Vec<i16>,
    engine: Vec<i16>,
    width: Vec<i16>,
    phrase: Vec<String>,
    url: Vec<String>,
    title: Vec<String>,
    referer: Vec<String>,
    original_url: Vec<String>,
}

fn project(b: &RecordBatch) -> Data {
    let col = |n: &str| {
        b.column_by_name(n)
            .unwrap_or_else(|| panic!("column {n}"))
            .clone()
    };
    let i64s = |n: &str| col(n).as_primitive::<Int64Type>().values().to_vec();
    let i32s = |n: &str| col(n).as_primitive::<Int32Type>().values().to_vec();
    let i16s = |n: &str| col(n).as_primitive::<Int16Type>().values().to_vec();
    let strs = |n: &str| {
        let c = col(n);
        let a = c.as_string::<i32>();
        assert_eq!(a.null_count(), 0);
        a.iter().map(|v| v.unwrap().to_string()).collect::<Vec<_>>()
    };
    Data {
        user: i64s("UserID"),
        time: col("EventTime")
            .as_primitive::<TimestampSecondType>()
            .values()
            .to_vec(),
        date: col("EventDate")
            .as_primitive::<Date32Type>()
            .values()
            .to_vec(),
        watch: i64s("WatchID"),
        ip: i32s("ClientIP"),
        region: i32s("RegionID"),
        counter: i32s("CounterID"),
        adv: i16s("AdvEngineID"),
        engine: i16s("SearchEngineID"),
        width: i16s("ResolutionWidth"),
        phrase: strs("SearchPhrase"),
        url: strs("URL"),
        title: strs("Title"),
        referer: strs("Referer"),
        original_url: strs("OriginalURL"),
    }
}

fn generate() -> Data {
    let generator = HitsGenerator::new(&GenOptions::new(ROWS));
    println!("{}", generator.describe());
    let parts: Vec<Data> = (0..ROWS.div_ceil(BATCH))
        .into_par_iter()
        .map(|k| {
            let start = k * BATCH;
            project(&generator.generate_batch(start, BATCH.min(ROWS - start) as usize))
        })
        .collect();
    let mut all = Data {
        user: vec![],
        time: vec![],
        date: vec![],
        watch: vec![],
        ip: vec![],
        region: vec![],
        counter: vec![],
        adv: vec![],
        engine: vec![],
        width: vec![],
        phrase: vec![],
        url: vec![],
        title: vec![],
        referer: vec![],
        original_url: vec![],
    };
    for p in parts {
        all.user.extend(p.user);
        all.time.extend(p.time);
        all.date.extend(p.date);
        all.watch.extend(p.watch);
        all.ip.extend(p.ip);
        all.region.extend(p.region);
        all.counter.extend(p.counter);
        all.adv.extend(p.adv);
        all.engine.extend(p.engine);
        all.width.extend(p.width);
        all.phrase.extend(p.phrase);
        all.url.extend(p.url);
        all.title.extend(p.title);
        all.referer.extend(p.referer);
        all.original_url.extend(p.original_url);
    }
    assert_eq!(all.user.len() as u64, ROWS);
    all
}

/// One checked statistic: `|measured / target - 1| <= tolerance` (or an absolute bound
/// when `absolute` is set, for shares near 0 or 1).
struct Stat {
    name: &'static str,
    target: f64,
    measured: f64,
    /// `None`: printed, not asserted (a documented deviation).
    tolerance: Option<f64>,
    absolute: bool,
}

fn rel(name: &'static str, target: f64, measured: f64, tolerance: f64) -> Stat {
    Stat {
        name,
        target,
        measured,
        tolerance: Some(tolerance),
        absolute: false,
    }
}

fn abs(name: &'static str, target: f64, measured: f64, tolerance: f64) -> Stat {
    Stat {
        name,
        target,
        measured,
        tolerance: Some(tolerance),
        absolute: true,
    }
}

fn info(name: &'static str, target: f64, measured: f64) -> Stat {
    Stat {
        name,
        target,
        measured,
        tolerance: None,
        absolute: false,
    }
}

fn distinct<T: std::hash::Hash + Eq>(it: impl Iterator<Item = T>) -> f64 {
    it.collect::<HashSet<T>>().len() as f64
}

/// (empty share, bytes per row, bytes per distinct value, distinct values per row).
fn string_stats(v: &[String]) -> (f64, f64, f64, f64) {
    let n = v.len() as f64;
    let empty = v.iter().filter(|s| s.is_empty()).count() as f64 / n;
    let bytes = v.iter().map(|s| s.len()).sum::<usize>() as f64 / n;
    let set: HashSet<&str> = v.iter().map(String::as_str).collect();
    let per_distinct = set.iter().map(|s| s.len()).sum::<usize>() as f64 / set.len() as f64;
    (empty, bytes, per_distinct, set.len() as f64 / n)
}

/// Row shares of the `k` most frequent values, descending.
fn top_shares<T: std::hash::Hash + Eq>(it: impl Iterator<Item = T>, n: f64, k: usize) -> Vec<f64> {
    let mut counts: HashMap<T, u64> = HashMap::new();
    for x in it {
        *counts.entry(x).or_default() += 1;
    }
    let mut c: Vec<u64> = counts.into_values().collect();
    c.sort_unstable_by(|a, b| b.cmp(a));
    c.into_iter().take(k).map(|x| x as f64 / n).collect()
}

#[test]
#[cfg_attr(debug_assertions, ignore = "1M rows: run with --release")]
fn hits_statistics_match_the_real_table() {
    let d = generate();
    let n = ROWS as f64;
    let mut stats = Vec::new();

    // Cardinalities per row.
    stats.push(rel(
        "distinct UserID / row",
        17_630_976.0 / FULL,
        distinct(d.user.iter()) / n,
        0.05,
    ));
    stats.push(rel(
        "distinct ClientIP / row",
        9_762_046.0 / FULL,
        distinct(d.ip.iter()) / n,
        0.05,
    ));
    let (url_e, url_b, url_bd, url_d) = string_stats(&d.url);
    let (tit_e, tit_b, tit_bd, tit_d) = string_stats(&d.title);
    let (ref_e, ref_b, ref_bd, ref_d) = string_stats(&d.referer);
    let (ph_e, ph_b, ph_bd, ph_d) = string_stats(&d.phrase);
    let (ou_e, ou_b, ou_bd, ou_d) = string_stats(&d.original_url);
    stats.push(rel("distinct URL / row", 18_342_019.0 / FULL, url_d, 0.05));
    stats.push(rel("distinct Title / row", 9_425_424.0 / FULL, tit_d, 0.05));
    stats.push(rel(
        "distinct Referer / row",
        19_720_797.0 / FULL,
        ref_d,
        0.05,
    ));
    stats.push(rel(
        "distinct SearchPhrase / row",
        6_019_103.0 / FULL,
        ph_d,
        0.05,
    ));
    let up = distinct(d.user.iter().zip(&d.phrase));
    stats.push(rel(
        "distinct (UserID, SearchPhrase) / row",
        24_070_560.0 / FULL,
        up / n,
        0.05,
    ));
    let ump = distinct(
        d.user
            .iter()
            .zip(&d.time)
            .zip(&d.phrase)
            .map(|((u, t), p)| (u, t.div_euclid(60) % 60, p)),
    );
    stats.push(rel(
        "distinct (UserID, minute, SearchPhrase) / row",
        56_384_822.0 / FULL,
        ump / n,
        0.07,
    ));
    let ne: Vec<usize> = (0..d.phrase.len())
        .filter(|&i| !d.phrase[i].is_empty())
        .collect();
    let pu = distinct(ne.iter().map(|&i| (&d.phrase[i], d.user[i])));
    stats.push(rel(
        "distinct (SearchPhrase, UserID), phrase <> '' / row",
        10_681_408.0 / FULL,
        pu / n,
        0.07,
    ));
    let ep = distinct(ne.iter().map(|&i| (d.engine[i], &d.phrase[i])));
    stats.push(rel(
        "distinct (SearchEngineID, SearchPhrase), phrase <> '' / row",
        6_474_212.0 / FULL,
        ep / n,
        0.10,
    ));
    let ru = distinct(d.region.iter().zip(&d.user));
    stats.push(rel(
        "distinct (RegionID, UserID) / row",
        17_996_642.0 / FULL,
        ru / n,
        0.07,
    ));
    let wi = top_shares(d.watch.iter().zip(&d.ip), 1.0, 1);
    stats.push(abs("Q33 max count of (WatchID, ClientIP)", 2.0, wi[0], 0.0));
    stats.push(rel(
        "distinct (WatchID, ClientIP) / row",
        99_997_493.0 / FULL,
        distinct(d.watch.iter().zip(&d.ip)) / n,
        0.001,
    ));
    let wi_ne = top_shares(ne.iter().map(|&i| (d.watch[i], d.ip[i])), 1.0, 1);
    stats.push(abs("Q32 max count (phrase <> '')", 1.0, wi_ne[0], 0.0));
    let wt = distinct(d.watch.iter().zip(&d.time));
    stats.push(abs(
        "(WatchID, EventTime) unique: distinct - rows",
        0.0,
        wt - n,
        0.0,
    ));
    let counters = distinct(d.counter.iter());
    stats.push(rel("distinct CounterID (fixed)", 6_506.0, counters, 0.05));

    // Empty shares (absolute tolerance in share points).
    stats.push(abs("empty SearchPhrase", 0.8683, ph_e, 0.01));
    stats.push(abs("empty URL", 0.0007, url_e, 0.0005));
    stats.push(abs("empty Title", 0.1491, tit_e, 0.01));
    stats.push(abs("empty Referer", 0.1897, ref_e, 0.01));
    stats.push(abs("empty OriginalURL", 0.8298, ou_e, 0.01));

    // Lengths.
    stats.push(rel("SearchPhrase bytes / row", 4.1, ph_b, 0.05));
    stats.push(rel("URL bytes / row", 87.9, url_b, 0.05));
    stats.push(rel("Title bytes / row", 56.7, tit_b, 0.05));
    stats.push(rel("Referer bytes / row", 63.4, ref_b, 0.05));
    stats.push(rel("OriginalURL bytes / row", 53.1, ou_b, 0.05));
    stats.push(rel("URL bytes / distinct", 184.0, url_bd, 0.08));
    stats.push(rel("Title bytes / distinct", 133.4, tit_bd, 0.08));
    stats.push(rel("Referer bytes / distinct", 136.4, ref_bd, 0.08));
    stats.push(rel(
        "OriginalURL bytes / distinct (distinct count assumed)",
        392.7,
        ou_bd,
        0.15,
    ));
    // Not reachable together with the distinct count and the bytes per row (see the README):
    // printed against the published value, asserted against what the model solves for.
    stats.push(info(
        "SearchPhrase bytes / distinct (deviation, see README)",
        65.2,
        ph_bd,
    ));
    stats.push(rel(
        "SearchPhrase bytes / distinct, as solved by the model",
        37.0,
        ph_bd,
        0.10,
    ));
    // Not published: the model assumes 0.08 per row.
    stats.push(rel(
        "distinct OriginalURL / row (assumed)",
        0.08,
        ou_d,
        0.05,
    ));

    // Skew. Counts at 1M rows: the 10th user ~49 rows, the top phrase ~70, Q21 ~159, so
    // Poisson noise alone is 8-14% of these; they pass at ±15% with the fixed seed.
    let url_top = top_shares(d.url.iter(), n, 10);
    stats.push(rel("URL top-1 share", 0.0329, url_top[0], 0.10));
    stats.push(rel("URL top-10 share", 0.0863, url_top.iter().sum(), 0.10));
    let user_top = top_shares(d.user.iter(), n, 10);
    stats.push(rel(
        "UserID top-1 share",
        29_097.0 / FULL,
        user_top[0],
        0.15,
    ));
    stats.push(rel("UserID 10th share", 4_906.0 / FULL, user_top[9], 0.15));
    let phrase_top = top_shares(ne.iter().map(|&i| &d.phrase[i]), n, 10);
    stats.push(rel(
        "SearchPhrase top-1 share (non-empty)",
        70_263.0 / FULL,
        phrase_top[0],
        0.15,
    ));
    stats.push(rel(
        "SearchPhrase 10th share (non-empty)",
        12_317.0 / FULL,
        phrase_top[9],
        0.15,
    ));
    let ip_top = top_shares(d.ip.iter(), n, 1);
    stats.push(rel(
        "ClientIP top-1 share",
        47_008.0 / FULL,
        ip_top[0],
        0.15,
    ));
    let r229 = d.region.iter().filter(|&&r| r == 229).count() as f64 / n;
    stats.push(abs("RegionID 229 share", 0.183, r229, 0.01));
    let region_top = top_shares(d.region.iter(), n, 10);
    stats.push(abs(
        "RegionID top-10 share",
        0.425,
        region_top.iter().sum(),
        0.015,
    ));
    let adv0 = d.adv.iter().filter(|&&a| a == 0).count() as f64 / n;
    stats.push(abs("AdvEngineID = 0 share", 0.9937, adv0, 0.0005));
    let adv_sum = d.adv.iter().map(|&a| a as f64).sum::<f64>() / n;
    stats.push(rel(
        "SUM(AdvEngineID) / row",
        7_280_088.0 / FULL,
        adv_sum,
        0.10,
    ));
    let adv_2_27 = d.adv.iter().filter(|&&a| a == 2 || a == 27).count() as f64
        / d.adv.iter().filter(|&&a| a != 0).count() as f64;
    stats.push(abs(
        "AdvEngineID in (2, 27) among non-zero",
        0.99,
        adv_2_27,
        0.02,
    ));
    let e0_nonempty = ne.iter().filter(|&&i| d.engine[i] == 0).count() as f64;
    stats.push(abs(
        "rows with SearchEngineID = 0 and a phrase",
        0.0,
        e0_nonempty,
        0.0,
    ));
    let e23 = ne.iter().filter(|&&i| matches!(d.engine[i], 2 | 3)).count() as f64 / ne.len() as f64;
    // "Mostly": the generator gives 99% (assumed, not published).
    stats.push(abs(
        "SearchEngineID in (2, 3) among phrase rows",
        0.99,
        e23,
        0.005,
    ));
    let c62 = (0..d.url.len())
        .filter(|&i| d.counter[i] == 62 && !d.url[i].is_empty())
        .count() as f64;
    stats.push(rel(
        "CounterID 62 rows with URL <> '' / row",
        738_000.0 / FULL,
        c62 / n,
        0.10,
    ));
    let counter_top = top_shares(d.counter.iter(), n, 5);
    stats.push(abs(
        "5th largest counter share (7-8.5%)",
        0.0775,
        counter_top[4],
        0.0075,
    ));
    stats.push(abs(
        "largest counter share (7-8.5%)",
        0.0775,
        counter_top[0],
        0.0075,
    ));
    let google = d.url.iter().filter(|u| u.contains("google")).count() as f64 / n;
    stats.push(rel(
        "URL LIKE '%google%' share (Q21)",
        15_911.0 / FULL,
        google,
        0.15,
    ));

    // Ranges and means.
    let tmin = *d.time.iter().min().unwrap();
    let tmax = *d.time.iter().max().unwrap();
    stats.push(abs(
        "min EventTime - 2013-07-01 20:00:00 (s)",
        0.0,
        (tmin - 1_372_708_800) as f64,
        60.0,
    ));
    stats.push(abs(
        "max EventTime - 2013-07-31 19:59:59 (s)",
        0.0,
        (tmax - 1_375_300_799) as f64,
        60.0,
    ));
    let bad_dates = (0..d.time.len())
        .filter(|&i| (d.time[i] + 4 * 3600).div_euclid(86_400) as i32 != d.date[i])
        .count() as f64;
    stats.push(abs(
        "EventDate <> local (UTC+4) date of EventTime",
        0.0,
        bad_dates,
        0.0,
    ));
    let dmin = *d.date.iter().min().unwrap();
    let dmax = *d.date.iter().max().unwrap();
    stats.push(abs(
        "min EventDate (2013-07-02 = day 15888)",
        15_888.0,
        dmin as f64,
        0.0,
    ));
    stats.push(abs(
        "max EventDate (2013-07-31 = day 15917)",
        15_917.0,
        dmax as f64,
        0.0,
    ));
    let width = d.width.iter().map(|&w| w as f64).sum::<f64>() / n;
    stats.push(rel("AVG(ResolutionWidth)", 1513.4879, width, 0.01));
    let avg_user = d.user.iter().map(|&u| u as f64).sum::<f64>() / n;
    stats.push(rel("AVG(UserID)", 2.528953029789716e18, avg_user, 0.03));
    stats.push(abs(
        "UserID <= 0 rows",
        0.0,
        d.user.iter().filter(|&&u| u <= 0).count() as f64,
        0.0,
    ));

    println!("| statistic | target | measured at {ROWS} rows | tolerance |");
    println!("|---|---|---|---|");
    let mut failed = Vec::new();
    for s in &stats {
        let (ok, tol) = match s.tolerance {
            None => (true, "not asserted".to_string()),
            Some(t) if s.absolute => ((s.measured - s.target).abs() <= t, format!("±{t}")),
            Some(t) => (
                (s.measured / s.target - 1.0).abs() <= t,
                format!("±{:.1}%", t * 100.0),
            ),
        };
        println!(
            "| {} | {} | {} | {}{} |",
            s.name,
            fmt(s.target),
            fmt(s.measured),
            tol,
            if ok { "" } else { " **FAIL**" }
        );
        if !ok {
            failed.push(s.name);
        }
    }
    assert!(failed.is_empty(), "statistics out of tolerance: {failed:?}");
}

fn fmt(x: f64) -> String {
    if x == 0.0 || x.abs() >= 1000.0 || x == x.trunc() {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else if x.abs() >= 0.01 {
        format!("{x:.4}")
    } else {
        format!("{x:.6}")
    }
}
