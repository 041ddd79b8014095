//! Replica placement for new topics and new partitions, as Apache Kafka 3.9
//! does it in ZooKeeper mode (`org.apache.kafka.admin.AdminUtils`,
//! `kafka.zk.AdminZkClient`, `kafka.server.ZkAdminManager`).
//!
//! Kafka computes with Java `int`s, so the arithmetic here wraps and uses
//! truncating remainders the same way; where Java would throw a runtime
//! exception (index out of bounds, division by zero) we return
//! [`AssignmentError::Internal`], which Kafka reports as UNKNOWN_SERVER_ERROR.
//!
//! Error messages that embed Scala collections (`HashMap(..)`, `Set` order)
//! reproduce the iteration order of Scala 2.13's collections, because clients
//! see those strings verbatim.

use crate::protocol::errors::{
    ErrorCode, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT,
    UNKNOWN_SERVER_ERROR,
};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// A broker as the assignment sees it: id plus optional rack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerMetadata {
    pub id: i32,
    pub rack: Option<String>,
}

impl BrokerMetadata {
    pub fn new(id: i32, rack: Option<&str>) -> Self {
        BrokerMetadata {
            id,
            rack: rack.map(str::to_owned),
        }
    }
}

/// Why an assignment could not be made; each variant is the Kafka exception
/// class that 3.9 throws, carrying Kafka's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AssignmentError {
    /// `InvalidPartitionsException` (INVALID_PARTITIONS, 37).
    InvalidPartitions(String),
    /// `InvalidReplicationFactorException` (INVALID_REPLICATION_FACTOR, 38).
    InvalidReplicationFactor(String),
    /// `InvalidReplicaAssignmentException` (INVALID_REPLICA_ASSIGNMENT, 39).
    InvalidReplicaAssignment(String),
    /// `org.apache.kafka.server.common.AdminOperationException`. It is not an
    /// `ApiException`, so ZK-mode CreateTopics/CreatePartitions turn it into
    /// UNKNOWN_SERVER_ERROR (-1) with a null error message.
    AdminOperation(String),
    /// A Java runtime exception Kafka would hit (e.g. `/ by zero` with
    /// duplicate broker ids); also UNKNOWN_SERVER_ERROR with a null message.
    Internal(String),
}

impl AssignmentError {
    /// The error code Kafka 3.9 (ZK mode) puts in the CreateTopics /
    /// CreatePartitions response (`ApiError.fromThrowable`).
    pub fn kafka_error_code(&self) -> ErrorCode {
        match self {
            AssignmentError::InvalidPartitions(_) => INVALID_PARTITIONS,
            AssignmentError::InvalidReplicationFactor(_) => INVALID_REPLICATION_FACTOR,
            AssignmentError::InvalidReplicaAssignment(_) => INVALID_REPLICA_ASSIGNMENT,
            AssignmentError::AdminOperation(_) | AssignmentError::Internal(_) => {
                UNKNOWN_SERVER_ERROR
            }
        }
    }

    /// The error message Kafka puts in the response: `ApiError.fromThrowable`
    /// drops the message for UNKNOWN_SERVER_ERROR so it cannot leak internals.
    pub fn kafka_error_message(&self) -> Option<&str> {
        match self {
            AssignmentError::InvalidPartitions(m)
            | AssignmentError::InvalidReplicationFactor(m)
            | AssignmentError::InvalidReplicaAssignment(m) => Some(m),
            AssignmentError::AdminOperation(_) | AssignmentError::Internal(_) => None,
        }
    }

    /// The exception message (what Kafka logs).
    pub fn message(&self) -> &str {
        match self {
            AssignmentError::InvalidPartitions(m)
            | AssignmentError::InvalidReplicationFactor(m)
            | AssignmentError::InvalidReplicaAssignment(m)
            | AssignmentError::AdminOperation(m)
            | AssignmentError::Internal(m) => m,
        }
    }
}

impl fmt::Display for AssignmentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for AssignmentError {}

fn index_out_of_bounds(index: i64, len: usize) -> AssignmentError {
    AssignmentError::Internal(format!("Index {index} out of bounds for length {len}"))
}

fn divide_by_zero() -> AssignmentError {
    AssignmentError::Internal("/ by zero".to_owned())
}

/// `AdminUtils.replicaIndex`: position of the `replica_index`-th follower.
fn replica_index(
    first_replica_index: i32,
    second_replica_shift: i32,
    replica_index: i32,
    n_brokers: i32,
) -> Result<i32, AssignmentError> {
    let rem = second_replica_shift
        .wrapping_add(replica_index)
        .checked_rem(n_brokers - 1)
        .ok_or_else(divide_by_zero)?;
    // Kafka widens to long here, so this sum cannot overflow.
    let shift = 1 + i64::from(rem);
    Ok(((i64::from(first_replica_index) + shift) % i64::from(n_brokers)) as i32)
}

fn get_at(list: &[i32], index: i32) -> Result<i32, AssignmentError> {
    usize::try_from(index)
        .ok()
        .and_then(|i| list.get(i).copied())
        .ok_or_else(|| index_out_of_bounds(i64::from(index), list.len()))
}

/// `AdminUtils.assignReplicasToBrokers` with Kafka's exact placement.
///
/// `fixed_start_index: None` is Kafka's `-1`: the start index and then the
/// follower shift are drawn, in that order, as `random(n)` (values are taken
/// modulo `n`), with `n` the broker count. `Some(i)` uses `i` for both.
/// `start_partition_id: None` (or a negative id) starts at partition 0.
///
/// Kafka does not sort `brokers`: order them the way the calling Kafka path
/// does (see [`zk_alive_brokers_order`] and [`zk_broker_metadatas`]).
pub fn assign_replicas_to_brokers(
    brokers: &[BrokerMetadata],
    n_partitions: i32,
    replication_factor: i16,
    fixed_start_index: Option<usize>,
    start_partition_id: Option<i32>,
    random: &mut dyn FnMut(usize) -> usize,
) -> Result<BTreeMap<i32, Vec<i32>>, AssignmentError> {
    assign_replicas(
        brokers,
        n_partitions,
        i32::from(replication_factor),
        fixed_start_index,
        start_partition_id.unwrap_or(-1),
        random,
    )
}

fn assign_replicas(
    brokers: &[BrokerMetadata],
    n_partitions: i32,
    replication_factor: i32,
    fixed_start_index: Option<usize>,
    start_partition_id: i32,
    random: &mut dyn FnMut(usize) -> usize,
) -> Result<BTreeMap<i32, Vec<i32>>, AssignmentError> {
    if n_partitions <= 0 {
        return Err(AssignmentError::InvalidPartitions(
            "Number of partitions must be larger than 0.".to_owned(),
        ));
    }
    if replication_factor <= 0 {
        return Err(AssignmentError::InvalidReplicationFactor(
            "Replication factor must be larger than 0.".to_owned(),
        ));
    }
    if i64::from(replication_factor) > brokers.len() as i64 {
        return Err(AssignmentError::InvalidReplicationFactor(format!(
            "Replication factor: {} larger than available brokers: {}.",
            replication_factor,
            brokers.len()
        )));
    }
    let fixed = match fixed_start_index {
        None => None,
        Some(i) => Some(i32::try_from(i).map_err(|_| {
            AssignmentError::Internal(format!("fixed start index {i} exceeds a Java int"))
        })?),
    };
    if brokers.iter().all(|b| b.rack.is_none()) {
        let ids: Vec<i32> = brokers.iter().map(|b| b.id).collect();
        return assign_rack_unaware(
            n_partitions,
            replication_factor,
            &ids,
            fixed,
            start_partition_id,
            random,
        );
    }
    if brokers.iter().any(|b| b.rack.is_none()) {
        return Err(AssignmentError::AdminOperation(
            "Not all brokers have rack information for replica rack aware assignment.".to_owned(),
        ));
    }
    assign_rack_aware(
        n_partitions,
        replication_factor,
        brokers,
        fixed,
        start_partition_id,
        random,
    )
}

/// Draws Kafka's `(startIndex, nextReplicaShift)`: start first, then shift.
fn start_and_shift(
    fixed: Option<i32>,
    n: usize,
    random: &mut dyn FnMut(usize) -> usize,
) -> Result<(i32, i32), AssignmentError> {
    match fixed {
        Some(f) => Ok((f, f)),
        None => {
            let mut draw = || {
                i32::try_from(random(n) % n.max(1)).map_err(|_| {
                    AssignmentError::Internal("broker count exceeds a Java int".into())
                })
            };
            let start = draw()?;
            let shift = draw()?;
            Ok((start, shift))
        }
    }
}

fn broker_count(n: usize) -> Result<i32, AssignmentError> {
    i32::try_from(n)
        .map_err(|_| AssignmentError::Internal("broker count exceeds a Java int".into()))
}

fn assign_rack_unaware(
    n_partitions: i32,
    replication_factor: i32,
    broker_ids: &[i32],
    fixed: Option<i32>,
    start_partition_id: i32,
    random: &mut dyn FnMut(usize) -> usize,
) -> Result<BTreeMap<i32, Vec<i32>>, AssignmentError> {
    let n = broker_count(broker_ids.len())?;
    let (start_index, mut next_replica_shift) = start_and_shift(fixed, broker_ids.len(), random)?;
    let mut current_partition_id = start_partition_id.max(0);
    let mut ret = BTreeMap::new();
    for _ in 0..n_partitions {
        if current_partition_id > 0 && current_partition_id % n == 0 {
            next_replica_shift = next_replica_shift.wrapping_add(1);
        }
        let first_replica_index = current_partition_id.wrapping_add(start_index) % n;
        let mut replicas = Vec::with_capacity(replication_factor as usize);
        replicas.push(get_at(broker_ids, first_replica_index)?);
        for j in 0..replication_factor - 1 {
            let idx = replica_index(first_replica_index, next_replica_shift, j, n)?;
            replicas.push(get_at(broker_ids, idx)?);
        }
        ret.insert(current_partition_id, replicas);
        current_partition_id = current_partition_id.wrapping_add(1);
    }
    Ok(ret)
}

fn assign_rack_aware(
    n_partitions: i32,
    replication_factor: i32,
    brokers: &[BrokerMetadata],
    fixed: Option<i32>,
    start_partition_id: i32,
    random: &mut dyn FnMut(usize) -> usize,
) -> Result<BTreeMap<i32, Vec<i32>>, AssignmentError> {
    // Kafka keys a HashMap by id, so a repeated id keeps its last rack.
    let mut broker_rack: BTreeMap<i32, String> = BTreeMap::new();
    for b in brokers {
        if let Some(rack) = &b.rack {
            broker_rack.insert(b.id, rack.clone());
        }
    }
    let num_racks = broker_count(broker_rack.values().collect::<BTreeSet<_>>().len())?;
    let arranged = rack_alternated_broker_list(&broker_rack);
    let num_brokers = broker_count(arranged.len())?;
    let (start_index, mut next_replica_shift) = start_and_shift(fixed, arranged.len(), random)?;
    let mut current_partition_id = start_partition_id.max(0);
    let mut ret = BTreeMap::new();
    for _ in 0..n_partitions {
        if current_partition_id > 0 && current_partition_id % num_brokers == 0 {
            next_replica_shift = next_replica_shift.wrapping_add(1);
        }
        let first_replica_index = current_partition_id.wrapping_add(start_index) % num_brokers;
        let leader = get_at(&arranged, first_replica_index)?;
        let mut replicas = Vec::with_capacity(replication_factor as usize);
        replicas.push(leader);
        let mut racks_with_replicas: BTreeSet<&str> = BTreeSet::new();
        racks_with_replicas.extend(broker_rack.get(&leader).map(String::as_str));
        let mut brokers_with_replicas: BTreeSet<i32> = BTreeSet::from([leader]);
        let mut k: i32 = 0;
        for _ in 0..replication_factor - 1 {
            loop {
                let idx = replica_index(
                    first_replica_index,
                    next_replica_shift.wrapping_mul(num_racks),
                    k,
                    num_brokers,
                )?;
                let broker = get_at(&arranged, idx)?;
                let rack = broker_rack
                    .get(&broker)
                    .map(String::as_str)
                    .unwrap_or_default();
                k = k.wrapping_add(1);
                // Skip a broker whose rack already has a replica while some rack
                // has none, or that already has a replica while some broker has none.
                let rack_ok = !racks_with_replicas.contains(rack)
                    || racks_with_replicas.len() == num_racks as usize;
                let broker_ok = !brokers_with_replicas.contains(&broker)
                    || brokers_with_replicas.len() == num_brokers as usize;
                if rack_ok && broker_ok {
                    replicas.push(broker);
                    racks_with_replicas.insert(rack);
                    brokers_with_replicas.insert(broker);
                    break;
                }
            }
        }
        ret.insert(current_partition_id, replicas);
        current_partition_id = current_partition_id.wrapping_add(1);
    }
    Ok(ret)
}

/// Java `String.compareTo` order (UTF-16 code units), which Kafka uses to
/// sort rack names.
fn java_string_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// `AdminUtils.getRackAlternatedBrokerList`: racks sorted by name, brokers of
/// each rack by id, then one broker from each rack in turn.
/// E.g. rack1: 0,1,2, rack2: 3,4,5, rack3: 6,7,8 gives 0,3,6,1,4,7,2,5,8.
pub fn rack_alternated_broker_list(broker_rack: &BTreeMap<i32, String>) -> Vec<i32> {
    let mut racks: Vec<(&str, Vec<i32>)> = Vec::new();
    for (&id, rack) in broker_rack {
        match racks.iter_mut().find(|(r, _)| *r == rack.as_str()) {
            Some((_, ids)) => ids.push(id),
            None => racks.push((rack, vec![id])),
        }
    }
    racks.sort_by(|a, b| java_string_cmp(a.0, b.0));
    let mut cursors = vec![0usize; racks.len()];
    let mut result = Vec::with_capacity(broker_rack.len());
    let mut rack_index = 0;
    while result.len() < broker_rack.len() {
        let (_, ids) = &racks[rack_index];
        if let Some(&id) = ids.get(cursors[rack_index]) {
            result.push(id);
            cursors[rack_index] += 1;
        }
        rack_index = (rack_index + 1) % racks.len();
    }
    result
}

/// Brokers as `AdminZkClient.getBrokerMetadatas()` (rack-aware mode
/// `Enforced`) returns them for CreatePartitions: sorted by id, and an error
/// when only some brokers have a rack. Kafka throws this outside its
/// per-topic error handling, so the whole CreatePartitions request fails.
pub fn zk_broker_metadatas(
    brokers: &[BrokerMetadata],
) -> Result<Vec<BrokerMetadata>, AssignmentError> {
    let with_rack = brokers.iter().filter(|b| b.rack.is_some()).count();
    if with_rack > 0 && with_rack < brokers.len() {
        return Err(AssignmentError::AdminOperation(
            "Not all brokers have rack information. Add --disable-rack-aware in command line \
             to make replica assignment without rack information."
                .to_owned(),
        ));
    }
    let mut sorted = brokers.to_vec();
    sorted.sort_by_key(|b| b.id);
    Ok(sorted)
}

/// The broker order `ZkMetadataCache.getAliveBrokers` yields, which is what
/// ZK-mode CreateTopics feeds to the assignment (Kafka does not sort it).
/// The cache rebuilds a Scala `mutable.LongMap` on every UpdateMetadata,
/// sized by the previous snapshot's alive broker count, inserting the
/// request's live brokers in request order; this replays that map.
pub fn zk_alive_brokers_order(
    previous_alive_broker_count: usize,
    live_broker_ids: &[i32],
) -> Vec<i32> {
    let mut map = ScalaLongMap::new(i32::try_from(previous_alive_broker_count).unwrap_or(i32::MAX));
    for &id in live_broker_ids {
        map.update(i64::from(id));
    }
    map.iteration_order()
        .into_iter()
        .filter_map(|k| i32::try_from(k).ok())
        .collect()
}

/// Key layout of Scala 2.13's `mutable.LongMap` (keys only; no removals,
/// which the metadata cache never does on a fresh map). `size` is Scala's
/// `_size`: keys in the table, excluding the separately stored key 0.
struct ScalaLongMap {
    mask: i32,
    has_zero: bool,
    size: i32,
    keys: Vec<i64>,
}

const LONG_MAP_INDEX_MASK: i32 = 0x3FFF_FFFF;

impl ScalaLongMap {
    fn new(initial_buffer_size: i32) -> Self {
        let mask = if initial_buffer_size < 0 {
            0x7
        } else {
            let bits = 32 - (initial_buffer_size.wrapping_sub(1)).leading_zeros();
            // Java masks shift distances to 5 bits, so `1 << 32` is 1.
            ((1i32.wrapping_shl(bits)).wrapping_sub(1) & LONG_MAP_INDEX_MASK) | 0x7
        };
        ScalaLongMap {
            mask,
            has_zero: false,
            size: 0,
            keys: vec![0; mask as usize + 1],
        }
    }

    fn to_index(&self, k: i64) -> i32 {
        let h = ((k ^ ((k as u64) >> 32) as i64) & 0xFFFF_FFFF) as u32 as i32;
        let x = (h ^ ((h as u32) >> 16) as i32).wrapping_mul(0x85EB_CA6Bu32 as i32);
        (x ^ ((x as u32) >> 13) as i32) & self.mask
    }

    fn next_probe(&self, e: i32, x: i32) -> i32 {
        (e.wrapping_add(2i32.wrapping_mul(x.wrapping_add(1)).wrapping_mul(x))
            .wrapping_sub(3))
            & self.mask
    }

    fn update(&mut self, key: i64) {
        if key == 0 {
            // Kept beside the table; not part of `_size`, so it never repacks.
            self.has_zero = true;
            return;
        }
        let mut e = self.to_index(key);
        let mut x = 0;
        loop {
            let q = self.keys[e as usize];
            if q == key {
                return;
            }
            if q == 0 {
                break;
            }
            x += 1;
            e = self.next_probe(e, x);
        }
        self.keys[e as usize] = key;
        self.size += 1;
        if f64::from(self.size) > 0.5 * f64::from(self.mask) {
            self.repack();
        }
    }

    fn repack(&mut self) {
        let mut m = self.mask;
        if f64::from(self.size) >= 0.5 * f64::from(self.mask) {
            m = ((m << 1) + 1) & LONG_MAP_INDEX_MASK;
        }
        while m > 8 && self.size < ((m as u32) >> 3) as i32 {
            m = ((m as u32) >> 1) as i32;
        }
        let old = std::mem::replace(&mut self.keys, vec![0; m as usize + 1]);
        self.mask = m;
        for k in old.into_iter().filter(|&k| k != 0) {
            let mut e = self.to_index(k);
            let mut x = 0;
            while self.keys[e as usize] != 0 {
                x += 1;
                e = self.next_probe(e, x);
            }
            self.keys[e as usize] = k;
        }
    }

    fn iteration_order(&self) -> Vec<i64> {
        let zero = self.has_zero.then_some(0);
        zero.into_iter()
            .chain(self.keys.iter().copied().filter(|&k| k != 0))
            .collect()
    }
}

/// Scala 2.13 `Hashing.improve`, the hash spreader of immutable
/// `HashMap`/`HashSet` (CHAMP tries).
fn scala_improve(hcode: i32) -> i32 {
    let mut h = hcode.wrapping_add(!(hcode << 9));
    h ^= ((h as u32) >> 14) as i32;
    h = h.wrapping_add(h << 4);
    h ^ ((h as u32) >> 10) as i32
}

/// Iteration order of a Scala immutable `HashSet`/`HashMap` of distinct
/// `Int`s: a CHAMP trie on the improved hash, 5 bits a level, each node's
/// own entries (by slot) before its sub-nodes (by slot).
fn champ_order(keys: &[i32]) -> Vec<i32> {
    fn visit(entries: &[(u32, i32)], shift: u32, out: &mut Vec<i32>) {
        if shift >= 32 {
            // Full-hash collision node; impossible for distinct Ints.
            out.extend(entries.iter().map(|e| e.1));
            return;
        }
        let mut slots: BTreeMap<u32, Vec<(u32, i32)>> = BTreeMap::new();
        for &e in entries {
            slots.entry((e.0 >> shift) & 31).or_default().push(e);
        }
        out.extend(slots.values().filter(|g| g.len() == 1).map(|g| g[0].1));
        for g in slots.values().filter(|g| g.len() > 1) {
            visit(g, shift + 5, out);
        }
    }
    let hashed: Vec<(u32, i32)> = keys.iter().map(|&k| (scala_improve(k) as u32, k)).collect();
    let mut out = Vec::with_capacity(keys.len());
    visit(&hashed, 0, &mut out);
    out
}

/// Order of a Scala immutable `Set`/`Map` built from `distinct` (in
/// insertion order) and then reduced to `kept`: up to 4 elements Scala uses
/// insertion-ordered `Set1`..`Set4`, beyond that a CHAMP trie, which stays a
/// trie after removals.
fn scala_immutable_order(distinct: &[i32], kept: impl Fn(i32) -> bool) -> Vec<i32> {
    let remaining: Vec<i32> = distinct.iter().copied().filter(|&k| kept(k)).collect();
    if distinct.len() <= 4 {
        remaining
    } else {
        champ_order(&remaining)
    }
}

/// Iteration order of a Scala 2.13 `mutable.HashMap[Int, _]` after `puts`
/// (updates of existing keys included: each put may grow the table).
fn scala_mutable_hash_map_order(puts: &[i32]) -> Vec<i32> {
    let mut table_len: usize = 16;
    let mut threshold: usize = 12;
    let mut keys: Vec<i32> = Vec::new();
    let mut seen = BTreeSet::new();
    for &k in puts {
        if keys.len() + 1 >= threshold {
            table_len *= 2;
            threshold = (table_len as f64 * 0.75) as usize;
        }
        if seen.insert(k) {
            keys.push(k);
        }
    }
    let improve = |k: i32| k ^ ((k as u32) >> 16) as i32;
    let mask = (table_len - 1) as u32;
    // Buckets in index order, each kept sorted by (signed) improved hash.
    keys.sort_by_key(|&k| (improve(k) as u32 & mask, improve(k)));
    keys
}

fn mk_string(items: &[i32]) -> String {
    items
        .iter()
        .map(i32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn has_duplicates(replicas: &[i32]) -> bool {
    replicas.iter().collect::<BTreeSet<_>>().len() != replicas.len()
}

/// The replica-assignment checks of `AdminZkClient.validateTopicCreate` for a
/// CreateTopics request with manual assignments, applied to the map that
/// `ZkAdminManager.createTopics` builds (a later entry for the same partition
/// replaces an earlier one). As in Kafka, unknown broker ids are NOT
/// rejected here, and the "consecutive" check only compares the sum of the
/// non-negative partition ids with `n*(n-1)/2`.
///
/// The caller runs Kafka's earlier checks first (topic exists, null configs,
/// numPartitions/replicationFactor set together with assignments, topic name
/// validity, marked for deletion, collisions) and the config checks after.
pub fn validate_manual_assignment(
    assignments: &[(i32, Vec<i32>)],
) -> Result<BTreeMap<i32, Vec<i32>>, AssignmentError> {
    let mut map: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for (partition, replicas) in assignments {
        map.insert(*partition, replicas.clone());
    }
    let sizes: BTreeSet<usize> = map.values().map(Vec::len).collect();
    if sizes.len() != 1 {
        return Err(AssignmentError::InvalidReplicaAssignment(
            "All partitions should have the same number of replicas".to_owned(),
        ));
    }
    if map.values().any(|r| has_duplicates(r)) {
        let puts: Vec<i32> = assignments.iter().map(|(p, _)| *p).collect();
        let entries: Vec<String> = scala_mutable_hash_map_order(&puts)
            .iter()
            .map(|p| {
                let replicas = map.get(p).map(|r| mk_string(r)).unwrap_or_default();
                format!("{p} -> ArrayBuffer({replicas})")
            })
            .collect();
        return Err(AssignmentError::InvalidReplicaAssignment(format!(
            "Duplicate replica assignment found: HashMap({})",
            entries.join(", ")
        )));
    }
    let n = map.len() as i32;
    let sequence_sum = n.wrapping_mul(n.wrapping_sub(1)) / 2;
    let key_sum = map
        .keys()
        .filter(|&&p| p >= 0)
        .fold(0i32, |acc, &p| acc.wrapping_add(p));
    if key_sum != sequence_sum {
        return Err(AssignmentError::InvalidReplicaAssignment(
            "partitions should be a consecutive 0-based integer sequence".to_owned(),
        ));
    }
    Ok(map)
}

/// Assignment for the partitions a CreatePartitions request adds, exactly as
/// `ZkAdminManager.createPartitions` + `AdminZkClient.createNewPartitionsAssignment`
/// compute it. `brokers` must be what [`zk_broker_metadatas`] returns;
/// `partition0_replicas` are the current replicas of partition 0 and
/// `existing_partition_count` the current partition count. `manual` is the
/// request's assignments (one broker list per new partition), if any.
///
/// Auto assignment starts at the first broker whose id is >= partition 0's
/// first replica, continuing Kafka's placement from the existing count.
/// Returns only the new partitions. The caller checks first that the topic
/// exists and has no reassignment in progress.
pub fn assign_new_partitions(
    brokers: &[BrokerMetadata],
    partition0_replicas: &[i32],
    existing_partition_count: i32,
    new_partition_count: i32,
    manual: Option<&[Vec<i32>]>,
) -> Result<BTreeMap<i32, Vec<i32>>, AssignmentError> {
    let increment = new_partition_count.wrapping_sub(existing_partition_count);
    if increment < 0 {
        return Err(AssignmentError::InvalidPartitions(format!(
            "Topic currently has {existing_partition_count} partitions, which is higher than \
             the requested {new_partition_count}."
        )));
    }
    if increment == 0 {
        return Err(AssignmentError::InvalidPartitions(format!(
            "Topic already has {existing_partition_count} partitions."
        )));
    }
    let Some(manual) = manual else {
        let first = *partition0_replicas
            .first()
            .ok_or_else(|| AssignmentError::Internal("head of empty list".to_owned()))?;
        let start_index = brokers.iter().position(|b| b.id >= first).unwrap_or(0);
        let rf = i32::try_from(partition0_replicas.len())
            .map_err(|_| AssignmentError::Internal("replica count exceeds a Java int".into()))?;
        // A fixed start index means no random draws happen.
        return assign_replicas(
            brokers,
            increment,
            rf,
            Some(start_index),
            existing_partition_count,
            &mut |_| 0,
        );
    };
    let known: BTreeSet<i32> = brokers.iter().map(|b| b.id).collect();
    let mut distinct = Vec::new();
    let mut seen = BTreeSet::new();
    for &id in manual.iter().flatten() {
        if seen.insert(id) {
            distinct.push(id);
        }
    }
    let unknown = scala_immutable_order(&distinct, |id| !known.contains(&id));
    if !unknown.is_empty() {
        return Err(AssignmentError::InvalidReplicaAssignment(format!(
            "Unknown broker(s) in replica assignment: {}.",
            mk_string(&unknown)
        )));
    }
    if manual.len() as i64 != i64::from(increment) {
        return Err(AssignmentError::InvalidReplicaAssignment(format!(
            "Increasing the number of partitions by {increment} but {} assignments provided.",
            manual.len()
        )));
    }
    let proposed: BTreeMap<i32, Vec<i32>> = manual
        .iter()
        .enumerate()
        .map(|(i, r)| (existing_partition_count.wrapping_add(i as i32), r.clone()))
        .collect();
    let partitions: Vec<i32> = proposed.keys().copied().collect();
    // Kafka reports the first bad partition in its immutable Map's order.
    for p in scala_immutable_order(&partitions, |_| true) {
        let replicas = &proposed[&p];
        if replicas.is_empty() {
            return Err(AssignmentError::InvalidReplicaAssignment(format!(
                "Cannot have replication factor of 0 for partition id {p}."
            )));
        }
        if has_duplicates(replicas) {
            return Err(AssignmentError::InvalidReplicaAssignment(format!(
                "Duplicate brokers not allowed in replica assignment: {} for partition id {p}.",
                mk_string(replicas)
            )));
        }
    }
    let expected_rf = partition0_replicas.len();
    let bad: Vec<(i32, usize)> = proposed
        .iter()
        .filter(|(_, r)| r.len() != expected_rf)
        .map(|(p, r)| (*p, r.len()))
        .collect();
    if !bad.is_empty() {
        let ps: Vec<String> = bad.iter().map(|(p, _)| p.to_string()).collect();
        let rfs: Vec<String> = bad.iter().map(|(_, rf)| rf.to_string()).collect();
        return Err(AssignmentError::InvalidReplicaAssignment(format!(
            "Inconsistent replication factor between partitions, partition 0 has {expected_rf} \
             while partitions [{}] have replication factors [{}], respectively.",
            ps.join(", "),
            rfs.join(", ")
        )));
    }
    Ok(proposed)
}

#[cfg(test)]
mod tests;
