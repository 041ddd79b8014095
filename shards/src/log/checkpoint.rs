//! Kafka's `OffsetCheckpointFile` (recovery-point-offset-checkpoint,
//! log-start-offset-checkpoint, replication-offset-checkpoint,
//! cleaner-offset-checkpoint): the text
//! `0\n<count>\n<topic> <partition> <offset>\n...`, replaced atomically by
//! writing `<name>.tmp`, fsyncing it, renaming it over the file and fsyncing
//! the directory. Also the `<topic>-<partition>` directory naming.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

pub const CHECKPOINT_VERSION: u32 = 0;
pub const RECOVERY_POINT_CHECKPOINT_FILE: &str = "recovery-point-offset-checkpoint";
pub const LOG_START_OFFSET_CHECKPOINT_FILE: &str = "log-start-offset-checkpoint";
pub const REPLICATION_OFFSET_CHECKPOINT_FILE: &str = "replication-offset-checkpoint";
pub const CLEANER_OFFSET_CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";

/// `<topic>-<partition>`.
pub fn partition_dir_name(topic: &str, partition: i32) -> String {
    format!("{topic}-{partition}")
}

/// Splits `<topic>-<partition>` at the last '-' (topics may contain '-').
pub fn parse_partition_dir_name(name: &str) -> Option<(String, i32)> {
    let (topic, partition) = name.rsplit_once('-')?;
    if topic.is_empty() || partition.is_empty() || !partition.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let partition: i32 = partition.parse().ok()?;
    Some((topic.to_string(), partition))
}

pub struct OffsetCheckpointFile {
    path: PathBuf,
}

fn malformed(path: &Path, what: String) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("malformed checkpoint file {}: {what}", path.display()),
    )
}

impl OffsetCheckpointFile {
    pub fn new(path: PathBuf) -> Self {
        OffsetCheckpointFile { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The entries, in file order; a missing file reads as empty.
    pub fn read(&self) -> io::Result<Vec<(String, i32, i64)>> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        parse(&text).map_err(|what| malformed(&self.path, what))
    }

    /// Atomically replaces the file with `entries`.
    pub fn write(&self, entries: &[(String, i32, i64)]) -> io::Result<()> {
        let mut text = format!("{CHECKPOINT_VERSION}\n{}\n", entries.len());
        for (topic, partition, offset) in entries {
            if topic.is_empty() || topic.contains(char::is_whitespace) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("topic {topic:?} cannot be checkpointed"),
                ));
            }
            text.push_str(&format!("{topic} {partition} {offset}\n"));
        }
        let mut tmp_name = self.path.as_os_str().to_owned();
        tmp_name.push(".tmp");
        let tmp = PathBuf::from(tmp_name);
        {
            let mut file = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&tmp)?;
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
        }
        std::fs::rename(&tmp, &self.path)?;
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        File::open(dir)?.sync_all()
    }
}

fn parse(text: &str) -> Result<Vec<(String, i32, i64)>, String> {
    let mut lines = text.lines();
    let version = lines.next().ok_or("empty file")?;
    match version.trim().parse::<u32>() {
        Ok(CHECKPOINT_VERSION) => {}
        _ => return Err(format!("unrecognized version {version:?}")),
    }
    let count_line = lines.next().ok_or("missing entry count")?;
    let count: usize = count_line
        .trim()
        .parse()
        .map_err(|_| format!("bad entry count {count_line:?}"))?;
    // The count is untrusted: never preallocate more than the text can hold.
    let mut entries = Vec::with_capacity(count.min(text.len() / 6));
    for line in lines.by_ref().take(count) {
        let mut fields = line.split_whitespace();
        let (Some(topic), Some(partition), Some(offset), None) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(format!("malformed line {line:?}"));
        };
        let partition: i32 = partition
            .parse()
            .map_err(|_| format!("bad partition in line {line:?}"))?;
        let offset: i64 = offset
            .parse()
            .map_err(|_| format!("bad offset in line {line:?}"))?;
        if topic.is_empty() {
            return Err(format!("empty topic in line {line:?}"));
        }
        entries.push((topic.to_string(), partition, offset));
    }
    if entries.len() != count {
        return Err(format!("expected {count} entries, found {}", entries.len()));
    }
    if let Some(extra) = lines.find(|l| !l.trim().is_empty()) {
        return Err(format!("unexpected line after {count} entries: {extra:?}"));
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let file = OffsetCheckpointFile::new(dir.path().join(RECOVERY_POINT_CHECKPOINT_FILE));
        assert!(file.read().unwrap().is_empty());
        let entries = vec![
            ("my-topic".to_string(), 0, 42i64),
            ("other".to_string(), 7, 0),
        ];
        file.write(&entries).unwrap();
        let text = std::fs::read_to_string(file.path()).unwrap();
        assert_eq!(text, "0\n2\nmy-topic 0 42\nother 7 0\n");
        assert_eq!(file.read().unwrap(), entries);
        assert!(!dir
            .path()
            .join("recovery-point-offset-checkpoint.tmp")
            .exists());
        file.write(&[]).unwrap();
        assert_eq!(std::fs::read_to_string(file.path()).unwrap(), "0\n0\n");
    }

    #[test]
    fn malformed_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cp");
        let file = OffsetCheckpointFile::new(path.clone());
        for bad in [
            "",
            "1\n0\n",
            "0\n",
            "0\nx\n",
            "0\n2\nt 0 1\n",
            "0\n1\nt 0\n",
            "0\n1\nt x 1\n",
            "0\n1\nt 0 1 2\n",
            "0\n1\nt 0 1\nt 1 2\n",
            "0\n18446744073709551615\n",
        ] {
            std::fs::write(&path, bad).unwrap();
            let err = file.read().unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{bad:?}");
        }
    }

    #[test]
    fn partition_dir_names() {
        assert_eq!(partition_dir_name("a-b", 3), "a-b-3");
        assert_eq!(
            parse_partition_dir_name("a-b-3"),
            Some(("a-b".to_string(), 3))
        );
        assert_eq!(parse_partition_dir_name("t-0"), Some(("t".to_string(), 0)));
        assert_eq!(parse_partition_dir_name("t"), None);
        assert_eq!(parse_partition_dir_name("-1"), None);
        assert_eq!(
            parse_partition_dir_name("t--1"),
            Some(("t-".to_string(), 1))
        );
        assert_eq!(parse_partition_dir_name("t-x"), None);
        assert_eq!(parse_partition_dir_name("t-99999999999"), None);
    }
}
