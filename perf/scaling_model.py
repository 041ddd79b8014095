#!/usr/bin/env python3
"""The scaling model of tuning.md ("Scaling model (issue 16)"): broker CPU
seconds per GiB and throughput at S shards, from figures measured on the
2-core machine (perf/shards.py, shards/benches/mailbox.rs,
benches/metadata.rs). Every input is a named constant below; the output is
the projection table quoted in tuning.md. Extrapolation, not measurement.

Usage: perf/scaling_model.py
"""

import random

# Measured (tuning.md lists the commands).
# produce 1 KiB acks=1, 8 partitions, 1 shard, one connection: mean of 5 runs
CPU_S_PER_GIB_1_SHARD = 1.16
CALL_CPU_S_BUSY = (0.46e-6, 1.46e-6)  # mailbox cpu/in_flight_256 .. in_flight_64
# An idle call: one doorbell and wake (half of cpu/round_trip, which has
# two; the broker rang 1.06-1.08 per call) .. two.
CALL_CPU_S_IDLE = (64e-6, 128e-6)
CONN_SHARE = 0.30  # of the work, on the connection's shard (2-shard thread split)
# kshard-perf produce requests per GiB (client sendto calls, perf/shards.py):
# every request carries all 8 partitions' 64 KiB batches.
REQUESTS_PER_GIB = 2150
PARTITIONS_PER_REQUEST = 8
# Assumed: one contended atomic on the image's reference count costs a
# cache-line transfer (56 ns measured between 2 cores; 100 ns assumed on a
# many-core socket); two per Produce or Fetch request.
REFCOUNT_RMW_S = 100e-9
REFCOUNT_RMW_PER_REQUEST = 2
SHARDS = (2, 16, 32, 64)


def remote_calls_per_request(shards, partitions):
    """Partitions of one topic go round-robin over shards from a per-topic
    start; the connection's shard is one of the S at random."""
    touched = min(partitions, shards)
    return touched * (1 - 1 / shards)


def cpu_s_per_gib(shards, requests_per_gib, call_cpu_s):
    calls = requests_per_gib * remote_calls_per_request(shards, PARTITIONS_PER_REQUEST)
    return CPU_S_PER_GIB_1_SHARD + calls * call_cpu_s


def expected_max_bin(balls, bins, trials=4000, seed=16):
    """Expected connections on the busiest shard when SO_REUSEPORT hashes
    `balls` connections uniformly over `bins` shards."""
    rng = random.Random(seed)
    total = 0
    for _ in range(trials):
        counts = [0] * bins
        for _ in range(balls):
            counts[rng.randrange(bins)] += 1
        total += max(counts)
    return total / trials


def spread_efficiency(shards, connections):
    """Throughput over the ideal when the busiest shard bounds it: it does
    its 1/S of the partition work and its connections' work."""
    max_conns = expected_max_bin(connections, shards)
    return 1 / ((1 - CONN_SHARE) + CONN_SHARE * shards * max_conns / connections)


def main():
    print("S  remote calls/req  cpu s/GiB busy (lo..hi)  idle (lo..hi)  per-core eff busy  spread eff C=S C=4S C=16S"
          "  GiB/s at C=4S (lo..hi)")
    for s in SHARDS:
        busy = [cpu_s_per_gib(s, REQUESTS_PER_GIB, c) for c in CALL_CPU_S_BUSY]
        idle = [cpu_s_per_gib(s, REQUESTS_PER_GIB, c) for c in CALL_CPU_S_IDLE]
        eff = [CPU_S_PER_GIB_1_SHARD / c for c in busy]
        spread = [spread_efficiency(s, s * m) for m in (1, 4, 16)]
        print(f"{s:<3}{remote_calls_per_request(s, PARTITIONS_PER_REQUEST):>8.2f}"
              f"{busy[0]:>16.3f}..{busy[1]:.3f}{idle[0]:>12.2f}..{idle[1]:.2f}"
              f"{eff[1]:>11.2f}..{eff[0]:.2f}     " + "  ".join(f"{e:.2f}" for e in spread)
              + f"{s / busy[1] * spread[1]:>10.1f}..{s / busy[0] * spread[1]:.1f}")
    # The image's reference count: one cache line every request writes twice.
    line_rmw_per_s = 1 / REFCOUNT_RMW_S
    print(f"image refcount line: at most {line_rmw_per_s / REFCOUNT_RMW_PER_REQUEST / 1e6:.1f} M Produce/Fetch "
          "requests/s per broker, whatever the core count")


if __name__ == "__main__":
    main()
