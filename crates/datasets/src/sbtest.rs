//! sysbench's `sbtest` table (`oltp_common.lua`, `prepare`), generated deterministically:
//! `id UInt64` = 1..=N (the primary key), `k UInt32` uniform in 1..=N, `c String` = ten groups
//! of eleven random digits joined by `-` (119 bytes), `pad String` = five such groups (59
//! bytes). sysbench draws the digits from its own RNG; here a row's values depend only on
//! (seed, id), so any batch cut and any thread count give the same table.
//!
//! ```
//! let b = tessera_datasets::sbtest::batch(42, 1_000, 0, 10);
//! assert_eq!(b.num_rows(), 10);
//! assert_eq!(b.num_columns(), 4);
//! ```

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow::array::{RecordBatch, StringBuilder, UInt32Array, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use tessera_common::{Error, Result};

use crate::rng::{below, hash, rehash};

/// Digit groups of `c` and `pad` (sysbench: `###########-` x 10 and x 5).
const C_GROUPS: usize = 10;
const PAD_GROUPS: usize = 5;
const SALT_K: u64 = 0x5b7e_0001;
const SALT_C: u64 = 0x5b7e_0002;
const SALT_PAD: u64 = 0x5b7e_0003;

/// `sbtest(id UInt64, k UInt32, c String, pad String)`, no column nullable.
pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::UInt64, false),
        Field::new("k", DataType::UInt32, false),
        Field::new("c", DataType::Utf8, false),
        Field::new("pad", DataType::Utf8, false),
    ]))
}

/// The parameter stream of a sysbench client (which id to look up, where a range starts):
/// splitmix64 from a seed, each draw uniform in `1..=n`. The same stream on every machine,
/// so two runs send the same statements.
#[derive(Debug, Clone)]
pub struct Draw(u64);

impl Draw {
    /// The stream of `seed`.
    pub fn new(seed: u64) -> Self {
        Draw(seed)
    }

    /// The next draw, uniform in `1..=n` (`n` = 0 counts as 1).
    pub fn one_to(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(crate::rng::GOLDEN);
        1 + below(crate::rng::mix64(self.0), n.max(1))
    }
}

/// The value of `k` for row `id` of a table of `table_size` rows: uniform in `1..=table_size`
/// (saturating at `u32::MAX` for tables past 4G rows).
pub fn k_of(seed: u64, table_size: u64, id: u64) -> u32 {
    (1 + below(hash(seed, SALT_K, id), table_size.max(1))).min(u64::from(u32::MAX)) as u32
}

/// Appends `groups` groups of eleven digits joined by `-` (the digits drawn from `h`).
fn digits(out: &mut String, mut h: u64, groups: usize, salt: u64) {
    for g in 0..groups {
        if g > 0 {
            out.push('-');
        }
        // 11 digits per group from one 64-bit draw (10^11 < 2^37): two draws per group
        // would be as good; one keeps the generator at memory speed.
        h = rehash(h, salt.wrapping_add(g as u64));
        let mut v = below(h, 100_000_000_000);
        let mut buf = [b'0'; 11];
        for d in buf.iter_mut().rev() {
            *d = b'0' + (v % 10) as u8;
            v /= 10;
        }
        // The buffer holds ASCII digits only.
        out.push_str(std::str::from_utf8(&buf).unwrap_or_default());
    }
}

/// The value of `c` for row `id`.
pub fn c_of(seed: u64, id: u64) -> String {
    let mut s = String::with_capacity(C_GROUPS * 12);
    digits(&mut s, hash(seed, SALT_C, id), C_GROUPS, SALT_C);
    s
}

/// Rows `start .. start + len` (0-based; `id` = row + 1) of the `table_size`-row table, as one
/// batch. `len` is clipped at `table_size`.
pub fn batch(seed: u64, table_size: u64, start: u64, len: u64) -> RecordBatch {
    let end = start.saturating_add(len).min(table_size);
    let ids: Vec<u64> = (start.min(end)..end).map(|r| r + 1).collect();
    let n = ids.len();
    let k = UInt32Array::from_iter_values(ids.iter().map(|&id| k_of(seed, table_size, id)));
    let mut c = StringBuilder::with_capacity(n, n * C_GROUPS * 12);
    let mut pad = StringBuilder::with_capacity(n, n * PAD_GROUPS * 12);
    let mut s = String::with_capacity(C_GROUPS * 12);
    for &id in &ids {
        s.clear();
        digits(&mut s, hash(seed, SALT_C, id), C_GROUPS, SALT_C);
        c.append_value(&s);
        s.clear();
        digits(&mut s, hash(seed, SALT_PAD, id), PAD_GROUPS, SALT_PAD);
        pad.append_value(&s);
    }
    let cols: Vec<arrow::array::ArrayRef> = vec![
        Arc::new(UInt64Array::from(ids)),
        Arc::new(k),
        Arc::new(c.finish()),
        Arc::new(pad.finish()),
    ];
    // The columns match the schema by construction (types, lengths, no NULLs).
    RecordBatch::try_new(schema(), cols).unwrap_or_else(|e| unreachable!("sbtest batch: {e}"))
}

/// Rows per batch of [`batches`] and row group of [`write_parquet`].
pub const BATCH_ROWS: u64 = 1 << 20;

/// The table as batches of up to [`BATCH_ROWS`] rows, in id order.
pub fn batches(seed: u64, table_size: u64) -> impl Iterator<Item = RecordBatch> {
    (0..table_size.div_ceil(BATCH_ROWS))
        .map(move |i| batch(seed, table_size, i * BATCH_ROWS, BATCH_ROWS))
}

/// Writes the `table_size`-row table to `path` as Parquet (ZSTD level 1, row groups of
/// [`BATCH_ROWS`] rows), through a temporary file renamed at the end. `progress` gets the rows
/// written so far after each row group.
///
/// # Errors
/// [`Error::Io`] when the file cannot be written or renamed (the temporary file is removed).
pub fn write_parquet(
    path: &Path,
    seed: u64,
    table_size: u64,
    progress: &dyn Fn(u64),
) -> Result<u64> {
    let tmp = path.with_extension("parquet.tmp");
    let io = |e: std::io::Error| Error::Io {
        path: tmp.clone(),
        source: e,
    };
    let pq = |e: parquet::errors::ParquetError| {
        Error::Internal(format!("writing {}: {e}", tmp.display()))
    };
    let result = (|| -> Result<u64> {
        let file = File::create(&tmp).map_err(io)?;
        let level = ZstdLevel::try_new(1).map_err(pq)?;
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(level))
            .set_max_row_group_row_count(Some(BATCH_ROWS as usize))
            .build();
        let mut w = ArrowWriter::try_new(file, schema(), Some(props)).map_err(pq)?;
        let mut rows = 0;
        for b in batches(seed, table_size) {
            w.write(&b).map_err(pq)?;
            w.flush().map_err(pq)?;
            rows += b.num_rows() as u64;
            progress(rows);
        }
        w.close().map_err(pq)?;
        std::fs::rename(&tmp, path).map_err(|e| Error::Io {
            path: path.to_path_buf(),
            source: e,
        })?;
        Ok(rows)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::AsArray;

    #[test]
    fn rows_follow_the_sysbench_shapes_and_do_not_depend_on_the_cut() {
        let whole = batch(7, 1000, 0, 1000);
        let ids = whole
            .column(0)
            .as_primitive::<arrow::datatypes::UInt64Type>();
        assert_eq!(
            ids.values().iter().copied().collect::<Vec<_>>(),
            (1..=1000).collect::<Vec<u64>>()
        );
        let k = whole
            .column(1)
            .as_primitive::<arrow::datatypes::UInt32Type>();
        assert!(k.values().iter().all(|&v| (1..=1000).contains(&v)));
        // Not constant: at least a few hundred distinct values of k in 1000 rows.
        assert!(
            k.values()
                .iter()
                .collect::<std::collections::HashSet<_>>()
                .len()
                > 500
        );
        let c = whole.column(2).as_string::<i32>();
        let pad = whole.column(3).as_string::<i32>();
        for i in 0..1000 {
            let (cv, pv) = (c.value(i), pad.value(i));
            assert_eq!((cv.len(), pv.len()), (119, 59));
            for (v, groups) in [(cv, 10), (pv, 5)] {
                let parts: Vec<&str> = v.split('-').collect();
                assert_eq!(parts.len(), groups);
                assert!(
                    parts
                        .iter()
                        .all(|p| p.len() == 11 && p.bytes().all(|b| b.is_ascii_digit()))
                );
            }
            assert_eq!(cv, c_of(7, i as u64 + 1));
            assert_eq!(k.value(i), k_of(7, 1000, i as u64 + 1));
        }
        let part = batch(7, 1000, 300, 50);
        assert_eq!(part, whole.slice(300, 50));
        assert_eq!(batch(7, 1000, 990, 50).num_rows(), 10);
        assert_ne!(batch(8, 1000, 0, 5).column(2), whole.slice(0, 5).column(2));
    }
}
