//! Tessera's batch kernels: the hot loops of scans and aggregation, a batch at a time.
//!
//! Each kernel family lives in its own module with the same function set. Today only
//! [`scalar`] exists (portable code written so LLVM can vectorise it); the x86_64 (AVX2,
//! AVX-512) and aarch64 (NEON, SVE) families will sit beside it and be chosen once per query
//! by runtime dispatch, with `scalar` kept as their reference twin.
//!
//! Kernels know nothing of Arrow: they take slices and write into caller buffers.

#![warn(missing_docs)]

pub mod scalar;

pub use scalar::{CmpOp, cmp_bytes, cmp_scalar, hash_bytes, hash_u64, hash_u128, minute_of_hour};

/// Facts fixed at build time: version, git hash, target arch and the SIMD families compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildInfo {
    /// Crate version (`CARGO_PKG_VERSION`).
    pub version: &'static str,
    /// `git rev-parse --short HEAD` at build time, or `unknown`.
    pub git_hash: &'static str,
    /// Target architecture (`x86_64`, `aarch64`, ...).
    pub target_arch: &'static str,
    /// Kernel family in use. Only `scalar` exists so far.
    pub simd_level: &'static str,
}

/// The build facts of this binary.
pub fn build_info() -> BuildInfo {
    BuildInfo {
        version: env!("CARGO_PKG_VERSION"),
        git_hash: env!("TESSERA_GIT_HASH"),
        target_arch: env!("TESSERA_TARGET_ARCH"),
        simd_level: "scalar",
    }
}

/// SIMD instruction sets this CPU offers (what runtime dispatch will choose from), e.g.
/// `["avx2", "avx512f"]`; empty where none is detected.
pub fn cpu_simd_features() -> Vec<&'static str> {
    #[allow(unused_mut)] // reason: only pushed to on some architectures
    let mut v = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            v.push("avx2");
        }
        if std::arch::is_x86_feature_detected!("avx512f") {
            v.push("avx512f");
        }
        if std::arch::is_x86_feature_detected!("avx512bw") {
            v.push("avx512bw");
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        if std::arch::is_aarch64_feature_detected!("neon") {
            v.push("neon");
        }
        if std::arch::is_aarch64_feature_detected!("sve") {
            v.push("sve");
        }
    }
    v
}
