//! The pull-wake service (Java `PullRequestHoldService` thread + `pullMessageExecutor`):
//! re-executes parked pulls that an arrival woke, and every `check_interval_ms` runs the hold
//! table's check, which answers pulls whose time is up and catches missed wake-ups.
//!
//! One thread by default; with more (`RINGMQ_LONGPOLL_WAKE_THREADS`) they share one wake
//! channel, and the first also runs the periodic check. When one arrival wakes many pulls (many
//! groups on one queue), the thread that drained them runs the first itself and puts the rest
//! back on the channel, so every wake thread re-executes a share of them.
//!
//! The store calls [`ArrivalNotifier::arriving`] on the appending thread. That only asks the
//! hold table whether anything is parked on the queue (an atomic load after a shard lookup)
//! and, if so, hands the arrival to this thread; the filters, the drain and the re-executed
//! pulls all run here. So a send costs the same whether 0 or 100,000 pulls wait on its queue.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crossbeam::channel::{Receiver, RecvTimeoutError};

use crate::broker::controller::BrokerController;
use crate::broker::longpoll::hold_table::WakeReason;
use crate::broker::processor::pull::{self, ParkedPullRequest};
use crate::common::now_ms;
use crate::common::StopFlag;
use crate::net::{ConnectionSender, Outbound, SendError};
use crate::store::ArrivalListener;

/// Work for the wake threads.
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

/// Runs one wake item on a wake thread.
fn handle(ctrl: &Arc<BrokerController>, item: WakeItem, share_fan_out: bool, unsent: &mut Unsent) {
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
            run_woken(ctrl, woken, share_fan_out, unsent);
        }
    }
}

/// Re-executes the pulls one drain woke. With `share_fan_out` this thread runs the first and
/// queues the rest on the wake channel, where every wake thread (this one too) takes a share.
fn run_woken(
    ctrl: &Arc<BrokerController>,
    woken: Vec<(ParkedPullRequest, WakeReason)>,
    share_fan_out: bool,
    unsent: &mut Unsent,
) {
    let mut woken = woken.into_iter();
    let Some((first, first_reason)) = woken.next() else {
        return;
    };
    if share_fan_out {
        // Queued before running the first, so idle threads start on them at once.
        for (pull, reason) in woken.by_ref() {
            ctrl.wake(pull, reason);
        }
    }
    execute_when_wakeup(ctrl, first, first_reason, unsent);
    for (pull, reason) in woken {
        execute_when_wakeup(ctrl, pull, reason, unsent);
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
    match pull::process_woken(ctrl, header, context) {
        Some(outbound) => unsent.send_or_keep(sender, outbound),
        None => debug_assert!(false, "a re-executed pull is never parked"),
    }
}

/// Longest the loop sleeps before looking at the stop flag.
const STOP_POLL_INTERVAL_MS: u64 = 100;
/// Wake items handled back to back before the loop looks at its timers and the stop flag.
const WAKE_ITEMS_PER_BATCH: usize = 256;
/// How soon responses held back by a full write queue are retried.
const UNSENT_RETRY_INTERVAL_MS: u64 = 1;

/// One pull-wake thread.
pub struct WakeService {
    pub ctrl: Weak<BrokerController>,
    pub wake_rx: Receiver<WakeItem>,
    /// Run the hold table's periodic check at this period (on one thread only).
    pub check_interval_ms: Option<u64>,
    /// Other threads share the channel: hand them the pulls one arrival wakes.
    pub share_fan_out: bool,
    pub stop: StopFlag,
}

impl WakeService {
    /// The service loop; returns when `stop` is raised, the controller is dropped or the
    /// channel closes.
    pub fn run(self) {
        let WakeService {
            ctrl,
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
                    let Some(ctrl) = ctrl.upgrade() else { return };
                    handle(&ctrl, item, share_fan_out, &mut unsent);
                    // Drain what is already queued without re-checking the clock each time,
                    // but in bounded batches, so a steady stream of wake items cannot keep
                    // this thread from the periodic check, the unsent retries or the stop flag.
                    for _ in 0..WAKE_ITEMS_PER_BATCH {
                        let Ok(item) = wake_rx.try_recv() else { break };
                        handle(&ctrl, item, share_fan_out, &mut unsent);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            if let (Some(next), Some(interval)) = (next_check, interval) {
                if Instant::now() >= next {
                    let Some(ctrl) = ctrl.upgrade() else { return };
                    let store = ctrl.store.clone();
                    let due = ctrl.hold_table.check_expired(now_ms(), |topic, queue_id| {
                        store.max_offset_in_queue(topic, queue_id)
                    });
                    run_woken(&ctrl, due, share_fan_out, &mut unsent);
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

    /// One arrival waking many pulls on one queue: with several wake threads sharing the
    /// fan-out, every parked pull is answered exactly once, with the message.
    #[test]
    fn a_fan_out_shared_by_several_wake_threads_answers_every_pull_once() {
        use crate::broker::processor::pull::{pull_sys_flag, PullOutcome};
        use crate::broker::startup::{build_controller, start_pull_wake};
        use crate::config::Config;
        use crate::remoting::codes::{request_code, response_code};
        use crate::remoting::headers::PullMessageRequestHeader;
        use crate::store::format::encode_properties;
        use crate::store::MessageToStore;

        const CONNECTIONS: usize = 6;
        const PULLS_PER_CONNECTION: usize = 20;
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::default();
        config.store.root_dir = dir.path().join("store");
        config.longpoll.wake_threads = 3;
        let parts = build_controller(config).unwrap();
        let ctrl = parts.ctrl;
        let stop = StopFlag::new();
        let threads = start_pull_wake(&ctrl, parts.wake_rx, &stop).unwrap();
        assert_eq!(threads.len(), 3);
        ctrl.topics
            .create_topic_if_absent("FanOut", 1, 6, 0)
            .unwrap();
        let addr: std::net::SocketAddr = "127.0.0.1:10911".parse().unwrap();
        let mut receivers = Vec::new();
        let mut opaque = 0;
        for c in 0..CONNECTIONS {
            let remote = std::net::SocketAddr::new(addr.ip(), 20_000 + c as u16);
            let (ctx, rx) = ConnectionContext::detached(c as u64, remote, addr, 64);
            for _ in 0..PULLS_PER_CONNECTION {
                opaque += 1;
                let header = PullMessageRequestHeader {
                    // Each pull its own group, as many groups reading one queue.
                    consumer_group: format!("g{opaque}"),
                    topic: "FanOut".to_string(),
                    queue_id: 0,
                    queue_offset: 0,
                    max_msg_nums: 32,
                    sys_flag: pull_sys_flag::SUSPEND | pull_sys_flag::SUBSCRIPTION,
                    commit_offset: 0,
                    suspend_timeout_millis: 20_000,
                    subscription: Some("*".to_string()),
                    sub_version: 0,
                    expression_type: Some("TAG".to_string()),
                    max_msg_bytes: None,
                    request_source: None,
                    proxy_froward_client_id: None,
                };
                let mut request =
                    RemotingCommand::request(request_code::PULL_MESSAGE).with_opaque(opaque);
                header.encode(&mut request);
                let outcome = pull::process_request(&ctrl, &request, remote, ctx.sender());
                assert!(
                    matches!(outcome, PullOutcome::Parked),
                    "pull {opaque} must park"
                );
            }
            receivers.push((ctx, rx));
        }
        ctrl.store
            .put_message(&MessageToStore {
                topic: "FanOut".to_string(),
                queue_id: 0,
                flag: 0,
                body: bytes::Bytes::from_static(b"hello"),
                properties: encode_properties([("TAGS", "TagA")]),
                sys_flag: 0,
                born_timestamp_ms: 1_700_000_000_000,
                born_host: addr,
                reconsume_times: 0,
                prepared_transaction_offset: 0,
            })
            .unwrap();
        let mut answered = std::collections::BTreeMap::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while answered.len() < CONNECTIONS * PULLS_PER_CONNECTION && Instant::now() < deadline {
            for (_, rx) in receivers.iter_mut() {
                while let Ok(outbound) = rx.try_recv() {
                    let Outbound::Command(response) = outbound else {
                        panic!("a 5-byte message is sent by copy");
                    };
                    assert_eq!(
                        response.code,
                        response_code::SUCCESS,
                        "{:?}",
                        response.remark
                    );
                    *answered.entry(response.opaque).or_insert(0) += 1;
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        // Nothing more may come after everyone got an answer.
        std::thread::sleep(Duration::from_millis(100));
        for (_, rx) in receivers.iter_mut() {
            while let Ok(Outbound::Command(response)) = rx.try_recv() {
                *answered.entry(response.opaque).or_insert(0) += 1;
            }
        }
        let expected: std::collections::BTreeMap<i32, i32> = (1..=opaque).map(|o| (o, 1)).collect();
        assert_eq!(
            answered, expected,
            "every parked pull answered exactly once"
        );
        stop.raise();
        for t in threads {
            t.join().unwrap();
        }
        ctrl.store.shutdown().unwrap();
    }
}
