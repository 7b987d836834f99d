//! Shared foundations of Tessera: the error type, the in-memory column/table model
//! (column chunks aligned across columns, one chunk = one morsel), and query settings.
//!
//! Every other Tessera crate depends on this one; it depends on nothing of ours.

#![warn(missing_docs)]

pub mod bytes;
pub mod calendar;
mod error;
pub mod float;
mod kind;
pub mod memory;
mod settings;
mod sink;
mod table;
mod values;

pub use error::{Error, Result};
pub use kind::is_int_like;
pub use values::Values;
pub use sink::FileSink;
pub use settings::{Settings, TemporaryFilesCodec, default_threads, physical_memory};
pub use table::{ColumnChunks, ColumnRange, ColumnSource, PrunedSource, RangeValue, Table, is_supported_type};

/// Re-export of the Arrow version Tessera is built against, so users can name the same types.
pub use arrow;
