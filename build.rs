//! Top-level build script, shared by the facade crate and `tessera-kernels`.
//!
//! Emits build facts as environment variables for `env!`:
//! - `TESSERA_GIT_HASH`: short git hash of the source tree (or `unknown`);
//! - `TESSERA_TARGET_ARCH`: the target architecture.
//!
//! The SIMD-family selection (`TESSERA_SIMD=auto|scalar|avx2|avx512|neon|sve`) will be read
//! here and turned into cfgs when the ISA kernels land.

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
    // Re-run when HEAD moves so the hash stays right (paths relative to the package dir).
    for p in ["../../.git/HEAD", "../../.git/refs/heads", ".git/HEAD", ".git/refs/heads"] {
        if std::path::Path::new(p).exists() {
            println!("cargo:rerun-if-changed={p}");
        }
    }
}
