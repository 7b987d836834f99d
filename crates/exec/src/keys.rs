//! Group-key layouts, chosen once per query from the key types (ClickHouse
//! `AggregatedDataVariants`): the hash table is specialised on the key representation.
//!
//! | layout       | keys                                    | key type        |
//! |--------------|-----------------------------------------|-----------------|
//! | `Unit`       | none (`SELECT COUNT(*) FROM t`)         | `()`            |
//! | `Fixed64`    | fixed-width keys of <= 64 bits in total | `u64`           |
//! | `Fixed128`   | fixed-width keys of <= 128 bits (Q33)   | `u128`          |
//! | `Str`        | one string key (Q34)                    | `&[u8]` (input) |
//! | `FixedStr`   | fixed keys <= 128 bits + one string (Q19) | `(u128, &[u8])` |
//! | `Serialized` | anything else, or keys with NULLs       | `Box<[u8]>`     |
//! | `Hash128`    | one string key, counted only (`COUNT(DISTINCT s)`) | `u128`  |
//! | `LazyStr`    | one string key, top-N answer (Q34)      | [`LazyKey`]     |
//!
//! Fixed-width keys are packed side by side: key `i` occupies bits
//! `shift_i .. shift_i + width_i` of the integer, holding the value's bit pattern
//! (two's complement for signed ints, IEEE bits of the canonical float for floats: -0.0 folded
//! into 0.0, every NaN into one, see `tessera_common::float`).
//! String keys borrow the input column's bytes while a morsel is worked on; a key that
//! becomes a group (or a scattered row) is copied into the worker's [`KeyArena`] first, so
//! no table points into a morsel and morsels are dropped after use: the memory of a string
//! GROUP BY grows with its groups, not with the rows read.

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::*;
use tessera_common::float::{canonical_f32, canonical_f64};
use tessera_common::{Error, Result};
use tessera_kernels::{Kernels, hash128_bytes, hash_bytes, hash_u64, hash_u128};

use crate::accum::OrdVal;
use crate::filter::string_parts;
use crate::plan::ScalarExpr;
use crate::spill::{Dec, Enc};

/// A group key: cloneable, comparable, hashable to 64 bits.
pub(crate) trait GroupKey: Clone + PartialEq + Send + Sync {
    /// Whether the key borrows the input's bytes ([`GroupKey::persist`] copies them).
    const BORROWS: bool = false;

    /// Whether scattered rows keep their key's hash. Fixed-width keys do not: rehashing
    /// them in the final phase (a few instructions a key, vectorised) costs less than
    /// writing and reading 8 bytes a row more through the radix partitions, which is what
    /// bounds the scatter.
    const SCATTER_HASH: bool = true;

    fn hash64(&self) -> u64;

    /// `out = keys.map(hash64)`, a batch at a time with the query's kernel family (equal
    /// to [`GroupKey::hash64`] key by key: every family computes the same function).
    fn hash_batch(keys: &[Self], _kern: &Kernels, out: &mut Vec<u64>) {
        out.clear();
        out.extend(keys.iter().map(|k| k.hash64()));
    }

    /// Key equality (the hash table's probe compare).
    #[inline(always)]
    fn key_eq(&self, other: &Self) -> bool {
        self == other
    }

    /// Whether the key carries the position of a row holding it ([`LazyKey`]), set by
    /// [`GroupKey::set_row`] after extraction.
    const ROW: bool = false;

    /// Sets the row position the key carries (`morsel << 32 | row in the morsel`); a no-op
    /// for keys that carry none.
    #[inline(always)]
    fn set_row(&mut self, _row: u64) {}

    /// Bytes the key owns on the heap besides its inline `size_of::<Self>()` (counted in
    /// the query's memory; keys that borrow the input own none).
    #[inline(always)]
    fn heap_bytes(&self) -> usize {
        0
    }

    /// The key to store in a table or radix buffer that outlives the current morsel: the
    /// key itself, or for keys that borrow the input, a copy of the borrowed bytes in `arena`.
    ///
    /// # Safety
    /// The returned key may point into `arena`: the caller must not use it (or a clone)
    /// after `arena` is dropped.
    #[inline(always)]
    unsafe fn persist(&self, _arena: &mut KeyArena) -> Self {
        self.clone()
    }

    /// Hints the CPU to fetch the bytes the key points to (string keys), ahead of a compare.
    #[inline(always)]
    fn prefetch_bytes(&self) {}

    /// The packed fixed-width keys, for the fixed layouts (`Fixed64`, `Fixed128`).
    #[inline(always)]
    fn packed(&self) -> Option<u128> {
        None
    }

    /// Appends the key to a spill buffer (external GROUP BY).
    fn encode(&self, out: &mut Enc<'_>);

    /// Reads a key [`GroupKey::encode`] wrote; the bytes of a borrowing key are copied into
    /// `arena`.
    ///
    /// # Errors
    /// [`tessera_common::Error::Corrupt`] on truncated bytes.
    ///
    /// # Safety
    /// As [`GroupKey::persist`]: the key may point into `arena`, so the caller must not use
    /// it (or a clone) after `arena` is dropped.
    unsafe fn decode(d: &mut Dec<'_>, arena: &mut KeyArena) -> Result<Self>;

    /// Appends `keys` to a spill buffer: [`GroupKey::encode`] of each, or (fixed-width
    /// layouts) the values in one go.
    fn encode_all(keys: &[Self], out: &mut Enc<'_>) {
        for k in keys {
            k.encode(out);
        }
    }

    /// Appends to `keys` the `n` keys [`GroupKey::encode_all`] wrote.
    ///
    /// # Errors
    /// [`tessera_common::Error::Corrupt`] on truncated bytes.
    ///
    /// # Safety
    /// As [`GroupKey::decode`].
    unsafe fn decode_all(d: &mut Dec<'_>, n: usize, arena: &mut KeyArena, keys: &mut Vec<Self>) -> Result<()> {
        keys.reserve(n);
        for _ in 0..n {
            // SAFETY: the caller's contract is `decode`'s.
            keys.push(unsafe { Self::decode(d, arena)? });
        }
        Ok(())
    }
}

/// [`GroupKey::encode_all`] and [`GroupKey::decode_all`] of a fixed-width key type: one
/// length-prefixed vector of values.
macro_rules! fixed_key_io {
    () => {
        fn encode_all(keys: &[Self], out: &mut Enc<'_>) {
            out.slice(keys);
        }
        unsafe fn decode_all(d: &mut Dec<'_>, n: usize, _: &mut KeyArena, keys: &mut Vec<Self>) -> Result<()> {
            let v: Vec<Self> = d.slice()?;
            if v.len() != n {
                return Err(crate::spill::corrupt(format!("{} keys where {n} were written", v.len())));
            }
            keys.extend_from_slice(&v);
            Ok(())
        }
    };
}

/// Append-only byte arena for string group keys (ClickHouse's `Arena` behind its string
/// hash tables): a new group's key bytes are copied here once, so the hash table does not
/// keep the input's morsels alive. Chunks are allocated at their final capacity and never
/// reallocated, so a copy stays at its address until the arena is dropped; moving the arena
/// moves no bytes. Chunks double from 64 KiB to 1 MiB; a longer key gets its own chunk.
#[derive(Debug, Default)]
pub(crate) struct KeyArena {
    chunks: Vec<Vec<u8>>,
    /// Capacity of all chunks, in bytes.
    bytes: usize,
}

impl KeyArena {
    const MIN_CHUNK: usize = 64 << 10;
    const MAX_CHUNK: usize = 1 << 20;

    /// Bytes allocated by the arena (capacity of its chunks).
    pub(crate) fn memory_size(&self) -> usize {
        self.bytes
    }

    /// Copies `b` into the arena and returns the copy with any lifetime.
    ///
    /// # Safety
    /// The caller must not use the returned slice after the arena is dropped.
    #[inline]
    pub(crate) unsafe fn copy<'a>(&mut self, b: &[u8]) -> &'a [u8] {
        if b.is_empty() {
            return &[];
        }
        let fits = self.chunks.last().is_some_and(|c| c.capacity() - c.len() >= b.len());
        if !fits {
            let next = self.chunks.last().map_or(Self::MIN_CHUNK, |c| (c.capacity() * 2).min(Self::MAX_CHUNK));
            let chunk: Vec<u8> = Vec::with_capacity(next.max(b.len()));
            self.bytes += chunk.capacity();
            self.chunks.push(chunk);
        }
        let chunk = self.chunks.last_mut().expect("a chunk with room was just ensured");
        let start = chunk.len();
        // Never past the capacity (checked above), so the chunk's buffer is not reallocated.
        chunk.extend_from_slice(b);
        let copy = &chunk[start..];
        // SAFETY: the bytes live in the chunk's heap buffer, which is never reallocated
        // (every append fits its capacity) nor freed before the arena is dropped, and moving
        // the arena or its `chunks` vector does not move it; the caller promises not to use
        // the slice after the arena is dropped.
        unsafe { std::slice::from_raw_parts(copy.as_ptr(), copy.len()) }
    }
}

/// Byte-string equality with the empty string (87% of SearchPhrase) and the length
/// mismatch decided inline, without a `memcmp` call.
#[inline(always)]
fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && (a.is_empty() || a == b)
}

/// Hints the CPU to fetch the cache lines of `b`'s first and last byte (an 88-byte URL
/// straddles two lines: prefetching only the first left the compare waiting for the second).
#[inline(always)]
fn prefetch_slice(b: &[u8]) {
    if let Some(last) = b.len().checked_sub(1) {
        tessera_kernels::prefetch(b.as_ptr());
        tessera_kernels::prefetch(b.as_ptr().wrapping_add(last));
    }
}

impl GroupKey for () {
    const SCATTER_HASH: bool = false;
    #[inline]
    fn hash64(&self) -> u64 {
        0
    }
    fn encode(&self, _: &mut Enc<'_>) {}
    unsafe fn decode(_: &mut Dec<'_>, _: &mut KeyArena) -> Result<Self> {
        Ok(())
    }
}
/// Resizes `out` to `n` hashes.
fn sized(out: &mut Vec<u64>, n: usize) -> &mut [u64] {
    out.clear();
    out.resize(n, 0);
    out
}

impl GroupKey for u64 {
    const SCATTER_HASH: bool = false;
    #[inline]
    fn hash64(&self) -> u64 {
        hash_u64(*self)
    }
    #[inline(always)]
    fn packed(&self) -> Option<u128> {
        Some(*self as u128)
    }
    fn hash_batch(keys: &[Self], kern: &Kernels, out: &mut Vec<u64>) {
        (kern.hash_u64)(keys, sized(out, keys.len()));
    }
    fn encode(&self, out: &mut Enc<'_>) {
        out.put(*self);
    }
    unsafe fn decode(d: &mut Dec<'_>, _: &mut KeyArena) -> Result<Self> {
        d.get()
    }
    fixed_key_io!();
}
impl GroupKey for u128 {
    const SCATTER_HASH: bool = false;
    #[inline]
    fn hash64(&self) -> u64 {
        hash_u128(*self)
    }
    #[inline(always)]
    fn packed(&self) -> Option<u128> {
        Some(*self)
    }
    fn hash_batch(keys: &[Self], kern: &Kernels, out: &mut Vec<u64>) {
        (kern.hash_u128)(keys, sized(out, keys.len()));
    }
    fn encode(&self, out: &mut Enc<'_>) {
        out.put(*self);
    }
    unsafe fn decode(d: &mut Dec<'_>, _: &mut KeyArena) -> Result<Self> {
        d.get()
    }
    fixed_key_io!();
}
impl GroupKey for &[u8] {
    const BORROWS: bool = true;
    #[inline(always)]
    fn prefetch_bytes(&self) {
        prefetch_slice(self);
    }
    #[inline]
    fn hash64(&self) -> u64 {
        hash_bytes(self)
    }
    fn hash_batch(keys: &[Self], kern: &Kernels, out: &mut Vec<u64>) {
        (kern.hash_strs)(keys, sized(out, keys.len()));
    }
    #[inline(always)]
    fn key_eq(&self, other: &Self) -> bool {
        bytes_eq(self, other)
    }
    #[inline(always)]
    unsafe fn persist(&self, arena: &mut KeyArena) -> Self {
        // SAFETY: the caller's contract (not used after `arena` is dropped) is `copy`'s.
        unsafe { arena.copy(self) }
    }
    fn encode(&self, out: &mut Enc<'_>) {
        out.bytes(self);
    }
    unsafe fn decode(d: &mut Dec<'_>, arena: &mut KeyArena) -> Result<Self> {
        let b = d.bytes()?;
        // SAFETY: the caller's contract (not used after `arena` is dropped) is `copy`'s.
        Ok(unsafe { arena.copy(b) })
    }
}
impl GroupKey for (u128, &[u8]) {
    const BORROWS: bool = true;
    #[inline(always)]
    fn prefetch_bytes(&self) {
        prefetch_slice(self.1);
    }
    #[inline]
    fn hash64(&self) -> u64 {
        let hs = hash_bytes(self.1) as u128;
        hash_u128(self.0 ^ (hs << 64 | hs))
    }
    fn hash_batch(keys: &[Self], kern: &Kernels, out: &mut Vec<u64>) {
        thread_local! {
            /// Reused per worker thread: the fixed parts mixed with the string hashes.
            static MIXED: std::cell::RefCell<Vec<u128>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        let out = sized(out, keys.len());
        // The string hash is one function in every family (per string), so hash inline.
        for (o, k) in out.iter_mut().zip(keys) {
            *o = hash_bytes(k.1);
        }
        MIXED.with_borrow_mut(|mixed| {
            mixed.clear();
            mixed.extend(keys.iter().zip(out.iter()).map(|(k, &h)| k.0 ^ ((h as u128) << 64 | h as u128)));
            (kern.hash_u128)(mixed, out);
        });
    }
    #[inline(always)]
    fn key_eq(&self, other: &Self) -> bool {
        self.0 == other.0 && bytes_eq(self.1, other.1)
    }
    #[inline(always)]
    unsafe fn persist(&self, arena: &mut KeyArena) -> Self {
        // SAFETY: the caller's contract (not used after `arena` is dropped) is `copy`'s.
        (self.0, unsafe { arena.copy(self.1) })
    }
    fn encode(&self, out: &mut Enc<'_>) {
        out.put(self.0);
        out.bytes(self.1);
    }
    unsafe fn decode(d: &mut Dec<'_>, arena: &mut KeyArena) -> Result<Self> {
        let fixed = d.get()?;
        let b = d.bytes()?;
        // SAFETY: the caller's contract (not used after `arena` is dropped) is `copy`'s.
        Ok((fixed, unsafe { arena.copy(b) }))
    }
}
impl GroupKey for Box<[u8]> {
    /// A serialized key lives in its own allocation, away from its row's neighbours.
    #[inline(always)]
    fn prefetch_bytes(&self) {
        prefetch_slice(self);
    }
    #[inline]
    fn hash64(&self) -> u64 {
        hash_bytes(self)
    }

    /// The allocation, rounded up to the allocator's 16-byte size classes.
    #[inline(always)]
    fn heap_bytes(&self) -> usize {
        self.len().next_multiple_of(16)
    }
    fn encode(&self, out: &mut Enc<'_>) {
        out.bytes(self);
    }
    unsafe fn decode(d: &mut Dec<'_>, _: &mut KeyArena) -> Result<Self> {
        Ok(d.bytes()?.into())
    }
}

/// One group key of a query with its packing.
#[derive(Debug, Clone)]
pub(crate) struct KeySpec {
    pub(crate) expr: ScalarExpr,
    pub(crate) dtype: DataType,
    /// Bits in the packed integer; 0 for strings.
    pub(crate) width: u32,
    pub(crate) shift: u32,
}

fn fixed_width(dt: &DataType) -> Option<u32> {
    use DataType::*;
    Some(match dt {
        Int8 | UInt8 => 8,
        Int16 | UInt16 => 16,
        Int32 | UInt32 | Date32 | Float32 => 32,
        Int64 | UInt64 | Float64 | Timestamp(_, _) => 64,
        _ => return None,
    })
}

/// The layout chosen for a query's keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    Unit,
    Fixed64,
    Fixed128,
    Str,
    FixedStr,
    Serialized,
    /// One string key kept as its 128-bit hash, not its bytes (ClickHouse's `uniqExact`
    /// does the same for strings): for a GROUP BY whose answer is only its number of groups
    /// (`COUNT(DISTINCT s)`); the keys cannot be given back. Never chosen by
    /// [`choose_layout`].
    Hash128,
    /// One string key (a table column without NULLs) kept as its 128-bit hash and a row
    /// holding it ([`LazyKey`]): for a GROUP BY whose answer is a few top-N rows, whose
    /// strings are then read back from the table by row (see
    /// `Settings::group_by_lazy_string_keys`). Never chosen by [`choose_layout`].
    LazyStr,
}

/// The key of [`Layout::LazyStr`]: a string's 128-bit hash ([`hash128_bytes`]), big-endian
/// so that keys compare bytewise as their hashes, then the position of one row holding the
/// string (`morsel << 32 | row in the morsel`, little-endian). Keys are equal when their
/// hashes are: the row is the group's payload (the first one its table saw; any row of the
/// group holds the same string), from which the answer reads the group's string back
/// ([`LazyKey::row_of`]). As bytes ([`LazyKey::bytes`]) it is the key's value in the
/// aggregation's output until then: ties on the ORDER BY are broken by the hash.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LazyKey([u8; LazyKey::LEN]);

impl LazyKey {
    /// Bytes of a key: 16 of hash, 8 of row position.
    pub(crate) const LEN: usize = 24;

    fn new(hash: u128) -> Self {
        let mut b = [0u8; LazyKey::LEN];
        b[..16].copy_from_slice(&hash.to_be_bytes());
        LazyKey(b)
    }

    #[inline(always)]
    fn hash(&self) -> u128 {
        u128::from_be_bytes(self.0[..16].try_into().expect("16 bytes"))
    }

    /// The key's bytes: its value in the aggregation's output before the strings are read.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0
    }

    /// The morsel and the row in it that the key's [`LazyKey::bytes`] name; `None` when
    /// `bytes` are not a key's.
    pub(crate) fn row_of(bytes: &[u8]) -> Option<(usize, u32)> {
        let pos = u64::from_le_bytes(bytes.get(16..LazyKey::LEN)?.try_into().ok()?);
        (bytes.len() == LazyKey::LEN).then_some(((pos >> 32) as usize, pos as u32))
    }
}

impl PartialEq for LazyKey {
    #[inline(always)]
    fn eq(&self, other: &Self) -> bool {
        self.hash() == other.hash()
    }
}

impl GroupKey for LazyKey {
    const SCATTER_HASH: bool = false;
    const ROW: bool = true;
    /// The hash's low 64 bits: already a string hash's, so not hashed again.
    #[inline(always)]
    fn hash64(&self) -> u64 {
        self.hash() as u64
    }
    #[inline(always)]
    fn set_row(&mut self, row: u64) {
        self.0[16..].copy_from_slice(&row.to_le_bytes());
    }
    fn encode(&self, out: &mut Enc<'_>) {
        out.put(self.hash());
        out.put(u64::from_le_bytes(self.0[16..].try_into().expect("8 bytes")));
    }
    unsafe fn decode(d: &mut Dec<'_>, _: &mut KeyArena) -> Result<Self> {
        let mut k = LazyKey::new(d.get()?);
        k.set_row(d.get()?);
        Ok(k)
    }
}

/// The [`Layout::Hash128`] key of a NULL string.
pub(crate) const NULL_HASH: u128 = 0;

impl Layout {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Layout::Unit => "unit",
            Layout::Fixed64 => "fixed64",
            Layout::Fixed128 => "fixed128",
            Layout::Str => "string",
            Layout::FixedStr => "fixed128+string",
            Layout::Serialized => "serialized",
            Layout::Hash128 => "hash128",
            Layout::LazyStr => "hash128+row",
        }
    }
}

/// Computes the packing of `keys` and picks the layout. `has_nulls[i]` says whether key
/// `i`'s column holds any NULL; `force_serialized` selects the generic layout (tests).
pub(crate) fn choose_layout(
    keys: &[(ScalarExpr, DataType)],
    has_nulls: &[bool],
    force_serialized: bool,
) -> (Layout, Vec<KeySpec>) {
    let mut specs = Vec::with_capacity(keys.len());
    let mut shift = 0u32;
    let mut strings = 0;
    for (expr, dt) in keys {
        let width = match expr {
            ScalarExpr::Minute(_) => 8,
            ScalarExpr::Column(_) | ScalarExpr::Computed(_) => fixed_width(dt).unwrap_or(0),
        };
        if width == 0 {
            strings += 1;
        }
        specs.push(KeySpec { expr: *expr, dtype: dt.clone(), width, shift });
        shift += width;
    }
    let layout = if keys.is_empty() {
        Layout::Unit
    } else if force_serialized || has_nulls.iter().any(|&n| n) || strings > 1 || shift > 128 {
        Layout::Serialized
    } else if strings == 1 && shift == 0 {
        Layout::Str
    } else if strings == 1 {
        Layout::FixedStr
    } else if shift <= 64 {
        Layout::Fixed64
    } else {
        Layout::Fixed128
    };
    (layout, specs)
}

/// Reads the key values of one morsel: `arrs[k]` is the morsel's array of key `k`'s column.
///
/// `'a` is the lifetime string keys (`&'a [u8]`) are handed out with: the bytes belong to
/// the morsel's arrays, and the aggregation uses such a key only while the morsel is
/// worked on; what a table or radix buffer keeps is the key's copy in a [`KeyArena`]
/// ([`GroupKey::persist`]; see `aggregate::run`).
pub(crate) struct KeyReader<'a> {
    pub(crate) specs: Vec<KeySpec>,
    /// The query's kernel family.
    pub(crate) kern: &'static Kernels,
    pub(crate) borrow: std::marker::PhantomData<&'a [u8]>,
}

impl<'a> KeyReader<'a> {
    /// Raw fixed-width bit patterns of key `k` for the selected rows of the morsel,
    /// zero-extended to u64.
    fn raws(&self, k: usize, arrs: &[&ArrayRef], sel: Option<&[u32]>, out: &mut Vec<u64>) {
        out.clear();
        let arr = arrs[k];
        macro_rules! go {
            ($t:ty, $conv:expr) => {{
                let v = arr.as_primitive::<$t>().values();
                let f = $conv;
                match sel {
                    None => out.extend(v.iter().map(|&x| f(x))),
                    Some(s) => out.extend(s.iter().map(|&i| f(v[i as usize]))),
                }
            }};
        }
        if let ScalarExpr::Minute(_) = self.specs[k].expr {
            let ts = arr.as_primitive::<TimestampSecondType>().values();
            let mut mins = Vec::new();
            match sel {
                None => (self.kern.minute_of_hour)(ts, &mut mins),
                Some(s) => {
                    let g: Vec<i64> = s.iter().map(|&i| ts[i as usize]).collect();
                    (self.kern.minute_of_hour)(&g, &mut mins)
                }
            }
            out.extend(mins.iter().map(|&m| m as u64));
            return;
        }
        match arr.data_type() {
            DataType::Int8 => go!(Int8Type, |x: i8| x as u8 as u64),
            DataType::Int16 => go!(Int16Type, |x: i16| x as u16 as u64),
            DataType::Int32 => go!(Int32Type, |x: i32| x as u32 as u64),
            DataType::Int64 => go!(Int64Type, |x: i64| x as u64),
            DataType::UInt8 => go!(UInt8Type, |x: u8| x as u64),
            DataType::UInt16 => go!(UInt16Type, |x: u16| x as u64),
            DataType::UInt32 => go!(UInt32Type, |x: u32| x as u64),
            DataType::UInt64 => go!(UInt64Type, |x: u64| x),
            DataType::Date32 => go!(Date32Type, |x: i32| x as u32 as u64),
            DataType::Timestamp(_, _) => go!(TimestampSecondType, |x: i64| x as u64),
            DataType::Float32 => go!(Float32Type, |x: f32| canonical_f32(x).to_bits() as u64),
            DataType::Float64 => go!(Float64Type, |x: f64| canonical_f64(x).to_bits()),
            _ => unreachable!("fixed key of string type"),
        }
    }

    fn string_index(&self) -> usize {
        self.specs.iter().position(|s| s.width == 0).expect("layout has a string key")
    }

    /// The string values of key `k` for the selected rows, with the reader's lifetime.
    ///
    /// The slices point into `arrs[k]`'s value buffer; the caller drops every slice taken
    /// before the array is dropped.
    fn strings(&self, k: usize, arrs: &[&ArrayRef], sel: Option<&[u32]>, out: &mut Vec<&'a [u8]>) {
        let (offsets, data) = string_parts(arrs[k]);
        // SAFETY: `data` lives in an Arrow buffer on the heap, owned (shared) by `arrs[k]`;
        // moving or cloning the `ArrayRef` never moves it. `aggregate::run` (the only
        // caller, through the extractors) holds the key arrays of the morsel while it uses
        // these slices, stores only their arena copies ([`GroupKey::persist`]) in tables and
        // radix buffers, and clears its key scratch vector before the arrays are dropped;
        // so no slice with lifetime `'a` is used after its buffer is freed.
        let data: &'a [u8] = unsafe { std::slice::from_raw_parts(data.as_ptr(), data.len()) };
        let get = |i: usize| &data[offsets[i] as usize..offsets[i + 1] as usize];
        match sel {
            None => out.extend((0..offsets.len() - 1).map(get)),
            Some(s) => out.extend(s.iter().map(|&i| get(i as usize))),
        }
    }

    /// Packed fixed keys (<= 64 bits) of the selected rows of the morsel.
    pub(crate) fn fixed64(&self, arrs: &[&ArrayRef], sel: Option<&[u32]>, n: usize, out: &mut Vec<u64>) {
        out.clear();
        out.resize(n, 0);
        let mut raws = Vec::with_capacity(n);
        for (k, spec) in self.specs.iter().enumerate() {
            self.raws(k, arrs, sel, &mut raws);
            for (o, &r) in out.iter_mut().zip(&raws) {
                *o |= r << spec.shift;
            }
        }
    }

    /// Packed fixed keys (<= 128 bits; string keys skipped) of the morsel.
    pub(crate) fn fixed128(&self, arrs: &[&ArrayRef], sel: Option<&[u32]>, n: usize, out: &mut Vec<u128>) {
        out.clear();
        out.resize(n, 0);
        let mut raws = Vec::with_capacity(n);
        for (k, spec) in self.specs.iter().enumerate() {
            if spec.width == 0 {
                continue;
            }
            self.raws(k, arrs, sel, &mut raws);
            for (o, &r) in out.iter_mut().zip(&raws) {
                *o |= (r as u128) << spec.shift;
            }
        }
    }

    /// `out = wrap(hash)` of the 128-bit hash ([`hash128_bytes`]) of the single string key
    /// of each of the morsel's selected rows (NULLs hash as their empty values).
    fn string_hashes<T>(&self, arrs: &[&ArrayRef], sel: Option<&[u32]>, n: usize, out: &mut Vec<T>, wrap: impl Fn(u128) -> T) {
        let (offsets, data) = string_parts(arrs[self.string_index()]);
        let hash = |i: usize| wrap(hash128_bytes(&data[offsets[i] as usize..offsets[i + 1] as usize]));
        out.clear();
        out.reserve(n);
        match sel {
            None => out.extend((0..offsets.len() - 1).map(hash)),
            Some(s) => out.extend(s.iter().map(|&i| hash(i as usize))),
        }
    }

    /// The 128-bit hashes of the single string key of the morsel's selected rows, NULL as
    /// [`NULL_HASH`] (a string hashing to it is taken as 1): the keys of [`Layout::Hash128`].
    pub(crate) fn hash128(&self, arrs: &[&ArrayRef], sel: Option<&[u32]>, n: usize, out: &mut Vec<u128>) {
        self.string_hashes(arrs, sel, n, out, |h| if h == NULL_HASH { 1 } else { h });
        let arr = arrs[self.string_index()];
        if let Some(nulls) = arr.logical_nulls().filter(|b| b.null_count() > 0) {
            for (i, o) in out.iter_mut().enumerate() {
                if nulls.is_null(sel.map_or(i, |s| s[i] as usize)) {
                    *o = NULL_HASH;
                }
            }
        }
    }

    /// The [`LazyKey`]s of the single string key (no NULLs) of the morsel's selected rows,
    /// their rows not yet set ([`GroupKey::set_row`]).
    pub(crate) fn lazy_str(&self, arrs: &[&ArrayRef], sel: Option<&[u32]>, n: usize, out: &mut Vec<LazyKey>) {
        self.string_hashes(arrs, sel, n, out, LazyKey::new);
    }

    /// The single string key of the morsel.
    pub(crate) fn string(&self, arrs: &[&ArrayRef], sel: Option<&[u32]>, out: &mut Vec<&'a [u8]>) {
        out.clear();
        self.strings(self.string_index(), arrs, sel, out);
    }

    /// Fixed part + string key of the morsel.
    pub(crate) fn fixed_string(&self, arrs: &[&ArrayRef], sel: Option<&[u32]>, n: usize, out: &mut Vec<(u128, &'a [u8])>) {
        let mut fixed = Vec::new();
        self.fixed128(arrs, sel, n, &mut fixed);
        let mut strs = Vec::with_capacity(n);
        self.string(arrs, sel, &mut strs);
        out.clear();
        out.extend(fixed.into_iter().zip(strs));
    }

    /// Serialized keys: per key a validity byte, then 8 bytes (fixed) or a u32 length and
    /// the bytes (string), little endian.
    pub(crate) fn serialized(&self, arrs: &[&ArrayRef], sel: Option<&[u32]>, n: usize, out: &mut Vec<Box<[u8]>>) {
        // Every key column of the batch is read first, so that each row's key is allocated
        // once at its final length (growing it key by key reallocated each row several
        // times, and the final boxing once more: half of Q40's aggregation time).
        enum Values<'v> {
            Fixed(Vec<u64>),
            Bytes(Vec<&'v [u8]>),
        }
        let row = |i: usize| sel.map_or(i, |s| s[i] as usize);
        let mut lens = vec![0usize; n];
        let mut cols = Vec::with_capacity(self.specs.len());
        for (k, spec) in self.specs.iter().enumerate() {
            let nulls = arrs[k].logical_nulls();
            let is_valid = |i: usize| nulls.as_ref().is_none_or(|nb| nb.is_valid(row(i)));
            let values = if spec.width == 0 {
                let mut strs = Vec::with_capacity(n);
                self.strings(k, arrs, sel, &mut strs);
                for (i, l) in lens.iter_mut().enumerate() {
                    *l += 1 + if is_valid(i) { 4 + strs[i].len() } else { 0 };
                }
                Values::Bytes(strs)
            } else {
                let mut raws = Vec::with_capacity(n);
                self.raws(k, arrs, sel, &mut raws);
                for (i, l) in lens.iter_mut().enumerate() {
                    *l += 1 + if is_valid(i) { 8 } else { 0 };
                }
                Values::Fixed(raws)
            };
            cols.push((values, nulls));
        }
        out.clear();
        out.extend(lens.iter().enumerate().map(|(i, &len)| {
            let mut b = Vec::with_capacity(len);
            for (values, nulls) in &cols {
                if nulls.as_ref().is_some_and(|nb| nb.is_null(row(i))) {
                    b.push(0);
                    continue;
                }
                b.push(1);
                match values {
                    Values::Fixed(raws) => b.extend_from_slice(&raws[i].to_le_bytes()),
                    Values::Bytes(strs) => {
                        b.extend_from_slice(&(strs[i].len() as u32).to_le_bytes());
                        b.extend_from_slice(strs[i]);
                    }
                }
            }
            debug_assert_eq!(b.len(), len);
            b.into_boxed_slice()
        }));
    }

    /// Value of key `k` from its raw bit pattern.
    pub(crate) fn raw_value(&self, k: usize, raw: u64) -> OrdVal<'static> {
        let spec = &self.specs[k];
        match spec.dtype {
            DataType::Float32 => OrdVal::Float(f32::from_bits(raw as u32) as f64),
            DataType::Float64 => OrdVal::Float(f64::from_bits(raw)),
            DataType::Int8 => OrdVal::Int(raw as u8 as i8 as i128),
            DataType::Int16 => OrdVal::Int(raw as u16 as i16 as i128),
            DataType::Int32 | DataType::Date32 => OrdVal::Int(raw as u32 as i32 as i128),
            DataType::Int64 | DataType::Timestamp(_, _) => OrdVal::Int(raw as i64 as i128),
            _ => OrdVal::Int(raw as i128),
        }
    }

    /// Value of key `k` inside a packed fixed key.
    pub(crate) fn packed_value(&self, k: usize, packed: u128) -> OrdVal<'static> {
        let spec = &self.specs[k];
        let mask = if spec.width == 64 { u64::MAX } else { (1u64 << spec.width) - 1 };
        self.raw_value(k, (packed >> spec.shift) as u64 & mask)
    }

    /// Value of key `k` inside a serialized key.
    pub(crate) fn serialized_value<'k>(&self, k: usize, key: &'k [u8]) -> OrdVal<'k> {
        let mut pos = 0;
        for (i, spec) in self.specs.iter().enumerate() {
            let valid = key[pos] == 1;
            pos += 1;
            let (len, body) = if !valid {
                (0, 0)
            } else if spec.width == 0 {
                let l = u32::from_le_bytes(key[pos..pos + 4].try_into().expect("4 bytes")) as usize;
                (4 + l, 4)
            } else {
                (8, 0)
            };
            if i == k {
                return if !valid {
                    OrdVal::Null
                } else if spec.width == 0 {
                    OrdVal::Bytes(&key[pos + body..pos + len])
                } else {
                    self.raw_value(k, u64::from_le_bytes(key[pos..pos + 8].try_into().expect("8 bytes")))
                };
            }
            pos += len;
        }
        OrdVal::Null
    }
}

/// Group keys that break the ties of a top-N (ORDER BY an aggregate, then group keys), read
/// straight from a packed fixed-width key: each key's bits mapped to a word whose unsigned
/// order is the key's sort order (signed integers with the sign bit flipped, floats'
/// canonical bits to the order of `tessera_common::float`, NaN last; descending keys
/// inverted), compared key by key. Q33's groups nearly all
/// have `COUNT(*) = 1`, so almost every group ties with the worst candidate of its top-N:
/// one integer compare instead of decoding and comparing each key as a sort value.
#[derive(Debug, Clone)]
pub(crate) struct TieKey {
    parts: Vec<TiePart>,
}

/// One key of a [`TieKey`]: where it sits in the packed key and how its bits map to order.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TiePart {
    shift: u32,
    /// The key's `width` low bits.
    mask: u64,
    /// The key's top bit (its sign bit).
    sign: u64,
    float: bool,
    /// XOR applied last: the sign bit for signed integers, all bits for DESC (both cancel).
    flip: u64,
}

impl TiePart {
    /// The key's bits in `packed`, mapped so that unsigned order is sort order.
    #[inline(always)]
    fn of(&self, packed: u128) -> u64 {
        if !self.float {
            return self.of_int(packed);
        }
        let v = (packed >> self.shift) as u64 & self.mask;
        let v = if v & self.sign != 0 { !v & self.mask } else { v | self.sign };
        v ^ self.flip
    }

    /// [`TiePart::of`] of an integer key (not float): no branch.
    #[inline(always)]
    pub(crate) fn of_int(&self, packed: u128) -> u64 {
        ((packed >> self.shift) as u64 & self.mask) ^ self.flip
    }
}

impl TieKey {
    /// The tie key of group keys `keys` (index into `specs`, descending) in that order;
    /// `None` unless every one is fixed-width.
    pub(crate) fn new(specs: &[KeySpec], keys: &[(usize, bool)]) -> Option<TieKey> {
        let mut parts = Vec::with_capacity(keys.len());
        for &(k, desc) in keys {
            let spec = specs.get(k)?;
            if spec.width == 0 || spec.width > 64 {
                return None;
            }
            let mask = if spec.width == 64 { u64::MAX } else { (1u64 << spec.width) - 1 };
            let sign = 1u64 << (spec.width - 1);
            let float = matches!(spec.dtype, DataType::Float32 | DataType::Float64);
            let signed = matches!(
                spec.dtype,
                DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 | DataType::Date32 | DataType::Timestamp(_, _)
            );
            let flip = if signed { sign } else { 0 } ^ if desc { mask } else { 0 };
            parts.push(TiePart { shift: spec.shift, mask, sign, float, flip });
        }
        (!parts.is_empty()).then_some(TieKey { parts })
    }

    /// The order key of packed key `packed`, one word per key ([`TieKey::cmp`] compares
    /// a packed key with it).
    pub(crate) fn of(&self, packed: u128) -> Vec<u64> {
        self.parts.iter().map(|p| p.of(packed)).collect()
    }

    /// The first key when it is an integer (not float): its [`TiePart::of_int`] equals
    /// [`TieKey::first_of`] with no branch.
    pub(crate) fn first_int(&self) -> Option<TiePart> {
        let p = self.parts[0];
        (!p.float).then_some(p)
    }

    /// The first word of [`TieKey::of`] (the first key's order bits).
    #[inline(always)]
    pub(crate) fn first_of(&self, packed: u128) -> u64 {
        self.parts[0].of(packed)
    }

    /// The order of packed key `packed` against the order key `other` ([`TieKey::of`]):
    /// most groups differ in the first key, so one word is mapped and compared.
    #[inline]
    pub(crate) fn cmp(&self, packed: u128, other: &[u64]) -> std::cmp::Ordering {
        for (p, &o) in self.parts.iter().zip(other) {
            let c = p.of(packed).cmp(&o);
            if c.is_ne() {
                return c;
            }
        }
        std::cmp::Ordering::Equal
    }
}

/// Builds an output column of type `dt` from key values.
///
/// # Errors
/// [`Error::Internal`] on a value that does not fit `dt` (a packing bug).
pub(crate) fn key_array(dt: &DataType, vals: &[OrdVal<'_>]) -> Result<ArrayRef> {
    use arrow::array::*;
    use std::sync::Arc;
    Ok(match dt {
        DataType::Utf8 | DataType::Binary => {
            let bin: BinaryArray = vals
                .iter()
                .map(|v| match v {
                    OrdVal::Bytes(b) => Some(*b),
                    _ => None,
                })
                .collect();
            if *dt == DataType::Utf8 {
                arrow::compute::cast(&bin, &DataType::Utf8)?
            } else {
                Arc::new(bin)
            }
        }
        DataType::Float32 | DataType::Float64 => {
            let a: ArrayRef = Arc::new(Float64Array::from_iter(vals.iter().map(|v| match v {
                OrdVal::Float(f) => Some(*f),
                _ => None,
            })));
            arrow::compute::cast(&a, dt)?
        }
        _ => crate::accum::int_array(
            vals.iter().map(|v| match v {
                OrdVal::Int(i) => Some(*i),
                _ => None,
            }),
            dt,
        )
        .map_err(|e| Error::internal(format!("key output: {e}")))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::TestRng as Rng;

    /// A raw bit pattern of type `dt` as the key readers pack it: edge values first.
    fn raw(dt: &DataType, r: &mut Rng) -> u64 {
        let x = r.next();
        let pick = x % 16;
        match dt {
            DataType::Int8 => [i8::MIN, -1, 0, 1, i8::MAX][pick as usize % 5].wrapping_add((x >> 8) as i8 * (pick > 4) as i8) as u8 as u64,
            DataType::Int32 | DataType::Date32 => {
                (if pick < 4 { [i32::MIN, -1, 0, i32::MAX][pick as usize] } else { (x >> 16) as i32 }) as u32 as u64
            }
            DataType::Int64 => if pick < 4 { [i64::MIN, -1, 0, i64::MAX][pick as usize] as u64 } else { x >> (pick * 3) },
            DataType::UInt16 => (if pick < 3 { [0, 1, u16::MAX][pick as usize] } else { (x >> 20) as u16 }) as u64,
            DataType::Float64 => {
                let specials = [f64::NAN, -f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -0.0, f64::MIN_POSITIVE, -1.5];
                let f = if pick < 8 { specials[pick as usize] } else { (x as i64 as f64) / 1e9 };
                canonical_f64(f).to_bits()
            }
            DataType::Float32 => {
                let specials = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0, -2.5];
                let f = if pick < 6 { specials[pick as usize] } else { (x as i32 as f32) / 1e3 };
                canonical_f32(f).to_bits() as u64
            }
            _ => x,
        }
    }

    /// The tie key orders packed keys exactly as comparing each key's sort value under its
    /// direction does, for signed, unsigned and float keys of every width, ASC and DESC.
    #[test]
    fn tie_key_orders_as_the_sort_values() {
        let layouts: Vec<Vec<DataType>> = vec![
            vec![DataType::Int64, DataType::Int32],
            vec![DataType::Float64, DataType::Int8, DataType::UInt16],
            vec![DataType::Date32, DataType::Float32, DataType::Int64],
            vec![DataType::UInt64, DataType::Int64],
        ];
        let mut r = Rng(5);
        for dts in layouts {
            let keys: Vec<(ScalarExpr, DataType)> =
                dts.iter().enumerate().map(|(i, d)| (ScalarExpr::Column(i), d.clone())).collect();
            let (layout, specs) = choose_layout(&keys, &vec![false; keys.len()], false);
            assert!(matches!(layout, Layout::Fixed64 | Layout::Fixed128), "{dts:?}");
            let reader = KeyReader { specs: specs.clone(), kern: Kernels::scalar(), borrow: std::marker::PhantomData };
            for order in [vec![0usize, 1], vec![1, 0], (0..dts.len()).rev().collect()] {
                for desc_bits in 0..4u32 {
                    let spec: Vec<(usize, bool)> = order.iter().enumerate().map(|(j, &k)| (k, desc_bits >> j & 1 == 1)).collect();
                    let tie = TieKey::new(&specs, &spec).expect("fixed keys fit");
                    let pack = |r: &mut Rng| -> u128 {
                        specs.iter().map(|s| (raw(&s.dtype, r) as u128) << s.shift).fold(0, |a, b| a | b)
                    };
                    for _ in 0..2000 {
                        let (a, b) = (pack(&mut r), pack(&mut r));
                        let mut want = std::cmp::Ordering::Equal;
                        for &(k, desc) in &spec {
                            let o = reader.packed_value(k, a).cmp(&reader.packed_value(k, b));
                            let o = if desc { o.reverse() } else { o };
                            if o.is_ne() {
                                want = o;
                                break;
                            }
                        }
                        assert_eq!(tie.cmp(a, &tie.of(b)), want, "{dts:?} {spec:?} {a:#x} {b:#x}");
                        assert_eq!(tie.of(a).cmp(&tie.of(b)), want);
                    }
                }
            }
        }
    }
}
