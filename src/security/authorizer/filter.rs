//! Kafka's `ResourcePatternFilter`, `AccessControlEntryFilter` and
//! `AclBindingFilter`: the filters DescribeAcls and DeleteAcls carry, with
//! their `matches`, `matchesAtMostOne` and `findIndefiniteField` rules.

use std::fmt;

use super::model::{
    AccessControlEntry, AclBinding, AclOperation, AclPermissionType, PatternType, ResourcePattern,
    ResourceType, WILDCARD_RESOURCE,
};

/// org.apache.kafka.common.resource.ResourcePatternFilter; `name: None`
/// matches any name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResourcePatternFilter {
    pub resource_type: ResourceType,
    pub name: Option<String>,
    pub pattern_type: PatternType,
}

impl ResourcePatternFilter {
    /// ResourcePatternFilter.ANY.
    pub fn any() -> ResourcePatternFilter {
        ResourcePatternFilter {
            resource_type: ResourceType::Any,
            name: None,
            pattern_type: PatternType::Any,
        }
    }

    pub fn new(
        resource_type: ResourceType,
        name: Option<&str>,
        pattern_type: PatternType,
    ) -> ResourcePatternFilter {
        ResourcePatternFilter {
            resource_type,
            name: name.map(str::to_string),
            pattern_type,
        }
    }

    pub fn is_unknown(&self) -> bool {
        self.resource_type.is_unknown() || self.pattern_type.is_unknown()
    }

    /// ResourcePatternFilter.matches. ANY compares the name exactly against
    /// patterns of every type; MATCH also selects the literal wildcard and
    /// every prefixed pattern that is a prefix of the filter's name.
    pub fn matches(&self, pattern: &ResourcePattern) -> bool {
        if self.resource_type != ResourceType::Any && self.resource_type != pattern.resource_type {
            return false;
        }
        if !matches!(self.pattern_type, PatternType::Any | PatternType::Match)
            && self.pattern_type != pattern.pattern_type
        {
            return false;
        }
        let Some(name) = &self.name else {
            return true;
        };
        if self.pattern_type == PatternType::Any || self.pattern_type == pattern.pattern_type {
            return *name == pattern.name;
        }
        match pattern.pattern_type {
            PatternType::Literal => *name == pattern.name || pattern.name == WILDCARD_RESOURCE,
            PatternType::Prefixed => name.starts_with(pattern.name.as_str()),
            // Kafka throws "Unsupported PatternType"; such a pattern can hold no ACL.
            _ => false,
        }
    }

    pub fn matches_at_most_one(&self) -> bool {
        self.find_indefinite_field().is_none()
    }

    /// ResourcePatternFilter.findIndefiniteField, with Kafka's messages.
    pub fn find_indefinite_field(&self) -> Option<&'static str> {
        match (self.resource_type, &self.name, self.pattern_type) {
            (ResourceType::Any, _, _) => Some("Resource type is ANY."),
            (ResourceType::Unknown, _, _) => Some("Resource type is UNKNOWN."),
            (_, None, _) => Some("Resource name is NULL."),
            (_, _, PatternType::Match) => Some("Resource pattern type is MATCH."),
            (_, _, PatternType::Unknown) => Some("Resource pattern type is UNKNOWN."),
            _ => None,
        }
    }
}

impl From<&ResourcePattern> for ResourcePatternFilter {
    /// ResourcePattern.toFilter.
    fn from(p: &ResourcePattern) -> ResourcePatternFilter {
        ResourcePatternFilter::new(p.resource_type, Some(&p.name), p.pattern_type)
    }
}

impl fmt::Display for ResourcePatternFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ResourcePattern(resourceType={}, name={}, patternType={})",
            self.resource_type,
            self.name.as_deref().unwrap_or("<any>"),
            self.pattern_type
        )
    }
}

/// org.apache.kafka.common.acl.AccessControlEntryFilter; `None` matches any
/// principal or host.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AccessControlEntryFilter {
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: AclOperation,
    pub permission_type: AclPermissionType,
}

impl AccessControlEntryFilter {
    /// AccessControlEntryFilter.ANY.
    pub fn any() -> AccessControlEntryFilter {
        AccessControlEntryFilter {
            principal: None,
            host: None,
            operation: AclOperation::Any,
            permission_type: AclPermissionType::Any,
        }
    }

    pub fn new(
        principal: Option<&str>,
        host: Option<&str>,
        operation: AclOperation,
        permission_type: AclPermissionType,
    ) -> AccessControlEntryFilter {
        AccessControlEntryFilter {
            principal: principal.map(str::to_string),
            host: host.map(str::to_string),
            operation,
            permission_type,
        }
    }

    pub fn is_unknown(&self) -> bool {
        self.operation.is_unknown() || self.permission_type.is_unknown()
    }

    /// AccessControlEntryFilter.matches: exact fields; no wildcard expansion
    /// (a filter for `User:alice` does not match an ACL for `User:*`).
    pub fn matches(&self, entry: &AccessControlEntry) -> bool {
        if self
            .principal
            .as_ref()
            .is_some_and(|p| *p != entry.principal)
        {
            return false;
        }
        if self.host.as_ref().is_some_and(|h| *h != entry.host) {
            return false;
        }
        if self.operation != AclOperation::Any && self.operation != entry.operation {
            return false;
        }
        self.permission_type == AclPermissionType::Any
            || self.permission_type == entry.permission_type
    }

    pub fn matches_at_most_one(&self) -> bool {
        self.find_indefinite_field().is_none()
    }

    /// AccessControlEntryData.findIndefiniteField, with Kafka's messages.
    pub fn find_indefinite_field(&self) -> Option<&'static str> {
        if self.principal.is_none() {
            return Some("Principal is NULL");
        }
        if self.host.is_none() {
            return Some("Host is NULL");
        }
        match (self.operation, self.permission_type) {
            (AclOperation::Any, _) => Some("Operation is ANY"),
            (AclOperation::Unknown, _) => Some("Operation is UNKNOWN"),
            (_, AclPermissionType::Any) => Some("Permission type is ANY"),
            (_, AclPermissionType::Unknown) => Some("Permission type is UNKNOWN"),
            _ => None,
        }
    }
}

impl From<&AccessControlEntry> for AccessControlEntryFilter {
    /// AccessControlEntry.toFilter.
    fn from(e: &AccessControlEntry) -> AccessControlEntryFilter {
        AccessControlEntryFilter::new(
            Some(&e.principal),
            Some(&e.host),
            e.operation,
            e.permission_type,
        )
    }
}

impl fmt::Display for AccessControlEntryFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "(principal={}, host={}, operation={}, permissionType={})",
            self.principal.as_deref().unwrap_or("<any>"),
            self.host.as_deref().unwrap_or("<any>"),
            self.operation,
            self.permission_type
        )
    }
}

/// org.apache.kafka.common.acl.AclBindingFilter.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AclBindingFilter {
    pub pattern_filter: ResourcePatternFilter,
    pub entry_filter: AccessControlEntryFilter,
}

impl AclBindingFilter {
    /// AclBindingFilter.ANY.
    pub fn any() -> AclBindingFilter {
        AclBindingFilter::new(
            ResourcePatternFilter::any(),
            AccessControlEntryFilter::any(),
        )
    }

    pub fn new(
        pattern_filter: ResourcePatternFilter,
        entry_filter: AccessControlEntryFilter,
    ) -> AclBindingFilter {
        AclBindingFilter {
            pattern_filter,
            entry_filter,
        }
    }

    pub fn is_unknown(&self) -> bool {
        self.pattern_filter.is_unknown() || self.entry_filter.is_unknown()
    }

    pub fn matches(&self, binding: &AclBinding) -> bool {
        self.pattern_filter.matches(&binding.pattern) && self.entry_filter.matches(&binding.entry)
    }

    pub fn matches_at_most_one(&self) -> bool {
        self.pattern_filter.matches_at_most_one() && self.entry_filter.matches_at_most_one()
    }

    /// AclBindingFilter.findIndefiniteField: the pattern filter's first.
    pub fn find_indefinite_field(&self) -> Option<&'static str> {
        self.pattern_filter
            .find_indefinite_field()
            .or_else(|| self.entry_filter.find_indefinite_field())
    }
}

impl From<&AclBinding> for AclBindingFilter {
    /// AclBinding.toFilter.
    fn from(b: &AclBinding) -> AclBindingFilter {
        AclBindingFilter::new((&b.pattern).into(), (&b.entry).into())
    }
}

impl fmt::Display for AclBindingFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "(patternFilter={}, entryFilter={})",
            self.pattern_filter, self.entry_filter
        )
    }
}
