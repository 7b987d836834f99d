//! Bounded, deterministic corruption fuzzing of a database directory (the long run:
//! `cargo run --release -p tessera-storage --example fuzz_corrupt -- --cases 10000`).
//! Every case must end in the correct answer or a typed `Corrupt`/`Io` error naming what
//! was damaged: never a panic, an internal error or a silently different answer.

#[path = "support/corrupt_fuzz.rs"]
mod fuzz;

use fuzz::Outcome;

/// Every file kind of every part, every part-directory, manifest and table.json operation.
#[test]
fn systematic_damage_is_detected_or_harmless() {
    let t = fuzz::template();
    let work = fuzz::scratch_dir();
    let cases = fuzz::systematic_cases(t.parts.len());
    let n = cases.len();
    let rep = fuzz::run(&t, work.path(), cases);
    assert!(rep.failures.is_empty(), "{} of {n} cases failed:\n{}", rep.failures.len(), rep.failures.join("\n"));
    assert_eq!(rep.cases(), n);
    // The damage that must be refused, and the damage that must be harmless.
    let kind = |k: &str| rep.by_kind.get(k).cloned().unwrap_or_default();
    assert_eq!(kind("part dir Delete").get(&Outcome::Corrupt), Some(&3));
    assert_eq!(kind("part dir Rename").get(&Outcome::Corrupt), Some(&6));
    assert_eq!(kind("part dir ReplaceWithPart").get(&Outcome::Corrupt), Some(&3));
    // Copies under a new or covering name are detached, one covered by the merged part is
    // removed (each with a warning); a non-canonical name is ignored: the answer stays right.
    let dup = kind("part dir Duplicate");
    assert_eq!(dup.get(&Outcome::CorrectDetached), Some(&9), "{dup:?}");
    assert_eq!(dup.get(&Outcome::Correct), Some(&3), "{dup:?}");
    for k in ["manifest.txt Delete", "manifest.txt Truncate", "table.json Delete", "table.json Flip", "part/checksums.txt Flip"] {
        assert_eq!(kind(k).keys().copied().collect::<Vec<_>>(), vec![Outcome::Corrupt], "{k}: {:?}", kind(k));
    }
    eprintln!("{n} systematic cases: {:?}", rep.outcomes);
}

/// Random cases from fixed seeds.
#[test]
fn random_damage_is_detected_or_harmless() {
    let t = fuzz::template();
    let work = fuzz::scratch_dir();
    let cases: Vec<_> = (0..300u64).map(|s| fuzz::random_case(s.wrapping_mul(0x9E37_79B9) ^ 0xC0FFEE, t.parts.len())).collect();
    let rep = fuzz::run(&t, work.path(), cases);
    assert!(rep.failures.is_empty(), "{} failures:\n{}", rep.failures.len(), rep.failures.join("\n"));
    assert!(rep.outcomes.get(&Outcome::Corrupt).copied().unwrap_or(0) > 200, "{:?}", rep.outcomes);
    eprintln!("300 random cases: {:?}", rep.outcomes);
}
