//! DescribeGroups (API 15, v0-5). An unknown group is described as Dead
//! with no error (Kafka 3.9's classic coordinator); members carry metadata
//! and assignment only while the group is Stable.

use std::rc::Rc;

use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};
use kafka_protocol::protocol::StrBytes;

use super::{respond, HandlerResult};
use crate::handlers::KafkaApis;
use crate::protocol::{decode_body, errors, Request};
use crate::security::authorizer::{AclOperation, ResourceType};

const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;

pub fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let r: DescribeGroupsRequest = decode_body(req)?;
    // Refused groups come first, as Kafka lists them.
    let mut refused = Vec::new();
    let mut groups = Vec::with_capacity(r.groups.len());
    for gid in &r.groups {
        if !ctx.authorize(req, AclOperation::Describe, ResourceType::Group, &gid.0) {
            refused.push(
                DescribedGroup::default()
                    .with_error_code(errors::GROUP_AUTHORIZATION_FAILED.code())
                    .with_group_id(gid.clone())
                    .with_group_state(StrBytes::default())
                    .with_protocol_type(StrBytes::default())
                    .with_protocol_data(StrBytes::default())
                    .with_authorized_operations(OPERATIONS_NOT_REQUESTED),
            );
            continue;
        }
        let (error, d) = ctx.with_coordinator(|c, _, _| c.describe_group(&gid.0))?;
        let operations = if r.include_authorized_operations && error.is_none() {
            ctx.authorized_operations(req, ResourceType::Group, &gid.0)
        } else {
            OPERATIONS_NOT_REQUESTED
        };
        let members = d
            .members
            .into_iter()
            .map(|(id, instance, client_id, host, metadata, assignment)| {
                DescribedGroupMember::default()
                    .with_member_id(StrBytes::from_string(id))
                    .with_group_instance_id(instance.map(StrBytes::from_string))
                    .with_client_id(StrBytes::from_string(client_id))
                    .with_client_host(StrBytes::from_string(host))
                    .with_member_metadata(metadata)
                    .with_member_assignment(assignment)
            })
            .collect();
        groups.push(
            DescribedGroup::default()
                .with_error_code(error.code())
                .with_group_id(gid.clone())
                .with_group_state(StrBytes::from_static_str(d.state))
                .with_protocol_type(StrBytes::from_string(d.protocol_type))
                .with_protocol_data(StrBytes::from_string(d.protocol))
                .with_members(members)
                .with_authorized_operations(operations),
        );
    }
    refused.extend(groups);
    respond(req, &DescribeGroupsResponse::default().with_groups(refused))
}
