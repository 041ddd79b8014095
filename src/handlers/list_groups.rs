//! ListGroups (API 16, v0-5): v4 filters by state, v5 by type (all groups
//! here are "classic").

use std::rc::Rc;

use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};
use kafka_protocol::protocol::StrBytes;

use super::{respond, HandlerResult};
use crate::handlers::KafkaApis;
use crate::protocol::{decode_body, Request};
use crate::security::authorizer::{AclOperation, AuditLog, ResourceType, CLUSTER_NAME};

const CLASSIC_GROUP_TYPE: &str = "classic";

pub fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let r: ListGroupsRequest = decode_body(req)?;
    let states: Vec<String> = r.states_filter.iter().map(|s| s.to_string()).collect();
    let type_ok = r.types_filter.is_empty()
        || r.types_filter
            .iter()
            .any(|t| t.eq_ignore_ascii_case(CLASSIC_GROUP_TYPE));
    let (error, groups) = ctx.with_coordinator(|c, _, _| c.list_groups(&states))?;
    let mut groups = if type_ok { groups } else { Vec::new() };
    // DESCRIBE on the cluster lists every group; otherwise only those the
    // principal may describe, the rest silently left out.
    let all = ctx.authorize_logged(
        req,
        AclOperation::Describe,
        ResourceType::Cluster,
        CLUSTER_NAME,
        AuditLog::ALLOWED_ONLY,
    );
    if !all {
        groups.retain(|(id, ..)| {
            ctx.authorize_logged(
                req,
                AclOperation::Describe,
                ResourceType::Group,
                id,
                AuditLog::ALLOWED_ONLY,
            )
        });
    }
    let listed = groups
        .into_iter()
        .map(|(id, protocol_type, state)| {
            ListedGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(id)))
                .with_protocol_type(StrBytes::from_string(protocol_type))
                .with_group_state(StrBytes::from_static_str(state))
                .with_group_type(StrBytes::from_static_str(CLASSIC_GROUP_TYPE))
        })
        .collect();
    respond(
        req,
        &ListGroupsResponse::default()
            .with_error_code(error.code())
            .with_groups(listed),
    )
}
