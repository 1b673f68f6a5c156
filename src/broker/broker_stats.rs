//! The broker's message totals (Java `BrokerStats` over `BrokerStatsManager`'s
//! BROKER_PUT_NUMS_WITHOUT_SYSTEM_TOPIC / BROKER_GET_NUMS_WITHOUT_SYSTEM_TOPIC): messages
//! stored by sends and delayed delivery, and messages handed out by pulls, leaving out the
//! broker's own topics ([`is_system_topic`]). GET_BROKER_RUNTIME_INFO reports them as
//! `msgPutTotalTodayNow` / `msgGetTotalTodayNow` and the snapshots taken each midnight.
//!
//! The request path adds to atomics; the stats thread calls [`BrokerStats::record_if_new_day`]
//! once a second. Java snapshots at local midnight; ringmq at midnight UTC (the broker has no
//! time zone setting).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use crate::common::topic_validator::is_system_topic;

const DAY_MS: i64 = 86_400_000;

/// The broker's message totals since start, and their snapshots at the last two midnights.
pub struct BrokerStats {
    put_nums: AtomicU64,
    get_nums: AtomicU64,
    put_total_yesterday_morning: AtomicU64,
    put_total_today_morning: AtomicU64,
    get_total_yesterday_morning: AtomicU64,
    get_total_today_morning: AtomicU64,
    /// The day (ms since the epoch / one day) of the last snapshot, or of the start.
    recorded_day: AtomicI64,
}

/// The six totals GET_BROKER_RUNTIME_INFO reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BrokerTotals {
    pub put_total_yesterday_morning: u64,
    pub put_total_today_morning: u64,
    pub put_total_today_now: u64,
    pub get_total_yesterday_morning: u64,
    pub get_total_today_morning: u64,
    pub get_total_today_now: u64,
}

impl BrokerStats {
    pub fn new(now_ms: i64) -> Self {
        BrokerStats {
            put_nums: AtomicU64::new(0),
            get_nums: AtomicU64::new(0),
            put_total_yesterday_morning: AtomicU64::new(0),
            put_total_today_morning: AtomicU64::new(0),
            get_total_yesterday_morning: AtomicU64::new(0),
            get_total_today_morning: AtomicU64::new(0),
            recorded_day: AtomicI64::new(now_ms.div_euclid(DAY_MS)),
        }
    }

    /// Java `incBrokerPutNums(topic, n)`: `messages` stored in `topic`.
    pub fn inc_put(&self, topic: &str, messages: u64) {
        if !is_system_topic(topic) {
            self.put_nums.fetch_add(messages, Ordering::Relaxed);
        }
    }

    /// Java `incBrokerGetNums(topic, n)`: `messages` returned by a pull of `topic`.
    pub fn inc_get(&self, topic: &str, messages: u64) {
        if !is_system_topic(topic) {
            self.get_nums.fetch_add(messages, Ordering::Relaxed);
        }
    }

    /// Java `BrokerStats.record`, run when the day changed since the last snapshot: today's
    /// morning becomes yesterday's, the totals now become today's morning.
    pub fn record_if_new_day(&self, now_ms: i64) {
        let day = now_ms.div_euclid(DAY_MS);
        if self.recorded_day.swap(day, Ordering::Relaxed) == day {
            return;
        }
        let shift = |yesterday: &AtomicU64, today: &AtomicU64, now: &AtomicU64| {
            yesterday.store(today.load(Ordering::Relaxed), Ordering::Relaxed);
            today.store(now.load(Ordering::Relaxed), Ordering::Relaxed);
        };
        shift(
            &self.put_total_yesterday_morning,
            &self.put_total_today_morning,
            &self.put_nums,
        );
        shift(
            &self.get_total_yesterday_morning,
            &self.get_total_today_morning,
            &self.get_nums,
        );
        tracing::info!(
            put = self.put_total_today_morning.load(Ordering::Relaxed)
                - self.put_total_yesterday_morning.load(Ordering::Relaxed),
            get = self.get_total_today_morning.load(Ordering::Relaxed)
                - self.get_total_yesterday_morning.load(Ordering::Relaxed),
            "yesterday's message totals"
        );
    }

    pub fn totals(&self) -> BrokerTotals {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        BrokerTotals {
            put_total_yesterday_morning: load(&self.put_total_yesterday_morning),
            put_total_today_morning: load(&self.put_total_today_morning),
            put_total_today_now: load(&self.put_nums),
            get_total_yesterday_morning: load(&self.get_total_yesterday_morning),
            get_total_today_morning: load(&self.get_total_today_morning),
            get_total_today_now: load(&self.get_nums),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_topics_are_left_out_and_midnights_shift_the_snapshots() {
        let day0 = 20_000 * DAY_MS + 5;
        let s = BrokerStats::new(day0);
        s.inc_put("T", 3);
        s.inc_put("SCHEDULE_TOPIC_XXXX", 10);
        s.inc_get("T", 2);
        s.inc_get("rmq_sys_x", 10);
        s.record_if_new_day(day0 + 1000);
        let t = s.totals();
        assert_eq!((t.put_total_today_now, t.get_total_today_now), (3, 2));
        assert_eq!(
            (t.put_total_today_morning, t.get_total_today_morning),
            (0, 0)
        );
        s.record_if_new_day(day0 + DAY_MS);
        s.inc_put("T", 4);
        s.record_if_new_day(day0 + 2 * DAY_MS);
        let t = s.totals();
        assert_eq!(t.put_total_yesterday_morning, 3);
        assert_eq!(t.put_total_today_morning, 7);
        assert_eq!(t.put_total_today_now, 7);
        assert_eq!(t.get_total_yesterday_morning, 2);
    }
}
