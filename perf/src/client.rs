//! A small blocking Kafka client: framing, version negotiation and the
//! admin-side requests the perf tool needs (Metadata, CreateTopics,
//! ListOffsets). Requests and responses use the `kafka-protocol` codecs.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

const CLIENT_ID: &str = "kshard-perf";
/// Largest response frame accepted; guards against a corrupt length.
const MAX_FRAME_SIZE_BYTES: usize = 512 * 1024 * 1024;
pub const IO_TIMEOUT_MS: u64 = 60_000;

/// Supported [min, max] per API key, from ApiVersions.
#[derive(Clone, Debug, Default)]
pub struct Versions {
    ranges: HashMap<i16, (i16, i16)>,
}

impl Versions {
    /// Highest version both sides speak, capped at `ours_max`.
    pub fn pick<R: Request>(&self, ours_max: i16) -> Result<i16> {
        let (their_min, their_max) = *self
            .ranges
            .get(&R::KEY)
            .ok_or_else(|| anyhow!("broker does not support API key {}", R::KEY))?;
        let v = ours_max.min(their_max).min(R::VERSIONS.max);
        if v < their_min.max(R::VERSIONS.min) {
            bail!("no common version for API key {}", R::KEY);
        }
        Ok(v)
    }
}

/// Write half of a connection: encodes requests into a reused buffer.
pub struct Sender {
    stream: TcpStream,
    wbuf: BytesMut,
    next_correlation_id: i32,
}

/// Read half of a connection: reads whole response frames.
pub struct Receiver {
    stream: TcpStream,
}

pub fn connect(addr: &str) -> Result<(Sender, Receiver)> {
    let sock = addr
        .to_socket_addrs()
        .with_context(|| format!("resolve {addr}"))?
        .next()
        .ok_or_else(|| anyhow!("no address for {addr}"))?;
    let stream = TcpStream::connect_timeout(&sock, Duration::from_millis(10_000))
        .with_context(|| format!("connect {addr}"))?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(Duration::from_millis(IO_TIMEOUT_MS)))?;
    stream.set_write_timeout(Some(Duration::from_millis(IO_TIMEOUT_MS)))?;
    let read_half = stream.try_clone()?;
    Ok((
        Sender {
            stream,
            wbuf: BytesMut::with_capacity(1 << 20),
            next_correlation_id: 1,
        },
        Receiver { stream: read_half },
    ))
}

impl Sender {
    /// The correlation id the next `send` will use.
    pub fn peek_correlation_id(&self) -> i32 {
        self.next_correlation_id
    }

    pub fn stream_clone(&self) -> std::io::Result<TcpStream> {
        self.stream.try_clone()
    }

    /// Encodes and writes one request; returns its correlation id.
    pub fn send<R: Request>(&mut self, req: &R, version: i16) -> Result<i32> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1).max(1);
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_static_str(CLIENT_ID)));
        self.wbuf.clear();
        self.wbuf.extend_from_slice(&[0, 0, 0, 0]);
        header.encode(&mut self.wbuf, R::header_version(version))?;
        req.encode(&mut self.wbuf, version)?;
        let frame_len = (self.wbuf.len() - 4) as i32;
        self.wbuf[0..4].copy_from_slice(&frame_len.to_be_bytes());
        self.stream.write_all(&self.wbuf).context("write request")?;
        Ok(correlation_id)
    }
}

impl Receiver {
    /// Reads one response frame: (correlation id, body after the header).
    pub fn recv_frame(&mut self, flexible_header: bool) -> Result<(i32, Bytes)> {
        let mut len_buf = [0u8; 4];
        self.stream
            .read_exact(&mut len_buf)
            .context("read response length")?;
        let len = i32::from_be_bytes(len_buf);
        if len < 4 || len as usize > MAX_FRAME_SIZE_BYTES {
            bail!("bad response frame length {len}");
        }
        let mut body = BytesMut::zeroed(len as usize);
        self.stream
            .read_exact(&mut body)
            .context("read response body")?;
        let mut body = body.freeze();
        let header = ResponseHeader::decode(&mut body, if flexible_header { 1 } else { 0 })?;
        Ok((header.correlation_id, body))
    }

    pub fn recv<R: Request>(&mut self, version: i16, correlation_id: i32) -> Result<R::Response> {
        let flexible = R::Response::header_version(version) >= 1;
        let (got, mut body) = self.recv_frame(flexible)?;
        if got != correlation_id {
            bail!("correlation id mismatch: sent {correlation_id}, got {got}");
        }
        R::Response::decode(&mut body, version)
    }
}

/// A synchronous connection for control-plane requests.
pub struct Conn {
    pub tx: Sender,
    pub rx: Receiver,
    pub versions: Versions,
}

impl Conn {
    pub fn open(addr: &str) -> Result<Conn> {
        let (tx, rx) = connect(addr)?;
        let mut conn = Conn {
            tx,
            rx,
            versions: Versions::default(),
        };
        conn.versions = conn.negotiate()?;
        Ok(conn)
    }

    pub fn call<R: Request>(&mut self, req: &R, version: i16) -> Result<R::Response> {
        let id = self.tx.send(req, version)?;
        self.rx.recv::<R>(version, id)
    }

    fn negotiate(&mut self) -> Result<Versions> {
        let req = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str(CLIENT_ID))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let mut resp = self.call(&req, 3)?;
        if resp.error_code == 35 {
            // UNSUPPORTED_VERSION: the broker answers in v0 with its range.
            resp = self.call(&ApiVersionsRequest::default(), 0)?;
        }
        if resp.error_code != 0 {
            bail!("ApiVersions failed with error {}", resp.error_code);
        }
        let ranges = resp
            .api_keys
            .iter()
            .map(|k| (k.api_key, (k.min_version, k.max_version)))
            .collect();
        Ok(Versions { ranges })
    }
}

#[derive(Clone, Debug)]
pub struct PartitionInfo {
    pub partition: i32,
    pub leader_id: i32,
}

#[derive(Clone, Debug)]
pub struct TopicInfo {
    pub brokers: HashMap<i32, String>,
    pub partitions: Vec<PartitionInfo>,
}

impl TopicInfo {
    pub fn leader_addr(&self, p: &PartitionInfo) -> Result<&str> {
        self.brokers
            .get(&p.leader_id)
            .map(|s| s.as_str())
            .ok_or_else(|| {
                anyhow!(
                    "leader {} of partition {} unknown",
                    p.leader_id,
                    p.partition
                )
            })
    }
}

/// Metadata for one topic. `Ok(None)` when the topic does not exist.
pub fn topic_metadata(conn: &mut Conn, topic: &str) -> Result<Option<TopicInfo>> {
    let version = conn.versions.pick::<MetadataRequest>(12)?;
    let req = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(
            TopicName(StrBytes::from_string(topic.to_string())),
        ))]))
        .with_allow_auto_topic_creation(false);
    let resp = conn.call(&req, version)?;
    let brokers = resp
        .brokers
        .iter()
        .map(|b| (b.node_id.0, format!("{}:{}", b.host.as_str(), b.port)))
        .collect();
    let t = resp
        .topics
        .first()
        .ok_or_else(|| anyhow!("metadata response without topic"))?;
    match t.error_code {
        0 => {}
        3 => return Ok(None), // UNKNOWN_TOPIC_OR_PARTITION
        5 => {
            // LEADER_NOT_AVAILABLE: exists, leaders not elected yet.
            return Ok(Some(TopicInfo {
                brokers,
                partitions: Vec::new(),
            }));
        }
        e => bail!("metadata for {topic} failed with error {e}"),
    }
    let mut partitions: Vec<PartitionInfo> = t
        .partitions
        .iter()
        .map(|p| PartitionInfo {
            partition: p.partition_index,
            leader_id: if p.error_code == 0 { p.leader_id.0 } else { -1 },
        })
        .collect();
    partitions.sort_by_key(|p| p.partition);
    Ok(Some(TopicInfo {
        brokers,
        partitions,
    }))
}

/// Creates the topic when missing, then waits until every partition has a
/// leader. `partitions` is only used for creation.
pub fn ensure_topic(
    conn: &mut Conn,
    topic: &str,
    partitions: Option<i32>,
    create: bool,
    timeout_ms: u64,
) -> Result<TopicInfo> {
    let deadline = Instant::now() + Duration::from_millis(timeout_ms);
    let mut created = false;
    if create && partitions.is_some() {
        // Create first: some brokers report unknown topics in Metadata
        // before they exist, so metadata alone cannot tell.
        create_topic(conn, topic, partitions)?;
        created = true;
    }
    loop {
        match topic_metadata(conn, topic)? {
            None if !create => bail!("topic {topic} does not exist"),
            None if !created => {
                create_topic(conn, topic, partitions)?;
                created = true;
            }
            Some(info)
                if !info.partitions.is_empty()
                    && info.partitions.iter().all(|p| p.leader_id >= 0)
                    && info
                        .partitions
                        .iter()
                        .all(|p| info.brokers.contains_key(&p.leader_id)) =>
            {
                return Ok(info)
            }
            _ => {}
        }
        if Instant::now() >= deadline {
            bail!("topic {topic} has no leaders after {timeout_ms} ms");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Creates `topic`; without `partitions`, with the broker's default count.
pub fn create_topic(conn: &mut Conn, topic: &str, partitions: Option<i32>) -> Result<()> {
    let version = conn.versions.pick::<CreateTopicsRequest>(7)?;
    // -1 (broker default) needs CreateTopics v4+.
    let partitions = partitions.unwrap_or(if version >= 4 { -1 } else { 1 });
    let req = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_num_partitions(partitions)
            .with_replication_factor(if version >= 4 { -1 } else { 1 })])
        .with_timeout_ms(30_000);
    let resp = conn.call(&req, version)?;
    for t in &resp.topics {
        // 36 = TOPIC_ALREADY_EXISTS: a race with auto-creation is fine.
        if t.error_code != 0 && t.error_code != 36 {
            bail!(
                "CreateTopics {topic} failed with error {}: {}",
                t.error_code,
                t.error_message.as_ref().map(|m| m.as_str()).unwrap_or("")
            );
        }
    }
    Ok(())
}

/// ListOffsets for every partition, grouped by leader. `timestamp` is -1
/// (latest) or -2 (earliest). Returns offsets indexed like `info.partitions`.
pub fn list_offsets(info: &TopicInfo, topic: &str, timestamp: i64) -> Result<Vec<i64>> {
    let mut out = vec![-1i64; info.partitions.len()];
    let mut by_leader: HashMap<i32, Vec<usize>> = HashMap::new();
    for (i, p) in info.partitions.iter().enumerate() {
        by_leader.entry(p.leader_id).or_default().push(i);
    }
    for (leader, idxs) in by_leader {
        let addr = info
            .brokers
            .get(&leader)
            .ok_or_else(|| anyhow!("unknown leader {leader}"))?;
        let mut conn = Conn::open(addr)?;
        let version = conn.versions.pick::<ListOffsetsRequest>(7)?;
        let parts = idxs
            .iter()
            .map(|&i| {
                ListOffsetsPartition::default()
                    .with_partition_index(info.partitions[i].partition)
                    .with_current_leader_epoch(-1)
                    .with_timestamp(timestamp)
            })
            .collect();
        let req = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partitions(parts)]);
        let resp = conn.call(&req, version)?;
        for t in &resp.topics {
            for p in &t.partitions {
                if p.error_code != 0 {
                    bail!(
                        "ListOffsets {topic}-{} failed with error {}",
                        p.partition_index,
                        p.error_code
                    );
                }
                if let Some(i) = idxs
                    .iter()
                    .find(|&&i| info.partitions[i].partition == p.partition_index)
                {
                    out[*i] = p.offset;
                }
            }
        }
    }
    if let Some(i) = out.iter().position(|&o| o < 0) {
        bail!(
            "ListOffsets gave no offset for partition {}",
            info.partitions[i].partition
        );
    }
    Ok(out)
}
