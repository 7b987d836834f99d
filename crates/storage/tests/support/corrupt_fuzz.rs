//! Corruption fuzzer for database directories, shared by `tests/fuzz_corrupt.rs` (a bounded
//! deterministic run) and `examples/fuzz_corrupt.rs` (a long run on demand).
//!
//! A template database holds table `t` with three parts (one merged) of four column types.
//! Each case copies the template, damages one thing (a file of a part, a part directory,
//! `manifest.txt` or `table.json`: truncate, flip bytes, delete, append, replace with
//! another part's file, a directory, garbage; delete, rename, duplicate or replace a part
//! directory), then opens the database and reads every column. The outcome must be the
//! correct answer (same row count and row-set hash as the template) or `Error::Corrupt` /
//! `Error::Io` whose path lies inside what was damaged; a panic, another error kind or a
//! different answer is a failure. A correct answer is read a second time after reopening.

#![allow(dead_code, unreachable_pub)] // each includer uses a part of it

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, AsArray, Float64Array, Int64Array, RecordBatch, StringArray, TimestampSecondArray};
use arrow::datatypes::{DataType, Field, Float64Type, Int64Type, Schema, SchemaRef, TimeUnit, TimestampSecondType};
use tessera_common::Error;
use tessera_storage::{Store, TableOptions};

/// Files of every part (4 columns).
pub const PART_FILES: [&str; 10] =
    ["c0.bin", "c1.bin", "c2.bin", "c3.bin", "marks.mrk", "primary.idx", "minmax.idx", "bloom.idx", "meta.json", "checksums.txt"];

/// Row count and an order-independent hash of all rows: what "the answer" is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Digest {
    pub rows: usize,
    pub hash: u64,
}

/// A template database and its answer.
pub struct Template {
    pub dir: tempfile::TempDir,
    pub parts: Vec<String>,
    pub answer: Digest,
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("s", DataType::Utf8, true),
        Field::new("f", DataType::Float64, true),
        Field::new("ts", DataType::Timestamp(TimeUnit::Second, None), false),
    ]))
}

fn batch(first: i64, n: i64) -> RecordBatch {
    let k: Vec<i64> = (first..first + n).map(|i| (i * 7919) % 1000).collect();
    let s: Vec<Option<String>> = (first..first + n).map(|i| (i % 5 != 0).then(|| format!("s{}", i % 37))).collect();
    let f: Vec<Option<f64>> = (first..first + n).map(|i| (i % 7 != 0).then_some(i as f64 / 3.0)).collect();
    let ts: Vec<i64> = (first..first + n).map(|i| 1_373_000_000 + i * 11).collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(k)),
            Arc::new(StringArray::from(s)),
            Arc::new(Float64Array::from(f)),
            Arc::new(TimestampSecondArray::from(ts)),
        ],
    )
    .expect("batch")
}

/// A scratch directory, in memory (`/dev/shm`) where there is one: the cases fsync a lot.
pub fn scratch_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    match shm.is_dir().then(|| tempfile::tempdir_in(shm)) {
        Some(Ok(d)) => d,
        _ => tempfile::tempdir().expect("tempdir"),
    }
}

/// Builds the template: inserts of 300, 500 (merged with the first), 700 and 400 rows in
/// granules of 64 rows, so parts `0000000001_0000000002_1`, `..3_..3_0`, `..4_..4_0`.
pub fn template() -> Template {
    let dir = scratch_dir();
    let store = Store::open(dir.path()).expect("create store");
    let opts = TableOptions { order_by: vec!["k".into(), "s".into()], granule_rows: 64, ..TableOptions::default() };
    let t = store.create_table("t", schema(), opts).expect("create table");
    t.insert(&[batch(0, 300)]).expect("insert");
    t.insert(&[batch(300, 500)]).expect("insert");
    assert!(t.optimize().expect("merge"));
    t.insert(&[batch(800, 700)]).expect("insert");
    t.insert(&[batch(1500, 400)]).expect("insert");
    let parts: Vec<String> = t.parts().iter().map(|p| p.name().to_string()).collect();
    assert_eq!(parts.len(), 3, "{parts:?}");
    drop(store);
    let answer = read_all(dir.path()).expect("template reads").0;
    assert_eq!(answer.rows, 1900);
    Template { dir, parts, answer }
}

/// Opens the database at `dir` and reads every column of `t`: the answer and the open
/// warnings.
pub fn read_all(dir: &Path) -> Result<(Digest, Vec<String>), Error> {
    let store = Store::open(dir)?;
    let warnings = store.warnings();
    let t = store.table("t").ok_or_else(|| Error::UnknownTable("t".into()))?;
    let cols = t.snapshot()?.columns(&[0, 1, 2, 3])?;
    let mut d = Digest { rows: 0, hash: 0 };
    for (m, k) in cols[0].iter().enumerate() {
        let k = k.as_primitive::<Int64Type>();
        let s = cols[1][m].as_string::<i32>();
        let f = cols[2][m].as_primitive::<Float64Type>();
        let ts = cols[3][m].as_primitive::<TimestampSecondType>();
        for i in 0..k.len() {
            let mut row = Vec::with_capacity(48);
            row.extend_from_slice(&k.value(i).to_le_bytes());
            row.extend_from_slice(if s.is_valid(i) { s.value(i).as_bytes() } else { b"\xffNULL" });
            row.push(0);
            row.extend_from_slice(&if f.is_valid(i) { f.value(i).to_bits() } else { u64::MAX }.to_le_bytes());
            row.extend_from_slice(&ts.value(i).to_le_bytes());
            d.rows += 1;
            d.hash = d.hash.wrapping_add(xxhash_rust::xxh3::xxh3_64(&row));
        }
    }
    Ok((d, warnings))
}

/// What one case damages.
#[derive(Debug, Clone)]
pub enum Target {
    /// File `file` of part number `part` (index into the template's parts).
    PartFile { part: usize, file: &'static str },
    /// The directory of part `part`.
    PartDir { part: usize },
    Manifest,
    TableJson,
}

/// How it is damaged.
#[derive(Debug, Clone)]
pub enum Op {
    /// Cut the file to this fraction of its length (per mille).
    Truncate { permille: u64 },
    /// XOR `mask` (non-zero) into the byte at this fraction of the length (per mille).
    Flip { permille: u64, mask: u8 },
    /// Several flips from a seed.
    FlipMany { seed: u64, count: u64 },
    Delete,
    /// Append bytes.
    Append { bytes: Vec<u8> },
    /// Replace the content with `len` pseudo-random bytes.
    Garble { seed: u64, len: usize },
    /// Replace the file by the same file of another part.
    SwapWithPart { other: usize },
    /// Replace the file by an empty directory.
    ReplaceWithDir,
    /// Part directory: copy it under the name `to`.
    Duplicate { to: String },
    /// Part directory: rename it to `to`.
    Rename { to: String },
    /// Part directory: replace its content with part `other`'s.
    ReplaceWithPart { other: usize },
}

/// One fuzz case.
#[derive(Debug, Clone)]
pub struct Case {
    pub target: Target,
    pub op: Op,
}

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    /// The correct answer, clean open.
    Correct,
    /// The correct answer; unlisted parts were moved to `detached/` or, covered by a
    /// listed part, removed (with warnings).
    CorrectDetached,
    /// `Error::Corrupt` naming the damaged file or directory.
    Corrupt,
    /// `Error::Io` naming the damaged file or directory.
    Io,
}

fn rng_next(state: &mut u64) -> u64 {
    // splitmix64
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Part names for duplicates: a fresh number, one covered by the merged part, one covering
/// every part, and a non-canonical spelling.
fn dup_names() -> [&'static str; 4] {
    ["0000000009_0000000009_0", "0000000001_0000000001_0", "0000000001_0000000009_5", "3_3_0"]
}

/// The systematic cases: every file kind of every part with each file operation, each
/// part directory operation, and each operation on the manifest and table.json.
pub fn systematic_cases(parts: usize) -> Vec<Case> {
    let file_ops = |p: usize| {
        let mut ops = vec![
            Op::Truncate { permille: 0 },
            Op::Truncate { permille: 500 },
            Op::Truncate { permille: 999 },
            Op::Flip { permille: 0, mask: 0x01 },
            Op::Flip { permille: 300, mask: 0x80 },
            Op::Flip { permille: 1000, mask: 0x20 },
            Op::Delete,
            Op::Append { bytes: vec![0] },
            Op::Garble { seed: 7, len: 100 },
            Op::ReplaceWithDir,
        ];
        if parts > 1 {
            ops.push(Op::SwapWithPart { other: (p + 1) % parts });
        }
        ops
    };
    let mut cases = Vec::new();
    for p in 0..parts {
        for file in PART_FILES {
            for op in file_ops(p) {
                cases.push(Case { target: Target::PartFile { part: p, file }, op });
            }
        }
        cases.push(Case { target: Target::PartDir { part: p }, op: Op::Delete });
        cases.push(Case { target: Target::PartDir { part: p }, op: Op::Rename { to: "0000000009_0000000009_0".into() } });
        cases.push(Case { target: Target::PartDir { part: p }, op: Op::Rename { to: "old_part".into() } });
        for to in dup_names() {
            cases.push(Case { target: Target::PartDir { part: p }, op: Op::Duplicate { to: to.into() } });
        }
        if parts > 1 {
            cases.push(Case { target: Target::PartDir { part: p }, op: Op::ReplaceWithPart { other: (p + 1) % parts } });
        }
    }
    for target in [Target::Manifest, Target::TableJson] {
        for op in file_ops(0).into_iter().filter(|o| !matches!(o, Op::SwapWithPart { .. })) {
            cases.push(Case { target: target.clone(), op });
        }
    }
    cases
}

/// A pseudo-random case from `seed`.
pub fn random_case(seed: u64, parts: usize) -> Case {
    let mut st = seed;
    let mut r = |n: u64| rng_next(&mut st) % n;
    let part = r(parts as u64) as usize;
    let other = (part + 1 + r(parts as u64 - 1) as usize) % parts;
    let file_op = |r: &mut dyn FnMut(u64) -> u64| match r(9) {
        0 => Op::Truncate { permille: r(1000) },
        1 | 2 => Op::Flip { permille: r(1001), mask: 1 + r(255) as u8 },
        3 => Op::FlipMany { seed: r(u64::MAX), count: 1 + r(16) },
        4 => Op::Delete,
        5 => Op::Append { bytes: (0..1 + r(64)).map(|_| r(256) as u8).collect() },
        6 => Op::Garble { seed: r(u64::MAX), len: r(4096) as usize },
        7 => Op::ReplaceWithDir,
        _ => Op::Flip { permille: r(1001), mask: 1 << r(8) },
    };
    match r(20) {
        0..=13 => {
            let file = PART_FILES[r(PART_FILES.len() as u64) as usize];
            let op = if r(10) == 0 { Op::SwapWithPart { other } } else { file_op(&mut r) };
            Case { target: Target::PartFile { part, file }, op }
        }
        14 | 15 => {
            let op = match r(4) {
                0 => Op::Delete,
                1 => Op::Rename { to: dup_names()[r(4) as usize].into() },
                2 => Op::Duplicate { to: dup_names()[r(4) as usize].into() },
                _ => Op::ReplaceWithPart { other },
            };
            Case { target: Target::PartDir { part }, op }
        }
        16 | 17 => Case { target: Target::Manifest, op: file_op(&mut r) },
        _ => Case { target: Target::TableJson, op: file_op(&mut r) },
    }
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let dest = to.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_dir(&e.path(), &dest)?;
        } else {
            std::fs::copy(e.path(), &dest)?;
        }
    }
    Ok(())
}

/// Applies `op` to the file `path`; `other` is the same file of another part.
fn damage_file(path: &Path, op: &Op, other: Option<&Path>) -> std::io::Result<()> {
    let bytes = std::fs::read(path)?;
    let at = |permille: u64| ((bytes.len() as u64 * permille / 1000) as usize).min(bytes.len().saturating_sub(1));
    match op {
        Op::Truncate { permille } => std::fs::write(path, &bytes[..(bytes.len() as u64 * permille / 1000) as usize]),
        Op::Flip { permille, mask } => {
            let mut b = bytes.clone();
            if b.is_empty() {
                return Ok(());
            }
            let i = at(*permille);
            b[i] ^= mask;
            std::fs::write(path, b)
        }
        Op::FlipMany { seed, count } => {
            let mut b = bytes.clone();
            let mut st = *seed;
            for _ in 0..*count {
                if b.is_empty() {
                    break;
                }
                let i = (rng_next(&mut st) % b.len() as u64) as usize;
                b[i] ^= 1 + (rng_next(&mut st) % 255) as u8;
            }
            std::fs::write(path, b)
        }
        Op::Delete => std::fs::remove_file(path),
        Op::Append { bytes: extra } => {
            let mut b = bytes.clone();
            b.extend_from_slice(extra);
            std::fs::write(path, b)
        }
        Op::Garble { seed, len } => {
            let mut st = *seed;
            std::fs::write(path, (0..*len).map(|_| rng_next(&mut st) as u8).collect::<Vec<_>>())
        }
        Op::SwapWithPart { .. } => std::fs::copy(other.expect("other part"), path).map(|_| ()),
        Op::ReplaceWithDir => {
            std::fs::remove_file(path)?;
            std::fs::create_dir(path)
        }
        Op::Duplicate { .. } | Op::Rename { .. } | Op::ReplaceWithPart { .. } => unreachable!("directory operation on a file"),
    }
}

/// Damages a copy of the template in `db` as `case` says; returns the path an error must
/// lie inside (or be a parent of).
pub fn apply(t: &Template, db: &Path, case: &Case) -> std::io::Result<PathBuf> {
    copy_dir(t.dir.path(), db)?;
    let table = db.join("t");
    match &case.target {
        Target::PartFile { part, file } => {
            let p = table.join(&t.parts[*part]);
            let other = match case.op {
                Op::SwapWithPart { other } => Some(table.join(&t.parts[other]).join(file)),
                _ => None,
            };
            damage_file(&p.join(file), &case.op, other.as_deref())?;
            Ok(p)
        }
        Target::PartDir { part } => {
            let p = table.join(&t.parts[*part]);
            match &case.op {
                Op::Delete => std::fs::remove_dir_all(&p)?,
                Op::Rename { to } => std::fs::rename(&p, table.join(to))?,
                Op::Duplicate { to } => {
                    let dest = table.join(to);
                    if dest.exists() {
                        std::fs::remove_dir_all(&dest)?;
                    }
                    copy_dir(&p, &dest)?;
                    return Ok(dest);
                }
                Op::ReplaceWithPart { other } => {
                    std::fs::remove_dir_all(&p)?;
                    copy_dir(&table.join(&t.parts[*other]), &p)?;
                }
                other => unreachable!("file operation {other:?} on a directory"),
            }
            Ok(p)
        }
        Target::Manifest => {
            let p = table.join("manifest.txt");
            damage_file(&p, &case.op, None)?;
            Ok(p)
        }
        Target::TableJson => {
            let p = table.join("table.json");
            damage_file(&p, &case.op, None)?;
            Ok(p)
        }
    }
}

/// Runs one case in the fresh directory `db`: `Ok(outcome)` or `Err(why it failed)`.
pub fn run_case(t: &Template, db: &Path, case: &Case) -> Result<Outcome, String> {
    let scope = apply(t, db, case).map_err(|e| format!("applying {case:?}: {e}"))?;
    let first = std::panic::catch_unwind(AssertUnwindSafe(|| read_all(db)));
    let inside = |path: &Path| path.starts_with(&scope) || scope.starts_with(path) && path.starts_with(db.join("t"));
    match first {
        Err(_) => Err(format!("{case:?}: panic")),
        Ok(Ok((answer, warnings))) => {
            if answer != t.answer {
                return Err(format!("{case:?}: silently different answer {answer:?}, expected {:?}", t.answer));
            }
            // Open again: the same answer, and nothing more to clean up.
            match std::panic::catch_unwind(AssertUnwindSafe(|| read_all(db))) {
                Ok(Ok((again, w2))) if again == t.answer && w2.is_empty() => {}
                other => return Err(format!("{case:?}: second open differs: {other:?}")),
            }
            Ok(if warnings.is_empty() { Outcome::Correct } else { Outcome::CorrectDetached })
        }
        Ok(Err(Error::Corrupt { path, detail })) => {
            if !inside(&path) {
                return Err(format!("{case:?}: Corrupt names {} ({detail}), expected a path in {}", path.display(), scope.display()));
            }
            if !detail.contains("table t") {
                return Err(format!("{case:?}: Corrupt detail does not name the table: {detail}"));
            }
            Ok(Outcome::Corrupt)
        }
        Ok(Err(Error::Io { path, source })) => {
            if !inside(&path) {
                return Err(format!("{case:?}: Io names {} ({source}), expected a path in {}", path.display(), scope.display()));
            }
            Ok(Outcome::Io)
        }
        Ok(Err(other)) => Err(format!("{case:?}: untyped or wrong error kind: {other:?}")),
    }
}

/// Counts of outcomes and the failures of a run.
#[derive(Debug, Default)]
pub struct Report {
    pub outcomes: BTreeMap<Outcome, usize>,
    /// Per target kind and operation: outcome counts.
    pub by_kind: BTreeMap<String, BTreeMap<Outcome, usize>>,
    pub failures: Vec<String>,
}

impl Report {
    pub fn cases(&self) -> usize {
        self.outcomes.values().sum::<usize>() + self.failures.len()
    }
}

/// The kind of a case for the report: target kind and operation name.
pub fn kind(case: &Case) -> String {
    let target = match &case.target {
        Target::PartFile { file, .. } => {
            if file.ends_with(".bin") {
                "part/cN.bin".to_string()
            } else {
                format!("part/{file}")
            }
        }
        Target::PartDir { .. } => "part dir".into(),
        Target::Manifest => "manifest.txt".into(),
        Target::TableJson => "table.json".into(),
    };
    let op = format!("{:?}", case.op);
    let op = op.split([' ', '{', '(']).next().unwrap_or("").to_string();
    format!("{target} {op}")
}

/// Runs `cases` in subdirectories of `work`, each removed afterwards.
pub fn run(t: &Template, work: &Path, cases: impl IntoIterator<Item = Case>) -> Report {
    let mut rep = Report::default();
    for (i, case) in cases.into_iter().enumerate() {
        let db = work.join(format!("case{i}"));
        match run_case(t, &db, &case) {
            Ok(o) => {
                *rep.outcomes.entry(o).or_default() += 1;
                *rep.by_kind.entry(kind(&case)).or_default().entry(o).or_default() += 1;
            }
            Err(f) => rep.failures.push(f),
        }
        let _ = std::fs::remove_dir_all(&db);
    }
    rep
}
