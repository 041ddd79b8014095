#!/usr/bin/env python3
"""One broker, one kshard-perf produce, and where the broker's CPU went.

Starts a fresh broker as `perf/compare.py` does (kafka or kshard, its
settings), runs `kshard-perf produce` into 8 partitions for
`--duration-s`, and prints the broker's CPU per GiB with its kernel share,
its context switches and the machine's rescheduling and function-call
IPIs per GiB. With `--perf-s N` it also records the broker for N seconds
from the third second (`perf record -g`) and prints the top symbols of
the shard threads, the place to look before and after a change to the
produce path: on this VM the side-by-side figures drift too much to show a
few per cent, symbol shares in one profile do not.

    python3 perf/profile.py --broker kshard --record-size 100 --acks all --perf-s 5
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare as C  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def interrupts():
    """Rescheduling and function-call IPIs so far, summed over CPUs."""
    out = {}
    for line in open("/proc/interrupts"):
        f = line.split()
        if f and f[0] in ("RES:", "CAL:"):
            out[f[0][:-1]] = sum(int(x) for x in f[1:] if x.isdigit())
    return out


def context_switches(pid):
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            for line in (task / "status").read_text().splitlines():
                if "ctxt_switches" in line:
                    total += int(line.split()[1])
        except OSError:
            pass  # the thread exited
    return total


def top_symbols(data, n):
    """The top symbols of the shard threads (named `shard-<i>-<cpu>` by
    glommio; its blocking pool's threads share the name but rarely run)."""
    comms = subprocess.run(["perf", "report", "-i", str(data), "--sort", "comm", "--stdio", "-g", "none"],
                           capture_output=True, text=True).stdout
    shards = sorted({f.split()[-1] for f in comms.splitlines()
                     if "%" in f and not f.startswith("#") and f.split()[-1].startswith("shard-")})
    out = subprocess.run(["perf", "report", "-i", str(data), "--no-children", "--sort", "sym",
                          "--stdio", "-g", "none", "--comm", ",".join(shards)],
                         capture_output=True, text=True)
    lines = [line for line in out.stdout.splitlines() if "%" in line and not line.startswith("#")]
    return lines[:n]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--broker", choices=["kafka", "kshard"], default="kshard")
    p.add_argument("--duration-s", type=int, default=10)
    p.add_argument("--record-size", type=int, default=100)
    p.add_argument("--acks", default="all")
    p.add_argument("--perf-s", type=int, default=0, help="seconds of perf record (0: none)")
    p.add_argument("--top", type=int, default=20)
    p.add_argument("--kshard-bin", default=str(REPO / "target/release/kshard"),
                   help="the broker binary (an older build, to compare)")
    args = p.parse_args()
    bins = {"kshard": Path(args.kshard_bin), "kshard-perf": REPO / "target/release/kshard-perf"}
    root = Path(tempfile.mkdtemp(prefix="kshard-profile-"))
    log4j = root / "log4j.properties"
    log4j.write_text("log4j.rootLogger=WARN, stdout\nlog4j.appender.stdout=org.apache.log4j.ConsoleAppender\n"
                     "log4j.appender.stdout.layout=org.apache.log4j.PatternLayout\n"
                     "log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n\n")
    broker = C.Broker(args.broker, root, bins, {"log4j": log4j})
    broker.start()
    C.wait_ready(bins, broker)
    try:
        irq_before, ctx_before = interrupts(), context_switches(broker.proc.pid)
        with C.BrokerCpu(broker) as cpu:
            producer = subprocess.Popen(
                [str(bins["kshard-perf"]), "produce", "--bootstrap-server", broker.bootstrap, "--topic", "profile",
                 "--partitions", "8", "--record-size", str(args.record_size), "--acks", args.acks,
                 "--duration-s", str(args.duration_s), "--json"], stdout=subprocess.PIPE, text=True)
            if args.perf_s:
                time.sleep(3)
                subprocess.run(["perf", "record", "-F", "999", "-g", "-o", str(root / "perf.data"),
                                "-p", str(broker.proc.pid), "--", "sleep", str(args.perf_s)],
                               capture_output=True, check=True)
            out, _ = producer.communicate()
        r = json.loads(out.strip().splitlines()[-1])
        gib = r["payload_bytes"] / 2**30
        irq_after = interrupts()
        result = {"broker": args.broker, "mb_per_s": round(r["mb_per_s"], 1),
                  **{k: round(v, 3) for k, v in cpu.figures("produce", r["payload_bytes"]).items()},
                  "context_switches_per_gib": round((context_switches(broker.proc.pid) - ctx_before) / gib),
                  **{f"{k}_ipis_per_gib": round((irq_after[k] - irq_before[k]) / gib) for k in irq_after}}
        print(json.dumps(result, indent=1))
        if args.perf_s and args.broker == "kshard":
            print("\n".join(top_symbols(root / "perf.data", args.top)))
    finally:
        broker.stop_all()
        subprocess.run(["rm", "-rf", str(root)])


if __name__ == "__main__":
    main()
