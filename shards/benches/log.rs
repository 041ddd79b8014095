//! Segment log hot paths: append of 16 KiB batches (buffered and direct
//! I/O; buffered also as the produce path does it, patching a copy of the
//! request or writing it as received beside its new header), offset-index lookups at 1e4 and 1e6 entries, and batch header
//! parse + CRC32C. Direct mode needs O_DIRECT, so its log lives in the
//! target dir (next to the bench binary), not in a possibly-tmpfs /tmp.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use kshard_shards::log::batch::{
    self, BatchHeader, CRC_OFFSET, CURRENT_MAGIC, LOG_OVERHEAD, RECORD_BATCH_OVERHEAD,
};
use kshard_shards::log::config::IoMode;
use kshard_shards::log::offset_index::OffsetIndex;
use kshard_shards::log::patched::{PatchedHeader, PatchedRecords};
use kshard_shards::log::segment::DiskFile;
use kshard_shards::log::{Log, LogAppendInfo, LogConfig};

const BATCH_BYTES: usize = 16 * 1024;
const RECORDS_PER_BATCH: i32 = 16;

/// A v2 batch of `BATCH_BYTES` with a valid header and CRC; the record bytes
/// are opaque filler (the log never parses them on append).
fn batch_16k(base_offset: i64, timestamp: i64) -> Vec<u8> {
    let mut b = vec![0x5au8; BATCH_BYTES];
    b[0..8].copy_from_slice(&base_offset.to_be_bytes());
    b[8..12].copy_from_slice(&((BATCH_BYTES - LOG_OVERHEAD) as i32).to_be_bytes());
    b[12..16].copy_from_slice(&0i32.to_be_bytes());
    b[16] = CURRENT_MAGIC;
    b[21..23].copy_from_slice(&0i16.to_be_bytes());
    b[23..27].copy_from_slice(&(RECORDS_PER_BATCH - 1).to_be_bytes());
    b[27..35].copy_from_slice(&timestamp.to_be_bytes());
    b[35..43].copy_from_slice(&timestamp.to_be_bytes());
    b[43..51].copy_from_slice(&(-1i64).to_be_bytes());
    b[51..53].copy_from_slice(&(-1i16).to_be_bytes());
    b[53..57].copy_from_slice(&(-1i32).to_be_bytes());
    b[57..61].copy_from_slice(&RECORDS_PER_BATCH.to_be_bytes());
    debug_assert!(b.len() > RECORD_BATCH_OVERHEAD);
    let crc = batch::compute_crc(&b);
    b[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    b
}

fn append_info_at(first: i64, now_ms: i64, len: usize) -> LogAppendInfo {
    LogAppendInfo {
        first_offset: first,
        last_offset: first + RECORDS_PER_BATCH as i64 - 1,
        max_timestamp: now_ms,
        offset_of_max_timestamp: first + RECORDS_PER_BATCH as i64 - 1,
        log_append_time_ms: -1,
        record_count: RECORDS_PER_BATCH as u32,
        batch_count: 1,
        valid_bytes: len,
    }
}

/// A scratch dir that supports O_DIRECT for `Direct`.
fn bench_dir(mode: IoMode) -> tempfile::TempDir {
    match mode {
        IoMode::Buffered | IoMode::BufferedOffload => tempfile::tempdir().expect("tempdir"),
        IoMode::Direct => {
            let exe = std::env::current_exe().expect("exe");
            tempfile::Builder::new()
                .prefix("kshard-bench-")
                .tempdir_in(exe.parent().expect("exe dir"))
                .expect("tempdir")
        }
    }
}

fn bench_append(c: &mut Criterion) {
    let now_ms = 1_700_000_000_000;
    let mut records = batch_16k(0, now_ms);
    let mut group = c.benchmark_group("log_append");
    group.throughput(Throughput::Bytes(BATCH_BYTES as u64));
    for (mode, name) in [(IoMode::Buffered, "buffered"), (IoMode::Direct, "direct")] {
        let dir = bench_dir(mode);
        let config = LogConfig {
            segment_bytes: 64 * 1024 * 1024,
            io_mode: mode,
            ..LogConfig::default()
        };
        let (mut log, _) =
            Log::open(&dir.path().join("bench-0"), config, 0, 0, now_ms).expect("open");
        group.bench_function(format!("16KiB_batch_{name}"), |b| {
            b.iter(|| {
                let first = log.log_end_offset();
                // The base offset is outside the CRC, as in the real produce path.
                batch::set_base_offset(&mut records, first);
                let info = append_info_at(first, now_ms, records.len());
                if log
                    .append(&records, &info, now_ms)
                    .expect("append")
                    .is_some()
                {
                    // Keep the disk footprint bounded: drop everything but the new segment.
                    let end = log.log_end_offset();
                    log.delete_records_before(end).expect("delete");
                }
            })
        });
        // Without rolls (and so without their fsync): truncate back every 64 MiB.
        let config = LogConfig {
            io_mode: mode,
            ..LogConfig::default()
        };
        let (mut log, _) =
            Log::open(&dir.path().join("bench-1"), config, 0, 0, now_ms).expect("open");
        group.bench_function(format!("16KiB_batch_{name}_no_roll"), |b| {
            b.iter(|| {
                let first = log.log_end_offset();
                batch::set_base_offset(&mut records, first);
                let info = append_info_at(first, now_ms, records.len());
                log.append(&records, &info, now_ms).expect("append");
                if log.size_bytes() >= 64 * 1024 * 1024 {
                    log.truncate_to(0).expect("truncate");
                }
            })
        });
    }
    group.finish();
}

/// A produce's buffered append of one 16 KiB batch received in a request
/// (a `Bytes` the connection read): `copied` patches a copy of it and
/// `pwrite`s that (the path before the patched one), `patched` writes the
/// request's bytes with the new header beside them (`pwritev`).
fn bench_produce_append(c: &mut Criterion) {
    let now_ms = 1_700_000_000_000;
    let request = bytes::Bytes::from(batch_16k(0, now_ms));
    let mut group = c.benchmark_group("produce_append_buffered");
    group.throughput(Throughput::Bytes(BATCH_BYTES as u64));
    let dir = tempfile::tempdir().expect("tempdir");
    for name in ["copied", "patched"] {
        let config = LogConfig {
            io_mode: IoMode::Buffered,
            ..LogConfig::default()
        };
        let (mut log, _) =
            Log::open(&dir.path().join(format!("{name}-0")), config, 0, 0, now_ms).expect("open");
        group.bench_function(name, |b| {
            b.iter(|| {
                let first = log.log_end_offset();
                let info = append_info_at(first, now_ms, request.len());
                if name == "copied" {
                    let mut copy = bytes::BytesMut::from(&request[..]);
                    batch::set_base_offset(&mut copy, first);
                    log.append(&copy, &info, now_ms).expect("append");
                } else {
                    let mut header = [0u8; RECORD_BATCH_OVERHEAD];
                    header.copy_from_slice(&request[..RECORD_BATCH_OVERHEAD]);
                    batch::set_base_offset(&mut header, first);
                    let patched = PatchedRecords::new(
                        request.clone(),
                        vec![PatchedHeader {
                            position: 0,
                            bytes: header,
                        }],
                    );
                    log.append_patched(&patched, &info, now_ms).expect("append");
                }
                if log.size_bytes() >= 64 * 1024 * 1024 {
                    log.truncate_to(0).expect("truncate");
                }
            })
        });
    }
    group.finish();
}

fn bench_index_lookup(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut group = c.benchmark_group("offset_index_lookup");
    for entries in [10_000usize, 1_000_000] {
        let file =
            DiskFile::open(&dir.path().join(format!("{entries}.index")), true).expect("file");
        let mut index = OffsetIndex::create(file, 0, (entries * 8) as u32).expect("index");
        for i in 0..entries {
            assert!(index.append(i as i64 * 10 + 9, i as u32 * 1024 + 1));
        }
        let max_offset = entries as u64 * 10;
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        group.bench_with_input(BenchmarkId::from_parameter(entries), &entries, |b, _| {
            b.iter(|| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                black_box(index.lookup(((x >> 11) % max_offset) as i64))
            })
        });
    }
    group.finish();
}

fn bench_parse_crc(c: &mut Criterion) {
    let records = batch_16k(42, 1_700_000_000_000);
    let mut group = c.benchmark_group("batch_header");
    group.throughput(Throughput::Bytes(BATCH_BYTES as u64));
    group.bench_function("parse_and_crc_16KiB", |b| {
        b.iter(|| {
            let header = BatchHeader::parse(black_box(&records)).expect("header");
            batch::verify_crc(&records[..header.total_size()]).expect("crc");
            black_box(header.last_offset())
        })
    });
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20)
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_append, bench_produce_append, bench_index_lookup, bench_parse_crc
}
criterion_main!(benches);
