//! The broker: request processors, long polling, consumer offsets and the metadata tables
//! (Java `broker`). It sits on the store, speaks through [`crate::net`] and imports the filter
//! engine and the name server; none of them imports it.
//!
//! - [`startup`] builds a [`controller::BrokerController`] and starts the threads and servers.
//! - [`dispatch`] maps each request code to its processor in [`processor`]; their failures are
//!   [`error::BrokerError`]s, which name the response code.
//! - [`longpoll`]: the hold table of parked pulls and the service that parks them and
//!   re-executes the woken ones.
//! - [`consumer_offset_manager`], [`topic_config_manager`], [`subscription_group_manager`] are
//!   the persisted metadata tables; [`config_manager`] writes their JSON files.
//! - [`client`]: the producer and consumer tables filled by heartbeats.
//! - [`schedule_message_service`]: delay levels.
//! - [`broker_stats`]: message totals for GET_BROKER_RUNTIME_INFO.
//! - [`slave_synchronize`]: a slave's copy of its master's metadata; [`slave_sync_state`]: what the slave knows of its master between syncs.
//! - [`ha`]: master/slave replication of the CommitLog (Java `DefaultHAService`).
//! - [`transaction`]: half messages, their end and their check-back.

pub mod broker_metrics_manager;
pub mod broker_outer_api;
pub mod broker_stats;
pub mod client;
pub mod config_manager;
pub mod consumer_filter_manager;
pub mod consumer_offset_manager;
pub mod controller;
pub mod dispatch;
pub mod error;
pub mod ha;
pub mod longpoll;
pub mod msg_id;
pub mod processor;
pub mod schedule_message_service;
pub mod slave_sync_state;
pub mod slave_synchronize;
pub mod startup;
pub mod subscription_group_manager;
pub mod topic_config_manager;
pub mod transaction;

#[cfg(test)]
mod disk_full_tests;
#[cfg(test)]
mod retry_tests;
#[cfg(test)]
pub(crate) mod test_support;
#[cfg(test)]
mod tests;
