//! Record batch validation (headers, CRC, records, decompression) as a
//! Produce request's partition data reaches it.
#![no_main]
use kshard_shards::log::batch::TimestampType;
use kshard_shards::log::validate::{ValidationConfig, Validator};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let cfg = ValidationConfig {
        max_message_bytes: 1 << 20,
        timestamp_type: TimestampType::CreateTime,
        timestamp_before_max_ms: i64::MAX,
        timestamp_after_max_ms: i64::MAX,
        compacted: data.first().is_some_and(|b| b & 1 == 1),
        // The coordinator's marker appends take control batches.
        allow_control_batches: data.first().is_some_and(|b| b & 2 == 2),
    };
    let mut buf = data.to_vec();
    let _ = Validator::new().validate_and_assign_offsets(&mut buf, 0, 0, 0, &cfg);
});
