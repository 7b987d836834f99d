//! Tessera's batch kernels: the hot loops of scans and aggregation, a batch at a time.
//!
//! # Families
//! Each instruction-set family lives in its own module with the same function set:
//!
//! | family   | arch    | CPU features required at runtime                       | module      |
//! |----------|---------|--------------------------------------------------------|-------------|
//! | `scalar` | any     | none (plain Rust; the reference twin)                  | [`scalar`]  |
//! | `portable` | any   | none (lane code on the `wide` crate: SSE2, NEON, simd128 or arrays, fixed at build time) | `portable` |
//! | `avx2`   | x86_64  | AVX2, SSE4.2, POPCNT                                   | `avx2`      |
//! | `avx512` | x86_64  | AVX-512 F/BW/DQ/VL plus the `avx2` set                 | `avx512`    |
//! | `neon`   | aarch64 | NEON (Advanced SIMD)                                   | `neon`      |
//! | `sve`    | aarch64 | SVE (any vector length 128..2048 bits) plus the `neon` set | `sve`   |
//!
//! Which families are compiled is decided by the top-level `build.rs` from the target arch
//! and the build-time variable `TESSERA_SIMD=auto|native|scalar|portable|avx2|avx512|neon|sve`
//! (ClickHouse's `ENABLE_AVX2` / `ENABLE_AVX512` / `ARCH_NATIVE` in spirit): `auto` (the
//! default) compiles every family of the target arch; a family name compiles that family and
//! the ones below it; `native` compiles the families the target features enable statically
//! (`RUSTFLAGS="-C target-cpu=native"`); `scalar` compiles none.
//!
//! # Dispatch
//! A [`Kernels`] value is a table of safe function pointers for one family. It is chosen once
//! per query (never per row): [`Kernels::for_level`] checks that the family is compiled and
//! that this CPU has its features (`is_x86_feature_detected!` / `is_aarch64_feature_detected!`),
//! [`Kernels::best`] is the highest supported family, cached after the first call, and
//! [`Kernels::from_env`] honours the runtime override `TESSERA_SIMD_LEVEL` (a lower family,
//! to compare). The engine's `simd_level` setting overrides both per query.
//!
//! Kernels know nothing of Arrow: they take slices and write into caller buffers. Every
//! family returns bit-identical results to [`scalar`] (tested on random and edge inputs in
//! `tests/families.rs`, on x86_64 natively and on aarch64 under qemu).

#![warn(missing_docs)]

#[macro_use]
mod kernel_set;
pub mod group;
pub mod scalar;

#[cfg(tessera_portable)]
mod portable;
#[cfg(all(target_arch = "x86_64", tessera_avx2))]
mod avx2;
#[cfg(all(target_arch = "x86_64", tessera_avx512))]
mod avx512;
#[cfg(all(target_arch = "aarch64", tessera_neon))]
mod neon;
#[cfg(all(target_arch = "aarch64", tessera_sve))]
mod sve;

use std::fmt;
use std::sync::OnceLock;

pub use scalar::{CmpOp, KernelInt, cmp_bytes, cmp_scalar, hash128_bytes, hash_bytes, hash_u64, hash_u128, minute_of_hour};

/// A kernel family (instruction-set level).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SimdLevel {
    /// Plain Rust, no ISA extension: the reference twin.
    Scalar,
    /// Lane code on the `wide` crate for any target (SSE2 on x86-64, NEON on aarch64, plain
    /// arrays elsewhere), chosen at build time: below every ISA family, above `scalar`.
    Portable,
    /// x86_64 AVX2 (+ SSE4.2, POPCNT).
    Avx2,
    /// x86_64 AVX-512 F/BW/DQ/VL.
    Avx512,
    /// aarch64 NEON (Advanced SIMD).
    Neon,
    /// aarch64 SVE, vector-length agnostic.
    Sve,
}

impl SimdLevel {
    /// Every family, lowest first within an arch.
    pub const ALL: [SimdLevel; 6] =
        [SimdLevel::Scalar, SimdLevel::Portable, SimdLevel::Avx2, SimdLevel::Avx512, SimdLevel::Neon, SimdLevel::Sve];

    /// The family's name as used by `TESSERA_SIMD`, `TESSERA_SIMD_LEVEL` and `simd_level`.
    pub fn name(self) -> &'static str {
        match self {
            SimdLevel::Scalar => "scalar",
            SimdLevel::Portable => "portable",
            SimdLevel::Avx2 => "avx2",
            SimdLevel::Avx512 => "avx512",
            SimdLevel::Neon => "neon",
            SimdLevel::Sve => "sve",
        }
    }

    /// Parses a family name (case-insensitive).
    ///
    /// # Errors
    /// [`SimdLevelError::Unknown`] for anything but the six names.
    pub fn parse(s: &str) -> Result<SimdLevel, SimdLevelError> {
        SimdLevel::ALL
            .into_iter()
            .find(|l| l.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| SimdLevelError::Unknown(s.to_string()))
    }

    /// Whether this build contains the family's code.
    pub fn compiled(self) -> bool {
        match self {
            SimdLevel::Scalar => true,
            SimdLevel::Portable => cfg!(tessera_portable),
            SimdLevel::Avx2 => cfg!(all(target_arch = "x86_64", tessera_avx2)),
            SimdLevel::Avx512 => cfg!(all(target_arch = "x86_64", tessera_avx512)),
            SimdLevel::Neon => cfg!(all(target_arch = "aarch64", tessera_neon)),
            SimdLevel::Sve => cfg!(all(target_arch = "aarch64", tessera_sve)),
        }
    }

    /// Whether the family is compiled and this CPU has every feature it needs.
    pub fn supported(self) -> bool {
        self.compiled() && cpu_has(self)
    }

    /// The families this build and CPU can run, lowest first.
    pub fn available() -> Vec<SimdLevel> {
        SimdLevel::ALL.into_iter().filter(|l| l.supported()).collect()
    }
}

impl fmt::Display for SimdLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a family cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SimdLevelError {
    /// Not a family name.
    Unknown(String),
    /// The family is not in this build (other arch, or excluded by `TESSERA_SIMD`).
    NotCompiled(SimdLevel),
    /// This CPU lacks a feature the family needs.
    NotSupported(SimdLevel),
}

impl fmt::Display for SimdLevelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let avail = SimdLevel::available().iter().map(|l| l.name()).collect::<Vec<_>>().join(", ");
        match self {
            SimdLevelError::Unknown(s) => {
                write!(f, "unknown SIMD level '{s}' (expected auto, scalar, portable, avx2, avx512, neon or sve; available here: {avail})")
            }
            SimdLevelError::NotCompiled(l) => write!(
                f,
                "SIMD level '{l}' is not compiled into this {} build (TESSERA_SIMD={}; available here: {avail})",
                env!("TESSERA_TARGET_ARCH"),
                env!("TESSERA_SIMD_BUILD")
            ),
            SimdLevelError::NotSupported(l) => {
                write!(f, "this CPU does not support SIMD level '{l}' (available here: {avail})")
            }
        }
    }
}

impl std::error::Error for SimdLevelError {}

#[allow(unused_variables)] // reason: `level` is unused on arches without SIMD families
fn cpu_has(level: SimdLevel) -> bool {
    match level {
        // `wide` picks its code from the build's target features: nothing to detect.
        SimdLevel::Scalar | SimdLevel::Portable => true,
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 => {
            std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("sse4.2")
                && std::arch::is_x86_feature_detected!("popcnt")
        }
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx512 => {
            cpu_has(SimdLevel::Avx2)
                && std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512dq")
                && std::arch::is_x86_feature_detected!("avx512vl")
        }
        #[cfg(target_arch = "aarch64")]
        SimdLevel::Neon => {
            std::arch::is_aarch64_feature_detected!("neon")
        }
        #[cfg(target_arch = "aarch64")]
        SimdLevel::Sve => cpu_has(SimdLevel::Neon) && std::arch::is_aarch64_feature_detected!("sve"),
        #[allow(unreachable_patterns)] // reason: the arms above exist only on their arch
        _ => false,
    }
}

/// The scalar family under the names the tables expect: the reference bodies themselves,
/// with no target features (`unsafe` only to share the families' signatures).
mod scalar_family {
    family_defaults!(inline);
}

for_each_kernel!(kernel_table_types!());

impl fmt::Debug for Kernels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kernels").field("level", &self.level).finish_non_exhaustive()
    }
}

/// Picks the [`IntKernels`] of `T` out of a table.
pub trait SelectInt: KernelInt {
    /// `k`'s kernels for `Self`.
    fn of(k: &Kernels) -> &IntKernels<Self>;
}
macro_rules! select_int {
    ($($t:ident),*) => {$(
        impl SelectInt for $t {
            #[inline(always)]
            fn of(k: &Kernels) -> &IntKernels<$t> { &k.$t }
        }
    )*};
}
select_int!(i8, i16, i32, i64, u8, u16, u32, u64);

/// The body of a family's generic `cmp::<T>`: routes `T` (one of the eight kernel integers,
/// matched by `TypeId`, a test the compiler folds away) to the family's `cmp_typed::<T>`,
/// which must be in scope at the call site; any other `T` takes the scalar kernel.
#[allow(unused_macros)] // reason: no family uses it when TESSERA_SIMD=scalar compiles none
macro_rules! cmp_by_type {
    ($values:ident, $op:ident, $c:ident, $out:ident) => {
        $crate::cmp_by_type!(@each $values, $op, $c, $out; i8, i16, i32, i64, u8, u16, u32, u64)
    };
    (@each $values:ident, $op:ident, $c:ident, $out:ident; $($t:ty),*) => {{
        $(
            if std::any::TypeId::of::<T>() == std::any::TypeId::of::<$t>() {
                // SAFETY: T is $t (same TypeId), so the slice and constant reinterpret exactly.
                let (v, c) = unsafe {
                    (
                        std::slice::from_raw_parts($values.as_ptr().cast::<$t>(), $values.len()),
                        std::mem::transmute_copy::<T, $t>(&$c),
                    )
                };
                return cmp_typed::<$t>(v, $op, c, $out);
            }
        )*
        $crate::scalar::cmp_scalar($values, $op, $c, $out)
    }};
}
#[allow(unused_imports)] // reason: unused when TESSERA_SIMD=scalar compiles no family
pub(crate) use cmp_by_type;


/// The body of a family's `cmp`: appends one bitmap word per run of 64 values from
/// `word(run)` (the family's lane code), and the scalar kernel's words for the last, shorter
/// run. `#[inline(always)]` like `word`, so both compile inside the family's
/// `#[target_feature]` function.
#[allow(dead_code)] // reason: no family uses it when TESSERA_SIMD=scalar compiles none
#[inline(always)]
pub(crate) fn cmp_by_words<T: KernelInt>(values: &[T], op: CmpOp, c: T, out: &mut Vec<u64>, word: impl Fn(&[T]) -> u64) {
    out.reserve(values.len().div_ceil(64));
    let mut runs = values.chunks_exact(64);
    for run in &mut runs {
        out.push(word(run));
    }
    let rest = runs.remainder();
    if !rest.is_empty() {
        scalar::cmp_scalar(rest, op, c, out);
    }
}

/// The first and last byte of `needle`, whose broadcasts a family's `masks` for
/// [`first_last_rows`] compares with; 0 for an empty needle, which the driver searches
/// string by string without calling `masks`.
#[allow(dead_code)] // reason: no family uses it when TESSERA_SIMD=scalar compiles none
#[inline(always)]
pub(crate) fn needle_ends(needle: &[u8]) -> (u8, u8) {
    (needle.first().copied().unwrap_or(0), needle.last().copied().unwrap_or(0))
}

/// Appends to `out` the bitmap of the strings (`offsets` into `data`) that contain `needle`,
/// searching their bytes as one haystack (as ClickHouse's `LIKE '%x%'` searches a column's
/// chars, then maps matches to rows) with the first/last-byte filter of
/// [`first_last_search`]: `masks(pos)` gives bit `j` set where `data[pos + j]` is the
/// needle's first byte and `data[pos + j + len - 1]` its last (only called with `pos + W +
/// len - 1 <= offsets[n]`). A verified match counts for the string it starts in when it
/// also ends there (one spanning two strings does not); candidates in the rest of a
/// matched string are not verified. Per string instead (`one`) when the needle is empty or the strings' bytes
/// are shorter than a vector of starts: a URL of 88 bytes took 3 of `first_last_search`'s
/// 32-byte steps plus its call and tail; here it takes under 3/2 of a 64-byte step. The
/// result is [`scalar::contains`]'s. `#[inline(always)]` so the closures compile inside
/// the family's `#[target_feature]` function.
///
/// # Panics
/// If an offset is out of `data`'s bounds, as [`scalar::contains`]. Offsets that decrease
/// (no valid Arrow array has them) give an unspecified bitmap or a panic, never an
/// out-of-bounds access.
#[allow(dead_code)] // reason: no family uses it when TESSERA_SIMD=scalar compiles none
#[inline(always)]
pub(crate) fn first_last_rows<const W: usize>(
    offsets: &[i32],
    data: &[u8],
    needle: &[u8],
    out: &mut Vec<u64>,
    masks: impl Fn(usize) -> u64,
    one: impl Fn(&[u8]) -> bool,
) {
    let n = offsets.len().saturating_sub(1);
    let k = needle.len();
    if n == 0 {
        return;
    }
    let (start, end) = (offsets[0] as usize, offsets[n] as usize);
    if k == 0 || end < start || end - start < W + k || end > data.len() {
        // (A malformed array panics in `pack_strings`, as in the scalar kernel.)
        return scalar::pack_strings(offsets, data, out, one);
    }
    let base = out.len();
    out.resize(base + n.div_ceil(64), 0);
    let words = &mut out[base..];
    // The string holding the current candidate, where it ends, and where the next string
    // not yet found to match starts.
    let (mut row, mut row_end, mut skip) = (0usize, offsets[1] as usize, start);
    let mut check = |at0: usize, mut m: u64| {
        while m != 0 {
            let at = at0 + m.trailing_zeros() as usize;
            m &= m - 1;
            if at < skip || (k > 2 && data[at + 1..at + k - 1] != needle[1..k - 1]) {
                continue;
            }
            while row_end <= at {
                row += 1;
                row_end = offsets[row + 1] as usize;
            }
            if at + k <= row_end {
                words[row / 64] |= 1 << (row % 64);
                skip = row_end;
            }
        }
    };
    let last = end - k; // the last start
    let mut pos = start;
    while pos + W <= last + 1 {
        check(pos, masks(pos));
        pos += W;
    }
    if pos <= last {
        // One more vector ending at the last start, overlapping the checked ones.
        let at0 = last + 1 - W;
        check(at0, masks(at0) & !((1u64 << (pos - at0)) - 1));
    }
}

/// Whether `needle` occurs in `hay`, by the first/last-byte filter (Muła, "SIMD-friendly
/// algorithms for substring searching"): `masks(pos)` gives bit `j` set for each of the
/// `W` start positions `pos + j` whose byte equals the needle's first byte and whose byte
/// `len - 1` further equals its last (the family's two vector compares; only called with
/// `pos + W - 1 + needle.len() - 1 < hay.len()`), and each candidate is verified with a
/// slice compare. One-byte needles go to `memchr` (one compare per vector), haystacks
/// shorter than one vector of start positions to the scalar search. `#[inline(always)]`
/// so the closures compile inside the family's `#[target_feature]` function.
#[allow(dead_code)] // reason: no family uses it when TESSERA_SIMD=scalar compiles none
#[inline(always)]
pub(crate) fn first_last_search<const W: usize>(
    hay: &[u8],
    needle: &[u8],
    memchr: impl Fn(&[u8], u8) -> bool,
    masks: impl Fn(usize) -> u64,
) -> bool {
    let k = needle.len();
    if k == 0 {
        return true;
    }
    if k > hay.len() {
        return false;
    }
    if k == 1 {
        return memchr(hay, needle[0]);
    }
    let last = hay.len() - k; // the last valid start
    if last + 1 < W {
        return scalar::contains_one(hay, needle);
    }
    let check = |at0: usize, mut m: u64| -> bool {
        while m != 0 {
            let at = at0 + m.trailing_zeros() as usize;
            if hay[at + 1..at + k - 1] == needle[1..k - 1] {
                return true;
            }
            m &= m - 1;
        }
        false
    };
    let mut pos = 0;
    while pos + W <= last + 1 {
        if check(pos, masks(pos)) {
            return true;
        }
        pos += W;
    }
    if pos > last {
        return false;
    }
    // One more vector ending at the last start, overlapping the checked ones: positions
    // below `pos` were checked already.
    let at0 = last + 1 - W;
    check(at0, masks(at0) & !((1u64 << (pos - at0)) - 1))
}

static SCALAR: Kernels = family_table!(crate::scalar_family, SimdLevel::Scalar);
#[cfg(tessera_portable)]
static PORTABLE: Kernels = family_table!(crate::portable, SimdLevel::Portable);
#[cfg(all(target_arch = "x86_64", tessera_avx2))]
static AVX2: Kernels = family_table!(crate::avx2, SimdLevel::Avx2);
#[cfg(all(target_arch = "x86_64", tessera_avx512))]
static AVX512: Kernels = family_table!(crate::avx512, SimdLevel::Avx512);
#[cfg(all(target_arch = "aarch64", tessera_neon))]
static NEON: Kernels = family_table!(crate::neon, SimdLevel::Neon);
#[cfg(all(target_arch = "aarch64", tessera_sve))]
static SVE: Kernels = family_table!(crate::sve, SimdLevel::Sve);

impl Kernels {
    /// The table of `level`.
    ///
    /// # Errors
    /// [`SimdLevelError::NotCompiled`] if the family is not in this build,
    /// [`SimdLevelError::NotSupported`] if this CPU lacks one of its features.
    pub fn for_level(level: SimdLevel) -> Result<&'static Kernels, SimdLevelError> {
        if !level.compiled() {
            return Err(SimdLevelError::NotCompiled(level));
        }
        if !cpu_has(level) {
            return Err(SimdLevelError::NotSupported(level));
        }
        Ok(match level {
            #[cfg(tessera_portable)]
            SimdLevel::Portable => &PORTABLE,
            #[cfg(all(target_arch = "x86_64", tessera_avx2))]
            SimdLevel::Avx2 => &AVX2,
            #[cfg(all(target_arch = "x86_64", tessera_avx512))]
            SimdLevel::Avx512 => &AVX512,
            #[cfg(all(target_arch = "aarch64", tessera_neon))]
            SimdLevel::Neon => &NEON,
            #[cfg(all(target_arch = "aarch64", tessera_sve))]
            SimdLevel::Sve => &SVE,
            _ => &SCALAR,
        })
    }

    /// The scalar family (always available).
    pub fn scalar() -> &'static Kernels {
        &SCALAR
    }

    /// The highest family this build and CPU support (detected once, then cached).
    pub fn best() -> &'static Kernels {
        static BEST: OnceLock<&'static Kernels> = OnceLock::new();
        BEST.get_or_init(|| {
            let level = SimdLevel::available().into_iter().max().unwrap_or(SimdLevel::Scalar);
            Kernels::for_level(level).unwrap_or(&SCALAR)
        })
    }

    /// The default table of this process: the family named by the environment variable
    /// `TESSERA_SIMD_LEVEL` if set (and not `auto`), else [`Kernels::best`]. Cached.
    ///
    /// # Errors
    /// The variable names an unknown, uncompiled or unsupported family.
    pub fn from_env() -> Result<&'static Kernels, SimdLevelError> {
        static ENV: OnceLock<Result<&'static Kernels, SimdLevelError>> = OnceLock::new();
        ENV.get_or_init(|| match std::env::var("TESSERA_SIMD_LEVEL") {
            Ok(v) if !v.trim().is_empty() && !v.trim().eq_ignore_ascii_case("auto") => {
                SimdLevel::parse(&v).and_then(Kernels::for_level)
            }
            _ => Ok(Kernels::best()),
        })
        .clone()
    }

    /// Resolves a `simd_level` setting: `auto` (or empty) means [`Kernels::from_env`].
    ///
    /// # Errors
    /// As [`SimdLevel::parse`] and [`Kernels::for_level`].
    pub fn for_setting(s: &str) -> Result<&'static Kernels, SimdLevelError> {
        if s.trim().is_empty() || s.trim().eq_ignore_ascii_case("auto") {
            Kernels::from_env()
        } else {
            Kernels::for_level(SimdLevel::parse(s)?)
        }
    }

    /// Whether a radix scatter (the aggregation's partitioning of rows) should buffer each
    /// partition's values a cache line at a time and write full lines with streaming
    /// stores, rather than store each value through its partition's cursor: a property of
    /// the family's machines, measured per family. `avx512` only: on a Zen 5 VM it made
    /// Q33 ~5% faster (0.120 -> 0.116 s, 10M rows, 2 threads), while an earlier variant
    /// with AVX2 streaming stores made Q33 9% slower on a Zen 3 VM (AVX2 only); Arm is
    /// unmeasured.
    pub fn write_combining_scatter(&self) -> bool {
        self.level == SimdLevel::Avx512
    }

    /// The integer kernels of `T`.
    #[inline(always)]
    pub fn int<T: SelectInt>(&self) -> &IntKernels<T> {
        T::of(self)
    }

    /// Runs `task` with the family's control-byte [`group::Group`], inside a function
    /// compiled with the family's target features (so the group's compares inline into the
    /// task's probe loop): the hash-table probe as a family member. Dispatch happens once
    /// per call; call it once per batch of keys, not per key.
    pub fn with_group<T: group::GroupTask>(&self, task: T) -> T::Output {
        // `level` is a public field, so a copied table may name any family: check the CPU
        // (a cached atomic load) rather than trust it.
        let level = if cpu_has(self.level) { self.level } else { SimdLevel::Scalar };
        match level {
            // SAFETY (every arm): `cpu_has(level)` just found every feature of the family on
            // this CPU.
            #[cfg(all(target_arch = "x86_64", tessera_avx2))]
            SimdLevel::Avx2 => unsafe { avx2::with_group(task) },
            #[cfg(all(target_arch = "x86_64", tessera_avx512))]
            SimdLevel::Avx512 => unsafe { avx512::with_group(task) },
            #[cfg(all(target_arch = "aarch64", tessera_neon))]
            SimdLevel::Neon => unsafe { neon::with_group(task) },
            #[cfg(all(target_arch = "aarch64", tessera_sve))]
            SimdLevel::Sve => unsafe { sve::with_group(task) },
            #[cfg(tessera_portable)]
            SimdLevel::Portable => task.run::<portable::Group>(),
            _ => task.run::<group::Swar>(),
        }
    }
}

/// Hints the CPU to bring the cache line holding `p` into its caches for a read soon (a
/// hash-table probe some rows ahead). A hint only: it never faults, whatever the address,
/// and changes no result; a no-op on architectures without one here.
#[inline(always)]
#[allow(unused_unsafe)] // reason: the intrinsic is safe on some toolchains, unsafe on others
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetcht0` is a hint that never faults; SSE is part of the x86_64 baseline.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast())
    };
    #[cfg(target_arch = "aarch64")]
    // SAFETY: `prfm` is a hint that never faults and writes no register or memory.
    unsafe {
        std::arch::asm!("prfm pldl1keep, [{p}]", p = in(reg) p, options(nostack, readonly, preserves_flags))
    };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let _ = p;
}

/// Facts fixed at build time: version, git hash, target arch and the SIMD families compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildInfo {
    /// Crate version (`CARGO_PKG_VERSION`).
    pub version: &'static str,
    /// `git rev-parse --short HEAD` at build time, or `unknown`.
    pub git_hash: &'static str,
    /// Target architecture (`x86_64`, `aarch64`, ...).
    pub target_arch: &'static str,
    /// The build-time selection `TESSERA_SIMD` (`auto` unless set).
    pub simd_build: &'static str,
    /// Families compiled into this build, comma-separated, e.g. `scalar,avx2,avx512`.
    pub simd_compiled: &'static str,
    /// Family the process uses by default (runtime detection, or `TESSERA_SIMD_LEVEL`;
    /// `scalar` if that variable is invalid).
    pub simd_level: &'static str,
}

/// The build facts of this binary, with the family runtime dispatch chose.
pub fn build_info() -> BuildInfo {
    BuildInfo {
        version: env!("CARGO_PKG_VERSION"),
        git_hash: env!("TESSERA_GIT_HASH"),
        target_arch: env!("TESSERA_TARGET_ARCH"),
        simd_build: env!("TESSERA_SIMD_BUILD"),
        simd_compiled: env!("TESSERA_SIMD_COMPILED"),
        simd_level: Kernels::from_env().map(|k| k.level.name()).unwrap_or("scalar"),
    }
}

/// SIMD instruction sets this CPU offers (what runtime dispatch chooses from), e.g.
/// `["avx2", "avx512f"]`; empty where none is detected.
pub fn cpu_simd_features() -> Vec<&'static str> {
    #[allow(unused_mut)] // reason: only pushed to on some architectures
    let mut v = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("sse4.2") {
            v.push("sse4.2");
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            v.push("avx2");
        }
        for (name, on) in [
            ("avx512f", std::arch::is_x86_feature_detected!("avx512f")),
            ("avx512bw", std::arch::is_x86_feature_detected!("avx512bw")),
            ("avx512dq", std::arch::is_x86_feature_detected!("avx512dq")),
            ("avx512vl", std::arch::is_x86_feature_detected!("avx512vl")),
        ] {
            if on {
                v.push(name);
            }
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        if std::arch::is_aarch64_feature_detected!("neon") {
            v.push("neon");
        }
        if std::arch::is_aarch64_feature_detected!("crc") {
            v.push("crc");
        }
        if std::arch::is_aarch64_feature_detected!("sve") {
            v.push("sve");
        }
        if std::arch::is_aarch64_feature_detected!("sve2") {
            v.push("sve2");
        }
    }
    v
}
