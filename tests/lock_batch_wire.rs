//! LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42) against the real `ringmq` process with raw
//! frames: what an orderly consumer's rebalance sends, and what it must be answered.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{invoke, Broker};
use ringmq::net::remoting_client::BlockingClient;
use ringmq::remoting::codes::{request_code as req, response_code as rc};
use ringmq::remoting::command::RemotingCommand;

const TOPIC: &str = "LockT";
const GROUP: &str = "lock_cg";

fn heartbeat(client_id: &str) -> RemotingCommand {
    let body = serde_json::json!({
        "clientID": client_id,
        "consumerDataSet": [{
            "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "consumeType": "CONSUME_PASSIVELY",
            "groupName": GROUP, "messageModel": "CLUSTERING", "unitMode": false,
            "subscriptionDataSet": [{"classFilterMode": false, "codeSet": [], "expressionType": "TAG",
                "subString": "*", "subVersion": 1, "tagsSet": [], "topic": TOPIC}]
        }],
        "producerDataSet": []
    });
    RemotingCommand::request(req::HEART_BEAT).with_body(Bytes::from(body.to_string()))
}

/// A lock or unlock request as the Java client's fastjson writes it.
fn batch(code: i32, client_id: &str, queues: &[i32]) -> RemotingCommand {
    let mq_set: Vec<_> = queues
        .iter()
        .map(|q| serde_json::json!({"brokerName": "broker-a", "queueId": q, "topic": TOPIC}))
        .collect();
    let body = serde_json::json!({
        "clientId": client_id, "consumerGroup": GROUP, "mqSet": mq_set, "onlyThisBroker": false
    });
    RemotingCommand::request(code).with_body(Bytes::from(body.to_string()))
}

/// LOCK_BATCH_MQ; returns the queue ids granted.
fn lock(c: &mut BlockingClient, client_id: &str, queues: &[i32]) -> BTreeSet<i64> {
    let response = invoke(c, batch(req::LOCK_BATCH_MQ, client_id, queues));
    assert_eq!(response.code, rc::SUCCESS, "{:?}", response.remark);
    let body: serde_json::Value = serde_json::from_slice(&response.body).expect("JSON body");
    body["lockOKMQSet"]
        .as_array()
        .expect("lockOKMQSet")
        .iter()
        .map(|mq| {
            assert_eq!(mq["topic"], TOPIC);
            assert_eq!(mq["brokerName"], "broker-a");
            mq["queueId"].as_i64().expect("queueId")
        })
        .collect()
}

fn set(ids: &[i64]) -> BTreeSet<i64> {
    ids.iter().copied().collect()
}

fn create_topic(c: &mut BlockingClient) {
    let create = RemotingCommand::request(req::UPDATE_AND_CREATE_TOPIC)
        .with_ext("topic", TOPIC)
        .with_ext("defaultTopic", "TBW102")
        .with_ext("readQueueNums", 4)
        .with_ext("writeQueueNums", 4)
        .with_ext("perm", 6)
        .with_ext("topicFilterType", "SINGLE_TAG");
    assert_eq!(invoke(c, create).code, rc::SUCCESS);
}

#[test]
fn queue_locks_are_exclusive_renewable_and_released() {
    let broker = Broker::start(&[]);
    let mut a = broker.client();
    create_topic(&mut a);
    assert_eq!(invoke(&mut a, heartbeat("client-a")).code, rc::SUCCESS);
    let mut b = broker.client();
    assert_eq!(invoke(&mut b, heartbeat("client-b")).code, rc::SUCCESS);

    // Queues beyond the topic's 4, and unknown topics, are never granted.
    assert_eq!(lock(&mut a, "client-a", &[0, 1, 9]), set(&[0, 1]));
    assert_eq!(lock(&mut b, "client-b", &[1, 2, 3]), set(&[2, 3]));
    // Renewal by the holder.
    assert_eq!(lock(&mut a, "client-a", &[0, 1, 2]), set(&[0, 1]));

    // Only the holder's unlock counts.
    let response = invoke(&mut b, batch(req::UNLOCK_BATCH_MQ, "client-b", &[0, 2]));
    assert_eq!(response.code, rc::SUCCESS);
    assert_eq!(lock(&mut b, "client-b", &[0, 1, 2]), set(&[2]));
    b.send(&batch(req::UNLOCK_BATCH_MQ, "client-b", &[2]).oneway())
        .unwrap();
    // Another connection's request may be served before the oneway one: wait for it.
    wait_for_lock(
        &mut a,
        "client-a",
        &[2],
        "client-b's oneway unlock was not applied",
    );

    // A body that is not JSON is a SYSTEM_ERROR, as Java's decode failure is.
    let bad = RemotingCommand::request(req::LOCK_BATCH_MQ).with_body(Bytes::from_static(b"{"));
    assert_eq!(invoke(&mut b, bad).code, rc::SYSTEM_ERROR);

    // When a's connection closes, its locks go with it (no 60 s wait for b).
    drop(a);
    wait_for_lock(
        &mut b,
        "client-b",
        &[0, 1, 2],
        "client-a's locks outlived its connection",
    );
}

/// Locks `queues` for `client_id` until all are granted (the broker serves another
/// connection's request, or notices a closed one, a moment later).
fn wait_for_lock(c: &mut BlockingClient, client_id: &str, queues: &[i32], what: &str) {
    let wanted: BTreeSet<i64> = queues.iter().map(|&q| i64::from(q)).collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while lock(c, client_id, queues) != wanted {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_client_locking_on_a_second_connection_keeps_its_locks_while_a_member() {
    let broker = Broker::start(&[]);
    let mut main = broker.client();
    create_topic(&mut main);
    assert_eq!(invoke(&mut main, heartbeat("client-a")).code, rc::SUCCESS);
    // The Java client may lock on its VIP channel, a second connection.
    let mut vip = broker.client();
    assert_eq!(lock(&mut vip, "client-a", &[0]), set(&[0]));
    drop(vip);
    std::thread::sleep(Duration::from_millis(300));
    let mut other = broker.client();
    assert!(lock(&mut other, "client-b", &[0]).is_empty());
    // Once the member's own connection closes, the queue is free.
    drop(main);
    wait_for_lock(
        &mut other,
        "client-b",
        &[0],
        "client-a's locks outlived its membership",
    );
}
