//! kshard-perf: a throughput-oriented Kafka producer and consumer for
//! measuring kshard (or any Kafka-compatible broker).
//!
//! Subcommands: `produce`, `consume`, `e2e`; run with `--help` for flags.

mod batch;
mod client;
mod consume;
mod group;
mod produce;
mod records;
mod stats;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use batch::Compression;
use client::Conn;
use consume::{FetchOpts, FetchState};
use produce::{Clock, ProduceOpts};
use stats::{Reporter, Stats, Summary};

const TOPIC_READY_TIMEOUT_MS: u64 = 60_000;

const USAGE: &str = "\
usage:
  kshard-perf produce --bootstrap-server H:P --topic T (--num-records N | --duration-s S)
      --record-size B [--throughput RECORDS_PER_S] [--acks 0|1|all] [--partitions P]
      [--producers K] [--compression none|gzip|snappy|lz4|zstd] [--batch-size B]
      [--linger-ms L] [--key-cardinality C] [--max-in-flight N] [--json]
  kshard-perf consume --bootstrap-server H:P --topic T [--group G] [--num-records N]
      [--from-start] [--fetch-max-bytes B] [--partition-max-bytes B]
      [--timeout-ms IDLE_MS] [--check-crc] [--json]
  kshard-perf e2e --bootstrap-server H:P --topic T --throughput R --record-size B
      [--duration-s S] [--acks 0|1|all] [--partitions P] [--batch-size B]
      [--linger-ms L] [--json]
";

/// `--flag value` pairs and bare `--flag` switches.
struct Args {
    values: HashMap<String, String>,
    switches: Vec<String>,
}

const SWITCHES: &[&str] = &["--json", "--from-start", "--check-crc"];

impl Args {
    fn parse(raw: &[String]) -> Result<Args> {
        let mut values = HashMap::new();
        let mut switches = Vec::new();
        let mut it = raw.iter();
        while let Some(a) = it.next() {
            if !a.starts_with("--") {
                bail!("unexpected argument {a:?}");
            }
            if SWITCHES.contains(&a.as_str()) {
                switches.push(a.clone());
                continue;
            }
            let v = it.next().ok_or_else(|| anyhow!("{a} needs a value"))?;
            values.insert(a.clone(), v.clone());
        }
        Ok(Args { values, switches })
    }

    fn str(&self, k: &str) -> Option<&str> {
        self.values.get(k).map(|s| s.as_str())
    }

    fn req(&self, k: &str) -> Result<&str> {
        self.str(k).ok_or_else(|| anyhow!("{k} is required"))
    }

    fn num<T: std::str::FromStr>(&self, k: &str) -> Result<Option<T>>
    where
        T::Err: std::fmt::Display,
    {
        match self.str(k) {
            None => Ok(None),
            Some(v) => v
                .parse::<T>()
                .map(Some)
                .map_err(|e| anyhow!("{k} {v:?}: {e}")),
        }
    }

    fn flag(&self, k: &str) -> bool {
        self.switches.iter().any(|s| s == k)
    }

    fn check_known(&self, known: &[&str]) -> Result<()> {
        for k in self.values.keys().chain(self.switches.iter()) {
            if !known.contains(&k.as_str()) {
                bail!("unknown flag {k} for this command");
            }
        }
        Ok(())
    }
}

fn parse_acks(s: Option<&str>) -> Result<i16> {
    Ok(match s.unwrap_or("1") {
        "0" => 0,
        "1" => 1,
        "all" | "-1" => -1,
        other => bail!("--acks {other:?}: expected 0, 1 or all"),
    })
}

fn main() {
    let raw: Vec<String> = std::env::args().skip(1).collect();
    let result = match raw.first().map(|s| s.as_str()) {
        Some("produce") => Args::parse(&raw[1..]).and_then(|a| cmd_produce(&a)),
        Some("consume") => Args::parse(&raw[1..]).and_then(|a| cmd_consume(&a)),
        Some("e2e") => Args::parse(&raw[1..]).and_then(|a| cmd_e2e(&a)),
        Some("-h") | Some("--help") | Some("help") => {
            print!("{USAGE}");
            Ok(())
        }
        _ => {
            eprint!("{USAGE}");
            std::process::exit(2);
        }
    };
    if let Err(e) = result {
        eprintln!("kshard-perf: error: {e:#}");
        std::process::exit(1);
    }
}

fn produce_opts(a: &Args, topic: &str) -> Result<ProduceOpts> {
    let record_size_bytes: usize = a
        .num("--record-size")?
        .context("--record-size is required")?;
    let throughput_per_s = a.num::<f64>("--throughput")?.filter(|&t| t > 0.0);
    Ok(ProduceOpts {
        topic: topic.to_string(),
        num_records: a.num("--num-records")?,
        duration: a.num::<f64>("--duration-s")?.map(Duration::from_secs_f64),
        record_size_bytes,
        throughput_per_s,
        acks: parse_acks(a.str("--acks"))?,
        producers: a.num("--producers")?.unwrap_or(1usize).max(1),
        compression: Compression::parse(a.str("--compression").unwrap_or("none"))?,
        batch_size_bytes: a.num("--batch-size")?.unwrap_or(65_536usize).max(1024),
        linger_ms: a.num("--linger-ms")?.unwrap_or(5),
        key_cardinality: a.num("--key-cardinality")?.unwrap_or(0),
        max_in_flight: a.num("--max-in-flight")?.unwrap_or(5usize),
        stamp_values: false,
    })
}

fn cmd_produce(a: &Args) -> Result<()> {
    a.check_known(&[
        "--bootstrap-server",
        "--topic",
        "--num-records",
        "--duration-s",
        "--record-size",
        "--throughput",
        "--acks",
        "--partitions",
        "--producers",
        "--compression",
        "--batch-size",
        "--linger-ms",
        "--key-cardinality",
        "--max-in-flight",
        "--json",
    ])?;
    let bootstrap = a.req("--bootstrap-server")?;
    let topic = a.req("--topic")?;
    let opts = produce_opts(a, topic)?;
    if opts.num_records.is_none() && opts.duration.is_none() {
        bail!("one of --num-records or --duration-s is required");
    }
    let mut conn = Conn::open(bootstrap)?;
    let info = client::ensure_topic(
        &mut conn,
        topic,
        a.num("--partitions")?,
        true,
        TOPIC_READY_TIMEOUT_MS,
    )?;
    let stats = Stats::new();
    let reporter = Reporter::start("produce", stats.clone());
    let elapsed = produce::run_producers(&opts, &info, Clock::new(), &stats);
    reporter.finish();
    let elapsed = elapsed?;
    Summary {
        mode: "produce",
        records: stats.records.load(Ordering::Relaxed),
        payload_bytes: stats.payload_bytes.load(Ordering::Relaxed),
        errors: stats.errors.load(Ordering::Relaxed),
        elapsed,
        latencies: vec![("latency", stats.total_histogram())],
    }
    .print(a.flag("--json"));
    Ok(())
}

fn cmd_consume(a: &Args) -> Result<()> {
    a.check_known(&[
        "--bootstrap-server",
        "--topic",
        "--group",
        "--num-records",
        "--from-start",
        "--fetch-max-bytes",
        "--partition-max-bytes",
        "--timeout-ms",
        "--check-crc",
        "--json",
    ])?;
    let bootstrap = a.req("--bootstrap-server")?;
    let topic = a.req("--topic")?;
    let from_start = a.flag("--from-start");
    let num_records: Option<u64> = a.num("--num-records")?;
    let mut conn = Conn::open(bootstrap)?;
    let mut info = client::ensure_topic(&mut conn, topic, None, false, TOPIC_READY_TIMEOUT_MS)?;
    let reset = if from_start { -2 } else { -1 };
    let mut member = None;
    let start_offsets = match a.str("--group") {
        None => client::list_offsets(&info, topic, reset)?,
        Some(g) => match group::Member::join(&mut conn, g, topic, &info) {
            Ok(m) => {
                // Only the assigned partitions are fetched.
                let assigned = m.assigned.clone();
                info.partitions.retain(|p| assigned.contains(&p.partition));
                let defaults = client::list_offsets(&info, topic, reset)?;
                let committed = m.committed_offsets(&info)?;
                member = Some(m);
                committed
                    .iter()
                    .zip(defaults)
                    .map(|(c, d)| if *c >= 0 { *c } else { d })
                    .collect()
            }
            Err(e) => {
                eprintln!(
                    "warning: consumer group {g:?} unavailable ({e:#}); consuming all partitions without a group"
                );
                client::list_offsets(&info, topic, reset)?
            }
        },
    };
    let end_offsets = if num_records.is_none() {
        Some(client::list_offsets(&info, topic, -1)?)
    } else {
        None
    };
    let opts = FetchOpts {
        topic: topic.to_string(),
        fetch_max_bytes: a.num("--fetch-max-bytes")?.unwrap_or(52_428_800),
        partition_max_bytes: a.num("--partition-max-bytes")?.unwrap_or(1_048_576),
        num_records,
        end_offsets,
        idle_timeout: Duration::from_millis(a.num("--timeout-ms")?.unwrap_or(10_000)),
        e2e: None,
        check_crc: a.flag("--check-crc"),
    };
    let stats = Stats::new();
    let state = FetchState::new();
    let heartbeat = member.as_ref().map(|m| m.start_heartbeat(state.clone()));
    let reporter = Reporter::start("consume", stats.clone());
    let positions = Arc::new(std::sync::Mutex::new(Vec::new()));
    let elapsed = consume::run_fetchers(&opts, &info, &start_offsets, &stats, &state, &positions);
    reporter.finish();
    state.stop.store(true, Ordering::Relaxed);
    if let Some(h) = heartbeat {
        let _ = h.join();
    }
    let elapsed = elapsed?;
    if let Some(m) = member {
        let pos = positions.lock().expect("positions lock").clone();
        if let Err(e) = m.commit_and_leave(&mut conn, &pos) {
            eprintln!("warning: committing offsets failed: {e:#}");
        }
    }
    Summary {
        mode: "consume",
        records: stats.records.load(Ordering::Relaxed),
        payload_bytes: stats.payload_bytes.load(Ordering::Relaxed),
        errors: 0,
        elapsed,
        latencies: Vec::new(),
    }
    .print(a.flag("--json"));
    Ok(())
}

fn cmd_e2e(a: &Args) -> Result<()> {
    a.check_known(&[
        "--bootstrap-server",
        "--topic",
        "--throughput",
        "--record-size",
        "--duration-s",
        "--acks",
        "--partitions",
        "--batch-size",
        "--linger-ms",
        "--max-in-flight",
        "--json",
    ])?;
    let bootstrap = a.req("--bootstrap-server")?;
    let topic = a.req("--topic")?;
    let mut popts = produce_opts(a, topic)?;
    if popts.throughput_per_s.is_none() {
        bail!("--throughput is required for e2e");
    }
    if popts.record_size_bytes < 8 {
        bail!("--record-size must be at least 8 for e2e (the send time is in the value)");
    }
    popts.duration = Some(popts.duration.unwrap_or(Duration::from_secs(30)));
    popts.num_records = None;
    popts.stamp_values = true;
    // Latency runs flush batches promptly unless told otherwise.
    if a.str("--linger-ms").is_none() {
        popts.linger_ms = 1;
    }
    let mut conn = Conn::open(bootstrap)?;
    let info = client::ensure_topic(
        &mut conn,
        topic,
        a.num("--partitions")?,
        true,
        TOPIC_READY_TIMEOUT_MS,
    )?;
    let start_offsets = client::list_offsets(&info, topic, -1)?;
    let clock = Clock::new();
    let fopts = FetchOpts {
        topic: topic.to_string(),
        fetch_max_bytes: 52_428_800,
        partition_max_bytes: 1_048_576,
        num_records: None,
        end_offsets: None,
        idle_timeout: Duration::from_secs(3600),
        e2e: Some(clock),
        check_crc: false,
    };
    let cstats = Stats::new();
    let pstats = Stats::new();
    let state = FetchState::new();
    let consumer = {
        let (info, cstats, state) = (info.clone(), cstats.clone(), state.clone());
        std::thread::spawn(move || {
            let positions = Arc::new(std::sync::Mutex::new(Vec::new()));
            consume::run_fetchers(&fopts, &info, &start_offsets, &cstats, &state, &positions)
        })
    };
    let reporter = Reporter::start("e2e", cstats.clone());
    let produced = produce::run_producers(&popts, &info, clock, &pstats);
    // Let the consumer catch up with everything acknowledged.
    let acked = pstats.records.load(Ordering::Relaxed);
    let deadline = Instant::now() + Duration::from_secs(30);
    while cstats.records.load(Ordering::Relaxed) < acked && Instant::now() < deadline {
        if state.stop.load(Ordering::Relaxed) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    state.stop.store(true, Ordering::Relaxed);
    let consumed = consumer
        .join()
        .map_err(|_| anyhow!("consumer thread panicked"))?;
    reporter.finish();
    let elapsed = produced?;
    consumed?;
    let records = cstats.records.load(Ordering::Relaxed);
    if records < acked {
        eprintln!("warning: consumed {records} of {acked} acknowledged records");
    }
    Summary {
        mode: "e2e",
        records,
        payload_bytes: cstats.payload_bytes.load(Ordering::Relaxed),
        errors: pstats.errors.load(Ordering::Relaxed),
        elapsed,
        latencies: vec![
            ("e2e_latency", cstats.total_histogram()),
            ("produce_latency", pstats.total_histogram()),
        ],
    }
    .print(a.flag("--json"));
    Ok(())
}
