//! `meta.properties` in a log dir, as Kafka's `MetaProperties` and
//! `BrokerMetadataCheckpoint` (ZooKeeper mode, version 0): the broker id and
//! cluster id the data belongs to, checked at every start so a log dir is
//! never served under another broker's or cluster's identity. Every log dir
//! has one, and they must agree (Kafka's `MetaPropertiesEnsemble.verify`).

use std::io::Write;
use std::path::{Path, PathBuf};

pub const META_PROPERTIES_FILE: &str = "meta.properties";

/// `meta.properties` as found in the log dir before start-up.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct MetaProperties {
    pub broker_id: Option<i32>,
    pub cluster_id: Option<String>,
}

/// Reads `meta.properties`; a missing file reads as empty (a fresh log dir).
pub fn read_meta_properties(log_dir: &Path) -> Result<MetaProperties, String> {
    let path = log_dir.join(META_PROPERTIES_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(MetaProperties::default()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let mut meta = MetaProperties::default();
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("broker.id=") {
            meta.broker_id = Some(
                v.trim()
                    .parse()
                    .map_err(|_| format!("{}: broker.id {v} is not an integer", path.display()))?,
            );
        } else if let Some(v) = line.strip_prefix("cluster.id=") {
            meta.cluster_id = Some(v.trim().to_string());
        }
    }
    Ok(meta)
}

/// The identity `log_dirs` already carry: every `meta.properties` read, and
/// all those present agree on the cluster id and broker id (messages as
/// Kafka's `MetaPropertiesEnsemble.verify`). Empty when all dirs are fresh.
pub fn read_meta_properties_ensemble(log_dirs: &[PathBuf]) -> Result<MetaProperties, String> {
    let mut agreed = MetaProperties::default();
    for dir in log_dirs {
        let meta = read_meta_properties(dir)?;
        let path = dir.join(META_PROPERTIES_FILE);
        match (&agreed.cluster_id, &meta.cluster_id) {
            (Some(expected), Some(read)) if expected != read => {
                return Err(format!(
                    "Invalid cluster.id in: {}. Expected {expected}, but read {read}",
                    path.display()
                ))
            }
            (None, Some(read)) => agreed.cluster_id = Some(read.clone()),
            _ => {}
        }
        match (agreed.broker_id, meta.broker_id) {
            (Some(expected), Some(read)) if expected != read => {
                return Err(format!(
                    "Stored node id {read} doesn't match previous node id {expected} in {}. \
                     If you moved your data, make sure your configured node id matches. If you \
                     intend to create a new node, you should remove all data in your data \
                     directories.",
                    path.display()
                ))
            }
            (None, Some(read)) => agreed.broker_id = Some(read),
            _ => {}
        }
    }
    Ok(agreed)
}

/// `write_meta_properties` in every log dir, after checking that the dirs
/// agree with each other.
pub fn write_meta_properties_all(
    log_dirs: &[PathBuf],
    broker_id: i32,
    cluster_id: &str,
) -> Result<(), String> {
    read_meta_properties_ensemble(log_dirs)?;
    for dir in log_dirs {
        write_meta_properties(dir, broker_id, cluster_id)?;
    }
    Ok(())
}

/// Checks an existing `meta.properties` against `broker_id` and
/// `cluster_id`, or writes a new one (atomically: temporary file, fsync,
/// rename) in a fresh log dir.
pub fn write_meta_properties(
    log_dir: &Path,
    broker_id: i32,
    cluster_id: &str,
) -> Result<(), String> {
    let path = log_dir.join(META_PROPERTIES_FILE);
    if let Ok(text) = std::fs::read_to_string(&path) {
        for line in text.lines() {
            if let Some(v) = line.strip_prefix("broker.id=") {
                if v.trim() != broker_id.to_string() {
                    return Err(format!(
                        "{}: broker.id {} does not match configured broker.id {broker_id}",
                        path.display(),
                        v.trim()
                    ));
                }
            }
            if let Some(v) = line.strip_prefix("cluster.id=") {
                if v.trim() != cluster_id {
                    return Err(format!(
                        "{}: cluster.id {} does not match the metadata store's {cluster_id}",
                        path.display(),
                        v.trim()
                    ));
                }
            }
        }
        return Ok(());
    }
    let text = format!(
        "#\n#Written by kshard\ncluster.id={cluster_id}\nversion=0\nbroker.id={broker_id}\n"
    );
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp).map_err(|e| e.to_string())?;
    f.write_all(text.as_bytes()).map_err(|e| e.to_string())?;
    f.sync_all().map_err(|e| e.to_string())?;
    std::fs::rename(&tmp, &path).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_once_then_checked() {
        let dir = std::env::temp_dir().join(format!("kshard-meta-props-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(
            read_meta_properties(&dir).unwrap(),
            MetaProperties::default(),
            "a fresh log dir"
        );
        write_meta_properties(&dir, 3, "abc").unwrap();
        assert_eq!(
            read_meta_properties(&dir).unwrap(),
            MetaProperties {
                broker_id: Some(3),
                cluster_id: Some("abc".into())
            }
        );
        write_meta_properties(&dir, 3, "abc").unwrap();
        let e = write_meta_properties(&dir, 4, "abc").unwrap_err();
        assert!(
            e.contains("broker.id 3 does not match configured broker.id 4"),
            "{e}"
        );
        let e = write_meta_properties(&dir, 3, "xyz").unwrap_err();
        assert!(e.contains("cluster.id abc does not match"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn every_dir_gets_one_and_they_must_agree() {
        let root =
            std::env::temp_dir().join(format!("kshard-meta-ensemble-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let dirs = vec![root.join("a"), root.join("b")];
        for d in &dirs {
            std::fs::create_dir_all(d).unwrap();
        }
        assert_eq!(
            read_meta_properties_ensemble(&dirs).unwrap(),
            MetaProperties::default()
        );
        write_meta_properties(&dirs[1], 1, "c1").unwrap();
        // A fresh dir beside a used one (a disk added to log.dirs) is fine.
        let agreed = read_meta_properties_ensemble(&dirs).unwrap();
        assert_eq!(
            (agreed.broker_id, agreed.cluster_id.as_deref()),
            (Some(1), Some("c1"))
        );
        write_meta_properties_all(&dirs, 1, "c1").unwrap();
        assert_eq!(read_meta_properties(&dirs[0]).unwrap(), agreed);

        std::fs::write(
            dirs[1].join(META_PROPERTIES_FILE),
            "cluster.id=c1\nversion=0\nbroker.id=2\n",
        )
        .unwrap();
        let e = read_meta_properties_ensemble(&dirs).unwrap_err();
        assert!(
            e.starts_with("Stored node id 2 doesn't match previous node id 1 in "),
            "{e}"
        );
        assert!(write_meta_properties_all(&dirs, 1, "c1").is_err());
        std::fs::write(
            dirs[1].join(META_PROPERTIES_FILE),
            "cluster.id=c2\nversion=0\nbroker.id=1\n",
        )
        .unwrap();
        let e = read_meta_properties_ensemble(&dirs).unwrap_err();
        assert!(e.starts_with("Invalid cluster.id in: "), "{e}");
        assert!(e.ends_with(". Expected c1, but read c2"), "{e}");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
