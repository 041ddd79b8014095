//! DescribeConfigs (API 32, v1-4), answered from the live broker config
//! and the metadata image without crossing shards. Resource types as Kafka
//! 3.9's ConfigHelper serves them: TOPIC (2), BROKER (4; an empty name is
//! the cluster-wide dynamic defaults, `/config/brokers/<default>`) and
//! BROKER_LOGGER (8; the `log` crate's global level as logger `root`).
//! A null or empty `configuration_keys` means every key. Each resource
//! needs DESCRIBE_CONFIGS on its topic or on the cluster.

use std::rc::Rc;

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;

use super::{respond, HandlerResult};
use crate::config::dynamic::{broker_entries, default_broker_entries, BrokerConfigState};
use crate::config::{topic_config_entries, ConfigEntry};
use crate::handlers::KafkaApis;
use crate::metadata::metadata_cache::MetadataImage;
use crate::metadata::topics::validate_topic_name;
use crate::protocol::errors::ErrorCode;
use crate::protocol::{decode_body, errors, Request};
use crate::security::authorizer::{AclOperation, ResourceType};

pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;
pub const RESOURCE_BROKER_LOGGER: i8 = 8;
/// ConfigResource.Type.CLIENT_METRICS: authorized as the cluster, then
/// refused as an unsupported type.
const RESOURCE_CLIENT_METRICS: i8 = 16;
/// DescribeConfigsResponse.ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG.
const SOURCE_DYNAMIC_BROKER_LOGGER_CONFIG: i8 = 6;

pub fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let request: DescribeConfigsRequest = decode_body(req)?;
    let image = ctx.metadata.image();
    let state = ctx.dynamic_config.state();
    let options = Options {
        include_synonyms: request.include_synonyms,
        include_documentation: request.include_documentation,
        log_level: log::max_level(),
    };
    // ConfigHelper answers the unauthorized resources after the others.
    let (allowed, denied): (Vec<_>, Vec<_>) = request
        .resources
        .iter()
        .partition(|r| may_describe(ctx, req, r));
    let results = allowed
        .into_iter()
        .map(|r| describe(&state, &image, r, &options))
        .chain(denied.into_iter().map(unauthorized))
        .collect();
    respond(
        req,
        &DescribeConfigsResponse::default().with_results(results),
    )
}

/// DESCRIBE_CONFIGS on the topic, or on the cluster for broker, logger and
/// client-metrics resources. Kafka fails the whole request on any other
/// type; kshard answers it INVALID_REQUEST, unchecked.
fn may_describe(ctx: &KafkaApis, req: &Request, r: &DescribeConfigsResource) -> bool {
    match r.resource_type {
        RESOURCE_TOPIC => ctx.authorize(
            req,
            AclOperation::DescribeConfigs,
            ResourceType::Topic,
            r.resource_name.as_str(),
        ),
        RESOURCE_BROKER | RESOURCE_BROKER_LOGGER | RESOURCE_CLIENT_METRICS => {
            ctx.authorize_cluster(req, AclOperation::DescribeConfigs)
        }
        _ => true,
    }
}

/// A denied resource, with the Errors default message as Kafka sends it.
fn unauthorized(r: &DescribeConfigsResource) -> DescribeConfigsResult {
    let (code, message) = if r.resource_type == RESOURCE_TOPIC {
        (
            errors::TOPIC_AUTHORIZATION_FAILED,
            "Topic authorization failed.",
        )
    } else {
        (
            errors::CLUSTER_AUTHORIZATION_FAILED,
            "Cluster authorization failed.",
        )
    };
    DescribeConfigsResult::default()
        .with_error_code(code.code())
        .with_error_message(Some(StrBytes::from_static_str(message)))
        .with_resource_type(r.resource_type)
        .with_resource_name(r.resource_name.clone())
        .with_configs(Vec::new())
}

struct Options {
    include_synonyms: bool,
    include_documentation: bool,
    log_level: log::LevelFilter,
}

fn describe(
    state: &BrokerConfigState,
    image: &MetadataImage,
    r: &DescribeConfigsResource,
    o: &Options,
) -> DescribeConfigsResult {
    let name = r.resource_name.as_str();
    let my_id = state.static_config.effective_broker_id();
    let outcome = match r.resource_type {
        RESOURCE_TOPIC => match validate_topic_name(name) {
            Err(message) => Err((errors::INVALID_TOPIC_EXCEPTION, Some(message))),
            Ok(()) => match image.topic(name) {
                Some(info) => Ok(topic_config_entries(state, &info.overrides)),
                None => Err((errors::UNKNOWN_TOPIC_OR_PARTITION, None)),
            },
        },
        RESOURCE_BROKER if name.is_empty() => Ok(default_broker_entries(state)),
        RESOURCE_BROKER => this_broker(my_id, name, true).map(|()| broker_entries(state)),
        RESOURCE_BROKER_LOGGER if name.is_empty() => Err((
            errors::INVALID_REQUEST,
            Some("Broker id must not be empty".to_string()),
        )),
        RESOURCE_BROKER_LOGGER => {
            this_broker(my_id, name, false).map(|()| vec![root_logger(o.log_level)])
        }
        other => Err((
            errors::INVALID_REQUEST,
            Some(format!("Unsupported resource type: {other}")),
        )),
    };
    let result = DescribeConfigsResult::default()
        .with_resource_type(r.resource_type)
        .with_resource_name(r.resource_name.clone());
    // Kafka leaves the message at its default, "", unless an exception set it.
    match outcome {
        Ok(entries) => result
            .with_error_code(errors::NONE.code())
            // Kafka leaves the message at its schema default, "".
            .with_error_message(Some(StrBytes::from_static_str("")))
            .with_configs(select(entries, r.configuration_keys.as_deref(), o)),
        Err((code, message)) => result
            .with_error_code(code.code())
            .with_error_message(Some(StrBytes::from_string(message.unwrap_or_default())))
            .with_configs(Vec::new()),
    }
}

/// Checks that a broker resource names this broker, with Kafka's messages.
fn this_broker(
    id: i32,
    name: &str,
    empty_allowed: bool,
) -> Result<(), (ErrorCode, Option<String>)> {
    let Ok(requested) = name.parse::<i32>() else {
        return Err((
            errors::INVALID_REQUEST,
            Some(format!("Broker id must be an integer, but it is: {name}")),
        ));
    };
    if requested == id {
        return Ok(());
    }
    let message = if empty_allowed {
        format!("Unexpected broker id, expected {id} or empty string, but received {name}")
    } else {
        format!("Unexpected broker id, expected {id} but received {name}")
    };
    Err((errors::INVALID_REQUEST, Some(message)))
}

/// log4j's level names for the `log` crate's global filter.
fn level_name(level: log::LevelFilter) -> &'static str {
    match level {
        log::LevelFilter::Off => "OFF",
        log::LevelFilter::Error => "ERROR",
        log::LevelFilter::Warn => "WARN",
        log::LevelFilter::Info => "INFO",
        log::LevelFilter::Debug => "DEBUG",
        log::LevelFilter::Trace => "TRACE",
    }
}

fn root_logger(level: log::LevelFilter) -> ConfigEntry {
    ConfigEntry {
        name: "root".to_string(),
        value: Some(level_name(level).to_string()),
        read_only: false,
        source: SOURCE_DYNAMIC_BROKER_LOGGER_CONFIG,
        is_sensitive: false,
        synonyms: Vec::new(),
        config_type: 0,
        documentation: None,
    }
}

/// Applies the key filter and the synonym and documentation switches.
fn select(
    entries: Vec<ConfigEntry>,
    keys: Option<&[StrBytes]>,
    o: &Options,
) -> Vec<DescribeConfigsResourceResult> {
    let keys = keys.filter(|k| !k.is_empty());
    entries
        .into_iter()
        .filter(|e| keys.is_none_or(|k| k.iter().any(|key| key.as_str() == e.name)))
        .map(|e| {
            let synonyms = if o.include_synonyms {
                e.synonyms
                    .into_iter()
                    .map(|(name, value, source)| {
                        DescribeConfigsSynonym::default()
                            .with_name(StrBytes::from_string(name))
                            .with_value(value.map(StrBytes::from_string))
                            .with_source(source)
                    })
                    .collect()
            } else {
                Vec::new()
            };
            let documentation = if o.include_documentation {
                e.documentation
            } else {
                None
            };
            DescribeConfigsResourceResult::default()
                .with_name(StrBytes::from_string(e.name))
                .with_value(e.value.map(StrBytes::from_string))
                .with_read_only(e.read_only)
                .with_config_source(e.source)
                .with_is_sensitive(e.is_sensitive)
                .with_synonyms(synonyms)
                .with_config_type(e.config_type)
                .with_documentation(documentation.map(StrBytes::from_string))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use crate::config::defs::{SOURCE_DEFAULT_CONFIG, SOURCE_TOPIC_CONFIG};
    use crate::config::topic::TopicConfig;
    use crate::config::BrokerConfig;
    use crate::metadata::metadata_cache::TopicInfo;

    fn config() -> BrokerConfig {
        BrokerConfig::from_map(&BTreeMap::new()).unwrap()
    }

    fn image(config: &BrokerConfig) -> MetadataImage {
        let overrides: BTreeMap<String, String> =
            [("retention.ms".to_string(), "1000".to_string())].into();
        let topic = TopicInfo {
            name: "t".into(),
            topic_id: uuid::Uuid::from_u128(1),
            partitions: Vec::new(),
            config: Arc::new(TopicConfig::from_overrides(config, &overrides).unwrap()),
            overrides,
            is_internal: false,
        };
        MetadataImage::default().with_topic(topic)
    }

    fn resource(kind: i8, name: &str, keys: Option<&[&str]>) -> DescribeConfigsResource {
        DescribeConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(StrBytes::from_string(name.into()))
            .with_configuration_keys(keys.map(|k| {
                k.iter()
                    .map(|s| StrBytes::from_string(s.to_string()))
                    .collect()
            }))
    }

    fn options(synonyms: bool, docs: bool) -> Options {
        Options {
            include_synonyms: synonyms,
            include_documentation: docs,
            log_level: log::LevelFilter::Info,
        }
    }

    #[test]
    fn topic_override_and_default() {
        let c = config();
        let r = describe(
            &BrokerConfigState::from_static(Arc::new(c.clone())),
            &image(&c),
            &resource(
                RESOURCE_TOPIC,
                "t",
                Some(&["retention.ms", "segment.bytes"]),
            ),
            &options(true, false),
        );
        assert_eq!(r.error_code, errors::NONE);
        assert_eq!(r.configs.len(), 2);
        let retention = r
            .configs
            .iter()
            .find(|e| e.name.as_str() == "retention.ms")
            .unwrap();
        assert_eq!(retention.value.as_deref(), Some("1000"));
        assert_eq!(retention.config_source, SOURCE_TOPIC_CONFIG);
        assert_eq!(retention.synonyms[0].name.as_str(), "retention.ms");
        assert!(retention.documentation.is_none());
        let segment = r
            .configs
            .iter()
            .find(|e| e.name.as_str() == "segment.bytes")
            .unwrap();
        assert_eq!(segment.config_source, SOURCE_DEFAULT_CONFIG);
        assert_eq!(segment.value.as_deref(), Some("1073741824"));
    }

    #[test]
    fn empty_key_list_means_all_and_switches_apply() {
        let c = config();
        let all = describe(
            &BrokerConfigState::from_static(Arc::new(c.clone())),
            &image(&c),
            &resource(RESOURCE_TOPIC, "t", Some(&[])),
            &options(false, true),
        );
        assert!(all.configs.len() > 10);
        assert!(all.configs.iter().all(|e| e.synonyms.is_empty()));
        assert!(all.configs.iter().all(|e| e.documentation.is_some()));
    }

    #[test]
    fn unknown_and_invalid_topics() {
        let c = config();
        let img = image(&c);
        let r = describe(
            &BrokerConfigState::from_static(Arc::new(c.clone())),
            &img,
            &resource(RESOURCE_TOPIC, "nope", None),
            &options(false, false),
        );
        assert_eq!(r.error_code, errors::UNKNOWN_TOPIC_OR_PARTITION);
        assert!(r.configs.is_empty());
        let r = describe(
            &BrokerConfigState::from_static(Arc::new(c.clone())),
            &img,
            &resource(RESOURCE_TOPIC, "a/b", None),
            &options(false, false),
        );
        assert_eq!(r.error_code, errors::INVALID_TOPIC_EXCEPTION);
        assert_eq!(r.resource_name.as_str(), "a/b");
    }

    #[test]
    fn broker_resource_names() {
        let c = config();
        let img = image(&c);
        let id = c.effective_broker_id().to_string();
        let r = describe(
            &BrokerConfigState::from_static(Arc::new(c.clone())),
            &img,
            &resource(RESOURCE_BROKER, &id, Some(&["num.partitions"])),
            &options(false, false),
        );
        assert_eq!(r.error_code, errors::NONE);
        assert_eq!(r.configs.len(), 1);
        assert_eq!(r.configs[0].value.as_deref(), Some("1"));
        let r = describe(
            &BrokerConfigState::from_static(Arc::new(c.clone())),
            &img,
            &resource(RESOURCE_BROKER, "", None),
            &options(false, false),
        );
        assert_eq!((r.error_code, r.configs.len()), (errors::NONE.code(), 0));
        let r = describe(
            &BrokerConfigState::from_static(Arc::new(c.clone())),
            &img,
            &resource(RESOURCE_BROKER, "99", None),
            &options(false, false),
        );
        assert_eq!(r.error_code, errors::INVALID_REQUEST);
        assert_eq!(
            r.error_message.as_deref(),
            Some(
                format!("Unexpected broker id, expected {id} or empty string, but received 99")
                    .as_str()
            )
        );
        let r = describe(
            &BrokerConfigState::from_static(Arc::new(c.clone())),
            &img,
            &resource(RESOURCE_BROKER, "x", None),
            &options(false, false),
        );
        assert_eq!(
            r.error_message.as_deref(),
            Some("Broker id must be an integer, but it is: x")
        );
    }

    #[test]
    fn broker_logger() {
        let c = config();
        let img = image(&c);
        let id = c.effective_broker_id().to_string();
        let r = describe(
            &BrokerConfigState::from_static(Arc::new(c.clone())),
            &img,
            &resource(RESOURCE_BROKER_LOGGER, &id, None),
            &options(false, false),
        );
        assert_eq!(r.error_code, errors::NONE);
        assert_eq!(r.configs[0].name.as_str(), "root");
        assert_eq!(r.configs[0].value.as_deref(), Some("INFO"));
        assert_eq!(
            r.configs[0].config_source,
            SOURCE_DYNAMIC_BROKER_LOGGER_CONFIG
        );
        let r = describe(
            &BrokerConfigState::from_static(Arc::new(c.clone())),
            &img,
            &resource(RESOURCE_BROKER_LOGGER, "", None),
            &options(false, false),
        );
        assert_eq!(r.error_code, errors::INVALID_REQUEST);
    }

    #[test]
    fn other_resource_types_are_invalid() {
        let c = config();
        let r = describe(
            &BrokerConfigState::from_static(Arc::new(c.clone())),
            &image(&c),
            &resource(16, "x", None),
            &options(false, false),
        );
        assert_eq!(r.error_code, errors::INVALID_REQUEST);
        assert_eq!(r.resource_type, 16);
    }

    #[test]
    fn unauthorized_resources() {
        let r = unauthorized(&resource(RESOURCE_TOPIC, "t", None));
        assert_eq!(r.error_code, errors::TOPIC_AUTHORIZATION_FAILED);
        assert_eq!(
            r.error_message.as_deref(),
            Some("Topic authorization failed.")
        );
        assert_eq!(r.resource_name.as_str(), "t");
        let r = unauthorized(&resource(RESOURCE_BROKER_LOGGER, "0", None));
        assert_eq!(r.error_code, errors::CLUSTER_AUTHORIZATION_FAILED);
        assert_eq!(r.resource_type, RESOURCE_BROKER_LOGGER);
        assert!(r.configs.is_empty());
    }

    #[test]
    fn results_encode_at_every_version() {
        let c = config();
        let img = image(&c);
        let results = vec![
            describe(
                &BrokerConfigState::from_static(Arc::new(c.clone())),
                &img,
                &resource(RESOURCE_TOPIC, "t", None),
                &options(true, true),
            ),
            describe(
                &BrokerConfigState::from_static(Arc::new(c.clone())),
                &img,
                &resource(RESOURCE_TOPIC, "nope", None),
                &options(true, true),
            ),
            describe(
                &BrokerConfigState::from_static(Arc::new(c.clone())),
                &img,
                &resource(RESOURCE_BROKER, "0", None),
                &options(true, true),
            ),
        ];
        let body = DescribeConfigsResponse::default().with_results(results);
        for v in 1..=4 {
            crate::protocol::encode_response(
                kafka_protocol::messages::ApiKey::DescribeConfigs,
                v,
                1,
                &body,
            )
            .unwrap();
        }
    }
}
