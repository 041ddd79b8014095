//! DescribeTransactions (API 65, v0), run by the transaction coordinator.
//! Needs DESCRIBE on each transactional id; the topics the principal may
//! not describe are left out of a transaction's partitions.

use std::rc::Rc;

use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::{respond, txn_coordinator, HandlerResult};
use crate::handlers::KafkaApis;
use crate::protocol::{decode_body, errors, Request};
use crate::security::authorizer::{AclOperation, ResourceType};

pub fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let r: DescribeTransactionsRequest = decode_body(req)?;
    let coordinator = txn_coordinator(ctx)?;
    let states = r
        .transactional_ids
        .iter()
        .map(|id| {
            let out = TransactionState::default().with_transactional_id(id.clone());
            if !ctx.authorize(
                req,
                AclOperation::Describe,
                ResourceType::TransactionalId,
                &id.0,
            ) {
                return out.with_error_code(errors::TRANSACTIONAL_ID_AUTHORIZATION_FAILED.code());
            }
            match coordinator.describe_transaction(&id.0) {
                Err(e) => out.with_error_code(e.code()),
                Ok(m) => {
                    let mut topics: Vec<TopicData> = Vec::new();
                    for tp in &m.topic_partitions {
                        match topics.last_mut() {
                            Some(t) if t.topic.0.as_str() == tp.topic => {
                                t.partitions.push(tp.partition)
                            }
                            _ => topics.push(
                                TopicData::default()
                                    .with_topic(TopicName(StrBytes::from_string(tp.topic.clone())))
                                    .with_partitions(vec![tp.partition]),
                            ),
                        }
                    }
                    // One check per topic entry, as Kafka's iterator.
                    topics.retain(|t| {
                        ctx.authorize(req, AclOperation::Describe, ResourceType::Topic, &t.topic.0)
                    });
                    out.with_error_code(errors::NONE.code())
                        .with_transaction_state(StrBytes::from_static_str(m.state.name()))
                        .with_transaction_timeout_ms(m.txn_timeout_ms)
                        .with_transaction_start_time_ms(m.txn_start_timestamp_ms)
                        .with_producer_id(ProducerId(m.producer_id))
                        .with_producer_epoch(m.producer_epoch)
                        .with_topics(topics)
                }
            }
        })
        .collect();
    respond(
        req,
        &DescribeTransactionsResponse::default().with_transaction_states(states),
    )
}
