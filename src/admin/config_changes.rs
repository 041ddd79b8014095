//! Applying entity config changes to this broker (Kafka's
//! TopicConfigHandler and BrokerConfigHandler), on the controller shard:
//! a topic's overrides become its new `TopicConfig` in the metadata image
//! and on every partition of it; the cluster default or this broker's
//! dynamic configs become the live broker config (and the replication
//! quotas' bounds), and every topic's config is derived again from it. Also the store reads and writes behind
//! AlterConfigs in either mode (the embedded store or ZooKeeper).

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use crate::admin::{AdminError, AdminResult, TopicAdmin};
use crate::config::topic::TopicConfig;
use crate::config::BrokerConfig;
use crate::controller::ControllerRequest;
use crate::metadata::configs::{self as entity, ConfigEntity};
use crate::metadata::metadata_cache::TopicInfo;
use crate::protocol::errors;
use crate::router::{join_all, ShardRequest, CONTROLLER_SHARD};
use kshard_shards::mailbox::LocalBoxFuture;

fn store_err(e: impl std::fmt::Display) -> AdminError {
    AdminError::new(errors::UNKNOWN_SERVER_ERROR, format!("metadata store: {e}"))
}

/// The stored overrides of an entity (empty if none).
pub async fn read_entity(
    ctx: &TopicAdmin,
    entity_path: &str,
) -> AdminResult<BTreeMap<String, String>> {
    if let Some(cluster) = &ctx.cluster {
        let path = entity_path.to_string();
        return cluster
            .zk_call(move |zk| entity::fetch_entity_config(zk, &path))
            .await
            .map_err(store_err)?
            .map_err(store_err);
    }
    let admin = embedded(ctx).borrow();
    entity::fetch_entity_config(admin.store(), entity_path).map_err(store_err)
}

/// Writes an entity's whole override set and its change notification
/// (a quota entity left empty is removed instead); returns once the write
/// is durable.
pub async fn write_entity(
    ctx: &TopicAdmin,
    entity_path: &str,
    props: &BTreeMap<String, String>,
) -> AdminResult<()> {
    let quota_entity =
        entity_path.starts_with(entity::USERS) || entity_path.starts_with(entity::CLIENTS);
    let write = move |store: &mut dyn crate::metadata::MetadataStore,
                      path: &str,
                      props: &BTreeMap<String, String>| {
        if quota_entity && props.is_empty() {
            entity::remove_quota_entity(store, path)
        } else {
            entity::change_entity_config(store, path, props)
        }
    };
    if let Some(cluster) = &ctx.cluster {
        let path = entity_path.to_string();
        let props = props.clone();
        return cluster
            .zk_call(move |zk| write(zk, &path, &props))
            .await
            .map_err(store_err)?
            .map_err(store_err);
    }
    {
        let mut admin = embedded(ctx).borrow_mut();
        write(admin.store_mut(), entity_path, props).map_err(store_err)?;
        admin.purge_config_changes_if_due(crate::util::now_ms() as i64);
    }
    super::embedded::store_synced(embedded(ctx)).await;
    Ok(())
}

fn embedded(ctx: &TopicAdmin) -> &std::cell::RefCell<super::embedded::EmbeddedAdmin> {
    assert_eq!(ctx.shard_id, CONTROLLER_SHARD);
    ctx.embedded.as_ref().expect("the controller shard")
}

/// Applies an entity's stored overrides to this broker. Only the
/// controller shard publishes the image, so the read-modify-publish below
/// has no await inside it.
pub async fn apply(ctx: &Rc<TopicAdmin>, entity: ConfigEntity, props: BTreeMap<String, String>) {
    assert_eq!(ctx.shard_id, CONTROLLER_SHARD);
    let changed_topics = match &entity {
        ConfigEntity::Topic(name) => apply_topic(ctx, name, &props).into_iter().collect(),
        ConfigEntity::Broker(None) => {
            let broker = ctx.dynamic_config.update_default(&props);
            ctx.quotas
                .update_replication_quotas(&ctx.dynamic_config.state());
            rederive_topic_configs(ctx, &broker).await
        }
        ConfigEntity::Broker(Some(id)) if *id == ctx.config.effective_broker_id() => {
            let broker = ctx.dynamic_config.update_broker(&props);
            ctx.quotas
                .update_replication_quotas(&ctx.dynamic_config.state());
            rederive_topic_configs(ctx, &broker).await
        }
        ConfigEntity::Other(path) => {
            if !ctx.quotas.update(path, &props) {
                log::debug!("config change for {path}: no handler on this broker");
            }
            Vec::new()
        }
        // Another broker's own configs.
        ConfigEntity::Broker(Some(_)) => Vec::new(),
    };
    // After the broker config moved, so the controller reads the new default.
    tell_controller(ctx, &entity, &props);
    if !changed_topics.is_empty() {
        update_partitions(ctx, changed_topics).await;
    }
}

/// Cluster mode: the controller thread keeps each topic's unclean
/// election override and elects leaders for offline partitions when it is
/// enabled (only the active controller acts).
fn tell_controller(ctx: &TopicAdmin, entity: &ConfigEntity, props: &BTreeMap<String, String>) {
    const UNCLEAN: &str = "unclean.leader.election.enable";
    let Some(cluster) = &ctx.cluster else {
        return;
    };
    let topic = match entity {
        ConfigEntity::Topic(name) => Some(name.clone()),
        ConfigEntity::Broker(_) => None,
        ConfigEntity::Other(_) => return,
    };
    cluster
        .controller
        .request(ControllerRequest::UncleanElectionConfig {
            topic,
            unclean_override: props.get(UNCLEAN).map(|v| v.eq_ignore_ascii_case("true")),
        });
}

/// A topic's new overrides into the image; returns the topic if it is
/// known here (a topic this broker has not seen yet gets its configs when
/// it first appears).
fn apply_topic(
    ctx: &TopicAdmin,
    name: &str,
    overrides: &BTreeMap<String, String>,
) -> Option<String> {
    let image = ctx.metadata.image();
    let current = image.topic(name)?;
    let config = match TopicConfig::from_overrides(&ctx.dynamic_config.current(), overrides) {
        Ok(c) => c,
        Err(e) => {
            log::error!("topic {name}: stored config invalid ({e}); kept the previous one");
            return None;
        }
    };
    if current.overrides == config.overrides && *current.config == config {
        return None;
    }
    ctx.metadata.publish(image.with_topic(TopicInfo {
        overrides: config.overrides.clone(),
        config: Arc::new(config),
        ..(**current).clone()
    }));
    log::info!("topic {name}: config overrides now {overrides:?}");
    Some(name.to_string())
}

/// Topics derived per yield check before the shard may run other tasks.
const TOPICS_PER_SLICE: usize = 256;

/// Every topic's config again from a new broker config (Kafka's
/// DynamicLogConfig.reconfigure): derived in slices that yield, then
/// published at once for the topics whose overrides did not change
/// meanwhile.
async fn rederive_topic_configs(ctx: &TopicAdmin, broker: &BrokerConfig) -> Vec<String> {
    let snapshot = ctx.metadata.image();
    let mut derived: Vec<(Arc<TopicInfo>, TopicConfig)> = Vec::new();
    for (i, topic) in snapshot.topics.values().enumerate() {
        if i % TOPICS_PER_SLICE == 0 {
            glommio::yield_if_needed().await;
        }
        match TopicConfig::from_overrides(broker, &topic.overrides) {
            Ok(c) if c != *topic.config => derived.push((topic.clone(), c)),
            Ok(_) => {}
            Err(e) => log::error!(
                "topic {}: config invalid under the new broker config: {e}",
                topic.name
            ),
        }
    }
    if derived.is_empty() {
        return Vec::new();
    }
    let mut next = (*ctx.metadata.image()).clone();
    let mut changed = Vec::with_capacity(derived.len());
    for (before, config) in derived {
        // A topic changed meanwhile was derived from the live config already.
        let Some(now) = next.topics.get(&before.name) else {
            continue;
        };
        if !Arc::ptr_eq(now, &before) {
            continue;
        }
        let info = TopicInfo {
            config: Arc::new(config),
            ..(*before).clone()
        };
        changed.push(info.name.clone());
        next.insert_topic(info);
    }
    ctx.metadata.publish(next);
    log::info!(
        "broker config changed: {} topic configs derived again",
        changed.len()
    );
    changed
}

/// Tells every shard to take the image's configs for `topics`.
async fn update_partitions(ctx: &Rc<TopicAdmin>, topics: Vec<String>) {
    let topics = Arc::new(topics);
    let calls: Vec<LocalBoxFuture<()>> = (0..ctx.nr_shards)
        .map(|shard| {
            let ctx = ctx.clone();
            let topics = topics.clone();
            Box::pin(async move {
                let _ = ctx
                    .router
                    .run_on(shard, ShardRequest::UpdateTopicConfigs { topics })
                    .await;
            }) as LocalBoxFuture<()>
        })
        .collect();
    join_all(calls).await;
}
