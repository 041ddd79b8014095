//! AlterConfigs (API 33) and IncrementalAlterConfigs (API 44) as Kafka
//! 3.9's ZooKeeper-mode ConfigAdminManager and ZkAdminManager answer them:
//! the request-shape checks first (duplicates, nulls, broker ids, broker
//! validation as INVALID_REQUEST), then per resource the topic or broker
//! checks, then the whole override set written to `/config/<type>/<name>`
//! with a change notification. The change takes effect through
//! `config_changes::apply` (at once on a single broker and on the broker
//! that wrote it; through the notification on every other broker).

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use crate::admin::config_changes;
use crate::admin::{AdminError, AdminResult, TopicAdmin};
use crate::config::alter_ops::{self, AlterConfigOp, AlterOpsError, UnknownOp};
use crate::config::defs::{broker_def, topic_def};
use crate::config::dynamic::{check_persistable_at, from_persistent_props};
use crate::config::topic::{validate_overrides, TopicConfig};
use crate::metadata::configs::{self as entity, ConfigEntity};
use crate::protocol::errors;

/// ConfigResource.Type codes.
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;
pub const RESOURCE_BROKER_LOGGER: i8 = 8;

/// One resource of an Alter or IncrementalAlterConfigs request.
#[derive(Debug, Clone)]
pub struct AlterConfigsResource {
    pub resource_type: i8,
    pub name: String,
    /// For AlterConfigs every op is a SET (0).
    pub ops: Vec<AlterConfigOp>,
}

/// Which API a request came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlterKind {
    /// AlterConfigs: the entries replace the entity's whole override set.
    Legacy,
    /// IncrementalAlterConfigs: the ops apply to the stored set.
    Incremental,
}

/// One result per request resource, in request order.
pub async fn alter_configs(
    ctx: &Rc<TopicAdmin>,
    resources: &[AlterConfigsResource],
    kind: AlterKind,
    validate_only: bool,
) -> Vec<AdminResult<()>> {
    let mut seen: HashMap<(i8, &str), usize> = HashMap::with_capacity(resources.len());
    for r in resources {
        *seen.entry((r.resource_type, r.name.as_str())).or_insert(0) += 1;
    }
    let mut results = Vec::with_capacity(resources.len());
    for r in resources {
        let result = if seen[&(r.resource_type, r.name.as_str())] > 1 {
            Err(AdminError::new(
                errors::INVALID_REQUEST,
                "Each resource must appear at most once.",
            ))
        } else {
            alter_one(ctx, r, kind, validate_only).await
        };
        results.push(result);
    }
    results
}

async fn alter_one(
    ctx: &Rc<TopicAdmin>,
    r: &AlterConfigsResource,
    kind: AlterKind,
    validate_only: bool,
) -> AdminResult<()> {
    alter_ops::check_request_shape(&r.ops, kind == AlterKind::Incremental)
        .map_err(|m| AdminError::new(errors::INVALID_REQUEST, m))?;
    match (r.resource_type, kind) {
        (RESOURCE_TOPIC, _) => alter_topic(ctx, r, kind, validate_only).await,
        (RESOURCE_BROKER, _) => alter_broker(ctx, r, kind, validate_only).await,
        (RESOURCE_BROKER_LOGGER, AlterKind::Incremental) => {
            super::logger_configs::alter_logger(ctx.config.effective_broker_id(), r, validate_only)
        }
        (other, _) => Err(AdminError::new(
            errors::INVALID_REQUEST,
            format!("Unknown resource type {other}"),
        )),
    }
}

/// Kafka's "Invalid config value for resource ConfigResource(...)" wrapping
/// of a ConfigException; an unknown topic key is an ApiException and keeps
/// its own text.
fn invalid_config(kind: &str, name: &str, e: &crate::config::ConfigError) -> AdminError {
    let message = if e.names_value {
        format!("Invalid config value for resource ConfigResource(type={kind}, name='{name}'): {e}")
    } else {
        e.to_string()
    };
    AdminError::new(errors::INVALID_CONFIG, message)
}

fn ops_error(e: AlterOpsError) -> AdminError {
    match e {
        AlterOpsError::InvalidConfig(m) => AdminError::new(errors::INVALID_CONFIG, m),
        AlterOpsError::InvalidRequest(m) => AdminError::new(errors::INVALID_REQUEST, m),
        // Kafka sends this one without a message.
        AlterOpsError::UnknownServerError => AdminError::new(errors::UNKNOWN_SERVER_ERROR, ""),
    }
}

/// The SET entries of a legacy request as a map (checked for nulls and
/// duplicates already).
fn legacy_props(ops: &[AlterConfigOp]) -> BTreeMap<String, String> {
    ops.iter()
        .map(|o| (o.name.clone(), o.value.clone().unwrap_or_default()))
        .collect()
}

async fn alter_topic(
    ctx: &Rc<TopicAdmin>,
    r: &AlterConfigsResource,
    kind: AlterKind,
    validate_only: bool,
) -> AdminResult<()> {
    let topic = r.name.as_str();
    if topic.is_empty() {
        return Err(AdminError::new(
            errors::INVALID_REQUEST,
            "Default topic resources are not allowed.",
        ));
    }
    let entity_path = entity::topic_entity(topic);
    // Kafka merges the ops before it looks the topic up, so an op error on
    // a missing topic is reported first.
    let props = match kind {
        AlterKind::Legacy => legacy_props(&r.ops),
        AlterKind::Incremental => {
            let stored = config_changes::read_entity(ctx, &entity_path).await?;
            alter_ops::apply_incremental(&stored, &r.ops, topic_def, UnknownOp::ServerError)
                .map_err(ops_error)?
        }
    };
    if ctx.metadata.image().topic(topic).is_none() {
        return Err(AdminError::no_such_topic(topic));
    }
    let normalized = validate_overrides(&props).map_err(|e| invalid_config("TOPIC", topic, &e))?;
    TopicConfig::from_overrides(&ctx.dynamic_config.current(), &normalized)
        .map_err(|e| invalid_config("TOPIC", topic, &e))?;
    if validate_only {
        return Ok(());
    }
    config_changes::write_entity(ctx, &entity_path, &normalized).await?;
    config_changes::apply(ctx, ConfigEntity::Topic(topic.to_string()), normalized).await;
    Ok(())
}

/// The broker a BROKER resource names: None for "" (the cluster default).
fn broker_target(my_id: i32, name: &str) -> AdminResult<Option<i32>> {
    if name.is_empty() {
        return Ok(None);
    }
    let Ok(id) = name.parse::<i32>() else {
        return Err(AdminError::new(
            errors::INVALID_REQUEST,
            format!("Node id must be an integer, but it is: {name}"),
        ));
    };
    if id != my_id {
        return Err(AdminError::new(
            errors::INVALID_REQUEST,
            format!("Unexpected broker id, expected {my_id}, but received {name}"),
        ));
    }
    Ok(Some(id))
}

/// The reconfigurables' own checks (Kafka's validateReconfiguration), as
/// DynamicBrokerConfig wraps their failures. The log cleaner's: its thread
/// count may at most halve or double in one change.
fn validate_reconfiguration(
    current: &crate::config::BrokerConfig,
    props: &BTreeMap<String, String>,
) -> Result<(), String> {
    const THREADS: &str = "log.cleaner.threads";
    let Some(new) = props
        .get(THREADS)
        .and_then(|v| v.trim().parse::<i64>().ok())
    else {
        return Ok(());
    };
    let now: i64 = current
        .originals()
        .get(THREADS)
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(1);
    let refusal = if new < 1 {
        "Log cleaner threads should be at least 1".to_string()
    } else if new < now / 2 {
        format!("Log cleaner threads cannot be reduced to less than half the current value {now}")
    } else if new > now * 2 {
        format!(
            "Log cleaner threads cannot be increased to more than double the current value {now}"
        )
    } else {
        return Ok(());
    };
    Err(format!(
        "Invalid value org.apache.kafka.common.config.ConfigException: {refusal} for configuration Invalid dynamic configuration"
    ))
}

async fn alter_broker(
    ctx: &Rc<TopicAdmin>,
    r: &AlterConfigsResource,
    kind: AlterKind,
    validate_only: bool,
) -> AdminResult<()> {
    let target = broker_target(ctx.config.effective_broker_id(), &r.name)?;
    let entity_path = entity::broker_entity(target);
    let props = match kind {
        AlterKind::Legacy => legacy_props(&r.ops),
        AlterKind::Incremental => {
            let stored = config_changes::read_entity(ctx, &entity_path).await?;
            let stored = from_persistent_props(&stored, target.is_some());
            alter_ops::apply_incremental(&stored, &r.ops, broker_def, UnknownOp::InvalidRequest)
                .map_err(ops_error)?
        }
    };
    // ConfigAdminManager turns every broker validation failure into
    // INVALID_REQUEST (KAFKA-13609).
    ctx.dynamic_config
        .validate(&props, target.is_some())
        .and_then(|()| validate_reconfiguration(&ctx.dynamic_config.current(), &props))
        .map_err(|m| AdminError::new(errors::INVALID_REQUEST, m))?;
    if validate_only {
        return Ok(());
    }
    check_persistable_at(&props, target.is_some(), &ctx.config).map_err(|m| {
        AdminError::new(
            errors::INVALID_CONFIG,
            format!(
                "Invalid config value for resource ConfigResource(type=BROKER, name='{}'): {m}",
                r.name
            ),
        )
    })?;
    config_changes::write_entity(ctx, &entity_path, &props).await?;
    config_changes::apply(ctx, ConfigEntity::Broker(target), props).await;
    Ok(())
}
