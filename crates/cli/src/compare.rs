//! `tessera compare A.json B.json`: the seed studies' comparison tables from two
//! `tessera bench` JSON files (e.g. an x86 run and a Graviton run, or 1 vs 2 threads).
//!
//! Per machine: architecture, CPU, vCPUs, SIMD family, threads. Per query: A's and B's mean
//! time, gain % = 1 − A/B (positive when A is faster) and the ratio A/B; the totals (sum of
//! means). When both files hold throughput runs: QPS per concurrency with gain % = A/B − 1
//! (positive when A serves more queries per second), and the ratio view B/A marked
//! under-subscribed (clients < vCPUs) or fully-subscribed (clients ≥ vCPUs), as in the
//! sysbench Arm-vs-x86 study. Output: Markdown on stdout (and `--out-md`), an SVG bar chart
//! (`--out-svg`).
//!
//! Only the fields read here are required, so files of older and newer Tessera versions
//! compare as long as they have the latency fields of the first schema.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::Args;
use serde::Deserialize;
use tessera_engine::{Error, Result};

/// Arguments of `tessera compare`.
#[derive(Args, Debug)]
pub(crate) struct CompareArgs {
    /// The first `tessera bench --json` file (A: the candidate, e.g. the Arm run).
    a: PathBuf,
    /// The second file (B: the baseline, e.g. the x86 run).
    b: PathBuf,
    /// Also write the Markdown report to this file.
    #[arg(long)]
    out_md: Option<PathBuf>,
    /// Write an SVG bar chart (query times; QPS per concurrency for throughput runs).
    #[arg(long)]
    out_svg: Option<PathBuf>,
    /// Name of A in the tables (default: its file name without extension).
    #[arg(long)]
    label_a: Option<String>,
    /// Name of B in the tables (default: its file name without extension).
    #[arg(long)]
    label_b: Option<String>,
}

#[derive(Deserialize, Debug)]
struct Machine {
    arch: String,
    cpu_model: String,
    vcpus: usize,
    #[serde(default)]
    simd_available: Vec<String>,
}

#[derive(Deserialize, Debug)]
struct QueryTime {
    query: usize,
    mean_seconds: f64,
}

#[derive(Deserialize, Debug)]
struct Throughput {
    concurrency: usize,
    qps: f64,
}

#[derive(Deserialize, Debug)]
struct Point {
    #[serde(default)]
    throughput: Option<Throughput>,
}

/// The fields of a `tessera bench` JSON file that the report reads.
#[derive(Deserialize, Debug)]
struct Run {
    #[serde(default)]
    git_hash: String,
    #[serde(default)]
    simd_level: String,
    machine: Machine,
    threads: usize,
    table_rows: usize,
    queries: Vec<QueryTime>,
    #[serde(default)]
    points: Vec<Point>,
}

/// The text of a bench JSON file.
fn read_text(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| Error::Io { path: path.into(), source: e })
}

/// `text` (of `path`) parsed as a `what` JSON file.
fn parse<T: serde::de::DeserializeOwned>(path: &Path, text: &str, what: &str) -> Result<T> {
    serde_json::from_str(text).map_err(|e| Error::Corrupt { path: path.into(), detail: format!("not a `{what}` file: {e}") })
}

impl Run {
    fn parse(path: &Path, text: &str) -> Result<Run> {
        let run: Run = parse(path, text, "tessera bench --json")?;
        if run.queries.iter().any(|q| !q.mean_seconds.is_finite() || q.mean_seconds <= 0.0) {
            return Err(Error::Corrupt { path: path.into(), detail: "a query mean time is not a positive number".into() });
        }
        Ok(run)
    }

    /// QPS by concurrency (the first point of each concurrency).
    fn qps(&self) -> BTreeMap<usize, f64> {
        let mut m = BTreeMap::new();
        for t in self.points.iter().filter_map(|p| p.throughput.as_ref()) {
            m.entry(t.concurrency).or_insert(t.qps);
        }
        m
    }
}

/// The two runs with their labels, checked to be comparable.
struct Pair {
    a: Run,
    b: Run,
    la: String,
    lb: String,
    /// Queries in both files, in A's order: (query, A mean, B mean).
    rows: Vec<(usize, f64, f64)>,
}

fn label(given: &Option<String>, path: &Path) -> String {
    given.clone().unwrap_or_else(|| path.file_stem().map_or("?".into(), |s| s.to_string_lossy().into_owned()))
}

#[cfg(test)]
fn pair(args: &CompareArgs) -> Result<Pair> {
    pair_of(args, &read_text(&args.a)?, &read_text(&args.b)?)
}

/// [`pair`] of the files' texts.
fn pair_of(args: &CompareArgs, text_a: &str, text_b: &str) -> Result<Pair> {
    let a = Run::parse(&args.a, text_a)?;
    let b = Run::parse(&args.b, text_b)?;
    if a.table_rows != b.table_rows {
        return Err(Error::InvalidArgument(format!(
            "{} has {} rows and {} has {}: compare runs on the same dataset",
            args.a.display(),
            a.table_rows,
            args.b.display(),
            b.table_rows
        )));
    }
    let rows: Vec<(usize, f64, f64)> = a
        .queries
        .iter()
        .filter_map(|qa| b.queries.iter().find(|qb| qb.query == qa.query).map(|qb| (qa.query, qa.mean_seconds, qb.mean_seconds)))
        .collect();
    if rows.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "{} and {} have no query in common",
            args.a.display(),
            args.b.display()
        )));
    }
    let (la, lb) = (label(&args.label_a, &args.a), label(&args.label_b, &args.b));
    Ok(Pair { a, b, la, lb, rows })
}

/// `1 − a/b` in percent: A's time gain over B.
fn gain(a: f64, b: f64) -> f64 {
    (1.0 - a / b) * 100.0
}

fn subscription(clients: usize, vcpus: usize) -> &'static str {
    if clients < vcpus { "under-subscribed" } else { "fully-subscribed" }
}

fn markdown(p: &Pair) -> String {
    let (a, b) = (&p.a, &p.b);
    let mut s = String::new();
    let _ = writeln!(s, "## Tessera compare: A = {} vs B = {}\n", p.la, p.lb);
    let _ = writeln!(s, "| | A: {} | B: {} |\n|---|---|---|", p.la, p.lb);
    let facts: [(&str, String, String); 7] = [
        ("arch", a.machine.arch.clone(), b.machine.arch.clone()),
        ("CPU", a.machine.cpu_model.clone(), b.machine.cpu_model.clone()),
        ("vCPUs", a.machine.vcpus.to_string(), b.machine.vcpus.to_string()),
        ("SIMD family", a.simd_level.clone(), b.simd_level.clone()),
        ("CPU SIMD", a.machine.simd_available.join(","), b.machine.simd_available.join(",")),
        ("threads per query", a.threads.to_string(), b.threads.to_string()),
        ("git", a.git_hash.clone(), b.git_hash.clone()),
    ];
    for (k, x, y) in facts {
        let _ = writeln!(s, "| {k} | {x} | {y} |");
    }
    let _ = writeln!(s, "| rows | {} | {} |\n", a.table_rows, b.table_rows);

    let _ = writeln!(s, "| Query | A mean (s) | B mean (s) | gain % (1 − A/B) | A/B |\n|---|---:|---:|---:|---:|");
    for &(q, ta, tb) in &p.rows {
        let _ = writeln!(s, "| Q{q} | {ta:.4} | {tb:.4} | {:+.1}% | {:.2}x |", gain(ta, tb), ta / tb);
    }
    let (sa, sb): (f64, f64) = (p.rows.iter().map(|r| r.1).sum(), p.rows.iter().map(|r| r.2).sum());
    let _ = writeln!(s, "| **Total (sum of means)** | {sa:.4} | {sb:.4} | {:+.1}% | {:.2}x |", gain(sa, sb), sa / sb);
    let skipped: Vec<String> = a
        .queries
        .iter()
        .chain(&b.queries)
        .filter(|q| !p.rows.iter().any(|r| r.0 == q.query))
        .map(|q| format!("Q{}", q.query))
        .collect();
    if !skipped.is_empty() {
        let _ = writeln!(s, "\nIn one file only (not compared): {}.", skipped.join(", "));
    }

    let (qa, qb) = (a.qps(), b.qps());
    let common: Vec<usize> = qa.keys().filter(|c| qb.contains_key(c)).copied().collect();
    if !common.is_empty() {
        let _ = writeln!(s, "\n### Throughput (QPS, all queries sent continuously)\n");
        let _ = writeln!(s, "| Concurrency | A QPS | B QPS | gain % (A/B − 1) |\n|---:|---:|---:|---:|");
        for c in &common {
            let _ = writeln!(s, "| {c} | {:.2} | {:.2} | {:+.1}% |", qa[c], qb[c], (qa[c] / qb[c] - 1.0) * 100.0);
        }
        let _ = writeln!(s, "\n### Ratio view (B / A throughput)\n");
        let _ = writeln!(s, "| Clients | B/A | A ({} vCPUs) | B ({} vCPUs) |\n|---:|---:|---|---|", a.machine.vcpus, b.machine.vcpus);
        for c in &common {
            let _ = writeln!(
                s,
                "| {c} | {:.2} | {} | {} |",
                qb[c] / qa[c],
                subscription(*c, a.machine.vcpus),
                subscription(*c, b.machine.vcpus)
            );
        }
    } else if !qa.is_empty() || !qb.is_empty() {
        let _ = writeln!(s, "\n(Throughput: only one file has a throughput run at a given concurrency; no QPS table.)");
    }
    s
}

fn svg(p: &Pair) -> Result<String> {
    use plotters::prelude::*;
    let svg_err = |e: &dyn std::fmt::Display| Error::internal(format!("drawing the SVG chart: {e}"));
    let mut cats: Vec<String> = p.rows.iter().map(|r| format!("Q{}", r.0)).collect();
    cats.push("Total".into());
    let mut va: Vec<f64> = p.rows.iter().map(|r| r.1).collect();
    let mut vb: Vec<f64> = p.rows.iter().map(|r| r.2).collect();
    va.push(va.iter().sum());
    vb.push(vb.iter().sum());
    let (qa, qb) = (p.a.qps(), p.b.qps());
    let conc: Vec<usize> = qa.keys().filter(|c| qb.contains_key(c)).copied().collect();

    let mut out = String::new();
    {
        let height = if conc.is_empty() { 420 } else { 820 };
        let root = SVGBackend::with_string(&mut out, (900, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| svg_err(&e))?;
        let panels = if conc.is_empty() { vec![root.clone()] } else { root.split_evenly((2, 1)) };
        let labels = (p.la.as_str(), p.lb.as_str());
        bars(&panels[0], "Mean query time (s, lower is better)", &cats, &va, &vb, labels).map_err(|e| svg_err(&e))?;
        if !conc.is_empty() {
            let cats: Vec<String> = conc.iter().map(|c| format!("{c} client{}", if *c == 1 { "" } else { "s" })).collect();
            let va: Vec<f64> = conc.iter().map(|c| qa[c]).collect();
            let vb: Vec<f64> = conc.iter().map(|c| qb[c]).collect();
            bars(&panels[1], "Throughput (QPS, higher is better)", &cats, &va, &vb, labels).map_err(|e| svg_err(&e))?;
        }
        root.present().map_err(|e| svg_err(&e))?;
    }
    Ok(out)
}

/// One grouped bar chart: per category A's bar then B's, values printed above the bars.
fn bars<DB: plotters::prelude::DrawingBackend>(
    area: &plotters::prelude::DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    cats: &[String],
    va: &[f64],
    vb: &[f64],
    (la, lb): (&str, &str),
) -> std::result::Result<(), plotters::drawing::DrawingAreaErrorKind<DB::ErrorType>> {
    use plotters::prelude::*;
    let n = cats.len();
    let top = va.iter().chain(vb).copied().fold(0.0, f64::max).max(1e-9) * 1.18;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(32)
        .y_label_area_size(64)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..top)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < n { cats[i as usize].clone() } else { String::new() }
        })
        .y_label_formatter(&|y| format!("{y:.3}"))
        .draw()?;
    let colours = [RGBColor(0x1f, 0x77, 0xb4), RGBColor(0xff, 0x7f, 0x0e)];
    for (side, (vals, name)) in [(va, la), (vb, lb)].into_iter().enumerate() {
        let colour = colours[side];
        let x0 = |i: usize| i as f64 - 0.4 + side as f64 * 0.4;
        chart
            .draw_series(vals.iter().enumerate().map(|(i, &v)| Rectangle::new([(x0(i), 0.0), (x0(i) + 0.38, v)], colour.filled())))?
            .label(name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled()));
        chart.draw_series(vals.iter().enumerate().map(|(i, &v)| {
            Text::new(format!("{}", Sig(v)), (x0(i) + 0.02, v + top * 0.05), ("sans-serif", 12))
        }))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.9))
        .draw()?;
    Ok(())
}

/// A value with 3 significant digits.
struct Sig(f64);

impl std::fmt::Display for Sig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = self.0;
        let digits = if v == 0.0 { 0 } else { (2 - v.abs().log10().floor() as i32).clamp(0, 6) as usize };
        write!(f, "{v:.digits$}")
    }
}

/// The `suite` a bench JSON file names (`None` for ClickBench files, which have no field).
fn suite_of(path: &Path, text: &str) -> Result<Option<String>> {
    #[derive(Deserialize)]
    struct Suite {
        #[serde(default)]
        suite: Option<String>,
    }
    Ok(parse::<Suite>(path, text, "tessera bench --json")?.suite)
}

/// Both files of `--suite sysbench`: the study's ratio view.
fn sysbench_markdown(args: &CompareArgs, text_a: &str, text_b: &str) -> Result<String> {
    let what = "tessera bench --suite sysbench --json";
    let a: crate::sysbench::SysbenchRun = parse(&args.a, text_a, what)?;
    let b: crate::sysbench::SysbenchRun = parse(&args.b, text_b, what)?;
    if a.table_size != b.table_size {
        return Err(Error::InvalidArgument(format!(
            "{} has sbtest of {} rows and {} of {}: compare runs on the same table size",
            args.a.display(),
            a.table_size,
            args.b.display(),
            b.table_size
        )));
    }
    Ok(crate::sysbench::compare_markdown(&a, &b, &label(&args.label_a, &args.a), &label(&args.label_b, &args.b)))
}

pub(crate) fn run(args: CompareArgs) -> Result<()> {
    let (text_a, text_b) = (read_text(&args.a)?, read_text(&args.b)?);
    let md = match (suite_of(&args.a, &text_a)?, suite_of(&args.b, &text_b)?) {
        (None, None) => {
            let p = pair_of(&args, &text_a, &text_b)?;
            if let Some(path) = &args.out_svg {
                let chart = svg(&p)?;
                std::fs::write(path, chart).map_err(|e| Error::Io { path: path.clone(), source: e })?;
            }
            markdown(&p)
        }
        (Some(x), Some(y)) if x == "sysbench" && y == "sysbench" => {
            if args.out_svg.is_some() {
                return Err(Error::InvalidArgument("--out-svg: no chart for sysbench files yet (Markdown only)".into()));
            }
            sysbench_markdown(&args, &text_a, &text_b)?
        }
        (x, y) => {
            let name = |s: Option<String>| s.unwrap_or_else(|| "clickbench".into());
            return Err(Error::InvalidArgument(format!(
                "{} is a {} run and {} a {} run: compare files of the same suite (clickbench or sysbench)",
                args.a.display(),
                name(x),
                args.b.display(),
                name(y)
            )));
        }
    };
    if let Some(path) = &args.out_md {
        std::fs::write(path, &md).map_err(|e| Error::Io { path: path.clone(), source: e })?;
    }
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(md.as_bytes()).map_err(|e| Error::Io { path: "<stdout>".into(), source: e })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn bench_json(threads: usize, times: &[(usize, f64)], qps: &[(usize, f64)]) -> String {
        let queries: Vec<String> =
            times.iter().map(|(q, t)| format!(r#"{{"query":{q},"mean_seconds":{t},"min_seconds":{t}}}"#)).collect();
        let points: Vec<String> =
            qps.iter().map(|(c, v)| format!(r#"{{"throughput":{{"concurrency":{c},"qps":{v}}}}}"#)).collect();
        format!(
            r#"{{"git_hash":"abc","simd_level":"scalar","machine":{{"arch":"x86_64","cpu_model":"EPYC","vcpus":2,"simd_available":["avx2"]}},
               "threads":{threads},"table_rows":1000,"queries":[{}],"points":[{}],"future_field":1}}"#,
            queries.join(","),
            points.join(",")
        )
    }

    fn args(a: PathBuf, b: PathBuf) -> CompareArgs {
        CompareArgs { a, b, out_md: None, out_svg: None, label_a: Some("2t".into()), label_b: Some("1t".into()) }
    }

    #[test]
    fn tables_and_chart() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "a.json", &bench_json(2, &[(19, 0.5), (33, 0.25)], &[(1, 8.0), (2, 12.0)]));
        let b = write(dir.path(), "b.json", &bench_json(1, &[(19, 1.0), (33, 0.5), (34, 2.0)], &[(1, 4.0), (2, 4.0)]));
        let p = pair(&args(a, b)).unwrap();
        let md = markdown(&p);
        assert!(md.contains("| Q19 | 0.5000 | 1.0000 | +50.0% | 0.50x |"), "{md}");
        assert!(md.contains("| **Total (sum of means)** | 0.7500 | 1.5000 | +50.0% | 0.50x |"), "{md}");
        assert!(md.contains("not compared): Q34"), "{md}");
        assert!(md.contains("| 2 | 12.00 | 4.00 | +200.0% |"), "{md}");
        assert!(md.contains("| 1 | 0.50 | under-subscribed | under-subscribed |"), "{md}");
        assert!(md.contains("| 2 | 0.33 | fully-subscribed | fully-subscribed |"), "{md}");
        let chart = svg(&p).unwrap();
        assert!(chart.starts_with("<svg") && chart.contains("Q33") && chart.contains("2 clients"), "{chart}");
    }

    #[test]
    fn typed_errors() {
        let dir = tempfile::tempdir().unwrap();
        let good = write(dir.path(), "g.json", &bench_json(1, &[(19, 1.0)], &[]));
        let other = write(dir.path(), "o.json", &bench_json(1, &[(33, 1.0)], &[]));
        let garbage = write(dir.path(), "x.json", "{\"not\": \"bench\"}");
        let missing = dir.path().join("missing.json");
        assert!(matches!(pair(&args(good.clone(), other)), Err(Error::InvalidArgument(m)) if m.contains("no query in common")));
        assert!(matches!(pair(&args(good.clone(), garbage)), Err(Error::Corrupt { .. })));
        assert!(matches!(pair(&args(good.clone(), missing)), Err(Error::Io { .. })));
        let more_rows = write(dir.path(), "r.json", &bench_json(1, &[(19, 1.0)], &[]).replace("1000", "2000"));
        assert!(matches!(pair(&args(good, more_rows)), Err(Error::InvalidArgument(m)) if m.contains("same dataset")));
    }
}
