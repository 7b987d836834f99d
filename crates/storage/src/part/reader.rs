//! Reading a part: [`Part::open`] verifies and maps a part directory; granule runs are
//! decoded on demand.

use std::sync::atomic::{AtomicU64, Ordering};

use super::*;

/// The table a part directory belongs to (its parent directory's name), for messages.
fn table_of(dir: &Path) -> String {
    dir.parent().and_then(|p| p.file_name()).map_or_else(|| "?".into(), |n| n.to_string_lossy().into_owned())
}

/// An open, verified part: column files and bloom filters mapped, marks, primary index and
/// min/max in memory.
#[derive(Debug)]
pub struct Part {
    pub(crate) name: String,
    pub(crate) dir: PathBuf,
    pub(crate) rows: usize,
    pub(crate) granule_rows: usize,
    pub(crate) granules: usize,
    /// xxh3 of `checksums.txt` (which covers every other file): the part's identity in the
    /// table manifest.
    pub(crate) sums_hash: u64,
    /// Process-unique id of this opened part: its decoded blocks' key in the block cache.
    pub(crate) uid: u64,
    schema: SchemaRef,
    maps: Vec<Mmap>,
    /// `marks[c][g]`: byte offset of the block holding granule `g` of column `c`, and the
    /// granule's first row inside that block.
    marks: Vec<Vec<(u64, u32)>>,
    /// First sort-key tuple of each granule (one array of `granules` values per key column).
    pub(crate) primary: Vec<ArrayRef>,
    pub(crate) stats: Vec<Stats>,
    /// `min_max[c]`: per-granule minimums and maximums of column `c` (the column's type).
    pub(crate) min_max: Vec<(ArrayRef, ArrayRef)>,
    /// Per-granule bloom filters of the columns that have them.
    pub(crate) blooms: Blooms,
    /// `verified[c]`, bit `g`: the block holding granule `g` of column `c` passed its
    /// checksum in this process, so later reads decode it without hashing it again (the
    /// hash was 8-10% of a URL scan from disk at 100M rows, and all but the offsets of a
    /// lengths-only read). Parts are immutable files; what was verified is what is mapped.
    /// A decoded block in the block cache is trusted the same way.
    verified: Vec<Vec<AtomicU64>>,
}

/// The per-granule bloom filters of a part, probed in place in the memory-mapped
/// `bloom.idx`. Opening the part verifies the file through the same map (checksum and
/// structure), and the filters are never copied to the heap: at 100M rows of hits those of the sort-key
/// columns after the first are 546 MiB, which kept there were most of an open database's
/// resident memory (and counted in every query's peak RSS: RssAnon after opening that
/// database went from 600 to 149 MiB). Mapped, their pages belong to the OS page cache,
/// read when a `column = constant` condition probes them, and reclaimable.
#[derive(Debug, Default)]
pub(crate) struct Blooms {
    /// The file's map; `None` when no column has a bloom filter.
    map: Option<Mmap>,
    /// `filters[c][g]`: byte offset and length in the map of granule `g`'s filter words of
    /// column `c`, if column `c` has filters.
    filters: FilterRanges,
}

/// Per column, if it has bloom filters, the byte range of each granule's filter words in
/// `bloom.idx`.
type FilterRanges = Vec<Option<Vec<(usize, usize)>>>;

impl Blooms {
    /// Whether column `c` has bloom filters.
    pub(crate) fn has(&self, c: usize) -> bool {
        self.filters.get(c).is_some_and(Option::is_some)
    }

    /// Whether granule `g` of column `c` may hold a value of hash `hash` (see
    /// [`super::bloom_hash_int`]); `None` when the column has no bloom filter.
    pub(crate) fn may_contain(&self, c: usize, g: usize, hash: u64) -> Option<bool> {
        let (map, filters) = (self.map.as_ref()?, self.filters.get(c)?.as_ref()?);
        let &(off, len) = filters.get(g)?;
        Some(bloom_may_contain(&map[off..off + len], hash))
    }
}

impl Part {
    fn corrupt(&self, file: &str, detail: String) -> Error {
        Error::Corrupt { path: self.dir.join(file), detail: format!("table {}: part {}: {detail}", table_of(&self.dir), self.name) }
    }

    /// Opens the part in `dir` (named `name`), verifying its checksums file, the checksums
    /// of its metadata and index files, the sizes of its column files, and that its schema
    /// equals `schema`.
    ///
    /// # Errors
    /// [`Error::Corrupt`] naming the file and what is wrong (missing file, wrong format
    /// version, bad checksum, truncated file); [`Error::Io`] for other I/O failures.
    pub(crate) fn open(dir: &Path, name: &str, schema: &SchemaRef) -> Result<Part> {
        let table = table_of(dir);
        let corrupt =
            |file: &str, detail: String| Error::Corrupt { path: dir.join(file), detail: format!("table {table}: part {name}: {detail}") };
        let io_error = |file: &str, e: std::io::Error| match e.kind() {
            std::io::ErrorKind::NotFound => corrupt(file, "missing file".into()),
            _ => Error::Io { path: dir.join(file), source: e },
        };
        let read = |file: &str| std::fs::read(dir.join(file)).map_err(|e| io_error(file, e));
        let sums = read("checksums.txt")?;
        let text = std::str::from_utf8(&sums).map_err(|_| corrupt("checksums.txt", "not UTF-8".into()))?;
        let mut lines = text.lines();
        let head = lines.next().unwrap_or("");
        let version = head.strip_prefix("tessera part format ").and_then(|v| v.parse::<u32>().ok());
        match version {
            Some(v) => super::check_version(v).map_err(|e| corrupt("checksums.txt", e))?,
            None => return Err(corrupt("checksums.txt", format!("bad header line {head:?} at byte offset 0"))),
        }
        let body_end = text.rfind("end\t").ok_or_else(|| corrupt("checksums.txt", "no end line (truncated)".into()))?;
        let want = text[body_end + 4..].trim();
        let got = format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&sums[..body_end]));
        if want != got {
            return Err(corrupt("checksums.txt", format!("checksum mismatch (stored {want}, computed {got})")));
        }
        let mut listed: Vec<(String, u64, String)> = Vec::new();
        for (i, line) in text[..body_end].lines().enumerate().skip(1) {
            let f: Vec<&str> = line.split('\t').collect();
            let (Some(n), Some(l), Some(h)) = (f.first(), f.get(1).and_then(|l| l.parse().ok()), f.get(2)) else {
                return Err(corrupt("checksums.txt", format!("bad line {}: {line:?}", i + 1)));
            };
            listed.push((n.to_string(), l, h.to_string()));
        }
        let mut small = std::collections::HashMap::new();
        // `bloom.idx` (546 MiB at 100M rows of hits) is verified in a read-only map of the
        // file, the map that then serves the filters: the file is read once, not copied.
        let mut bloom_map = None;
        for (file, len, hash) in &listed {
            let actual = std::fs::metadata(dir.join(file)).map_err(|e| io_error(file, e))?.len();
            if actual != *len {
                return Err(corrupt(file, format!("size {actual} bytes, checksums.txt says {len} (truncated or extended)")));
            }
            if file.ends_with(".bin") {
                continue;
            }
            let check = |bytes: &[u8]| {
                let got = format!("{:016x}", xxhash_rust::xxh3::xxh3_64(bytes));
                if &got != hash {
                    return Err(corrupt(file, format!("checksum mismatch (stored {hash}, computed {got})")));
                }
                Ok(())
            };
            if file == "bloom.idx" {
                let f = File::open(dir.join(file)).map_err(|e| io_error(file, e))?;
                // SAFETY: as for the column files below: a committed part's files are never
                // written or truncated. Its bytes are verified through this map (checksum
                // here, structure in `read_blooms`), so the filters probed later are the
                // verified ones.
                let map = unsafe { Mmap::map(&f) }.map_err(|e| io_error(file, e))?;
                check(&map)?;
                bloom_map = Some(map);
            } else {
                let bytes = read(file)?;
                check(&bytes)?;
                small.insert(file.clone(), bytes);
            }
        }
        let take_small = |small: &mut std::collections::HashMap<String, Vec<u8>>, f: &str| {
            small.remove(f).ok_or_else(|| corrupt("checksums.txt", format!("{f} is not listed")))
        };
        let meta_bytes = take_small(&mut small, "meta.json")?;
        let meta: PartMeta =
            serde_json::from_slice(&meta_bytes).map_err(|e| corrupt("meta.json", format!("bad JSON: {e}")))?;
        super::check_version(meta.format_version).map_err(|e| corrupt("meta.json", e))?;
        let file_schema: Vec<Field> = meta
            .columns
            .iter()
            .map(|c| {
                parse_type(&c.data_type)
                    .map(|t| Field::new(&c.name, t, c.nullable))
                    .ok_or_else(|| corrupt("meta.json", format!("unknown type {} of column {}", c.data_type, c.name)))
            })
            .collect::<Result<_>>()?;
        if Schema::new(file_schema).fields() != schema.fields() {
            return Err(corrupt("meta.json", "schema differs from the table's".into()));
        }
        let ncols = meta.columns.len();
        if meta.granule_rows == 0 || meta.granules != granule_count(meta.rows, meta.granule_rows) || meta.rows == 0 {
            return Err(corrupt("meta.json", format!("inconsistent rows {} / granules {}", meta.rows, meta.granules)));
        }
        if meta.sort_key.iter().any(|&k| k >= ncols) {
            return Err(corrupt("meta.json", "sort key column out of range".into()));
        }
        let g = meta.granules;
        // marks
        let marks_bytes = take_small(&mut small, "marks.mrk")?;
        let body = check_index(&marks_bytes, MARKS_MAGIC, ncols, g).map_err(|d| corrupt("marks.mrk", d))?;
        if body.len() != ncols * g * 12 {
            return Err(corrupt("marks.mrk", format!("{} mark bytes, expected {}", body.len(), ncols * g * 12)));
        }
        let marks: Vec<Vec<(u64, u32)>> = body
            .chunks_exact(g * 12)
            .map(|col| {
                col.chunks_exact(12)
                    .map(|m| (u64::from_le_bytes(m[..8].try_into().expect("8")), u32::from_le_bytes(m[8..].try_into().expect("4"))))
                    .collect()
            })
            .collect();
        // primary index and min/max
        let prim_bytes = take_small(&mut small, "primary.idx")?;
        let body = check_index(&prim_bytes, PRIMARY_MAGIC, meta.sort_key.len(), g).map_err(|d| corrupt("primary.idx", d))?;
        let key_types: Vec<DataType> = meta.sort_key.iter().map(|&k| schema.field(k).data_type().clone()).collect();
        let primary = read_blocks(body, &key_types, g).map_err(|d| corrupt("primary.idx", d))?;
        let mm_bytes = take_small(&mut small, "minmax.idx")?;
        let body = check_index(&mm_bytes, MINMAX_MAGIC, ncols, g).map_err(|d| corrupt("minmax.idx", d))?;
        let mm_types: Vec<DataType> = schema.fields().iter().flat_map(|f| [f.data_type().clone(), f.data_type().clone()]).collect();
        let mm = read_blocks(body, &mm_types, g).map_err(|d| corrupt("minmax.idx", d))?;
        let stats = mm.chunks_exact(2).map(|p| stats_of(&p[0], &p[1])).collect();
        let min_max = mm.chunks_exact(2).map(|p| (p[0].clone(), p[1].clone())).collect();
        let bloom_map = bloom_map.ok_or_else(|| corrupt("checksums.txt", "bloom.idx is not listed".into()))?;
        // Every filter's range lies within the map (checked by `read_blooms`).
        let filters = read_blooms(&bloom_map, ncols, g).map_err(|d| corrupt("bloom.idx", d))?;
        let blooms = if filters.iter().any(Option::is_some) {
            let _ = bloom_map.advise(Advice::Random);
            Blooms { map: Some(bloom_map), filters }
        } else {
            Blooms::default()
        };
        // column files
        let mut maps = Vec::with_capacity(ncols);
        for c in 0..ncols {
            let file = format!("c{c}.bin");
            let p = dir.join(&file);
            if !listed.iter().any(|(n, ..)| *n == file) {
                return Err(corrupt("checksums.txt", format!("{file} is not listed")));
            }
            let f = File::open(&p).map_err(|e| io_error(&file, e))?;
            // SAFETY: parts are immutable once renamed into place: Tessera never writes to
            // or truncates a committed column file (merges write new parts and delete old
            // directories, which leaves existing mappings valid on Unix). Another process
            // modifying the file would be outside the format's contract; every block read
            // from the map is bounds-checked and checksum-verified before use.
            let map = unsafe { Mmap::map(&f) }.map_err(|e| Error::Io { path: p.clone(), source: e })?;
            // Morsels read whole blocks in file order: tell the kernel to read ahead.
            let _ = map.advise(Advice::Sequential);
            maps.push(map);
        }
        for (c, m) in marks.iter().enumerate() {
            let len = maps[c].len() as u64;
            if m.iter().any(|&(off, _)| off >= len) || m.windows(2).any(|w| w[0].0 > w[1].0) {
                return Err(corrupt(&format!("c{c}.bin"), "marks point outside the file or go backwards".into()));
            }
        }
        Ok(Part {
            name: name.to_string(),
            dir: dir.to_path_buf(),
            rows: meta.rows,
            granule_rows: meta.granule_rows,
            granules: g,
            sums_hash: xxhash_rust::xxh3::xxh3_64(&sums),
            uid: crate::cache::next_part_id(),
            schema: schema.clone(),
            maps,
            marks,
            primary,
            stats,
            min_max,
            blooms,
            verified: (0..ncols).map(|_| (0..g.div_ceil(64)).map(|_| AtomicU64::new(0)).collect()).collect(),
        })
    }

    /// The part's directory name (`MIN_MAX_LEVEL`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Rows in the part.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Granules in the part (the last one may be shorter).
    pub fn granules(&self) -> usize {
        self.granules
    }

    /// The sparse primary index: for each sort-key column (major first), an array of one
    /// value per granule, the key of the granule's first row.
    pub fn primary_index(&self) -> &[ArrayRef] {
        &self.primary
    }

    /// Rows of granule `g`.
    pub(crate) fn granule_len(&self, g: usize) -> usize {
        self.granule_rows.min(self.rows - g * self.granule_rows)
    }

    /// The first granule of column `c` stored in the block that holds granule `g`.
    pub(crate) fn block_start(&self, c: usize, g: usize) -> usize {
        let marks = &self.marks[c];
        let mut start = g;
        while start > 0 && marks[start - 1].0 == marks[g].0 {
            start -= 1;
        }
        start
    }

    /// The granule after the last one of column `c` stored in the block that holds granule
    /// `g` (`g < granules`): reading up to it decodes no block twice.
    pub(crate) fn block_end(&self, c: usize, g: usize) -> usize {
        let marks = &self.marks[c];
        let mut end = g + 1;
        while end < self.granules && marks[end].0 == marks[g].0 {
            end += 1;
        }
        end
    }

    /// Drops the pages of the blocks of column `c` from granule `g0`'s block (and 256 KiB
    /// before it) up to granule `g1`'s block (`g1 == granules`: to the end) from this process's
    /// page tables, keeping them in the OS page cache. A merge reads each input part once,
    /// front to back: without this the resident set grows by every input byte read through
    /// the maps. Only a hint: errors are ignored.
    pub(crate) fn release(&self, c: usize, g0: usize, g1: usize) {
        let (map, marks) = (&self.maps[c], &self.marks[c]);
        if g0 >= g1 || g0 >= self.granules {
            return;
        }
        // Also the bytes just before: the kernel's fault-around maps up to 64 KiB of cached
        // pages around each fault, pages of earlier, already released blocks included.
        const SLACK: usize = 256 * 1024;
        let start = (marks[g0].0 as usize).saturating_sub(SLACK);
        let end = if g1 < self.granules { marks[g1].0 as usize } else { map.len() };
        if start < end && end <= map.len() {
            // SAFETY: `map` is a read-only MAP_SHARED mapping of a file (`Mmap::map`), never
            // written (see `Part::open`). For a shared file mapping MADV_DONTNEED only
            // removes page-table entries: a later access faults the same file bytes back in
            // from the page cache (madvise(2)), so slices borrowed from the map, here or in
            // concurrent queries, keep reading the same bytes. memmap2 checks the range
            // against the map and aligns its start down to a page.
            let _ = unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start) };
        }
    }

    /// Whether the block holding granule `g` of column `c` passed its checksum in this
    /// process ([`Part::verified`]).
    fn is_verified(&self, c: usize, g: usize) -> bool {
        self.verified.get(c).and_then(|v| v.get(g / 64)).is_some_and(|w| w.load(Ordering::Relaxed) & (1 << (g % 64)) != 0)
    }

    /// Marks every granule of the block holding granule `g` of column `c` verified.
    fn set_verified(&self, c: usize, g: usize) {
        for x in self.block_start(c, g)..self.block_end(c, g) {
            if let Some(w) = self.verified.get(c).and_then(|v| v.get(x / 64)) {
                w.fetch_or(1 << (x % 64), Ordering::Relaxed);
            }
        }
    }

    /// Decodes rows of granules `g0..g1` of column `c`, verifying each block's checksum the
    /// first time this process reads it.
    ///
    /// # Errors
    /// [`Error::Corrupt`] naming the part, the column file, the column and the block's byte
    /// offset.
    pub(crate) fn read_granules(&self, c: usize, g0: usize, g1: usize) -> Result<ArrayRef> {
        self.read_granules_as(c, g0, g1, false)
    }

    /// The byte length of each value of string or binary column `c` in granules `g0..g1`
    /// (a `UInt32Array`, NULL where the value is), decoding only what the blocks' layout
    /// needs for that ([`block::read_block_sizes`]).
    ///
    /// # Errors
    /// As [`Part::read_granules`]; [`Error::Corrupt`] for a column of another type.
    pub(crate) fn read_granule_sizes(&self, c: usize, g0: usize, g1: usize) -> Result<ArrayRef> {
        self.read_granules_as(c, g0, g1, true)
    }

    /// The rows of granules `g0..g1` (numbered from `g0`'s first row) where integer column
    /// `c` is not zero, ascending, and its values there; `None` unless every block holding
    /// those granules is sparse ([`block::read_block_sparse`]: the other rows are zero).
    ///
    /// # Errors
    /// As [`Part::read_granules`].
    pub(crate) fn read_granules_sparse(&self, c: usize, g0: usize, g1: usize) -> Result<Option<(Vec<u32>, ArrayRef)>> {
        let field = self.schema.field(c);
        let (mut rows, mut values, mut base) = (Vec::new(), Vec::new(), 0u32);
        for run in self.block_runs(c, g0, g1) {
            // Asked before `with_block`, which marks the block verified: a block that is not
            // sparse is not read here, so its checksum is still to be verified.
            if !block::is_sparse(&self.maps[c][run.off as usize..]) {
                return Ok(None);
            }
            // Not advised (`WillNeed`): a sparse block is a few KiB, and the `madvise` call per
            // block was a tenth of ClickBench Q2's time from disk.
            let Some((block_rows, at, vals)) = self.with_block(c, &run, false, |buf, verify| block::read_block_sparse(buf, field.data_type(), verify))?
            else {
                return Err(self.block_error(c, run.off, "sparse block read as another encoding".into()));
            };
            let (lo, hi) = (run.r0, run.r0 as usize + run.rows);
            if hi > block_rows {
                return Err(self.block_error(c, run.off, format!("block has {block_rows} rows, marks need rows {lo}..{hi}")));
            }
            let first = at.partition_point(|&i| i < lo);
            let last = at.partition_point(|&i| (i as usize) < hi);
            rows.extend(at[first..last].iter().map(|&i| i - lo + base));
            values.push(vals.slice(first, last - first));
            base += run.rows as u32;
        }
        let values = concat_pieces(&values, || format!("column {} of part {}, granules {g0}..{g1}", field.name(), self.name))?;
        Ok(Some((rows, values)))
    }

    fn read_granules_as(&self, c: usize, g0: usize, g1: usize, sizes: bool) -> Result<ArrayRef> {
        let field = self.schema.field(c);
        let mut pieces: Vec<ArrayRef> = Vec::new();
        for run in self.block_runs(c, g0, g1) {
            let arr = self.with_block(c, &run, true, |buf, verify| {
                Ok(if sizes {
                    Arc::new(block::read_block_sizes(buf, field.data_type(), verify)?) as ArrayRef
                } else {
                    block::decode_block(buf, field.data_type(), verify)?
                })
            })?;
            let (r0, want) = (run.r0 as usize, run.rows);
            if r0 + want > arr.len() {
                return Err(self.block_error(c, run.off, format!("block has {} rows, marks need rows {}..{}", arr.len(), r0, r0 + want)));
            }
            if arr.null_count() > 0 && !field.is_nullable() {
                return Err(self.block_error(c, run.off, "NULLs in a NOT NULL column".into()));
            }
            pieces.push(if r0 == 0 && want == arr.len() { arr } else { arr.slice(r0, want) });
        }
        concat_pieces(&pieces, || format!("column {} of part {}, granules {g0}..{g1}", field.name(), self.name))
    }

    /// The blocks of column `c` holding granules `g0..g1`, in order.
    fn block_runs(&self, c: usize, g0: usize, g1: usize) -> Vec<BlockRun> {
        let marks = &self.marks[c];
        let mut runs = Vec::new();
        let mut g = g0;
        while g < g1 {
            let (off, r0) = marks[g];
            let mut end = g + 1;
            while end < g1 && marks[end].0 == off {
                end += 1;
            }
            runs.push(BlockRun { g, off, r0, rows: (g..end).map(|x| self.granule_len(x)).sum() });
            g = end;
        }
        runs
    }

    /// `read` of the block of `run` (its bytes from the header on, and whether its checksum
    /// is still to be verified), the granule marked verified after it succeeds; a damaged
    /// block is [`Error::Corrupt`] naming it ([`Part::block_error`]). `advise`: tell the
    /// kernel the block's pages are needed first (`MADV_WILLNEED`: read-ahead of a large
    /// block).
    fn with_block<T>(&self, c: usize, run: &BlockRun, advise: bool, read: impl FnOnce(&[u8], bool) -> block::DResult<T>) -> Result<T> {
        let map = &self.maps[c];
        let buf = &map[run.off as usize..];
        let len = block::block_len(buf).map_err(|d| self.block_error(c, run.off, d))?;
        if advise {
            let _ = map.advise_range(Advice::WillNeed, run.off as usize, len);
        }
        let verify = !self.is_verified(c, run.g);
        let out = read(buf, verify).map_err(|d| self.block_error(c, run.off, d))?;
        if verify {
            self.set_verified(c, run.g);
        }
        Ok(out)
    }

    /// [`Error::Corrupt`] for the block of column `c` at byte offset `off`: `detail` with
    /// the part, the column file, the column and the offset.
    fn block_error(&self, c: usize, off: u64, detail: String) -> Error {
        self.corrupt(&format!("c{c}.bin"), format!("column {}, block at byte offset {off}: {detail}", self.schema.field(c).name()))
    }
}

/// Granules of a read that one block holds ([`Part::block_runs`]).
struct BlockRun {
    /// The first of them.
    g: usize,
    /// The block's byte offset in the column file.
    off: u64,
    /// Their first row in the block.
    r0: u32,
    /// Their rows.
    rows: usize,
}

/// Validates `bloom.idx` (`bytes`, the whole file) and returns, per column of `ncols`, the
/// byte range in the file of each granule's filter words, for the columns that have filters.
fn read_blooms(bytes: &[u8], ncols: usize, granules: usize) -> block::DResult<FilterRanges> {
    if bytes.len() < 24 {
        return Err(format!("truncated: {} bytes", bytes.len()));
    }
    let n = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes")) as usize;
    let body = check_index(bytes, BLOOM_MAGIC, n, granules)?;
    // `pos`: the byte offset in the file of what is left of `body`.
    let mut pos = 16;
    let mut rest = body;
    let u32_at = |rest: &mut &[u8], pos: &mut usize| -> block::DResult<usize> {
        if rest.len() < 4 {
            return Err(format!("truncated at byte offset {pos}"));
        }
        let v = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes")) as usize;
        *rest = &rest[4..];
        *pos += 4;
        Ok(v)
    };
    let mut cols = Vec::with_capacity(n);
    for _ in 0..n {
        let c = u32_at(&mut rest, &mut pos)?;
        if c >= ncols {
            return Err(format!("bloom filter for column {c} of {ncols}"));
        }
        cols.push(c);
    }
    let mut out = vec![None; ncols];
    for c in cols {
        let mut per = Vec::with_capacity(granules);
        for _ in 0..granules {
            let w = u32_at(&mut rest, &mut pos)?;
            if !w.is_power_of_two() || rest.len() < w * 8 {
                return Err(format!("bad bloom filter of {w} words for column {c}"));
            }
            per.push((pos, w * 8));
            rest = &rest[w * 8..];
            pos += w * 8;
        }
        out[c] = Some(per);
    }
    if !rest.is_empty() {
        return Err(format!("{} trailing bytes", rest.len()));
    }
    Ok(out)
}

/// Checks magic, version, counts and trailing checksum of an index file; returns its body.
fn check_index<'a>(bytes: &'a [u8], magic: &[u8; 4], n: usize, granules: usize) -> block::DResult<&'a [u8]> {
    if bytes.len() < 24 {
        return Err(format!("truncated: {} bytes", bytes.len()));
    }
    let (body, tail) = bytes.split_at(bytes.len() - 8);
    let want = u64::from_le_bytes(tail.try_into().expect("8 bytes"));
    if xxhash_rust::xxh3::xxh3_64(body) != want {
        return Err(format!("checksum mismatch over bytes 0..{}", body.len()));
    }
    if &body[..4] != magic {
        return Err("bad magic at byte offset 0".into());
    }
    let word = |i: usize| u32::from_le_bytes(body[4 + 4 * i..8 + 4 * i].try_into().expect("4 bytes")) as usize;
    super::check_version(word(0) as u32).map_err(|e| format!("{e} at byte offset 4"))?;
    if word(1) != n || word(2) != granules {
        return Err(format!("header says {} columns x {} granules, expected {n} x {granules}", word(1), word(2)));
    }
    Ok(&body[16..])
}

fn read_blocks(mut body: &[u8], types: &[DataType], granules: usize) -> block::DResult<Vec<ArrayRef>> {
    let mut out = Vec::with_capacity(types.len());
    let mut pos = 16;
    for dt in types {
        let len = block::block_len(body).map_err(|d| format!("byte offset {pos}: {d}"))?;
        let arr = block::read_block(body, dt).map_err(|d| format!("byte offset {pos}: {d}"))?;
        if arr.len() != granules {
            return Err(format!("byte offset {pos}: {} entries, expected {granules}", arr.len()));
        }
        out.push(arr);
        body = &body[len..];
        pos += len;
    }
    if !body.is_empty() {
        return Err(format!("{} trailing bytes", body.len()));
    }
    Ok(out)
}
