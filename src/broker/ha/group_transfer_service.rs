//! What a master knows about its slaves, and the SYNC_MASTER wait on it (Java
//! `GroupTransferService`, `HAService.isSlaveOK` and `push2SlaveMaxOffset`).
//!
//! Group commit for replication: every waiting send watches one value, the highest offset any
//! slave acknowledged. Each ack that raises it wakes all waiters at once, and each waiter
//! checks its own end offset; no send polls and no send has a request of its own to queue.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use crate::config::HaSection;

/// Why a SYNC_MASTER send could not be confirmed by a slave.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SlaveWaitError {
    /// No slave is connected, or the best one is further behind than `haMaxGapNotInSync`
    /// (Java answers `SLAVE_NOT_AVAILABLE`).
    #[error("no slave in sync")]
    NotAvailable,
    /// No slave acknowledged the message within `slaveTimeout` (Java `FLUSH_SLAVE_TIMEOUT`).
    #[error("no slave acknowledged within the slave timeout")]
    Timeout,
}

/// The replication state of a master, as GET_BROKER_RUNTIME_INFO reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HaRuntimeState {
    /// Slaves connected to the HA port now.
    pub slave_count: usize,
    /// Highest CommitLog offset a slave acknowledged (Java `push2SlaveMaxOffset`).
    pub max_replicated_offset: i64,
    /// CommitLog bytes the best slave lacks (0 with no data or no slave ack ahead).
    pub lag_bytes: i64,
}

/// Replication state shared by the HA connections and the send path.
pub struct GroupTransferService {
    connection_count: AtomicUsize,
    acked_tx: watch::Sender<i64>,
    /// Bumped after each append so idle writers wake at once instead of at their next check.
    data_generation: Mutex<u64>,
    data_cv: Condvar,
    slave_timeout: Duration,
    max_gap_not_in_sync_bytes: i64,
}

impl GroupTransferService {
    pub fn new(ha: &HaSection) -> Self {
        GroupTransferService {
            connection_count: AtomicUsize::new(0),
            acked_tx: watch::Sender::new(0),
            data_generation: Mutex::new(0),
            data_cv: Condvar::new(),
            slave_timeout: Duration::from_millis(ha.slave_timeout_ms),
            max_gap_not_in_sync_bytes: ha.max_gap_not_in_sync_bytes as i64,
        }
    }

    pub fn connection_opened(&self) {
        self.connection_count.fetch_add(1, Ordering::AcqRel);
    }

    pub fn connection_closed(&self) {
        self.connection_count.fetch_sub(1, Ordering::AcqRel);
    }

    pub fn connection_count(&self) -> usize {
        self.connection_count.load(Ordering::Acquire)
    }

    /// A slave acknowledged every byte below `offset`: raises the shared ack offset and wakes
    /// the sends it covers.
    pub fn slave_acked(&self, offset: i64) {
        self.acked_tx.send_if_modified(|acked| {
            if offset > *acked {
                *acked = offset;
                true
            } else {
                false
            }
        });
    }

    /// Highest offset a slave acknowledged (Java `push2SlaveMaxOffset`).
    pub fn push2slave_max_offset(&self) -> i64 {
        *self.acked_tx.borrow()
    }

    /// Java `HAService.isSlaveOK`: a slave is connected and the best ack is within
    /// `haMaxGapNotInSync` of `master_put_where`.
    pub fn is_slave_ok(&self, master_put_where: i64) -> bool {
        self.connection_count() > 0
            && master_put_where - self.push2slave_max_offset() < self.max_gap_not_in_sync_bytes
    }

    /// Waits until a slave acknowledged `end_phy_offset`, at most `slaveTimeout`.
    pub async fn wait_for_slave(&self, end_phy_offset: i64) -> Result<(), SlaveWaitError> {
        if !self.is_slave_ok(end_phy_offset) {
            return Err(SlaveWaitError::NotAvailable);
        }
        let mut rx = self.acked_tx.subscribe();
        self.notify_data_appended();
        let wait = async {
            rx.wait_for(|acked| *acked >= end_phy_offset)
                .await
                .map(|_| ())
        };
        match tokio::time::timeout(self.slave_timeout, wait).await {
            Ok(Ok(())) => Ok(()),
            // The sender lives as long as `self`; a closed channel means shutdown.
            Ok(Err(_)) | Err(_) => Err(SlaveWaitError::Timeout),
        }
    }

    /// The state for GET_BROKER_RUNTIME_INFO, against the master's write position.
    pub fn runtime_state(&self, master_max_phy_offset: i64) -> HaRuntimeState {
        let acked = self.push2slave_max_offset();
        HaRuntimeState {
            slave_count: self.connection_count(),
            max_replicated_offset: acked,
            lag_bytes: (master_max_phy_offset - acked).max(0),
        }
    }

    /// Tells the HA writers new CommitLog bytes are there (cheap when no slave is connected).
    pub fn notify_data_appended(&self) {
        if self.connection_count() == 0 {
            return;
        }
        let mut generation = self
            .data_generation
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        *generation = generation.wrapping_add(1);
        self.data_cv.notify_all();
    }

    /// The current data generation, to pass to [`GroupTransferService::wait_for_data`].
    pub fn data_generation(&self) -> u64 {
        *self
            .data_generation
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Sleeps until the generation moves past `seen` or `timeout` passes.
    pub fn wait_for_data(&self, seen: u64, timeout: Duration) {
        let guard = self
            .data_generation
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let _ = self
            .data_cv
            .wait_timeout_while(guard, timeout, |g| *g == seen)
            .unwrap_or_else(|e| e.into_inner());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(timeout_ms: u64) -> GroupTransferService {
        GroupTransferService::new(&HaSection {
            slave_timeout_ms: timeout_ms,
            max_gap_not_in_sync_bytes: 1000,
            ..HaSection::default()
        })
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn no_slave_or_a_slave_too_far_behind_is_not_available() {
        let s = service(50);
        assert_eq!(
            block_on(s.wait_for_slave(10)),
            Err(SlaveWaitError::NotAvailable)
        );
        s.connection_opened();
        s.slave_acked(100);
        assert!(s.is_slave_ok(1099));
        assert_eq!(
            block_on(s.wait_for_slave(1100)),
            Err(SlaveWaitError::NotAvailable)
        );
        assert_eq!(
            block_on(s.wait_for_slave(200)),
            Err(SlaveWaitError::Timeout)
        );
        assert_eq!(block_on(s.wait_for_slave(100)), Ok(()));
    }

    #[test]
    fn one_ack_releases_every_send_it_covers() {
        let s = std::sync::Arc::new(service(5_000));
        s.connection_opened();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let acker = {
            let s = s.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                s.slave_acked(300);
            })
        };
        let results = runtime.block_on(async {
            let (a, b, c) = tokio::join!(
                s.wait_for_slave(100),
                s.wait_for_slave(200),
                s.wait_for_slave(300)
            );
            vec![a, b, c]
        });
        acker.join().unwrap();
        assert_eq!(results, vec![Ok(()), Ok(()), Ok(())]);
        assert_eq!(
            s.runtime_state(350),
            HaRuntimeState {
                slave_count: 1,
                max_replicated_offset: 300,
                lag_bytes: 50
            }
        );
    }
}
