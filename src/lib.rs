//! # Tessera
//!
//! An embeddable columnar OLAP engine: load web-analytics-scale data (Parquet, TSV, Arrow
//! batches), run GROUP BY / ORDER BY ... LIMIT queries in SQL on every core, get Arrow
//! `RecordBatch`es back.
//!
//! ```no_run
//! let db = tessera::Database::new();
//! db.register_parquet("hits", "hits.parquet".as_ref())?;
//! db.set("max_threads", "8")?;
//! for batch in db.sql("SELECT URL, COUNT(*) AS c FROM hits GROUP BY URL ORDER BY c DESC LIMIT 10")? {
//!     println!("{} rows", batch.num_rows());
//! }
//! # Ok::<(), tessera::Error>(())
//! ```
//!
//! This crate re-exports the public API of the workspace crates:
//! [`tessera_engine`] (database, SQL), [`tessera_common`] (errors, settings, tables) and
//! [`tessera_datasets`] (the ClickBench `hits` schema, queries and generator).

#![warn(missing_docs)]

pub use tessera_common::{Error, Result, Settings, Table, TemporaryFilesCodec, arrow, memory};
pub use tessera_datasets as datasets;
pub use tessera_engine::{
    CancelToken, Codec, Compression, MIN_BLOCK_CACHE_BYTES, Database, Format, Input, Profile, ReadOptions, RecordBatchIter,
    ServerMemory, TableOptions, WriteOptions, WriteStats,
};

/// Build facts: version, git hash, target arch, kernel family.
pub use tessera_kernels::{BuildInfo, Kernels, SimdLevel, SimdLevelError, build_info};
