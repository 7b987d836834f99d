#!/usr/bin/env bash
# Differential SQL fuzzer (Tessera vs DuckDB), see scripts/fuzz.py:
#   scripts/fuzz.sh --queries 1000000 [--seed S] [--rows R] [--out FILE] [--time-limit SECONDS]
#                   [--source memory|stream|disk]
# Builds the SQL worker example and the tessera CLI in release, then scripts/fuzz.py
# generates the data into a temp dir (hits with `tessera gen hits`, the edge-value table
# with DuckDB), runs the queries, writes the report and deletes the data.
# Exit status: 0 clean, 1 a crash/panic/internal error/hang/wrong answer, 2 setup error.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! python3 -c 'import duckdb' 2>/dev/null; then
  echo "fuzz: needs DuckDB for Python: python3 -m pip install duckdb" >&2
  exit 2
fi
# The same build as README's test command (`cargo test --workspace --release`), which also
# builds the examples and the CLI: one feature set, so after the tests this is a no-op
# instead of a second build of arrow/parquet with other features.
cargo test --workspace --release --no-run -q 2>/dev/null || cargo test --workspace --release --no-run
target_dir="${CARGO_TARGET_DIR:-target}"
exec python3 scripts/fuzz.py --worker "$target_dir/release/examples/sql_worker" \
  --tessera "$target_dir/release/tessera" "$@"
