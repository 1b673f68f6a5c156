//! Producer and consumer tables filled by HEART_BEAT (Java `broker.client`: `ProducerManager`,
//! `ConsumerManager`, `ConsumerGroupInfo`, `ClientChannelInfo`), and the orderly consumers'
//! queue locks (Java `RebalanceLockManager`), and what the broker asks of its clients (Java
//! `Broker2Client`: offset resets, calls relayed to one client).
//!
//! A client is known by its connection: entries are keyed by connection id, and the connection's
//! [`crate::net::ConnectionSender`] is kept so the broker can send NOTIFY_CONSUMER_IDS_CHANGED on the
//! client's own connection (it never dials an address a client announces).

pub mod broker2client;
pub mod client_channel_info;
pub mod consumer_manager;
pub mod producer_manager;
pub mod rebalance_lock_manager;

pub use client_channel_info::ClientChannelInfo;
pub use consumer_manager::{ConsumerGroupInfo, ConsumerManager, RegisterOutcome};
pub use producer_manager::ProducerManager;
pub use rebalance_lock_manager::RebalanceLockManager;
