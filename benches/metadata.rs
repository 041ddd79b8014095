//! The metadata image every shard reads (`metadata/metadata_cache.rs`) and
//! what a change to it costs shard 0, against the number of topics (one
//! partition each):
//!
//! - `image/load_full`: `MetadataCache::image()`, which Produce and Fetch
//!   call once per request on every shard (an atomic increment and decrement
//!   of the image's shared reference count); `_contended` with another
//!   thread loading in a loop, so the count's cache line moves between
//!   cores. `arc_swap_load_guard_contended` is arc-swap's `load()` (a
//!   per-thread debt slot, no shared write) under the same contention.
//! - `image/with_topic/N`: the embedded admin's publish after CreateTopics
//!   (`MetadataImage::with_topic` clones both maps of an N-topic image).
//! - `update_metadata/one_topic/N`: `apply_update_metadata` for one
//!   partition state (an ISR or leader change) into an N-topic image;
//!   `update_metadata/all_topics/N`: a full UpdateMetadata naming all N
//!   topics (controller failover, broker start-up), which calls
//!   `with_topic` once per topic.

use std::collections::{BTreeMap, HashMap};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use kshard::config::{BrokerConfig, TopicConfig};
use kshard::metadata::image::apply_update_metadata;
use kshard::metadata::metadata_cache::{
    BrokerInfo, ListenerEndpoint, MetadataCache, MetadataImage, PartitionInfo, TopicInfo,
};
use kshard::protocol::inter_broker::{
    UpdateMetadataBroker, UpdateMetadataEndpoint, UpdateMetadataPartitionState,
    UpdateMetadataRequest, UpdateMetadataTopicState,
};
use uuid::Uuid;

const TOPIC_COUNTS: [usize; 3] = [100, 1_000, 10_000];
/// The full update is quadratic in topics: 10,000 would take minutes.
const FULL_UPDATE_TOPIC_COUNTS: [usize; 3] = [100, 1_000, 3_000];

fn topic_name(i: usize) -> String {
    format!("topic-{i:05}")
}

fn topic(config: &Arc<TopicConfig>, name: String) -> TopicInfo {
    TopicInfo {
        name,
        topic_id: Uuid::new_v4(),
        partitions: vec![PartitionInfo {
            partition: 0,
            leader: 0,
            leader_epoch: 0,
            replicas: vec![0],
            isr: vec![0],
            offline_replicas: Vec::new(),
        }],
        overrides: BTreeMap::new(),
        config: config.clone(),
        is_internal: false,
    }
}

fn image_of(config: &Arc<TopicConfig>, topics: usize) -> MetadataImage {
    let mut image = MetadataImage {
        cluster_id: "bench".into(),
        controller_id: 0,
        brokers: vec![BrokerInfo {
            id: 0,
            host: "127.0.0.1".into(),
            port: 9092,
            rack: None,
            endpoints: vec![ListenerEndpoint {
                listener_name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 9092,
            }],
        }],
        ..Default::default()
    };
    for i in 0..topics {
        let t = topic(config, topic_name(i));
        image.topic_names_by_id.insert(t.topic_id, t.name.clone());
        image.topics.insert(t.name.clone(), Arc::new(t));
    }
    image
}

/// UpdateMetadata v7 naming `names`, each partition 0 led by broker 0 at epoch 1.
fn update_metadata(image: &MetadataImage, names: &[String]) -> UpdateMetadataRequest {
    let topic_states = names
        .iter()
        .map(|name| UpdateMetadataTopicState {
            topic_name: name.clone(),
            topic_id: image.topics[name].topic_id,
            partition_states: vec![UpdateMetadataPartitionState {
                partition_index: 0,
                leader: 0,
                leader_epoch: 1,
                isr: vec![0],
                replicas: vec![0],
                ..Default::default()
            }],
        })
        .collect();
    UpdateMetadataRequest {
        topic_states,
        live_brokers: vec![UpdateMetadataBroker {
            id: 0,
            endpoints: vec![UpdateMetadataEndpoint {
                port: 9092,
                host: "127.0.0.1".into(),
                listener: "PLAINTEXT".into(),
                security_protocol: 0,
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// Runs `load` in a loop on another thread while `f` runs.
fn with_loader<L: Fn() + Send + 'static>(load: L, f: impl FnOnce()) {
    let stop = Arc::new(AtomicBool::new(false));
    let loader = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                load();
            }
        })
    };
    f();
    stop.store(true, Ordering::Relaxed);
    loader.join().expect("loader thread");
}

fn loads(c: &mut Criterion, config: &Arc<TopicConfig>) {
    let mut g = c.benchmark_group("image");
    g.throughput(Throughput::Elements(1));
    let cache = Arc::new(MetadataCache::new(image_of(config, 1_000)));
    g.bench_function("load_full", |b| b.iter(|| black_box(cache.image())));
    let other = cache.clone();
    with_loader(
        move || drop(black_box(other.image())),
        || {
            g.bench_function("load_full_contended", |b| {
                b.iter(|| black_box(cache.image()))
            });
        },
    );
    let swap = Arc::new(ArcSwap::from_pointee(image_of(config, 1_000)));
    let other = swap.clone();
    with_loader(
        move || drop(black_box(other.load())),
        || {
            g.bench_function("arc_swap_load_guard_contended", |b| {
                b.iter(|| black_box(swap.load().topics.len()))
            });
        },
    );
    g.finish();
}

fn changes(c: &mut Criterion, broker: &BrokerConfig, config: &Arc<TopicConfig>) {
    let mut g = c.benchmark_group("image");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(3));
    for n in TOPIC_COUNTS {
        let image = image_of(config, n);
        let new_topic = topic(config, "created".into());
        g.bench_with_input(BenchmarkId::new("with_topic", n), &n, |b, _| {
            b.iter(|| black_box(image.with_topic(new_topic.clone())))
        });
    }
    g.finish();
    let mut g = c.benchmark_group("update_metadata");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(3));
    let no_configs = HashMap::new();
    for n in TOPIC_COUNTS {
        let image = image_of(config, n);
        let req = update_metadata(&image, &[topic_name(n / 2)]);
        g.bench_with_input(BenchmarkId::new("one_topic", n), &n, |b, _| {
            b.iter(|| black_box(apply_update_metadata(&image, &req, broker, &no_configs)))
        });
    }
    for n in FULL_UPDATE_TOPIC_COUNTS {
        let image = image_of(config, n);
        let names: Vec<String> = (0..n).map(topic_name).collect();
        let req = update_metadata(&image, &names);
        g.bench_with_input(BenchmarkId::new("all_topics", n), &n, |b, _| {
            b.iter(|| black_box(apply_update_metadata(&image, &req, broker, &no_configs)))
        });
    }
    g.finish();
}

fn metadata(c: &mut Criterion) {
    let broker = BrokerConfig::from_map(&BTreeMap::new()).expect("default broker config");
    let config = Arc::new(
        TopicConfig::from_overrides(&broker, &BTreeMap::new()).expect("default topic config"),
    );
    loads(c, &config);
    changes(c, &broker, &config);
}

criterion_group!(benches, metadata);
criterion_main!(benches);
