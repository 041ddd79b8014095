//! DeleteGroups (API 42, v0-2): only Empty groups can be deleted; the rest
//! get NON_EMPTY_GROUP, unknown ones GROUP_ID_NOT_FOUND.

use std::rc::Rc;

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};

use super::{respond, HandlerResult};
use crate::handlers::KafkaApis;
use crate::protocol::{decode_body, Request};

pub fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let r: DeleteGroupsRequest = decode_body(req)?;
    let ids: Vec<String> = r.groups_names.iter().map(|g| g.0.to_string()).collect();
    let errors = ctx.with_coordinator(|c, log, now| c.delete_groups(log, &ids, now))?;
    let results = r
        .groups_names
        .iter()
        .zip(errors)
        .map(|(g, e)| {
            DeletableGroupResult::default()
                .with_group_id(g.clone())
                .with_error_code(e.code())
        })
        .collect();
    respond(req, &DeleteGroupsResponse::default().with_results(results))
}
