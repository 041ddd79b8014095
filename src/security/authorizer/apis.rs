//! CreateAcls, DeleteAcls and DescribeAcls as a Kafka 3.9 ZooKeeper-mode
//! broker answers them: `kafka.server.AclApis`, `AclAuthorizer.createAcls`
//! / `deleteAcls` / `acls`, and the checks `CreateAclsRequest`,
//! `DeleteAclsRequest` and `DescribeAclsRequest` make while parsing.
//! Everything is computed against an `AclCache`; the caller persists the
//! returned `AclWrite`s and then applies them to the cache.

use std::collections::HashMap;

use super::cache::{AclCache, AclSet};
use super::filter::AclBindingFilter;
use super::model::{
    parse_principal, AccessControlEntry, AclBinding, AclOperation, AclPermissionType, PatternType,
    ResourcePattern, ResourceType, CLUSTER_NAME,
};
use super::zk_codec;

/// Errors.NONE.
pub const NONE: i16 = 0;
/// Errors.UNKNOWN_SERVER_ERROR.
pub const UNKNOWN_SERVER_ERROR: i16 = -1;
/// Errors.INVALID_REQUEST.
pub const INVALID_REQUEST: i16 = 42;
/// Errors.SECURITY_DISABLED.
pub const SECURITY_DISABLED: i16 = 54;
/// AclApis' DescribeAcls answer when no authorizer is configured.
pub const DESCRIBE_NO_AUTHORIZER: &str = "No Authorizer is configured on the broker";
/// AclApis' CreateAcls/DeleteAcls answer when no authorizer is configured.
pub const ALTER_NO_AUTHORIZER: &str = "No Authorizer is configured.";
/// The CLUSTER operation each API requires (AclApis' authorizeClusterOperation).
pub const DESCRIBE_ACLS_CLUSTER_OPERATION: AclOperation = AclOperation::Describe;
pub const ALTER_ACLS_CLUSTER_OPERATION: AclOperation = AclOperation::Alter;

/// An error code with the message ApiError.fromThrowable would send (none
/// for UNKNOWN_SERVER_ERROR, which Kafka never explains).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub code: i16,
    pub message: Option<String>,
}

impl ApiError {
    pub const NONE: ApiError = ApiError {
        code: NONE,
        message: None,
    };
    pub const UNKNOWN_SERVER_ERROR: ApiError = ApiError {
        code: UNKNOWN_SERVER_ERROR,
        message: None,
    };

    pub fn invalid_request(message: impl Into<String>) -> ApiError {
        ApiError {
            code: INVALID_REQUEST,
            message: Some(message.into()),
        }
    }
}

/// A pattern's complete new ACL set, to be written to its znode (or the
/// znode deleted when `acls` is empty) followed by a change notification,
/// as AclAuthorizer.updateResourceAcls does when the set changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclWrite {
    pub pattern: ResourcePattern,
    pub acls: AclSet,
}

impl AclWrite {
    pub fn znode_path(&self) -> Result<String, String> {
        zk_codec::acl_znode_path(&self.pattern)
    }

    /// The znode data, or `None` when the znode is to be deleted.
    pub fn znode_data(&self) -> Option<Vec<u8>> {
        (!self.acls.is_empty()).then(|| zk_codec::encode_acls(&self.acls))
    }

    /// The sequential change node to create after the write.
    pub fn notification(&self) -> Result<(String, Vec<u8>), String> {
        zk_codec::change_notification(&self.pattern)
    }
}

/// Applies persisted writes to the cache (AclAuthorizer.updateCache).
pub fn apply_writes(cache: &mut AclCache, writes: &[AclWrite]) -> Result<(), String> {
    for w in writes {
        cache.update(w.pattern.clone(), w.acls.clone())?;
    }
    Ok(())
}

fn has_unknown(
    rt: ResourceType,
    pt: PatternType,
    op: AclOperation,
    perm: AclPermissionType,
) -> bool {
    rt.is_unknown() || pt.is_unknown() || op.is_unknown() || perm.is_unknown()
}

/// CreateAclsRequest.validate. An error here makes Kafka fail the request
/// parse and close the connection; the text is Kafka's message.
pub fn validate_create_request(version: i16, creations: &[AclBinding]) -> Result<(), String> {
    if version == 0
        && creations
            .iter()
            .any(|b| b.pattern.pattern_type != PatternType::Literal)
    {
        return Err("Version 0 only supports literal resource pattern types".to_string());
    }
    let unknown = creations.iter().any(|b| {
        let (p, e) = (&b.pattern, &b.entry);
        has_unknown(
            p.resource_type,
            p.pattern_type,
            e.operation,
            e.permission_type,
        )
    });
    if unknown {
        let list: Vec<String> = creations.iter().map(ToString::to_string).collect();
        return Err(format!(
            "CreatableAcls contain unknown elements: [{}]",
            list.join(", ")
        ));
    }
    Ok(())
}

/// v0 requests predate pattern types: ANY becomes LITERAL, others refused.
fn normalize_v0(
    filter: &mut AclBindingFilter,
    refuse: impl Fn(PatternType) -> String,
) -> Result<(), String> {
    match filter.pattern_filter.pattern_type {
        PatternType::Any => filter.pattern_filter.pattern_type = PatternType::Literal,
        PatternType::Literal => {}
        other => return Err(refuse(other)),
    }
    Ok(())
}

fn filter_has_unknown(f: &AclBindingFilter) -> bool {
    let (p, e) = (&f.pattern_filter, &f.entry_filter);
    has_unknown(
        p.resource_type,
        p.pattern_type,
        e.operation,
        e.permission_type,
    )
}

/// DeleteAclsRequest.normalizeAndValidate (errors close the connection).
pub fn normalize_delete_request(
    version: i16,
    filters: &mut [AclBindingFilter],
) -> Result<(), String> {
    if version == 0 {
        for f in filters.iter_mut() {
            normalize_v0(f, |pt| {
                format!("Version 0 does not support pattern type {pt} (only LITERAL and ANY are supported)")
            })?;
        }
    }
    if filters.iter().any(filter_has_unknown) {
        let list: Vec<String> = filters.iter().map(ToString::to_string).collect();
        return Err(format!(
            "Filters contain UNKNOWN elements, filters: [{}]",
            list.join(", ")
        ));
    }
    Ok(())
}

/// DescribeAclsRequest.normalizeAndValidate (errors close the connection).
pub fn normalize_describe_request(
    version: i16,
    filter: &mut AclBindingFilter,
) -> Result<(), String> {
    if version == 0 {
        normalize_v0(filter, |_| {
            "Version 0 only supports literal resource pattern types".to_string()
        })?;
    }
    if filter_has_unknown(filter) {
        return Err(format!(
            "DescribeAclsRequest contains UNKNOWN elements: {filter}"
        ));
    }
    Ok(())
}

/// What a CreateAcls request does: one result per creation, in order, and
/// the writes to persist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateAclsPlan {
    pub results: Vec<ApiError>,
    pub writes: Vec<AclWrite>,
}

/// Kafka cannot even build an AclBinding from these (ResourcePattern and
/// AccessControlEntry constructors throw), so the handler fails and every
/// result is UNKNOWN_SERVER_ERROR.
fn unbuildable(b: &AclBinding) -> bool {
    ResourcePattern::new(b.pattern.resource_type, "", b.pattern.pattern_type).is_err()
        || AccessControlEntry::new("", "", b.entry.operation, b.entry.permission_type).is_err()
}

/// AclApis.handleCreateAcls' checks, then AclAuthorizer.validateAclBinding.
fn check_creation(b: &AclBinding) -> Option<ApiError> {
    let p = &b.pattern;
    if p.resource_type == ResourceType::Cluster && p.name != CLUSTER_NAME {
        return Some(ApiError::invalid_request(format!(
            "The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        )));
    }
    if p.name.is_empty() {
        return Some(ApiError::invalid_request("Invalid empty resource name"));
    }
    // "ACL binding contains unknown elements" / "... invalid resource name"
    // are the cause; the client sees the wrapper's message.
    if b.is_unknown() || p.name.contains('/') {
        return Some(ApiError::invalid_request("Failed to create ACL"));
    }
    None
}

/// CreateAcls: validated bindings are grouped per pattern and added to its
/// current set. A principal that is not `type:name` fails while Kafka
/// builds the new set (AclEntry's constructor), which fails every binding
/// of that pattern with UNKNOWN_SERVER_ERROR and writes nothing for it.
/// Re-creating existing ACLs succeeds without a write.
pub fn create_acls(cache: &AclCache, creations: &[AclBinding]) -> CreateAclsPlan {
    if creations.iter().any(unbuildable) {
        return CreateAclsPlan {
            results: vec![ApiError::UNKNOWN_SERVER_ERROR; creations.len()],
            writes: Vec::new(),
        };
    }
    let mut results = vec![ApiError::NONE; creations.len()];
    let mut groups: Vec<(&ResourcePattern, Vec<usize>)> = Vec::new();
    let mut group_of: HashMap<&ResourcePattern, usize> = HashMap::new();
    for (i, b) in creations.iter().enumerate() {
        if let Some(err) = check_creation(b) {
            results[i] = err;
            continue;
        }
        let g = *group_of.entry(&b.pattern).or_insert_with(|| {
            groups.push((&b.pattern, Vec::new()));
            groups.len() - 1
        });
        groups[g].1.push(i);
    }
    let mut writes = Vec::new();
    for (pattern, indexes) in groups {
        let bad_principal = indexes
            .iter()
            .any(|&i| parse_principal(&creations[i].entry.principal).is_err());
        if bad_principal {
            for &i in &indexes {
                results[i] = ApiError::UNKNOWN_SERVER_ERROR;
            }
            continue;
        }
        let current = cache.acls(pattern);
        let mut acls = current.cloned().unwrap_or_default();
        acls.extend(indexes.iter().map(|&i| creations[i].entry.clone()));
        if current != Some(&acls) {
            writes.push(AclWrite {
                pattern: pattern.clone(),
                acls,
            });
        }
    }
    CreateAclsPlan { results, writes }
}

/// What a DeleteAcls request does: per filter, the bindings it deleted (each
/// binding is credited to the first filter, in request order, that matches
/// it), and the writes to persist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteAclsPlan {
    pub filter_results: Vec<Vec<AclBinding>>,
    pub writes: Vec<AclWrite>,
}

/// AclAuthorizer.deleteAcls over the cache: for every pattern some filter's
/// pattern filter matches (MATCH included), remove the ACLs one of those
/// filters' entry filters matches.
pub fn delete_acls(cache: &AclCache, filters: &[AclBindingFilter]) -> DeleteAclsPlan {
    let mut filter_results = vec![Vec::new(); filters.len()];
    let mut writes = Vec::new();
    for (pattern, acls) in cache.resources() {
        let matching: Vec<usize> = (0..filters.len())
            .filter(|&i| filters[i].pattern_filter.matches(&pattern))
            .collect();
        if matching.is_empty() {
            continue;
        }
        let mut remaining = acls.clone();
        for acl in acls {
            let first = matching
                .iter()
                .copied()
                .find(|&i| filters[i].entry_filter.matches(acl));
            if let Some(i) = first {
                remaining.remove(acl);
                filter_results[i].push(AclBinding::new(pattern.clone(), acl.clone()));
            }
        }
        if remaining.len() != acls.len() {
            writes.push(AclWrite {
                pattern,
                acls: remaining,
            });
        }
    }
    DeleteAclsPlan {
        filter_results,
        writes,
    }
}

/// AclAuthorizer.acls: every cached binding the filter matches, in the
/// cache's order (resource type, pattern type, name descending).
pub fn describe_acls(cache: &AclCache, filter: &AclBindingFilter) -> Vec<AclBinding> {
    let mut out = Vec::new();
    for (pattern, acls) in cache.resources() {
        if !filter.pattern_filter.matches(&pattern) {
            continue;
        }
        for acl in acls.iter().filter(|a| filter.entry_filter.matches(a)) {
            out.push(AclBinding::new(pattern.clone(), acl.clone()));
        }
    }
    out
}

/// DescribeAclsResponse.aclsResources: bindings grouped per pattern, in
/// order of first appearance.
pub fn group_by_resource(
    bindings: &[AclBinding],
) -> Vec<(ResourcePattern, Vec<AccessControlEntry>)> {
    let mut out: Vec<(ResourcePattern, Vec<AccessControlEntry>)> = Vec::new();
    let mut index: HashMap<&ResourcePattern, usize> = HashMap::new();
    for b in bindings {
        let i = *index.entry(&b.pattern).or_insert_with(|| {
            out.push((b.pattern.clone(), Vec::new()));
            out.len() - 1
        });
        out[i].1.push(b.entry.clone());
    }
    out
}
