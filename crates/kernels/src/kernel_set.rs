//! The kernel set, declared once: the list of kernels and the macros that turn it into the
//! dispatch table types, the per-family default wrappers and the per-family tables.

// ---------------------------------------------------------------------------------------
// The kernel set, declared once
// ---------------------------------------------------------------------------------------
//
// Every kernel of the dispatch table is one line of `for_each_kernel!`: its name, its
// signature and the `scalar` function that defines its result. The same list generates
//
// 1. the fields of [`Kernels`] and [`IntKernels`] (`kernel_table_types!`),
// 2. in every family module, a `#[target_feature]` wrapper compiling the scalar body with
//    the family's features for each kernel the module does not hand-write
//    (`family_defaults!`: a hand-written function of the same name shadows the glob import
//    of the wrappers), and the scalar family's own bodies,
// 3. the table of safe function pointers of each family (`family_table!`).
//
// Adding a kernel: one line here, its scalar function, and (where a benchmark says so) a
// hand-written version in the family modules that gain from one. Nothing else changes.

/// Invokes `$cb!` with `($($args)*)` followed by the kernel list: first the monomorphic
/// kernels, then, after `;`, the generic integer kernels (`T` is each [`KernelInt`]).
macro_rules! for_each_kernel {
    ($cb:ident ! ($($args:tt)*)) => {
        $cb! { ($($args)*)
            /// `out[i] = hash_u64(keys[i])`: [`scalar::hash_u64_batch`].
            hash_u64(keys: &[u64], out: &mut [u64]) = hash_u64_batch;
            /// `out[i] = hash_u128(keys[i])`: [`scalar::hash_u128_batch`].
            hash_u128(keys: &[u128], out: &mut [u64]) = hash_u128_batch;
            /// `out[i] = hash_bytes(strs[i])`: [`scalar::hash_strs_batch`].
            hash_strs(strs: &[&[u8]], out: &mut [u64]) = hash_strs_batch;
            /// Bitmap of empty (or non-empty) strings from offsets: [`scalar::str_empty`].
            str_empty(offsets: &[i32], want_empty: bool, out: &mut Vec<u64>) = str_empty;
            /// Bitmap of strings containing a needle: [`scalar::contains`].
            contains(offsets: &[i32], data: &[u8], needle: &[u8], out: &mut Vec<u64>) = contains;
            /// Set bits among the first `len` bits: [`scalar::count`].
            count(words: &[u64], len: usize) -> usize = count;
            /// Bitmap to selection vector: [`scalar::bitmap_to_indices`].
            bitmap_to_indices(words: &[u64], len: usize, out: &mut Vec<u32>) = bitmap_to_indices;
            /// Radix partition ids from the top hash bits: [`scalar::partition_ids`].
            partition_ids(hashes: &[u64], bits: u32, out: &mut [u16]) = partition_ids;
            /// Minute of hour of second timestamps: [`scalar::minute_of_hour`].
            minute_of_hour(ts: &[i64], out: &mut Vec<u8>) = minute_of_hour;
            ;
            /// Appends the bitmap of `values[i] <op> c`: [`scalar::cmp_scalar`].
            cmp(values: &[T], op: CmpOp, c: T, out: &mut Vec<u64>) = cmp_scalar;
            /// Exact sum of the selected values: [`scalar::sum`].
            sum(values: &[T], sel: Option<&[u64]>) -> i128 = sum;
            /// Minimum of the selected values: [`scalar::min`].
            min(values: &[T], sel: Option<&[u64]>) -> Option<T> = min;
            /// Maximum of the selected values: [`scalar::max`].
            max(values: &[T], sel: Option<&[u64]>) -> Option<T> = max;
        }
    };
}

/// Defines [`Kernels`] and [`IntKernels`] from the kernel list.
macro_rules! kernel_table_types {
    (()
        $( $(#[$doc:meta])* $name:ident ( $($arg:ident : $ty:ty),* ) $(-> $ret:ty)? = $body:ident; )*
        ;
        $( $(#[$idoc:meta])* $iname:ident ( $($iarg:ident : $ity:ty),* ) $(-> $iret:ty)? = $ibody:ident; )*
    ) => {
        /// Kernels over one integer type `T`, as safe function pointers of one family.
        #[derive(Clone, Copy)]
        pub struct IntKernels<T> {
            $( $(#[$idoc])* pub $iname: fn($($ity),*) $(-> $iret)?, )*
        }

        /// The dispatch table of one family: every kernel as a safe function pointer. The
        /// semantics of each entry (shapes, panics) are those of the [`scalar`] function it
        /// names; every family returns bit-identical results.
        #[derive(Clone, Copy)]
        pub struct Kernels {
            /// The family these pointers belong to.
            pub level: SimdLevel,
            $( $(#[$doc])* pub $name: fn($($ty),*) $(-> $ret)?, )*
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
    };
}

/// Inside a family module: one `unsafe fn` per kernel of the list running the scalar body,
/// with the given attribute (the family's `target_feature(enable = ..)`, so LLVM vectorises
/// the scalar loops for its registers; `inline` for the scalar family). They live in a private
/// module glob-imported into the family module, so a function the module hand-writes
/// under the same name takes precedence and the wrapper goes unused.
macro_rules! family_defaults {
    ($attr:meta) => {
        for_each_kernel!(family_defaults!(@emit $attr));
    };
    ((@emit $attr:meta)
        $( $(#[$doc:meta])* $name:ident ( $($arg:ident : $ty:ty),* ) $(-> $ret:ty)? = $body:ident; )*
        ;
        $( $(#[$idoc:meta])* $iname:ident ( $($iarg:ident : $ity:ty),* ) $(-> $iret:ty)? = $ibody:ident; )*
    ) => {
        #[allow(dead_code)] // reason: a family's hand-written kernels shadow these wrappers
        mod defaults {
            #[allow(unused_imports)] // reason: some signatures name neither
            use $crate::{CmpOp, KernelInt};
            $(
                /// The scalar body, compiled with the family's features.
                ///
                /// # Safety
                /// The CPU must have the family's features.
                #[$attr]
                pub(crate) unsafe fn $name($($arg: $ty),*) $(-> $ret)? { $crate::scalar::$body($($arg),*) }
            )*
            $(
                /// The scalar body, compiled with the family's features.
                ///
                /// # Safety
                /// The CPU must have the family's features.
                #[$attr]
                pub(crate) unsafe fn $iname<T: KernelInt>($($iarg: $ity),*) $(-> $iret)? {
                    $crate::scalar::$ibody($($iarg),*)
                }
            )*
        }
        #[allow(unused_imports)] // reason: a family that hand-writes every kernel uses none
        pub(crate) use defaults::*;
    };
}

/// The [`Kernels`] of family module `$m` (which defines every kernel of the list, by hand
/// or through `family_defaults!`), as safe function pointers.
macro_rules! family_table {
    ($m:path, $level:expr) => {
        for_each_kernel!(family_table!(@emit $m, $level))
    };
    ((@emit $m:path, $level:expr)
        $( $(#[$doc:meta])* $name:ident ( $($arg:ident : $ty:ty),* ) $(-> $ret:ty)? = $body:ident; )*
        ;
        $( $(#[$idoc:meta])* $iname:ident ( $($iarg:ident : $ity:ty),* ) $(-> $iret:ty)? = $ibody:ident; )*
    ) => {{
        use $m as fam;
        // Each entry wraps an `unsafe fn` of the family in a safe closure. SAFETY, for every
        // entry alike:
        // 1. The family's `#[target_feature]`s: the table is a private static handed out
        //    only by `Kernels::for_level`, which first checked with runtime detection
        //    (`cpu_has`) that this CPU has every feature of `$level`.
        // 2. Memory: no kernel has a precondition besides the features; each checks its
        //    slice lengths itself (panicking as its scalar twin documents) and reads and
        //    writes only inside the slices it is given.
        $crate::Kernels {
            level: $level,
            $( $name: |$($arg),*| unsafe { fam::$name($($arg),*) }, )*
            i8: for_each_kernel!(int_table!(@emit $m, i8)),
            i16: for_each_kernel!(int_table!(@emit $m, i16)),
            i32: for_each_kernel!(int_table!(@emit $m, i32)),
            i64: for_each_kernel!(int_table!(@emit $m, i64)),
            u8: for_each_kernel!(int_table!(@emit $m, u8)),
            u16: for_each_kernel!(int_table!(@emit $m, u16)),
            u32: for_each_kernel!(int_table!(@emit $m, u32)),
            u64: for_each_kernel!(int_table!(@emit $m, u64)),
        }
    }};
}


/// The [`IntKernels`] of `$t` in family module `$m` (see `family_table!`).
macro_rules! int_table {
    ((@emit $m:path, $t:ty)
        $( $(#[$doc:meta])* $name:ident ( $($arg:ident : $ty:ty),* ) $(-> $ret:ty)? = $body:ident; )*
        ;
        $( $(#[$idoc:meta])* $iname:ident ( $($iarg:ident : $ity:ty),* ) $(-> $iret:ty)? = $ibody:ident; )*
    ) => {{
        use $m as fam;
        // SAFETY: as for every entry of `family_table!` (the same two conditions).
        $crate::IntKernels::<$t> { $( $iname: |$($iarg),*| unsafe { fam::$iname::<$t>($($iarg),*) }, )* }
    }};
}
