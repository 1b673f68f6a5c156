//! `GET /metrics`: the Prometheus text format (0.0.4), written by prometheus-client's encoder
//! from a collector that reads [`BrokerMetrics`] and a [`BrokerSnapshot`] once per scrape.

use std::fmt;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::histogram::HistogramSnapshot;
use super::registry::{BrokerMetrics, TopicTotals};
use super::view::BrokerSnapshot;

/// The `Content-Type` of the exposition.
pub use prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Every family name starts with this (`ringmq_send_messages_total`, …).
pub const METRIC_PREFIX: &str = "ringmq";

/// The exposition text of one scrape.
pub fn encode(
    metrics: &Arc<BrokerMetrics>,
    snapshot: BrokerSnapshot,
) -> Result<String, fmt::Error> {
    let mut registry = Registry::with_prefix(METRIC_PREFIX);
    registry.register_collector(Box::new(Scrape {
        metrics: metrics.clone(),
        snapshot,
    }));
    let mut text = String::new();
    prometheus_client::encoding::prometheus_text::encode(&mut text, &registry)?;
    Ok(text)
}

#[derive(Debug)]
struct Scrape {
    metrics: Arc<BrokerMetrics>,
    snapshot: BrokerSnapshot,
}

type TopicField = fn(&TopicTotals) -> u64;

const TOPIC_COUNTERS: &[(&str, &str, TopicField)] = &[
    (
        "send_requests",
        "Send requests that stored messages, by topic.",
        |t| t.send_requests,
    ),
    (
        "send_messages",
        "Messages stored by send requests, by topic.",
        |t| t.send_messages,
    ),
    (
        "send_bytes",
        "CommitLog bytes written by send requests, by topic.",
        |t| t.send_bytes,
    ),
    (
        "pull_requests",
        "Pull requests looked up in the store, by topic.",
        |t| t.pull_requests,
    ),
    (
        "pull_messages",
        "Messages returned by pulls, by topic.",
        |t| t.pull_messages,
    ),
    (
        "pull_bytes",
        "Message bytes returned by pulls, by topic.",
        |t| t.pull_bytes,
    ),
];

impl Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let topics = self.metrics.topic_totals();
        for (name, help, field) in TOPIC_COUNTERS {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for (topic, totals) in &topics {
                let labels = [("topic", topic.as_str())];
                ConstCounter::new(field(totals)).encode(family.encode_family(&labels)?)?;
            }
        }
        let m = &self.metrics;
        histogram(
            &mut encoder,
            "send_latency_seconds",
            "Broker time of send requests.",
            &m.send_latency.snapshot(),
        )?;
        histogram(
            &mut encoder,
            "pull_latency_seconds",
            "Broker time of pull requests until answered or parked.",
            &m.pull_latency.snapshot(),
        )?;
        histogram(
            &mut encoder,
            "longpoll_wake_latency_seconds",
            "From a message's arrival to the re-execution of the parked pulls it woke.",
            &m.wake_latency.snapshot(),
        )?;
        self.encode_errors(&mut encoder)?;
        self.encode_snapshot(&mut encoder)
    }
}

impl Scrape {
    fn encode_errors(&self, encoder: &mut DescriptorEncoder) -> Result<(), fmt::Error> {
        let mut family = encoder.encode_descriptor(
            "request_errors",
            "Requests refused, by response code.",
            None,
            MetricType::Counter,
        )?;
        for (code, n) in self.metrics.error_counts() {
            let code = code.map_or_else(|| "other".to_string(), |c| c.to_string());
            let labels = [("code", code.as_str())];
            ConstCounter::new(n).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }

    fn encode_snapshot(&self, encoder: &mut DescriptorEncoder) -> Result<(), fmt::Error> {
        let s = &self.snapshot;
        let store = &s.store;
        let info = [
            ("broker", s.broker.name.as_str()),
            ("cluster", s.broker.cluster.as_str()),
            ("role", s.broker.role.as_str()),
            ("version", s.broker.version.as_str()),
        ];
        let mut family = encoder.encode_descriptor(
            "broker",
            "The broker's name, cluster, role and version.",
            None,
            MetricType::Info,
        )?;
        family.encode_info(&info)?;
        let commit_log_bytes = store.commit_log_max_offset - store.commit_log_min_offset;
        gauge(
            encoder,
            "commitlog_size_bytes",
            "CommitLog bytes held (max offset - min offset).",
            commit_log_bytes,
        )?;
        gauge(
            encoder,
            "commitlog_max_offset_bytes",
            "CommitLog offset past the last record.",
            store.commit_log_max_offset,
        )?;
        gauge(
            encoder,
            "commitlog_flushed_offset_bytes",
            "CommitLog offset below which everything is fsynced.",
            store.commit_log_flushed_offset,
        )?;
        counter(
            encoder,
            "store_fsyncs",
            "fsync calls of the store.",
            store.fsyncs,
        )?;
        histogram(
            encoder,
            "commitlog_flush_latency_seconds",
            "One CommitLog flush (fsync of its dirty files).",
            &store.flush_latency,
        )?;
        gauge(
            encoder,
            "connections",
            "Open client connections.",
            as_i64(s.connections),
        )?;
        gauge(
            encoder,
            "longpoll_parked_pulls",
            "Pulls parked by long polling.",
            as_i64(s.parked_pulls),
        )?;
        self.encode_lag(encoder)?;
        if let Some(lag) = s.ha.lag_bytes {
            gauge(
                encoder,
                "ha_lag_bytes",
                "CommitLog bytes the slowest slave is behind.",
                lag,
            )?;
        }
        Ok(())
    }

    fn encode_lag(&self, encoder: &mut DescriptorEncoder) -> Result<(), fmt::Error> {
        let s = &self.snapshot;
        let mut family = encoder.encode_descriptor(
            "consumer_lag_messages",
            "Messages of a queue its group has not consumed (broker offset - consumer offset).",
            None,
            MetricType::Gauge,
        )?;
        for lag in &s.lags {
            let queue = lag.queue_id.to_string();
            let labels = [
                ("group", lag.group.as_str()),
                ("topic", lag.topic.as_str()),
                ("queue", queue.as_str()),
            ];
            ConstGauge::new(lag.lag).encode(family.encode_family(&labels)?)?;
        }
        gauge(
            encoder,
            "consumer_lag_series_dropped",
            "Consumer-lag series left out of this scrape (over the bound).",
            as_i64(s.lag_series_dropped),
        )
    }
}

fn as_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: i64,
) -> Result<(), fmt::Error> {
    let family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    ConstGauge::new(value).encode(family)
}

fn counter(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: u64,
) -> Result<(), fmt::Error> {
    let family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    ConstCounter::new(value).encode(family)
}

fn histogram(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    h: &HistogramSnapshot,
) -> Result<(), fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
    family.encode_histogram::<NoLabelSet>(h.sum_seconds, h.count, &h.buckets, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::view::{HaSnapshot, QueueLag};

    #[test]
    fn a_scrape_has_every_family_and_the_recorded_values() {
        let m = Arc::new(BrokerMetrics::new());
        m.record_send("TopicA", 2, 256);
        m.record_pull("TopicA", 1, 128);
        m.record_error(17);
        m.observe_send(std::time::Duration::from_micros(70));
        let mut snapshot = BrokerSnapshot::default();
        snapshot.broker.role = "ASYNC_MASTER".into();
        snapshot.store.commit_log_max_offset = 4096;
        snapshot.lags.push(QueueLag {
            group: "G".into(),
            topic: "TopicA".into(),
            queue_id: 3,
            broker_offset: 10,
            consumer_offset: 4,
            lag: 6,
        });
        let text = encode(&m, snapshot).unwrap();
        for line in [
            "ringmq_send_messages_total{topic=\"TopicA\"} 2",
            "ringmq_send_bytes_total{topic=\"TopicA\"} 256",
            "ringmq_pull_messages_total{topic=\"TopicA\"} 1",
            "ringmq_request_errors_total{code=\"17\"} 1",
            "ringmq_send_latency_seconds_bucket{le=\"0.0001\"} 1",
            "ringmq_send_latency_seconds_count 1",
            "ringmq_commitlog_size_bytes 4096",
            "ringmq_consumer_lag_messages{group=\"G\",topic=\"TopicA\",queue=\"3\"} 6",
            "ringmq_broker_info{broker=\"\",cluster=\"\",role=\"ASYNC_MASTER\",version=\"\"} 1",
            "# TYPE ringmq_store_fsyncs_total counter",
            "# TYPE ringmq_longpoll_wake_latency_seconds histogram",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        assert!(
            !text.contains("ringmq_ha_lag_bytes"),
            "absent until HA reports a lag"
        );
    }

    #[test]
    fn the_ha_lag_appears_once_replication_reports_it() {
        let m = Arc::new(BrokerMetrics::new());
        let snapshot = BrokerSnapshot {
            ha: HaSnapshot {
                replicating: true,
                state: "replicating".into(),
                lag_bytes: Some(512),
            },
            ..BrokerSnapshot::default()
        };
        let text = encode(&m, snapshot).unwrap();
        assert!(
            text.lines().any(|l| l == "ringmq_ha_lag_bytes 512"),
            "{text}"
        );
    }
}
