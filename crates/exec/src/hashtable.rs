//! The group hash table: open addressing with linear probing, convertible from one level
//! to two levels (radix partitions on the top hash bits, ClickHouse's
//! `TwoLevelHashTable`), storing each group's 64-bit hash so that resizing and merging
//! never rehash a key.
//!
//! ```text
//!  keys:    [k0, k1, k2, ...]         indexed by group id (gid), dense from 0
//!  hashes:  [h0, h1, h2, ...]         saved hash per group
//!  accs:    [Accumulator; aggregates] state per aggregate, indexed by gid
//!  parts:   1 (single level) or 2^8 (two level, partition = hash >> 56)
//!           slots: [u64; 2^k]  0 = empty, else (hash >> 32) << 32 | (gid + 1)
//!           groups: gids of the partition (two level only)
//! ```
//! A slot keeps 32 hash bits as a tag, so a probe touches a key only when the tags match.

use crate::accum::Accumulator;
use crate::keys::GroupKey;

/// log2 of the number of radix partitions of a two-level table.
pub(crate) const PARTITION_BITS: u32 = 8;
/// Number of radix partitions: 256 keeps a partition of 10M groups at ~40K groups, whose
/// slots and keys fit a 1 MiB L2 (Zen 4/5, Graviton 3/4), as in ClickHouse's two-level table.
pub(crate) const PARTITIONS: usize = 1 << PARTITION_BITS;
const MIN_SLOTS: usize = 16;

#[derive(Debug, Default)]
struct Part {
    slots: Vec<u64>,
    len: usize,
    groups: Vec<u32>,
}

impl Part {
    fn with_capacity(groups: usize) -> Self {
        let n = (groups * 2).next_power_of_two().max(MIN_SLOTS);
        Part { slots: vec![0; n], len: 0, groups: Vec::new() }
    }
}

/// Hash table from group key to dense group id, with the aggregate states of the groups.
#[derive(Debug)]
pub(crate) struct GroupTable<K> {
    pub(crate) keys: Vec<K>,
    pub(crate) hashes: Vec<u64>,
    pub(crate) accs: Vec<Accumulator>,
    parts: Vec<Part>,
    two_level: bool,
}

#[inline(always)]
fn partition_of(h: u64) -> usize {
    (h >> (64 - PARTITION_BITS)) as usize
}

#[inline(always)]
fn slot_word(h: u64, gid: u32) -> u64 {
    (h & 0xffff_ffff_0000_0000) | (gid as u64 + 1)
}

impl<K: GroupKey> GroupTable<K> {
    /// An empty single-level table sized for `groups` groups.
    pub(crate) fn new(accs: Vec<Accumulator>, groups: usize) -> Self {
        GroupTable {
            keys: Vec::with_capacity(groups),
            hashes: Vec::with_capacity(groups),
            accs,
            parts: vec![Part::with_capacity(groups)],
            two_level: false,
        }
    }

    /// Number of groups.
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    pub(crate) fn is_two_level(&self) -> bool {
        self.two_level
    }

    /// Bytes held by keys (inline part), hashes, slots and states.
    pub(crate) fn memory_size(&self) -> usize {
        self.keys.capacity() * std::mem::size_of::<K>()
            + self.hashes.capacity() * 8
            + self.parts.iter().map(|p| p.slots.capacity() * 8 + p.groups.capacity() * 4).sum::<usize>()
            + self.accs.iter().map(|a| a.memory_size()).sum::<usize>()
    }

    /// The group id of `key` (whose hash is `h`), inserting a new group if absent.
    /// New groups have no state until [`GroupTable::sync_accs`].
    #[inline]
    pub(crate) fn find_or_insert(&mut self, key: &K, h: u64) -> u32 {
        let p = if self.two_level { partition_of(h) } else { 0 };
        let part = &mut self.parts[p];
        let mask = part.slots.len() - 1;
        let tag = h >> 32;
        let mut i = h as usize & mask;
        loop {
            let s = part.slots[i];
            if s == 0 {
                break;
            }
            if s >> 32 == tag {
                let gid = (s as u32) - 1;
                if self.keys[gid as usize] == *key {
                    return gid;
                }
            }
            i = (i + 1) & mask;
        }
        let gid = self.keys.len() as u32;
        part.slots[i] = slot_word(h, gid);
        part.len += 1;
        if self.two_level {
            part.groups.push(gid);
        }
        self.keys.push(key.clone());
        self.hashes.push(h);
        if part.len * 2 > part.slots.len() {
            self.grow(p);
        }
        gid
    }

    /// Inserts a key known to be absent (merging disjoint inputs).
    #[inline]
    pub(crate) fn insert_new(&mut self, key: K, h: u64) -> u32 {
        let gid = self.keys.len() as u32;
        self.keys.push(key);
        self.hashes.push(h);
        let p = if self.two_level { partition_of(h) } else { 0 };
        self.place(p, h, gid);
        if self.two_level {
            self.parts[p].groups.push(gid);
        }
        if self.parts[p].len * 2 > self.parts[p].slots.len() {
            self.grow(p);
        }
        gid
    }

    fn place(&mut self, p: usize, h: u64, gid: u32) {
        let part = &mut self.parts[p];
        let mask = part.slots.len() - 1;
        let mut i = h as usize & mask;
        while part.slots[i] != 0 {
            i = (i + 1) & mask;
        }
        part.slots[i] = slot_word(h, gid);
        part.len += 1;
    }

    fn grow(&mut self, p: usize) {
        let new_len = self.parts[p].slots.len() * 2;
        let part = &mut self.parts[p];
        part.slots = vec![0; new_len];
        part.len = 0;
        let gids: Vec<u32> = if self.two_level {
            std::mem::take(&mut self.parts[p].groups)
        } else {
            (0..self.keys.len() as u32).collect()
        };
        for &g in &gids {
            self.place(p, self.hashes[g as usize], g);
        }
        if self.two_level {
            self.parts[p].groups = gids;
        }
    }

    /// Sizes every accumulator for the current number of groups.
    pub(crate) fn sync_accs(&mut self) {
        let n = self.keys.len();
        for a in &mut self.accs {
            a.resize(n);
        }
    }

    /// Switches to two levels: groups are redistributed into [`PARTITIONS`] partitions by
    /// the top bits of their hash. Group ids and states do not change.
    pub(crate) fn convert_to_two_level(&mut self) {
        if self.two_level {
            return;
        }
        let per_part = self.keys.len() / PARTITIONS + 1;
        self.parts = (0..PARTITIONS).map(|_| Part::with_capacity(per_part)).collect();
        self.two_level = true;
        for g in 0..self.keys.len() as u32 {
            let h = self.hashes[g as usize];
            let p = partition_of(h);
            self.place(p, h, g);
            self.parts[p].groups.push(g);
            if self.parts[p].len * 2 > self.parts[p].slots.len() {
                self.grow(p);
            }
        }
    }

    /// Group ids of partition `p` of a two-level table.
    pub(crate) fn partition_groups(&self, p: usize) -> &[u32] {
        debug_assert!(self.two_level);
        &self.parts[p].groups
    }

    /// Merges every group of `other` into `self` (single-level final phase).
    pub(crate) fn merge_from(&mut self, other: &GroupTable<K>) {
        let gids: Vec<u32> = (0..other.len() as u32).collect();
        self.merge_groups(other, &gids);
    }

    /// Merges groups `gids` of `other` into `self`: keys are looked up by their saved hash,
    /// states merged.
    pub(crate) fn merge_groups(&mut self, other: &GroupTable<K>, gids: &[u32]) {
        let mut pairs = Vec::with_capacity(gids.len());
        if self.is_empty() {
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

    fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}
