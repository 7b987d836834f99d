//! The group hash table: open addressing with linear probing over control bytes (a Swiss
//! table: abseil's `flat_hash_map`, hashbrown), storing each group's 64-bit hash so that
//! resizing and merging never rehash a key.
//!
//! ```text
//!  keys:    [k0, k1, k2, ...]         indexed by group id (gid), dense from 0
//!  hashes:  [h0, h1, h2, ...]         saved hash per group
//!  accs:    [Accumulator; aggregates] state per aggregate, indexed by gid
//!  ctrl:    [u8; 2^k], 64-aligned     EMPTY (0x80) or the slot's 7-bit tag
//!  slots:   [u64; 2^k]                check << 32 | gid, where ctrl is a tag: `check` is
//!                                     32 more hash bits ([`check_of`])
//! ```
//! A probe compares the tag with a group of control bytes at once (16 to 64 slots a step:
//! the kernel family's [`tessera_kernels::group::Group`], run through
//! [`Kernels::with_group`] once per batch of keys), then the slot's 32 check bits, and
//! touches a key only where both matched (a 7-bit tag alone let 1 in 128 slots of a probe
//! compare URL bytes: Q34 spent more in `memcmp`, measured); the first empty slot ends it. Probing is linear, so a key's slot does not depend
//! on the family: a table is laid out the same under every ISA, and the scalar twin
//! ([`Swar`], 8 slots a step) serves the single-key paths. Batches prefetch the control
//! bytes and slot (and a string key's bytes) of the key [`PREFETCH`] rows ahead, so the
//! cache misses of a table larger
//! than the cache overlap (group prefetching; ClickHouse PR 39304). At most 3/4 of the slots
//! are full: 9 bytes a slot, about 12 to 24 bytes a group (DuckDB keeps 16 salt bits beside
//! each entry's pointer the same way).
//! A two-level table (ClickHouse's `TwoLevelHashTable`) is one of these per radix
//! partition (the top 8 to 10 bits of the hash, [`Radix`]): each partition's keys and
//! states are contiguous, so merging partition `p` of several threads reads memory
//! sequentially and builds a table that fits in cache.

use tessera_common::Result;
use tessera_kernels::Kernels;
use tessera_kernels::group::{EMPTY, Group, GroupTask, MAX_WIDTH, Swar, tag_of};

use crate::accum::Accumulator;
use crate::keys::{GroupKey, KeyArena};
use crate::spill::{Dec, Enc, corrupt};

/// The radix partitioning of a two-level table: the top [`Radix::bits`] bits of a group's
/// hash choose its partition. One per query (every worker's partitions must match): 8 bits
/// (256 partitions, as in ClickHouse's two-level table) unless the query is expected to
/// hold more than [`Radix::GROUPS_PER_PARTITION`] groups a partition, then up to 10 bits,
/// so that a final table's slots and keys stay about the size of a 1 MiB L2 (Zen 4/5,
/// Graviton 3/4). More partitions cost the scatter: 10 bits made GROUP BYs of 10M rows
/// 10-60% slower, and the string-keyed Q17 / Q19 at 100M rows 26% / 31% faster (2 threads,
/// Zen 5; the aggregation asks for more bits for such keys only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Radix {
    bits: u32,
}

impl Radix {
    /// 256 partitions.
    pub(crate) const DEFAULT: Radix = Radix { bits: 8 };
    /// The most radix bits: the control-byte tag ([`tag_of`]) sits just below them.
    const MAX_BITS: u32 = 10;
    /// Groups a partition may be expected to hold before more partitions are used.
    pub(crate) const GROUPS_PER_PARTITION: usize = 1 << 16;

    /// The partitioning for about `groups` groups in all.
    pub(crate) fn for_groups(groups: usize) -> Radix {
        let mut bits = Radix::DEFAULT.bits;
        while bits < Radix::MAX_BITS && groups >> bits > Radix::GROUPS_PER_PARTITION {
            bits += 1;
        }
        Radix { bits }
    }

    /// The partitioning with `partitions` partitions (a power of two made by [`Radix`]).
    pub(crate) fn with_partitions(partitions: usize) -> Radix {
        Radix { bits: partitions.max(1).trailing_zeros() }
    }

    /// The partitioning with `bits` radix bits, held to 8..=10 (the setting
    /// `group_by_radix_bits` is checked where it is set; an embedding program may assign
    /// the field directly).
    pub(crate) fn with_bits(bits: u32) -> Radix {
        Radix { bits: bits.clamp(Radix::DEFAULT.bits, Radix::MAX_BITS) }
    }

    pub(crate) fn bits(self) -> u32 {
        self.bits
    }

    pub(crate) fn partitions(self) -> usize {
        1 << self.bits
    }

    /// The partition of a hash.
    #[inline(always)]
    pub(crate) fn of(self, h: u64) -> usize {
        (h >> (64 - self.bits)) as usize
    }
}
/// Fewest slots of a table: one line of control bytes ([`MAX_WIDTH`]), the widest group.
const MIN_SLOTS: usize = MAX_WIDTH;

/// Rows ahead whose home-slot control bytes and slot (and string key bytes: the lines of
/// their first and last byte) a batch probe prefetches. The final phase drains a partition's
/// scattered string keys, which point into the input column at random: 16 rows ahead with
/// both lines of an 88-byte URL made Q34 and Q35 12-18% faster than 8 rows with the first
/// line only (10M rows, 2 threads, AMD Zen 5; 32 measured the same as 16). (A deeper pipeline
/// that also read the likely group from the home slot and fetched its key and bytes measured
/// no faster on Q34 here: its `memcmp`s stayed. Tried again on 2026-12-06 for string keys
/// only, 8 rows ahead, and staged (the key's slice 8 rows ahead, its bytes 4): Q34 at 100M
/// rows from disk 5% faster (a worker's flushes probe tables whose URLs sit in a multi-GiB
/// arena: `memcmp` 28% -> 12% of the samples), but Q34 and Q35 at 10M in memory 4-40%
/// slower, alternated with the build without it; not kept. Tried once more on 2026-12-07 in
/// flushes only (home slot's candidate: its key slice 8 rows ahead, its bytes 4), with the
/// 1 GiB retention: Q34 at 100M from disk 6.76 / 7.67 -> 7.28 / 8.20 s, Q35 6.73 / 6.98 ->
/// 7.95 / 7.64, alternated; not kept.)
const PREFETCH: usize = 16;

/// Slots of a table small enough to stay in cache (4 KiB of control bytes, 32 KiB of slots):
/// its probes are not prefetched.
const CACHED_SLOTS: usize = 4096;

/// `n` copies of `v`, written now. (`vec![0; n]` maps the shared zero page lazily; the first
/// write to each page then takes a copy-on-write fault with a TLB-shootdown IPI, which
/// measured 20% of Q33's time.)
#[allow(clippy::slow_vector_initialization)] // reason: eager writing is the point, see above
fn filled<T: Copy>(n: usize, v: T) -> Vec<T> {
    let mut out = Vec::with_capacity(n);
    out.resize(n, v);
    out
}

/// The 32 hash bits a slot keeps beside its group id: bits 16..48, apart from the radix
/// partition's (54..64 at most), which every key of a partition shares, and all but the
/// last of the tag's (47..54).
#[inline(always)]
fn check_of(h: u64) -> u64 {
    (h >> 16) & 0xffff_ffff
}

/// A slot word: the hash's check bits and the group id.
#[inline(always)]
fn slot_word(h: u64, gid: u32) -> u64 {
    check_of(h) << 32 | gid as u64
}

/// 64 control bytes, cache-line aligned: a family's group (at most [`MAX_WIDTH`] = 64
/// slots, loaded at a multiple of its width) is always inside one line.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
struct CtrlLine([u8; MAX_WIDTH]);

/// Control bytes for `n` slots (a multiple of 64), all empty.
fn empty_ctrl(n: usize) -> Vec<CtrlLine> {
    filled(n / MAX_WIDTH, CtrlLine([EMPTY; MAX_WIDTH]))
}

/// Slots for `groups` groups at most 3/4 full.
fn slots_for(groups: usize) -> usize {
    (groups + groups / 3 + 1).next_power_of_two().max(MIN_SLOTS)
}

/// Hash table from group key to dense group id, with the aggregate states of the groups.
#[derive(Debug)]
pub(crate) struct GroupTable<K> {
    pub(crate) keys: Vec<K>,
    pub(crate) hashes: Vec<u64>,
    pub(crate) accs: Vec<Accumulator>,
    /// `slots.len()` control bytes, in cache lines.
    ctrl: Vec<CtrlLine>,
    slots: Vec<u64>,
    /// Heap bytes owned by `keys` ([`GroupKey::heap_bytes`]), kept as keys are added.
    key_heap: usize,
}

impl<K: GroupKey> GroupTable<K> {
    /// An empty table sized for `groups` groups without growing.
    pub(crate) fn new(mut accs: Vec<Accumulator>, groups: usize) -> Self {
        let n = slots_for(groups);
        for a in &mut accs {
            a.reserve(groups);
        }
        GroupTable {
            keys: Vec::with_capacity(groups),
            hashes: Vec::with_capacity(groups),
            accs,
            ctrl: empty_ctrl(n),
            slots: filled(n, 0),
            key_heap: 0,
        }
    }

    /// Number of groups.
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    /// Groups the table holds without growing its slots.
    pub(crate) fn capacity(&self) -> usize {
        self.slots.len() / 4 * 3
    }

    /// Bytes held by keys (inline part and heap), hashes, slots and states.
    pub(crate) fn memory_size(&self) -> usize {
        self.keys.capacity() * std::mem::size_of::<K>()
            + self.key_heap
            + self.hashes.capacity() * 8
            + self.ctrl.capacity() * MAX_WIDTH
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
        self.find_or_insert_in::<Swar>(key, h, store)
    }

    /// [`GroupTable::find_or_insert_with`] probing with group type `G`.
    #[inline(always)]
    fn find_or_insert_in<G: Group>(&mut self, key: &K, h: u64, store: impl FnOnce(&K) -> K) -> u32 {
        match self.probe::<G>(key, h) {
            Ok(gid) => gid,
            Err(empty) => self.insert_at(empty, store(key), h),
        }
    }

    /// Puts a new group for `key` (hash `h`) into empty slot `i`.
    #[inline(always)]
    fn insert_at(&mut self, i: usize, key: K, h: u64) -> u32 {
        let gid = self.keys.len() as u32;
        self.set_ctrl(i, tag_of(h));
        self.slots[i] = slot_word(h, gid);
        self.key_heap += key.heap_bytes();
        self.keys.push(key);
        self.hashes.push(h);
        if self.keys.len() > self.slots.len() / 4 * 3 {
            self.grow();
        }
        gid
    }

    /// Writes control byte `i`.
    #[inline(always)]
    fn set_ctrl(&mut self, i: usize, c: u8) {
        self.ctrl[i / MAX_WIDTH].0[i % MAX_WIDTH] = c;
    }

    /// Control byte `i`.
    #[inline(always)]
    fn ctrl_at(&self, i: usize) -> u8 {
        self.ctrl[i / MAX_WIDTH].0[i % MAX_WIDTH]
    }

    /// Linear probing from `h`'s home slot, a group of `G::WIDTH` control bytes a step:
    /// `Ok(group id)` of `key`, or `Err(slot)` of the empty slot where it would go. Only slots
    /// whose tag and check bits match (before the first empty one) have their key compared.
    /// Groups are loaded at multiples of their width, so a load never straddles a cache line
    /// (unaligned 64-byte groups touched two lines on nearly every probe and made AVX-512
    /// probes of tables past the cache slower than the 8-byte scalar ones: measured); the
    /// first group's slots before the home slot are masked off.
    #[inline(always)]
    fn probe<G: Group>(&self, key: &K, h: u64) -> std::result::Result<u32, usize> {
        let mask = self.slots.len() - 1;
        let tag = tag_of(h);
        let check = check_of(h);
        let home = h as usize & mask;
        let mut pos = home & !(G::WIDTH - 1);
        let mut skip = home - pos;
        loop {
            // SAFETY: 1. `pos` is a multiple of `G::WIDTH`, which divides `MAX_WIDTH`, so the
            // `G::WIDTH` bytes from `pos % MAX_WIDTH` lie inside line `pos / MAX_WIDTH`,
            // which exists because `pos <= mask` (bounds-checked index). 2. The family's
            // features were checked by `Kernels::with_group`, the only caller with a family's
            // `G` (`Swar` needs none).
            let group = unsafe { G::load(self.ctrl[pos / MAX_WIDTH].0.as_ptr().add(pos % MAX_WIDTH)) };
            let empty = unsafe { group.match_empty() }.from_slot(skip);
            let end = empty.lowest().unwrap_or(G::WIDTH);
            for bit in unsafe { group.match_tag(tag) }.from_slot(skip).below(end) {
                let s = self.slots[pos + bit];
                let gid = s as u32;
                if s >> 32 == check && self.keys[gid as usize].key_eq(key) {
                    return Ok(gid);
                }
            }
            if end < G::WIDTH {
                return Err(pos + end);
            }
            pos = (pos + G::WIDTH) & mask;
            skip = 0;
        }
    }

    /// Hints the CPU to fetch the control bytes and slot of `h`'s home slot.
    #[inline(always)]
    fn prefetch(&self, h: u64) {
        let i = h as usize & (self.slots.len() - 1);
        tessera_kernels::prefetch(&self.ctrl[i / MAX_WIDTH]);
        tessera_kernels::prefetch(&self.slots[i]);
    }

    /// Prefetches, for row `j` (`get(j)`: its key and hash), its home slot's control bytes
    /// and slot (unless the table is small enough to stay in cache: there the hints only
    /// cost, Q28 measured 7% slower), and the key's own bytes.
    #[inline(always)]
    fn prefetch_row<'k>(&self, j: usize, get: &impl Fn(usize) -> (&'k K, u64))
    where
        K: 'k,
    {
        let (k, h) = get(j);
        if self.slots.len() > CACHED_SLOTS {
            self.prefetch(h);
        }
        k.prefetch_bytes();
    }

    /// [`GroupTable::prefetch_row`] for the row [`PREFETCH`] rows ahead of row `i`.
    #[inline(always)]
    fn prefetch_ahead<'k>(&self, i: usize, n: usize, get: &impl Fn(usize) -> (&'k K, u64))
    where
        K: 'k,
    {
        if i + PREFETCH < n {
            self.prefetch_row(i + PREFETCH, get);
        }
    }

    /// [`GroupTable::prefetch_row`] for a batch's first rows, which no
    /// [`GroupTable::prefetch_ahead`] reaches.
    #[inline(always)]
    fn prefetch_first<'k>(&self, n: usize, get: &impl Fn(usize) -> (&'k K, u64))
    where
        K: 'k,
    {
        for j in 0..PREFETCH.min(n) {
            self.prefetch_row(j, get);
        }
    }

    /// The group id of every key (`keys[i]` with hash `hashes[i]`) appended to `gids`, new
    /// groups inserted with `store(key)` as their key: one [`Kernels::with_group`] dispatch
    /// for the batch, probes prefetched [`PREFETCH`] keys ahead.
    pub(crate) fn find_or_insert_batch(
        &mut self,
        keys: &[K],
        hashes: &[u64],
        kern: &Kernels,
        store: impl FnMut(&K) -> K,
        gids: &mut Vec<u32>,
    ) {
        let n = keys.len().min(hashes.len());
        self.find_or_insert_each(n, |i| (&keys[i], hashes[i]), kern, store, gids);
    }

    /// [`GroupTable::find_or_insert_batch`] over `n` keys given by `get(i)` (key and hash),
    /// which must not borrow this table.
    pub(crate) fn find_or_insert_each<'k>(
        &mut self,
        n: usize,
        get: impl Fn(usize) -> (&'k K, u64),
        kern: &Kernels,
        store: impl FnMut(&K) -> K,
        gids: &mut Vec<u32>,
    ) where
        K: 'k,
    {
        struct Task<'t, K, G, S> {
            t: &'t mut GroupTable<K>,
            n: usize,
            get: G,
            store: S,
            gids: &'t mut Vec<u32>,
        }
        impl<'k, K: GroupKey + 'k, G: Fn(usize) -> (&'k K, u64), S: FnMut(&K) -> K> GroupTask for Task<'_, K, G, S> {
            type Output = ();
            #[inline(always)]
            fn run<Gr: Group>(mut self) {
                self.gids.reserve(self.n);
                self.t.prefetch_first(self.n, &self.get);
                for i in 0..self.n {
                    self.t.prefetch_ahead(i, self.n, &self.get);
                    let (k, h) = (self.get)(i);
                    let g = self.t.find_or_insert_in::<Gr>(k, h, &mut self.store);
                    self.gids.push(g);
                }
            }
        }
        kern.with_group(Task { t: self, n, get, store, gids });
    }

    /// Looks up every key (`keys[i]` with hash `hashes[i]`): `hit(i, gid)` for those the
    /// table holds, `miss(i)` for the others, in order. One dispatch for the batch.
    pub(crate) fn find_batch(
        &self,
        keys: &[K],
        hashes: &[u64],
        kern: &Kernels,
        on: impl FnMut(usize, Option<u32>),
    ) {
        struct Task<'t, K, F> {
            t: &'t GroupTable<K>,
            keys: &'t [K],
            hashes: &'t [u64],
            on: F,
        }
        impl<K: GroupKey, F: FnMut(usize, Option<u32>)> GroupTask for Task<'_, K, F> {
            type Output = ();
            #[inline(always)]
            fn run<G: Group>(mut self) {
                let n = self.keys.len().min(self.hashes.len());
                let get = |j: usize| (&self.keys[j], self.hashes[j]);
                self.t.prefetch_first(n, &get);
                for i in 0..n {
                    self.t.prefetch_ahead(i, n, &get);
                    (self.on)(i, self.t.probe::<G>(&self.keys[i], self.hashes[i]).ok());
                }
            }
        }
        kern.with_group(Task { t: self, keys, hashes, on });
    }

    /// Inserts a key known to be absent (merging into an empty table).
    #[inline]
    pub(crate) fn insert_new(&mut self, key: K, h: u64) -> u32 {
        let i = self.empty_slot(h);
        self.insert_at(i, key, h)
    }

    /// The first empty slot from `h`'s home slot on (a byte scan: most are found at once).
    #[inline]
    fn empty_slot(&self, h: u64) -> usize {
        let mask = self.slots.len() - 1;
        let mut i = h as usize & mask;
        while self.ctrl_at(i) != EMPTY {
            i = (i + 1) & mask;
        }
        i
    }

    #[cold]
    fn grow(&mut self) {
        self.rebuild_slots(self.slots.len() * 2);
    }

    /// New control bytes and slots for `n` slots (a power of two) holding every group,
    /// placed by its saved hash.
    fn rebuild_slots(&mut self, n: usize) {
        self.ctrl = empty_ctrl(n);
        self.slots = filled(n, 0);
        for g in 0..self.keys.len() {
            let h = self.hashes[g];
            let i = self.empty_slot(h);
            self.set_ctrl(i, tag_of(h));
            self.slots[i] = slot_word(h, g as u32);
        }
    }

    /// Sizes every accumulator for the current number of groups.
    pub(crate) fn sync_accs(&mut self) {
        let n = self.keys.len();
        for a in &mut self.accs {
            a.resize(n);
        }
    }

    /// A table of the same keys (same hashes and group ids) with empty states `accs`.
    pub(crate) fn same_keys(&self, accs: Vec<Accumulator>) -> Self {
        let mut t = GroupTable::new(accs, self.len());
        for (k, &h) in self.keys.iter().zip(&self.hashes) {
            t.insert_new(k.clone(), h);
        }
        t.sync_accs();
        t
    }

    /// Splits the table into the partitions of `radix` by the top bits of the group hashes
    /// (single level to two level). `new_accs` makes empty states.
    pub(crate) fn split(self, radix: Radix, new_accs: &impl Fn() -> Vec<Accumulator>) -> Vec<GroupTable<K>> {
        let mut by_part: Vec<Vec<u32>> = vec![Vec::new(); radix.partitions()];
        for (g, &h) in self.hashes.iter().enumerate() {
            by_part[radix.of(h)].push(g as u32);
        }
        by_part
            .iter()
            .map(|gids| {
                let mut t = GroupTable::new(new_accs(), gids.len());
                // Into an empty table: inserts without probing, so no family is needed.
                t.merge_groups(&self, gids, Kernels::scalar());
                t
            })
            .collect()
    }

    /// Appends the table's groups (keys and states; not the hashes, which
    /// [`GroupTable::merge_encoded`] recomputes, nor the slots) to `out`, for a spill file.
    /// The hashes are 8 bytes a group that LZ4 cannot shrink, a third of Q19's spilled
    /// bytes; hashing the keys again took about the time that compressing, writing and
    /// reading them back did (30M rows under 1 GiB), with temporary files a third smaller.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        let mut e = Enc(out);
        e.put(self.len() as u64);
        K::encode_all(&self.keys, &mut e);
        for a in &self.accs {
            a.encode(&mut e);
        }
    }

    /// Merges the groups [`GroupTable::encode`] wrote into this table: keys are hashed
    /// and looked up a batch at a time with the kernels of `kern` (as
    /// [`GroupTable::merge_groups`]; inserted directly while the table is empty), states
    /// merged. `accs` are empty states of the query's aggregates; string key bytes are copied
    /// into `arena`.
    ///
    /// # Errors
    /// [`Error::Corrupt`] on bytes that do not decode to groups of these aggregates (the
    /// table is then unchanged).
    ///
    /// # Safety
    /// As [`GroupKey::decode`]: the table must not be used after `arena` is dropped.
    pub(crate) unsafe fn merge_encoded(
        &mut self,
        bytes: &[u8],
        mut accs: Vec<Accumulator>,
        arena: &mut KeyArena,
        kern: &Kernels,
    ) -> Result<()> {
        let mut d = Dec::new(bytes);
        // Every key encodes at least 8 bytes, except the unit key (no GROUP BY: one group,
        // whose states take a byte or more; a plan without aggregates never gets here, it
        // is answered by counting): bounds the count.
        let n = d.len(if std::mem::size_of::<K>() == 0 { 1 } else { 8 })?;
        let mut keys = Vec::new();
        // SAFETY: the caller does not use the table after `arena` is dropped.
        unsafe { K::decode_all(&mut d, n, arena, &mut keys)? };
        let mut hashes = Vec::with_capacity(n);
        K::hash_batch(&keys, kern, &mut hashes);
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
            let mut found = Vec::with_capacity(n);
            self.find_or_insert_each(n, |i| (&keys[i], hashes[i]), kern, K::clone, &mut found);
            pairs.extend(found.into_iter().zip(0..n as u32));
        }
        self.sync_accs();
        for (a, b) in self.accs.iter_mut().zip(&accs) {
            a.merge(&pairs, b);
        }
        Ok(())
    }

    /// Room for `n` more groups without growing: the slots are rebuilt once for them
    /// (when more are needed) and the keys, hashes and states reserved.
    pub(crate) fn reserve(&mut self, n: usize) {
        self.keys.reserve(n);
        self.hashes.reserve(n);
        for a in &mut self.accs {
            a.reserve(n);
        }
        let want = slots_for(self.keys.len() + n);
        if want > self.slots.len() {
            self.rebuild_slots(want);
        }
    }

    /// Merges every group of `other` into `self`.
    pub(crate) fn merge_from(&mut self, other: &GroupTable<K>, kern: &Kernels) {
        let gids: Vec<u32> = (0..other.len() as u32).collect();
        self.merge_groups(other, &gids, kern);
    }

    /// Merges groups `gids` of `other` into `self`: keys are looked up by their saved hash,
    /// states merged.
    pub(crate) fn merge_groups(&mut self, other: &GroupTable<K>, gids: &[u32], kern: &Kernels) {
        let mut pairs = Vec::with_capacity(gids.len());
        if self.keys.is_empty() {
            self.reserve(gids.len());
            for &g in gids {
                let d = self.insert_new(other.keys[g as usize].clone(), other.hashes[g as usize]);
                pairs.push((d, g));
            }
        } else {
            let mut found = Vec::with_capacity(gids.len());
            self.find_or_insert_each(gids.len(), |i| {
                let g = gids[i] as usize;
                (&other.keys[g], other.hashes[g])
            }, kern, K::clone, &mut found);
            pairs.extend(found.into_iter().zip(gids.iter().copied()));
        }
        self.sync_accs();
        for (a, b) in self.accs.iter_mut().zip(&other.accs) {
            a.merge(&pairs, b);
        }
    }
}

/// The group table for the probe benchmarks (`benches/probe.rs`): not an API.
#[doc(hidden)]
pub mod bench {
    use super::GroupTable;
    use crate::keys::GroupKey;
    use tessera_kernels::Kernels;

    /// A group table of distinct keys, without aggregates.
    pub struct ProbeTable<K>(GroupTable<K>);

    macro_rules! probe_table {
        ($($k:ty),*) => {$(
            impl ProbeTable<$k> {
                /// A table holding each of `keys` (distinct) as a group.
                pub fn build(keys: &[$k]) -> Self {
                    let mut t = GroupTable::new(Vec::new(), keys.len());
                    let hashes = Self::hashes(keys);
                    let mut gids = Vec::new();
                    t.find_or_insert_batch(keys, &hashes, Kernels::scalar(), |k| *k, &mut gids);
                    ProbeTable(t)
                }

                /// The keys' hashes, as the aggregation computes them.
                pub fn hashes(keys: &[$k]) -> Vec<u64> {
                    let mut out = Vec::new();
                    <$k as GroupKey>::hash_batch(keys, Kernels::scalar(), &mut out);
                    out
                }

                /// How many of `keys` the table holds, probed with family `kern`.
                pub fn lookup(&self, keys: &[$k], hashes: &[u64], kern: &Kernels) -> usize {
                    let mut hits = 0;
                    self.0.find_batch(keys, hashes, kern, |_, g| hits += g.is_some() as usize);
                    hits
                }

                /// Groups held.
                pub fn groups(&self) -> usize {
                    self.0.len()
                }
            }
        )*};
    }
    probe_table!(u64, u128, &'static [u8]);
}

#[cfg(test)]
mod tests {
    use super::Radix;

    /// 256 partitions up to 64K groups each, then more, at most 1,024; a partition is the
    /// top bits of the hash.
    #[test]
    fn radix_bits_follow_the_expected_groups() {
        assert_eq!(Radix::for_groups(0), Radix::DEFAULT);
        assert_eq!(Radix::for_groups(10_000_000).partitions(), 256);
        assert_eq!(Radix::for_groups(256 << 16).partitions(), 256);
        assert_eq!(Radix::for_groups(257 << 16).partitions(), 512);
        assert_eq!(Radix::for_groups(30_000_000).partitions(), 512);
        assert_eq!(Radix::for_groups(100_000_000).partitions(), 1024);
        assert_eq!(Radix::for_groups(usize::MAX).partitions(), 1024);
        assert_eq!(Radix::with_partitions(1024).bits(), 10);
        let r = Radix::with_partitions(512);
        assert_eq!((r.of(0), r.of(u64::MAX), r.of(1 << 63)), (0, 511, 256));
    }

    use super::*;
    use tessera_kernels::SimdLevel;

    /// splitmix64, fixed seed.
    fn keys(n: usize, seed: u64, distinct: u64) -> Vec<u64> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut z = x;
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                (z ^ (z >> 31)) % distinct
            })
            .collect()
    }

    /// Hashes with few distinct home slots and tags, so probes run long, wrap around the
    /// end of the table and meet many tag (and some check) collisions.
    fn crowded_hashes(keys: &[u64]) -> Vec<u64> {
        keys.iter().map(|&k| (k % 7) << 48 | (k % 3) << 16 | (k.wrapping_mul(0x9e37) % 61)).collect()
    }

    /// Every family builds the same table from the same keys (group ids, slots, control
    /// bytes) as the scalar twin and finds each key's group: the probe's results do not
    /// depend on the ISA. Normal hashes and crowded ones; tables that grow from empty, and
    /// lookups of present and absent keys.
    #[test]
    fn every_family_builds_the_same_table() {
        let fams: Vec<&Kernels> = SimdLevel::available().into_iter().map(|l| Kernels::for_level(l).unwrap()).collect();
        for (n, distinct, crowded) in [(0usize, 1u64, false), (1, 1, false), (200, 50, true), (5000, 3000, true), (40_000, 30_000, false)] {
            let ks = keys(n, n as u64 + 1, distinct);
            let hs: Vec<u64> = if crowded { crowded_hashes(&ks) } else { ks.iter().map(|k| k.hash64()).collect() };
            let mut reference: Option<(Vec<u32>, Vec<u64>, Vec<u8>)> = None;
            for fam in &fams {
                let mut t: GroupTable<u64> = GroupTable::new(Vec::new(), 0);
                let mut gids = Vec::new();
                // In morsel-sized batches, as the aggregation calls it.
                for (kc, hc) in ks.chunks(777).zip(hs.chunks(777)) {
                    t.find_or_insert_batch(kc, hc, fam, |k| *k, &mut gids);
                }
                // Same key, same group; group ids dense in first-seen order.
                let mut first: std::collections::HashMap<u64, u32> = std::collections::HashMap::new();
                for (k, &g) in ks.iter().zip(&gids) {
                    let next = first.len() as u32;
                    assert_eq!(*first.entry(*k).or_insert(next), g, "{} key {k}", fam.level);
                }
                assert_eq!(t.len(), first.len());
                let ctrl: Vec<u8> = (0..t.slots.len()).map(|i| t.ctrl_at(i)).collect();
                let got = (gids, t.slots.clone(), ctrl);
                match &reference {
                    None => reference = Some(got),
                    Some(r) => assert!(r == &got, "{} builds another table than scalar (n {n})", fam.level),
                }
                // Lookups: every key present, keys past `distinct` absent.
                let absent: Vec<u64> = ks.iter().map(|k| k + distinct).collect();
                let ah: Vec<u64> = if crowded { crowded_hashes(&absent) } else { absent.iter().map(|k| k.hash64()).collect() };
                let mut found = Vec::new();
                t.find_batch(&ks, &hs, fam, |_, g| found.push(g));
                assert!(found.iter().zip(&got_gids(&reference)).all(|(f, g)| *f == Some(*g)), "{}", fam.level);
                let mut missing = 0;
                t.find_batch(&absent, &ah, fam, |_, g| missing += g.is_none() as usize);
                assert_eq!(missing, absent.len(), "{} finds absent keys", fam.level);
            }
        }
    }

    /// String keys (`&[u8]`, ClickBench Q34's layout): every family groups them as the
    /// scalar twin does, with new keys copied into an arena as the aggregation stores them.
    /// Keys whose hash is another key's (same tag, same check bits) but whose bytes differ
    /// (one byte more, one byte changed, or empty against non-empty) are told apart by their
    /// bytes: found absent, or their own group. Lengths 0 to 200 bytes (past a 64-byte
    /// vector and a cache line), long shared prefixes.
    #[test]
    fn string_keys_are_compared_by_their_bytes() {
        let fams: Vec<&Kernels> = SimdLevel::available().into_iter().map(|l| Kernels::for_level(l).unwrap()).collect();
        for (n, distinct, crowded) in [(1usize, 1u64, false), (3000, 700, true), (40_000, 25_000, false), (20_000, 12_000, true)] {
            let ids = keys(n, n as u64 + 7, distinct);
            let text = |id: u64| -> Vec<u8> {
                let mut v = b"https://example.com/a/very/long/shared/prefix/".repeat((id % 4) as usize);
                v.extend_from_slice(format!("{id}").as_bytes());
                if id % 11 == 0 {
                    v.clear(); // the empty string: one group for all such ids
                }
                v
            };
            let owned: Vec<Vec<u8>> = ids.iter().map(|&i| text(i)).collect();
            let ks: Vec<&[u8]> = owned.iter().map(|v| v.as_slice()).collect();
            // Crowded: the hash comes from the id (one id for every empty text), so equal
            // texts share it, as equal keys' hashes do, and many distinct texts share tag and
            // check bits.
            let canon: Vec<u64> = ids.iter().map(|&i| if text(i).is_empty() { 0 } else { i }).collect();
            let hs: Vec<u64> = if crowded { crowded_hashes(&canon) } else { ks.iter().map(|k| k.hash64()).collect() };
            let mut reference: Option<Vec<u32>> = None;
            for fam in &fams {
                let mut arena = KeyArena::default();
                let mut t: GroupTable<&[u8]> = GroupTable::new(Vec::new(), 0);
                let mut gids = Vec::new();
                for (kc, hc) in ks.chunks(777).zip(hs.chunks(777)) {
                    // SAFETY: the arena outlives the table (both dropped at the end of this
                    // iteration, the table first).
                    t.find_or_insert_batch(kc, hc, fam, |k| unsafe { k.persist(&mut arena) }, &mut gids);
                }
                let mut first: std::collections::HashMap<&[u8], u32> = std::collections::HashMap::new();
                for (k, &g) in ks.iter().zip(&gids) {
                    let next = first.len() as u32;
                    assert_eq!(*first.entry(*k).or_insert(next), g, "{} key {:?}", fam.level, String::from_utf8_lossy(k));
                }
                assert_eq!(t.len(), first.len(), "{}", fam.level);
                match &reference {
                    None => reference = Some(gids.clone()),
                    Some(r) => assert_eq!(r, &gids, "{} groups otherwise than scalar (n {n})", fam.level),
                }
                // Same hash, other bytes: absent.
                let others: Vec<Vec<u8>> = ks
                    .iter()
                    .map(|k| match k.split_last() {
                        None => b"x".to_vec(),
                        Some((last, rest)) if k.len() % 2 == 0 => [rest, &[last ^ 1]].concat(),
                        Some(_) => [*k, b"/"].concat(),
                    })
                    .collect();
                let others: Vec<&[u8]> = others.iter().map(|v| v.as_slice()).collect();
                let mut found = Vec::new();
                t.find_batch(&ks, &hs, fam, |_, g| found.push(g));
                assert!(found.iter().zip(&gids).all(|(f, g)| *f == Some(*g)), "{}", fam.level);
                let mut wrong = 0;
                t.find_batch(&others, &hs, fam, |i, g| wrong += usize::from(g.is_some_and(|g| first.get(others[i]) != Some(&g))));
                assert_eq!(wrong, 0, "{} takes a key with the same hash and other bytes for another", fam.level);
            }
        }
    }

    fn got_gids(r: &Option<(Vec<u32>, Vec<u64>, Vec<u8>)>) -> Vec<u32> {
        r.as_ref().map(|r| r.0.clone()).unwrap_or_default()
    }
}
