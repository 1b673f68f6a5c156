//! How many pulls each connection has parked, bounded per connection. The hold table's own
//! bound is global, so without this one client could fill it alone and leave every other
//! consumer answered at once (short polling). Java has no per-connection bound: its
//! `PullRequestHoldService` holds whatever arrives.
//!
//! A parked pull carries a [`ParkPermit`]; the count falls when the permit is dropped, that is
//! when the pull leaves the table (woken, expired, or dropped with its closed connection). The
//! counts sit in [`CONNECTION_SHARDS`] mutex-guarded maps keyed by connection id, so parks on
//! different connections rarely share a lock, and each lock is held for one map update.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Shards of the connection → count map.
pub const CONNECTION_SHARDS: usize = 64;

pub struct ConnectionParks {
    shards: Box<[Mutex<HashMap<u64, usize>>]>,
    max_per_connection: usize,
}

/// One parked pull's place among its connection's; gives it back when dropped.
pub struct ParkPermit {
    parks: Arc<ConnectionParks>,
    connection_id: u64,
}

impl ConnectionParks {
    pub fn new(max_per_connection: usize) -> Arc<Self> {
        Arc::new(ConnectionParks {
            shards: (0..CONNECTION_SHARDS)
                .map(|_| Mutex::new(HashMap::new()))
                .collect(),
            max_per_connection,
        })
    }

    fn shard(&self, connection_id: u64) -> MutexGuard<'_, HashMap<u64, usize>> {
        let shard = &self.shards[(connection_id as usize) % CONNECTION_SHARDS];
        shard.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A place for one more parked pull of `connection_id`, or None when it has its maximum.
    pub fn try_acquire(self: &Arc<Self>, connection_id: u64) -> Option<ParkPermit> {
        let mut counts = self.shard(connection_id);
        let count = counts.entry(connection_id).or_insert(0);
        if *count >= self.max_per_connection {
            return None;
        }
        *count += 1;
        Some(ParkPermit {
            parks: self.clone(),
            connection_id,
        })
    }

    /// Pulls `connection_id` has parked now.
    pub fn parked(&self, connection_id: u64) -> usize {
        self.shard(connection_id)
            .get(&connection_id)
            .copied()
            .unwrap_or(0)
    }
}

impl Drop for ParkPermit {
    fn drop(&mut self) {
        let mut counts = self.parks.shard(self.connection_id);
        if let Some(count) = counts.get_mut(&self.connection_id) {
            *count -= 1;
            if *count == 0 {
                // A connection with nothing parked costs nothing.
                counts.remove(&self.connection_id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_connection_has_its_own_bound() {
        let parks = ConnectionParks::new(2);
        let a1 = parks.try_acquire(1).unwrap();
        let _a2 = parks.try_acquire(1).unwrap();
        assert!(
            parks.try_acquire(1).is_none(),
            "connection 1 is at its bound"
        );
        let _b1 = parks.try_acquire(2).expect("connection 2 is not");
        assert_eq!((parks.parked(1), parks.parked(2)), (2, 1));
        drop(a1);
        assert_eq!(parks.parked(1), 1);
        assert!(
            parks.try_acquire(1).is_some(),
            "a released place is reusable"
        );
    }

    #[test]
    fn a_connection_with_nothing_parked_is_forgotten() {
        let parks = ConnectionParks::new(4);
        let permits: Vec<_> = (0..4).map(|_| parks.try_acquire(7).unwrap()).collect();
        drop(permits);
        assert_eq!(parks.parked(7), 0);
        let total: usize = parks.shards.iter().map(|s| s.lock().unwrap().len()).sum();
        assert_eq!(total, 0);
    }
}
