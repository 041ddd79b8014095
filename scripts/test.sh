#!/usr/bin/env bash
# Unit and integration tests, then the real-client compatibility suite.
# KSHARD_TEST_TARGET=kafka runs the compat suite against Apache Kafka instead.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
if [[ "${KSHARD_TEST_TARGET:-kshard}" == kshard ]]; then
  cargo test --release --workspace || status=1
fi
python3 -m pytest tests/compat -v "$@" || status=1
# Multi-broker clusters over a real ZooKeeper (ZooKeeper started by the tests).
python3 -m pytest tests/cluster -v "$@" || status=1
exit "$status"
