//! IncrementalAlterConfigs operations (Kafka's
//! ConfigAdminManager.prepareIncrementalConfigs) and the per-resource
//! request checks both AlterConfigs APIs run first
//! (ConfigAdminManager.preprocess).

use std::collections::{BTreeMap, HashMap, HashSet};

use super::defs::{ConfigDef, ConfigType};

/// AlterConfigOp.OpType.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i8)]
pub enum AlterConfigOpType {
    Set = 0,
    Delete = 1,
    Append = 2,
    Subtract = 3,
}

impl AlterConfigOpType {
    pub fn from_id(id: i8) -> Option<AlterConfigOpType> {
        match id {
            0 => Some(AlterConfigOpType::Set),
            1 => Some(AlterConfigOpType::Delete),
            2 => Some(AlterConfigOpType::Append),
            3 => Some(AlterConfigOpType::Subtract),
            _ => None,
        }
    }
}

/// One requested change; `op` is the raw wire value (0 for the legacy API).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlterConfigOp {
    pub name: String,
    pub op: i8,
    pub value: Option<String>,
}

/// Why ops could not be applied: which Kafka error and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AlterOpsError {
    /// INVALID_CONFIG with this message.
    InvalidConfig(String),
    /// INVALID_REQUEST with this message.
    InvalidRequest(String),
    /// UNKNOWN_SERVER_ERROR; Kafka sends a null message.
    UnknownServerError,
}

/// How an op id Kafka does not know is answered, which depends on the
/// resource type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnknownOp {
    /// TOPIC: ZkAdminManager hits a Scala MatchError when it reaches the op,
    /// so ops before it may fail first.
    ServerError,
    /// BROKER: ConfigAdminManager.preprocess maps every op id before applying
    /// any, answering `Unknown operations type <n>`.
    InvalidRequest,
}

/// Applies `ops` in order to `current` (the stored overrides) and returns
/// the new override set. `def_of` finds a key's definition (the topic or the
/// broker table), used for APPEND/SUBTRACT: their list type and default.
pub fn apply_incremental(
    current: &BTreeMap<String, String>,
    ops: &[AlterConfigOp],
    def_of: impl Fn(&str) -> Option<&'static ConfigDef>,
    unknown_op: UnknownOp,
) -> Result<BTreeMap<String, String>, AlterOpsError> {
    if unknown_op == UnknownOp::InvalidRequest {
        if let Some(op) = ops
            .iter()
            .find(|o| AlterConfigOpType::from_id(o.op).is_none())
        {
            return Err(AlterOpsError::InvalidRequest(format!(
                "Unknown operations type {}",
                op.op
            )));
        }
    }
    let mut props = current.clone();
    for op in ops {
        let Some(kind) = AlterConfigOpType::from_id(op.op) else {
            return Err(AlterOpsError::UnknownServerError);
        };
        match kind {
            AlterConfigOpType::Set => {
                // Properties.setProperty(k, null) throws a NullPointerException.
                let value = op.value.clone().ok_or(AlterOpsError::UnknownServerError)?;
                props.insert(op.name.clone(), value);
            }
            AlterConfigOpType::Delete => {
                props.remove(&op.name);
            }
            AlterConfigOpType::Append | AlterConfigOpType::Subtract => {
                let def = list_def(&op.name, kind, &def_of)?;
                let value = op
                    .value
                    .as_deref()
                    .ok_or(AlterOpsError::UnknownServerError)?;
                let base = props.get(&op.name).cloned().or_else(|| default_text(def));
                let updated = if kind == AlterConfigOpType::Append {
                    append(base.as_deref(), value)
                } else {
                    subtract(base.as_deref(), value)
                };
                props.insert(op.name.clone(), updated);
            }
        }
    }
    Ok(props)
}

/// The definition of a key APPEND/SUBTRACT may change: Kafka looks the key
/// up with Scala's `Map.apply`, so an unknown key is a
/// NoSuchElementException (UNKNOWN_SERVER_ERROR), and only LIST keys pass.
fn list_def(
    name: &str,
    kind: AlterConfigOpType,
    def_of: &impl Fn(&str) -> Option<&'static ConfigDef>,
) -> Result<&'static ConfigDef, AlterOpsError> {
    let def = def_of(name).ok_or(AlterOpsError::UnknownServerError)?;
    if def.config_type != ConfigType::List {
        let verb = if kind == AlterConfigOpType::Append {
            "append"
        } else {
            "subtract"
        };
        return Err(AlterOpsError::InvalidConfig(format!(
            "Config value {verb} is not allowed for config key: {name}"
        )));
    }
    Ok(def)
}

/// ConfigDef.convertToString(default, LIST): the list joined by ",".
fn default_text(def: &ConfigDef) -> Option<String> {
    def.default.map(str::to_string)
}

/// Java's `String.split(",")`: trailing empty strings go, but "" is [""].
fn java_split(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return vec![""];
    }
    let mut parts: Vec<&str> = text.split(',').collect();
    while parts.last() == Some(&"") {
        parts.pop();
    }
    parts
}

/// Kafka's APPEND: an empty base is no items; only items not already in the
/// base are added (duplicates within `value` are kept, as Kafka keeps them).
fn append(base: Option<&str>, value: &str) -> String {
    let old: Vec<&str> = base
        .filter(|s| !s.is_empty())
        .map(java_split)
        .unwrap_or_default();
    let mut out = old.clone();
    out.extend(java_split(value).into_iter().filter(|v| !old.contains(v)));
    out.join(",")
}

/// Kafka's SUBTRACT: Scala's `List.diff`, a multiset difference (each item
/// of `value` removes one occurrence).
fn subtract(base: Option<&str>, value: &str) -> String {
    let mut remove: HashMap<&str, usize> = HashMap::new();
    for item in java_split(value) {
        *remove.entry(item).or_default() += 1;
    }
    let mut out = Vec::new();
    for item in java_split(base.unwrap_or("")) {
        match remove.get_mut(item) {
            Some(n) if *n > 0 => *n -= 1,
            _ => out.push(item),
        }
    }
    out.join(",")
}

/// ConfigAdminManager.preprocess's checks on one resource's entries, as the
/// INVALID_REQUEST message: duplicate names, then null values (the legacy
/// API refuses any null; the incremental one a null on anything but DELETE).
pub fn check_request_shape(ops: &[AlterConfigOp], incremental: bool) -> Result<(), String> {
    let mut seen = HashSet::new();
    if !ops.iter().all(|o| seen.insert(o.name.as_str())) {
        return Err("Error due to duplicate config keys".to_string());
    }
    let nulls: Vec<&str> = ops
        .iter()
        .filter(|o| o.value.is_none())
        .filter(|o| !incremental || o.op != AlterConfigOpType::Delete as i8)
        .map(|o| o.name.as_str())
        .collect();
    if !nulls.is_empty() {
        return Err(format!(
            "Null value not supported for : {}",
            nulls.join(", ")
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::defs::{broker_def, topic_def};

    fn op(name: &str, op: i8, value: Option<&str>) -> AlterConfigOp {
        AlterConfigOp {
            name: name.to_string(),
            op,
            value: value.map(str::to_string),
        }
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn topic(
        current: &[(&str, &str)],
        ops: &[AlterConfigOp],
    ) -> Result<BTreeMap<String, String>, AlterOpsError> {
        apply_incremental(&map(current), ops, topic_def, UnknownOp::ServerError)
    }

    #[test]
    fn set_and_delete() {
        let out = topic(
            &[("retention.ms", "1"), ("segment.ms", "5")],
            &[
                op("retention.ms", 0, Some("2")),
                op("segment.ms", 1, None),
                op("flush.ms", 1, Some("")),
            ],
        )
        .unwrap();
        assert_eq!(out, map(&[("retention.ms", "2")]));
    }

    #[test]
    fn append_and_subtract_cleanup_policy() {
        // Base is the default ("delete") when there is no override.
        let out = topic(&[], &[op("cleanup.policy", 2, Some("compact"))]).unwrap();
        assert_eq!(out["cleanup.policy"], "delete,compact");
        let out = topic(
            &[("cleanup.policy", "compact")],
            &[op("cleanup.policy", 2, Some("compact,delete"))],
        )
        .unwrap();
        assert_eq!(out["cleanup.policy"], "compact,delete");
        // An empty override counts as no items, not as the default.
        let out = topic(
            &[("cleanup.policy", "")],
            &[op("cleanup.policy", 2, Some("compact"))],
        )
        .unwrap();
        assert_eq!(out["cleanup.policy"], "compact");
        let out = topic(
            &[("cleanup.policy", "compact,delete")],
            &[op("cleanup.policy", 3, Some("delete"))],
        )
        .unwrap();
        assert_eq!(out["cleanup.policy"], "compact");
        let out = topic(&[], &[op("cleanup.policy", 3, Some("delete"))]).unwrap();
        assert_eq!(out["cleanup.policy"], "");
        assert_eq!(subtract(Some("a,b,a"), "a"), "b,a");
        assert_eq!(append(None, "a,,b,"), "a,,b");
    }

    #[test]
    fn append_errors() {
        assert_eq!(
            topic(&[], &[op("retention.ms", 2, Some("1"))]),
            Err(AlterOpsError::InvalidConfig(
                "Config value append is not allowed for config key: retention.ms".into()
            ))
        );
        assert_eq!(
            topic(&[], &[op("retention.ms", 3, Some("1"))]),
            Err(AlterOpsError::InvalidConfig(
                "Config value subtract is not allowed for config key: retention.ms".into()
            ))
        );
        assert_eq!(
            topic(&[], &[op("no.such", 2, Some("1"))]),
            Err(AlterOpsError::UnknownServerError)
        );
    }

    #[test]
    fn unknown_op_ids() {
        // Topics fail when the op is reached, so an earlier error wins.
        assert_eq!(
            topic(
                &[],
                &[
                    op("retention.ms", 2, Some("1")),
                    op("segment.ms", 9, Some("1"))
                ]
            ),
            Err(AlterOpsError::InvalidConfig(
                "Config value append is not allowed for config key: retention.ms".into()
            ))
        );
        assert_eq!(
            topic(&[], &[op("segment.ms", 9, Some("1"))]),
            Err(AlterOpsError::UnknownServerError)
        );
        let broker = apply_incremental(
            &BTreeMap::new(),
            &[op("log.retention.ms", 2, Some("1")), op("x", 7, Some("1"))],
            broker_def,
            UnknownOp::InvalidRequest,
        );
        assert_eq!(
            broker,
            Err(AlterOpsError::InvalidRequest(
                "Unknown operations type 7".into()
            ))
        );
    }

    #[test]
    fn request_shape() {
        let dup = [op("a", 0, Some("1")), op("a", 1, None)];
        assert_eq!(
            check_request_shape(&dup, true),
            Err("Error due to duplicate config keys".into())
        );
        let nulls = [op("a", 0, None), op("b", 1, None), op("c", 2, None)];
        assert_eq!(
            check_request_shape(&nulls, true),
            Err("Null value not supported for : a, c".into())
        );
        let legacy = [op("a", 0, None), op("b", 0, None)];
        assert_eq!(
            check_request_shape(&legacy, false),
            Err("Null value not supported for : a, b".into())
        );
        assert_eq!(check_request_shape(&[op("a", 0, Some(""))], false), Ok(()));
    }
}
