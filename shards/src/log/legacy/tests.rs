use super::down_convert::{down_convert, UnsupportedCompression};
use super::up_convert::{up_convert, UpConverted};
use super::*;
use crate::log::batch::{BatchHeader, TimestampType};
use crate::log::records::{compress, decompress, BatchBuilder, RecordIter};
use crate::log::validate::ValidationConfig;

fn message(offset: i64, magic: u8, ts: i64, key: Option<&[u8]>, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    write_message(&mut out, offset, magic, 0, ts, key, Some(value));
    out
}

/// A compressed wrapper holding `inner` (entries with relative offsets).
fn wrapper(magic: u8, codec: Compression, inner: &[u8], last_offset: i64) -> Vec<u8> {
    let mut value = Vec::new();
    compress(codec, inner, &mut value, false).unwrap();
    if codec == Compression::Lz4 && magic == 0 {
        lz4_frame::set_v0_checksum(&mut value);
    }
    let mut out = Vec::new();
    let attrs = attributes(magic, codec, false);
    write_message(
        &mut out,
        last_offset,
        magic,
        attrs,
        1_000,
        None,
        Some(&value),
    );
    out
}

/// (offset delta, timestamp, key, value) of one record.
type V2Record = (i32, i64, Option<Vec<u8>>, Option<Vec<u8>>);

/// The records of a converted v2 batch.
fn v2_records(batch: &[u8]) -> Vec<V2Record> {
    let h = BatchHeader::parse(batch).unwrap();
    crate::log::batch::verify_crc(batch).unwrap();
    let mut plain = Vec::new();
    decompress(h.compression().unwrap(), &batch[61..], &mut plain, 1 << 24).unwrap();
    RecordIter::new(&plain)
        .map(|r| {
            let r = r.unwrap();
            (
                r.offset_delta,
                h.base_timestamp + r.timestamp_delta,
                r.key.map(<[u8]>::to_vec),
                r.value.map(<[u8]>::to_vec),
            )
        })
        .collect()
}

const NOW: i64 = 1_700_000_000_000;

fn cfg() -> ValidationConfig {
    ValidationConfig::default()
}

// Golden bytes: Kafka 3.9.1's `MemoryRecords.withRecords(magic, 0,
// Compression.NONE, TimestampType.CREATE_TIME, new SimpleRecord(1000L,
// "k".getBytes(), "v".getBytes()))`, printed by the kafka-clients jar.
const KAFKA_V0_KV: &str = "0000000000000000000000101fecd70a0000000000016b0000000176";
const KAFKA_V1_KV: &str =
    "000000000000000000000018e4e321bc010000000000000003e8000000016b0000000176";
// A v2 batch (offsets 5-6, timestamps 10000-10001, a header on the first
// record, the second keyless) and Kafka 3.9.1's `LazyDownConversionRecords`
// conversion of it from offset 6 to magic 0 and 1.
const KAFKA_V2_BATCH: &str =
    "000000000000000500000046ffffffff02c7542eda000000000001000000000000271000000000000027\
11ffffffffffffffffffffffffffff0000000218000000026b026102026802780e00020201026200";
const KAFKA_DOWN_V0: &str = "00000000000000060000000fc8d66b880000ffffffff0000000162";
const KAFKA_DOWN_V1: &str =
    "000000000000000600000017c970e3d101000000000000002711ffffffff0000000162";

fn unhex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn writes_kafka_message_layouts() {
    assert_eq!(message(0, 0, -1, Some(b"k"), b"v"), unhex(KAFKA_V0_KV));
    assert_eq!(message(0, 1, 1000, Some(b"k"), b"v"), unhex(KAFKA_V1_KV));
    for golden in [KAFKA_V0_KV, KAFKA_V1_KV] {
        let bytes = unhex(golden);
        let Entry::Message(m) = next_entry(&bytes).unwrap() else {
            panic!("not a message")
        };
        assert!(m.crc_is_valid());
        assert_eq!((m.key, m.value), (Some(&b"k"[..]), Some(&b"v"[..])));
    }
}

#[test]
fn down_converts_as_kafka_does() {
    let raw = unhex(KAFKA_V2_BATCH);
    assert_eq!(
        down_convert(&raw, raw.len(), 0, 6).unwrap()[..27],
        unhex(KAFKA_DOWN_V0)[..]
    );
    assert_eq!(
        down_convert(&raw, raw.len(), 1, 6).unwrap()[..35],
        unhex(KAFKA_DOWN_V1)[..]
    );
}

#[test]
fn xxh32_matches_lz4_frames() {
    assert_eq!(lz4_frame::xxh32(b"", 0), 0x02CC_5D05);
    let mut frame = Vec::new();
    compress(Compression::Lz4, &[7u8; 1000], &mut frame, false).unwrap();
    // lz4_flex wrote the standard checksum: rewriting it changes nothing.
    let fixed = lz4_frame::with_standard_checksum(&frame).into_owned();
    assert_eq!(fixed, frame);
    let mut v0 = frame.clone();
    lz4_frame::set_v0_checksum(&mut v0);
    assert_ne!(v0, frame);
    assert_eq!(lz4_frame::with_standard_checksum(&v0).into_owned(), frame);
}

#[test]
fn up_converts_plain_messages() {
    for magic in [0u8, 1] {
        let mut set = message(0, magic, 1_000, Some(b"k0"), b"v0");
        set.extend(message(1, magic, 2_000, None, b"v1"));
        let UpConverted::Batch(batch) = up_convert(&set, &cfg(), NOW, "t-0").unwrap() else {
            panic!("not converted")
        };
        let ts = |t: i64| if magic == 0 { -1 } else { t };
        assert_eq!(
            v2_records(&batch),
            vec![
                (0, ts(1_000), Some(b"k0".to_vec()), Some(b"v0".to_vec())),
                (1, ts(2_000), None, Some(b"v1".to_vec())),
            ]
        );
    }
}

#[test]
fn up_converts_compressed_wrappers_with_their_codec() {
    for magic in [0u8, 1] {
        for codec in [Compression::Gzip, Compression::Snappy, Compression::Lz4] {
            let mut inner = message(0, magic, 5_000, Some(b"a"), b"1");
            inner.extend(message(1, magic, 6_000, Some(b"b"), b"2"));
            let set = wrapper(magic, codec, &inner, 1);
            let UpConverted::Batch(batch) = up_convert(&set, &cfg(), NOW, "t-0").unwrap() else {
                panic!("not converted")
            };
            let h = BatchHeader::parse(&batch).unwrap();
            assert_eq!(h.compression(), Some(codec));
            let got = v2_records(&batch);
            assert_eq!(got.len(), 2, "{magic} {codec:?}");
            assert_eq!(got[1].3.as_deref(), Some(&b"2"[..]));
            assert_eq!(got[0].1, if magic == 0 { -1 } else { 5_000 });
        }
    }
}

#[test]
fn a_magic_2_batch_is_left_alone() {
    let batch = BatchBuilder::new(0).add(1, None, Some(b"v"), &[]).build();
    assert_eq!(
        up_convert(&batch, &cfg(), NOW, "t-0"),
        Ok(UpConverted::AsSent)
    );
    assert_eq!(
        up_convert(&[], &cfg(), NOW, "t-0"),
        Ok(UpConverted::Nothing)
    );
    // A partial message is dropped, as Kafka's iterator drops it.
    let m = message(0, 1, 5, Some(b"k"), b"v");
    assert_eq!(
        up_convert(&m[..m.len() - 1], &cfg(), NOW, "t-0"),
        Ok(UpConverted::Nothing)
    );
}

#[test]
fn refuses_what_kafka_refuses() {
    let code =
        |set: &[u8], c: &ValidationConfig| up_convert(set, c, NOW, "t-0").unwrap_err().error_code();
    // A flipped value byte: the CRC no longer matches.
    let mut bad = message(0, 1, 1_000, Some(b"k"), b"v");
    let last = bad.len() - 1;
    bad[last] ^= 1;
    assert_eq!(code(&bad, &cfg()), 2);
    // Mixed magic.
    let mut mixed = message(0, 0, -1, Some(b"k"), b"v");
    mixed.extend(message(1, 1, 1, Some(b"k"), b"v"));
    assert_eq!(code(&mixed, &cfg()), 87);
    // Keyless on a compacted topic.
    let compacted = ValidationConfig {
        compacted: true,
        ..cfg()
    };
    assert_eq!(code(&message(0, 1, 1, None, b"v"), &compacted), 87);
    // Out-of-range timestamp.
    let strict = ValidationConfig {
        timestamp_before_max_ms: 1000,
        ..cfg()
    };
    assert_eq!(code(&message(0, 1, 1, Some(b"k"), b"v"), &strict), 32);
    // A producer may not set LogAppendTime.
    let mut lat = Vec::new();
    write_message(
        &mut lat,
        0,
        1,
        TIMESTAMP_TYPE_BIT,
        -1,
        Some(b"k"),
        Some(b"v"),
    );
    assert_eq!(code(&lat, &cfg()), 32);
    // Two wrappers.
    let inner = message(0, 1, 1, Some(b"k"), b"v");
    let mut two = wrapper(1, Compression::Gzip, &inner, 0);
    two.extend(wrapper(1, Compression::Gzip, &inner, 0));
    assert_eq!(code(&two, &cfg()), 87);
    // A corrupt inner message.
    let mut inner_bad = inner.clone();
    let last = inner_bad.len() - 1;
    inner_bad[last] ^= 1;
    assert_eq!(
        code(&wrapper(1, Compression::Gzip, &inner_bad, 0), &cfg()),
        2
    );
    // Nested compression.
    let nested = wrapper(
        1,
        Compression::Gzip,
        &wrapper(1, Compression::Gzip, &inner, 0),
        0,
    );
    assert_eq!(code(&nested, &cfg()), 87);
    // Too small, bad magic, too large.
    let mut tiny = message(0, 0, -1, None, b"");
    tiny[8..12].copy_from_slice(&13i32.to_be_bytes());
    assert_eq!(code(&tiny, &cfg()), 2);
    let mut magic9 = message(0, 0, -1, None, b"");
    magic9[16] = 9;
    assert_eq!(code(&magic9, &cfg()), 2);
    let small = ValidationConfig {
        max_message_bytes: 20,
        ..cfg()
    };
    assert_eq!(code(&message(0, 1, 1, Some(b"k"), b"value"), &small), 10);
    // zstd below magic 2; a codec id Kafka does not know.
    let mut zstd = Vec::new();
    write_message(&mut zstd, 0, 1, 4, 1, None, Some(b"x"));
    assert_eq!(code(&zstd, &cfg()), 87);
    let mut codec5 = Vec::new();
    write_message(&mut codec5, 0, 1, 5, 1, None, Some(b"x"));
    assert_eq!(code(&codec5, &cfg()), -1);
}

#[test]
fn never_panics_on_garbage() {
    let mut seed = 0x1234_5678_9abc_def0u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let base = {
        let mut inner = message(0, 1, 1, Some(b"k"), b"v");
        inner.extend(message(1, 1, 2, None, b"w"));
        let mut set = wrapper(1, Compression::Gzip, &inner, 1);
        set.extend(message(0, 0, -1, Some(b"k"), b"v"));
        set
    };
    for _ in 0..20_000 {
        let mut input = base.clone();
        for _ in 0..(next() % 4 + 1) {
            let at = (next() as usize) % input.len();
            input[at] = next() as u8;
        }
        input.truncate((next() as usize) % (input.len() + 1));
        let _ = up_convert(&input, &cfg(), NOW, "t-0");
        let _ = down_convert(&input, input.len(), (next() % 2) as u8, 0);
    }
}

fn v2_batch(base: i64, codec: Compression, values: &[&[u8]]) -> Vec<u8> {
    let mut b = BatchBuilder::new(base).compression(codec);
    for (i, v) in values.iter().enumerate() {
        b.push(10_000 + i as i64, Some(b"k"), Some(v), &[("h", Some(b"x"))]);
    }
    b.build()
}

/// (offset, magic, timestamp, value) of every message, inner ones included.
fn legacy_messages(bytes: &[u8]) -> Vec<(i64, u8, i64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while let Ok(Entry::Message(m)) = next_entry(&bytes[pos..]) {
        assert!(m.crc_is_valid());
        pos += m.entry_bytes();
        let Some(codec) = codec_of(m.codec_id()).filter(|c| *c != Compression::None) else {
            out.push((m.offset, m.magic, m.timestamp, m.value.unwrap().to_vec()));
            continue;
        };
        let value = if codec == Compression::Lz4 && m.magic == 0 {
            lz4_frame::with_standard_checksum(m.value.unwrap()).into_owned()
        } else {
            m.value.unwrap().to_vec()
        };
        let mut inner = Vec::new();
        decompress(codec, &value, &mut inner, 1 << 20).unwrap();
        for (o, magic, ts, v) in legacy_messages(&inner) {
            let o = if magic > 0 { m.offset - 1 + o } else { o };
            out.push((o, magic, ts, v));
        }
    }
    out
}

#[test]
fn down_converts_plain_batches_from_the_fetch_offset() {
    let mut raw = v2_batch(5, Compression::None, &[b"a", b"b", b"c"]);
    raw.extend(v2_batch(8, Compression::None, &[b"d"]));
    let out = down_convert(&raw, raw.len(), 1, 6).unwrap();
    let got = legacy_messages(&out);
    assert_eq!(
        got,
        vec![
            (6, 1, 10_001, b"b".to_vec()),
            (7, 1, 10_002, b"c".to_vec()),
            (8, 1, 10_000, b"d".to_vec()),
        ]
    );
    // v0: no timestamps; the field is as long as what was read.
    let out = down_convert(&raw, raw.len(), 0, 5).unwrap();
    assert_eq!(out.len(), raw.len());
    assert!(legacy_messages(&out).iter().all(|m| m.1 == 0 && m.2 == -1));
}

#[test]
fn down_converts_compressed_batches_whole() {
    for codec in [Compression::Gzip, Compression::Snappy, Compression::Lz4] {
        for magic in [0u8, 1] {
            let raw = v2_batch(10, codec, &[b"a", b"b"]);
            let out = down_convert(&raw, raw.len(), magic, 11).unwrap();
            let Entry::Message(w) = next_entry(&out).unwrap() else {
                panic!()
            };
            assert_eq!((w.offset, codec_of(w.codec_id())), (11, Some(codec)));
            let got: Vec<i64> = legacy_messages(&out).iter().map(|m| m.0).collect();
            assert_eq!(got, vec![10, 11], "{codec:?} v{magic}");
        }
    }
}

#[test]
fn pads_to_the_read_size_and_drops_control_batches() {
    let control = BatchBuilder::new(0)
        .control(true)
        .producer(1, 0, 0)
        .add(1, Some(&[0, 0, 0, 0]), Some(&[0, 0, 0, 0, 0, 0]), &[])
        .build();
    let data = v2_batch(1, Compression::None, &[b"x"]);
    let mut raw = control.clone();
    raw.extend(&data);
    // 40 more bytes read (a partial batch): overflow padding after the message.
    let out = down_convert(&raw, raw.len() + 40, 1, 0).unwrap();
    assert_eq!(out.len(), raw.len() + 40);
    let msgs = legacy_messages(&out);
    // Kafka's iterator converts the first data batch twice here.
    assert_eq!(msgs.len(), 2);
    let end: usize = 2 * (LOG_OVERHEAD + RECORD_OVERHEAD_V1 + 1 + 1);
    assert_eq!(&out[end..end + 8], &(-1i64).to_be_bytes());
    let left = out.len() - end;
    assert_eq!(
        &out[end + 8..end + 12],
        &((left + 1).max(61) as i32).to_be_bytes()
    );
    assert!(out[end + 12..].iter().all(|b| *b == 0));
    // Control batches only: one 12-byte overflow header.
    let out = down_convert(&control, control.len(), 1, 0).unwrap();
    assert_eq!(
        out,
        [&(-1i64).to_be_bytes()[..], &61i32.to_be_bytes()].concat()
    );
    // Nothing whole: nothing.
    assert!(down_convert(&data[..20], 20, 1, 0).unwrap().is_empty());
}

#[test]
fn zstd_cannot_be_down_converted() {
    let raw = v2_batch(0, Compression::Zstd, &[b"a"]);
    assert_eq!(
        down_convert(&raw, raw.len(), 1, 0),
        Err(UnsupportedCompression)
    );
    let mut raw2 = v2_batch(0, Compression::None, &[b"a"]);
    raw2.extend(&raw);
    let out = down_convert(&raw2, raw2.len(), 1, 0).unwrap();
    assert_eq!(out.len(), raw2.len());
    assert_eq!(legacy_messages(&out).len(), 1);
}

#[test]
fn log_append_time_batches_keep_their_time() {
    let raw = BatchBuilder::new(0)
        .timestamp_type(TimestampType::LogAppendTime)
        .add(5, None, Some(b"v"), &[])
        .build();
    // BatchBuilder's max timestamp is the record's (5).
    let out = down_convert(&raw, raw.len(), 1, 0).unwrap();
    let Entry::Message(m) = next_entry(&out).unwrap() else {
        panic!()
    };
    assert!(m.is_log_append_time());
    assert_eq!(m.timestamp, 5);
}
