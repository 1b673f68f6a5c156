//! The broker: processors, long polling, offsets, filters, name server, network runtime.

pub mod client;
pub mod filter;
pub mod filter_cache;
pub mod longpoll;
pub mod msg_id;
pub mod namesrv;
pub mod offset;
pub mod persist;
pub mod remoting_client;
pub mod server;
pub mod subscription_group;
pub mod topic;
pub mod stop;
