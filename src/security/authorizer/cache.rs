//! The decision half of Kafka 3.9's `kafka.security.authorizer.AclAuthorizer`
//! (ZooKeeper mode): its `aclCache`, `authorizeAction`, the
//! `authorizeByResourceType` override, and the `super.users` /
//! `allow.everyone.if.no.acl.found` settings.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use super::model::{
    parse_principal, AccessControlEntry, AclOperation, AclPermissionType, PatternType,
    ResourcePattern, ResourceType, WILDCARD_HOST, WILDCARD_PRINCIPAL, WILDCARD_RESOURCE,
};

/// The ACLs of one resource pattern (Kafka's `VersionedAcls.acls`).
pub type AclSet = BTreeSet<AccessControlEntry>;

/// One resource type's patterns. Names are keys so that the literal name,
/// the wildcard and every prefix of a name are direct lookups.
#[derive(Debug, Clone, Default)]
struct TypeAcls {
    literal: BTreeMap<String, AclSet>,
    prefixed: BTreeMap<String, AclSet>,
    /// Byte length of the longest prefixed name: prefixes of a resource
    /// name beyond it cannot be keys, so the prefix walk stops there.
    longest_prefix: usize,
}

impl TypeAcls {
    fn map(&self, pattern_type: PatternType) -> Option<&BTreeMap<String, AclSet>> {
        match pattern_type {
            PatternType::Literal => Some(&self.literal),
            PatternType::Prefixed => Some(&self.prefixed),
            _ => None,
        }
    }
}

/// AclAuthorizer's cache and decision logic. The integrator fills it from
/// ZooKeeper (`update`) and consults it per request.
#[derive(Debug, Clone, Default)]
pub struct AclCache {
    super_users: HashSet<String>,
    allow_everyone_if_no_acl_found: bool,
    /// Indexed by `ResourceType::code()`.
    by_type: [TypeAcls; 8],
}

/// `super.users`: principals separated by `;`, each trimmed and parsed as
/// `type:name` (AclAuthorizer.configure).
pub fn parse_super_users(config: &str) -> Result<HashSet<String>, String> {
    if config.is_empty() {
        return Ok(HashSet::new());
    }
    config
        .split(';')
        .map(|s| {
            let (kind, name) = parse_principal(s.trim())?;
            Ok(format!("{kind}:{name}"))
        })
        .collect()
}

/// A request's principal as its type and name, compared with the
/// `type:name` strings ACLs store without building one per request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrincipalRef<'a> {
    pub principal_type: &'a str,
    pub name: &'a str,
}

impl<'a> PrincipalRef<'a> {
    /// Whether `stored` (`type:name`) names this principal.
    pub fn is(&self, stored: &str) -> bool {
        let t = self.principal_type.len();
        stored.len() == t + 1 + self.name.len()
            && stored.starts_with(self.principal_type)
            && stored.as_bytes()[t] == b':'
            && stored.ends_with(self.name)
    }
}

/// `type:name`, split at the first colon (a string without one is a name
/// of no type, which no stored principal equals).
impl<'a> From<&'a str> for PrincipalRef<'a> {
    fn from(s: &'a str) -> PrincipalRef<'a> {
        let (principal_type, name) = s.split_once(':').unwrap_or(("", s));
        PrincipalRef {
            principal_type,
            name,
        }
    }
}

/// The principal and host rules of AclAuthorizer.matchingAclExists.
fn entry_applies(entry: &AccessControlEntry, principal: PrincipalRef<'_>, host: &str) -> bool {
    (principal.is(&entry.principal) || entry.principal == WILDCARD_PRINCIPAL)
        && (entry.host == host || entry.host == WILDCARD_HOST)
}

/// SecurityUtils.authorizeByResourceTypeCheckArgs.
fn check_by_type_args(op: AclOperation, resource_type: ResourceType) -> Result<(), String> {
    let message = match (resource_type, op) {
        (ResourceType::Any, _) => {
            "Must specify a non-filter resource type for authorizeByResourceType"
        }
        (ResourceType::Unknown, _) => "Unknown resource type",
        (_, AclOperation::Any) => {
            "Must specify a non-filter operation type for authorizeByResourceType"
        }
        (_, AclOperation::Unknown) => "Unknown operation type",
        _ => return Ok(()),
    };
    Err(message.to_string())
}

impl AclCache {
    /// `super_users` are `type:name` strings (see `parse_super_users`).
    pub fn new<I, S>(super_users: I, allow_everyone_if_no_acl_found: bool) -> AclCache
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        AclCache {
            super_users: super_users.into_iter().map(Into::into).collect(),
            allow_everyone_if_no_acl_found,
            by_type: Default::default(),
        }
    }

    pub fn is_super_user<'p>(&self, principal: impl Into<PrincipalRef<'p>>) -> bool {
        let principal = principal.into();
        self.super_users.iter().any(|s| principal.is(s))
    }

    pub fn allow_everyone_if_no_acl_found(&self) -> bool {
        self.allow_everyone_if_no_acl_found
    }

    fn type_acls(&self, resource_type: ResourceType) -> &TypeAcls {
        &self.by_type[resource_type.code() as usize]
    }

    /// The ACLs stored for exactly this pattern.
    pub fn acls(&self, pattern: &ResourcePattern) -> Option<&AclSet> {
        self.type_acls(pattern.resource_type)
            .map(pattern.pattern_type)?
            .get(pattern.name.as_str())
    }

    /// AclAuthorizer.updateCache: replace a pattern's ACLs; an empty set
    /// removes the pattern. Only concrete types and patterns can be stored.
    pub fn update(&mut self, pattern: ResourcePattern, acls: AclSet) -> Result<(), String> {
        if matches!(
            pattern.resource_type,
            ResourceType::Any | ResourceType::Unknown
        ) || !pattern.pattern_type.is_specific()
        {
            return Err(format!("Cannot store ACLs for {pattern}"));
        }
        let t = &mut self.by_type[pattern.resource_type.code() as usize];
        let prefixed = pattern.pattern_type == PatternType::Prefixed;
        let map = if prefixed {
            &mut t.prefixed
        } else {
            &mut t.literal
        };
        let (len, removing) = (pattern.name.len(), acls.is_empty());
        if removing {
            map.remove(pattern.name.as_str());
        } else {
            map.insert(pattern.name, acls);
        }
        // Rescan only when the longest prefix may have gone, so that loading
        // many prefixed patterns stays linear.
        if prefixed && !removing {
            t.longest_prefix = t.longest_prefix.max(len);
        } else if prefixed && len == t.longest_prefix {
            t.longest_prefix = t.prefixed.keys().map(String::len).max().unwrap_or(0);
        }
        Ok(())
    }

    /// Number of resource patterns holding ACLs.
    pub fn len(&self) -> usize {
        self.by_type
            .iter()
            .map(|t| t.literal.len() + t.prefixed.len())
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every stored pattern in AclAuthorizer.ResourceOrdering: resource
    /// type, then pattern type, then name in reverse order.
    pub fn resources(&self) -> impl Iterator<Item = (ResourcePattern, &AclSet)> + '_ {
        self.by_type.iter().enumerate().flat_map(|(code, t)| {
            let rt = ResourceType::from_code(code as i8);
            let literal = t
                .literal
                .iter()
                .rev()
                .map(move |(name, set)| (ResourcePattern::literal(rt, name.as_str()), set));
            let prefixed = t
                .prefixed
                .iter()
                .rev()
                .map(move |(name, set)| (ResourcePattern::prefixed(rt, name.as_str()), set));
            literal.chain(prefixed)
        })
    }

    /// Calls `f` on each ACL set that applies to a literal resource name
    /// (AclAuthorizer.matchingAcls: its literal pattern, the `*` pattern and
    /// every prefixed pattern that is a prefix of it) until `f` says stop.
    fn any_matching_set(
        &self,
        resource_type: ResourceType,
        name: &str,
        mut f: impl FnMut(&AclSet) -> bool,
    ) -> bool {
        let t = self.type_acls(resource_type);
        if t.literal.get(name).is_some_and(&mut f) {
            return true;
        }
        if name != WILDCARD_RESOURCE && t.literal.get(WILDCARD_RESOURCE).is_some_and(&mut f) {
            return true;
        }
        if t.prefixed.is_empty() {
            return false;
        }
        let limit = t.longest_prefix.min(name.len());
        for (i, c) in name.char_indices() {
            let end = i + c.len_utf8();
            if end > limit {
                break;
            }
            if t.prefixed.get(&name[..end]).is_some_and(&mut f) {
                return true;
            }
        }
        false
    }

    /// AclAuthorizer.authorizeAction for a literal resource: super users
    /// pass; with no ACL on the resource at all the answer is
    /// `allow.everyone.if.no.acl.found`; otherwise a matching DENY of the
    /// operation (or ALL) refuses, and a matching ALLOW of the operation,
    /// of ALL, or of an operation implying it grants. No allocation.
    pub fn authorize<'p>(
        &self,
        principal: impl Into<PrincipalRef<'p>>,
        host: &str,
        operation: AclOperation,
        resource_type: ResourceType,
        resource_name: &str,
    ) -> bool {
        let principal = principal.into();
        if self.is_super_user(principal) {
            return true;
        }
        let allow_ops = operation.implied_by();
        let mut found_any = false;
        let mut allowed = false;
        let denied = self.any_matching_set(resource_type, resource_name, |set| {
            found_any = true;
            for entry in set.iter().filter(|e| entry_applies(e, principal, host)) {
                let op = entry.operation;
                match entry.permission_type {
                    AclPermissionType::Deny if op == operation || op == AclOperation::All => {
                        return true;
                    }
                    AclPermissionType::Allow
                        if op == AclOperation::All || allow_ops.contains(&op) =>
                    {
                        allowed = true;
                    }
                    _ => {}
                }
            }
            false
        });
        if !found_any {
            return self.allow_everyone_if_no_acl_found;
        }
        !denied && allowed
    }

    /// Names of `map`'s patterns holding an ACL of `permission` for the
    /// principal (or `User:*`), the host (or `*`) and `op` (or ALL):
    /// AclAuthorizer.matchingResources over its resourceCache.
    fn names_with<'a>(
        map: &'a BTreeMap<String, AclSet>,
        principal: PrincipalRef<'a>,
        host: &'a str,
        op: AclOperation,
        permission: AclPermissionType,
    ) -> impl Iterator<Item = &'a str> + 'a {
        map.iter()
            .filter(move |(_, set)| {
                set.iter().any(|e| {
                    e.permission_type == permission
                        && (e.operation == op || e.operation == AclOperation::All)
                        && entry_applies(e, principal, host)
                })
            })
            .map(|(name, _)| name.as_str())
    }

    /// AclAuthorizer.authorizeByResourceType (the ZooKeeper authorizer's
    /// override of Authorizer's default): may the principal perform `op` on
    /// some resource of this type? A literal `*` DENY refuses; then
    /// `allow.everyone.if.no.acl.found` grants; otherwise some ALLOW pattern
    /// must survive the DENY patterns (a DENY prefix dominates any name it
    /// prefixes; a literal DENY only its own name). No implied operations,
    /// as in Kafka. Scans this type's ACLs: meant for the transactional
    /// and idempotent-producer checks, not per-record paths.
    pub fn authorize_by_resource_type<'p>(
        &self,
        principal: impl Into<PrincipalRef<'p>>,
        host: &str,
        op: AclOperation,
        resource_type: ResourceType,
    ) -> Result<bool, String> {
        check_by_type_args(op, resource_type)?;
        let principal = principal.into();
        if self.is_super_user(principal) {
            return Ok(true);
        }
        let t = self.type_acls(resource_type);
        let names = |map, permission| Self::names_with(map, principal, host, op, permission);
        let deny_literals: Vec<&str> = names(&t.literal, AclPermissionType::Deny).collect();
        if deny_literals.contains(&WILDCARD_RESOURCE) {
            return Ok(false);
        }
        if self.allow_everyone_if_no_acl_found {
            return Ok(true);
        }
        let deny_prefixes: Vec<&str> = names(&t.prefixed, AclPermissionType::Deny).collect();
        let mut allow_prefixes = names(&t.prefixed, AclPermissionType::Allow);
        let mut allow_literals = names(&t.literal, AclPermissionType::Allow);
        if deny_literals.is_empty() && deny_prefixes.is_empty() {
            return Ok(allow_prefixes.next().is_some() || allow_literals.next().is_some());
        }
        // hasDominantPrefixedDeny: some DENY prefix is a prefix of the name.
        let dominated = |name: &str| {
            deny_prefixes
                .iter()
                .any(|p| !p.is_empty() && name.starts_with(p))
        };
        Ok(allow_prefixes.any(|p| !dominated(p))
            || allow_literals
                .any(|l| l == WILDCARD_RESOURCE || (!deny_literals.contains(&l) && !dominated(l))))
    }
}
