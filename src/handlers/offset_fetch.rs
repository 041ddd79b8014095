//! OffsetFetch (API 9, v1-9; v8+ asks for several groups). Partitions
//! without a committed offset answer -1 with no error, so the consumer
//! applies its auto.offset.reset. With `require_stable` (v7+, read_committed
//! consumers), a partition with transactional offsets not yet committed or
//! aborted answers UNSTABLE_OFFSET_COMMIT, which the consumer retries.

use std::rc::Rc;

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{GroupId, OffsetFetchRequest, OffsetFetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::{respond, HandlerResult};
use crate::coordinator::offsets::OffsetRow;
use crate::handlers::auth_helper::passes;
use crate::handlers::KafkaApis;
use crate::protocol::errors::ErrorCode;
use crate::protocol::{decode_body, errors, Request};
use crate::security::authorizer::{AclOperation, AuditLog, ResourceType};

const MULTI_GROUP_VERSION: i16 = 8;
/// v0/1 have no top-level error: a group error goes on every partition.
const TOP_LEVEL_ERROR_VERSION: i16 = 2;

type Fetched = (ErrorCode, Vec<OffsetRow>);

/// Groups consecutive (topic, partition) rows by topic; each row with its
/// partition error.
fn by_topic<T>(
    rows: Vec<(OffsetRow, ErrorCode)>,
    mut f: impl FnMut(i32, i64, i32, String, ErrorCode) -> T,
) -> Vec<(String, Vec<T>)> {
    let mut out: Vec<(String, Vec<T>)> = Vec::new();
    for ((t, p, o, e, m), error) in rows {
        let item = f(p, o, e, m, error);
        match out.last_mut() {
            Some((name, items)) if *name == t => items.push(item),
            _ => out.push((t, vec![item])),
        }
    }
    out
}

/// Kafka's getOffsets with requireStable: a partition with pending
/// transactional offsets gets no offset and UNSTABLE_OFFSET_COMMIT.
fn stable_rows(
    ctx: &KafkaApis,
    group_id: &str,
    rows: Vec<OffsetRow>,
    require_stable: bool,
) -> Result<Vec<(OffsetRow, ErrorCode)>, String> {
    if !require_stable {
        return Ok(rows.into_iter().map(|r| (r, errors::NONE)).collect());
    }
    ctx.with_coordinator(|c, _, _| {
        rows.into_iter()
            .map(|(t, p, o, e, m)| {
                if c.has_pending_txn_offset(group_id, &t, p) {
                    (
                        (t, p, -1, -1, String::new()),
                        errors::UNSTABLE_OFFSET_COMMIT,
                    )
                } else {
                    ((t, p, o, e, m), errors::NONE)
                }
            })
            .collect()
    })
}

pub fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let r: OffsetFetchRequest = decode_body(req)?;
    let response = if req.api_version >= MULTI_GROUP_VERSION {
        fetch_groups(ctx, req, &r)?
    } else {
        fetch_group(ctx, req, &r)?
    };
    respond(req, &response)
}

/// What one group's fetch may return (KafkaApis' checks): None if the
/// principal may not describe the group; otherwise the asked partitions
/// of topics it may describe, and those of the others, answered
/// TOPIC_AUTHORIZATION_FAILED after the rest.
struct GroupAccess {
    asked: Option<Vec<(String, i32)>>,
    refused: Vec<(String, i32)>,
}

fn group_access(
    ctx: &KafkaApis,
    req: &Request,
    group_id: &str,
    asked: Option<Vec<(String, i32)>>,
) -> Option<GroupAccess> {
    if !ctx.authorize(req, AclOperation::Describe, ResourceType::Group, group_id) {
        return None;
    }
    let Some(asked) = asked else {
        return Some(GroupAccess {
            asked: None,
            refused: Vec::new(),
        });
    };
    let allowed = ctx.filter_authorized(
        req,
        AclOperation::Describe,
        ResourceType::Topic,
        asked.iter().map(|(t, _)| t.as_str()),
        AuditLog::BOTH,
    );
    let (kept, refused): (Vec<_>, Vec<_>) = asked
        .iter()
        .cloned()
        .partition(|(t, _)| passes(&allowed, t));
    Some(GroupAccess {
        asked: Some(kept),
        refused,
    })
}

/// The group's rows, stable when asked, with the refused partitions
/// appended (unless the coordinator failed the whole group); all offsets
/// (no topics asked) leave out topics the principal may not describe.
fn group_rows(
    ctx: &KafkaApis,
    req: &Request,
    group_id: &str,
    access: GroupAccess,
    require_stable: bool,
) -> Result<(ErrorCode, Vec<(OffsetRow, ErrorCode)>), String> {
    let (error, mut rows): Fetched =
        ctx.with_coordinator(|c, _, _| c.fetch_offsets(group_id, access.asked.as_deref()))?;
    if access.asked.is_none() && ctx.authorizer.is_some() {
        rows.retain(|(t, ..)| ctx.authorize(req, AclOperation::Describe, ResourceType::Topic, t));
    }
    let mut rows = stable_rows(ctx, group_id, rows, require_stable)?;
    if error.is_none() {
        rows.extend(access.refused.into_iter().map(|(t, p)| {
            (
                (t, p, -1, -1, String::new()),
                errors::TOPIC_AUTHORIZATION_FAILED,
            )
        }));
    }
    Ok((error, rows))
}

/// v8+: one answer per group, each with its own error.
fn fetch_groups(
    ctx: &KafkaApis,
    req: &Request,
    r: &OffsetFetchRequest,
) -> Result<OffsetFetchResponse, String> {
    let mut groups = Vec::with_capacity(r.groups.len());
    for g in &r.groups {
        let asked: Option<Vec<(String, i32)>> = g.topics.as_ref().map(|ts| {
            ts.iter()
                .flat_map(|t| {
                    t.partition_indexes
                        .iter()
                        .map(move |p| (t.name.0.to_string(), *p))
                })
                .collect()
        });
        let Some(access) = group_access(ctx, req, &g.group_id.0, asked) else {
            groups.push(
                OffsetFetchResponseGroup::default()
                    .with_group_id(GroupId(g.group_id.0.clone()))
                    .with_error_code(errors::GROUP_AUTHORIZATION_FAILED.code()),
            );
            continue;
        };
        let (error, rows) = group_rows(ctx, req, &g.group_id.0, access, r.require_stable)?;
        let topics = by_topic(rows, |p, o, e, m, partition_error| {
            OffsetFetchResponsePartitions::default()
                .with_partition_index(p)
                .with_committed_offset(o)
                .with_committed_leader_epoch(e)
                .with_metadata(Some(StrBytes::from_string(m)))
                .with_error_code(partition_error.code())
        })
        .into_iter()
        .map(|(t, ps)| {
            OffsetFetchResponseTopics::default()
                .with_name(TopicName(StrBytes::from_string(t)))
                .with_partitions(ps)
        })
        .collect();
        groups.push(
            OffsetFetchResponseGroup::default()
                .with_group_id(GroupId(g.group_id.0.clone()))
                .with_topics(topics)
                .with_error_code(error.code()),
        );
    }
    Ok(OffsetFetchResponse::default().with_groups(groups))
}

/// v1-v7: one group.
fn fetch_group(
    ctx: &KafkaApis,
    req: &Request,
    r: &OffsetFetchRequest,
) -> Result<OffsetFetchResponse, String> {
    let v = req.api_version;
    let asked: Option<Vec<(String, i32)>> = r.topics.as_ref().map(|ts| {
        ts.iter()
            .flat_map(|t| {
                t.partition_indexes
                    .iter()
                    .map(move |p| (t.name.0.to_string(), *p))
            })
            .collect()
    });
    let Some(access) = group_access(ctx, req, &r.group_id.0, asked.clone()) else {
        // No partitions, whatever the version: a v0/1 client sees none.
        let code = if v >= TOP_LEVEL_ERROR_VERSION {
            errors::GROUP_AUTHORIZATION_FAILED.code()
        } else {
            0
        };
        return Ok(OffsetFetchResponse::default().with_error_code(code));
    };
    let (error, mut rows) = group_rows(ctx, req, &r.group_id.0, access, r.require_stable)?;
    let per_partition_error = if v < TOP_LEVEL_ERROR_VERSION {
        error
    } else {
        errors::NONE
    };
    if error != 0 && v < TOP_LEVEL_ERROR_VERSION {
        rows = asked
            .unwrap_or_default()
            .into_iter()
            .map(|(t, p)| ((t, p, -1, -1, String::new()), errors::NONE))
            .collect();
    }
    let topics = by_topic(rows, |p, o, e, m, unstable| {
        let partition_error = if unstable.is_none() {
            per_partition_error
        } else {
            unstable
        };
        OffsetFetchResponsePartition::default()
            .with_partition_index(p)
            .with_committed_offset(o)
            .with_committed_leader_epoch(e)
            .with_metadata(Some(StrBytes::from_string(m)))
            .with_error_code(partition_error.code())
    })
    .into_iter()
    .map(|(t, ps)| {
        OffsetFetchResponseTopic::default()
            .with_name(TopicName(StrBytes::from_string(t)))
            .with_partitions(ps)
    })
    .collect();
    Ok(OffsetFetchResponse::default()
        .with_topics(topics)
        .with_error_code(if v >= TOP_LEVEL_ERROR_VERSION {
            error.code()
        } else {
            0
        }))
}
