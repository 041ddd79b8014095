//! The ZooKeeper requests behind `ZkClient`, run on the runtime thread:
//! each takes an owned crate client and maps results to the metadata
//! store's types.

use std::future::Future;
use std::io;
use std::time::{Duration, Instant};

use zookeeper_client as zkc;

use crate::metadata::{Op, OpResult, Stat, StoreError, StoreResult, ANY_VERSION};

/// Pause before re-sending a read that lost its connection; the crate holds
/// new requests until it reconnects, so this only spaces out attempts.
const READ_RETRY_PAUSE: Duration = Duration::from_millis(20);

/// Which of a node's one-shot watches: data/exists watches fire on
/// create/delete/data change, child watches on child create/delete and on
/// the node's own deletion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum WatchClass {
    Data,
    Child,
}

/// A watch the server accepted, handed to the session for bookkeeping.
pub(crate) struct NewWatch {
    pub(crate) path: String,
    pub(crate) class: WatchClass,
    /// czxid of the node watched; None for an exists watch on an absent node.
    pub(crate) czxid: Option<i64>,
    /// What the watch has seen: the node's mzxid for a data watch, its
    /// pzxid for a child watch (0 when absent). A resumed session compares
    /// it with the node's current one, as ZooKeeper's SetWatches does.
    pub(crate) zxid: i64,
    pub(crate) watcher: zkc::OneshotWatcher,
}

pub(crate) fn io_error(kind: io::ErrorKind, what: &str) -> StoreError {
    StoreError::Io(io::Error::new(kind, format!("ZooKeeper: {what}")))
}

pub(crate) fn closed_error() -> StoreError {
    io_error(io::ErrorKind::NotConnected, "client closed")
}

pub(crate) fn timed_out_error(timeout_ms: u64) -> StoreError {
    io_error(
        io::ErrorKind::TimedOut,
        &format!("no response within {timeout_ms} ms"),
    )
}

/// The crate fails requests in flight with whatever broke the connection:
/// ConnectionLoss for a closed socket, a custom error for an I/O error or
/// an unresponsive server.
fn is_connection_loss(err: &zkc::Error) -> bool {
    matches!(err, zkc::Error::ConnectionLoss | zkc::Error::Custom(_))
}

/// Maps a crate error for an operation on `path`.
pub(crate) fn map_error(err: zkc::Error, path: &str) -> StoreError {
    use io::ErrorKind::{ConnectionAborted, Other, TimedOut};
    match err {
        zkc::Error::NoNode => StoreError::NoNode(path.to_string()),
        zkc::Error::NodeExists => StoreError::NodeExists(path.to_string()),
        zkc::Error::BadVersion => StoreError::BadVersion(path.to_string()),
        zkc::Error::NotEmpty => StoreError::NotEmpty(path.to_string()),
        zkc::Error::BadArguments(why) => StoreError::BadArguments(format!("{why} for {path}")),
        e if is_connection_loss(&e) => io_error(
            ConnectionAborted,
            &format!("connection loss for {path} ({e}), outcome unknown"),
        ),
        zkc::Error::SessionExpired | zkc::Error::SessionMoved => {
            io_error(ConnectionAborted, &format!("session expired for {path}"))
        }
        zkc::Error::Timeout => io_error(TimedOut, &format!("timed out for {path}")),
        zkc::Error::ClientClosed | zkc::Error::NoHosts => closed_error(),
        other => io_error(Other, &format!("{other} for {path}")),
    }
}

pub(crate) fn map_stat(stat: &zkc::Stat) -> Stat {
    Stat {
        version: stat.version,
        cversion: stat.cversion,
        ctime_ms: stat.ctime,
        mtime_ms: stat.mtime,
        num_children: stat.num_children,
        ephemeral: stat.ephemeral_owner != 0,
    }
}

fn version(expected_version: i32) -> Option<i32> {
    (expected_version != ANY_VERSION).then_some(expected_version)
}

fn create_mode(ephemeral: bool, sequential: bool) -> zkc::CreateMode {
    match (ephemeral, sequential) {
        (false, false) => zkc::CreateMode::Persistent,
        (false, true) => zkc::CreateMode::PersistentSequential,
        (true, false) => zkc::CreateMode::Ephemeral,
        (true, true) => zkc::CreateMode::EphemeralSequential,
    }
}

/// Re-sends a read that failed on connection loss, until `deadline`.
/// Writes are not retried: their outcome is unknown after a loss.
async fn retry_read<T, F, Fut>(deadline: Instant, mut send: F) -> Result<T, zkc::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, zkc::Error>>,
{
    loop {
        match send().await {
            Err(e) if is_connection_loss(&e) && Instant::now() + READ_RETRY_PAUSE < deadline => {
                tokio::time::sleep(READ_RETRY_PAUSE).await;
            }
            other => return other,
        }
    }
}

pub(crate) async fn create(
    client: zkc::Client,
    path: String,
    data: Vec<u8>,
    ephemeral: bool,
    sequential: bool,
) -> StoreResult<String> {
    let options = create_mode(ephemeral, sequential).with_acls(zkc::Acls::anyone_all());
    match client.create(&path, &data, &options).await {
        Ok((_, sequence)) if sequential => Ok(format!("{path}{sequence}")),
        Ok(_) => Ok(path),
        Err(e) => Err(map_error(e, &path)),
    }
}

pub(crate) async fn get(
    client: zkc::Client,
    path: String,
    deadline: Instant,
) -> StoreResult<(Vec<u8>, Stat)> {
    match retry_read(deadline, || client.get_data(&path)).await {
        Ok((data, stat)) => Ok((data, map_stat(&stat))),
        Err(e) => Err(map_error(e, &path)),
    }
}

pub(crate) async fn set(
    client: zkc::Client,
    path: String,
    data: Vec<u8>,
    expected_version: i32,
) -> StoreResult<Stat> {
    match client
        .set_data(&path, &data, version(expected_version))
        .await
    {
        Ok(stat) => Ok(map_stat(&stat)),
        Err(e) => Err(map_error(e, &path)),
    }
}

pub(crate) async fn delete(
    client: zkc::Client,
    path: String,
    expected_version: i32,
) -> StoreResult<()> {
    client
        .delete(&path, version(expected_version))
        .await
        .map_err(|e| map_error(e, &path))
}

pub(crate) async fn children(
    client: zkc::Client,
    path: String,
    deadline: Instant,
) -> StoreResult<Vec<String>> {
    match retry_read(deadline, || client.list_children(&path)).await {
        Ok(mut names) => {
            names.sort();
            Ok(names)
        }
        Err(e) => Err(map_error(e, &path)),
    }
}

pub(crate) async fn exists(
    client: zkc::Client,
    path: String,
    deadline: Instant,
) -> StoreResult<Option<Stat>> {
    match retry_read(deadline, || client.check_stat(&path)).await {
        Ok(stat) => Ok(stat.as_ref().map(map_stat)),
        Err(e) => Err(map_error(e, &path)),
    }
}

/// The session owning an ephemeral node (0 for a persistent one), or
/// None if the node is absent.
pub(crate) async fn ephemeral_owner(
    client: zkc::Client,
    path: String,
    deadline: Instant,
) -> StoreResult<Option<i64>> {
    match retry_read(deadline, || client.check_stat(&path)).await {
        Ok(stat) => Ok(stat.map(|s| s.ephemeral_owner)),
        Err(e) => Err(map_error(e, &path)),
    }
}

pub(crate) async fn get_watch(
    client: zkc::Client,
    path: String,
    deadline: Instant,
) -> (StoreResult<(Vec<u8>, Stat)>, Option<NewWatch>) {
    match retry_read(deadline, || client.get_and_watch_data(&path)).await {
        Ok((data, stat, watcher)) => {
            let result = Ok((data, map_stat(&stat)));
            let watch = NewWatch {
                path,
                class: WatchClass::Data,
                czxid: Some(stat.czxid),
                zxid: stat.mzxid,
                watcher,
            };
            (result, Some(watch))
        }
        Err(e) => (Err(map_error(e, &path)), None),
    }
}

pub(crate) async fn exists_watch(
    client: zkc::Client,
    path: String,
    deadline: Instant,
) -> (StoreResult<Option<Stat>>, Option<NewWatch>) {
    match retry_read(deadline, || client.check_and_watch_stat(&path)).await {
        Ok((stat, watcher)) => {
            let result = Ok(stat.as_ref().map(map_stat));
            let watch = NewWatch {
                path,
                class: WatchClass::Data,
                czxid: stat.map(|s| s.czxid),
                zxid: stat.map_or(0, |s| s.mzxid),
                watcher,
            };
            (result, Some(watch))
        }
        Err(e) => (Err(map_error(e, &path)), None),
    }
}

pub(crate) async fn children_watch(
    client: zkc::Client,
    path: String,
    deadline: Instant,
) -> (StoreResult<Vec<String>>, Option<NewWatch>) {
    match retry_read(deadline, || client.get_and_watch_children(&path)).await {
        Ok((mut names, stat, watcher)) => {
            names.sort();
            let watch = NewWatch {
                path,
                class: WatchClass::Child,
                czxid: Some(stat.czxid),
                zxid: stat.pzxid,
                watcher,
            };
            (Ok(names), Some(watch))
        }
        Err(e) => (Err(map_error(e, &path)), None),
    }
}

fn op_path(op: &Op) -> &str {
    match op {
        Op::Create { path, .. }
        | Op::SetData { path, .. }
        | Op::Delete { path, .. }
        | Op::Check { path, .. } => path,
    }
}

/// One ZooKeeper multi: all ops apply or none; the first failing op's
/// error is returned with that op's path.
pub(crate) async fn multi(client: zkc::Client, ops: Vec<Op>) -> StoreResult<Vec<OpResult>> {
    if ops.is_empty() {
        return Ok(Vec::new());
    }
    let mut writer = client.new_multi_writer();
    for op in &ops {
        let added = match op {
            Op::Create {
                path,
                data,
                ephemeral,
                sequential,
            } => {
                let options =
                    create_mode(*ephemeral, *sequential).with_acls(zkc::Acls::anyone_all());
                writer.add_create(path, data, &options)
            }
            Op::SetData {
                path,
                data,
                expected_version,
            } => writer.add_set_data(path, data, version(*expected_version)),
            Op::Delete {
                path,
                expected_version,
            } => writer.add_delete(path, version(*expected_version)),
            Op::Check {
                path,
                expected_version,
            } => {
                // ZooKeeper's check takes -1 as "exists, any version" too.
                writer.add_check_version(path, *expected_version)
            }
        };
        added.map_err(|e| map_error(e, op_path(op)))?;
    }
    let results = match writer.commit().await {
        Ok(results) => results,
        Err(zkc::MultiWriteError::OperationFailed { index, source }) => {
            let path = ops.get(index).map(op_path).unwrap_or("multi");
            return Err(map_error(source, path));
        }
        Err(zkc::MultiWriteError::RequestFailed { source }) => {
            return Err(map_error(source, "multi"));
        }
    };
    if results.len() != ops.len() {
        return Err(io_error(
            io::ErrorKind::InvalidData,
            &format!(
                "multi of {} ops answered with {} results",
                ops.len(),
                results.len()
            ),
        ));
    }
    let mut out = Vec::with_capacity(results.len());
    for result in results {
        out.push(match result {
            zkc::MultiWriteResult::Create { path, .. } => OpResult::Created(path),
            zkc::MultiWriteResult::SetData { stat } => OpResult::Set(map_stat(&stat)),
            zkc::MultiWriteResult::Delete => OpResult::Deleted,
            zkc::MultiWriteResult::Check => OpResult::Checked,
            other => {
                return Err(io_error(
                    io::ErrorKind::InvalidData,
                    &format!("unexpected multi result {other:?}"),
                ))
            }
        });
    }
    Ok(out)
}

/// Creates `path` and its missing ancestors as empty persistent nodes,
/// ignoring those that exist: Kafka's `makeSurePersistentPathExists`.
pub(crate) async fn ensure_path(client: &zkc::Client, path: &str) -> Result<(), zkc::Error> {
    let options = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
    let mut end = 0;
    while end < path.len() {
        end = path[end + 1..]
            .find('/')
            .map_or(path.len(), |i| end + 1 + i);
        match client.create(&path[..end], &[], &options).await {
            Ok(_) | Err(zkc::Error::NodeExists) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
