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
//! [`Database::open`] opens a database directory of on-disk tables (`tessera-storage`):
//! `CREATE TABLE .. ORDER BY (..)`, `INSERT`, `OPTIMIZE TABLE`, and queries that read
//! through memory maps and skip granules the WHERE clause excludes. Each query reads a
//! consistent snapshot of the table's parts.
//!
//! ```no_run
//! use tessera_engine::Database;
//! let db = Database::open("mydb".as_ref())?;
//! db.sql("CREATE TABLE t (k INT NOT NULL, s TEXT) ENGINE = MergeTree ORDER BY (k)")?;
//! db.sql("INSERT INTO t VALUES (2, 'b'), (1, NULL)")?;
//! let batches = db.sql("SELECT COUNT(*) FROM t WHERE k = 1")?;
//! # Ok::<(), tessera_engine::Error>(())
//! ```
//!
//! Answers can be written in any of ClickHouse's data formats ([`Format`]: Native,
//! RowBinary, TabSeparated, CSV, JSONEachRow, Parquet, Arrow, ...) with
//! [`Database::write_query`], and rows read from them with `INSERT INTO t FORMAT F`
//! ([`Database::sql_with_input`], [`Database::insert_format`]) or into a new in-memory table
//! ([`Database::register_format`]).
//!
//! ```no_run
//! use tessera_engine::{Database, Format, WriteOptions};
//! let db = Database::new();
//! db.write_query("SELECT number FROM numbers(10)", Format::Native, &WriteOptions::default(), std::io::stdout())?;
//! # Ok::<(), tessera_engine::Error>(())
//! ```
//!
//! A `Database` is `Send + Sync`: share it (`Arc<Database>`) and query from many threads at
//! once. Each query runs on a rayon pool of `max_threads` workers.

#![warn(missing_docs)]

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
pub use tessera_common::{Error, Result, Settings, Table};
pub use tessera_common::memory;
use tessera_exec::Pools;
pub use tessera_exec::{Batches, CancelToken, Profile, QueryContext, ServerMemory};
use tessera_sql::Statement;
pub use tessera_formats::{BatchReader, Compression, FileSink, Format, Input, ReadOptions, SINK_BUFFER_BYTES, WriteOptions, WriteStats};
pub use tessera_storage::{Codec, MIN_BLOCK_CACHE_BYTES, DEFAULT_GRANULE_ROWS, DiskTable, TableOptions, default_block_cache_bytes};

/// A set of named tables plus default settings and thread pools.
#[derive(Debug, Default)]
pub struct Database {
    tables: RwLock<HashMap<String, Arc<Table>>>,
    settings: RwLock<Settings>,
    pools: Pools,
    /// Worker threads granted to running queries (`concurrent_threads_soft_limit_num`).
    threads_in_use: Mutex<usize>,
    store: Option<Arc<tessera_storage::Store>>,
    /// Memory of all running queries plus the caches (decoded blocks, query conditions),
    /// against `max_server_memory_usage`.
    server: Arc<ServerMemory>,
}

/// Worker threads granted to one running query; given back on drop.
struct ThreadGrant<'a> {
    in_use: &'a Mutex<usize>,
    threads: usize,
}

impl Drop for ThreadGrant<'_> {
    fn drop(&mut self) {
        if let Ok(mut n) = self.in_use.lock() {
            *n = n.saturating_sub(self.threads);
        }
    }
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

    /// Opens (creating if missing) the database directory `dir`: its on-disk tables become
    /// queryable, next to any in-memory tables registered later. Each table is verified
    /// against its manifest (every listed part present, with its checksums); leftovers of
    /// crashed inserts and merges are removed, and part directories the manifest does not
    /// list are moved to `detached/` (see [`Database::open_warnings`]).
    ///
    /// # Errors
    /// [`Error::Io`], or [`Error::Corrupt`] naming the table and the damaged file, missing
    /// part or offset.
    pub fn open(dir: &Path) -> Result<Self> {
        Ok(Self::with_store(tessera_storage::Store::open(dir)?))
    }

    /// A database over `store`, whose decoded-block and query condition caches count
    /// against `max_server_memory_usage`.
    fn with_store(store: tessera_storage::Store) -> Self {
        let store = Arc::new(store);
        let weak = Arc::downgrade(&store);
        let (cache_of, budgets_of, relieve_of) = (weak.clone(), weak.clone(), weak);
        let server = ServerMemory::with_external(
            0,
            // The decoded blocks give way to the queries (the condition cache, 100 MiB of
            // bits that save whole reads, stays).
            move || {
                let bytes = |b: u64| usize::try_from(b).unwrap_or(usize::MAX);
                cache_of.upgrade().map_or((0, 0), |s| (bytes(s.block_cache().bytes()), bytes(s.condition_cache().bytes())))
            },
            move || {
                budgets_of.upgrade().map_or(0, |s| {
                    usize::try_from(s.block_cache().capacity().saturating_add(s.condition_cache().capacity())).unwrap_or(usize::MAX)
                })
            },
            move |bytes| {
                if let Some(s) = relieve_of.upgrade() {
                    s.block_cache().shed(u64::try_from(bytes).unwrap_or(u64::MAX));
                }
            },
        );
        Database { store: Some(store), server: Arc::new(server), ..Self::default() }
    }

    /// Like [`Database::open`] for a directory that must exist (commands that only read).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `dir` is not an existing directory; as
    /// [`Database::open`].
    pub fn open_existing(dir: &Path) -> Result<Self> {
        Ok(Self::with_store(tessera_storage::Store::open_existing(dir)?))
    }

    /// What opening the database directory did besides opening it, one message each:
    /// part directories the table manifests did not list, moved to `detached/` (never
    /// read by queries), and format migrations. Empty for a clean open or without a
    /// directory.
    pub fn open_warnings(&self) -> Vec<String> {
        self.store.as_ref().map(|s| s.warnings()).unwrap_or_default()
    }

    /// Sets the byte budget of the decoded-block cache of this database's on-disk tables
    /// (default [`default_block_cache_bytes`]: a quarter of RAM, at least 2 GiB; 0 disables
    /// it) and empties it (queries running now go on without it). Decoded granule runs of
    /// the columns queries read are kept up to the budget, so a repeated query runs without
    /// decompressing and decoding again. The cache is shared by all
    /// tables and queries of the database; its bytes are not counted in a query's
    /// `max_memory_usage` (as in ClickHouse), only the arrays a query holds while it runs.
    /// No effect without a database directory.
    pub fn set_block_cache_size(&self, bytes: u64) {
        if let Some(s) = &self.store {
            s.set_block_cache_size(bytes);
        }
    }

    /// The memory all running queries of this database hold, plus its caches (decoded
    /// blocks, query conditions), against `max_server_memory_usage` (see
    /// [`Settings::max_server_memory_usage`]).
    pub fn server_memory(&self) -> &ServerMemory {
        &self.server
    }

    /// Bytes the decoded-block cache holds now (0 without a database directory).
    pub fn block_cache_bytes(&self) -> u64 {
        self.store.as_ref().map_or(0, |s| s.block_cache().bytes())
    }

    /// Lookups of the decoded-block cache that found their entry, and those that did not,
    /// since its budget was last set ((0, 0) without a database directory).
    pub fn block_cache_hits_misses(&self) -> (u64, u64) {
        self.store.as_ref().map_or((0, 0), |s| s.block_cache().hits_misses())
    }

    /// The entries of on-disk table `name`'s `detached/` directory (parts moved out of the
    /// table, e.g. `unexpected_0000000003_0000000003_0`), sorted.
    ///
    /// # Errors
    /// [`Error::UnknownTable`], [`Error::Io`].
    pub fn detached_parts(&self, name: &str) -> Result<Vec<String>> {
        self.disk_table(name).ok_or_else(|| Error::UnknownTable(name.into()))?.detached_parts()
    }

    fn store(&self) -> Result<&tessera_storage::Store> {
        self.store.as_deref().ok_or_else(|| {
            Error::InvalidArgument("this database has no directory: use Database::open(dir) for on-disk tables".into())
        })
    }

    /// Creates an on-disk table (what `CREATE TABLE` does).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] without a directory, for a bad name or an existing
    /// table; [`Error::UnknownColumn`] for a sort key naming no column;
    /// [`Error::NotImplemented`] for unsupported types; [`Error::Io`].
    pub fn create_table(&self, name: &str, schema: SchemaRef, options: TableOptions) -> Result<Arc<DiskTable>> {
        if self.tables.read().expect("catalog lock").contains_key(&name.to_ascii_lowercase()) {
            return Err(Error::InvalidArgument(format!("table '{name}' already exists (in memory)")));
        }
        self.store()?.create_table(name, schema, options)
    }

    /// Inserts record batches into on-disk table `name` as one new part, durable on return.
    ///
    /// # Errors
    /// [`Error::UnknownTable`], [`Error::InvalidArgument`] for a schema mismatch, [`Error::Io`].
    pub fn insert(&self, name: &str, batches: &[RecordBatch]) -> Result<()> {
        self.disk_table(name).ok_or_else(|| Error::UnknownTable(name.into()))?.insert(batches)
    }

    /// Merges the parts of on-disk table `name` (what `OPTIMIZE TABLE` does); returns
    /// whether a merge happened.
    ///
    /// # Errors
    /// [`Error::UnknownTable`], corruption found in the inputs, [`Error::Io`].
    pub fn optimize(&self, name: &str) -> Result<bool> {
        self.disk_table(name).ok_or_else(|| Error::UnknownTable(name.into()))?.optimize()
    }

    /// The on-disk table `name`, if any.
    pub fn disk_table(&self, name: &str) -> Option<Arc<DiskTable>> {
        self.store.as_ref()?.table(name)
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
    /// As [`Database::register_parquet`], plus [`Error::InvalidArgument`] for a target column
    /// the file lacks.
    pub fn register_parquet_with_schema(&self, name: &str, path: &Path, target: SchemaRef) -> Result<()> {
        self.register_table(tessera_io::open_parquet(name, path, Some(target))?);
        Ok(())
    }

    /// Registers a Parquet file as table `name` that queries stream: each worker decodes
    /// the columns of the chunk (morsel) it works on, only the pages holding those rows when
    /// the file has an offset index, and drops them after; PREWHERE reads a chunk's WHERE
    /// columns first. Nothing is kept between queries, so memory does not grow with the
    /// file (a `SELECT *` over 100M rows holds a few chunks), at the price of decoding on
    /// every query: what DuckDB's `read_parquet` and ClickHouse's `file()` do. `target` as in
    /// [`Database::register_parquet_with_schema`].
    ///
    /// # Errors
    /// As [`Database::register_parquet_with_schema`].
    pub fn register_parquet_streaming(&self, name: &str, path: &Path, target: Option<SchemaRef>) -> Result<()> {
        self.register_table(tessera_io::open_parquet_streaming(name, path, target)?);
        Ok(())
    }

    /// Reads every column of table `name` into memory now.
    ///
    /// # Errors
    /// [`Error::UnknownTable`], or the reader's I/O and corruption errors.
    pub fn load(&self, name: &str) -> Result<()> {
        self.table(name).ok_or_else(|| Error::UnknownTable(name.into()))?.load_all()
    }

    /// The table called `name` (case-insensitive). For an on-disk table, a snapshot of its
    /// current parts whose columns are decoded on first use.
    pub fn table(&self, name: &str) -> Option<Arc<Table>> {
        if let Some(t) = self.tables.read().expect("catalog lock").get(&name.to_ascii_lowercase()) {
            return Some(t.clone());
        }
        let caches = self.store.as_ref().map(|s| s.caches()).unwrap_or_default();
        self.disk_table(name).and_then(|t| t.snapshot_cached(&caches).ok()).map(Arc::new)
    }

    /// Names of all tables, sorted.
    pub fn table_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.tables.read().expect("catalog lock").keys().cloned().collect();
        if let Some(s) = &self.store {
            v.extend(s.table_names());
        }
        v.sort();
        v.dedup();
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
    /// computed before the first batch is returned; batches are handed out one at a time.
    /// [`Database::sql_stream_in`] streams scans instead (batches come while the query
    /// runs, never all held).
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
        self.sql_in(sql, settings, &CancelToken::new())
    }

    /// Runs one statement that `cancel` can stop from another thread: after
    /// [`CancelToken::cancel`] the query returns [`Error::Cancelled`] within one morsel's
    /// work per worker (65,536 rows; milliseconds) and frees its buffers.
    ///
    /// ```no_run
    /// # let db = std::sync::Arc::new(tessera_engine::Database::new());
    /// let token = tessera_engine::CancelToken::new();
    /// let (db2, t2) = (db.clone(), token.clone());
    /// let q = std::thread::spawn(move || db2.sql_cancellable("SELECT URL, COUNT(*) FROM hits GROUP BY URL", &t2));
    /// token.cancel();
    /// assert!(matches!(q.join().unwrap(), Err(tessera_engine::Error::Cancelled) | Ok(_)));
    /// ```
    ///
    /// # Errors
    /// As [`Database::sql`], plus [`Error::Cancelled`].
    pub fn sql_cancellable(&self, sql: &str, cancel: &CancelToken) -> Result<Vec<RecordBatch>> {
        self.sql_in(sql, None, cancel).map(|(b, _)| b)
    }

    /// [`Database::sql_profiled`] with a cancellation token: the general form of the `sql*`
    /// methods.
    ///
    /// # Errors
    /// As [`Database::sql_cancellable`].
    pub fn sql_in(
        &self,
        sql: &str,
        settings: Option<&Settings>,
        cancel: &CancelToken,
    ) -> Result<(Vec<RecordBatch>, Profile)> {
        if let Some(ins) = tessera_sql::insert_format(sql) {
            let ins = ins?;
            let format = Format::parse(&ins.format)?;
            match &ins.infile {
                Some(path) => {
                    let f = std::fs::File::open(path).map_err(|e| Error::Io { path: path.into(), source: e })?;
                    self.insert_format_columns(&ins.table, &ins.columns, format, Input::File(f), Compression::None, path)?;
                }
                None if !sql[ins.data..].trim().is_empty() => {
                    let data = sql[ins.data..].as_bytes();
                    self.insert_format_columns(&ins.table, &ins.columns, format, Input::Stream(Box::new(data)), Compression::None, "<query>")?;
                }
                None => {
                    return Err(Error::InvalidArgument(format!(
                        "INSERT INTO {} FORMAT {}: no data (give it inline after the format name, FROM INFILE 'file', or \
                         as input: Database::sql_with_input, `tessera query` standard input)",
                        ins.table, ins.format
                    )));
                }
            }
            return Ok((vec![], Profile::default()));
        }
        self.run_statement(self.plan(sql)?, settings, cancel)
    }

    /// Runs a planned statement (not `INSERT .. FORMAT`, which [`Database::sql_in`] runs
    /// before planning): its answer, or no batches for a statement without one.
    fn run_statement(
        &self,
        statement: Statement,
        settings: Option<&Settings>,
        cancel: &CancelToken,
    ) -> Result<(Vec<RecordBatch>, Profile)> {
        match statement {
            Statement::Set { name, value } => {
                self.set(&name, &value)?;
                Ok((vec![], Profile::default()))
            }
            Statement::Query { plan, settings: overrides } => self.run_query(&overrides, settings, cancel, |s, query| {
                tessera_exec::execute_batches_in(&plan, s, &self.pools, query)
            }),
            Statement::CreateTable { name, schema, order_by, if_not_exists } => {
                if if_not_exists && self.table(&name).is_some() {
                    return Ok((vec![], Profile::default()));
                }
                self.create_table(&name, schema, TableOptions { order_by, ..TableOptions::default() })?;
                Ok((vec![], Profile::default()))
            }
            Statement::Insert { table, batch } => {
                self.insert(&table, &[batch])?;
                Ok((vec![], Profile::default()))
            }
            Statement::Optimize { table } => {
                self.optimize(&table)?;
                Ok((vec![], Profile::default()))
            }
        }
    }

    /// Runs `run` as a query: with `settings` (or the database's) and the query's own
    /// `overrides` (its SETTINGS clause), the threads granted, and a context that accounts
    /// its memory under the database's cap and checks `cancel`.
    fn run_query<R>(
        &self,
        overrides: &[(String, String)],
        settings: Option<&Settings>,
        cancel: &CancelToken,
        run: impl FnOnce(&Settings, &QueryContext) -> Result<R>,
    ) -> Result<R> {
        let mut s = settings.cloned().unwrap_or_else(|| self.settings());
        for (k, v) in overrides {
            s.set(k, v)?;
        }
        let grant = self.grant_threads(s.max_threads)?;
        s.max_threads = grant.threads;
        // The cap is the database's, whatever the query's settings say (the default
        // spill threshold derives from it).
        s.max_server_memory_usage = self.settings().max_server_memory_usage;
        self.server.set_limit(s.max_server_memory_usage);
        let query = QueryContext::new(s.max_memory_usage, cancel.clone())
            .with_server(self.server.clone())
            .with_temporary_data_limit(s.max_temporary_data_on_disk_size);
        let out = run(&s, &query);
        drop(grant);
        out
    }

    /// Runs `sql` and writes its answer in `format` to `out`, batch by batch: the
    /// serialized bytes are never held whole, and a scan without ORDER BY or LIMIT
    /// (`SELECT cols FROM t [WHERE ..]`) streams: its rows are written while later ones
    /// are computed, so memory stays at a few morsels whatever the table's size (see
    /// [`tessera_exec::execute_stream_in`]; other answers are computed first). A column is
    /// `Nullable(..)` in Native and RowBinary only if it may hold a NULL: for a streamed
    /// scan, if its source column may (a column in memory: holds one; on disk or in
    /// Parquet: is declared nullable); for other answers, if the answer holds one. A
    /// statement without an answer (`SET`, `INSERT`) writes nothing.
    ///
    /// # Errors
    /// As [`Database::sql`]; [`Error::Io`] writing `out`; [`Error::InvalidArgument`] for a
    /// value the format cannot hold (a timestamp outside ClickHouse's `DateTime` range),
    /// naming its row and column. Bytes written before an error stay written.
    pub fn write_query(&self, sql: &str, format: Format, opts: &WriteOptions, out: impl Write + Send) -> Result<WriteStats> {
        self.write_query_in(sql, None, &CancelToken::new(), format, opts, out).map(|(w, _)| w)
    }

    /// [`Database::write_query`] with settings and a cancellation token, also returning
    /// what the executor did.
    ///
    /// # Errors
    /// As [`Database::write_query`], plus [`Error::Cancelled`].
    pub fn write_query_in(
        &self,
        sql: &str,
        settings: Option<&Settings>,
        cancel: &CancelToken,
        format: Format,
        opts: &WriteOptions,
        out: impl Write + Send,
    ) -> Result<(WriteStats, Profile)> {
        let (stats, profile) =
            self.sql_stream_in(sql, settings, cancel, |schema, batches| write_answer(format, schema, batches, cancel, opts, out))?;
        Ok((stats.unwrap_or_default(), profile))
    }

    /// Runs one statement and hands its answer to `consume`, on the calling thread, as its
    /// schema and an iterator over its batches in order: a scan without ORDER BY or LIMIT
    /// (`SELECT cols FROM t [WHERE ..]`) streams, its batches coming while later morsels
    /// are worked on, so the answer is never held whole and `consume` may write, send or
    /// fold it as it comes; other answers are computed first (see
    /// [`tessera_exec::execute_stream_in`], which also says which fields are nullable).
    /// Returns what `consume` returned, or `None` for a statement without an answer (`SET`,
    /// `INSERT`, `CREATE TABLE`), which `consume` never sees. `consume` may run other
    /// queries of this database: a streamed scan's workers waiting for it to take their
    /// batches run those queries' work meanwhile.
    ///
    /// ```
    /// use arrow::array::{Array, UInt64Array};
    /// let db = tessera_engine::Database::new();
    /// // The sum of a 10M-row answer without holding it.
    /// let (sum, _) = db.sql_stream_in("SELECT number FROM numbers(10000000)", None, &Default::default(), |_, batches| {
    ///     let mut sum = 0u64;
    ///     for b in batches {
    ///         let b = b?;
    ///         let col = b.column(0).as_any().downcast_ref::<UInt64Array>().unwrap();
    ///         sum += col.values().iter().sum::<u64>();
    ///     }
    ///     Ok(sum)
    /// })?;
    /// assert_eq!(sum, Some(49_999_995_000_000));
    /// # Ok::<(), tessera_engine::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Database::sql_cancellable`], and `consume`'s; an error of the query after
    /// `consume` saw some batches is returned even if `consume` returned `Ok` (its iterator
    /// ended early).
    pub fn sql_stream_in<R>(
        &self,
        sql: &str,
        settings: Option<&Settings>,
        cancel: &CancelToken,
        consume: impl FnOnce(SchemaRef, &mut Batches<'_>) -> Result<R>,
    ) -> Result<(Option<R>, Profile)> {
        if tessera_sql::insert_format(sql).is_some() {
            let (_, profile) = self.sql_in(sql, settings, cancel)?;
            return Ok((None, profile));
        }
        match self.plan(sql)? {
            Statement::Query { plan, settings: overrides } => {
                let (r, profile) = self
                    .run_query(&overrides, settings, cancel, |s, query| tessera_exec::execute_stream_in(&plan, s, &self.pools, query, consume))?;
                Ok((Some(r), profile))
            }
            // A statement without an answer.
            other => self.run_statement(other, settings, cancel).map(|(_, profile)| (None, profile)),
        }
    }

    /// Runs one statement whose rows come from `input`: `INSERT INTO t [(cols)] FORMAT F`
    /// without inline data or `FROM INFILE` (what `tessera query` does with its standard
    /// input). `compression` is what the input was written with (see [`Compression`]).
    ///
    /// # Errors
    /// As [`Database::insert_format`]; [`Error::InvalidArgument`] when `sql` is not such
    /// a statement.
    pub fn sql_with_input(&self, sql: &str, input: Input<'_>, compression: Compression) -> Result<Vec<RecordBatch>> {
        match tessera_sql::insert_format(sql) {
            Some(ins) => {
                let ins = ins?;
                if ins.infile.is_some() || !sql[ins.data..].trim().is_empty() {
                    return Err(Error::InvalidArgument(
                        "the INSERT names its data (FROM INFILE or inline) and an input was given too".into(),
                    ));
                }
                self.insert_format_columns(&ins.table, &ins.columns, Format::parse(&ins.format)?, input, compression, "<input>")?;
                Ok(vec![])
            }
            None => Err(Error::InvalidArgument("an input was given for a statement that reads none (only INSERT .. FORMAT does)".into())),
        }
    }

    /// Inserts the rows of `input`, in `format`, into on-disk table `name` as one part,
    /// all or nothing: a bad row anywhere inserts nothing. The input is parsed on a thread
    /// of its own while the part is written (the part is committed after the last row), so
    /// memory stays at a few batches for a table without sort key; a table with one holds
    /// the rows until they are sorted. (`tessera load` commits a part per block instead.)
    /// Columns are matched by name where the format names them (Native, `..WithNames`,
    /// JSONEachRow, Arrow, Parquet), else by position; a table column the input lacks is
    /// NULL (an error if not nullable). Returns the rows inserted.
    ///
    /// # Errors
    /// [`Error::UnknownTable`]; [`Error::Corrupt`] naming row and column for bad input;
    /// [`Error::InvalidArgument`] for input columns the table lacks; [`Error::Io`].
    pub fn insert_format(&self, name: &str, format: Format, input: Input<'_>, compression: Compression) -> Result<u64> {
        self.insert_format_columns(name, &[], format, input, compression, "<input>")
    }

    fn insert_format_columns(
        &self,
        name: &str,
        columns: &[String],
        format: Format,
        input: Input<'_>,
        compression: Compression,
        source: &str,
    ) -> Result<u64> {
        let table = self.disk_table(name).ok_or_else(|| Error::UnknownTable(name.into()))?;
        let full = table.schema().clone();
        let target = if columns.is_empty() {
            full.clone()
        } else {
            let fields = columns
                .iter()
                .map(|c| {
                    full.fields()
                        .iter()
                        .find(|f| f.name().eq_ignore_ascii_case(c))
                        .cloned()
                        .ok_or_else(|| Error::UnknownColumn { table: name.into(), column: c.clone() })
                })
                .collect::<Result<Vec<_>>>()?;
            Arc::new(arrow::datatypes::Schema::new(fields))
        };
        let opts = ReadOptions { compression, schema: Some(target), source: source.into() };
        let reader = tessera_formats::reader(format, input, &opts)?;
        let src = std::path::PathBuf::from(source);
        // The input is parsed on its own thread while the part is written from the batches
        // parsed so far (two in flight): parsing and encoding overlap, and the input is
        // never held whole (unless the table has a sort key: the part writer then collects
        // the rows to sort them).
        let (tx, rx) = std::sync::mpsc::sync_channel::<Result<RecordBatch>>(2);
        std::thread::scope(|s| {
            s.spawn(move || {
                for b in reader {
                    let b = b.and_then(|b| tessera_formats::conform(&b, &full, &src));
                    let stop = b.is_err();
                    // A send fails once the writer has stopped (its error is returned).
                    if tx.send(b).is_err() || stop {
                        break;
                    }
                }
            });
            table.insert_stream(&mut rx.into_iter())
        })
    }

    /// Reads `input` in `format` into a new in-memory table `name` (replacing one of that
    /// name); `schema` is required for formats without types (else the input's own,
    /// converted to the types Tessera stores). Returns the rows read.
    ///
    /// # Errors
    /// As [`tessera_formats::reader`] and its batches; [`Error::InvalidArgument`] for an
    /// input without columns.
    pub fn register_format(
        &self,
        name: &str,
        format: Format,
        input: Input<'_>,
        compression: Compression,
        schema: Option<SchemaRef>,
    ) -> Result<u64> {
        let opts = ReadOptions { compression, schema, source: "<input>".into() };
        let reader = tessera_formats::reader(format, input, &opts)?;
        let schema = reader.schema();
        let batches: Vec<RecordBatch> = reader.collect::<Result<_>>()?;
        if schema.fields().is_empty() {
            return Err(Error::InvalidArgument(format!("the {format} input has no columns")));
        }
        self.register_batches(name, schema, &batches)?;
        Ok(batches.iter().map(|b| b.num_rows() as u64).sum())
    }

    /// Reads into memory the columns `sql` needs, so that a later run measures only the
    /// query (what a benchmark's load step does). Tables that stream (on-disk tables,
    /// [streaming Parquet](Database::register_parquet_streaming)) are only planned: they
    /// decode on every run.
    ///
    /// # Errors
    /// As [`Database::sql`].
    pub fn preload(&self, sql: &str) -> Result<()> {
        if let Statement::Query { plan, .. } = self.plan(sql)?
            && !plan.table().streams()
        {
            plan.table().columns(&plan.columns_used())?;
        }
        Ok(())
    }

    /// Grants a query `min(wanted, limit - in use)` worker threads, at least 1, under the
    /// database's `concurrent_threads_soft_limit_num` (0 = all `wanted`).
    fn grant_threads(&self, wanted: usize) -> Result<ThreadGrant<'_>> {
        let limit = self.settings.read().map_err(|_| Error::internal("settings lock poisoned"))?.concurrent_threads_soft_limit_num;
        let mut in_use = self.threads_in_use.lock().map_err(|_| Error::internal("thread grant lock poisoned"))?;
        let threads = if limit == 0 { wanted } else { wanted.min(limit.saturating_sub(*in_use)).max(1) };
        *in_use += threads;
        Ok(ThreadGrant { in_use: &self.threads_in_use, threads })
    }

    fn plan(&self, sql: &str) -> Result<Statement> {
        tessera_sql::plan(sql, &|name| self.table(name))
    }
}

/// A reader of `format` over `input` (see [`tessera_formats::reader`]): batches in input
/// order, for loaders that commit block by block.
///
/// # Errors
/// As [`tessera_formats::reader`].
pub fn read_format<'a>(format: Format, input: Input<'a>, opts: &ReadOptions) -> Result<Box<dyn BatchReader + Send + 'a>> {
    tessera_formats::reader(format, input, opts)
}

/// Whether `sql` is an `INSERT INTO t FORMAT F` whose rows come from the caller's input
/// (no `FROM INFILE`, no inline data): run it with [`Database::sql_with_input`].
pub fn reads_input(sql: &str) -> bool {
    matches!(tessera_sql::insert_format(sql), Some(Ok(i)) if i.infile.is_none() && sql[i.data..].trim().is_empty())
}

/// Writes an answer (`schema`, `batches`) in `format`.
fn write_answer(
    format: Format,
    schema: SchemaRef,
    batches: &mut Batches<'_>,
    cancel: &CancelToken,
    opts: &WriteOptions,
    out: impl Write + Send,
) -> Result<WriteStats> {
    let out_schema = schema.clone();
    let batches = batches.map(move |b| {
        if cancel.is_cancelled() {
            return Err(Error::Cancelled);
        }
        // The answer's schema (its nullability) on every batch: a NULL where the schema has
        // none is an error here, never a wrong file.
        Ok(RecordBatch::try_new(out_schema.clone(), b?.columns().to_vec())?)
    });
    tessera_formats::write_batches(format, &schema, batches, out, opts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_is_send_sync() {
        fn check<T: Send + Sync>() {}
        check::<Database>();
    }

    #[test]
    fn thread_grants_share_the_soft_limit() {
        let db = Database::new();
        db.set("concurrent_threads_soft_limit_num", "3").unwrap();
        let a = db.grant_threads(2).unwrap();
        let b = db.grant_threads(2).unwrap();
        let c = db.grant_threads(2).unwrap();
        assert_eq!((a.threads, b.threads, c.threads), (2, 1, 1)); // at least 1 each
        drop((a, b, c));
        assert_eq!(*db.threads_in_use.lock().unwrap(), 0);
        db.set("concurrent_threads_soft_limit_num", "0").unwrap();
        assert_eq!(db.grant_threads(7).unwrap().threads, 7);
    }
}
