use super::*;
use crate::metadata::EmbeddedStore;
use std::path::PathBuf;

fn temp_dir(tag: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("kshard-topics-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    p
}

fn ep(name: &str, host: &str, port: u16) -> Endpoint {
    Endpoint {
        listener_name: name.into(),
        security_protocol: "PLAINTEXT".into(),
        host: host.into(),
        port,
    }
}

#[test]
fn uuid_strings_match_kafka() {
    let mut one = [0u8; 16];
    one[15] = 1;
    assert_eq!(uuid_to_string(&[0u8; 16]), "AAAAAAAAAAAAAAAAAAAAAA");
    assert_eq!(uuid_to_string(&one), "AAAAAAAAAAAAAAAAAAAAAQ");
    assert_eq!(uuid_to_string(&[0xff; 16]), "_____________________w");
    assert_eq!(uuid_from_string("AAAAAAAAAAAAAAAAAAAAAQ").unwrap(), one);
    assert_eq!(uuid_from_string("AAAAAAAAAAAAAAAAAAAAAQ==").unwrap(), one);
    for _ in 0..200 {
        let id = random_uuid();
        let s = uuid_to_string(&id);
        assert_eq!(s.len(), 22);
        assert!(!s.starts_with('-'));
        assert_eq!(uuid_from_string(&s).unwrap(), id);
    }
    assert!(uuid_from_string("short").is_err());
    assert!(uuid_from_string("AAAAAAAAAAAAAAAAAAAAA+").is_err());
    assert!(uuid_from_string("AAAAAAAAAAAAAAAAAAAAAB").is_err());
}

#[test]
fn topic_names() {
    assert!(validate_topic_name("orders-v1.eu_west").is_ok());
    assert_eq!(
        validate_topic_name("").unwrap_err(),
        "Topic name is invalid: the empty string is not allowed"
    );
    assert!(validate_topic_name(".").is_err());
    assert!(validate_topic_name("..").is_err());
    assert!(validate_topic_name(&"a".repeat(249)).is_ok());
    assert!(validate_topic_name(&"a".repeat(250)).is_err());
    assert!(validate_topic_name("a b")
        .unwrap_err()
        .contains("other than ASCII alphanumerics"));
    assert!(validate_topic_name("ü").is_err());
    assert!(has_collision_chars("a.b") && has_collision_chars("a_b") && !has_collision_chars("ab"));
}

#[test]
fn json_layouts_exact() {
    let mut id = [0u8; 16];
    id[15] = 1;
    let mut a = BTreeMap::new();
    a.insert(0, vec![0]);
    a.insert(1, vec![1, 0]);
    assert_eq!(
        encode_topic(Some(&id), &a),
        r#"{"partitions":{"0":[0],"1":[1,0]},"topic_id":"AAAAAAAAAAAAAAAAAAAAAQ","adding_replicas":{},"removing_replicas":{},"version":3}"#
    );
    let st = PartitionState {
        leader: 0,
        leader_epoch: 0,
        isr: vec![0],
        controller_epoch: 1,
        leader_recovery_state: 0,
        zk_version: 0,
    };
    assert_eq!(
        encode_partition_state(&st),
        r#"{"controller_epoch":1,"leader":0,"version":1,"leader_epoch":0,"isr":[0]}"#
    );
    let rec = PartitionState {
        leader_recovery_state: 1,
        ..st.clone()
    };
    assert!(encode_partition_state(&rec).ends_with(r#""isr":[0],"leader_recovery_state":1}"#));
    let mut c = BTreeMap::new();
    c.insert("retention.ms".to_string(), "1000".to_string());
    c.insert("cleanup.policy".to_string(), "compact".to_string());
    assert_eq!(
        encode_entity_config(&c),
        r#"{"version":1,"config":{"cleanup.policy":"compact","retention.ms":"1000"}}"#
    );
    assert_eq!(
        encode_entity_config(&BTreeMap::new()),
        r#"{"version":1,"config":{}}"#
    );
    assert_eq!(
        encode_config_change("topics/t"),
        r#"{"version":2,"entity_path":"topics/t"}"#
    );
    assert_eq!(
        encode_broker(&[ep("PLAINTEXT", "localhost", 9092)], None, 1700000000000),
        r#"{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://localhost:9092"],"jmx_port":-1,"port":9092,"host":"localhost","version":5,"timestamp":"1700000000000"}"#
    );
    assert!(
        encode_broker(&[ep("PLAINTEXT", "::1", 9092)], Some("r1"), 1)
            .contains(r#""endpoints":["PLAINTEXT://[::1]:9092"]"#)
    );
    // Round trips through the decoders.
    let (rid, ra) = decode_topic("/t", encode_topic(Some(&id), &a).as_bytes()).unwrap();
    assert_eq!((rid, ra), (Some(id), a));
    assert_eq!(
        decode_partition_state("/s", encode_partition_state(&st).as_bytes(), 0).unwrap(),
        st
    );
    assert_eq!(
        decode_entity_config("/c", encode_entity_config(&c).as_bytes()).unwrap(),
        c
    );
    assert!(decode_topic("/t", b"{not json").is_err());
    assert!(decode_partition_state("/s", b"{\"leader\":0}", 0).is_err());
}

#[test]
fn topic_znode_keeps_a_reassignment() {
    let z = TopicZNode {
        topic_id: Some([1; 16]),
        partitions: BTreeMap::from([(0, vec![4, 2, 3, 1]), (1, vec![2, 3])]),
        adding_replicas: BTreeMap::from([(0, vec![4])]),
        removing_replicas: BTreeMap::from([(0, vec![1])]),
    };
    let json = encode_topic_znode(&z);
    assert_eq!(
        json,
        r#"{"partitions":{"0":[4,2,3,1],"1":[2,3]},"topic_id":"AQEBAQEBAQEBAQEBAQEBAQ","adding_replicas":{"0":[4]},"removing_replicas":{"0":[1]},"version":3}"#
    );
    assert_eq!(decode_topic_znode("/t", json.as_bytes()).unwrap(), z);
    // Version 1 (no id, no reassignment fields) still reads.
    let v1 = decode_topic_znode("/t", br#"{"version":1,"partitions":{"0":[1]}}"#).unwrap();
    assert_eq!(v1.partitions, BTreeMap::from([(0, vec![1])]));
    assert!(v1.adding_replicas.is_empty() && v1.topic_id.is_none());
}

#[test]
fn topic_lifecycle_on_embedded_store() {
    let dir = temp_dir("life");
    let mut store = EmbeddedStore::open(&dir).unwrap();
    let s: &mut dyn MetadataStore = &mut store;
    ensure_base_paths(s).unwrap();
    ensure_base_paths(s).unwrap();
    let cluster = get_or_create_cluster_id(s).unwrap();
    assert_eq!(cluster.len(), 22);
    assert_eq!(get_or_create_cluster_id(s).unwrap(), cluster);
    assert_eq!(
        s.get(CLUSTER_ID_PATH).unwrap().0,
        format!(r#"{{"version":"1","id":"{cluster}"}}"#).into_bytes()
    );
    assert_eq!(elect_controller(s, 0, 5).unwrap(), 1);

    let id = random_uuid();
    let mut a = BTreeMap::new();
    a.insert(0, vec![0]);
    a.insert(1, vec![0]);
    let mut cfg = BTreeMap::new();
    cfg.insert("retention.ms".to_string(), "1000".to_string());
    create_topic(s, "orders", id, &a, &cfg).unwrap();
    assert!(matches!(
        create_topic(s, "orders", id, &a, &cfg),
        Err(StoreError::NodeExists(_))
    ));
    assert_eq!(
        s.get("/brokers/topics/orders/partitions/1/state")
            .unwrap()
            .0,
        br#"{"controller_epoch":1,"leader":0,"version":1,"leader_epoch":0,"isr":[0]}"#.to_vec()
    );
    assert_eq!(list_topics(s).unwrap(), vec!["orders"]);
    assert_eq!(colliding_topics(s, "orders").unwrap(), Vec::<String>::new());
    create_topic(s, "a.b", random_uuid(), &a, &BTreeMap::new()).unwrap();
    assert_eq!(colliding_topics(s, "a_b").unwrap(), vec!["a.b"]);

    let rec = get_topic(s, "orders").unwrap().unwrap();
    assert_eq!(rec.topic_id, Some(id));
    assert_eq!(rec.assignment, a);
    assert_eq!(rec.configs, cfg);
    assert_eq!(rec.partition_states[&1].isr, vec![0]);
    assert!(get_topic(s, "missing").unwrap().is_none());

    let mut more = BTreeMap::new();
    more.insert(2, vec![0]);
    add_partitions(s, "orders", &more).unwrap();
    assert!(add_partitions(s, "orders", &more).is_err());
    let rec = get_topic(s, "orders").unwrap().unwrap();
    assert_eq!(rec.assignment.len(), 3);
    assert_eq!(rec.partition_states.len(), 3);

    let mut new_state = rec.partition_states[&0].clone();
    new_state.leader_epoch = 1;
    assert_eq!(
        set_partition_state(s, "orders", 0, &new_state, 0).unwrap(),
        1
    );
    assert!(set_partition_state(s, "orders", 0, &new_state, 0).is_err());

    cfg.insert("cleanup.policy".to_string(), "compact".to_string());
    crate::metadata::configs::change_entity_config(s, "topics/orders", &cfg).unwrap();
    crate::metadata::configs::change_entity_config(s, "topics/orders", &cfg).unwrap();
    assert_eq!(get_topic(s, "orders").unwrap().unwrap().configs, cfg);
    let changes = s.children(CONFIG_CHANGES_PATH).unwrap();
    assert_eq!(
        changes,
        vec!["config_change_0000000000", "config_change_0000000001"]
    );
    assert_eq!(
        s.get(&format!("{CONFIG_CHANGES_PATH}/{}", changes[0]))
            .unwrap()
            .0,
        br#"{"version":2,"entity_path":"topics/orders"}"#.to_vec()
    );

    mark_topic_for_deletion(s, "orders").unwrap();
    assert!(mark_topic_for_deletion(s, "nope").is_err());
    delete_topic(s, "orders").unwrap();
    assert!(get_topic(s, "orders").unwrap().is_none());
    assert!(s.exists("/config/topics/orders").is_none());
    assert!(s.exists("/admin/delete_topics/orders").is_none());
    assert!(matches!(
        delete_topic(s, "orders"),
        Err(StoreError::NoNode(_))
    ));

    register_broker(s, 0, &[ep("PLAINTEXT", "localhost", 9092)], None, 1).unwrap();
    assert!(matches!(
        register_broker(s, 0, &[], None, 1),
        Err(StoreError::NodeExists(_))
    ));
    assert_eq!(generate_broker_id(s, 1000).unwrap(), 1001);
    assert_eq!(generate_broker_id(s, 1000).unwrap(), 1002);
    drop(store);

    // After a restart: topics persist, the ephemeral broker and controller are gone.
    let mut store = EmbeddedStore::open(&dir).unwrap();
    let s: &mut dyn MetadataStore = &mut store;
    assert_eq!(list_topics(s).unwrap(), vec!["a.b"]);
    assert_eq!(s.children(BROKER_IDS_PATH).unwrap(), Vec::<String>::new());
    assert!(s.exists(CONTROLLER_PATH).is_none());
    assert_eq!(elect_controller(s, 0, 6).unwrap(), 2);
    assert_eq!(get_or_create_cluster_id(s).unwrap(), cluster);
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}
