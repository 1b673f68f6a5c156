//! Message query and the offsets an operator moves, over the wire with raw frames against the
//! real `ringmq` process: QUERY_MESSAGE (12) by key and by unique key, SEARCH_OFFSET_BY_TIMESTAMP
//! (29) at its boundaries, INVOKE_BROKER_TO_RESET_OFFSET (222) with the RESET_CONSUMER_CLIENT_OFFSET
//! (220) a fake client connection receives, and GET_CONSUMER_RUNNING_INFO (307) relayed to a fake
//! client that answers.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{invoke, pull_head, Broker};
use ringmq::net::remoting_client::BlockingClient;
use ringmq::remoting::codes::{request_code as req, response_code as rc};
use ringmq::remoting::command::{LanguageCode, RemotingCommand, SerializeType};
use ringmq::store::format;

fn send(c: &mut BlockingClient, topic: &str, queue_id: i32, keys: &str, uniq: &str) -> i64 {
    let r = invoke(
        c,
        common::send_v2(
            topic,
            queue_id,
            Bytes::from(format!("body {uniq}")),
            &[("KEYS", keys), ("UNIQ_KEY", uniq), ("WAIT", "true")],
            0,
            SerializeType::Json,
        ),
    );
    assert_eq!(r.code, rc::SUCCESS, "{r:?}");
    r.ext_i64("queueOffset").unwrap()
}

fn query(
    c: &mut BlockingClient,
    topic: &str,
    key: &str,
    max: i32,
    unique: bool,
) -> RemotingCommand {
    let mut cmd = RemotingCommand::request(req::QUERY_MESSAGE)
        .with_ext("topic", topic)
        .with_ext("key", key)
        .with_ext("maxNum", max)
        .with_ext("beginTimestamp", 0)
        .with_ext("endTimestamp", i64::MAX);
    if unique {
        cmd = cmd.with_ext("_UNIQUE_KEY_QUERY", "true");
    }
    invoke(c, cmd)
}

/// The index is built on its own thread behind the writer (as Java's reput): waits, bounded,
/// until the last message sent answers a unique-key query (the index follows CommitLog order,
/// so every earlier one is indexed too).
fn wait_indexed(c: &mut BlockingClient, topic: &str, last_uniq: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while query(c, topic, last_uniq, 1, true).code != rc::SUCCESS {
        assert!(
            std::time::Instant::now() < deadline,
            "{last_uniq} not indexed within 10 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// (UNIQ_KEY, store timestamp) of each record of a body.
fn records(body: &[u8]) -> Vec<(String, i64)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let r = format::decode_record(&body[at..]).expect("record");
        let uniq = format::property_value(r.properties, b"UNIQ_KEY").unwrap_or_default();
        out.push((
            String::from_utf8_lossy(uniq).into_owned(),
            r.store_timestamp_ms,
        ));
        at += r.total_size as usize;
    }
    out
}

#[test]
fn query_message_by_key_and_by_unique_key() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    for i in 0..5 {
        send(
            &mut c,
            "QTopic",
            i % 2,
            &format!("order-{} all", i % 2),
            &format!("U-{i}"),
        );
    }
    wait_indexed(&mut c, "QTopic", "U-4");
    let r = query(&mut c, "QTopic", "order-1", 32, false);
    assert_eq!(r.code, rc::SUCCESS, "{r:?}");
    let found: Vec<String> = records(&r.body).into_iter().map(|(u, _)| u).collect();
    assert_eq!(found, ["U-1", "U-3"]);
    assert!(r.ext_i64("indexLastUpdateTimestamp").unwrap() > 0);
    assert!(r.ext_i64("indexLastUpdatePhyoffset").unwrap() > 0);
    // maxNum bounds the answer; the unique-key form ignores it (Java's defaultQueryMaxNum).
    assert_eq!(
        records(&query(&mut c, "QTopic", "all", 2, false).body).len(),
        2
    );
    let r = query(&mut c, "QTopic", "U-4", 0, true);
    assert_eq!(r.code, rc::SUCCESS, "{r:?}");
    assert_eq!(records(&r.body)[0].0, "U-4");
    // Nothing: Java's code and remark.
    for (topic, key) in [("QTopic", "nope"), ("Other", "order-1")] {
        let r = query(&mut c, topic, key, 32, false);
        assert_eq!(r.code, rc::QUERY_NOT_FOUND, "{r:?}");
        assert_eq!(
            r.remark.as_deref(),
            Some("can not find message, maybe time range not correct")
        );
    }
    // A missing header field is named.
    let r = invoke(
        &mut c,
        RemotingCommand::request(req::QUERY_MESSAGE).with_ext("topic", "QTopic"),
    );
    assert_eq!(r.code, rc::SYSTEM_ERROR);
    assert!(r.remark.unwrap_or_default().contains("key"));
}

fn search(c: &mut BlockingClient, topic: &str, ts: i64, boundary: Option<&str>) -> i64 {
    let mut cmd = RemotingCommand::request(req::SEARCH_OFFSET_BY_TIMESTAMP)
        .with_ext("topic", topic)
        .with_ext("queueId", 0)
        .with_ext("timestamp", ts);
    if let Some(b) = boundary {
        cmd = cmd.with_ext("boundaryType", b);
    }
    let r = invoke(c, cmd);
    assert_eq!(r.code, rc::SUCCESS, "{r:?}");
    r.ext_i64("offset").unwrap()
}

/// Store timestamps of queue 0's messages, pulled back.
fn store_times(c: &mut BlockingClient, topic: &str) -> Vec<i64> {
    let p = invoke(c, pull_head(topic));
    assert_eq!(p.code, rc::SUCCESS, "{p:?}");
    records(&p.body).into_iter().map(|(_, ts)| ts).collect()
}

#[test]
fn search_offset_by_timestamp_keeps_java_boundaries() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    for i in 0..3 {
        send(&mut c, "STopic", 0, "k", &format!("S-{i}"));
        std::thread::sleep(Duration::from_millis(5));
    }
    let times = store_times(&mut c, "STopic");
    assert_eq!(times.len(), 3);
    let (first, last) = (times[0], times[2]);
    // Before the first message: the min offset, either boundary.
    assert_eq!(search(&mut c, "STopic", first - 1, None), 0);
    assert_eq!(search(&mut c, "STopic", first - 1, Some("upper")), 0);
    // After the last: lower is the max offset, upper the last message.
    assert_eq!(search(&mut c, "STopic", last + 1, None), 3);
    assert_eq!(search(&mut c, "STopic", last + 1, Some("lower")), 3);
    assert_eq!(search(&mut c, "STopic", last + 1, Some("UPPER")), 2);
    // On a message: lower is the first at that time, upper the last.
    let at = times[1];
    let lower = times.iter().position(|t| *t == at).unwrap() as i64;
    let upper = times.iter().rposition(|t| *t == at).unwrap() as i64;
    assert_eq!(search(&mut c, "STopic", at, None), lower);
    assert_eq!(search(&mut c, "STopic", at, Some("upper")), upper);
    // A queue that does not exist answers 0.
    assert_eq!(search(&mut c, "NoSuchTopic", last, None), 0);
}

fn heartbeat(client_id: &str, group: &str, topic: &str) -> RemotingCommand {
    let body = serde_json::json!({
        "clientID": client_id,
        "consumerDataSet": [{
            "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "consumeType": "CONSUME_PASSIVELY",
            "groupName": group, "messageModel": "CLUSTERING", "unitMode": false,
            "subscriptionDataSet": [{"classFilterMode": false, "codeSet": [], "expressionType": "TAG",
                "subString": "*", "subVersion": 1, "tagsSet": [], "topic": topic}]
        }],
        "producerDataSet": []
    });
    RemotingCommand::request(req::HEART_BEAT).with_body(Bytes::from(body.to_string()))
}

fn commit(c: &mut BlockingClient, group: &str, topic: &str, queue_id: i32, offset: i64) {
    let r = invoke(
        c,
        RemotingCommand::request(req::UPDATE_CONSUMER_OFFSET)
            .with_ext("consumerGroup", group)
            .with_ext("topic", topic)
            .with_ext("queueId", queue_id)
            .with_ext("commitOffset", offset),
    );
    assert_eq!(r.code, rc::SUCCESS, "{r:?}");
}

fn committed(c: &mut BlockingClient, group: &str, topic: &str, queue_id: i32) -> i64 {
    let r = invoke(
        c,
        RemotingCommand::request(req::QUERY_CONSUMER_OFFSET)
            .with_ext("consumerGroup", group)
            .with_ext("topic", topic)
            .with_ext("queueId", queue_id),
    );
    assert_eq!(r.code, rc::SUCCESS, "{r:?}");
    r.ext_i64("offset").unwrap()
}

fn reset(
    c: &mut BlockingClient,
    group: &str,
    topic: &str,
    ts: i64,
    force: bool,
) -> RemotingCommand {
    invoke(
        c,
        RemotingCommand::request(req::INVOKE_BROKER_TO_RESET_OFFSET)
            .with_ext("topic", topic)
            .with_ext("group", group)
            .with_ext("timestamp", ts)
            .with_ext("isForce", force)
            .with_ext("queueId", -1)
            .with_ext("offset", -1),
    )
}

/// The next frame with `code`, skipping NOTIFY_CONSUMER_IDS_CHANGED and the like.
fn next_request(c: &mut BlockingClient, code: i32) -> RemotingCommand {
    loop {
        let cmd = c.read_command().expect("a frame from the broker");
        if cmd.code == code && !cmd.is_response() {
            return cmd;
        }
    }
}

#[test]
fn reset_offset_by_time_commits_and_tells_the_clients() {
    let broker = Broker::start(&[]);
    let mut admin = broker.client();
    for i in 0..4 {
        send(&mut admin, "RTopic", 0, "k", &format!("R-{i}"));
        std::thread::sleep(Duration::from_millis(5));
    }
    let times = store_times(&mut admin, "RTopic");
    // A first member creates the group; every write queue gets a committed offset (Java
    // refuses a reset otherwise); then the member leaves.
    let mut early = broker.client();
    assert_eq!(
        invoke(&mut early, heartbeat("c-0", "rg", "RTopic")).code,
        rc::SUCCESS
    );
    for q in 0..4 {
        commit(&mut admin, "rg", "RTopic", q, if q == 0 { 4 } else { 0 });
    }
    drop(early);
    // No client online: Java's code, nothing changes.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let r = loop {
        let r = reset(&mut admin, "rg", "RTopic", times[2], true);
        if r.code != rc::SUCCESS || std::time::Instant::now() > deadline {
            break r;
        }
        // The broker has not seen the close yet; put the offset back and try again.
        commit(&mut admin, "rg", "RTopic", 0, 4);
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(r.code, rc::CONSUMER_NOT_ONLINE, "{r:?}");
    assert!(r.remark.unwrap().starts_with("Consumer not online"));
    assert_eq!(committed(&mut admin, "rg", "RTopic", 0), 4);

    let mut client = broker.client();
    assert_eq!(
        invoke(&mut client, heartbeat("c-1", "rg", "RTopic")).code,
        rc::SUCCESS
    );
    // A C++ client of the group gets the list form.
    let mut cpp = broker.client();
    let mut cpp_heartbeat = heartbeat("c-cpp", "rg", "RTopic");
    cpp_heartbeat.language = LanguageCode::Cpp;
    assert_eq!(invoke(&mut cpp, cpp_heartbeat).code, rc::SUCCESS);
    let r = reset(&mut admin, "rg", "RTopic", times[2], false);
    assert_eq!(r.code, rc::SUCCESS, "{r:?}");
    let lower = times.iter().position(|t| *t == times[2]).unwrap();
    let body = String::from_utf8(r.body.to_vec()).unwrap();
    assert!(
        body.contains(&format!(
            r#"{{"brokerName":"broker-a","queueId":0,"topic":"RTopic"}}:{lower}"#
        )),
        "{body}"
    );
    // Not forced: a queue already below the target keeps its offset.
    assert!(
        body.contains(r#"{"brokerName":"broker-a","queueId":1,"topic":"RTopic"}:0"#),
        "{body}"
    );
    assert_eq!(committed(&mut admin, "rg", "RTopic", 0), lower as i64);

    let notice = next_request(&mut client, req::RESET_CONSUMER_CLIENT_OFFSET);
    assert!(notice.is_oneway());
    assert_eq!(notice.ext_opt_str("topic"), Some("RTopic"));
    assert_eq!(notice.ext_opt_str("group"), Some("rg"));
    assert_eq!(notice.ext_i64("timestamp").unwrap(), times[2]);
    assert_eq!(String::from_utf8(notice.body.to_vec()).unwrap(), body);
    let notice = next_request(&mut cpp, req::RESET_CONSUMER_CLIENT_OFFSET);
    let list: serde_json::Value = serde_json::from_slice(&notice.body).unwrap();
    let first = &list["offsetTable"][0];
    assert_eq!(first["topic"], "RTopic");
    assert_eq!(first["brokerName"], "broker-a");
    assert_eq!(list["offsetTable"].as_array().unwrap().len(), 4, "{list}");

    // Forced to the max (timestamp -1).
    let r = reset(&mut admin, "rg", "RTopic", -1, true);
    assert_eq!(r.code, rc::SUCCESS, "{r:?}");
    assert_eq!(committed(&mut admin, "rg", "RTopic", 0), 4);
    // Errors: Java's codes.
    assert_eq!(
        reset(&mut admin, "rg", "NoTopic", -1, true).code,
        rc::TOPIC_NOT_EXIST
    );
    let r = reset(&mut admin, "never-committed", "RTopic", -1, true);
    assert_eq!(r.code, rc::SYSTEM_ERROR, "{r:?}");
    assert_eq!(
        r.remark.as_deref(),
        Some("THe consumer group <never-committed> not exist")
    );
}

#[test]
fn get_consumer_running_info_is_relayed_to_the_client_and_back() {
    let broker = Broker::start(&[]);
    let mut client = broker.client();
    assert_eq!(
        invoke(&mut client, heartbeat("c-run", "run-g", "T")).code,
        rc::SUCCESS
    );
    let fake_client = std::thread::spawn(move || {
        let call = next_request(&mut client, req::GET_CONSUMER_RUNNING_INFO);
        assert_eq!(call.ext_opt_str("clientId"), Some("c-run"));
        assert_eq!(call.ext_opt_str("consumerGroup"), Some("run-g"));
        let answer = RemotingCommand::response_to(&call, rc::SUCCESS, None).with_body(
            Bytes::from_static(br#"{"properties":{"consumeType":"CONSUME_PASSIVELY"}}"#),
        );
        client.send(&answer).unwrap();
        client
    });
    let mut admin = broker.client();
    let r = invoke(
        &mut admin,
        RemotingCommand::request(req::GET_CONSUMER_RUNNING_INFO)
            .with_ext("consumerGroup", "run-g")
            .with_ext("clientId", "c-run")
            .with_ext("jstackEnable", false),
    );
    assert_eq!(r.code, rc::SUCCESS, "{r:?}");
    assert_eq!(
        &r.body[..],
        br#"{"properties":{"consumeType":"CONSUME_PASSIVELY"}}"#
    );
    let _client = fake_client.join().unwrap();
    // A client that is not connected: Java's remark.
    let r = invoke(
        &mut admin,
        RemotingCommand::request(req::GET_CONSUMER_RUNNING_INFO)
            .with_ext("consumerGroup", "run-g")
            .with_ext("clientId", "c-gone"),
    );
    assert_eq!(r.code, rc::SYSTEM_ERROR);
    assert_eq!(
        r.remark.as_deref(),
        Some("The Consumer <run-g> <c-gone> not online")
    );
}

#[test]
fn get_consumer_running_info_of_a_client_that_leaves_instead_of_answering() {
    let broker = Broker::start(&[]);
    let mut client = broker.client();
    assert_eq!(
        invoke(&mut client, heartbeat("c-leaves", "leave-g", "T")).code,
        rc::SUCCESS
    );
    let fake_client = std::thread::spawn(move || {
        next_request(&mut client, req::GET_CONSUMER_RUNNING_INFO);
        // Gone without an answer.
        drop(client);
    });
    let mut admin = broker.client();
    let r = invoke(
        &mut admin,
        RemotingCommand::request(req::GET_CONSUMER_RUNNING_INFO)
            .with_ext("consumerGroup", "leave-g")
            .with_ext("clientId", "c-leaves"),
    );
    fake_client.join().unwrap();
    assert_eq!(r.code, rc::SYSTEM_ERROR, "{r:?}");
    let remark = r.remark.unwrap_or_default();
    assert!(
        remark.starts_with("invoke consumer <leave-g> <c-leaves> Exception:"),
        "{remark}"
    );
}

/// The index keeps its newest entries and its slot table in memory between flushes (one
/// second apart, `flushIntervalConsumeQueue`): keys flushed before a SIGKILL, and keys indexed
/// but not flushed yet, are all found after the restart (recovery indexes the CommitLog again
/// from the header on disk).
#[test]
fn keys_indexed_before_a_sigkill_are_found_after_the_restart() {
    let mut broker = Broker::start(&[]);
    let mut c = broker.client();
    let key = |i: usize| format!("K-{}", i % 7);
    for i in 0..40 {
        send(&mut c, "KTopic", (i % 4) as i32, &key(i), &format!("F-{i}"));
    }
    wait_indexed(&mut c, "KTopic", "F-39");
    // Past two flush intervals: the first 40 are on disk.
    std::thread::sleep(Duration::from_millis(2_200));
    for i in 40..80 {
        send(&mut c, "KTopic", (i % 4) as i32, &key(i), &format!("F-{i}"));
    }
    wait_indexed(&mut c, "KTopic", "F-79");
    drop(c);
    broker.kill_hard();
    broker.restart();
    let mut c = broker.client();
    for i in 0..80 {
        let r = query(&mut c, "KTopic", &format!("F-{i}"), 1, true);
        assert_eq!(r.code, rc::SUCCESS, "F-{i}: {r:?}");
        assert_eq!(records(&r.body)[0].0, format!("F-{i}"));
    }
    for k in 0..7 {
        let r = query(&mut c, "KTopic", &key(k), 64, false);
        assert_eq!(r.code, rc::SUCCESS, "{r:?}");
        let mut found: Vec<String> = records(&r.body).into_iter().map(|(u, _)| u).collect();
        found.sort();
        let mut want: Vec<String> = (0..80)
            .filter(|i| i % 7 == k)
            .map(|i| format!("F-{i}"))
            .collect();
        want.sort();
        assert_eq!(found, want, "key {}", key(k));
    }
}
