//! Expected values come from Apache Kafka's own tests (AdminRackAwareTest,
//! AddPartitionsTest) and from running Kafka 3.9.1's `AdminUtils`,
//! `AdminZkClient` and `ZkAdminManager` code on the same inputs.

use super::*;

fn no_rack(ids: &[i32]) -> Vec<BrokerMetadata> {
    ids.iter()
        .map(|&id| BrokerMetadata::new(id, None))
        .collect()
}

fn racked(pairs: &[(i32, &str)]) -> Vec<BrokerMetadata> {
    pairs
        .iter()
        .map(|&(id, rack)| BrokerMetadata::new(id, Some(rack)))
        .collect()
}

fn rack_map(pairs: &[(i32, &str)]) -> BTreeMap<i32, String> {
    pairs.iter().map(|&(id, r)| (id, r.to_owned())).collect()
}

fn expect(pairs: &[(i32, &[i32])]) -> BTreeMap<i32, Vec<i32>> {
    pairs.iter().map(|&(p, r)| (p, r.to_vec())).collect()
}

fn no_random() -> impl FnMut(usize) -> usize {
    |_| panic!("a fixed start index must not draw random numbers")
}

fn fixed(
    brokers: &[BrokerMetadata],
    n: i32,
    rf: i16,
    start_index: usize,
    start_partition: Option<i32>,
) -> Result<BTreeMap<i32, Vec<i32>>, AssignmentError> {
    assign_replicas_to_brokers(
        brokers,
        n,
        rf,
        Some(start_index),
        start_partition,
        &mut no_random(),
    )
}

/// `java.util.Random`, to replay Kafka's `AdminUtils.RAND` for a seed.
struct JavaRandom(u64);

impl JavaRandom {
    const MULTIPLIER: u64 = 0x5_DEEC_E66D;
    const MASK: u64 = (1 << 48) - 1;

    fn new(seed: i64) -> Self {
        JavaRandom((seed as u64 ^ Self::MULTIPLIER) & Self::MASK)
    }

    fn next(&mut self, bits: u32) -> i32 {
        self.0 = self.0.wrapping_mul(Self::MULTIPLIER).wrapping_add(0xB) & Self::MASK;
        (self.0 >> (48 - bits)) as i32
    }

    fn next_int(&mut self, bound: i32) -> i32 {
        let mut r = self.next(31);
        let m = bound - 1;
        if bound & m == 0 {
            return ((i64::from(bound) * i64::from(r)) >> 31) as i32;
        }
        let mut u = r;
        loop {
            r = u % bound;
            if u.wrapping_sub(r).wrapping_add(m) >= 0 {
                return r;
            }
            u = self.next(31);
        }
    }
}

fn seeded(
    seed: i64,
    brokers: &[BrokerMetadata],
    n: i32,
    rf: i16,
    start_partition: Option<i32>,
) -> BTreeMap<i32, Vec<i32>> {
    let mut rng = JavaRandom::new(seed);
    let mut random = |n: usize| rng.next_int(n as i32) as usize;
    assign_replicas_to_brokers(brokers, n, rf, None, start_partition, &mut random).unwrap()
}

/// Small xorshift source for property checks over many random starts.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

const SIX_BROKERS_3_RACKS: &[(i32, &str)] = &[
    (0, "rack1"),
    (1, "rack2"),
    (2, "rack2"),
    (3, "rack3"),
    (4, "rack3"),
    (5, "rack1"),
];

#[test]
fn kafka_test_replica_assignment_no_rack_fixed_start_0() {
    // AdminRackAwareTest.testReplicaAssignment
    let brokers = no_rack(&[0, 1, 2, 3, 4]);
    let expected = expect(&[
        (0, &[0, 1, 2]),
        (1, &[1, 2, 3]),
        (2, &[2, 3, 4]),
        (3, &[3, 4, 0]),
        (4, &[4, 0, 1]),
        (5, &[0, 2, 3]),
        (6, &[1, 3, 4]),
        (7, &[2, 4, 0]),
        (8, &[3, 0, 1]),
        (9, &[4, 1, 2]),
    ]);
    assert_eq!(fixed(&brokers, 10, 3, 0, None).unwrap(), expected);
    for rf in [0, 6] {
        let err = fixed(&brokers, 10, rf, 0, None).unwrap_err();
        assert!(matches!(err, AssignmentError::InvalidReplicationFactor(_)));
    }
}

#[test]
fn kafka_test_rack_alternated_list_and_assignment() {
    // AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers
    let pairs = [
        (0, "rack1"),
        (1, "rack3"),
        (2, "rack3"),
        (3, "rack2"),
        (4, "rack2"),
        (5, "rack1"),
    ];
    let mut map = rack_map(&pairs);
    assert_eq!(rack_alternated_broker_list(&map), vec![0, 3, 1, 5, 4, 2]);
    let expected = expect(&[
        (0, &[0, 3, 1]),
        (1, &[3, 1, 5]),
        (2, &[1, 5, 4]),
        (3, &[5, 4, 2]),
        (4, &[4, 2, 0]),
        (5, &[2, 0, 3]),
        (6, &[0, 4, 2]),
    ]);
    assert_eq!(fixed(&racked(&pairs), 7, 3, 0, Some(0)).unwrap(), expected);
    map.remove(&5);
    assert_eq!(rack_alternated_broker_list(&map), vec![0, 3, 1, 4, 2]);
}

#[test]
fn rack_alternated_list_javadoc_and_java_string_order() {
    let nine = rack_map(&[
        (0, "rack1"),
        (1, "rack1"),
        (2, "rack1"),
        (3, "rack2"),
        (4, "rack2"),
        (5, "rack2"),
        (6, "rack3"),
        (7, "rack3"),
        (8, "rack3"),
    ]);
    assert_eq!(
        rack_alternated_broker_list(&nine),
        vec![0, 3, 6, 1, 4, 7, 2, 5, 8]
    );
    // Java sorts by UTF-16 units: U+1F600 (a surrogate pair) sorts before U+FF5E.
    let unicode = rack_map(&[
        (0, "\u{1F600}"),
        (1, "\u{FF5E}"),
        (2, "a"),
        (3, "\u{1F600}"),
    ]);
    assert_eq!(rack_alternated_broker_list(&unicode), vec![2, 0, 1, 3]);
    assert!(rack_alternated_broker_list(&BTreeMap::new()).is_empty());
}

#[test]
fn kafka_rack_aware_fixed_start_placements() {
    let brokers = racked(SIX_BROKERS_3_RACKS);
    // AdminRackAwareTest.testAssignmentWithRackAware (fixed start 2).
    let expected = expect(&[
        (0, &[3, 2, 0]),
        (1, &[5, 4, 1]),
        (2, &[2, 0, 3]),
        (3, &[4, 1, 5]),
        (4, &[0, 3, 2]),
        (5, &[1, 5, 4]),
    ]);
    let got = fixed(&brokers, 6, 3, 2, Some(0)).unwrap();
    assert_eq!(got, expected);
    check_distribution(&got, SIX_BROKERS_3_RACKS, 6, 3, true, true);
    // testAssignmentWithRackAwareWithUnevenReplicas (13 partitions, start 0).
    let expected = expect(&[
        (0, &[0, 1, 3]),
        (1, &[1, 3, 5]),
        (2, &[3, 5, 2]),
        (3, &[5, 2, 4]),
        (4, &[2, 4, 0]),
        (5, &[4, 0, 1]),
        (6, &[0, 2, 4]),
        (7, &[1, 4, 0]),
        (8, &[3, 0, 1]),
        (9, &[5, 1, 3]),
        (10, &[2, 3, 5]),
        (11, &[4, 5, 2]),
        (12, &[0, 3, 2]),
    ]);
    let got = fixed(&brokers, 13, 3, 0, Some(0)).unwrap();
    assert_eq!(got, expected);
    check_distribution(&got, SIX_BROKERS_3_RACKS, 13, 3, false, false);
}

#[test]
fn kafka_test_skip_broker_with_replica_already_assigned() {
    // AdminRackAwareTest.testSkipBrokerWithReplicaAlreadyAssigned
    let pairs = [(0, "a"), (1, "b"), (2, "c"), (3, "a"), (4, "a")];
    let got = fixed(&racked(&pairs), 6, 4, 2, None).unwrap();
    let expected = expect(&[
        (0, &[2, 0, 1, 3]),
        (1, &[3, 1, 2, 4]),
        (2, &[4, 2, 1, 3]),
        (3, &[0, 1, 2, 3]),
        (4, &[1, 4, 2, 3]),
        (5, &[2, 4, 1, 3]),
    ]);
    assert_eq!(got, expected);
}

#[test]
fn kafka_rack_aware_expansion_from_partition_12() {
    // testRackAwareExpansion's brokers and startPartitionId, fixed start 0.
    let pairs = [
        (6, "rack1"),
        (7, "rack2"),
        (8, "rack2"),
        (9, "rack3"),
        (10, "rack3"),
        (11, "rack1"),
    ];
    let got = fixed(&racked(&pairs), 12, 2, 0, Some(12)).unwrap();
    let expected = expect(&[
        (12, &[6, 8]),
        (13, &[7, 10]),
        (14, &[9, 6]),
        (15, &[11, 7]),
        (16, &[8, 9]),
        (17, &[10, 11]),
        (18, &[6, 9]),
        (19, &[7, 11]),
        (20, &[9, 8]),
        (21, &[11, 10]),
        (22, &[8, 6]),
        (23, &[10, 7]),
    ]);
    assert_eq!(got, expected);
    check_distribution(&got, &pairs, 12, 2, true, true);
}

#[test]
fn rack_unaware_start_partition_shifts_followers() {
    let got = fixed(&no_rack(&[0, 1, 2, 3]), 6, 3, 1, Some(4)).unwrap();
    let expected = expect(&[
        (4, &[1, 0, 2]),
        (5, &[2, 1, 3]),
        (6, &[3, 2, 0]),
        (7, &[0, 3, 1]),
        (8, &[1, 2, 3]),
        (9, &[2, 3, 0]),
    ]);
    assert_eq!(got, expected);
}

#[test]
fn random_start_matches_kafka_rand_draw_order() {
    // Kafka 3.9.1 output after `AdminUtils.RAND.setSeed(seed)`.
    let five = no_rack(&[0, 1, 2, 3, 4]);
    let expected = expect(&[
        (0, &[0, 4, 1]),
        (1, &[1, 0, 2]),
        (2, &[2, 1, 3]),
        (3, &[3, 2, 4]),
        (4, &[4, 3, 0]),
        (5, &[0, 1, 2]),
        (6, &[1, 2, 3]),
        (7, &[2, 3, 4]),
        (8, &[3, 4, 0]),
        (9, &[4, 0, 1]),
    ]);
    assert_eq!(seeded(42, &five, 10, 3, None), expected);
    let expected = expect(&[
        (0, &[2, 0, 3]),
        (1, &[4, 1, 5]),
        (2, &[0, 3, 2]),
        (3, &[1, 5, 4]),
        (4, &[3, 2, 0]),
        (5, &[5, 4, 1]),
        (6, &[2, 5, 4]),
        (7, &[4, 2, 0]),
    ]);
    assert_eq!(
        seeded(7, &racked(SIX_BROKERS_3_RACKS), 8, 3, None),
        expected
    );
    // Kafka does not sort the brokers it is given.
    let unsorted = no_rack(&[5, 3, 9, 1]);
    let expected = expect(&[
        (3, &[3, 9]),
        (4, &[9, 5]),
        (5, &[1, 3]),
        (6, &[5, 9]),
        (7, &[3, 1]),
        (8, &[9, 3]),
    ]);
    assert_eq!(seeded(123_456_789, &unsorted, 6, 2, Some(3)), expected);
    let expected = expect(&[(0, &[0, 1]), (1, &[1, 2]), (2, &[2, 1]), (3, &[0, 1])]);
    let three = racked(&[(0, "x"), (1, "y"), (2, "x")]);
    assert_eq!(seeded(-5, &three, 4, 2, None), expected);
}

#[test]
fn random_draws_start_index_then_shift() {
    let draws = std::cell::RefCell::new(vec![1usize, 3]);
    let mut random = |n: usize| {
        assert_eq!(n, 5);
        draws.borrow_mut().pop().unwrap()
    };
    let got = assign_replicas_to_brokers(&no_rack(&[0, 1, 2, 3, 4]), 1, 3, None, None, &mut random)
        .unwrap();
    // start index 3, follower shift 1
    assert_eq!(got, expect(&[(0, &[3, 0, 1])]));
    assert!(draws.borrow().is_empty());
}

#[test]
fn errors_and_kafka_codes() {
    let five = no_rack(&[0, 1, 2, 3, 4]);
    let err = fixed(&five, 0, 1, 0, None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Number of partitions must be larger than 0."
    );
    assert_eq!(err.kafka_error_code(), 37);
    let err = fixed(&five, 1, 0, 0, None).unwrap_err();
    assert_eq!(err.to_string(), "Replication factor must be larger than 0.");
    assert_eq!(err.kafka_error_code(), 38);
    let err = fixed(&five, 1, 6, 0, None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Replication factor: 6 larger than available brokers: 5."
    );
    assert_eq!(err.kafka_error_message(), Some(err.message()));
    let partial = vec![
        BrokerMetadata::new(0, Some("a")),
        BrokerMetadata::new(1, None),
    ];
    let err = fixed(&partial, 2, 1, 0, None).unwrap_err();
    assert_eq!(
        err,
        AssignmentError::AdminOperation(
            "Not all brokers have rack information for replica rack aware assignment.".into()
        )
    );
    // Not an ApiException: ZK-mode CreateTopics answers UNKNOWN_SERVER_ERROR, no message.
    assert_eq!(err.kafka_error_code(), -1);
    assert_eq!(err.kafka_error_message(), None);
    let err = fixed(&[], 1, 1, 0, None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Replication factor: 1 larger than available brokers: 0."
    );
}

#[test]
fn java_runtime_failures_become_internal_errors() {
    // Kafka throws ArithmeticException / IndexOutOfBoundsException here.
    let dup = racked(&[(0, "a"), (0, "a")]);
    assert_eq!(
        fixed(&dup, 1, 2, 0, None),
        Err(AssignmentError::Internal("/ by zero".into()))
    );
    let three = no_rack(&[0, 1, 2]);
    let err = fixed(&three, 3, 2, 5, Some(i32::MAX - 1)).unwrap_err();
    assert_eq!(err.kafka_error_code(), -1);
    assert_eq!(err.kafka_error_message(), None);
    assert!(fixed(&three, 3, 2, i32::MAX as usize, Some(0)).is_err());
    assert!(fixed(&three, 3, 2, i32::MAX as usize + 1, Some(0)).is_err());
    let racks = racked(&[(0, "a"), (1, "b"), (2, "c")]);
    assert!(fixed(&racks, 3, 2, i32::MAX as usize, Some(0)).is_err());
    // ...but Kafka succeeds right up to the last partition id.
    let got = fixed(&three, 2, 2, 0, Some(i32::MAX - 1)).unwrap();
    assert_eq!(got, expect(&[(i32::MAX - 1, &[0, 2]), (i32::MAX, &[1, 0])]));
}

#[test]
fn duplicate_broker_ids_follow_kafka() {
    assert_eq!(
        fixed(&no_rack(&[0, 0]), 2, 2, 0, None).unwrap(),
        expect(&[(0, &[0, 0]), (1, &[0, 0])])
    );
    // The rack map keeps the last rack for a repeated id.
    let dup = racked(&[(0, "a"), (0, "b"), (1, "a")]);
    assert_eq!(
        fixed(&dup, 2, 3, 0, None).unwrap(),
        expect(&[(0, &[1, 0, 0]), (1, &[0, 1, 1])])
    );
}

/// RackAwareTest.checkReplicaDistribution.
fn check_distribution(
    assignment: &BTreeMap<i32, Vec<i32>>,
    racks: &[(i32, &str)],
    n_partitions: usize,
    rf: usize,
    verify_leaders: bool,
    verify_replicas: bool,
) {
    let rack_of: BTreeMap<i32, &str> = racks.iter().copied().collect();
    let n_racks = rack_of.values().collect::<BTreeSet<_>>().len();
    let n_brokers = rack_of.len();
    assert_eq!(assignment.len(), n_partitions);
    let mut leaders: BTreeMap<i32, usize> = rack_of.keys().map(|&b| (b, 0)).collect();
    let mut replicas: BTreeMap<i32, usize> = leaders.clone();
    for list in assignment.values() {
        assert_eq!(list.len(), rf);
        assert_eq!(list.iter().collect::<BTreeSet<_>>().len(), rf, "{list:?}");
        let used: BTreeSet<&str> = list.iter().map(|b| rack_of[b]).collect();
        assert_eq!(used.len(), rf.min(n_racks), "{list:?}");
        *leaders.get_mut(&list[0]).unwrap() += 1;
        for b in list {
            *replicas.get_mut(b).unwrap() += 1;
        }
    }
    if verify_leaders {
        assert!(
            leaders.values().all(|&c| c == n_partitions / n_brokers),
            "{leaders:?}"
        );
    }
    if verify_replicas {
        let per = n_partitions * rf / n_brokers;
        assert!(replicas.values().all(|&c| c == per), "{replicas:?}");
    }
}

/// (racks, partitions, rf, start partition, verify leaders, verify replicas)
type RandomCase<'a> = (&'a [(i32, &'a str)], usize, i16, Option<i32>, bool, bool);

#[test]
fn kafka_rack_aware_properties_over_random_starts() {
    let uneven = [
        (0, "rack1"),
        (1, "rack1"),
        (2, "rack2"),
        (3, "rack3"),
        (4, "rack3"),
        (5, "rack1"),
    ];
    let twelve = [
        (0, "rack1"),
        (1, "rack2"),
        (2, "rack2"),
        (3, "rack3"),
        (4, "rack3"),
        (5, "rack1"),
        (6, "rack1"),
        (7, "rack2"),
        (8, "rack2"),
        (9, "rack3"),
        (10, "rack1"),
        (11, "rack3"),
    ];
    let expansion = [
        (6, "rack1"),
        (7, "rack2"),
        (8, "rack2"),
        (9, "rack3"),
        (10, "rack3"),
        (11, "rack1"),
    ];
    let three: &[(i32, &str)] = &[(0, "rack1"), (1, "rack2"), (4, "rack3")];
    // One row per randomized AdminRackAwareTest case.
    let cases: &[RandomCase] = &[
        (SIX_BROKERS_3_RACKS, 6, 3, None, true, true),
        (&uneven, 12, 3, None, true, false),
        (SIX_BROKERS_3_RACKS, 12, 2, None, true, true),
        (&expansion, 12, 2, Some(12), true, true),
        (SIX_BROKERS_3_RACKS, 6, 2, None, true, true),
        (three, 3, 2, None, true, true),
        (&twelve, 96, 3, None, true, true),
    ];
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    for _ in 0..200 {
        for &(racks, n, rf, start, leaders, replicas) in cases {
            let mut random = |k: usize| (rng.next() % k as u64) as usize;
            let got =
                assign_replicas_to_brokers(&racked(racks), n as i32, rf, None, start, &mut random)
                    .unwrap();
            check_distribution(&got, racks, n, rf as usize, leaders, replicas);
        }
    }
}

#[test]
fn kafka_more_less_single_rack_properties() {
    let racks = [
        (0, "rack1"),
        (1, "rack2"),
        (2, "rack2"),
        (3, "rack3"),
        (4, "rack3"),
        (5, "rack2"),
    ];
    let single: Vec<(i32, &str)> = (0..6).map(|b| (b, "rack1")).collect();
    let mut rng = XorShift(42);
    for _ in 0..200 {
        let mut random = |k: usize| (rng.next() % k as u64) as usize;
        // testMoreReplicasThanRacks / testLessReplicasThanRacks / testSingleRack
        let more =
            assign_replicas_to_brokers(&racked(&racks), 6, 5, None, None, &mut random).unwrap();
        check_distribution(&more, &racks, 6, 5, false, false);
        let less =
            assign_replicas_to_brokers(&racked(&racks), 6, 2, None, None, &mut random).unwrap();
        check_distribution(&less, &racks, 6, 2, false, false);
        let one =
            assign_replicas_to_brokers(&racked(&single), 6, 3, None, None, &mut random).unwrap();
        check_distribution(&one, &single, 6, 3, true, false);
    }
}

#[test]
fn rack_unaware_properties_over_random_starts() {
    let mut rng = XorShift(7);
    for n_brokers in 1..=9usize {
        let ids: Vec<i32> = (0..n_brokers as i32).map(|i| i * 3 + 1).collect();
        let brokers = no_rack(&ids);
        let pairs: Vec<(i32, &str)> = ids.iter().map(|&i| (i, "none")).collect();
        for rf in 1..=n_brokers {
            for _ in 0..20 {
                let k = (rng.next() % 4 + 1) as usize;
                let mut random = |m: usize| (rng.next() % m as u64) as usize;
                let n = (k * n_brokers) as i32;
                let got =
                    assign_replicas_to_brokers(&brokers, n, rf as i16, None, None, &mut random)
                        .unwrap();
                // One "rack" for all, so the rack spread check is min(rf, 1).
                check_distribution(&got, &pairs, n as usize, rf, true, true);
            }
        }
    }
}

#[test]
fn manual_assignment_checks_match_validate_topic_create() {
    let ok = validate_manual_assignment(&[(1, vec![2, 3]), (0, vec![1, 2])]).unwrap();
    assert_eq!(ok, expect(&[(0, &[1, 2]), (1, &[2, 3])]));
    let err = validate_manual_assignment(&[(0, vec![1, 2]), (1, vec![2, 2]), (2, vec![3, 1])])
        .unwrap_err();
    assert_eq!(err.kafka_error_code(), 39);
    assert_eq!(
        err.to_string(),
        "Duplicate replica assignment found: HashMap(0 -> ArrayBuffer(1, 2), \
         1 -> ArrayBuffer(2, 2), 2 -> ArrayBuffer(3, 1))"
    );
    // A later entry for a partition replaces the earlier one.
    let err = validate_manual_assignment(&[(0, vec![1]), (0, vec![2, 2])]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Duplicate replica assignment found: HashMap(0 -> ArrayBuffer(2, 2))"
    );
    let err = validate_manual_assignment(&[(0, vec![1, 2]), (1, vec![2])]).unwrap_err();
    assert_eq!(
        err,
        AssignmentError::InvalidReplicaAssignment(
            "All partitions should have the same number of replicas".into()
        )
    );
    let err = validate_manual_assignment(&[(0, vec![1, 2]), (2, vec![2, 3])]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "partitions should be a consecutive 0-based integer sequence"
    );
    // Kafka only sums the non-negative ids, and accepts unknown brokers and RF 0.
    assert!(validate_manual_assignment(&[(-1, vec![1]), (0, vec![1]), (3, vec![1])]).is_ok());
    assert!(validate_manual_assignment(&[(0, vec![]), (1, vec![])]).is_ok());
    assert!(validate_manual_assignment(&[(0, vec![999_999])]).is_ok());
}

#[test]
fn duplicate_message_uses_scala_hash_map_order_after_growth() {
    let mut input: Vec<(i32, Vec<i32>)> = (1..=12).rev().map(|p| (p, vec![1, 2])).collect();
    input.extend([
        (0, vec![1, 1]),
        (16, vec![3, 3]),
        (-1, vec![7, 7]),
        (100, vec![8, 9]),
    ]);
    let err = validate_manual_assignment(&input).unwrap_err();
    let order = [-1, 0, 1, 2, 3, 4, 100, 5, 6, 7, 8, 9, 10, 11, 12, 16];
    let body: Vec<String> = order
        .iter()
        .map(|&p| {
            let r = &input.iter().find(|(q, _)| *q == p).unwrap().1;
            format!("{p} -> ArrayBuffer({}, {})", r[0], r[1])
        })
        .collect();
    let expected = format!(
        "Duplicate replica assignment found: HashMap({})",
        body.join(", ")
    );
    assert_eq!(err.to_string(), expected);
}

#[test]
fn kafka_add_partitions_placement() {
    let four = zk_broker_metadatas(&no_rack(&[3, 1, 2, 0])).unwrap();
    // AddPartitionsTest.testReplicaPlacementAllServers
    let got = assign_new_partitions(&four, &[2, 3, 0, 1], 1, 7, None).unwrap();
    let expected = expect(&[
        (1, &[3, 2, 0, 1]),
        (2, &[0, 3, 1, 2]),
        (3, &[1, 0, 2, 3]),
        (4, &[2, 3, 0, 1]),
        (5, &[3, 0, 1, 2]),
        (6, &[0, 1, 2, 3]),
    ]);
    assert_eq!(got, expected);
    // AddPartitionsTest.testReplicaPlacementPartialServers
    let got = assign_new_partitions(&four, &[1, 2], 1, 3, None).unwrap();
    assert_eq!(got, expect(&[(1, &[2, 0]), (2, &[3, 1])]));
    let got = assign_new_partitions(&four, &[0, 1, 2], 1, 3, None).unwrap();
    assert_eq!(got, expect(&[(1, &[1, 2, 3]), (2, &[2, 3, 0])]));
    // No broker id >= 5: Kafka falls back to index 0.
    let sparse = zk_broker_metadatas(&no_rack(&[4, 2, 9])).unwrap();
    let got = assign_new_partitions(&sparse, &[5, 2], 1, 4, None).unwrap();
    assert_eq!(got, expect(&[(1, &[2, 4]), (2, &[4, 9]), (3, &[9, 4])]));
    let racks =
        zk_broker_metadatas(&racked(&[(1, "r1"), (2, "r2"), (3, "r1"), (4, "r2")])).unwrap();
    let got = assign_new_partitions(&racks, &[3, 4], 2, 5, None).unwrap();
    assert_eq!(got, expect(&[(2, &[1, 4]), (3, &[2, 1]), (4, &[3, 4])]));
    let manual = [vec![0, 1], vec![2, 3]];
    let got = assign_new_partitions(&four, &[1, 2], 1, 3, Some(&manual)).unwrap();
    assert_eq!(got, expect(&[(1, &[0, 1]), (2, &[2, 3])]));
}

#[test]
fn add_partitions_errors_match_zk_admin_manager() {
    let four = zk_broker_metadatas(&no_rack(&[0, 1, 2, 3])).unwrap();
    let err = |p0: &[i32], existing: i32, count: i32, manual: Option<&[Vec<i32>]>| {
        assign_new_partitions(&four, p0, existing, count, manual).unwrap_err()
    };
    let e = err(&[0, 1], 3, 2, None);
    assert_eq!(
        e.to_string(),
        "Topic currently has 3 partitions, which is higher than the requested 2."
    );
    assert_eq!(e.kafka_error_code(), 37);
    assert_eq!(
        err(&[0, 1], 3, 3, None).to_string(),
        "Topic already has 3 partitions."
    );
    // AddPartitionsTest.testWrongReplicaCount, through the request path.
    assert_eq!(
        err(&[0, 1], 1, 2, Some(&[vec![0, 1, 2]])).to_string(),
        "Inconsistent replication factor between partitions, partition 0 has 2 while \
         partitions [1] have replication factors [3], respectively."
    );
    assert_eq!(
        err(&[0, 1], 1, 4, Some(&[vec![0], vec![1], vec![2, 3]])).to_string(),
        "Inconsistent replication factor between partitions, partition 0 has 2 while \
         partitions [1, 2] have replication factors [1, 1], respectively."
    );
    // Up to 4 distinct brokers keep insertion order; more use Scala's CHAMP order.
    assert_eq!(
        err(&[0, 1], 1, 3, Some(&[vec![0, 1], vec![9, 8]])).to_string(),
        "Unknown broker(s) in replica assignment: 9, 8."
    );
    let many = [vec![0, 1], vec![9, 8], vec![7, 6], vec![5, 4], vec![3, 2]];
    let e = err(&[0, 1], 1, 3, Some(&many));
    assert_eq!(
        e.to_string(),
        "Unknown broker(s) in replica assignment: 5, 6, 9, 7, 8, 4."
    );
    assert_eq!(e.kafka_error_code(), 39);
    assert_eq!(
        err(&[0, 1], 2, 4, Some(&vec![vec![0, 1]; 3])).to_string(),
        "Increasing the number of partitions by 2 but 3 assignments provided."
    );
    assert_eq!(
        err(&[0, 1], 2, 5, Some(&[vec![0, 1], vec![], vec![1, 1]])).to_string(),
        "Cannot have replication factor of 0 for partition id 3."
    );
    assert_eq!(
        err(&[0, 1], 2, 4, Some(&[vec![2, 2], vec![1, 1]])).to_string(),
        "Duplicate brokers not allowed in replica assignment: 2, 2 for partition id 2."
    );
    // Six new partitions: Kafka's immutable HashMap visits partition 6 before 7.
    let six = [
        vec![0, 1],
        vec![0, 1],
        vec![0, 1],
        vec![0, 1],
        vec![1, 1],
        vec![2, 2],
    ];
    assert_eq!(
        err(&[0, 1], 2, 8, Some(&six)).to_string(),
        "Duplicate brokers not allowed in replica assignment: 1, 1 for partition id 6."
    );
    // Scala's `head` on partition 0's empty replica list.
    assert_eq!(err(&[], 1, 3, None).kafka_error_code(), -1);
    // Partition 0 has more replicas than there are brokers now.
    let e = err(&[0, 1, 2, 3, 4], 1, 2, None);
    assert_eq!(
        e,
        AssignmentError::InvalidReplicationFactor(
            "Replication factor: 5 larger than available brokers: 4.".into()
        )
    );
    assert_eq!(e.kafka_error_code(), 38);
}

#[test]
fn zk_broker_metadatas_sorts_and_enforces_racks() {
    let sorted = zk_broker_metadatas(&no_rack(&[3, 1, 2])).unwrap();
    assert_eq!(
        sorted.iter().map(|b| b.id).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    let err = zk_broker_metadatas(&[
        BrokerMetadata::new(0, Some("a")),
        BrokerMetadata::new(1, None),
    ])
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Not all brokers have rack information. Add --disable-rack-aware in command line \
         to make replica assignment without rack information."
    );
    assert_eq!(err.kafka_error_code(), -1);
}

#[test]
fn zk_alive_brokers_follow_scala_long_map_order() {
    assert_eq!(
        zk_alive_brokers_order(0, &[0, 1, 2, 3, 4, 5]),
        vec![0, 5, 1, 4, 2, 3]
    );
    assert_eq!(zk_alive_brokers_order(0, &[1, 2, 3]), vec![2, 3, 1]);
    assert_eq!(zk_alive_brokers_order(3, &[3, 1, 2]), vec![2, 3, 1]);
    assert_eq!(
        zk_alive_brokers_order(0, &[1001, 1002, 1003]),
        vec![1001, 1003, 1002]
    );
    assert_eq!(
        zk_alive_brokers_order(2, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]),
        vec![5, 10, 8, 2, 9, 1, 4, 6, 7, 3]
    );
    assert_eq!(
        zk_alive_brokers_order(0, &[-1, 1, 0, -2]),
        vec![0, -1, 1, -2]
    );
    assert_eq!(zk_alive_brokers_order(0, &[2, 2]), vec![2]);
    assert!(zk_alive_brokers_order(0, &[]).is_empty());
}

#[test]
fn scala_champ_order_matches_hash_set() {
    assert_eq!(
        champ_order(&[1, 2, 3, 4, 5, 6, 7]),
        vec![5, 1, 6, 2, 7, 3, 4]
    );
    assert_eq!(
        scala_immutable_order(&[4, 3, 2, 1], |_| true),
        vec![4, 3, 2, 1]
    );
    assert_eq!(
        scala_immutable_order(&[9, 3, 2, 1, 7], |k| ![2, 3, 7].contains(&k)),
        vec![1, 9]
    );
}
