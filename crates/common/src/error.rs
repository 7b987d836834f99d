//! The one error type of Tessera, with categories a caller can match on.

use std::path::PathBuf;

/// Result alias used across Tessera.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Every failure Tessera reports. Bad user input (SQL, files, arguments) always ends up
/// here; a panic means a broken internal contract.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The SQL text could not be parsed.
    #[error("SQL parse error: {0}")]
    Parse(String),
    /// A table named in the query does not exist.
    #[error("unknown table '{0}'")]
    UnknownTable(String),
    /// A column named in the query does not exist in the table.
    #[error("unknown column '{column}' (table '{table}' has no such column)")]
    UnknownColumn {
        /// The table searched.
        table: String,
        /// The column name as written in the query.
        column: String,
    },
    /// Operand types do not fit the operation (e.g. comparing a string column with a number).
    #[error("type mismatch: {0}")]
    TypeMismatch(String),
    /// The query is valid SQL but semantically wrong (e.g. a bare column outside GROUP BY).
    #[error("invalid query: {0}")]
    Plan(String),
    /// A bad argument or setting value (API or CLI).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A valid construct Tessera does not support yet.
    #[error("not implemented: {0}")]
    NotImplemented(String),
    /// An operating-system I/O error on a named file.
    #[error("I/O error on {}: {source}", path.display())]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A file exists but its content is not what it should be (bad Parquet, bad TSV row...).
    #[error("corrupt or unreadable file {}: {detail}", path.display())]
    Corrupt {
        /// The file involved.
        path: PathBuf,
        /// What was wrong, with a row or byte offset where known.
        detail: String,
    },
    /// Arithmetic overflow while computing a result (e.g. SUM beyond Int64).
    #[error("arithmetic overflow: {0}")]
    Overflow(String),
    /// A resource limit was hit (memory, threads).
    #[error("resources exhausted: {0}")]
    ResourcesExhausted(String),
    /// The query was cancelled (a `CancelToken`, Ctrl-C in the CLI); ClickHouse's
    /// `QUERY_WAS_CANCELLED`.
    #[error("query cancelled")]
    Cancelled,
    /// A bug in Tessera: please report it.
    #[error("internal error (a bug, please report): {0}")]
    Internal(String),
}

impl Error {
    /// Shorthand for [`Error::NotImplemented`].
    pub fn not_implemented(what: impl Into<String>) -> Self {
        Error::NotImplemented(what.into())
    }

    /// Shorthand for [`Error::Plan`].
    pub fn plan(what: impl Into<String>) -> Self {
        Error::Plan(what.into())
    }

    /// Shorthand for [`Error::Internal`].
    pub fn internal(what: impl Into<String>) -> Self {
        Error::Internal(what.into())
    }
}

impl From<arrow::error::ArrowError> for Error {
    fn from(e: arrow::error::ArrowError) -> Self {
        match e {
            arrow::error::ArrowError::ArithmeticOverflow(m) => Error::Overflow(m),
            arrow::error::ArrowError::NotYetImplemented(m) => Error::NotImplemented(m),
            arrow::error::ArrowError::CastError(m) => Error::TypeMismatch(m),
            arrow::error::ArrowError::IoError(_, source) => Error::Io { path: "<stream>".into(), source },
            other => Error::Internal(format!("arrow: {other}")),
        }
    }
}
