//! OffsetDelete (API 47, v0): removes committed offsets of an Empty group,
//! or of topics a consumer group does not subscribe to
//! (GROUP_SUBSCRIBED_TO_TOPIC otherwise). Unknown topics get
//! UNKNOWN_TOPIC_OR_PARTITION; a group error answers with no topics.

use std::rc::Rc;

use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};

use super::{respond, HandlerResult};
use crate::handlers::KafkaApis;
use crate::protocol::errors::ErrorCode;
use crate::protocol::{decode_body, errors, Request};
use crate::security::authorizer::{AclOperation, ResourceType};

pub fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let r: OffsetDeleteRequest = decode_body(req)?;
    if !ctx.authorize(
        req,
        AclOperation::Delete,
        ResourceType::Group,
        &r.group_id.0,
    ) {
        let response = OffsetDeleteResponse::default()
            .with_error_code(errors::GROUP_AUTHORIZATION_FAILED.code());
        return respond(req, &response);
    }
    let image = ctx.metadata.image();
    let mut parts = Vec::new();
    let mut slots: Vec<Vec<Result<usize, ErrorCode>>> = Vec::with_capacity(r.topics.len());
    for t in &r.topics {
        let known = image.topic(&t.name.0).is_some();
        let read = ctx.authorize(req, AclOperation::Read, ResourceType::Topic, &t.name.0);
        slots.push(
            t.partitions
                .iter()
                .map(|p| {
                    if !read {
                        return Err(errors::TOPIC_AUTHORIZATION_FAILED);
                    }
                    if !known {
                        return Err(errors::UNKNOWN_TOPIC_OR_PARTITION);
                    }
                    parts.push((t.name.0.to_string(), p.partition_index));
                    Ok(parts.len() - 1)
                })
                .collect(),
        );
    }
    let (group_error, results) =
        ctx.with_coordinator(|c, log, now| c.delete_offsets(log, &r.group_id.0, &parts, now))?;
    if group_error != errors::NONE {
        return respond(
            req,
            &OffsetDeleteResponse::default().with_error_code(group_error.code()),
        );
    }
    let topics = r
        .topics
        .iter()
        .zip(slots)
        .map(|(t, slots)| {
            OffsetDeleteResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .zip(slots)
                        .map(|(p, s)| {
                            OffsetDeleteResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(match s {
                                    Ok(i) => results[i].code(),
                                    Err(e) => e.code(),
                                })
                        })
                        .collect(),
                )
        })
        .collect();
    respond(req, &OffsetDeleteResponse::default().with_topics(topics))
}
