//! Record batches through validation and append: the input is one batch
//! whose length field, magic and CRC the harness fixes up (so the fuzzer's
//! changes reach the records, compression and producer state), sent in a
//! Produce v3 to a real log of an in-process broker, then read back by a
//! Fetch. The first byte picks the topic (plain or compacted) and acks.
#![no_main]
#[path = "common/mod.rs"]
mod common;

use std::time::Duration;

use libfuzzer_sys::fuzz_target;

const ANSWER_WAIT: Duration = Duration::from_millis(50);
/// The record batch header: offset, length, epoch, magic, crc, attributes...
const BATCH_HEADER_BYTES: usize = 61;

fn setup(broker: &kshard::server::in_process::InProcessBroker) {
    broker.call(common::create_topic_v4("fz", 1, &[]), Duration::from_secs(10));
    let compact = [("cleanup.policy", "compact"), ("segment.bytes", "1048576")];
    broker.call(common::create_topic_v4("fzc", 1, &compact), Duration::from_secs(10));
}

/// Batch length = bytes after the length field; magic 2; CRC-32C over
/// attributes to the end.
fn fix_up(batch: &mut Vec<u8>) {
    if batch.len() < BATCH_HEADER_BYTES {
        batch.resize(BATCH_HEADER_BYTES, 0);
    }
    let len = (batch.len() - 12) as i32;
    batch[8..12].copy_from_slice(&len.to_be_bytes());
    batch[16] = 2;
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

fn produce_v3(topic: &str, acks: i16, batch: &[u8]) -> bytes::Bytes {
    let mut b = Vec::with_capacity(batch.len() + 40);
    b.extend_from_slice(&(-1i16).to_be_bytes()); // transactional_id null
    b.extend_from_slice(&acks.to_be_bytes());
    b.extend_from_slice(&5_000i32.to_be_bytes());
    b.extend_from_slice(&1i32.to_be_bytes());
    common::string(&mut b, topic);
    b.extend_from_slice(&1i32.to_be_bytes());
    b.extend_from_slice(&0i32.to_be_bytes()); // partition
    b.extend_from_slice(&(batch.len() as i32).to_be_bytes());
    b.extend_from_slice(batch);
    common::frame(0, 3, 1, &b)
}

/// Fetch v4 of partition 0 from `offset`, up to 64 KiB, no wait.
fn fetch_v4(topic: &str, offset: i64) -> bytes::Bytes {
    let mut b = Vec::new();
    for v in [-1i32, 0, 1, 65_536] {
        b.extend_from_slice(&v.to_be_bytes());
    }
    b.push(0); // isolation level
    b.extend_from_slice(&1i32.to_be_bytes());
    common::string(&mut b, topic);
    b.extend_from_slice(&1i32.to_be_bytes());
    b.extend_from_slice(&0i32.to_be_bytes());
    b.extend_from_slice(&offset.to_be_bytes());
    b.extend_from_slice(&65_536i32.to_be_bytes());
    common::frame(1, 4, 2, &b)
}

fuzz_target!(|data: &[u8]| {
    let [selector, batch @ ..] = data else {
        return;
    };
    let topic = if selector & 1 == 0 { "fz" } else { "fzc" };
    let acks = [1i16, -1, 0][usize::from(selector >> 1) % 3];
    let mut batch = batch.to_vec();
    fix_up(&mut batch);
    common::with_broker(setup, |broker| {
        broker.call(produce_v3(topic, acks, &batch), ANSWER_WAIT);
        let offset = i64::from(selector >> 4) * 3;
        broker.call(fetch_v4(topic, offset), ANSWER_WAIT);
    })
});
