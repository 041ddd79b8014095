//! SyncGroup (API 14, v0-5), run by the group coordinator. Followers wait
//! until the leader's assignment has been written to `__consumer_offsets`.

use std::rc::Rc;

use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};
use kafka_protocol::protocol::StrBytes;

use super::{respond, HandlerResult};
use crate::coordinator::group::SyncResult;
use crate::handlers::KafkaApis;
use crate::protocol::{decode_body, errors, Request};
use crate::security::authorizer::{AclOperation, ResourceType};

/// From v5 protocol type and name travel both ways (KIP-559).
const PROTOCOL_VERSION: i16 = 5;

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let r: SyncGroupRequest = decode_body(req)?;
    let v = req.api_version;
    // From v5 a missing protocol type or name is refused before the ACL
    // check (INCONSISTENT_GROUP_PROTOCOL, by the coordinator here).
    let protocol_missing =
        v >= PROTOCOL_VERSION && (r.protocol_type.is_none() || r.protocol_name.is_none());
    if !protocol_missing
        && !ctx.authorize(req, AclOperation::Read, ResourceType::Group, &r.group_id.0)
    {
        let response =
            SyncGroupResponse::default().with_error_code(errors::GROUP_AUTHORIZATION_FAILED.code());
        return respond(req, &response);
    }
    let assignments = r
        .assignments
        .iter()
        .map(|a| (a.member_id.to_string(), a.assignment.clone()))
        .collect();
    let (pt, pn) = if v >= PROTOCOL_VERSION {
        (
            r.protocol_type.as_ref().map(|s| s.to_string()),
            r.protocol_name.as_ref().map(|s| s.to_string()),
        )
    } else {
        (None, None)
    };
    let rx = ctx.with_coordinator(|c, log, now| {
        c.sync_group(
            log,
            &r.group_id.0,
            r.generation_id,
            &r.member_id,
            r.group_instance_id.as_deref(),
            pt.as_deref(),
            pn.as_deref(),
            assignments,
            now,
        )
    })?;
    let mut result = rx
        .await
        .unwrap_or_else(|_| SyncResult::error(errors::REBALANCE_IN_PROGRESS));
    // The assignment is answered once the group's record is replicated.
    if result.error.is_none() {
        let e = super::group_stored(ctx, result.stored).await;
        if !e.is_none() {
            result = SyncResult::error(e);
        }
    }
    let response = SyncGroupResponse::default()
        .with_error_code(result.error.code())
        .with_protocol_type(result.protocol_type.map(StrBytes::from_string))
        .with_protocol_name(result.protocol_name.map(StrBytes::from_string))
        .with_assignment(result.assignment);
    respond(req, &response)
}
