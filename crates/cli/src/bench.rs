//! `tessera bench`: ClickHouse's ClickBench methodology. Per query: one warm-up run, then
//! `--runs` timed runs; report mean, min and median; the total is the sum of the means.
//! Data is loaded (the columns the queries read) before timing; load time is reported
//! apart. Results go to stdout as a table and optionally to a JSON file with the machine
//! facts, so that runs on two machines can be compared (`tessera compare`).
//!
//! `--mode throughput` measures QPS under `--concurrency` clients instead (see
//! [`crate::throughput`]). Sweeps: `--threads 1,2`, `--concurrency 1,2,4,8` and `--rows
//! 1000000,10000000` (generated tables) run every combination; each is one entry of the
//! JSON `points` list, and the top-level fields repeat the first point so that files of
//! single runs keep their first schema.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use serde::Serialize;
use tessera_engine::{CancelToken, Database, Error, Profile, Result};

use crate::throughput::{self, Throughput};
use crate::{generate_hits, load_table, parse_load};

/// What `tessera bench` measures.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Mode {
    /// One query at a time: 1 warm-up + `--runs` runs each; mean, min, median.
    Latency,
    /// `--concurrency` clients send the queries continuously: QPS, latency percentiles.
    Throughput,
}

/// Arguments of `tessera bench`.
#[derive(Args, Debug)]
pub(crate) struct BenchArgs {
    /// `clickbench` (ClickBench queries on `hits`, the default), `formats` (the Read & Write
    /// table: Int8, UInt64, String, Mixed cases in each format, beside chDB) or `sysbench`
    /// (point, range, scan and insert micro-workloads on sysbench's `sbtest`, at 1 and
    /// vCPUs clients, beside DuckDB and chDB).
    #[arg(long, default_value = "clickbench", value_parser = ["clickbench", "formats", "sysbench"])]
    suite: String,
    /// Sysbench suite: rows of `sbtest` (sysbench's `--table-size`).
    #[arg(long, default_value_t = 10_000_000)]
    table_size: u64,
    /// Sysbench suite: workloads, comma-separated (point_select, simple_ranges, sum_ranges,
    /// order_ranges, distinct_ranges, scan, insert).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "point_select,simple_ranges,sum_ranges,order_ranges,distinct_ranges,scan,insert"
    )]
    workloads: Vec<String>,
    /// Sysbench suite: ids per range query (sysbench's `--range_size`).
    #[arg(long, default_value_t = 100)]
    range_size: u64,
    /// Sysbench suite: rows per INSERT statement of the `insert` workload.
    #[arg(long, default_value_t = 1000)]
    insert_batch: u64,
    /// Sysbench suite: leave DuckDB out (otherwise `python3` with `duckdb` runs the
    /// workloads too).
    #[arg(long)]
    no_duckdb: bool,
    /// Formats suite: rows of the Int8, UInt64 and String cases.
    #[arg(long, default_value_t = 100_000_000)]
    case_rows: u64,
    /// Formats suite: rows of the Mixed case.
    #[arg(long, default_value_t = 60_000_000)]
    mixed_rows: u64,
    /// Formats suite: cases, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "Int8,UInt64,String,Mixed")]
    cases: Vec<String>,
    /// Formats suite: formats (ClickHouse names), comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "Native,RowBinary,RowBinaryWithNamesAndTypes,TSV,CSV,JSONEachRow,Parquet,Arrow,ArrowStream"
    )]
    formats: Vec<String>,
    /// Formats suite: compressions, comma-separated (none, lz4, zstd).
    #[arg(long, value_delimiter = ',', default_value = "none,lz4")]
    compressions: Vec<String>,
    /// Formats and sysbench suites: leave chDB out (otherwise `python3` with `chdb` runs
    /// each case too).
    #[arg(long)]
    no_chdb: bool,
    /// Formats suite: directory for the serialized files (removed after each case).
    #[arg(long, default_value = ".tessera-cache/formats-bench")]
    formats_dir: PathBuf,
    /// The hits table as hits=FILE (.parquet or .tsv). Default: a generated table of
    /// `--rows` rows cached in `--data-dir`.
    #[arg(long = "load", value_name = "hits=FILE")]
    load: Option<String>,
    /// With `--load` of a Parquet file: stream it (every run decodes the chunks it reads,
    /// as DuckDB's `read_parquet` does) instead of reading the queries' columns into memory
    /// before timing.
    #[arg(long, requires = "load")]
    stream: bool,
    /// Read `hits` from this database directory (see `tessera load`) instead of a file:
    /// queries stream morsels from the memory-mapped parts, through the decoded-block cache.
    #[arg(long, conflicts_with = "load")]
    db: Option<PathBuf>,
    /// With `--db`: byte budget of the decoded-block cache (default a quarter of RAM, at
    /// least 2 GiB; 0 = no cache, every run decodes from the parts).
    #[arg(long, requires = "db")]
    block_cache_size: Option<u64>,
    /// Extra SQL statements to time (named S1, S2, .. in the output); repeatable.
    #[arg(long = "sql")]
    extra_sql: Vec<String>,
    /// ClickBench query numbers (1..43), comma-separated.
    #[arg(long, default_value = "19,33,34", value_delimiter = ',')]
    queries: Vec<usize>,
    /// Timed runs per query (after one warm-up run; default 10); formats suite: runs per
    /// case and operation of each engine, the median reported (default 3).
    #[arg(long)]
    runs: Option<usize>,
    /// Worker threads per query (max_threads); default: vCPUs. A list (`1,2`) sweeps:
    /// speedup and parallel efficiency per query against the first value.
    #[arg(long, value_delimiter = ',')]
    threads: Vec<usize>,
    /// `latency` (ClickBench) or `throughput` (clients sending queries continuously).
    #[arg(long, value_enum, default_value_t = Mode::Latency)]
    mode: Mode,
    /// Throughput mode and sysbench suite: client threads; a list (`1,2,4,8`) sweeps.
    /// Default: 1 (sysbench suite: 1 and vCPUs).
    #[arg(long, value_delimiter = ',')]
    concurrency: Vec<usize>,
    /// Throughput mode: seconds per run (default 10 unless --iterations is given); sysbench
    /// suite: seconds per workload and concurrency (default 5).
    #[arg(long)]
    duration: Option<f64>,
    /// Throughput mode: queries per run, all clients together.
    #[arg(long)]
    iterations: Option<usize>,
    /// A setting for every query, NAME=VALUE (e.g. max_memory_usage=4000000000,
    /// concurrent_threads_soft_limit_num=2); repeatable.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    set: Vec<String>,
    /// Kernel family: auto (default: env TESSERA_SIMD_LEVEL, else the best this CPU runs),
    /// scalar, portable, avx2, avx512 (x86_64), neon, sve (aarch64).
    #[arg(long, value_name = "LEVEL")]
    simd_level: Option<String>,
    /// Write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Rows of the generated default dataset; a list (`1000000,10000000`) sweeps (time
    /// per million rows per query).
    #[arg(long, value_delimiter = ',', default_value = "1000000")]
    rows: Vec<u64>,
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

#[derive(Serialize, Debug, Clone)]
struct QueryResult {
    query: usize,
    sql: String,
    times_seconds: Vec<f64>,
    /// The warm-up run's time (latency mode; `None` in throughput mode): what a first run
    /// costs before the caches (decoded blocks, query condition cache, page cache) hold
    /// anything of this query.
    warmup_seconds: Option<f64>,
    mean_seconds: f64,
    min_seconds: f64,
    median_seconds: f64,
    result_rows: usize,
    /// `mean_seconds` per million table rows.
    seconds_per_million_rows: f64,
    /// Of the warm-up run: the most bytes the query's accounted buffers held, and what an
    /// external GROUP BY wrote to temporary files (times a worker spilled, runs, bytes).
    peak_memory_bytes: usize,
    spills: usize,
    spilled_runs: usize,
    spilled_bytes: u64,
}

/// One measured configuration (dataset x threads x concurrency).
#[derive(Serialize, Debug)]
struct Point {
    dataset: String,
    table_rows: usize,
    load_seconds: f64,
    threads: usize,
    /// Clients (throughput mode only).
    concurrency: Option<usize>,
    /// Latency mode: `--runs` times per query; throughput mode: every latency observed.
    queries: Vec<QueryResult>,
    total_mean_seconds: f64,
    throughput: Option<Throughput>,
    /// Peak RSS during this point (VmHWM, reset before it where the kernel allows).
    peak_rss_bytes: u64,
}

/// Speedup of a query over the first `--threads` value on the same data.
#[derive(Serialize, Debug)]
struct ThreadScaling {
    query: usize,
    table_rows: usize,
    threads: usize,
    mean_seconds: f64,
    speedup: f64,
    /// `speedup / (threads / base threads)`: 1.0 is perfect scaling.
    parallel_efficiency: f64,
}

#[derive(Serialize, Debug)]
struct Report {
    tessera_version: &'static str,
    git_hash: &'static str,
    /// Kernel family the queries ran with.
    simd_level: &'static str,
    /// Families compiled into the binary (build-time `TESSERA_SIMD`).
    simd_compiled: &'static str,
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
    mode: Mode,
    /// Every configuration measured; the fields above repeat the first.
    points: Vec<Point>,
    threads_scaling: Vec<ThreadScaling>,
}

pub(crate) fn cpu_model() -> String {
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

/// Resets this process's peak RSS (VmHWM) to its current RSS, so that each point reports
/// its own peak (Linux `clear_refs` value 5; a no-op where unsupported).
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn summarize(
    q: usize,
    sql: &str,
    times: Vec<f64>,
    result_rows: usize,
    table_rows: usize,
    profile: &Profile,
) -> QueryResult {
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let mean = if times.is_empty() { f64::NAN } else { times.iter().sum::<f64>() / times.len() as f64 };
    QueryResult {
        query: q,
        sql: sql.to_string(),
        mean_seconds: mean,
        min_seconds: sorted.first().copied().unwrap_or(f64::NAN),
        warmup_seconds: None,
        median_seconds: median(&sorted),
        times_seconds: times,
        result_rows,
        seconds_per_million_rows: mean / (table_rows.max(1) as f64 / 1e6),
        peak_memory_bytes: profile.peak_memory_bytes,
        spills: profile.spills,
        spilled_runs: profile.spilled_runs,
        spilled_bytes: profile.spilled_bytes,
    }
}

/// The data files to benchmark: `--load`, or one generated file per `--rows` value.
fn datasets(args: &BenchArgs) -> Result<Vec<PathBuf>> {
    if let Some(dir) = &args.db {
        return Ok(vec![dir.clone()]);
    }
    if let Some(spec) = &args.load {
        let (name, path) = parse_load(spec)?;
        if !name.eq_ignore_ascii_case("hits") {
            return Err(Error::InvalidArgument(format!("bench runs ClickBench queries on 'hits', not '{name}'")));
        }
        if args.rows.len() > 1 {
            return Err(Error::InvalidArgument("--rows with several values sweeps generated tables: drop --load".into()));
        }
        return Ok(vec![path]);
    }
    let mut paths = Vec::new();
    for &rows in &args.rows {
        if rows == 0 {
            return Err(Error::InvalidArgument("--rows must be at least 1".into()));
        }
        let path = args.data_dir.join(format!("hits-{rows}-seed{}.parquet", args.seed));
        if !path.exists() {
            std::fs::create_dir_all(&args.data_dir).map_err(|e| Error::Io { path: args.data_dir.clone(), source: e })?;
            eprintln!("generating the dataset ({rows} rows) into {}", path.display());
            generate_hits(&path, rows, args.seed)?;
        }
        paths.push(path);
    }
    Ok(paths)
}

/// Seconds `tessera bench` waits between loading a table into memory and its first query
/// (`benches/compare.py` waits as long in each engine's process). Loading frees gigabytes
/// (decoded Parquet pages, concatenation buffers), and for about a second after that the
/// first heavy query ran slower on this project's 2-vCPU VM: Q5's first timed run 0.14-0.15 s
/// against 0.06-0.07 when it came second or after this wait (all 43 queries' columns
/// loaded, 10M rows); a jemalloc purge right after the load did not remove it, so the
/// cause is outside the engine (the allocator's or the OS's deferred work). ClickBench runs
/// its queries as a separate step after the load, likewise.
const SETTLE_SECONDS: u64 = 2;

fn settle_after_load() {
    // The load's (and generation's) freed buffers go back to the OS now, not after jemalloc's
    // 5 s decay: the queries' threads allocate from other arenas, so they would otherwise add
    // to the peak RSS (the 1M-row main job: 845 MiB without this).
    tessera_engine::memory::release_freed_memory();
    std::thread::sleep(std::time::Duration::from_secs(SETTLE_SECONDS));
}

fn latency_point(db: &Database, queries: &[(usize, &str)], runs: usize, cancel: &CancelToken) -> Result<Vec<QueryResult>> {
    let table_rows = db.table("hits").map_or(0, |t| t.num_rows());
    let mut results = Vec::new();
    for &(q, sql) in queries {
        if let Some(t) = db.disk_table("hits") {
            t.take_last_prune();
        }
        let t = Instant::now();
        let (warm, profile) = db.sql_in(sql, None, cancel)?;
        let warmup = t.elapsed().as_secs_f64();
        let result_rows = warm.iter().map(|b| b.num_rows()).sum();
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            let t = Instant::now();
            let out = db.sql_cancellable(sql, cancel)?;
            times.push(t.elapsed().as_secs_f64());
            drop(out);
        }
        let r = QueryResult { warmup_seconds: Some(warmup), ..summarize(q, sql, times, result_rows, table_rows, &profile) };
        let label = if q > 1000 { format!("S{}", q - 1000) } else { format!("Q{q}") };
        println!(
            "{:<4} mean {:>8.4} s   min {:>8.4} s   median {:>8.4} s   first {:>8.4} s   rows {}",
            label, r.mean_seconds, r.min_seconds, r.median_seconds, warmup, r.result_rows
        );
        if let Some((k, t)) = db.disk_table("hits").and_then(|t| t.take_last_prune()) {
            println!("   granules {k}/{t}");
        }
        if profile.spills > 0 {
            println!(
                "   spilled {} runs, {:.1} MiB ({} spills); peak accounted memory {:.1} MiB",
                profile.spilled_runs,
                profile.spilled_bytes as f64 / (1u64 << 20) as f64,
                profile.spills,
                profile.peak_memory_bytes as f64 / (1u64 << 20) as f64
            );
        }
        results.push(r);
    }
    Ok(results)
}

pub(crate) fn run(mut args: BenchArgs, cancel: &CancelToken) -> Result<()> {
    if args.suite == "sysbench" {
        let vcpus = tessera_common::default_threads();
        let concurrency = if args.concurrency.is_empty() {
            if vcpus > 1 { vec![1, vcpus] } else { vec![1] }
        } else {
            args.concurrency
        };
        let secs = args.duration.unwrap_or(5.0);
        if !(secs.is_finite() && secs > 0.0) {
            return Err(Error::InvalidArgument("--duration must be positive".into()));
        }
        return crate::sysbench::run(
            crate::sysbench::SysbenchArgs {
                table_size: args.table_size,
                seed: args.seed,
                workloads: args.workloads,
                concurrency,
                duration: Duration::from_secs_f64(secs),
                range_size: args.range_size,
                insert_batch: args.insert_batch,
                duckdb: !args.no_duckdb,
                chdb: !args.no_chdb,
                data_dir: args.data_dir,
                json: args.json,
                threads: args.threads.first().copied(),
            },
            cancel,
        );
    }
    if args.concurrency.is_empty() {
        args.concurrency = vec![1];
    }
    if args.runs == Some(0) {
        return Err(Error::InvalidArgument("--runs must be at least 1".into()));
    }
    if args.suite == "formats" {
        return crate::formats_bench::run(crate::formats_bench::FormatsArgs {
            case_rows: args.case_rows,
            mixed_rows: args.mixed_rows,
            cases: args.cases,
            formats: args.formats,
            compressions: args.compressions,
            chdb: !args.no_chdb,
            dir: args.formats_dir,
            json: args.json,
            threads: args.threads.first().copied(),
            runs: args.runs.unwrap_or(3),
        });
    }
    let runs = args.runs.unwrap_or(10);
    if args.threads.contains(&0) {
        return Err(Error::InvalidArgument("--threads must be at least 1".into()));
    }
    if args.concurrency.is_empty() || args.concurrency.contains(&0) {
        return Err(Error::InvalidArgument("--concurrency must be at least 1".into()));
    }
    if args.duration.is_some_and(|d| !(d.is_finite() && d > 0.0)) || args.iterations == Some(0) {
        return Err(Error::InvalidArgument("--duration and --iterations must be positive".into()));
    }
    if args.mode == Mode::Latency && (args.concurrency != [1] || args.duration.is_some() || args.iterations.is_some()) {
        return Err(Error::InvalidArgument(
            "--concurrency, --duration and --iterations need --mode throughput".into(),
        ));
    }
    let opts = |c: usize| throughput::Options {
        concurrency: c,
        duration: match (args.duration, args.iterations) {
            (None, None) => Some(Duration::from_secs(10)),
            (d, _) => d.map(Duration::from_secs_f64),
        },
        iterations: args.iterations,
    };
    let threads_list: Vec<Option<usize>> =
        if args.threads.is_empty() { vec![None] } else { args.threads.iter().map(|&t| Some(t)).collect() };

    let mut points = Vec::new();
    let mut level = "";
    for path in datasets(&args)? {
        let db = match &args.db {
            Some(dir) => crate::open_db(dir)?,
            None => Database::new(),
        };
        if let Some(bytes) = args.block_cache_size {
            db.set_block_cache_size(bytes);
        }
        for spec in &args.set {
            let (name, value) = spec
                .split_once('=')
                .ok_or_else(|| Error::InvalidArgument(format!("--set expects NAME=VALUE, got '{spec}'")))?;
            db.set(name.trim(), value.trim())?;
        }
        if let Some(l) = &args.simd_level {
            db.set("simd_level", l)?;
        }
        let simd_level = db.settings().kernels()?.level.name();
        level = simd_level;
        // Plan every query first, so an unsupported one fails before any timing.
        let load_start = Instant::now();
        if args.db.is_none() {
            load_table(&db, "hits", &path, args.stream)?;
        } else if db.disk_table("hits").is_none() {
            return Err(Error::UnknownTable(format!(
                "hits (not in {}; run `tessera load --db DIR hits FILE`)",
                path.display()
            )));
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
        for (i, sql) in args.extra_sql.iter().enumerate() {
            queries.push((1000 + i + 1, sql.as_str()));
        }
        let load_seconds = load_start.elapsed().as_secs_f64();
        if args.db.is_none() {
            settle_after_load();
        }
        let table_rows = db.table("hits").map_or(0, |t| t.num_rows());
        for threads in &threads_list {
            if let Some(t) = threads {
                db.set("max_threads", &t.to_string())?;
            }
            let threads = db.settings().max_threads;
            let configs: Vec<Option<usize>> = match args.mode {
                Mode::Latency => vec![None],
                Mode::Throughput => args.concurrency.iter().map(|&c| Some(c)).collect(),
            };
            for concurrency in configs {
                eprintln!(
                    "hits: {table_rows} rows from {} (columns loaded in {load_seconds:.2} s); {threads} threads; {simd_level} kernels; {}",
                    path.display(),
                    match concurrency {
                        None => format!("{runs} runs after 1 warm-up"),
                        Some(c) => format!("{c} clients after 1 warm-up run per query"),
                    }
                );
                reset_peak_rss();
                let (queries_out, tp) = match concurrency {
                    None => (latency_point(&db, &queries, runs, cancel)?, None),
                    Some(c) => {
                        let (t, lat) = throughput::run(&db, &queries, opts(c), cancel)?;
                        throughput::print(&t);
                        let rows: Vec<QueryResult> = queries
                            .iter()
                            .zip(lat)
                            .map(|(&(q, sql), l)| summarize(q, sql, l, 0, table_rows, &Profile::default()))
                            .collect();
                        (rows, Some(t))
                    }
                };
                let total: f64 = queries_out.iter().map(|r| r.mean_seconds).sum();
                let rss = peak_rss();
                println!("total (sum of means) {total:.4} s; peak RSS {:.1} MiB", rss as f64 / (1 << 20) as f64);
                points.push(Point {
                    dataset: path.display().to_string(),
                    table_rows,
                    load_seconds,
                    threads,
                    concurrency,
                    queries: queries_out,
                    total_mean_seconds: total,
                    throughput: tp,
                    peak_rss_bytes: rss,
                });
            }
        }
    }
    let threads_scaling = thread_scaling(&points);
    print_sweeps(&points, &threads_scaling);
    write_report(&args, points, threads_scaling, level)
}

/// Speedup per query of each latency point over the point with the first `--threads`
/// value on the same data.
fn thread_scaling(points: &[Point]) -> Vec<ThreadScaling> {
    let mut out = Vec::new();
    for p in points.iter().filter(|p| p.concurrency.is_none()) {
        let Some(base) = points.iter().find(|b| b.concurrency.is_none() && b.dataset == p.dataset) else { continue };
        if base.threads == p.threads {
            continue;
        }
        for (r, b) in p.queries.iter().zip(&base.queries) {
            let speedup = b.mean_seconds / r.mean_seconds;
            out.push(ThreadScaling {
                query: r.query,
                table_rows: p.table_rows,
                threads: p.threads,
                mean_seconds: r.mean_seconds,
                speedup,
                parallel_efficiency: speedup / (p.threads as f64 / base.threads as f64),
            });
        }
    }
    out
}

fn print_sweeps(points: &[Point], scaling: &[ThreadScaling]) {
    if !scaling.is_empty() {
        println!("\nthread scaling (speedup over the first --threads value):");
        for s in scaling {
            println!(
                "  Q{:<3} {:>10} rows  {:>3} threads  {:>8.4} s  speedup {:>5.2}x  efficiency {:>4.0}%",
                s.query,
                s.table_rows,
                s.threads,
                s.mean_seconds,
                s.speedup,
                s.parallel_efficiency * 100.0
            );
        }
    }
    let mut rows: Vec<usize> = points.iter().map(|p| p.table_rows).collect();
    rows.dedup();
    if rows.len() > 1 {
        println!("\nrows sweep (seconds per million rows, mean):");
        for p in points {
            let per: Vec<String> =
                p.queries.iter().map(|q| format!("Q{} {:.4}", q.query, q.seconds_per_million_rows)).collect();
            let conc = p.concurrency.map_or(String::new(), |c| format!(" x{c} clients"));
            println!("  {:>10} rows  {} threads{conc}:  {}", p.table_rows, p.threads, per.join("   "));
        }
    }
}

/// Writes the JSON file; `simd_level` is the kernel family the queries ran with.
fn write_report(args: &BenchArgs, points: Vec<Point>, threads_scaling: Vec<ThreadScaling>, simd_level: &'static str) -> Result<()> {
    let Some(path) = &args.json else { return Ok(()) };
    if points.is_empty() {
        return Err(Error::internal("no benchmark point measured"));
    }
    // The top-level fields repeat the first point (the first schema of this file).
    let first = &points[0];
    let queries = first.queries.clone();
    let b = tessera_kernels::build_info();
    let report = Report {
        tessera_version: b.version,
        git_hash: b.git_hash,
        simd_level,
        simd_compiled: b.simd_compiled,
        machine: Machine {
            arch: b.target_arch,
            cpu_model: cpu_model(),
            vcpus: tessera_common::default_threads(),
            simd_available: tessera_kernels::cpu_simd_features(),
            os: std::env::consts::OS,
        },
        threads: first.threads,
        runs: args.runs.unwrap_or(10),
        dataset: first.dataset.clone(),
        table_rows: first.table_rows,
        load_seconds: first.load_seconds,
        total_mean_seconds: first.total_mean_seconds,
        queries,
        peak_rss_bytes: points.iter().map(|p| p.peak_rss_bytes).max().unwrap_or(0),
        unix_time: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        mode: args.mode,
        points,
        threads_scaling,
    };
    let text = serde_json::to_string_pretty(&report).map_err(|e| Error::internal(format!("json: {e}")))?;
    std::fs::write(path, text).map_err(|e| Error::Io { path: path.clone(), source: e })?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

/// A Python helper of the benchmarks (`benches/NAME`): in the source tree this binary was
/// built from, else under the current directory.
///
/// # Errors
/// [`Error::InvalidArgument`] naming both places when neither has it (a binary moved away
/// from its source tree), and `skip`, the flag that leaves the reference engines out.
pub(crate) fn bench_script(name: &str, skip: &str) -> Result<std::path::PathBuf> {
    let built = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../benches").join(name);
    let here = std::path::Path::new("benches").join(name);
    [&built, &here].into_iter().find(|p| p.is_file()).cloned().ok_or_else(|| {
        Error::InvalidArgument(format!(
            "benches/{name} not found (looked in {} and {}): run from Tessera's source tree, or pass {skip}",
            built.display(),
            here.display()
        ))
    })
}
