//! DeleteTopics (API 20, v1-6), run on the controller shard. Topics are
//! named (v1-5) or named or identified by topic id (v6). As in Kafka 3.9's
//! ZooKeeper mode: `delete.topic.enable=false` answers INVALID_REQUEST below
//! v3 and TOPIC_DELETION_DISABLED from v3, an unknown id UNKNOWN_TOPIC_ID,
//! an unknown name UNKNOWN_TOPIC_OR_PARTITION, and an entry with both a name
//! and an id fails the whole request with INVALID_REQUEST. Deletion is
//! synchronous; a `timeout_ms` <= 0 still deletes but answers
//! REQUEST_TIMED_OUT, as Kafka does (librdkafka hides that code then).

use std::collections::HashMap;
use std::rc::Rc;

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::{respond, HandlerResult};
use crate::admin::AdminError;
use crate::handlers::KafkaApis;
use crate::protocol::errors::ErrorCode;
use crate::protocol::{decode_body, errors, Request};
use crate::security::authorizer::{AclOperation, ResourceType};

/// First version that may name topics by id.
const VERSION_WITH_TOPIC_IDS: i16 = 6;
/// First version that knows TOPIC_DELETION_DISABLED.
const VERSION_WITH_DELETION_DISABLED: i16 = 3;

/// One requested topic: its name (None when given by id) and id (nil when named).
#[derive(Clone, Debug, PartialEq)]
struct Entry {
    name: Option<String>,
    topic_id: Uuid,
}

fn entries(request: &DeleteTopicsRequest, version: i16) -> Vec<Entry> {
    if version >= VERSION_WITH_TOPIC_IDS {
        request
            .topics
            .iter()
            .map(|t| Entry {
                name: t.name.as_ref().map(|n| n.0.to_string()),
                topic_id: t.topic_id,
            })
            .collect()
    } else {
        request
            .topic_names
            .iter()
            .map(|n| Entry {
                name: Some(n.0.to_string()),
                topic_id: Uuid::nil(),
            })
            .collect()
    }
}

/// The error every entry gets without looking at it, if any: deletion off,
/// or an entry with both a name and an id (Kafka rejects the request).
fn request_error(
    entries: &[Entry],
    version: i16,
    delete_topic_enable: bool,
) -> Option<(ErrorCode, Option<String>)> {
    if !delete_topic_enable {
        let code = if version < VERSION_WITH_DELETION_DISABLED {
            errors::INVALID_REQUEST
        } else {
            errors::TOPIC_DELETION_DISABLED
        };
        return Some((code, None));
    }
    if entries
        .iter()
        .any(|e| e.name.is_some() && !e.topic_id.is_nil())
    {
        return Some((
            errors::INVALID_REQUEST,
            Some("Topic name and topic ID can not both be specified.".into()),
        ));
    }
    None
}

fn result(
    entry: &Entry,
    name: Option<&str>,
    code: ErrorCode,
    message: Option<String>,
) -> DeletableTopicResult {
    DeletableTopicResult::default()
        .with_name(name.map(|n| TopicName(StrBytes::from_string(n.to_string()))))
        .with_topic_id(entry.topic_id)
        .with_error_code(code.code())
        .with_error_message(message.map(StrBytes::from_string))
}

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let request: DeleteTopicsRequest = decode_body(req)?;
    let entries = entries(&request, req.api_version);
    let mut responses = Vec::with_capacity(entries.len());
    if let Some((code, message)) =
        request_error(&entries, req.api_version, ctx.config.delete_topic_enable)
    {
        for e in &entries {
            responses.push(result(e, e.name.as_deref(), code, message.clone()));
        }
        return respond(
            req,
            &DeleteTopicsResponse::default().with_responses(responses),
        );
    }
    // KIP-599: strict from v5, permissive before.
    let client_id = req.header.client_id.as_deref().unwrap_or("");
    let mut quota =
        ctx.quotas
            .controller_mutation_quota(&req.principal.name, client_id, req.api_version >= 5);
    // A name listed twice is deleted once; every entry shows that outcome.
    let mut done: HashMap<String, (ErrorCode, Option<String>)> = HashMap::new();
    for e in &entries {
        let image = ctx.metadata.image();
        let name = match (&e.name, e.topic_id.is_nil()) {
            (_, false) => match image.topic_by_id(&e.topic_id) {
                Some(info) => info.name.clone(),
                None => {
                    responses.push(result(e, None, errors::UNKNOWN_TOPIC_ID, None));
                    continue;
                }
            },
            (Some(n), true) => n.clone(),
            (None, true) => {
                responses.push(result(e, None, errors::UNKNOWN_TOPIC_OR_PARTITION, None));
                continue;
            }
        };
        // DESCRIBE (a topic given by id keeps its name from a principal
        // that may not describe it), then DELETE, before existence.
        let by_id = !e.topic_id.is_nil();
        if by_id && !ctx.authorize(req, AclOperation::Describe, ResourceType::Topic, &name) {
            responses.push(result(e, None, errors::TOPIC_AUTHORIZATION_FAILED, None));
            continue;
        }
        if !ctx.authorize(req, AclOperation::Delete, ResourceType::Topic, &name) {
            responses.push(result(
                e,
                Some(&name),
                errors::TOPIC_AUTHORIZATION_FAILED,
                None,
            ));
            continue;
        }
        if let Some((code, message)) = done.get(&name) {
            responses.push(result(e, Some(&name), *code, message.clone()));
            continue;
        }
        let now_ms = crate::util::monotonic_ms();
        let outcome = if image.topic(&name).is_none() {
            (errors::UNKNOWN_TOPIC_OR_PARTITION, None)
        } else if quota.is_exceeded(now_ms) {
            (errors::THROTTLING_QUOTA_EXCEEDED, None)
        } else {
            let partitions = image.topic(&name).map_or(0, |t| t.partitions.len());
            match ctx.admin.delete_topic(&name).await {
                Ok(_) => {
                    quota.record(partitions, now_ms);
                    remove_committed_offsets(ctx, &name);
                    // Deleted, but Kafka does not wait for it without a positive timeout.
                    if request.timeout_ms <= 0 {
                        (errors::REQUEST_TIMED_OUT, None)
                    } else {
                        (errors::NONE, None)
                    }
                }
                Err(AdminError { code, message }) => (code, Some(message)),
            }
        };
        responses.push(result(e, Some(&name), outcome.0, outcome.1.clone()));
        done.insert(name, outcome);
    }
    debug_assert_eq!(responses.len(), entries.len());
    let throttle_ms = quota.throttle_ms();
    let response = DeleteTopicsResponse::default()
        .with_responses(responses)
        .with_throttle_time_ms(i32::try_from(throttle_ms).unwrap_or(i32::MAX));
    let mut response = respond(req, &response)?;
    if let Some(r) = response.as_mut() {
        r.throttle_ms = throttle_ms;
    }
    Ok(response)
}

/// Committed offsets of a deleted topic go too, as in Kafka. In a cluster
/// every broker does it when UpdateMetadata marks the topic deleted.
fn remove_committed_offsets(ctx: &KafkaApis, topic: &str) {
    if ctx.cluster.is_some() {
        return;
    }
    if let Err(e) = ctx.with_coordinator(|c, log, now| c.on_topic_deleted(log, topic, now)) {
        log::warn!("removing committed offsets of deleted topic {topic}: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::delete_topics_request::DeleteTopicState;

    fn name(n: &str) -> TopicName {
        TopicName(StrBytes::from_string(n.into()))
    }

    #[test]
    fn old_versions_use_topic_names() {
        let r = DeleteTopicsRequest::default().with_topic_names(vec![name("a"), name("b")]);
        let e = entries(&r, 5);
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].name.as_deref(), Some("a"));
        assert!(e[1].topic_id.is_nil());
    }

    #[test]
    fn v6_uses_topic_states() {
        let id = Uuid::from_u128(7);
        let r = DeleteTopicsRequest::default().with_topics(vec![
            DeleteTopicState::default()
                .with_name(None)
                .with_topic_id(id),
            DeleteTopicState::default().with_name(Some(name("x"))),
        ]);
        let e = entries(&r, 6);
        assert_eq!(
            e[0],
            Entry {
                name: None,
                topic_id: id
            }
        );
        assert_eq!(e[1].name.as_deref(), Some("x"));
    }

    #[test]
    fn deletion_disabled_depends_on_version() {
        let e = vec![Entry {
            name: Some("a".into()),
            topic_id: Uuid::nil(),
        }];
        assert_eq!(
            request_error(&e, 2, false),
            Some((errors::INVALID_REQUEST, None))
        );
        assert_eq!(
            request_error(&e, 3, false),
            Some((errors::TOPIC_DELETION_DISABLED, None))
        );
        assert_eq!(request_error(&e, 6, true), None);
    }

    #[test]
    fn name_and_id_together_are_invalid() {
        let e = vec![Entry {
            name: Some("a".into()),
            topic_id: Uuid::from_u128(1),
        }];
        assert_eq!(
            request_error(&e, 6, true).map(|r| r.0),
            Some(errors::INVALID_REQUEST)
        );
    }

    #[test]
    fn results_encode_at_every_version() {
        let named = Entry {
            name: Some("a".into()),
            topic_id: Uuid::nil(),
        };
        let body = DeleteTopicsResponse::default().with_responses(vec![result(
            &named,
            Some("a"),
            errors::NONE,
            Some("m".into()),
        )]);
        for v in 1..=6 {
            crate::protocol::encode_response(
                kafka_protocol::messages::ApiKey::DeleteTopics,
                v,
                1,
                &body,
            )
            .unwrap();
        }
        let by_id = Entry {
            name: None,
            topic_id: Uuid::from_u128(9),
        };
        let body = DeleteTopicsResponse::default().with_responses(vec![result(
            &by_id,
            None,
            errors::UNKNOWN_TOPIC_ID,
            None,
        )]);
        crate::protocol::encode_response(
            kafka_protocol::messages::ApiKey::DeleteTopics,
            6,
            1,
            &body,
        )
        .unwrap();
    }
}
