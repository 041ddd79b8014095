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
            Plan::Create => {
                let r = ctx
                    .admin
                    .create_partitions(
                        t.name.0.as_str(),
                        t.count,
                        assignment(t),
                        request.validate_only,
                    )
                    .await;
                match r {
                    // Done, but Kafka does not wait for it without a positive timeout.
                    Ok(()) if !request.validate_only && request.timeout_ms <= 0 => {
                        (errors::REQUEST_TIMED_OUT, None)
                    }
                    Ok(()) => (errors::NONE, None),
                    Err(AdminError { code, message }) => (code, Some(message)),
                }
            }
        };
        results.push(result(t, code, message));
    }
    respond(
        req,
        &CreatePartitionsResponse::default().with_results(results),
    )
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
