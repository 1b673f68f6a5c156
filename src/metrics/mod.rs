//! Metrics and the dashboard (`RINGMQ_METRICS_LISTEN`, default `127.0.0.1:5557`).
//!
//! - `registry`: [`BrokerMetrics`], the counters the broker records into on the request path:
//!   atomics only, per-topic counters behind an arc-swapped map, bounded label sets;
//! - `histogram`: the lock-free latency [`Histogram`] (the store records its flush latency into
//!   one too);
//! - `view`: [`BrokerView`] and [`BrokerSnapshot`], what the broker reads from its tables at
//!   scrape time (consumer lag, CommitLog, connections, parked pulls, HA);
//! - `exposition`: the Prometheus text, written by prometheus-client;
//! - `rates`, `dashboard`: the dashboard's throughput history and JSON, and its static page
//!   (`assets/`, built in with `include_str!`);
//! - `exporter`: the bounded HTTP listener.
//!
//! A leaf room: it imports only `common`. The broker imports it (it records and implements
//! [`BrokerView`]); the store imports [`Histogram`] for its flush latency; the network runtime
//! does not import it, it exposes a plain atomic connection count the broker reads.

pub mod dashboard;
pub mod exporter;
pub mod exposition;
pub mod histogram;
pub mod rates;
pub mod registry;
pub mod view;

pub use histogram::{Histogram, HistogramSnapshot};
pub use registry::BrokerMetrics;
pub use view::{BrokerSnapshot, BrokerView, HaSnapshot};
