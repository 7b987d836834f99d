//! Per-query state shared by the operators of one query: memory accounting against
//! `max_memory_usage` and cancellation.
//!
//! Operators report what their big buffers hold (hash tables, radix-partition buffers,
//! top-N and sort buffers) with [`QueryContext::grow`] / [`QueryContext::shrink`], once per
//! morsel or per partition, not per allocation: a query may overshoot its limit by what one
//! morsel (65,536 rows) or one hash-table doubling adds before it fails. Capacity is counted,
//! not touched bytes, as ClickHouse's memory tracker counts allocations.
//!
//! A query may also belong to a [`ServerMemory`]: the memory of every query of a database
//! plus its caches (decoded blocks, query conditions), against `max_server_memory_usage`.
//! The decoded blocks give way first; a query that would still pass the cap fails with
//! [`Error::ResourcesExhausted`] naming it; the others go on.
//!
//! Operators that spill account the bytes they write to temporary files with
//! [`QueryContext::grow_temporary`], against `max_temporary_data_on_disk_size`.
//!
//! Cancellation is cooperative: workers check the [`CancelToken`] before each morsel (and
//! each radix partition of the final phase, and every 65,536 groups of a top-N pass), so a
//! query stops within one morsel's work per thread after [`CancelToken::cancel`]; its
//! buffers are freed as the error unwinds the operators.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tessera_common::{Error, Result};

/// Cancels running queries: clone it, hand one clone to the query
/// (`Database::sql_cancellable`), call [`CancelToken::cancel`] on another from any thread.
/// Once cancelled it stays cancelled: every query given this token fails with
/// [`Error::Cancelled`] at its next check.
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    /// A token not cancelled yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks every query holding this token to stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether [`CancelToken::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Bytes held outside queries that count against the server's cap (a database's caches):
/// what they hold now, as (what `relieve` can free, the rest), a bound of their sum which
/// is cheap to read (their budgets), and how to free at least a number of bytes of what can
/// give way.
struct External {
    bytes: Box<dyn Fn() -> (usize, usize) + Send + Sync>,
    bound: Box<dyn Fn() -> usize + Send + Sync>,
    relieve: Box<dyn Fn(usize) + Send + Sync>,
}

/// The memory of all running queries of one database, plus what its caches hold, against
/// one cap (ClickHouse's `max_server_memory_usage`). Shared by the queries' contexts
/// ([`QueryContext::with_server`]); each query gives its bytes back when it ends.
#[derive(Default)]
pub struct ServerMemory {
    /// The cap in bytes; 0 = unlimited.
    limit: AtomicUsize,
    /// Bytes accounted by running queries.
    used: AtomicUsize,
    external: Option<External>,
}

impl std::fmt::Debug for ServerMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerMemory")
            .field("limit", &self.limit())
            .field("queries", &self.used.load(Ordering::Relaxed))
            .field("external", &self.external_bytes())
            .finish()
    }
}

impl ServerMemory {
    /// A tracker with a cap of `limit` bytes (0 = unlimited) and nothing held outside queries.
    pub fn new(limit: u64) -> Self {
        let s = ServerMemory::default();
        s.set_limit(limit);
        s
    }

    /// A tracker that also counts the caches' current bytes against the cap: `external()`
    /// gives them as (what `relieve` can free, the rest). `bound()` never returns less than
    /// their sum and is cheap (the caches' budgets): a check where the queries' bytes plus
    /// `bound()` stay within the cap does not call `external()` (summing a cache's shards at
    /// every morsel read was an eighth of ClickBench Q2's time from disk). When the queries
    /// and the caches together would pass the cap by `n` bytes and the caches can free that
    /// much, `relieve(n)` frees at least `n` (the block cache evicts its coldest entries)
    /// before the check is made again: the caches give way to the queries (DuckDB's buffer
    /// manager evicts cached blocks for operators' memory the same way). A query that would
    /// not fit even so is refused without evicting anything.
    pub fn with_external(
        limit: u64,
        external: impl Fn() -> (usize, usize) + Send + Sync + 'static,
        bound: impl Fn() -> usize + Send + Sync + 'static,
        relieve: impl Fn(usize) + Send + Sync + 'static,
    ) -> Self {
        let external = External { bytes: Box::new(external), bound: Box::new(bound), relieve: Box::new(relieve) };
        let s = ServerMemory { external: Some(external), ..ServerMemory::default() };
        s.set_limit(limit);
        s
    }

    /// Changes the cap (0 = unlimited); queries running now see it at their next check.
    pub fn set_limit(&self, limit: u64) {
        self.limit.store(usize::try_from(limit).unwrap_or(usize::MAX), Ordering::Relaxed);
    }

    /// The cap in bytes (0 = unlimited).
    pub fn limit(&self) -> usize {
        self.limit.load(Ordering::Relaxed)
    }

    /// Bytes accounted by running queries.
    pub fn query_bytes(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// Bytes held outside queries (the caches).
    pub fn external_bytes(&self) -> usize {
        let (freeable, pinned) = self.external_split();
        freeable.saturating_add(pinned)
    }

    /// Bytes held outside queries: (what relieving frees, the rest).
    fn external_split(&self) -> (usize, usize) {
        self.external.as_ref().map_or((0, 0), |e| (e.bytes)())
    }

    /// Adds `bytes`; fails, adding nothing, if queries and caches would pass the cap.
    fn grow(&self, bytes: usize, operator: &str) -> Result<()> {
        let now = self.used.fetch_add(bytes, Ordering::Relaxed).saturating_add(bytes);
        let limit = self.limit();
        if limit != 0 && now.saturating_add(self.external.as_ref().map_or(0, |e| (e.bound)())) > limit {
            let (freeable, pinned) = self.external_split();
            let mut external = freeable.saturating_add(pinned);
            let over = now.saturating_add(external).saturating_sub(limit);
            if over > 0 && over <= freeable {
                if let Some(e) = &self.external {
                    (e.relieve)(over);
                }
                external = self.external_bytes();
            }
            let total = now.saturating_add(external);
            if total > limit {
                self.used.fetch_sub(bytes, Ordering::Relaxed);
                return Err(Error::ResourcesExhausted(format!(
                    "server memory limit exceeded: max_server_memory_usage = {limit} bytes ({:.1} MiB); running \
                     queries would hold {now} bytes and the caches {external} ({:.1} MiB in all) after {operator} \
                     asked for {bytes} more",
                    mib(limit),
                    mib(total)
                )));
            }
        }
        Ok(())
    }

    fn shrink(&self, bytes: usize) {
        let _ = self.used.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| Some(u.saturating_sub(bytes)));
    }
}

/// Memory limit and cancellation state of one running query.
#[derive(Debug)]
pub struct QueryContext {
    /// `max_memory_usage` in bytes; 0 = unlimited.
    limit: usize,
    used: AtomicUsize,
    peak: AtomicUsize,
    cancel: CancelToken,
    /// The database's tracker, if any: every byte accounted here is accounted there too.
    server: Option<Arc<ServerMemory>>,
    /// `max_temporary_data_on_disk_size` in bytes; 0 = unlimited.
    temp_limit: usize,
    /// Bytes written to temporary files (spilled).
    temp_used: AtomicUsize,
}

impl Default for QueryContext {
    /// No memory limit, a token nobody cancels.
    fn default() -> Self {
        QueryContext::new(0, CancelToken::new())
    }
}

impl Drop for QueryContext {
    fn drop(&mut self) {
        // What the operators did not release (their outputs, say) leaves the server's count
        // with the query.
        if let Some(s) = &self.server {
            s.shrink(*self.used.get_mut());
        }
    }
}

impl QueryContext {
    /// A context with a memory limit of `max_memory_usage` bytes (0 = unlimited) and the
    /// given cancellation token.
    pub fn new(max_memory_usage: u64, cancel: CancelToken) -> Self {
        let limit = usize::try_from(max_memory_usage).unwrap_or(usize::MAX);
        QueryContext {
            limit,
            used: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            cancel,
            server: None,
            temp_limit: 0,
            temp_used: AtomicUsize::new(0),
        }
    }

    /// This context, also accounted in `server` (the database's process-wide cap).
    pub fn with_server(mut self, server: Arc<ServerMemory>) -> Self {
        self.server = Some(server);
        self
    }

    /// This context with at most `bytes` written to temporary files (0 = unlimited;
    /// ClickHouse's `max_temporary_data_on_disk_size`).
    pub fn with_temporary_data_limit(mut self, bytes: u64) -> Self {
        self.temp_limit = usize::try_from(bytes).unwrap_or(usize::MAX);
        self
    }

    /// Bytes the query wrote to temporary files (compressed, as on disk).
    pub fn temporary_data_bytes(&self) -> usize {
        self.temp_used.load(Ordering::Relaxed)
    }

    /// Accounts `bytes` about to be written to a temporary file under `dir`.
    ///
    /// A query that spills is short of memory: the allocator is asked to return the pages
    /// freed so far to the OS ([`tessera_common::memory::release_freed_memory`]), so that
    /// the process's resident memory stays near what its queries account.
    ///
    /// # Errors
    /// [`Error::ResourcesExhausted`] naming `max_temporary_data_on_disk_size` when the query
    /// would write more; [`Error::Cancelled`].
    pub fn grow_temporary(&self, bytes: usize, dir: &Path) -> Result<()> {
        self.check_cancelled()?;
        tessera_common::memory::release_freed_memory();
        let now = self.temp_used.fetch_add(bytes, Ordering::Relaxed).saturating_add(bytes);
        if self.temp_limit != 0 && now > self.temp_limit {
            self.temp_used.fetch_sub(bytes, Ordering::Relaxed);
            return Err(Error::ResourcesExhausted(format!(
                "temporary data limit exceeded: max_temporary_data_on_disk_size = {} bytes ({:.1} MiB), the query \
                 would write {now} bytes to {}",
                self.temp_limit,
                mib(self.temp_limit),
                dir.display()
            )));
        }
        Ok(())
    }

    /// `Err(Error::Cancelled)` once the query's token is cancelled.
    ///
    /// # Errors
    /// [`Error::Cancelled`].
    #[inline]
    pub fn check_cancelled(&self) -> Result<()> {
        if self.cancel.is_cancelled() { Err(Error::Cancelled) } else { Ok(()) }
    }

    /// Bytes currently accounted to the query.
    pub fn memory_usage(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// The most bytes accounted to the query at any time.
    pub fn peak_memory_usage(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    /// Accounts `bytes` more to `operator`. Also checks cancellation.
    ///
    /// # Errors
    /// [`Error::ResourcesExhausted`] naming the limit and the operator when the query would
    /// hold more than `max_memory_usage` bytes, or the server's queries and caches more than
    /// `max_server_memory_usage` (the bytes are then not accounted);
    /// [`Error::Cancelled`].
    pub fn grow(&self, bytes: usize, operator: &str) -> Result<()> {
        self.check_cancelled()?;
        let now = self.used.fetch_add(bytes, Ordering::Relaxed).saturating_add(bytes);
        if self.limit != 0 && now > self.limit {
            self.used.fetch_sub(bytes, Ordering::Relaxed);
            return Err(Error::ResourcesExhausted(format!(
                "memory limit exceeded: max_memory_usage = {} bytes ({:.1} MiB), the query would use {} bytes \
                 ({:.1} MiB) after {operator} asked for {bytes} more",
                self.limit,
                mib(self.limit),
                now,
                mib(now)
            )));
        }
        if let Some(server) = &self.server
            && let Err(e) = server.grow(bytes, operator)
        {
            self.used.fetch_sub(bytes, Ordering::Relaxed);
            return Err(e);
        }
        self.peak.fetch_max(now, Ordering::Relaxed);
        Ok(())
    }

    /// Releases `bytes` accounted earlier.
    pub fn shrink(&self, bytes: usize) {
        // Saturating: a release never underflows the counter even if callers misreport.
        let mut released = 0;
        let _ = self.used.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
            released = u.min(bytes);
            Some(u - released)
        });
        if let Some(server) = &self.server {
            server.shrink(released);
        }
    }

    /// Moves an operator's accounted size from `*accounted` to `now` bytes.
    ///
    /// # Errors
    /// As [`QueryContext::grow`]; `*accounted` is unchanged on error.
    pub fn resize(&self, accounted: &mut usize, now: usize, operator: &str) -> Result<()> {
        if now > *accounted {
            self.grow(now - *accounted, operator)?;
        } else {
            self.shrink(*accounted - now);
            self.check_cancelled()?;
        }
        *accounted = now;
        Ok(())
    }
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_and_peak() {
        let ctx = QueryContext::new(1000, CancelToken::new());
        ctx.grow(600, "a").unwrap();
        let e = ctx.grow(500, "GROUP BY hash table").unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, Error::ResourcesExhausted(_)));
        assert!(msg.contains("max_memory_usage = 1000") && msg.contains("GROUP BY hash table"), "{msg}");
        assert_eq!(ctx.memory_usage(), 600);
        let mut acc = 600;
        ctx.resize(&mut acc, 100, "a").unwrap();
        assert_eq!((ctx.memory_usage(), ctx.peak_memory_usage()), (100, 600));
        ctx.shrink(10_000);
        assert_eq!(ctx.memory_usage(), 0);
        let unlimited = QueryContext::new(0, CancelToken::new());
        unlimited.grow(usize::MAX / 2, "a").unwrap();
    }

    #[test]
    fn server_cap_covers_every_query_and_the_caches() {
        // The caches hold `cache` bytes; relieving them leaves `pinned` (what cannot give way).
        let (cache, bound, pinned, relieved) =
            (Arc::new(AtomicUsize::new(100)), Arc::new(AtomicUsize::new(usize::MAX)), Arc::new(AtomicUsize::new(100)), Arc::new(AtomicUsize::new(0)));
        let (c, p1, b, c2, p, r) = (cache.clone(), pinned.clone(), bound.clone(), cache.clone(), pinned.clone(), relieved.clone());
        let server = Arc::new(ServerMemory::with_external(
            1000,
            move || {
                let (all, kept) = (c.load(Ordering::Relaxed), p1.load(Ordering::Relaxed));
                (all - kept.min(all), kept.min(all))
            },
            move || b.load(Ordering::Relaxed),
            // Frees what it is asked for, down to what cannot give way.
            move |n| {
                r.fetch_add(1, Ordering::Relaxed);
                let kept = p.load(Ordering::Relaxed);
                let _ = c2.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| Some(c.saturating_sub(n).max(kept)));
            },
        ));
        let a = QueryContext::new(0, CancelToken::new()).with_server(server.clone());
        let b = QueryContext::new(800, CancelToken::new()).with_server(server.clone());
        a.grow(500, "x").unwrap();
        b.grow(300, "y").unwrap();
        assert_eq!(server.query_bytes(), 800);
        // 800 + 100 (cache, which cannot give way) + 200 > 1000: refused, naming the cap;
        // nothing accounted, nothing relieved (it would not help).
        let e = b.grow(200, "GROUP BY hash table").unwrap_err();
        assert!(e.to_string().contains("max_server_memory_usage = 1000"), "{e}");
        assert_eq!((b.memory_usage(), server.query_bytes(), relieved.load(Ordering::Relaxed)), (300, 800, 0));
        // A query that would not fit even with the caches emptied leaves them alone.
        pinned.store(0, Ordering::Relaxed);
        assert!(b.grow(300, "y").is_err());
        assert_eq!((cache.load(Ordering::Relaxed), relieved.load(Ordering::Relaxed)), (100, 0));
        // One that fits once they give way frees what it needs (800 + 100 + 150 is 50 over)
        // and goes on.
        b.grow(150, "y").unwrap();
        assert_eq!((cache.load(Ordering::Relaxed), relieved.load(Ordering::Relaxed)), (50, 1));
        b.grow(50, "y").unwrap();
        assert_eq!((cache.load(Ordering::Relaxed), relieved.load(Ordering::Relaxed)), (0, 2));
        b.shrink(10_000);
        assert_eq!(server.query_bytes(), 500);
        b.grow(100, "y").unwrap();
        // A bound within the cap spares reading the caches' size (here a wrong one: the
        // caller's bound is trusted), one above it reads it.
        cache.store(10_000, Ordering::Relaxed);
        pinned.store(10_000, Ordering::Relaxed);
        bound.store(100, Ordering::Relaxed);
        b.grow(100, "y").unwrap();
        assert_eq!(relieved.load(Ordering::Relaxed), 2);
        bound.store(usize::MAX, Ordering::Relaxed);
        assert!(b.grow(1, "y").is_err());
        b.shrink(100);
        drop(b);
        drop(a);
        assert_eq!(server.query_bytes(), 0);
        server.set_limit(0);
        QueryContext::new(0, CancelToken::new()).with_server(server).grow(usize::MAX / 4, "z").unwrap();
    }

    #[test]
    fn cancel() {
        let t = CancelToken::new();
        let ctx = QueryContext::new(0, t.clone());
        ctx.check_cancelled().unwrap();
        t.cancel();
        assert!(matches!(ctx.check_cancelled(), Err(Error::Cancelled)));
        assert!(matches!(ctx.grow(1, "a"), Err(Error::Cancelled)));
    }
}
