//! The pull-wake service (Java `PullRequestHoldService` thread + `pullMessageExecutor`):
//! re-executes parked pulls that an arrival woke, and every `check_interval_ms` runs the hold
//! table's check, which answers pulls whose time is up and catches missed wake-ups.
//!
//! The store calls [`ArrivalNotifier::arriving`] on the appending thread. That only asks the
//! hold table whether anything is parked on the queue (an atomic load after a shard lookup)
//! and, if so, hands the arrival to this thread; the filters, the drain and the re-executed
//! pulls all run here. So a send costs the same whether 0 or 100,000 pulls wait on its queue.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crossbeam::channel::{Receiver, RecvTimeoutError};

use crate::broker::controller::BrokerController;
use crate::broker::longpoll::WakeReason;
use crate::broker::processor::now_ms;
use crate::broker::processor::pull::{self, ParkedPullRequest, PullOutcome};
use crate::broker::server::Outbound;
use crate::broker::stop::StopFlag;
use crate::store::ArrivalListener;

/// Work for the pull-wake thread.
pub enum WakeItem {
    /// A parked pull to re-execute now.
    Pull {
        pull: ParkedPullRequest,
        reason: WakeReason,
    },
    /// A message arrived on a queue with parked pulls: wake those it satisfies.
    Arrival {
        topic: String,
        queue_id: i32,
        max_offset: i64,
        tags_code: i64,
        properties: Vec<u8>,
    },
}

impl BrokerController {
    /// Queues a woken pull for re-execution.
    pub fn wake(&self, pull: ParkedPullRequest, reason: WakeReason) {
        self.send_wake_item(WakeItem::Pull { pull, reason });
    }

    fn send_wake_item(&self, item: WakeItem) {
        // The channel is unbounded, but what enters it is bounded: pulls taken out of the
        // bounded hold table, and arrivals only for queues that have parked pulls.
        if self.wake_queue.send(item).is_err() {
            tracing::debug!("pull-wake service stopped; dropping a wake-up");
        }
    }
}

/// Feeds store arrivals into the hold table.
pub struct ArrivalNotifier {
    pub ctrl: Weak<BrokerController>,
}

impl ArrivalListener for ArrivalNotifier {
    fn arriving(
        &self,
        topic: &str,
        queue_id: i32,
        logic_offset_max_next: i64,
        tags_code: i64,
        _store_timestamp_ms: i64,
        properties: &[u8],
    ) {
        let Some(ctrl) = self.ctrl.upgrade() else {
            return;
        };
        if ctrl.hold_table.is_empty() || !ctrl.hold_table.has_parked(topic, queue_id) {
            return;
        }
        ctrl.send_wake_item(WakeItem::Arrival {
            topic: topic.to_string(),
            queue_id,
            max_offset: logic_offset_max_next,
            tags_code,
            properties: properties.to_vec(),
        });
    }
}

/// Runs one wake item on the pull-wake thread.
fn handle(ctrl: &Arc<BrokerController>, item: WakeItem) {
    match item {
        WakeItem::Pull { pull, reason } => execute_when_wakeup(ctrl, pull, reason),
        WakeItem::Arrival {
            topic,
            queue_id,
            max_offset,
            tags_code,
            properties,
        } => {
            let woken = ctrl.hold_table.notify_message_arriving(
                &topic,
                queue_id,
                max_offset,
                tags_code,
                &properties,
            );
            for (pull, reason) in woken {
                execute_when_wakeup(ctrl, pull, reason);
            }
        }
    }
}

/// Re-executes one woken pull and sends its response on the pull's connection.
pub fn execute_when_wakeup(
    ctrl: &Arc<BrokerController>,
    pull: ParkedPullRequest,
    reason: WakeReason,
) {
    let ParkedPullRequest {
        header,
        context,
        sender,
        ..
    } = pull;
    if sender.is_closed() {
        return;
    }
    tracing::trace!(
        ?reason,
        topic = header.topic,
        queue_id = header.queue_id,
        "re-executing parked pull"
    );
    match pull::process(ctrl, header, context, None, false) {
        PullOutcome::Respond(response) => {
            if let Err(e) = sender.send(Outbound::Command(response)) {
                tracing::debug!(error = %e, "could not answer a woken pull");
            }
        }
        PullOutcome::Parked => debug_assert!(false, "a re-executed pull is never parked"),
    }
}

/// Longest the loop sleeps before looking at the stop flag.
const STOP_POLL_INTERVAL_MS: u64 = 100;

/// The service loop; returns when `stop` is raised, the controller is dropped or the channel
/// closes.
pub fn run(
    ctrl: Weak<BrokerController>,
    wake_rx: Receiver<WakeItem>,
    check_interval_ms: u64,
    stop: StopFlag,
) {
    let interval = Duration::from_millis(check_interval_ms.max(1));
    let mut next_check = Instant::now() + interval;
    while !stop.is_raised() {
        let timeout = next_check
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(STOP_POLL_INTERVAL_MS));
        match wake_rx.recv_timeout(timeout) {
            Ok(item) => {
                let Some(ctrl) = ctrl.upgrade() else { return };
                handle(&ctrl, item);
                // Drain what is already queued without re-checking the clock each time.
                while let Ok(item) = wake_rx.try_recv() {
                    handle(&ctrl, item);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        if Instant::now() >= next_check {
            let Some(ctrl) = ctrl.upgrade() else { return };
            let store = ctrl.store.clone();
            let due = ctrl.hold_table.check_expired(now_ms(), |topic, queue_id| {
                store.max_offset_in_queue(topic, queue_id)
            });
            for (pull, reason) in due {
                execute_when_wakeup(&ctrl, pull, reason);
            }
            next_check = Instant::now() + interval;
        }
    }
}
