//! What the tasks of a server share: the server-wide state ([`Shared`], one per server, used by
//! every worker thread) and one worker thread's state ([`Worker`], never leaves its thread), with
//! the connection counts both keep.

use super::config::{effective_connections_max, nofile_soft_limit, ServerConfig};
use super::shutdown::StopSignals;
use std::cell::Cell;
use std::collections::HashMap;
use std::net::IpAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// Time for writers to flush after the grace period, before connections are dropped.
const SHUTDOWN_FLUSH_MARGIN_MS: u64 = 500;

/// The number of open connections of a server, readable from any thread: a plain atomic the
/// broker's metrics read at scrape time (the network runtime imports no metrics code).
/// (`Default` counts nothing: a reader for code that has no server, e.g. tests.)
#[derive(Debug, Clone, Default)]
pub struct LiveConnections(Arc<AtomicUsize>);

impl LiveConnections {
    pub fn get(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

/// State shared by every worker thread of one server.
pub(crate) struct Shared<H> {
    pub config: ServerConfig,
    pub handler: Arc<H>,
    pub shutdown: StopSignals,
    /// Live connections over all workers, bounded by `connections_max`.
    connections: Arc<AtomicUsize>,
    /// `config.connections_max`, lowered to fit the open-file limit.
    pub connections_max: usize,
    /// Live connections per remote IP, when `config.connections_max_per_ip` is set. Locked once
    /// per accept and once per close, never on the request path.
    per_ip: Mutex<HashMap<IpAddr, usize>>,
}

impl<H> Shared<H> {
    pub fn new(config: ServerConfig, handler: Arc<H>, shutdown: StopSignals) -> Self {
        let nofile = nofile_soft_limit();
        let connections_max = effective_connections_max(config.connections_max, nofile);
        tracing::info!(
            connections_max,
            configured = config.connections_max,
            nofile_soft_limit = ?nofile,
            connections_max_per_ip = config.connections_max_per_ip,
            "connection limits"
        );
        Shared {
            config,
            handler,
            shutdown,
            connections: Arc::new(AtomicUsize::new(0)),
            connections_max,
            per_ip: Mutex::new(HashMap::new()),
        }
    }

    /// A reader of the live connection count, for other threads (metrics).
    pub fn live_connections(&self) -> LiveConnections {
        LiveConnections(self.connections.clone())
    }

    /// Counts a connection from `ip`, or false when `connections_max_per_ip` are already open.
    fn claim_ip(&self, ip: IpAddr) -> bool {
        let cap = self.config.connections_max_per_ip;
        // A poisoned lock only means another thread panicked while counting; the map is whole.
        let mut per_ip = self.per_ip.lock().unwrap_or_else(|e| e.into_inner());
        let count = per_ip.entry(ip).or_insert(0);
        if *count >= cap {
            return false;
        }
        *count += 1;
        true
    }

    fn release_ip(&self, ip: IpAddr) {
        let mut per_ip = self.per_ip.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = per_ip.get_mut(&ip) {
            *count -= 1;
            if *count == 0 {
                per_ip.remove(&ip);
            }
        }
    }
}

/// Whether a worker holding `live` of the server's `total` connections would hold more than
/// an even split over `workers` (rounded up) if it took the next one. The worker with the
/// fewest connections never does (it holds at most `total / workers`), and with one worker
/// none does. Counting the next connection makes a pair that arrives together go to two
/// workers: after the first, its worker holds 1 of 1, which is its share of 2.
pub(crate) fn holds_its_share(live: usize, total: usize, workers: usize) -> bool {
    live + 1 > (total + 1).div_ceil(workers)
}

/// Why a new connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    ConnectionsMax,
    ConnectionsMaxPerIp,
}

/// One worker thread's state, shared by its tasks (never leaves the thread).
pub(crate) struct Worker<H> {
    pub index: usize,
    pub shared: Arc<Shared<H>>,
    live_connections: Cell<usize>,
    all_closed: Notify,
}

impl<H> Worker<H> {
    pub fn new(index: usize, shared: Arc<Shared<H>>) -> Self {
        Worker {
            index,
            shared,
            live_connections: Cell::new(0),
            all_closed: Notify::new(),
        }
    }

    /// Counts a new connection from `ip`, or says which limit refuses it.
    pub fn claim_connection_slot(
        self: &Rc<Self>,
        ip: IpAddr,
    ) -> Result<ConnectionSlot<H>, Refused> {
        let max = self.shared.connections_max;
        let claimed =
            self.shared
                .connections
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                    (n < max).then_some(n + 1)
                });
        if claimed.is_err() {
            return Err(Refused::ConnectionsMax);
        }
        let ip = (self.shared.config.connections_max_per_ip != 0).then_some(ip);
        // The slot releases the total count (and the IP's) when dropped, so build it first.
        self.live_connections.set(self.live_connections.get() + 1);
        let mut slot = ConnectionSlot {
            worker: self.clone(),
            ip: None,
        };
        if let Some(ip) = ip {
            if !self.shared.claim_ip(ip) {
                return Err(Refused::ConnectionsMaxPerIp);
            }
            slot.ip = Some(ip);
        }
        Ok(slot)
    }

    /// True when taking one more connection would give this worker more than an even split
    /// of the server's connections, that one included ([`holds_its_share`]).
    pub fn holds_its_share(&self) -> bool {
        holds_its_share(
            self.live_connections.get(),
            self.shared.connections.load(Ordering::Relaxed),
            self.shared.config.worker_threads,
        )
    }

    /// Waits until this worker's connections closed, bounded by the grace period plus a margin
    /// for the writers' last flush.
    pub async fn wait_connections_closed(&self) {
        let grace = Duration::from_millis(self.shared.config.shutdown_grace_ms)
            + Duration::from_millis(SHUTDOWN_FLUSH_MARGIN_MS);
        let deadline = tokio::time::Instant::now() + grace;
        while self.live_connections.get() > 0 {
            if tokio::time::timeout_at(deadline, self.all_closed.notified())
                .await
                .is_err()
            {
                tracing::warn!(
                    worker = self.index,
                    live = self.live_connections.get(),
                    "connections still open after the shutdown grace period; dropping them"
                );
                return;
            }
        }
    }
}

/// Releases a connection's place in the counts when the connection task ends (even by panic).
pub(crate) struct ConnectionSlot<H> {
    worker: Rc<Worker<H>>,
    /// Counted in the per-IP map.
    ip: Option<IpAddr>,
}

impl<H> Drop for ConnectionSlot<H> {
    fn drop(&mut self) {
        if let Some(ip) = self.ip {
            self.worker.shared.release_ip(ip);
        }
        self.worker
            .shared
            .connections
            .fetch_sub(1, Ordering::AcqRel);
        let live = self.worker.live_connections.get();
        debug_assert!(live > 0);
        self.worker.live_connections.set(live.saturating_sub(1));
        if live == 1 {
            self.worker.all_closed.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::holds_its_share;

    #[test]
    fn a_worker_waits_once_the_next_connection_would_put_it_over_an_even_split() {
        // Two workers: the first of a pair makes its worker wait, so the second goes elsewhere.
        assert!(holds_its_share(1, 1, 2));
        assert!(!holds_its_share(0, 1, 2));
        assert!(!holds_its_share(1, 2, 2));
        assert!(holds_its_share(2, 3, 2));
        assert!(!holds_its_share(0, 0, 2));
        // One worker never waits.
        for n in 0..10 {
            assert!(!holds_its_share(n, n, 1));
        }
        // Whatever the split, the worker with the fewest connections never waits.
        for workers in 1..6usize {
            for total in 0..40usize {
                let fewest = total / workers;
                assert!(
                    !holds_its_share(fewest, total, workers),
                    "{fewest}/{total}/{workers}"
                );
            }
        }
        // Four workers, 8 connections: 2 each is the share of 9 rounded up (3), 3 is not.
        assert!(!holds_its_share(2, 8, 4));
        assert!(holds_its_share(3, 8, 4));
    }
}
