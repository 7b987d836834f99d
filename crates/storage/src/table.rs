//! Tables on disk: a directory of parts, inserts that commit a part atomically, merges, and
//! the snapshot a query reads (its [`ColumnSource`](tessera_common::ColumnSource) is in
//! `snapshot.rs`; the database directory of tables, [`Store`](crate::Store), in `store.rs`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::{Field, Schema, SchemaRef};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use tessera_common::{Error, Result, Table, is_supported_type};

use crate::block::Codec;
use crate::snapshot::{Caches, Morsel, Snapshot};
use crate::manifest::{self, MANIFEST, Manifest};
use crate::merge;
use crate::part::{self, GRANULES_PER_MORSEL, Layout, Part, parse_type, sync_dir, type_name, write_synced};

/// Rows per granule unless a table says otherwise (ClickHouse's `index_granularity`).
pub const DEFAULT_GRANULE_ROWS: usize = 8192;

/// Version of the table directory format (`table.json`'s `format_version`) this build
/// writes. Version 2 added `manifest.txt`; a version 1 table is migrated at open (its
/// part directories become the manifest's parts). The part format has its own version,
/// [`crate::FORMAT_VERSION`].
pub const TABLE_FORMAT_VERSION: u32 = 2;

/// The table format version before the manifest: read and migrated at open.
const TABLE_FORMAT_V1: u32 = 1;

/// Subdirectory of a table directory for parts moved out of the table
/// (`detached/unexpected_NAME`: a part directory the manifest does not list).
pub const DETACHED_DIR: &str = "detached";

/// How a table is stored: sort key, codecs, granule size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableOptions {
    /// Sort key column names, major first (`ORDER BY`). Empty: rows kept in insert order.
    pub order_by: Vec<String>,
    /// Codec of columns not named in `column_codecs`.
    pub codec: Codec,
    /// Per-column codecs (column name, codec).
    #[serde(default)]
    pub column_codecs: Vec<(String, Codec)>,
    /// Rows per granule (index granularity); at least 1.
    pub granule_rows: usize,
    /// Use dictionary / frame-of-reference encodings where they make a block smaller.
    pub encodings: bool,
    /// Columns with per-granule bloom filters (skip granules for `column = constant`).
    /// `None`: the sort-key columns after the first (the first is pruned well by min/max;
    /// later ones are sorted only within runs of equal prefixes, so their min/max ranges
    /// are wide).
    #[serde(default)]
    pub bloom_columns: Option<Vec<String>>,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            order_by: Vec::new(),
            codec: Codec::Lz4,
            column_codecs: Vec::new(),
            granule_rows: DEFAULT_GRANULE_ROWS,
            encodings: true,
            bloom_columns: None,
        }
    }
}

/// `table.json`: what a table directory holds besides its parts.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct TableMeta {
    format_version: u32,
    name: String,
    columns: Vec<part::ColumnMeta>,
    options: TableOptions,
}

/// Identity of a part from its directory name `MIN_MAX_LEVEL`: it holds the inserts
/// numbered `MIN..=MAX`, merged `LEVEL` times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct PartId {
    min: u64,
    max: u64,
    level: u32,
}

impl PartId {
    /// Parses a part directory name; only the canonical spelling [`PartId::name`] writes
    /// (so `1_1_0` is not the part `0000000001_0000000001_0`).
    pub(crate) fn parse(s: &str) -> Option<PartId> {
        let mut it = s.split('_');
        let id = PartId { min: it.next()?.parse().ok()?, max: it.next()?.parse().ok()?, level: it.next()?.parse().ok()? };
        (it.next().is_none() && id.min <= id.max && id.name() == s).then_some(id)
    }
    fn name(&self) -> String {
        format!("{:010}_{:010}_{}", self.min, self.max, self.level)
    }
    fn covers(&self, o: &PartId) -> bool {
        self != o && self.min <= o.min && o.max <= self.max
    }
    fn overlaps(&self, o: &PartId) -> bool {
        self != o && self.min <= o.max && o.min <= self.max
    }
}

/// The manifest's record of a part.
fn entry(id: PartId, p: &Part) -> manifest::Entry {
    manifest::Entry { name: id.name(), rows: p.rows, sums_hash: p.sums_hash }
}

/// Moves part directory `name` of table directory `dir` to `dir/detached/REASON_NAME`
/// (`_tryN` appended if taken) and fsyncs `detached/`; returns the new path.
fn detach(dir: &Path, name: &str, reason: &str) -> Result<PathBuf> {
    let d = dir.join(DETACHED_DIR);
    std::fs::create_dir_all(&d).map_err(io(&d))?;
    let mut dest = d.join(format!("{reason}_{name}"));
    let mut i = 1;
    while dest.exists() {
        dest = d.join(format!("{reason}_{name}_try{i}"));
        i += 1;
    }
    std::fs::rename(dir.join(name), &dest).map_err(io(&dest))?;
    sync_dir(&d)?;
    Ok(dest)
}

pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io { path: path.to_path_buf(), source }
}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

fn tmp_name(kind: &str) -> String {
    format!("tmp_{kind}_{}_{}", std::process::id(), TMP_COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// Valid table names: ASCII letters, digits and `_`, not starting with `tmp_` or a digit.
pub(crate) fn check_name(name: &str) -> Result<String> {
    let lower = name.to_ascii_lowercase();
    let ok = !lower.is_empty()
        && lower.len() <= 128
        && lower.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !lower.starts_with(|c: char| c.is_ascii_digit())
        && !lower.starts_with("tmp_");
    if ok { Ok(lower) } else { Err(Error::InvalidArgument(format!("bad table name '{name}': use [A-Za-z_][A-Za-z0-9_]*"))) }
}

/// A table stored on disk as immutable parts.
///
/// Readers take a [`DiskTable::snapshot`] (the part list at that instant); inserts and
/// merges publish a new list, so a query sees the same parts from start to end, and a part
/// it reads stays mapped even if a merge deletes its directory meanwhile.
#[derive(Debug)]
pub struct DiskTable {
    name: String,
    dir: PathBuf,
    schema: SchemaRef,
    options: TableOptions,
    layout: Layout,
    parts: RwLock<PartList>,
    /// Held while a part is renamed into place and published; guards the next insert number.
    commit: Mutex<u64>,
    /// One merge at a time.
    merging: Mutex<()>,
    /// (granules kept, granules in the snapshot) of the last pruned read, for tests and
    /// benchmarks.
    pub(crate) last_prune: Mutex<Option<(usize, usize)>>,
    /// xxh3 of `table.json`, recorded in every manifest.
    table_hash: u64,
    /// What the last open changed or found (parts moved to `detached/`, a migration).
    warnings: Vec<String>,
}

/// The committed parts with their identities, ordered by insert number.
pub(crate) type PartList = Arc<Vec<(PartIdKey, Arc<Part>)>>;

/// Opaque part identity kept in the part list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartIdKey(PartId);

impl DiskTable {
    pub(crate) fn create(dir: &Path, name: &str, schema: SchemaRef, options: TableOptions) -> Result<DiskTable> {
        let layout = layout_of(name, &schema, &options)?;
        let meta = TableMeta {
            format_version: TABLE_FORMAT_VERSION,
            name: name.to_string(),
            columns: columns_meta(&schema, &layout),
            options: options.clone(),
        };
        let json = serde_json::to_vec_pretty(&meta).map_err(|e| Error::internal(format!("table.json: {e}")))?;
        let table_hash = xxhash_rust::xxh3::xxh3_64(&json);
        let parent = dir.parent().ok_or_else(|| Error::internal("table dir has no parent"))?;
        let tmp = parent.join(tmp_name("create"));
        std::fs::create_dir(&tmp).map_err(io(&tmp))?;
        let written = write_synced(&tmp.join("table.json"), &json)
            .and_then(|()| manifest::write(&tmp, &tmp_name("manifest"), &Manifest { table_hash, parts: vec![] }))
            .and_then(|()| std::fs::rename(&tmp, dir).map_err(io(dir)));
        if let Err(e) = written {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e);
        }
        sync_dir(parent)?;
        Ok(DiskTable { table_hash, ..DiskTable::new(name, dir, schema, options, layout) })
    }

    /// A table with the given identity; `parts` ordered by insert number, `next` the next
    /// insert number.
    fn new(name: &str, dir: &Path, schema: SchemaRef, options: TableOptions, layout: Layout) -> DiskTable {
        DiskTable {
            name: name.to_string(),
            dir: dir.to_path_buf(),
            schema,
            options,
            layout,
            parts: RwLock::new(Arc::new(Vec::new())),
            commit: Mutex::new(1),
            merging: Mutex::new(()),
            last_prune: Mutex::new(None),
            table_hash: 0,
            warnings: Vec::new(),
        }
    }

    /// Opens the table in `dir` and verifies it against its manifest:
    ///
    /// 1. `table.json` must exist, parse, and hash to what `manifest.txt` records;
    /// 2. every part the manifest lists must exist, verify ([`Part::open`]) and have the
    ///    recorded row count and `checksums.txt` hash;
    /// 3. only then is the directory cleaned: `tmp_*` leftovers of crashed inserts, merges
    ///    and manifest writes are removed; unlisted parts covered by a listed part (inputs
    ///    of a committed merge whose deletion a crash interrupted) are removed, with a
    ///    warning; any other
    ///    unlisted part (an insert or merge that crashed before its manifest write, or a
    ///    directory copied in) holds no acknowledged rows and is moved to
    ///    `detached/unexpected_NAME`, with a warning ([`DiskTable::open_warnings`]).
    ///
    /// A version 1 table (no manifest) is migrated: its uncovered parts are verified and
    /// become the manifest, then `table.json` is rewritten as version 2.
    ///
    /// # Errors
    /// [`Error::Corrupt`] naming the table and the file or part directory: missing or bad
    /// `table.json` or `manifest.txt`, a listed part missing, damaged or replaced;
    /// [`Error::Io`].
    pub(crate) fn open(dir: &Path) -> Result<DiskTable> {
        let label = dir.file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned());
        let tj = dir.join("table.json");
        let bytes = std::fs::read(&tj).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                Error::Corrupt { path: dir.to_path_buf(), detail: format!("table {label}: table.json is missing") }
            }
            _ => Error::Io { path: tj.clone(), source: e },
        })?;
        let meta: TableMeta = serde_json::from_slice(&bytes)
            .map_err(|e| Error::Corrupt { path: tj.clone(), detail: format!("table {label}: bad JSON: {e}") })?;
        let migrate = match meta.format_version {
            TABLE_FORMAT_VERSION => false,
            TABLE_FORMAT_V1 => true,
            v => {
                return Err(Error::Corrupt {
                    path: tj,
                    detail: format!(
                        "table {label}: unsupported format version {v} (this build reads 1 and {TABLE_FORMAT_VERSION})"
                    ),
                });
            }
        };
        // Messages name the table by its directory: table.json's own name may be damaged.
        let table = label;
        let fields = meta
            .columns
            .iter()
            .map(|c| {
                parse_type(&c.data_type).map(|t| Field::new(&c.name, t, c.nullable)).ok_or_else(|| Error::Corrupt {
                    path: tj.clone(),
                    detail: format!("table {table}: unknown type {} of column {}", c.data_type, c.name),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let schema: SchemaRef = Arc::new(Schema::new(fields));
        let layout = layout_of(&meta.name, &schema, &meta.options).map_err(|e| Error::Corrupt {
            path: tj.clone(),
            detail: format!("table {table}: bad options: {e}"),
        })?;
        let mut found = Vec::new();
        let mut leftovers = Vec::new();
        for e in std::fs::read_dir(dir).map_err(io(dir))? {
            let e = e.map_err(io(dir))?;
            let name = e.file_name().to_string_lossy().to_string();
            if name.starts_with("tmp_") {
                leftovers.push(e.path());
            } else if let Some(id) = PartId::parse(&name) {
                found.push(id);
            }
        }
        found.sort();
        // A version 1 table is rewritten as version 2: the manifest records that JSON's hash.
        let json_v2 = match migrate {
            true => Some(
                serde_json::to_vec_pretty(&TableMeta { format_version: TABLE_FORMAT_VERSION, ..meta.clone() })
                    .map_err(|e| Error::internal(format!("table.json: {e}")))?,
            ),
            false => None,
        };
        let table_hash = xxhash_rust::xxh3::xxh3_64(json_v2.as_deref().unwrap_or(&bytes));
        let mpath = dir.join(MANIFEST);
        // The active parts and what the manifest says of each. Without a manifest (version 1
        // only) the part directories not covered by a merged part are the truth; a version 1
        // table.json beside a manifest must be a migration a crash interrupted.
        let (live, listed): (Vec<PartId>, Option<Manifest>) = match manifest::read(dir, &table)? {
            None if migrate => (found.iter().filter(|id| !found.iter().any(|o| o.covers(id))).copied().collect(), None),
            None => {
                return Err(Error::Corrupt {
                    path: mpath,
                    detail: format!("table {table}: {MANIFEST} is missing ({} part directories present)", found.len()),
                });
            }
            Some(m) => {
                if m.table_hash != table_hash {
                    return Err(Error::Corrupt {
                        path: tj,
                        detail: format!(
                            "table {table}: table.json (format version {}) hashes to {table_hash:016x}, {MANIFEST} records {:016x} (table.json was modified)",
                            meta.format_version, m.table_hash
                        ),
                    });
                }
                let mut ids = Vec::with_capacity(m.parts.len());
                for e in &m.parts {
                    let id = PartId::parse(&e.name).ok_or_else(|| Error::Corrupt {
                        path: mpath.clone(),
                        detail: format!("table {table}: bad part name {:?}", e.name),
                    })?;
                    if let Some(o) = ids.iter().find(|o: &&PartId| o.overlaps(&id)) {
                        return Err(Error::Corrupt {
                            path: mpath.clone(),
                            detail: format!("table {table}: parts {} and {} overlap", o.name(), e.name),
                        });
                    }
                    if !found.contains(&id) {
                        return Err(Error::Corrupt {
                            path: dir.join(&e.name),
                            detail: format!(
                                "table {table}: part {} ({} rows) is listed in {MANIFEST} but its directory is missing",
                                e.name, e.rows
                            ),
                        });
                    }
                    ids.push(id);
                }
                ids.sort();
                (ids, Some(m))
            }
        };
        let parts = live
            .par_iter()
            .map(|id| {
                let name = id.name();
                let pdir = dir.join(&name);
                let part = Part::open(&pdir, &name, &schema)?;
                if let Some(e) = listed.as_ref().and_then(|m| m.parts.iter().find(|e| e.name == name)) {
                    if e.sums_hash != part.sums_hash {
                        return Err(Error::Corrupt {
                            path: pdir.join("checksums.txt"),
                            detail: format!(
                                "table {table}: part {name}: checksums.txt hashes to {:016x}, {MANIFEST} records {:016x} (the part directory was replaced or modified)",
                                part.sums_hash, e.sums_hash
                            ),
                        });
                    }
                    if e.rows != part.rows {
                        return Err(Error::Corrupt {
                            path: pdir.join("meta.json"),
                            detail: format!("table {table}: part {name}: {} rows, {MANIFEST} records {}", part.rows, e.rows),
                        });
                    }
                }
                Ok((PartIdKey(*id), Arc::new(part)))
            })
            .collect::<Result<Vec<_>>>()?;
        // Verified: now clean up.
        let mut warnings = Vec::new();
        for p in leftovers {
            std::fs::remove_dir_all(&p).or_else(|_| std::fs::remove_file(&p)).map_err(io(&p))?;
        }
        for id in found.iter().filter(|id| !live.contains(id)) {
            let p = dir.join(id.name());
            if let Some(by) = live.iter().find(|l| l.covers(id)) {
                std::fs::remove_dir_all(&p).map_err(io(&p))?;
                warnings.push(format!(
                    "table {table}: removed part directory {}: not in {MANIFEST} and covered by part {} (an input of a committed merge whose deletion was interrupted)",
                    id.name(),
                    by.name()
                ));
            } else {
                let to = detach(dir, &id.name(), "unexpected")?;
                warnings.push(format!(
                    "table {table}: part directory {} is not in {MANIFEST} (an insert or merge interrupted before its commit, or a copied directory); moved to {}",
                    id.name(),
                    to.display()
                ));
            }
        }
        if let Some(json) = json_v2 {
            // Manifest first: a crash before table.json is replaced finds a version 1
            // table.json beside a manifest recording the version 2 hash, and resumes here.
            if listed.is_none() {
                let m = Manifest { table_hash, parts: parts.iter().map(|(k, p)| entry(k.0, p)).collect() };
                manifest::write(dir, &tmp_name("manifest"), &m)?;
            }
            let tmp = dir.join(tmp_name("table"));
            write_synced(&tmp, &json)?;
            std::fs::rename(&tmp, &tj).map_err(io(&tj))?;
            warnings.push(format!("table {table}: migrated from table format 1 to {TABLE_FORMAT_VERSION} (wrote {MANIFEST})"));
            let meta = TableMeta { format_version: TABLE_FORMAT_VERSION, ..meta };
            return Self::opened(dir, meta, schema, layout, parts, table_hash, warnings);
        }
        Self::opened(dir, meta, schema, layout, parts, table_hash, warnings)
    }

    /// The table after [`DiskTable::open`]'s checks: fsyncs `dir` (removals and renames).
    fn opened(
        dir: &Path,
        meta: TableMeta,
        schema: SchemaRef,
        layout: Layout,
        parts: Vec<(PartIdKey, Arc<Part>)>,
        table_hash: u64,
        warnings: Vec<String>,
    ) -> Result<DiskTable> {
        sync_dir(dir)?;
        let next = parts.iter().map(|(k, _)| k.0.max + 1).max().unwrap_or(1);
        Ok(DiskTable {
            parts: RwLock::new(Arc::new(parts)),
            commit: Mutex::new(next),
            table_hash,
            warnings,
            ..DiskTable::new(&meta.name, dir, schema, meta.options, layout)
        })
    }

    /// What the last open of this table did besides opening it: parts moved to
    /// `detached/` (with the reason), a format migration. Empty for a clean open. The CLI
    /// prints these to stderr.
    pub fn open_warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Names of the entries in `detached/` (`unexpected_NAME`...), sorted: parts moved out
    /// of the table, never read by queries. Empty when there are none.
    ///
    /// # Errors
    /// [`Error::Io`] reading the directory.
    pub fn detached_parts(&self) -> Result<Vec<String>> {
        let d = self.dir.join(DETACHED_DIR);
        let entries = match std::fs::read_dir(&d) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(Error::Io { path: d, source }),
        };
        let mut names = entries
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()).map_err(io(&d)))
            .collect::<Result<Vec<_>>>()?;
        names.sort();
        Ok(names)
    }

    /// The table name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The schema.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The options the table was created with.
    pub fn options(&self) -> &TableOptions {
        &self.options
    }

    /// Rows in the committed parts.
    pub fn num_rows(&self) -> usize {
        self.parts_now().iter().map(|(_, p)| p.rows).sum()
    }

    /// The committed parts, ordered by insert number.
    pub fn parts(&self) -> Vec<Arc<Part>> {
        self.parts_now().iter().map(|(_, p)| p.clone()).collect()
    }

    /// Number of committed parts.
    pub fn num_parts(&self) -> usize {
        self.parts_now().len()
    }

    /// Bytes of all files of the committed parts.
    pub fn disk_size(&self) -> u64 {
        self.parts_now()
            .iter()
            .filter_map(|(_, p)| std::fs::read_dir(&p.dir).ok())
            .flatten()
            .filter_map(|e| e.ok()?.metadata().ok())
            .map(|m| m.len())
            .sum()
    }

    /// (granules kept, granules total) of the last read that used the granule-skipping
    /// hook since the previous call, and clears it. `None`: no query asked to skip
    /// granules (no usable WHERE condition).
    pub fn take_last_prune(&self) -> Option<(usize, usize)> {
        self.last_prune.lock().ok()?.take()
    }

    fn parts_now(&self) -> PartList {
        self.parts.read().expect("parts lock").clone()
    }

    /// Inserts `batches` (schema equal to the table's) as one new part, sorted by the sort
    /// key. Returns when the part is durable. Empty input writes nothing. The batches are
    /// never concatenated: a string column may hold more than 2 GiB in all.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a schema mismatch; [`Error::Io`].
    pub fn insert(&self, batches: &[RecordBatch]) -> Result<()> {
        for b in batches {
            if b.schema().fields() != self.schema.fields() {
                return Err(Error::InvalidArgument(format!(
                    "table {}: inserted batch has schema {:?}, table has {:?}",
                    self.name,
                    b.schema().fields().iter().map(|f| format!("{} {}", f.name(), f.data_type())).collect::<Vec<_>>(),
                    self.schema.fields().iter().map(|f| format!("{} {}", f.name(), f.data_type())).collect::<Vec<_>>()
                )));
            }
        }
        let columns: Vec<Vec<ArrayRef>> = (0..self.schema.fields().len())
            .map(|c| batches.iter().filter(|b| b.num_rows() > 0).map(|b| b.column(c).clone()).collect())
            .collect();
        self.insert_chunks(&columns, &|_| {})
    }

    /// Inserts one block of rows given as chunked columns as one new part: `columns[c]` is
    /// column `c` of the table in chunks, every column cut into the same chunk lengths (a
    /// Parquet row group's batches, a TSV block's chunks). The rows are sorted by the sort
    /// key (stable) and written morsel by morsel ([`crate::merge`]): nothing is
    /// concatenated into one array per column, so a column may pass arrow's 2 GiB of
    /// string offsets as long as each granule stays under it. `progress(rows)` reports rows
    /// written. Returns when the part is durable; no rows write nothing. Memory: the input,
    /// the sort keys (~1 byte + width per key column per row) and 4 bytes per row.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a column count, type or NOT NULL mismatch, chunk
    /// lengths that differ between columns, more than 2^32-1 rows, or a granule over 2 GiB
    /// of strings; [`Error::Io`]. On error no part is added (the temporary directory is
    /// removed).
    pub fn insert_chunks(&self, columns: &[Vec<ArrayRef>], progress: &(dyn Fn(usize) + Sync)) -> Result<()> {
        let fields = self.schema.fields();
        self.check_width(columns.len())?;
        for (f, chunks) in fields.iter().zip(columns) {
            self.check_column(f, chunks)?;
        }
        if columns.first().is_none_or(|c| c.iter().all(|a| a.is_empty())) {
            return Ok(());
        }
        let tmp = self.dir.join(tmp_name("insert"));
        std::fs::create_dir(&tmp).map_err(io(&tmp))?;
        if let Err(e) = merge::write_sorted(&tmp, &self.layout, columns, progress) {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e);
        }
        self.commit_part(&tmp, None)
    }

    /// Checks that `n` columns are inserted: as many as the table has.
    fn check_width(&self, n: usize) -> Result<()> {
        let want = self.schema.fields().len();
        if n != want {
            return Err(Error::InvalidArgument(format!("table {}: {n} columns inserted, the table has {want}", self.name)));
        }
        Ok(())
    }

    /// Checks that the chunks of one inserted column have field `f`'s type, and no NULL if it
    /// is NOT NULL.
    fn check_column(&self, f: &Field, chunks: &[ArrayRef]) -> Result<()> {
        let nulls = chunks.iter().any(|a| a.null_count() > 0);
        if let Some(a) = chunks.iter().find(|a| a.data_type() != f.data_type()).or(chunks.first().filter(|_| nulls && !f.is_nullable())) {
            return Err(Error::InvalidArgument(format!(
                "table {}: column {} got {} {}, expected {}{}",
                self.name,
                f.name(),
                a.data_type(),
                if nulls { "with NULLs" } else { "" },
                f.data_type(),
                if f.is_nullable() { "" } else { " NOT NULL" }
            )));
        }
        Ok(())
    }

    /// Inserts the rows of `batches` (columns in table order, of the table's types) as one
    /// new part, all or nothing: on any error, the iterator's included, no part is added.
    /// A table without sort key writes each batch while the next is produced, so an input
    /// of any size is inserted in bounded memory (about a morsel per column in flight; a
    /// parser feeding the iterator from another thread runs beside the encoding); with a
    /// sort key the rows are collected first, then sorted and written as
    /// [`DiskTable::insert_chunks`] does. Returns the rows inserted.
    ///
    /// # Errors
    /// As [`DiskTable::insert_chunks`], and the iterator's errors.
    pub fn insert_stream(&self, batches: &mut dyn Iterator<Item = Result<RecordBatch>>) -> Result<u64> {
        let fields = self.schema.fields();
        if !self.layout.sort_key.is_empty() {
            // The rows are collected to be sorted; insert_chunks checks their columns.
            let mut columns: Vec<Vec<ArrayRef>> = vec![Vec::new(); fields.len()];
            let mut rows = 0u64;
            for b in batches {
                let b = b?;
                if b.num_rows() == 0 {
                    continue;
                }
                self.check_width(b.num_columns())?;
                rows += b.num_rows() as u64;
                for (c, a) in b.columns().iter().enumerate() {
                    columns[c].push(a.clone());
                }
            }
            self.insert_chunks(&columns, &|_| {})?;
            return Ok(rows);
        }
        let check = |b: RecordBatch| -> Result<Vec<ArrayRef>> {
            self.check_width(b.num_columns())?;
            for (f, a) in fields.iter().zip(b.columns()) {
                self.check_column(f, std::slice::from_ref(a))?;
            }
            Ok(b.columns().to_vec())
        };
        let tmp = self.dir.join(tmp_name("insert"));
        std::fs::create_dir(&tmp).map_err(io(&tmp))?;
        let mut chunks = batches.map(|b| b.and_then(check));
        match merge::write_unsorted(&tmp, &self.layout, &mut chunks, &|_| {}) {
            Ok(0) => {
                let _ = std::fs::remove_dir_all(&tmp);
                Ok(0)
            }
            Ok(rows) => self.commit_part(&tmp, None).map(|()| rows),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                Err(e)
            }
        }
    }

    /// Renames the finished part in `tmp` into place and commits it, under the commit
    /// lock: a new insert gets the next number; a merge (`merged = Some(id range)`)
    /// replaces the parts it covers. The commit point is the rename of the new manifest
    /// over the old one; the table directory is fsynced before this returns `Ok`, then the
    /// inputs of a merge are deleted.
    ///
    /// # Errors
    /// [`Error::Io`]. Before the manifest rename the part is removed and nothing changed;
    /// an error of the final directory fsync comes after the commit (the rows are visible
    /// in this process, their durability unknown).
    fn commit_part(&self, tmp: &Path, merged: Option<PartId>) -> Result<()> {
        let mut next = self.commit.lock().map_err(|_| Error::internal("commit lock poisoned"))?;
        let id = merged.unwrap_or(PartId { min: *next, max: *next, level: 0 });
        let dest = self.dir.join(id.name());
        if let Err(e) = std::fs::rename(tmp, &dest) {
            let _ = std::fs::remove_dir_all(tmp);
            return Err(Error::Io { path: dest, source: e });
        }
        let opened = sync_dir(&self.dir).and_then(|_| Part::open(&dest, &id.name(), &self.schema));
        let part = match opened {
            Ok(p) => p,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dest);
                return Err(e);
            }
        };
        // The commit lock serialises commits: the list cannot change until it is released.
        let current = self.parts_now();
        let mut list: Vec<(PartIdKey, Arc<Part>)> = current.iter().filter(|(k, _)| !id.covers(&k.0)).cloned().collect();
        list.push((PartIdKey(id), Arc::new(part)));
        list.sort_by_key(|(k, _)| k.0);
        let removed: Vec<PartId> = current.iter().filter(|(k, _)| id.covers(&k.0)).map(|(k, _)| k.0).collect();
        let m = Manifest { table_hash: self.table_hash, parts: list.iter().map(|(k, p)| entry(k.0, p)).collect() };
        if let Err(e) = manifest::replace(&self.dir, &tmp_name("manifest"), &m) {
            let _ = std::fs::remove_dir_all(&dest);
            return Err(e);
        }
        // Committed.
        if merged.is_none() {
            *next += 1;
        }
        *self.parts.write().map_err(|_| Error::internal("parts lock poisoned"))? = Arc::new(list);
        let synced = sync_dir(&self.dir);
        drop(next);
        // Readers holding the old parts keep their mappings; the directories can go. A
        // crash before this leaves them for the next open, which removes them (covered).
        if synced.is_ok() {
            for r in removed {
                let p = self.dir.join(r.name());
                let _ = std::fs::remove_dir_all(&p);
            }
        }
        synced
    }

    /// Merges all current parts into one (`OPTIMIZE TABLE`): the new part is written beside
    /// them and swapped in atomically; queries running meanwhile keep their snapshot. The
    /// merge is a k-way streaming merge on the sort key ([`crate::merge`]): memory is
    /// bounded by (columns x parts x about one block), never a whole column; rows with equal
    /// keys keep part order, then row order.
    /// Returns whether a merge happened (false with fewer than two parts).
    ///
    /// # Errors
    /// Corruption found while reading the inputs; [`Error::Io`].
    pub fn optimize(&self) -> Result<bool> {
        let _one = self.merging.lock().map_err(|_| Error::internal("merge lock poisoned"))?;
        let parts = self.parts_now();
        if parts.len() < 2 {
            return Ok(false);
        }
        let id = PartId {
            min: parts.iter().map(|(k, _)| k.0.min).min().unwrap_or(0),
            max: parts.iter().map(|(k, _)| k.0.max).max().unwrap_or(0),
            level: parts.iter().map(|(k, _)| k.0.level).max().unwrap_or(0) + 1,
        };
        let inputs: Vec<Arc<Part>> = parts.iter().map(|(_, p)| p.clone()).collect();
        let tmp = self.dir.join(tmp_name("merge"));
        std::fs::create_dir(&tmp).map_err(io(&tmp))?;
        if let Err(e) = merge::merge_parts(&tmp, &self.layout, &inputs) {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e);
        }
        self.commit_part(&tmp, Some(id))?;
        Ok(true)
    }

    /// The parts at this instant as a lazy [`Table`] for the executor: morsels are runs of
    /// up to 8 granules of one part, decoded from the memory maps on first use (each query
    /// decodes again; nothing is cached across queries besides the OS page cache).
    ///
    /// # Errors
    /// [`Error::NotImplemented`] cannot happen for a table created through this crate.
    pub fn snapshot(self: &Arc<Self>) -> Result<Table> {
        self.snapshot_cached(&Caches::default())
    }

    /// [`DiskTable::snapshot`] reading through `caches`: decoded blocks are taken from the
    /// block cache when there and put in it when decoded, so the next query over the same
    /// granules does not decode them again; the condition cache tells which granules can
    /// hold rows of a WHERE condition evaluated before.
    ///
    /// # Errors
    /// As [`DiskTable::snapshot`].
    pub fn snapshot_cached(self: &Arc<Self>, caches: &Caches) -> Result<Table> {
        let parts = self.parts_now();
        let mut morsels = Vec::new();
        for (pi, (_, p)) in parts.iter().enumerate() {
            for g0 in (0..p.granules).step_by(GRANULES_PER_MORSEL) {
                morsels.push(Morsel { part: pi, g0, g1: (g0 + GRANULES_PER_MORSEL).min(p.granules) });
            }
        }
        let snap = Snapshot::new(self.clone(), parts, morsels, caches);
        let lens = snap.chunk_lens();
        Table::lazy(&self.name, self.schema.clone(), lens, Some(Arc::new(snap)))
    }
}

fn layout_of(name: &str, schema: &SchemaRef, options: &TableOptions) -> Result<Layout> {
    if options.granule_rows == 0 {
        return Err(Error::InvalidArgument("granule_rows must be at least 1".into()));
    }
    for f in schema.fields() {
        if !is_supported_type(f.data_type()) || type_name(f.data_type()).is_none() {
            return Err(Error::not_implemented(format!("column {} of type {}", f.name(), f.data_type())));
        }
    }
    let find = |n: &str| {
        schema.fields().iter().position(|f| f.name() == n).or_else(|| schema.fields().iter().position(|f| f.name().eq_ignore_ascii_case(n)))
    };
    let sort_key = options
        .order_by
        .iter()
        .map(|k| find(k).ok_or_else(|| Error::UnknownColumn { table: name.into(), column: k.clone() }))
        .collect::<Result<Vec<_>>>()?;
    let mut codecs = vec![options.codec; schema.fields().len()];
    for (n, codec) in &options.column_codecs {
        let c = find(n).ok_or_else(|| Error::UnknownColumn { table: name.into(), column: n.clone() })?;
        codecs[c] = *codec;
    }
    let bloom = match &options.bloom_columns {
        Some(names) => names
            .iter()
            .map(|n| find(n).ok_or_else(|| Error::UnknownColumn { table: name.into(), column: n.clone() }))
            .collect::<Result<Vec<_>>>()?,
        None => sort_key.iter().skip(1).copied().collect(),
    };
    Ok(Layout {
        schema: schema.clone(),
        sort_key,
        codecs,
        granule_rows: options.granule_rows,
        encodings: options.encodings,
        bloom,
    })
}

fn columns_meta(schema: &SchemaRef, layout: &Layout) -> Vec<part::ColumnMeta> {
    schema
        .fields()
        .iter()
        .zip(&layout.codecs)
        .map(|(f, c)| part::ColumnMeta {
            name: f.name().clone(),
            data_type: type_name(f.data_type()).unwrap_or("?").into(),
            nullable: f.is_nullable(),
            codec: *c,
        })
        .collect()
}
