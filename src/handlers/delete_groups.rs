//! DeleteGroups (API 42, v0-2): only Empty groups can be deleted; the rest
//! get NON_EMPTY_GROUP, unknown ones GROUP_ID_NOT_FOUND.

use std::rc::Rc;

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse, GroupId};

use super::{respond, HandlerResult};
use crate::handlers::KafkaApis;
use crate::protocol::{decode_body, errors, Request};
use crate::security::authorizer::{AclOperation, ResourceType};

pub fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let r: DeleteGroupsRequest = decode_body(req)?;
    // DELETE on each group; the refused ones are answered after the rest.
    let (allowed, refused): (Vec<&GroupId>, Vec<&GroupId>) = r
        .groups_names
        .iter()
        .partition(|g| ctx.authorize(req, AclOperation::Delete, ResourceType::Group, &g.0));
    let ids: Vec<String> = allowed.iter().map(|g| g.0.to_string()).collect();
    let results_of_allowed = ctx.with_coordinator(|c, log, now| c.delete_groups(log, &ids, now))?;
    let refused_errors = refused.iter().map(|_| errors::GROUP_AUTHORIZATION_FAILED);
    let results = allowed
        .iter()
        .chain(&refused)
        .zip(results_of_allowed.into_iter().chain(refused_errors))
        .map(|(g, e)| {
            DeletableGroupResult::default()
                .with_group_id((*g).clone())
                .with_error_code(e.code())
        })
        .collect();
    respond(req, &DeleteGroupsResponse::default().with_results(results))
}
