//! SaslHandshake (API 17) outside a SASL exchange, as Kafka's KafkaApis
//! answers it: a connection to a listener without SASL cannot start one
//! (ILLEGAL_SASL_STATE). On SASL listeners the exchange itself, and
//! re-authentication, are the connection's (`server::authenticator`).

use kafka_protocol::messages::SaslHandshakeResponse;

use super::{respond, HandlerResult};
use crate::protocol::{errors, Request};

pub fn handle(req: &Request) -> HandlerResult {
    respond(
        req,
        &SaslHandshakeResponse::default().with_error_code(errors::ILLEGAL_SASL_STATE.code()),
    )
}
