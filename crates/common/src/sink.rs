//! [`FileSink`]: the writer to put around an output file, in place of a `BufWriter`.
//!
//! A write into the page cache that starts or ends inside a page costs the kernel more
//! than one of whole pages: on this project's Zen 5 VM (ext4), 1,526 writes of 512 KiB
//! (800 MB) took 0.120 s at page-aligned offsets and 0.142 s when each was preceded by a
//! 13-byte write (a Native block header), measured with `os.write` from Python. A
//! `BufWriter` passes a large write straight through at whatever offset the file is at,
//! so after the first odd-sized piece every write straddles pages. `FileSink` gathers small
//! writes as a `BufWriter` does and writes large ones without copying them, but cuts every
//! write so that it ends on a page boundary (the few bytes past the last boundary wait for
//! the next write): a buffered prefix and the caller's slice go out in one `writev`.

use std::io::{IoSlice, Write};

/// Bytes of a page: writes end at multiples of this offset (4 KiB, the page size of
/// x86-64 and of most aarch64 kernels; on a 16 or 64 KiB page kernel half the writes still
/// end on a page).
const PAGE: u64 = 4096;

/// A buffered file writer whose writes end at page-aligned file offsets (but the last).
///
/// Writes smaller than its capacity in total are gathered; a larger one is written at
/// once, without a copy, from the gathered bytes and the caller's slice up to the last page
/// boundary they reach; the rest (under 4 KiB) is kept. [`flush`](Write::flush) writes
/// everything kept. An error of the inner writer after some bytes is a short write, and
/// nothing is ever written twice. Dropping the sink flushes it and, as `BufWriter` does,
/// ignores an error there: call `flush` to see it.
#[derive(Debug)]
pub struct FileSink<W: Write> {
    inner: W,
    buf: Vec<u8>,
    /// Gathered bytes at which a write goes out.
    capacity: usize,
    /// Bytes written to `inner` so far (its offset, when it was empty at the start).
    written: u64,
}

impl<W: Write> FileSink<W> {
    /// A sink writing to `inner` (a file positioned at its start, or at a page boundary)
    /// in writes of at least `capacity` bytes (but the last); `capacity` is rounded up to
    /// a page. The data formats use 64 KiB (`tessera_formats::SINK_BUFFER_BYTES`), the part
    /// writer 1 MiB.
    pub fn with_capacity(capacity: usize, inner: W) -> Self {
        let capacity = capacity.max(1).next_multiple_of(PAGE as usize);
        FileSink { inner, buf: Vec::with_capacity(capacity), capacity, written: 0 }
    }

    /// The writer it writes to.
    pub fn get_ref(&self) -> &W {
        &self.inner
    }

    /// Bytes written to the inner writer so far (the rest of what was written to the sink,
    /// less than its capacity, waits in it).
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Writes the gathered bytes then `tail`, in as few `writev` calls as the OS allows;
    /// returns how much of `tail` went out: all of it, unless an error came after some
    /// bytes (then the gathered bytes written are dropped from the buffer, the others kept,
    /// so that nothing is written twice). The error itself when nothing of `tail` went out.
    fn write_two(&mut self, tail: &[u8]) -> std::io::Result<usize> {
        let (held, total) = (self.buf.len(), self.buf.len() + tail.len());
        let mut done = 0;
        let mut error = None;
        while done < total {
            let slices = [IoSlice::new(&self.buf[done.min(held)..]), IoSlice::new(&tail[done.saturating_sub(held)..])];
            match self.inner.write_vectored(&slices) {
                Ok(0) => {
                    error = Some(std::io::ErrorKind::WriteZero.into());
                    break;
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
        }
        self.buf.drain(..done.min(held));
        self.written += done as u64;
        let sent = done.saturating_sub(held);
        match error {
            Some(e) if sent == 0 => Err(e),
            _ => Ok(sent),
        }
    }
}

impl<W: Write> Write for FileSink<W> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let total = self.buf.len() + data.len();
        if total < self.capacity {
            self.buf.extend_from_slice(data);
            return Ok(data.len());
        }
        // This write ends at the last page boundary the gathered bytes and `data` reach
        // (`take` bytes of `data`; none when, after a flush left the file unaligned, that
        // boundary falls inside the gathered bytes: they go out whole and the next write
        // realigns).
        let end = (self.written + total as u64) / PAGE * PAGE;
        let take = end.saturating_sub(self.written + self.buf.len() as u64) as usize;
        let sent = self.write_two(&data[..take])?;
        if sent < take {
            // An error after part of `data`: a short write (the caller's retry meets it).
            return Ok(sent);
        }
        self.buf.extend_from_slice(&data[take..]);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if !self.buf.is_empty() {
            self.write_two(&[])?;
            if !self.buf.is_empty() {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
        }
        self.inner.flush()
    }
}

impl<W: Write> Drop for FileSink<W> {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records the length of every write it receives.
    #[derive(Default)]
    struct Recorder {
        bytes: Vec<u8>,
        writes: Vec<usize>,
        /// Accept at most this many bytes per call (short writes).
        limit: usize,
    }

    impl Write for Recorder {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            let n = b.len().min(self.limit);
            self.bytes.extend_from_slice(&b[..n]);
            self.writes.push(n);
            Ok(n)
        }
        /// As `writev`: the slices in order, up to the limit, as one write.
        fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> std::io::Result<usize> {
            let mut n = 0;
            for b in bufs {
                let k = b.len().min(self.limit - n);
                self.bytes.extend_from_slice(&b[..k]);
                n += k;
            }
            self.writes.push(n);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn writes_end_on_pages_and_the_bytes_are_the_input() {
        for limit in [usize::MAX, 10_000, 4096, 1] {
            let mut expected = Vec::new();
            let mut sink = FileSink::with_capacity(1 << 16, Recorder { limit, ..Default::default() });
            // A Native-like pattern: a small header, a large body, repeated; odd sizes.
            let mut seed = 7u64;
            for i in 0..60 {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let len = match i % 3 {
                    0 => 13,
                    1 => 70_000 + (seed >> 40) as usize % 300_000,
                    _ => (seed >> 50) as usize % 5000,
                };
                let piece: Vec<u8> = (0..len).map(|j| (i * 31 + j) as u8).collect();
                sink.write_all(&piece).unwrap();
                expected.extend_from_slice(&piece);
                if i == 30 {
                    // A flush mid-stream leaves the file unaligned; later writes realign.
                    sink.flush().unwrap();
                }
            }
            sink.flush().unwrap();
            let rec = &sink.inner;
            assert_eq!(rec.bytes, expected, "limit {limit}");
            if limit == usize::MAX {
                // Every write but those ending in a flush ends at a page boundary.
                let mut offset = 0usize;
                let mut unaligned = 0;
                for &w in &rec.writes {
                    offset += w;
                    unaligned += usize::from(offset % PAGE as usize != 0);
                }
                assert!(unaligned <= 2, "{unaligned} writes ended inside a page: {:?}", rec.writes);
                assert!(rec.writes.len() < 60, "large writes are not split: {} writes", rec.writes.len());
            }
        }
    }

    /// Accepts `ok` bytes, then fails once, then accepts everything.
    struct FailsOnce {
        bytes: Vec<u8>,
        ok: usize,
        failed: bool,
    }

    impl Write for FailsOnce {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            if self.ok == 0 && !self.failed {
                self.failed = true;
                return Err(std::io::Error::other("disk full"));
            }
            let n = if self.failed { b.len() } else { b.len().min(self.ok) };
            self.ok = self.ok.saturating_sub(n);
            self.bytes.extend_from_slice(&b[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn an_error_after_some_bytes_writes_nothing_twice() {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        for ok in [0, 5_000, 70_000, 200_000] {
            let mut sink = FileSink::with_capacity(1 << 16, FailsOnce { bytes: Vec::new(), ok, failed: false });
            let mut sent = 0;
            let mut errors = 0;
            // What `write_all` does, retrying after the error.
            while sent < data.len() {
                match sink.write(&data[sent..]) {
                    Ok(n) => sent += n,
                    Err(_) => errors += 1,
                }
            }
            sink.flush().unwrap();
            // The error is returned when nothing of the call's bytes went out; after some,
            // the call is a short write and a persistent error comes with the next one.
            assert!(errors <= 1, "ok {ok}");
            assert!(sink.get_ref().bytes == data, "ok {ok}: {} bytes written", sink.get_ref().bytes.len());
        }
    }

    #[test]
    fn small_writes_are_gathered_and_drop_flushes() {
        let mut out = Vec::new();
        {
            let mut sink = FileSink::with_capacity(1 << 16, &mut out);
            for i in 0..1000u32 {
                sink.write_all(&i.to_le_bytes()).unwrap();
            }
        }
        assert_eq!(out.len(), 4000);
        assert_eq!(&out[3996..], &999u32.to_le_bytes());
    }
}
