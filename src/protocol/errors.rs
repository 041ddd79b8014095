//! Kafka error codes (org.apache.kafka.common.protocol.Errors): the broker's
//! one type for them, `ErrorCode`, from the replica layer up to the
//! handlers. It becomes the protocol's INT16 only where a response is built
//! (`code()`) and is made from one only where a peer's answer is decoded
//! (`from_wire`).

use std::fmt;

/// A Kafka error code; `NONE` is success.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ErrorCode(i16);

impl ErrorCode {
    /// An error code read from the wire (a peer's or a client's answer).
    pub const fn from_wire(code: i16) -> Self {
        ErrorCode(code)
    }

    /// The protocol's INT16.
    pub const fn code(self) -> i16 {
        self.0
    }

    pub const fn is_none(self) -> bool {
        self.0 == 0
    }

    /// Kafka's name for the code (`Errors.name()`), if kshard knows it.
    pub fn name(self) -> Option<&'static str> {
        NAMES
            .iter()
            .find(|(code, _)| code.0 == self.0)
            .map(|(_, name)| *name)
    }
}

impl From<ErrorCode> for i16 {
    fn from(e: ErrorCode) -> i16 {
        e.0
    }
}

/// Compares with a decoded wire code.
impl PartialEq<i16> for ErrorCode {
    fn eq(&self, other: &i16) -> bool {
        self.0 == *other
    }
}

impl PartialEq<ErrorCode> for i16 {
    fn eq(&self, other: &ErrorCode) -> bool {
        *self == other.0
    }
}

impl fmt::Debug for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{name}({})", self.0),
            None => write!(f, "ErrorCode({})", self.0),
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

macro_rules! error_codes {
    ($($name:ident = $code:expr,)*) => {
        $(pub const $name: ErrorCode = ErrorCode($code);)*
        const NAMES: &[(ErrorCode, &str)] = &[$(($name, stringify!($name)),)*];
    };
}

error_codes! {
    NONE = 0,
    UNKNOWN_SERVER_ERROR = -1,
    OFFSET_OUT_OF_RANGE = 1,
    CORRUPT_MESSAGE = 2,
    UNKNOWN_TOPIC_OR_PARTITION = 3,
    INVALID_FETCH_SIZE = 4,
    LEADER_NOT_AVAILABLE = 5,
    NOT_LEADER_OR_FOLLOWER = 6,
    REQUEST_TIMED_OUT = 7,
    MESSAGE_TOO_LARGE = 10,
    INVALID_TOPIC_EXCEPTION = 17,
    RECORD_LIST_TOO_LARGE = 18,
    NOT_ENOUGH_REPLICAS = 19,
    INVALID_REQUIRED_ACKS = 21,
    INVALID_TIMESTAMP = 32,
    UNSUPPORTED_VERSION = 35,
    TOPIC_ALREADY_EXISTS = 36,
    INVALID_PARTITIONS = 37,
    INVALID_REPLICATION_FACTOR = 38,
    INVALID_REPLICA_ASSIGNMENT = 39,
    INVALID_CONFIG = 40,
    NOT_CONTROLLER = 41,
    INVALID_REQUEST = 42,
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43,
    POLICY_VIOLATION = 44,
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45,
    DUPLICATE_SEQUENCE_NUMBER = 46,
    INVALID_PRODUCER_EPOCH = 47,
    TOPIC_AUTHORIZATION_FAILED = 29,
    GROUP_AUTHORIZATION_FAILED = 30,
    CLUSTER_AUTHORIZATION_FAILED = 31,
    SECURITY_DISABLED = 54,
    TOPIC_DELETION_DISABLED = 73,
    KAFKA_STORAGE_ERROR = 56,
    FETCH_SESSION_ID_NOT_FOUND = 70,
    INVALID_FETCH_SESSION_EPOCH = 71,
    FENCED_LEADER_EPOCH = 74,
    UNKNOWN_LEADER_EPOCH = 75,
    OFFSET_NOT_AVAILABLE = 78,
    FETCH_SESSION_TOPIC_ID_ERROR = 106,
    UNKNOWN_TOPIC_ID = 100,
    INVALID_RECORD = 87,
    UNKNOWN_PRODUCER_ID = 59,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53,
    INCONSISTENT_TOPIC_ID = 103,
    RESOURCE_NOT_FOUND = 91,
    DUPLICATE_RESOURCE = 92,
    THROTTLING_QUOTA_EXCEEDED = 89,
    OFFSET_METADATA_TOO_LARGE = 12,
    COORDINATOR_LOAD_IN_PROGRESS = 14,
    COORDINATOR_NOT_AVAILABLE = 15,
    NOT_COORDINATOR = 16,
    ILLEGAL_GENERATION = 22,
    INCONSISTENT_GROUP_PROTOCOL = 23,
    INVALID_GROUP_ID = 24,
    UNKNOWN_MEMBER_ID = 25,
    INVALID_SESSION_TIMEOUT = 26,
    REBALANCE_IN_PROGRESS = 27,
    INVALID_COMMIT_OFFSET_SIZE = 28,
    NON_EMPTY_GROUP = 68,
    GROUP_ID_NOT_FOUND = 69,
    MEMBER_ID_REQUIRED = 79,
    GROUP_MAX_SIZE_REACHED = 81,
    FENCED_INSTANCE_ID = 82,
    GROUP_SUBSCRIBED_TO_TOPIC = 86,
    STALE_CONTROLLER_EPOCH = 11,
    REPLICA_NOT_AVAILABLE = 9,
    LOG_DIR_NOT_FOUND = 57,
    PREFERRED_LEADER_NOT_AVAILABLE = 80,
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83,
    ELECTION_NOT_NEEDED = 84,
    NO_REASSIGNMENT_IN_PROGRESS = 85,
    STALE_BROKER_EPOCH = 77,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20,
    INVALID_UPDATE_VERSION = 95,
    INELIGIBLE_REPLICA = 107,
    MISMATCHED_ENDPOINT_TYPE = 114,
    UNSUPPORTED_ENDPOINT_TYPE = 115,
    INVALID_TXN_STATE = 48,
    INVALID_PRODUCER_ID_MAPPING = 49,
    INVALID_TRANSACTION_TIMEOUT = 50,
    CONCURRENT_TRANSACTIONS = 51,
    TRANSACTION_COORDINATOR_FENCED = 52,
    PRODUCER_FENCED = 90,
    TRANSACTIONAL_ID_NOT_FOUND = 105,
    TRANSACTION_ABORTABLE = 120,
    OPERATION_NOT_ATTEMPTED = 55,
    UNSTABLE_OFFSET_COMMIT = 88,
    UNSUPPORTED_SASL_MECHANISM = 33,
    ILLEGAL_SASL_STATE = 34,
    SASL_AUTHENTICATION_FAILED = 58,
    UNACCEPTABLE_CREDENTIAL = 93,
}
