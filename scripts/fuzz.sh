#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (a benchmark, outside CI) and prints
# the executions per target and in total.
#   scripts/fuzz.sh [SECONDS] [TARGET...]      (default 60 s, all targets)
# Needs the nightly toolchain; builds the targets with libFuzzer's coverage
# instrumentation as cargo-fuzz does (no sanitizer: the broker is safe Rust
# over glommio, and ASan slows it several times), with debug assertions and
# overflow checks on. Crashes land in fuzz/artifacts/<target>/ and the run
# goes on (-fork=1 -ignore_crashes=1); replay one with
#   fuzz/target/x86_64-unknown-linux-gnu/release/<target> <file>
# Corpora grow in fuzz/corpus/<target>/, seeded from fuzz/seeds/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET="${1:-60}"
shift || true
TARGETS=("$@")
if [[ ${#TARGETS[@]} -eq 0 ]]; then
  TARGETS=(handlers record_batch_append record_batch request_frame inter_broker sasl_tokens acls)
fi
TRIPLE=x86_64-unknown-linux-gnu
export RUSTFLAGS="--cfg fuzzing -Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares -Cdebug-assertions -Coverflow-checks"
nice cargo +nightly build --release --manifest-path fuzz/Cargo.toml --target "$TRIPLE" --bins
total=0
for t in "${TARGETS[@]}"; do
  mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
  seeds=()
  [[ -d "fuzz/seeds/$t" ]] && seeds=("fuzz/seeds/$t")
  log="fuzz/artifacts/$t/run.log"
  # In-process broker data goes to KSHARD_FUZZ_DIR (default: the temp dir).
  nice "fuzz/target/$TRIPLE/release/$t" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 \
    -ignore_ooms=1 -timeout=10 -rss_limit_mb=1024 -max_total_time="$SECONDS_PER_TARGET" \
    -artifact_prefix="fuzz/artifacts/$t/" "fuzz/corpus/$t" "${seeds[@]}" >"$log" 2>&1 || true
  # Fork-mode children exit without closing their broker: drop its data.
  rm -rf "${KSHARD_FUZZ_DIR:-${TMPDIR:-/tmp}}"/kshard-fuzz-*
  # Fork mode reports "#<total executions>: cov: ..." lines.
  runs=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#')
  runs=${runs:-0}
  crashes=$(ls "fuzz/artifacts/$t" | grep -cE '^(crash|timeout|oom)-' || true)
  printf '%-22s %12d executions, %d crash/timeout/oom artifacts\n' "$t" "$runs" "$crashes"
  total=$((total + runs))
done
printf 'total executions: %d\n' "$total"
