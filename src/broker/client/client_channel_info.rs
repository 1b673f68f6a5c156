//! One client connection of a group (Java `ClientChannelInfo`).

use std::net::SocketAddr;

use crate::net::ConnectionSender;

/// One client connection of a group.
#[derive(Debug, Clone)]
pub struct ClientChannelInfo {
    pub client_id: String,
    pub connection_id: u64,
    /// The client's address, as admin connection lists report it.
    pub remote_addr: SocketAddr,
    pub sender: ConnectionSender,
    pub language: String,
    pub version: i32,
    pub last_update_ms: i64,
}
