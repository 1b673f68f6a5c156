//! Tests that drive several broker parts together (a controller from `startup`, the pull
//! processor and the wake threads of `longpoll`). They live here, above every part, so that no
//! part's file imports one that imports it.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::Poll;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::broker::controller::BrokerController;
use crate::broker::processor::pull::{self, pull_sys_flag};
use crate::broker::processor::{Handled, RequestContext};
use crate::broker::startup::{build_controller, start_pull_wake};
use crate::common::StopFlag;
use crate::config::Config;
use crate::net::{ConnectionContext, Outbound};
use crate::remoting::codes::{request_code, response_code};
use crate::remoting::command::RemotingCommand;
use crate::remoting::headers::PullMessageRequestHeader;
use crate::store::format::encode_properties;
use crate::store::MessageToStore;

const FAN_OUT_TOPIC: &str = "FanOut";

/// The output of a processor that never waits (its future is ready at the first poll).
pub(super) fn ready<F: Future>(future: F) -> F::Output {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match std::pin::pin!(future).poll(&mut cx) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("the processor waited"),
    }
}

/// A broker without sockets, with `wake_threads` pull-wake threads running.
struct WakingBroker {
    ctrl: Arc<BrokerController>,
    stop: StopFlag,
    threads: Vec<JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl WakingBroker {
    fn start(wake_threads: u64) -> WakingBroker {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::default();
        config.store.root_dir = dir.path().join("store");
        config.longpoll.wake_threads = wake_threads;
        let parts = build_controller(config).unwrap();
        let stop = StopFlag::new();
        let threads = start_pull_wake(&parts.ctrl, parts.wake_rx, &stop).unwrap();
        assert_eq!(threads.len() as u64, wake_threads);
        WakingBroker {
            ctrl: parts.ctrl,
            stop,
            threads,
            _dir: dir,
        }
    }

    fn stop(self) {
        self.stop.raise();
        for t in self.threads {
            t.join().unwrap();
        }
        self.ctrl.store.shutdown().unwrap();
    }
}

/// A long-polling PULL_MESSAGE of `group` for offset 0 of the fan-out topic.
fn suspending_pull(group: String, opaque: i32) -> RemotingCommand {
    let header = PullMessageRequestHeader {
        consumer_group: group,
        topic: FAN_OUT_TOPIC.to_string(),
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
    let mut request = RemotingCommand::request(request_code::PULL_MESSAGE).with_opaque(opaque);
    header.encode(&mut request);
    request
}

fn put_hello(ctrl: &BrokerController, born_host: SocketAddr) {
    ctrl.store
        .put_message(&MessageToStore {
            topic: FAN_OUT_TOPIC.to_string(),
            queue_id: 0,
            flag: 0,
            body: bytes::Bytes::from_static(b"hello"),
            properties: encode_properties([("TAGS", "TagA")]),
            sys_flag: 0,
            born_timestamp_ms: 1_700_000_000_000,
            born_host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
        })
        .unwrap();
}

/// Counts the SUCCESS answers per opaque on `receivers` until `expected` opaques have one or
/// 10 s passed, then for 100 ms more (nothing more may come after everyone got an answer).
fn count_answers(
    receivers: &mut [(ConnectionContext, mpsc::Receiver<Outbound>)],
    expected: usize,
) -> BTreeMap<i32, i32> {
    let mut answered = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while answered.len() < expected && Instant::now() < deadline {
        for (_, rx) in receivers.iter_mut() {
            while let Ok(outbound) = rx.try_recv() {
                let response = answer_command(outbound);
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
    std::thread::sleep(Duration::from_millis(100));
    for (_, rx) in receivers.iter_mut() {
        while let Ok(outbound) = rx.try_recv() {
            *answered.entry(answer_command(outbound).opaque).or_insert(0) += 1;
        }
    }
    answered
}

/// A woken pull's answer as a command: as queued, or decoded from the frame woken pulls that
/// asked the same thing share (`longpoll::shared_response`).
fn answer_command(outbound: Outbound) -> RemotingCommand {
    match outbound {
        Outbound::Command(response) => response,
        Outbound::Encoded(frame) => {
            let mut buf = bytes::BytesMut::from(&frame[..]);
            let response = crate::remoting::frame::decode_frame(
                &mut buf,
                crate::remoting::frame::FRAME_SIZE_MAX_BYTES,
            )
            .expect("a well-formed frame")
            .expect("a whole frame");
            assert!(buf.is_empty(), "exactly one frame");
            response
        }
        Outbound::File(_) => panic!("a 5-byte message is sent by copy"),
    }
}

/// One arrival waking many pulls on one queue: with several wake threads sharing the fan-out,
/// every parked pull is answered exactly once, with the message.
#[test]
fn a_fan_out_shared_by_several_wake_threads_answers_every_pull_once() {
    const CONNECTIONS: usize = 6;
    const PULLS_PER_CONNECTION: usize = 20;
    let broker = WakingBroker::start(3);
    let ctrl = &broker.ctrl;
    ctrl.topics
        .create_topic_if_absent(FAN_OUT_TOPIC, 1, 6, 0)
        .unwrap();
    let addr: SocketAddr = "127.0.0.1:10911".parse().unwrap();
    let mut receivers = Vec::new();
    let mut opaque = 0;
    for c in 0..CONNECTIONS {
        let remote = SocketAddr::new(addr.ip(), 20_000 + c as u16);
        let (ctx, rx) = ConnectionContext::detached(c as u64, remote, addr, 64);
        for _ in 0..PULLS_PER_CONNECTION {
            opaque += 1;
            // Each pull its own group, as many groups reading one queue.
            let request = suspending_pull(format!("g{opaque}"), opaque);
            let cx = RequestContext { ctrl, conn: &ctx };
            let handled = ready(pull::pull_message(&cx, &request));
            assert!(
                matches!(handled, Ok(Handled::Parked)),
                "pull {opaque} must park"
            );
        }
        receivers.push((ctx, rx));
    }
    put_hello(ctrl, addr);
    let answered = count_answers(&mut receivers, CONNECTIONS * PULLS_PER_CONNECTION);
    let expected: BTreeMap<i32, i32> = (1..=opaque).map(|o| (o, 1)).collect();
    assert_eq!(
        answered, expected,
        "every parked pull answered exactly once"
    );
    broker.stop();
}

/// Parks `pulls` long-polling pulls of their own groups on the fan-out topic of `ctrl`, each
/// on its own detached connection with a write queue of `write_queue_max` frames.
fn park_pulls(
    ctrl: &BrokerController,
    pulls: usize,
    write_queue_max: usize,
) -> Vec<(ConnectionContext, mpsc::Receiver<Outbound>)> {
    ctrl.topics
        .create_topic_if_absent(FAN_OUT_TOPIC, 1, 6, 0)
        .unwrap();
    let addr: SocketAddr = "127.0.0.1:10911".parse().unwrap();
    (0..pulls)
        .map(|c| {
            let remote = SocketAddr::new(addr.ip(), 20_000 + c as u16);
            let (ctx, rx) = ConnectionContext::detached(c as u64, remote, addr, write_queue_max);
            let opaque = c as i32 + 1;
            let request = suspending_pull(format!("g{opaque}"), opaque);
            let cx = RequestContext { ctrl, conn: &ctx };
            let handled = ready(pull::pull_message(&cx, &request));
            assert!(
                matches!(handled, Ok(Handled::Parked)),
                "pull {opaque} must park"
            );
            (ctx, rx)
        })
        .collect()
}

/// A queue with few parked pulls: the appending thread answers them itself, before the put
/// returns, with no wake thread running (the hop to a wake thread is what W3's tail waited on).
#[test]
fn an_arrival_on_a_queue_with_few_parked_pulls_is_answered_by_the_appending_thread() {
    use crate::broker::longpoll::pull_request_hold_service::WAKE_INLINE_PARKED_MAX;
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.store.root_dir = dir.path().join("store");
    // No wake threads are started: only the appending thread can answer.
    let parts = build_controller(config).unwrap();
    let ctrl = &parts.ctrl;
    let mut receivers = park_pulls(ctrl, WAKE_INLINE_PARKED_MAX, 4);
    put_hello(ctrl, "127.0.0.1:10911".parse().unwrap());
    for (i, (_, rx)) in receivers.iter_mut().enumerate() {
        let outbound = rx.try_recv().expect("answered before the put returned");
        let response = answer_command(outbound);
        assert_eq!(response.code, response_code::SUCCESS);
        assert_eq!(response.opaque, i as i32 + 1);
    }
    assert!(
        parts.wake_rx.is_empty(),
        "nothing handed to the wake threads"
    );
    assert_eq!(ctrl.pull_hold.parked_pulls(), 0);
    ctrl.store.shutdown().unwrap();
}

/// A queue with more parked pulls than the appending thread answers: the arrival goes to the
/// wake threads, and the send's own work stays bounded.
#[test]
fn an_arrival_on_a_queue_with_many_parked_pulls_goes_to_the_wake_threads() {
    use crate::broker::longpoll::pull_request_hold_service::{WakeItem, WAKE_INLINE_PARKED_MAX};
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.store.root_dir = dir.path().join("store");
    let parts = build_controller(config).unwrap();
    let ctrl = &parts.ctrl;
    let mut receivers = park_pulls(ctrl, WAKE_INLINE_PARKED_MAX + 1, 4);
    put_hello(ctrl, "127.0.0.1:10911".parse().unwrap());
    for (_, rx) in receivers.iter_mut() {
        assert!(
            rx.try_recv().is_err(),
            "not answered on the appending thread"
        );
    }
    assert!(matches!(
        parts.wake_rx.try_recv(),
        Ok(WakeItem::Arrival { queue_id: 0, .. })
    ));
    assert_eq!(ctrl.pull_hold.parked_pulls(), WAKE_INLINE_PARKED_MAX + 1);
    ctrl.store.shutdown().unwrap();
}

/// An answer the appending thread cannot queue (the connection's write queue is full) is
/// handed to a wake thread, which delivers it once the queue has room: never dropped.
#[test]
fn an_inline_answer_to_a_full_write_queue_is_retried_by_a_wake_thread() {
    let broker = WakingBroker::start(1);
    let ctrl = &broker.ctrl;
    let mut receivers = park_pulls(ctrl, 1, 1);
    let (ctx, rx) = &mut receivers[0];
    let filler = RemotingCommand::request(request_code::HEART_BEAT).with_opaque(-7);
    ctx.sender().send(Outbound::Command(filler)).unwrap();
    put_hello(ctrl, "127.0.0.1:10911".parse().unwrap());
    let first = answer_command(rx.try_recv().expect("the filler"));
    assert_eq!(first.opaque, -7);
    let answered = count_answers(&mut receivers, 1);
    assert_eq!(
        answered,
        BTreeMap::from([(1, 1)]),
        "delivered once, after the filler"
    );
    broker.stop();
}
