//! The consumer: one fetch loop per partition leader, counting records and
//! payload bytes, or measuring end-to-end latency from stamped values.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use crate::client::{Conn, TopicInfo};
use crate::produce::Clock;
use crate::records::{for_each_record, BatchView};
use crate::stats::{new_histogram, record_us, Stats};

const FETCH_MAX_WAIT_MS: i32 = 500;

#[derive(Clone)]
pub struct FetchOpts {
    pub topic: String,
    pub fetch_max_bytes: i32,
    pub partition_max_bytes: i32,
    pub num_records: Option<u64>,
    /// Stop when every partition reaches these offsets (exclusive).
    pub end_offsets: Option<Vec<i64>>,
    /// Stop after this long without a record.
    pub idle_timeout: Duration,
    /// Measure end-to-end latency from the first 8 value bytes.
    pub e2e: Option<Clock>,
    /// Verify each batch's CRC32C.
    pub check_crc: bool,
}

/// Shared state of a running consume.
pub struct FetchState {
    pub stop: AtomicBool,
    /// ns since `started` of the last record seen.
    pub last_record_ns: AtomicU64,
    pub started: Instant,
}

impl FetchState {
    pub fn new() -> Arc<FetchState> {
        Arc::new(FetchState {
            stop: AtomicBool::new(false),
            last_record_ns: AtomicU64::new(0),
            started: Instant::now(),
        })
    }
}

/// Runs one fetcher thread per leader until a stop condition. Records and
/// bytes go to `stats`; with `opts.e2e`, latencies too. Returns the time from
/// start to the last record seen.
pub fn run_fetchers(
    opts: &FetchOpts,
    info: &TopicInfo,
    start_offsets: &[i64],
    stats: &Arc<Stats>,
    state: &Arc<FetchState>,
    positions: &Arc<Mutex<Vec<(i32, i64)>>>,
) -> Result<Duration> {
    assert_eq!(start_offsets.len(), info.partitions.len());
    let mut by_leader: HashMap<i32, Vec<usize>> = HashMap::new();
    for (i, p) in info.partitions.iter().enumerate() {
        by_leader.entry(p.leader_id).or_default().push(i);
    }
    let mut handles = Vec::new();
    for (leader, idxs) in by_leader {
        let addr = info
            .brokers
            .get(&leader)
            .ok_or_else(|| anyhow!("unknown leader {leader}"))?
            .clone();
        let parts: Vec<FetchPart> = idxs
            .iter()
            .map(|&i| FetchPart {
                partition: info.partitions[i].partition,
                offset: start_offsets[i],
                end: opts.end_offsets.as_ref().map(|e| e[i]),
            })
            .collect();
        let opts = opts.clone();
        let stats = stats.clone();
        let state = state.clone();
        let positions = positions.clone();
        handles.push(std::thread::spawn(move || {
            let r = fetch_loop(&addr, &opts, parts, &stats, &state, &positions);
            if r.is_err() {
                state.stop.store(true, Ordering::Relaxed);
            }
            r
        }));
    }
    let mut first_err = None;
    for h in handles {
        match h.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(_) => {
                first_err.get_or_insert(anyhow!("fetcher thread panicked"));
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    Ok(Duration::from_nanos(
        state.last_record_ns.load(Ordering::Relaxed),
    ))
}

struct FetchPart {
    partition: i32,
    offset: i64,
    end: Option<i64>,
}

impl FetchPart {
    fn finished(&self) -> bool {
        self.end.is_some_and(|e| self.offset >= e)
    }
}

fn fetch_loop(
    addr: &str,
    opts: &FetchOpts,
    mut parts: Vec<FetchPart>,
    stats: &Stats,
    state: &FetchState,
    positions: &Mutex<Vec<(i32, i64)>>,
) -> Result<()> {
    let mut conn = Conn::open(addr)?;
    let version = conn.versions.pick::<FetchRequest>(12)?;
    let topic = TopicName(StrBytes::from_string(opts.topic.clone()));
    let mut h = new_histogram();
    let mut last_merge = Instant::now();
    let mut last_record_at = Instant::now();
    while !state.stop.load(Ordering::Relaxed) {
        if parts.iter().all(|p| p.finished()) {
            break;
        }
        if last_record_at.elapsed() >= opts.idle_timeout {
            break;
        }
        let fetch_parts = parts
            .iter()
            .filter(|p| !p.finished())
            .map(|p| {
                FetchPartition::default()
                    .with_partition(p.partition)
                    .with_current_leader_epoch(-1)
                    .with_fetch_offset(p.offset)
                    .with_last_fetched_epoch(-1)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(opts.partition_max_bytes)
            })
            .collect();
        let req = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(FETCH_MAX_WAIT_MS)
            .with_min_bytes(1)
            .with_max_bytes(opts.fetch_max_bytes)
            .with_isolation_level(0)
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(topic.clone())
                .with_partitions(fetch_parts)]);
        let resp = conn.call(&req, version)?;
        if resp.error_code != 0 {
            bail!("fetch failed with error {}", resp.error_code);
        }
        let now_ns = opts.e2e.map(|c| c.now_ns()).unwrap_or(0);
        let mut got_records = 0u64;
        let mut got_bytes = 0u64;
        for t in &resp.responses {
            for pd in &t.partitions {
                let Some(part) = parts.iter_mut().find(|p| p.partition == pd.partition_index)
                else {
                    continue;
                };
                match pd.error_code {
                    0 => {}
                    // Retriable leadership/metadata errors: try again.
                    3 | 5 | 6 | 74 | 75 => {
                        std::thread::sleep(Duration::from_millis(100));
                        continue;
                    }
                    e => bail!(
                        "fetch {}-{} failed with error {e}",
                        opts.topic,
                        part.partition
                    ),
                }
                let Some(records) = &pd.records else { continue };
                let mut pos = 0usize;
                while pos < records.len() {
                    let Some(view) = BatchView::parse(&records[pos..])? else {
                        break; // partial batch at the end of the response
                    };
                    let batch = &records[pos..pos + view.batch_size_bytes];
                    pos += view.batch_size_bytes;
                    if opts.check_crc && !view.crc_ok(batch) {
                        bail!(
                            "CRC mismatch in {}-{} at offset {}",
                            opts.topic,
                            part.partition,
                            view.base_offset
                        );
                    }
                    if view.next_offset() <= part.offset {
                        continue;
                    }
                    if !view.is_control() {
                        let from = part.offset;
                        for_each_record(batch, &view, |r| {
                            if view.base_offset + r.offset_delta as i64 >= from {
                                got_records += 1;
                                got_bytes += (r.key_len + r.value.len()) as u64;
                                if opts.e2e.is_some() && r.value.len() >= 8 {
                                    let sent = u64::from_le_bytes(
                                        r.value[..8].try_into().expect("8 bytes"),
                                    );
                                    record_us(
                                        &mut h,
                                        Duration::from_nanos(now_ns.saturating_sub(sent)),
                                    );
                                }
                            }
                        })?;
                    }
                    part.offset = view.next_offset();
                }
            }
        }
        if got_records > 0 {
            last_record_at = Instant::now();
            stats.add(got_records, got_bytes);
            state
                .last_record_ns
                .fetch_max(state.started.elapsed().as_nanos() as u64, Ordering::Relaxed);
            if opts
                .num_records
                .is_some_and(|n| stats.records.load(Ordering::Relaxed) >= n)
            {
                state.stop.store(true, Ordering::Relaxed);
            }
        }
        if last_merge.elapsed() >= Duration::from_millis(100) {
            stats.merge(&mut h);
            last_merge = Instant::now();
        }
    }
    stats.merge(&mut h);
    positions
        .lock()
        .expect("positions lock")
        .extend(parts.iter().map(|p| (p.partition, p.offset)));
    Ok(())
}
