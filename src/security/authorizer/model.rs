//! The ACL model of Kafka's `org.apache.kafka.common.acl` and
//! `org.apache.kafka.common.resource` packages: `ResourceType`,
//! `PatternType`, `AclOperation`, `AclPermissionType` (with their wire codes
//! and the names `SecurityUtils` writes to ZooKeeper), `ResourcePattern`,
//! `AccessControlEntry` and `AclBinding`.

use std::fmt;

/// ResourcePattern.WILDCARD_RESOURCE: a literal name matching every resource.
pub const WILDCARD_RESOURCE: &str = "*";
/// AclEntry.WILDCARD_PRINCIPAL_STRING: matches every principal.
pub const WILDCARD_PRINCIPAL: &str = "User:*";
/// AclEntry.WILDCARD_HOST: matches every client address.
pub const WILDCARD_HOST: &str = "*";
/// Resource.CLUSTER_NAME: the only name a CLUSTER resource may have.
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// Upper-cases like Java's `toUpperCase(Locale.ROOT)` closely enough for the
/// ASCII names these enums use.
fn upper(s: &str) -> String {
    s.to_uppercase()
}

/// One enum per Kafka enum: declaration order is Java's ordinal order (which
/// `AclAuthorizer.ResourceOrdering` sorts by) and equals code order.
macro_rules! kafka_enum {
    ($(#[$doc:meta])* $ty:ident { $($variant:ident = $code:expr, $java:expr, $pascal:expr;)+ }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $ty { $($variant,)+ }

        impl $ty {
            pub const VALUES: &'static [$ty] = &[$($ty::$variant,)+];

            /// The wire code.
            pub const fn code(self) -> i8 {
                match self { $($ty::$variant => $code,)+ }
            }

            /// `fromCode`: an unknown code is UNKNOWN, as in Kafka.
            pub fn from_code(code: i8) -> $ty {
                match code { $($code => $ty::$variant,)+ _ => $ty::Unknown }
            }

            /// The Java enum constant name (`name()`/`toString()`).
            pub const fn java_name(self) -> &'static str {
                match self { $($ty::$variant => $java,)+ }
            }

            /// `SecurityUtils.*Name`: the Pascal-case name stored in ZooKeeper.
            pub const fn pascal_name(self) -> &'static str {
                match self { $($ty::$variant => $pascal,)+ }
            }

            /// `fromString`: `valueOf(str.toUpperCase())`, UNKNOWN otherwise.
            pub fn from_java_name(s: &str) -> $ty {
                let up = upper(s);
                Self::VALUES.iter().copied().find(|v| v.java_name() == up).unwrap_or($ty::Unknown)
            }

            /// `SecurityUtils.valueFromMap`: the Pascal-case name, or its
            /// upper-cased form compared case-insensitively; UNKNOWN otherwise.
            pub fn from_pascal_name(s: &str) -> $ty {
                if let Some(v) = Self::VALUES.iter().copied().find(|v| v.pascal_name() == s) {
                    return v;
                }
                let up = upper(s);
                Self::VALUES
                    .iter()
                    .copied()
                    .find(|v| upper(v.pascal_name()) == up)
                    .unwrap_or($ty::Unknown)
            }

            pub fn is_unknown(self) -> bool {
                self == $ty::Unknown
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.java_name())
            }
        }
    };
}

kafka_enum!(
    /// org.apache.kafka.common.resource.ResourceType.
    ResourceType {
        Unknown = 0, "UNKNOWN", "Unknown";
        Any = 1, "ANY", "Any";
        Topic = 2, "TOPIC", "Topic";
        Group = 3, "GROUP", "Group";
        Cluster = 4, "CLUSTER", "Cluster";
        TransactionalId = 5, "TRANSACTIONAL_ID", "TransactionalId";
        DelegationToken = 6, "DELEGATION_TOKEN", "DelegationToken";
        User = 7, "USER", "User";
    }
);

kafka_enum!(
    /// org.apache.kafka.common.resource.PatternType.
    PatternType {
        Unknown = 0, "UNKNOWN", "Unknown";
        Any = 1, "ANY", "Any";
        Match = 2, "MATCH", "Match";
        Literal = 3, "LITERAL", "Literal";
        Prefixed = 4, "PREFIXED", "Prefixed";
    }
);

kafka_enum!(
    /// org.apache.kafka.common.acl.AclOperation.
    AclOperation {
        Unknown = 0, "UNKNOWN", "Unknown";
        Any = 1, "ANY", "Any";
        All = 2, "ALL", "All";
        Read = 3, "READ", "Read";
        Write = 4, "WRITE", "Write";
        Create = 5, "CREATE", "Create";
        Delete = 6, "DELETE", "Delete";
        Alter = 7, "ALTER", "Alter";
        Describe = 8, "DESCRIBE", "Describe";
        ClusterAction = 9, "CLUSTER_ACTION", "ClusterAction";
        DescribeConfigs = 10, "DESCRIBE_CONFIGS", "DescribeConfigs";
        AlterConfigs = 11, "ALTER_CONFIGS", "AlterConfigs";
        IdempotentWrite = 12, "IDEMPOTENT_WRITE", "IdempotentWrite";
        CreateTokens = 13, "CREATE_TOKENS", "CreateTokens";
        DescribeTokens = 14, "DESCRIBE_TOKENS", "DescribeTokens";
    }
);

kafka_enum!(
    /// org.apache.kafka.common.acl.AclPermissionType.
    AclPermissionType {
        Unknown = 0, "UNKNOWN", "Unknown";
        Any = 1, "ANY", "Any";
        Deny = 2, "DENY", "Deny";
        Allow = 3, "ALLOW", "Allow";
    }
);

impl PatternType {
    /// PatternType.fromString: the exact enum name (case-sensitive), UNKNOWN
    /// otherwise. Used by the extended change notification.
    pub fn from_exact_name(s: &str) -> PatternType {
        Self::VALUES
            .iter()
            .copied()
            .find(|v| v.java_name() == s)
            .unwrap_or(PatternType::Unknown)
    }

    /// PatternType.isSpecific: a concrete type ACLs can be stored under.
    pub fn is_specific(self) -> bool {
        matches!(self, PatternType::Literal | PatternType::Prefixed)
    }
}

impl AclOperation {
    /// The operations an ALLOW of this operation also grants, besides
    /// itself and ALL (AclAuthorizer.authorizeAction's `allowOps`):
    /// READ/WRITE/DELETE/ALTER imply DESCRIBE, ALTER_CONFIGS implies
    /// DESCRIBE_CONFIGS.
    pub fn implied_by(self) -> &'static [AclOperation] {
        use AclOperation::*;
        match self {
            Describe => &[Describe, Read, Write, Delete, Alter],
            DescribeConfigs => &[DescribeConfigs, AlterConfigs],
            Unknown => &[Unknown],
            Any => &[Any],
            All => &[All],
            Read => &[Read],
            Write => &[Write],
            Create => &[Create],
            Delete => &[Delete],
            Alter => &[Alter],
            ClusterAction => &[ClusterAction],
            AlterConfigs => &[AlterConfigs],
            IdempotentWrite => &[IdempotentWrite],
            CreateTokens => &[CreateTokens],
            DescribeTokens => &[DescribeTokens],
        }
    }
}

/// SecurityUtils.parseKafkaPrincipal: `type:name`, split at the first colon.
pub fn parse_principal(s: &str) -> Result<(&str, &str), String> {
    match s.split_once(':') {
        Some(parts) if !s.is_empty() => Ok(parts),
        _ => Err(format!(
            "expected a string in format principalType:principalName but got {s}"
        )),
    }
}

/// org.apache.kafka.common.resource.ResourcePattern.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourcePattern {
    pub resource_type: ResourceType,
    pub name: String,
    pub pattern_type: PatternType,
}

impl ResourcePattern {
    /// The constructor's checks: no ANY resource type, no filter pattern type.
    pub fn new(
        resource_type: ResourceType,
        name: impl Into<String>,
        pattern_type: PatternType,
    ) -> Result<ResourcePattern, String> {
        if resource_type == ResourceType::Any {
            return Err("resourceType must not be ANY".to_string());
        }
        if matches!(pattern_type, PatternType::Match | PatternType::Any) {
            return Err(format!("patternType must not be {pattern_type}"));
        }
        Ok(ResourcePattern {
            resource_type,
            name: name.into(),
            pattern_type,
        })
    }

    pub fn literal(resource_type: ResourceType, name: impl Into<String>) -> ResourcePattern {
        ResourcePattern {
            resource_type,
            name: name.into(),
            pattern_type: PatternType::Literal,
        }
    }

    pub fn prefixed(resource_type: ResourceType, name: impl Into<String>) -> ResourcePattern {
        ResourcePattern {
            resource_type,
            name: name.into(),
            pattern_type: PatternType::Prefixed,
        }
    }

    pub fn is_unknown(&self) -> bool {
        self.resource_type.is_unknown() || self.pattern_type.is_unknown()
    }
}

impl fmt::Display for ResourcePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ResourcePattern(resourceType={}, name={}, patternType={})",
            self.resource_type, self.name, self.pattern_type
        )
    }
}

/// org.apache.kafka.common.acl.AccessControlEntry. `principal` is the
/// `type:name` string as the client sent it (`User:alice`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AccessControlEntry {
    pub principal: String,
    pub host: String,
    pub operation: AclOperation,
    pub permission_type: AclPermissionType,
}

impl AccessControlEntry {
    /// The constructor's checks: neither operation nor permission may be ANY.
    pub fn new(
        principal: impl Into<String>,
        host: impl Into<String>,
        operation: AclOperation,
        permission_type: AclPermissionType,
    ) -> Result<AccessControlEntry, String> {
        if operation == AclOperation::Any {
            return Err("operation must not be ANY".to_string());
        }
        if permission_type == AclPermissionType::Any {
            return Err("permissionType must not be ANY".to_string());
        }
        Ok(AccessControlEntry {
            principal: principal.into(),
            host: host.into(),
            operation,
            permission_type,
        })
    }

    pub fn is_unknown(&self) -> bool {
        self.operation.is_unknown() || self.permission_type.is_unknown()
    }
}

impl fmt::Display for AccessControlEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "(principal={}, host={}, operation={}, permissionType={})",
            self.principal, self.host, self.operation, self.permission_type
        )
    }
}

/// org.apache.kafka.common.acl.AclBinding.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AclBinding {
    pub pattern: ResourcePattern,
    pub entry: AccessControlEntry,
}

impl AclBinding {
    pub fn new(pattern: ResourcePattern, entry: AccessControlEntry) -> AclBinding {
        AclBinding { pattern, entry }
    }

    pub fn is_unknown(&self) -> bool {
        self.pattern.is_unknown() || self.entry.is_unknown()
    }
}

impl fmt::Display for AclBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "(pattern={}, entry={})", self.pattern, self.entry)
    }
}
