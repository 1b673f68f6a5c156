//! What the broker shows at scrape time: a snapshot it builds on demand from its tables (the
//! metrics room imports no broker code; the broker implements [`BrokerView`]).

use serde::Serialize;

use super::histogram::HistogramSnapshot;

/// Most (group, topic, queue) consumer-lag series one scrape reports; the rest are counted in
/// [`BrokerSnapshot::lag_series_dropped`], so a broker with many groups cannot blow up the
/// scrape.
pub const LAG_SERIES_MAX: usize = 4096;
/// Most topics the dashboard and the topic-queue gauge list.
pub const TOPICS_LISTED_MAX: usize = 1024;

/// The broker's tables and gauges, read when a scrape or the dashboard asks.
pub trait BrokerView: Send + Sync + 'static {
    fn snapshot(&self) -> BrokerSnapshot;
}

/// Who the broker is.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BrokerIdentity {
    pub name: String,
    pub cluster: String,
    pub addr: String,
    /// ASYNC_MASTER, SYNC_MASTER or SLAVE.
    pub role: String,
    pub version: String,
    pub boot_timestamp_ms: i64,
}

/// The CommitLog and its durability.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StoreSnapshot {
    pub commit_log_min_offset: i64,
    pub commit_log_max_offset: i64,
    pub commit_log_flushed_offset: i64,
    /// fsync(2) calls of the store since start (CommitLog, ConsumeQueue, checkpoint, dirs).
    pub fsyncs: u64,
    /// One CommitLog flush (the fsyncs of its dirty files).
    #[serde(skip)]
    pub flush_latency: HistogramSnapshot,
}

/// One topic of the topic table.
#[derive(Debug, Clone, Serialize)]
pub struct TopicInfo {
    pub name: String,
    pub read_queue_nums: i32,
    pub write_queue_nums: i32,
    /// One of the broker's own topics (Java `TopicValidator.isSystemTopic`); the dashboard
    /// lists them apart.
    pub system: bool,
}

/// One consumer group's position in one queue.
#[derive(Debug, Clone, Serialize)]
pub struct QueueLag {
    pub group: String,
    pub topic: String,
    pub queue_id: i32,
    pub broker_offset: i64,
    pub consumer_offset: i64,
    /// `broker_offset - consumer_offset`, never below 0.
    pub lag: i64,
}

/// Replication state. Until master/slave replication lands the broker reports
/// [`HaSnapshot::not_replicating`]; the HA service fills `lag_bytes` and `state` then.
#[derive(Debug, Clone, Serialize)]
pub struct HaSnapshot {
    pub replicating: bool,
    /// Shown on the dashboard, e.g. "not replicating".
    pub state: String,
    /// Master: CommitLog bytes the slowest slave is behind. `None`: no replication, and the
    /// `ringmq_ha_lag_bytes` gauge is absent.
    pub lag_bytes: Option<i64>,
}

impl HaSnapshot {
    pub fn not_replicating() -> Self {
        HaSnapshot {
            replicating: false,
            state: "not replicating".into(),
            lag_bytes: None,
        }
    }
}

impl Default for HaSnapshot {
    fn default() -> Self {
        HaSnapshot::not_replicating()
    }
}

/// Everything read at scrape time.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BrokerSnapshot {
    pub broker: BrokerIdentity,
    pub store: StoreSnapshot,
    /// Open client connections (both listen ports).
    pub connections: u64,
    /// Pulls parked by long polling now.
    pub parked_pulls: u64,
    /// At most [`TOPICS_LISTED_MAX`], sorted by name.
    pub topics: Vec<TopicInfo>,
    /// At most [`LAG_SERIES_MAX`], sorted by group, topic, queue.
    pub lags: Vec<QueueLag>,
    pub lag_series_dropped: u64,
    pub ha: HaSnapshot,
}
