//! The echo server's consumer table: which clients sent heartbeats for which consumer group,
//! by connection, as Java's `ConsumerManager` keeps them by channel. A push consumer's
//! rebalance asks GET_CONSUMER_LIST_BY_GROUP for these client ids.

use std::collections::{BTreeSet, HashMap};

use ringmq::remoting::body::heartbeat::HeartbeatData;

/// Consumer groups the table holds; a heartbeat naming a new group beyond this is refused.
pub const CONSUMER_GROUPS_MAX: usize = 4096;

/// Client ids by group, then by connection.
#[derive(Default)]
pub struct ConsumerTable {
    groups: HashMap<String, HashMap<u64, String>>,
}

/// A heartbeat named more groups than the table may hold.
#[derive(Debug, thiserror::Error)]
#[error(
    "echo server: more than {CONSUMER_GROUPS_MAX} consumer groups, group {group} not registered"
)]
pub struct TooManyGroups {
    pub group: String,
}

impl ConsumerTable {
    /// Registers the heartbeat's client in each of its consumer groups, for `connection`.
    pub fn register(&mut self, connection: u64, data: &HeartbeatData) -> Result<(), TooManyGroups> {
        for consumer in &data.consumer_data_set {
            if consumer.group_name.is_empty() {
                continue;
            }
            if !self.groups.contains_key(&consumer.group_name)
                && self.groups.len() >= CONSUMER_GROUPS_MAX
            {
                return Err(TooManyGroups {
                    group: consumer.group_name.clone(),
                });
            }
            self.groups
                .entry(consumer.group_name.clone())
                .or_default()
                .insert(connection, data.client_id.clone());
        }
        Ok(())
    }

    /// UNREGISTER_CLIENT of a consumer: drops the connection from the group.
    pub fn unregister(&mut self, connection: u64, group: &str) {
        if let Some(members) = self.groups.get_mut(group) {
            members.remove(&connection);
            if members.is_empty() {
                self.groups.remove(group);
            }
        }
    }

    /// The connection closed: drops it from every group.
    pub fn closed(&mut self, connection: u64) {
        self.groups.retain(|_, members| {
            members.remove(&connection);
            !members.is_empty()
        });
    }

    /// The group's client ids, sorted and without repeats (empty if none).
    pub fn client_ids(&self, group: &str) -> Vec<String> {
        self.groups
            .get(group)
            .map(|members| {
                members
                    .values()
                    .cloned()
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringmq::remoting::body::heartbeat::ConsumerData;

    fn heartbeat(client: &str, groups: &[&str]) -> HeartbeatData {
        HeartbeatData {
            client_id: client.to_owned(),
            consumer_data_set: groups
                .iter()
                .map(|g| ConsumerData {
                    group_name: (*g).to_owned(),
                    ..ConsumerData::default()
                })
                .collect(),
            ..HeartbeatData::default()
        }
    }

    #[test]
    fn members_come_from_heartbeats_and_leave_on_unregister_or_close() {
        let mut table = ConsumerTable::default();
        table.register(1, &heartbeat("b@1", &["g1", "g2"])).unwrap();
        table.register(2, &heartbeat("a@2", &["g1"])).unwrap();
        table.register(3, &heartbeat("a@2", &["g1"])).unwrap();
        assert_eq!(table.client_ids("g1"), ["a@2", "b@1"]);
        assert_eq!(table.client_ids("g2"), ["b@1"]);
        assert!(table.client_ids("other").is_empty());
        table.unregister(1, "g1");
        assert_eq!(table.client_ids("g1"), ["a@2"]);
        assert_eq!(table.client_ids("g2"), ["b@1"]);
        table.closed(2);
        assert_eq!(table.client_ids("g1"), ["a@2"]);
        table.closed(3);
        table.closed(1);
        assert!(table.client_ids("g1").is_empty());
        assert!(table.groups.is_empty());
    }

    #[test]
    fn groups_are_bounded() {
        let mut table = ConsumerTable::default();
        for i in 0..CONSUMER_GROUPS_MAX {
            table
                .register(1, &heartbeat("c", &[&format!("g{i}")]))
                .unwrap();
        }
        let refused = table
            .register(2, &heartbeat("c", &["one-more"]))
            .unwrap_err();
        assert_eq!(refused.group, "one-more");
        table.register(2, &heartbeat("d", &["g0"])).unwrap();
        assert_eq!(table.client_ids("g0"), ["c", "d"]);
    }
}
