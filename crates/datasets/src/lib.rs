//! Data sets for Tessera: the ClickBench `hits` table definition and queries ([`hits`]),
//! and a deterministic, parallel generator of a synthetic `hits` table calibrated to the
//! published statistics of the real one ([`generate`]).
//!
//! ```no_run
//! use tessera_datasets::{GenOptions, generate_batch, write_parquet};
//! let opts = GenOptions::new(1_000_000);
//! let batch = generate_batch(&opts, 0, 65_536); // rows 0..65536, 105 columns
//! assert_eq!(batch.num_columns(), 105);
//! let report = write_parquet(std::path::Path::new("hits.parquet"), &opts, &|_rows| {})?;
//! # Ok::<(), tessera_common::Error>(())
//! ```

#![warn(missing_docs)]

pub mod generate;
pub mod hits;
pub mod sbtest;
mod model;
mod rng;
mod text;

pub use generate::{
    GenOptions, GenReport, HitsGenerator, generate_batch, try_generate_batch, write_parquet,
};
