//! DescribeUserScramCredentials (API 50, v0), on the controller shard: the
//! SCRAM mechanisms and iteration counts stored for users
//! (`admin::scram_credentials`); what `kafka-configs --describe` asks for
//! users beside their quotas. Needs DESCRIBE on the cluster.

use std::rc::Rc;

use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::{respond, HandlerResult};
use crate::admin::{client_quotas, scram_credentials};
use crate::handlers::KafkaApis;
use crate::protocol::{decode_body, errors, Request};
use crate::security::authorizer::AclOperation;

/// getErrorResponse for a denied request: the error at the top and once
/// per user asked about, the user left unset ("") and no message. (Kafka
/// trips over a null user list there; kshard answers the top error.)
fn unauthorized(
    request: &DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let code = errors::CLUSTER_AUTHORIZATION_FAILED.code();
    let asked = request.users.as_ref().map_or(0, Vec::len);
    DescribeUserScramCredentialsResponse::default()
        .with_error_code(code)
        .with_error_message(None)
        .with_results(
            (0..asked)
                .map(|_| {
                    DescribeUserScramCredentialsResult::default()
                        .with_error_code(code)
                        .with_error_message(None)
                })
                .collect(),
        )
}

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let request: DescribeUserScramCredentialsRequest = decode_body(req)?;
    if !ctx.authorize_cluster(req, AclOperation::Describe) {
        return respond(req, &unauthorized(&request));
    }
    let users: Option<Vec<String>> = request
        .users
        .as_ref()
        .map(|u| u.iter().map(|n| n.name.to_string()).collect());
    let response = match client_quotas::read_all(&ctx.admin).await {
        Err(e) => DescribeUserScramCredentialsResponse::default()
            .with_error_code(e.code.code())
            .with_error_message(Some(StrBytes::from_string(e.message))),
        Ok(stored) => {
            let results = scram_credentials::describe(users.as_deref(), &stored)
                .into_iter()
                .map(|d| {
                    let (code, message) = match d.error {
                        None => (errors::NONE.code(), None),
                        Some((code, _)) if code == errors::UNKNOWN_SERVER_ERROR => {
                            (code.code(), None)
                        }
                        Some((code, m)) => (code.code(), Some(StrBytes::from_string(m))),
                    };
                    DescribeUserScramCredentialsResult::default()
                        .with_user(StrBytes::from_string(d.user))
                        .with_error_code(code)
                        .with_error_message(message)
                        .with_credential_infos(
                            d.credentials
                                .into_iter()
                                .map(|(mechanism, iterations)| {
                                    CredentialInfo::default()
                                        .with_mechanism(mechanism)
                                        .with_iterations(iterations)
                                })
                                .collect(),
                        )
                })
                .collect();
            DescribeUserScramCredentialsResponse::default().with_results(results)
        }
    };
    respond(req, &response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;

    #[test]
    fn unauthorized_answers_each_user() {
        let request = DescribeUserScramCredentialsRequest::default().with_users(Some(vec![
            UserName::default().with_name(StrBytes::from_static_str("alice")),
            UserName::default().with_name(StrBytes::from_static_str("bob")),
        ]));
        let r = unauthorized(&request);
        assert_eq!(r.error_code, errors::CLUSTER_AUTHORIZATION_FAILED);
        assert!(r.error_message.is_none());
        assert_eq!(r.results.len(), 2);
        assert!(r.results.iter().all(|u| u.user.is_empty()
            && u.error_code == errors::CLUSTER_AUTHORIZATION_FAILED
            && u.error_message.is_none()));
        let all = DescribeUserScramCredentialsRequest::default().with_users(None);
        assert!(unauthorized(&all).results.is_empty());
    }
}
