//! `tessera load --db DIR TABLE FILE`: write a Parquet or TSV file into an on-disk table,
//! one part per load, with a progress bar over the columns written.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arrow::array::ArrayRef;
use arrow::compute::concat;
use arrow::datatypes::SchemaRef;
use clap::Args;
use tessera_common::ColumnSource;
use tessera_engine::{Codec, DEFAULT_GRANULE_ROWS, Database, Error, Result, TableOptions};

use crate::progress_bar;

/// ClickBench's sort key for `hits` (its `PRIMARY KEY`, i.e. ClickHouse's ORDER BY).
pub(crate) const HITS_SORT_KEY: [&str; 5] = ["CounterID", "EventDate", "UserID", "EventTime", "WatchID"];

/// Arguments of `tessera load`.
#[derive(Args, Debug)]
pub(crate) struct LoadArgs {
    /// Database directory (created if missing).
    #[arg(long)]
    db: PathBuf,
    /// Codec for a new table: lz4, zstd, zstd(LEVEL) or none.
    #[arg(long, default_value = "lz4")]
    codec: String,
    /// Sort key of a new table, comma-separated (default for `hits`: ClickBench's).
    #[arg(long, value_delimiter = ',')]
    order_by: Option<Vec<String>>,
    /// Rows per granule of a new table.
    #[arg(long, default_value_t = DEFAULT_GRANULE_ROWS)]
    granule_rows: usize,
    /// Store plain values only (no dictionary / frame-of-reference encodings).
    #[arg(long)]
    no_encodings: bool,
    /// Merge the table's parts after loading (OPTIMIZE TABLE).
    #[arg(long)]
    optimize: bool,
    /// Table name.
    table: String,
    /// Input file: .parquet or .tsv (TSV only for `hits`, with the ClickBench schema).
    file: PathBuf,
}

/// Reads all rows of one column of the input.
type ColumnFn = Box<dyn Fn(usize) -> Result<ArrayRef> + Sync>;

pub(crate) fn run(args: LoadArgs) -> Result<()> {
    let db = Database::open(&args.db)?;
    crate::print_open_warnings(&db);
    let start = Instant::now();
    let is_hits = args.table.eq_ignore_ascii_case("hits");
    let ext = args.file.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
    let (schema, rows, get): (_, usize, ColumnFn) = if ext == "tsv" || ext == "tab" {
        if !is_hits {
            return Err(Error::InvalidArgument("TSV files carry no schema: only 'hits' loads from TSV".into()));
        }
        let size = std::fs::metadata(&args.file).map_err(|e| Error::Io { path: args.file.clone(), source: e })?.len();
        let bar = progress_bar(size, "bytes parsed");
        let t = tessera_io::read_tsv("hits", &args.file, tessera_datasets::hits::schema(), Some(&|n| bar.set_position(n)))?;
        bar.finish_and_clear();
        let t = Arc::new(t);
        let rows = t.num_rows();
        let schema = t.schema().clone();
        (schema, rows, Box::new(move |c| concat_chunks(&t.columns(&[c])?[0])))
    } else {
        let target = is_hits.then(tessera_datasets::hits::schema);
        let src = tessera_io::ParquetSource::open(&args.file, target.as_deref())?;
        let rows = src.chunk_lens().iter().sum();
        let schema = src.schema().clone();
        (schema, rows, Box::new(move |c| concat_chunks(&src.load_columns(&[c])?.remove(0))))
    };
    let (table, get): (_, ColumnFn) = match db.disk_table(&args.table) {
        Some(t) => {
            let map = column_map(&args.table, t.schema(), &schema, &args.file)?;
            (t, Box::new(move |c| get(map[c])))
        }
        None => {
            let codec = Codec::parse(&args.codec)
                .ok_or_else(|| Error::InvalidArgument(format!("--codec {}: use lz4, zstd, zstd(LEVEL) or none", args.codec)))?;
            let order_by = args.order_by.clone().unwrap_or_else(|| {
                if is_hits { HITS_SORT_KEY.iter().map(|s| s.to_string()).collect() } else { Vec::new() }
            });
            let opts = TableOptions {
                order_by,
                codec,
                granule_rows: args.granule_rows,
                encodings: !args.no_encodings,
                ..TableOptions::default()
            };
            (db.create_table(&args.table, schema.clone(), opts)?, get)
        }
    };
    let bar = progress_bar(schema.fields().len() as u64, "columns written");
    table.insert_columns(rows, &*get, &|_| bar.inc(1))?;
    bar.finish_and_clear();
    if args.optimize {
        table.optimize()?;
    }
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "loaded {rows} rows into {}/{} in {secs:.1} s ({:.2} M rows/s); table: {} rows, {} parts, {:.1} MiB on disk",
        db_dir(&args.db),
        args.table,
        rows as f64 / secs / 1e6,
        table.num_rows(),
        table.num_parts(),
        table.disk_size() as f64 / (1 << 20) as f64
    );
    Ok(())
}

/// For each column of an existing table, the index of the input column of the same name
/// (exact, else ASCII case-insensitive) and type, so that a file with its columns in
/// another order loads.
///
/// # Errors
/// [`Error::InvalidArgument`] naming the table's columns the file lacks, the file's
/// columns the table lacks (they would be dropped silently), or a column whose type
/// differs.
fn column_map(table: &str, want: &SchemaRef, have: &SchemaRef, file: &Path) -> Result<Vec<usize>> {
    let find = |n: &str| {
        have.fields()
            .iter()
            .position(|f| f.name() == n)
            .or_else(|| have.fields().iter().position(|f| f.name().eq_ignore_ascii_case(n)))
    };
    let missing: Vec<&str> =
        want.fields().iter().filter(|f| find(f.name()).is_none()).map(|f| f.name().as_str()).collect();
    let extra: Vec<&str> = have
        .fields()
        .iter()
        .filter(|h| !want.fields().iter().any(|f| f.name().eq_ignore_ascii_case(h.name())))
        .map(|f| f.name().as_str())
        .collect();
    if !missing.is_empty() || !extra.is_empty() {
        let mut what = Vec::new();
        if !missing.is_empty() {
            what.push(format!("lacks the table's column(s) {}", missing.join(", ")));
        }
        if !extra.is_empty() {
            what.push(format!("has column(s) {} the table does not", extra.join(", ")));
        }
        return Err(Error::InvalidArgument(format!(
            "{} does not fit table {table} ({} columns): the file {}",
            file.display(),
            want.fields().len(),
            what.join(" and ")
        )));
    }
    want.fields()
        .iter()
        .map(|f| {
            let i = find(f.name()).expect("checked above");
            let h = have.field(i);
            if h.data_type() != f.data_type() {
                return Err(Error::InvalidArgument(format!(
                    "{}: column {} is {}, table {table} stores {}",
                    file.display(),
                    h.name(),
                    h.data_type(),
                    f.data_type()
                )));
            }
            Ok(i)
        })
        .collect()
}

fn db_dir(p: &Path) -> String {
    p.display().to_string()
}

fn concat_chunks(chunks: &[ArrayRef]) -> Result<ArrayRef> {
    match chunks {
        [one] => Ok(one.clone()),
        many => Ok(concat(&many.iter().map(|a| a.as_ref()).collect::<Vec<_>>())?),
    }
}
