//! AlterUserScramCredentials (API 51, v0), on the controller shard: what
//! `kafka-configs --alter --add-config 'SCRAM-SHA-256=[password=...]'
//! --entity-type users` sends (`admin::scram_alter`). In a cluster only the
//! active controller takes it, as Kafka's ZooKeeper-mode KafkaApis; then
//! it needs ALTER on the cluster.

use std::collections::BTreeSet;
use std::rc::Rc;

use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::{respond, HandlerResult};
use crate::admin::scram_alter::{self, ScramAlterResult, ScramDeletion, ScramUpsertion};
use crate::handlers::KafkaApis;
use crate::protocol::errors::ErrorCode;
use crate::protocol::{decode_body, errors, Request};
use crate::security::authorizer::AclOperation;

/// AlterUserScramCredentialsRequest.getErrorResponse: `error` for every
/// user named, sorted.
fn error_for_all(
    request: &AlterUserScramCredentialsRequest,
    error: ErrorCode,
    message: Option<&str>,
) -> Vec<ScramAlterResult> {
    let users: BTreeSet<String> = request
        .deletions
        .iter()
        .map(|d| d.name.to_string())
        .chain(request.upsertions.iter().map(|u| u.name.to_string()))
        .collect();
    users
        .into_iter()
        .map(|user| ScramAlterResult {
            user,
            error,
            message: message.map(str::to_string),
        })
        .collect()
}

fn not_controller(request: &AlterUserScramCredentialsRequest) -> Vec<ScramAlterResult> {
    error_for_all(
        request,
        errors::NOT_CONTROLLER,
        Some("This is not the correct controller for this cluster."),
    )
}

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let request: AlterUserScramCredentialsRequest = decode_body(req)?;
    let results = if ctx
        .cluster
        .as_ref()
        .is_some_and(|c| !c.controller.is_active())
    {
        not_controller(&request)
    } else if !ctx.authorize_cluster(req, AclOperation::Alter) {
        // ApiError drops the default message.
        error_for_all(&request, errors::CLUSTER_AUTHORIZATION_FAILED, None)
    } else {
        let upsertions: Vec<ScramUpsertion> = request
            .upsertions
            .iter()
            .map(|u| ScramUpsertion {
                user: u.name.to_string(),
                mechanism: u.mechanism,
                iterations: u.iterations,
                salt: u.salt.to_vec(),
                salted_password: u.salted_password.to_vec(),
            })
            .collect();
        let deletions: Vec<ScramDeletion> = request
            .deletions
            .iter()
            .map(|d| ScramDeletion {
                user: d.name.to_string(),
                mechanism: d.mechanism,
            })
            .collect();
        scram_alter::alter(&ctx.admin, &upsertions, &deletions).await
    };
    let results = results
        .into_iter()
        .map(|r| {
            AlterUserScramCredentialsResult::default()
                .with_user(StrBytes::from_string(r.user))
                .with_error_code(r.error.code())
                .with_error_message(r.message.map(StrBytes::from_string))
        })
        .collect();
    respond(
        req,
        &AlterUserScramCredentialsResponse::default().with_results(results),
    )
}
