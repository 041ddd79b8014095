#!/usr/bin/env bash
# kill -9 soak over a three-broker ZooKeeper cluster: the long version of
# tests/cluster/test_kill_loop.py (not run in CI). Two idempotent acks=all
# producers (kafka-clients 3.9.1 and librdkafka) write numbered records while
# a random broker is killed and restarted KILLS times; then every partition
# is read back and every acknowledged record must be there exactly once, at
# its acknowledged offset, in order. Progress lines, then a JSON summary
# (kills, records_acked, records_verified, lost, duplicated, elapsed_s, ...).
#
#   scripts/soak.sh                    # 1000 kills against target/release/kshard
#   scripts/soak.sh --kills 50         # shorter
#   KSHARD_TEST_TARGET=kafka scripts/soak.sh --kills 100   # Apache Kafka 3.9.1
#   scripts/soak.sh --summary /tmp/soak.json --rate 300 --seed 7
#
# Ctrl-C stops the kill loop and still checks the log. Exit status 1 when the
# check fails; broker and producer logs are then kept in
# /tmp/kshard-cluster-logs/soak-<time>/. Needs scripts/setup.sh (Kafka jars,
# the Java compat client, Python clients) and, for kshard, a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
export KSHARD_TEST_TARGET="${KSHARD_TEST_TARGET:-kshard}"
if [[ "$KSHARD_TEST_TARGET" == kshard && ! -x "${KSHARD_BIN:-target/release/kshard}" ]]; then
  echo "soak: ${KSHARD_BIN:-target/release/kshard} missing: cargo build --release --bins" >&2
  exit 2
fi
exec python3 -u tests/cluster/soak.py "$@"
