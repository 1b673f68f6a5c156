//! Which client of a consumer group owns which queue, for orderly consumers (Java
//! `RebalanceLockManager`).
//!
//! An orderly consumer (`MessageListenerOrderly`) only consumes a queue it has locked on the
//! broker with LOCK_BATCH_MQ, and renews its locks every 20 s; a lock not renewed for
//! `max_live_ms` (Java `rebalanceLockMaxLiveTime`, 60 s) may be taken by another client. So two
//! members of a group never consume one queue at once, even while their rebalances disagree.
//!
//! Memory is bounded by the caller: the processor only asks for queues of existing topics
//! (queue id below the topic's queue count) and existing groups, so the table holds at most
//! one entry per (group, queue). Entries are keyed by topic and queue id, not broker name: this
//! broker only serves its own queues, and a free-form broker name would let a client grow the
//! table without bound.
//!
//! A client whose connection closes loses its locks at once (Java waits for the expiry): the
//! broker drops it from the group at the same moment and tells the others to rebalance, so the
//! queue's new owner should not wait 60 s. Locks often arrive on a different connection than
//! heartbeats (the client's VIP channel), so the manager also remembers which clients locked
//! through which connection.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use crate::remoting::body::lock_batch::MessageQueue;

/// Most (group, client id) pairs remembered per connection; a client uses one id per group, so
/// this only caps a misbehaving peer. Locks beyond it still expire after `max_live_ms`.
pub const CLIENTS_PER_CONNECTION_MAX: usize = 64;

/// A queue of a group's lock table.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct QueueKey {
    topic: String,
    queue_id: i32,
}

impl QueueKey {
    fn of(mq: &MessageQueue) -> Self {
        QueueKey {
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
        }
    }
}

/// Who holds a queue, and when they last locked it.
#[derive(Debug, Clone)]
struct LockEntry {
    client_id: String,
    last_update_ms: i64,
}

/// The per-group lock tables.
pub struct RebalanceLockManager {
    max_live_ms: i64,
    groups: Mutex<HashMap<String, HashMap<QueueKey, LockEntry>>>,
    /// Connection id → (group, client id) that locked through it.
    connections: Mutex<HashMap<u64, HashSet<(String, String)>>>,
}

impl RebalanceLockManager {
    pub fn new(max_live_ms: u64) -> Self {
        RebalanceLockManager {
            max_live_ms: i64::try_from(max_live_ms).unwrap_or(i64::MAX),
            groups: Mutex::new(HashMap::new()),
            connections: Mutex::new(HashMap::new()),
        }
    }

    /// Locks for `client_id` every queue of `mqs` that is free, expired, or already its own
    /// (which renews it); returns those queues, as given. Expired entries of the group are
    /// dropped on the way, so a deleted topic's locks do not stay forever.
    pub fn try_lock_batch(
        &self,
        group: &str,
        mqs: &[MessageQueue],
        client_id: &str,
        now_ms: i64,
    ) -> Vec<MessageQueue> {
        let mut groups = self.groups.lock().unwrap_or_else(|p| p.into_inner());
        let table = groups.entry(group.to_string()).or_default();
        let max_live_ms = self.max_live_ms;
        table.retain(|_, e| !expired(e, now_ms, max_live_ms));
        let mut locked = Vec::new();
        for mq in mqs {
            let entry = table.entry(QueueKey::of(mq)).or_insert_with(|| LockEntry {
                client_id: client_id.to_string(),
                last_update_ms: now_ms,
            });
            if entry.client_id != client_id {
                tracing::debug!(
                    group,
                    topic = mq.topic,
                    queue_id = mq.queue_id,
                    holder = entry.client_id,
                    client_id,
                    "queue locked by another client"
                );
                continue;
            }
            entry.last_update_ms = now_ms;
            if !locked.contains(mq) {
                locked.push(mq.clone());
            }
        }
        if table.is_empty() {
            groups.remove(group);
        }
        locked
    }

    /// Releases the queues of `mqs` that `client_id` holds; others' locks stay.
    pub fn unlock_batch(&self, group: &str, mqs: &[MessageQueue], client_id: &str) {
        let mut groups = self.groups.lock().unwrap_or_else(|p| p.into_inner());
        let Some(table) = groups.get_mut(group) else {
            return;
        };
        for mq in mqs {
            let key = QueueKey::of(mq);
            if table.get(&key).is_some_and(|e| e.client_id == client_id) {
                table.remove(&key);
            }
        }
        if table.is_empty() {
            groups.remove(group);
        }
    }

    /// Releases every queue `client_id` holds in `group`; returns how many.
    pub fn unlock_client(&self, group: &str, client_id: &str) -> usize {
        let mut groups = self.groups.lock().unwrap_or_else(|p| p.into_inner());
        let Some(table) = groups.get_mut(group) else {
            return 0;
        };
        let before = table.len();
        table.retain(|_, e| e.client_id != client_id);
        let released = before - table.len();
        if table.is_empty() {
            groups.remove(group);
        }
        released
    }

    /// Remembers that `client_id` of `group` locked through connection `connection_id`.
    pub fn note_connection(&self, connection_id: u64, group: &str, client_id: &str) {
        let mut connections = self.connections.lock().unwrap_or_else(|p| p.into_inner());
        let clients = connections.entry(connection_id).or_default();
        let pair = (group.to_string(), client_id.to_string());
        if clients.len() < CLIENTS_PER_CONNECTION_MAX || clients.contains(&pair) {
            clients.insert(pair);
        }
    }

    /// Forgets a closed connection; returns the (group, client id) pairs that locked through it.
    pub fn take_connection(&self, connection_id: u64) -> Vec<(String, String)> {
        let mut connections = self.connections.lock().unwrap_or_else(|p| p.into_inner());
        connections
            .remove(&connection_id)
            .map(|clients| clients.into_iter().collect())
            .unwrap_or_default()
    }

    /// The client holding a queue now (None if free or expired).
    pub fn holder(&self, group: &str, mq: &MessageQueue, now_ms: i64) -> Option<String> {
        let groups = self.groups.lock().unwrap_or_else(|p| p.into_inner());
        groups
            .get(group)?
            .get(&QueueKey::of(mq))
            .filter(|e| !expired(e, now_ms, self.max_live_ms))
            .map(|e| e.client_id.clone())
    }

    /// Lock entries held, over all groups (for tests and bounds checks).
    pub fn len(&self) -> usize {
        let groups = self.groups.lock().unwrap_or_else(|p| p.into_inner());
        groups.values().map(HashMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn expired(entry: &LockEntry, now_ms: i64, max_live_ms: i64) -> bool {
    now_ms.saturating_sub(entry.last_update_ms) > max_live_ms
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIVE_MS: u64 = 60_000;

    fn mqs(ids: &[i32]) -> Vec<MessageQueue> {
        ids.iter()
            .map(|&queue_id| MessageQueue {
                topic: "T".into(),
                broker_name: "broker-a".into(),
                queue_id,
            })
            .collect()
    }

    fn ids(locked: &[MessageQueue]) -> Vec<i32> {
        let mut ids: Vec<i32> = locked.iter().map(|mq| mq.queue_id).collect();
        ids.sort_unstable();
        ids
    }

    #[test]
    fn two_clients_never_hold_the_same_queue() {
        let m = RebalanceLockManager::new(LIVE_MS);
        assert_eq!(ids(&m.try_lock_batch("g", &mqs(&[0, 1]), "a", 0)), [0, 1]);
        assert_eq!(
            ids(&m.try_lock_batch("g", &mqs(&[1, 2, 3]), "b", 10)),
            [2, 3]
        );
        assert_eq!(
            ids(&m.try_lock_batch("g", &mqs(&[0, 1, 2, 3]), "a", 20)),
            [0, 1]
        );
        for (queue, holder) in [(0, "a"), (1, "a"), (2, "b"), (3, "b")] {
            assert_eq!(
                m.holder("g", &mqs(&[queue])[0], 30).as_deref(),
                Some(holder)
            );
        }
        // Another group has its own table.
        assert_eq!(ids(&m.try_lock_batch("g2", &mqs(&[0]), "b", 30)), [0]);
    }

    #[test]
    fn the_holder_renews_and_others_wait_for_expiry() {
        let m = RebalanceLockManager::new(LIVE_MS);
        m.try_lock_batch("g", &mqs(&[0]), "a", 0);
        // Renewed at 50 s, so still held at 100 s (50 s after the renewal).
        assert_eq!(ids(&m.try_lock_batch("g", &mqs(&[0]), "a", 50_000)), [0]);
        assert!(m.try_lock_batch("g", &mqs(&[0]), "b", 100_000).is_empty());
        // Exactly max live time after the last lock is still held; one ms later it expired.
        assert!(m.try_lock_batch("g", &mqs(&[0]), "b", 110_000).is_empty());
        assert_eq!(m.holder("g", &mqs(&[0])[0], 110_001), None);
        assert_eq!(ids(&m.try_lock_batch("g", &mqs(&[0]), "b", 110_001)), [0]);
        assert!(m.try_lock_batch("g", &mqs(&[0]), "a", 110_002).is_empty());
    }

    #[test]
    fn unlock_releases_only_the_holders_queues() {
        let m = RebalanceLockManager::new(LIVE_MS);
        m.try_lock_batch("g", &mqs(&[0, 1]), "a", 0);
        m.unlock_batch("g", &mqs(&[0, 1]), "b");
        assert!(m.try_lock_batch("g", &mqs(&[0, 1]), "b", 1).is_empty());
        m.unlock_batch("g", &mqs(&[1]), "a");
        assert_eq!(ids(&m.try_lock_batch("g", &mqs(&[0, 1]), "b", 2)), [1]);
        m.unlock_batch("unknown", &mqs(&[0]), "a");
        assert_eq!(m.len(), 2);
    }

    #[test]
    fn closing_a_connection_hands_its_clients_locks_back() {
        let m = RebalanceLockManager::new(LIVE_MS);
        m.try_lock_batch("g", &mqs(&[0, 1]), "a", 0);
        m.note_connection(7, "g", "a");
        m.note_connection(7, "g", "a");
        m.try_lock_batch("g", &mqs(&[2]), "b", 0);
        m.note_connection(8, "g", "b");
        assert_eq!(m.take_connection(7), [("g".to_string(), "a".to_string())]);
        assert!(m.take_connection(7).is_empty());
        assert_eq!(m.unlock_client("g", "a"), 2);
        assert_eq!(
            ids(&m.try_lock_batch("g", &mqs(&[0, 1, 2]), "b", 1)),
            [0, 1, 2]
        );
    }

    #[test]
    fn memory_stays_bounded() {
        let m = RebalanceLockManager::new(LIVE_MS);
        // Repeated and duplicated requests keep one entry per queue.
        for round in 0..100 {
            m.try_lock_batch("g", &mqs(&[0, 0, 1]), "a", round);
        }
        assert_eq!(m.len(), 2);
        // Expired entries of a group go at its next lock; an emptied group goes entirely.
        m.try_lock_batch("g", &[], "a", 1_000_000);
        assert!(m.is_empty());
        for i in 0..1000 {
            m.note_connection(1, "g", &format!("c{i}"));
        }
        assert_eq!(m.take_connection(1).len(), CLIENTS_PER_CONNECTION_MAX);
    }
}
