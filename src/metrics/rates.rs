//! Throughput over time for the dashboard: the exporter thread samples the topic totals once a
//! second and keeps the last [`RATE_SAMPLES_MAX`] rates, so the page shows a chart from its
//! first request and no rate depends on the browser's clock.

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use serde::Serialize;

use super::registry::TopicTotals;

/// Samples kept (one a second: two minutes).
pub const RATE_SAMPLES_MAX: usize = 120;

/// Rates between two samples, per second.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Rates {
    pub send_messages_per_s: f64,
    pub send_bytes_per_s: f64,
    pub pull_messages_per_s: f64,
    pub pull_bytes_per_s: f64,
}

/// One point of the chart.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct RateSample {
    /// Milliseconds since the Unix epoch.
    pub at_ms: i64,
    #[serde(flatten)]
    pub rates: Rates,
}

/// The sampled history.
#[derive(Debug, Default)]
pub struct RateHistory {
    last: Option<(Instant, HashMap<String, TopicTotals>)>,
    samples: VecDeque<RateSample>,
    topic_rates: HashMap<String, Rates>,
}

fn rates_between(before: &TopicTotals, after: &TopicTotals, seconds: f64) -> Rates {
    let per_s = |a: u64, b: u64| b.saturating_sub(a) as f64 / seconds;
    Rates {
        send_messages_per_s: per_s(before.send_messages, after.send_messages),
        send_bytes_per_s: per_s(before.send_bytes, after.send_bytes),
        pull_messages_per_s: per_s(before.pull_messages, after.pull_messages),
        pull_bytes_per_s: per_s(before.pull_bytes, after.pull_bytes),
    }
}

fn add(a: Rates, b: Rates) -> Rates {
    Rates {
        send_messages_per_s: a.send_messages_per_s + b.send_messages_per_s,
        send_bytes_per_s: a.send_bytes_per_s + b.send_bytes_per_s,
        pull_messages_per_s: a.pull_messages_per_s + b.pull_messages_per_s,
        pull_bytes_per_s: a.pull_bytes_per_s + b.pull_bytes_per_s,
    }
}

impl RateHistory {
    /// Records the totals read at `now` (`at_ms` on the wall clock).
    pub fn sample(&mut self, now: Instant, at_ms: i64, totals: Vec<(String, TopicTotals)>) {
        let totals: HashMap<String, TopicTotals> = totals.into_iter().collect();
        if let Some((then, before)) = &self.last {
            let seconds = now.duration_since(*then).as_secs_f64();
            if seconds > 0.0 {
                self.topic_rates = totals
                    .iter()
                    .map(|(topic, after)| {
                        let zero = TopicTotals::default();
                        let before = before.get(topic).unwrap_or(&zero);
                        (topic.clone(), rates_between(before, after, seconds))
                    })
                    .collect();
                let rates = self
                    .topic_rates
                    .values()
                    .copied()
                    .fold(Rates::default(), add);
                if self.samples.len() == RATE_SAMPLES_MAX {
                    self.samples.pop_front();
                }
                self.samples.push_back(RateSample { at_ms, rates });
            }
        }
        self.last = Some((now, totals));
    }

    /// Oldest first.
    pub fn samples(&self) -> Vec<RateSample> {
        self.samples.iter().copied().collect()
    }

    /// The latest rates of `topic` (zero before two samples or without traffic).
    pub fn topic_rates(&self, topic: &str) -> Rates {
        self.topic_rates.get(topic).copied().unwrap_or_default()
    }

    /// The latest broker-wide rates.
    pub fn current(&self) -> Rates {
        self.samples.back().map(|s| s.rates).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn totals(send: u64) -> Vec<(String, TopicTotals)> {
        let t = TopicTotals {
            send_messages: send,
            send_bytes: send * 10,
            ..TopicTotals::default()
        };
        vec![("T".to_string(), t)]
    }

    #[test]
    fn rates_are_the_difference_over_the_elapsed_time_and_the_history_is_bounded() {
        let mut h = RateHistory::default();
        let t0 = Instant::now();
        h.sample(t0, 0, totals(0));
        assert!(h.samples().is_empty(), "one sample gives no rate yet");
        h.sample(t0 + Duration::from_secs(2), 2000, totals(100));
        assert_eq!(h.current().send_messages_per_s, 50.0);
        assert_eq!(h.topic_rates("T").send_bytes_per_s, 500.0);
        assert_eq!(h.topic_rates("nope"), Rates::default());
        for i in 0..RATE_SAMPLES_MAX as u64 + 5 {
            h.sample(t0 + Duration::from_secs(3 + i), 0, totals(100 + i));
        }
        assert_eq!(h.samples().len(), RATE_SAMPLES_MAX);
    }
}
