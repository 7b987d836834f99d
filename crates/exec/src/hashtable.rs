//! The group hash table: open addressing with linear probing, storing each group's
//! 64-bit hash so that resizing and merging never rehash a key.
//!
//! ```text
//!  keys:    [k0, k1, k2, ...]         indexed by group id (gid), dense from 0
//!  hashes:  [h0, h1, h2, ...]         saved hash per group
//!  accs:    [Accumulator; aggregates] state per aggregate, indexed by gid
//!  slots:   [u64; 2^k]                0 = empty, else (hash >> 32) << 32 | (gid + 1)
//! ```
//! A slot keeps 32 hash bits as a tag, so a probe touches a key only when the tags match.
//! A two-level table (ClickHouse's `TwoLevelHashTable`) is [`PARTITIONS`] of these, one per
//! radix partition (top [`PARTITION_BITS`] bits of the hash): each partition's keys and
//! states are contiguous, so merging partition `p` of several threads reads memory
//! sequentially and builds a table that fits in cache.

use tessera_common::Result;

use crate::accum::Accumulator;
use crate::keys::{GroupKey, KeyArena};
use crate::spill::{Dec, Enc, corrupt};

/// log2 of the number of radix partitions of a two-level table.
pub(crate) const PARTITION_BITS: u32 = 8;
/// Number of radix partitions: 256 keeps a partition of 10M groups at ~40K groups, whose
/// slots and keys fit a 1 MiB L2 (Zen 4/5, Graviton 3/4), as in ClickHouse's two-level table.
pub(crate) const PARTITIONS: usize = 1 << PARTITION_BITS;
const MIN_SLOTS: usize = 16;

/// `n` zero words, written now. (`vec![0; n]` maps the shared zero page lazily; the first
/// write to each page then takes a copy-on-write fault with a TLB-shootdown IPI, which
/// measured 20% of Q33's time.)
#[allow(clippy::slow_vector_initialization)] // reason: eager zeroing is the point, see above
fn zeroed(n: usize) -> Vec<u64> {
    let mut v = Vec::with_capacity(n);
    v.resize(n, 0);
    v
}

/// Partition of a hash in a two-level table.
#[inline(always)]
pub(crate) fn partition_of(h: u64) -> usize {
    (h >> (64 - PARTITION_BITS)) as usize
}

#[inline(always)]
fn slot_word(h: u64, gid: u32) -> u64 {
    (h & 0xffff_ffff_0000_0000) | (gid as u64 + 1)
}

/// Hash table from group key to dense group id, with the aggregate states of the groups.
#[derive(Debug)]
pub(crate) struct GroupTable<K> {
    pub(crate) keys: Vec<K>,
    pub(crate) hashes: Vec<u64>,
    pub(crate) accs: Vec<Accumulator>,
    slots: Vec<u64>,
    /// Heap bytes owned by `keys` ([`GroupKey::heap_bytes`]), kept as keys are added.
    key_heap: usize,
}

impl<K: GroupKey> GroupTable<K> {
    /// An empty table sized for `groups` groups without growing.
    pub(crate) fn new(mut accs: Vec<Accumulator>, groups: usize) -> Self {
        let n = (groups * 2).next_power_of_two().max(MIN_SLOTS);
        for a in &mut accs {
            a.reserve(groups);
        }
        GroupTable {
            keys: Vec::with_capacity(groups),
            hashes: Vec::with_capacity(groups),
            accs,
            slots: zeroed(n),
            key_heap: 0,
        }
    }

    /// Number of groups.
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    /// Bytes held by keys (inline part and heap), hashes, slots and states.
    pub(crate) fn memory_size(&self) -> usize {
        self.keys.capacity() * std::mem::size_of::<K>()
            + self.key_heap
            + self.hashes.capacity() * 8
            + self.slots.capacity() * 8
            + self.accs.iter().map(|a| a.memory_size()).sum::<usize>()
    }

    /// The group id of `key` (whose hash is `h`), inserting a new group if absent.
    /// New groups have no state until [`GroupTable::sync_accs`].
    #[inline]
    pub(crate) fn find_or_insert(&mut self, key: &K, h: u64) -> u32 {
        self.find_or_insert_with(key, h, K::clone)
    }

    /// [`GroupTable::find_or_insert`] storing `store(key)` for a new group (a key that
    /// borrows the input stores its arena copy, [`GroupKey::persist`]).
    #[inline]
    pub(crate) fn find_or_insert_with(&mut self, key: &K, h: u64, store: impl FnOnce(&K) -> K) -> u32 {
        let i = match self.probe(key, h) {
            Ok(gid) => return gid,
            Err(empty) => empty,
        };
        let gid = self.keys.len() as u32;
        self.slots[i] = slot_word(h, gid);
        self.key_heap += key.heap_bytes();
        self.keys.push(store(key));
        self.hashes.push(h);
        if self.keys.len() * 2 > self.slots.len() {
            self.grow();
        }
        gid
    }

    /// The group id of `key` (whose hash is `h`), if the table holds it.
    #[inline]
    pub(crate) fn find(&self, key: &K, h: u64) -> Option<u32> {
        self.probe(key, h).ok()
    }

    /// Linear probing from `h`'s home slot: `Ok(group id)` of `key`, or `Err(slot)` of the
    /// empty slot where it would go. Slots compare the hash's top 32 bits before the key.
    #[inline(always)]
    fn probe(&self, key: &K, h: u64) -> std::result::Result<u32, usize> {
        let mask = self.slots.len() - 1;
        let tag = h >> 32;
        let mut i = h as usize & mask;
        loop {
            let s = self.slots[i];
            if s == 0 {
                return Err(i);
            }
            if s >> 32 == tag {
                let gid = (s as u32) - 1;
                if self.keys[gid as usize].key_eq(key) {
                    return Ok(gid);
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// Inserts a key known to be absent (merging into an empty table).
    #[inline]
    pub(crate) fn insert_new(&mut self, key: K, h: u64) -> u32 {
        let gid = self.keys.len() as u32;
        self.key_heap += key.heap_bytes();
        self.keys.push(key);
        self.hashes.push(h);
        self.place(h, gid);
        if self.keys.len() * 2 > self.slots.len() {
            self.grow();
        }
        gid
    }

    #[inline]
    fn place(&mut self, h: u64, gid: u32) {
        let mask = self.slots.len() - 1;
        let mut i = h as usize & mask;
        while self.slots[i] != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i] = slot_word(h, gid);
    }

    fn grow(&mut self) {
        self.rebuild_slots(self.slots.len() * 2);
    }

    /// A new slot array of `n` slots (a power of two) holding every group, placed by its
    /// saved hash.
    fn rebuild_slots(&mut self, n: usize) {
        self.slots = zeroed(n);
        for g in 0..self.keys.len() {
            self.place(self.hashes[g], g as u32);
        }
    }

    /// Sizes every accumulator for the current number of groups.
    pub(crate) fn sync_accs(&mut self) {
        let n = self.keys.len();
        for a in &mut self.accs {
            a.resize(n);
        }
    }

    /// Splits the table into [`PARTITIONS`] tables by the top bits of the group hashes
    /// (single level to two level). `new_accs` makes empty states.
    pub(crate) fn split(self, new_accs: &impl Fn() -> Vec<Accumulator>) -> Vec<GroupTable<K>> {
        let mut by_part: Vec<Vec<u32>> = vec![Vec::new(); PARTITIONS];
        for (g, &h) in self.hashes.iter().enumerate() {
            by_part[partition_of(h)].push(g as u32);
        }
        by_part
            .iter()
            .map(|gids| {
                let mut t = GroupTable::new(new_accs(), gids.len());
                t.merge_groups(&self, gids);
                t
            })
            .collect()
    }

    /// Appends the table's groups (keys, hashes, states; not the slots) to `out`, for a
    /// spill file.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        let mut e = Enc(out);
        e.put(self.len() as u64);
        for k in &self.keys {
            k.encode(&mut e);
        }
        e.slice(&self.hashes);
        for a in &self.accs {
            a.encode(&mut e);
        }
    }

    /// Merges the groups [`GroupTable::encode`] wrote into this table: keys are looked up
    /// by their saved hash (inserted directly while the table is empty), states merged. `accs`
    /// are empty states of the query's aggregates; string key bytes are copied into `arena`.
    ///
    /// # Errors
    /// [`Error::Corrupt`] on bytes that do not decode to groups of these aggregates (the
    /// table is then unchanged).
    ///
    /// # Safety
    /// As [`GroupKey::decode`]: the table must not be used after `arena` is dropped.
    pub(crate) unsafe fn merge_encoded(&mut self, bytes: &[u8], mut accs: Vec<Accumulator>, arena: &mut KeyArena) -> Result<()> {
        let mut d = Dec::new(bytes);
        // Each group has a hash of 8 bytes after the keys: bounds the count.
        let n = d.len(8)?;
        let mut keys = Vec::with_capacity(n);
        for _ in 0..n {
            // SAFETY: the caller does not use the table after `arena` is dropped.
            keys.push(unsafe { K::decode(&mut d, arena)? });
        }
        let hashes: Vec<u64> = d.slice()?;
        if hashes.len() != n {
            return Err(corrupt(format!("{n} keys but {} hashes", hashes.len())));
        }
        for a in &mut accs {
            a.decode(&mut d, n)?;
        }
        if !d.is_empty() {
            return Err(corrupt("bytes left after the last aggregate state".into()));
        }
        let mut pairs = Vec::with_capacity(n);
        if self.keys.is_empty() {
            self.reserve(n);
            for (g, (k, h)) in keys.into_iter().zip(hashes).enumerate() {
                pairs.push((self.insert_new(k, h), g as u32));
            }
        } else {
            for (g, (k, &h)) in keys.iter().zip(&hashes).enumerate() {
                pairs.push((self.find_or_insert(k, h), g as u32));
            }
        }
        self.sync_accs();
        for (a, b) in self.accs.iter_mut().zip(&accs) {
            a.merge(&pairs, b);
        }
        Ok(())
    }

    /// Room for `n` more groups without growing.
    fn reserve(&mut self, n: usize) {
        self.keys.reserve(n);
        self.hashes.reserve(n);
        for a in &mut self.accs {
            a.reserve(n);
        }
        let want = ((self.keys.len() + n) * 2).next_power_of_two();
        if want > self.slots.len() {
            self.rebuild_slots(want);
        }
    }

    /// Merges every group of `other` into `self`.
    pub(crate) fn merge_from(&mut self, other: &GroupTable<K>) {
        let gids: Vec<u32> = (0..other.len() as u32).collect();
        self.merge_groups(other, &gids);
    }

    /// Merges groups `gids` of `other` into `self`: keys are looked up by their saved hash,
    /// states merged.
    pub(crate) fn merge_groups(&mut self, other: &GroupTable<K>, gids: &[u32]) {
        let mut pairs = Vec::with_capacity(gids.len());
        if self.keys.is_empty() {
            for &g in gids {
                let d = self.insert_new(other.keys[g as usize].clone(), other.hashes[g as usize]);
                pairs.push((d, g));
            }
        } else {
            for &g in gids {
                let d = self.find_or_insert(&other.keys[g as usize], other.hashes[g as usize]);
                pairs.push((d, g));
            }
        }
        self.sync_accs();
        for (a, b) in self.accs.iter_mut().zip(&other.accs) {
            a.merge(&pairs, b);
        }
    }
}
