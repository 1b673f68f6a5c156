//! A latency histogram of fixed buckets, recorded with atomics only: `observe` is three relaxed
//! `fetch_add`s and never locks, so it can sit on the request path. (prometheus-client's own
//! `Histogram` takes a lock per observation; its encoder still writes ours, see
//! `exposition.rs`.)

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the latency buckets, in microseconds (50 µs to 10 s); slower observations
/// land in the `+Inf` bucket.
pub const LATENCY_BUCKET_BOUNDS_US: [u64; 16] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 10_000_000,
];

const BUCKETS: usize = LATENCY_BUCKET_BOUNDS_US.len() + 1;

/// Counts of observations per bucket, their sum and count.
#[derive(Debug)]
pub struct Histogram {
    buckets: [AtomicU64; BUCKETS],
    sum_us: AtomicU64,
}

/// A histogram as read at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistogramSnapshot {
    /// `(upper bound in seconds, observations in this bucket alone)`, the last bound infinite.
    pub buckets: Vec<(f64, u64)>,
    pub sum_seconds: f64,
    pub count: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram::new()
    }
}

impl Histogram {
    pub const fn new() -> Self {
        Histogram {
            buckets: [const { AtomicU64::new(0) }; BUCKETS],
            sum_us: AtomicU64::new(0),
        }
    }

    /// Records one observation.
    pub fn observe(&self, elapsed: Duration) {
        let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        let index = LATENCY_BUCKET_BOUNDS_US.partition_point(|&bound| bound < us);
        self.buckets[index].fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
    }

    /// Reads the buckets. The count is the sum of the buckets read, so the two always agree.
    pub fn snapshot(&self) -> HistogramSnapshot {
        let buckets: Vec<(f64, u64)> = self
            .buckets
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let bound = LATENCY_BUCKET_BOUNDS_US
                    .get(i)
                    .map_or(f64::INFINITY, |&us| us as f64 / 1e6);
                (bound, b.load(Ordering::Relaxed))
            })
            .collect();
        HistogramSnapshot {
            count: buckets.iter().map(|(_, n)| n).sum(),
            sum_seconds: self.sum_us.load(Ordering::Relaxed) as f64 / 1e6,
            buckets,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_the_first_bucket_whose_bound_is_not_below_them() {
        let h = Histogram::new();
        h.observe(Duration::from_micros(50));
        h.observe(Duration::from_micros(51));
        h.observe(Duration::from_secs(60));
        let s = h.snapshot();
        assert_eq!(s.count, 3);
        assert_eq!(s.buckets.len(), LATENCY_BUCKET_BOUNDS_US.len() + 1);
        assert_eq!(s.buckets[0], (50e-6, 1));
        assert_eq!(s.buckets[1], (100e-6, 1));
        assert_eq!(s.buckets[BUCKETS - 1], (f64::INFINITY, 1));
        assert!((s.sum_seconds - (60.0 + 101e-6)).abs() < 1e-9);
    }
}
