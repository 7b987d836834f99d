//! File readers of Tessera.
//!
//! * [`open_parquet`]: a lazy [`Table`](tessera_common::Table) over a Parquet file; the footer
//!   is read at open, each column on first use ([`ParquetSource`]).
//! * [`read_tsv`]: ClickHouse `TabSeparated` text (the official ClickBench `hits.tsv`),
//!   parsed in parallel from a memory map.
//!
//! Both cut their tables into chunks (morsels) of at most [`CHUNK_ROWS`] rows and convert
//! the file's types to the ones Tessera executes on
//! ([`is_supported_type`](tessera_common::is_supported_type)).

#![warn(missing_docs)]

mod parquet;
mod tsv;

pub use parquet::{FileRange, ParquetSource, PreadReader, open_parquet, open_parquet_streaming};
pub use tsv::{TsvBlocks, read_tsv};

/// Maximum rows of one chunk (morsel) produced by the readers of this crate.
///
/// 65,536 = 2^16 rows, the order of ClickHouse's default block (`max_block_size` = 65,409,
/// i.e. 2^16 minus SIMD padding). Per column a chunk is 64 KiB (Int8) to 512 KiB (Int64) of
/// values, so the few columns a query touches fit in L2 cache, while per-chunk overhead
/// (task dispatch, one Arrow array per column) is spread over enough rows to be negligible.
/// A Parquet row group of `n` rows gives `ceil(n / CHUNK_ROWS)` chunks, the last one shorter.
pub const CHUNK_ROWS: usize = 65_536;
