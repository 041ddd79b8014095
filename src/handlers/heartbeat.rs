//! Heartbeat (API 12, v0-4), run by the group coordinator.

use std::rc::Rc;

use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use super::{respond, HandlerResult};
use crate::handlers::KafkaApis;
use crate::protocol::{decode_body, errors, Request};
use crate::security::authorizer::{AclOperation, ResourceType};

pub fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let r: HeartbeatRequest = decode_body(req)?;
    if !ctx.authorize(req, AclOperation::Read, ResourceType::Group, &r.group_id.0) {
        let response =
            HeartbeatResponse::default().with_error_code(errors::GROUP_AUTHORIZATION_FAILED.code());
        return respond(req, &response);
    }
    let error = ctx.with_coordinator(|c, log, now| {
        c.heartbeat(
            log,
            &r.group_id.0,
            r.generation_id,
            &r.member_id,
            r.group_instance_id.as_deref(),
            now,
        )
    })?;
    respond(
        req,
        &HeartbeatResponse::default().with_error_code(error.code()),
    )
}
