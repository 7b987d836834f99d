//! `manifest.txt`: the set of active parts of a table, and the table's commit point.
//!
//! An insert or a merge is committed when a new manifest naming its part has replaced the
//! old one (written to a temporary file, fsynced, renamed over `manifest.txt`, table
//! directory fsynced). At open the manifest is the truth: a listed part that is missing or
//! whose `checksums.txt` hashes differently is corruption; a part directory it does not
//! list cannot hold acknowledged rows and is moved to `detached/`.
//!
//! ```text
//! tessera table manifest 1
//! table<TAB>XXH3_HEX                      hash of table.json
//! part<TAB>NAME<TAB>ROWS<TAB>XXH3_HEX     one per active part, by insert number; hash of its checksums.txt
//! end<TAB>XXH3_HEX                        hash of all preceding bytes
//! ```

use std::path::Path;

use tessera_common::{Error, Result};

use crate::part::{sync_dir, write_synced};

/// File name of the manifest inside a table directory.
pub(crate) const MANIFEST: &str = "manifest.txt";

/// Version of the manifest's text format (its first line).
const MANIFEST_VERSION: u32 = 1;

/// One active part as the manifest records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// Directory name `MIN_MAX_LEVEL`.
    pub(crate) name: String,
    /// Rows of the part.
    pub(crate) rows: usize,
    /// xxh3 of the part's `checksums.txt` (which covers every other file of the part).
    pub(crate) sums_hash: u64,
}

/// The parsed manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Manifest {
    /// xxh3 of `table.json`.
    pub(crate) table_hash: u64,
    /// Active parts.
    pub(crate) parts: Vec<Entry>,
}

impl Manifest {
    fn render(&self) -> String {
        let mut s = format!("tessera table manifest {MANIFEST_VERSION}\ntable\t{:016x}\n", self.table_hash);
        for e in &self.parts {
            s.push_str(&format!("part\t{}\t{}\t{:016x}\n", e.name, e.rows, e.sums_hash));
        }
        let h = xxhash_rust::xxh3::xxh3_64(s.as_bytes());
        s.push_str(&format!("end\t{h:016x}\n"));
        s
    }
}

/// Writes `manifest` as `dir/manifest.txt` atomically: a `tmp_manifest_*` file (removed at
/// open if a crash leaves it), fsync, rename over the old manifest. The caller fsyncs `dir`
/// afterwards ([`sync_dir`]) to make the rename durable; once the rename returned, readers
/// of the directory see the new manifest.
///
/// # Errors
/// [`Error::Io`] naming the temporary file or the manifest; the old manifest is intact.
pub(crate) fn replace(dir: &Path, tmp_name: &str, manifest: &Manifest) -> Result<()> {
    let tmp = dir.join(tmp_name);
    let dest = dir.join(MANIFEST);
    let written = write_synced(&tmp, manifest.render().as_bytes())
        .and_then(|()| std::fs::rename(&tmp, &dest).map_err(|source| Error::Io { path: dest.clone(), source }));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Writes the manifest and fsyncs the directory: [`replace`] then [`sync_dir`].
///
/// # Errors
/// As [`replace`] and [`sync_dir`].
pub(crate) fn write(dir: &Path, tmp_name: &str, manifest: &Manifest) -> Result<()> {
    replace(dir, tmp_name, manifest)?;
    sync_dir(dir)
}

/// Reads and verifies `dir/manifest.txt`; `Ok(None)` if there is none. `table` names the
/// table in error details.
///
/// # Errors
/// [`Error::Corrupt`] naming the manifest for a bad header, line, checksum or truncation;
/// [`Error::Io`].
pub(crate) fn read(dir: &Path, table: &str) -> Result<Option<Manifest>> {
    let path = dir.join(MANIFEST);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(Error::Io { path, source }),
    };
    let corrupt = |detail: String| Error::Corrupt { path: path.clone(), detail: format!("table {table}: {detail}") };
    let text = std::str::from_utf8(&bytes).map_err(|e| corrupt(format!("not UTF-8 at byte offset {}", e.valid_up_to())))?;
    let head = text.lines().next().unwrap_or("");
    match head.strip_prefix("tessera table manifest ").and_then(|v| v.parse::<u32>().ok()) {
        Some(MANIFEST_VERSION) => {}
        Some(v) => return Err(corrupt(format!("unsupported manifest version {v} (this build reads {MANIFEST_VERSION})"))),
        None => return Err(corrupt(format!("bad header line {head:?} at byte offset 0"))),
    }
    let body_end = text.rfind("\nend\t").map(|i| i + 1).ok_or_else(|| corrupt("no end line (truncated)".into()))?;
    let want = text[body_end + 4..].strip_suffix('\n').ok_or_else(|| corrupt("end line lacks its newline (truncated)".into()))?;
    let got = format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&bytes[..body_end]));
    if want != got {
        return Err(corrupt(format!("checksum mismatch (stored {want:?}, computed {got})")));
    }
    let hex = |s: &str| (s.len() == 16).then(|| u64::from_str_radix(s, 16).ok()).flatten();
    let mut table_hash = None;
    let mut parts: Vec<Entry> = Vec::new();
    let mut offset = head.len() + 1;
    for line in text[..body_end].lines().skip(1) {
        let f: Vec<&str> = line.split('\t').collect();
        let bad = || corrupt(format!("bad line {line:?} at byte offset {offset}"));
        match f.as_slice() {
            ["table", h] if table_hash.is_none() => table_hash = Some(hex(h).ok_or_else(bad)?),
            ["part", name, rows, h] => {
                let e = Entry { name: name.to_string(), rows: rows.parse().map_err(|_| bad())?, sums_hash: hex(h).ok_or_else(bad)? };
                if parts.iter().any(|p| p.name == e.name) {
                    return Err(corrupt(format!("part {name} listed twice")));
                }
                parts.push(e);
            }
            _ => return Err(bad()),
        }
        offset += line.len() + 1;
    }
    let table_hash = table_hash.ok_or_else(|| corrupt("no table line".into()))?;
    Ok(Some(Manifest { table_hash, parts }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let dir = tempfile::tempdir().unwrap();
        let m = Manifest {
            table_hash: 0xdead_beef,
            parts: vec![
                Entry { name: "0000000001_0000000001_0".into(), rows: 10, sums_hash: 1 },
                Entry { name: "0000000002_0000000003_1".into(), rows: 20, sums_hash: u64::MAX },
            ],
        };
        assert_eq!(read(dir.path(), "t").unwrap(), None);
        write(dir.path(), "tmp_manifest_x", &m).unwrap();
        assert_eq!(read(dir.path(), "t").unwrap(), Some(m.clone()));
        assert!(!dir.path().join("tmp_manifest_x").exists());
        let good = std::fs::read(dir.path().join(MANIFEST)).unwrap();
        for at in 0..good.len() {
            let mut b = good.clone();
            b[at] ^= 0x01;
            std::fs::write(dir.path().join(MANIFEST), &b).unwrap();
            match read(dir.path(), "t") {
                Err(Error::Corrupt { path, detail }) => {
                    assert!(path.ends_with(MANIFEST));
                    assert!(detail.starts_with("table t: "), "{detail}");
                }
                other => panic!("flip at {at}: {other:?}"),
            }
        }
        for len in 0..good.len() {
            std::fs::write(dir.path().join(MANIFEST), &good[..len]).unwrap();
            assert!(matches!(read(dir.path(), "t"), Err(Error::Corrupt { .. })), "truncated to {len}");
        }
    }
}
