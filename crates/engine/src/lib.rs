//! Tessera's embedding API: a [`Database`] of in-memory tables queried with SQL, answers
//! as Arrow [`RecordBatch`]es.
//!
//! ```no_run
//! use tessera_engine::Database;
//! let db = Database::new();
//! db.register_parquet("hits", "hits.parquet".as_ref())?;
//! let batches = db.sql("SELECT URL, COUNT(*) AS c FROM hits GROUP BY URL ORDER BY c DESC LIMIT 10")?;
//! # Ok::<(), tessera_engine::Error>(())
//! ```
//!
//! A `Database` is `Send + Sync`: share it (`Arc<Database>`) and query from many threads at
//! once. Each query runs on a rayon pool of `max_threads` workers.

#![warn(missing_docs)]

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, RwLock};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
pub use tessera_common::{Error, Result, Settings, Table};
use tessera_exec::Pools;
pub use tessera_exec::Profile;
use tessera_sql::Statement;

/// A set of named tables plus default settings and thread pools.
#[derive(Debug, Default)]
pub struct Database {
    tables: RwLock<HashMap<String, Arc<Table>>>,
    settings: RwLock<Settings>,
    pools: Pools,
}

/// The answer of a query as an iterator of batches (see [`Database::sql_stream`]).
pub type RecordBatchIter = std::vec::IntoIter<Result<RecordBatch>>;

impl Database {
    /// An empty database with default settings (`max_threads` = vCPUs).
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty database with the given default settings.
    pub fn with_settings(settings: Settings) -> Self {
        Database { settings: RwLock::new(settings), ..Self::default() }
    }

    /// Adds (or replaces) a table.
    pub fn register_table(&self, table: Table) {
        let name = table.name().to_ascii_lowercase();
        self.tables.write().expect("catalog lock").insert(name, Arc::new(table));
    }

    /// Adds a table made of record batches (each batch becomes one morsel).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if batches disagree with `schema` or use unsupported types.
    pub fn register_batches(&self, name: &str, schema: SchemaRef, batches: &[RecordBatch]) -> Result<()> {
        let mut cols = vec![Vec::with_capacity(batches.len()); schema.fields().len()];
        for b in batches.iter().filter(|b| b.num_rows() > 0) {
            if b.schema().fields() != schema.fields() {
                return Err(Error::InvalidArgument(format!("batch schema differs from table {name}'s")));
            }
            for (c, a) in b.columns().iter().enumerate() {
                cols[c].push(a.clone());
            }
        }
        self.register_table(Table::from_columns(name, schema, cols)?);
        Ok(())
    }

    /// Registers a Parquet file as table `name`. Only the footer is read now; columns are
    /// read on first use and then kept in memory.
    ///
    /// # Errors
    /// [`Error::Io`] if the file cannot be opened, [`Error::Corrupt`] if it is not valid
    /// Parquet, [`Error::NotImplemented`] for column types Tessera does not support.
    pub fn register_parquet(&self, name: &str, path: &Path) -> Result<()> {
        self.register_table(tessera_io::open_parquet(name, path, None)?);
        Ok(())
    }

    /// Like [`Database::register_parquet`], converting columns to `target`'s types by name
    /// (e.g. the ClickBench hits schema for the official file's Int64 seconds and UInt16
    /// days).
    ///
    /// # Errors
    /// As [`Database::register_parquet`], plus [`Error::Corrupt`] for a missing target column.
    pub fn register_parquet_with_schema(&self, name: &str, path: &Path, target: SchemaRef) -> Result<()> {
        self.register_table(tessera_io::open_parquet(name, path, Some(target))?);
        Ok(())
    }

    /// Reads every column of table `name` into memory now.
    ///
    /// # Errors
    /// [`Error::UnknownTable`], or the reader's I/O and corruption errors.
    pub fn load(&self, name: &str) -> Result<()> {
        self.table(name).ok_or_else(|| Error::UnknownTable(name.into()))?.load_all()
    }

    /// The table called `name` (case-insensitive).
    pub fn table(&self, name: &str) -> Option<Arc<Table>> {
        self.tables.read().expect("catalog lock").get(&name.to_ascii_lowercase()).cloned()
    }

    /// Names of all tables, sorted.
    pub fn table_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.tables.read().expect("catalog lock").keys().cloned().collect();
        v.sort();
        v
    }

    /// A copy of the default settings.
    pub fn settings(&self) -> Settings {
        self.settings.read().expect("settings lock").clone()
    }

    /// Changes a default setting (what `SET name = value` does).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an unknown name or bad value.
    pub fn set(&self, name: &str, value: &str) -> Result<()> {
        self.settings.write().expect("settings lock").set(name, value)
    }

    /// Runs one SQL statement with the database's settings. `SET` returns no batches.
    ///
    /// # Errors
    /// Parse, planning, type and execution errors; see [`Error`].
    pub fn sql(&self, sql: &str) -> Result<Vec<RecordBatch>> {
        self.sql_profiled(sql, None).map(|(b, _)| b)
    }

    /// Runs one SQL statement with `settings` instead of the database's defaults (a
    /// query's own `SETTINGS` clause still applies on top).
    ///
    /// # Errors
    /// As [`Database::sql`].
    pub fn sql_with(&self, sql: &str, settings: &Settings) -> Result<Vec<RecordBatch>> {
        self.sql_profiled(sql, Some(settings)).map(|(b, _)| b)
    }

    /// Runs one statement and returns the answer as an iterator of batches. The answer is
    /// computed before the first batch is returned (GROUP BY and ORDER BY need all input);
    /// batches are handed out one at a time.
    ///
    /// # Errors
    /// As [`Database::sql`].
    pub fn sql_stream(&self, sql: &str) -> Result<RecordBatchIter> {
        let batches = self.sql(sql)?;
        Ok(batches.into_iter().map(Ok).collect::<Vec<_>>().into_iter())
    }

    /// Runs one statement and also returns what the executor did ([`Profile`]).
    ///
    /// # Errors
    /// As [`Database::sql`].
    pub fn sql_profiled(&self, sql: &str, settings: Option<&Settings>) -> Result<(Vec<RecordBatch>, Profile)> {
        match self.plan(sql)? {
            Statement::Set { name, value } => {
                self.set(&name, &value)?;
                Ok((vec![], Profile::default()))
            }
            Statement::Query { plan, settings: overrides } => {
                let mut s = settings.cloned().unwrap_or_else(|| self.settings());
                for (k, v) in &overrides {
                    s.set(k, v)?;
                }
                let (batch, profile) = tessera_exec::execute(&plan, &s, &self.pools)?;
                Ok((vec![batch], profile))
            }
        }
    }

    /// Reads into memory the columns `sql` needs, so that a later run measures only the
    /// query (what a benchmark's load step does).
    ///
    /// # Errors
    /// As [`Database::sql`].
    pub fn preload(&self, sql: &str) -> Result<()> {
        if let Statement::Query { plan, .. } = self.plan(sql)? {
            plan.table().columns(&plan.columns_used())?;
        }
        Ok(())
    }

    fn plan(&self, sql: &str) -> Result<Statement> {
        tessera_sql::plan(sql, &|name| self.table(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_is_send_sync() {
        fn check<T: Send + Sync>() {}
        check::<Database>();
    }
}
