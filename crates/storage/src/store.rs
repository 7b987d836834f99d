//! The database directory: one subdirectory per table, and the decoded-block cache they
//! share.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use arrow::datatypes::SchemaRef;
use tessera_common::{Error, Result};

use crate::cache::{BlockCache, default_block_cache_bytes};
use crate::conditions::{ConditionCache, DEFAULT_CONDITION_CACHE_BYTES};
use crate::snapshot::Caches;
use crate::manifest::MANIFEST;
use crate::table::{DiskTable, PartId, TableOptions, check_name, io};

/// A database directory: one subdirectory per table.
///
/// ```text
/// DIR/
///   hits/                      a table
///     table.json               schema, sort key, codecs, granule size
///     0000000001_0000000001_0/ a part: inserts 1..=1, never merged
///     0000000002_0000000007_1/ a part: inserts 2..=7, merged once
///     tmp_insert_…/            an unfinished part (removed at open)
/// ```
#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
    tables: RwLock<BTreeMap<String, Arc<DiskTable>>>,
    /// Decoded blocks of every table, under one byte budget.
    cache: RwLock<Arc<BlockCache>>,
    /// Per-granule results of WHERE conditions of every table, under one byte budget.
    conditions: Arc<ConditionCache>,
}

impl Store {
    /// Opens (creating if missing) the database directory `dir` and every table in it,
    /// verifying each against its manifest and cleaning up after crashed inserts and
    /// merges (see [`Store::warnings`] for parts moved aside).
    ///
    /// # Errors
    /// [`Error::Io`], or [`Error::Corrupt`] naming the table and the first damaged file or
    /// missing part; a table directory that holds parts or a manifest but no `table.json`
    /// is [`Error::Corrupt`] naming that directory.
    pub fn open(dir: &Path) -> Result<Store> {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        Store::open_existing(dir)
    }

    /// Like [`Store::open`], for a directory that must exist already (a read-only command
    /// should not create an empty database from a typo).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `dir` is not an existing directory; as [`Store::open`].
    pub fn open_existing(dir: &Path) -> Result<Store> {
        if !dir.is_dir() {
            return Err(Error::InvalidArgument(format!("database directory {} does not exist", dir.display())));
        }
        let mut tables = BTreeMap::new();
        for e in std::fs::read_dir(dir).map_err(io(dir))? {
            let e = e.map_err(io(dir))?;
            let name = e.file_name().to_string_lossy().to_string();
            let p = e.path();
            if name.starts_with("tmp_") {
                std::fs::remove_dir_all(&p).or_else(|_| std::fs::remove_file(&p)).map_err(io(&p))?;
            } else if p.join("table.json").is_file() {
                let t = DiskTable::open(&p)?;
                tables.insert(t.name().to_ascii_lowercase(), Arc::new(t));
            } else if p.is_dir() {
                // A table directory that lost its table.json still holds data: refuse to
                // pretend the table does not exist.
                let parts = std::fs::read_dir(&p)
                    .map_err(io(&p))?
                    .filter_map(|e| e.ok())
                    .filter(|e| PartId::parse(&e.file_name().to_string_lossy()).is_some())
                    .count();
                let has_manifest = p.join(MANIFEST).exists();
                if parts > 0 || has_manifest {
                    return Err(Error::Corrupt {
                        path: p.clone(),
                        detail: format!(
                            "table {name}: table.json is missing (or not a file), but the directory holds {parts} part(s){}",
                            if has_manifest { format!(" and {MANIFEST}") } else { String::new() }
                        ),
                    });
                }
            }
        }
        Ok(Store {
            dir: dir.to_path_buf(),
            tables: RwLock::new(tables),
            cache: RwLock::new(Arc::new(BlockCache::new(default_block_cache_bytes()))),
            conditions: Arc::new(ConditionCache::new(DEFAULT_CONDITION_CACHE_BYTES)),
        })
    }

    /// The open warnings of every table ([`DiskTable::open_warnings`]): parts moved to
    /// `detached/`, migrations. Empty after a clean open.
    pub fn warnings(&self) -> Vec<String> {
        self.tables.read().map(|t| t.values().flat_map(|t| t.open_warnings().to_vec()).collect()).unwrap_or_default()
    }

    /// The decoded-block cache shared by this database's tables (budget
    /// [`default_block_cache_bytes`] unless set).
    pub fn block_cache(&self) -> Arc<BlockCache> {
        self.cache.read().map(|c| c.clone()).unwrap_or_else(|e| e.into_inner().clone())
    }

    /// The query condition cache shared by this database's tables (budget
    /// [`DEFAULT_CONDITION_CACHE_BYTES`]).
    pub fn condition_cache(&self) -> Arc<ConditionCache> {
        self.conditions.clone()
    }

    /// Both caches, for [`crate::DiskTable::snapshot_cached`].
    pub fn caches(&self) -> Caches {
        Caches { blocks: Some(self.block_cache()), conditions: Some(self.condition_cache()) }
    }

    /// Replaces the decoded-block cache by an empty one of `bytes` (0 disables caching).
    /// The old one is emptied and retired ([`BlockCache::retire`]): queries running now
    /// finish without it, so the only cache holding bytes is the one
    /// `max_server_memory_usage` counts.
    pub fn set_block_cache_size(&self, bytes: u64) {
        let fresh = Arc::new(BlockCache::new(bytes));
        let old = match self.cache.write() {
            Ok(mut c) => std::mem::replace(&mut *c, fresh),
            Err(e) => std::mem::replace(&mut *e.into_inner(), fresh),
        };
        old.retire();
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Creates an empty table. Types must be ones Tessera executes on
    /// ([`is_supported_type`]).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad name or an existing table,
    /// [`Error::UnknownColumn`] for a sort key or codec naming no column,
    /// [`Error::NotImplemented`] for an unsupported type, [`Error::Io`].
    pub fn create_table(&self, name: &str, schema: SchemaRef, options: TableOptions) -> Result<Arc<DiskTable>> {
        let lower = check_name(name)?;
        let mut tables = self.tables.write().map_err(|_| Error::internal("catalog lock poisoned"))?;
        let dir = self.dir.join(&lower);
        if tables.contains_key(&lower) || dir.exists() {
            return Err(Error::InvalidArgument(format!("table '{name}' already exists")));
        }
        let t = Arc::new(DiskTable::create(&dir, name, schema, options)?);
        tables.insert(lower, t.clone());
        Ok(t)
    }

    /// The table `name` (case-insensitive).
    pub fn table(&self, name: &str) -> Option<Arc<DiskTable>> {
        self.tables.read().ok()?.get(&name.to_ascii_lowercase()).cloned()
    }

    /// Table names, sorted (lowercase).
    pub fn table_names(&self) -> Vec<String> {
        self.tables.read().map(|t| t.keys().cloned().collect()).unwrap_or_default()
    }
}
