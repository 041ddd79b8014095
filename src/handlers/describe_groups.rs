//! DescribeGroups (API 15, v0-5). An unknown group is described as Dead
//! with no error (Kafka 3.9's classic coordinator); members carry metadata
//! and assignment only while the group is Stable.

use std::rc::Rc;

use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};
use kafka_protocol::protocol::StrBytes;

use super::{respond, HandlerResult};
use crate::handlers::KafkaApis;
use crate::protocol::{decode_body, Request};

const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;
/// No authorizer: every group operation (READ 3, DELETE 6, DESCRIBE 8).
const GROUP_OPERATIONS: i32 = (1 << 3) | (1 << 6) | (1 << 8);

pub fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let r: DescribeGroupsRequest = decode_body(req)?;
    let operations = if r.include_authorized_operations {
        GROUP_OPERATIONS
    } else {
        OPERATIONS_NOT_REQUESTED
    };
    let mut groups = Vec::with_capacity(r.groups.len());
    for gid in &r.groups {
        let (error, d) = ctx.with_coordinator(|c, _, _| c.describe_group(&gid.0))?;
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
    respond(req, &DescribeGroupsResponse::default().with_groups(groups))
}
