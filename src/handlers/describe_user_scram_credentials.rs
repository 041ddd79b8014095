//! DescribeUserScramCredentials (API 50, v0), on the controller shard: the
//! SCRAM mechanisms and iteration counts stored for users
//! (`admin::scram_credentials`); what `kafka-configs --describe` asks for
//! users beside their quotas.

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

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let request: DescribeUserScramCredentialsRequest = decode_body(req)?;
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
