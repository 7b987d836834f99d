//! The decoded-block cache: decoded granule runs (the arrays of one morsel of one column
//! of one part) kept between queries under a byte budget, so a repeated query over an
//! on-disk table skips decompression and decoding (ClickHouse's uncompressed cache, one
//! step further: the blocks are kept decoded, as Arrow arrays). A morsel of a sparse
//! column read for its non-zero rows only is kept as those rows and values (a struct, under
//! the column's sparse key: `snapshot::SPARSE_KEY`).
//!
//! Eviction is CLOCK-Pro-like (the `quick_cache` crate: hot and cold entries, frequency
//! aware, sharded, weighted by bytes). The budget is a hard bound on the bytes the cache
//! holds ([`BlockCache::bytes`] <= [`BlockCache::capacity`]); an array larger than a
//! shard's share of the budget is not cached, and a query puts less than half the budget of
//! any one column in (a scan of a column larger than the cache would cycle it all through,
//! evicting the hot columns; see `Snapshot::admits`). Parts are immutable and every opened part
//! gets a process-unique id, so an entry never goes stale: a merged-away part's entries
//! age out.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use arrow::array::{Array, ArrayRef};

/// Smallest default budget of a database's decoded-block cache: 2 GiB (see
/// [`default_block_cache_bytes`]).
pub const MIN_BLOCK_CACHE_BYTES: u64 = 2 << 30;

/// Default budget of a database's decoded-block cache: a quarter of the memory the process
/// may use (`tessera_common::physical_memory`: RAM, or the container's limit when lower),
/// at least [`MIN_BLOCK_CACHE_BYTES`] (2 GiB, also where it is unknown). The cache counts
/// against `max_server_memory_usage` and, under that cap, evicts what a query needs
/// ([`BlockCache::shed`]), so it takes memory the queries do not use (with the cap at 0, unlimited, it
/// keeps its budget). Measured on a 23.5 GiB VM, 100M rows of hits from
/// disk, all 43 ClickBench queries back to back: 40.3 and 44.5 s with 6 GiB against 47.5 s
/// with 2 GiB in two pairs of runs (the columns of Q11-Q15 and Q32 no longer evict each
/// other).
pub fn default_block_cache_bytes() -> u64 {
    tessera_common::physical_memory().map_or(MIN_BLOCK_CACHE_BYTES, |ram| (ram / 4).max(MIN_BLOCK_CACHE_BYTES))
}

/// Number of cache shards (independent locks); each holds up to `capacity / SHARDS` bytes.
const SHARDS: usize = 16;

/// Identity of a cached block: (part id, column, first granule, end granule); the column's
/// top bit set for its sparse reads.
pub(crate) type BlockKey = (u64, u32, u32, u32);

#[derive(Clone)]
struct Block {
    array: ArrayRef,
    bytes: u64,
}

#[derive(Clone)]
struct ByBytes;

impl quick_cache::Weighter<BlockKey, Block> for ByBytes {
    fn weight(&self, _key: &BlockKey, block: &Block) -> u64 {
        // Never 0: a zero-weight entry could not be evicted.
        block.bytes.max(1)
    }
}

/// A byte-bounded cache of decoded blocks, shared by the tables of one database.
pub struct BlockCache {
    cache: Option<quick_cache::sync::Cache<BlockKey, Block, ByBytes>>,
    capacity: u64,
    /// Replaced by another cache ([`BlockCache::retire`]): emptied, and takes nothing more.
    retired: AtomicBool,
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCache").field("capacity", &self.capacity).field("bytes", &self.bytes()).finish()
    }
}

impl BlockCache {
    /// A cache holding at most `capacity` bytes of decoded arrays (Arrow buffer sizes);
    /// 0 disables it.
    pub fn new(capacity: u64) -> Self {
        let cache = (capacity > 0).then(|| {
            // Blocks are big (a morsel of one column: 64 KiB to a few MiB), so few entries.
            let items = usize::try_from(capacity / (256 << 10)).unwrap_or(usize::MAX).clamp(16, 1 << 20);
            let options = quick_cache::OptionsBuilder::new()
                .estimated_items_capacity(items)
                .weight_capacity(capacity)
                .shards(SHARDS)
                .build()
                .expect("valid cache options");
            quick_cache::sync::Cache::with_options(options, ByBytes, Default::default(), Default::default())
        });
        BlockCache { cache, capacity, retired: AtomicBool::new(false) }
    }

    /// The budget in bytes (0: disabled).
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Bytes held now (at most [`BlockCache::capacity`]).
    pub fn bytes(&self) -> u64 {
        self.cache.as_ref().map_or(0, |c| c.weight())
    }

    /// (hits, misses) since the cache was made.
    pub fn hits_misses(&self) -> (u64, u64) {
        self.cache.as_ref().map_or((0, 0), |c| (c.hits(), c.misses()))
    }

    /// Whether arrays put in are kept: a budget above 0, and not retired.
    pub(crate) fn takes(&self) -> bool {
        self.cache.is_some() && !self.retired.load(Ordering::Relaxed)
    }

    /// Empties the cache for good: a cache that replaced it serves new queries, and the
    /// ones still running with this one (their snapshots hold it) neither find nor put
    /// anything here, so its bytes do not outlive the swap uncounted.
    pub fn retire(&self) {
        self.retired.store(true, Ordering::Relaxed);
        self.clear();
    }

    /// Evicts at least `bytes` (its coldest entries first: the eviction policy's order), and
    /// a thirty-second of the budget at least, so that a query growing near the server's cap
    /// does not ask again at every morsel; everything if it holds no more. The budget stays.
    pub fn shed(&self, bytes: u64) {
        let Some(c) = &self.cache else { return };
        // Shards round their share of a capacity up: up to SHARDS bytes more may stay.
        let keep = c.weight().saturating_sub(bytes.saturating_add(SHARDS as u64).max(self.capacity / 32));
        if keep == 0 {
            c.clear();
            return;
        }
        // Each shard evicts down to its share of `keep`, then gets its share of the
        // budget back.
        c.set_capacity(keep);
        c.set_capacity(self.capacity);
    }

    /// Drops every entry.
    pub fn clear(&self) {
        if let Some(c) = &self.cache {
            c.clear();
        }
    }

    pub(crate) fn get(&self, key: &BlockKey) -> Option<ArrayRef> {
        self.cache.as_ref()?.get(key).map(|b| b.array)
    }

    pub(crate) fn insert(&self, key: BlockKey, array: &ArrayRef) {
        if let Some(c) = self.cache.as_ref().filter(|_| self.takes()) {
            let bytes = array.get_array_memory_size() as u64;
            c.insert(key, Block { array: array.clone(), bytes });
        }
    }
}

/// A process-unique id for an opened part (the cache key's first field).
pub(crate) fn next_part_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::Int64Array;

    use super::*;

    #[test]
    fn never_exceeds_its_budget() {
        let cache = BlockCache::new(1 << 20);
        for i in 0..1000u32 {
            let a: ArrayRef = Arc::new(Int64Array::from(vec![i as i64; 1000 + (i as usize % 7) * 500]));
            cache.insert((1, i, 0, 8), &a);
            assert!(cache.bytes() <= cache.capacity(), "{} > {}", cache.bytes(), cache.capacity());
        }
        assert!(cache.bytes() > 0);
        let last: ArrayRef = Arc::new(Int64Array::from(vec![7i64; 10]));
        cache.insert((2, 0, 0, 1), &last);
        assert_eq!(cache.get(&(2, 0, 0, 1)).unwrap().as_ref(), last.as_ref());
        assert!(cache.get(&(3, 0, 0, 1)).is_none());
        // Shedding frees at least what is asked for, coldest first, and keeps the budget.
        let before = cache.bytes();
        cache.shed(before / 2);
        assert!(cache.bytes() <= before - before / 2, "{} of {before}", cache.bytes());
        assert!(cache.bytes() > 0);
        cache.insert((4, 0, 0, 1), &last);
        assert!(cache.get(&(4, 0, 0, 1)).is_some());
        cache.shed(u64::MAX);
        assert_eq!(cache.bytes(), 0);
        cache.insert((2, 0, 0, 1), &last);
        // A retired cache (replaced by `Store::set_block_cache_size`) is empty and takes
        // nothing more from the queries still holding it.
        cache.retire();
        assert_eq!(cache.bytes(), 0);
        cache.insert((2, 0, 0, 1), &last);
        assert!(cache.get(&(2, 0, 0, 1)).is_none());
        assert!(!cache.takes());
        let off = BlockCache::new(0);
        off.insert((2, 0, 0, 1), &last);
        assert!(off.get(&(2, 0, 0, 1)).is_none());
        assert_eq!(off.bytes(), 0);
    }
}
