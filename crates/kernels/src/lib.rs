//! Tessera's batch kernels: the hot loops of scans and aggregation, a batch at a time.
//!
//! # Families
//! Each instruction-set family lives in its own module with the same function set:
//!
//! | family   | arch    | CPU features required at runtime                       | module      |
//! |----------|---------|--------------------------------------------------------|-------------|
//! | `scalar` | any     | none (portable Rust; the reference twin)               | [`scalar`]  |
//! | `avx2`   | x86_64  | AVX2, SSE4.2, POPCNT                                   | `avx2`      |
//! | `avx512` | x86_64  | AVX-512 F/BW/DQ/VL plus the `avx2` set                 | `avx512`    |
//! | `neon`   | aarch64 | NEON (Advanced SIMD)                                   | `neon`      |
//! | `sve`    | aarch64 | SVE (any vector length 128..2048 bits) plus the `neon` set | `sve`   |
//!
//! Which families are compiled is decided by the top-level `build.rs` from the target arch
//! and the build-time variable `TESSERA_SIMD=auto|native|scalar|avx2|avx512|neon|sve`
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

pub mod scalar;

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

pub use scalar::{CmpOp, KernelInt, cmp_bytes, cmp_scalar, hash_bytes, hash_u64, hash_u128, minute_of_hour};

/// A kernel family (instruction-set level).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SimdLevel {
    /// Portable Rust, no ISA extension: the reference twin.
    Scalar,
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
    pub const ALL: [SimdLevel; 5] = [SimdLevel::Scalar, SimdLevel::Avx2, SimdLevel::Avx512, SimdLevel::Neon, SimdLevel::Sve];

    /// The family's name as used by `TESSERA_SIMD`, `TESSERA_SIMD_LEVEL` and `simd_level`.
    pub fn name(self) -> &'static str {
        match self {
            SimdLevel::Scalar => "scalar",
            SimdLevel::Avx2 => "avx2",
            SimdLevel::Avx512 => "avx512",
            SimdLevel::Neon => "neon",
            SimdLevel::Sve => "sve",
        }
    }

    /// Parses a family name (case-insensitive).
    ///
    /// # Errors
    /// [`SimdLevelError::Unknown`] for anything but the five names.
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
                write!(f, "unknown SIMD level '{s}' (expected auto, scalar, avx2, avx512, neon or sve; available here: {avail})")
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
        SimdLevel::Scalar => true,
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

/// Kernels over one integer type `T`, as safe function pointers of one family.
#[derive(Clone, Copy)]
pub struct IntKernels<T> {
    /// [`scalar::cmp_scalar`]: appends the bitmap of `values[i] <op> c`.
    pub cmp: fn(&[T], CmpOp, T, &mut Vec<u64>),
    /// [`scalar::sum`]: exact sum of the selected values.
    pub sum: fn(&[T], Option<&[u64]>) -> i128,
    /// [`scalar::min`]: minimum of the selected values.
    pub min: fn(&[T], Option<&[u64]>) -> Option<T>,
    /// [`scalar::max`]: maximum of the selected values.
    pub max: fn(&[T], Option<&[u64]>) -> Option<T>,
}

/// `contains(offsets, data, needle, out)`: see [`scalar::contains`].
pub type ContainsFn = fn(&[i32], &[u8], &[u8], &mut Vec<u64>);
/// `radix_scatter_u64(values, partition ids, out) -> partition starts`: see
/// [`scalar::radix_scatter_u64`].
pub type RadixScatterFn = fn(&[u64], &[u8], &mut [u64]) -> [usize; 257];

/// The dispatch table of one family: every kernel as a safe function pointer. The semantics
/// of each entry (shapes, panics) are those of the [`scalar`] function it names.
#[derive(Clone, Copy)]
pub struct Kernels {
    /// The family these pointers belong to.
    pub level: SimdLevel,
    /// [`scalar::hash_u32_batch`].
    pub hash_u32: fn(&[u32], &mut [u64]),
    /// [`scalar::hash_u64_batch`].
    pub hash_u64: fn(&[u64], &mut [u64]),
    /// [`scalar::hash_u128_batch`].
    pub hash_u128: fn(&[u128], &mut [u64]),
    /// [`scalar::hash_strs_batch`].
    pub hash_strs: fn(&[&[u8]], &mut [u64]),
    /// [`scalar::str_empty`].
    pub str_empty: fn(&[i32], bool, &mut Vec<u64>),
    /// [`scalar::contains`].
    pub contains: ContainsFn,
    /// [`scalar::count`].
    pub count: fn(&[u64], usize) -> usize,
    /// [`scalar::bitmap_to_indices`].
    pub bitmap_to_indices: fn(&[u64], usize, &mut Vec<u32>),
    /// [`scalar::partition_ids`].
    pub partition_ids: fn(&[u64], u32, &mut [u8]),
    /// [`scalar::radix_scatter_u64`].
    pub radix_scatter_u64: RadixScatterFn,
    /// [`scalar::minute_of_hour`].
    pub minute_of_hour: fn(&[i64], &mut Vec<u8>),
    /// Integer kernels for `i8`.
    pub i8: IntKernels<i8>,
    /// Integer kernels for `i16`.
    pub i16: IntKernels<i16>,
    /// Integer kernels for `i32`.
    pub i32: IntKernels<i32>,
    /// Integer kernels for `i64`.
    pub i64: IntKernels<i64>,
    /// Integer kernels for `u8`.
    pub u8: IntKernels<u8>,
    /// Integer kernels for `u16`.
    pub u16: IntKernels<u16>,
    /// Integer kernels for `u32`.
    pub u32: IntKernels<u32>,
    /// Integer kernels for `u64`.
    pub u64: IntKernels<u64>,
}

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

/// Builds an [`IntKernels`] from a family module's generic `cmp`/`sum`/`min`/`max`
/// functions. Used inside the family modules, where the functions are `unsafe` and need
/// the family's CPU features: the table is only handed out by [`Kernels::for_level`] after
/// the features were detected.
macro_rules! int_kernels {
    ($m:path, $t:ty) => {{
        use $m as fam;
        $crate::IntKernels::<$t> {
            // SAFETY (all four): reachable only through `Kernels::for_level`, which checked
            // that this CPU has the family's features.
            cmp: |v, op, c, out| unsafe { fam::cmp::<$t>(v, op, c, out) },
            sum: |v, s| unsafe { fam::sum::<$t>(v, s) },
            min: |v, s| unsafe { fam::min::<$t>(v, s) },
            max: |v, s| unsafe { fam::max::<$t>(v, s) },
        }
    }};
}
pub(crate) use int_kernels;

/// The body of a family's generic `cmp::<T>`: routes `T` (one of the eight kernel integers,
/// matched by `TypeId`, a test the compiler folds away) to the family's `cmp_typed::<T>`,
/// which must be in scope at the call site; any other `T` takes the scalar kernel.
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

/// The table of every family module: the same function names in each.
macro_rules! family_table {
    ($m:path, $level:expr) => {{
        use $m as fam;
        $crate::Kernels {
            level: $level,
            // SAFETY (every entry): reachable only through `Kernels::for_level`, which
            // checked that this CPU has the family's features; lengths are checked inside.
            hash_u32: |k, o| unsafe { fam::hash_u32(k, o) },
            hash_u64: |k, o| unsafe { fam::hash_u64(k, o) },
            hash_u128: |k, o| unsafe { fam::hash_u128(k, o) },
            hash_strs: |k, o| unsafe { fam::hash_strs(k, o) },
            str_empty: |off, e, o| unsafe { fam::str_empty(off, e, o) },
            contains: |off, d, n, o| unsafe { fam::contains(off, d, n, o) },
            count: |w, n| unsafe { fam::count(w, n) },
            bitmap_to_indices: |w, n, o| unsafe { fam::bitmap_to_indices(w, n, o) },
            partition_ids: |h, b, o| unsafe { fam::partition_ids(h, b, o) },
            radix_scatter_u64: |v, p, o| unsafe { fam::radix_scatter_u64(v, p, o) },
            minute_of_hour: |t, o| unsafe { fam::minute_of_hour(t, o) },
            i8: $crate::int_kernels!($m, i8),
            i16: $crate::int_kernels!($m, i16),
            i32: $crate::int_kernels!($m, i32),
            i64: $crate::int_kernels!($m, i64),
            u8: $crate::int_kernels!($m, u8),
            u16: $crate::int_kernels!($m, u16),
            u32: $crate::int_kernels!($m, u32),
            u64: $crate::int_kernels!($m, u64),
        }
    }};
}
#[allow(unused_imports)] // reason: used by the family statics, which the macro scoping hides
pub(crate) use family_table;

/// Defines, inside a family module, `#[target_feature]` wrappers that compile the scalar
/// bodies for the family's features (LLVM auto-vectorises them with the wider registers)
/// for every kernel the module does not hand-write. Each entry names the kernel; the macro
/// knows its signature.
#[allow(unused_macros)] // reason: unused when TESSERA_SIMD=scalar compiles no family
macro_rules! portable {
    ($feat:literal; $($name:ident),* $(,)?) => { $( $crate::portable!(@one $feat $name); )* };
    (@one $feat:literal hash_u32) => {
        /// # Safety
        /// The CPU must have the family's features.
        #[target_feature(enable = $feat)]
        pub(crate) unsafe fn hash_u32(k: &[u32], o: &mut [u64]) { $crate::scalar::hash_u32_batch(k, o) }
    };
    (@one $feat:literal hash_u64) => {
        /// # Safety
        /// The CPU must have the family's features.
        #[target_feature(enable = $feat)]
        pub(crate) unsafe fn hash_u64(k: &[u64], o: &mut [u64]) { $crate::scalar::hash_u64_batch(k, o) }
    };
    (@one $feat:literal hash_u128) => {
        /// # Safety
        /// The CPU must have the family's features.
        #[target_feature(enable = $feat)]
        pub(crate) unsafe fn hash_u128(k: &[u128], o: &mut [u64]) { $crate::scalar::hash_u128_batch(k, o) }
    };
    (@one $feat:literal hash_strs) => {
        /// # Safety
        /// The CPU must have the family's features.
        #[target_feature(enable = $feat)]
        pub(crate) unsafe fn hash_strs(k: &[&[u8]], o: &mut [u64]) { $crate::scalar::hash_strs_batch(k, o) }
    };
    (@one $feat:literal str_empty) => {
        /// # Safety
        /// The CPU must have the family's features.
        #[target_feature(enable = $feat)]
        pub(crate) unsafe fn str_empty(off: &[i32], e: bool, o: &mut Vec<u64>) { $crate::scalar::str_empty(off, e, o) }
    };
    (@one $feat:literal count) => {
        /// # Safety
        /// The CPU must have the family's features.
        #[target_feature(enable = $feat)]
        pub(crate) unsafe fn count(w: &[u64], n: usize) -> usize { $crate::scalar::count(w, n) }
    };
    (@one $feat:literal bitmap_to_indices) => {
        /// # Safety
        /// The CPU must have the family's features.
        #[target_feature(enable = $feat)]
        pub(crate) unsafe fn bitmap_to_indices(w: &[u64], n: usize, o: &mut Vec<u32>) {
            $crate::scalar::bitmap_to_indices(w, n, o)
        }
    };
    (@one $feat:literal partition_ids) => {
        /// # Safety
        /// The CPU must have the family's features.
        #[target_feature(enable = $feat)]
        pub(crate) unsafe fn partition_ids(h: &[u64], b: u32, o: &mut [u8]) { $crate::scalar::partition_ids(h, b, o) }
    };
    (@one $feat:literal radix_scatter_u64) => {
        /// # Safety
        /// The CPU must have the family's features.
        #[target_feature(enable = $feat)]
        pub(crate) unsafe fn radix_scatter_u64(v: &[u64], p: &[u8], o: &mut [u64]) -> [usize; 257] {
            $crate::scalar::radix_scatter_u64(v, p, o)
        }
    };
    (@one $feat:literal minute_of_hour) => {
        /// # Safety
        /// The CPU must have the family's features.
        #[target_feature(enable = $feat)]
        pub(crate) unsafe fn minute_of_hour(t: &[i64], o: &mut Vec<u8>) { $crate::scalar::minute_of_hour(t, o) }
    };
    (@one $feat:literal contains) => {
        /// # Safety
        /// The CPU must have the family's features.
        #[target_feature(enable = $feat)]
        pub(crate) unsafe fn contains(off: &[i32], d: &[u8], n: &[u8], o: &mut Vec<u64>) {
            $crate::scalar::contains(off, d, n, o)
        }
    };
    (@one $feat:literal cmp) => {
        /// # Safety
        /// The CPU must have the family's features.
        #[target_feature(enable = $feat)]
        pub(crate) unsafe fn cmp<T: $crate::KernelInt>(v: &[T], op: $crate::CmpOp, c: T, o: &mut Vec<u64>) {
            $crate::scalar::cmp_scalar(v, op, c, o)
        }
    };
    (@one $feat:literal sum) => {
        /// # Safety
        /// The CPU must have the family's features.
        #[target_feature(enable = $feat)]
        pub(crate) unsafe fn sum<T: $crate::KernelInt>(v: &[T], s: Option<&[u64]>) -> i128 { $crate::scalar::sum(v, s) }
    };
    (@one $feat:literal min) => {
        /// # Safety
        /// The CPU must have the family's features.
        #[target_feature(enable = $feat)]
        pub(crate) unsafe fn min<T: $crate::KernelInt>(v: &[T], s: Option<&[u64]>) -> Option<T> { $crate::scalar::min(v, s) }
    };
    (@one $feat:literal max) => {
        /// # Safety
        /// The CPU must have the family's features.
        #[target_feature(enable = $feat)]
        pub(crate) unsafe fn max<T: $crate::KernelInt>(v: &[T], s: Option<&[u64]>) -> Option<T> { $crate::scalar::max(v, s) }
    };
}
#[allow(unused_imports)] // reason: unused when TESSERA_SIMD=scalar compiles no family
pub(crate) use portable;

/// The scalar family's functions under the names the tables expect (safe: no features).
mod scalar_family {
    use crate::{CmpOp, KernelInt, scalar};
    pub(crate) unsafe fn hash_u32(k: &[u32], o: &mut [u64]) {
        scalar::hash_u32_batch(k, o)
    }
    pub(crate) unsafe fn hash_u64(k: &[u64], o: &mut [u64]) {
        scalar::hash_u64_batch(k, o)
    }
    pub(crate) unsafe fn hash_u128(k: &[u128], o: &mut [u64]) {
        scalar::hash_u128_batch(k, o)
    }
    pub(crate) unsafe fn hash_strs(k: &[&[u8]], o: &mut [u64]) {
        scalar::hash_strs_batch(k, o)
    }
    pub(crate) unsafe fn str_empty(off: &[i32], e: bool, o: &mut Vec<u64>) {
        scalar::str_empty(off, e, o)
    }
    pub(crate) unsafe fn contains(off: &[i32], d: &[u8], n: &[u8], o: &mut Vec<u64>) {
        scalar::contains(off, d, n, o)
    }
    pub(crate) unsafe fn count(w: &[u64], n: usize) -> usize {
        scalar::count(w, n)
    }
    pub(crate) unsafe fn bitmap_to_indices(w: &[u64], n: usize, o: &mut Vec<u32>) {
        scalar::bitmap_to_indices(w, n, o)
    }
    pub(crate) unsafe fn partition_ids(h: &[u64], b: u32, o: &mut [u8]) {
        scalar::partition_ids(h, b, o)
    }
    pub(crate) unsafe fn radix_scatter_u64(v: &[u64], p: &[u8], o: &mut [u64]) -> [usize; 257] {
        scalar::radix_scatter_u64(v, p, o)
    }
    pub(crate) unsafe fn minute_of_hour(t: &[i64], o: &mut Vec<u8>) {
        scalar::minute_of_hour(t, o)
    }
    pub(crate) unsafe fn cmp<T: KernelInt>(v: &[T], op: CmpOp, c: T, o: &mut Vec<u64>) {
        scalar::cmp_scalar(v, op, c, o)
    }
    pub(crate) unsafe fn sum<T: KernelInt>(v: &[T], s: Option<&[u64]>) -> i128 {
        scalar::sum(v, s)
    }
    pub(crate) unsafe fn min<T: KernelInt>(v: &[T], s: Option<&[u64]>) -> Option<T> {
        scalar::min(v, s)
    }
    pub(crate) unsafe fn max<T: KernelInt>(v: &[T], s: Option<&[u64]>) -> Option<T> {
        scalar::max(v, s)
    }
}

static SCALAR: Kernels = family_table!(crate::scalar_family, SimdLevel::Scalar);
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

    /// The integer kernels of `T`.
    #[inline(always)]
    pub fn int<T: SelectInt>(&self) -> &IntKernels<T> {
        T::of(self)
    }
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
