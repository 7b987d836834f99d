//! Radix scatter: rows appended to per-partition vectors by partition id, through write
//! cursors (and, where the kernel family says so, software write-combining line buffers
//! with streaming stores). The partitioned aggregation ([`crate::partial`]) scatters its
//! keys, hashes and aggregate inputs with it.

/// A radix scatter of one column into per-partition vectors: `value(j)` is appended to
/// `vecs[pids[j]]` for every `j`, in order. Room for `counts[p]` more values is reserved in
/// each vector first and its first free slot kept as a write cursor, so a row costs one
/// store through its partition's cursor, no capacity check or enum match per row (the
/// software-managed scatter of radix joins and aggregations: Balkesen et al., ICDE 2013;
/// DuckDB and ClickHouse scatter partitioned rows alike); the lengths are set at the end.
/// With `combine`, on x86-64, values whose size is a power of two up to 64 bytes and equal
/// to their alignment go through write-combining line buffers (`scatter_combined`);
/// others, and every value elsewhere, are stored one by one.
///
/// # Safety
/// `counts` has one entry per partition and `counts[p]` is the number of entries of `pids`
/// equal to `p` ([`partition_counts`]), and `vecs` has one vector per partition, in
/// partition order.
pub(crate) unsafe fn scatter_column<T>(
    mut vecs: Vec<&mut Vec<T>>,
    pids: &[u16],
    counts: &[usize],
    combine: bool,
    mut value: impl FnMut(usize) -> T,
) {
    debug_assert_eq!(vecs.len(), counts.len());
    let mut cursors = vec![std::ptr::null_mut::<T>(); counts.len()];
    for ((v, c), &n) in vecs.iter_mut().zip(&mut cursors).zip(counts) {
        if n > 0 {
            v.reserve(n);
            // SAFETY: `len <= capacity`, so the pointer is in (or one past) the allocation.
            *c = unsafe { v.as_mut_ptr().add(v.len()) };
        }
    }
    // Write-combining needs streaming stores, written for x86-64 only.
    #[cfg(not(target_arch = "x86_64"))]
    let _ = combine;
    #[cfg(target_arch = "x86_64")]
    if combine && combines::<T>() {
        // SAFETY: T has the size and alignment asked for and needs no drop (`combines`),
        // and each cursor has room for its partition's `counts[p]` values, as reserved above.
        unsafe { scatter_combined(&mut cursors, pids, value) };
        // SAFETY: the scatter wrote partition p's `counts[p]` values past its vector's length.
        unsafe { set_lens(vecs, counts) };
        return;
    }
    for (j, &p) in pids.iter().enumerate() {
        let c = &mut cursors[p as usize];
        // SAFETY: partition p receives exactly `counts[p]` values (the caller's contract),
        // all of which fit the room reserved above, so every write is to a distinct slot
        // in `len .. len + counts[p]` of its vector's allocation.
        unsafe {
            c.write(value(j));
            *c = c.add(1);
        }
    }
    // SAFETY: the loop wrote partition p's `counts[p]` values past its vector's length.
    unsafe { set_lens(vecs, counts) };
}

/// Adds `counts[p]` to the length of `vecs[p]` after a scatter. (A scatter's `value` that
/// unwinds skips this: the values written leak, no length covers unwritten slots.)
///
/// # Safety
/// The `counts[p]` slots past each vector's length are initialised values.
unsafe fn set_lens<T>(mut vecs: Vec<&mut Vec<T>>, counts: &[usize]) {
    for (v, &n) in vecs.iter_mut().zip(counts) {
        // SAFETY: the caller's contract; the slots are in the capacity reserved for them.
        unsafe { v.set_len(v.len() + n) };
    }
}

/// Bytes of a cache line, the unit [`scatter_combined`] writes.
#[cfg(target_arch = "x86_64")]
const LINE: usize = 64;

/// Whether [`scatter_combined`] takes values of type `T`.
#[cfg(target_arch = "x86_64")]
fn combines<T>() -> bool {
    let size = std::mem::size_of::<T>();
    !std::mem::needs_drop::<T>() && size.is_power_of_two() && size <= LINE && std::mem::align_of::<T>() == size
}

/// One cache line of values, aligned as one.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; LINE]);

/// The scatter loop of [`scatter_column`] with software write-combining: each partition's
/// values are first stored into a line buffer of its own (256 lines, 16 KiB: they stay in
/// the L1 cache and on four pages; 64 KiB in L2 at 1,024 partitions), laid out as the
/// destination line the partition's cursor is in; when a value fills that line, the whole
/// line is copied out at once. Rows scatter to 256 or more places, so a store straight to
/// the destination lands on a different
/// page (a TLB miss) and often a line not in L1 on nearly every row; this way a row costs
/// one store into L1 and a partition one copy per 64 bytes (Balkesen et al., "Main-memory
/// hash joins on multi-core CPUs", ICDE 2013, software-managed buffers; Schuhknecht et al.,
/// VLDB 2015). A full line goes out with non-temporal stores (SSE2, in every x86-64 CPU),
/// which write the line without reading it first. Both halves are needed: with plain
/// copies of the lines Q33 took 0.15 s instead of 0.12 s, with streaming stores 0.116 s
/// (10M generated rows, 2 threads, Zen 5 VM). Values of other sizes (Q19's 32-byte keys
/// whose alignment is 16, Q34's 16-byte string references aligned to 8) could go through
/// two-line buffers that carry what runs past a line over: measured, Q19 0.167 -> 0.181 s
/// and Q34 unchanged, so they do not. Not used on aarch64 until measured there.
///
/// # Safety
/// `size_of::<T>()` is a power of two of at most [`LINE`] bytes and equals its alignment,
/// `T` needs no drop, and `cursors[p]` points at room for as many values as `pids` holds
/// entries equal to `p` (it is advanced past them).
#[cfg(target_arch = "x86_64")]
unsafe fn scatter_combined<T>(cursors: &mut [*mut T], pids: &[u16], mut value: impl FnMut(usize) -> T) {
    let mut lines = vec![Line([0; LINE]); cursors.len()];
    // Byte offset in its line of each partition's first value not yet copied out: a
    // partition's first line is partly other data, which must not be overwritten.
    let mut start = vec![0u8; cursors.len()];
    for (s, c) in start.iter_mut().zip(cursors.iter()) {
        *s = (*c as usize % LINE) as u8;
    }
    for (j, &p) in pids.iter().enumerate() {
        let p = p as usize;
        let c = cursors[p];
        let off = c as usize % LINE;
        let v = value(j);
        // SAFETY: `off + size <= LINE` (T's alignment is its size, so a value never straddles
        // a line); the buffer line is 64 bytes. The cursor stays within the reserved room
        // (the caller's contract), so `c.add(1)` is at most one past it.
        unsafe {
            lines[p].0.as_mut_ptr().add(off).cast::<T>().write(v);
            let next = c.add(1);
            cursors[p] = next;
            if (next as usize).is_multiple_of(LINE) {
                let first = start[p] as usize;
                // The destination line the buffer mirrors: it starts `LINE` bytes before `next`.
                let dst = next.cast::<u8>().sub(LINE);
                flush_line(&lines[p], dst, first);
                start[p] = 0;
            }
        }
    }
    for p in 0..cursors.len() {
        let end = cursors[p] as usize % LINE;
        let first = start[p] as usize;
        if end > first {
            // SAFETY: bytes `first .. end` of the line were written since the last copy and
            // belong to room the caller reserved: the line starts `end` bytes before the cursor.
            unsafe {
                let dst = cursors[p].cast::<u8>().sub(end);
                std::ptr::copy_nonoverlapping(lines[p].0.as_ptr().add(first), dst.add(first), end - first);
            }
        }
    }
    // SAFETY: SSE2 is in every x86-64 CPU. The fence orders the streaming stores before any
    // later store (the hand-over of the buffers to the final phase's threads).
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

/// Copies bytes `first ..` of a buffered line to `dst`, the 64-byte-aligned destination
/// line: a whole line with streaming (non-temporal) stores, a partial one with plain stores.
///
/// # Safety
/// `dst` is aligned to [`LINE`] bytes and bytes `first .. LINE` of it are writable.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn flush_line(line: &Line, dst: *mut u8, first: usize) {
    if first == 0 {
        use std::arch::x86_64::{__m128i, _mm_load_si128, _mm_stream_si128};
        // SAFETY: SSE2 is in every x86-64 CPU; `line` and `dst` are 64-byte aligned, so the
        // four 16-byte loads and stores are aligned, and all 64 bytes of `dst` are writable.
        unsafe {
            let s = line.0.as_ptr().cast::<__m128i>();
            let d = dst.cast::<__m128i>();
            for k in 0..4 {
                _mm_stream_si128(d.add(k), _mm_load_si128(s.add(k)));
            }
        }
        return;
    }
    // SAFETY: the caller's contract: `first <= LINE` bytes on from `dst + first` are writable.
    unsafe { std::ptr::copy_nonoverlapping(line.0.as_ptr().add(first), dst.add(first), LINE - first) };
}

/// Rows per partition among `pids`, for `partitions` partitions (every id is below it).
pub(crate) fn partition_counts(pids: &[u16], partitions: usize) -> Vec<usize> {
    let mut counts = vec![0usize; partitions];
    for &p in pids {
        counts[p as usize] += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `scatter_column` against pushes one by one, for every value size the write-combining
    /// path takes and one it does not, with vectors that already hold values (a partition's
    /// first line partly other data), partitions that get no row, one row, and many, over
    /// several calls in a row.
    fn scatter_matches_pushes<T: Copy + PartialEq + std::fmt::Debug>(combine: bool, make: impl Fn(u64) -> T) {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut rnd = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for partitions in [256, 1024] {
            scatter_matches_pushes_in(combine, &make, partitions, &mut rnd);
        }
    }

    fn scatter_matches_pushes_in<T: Copy + PartialEq + std::fmt::Debug>(
        combine: bool,
        make: impl Fn(u64) -> T,
        partitions: usize,
        rnd: &mut impl FnMut() -> u64,
    ) {
        let mut got: Vec<Vec<T>> = (0..partitions).map(|p| (0..p as u64 % 7).map(&make).collect()).collect();
        let mut want = got.clone();
        for (call, rows) in [0usize, 1, 3, 1000, 70_000, 5].into_iter().enumerate() {
            // Partition ids skewed to low partitions, with every 7th partition left empty.
            let pids: Vec<u16> = (0..rows)
                .map(|_| {
                    let r = rnd();
                    let p = if r % 3 == 0 { (r >> 8) % 16 } else { (r >> 8) % partitions as u64 };
                    if p % 7 == 3 { 0 } else { p as u16 }
                })
                .collect();
            let vals: Vec<T> = (0..rows).map(|j| make((call * 1_000_000 + j) as u64)).collect();
            for (&p, &v) in pids.iter().zip(&vals) {
                want[p as usize].push(v);
            }
            let counts = partition_counts(&pids, partitions);
            // SAFETY: `counts` counts `pids`; one vector per partition, in order.
            unsafe { scatter_column(got.iter_mut().collect(), &pids, &counts, combine, |j| vals[j]) };
            assert_eq!(got, want, "call {call}, {rows} rows, {}-byte values, combine {combine}, {partitions} partitions", std::mem::size_of::<T>());
        }
    }

    #[test]
    fn scatter_column_equals_pushes_for_every_width() {
        for combine in [false, true] {
            widths(combine);
        }
    }

    fn widths(combine: bool) {
        scatter_matches_pushes(combine, |i| i as u8);
        scatter_matches_pushes(combine, |i| i as i16);
        scatter_matches_pushes(combine, |i| i as u32);
        scatter_matches_pushes(combine, |i| i as f64);
        scatter_matches_pushes(combine, |i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        scatter_matches_pushes(combine, |i| u128::from(i) << 64 | u128::from(!i));
        // Sizes not a power of two, or above their alignment: stored one by one.
        scatter_matches_pushes(combine, |i| (i as u32, (i >> 32) as u32, 7u32));
        scatter_matches_pushes(combine, |i| (i, !i));
        scatter_matches_pushes(combine, |i| [i; 9]);
    }
}
