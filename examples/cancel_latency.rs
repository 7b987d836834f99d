//! How long a running query takes to stop after `CancelToken::cancel`:
//! `cargo run --release --example cancel_latency -- hits.parquet [trials]`.
//!
//! Loads the columns of ClickBench Q19, Q33 and Q34, then per trial starts one of them on
//! a thread, cancels it after a delay that sweeps the query's run time, and measures the
//! time from `cancel()` to the query's return (the buffers are dropped by then).

use std::time::{Duration, Instant};

use tessera::{CancelToken, Database, Error};

fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or_else(|| Error::InvalidArgument("usage: cancel_latency FILE [trials]".into()))?;
    let trials: u32 = args.next().map_or(Ok(12), |t| t.parse()).map_err(|_| Error::InvalidArgument("trials".into()))?;
    let db = Database::new();
    db.register_parquet_with_schema("hits", path.as_ref(), tessera::datasets::hits::schema())?;
    let queries: Vec<(usize, &str)> = [19, 33, 34]
        .into_iter()
        .map(|q| tessera::datasets::hits::query(q).map(|s| (q, s)))
        .collect::<Result<_, _>>()?;
    let mut full = Vec::new();
    for &(q, sql) in &queries {
        db.preload(sql)?;
        let t = Instant::now();
        db.sql(sql)?;
        full.push(t.elapsed());
        println!("Q{q}: full run {:.3} s", full.last().unwrap().as_secs_f64());
    }
    let mut stops = Vec::new();
    for i in 0..trials {
        let k = i as usize % queries.len();
        let (q, sql) = queries[k];
        // Cancel at 10%..90% of the query's full run time.
        let delay = full[k].mul_f64(0.1 + 0.8 * f64::from(i) / f64::from(trials.max(1)));
        let token = CancelToken::new();
        let stop = std::thread::scope(|s| {
            let h = s.spawn(|| db.sql_cancellable(sql, &token));
            std::thread::sleep(delay);
            let t = Instant::now();
            token.cancel();
            let r = h.join().expect("query thread");
            (t.elapsed(), r.is_err())
        });
        println!("Q{q}: cancelled after {:>6.3} s, stopped in {:>7.2} ms (cancelled: {})", delay.as_secs_f64(), stop.0.as_secs_f64() * 1e3, stop.1);
        if stop.1 {
            stops.push(stop.0); // a query that finished before cancel() is not counted
        }
    }
    stops.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    if let (Some(mid), Some(max)) = (stops.get(stops.len() / 2), stops.last()) {
        println!("stop latency: median {:.2} ms, max {:.2} ms over {} cancelled runs", ms(*mid), ms(*max), stops.len());
    }
    Ok(())
}
