//! ClickHouse compressed blocks: the framing of ClickHouse's native protocol, of
//! `clickhouse-client --compression`, `clickhouse-compressor` and of MergeTree `.bin` files.
//!
//! ```text
//!  one block:
//!  +----------------------+--------+-----------------+-------------------+-------------+
//!  | checksum (16 bytes)  | method | compressed size | decompressed size | payload     |
//!  | CityHash128 v1.0.2   | 1 byte | u32 LE          | u32 LE            | size - 9 B  |
//!  | of method..payload   |        | (9 + payload)   |                   |             |
//!  +----------------------+--------+-----------------+-------------------+-------------+
//!  method: 0x02 none, 0x82 LZ4 (one raw LZ4 block), 0x90 ZSTD (one zstd frame)
//!  checksum: the hash's low 64 bits, then its high 64 bits, each little-endian
//! ```
//!
//! [`CompressedWriter`] cuts its input into blocks of [`BLOCK_BYTES`] uncompressed
//! bytes (ClickHouse's `max_compress_block_size`); [`CompressedReader`] checks every
//! block's checksum and sizes before decompressing it.

use std::io::{self, Read, Write};
use std::path::PathBuf;

use crate::Compression;

/// Uncompressed bytes per block: 1 MiB, ClickHouse's `max_compress_block_size` default.
pub const BLOCK_BYTES: usize = 1 << 20;

/// Largest compressed or decompressed block size accepted on input: 1 GiB, ClickHouse's
/// `DBMS_MAX_COMPRESSED_SIZE`.
const MAX_BLOCK_BYTES: u32 = 1 << 30;

/// Bytes of the header after the checksum: method, compressed size, decompressed size.
const HEADER_BYTES: usize = 9;

const METHOD_NONE: u8 = 0x02;
const METHOD_LZ4: u8 = 0x82;
const METHOD_ZSTD: u8 = 0x90;

/// ClickHouse's checksum of a compressed block: CityHash128 (v1.0.2) of `data`, as the
/// 16 bytes ClickHouse writes (low half first, little-endian).
pub fn checksum(data: &[u8]) -> [u8; 16] {
    let h = cityhash_rs::cityhash_102_128(data);
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&(((h >> 64) as u64).to_le_bytes()));
    out[8..].copy_from_slice(&((h as u64).to_le_bytes()));
    out
}

/// Compresses `data` into one ClickHouse block appended to `out`.
///
/// # Panics
/// If `data` is longer than 1 GiB (callers pass at most [`BLOCK_BYTES`]).
pub fn compress_block(data: &[u8], compression: Compression, out: &mut Vec<u8>) {
    assert!(data.len() <= MAX_BLOCK_BYTES as usize, "block of {} bytes", data.len());
    let start = out.len();
    out.resize(start + 16 + HEADER_BYTES, 0);
    let method = match compression {
        Compression::None => {
            out.extend_from_slice(data);
            METHOD_NONE
        }
        Compression::Lz4 => {
            let bound = lz4_flex::block::get_maximum_output_size(data.len());
            let at = out.len();
            out.resize(at + bound, 0);
            let n = lz4_flex::block::compress_into(data, &mut out[at..]).expect("output sized by get_maximum_output_size");
            out.truncate(at + n);
            METHOD_LZ4
        }
        Compression::Zstd(level) => {
            let at = out.len();
            let bound = zstd::zstd_safe::compress_bound(data.len());
            out.resize(at + bound, 0);
            let n = zstd::bulk::compress_to_buffer(data, &mut out[at..], level).expect("output sized by compress_bound");
            out.truncate(at + n);
            METHOD_ZSTD
        }
    };
    let compressed = (out.len() - start - 16) as u32;
    out[start + 16] = method;
    out[start + 17..start + 21].copy_from_slice(&compressed.to_le_bytes());
    out[start + 21..start + 25].copy_from_slice(&(data.len() as u32).to_le_bytes());
    let sum = checksum(&out[start + 16..]);
    out[start..start + 16].copy_from_slice(&sum);
}

/// A [`Write`] that sends ClickHouse compressed blocks of what is written to the inner sink.
/// Full blocks are compressed [`PARALLEL_BLOCKS`] at a time on the rayon pool and written
/// in order (the bytes are those of compressing them one by one).
/// [`Write::flush`] ends the current block (an empty buffer writes nothing) and writes every
/// pending one; dropping the writer flushes too, but ignores errors: call `flush` to see them.
pub struct CompressedWriter<W: Write> {
    inner: W,
    compression: Compression,
    /// The block being filled.
    buf: Vec<u8>,
    /// Full blocks not compressed yet, and spare buffers.
    full: Vec<Vec<u8>>,
    spare: Vec<Vec<u8>>,
    /// Compressed output, one per block of a group.
    outs: Vec<Vec<u8>>,
}

/// Blocks (of [`BLOCK_BYTES`]) compressed together in parallel.
const PARALLEL_BLOCKS: usize = 8;

impl<W: Write> CompressedWriter<W> {
    /// A writer compressing with `compression` (`None` still frames: method 0x02).
    pub fn new(inner: W, compression: Compression) -> Self {
        CompressedWriter {
            inner,
            compression,
            buf: Vec::with_capacity(BLOCK_BYTES),
            full: Vec::new(),
            spare: Vec::new(),
            outs: Vec::new(),
        }
    }

    /// Compresses and writes the full blocks, then (`partial`) the one being filled.
    fn emit(&mut self, partial: bool) -> io::Result<()> {
        use rayon::prelude::*;
        if partial && !self.buf.is_empty() {
            let next = self.spare.pop().unwrap_or_else(|| Vec::with_capacity(BLOCK_BYTES));
            self.full.push(std::mem::replace(&mut self.buf, next));
        }
        if self.full.is_empty() {
            return Ok(());
        }
        self.outs.resize_with(self.full.len(), Vec::new);
        let compression = self.compression;
        let one = |(data, out): (&Vec<u8>, &mut Vec<u8>)| {
            out.clear();
            compress_block(data, compression, out);
        };
        if self.full.len() == 1 {
            one((&self.full[0], &mut self.outs[0]));
        } else {
            self.full.par_iter().zip(self.outs.par_iter_mut()).for_each(one);
        }
        for out in &self.outs[..self.full.len()] {
            self.inner.write_all(out)?;
        }
        for mut b in self.full.drain(..) {
            b.clear();
            self.spare.push(b);
        }
        Ok(())
    }
}

impl<W: Write> Write for CompressedWriter<W> {
    fn write(&mut self, mut data: &[u8]) -> io::Result<usize> {
        let n = data.len();
        while !data.is_empty() {
            let take = (BLOCK_BYTES - self.buf.len()).min(data.len());
            self.buf.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.buf.len() == BLOCK_BYTES {
                let next = self.spare.pop().unwrap_or_else(|| Vec::with_capacity(BLOCK_BYTES));
                self.full.push(std::mem::replace(&mut self.buf, next));
                if self.full.len() == PARALLEL_BLOCKS {
                    self.emit(false)?;
                }
            }
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.emit(true)?;
        self.inner.flush()
    }
}

impl<W: Write> Drop for CompressedWriter<W> {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

/// A [`Read`] of the decompressed bytes of ClickHouse compressed blocks. A damaged block
/// (checksum, method, sizes, truncation, payload) is an [`io::ErrorKind::InvalidData`]
/// error whose message names the block and its byte offset; the format readers turn it
/// into [`tessera_common::Error::Corrupt`].
pub struct CompressedReader<R: Read> {
    inner: R,
    source: PathBuf,
    /// The block being read out, and how far.
    buf: Vec<u8>,
    pos: usize,
    /// Decompressed blocks after `buf`, in order; a damaged block's error is the last.
    ready: std::collections::VecDeque<io::Result<Vec<u8>>>,
    /// Buffers to reuse (raw payloads, decompressed blocks).
    spare: Vec<Vec<u8>>,
    /// Blocks read so far, and the input offset of the next one.
    blocks: u64,
    offset: u64,
    /// The input ended (cleanly or with an error, queued in `ready`).
    ended: bool,
}

/// One compressed block read but not yet checked or decompressed.
struct RawBlock {
    checksum: [u8; 16],
    /// Method, sizes and payload: what the checksum covers.
    payload: Vec<u8>,
    decompressed: u32,
    /// Its number (from 1) and input offset, for messages.
    number: u64,
    offset: u64,
}

/// An [`io::ErrorKind::InvalidData`] naming block `number` at byte `offset` of `source`.
fn bad_block(source: &std::path::Path, number: u64, offset: u64, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: compressed block {number} at byte {offset}: {what}", source.display()),
    )
}

impl RawBlock {
    /// Checks the block's checksum and decompresses it into `out`.
    fn decompress(&self, source: &std::path::Path, out: &mut Vec<u8>) -> io::Result<()> {
        let bad = |what: &str| bad_block(source, self.number, self.offset, what);
        if checksum(&self.payload) != self.checksum {
            return Err(bad("checksum mismatch"));
        }
        let data = &self.payload[HEADER_BYTES..];
        out.clear();
        match self.payload[0] {
            METHOD_NONE => {
                if data.len() != self.decompressed as usize {
                    return Err(bad("uncompressed block size mismatch"));
                }
                out.extend_from_slice(data);
            }
            METHOD_LZ4 => {
                out.resize(self.decompressed as usize, 0);
                match lz4_flex::block::decompress_into(data, out) {
                    Ok(n) if n == self.decompressed as usize => {}
                    _ => return Err(bad("bad LZ4 payload")),
                }
            }
            METHOD_ZSTD => {
                out.reserve(self.decompressed as usize);
                let mut dec = zstd::bulk::Decompressor::new().map_err(|e| bad(&format!("zstd: {e}")))?;
                match dec.decompress_to_buffer(data, out) {
                    Ok(n) if n == self.decompressed as usize => {}
                    _ => return Err(bad("bad ZSTD payload")),
                }
            }
            m => return Err(bad(&format!("unknown compression method 0x{m:02x}"))),
        }
        Ok(())
    }
}

impl<R: Read> CompressedReader<R> {
    /// A reader of the blocks of `inner`; `source` names it in errors.
    pub fn new(inner: R, source: PathBuf) -> Self {
        CompressedReader {
            inner,
            source,
            buf: Vec::new(),
            pos: 0,
            ready: std::collections::VecDeque::new(),
            spare: Vec::new(),
            blocks: 0,
            offset: 0,
            ended: false,
        }
    }

    /// Reads the next block's header and payload; `None` at a clean end of input.
    fn read_raw(&mut self) -> io::Result<Option<RawBlock>> {
        let (number, offset) = (self.blocks + 1, self.offset);
        let bad = |what: &str| bad_block(&self.source, number, offset, what);
        let mut head = [0u8; 16 + HEADER_BYTES];
        let mut got = 0;
        while got < head.len() {
            match self.inner.read(&mut head[got..]) {
                Ok(0) if got == 0 => return Ok(None),
                Ok(0) => return Err(bad("truncated header")),
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        let compressed = u32::from_le_bytes(head[17..21].try_into().expect("4 bytes"));
        let decompressed = u32::from_le_bytes(head[21..25].try_into().expect("4 bytes"));
        if !(HEADER_BYTES as u32..=MAX_BLOCK_BYTES).contains(&compressed) || decompressed > MAX_BLOCK_BYTES {
            return Err(bad(&format!("sizes out of range (compressed {compressed}, decompressed {decompressed})")));
        }
        let payload_len = (compressed as usize) - HEADER_BYTES;
        let mut payload = self.spare.pop().unwrap_or_default();
        payload.clear();
        payload.extend_from_slice(&head[16..]);
        let read = (&mut self.inner).take(payload_len as u64).read_to_end(&mut payload)?;
        if read < payload_len {
            return Err(bad(&format!("truncated payload ({read} of {payload_len} bytes)")));
        }
        self.blocks += 1;
        self.offset += 16 + u64::from(compressed);
        Ok(Some(RawBlock { checksum: head[..16].try_into().expect("16 bytes"), payload, decompressed, number, offset }))
    }

    /// Reads up to [`PARALLEL_BLOCKS`] blocks and checks and decompresses them on the
    /// current rayon pool's threads into `ready`, in order (an error after the blocks
    /// before it); `false` once the input has ended.
    fn next_group(&mut self) -> bool {
        use rayon::prelude::*;
        if self.ended {
            return false;
        }
        let mut raws = Vec::with_capacity(PARALLEL_BLOCKS);
        let mut failed = None;
        while raws.len() < PARALLEL_BLOCKS.min(rayon::current_num_threads() * 2) {
            match self.read_raw() {
                Ok(Some(raw)) => raws.push(raw),
                Ok(None) => {
                    self.ended = true;
                    break;
                }
                Err(e) => {
                    failed = Some(e);
                    self.ended = true;
                    break;
                }
            }
        }
        let mut outs: Vec<Vec<u8>> = raws.iter().map(|_| self.spare.pop().unwrap_or_default()).collect();
        let source = &self.source;
        let results: Vec<io::Result<()>> = if raws.len() > 1 {
            raws.par_iter().zip(outs.par_iter_mut()).map(|(raw, out)| raw.decompress(source, out)).collect()
        } else {
            raws.iter().zip(outs.iter_mut()).map(|(raw, out)| raw.decompress(source, out)).collect()
        };
        for ((raw, out), result) in raws.into_iter().zip(outs).zip(results) {
            if raw.payload.capacity() <= 2 * BLOCK_BYTES {
                self.spare.push(raw.payload);
            }
            match result {
                Ok(()) => self.ready.push_back(Ok(out)),
                Err(e) => {
                    self.ready.push_back(Err(e));
                    self.ended = true;
                    return true;
                }
            }
        }
        if let Some(e) = failed {
            self.ready.push_back(Err(e));
        }
        true
    }
}

impl<R: Read> Read for CompressedReader<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.buf.len() {
            match self.ready.pop_front() {
                Some(Ok(block)) => {
                    let done = std::mem::replace(&mut self.buf, block);
                    // Not the buffers of blocks far larger than this writer's (up to 1 GiB).
                    if self.spare.len() < 4 * PARALLEL_BLOCKS && done.capacity() <= 2 * BLOCK_BYTES {
                        self.spare.push(done);
                    }
                    self.pos = 0;
                }
                Some(Err(e)) => {
                    self.ready.clear();
                    return Err(e);
                }
                None => {
                    if !self.next_group() {
                        return Ok(0);
                    }
                }
            }
        }
        let n = out.len().min(self.buf.len() - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks compressed in parallel groups are the bytes of compressing each 1 MiB block
    /// in turn: writes of odd sizes, a flush mid-stream (ends a short block), more than one
    /// group of blocks, every compression.
    #[test]
    fn parallel_blocks_equal_one_at_a_time() {
        let data: Vec<u8> = (0..(PARALLEL_BLOCKS * 2 + 3) * BLOCK_BYTES + 12_345)
            .map(|i| (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17) as u8 & 0x3f)
            .collect();
        let cut = 3 * BLOCK_BYTES + 777;
        for c in [Compression::None, Compression::Lz4, Compression::Zstd(1)] {
            let mut framed = Vec::new();
            {
                let mut w = CompressedWriter::new(&mut framed, c);
                let mut at = 0;
                for (k, size) in [1usize, 70_001, 3_000_000, 5].iter().cycle().enumerate() {
                    if at >= data.len() {
                        break;
                    }
                    let end = (at + size).min(data.len());
                    let end = if at < cut && end > cut { cut } else { end };
                    w.write_all(&data[at..end]).unwrap();
                    at = end;
                    if at == cut || k == usize::MAX {
                        w.flush().unwrap();
                    }
                }
                w.flush().unwrap();
            }
            let mut want = Vec::new();
            for part in [&data[..cut], &data[cut..]] {
                for block in part.chunks(BLOCK_BYTES) {
                    compress_block(block, c, &mut want);
                }
            }
            assert!(framed == want, "{c:?}: {} bytes, expected {}", framed.len(), want.len());
        }
    }

    fn round_trip(data: &[u8], c: Compression) -> Vec<u8> {
        let mut framed = Vec::new();
        {
            let mut w = CompressedWriter::new(&mut framed, c);
            w.write_all(data).unwrap();
            w.flush().unwrap();
        }
        let mut back = Vec::new();
        CompressedReader::new(framed.as_slice(), "t".into()).read_to_end(&mut back).unwrap();
        back
    }

    #[test]
    fn blocks_round_trip_across_block_boundaries() {
        let data: Vec<u8> = (0..(3 * BLOCK_BYTES + 17)).map(|i| (i * 7 % 251) as u8).collect();
        for c in [Compression::None, Compression::Lz4, Compression::Zstd(1), Compression::Zstd(9)] {
            assert_eq!(round_trip(&data, c), data, "{c:?}");
            assert_eq!(round_trip(&[], c), Vec::<u8>::new());
        }
    }

    #[test]
    fn damage_is_invalid_data_never_a_panic() {
        let data: Vec<u8> = (0..100_000u32).flat_map(|i| (i % 1000).to_le_bytes()).collect();
        let mut framed = Vec::new();
        compress_block(&data, Compression::Lz4, &mut framed);
        for cut in [1, 16, 24, 25, framed.len() - 1] {
            let err = CompressedReader::new(&framed[..cut], "t".into()).read_to_end(&mut Vec::new()).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidData, "cut {cut}: {err}");
        }
        for at in [0, 16, 17, 21, 30, framed.len() - 1] {
            let mut bad = framed.clone();
            bad[at] ^= 0x40;
            let err = CompressedReader::new(bad.as_slice(), "t".into()).read_to_end(&mut Vec::new()).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidData, "byte {at}: {err}");
            assert!(err.to_string().contains("block 1 at byte 0"), "{err}");
        }
    }
}
