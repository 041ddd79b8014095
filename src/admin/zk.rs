//! Topic administration in cluster mode, as Kafka's ZkAdminManager and
//! AdminZkClient: the broker that receives CreateTopics, DeleteTopics or
//! CreatePartitions validates it, computes the replica assignment, writes
//! it to ZooKeeper, and waits until the controller's UpdateMetadata shows
//! the result (Kafka's DelayedCreatePartitions / DelayedDeleteTopics).

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use crate::admin::assignment::{self, BrokerMetadata};
use crate::admin::embedded::NewTopic;
use crate::admin::limits::check_partitions_per_request;
use crate::admin::TopicAdmin;
use crate::admin::{validate, AdminError, AdminResult};
use crate::metadata::metadata_cache::{MetadataImage, TopicInfo};
use crate::metadata::topics;
use crate::metadata::{MetadataStore, StoreError};
use crate::protocol::errors;
use crate::util::now_ms;

/// How long an admin request waits for the controller to act.
const ADMIN_WAIT_MS: u64 = 30_000;
const POLL_MS: u64 = 10;

fn store_err(e: StoreError) -> AdminError {
    AdminError::new(errors::UNKNOWN_SERVER_ERROR, format!("ZooKeeper: {e}"))
}

fn assignment_err(e: assignment::AssignmentError) -> AdminError {
    AdminError::new(
        e.kafka_error_code(),
        e.kafka_error_message().unwrap_or_default(),
    )
}

fn brokers_of(image: &MetadataImage) -> Vec<BrokerMetadata> {
    let mut b: Vec<BrokerMetadata> = image
        .brokers
        .iter()
        .map(|b| BrokerMetadata {
            id: b.id,
            rack: b.rack.clone(),
        })
        .collect();
    b.sort_by_key(|b| b.id);
    b
}

/// A random index source for the assignment (Kafka uses its own Random).
fn random_below(n: usize) -> usize {
    if n == 0 {
        return 0;
    }
    let r = u64::from_le_bytes(
        uuid::Uuid::new_v4().as_bytes()[..8]
            .try_into()
            .expect("8 bytes"),
    );
    (r % n as u64) as usize
}

/// Waits until `done` holds for the published image, or the admin timeout.
async fn wait_for_image(ctx: &TopicAdmin, done: impl Fn(&MetadataImage) -> bool) -> bool {
    let deadline = now_ms() + ADMIN_WAIT_MS;
    loop {
        if done(&ctx.metadata.image()) {
            return true;
        }
        if now_ms() >= deadline {
            return false;
        }
        glommio::timer::sleep(Duration::from_millis(POLL_MS)).await;
    }
}

fn all_led(t: &TopicInfo, partitions: usize) -> bool {
    t.partitions.len() >= partitions && t.partitions.iter().all(|p| p.leader >= 0)
}

pub async fn create_topic(
    ctx: &Rc<TopicAdmin>,
    t: NewTopic,
    validate_only: bool,
) -> AdminResult<Arc<TopicInfo>> {
    let cluster = ctx.cluster.clone().expect("cluster mode");
    let config = &ctx.config;
    let image = ctx.metadata.image();
    validate::check_new_topic(&t, &image)?;
    let brokers = brokers_of(&image);
    let assignment = match &t.assignment {
        Some(a) => {
            let listed: Vec<(i32, Vec<i32>)> = a.iter().map(|(p, r)| (*p, r.clone())).collect();
            let map = assignment::validate_manual_assignment(&listed).map_err(assignment_err)?;
            // ZooKeeper-mode Kafka would write partitions that can never
            // have a leader; refused as Kafka's KRaft controller does.
            if map.values().any(Vec::is_empty) {
                return Err(AdminError::new(
                    errors::INVALID_REPLICA_ASSIGNMENT,
                    "The manual partition assignment includes an empty replica list.",
                ));
            }
            map
        }
        None => {
            let (partitions, rf) = validate::requested_counts(&t, config);
            check_partitions_per_request(i64::from(partitions))?;
            assignment::assign_replicas_to_brokers(
                &brokers,
                partitions,
                rf,
                None,
                None,
                &mut random_below,
            )
            .map_err(assignment_err)?
        }
    };
    let topic_config = validate::topic_config(&t, &ctx.dynamic_config.current())?;
    let topic_id = topics::random_uuid();
    let info = validate::new_topic_info(
        &t.name,
        Uuid::from_bytes(topic_id),
        &assignment,
        topic_config,
    );
    if validate_only {
        return Ok(info);
    }
    let name = t.name.clone();
    let overrides = info.overrides.clone();
    let written_assignment = assignment.clone();
    cluster
        .zk_call(move |zk| -> AdminResult<()> {
            let colliding = topics::colliding_topics(zk, &name).map_err(store_err)?;
            if let Some(other) = colliding.first() {
                return Err(AdminError::colliding_topic(&name, other));
            }
            match topics::create_topic_assignment(
                zk,
                &name,
                topic_id,
                &written_assignment,
                &overrides,
            ) {
                Ok(()) => Ok(()),
                Err(StoreError::NodeExists(_)) => Err(AdminError::topic_exists(&name)),
                Err(e) => Err(store_err(e)),
            }
        })
        .await
        .map_err(|e| AdminError::new(errors::UNKNOWN_SERVER_ERROR, e))??;
    let n = assignment.len();
    let name = t.name.clone();
    if !wait_for_image(ctx, |img| img.topic(&name).is_some_and(|t| all_led(t, n))).await {
        return Err(AdminError::new(
            errors::REQUEST_TIMED_OUT,
            format!("Timed out waiting for topic {name} to get leaders"),
        ));
    }
    log::info!("created topic {} with {n} partitions", t.name);
    Ok(ctx.metadata.image().topic(&t.name).cloned().unwrap_or(info))
}

pub async fn delete_topic(ctx: &Rc<TopicAdmin>, name: &str) -> AdminResult<Uuid> {
    let cluster = ctx.cluster.clone().expect("cluster mode");
    if !ctx.config.delete_topic_enable {
        return Err(AdminError::new(
            errors::TOPIC_DELETION_DISABLED,
            "Topic deletion is disabled.",
        ));
    }
    let image = ctx.metadata.image();
    let Some(info) = image.topic(name).cloned() else {
        return Err(AdminError::unknown_topic_partition());
    };
    let topic = name.to_string();
    cluster
        .zk_call(
            move |zk| match topics::mark_topic_for_deletion(zk, &topic) {
                // Already marked: wait for it like the first request does.
                Ok(()) | Err(StoreError::NodeExists(_)) => Ok(()),
                Err(StoreError::NoNode(_)) => Err(AdminError::unknown_topic_partition()),
                Err(e) => Err(store_err(e)),
            },
        )
        .await
        .map_err(|e| AdminError::new(errors::UNKNOWN_SERVER_ERROR, e))??;
    if !wait_for_image(ctx, |img| img.topic(name).is_none()).await {
        return Err(AdminError::new(
            errors::REQUEST_TIMED_OUT,
            format!("Timed out waiting for topic {name} to be deleted"),
        ));
    }
    Ok(info.topic_id)
}

pub async fn create_partitions(
    ctx: &Rc<TopicAdmin>,
    name: &str,
    new_total: i32,
    assignment: Option<Vec<Vec<i32>>>,
    validate_only: bool,
) -> AdminResult<()> {
    let cluster = ctx.cluster.clone().expect("cluster mode");
    let image = ctx.metadata.image();
    let (info, current) = validate::check_partition_increase(&image, name, new_total)?;
    let brokers = assignment::zk_broker_metadatas(&brokers_of(&image)).map_err(assignment_err)?;
    let first_replicas = info
        .partitions
        .first()
        .map(|p| p.replicas.clone())
        .unwrap_or_default();
    let added = assignment::assign_new_partitions(
        &brokers,
        &first_replicas,
        current,
        new_total,
        assignment.as_deref(),
    )
    .map_err(assignment_err)?;
    if validate_only {
        return Ok(());
    }
    let topic = name.to_string();
    cluster
        .zk_call(move |zk| topics::add_partitions_assignment(zk, &topic, &added).map_err(store_err))
        .await
        .map_err(|e| AdminError::new(errors::UNKNOWN_SERVER_ERROR, e))??;
    let n = new_total as usize;
    if !wait_for_image(ctx, |img| img.topic(name).is_some_and(|t| all_led(t, n))).await {
        return Err(AdminError::new(
            errors::REQUEST_TIMED_OUT,
            format!("Timed out waiting for the new partitions of {name}"),
        ));
    }
    Ok(())
}

/// Reads topics' config overrides (for topics new to the image).
pub fn read_topic_configs(
    zk: &mut crate::zk::ZkClient,
    names: &[String],
) -> std::collections::HashMap<String, BTreeMap<String, String>> {
    let mut out = std::collections::HashMap::new();
    for n in names {
        let path = topics::topic_config_path(n);
        match zk.get(&path) {
            Ok((b, _)) => match topics::decode_entity_config(&path, &b) {
                Ok(c) => {
                    out.insert(n.clone(), c);
                }
                Err(e) => log::warn!("{e}"),
            },
            Err(StoreError::NoNode(_)) => {
                out.insert(n.clone(), BTreeMap::new());
            }
            Err(e) => log::warn!("reading {path}: {e}"),
        }
    }
    out
}
