//! LeaveGroup (API 13, v0-5; v3+ removes a batch of members, KIP-345).
//! Before v3 the one member's error is the top-level error, as in Kafka.

use std::rc::Rc;

use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};

use super::{respond, HandlerResult};
use crate::handlers::KafkaApis;
use crate::protocol::{decode_body, errors, Request};
use crate::security::authorizer::{AclOperation, ResourceType};

const BATCH_VERSION: i16 = 3;

pub fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let r: LeaveGroupRequest = decode_body(req)?;
    let batch = req.api_version >= BATCH_VERSION;
    if !ctx.authorize(req, AclOperation::Read, ResourceType::Group, &r.group_id.0) {
        // No member results, only the top-level error.
        let response = LeaveGroupResponse::default()
            .with_error_code(errors::GROUP_AUTHORIZATION_FAILED.code());
        return respond(req, &response);
    }
    let leaving: Vec<(String, Option<String>)> = if batch {
        r.members
            .iter()
            .map(|m| {
                (
                    m.member_id.to_string(),
                    m.group_instance_id.as_ref().map(|s| s.to_string()),
                )
            })
            .collect()
    } else {
        vec![(r.member_id.to_string(), None)]
    };
    let (top, per_member) =
        ctx.with_coordinator(|c, log, now| c.leave_group(log, &r.group_id.0, &leaving, now))?;
    let mut response = LeaveGroupResponse::default().with_error_code(top.code());
    if batch {
        if top == errors::NONE {
            response.members = r
                .members
                .iter()
                .zip(&per_member)
                .map(|(m, e)| {
                    MemberResponse::default()
                        .with_member_id(m.member_id.clone())
                        .with_group_instance_id(m.group_instance_id.clone())
                        .with_error_code((*e).code())
                })
                .collect();
        }
    } else if top == errors::NONE {
        response.error_code = per_member.first().copied().unwrap_or(errors::NONE).code();
    }
    respond(req, &response)
}
