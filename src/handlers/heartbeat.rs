//! Heartbeat (API 12, v0-4), run by the group coordinator.

use std::rc::Rc;

use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use super::{respond, HandlerResult};
use crate::handlers::KafkaApis;
use crate::protocol::{decode_body, Request};

pub fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let r: HeartbeatRequest = decode_body(req)?;
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
