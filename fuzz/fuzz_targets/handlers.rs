//! Every served API through its handler on an in-process single-node broker
//! with real logs: an input is a sequence of requests, each
//! `[api_key: u8][version: u8][body length: u16 BE][body]`; the harness adds
//! the request header (flexible or not, as the API and version say). Seeds:
//! fuzz/seeds/handlers (scripts/fuzz_seeds.py).
#![no_main]
#[path = "common/mod.rs"]
mod common;

use std::time::Duration;

use kshard::server::in_process::Answer;
use libfuzzer_sys::fuzz_target;

/// Requests per input, and how long one may take before it is left running.
const REQUESTS_MAX: usize = 16;
const ANSWER_WAIT: Duration = Duration::from_millis(20);

fn setup(broker: &kshard::server::in_process::InProcessBroker) {
    // A topic to act on from the first request, and a compacted one.
    broker.call(common::create_topic_v4("fz", 3, &[]), Duration::from_secs(10));
    let compact = [("cleanup.policy", "compact")];
    broker.call(common::create_topic_v4("fzc", 1, &compact), Duration::from_secs(10));
}

fuzz_target!(|data: &[u8]| {
    common::with_broker(setup, |broker| {
        let mut rest = data;
        let mut correlation_id = 0;
        while rest.len() >= 4 && correlation_id < REQUESTS_MAX as i32 {
            let api_key = i16::from(rest[0]);
            let version = i16::from(rest[1]);
            let len = usize::from(u16::from_be_bytes([rest[2], rest[3]])).min(rest.len() - 4);
            let body = &rest[4..4 + len];
            rest = &rest[4 + len..];
            let frame = common::frame(api_key, version, correlation_id, body);
            correlation_id += 1;
            if let Answer::Closed(_) = broker.call(frame, ANSWER_WAIT) {
                // The connection would end here.
                return;
            }
        }
    })
});
