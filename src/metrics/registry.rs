//! The broker's counters, recorded on the request path without a lock: plain atomics, and one
//! set of atomics per topic found through an [`ArcSwap`]ed map (a lock-free load and a hash
//! lookup; the map is copied and swapped only the first time a topic is seen).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;

use super::histogram::Histogram;

/// Most topics with series of their own. Traffic of further topics is counted under the topic
/// label [`OTHER_TOPICS_LABEL`], so the series count stays bounded whatever clients send.
pub const TOPIC_SERIES_MAX: usize = 1024;
/// The topic label of traffic beyond [`TOPIC_SERIES_MAX`] topics.
pub const OTHER_TOPICS_LABEL: &str = "_other";
/// Response codes `0..RESPONSE_CODE_SLOTS` are counted one by one (RocketMQ's codes are below
/// 256 today); any other code is counted under the label `other`.
pub const RESPONSE_CODE_SLOTS: usize = 256;

type TopicMap = HashMap<Box<str>, Arc<TopicCounters>, foldhash::fast::RandomState>;

/// One topic's traffic.
#[derive(Debug, Default)]
pub struct TopicCounters {
    pub send_requests: AtomicU64,
    pub send_messages: AtomicU64,
    pub send_bytes: AtomicU64,
    pub pull_requests: AtomicU64,
    pub pull_messages: AtomicU64,
    pub pull_bytes: AtomicU64,
}

/// [`TopicCounters`] as read at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct TopicTotals {
    pub send_requests: u64,
    pub send_messages: u64,
    pub send_bytes: u64,
    pub pull_requests: u64,
    pub pull_messages: u64,
    pub pull_bytes: u64,
}

impl TopicCounters {
    fn totals(&self) -> TopicTotals {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        TopicTotals {
            send_requests: r(&self.send_requests),
            send_messages: r(&self.send_messages),
            send_bytes: r(&self.send_bytes),
            pull_requests: r(&self.pull_requests),
            pull_messages: r(&self.pull_messages),
            pull_bytes: r(&self.pull_bytes),
        }
    }
}

/// Everything the broker records as it serves requests.
#[derive(Debug)]
pub struct BrokerMetrics {
    topics: ArcSwap<TopicMap>,
    /// Taken only to add a topic (once per topic), never to record.
    topics_insert: Mutex<()>,
    other_topics: Arc<TopicCounters>,
    /// Time the broker took on SEND_MESSAGE(_V2) and SEND_BATCH_MESSAGE, every outcome.
    pub send_latency: Histogram,
    /// Time the broker took on PULL_MESSAGE and LITE_PULL_MESSAGE until it answered or parked.
    pub pull_latency: Histogram,
    /// From a message's arrival to the re-execution of the parked pulls it woke.
    pub wake_latency: Histogram,
    errors: [AtomicU64; RESPONSE_CODE_SLOTS],
    errors_other: AtomicU64,
}

impl Default for BrokerMetrics {
    fn default() -> Self {
        BrokerMetrics::new()
    }
}

impl BrokerMetrics {
    pub fn new() -> Self {
        BrokerMetrics {
            topics: ArcSwap::from_pointee(TopicMap::default()),
            topics_insert: Mutex::new(()),
            other_topics: Arc::default(),
            send_latency: Histogram::new(),
            pull_latency: Histogram::new(),
            wake_latency: Histogram::new(),
            errors: [const { AtomicU64::new(0) }; RESPONSE_CODE_SLOTS],
            errors_other: AtomicU64::new(0),
        }
    }

    /// Runs `f` on `topic`'s counters, adding the topic on its first use.
    fn with_topic(&self, topic: &str, f: impl FnOnce(&TopicCounters)) {
        if let Some(c) = self.topics.load().get(topic) {
            return f(c);
        }
        f(&self.add_topic(topic));
    }

    fn add_topic(&self, topic: &str) -> Arc<TopicCounters> {
        // A poisoned lock only means a thread panicked while adding; the map itself is whole.
        let _guard = self.topics_insert.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.topics.load_full();
        if let Some(c) = current.get(topic) {
            return c.clone();
        }
        if current.len() >= TOPIC_SERIES_MAX {
            return self.other_topics.clone();
        }
        let mut next = TopicMap::clone(&current);
        let counters = Arc::new(TopicCounters::default());
        next.insert(topic.into(), counters.clone());
        self.topics.store(Arc::new(next));
        counters
    }

    /// A send request that stored `messages` messages of `bytes` bytes on `topic`.
    pub fn record_send(&self, topic: &str, messages: u64, bytes: u64) {
        self.with_topic(topic, |c| {
            c.send_requests.fetch_add(1, Ordering::Relaxed);
            c.send_messages.fetch_add(messages, Ordering::Relaxed);
            c.send_bytes.fetch_add(bytes, Ordering::Relaxed);
        });
    }

    /// A pull of `topic` that found `messages` messages of `bytes` bytes (0 and 0 when it
    /// found none).
    pub fn record_pull(&self, topic: &str, messages: u64, bytes: u64) {
        self.with_topic(topic, |c| {
            c.pull_requests.fetch_add(1, Ordering::Relaxed);
            c.pull_messages.fetch_add(messages, Ordering::Relaxed);
            c.pull_bytes.fetch_add(bytes, Ordering::Relaxed);
        });
    }

    /// A request refused with `code`.
    pub fn record_error(&self, code: i32) {
        match usize::try_from(code).ok().and_then(|i| self.errors.get(i)) {
            Some(slot) => slot.fetch_add(1, Ordering::Relaxed),
            None => self.errors_other.fetch_add(1, Ordering::Relaxed),
        };
    }

    pub fn observe_send(&self, elapsed: Duration) {
        self.send_latency.observe(elapsed);
    }

    pub fn observe_pull(&self, elapsed: Duration) {
        self.pull_latency.observe(elapsed);
    }

    pub fn observe_wake(&self, elapsed: Duration) {
        self.wake_latency.observe(elapsed);
    }

    /// Every topic's totals, sorted by name; the topics past [`TOPIC_SERIES_MAX`] last, as
    /// [`OTHER_TOPICS_LABEL`], once they had traffic.
    pub fn topic_totals(&self) -> Vec<(String, TopicTotals)> {
        let map = self.topics.load();
        let mut out: Vec<(String, TopicTotals)> = map
            .iter()
            .map(|(name, c)| (name.to_string(), c.totals()))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        let other = self.other_topics.totals();
        if other != TopicTotals::default() {
            out.push((OTHER_TOPICS_LABEL.to_string(), other));
        }
        out
    }

    /// `(code, count)` of every response code refused at least once; `None` is the `other`
    /// slot.
    pub fn error_counts(&self) -> Vec<(Option<i32>, u64)> {
        let mut out: Vec<(Option<i32>, u64)> = self
            .errors
            .iter()
            .enumerate()
            .filter_map(|(code, n)| {
                let n = n.load(Ordering::Relaxed);
                (n > 0).then(|| (i32::try_from(code).ok(), n))
            })
            .collect();
        let other = self.errors_other.load(Ordering::Relaxed);
        if other > 0 {
            out.push((None, other));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_past_the_bound_are_counted_together() {
        let m = BrokerMetrics::new();
        for i in 0..TOPIC_SERIES_MAX + 3 {
            m.record_send(&format!("T{i:05}"), 2, 100);
        }
        m.record_send("T00000", 1, 10);
        let totals = m.topic_totals();
        assert_eq!(totals.len(), TOPIC_SERIES_MAX + 1);
        assert_eq!(totals[0].0, "T00000");
        assert_eq!(totals[0].1.send_requests, 2);
        assert_eq!(totals[0].1.send_messages, 3);
        assert_eq!(totals[0].1.send_bytes, 110);
        let (label, other) = totals.last().unwrap();
        assert_eq!(label, OTHER_TOPICS_LABEL);
        assert_eq!(other.send_requests, 3);
        assert_eq!(other.send_messages, 6);
    }

    #[test]
    fn errors_are_counted_by_code_and_odd_codes_as_other() {
        let m = BrokerMetrics::new();
        m.record_error(17);
        m.record_error(17);
        m.record_error(-1);
        m.record_error(100_000);
        assert_eq!(m.error_counts(), vec![(Some(17), 2), (None, 2)]);
    }

    #[test]
    fn pulls_count_requests_even_when_they_find_nothing() {
        let m = BrokerMetrics::new();
        m.record_pull("T", 0, 0);
        m.record_pull("T", 3, 300);
        let t = m.topic_totals()[0].1;
        assert_eq!(
            (t.pull_requests, t.pull_messages, t.pull_bytes),
            (2, 3, 300)
        );
    }
}
