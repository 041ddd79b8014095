//! Shard executors: one glommio `LocalExecutor` per shard, pinned to a core.

use std::io;

use glommio::{LocalExecutorBuilder, Placement};

/// The CPUs this process may run on, in order (sched_getaffinity via core_affinity).
pub fn available_cores() -> Vec<usize> {
    let mut ids: Vec<usize> = core_affinity::get_core_ids()
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.id)
        .collect();
    ids.sort_unstable();
    if ids.is_empty() {
        ids.push(0);
    }
    ids
}

/// Starts `nr_shards` executors, shard i pinned to the i-th available core
/// (wrapping when there are more shards than cores), each running `body(i)`,
/// and waits for all of them to finish.
pub fn run_shards<F, Fut>(nr_shards: usize, pin: bool, body: F) -> io::Result<()>
where
    F: Fn(usize) -> Fut + Send + Clone + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    assert!(nr_shards >= 1);
    let cores = available_cores();
    let mut handles = Vec::with_capacity(nr_shards);
    for shard_id in 0..nr_shards {
        let placement = if pin {
            Placement::Fixed(cores[shard_id % cores.len()])
        } else {
            Placement::Unbound
        };
        let body = body.clone();
        let handle = LocalExecutorBuilder::new(placement)
            .name(&format!("shard-{shard_id}"))
            .spawn(move || body(shard_id))
            .map_err(|e| io::Error::other(format!("starting shard {shard_id}: {e}")))?;
        handles.push(handle);
    }
    for (i, h) in handles.into_iter().enumerate() {
        h.join()
            .map_err(|e| io::Error::other(format!("shard {i} failed: {e}")))?;
    }
    Ok(())
}
