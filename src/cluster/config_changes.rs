//! Kafka's ZkConfigManager in cluster mode: a `config-change-listener`
//! thread keeps a child watch on `/config/changes`; each time it fires (and
//! after a new session, and once a minute for the purge) it reads the
//! notifications above the last one applied, in sequence order, re-reads
//! each named entity's whole config and hands it to the controller shard,
//! which applies it (`admin::config_changes::apply`). It then deletes
//! notifications older than 15 minutes, as every Kafka broker does. The
//! last applied sequence is not persisted: a restarted broker applies the
//! surviving notifications again, which changes nothing.

use std::thread;
use std::time::Duration;

use crate::metadata::configs::{self as entity, EntityConfigChange};
use crate::metadata::topics::CONFIG_CHANGES_PATH;
use crate::metadata::MetadataStore;
use crate::zk::ZkClient;

/// How often the purge runs when no notification arrives.
const PURGE_INTERVAL: Duration = Duration::from_secs(60);
/// Pause before trying again after ZooKeeper failed a pass.
const RETRY_AFTER_FAILURE: Duration = Duration::from_millis(500);

pub type ChangeSender = futures_channel::mpsc::UnboundedSender<EntityConfigChange>;

/// Starts the listener; `wake` gets a token whenever `/config/changes`
/// may have new children.
pub fn spawn(
    zk: ZkClient,
    wake: crossbeam_channel::Receiver<()>,
    changes: ChangeSender,
) -> Result<(), String> {
    thread::Builder::new()
        .name("config-change-listener".into())
        .spawn(move || run(zk, wake, changes))
        .map(|_| ())
        .map_err(|e| format!("starting the config change listener: {e}"))
}

fn run(zk: ZkClient, wake: crossbeam_channel::Receiver<()>, changes: ChangeSender) {
    let mut last_applied: Option<u64> = None;
    loop {
        match process_notifications(&zk, last_applied, &changes) {
            Ok(Some(last)) => last_applied = Some(last),
            Ok(None) => {}
            Err(e) => {
                log::warn!("config change notifications: {e}; retrying");
                thread::sleep(RETRY_AFTER_FAILURE);
                continue;
            }
        }
        if changes.is_closed() {
            return;
        }
        match wake.recv_timeout(PURGE_INTERVAL) {
            // Tokens that piled up meanwhile are served by one pass.
            Ok(()) => while wake.try_recv().is_ok() {},
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// One pass; returns the last sequence applied, if any was new.
fn process_notifications(
    zk: &ZkClient,
    last_applied: Option<u64>,
    changes: &ChangeSender,
) -> Result<Option<u64>, String> {
    // Arms the watch before reading, so a change after the read fires it.
    zk.children_watch(CONFIG_CHANGES_PATH)
        .map_err(|e| e.to_string())?;
    let pending = entity::pending_notifications(zk, last_applied).map_err(|e| e.to_string())?;
    let mut last = None;
    for n in pending {
        match entity::classify_entity(&n.entity_path) {
            Ok(e) => {
                let props =
                    entity::fetch_entity_config(zk, &n.entity_path).map_err(|e| e.to_string())?;
                let _ = changes.unbounded_send(EntityConfigChange { entity: e, props });
            }
            Err(e) => log::error!("config change {}: {e}; skipped", n.sequence),
        }
        last = Some(n.sequence);
    }
    let mut store = zk.clone();
    let purged = entity::purge_obsolete_notifications(
        &mut store as &mut dyn MetadataStore,
        crate::util::now_ms() as i64,
        entity::CHANGE_EXPIRATION_MS,
    );
    if purged > 0 {
        log::info!("purged {purged} config change notifications older than 15 minutes");
    }
    Ok(last)
}
