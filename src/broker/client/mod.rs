//! Producer and consumer tables filled by HEART_BEAT (Java `broker.client`: `ProducerManager`,
//! `ConsumerManager`, `ConsumerGroupInfo`, `ClientChannelInfo`).
//!
//! A client is known by its connection: entries are keyed by connection id, and the connection's
//! [`ConnectionSender`] is kept so the broker can send NOTIFY_CONSUMER_IDS_CHANGED on the
//! client's own connection (it never dials an address a client announces).

pub mod consumer_manager;
pub mod producer_manager;

pub use consumer_manager::{ConsumerGroupInfo, ConsumerManager, RegisterOutcome};
pub use producer_manager::ProducerManager;

use crate::net::ConnectionSender;

/// One client connection of a group.
#[derive(Debug, Clone)]
pub struct ClientChannelInfo {
    pub client_id: String,
    pub connection_id: u64,
    pub sender: ConnectionSender,
    pub language: String,
    pub version: i32,
    pub last_update_ms: i64,
}
