//! ZooKeeper layout of Kafka's ACLs (`kafka.zk.ZkData`: `ZkAclStore`,
//! `LiteralAclStore`, `ExtendedAclStore`, `ResourceZNode`,
//! `LiteralAclChangeStore`, `ExtendedAclChangeStore`,
//! `ExtendedAclChangeEvent`) and the znode JSON of
//! `org.apache.kafka.security.authorizer.AclEntry`.

use serde_json::Value;

use super::cache::AclSet;
use super::model::{
    parse_principal, AccessControlEntry, AclOperation, AclPermissionType, PatternType,
    ResourcePattern, ResourceType,
};

/// LiteralAclStore.aclPath.
pub const LITERAL_ACL_PATH: &str = "/kafka-acl";
/// ExtendedAclZNode.path; PREFIXED patterns live under `<this>/prefixed`.
pub const EXTENDED_ACL_PATH: &str = "/kafka-acl-extended";
/// LiteralAclChangeStore.aclChangePath.
pub const LITERAL_CHANGE_PATH: &str = "/kafka-acl-changes";
/// ExtendedAclChangeStore.aclChangePath.
pub const EXTENDED_CHANGE_PATH: &str = "/kafka-acl-extended-changes";
/// ZkAclChangeStore.SequenceNumberPrefix.
pub const CHANGE_PREFIX: &str = "acl_changes_";

/// The resource types ACLs can be stored for (AclEntry.RESOURCE_TYPES).
pub const STORED_RESOURCE_TYPES: [ResourceType; 6] = [
    ResourceType::Topic,
    ResourceType::Group,
    ResourceType::Cluster,
    ResourceType::TransactionalId,
    ResourceType::DelegationToken,
    ResourceType::User,
];

/// ZkAclStore(patternType).aclPath; only LITERAL and PREFIXED have a store.
pub fn acl_store_path(pattern_type: PatternType) -> Result<String, String> {
    match pattern_type {
        PatternType::Literal => Ok(LITERAL_ACL_PATH.to_string()),
        // ExtendedAclStore: the lower-cased pattern type name.
        PatternType::Prefixed => Ok(format!("{EXTENDED_ACL_PATH}/prefixed")),
        other => Err(format!("Invalid pattern type: {other}")),
    }
}

/// ZkAclStore.path(resourceType): the parent of that type's resource znodes.
pub fn acl_type_path(
    pattern_type: PatternType,
    resource_type: ResourceType,
) -> Result<String, String> {
    Ok(format!(
        "{}/{}",
        acl_store_path(pattern_type)?,
        resource_type.pascal_name()
    ))
}

/// ResourceZNode.path: `/kafka-acl/Topic/foo`,
/// `/kafka-acl-extended/prefixed/Topic/foo`.
pub fn acl_znode_path(pattern: &ResourcePattern) -> Result<String, String> {
    Ok(format!(
        "{}/{}",
        acl_type_path(pattern.pattern_type, pattern.resource_type)?,
        pattern.name
    ))
}

/// KafkaZkClient.createAclPaths: each store's root and per-type parents,
/// then both change roots, in creation order.
pub fn acl_paths_to_create() -> Vec<String> {
    let mut paths = Vec::new();
    for pt in [PatternType::Literal, PatternType::Prefixed] {
        let Ok(root) = acl_store_path(pt) else {
            continue;
        };
        let children: Vec<String> = STORED_RESOURCE_TYPES
            .iter()
            .map(|rt| format!("{root}/{}", rt.pascal_name()))
            .collect();
        paths.push(root);
        paths.extend(children);
    }
    paths.push(LITERAL_CHANGE_PATH.to_string());
    paths.push(EXTENDED_CHANGE_PATH.to_string());
    paths
}

/// A child of a store root (`Topic`, or `TOPIC` from old writers) as
/// AclAuthorizer.loadAllAcls reads it: SecurityUtils.resourceType. `None`
/// for names Kafka ignores ("Ignoring unknown ResourceType").
pub fn parse_acl_type_dir(name: &str) -> Option<ResourceType> {
    match ResourceType::from_pascal_name(name) {
        ResourceType::Unknown | ResourceType::Any => None,
        rt => Some(rt),
    }
}

/// Appends `s` as a JSON string escaped as Jackson does: `"` and `\`,
/// the short forms \b \t \n \f \r, other controls as upper-case \u00XX.
fn push_json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// ResourceZNode.encode. Kafka 3.9 builds the JSON from `java.util.HashMap`s,
/// whose iteration order puts `acls` before `version` and each entry's keys
/// as principal, permissionType, host, operation; those bytes are matched.
pub fn encode_acls<'a>(acls: impl IntoIterator<Item = &'a AccessControlEntry>) -> Vec<u8> {
    let mut out = String::from("{\"acls\":[");
    for (i, acl) in acls.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"principal\":");
        push_json_str(&mut out, &acl.principal);
        out.push_str(",\"permissionType\":");
        push_json_str(&mut out, acl.permission_type.pascal_name());
        out.push_str(",\"host\":");
        push_json_str(&mut out, &acl.host);
        out.push_str(",\"operation\":");
        push_json_str(&mut out, acl.operation.pascal_name());
        out.push('}');
    }
    out.push_str("],\"version\":1}");
    out.into_bytes()
}

fn str_field<'a>(obj: &'a Value, key: &str) -> Result<&'a str, String> {
    obj.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("ACL entry field '{key}' is missing or not a string: {obj}"))
}

/// One element of the `acls` array (AclEntry.fromBytes' loop body).
fn decode_entry(item: &Value) -> Result<AccessControlEntry, String> {
    let principal = str_field(item, "principal")?;
    parse_principal(principal)?;
    let permission_name = str_field(item, "permissionType")?;
    let permission_type = AclPermissionType::from_pascal_name(permission_name);
    if matches!(
        permission_type,
        AclPermissionType::Unknown | AclPermissionType::Any
    ) {
        return Err(format!(
            "Invalid permissionType in ACL entry: {permission_name}"
        ));
    }
    let host = str_field(item, "host")?;
    let operation_name = str_field(item, "operation")?;
    let operation = AclOperation::from_pascal_name(operation_name);
    if matches!(operation, AclOperation::Unknown | AclOperation::Any) {
        return Err(format!("Invalid operation in ACL entry: {operation_name}"));
    }
    Ok(AccessControlEntry {
        principal: principal.to_string(),
        host: host.to_string(),
        operation,
        permission_type,
    })
}

/// ResourceZNode.decode / AclEntry.fromBytes: empty data is no ACLs; keys in
/// any order, extra keys ignored, names Pascal-case or upper-case (`READ`);
/// `version` must be the integer 1. Unlike Kafka, an unparsable document or
/// an UNKNOWN operation/permission is an error rather than silently kept.
pub fn decode_acls(bytes: &[u8]) -> Result<AclSet, String> {
    if bytes.is_empty() {
        return Ok(AclSet::new());
    }
    let js: Value =
        serde_json::from_slice(bytes).map_err(|e| format!("Invalid ACL znode JSON: {e}"))?;
    match js.get("version").and_then(Value::as_i64) {
        Some(1) => {}
        _ => return Err(format!("Unsupported ACL znode version in {js}")),
    }
    let items = js
        .get("acls")
        .and_then(Value::as_array)
        .ok_or_else(|| format!("ACL znode has no 'acls' array: {js}"))?;
    items.iter().map(decode_entry).collect()
}

/// ZkAclChangeStore.createChangeNode: the path prefix to create a
/// persistent sequential node at (`/kafka-acl-changes/acl_changes_`) and its
/// data. LITERAL payload is `TOPIC:foo` (the Java enum name, as Kafka's
/// `resourceType.toString` writes it); PREFIXED payload is the
/// ExtendedAclChangeEvent JSON.
pub fn change_notification(pattern: &ResourcePattern) -> Result<(String, Vec<u8>), String> {
    match pattern.pattern_type {
        PatternType::Literal => Ok((
            format!("{LITERAL_CHANGE_PATH}/{CHANGE_PREFIX}"),
            format!("{}:{}", pattern.resource_type.java_name(), pattern.name).into_bytes(),
        )),
        PatternType::Prefixed => {
            let mut out = String::from("{\"version\":1,\"resourceType\":");
            push_json_str(&mut out, pattern.resource_type.java_name());
            out.push_str(",\"name\":");
            push_json_str(&mut out, &pattern.name);
            out.push_str(",\"patternType\":");
            push_json_str(&mut out, pattern.pattern_type.java_name());
            out.push('}');
            Ok((
                format!("{EXTENDED_CHANGE_PATH}/{CHANGE_PREFIX}"),
                out.into_bytes(),
            ))
        }
        other => Err(format!("Cannot notify a change of pattern type {other}")),
    }
}

/// LiteralAclChangeStore.decode: `<type>:<name>`, split at the first colon
/// (so a name may contain colons); the type by Java enum name, any case.
fn decode_literal_change(bytes: &[u8]) -> Result<ResourcePattern, String> {
    let text = String::from_utf8_lossy(bytes);
    let Some((type_name, name)) = text.split_once(':') else {
        return Err(format!(
            "expected a string in format ResourceType:ResourceName but got {text}"
        ));
    };
    match ResourceType::from_java_name(type_name) {
        ResourceType::Unknown | ResourceType::Any => {
            Err(format!("Unknown resource type in ACL change: {text}"))
        }
        rt => Ok(ResourcePattern::literal(rt, name)),
    }
}

/// ExtendedAclChangeStore.decode with Kafka's messages.
fn decode_extended_change(bytes: &[u8]) -> Result<ResourcePattern, String> {
    const PARSE: &str = "Failed to parse ACL change event";
    const CONVERT: &str = "Failed to convert ACL change event to resource";
    let js: Value = serde_json::from_slice(bytes).map_err(|e| format!("{PARSE}: {e}"))?;
    let field = |key: &str| {
        js.get(key)
            .and_then(Value::as_str)
            .ok_or_else(|| format!("{PARSE}: '{key}' is missing or not a string"))
    };
    let version = js
        .get("version")
        .and_then(Value::as_i64)
        .ok_or_else(|| format!("{PARSE}: 'version' is missing or not an integer"))?;
    if version > 1 {
        return Err(format!(
            "{PARSE}: Acl change event received for unsupported version: {version}"
        ));
    }
    let rt = ResourceType::from_java_name(field("resourceType")?);
    let name = field("name")?;
    let pt = PatternType::from_exact_name(field("patternType")?);
    if rt.is_unknown() || !pt.is_specific() {
        return Err(format!("{CONVERT}: {js}"));
    }
    ResourcePattern::new(rt, name, pt).map_err(|e| format!("{CONVERT}: {e}"))
}

/// Decodes a change node's data; `parent` is the change root it was read
/// under (`/kafka-acl-changes` or `/kafka-acl-extended-changes`).
pub fn decode_change(parent: &str, bytes: &[u8]) -> Result<ResourcePattern, String> {
    match parent.trim_end_matches('/') {
        LITERAL_CHANGE_PATH => decode_literal_change(bytes),
        EXTENDED_CHANGE_PATH => decode_extended_change(bytes),
        other => Err(format!("Not an ACL change path: {other}")),
    }
}
