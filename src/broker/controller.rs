//! `BrokerController`: the broker's shared state, built once at start and shared by every
//! runtime thread (Java `BrokerController`).

use crate::acl::PlainAccessValidator;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use crate::config::{BrokerRole, Config};
use crate::metrics::BrokerMetrics;
use crate::remoting::body::{DataVersion, TopicConfig};
use crate::store::MessageStore;

use super::broker_stats::BrokerStats;
use super::client::{ConsumerManager, ProducerManager, RebalanceLockManager};
use super::consumer_filter_manager::FilterCache;
use super::consumer_offset_manager::ConsumerOffsetManager;
use super::ha::ha_service::HaService;
use super::longpoll::pull_request_hold_service::PullRequestHoldService;
use super::slave_sync_state::SlaveSyncState;
use super::subscription_group_manager::SubscriptionGroupManager;
use super::topic_config_manager::TopicConfigManager;

/// Everything a processor needs.
pub struct BrokerController {
    pub config: Config,
    pub store: Arc<MessageStore>,
    pub topics: TopicConfigManager,
    pub groups: SubscriptionGroupManager,
    pub offsets: ConsumerOffsetManager,
    pub consumers: ConsumerManager,
    pub producers: ProducerManager,
    /// Orderly consumers' queue locks (LOCK_BATCH_MQ).
    pub rebalance_locks: RebalanceLockManager,
    pub filters: FilterCache,
    /// Long polling: parked pulls and the channel to the wake threads.
    pub pull_hold: PullRequestHoldService,
    /// `ip:port` of the main listen port, as registered with the name server.
    pub broker_addr: String,
    pub store_host: SocketAddr,
    /// brokerPermission, changeable at run time (admin).
    pub permission: AtomicI32,
    /// Topics created at run time that the name server must learn about.
    pub topic_changes_tx: crossbeam::channel::Sender<()>,
    pub delay_levels_ms: Vec<u64>,
    /// Version of the run-time configuration (Java `Configuration.dataVersion`), bumped by
    /// UPDATE_BROKER_CONFIG and reported by GET_BROKER_CONFIG.
    pub config_version: Mutex<DataVersion>,
    pub boot_timestamp_ms: i64,
    /// Message totals for GET_BROKER_RUNTIME_INFO (Java `BrokerStats`).
    pub stats: BrokerStats,
    /// On a slave: the master's address and the metadata sync (Java `SlaveSynchronize`).
    pub slave_sync: SlaveSyncState,
    /// Delayed delivery's progress, level → offset in SCHEDULE_TOPIC_XXXX (GET_ALL_DELAY_OFFSET
    /// serves it; the schedule thread or, on a slave, the sync writes it).
    pub schedule_offsets: RwLock<BTreeMap<i32, i64>>,
    /// Replication: the SYNC_MASTER wait, the HA runtime state, a slave's master addresses.
    pub ha: Arc<HaService>,
    /// The ACL rules every request is checked against (`RINGMQ_ACL_ENABLED`), else `None`.
    pub acl: Option<Arc<PlainAccessValidator>>,
    /// What requests record for `/metrics` and the dashboard; `None` with
    /// `RINGMQ_METRICS_LISTEN` empty, so a broker without metrics records nothing.
    pub metrics: Option<Arc<BrokerMetrics>>,
}

impl BrokerController {
    pub fn is_slave(&self) -> bool {
        self.config.broker.role == BrokerRole::Slave
    }

    pub fn broker_permission(&self) -> i32 {
        self.permission.load(Ordering::Relaxed)
    }

    /// The metrics to record into, when metrics are on.
    pub fn metrics(&self) -> Option<&BrokerMetrics> {
        self.metrics.as_deref()
    }

    /// Creates the ConsumeQueue files of the write queues of `tc`, a topic just created or
    /// grown, so its first messages do not create them under the store's writer lock
    /// ([`MessageStore::create_queue_files`]). A failure is logged and nothing else: each
    /// queue's first append creates its file and answers its own failure.
    pub fn create_queue_files(&self, tc: &TopicConfig) {
        match self
            .store
            .create_queue_files(&tc.topic_name, tc.write_queue_nums)
        {
            Ok(created) => {
                tracing::debug!(topic = tc.topic_name, created, "created queue files");
            }
            Err(error) => tracing::warn!(
                topic = tc.topic_name,
                %error,
                "creating the queue files of a new topic failed; each queue's first message makes its own"
            ),
        }
    }

    /// Tell the registration thread that the topic table changed.
    pub fn notify_topics_changed(&self) {
        // A full channel already carries a pending notification; nothing is lost.
        let _ = self.topic_changes_tx.try_send(());
    }
}
