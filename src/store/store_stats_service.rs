//! The store's own counters (Java `StoreStatsService`): puts, gets, their latencies, and the
//! per-second samples the TPS figures of GET_BROKER_RUNTIME_INFO come from.
//!
//! The request path only adds to atomics (no lock, no allocation). A sampling thread takes one
//! snapshot a second into a ring of at most [`SAMPLES_MAX`] (Java keeps 601: ten minutes and
//! one); readers of the TPS figures lock the ring, the request path never does. Every minute
//! the latency histograms move to the "last minute" slot that the runtime info reports, as
//! Java's `printTps` does with `lastPutMessageDistributeTime` and `lastBuckets`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Samples kept: ten minutes of one a second, plus the one they start from (Java
/// `MAX_RECORDS_OF_SAMPLING + 1`).
pub const SAMPLES_MAX: usize = 601;
/// How often the sampling thread snapshots the counters (Java `FREQUENCY_OF_SAMPLING`).
pub const SAMPLING_INTERVAL_MS: u64 = 1_000;
/// How often the latency histograms roll over (Java `printTPSInterval`, one minute).
pub const HISTOGRAM_WINDOW_MS: i64 = 60_000;

/// Java `PUT_MESSAGE_ENTIRE_TIME_MAX_DESC`: the thirteen put-latency ranges.
const DISTRIBUTE_DESC: [&str; 13] = [
    "[<=0ms]",
    "[0~10ms]",
    "[10~50ms]",
    "[50~100ms]",
    "[100~200ms]",
    "[200~500ms]",
    "[500ms~1s]",
    "[1~2s]",
    "[2~3s]",
    "[3~4s]",
    "[4~5s]",
    "[5~10s]",
    "[10s~]",
];
/// Upper bounds (ms) of the thirteen ranges but the last.
const DISTRIBUTE_BOUNDS_MS: [u64; 12] = [
    1, 10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10000,
];

/// Java `PUT_MESSAGE_ENTIRE_TIME_BUCKETS`: (step ms, steps) of the percentile histogram.
const PERCENTILE_STEPS: [(u64, u64); 7] = [
    (1, 20),
    (2, 15),
    (5, 10),
    (10, 10),
    (50, 6),
    (100, 5),
    (1000, 9),
];
/// Buckets of the percentile histogram: the steps plus one unbounded.
const PERCENTILE_BUCKETS: usize = 20 + 15 + 10 + 10 + 6 + 5 + 9 + 1;

/// Upper bound (inclusive, ms) of each percentile bucket; the last is unbounded.
fn percentile_bounds() -> [u64; PERCENTILE_BUCKETS] {
    let mut bounds = [u64::MAX; PERCENTILE_BUCKETS];
    let mut at = 0;
    let mut i = 0;
    for (step, steps) in PERCENTILE_STEPS {
        for _ in 0..steps {
            at += step;
            bounds[i] = at;
            i += 1;
        }
    }
    bounds
}

/// One snapshot of the cumulative counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Sample {
    timestamp_ms: i64,
    put: u64,
    get_found: u64,
    get_miss: u64,
    transferred: u64,
}

/// Two slots of a histogram: the minute being filled and the last whole one.
struct Histogram<const N: usize> {
    slots: [[AtomicU64; N]; 2],
    current: AtomicUsize,
}

impl<const N: usize> Histogram<N> {
    fn new() -> Self {
        Histogram {
            slots: [
                std::array::from_fn(|_| AtomicU64::new(0)),
                std::array::from_fn(|_| AtomicU64::new(0)),
            ],
            current: AtomicUsize::new(0),
        }
    }

    fn add(&self, bucket: usize) {
        let slot = self.current.load(Ordering::Relaxed);
        self.slots[slot][bucket].fetch_add(1, Ordering::Relaxed);
    }

    /// The current minute becomes the last one; the new current starts at zero.
    fn roll(&self) {
        let next = 1 - self.current.load(Ordering::Relaxed);
        for c in &self.slots[next] {
            c.store(0, Ordering::Relaxed);
        }
        self.current.store(next, Ordering::Relaxed);
    }

    fn last(&self) -> [u64; N] {
        let last = 1 - self.current.load(Ordering::Relaxed);
        std::array::from_fn(|i| self.slots[last][i].load(Ordering::Relaxed))
    }
}

/// The store's counters. Shared by the store's put and get paths and the sampling thread.
pub struct StoreStatsService {
    boot_timestamp_ms: i64,
    put_message_times_total: AtomicU64,
    put_message_size_total: AtomicU64,
    put_message_failed_times: AtomicU64,
    get_message_times_total_found: AtomicU64,
    get_message_times_total_miss: AtomicU64,
    get_message_transferred_msg_count: AtomicU64,
    put_message_entire_time_max_ms: AtomicU64,
    get_message_entire_time_max_ms: AtomicU64,
    /// Since when the writer lock is held (ms), 0 when it is free (Java `beginTimeInLock`).
    begin_time_in_lock_ms: AtomicI64,
    distribute: Histogram<13>,
    percentiles: Histogram<PERCENTILE_BUCKETS>,
    percentile_bounds: [u64; PERCENTILE_BUCKETS],
    samples: Mutex<VecDeque<Sample>>,
    last_roll_ms: AtomicI64,
}

impl StoreStatsService {
    pub fn new(boot_timestamp_ms: i64) -> Self {
        StoreStatsService {
            boot_timestamp_ms,
            put_message_times_total: AtomicU64::new(0),
            put_message_size_total: AtomicU64::new(0),
            put_message_failed_times: AtomicU64::new(0),
            get_message_times_total_found: AtomicU64::new(0),
            get_message_times_total_miss: AtomicU64::new(0),
            get_message_transferred_msg_count: AtomicU64::new(0),
            put_message_entire_time_max_ms: AtomicU64::new(0),
            get_message_entire_time_max_ms: AtomicU64::new(0),
            begin_time_in_lock_ms: AtomicI64::new(0),
            distribute: Histogram::new(),
            percentiles: Histogram::new(),
            percentile_bounds: percentile_bounds(),
            samples: Mutex::new(VecDeque::with_capacity(SAMPLES_MAX)),
            last_roll_ms: AtomicI64::new(boot_timestamp_ms),
        }
    }

    /// A put of `messages` records and `bytes` bytes was stored, in `elapsed_ms`.
    pub fn on_put_ok(&self, messages: u64, bytes: u64, elapsed_ms: u64) {
        self.put_message_times_total
            .fetch_add(messages, Ordering::Relaxed);
        self.put_message_size_total
            .fetch_add(bytes, Ordering::Relaxed);
        self.on_put_time(elapsed_ms);
    }

    /// A put failed (Java `putMessageFailedTimes`), after `elapsed_ms`.
    pub fn on_put_failed(&self, elapsed_ms: u64) {
        self.put_message_failed_times
            .fetch_add(1, Ordering::Relaxed);
        self.on_put_time(elapsed_ms);
    }

    /// Java `setPutMessageEntireTimeMax`: the put's range, its percentile bucket and the max.
    fn on_put_time(&self, elapsed_ms: u64) {
        let range = if elapsed_ms == 0 {
            0
        } else {
            DISTRIBUTE_BOUNDS_MS
                .iter()
                .position(|bound| elapsed_ms < *bound)
                .unwrap_or(DISTRIBUTE_BOUNDS_MS.len())
        };
        self.distribute.add(range);
        let bucket = self
            .percentile_bounds
            .iter()
            .position(|bound| elapsed_ms <= *bound)
            .unwrap_or(PERCENTILE_BUCKETS - 1);
        self.percentiles.add(bucket);
        self.put_message_entire_time_max_ms
            .fetch_max(elapsed_ms, Ordering::Relaxed);
    }

    /// A pull looked up the store: `found` or not, `messages` returned, in `elapsed_ms`.
    pub fn on_get(&self, found: bool, messages: u64, elapsed_ms: u64) {
        let counter = if found {
            &self.get_message_times_total_found
        } else {
            &self.get_message_times_total_miss
        };
        counter.fetch_add(1, Ordering::Relaxed);
        self.get_message_transferred_msg_count
            .fetch_add(messages, Ordering::Relaxed);
        self.get_message_entire_time_max_ms
            .fetch_max(elapsed_ms, Ordering::Relaxed);
    }

    /// The writer lock was taken at `now_ms` (`Some`) or released (`None`).
    pub fn set_in_lock(&self, since_ms: Option<i64>) {
        self.begin_time_in_lock_ms
            .store(since_ms.unwrap_or(0), Ordering::Relaxed);
    }

    /// Java `lockTimeMills`: how long the writer lock has been held, 0 when it is free.
    pub fn lock_time_ms(&self, now_ms: i64) -> i64 {
        match self.begin_time_in_lock_ms.load(Ordering::Relaxed) {
            0 => 0,
            begin => (now_ms - begin).max(0),
        }
    }

    pub fn put_message_times_total(&self) -> u64 {
        self.put_message_times_total.load(Ordering::Relaxed)
    }

    pub fn get_message_transferred_msg_count(&self) -> u64 {
        self.get_message_transferred_msg_count
            .load(Ordering::Relaxed)
    }

    pub fn get_message_times_total_found(&self) -> u64 {
        self.get_message_times_total_found.load(Ordering::Relaxed)
    }

    pub fn get_message_times_total_miss(&self) -> u64 {
        self.get_message_times_total_miss.load(Ordering::Relaxed)
    }

    /// The sampling thread's tick: one snapshot, and the histograms' roll once a minute.
    pub fn sample(&self, now_ms: i64) {
        let sample = Sample {
            timestamp_ms: now_ms,
            put: self.put_message_times_total(),
            get_found: self.get_message_times_total_found(),
            get_miss: self.get_message_times_total_miss(),
            transferred: self.get_message_transferred_msg_count(),
        };
        {
            let mut samples = self.samples.lock().unwrap_or_else(|p| p.into_inner());
            samples.push_back(sample);
            while samples.len() > SAMPLES_MAX {
                samples.pop_front();
            }
        }
        if now_ms - self.last_roll_ms.load(Ordering::Relaxed) >= HISTOGRAM_WINDOW_MS {
            self.last_roll_ms.store(now_ms, Ordering::Relaxed);
            self.distribute.roll();
            self.percentiles.roll();
        }
    }

    /// Java `StoreStatsService.getRuntimeInfo`: its keys and its value formats.
    pub fn runtime_info(&self, now_ms: i64) -> Vec<(&'static str, String)> {
        let put_total = self.put_message_times_total();
        let size_total = self.put_message_size_total.load(Ordering::Relaxed);
        // Java reports a total of 0 as 1 (its guard against dividing by zero leaks into the
        // value), and averages over that.
        let times_total = put_total.max(1);
        let tps = |pick: fn(&Sample) -> u64| self.tps_text(pick);
        vec![
            ("bootTimestamp", self.boot_timestamp_ms.to_string()),
            ("runtime", format_runtime(now_ms - self.boot_timestamp_ms)),
            (
                "putMessageEntireTimeMax",
                self.put_message_entire_time_max_ms
                    .load(Ordering::Relaxed)
                    .to_string(),
            ),
            ("putMessageTimesTotal", times_total.to_string()),
            (
                "putMessageFailedTimes",
                self.put_message_failed_times
                    .load(Ordering::Relaxed)
                    .to_string(),
            ),
            ("putMessageSizeTotal", size_total.to_string()),
            ("putMessageDistributeTime", self.distribute_text()),
            (
                "putMessageAverageSize",
                java_double(size_total as f64 / times_total as f64),
            ),
            // Records are dispatched to the ConsumeQueue inside the append: nothing waits in
            // a dispatch buffer.
            ("dispatchMaxBuffer", "0".to_string()),
            (
                "getMessageEntireTimeMax",
                self.get_message_entire_time_max_ms
                    .load(Ordering::Relaxed)
                    .to_string(),
            ),
            ("putTps", tps(|s| s.put)),
            ("getFoundTps", tps(|s| s.get_found)),
            ("getMissTps", tps(|s| s.get_miss)),
            ("getTotalTps", self.total_tps_text()),
            ("getTransferredTps", tps(|s| s.transferred)),
            // Java 4.x's spelling, which its mqadmin `clusterList` reads.
            ("getTransferedTps", tps(|s| s.transferred)),
            ("putLatency99", format!("{:.2}", self.put_latency_px(0.99))),
            (
                "putLatency999",
                format!("{:.2}", self.put_latency_px(0.999)),
            ),
        ]
    }

    /// The rate over the last `seconds` samples, or `None` with fewer samples (Java's empty
    /// string).
    fn tps(samples: &VecDeque<Sample>, seconds: usize, pick: fn(&Sample) -> u64) -> Option<f64> {
        if samples.len() <= seconds {
            return None;
        }
        let last = samples.back()?;
        let first = samples.get(samples.len() - 1 - seconds)?;
        let dt_ms = (last.timestamp_ms - first.timestamp_ms) as f64;
        let count = pick(last).saturating_sub(pick(first)) as f64;
        // Java divides by the time as a double: 0 ms gives NaN or Infinity, as there.
        Some(count / dt_ms * 1000.0)
    }

    /// Java's "10s 1min 10min" text: each rate, or nothing yet, joined by spaces.
    fn tps_text(&self, pick: fn(&Sample) -> u64) -> String {
        let samples = self.samples.lock().unwrap_or_else(|p| p.into_inner());
        [10, 60, 600]
            .map(|s| {
                Self::tps(&samples, s, pick)
                    .map(java_double)
                    .unwrap_or_default()
            })
            .join(" ")
    }

    /// Java `getGetTotalTps`: found + miss, 0.0 for a window not yet sampled.
    fn total_tps_text(&self) -> String {
        let samples = self.samples.lock().unwrap_or_else(|p| p.into_inner());
        [10, 60, 600]
            .map(|s| {
                let found = Self::tps(&samples, s, |x| x.get_found).unwrap_or(0.0);
                let miss = Self::tps(&samples, s, |x| x.get_miss).unwrap_or(0.0);
                java_double(found + miss)
            })
            .join(" ")
    }

    /// Java `putMessageDistributeTimeToString` over the last whole minute.
    fn distribute_text(&self) -> String {
        let last = self.distribute.last();
        DISTRIBUTE_DESC
            .iter()
            .zip(last)
            .map(|(desc, n)| format!("{desc}:{n} "))
            .collect()
    }

    /// Java `findPutMessageEntireTimePX` over the last whole minute.
    fn put_latency_px(&self, px: f64) -> f64 {
        percentile(&self.percentile_bounds, &self.percentiles.last(), px)
    }
}

/// Java `findPutMessageEntireTimePX`: the latency at fraction `px` of the puts, interpolated
/// inside its bucket.
fn percentile(bounds: &[u64], counts: &[u64], px: f64) -> f64 {
    let total: u64 = counts.iter().sum();
    let px_index = (total as f64 * px) as u64;
    let mut passed = 0;
    for (i, (&bound, &count)) in bounds.iter().zip(counts).enumerate() {
        if px_index <= passed + count {
            let relative = (px_index - passed) as f64;
            let lower = if i == 0 { 0.0 } else { bounds[i - 1] as f64 };
            return if count == 0 {
                lower
            } else {
                lower + (bound as f64 - lower) * relative / count as f64
            };
        }
        passed += count;
    }
    0.0
}

/// Java `getFormatRuntime`.
fn format_runtime(elapsed_ms: i64) -> String {
    let s = elapsed_ms.max(0) / 1000;
    format!(
        "[ {} days, {} hours, {} minutes, {} seconds ]",
        s / 86_400,
        s % 86_400 / 3_600,
        s % 3_600 / 60,
        s % 60
    )
}

/// Java `Double.toString`: shortest round-trip digits, at least one fractional digit, and
/// scientific notation (`1.0E7`, `5.0E-4`) outside [10^-3, 10^7).
pub fn java_double(v: f64) -> String {
    if v.is_nan() {
        return "NaN".to_string();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.to_string();
    }
    let a = v.abs();
    if v == 0.0 || (1e-3..1e7).contains(&a) {
        let text = format!("{v}");
        return if text.contains('.') {
            text
        } else {
            format!("{text}.0")
        };
    }
    let text = format!("{v:e}");
    let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
    if mantissa.contains('.') {
        format!("{mantissa}E{exponent}")
    } else {
        format!("{mantissa}.0E{exponent}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_print_as_java_prints_them() {
        assert_eq!(java_double(0.0), "0.0");
        assert_eq!(java_double(12.0), "12.0");
        assert_eq!(java_double(12.5), "12.5");
        assert_eq!(java_double(0.1), "0.1");
        assert_eq!(java_double(1e7), "1.0E7");
        assert_eq!(java_double(0.0005), "5.0E-4");
        assert_eq!(java_double(123456.789), "123456.789");
        assert_eq!(java_double(f64::NAN), "NaN");
    }

    #[test]
    fn percentile_buckets_are_javas() {
        let b = percentile_bounds();
        assert_eq!(&b[..3], &[1, 2, 3]);
        assert_eq!(b[19], 20);
        assert_eq!(b[20], 22);
        assert_eq!(b[34], 50);
        assert_eq!(b[PERCENTILE_BUCKETS - 2], 10_000);
        assert_eq!(b[PERCENTILE_BUCKETS - 1], u64::MAX);
        let mut counts = [0u64; PERCENTILE_BUCKETS];
        assert_eq!(percentile(&b, &counts, 0.99), 0.0);
        // 100 puts of 5 ms (bucket "<= 5"): the 99th lies 99 % into (4, 5].
        counts[4] = 100;
        assert!((percentile(&b, &counts, 0.99) - 4.99).abs() < 1e-9);
    }

    #[test]
    fn rates_come_from_the_samples_and_wait_for_enough_of_them() {
        let s = StoreStatsService::new(0);
        for second in 0..=10 {
            s.on_put_ok(5, 500, 0);
            s.on_get(second % 2 == 0, 3, 1);
            s.sample(second * 1000);
        }
        let info: std::collections::HashMap<_, _> = s.runtime_info(10_000).into_iter().collect();
        // 10 samples after the first: 50 puts in 10 s; the 1 min and 10 min windows are empty.
        assert_eq!(info["putTps"], "5.0  ");
        assert_eq!(info["getTransferredTps"], "3.0  ");
        assert_eq!(info["getTransferedTps"], info["getTransferredTps"]);
        assert_eq!(info["getTotalTps"], "1.0 0.0 0.0");
        assert_eq!(info["putMessageTimesTotal"], "55");
        assert_eq!(info["putMessageSizeTotal"], "5500");
        assert_eq!(info["putMessageAverageSize"], "100.0");
        assert_eq!(
            info["runtime"],
            "[ 0 days, 0 hours, 0 minutes, 10 seconds ]"
        );
    }

    #[test]
    fn an_empty_store_reports_javas_values() {
        let s = StoreStatsService::new(0);
        let info: std::collections::HashMap<_, _> = s.runtime_info(0).into_iter().collect();
        assert_eq!(info["putMessageTimesTotal"], "1");
        assert_eq!(info["putTps"], "  ");
        assert_eq!(info["getTotalTps"], "0.0 0.0 0.0");
        assert_eq!(info["putLatency99"], "0.00");
        assert!(info["putMessageDistributeTime"].starts_with("[<=0ms]:0 [0~10ms]:0 "));
    }

    #[test]
    fn latencies_land_in_javas_ranges_and_roll_each_minute() {
        let s = StoreStatsService::new(0);
        for ms in [0, 5, 10, 600, 20_000] {
            s.on_put_ok(1, 1, ms);
        }
        s.sample(HISTOGRAM_WINDOW_MS);
        let text = s.distribute_text();
        assert!(text.contains("[<=0ms]:1 [0~10ms]:1 [10~50ms]:1 "), "{text}");
        assert!(text.contains("[500ms~1s]:1 "), "{text}");
        assert!(text.ends_with("[10s~]:1 "), "{text}");
        let info: std::collections::HashMap<_, _> = s.runtime_info(0).into_iter().collect();
        assert_eq!(info["putMessageEntireTimeMax"], "20000");
    }
}
