//! ACL authorization as Kafka 3.9's ZooKeeper-mode
//! `kafka.security.authorizer.AclAuthorizer`: the ACL model (`model`),
//! DescribeAcls/DeleteAcls filters (`filter`), the cache and its decisions
//! (`cache`), the ZooKeeper znode and change-notification formats
//! (`zk_codec`) and the CreateAcls/DeleteAcls/DescribeAcls logic (`apis`).
//! `acl_authorizer` is the running service the request handlers ask;
//! the rest is pure logic: the caller does the ZooKeeper I/O.

pub mod acl_authorizer;
pub mod apis;
pub mod cache;
pub mod filter;
pub mod model;
pub mod zk_codec;

pub use acl_authorizer::{AclAuthorizer, AuditLog, RequestContext};
pub use apis::{
    create_acls, delete_acls, describe_acls, AclWrite, ApiError, CreateAclsPlan, DeleteAclsPlan,
};
pub use cache::{parse_super_users, AclCache, AclSet, PrincipalRef};
pub use filter::{AccessControlEntryFilter, AclBindingFilter, ResourcePatternFilter};
pub use model::{
    AccessControlEntry, AclBinding, AclOperation, AclPermissionType, PatternType, ResourcePattern,
    ResourceType, CLUSTER_NAME,
};
pub use zk_codec::{acl_znode_path, change_notification, decode_acls, decode_change, encode_acls};

#[cfg(test)]
mod tests_apis;
#[cfg(test)]
mod tests_cache;
#[cfg(test)]
mod tests_model;
#[cfg(test)]
mod tests_zk;
