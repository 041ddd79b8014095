//! The cleaner's key → latest offset map (Kafka's `SkimpyOffsetMap`): a
//! fixed-size open-addressing table of 16-byte MD5 key digests and offsets.
//! Keys themselves are not stored, so memory is bounded by the dedupe
//! buffer whatever the key sizes; two keys colliding on all 128 bits is
//! what Kafka accepts too.

use md5::{Digest, Md5};

/// Bytes of a key digest (MD5).
pub const HASH_BYTES: usize = 16;
/// One slot: digest plus the offset.
pub const SLOT_BYTES: usize = HASH_BYTES + 8;
/// Kafka's `log.cleaner.io.buffer.load.factor` default: fill at most 90%.
pub const DEFAULT_LOAD_FACTOR: f64 = 0.9;

/// Offsets are >= 0, so -1 marks an empty slot.
const EMPTY: i64 = -1;

pub type KeyHash = [u8; HASH_BYTES];

pub fn hash_key(key: &[u8]) -> KeyHash {
    Md5::digest(key).into()
}

pub struct OffsetMap {
    hashes: Vec<KeyHash>,
    offsets: Vec<i64>,
    entries: usize,
    max_entries: usize,
    /// The largest offset put since the last clear, or -1.
    latest_offset: i64,
}

impl OffsetMap {
    /// A map using about `memory_bytes` (at least one slot).
    pub fn new(memory_bytes: usize) -> Self {
        Self::with_load_factor(memory_bytes, DEFAULT_LOAD_FACTOR)
    }

    pub fn with_load_factor(memory_bytes: usize, load_factor: f64) -> Self {
        assert!(load_factor > 0.0 && load_factor <= 1.0);
        let slots = (memory_bytes / SLOT_BYTES).max(2);
        let max_entries = ((slots as f64 * load_factor) as usize).clamp(1, slots - 1);
        OffsetMap {
            hashes: vec![[0u8; HASH_BYTES]; slots],
            offsets: vec![EMPTY; slots],
            entries: 0,
            max_entries,
            latest_offset: EMPTY,
        }
    }

    pub fn slots(&self) -> usize {
        self.offsets.len()
    }
    pub fn len(&self) -> usize {
        self.entries
    }
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }
    /// Entries the load factor allows.
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }
    /// Room for `n` more distinct keys (Kafka's check before each batch).
    pub fn has_room_for(&self, n: usize) -> bool {
        self.entries.saturating_add(n) <= self.max_entries
    }
    pub fn latest_offset(&self) -> i64 {
        self.latest_offset
    }
    /// Records that offsets up to `offset` were scanned even without keys.
    pub fn update_latest_offset(&mut self, offset: i64) {
        self.latest_offset = self.latest_offset.max(offset);
    }

    pub fn clear(&mut self) {
        self.offsets.fill(EMPTY);
        self.entries = 0;
        self.latest_offset = EMPTY;
    }

    fn start_slot(&self, hash: &KeyHash) -> usize {
        let h = u64::from_le_bytes(hash[..8].try_into().expect("8 bytes"));
        (h % self.offsets.len() as u64) as usize
    }

    /// Slot holding `hash`, or the empty slot where it would go.
    fn find(&self, hash: &KeyHash) -> usize {
        let n = self.offsets.len();
        let mut slot = self.start_slot(hash);
        // max_entries < slots guarantees an empty slot, so this ends.
        loop {
            if self.offsets[slot] == EMPTY || self.hashes[slot] == *hash {
                return slot;
            }
            slot += 1;
            if slot == n {
                slot = 0;
            }
        }
    }

    /// Sets the latest offset of a key. Returns false (and changes nothing)
    /// when the key is new and the map is at its load limit.
    pub fn put_hash(&mut self, hash: &KeyHash, offset: i64) -> bool {
        debug_assert!(offset >= 0);
        let slot = self.find(hash);
        if self.offsets[slot] == EMPTY {
            if self.entries >= self.max_entries {
                return false;
            }
            self.entries += 1;
            self.hashes[slot] = *hash;
        }
        self.offsets[slot] = offset;
        self.latest_offset = self.latest_offset.max(offset);
        true
    }

    pub fn put(&mut self, key: &[u8], offset: i64) -> bool {
        self.put_hash(&hash_key(key), offset)
    }

    pub fn get_hash(&self, hash: &KeyHash) -> Option<i64> {
        let o = self.offsets[self.find(hash)];
        (o != EMPTY).then_some(o)
    }

    pub fn get(&self, key: &[u8]) -> Option<i64> {
        self.get_hash(&hash_key(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_get_update() {
        let mut m = OffsetMap::new(24 * 100);
        assert_eq!(m.slots(), 100);
        assert_eq!(m.max_entries(), 90);
        assert!(m.put(b"a", 1));
        assert!(m.put(b"b", 2));
        assert!(m.put(b"a", 7));
        assert_eq!(m.get(b"a"), Some(7));
        assert_eq!(m.get(b"b"), Some(2));
        assert_eq!(m.get(b"c"), None);
        assert_eq!(m.len(), 2);
        assert_eq!(m.latest_offset(), 7);
        m.clear();
        assert_eq!(m.get(b"a"), None);
        assert_eq!(m.latest_offset(), -1);
    }

    #[test]
    fn bounded_by_load_factor() {
        let mut m = OffsetMap::new(24 * 10);
        for i in 0..9u32 {
            assert!(m.put(&i.to_be_bytes(), i as i64));
        }
        assert!(!m.has_room_for(1));
        assert!(!m.put(b"new", 100));
        // Existing keys still update when full.
        assert!(m.put(&3u32.to_be_bytes(), 50));
        assert_eq!(m.get(&3u32.to_be_bytes()), Some(50));
        for i in 0..9u32 {
            assert!(m.get(&i.to_be_bytes()).is_some());
        }
    }

    #[test]
    fn md5_digest_is_kafka_md5() {
        // MD5("") = d41d8cd98f00b204e9800998ecf8427e
        assert_eq!(hash_key(b"")[..4], [0xd4, 0x1d, 0x8c, 0xd9]);
    }
}
