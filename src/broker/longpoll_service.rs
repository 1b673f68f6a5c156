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
use crate::broker::server::{ConnectionSender, Outbound, SendError};
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
fn handle(ctrl: &Arc<BrokerController>, item: WakeItem, unsent: &mut Unsent) {
    match item {
        WakeItem::Pull { pull, reason } => execute_when_wakeup(ctrl, pull, reason, unsent),
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
                execute_when_wakeup(ctrl, pull, reason, unsent);
            }
        }
    }
}

/// Responses of woken pulls whose connection's write queue was full. They are retried until
/// the queue has room or the connection closes; dropping one would leave the client waiting for
/// a pull that was answered. Their number is bounded by the hold table's bound (each comes from
/// one parked pull).
#[derive(Default)]
pub struct Unsent {
    responses: std::collections::VecDeque<(ConnectionSender, Outbound)>,
}

impl Unsent {
    fn send_or_keep(&mut self, sender: ConnectionSender, outbound: Outbound) {
        match sender.send(outbound) {
            Ok(()) => {}
            Err(SendError::Full(outbound)) => self.responses.push_back((sender, *outbound)),
            Err(SendError::Closed(_)) => {}
        }
    }

    /// Retries every kept response once, in order.
    fn retry(&mut self) {
        for _ in 0..self.responses.len() {
            if let Some((sender, outbound)) = self.responses.pop_front() {
                self.send_or_keep(sender, outbound);
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.responses.is_empty()
    }
}

/// Re-executes one woken pull and sends its response on the pull's connection.
pub fn execute_when_wakeup(
    ctrl: &Arc<BrokerController>,
    pull: ParkedPullRequest,
    reason: WakeReason,
    unsent: &mut Unsent,
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
        PullOutcome::Respond(response) => unsent.send_or_keep(sender, Outbound::Command(response)),
        PullOutcome::Parked => debug_assert!(false, "a re-executed pull is never parked"),
    }
}

/// Longest the loop sleeps before looking at the stop flag.
const STOP_POLL_INTERVAL_MS: u64 = 100;
/// How soon responses held back by a full write queue are retried.
const UNSENT_RETRY_INTERVAL_MS: u64 = 1;

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
    let mut unsent = Unsent::default();
    while !stop.is_raised() {
        unsent.retry();
        let poll_ms = if unsent.is_empty() {
            STOP_POLL_INTERVAL_MS
        } else {
            UNSENT_RETRY_INTERVAL_MS
        };
        let timeout = next_check
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(poll_ms));
        match wake_rx.recv_timeout(timeout) {
            Ok(item) => {
                let Some(ctrl) = ctrl.upgrade() else { return };
                handle(&ctrl, item, &mut unsent);
                // Drain what is already queued without re-checking the clock each time.
                while let Ok(item) = wake_rx.try_recv() {
                    handle(&ctrl, item, &mut unsent);
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
                execute_when_wakeup(&ctrl, pull, reason, &mut unsent);
            }
            next_check = Instant::now() + interval;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::server::ConnectionContext;
    use crate::remoting::command::RemotingCommand;

    #[test]
    fn responses_to_a_full_write_queue_are_kept_and_retried_not_dropped() {
        let addr = "127.0.0.1:1".parse().unwrap();
        let (ctx, mut rx) = ConnectionContext::detached(1, addr, addr, 1);
        let mut unsent = Unsent::default();
        for opaque in 0..3 {
            let cmd = RemotingCommand::request(11).with_opaque(opaque);
            unsent.send_or_keep(ctx.sender().clone(), Outbound::Command(cmd));
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
        unsent.send_or_keep(ctx.sender().clone(), Outbound::Command(cmd.clone()));
        unsent.send_or_keep(ctx.sender().clone(), Outbound::Command(cmd));
        drop(rx);
        unsent.retry();
        assert!(unsent.is_empty());
    }
}
