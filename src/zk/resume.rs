//! Keeping a session across a long outage, as ZooKeeper's Java client does.
//!
//! The crate ends a session on its own side once it has been unable to
//! reach any server for 7/5 of the session timeout, and reports it as
//! expired. The Java client never gives up like that: it keeps
//! reconnecting with the session's id and password, and only the server's
//! answer ends the session. A ZooKeeper restarted on its data restores its
//! sessions with fresh timeouts, so Kafka's brokers keep their sessions,
//! ephemeral nodes and watches across any outage that ends in a restart;
//! a client that gave up instead would build a new session while the old
//! one still owned its ephemeral nodes.
//!
//! So a session the crate reports expired is first resumed: a new crate
//! client attaches to the same session id and password, retrying until the
//! server either accepts it (the session lives on) or says it expired. The
//! new client has none of the old one's watches, so they are set again here
//! with the old client's SetWatches semantics: a watch whose node changed
//! meanwhile fires at once instead (the owner re-reads and re-arms it), one
//! whose node did not change is armed again silently.

use std::time::{Duration, Instant};

use zookeeper_client as zkc;

use super::ops::{NewWatch, WatchClass};
use super::session::Settings;
use super::NodeEventKind;

/// A watch pending in the old client: what it watched and what it saw.
pub(crate) struct Armed {
    pub(crate) path: String,
    pub(crate) class: WatchClass,
    /// None for an exists watch on an absent node.
    pub(crate) czxid: Option<i64>,
    /// mzxid (data watch) or pzxid (child watch) when armed.
    pub(crate) zxid: i64,
}

/// The result of setting a resumed session's watches again.
#[derive(Default)]
pub(crate) struct Rearmed {
    /// Watches armed again (their nodes did not change).
    pub(crate) watches: Vec<NewWatch>,
    /// Watches that fired instead, in the order they were pending.
    pub(crate) events: Vec<(NodeEventKind, String)>,
}

/// Why a resume attempt did not give a client.
pub(crate) enum ResumeError {
    /// The server answered: the session is gone.
    Expired,
    /// No answer (server down or unresponsive); worth trying again.
    Failed(String),
}

/// One attempt to attach a new client to `session`, bounded by the session
/// timeout; the chroot is applied as for a new session.
pub(crate) async fn resume_session(
    settings: &Settings,
    session: zkc::SessionInfo,
) -> Result<zkc::Client, ResumeError> {
    let hosts = settings.connect.hosts();
    let attempt = zkc::Client::connector()
        .with_session(session)
        .with_session_timeout(settings.session_timeout)
        .connect(&hosts);
    let client = match tokio::time::timeout(settings.session_timeout, attempt).await {
        Ok(Ok(client)) => client,
        Ok(Err(zkc::Error::SessionExpired | zkc::Error::SessionMoved)) => {
            return Err(ResumeError::Expired)
        }
        Ok(Err(e)) => return Err(ResumeError::Failed(e.to_string())),
        Err(_) => return Err(ResumeError::Failed("no answer".into())),
    };
    match settings.connect.chroot.as_deref() {
        None => Ok(client),
        Some(chroot) => client
            .chroot(chroot.to_string())
            .map_err(|_| ResumeError::Failed(format!("invalid chroot {chroot}"))),
    }
}

/// Resumes `session`, retrying with backoff for as long as no server
/// answers; None once a server says the session expired.
pub(crate) async fn resume_until_answered(
    settings: Settings,
    session: zkc::SessionInfo,
    backoff_start: Duration,
    backoff_max: Duration,
) -> Option<zkc::Client> {
    let mut backoff = backoff_start;
    loop {
        match resume_session(&settings, session.clone()).await {
            Ok(client) => return Some(client),
            Err(ResumeError::Expired) => return None,
            Err(ResumeError::Failed(why)) => {
                log::debug!(
                    "Resuming ZooKeeper session 0x{:x} failed ({why}), retrying",
                    session.id().0
                );
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(backoff_max);
            }
        }
    }
}

/// Sets `armed` again on the resumed session's `client`, comparing each
/// node with what its watch had seen (ZooKeeper's SetWatches: a data watch
/// fires Deleted or DataChanged, an exists watch Created, a child watch
/// Deleted or ChildrenChanged). A node's deletion is reported once even
/// when both of its watches were pending.
pub(crate) async fn rearm(client: zkc::Client, armed: Vec<Armed>, deadline: Instant) -> Rearmed {
    let mut out = Rearmed::default();
    // As after any session re-establishment: catch up with the leader
    // before comparing (a failure only makes more watches fire).
    let _ = tokio::time::timeout_at(deadline.into(), client.sync("/")).await;
    for watch in armed {
        let fired = match watch.class {
            WatchClass::Data => rearm_data(&client, watch, deadline, &mut out.watches).await,
            WatchClass::Child => rearm_child(&client, watch, deadline, &mut out.watches).await,
        };
        if let Some((kind, path)) = fired {
            let seen = kind == NodeEventKind::Deleted
                && out.events.iter().any(|(k, p)| *k == kind && *p == path);
            if !seen {
                out.events.push((kind, path));
            }
        }
    }
    out
}

/// The event to report for a watch that could not be set again: the owner
/// re-reads the node, which is what the event asks of it anyway.
fn unknown(watch: &Armed, why: &zkc::Error) -> Option<(NodeEventKind, String)> {
    log::warn!(
        "Setting the watch on {} again failed ({why}); reporting it fired",
        watch.path
    );
    let kind = match watch.class {
        WatchClass::Data => NodeEventKind::DataChanged,
        WatchClass::Child => NodeEventKind::ChildrenChanged,
    };
    Some((kind, watch.path.clone()))
}

async fn rearm_data(
    client: &zkc::Client,
    watch: Armed,
    deadline: Instant,
    armed: &mut Vec<NewWatch>,
) -> Option<(NodeEventKind, String)> {
    let stat = tokio::time::timeout_at(deadline.into(), client.check_and_watch_stat(&watch.path))
        .await
        .unwrap_or(Err(zkc::Error::Timeout));
    let (stat, watcher) = match stat {
        Ok(found) => found,
        Err(e) => return unknown(&watch, &e),
    };
    let kind = match (watch.czxid, stat) {
        (None, Some(_)) => NodeEventKind::Created,
        (Some(_), None) => NodeEventKind::Deleted,
        (Some(czxid), Some(s)) if s.czxid != czxid || s.mzxid != watch.zxid => {
            NodeEventKind::DataChanged
        }
        (czxid, stat) => {
            armed.push(NewWatch {
                path: watch.path,
                class: WatchClass::Data,
                czxid,
                zxid: stat.map_or(0, |s| s.mzxid),
                watcher,
            });
            return None;
        }
    };
    Some((kind, watch.path))
}

async fn rearm_child(
    client: &zkc::Client,
    watch: Armed,
    deadline: Instant,
    armed: &mut Vec<NewWatch>,
) -> Option<(NodeEventKind, String)> {
    let listed =
        tokio::time::timeout_at(deadline.into(), client.get_and_watch_children(&watch.path))
            .await
            .unwrap_or(Err(zkc::Error::Timeout));
    match listed {
        Err(zkc::Error::NoNode) => Some((NodeEventKind::Deleted, watch.path)),
        Err(e) => unknown(&watch, &e),
        Ok((_, stat, _)) if Some(stat.czxid) != watch.czxid || stat.pzxid != watch.zxid => {
            Some((NodeEventKind::ChildrenChanged, watch.path))
        }
        Ok((_, stat, watcher)) => {
            armed.push(NewWatch {
                path: watch.path,
                class: WatchClass::Child,
                czxid: Some(stat.czxid),
                zxid: stat.pzxid,
                watcher,
            });
            None
        }
    }
}
