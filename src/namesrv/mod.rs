//! The name server (Java `namesrv`): route table and request handling. It runs embedded in a
//! broker or as its own process (`ringmq namesrv`).
//!
//! - [`route_info::RouteInfoManager`]: live brokers, broker groups, clusters, topic queues
//!   (Java `RouteInfoManager`); time is passed in (`now_ms`).
//! - [`processor::NamesrvProcessor`]: REGISTER_BROKER (103), UNREGISTER_BROKER (104),
//!   GET_ROUTEINFO_BY_TOPIC (105), GET_BROKER_CLUSTER_INFO (106),
//!   GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206), DELETE_TOPIC_IN_NAMESRV (216),
//!   REGISTER_TOPIC_IN_NAMESRV (217); everything else is REQUEST_CODE_NOT_SUPPORTED.
//! - [`kv_processor`] over [`kv_config_manager::KvConfigManager`]: PUT_KV_CONFIG (100),
//!   GET_KV_CONFIG (101), DELETE_KV_CONFIG (102), GET_KVLIST_BY_NAMESPACE (219), persisted to
//!   `kvConfig.json` (Java `KVConfigManager`).
//! - The bodies it reads and writes (REGISTER_BROKER, routes, `TopicConfig`) are shared with the
//!   broker and live in [`crate::remoting::body`].
//!
//! - A REGISTER_BROKER or UNREGISTER_BROKER that would replace or remove the address of a live
//!   broker registered over a connection from another host is refused with NO_PERMISSION,
//!   unless it is signed by an ACL admin account ([`RouteInfoManager::register_broker_from`]).
//!
//! The runtime's duties: call [`RouteInfoManager::scan_not_active_broker`] every
//! [`route_info::SCAN_NOT_ACTIVE_BROKER_INTERVAL_MS`], call
//! [`RouteInfoManager::on_channel_closed`] for the broker address registered over a closed
//! connection ([`NamesrvProcessor::registered_broker_addr`]), and drop responses to oneway
//! requests.

pub mod broker_registration;
pub mod kv_config_manager;
pub mod kv_processor;
pub mod processor;
pub mod route_info;
pub mod startup;

#[cfg(test)]
mod live_broker_guard_tests;

pub use processor::NamesrvProcessor;
pub use route_info::{
    BrokerAddrInfo, BrokerRegistration, RegisterBrokerError, RegisterBrokerResult,
    RegistrationOrigin, RouteInfoManager,
};
pub use startup::{start_namesrv, NamesrvHandle, NamesrvStartError};
