//! `leader-epoch-checkpoint`: each leader epoch and the first offset written
//! in it (KIP-101), Kafka's LeaderEpochFileCache. Text format:
//! `0\n<count>\n<epoch> <start offset>\n...`, replaced atomically.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

pub const UNDEFINED_EPOCH: i32 = -1;
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;
const FILE_NAME: &str = "leader-epoch-checkpoint";

pub struct LeaderEpochCache {
    path: PathBuf,
    /// (epoch, start offset), both strictly increasing.
    entries: Vec<(i32, i64)>,
}

fn parse(text: &str) -> Option<Vec<(i32, i64)>> {
    let mut lines = text.lines();
    if lines.next()?.trim() != "0" {
        return None;
    }
    let count: usize = lines.next()?.trim().parse().ok()?;
    let mut entries = Vec::with_capacity(count.min(1024));
    for _ in 0..count {
        let mut parts = lines.next()?.split_whitespace();
        let epoch: i32 = parts.next()?.parse().ok()?;
        let offset: i64 = parts.next()?.parse().ok()?;
        entries.push((epoch, offset));
    }
    Some(entries)
}

impl LeaderEpochCache {
    pub fn open(dir: &Path) -> io::Result<Self> {
        let path = dir.join(FILE_NAME);
        let entries = match fs::read_to_string(&path) {
            Ok(text) => parse(&text).unwrap_or_else(|| {
                log::warn!("{}: malformed, starting empty", path.display());
                Vec::new()
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        Ok(LeaderEpochCache { path, entries })
    }

    pub fn entries(&self) -> &[(i32, i64)] {
        &self.entries
    }

    pub fn latest_epoch(&self) -> i32 {
        self.entries.last().map(|e| e.0).unwrap_or(UNDEFINED_EPOCH)
    }

    /// The epoch in which `offset` was (or will be) written.
    pub fn epoch_for_offset(&self, offset: i64) -> i32 {
        self.entries
            .iter()
            .rev()
            .find(|e| e.1 <= offset)
            .map(|e| e.0)
            .unwrap_or(UNDEFINED_EPOCH)
    }

    /// Records that `epoch` starts at `start_offset` (ignored unless newer).
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> io::Result<()> {
        if let Some(&(last_epoch, last_offset)) = self.entries.last() {
            if epoch <= last_epoch {
                return Ok(());
            }
            debug_assert!(start_offset >= last_offset);
        }
        self.entries.push((epoch, start_offset));
        self.write()
    }

    /// Drops epochs that start at or after `end_offset` (log truncation).
    pub fn truncate_from_end(&mut self, end_offset: i64) -> io::Result<()> {
        let before = self.entries.len();
        self.entries.retain(|&(_, start)| start < end_offset);
        if self.entries.len() != before {
            self.write()?;
        }
        Ok(())
    }

    /// Kafka's endOffsetFor: the epoch at or below `requested` and the end
    /// offset of that epoch (the start of the next one, or the LEO).
    pub fn end_offset_for(&self, requested: i32, log_end_offset: i64) -> (i32, i64) {
        if requested == UNDEFINED_EPOCH || self.entries.is_empty() {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        }
        if requested == self.latest_epoch() {
            return (requested, log_end_offset);
        }
        let higher = self.entries.iter().find(|e| e.0 > requested);
        match higher {
            None => (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET),
            Some(&(_, higher_start)) => {
                match self.entries.iter().rev().find(|e| e.0 <= requested) {
                    None => (requested, higher_start),
                    Some(&(floor_epoch, _)) => (floor_epoch, higher_start),
                }
            }
        }
    }

    fn write(&self) -> io::Result<()> {
        let tmp = self.path.with_extension("tmp");
        let mut text = format!("0\n{}\n", self.entries.len());
        for (epoch, offset) in &self.entries {
            text.push_str(&format!("{epoch} {offset}\n"));
        }
        let mut f = fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, &self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_offsets_follow_kafka() {
        let dir = std::env::temp_dir().join(format!("kshard-lec-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let mut c = LeaderEpochCache::open(&dir).unwrap();
        c.assign(0, 0).unwrap();
        c.assign(2, 10).unwrap();
        c.assign(5, 30).unwrap();
        assert_eq!(c.end_offset_for(5, 42), (5, 42));
        assert_eq!(c.end_offset_for(0, 42), (0, 10));
        assert_eq!(c.end_offset_for(1, 42), (0, 10));
        assert_eq!(c.end_offset_for(3, 42), (2, 30));
        assert_eq!(
            c.end_offset_for(6, 42),
            (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        );
        let reopened = LeaderEpochCache::open(&dir).unwrap();
        assert_eq!(reopened.entries(), &[(0, 0), (2, 10), (5, 30)]);
        c.truncate_from_end(10).unwrap();
        assert_eq!(c.entries(), &[(0, 0)]);
        fs::remove_dir_all(&dir).unwrap();
    }
}
