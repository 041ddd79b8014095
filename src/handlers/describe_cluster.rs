//! DescribeCluster (API 60, v0-1): cluster id, controller and brokers from
//! the metadata image, as Kafka 3.9's AuthHelper.computeDescribeClusterResponse
//! builds them. kshard is a broker endpoint: asking for controllers (v1
//! endpoint_type 2) is MISMATCHED_ENDPOINT_TYPE, an unknown type
//! UNSUPPORTED_ENDPOINT_TYPE (both INVALID_REQUEST at v0). No ACL guards
//! the call; the cluster's authorized operations, when asked for, need
//! DESCRIBE on the cluster (0 without it).

use std::rc::Rc;

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::protocol::StrBytes;

use super::{respond, HandlerResult};
use crate::handlers::KafkaApis;
use crate::metadata::metadata_cache::MetadataImage;
use crate::protocol::{decode_body, errors, Request};
use crate::security::authorizer::{AclOperation, ResourceType, CLUSTER_NAME};

const ENDPOINT_BROKER: i8 = 1;
const ENDPOINT_CONTROLLER: i8 = 2;

/// The schema default: authorized operations were not requested.
const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let request: DescribeClusterRequest = decode_body(req)?;
    ctx.await_cluster_metadata().await;
    let image = ctx.metadata.image();
    let cluster_operations = || {
        if ctx.authorize_cluster(req, AclOperation::Describe) {
            ctx.authorized_operations(req, ResourceType::Cluster, CLUSTER_NAME)
        } else {
            0
        }
    };
    respond(
        req,
        &describe(
            &request,
            req.api_version,
            &image,
            &req.listener_name,
            cluster_operations,
        ),
    )
}

/// `cluster_operations` is asked only when the endpoint type is right and
/// the operations were requested.
fn describe(
    request: &DescribeClusterRequest,
    version: i16,
    image: &MetadataImage,
    listener_name: &str,
    cluster_operations: impl FnOnce() -> i32,
) -> DescribeClusterResponse {
    let endpoint_error = match request.endpoint_type {
        ENDPOINT_BROKER => None,
        ENDPOINT_CONTROLLER => Some((
            errors::MISMATCHED_ENDPOINT_TYPE,
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER".to_string(),
        )),
        other => Some((errors::UNSUPPORTED_ENDPOINT_TYPE, format!("Unsupported endpoint type {other}"))),
    };
    if let Some((code, message)) = endpoint_error {
        let code = if version == 0 {
            errors::INVALID_REQUEST
        } else {
            code
        };
        return DescribeClusterResponse::default()
            .with_error_code(code.code())
            .with_error_message(Some(StrBytes::from_string(message)));
    }
    let operations = if request.include_cluster_authorized_operations {
        cluster_operations()
    } else {
        OPERATIONS_NOT_REQUESTED
    };
    let brokers: Vec<DescribeClusterBroker> = image
        .brokers
        .iter()
        .filter_map(|b| Some((b, b.endpoint(listener_name)?)))
        .map(|(b, endpoint)| {
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(b.id))
                .with_host(StrBytes::from_string(endpoint.host.clone()))
                .with_port(i32::from(endpoint.port))
                .with_rack(b.rack.clone().map(StrBytes::from_string))
        })
        .collect();
    // A controller missing from the broker list is reported as -1 (Kafka).
    let controller_id = if image.brokers.iter().any(|b| b.id == image.controller_id) {
        image.controller_id
    } else {
        -1
    };
    DescribeClusterResponse::default()
        .with_error_code(errors::NONE.code())
        .with_error_message(None)
        .with_cluster_id(StrBytes::from_string(image.cluster_id.clone()))
        .with_controller_id(BrokerId(controller_id))
        .with_brokers(brokers)
        .with_cluster_authorized_operations(operations)
        .with_endpoint_type(ENDPOINT_BROKER)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::metadata_cache::{BrokerInfo, ListenerEndpoint};

    fn image() -> MetadataImage {
        MetadataImage {
            cluster_id: "abc".into(),
            controller_id: 0,
            brokers: vec![BrokerInfo {
                id: 0,
                host: "h".into(),
                port: 9092,
                rack: None,
                endpoints: vec![ListenerEndpoint {
                    listener_name: "PLAINTEXT".into(),
                    host: "h".into(),
                    port: 9092,
                }],
            }],
            ..Default::default()
        }
    }

    /// Every cluster operation (CREATE 5, ALTER 7, DESCRIBE 8,
    /// CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11,
    /// IDEMPOTENT_WRITE 12), as without an authorizer.
    fn all_operations() -> i32 {
        8096
    }

    #[test]
    fn brokers_and_controller() {
        let r = describe(
            &DescribeClusterRequest::default(),
            1,
            &image(),
            "PLAINTEXT",
            all_operations,
        );
        assert_eq!(r.error_code, errors::NONE);
        assert_eq!(r.cluster_id.as_str(), "abc");
        assert_eq!(r.controller_id.0, 0);
        assert_eq!(r.brokers.len(), 1);
        assert_eq!(r.brokers[0].port, 9092);
        assert_eq!(r.cluster_authorized_operations, i32::MIN);
        let r = describe(
            &DescribeClusterRequest::default().with_include_cluster_authorized_operations(true),
            0,
            &image(),
            "PLAINTEXT",
            all_operations,
        );
        assert_eq!(r.cluster_authorized_operations, 8096);
        let denied = describe(
            &DescribeClusterRequest::default().with_include_cluster_authorized_operations(true),
            1,
            &image(),
            "PLAINTEXT",
            || 0,
        );
        assert_eq!(denied.cluster_authorized_operations, 0);
    }

    #[test]
    fn unknown_controller_is_minus_one() {
        let mut img = image();
        img.controller_id = 5;
        assert_eq!(
            describe(
                &DescribeClusterRequest::default(),
                1,
                &img,
                "PLAINTEXT",
                all_operations
            )
            .controller_id
            .0,
            -1
        );
    }

    #[test]
    fn endpoint_types() {
        let r = describe(
            &DescribeClusterRequest::default().with_endpoint_type(2),
            1,
            &image(),
            "PLAINTEXT",
            all_operations,
        );
        assert_eq!(r.error_code, errors::MISMATCHED_ENDPOINT_TYPE);
        let r = describe(
            &DescribeClusterRequest::default().with_endpoint_type(9),
            1,
            &image(),
            "PLAINTEXT",
            all_operations,
        );
        assert_eq!(r.error_code, errors::UNSUPPORTED_ENDPOINT_TYPE);
        let r = describe(
            &DescribeClusterRequest::default().with_endpoint_type(9),
            0,
            &image(),
            "PLAINTEXT",
            all_operations,
        );
        assert_eq!(r.error_code, errors::INVALID_REQUEST);
    }

    #[test]
    fn responses_encode_at_every_version() {
        let r = describe(
            &DescribeClusterRequest::default(),
            0,
            &image(),
            "PLAINTEXT",
            all_operations,
        );
        for v in 0..=1 {
            crate::protocol::encode_response(
                kafka_protocol::messages::ApiKey::DescribeCluster,
                v,
                1,
                &r,
            )
            .unwrap();
        }
    }
}
