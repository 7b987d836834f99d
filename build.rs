//! Top-level build script, shared by the facade crate and `tessera-kernels`.
//!
//! Emits build facts as environment variables for `env!`:
//! - `TESSERA_GIT_HASH`: short git hash of the source tree (or `unknown`);
//! - `TESSERA_TARGET_ARCH`: the target architecture.
//!
//! - `TESSERA_SIMD_BUILD`: the build-time SIMD selection (`TESSERA_SIMD`, default `auto`);
//! - `TESSERA_SIMD_COMPILED`: the kernel families compiled, e.g. `scalar,portable,avx2,avx512`.
//!
//! and the cfgs `tessera_portable`, `tessera_avx2`, `tessera_avx512`, `tessera_neon`, `tessera_sve`, one per
//! kernel family compiled (`tessera-kernels` gates its modules on them). `TESSERA_SIMD`:
//! - `auto` (default): every family of the target arch; runtime dispatch picks one;
//! - `native`: the families the target features enable statically
//!   (`RUSTFLAGS="-C target-cpu=native"`), like ClickHouse's `ARCH_NATIVE`;
//! - `scalar`: none (the scalar reference bodies only);
//! - `portable`: only the `portable` family (lane code on the `wide` crate, no runtime
//!   detection: SSE2 on x86-64, NEON on aarch64, plain arrays elsewhere);
//! - `avx2` / `avx512` (x86_64), `neon` / `sve` (aarch64): that family and the ones below
//!   it (`avx512` includes `avx2`, `sve` includes `neon`, every one includes `portable`),
//!   like `ENABLE_AVX2`/`ENABLE_AVX512`.
//!
//! A family that does not belong to the target arch is a build error, with the reason.

use std::process::Command;

fn main() {
    let hash = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=TESSERA_GIT_HASH={hash}");
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=TESSERA_TARGET_ARCH={arch}");
    println!("cargo:rerun-if-env-changed=TESSERA_SIMD");
    simd_cfgs(&arch);
    // Re-run when HEAD moves so the hash stays right (paths relative to the package dir).
    for p in ["../../.git/HEAD", "../../.git/refs/heads", ".git/HEAD", ".git/refs/heads"] {
        if std::path::Path::new(p).exists() {
            println!("cargo:rerun-if-changed={p}");
        }
    }
}

/// Emits one cfg per kernel family to compile (see the module docs).
fn simd_cfgs(arch: &str) {
    println!("cargo::rustc-check-cfg=cfg(tessera_portable, tessera_avx2, tessera_avx512, tessera_neon, tessera_sve)");
    let mode = std::env::var("TESSERA_SIMD").unwrap_or_default().trim().to_ascii_lowercase();
    let mode = if mode.is_empty() { "auto".to_string() } else { mode };
    let feats = std::env::var("CARGO_CFG_TARGET_FEATURE").unwrap_or_default();
    let has = |f: &str| feats.split(',').any(|x| x == f);
    let avx512 = has("avx512f") && has("avx512bw") && has("avx512dq") && has("avx512vl");
    let families: &[&str] = match (arch, mode.as_str()) {
        (_, "scalar") => &[],
        (_, "portable") => &["portable"],
        ("x86_64", "auto") => &["portable", "avx2", "avx512"],
        ("aarch64", "auto") => &["portable", "neon", "sve"],
        (_, "auto") => &["portable"],
        ("x86_64", "avx2") => &["portable", "avx2"],
        ("x86_64", "avx512") => &["portable", "avx2", "avx512"],
        ("aarch64", "neon") => &["portable", "neon"],
        ("aarch64", "sve") => &["portable", "neon", "sve"],
        ("x86_64", "native") => match (has("avx2") && has("sse4.2"), avx512) {
            (true, true) => &["portable", "avx2", "avx512"],
            (true, false) => &["portable", "avx2"],
            _ => &["portable"],
        },
        ("aarch64", "native") => match (has("neon"), has("sve")) {
            (true, true) => &["portable", "neon", "sve"],
            (true, false) => &["portable", "neon"],
            _ => &["portable"],
        },
        (_, "native") => &["portable"],
        (arch, other) => panic!(
            "TESSERA_SIMD={other} is not valid for target arch {arch}: expected auto, native, scalar, portable{}",
            match arch {
                "x86_64" => ", avx2 or avx512",
                "aarch64" => ", neon or sve",
                _ => "",
            }
        ),
    };
    for f in families {
        println!("cargo:rustc-cfg=tessera_{f}");
    }
    let mut compiled = vec!["scalar"];
    compiled.extend_from_slice(families);
    println!("cargo:rustc-env=TESSERA_SIMD_BUILD={mode}");
    println!("cargo:rustc-env=TESSERA_SIMD_COMPILED={}", compiled.join(","));
}
