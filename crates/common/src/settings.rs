//! Query settings, named as in ClickHouse where ClickHouse has the same knob.

use std::path::PathBuf;

use tessera_kernels::{Kernels, SimdLevel};

use crate::{Error, Result};

/// Settings of a database (defaults for its queries) or of one query.
///
/// Set them by name with [`Settings::set`] (this is what `SET name = value` and a query's
/// `SETTINGS name = value` clause call).
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Worker threads per query (ClickHouse `max_threads`). Default: the vCPU count,
    /// `std::thread::available_parallelism()`.
    pub max_threads: usize,
    /// Groups a thread aggregates into one hash table before it switches to the radix-
    /// partitioned path (ClickHouse `group_by_two_level_threshold`, default 100,000); `0`
    /// forces the partitioned path from the first row. A thread with more than 200,000 rows
    /// still to come switches at a fifth of it (a table that stays in cache; see
    /// `tessera_exec`'s aggregation).
    pub group_by_two_level_threshold: usize,
    /// Radix bits of the partitioned GROUP BY: `0` (default) keeps 8 (256 partitions) for
    /// fixed-width keys and chooses 8 to 10 for keys with strings from the groups the query
    /// is expected to hold (more when a partition would hold over 65,536 groups); 8, 9 or
    /// 10 forces 256, 512 or 1,024 partitions. Other values are clamped to 8..=10 when
    /// assigned to the field directly.
    pub group_by_radix_bits: u32,
    /// Debug: use the generic serialized key layout for every GROUP BY, so tests can check
    /// it against the specialised layouts (like DuckDB's `debug_force_*` settings).
    pub group_by_force_serialized: bool,
    /// Kernel family for this query's hot loops (`simd_level = 'auto' | 'scalar' | 'avx2' |
    /// 'avx512' | 'neon' | 'sve'`). `None` (`auto`) means the process default: the
    /// environment variable `TESSERA_SIMD_LEVEL` if set, else the best family the CPU runs.
    /// Setting a family this build or CPU lacks is an error.
    pub simd_level: Option<SimdLevel>,
    /// Bytes one query may hold in its big buffers (hash tables, radix-partition buffers,
    /// top-N and sort buffers), ClickHouse's `max_memory_usage`; `0` = unlimited (the
    /// default). A query that would go above it fails with `Error::ResourcesExhausted`
    /// naming the limit and the operator; other queries are not affected.
    pub max_memory_usage: u64,
    /// Worker threads all running queries of a database may use together (ClickHouse's
    /// `concurrent_threads_soft_limit_num`); `0` = unlimited (the default: each query takes
    /// its `max_threads`, so concurrent queries oversubscribe the vCPUs). With a limit, a
    /// query gets `min(max_threads, limit - threads in use)` workers, at least 1. Read from
    /// the database's settings (`Database::set` / `SET`); a query's own value is ignored.
    pub concurrent_threads_soft_limit_num: usize,
    /// Late materialization of `LIMIT` scans (ClickHouse's
    /// `query_plan_optimize_lazy_materialization`): read the WHERE and ORDER BY columns
    /// first, then the other columns of the answer's rows only. Default on; `0` reads every
    /// column the query names up front (for tests that compare the two paths).
    pub query_plan_optimize_lazy_materialization: bool,
    /// `GROUP BY .. LIMIT n` without `ORDER BY` and `HAVING` aggregates only the first
    /// `n + OFFSET` distinct keys of the input (any `n` groups are a correct answer), with
    /// exact aggregates: rows of other keys are dropped instead of grouped (ClickHouse's
    /// `optimize_trivial_group_by_limit_query`). Default on; `0` aggregates every group.
    pub optimize_trivial_group_by_limit_query: bool,
    /// Lazy materialization of a string GROUP BY key: a GROUP BY of one string column
    /// without NULLs whose answer is its top `ORDER BY .. LIMIT n` rows (`n` + OFFSET at most
    /// 1,000; the ORDER BY, HAVING and expressions not reading the key) groups the rows by
    /// the key's 128-bit hash and one row position per group, then reads the strings of the
    /// answer's rows only from the table (ClickBench Q34/Q35: `GROUP BY URL ORDER BY
    /// COUNT(*) DESC LIMIT 10`; at most 16 rows from a streamed Parquet file). No key bytes
    /// are copied or compared; two different strings fall into one group with probability
    /// 2^-128 per pair (as `COUNT(DISTINCT s)` counts strings), and groups that tie on the
    /// ORDER BY are ordered by the hash instead of the string. The hash (XXH3-128) does not
    /// resist strings crafted to collide: over data an adversary writes, set `0`. Default
    /// on; `0` groups by the strings.
    pub group_by_lazy_string_keys: bool,
    /// Top-N dynamic filtering of `ORDER BY col [, ..] LIMIT n` scans (ClickHouse's
    /// `use_top_k_dynamic_filtering`, DuckDB's dynamic filters from a TopN): once a worker
    /// holds `n + OFFSET` rows, the first sort key of its last one bounds every later row
    /// (`col <= bound`, `>=` descending) and is shared with the other workers; the bound runs
    /// as a PREWHERE step placed by cost, so the costlier conditions and the output columns
    /// are read only for rows that can still enter the answer, and a morsel whose min/max
    /// index lies past the bound is not read at all (morsels with an index are visited from
    /// the best minimum on). Applies to integer, date, timestamp and string keys with NULLS
    /// LAST, for `n + OFFSET` up to 1,000 rows, when neither the WHERE nor an output is a
    /// general expression. Default on; `0` scans as before (same answers).
    pub use_top_k_dynamic_filtering: bool,
    /// Query condition cache (ClickHouse's `use_query_condition_cache`, 25.3): for each WHERE
    /// conjunct evaluated on whole granules of an on-disk part, the database remembers
    /// which granules held a row where it was TRUE, and later queries with that conjunct
    /// read only those granules (`URL LIKE '%google%'` then decodes the URLs of the
    /// granules with a match, not the table's). Conjuncts with a general expression are not
    /// cached, and a WHERE with one does not use the cache (so whether an expression error
    /// is raised does not depend on it). Default on; `0` neither reads nor records (same
    /// answers).
    pub use_query_condition_cache: bool,
    /// Bytes of GROUP BY state a query may hold before it writes partitions to temporary
    /// files (ClickHouse's `max_bytes_before_external_group_by`; external GROUP BY). `0`
    /// (the default) derives it from the ratio below.
    pub max_bytes_before_external_group_by: u64,
    /// Without an explicit byte threshold, GROUP BY spills once its state passes this share
    /// of the query's budget: `max_memory_usage`, or when that is unlimited,
    /// `max_server_memory_usage` (ClickHouse's `max_bytes_ratio_before_external_group_by`).
    /// Default 0.5; `0` never spills on a ratio.
    pub max_bytes_ratio_before_external_group_by: f64,
    /// Bytes of rows an `ORDER BY` may hold before it writes sorted runs to temporary files
    /// and merges them (ClickHouse's `max_bytes_before_external_sort`; external sort). `0`
    /// (the default) derives it from the ratio below.
    pub max_bytes_before_external_sort: u64,
    /// Without an explicit byte threshold, ORDER BY spills once its rows pass this share of
    /// the query's budget (as for GROUP BY; ClickHouse's
    /// `max_bytes_ratio_before_external_sort`). Default 0.5; `0` never spills on a ratio.
    pub max_bytes_ratio_before_external_sort: f64,
    /// Bytes of rows a sort worker sorts at once before they become a sorted run in memory;
    /// answers past twice this are merged from runs or handed out in several batches, never
    /// concatenated (no string column past Arrow's 32-bit offsets). `0` (the default) is
    /// 256 MiB. A debug setting (as DuckDB's `debug_*`): tests set it small to run those
    /// paths on small data.
    pub debug_sort_run_bytes: u64,
    /// Bytes a query may write to temporary files (ClickHouse's
    /// `max_temporary_data_on_disk_size_for_query`); `0` = unlimited (the default). Past it
    /// the query fails with `Error::ResourcesExhausted`.
    pub max_temporary_data_on_disk_size: u64,
    /// Directory of temporary files (spilled GROUP BY partitions, sort runs); `None` (default) is the
    /// system's, `std::env::temp_dir()` (`$TMPDIR` or `/tmp`). The files have no name: the
    /// OS frees them when the query ends or the process dies.
    pub tmp_path: Option<PathBuf>,
    /// Compression of temporary files (ClickHouse's `temporary_files_codec`): `LZ4` (the
    /// default, as ClickHouse) or `NONE`. Measured on Q19 spilling at 30M rows: LZ4 writes
    /// 0.53x the bytes and takes 1.3x the time of `NONE`.
    pub temporary_files_codec: TemporaryFilesCodec,
    /// Bytes all running queries of a database plus its caches (decoded blocks, query
    /// conditions) may hold (ClickHouse's `max_server_memory_usage`); `0` = unlimited.
    /// Default: 90% of the memory the process may use ([`physical_memory`]: RAM, or the
    /// container's limit when lower; ClickHouse's `max_server_memory_usage_to_ram_ratio`),
    /// unlimited where it is unknown. The decoded-block cache gives way first; a query that
    /// would still pass it fails with `Error::ResourcesExhausted` naming it; other queries go
    /// on. Read from the database's settings; a query's own value is
    /// ignored.
    pub max_server_memory_usage: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            max_threads: default_threads(),
            group_by_two_level_threshold: 100_000,
            group_by_radix_bits: 0,
            group_by_force_serialized: false,
            simd_level: None,
            max_memory_usage: 0,
            concurrent_threads_soft_limit_num: 0,
            query_plan_optimize_lazy_materialization: true,
            optimize_trivial_group_by_limit_query: true,
            group_by_lazy_string_keys: true,
            use_top_k_dynamic_filtering: true,
            use_query_condition_cache: true,
            max_bytes_before_external_group_by: 0,
            max_bytes_ratio_before_external_group_by: 0.5,
            max_bytes_before_external_sort: 0,
            max_bytes_ratio_before_external_sort: 0.5,
            debug_sort_run_bytes: 0,
            max_temporary_data_on_disk_size: 0,
            tmp_path: None,
            temporary_files_codec: TemporaryFilesCodec::Lz4,
            max_server_memory_usage: physical_memory().map_or(0, |b| b / 10 * 9),
        }
    }
}

/// The memory this process may use, in bytes: physical RAM (`MemTotal` of
/// `/proc/meminfo`), or the memory limit of its cgroup when that is lower (a container's:
/// cgroup v2 `memory.max`, v1 `memory.limit_in_bytes`), as ClickHouse takes the cgroup's
/// limit for its server memory cap. `None` where the platform does not tell.
pub fn physical_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    let ram = kib.saturating_mul(1024);
    let cgroup = ["/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .filter_map(|text| cgroup_limit(&text))
        .min();
    Some(cgroup.map_or(ram, |c| c.min(ram)))
}

/// A cgroup memory limit file's bytes: `None` for no limit (v2 `max`; v1 writes a number
/// near `i64::MAX` rounded to pages) or text that is not a number.
fn cgroup_limit(text: &str) -> Option<u64> {
    let bytes: u64 = text.trim().parse().ok()?;
    (bytes > 0 && bytes < 1 << 62).then_some(bytes)
}

/// Codec of temporary files ([`Settings::temporary_files_codec`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TemporaryFilesCodec {
    /// LZ4 block compression.
    #[default]
    Lz4,
    /// Raw bytes.
    None,
}

/// The vCPU count of this machine (`available_parallelism`), at least 1.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

impl Settings {
    /// The kernel table this query runs with (see [`Settings::simd_level`]).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the level (or `TESSERA_SIMD_LEVEL`) names a family this
    /// build or CPU lacks.
    pub fn kernels(&self) -> Result<&'static Kernels> {
        match self.simd_level {
            None => Kernels::from_env(),
            Some(l) => Kernels::for_level(l),
        }
        .map_err(|e| Error::InvalidArgument(e.to_string()))
    }

    /// Names accepted by [`Settings::set`].
    pub const NAMES: &'static [&'static str] = &[
        "max_threads",
        "group_by_two_level_threshold",
        "group_by_radix_bits",
        "group_by_force_serialized",
        "simd_level",
        "max_memory_usage",
        "concurrent_threads_soft_limit_num",
        "query_plan_optimize_lazy_materialization",
        "optimize_trivial_group_by_limit_query",
        "group_by_lazy_string_keys",
        "use_top_k_dynamic_filtering",
        "use_query_condition_cache",
        "max_bytes_before_external_group_by",
        "max_bytes_ratio_before_external_group_by",
        "max_bytes_before_external_sort",
        "max_bytes_ratio_before_external_sort",
        "debug_sort_run_bytes",
        "max_temporary_data_on_disk_size",
        "tmp_path",
        "temporary_files_codec",
        "max_server_memory_usage",
    ];

    /// The GROUP BY state in bytes past which a query spills (see
    /// [`Settings::max_bytes_before_external_group_by`]); `None`: never.
    pub fn external_group_by_bytes(&self) -> Option<u64> {
        self.spill_threshold(self.max_bytes_before_external_group_by, self.max_bytes_ratio_before_external_group_by)
    }

    /// The ORDER BY rows in bytes past which a query writes sorted runs to disk (see
    /// [`Settings::max_bytes_before_external_sort`]); `None`: never.
    pub fn external_sort_bytes(&self) -> Option<u64> {
        self.spill_threshold(self.max_bytes_before_external_sort, self.max_bytes_ratio_before_external_sort)
    }

    /// `bytes` if set, else `ratio` of the query's budget (`max_memory_usage`, or
    /// `max_server_memory_usage` when the query has no limit); `None` when both are 0.
    fn spill_threshold(&self, bytes: u64, ratio: f64) -> Option<u64> {
        if bytes > 0 {
            return Some(bytes);
        }
        let budget = if self.max_memory_usage > 0 { self.max_memory_usage } else { self.max_server_memory_usage };
        let bytes = (budget as f64 * ratio) as u64;
        (bytes > 0).then_some(bytes)
    }

    /// Bytes of rows sorted at once into one in-memory run (see
    /// [`Settings::debug_sort_run_bytes`]).
    pub fn sort_run_bytes(&self) -> usize {
        match self.debug_sort_run_bytes {
            0 => 256 << 20,
            b => usize::try_from(b).unwrap_or(usize::MAX),
        }
    }

    /// The directory of temporary files ([`Settings::tmp_path`] or the system's).
    pub fn temporary_directory(&self) -> PathBuf {
        self.tmp_path.clone().unwrap_or_else(std::env::temp_dir)
    }

    /// Sets a setting by name from its SQL text value.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an unknown name or a value that does not parse or is
    /// out of range (`max_threads` must be 1..=1024; `0` means "the default").
    pub fn set(&mut self, name: &str, value: &str) -> Result<()> {
        let parse = |v: &str| {
            v.trim().trim_matches('\'').parse::<u64>().map_err(|_| {
                Error::InvalidArgument(format!("setting {name}: '{v}' is not a non-negative integer"))
            })
        };
        let flag = |n: u64| match n {
            0 => Ok(false),
            1 => Ok(true),
            n => Err(Error::InvalidArgument(format!("{name} = {n}: expected 0 or 1"))),
        };
        match name.to_ascii_lowercase().as_str() {
            "max_threads" => {
                let n = parse(value)?;
                if n > 1024 {
                    return Err(Error::InvalidArgument(format!("max_threads = {n} is above 1024")));
                }
                self.max_threads = if n == 0 { default_threads() } else { n as usize };
            }
            "group_by_two_level_threshold" => {
                self.group_by_two_level_threshold = parse(value)? as usize;
            }
            "group_by_radix_bits" => {
                let n = parse(value)?;
                if n != 0 && !(8..=10).contains(&n) {
                    return Err(Error::InvalidArgument(format!("group_by_radix_bits = {n}: expected 0 (automatic), 8, 9 or 10")));
                }
                self.group_by_radix_bits = n as u32;
            }
            "group_by_force_serialized" => self.group_by_force_serialized = flag(parse(value)?)?,
            "query_plan_optimize_lazy_materialization" => {
                self.query_plan_optimize_lazy_materialization = flag(parse(value)?)?
            }
            "optimize_trivial_group_by_limit_query" => self.optimize_trivial_group_by_limit_query = flag(parse(value)?)?,
            "group_by_lazy_string_keys" => self.group_by_lazy_string_keys = flag(parse(value)?)?,
            "use_top_k_dynamic_filtering" => self.use_top_k_dynamic_filtering = flag(parse(value)?)?,
            "use_query_condition_cache" => self.use_query_condition_cache = flag(parse(value)?)?,
            "simd_level" => {
                let v = value.trim().trim_matches('\'');
                self.simd_level = if v.eq_ignore_ascii_case("auto") || v.is_empty() {
                    None
                } else {
                    let level = SimdLevel::parse(v).map_err(|e| Error::InvalidArgument(e.to_string()))?;
                    Kernels::for_level(level).map_err(|e| Error::InvalidArgument(e.to_string()))?;
                    Some(level)
                };
            }
            "max_memory_usage" => {
                self.max_memory_usage = parse(value)?;
            }
            "max_bytes_before_external_group_by" => self.max_bytes_before_external_group_by = parse(value)?,
            "max_temporary_data_on_disk_size" => self.max_temporary_data_on_disk_size = parse(value)?,
            "max_server_memory_usage" => self.max_server_memory_usage = parse(value)?,
            "max_bytes_before_external_sort" => self.max_bytes_before_external_sort = parse(value)?,
            "debug_sort_run_bytes" => self.debug_sort_run_bytes = parse(value)?,
            "max_bytes_ratio_before_external_group_by" => {
                self.max_bytes_ratio_before_external_group_by = parse_ratio(name, value)?
            }
            "max_bytes_ratio_before_external_sort" => self.max_bytes_ratio_before_external_sort = parse_ratio(name, value)?,
            "temporary_files_codec" => {
                let v = value.trim().trim_matches('\'');
                self.temporary_files_codec = if v.eq_ignore_ascii_case("lz4") {
                    TemporaryFilesCodec::Lz4
                } else if v.eq_ignore_ascii_case("none") {
                    TemporaryFilesCodec::None
                } else {
                    return Err(Error::InvalidArgument(format!("{name} = '{v}': expected LZ4 or NONE")));
                };
            }
            "tmp_path" => {
                let v = value.trim().trim_matches('\'');
                self.tmp_path = (!v.is_empty()).then(|| PathBuf::from(v));
            }
            "concurrent_threads_soft_limit_num" => {
                self.concurrent_threads_soft_limit_num = parse(value)? as usize;
            }
            other => {
                return Err(Error::InvalidArgument(format!(
                    "unknown setting '{other}' (known: {})",
                    Self::NAMES.join(", ")
                )));
            }
        }
        Ok(())
    }
}

/// A spill ratio from its SQL text: 0 (never) up to, not including, 1.
fn parse_ratio(name: &str, value: &str) -> Result<f64> {
    let v = value.trim().trim_matches('\'');
    match v.parse::<f64>() {
        Ok(r) if (0.0..1.0).contains(&r) => Ok(r),
        _ => Err(Error::InvalidArgument(format!("{name} = '{v}': expected a number from 0 (never) to below 1"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A container's memory limit: a number of bytes; `max` (v2) and v1's page-rounded
    /// `i64::MAX` mean none.
    #[test]
    fn cgroup_limits_read_as_bytes_or_none() {
        assert_eq!(cgroup_limit("4294967296\n"), Some(4 << 30));
        assert_eq!(cgroup_limit("max\n"), None);
        assert_eq!(cgroup_limit("9223372036854771712\n"), None);
        assert_eq!(cgroup_limit(""), None);
        assert_eq!(cgroup_limit("0"), None);
        let ram = physical_memory();
        assert!(ram.is_none_or(|b| b > 0));
    }

    #[test]
    fn set_known_and_unknown() {
        let mut s = Settings::default();
        s.set("max_threads", "3").unwrap();
        assert_eq!(s.max_threads, 3);
        s.set("MAX_THREADS", "0").unwrap();
        assert_eq!(s.max_threads, default_threads());
        assert!(matches!(s.set("max_threads", "x"), Err(Error::InvalidArgument(_))));
        assert!(matches!(s.set("nope", "1"), Err(Error::InvalidArgument(_))));
        s.set("group_by_two_level_threshold", "0").unwrap();
        assert_eq!(s.group_by_two_level_threshold, 0);
        s.set("group_by_radix_bits", "10").unwrap();
        assert_eq!(s.group_by_radix_bits, 10);
        for bad in ["7", "11", "x"] {
            assert!(matches!(s.set("group_by_radix_bits", bad), Err(Error::InvalidArgument(_))), "{bad}");
        }
        assert_eq!(s.group_by_radix_bits, 10);
        s.set("max_memory_usage", "1000000").unwrap();
        assert_eq!(s.max_memory_usage, 1_000_000);
        assert!(matches!(s.set("max_memory_usage", "-1"), Err(Error::InvalidArgument(_))));
        s.set("concurrent_threads_soft_limit_num", "4").unwrap();
        assert_eq!(s.concurrent_threads_soft_limit_num, 4);
        // External GROUP BY: half the query's budget by default, an explicit byte count
        // wins, ratio 0 turns it off.
        assert_eq!(s.external_group_by_bytes(), Some(500_000));
        s.set("max_bytes_before_external_group_by", "1234").unwrap();
        assert_eq!(s.external_group_by_bytes(), Some(1234));
        s.set("max_bytes_before_external_group_by", "0").unwrap();
        s.set("max_bytes_ratio_before_external_group_by", "0").unwrap();
        assert_eq!(s.external_group_by_bytes(), None);
        assert_eq!(s.external_sort_bytes(), Some(500_000));
        s.set("max_bytes_before_external_sort", "777").unwrap();
        assert_eq!(s.external_sort_bytes(), Some(777));
        s.set("max_bytes_before_external_sort", "0").unwrap();
        s.set("max_bytes_ratio_before_external_sort", "0.25").unwrap();
        assert_eq!(s.external_sort_bytes(), Some(250_000));
        assert!(matches!(s.set("max_bytes_ratio_before_external_sort", "-1"), Err(Error::InvalidArgument(_))));
        assert!(matches!(s.set("max_bytes_ratio_before_external_group_by", "1.5"), Err(Error::InvalidArgument(_))));
        s.set("tmp_path", "'/var/tmp'").unwrap();
        assert_eq!(s.temporary_directory(), PathBuf::from("/var/tmp"));
        s.set("temporary_files_codec", "'none'").unwrap();
        assert_eq!(s.temporary_files_codec, TemporaryFilesCodec::None);
        assert!(matches!(s.set("temporary_files_codec", "zip"), Err(Error::InvalidArgument(_))));
        s.set("tmp_path", "''").unwrap();
        assert_eq!(s.temporary_directory(), std::env::temp_dir());
        if physical_memory().is_some() {
            assert!(Settings::default().max_server_memory_usage > 0);
        }
    }
}
