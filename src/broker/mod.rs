//! The broker: processors, long polling, offsets, filters, name server, network runtime.
//!
//! - [`startup`] builds a [`controller::BrokerController`] and starts the threads and servers.
//! - [`dispatch`] maps each request code to its processor in [`processor`].
//! - [`longpoll`] is the hold table of parked pulls; [`longpoll_service`] re-executes them.
//! - [`offset`], [`topic`], [`subscription_group`] are the persisted metadata tables.
//! - [`server`] is the io_uring network runtime; [`namesrv`] the name server core.

pub mod client;
pub mod controller;
pub mod dispatch;
pub mod filter;
pub mod filter_cache;
pub mod longpoll;
pub mod longpoll_service;
pub mod msg_id;
pub mod namesrv;
pub mod offset;
pub mod persist;
pub mod processor;
pub mod remoting_client;
pub mod schedule;
pub mod server;
pub mod startup;
pub mod stop;
pub mod subscription_group;
pub mod topic;
