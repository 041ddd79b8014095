#!/usr/bin/env bash
# One-command side-by-side benchmark of kshard vs Apache Kafka 3.9.1.
# See perf/compare.py --help. Example quick run:
#   perf/compare.sh --quick --no-build
# Kafka's tools over an SSL listener on both brokers (tuning.md, issue 20):
#   perf/compare.sh --no-build --tls --brokers kafka,kshard --workloads produce_1k_acks1,consume
set -euo pipefail
exec python3 "$(dirname "$0")/compare.py" "$@"
