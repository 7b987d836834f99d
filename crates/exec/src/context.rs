//! Per-query state shared by the operators of one query: memory accounting against
//! `max_memory_usage` and cancellation.
//!
//! Operators report what their big buffers hold (hash tables, radix-partition buffers,
//! top-N and sort buffers) with [`QueryContext::grow`] / [`QueryContext::shrink`], once per
//! morsel or per partition, not per allocation: a query may overshoot its limit by what one
//! morsel (65,536 rows) or one hash-table doubling adds before it fails. Capacity is counted,
//! not touched bytes, as ClickHouse's memory tracker counts allocations.
//!
//! Cancellation is cooperative: workers check the [`CancelToken`] before each morsel (and
//! each radix partition of the final phase, and every 65,536 groups of a top-N pass), so a
//! query stops within one morsel's work per thread after [`CancelToken::cancel`]; its
//! buffers are freed as the error unwinds the operators.

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

/// Memory limit and cancellation state of one running query.
#[derive(Debug, Default)]
pub struct QueryContext {
    /// `max_memory_usage` in bytes; 0 = unlimited.
    limit: usize,
    used: AtomicUsize,
    peak: AtomicUsize,
    cancel: CancelToken,
}

impl QueryContext {
    /// A context with a memory limit of `max_memory_usage` bytes (0 = unlimited) and the
    /// given cancellation token.
    pub fn new(max_memory_usage: u64, cancel: CancelToken) -> Self {
        let limit = usize::try_from(max_memory_usage).unwrap_or(usize::MAX);
        QueryContext { limit, cancel, ..Self::default() }
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
    /// hold more than `max_memory_usage` bytes (the bytes are then not accounted);
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
        self.peak.fetch_max(now, Ordering::Relaxed);
        Ok(())
    }

    /// Releases `bytes` accounted earlier.
    pub fn shrink(&self, bytes: usize) {
        // Saturating: a release never underflows the counter even if callers misreport.
        let _ = self.used.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| Some(u.saturating_sub(bytes)));
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
    fn cancel() {
        let t = CancelToken::new();
        let ctx = QueryContext::new(0, t.clone());
        ctx.check_cancelled().unwrap();
        t.cancel();
        assert!(matches!(ctx.check_cancelled(), Err(Error::Cancelled)));
        assert!(matches!(ctx.grow(1, "a"), Err(Error::Cancelled)));
    }
}
