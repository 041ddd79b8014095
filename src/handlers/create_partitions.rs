//! CreatePartitions (API 37, v0-3), run on the controller shard. As in Kafka
//! 3.9's ZooKeeper mode, a topic named more than once gets one
//! INVALID_REQUEST result; the others go to the controller, which checks
//! the new count (INVALID_PARTITIONS unless it grows) and any manual
//! assignment. Results come back in request order. A request adding more
//! than 10,000 partitions in all fails every entry with POLICY_VIOLATION
//! before anything is allocated, as Kafka 4's controller does. A `timeout_ms` <= 0
//! still adds the partitions but answers REQUEST_TIMED_OUT, as Kafka does.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::protocol::StrBytes;

use super::{respond, HandlerResult};
use crate::admin::limits::{check_partitions_per_request, create_partitions_added};
use crate::admin::AdminError;
use crate::handlers::KafkaApis;
use crate::protocol::errors::ErrorCode;
use crate::protocol::{decode_body, errors, Request};
use crate::quota::ControllerMutationQuota;
use crate::security::authorizer::{AclOperation, ResourceType};

/// What to do with each request entry, in request order.
#[derive(Debug, PartialEq)]
enum Plan {
    /// First entry of a name given more than once.
    Duplicate,
    /// A later entry of a duplicated name: no result of its own.
    Skip,
    Create,
}

fn plan(topics: &[CreatePartitionsTopic]) -> Vec<Plan> {
    let mut count: HashMap<&str, usize> = HashMap::with_capacity(topics.len());
    for t in topics {
        *count.entry(t.name.0.as_str()).or_insert(0) += 1;
    }
    let mut reported: HashSet<&str> = HashSet::new();
    topics
        .iter()
        .map(|t| {
            let name = t.name.0.as_str();
            if count.get(name).copied().unwrap_or(0) <= 1 {
                Plan::Create
            } else if reported.insert(name) {
                Plan::Duplicate
            } else {
                Plan::Skip
            }
        })
        .collect()
}

fn assignment(t: &CreatePartitionsTopic) -> Option<Vec<Vec<i32>>> {
    t.assignments.as_ref().map(|a| {
        a.iter()
            .map(|p| p.broker_ids.iter().map(|b| b.0).collect())
            .collect()
    })
}

fn result(
    t: &CreatePartitionsTopic,
    code: ErrorCode,
    message: Option<String>,
) -> CreatePartitionsTopicResult {
    CreatePartitionsTopicResult::default()
        .with_name(t.name.clone())
        .with_error_code(code.code())
        .with_error_message(message.map(StrBytes::from_string))
}

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let request: CreatePartitionsRequest = decode_body(req)?;
    let added = create_partitions_added(&request.topics, &ctx.metadata.image());
    if let Err(AdminError { code, message }) = check_partitions_per_request(added) {
        let results = request
            .topics
            .iter()
            .map(|t| result(t, code, Some(message.clone())))
            .collect();
        let body = CreatePartitionsResponse::default().with_results(results);
        return respond(req, &body);
    }
    // KIP-599: strict from v3, permissive before.
    let client_id = req.header.client_id.as_deref().unwrap_or("");
    let mut quota =
        ctx.quotas
            .controller_mutation_quota(&req.principal.name, client_id, req.api_version >= 3);
    let plans = plan(&request.topics);
    debug_assert_eq!(plans.len(), request.topics.len());
    let mut results = Vec::with_capacity(request.topics.len());
    for (t, p) in request.topics.iter().zip(plans) {
        let (code, message) = match p {
            Plan::Skip => continue,
            Plan::Duplicate => (
                errors::INVALID_REQUEST,
                Some("Duplicate topic in request.".to_string()),
            ),
            Plan::Create
                if !ctx.authorize(req, AclOperation::Alter, ResourceType::Topic, &t.name.0) =>
            {
                (
                    errors::TOPIC_AUTHORIZATION_FAILED,
                    Some("The topic authorization is failed.".to_string()),
                )
            }
            Plan::Create => {
                let r = create_under_quota(ctx, t, request.validate_only, &mut quota).await;
                match r {
                    // Done, but Kafka does not wait for it without a positive timeout.
                    Ok(()) if !request.validate_only && request.timeout_ms <= 0 => {
                        (errors::REQUEST_TIMED_OUT, None)
                    }
                    Ok(()) => (errors::NONE, None),
                    // THROTTLING_QUOTA_EXCEEDED goes without a message, as in Kafka.
                    Err(AdminError { code, message }) => {
                        (code, (!message.is_empty()).then_some(message))
                    }
                }
            }
        };
        results.push(result(t, code, message));
    }
    let throttle_ms = quota.throttle_ms();
    let response = CreatePartitionsResponse::default()
        .with_results(results)
        .with_throttle_time_ms(i32::try_from(throttle_ms).unwrap_or(i32::MAX));
    let mut response = respond(req, &response)?;
    if let Some(r) = response.as_mut() {
        r.throttle_ms = throttle_ms;
    }
    Ok(response)
}

/// New partitions under the client's controller mutation quota, as Kafka's
/// ZkAdminManager: validated first, refused while a strict quota is below
/// zero, the added partitions charged once created.
async fn create_under_quota(
    ctx: &Rc<KafkaApis>,
    t: &CreatePartitionsTopic,
    validate_only: bool,
    quota: &mut ControllerMutationQuota,
) -> Result<(), AdminError> {
    let name = t.name.0.as_str();
    let now_ms = crate::util::monotonic_ms();
    if !validate_only && quota.is_exceeded(now_ms) {
        ctx.admin
            .create_partitions(name, t.count, assignment(t), true)
            .await?;
        return Err(AdminError::throttled());
    }
    let before = ctx
        .metadata
        .image()
        .topic(name)
        .map_or(0, |i| i.partitions.len());
    ctx.admin
        .create_partitions(name, t.count, assignment(t), validate_only)
        .await?;
    if !validate_only {
        quota.record((t.count.max(0) as usize).saturating_sub(before), now_ms);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::create_partitions_request::CreatePartitionsAssignment;
    use kafka_protocol::messages::{BrokerId, TopicName};

    fn topic(name: &str) -> CreatePartitionsTopic {
        CreatePartitionsTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.into())))
            .with_count(3)
    }

    #[test]
    fn duplicates_get_one_result() {
        let p = plan(&[topic("a"), topic("b"), topic("a"), topic("a")]);
        assert_eq!(
            p,
            vec![Plan::Duplicate, Plan::Create, Plan::Skip, Plan::Skip]
        );
    }

    #[test]
    fn assignments_convert() {
        assert_eq!(assignment(&topic("a").with_assignments(None)), None);
        let a = vec![
            CreatePartitionsAssignment::default().with_broker_ids(vec![BrokerId(0)]),
            CreatePartitionsAssignment::default().with_broker_ids(vec![BrokerId(1), BrokerId(0)]),
        ];
        assert_eq!(
            assignment(&topic("a").with_assignments(Some(a))),
            Some(vec![vec![0], vec![1, 0]])
        );
    }
}
