//! Measurement: per-thread HdrHistograms merged on read (percentiles are never averaged),
//! message/byte/failure counters, the once-a-second progress line and timeline, and the
//! fixed-rate pacer that measures latency from the *intended* send time (no coordinated
//! omission: a stalled broker delays the schedule, and every late send is charged for it).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;

/// Highest latency a histogram tracks (larger values are clamped): one hour in µs.
pub const LATENCY_MAX_US: u64 = 3_600_000_000;
/// HdrHistogram precision: 3 significant digits (0.1 % value error).
pub const LATENCY_SIGFIG: u8 = 3;
/// Distinct failure reasons kept for the report.
pub const FAILURE_SAMPLES_MAX: usize = 8;
/// Longest single sleep of the pacer, so a stop request is seen quickly.
pub const PACER_SLEEP_SLICE: Duration = Duration::from_millis(50);

/// Microseconds since the Unix epoch (wall clock, shared by producer and consumer processes).
pub fn epoch_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// An empty latency histogram (µs, 1 µs .. 1 h, 3 digits).
pub fn new_histogram() -> Histogram<u64> {
    // The bounds are constants that satisfy HdrHistogram's rules (low >= 1, high >= 2 * low,
    // sigfig <= 5), so construction cannot fail.
    Histogram::new_with_bounds(1, LATENCY_MAX_US, LATENCY_SIGFIG)
        .expect("constant histogram bounds are valid")
}

/// One thread's (or one connection's) histogram. Uncontended except when the progress line
/// merges it, once a second.
pub struct Recorder {
    histogram: Mutex<Histogram<u64>>,
}

impl Recorder {
    fn new() -> Self {
        Recorder {
            histogram: Mutex::new(new_histogram()),
        }
    }

    /// Records one latency in µs (0 counts as 1 µs; above the range is clamped).
    pub fn record_us(&self, latency_us: u64) {
        let mut histogram = self.histogram.lock().unwrap_or_else(|e| e.into_inner());
        histogram.saturating_record(latency_us.clamp(1, LATENCY_MAX_US));
    }

    /// Records the time from `since` to now.
    pub fn record_since(&self, since: Instant) {
        self.record_us(u64::try_from(since.elapsed().as_micros()).unwrap_or(u64::MAX));
    }

    fn add_into(&self, total: &mut Histogram<u64>) {
        let histogram = self.histogram.lock().unwrap_or_else(|e| e.into_inner());
        // Same bounds on both sides, so adding cannot overflow the range.
        let _ = total.add(&*histogram);
    }
}

/// Counters and latency recorders of one measured stream ("send", "e2e", "pull").
pub struct Meter {
    pub name: &'static str,
    messages: AtomicU64,
    bytes: AtomicU64,
    failures: AtomicU64,
    recorders: Mutex<Vec<Arc<Recorder>>>,
    failure_samples: Mutex<Vec<String>>,
}

/// A point-in-time copy of a meter's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub messages: u64,
    pub bytes: u64,
    pub failures: u64,
}

impl Meter {
    pub fn new(name: &'static str) -> Arc<Self> {
        Arc::new(Meter {
            name,
            messages: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            recorders: Mutex::new(Vec::new()),
            failure_samples: Mutex::new(Vec::new()),
        })
    }

    /// A new recorder for one thread or connection, merged into this meter's results.
    pub fn recorder(&self) -> Arc<Recorder> {
        let recorder = Arc::new(Recorder::new());
        self.recorders
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::clone(&recorder));
        recorder
    }

    pub fn add(&self, messages: u64, bytes: u64) {
        self.messages.fetch_add(messages, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Counts a failure; keeps the first few distinct reasons.
    pub fn fail(&self, reason: impl FnOnce() -> String) {
        let before = self.failures.fetch_add(1, Ordering::Relaxed);
        if before < 1000 {
            let reason = reason();
            let mut samples = self
                .failure_samples
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if samples.len() < FAILURE_SAMPLES_MAX && !samples.contains(&reason) {
                samples.push(reason);
            }
        }
    }

    pub fn counts(&self) -> Counts {
        Counts {
            messages: self.messages.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
        }
    }

    /// All recorders merged (HdrHistogram addition: exact, no averaging of percentiles).
    pub fn merged(&self) -> Histogram<u64> {
        let mut total = new_histogram();
        let recorders = self.recorders.lock().unwrap_or_else(|e| e.into_inner());
        for recorder in recorders.iter() {
            recorder.add_into(&mut total);
        }
        total
    }

    pub fn failure_samples(&self) -> Vec<String> {
        self.failure_samples
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// One meter's figures over one progress interval.
#[derive(Debug, Clone, PartialEq)]
pub struct MeterPoint {
    pub name: &'static str,
    pub messages_per_s: f64,
    pub mb_per_s: f64,
    pub failures: u64,
    pub p99_us: u64,
}

/// One progress line.
#[derive(Debug, Clone, PartialEq)]
pub struct TimelinePoint {
    pub t_s: f64,
    pub meters: Vec<MeterPoint>,
}

/// Prints a progress line every second and keeps the timeline for the report.
pub struct Progress {
    meters: Vec<Arc<Meter>>,
    start: Instant,
    last: Instant,
    last_counts: Vec<Counts>,
    print: bool,
    pub timeline: Vec<TimelinePoint>,
}

/// 1 MB = 10^6 bytes for MB/s, like most broker benchmarks.
pub const BYTES_PER_MB: f64 = 1_000_000.0;

impl Progress {
    pub fn new(meters: Vec<Arc<Meter>>, print: bool) -> Self {
        let now = Instant::now();
        let last_counts = meters.iter().map(|m| m.counts()).collect();
        Progress {
            meters,
            start: now,
            last: now,
            last_counts,
            print,
            timeline: Vec::new(),
        }
    }

    /// Restarts the clock (after a setup phase).
    pub fn reset(&mut self) {
        let now = Instant::now();
        self.start = now;
        self.last = now;
        self.last_counts = self.meters.iter().map(|m| m.counts()).collect();
        self.timeline.clear();
    }

    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// Takes one sample (and prints it).
    pub fn tick(&mut self) {
        let now = Instant::now();
        let dt_s = now.duration_since(self.last).as_secs_f64().max(1e-9);
        self.last = now;
        let mut points = Vec::with_capacity(self.meters.len());
        for (meter, last) in self.meters.iter().zip(self.last_counts.iter_mut()) {
            let counts = meter.counts();
            let p99_us = meter.merged().value_at_quantile(0.99);
            points.push(MeterPoint {
                name: meter.name,
                messages_per_s: (counts.messages - last.messages) as f64 / dt_s,
                mb_per_s: (counts.bytes - last.bytes) as f64 / dt_s / BYTES_PER_MB,
                failures: counts.failures,
                p99_us,
            });
            *last = counts;
        }
        let point = TimelinePoint {
            t_s: now.duration_since(self.start).as_secs_f64(),
            meters: points,
        };
        if self.print {
            eprintln!("{}", format_point(&point));
        }
        self.timeline.push(point);
    }
}

/// `[  3.0s] send 10002 msg/s 9.77 MB/s fail 0 p99 1.20 ms | e2e ...`
pub fn format_point(point: &TimelinePoint) -> String {
    let parts: Vec<String> = point
        .meters
        .iter()
        .map(|m| {
            format!(
                "{} {:.0} msg/s {:.2} MB/s fail {} p99 {}",
                m.name,
                m.messages_per_s,
                m.mb_per_s,
                m.failures,
                format_us(m.p99_us)
            )
        })
        .collect();
    format!("[{:>6.1}s] {}", point.t_s, parts.join(" | "))
}

/// A latency for humans: µs below 1 ms, else ms.
pub fn format_us(us: u64) -> String {
    if us < 1000 {
        format!("{us} µs")
    } else {
        format!("{:.2} ms", us as f64 / 1000.0)
    }
}

/// A send schedule. With a rate, send `i` of this pacer is due at
/// `start + (i + phase) * interval`; the latency of that send is measured from that instant,
/// however late the send actually goes out. Without a rate every send is due "now".
#[derive(Debug, Clone)]
pub struct Pacer {
    start: Instant,
    start_epoch_us: i64,
    interval_s: f64,
    phase: f64,
    index: u64,
}

/// When a send was due.
#[derive(Debug, Clone, Copy)]
pub struct Due {
    pub at: Instant,
    /// `at` as µs since the epoch (stamped into the body for end-to-end latency).
    pub epoch_us: i64,
}

impl Pacer {
    /// `rate_per_s` = 0 means unpaced. `phase` in [0, 1) spreads several pacers sharing a rate.
    pub fn new(start: Instant, start_epoch_us: i64, rate_per_s: f64, phase: f64) -> Self {
        let interval_s = if rate_per_s > 0.0 {
            1.0 / rate_per_s
        } else {
            0.0
        };
        Pacer {
            start,
            start_epoch_us,
            interval_s,
            phase,
            index: 0,
        }
    }

    pub fn is_paced(&self) -> bool {
        self.interval_s > 0.0
    }

    /// When send `index` is due (paced only).
    pub fn due_at(&self, index: u64) -> Instant {
        self.start + Duration::from_secs_f64((index as f64 + self.phase) * self.interval_s)
    }

    fn due(&self, at: Instant) -> Due {
        let offset_us =
            i64::try_from(at.saturating_duration_since(self.start).as_micros()).unwrap_or(i64::MAX);
        Due {
            at,
            epoch_us: self.start_epoch_us.saturating_add(offset_us),
        }
    }

    /// The next send's due time; sleeps until then if it is in the future. Returns `None` if
    /// `stop` turned true while waiting.
    pub fn next(&mut self, stop: &dyn Fn() -> bool) -> Option<Due> {
        if !self.is_paced() {
            return Some(self.due(Instant::now()));
        }
        let at = self.due_at(self.index);
        self.index += 1;
        loop {
            let now = Instant::now();
            if now >= at {
                return Some(self.due(at));
            }
            if stop() {
                return None;
            }
            std::thread::sleep((at - now).min(PACER_SLEEP_SLICE));
        }
    }
}

/// The percentiles the report and summary print.
pub const REPORT_QUANTILES: [(&str, f64); 5] = [
    ("p50", 0.50),
    ("p90", 0.90),
    ("p99", 0.99),
    ("p99_9", 0.999),
    ("p99_99", 0.9999),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_histograms_equal_one_histogram_of_all_samples() {
        let meter = Meter::new("send");
        let mut reference = new_histogram();
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let recorder = meter.recorder();
                std::thread::spawn(move || {
                    // Very different distributions per thread: averaging their p99s would be
                    // far from the p99 of the union.
                    for i in 0..10_000u64 {
                        recorder.record_us(if t == 3 { 50_000 + i } else { 10 + i % 100 });
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        for t in 0..4u64 {
            for i in 0..10_000u64 {
                reference
                    .record(if t == 3 { 50_000 + i } else { 10 + i % 100 })
                    .expect("in range");
            }
        }
        let merged = meter.merged();
        assert_eq!(merged.len(), 40_000);
        for (_, q) in REPORT_QUANTILES {
            assert_eq!(merged.value_at_quantile(q), reference.value_at_quantile(q));
        }
        assert_eq!(merged.max(), reference.max());
        // p99 of the union lies in thread 3's range; the mean of per-thread p99s would not.
        assert!(merged.value_at_quantile(0.99) > 50_000);
    }

    #[test]
    fn out_of_range_values_are_clamped_not_lost() {
        let meter = Meter::new("x");
        let recorder = meter.recorder();
        recorder.record_us(0);
        recorder.record_us(u64::MAX);
        let merged = meter.merged();
        assert_eq!(merged.len(), 2);
        assert!(merged.max() >= LATENCY_MAX_US - LATENCY_MAX_US / 1000);
    }

    #[test]
    fn pacer_schedule_is_absolute() {
        let start = Instant::now();
        let pacer = Pacer::new(start, 1_000_000, 1000.0, 0.5);
        assert_eq!(pacer.due_at(0), start + Duration::from_micros(500));
        assert_eq!(pacer.due_at(10), start + Duration::from_micros(10_500));
        let due = pacer.due(pacer.due_at(10));
        assert_eq!(due.epoch_us, 1_010_500);
    }

    /// A stall in the middle of a fixed-rate run: measured from the intended send time, every
    /// send that had to wait behind the stall is charged; measured from the actual send only
    /// the stalled one is.
    #[test]
    fn fixed_rate_latency_counts_the_sends_delayed_by_a_stall() {
        let rate = 2000.0; // one send due every 500 µs
        let stall = Duration::from_millis(40);
        let mut pacer = Pacer::new(Instant::now(), epoch_us(), rate, 0.0);
        let intended = Meter::new("intended");
        let naive = Meter::new("naive");
        let (intended_rec, naive_rec) = (intended.recorder(), naive.recorder());
        for i in 0..200 {
            let due = pacer.next(&|| false).expect("not stopped");
            let sent = Instant::now();
            if i == 50 {
                std::thread::sleep(stall); // the "broker" stalls once
            }
            intended_rec.record_since(due.at);
            naive_rec.record_since(sent);
        }
        let slow = |m: &Meter| {
            let h = m.merged();
            h.count_between(10_000, LATENCY_MAX_US)
        };
        // 40 ms of stall at 500 µs per send: ~60 sends were due during it; at least those due
        // in its first 30 ms waited > 10 ms.
        assert!(
            slow(&intended) >= 40,
            "intended-time latency saw {}",
            slow(&intended)
        );
        assert!(slow(&naive) < slow(&intended) / 4, "naive {}", slow(&naive));
        assert!(intended.merged().max() >= 39_000);
    }

    #[test]
    fn unpaced_pacer_never_waits() {
        let mut pacer = Pacer::new(Instant::now(), 0, 0.0, 0.0);
        let t = Instant::now();
        for _ in 0..1000 {
            pacer.next(&|| false).expect("due");
        }
        assert!(t.elapsed() < Duration::from_millis(100));
        let mut paced = Pacer::new(Instant::now() + Duration::from_secs(3600), 0, 1.0, 0.0);
        assert!(
            paced.next(&|| true).is_none(),
            "stop is honoured while waiting"
        );
    }
}
