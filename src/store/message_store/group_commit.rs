//! Group commit for `sync` flush (Java `CommitLog.GroupCommitService`): the producers waiting
//! for their bytes to be durable, and how the flush thread batches them.
//!
//! Java's service wakes on a request or every 10 ms and fsyncs for each request in turn. Here
//! the flush thread starts the next fsync as soon as the previous one ends whenever someone
//! waits, wakes exactly the waiters a completed fsync covers (each through its own one-shot
//! channel: no waiter polls or re-checks a shared offset), and fails every waiter of a batch
//! whose fsync failed. The only delay is adaptive: when fewer producers wait than a fsync
//! usually covers, it waits for more for at most half the measured fsync time (an EWMA),
//! never longer than [`GATHER_MAX`]. Java has no such knob, so neither do we.

use std::time::Duration;

use tokio::sync::oneshot;

use crate::store::error::StoreError;

/// Weight of the newest sample in the EWMAs of fsync time and batch size (as TCP's RTT
/// estimator: 1/8).
const EWMA_WEIGHT: f64 = 0.125;

/// A gather waits for at most this fraction of the measured fsync time: waiting longer costs
/// the producers already waiting more than an fsync of their own would.
const GATHER_FRACTION_OF_FSYNC: f64 = 0.5;

/// Upper bound of a gather, whatever the measured fsync time (a slow disk batches by itself:
/// everything that arrives during a long fsync goes into the next one).
pub(super) const GATHER_MAX: Duration = Duration::from_micros(500);

/// At most this many CommitLog fsyncs of group commit run at once: the flush thread's and the
/// second flusher's (`sync` flush). Producers that come in during an fsync get one of their
/// own at once instead of waiting for that one to end; more than two would only add threads.
pub(super) const FLUSHERS: usize = 2;

/// The second flusher runs only while the measured fsync time (the EWMA) is at least this.
/// It pays where an fsync is slow: on a loaded VM whose fsyncs took 2.4 to 5 ms it raised W2's
/// throughput by a median 12 %. Where fsyncs are short and the broker is bound by CPU it costs:
/// at 0.35 to 0.4 ms W2 without it sent 21 % more at 14 % less CPU
/// per message (docs/BENCHMARKS.md, "The second flusher only for slow fsyncs"). A producer
/// that arrives during a short fsync waits for at most that fsync; 1 ms lies between the two.
pub(super) const SECOND_FLUSHER_MIN_FSYNC: Duration = Duration::from_millis(1);

/// The CommitLog fsyncs started: each takes a ticket as it starts and is published (its
/// offset made the flushed one, its waiters woken, or its failure told) in ticket order, so a
/// later fsync never vouches for bytes an earlier one failed on.
#[derive(Debug, Default)]
pub(super) struct FsyncOrder {
    next_ticket: u64,
    next_publish: u64,
    /// The highest CommitLog offset a started fsync covers.
    started_phy_offset: i64,
}

impl FsyncOrder {
    /// An fsync covering the bytes below `covers_phy_offset` starts: its ticket.
    pub(super) fn start(&mut self, covers_phy_offset: i64) -> u64 {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.started_phy_offset = self.started_phy_offset.max(covers_phy_offset);
        ticket
    }

    /// Fsyncs started and not yet published.
    pub(super) fn in_flight(&self) -> usize {
        (self.next_ticket - self.next_publish) as usize
    }

    /// Whether every fsync started before `ticket` is published.
    pub(super) fn is_turn(&self, ticket: u64) -> bool {
        ticket == self.next_publish
    }

    /// The fsync of `ticket`, whose turn it was, is published.
    pub(super) fn published(&mut self, ticket: u64) {
        assert!(self.is_turn(ticket), "fsync {ticket} published out of turn");
        self.next_publish += 1;
    }

    /// Whether a started fsync covers the bytes below `end_phy_offset`.
    pub(super) fn covers(&self, end_phy_offset: i64) -> bool {
        end_phy_offset <= self.started_phy_offset
    }

    /// Whether the second flusher should start an fsync for a waiter ending at
    /// `end_phy_offset`: the flush thread is in one that does not cover it, and fewer than
    /// [`FLUSHERS`] run.
    pub(super) fn second_flusher_helps(&self, end_phy_offset: i64) -> bool {
        (1..FLUSHERS).contains(&self.in_flight()) && !self.covers(end_phy_offset)
    }
}

/// What a waiter hears: its bytes are durable, or the fsync that was to cover them failed.
pub(super) type FlushOutcome = Result<(), StoreError>;

/// One producer waiting for the fsync covering `end_phy_offset`.
#[derive(Debug)]
pub(super) struct Waiter {
    pub(super) end_phy_offset: i64,
    pub(super) tx: oneshot::Sender<FlushOutcome>,
}

/// What the flush thread is doing, so that a new waiter signals it only when that changes
/// something (a condvar notify is a syscall).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) enum FlusherState {
    /// In an fsync or between two: it looks at the waiters before it sleeps.
    #[default]
    Busy,
    /// Asleep until a request or the next timer.
    Idle,
    /// Waiting for `target` waiters before the next fsync.
    Gathering { target: usize },
}

impl FlusherState {
    /// Whether a new waiter, making `waiting` in all, must wake the flush thread.
    pub(super) fn wakes_on(self, waiting: usize) -> bool {
        match self {
            FlusherState::Busy => false,
            FlusherState::Idle => true,
            FlusherState::Gathering { target } => waiting >= target,
        }
    }
}

/// The wait before an fsync: until `target` producers wait, for at most `max_wait`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Gather {
    pub(super) target: usize,
    pub(super) max_wait: Duration,
}

/// The flush thread's measurements: EWMAs of the fsync time and of the waiters one fsync woke.
#[derive(Debug, Default, Clone)]
pub(super) struct GroupCommitBatcher {
    /// `None` before the first measured fsync.
    fsync_ewma_s: Option<f64>,
    batch_ewma: f64,
}

impl GroupCommitBatcher {
    /// Records a completed group commit: its fsync took `fsync`, it woke `woken` waiters.
    pub(super) fn observe(&mut self, fsync: Duration, woken: usize) {
        let t = fsync.as_secs_f64();
        self.fsync_ewma_s = Some(match self.fsync_ewma_s {
            None => t,
            Some(avg) => avg + EWMA_WEIGHT * (t - avg),
        });
        self.batch_ewma += EWMA_WEIGHT * (woken as f64 - self.batch_ewma);
    }

    /// Whether fsyncs take long enough for a second one beside a running one to pay
    /// ([`SECOND_FLUSHER_MIN_FSYNC`]); not before the first is measured.
    pub(super) fn wants_second_flusher(&self) -> bool {
        self.fsync_ewma_s
            .is_some_and(|s| s >= SECOND_FLUSHER_MIN_FSYNC.as_secs_f64())
    }

    /// Measured fsync time (EWMA), `None` before the first one.
    #[cfg(test)]
    pub(super) fn fsync_ewma(&self) -> Option<Duration> {
        self.fsync_ewma_s.map(Duration::from_secs_f64)
    }

    /// Whether to wait for more producers before fsyncing for the `waiting` ones: only when
    /// some wait (an fsync for none is an append's request, done at once), fewer than an fsync
    /// usually covers, and the fsync time is known.
    pub(super) fn plan(&self, waiting: usize) -> Option<Gather> {
        let fsync_s = self.fsync_ewma_s?;
        let target = self.batch_ewma.round() as usize;
        if waiting == 0 || waiting >= target {
            return None;
        }
        let max_wait = Duration::from_secs_f64(fsync_s * GATHER_FRACTION_OF_FSYNC).min(GATHER_MAX);
        (!max_wait.is_zero()).then_some(Gather { target, max_wait })
    }
}

/// Removes from `waiters` those whose bytes lie below `flushed_phy_offset` and returns them.
pub(super) fn take_covered(waiters: &mut Vec<Waiter>, flushed_phy_offset: i64) -> Vec<Waiter> {
    let (covered, rest): (Vec<Waiter>, Vec<Waiter>) = std::mem::take(waiters)
        .into_iter()
        .partition(|w| w.end_phy_offset <= flushed_phy_offset);
    *waiters = rest;
    covered
}

/// Tells each of `waiters` its bytes are durable.
pub(super) fn complete(waiters: Vec<Waiter>) {
    for w in waiters {
        // A waiter that timed out dropped its receiver; nobody is left to tell.
        let _ = w.tx.send(Ok(()));
    }
}

/// Fails each of `waiters` with the error `error` makes: their bytes are written but will not
/// be made durable (the store turned read-only).
pub(super) fn fail(waiters: Vec<Waiter>, error: impl Fn() -> StoreError) {
    for w in waiters {
        let _ = w.tx.send(Err(error()));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn waiter(end: i64) -> (Waiter, oneshot::Receiver<FlushOutcome>) {
        let (tx, rx) = oneshot::channel();
        (
            Waiter {
                end_phy_offset: end,
                tx,
            },
            rx,
        )
    }

    #[test]
    fn no_gather_before_the_first_fsync_is_measured() {
        let b = GroupCommitBatcher::default();
        assert_eq!(b.fsync_ewma(), None);
        assert_eq!(b.plan(1), None);
        assert_eq!(b.plan(100), None);
    }

    #[test]
    fn gathers_for_half_the_measured_fsync_while_fewer_wait_than_a_fsync_covers() {
        let mut b = GroupCommitBatcher::default();
        for _ in 0..64 {
            b.observe(Duration::from_micros(200), 32);
        }
        let ewma = b.fsync_ewma().unwrap();
        assert!((ewma.as_secs_f64() - 200e-6).abs() < 1e-9, "{ewma:?}");
        let g = b.plan(4).expect("4 waiting, 32 usual: gather");
        assert_eq!(g.target, 32);
        assert!(
            (g.max_wait.as_secs_f64() - 100e-6).abs() < 1e-9,
            "{:?}",
            g.max_wait
        );
        // As many as usual, or more: fsync at once.
        assert_eq!(b.plan(32), None);
        assert_eq!(b.plan(64), None);
        // Nobody waiting (an append's request for a WAIT=false message): fsync at once.
        assert_eq!(b.plan(0), None);
    }

    #[test]
    fn the_gather_follows_the_fsync_time_and_is_bounded() {
        let mut b = GroupCommitBatcher::default();
        b.observe(Duration::from_micros(100), 16);
        let fast = b.plan(1).map(|g| g.max_wait);
        for _ in 0..64 {
            b.observe(Duration::from_millis(20), 16);
        }
        let slow = b.plan(1).unwrap().max_wait;
        assert!(fast.unwrap_or_default() < slow);
        assert_eq!(slow, GATHER_MAX);
    }

    #[test]
    fn a_single_producer_never_waits() {
        let mut b = GroupCommitBatcher::default();
        for _ in 0..64 {
            b.observe(Duration::from_micros(150), 1);
        }
        assert_eq!(b.plan(1), None);
    }

    #[test]
    fn the_batch_estimate_shrinks_when_producers_go_away() {
        let mut b = GroupCommitBatcher::default();
        for _ in 0..64 {
            b.observe(Duration::from_micros(150), 64);
        }
        assert!(b.plan(2).is_some());
        for _ in 0..64 {
            b.observe(Duration::from_micros(150), 2);
        }
        assert_eq!(b.plan(2), None);
    }

    #[test]
    fn a_new_waiter_wakes_the_flusher_only_when_that_changes_something() {
        assert!(!FlusherState::Busy.wakes_on(1));
        assert!(FlusherState::Idle.wakes_on(1));
        let g = FlusherState::Gathering { target: 3 };
        assert!(!g.wakes_on(2));
        assert!(g.wakes_on(3));
    }

    #[test]
    fn fsyncs_are_published_in_the_order_they_started() {
        let mut order = FsyncOrder::default();
        let a = order.start(100);
        let b = order.start(250);
        assert_eq!(order.in_flight(), 2);
        assert!(order.is_turn(a));
        assert!(!order.is_turn(b), "b waits for a, even when it ends first");
        order.published(a);
        assert!(order.is_turn(b));
        order.published(b);
        assert_eq!(order.in_flight(), 0);
        assert!(order.covers(250));
        assert!(!order.covers(251));
    }

    #[test]
    #[should_panic(expected = "out of turn")]
    fn publishing_out_of_turn_is_a_bug() {
        let mut order = FsyncOrder::default();
        let _a = order.start(100);
        let b = order.start(200);
        order.published(b);
    }

    #[test]
    fn the_second_flusher_is_wanted_only_while_fsyncs_are_slow() {
        let mut b = GroupCommitBatcher::default();
        assert!(!b.wants_second_flusher(), "nothing measured yet");
        for _ in 0..20 {
            b.observe(Duration::from_micros(350), 10);
        }
        assert!(!b.wants_second_flusher(), "0.35 ms fsyncs");
        for _ in 0..20 {
            b.observe(Duration::from_millis(3), 10);
        }
        assert!(b.wants_second_flusher(), "3 ms fsyncs");
        for _ in 0..40 {
            b.observe(Duration::from_micros(350), 10);
        }
        assert!(!b.wants_second_flusher(), "fast again");
    }

    #[test]
    fn the_second_flusher_helps_only_beside_a_running_fsync_that_does_not_cover_the_waiter() {
        let mut order = FsyncOrder::default();
        // Nothing runs: the flush thread takes the request.
        assert!(!order.second_flusher_helps(100));
        let a = order.start(100);
        assert!(
            !order.second_flusher_helps(100),
            "covered by the running fsync"
        );
        assert!(order.second_flusher_helps(101));
        let b = order.start(300);
        assert_eq!(order.in_flight(), FLUSHERS);
        assert!(!order.second_flusher_helps(400), "both flushers busy");
        order.published(a);
        order.published(b);
        assert!(!order.second_flusher_helps(400));
    }

    #[test]
    fn only_covered_waiters_are_taken_and_woken() {
        let (a, mut ra) = waiter(100);
        let (b, mut rb) = waiter(300);
        let (c, mut rc) = waiter(200);
        let mut waiters = vec![a, b, c];
        let covered = take_covered(&mut waiters, 200);
        assert_eq!(covered.len(), 2);
        assert_eq!(waiters.len(), 1);
        assert_eq!(waiters[0].end_phy_offset, 300);
        complete(covered);
        assert!(matches!(ra.try_recv(), Ok(Ok(()))));
        assert!(matches!(rc.try_recv(), Ok(Ok(()))));
        assert!(rb.try_recv().is_err(), "not covered yet");
    }

    #[test]
    fn a_failed_fsync_fails_every_waiter_with_its_source() {
        let (a, mut ra) = waiter(100);
        let (b, mut rb) = waiter(300);
        let source = Arc::new(StoreError::io(
            "fsync",
            "commitlog/0",
            std::io::Error::from_raw_os_error(5),
        ));
        fail(vec![a, b], || StoreError::FlushFailed {
            source: Arc::clone(&source),
        });
        for rx in [&mut ra, &mut rb] {
            match rx.try_recv() {
                Ok(Err(StoreError::FlushFailed { source })) => {
                    assert!(matches!(*source, StoreError::Io { op: "fsync", .. }));
                }
                other => panic!("expected FlushFailed, got {other:?}"),
            }
        }
    }
}
