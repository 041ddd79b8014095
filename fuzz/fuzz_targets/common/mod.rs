//! Shared by the targets that run an in-process broker: one broker per
//! process, reused across inputs, started afresh (new directory) when its
//! state has grown past a bound.

use std::cell::RefCell;
use std::path::PathBuf;

use kshard::server::in_process::InProcessBroker;

/// Inputs per broker, and partitions in its image, before a fresh start.
const INPUTS_PER_BROKER: u64 = 20_000;
const PARTITIONS_MAX: usize = 2_000;

struct Slot {
    broker: Option<InProcessBroker>,
    dir: PathBuf,
    inputs: u64,
    generation: u64,
}

/// At process exit the broker is left as it is: dropping it runs its
/// executor while the thread-locals it uses are being destroyed, which
/// panics (libFuzzer reported that as a crash at the end of every job).
impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(broker) = self.broker.take() {
            std::mem::forget(broker);
        }
    }
}

thread_local! {
    static SLOT: RefCell<Slot> = RefCell::new(Slot {
        broker: None,
        dir: PathBuf::new(),
        inputs: 0,
        generation: 0,
    });
}

/// The authorizer is on, so every request goes through its checks and the
/// ACL APIs write to the store; with no ACL everyone is allowed, so the
/// other handlers are reached too (until an input writes a DENY).
const BROKER_OVERRIDES: &[(&str, &str)] = &[
    ("authorizer.class.name", "kafka.security.authorizer.AclAuthorizer"),
    ("allow.everyone.if.no.acl.found", "true"),
];

/// Runs `f` with the process's broker; `setup` runs once per fresh broker.
pub fn with_broker<R>(
    setup: impl FnOnce(&InProcessBroker),
    f: impl FnOnce(&InProcessBroker) -> R,
) -> R {
    SLOT.with(|slot| {
        let mut slot = slot.borrow_mut();
        let stale = slot.broker.as_ref().is_some_and(|b| {
            slot.inputs >= INPUTS_PER_BROKER || b.partition_count() > PARTITIONS_MAX
        });
        if stale {
            slot.broker = None;
            let _ = std::fs::remove_dir_all(&slot.dir);
        }
        if slot.broker.is_none() {
            slot.generation += 1;
            let base = std::env::var_os("KSHARD_FUZZ_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(std::env::temp_dir);
            slot.dir = base.join(format!(
                "kshard-fuzz-{}-{}",
                std::process::id(),
                slot.generation
            ));
            let _ = std::fs::remove_dir_all(&slot.dir);
            let broker = InProcessBroker::start(&slot.dir, BROKER_OVERRIDES).expect("in-process broker");
            setup(&broker);
            slot.broker = Some(broker);
            slot.inputs = 0;
        }
        slot.inputs += 1;
        f(slot.broker.as_ref().expect("broker"))
    })
}

/// A request frame (no size prefix): the header for `api_key`/`version`
/// (flexible or not, as the API says), then `body` as it is.
pub fn frame(api_key: i16, version: i16, correlation_id: i32, body: &[u8]) -> bytes::Bytes {
    use kafka_protocol::messages::ApiKey;
    let mut f = Vec::with_capacity(body.len() + 16);
    f.extend_from_slice(&api_key.to_be_bytes());
    f.extend_from_slice(&version.to_be_bytes());
    f.extend_from_slice(&correlation_id.to_be_bytes());
    f.extend_from_slice(&4i16.to_be_bytes());
    f.extend_from_slice(b"fuzz");
    let flexible = ApiKey::try_from(api_key)
        .map(|k| k.request_header_version(version) >= 2)
        .unwrap_or(false);
    if flexible {
        f.push(0); // no tagged fields
    }
    f.extend_from_slice(body);
    bytes::Bytes::from(f)
}

/// Kafka STRING.
pub fn string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as i16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// CreateTopics v4 for one topic with 1 partition, replication 1, `configs`.
pub fn create_topic_v4(name: &str, partitions: i32, configs: &[(&str, &str)]) -> bytes::Bytes {
    let mut b = Vec::new();
    b.extend_from_slice(&1i32.to_be_bytes());
    string(&mut b, name);
    b.extend_from_slice(&partitions.to_be_bytes());
    b.extend_from_slice(&1i16.to_be_bytes());
    b.extend_from_slice(&0i32.to_be_bytes()); // assignments
    b.extend_from_slice(&(configs.len() as i32).to_be_bytes());
    for (k, v) in configs {
        string(&mut b, k);
        string(&mut b, v);
    }
    b.extend_from_slice(&30_000i32.to_be_bytes());
    b.push(0); // validate_only
    frame(19, 4, 0, &b)
}
