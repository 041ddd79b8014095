//! `meta.properties` in a log dir, as Kafka's `MetaProperties` and
//! `BrokerMetadataCheckpoint` (ZooKeeper mode, version 0): the broker id and
//! cluster id the data belongs to, checked at every start so a log dir is
//! never served under another broker's or cluster's identity.

use std::io::Write;
use std::path::Path;

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
}
