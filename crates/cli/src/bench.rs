//! `tessera bench`: ClickHouse's ClickBench methodology. Per query: one warm-up run, then
//! `--runs` timed runs; report mean, min and median; the total is the sum of the means.
//! Data is loaded (the columns the queries read) before timing; load time is reported
//! apart. Results go to stdout as a table and optionally to a JSON file with the machine
//! facts, so that runs on two machines can be compared.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use serde::Serialize;
use tessera_engine::{Database, Error, Result};

use crate::{generate_hits, load_table, parse_load};

/// Arguments of `tessera bench`.
#[derive(Args, Debug)]
pub(crate) struct BenchArgs {
    /// The hits table as hits=FILE (.parquet or .tsv). Default: a generated table of
    /// `--rows` rows cached in `--data-dir`.
    #[arg(long = "load", value_name = "hits=FILE")]
    load: Option<String>,
    /// Read `hits` from this database directory (see `tessera load`) instead of a file:
    /// every run decodes from the memory-mapped parts.
    #[arg(long, conflicts_with = "load")]
    db: Option<PathBuf>,
    /// Extra SQL statements to time (named S1, S2, .. in the output); repeatable.
    #[arg(long = "sql")]
    extra_sql: Vec<String>,
    /// ClickBench query numbers (1..43), comma-separated.
    #[arg(long, default_value = "19,33,34", value_delimiter = ',')]
    queries: Vec<usize>,
    /// Timed runs per query (after one warm-up run).
    #[arg(long, default_value_t = 10)]
    runs: usize,
    /// Worker threads per query (max_threads); default: vCPUs.
    #[arg(long)]
    threads: Option<usize>,
    /// Write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Rows of the generated default dataset.
    #[arg(long, default_value_t = 1_000_000)]
    rows: u64,
    /// Seed of the generated default dataset.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Where generated datasets are cached (env TESSERA_DATA_DIR; default `.tessera-cache`).
    #[arg(long, env = "TESSERA_DATA_DIR", default_value = ".tessera-cache")]
    data_dir: PathBuf,
}

#[derive(Serialize, Debug)]
struct Machine {
    arch: &'static str,
    cpu_model: String,
    vcpus: usize,
    simd_available: Vec<&'static str>,
    os: &'static str,
}

#[derive(Serialize, Debug)]
struct QueryResult {
    query: usize,
    sql: String,
    times_seconds: Vec<f64>,
    mean_seconds: f64,
    min_seconds: f64,
    median_seconds: f64,
    result_rows: usize,
}

#[derive(Serialize, Debug)]
struct Report {
    tessera_version: &'static str,
    git_hash: &'static str,
    simd_level: &'static str,
    machine: Machine,
    threads: usize,
    runs: usize,
    dataset: String,
    table_rows: usize,
    load_seconds: f64,
    queries: Vec<QueryResult>,
    total_mean_seconds: f64,
    peak_rss_bytes: u64,
    unix_time: u64,
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name") || l.starts_with("Model") || l.starts_with("CPU part"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// Peak resident set size of this process (VmHWM), bytes; 0 where unknown.
fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 }
}

pub(crate) fn run(args: BenchArgs) -> Result<()> {
    if args.runs == 0 {
        return Err(Error::InvalidArgument("--runs must be at least 1".into()));
    }
    let db = match &args.db {
        Some(dir) => Database::open(dir)?,
        None => Database::new(),
    };
    if let Some(t) = args.threads {
        if t == 0 {
            return Err(Error::InvalidArgument("--threads must be at least 1".into()));
        }
        db.set("max_threads", &t.to_string())?;
    }
    let path = match &args.load {
        _ if args.db.is_some() => args.db.clone().unwrap_or_default(),
        Some(spec) => {
            let (name, path) = parse_load(spec)?;
            if !name.eq_ignore_ascii_case("hits") {
                return Err(Error::InvalidArgument(format!("bench runs ClickBench queries on 'hits', not '{name}'")));
            }
            path
        }
        None => {
            let path = args.data_dir.join(format!("hits-{}-seed{}.parquet", args.rows, args.seed));
            if !path.exists() {
                std::fs::create_dir_all(&args.data_dir)
                    .map_err(|e| Error::Io { path: args.data_dir.clone(), source: e })?;
                eprintln!("generating the default dataset ({} rows) into {}", args.rows, path.display());
                generate_hits(&path, args.rows, args.seed)?;
            }
            path
        }
    };

    // Plan every query first, so an unsupported one fails before any timing.
    let load_start = Instant::now();
    if args.db.is_none() {
        load_table(&db, "hits", &path)?;
    } else if db.disk_table("hits").is_none() {
        return Err(Error::UnknownTable(format!("hits (not in {}; run `tessera load --db DIR hits FILE`)", path.display())));
    }
    let mut queries = Vec::new();
    for &q in &args.queries {
        let sql = tessera_datasets::hits::query(q)?;
        // On-disk tables decode on every run: preloading would only warm the page cache.
        if args.db.is_none() {
            db.preload(sql).map_err(|e| match e {
                Error::NotImplemented(m) => Error::NotImplemented(format!("Q{q} is not supported yet: {m}")),
                other => other,
            })?;
        }
        queries.push((q, sql));
    }
    let extra: Vec<String> = args.extra_sql.clone();
    for (i, sql) in extra.iter().enumerate() {
        queries.push((1000 + i + 1, sql.as_str()));
    }
    let load_seconds = load_start.elapsed().as_secs_f64();
    let table_rows = db.table("hits").map_or(0, |t| t.num_rows());
    let threads = db.settings().max_threads;
    eprintln!(
        "hits: {table_rows} rows from {} (columns loaded in {load_seconds:.2} s); {threads} threads; {} runs after 1 warm-up",
        path.display(),
        args.runs
    );

    let mut results = Vec::new();
    for (q, sql) in queries {
        if let Some(t) = db.disk_table("hits") {
            t.take_last_prune();
        }
        let warm = db.sql(sql)?;
        let result_rows = warm.iter().map(|b| b.num_rows()).sum();
        let mut times = Vec::with_capacity(args.runs);
        for _ in 0..args.runs {
            let t = Instant::now();
            let out = db.sql(sql)?;
            times.push(t.elapsed().as_secs_f64());
            drop(out);
        }
        let mut sorted = times.clone();
        sorted.sort_by(f64::total_cmp);
        let mean = times.iter().sum::<f64>() / times.len() as f64;
        let r = QueryResult {
            query: q,
            sql: sql.to_string(),
            mean_seconds: mean,
            min_seconds: sorted[0],
            median_seconds: median(&sorted),
            times_seconds: times,
            result_rows,
        };
        let label = if q > 1000 { format!("S{}", q - 1000) } else { format!("Q{q}") };
        let pruned = db.disk_table("hits").and_then(|t| t.take_last_prune());
        let pruned = pruned.map_or(String::new(), |(k, t)| format!("   granules {k}/{t}"));
        println!(
            "{:<4} mean {:>8.4} s   min {:>8.4} s   median {:>8.4} s   rows {}",
            label, r.mean_seconds, r.min_seconds, r.median_seconds, r.result_rows
        );
        if !pruned.is_empty() {
            println!("{pruned}");
        }
        results.push(r);
    }
    let total: f64 = results.iter().map(|r| r.mean_seconds).sum();
    let rss = peak_rss();
    println!("total (sum of means) {total:.4} s; peak RSS {:.1} MiB", rss as f64 / (1 << 20) as f64);

    let b = tessera_kernels::build_info();
    let report = Report {
        tessera_version: b.version,
        git_hash: b.git_hash,
        simd_level: b.simd_level,
        machine: Machine {
            arch: b.target_arch,
            cpu_model: cpu_model(),
            vcpus: tessera_common::default_threads(),
            simd_available: tessera_kernels::cpu_simd_features(),
            os: std::env::consts::OS,
        },
        threads,
        runs: args.runs,
        dataset: path.display().to_string(),
        table_rows,
        load_seconds,
        queries: results,
        total_mean_seconds: total,
        peak_rss_bytes: rss,
        unix_time: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    };
    if let Some(p) = &args.json {
        let text = serde_json::to_string_pretty(&report).map_err(|e| Error::internal(format!("json: {e}")))?;
        std::fs::write(p, text).map_err(|e| Error::Io { path: p.clone(), source: e })?;
        eprintln!("wrote {}", p.display());
    }
    Ok(())
}
