//! The allocator release hook (`tessera::memory`): a query that spills asks the embedding
//! program to return freed memory to the OS. In its own test binary: the hook is
//! process-wide, and other tests spilling in parallel would call it too.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

use tessera::arrow::array::*;
use tessera::arrow::datatypes::*;
use tessera::{Database, Settings};

static RELEASES: AtomicUsize = AtomicUsize::new(0);

fn count_release() {
    RELEASES.fetch_add(1, SeqCst);
}

/// A GROUP BY and an ORDER BY that spill each call the registered release hook, which a
/// query that does not spill never calls; a second hook is refused.
#[test]
fn spilling_queries_ask_the_allocator_to_release_memory() {
    let rows = 50_000i64;
    let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false), Field::new("s", DataType::Utf8, false)]));
    let k: Vec<i64> = (0..rows).map(|i| (i * 7919) % 20_000).collect();
    let s: Vec<String> = (0..rows).map(|i| format!("value-{}", (i * 104_729) % 30_000)).collect();
    let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(k)), Arc::new(StringArray::from(s))]).unwrap();
    let db = Database::new();
    db.register_batches("t", schema, &[batch]).unwrap();
    assert!(tessera::memory::set_release_hook(count_release));
    assert!(!tessera::memory::set_release_hook(|| panic!("a second hook must not be registered")));
    let group_by = "SELECT k, COUNT(*) AS c, MIN(s) FROM t GROUP BY k ORDER BY c DESC, k LIMIT 10";
    let order_by = "SELECT k, s FROM t ORDER BY s, k";
    let mut plain = Settings::default();
    plain.max_threads = 2;
    for sql in [group_by, order_by] {
        let (_, profile) = db.sql_profiled(sql, Some(&plain)).unwrap();
        assert_eq!((profile.spills, RELEASES.load(SeqCst)), (0, 0), "{sql}");
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut spilling = plain.clone();
    spilling.tmp_path = Some(tmp.path().to_path_buf());
    spilling.max_bytes_before_external_group_by = 32 << 10;
    spilling.max_bytes_before_external_sort = 32 << 10;
    for sql in [group_by, order_by] {
        // The hook runs at most once per interval: wait one out so each query may call it.
        std::thread::sleep(tessera::memory::RELEASE_INTERVAL);
        let before = RELEASES.load(SeqCst);
        let (_, profile) = db.sql_profiled(sql, Some(&spilling)).unwrap();
        assert!(profile.spills > 0, "{sql}: {profile:?}");
        assert!(RELEASES.load(SeqCst) > before, "{sql}: the release hook was not called");
    }
}
