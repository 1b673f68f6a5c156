//! Integration-test harness for ringmq: starts a real `ringmq broker` process on loopback
//! with a temporary data dir and free ports (or targets an external broker named by
//! `RINGMQ_IT_EXTERNAL_NAMESRV`), and drives it with rocketmq-client-rust 1.0.0.
//!
//! This crate is a separate workspace member so that the slow client build (about 4.5 min
//! cold on 2 cores) stays out of `cargo test -p ringmq`; `cargo test --workspace` runs it.
//!
//! - [`broker`]: [`BrokerProcess`] (start / kill_hard / stop / restart, log capture),
//!   [`TestBroker`] (local or external), [`pick_ports`], [`ringmq_binary`].
//! - [`client`]: [`ClientEnv`] (client runtime with raised queue depths), producer and
//!   consumer helpers, [`run_bounded`] for time-bounded async test bodies.
//! - [`messages`]: fully checkable test messages and a [`DeliveryLog`].
//! - [`scenarios`]: bodies shared by several test binaries.
//! - [`ha`]: a name server process and a master + slave group, and raw admin calls
//!   (GET_BROKER_RUNTIME_INFO, QUERY_CONSUMER_OFFSET) to each broker.

// The client's async state machines are deep; its own examples raise the limit likewise.
#![recursion_limit = "512"]

pub mod broker;
pub mod client;
pub mod ha;
pub mod messages;
pub mod scenarios;

pub use broker::{
    external_namesrv_addr, pick_ports, ringmq_binary, skip_unless_restartable, BrokerPorts,
    BrokerProcess, ExternalControl, HarnessError, TestBroker,
};
pub use client::{
    create_topic, ensure_topic, header_encoding, run_bounded, shutdown_lite_pull_consumer,
    shutdown_producer, shutdown_push_consumer, shutdown_shared_producer, start_lite_pull_consumer,
    start_lite_pull_consumer_with_selector, start_orderly_push_consumer, start_producer,
    start_producer_with_topic, start_push_consumer, start_push_consumer_with_selector, unique_name,
    use_binary_headers, wait_until, ClientEnv,
};
pub use messages::{build_message, check_message, DeliveryLog, DeliveryState};
