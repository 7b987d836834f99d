#!/usr/bin/env bash
# check-aarch64.sh — cross-build the workspace for aarch64 and run it under qemu-user, from an
# x86_64 Debian 12 (bookworm) machine. No Arm hardware and no rustup target are needed.
#
#   scripts/check-aarch64.sh install
#       One-time setup (root, apt): Debian's rustc-web/cargo-web (1.96), the aarch64 standard
#       library as a multiarch package (libstd-rust-web-dev:arm64), the aarch64 GNU cross
#       toolchain (linker and C compiler for jemalloc/zstd) and qemu-user. Idempotent.
#
#   scripts/check-aarch64.sh [--cpu sve|neon] [--sve-bits 128|256|512] cargo SUBCOMMAND ARGS...
#       Runs Debian's cargo with `--target aarch64-unknown-linux-gnu` added after SUBCOMMAND;
#       every aarch64 executable (tests, benches, `cargo run`) runs under qemu-aarch64.
#       --cpu sve  (default) qemu's `max` CPU, with SVE at --sve-bits (default 256).
#       --cpu neon           a Cortex-A72: Advanced SIMD (NEON) only, no SVE.
#       e.g.  scripts/check-aarch64.sh cargo test --release --workspace
#             scripts/check-aarch64.sh --cpu neon cargo test --release -p tessera-kernels
#
#   scripts/check-aarch64.sh all [CARGO_TEST_ARGS...]
#       Builds the tests once, then runs them on four CPUs: SVE 128, SVE 256, SVE 512 and NEON
#       only, and prints pass/fail and elapsed seconds for each (exit status 1 if any failed).
#       CARGO_TEST_ARGS default to the whole suite (`--release --workspace --no-fail-fast`)
#       on SVE 256, and on the other three CPUs to what depends on the vector ISA and width:
#       every crate's unit tests, the kernel families against their scalar twins
#       (`--test families`) and the golden answers with each kernel family this CPU has
#       (`golden_answers_every_simd_level`). The rest of the suite runs the same code on
#       every aarch64 CPU (kernels are picked once per query), and running it four times
#       under emulation took most of CI's hour.
#       Logs: $CARGO_TARGET_DIR/check-aarch64-<config>.log.
#
# Notes on the method
# - Toolchain: the repository's rust-toolchain.toml pins a rustup toolchain (1.95.0) that has no
#   aarch64 standard library, and this machine may not reach rustup's servers. The pin is read
#   only by rustup's proxies (~/.cargo/bin/cargo, ~/.cargo/bin/rustc, ...). This script never
#   goes through them: it runs /usr/bin/cargo (Debian's real cargo, not a proxy) and points it
#   at /usr/bin/rustc and /usr/bin/rustdoc via RUSTC/RUSTDOC, and puts /usr/bin first in PATH
#   so that a build script that runs a bare `rustc` or `cargo` also gets Debian's. RUSTUP_* and
#   RUSTC_WRAPPER are cleared so nothing routes back into rustup. Debian's 1.96 is newer than
#   the workspace's `rust-version = 1.95`, so the MSRV check is satisfied.
# - The [env] jemalloc settings in .cargo/config.toml apply here too (Debian's cargo reads the
#   same config); JEMALLOC_SYS_WITH_LG_PAGE=12 matches qemu-user's 4 KiB pages.
# - No -C target-cpu / target-feature flags are added: the binaries are generic aarch64 and
#   pick NEON/SVE at run time (is_aarch64_feature_detected!), which qemu answers per --cpu.
# - The target dir is target/aarch64 (override with CARGO_TARGET_DIR), so the native build in
#   target/ is untouched. Changing --cpu/--sve-bits only changes the runner: nothing rebuilds.
# - qemu runs with `-L /` (override: QEMU_SYSROOT), i.e. the arm64 multiarch libraries that
#   libstd-rust-web-dev:arm64 pulls in (libc6:arm64 in /lib and /usr/lib/aarch64-linux-gnu).
#   Do NOT use the cross sysroot /usr/aarch64-linux-gnu: its ld-linux-aarch64.so.1 comes from
#   libc6-arm64-cross (2.36-8cross1) while ld.so still finds libc.so.6 of libc6:arm64
#   (2.36-9+deb12u*) in /usr/lib/aarch64-linux-gnu; the mismatched pair corrupts glibc's
#   private state and the first pthread_create spins forever (every multi-threaded test hangs).
set -euo pipefail

readonly TARGET=aarch64-unknown-linux-gnu
readonly CROSS=aarch64-linux-gnu
readonly SELF=${0##*/}

usage() {
  # The header comment, up to "Notes on the method".
  sed -n '2,/^# Notes/{/^# Notes/d;s/^# \{0,1\}//;p}' "$0" >&2
  exit 2
}

die() { echo "$SELF: $*" >&2; exit 2; }

have_toolchain() {
  [ -x /usr/bin/cargo ] && [ -x /usr/bin/rustc ] &&
    [ -d "$(/usr/bin/rustc --print sysroot)/lib/rustlib/$TARGET/lib" ] &&
    command -v "$CROSS-gcc" >/dev/null && command -v qemu-aarch64 >/dev/null
}

do_install() {
  if have_toolchain; then
    echo "$SELF: toolchain already installed ($(/usr/bin/rustc --version))" >&2
    return 0
  fi
  local sudo=
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  local t0=$SECONDS
  $sudo dpkg --add-architecture arm64
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    rustc-web cargo-web libstd-rust-web-dev:arm64 \
    gcc-$CROSS g++-$CROSS libc6-dev-arm64-cross qemu-user make >/dev/null
  have_toolchain || die "install finished but the toolchain is incomplete"
  echo "$SELF: installed $(/usr/bin/rustc --version) for $TARGET in $((SECONDS - t0)) s" >&2
}

# qemu -cpu value for a configuration.
qemu_cpu() { # cpu bits
  case "$1" in
    sve)
      case "$2" in 128 | 256 | 512 | 1024 | 2048) ;; *) die "--sve-bits must be 128|256|512|1024|2048" ;; esac
      echo "max,sve-default-vector-length=$(($2 / 8))" ;;
    neon) echo "cortex-a72" ;;
    *) die "unknown --cpu '$1' (sve|neon)" ;;
  esac
}

setup_env() { # qemu-cpu
  have_toolchain || die "aarch64 toolchain missing: run '$0 install' first"
  unset RUSTUP_TOOLCHAIN RUSTUP_HOME_OVERRIDE RUSTC_WRAPPER RUSTC_WORKSPACE_WRAPPER CARGO_BUILD_TARGET
  export PATH="/usr/bin:$PATH"
  export RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc
  export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target/aarch64}
  export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=$CROSS-gcc
  export CC_aarch64_unknown_linux_gnu=$CROSS-gcc
  export CXX_aarch64_unknown_linux_gnu=$CROSS-g++
  export AR_aarch64_unknown_linux_gnu=$CROSS-ar
  local sysroot=${QEMU_SYSROOT:-/}
  export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L $sysroot -cpu $1"
  # Tests that start a child process of their own binary (the storage crash test) prefix
  # it with this runner: binfmt_misc is often unavailable in containers, so an aarch64
  # executable cannot be exec'd directly.
  export TESSERA_TEST_RUNNER="qemu-aarch64 -L $sysroot -cpu $1"
}

# Debian's cargo, with --target inserted after the subcommand.
run_cargo() { # subcommand args...
  local sub=$1; shift
  /usr/bin/cargo "$sub" --target "$TARGET" "$@"
}

do_all() { # cargo-test-args...
  # --no-fail-fast: report every failing test binary of a configuration, not just the first.
  local subset=()
  if [ $# -eq 0 ]; then
    set -- --release --workspace --no-fail-fast
    subset=(--release --workspace --no-fail-fast)
  fi
  setup_env "$(qemu_cpu sve 256)"
  mkdir -p "$CARGO_TARGET_DIR"
  local t0=$SECONDS
  echo "$SELF: building tests: cargo test --no-run $*" >&2
  if ! run_cargo test --no-run "$@"; then
    echo "$SELF: build failed after $((SECONDS - t0)) s" >&2
    exit 1
  fi
  local build_s=$((SECONDS - t0))
  local configs=("sve 256" "sve 128" "sve 512" "neon -")
  local results=() failed=0 c cpu bits name log rc
  for c in "${configs[@]}"; do
    read -r cpu bits <<<"$c"
    if [ "$cpu" = sve ]; then name="sve$bits"; else name=neon; fi
    log="$CARGO_TARGET_DIR/check-aarch64-$name.log"
    setup_env "$(qemu_cpu "$cpu" "$bits")"
    t0=$SECONDS
    set +e
    if [ ${#subset[@]} -gt 0 ] && [ "$name" != sve256 ]; then
      echo "$SELF: [$name] unit tests, kernel families, golden answers per family (qemu -cpu $(qemu_cpu "$cpu" "$bits"))" >&2
      {
        run_cargo test "${subset[@]}" --lib --test families &&
          run_cargo test "${subset[@]}" --test golden -- golden_answers_every_simd_level
      } 2>&1 | tee "$log"
    else
      echo "$SELF: [$name] cargo test $* (qemu -cpu $(qemu_cpu "$cpu" "$bits"))" >&2
      run_cargo test "$@" 2>&1 | tee "$log"
    fi
    rc=${PIPESTATUS[0]}
    set -e
    if [ "$rc" -eq 0 ]; then
      results+=("$(printf '%-8s PASS  %5d s' "$name" $((SECONDS - t0)))")
    else
      results+=("$(printf '%-8s FAIL  %5d s  (exit %d, log %s)' "$name" $((SECONDS - t0)) "$rc" "$log")")
      failed=1
    fi
  done
  echo
  echo "== aarch64 check ($(/usr/bin/rustc --version))"
  printf '%-8s %-5s %5d s\n' build done "$build_s"
  printf '%s\n' "${results[@]}"
  exit "$failed"
}

main() {
  local cpu=sve bits=256
  while [ $# -gt 0 ]; do
    case "$1" in
      install) do_install; exit 0 ;;
      all) shift; do_all "$@" ;;
      --cpu) [ $# -ge 2 ] || usage; cpu=$2; shift 2 ;;
      --cpu=*) cpu=${1#*=}; shift ;;
      --sve-bits) [ $# -ge 2 ] || usage; bits=$2; shift 2 ;;
      --sve-bits=*) bits=${1#*=}; shift ;;
      -h | --help) usage ;;
      cargo) break ;;
      *) usage ;;
    esac
  done
  [ "${1:-}" = cargo ] && [ $# -ge 2 ] || usage
  shift
  local qcpu
  qcpu=$(qemu_cpu "$cpu" "$bits")
  setup_env "$qcpu"
  echo "$SELF: $(/usr/bin/rustc --version), $TARGET, qemu -cpu $qcpu, target dir $CARGO_TARGET_DIR" >&2
  local sub=$1; shift
  exec /usr/bin/cargo "$sub" --target "$TARGET" "$@"
}

# On one line, so bash has read it all before running: editing this file mid-run is then safe.
main "$@"; exit $?
