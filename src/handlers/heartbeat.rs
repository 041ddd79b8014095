//! Heartbeat (API 12, v0-4), run by the group coordinator.

use std::rc::Rc;

use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use super::{respond, HandlerResult};
use crate::coordinator::runtime::with_coordinator;
use crate::protocol::{decode_body, Request};
use crate::shard_context::ShardContext;

pub fn handle(ctx: &Rc<ShardContext>, req: &Request) -> HandlerResult {
    let r: HeartbeatRequest = decode_body(req)?;
    let error = with_coordinator(ctx, |c, log, now| {
        c.heartbeat(
            log,
            &r.group_id.0,
            r.generation_id,
            &r.member_id,
            r.group_instance_id.as_deref(),
            now,
        )
    })?;
    respond(req, &HeartbeatResponse::default().with_error_code(error))
}
