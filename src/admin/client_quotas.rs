//! AlterClientQuotas and DescribeClientQuotas over the store, as Kafka's
//! ZkAdminManager: each entry's ops are applied to the entity's stored
//! configs (`/config/users|clients/...`, with a change notification, so
//! every broker's quota managers take it) and the store is read whole to
//! describe. Runs on the controller shard.

use std::rc::Rc;

use crate::admin::config_changes::{self, read_entity, write_entity};
use crate::admin::{AdminError, TopicAdmin};
use crate::metadata::configs::{self as entity, ConfigEntity, StoredEntityConfig};
use crate::protocol::errors;
use crate::quota::{
    apply_quota_ops, describe_entries, entity_from_components, entity_path, parse_entity_path,
    DescribeError, DescribedEntry, FilterComponent, QuotaAlterError, QuotaOp,
};

/// A refused entry or describe: Kafka's code and its message (None where
/// Kafka sends none).
#[derive(Debug, Clone, PartialEq)]
pub struct QuotaError {
    pub code: i16,
    pub message: Option<String>,
}

impl From<QuotaAlterError> for QuotaError {
    fn from(e: QuotaAlterError) -> Self {
        QuotaError {
            code: e.code(),
            message: e.message().map(str::to_string),
        }
    }
}

impl From<DescribeError> for QuotaError {
    fn from(e: DescribeError) -> Self {
        QuotaError {
            code: e.code(),
            message: e.message().map(str::to_string),
        }
    }
}

impl From<AdminError> for QuotaError {
    fn from(e: AdminError) -> Self {
        let message = (e.code != errors::UNKNOWN_SERVER_ERROR).then_some(e.message);
        QuotaError {
            code: e.code.code(),
            message,
        }
    }
}

/// One AlterClientQuotas entry.
pub async fn alter_entry(
    ctx: &Rc<TopicAdmin>,
    components: &[(String, Option<String>)],
    ops: &[QuotaOp],
    validate_only: bool,
) -> Result<(), QuotaError> {
    let entity = entity_from_components(components)?;
    let path = entity_path(&entity).ok_or_else(|| QuotaError {
        code: errors::INVALID_REQUEST.code(),
        message: Some("Invalid empty client quota entity".to_string()),
    })?;
    let stored = read_entity(ctx, &path).await?;
    let props = apply_quota_ops(&entity, &stored, ops)?;
    if validate_only {
        return Ok(());
    }
    write_entity(ctx, &path, &props).await?;
    config_changes::apply(ctx, ConfigEntity::Other(path), props).await;
    Ok(())
}

/// Every stored entity with quota values that matches the filter.
pub async fn describe(
    ctx: &TopicAdmin,
    components: &[FilterComponent],
    strict: bool,
) -> Result<Vec<DescribedEntry>, QuotaError> {
    crate::quota::validate_filter(components)?;
    let stored = read_all(ctx).await?;
    let parsed: Vec<_> = stored
        .iter()
        .filter_map(|e| Some((parse_entity_path(&e.entity_path)?, &e.configs)))
        .collect();
    Ok(describe_entries(parsed, components, strict)?)
}

pub async fn read_all(ctx: &TopicAdmin) -> Result<Vec<StoredEntityConfig>, AdminError> {
    let store_err =
        |e: String| AdminError::new(errors::UNKNOWN_SERVER_ERROR, format!("metadata store: {e}"));
    if let Some(cluster) = &ctx.cluster {
        return cluster
            .zk_call(|zk| entity::read_quota_entities(zk).map_err(|e| e.to_string()))
            .await
            .map_err(store_err)?
            .map_err(store_err);
    }
    let admin = ctx
        .embedded
        .as_ref()
        .expect("the controller shard")
        .borrow();
    entity::read_quota_entities(admin.store()).map_err(|e| store_err(e.to_string()))
}
