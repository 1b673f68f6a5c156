//! Master/slave replication of the CommitLog, byte-compatible with Java's classic
//! `DefaultHAService` (package `org.apache.rocketmq.store.ha`); docs/ARCHITECTURE.md, "HA
//! replication", and docs/PROTOCOL.md, "HA stream".
//!
//! - [`frame`]: the two messages of the stream (the slave's 8-byte offset report, the master's
//!   `[phyOffset][bodySize][bytes]` frame).
//! - [`group_transfer_service`]: what the master knows about its slaves (connections, the
//!   highest acknowledged offset) and the SYNC_MASTER wait on it (Java `GroupTransferService`).
//! - [`ha_connection`]: one slave connection on the master (Java `HAConnection`: a read thread
//!   for the acks, a write thread for the frames).
//! - [`ha_client`]: the slave's connection to its master (Java `HAClient`).
//! - [`ha_service`]: the master's accept thread, the slave's client thread, and the state the
//!   broker shares with them (Java `HAService`).
//!
//! Dedicated std threads with blocking sockets: a handful of long-lived connections, none on
//! the request path's io_uring threads.

pub mod frame;
pub mod group_transfer_service;
pub mod ha_client;
pub mod ha_connection;
pub mod ha_service;
