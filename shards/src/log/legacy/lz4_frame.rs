//! The LZ4 frame header checksum of message format v0. Kafka before 0.10
//! computed the frame descriptor's header checksum over the frame magic too
//! (KAFKA-3160); for compatibility, magic-0 messages keep that checksum, both
//! produced (librdkafka) and down-converted (`KafkaLZ4BlockOutputStream`
//! with `useBrokenFlagDescriptorChecksum`). Magic 1 uses the right one.

use std::borrow::Cow;

const FRAME_MAGIC: [u8; 4] = [0x04, 0x22, 0x4d, 0x18];
const FLG_CONTENT_SIZE: u8 = 0x08;
const FLG_DICT_ID: u8 = 0x01;

/// Where the header checksum byte is, when `frame` starts with a frame
/// descriptor.
fn header_checksum_at(frame: &[u8]) -> Option<usize> {
    if frame.get(..4)? != FRAME_MAGIC {
        return None;
    }
    let flg = *frame.get(4)?;
    let mut at = 6;
    if flg & FLG_CONTENT_SIZE != 0 {
        at += 8;
    }
    if flg & FLG_DICT_ID != 0 {
        at += 4;
    }
    (at < frame.len()).then_some(at)
}

fn checksum_byte(bytes: &[u8]) -> u8 {
    (xxh32(bytes, 0) >> 8) as u8
}

/// The frame with a v0 (broken) header checksum replaced by the right one,
/// so a standard decoder accepts it; other frames as they are.
pub(super) fn with_standard_checksum(frame: &[u8]) -> Cow<'_, [u8]> {
    let Some(at) = header_checksum_at(frame) else {
        return Cow::Borrowed(frame);
    };
    let standard = checksum_byte(&frame[4..at]);
    if frame[at] == standard || frame[at] != checksum_byte(&frame[..at]) {
        return Cow::Borrowed(frame);
    }
    let mut fixed = frame.to_vec();
    fixed[at] = standard;
    Cow::Owned(fixed)
}

/// Rewrites a standard frame's header checksum the v0 way.
pub(super) fn set_v0_checksum(frame: &mut [u8]) {
    if let Some(at) = header_checksum_at(frame) {
        frame[at] = checksum_byte(&frame[..at]);
    }
}

const P1: u32 = 2_654_435_761;
const P2: u32 = 2_246_822_519;
const P3: u32 = 3_266_489_917;
const P4: u32 = 668_265_263;
const P5: u32 = 374_761_393;

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn round(acc: u32, lane: u32) -> u32 {
    acc.wrapping_add(lane.wrapping_mul(P2))
        .rotate_left(13)
        .wrapping_mul(P1)
}

/// XXH32, the hash of LZ4 frame checksums.
pub(super) fn xxh32(input: &[u8], seed: u32) -> u32 {
    let len = input.len();
    let mut i = 0;
    let mut h = if len >= 16 {
        let mut v = [
            seed.wrapping_add(P1).wrapping_add(P2),
            seed.wrapping_add(P2),
            seed,
            seed.wrapping_sub(P1),
        ];
        while i + 16 <= len {
            for (lane, acc) in v.iter_mut().enumerate() {
                *acc = round(*acc, le32(input, i + 4 * lane));
            }
            i += 16;
        }
        v[0].rotate_left(1)
            .wrapping_add(v[1].rotate_left(7))
            .wrapping_add(v[2].rotate_left(12))
            .wrapping_add(v[3].rotate_left(18))
    } else {
        seed.wrapping_add(P5)
    };
    h = h.wrapping_add(len as u32);
    while i + 4 <= len {
        h = h.wrapping_add(le32(input, i).wrapping_mul(P3));
        h = h.rotate_left(17).wrapping_mul(P4);
        i += 4;
    }
    while i < len {
        h = h.wrapping_add(u32::from(input[i]).wrapping_mul(P5));
        h = h.rotate_left(11).wrapping_mul(P1);
        i += 1;
    }
    h ^= h >> 15;
    h = h.wrapping_mul(P2);
    h ^= h >> 13;
    h = h.wrapping_mul(P3);
    h ^ (h >> 16)
}
