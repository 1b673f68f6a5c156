//! The bench tool's bounds and defaults, and the small value types of its flags: what the
//! command line (`cli`) declares and the resolved parameters (`args`) check against.

use clap::ValueEnum;

/// Longest run; every kind stops by then.
pub const DURATION_MAX_S: u64 = 600;
/// Default run length (RocketMQ's benchmark runs forever; ours is bounded).
pub const DURATION_DEFAULT_S: u64 = 10;
/// Most connections per broker.
pub const CONNECTIONS_MAX: usize = 1024;
/// Most producer threads.
pub const THREADS_MAX: usize = 1024;
/// RocketMQ benchmark producer default (`-w`).
pub const THREADS_DEFAULT: usize = 64;
/// Largest body: the broker's `maxMessageSize` (4 MiB).
pub const BODY_SIZE_MAX_BYTES: usize = 4 * 1024 * 1024;
/// RocketMQ benchmark default (`-s`).
pub const BODY_SIZE_DEFAULT_BYTES: usize = 128;
/// User properties must fit in the record's 16-bit properties length with room for system keys.
pub const PROPERTY_SIZE_MAX_BYTES: usize = 16 * 1024;
/// Most distinct tags (`-l`).
pub const TAG_COUNT_MAX: u32 = 1_000_000;
/// Most topics (`--topics`).
pub const TOPICS_MAX: u32 = 4096;
/// Queues a topic may ask for when auto-created (RocketMQ's queue ids are small ints).
pub const QUEUES_PER_TOPIC_MAX: i32 = 1024;
/// Java client `defaultTopicQueueNums`.
pub const QUEUES_PER_TOPIC_DEFAULT: i32 = 4;
/// Most messages one run sends (`-q`): 10^10 is hours at any rate this machine can reach.
pub const COUNT_MAX: u64 = 10_000_000_000;
/// Highest target rate in msg/s.
pub const RATE_MAX: u64 = 10_000_000;
/// Most async sends in flight per connection (Java 5.x `backPressureForAsyncSendNum` is 1024).
pub const INFLIGHT_MAX: usize = 65_536;
pub const INFLIGHT_DEFAULT: usize = 1024;
/// Java client `sendMsgTimeout`.
pub const SEND_TIMEOUT_DEFAULT_MS: u64 = 3000;
pub const SEND_TIMEOUT_MAX_MS: u64 = 60_000;
/// Catch-up backlog default and cap.
pub const BACKLOG_DEFAULT_BYTES: u64 = 1024 * 1024 * 1024;
pub const BACKLOG_MAX_BYTES: u64 = 64 * 1024 * 1024 * 1024;
/// Java client `pullBatchSize`.
pub const PULL_BATCH_DEFAULT: i32 = 32;
pub const PULL_BATCH_MAX: i32 = 1024;
/// Largest pid Linux hands out (`PID_MAX_LIMIT` on 64-bit: 2^22).
pub const PID_MAX: u64 = 4 * 1024 * 1024;
/// Echo server default queues per topic (broker `defaultTopicQueueNums`).
pub const ECHO_QUEUES_DEFAULT: i32 = 8;

/// Consumer filter kind (`-f`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FilterType {
    #[value(name = "TAG")]
    Tag,
    #[value(name = "SQL92")]
    Sql92,
}

impl FilterType {
    pub fn name(self) -> &'static str {
        match self {
            FilterType::Tag => "TAG",
            FilterType::Sql92 => "SQL92",
        }
    }
}

/// Where a consumer group without a committed offset starts (`--from`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StartFrom {
    First,
    Last,
}
