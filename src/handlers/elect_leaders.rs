//! ElectLeaders (API 43, v0-2): preferred or unclean leader election. In
//! cluster mode the active controller runs it (other brokers answer
//! NOT_CONTROLLER, and the admin client retries at the controller, as with
//! Kafka in ZooKeeper mode); a single embedded broker has one replica per
//! partition, so every election is ELECTION_NOT_NEEDED. Needs ALTER on
//! the cluster.

use std::rc::Rc;

use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::{respond, HandlerResult};
use crate::cluster::ClusterHandle;
use crate::controller::{ControllerRequest, ElectionResult};
use crate::handlers::KafkaApis;
use crate::protocol::errors::ErrorCode;
use crate::protocol::{decode_body, errors, Request};
use crate::security::authorizer::AclOperation;

fn results_body(results: Vec<ElectionResult>) -> Vec<ReplicaElectionResult> {
    let mut out: Vec<ReplicaElectionResult> = Vec::new();
    for r in results {
        let pr = PartitionResult::default()
            .with_partition_id(r.partition)
            .with_error_code(r.error_code.code())
            .with_error_message(r.error_message.map(StrBytes::from_string));
        match out.iter_mut().find(|t| t.topic.0.as_str() == r.topic) {
            Some(t) => t.partition_result.push(pr),
            None => out.push(
                ReplicaElectionResult::default()
                    .with_topic(TopicName(StrBytes::from_string(r.topic)))
                    .with_partition_result(vec![pr]),
            ),
        }
    }
    out
}

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let request: ElectLeadersRequest = decode_body(req)?;
    let election_type = if req.api_version >= 1 {
        request.election_type
    } else {
        0
    };
    let partitions: Option<Vec<(String, i32)>> = request.topic_partitions.as_ref().map(|tps| {
        tps.iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(move |p| (t.topic.0.to_string(), *p))
            })
            .collect()
    });
    let top_error = |code: ErrorCode| {
        let body = ElectLeadersResponse::default().with_error_code(code.code());
        respond(req, &body)
    };
    if !ctx.authorize_cluster(req, AclOperation::Alter) {
        return respond(req, &unauthorized(partitions, req.api_version));
    }
    if !matches!(election_type, 0 | 1) {
        return top_error(errors::INVALID_REQUEST);
    }
    let results = match &ctx.cluster {
        Some(cluster) => match elect_on_controller(cluster, partitions, election_type).await {
            Ok(results) => results,
            Err(code) => return top_error(code),
        },
        None => elect_single_broker(ctx, partitions),
    };
    let body = ElectLeadersResponse::default()
        .with_error_code(errors::NONE.code())
        .with_replica_election_results(results_body(results));
    respond(req, &body)
}

/// A denied request: CLUSTER_AUTHORIZATION_FAILED at the top (v1+) and
/// for each partition named once, without a message; none when all were
/// asked for.
fn unauthorized(partitions: Option<Vec<(String, i32)>>, version: i16) -> ElectLeadersResponse {
    let code = errors::CLUSTER_AUTHORIZATION_FAILED;
    let mut named: Vec<(String, i32)> = partitions.unwrap_or_default();
    let mut seen = std::collections::HashSet::new();
    named.retain(|tp| seen.insert(tp.clone()));
    let results = named
        .into_iter()
        .map(|(topic, partition)| ElectionResult {
            topic,
            partition,
            error_code: code,
            error_message: None,
        })
        .collect();
    // ElectLeadersResponse sets the top-level code from v1 only.
    let top = if version >= 1 { code } else { errors::NONE };
    ElectLeadersResponse::default()
        .with_error_code(top.code())
        .with_replica_election_results(results_body(results))
}

/// Cluster mode: the active controller elects; Err is the top-level error.
async fn elect_on_controller(
    cluster: &ClusterHandle,
    partitions: Option<Vec<(String, i32)>>,
    election_type: i8,
) -> Result<Vec<ElectionResult>, ErrorCode> {
    super::ask_active_controller(cluster, |reply| ControllerRequest::ElectLeaders {
        partitions,
        election_type,
        reply,
    })
    .await
}

/// One replica per partition: every known partition already has its
/// preferred leader (all of them when none are named).
fn elect_single_broker(
    ctx: &KafkaApis,
    partitions: Option<Vec<(String, i32)>>,
) -> Vec<ElectionResult> {
    let image = ctx.metadata.image();
    let parts = partitions.unwrap_or_else(|| {
        image
            .topics
            .values()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(move |p| (t.name.clone(), p.partition))
            })
            .collect()
    });
    parts
        .into_iter()
        .map(|(topic, partition)| {
            let known = image
                .topic(&topic)
                .is_some_and(|t| t.partitions.iter().any(|p| p.partition == partition));
            ElectionResult {
                topic,
                partition,
                error_code: if known {
                    errors::ELECTION_NOT_NEEDED
                } else {
                    errors::UNKNOWN_TOPIC_OR_PARTITION
                },
                error_message: None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unauthorized_names_each_partition_once() {
        let asked = vec![
            ("a".to_string(), 0),
            ("b".to_string(), 1),
            ("a".to_string(), 0),
        ];
        let r = unauthorized(Some(asked), 1);
        assert_eq!(r.error_code, errors::CLUSTER_AUTHORIZATION_FAILED);
        assert_eq!(r.replica_election_results.len(), 2);
        let a = &r.replica_election_results[0];
        assert_eq!(a.topic.0.as_str(), "a");
        assert_eq!(a.partition_result.len(), 1);
        assert_eq!(
            a.partition_result[0].error_code,
            errors::CLUSTER_AUTHORIZATION_FAILED
        );
        assert!(a.partition_result[0].error_message.is_none());
        let v0 = unauthorized(None, 0);
        assert_eq!((v0.error_code, v0.replica_election_results.len()), (0, 0));
        crate::protocol::encode_response(kafka_protocol::messages::ApiKey::ElectLeaders, 0, 1, &v0)
            .unwrap();
    }
}
