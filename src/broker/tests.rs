//! Tests that drive several broker parts together (a controller from `startup`, the dispatch,
//! the pull processor and the wake threads of `longpoll`). They live here, above every part, so that no
//! part's file imports one that imports it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::broker::controller::BrokerController;
use crate::broker::processor::pull::pull_sys_flag;
use crate::broker::processor::Handled;
use crate::broker::startup::{build_controller, start_pull_wake};
use crate::broker::test_support::{
    answer, broker_with, config_in, connection, dispatch_on, local_addr, pull_request, send_request,
};
use crate::common::StopFlag;
use crate::config::Config;
use crate::net::{ConnectionContext, Outbound};
use crate::remoting::codes::{request_code, response_code};
use crate::remoting::command::RemotingCommand;
use crate::store::format::encode_properties;
use crate::store::MessageToStore;

const FAN_OUT_TOPIC: &str = "FanOut";

/// A broker without sockets, with `wake_threads` pull-wake threads running.
struct WakingBroker {
    ctrl: Arc<BrokerController>,
    stop: StopFlag,
    threads: Vec<JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl WakingBroker {
    fn start(wake_threads: u64) -> WakingBroker {
        WakingBroker::start_with(wake_threads, 0)
    }

    /// With `wake_inline_parked_max` (`RINGMQ_LONGPOLL_WAKE_INLINE_PARKED_MAX`) set.
    fn start_with(wake_threads: u64, wake_inline_parked_max: u64) -> WakingBroker {
        let dir = tempfile::tempdir().unwrap();
        let mut config = config_in(dir.path());
        config.longpoll.wake_threads = wake_threads;
        config.longpoll.wake_inline_parked_max = wake_inline_parked_max;
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

    /// With the fan-out topic ([`FAN_OUT_TOPIC`], one queue) created.
    fn with_fan_out_topic(wake_threads: u64) -> WakingBroker {
        let broker = WakingBroker::start(wake_threads);
        broker
            .ctrl
            .topics
            .create_topic_if_absent(FAN_OUT_TOPIC, 1, 6, 0)
            .unwrap();
        broker
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
fn suspending_pull(group: &str, opaque: i32) -> RemotingCommand {
    let sys_flag = pull_sys_flag::SUSPEND | pull_sys_flag::SUBSCRIPTION;
    pull_request(group, FAN_OUT_TOPIC, sys_flag, 20_000).with_opaque(opaque)
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
        // A pull handed to its connection's thread: re-executed here, as its writer would.
        Outbound::Deferred(deferred) => {
            answer_command(deferred.produce().expect("a woken pull is answered"))
        }
    }
}

/// One arrival waking many pulls on one queue: with several wake threads sharing the fan-out,
/// every parked pull is answered exactly once, with the message.
#[test]
fn a_fan_out_shared_by_several_wake_threads_answers_every_pull_once() {
    const CONNECTIONS: usize = 6;
    const PULLS_PER_CONNECTION: usize = 20;
    let broker = WakingBroker::with_fan_out_topic(3);
    let ctrl = &broker.ctrl;
    let addr = local_addr();
    let mut receivers = Vec::new();
    let mut opaque = 0;
    for c in 0..CONNECTIONS {
        let remote = SocketAddr::new(addr.ip(), 20_000 + c as u16);
        let (ctx, rx) = connection(c as u64, remote);
        for _ in 0..PULLS_PER_CONNECTION {
            opaque += 1;
            // Each pull its own group, as many groups reading one queue.
            let request = suspending_pull(&format!("g{opaque}"), opaque);
            let handled = dispatch_on(ctrl, &ctx, &request);
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

/// Waits up to 10 s for one frame on `rx`.
fn next_frame(rx: &mut mpsc::Receiver<Outbound>) -> Outbound {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(outbound) = rx.try_recv() {
            return outbound;
        }
        assert!(Instant::now() < deadline, "no frame within 10 s");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// On a queue with more parked pulls than the appending thread drains (the arrival goes to
/// the wake thread), an arrival that wakes few of them (here one round's pulls, up to
/// `WAKE_ON_CONNECTION_THREAD_PULLS_MAX`) has the wake thread hand each to its connection's
/// writer to re-execute there; one that wakes more re-executes them on the wake thread,
/// sharing one read. Either way each pull gets the message once.
#[test]
fn few_woken_pulls_go_to_their_connections_and_many_stay_on_the_wake_thread() {
    use crate::broker::longpoll::pull_request_hold_service::WAKE_ON_CONNECTION_THREAD_PULLS_MAX;
    let broker = WakingBroker::with_fan_out_topic(1);
    let ctrl = &broker.ctrl;
    let addr = local_addr();
    // Bystanders waiting for an offset no round reaches keep the queue's parked count above
    // what the appending thread drains, so every round's arrival goes to the wake thread.
    let mut bystanders = Vec::new();
    for b in 0..=WAKE_ON_CONNECTION_THREAD_PULLS_MAX {
        let remote = SocketAddr::new(addr.ip(), 22_000 + b as u16);
        let (ctx, rx) = connection(100 + b as u64, remote);
        // Subscribed to a tag no round sends, so no round's arrival wakes it.
        let mut request = suspending_pull(&format!("bystander{b}"), -1);
        request.set_ext("subscription", "TagB");
        let handled = dispatch_on(ctrl, &ctx, &request);
        assert!(
            matches!(handled, Ok(Handled::Parked)),
            "bystander {b} must park"
        );
        bystanders.push((ctx, rx));
    }
    for (round, pulls) in [
        1,
        WAKE_ON_CONNECTION_THREAD_PULLS_MAX,
        WAKE_ON_CONNECTION_THREAD_PULLS_MAX + 1,
    ]
    .into_iter()
    .enumerate()
    {
        let mut receivers = Vec::new();
        for p in 0..pulls {
            let remote = SocketAddr::new(addr.ip(), 21_000 + (round * 10 + p) as u16);
            let (ctx, rx) = connection((round * 10 + p) as u64, remote);
            let opaque = p as i32;
            // Offset of this round's message, each pull its own group.
            let mut request = suspending_pull(&format!("r{round}g{p}"), opaque);
            request.set_ext("queueOffset", round.to_string());
            let handled = dispatch_on(ctrl, &ctx, &request);
            assert!(matches!(handled, Ok(Handled::Parked)), "pull {p} must park");
            receivers.push((ctx, rx, opaque));
        }
        assert!(
            ctrl.pull_hold.parked_pulls() > WAKE_ON_CONNECTION_THREAD_PULLS_MAX,
            "the arrival goes to the wake thread"
        );
        put_hello(ctrl, addr);
        for (_ctx, rx, opaque) in &mut receivers {
            let frame = next_frame(rx);
            let handed_over = matches!(frame, Outbound::Deferred(_));
            assert_eq!(
                handed_over,
                pulls <= WAKE_ON_CONNECTION_THREAD_PULLS_MAX,
                "{pulls} woken pulls: handed over is {handed_over}"
            );
            let response = answer_command(frame);
            assert_eq!(
                response.code,
                response_code::SUCCESS,
                "{:?}",
                response.remark
            );
            assert_eq!(response.opaque, *opaque);
            assert!(rx.try_recv().is_err(), "one answer per pull");
        }
    }
    drop(bystanders);
    broker.stop();
}

/// A request code no RocketMQ broker serves.
const UNSERVED_CODE: i32 = 9999;

/// The tests' requests go through the broker's dispatch: a code no processor serves is answered
/// REQUEST_CODE_NOT_SUPPORTED with Java's remark (`NettyRemotingAbstract.processRequestCommand`),
/// to its opaque, and the metrics count the refusal.
#[test]
fn an_unserved_request_code_is_answered_not_supported_like_java() {
    let (ctrl, _dir) = broker_with(|_| {});
    let request = RemotingCommand::request(UNSERVED_CODE).with_opaque(7);
    let response = answer(&ctrl, &request);
    assert_eq!(response.code, response_code::REQUEST_CODE_NOT_SUPPORTED);
    assert_eq!(
        response.remark.as_deref(),
        Some(" request type 9999 not supported")
    );
    assert_eq!(response.opaque, 7);
    assert!(response.is_response());
    let metrics = ctrl.metrics().expect("metrics are on by default");
    assert_eq!(
        metrics.error_counts(),
        [(Some(response_code::REQUEST_CODE_NOT_SUPPORTED), 1)]
    );
    ctrl.store.shutdown().unwrap();
}

/// An account that may send to one topic only, and no address on the global whitelist.
const ONE_TOPIC_ACL: &str = "\
globalWhiteRemoteAddresses:
accounts:
  - accessKey: RocketMQSender
    secretKey: 12345678
    defaultTopicPerm: DENY
    topicPerms:
      - Allowed=PUB
";

/// A controller in `dir` with ACL on and [`ONE_TOPIC_ACL`] as its plain_acl.yml.
fn controller_with_one_topic_acl(dir: &std::path::Path) -> Arc<BrokerController> {
    let acl_file = dir.join("plain_acl.yml");
    std::fs::write(&acl_file, ONE_TOPIC_ACL).unwrap();
    let mut config = config_in(dir);
    config.acl.enabled = true;
    config.acl.file_path = acl_file.to_string_lossy().into_owned();
    build_controller(config).unwrap().ctrl
}

/// With ACL on, the tests' requests are checked before any processor, as Java's RPC hook
/// does: an unsigned send and one with an unknown access key are refused NO_PERMISSION with
/// `PlainPermissionManager`'s words, and nothing is stored.
#[test]
fn with_acl_on_an_unsigned_send_is_refused_before_the_processor() {
    let dir = tempfile::tempdir().unwrap();
    let ctrl = controller_with_one_topic_acl(dir.path());
    let unsigned = answer(&ctrl, &send_request("Allowed", b"unsigned"));
    assert_eq!(unsigned.code, response_code::NO_PERMISSION);
    assert_eq!(
        unsigned.remark.as_deref(),
        Some("No accessKey is configured")
    );
    let stranger = send_request("Allowed", b"stranger").with_ext("AccessKey", "stranger");
    let refused = answer(&ctrl, &stranger);
    assert_eq!(refused.code, response_code::NO_PERMISSION);
    assert_eq!(
        refused.remark.as_deref(),
        Some("No acl config for stranger")
    );
    assert_eq!(ctrl.store.max_offset_in_queue("Allowed", 0), 0);
    assert!(
        ctrl.topics.select("Allowed").is_none(),
        "no topic was created"
    );
    ctrl.store.shutdown().unwrap();
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
    let addr = local_addr();
    (0..pulls)
        .map(|c| {
            let remote = SocketAddr::new(addr.ip(), 20_000 + c as u16);
            let (ctx, rx) = ConnectionContext::detached(c as u64, remote, addr, write_queue_max);
            let opaque = c as i32 + 1;
            let request = suspending_pull(&format!("g{opaque}"), opaque);
            let handled = dispatch_on(ctrl, &ctx, &request);
            assert!(
                matches!(handled, Ok(Handled::Parked)),
                "pull {opaque} must park"
            );
            (ctx, rx)
        })
        .collect()
}

/// With `RINGMQ_LONGPOLL_WAKE_INLINE_PARKED_MAX=4`, a queue with few parked pulls: the
/// appending thread answers them itself, before the put returns, with no wake thread running (the hop to a wake thread is what W3's tail waited on).
#[test]
fn an_arrival_on_a_queue_with_few_parked_pulls_is_answered_by_the_appending_thread() {
    assert_eq!(
        Config::default().longpoll.wake_inline_parked_max,
        0,
        "off by default"
    );
    appending_thread_takes_the_pulls(4, 4, false);
}

/// Parks `pulls` pulls with `RINGMQ_LONGPOLL_WAKE_INLINE_PARKED_MAX=wake_inline_parked_max`,
/// starts no wake thread and appends: each pull gets one frame before the put returns, a
/// deferred one (handed to its connection) or an answer, as `handed_over` says.
fn appending_thread_takes_the_pulls(wake_inline_parked_max: u64, pulls: usize, handed_over: bool) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config_in(dir.path());
    config.longpoll.wake_inline_parked_max = wake_inline_parked_max;
    // No wake threads are started: only the appending thread can answer.
    let parts = build_controller(config).unwrap();
    let ctrl = &parts.ctrl;
    let mut receivers = park_pulls(ctrl, pulls, 4);
    put_hello(ctrl, local_addr());
    for (i, (_, rx)) in receivers.iter_mut().enumerate() {
        let frame = rx.try_recv().expect("taken before the put returned");
        assert_eq!(
            matches!(frame, Outbound::Deferred(_)),
            handed_over,
            "{pulls} pulls"
        );
        let response = answer_command(frame);
        assert_eq!(response.code, response_code::SUCCESS);
        assert_eq!(response.opaque, i as i32 + 1);
        assert!(rx.try_recv().is_err(), "one frame per pull");
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
    let dir = tempfile::tempdir().unwrap();
    let mut config = config_in(dir.path());
    config.longpoll.wake_inline_parked_max = 4;
    arrival_goes_to_the_wake_threads(config, 5);
}

/// By default (`RINGMQ_LONGPOLL_WAKE_INLINE_PARKED_MAX=0`) an arrival on a queue with up to
/// `WAKE_ON_CONNECTION_THREAD_PULLS_MAX` parked pulls is drained by the appending thread, which
/// hands each pull to its connection (a deferred frame, re-executed by the connection's
/// writer) before the put returns, with no wake thread running: the hop through a wake thread
/// is gone from the common wake-up.
#[test]
fn by_default_few_parked_pulls_are_handed_to_their_connections_by_the_appending_thread() {
    use crate::broker::longpoll::pull_request_hold_service::WAKE_ON_CONNECTION_THREAD_PULLS_MAX;
    for pulls in [1, WAKE_ON_CONNECTION_THREAD_PULLS_MAX] {
        appending_thread_takes_the_pulls(0, pulls, true);
    }
}

/// By default, a queue with more parked pulls than the appending thread hands over: the
/// arrival goes to the wake threads (which share one read between them).
#[test]
fn by_default_more_parked_pulls_are_woken_by_the_wake_threads() {
    use crate::broker::longpoll::pull_request_hold_service::WAKE_ON_CONNECTION_THREAD_PULLS_MAX;
    let dir = tempfile::tempdir().unwrap();
    arrival_goes_to_the_wake_threads(
        config_in(dir.path()),
        WAKE_ON_CONNECTION_THREAD_PULLS_MAX + 1,
    );
}

/// Parks `pulls` pulls, appends, and checks that the append answered none of them and handed
/// the arrival to the wake channel.
fn arrival_goes_to_the_wake_threads(config: Config, pulls: usize) {
    use crate::broker::longpoll::pull_request_hold_service::WakeItem;
    let parts = build_controller(config).unwrap();
    let ctrl = &parts.ctrl;
    let mut receivers = park_pulls(ctrl, pulls, 4);
    put_hello(ctrl, local_addr());
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
    assert_eq!(ctrl.pull_hold.parked_pulls(), pulls);
    ctrl.store.shutdown().unwrap();
}

/// An answer (with `RINGMQ_LONGPOLL_WAKE_INLINE_PARKED_MAX=4`) or a hand-over (by default) the
/// appending thread cannot queue, because the connection's write queue is full, is handed to
/// a wake thread, which delivers it once the queue has room: never dropped.
#[test]
fn an_appending_threads_answer_to_a_full_write_queue_is_retried_by_a_wake_thread() {
    for inline_max in [4, 0] {
        full_write_queue_on_the_appending_thread(inline_max);
    }
}

fn full_write_queue_on_the_appending_thread(wake_inline_parked_max: u64) {
    let broker = WakingBroker::start_with(1, wake_inline_parked_max);
    let ctrl = &broker.ctrl;
    let mut receivers = park_pulls(ctrl, 1, 1);
    let (ctx, rx) = &mut receivers[0];
    let filler = RemotingCommand::request(request_code::HEART_BEAT).with_opaque(-7);
    ctx.sender().send(Outbound::Command(filler)).unwrap();
    put_hello(ctrl, local_addr());
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

/// The runtime serves a pull on the reading task (it parks or answers, never waits) and hands
/// every other request back to run as a task: a send may wait for its flush or its slave, and a
/// pull on the fast port is refused by the dispatch, as Java's fast port serves no pulls.
#[test]
fn pulls_are_served_now_and_other_requests_are_handed_back_whole() {
    use crate::broker::dispatch::{BrokerRequestHandler, FAST_LISTENER_INDEX};
    use crate::net::RequestHandler;
    let (ctrl, _dir) = broker_with(|_| {});
    let handler = BrokerRequestHandler { ctrl: ctrl.clone() };
    let (conn, _queued) = connection(1, local_addr());
    answer(&ctrl, &send_request("Now", b"one"));

    let pull = pull_request("g", "Now", pull_sys_flag::SUBSCRIPTION, 0);
    let served = handler
        .handle_now(&conn, pull.clone())
        .expect("a pull is served now");
    let response = served.expect("a pull that finds a message is answered");
    assert_eq!(
        response.code,
        response_code::SUCCESS,
        "{:?}",
        response.remark
    );
    assert_eq!(response.ext_i64("nextBeginOffset").unwrap(), 1);

    let send = send_request("Now", b"two");
    assert_eq!(handler.handle_now(&conn, send.clone()), Err(send));
    let mut fast = conn.clone();
    fast.listener_index = FAST_LISTENER_INDEX;
    assert_eq!(handler.handle_now(&fast, pull.clone()), Err(pull));
    assert_eq!(
        ctrl.store.max_offset_in_queue("Now", 0),
        1,
        "nothing ran twice"
    );
    ctrl.store.shutdown().unwrap();
}

/// A pull served now gets the same ACL check as any request: unsigned, it is refused
/// NO_PERMISSION before the pull processor reads anything.
#[test]
fn with_acl_on_an_unsigned_pull_served_now_is_refused() {
    use crate::broker::dispatch::serve_now;
    let dir = tempfile::tempdir().unwrap();
    let ctrl = controller_with_one_topic_acl(dir.path());
    let (conn, _queued) = connection(1, local_addr());
    let refused = serve_now(&ctrl, &conn, &pull_request("g", "Allowed", 0, 0))
        .expect("a pull is served now")
        .expect("and answered");
    assert_eq!(refused.code, response_code::NO_PERMISSION);
    assert_eq!(
        refused.remark.as_deref(),
        Some("No accessKey is configured")
    );
    ctrl.store.shutdown().unwrap();
}
