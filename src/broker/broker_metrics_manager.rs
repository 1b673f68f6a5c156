//! What the broker shows on `/metrics` and the dashboard at scrape time (Java
//! `BrokerMetricsManager`, which computes consumer lag when its exporter collects): the broker's
//! identity and role, the CommitLog and its fsyncs, connections, parked pulls, the topic table,
//! and each group's lag per queue, read from the offset table and the store's max offsets.

use std::sync::{Arc, Weak};
use std::thread::JoinHandle;

use crate::broker::controller::BrokerController;
use crate::broker::topic_config_manager::{
    AUTO_CREATE_TOPIC_KEY_TOPIC, BENCHMARK_TOPIC, OFFSET_MOVED_EVENT, SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
};
use crate::common::StopFlag;
use crate::config::BrokerRole;
use crate::metrics::view::{
    BrokerIdentity, QueueLag, StoreSnapshot, TopicInfo, LAG_SERIES_MAX, TOPICS_LISTED_MAX,
};
use crate::metrics::{exporter, BrokerMetrics, BrokerSnapshot, BrokerView, HaSnapshot};
use crate::net::LiveConnections;

/// Java `TopicValidator.SYSTEM_TOPIC_PREFIX`.
const SYSTEM_TOPIC_PREFIX: &str = "rmq_sys_";

/// The broker as the metrics room sees it.
pub struct BrokerMetricsView {
    ctrl: Weak<BrokerController>,
    connections: LiveConnections,
}

/// Java's `BrokerRole` names.
pub fn role_name(role: BrokerRole) -> &'static str {
    match role {
        BrokerRole::AsyncMaster => "ASYNC_MASTER",
        BrokerRole::SyncMaster => "SYNC_MASTER",
        BrokerRole::Slave => "SLAVE",
    }
}

impl BrokerMetricsView {
    pub fn new(ctrl: &Arc<BrokerController>, connections: LiveConnections) -> Self {
        BrokerMetricsView {
            ctrl: Arc::downgrade(ctrl),
            connections,
        }
    }
}

impl BrokerView for BrokerMetricsView {
    fn snapshot(&self) -> BrokerSnapshot {
        let Some(ctrl) = self.ctrl.upgrade() else {
            return BrokerSnapshot::default();
        };
        let (lags, lag_series_dropped) = consumer_lags(&ctrl, LAG_SERIES_MAX);
        BrokerSnapshot {
            broker: identity(&ctrl),
            store: store_snapshot(&ctrl),
            connections: self.connections.get() as u64,
            parked_pulls: ctrl.pull_hold.parked_pulls() as u64,
            topics: topics(&ctrl),
            lags,
            lag_series_dropped,
            ha: ha_snapshot(&ctrl),
        }
    }
}

/// The replication state (`src/broker/ha/`): on a master with slaves, the CommitLog bytes its
/// slowest slave is behind (the `ringmq_ha_lag_bytes` gauge and the dashboard's HA tag); on a
/// slave, whether it follows its master.
fn ha_snapshot(ctrl: &BrokerController) -> HaSnapshot {
    let ha = &ctrl.ha;
    if ha.role() == BrokerRole::Slave {
        let master = ha.master_ha_addr().unwrap_or_else(|| "unknown".into());
        return HaSnapshot {
            replicating: ha.slave_connected(),
            state: if ha.slave_connected() {
                format!("slave following {master}")
            } else {
                format!("slave, not connected to master {master}")
            },
            lag_bytes: None,
        };
    }
    let state = ha.runtime_state(ctrl.store.max_phy_offset());
    match ha.slowest_slave_ack() {
        Some(acked) if state.slave_count > 0 => HaSnapshot {
            replicating: true,
            state: format!(
                "master, {} slave(s), acked offset {}",
                state.slave_count, state.max_replicated_offset
            ),
            lag_bytes: Some((ctrl.store.max_phy_offset() - acked).max(0)),
        },
        _ => HaSnapshot {
            replicating: false,
            state: "master, no slave connected".into(),
            lag_bytes: None,
        },
    }
}

fn identity(ctrl: &BrokerController) -> BrokerIdentity {
    let b = &ctrl.config.broker;
    BrokerIdentity {
        name: b.name.clone(),
        cluster: b.cluster_name.clone(),
        addr: ctrl.broker_addr.clone(),
        role: role_name(b.role).into(),
        version: env!("CARGO_PKG_VERSION").into(),
        boot_timestamp_ms: ctrl.boot_timestamp_ms,
    }
}

fn store_snapshot(ctrl: &BrokerController) -> StoreSnapshot {
    let store = &ctrl.store;
    let flush = store.flush_stats();
    StoreSnapshot {
        commit_log_min_offset: store.min_phy_offset(),
        commit_log_max_offset: store.max_phy_offset(),
        commit_log_flushed_offset: store.flushed_phy_offset(),
        fsyncs: flush.fsyncs,
        flush_latency: flush.commit_log_flush_latency,
    }
}

/// The topics the broker makes for itself (those of Java's `TopicValidator.SYSTEM_TOPIC_SET`
/// that ringmq has, the cluster and broker name topics, and the `rmq_sys_` prefix).
fn is_system_topic(ctrl: &BrokerController, topic: &str) -> bool {
    let b = &ctrl.config.broker;
    [
        AUTO_CREATE_TOPIC_KEY_TOPIC,
        SELF_TEST_TOPIC,
        BENCHMARK_TOPIC,
        OFFSET_MOVED_EVENT,
        SCHEDULE_TOPIC,
    ]
    .contains(&topic)
        || topic == b.cluster_name
        || topic == b.name
        || topic.strip_suffix("_REPLY_TOPIC") == Some(b.cluster_name.as_str())
        || topic.starts_with(SYSTEM_TOPIC_PREFIX)
}

fn topics(ctrl: &BrokerController) -> Vec<TopicInfo> {
    // The table is a BTreeMap: sorted by name.
    ctrl.topics
        .wrapper()
        .topic_config_table
        .values()
        .take(TOPICS_LISTED_MAX)
        .map(|tc| TopicInfo {
            name: tc.topic_name.clone(),
            read_queue_nums: tc.read_queue_nums,
            write_queue_nums: tc.write_queue_nums,
            system: is_system_topic(ctrl, &tc.topic_name),
        })
        .collect()
}

/// Each (group, topic, queue) with a committed offset: the store's max offset minus it. At most
/// `max` rows (sorted by topic@group, then queue); the count of the others second.
pub fn consumer_lags(ctrl: &BrokerController, max: usize) -> (Vec<QueueLag>, u64) {
    let mut lags = Vec::new();
    let mut dropped = 0u64;
    for (key, offsets) in ctrl.offsets.snapshot() {
        let Some((topic, group)) = key.split_once('@') else {
            continue;
        };
        for (queue_id, consumer_offset) in offsets {
            if lags.len() >= max {
                dropped += 1;
                continue;
            }
            let broker_offset = ctrl.store.max_offset_in_queue(topic, queue_id);
            lags.push(QueueLag {
                group: group.to_string(),
                topic: topic.to_string(),
                queue_id,
                broker_offset,
                consumer_offset,
                lag: broker_offset.saturating_sub(consumer_offset).max(0),
            });
        }
    }
    (lags, dropped)
}

/// Starts the metrics listener's thread on `listener` (bound at startup).
pub fn start_exporter(
    ctrl: &Arc<BrokerController>,
    metrics: Arc<BrokerMetrics>,
    listener: std::net::TcpListener,
    connections: LiveConnections,
    stop: &StopFlag,
) -> std::io::Result<JoinHandle<()>> {
    let view = Arc::new(BrokerMetricsView::new(ctrl, connections));
    exporter::serve(listener, metrics, view, stop.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn lag_rows_are_bounded_and_broker_topics_are_marked() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::default();
        config.store.root_dir = dir.path().join("store");
        let ctrl = crate::broker::startup::build_controller(config)
            .unwrap()
            .ctrl;
        for q in 0..3 {
            ctrl.offsets.commit_offset("G", "T", q, 0);
        }
        let (rows, dropped) = consumer_lags(&ctrl, 2);
        assert_eq!((rows.len(), dropped), (2, 1));
        assert_eq!((rows[0].group.as_str(), rows[0].topic.as_str()), ("G", "T"));
        assert_eq!(rows[0].lag, 0, "nothing stored: nothing to consume");
        let listed = topics(&ctrl);
        let tbw = listed.iter().find(|t| t.name == "TBW102").unwrap();
        assert!(tbw.system);
        assert!(is_system_topic(&ctrl, "DefaultCluster_REPLY_TOPIC"));
        assert!(!is_system_topic(&ctrl, "Orders"));
        let view = BrokerMetricsView {
            ctrl: Arc::downgrade(&ctrl),
            connections: crate::net::LiveConnections::default(),
        };
        let snapshot = view.snapshot();
        assert_eq!(snapshot.broker.role, "ASYNC_MASTER");
        assert_eq!(snapshot.ha.state, "master, no slave connected");
        assert!(!snapshot.ha.replicating && snapshot.ha.lag_bytes.is_none());
        assert_eq!(snapshot.lags.len(), 3);
        ctrl.store.shutdown().unwrap();
    }
}
