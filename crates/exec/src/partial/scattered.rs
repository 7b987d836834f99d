//! Scattered rows: the raw rows of one radix partition (key, hash, aggregate inputs in
//! their native width) that a worker's radix scatter appends to and that a flush, a spill or
//! the final phase aggregates ([`Scattered::drain_into`]), with their spill encoding.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, PrimitiveArray};
use arrow::datatypes::*;
use tessera_common::{Error, Result};

use super::ROWS_RUN;
use crate::hashtable::GroupTable;
use crate::keys::{GroupKey, KeyArena};
use crate::scatter::{partition_counts, scatter_column};
use crate::spill::{Dec, Enc, corrupt};
use tessera_kernels::Kernels;

/// Aggregate input values of scattered rows, in their native width (dates as Int32 days,
/// timestamps as Int64 seconds: the accumulators keep the logical type).
macro_rules! raw_vals {
    ($($variant:ident($native:ty, $arrow:ty) = $tag:literal),* $(,)?) => {
        #[derive(Debug)]
        pub(crate) enum RawVals {
            /// COUNT(*), or COUNT(col) of a string column without NULLs: no values.
            None,
            $($variant(Vec<$native>),)*
        }

        impl RawVals {
            fn empty_like(input: Option<&ArrayRef>, capacity: usize) -> RawVals {
                let Some(arr) = input else { return RawVals::None };
                match arr.data_type() {
                    $(t if t == &<$arrow>::DATA_TYPE => RawVals::$variant(Vec::with_capacity(capacity)),)*
                    DataType::Date32 => RawVals::I32(Vec::with_capacity(capacity)),
                    DataType::Timestamp(TimeUnit::Second, _) => RawVals::I64(Vec::with_capacity(capacity)),
                    _ => RawVals::None,
                }
            }

            /// Radix scatter of aggregate `a`'s input: the value of input row `rows[j]` (or
            /// `j`) goes to partition `pids[j]`, whose values vector gets room for
            /// `counts[p]` more first (see [`scatter_column`], also for `combine`). The vectors of aggregate `a`
            /// must have this input's type ([`RawVals::empty_like`] made them from it).
            fn scatter_from<K>(
                input: Option<&ArrayRef>,
                rows: Option<&[u32]>,
                pids: &[u16],
                counts: &[usize],
                parts: &mut [Scattered<K>],
                a: usize,
                combine: bool,
            ) -> Result<()> {
                let Some(arr) = input else { return Ok(()) };
                macro_rules! go {
                    ($v:ident, $t:ty) => {{
                        let src = arr.as_primitive::<$t>().values();
                        let mut vecs = Vec::with_capacity(parts.len());
                        for s in parts.iter_mut() {
                            match &mut s.vals[a] {
                                RawVals::$v(v) => vecs.push(v),
                                _ => return Err(Error::internal("scattered values of another type")),
                            }
                        }
                        // SAFETY: `counts` counts `pids` (the caller's contract), and
                        // `vecs` holds one vector per partition, in partition order.
                        unsafe { scatter_column(vecs, pids, counts, combine, |j| src[rows.map_or(j, |r| r[j] as usize)]) };
                    }};
                }
                match arr.data_type() {
                    $(t if t == &<$arrow>::DATA_TYPE => go!($variant, $arrow),)*
                    DataType::Date32 => go!(I32, Date32Type),
                    DataType::Timestamp(TimeUnit::Second, _) => go!(I64, TimestampSecondType),
                    DataType::Utf8 | DataType::Binary => {}
                    other => return Err(Error::internal(format!("scatter of aggregate input {other}"))),
                }
                Ok(())
            }

            /// Appends the values to a spill buffer: a tag byte for the type, then the values.
            fn encode(&self, e: &mut Enc<'_>) {
                match self {
                    RawVals::None => e.put(0u8),
                    $(RawVals::$variant(v) => {
                        e.put($tag as u8);
                        e.slice(v);
                    })*
                }
            }

            /// Reads values [`RawVals::encode`] wrote.
            fn decode(d: &mut Dec<'_>) -> Result<RawVals> {
                Ok(match d.get::<u8>()? {
                    0 => RawVals::None,
                    $($tag => RawVals::$variant(d.slice()?),)*
                    t => return Err(corrupt(format!("aggregate input type tag {t}"))),
                })
            }

            /// Number of values (`None` for `RawVals::None`, which holds none).
            fn len(&self) -> Option<usize> {
                match self {
                    RawVals::None => None,
                    $(RawVals::$variant(v) => Some(v.len()),)*
                }
            }

            /// Lowers the reserved capacity to at most `cap` values (keeps at least `len`).
            fn shrink_to(&mut self, cap: usize) {
                match self {
                    RawVals::None => {}
                    $(RawVals::$variant(v) => v.shrink_to(cap),)*
                }
            }

            /// Bytes a value takes (0 for none).
            fn width(&self) -> usize {
                match self {
                    RawVals::None => 0,
                    $(RawVals::$variant(_) => std::mem::size_of::<$native>(),)*
                }
            }

            /// Reserves room for at least `additional` more values, exactly (no doubling).
            fn reserve_exact(&mut self, additional: usize) {
                match self {
                    RawVals::None => {}
                    $(RawVals::$variant(v) => v.reserve_exact(additional),)*
                }
            }

            /// Bytes reserved for the values.
            fn memory_size(&self) -> usize {
                match self {
                    RawVals::None => 0,
                    $(RawVals::$variant(v) => v.capacity() * std::mem::size_of::<$native>(),)*
                }
            }

            /// Removes the values (capacity kept).
            fn clear(&mut self) {
                match self {
                    RawVals::None => {}
                    $(RawVals::$variant(v) => v.clear(),)*
                }
            }

            /// The values as an array; they are cleared. With `keep` the vector keeps its
            /// capacity (the array is a copy), else its buffer becomes the array's (no copy).
            fn drain_to_array(&mut self, keep: bool) -> Option<ArrayRef> {
                match self {
                    RawVals::None => None,
                    $(RawVals::$variant(v) => {
                        let a = if keep {
                            let a = PrimitiveArray::<$arrow>::from_iter_values(v.iter().copied());
                            v.clear();
                            a
                        } else {
                            PrimitiveArray::<$arrow>::new(std::mem::take(v).into(), None)
                        };
                        Some(Arc::new(a) as ArrayRef)
                    })*
                }
            }
        }
    };
}

raw_vals!(
    I8(i8, Int8Type) = 1,
    I16(i16, Int16Type) = 2,
    I32(i32, Int32Type) = 3,
    I64(i64, Int64Type) = 4,
    U8(u8, UInt8Type) = 5,
    U16(u16, UInt16Type) = 6,
    U32(u32, UInt32Type) = 7,
    U64(u64, UInt64Type) = 8,
    F32(f32, Float32Type) = 9,
    F64(f64, Float64Type) = 10,
);

/// Bytes a scattered row takes in the radix buffers with these aggregate inputs and keys
/// like `keys`: its key (inline part, and the mean heap bytes of `keys` for key types that
/// own some), its hash where the key type keeps it, its values in native width; at least 1.
pub(crate) fn scattered_row_bytes<K: GroupKey>(keys: &[K], inputs: &[Option<&ArrayRef>]) -> usize {
    let hash = if K::SCATTER_HASH { 8 } else { 0 };
    let heap = if std::mem::needs_drop::<K>() && !keys.is_empty() {
        keys.iter().map(|k| k.heap_bytes()).sum::<usize>() / keys.len()
    } else {
        0
    };
    let vals: usize = inputs.iter().map(|i| RawVals::empty_like(*i, 0).width()).sum();
    (std::mem::size_of::<K>() + heap + hash + vals).max(1)
}

/// Rows a radix partition's buffers reserve for `rows` rows spread over `partitions`:
/// the mean share, an eighth more for the spread of a partition's count, and 16.
pub(super) fn buffer_rows_per_partition(rows: usize, partitions: usize) -> usize {
    let share = rows / partitions.max(1);
    share + share / 8 + 16
}

/// Radix-scatters rows into `parts`: key `keys[j]` (moved out; `keys` is left empty) and
/// hash `hashes[j]` go to partition `pids[j]`, with the aggregate inputs of input row
/// `rows[j]` (or `j`); through write-combining buffers where the kernel family says so
/// ([`Kernels::write_combining_scatter`]).
pub(super) fn scatter_rows<K: GroupKey>(
    parts: &mut [Scattered<K>],
    keys: &mut Vec<K>,
    hashes: &[u64],
    pids: &[u16],
    inputs: &[Option<&ArrayRef>],
    rows: Option<&[u32]>,
    kern: &Kernels,
) -> Result<()> {
    if keys.len() != pids.len() || hashes.len() != pids.len() {
        return Err(Error::internal("scatter of rows with unequal keys, hashes and partitions"));
    }
    let counts = partition_counts(pids, parts.len());
    let combine = kern.write_combining_scatter();
    if std::mem::needs_drop::<K>() {
        for (k, &p) in keys.iter().zip(pids) {
            parts[p as usize].key_heap += k.heap_bytes();
        }
    }
    let mut moved = keys.drain(..);
    // SAFETY (both): `counts` counts `pids`; one vector per partition, in order.
    unsafe {
        scatter_column(parts.iter_mut().map(|s| &mut s.keys).collect(), pids, &counts, combine, |_| {
            moved.next().expect("as many keys as partition ids (checked above)")
        });
        if K::SCATTER_HASH {
            scatter_column(parts.iter_mut().map(|s| &mut s.hashes).collect(), pids, &counts, combine, |j| hashes[j]);
        }
    }
    drop(moved);
    for (a, input) in inputs.iter().enumerate() {
        RawVals::scatter_from(*input, rows, pids, &counts, parts, a, combine)?;
    }
    Ok(())
}

/// Rows of one radix partition, not yet aggregated.
#[derive(Debug)]
pub(crate) struct Scattered<K> {
    pub(super) keys: Vec<K>,
    /// Heap bytes owned by `keys` ([`GroupKey::heap_bytes`]).
    key_heap: usize,
    /// The keys' hashes, or none when the key type does not scatter them
    /// ([`GroupKey::SCATTER_HASH`]; [`Scattered::hashes`] computes them).
    hashes: Vec<u64>,
    vals: Vec<RawVals>,
}

impl<K> Scattered<K> {
    /// No rows, room for `rows` of them with these aggregate inputs.
    pub(super) fn with_capacity(inputs: &[Option<&ArrayRef>], rows: usize) -> Self
    where
        K: GroupKey,
    {
        Scattered {
            keys: Vec::with_capacity(rows),
            key_heap: 0,
            hashes: Vec::with_capacity(if K::SCATTER_HASH { rows } else { 0 }),
            vals: inputs.iter().map(|i| RawVals::empty_like(*i, rows)).collect(),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.keys.len()
    }

    /// The rows' hashes: those scattered, or computed from the keys (the same function in
    /// every family) when the key type does not scatter them.
    fn hashes(&mut self, kern: &Kernels) -> Vec<u64>
    where
        K: GroupKey,
    {
        if self.hashes.len() == self.keys.len() {
            std::mem::take(&mut self.hashes)
        } else {
            let mut h = Vec::new();
            K::hash_batch(&self.keys, kern, &mut h);
            h
        }
    }

    /// Appends the rows to a spill buffer (a rows run, tag [`ROWS_RUN`]) and clears them,
    /// keeping the buffers' capacity.
    pub(super) fn encode_and_clear(&mut self, out: &mut Vec<u8>)
    where
        K: GroupKey,
    {
        // Hashes the key type recomputes (fixed-width keys) are not written: 8 bytes a row
        // less to write and read, and the final phase hashes them with the family's kernel.
        let hashes = if K::SCATTER_HASH { self.hashes(Kernels::scalar()) } else { Vec::new() };
        let mut e = Enc(out);
        e.put(ROWS_RUN);
        e.put(self.keys.len() as u64);
        K::encode_all(&self.keys, &mut e);
        e.slice(&hashes);
        e.put(self.vals.len() as u64);
        for v in &mut self.vals {
            v.encode(&mut e);
            v.clear();
        }
        self.keys.clear();
        self.hashes.clear();
        self.key_heap = 0;
    }

    /// Rows a rows run holds; string key bytes are copied into `arena`.
    ///
    /// # Safety
    /// As [`GroupKey::decode`]: the rows must not be used after `arena` is dropped.
    pub(super) unsafe fn decode(d: &mut Dec<'_>, arena: &mut KeyArena) -> Result<Self>
    where
        K: GroupKey,
    {
        let n = d.len(1)?;
        let mut keys = Vec::new();
        // SAFETY: the caller does not use the rows after `arena` is dropped.
        unsafe { K::decode_all(d, n, arena, &mut keys)? };
        let key_heap = if std::mem::needs_drop::<K>() { keys.iter().map(|k| k.heap_bytes()).sum() } else { 0 };
        let hashes: Vec<u64> = d.slice()?;
        let m = d.len(1)?;
        let vals = (0..m).map(|_| RawVals::decode(d)).collect::<Result<Vec<_>>>()?;
        let hashes_ok = hashes.len() == n || (hashes.is_empty() && !K::SCATTER_HASH);
        if !hashes_ok || vals.iter().any(|v| v.len().is_some_and(|l| l != n)) || !d.is_empty() {
            return Err(corrupt(format!("a rows run of {n} keys does not match its hashes and values")));
        }
        Ok(Scattered { keys, key_heap, hashes, vals })
    }

    /// Aggregates the rows into `t` (keys stored with `store`) and clears them; with `keep`
    /// the buffers keep their capacity for more rows, else the values' buffers are handed to
    /// the accumulators without a copy (the final phase, which drops the rows after).
    pub(super) fn drain_into(
        &mut self,
        t: &mut GroupTable<K>,
        gids: &mut Vec<u32>,
        kern: &Kernels,
        store: impl FnMut(&K) -> K,
        keep: bool,
    ) -> Result<()>
    where
        K: GroupKey,
    {
        gids.clear();
        let hashes = self.hashes(kern);
        t.find_or_insert_batch(&self.keys, &hashes, kern, store, gids);
        t.sync_accs();
        for (acc, vals) in t.accs.iter_mut().zip(&mut self.vals) {
            acc.update(gids, vals.drain_to_array(keep).as_ref(), None)?;
        }
        self.keys.clear();
        self.hashes.clear();
        self.key_heap = 0;
        Ok(())
    }

    /// Lowers the buffers' reserved capacity to at most `cap` rows (keeps the rows held).
    pub(super) fn shrink_to(&mut self, cap: usize) {
        self.keys.shrink_to(cap);
        self.hashes.shrink_to(cap);
        for v in &mut self.vals {
            v.shrink_to(cap);
        }
    }

    /// Sets the buffers' reserved capacity to `cap` rows, or the rows held if more: lowers
    /// it, or grows it exactly (no doubling).
    pub(super) fn fit(&mut self, cap: usize)
    where
        K: GroupKey,
    {
        self.shrink_to(cap);
        let more = cap.saturating_sub(self.len());
        self.keys.reserve_exact(more);
        if K::SCATTER_HASH {
            self.hashes.reserve_exact(more);
        }
        for v in &mut self.vals {
            v.reserve_exact(more);
        }
    }

    /// Bytes the rows held take (their keys' inline part and heap, hashes and values), the
    /// capacity beyond them aside.
    pub(super) fn used_bytes(&self) -> usize {
        self.keys.len() * std::mem::size_of::<K>()
            + self.key_heap
            + self.hashes.len() * 8
            + self.vals.iter().map(|v| v.len().unwrap_or(0) * v.width()).sum::<usize>()
    }

    /// Bytes reserved for keys (inline part and heap), hashes and values.
    pub(super) fn memory_size(&self) -> usize {
        self.keys.capacity() * std::mem::size_of::<K>()
            + self.key_heap
            + self.hashes.capacity() * 8
            + self.vals.iter().map(|v| v.memory_size()).sum::<usize>()
    }
}
