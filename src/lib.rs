//! ringmq: a RocketMQ-compatible message broker on Linux io_uring.
//!
//! # Layout
//! Each module is a room that could be a crate; imports point one way (`tests/layering.rs`
//! holds the table, docs/ARCHITECTURE.md draws it).
//! - [`common`]: the clock, the stop flag of background threads, topic and group name rules.
//! - [`remoting`]: the RocketMQ remoting protocol (frames, both header encodings, request and
//!   response codes, typed custom headers, the JSON bodies). Pure codec: no I/O, no runtime.
//! - [`store`]: CommitLog + ConsumeQueue in RocketMQ's on-disk format, recovery, retention, and
//!   the io_uring read path (`store::io`, the only place that touches io_uring for files).
//!   The store knows nothing of the remoting protocol.
//! - [`filter`]: TAG and SQL92 subscriptions.
//! - [`metrics`]: the broker's counters, the Prometheus exposition and the dashboard, served on
//!   `RINGMQ_METRICS_LISTEN`.
//! - [`config`]: the one configuration struct, read from a broker.conf (Java keys) and from
//!   `RINGMQ_<SECTION>_<FIELD>` env vars, which override it.
//! - [`net`]: the io_uring network runtime (tokio-uring), the zero-copy writer and a blocking
//!   client.
//! - [`namesrv`]: the name server, embedded in a broker or run alone.
//! - [`acl`]: RocketMQ's ACL 1.0: `plain_acl.yml` accounts and permissions, request signatures.
//! - [`broker`]: request processors (one per request code, named after RocketMQ's Java
//!   processors), long polling, consumer offsets and the metadata tables.

pub mod acl;
pub mod broker;
pub mod common;
pub mod config;
pub mod filter;
pub mod metrics;
pub mod namesrv;
pub mod net;
pub mod remoting;
pub mod store;
