//! Helpers shared by the internal bench targets (`cargo bench --bench store|longpoll|offsets`):
//! environment knobs, repeat statistics, Markdown tables, machine facts, RSS and CPU time.
//!
//! Every bench measures the variants it compares side by side in one process, interleaved
//! (A, B, A, B, ...), and reports the median and the best of the repeats, because the machine
//! it runs on is shared and noisy; ratios of medians are the figures to quote.
#![allow(dead_code)]

use std::fmt::Write as _;
use std::time::Duration;

/// Repeats of every measurement (`RINGMQ_BENCH_REPEATS`).
pub const REPEATS_DEFAULT: usize = 3;

/// Reads a numeric environment knob, falling back to `default` when unset; a set but unparsable
/// value is a usage error and stops the bench with a message naming the variable.
pub fn env_num<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Err(_) => default,
        Ok(text) => text
            .trim()
            .parse()
            .unwrap_or_else(|_| usage_error(name, &text)),
    }
}

fn usage_error(name: &str, text: &str) -> ! {
    eprintln!("{name}={text:?} is not a number");
    std::process::exit(2)
}

/// `RINGMQ_BENCH_REPEATS`, at least 1.
pub fn repeats() -> usize {
    env_num::<usize>("RINGMQ_BENCH_REPEATS", REPEATS_DEFAULT).max(1)
}

/// Length of one timed run: `default_s` × `RINGMQ_BENCH_SCALE` (default 1).
pub fn run_duration(default_s: f64) -> Duration {
    Duration::from_secs_f64((default_s * env_num("RINGMQ_BENCH_SCALE", 1.0)).max(0.01))
}

/// Median of the samples (mean of the middle two for an even count).
pub fn median(samples: &[f64]) -> f64 {
    assert!(!samples.is_empty(), "median of no samples");
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

pub fn max(samples: &[f64]) -> f64 {
    samples.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

pub fn min(samples: &[f64]) -> f64 {
    samples.iter().copied().fold(f64::INFINITY, f64::min)
}

/// A Markdown table printed to stdout.
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: &[&str]) -> Self {
        Table {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        assert_eq!(cells.len(), self.headers.len(), "row width");
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
        out.push_str(&line(&self.headers));
        let sep: Vec<String> = self.headers.iter().map(|_| "---".to_string()).collect();
        out.push_str(&line(&sep));
        for r in &self.rows {
            out.push_str(&line(r));
        }
        out
    }

    pub fn print(&self) {
        println!("{}", self.render());
    }
}

/// Formats a rate with thousands grouping: 1234567.8 → "1,234,568".
pub fn grouped(value: f64) -> String {
    let v = value.round() as i128;
    let digits = v.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if v < 0 {
        format!("-{out}")
    } else {
        out
    }
}

/// Facts about the machine, printed above the tables.
pub fn machine_facts() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map_or("unknown".to_string(), |m| m.trim().to_string());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem = meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .map_or("unknown".to_string(), |l| {
            l.trim_start_matches("MemTotal:").trim().to_string()
        });
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_or("unknown".to_string(), |k| k.trim().to_string());
    let load = std::fs::read_to_string("/proc/loadavg").map_or("unknown".to_string(), |l| {
        l.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    });
    let mut out = String::new();
    let _ = write!(
        out,
        "machine: {cores} cores ({model}), {mem} RAM, Linux {kernel}, load average at start {load}"
    );
    out
}

/// Resident set size of this process from `/proc/self/statm` (second field, in pages).
pub fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf only reads a configuration value.
    let page_size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * u64::try_from(page_size).unwrap_or(4096)
}

/// CPU time (user + system) of the calling thread, in seconds.
pub fn thread_cpu_s() -> f64 {
    clock_s(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time (user + system) of the whole process, in seconds.
pub fn process_cpu_s() -> f64 {
    clock_s(libc::CLOCK_PROCESS_CPUTIME_ID)
}

fn clock_s(clock: libc::clockid_t) -> f64 {
    let mut time = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only into `time`.
    let rc = unsafe { libc::clock_gettime(clock, &mut time) };
    assert_eq!(rc, 0, "clock_gettime({clock}) failed");
    time.tv_sec as f64 + time.tv_nsec as f64 * 1e-9
}

/// A tiny deterministic PRNG (xorshift64), so runs are repeatable and cost nothing to draw.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}
