//! On-disk encodings of the embedded store: log header, log records of
//! effects, and snapshots. Every decoder is bounds-checked and returns
//! None/Corrupt on bad input.

use std::collections::{BTreeMap, BTreeSet};

use super::{
    Effect, Node, FORMAT_VERSION, LOG_HEADER_BYTES, LOG_MAGIC, RECORD_HEADER_BYTES,
    RECORD_MAX_BYTES, SNAPSHOT_MAGIC,
};
use crate::metadata::{parent_of, validate_path, StoreError, StoreResult};

pub(super) fn decode_log_header(bytes: &[u8]) -> Option<u64> {
    if bytes.len() < LOG_HEADER_BYTES as usize || &bytes[..4] != LOG_MAGIC {
        return None;
    }
    let format = u32::from_le_bytes(bytes[4..8].try_into().ok()?);
    if format != FORMAT_VERSION {
        return None;
    }
    Some(u64::from_le_bytes(bytes[8..16].try_into().ok()?))
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.buf.len() - self.pos < n {
            return None;
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Some(s)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
    }
    fn bytes(&mut self) -> Option<Vec<u8>> {
        let n = self.u32()? as usize;
        self.take(n).map(<[u8]>::to_vec)
    }
    fn string(&mut self) -> Option<String> {
        String::from_utf8(self.bytes()?).ok()
    }
    fn done(&self) -> bool {
        self.pos == self.buf.len()
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    debug_assert!(b.len() <= u32::MAX as usize);
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

/// One log record of `effects`; a record over `RECORD_MAX_BYTES` (which
/// replay would take for a torn length) is refused, never written.
pub(super) fn encode_record(effects: &[Effect]) -> StoreResult<Vec<u8>> {
    let mut payload = Vec::new();
    payload.extend_from_slice(&(effects.len() as u32).to_le_bytes());
    for e in effects {
        match e {
            Effect::Create {
                path,
                data,
                ephemeral,
                time_ms,
            } => {
                payload.push(1);
                put_bytes(&mut payload, path.as_bytes());
                put_bytes(&mut payload, data);
                payload.push(u8::from(*ephemeral));
                payload.extend_from_slice(&time_ms.to_le_bytes());
            }
            Effect::Set {
                path,
                data,
                time_ms,
            } => {
                payload.push(2);
                put_bytes(&mut payload, path.as_bytes());
                put_bytes(&mut payload, data);
                payload.extend_from_slice(&time_ms.to_le_bytes());
            }
            Effect::Delete { path } => {
                payload.push(3);
                put_bytes(&mut payload, path.as_bytes());
            }
        }
    }
    if payload.len() > RECORD_MAX_BYTES {
        return Err(StoreError::BadArguments(format!(
            "metadata record of {} bytes exceeds the limit of {RECORD_MAX_BYTES} bytes",
            payload.len()
        )));
    }
    let mut record = Vec::with_capacity(RECORD_HEADER_BYTES + payload.len());
    record.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    record.extend_from_slice(&crc32c::crc32c(&payload).to_le_bytes());
    record.extend_from_slice(&payload);
    Ok(record)
}

pub(super) fn decode_effects(payload: &[u8]) -> Option<Vec<Effect>> {
    let mut r = Reader {
        buf: payload,
        pos: 0,
    };
    let n = r.u32()? as usize;
    // Each effect takes at least 5 bytes; bounds the allocation.
    if n > payload.len() / 5 {
        return None;
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let e = match r.u8()? {
            1 => Effect::Create {
                path: r.string()?,
                data: r.bytes()?,
                ephemeral: r.u8()? != 0,
                time_ms: r.u64()? as i64,
            },
            2 => Effect::Set {
                path: r.string()?,
                data: r.bytes()?,
                time_ms: r.u64()? as i64,
            },
            3 => Effect::Delete { path: r.string()? },
            _ => return None,
        };
        out.push(e);
    }
    r.done().then_some(out)
}

pub(super) fn encode_snapshot(nodes: &BTreeMap<String, Node>, epoch: u64) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(SNAPSHOT_MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&epoch.to_le_bytes());
    let persistent: Vec<(&String, &Node)> = nodes.iter().filter(|(_, n)| !n.ephemeral).collect();
    out.extend_from_slice(&(persistent.len() as u32).to_le_bytes());
    for (path, n) in persistent {
        put_bytes(&mut out, path.as_bytes());
        put_bytes(&mut out, &n.data);
        out.extend_from_slice(&n.version.to_le_bytes());
        out.extend_from_slice(&n.cversion.to_le_bytes());
        out.extend_from_slice(&n.ctime_ms.to_le_bytes());
        out.extend_from_slice(&n.mtime_ms.to_le_bytes());
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

pub(super) fn decode_snapshot(bytes: &[u8]) -> StoreResult<(BTreeMap<String, Node>, u64)> {
    let corrupt = |m: &str| StoreError::Corrupt(format!("snapshot: {m}"));
    if bytes.len() < 24 {
        return Err(corrupt("too short"));
    }
    let (body, tail) = bytes.split_at(bytes.len() - 4);
    if crc32c::crc32c(body) != u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]) {
        return Err(corrupt("checksum mismatch"));
    }
    let mut r = Reader { buf: body, pos: 0 };
    if r.take(4) != Some(&SNAPSHOT_MAGIC[..]) || r.u32() != Some(FORMAT_VERSION) {
        return Err(corrupt("bad magic or format"));
    }
    let epoch = r.u64().ok_or_else(|| corrupt("truncated"))?;
    let count = r.u32().ok_or_else(|| corrupt("truncated"))? as usize;
    let mut nodes: BTreeMap<String, Node> = BTreeMap::new();
    for _ in 0..count {
        let (path, data, version, cversion, ctime_ms, mtime_ms) = (|| {
            Some((
                r.string()?,
                r.bytes()?,
                r.u32()? as i32,
                r.u32()? as i32,
                r.u64()? as i64,
                r.u64()? as i64,
            ))
        })()
        .ok_or_else(|| corrupt("truncated node"))?;
        validate_path(&path).map_err(|_| corrupt("bad path"))?;
        if path != "/" {
            let name = path[path.rfind('/').map_or(0, |i| i + 1)..].to_string();
            let parent = nodes
                .get_mut(parent_of(&path))
                .ok_or_else(|| corrupt("node before its parent"))?;
            parent.children.insert(name);
        }
        let node = Node {
            data,
            version,
            cversion,
            ctime_ms,
            mtime_ms,
            ephemeral: false,
            children: BTreeSet::new(),
        };
        if nodes.insert(path, node).is_some() {
            return Err(corrupt("duplicate node"));
        }
    }
    if !r.done() || !nodes.contains_key("/") {
        return Err(corrupt("trailing bytes or missing root"));
    }
    Ok((nodes, epoch))
}
