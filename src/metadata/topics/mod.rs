//! Kafka's ZooKeeper layout (kafka.zk.ZkData, Kafka 3.9) on top of any
//! `MetadataStore`: topic assignments, partition states, topic configs and
//! change notifications, broker registrations, the cluster id.
//! JSON is written with the key order Kafka's ZooKeeper dumps show.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::Value;

use super::{MetadataStore, Op, StoreError, StoreResult, ANY_VERSION};
use crate::config::Endpoint;

/// Kafka's `LeaderAndIsr.LeaderDuringDelete`: the leader UpdateMetadata
/// carries for a topic being deleted.
pub const LEADER_DURING_DELETE: i32 = -2;

pub const TOPICS_PATH: &str = "/brokers/topics";
pub const BROKER_IDS_PATH: &str = "/brokers/ids";
pub const SEQID_PATH: &str = "/brokers/seqid";
pub const TOPIC_CONFIGS_PATH: &str = "/config/topics";
pub const CONFIG_CHANGES_PATH: &str = "/config/changes";
pub const DELETE_TOPICS_PATH: &str = "/admin/delete_topics";
pub const CLUSTER_ID_PATH: &str = "/cluster/id";
pub const CONTROLLER_PATH: &str = "/controller";
pub const CONTROLLER_EPOCH_PATH: &str = "/controller_epoch";

/// Paths Kafka's KafkaZkClient.createTopLevelPaths makes at startup.
pub const PERSISTENT_PATHS: &[&str] = &[
    "/consumers",
    BROKER_IDS_PATH,
    TOPICS_PATH,
    CONFIG_CHANGES_PATH,
    DELETE_TOPICS_PATH,
    SEQID_PATH,
    "/isr_change_notification",
    "/latest_producer_id_block",
    "/log_dir_event_notification",
    TOPIC_CONFIGS_PATH,
    "/config/clients",
    "/config/users",
    "/config/brokers",
    "/config/ips",
];

/// Partition id → replica broker ids.
pub type Assignment = BTreeMap<i32, Vec<i32>>;

// ---------------------------------------------------------------- Uuid

const B64URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, no padding (22 chars).
pub fn uuid_to_string(id: &[u8; 16]) -> String {
    let mut out = String::with_capacity(22);
    for chunk in id.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(B64URL[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    debug_assert_eq!(out.len(), 22);
    out
}

/// Kafka's Uuid.fromString (URL-safe base64, padding optional).
pub fn uuid_from_string(s: &str) -> Result<[u8; 16], String> {
    let trimmed = s.trim_end_matches('=');
    if trimmed.len() != 22 {
        return Err(format!("Input string `{s}` decoded as {} bytes, which is not equal to the expected 16 bytes of a base64-encoded UUID", trimmed.len() * 6 / 8));
    }
    let mut bits: u32 = 0;
    let mut nbits = 0;
    let mut out = [0u8; 16];
    let mut len = 0;
    for c in trimmed.bytes() {
        let v = B64URL
            .iter()
            .position(|&x| x == c)
            .ok_or_else(|| format!("Invalid base64 character in `{s}`"))? as u32;
        bits = (bits << 6) | v;
        nbits += 6;
        if nbits >= 8 {
            nbits -= 8;
            if len < 16 {
                out[len] = (bits >> nbits) as u8;
                len += 1;
            }
        }
    }
    // 22 chars carry 132 bits; the last 4 must be zero for a canonical id.
    if len != 16 || bits & ((1 << nbits) - 1) != 0 {
        return Err(format!(
            "Input string `{s}` is not a canonical base64-encoded UUID"
        ));
    }
    Ok(out)
}

/// A random v4 id as Kafka's Uuid.randomUuid: never the zero id, the
/// metadata topic id (…0001), or one whose string starts with '-'.
pub fn random_uuid() -> [u8; 16] {
    loop {
        let id = *uuid::Uuid::new_v4().as_bytes();
        let mut metadata_topic_id = [0u8; 16];
        metadata_topic_id[15] = 1;
        if id != [0u8; 16] && id != metadata_topic_id && !uuid_to_string(&id).starts_with('-') {
            return id;
        }
    }
}

// ---------------------------------------------------------------- names

/// Kafka's Topic.validate, with its messages.
pub fn validate_topic_name(name: &str) -> Result<(), String> {
    let invalid = |why: String| Err(format!("Topic name is invalid: {why}"));
    if name.is_empty() {
        return invalid("the empty string is not allowed".to_string());
    }
    if name == "." || name == ".." {
        return invalid(format!("'{name}' is not allowed"));
    }
    if name.len() > 249 {
        return invalid(format!(
            "the length of '{name}' is longer than the max allowed length 249"
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return invalid(format!("'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"));
    }
    Ok(())
}

/// '.' and '_' collide in metric names; Kafka warns on names with either.
pub fn has_collision_chars(name: &str) -> bool {
    name.contains('.') || name.contains('_')
}

fn unify_collision_chars(name: &str) -> String {
    name.replace('.', "_")
}

/// Existing topics that collide with `name` (equal after '.'→'_', but not
/// identical). Kafka's CreateTopics fails with INVALID_TOPIC_EXCEPTION and
/// the message "Topic '<name>' collides with existing topics: a, b".
pub fn colliding_topics(store: &dyn MetadataStore, name: &str) -> StoreResult<Vec<String>> {
    let unified = unify_collision_chars(name);
    Ok(list_topics(store)?
        .into_iter()
        .filter(|t| t != name && unify_collision_chars(t) == unified)
        .collect())
}

// ---------------------------------------------------------------- JSON

fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string())
}

fn json_int_list(items: &[i32]) -> String {
    let parts: Vec<String> = items.iter().map(i32::to_string).collect();
    format!("[{}]", parts.join(","))
}

fn json_assignment(assignment: &BTreeMap<i32, Vec<i32>>) -> String {
    let parts: Vec<String> = assignment
        .iter()
        .map(|(p, replicas)| format!("\"{p}\":{}", json_int_list(replicas)))
        .collect();
    format!("{{{}}}", parts.join(","))
}

/// `/brokers/topics/<t>` with no reassignment in progress.
pub fn encode_topic(topic_id: Option<&[u8; 16]>, assignment: &BTreeMap<i32, Vec<i32>>) -> String {
    encode_topic_znode(&TopicZNode {
        topic_id: topic_id.copied(),
        partitions: assignment.clone(),
        ..Default::default()
    })
}

/// A topic znode: the full replica set of every partition and, for the
/// partitions being reassigned, the replicas being added and removed
/// (KIP-455; the target is `partitions` minus `removing_replicas`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicZNode {
    pub topic_id: Option<[u8; 16]>,
    pub partitions: Assignment,
    pub adding_replicas: Assignment,
    pub removing_replicas: Assignment,
}

/// TopicZNode.encode, version 3.
pub fn encode_topic_znode(z: &TopicZNode) -> String {
    let mut out = format!("{{\"partitions\":{}", json_assignment(&z.partitions));
    if let Some(id) = &z.topic_id {
        let _ = write!(out, ",\"topic_id\":\"{}\"", uuid_to_string(id));
    }
    let _ = write!(
        out,
        ",\"adding_replicas\":{},\"removing_replicas\":{},\"version\":3}}",
        json_assignment(&z.adding_replicas),
        json_assignment(&z.removing_replicas)
    );
    out
}

/// A partition's leader and ISR (`.../partitions/<p>/state`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionState {
    pub leader: i32,
    pub leader_epoch: i32,
    pub isr: Vec<i32>,
    pub controller_epoch: i32,
    /// 0 = RECOVERED (omitted from JSON), 1 = RECOVERING.
    pub leader_recovery_state: i8,
    /// The state znode's version (Kafka's partition epoch); ignored on write.
    pub zk_version: i32,
}

/// TopicPartitionStateZNode.encode.
pub fn encode_partition_state(s: &PartitionState) -> String {
    let mut out = format!(
        "{{\"controller_epoch\":{},\"leader\":{},\"version\":1,\"leader_epoch\":{},\"isr\":{}",
        s.controller_epoch,
        s.leader,
        s.leader_epoch,
        json_int_list(&s.isr)
    );
    if s.leader_recovery_state != 0 {
        let _ = write!(
            out,
            ",\"leader_recovery_state\":{}",
            s.leader_recovery_state
        );
    }
    out.push('}');
    out
}

/// ConfigEntityZNode.encode.
pub fn encode_entity_config(configs: &BTreeMap<String, String>) -> String {
    let parts: Vec<String> = configs
        .iter()
        .map(|(k, v)| format!("{}:{}", json_str(k), json_str(v)))
        .collect();
    format!("{{\"version\":1,\"config\":{{{}}}}}", parts.join(","))
}

/// ConfigEntityChangeNotificationSequenceZNode.encode.
pub fn encode_config_change(entity_path: &str) -> String {
    format!(
        "{{\"version\":2,\"entity_path\":{}}}",
        json_str(entity_path)
    )
}

/// BrokerIdZNode.encode, version 5 (host/port: the first PLAINTEXT endpoint).
pub fn encode_broker(endpoints: &[Endpoint], rack: Option<&str>, timestamp_ms: i64) -> String {
    let mut protocol_map = BTreeMap::new();
    for e in endpoints {
        protocol_map.insert(e.listener_name.as_str(), e.security_protocol.as_str());
    }
    let map: Vec<String> = protocol_map
        .iter()
        .map(|(k, v)| format!("{}:{}", json_str(k), json_str(v)))
        .collect();
    let eps: Vec<String> = endpoints
        .iter()
        .map(|e| json_str(&e.connection_string()))
        .collect();
    let plain = endpoints
        .iter()
        .find(|e| e.security_protocol == "PLAINTEXT");
    let host = plain.map_or("null".to_string(), |e| json_str(&e.host));
    let port = plain.map_or(-1, |e| i32::from(e.port));
    let mut out = format!(
        "{{\"features\":{{}},\"listener_security_protocol_map\":{{{}}},\"endpoints\":[{}],\"jmx_port\":-1,\"port\":{port},\"host\":{host}",
        map.join(","),
        eps.join(",")
    );
    if let Some(r) = rack {
        let _ = write!(out, ",\"rack\":{}", json_str(r));
    }
    let _ = write!(out, ",\"version\":5,\"timestamp\":\"{timestamp_ms}\"}}");
    out
}

fn parse_json(path: &str, bytes: &[u8]) -> StoreResult<Value> {
    serde_json::from_slice(bytes)
        .map_err(|e| StoreError::Corrupt(format!("{path}: invalid JSON: {e}")))
}

fn as_i32(v: &Value) -> Option<i32> {
    v.as_i64().and_then(|n| i32::try_from(n).ok())
}

fn int_list(v: &Value) -> Option<Vec<i32>> {
    v.as_array()?.iter().map(as_i32).collect()
}

/// Decodes TopicZNode JSON into (topic id, assignment).
pub fn decode_topic(path: &str, bytes: &[u8]) -> StoreResult<(Option<[u8; 16]>, Assignment)> {
    let z = decode_topic_znode(path, bytes)?;
    Ok((z.topic_id, z.partitions))
}

/// Decodes TopicZNode JSON of any version (1-3; the reassignment fields
/// exist from version 2 on).
pub fn decode_topic_znode(path: &str, bytes: &[u8]) -> StoreResult<TopicZNode> {
    let bad = |m: &str| StoreError::Corrupt(format!("{path}: {m}"));
    let v = parse_json(path, bytes)?;
    let topic_id = match v.get("topic_id").and_then(Value::as_str) {
        Some(s) => Some(uuid_from_string(s).map_err(|e| bad(&e))?),
        None => None,
    };
    let assignment = |key: &str| -> StoreResult<Assignment> {
        let mut out = BTreeMap::new();
        if let Some(parts) = v.get(key).and_then(Value::as_object) {
            for (p, replicas) in parts {
                let p: i32 = p
                    .parse()
                    .map_err(|_| bad("partition key is not an integer"))?;
                out.insert(
                    p,
                    int_list(replicas).ok_or_else(|| bad("replicas are not integers"))?,
                );
            }
        }
        Ok(out)
    };
    Ok(TopicZNode {
        topic_id,
        partitions: assignment("partitions")?,
        adding_replicas: assignment("adding_replicas")?,
        removing_replicas: assignment("removing_replicas")?,
    })
}

pub fn decode_partition_state(
    path: &str,
    bytes: &[u8],
    zk_version: i32,
) -> StoreResult<PartitionState> {
    let bad = || StoreError::Corrupt(format!("{path}: bad partition state"));
    let v = parse_json(path, bytes)?;
    Ok(PartitionState {
        leader: v.get("leader").and_then(as_i32).ok_or_else(bad)?,
        leader_epoch: v.get("leader_epoch").and_then(as_i32).ok_or_else(bad)?,
        isr: v.get("isr").and_then(int_list).ok_or_else(bad)?,
        controller_epoch: v.get("controller_epoch").and_then(as_i32).ok_or_else(bad)?,
        leader_recovery_state: v
            .get("leader_recovery_state")
            .and_then(as_i32)
            .map_or(0, |n| n as i8),
        zk_version,
    })
}

/// Decodes ConfigEntityZNode JSON; non-string values are stringified as Kafka's decoder would reject them.
pub fn decode_entity_config(path: &str, bytes: &[u8]) -> StoreResult<BTreeMap<String, String>> {
    let v = parse_json(path, bytes)?;
    let mut out = BTreeMap::new();
    if let Some(cfg) = v.get("config").and_then(Value::as_object) {
        for (k, val) in cfg {
            let s = val.as_str().ok_or_else(|| {
                StoreError::Corrupt(format!("{path}: config {k} is not a string"))
            })?;
            out.insert(k.clone(), s.to_string());
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------- paths

pub fn topic_path(topic: &str) -> String {
    format!("{TOPICS_PATH}/{topic}")
}

pub fn partition_state_path(topic: &str, partition: i32) -> String {
    format!("{TOPICS_PATH}/{topic}/partitions/{partition}/state")
}

pub fn topic_config_path(topic: &str) -> String {
    format!("{TOPIC_CONFIGS_PATH}/{topic}")
}

// ---------------------------------------------------------------- operations

/// Creates Kafka's top-level persistent paths that are missing.
pub fn ensure_base_paths(store: &mut dyn MetadataStore) -> StoreResult<()> {
    for path in PERSISTENT_PATHS {
        if store.exists(path).is_none() {
            // Another broker starting at the same time may create it first.
            match store.create_all(path, b"") {
                Ok(_) | Err(StoreError::NodeExists(_)) => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

/// A topic as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicRecord {
    pub name: String,
    pub topic_id: Option<[u8; 16]>,
    pub assignment: BTreeMap<i32, Vec<i32>>,
    pub configs: BTreeMap<String, String>,
    pub partition_states: BTreeMap<i32, PartitionState>,
}

fn initial_state(replicas: &[i32], controller_epoch: i32) -> PartitionState {
    PartitionState {
        leader: replicas.first().copied().unwrap_or(-1),
        leader_epoch: 0,
        isr: replicas.to_vec(),
        controller_epoch,
        leader_recovery_state: 0,
        zk_version: 0,
    }
}

fn partition_create_ops(
    topic: &str,
    assignment: &BTreeMap<i32, Vec<i32>>,
    controller_epoch: i32,
    ops: &mut Vec<Op>,
) {
    for (p, replicas) in assignment {
        ops.push(create_op(
            format!("{TOPICS_PATH}/{topic}/partitions/{p}"),
            Vec::new(),
        ));
        let state = encode_partition_state(&initial_state(replicas, controller_epoch));
        ops.push(create_op(
            partition_state_path(topic, *p),
            state.into_bytes(),
        ));
    }
}

fn create_op(path: String, data: Vec<u8>) -> Op {
    Op::Create {
        path,
        data,
        ephemeral: false,
        sequential: false,
    }
}

/// Config write as Kafka's setOrCreateEntityConfigs, as a multi op.
fn config_write_op(
    store: &dyn MetadataStore,
    topic: &str,
    configs: &BTreeMap<String, String>,
) -> Op {
    let path = topic_config_path(topic);
    let data = encode_entity_config(configs).into_bytes();
    if store.exists(&path).is_some() {
        Op::SetData {
            path,
            data,
            expected_version: ANY_VERSION,
        }
    } else {
        create_op(path, data)
    }
}

/// Creates a topic atomically: its config, assignment and the initial
/// state of every partition (leader = first replica, isr = replicas,
/// leader_epoch 0). NodeExists if the topic exists. Base paths must exist.
pub fn create_topic(
    store: &mut dyn MetadataStore,
    name: &str,
    topic_id: [u8; 16],
    assignment: &BTreeMap<i32, Vec<i32>>,
    configs: &BTreeMap<String, String>,
) -> StoreResult<()> {
    let controller_epoch = controller_epoch(store)?.max(1);
    let mut ops = vec![
        config_write_op(store, name, configs),
        create_op(
            topic_path(name),
            encode_topic(Some(&topic_id), assignment).into_bytes(),
        ),
        create_op(format!("{TOPICS_PATH}/{name}/partitions"), Vec::new()),
    ];
    partition_create_ops(name, assignment, controller_epoch, &mut ops);
    store.multi(&ops).map(|_| ())
}

/// AdminZkClient.createTopicWithAssignment: the topic's config and its
/// assignment only; the controller creates the partition states when it
/// sees the new topic. NodeExists if the topic exists.
pub fn create_topic_assignment(
    store: &mut dyn MetadataStore,
    name: &str,
    topic_id: [u8; 16],
    assignment: &BTreeMap<i32, Vec<i32>>,
    configs: &BTreeMap<String, String>,
) -> StoreResult<()> {
    let ops = vec![
        config_write_op(store, name, configs),
        create_op(
            topic_path(name),
            encode_topic(Some(&topic_id), assignment).into_bytes(),
        ),
    ];
    store.multi(&ops).map(|_| ())
}

/// Adds partitions to a topic's assignment only (the controller elects
/// their leaders when it sees the change).
pub fn add_partitions_assignment(
    store: &mut dyn MetadataStore,
    name: &str,
    new_partitions: &BTreeMap<i32, Vec<i32>>,
) -> StoreResult<()> {
    let path = topic_path(name);
    let (bytes, stat) = store.get(&path)?;
    // The reassignment fields stay: the controller may be moving replicas.
    let mut znode = decode_topic_znode(&path, &bytes)?;
    for (p, replicas) in new_partitions {
        if znode.partitions.insert(*p, replicas.clone()).is_some() {
            return Err(StoreError::NodeExists(partition_state_path(name, *p)));
        }
    }
    store
        .set(&path, encode_topic_znode(&znode).as_bytes(), stat.version)
        .map(|_| ())
}

/// Reads a topic; None if absent.
pub fn get_topic(store: &dyn MetadataStore, name: &str) -> StoreResult<Option<TopicRecord>> {
    let path = topic_path(name);
    let (bytes, _) = match store.get(&path) {
        Ok(x) => x,
        Err(StoreError::NoNode(_)) => return Ok(None),
        Err(e) => return Err(e),
    };
    let (topic_id, assignment) = decode_topic(&path, &bytes)?;
    let configs = match store.get(&topic_config_path(name)) {
        Ok((b, _)) => decode_entity_config(&topic_config_path(name), &b)?,
        Err(StoreError::NoNode(_)) => BTreeMap::new(),
        Err(e) => return Err(e),
    };
    let mut partition_states = BTreeMap::new();
    for p in assignment.keys() {
        let state_path = partition_state_path(name, *p);
        match store.get(&state_path) {
            Ok((b, stat)) => {
                partition_states.insert(*p, decode_partition_state(&state_path, &b, stat.version)?);
            }
            Err(StoreError::NoNode(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Some(TopicRecord {
        name: name.to_string(),
        topic_id,
        assignment,
        configs,
        partition_states,
    }))
}

/// Topic names, sorted; empty if `/brokers/topics` is missing.
pub fn list_topics(store: &dyn MetadataStore) -> StoreResult<Vec<String>> {
    match store.children(TOPICS_PATH) {
        Ok(c) => Ok(c),
        Err(StoreError::NoNode(_)) => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// Marks a topic for deletion (`/admin/delete_topics/<t>`), as
/// AdminZkClient.deleteTopic does; NodeExists if already marked.
pub fn mark_topic_for_deletion(store: &mut dyn MetadataStore, name: &str) -> StoreResult<()> {
    if store.exists(&topic_path(name)).is_none() {
        return Err(StoreError::NoNode(topic_path(name)));
    }
    store
        .create_all(&format!("{DELETE_TOPICS_PATH}/{name}"), b"")
        .map(|_| ())
}

fn subtree_delete_ops(store: &dyn MetadataStore, path: &str, ops: &mut Vec<Op>) -> StoreResult<()> {
    for child in store.children(path)? {
        subtree_delete_ops(store, &format!("{path}/{child}"), ops)?;
    }
    ops.push(Op::Delete {
        path: path.to_string(),
        expected_version: ANY_VERSION,
    });
    Ok(())
}

/// Removes a topic completely (assignment, partition states, config,
/// deletion marker) in one atomic step. NoNode if the topic is absent.
pub fn delete_topic(store: &mut dyn MetadataStore, name: &str) -> StoreResult<()> {
    let mut ops = Vec::new();
    subtree_delete_ops(store, &topic_path(name), &mut ops)?;
    for extra in [
        topic_config_path(name),
        format!("{DELETE_TOPICS_PATH}/{name}"),
    ] {
        if store.exists(&extra).is_some() {
            ops.push(Op::Delete {
                path: extra,
                expected_version: ANY_VERSION,
            });
        }
    }
    store.multi(&ops).map(|_| ())
}

/// Adds partitions: `new_partitions` holds only the new ones (ids must not
/// exist yet). Rewrites the assignment and creates the new states atomically.
pub fn add_partitions(
    store: &mut dyn MetadataStore,
    name: &str,
    new_partitions: &BTreeMap<i32, Vec<i32>>,
) -> StoreResult<()> {
    let path = topic_path(name);
    let (bytes, stat) = store.get(&path)?;
    let (topic_id, mut assignment) = decode_topic(&path, &bytes)?;
    for (p, replicas) in new_partitions {
        if assignment.insert(*p, replicas.clone()).is_some() {
            return Err(StoreError::NodeExists(partition_state_path(name, *p)));
        }
    }
    let controller_epoch = controller_epoch(store)?.max(1);
    let mut ops = vec![Op::SetData {
        path,
        data: encode_topic(topic_id.as_ref(), &assignment).into_bytes(),
        expected_version: stat.version,
    }];
    if store
        .exists(&format!("{TOPICS_PATH}/{name}/partitions"))
        .is_none()
    {
        ops.push(create_op(
            format!("{TOPICS_PATH}/{name}/partitions"),
            Vec::new(),
        ));
    }
    partition_create_ops(name, new_partitions, controller_epoch, &mut ops);
    store.multi(&ops).map(|_| ())
}

/// Writes a partition's state if its znode version is `expected_version`
/// (-1: any); returns the new version (Kafka's partition epoch).
pub fn set_partition_state(
    store: &mut dyn MetadataStore,
    topic: &str,
    partition: i32,
    state: &PartitionState,
    expected_version: i32,
) -> StoreResult<i32> {
    let stat = store.set(
        &partition_state_path(topic, partition),
        encode_partition_state(state).as_bytes(),
        expected_version,
    )?;
    Ok(stat.version)
}

/// The cluster id from `/cluster/id`, creating a random one if absent.
pub fn get_or_create_cluster_id(store: &mut dyn MetadataStore) -> StoreResult<String> {
    loop {
        match store.get(CLUSTER_ID_PATH) {
            Ok((bytes, _)) => {
                let v = parse_json(CLUSTER_ID_PATH, &bytes)?;
                return v
                    .get("id")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .ok_or_else(|| StoreError::Corrupt(format!("{CLUSTER_ID_PATH}: no id")));
            }
            Err(StoreError::NoNode(_)) => {
                let id = uuid_to_string(&random_uuid());
                let data = format!("{{\"version\":\"1\",\"id\":\"{id}\"}}");
                match store.create_all(CLUSTER_ID_PATH, data.as_bytes()) {
                    Ok(_) => return Ok(id),
                    // Lost a race with another broker: read theirs.
                    Err(StoreError::NodeExists(_)) => continue,
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// Registers this broker as the ephemeral `/brokers/ids/<id>`.
pub fn register_broker(
    store: &mut dyn MetadataStore,
    broker_id: i32,
    endpoints: &[Endpoint],
    rack: Option<&str>,
    timestamp_ms: i64,
) -> StoreResult<()> {
    if store.exists(BROKER_IDS_PATH).is_none() {
        match store.create_all(BROKER_IDS_PATH, b"") {
            Ok(_) | Err(StoreError::NodeExists(_)) => {}
            Err(e) => return Err(e),
        }
    }
    let data = encode_broker(endpoints, rack, timestamp_ms);
    store
        .create(
            &format!("{BROKER_IDS_PATH}/{broker_id}"),
            data.as_bytes(),
            true,
            false,
        )
        .map(|_| ())
}

/// The current controller epoch (`/controller_epoch`), 0 if absent.
pub fn controller_epoch(store: &dyn MetadataStore) -> StoreResult<i32> {
    match store.get(CONTROLLER_EPOCH_PATH) {
        Ok((bytes, _)) => std::str::from_utf8(&bytes)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .ok_or_else(|| StoreError::Corrupt(format!("{CONTROLLER_EPOCH_PATH}: not an integer"))),
        Err(StoreError::NoNode(_)) => Ok(0),
        Err(e) => Err(e),
    }
}

/// Becomes controller: bumps `/controller_epoch` and writes the ephemeral
/// `/controller` node. Returns the new epoch. NodeExists if another controller is registered.
pub fn elect_controller(
    store: &mut dyn MetadataStore,
    broker_id: i32,
    timestamp_ms: i64,
) -> StoreResult<i32> {
    let epoch = controller_epoch(store)? + 1;
    let controller = format!("{{\"version\":2,\"brokerid\":{broker_id},\"timestamp\":\"{timestamp_ms}\",\"kraftControllerEpoch\":-1}}");
    let epoch_op = if store.exists(CONTROLLER_EPOCH_PATH).is_some() {
        Op::SetData {
            path: CONTROLLER_EPOCH_PATH.to_string(),
            data: epoch.to_string().into_bytes(),
            expected_version: ANY_VERSION,
        }
    } else {
        create_op(
            CONTROLLER_EPOCH_PATH.to_string(),
            epoch.to_string().into_bytes(),
        )
    };
    let ops = vec![
        Op::Create {
            path: CONTROLLER_PATH.to_string(),
            data: controller.into_bytes(),
            ephemeral: true,
            sequential: false,
        },
        epoch_op,
    ];
    store.multi(&ops)?;
    Ok(epoch)
}

/// Kafka's broker id generation: bump `/brokers/seqid`'s version; the id is
/// `reserved.broker.max.id + version`.
pub fn generate_broker_id(
    store: &mut dyn MetadataStore,
    reserved_broker_max_id: i32,
) -> StoreResult<i32> {
    if store.exists(SEQID_PATH).is_none() {
        store.create_all(SEQID_PATH, b"")?;
    }
    let stat = store.set(SEQID_PATH, b"", ANY_VERSION)?;
    Ok(reserved_broker_max_id + stat.version)
}

#[cfg(test)]
mod tests;
