//! DescribeAcls (API 29) as Kafka's AclApis answers it: DESCRIBE on the
//! cluster, then the cached bindings the filter matches, grouped per
//! resource pattern. Without an authorizer: SECURITY_DISABLED.

use std::rc::Rc;

use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{DescribeAclsRequest, DescribeAclsResponse};
use kafka_protocol::protocol::StrBytes;

use super::auth_helper::not_authorized_message;
use super::{respond, HandlerResult, KafkaApis};
use crate::protocol::{decode_body, errors, Request};
use crate::security::authorizer::apis::{
    describe_acls, group_by_resource, normalize_describe_request, DESCRIBE_NO_AUTHORIZER,
};
use crate::security::authorizer::{
    AccessControlEntryFilter, AclBindingFilter, AclOperation, AclPermissionType, PatternType,
    ResourcePatternFilter, ResourceType,
};

/// The wire fields DescribeAcls and DeleteAcls filters share.
pub struct WireFilter<'a> {
    pub resource_type: i8,
    pub resource_name: Option<&'a StrBytes>,
    pub pattern_type: i8,
    pub principal: Option<&'a StrBytes>,
    pub host: Option<&'a StrBytes>,
    pub operation: i8,
    pub permission_type: i8,
}

impl WireFilter<'_> {
    pub fn to_filter(&self) -> AclBindingFilter {
        AclBindingFilter::new(
            ResourcePatternFilter::new(
                ResourceType::from_code(self.resource_type),
                self.resource_name.map(|s| s.as_str()),
                PatternType::from_code(self.pattern_type),
            ),
            AccessControlEntryFilter::new(
                self.principal.map(|s| s.as_str()),
                self.host.map(|s| s.as_str()),
                AclOperation::from_code(self.operation),
                AclPermissionType::from_code(self.permission_type),
            ),
        )
    }
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let request: DescribeAclsRequest = decode_body(req)?;
    let mut filter = WireFilter {
        resource_type: request.resource_type_filter,
        resource_name: request.resource_name_filter.as_ref(),
        pattern_type: request.pattern_type_filter,
        principal: request.principal_filter.as_ref(),
        host: request.host_filter.as_ref(),
        operation: request.operation,
        permission_type: request.permission_type,
    }
    .to_filter();
    // Kafka fails these while parsing the request, closing the connection.
    normalize_describe_request(req.api_version, &mut filter)?;
    let response = if !ctx.authorize_cluster(req, AclOperation::Describe) {
        DescribeAclsResponse::default()
            .with_error_code(errors::CLUSTER_AUTHORIZATION_FAILED.code())
            .with_error_message(Some(StrBytes::from_string(not_authorized_message(req))))
    } else if let Some(authorizer) = &ctx.authorizer {
        let bindings = describe_acls(&authorizer.cache(), &filter);
        let resources = group_by_resource(&bindings)
            .into_iter()
            .map(|(pattern, entries)| {
                DescribeAclsResource::default()
                    .with_resource_type(pattern.resource_type.code())
                    .with_resource_name(StrBytes::from_string(pattern.name))
                    .with_pattern_type(pattern.pattern_type.code())
                    .with_acls(
                        entries
                            .iter()
                            .map(|e| {
                                AclDescription::default()
                                    .with_principal(text(&e.principal))
                                    .with_host(text(&e.host))
                                    .with_operation(e.operation.code())
                                    .with_permission_type(e.permission_type.code())
                            })
                            .collect(),
                    )
            })
            .collect();
        // Kafka's success leaves the field at its schema default, "".
        DescribeAclsResponse::default()
            .with_error_message(Some(StrBytes::from_static_str("")))
            .with_resources(resources)
    } else {
        DescribeAclsResponse::default()
            .with_error_code(errors::SECURITY_DISABLED.code())
            .with_error_message(Some(StrBytes::from_static_str(DESCRIBE_NO_AUTHORIZER)))
    };
    respond(req, &response)
}
