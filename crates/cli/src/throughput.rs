//! `tessera bench --mode throughput`: `clickhouse-benchmark --concurrency=N` for an embedded
//! engine. N client threads share one `Database` and send the chosen queries continuously
//! (client after client takes the next query of the list, round robin) after a warm-up run
//! of each query; the run stops after `--duration` seconds or `--iterations` queries in all
//! (a query running at the deadline finishes and counts). Reported: QPS, latency p50/p90/p99
//! per query and overall, CPU utilisation (process CPU time / wall time / vCPUs) and peak RSS.
//!
//! Each query keeps its own `max_threads` (default: vCPUs), so N clients oversubscribe the
//! machine as ClickHouse does; `--set concurrent_threads_soft_limit_num=V` caps the worker
//! threads of all running queries together for fair sharing instead.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use tessera_engine::{CancelToken, Database, Error, Result};

/// When a throughput run stops.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Options {
    /// Client threads.
    pub(crate) concurrency: usize,
    /// Stop starting queries after this long.
    pub(crate) duration: Option<Duration>,
    /// Stop after this many queries in all.
    pub(crate) iterations: Option<usize>,
}

/// Latency distribution, seconds (nearest-rank percentiles).
#[derive(Serialize, Debug, Clone)]
pub(crate) struct Latency {
    pub(crate) mean_seconds: f64,
    pub(crate) p50_seconds: f64,
    pub(crate) p90_seconds: f64,
    pub(crate) p99_seconds: f64,
    pub(crate) max_seconds: f64,
}

impl Latency {
    pub(crate) fn of(times: &[f64]) -> Latency {
        let mut s = times.to_vec();
        s.sort_by(f64::total_cmp);
        let rank = |p: f64| -> f64 {
            if s.is_empty() {
                return f64::NAN;
            }
            let i = ((p / 100.0 * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1;
            s[i]
        };
        Latency {
            mean_seconds: if s.is_empty() { f64::NAN } else { s.iter().sum::<f64>() / s.len() as f64 },
            p50_seconds: rank(50.0),
            p90_seconds: rank(90.0),
            p99_seconds: rank(99.0),
            max_seconds: s.last().copied().unwrap_or(f64::NAN),
        }
    }
}

/// One query's share of a throughput run.
#[derive(Serialize, Debug)]
pub(crate) struct QueryThroughput {
    pub(crate) query: usize,
    pub(crate) completed: usize,
    pub(crate) qps: f64,
    pub(crate) latency: Latency,
}

/// The result of one throughput run.
#[derive(Serialize, Debug)]
pub(crate) struct Throughput {
    /// Client threads.
    pub(crate) concurrency: usize,
    /// `max_threads` of each query.
    pub(crate) threads_per_query: usize,
    /// `concurrent_threads_soft_limit_num` (0 = unlimited: queries oversubscribe).
    pub(crate) threads_soft_limit: usize,
    pub(crate) wall_seconds: f64,
    pub(crate) completed: usize,
    /// Queries completed per second of wall time, all queries together.
    pub(crate) qps: f64,
    pub(crate) latency: Latency,
    pub(crate) per_query: Vec<QueryThroughput>,
    /// User + system CPU time of the process during the run.
    pub(crate) cpu_seconds: f64,
    /// `cpu_seconds / wall_seconds / vcpus`, percent (100 = every vCPU busy all the time).
    pub(crate) cpu_utilisation_percent: f64,
}

/// User + system CPU time of this process so far, seconds (NaN where unknown).
pub(crate) fn process_cpu_seconds() -> f64 {
    #[cfg(unix)]
    {
        let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: `ru` is valid for writes of one `rusage`, which getrusage fills on success;
        // RUSAGE_SELF is a valid `who`.
        let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) };
        if rc != 0 {
            return f64::NAN;
        }
        // SAFETY: rc == 0, so the kernel initialised the whole struct (and it started zeroed).
        let ru = unsafe { ru.assume_init() };
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
        tv(ru.ru_utime) + tv(ru.ru_stime)
    }
    #[cfg(not(unix))]
    {
        f64::NAN
    }
}

/// Runs `queries` (number, SQL) on `db` with `opts.concurrency` clients; returns the result
/// and each query's latencies (seconds, in completion order per client).
///
/// # Errors
/// The first error of any query (the other clients stop at their next query), including
/// [`Error::Cancelled`] when `cancel` fires (Ctrl-C).
pub(crate) fn run(
    db: &Database,
    queries: &[(usize, &str)],
    opts: Options,
    cancel: &CancelToken,
) -> Result<(Throughput, Vec<Vec<f64>>)> {
    if opts.concurrency == 0 {
        return Err(Error::InvalidArgument("--concurrency must be at least 1".into()));
    }
    for (_, sql) in queries {
        db.sql_cancellable(sql, cancel)?; // warm-up
    }
    let settings = db.settings();
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let cpu0 = process_cpu_seconds();
    let start = Instant::now();
    let per_client: Vec<Result<Vec<(usize, f64)>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..opts.concurrency)
            .map(|_| {
                s.spawn(|| -> Result<Vec<(usize, f64)>> {
                    let mut done = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if opts.iterations.is_some_and(|k| i >= k) || opts.duration.is_some_and(|d| start.elapsed() >= d) {
                            break;
                        }
                        let q = i % queries.len();
                        let t = Instant::now();
                        if let Err(e) = db.sql_cancellable(queries[q].1, cancel) {
                            stop.store(true, Ordering::Relaxed);
                            return Err(e);
                        }
                        done.push((q, t.elapsed().as_secs_f64()));
                    }
                    Ok(done)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(Error::internal("a benchmark client panicked"))))
            .collect()
    });
    let wall = start.elapsed().as_secs_f64();
    let cpu = process_cpu_seconds() - cpu0;
    let mut lat: Vec<Vec<f64>> = vec![Vec::new(); queries.len()];
    for client in per_client {
        for (q, t) in client? {
            lat[q].push(t);
        }
    }
    let all: Vec<f64> = lat.iter().flatten().copied().collect();
    let per_query = queries
        .iter()
        .zip(&lat)
        .map(|((q, _), l)| QueryThroughput { query: *q, completed: l.len(), qps: l.len() as f64 / wall, latency: Latency::of(l) })
        .collect();
    let vcpus = tessera_common::default_threads();
    let t = Throughput {
        concurrency: opts.concurrency,
        threads_per_query: settings.max_threads,
        threads_soft_limit: settings.concurrent_threads_soft_limit_num,
        wall_seconds: wall,
        completed: all.len(),
        qps: all.len() as f64 / wall,
        latency: Latency::of(&all),
        per_query,
        cpu_seconds: cpu,
        cpu_utilisation_percent: cpu / wall / vcpus as f64 * 100.0,
    };
    Ok((t, lat))
}

/// Prints one throughput run: one line per query, then the overall line.
pub(crate) fn print(t: &Throughput) {
    println!(
        "concurrency {} x max_threads {}{}: {} queries in {:.2} s",
        t.concurrency,
        t.threads_per_query,
        if t.threads_soft_limit > 0 { format!(" (soft limit {} threads)", t.threads_soft_limit) } else { String::new() },
        t.completed,
        t.wall_seconds
    );
    let line = |name: String, n: usize, qps: f64, l: &Latency| {
        println!(
            "  {name:<5} {n:>6} done  {qps:>8.2} QPS   p50 {:>8.4} s   p90 {:>8.4} s   p99 {:>8.4} s",
            l.p50_seconds, l.p90_seconds, l.p99_seconds
        )
    };
    for q in &t.per_query {
        line(format!("Q{}", q.query), q.completed, q.qps, &q.latency);
    }
    line("all".into(), t.completed, t.qps, &t.latency);
    println!("  CPU {:.1} s = {:.0}% of all vCPUs over the run", t.cpu_seconds, t.cpu_utilisation_percent);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        let l = Latency::of(&v);
        assert_eq!((l.p50_seconds, l.p90_seconds, l.p99_seconds, l.max_seconds), (50.0, 90.0, 99.0, 100.0));
        assert_eq!(l.mean_seconds, 50.5);
        let one = Latency::of(&[0.25]);
        assert_eq!((one.p50_seconds, one.p99_seconds), (0.25, 0.25));
        assert!(Latency::of(&[]).p50_seconds.is_nan());
    }

    #[test]
    fn clients_share_one_database() {
        let db = Database::new();
        let schema = std::sync::Arc::new(arrow::datatypes::Schema::new(vec![arrow::datatypes::Field::new(
            "x",
            arrow::datatypes::DataType::Int64,
            false,
        )]));
        let col = std::sync::Arc::new(arrow::array::Int64Array::from((0..1000).collect::<Vec<i64>>()));
        let batch = arrow::array::RecordBatch::try_new(schema.clone(), vec![col]).unwrap();
        db.register_batches("t", schema, &[batch]).unwrap();
        let queries = [(1, "SELECT COUNT(*) FROM t"), (2, "SELECT x, COUNT(*) FROM t GROUP BY x LIMIT 3")];
        let opts = Options { concurrency: 3, duration: None, iterations: Some(40) };
        let (t, lat) = run(&db, &queries, opts, &CancelToken::new()).unwrap();
        assert_eq!(t.completed, 40);
        assert_eq!((lat[0].len(), lat[1].len()), (20, 20)); // round robin over the list
        assert_eq!(t.per_query.iter().map(|q| q.completed).sum::<usize>(), 40);
        assert!(t.qps > 0.0 && t.latency.p50_seconds <= t.latency.p99_seconds);
        let cancelled = CancelToken::new();
        cancelled.cancel();
        assert!(matches!(run(&db, &queries, opts, &cancelled), Err(Error::Cancelled)));
    }
}
