//! What a slave knows of its master between syncs (the state half of Java `SlaveSynchronize`):
//! the master's address as the name server last reported it, the offsets consumers committed
//! to this slave while the master was away, and the connection the sync reuses. The sync
//! itself is in `slave_synchronize.rs`; this half is a controller field, so it imports nothing
//! of the broker.

use std::collections::HashMap;
use std::sync::{Mutex, RwLock};

use crate::net::remoting_client::BlockingClient;

/// The slave's side of the master's metadata.
pub struct SlaveSyncState {
    /// The master's remoting address, as the name server last reported it; `None` while the
    /// group has no master registered.
    pub(crate) master_addr: RwLock<Option<String>>,
    /// (group, topic, queue) → the offset a consumer last committed to this slave, until the
    /// master's offset reaches it.
    pub(crate) slave_commits: Mutex<HashMap<(String, String, i32), i64>>,
    /// The connection to the master, kept between syncs.
    pub(crate) connection: Mutex<Option<BlockingClient>>,
}

impl Default for SlaveSyncState {
    fn default() -> Self {
        Self::new()
    }
}

impl SlaveSyncState {
    pub fn new() -> Self {
        SlaveSyncState {
            master_addr: RwLock::new(None),
            slave_commits: Mutex::new(HashMap::new()),
            connection: Mutex::new(None),
        }
    }

    /// What the name server said of the master (REGISTER_BROKER's `masterAddr`; empty or
    /// absent: none).
    pub fn set_master_addr(&self, addr: Option<&str>) {
        let addr = addr.map(str::trim).filter(|a| !a.is_empty());
        let mut current = self.master_addr.write().unwrap_or_else(|p| p.into_inner());
        if current.as_deref() != addr {
            tracing::info!(master = ?addr, previous = ?*current, "master address changed");
            *current = addr.map(String::from);
            *self.connection.lock().unwrap_or_else(|p| p.into_inner()) = None;
        }
    }

    pub fn master_addr(&self) -> Option<String> {
        self.master_addr
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Whether the group's master is registered (Java `minBrokerIdInGroup == MASTER_ID`).
    pub fn master_online(&self) -> bool {
        self.master_addr
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// A consumer committed `offset` to this slave.
    pub fn note_slave_commit(&self, group: &str, topic: &str, queue_id: i32, offset: i64) {
        self.slave_commits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((group.to_string(), topic.to_string(), queue_id), offset);
    }

    /// The slave-committed offsets still ahead of the master's (tests and the docs' rule).
    pub fn pending_slave_commits(&self) -> usize {
        self.slave_commits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }
}

/// The offset a synced queue takes on the slave: the master's, unless a consumer committed a
/// larger one to this slave that the master has not reached yet. Returns the offset and
/// whether the slave's own commit is still to be kept.
pub fn merge_offset(master_offset: i64, slave_committed: Option<i64>) -> (i64, bool) {
    match slave_committed {
        Some(slave) if slave > master_offset => (slave, true),
        _ => (master_offset, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slave_commit_ahead_of_the_master_wins_until_the_master_reaches_it() {
        // No commit on the slave: the master's offset, resets included.
        assert_eq!(merge_offset(100, None), (100, false));
        assert_eq!(merge_offset(5, None), (5, false));
        // The consumer committed 150 to the slave while the master was away at 100.
        assert_eq!(merge_offset(100, Some(150)), (150, true));
        // The master caught up (or passed): it is followed again, and the commit forgotten.
        assert_eq!(merge_offset(150, Some(150)), (150, false));
        assert_eq!(merge_offset(170, Some(150)), (170, false));
    }

    #[test]
    fn the_master_address_comes_and_goes_with_the_registration_answer() {
        let s = SlaveSyncState::new();
        assert!(!s.master_online());
        s.set_master_addr(Some("127.0.0.1:10911"));
        assert!(s.master_online());
        assert_eq!(s.master_addr().as_deref(), Some("127.0.0.1:10911"));
        s.set_master_addr(Some(""));
        assert!(!s.master_online());
        s.set_master_addr(None);
        assert_eq!(s.master_addr(), None);
    }
}
