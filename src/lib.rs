//! ringmq: a RocketMQ-compatible message broker on Linux io_uring.
//!
//! # Layout
//! - [`remoting`]: the RocketMQ remoting protocol (frames, both header encodings, request and
//!   response codes, typed custom headers). Pure codec: no I/O, no runtime.
//! - [`store`]: CommitLog + ConsumeQueue in RocketMQ's on-disk format, recovery, retention, and
//!   the io_uring read path (`store::io`, the only place that touches io_uring for files).
//!   The store knows nothing of the remoting protocol.
//! - [`broker`]: request processors (one per request code, named after RocketMQ's Java
//!   processors), long polling, consumer offsets, filtering, the embedded name server and the
//!   network runtime.
//! - [`config`]: the one configuration struct, read from `RINGMQ_<SECTION>_<FIELD>` env vars.

pub mod broker;
pub mod common;
pub mod config;
pub mod filter;
pub mod namesrv;
pub mod net;
pub mod remoting;
pub mod store;
