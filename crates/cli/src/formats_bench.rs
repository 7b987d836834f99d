//! `tessera bench --suite formats`: the Read & Write table of issue 12, Tessera and chDB
//! doing the same work in the same run.
//!
//! Cases (ClickHouse's seed query, `numbers(N)` as the source):
//! `Int8` = `(number % 256)::Int8 a`, `UInt64` = `number b`, `String` = `toString(number) c`,
//! `Mixed` = all three. For each case, format and compression:
//! * **read**: the query's answer serialized to a file (Tessera: `Database::write_query`;
//!   chDB: `SELECT .. INTO OUTFILE .. FORMAT F`);
//! * **write (memory / disk)**: that engine's own file read back into a table (Tessera:
//!   `register_format` / `insert_format` into an on-disk table; chDB: `INSERT INTO t FROM
//!   INFILE` into `Memory` / `MergeTree`).
//!
//! Each case runs `--runs` times per operation and engine (default 3) and reports the
//! run of median time (chDB's runs share one child process, as Tessera's share its
//! process): elapsed seconds, CPU% (process CPU time / wall time), the peak RSS
//! sampled every 10 ms while it runs (MB), rows/s and MB/s (bytes of the serialized file
//! per second). chDB runs in a child process per case (`benches/formats_chdb.py`, which
//! measures the same way from inside). Compression `lz4`: Tessera writes ClickHouse
//! compressed blocks for Native/RowBinary/text and in-format compression for Arrow/Parquet;
//! chDB writes an LZ4-framed file (`COMPRESSION 'lz4'`) and in-format compression for
//! Arrow/Parquet.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use serde::Serialize;
use tessera_engine::{Compression, Database, Error, Format, Input, Result, TableOptions, WriteOptions};

/// The options of `--suite formats` (fields of `tessera bench`).
#[derive(Debug, Clone)]
pub(crate) struct FormatsArgs {
    pub(crate) case_rows: u64,
    pub(crate) mixed_rows: u64,
    pub(crate) cases: Vec<String>,
    pub(crate) formats: Vec<String>,
    pub(crate) compressions: Vec<String>,
    pub(crate) chdb: bool,
    pub(crate) dir: PathBuf,
    pub(crate) json: Option<PathBuf>,
    pub(crate) threads: Option<usize>,
    /// Runs of each case and operation per engine; the median is reported.
    pub(crate) runs: usize,
}

#[derive(Serialize, Debug)]
struct Measured {
    engine: &'static str,
    op: String,
    case: String,
    format: String,
    compression: String,
    rows: u64,
    seconds: f64,
    cpu_percent: f64,
    peak_rss_mb: f64,
    rows_per_second: f64,
    mb_per_second: f64,
    bytes: u64,
}

#[derive(Serialize, Debug)]
struct Report {
    suite: &'static str,
    tessera_version: String,
    chdb_version: Option<String>,
    machine: MachineFacts,
    results: Vec<Measured>,
}

/// The facts of this machine a report carries (so `tessera compare` can set two side by side).
#[derive(Serialize, Debug)]
pub(crate) struct MachineFacts {
    cpu_model: String,
    vcpus: usize,
    memory_bytes: u64,
    kernel: String,
    arch: &'static str,
    load_average_at_start: String,
}

impl MachineFacts {
    /// This machine now (the load average is read at the call).
    pub(crate) fn here() -> MachineFacts {
        MachineFacts {
            cpu_model: crate::bench::cpu_model(),
            vcpus: tessera_common::default_threads(),
            memory_bytes: tessera_common::physical_memory().unwrap_or(0),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string(),
            arch: std::env::consts::ARCH,
            load_average_at_start: std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim().to_string(),
        }
    }
}

fn case_sql(case: &str, rows: u64) -> Result<(String, SchemaRef, String)> {
    let f = |n: &str, dt: DataType| Field::new(n, dt, false);
    let (cols, fields, structure) = match case.to_ascii_lowercase().as_str() {
        "int8" => ("(number % 256)::Int8 a", vec![f("a", DataType::Int8)], "a Int8"),
        "uint64" => ("number b", vec![f("b", DataType::UInt64)], "b UInt64"),
        "string" => ("toString(number) c", vec![f("c", DataType::Utf8)], "c String"),
        "mixed" => (
            "(number % 256)::Int8 a, number b, toString(number) c",
            vec![f("a", DataType::Int8), f("b", DataType::UInt64), f("c", DataType::Utf8)],
            "a Int8, b UInt64, c String",
        ),
        other => return Err(Error::InvalidArgument(format!("--cases: unknown case {other} (Int8, UInt64, String, Mixed)"))),
    };
    Ok((format!("SELECT {cols} FROM numbers({rows})"), Arc::new(Schema::new(fields)), structure.to_string()))
}

/// Process CPU seconds so far (user + system, all threads).
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct it is given, which is valid for writes.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer to a rusage struct.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

/// Resident bytes of this process now (`/proc/self/statm`), 0 where unavailable.
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()))
        .map_or(0, |pages| pages * 4096)
}

/// Of `runs` runs of `f` (each answering as [`measure`] does), the one of median time.
fn median_of<T>(runs: usize, mut f: impl FnMut() -> Result<(T, f64, f64, u64)>) -> Result<(T, f64, f64, u64)> {
    let mut all = (0..runs.max(1)).map(|_| f()).collect::<Result<Vec<_>>>()?;
    all.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mid = all.len() / 2;
    Ok(all.swap_remove(mid))
}

/// Runs `f`, measuring wall time, process CPU time and the peak RSS (sampled every 10 ms).
fn measure<T>(f: impl FnOnce() -> Result<T>) -> Result<(T, f64, f64, u64)> {
    let stop = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(rss_bytes()));
    let sampler = {
        let (stop, peak) = (stop.clone(), peak.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(rss_bytes(), Ordering::Relaxed);
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        })
    };
    let (c0, t0) = (cpu_seconds(), Instant::now());
    let r = f();
    let (secs, cpu) = (t0.elapsed().as_secs_f64(), cpu_seconds() - c0);
    peak.fetch_max(rss_bytes(), Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    Ok((r?, secs, cpu, peak.load(Ordering::Relaxed)))
}

fn row(engine: &'static str, op: &str, case: &str, format: Format, comp: &str, rows: u64, m: (f64, f64, u64), bytes: u64) -> Measured {
    let (secs, cpu, peak) = m;
    Measured {
        engine,
        op: op.into(),
        case: case.into(),
        format: format.name().into(),
        compression: comp.into(),
        rows,
        seconds: secs,
        cpu_percent: 100.0 * cpu / secs.max(1e-9),
        peak_rss_mb: peak as f64 / 1e6,
        rows_per_second: rows as f64 / secs.max(1e-9),
        mb_per_second: bytes as f64 / 1e6 / secs.max(1e-9),
        bytes,
    }
}

fn print_row(m: &Measured) {
    println!(
        "{:<8} {:<13} {:<7} {:<27} {:<5} {:>11} {:>8.3} s {:>6.0}% {:>8.0} MB {:>8.2} Mrows/s {:>8.1} MB/s",
        m.engine, m.op, m.case, m.format, m.compression, m.rows, m.seconds, m.cpu_percent, m.peak_rss_mb,
        m.rows_per_second / 1e6, m.mb_per_second
    );
}

/// The chDB child's answer (see `benches/formats_chdb.py`).
#[derive(serde::Deserialize)]
struct ChdbResult {
    seconds: f64,
    cpu_seconds: f64,
    peak_rss_bytes: u64,
    bytes: u64,
}

/// chDB's median of `runs` runs of `op` on the case, all in one child process.
#[allow(clippy::too_many_arguments)]
fn chdb(op: &str, sql: &str, format: Format, comp: &str, path: &Path, structure: &str, dir: &Path, runs: usize) -> Result<ChdbResult> {
    let spec = serde_json::json!({
        "op": op, "sql": sql, "format": format.name(), "compression": comp,
        "path": path, "structure": structure, "dir": dir, "runs": runs,
    });
    let out = std::process::Command::new("python3")
        .arg(crate::bench::bench_script("formats_chdb.py", "--no-chdb")?)
        .arg(spec.to_string())
        .output()
        .map_err(|e| Error::Io { path: "python3".into(), source: e })?;
    if !out.status.success() {
        return Err(Error::Internal(format!("chDB child failed: {}", String::from_utf8_lossy(&out.stderr).trim())));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| Error::Internal(format!("chDB child answer: {e}")))
}

fn chdb_version() -> Option<String> {
    let out = std::process::Command::new("python3").args(["-c", "import chdb; print(chdb.__version__)"]).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

pub(crate) fn run(args: FormatsArgs) -> Result<()> {
    std::fs::create_dir_all(&args.dir).map_err(|e| Error::Io { path: args.dir.clone(), source: e })?;
    let formats: Vec<Format> = args.formats.iter().map(|f| Format::parse(f)).collect::<Result<_>>()?;
    let comps: Vec<(String, Compression)> =
        args.compressions.iter().map(|c| Ok((c.to_ascii_lowercase(), Compression::parse(c)?))).collect::<Result<_>>()?;
    let chdb_v = if args.chdb { chdb_version() } else { None };
    if args.chdb && chdb_v.is_none() {
        eprintln!("warning: python3 -c 'import chdb' failed: chDB columns left out (pip install chdb)");
    }
    let machine = MachineFacts::here();
    let db = Database::new();
    if let Some(t) = args.threads {
        db.set("max_threads", &t.to_string())?;
    }
    let mut results = Vec::new();
    for case in &args.cases {
        let rows = if case.eq_ignore_ascii_case("mixed") { args.mixed_rows } else { args.case_rows };
        let (sql, schema, structure) = case_sql(case, rows)?;
        for &format in &formats {
            for (cname, comp) in &comps {
                let file = args.dir.join(format!("tessera.{case}.{}.{cname}", format.name()));
                let opts = WriteOptions { compression: *comp };
                let (stats, s, c, p) = median_of(args.runs, || {
                    // The last run's file is removed untimed, as the chDB side does:
                    // truncating it inside the timing waits for its page cache to go.
                    let _ = std::fs::remove_file(&file);
                    measure(|| {
                        let f = std::fs::File::create(&file).map_err(|e| Error::Io { path: file.clone(), source: e })?;
                        db.write_query(&sql, format, &opts, tessera_engine::FileSink::with_capacity(tessera_engine::SINK_BUFFER_BYTES, f))
                    })
                })?;
                let bytes = stats.bytes;
                let m = row("tessera", "read", case, format, cname, stats.rows, (s, c, p), bytes);
                print_row(&m);
                results.push(m);
                let input = || std::fs::File::open(&file).map(Input::File).map_err(|e| Error::Io { path: file.clone(), source: e });
                let (n, s, c, p) = median_of(args.runs, || {
                    let r = measure(|| db.register_format("w", format, input()?, *comp, Some(schema.clone())));
                    db.register_batches("w", schema.clone(), &[])?;
                    r
                })?;
                let m = row("tessera", "write memory", case, format, cname, n, (s, c, p), bytes);
                print_row(&m);
                results.push(m);
                let ddir = args.dir.join("tessera-db");
                let (n, s, c, p) = median_of(args.runs, || {
                    let _ = std::fs::remove_dir_all(&ddir);
                    let disk = Database::open(&ddir)?;
                    disk.create_table("w", schema.clone(), TableOptions::default())?;
                    let r = measure(|| disk.insert_format("w", format, input()?, *comp));
                    drop(disk);
                    let _ = std::fs::remove_dir_all(&ddir);
                    r
                })?;
                let m = row("tessera", "write disk", case, format, cname, n, (s, c, p), bytes);
                print_row(&m);
                results.push(m);
                let _ = std::fs::remove_file(&file);
                if chdb_v.is_some() {
                    let cfile = args.dir.join(format!("chdb.{case}.{}.{cname}.data", format.name()));
                    for op in ["read", "write memory", "write disk"] {
                        let r = chdb(op, &sql, format, cname, &cfile, &structure, &args.dir.join("chdb-session"), args.runs)?;
                        let m = row("chdb", op, case, format, cname, rows, (r.seconds, r.cpu_seconds, r.peak_rss_bytes), r.bytes);
                        print_row(&m);
                        results.push(m);
                    }
                    let _ = std::fs::remove_file(&cfile);
                    let _ = std::fs::remove_dir_all(args.dir.join("chdb-session"));
                }
            }
        }
    }
    if let Some(path) = &args.json {
        let report = Report {
            suite: "formats",
            tessera_version: tessera_kernels::build_info().git_hash.to_string(),
            chdb_version: chdb_v,
            machine,
            results,
        };
        let text = serde_json::to_string_pretty(&report).map_err(|e| Error::Internal(e.to_string()))?;
        std::fs::write(path, text).map_err(|e| Error::Io { path: path.clone(), source: e })?;
    }
    Ok(())
}
