//! JoinGroup (API 11, v0-9), run by the group coordinator on the controller
//! shard. The answer may wait for the rebalance to complete.

use std::rc::Rc;

use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse};
use kafka_protocol::protocol::StrBytes;

use super::{respond, HandlerResult};
use crate::coordinator::group::JoinResult;
use crate::coordinator::group_coordinator::JoinParams;
use crate::handlers::KafkaApis;
use crate::protocol::{decode_body, errors, Request};
use crate::security::authorizer::{AclOperation, ResourceType};

/// From v4 a first join gets MEMBER_ID_REQUIRED (KIP-394).
const KNOWN_MEMBER_ID_VERSION: i16 = 4;
/// From v7 protocol type and name are in the response (nullable).
const PROTOCOL_IN_RESPONSE_VERSION: i16 = 7;
const SKIP_ASSIGNMENT_VERSION: i16 = 9;

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let r: JoinGroupRequest = decode_body(req)?;
    if !ctx.authorize(req, AclOperation::Read, ResourceType::Group, &r.group_id.0) {
        // JoinGroupRequest.getErrorResponse.
        let protocol_name =
            (req.api_version < PROTOCOL_IN_RESPONSE_VERSION).then(StrBytes::default);
        let response = JoinGroupResponse::default()
            .with_error_code(errors::GROUP_AUTHORIZATION_FAILED.code())
            .with_generation_id(-1)
            .with_protocol_name(protocol_name)
            .with_leader(StrBytes::default())
            .with_member_id(StrBytes::default());
        return respond(req, &response);
    }
    let member_id = r.member_id.to_string();
    let params = JoinParams {
        group_id: r.group_id.0.to_string(),
        member_id: member_id.clone(),
        group_instance_id: r.group_instance_id.as_ref().map(|s| s.to_string()),
        client_id: req
            .header
            .client_id
            .as_ref()
            .map(|s| s.to_string())
            .unwrap_or_default(),
        client_host: req.client_host.to_string(),
        // v0 has no rebalance timeout: the session timeout serves as both.
        rebalance_timeout_ms: if req.api_version == 0 {
            r.session_timeout_ms
        } else {
            r.rebalance_timeout_ms
        },
        session_timeout_ms: r.session_timeout_ms,
        protocol_type: r.protocol_type.to_string(),
        protocols: r
            .protocols
            .iter()
            .map(|p| (p.name.to_string(), p.metadata.clone()))
            .collect(),
        require_known_member_id: req.api_version >= KNOWN_MEMBER_ID_VERSION,
        supports_skip_assignment: req.api_version >= SKIP_ASSIGNMENT_VERSION,
    };
    let rx = ctx.with_coordinator(|c, log, now| c.join_group(log, params, now))?;
    // A JoinGroup superseded by a newer one from the same member: rejoin.
    let mut result = rx
        .await
        .unwrap_or_else(|_| JoinResult::error(&member_id, errors::REBALANCE_IN_PROGRESS));
    // A static member's rejoin is answered once the group's record is replicated.
    if result.error.is_none() {
        let e = super::group_stored(ctx, result.stored).await;
        if !e.is_none() {
            result = JoinResult::error(&result.member_id, e);
        }
    }
    let v = req.api_version;
    let (protocol_type, protocol_name) = if v >= PROTOCOL_IN_RESPONSE_VERSION {
        (result.protocol_type, result.protocol_name)
    } else {
        (None, Some(result.protocol_name.unwrap_or_default()))
    };
    let members = result
        .members
        .into_iter()
        .map(|(id, instance, metadata)| {
            JoinGroupResponseMember::default()
                .with_member_id(StrBytes::from_string(id))
                .with_group_instance_id(instance.map(StrBytes::from_string))
                .with_metadata(metadata)
        })
        .collect();
    let response = JoinGroupResponse::default()
        .with_error_code(result.error.code())
        .with_generation_id(result.generation_id)
        .with_protocol_type(protocol_type.map(StrBytes::from_string))
        .with_protocol_name(protocol_name.map(StrBytes::from_string))
        .with_leader(StrBytes::from_string(result.leader_id))
        .with_skip_assignment(result.skip_assignment)
        .with_member_id(StrBytes::from_string(result.member_id))
        .with_members(members);
    respond(req, &response)
}
