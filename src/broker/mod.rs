//! The broker: processors, long polling, offsets, filters, name server, network runtime.

pub mod filter;
pub mod server;
