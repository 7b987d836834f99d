//! Parallel parsing of Native, RowBinary, JSONEachRow and ArrowStream, as ClickHouse's
//! `input_format_parallel_parsing` does: the input is cut into chunks of whole units
//! (Native blocks, RowBinary and JSON rows, IPC messages; 1-4 MiB, about four batches of
//! rows each)
//! by walking their length prefixes (JSON: its line breaks outside objects and strings), and the chunks are parsed by the format's own
//! sequential reader over each chunk's bytes on the threads of the current rayon pool, two
//! per thread at a time, while the next group of chunks is cut (`rayon::join`); the
//! batches come out in input order. The first error ends the input after the batches
//! before it, named by its position in the whole input (the parser of a chunk is told how
//! many units and rows come before it).
//!
//! Cutting reads the input once into the chunk's buffer (buffers are reused) and walks the
//! units' lengths (a VarUInt and a skip per string: about 1.5 ns a row here); the copying
//! into arrays, UTF-8 checks and type conversions happen in the parallel part. Damaged
//! input is never skipped: the walk stops at the first unit it cannot make sense of, and
//! the chunk that starts there is parsed whole, so its parser reports the damage with its
//! row and column. Bytes that could not be read (a damaged compressed block) end the input
//! after the chunks cut before them.

use std::collections::VecDeque;
use std::io::BufRead;
use std::path::PathBuf;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use tessera_common::Result;

use crate::BatchReader;
use crate::text::{ChunkedReader, next_chunk_bytes, parse_chunks, read_chunk};

/// Units, rows and bytes of the input before a chunk (a unit is what one
/// [`Framing::unit`] call walks: a Native block, a run of RowBinary rows, the whole JSON
/// rows of a buffer).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Position {
    pub units: u64,
    pub rows: u64,
    pub bytes: u64,
}

/// Where a walk over whole units stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Walk {
    /// The next unit is not all in the bytes yet.
    Short,
    /// The next unit is damaged (its parser says how).
    Bad,
}

/// How a format's input is cut into whole units and a chunk of them parsed.
pub(crate) trait Framing: Sync {
    /// The length in bytes and the rows of the unit at the start of `buf`.
    fn unit(&self, buf: &[u8]) -> std::result::Result<(usize, u64), Walk>;

    /// The batches of `bytes` (whole units, `at` the units and rows before them), in order;
    /// a parse error is the last.
    fn parse(&self, bytes: &[u8], at: Position) -> Vec<Result<RecordBatch>>;
}

/// The end of the last whole unit in `buf` (which starts at one) and the units and rows up
/// to it; `None` when no unit ends in it. A damaged unit ends the walk: the units before it
/// are a chunk of their own, and a damaged first unit takes all of `buf` with it, so that
/// parsing it reports the damage.
fn units_end(framing: &impl Framing, buf: &[u8]) -> Option<(usize, Position)> {
    let (mut pos, mut at) = (0, Position::default());
    loop {
        match framing.unit(&buf[pos..]) {
            Ok((len, rows)) => {
                pos += len;
                at.units += 1;
                at.rows += rows;
                if len == 0 {
                    // Only a unit of no bytes could loop; none of the formats has one.
                    return Some((buf.len(), at));
                }
            }
            Err(Walk::Short) => return (pos > 0).then_some((pos, at)),
            Err(Walk::Bad) => return Some(if pos > 0 { (pos, at) } else { (buf.len(), at) }),
        }
    }
}

/// Chunks of whole units, each with the units and rows before it.
type Chunks = Vec<(Vec<u8>, Position)>;

/// A reader that parses its input a group of chunks at a time (see the module doc).
pub(crate) struct ParallelChunks<R: BufRead, F: Framing> {
    cutter: Cutter<R>,
    framing: F,
    schema: SchemaRef,
    /// The next group of chunks, cut while the group before it was parsed.
    next: Option<Result<Chunks>>,
    ready: VecDeque<Result<RecordBatch>>,
    done: bool,
}

/// Reads the input and cuts it into chunks of whole units.
struct Cutter<R> {
    src: R,
    source: PathBuf,
    /// Input read and not yet cut; starts at a unit.
    buf: Vec<u8>,
    /// Units and rows before `buf`.
    at: Position,
    chunk_bytes: usize,
    eof: bool,
    /// Buffers of parsed chunks, reused (fresh memory costs a page fault per 4 KiB).
    spare: Vec<Vec<u8>>,
    /// A damaged unit or a read error ended the input: nothing more is read.
    damaged: bool,
    /// The read error to return after the chunks read before it.
    failed: Option<tessera_common::Error>,
}

impl<R: BufRead> Cutter<R> {
    /// The next chunks (at most `most`), with the units and rows before each; none at the
    /// end of input (or after a damaged unit, whose chunk was the last). An error reading
    /// the input comes after chunks of the whole units read before it, at the next call.
    fn cut(&mut self, framing: &impl Framing, most: usize) -> Result<Chunks> {
        let mut chunks = Vec::new();
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        while chunks.len() < most && !self.damaged {
            let cut = match read_chunk(&mut self.src, &mut self.buf, &mut self.eof, self.chunk_bytes, &self.source, |b| {
                units_end(framing, b)
            }) {
                Ok(cut) => cut,
                Err(e) => {
                    // The whole units read before the error are still delivered.
                    if let Some((end, n)) = units_end(framing, &self.buf).filter(|(_, n)| n.units > 0) {
                        let chunk = self.buf[..end].to_vec();
                        chunks.push((chunk, self.at));
                        self.advance(end, n);
                    }
                    self.buf.clear();
                    self.damaged = true;
                    if chunks.is_empty() {
                        return Err(e);
                    }
                    self.failed = Some(e);
                    break;
                }
            };
            let end = cut.map_or(self.buf.len(), |(end, _)| end);
            if end == 0 {
                break;
            }
            // The chunk keeps the buffer; the rest (part of a unit) moves to a spare one.
            let mut rest = self.spare.pop().unwrap_or_default();
            rest.clear();
            rest.extend_from_slice(&self.buf[end..]);
            let mut chunk = std::mem::replace(&mut self.buf, rest);
            chunk.truncate(end);
            chunks.push((chunk, self.at));
            match cut {
                // A damaged first unit: its chunk is parsed (and reports it), nothing after it.
                Some((_, n)) if n.units == 0 => self.damaged = true,
                Some((end, n)) => {
                    // A few batches of rows, so that the walk past the chunk's last
                    // whole unit (walked again in the next chunk) is a small part of it.
                    self.chunk_bytes = next_chunk_bytes(end, n.rows / 4);
                    self.advance(end, n);
                }
                // The last chunk (the rest of the input).
                None => break,
            }
        }
        Ok(chunks)
    }

    /// Moves the position past a chunk of `end` bytes holding `n`.
    fn advance(&mut self, end: usize, n: Position) {
        self.at.units += n.units;
        self.at.rows += n.rows;
        self.at.bytes += end as u64;
    }

    /// Takes back the buffers of parsed chunks (not the ones a huge unit grew).
    fn recycle(&mut self, chunks: Chunks) {
        let small = chunks.into_iter().map(|(bytes, _)| bytes).filter(|b| b.capacity() <= 2 * crate::text::MAX_CHUNK_BYTES);
        self.spare.extend(small);
    }
}

/// Chunks cut per thread and group: a few, so that threads finishing early take more.
const CHUNKS_PER_THREAD: usize = 2;

impl<R: BufRead + Send, F: Framing> ParallelChunks<R, F> {
    /// Reads `src` from `at` on (its header, if any, already read), after `first` (a batch
    /// read at open to learn the schema).
    pub(crate) fn new(src: R, framing: F, schema: SchemaRef, source: PathBuf, at: Position, first: Option<RecordBatch>) -> Self {
        ParallelChunks {
            cutter: Cutter {
                src,
                source,
                buf: Vec::new(),
                at,
                chunk_bytes: crate::text::MIN_CHUNK_BYTES,
                eof: false,
                spare: Vec::new(),
                damaged: false,
                failed: None,
            },
            framing,
            schema,
            next: None,
            ready: first.into_iter().map(Ok).collect(),
            done: false,
        }
    }

    /// Parses the next group of chunks into `ready` while the group after it is cut;
    /// `false` at the end of input.
    fn fill_chunks(&mut self) -> Result<bool> {
        let chunks = match self.next.take() {
            Some(group) => group?,
            // The first chunk alone, so that cutting the next group overlaps parsing it.
            None => self.cutter.cut(&self.framing, 1)?,
        };
        let most = rayon::current_num_threads().max(1) * CHUNKS_PER_THREAD;
        if chunks.is_empty() {
            return Ok(false);
        }
        let (framing, cutter) = (&self.framing, &mut self.cutter);
        let (parsed, next) =
            rayon::join(|| parse_chunks(&chunks, |(bytes, at)| framing.parse(bytes, *at)), || cutter.cut(framing, most));
        self.next = Some(next);
        self.cutter.recycle(chunks);
        for batches in parsed {
            let failed = batches.last().is_some_and(|b| b.is_err());
            self.ready.extend(batches);
            if failed {
                // Nothing after an error is read.
                self.next = Some(Ok(Vec::new()));
                break;
            }
        }
        Ok(true)
    }
}

impl<R: BufRead + Send, F: Framing> ChunkedReader for ParallelChunks<R, F> {
    fn ready(&mut self) -> (&mut VecDeque<Result<RecordBatch>>, &mut bool) {
        (&mut self.ready, &mut self.done)
    }

    fn fill(&mut self) -> Result<bool> {
        self.fill_chunks()
    }
}

impl<R: BufRead + Send, F: Framing> Iterator for ParallelChunks<R, F> {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        crate::text::next_batch(self)
    }
}

impl<R: BufRead + Send, F: Framing + Send> BatchReader for ParallelChunks<R, F> {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}
