//! `tessera load --db DIR TABLE FILE`: write a Parquet or TSV file into an on-disk table,
//! streaming: the input is read a block of rows at a time (Parquet: whole row groups, up to
//! `--max-insert-block-rows` rows), each block is sorted by the table's key and written as
//! one part, like ClickHouse's `max_insert_block_size`. A progress bar counts rows written.
//!
//! `--format F` (any format of `tessera_formats`, from a file or `-` for standard input)
//! streams the same way: batches are gathered into blocks of `--max-insert-block-rows`
//! rows, each written as one part.
//!
//! A load that fails after some blocks were written keeps those parts (each part is
//! committed on its own, as ClickHouse keeps the blocks of an INSERT inserted before an
//! error); the error message says how many rows and parts were committed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arrow::array::ArrayRef;
use arrow::datatypes::SchemaRef;
use clap::Args;
use tessera_engine::{
    Codec, Compression, DEFAULT_GRANULE_ROWS, Database, DiskTable, Error, Format, Input as FormatInput, ReadOptions, Result,
    TableOptions,
};

use crate::progress_bar;

/// ClickBench's sort key for `hits` (its `PRIMARY KEY`, i.e. ClickHouse's ORDER BY).
pub(crate) const HITS_SORT_KEY: [&str; 5] = ["CounterID", "EventDate", "UserID", "EventTime", "WatchID"];

/// Rows per insert block (one part each) unless `--max-insert-block-rows` says otherwise:
/// 2^21 = 2,097,152. ClickHouse's `max_insert_block_size` is 1,048,449; fewer, larger parts
/// suit Tessera's scans better. Peak memory of a load is about one block of decoded rows
/// plus its sort: ~1.5 GiB for the 105 columns of `hits` (see the README's numbers).
pub(crate) const DEFAULT_MAX_INSERT_BLOCK_ROWS: usize = 1 << 21;

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
    /// Rows per part written: the input is read, sorted and written this many rows at a
    /// time (Parquet: whole row groups, at least one), bounding memory.
    #[arg(long, default_value_t = DEFAULT_MAX_INSERT_BLOCK_ROWS)]
    max_insert_block_rows: usize,
    /// Input format, a ClickHouse name (Native, RowBinaryWithNamesAndTypes, CSV, TSV,
    /// JSONEachRow, Parquet, Arrow, ArrowStream, ..., any case). Without it the file's
    /// extension decides: .parquet (Parquet, read row group by row group) or .tsv
    /// (ClickBench's `hits` TSV). Formats without column types need an existing table
    /// (or the table `hits`, which gets ClickBench's schema).
    #[arg(long)]
    format: Option<String>,
    /// Compression of the input with --format: none, lz4 or zstd (ClickHouse compressed
    /// blocks, as `tessera query --compression` writes them; Arrow and Parquet say their
    /// own compression).
    #[arg(long, default_value = "none")]
    compression: String,
    /// Table name.
    table: String,
    /// Input file (`-` for standard input, with --format).
    file: PathBuf,
}

/// The input, block by block: `next_block()` returns the next block's columns in the
/// input's column order (as `columns(indices)` would, chunked), or `None` at the end.
struct Input {
    schema: SchemaRef,
    rows: usize,
    /// Row ranges of the blocks, as (first unit, end unit) of row groups or chunks.
    blocks: Vec<(usize, usize)>,
    load: Box<dyn Fn(&[usize], (usize, usize)) -> Result<Vec<Vec<ArrayRef>>>>,
}

/// Cuts `lens` (rows per row group or chunk) into consecutive runs of at least one unit and
/// at most `max_rows` rows (a single unit may exceed it).
fn cut_blocks(lens: &[usize], max_rows: usize) -> Vec<(usize, usize)> {
    let mut blocks = Vec::new();
    let (mut start, mut rows) = (0, 0);
    for (i, &n) in lens.iter().enumerate() {
        if i > start && rows + n > max_rows {
            blocks.push((start, i));
            (start, rows) = (i, 0);
        }
        rows += n;
    }
    if start < lens.len() {
        blocks.push((start, lens.len()));
    }
    blocks
}

fn open_input(args: &LoadArgs, is_hits: bool) -> Result<Input> {
    let ext = args.file.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
    if ext == "tsv" || ext == "tab" {
        if !is_hits {
            return Err(Error::InvalidArgument("TSV files carry no schema: only 'hits' loads from TSV".into()));
        }
        // The reader maps the file and decides the column types (Utf8, or Binary where a
        // value is not UTF-8) in one pass over the bytes; blocks of pieces (about
        // CHUNK_ROWS rows each) are then parsed one at a time.
        let tsv = Arc::new(tessera_io::TsvBlocks::open(&args.file, tessera_datasets::hits::schema())?);
        let per_block = (args.max_insert_block_rows / tessera_io::CHUNK_ROWS).max(1);
        let n = tsv.pieces();
        return Ok(Input {
            schema: tsv.schema().clone(),
            rows: tsv.rows(),
            blocks: (0..n).step_by(per_block).map(|k| (k, (k + per_block).min(n))).collect(),
            load: Box::new(move |cols, (k0, k1)| {
                let all = tsv.read(k0..k1, None)?;
                Ok(cols.iter().map(|&c| all[c].clone()).collect())
            }),
        });
    }
    let target = is_hits.then(tessera_datasets::hits::schema);
    let src = tessera_io::ParquetSource::open(&args.file, target.as_deref())?;
    crate::warn_skipped(&args.file, src.skipped_columns());
    let lens = src.row_group_rows();
    Ok(Input {
        schema: src.schema().clone(),
        rows: lens.iter().sum(),
        blocks: cut_blocks(&lens, args.max_insert_block_rows),
        load: Box::new(move |cols, (g0, g1)| src.load_row_groups(cols, g0..g1)),
    })
}

pub(crate) fn run(args: LoadArgs) -> Result<()> {
    if args.max_insert_block_rows == 0 {
        return Err(Error::InvalidArgument("--max-insert-block-rows must be at least 1".into()));
    }
    let db = Database::open(&args.db)?;
    crate::print_open_warnings(&db);
    if let Some(f) = &args.format {
        return run_format(&args, &db, Format::parse(f)?, Compression::parse(&args.compression)?);
    }
    if args.file.as_os_str() == "-" {
        return Err(Error::InvalidArgument("reading standard input needs --format".into()));
    }
    let start = Instant::now();
    let is_hits = args.table.eq_ignore_ascii_case("hits");
    let input = open_input(&args, is_hits)?;
    let schema = input.schema.clone();
    let (table, map): (Arc<DiskTable>, Vec<usize>) = match db.disk_table(&args.table) {
        Some(t) => {
            let map = column_map(&args.table, t.schema(), &schema, &args.file)?;
            (t, map)
        }
        None => (db.create_table(&args.table, schema.clone(), table_options(&args, is_hits)?)?, (0..schema.fields().len()).collect()),
    };
    let rows = input.rows;
    let bar = progress_bar(rows as u64, "rows written");
    let (mut written, mut parts) = (0usize, 0usize);
    for &block in &input.blocks {
        let step = (|| -> Result<usize> {
            let columns = (input.load)(&map, block)?;
            let n = columns.first().map_or(0, |c| c.iter().map(|a| a.len()).sum());
            table.insert_chunks(&columns, &|r| bar.inc(r as u64))?;
            Ok(n)
        })();
        match step {
            Ok(n) => {
                written += n;
                parts += usize::from(n > 0);
            }
            Err(e) => {
                bar.abandon();
                if parts > 0 {
                    eprintln!(
                        "error: the load stopped after committing {written} of {rows} rows as {parts} part(s); \
                         they stay in table {} (each part commits on its own, like ClickHouse's insert blocks)",
                        args.table
                    );
                }
                return Err(e);
            }
        }
    }
    bar.finish_and_clear();
    if args.optimize {
        let t = Instant::now();
        let n = table.num_parts();
        table.optimize()?;
        eprintln!("merged {n} parts in {:.1} s", t.elapsed().as_secs_f64());
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

/// The options of a new table from the command line.
fn table_options(args: &LoadArgs, is_hits: bool) -> Result<TableOptions> {
    let codec = Codec::parse(&args.codec)
        .ok_or_else(|| Error::InvalidArgument(format!("--codec {}: use lz4, zstd, zstd(LEVEL) or none", args.codec)))?;
    let order_by = args.order_by.clone().unwrap_or_else(|| {
        if is_hits { HITS_SORT_KEY.iter().map(|s| s.to_string()).collect() } else { Vec::new() }
    });
    Ok(TableOptions { order_by, codec, granule_rows: args.granule_rows, encodings: !args.no_encodings, ..TableOptions::default() })
}

/// A reader that reports the bytes read so far.
struct CountingRead<R> {
    inner: R,
    read: u64,
    report: Box<dyn Fn(u64) + Send>,
}

impl<R: std::io::Read> std::io::Read for CountingRead<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        (self.report)(self.read);
        Ok(n)
    }
}

/// `tessera load --format F`: the input is read batch by batch, and every
/// `--max-insert-block-rows` rows (at least one batch) are sorted and written as one part
/// that commits on its own, as the Parquet path does. A progress bar counts the input's
/// bytes (or, for Arrow and Parquet files, rows written).
fn run_format(args: &LoadArgs, db: &Database, format: Format, compression: Compression) -> Result<()> {
    let start = Instant::now();
    let is_hits = args.table.eq_ignore_ascii_case("hits");
    let existing = db.disk_table(&args.table);
    let target = match &existing {
        Some(t) => Some(t.schema().clone()),
        None if is_hits && !format.carries_types() => Some(tessera_datasets::hits::schema()),
        None => None,
    };
    let stdin = args.file.as_os_str() == "-";
    let size = if stdin {
        None
    } else {
        Some(std::fs::metadata(&args.file).map_err(|e| Error::Io { path: args.file.clone(), source: e })?.len())
    };
    let by_rows = format.compresses_inside() && !stdin;
    let bar = match (by_rows, size) {
        (false, Some(n)) => progress_bar(n, "bytes read"),
        _ => indicatif::ProgressBar::new_spinner(),
    };
    let input = if stdin {
        let b = bar.clone();
        FormatInput::Stream(Box::new(CountingRead { inner: std::io::stdin(), read: 0, report: Box::new(move |n| b.set_position(n)) }))
    } else {
        let f = std::fs::File::open(&args.file).map_err(|e| Error::Io { path: args.file.clone(), source: e })?;
        if by_rows {
            FormatInput::File(f)
        } else {
            let b = bar.clone();
            FormatInput::Stream(Box::new(CountingRead { inner: f, read: 0, report: Box::new(move |n| b.set_position(n)) }))
        }
    };
    let opts = ReadOptions { compression, schema: target, source: args.file.clone() };
    let mut reader = tessera_engine::read_format(format, input, &opts)?;
    let table = match existing {
        Some(t) => t,
        None => db.create_table(&args.table, reader.schema(), table_options(args, is_hits)?)?,
    };
    let (mut written, mut parts) = (0u64, 0usize);
    let mut pending: Vec<arrow::array::RecordBatch> = Vec::new();
    let mut pending_rows = 0usize;
    let mut flush = |pending: &mut Vec<arrow::array::RecordBatch>, pending_rows: &mut usize| -> Result<()> {
        if *pending_rows == 0 {
            return Ok(());
        }
        let ncols = table.schema().fields().len();
        let columns: Vec<Vec<ArrayRef>> = (0..ncols).map(|c| pending.iter().map(|b| b.column(c).clone()).collect()).collect();
        table.insert_chunks(&columns, &|r| {
            if by_rows {
                bar.inc(r as u64);
            }
        })?;
        written += *pending_rows as u64;
        parts += 1;
        pending.clear();
        *pending_rows = 0;
        Ok(())
    };
    let result = (|| -> Result<()> {
        for b in reader.by_ref() {
            let b = b?;
            pending_rows += b.num_rows();
            pending.push(b);
            if pending_rows >= args.max_insert_block_rows {
                flush(&mut pending, &mut pending_rows)?;
            }
        }
        flush(&mut pending, &mut pending_rows)
    })();
    drop(flush);
    if let Err(e) = result {
        bar.abandon();
        if parts > 0 {
            eprintln!(
                "error: the load stopped after committing {written} rows as {parts} part(s); they stay in table {} \
                 (each part commits on its own, like ClickHouse's insert blocks)",
                args.table
            );
        }
        return Err(e);
    }
    bar.finish_and_clear();
    if args.optimize {
        table.optimize()?;
    }
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "loaded {written} rows ({format}) into {}/{} in {secs:.1} s ({:.2} M rows/s); table: {} rows, {} parts",
        db_dir(&args.db),
        args.table,
        written as f64 / secs / 1e6,
        table.num_rows(),
        table.num_parts(),
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
