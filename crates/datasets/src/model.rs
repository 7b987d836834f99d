//! Calibration of the `hits` generator: the published statistics of ClickBench's `hits`
//! table (`/work/shared/datasets/hits-targets.md`, summarised in `datasets/README.md`) and
//! the pool parameters solved from them for a table of `N` rows.
//!
//! Every count below is "per row of the full table" and is scaled by `N`, so distinct counts
//! grow with the table as they do in the real data.
//!
//! # String columns: three pools
//! A draw (a row, or a phrase key for SearchPhrase) takes the empty string with share `e`, a
//! head value (Zipf over `K` ranks, short) with share `h`, a value of the *common* pool
//! (`M_c` values drawn uniformly, ~`λ_c` draws each) with share `c`, or a *rare* value unique
//! to the draw with share `r = 1 - e - h - c`. For `d` draws, with
//! `φ(λ) = (1 - exp(-λ)) / λ` (a pool of `M` values drawn `n = λM` times uniformly shows
//! `M(1 - exp(-λ))` distinct values):
//!
//! ```text
//!   distinct   D  = D_e + D_h + c·d·φ(λ_c) + r·d              (D_h = Σ_k 1 - exp(-d·h·p_k))
//!   bytes/draw ℓ  = h·L_h + c·L_c + r·L_r
//!   bytes of the distinct values  ℓd·D = B_h + c·d·φ(λ_c)·L_c + r·d·L_r
//! ```
//!
//! so `c = (1 - e - h - (D - D_e - D_h)/d) / (1 - φ)`, then
//! `L_c = (ℓ - h·L_h - (ℓd·D - B_h)/d) / (c·(1 - φ))` and `L_r = (ℓ - h·L_h - c·L_c) / r`.
//! Frequent values come out short and rare ones long, as in the real data.

use crate::rng::{below, hash, rehash, unit};
use crate::text::{Render, Style, WORD_BITS};

/// Rows of the real table; every published count is divided by this.
pub(crate) const FULL_ROWS: f64 = 99_997_497.0;

/// 2013-07-01 20:00:00 UTC, the first EventTime, in Unix seconds.
pub(crate) const T0: i64 = 1_372_708_800;
/// EventTime spans 30 days: the last one is 2013-07-31 19:59:59 UTC.
pub(crate) const PERIOD: i64 = 30 * 86_400;
/// EventDate is the local date of EventTime in UTC+4 (Moscow summer time 2013).
pub(crate) const LOCAL_OFFSET: i64 = 4 * 3_600;

// ---- Users and search phrases (targets per row) -------------------------------------------
/// Distinct UserID per row.
pub(crate) const USERS_PER_ROW: f64 = 17_630_976.0 / FULL_ROWS;
/// Distinct (UserID, SearchPhrase) per row (Q17/Q18 groups).
pub(crate) const USER_PHRASE_PER_ROW: f64 = 24_070_560.0 / FULL_ROWS;
/// Distinct (SearchPhrase, UserID) with SearchPhrase <> '' per row.
pub(crate) const USER_NONEMPTY_PHRASE_PER_ROW: f64 = 10_681_408.0 / FULL_ROWS;
/// Share of rows with a non-empty SearchPhrase (1 - 86.83%).
pub(crate) const NONEMPTY_PHRASE_SHARE: f64 = 1.0 - 0.8683;
/// Distinct SearchPhrase per row, '' included.
pub(crate) const PHRASES_PER_ROW: f64 = 6_019_103.0 / FULL_ROWS;
/// Average SearchPhrase bytes per row, empty rows included.
pub(crate) const PHRASE_BYTES_PER_ROW: f64 = 4.1;
/// Rows of the most frequent non-empty phrase (70,263) as a share of all rows.
pub(crate) const PHRASE_TOP1_SHARE: f64 = 70_263.0 / FULL_ROWS;
/// Zipf exponent of the head phrases: top-1 / top-10 = 70,263 / 12,317 = 10^0.756.
pub(crate) const PHRASE_ZIPF: f64 = 0.756;

/// Rows of the most active user (a bot, 29,097 rows) as a share of all rows.
pub(crate) const BOT_TOP1_SHARE: f64 = 29_097.0 / FULL_ROWS;
/// Zipf exponent of the bot users: top-1 / top-10 = 29,097 / 4,906 = 10^0.773.
pub(crate) const BOT_ZIPF: f64 = 0.773;
/// Bot users (rows with an empty phrase at uniform times).
pub(crate) const BOTS: usize = 1_000;

/// Mean rows of a "light" user (a search visitor: every row has a phrase). Tuned.
pub(crate) const LIGHT_ROWS_PER_USER: f64 = 1.2;
/// Chance that a light user's row repeats the user's own phrase. Tuned.
pub(crate) const LIGHT_REPEAT: f64 = 0.85;
/// A heavy (regular) user has 1..=SESSIONS_MAX sessions, each at one time and with one
/// phrase. Tuned, with the session length, to the Q19 group count.
pub(crate) const SESSIONS_MAX: u64 = 2;
/// Longest session in seconds; a session lasts a uniform 1..=this many seconds. Tuned.
pub(crate) const SESSION_SECONDS_MAX: u64 = 360;

/// Distinct ClientIP per row; users share addresses (an IP is drawn per user).
pub(crate) const IPS_PER_ROW: f64 = 9_762_046.0 / FULL_ROWS;
/// Rows of the most frequent ClientIP (47,008), a proxy seen by rows of any user.
pub(crate) const IP_TOP1_SHARE: f64 = 47_008.0 / FULL_ROWS;

/// AVG(UserID) = 2.528953029789716e18: ids are uniform on `1..=2·mean`.
pub(crate) const USER_ID_RANGE: u64 = 5_057_906_059_579_432_000;
/// The UserID of Q20 (`WHERE UserID = 435090932899640449`), given to one regular user.
pub(crate) const Q20_USER_ID: i64 = 435_090_932_899_640_449;

// ---- Per-row string columns ---------------------------------------------------------------
/// Targets of one per-row string column (per row of the full table).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ColumnTargets {
    /// Share of empty strings.
    pub(crate) empty: f64,
    /// Distinct values per row ('' included).
    pub(crate) distinct: f64,
    /// Average bytes per row, empty rows included.
    pub(crate) bytes_per_row: f64,
    /// Average bytes per distinct value.
    pub(crate) bytes_per_distinct: Option<f64>,
    /// Share of all rows of the most frequent non-empty value.
    pub(crate) top1: f64,
    /// Zipf exponent of the head.
    pub(crate) zipf: f64,
}

/// URL: 18,342,019 distinct; top URL 3.29% of rows, top 10 8.63% (Zipf 1.13 fits 2.62).
pub(crate) const URL: ColumnTargets = ColumnTargets {
    empty: 0.0007,
    distinct: 18_342_019.0 / FULL_ROWS,
    bytes_per_row: 87.9,
    bytes_per_distinct: Some(184.0),
    top1: 0.0329,
    zipf: 1.13,
};
/// Title: 9,425,424 distinct; head skew not published (assumed top-1 1.5%, Zipf 1).
pub(crate) const TITLE: ColumnTargets = ColumnTargets {
    empty: 0.1491,
    distinct: 9_425_424.0 / FULL_ROWS,
    bytes_per_row: 56.7,
    bytes_per_distinct: Some(133.4),
    top1: 0.015,
    zipf: 1.0,
};
/// Referer: 19,720,797 distinct; head skew not published (assumed top-1 2%, Zipf 1).
pub(crate) const REFERER: ColumnTargets = ColumnTargets {
    empty: 0.1897,
    distinct: 19_720_797.0 / FULL_ROWS,
    bytes_per_row: 63.4,
    bytes_per_distinct: Some(136.4),
    top1: 0.02,
    zipf: 1.0,
};
/// OriginalURL: distinct count not published (assumed 0.08 per row), no head.
pub(crate) const ORIGINAL_URL: ColumnTargets = ColumnTargets {
    empty: 0.8298,
    distinct: 0.08,
    bytes_per_row: 53.1,
    bytes_per_distinct: Some(392.7),
    top1: 0.0,
    zipf: 1.0,
};

/// Head size of every string column (ranks of the Zipf head).
pub(crate) const HEAD_VALUES: usize = 1_000;
/// Draws per value of a common pool ("a value appears ~20x").
pub(crate) const COMMON_DRAWS_PER_VALUE: f64 = 20.0;
/// Draws per value of the common phrase pool ("most phrases occur 1-3 times").
pub(crate) const COMMON_PHRASE_DRAWS: f64 = 3.0;
/// Per-distinct length of SearchPhrase cannot be met (see README): rare phrases are made
/// this much longer than common ones instead.
pub(crate) const PHRASE_RARE_OVER_COMMON_LEN: f64 = 1.5;
/// Each value's length is its pool mean times a uniform factor in `[1 - s, 1 + s]`.
pub(crate) const LENGTH_SPREAD: f64 = 0.4;

// ---- Small helpers ------------------------------------------------------------------------
/// `φ(λ) = (1 - exp(-λ)) / λ`: distinct values per draw of a uniform pool drawn `λ` times
/// per value.
pub(crate) fn phi(lambda: f64) -> f64 {
    if lambda < 1e-9 {
        1.0 - lambda / 2.0
    } else {
        -(-lambda).exp_m1() / lambda
    }
}

/// Inverse of [`phi`] for `ratio` in `(0, 1]`, by bisection.
pub(crate) fn inverse_phi(ratio: f64) -> f64 {
    let ratio = ratio.clamp(1e-9, 1.0);
    let (mut lo, mut hi) = (0.0f64, 1e9f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if phi(mid) > ratio { lo = mid } else { hi = mid }
    }
    0.5 * (lo + hi)
}

/// Normalised Zipf weights `k^-s`, `k = 1..=n`.
pub(crate) fn zipf(n: usize, s: f64) -> Vec<f64> {
    let w: Vec<f64> = (1..=n).map(|k| (k as f64).powf(-s)).collect();
    let sum: f64 = w.iter().sum();
    w.into_iter().map(|x| x / sum).collect()
}

/// Expected distinct ranks after `draws` draws from probabilities `p`.
pub(crate) fn expected_distinct(p: &[f64], draws: f64) -> f64 {
    p.iter().map(|&pk| -(-draws * pk).exp_m1()).sum()
}

/// A discrete distribution sampled by binary search over its cumulative weights.
#[derive(Debug, Clone)]
pub(crate) struct Cdf {
    cum: Vec<f64>,
}

impl Cdf {
    /// From non-negative weights (normalised here; at least one must be positive).
    pub(crate) fn new(weights: &[f64]) -> Self {
        let total: f64 = weights.iter().sum();
        let mut acc = 0.0;
        let cum = weights
            .iter()
            .map(|w| {
                acc += w / total;
                acc
            })
            .collect();
        Cdf { cum }
    }

    /// The index whose cumulative interval holds `u` in `[0, 1)`.
    #[inline]
    pub(crate) fn sample(&self, u: f64) -> usize {
        self.cum
            .partition_point(|&c| c <= u)
            .min(self.cum.len() - 1)
    }
}

// ---- String pools -------------------------------------------------------------------------
/// Which value a draw of a [`Pool`] took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pick {
    /// The empty string.
    Empty,
    /// Head value of this rank (0 = most frequent).
    Head(u32),
    /// Common-pool value of this index.
    Common(u64),
    /// The rare value of this draw id (unique to the draw).
    Rare(u64),
}

impl Pick {
    /// An id of the string: equal ids ⇔ equal strings within one column. Used for the
    /// `URLHash` / `RefererHash` columns and to key phrase-dependent attributes.
    #[inline]
    pub(crate) fn id(self) -> u64 {
        match self {
            Pick::Empty => 0,
            Pick::Head(k) => 1 + k as u64,
            Pick::Common(c) => (1 << 62) | c,
            Pick::Rare(r) => (2 << 62) | r,
        }
    }
}

/// The solved model of one string column.
#[derive(Debug)]
pub(crate) struct Pool {
    empty: f64,
    head_end: f64,
    common_end: f64,
    head: Cdf,
    head_values: Vec<String>,
    common_count: u64,
    common_len: f64,
    rare_len: f64,
    render: Render,
    seed: u64,
}

/// What [`Pool::solve`] needs besides the targets.
pub(crate) struct PoolInput {
    /// Expected distinct values, '' included when `empty > 0` (absolute count).
    pub(crate) distinct: f64,
    /// Expected draws (rows, or phrase keys).
    pub(crate) draws: f64,
    /// Share of empty draws.
    pub(crate) empty: f64,
    /// Bytes per draw, empty draws included.
    pub(crate) bytes_per_draw: f64,
    /// Bytes per distinct value; `None`: rare values are `PHRASE_RARE_OVER_COMMON_LEN`
    /// times longer than common ones.
    pub(crate) bytes_per_distinct: Option<f64>,
    /// Share of draws of the top head value (0: no head).
    pub(crate) top1: f64,
    /// Zipf exponent of the head.
    pub(crate) zipf: f64,
    /// Draws per common value.
    pub(crate) common_draws: f64,
    /// Largest rare id + 1 (sizes the digit words).
    pub(crate) rare_ids: u64,
    /// Look of the pool values.
    pub(crate) style: Style,
    /// Head value of rank k.
    pub(crate) head_value: fn(usize) -> String,
    /// Salt of this column (digit permutation key, length hashes).
    pub(crate) salt: u64,
    /// Share of draws whose (rare) URL value is on google.ru (0: never).
    pub(crate) google_share: f64,
    /// Share of draws whose (rare) text value contains the word "Google" (0: never).
    pub(crate) google_word_share: f64,
}

impl Pool {
    /// Solves the pool shares and lengths (module docs) for `input`.
    pub(crate) fn solve(seed: u64, input: &PoolInput) -> Pool {
        let d = input.draws.max(1.0);
        let e = input.empty;
        let (p, h) = if input.top1 > 0.0 {
            let p = zipf(HEAD_VALUES, input.zipf);
            let h = (input.top1 / p[0]).min(1.0 - e);
            (p, h)
        } else {
            (vec![1.0], 0.0)
        };
        let head_values: Vec<String> = if h > 0.0 {
            (0..p.len()).map(input.head_value).collect()
        } else {
            vec![String::new()]
        };
        let head_len_draw: f64 = p
            .iter()
            .zip(&head_values)
            .map(|(pk, v)| pk * v.len() as f64)
            .sum();
        let (d_head, b_head) = if h > 0.0 {
            let mut dh = 0.0;
            let mut bh = 0.0;
            for (pk, v) in p.iter().zip(&head_values) {
                let seen = -(-d * h * pk).exp_m1();
                dh += seen;
                bh += seen * v.len() as f64;
            }
            (dh, bh)
        } else {
            (0.0, 0.0)
        };
        let d_empty = if e > 0.0 { -(-d * e).exp_m1() } else { 0.0 };
        let rest = 1.0 - e - h;
        let per_draw = ((input.distinct - d_empty - d_head) / d).max(0.0);
        let f = phi(input.common_draws);
        let c = ((rest - per_draw) / (1.0 - f)).clamp(0.0, rest);
        let r = rest - c;
        // Digit words: enough for every common index and rare id, with one bit of headroom.
        let common_count = ((c * d / input.common_draws).round() as u64).max(1);
        let max_g = 2 * common_count.max(input.rare_ids) + 2;
        let bits = 64 - max_g.leading_zeros() + 1;
        let width = bits.div_ceil(WORD_BITS).max(3);
        let min_len = crate::text::min_pool_len(input.style, width);
        let bytes = input.bytes_per_draw - h * head_len_draw;
        let (mut lc, mut lr) = match input.bytes_per_distinct {
            Some(bd) if c > 0.0 => {
                let distinct_bytes = (bd * input.distinct - b_head) / d;
                let lc = (bytes - distinct_bytes) / (c * (1.0 - f));
                let lr = if r > 0.0 { (bytes - c * lc) / r } else { lc };
                (lc, lr)
            }
            _ => {
                let q = PHRASE_RARE_OVER_COMMON_LEN;
                let lc = bytes / (c + q * r).max(1e-9);
                (lc, q * lc)
            }
        };
        if lc < min_len {
            lc = min_len;
            lr = if r > 0.0 {
                ((bytes - c * lc) / r).max(min_len)
            } else {
                lc
            };
        }
        if lr < min_len {
            lr = min_len;
        }
        Pool {
            empty: e,
            head_end: e + h,
            common_end: e + h + c,
            head: Cdf::new(&p),
            head_values,
            common_count,
            common_len: lc,
            rare_len: lr,
            render: Render {
                style: input.style,
                width,
                key: hash(seed, input.salt, 0x004B_4559),
                // Only rare values (one draw each) carry the word: the row count of Q21 then
                // has the small variance of a binomial over rows.
                google_one_in: one_in(r, input.google_share),
                google_word_one_in: one_in(r, input.google_word_share),
            },
            seed: hash(seed, input.salt, 0x5345_4544),
        }
    }

    /// The value a draw with hash `h` takes; `rare_id` names the draw's own rare value.
    #[inline]
    pub(crate) fn pick(&self, h: u64, rare_id: u64) -> Pick {
        let u = unit(h);
        if u < self.empty {
            Pick::Empty
        } else if u < self.head_end {
            let v = (u - self.empty) / (self.head_end - self.empty);
            Pick::Head(self.head.sample(v) as u32)
        } else if u < self.common_end {
            Pick::Common(below(rehash(h, 0xC0), self.common_count))
        } else {
            Pick::Rare(rare_id)
        }
    }

    /// Appends the bytes of `pick` to `out`.
    #[inline]
    pub(crate) fn append(&self, pick: Pick, out: &mut Vec<u8>) {
        let (g, mean) = match pick {
            Pick::Empty => return,
            Pick::Head(k) => {
                out.extend_from_slice(self.head_values[k as usize].as_bytes());
                return;
            }
            Pick::Common(c) => (c << 1, self.common_len),
            Pick::Rare(r) => ((r << 1) | 1, self.rare_len),
        };
        let h = hash(self.seed, 0x56414C, g);
        let len = mean * (1.0 - LENGTH_SPREAD + 2.0 * LENGTH_SPREAD * unit(rehash(h, 0x4C)));
        self.render
            .render(g, h, len.round() as usize, g & 1 == 1, out);
    }

    /// Share of empty draws.
    pub(crate) fn empty_share(&self) -> f64 {
        self.empty
    }

    /// Solved parameters, for diagnostics: (head share, common share, common values,
    /// common mean length, rare mean length).
    pub(crate) fn params(&self) -> (f64, f64, u64, f64, f64) {
        (
            self.head_end - self.empty,
            self.common_end - self.head_end,
            self.common_count,
            self.common_len,
            self.rare_len,
        )
    }
}

/// `1 / (share / pool_share)` rounded: one pool value in this many; 0 for "never".
fn one_in(pool_share: f64, share: f64) -> u64 {
    if share <= 0.0 || pool_share <= 0.0 {
        0
    } else {
        (pool_share / share).round().max(1.0) as u64
    }
}

// ---- Users --------------------------------------------------------------------------------
/// Class of the user of a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UserClass {
    /// A bot: Zipf-skewed activity, empty phrases, uniform times.
    Bot,
    /// A search visitor: few rows, each with a phrase.
    Light,
    /// A regular visitor: sessions, mostly empty phrases.
    Heavy,
}

/// The solved user model: row shares of the three classes, pool sizes and phrase repeats.
///
/// With `D_L` light and `D_H` heavy users: users = bots + D_L + D_H; (user, phrase) pairs =
/// bots + D_H (heavy users nearly all have an empty row) + E (non-empty pairs), so
/// `D_L = users - (pairs - E)`. Light users have `λ_L` rows each (`M_L = D_L / (1-e^-λ_L)`,
/// row share `s_L = λ_L·M_L/N`), heavy users take the remaining rows with `φ(λ_H) = D_H /
/// (s_H·N)`, and a heavy row has a phrase with `p_H = (0.1317 - s_L) / s_H`. The repeat
/// probability of heavy phrases `ρ_H` is solved (bisection) so that the expected distinct
/// non-empty (user, phrase) pairs equal E.
#[derive(Debug)]
pub(crate) struct Users {
    pub(crate) bot_share: f64,
    pub(crate) bots: Cdf,
    pub(crate) light_end: f64,
    pub(crate) light_count: u64,
    pub(crate) heavy_count: u64,
    pub(crate) heavy_phrase: f64,
    pub(crate) heavy_repeat: f64,
    /// Expected distinct phrase keys (the draws of the phrase pool).
    pub(crate) phrase_keys: f64,
    /// Expected distinct users.
    pub(crate) distinct: f64,
}

impl Users {
    /// Solves the user model for `n` rows.
    pub(crate) fn solve(n: f64) -> Users {
        let p = zipf(BOTS, BOT_ZIPF);
        let bot_share = BOT_TOP1_SHARE / p[0];
        let d_bots = expected_distinct(&p, n * bot_share);
        let e_pairs = USER_NONEMPTY_PHRASE_PER_ROW * n;
        let d_light = (USERS_PER_ROW - (USER_PHRASE_PER_ROW - USER_NONEMPTY_PHRASE_PER_ROW)) * n;
        let lam_l = LIGHT_ROWS_PER_USER;
        let m_light = d_light / -(-lam_l).exp_m1();
        let s_light = lam_l * m_light / n;
        let s_heavy = 1.0 - bot_share - s_light;
        let d_heavy = (USERS_PER_ROW * n - d_light - d_bots).max(1.0);
        // Tiny tables (a few rows) leave the model's range: keep every rate finite.
        let lam_h = inverse_phi(d_heavy / (s_heavy * n)).max(1e-3);
        let m_heavy = s_heavy * n / lam_h;
        let p_h = ((NONEMPTY_PHRASE_SHARE - s_light) / s_heavy).clamp(0.0, 1.0);
        let e_light =
            -m_light * (-lam_l * LIGHT_REPEAT).exp_m1() + s_light * n * (1.0 - LIGHT_REPEAT);
        let e_heavy = |rho: f64| -> f64 {
            let sessions: f64 = (1..=SESSIONS_MAX)
                .map(|s| {
                    let s = s as f64;
                    -m_heavy * s * (-lam_h * p_h * rho / s).exp_m1()
                })
                .sum::<f64>()
                / SESSIONS_MAX as f64;
            sessions + s_heavy * n * p_h * (1.0 - rho)
        };
        let target = e_pairs - e_light;
        let (mut lo, mut hi) = (0.0f64, 1.0f64);
        for _ in 0..60 {
            let mid = 0.5 * (lo + hi);
            if e_heavy(mid) > target {
                lo = mid
            } else {
                hi = mid
            }
        }
        let rho_h = 0.5 * (lo + hi);
        Users {
            bot_share,
            bots: Cdf::new(&p),
            light_end: bot_share + s_light,
            light_count: (m_light.round() as u64).clamp(1, n as u64 + 1),
            heavy_count: (m_heavy.round() as u64).clamp(1, n as u64 + 1),
            heavy_phrase: p_h,
            heavy_repeat: rho_h,
            phrase_keys: (e_light + e_heavy(rho_h)).max(1.0),
            distinct: d_bots + d_light + d_heavy,
        }
    }
}

// ---- Small-domain distributions ------------------------------------------------------------
/// RegionID: 229 holds 18.3% of rows and the top 10 hold 42.5% (published); the other
/// 57.5% spread as Zipf(0.6) over 5,000 further regions (assumed; flat enough that none
/// of them enters the top 10).
pub(crate) const TOP_REGIONS: [(i32, f64); 10] = [
    (229, 0.183),
    (2, 0.050),
    (208, 0.035),
    (1, 0.032),
    (34, 0.028),
    (158, 0.024),
    (184, 0.022),
    (107, 0.019),
    (42, 0.017),
    (47, 0.015),
];
/// Regions beyond the top 10.
pub(crate) const TAIL_REGIONS: usize = 5_000;
/// Zipf exponent of the regions beyond the top 10.
pub(crate) const TAIL_REGION_ZIPF: f64 = 0.6;

/// CounterID: a handful of counters with 7-8.5% of rows each, counter 62 with 0.74% of rows
/// with a non-empty URL, and Zipf(0.9) over 6,500 more (6,506 distinct in all; the largest
/// of them holds ~4%).
pub(crate) const TOP_COUNTERS: [(i32, f64); 6] = [
    (1_704_509, 0.083),
    (732_797, 0.080),
    (598_875, 0.077),
    (792_887, 0.074),
    (3_922, 0.071),
    (62, 0.0074 / (1.0 - 0.0007)),
];
/// Counters beyond the top ones.
pub(crate) const TAIL_COUNTERS: usize = 6_500;
/// Zipf exponent of the counters beyond the top ones.
pub(crate) const TAIL_COUNTER_ZIPF: f64 = 0.9;

/// AdvEngineID: 99.37% zero (Q2: 630,500 rows non-zero); SUM = 7,280,088 (Q3) gives a mean
/// of 11.55 over non-zero rows, met by 27 (37.8%), 2 (61%) and 16 rare values (1.2%).
pub(crate) const ADV_NONZERO_SHARE: f64 = 630_500.0 / FULL_ROWS;
/// Non-zero AdvEngineID values and weights.
pub(crate) const ADV_ENGINES: [(i16, f64); 18] = [
    (2, 0.616),
    (27, 0.372),
    (13, 0.002),
    (45, 0.001),
    (44, 0.001),
    (3, 0.001),
    (32, 0.001),
    (50, 0.0008),
    (41, 0.0007),
    (4, 0.0006),
    (12, 0.0005),
    (10, 0.0005),
    (15, 0.0004),
    (18, 0.0004),
    (31, 0.0003),
    (16, 0.0003),
    (9, 0.0002),
    (30, 0.0002),
];

/// ResolutionWidth (and height) of a user's screen, weighted so that AVG = ~1513.5.
pub(crate) const RESOLUTIONS: [(i16, i16, f64); 12] = [
    (1920, 1080, 0.22),
    (1366, 768, 0.29),
    (1280, 1024, 0.11),
    (1600, 900, 0.08),
    (1440, 900, 0.07),
    (1024, 768, 0.07),
    (1680, 1050, 0.06),
    (1536, 864, 0.03),
    (2560, 1440, 0.02),
    (1360, 768, 0.03),
    (360, 640, 0.01),
    (1093, 614, 0.01),
];

/// The share-weighted mean of [`RESOLUTIONS`] widths.
#[cfg(test)]
pub(crate) fn mean_resolution_width() -> f64 {
    let total: f64 = RESOLUTIONS.iter().map(|r| r.2).sum();
    RESOLUTIONS.iter().map(|r| r.0 as f64 * r.2).sum::<f64>() / total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phi_and_inverse() {
        for l in [0.01, 0.5, 1.0, 3.0, 6.9, 20.0] {
            assert!((inverse_phi(phi(l)) - l).abs() < 1e-6 * l.max(1.0), "λ={l}");
        }
        assert!((phi(20.0) - 0.05).abs() < 1e-6);
    }

    #[test]
    fn table_means() {
        let m = mean_resolution_width();
        assert!((m - 1513.5).abs() < 15.0, "mean width {m}");
        let w: f64 = ADV_ENGINES.iter().map(|a| a.1).sum();
        let mean: f64 = ADV_ENGINES.iter().map(|a| a.0 as f64 * a.1).sum::<f64>() / w;
        assert!((mean - 11.55).abs() < 0.3, "mean adv engine {mean}");
        let top10: f64 = TOP_REGIONS.iter().map(|r| r.1).sum();
        assert!((top10 - 0.425).abs() < 1e-9);
    }

    #[test]
    fn user_model_is_consistent() {
        let n = 1e6;
        let u = Users::solve(n);
        assert!((0.0..1.0).contains(&u.heavy_repeat), "{u:?}");
        assert!(u.heavy_phrase > 0.0 && u.heavy_phrase < 0.2, "{u:?}");
        assert!(
            (u.phrase_keys / n - USER_NONEMPTY_PHRASE_PER_ROW).abs() < 1e-3,
            "{u:?}"
        );
    }
}
