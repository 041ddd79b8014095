//! CreateAcls (API 30) as Kafka's AclApis and AclAuthorizer answer it:
//! ALTER on the cluster, then one result per creation in request order;
//! the new sets are written to the store (`admin::acls`) before the
//! answer. Without an authorizer: SECURITY_DISABLED for each.

use std::rc::Rc;

use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::{CreateAclsRequest, CreateAclsResponse};
use kafka_protocol::protocol::StrBytes;

use super::auth_helper::not_authorized_message;
use super::{respond, HandlerResult, KafkaApis};
use crate::protocol::{decode_body, errors, Request};
use crate::security::authorizer::apis::{validate_create_request, ApiError, ALTER_NO_AUTHORIZER};
use crate::security::authorizer::{
    AccessControlEntry, AclBinding, AclOperation, AclPermissionType, PatternType, ResourcePattern,
    ResourceType,
};

fn result(code: i16, message: Option<String>) -> AclCreationResult {
    AclCreationResult::default()
        .with_error_code(code)
        .with_error_message(message.map(StrBytes::from_string))
}

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let request: CreateAclsRequest = decode_body(req)?;
    // As the client sent them: the checks below refuse what Kafka's
    // constructors would, so no validation here.
    let creations: Vec<AclBinding> = request
        .creations
        .iter()
        .map(|c| AclBinding {
            pattern: ResourcePattern {
                resource_type: ResourceType::from_code(c.resource_type),
                name: c.resource_name.to_string(),
                pattern_type: PatternType::from_code(c.resource_pattern_type),
            },
            entry: AccessControlEntry {
                principal: c.principal.to_string(),
                host: c.host.to_string(),
                operation: AclOperation::from_code(c.operation),
                permission_type: AclPermissionType::from_code(c.permission_type),
            },
        })
        .collect();
    validate_create_request(req.api_version, &creations)?;
    let every = |code: i16, message: Option<String>| -> Vec<AclCreationResult> {
        (0..creations.len())
            .map(|_| result(code, message.clone()))
            .collect()
    };
    let results = if !ctx.authorize_cluster(req, AclOperation::Alter) {
        every(
            errors::CLUSTER_AUTHORIZATION_FAILED.code(),
            Some(not_authorized_message(req)),
        )
    } else if let Some(authorizer) = &ctx.authorizer {
        match crate::admin::acls::create(&ctx.admin, authorizer, creations.clone()).await {
            Ok(plan) => plan
                .results
                .into_iter()
                // Success leaves the message at its schema default, "".
                .map(|ApiError { code, message }| match code {
                    0 => result(code, Some(String::new())),
                    _ => result(code, message),
                })
                .collect(),
            Err(e) => {
                log::error!("CreateAcls: {}", e.message);
                every(errors::UNKNOWN_SERVER_ERROR.code(), None)
            }
        }
    } else {
        every(
            errors::SECURITY_DISABLED.code(),
            Some(ALTER_NO_AUTHORIZER.to_string()),
        )
    };
    respond(req, &CreateAclsResponse::default().with_results(results))
}
