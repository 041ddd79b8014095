//! The producer: K independent threads, each with one pipelined connection
//! per partition leader and one reused batch buffer per partition.

use std::collections::{HashMap, VecDeque};
use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{HeaderVersion, StrBytes};

use crate::batch::{partition_for_key, BatchBuilder, Compression, Compressor};
use crate::client::{self, Receiver, Sender, TopicInfo};
use crate::stats::{record_us, Stats};

/// Requests stop taking batches past this size (Kafka's broker accepts
/// 100 MiB frames; a few MiB keeps pipelining effective).
const MAX_REQUEST_SIZE_BYTES: usize = 4 * 1024 * 1024;
const PRODUCE_TIMEOUT_MS: i32 = 30_000;

/// One clock for the whole process: intended send times are nanoseconds
/// since `base`; record timestamps are wall-clock ms derived from it.
#[derive(Clone, Copy)]
pub struct Clock {
    base: Instant,
    base_wall_ms: i64,
}

impl Clock {
    pub fn new() -> Clock {
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock after 1970");
        Clock {
            base: Instant::now(),
            base_wall_ms: wall.as_millis() as i64,
        }
    }

    pub fn now_ns(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    pub fn wall_ms(&self, ns: u64) -> i64 {
        self.base_wall_ms + (ns / 1_000_000) as i64
    }
}

#[derive(Clone)]
pub struct ProduceOpts {
    pub topic: String,
    pub num_records: Option<u64>,
    pub duration: Option<Duration>,
    pub record_size_bytes: usize,
    pub throughput_per_s: Option<f64>,
    pub acks: i16,
    pub producers: usize,
    pub compression: Compression,
    pub batch_size_bytes: usize,
    pub linger_ms: u64,
    pub key_cardinality: u64,
    pub max_in_flight: usize,
    /// Put the intended send time (ns since the clock base, LE) in the first
    /// 8 bytes of every value, for end-to-end latency.
    pub stamp_values: bool,
}

/// What the broker has not answered yet on one connection, in wire order.
struct InFlight {
    queue: Mutex<VecDeque<Pending>>,
    changed: Condvar,
    done: AtomicBool,
}

struct Pending {
    correlation_id: i32,
    batches: Vec<BatchMeta>,
}

#[derive(Clone, Copy)]
struct BatchMeta {
    partition: i32,
    first_intended_ns: u64,
    last_intended_ns: u64,
    records: u32,
}

struct Part {
    partition: i32,
    conn: usize,
    batch: BatchBuilder,
    first_intended_ns: u64,
    last_intended_ns: u64,
}

struct BrokerConn {
    tx: Sender,
    version: i16,
    shutdown: std::net::TcpStream,
    inflight: Arc<InFlight>,
    reader: Option<JoinHandle<Result<()>>>,
    /// acks=0 only: read half kept for the final ordering barrier.
    barrier_rx: Option<Receiver>,
    parts: Vec<usize>,
    open_since_ns: Option<u64>,
}

/// Runs all producer threads to completion; returns the elapsed time of
/// the slowest. Acked records and latencies land in `stats`.
pub fn run_producers(
    opts: &ProduceOpts,
    info: &TopicInfo,
    clock: Clock,
    stats: &Arc<Stats>,
) -> Result<Duration> {
    assert!(opts.producers > 0);
    let start_ns = clock.now_ns();
    let mut handles = Vec::new();
    for k in 0..opts.producers {
        let mut o = opts.clone();
        let k64 = k as u64;
        let n = opts.producers as u64;
        o.num_records = opts
            .num_records
            .map(|total| total / n + u64::from(k64 < total % n));
        o.throughput_per_s = opts.throughput_per_s.map(|r| r / n as f64);
        let info = info.clone();
        let stats = stats.clone();
        handles.push(std::thread::spawn(move || {
            produce_thread(&o, &info, clock, &stats, k64, start_ns)
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
                first_err.get_or_insert(anyhow!("producer thread panicked"));
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    Ok(Duration::from_nanos(clock.now_ns() - start_ns))
}

fn produce_thread(
    opts: &ProduceOpts,
    info: &TopicInfo,
    clock: Clock,
    stats: &Arc<Stats>,
    seed: u64,
    start_ns: u64,
) -> Result<()> {
    let topic = TopicName(StrBytes::from_string(opts.topic.clone()));
    let mut conns: Vec<BrokerConn> = Vec::new();
    let mut conn_by_leader: HashMap<i32, usize> = HashMap::new();
    let mut parts: Vec<Part> = Vec::with_capacity(info.partitions.len());
    for p in &info.partitions {
        let ci = match conn_by_leader.get(&p.leader_id) {
            Some(&ci) => ci,
            None => {
                let addr = info.leader_addr(p)?;
                let conn = client::Conn::open(addr)?;
                conns.push(start_conn(conn, opts, stats, clock)?);
                conn_by_leader.insert(p.leader_id, conns.len() - 1);
                conns.len() - 1
            }
        };
        conns[ci].parts.push(parts.len());
        parts.push(Part {
            partition: p.partition,
            conn: ci,
            batch: BatchBuilder::new(opts.batch_size_bytes),
            first_intended_ns: 0,
            last_intended_ns: 0,
        });
    }
    let mut ctx = SendCtx {
        topic,
        acks: opts.acks,
        max_in_flight: opts.max_in_flight.max(1),
        compressor: Compressor::new(opts.compression)?,
        record_size_bytes: opts.record_size_bytes as u64,
        stats: stats.clone(),
        clock,
    };

    let payload = payload(opts.record_size_bytes, seed);
    let stamp_len = if opts.stamp_values { 8 } else { 0 };
    assert!(
        payload.len() >= stamp_len,
        "record size below the timestamp size"
    );
    let interval_ns = opts.throughput_per_s.map(|r| 1e9 / r.max(1e-9));
    let end_ns = opts.duration.map(|d| start_ns + d.as_nanos() as u64);
    let linger_ns = opts.linger_ms * 1_000_000;
    let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut key_buf = [0u8; 20];
    let mut next_part = seed as usize;
    let mut i = 0u64;
    loop {
        if opts.num_records.is_some_and(|n| i >= n) {
            break;
        }
        let now_ns = clock.now_ns();
        let intended_ns = match interval_ns {
            Some(iv) => start_ns + (i as f64 * iv) as u64,
            None => now_ns,
        };
        if end_ns.is_some_and(|e| intended_ns >= e) {
            break;
        }
        if intended_ns > now_ns {
            // Ahead of schedule: flush what lingered, then wait.
            let mut wake_ns = intended_ns;
            for c in 0..conns.len() {
                if let Some(since) = conns[c].open_since_ns {
                    if now_ns >= since + linger_ns {
                        if ctx.has_room(&conns[c]) {
                            ctx.drain(&mut conns, &mut parts, c, None)?;
                        }
                    } else {
                        wake_ns = wake_ns.min(since + linger_ns);
                    }
                }
            }
            let now2 = clock.now_ns();
            if wake_ns > now2 {
                std::thread::sleep(Duration::from_nanos((wake_ns - now2).min(1_000_000)));
            }
            continue;
        }
        let key: Option<&[u8]> = if opts.key_cardinality > 0 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            Some(format_u64(rng % opts.key_cardinality, &mut key_buf))
        } else {
            None
        };
        let pi = match key {
            Some(k) => partition_for_key(k, parts.len()),
            None => {
                next_part = (next_part + 1) % parts.len();
                next_part
            }
        };
        let ts_ms = clock.wall_ms(intended_ns);
        let rec_size = parts[pi].batch.record_size_bytes(ts_ms, key, payload.len());
        if !parts[pi].batch.is_empty()
            && parts[pi].batch.size_bytes() + rec_size > opts.batch_size_bytes
        {
            let c = parts[pi].conn;
            ctx.drain(&mut conns, &mut parts, c, Some(pi))?;
        }
        let stamp = intended_ns.to_le_bytes();
        let part = &mut parts[pi];
        if part.batch.is_empty() {
            part.first_intended_ns = intended_ns;
        }
        part.last_intended_ns = intended_ns;
        part.batch
            .append(ts_ms, key, &stamp[..stamp_len], &payload[stamp_len..]);
        let conn = &mut conns[part.conn];
        if conn.open_since_ns.is_none() {
            conn.open_since_ns = Some(now_ns);
        }
        i += 1;
        for c in 0..conns.len() {
            if conns[c]
                .open_since_ns
                .is_some_and(|s| now_ns >= s + linger_ns)
                && ctx.has_room(&conns[c])
            {
                ctx.drain(&mut conns, &mut parts, c, None)?;
            }
        }
    }
    for c in 0..conns.len() {
        while conns[c].open_since_ns.is_some() {
            ctx.drain(&mut conns, &mut parts, c, None)?;
        }
    }
    for conn in &mut conns {
        if let Some(rx) = conn.barrier_rx.as_mut() {
            // A broker answers requests on a connection in order, so this
            // reply means every acks=0 produce before it was handled.
            let req = ApiVersionsRequest::default();
            let id = conn.tx.send(&req, 0)?;
            rx.recv::<ApiVersionsRequest>(0, id)
                .context("acks=0 completion barrier")?;
        }
    }
    let mut first_err = None;
    for conn in &mut conns {
        let q = conn.inflight.queue.lock().expect("inflight lock");
        let q = conn
            .inflight
            .changed
            .wait_while(q, |q| {
                !q.is_empty() && !conn.inflight.done.load(Ordering::Relaxed)
            })
            .expect("inflight lock");
        drop(q);
        conn.inflight.done.store(true, Ordering::Relaxed);
        let _ = conn.shutdown.shutdown(Shutdown::Both);
        if let Some(h) = conn.reader.take() {
            match h.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(_) => {
                    first_err.get_or_insert(anyhow!("reader thread panicked"));
                }
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn start_conn(
    conn: client::Conn,
    opts: &ProduceOpts,
    stats: &Arc<Stats>,
    clock: Clock,
) -> Result<BrokerConn> {
    let version = conn.versions.pick::<ProduceRequest>(9)?;
    let client::Conn { tx, rx, .. } = conn;
    let shutdown = tx.stream_clone().context("clone socket")?;
    let inflight = Arc::new(InFlight {
        queue: Mutex::new(VecDeque::new()),
        changed: Condvar::new(),
        done: AtomicBool::new(false),
    });
    let mut barrier_rx = None;
    let reader = if opts.acks == 0 {
        barrier_rx = Some(rx); // acks=0: the broker never answers produces.
        None
    } else {
        let inflight = inflight.clone();
        let stats = stats.clone();
        let record_size = opts.record_size_bytes as u64;
        Some(std::thread::spawn(move || {
            let r = reader_loop(rx, &inflight, &stats, record_size, clock, version);
            inflight.done.store(true, Ordering::Relaxed);
            inflight.changed.notify_all();
            r
        }))
    };
    Ok(BrokerConn {
        tx,
        version,
        shutdown,
        inflight,
        reader,
        barrier_rx,
        parts: Vec::new(),
        open_since_ns: None,
    })
}

/// Everything a drain needs besides the connections and partitions.
struct SendCtx {
    topic: TopicName,
    acks: i16,
    max_in_flight: usize,
    compressor: Compressor,
    record_size_bytes: u64,
    stats: Arc<Stats>,
    clock: Clock,
}

impl SendCtx {
    fn has_room(&self, conn: &BrokerConn) -> bool {
        conn.inflight.queue.lock().expect("inflight lock").len() < self.max_in_flight
    }

    /// Seals the open batches of connection `c` (starting with `first`) into
    /// one Produce request, waits for an in-flight slot and sends it.
    fn drain(
        &mut self,
        conns: &mut [BrokerConn],
        parts: &mut [Part],
        c: usize,
        first: Option<usize>,
    ) -> Result<()> {
        let conn = &mut conns[c];
        let mut partition_data = Vec::new();
        let mut metas = Vec::new();
        let mut size = 0usize;
        let start = first
            .and_then(|f| conn.parts.iter().position(|&p| p == f))
            .unwrap_or(0);
        let n = conn.parts.len();
        let mut left_open = false;
        for j in 0..n {
            let part = &mut parts[conn.parts[(start + j) % n]];
            if part.batch.is_empty() {
                continue;
            }
            if size > 0 && size + part.batch.size_bytes() > MAX_REQUEST_SIZE_BYTES {
                left_open = true;
                continue;
            }
            size += part.batch.size_bytes();
            metas.push(BatchMeta {
                partition: part.partition,
                first_intended_ns: part.first_intended_ns,
                last_intended_ns: part.last_intended_ns,
                records: part.batch.record_count(),
            });
            let records: Bytes = part.batch.seal(&mut self.compressor)?;
            partition_data.push(
                PartitionProduceData::default()
                    .with_index(part.partition)
                    .with_records(Some(records)),
            );
        }
        conn.open_since_ns = if left_open {
            Some(self.clock.now_ns())
        } else {
            None
        };
        if partition_data.is_empty() {
            return Ok(());
        }
        let req = ProduceRequest::default()
            .with_acks(self.acks)
            .with_timeout_ms(PRODUCE_TIMEOUT_MS)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(self.topic.clone())
                .with_partition_data(partition_data)]);
        if self.acks == 0 {
            conn.tx.send(&req, conn.version)?;
            drop(req);
            let now_ns = self.clock.now_ns();
            let mut h = crate::stats::new_histogram();
            let mut records = 0u64;
            for m in &metas {
                record_batch_latency(&mut h, m, now_ns);
                records += m.records as u64;
            }
            self.stats.add(records, records * self.record_size_bytes);
            self.stats.merge(&mut h);
            return Ok(());
        }
        let mut q = conn
            .inflight
            .changed
            .wait_while(conn.inflight.queue.lock().expect("inflight lock"), |q| {
                q.len() >= self.max_in_flight && !conn.inflight.done.load(Ordering::Relaxed)
            })
            .expect("inflight lock");
        if conn.inflight.done.load(Ordering::Relaxed) {
            return Err(anyhow!("connection to the leader closed"));
        }
        // Queued before the write so the reader always finds it.
        let correlation_id = conn.tx.peek_correlation_id();
        q.push_back(Pending {
            correlation_id,
            batches: metas,
        });
        drop(q);
        let sent = conn.tx.send(&req, conn.version)?;
        debug_assert_eq!(sent, correlation_id);
        Ok(())
    }
}

/// Records a latency for each record of an acknowledged batch, from its
/// intended send time. Intended times inside a batch are interpolated
/// between the first and last record (exact under a fixed rate).
fn record_batch_latency(h: &mut hdrhistogram::Histogram<u64>, m: &BatchMeta, ack_ns: u64) {
    let n = m.records.max(1) as u64;
    let span = m.last_intended_ns.saturating_sub(m.first_intended_ns);
    for r in 0..n {
        let intended = m.first_intended_ns + if n > 1 { span * r / (n - 1) } else { 0 };
        record_us(h, Duration::from_nanos(ack_ns.saturating_sub(intended)));
    }
}

fn reader_loop(
    mut rx: Receiver,
    inflight: &InFlight,
    stats: &Stats,
    record_size: u64,
    clock: Clock,
    version: i16,
) -> Result<()> {
    let flexible = ProduceResponse::header_version(version) >= 1;
    let mut h = crate::stats::new_histogram();
    let mut last_merge = Instant::now();
    let mut warned = false;
    loop {
        let frame = rx.recv_frame(flexible);
        let (correlation_id, mut body) = match frame {
            Ok(f) => f,
            Err(e) => {
                if inflight.done.load(Ordering::Relaxed) {
                    return Ok(());
                }
                return Err(e.context("reading produce response"));
            }
        };
        let ack_ns = clock.now_ns();
        let pending = {
            let mut q = inflight.queue.lock().expect("inflight lock");
            q.pop_front()
        };
        let pending =
            pending.ok_or_else(|| anyhow!("response {correlation_id} with nothing in flight"))?;
        if pending.correlation_id != correlation_id {
            return Err(anyhow!(
                "out-of-order response: expected {}, got {correlation_id}",
                pending.correlation_id
            ));
        }
        use kafka_protocol::protocol::Decodable;
        let resp = ProduceResponse::decode(&mut body, version)?;
        let mut errors: HashMap<i32, i16> = HashMap::new();
        for t in &resp.responses {
            for p in &t.partition_responses {
                if p.error_code != 0 {
                    errors.insert(p.index, p.error_code);
                }
            }
        }
        let mut ok_records = 0u64;
        for m in &pending.batches {
            if let Some(&e) = errors.get(&m.partition) {
                stats.errors.fetch_add(m.records as u64, Ordering::Relaxed);
                if !warned {
                    eprintln!(
                        "warning: produce to partition {} failed with error {e}",
                        m.partition
                    );
                    warned = true;
                }
                continue;
            }
            ok_records += m.records as u64;
            record_batch_latency(&mut h, m, ack_ns);
        }
        stats.add(ok_records, ok_records * record_size);
        inflight.changed.notify_all();
        if last_merge.elapsed() >= Duration::from_millis(100) {
            stats.merge(&mut h);
            last_merge = Instant::now();
        }
        // Merge eagerly when the pipeline drains so the summary sees all.
        if inflight.queue.lock().expect("inflight lock").is_empty() {
            stats.merge(&mut h);
        }
    }
}

/// A payload like ProducerPerformance's: random upper-case letters.
fn payload(size: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_add(0x2545_F491_4F6C_DD1D);
    (0..size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b'A' + (x % 26) as u8
        })
        .collect()
}

fn format_u64(mut v: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    &buf[i..]
}
