//! Kafka's ACL change listeners in cluster mode (AclAuthorizer's two
//! ZkNodeChangeNotificationListeners): one `acl-change-listener` thread
//! keeps child watches on `/kafka-acl-changes` and
//! `/kafka-acl-extended-changes`; each time one fires (and after a new
//! session, and once a minute for the purge) it reads the notifications
//! above the last one applied under each root, re-reads each named
//! pattern's znode and puts it in the broker's ACL cache, so an ACL
//! written through any broker (or straight into ZooKeeper by
//! `kafka-acls --authorizer-properties`) applies on every broker. Then it
//! deletes notifications older than 15 minutes, as Kafka's brokers do.

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crate::metadata::acls::{self, CHANGE_PATHS};
use crate::metadata::MetadataStore;
use crate::security::authorizer::AclAuthorizer;
use crate::zk::ZkClient;

const PURGE_INTERVAL: Duration = Duration::from_secs(60);
const RETRY_AFTER_FAILURE: Duration = Duration::from_millis(500);

/// The last sequence applied under each change root, in `CHANGE_PATHS`
/// order.
pub type LastApplied = [Option<u64>; 2];

/// Creates the ACL paths, arms the watches, and fills the cache from the
/// store; returns the notifications already seen, which the listener then
/// skips (their patterns were just read whole).
pub fn load(zk: &mut ZkClient, authorizer: &AclAuthorizer) -> Result<LastApplied, String> {
    acls::ensure_acl_paths(zk).map_err(|e| format!("ACL paths: {e}"))?;
    let mut last: LastApplied = [None, None];
    for (i, root) in CHANGE_PATHS.iter().enumerate() {
        zk.children_watch(root).map_err(|e| e.to_string())?;
        let pending = acls::pending_changes(zk, root, None).map_err(|e| e.to_string())?;
        last[i] = pending.last().map(|n| n.sequence);
    }
    let stored = acls::load_all(zk).map_err(|e| format!("loading ACLs: {e}"))?;
    log::info!("loaded ACLs of {} resource patterns", stored.len());
    for (pattern, set) in stored {
        authorizer.update(pattern, set);
    }
    Ok(last)
}

/// Starts the listener; `wake` gets a token whenever a change root may
/// have new children.
pub fn spawn(
    zk: ZkClient,
    wake: crossbeam_channel::Receiver<()>,
    authorizer: Arc<AclAuthorizer>,
    last: LastApplied,
) -> Result<(), String> {
    thread::Builder::new()
        .name("acl-change-listener".into())
        .spawn(move || run(zk, wake, authorizer, last))
        .map(|_| ())
        .map_err(|e| format!("starting the ACL change listener: {e}"))
}

fn run(
    zk: ZkClient,
    wake: crossbeam_channel::Receiver<()>,
    authorizer: Arc<AclAuthorizer>,
    mut last: LastApplied,
) {
    loop {
        let mut failed = false;
        for (i, root) in CHANGE_PATHS.iter().enumerate() {
            match process(&zk, root, last[i], &authorizer) {
                Ok(Some(seq)) => last[i] = Some(seq),
                Ok(None) => {}
                Err(e) => {
                    log::warn!("ACL change notifications under {root}: {e}; retrying");
                    failed = true;
                }
            }
        }
        // A failed pass may not have armed its watch: retry soon rather
        // than wait for a wake-up that may not come.
        if failed {
            thread::sleep(RETRY_AFTER_FAILURE);
            continue;
        }
        match wake.recv_timeout(PURGE_INTERVAL) {
            Ok(()) => while wake.try_recv().is_ok() {},
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// One pass over one root; returns the last sequence applied, if any was new.
fn process(
    zk: &ZkClient,
    root: &str,
    last_applied: Option<u64>,
    authorizer: &AclAuthorizer,
) -> Result<Option<u64>, String> {
    // Arms the watch before reading, so a change after the read fires it.
    zk.children_watch(root).map_err(|e| e.to_string())?;
    let pending = acls::pending_changes(zk, root, last_applied).map_err(|e| e.to_string())?;
    let mut last = None;
    for change in pending {
        if let Some((pattern, set)) =
            acls::read_change(zk, root, &change).map_err(|e| e.to_string())?
        {
            log::debug!(
                "ACL change {}: {pattern} has {} ACLs",
                change.path,
                set.len()
            );
            authorizer.update(pattern, set);
        }
        last = Some(change.sequence);
    }
    let mut store = zk.clone();
    let purged = acls::purge_obsolete_changes(
        &mut store as &mut dyn MetadataStore,
        root,
        crate::util::now_ms() as i64,
    );
    if purged > 0 {
        log::info!("purged {purged} ACL change notifications under {root}");
    }
    Ok(last)
}
