//! Metadata writes stay off the request path: one heartbeat that creates 400 consumer groups
//! (and their 400 retry topics) does not hold up an unrelated request on the same worker
//! thread, and every group and retry topic still reaches `subscriptionGroup.json` and
//! `topics.json`. With the tables rewritten and fsynced once per new entry on the worker
//! thread, an unrelated request waited seconds.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{invoke, Broker};
use ringmq::net::remoting_client::BlockingClient;
use ringmq::remoting::codes::{request_code as req, response_code as rc};
use ringmq::remoting::command::RemotingCommand;

const GROUPS: usize = 400;
/// Generous: the bound holds with a slow disk and a busy machine, and a request stuck behind
/// 800 fsynced rewrites waits far longer.
const UNRELATED_REQUEST_MAX: Duration = Duration::from_secs(1);

fn heartbeat_with_new_groups(prefix: &str, count: usize) -> RemotingCommand {
    let consumers: Vec<serde_json::Value> = (0..count)
        .map(|i| {
            serde_json::json!({
                "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "consumeType": "CONSUME_PASSIVELY",
                "groupName": format!("{prefix}-{i:04}"), "messageModel": "CLUSTERING",
                "unitMode": false,
                "subscriptionDataSet": [{"classFilterMode": false, "codeSet": [],
                    "expressionType": "TAG", "subString": "*", "subVersion": 1, "tagsSet": [],
                    "topic": "Meta"}]
            })
        })
        .collect();
    let body = serde_json::json!({
        "clientID": "meta-client",
        "consumerDataSet": consumers,
        "producerDataSet": []
    });
    RemotingCommand::request(req::HEART_BEAT).with_body(Bytes::from(body.to_string()))
}

fn unrelated_request() -> RemotingCommand {
    RemotingCommand::request(req::GET_MAX_OFFSET)
        .with_ext("topic", "Unrelated")
        .with_ext("queueId", 0)
}

#[test]
fn a_heartbeat_creating_400_groups_does_not_delay_an_unrelated_request() {
    // One worker thread: the heartbeat and the unrelated request share it.
    let mut broker = Broker::start(&[("RINGMQ_SERVER_WORKER_THREADS", "1")]);
    // Long client timeouts, so a stuck request is measured rather than cut off.
    let connect = || BlockingClient::connect(&broker.addr(), Duration::from_secs(120)).unwrap();
    let mut probe = connect();
    assert_eq!(invoke(&mut probe, unrelated_request()).code, rc::SUCCESS);
    let done = Arc::new(AtomicBool::new(false));
    let heartbeat = {
        let mut client = connect();
        let done = done.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            let response = invoke(&mut client, heartbeat_with_new_groups("meta", GROUPS));
            done.store(true, Ordering::Release);
            (response.code, started.elapsed())
        })
    };
    let mut worst = Duration::ZERO;
    let mut probes = 0;
    // At least one probe, then probes until the heartbeat is answered (bounded by time).
    let deadline = Instant::now() + Duration::from_secs(120);
    while (probes == 0 || !done.load(Ordering::Acquire)) && Instant::now() < deadline {
        let started = Instant::now();
        assert_eq!(invoke(&mut probe, unrelated_request()).code, rc::SUCCESS);
        worst = worst.max(started.elapsed());
        probes += 1;
    }
    let (code, heartbeat_took) = heartbeat.join().unwrap();
    assert_eq!(code, rc::SUCCESS);
    println!(
        "heartbeat with {GROUPS} new groups answered in {heartbeat_took:?}; worst of {probes} \
         unrelated requests meanwhile: {worst:?}"
    );
    assert!(
        worst < UNRELATED_REQUEST_MAX,
        "an unrelated request waited {worst:?} (heartbeat took {heartbeat_took:?})"
    );
    // Everything reaches the files: after a clean stop, and in the running broker's files
    // within a bound.
    let config = broker.store_dir().join("config");
    let deadline = Instant::now() + Duration::from_secs(30);
    let persisted = |file: &str, needle: &str| {
        std::fs::read_to_string(config.join(file)).is_ok_and(|t| t.contains(needle))
    };
    let last = format!("meta-{:04}", GROUPS - 1);
    let last_retry = format!("%RETRY%{last}");
    while !(persisted("subscriptionGroup.json", &last) && persisted("topics.json", &last_retry)) {
        assert!(
            Instant::now() < deadline,
            "the new groups were never persisted"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    broker.stop();
    let groups = std::fs::read_to_string(config.join("subscriptionGroup.json")).unwrap();
    let topics = std::fs::read_to_string(config.join("topics.json")).unwrap();
    for i in 0..GROUPS {
        let group = format!("meta-{i:04}");
        assert!(groups.contains(&format!("\"{group}\"")), "{group}");
        assert!(topics.contains(&format!("\"%RETRY%{group}\"")), "{group}");
    }
}

/// A send that auto-creates its topic is answered only once `topics.json` has the topic (the
/// write runs on the persister thread): killed right after the answer, the broker restarts
/// knowing the topic and serves the message.
#[test]
fn a_topic_created_by_a_send_is_on_disk_before_the_send_is_answered() {
    let mut broker = Broker::start(&[("RINGMQ_STORE_FLUSH_POLICY", "sync")]);
    let mut c = broker.client();
    let sent = invoke(
        &mut c,
        common::send_v2(
            "FreshTopic",
            0,
            Bytes::from_static(b"kept"),
            &[],
            0,
            ringmq::remoting::command::SerializeType::Json,
        ),
    );
    assert_eq!(sent.code, rc::SUCCESS, "{sent:?}");
    broker.kill_hard();
    let topics = std::fs::read_to_string(broker.store_dir().join("config/topics.json")).unwrap();
    assert!(topics.contains("\"FreshTopic\""), "{topics}");
    broker.restart();
    let mut c = broker.client();
    let pulled = invoke(
        &mut c,
        common::pull(
            req::PULL_MESSAGE,
            "FreshTopic",
            0,
            0,
            32,
            0,
            "*",
            0,
            ringmq::remoting::command::SerializeType::Json,
        ),
    );
    assert_eq!(pulled.code, rc::SUCCESS, "{pulled:?}");
}
