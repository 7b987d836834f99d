//! `tessera`: generate the ClickBench hits table, run SQL on Parquet/TSV files, and
//! benchmark queries the way ClickHouse benchmarks ClickHouse.

mod bench;
mod compare;
mod formats_bench;
mod load;
mod output;
mod sysbench;
mod throughput;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use tessera_engine::{CancelToken, Database, Error, Result};

// The CLI binary picks jemalloc; the library crates leave the allocator to their users.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Returns jemalloc's freed (dirty and muzzy) pages of every arena to the OS: the hook the
/// engine calls when a query spills ([`tessera_engine::memory`]). Freed pages are otherwise
/// kept `dirty_decay_ms` for reuse (`.cargo/config.toml`).
fn purge_jemalloc() {
    // A failure (which `jemalloc_purge_returns_zero` rules out) leaves the pages for decay.
    let _ = jemalloc_purge();
}

/// `mallctl("arena.<MALLCTL_ARENAS_ALL>.purge")` (4096 in jemalloc 5): 0, or an errno.
fn jemalloc_purge() -> libc::c_int {
    const PURGE_ALL: &[u8] = b"arena.4096.purge\0";
    // SAFETY: the name is NUL-terminated; a void mallctl takes null old and new pointers and
    // zero lengths, and writes nothing.
    unsafe {
        tikv_jemalloc_sys::mallctl(
            PURGE_ALL.as_ptr().cast(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    }
}

fn long_version() -> &'static str {
    let b = tessera_kernels::build_info();
    Box::leak(
        format!(
            "{} (git {}, {} kernels (compiled: {}; TESSERA_SIMD={}), target {}, CPU SIMD: {})",
            b.version,
            b.git_hash,
            b.simd_level,
            b.simd_compiled,
            b.simd_build,
            b.target_arch,
            tessera_kernels::cpu_simd_features().join(",")
        )
        .into_boxed_str(),
    )
}

#[derive(Parser, Debug)]
#[command(name = "tessera", version = long_version(), about = "Tessera: an embeddable columnar OLAP engine")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Generate a dataset.
    Gen {
        #[command(subcommand)]
        what: GenWhat,
    },
    /// Run one SQL statement and print the answer.
    Query {
        /// Tables to query, as NAME=FILE (.parquet or .tsv); repeatable. A Parquet file is
        /// streamed: the query decodes the chunks and columns it reads, a few at a time, so
        /// memory stays bounded whatever the file size. A TSV file is parsed into memory.
        #[arg(long = "load", value_name = "NAME=FILE")]
        load: Vec<String>,
        /// Output format: `table` (a pretty table, the default) or a ClickHouse format name,
        /// any case: Native, RowBinary, RowBinaryWithNames, RowBinaryWithNamesAndTypes,
        /// TabSeparated (TSV), TabSeparatedWithNames (TSVWithNames), CSV, CSVWithNames,
        /// JSONEachRow, Parquet, Arrow, ArrowStream. Formats are written batch by batch.
        /// For `INSERT INTO t FORMAT F` without data, the rows are read from standard input.
        #[arg(long, default_value = "table")]
        format: String,
        /// Compression: none, lz4, zstd or zstd(LEVEL). Native, RowBinary and the text
        /// formats get ClickHouse compressed blocks (checksummed, as clickhouse-client
        /// --compression); Arrow and Parquet compress inside the format. For an
        /// `INSERT .. FORMAT` from standard input: what the input was written with.
        #[arg(long, default_value = "none")]
        compression: String,
        /// Write the answer to this file instead of standard output.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Worker threads (max_threads); default: vCPUs.
        #[arg(long)]
        threads: Option<usize>,
        /// Database directory with on-disk tables (see `tessera load`).
        #[arg(long)]
        db: Option<PathBuf>,
        /// Print what the executor did to stderr after the answer: key layout, groups, rows,
        /// peak accounted memory, and what an external GROUP BY spilled (runs, bytes).
        #[arg(long)]
        profile: bool,
        /// The SQL statement.
        sql: String,
    },
    /// Benchmark ClickBench queries (1 warm-up + N runs per query; mean, min, median), data
    /// formats with `--suite formats`, or sysbench's micro-workloads with `--suite sysbench`.
    #[command(after_help = "Examples:\n  \
        tessera bench                                         # ClickBench Q19, Q33, Q34 on 1M generated rows\n  \
        tessera bench --load hits=hits.parquet --queries 19,33,34 --runs 3 --json out.json\n  \
        tessera bench --suite formats --case-rows 1000000 --mixed-rows 600000 --formats Native,CSV --compressions none,lz4 --json formats.json\n  \
        tessera bench --suite sysbench --table-size 1000000 --duration 3 --json sysbench.json   # 1 and vCPUs clients, beside DuckDB and chDB")]
    Bench(bench::BenchArgs),
    /// Compare two `tessera bench --json` files: per-query times, gain %, totals, QPS;
    /// Markdown on stdout, optional SVG chart.
    Compare(compare::CompareArgs),
    /// Load a Parquet or TSV file into an on-disk table of a database directory.
    Load(load::LoadArgs),
}

#[derive(Subcommand, Debug)]
enum GenWhat {
    /// The ClickBench `hits` table (105 columns), written as Parquet (ZSTD).
    Hits {
        /// Rows to generate.
        #[arg(long, default_value_t = 1_000_000)]
        rows: u64,
        /// Seed: the same seed and rows give the same file.
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Output file.
        #[arg(long)]
        out: PathBuf,
    },
}


/// Exit codes: 0 success (also when the reader of stdout went away), 1 I/O, data or
/// internal errors, 2 bad arguments or settings, 3 an invalid query (syntax, names, types),
/// 4 a valid query Tessera does not support yet, 130 cancelled by Ctrl-C (a second Ctrl-C
/// exits at once).
fn main() -> ExitCode {
    let cli = Cli::parse();
    tessera_engine::memory::set_release_hook(purge_jemalloc);
    let cancel = CancelToken::new();
    let on_ctrl_c = cancel.clone();
    // Without a handler Ctrl-C still ends the process, just without the clean stop.
    let _ = ctrlc::set_handler(move || {
        if on_ctrl_c.is_cancelled() {
            std::process::exit(130);
        }
        on_ctrl_c.cancel();
        eprintln!("\ncancelling the running query (Ctrl-C again to exit at once)");
    });
    match run(cli, &cancel) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            use std::io::Write;
            // stderr may be closed too: never panic while reporting.
            let _ = writeln!(std::io::stderr(), "error: {e}");
            ExitCode::from(match e {
                Error::InvalidArgument(_) => 2,
                Error::Parse(_)
                | Error::Plan(_)
                | Error::UnknownTable(_)
                | Error::UnknownColumn { .. }
                | Error::TypeMismatch(_) => 3,
                Error::NotImplemented(_) => 4,
                Error::Cancelled => 130,
                _ => 1,
            })
        }
    }
}

fn run(cli: Cli, cancel: &CancelToken) -> Result<()> {
    match cli.cmd {
        Cmd::Gen { what: GenWhat::Hits { rows, seed, out } } => {
            generate_hits(&out, rows, seed)?;
            Ok(())
        }
        Cmd::Query { load, format, compression, out, threads, db, profile, sql } => {
            let compression = tessera_engine::Compression::parse(&compression)?;
            let format = if format.eq_ignore_ascii_case("table") || format.eq_ignore_ascii_case("pretty") {
                None
            } else {
                Some(tessera_engine::Format::parse(&format)?)
            };
            // Only a CREATE TABLE may create the database directory; any other statement
            // on a missing directory is an error, not an empty database.
            let creates = sql.trim_start().get(..6).is_some_and(|w| w.eq_ignore_ascii_case("create"));
            let db = match db {
                Some(dir) if creates => {
                    let db = Database::open(&dir)?;
                    print_open_warnings(&db);
                    db
                }
                Some(dir) => open_db(&dir)?,
                None => Database::new(),
            };
            if let Some(t) = threads {
                db.set("max_threads", &t.to_string())?;
            }
            let mut seen = Vec::new();
            for spec in &load {
                let (name, path) = parse_load(spec)?;
                let lower = name.to_ascii_lowercase();
                if seen.contains(&lower) {
                    return Err(Error::InvalidArgument(format!("--load {spec}: table '{name}' is loaded twice")));
                }
                if db.disk_table(&name).is_some() {
                    return Err(Error::InvalidArgument(format!("--load {spec}: table '{name}' is an on-disk table of --db")));
                }
                seen.push(lower);
                load_table(&db, &name, &path, true)?;
            }
            let p = if tessera_engine::reads_input(&sql) {
                let stdin = std::io::stdin();
                db.sql_with_input(&sql, tessera_engine::Input::Stream(Box::new(stdin)), compression)?;
                tessera_engine::Profile::default()
            } else {
                output::answer(&db, &sql, format, compression, out.as_deref(), cancel)?
            };
            if profile {
                eprintln!(
                    "profile: layout {} groups {} rows_in {} morsels_skipped {} condition_cache_rows_skipped {} \
                     morsels_compacted {} morsels_sparse {} radix_partitions {} partial_flushes {} scatter_key_copies {} \
                     peak_memory {:.1} MiB spills {} spilled_runs {} spilled {:.1} MiB",
                    p.layout.unwrap_or("-"),
                    p.groups,
                    p.rows_in,
                    p.morsels_skipped,
                    p.condition_cache_rows_skipped,
                    p.morsels_compacted,
                    p.morsels_sparse,
                    p.radix_partitions,
                    p.partial_flushes,
                    p.scatter_key_copies,
                    p.peak_memory_bytes as f64 / (1u64 << 20) as f64,
                    p.spills,
                    p.spilled_runs,
                    p.spilled_bytes as f64 / (1u64 << 20) as f64
                );
            }
            Ok(())
        }
        Cmd::Bench(args) => bench::run(args, cancel),
        Cmd::Compare(args) => compare::run(args),
        Cmd::Load(args) => load::run(args),
    }
}

/// Opens an existing database directory for a command that only reads it (`query`,
/// `bench`): a missing directory is an error, not a new empty database. Prints the open
/// warnings (parts moved to `detached/`...) to stderr.
pub(crate) fn open_db(dir: &Path) -> Result<Database> {
    let db = Database::open_existing(dir)?;
    print_open_warnings(&db);
    Ok(db)
}

/// Prints [`Database::open_warnings`] to stderr, one `warning:` line each.
pub(crate) fn print_open_warnings(db: &Database) {
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    for w in db.open_warnings() {
        let _ = writeln!(err, "warning: {w}");
    }
}

/// Splits `NAME=FILE`.
pub(crate) fn parse_load(spec: &str) -> Result<(String, PathBuf)> {
    match spec.split_once('=') {
        Some((n, p)) if !n.is_empty() && !p.is_empty() => Ok((n.to_string(), PathBuf::from(p))),
        _ => Err(Error::InvalidArgument(format!("--load expects NAME=FILE, got '{spec}'"))),
    }
}

/// Registers `path` as table `name`: Parquet lazily, streamed morsel by morsel when
/// `streaming` (nothing kept between queries) or else read whole on first use and kept; TSV
/// parsed now (always in memory). A Parquet file that has every column of ClickBench's `hits` table gets its
/// typed schema (the official `hits.parquet` stores EventTime as Int64 seconds and
/// EventDate as UInt16 days); TSV has no schema of its own and loads only as `hits`.
pub(crate) fn load_table(db: &Database, name: &str, path: &Path, streaming: bool) -> Result<()> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
    let hits = tessera_datasets::hits::schema();
    if ext == "tsv" || ext == "tab" {
        if !name.eq_ignore_ascii_case("hits") {
            return Err(Error::InvalidArgument(
                "TSV files carry no schema: only the table 'hits' (ClickBench schema) loads from TSV".into(),
            ));
        }
        let size = std::fs::metadata(path).map_err(|e| Error::Io { path: path.into(), source: e })?.len();
        let bar = progress_bar(size, "bytes");
        let t = tessera_io::read_tsv(name, path, hits, Some(&|n| bar.set_position(n)))?;
        bar.finish_and_clear();
        db.register_table(t);
        return Ok(());
    }
    if path.is_dir() {
        return Err(Error::InvalidArgument(format!("{} is a directory, not a Parquet file", path.display())));
    }
    let register = |target: Option<arrow::datatypes::SchemaRef>| match (streaming, target) {
        (true, target) => db.register_parquet_streaming(name, path, target),
        (false, None) => db.register_parquet(name, path),
        (false, Some(target)) => db.register_parquet_with_schema(name, path, target),
    };
    register(None)?;
    if let Ok(src) = tessera_io::ParquetSource::open(path, None) {
        warn_skipped(path, src.skipped_columns());
    }
    // ClickBench's files store EventTime as Int64 seconds, EventDate as UInt16 days, strings
    // as bare BINARY: every column named like a hits column gets the official type of
    // create.sql, column by column (a file with a subset of the columns too). Where a column
    // cannot take that type, the file keeps its own types.
    let Some(table) = db.table(name) else { return Ok(()) };
    let fields: Vec<arrow::datatypes::FieldRef> = table
        .schema()
        .fields()
        .iter()
        .map(|f| match hits.fields().iter().find(|h| h.name().eq_ignore_ascii_case(f.name())) {
            Some(h) => Arc::new(f.as_ref().clone().with_data_type(h.data_type().clone())),
            None => f.clone(),
        })
        .collect();
    let target = Arc::new(arrow::datatypes::Schema::new(fields));
    if target.as_ref() != table.schema().as_ref() && register(Some(target.clone())).is_err() {
        register(None)?;
    }
    Ok(())
}

/// Prints a warning naming the Parquet columns left out of a table for their types.
pub(crate) fn warn_skipped(path: &Path, skipped: &[(String, arrow::datatypes::DataType)]) {
    if !skipped.is_empty() {
        let cols: Vec<String> = skipped.iter().map(|(n, t)| format!("{n} ({t})")).collect();
        eprintln!(
            "warning: {}: column(s) of types Tessera does not support left out of the table: {}",
            path.display(),
            cols.join(", ")
        );
    }
}

pub(crate) fn progress_bar(len: u64, unit: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    let style = ProgressStyle::with_template(&format!("{{bar:40}} {{pos}}/{{len}} {unit} ({{eta}})"))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar
}

/// Generates the hits table into `out` with a progress bar; prints rows/s.
pub(crate) fn generate_hits(out: &Path, rows: u64, seed: u64) -> Result<()> {
    let bar = progress_bar(rows, "rows");
    let start = Instant::now();
    let opts = tessera_datasets::GenOptions::new(rows).with_seed(seed);
    tessera_datasets::write_parquet(out, &opts, &|n| bar.set_position(n))?;
    bar.finish_and_clear();
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "generated {rows} rows of hits into {} in {secs:.1} s ({:.2} M rows/s)",
        out.display(),
        rows as f64 / secs / 1e6
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn command_line_definition_is_consistent() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }

    /// The release hook's mallctl name exists in the linked jemalloc (a wrong name would
    /// fail silently at run time, leaving freed pages for decay).
    #[test]
    fn jemalloc_purge_returns_zero() {
        let junk: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 1 << 20]).collect();
        drop(junk);
        assert_eq!(super::jemalloc_purge(), 0);
    }

    /// The benchmarks' Python helpers are found in the source tree; a missing one is an
    /// error naming where it looked and the flag that leaves its engines out.
    #[test]
    fn bench_scripts_are_found_or_named() {
        for name in ["formats_chdb.py", "sysbench_ref.py"] {
            assert!(crate::bench::bench_script(name, "--no-chdb").unwrap().is_file(), "{name}");
        }
        let e = crate::bench::bench_script("no_such_script.py", "--no-chdb").unwrap_err().to_string();
        assert!(e.contains("benches/no_such_script.py not found") && e.contains("--no-chdb"), "{e}");
    }
}
