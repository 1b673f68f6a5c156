//! Consumer groups filled by HEART_BEAT (Java `ConsumerManager`, `ConsumerGroupInfo`).

use std::collections::{BTreeSet, HashMap};
use std::sync::RwLock;

use super::client_channel_info::ClientChannelInfo;
use crate::remoting::body::heartbeat::{ConsumerData, SubscriptionData};

/// A consumer group's members and subscriptions.
#[derive(Debug, Clone, Default)]
pub struct ConsumerGroupInfo {
    pub channels: HashMap<u64, ClientChannelInfo>,
    pub subscriptions: HashMap<String, SubscriptionData>,
    pub consume_type: String,
    pub message_model: String,
    pub consume_from_where: String,
}

impl ConsumerGroupInfo {
    /// Client ids, sorted and deduplicated (GET_CONSUMER_LIST_BY_GROUP).
    pub fn client_ids(&self) -> Vec<String> {
        let set: BTreeSet<&str> = self
            .channels
            .values()
            .map(|c| c.client_id.as_str())
            .collect();
        set.into_iter().map(str::to_string).collect()
    }
}

/// What a heartbeat changed for one group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegisterOutcome {
    /// The set of member channels changed (Java notifies on this).
    pub channels_changed: bool,
    /// A subscription was added, removed or changed.
    pub subscriptions_changed: bool,
}

/// Consumer groups by name.
#[derive(Default)]
pub struct ConsumerManager {
    groups: RwLock<HashMap<String, ConsumerGroupInfo>>,
}

impl ConsumerManager {
    pub fn new() -> Self {
        Self::default()
    }

    /// Java `registerConsumer`: updates the channel and, when the heartbeat carries them, the
    /// subscriptions (a subscription whose subVersion is older than the one held is kept).
    pub fn register_consumer(
        &self,
        data: &ConsumerData,
        channel: ClientChannelInfo,
    ) -> RegisterOutcome {
        let mut groups = self.groups.write().unwrap_or_else(|p| p.into_inner());
        let info = groups.entry(data.group_name.clone()).or_default();
        info.consume_type = data.consume_type.clone();
        info.message_model = data.message_model.clone();
        info.consume_from_where = data.consume_from_where.clone();
        let channels_changed = match info.channels.get_mut(&channel.connection_id) {
            Some(existing) => {
                let changed = existing.client_id != channel.client_id;
                *existing = channel;
                changed
            }
            None => {
                info.channels.insert(channel.connection_id, channel);
                true
            }
        };
        let mut subscriptions_changed = false;
        let mut wanted: HashMap<String, SubscriptionData> = HashMap::new();
        for sub in &data.subscription_data_set {
            wanted.insert(sub.topic.clone(), sub.clone());
        }
        for (topic, sub) in &wanted {
            match info.subscriptions.get(topic) {
                Some(old) if old.sub_version > sub.sub_version => {}
                Some(old) if old == sub => {}
                _ => {
                    info.subscriptions.insert(topic.clone(), sub.clone());
                    subscriptions_changed = true;
                }
            }
        }
        let before = info.subscriptions.len();
        info.subscriptions
            .retain(|topic, _| wanted.contains_key(topic));
        subscriptions_changed |= before != info.subscriptions.len();
        RegisterOutcome {
            channels_changed,
            subscriptions_changed,
        }
    }

    /// Removes a client from a group (UNREGISTER_CLIENT). Returns true if it was a member.
    pub fn unregister_consumer(&self, group: &str, connection_id: u64) -> bool {
        let mut groups = self.groups.write().unwrap_or_else(|p| p.into_inner());
        let Some(info) = groups.get_mut(group) else {
            return false;
        };
        let removed = info.channels.remove(&connection_id).is_some();
        if info.channels.is_empty() {
            groups.remove(group);
        }
        removed
    }

    /// Drops a closed or expired connection from every group. Returns the groups it left.
    pub fn remove_connection(&self, connection_id: u64) -> Vec<String> {
        let mut groups = self.groups.write().unwrap_or_else(|p| p.into_inner());
        let mut left = Vec::new();
        groups.retain(|name, info| {
            if info.channels.remove(&connection_id).is_some() {
                left.push(name.clone());
            }
            !info.channels.is_empty()
        });
        left
    }

    /// The (group, client id) pairs that heartbeated on a connection.
    pub fn clients_of_connection(&self, connection_id: u64) -> Vec<(String, String)> {
        let groups = self.groups.read().unwrap_or_else(|p| p.into_inner());
        groups
            .iter()
            .filter_map(|(name, info)| {
                let channel = info.channels.get(&connection_id)?;
                Some((name.clone(), channel.client_id.clone()))
            })
            .collect()
    }

    /// Connections silent longer than `timeout_ms`: removed, returned as (group, channel).
    pub fn scan_not_active_channels(&self, now_ms: i64, timeout_ms: i64) -> Vec<(String, u64)> {
        let mut groups = self.groups.write().unwrap_or_else(|p| p.into_inner());
        let mut expired = Vec::new();
        groups.retain(|name, info| {
            info.channels.retain(|id, c| {
                let alive = now_ms - c.last_update_ms <= timeout_ms && !c.sender.is_closed();
                if !alive {
                    expired.push((name.clone(), *id));
                }
                alive
            });
            !info.channels.is_empty()
        });
        expired
    }

    pub fn group(&self, group: &str) -> Option<ConsumerGroupInfo> {
        self.groups
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(group)
            .cloned()
    }

    /// Runs `f` on the group's info (None if unknown) under the table's read lock, so callers
    /// on the pull path read the subscription in place instead of copying it.
    pub fn with_group<R>(&self, group: &str, f: impl FnOnce(Option<&ConsumerGroupInfo>) -> R) -> R {
        f(self
            .groups
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(group))
    }
}
