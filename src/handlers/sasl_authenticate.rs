//! SaslAuthenticate (API 36) outside a SASL exchange, as Kafka's KafkaApis
//! answers it: on a listener without SASL, or after the exchange is done.

use kafka_protocol::messages::SaslAuthenticateResponse;
use kafka_protocol::protocol::StrBytes;

use super::{respond, HandlerResult};
use crate::protocol::{errors, Request};

pub fn handle(req: &Request) -> HandlerResult {
    respond(
        req,
        &SaslAuthenticateResponse::default()
            .with_error_code(errors::ILLEGAL_SASL_STATE.code())
            .with_error_message(Some(StrBytes::from_static_str(
                "SaslAuthenticate request received after successful authentication",
            ))),
    )
}
