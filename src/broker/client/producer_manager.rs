//! Producer groups filled by HEART_BEAT (Java `ProducerManager`).

use std::collections::HashMap;
use std::sync::RwLock;

use super::client_channel_info::ClientChannelInfo;

/// Producer groups by name (kept for admin queries and channel expiry).
#[derive(Default)]
pub struct ProducerManager {
    groups: RwLock<HashMap<String, HashMap<u64, ClientChannelInfo>>>,
}

impl ProducerManager {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn register_producer(&self, group: &str, channel: ClientChannelInfo) {
        let mut groups = self.groups.write().unwrap_or_else(|p| p.into_inner());
        groups
            .entry(group.to_string())
            .or_default()
            .insert(channel.connection_id, channel);
    }

    pub fn unregister_producer(&self, group: &str, connection_id: u64) {
        let mut groups = self.groups.write().unwrap_or_else(|p| p.into_inner());
        if let Some(g) = groups.get_mut(group) {
            g.remove(&connection_id);
            if g.is_empty() {
                groups.remove(group);
            }
        }
    }

    pub fn remove_connection(&self, connection_id: u64) {
        let mut groups = self.groups.write().unwrap_or_else(|p| p.into_inner());
        groups.retain(|_, g| {
            g.remove(&connection_id);
            !g.is_empty()
        });
    }

    /// Java `getAvailableChannel`: a live connection of the group for a broker-to-producer
    /// request (CHECK_TRANSACTION_STATE), the one heard from last.
    pub fn available_channel(&self, group: &str) -> Option<ClientChannelInfo> {
        let groups = self.groups.read().unwrap_or_else(|p| p.into_inner());
        groups
            .get(group)?
            .values()
            .filter(|c| !c.sender.is_closed())
            .max_by_key(|c| (c.last_update_ms, c.connection_id))
            .cloned()
    }

    pub fn scan_not_active_channels(&self, now_ms: i64, timeout_ms: i64) -> usize {
        let mut groups = self.groups.write().unwrap_or_else(|p| p.into_inner());
        let mut expired = 0;
        groups.retain(|_, g| {
            g.retain(|_, c| {
                let alive = now_ms - c.last_update_ms <= timeout_ms && !c.sender.is_closed();
                expired += usize::from(!alive);
                alive
            });
            !g.is_empty()
        });
        expired
    }
}
