//! InitProducerId (API 22, v0-5), on the controller shard. Without a
//! transactional id, as in Kafka 3.9's TransactionCoordinator, the request
//! always gets a fresh producer id with epoch 0, even when it carries an
//! existing id/epoch pair (the KIP-360 bump fields of v3+); the id comes
//! from the controller's producer-id blocks. With one, the transaction
//! coordinator answers (a new id, or the id's epoch bumped, fencing the
//! older producer and aborting its open transaction).

use std::rc::Rc;

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::{respond, txn_coordinator, HandlerResult};
use crate::coordinator::transaction::transaction_coordinator::ProducerIdAndEpoch;
use crate::handlers::KafkaApis;
use crate::protocol::errors::ErrorCode;
use crate::protocol::{decode_body, errors, Request};
use crate::router::{ShardRequest, ShardResponse, CONTROLLER_SHARD};
use crate::security::authorizer::{AclOperation, AuditLog, ResourceType, CLUSTER_NAME};

/// Before v4, PRODUCER_FENCED is sent as INVALID_PRODUCER_EPOCH.
const PRODUCER_FENCED_VERSION: i16 = 4;

/// RecordBatch.NO_PRODUCER_ID and NO_PRODUCER_EPOCH.
const NO_PRODUCER_ID: i64 = -1;
const NO_PRODUCER_EPOCH: i16 = -1;

/// What a request asks for, checked in Kafka's order.
#[derive(Debug, PartialEq)]
enum Decision {
    Allocate,
    Transactional,
    Fail(ErrorCode),
}

fn decide(request: &InitProducerIdRequest) -> Decision {
    // Both or neither of the id and epoch must be set (KafkaApis).
    let has_id = request.producer_id.0 != NO_PRODUCER_ID;
    let has_epoch = request.producer_epoch != NO_PRODUCER_EPOCH;
    if has_id != has_epoch {
        return Decision::Fail(errors::INVALID_REQUEST);
    }
    match request.transactional_id.as_ref() {
        None => Decision::Allocate,
        Some(id) if id.0.is_empty() => Decision::Fail(errors::INVALID_REQUEST),
        Some(_) => Decision::Transactional,
    }
}

fn response(
    error_code: ErrorCode,
    producer_id: i64,
    producer_epoch: i16,
) -> InitProducerIdResponse {
    debug_assert!(error_code == errors::NONE || producer_id == NO_PRODUCER_ID);
    InitProducerIdResponse::default()
        .with_error_code(error_code.code())
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(producer_epoch)
}

/// KafkaApis' checks, before the request's own: WRITE on the
/// transactional id; an idempotent producer needs IDEMPOTENT_WRITE on the
/// cluster or WRITE on some topic.
fn refusal(ctx: &KafkaApis, req: &Request, request: &InitProducerIdRequest) -> Option<ErrorCode> {
    match &request.transactional_id {
        Some(id) => (!ctx.authorize(
            req,
            AclOperation::Write,
            ResourceType::TransactionalId,
            &id.0,
        ))
        .then_some(errors::TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
        None => {
            let idempotent =
                ctx.authorize_logged(
                    req,
                    AclOperation::IdempotentWrite,
                    ResourceType::Cluster,
                    CLUSTER_NAME,
                    AuditLog::ALLOWED_ONLY,
                ) || ctx.authorize_by_resource_type(req, AclOperation::Write, ResourceType::Topic);
            (!idempotent).then_some(errors::CLUSTER_AUTHORIZATION_FAILED)
        }
    }
}

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let request: InitProducerIdRequest = decode_body(req)?;
    if let Some(code) = refusal(ctx, req, &request) {
        return respond(req, &response(code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH));
    }
    let body = match decide(&request) {
        Decision::Fail(code) => response(code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH),
        Decision::Transactional => {
            let id = request
                .transactional_id
                .as_ref()
                .expect("decided transactional");
            let expected =
                (request.producer_id.0 != NO_PRODUCER_ID).then_some(ProducerIdAndEpoch {
                    producer_id: request.producer_id.0,
                    epoch: request.producer_epoch,
                });
            let r = txn_coordinator(ctx)?
                .handle_init_producer_id(&id.0, request.transaction_timeout_ms, expected)
                .await;
            let error = if r.error == errors::PRODUCER_FENCED
                && req.api_version < PRODUCER_FENCED_VERSION
            {
                errors::INVALID_PRODUCER_EPOCH
            } else {
                r.error
            };
            response(error, r.producer_id, r.producer_epoch)
        }
        Decision::Allocate => match ctx
            .router
            .run_on(CONTROLLER_SHARD, ShardRequest::AllocateProducerId)
            .await
        {
            Ok(ShardResponse::ProducerId(Ok(id))) => {
                debug_assert!(id >= 0);
                response(errors::NONE, id, 0)
            }
            Ok(ShardResponse::ProducerId(Err(code))) => {
                response(code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
            }
            Ok(_) => return Err("unexpected reply to AllocateProducerId".into()),
            // Retriable: the controller shard could not be reached this time.
            Err(_) => response(
                errors::COORDINATOR_NOT_AVAILABLE,
                NO_PRODUCER_ID,
                NO_PRODUCER_EPOCH,
            ),
        },
    };
    respond(req, &body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::TransactionalId;
    use kafka_protocol::protocol::StrBytes;

    fn idempotent() -> InitProducerIdRequest {
        InitProducerIdRequest::default().with_transactional_id(None)
    }

    #[test]
    fn idempotent_allocates() {
        assert_eq!(decide(&idempotent()), Decision::Allocate);
        // An existing id/epoch (KIP-360 bump) still gets a new id.
        let r = idempotent()
            .with_producer_id(ProducerId(5))
            .with_producer_epoch(3);
        assert_eq!(decide(&r), Decision::Allocate);
    }

    #[test]
    fn half_an_id_epoch_pair_is_invalid() {
        let r = idempotent().with_producer_id(ProducerId(5));
        assert_eq!(decide(&r), Decision::Fail(errors::INVALID_REQUEST));
        let r = idempotent().with_producer_epoch(0);
        assert_eq!(decide(&r), Decision::Fail(errors::INVALID_REQUEST));
    }

    #[test]
    fn transactional_ids() {
        let empty = InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str(""))));
        assert_eq!(decide(&empty), Decision::Fail(errors::INVALID_REQUEST));
        let txn = InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("t"))));
        assert_eq!(decide(&txn), Decision::Transactional);
    }

    #[test]
    fn error_response_has_no_producer() {
        let r = response(errors::INVALID_REQUEST, NO_PRODUCER_ID, NO_PRODUCER_EPOCH);
        assert_eq!((r.producer_id.0, r.producer_epoch), (-1, -1));
    }

    #[test]
    fn responses_encode_at_every_version() {
        for body in [
            response(errors::NONE, 7, 0),
            response(errors::INVALID_REQUEST, NO_PRODUCER_ID, NO_PRODUCER_EPOCH),
        ] {
            for v in 0..=5 {
                crate::protocol::encode_response(
                    kafka_protocol::messages::ApiKey::InitProducerId,
                    v,
                    1,
                    &body,
                )
                .unwrap();
            }
        }
    }
}
