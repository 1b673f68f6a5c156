//! What the tasks of a server share: the server-wide state ([`Shared`], one per server, used by
//! every worker thread) and one worker thread's state ([`Worker`], never leaves its thread), with
//! the connection counts: per server, per remote IP and per worker. The per-worker counts pick
//! the worker that serves a new connection ([`least_loaded`]); a connection accepted by one
//! worker for another travels as a [`Handoff`].

use super::config::{effective_connections_max, nofile_soft_limit, ServerConfig};
use super::shutdown::StopSignals;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, Notify};

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
    /// Per worker, by index: its live connections, those handed to it and not started yet
    /// included.
    per_worker: Box<[WorkerConnections]>,
    /// Where the next tie between workers with the fewest connections is broken
    /// ([`least_loaded`]): the worker after the last one chosen.
    next_in_turn: Mutex<usize>,
    /// Per worker, by index: its queue of connections another worker accepted for it. Unbounded
    /// as a channel, bounded by `connections_max`: every queued connection holds a slot.
    handoffs: Box<[mpsc::UnboundedSender<Handoff<H>>]>,
}

/// One worker's connection count, readable and changed from any thread (a connection is
/// counted on its worker from the moment another worker hands it over).
struct WorkerConnections {
    live: AtomicUsize,
    /// Notified when `live` falls to 0 (shutdown waits for it).
    all_closed: Notify,
}

/// A connection accepted by one worker for another: the socket (out of the accepting worker's
/// runtime) and the slot it already holds in the counts. Dropped unserved (the target worker
/// is shutting down), it closes the socket and gives the slot back.
pub(crate) struct Handoff<H> {
    pub stream: std::net::TcpStream,
    pub remote_addr: std::net::SocketAddr,
    pub listener_index: usize,
    pub slot: ConnectionSlot<H>,
}

/// The receiving ends of the workers' hand-off queues, by worker index.
pub(crate) type HandoffReceivers<H> = Vec<mpsc::UnboundedReceiver<Handoff<H>>>;

impl<H> Shared<H> {
    /// The shared state and, by worker index, the receiving ends of the hand-off queues.
    pub fn new(
        config: ServerConfig,
        handler: Arc<H>,
        shutdown: StopSignals,
    ) -> (Self, HandoffReceivers<H>) {
        let (handoffs, receivers): (Vec<_>, Vec<_>) = (0..config.worker_threads)
            .map(|_| mpsc::unbounded_channel())
            .unzip();
        let per_worker = (0..config.worker_threads)
            .map(|_| WorkerConnections {
                live: AtomicUsize::new(0),
                all_closed: Notify::new(),
            })
            .collect();
        let nofile = nofile_soft_limit();
        let connections_max = effective_connections_max(config.connections_max, nofile);
        tracing::info!(
            connections_max,
            configured = config.connections_max,
            nofile_soft_limit = ?nofile,
            connections_max_per_ip = config.connections_max_per_ip,
            "connection limits"
        );
        let shared = Shared {
            config,
            handler,
            shutdown,
            connections: Arc::new(AtomicUsize::new(0)),
            connections_max,
            per_ip: Mutex::new(HashMap::new()),
            per_worker,
            next_in_turn: Mutex::new(0),
            handoffs: handoffs.into_boxed_slice(),
        };
        (shared, receivers)
    }

    /// Queues `handoff` for worker `target`; hands it back when that worker no longer takes
    /// connections (it is shutting down).
    pub fn hand_off(&self, target: usize, handoff: Handoff<H>) -> Result<(), Handoff<H>> {
        self.handoffs[target].send(handoff).map_err(|e| e.0)
    }

    /// Counts a new connection from `ip` on the worker that is to serve it ([`least_loaded`];
    /// the slot names it), or says which limit refuses it. The accepting worker claims the slot
    /// also for a connection it hands to another.
    pub fn claim_connection_slot(
        self: &Arc<Self>,
        ip: IpAddr,
    ) -> Result<ConnectionSlot<H>, Refused> {
        let max = self.connections_max;
        let claimed = self
            .connections
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            });
        if claimed.is_err() {
            return Err(Refused::ConnectionsMax);
        }
        let ip = (self.config.connections_max_per_ip != 0).then_some(ip);
        // The slot releases the total count (and the IP's) when dropped, so build it first.
        let worker_index = self.choose_worker();
        let mut slot = ConnectionSlot {
            shared: self.clone(),
            worker_index,
            ip: None,
        };
        if let Some(ip) = ip {
            if !self.claim_ip(ip) {
                return Err(Refused::ConnectionsMaxPerIp);
            }
            slot.ip = Some(ip);
        }
        Ok(slot)
    }

    /// Picks the worker for a new connection and counts the connection on it, under one lock so
    /// that two workers accepting at once do not both pick the same one. Taken once per
    /// accepted connection, never on the request path.
    fn choose_worker(&self) -> usize {
        // A poisoned lock only means another thread panicked while choosing; the cursor is whole.
        let mut next_in_turn = self.next_in_turn.lock().unwrap_or_else(|e| e.into_inner());
        let live: Vec<usize> = self
            .per_worker
            .iter()
            .map(|w| w.live.load(Ordering::Acquire))
            .collect();
        let chosen = take_turn(&live, &mut next_in_turn);
        self.per_worker[chosen].live.fetch_add(1, Ordering::AcqRel);
        chosen
    }

    fn worker_live(&self, worker_index: usize) -> usize {
        self.per_worker[worker_index].live.load(Ordering::Acquire)
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

/// The index of the worker with the fewest of `live` connections (by worker index); of several
/// with the fewest, the first at or after `next_in_turn`, going round. Connections thus spread
/// evenly whichever worker accepts them, and a tie goes in turn: the two connections a client
/// opens at once go to two workers also while an older connection is still closing (it counts
/// until it has closed, which may be before, between or after the two are chosen).
pub(crate) fn least_loaded(live: &[usize], next_in_turn: usize) -> usize {
    let fewest = live.iter().copied().min().unwrap_or(0);
    let workers = live.len().max(1);
    (0..workers)
        .map(|step| (next_in_turn + step) % workers)
        .find(|&i| live.get(i) == Some(&fewest))
        .unwrap_or(0)
}

/// [`least_loaded`], moving the turn to the worker after the one chosen.
fn take_turn(live: &[usize], next_in_turn: &mut usize) -> usize {
    let chosen = least_loaded(live, *next_in_turn);
    *next_in_turn = (chosen + 1) % live.len().max(1);
    chosen
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
}

impl<H> Worker<H> {
    pub fn new(index: usize, shared: Arc<Shared<H>>) -> Self {
        Worker { index, shared }
    }

    /// Waits until this worker's connections closed, bounded by the grace period plus a margin
    /// for the writers' last flush.
    pub async fn wait_connections_closed(&self) {
        let grace = Duration::from_millis(self.shared.config.shutdown_grace_ms)
            + Duration::from_millis(SHUTDOWN_FLUSH_MARGIN_MS);
        let deadline = tokio::time::Instant::now() + grace;
        let counts = &self.shared.per_worker[self.index];
        loop {
            let closed = counts.all_closed.notified();
            let mut closed = std::pin::pin!(closed);
            // Registered before the check, so a close between the check and the await is seen.
            closed.as_mut().enable();
            if self.shared.worker_live(self.index) == 0 {
                return;
            }
            if tokio::time::timeout_at(deadline, closed).await.is_err() {
                tracing::warn!(
                    worker = self.index,
                    live = self.shared.worker_live(self.index),
                    "connections still open after the shutdown grace period; dropping them"
                );
                return;
            }
        }
    }
}

/// Releases a connection's place in the counts when the connection task ends (even by panic),
/// or when a connection handed to another worker is dropped unserved.
pub(crate) struct ConnectionSlot<H> {
    shared: Arc<Shared<H>>,
    worker_index: usize,
    /// Counted in the per-IP map.
    ip: Option<IpAddr>,
}

impl<H> ConnectionSlot<H> {
    /// The worker this connection is counted on.
    pub fn worker_index(&self) -> usize {
        self.worker_index
    }
}

impl<H> Drop for ConnectionSlot<H> {
    fn drop(&mut self) {
        if let Some(ip) = self.ip {
            self.shared.release_ip(ip);
        }
        self.shared.connections.fetch_sub(1, Ordering::AcqRel);
        let counts = &self.shared.per_worker[self.worker_index];
        let live = counts.live.fetch_sub(1, Ordering::AcqRel);
        debug_assert!(live > 0);
        if live == 1 {
            counts.all_closed.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{least_loaded, take_turn};

    #[test]
    fn a_new_connection_goes_to_the_worker_with_the_fewest() {
        assert_eq!(least_loaded(&[1, 0], 0), 1);
        assert_eq!(least_loaded(&[0, 1], 1), 0);
        assert_eq!(least_loaded(&[2, 1, 1, 4], 3), 1);
        assert_eq!(least_loaded(&[2, 1, 1, 4], 2), 2);
        assert_eq!(least_loaded(&[5], 0), 0);
        // A tie goes to the first at or after the turn, going round.
        assert_eq!(least_loaded(&[3, 3, 3], 2), 2);
        assert_eq!(least_loaded(&[0, 3, 3, 0], 1), 3);
        assert_eq!(least_loaded(&[0, 0], 5), 1);
    }

    /// Chooses as `Shared::choose_worker` does, and counts the connection on the chosen.
    fn choose(live: &mut [usize], next_in_turn: &mut usize) -> usize {
        let chosen = take_turn(live, next_in_turn);
        live[chosen] += 1;
        chosen
    }

    #[test]
    fn connections_opened_one_after_another_fill_the_workers_evenly() {
        let mut live = [0_usize; 4];
        let mut turn = 0;
        for _ in 0..10 {
            choose(&mut live, &mut turn);
        }
        assert_eq!(live, [3, 3, 2, 2]);
    }

    /// Every order of the events: `Some(i)` closes the older connection `i`, `None` opens the
    /// next of the pair.
    fn orders(events: Vec<Option<usize>>) -> Vec<Vec<Option<usize>>> {
        if events.is_empty() {
            return vec![Vec::new()];
        }
        let mut all = Vec::new();
        for i in 0..events.len() {
            let mut rest = events.clone();
            let first = rest.remove(i);
            for mut order in orders(rest) {
                order.insert(0, first);
                all.push(order);
            }
        }
        all
    }

    #[test]
    fn a_pair_opened_while_older_connections_close_lands_on_two_workers() {
        // Two workers; one or two older connections are open (spread by the same rule), then a
        // client opens B and C while the older ones close. Whenever the closes are counted, B
        // and C go to different workers.
        for older_count in 1..=2 {
            let mut events = vec![None, None];
            events.extend((0..older_count).map(Some));
            for order in orders(events) {
                let mut live = [0_usize; 2];
                let mut turn = 0;
                let older: Vec<usize> = (0..older_count)
                    .map(|_| choose(&mut live, &mut turn))
                    .collect();
                let mut pair = Vec::new();
                for event in &order {
                    match event {
                        Some(i) => live[older[*i]] -= 1,
                        None => pair.push(choose(&mut live, &mut turn)),
                    }
                }
                assert_ne!(pair[0], pair[1], "{older_count} older, events {order:?}");
            }
        }
    }
}
