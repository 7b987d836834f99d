//! Tables on disk: a directory of parts, inserts that commit a part atomically, merges,
//! snapshots that feed the executor, and the database directory ([`Store`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use arrow::array::{ArrayRef, RecordBatch};
use arrow::compute::concat;
use arrow::datatypes::{Field, Schema, SchemaRef};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use tessera_common::{ColumnRange, ColumnSource, Error, PrunedSource, RangeValue, Result, Table, is_supported_type};

use crate::block::Codec;
use crate::part::{self, GRANULES_PER_MORSEL, Layout, Part, Stats, parse_type, sync_dir, type_name, write_part, write_synced};

/// Rows per granule unless a table says otherwise (ClickHouse's `index_granularity`).
pub const DEFAULT_GRANULE_ROWS: usize = 8192;

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
#[derive(Debug, Serialize, Deserialize)]
struct TableMeta {
    format_version: u32,
    name: String,
    columns: Vec<part::ColumnMeta>,
    options: TableOptions,
}

/// Identity of a part from its directory name `MIN_MAX_LEVEL`: it holds the inserts
/// numbered `MIN..=MAX`, merged `LEVEL` times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct PartId {
    min: u64,
    max: u64,
    level: u32,
}

impl PartId {
    fn parse(s: &str) -> Option<PartId> {
        let mut it = s.split('_');
        let id = PartId { min: it.next()?.parse().ok()?, max: it.next()?.parse().ok()?, level: it.next()?.parse().ok()? };
        (it.next().is_none() && id.min <= id.max).then_some(id)
    }
    fn name(&self) -> String {
        format!("{:010}_{:010}_{}", self.min, self.max, self.level)
    }
    fn covers(&self, o: &PartId) -> bool {
        self != o && self.min <= o.min && o.max <= self.max
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io { path: path.to_path_buf(), source }
}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

fn tmp_name(kind: &str) -> String {
    format!("tmp_{kind}_{}_{}", std::process::id(), TMP_COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// Valid table names: ASCII letters, digits and `_`, not starting with `tmp_` or a digit.
fn check_name(name: &str) -> Result<String> {
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
    last_prune: Mutex<Option<(usize, usize)>>,
}

/// The committed parts with their identities, ordered by insert number.
type PartList = Arc<Vec<(PartIdKey, Arc<Part>)>>;

/// Opaque part identity kept in the part list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartIdKey(PartId);

impl DiskTable {
    fn create(dir: &Path, name: &str, schema: SchemaRef, options: TableOptions) -> Result<DiskTable> {
        let layout = layout_of(name, &schema, &options)?;
        let meta = TableMeta {
            format_version: part::FORMAT_VERSION,
            name: name.to_string(),
            columns: columns_meta(&schema, &layout),
            options: options.clone(),
        };
        let json = serde_json::to_vec_pretty(&meta).map_err(|e| Error::internal(format!("table.json: {e}")))?;
        let parent = dir.parent().ok_or_else(|| Error::internal("table dir has no parent"))?;
        let tmp = parent.join(tmp_name("create"));
        std::fs::create_dir(&tmp).map_err(io(&tmp))?;
        write_synced(&tmp.join("table.json"), &json)?;
        sync_dir(&tmp)?;
        std::fs::rename(&tmp, dir).map_err(io(dir))?;
        sync_dir(parent)?;
        Ok(DiskTable::new(name, dir, schema, options, layout, vec![], 1))
    }

    fn new(
        name: &str,
        dir: &Path,
        schema: SchemaRef,
        options: TableOptions,
        layout: Layout,
        parts: Vec<(PartIdKey, Arc<Part>)>,
        next: u64,
    ) -> DiskTable {
        DiskTable {
            name: name.to_string(),
            dir: dir.to_path_buf(),
            schema,
            options,
            layout,
            parts: RwLock::new(Arc::new(parts)),
            commit: Mutex::new(next),
            merging: Mutex::new(()),
            last_prune: Mutex::new(None),
        }
    }

    /// Opens the table in `dir`: removes leftover temporary parts (crashed inserts or
    /// merges) and parts covered by a merged part (a merge that crashed before deleting its
    /// inputs), then opens and verifies every part.
    ///
    /// # Errors
    /// [`Error::Corrupt`] for a bad `table.json` or part, [`Error::Io`].
    fn open(dir: &Path) -> Result<DiskTable> {
        let tj = dir.join("table.json");
        let bytes = std::fs::read(&tj).map_err(io(&tj))?;
        let meta: TableMeta = serde_json::from_slice(&bytes)
            .map_err(|e| Error::Corrupt { path: tj.clone(), detail: format!("bad JSON: {e}") })?;
        if meta.format_version != part::FORMAT_VERSION {
            return Err(Error::Corrupt {
                path: tj,
                detail: format!("unsupported format version {} (this build reads {})", meta.format_version, part::FORMAT_VERSION),
            });
        }
        let fields = meta
            .columns
            .iter()
            .map(|c| {
                parse_type(&c.data_type).map(|t| Field::new(&c.name, t, c.nullable)).ok_or_else(|| Error::Corrupt {
                    path: tj.clone(),
                    detail: format!("unknown type {} of column {}", c.data_type, c.name),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let schema: SchemaRef = Arc::new(Schema::new(fields));
        let layout = layout_of(&meta.name, &schema, &meta.options)?;
        let mut ids = Vec::new();
        for e in std::fs::read_dir(dir).map_err(io(dir))? {
            let e = e.map_err(io(dir))?;
            let name = e.file_name().to_string_lossy().to_string();
            if name.starts_with("tmp_") {
                let p = e.path();
                std::fs::remove_dir_all(&p).or_else(|_| std::fs::remove_file(&p)).map_err(io(&p))?;
            } else if let Some(id) = PartId::parse(&name) {
                ids.push(id);
            }
        }
        ids.sort();
        let (covered, live): (Vec<PartId>, Vec<PartId>) =
            ids.iter().partition(|id| ids.iter().any(|o| o.covers(id)));
        for id in covered {
            let p = dir.join(id.name());
            std::fs::remove_dir_all(&p).map_err(io(&p))?;
        }
        let next = live.iter().map(|id| id.max + 1).max().unwrap_or(1);
        let parts = live
            .par_iter()
            .map(|id| Ok((PartIdKey(*id), Arc::new(Part::open(&dir.join(id.name()), &id.name(), &schema)?))))
            .collect::<Result<Vec<_>>>()?;
        sync_dir(dir)?;
        Ok(DiskTable::new(&meta.name, dir, schema, meta.options, layout, parts, next))
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
    /// key. Returns when the part is durable. Empty input writes nothing.
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
        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
        let col = |c: usize| -> Result<ArrayRef> {
            let parts: Vec<&dyn arrow::array::Array> = batches.iter().map(|b| b.column(c).as_ref()).collect();
            Ok(concat(&parts)?)
        };
        self.insert_columns(rows, &col, &|_| {})
    }

    /// Inserts `rows` rows given column by column: `get(c)` returns all rows of column `c`
    /// (called from several threads, about twice for sort-key columns, once for others, so
    /// only a few columns are in memory at a time). `done(c)` reports progress.
    ///
    /// # Errors
    /// As [`DiskTable::insert`], plus errors of `get`.
    pub fn insert_columns(
        &self,
        rows: usize,
        get: &(dyn Fn(usize) -> Result<ArrayRef> + Sync),
        done: &(dyn Fn(usize) + Sync),
    ) -> Result<()> {
        if rows == 0 {
            return Ok(());
        }
        let checked = |c: usize| -> Result<ArrayRef> {
            let a = get(c)?;
            let f = self.schema.field(c);
            if a.data_type() != f.data_type() || (!f.is_nullable() && a.null_count() > 0) {
                return Err(Error::InvalidArgument(format!(
                    "table {}: column {} got {} {}, expected {}{}",
                    self.name,
                    f.name(),
                    a.data_type(),
                    if a.null_count() > 0 { "with NULLs" } else { "" },
                    f.data_type(),
                    if f.is_nullable() { "" } else { " NOT NULL" }
                )));
            }
            Ok(a)
        };
        let keys = self.layout.sort_key.iter().map(|&k| checked(k)).collect::<Result<Vec<_>>>()?;
        let perm = part::sort_permutation(&keys)?;
        drop(keys);
        let tmp = self.dir.join(tmp_name("insert"));
        std::fs::create_dir(&tmp).map_err(io(&tmp))?;
        let written = write_part(&tmp, &self.layout, rows, perm.as_ref(), &checked, done);
        if let Err(e) = written {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e);
        }
        self.commit_part(&tmp, None, &[])
    }

    /// Renames the finished part in `tmp` into place under the commit lock and publishes
    /// it: a new insert gets the next number; a merge (`merged = Some(id range)`) replaces
    /// the parts it covers.
    fn commit_part(&self, tmp: &Path, merged: Option<PartId>, _inputs: &[PartIdKey]) -> Result<()> {
        let mut next = self.commit.lock().map_err(|_| Error::internal("commit lock poisoned"))?;
        let id = merged.unwrap_or(PartId { min: *next, max: *next, level: 0 });
        let dest = self.dir.join(id.name());
        let opened = std::fs::rename(tmp, &dest)
            .map_err(io(&dest))
            .and_then(|_| sync_dir(&self.dir))
            .and_then(|_| Part::open(&dest, &id.name(), &self.schema));
        let part = match opened {
            Ok(p) => p,
            Err(e) => {
                let _ = std::fs::remove_dir_all(tmp);
                return Err(e);
            }
        };
        if merged.is_none() {
            *next += 1;
        }
        let mut parts = self.parts.write().map_err(|_| Error::internal("parts lock poisoned"))?;
        let mut list: Vec<(PartIdKey, Arc<Part>)> =
            parts.iter().filter(|(k, _)| !id.covers(&k.0)).cloned().collect();
        list.push((PartIdKey(id), Arc::new(part)));
        list.sort_by_key(|(k, _)| k.0);
        let removed: Vec<PartId> = parts.iter().filter(|(k, _)| id.covers(&k.0)).map(|(k, _)| k.0).collect();
        *parts = Arc::new(list);
        drop(parts);
        drop(next);
        // Readers holding the old parts keep their mappings; the directories can go.
        for r in removed {
            let p = self.dir.join(r.name());
            let _ = std::fs::remove_dir_all(&p);
        }
        Ok(())
    }

    /// Merges all current parts into one (`OPTIMIZE TABLE`): the new part is written beside
    /// them and swapped in atomically; queries running meanwhile keep their snapshot.
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
        let rows: usize = parts.iter().map(|(_, p)| p.rows).sum();
        let get = |c: usize| -> Result<ArrayRef> {
            let pieces = parts.iter().map(|(_, p)| p.read_granules(c, 0, p.granules)).collect::<Result<Vec<_>>>()?;
            Ok(concat(&pieces.iter().map(|a| a.as_ref()).collect::<Vec<_>>())?)
        };
        let keys = self.layout.sort_key.iter().map(|&k| get(k)).collect::<Result<Vec<_>>>()?;
        let perm = part::sort_permutation(&keys)?;
        drop(keys);
        let tmp = self.dir.join(tmp_name("merge"));
        std::fs::create_dir(&tmp).map_err(io(&tmp))?;
        if let Err(e) = write_part(&tmp, &self.layout, rows, perm.as_ref(), &get, &|_| {}) {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e);
        }
        let inputs: Vec<PartIdKey> = parts.iter().map(|(k, _)| *k).collect();
        self.commit_part(&tmp, Some(id), &inputs)?;
        Ok(true)
    }

    /// The parts at this instant as a lazy [`Table`] for the executor: morsels are runs of
    /// up to 8 granules of one part, decoded from the memory maps on first use (each query
    /// decodes again; nothing is cached across queries besides the OS page cache).
    ///
    /// # Errors
    /// [`Error::NotImplemented`] cannot happen for a table created through this crate.
    pub fn snapshot(self: &Arc<Self>) -> Result<Table> {
        let parts = self.parts_now();
        let mut morsels = Vec::new();
        for (pi, (_, p)) in parts.iter().enumerate() {
            for g0 in (0..p.granules).step_by(GRANULES_PER_MORSEL) {
                morsels.push(Morsel { part: pi, g0, g1: (g0 + GRANULES_PER_MORSEL).min(p.granules) });
            }
        }
        let snap = Snapshot { table: self.clone(), parts, morsels };
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

/// Granules `g0..g1` of part `part` of a snapshot: one morsel.
#[derive(Debug, Clone, Copy)]
struct Morsel {
    part: usize,
    g0: usize,
    g1: usize,
}

/// A consistent set of parts feeding one query ([`ColumnSource`]).
#[derive(Debug)]
struct Snapshot {
    table: Arc<DiskTable>,
    parts: PartList,
    morsels: Vec<Morsel>,
}

impl Snapshot {
    fn chunk_lens(&self) -> Vec<usize> {
        self.morsels
            .iter()
            .map(|m| {
                let p = &self.parts[m.part].1;
                (m.g0..m.g1).map(|g| p.granule_len(g)).sum()
            })
            .collect()
    }

    /// Whether granule `g` of `p` may hold rows satisfying every range.
    fn may_match(p: &Part, g: usize, ranges: &[ColumnRange]) -> bool {
        ranges.iter().all(|r| match (&p.stats[r.column], r) {
            (Stats::Int(s), _) => match s[g] {
                None => false,
                Some((lo, hi)) => {
                    let low_ok = match &r.lower {
                        Some((RangeValue::Int(v), incl)) => hi > *v || (*incl && hi == *v),
                        _ => true,
                    };
                    let high_ok = match &r.upper {
                        Some((RangeValue::Int(v), incl)) => lo < *v || (*incl && lo == *v),
                        _ => true,
                    };
                    low_ok && high_ok
                }
            },
            (Stats::Bytes(s), _) => match &s[g] {
                None => false,
                Some((lo, hi)) => {
                    let low_ok = match &r.lower {
                        Some((RangeValue::Bytes(v), incl)) => hi.as_slice() > v.as_slice() || (*incl && hi == v),
                        _ => true,
                    };
                    let high_ok = match &r.upper {
                        Some((RangeValue::Bytes(v), incl)) => lo.as_slice() < v.as_slice() || (*incl && lo == v),
                        _ => true,
                    };
                    low_ok && high_ok
                }
            },
            (Stats::None, _) => true,
        }) && ranges.iter().all(|r| {
            // Equality: the bloom filter, where the column has one.
            let (Some((lo, true)), Some((hi, true))) = (&r.lower, &r.upper) else { return true };
            let Some(blooms) = &p.blooms[r.column] else { return true };
            if lo != hi {
                return true;
            }
            let h = match (lo, &p.stats[r.column]) {
                (RangeValue::Int(v), Stats::Int(_)) => part::bloom_hash_int(*v),
                (RangeValue::Bytes(b), Stats::Bytes(_)) => part::bloom_hash_bytes(b),
                _ => return true,
            };
            part::bloom_may_contain(&blooms[g], h)
        })
    }
}

impl ColumnSource for Snapshot {
    /// Decodes the columns at `indices` for every morsel, (column, morsel) pairs in
    /// parallel on the rayon pool.
    fn load_columns(&self, indices: &[usize]) -> Result<Vec<Vec<ArrayRef>>> {
        let tasks: Vec<(usize, usize)> =
            indices.iter().flat_map(|&c| (0..self.morsels.len()).map(move |m| (c, m))).collect();
        let arrays = tasks
            .par_iter()
            .map(|&(c, m)| {
                let mo = self.morsels[m];
                self.parts[mo.part].1.read_granules(c, mo.g0, mo.g1)
            })
            .collect::<Result<Vec<_>>>()?;
        let n = self.morsels.len();
        let mut it = arrays.into_iter();
        Ok(indices.iter().map(|_| it.by_ref().take(n).collect()).collect())
    }

    fn reads_morsels(&self) -> bool {
        true
    }

    /// Decodes only the granules of `morsels` (late materialization of a few rows).
    fn load_morsels(&self, indices: &[usize], morsels: &[usize]) -> Result<Vec<Vec<ArrayRef>>> {
        if let Some(&bad) = morsels.iter().find(|&&m| m >= self.morsels.len()) {
            return Err(Error::internal(format!("morsel {bad} out of range")));
        }
        let tasks: Vec<(usize, usize)> = indices.iter().flat_map(|&c| morsels.iter().map(move |&m| (c, m))).collect();
        let arrays = tasks
            .par_iter()
            .map(|&(c, m)| {
                let mo = self.morsels[m];
                self.parts[mo.part].1.read_granules(c, mo.g0, mo.g1)
            })
            .collect::<Result<Vec<_>>>()?;
        let n = morsels.len();
        let mut it = arrays.into_iter();
        Ok(indices.iter().map(|_| it.by_ref().take(n).collect()).collect())
    }

    /// Keeps granules whose min/max (and, for the leading sort-key column, the sparse
    /// primary index) admit every range; consecutive kept granules of one part form
    /// morsels of up to 8 granules, never crossing a multiple of 8.
    fn prune(&self, ranges: &[ColumnRange]) -> Option<PrunedSource> {
        let ranges: Vec<ColumnRange> =
            ranges.iter().filter(|r| r.column < self.table.schema.fields().len()).cloned().collect();
        if ranges.is_empty() {
            return None;
        }
        let mut morsels = Vec::new();
        let (mut kept, mut total) = (0, 0);
        for m in &self.morsels {
            let p = &self.parts[m.part].1;
            let mut run: Option<usize> = None;
            for g in m.g0..m.g1 {
                total += 1;
                if Self::may_match(p, g, &ranges) {
                    kept += 1;
                    run.get_or_insert(g);
                } else if let Some(s) = run.take() {
                    morsels.push(Morsel { part: m.part, g0: s, g1: g });
                }
            }
            if let Some(s) = run {
                morsels.push(Morsel { part: m.part, g0: s, g1: m.g1 });
            }
        }
        *self.table.last_prune.lock().expect("prune lock") = Some((kept, total));
        let snap = Snapshot { table: self.table.clone(), parts: self.parts.clone(), morsels };
        Some(PrunedSource { chunk_lens: snap.chunk_lens(), source: Arc::new(snap) })
    }
}

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
}

impl Store {
    /// Opens (creating if missing) the database directory `dir` and every table in it,
    /// cleaning up after crashed inserts and merges.
    ///
    /// # Errors
    /// [`Error::Io`], or [`Error::Corrupt`] naming the first damaged file.
    pub fn open(dir: &Path) -> Result<Store> {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let mut tables = BTreeMap::new();
        for e in std::fs::read_dir(dir).map_err(io(dir))? {
            let e = e.map_err(io(dir))?;
            let name = e.file_name().to_string_lossy().to_string();
            let p = e.path();
            if name.starts_with("tmp_") {
                std::fs::remove_dir_all(&p).or_else(|_| std::fs::remove_file(&p)).map_err(io(&p))?;
            } else if p.join("table.json").is_file() {
                let t = DiskTable::open(&p)?;
                tables.insert(t.name.to_ascii_lowercase(), Arc::new(t));
            }
        }
        Ok(Store { dir: dir.to_path_buf(), tables: RwLock::new(tables) })
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
