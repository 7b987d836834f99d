//! Scheduling: rayon thread pools sized by `max_threads`, and a morsel-driven driver in
//! which each worker pulls the next morsel (chunk index) from a shared counter until none
//! is left (Leis et al., "Morsel-Driven Parallelism", SIGMOD 2014). A fast worker simply
//! takes more morsels, so skew between morsels does not idle threads.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rayon::prelude::*;
use tessera_common::{Error, Result};

/// Thread pools by size, created on first use and shared by all queries of a database.
#[derive(Debug, Default)]
pub struct Pools {
    pools: Mutex<HashMap<usize, Arc<rayon::ThreadPool>>>,
}

impl Pools {
    /// The pool with exactly `threads` workers.
    ///
    /// # Errors
    /// [`Error::ResourcesExhausted`] if the OS refuses to start the threads.
    pub fn get(&self, threads: usize) -> Result<Arc<rayon::ThreadPool>> {
        let threads = threads.max(1);
        let mut pools = self.pools.lock().map_err(|_| Error::internal("pool lock poisoned"))?;
        if let Some(p) = pools.get(&threads) {
            return Ok(p.clone());
        }
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(move |i| format!("tessera-{threads}-{i}"))
            .build()
            .map_err(|e| Error::ResourcesExhausted(format!("cannot start {threads} threads: {e}")))?;
        let pool = Arc::new(pool);
        pools.insert(threads, pool.clone());
        Ok(pool)
    }
}

/// Runs `work` over morsels `0..morsels` on `threads` workers of `pool`. Each worker owns a
/// state made by `init` and returns it; states of all workers come back (workers that found
/// no morsel return their fresh state too). The first error stops the other workers at
/// their next morsel. Zero or one morsel runs on the calling thread, outside the pool.
///
/// # Errors
/// The first error `work` returned.
pub fn run_morsels<S, I, W>(pool: &rayon::ThreadPool, threads: usize, morsels: usize, init: I, work: W) -> Result<Vec<S>>
where
    S: Send,
    I: Fn() -> S + Sync,
    W: Fn(&mut S, usize) -> Result<()> + Sync,
{
    let next = AtomicUsize::new(0);
    let workers = threads.max(1).min(morsels.max(1));
    let worker = || {
        let mut state = init();
        loop {
            let m = next.fetch_add(1, Ordering::Relaxed);
            if m >= morsels {
                break;
            }
            if let Err(e) = work(&mut state, m) {
                next.store(morsels, Ordering::Relaxed);
                return Err(e);
            }
        }
        Ok(state)
    };
    if workers == 1 && morsels <= 1 {
        // One morsel (a point or short range query over one granule run): the caller's
        // thread does it. Handing it to a pool thread and waiting costs two wake-ups, which
        // is most of such a query's time and all of its tail latency.
        return worker().map(|s| vec![s]);
    }
    pool.install(|| (0..workers).into_par_iter().map(|_| worker()).collect())
}
