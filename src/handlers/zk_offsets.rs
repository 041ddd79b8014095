//! OffsetCommit v0 and OffsetFetch v0: as ZooKeeper-mode Kafka 3.9 does,
//! these offsets live in the metadata store at
//! `/consumers/<group>/offsets/<topic>/<partition>` (the offset as decimal
//! text), apart from the group coordinator's: a v0 commit is seen only by a
//! v0 fetch. In cluster mode the store is ZooKeeper; on a single broker it
//! is the embedded store. Runs on the controller shard.

use std::rc::Rc;

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use kafka_protocol::messages::{
    OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
};

use super::{respond, HandlerResult};
use crate::coordinator::group_coordinator::OFFSET_METADATA_MAX_BYTES;
use crate::handlers::KafkaApis;
use crate::metadata::{MetadataStore, StoreError, ANY_VERSION};
use crate::protocol::errors::ErrorCode;
use crate::protocol::{decode_body, errors, Request};
use crate::security::authorizer::{AclOperation, ResourceType};

/// Kafka's `ConsumerOffset.path`.
fn offset_path(group: &str, topic: &str, partition: i32) -> String {
    format!("/consumers/{group}/offsets/{topic}/{partition}")
}

/// Kafka's `setOrCreateConsumerOffset`: set, or create with parents.
fn store_offset(store: &mut dyn MetadataStore, path: &str, offset: i64) -> ErrorCode {
    let data = offset.to_string();
    let result = match store.set(path, data.as_bytes(), ANY_VERSION) {
        Err(StoreError::NoNode(_)) => store.create_all(path, data.as_bytes()).map(|_| ()),
        other => other.map(|_| ()),
    };
    match result {
        Ok(()) => errors::NONE,
        Err(e) => {
            log::warn!("offset commit v0 to {path}: {e}");
            errors::UNKNOWN_SERVER_ERROR
        }
    }
}

/// Kafka's `getConsumerOffset`: None when absent. Unreadable text is an error.
fn read_offset(store: &mut dyn MetadataStore, path: &str) -> Result<Option<i64>, ErrorCode> {
    match store.get(path) {
        Ok((data, _)) => std::str::from_utf8(&data)
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .map(Some)
            .ok_or(errors::UNKNOWN_SERVER_ERROR),
        Err(StoreError::NoNode(_)) => Ok(None),
        Err(e) => {
            log::warn!("offset fetch v0 from {path}: {e}");
            Err(errors::UNKNOWN_SERVER_ERROR)
        }
    }
}

/// Runs `f` on the metadata store: ZooKeeper's worker thread in cluster
/// mode, the embedded store on this (controller) shard otherwise.
async fn with_store<T: Send + 'static>(
    ctx: &Rc<KafkaApis>,
    f: impl FnOnce(&mut dyn MetadataStore) -> T + Send + 'static,
) -> Result<T, String> {
    if let Some(cluster) = &ctx.cluster {
        return cluster.zk_call(move |zk| f(zk)).await;
    }
    let controller = ctx
        .admin
        .embedded
        .as_ref()
        .ok_or("offsets v0: no metadata store on this shard")?;
    let out = f(controller.borrow_mut().store_mut());
    crate::admin::embedded::store_synced(controller).await;
    Ok(out)
}

pub async fn commit(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let r: OffsetCommitRequest = decode_body(req)?;
    let image = ctx.metadata.image();
    let group = r.group_id.0.to_string();
    // (topic, partition, Some(offset) to store, or the error it gets).
    let mut parts: Vec<(String, i32, Result<i64, ErrorCode>)> = Vec::new();
    let group_read = ctx.authorize(req, AclOperation::Read, ResourceType::Group, &group);
    for t in &r.topics {
        let count = image.topic(&t.name.0).map_or(0, |i| i.partitions.len());
        let refused = if !group_read {
            Some(errors::GROUP_AUTHORIZATION_FAILED)
        } else if !ctx.authorize(req, AclOperation::Read, ResourceType::Topic, &t.name.0) {
            Some(errors::TOPIC_AUTHORIZATION_FAILED)
        } else {
            None
        };
        for p in &t.partitions {
            let known = p.partition_index >= 0 && (p.partition_index as usize) < count;
            let too_large = p
                .committed_metadata
                .as_ref()
                .is_some_and(|m| m.len() > OFFSET_METADATA_MAX_BYTES);
            let outcome = if let Some(code) = refused {
                Err(code)
            } else if !known {
                Err(errors::UNKNOWN_TOPIC_OR_PARTITION)
            } else if too_large {
                Err(errors::OFFSET_METADATA_TOO_LARGE)
            } else {
                Ok(p.committed_offset)
            };
            parts.push((t.name.0.to_string(), p.partition_index, outcome));
        }
    }
    let codes: Vec<ErrorCode> = with_store(ctx, move |store| {
        parts
            .iter()
            .map(|(topic, partition, outcome)| match outcome {
                Ok(offset) => store_offset(store, &offset_path(&group, topic, *partition), *offset),
                Err(code) => *code,
            })
            .collect()
    })
    .await?;
    let mut codes = codes.into_iter();
    let topics = r
        .topics
        .iter()
        .map(|t| {
            OffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(
                                    codes.next().unwrap_or(errors::UNKNOWN_SERVER_ERROR).code(),
                                )
                        })
                        .collect(),
                )
        })
        .collect();
    respond(req, &OffsetCommitResponse::default().with_topics(topics))
}

pub async fn fetch(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let r: OffsetFetchRequest = decode_body(req)?;
    let image = ctx.metadata.image();
    let group = r.group_id.0.to_string();
    // DESCRIBE on the group, then on each topic: refused partitions are
    // answered -1 with the error, unread.
    let group_described = ctx.authorize(req, AclOperation::Describe, ResourceType::Group, &group);
    let refusals: Vec<Option<ErrorCode>> = r
        .topics
        .iter()
        .flatten()
        .map(|t| {
            if !group_described {
                Some(errors::GROUP_AUTHORIZATION_FAILED)
            } else if !ctx.authorize(req, AclOperation::Describe, ResourceType::Topic, &t.name.0) {
                Some(errors::TOPIC_AUTHORIZATION_FAILED)
            } else {
                None
            }
        })
        .collect();
    let asked: Vec<(String, i32, bool)> = r
        .topics
        .iter()
        .flatten()
        .zip(&refusals)
        .flat_map(|(t, refusal)| {
            let count = image.topic(&t.name.0).map_or(0, |i| i.partitions.len());
            let readable = refusal.is_none();
            t.partition_indexes.iter().map(move |&p| {
                (
                    t.name.0.to_string(),
                    p,
                    readable && p >= 0 && (p as usize) < count,
                )
            })
        })
        .collect();
    // A partition that does not exist or has no offset answers -1 with
    // UNKNOWN_TOPIC_OR_PARTITION (Kafka's OffsetFetchResponse.UNKNOWN_PARTITION).
    let found: Vec<Result<Option<i64>, ErrorCode>> = with_store(ctx, move |store| {
        asked
            .iter()
            .map(|(topic, partition, known)| match known {
                true => read_offset(store, &offset_path(&group, topic, *partition)),
                false => Ok(None),
            })
            .collect()
    })
    .await?;
    let mut found = found.into_iter();
    let topics = r
        .topics
        .iter()
        .flatten()
        .zip(refusals)
        .map(|(t, refusal)| {
            let partitions = t
                .partition_indexes
                .iter()
                .map(|&p| {
                    let (offset, error) = match (refusal, found.next()) {
                        (Some(code), _) => (-1, code),
                        (None, found) => match found {
                            Some(Ok(Some(o))) => (o, errors::NONE),
                            Some(Ok(None)) => (-1, errors::UNKNOWN_TOPIC_OR_PARTITION),
                            Some(Err(code)) => (-1, code),
                            None => (-1, errors::UNKNOWN_SERVER_ERROR),
                        },
                    };
                    OffsetFetchResponsePartition::default()
                        .with_partition_index(p)
                        .with_committed_offset(offset)
                        .with_metadata(Some(Default::default()))
                        .with_error_code(error.code())
                })
                .collect();
            OffsetFetchResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    respond(req, &OffsetFetchResponse::default().with_topics(topics))
}
