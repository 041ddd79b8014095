//! DescribeClientQuotas (API 48, v0-1), on the controller shard: the stored
//! user, client-id and ip entities matching the filter, with their quota
//! values (`admin::client_quotas`). A bad filter fails the whole request.
//! Needs DESCRIBE_CONFIGS on the cluster.

use std::rc::Rc;

use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{DescribeClientQuotasRequest, DescribeClientQuotasResponse};
use kafka_protocol::protocol::StrBytes;

use super::{respond, HandlerResult};
use crate::admin::client_quotas;
use crate::handlers::KafkaApis;
use crate::protocol::{decode_body, errors, Request};
use crate::quota::FilterComponent;
use crate::security::authorizer::AclOperation;

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let request: DescribeClientQuotasRequest = decode_body(req)?;
    if !ctx.authorize_cluster(req, AclOperation::DescribeConfigs) {
        // getErrorResponse: ApiError drops the default message; no entries.
        let denied = DescribeClientQuotasResponse::default()
            .with_error_code(errors::CLUSTER_AUTHORIZATION_FAILED.code())
            .with_error_message(None)
            .with_entries(None);
        return respond(req, &denied);
    }
    let components: Vec<FilterComponent> = request
        .components
        .iter()
        .map(|c| FilterComponent {
            entity_type: c.entity_type.to_string(),
            match_type: c.match_type,
            name: c._match.as_ref().map(|m| m.to_string()),
        })
        .collect();
    let response = match client_quotas::describe(&ctx.admin, &components, request.strict).await {
        // Kafka answers a success with an empty message, not a null one.
        Ok(entries) => DescribeClientQuotasResponse::default()
            .with_error_code(errors::NONE.code())
            .with_error_message(Some(StrBytes::from_static_str("")))
            .with_entries(Some(entries.into_iter().map(entry).collect())),
        Err(e) => DescribeClientQuotasResponse::default()
            .with_error_code(e.code)
            .with_error_message(e.message.map(StrBytes::from_string))
            .with_entries(None),
    };
    respond(req, &response)
}

/// Where a key falls in a java.util.HashMap of the default 16 buckets.
/// Kafka's broker sends an entity's values in that order, and clients that
/// collect them into a small HashMap show colliding keys in the order sent,
/// so kafka-configs prints the same line for both brokers.
fn java_hash_map_bucket(key: &str) -> u32 {
    let h = crate::util::java_string_hash(key) as u32;
    (h ^ (h >> 16)) & 15
}

fn entry((entity, mut values): crate::quota::DescribedEntry) -> EntryData {
    values.sort_by_key(|(key, _)| java_hash_map_bucket(key));
    EntryData::default()
        .with_entity(
            entity
                .components()
                .into_iter()
                .map(|(kind, name)| {
                    EntityData::default()
                        .with_entity_type(StrBytes::from_static_str(kind))
                        .with_entity_name(name.map(|n| StrBytes::from_string(n.to_string())))
                })
                .collect(),
        )
        .with_values(
            values
                .into_iter()
                .map(|(key, value)| {
                    ValueData::default()
                        .with_key(StrBytes::from_string(key))
                        .with_value(value)
                })
                .collect(),
        )
}
