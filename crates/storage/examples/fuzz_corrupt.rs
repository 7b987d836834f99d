//! Long corruption fuzzing of a database directory, on demand:
//!
//! ```sh
//! cargo run --release -p tessera-storage --example fuzz_corrupt -- --cases 10000 [--seed 1] [--systematic]
//! ```
//!
//! Prints the outcome counts (correct answer, correct with parts detached, `Corrupt`, `Io`)
//! overall and per damage kind, and every failure (a panic, another error kind, an error
//! naming the wrong file, a silently different answer); exits 1 if there was any.

#[path = "../tests/support/corrupt_fuzz.rs"]
mod fuzz;

fn main() -> std::process::ExitCode {
    let mut cases = 1000u64;
    let mut seed = 1u64;
    let mut systematic = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut num = |name: &str| -> u64 {
            args.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
                eprintln!("{name} needs a number");
                std::process::exit(2)
            })
        };
        match a.as_str() {
            "--cases" => cases = num("--cases"),
            "--seed" => seed = num("--seed"),
            "--systematic" => systematic = true,
            other => {
                eprintln!("unknown argument {other}; use --cases N --seed S --systematic");
                return std::process::ExitCode::from(2);
            }
        }
    }
    let t = fuzz::template();
    let work = fuzz::scratch_dir();
    let start = std::time::Instant::now();
    let mut all: Vec<fuzz::Case> = if systematic { fuzz::systematic_cases(t.parts.len()) } else { Vec::new() };
    all.extend((0..cases).map(|i| fuzz::random_case(seed.wrapping_mul(0x1000_0000_01B3) ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15), t.parts.len())));
    let rep = fuzz::run(&t, work.path(), all);
    println!("{} cases in {:.1} s (seed {seed}{})", rep.cases(), start.elapsed().as_secs_f64(), if systematic { ", with the systematic cases" } else { "" });
    println!("outcomes: {:?}, failures: {}", rep.outcomes, rep.failures.len());
    for (k, o) in &rep.by_kind {
        println!("  {k:<32} {o:?}");
    }
    for f in &rep.failures {
        println!("FAILURE: {f}");
    }
    if rep.failures.is_empty() { std::process::ExitCode::SUCCESS } else { std::process::ExitCode::from(1) }
}
