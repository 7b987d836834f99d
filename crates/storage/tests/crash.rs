//! Crash safety: a child process inserts batches (and merges now and then) into a table
//! while the parent kills it with SIGKILL at random instants, many times. After each kill
//! the database must open cleanly and hold exactly the acknowledged batches, plus at most
//! the one batch whose insert was in flight, each batch either whole or absent.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use tessera_storage::{Store, TableOptions};

const ROWS_PER_BATCH: i64 = 3000;
const KILLS: usize = 30;
const CHILD_ENV: &str = "TESSERA_CRASH_CHILD_DIR";
const START_ENV: &str = "TESSERA_CRASH_CHILD_START";

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("tag", DataType::Utf8, false),
    ]))
}

fn batch(b: i64) -> RecordBatch {
    let ids: Vec<i64> = (0..ROWS_PER_BATCH).map(|i| b * ROWS_PER_BATCH + (ROWS_PER_BATCH - 1 - i)).collect();
    let tags: Vec<String> = ids.iter().map(|i| format!("tag-{}-{}", i % 97, "z".repeat((i % 40) as usize))).collect();
    RecordBatch::try_new(schema(), vec![Arc::new(Int64Array::from(ids)), Arc::new(StringArray::from(tags))]).unwrap()
}

/// The batch numbers present in the table; panics unless every batch is whole and intact.
fn batches_present(dir: &Path) -> BTreeSet<i64> {
    let store = Store::open(dir).expect("database opens after a crash");
    let t = store.table("t").expect("table exists").snapshot().unwrap();
    let cols = t.columns(&[0, 1]).expect("all blocks verify");
    let mut count = std::collections::BTreeMap::<i64, i64>::new();
    for (ids, tags) in cols[0].iter().zip(cols[1].iter()) {
        let ids = ids.as_primitive::<Int64Type>();
        let tags = tags.as_string::<i32>();
        for i in 0..ids.len() {
            let id = ids.value(i);
            assert_eq!(tags.value(i), format!("tag-{}-{}", id % 97, "z".repeat((id % 40) as usize)));
            *count.entry(id / ROWS_PER_BATCH).or_default() += 1;
        }
    }
    for (b, n) in &count {
        assert_eq!(*n, ROWS_PER_BATCH, "batch {b} is partial");
    }
    count.into_keys().collect()
}

/// Not a test on its own: the body of the child process (does nothing without the env).
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else { return };
    let start: i64 = std::env::var(START_ENV).unwrap().parse().unwrap();
    let store = Store::open(Path::new(&dir)).unwrap();
    let t = store.table("t").unwrap();
    for b in start.. {
        t.insert(&[batch(b)]).unwrap();
        println!("acked {b}");
        if b % 3 == 2 {
            t.optimize().unwrap();
            println!("merged");
        }
    }
}

/// A command that runs this test binary: directly, or through `TESSERA_TEST_RUNNER` (e.g.
/// `qemu-aarch64 -L / -cpu max`, set by scripts/check-aarch64.sh) where the binary cannot be
/// exec'd natively. Killing the runner kills the emulated child with it.
fn runner_command(exe: &std::path::Path) -> Command {
    match std::env::var("TESSERA_TEST_RUNNER") {
        Ok(r) if !r.trim().is_empty() => {
            let mut parts = r.split_whitespace();
            let mut c = Command::new(parts.next().expect("non-empty runner"));
            c.args(parts).arg(exe);
            c
        }
        _ => Command::new(exe),
    }
}

#[test]
fn killed_inserts_and_merges_leave_whole_parts_only() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(dir.path()).unwrap();
        let opts = TableOptions { order_by: vec!["id".into()], granule_rows: 256, ..TableOptions::default() };
        store.create_table("t", schema(), opts).unwrap();
    }
    let exe = std::env::current_exe().unwrap();
    let mut rng: u64 = 0x5EED;
    let mut present = BTreeSet::new();
    let mut partial_seen = 0;
    for _ in 0..KILLS {
        let next = present.iter().next_back().map_or(0, |b| b + 1);
        let mut child = runner_command(&exe)
            .args(["crash_child", "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, dir.path())
            .env(START_ENV, next.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let delay = Duration::from_millis(20 + (rng >> 33) % 250);
        let stdout = child.stdout.take().unwrap();
        // Acks stream through a channel: the kill is timed from the child's first ack, not
        // from its start, so a slow host (qemu, a loaded CI machine) still lets every child
        // commit something, and the kill lands at a random point of its insert loop.
        let (tx, rx) = std::sync::mpsc::channel::<i64>();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                // The harness may print "test crash_child ... " on the same line first.
                if let Some(b) = line.rsplit("acked ").next().filter(|_| line.contains("acked ")) {
                    if let Ok(b) = b.trim().parse::<i64>() {
                        let _ = tx.send(b);
                    }
                }
            }
        });
        let mut acked = Vec::new();
        if let Ok(b) = rx.recv_timeout(Duration::from_secs(120)) {
            acked.push(b);
        }
        let t0 = Instant::now();
        while t0.elapsed() < delay {
            std::thread::sleep(Duration::from_millis(5));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        reader.join().unwrap();
        acked.extend(rx.try_iter());
        let now = batches_present(dir.path());
        let mut expect: BTreeSet<i64> = present.clone();
        expect.extend(acked.iter().copied());
        let in_flight = acked.last().map_or(next, |b| b + 1);
        let mut with_flight = expect.clone();
        with_flight.insert(in_flight);
        assert!(now == expect || now == with_flight, "acked {acked:?}, had {present:?}, found {now:?}");
        if now == with_flight {
            partial_seen += 1;
        }
        present = now;
        // No temporary directories survive an open.
        let leftovers = std::fs::read_dir(dir.path().join("t"))
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("tmp_"))
            .count();
        assert_eq!(leftovers, 0);
    }
    assert!(present.len() >= KILLS / 2, "too few inserts got through: {present:?}");
    // Parts renamed into place by a killed insert or merge before its manifest commit were
    // moved aside at the next open: never counted (checked above), kept for inspection.
    let detached = std::fs::read_dir(dir.path().join("t").join("detached")).map_or(0, |d| d.count());
    eprintln!(
        "{KILLS} kills, {} batches committed, {partial_seen} kills after commit but before the ack, {detached} uncommitted parts detached",
        present.len()
    );
}
