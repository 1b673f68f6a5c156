//! Long polling's service (Java `PullRequestHoldService` thread + `pullMessageExecutor`):
//! [`PullRequestHoldService`] parks pulls that found nothing in the hold table and queues the
//! woken ones; the wake threads ([`WakeService`]) re-execute those through the broker's
//! [`PullWakeHost`], and every `check_interval_ms` run the hold table's check, which answers
//! pulls whose time is up and catches missed wake-ups.
//!
//! One thread by default; with more (`RINGMQ_LONGPOLL_WAKE_THREADS`) they share one wake
//! channel, and the first also runs the periodic check. When one arrival wakes many pulls (many
//! groups on one queue), the thread that drained them runs the first itself and puts the rest
//! back on the channel, so every wake thread re-executes a share of them.
//!
//! The store calls [`ArrivalNotifier::arriving`] on the appending thread. That asks the hold
//! table how many pulls are parked on the queue (an atomic load after a shard lookup). None:
//! nothing to do. At most `wake_inline_parked_max` (`RINGMQ_LONGPOLL_WAKE_INLINE_PARKED_MAX`,
//! default 0, i.e. never): the appending thread drains them and answers the woken pulls
//! itself, so the answer reaches the consumer's connection without first waiting for a wake
//! thread to be scheduled (docs/BENCHMARKS.md "W3: the e2e tail"). At most
//! [`WAKE_ON_CONNECTION_THREAD_PULLS_MAX`]: the appending thread drains them (the filters run
//! there) and hands each to its connection's own network thread ([`DeferredFrame`]), where
//! that connection's writer re-executes it in queue order; no wake thread is involved. More
//! (many consumers on one queue): the arrival goes to the wake threads, which drain the pulls
//! and re-execute them, sharing one store read between the pulls that ask the same thing. So a
//! send does a bounded amount of long-polling work whether 0 or 100,000 pulls wait on its
//! queue, and a common wake-up (one pull per message) costs the sender a drain and a hand-over.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crossbeam::channel::{Receiver, RecvTimeoutError, Sender};

use crate::common::now_ms;
use crate::common::StopFlag;
use crate::net::{ConnectionSender, DeferredFrame, Outbound, SendError};
use crate::remoting::headers::PullMessageRequestHeader;
use crate::store::{ArrivalListener, MessageStore};

use super::connection_parks::ConnectionParks;
use super::hold_table::{HoldTable, TableFull, WakeReason};
use super::pull_request::{ParkedPullRequest, RequestEnvelope};

/// Work for the wake threads.
// A parked pull is most of what this channel carries; boxing it to even out the variants
// would add an allocation to every wake-up.
#[allow(clippy::large_enum_variant)]
pub enum WakeItem {
    /// A parked pull to re-execute now.
    Pull {
        pull: ParkedPullRequest,
        reason: WakeReason,
    },
    /// A share of the pulls one arrival woke, for another wake thread to re-execute.
    Pulls(Vec<(ParkedPullRequest, WakeReason)>),
    /// Responses an appending thread could not queue (a full write queue), for a wake thread
    /// to retry.
    Unsent(Unsent),
    /// A message arrived on a queue with parked pulls: wake those it satisfies.
    Arrival {
        topic: String,
        queue_id: i32,
        max_offset: i64,
        tags_code: i64,
        properties: Vec<u8>,
        /// When the store reported the arrival (wake latency).
        arrived_at: Instant,
    },
}

/// What [`PullRequestHoldService::suspend`] did with a pull.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suspension {
    /// Parked: it is answered later, through its connection's sender.
    Parked,
    /// The table is full; the pull was not parked.
    TableFull,
    /// Its connection has parked its maximum; the pull was not parked.
    ConnectionFull,
}

/// Long polling's state: the hold table of parked pulls, the channel to the wake threads and
/// the store whose queues it watches. The broker holds one; the wake threads reach it through
/// their [`PullWakeHost`].
pub struct PullRequestHoldService {
    hold_table: HoldTable<ParkedPullRequest>,
    connection_parks: Arc<ConnectionParks>,
    /// Pulls woken by arrivals or the periodic check, executed by the wake threads.
    wake_tx: Sender<WakeItem>,
    store: Arc<MessageStore>,
    /// Arrivals on a queue with 1 to this many parked pulls are answered by the appending
    /// thread (`RINGMQ_LONGPOLL_WAKE_INLINE_PARKED_MAX`).
    wake_inline_parked_max: usize,
}

impl PullRequestHoldService {
    /// The service and the receiving end of its wake channel, for the wake threads
    /// ([`WakeService`]).
    pub fn new(
        store: Arc<MessageStore>,
        parked_pulls_max: usize,
        parked_pulls_max_per_connection: usize,
        wake_inline_parked_max: usize,
    ) -> (Self, Receiver<WakeItem>) {
        let (wake_tx, wake_rx) = crossbeam::channel::unbounded();
        let service = PullRequestHoldService {
            hold_table: HoldTable::new(parked_pulls_max),
            connection_parks: ConnectionParks::new(parked_pulls_max_per_connection),
            wake_tx,
            store,
            wake_inline_parked_max,
        };
        (service, wake_rx)
    }

    /// Pulls currently parked.
    pub fn parked_pulls(&self) -> usize {
        self.hold_table.len()
    }

    /// Parks a pull that found nothing (Java `suspendPullRequest`). A message that arrived
    /// between the pull's store lookup and now wakes it at once (queued for the wake threads).
    /// A full table, or a connection at its maximum of parked pulls, refuses it: the caller
    /// answers it now rather than grow memory.
    pub fn suspend(&self, mut pull: ParkedPullRequest) -> Suspension {
        let connection_id = pull.envelope.connection_id;
        let Some(permit) = self.connection_parks.try_acquire(connection_id) else {
            tracing::debug!(
                connection_id,
                "connection has parked its maximum of pulls; answering the pull at once"
            );
            return Suspension::ConnectionFull;
        };
        pull.permit = Some(permit);
        let topic = pull.header.topic.clone();
        let queue_id = pull.header.queue_id;
        let store = &self.store;
        let parked = self.hold_table.park(&topic, queue_id, pull, || {
            store.max_offset_in_queue(&topic, queue_id)
        });
        match parked {
            Ok(ready) => {
                for (pull, reason) in ready {
                    self.wake(pull, reason);
                }
                Suspension::Parked
            }
            Err(TableFull(_refused)) => {
                tracing::debug!(
                    topic,
                    queue_id,
                    "hold table full; answering the pull at once"
                );
                Suspension::TableFull
            }
        }
    }

    /// Queues a woken pull for re-execution.
    pub fn wake(&self, pull: ParkedPullRequest, reason: WakeReason) {
        self.send_wake_item(WakeItem::Pull { pull, reason });
    }

    fn send_wake_item(&self, item: WakeItem) {
        // The channel is unbounded, but what enters it is bounded: pulls taken out of the
        // bounded hold table, and arrivals only for queues that have parked pulls.
        if self.wake_tx.send(item).is_err() {
            tracing::debug!("pull-wake service stopped; dropping a wake-up");
        }
    }

    /// Pulls whose time is up, whose connection closed, or whose offset became readable
    /// (the periodic check).
    fn check_expired(&self) -> Vec<(ParkedPullRequest, WakeReason)> {
        let store = &self.store;
        self.hold_table.check_expired(now_ms(), |topic, queue_id| {
            store.max_offset_in_queue(topic, queue_id)
        })
    }
}

/// The broker side of long polling: where the hold service lives and how a woken pull is
/// answered. The broker's controller implements it (in `processor::pull`), so long polling
/// names no broker type and the imports point one way (processor -> longpoll).
pub trait PullWakeHost: Send + Sync + 'static {
    /// What the re-executions of the pulls one drain woke may share (for example one store
    /// read for every pull asking the same queue at the same offset through the same filter).
    /// A fresh one per drain, dropped when the drain's pulls are answered.
    type Shared: Default;

    fn pull_hold(&self) -> &PullRequestHoldService;

    /// Re-executes a woken pull (Java `executeRequestWhenWakeup`: no second park, no second
    /// offset commit) and returns what to queue on its connection. None only if the pull
    /// parked, which a re-execution never does.
    fn execute_woken(
        &self,
        header: &PullMessageRequestHeader,
        envelope: RequestEnvelope,
        shared: &mut Self::Shared,
    ) -> Option<Outbound>;

    /// An arrival woke parked pulls, and this thread re-executed them `elapsed` after the
    /// store reported it (metrics).
    fn observe_wake_latency(&self, elapsed: Duration);
}

/// Feeds store arrivals into the hold table.
pub struct ArrivalNotifier<H> {
    host: Weak<H>,
}

impl<H> ArrivalNotifier<H> {
    pub fn new(host: Weak<H>) -> Self {
        ArrivalNotifier { host }
    }
}

impl<H: PullWakeHost> ArrivalListener for ArrivalNotifier<H> {
    fn arriving(
        &self,
        topic: &str,
        queue_id: i32,
        max_offset: i64,
        tags_code: i64,
        _store_timestamp_ms: i64,
        properties: &[u8],
    ) {
        let Some(host) = self.host.upgrade() else {
            return;
        };
        let service = host.pull_hold();
        let table = &service.hold_table;
        if table.is_empty() {
            return;
        }
        let parked = table.parked_on(topic, queue_id);
        if parked == 0 {
            return;
        }
        let answer_here = parked <= service.wake_inline_parked_max;
        if !answer_here && parked > WAKE_ON_CONNECTION_THREAD_PULLS_MAX {
            service.send_wake_item(WakeItem::Arrival {
                topic: topic.to_string(),
                queue_id,
                max_offset,
                tags_code,
                properties: properties.to_vec(),
                arrived_at: Instant::now(),
            });
            return;
        }
        // Few pulls wait: this (the appending) thread drains them, with their filters.
        let arrived_at = Instant::now();
        let woken =
            table.notify_message_arriving(topic, queue_id, max_offset, tags_code, properties);
        if woken.is_empty() {
            return;
        }
        if answer_here {
            wake_inline(&*host, woken, arrived_at);
        } else {
            hand_over_from_appending_thread(&host, woken, arrived_at);
        }
    }
}

/// Answers the pulls an arrival woke on this (the appending) thread: at most
/// `wake_inline_parked_max` of them; more (pulls parked since the count was read) go to the
/// wake threads, as do responses whose write queue is full, to be retried there.
fn wake_inline<H: PullWakeHost>(
    host: &H,
    mut woken: Vec<(ParkedPullRequest, WakeReason)>,
    arrived_at: Instant,
) {
    let service = host.pull_hold();
    if woken.len() > service.wake_inline_parked_max {
        let rest = woken.split_off(service.wake_inline_parked_max);
        service.send_wake_item(WakeItem::Pulls(rest));
    }
    let mut shared = H::Shared::default();
    let mut unsent = Unsent::default();
    for (pull, reason) in &mut woken {
        execute_when_wakeup(host, pull, *reason, &mut shared, &mut unsent);
    }
    drop(woken);
    if !unsent.is_empty() {
        service.send_wake_item(WakeItem::Unsent(unsent));
    }
    host.observe_wake_latency(arrived_at.elapsed());
}

/// Hands each pull an arrival on a queue with few parked pulls woke to its connection's
/// writer, on this (the appending) thread: a queue push per pull, no store read. Going
/// through a wake thread first cost a thread hop per message and 7 % of a core at W3's 10,000
/// msg/s (its profile; docs/BENCHMARKS.md, "Woken pulls handed over by the
/// appending thread"). More pulls than [`WAKE_ON_CONNECTION_THREAD_PULLS_MAX`] (parked since
/// the count was read) are re-executed by the wake threads, sharing reads; a hand-over a full
/// write queue refuses goes to a wake thread to retry.
fn hand_over_from_appending_thread<H: PullWakeHost>(
    host: &Arc<H>,
    woken: Vec<(ParkedPullRequest, WakeReason)>,
    arrived_at: Instant,
) {
    let service = host.pull_hold();
    if woken.len() > WAKE_ON_CONNECTION_THREAD_PULLS_MAX {
        service.send_wake_item(WakeItem::Pulls(woken));
        return;
    }
    let mut unsent = Unsent::default();
    for (pull, reason) in woken {
        hand_to_connection(host, pull, reason, arrived_at, &mut unsent);
    }
    if !unsent.is_empty() {
        service.send_wake_item(WakeItem::Unsent(unsent));
    }
}

/// An arrival that woke at most this many pulls hands each to its connection's thread
/// (`hand_to_connection`); one that woke more has them re-executed on the wake threads, where
/// pulls that ask the same thing share a store read. The wake thread got about a fifth of a
/// core on a busy 2-core machine and spent about 6 µs re-executing each woken pull, so at
/// W5's rate wake-ups queued behind it (docs/BENCHMARKS.md, "Woken pulls re-executed on their
/// connection's thread").
pub const WAKE_ON_CONNECTION_THREAD_PULLS_MAX: usize = 4;

/// Runs one wake item on a wake thread.
fn handle<H: PullWakeHost>(
    host: &Arc<H>,
    item: WakeItem,
    share_fan_out: bool,
    unsent: &mut Unsent,
) {
    let host_ref: &H = host;
    match item {
        WakeItem::Pull { mut pull, reason } => {
            execute_when_wakeup(
                host_ref,
                &mut pull,
                reason,
                &mut H::Shared::default(),
                unsent,
            );
        }
        WakeItem::Pulls(mut pulls) => {
            let mut shared = H::Shared::default();
            for (pull, reason) in &mut pulls {
                execute_when_wakeup(host_ref, pull, *reason, &mut shared, unsent);
            }
            drop(pulls);
        }
        WakeItem::Unsent(kept) => unsent.responses.extend(kept.responses),
        WakeItem::Arrival {
            topic,
            queue_id,
            max_offset,
            tags_code,
            properties,
            arrived_at,
        } => {
            let woken = host.pull_hold().hold_table.notify_message_arriving(
                &topic,
                queue_id,
                max_offset,
                tags_code,
                &properties,
            );
            if woken.is_empty() {
                return;
            }
            if woken.len() <= WAKE_ON_CONNECTION_THREAD_PULLS_MAX {
                for (pull, reason) in woken {
                    hand_to_connection(host, pull, reason, arrived_at, unsent);
                }
                return;
            }
            run_woken(host_ref, woken, share_fan_out, unsent);
            host.observe_wake_latency(arrived_at.elapsed());
        }
    }
}

/// Hands a woken pull to its connection's writer, which re-executes it on the connection's
/// thread in queue order, after the frames queued before it ([`DeferredFrame`]). The wake
/// latency is observed when it runs. A frame a full write queue refuses is kept in `unsent`,
/// for a wake thread to queue once there is room (it re-executes the pull only then, on the
/// connection's thread); a closed connection drops it.
fn hand_to_connection<H: PullWakeHost>(
    host: &Arc<H>,
    mut pull: ParkedPullRequest,
    reason: WakeReason,
    arrived_at: Instant,
    unsent: &mut Unsent,
) {
    let sender = pull.sender.clone();
    let deferred = DeferredFrame {
        opaque: pull.envelope.opaque,
        serialize_type: pull.envelope.serialize_type,
        produce: Box::new({
            let host = Arc::clone(host);
            move || {
                let outbound = reexecute(&*host, &mut pull, reason, &mut H::Shared::default());
                host.observe_wake_latency(arrived_at.elapsed());
                outbound
            }
        }),
    };
    unsent.send_or_keep(&sender, Outbound::Deferred(deferred));
}

/// Re-executes the pulls one drain woke. With `share_fan_out` this thread runs the first and
/// queues the rest on the wake channel, where every wake thread (this one too) takes a share.
///
/// The answered pulls are freed only after the drain's last answer is queued: freeing each one
/// between answers (its header's strings, its filter and connection handles, all allocated by
/// the network thread that parked it) took glibc's lock on that thread's arena and shrank the
/// arena as it emptied, the largest share of the wake thread's time per woken pull
/// (docs/BENCHMARKS.md, "100,000 parked pulls on one queue, one append").
fn run_woken<H: PullWakeHost>(
    host: &H,
    mut woken: Vec<(ParkedPullRequest, WakeReason)>,
    share_fan_out: bool,
    unsent: &mut Unsent,
) {
    let mut shared = H::Shared::default();
    if share_fan_out && woken.len() > 1 {
        // Queued before running the first, so idle threads start on them at once; in chunks,
        // so each chunk's re-executions share their reads like one drain's do.
        let mut rest = woken.split_off(1).into_iter();
        loop {
            let chunk: Vec<_> = rest.by_ref().take(FAN_OUT_CHUNK_PULLS).collect();
            if chunk.is_empty() {
                break;
            }
            host.pull_hold().send_wake_item(WakeItem::Pulls(chunk));
        }
    }
    for (pull, reason) in &mut woken {
        execute_when_wakeup(host, pull, *reason, &mut shared, unsent);
    }
    drop(woken);
}

/// Woken pulls per wake item when one drain's pulls are shared between wake threads.
const FAN_OUT_CHUNK_PULLS: usize = 1024;

/// Responses of woken pulls whose connection's write queue was full. They are retried until
/// the queue has room or the connection closes; dropping one would leave the client waiting for
/// a pull that was answered. Their number is bounded by the hold table's bound (each comes from
/// one parked pull).
#[derive(Default)]
pub struct Unsent {
    responses: std::collections::VecDeque<(ConnectionSender, Outbound)>,
}

impl Unsent {
    fn send_or_keep(&mut self, sender: &ConnectionSender, outbound: Outbound) {
        match sender.send(outbound) {
            Ok(()) => {}
            Err(SendError::Full(outbound)) => {
                self.responses.push_back((sender.clone(), *outbound));
            }
            Err(SendError::Closed(_)) => {}
        }
    }

    /// Retries every kept response once, in order.
    fn retry(&mut self) {
        for _ in 0..self.responses.len() {
            if let Some((sender, outbound)) = self.responses.pop_front() {
                self.send_or_keep(&sender, outbound);
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.responses.is_empty()
    }
}

/// Re-executes one woken pull and sends its response on the pull's connection. The pull's
/// place among its connection's parked pulls is given back here, as soon as it is answered;
/// the rest of it is freed by the caller (see [`run_woken`]).
fn execute_when_wakeup<H: PullWakeHost>(
    host: &H,
    pull: &mut ParkedPullRequest,
    reason: WakeReason,
    shared: &mut H::Shared,
    unsent: &mut Unsent,
) {
    if pull.sender.is_closed() {
        pull.permit = None;
        return;
    }
    if let Some(outbound) = reexecute(host, pull, reason, shared) {
        unsent.send_or_keep(&pull.sender, outbound);
    }
}

/// Re-executes a woken pull (on a wake thread, or on its connection's thread when handed
/// over) and gives back its place among its connection's parked pulls.
fn reexecute<H: PullWakeHost>(
    host: &H,
    pull: &mut ParkedPullRequest,
    reason: WakeReason,
    shared: &mut H::Shared,
) -> Option<Outbound> {
    tracing::trace!(
        ?reason,
        topic = pull.header.topic,
        queue_id = pull.header.queue_id,
        "re-executing parked pull"
    );
    let outbound = host.execute_woken(&pull.header, pull.envelope, shared);
    debug_assert!(outbound.is_some(), "a re-executed pull is never parked");
    pull.permit = None;
    outbound
}

/// Longest the loop sleeps before looking at the stop flag.
const STOP_POLL_INTERVAL_MS: u64 = 100;
/// Wake items handled back to back before the loop looks at its timers and the stop flag.
const WAKE_ITEMS_PER_BATCH: usize = 256;
/// How soon responses held back by a full write queue are retried.
const UNSENT_RETRY_INTERVAL_MS: u64 = 1;

/// One pull-wake thread.
pub struct WakeService<H> {
    pub host: Weak<H>,
    pub wake_rx: Receiver<WakeItem>,
    /// Run the hold table's periodic check at this period (on one thread only).
    pub check_interval_ms: Option<u64>,
    /// Other threads share the channel: hand them the pulls one arrival wakes.
    pub share_fan_out: bool,
    pub stop: StopFlag,
}

impl<H: PullWakeHost> WakeService<H> {
    /// The service loop; returns when `stop` is raised, the host is dropped or the channel
    /// closes.
    pub fn run(self) {
        let WakeService {
            host,
            wake_rx,
            check_interval_ms,
            share_fan_out,
            stop,
        } = self;
        let interval = check_interval_ms.map(|ms| Duration::from_millis(ms.max(1)));
        let mut next_check = interval.map(|i| Instant::now() + i);
        let mut unsent = Unsent::default();
        while !stop.is_raised() {
            unsent.retry();
            let poll_ms = if unsent.is_empty() {
                STOP_POLL_INTERVAL_MS
            } else {
                UNSENT_RETRY_INTERVAL_MS
            };
            let mut timeout = Duration::from_millis(poll_ms);
            if let Some(next) = next_check {
                timeout = timeout.min(next.saturating_duration_since(Instant::now()));
            }
            match wake_rx.recv_timeout(timeout) {
                Ok(item) => {
                    let Some(host) = host.upgrade() else { return };
                    handle(&host, item, share_fan_out, &mut unsent);
                    // Drain what is already queued without re-checking the clock each time,
                    // but in bounded batches, so a steady stream of wake items cannot keep
                    // this thread from the periodic check, the unsent retries or the stop flag.
                    for _ in 0..WAKE_ITEMS_PER_BATCH {
                        let Ok(item) = wake_rx.try_recv() else { break };
                        handle(&host, item, share_fan_out, &mut unsent);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            if let (Some(next), Some(interval)) = (next_check, interval) {
                if Instant::now() >= next {
                    let Some(host) = host.upgrade() else { return };
                    let due = host.pull_hold().check_expired();
                    run_woken(&*host, due, share_fan_out, &mut unsent);
                    next_check = Some(Instant::now() + interval);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::ConnectionContext;
    use crate::remoting::command::RemotingCommand;

    #[test]
    fn responses_to_a_full_write_queue_are_kept_and_retried_not_dropped() {
        let addr = "127.0.0.1:1".parse().unwrap();
        let (ctx, mut rx) = ConnectionContext::detached(1, addr, addr, 1);
        let mut unsent = Unsent::default();
        for opaque in 0..3 {
            let cmd = RemotingCommand::request(11).with_opaque(opaque);
            unsent.send_or_keep(ctx.sender(), Outbound::Command(cmd));
        }
        assert_eq!(
            unsent.responses.len(),
            2,
            "one fits the queue of 1, two wait"
        );
        // The writer takes one frame at a time; each retry then fits the next one.
        let mut got = Vec::new();
        for _ in 0..3 {
            if let Ok(Outbound::Command(c)) = rx.try_recv() {
                got.push(c.opaque);
            }
            unsent.retry();
        }
        assert_eq!(got, vec![0, 1, 2], "all delivered, in order");
        // A closed connection's responses are dropped, not kept forever.
        let cmd = RemotingCommand::request(11);
        unsent.send_or_keep(ctx.sender(), Outbound::Command(cmd.clone()));
        unsent.send_or_keep(ctx.sender(), Outbound::Command(cmd));
        drop(rx);
        unsent.retry();
        assert!(unsent.is_empty());
    }
}
