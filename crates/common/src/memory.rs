//! Handing freed memory back to the operating system when a query runs short of it.
//!
//! Allocators keep the pages a program frees for its next allocations (jemalloc's "dirty"
//! pages, returned to the OS after `dirty_decay_ms`): a query that allocates and frees
//! gigabytes reuses its pages instead of page-faulting and zeroing new ones. Kept too long,
//! those pages make the process's resident memory exceed what the queries account, which
//! matters when memory is short, that is when a query spills to disk.
//!
//! The engine cannot return pages itself (the allocator is the embedding program's choice),
//! so the program registers how ([`set_release_hook`]; the `tessera` CLI registers jemalloc's
//! `arena.<all>.purge`), and the engine asks for it ([`release_freed_memory`]) each time a
//! query writes to a temporary file, at most once per [`RELEASE_INTERVAL`]. ClickHouse
//! likewise purges jemalloc's arenas when the server's memory is over its limit.
//! Without a hook, nothing happens.

use std::sync::{Mutex, OnceLock, TryLockError};
use std::time::{Duration, Instant};

/// Least time between two calls of the hook: a spill appends many runs in a row, and one
/// purge per spill is enough.
pub const RELEASE_INTERVAL: Duration = Duration::from_millis(100);

static HOOK: OnceLock<fn()> = OnceLock::new();
static LAST: Mutex<Option<Instant>> = Mutex::new(None);

/// Registers `hook`, which returns the allocator's freed pages to the OS (for jemalloc:
/// `mallctl("arena.4096.purge")`). It must be cheap to call repeatedly and must not
/// allocate much. `false` (and `hook` not registered) if one was registered before.
pub fn set_release_hook(hook: fn()) -> bool {
    HOOK.set(hook).is_ok()
}

/// Calls the registered hook, unless it ran less than [`RELEASE_INTERVAL`] ago, another
/// thread is calling it now, or none is registered.
pub fn release_freed_memory() {
    let Some(hook) = HOOK.get() else { return };
    // A thread that finds the lock taken skips: the purge under way serves it too. A hook
    // that panicked once leaves the lock poisoned: the time it holds is still right.
    let mut last = match LAST.try_lock() {
        Ok(last) => last,
        Err(TryLockError::Poisoned(p)) => p.into_inner(),
        Err(TryLockError::WouldBlock) => return,
    };
    let now = Instant::now();
    if last.is_some_and(|t| now.duration_since(t) < RELEASE_INTERVAL) {
        return;
    }
    hook();
    *last = Some(now);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static CALLS: AtomicUsize = AtomicUsize::new(0);

    fn count() {
        CALLS.fetch_add(1, Ordering::Relaxed);
    }

    /// The hook runs once per interval however often it is asked for; a second hook is
    /// refused.
    #[test]
    fn the_hook_runs_at_most_once_per_interval() {
        release_freed_memory(); // no hook yet: nothing to call, no panic
        assert!(set_release_hook(count));
        assert!(!set_release_hook(|| panic!("a second hook must not be registered")));
        let start = Instant::now();
        for _ in 0..100 {
            release_freed_memory();
        }
        // (Unless this thread was descheduled for an interval: then one more call is right.)
        if start.elapsed() < RELEASE_INTERVAL {
            assert_eq!(CALLS.load(Ordering::Relaxed), 1);
        }
        CALLS.store(1, Ordering::Relaxed);
        std::thread::sleep(RELEASE_INTERVAL + Duration::from_millis(20));
        release_freed_memory();
        release_freed_memory();
        assert!((2..=3).contains(&CALLS.load(Ordering::Relaxed)));
    }
}
