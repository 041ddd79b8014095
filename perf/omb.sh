#!/usr/bin/env bash
# OpenMessaging-Benchmark-style workloads on Apache Kafka 3.9.1 and kshard, one
# command. See perf/omb.py --help. Example quick run (~9 minutes):
#   nice perf/omb.sh --quick --no-build
set -euo pipefail
exec python3 "$(dirname "$0")/omb.py" "$@"
