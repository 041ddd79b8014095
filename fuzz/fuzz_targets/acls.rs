//! The ACL store's decoders on arbitrary bytes (`security::authorizer`'s
//! znode JSON, `ResourceZNode.decode`, and both change-notification
//! formats), with two properties: whatever decodes re-encodes to bytes
//! that decode to the same set, and the cache takes it and answers
//! authorization questions about it without panicking.
#![no_main]
use kshard::security::authorizer::zk_codec::{EXTENDED_CHANGE_PATH, LITERAL_CHANGE_PATH};
use kshard::security::authorizer::{
    decode_acls, decode_change, encode_acls, AclCache, AclOperation, ResourcePattern, ResourceType,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = decode_change(LITERAL_CHANGE_PATH, data);
    let _ = decode_change(EXTENDED_CHANGE_PATH, data);
    let Ok(acls) = decode_acls(data) else {
        return;
    };
    let again = decode_acls(&encode_acls(&acls)).expect("re-encoded ACLs decode");
    assert_eq!(again, acls);
    let mut cache = AclCache::new(["User:admin"], false);
    let name = String::from_utf8_lossy(&data[..data.len().min(8)]).into_owned();
    for pattern in [
        ResourcePattern::literal(ResourceType::Topic, name.clone()),
        ResourcePattern::prefixed(ResourceType::Topic, name.clone()),
    ] {
        if cache.update(pattern, acls.clone()).is_err() {
            return;
        }
    }
    for entry in &acls {
        for op in [AclOperation::Read, AclOperation::Describe, entry.operation] {
            let _ = cache.authorize(
                entry.principal.as_str(),
                &entry.host,
                op,
                ResourceType::Topic,
                &name,
            );
        }
        let _ = cache.authorize_by_resource_type(
            entry.principal.as_str(),
            &entry.host,
            AclOperation::Write,
            ResourceType::Topic,
        );
    }
});
