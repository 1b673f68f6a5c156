//! The dashboard: a static page built into the binary (`assets/`, no CDN, no fetch but its own
//! `/api/stats`), and that JSON: the broker, topics with their rates, groups with their lag,
//! the throughput history, and the replication state.

use std::collections::BTreeMap;

use serde::Serialize;

use super::rates::{RateHistory, RateSample, Rates};
use super::registry::{BrokerMetrics, TopicTotals};
use super::view::{BrokerIdentity, BrokerSnapshot, HaSnapshot, StoreSnapshot};

pub const INDEX_HTML: &str = include_str!("assets/index.html");
pub const DASHBOARD_JS: &str = include_str!("assets/dashboard.js");
pub const DASHBOARD_CSS: &str = include_str!("assets/dashboard.css");

/// One topic row of the page.
#[derive(Debug, Serialize)]
struct TopicRow {
    name: String,
    read_queue_nums: i32,
    write_queue_nums: i32,
    system: bool,
    totals: TopicTotals,
    rates: Rates,
}

/// One (group, topic) row: the lag summed over its queues.
#[derive(Debug, Serialize)]
struct GroupRow {
    group: String,
    topic: String,
    queues: usize,
    lag: i64,
}

#[derive(Debug, Serialize)]
struct Stats<'a> {
    broker: &'a BrokerIdentity,
    store: &'a StoreSnapshot,
    connections: u64,
    parked_pulls: u64,
    ha: &'a HaSnapshot,
    rates: Rates,
    history: Vec<RateSample>,
    topics: Vec<TopicRow>,
    groups: Vec<GroupRow>,
    lag_series_dropped: u64,
}

/// The `/api/stats` body.
pub fn stats_json(
    metrics: &BrokerMetrics,
    snapshot: &BrokerSnapshot,
    history: &RateHistory,
) -> Result<String, serde_json::Error> {
    let totals: BTreeMap<String, TopicTotals> = metrics.topic_totals().into_iter().collect();
    let topics = snapshot
        .topics
        .iter()
        .map(|t| TopicRow {
            name: t.name.clone(),
            read_queue_nums: t.read_queue_nums,
            write_queue_nums: t.write_queue_nums,
            system: t.system,
            totals: totals.get(&t.name).copied().unwrap_or_default(),
            rates: history.topic_rates(&t.name),
        })
        .collect();
    let mut groups: BTreeMap<(&str, &str), GroupRow> = BTreeMap::new();
    for lag in &snapshot.lags {
        let row = groups
            .entry((lag.group.as_str(), lag.topic.as_str()))
            .or_insert_with(|| GroupRow {
                group: lag.group.clone(),
                topic: lag.topic.clone(),
                queues: 0,
                lag: 0,
            });
        row.queues += 1;
        row.lag = row.lag.saturating_add(lag.lag);
    }
    serde_json::to_string(&Stats {
        broker: &snapshot.broker,
        store: &snapshot.store,
        connections: snapshot.connections,
        parked_pulls: snapshot.parked_pulls,
        ha: &snapshot.ha,
        rates: history.current(),
        history: history.samples(),
        topics,
        groups: groups.into_values().collect(),
        lag_series_dropped: snapshot.lag_series_dropped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::view::{QueueLag, TopicInfo};

    #[test]
    fn groups_sum_their_queues_and_topics_carry_their_totals() {
        let m = BrokerMetrics::new();
        m.record_send("T", 5, 500);
        let mut s = BrokerSnapshot::default();
        s.topics.push(TopicInfo {
            name: "T".into(),
            read_queue_nums: 4,
            write_queue_nums: 4,
            system: false,
        });
        for (q, lag) in [(0, 3), (1, 4)] {
            s.lags.push(QueueLag {
                group: "G".into(),
                topic: "T".into(),
                queue_id: q,
                broker_offset: 10,
                consumer_offset: 10 - lag,
                lag,
            });
        }
        let json: serde_json::Value =
            serde_json::from_str(&stats_json(&m, &s, &RateHistory::default()).unwrap()).unwrap();
        assert_eq!(json["topics"][0]["name"], "T");
        assert_eq!(json["topics"][0]["totals"]["send_messages"], 5);
        assert_eq!(json["groups"][0]["lag"], 7);
        assert_eq!(json["groups"][0]["queues"], 2);
        assert_eq!(json["ha"]["state"], "not replicating");
    }

    #[test]
    fn the_page_loads_only_its_own_assets() {
        for asset in [INDEX_HTML, DASHBOARD_JS, DASHBOARD_CSS] {
            assert!(!asset.contains("http://") && !asset.contains("https://"));
        }
        assert!(INDEX_HTML.contains("/dashboard.js") && INDEX_HTML.contains("/dashboard.css"));
        assert!(DASHBOARD_JS.contains("/api/stats"));
    }
}
