//! DeleteAcls (API 31) as Kafka's AclApis and AclAuthorizer answer it:
//! ALTER on the cluster, then per filter the bindings it deleted (each
//! credited to the first filter that matched it), written to the store
//! (`admin::acls`) before the answer. Without an authorizer:
//! SECURITY_DISABLED for each filter.

use std::rc::Rc;

use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::{DeleteAclsRequest, DeleteAclsResponse};
use kafka_protocol::protocol::StrBytes;

use super::auth_helper::not_authorized_message;
use super::describe_acls::WireFilter;
use super::{respond, HandlerResult, KafkaApis};
use crate::protocol::{decode_body, errors, Request};
use crate::security::authorizer::apis::{normalize_delete_request, ALTER_NO_AUTHORIZER};
use crate::security::authorizer::{AclBinding, AclBindingFilter, AclOperation};

fn failed(code: i16, message: Option<String>) -> DeleteAclsFilterResult {
    DeleteAclsFilterResult::default()
        .with_error_code(code)
        .with_error_message(message.map(StrBytes::from_string))
}

fn deleted(b: AclBinding) -> DeleteAclsMatchingAcl {
    DeleteAclsMatchingAcl::default()
        .with_error_message(None)
        .with_resource_type(b.pattern.resource_type.code())
        .with_resource_name(StrBytes::from_string(b.pattern.name))
        .with_pattern_type(b.pattern.pattern_type.code())
        .with_principal(StrBytes::from_string(b.entry.principal))
        .with_host(StrBytes::from_string(b.entry.host))
        .with_operation(b.entry.operation.code())
        .with_permission_type(b.entry.permission_type.code())
}

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let request: DeleteAclsRequest = decode_body(req)?;
    let mut filters: Vec<AclBindingFilter> = request
        .filters
        .iter()
        .map(|f| {
            WireFilter {
                resource_type: f.resource_type_filter,
                resource_name: f.resource_name_filter.as_ref(),
                pattern_type: f.pattern_type_filter,
                principal: f.principal_filter.as_ref(),
                host: f.host_filter.as_ref(),
                operation: f.operation,
                permission_type: f.permission_type,
            }
            .to_filter()
        })
        .collect();
    // Kafka fails these while parsing the request, closing the connection.
    normalize_delete_request(req.api_version, &mut filters)?;
    let every = |code: i16, message: Option<String>| -> Vec<DeleteAclsFilterResult> {
        (0..filters.len())
            .map(|_| failed(code, message.clone()))
            .collect()
    };
    let results = if !ctx.authorize_cluster(req, AclOperation::Alter) {
        every(
            errors::CLUSTER_AUTHORIZATION_FAILED.code(),
            Some(not_authorized_message(req)),
        )
    } else if let Some(authorizer) = &ctx.authorizer {
        match crate::admin::acls::delete(&ctx.admin, authorizer, filters.clone()).await {
            Ok(plan) => plan
                .filter_results
                .into_iter()
                .map(|bindings| {
                    // Kafka answers success with no message (null), here
                    // and per binding.
                    DeleteAclsFilterResult::default()
                        .with_error_message(None)
                        .with_matching_acls(bindings.into_iter().map(deleted).collect())
                })
                .collect(),
            Err(e) => {
                log::error!("DeleteAcls: {}", e.message);
                every(errors::UNKNOWN_SERVER_ERROR.code(), None)
            }
        }
    } else {
        every(
            errors::SECURITY_DISABLED.code(),
            Some(ALTER_NO_AUTHORIZER.to_string()),
        )
    };
    respond(
        req,
        &DeleteAclsResponse::default().with_filter_results(results),
    )
}
