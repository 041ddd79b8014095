#!/usr/bin/env bash
# One-command side-by-side benchmark of kshard vs Apache Kafka 3.9.1.
# See perf/compare.py --help. Example quick run:
#   perf/compare.sh --quick --no-build
set -euo pipefail
exec python3 "$(dirname "$0")/compare.py" "$@"
