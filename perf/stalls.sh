#!/usr/bin/env bash
# Stall benchmarks: kshard's worst shard stall (detector at 10 ms) while
# 10,000 partitions are created and deleted, 10,000 idempotent producers are
# snapshotted, leadership of 1,000 partitions moves (2-broker ZooKeeper
# cluster), a 1 GiB partition is compacted (also with its input out of the
# page cache), 128 direct-mode segments roll and
# 1 GiB dropped from the page cache is consumed. See perf/stalls.py --help.
# Uses target/release/kshard and kshard-perf (KSHARD_BIN overrides kshard).
#   perf/stalls.sh [--only partitions|producers|leader_isr|compaction|cold_compaction|direct_roll|cold_consume]...
set -euo pipefail
exec python3 "$(dirname "$0")/stalls.py" "$@"
