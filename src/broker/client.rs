//! Producer and consumer tables filled by HEART_BEAT (Java `ProducerManager`,
//! `ConsumerManager`, `ConsumerGroupInfo`, `ClientChannelInfo`).
//!
//! A client is known by its connection: entries are keyed by connection id, and the connection's
//! [`ConnectionSender`] is kept so the broker can send NOTIFY_CONSUMER_IDS_CHANGED on the
//! client's own connection (it never dials an address a client announces).

use std::collections::{BTreeSet, HashMap};
use std::sync::RwLock;

use serde::{Deserialize, Serialize};

use super::server::ConnectionSender;

/// Java `SubscriptionData` as carried in heartbeats.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct SubscriptionData {
    pub class_filter_mode: bool,
    pub topic: String,
    pub sub_string: String,
    pub tags_set: BTreeSet<String>,
    pub code_set: BTreeSet<i32>,
    pub sub_version: i64,
    pub expression_type: Option<String>,
}

impl SubscriptionData {
    /// `TAG` unless the subscription says otherwise (null/empty mean TAG, as in Java).
    pub fn expression_type(&self) -> &str {
        match self.expression_type.as_deref() {
            None | Some("") => "TAG",
            Some(t) => t,
        }
    }
}

/// Java `ConsumerData`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumerData {
    pub group_name: String,
    pub consume_type: String,
    pub message_model: String,
    pub consume_from_where: String,
    pub subscription_data_set: Vec<SubscriptionData>,
    pub unit_mode: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct ProducerData {
    pub group_name: String,
}

/// Java `HeartbeatData`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct HeartbeatData {
    #[serde(rename = "clientID")]
    pub client_id: String,
    pub producer_data_set: Vec<ProducerData>,
    pub consumer_data_set: Vec<ConsumerData>,
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeat_json_from_a_java_client_parses() {
        let json = r#"{"clientID":"10.0.0.5@12345#987654321","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"cg","messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,"codeSet":[97],"expressionType":"TAG","subString":"a","subVersion":1700000000000,"tagsSet":["a"],"topic":"T"}],"unitMode":false}],"heartbeatFingerprint":0,"producerDataSet":[{"groupName":"pg"}],"withoutSub":false}"#;
        let hb: HeartbeatData = serde_json::from_str(json).unwrap();
        assert_eq!(hb.client_id, "10.0.0.5@12345#987654321");
        let sub = &hb.consumer_data_set[0].subscription_data_set[0];
        assert_eq!(sub.code_set, BTreeSet::from([97]));
        assert_eq!(sub.expression_type(), "TAG");
        assert_eq!(hb.producer_data_set[0].group_name, "pg");
    }
}
