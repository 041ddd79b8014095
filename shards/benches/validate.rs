//! Validation throughput of one 16 KiB produce batch of 100-byte records,
//! uncompressed and lz4/zstd compressed.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kshard_shards::log::batch::Compression;
use kshard_shards::log::records::BatchBuilder;
use kshard_shards::log::validate::{ValidationConfig, Validator};

const BATCH_BYTES: usize = 16 * 1024;
const VALUE_BYTES: usize = 100;

fn batch(codec: Compression) -> (Vec<u8>, usize) {
    let mut b = BatchBuilder::new(0).compression(codec).producer(1, 0, 0);
    let mut value = [0u8; VALUE_BYTES];
    let mut uncompressed = 0;
    let mut i = 0u64;
    // Somewhat compressible values: a counter and a repeating pattern.
    while uncompressed + VALUE_BYTES + 8 < BATCH_BYTES {
        for (j, v) in value.iter_mut().enumerate() {
            *v = b'a' + ((i as usize + j) % 26) as u8;
        }
        value[..8].copy_from_slice(&i.to_be_bytes());
        b.push(1_700_000_000_000 + i as i64, None, Some(&value), &[]);
        uncompressed += VALUE_BYTES + 8;
        i += 1;
    }
    (b.build(), b.record_count())
}

fn bench(c: &mut Criterion) {
    let cfg = ValidationConfig::default();
    let mut group = c.benchmark_group("validate_16k");
    for (name, codec) in [
        ("none", Compression::None),
        ("lz4", Compression::Lz4),
        ("zstd", Compression::Zstd),
    ] {
        let (mut bytes, records) = batch(codec);
        let mut v = Validator::new();
        // Base offset stays 0 (next_offset 0), so the batch revalidates as is.
        v.validate_and_assign_offsets(&mut bytes, 0, 0, 0, &cfg)
            .expect("valid batch");
        group.throughput(Throughput::Elements(records as u64));
        group.bench_function(name, |b| {
            b.iter(|| {
                let info = v
                    .validate_and_assign_offsets(black_box(&mut bytes), 0, 0, 0, &cfg)
                    .expect("valid batch");
                black_box(info)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
