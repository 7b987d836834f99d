//! Generation of a synthetic `hits` table calibrated to the published statistics of
//! ClickBench's real one (cardinalities, skew, empty shares, string lengths; see
//! `datasets/README.md`).
//!
//! Generation is counter-based: row `i` is a pure function of (seed, table rows, `i`), so a
//! batch is the same whatever the thread count or the batch boundaries. The table size
//! matters because pools scale with it: distinct counts per row stay the same at any size.
//!
//! ```text
//!   row i ──hash──► user (bot | light | heavy) ──► session (start, length) ──► EventTime
//!                      │                      └──► phrase key ──► SearchPhrase pool
//!                      └──► user attributes (region, IP, screen, ...)
//!   row i ──hash──► URL / Title / Referer / OriginalURL pools, CounterID, AdvEngineID, ...
//! ```

mod columns;
mod parquet;

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use tessera_common::{Error, Result};

use crate::model::{self, Cdf, Pick, Pool, PoolInput, UserClass, Users};
use crate::rng::{below, hash, permute, rehash, unit};
use crate::text::{self, Style};

pub use parquet::{GenReport, write_parquet};

/// Largest `len` of one generated batch. Bounds the bytes of one string column of a batch
/// well below the 2 GiB that 32-bit Arrow offsets allow.
pub const MAX_BATCH_ROWS: usize = 1 << 20;

/// Largest table: WatchID is a permutation of the row index on 63 bits and value ids keep
/// their pool tag in 2 bits, so stay far below both.
pub const MAX_ROWS: u64 = 1 << 40;

/// What to generate and how to write it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenOptions {
    /// Rows of the table. Pool sizes scale with it. Default 1,000,000.
    pub rows: u64,
    /// Seed of every random choice. Default 1.
    pub seed: u64,
    /// Rows per Parquet row group. Default 1,048,576 (`1 << 20`).
    pub row_group_rows: usize,
    /// Rows per generated batch, the unit of parallel work. Default 65,536.
    pub batch_rows: usize,
    /// ZSTD level of the Parquet pages (1..=22). Default 1 (see `datasets/README.md`).
    pub zstd_level: i32,
}

impl Default for GenOptions {
    fn default() -> Self {
        GenOptions {
            rows: 1_000_000,
            seed: 1,
            row_group_rows: 1 << 20,
            batch_rows: 1 << 16,
            zstd_level: 1,
        }
    }
}

impl GenOptions {
    /// Default options for a table of `rows` rows.
    pub fn new(rows: u64) -> Self {
        GenOptions {
            rows,
            ..GenOptions::default()
        }
    }

    /// Same options with another seed.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Checks every field.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `rows` is above [`MAX_ROWS`], `row_group_rows` is 0,
    /// `batch_rows` is 0 or above [`MAX_BATCH_ROWS`], or `zstd_level` is not in 1..=22.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidArgument(m));
        if self.rows > MAX_ROWS {
            return bad(format!(
                "rows = {} is above the maximum {MAX_ROWS}",
                self.rows
            ));
        }
        if self.row_group_rows == 0 {
            return bad("row_group_rows must be at least 1".into());
        }
        if self.batch_rows == 0 || self.batch_rows > MAX_BATCH_ROWS {
            return bad(format!(
                "batch_rows = {} is not in 1..={MAX_BATCH_ROWS}",
                self.batch_rows
            ));
        }
        if !(1..=22).contains(&self.zstd_level) {
            return bad(format!("zstd_level = {} is not in 1..=22", self.zstd_level));
        }
        Ok(())
    }
}

/// Generates `len` rows of `hits` starting at row `start_row`, for a table shaped by `opts`
/// (its `rows` and `seed`; the other fields do not change the data).
///
/// Deterministic and pure: the same arguments give the same batch, and row `i` is the same
/// whichever batch holds it. Rows at or beyond `opts.rows` are still generated, from the
/// pools of an `opts.rows`-row table (their unique values may then repeat other rows'). The
/// schema is [`crate::hits::schema`]. This solves the model on every call (about a
/// millisecond); use [`HitsGenerator`] to reuse it.
///
/// # Panics
/// If `len` is above [`MAX_BATCH_ROWS`] (see [`try_generate_batch`]).
pub fn generate_batch(opts: &GenOptions, start_row: u64, len: usize) -> RecordBatch {
    HitsGenerator::new(opts).generate_batch(start_row, len)
}

/// [`generate_batch`] that returns an error instead of panicking.
///
/// # Errors
/// [`Error::InvalidArgument`] if `len` is above [`MAX_BATCH_ROWS`].
pub fn try_generate_batch(opts: &GenOptions, start_row: u64, len: usize) -> Result<RecordBatch> {
    HitsGenerator::new(opts).try_generate_batch(start_row, len)
}

/// The solved model of one table (rows, seed): build it once, generate many batches.
#[derive(Debug)]
pub struct HitsGenerator {
    model: Arc<Model>,
}

impl HitsGenerator {
    /// Solves the model for `opts.rows` rows and `opts.seed` (a table of 0 rows is modelled
    /// as 1 row).
    pub fn new(opts: &GenOptions) -> Self {
        HitsGenerator {
            model: Arc::new(Model::new(opts.rows.clamp(1, MAX_ROWS), opts.seed)),
        }
    }

    /// The solved model parameters, one per line (pool shares, sizes and mean lengths, user
    /// classes): for diagnostics and `datasets/README.md`.
    pub fn describe(&self) -> String {
        let m = &*self.model;
        let u = &m.users;
        let mut s = format!("rows {} seed {}\n", m.rows, m.seed);
        s += &format!(
            "users: bot share {:.5}, light share {:.4} over {} users, heavy share {:.4} over {} users, \
             heavy phrase share {:.4}, heavy phrase repeat {:.3}, phrase keys {:.0}, expected users {:.0}\n",
            u.bot_share,
            u.light_end - u.bot_share,
            u.light_count,
            1.0 - u.light_end,
            u.heavy_count,
            u.heavy_phrase,
            u.heavy_repeat,
            u.phrase_keys,
            u.distinct,
        );
        s += &format!("ClientIP pool {} addresses\n", m.ip_count);
        for (name, pool) in [
            ("URL", &m.url),
            ("Title", &m.title),
            ("Referer", &m.referer),
            ("OriginalURL", &m.original_url),
            ("SearchPhrase", &m.phrase),
        ] {
            let (h, c, mc, lc, lr) = pool.params();
            s += &format!(
                "{name}: head share {h:.4}, common share {c:.4} over {mc} values of mean {lc:.1} B, \
                 rare share {:.4} of mean {lr:.1} B\n",
                1.0 - pool.empty_share() - h - c
            );
        }
        s
    }

    /// The schema of the batches, [`crate::hits::schema`].
    pub fn schema(&self) -> SchemaRef {
        crate::hits::schema()
    }

    /// See [`generate_batch`].
    ///
    /// # Panics
    /// If `len` is above [`MAX_BATCH_ROWS`].
    pub fn generate_batch(&self, start_row: u64, len: usize) -> RecordBatch {
        match self.try_generate_batch(start_row, len) {
            Ok(b) => b,
            Err(e) => panic!("generate_batch: {e}"),
        }
    }

    /// See [`try_generate_batch`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `len` is above [`MAX_BATCH_ROWS`].
    pub fn try_generate_batch(&self, start_row: u64, len: usize) -> Result<RecordBatch> {
        if len > MAX_BATCH_ROWS {
            return Err(Error::InvalidArgument(format!(
                "batch of {len} rows is above the maximum {MAX_BATCH_ROWS}"
            )));
        }
        let m = &*self.model;
        let cores: Vec<Core> = (0..len as u64)
            .map(|k| m.core(start_row.wrapping_add(k)))
            .collect();
        let schema = crate::hits::schema();
        let arrays = schema
            .fields()
            .iter()
            .map(|f| columns::column(m, f.name(), &cores))
            .collect();
        // The columns are built from the schema's own names with the matching types: a
        // mismatch is a bug of this crate, caught by its tests.
        RecordBatch::try_new(schema, arrays)
            .map_err(|e| Error::internal(format!("hits batch: {e}")))
    }
}

// ---- The model ----------------------------------------------------------------------------

/// Salts of the random streams (arbitrary distinct constants).
mod salt {
    pub(super) const ROW: u64 = 0x524F_5700_0000_0001;
    pub(super) const USER: u64 = 0x5553_4552_0000_0002;
    pub(super) const SESSION: u64 = 0x5345_5353_0000_0003;
    pub(super) const PHRASE: u64 = 0x5048_5241_0000_0004;
    pub(super) const WATCH: u64 = 0x5741_5443_0000_0005;
    pub(super) const IP: u64 = 0x4950_0000_0000_0006;
    pub(super) const URL: u64 = 0x5552_4C00_0000_0007;
    pub(super) const TITLE: u64 = 0x5449_544C_0000_0008;
    pub(super) const REFERER: u64 = 0x5245_4645_0000_0009;
    pub(super) const ORIGINAL_URL: u64 = 0x4F52_4955_0000_000A;
}

/// Everything solved for one (rows, seed): pools, user model, tables.
#[derive(Debug)]
pub(crate) struct Model {
    pub(crate) rows: u64,
    pub(crate) seed: u64,
    pub(crate) users: Users,
    pub(crate) phrase: Pool,
    pub(crate) url: Pool,
    pub(crate) title: Pool,
    pub(crate) referer: Pool,
    pub(crate) original_url: Pool,
    /// Index of the first phrase key of heavy sessions and of fresh (per-row) phrases.
    session_keys: u64,
    fresh_keys: u64,
    /// ClientIP pool size (index `ip_count` is the proxy address).
    ip_count: u64,
    pub(crate) regions: Cdf,
    pub(crate) region_ids: Vec<i32>,
    pub(crate) counters: Cdf,
    pub(crate) counter_ids: Vec<i32>,
    pub(crate) adv_engines: Cdf,
    pub(crate) resolutions: Cdf,
    /// Rows that repeat the WatchID and ClientIP of the row before (Q33's count of 2).
    duplicate_rows: [u64; 4],
}

/// The row-level choices several columns depend on.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Core {
    /// Row index.
    pub(crate) row: u64,
    /// Hash of the row: every row-level draw rehashes it with a column salt.
    pub(crate) h: u64,
    /// Hash of the user: user-level attributes rehash it.
    pub(crate) user_h: u64,
    pub(crate) user_id: i64,
    pub(crate) class: UserClass,
    /// EventTime, Unix seconds (UTC).
    pub(crate) time: i64,
    pub(crate) phrase: Pick,
    pub(crate) search_engine: i16,
    pub(crate) client_ip: i32,
    pub(crate) watch_id: i64,
}

impl Model {
    fn new(rows: u64, seed: u64) -> Model {
        let n = rows as f64;
        let users = Users::solve(n);
        let session_keys = users.light_count;
        let fresh_keys = session_keys + users.heavy_count * model::SESSIONS_MAX;
        let row_pool = |t: &model::ColumnTargets, style, head: fn(usize) -> String, s, google| {
            Pool::solve(
                seed,
                &PoolInput {
                    distinct: t.distinct * n,
                    draws: n,
                    empty: t.empty,
                    bytes_per_draw: t.bytes_per_row,
                    bytes_per_distinct: t.bytes_per_distinct,
                    top1: t.top1,
                    zipf: t.zipf,
                    common_draws: model::COMMON_DRAWS_PER_VALUE,
                    rare_ids: rows,
                    style,
                    head_value: head,
                    salt: s,
                    google_share: google,
                    google_word_share: if style == Style::Text { 0.0003 } else { 0.0 },
                },
            )
        };
        // Q21: 15,911 rows of 100M have 'google' in URL.
        let url = row_pool(
            &model::URL,
            Style::Url,
            text::head_url,
            salt::URL,
            15_911.0 / model::FULL_ROWS,
        );
        let title = row_pool(
            &model::TITLE,
            Style::Text,
            text::head_title,
            salt::TITLE,
            0.0,
        );
        let referer = row_pool(
            &model::REFERER,
            Style::Url,
            text::head_referer,
            salt::REFERER,
            0.0005,
        );
        let original_url = row_pool(
            &model::ORIGINAL_URL,
            Style::Url,
            text::head_url,
            salt::ORIGINAL_URL,
            0.0,
        );
        let nonempty = model::NONEMPTY_PHRASE_SHARE;
        let phrase = Pool::solve(
            seed,
            &PoolInput {
                distinct: model::PHRASES_PER_ROW * n - 1.0,
                draws: users.phrase_keys,
                empty: 0.0,
                bytes_per_draw: model::PHRASE_BYTES_PER_ROW / nonempty,
                bytes_per_distinct: None,
                top1: model::PHRASE_TOP1_SHARE / nonempty,
                zipf: model::PHRASE_ZIPF,
                common_draws: model::COMMON_PHRASE_DRAWS,
                rare_ids: fresh_keys + rows,
                style: Style::Text,
                head_value: text::head_phrase,
                salt: salt::PHRASE,
                google_share: 0.0,
                google_word_share: 0.0,
            },
        );
        // ClientIP: drawn per user from a pool sized so that the distinct users (the draws)
        // show IPS_PER_ROW·N distinct addresses: φ(D_u / M) = (IPS·N - 1) / D_u.
        let ip_ratio = ((model::IPS_PER_ROW * n - 1.0) / users.distinct).clamp(1e-9, 1.0);
        let ip_count = ((users.distinct / model::inverse_phi(ip_ratio)).round() as u64).max(1);

        let region_tail = model::zipf(model::TAIL_REGIONS, model::TAIL_REGION_ZIPF);
        let tail_share = 1.0 - model::TOP_REGIONS.iter().map(|r| r.1).sum::<f64>();
        let mut region_w: Vec<f64> = model::TOP_REGIONS.iter().map(|r| r.1).collect();
        region_w.extend(region_tail.iter().map(|p| p * tail_share));
        let mut region_ids: Vec<i32> = model::TOP_REGIONS.iter().map(|r| r.0).collect();
        region_ids.extend((0..model::TAIL_REGIONS as i32).map(|k| 250 + 3 * k));

        let counter_tail = model::zipf(model::TAIL_COUNTERS, model::TAIL_COUNTER_ZIPF);
        let tail_share = 1.0 - model::TOP_COUNTERS.iter().map(|c| c.1).sum::<f64>();
        let mut counter_w: Vec<f64> = model::TOP_COUNTERS.iter().map(|c| c.1).collect();
        counter_w.extend(counter_tail.iter().map(|p| p * tail_share));
        let mut counter_ids: Vec<i32> = model::TOP_COUNTERS.iter().map(|c| c.0).collect();
        counter_ids.extend((0..model::TAIL_COUNTERS as i32).map(|k| 100 + 211 * k));

        let adv_w: Vec<f64> = model::ADV_ENGINES.iter().map(|a| a.1).collect();
        let res_w: Vec<f64> = model::RESOLUTIONS.iter().map(|r| r.2).collect();
        let dup = |k: u64| {
            if rows >= 10 {
                k * (rows / 5) + 1
            } else {
                u64::MAX
            }
        };
        Model {
            rows,
            seed,
            users,
            phrase,
            url,
            title,
            referer,
            original_url,
            session_keys,
            fresh_keys,
            ip_count,
            regions: Cdf::new(&region_w),
            region_ids,
            counters: Cdf::new(&counter_w),
            counter_ids,
            adv_engines: Cdf::new(&adv_w),
            resolutions: Cdf::new(&res_w),
            duplicate_rows: [dup(1), dup(2), dup(3), dup(4)],
        }
    }

    /// The user-, session- and phrase-level choices of row `i`.
    pub(crate) fn core(&self, i: u64) -> Core {
        let mut c = self.core_unique(i);
        if self.duplicate_rows.contains(&i) && i > 0 {
            // Same WatchID and ClientIP as the row before, another EventTime, no phrase (so
            // Q33 has groups of 2 while Q32's groups stay single).
            let prev = self.core_unique(i - 1);
            c.watch_id = prev.watch_id;
            c.client_ip = prev.client_ip;
            c.phrase = Pick::Empty;
            c.search_engine = 0;
            if c.time == prev.time {
                c.time = model::T0 + (c.time - model::T0 + 1) % model::PERIOD;
            }
        }
        c
    }

    fn core_unique(&self, i: u64) -> Core {
        let seed = self.seed;
        let u = &self.users;
        let h = hash(seed, salt::ROW, i);
        let x = unit(h);
        let pick = rehash(h, 1);
        let (class, index, user_key) = if x < u.bot_share {
            let k = u.bots.sample(x / u.bot_share) as u64;
            (UserClass::Bot, k, k)
        } else if x < u.light_end {
            let k = below(pick, u.light_count);
            (UserClass::Light, k, (1 << 60) | k)
        } else {
            let k = below(pick, u.heavy_count);
            (UserClass::Heavy, k, (2 << 60) | k)
        };
        let user_h = hash(seed, salt::USER, user_key);
        let user_id = if class == UserClass::Heavy && index == 0 {
            model::Q20_USER_ID
        } else {
            1 + below(user_h, model::USER_ID_RANGE) as i64
        };
        let in_session = |session_key: u64| -> i64 {
            let sh = hash(seed, salt::SESSION, session_key);
            let start = below(sh, model::PERIOD as u64);
            let length = 1 + below(rehash(sh, 1), model::SESSION_SECONDS_MAX);
            let t = (start + below(rehash(h, 2), length)) % model::PERIOD as u64;
            model::T0 + t as i64
        };
        let fresh = self.fresh_keys.wrapping_add(i);
        let (time, phrase_key) = match class {
            UserClass::Bot => (
                model::T0 + below(rehash(h, 2), model::PERIOD as u64) as i64,
                None,
            ),
            UserClass::Light => {
                let key = if unit(rehash(h, 3)) < model::LIGHT_REPEAT {
                    index
                } else {
                    fresh
                };
                (in_session(user_key), Some(key))
            }
            UserClass::Heavy => {
                let sessions = 1 + below(rehash(user_h, 5), model::SESSIONS_MAX);
                let j = below(rehash(h, 4), sessions);
                let session = self.session_keys + index * model::SESSIONS_MAX + j;
                let key = if unit(rehash(h, 3)) >= u.heavy_phrase {
                    None
                } else if unit(rehash(h, 6)) < u.heavy_repeat {
                    Some(session)
                } else {
                    Some(fresh)
                };
                (in_session(session), key)
            }
        };
        let phrase = match phrase_key {
            None => Pick::Empty,
            Some(k) => self.phrase.pick(hash(seed, salt::PHRASE, k), k),
        };
        let search_engine = self.search_engine(h, phrase);
        let ip_index = if unit(rehash(h, 7)) < model::IP_TOP1_SHARE {
            self.ip_count
        } else {
            below(rehash(user_h, 8), self.ip_count)
        };
        let client_ip = permute(ip_index, hash(seed, salt::IP, 0), 32) as u32 as i32;
        let watch_id = permute(i, hash(seed, salt::WATCH, 0), 63) as i64;
        Core {
            row: i,
            h,
            user_h,
            user_id,
            class,
            time,
            phrase,
            search_engine,
            client_ip,
            watch_id,
        }
    }

    /// SearchEngineID: 0 for most rows without a phrase; a phrase has an engine (2 or 3
    /// mostly), the same for most rows of that phrase (Q15's 1.075 engines per phrase).
    fn search_engine(&self, h: u64, phrase: Pick) -> i16 {
        const ENGINES: [i16; 16] = [2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3];
        const OTHER: [i16; 8] = [1, 4, 5, 6, 7, 8, 13, 17];
        let r = rehash(h, 9);
        match phrase {
            Pick::Empty => {
                if unit(r) < 0.02 {
                    ENGINES[below(rehash(r, 1), 16) as usize]
                } else {
                    0
                }
            }
            p => {
                let ph = hash(self.seed, salt::PHRASE, p.id() ^ 0xE6);
                if unit(r) < 0.95 {
                    ENGINES[below(ph, 16) as usize]
                } else if unit(r) < 0.99 {
                    ENGINES[below(rehash(r, 1), 16) as usize]
                } else {
                    OTHER[below(rehash(r, 1), 8) as usize]
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_validation() {
        assert!(GenOptions::default().validate().is_ok());
        let bad = [
            GenOptions {
                row_group_rows: 0,
                ..GenOptions::default()
            },
            GenOptions {
                batch_rows: 0,
                ..GenOptions::default()
            },
            GenOptions {
                batch_rows: MAX_BATCH_ROWS + 1,
                ..GenOptions::default()
            },
            GenOptions {
                zstd_level: 0,
                ..GenOptions::default()
            },
            GenOptions {
                rows: MAX_ROWS + 1,
                ..GenOptions::default()
            },
        ];
        for o in bad {
            assert!(
                matches!(o.validate(), Err(Error::InvalidArgument(_))),
                "{o:?}"
            );
        }
        assert!(try_generate_batch(&GenOptions::new(10), 0, MAX_BATCH_ROWS + 1).is_err());
    }

    #[test]
    fn tiny_tables_and_edges() {
        for rows in [0u64, 1, 2, 9, 10, 11] {
            let b = generate_batch(&GenOptions::new(rows), 0, rows as usize);
            assert_eq!(b.num_rows(), rows as usize);
            assert_eq!(b.num_columns(), 105);
        }
        // Far rows and an empty batch.
        assert_eq!(
            generate_batch(&GenOptions::new(100), u64::MAX - 3, 3).num_rows(),
            3
        );
        assert_eq!(generate_batch(&GenOptions::new(100), 5, 0).num_rows(), 0);
    }

    #[test]
    fn event_times_in_range_and_duplicates() {
        let opts = GenOptions::new(50_000);
        let g = HitsGenerator::new(&opts);
        let m = &*g.model;
        let cores: Vec<Core> = (0..opts.rows).map(|i| m.core(i)).collect();
        assert!(
            cores
                .iter()
                .all(|c| (model::T0..model::T0 + model::PERIOD).contains(&c.time))
        );
        let mut ids: Vec<(i64, i32)> = cores.iter().map(|c| (c.watch_id, c.client_ip)).collect();
        ids.sort_unstable();
        let dups = ids.windows(2).filter(|w| w[0] == w[1]).count();
        assert_eq!(dups, 4);
        let mut wt: Vec<(i64, i64)> = cores.iter().map(|c| (c.watch_id, c.time)).collect();
        wt.sort_unstable();
        assert!(wt.windows(2).all(|w| w[0] != w[1]));
    }
}
