//! The query condition cache: for a WHERE condition and a part, which granules held a row
//! where the condition was TRUE, as found by earlier queries (ClickHouse 25.3's query
//! condition cache, `use_query_condition_cache`). A later query with the same condition
//! reads only those granules: `URL LIKE '%google%'` (ClickBench Q21-Q24) decodes the URLs
//! of the granules with a Google URL, not of the whole table.
//!
//! Parts are immutable and every opened part has a process-unique id, so an entry never
//! goes stale (a merged-away part's entries age out). A condition is identified by a
//! 128-bit hash of its text; the executor records only conditions whose value depends on
//! the row alone (no general expression). Per part and condition an entry holds two bits
//! per granule (known, held), about 3 KB for the 12,208 granules of 100M rows of hits;
//! entries are evicted CLOCK-Pro-like under a byte budget (the `quick_cache` crate, as the
//! decoded-block cache).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Default budget of a database's query condition cache: 100 MiB (ClickHouse's
/// `query_condition_cache_size`).
pub const DEFAULT_CONDITION_CACHE_BYTES: u64 = 100 << 20;

/// Identity of an entry: (part id, condition hash).
type ConditionKey = (u64, u128);

/// Two bits per granule of one part for one condition, set (never cleared) by the queries
/// that evaluated the condition on whole granules.
#[derive(Debug)]
pub(crate) struct GranuleBits {
    /// Granules of the part.
    granules: usize,
    /// Bit `g`: the condition was evaluated on every row of granule `g`.
    known: Vec<AtomicU64>,
    /// Bit `g`: some row of granule `g` held the condition (only meaningful when known).
    held: Vec<AtomicU64>,
}

impl GranuleBits {
    fn new(granules: usize) -> Self {
        let words = granules.div_ceil(64);
        let bits = || (0..words).map(|_| AtomicU64::new(0)).collect();
        GranuleBits { granules, known: bits(), held: bits() }
    }

    fn bytes(&self) -> u64 {
        (self.known.len() * 16) as u64 + 64
    }

    /// Records granule `g`: evaluated, and whether a row held the condition. The held bit
    /// is set before the known bit, so a reader that sees "known" sees the held bit too.
    pub(crate) fn record(&self, g: usize, held: bool) {
        if g >= self.granules {
            return;
        }
        let (w, b) = (g / 64, 1u64 << (g % 64));
        if let (Some(k), Some(h)) = (self.known.get(w), self.held.get(w)) {
            if held {
                h.fetch_or(b, Ordering::Release);
            }
            k.fetch_or(b, Ordering::Release);
        }
    }

    /// `None` if granule `g` was never evaluated; else whether a row of it held the
    /// condition.
    pub(crate) fn get(&self, g: usize) -> Option<bool> {
        if g >= self.granules {
            return None;
        }
        let (w, b) = (g / 64, 1u64 << (g % 64));
        let k = self.known.get(w)?.load(Ordering::Acquire);
        (k & b != 0).then(|| self.held[w].load(Ordering::Acquire) & b != 0)
    }
}

#[derive(Clone)]
struct ByBytes;

impl quick_cache::Weighter<ConditionKey, Arc<GranuleBits>> for ByBytes {
    fn weight(&self, _key: &ConditionKey, bits: &Arc<GranuleBits>) -> u64 {
        bits.bytes()
    }
}

/// A byte-bounded cache of per-granule condition results, shared by the tables of one
/// database.
pub struct ConditionCache {
    cache: Option<quick_cache::sync::Cache<ConditionKey, Arc<GranuleBits>, ByBytes>>,
    capacity: u64,
}

impl std::fmt::Debug for ConditionCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConditionCache").field("capacity", &self.capacity).field("bytes", &self.bytes()).finish()
    }
}

impl ConditionCache {
    /// A cache holding at most `capacity` bytes of entries; 0 disables it.
    pub fn new(capacity: u64) -> Self {
        let cache = (capacity > 0).then(|| {
            let items = usize::try_from(capacity / 4096).unwrap_or(usize::MAX).clamp(16, 1 << 20);
            let options = quick_cache::OptionsBuilder::new()
                .estimated_items_capacity(items)
                .weight_capacity(capacity)
                .build()
                .expect("valid cache options");
            quick_cache::sync::Cache::with_options(options, ByBytes, Default::default(), Default::default())
        });
        ConditionCache { cache, capacity }
    }

    /// The budget in bytes (0: disabled).
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Bytes held now (at most [`ConditionCache::capacity`]).
    pub fn bytes(&self) -> u64 {
        self.cache.as_ref().map_or(0, |c| c.weight())
    }

    /// Drops every entry.
    pub fn clear(&self) {
        if let Some(c) = &self.cache {
            c.clear();
        }
    }

    /// The entry of (`part`, `condition`), if any.
    pub(crate) fn get(&self, part: u64, condition: u128) -> Option<Arc<GranuleBits>> {
        self.cache.as_ref()?.get(&(part, condition))
    }

    /// The entry of (`part`, `condition`), made empty for a part of `granules` granules if
    /// missing.
    pub(crate) fn entry(&self, part: u64, condition: u128, granules: usize) -> Option<Arc<GranuleBits>> {
        let c = self.cache.as_ref()?;
        c.get_or_insert_with(&(part, condition), || Ok::<_, ()>(Arc::new(GranuleBits::new(granules)))).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn granules_are_unknown_until_recorded() {
        let cache = ConditionCache::new(1 << 20);
        assert!(cache.get(1, 7).is_none());
        let e = cache.entry(1, 7, 130).unwrap();
        assert_eq!(e.get(0), None);
        e.record(0, false);
        e.record(129, true);
        e.record(130, true); // past the part: ignored
        let e = cache.get(1, 7).unwrap();
        assert_eq!((e.get(0), e.get(1), e.get(129), e.get(130)), (Some(false), None, Some(true), None));
        assert!(cache.get(1, 8).is_none() && cache.get(2, 7).is_none());
        assert!(cache.bytes() > 0 && cache.bytes() <= cache.capacity());
        let off = ConditionCache::new(0);
        assert!(off.entry(1, 7, 10).is_none() && off.get(1, 7).is_none());
    }

    #[test]
    fn never_exceeds_its_budget() {
        let cache = ConditionCache::new(64 << 10);
        for cond in 0..1000u128 {
            cache.entry(1, cond, 12_208).unwrap().record(5, true);
            assert!(cache.bytes() <= cache.capacity(), "{} > {}", cache.bytes(), cache.capacity());
        }
    }
}
