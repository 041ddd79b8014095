//! A minimal classic consumer-group member: FindCoordinator, JoinGroup,
//! SyncGroup (range assignment when leader), OffsetFetch, Heartbeat,
//! OffsetCommit and LeaveGroup. Errors here make the caller fall back to
//! consuming every partition without a group.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use crate::client::{Conn, TopicInfo};
use crate::consume::FetchState;

const SESSION_TIMEOUT_MS: i32 = 30_000;
const REBALANCE_TIMEOUT_MS: i32 = 60_000;
const HEARTBEAT_INTERVAL_MS: u64 = 3_000;
const MEMBER_ID_REQUIRED: i16 = 79;

pub struct Member {
    group: GroupId,
    topic: String,
    coordinator_addr: String,
    member_id: StrBytes,
    generation_id: i32,
    pub assigned: Vec<i32>,
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

impl Member {
    pub fn join(
        bootstrap: &mut Conn,
        group: &str,
        topic: &str,
        info: &TopicInfo,
    ) -> Result<Member> {
        let version = bootstrap.versions.pick::<FindCoordinatorRequest>(3)?;
        let resp = bootstrap.call(
            &FindCoordinatorRequest::default()
                .with_key(s(group))
                .with_key_type(0),
            version,
        )?;
        if resp.error_code != 0 {
            bail!("FindCoordinator failed with error {}", resp.error_code);
        }
        let coordinator_addr = format!("{}:{}", resp.host.as_str(), resp.port);
        let mut conn = Conn::open(&coordinator_addr)?;
        let group_id = GroupId(s(group));
        let join_version = conn.versions.pick::<JoinGroupRequest>(7)?;
        let mut member_id = StrBytes::default();
        let joined = loop {
            let req = JoinGroupRequest::default()
                .with_group_id(group_id.clone())
                .with_session_timeout_ms(SESSION_TIMEOUT_MS)
                .with_rebalance_timeout_ms(REBALANCE_TIMEOUT_MS)
                .with_member_id(member_id.clone())
                .with_protocol_type(s("consumer"))
                .with_protocols(vec![JoinGroupRequestProtocol::default()
                    .with_name(s("range"))
                    .with_metadata(subscription(topic)?)]);
            let resp = conn.call(&req, join_version)?;
            match resp.error_code {
                0 => break resp,
                MEMBER_ID_REQUIRED => member_id = resp.member_id,
                e => bail!("JoinGroup failed with error {e}"),
            }
        };
        member_id = joined.member_id.clone();
        let assignments = if joined.leader == member_id {
            range_assign(&joined.members, topic, info)?
        } else {
            Vec::new()
        };
        let sync_version = conn.versions.pick::<SyncGroupRequest>(5)?;
        let resp = conn.call(
            &SyncGroupRequest::default()
                .with_group_id(group_id.clone())
                .with_generation_id(joined.generation_id)
                .with_member_id(member_id.clone())
                .with_protocol_type(Some(s("consumer")))
                .with_protocol_name(Some(s("range")))
                .with_assignments(assignments),
            sync_version,
        )?;
        if resp.error_code != 0 {
            bail!("SyncGroup failed with error {}", resp.error_code);
        }
        let assigned = decode_assignment(resp.assignment, topic)?;
        if assigned.is_empty() {
            bail!("the group assigned this member no partitions");
        }
        Ok(Member {
            group: group_id,
            topic: topic.to_string(),
            coordinator_addr,
            member_id,
            generation_id: joined.generation_id,
            assigned,
        })
    }

    /// Committed offsets indexed like `info.partitions`; -1 where none.
    pub fn committed_offsets(&self, info: &TopicInfo) -> Result<Vec<i64>> {
        let mut conn = Conn::open(&self.coordinator_addr)?;
        let version = conn.versions.pick::<OffsetFetchRequest>(7)?;
        let resp = conn.call(
            &OffsetFetchRequest::default()
                .with_group_id(self.group.clone())
                .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                    .with_name(TopicName(s(&self.topic)))
                    .with_partition_indexes(
                        info.partitions.iter().map(|p| p.partition).collect(),
                    )])),
            version,
        )?;
        if resp.error_code != 0 {
            bail!("OffsetFetch failed with error {}", resp.error_code);
        }
        let mut out = vec![-1i64; info.partitions.len()];
        for t in &resp.topics {
            for p in &t.partitions {
                if let Some(i) = info
                    .partitions
                    .iter()
                    .position(|x| x.partition == p.partition_index)
                {
                    out[i] = p.committed_offset;
                }
            }
        }
        Ok(out)
    }

    /// Heartbeats on a connection of its own until `state.stop`.
    pub fn start_heartbeat(&self, state: Arc<FetchState>) -> JoinHandle<()> {
        let addr = self.coordinator_addr.clone();
        let req = HeartbeatRequest::default()
            .with_group_id(self.group.clone())
            .with_generation_id(self.generation_id)
            .with_member_id(self.member_id.clone());
        std::thread::spawn(move || {
            let mut conn = match Conn::open(&addr) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("warning: heartbeat connection failed: {e:#}");
                    return;
                }
            };
            let Ok(version) = conn.versions.pick::<HeartbeatRequest>(4) else {
                return;
            };
            let mut last = Instant::now();
            while !state.stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                if last.elapsed() < Duration::from_millis(HEARTBEAT_INTERVAL_MS) {
                    continue;
                }
                last = Instant::now();
                match conn.call(&req, version) {
                    Ok(r) if r.error_code == 0 => {}
                    Ok(r) => {
                        eprintln!(
                            "warning: heartbeat error {} (group rebalancing?)",
                            r.error_code
                        );
                    }
                    Err(e) => {
                        eprintln!("warning: heartbeat failed: {e:#}");
                        return;
                    }
                }
            }
        })
    }

    /// Commits `positions` (partition, next offset) and leaves the group.
    pub fn commit_and_leave(self, _bootstrap: &mut Conn, positions: &[(i32, i64)]) -> Result<()> {
        let mut conn = Conn::open(&self.coordinator_addr)?;
        let version = conn.versions.pick::<OffsetCommitRequest>(8)?;
        let parts = positions
            .iter()
            .map(|&(p, o)| {
                OffsetCommitRequestPartition::default()
                    .with_partition_index(p)
                    .with_committed_offset(o)
                    .with_committed_leader_epoch(-1)
            })
            .collect();
        let resp = conn.call(
            &OffsetCommitRequest::default()
                .with_group_id(self.group.clone())
                .with_generation_id_or_member_epoch(self.generation_id)
                .with_member_id(self.member_id.clone())
                .with_retention_time_ms(-1)
                .with_topics(vec![OffsetCommitRequestTopic::default()
                    .with_name(TopicName(s(&self.topic)))
                    .with_partitions(parts)]),
            version,
        )?;
        for t in &resp.topics {
            for p in &t.partitions {
                if p.error_code != 0 {
                    bail!(
                        "OffsetCommit partition {} error {}",
                        p.partition_index,
                        p.error_code
                    );
                }
            }
        }
        let version = conn.versions.pick::<LeaveGroupRequest>(4)?;
        let mut leave = LeaveGroupRequest::default().with_group_id(self.group.clone());
        if version >= 3 {
            leave = leave.with_members(vec![
                MemberIdentity::default().with_member_id(self.member_id.clone())
            ]);
        } else {
            leave = leave.with_member_id(self.member_id.clone());
        }
        conn.call(&leave, version).context("LeaveGroup")?;
        Ok(())
    }
}

/// ConsumerProtocolSubscription v0 with its leading version field.
fn subscription(topic: &str) -> Result<Bytes> {
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    ConsumerProtocolSubscription::default()
        .with_topics(vec![s(topic)])
        .encode(&mut buf, 0)?;
    Ok(buf.freeze())
}

/// Range assignment of the one topic over the members, in member-id order.
fn range_assign(
    members: &[JoinGroupResponseMember],
    topic: &str,
    info: &TopicInfo,
) -> Result<Vec<SyncGroupRequestAssignment>> {
    let mut ids: Vec<&StrBytes> = members.iter().map(|m| &m.member_id).collect();
    ids.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    if ids.is_empty() {
        bail!("JoinGroup leader got no members");
    }
    let parts: Vec<i32> = info.partitions.iter().map(|p| p.partition).collect();
    let per = parts.len() / ids.len();
    let extra = parts.len() % ids.len();
    let mut out = Vec::new();
    let mut next = 0usize;
    for (i, id) in ids.iter().enumerate() {
        let n = per + usize::from(i < extra);
        let mine = parts[next..next + n].to_vec();
        next += n;
        let mut buf = BytesMut::new();
        buf.put_i16(0);
        ConsumerProtocolAssignment::default()
            .with_assigned_partitions(vec![TopicPartition::default()
                .with_topic(TopicName(s(topic)))
                .with_partitions(mine)])
            .encode(&mut buf, 0)?;
        out.push(
            SyncGroupRequestAssignment::default()
                .with_member_id((*id).clone())
                .with_assignment(buf.freeze()),
        );
    }
    debug_assert_eq!(next, parts.len());
    Ok(out)
}

fn decode_assignment(mut bytes: Bytes, topic: &str) -> Result<Vec<i32>> {
    if bytes.len() < 2 {
        return Err(anyhow!("empty assignment"));
    }
    let version = bytes.get_i16().clamp(0, 3);
    let a = ConsumerProtocolAssignment::decode(&mut bytes, version)?;
    Ok(a.assigned_partitions
        .into_iter()
        .filter(|tp| tp.topic.0.as_str() == topic)
        .flat_map(|tp| tp.partitions)
        .collect())
}
