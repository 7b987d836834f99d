//! A long-running SQL worker for the differential fuzzer (`scripts/fuzz.py`):
//! `cargo run --release --example sql_worker -- [OPTIONS] NAME=FILE.parquet ...`.
//!
//! Makes each Parquet file a table of the source `--source` names, prints one hello line
//! (build facts and the schema of every table), then reads one query per line on stdin (a
//! JSON string) and answers each with one JSON line on stdout. Sources:
//!
//! - `memory` (the default): `Database::register_parquet`, columns decoded once and kept;
//! - `stream`: `Database::register_parquet_streaming`, each query decodes its morsels;
//! - `disk`: an on-disk table in the database directory `--store DIR` (created if missing),
//!   sorted by the columns `--order-by NAME=COL,COL` names, granules of `--granule-rows N`
//!   rows, the file's rows (in file order) inserted as `--parts N` parts of uneven sizes
//!   (`--optimize` merges them); a table the directory already holds with the file's row
//!   count is reused (a worker restarted after a crash reopens it), one with another count
//!   is an error. Queries then go through the part reader: granule pruning, PREWHERE,
//!   sparse blocks, the decoded-block and condition caches.
//!
//! Answers:
//!
//! ```text
//! {"ok":true,"types":["Int64","Float64",..],"rows":[[1,2.5],[null,"nan"],..]}
//! {"ok":false,"kind":"NotImplemented","msg":"HAVING"}
//! {"ok":false,"kind":"Panic","msg":"index out of bounds .."}
//! ```
//!
//! Values keep what a comparison needs: integers (also Decimal128 with scale 0, i.e. SUM of
//! 64-bit integers) as JSON integers, floats as JSON numbers or the strings `"nan"`,
//! `"-nan"` (sign bit set), `"inf"`, `"-inf"`; Date32 as days since 1970-01-01; timestamps
//! as integers in the unit named by the type (`Timestamp(s)`, `Timestamp(ms)`, ..); Binary
//! as lowercase hex; NULL as `null`. `kind` is the name of the [`tessera::Error`] variant, or
//! `Panic` when the query panicked (on the calling thread or on an executor thread: the
//! panic hook records every panic message while a query runs). A stack overflow aborts the
//! process: the driver sees EOF and restarts the worker.

use std::fmt::Write as _;
use std::io::{BufRead, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::Mutex;

use tessera::arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use tessera::arrow::datatypes::*;
use tessera::{Database, Error, TableOptions};

/// Panic messages of the running query, from any thread (set by the panic hook).
static PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn main() {
    std::panic::set_hook(Box::new(|info| {
        let msg = match (info.payload().downcast_ref::<&str>(), info.payload().downcast_ref::<String>()) {
            (Some(s), _) => (*s).to_string(),
            (_, Some(s)) => s.clone(),
            _ => "non-string panic payload".to_string(),
        };
        let at = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
        if let Ok(mut p) = PANICS.lock() {
            p.push(format!("{msg}{at}"));
        }
    }));
    let opts = match Options::parse(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("sql_worker: {e}\nusage: sql_worker [--source memory|stream|disk] [--store DIR] [--granule-rows N] [--parts N] [--optimize] [--order-by NAME=COL,..] NAME=FILE.parquet ...");
            std::process::exit(2);
        }
    };
    let db = match &opts.store {
        Some(dir) => Database::open(dir).unwrap_or_else(|e| {
            eprintln!("sql_worker: cannot open {}: {e}", dir.display());
            std::process::exit(1);
        }),
        None => Database::new(),
    };
    let mut tables = String::new();
    for t in &opts.tables {
        let name = t.name.as_str();
        if let Err(e) = add_table(&db, &opts, t) {
            eprintln!("sql_worker: cannot make table {name} of {}: {e}", t.path.display());
            std::process::exit(1);
        }
        let table = db.table(name).expect("just made");
        let cols: Vec<String> = table
            .schema()
            .fields()
            .iter()
            .map(|f| format!("[{},{}]", json_str(f.name()), json_str(&type_name(f.data_type()))))
            .collect();
        if !tables.is_empty() {
            tables.push(',');
        }
        let _ = write!(tables, "{}:[{}]", json_str(name), cols.join(","));
    }
    let info = tessera::build_info();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let _ = writeln!(
        out,
        "{{\"hello\":true,\"git\":{},\"source\":{},\"simd_compiled\":{},\"simd_level\":{},\"tables\":{{{tables}}}}}",
        json_str(info.git_hash),
        json_str(opts.source.name()),
        json_str(info.simd_compiled),
        json_str(info.simd_level)
    );
    let _ = out.flush();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        let answer = match serde_json::from_str::<String>(&line) {
            Ok(sql) => run(&db, &sql),
            Err(e) => format!("{{\"ok\":false,\"kind\":\"BadRequest\",\"msg\":{}}}", json_str(&e.to_string())),
        };
        if writeln!(out, "{answer}").and_then(|_| out.flush()).is_err() {
            break;
        }
    }
}

/// A table to make: `NAME=FILE`, and its sort key from `--order-by NAME=COL,COL..`.
struct TableArg {
    name: String,
    path: PathBuf,
    order_by: Vec<String>,
}

/// Where the tables live (`--source`).
#[derive(Clone, Copy, PartialEq)]
enum Source {
    Memory,
    Stream,
    Disk,
}

impl Source {
    fn parse(s: &str) -> Result<Source, String> {
        match s {
            "memory" => Ok(Source::Memory),
            "stream" => Ok(Source::Stream),
            "disk" => Ok(Source::Disk),
            _ => Err(format!("unknown source '{s}'")),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Source::Memory => "memory",
            Source::Stream => "stream",
            Source::Disk => "disk",
        }
    }
}

/// The command line.
struct Options {
    source: Source,
    store: Option<PathBuf>,
    granule_rows: usize,
    parts: usize,
    optimize: bool,
    tables: Vec<TableArg>,
}

impl Options {
    fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
        let mut o = Options { source: Source::Memory, store: None, granule_rows: 8192, parts: 1, optimize: false, tables: Vec::new() };
        let mut keys: Vec<(String, Vec<String>)> = Vec::new();
        while let Some(a) = args.next() {
            let mut value = |flag: &str| args.next().ok_or_else(|| format!("{flag} needs a value"));
            match a.as_str() {
                "--source" => o.source = Source::parse(&value("--source")?)?,
                "--store" => o.store = Some(PathBuf::from(value("--store")?)),
                "--granule-rows" => o.granule_rows = value("--granule-rows")?.parse().map_err(|e| format!("--granule-rows: {e}"))?,
                "--parts" => o.parts = value("--parts")?.parse().map_err(|e| format!("--parts: {e}"))?,
                "--optimize" => o.optimize = true,
                "--order-by" => {
                    let v = value("--order-by")?;
                    let (name, cols) = v.split_once('=').ok_or_else(|| format!("--order-by '{v}' is not NAME=COL,.."))?;
                    keys.push((name.into(), cols.split(',').filter(|c| !c.is_empty()).map(String::from).collect()));
                }
                f if f.starts_with("--") => return Err(format!("unknown option '{f}'")),
                _ => {
                    let (name, path) = a.split_once('=').ok_or_else(|| format!("'{a}' is not NAME=FILE"))?;
                    o.tables.push(TableArg { name: name.into(), path: path.into(), order_by: Vec::new() });
                }
            }
        }
        for (name, cols) in keys {
            let t = o.tables.iter_mut().find(|t| t.name == name).ok_or_else(|| format!("--order-by names no table '{name}'"))?;
            t.order_by = cols;
        }
        if o.source == Source::Disk && (o.store.is_none() || o.granule_rows == 0 || o.parts == 0) {
            return Err("--source disk needs --store DIR, --granule-rows and --parts of at least 1".into());
        }
        Ok(o)
    }
}

/// Makes table `t` in `db` from its Parquet file, as `opts.source` says.
fn add_table(db: &Database, opts: &Options, t: &TableArg) -> tessera::Result<()> {
    match opts.source {
        Source::Memory => return db.register_parquet(&t.name, &t.path),
        Source::Stream => return db.register_parquet_streaming(&t.name, &t.path, None),
        Source::Disk => {}
    }
    // The file's rows, in file order, through an in-memory table.
    let scratch = Database::new();
    scratch.register_parquet("t", &t.path)?;
    let file = scratch.table("t").expect("just registered");
    let rows: usize = file.chunk_lens().iter().sum();
    if let Some(existing) = db.disk_table(&t.name) {
        let have = existing.num_rows();
        if have != rows {
            return Err(Error::InvalidArgument(format!("the store's table {} has {have} rows, the file {rows}", t.name)));
        }
        return Ok(());
    }
    let options = TableOptions { order_by: t.order_by.clone(), granule_rows: opts.granule_rows, ..TableOptions::default() };
    let table = db.create_table(&t.name, file.schema().clone(), options)?;
    // The file's rows as one batch under the on-disk table's schema (fields may differ in
    // nullability; the fuzzer's tables are small), cut into `parts` slices of uneven sizes:
    // part k gets a share proportional to k + 1 (an empty one, for fewer rows than parts,
    // writes nothing).
    let columns = file.columns(&(0..file.schema().fields().len()).collect::<Vec<_>>())?;
    let whole = columns
        .iter()
        .map(|chunks| tessera::arrow::compute::concat(&chunks.iter().map(|a| a.as_ref()).collect::<Vec<_>>()))
        .collect::<std::result::Result<Vec<_>, _>>()
        .and_then(|cols| RecordBatch::try_new(table.schema().clone(), cols))
        .map_err(|e| Error::Internal(e.to_string()))?;
    let weights: usize = (1..=opts.parts).sum();
    let mut at = 0;
    for k in 0..opts.parts {
        let end = if k + 1 == opts.parts { rows } else { at + rows * (k + 1) / weights };
        db.insert(&t.name, &[whole.slice(at, end - at)])?;
        at = end;
    }
    if opts.optimize {
        db.optimize(&t.name)?;
    }
    Ok(())
}

/// Runs one query and renders the answer line.
fn run(db: &Database, sql: &str) -> String {
    PANICS.lock().map(|mut p| p.clear()).ok();
    let result = catch_unwind(AssertUnwindSafe(|| db.sql(sql)));
    let panics = PANICS.lock().map(|mut p| std::mem::take(&mut *p)).unwrap_or_default();
    if !panics.is_empty() {
        return error_line("Panic", &panics.join(" | "));
    }
    match result {
        Err(_) => error_line("Panic", "panic without message"),
        Ok(Err(e)) => error_line(kind(&e), &e.to_string()),
        Ok(Ok(batches)) => render(&batches),
    }
}

/// The variant name of `e`.
fn kind(e: &Error) -> &'static str {
    match e {
        Error::Parse(_) => "Parse",
        Error::UnknownTable(_) => "UnknownTable",
        Error::UnknownColumn { .. } => "UnknownColumn",
        Error::TypeMismatch(_) => "TypeMismatch",
        Error::Plan(_) => "Plan",
        Error::InvalidArgument(_) => "InvalidArgument",
        Error::NotImplemented(_) => "NotImplemented",
        Error::Io { .. } => "Io",
        Error::Corrupt { .. } => "Corrupt",
        Error::Overflow(_) => "Overflow",
        Error::ResourcesExhausted(_) => "ResourcesExhausted",
        Error::Cancelled => "Cancelled",
        Error::Internal(_) => "Internal",
        _ => "Other",
    }
}

fn error_line(kind: &str, msg: &str) -> String {
    format!("{{\"ok\":false,\"kind\":{},\"msg\":{}}}", json_str(kind), json_str(msg))
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string always serializes")
}

/// Short type names the driver understands.
fn type_name(dt: &DataType) -> String {
    match dt {
        DataType::Timestamp(unit, _) => format!(
            "Timestamp({})",
            match unit {
                TimeUnit::Second => "s",
                TimeUnit::Millisecond => "ms",
                TimeUnit::Microsecond => "us",
                TimeUnit::Nanosecond => "ns",
            }
        ),
        DataType::Decimal128(p, s) => format!("Decimal128({p},{s})"),
        other => format!("{other:?}"),
    }
}

fn render(batches: &[RecordBatch]) -> String {
    let mut s = String::from("{\"ok\":true,\"types\":[");
    if let Some(b) = batches.first() {
        let names: Vec<String> = b.schema().fields().iter().map(|f| json_str(&type_name(f.data_type()))).collect();
        s.push_str(&names.join(","));
    }
    s.push_str("],\"rows\":[");
    let mut first_row = true;
    for b in batches {
        for r in 0..b.num_rows() {
            s.push_str(if first_row { "[" } else { ",[" });
            first_row = false;
            for (c, col) in b.columns().iter().enumerate() {
                if c > 0 {
                    s.push(',');
                }
                if let Err(e) = value(&mut s, col, r) {
                    return error_line("WorkerUnsupportedType", &e);
                }
            }
            s.push(']');
        }
    }
    s.push_str("]}");
    s
}

fn float(s: &mut String, v: f64) {
    if v.is_nan() {
        s.push_str(if v.is_sign_negative() { "\"-nan\"" } else { "\"nan\"" });
    } else if v.is_infinite() {
        s.push_str(if v > 0.0 { "\"inf\"" } else { "\"-inf\"" });
    } else {
        let _ = write!(s, "{v:?}");
    }
}

/// Appends row `r` of `col` as JSON; `Err` names a type the worker does not render.
fn value(s: &mut String, col: &ArrayRef, r: usize) -> Result<(), String> {
    if col.is_null(r) {
        s.push_str("null");
        return Ok(());
    }
    macro_rules! int {
        ($t:ty) => {{
            let _ = write!(s, "{}", col.as_primitive::<$t>().value(r));
        }};
    }
    match col.data_type() {
        DataType::Int8 => int!(Int8Type),
        DataType::Int16 => int!(Int16Type),
        DataType::Int32 => int!(Int32Type),
        DataType::Int64 => int!(Int64Type),
        DataType::UInt8 => int!(UInt8Type),
        DataType::UInt16 => int!(UInt16Type),
        DataType::UInt32 => int!(UInt32Type),
        DataType::UInt64 => int!(UInt64Type),
        DataType::Date32 => int!(Date32Type),
        DataType::Timestamp(TimeUnit::Second, _) => int!(TimestampSecondType),
        DataType::Timestamp(TimeUnit::Millisecond, _) => int!(TimestampMillisecondType),
        DataType::Timestamp(TimeUnit::Microsecond, _) => int!(TimestampMicrosecondType),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => int!(TimestampNanosecondType),
        DataType::Float32 => float(s, f64::from(col.as_primitive::<Float32Type>().value(r))),
        DataType::Float64 => float(s, col.as_primitive::<Float64Type>().value(r)),
        DataType::Decimal128(_, scale) => {
            let v = col.as_primitive::<Decimal128Type>().value(r);
            if *scale == 0 {
                let _ = write!(s, "{v}");
            } else {
                // The driver parses the string as a decimal.
                let _ = write!(s, "\"{}\"", Decimal128Type::format_decimal(v, 38, *scale));
            }
        }
        DataType::Utf8 => s.push_str(&json_str(col.as_string::<i32>().value(r))),
        DataType::LargeUtf8 => s.push_str(&json_str(col.as_string::<i64>().value(r))),
        DataType::Utf8View => s.push_str(&json_str(col.as_string_view().value(r))),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => {
            let bytes: &[u8] = match col.data_type() {
                DataType::Binary => col.as_binary::<i32>().value(r),
                DataType::LargeBinary => col.as_binary::<i64>().value(r),
                _ => col.as_binary_view().value(r),
            };
            s.push('"');
            for b in bytes {
                let _ = write!(s, "{b:02x}");
            }
            s.push('"');
        }
        DataType::Boolean => s.push_str(if col.as_boolean().value(r) { "true" } else { "false" }),
        other => return Err(format!("column type {other:?}")),
    }
    Ok(())
}
