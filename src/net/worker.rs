//! What the tasks of a server share: the server-wide state ([`Shared`], one per server, used by
//! every worker thread) and one worker thread's state ([`Worker`], never leaves its thread), with
//! the connection counts both keep.

use super::config::ServerConfig;
use super::shutdown::StopSignals;
use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// Time for writers to flush after the grace period, before connections are dropped.
const SHUTDOWN_FLUSH_MARGIN_MS: u64 = 500;

/// State shared by every worker thread of one server.
pub(crate) struct Shared<H> {
    pub config: ServerConfig,
    pub handler: Arc<H>,
    pub shutdown: StopSignals,
    /// Live connections over all workers, bounded by `config.connections_max`.
    connections: AtomicUsize,
}

impl<H> Shared<H> {
    pub fn new(config: ServerConfig, handler: Arc<H>, shutdown: StopSignals) -> Self {
        Shared {
            config,
            handler,
            shutdown,
            connections: AtomicUsize::new(0),
        }
    }
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

    /// Counts a new connection, or `None` when `connections_max` are already open.
    pub fn claim_connection_slot(self: &Rc<Self>) -> Option<ConnectionSlot<H>> {
        let max = self.shared.config.connections_max;
        let claimed =
            self.shared
                .connections
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                    (n < max).then_some(n + 1)
                });
        if claimed.is_err() {
            return None;
        }
        self.live_connections.set(self.live_connections.get() + 1);
        Some(ConnectionSlot {
            worker: self.clone(),
        })
    }

    /// True when this worker holds more connections than an even split of the server's would
    /// give it (rounded up). Always false with one worker.
    pub fn holds_more_than_its_share(&self) -> bool {
        let total = self.shared.connections.load(Ordering::Relaxed);
        self.live_connections.get() > total.div_ceil(self.shared.config.worker_threads)
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
}

impl<H> Drop for ConnectionSlot<H> {
    fn drop(&mut self) {
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
