//! The broker's request path outside the log: framing and decoding a
//! Produce request (8 partitions of one 64 KiB batch each, as a producer
//! pipelines them), decoding a Fetch request for 8 partitions, and
//! assembling a Fetch response whose records stay in segment files.

use std::hint::black_box;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, FetchRequest, ProduceRequest, RequestHeader, TopicName};
use kafka_protocol::protocol::{Encodable, HeaderVersion, StrBytes};
use kshard::protocol::fetch_encoder::{
    encode_fetch_response, FetchPartitionData, FetchResponseData, FetchTopicData, RecordsData,
};
use kshard::protocol::{decode_body, parse_request};
use kshard_shards::log::records::BatchBuilder;
use kshard_shards::log::FileSlice;

const PARTITIONS: i32 = 8;
const BATCH_BYTES: usize = 64 * 1024;

/// A whole request frame (header and body, no size prefix).
fn frame<M: Encodable + HeaderVersion>(key: ApiKey, version: i16, body: &M) -> Bytes {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(StrBytes::from_static_str("bench")));
    let mut buf = BytesMut::new();
    header
        .encode(&mut buf, M::header_version(version))
        .expect("header");
    body.encode(&mut buf, version).expect("body");
    buf.freeze()
}

fn batch_of(value_bytes: usize) -> Bytes {
    let mut b = BatchBuilder::new(0).producer(1, 0, 0);
    let value = vec![b'x'; value_bytes];
    let mut size = 0;
    let mut i = 0i64;
    while size + value_bytes + 16 < BATCH_BYTES {
        b.push(1_700_000_000_000 + i, None, Some(&value), &[]);
        size += value_bytes + 16;
        i += 1;
    }
    Bytes::from(b.build())
}

fn produce_frame(value_bytes: usize) -> Bytes {
    let batch = batch_of(value_bytes);
    let partitions = (0..PARTITIONS)
        .map(|p| {
            PartitionProduceData::default()
                .with_index(p)
                .with_records(Some(batch.clone()))
        })
        .collect();
    let req = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str("bench")))
            .with_partition_data(partitions)]);
    frame(ApiKey::Produce, 9, &req)
}

fn fetch_frame() -> Bytes {
    let partitions = (0..PARTITIONS)
        .map(|p| {
            FetchPartition::default()
                .with_partition(p)
                .with_fetch_offset(1_000_000)
                .with_partition_max_bytes(1 << 20)
        })
        .collect();
    let req = FetchRequest::default()
        .with_max_wait_ms(500)
        .with_min_bytes(1)
        .with_max_bytes(50 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_static_str("bench")))
            .with_partitions(partitions)]);
    frame(ApiKey::Fetch, 12, &req)
}

fn decode(c: &mut Criterion) {
    let host: Arc<str> = Arc::from("/127.0.0.1");
    let mut group = c.benchmark_group("request_decode");
    for value_bytes in [100usize, 1024] {
        let f = produce_frame(value_bytes);
        group.throughput(Throughput::Bytes(f.len() as u64));
        group.bench_function(format!("produce_8x64KiB_{value_bytes}B_records"), |b| {
            b.iter(|| {
                let req = parse_request(black_box(f.clone()), &host).expect("frame");
                let body: ProduceRequest = decode_body(&req).expect("body");
                black_box(body.topic_data.len())
            })
        });
    }
    let f = fetch_frame();
    group.throughput(Throughput::Elements(1));
    group.bench_function("fetch_8_partitions", |b| {
        b.iter(|| {
            let req = parse_request(black_box(f.clone()), &host).expect("frame");
            let body: FetchRequest = decode_body(&req).expect("body");
            black_box(body.topics.len())
        })
    });
    group.finish();
}

fn fetch_assembly(c: &mut Criterion) {
    let file = Arc::new(std::fs::File::open("/dev/null").expect("/dev/null"));
    let mut group = c.benchmark_group("fetch_assembly");
    for partitions in [8i32, 128] {
        group.throughput(Throughput::Elements(partitions as u64));
        group.bench_function(format!("{partitions}_partitions_file_slices"), |b| {
            b.iter(|| {
                let parts = (0..partitions)
                    .map(|p| FetchPartitionData {
                        partition: p,
                        error_code: 0,
                        high_watermark: 1_000_000,
                        last_stable_offset: 1_000_000,
                        log_start_offset: 0,
                        diverging_epoch: None,
                        current_leader: None,
                        aborted_transactions: None,
                        records: RecordsData::File(FileSlice {
                            file: file.clone(),
                            position: 4096 * p as u64,
                            len: 1 << 20,
                            direct: false,
                            may_be_cold: false,
                            cached: None,
                        }),
                    })
                    .collect();
                let data = FetchResponseData {
                    throttle_time_ms: 0,
                    error_code: 0,
                    session_id: 1,
                    topics: vec![FetchTopicData {
                        name: "bench".to_string(),
                        topic_id: uuid::Uuid::nil(),
                        partitions: parts,
                    }],
                };
                black_box(
                    encode_fetch_response(12, 7, data)
                        .expect("encodable")
                        .chunks
                        .len(),
                )
            })
        });
    }
    group.finish();
}

criterion_group!(benches, decode, fetch_assembly);
criterion_main!(benches);
