//! Writes a synthetic `hits` table to Parquet and reports the time taken.
//!
//! `cargo run -p tessera-datasets --release --example generate_hits -- ROWS PATH [ZSTD_LEVEL]`
//! (or `-- --batches ROWS` to time generation alone, without writing).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use rayon::prelude::*;
use tessera_datasets::{GenOptions, HitsGenerator, write_parquet};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--batches") {
        let rows: u64 = args.get(1).ok_or("missing ROWS")?.parse()?;
        let opts = GenOptions::new(rows);
        let started = Instant::now();
        let generator = HitsGenerator::new(&opts);
        let batch = opts.batch_rows as u64;
        let bytes: usize = (0..rows.div_ceil(batch))
            .into_par_iter()
            .map(|b| {
                let start = b * batch;
                generator
                    .generate_batch(start, batch.min(rows - start) as usize)
                    .get_array_memory_size()
            })
            .sum();
        println!(
            "generated {rows} rows ({:.2} GB in memory) in {:.2} s on {} threads",
            bytes as f64 / 1e9,
            started.elapsed().as_secs_f64(),
            rayon::current_num_threads()
        );
        return Ok(());
    }
    let rows: u64 = args
        .first()
        .ok_or("usage: ROWS PATH [ZSTD_LEVEL]")?
        .parse()?;
    let path = PathBuf::from(args.get(1).ok_or("missing PATH")?);
    let mut opts = GenOptions::new(rows);
    if let Some(level) = args.get(2) {
        opts.zstd_level = level.parse()?;
    }
    let last = AtomicU64::new(0);
    let started = Instant::now();
    let report = write_parquet(&path, &opts, &|done| {
        if done - last.load(Ordering::Relaxed) >= 1_000_000 || done == rows {
            last.store(done, Ordering::Relaxed);
            eprintln!("{done} rows, {:.1} s", started.elapsed().as_secs_f64());
        }
    })?;
    println!(
        "wrote {} rows in {} row groups, {:.1} MB, to {} in {:.2} s (zstd level {})",
        report.rows,
        report.row_groups,
        report.file_bytes as f64 / 1e6,
        path.display(),
        report.elapsed.as_secs_f64(),
        opts.zstd_level
    );
    Ok(())
}
