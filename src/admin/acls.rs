//! CreateAcls and DeleteAcls against the broker's store: ZooKeeper in
//! cluster mode (on the ZooKeeper worker thread, with change
//! notifications every broker's listener follows), the embedded store on
//! a single broker (on the controller shard, no notifications: the one
//! cache is updated here). Either way the writes are conditional on the
//! znode versions read (`metadata::acls`), and the authorizer's cache
//! takes the new sets once they are durable.

use crate::admin::embedded::{store_synced, EmbeddedAdmin};
use crate::admin::{AdminError, AdminResult, TopicAdmin};
use crate::metadata::{acls, MetadataStore, StoreResult};
use crate::protocol::errors;
use crate::router::CONTROLLER_SHARD;
use crate::security::authorizer::{
    AclAuthorizer, AclBinding, AclBindingFilter, AclCache, AclWrite, CreateAclsPlan, DeleteAclsPlan,
};

fn store_err(e: impl std::fmt::Display) -> AdminError {
    AdminError::new(errors::UNKNOWN_SERVER_ERROR, format!("metadata store: {e}"))
}

/// A single broker: creates the ACL paths and fills the cache from the
/// embedded store, before any shard serves.
pub fn load_embedded(admin: &mut EmbeddedAdmin, authorizer: &AclAuthorizer) -> Result<(), String> {
    acls::ensure_acl_paths(admin.store_mut()).map_err(|e| format!("ACL paths: {e}"))?;
    let stored = acls::load_all(admin.store()).map_err(|e| format!("loading ACLs: {e}"))?;
    log::info!("loaded ACLs of {} resource patterns", stored.len());
    for (pattern, set) in stored {
        authorizer.update(pattern, set);
    }
    Ok(())
}

fn apply(authorizer: &AclAuthorizer, writes: &[AclWrite]) {
    for w in writes {
        authorizer.update(w.pattern.clone(), w.acls.clone());
    }
}

/// AclAuthorizer.createAcls: the plan as written.
pub async fn create(
    ctx: &TopicAdmin,
    authorizer: &AclAuthorizer,
    creations: Vec<AclBinding>,
) -> AdminResult<CreateAclsPlan> {
    let plan = in_store(ctx, authorizer, move |store, cache, notify| {
        acls::create_in_store(store, cache, &creations, notify)
    })
    .await?;
    apply(authorizer, &plan.writes);
    Ok(plan)
}

/// AclAuthorizer.deleteAcls: the plan as written.
pub async fn delete(
    ctx: &TopicAdmin,
    authorizer: &AclAuthorizer,
    filters: Vec<AclBindingFilter>,
) -> AdminResult<DeleteAclsPlan> {
    let plan = in_store(ctx, authorizer, move |store, cache, notify| {
        acls::delete_in_store(store, cache, &filters, notify)
    })
    .await?;
    apply(authorizer, &plan.writes);
    Ok(plan)
}

/// Runs `f` against the store from a snapshot of the cache: on the
/// ZooKeeper worker with notifications, or on the embedded store (then
/// synced) without.
async fn in_store<P: Send + 'static>(
    ctx: &TopicAdmin,
    authorizer: &AclAuthorizer,
    f: impl FnOnce(&mut dyn MetadataStore, &AclCache, bool) -> StoreResult<P> + Send + 'static,
) -> AdminResult<P> {
    let snapshot = authorizer.cache().clone();
    if let Some(cluster) = &ctx.cluster {
        return cluster
            .zk_call(move |zk| f(zk, &snapshot, true))
            .await
            .map_err(store_err)?
            .map_err(store_err);
    }
    let admin = embedded(ctx);
    let plan = f(admin.borrow_mut().store_mut(), &snapshot, false).map_err(store_err)?;
    store_synced(admin).await;
    Ok(plan)
}

fn embedded(ctx: &TopicAdmin) -> &std::cell::RefCell<EmbeddedAdmin> {
    assert_eq!(ctx.shard_id, CONTROLLER_SHARD);
    ctx.embedded.as_ref().expect("the controller shard")
}
