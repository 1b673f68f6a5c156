//! The real `ringmq` process driven over the wire with raw remoting frames: send, pull, offsets,
//! long polling, bad requests and broken frames, in both header encodings, and restarts.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{invoke, Broker};
use ringmq::net::remoting_client::BlockingClient;
use ringmq::remoting::codes::{request_code as req, response_code as rc};
use ringmq::remoting::command::{RemotingCommand, SerializeType};
use ringmq::store::format;

const SUSPEND: i32 = 0x2;

fn send_request(
    topic: &str,
    queue_id: i32,
    body: &str,
    props: &[(&str, &str)],
    st: SerializeType,
) -> RemotingCommand {
    common::send_v2(topic, queue_id, Bytes::from(body.to_string()), props, 7, st)
}

fn pull_request(
    topic: &str,
    queue_id: i32,
    offset: i64,
    sys_flag: i32,
    sub: &str,
    st: SerializeType,
) -> RemotingCommand {
    common::pull(
        req::PULL_MESSAGE,
        topic,
        queue_id,
        offset,
        32,
        sys_flag,
        sub,
        15_000,
        st,
    )
}

/// The name server's route for `topic`, waiting for it: registration of a topic created at run
/// time runs on the broker's registration thread, a moment after the request that created it.
fn wait_for_route(broker: &Broker, topic: &str) -> RemotingCommand {
    let mut ns = broker.namesrv_client();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let route = invoke(
            &mut ns,
            RemotingCommand::request(req::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", topic),
        );
        if route.code == rc::SUCCESS {
            return route;
        }
        assert!(Instant::now() < deadline, "{topic} never routed: {route:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn ext_i64(cmd: &RemotingCommand, key: &'static str) -> i64 {
    cmd.ext_i64(key)
        .unwrap_or_else(|e| panic!("{e} in {cmd:?}"))
}

/// Records of a pull body: (queue offset, body, properties).
fn records(body: &[u8]) -> Vec<(i64, Vec<u8>, Vec<u8>, String)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let r = format::decode_record(&body[at..]).expect("record");
        out.push((
            r.queue_offset,
            r.body.to_vec(),
            r.properties.to_vec(),
            r.topic.to_string(),
        ));
        at += r.total_size as usize;
    }
    out
}

/// Ten sends to queue 1 of an auto-created topic, each answered in the request's encoding with
/// consecutive queue offsets, a msgId and a generated UNIQ_KEY.
fn send_ten(c: &mut BlockingClient, topic: &str, st: SerializeType) {
    for i in 0..10 {
        let r = invoke(
            c,
            send_request(
                topic,
                1,
                &format!("body-{i}"),
                &[("TAGS", "TagA"), ("KEYS", "k1 k2"), ("color", "red")],
                st,
            ),
        );
        assert_eq!(r.code, rc::SUCCESS, "{r:?}");
        assert_eq!(r.serialize_type, st, "answered in the request's encoding");
        assert_eq!(ext_i64(&r, "queueOffset"), i);
        assert_eq!(ext_i64(&r, "queueId"), 1);
        assert_eq!(r.ext_opt_str("msgId").unwrap().len(), 32);
        assert_eq!(r.ext_opt_str("MSG_REGION"), Some("DefaultRegion"));
        assert!(
            r.ext_opt_str("transactionId").is_some(),
            "UNIQ_KEY generated"
        );
    }
}

/// The ten records come back in one pull, exactly as sent; a TagB pull skips them all.
fn pull_ten(c: &mut BlockingClient, topic: &str, st: SerializeType) {
    let p = invoke(c, pull_request(topic, 1, 0, 0, "TagA", st));
    assert_eq!(p.code, rc::SUCCESS, "{p:?}");
    assert_eq!(ext_i64(&p, "nextBeginOffset"), 10);
    assert_eq!(ext_i64(&p, "maxOffset"), 10);
    assert_eq!(ext_i64(&p, "suggestWhichBrokerId"), 0);
    let recs = records(&p.body);
    assert_eq!(recs.len(), 10);
    for (i, (qo, body, props, t)) in recs.iter().enumerate() {
        assert_eq!(*qo, i as i64);
        assert_eq!(body, format!("body-{i}").as_bytes());
        assert_eq!(t, topic);
        assert_eq!(format::property_value(props, b"KEYS"), Some(&b"k1 k2"[..]));
        assert_eq!(format::property_value(props, b"color"), Some(&b"red"[..]));
        assert_eq!(
            format::property_value(props, b"CLUSTER"),
            Some(&b"DefaultCluster"[..])
        );
    }
    // Tag filter: TagB matches nothing, the scan moves past everything.
    let p = invoke(c, pull_request(topic, 1, 0, 0, "TagB", st));
    assert_eq!(p.code, rc::PULL_RETRY_IMMEDIATELY, "{p:?}");
    assert_eq!(ext_i64(&p, "nextBeginOffset"), 10);
}

fn query_offset(c: &mut BlockingClient, topic: &str) -> RemotingCommand {
    invoke(
        c,
        RemotingCommand::request(req::QUERY_CONSUMER_OFFSET)
            .with_ext("consumerGroup", "cg")
            .with_ext("topic", topic)
            .with_ext("queueId", 1),
    )
}

/// A new group starts at 0, a committed offset is read back, the max offset counts the sends.
fn offsets_of_queue_one(c: &mut BlockingClient, topic: &str) {
    let q = query_offset(c, topic);
    assert_eq!(
        q.code,
        rc::SUCCESS,
        "a new group on an in-memory queue starts at 0: {q:?}"
    );
    assert_eq!(ext_i64(&q, "offset"), 0);
    let u = invoke(
        c,
        RemotingCommand::request(req::UPDATE_CONSUMER_OFFSET)
            .with_ext("consumerGroup", "cg")
            .with_ext("topic", topic)
            .with_ext("queueId", 1)
            .with_ext("commitOffset", 7),
    );
    assert_eq!(u.code, rc::SUCCESS, "{u:?}");
    assert_eq!(ext_i64(&query_offset(c, topic), "offset"), 7);
    let m = invoke(
        c,
        RemotingCommand::request(req::GET_MAX_OFFSET)
            .with_ext("topic", topic)
            .with_ext("queueId", 1),
    );
    assert_eq!(ext_i64(&m, "offset"), 10);
}

fn round_trip(st: SerializeType) {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    let topic = "WireTopic";
    send_ten(&mut c, topic, st);
    // The name server learned the auto-created topic.
    let route = wait_for_route(&broker, topic);
    let v: serde_json::Value = serde_json::from_slice(&route.body).unwrap();
    assert_eq!(v["brokerDatas"][0]["brokerAddrs"]["0"], broker.addr());
    assert_eq!(v["queueDatas"][0]["writeQueueNums"], 4);
    pull_ten(&mut c, topic, st);
    offsets_of_queue_one(&mut c, topic);
    // View by id: the msgId encodes this broker's address and the record's offset.
    let sent = invoke(&mut c, send_request(topic, 0, "viewed", &[], st));
    let (_, phy) = format::decode_offset_msg_id(sent.ext_opt_str("msgId").unwrap()).unwrap();
    let v = invoke(
        &mut c,
        RemotingCommand::request(req::VIEW_MESSAGE_BY_ID).with_ext("offset", phy),
    );
    assert_eq!(v.code, rc::SUCCESS);
    assert_eq!(format::decode_record(&v.body).unwrap().body, b"viewed");
}

#[test]
fn send_pull_offsets_json_headers() {
    round_trip(SerializeType::Json);
}

#[test]
fn send_pull_offsets_binary_headers() {
    round_trip(SerializeType::RocketMq);
}

#[test]
fn bad_requests_get_java_codes_with_remarks() {
    let broker = Broker::start(&[("RINGMQ_STORE_MAX_MESSAGE_SIZE_BYTES", "1024")]);
    let mut c = broker.client();
    let r = invoke(&mut c, RemotingCommand::request(9999));
    assert_eq!(r.code, rc::REQUEST_CODE_NOT_SUPPORTED);
    assert!(r.remark.unwrap().contains("9999"));
    let r = invoke(
        &mut c,
        RemotingCommand::request(req::PULL_MESSAGE).with_ext("topic", "T"),
    );
    assert_eq!(r.code, rc::SYSTEM_ERROR);
    assert!(
        r.remark.unwrap().contains("consumerGroup"),
        "remark names the missing field"
    );
    let r = invoke(
        &mut c,
        send_request("bad topic!", 0, "x", &[], SerializeType::Json),
    );
    assert_eq!(r.code, rc::INVALID_PARAMETER, "{r:?}");
    let r = invoke(
        &mut c,
        send_request(&"x".repeat(128), 0, "x", &[], SerializeType::Json),
    );
    assert_eq!(r.code, rc::INVALID_PARAMETER, "{r:?}");
    let r = invoke(
        &mut c,
        send_request("Small", 0, &"y".repeat(2000), &[], SerializeType::Json),
    );
    assert_eq!(r.code, rc::MESSAGE_ILLEGAL, "{r:?}");
    let r = invoke(
        &mut c,
        send_request("Small", 99, "x", &[], SerializeType::Json),
    );
    assert_eq!(
        r.code,
        rc::INVALID_PARAMETER,
        "queue id out of range: {r:?}"
    );
    let r = invoke(
        &mut c,
        pull_request("NoSuchTopic", 0, 0, 0, "*", SerializeType::Json),
    );
    assert_eq!(r.code, rc::TOPIC_NOT_EXIST, "{r:?}");
    let r = invoke(
        &mut c,
        pull_request("Small", 50, 0, 0, "*", SerializeType::Json),
    );
    assert_eq!(r.code, rc::INVALID_PARAMETER, "{r:?}");
    let r = invoke(
        &mut c,
        pull_request("Small", 0, 0, 0, "a ||| (", SerializeType::Json)
            .with_ext("expressionType", "SQL92"),
    );
    assert_eq!(r.code, rc::SUBSCRIPTION_PARSE_FAILED, "{r:?}");
    let r = invoke(
        &mut c,
        RemotingCommand::request(req::HEART_BEAT).with_body(Bytes::from_static(b"{not json")),
    );
    assert_eq!(r.code, rc::SYSTEM_ERROR);
    // The connection is still fine after all of that.
    let r = invoke(
        &mut c,
        send_request("Small", 0, "ok", &[], SerializeType::Json),
    );
    assert_eq!(r.code, rc::SUCCESS);
}

fn expect_closed(mut s: TcpStream) {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 64];
    match s.read(&mut buf) {
        Ok(0) => {}
        Ok(n) => panic!("expected close, got {n} bytes"),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("expected close, got {e}"),
    }
}

#[test]
fn broken_frames_close_only_that_connection() {
    let broker = Broker::start(&[]);
    let mut good = broker.client();
    let cases: Vec<Vec<u8>> = vec![
        // Oversize length (32 MiB).
        0x0200_0000u32.to_be_bytes().to_vec(),
        // Header length larger than the frame.
        [10u32.to_be_bytes(), 0x0000_00FFu32.to_be_bytes()].concat(),
        // Garbage JSON header.
        [
            14u32.to_be_bytes().to_vec(),
            10u32.to_be_bytes().to_vec(),
            b"{not json!".to_vec(),
        ]
        .concat(),
        // Unknown serialize type.
        [8u32.to_be_bytes(), 0x0700_0004u32.to_be_bytes()].concat(),
    ];
    for bytes in cases {
        let mut s = TcpStream::connect(broker.addr()).unwrap();
        s.write_all(&bytes).unwrap();
        s.write_all(&[0u8; 16]).unwrap();
        expect_closed(s);
        let r = invoke(
            &mut good,
            send_request("Alive", 0, "still", &[], SerializeType::Json),
        );
        assert_eq!(r.code, rc::SUCCESS, "another client keeps working");
    }
    // A truncated frame followed by a close does not disturb the broker either.
    let mut s = TcpStream::connect(broker.addr()).unwrap();
    s.write_all(&100u32.to_be_bytes()).unwrap();
    s.write_all(b"abc").unwrap();
    drop(s);
    let r = invoke(
        &mut good,
        send_request("Alive", 0, "still", &[], SerializeType::Json),
    );
    assert_eq!(r.code, rc::SUCCESS);
}

#[test]
fn long_poll_wakes_on_arrival_and_not_for_other_tags() {
    let broker = Broker::start(&[]);
    let mut producer = broker.client();
    let r = invoke(
        &mut producer,
        send_request("LP", 0, "first", &[("TAGS", "TagA")], SerializeType::Json),
    );
    assert_eq!(r.code, rc::SUCCESS);
    let mut consumer = broker.client();
    // Parked: offset 1 is the next to be written.
    consumer
        .send(&pull_request("LP", 0, 1, SUSPEND, "TagA", SerializeType::Json).with_opaque(4242))
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    // A TagB message must not wake a TagA pull.
    invoke(
        &mut producer,
        send_request("LP", 0, "other", &[("TAGS", "TagB")], SerializeType::Json),
    );
    std::thread::sleep(Duration::from_millis(300));
    let sent_at = Instant::now();
    invoke(
        &mut producer,
        send_request("LP", 0, "wanted", &[("TAGS", "TagA")], SerializeType::Json),
    );
    let resp = consumer.read_command().unwrap();
    let waited = sent_at.elapsed();
    assert_eq!(resp.opaque, 4242);
    assert_eq!(resp.code, rc::SUCCESS, "{resp:?}");
    assert!(
        waited < Duration::from_secs(2),
        "woken by the arrival, not by the 5 s check: {waited:?}"
    );
    let recs = records(&resp.body);
    assert_eq!(recs.len(), 1, "the TagB message is filtered out");
    assert_eq!(recs[0].1, b"wanted");
}

#[test]
fn long_poll_times_out_with_pull_not_found() {
    let broker = Broker::start(&[("RINGMQ_LONGPOLL_CHECK_INTERVAL_MS", "100")]);
    let mut c = broker.client();
    invoke(
        &mut c,
        send_request("LPT", 0, "x", &[], SerializeType::Json),
    );
    let mut cmd = pull_request("LPT", 0, 1, SUSPEND, "*", SerializeType::Json);
    cmd.set_ext("suspendTimeoutMillis", 300);
    let started = Instant::now();
    let r = invoke(&mut c, cmd);
    assert_eq!(r.code, rc::PULL_NOT_FOUND, "{r:?}");
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "held until its time is up"
    );
    assert_eq!(ext_i64(&r, "nextBeginOffset"), 1);
}

#[test]
fn offset_moved_answers_and_stores_event() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    invoke(&mut c, send_request("OM", 0, "x", &[], SerializeType::Json));
    let r = invoke(
        &mut c,
        pull_request("OM", 0, 50, 0, "*", SerializeType::Json),
    );
    assert_eq!(r.code, rc::PULL_OFFSET_MOVED, "{r:?}");
    assert_eq!(ext_i64(&r, "nextBeginOffset"), 1);
    let ev = invoke(
        &mut c,
        pull_request("OFFSET_MOVED_EVENT", 0, 0, 0, "*", SerializeType::Json),
    );
    assert_eq!(ev.code, rc::SUCCESS, "{ev:?}");
    let recs = records(&ev.body);
    let json: serde_json::Value = serde_json::from_slice(&recs[0].1).unwrap();
    assert_eq!(json["consumerGroup"], "cg");
    assert_eq!(json["offsetRequest"], 50);
    assert_eq!(json["offsetNew"], 1);
}

#[test]
fn sync_flush_survives_sigkill_and_offsets_survive_restart() {
    let mut broker = Broker::start(&[
        ("RINGMQ_STORE_FLUSH_POLICY", "sync"),
        ("RINGMQ_BROKER_FLUSH_CONSUMER_OFFSET_INTERVAL_MS", "100"),
        ("RINGMQ_STORE_COMMIT_LOG_FILE_SIZE_BYTES", "8388608"),
    ]);
    let mut c = broker.client();
    let n = 300;
    for i in 0..n {
        let r = invoke(
            &mut c,
            send_request("Durable", i % 4, &format!("m{i}"), &[], SerializeType::Json),
        );
        assert_eq!(r.code, rc::SUCCESS);
    }
    // UPDATE_CONSUMER_OFFSET needs the group to exist, like Java: an unknown group is refused,
    // and a pull auto-creates it.
    let update = RemotingCommand::request(req::UPDATE_CONSUMER_OFFSET)
        .with_ext("consumerGroup", "cg")
        .with_ext("topic", "Durable")
        .with_ext("queueId", 2)
        .with_ext("commitOffset", 33);
    assert_eq!(
        invoke(&mut c, update.clone()).code,
        rc::SUBSCRIPTION_GROUP_NOT_EXIST
    );
    invoke(
        &mut c,
        pull_request("Durable", 2, 0, 0, "*", SerializeType::Json),
    );
    assert_eq!(invoke(&mut c, update).code, rc::SUCCESS);
    std::thread::sleep(Duration::from_millis(600)); // past an offset flush
    broker.kill_hard();
    broker.restart();
    let mut c = broker.client();
    let mut seen = 0;
    for q in 0..4 {
        let mut offset = 0;
        loop {
            let r = invoke(
                &mut c,
                pull_request("Durable", q, offset, 0, "*", SerializeType::Json),
            );
            if r.code != rc::SUCCESS {
                break;
            }
            seen += records(&r.body).len();
            offset = ext_i64(&r, "nextBeginOffset");
        }
    }
    assert_eq!(seen, n as usize, "every acknowledged message is back");
    let q = invoke(
        &mut c,
        RemotingCommand::request(req::QUERY_CONSUMER_OFFSET)
            .with_ext("consumerGroup", "cg")
            .with_ext("topic", "Durable")
            .with_ext("queueId", 2),
    );
    assert_eq!(ext_i64(&q, "offset"), 33, "{q:?}");
    // Graceful stop too.
    broker.stop();
    broker.restart();
    let mut c = broker.client();
    let m = invoke(
        &mut c,
        RemotingCommand::request(req::GET_MAX_OFFSET)
            .with_ext("topic", "Durable")
            .with_ext("queueId", 0),
    );
    assert_eq!(ext_i64(&m, "offset"), 75);
}

fn heartbeat(
    client_id: &str,
    group: &str,
    topic: &str,
    expression_type: &str,
    sub: &str,
) -> RemotingCommand {
    let body = serde_json::json!({
        "clientID": client_id,
        "consumerDataSet": [{
            "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "consumeType": "CONSUME_PASSIVELY",
            "groupName": group, "messageModel": "CLUSTERING", "unitMode": false,
            "subscriptionDataSet": [{"classFilterMode": false, "codeSet": [], "expressionType": expression_type,
                "subString": sub, "subVersion": 1, "tagsSet": [], "topic": topic}]
        }],
        "producerDataSet": []
    });
    RemotingCommand::request(req::HEART_BEAT).with_body(Bytes::from(body.to_string()))
}

/// A pull that relies on the subscription registered by heartbeat (no FLAG_SUBSCRIPTION).
fn registered_pull(group: &str, topic: &str, offset: i64) -> RemotingCommand {
    let mut cmd = pull_request(topic, 0, offset, 0, "", SerializeType::Json);
    cmd.set_ext("consumerGroup", group);
    cmd.set_ext("sysFlag", 0);
    cmd.ext_fields.remove("subscription");
    cmd.ext_fields.remove("expressionType");
    cmd
}

#[test]
fn sql92_subscription_registered_by_heartbeat_filters_on_properties() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    for i in 0..20 {
        let region = if i % 2 == 0 { "east" } else { "west" };
        let a = i.to_string();
        invoke(
            &mut c,
            send_request(
                "Sql",
                0,
                &format!("m{i}"),
                &[("a", &a), ("region", region)],
                SerializeType::Json,
            ),
        );
    }
    // Before any heartbeat the group has no subscription.
    let r = invoke(&mut c, registered_pull("sqlg", "Sql", 0));
    assert_eq!(r.code, rc::SUBSCRIPTION_NOT_EXIST, "{r:?}");
    let hb = invoke(
        &mut c,
        heartbeat("c1", "sqlg", "Sql", "SQL92", "a > 5 AND region = 'east'"),
    );
    assert_eq!(hb.code, rc::SUCCESS);
    assert!(
        hb.version >= 232,
        "a real version so Java clients allow SQL92"
    );
    let mut got = Vec::new();
    let mut offset = 0;
    for _ in 0..10 {
        let r = invoke(&mut c, registered_pull("sqlg", "Sql", offset));
        match r.code {
            rc::SUCCESS => got.extend(
                records(&r.body)
                    .into_iter()
                    .map(|r| String::from_utf8(r.1).unwrap()),
            ),
            rc::PULL_RETRY_IMMEDIATELY => {}
            _ => break,
        }
        offset = ext_i64(&r, "nextBeginOffset");
    }
    assert_eq!(got, vec!["m6", "m8", "m10", "m12", "m14", "m16", "m18"]);
    // A bad SQL92 subscription is refused with the position of the problem.
    let bad = invoke(
        &mut c,
        pull_request("Sql", 0, 0, 0, "a > ", SerializeType::Json)
            .with_ext("expressionType", "SQL92"),
    );
    assert_eq!(bad.code, rc::SUBSCRIPTION_PARSE_FAILED);
    assert!(
        bad.remark.unwrap().contains("character"),
        "remark points at the position"
    );
}

#[test]
fn heartbeat_membership_changes_notify_the_group() {
    let broker = Broker::start(&[]);
    let mut first = broker.client();
    assert_eq!(
        invoke(&mut first, heartbeat("c1", "grp", "T", "TAG", "*")).code,
        rc::SUCCESS
    );
    let mut second = broker.client();
    assert_eq!(
        invoke(&mut second, heartbeat("c2", "grp", "T", "TAG", "*")).code,
        rc::SUCCESS
    );
    // The first member is told to rebalance, on its own connection.
    let notify = first.read_command().unwrap();
    assert_eq!(notify.code, req::NOTIFY_CONSUMER_IDS_CHANGED);
    assert!(notify.is_oneway());
    assert_eq!(notify.ext_opt_str("consumerGroup"), Some("grp"));
    let list = invoke(
        &mut second,
        RemotingCommand::request(req::GET_CONSUMER_LIST_BY_GROUP).with_ext("consumerGroup", "grp"),
    );
    let v: serde_json::Value = serde_json::from_slice(&list.body).unwrap();
    assert_eq!(v["consumerIdList"], serde_json::json!(["c1", "c2"]));
    // The retry topic of the group was created and reached the name server.
    wait_for_route(&broker, "%RETRY%grp");
    // A member leaving notifies the rest.
    drop(second);
    let notify = first.read_command().unwrap();
    assert_eq!(notify.code, req::NOTIFY_CONSUMER_IDS_CHANGED);
}

#[test]
fn send_back_goes_to_retry_topic_after_delay_then_dlq() {
    let broker = Broker::start(&[("RINGMQ_BROKER_MESSAGE_DELAY_LEVEL", "1s 1s 1s")]);
    let mut c = broker.client();
    let sent = invoke(
        &mut c,
        send_request("Orig", 0, "failing", &[("TAGS", "t")], SerializeType::Json),
    );
    let (_, phy) = format::decode_offset_msg_id(sent.ext_opt_str("msgId").unwrap()).unwrap();
    invoke(&mut c, heartbeat("c1", "rg", "Orig", "TAG", "*"));
    let back = |c: &mut BlockingClient, offset: i64, max: i32| {
        invoke(
            c,
            RemotingCommand::request(req::CONSUMER_SEND_MSG_BACK)
                .with_ext("offset", offset)
                .with_ext("group", "rg")
                .with_ext("delayLevel", 1)
                .with_ext("originMsgId", "ORIGID")
                .with_ext("maxReconsumeTimes", max),
        )
    };
    assert_eq!(back(&mut c, phy, 2).code, rc::SUCCESS);
    // Delivered to %RETRY%rg after the 1 s delay level.
    let deadline = Instant::now() + Duration::from_secs(10);
    let retry = loop {
        let r = invoke(
            &mut c,
            pull_request("%RETRY%rg", 0, 0, 0, "*", SerializeType::Json),
        );
        if r.code == rc::SUCCESS {
            break records(&r.body);
        }
        assert!(
            Instant::now() < deadline,
            "retry message never arrived: {r:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(retry[0].1, b"failing");
    assert_eq!(
        format::property_value(&retry[0].2, b"RETRY_TOPIC"),
        Some(&b"Orig"[..])
    );
    assert_eq!(
        format::property_value(&retry[0].2, b"ORIGIN_MESSAGE_ID"),
        Some(&b"ORIGID"[..])
    );
    let r = invoke(
        &mut c,
        pull_request("%RETRY%rg", 0, 0, 0, "*", SerializeType::Json),
    );
    let rec = format::decode_record(&r.body).unwrap();
    assert_eq!(rec.reconsume_times, 1);
    // Reconsumed too often: straight to the DLQ.
    let mut phy2 = rec.phy_offset;
    for _ in 0..2 {
        assert_eq!(back(&mut c, phy2, 1).code, rc::SUCCESS);
        phy2 = rec.phy_offset;
    }
    let dlq = invoke(
        &mut c,
        pull_request("%DLQ%rg", 0, 0, 0, "*", SerializeType::Json),
    );
    assert_eq!(dlq.code, rc::SUCCESS, "{dlq:?}");
    assert_eq!(records(&dlq.body)[0].1, b"failing");
}

/// A send-back for a group name Java's `TopicValidator.validateGroup` refuses is answered as
/// Java answers a group it will not create, in both header encodings; the broker then takes
/// the same message back for a proper group.
#[test]
fn send_back_for_an_illegal_group_name_is_refused_with_java_code() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    let sent = invoke(
        &mut c,
        send_request("Orig", 0, "failing", &[], SerializeType::Json),
    );
    let (_, phy) = format::decode_offset_msg_id(sent.ext_opt_str("msgId").unwrap()).unwrap();
    let back = |group: &str, st: SerializeType| {
        RemotingCommand::request(req::CONSUMER_SEND_MSG_BACK)
            .with_serialize_type(st)
            .with_ext("offset", phy)
            .with_ext("group", group)
            .with_ext("delayLevel", 0)
    };
    let bad_group = "../../x\u{1}";
    for st in [SerializeType::Json, SerializeType::RocketMq] {
        let r = invoke(&mut c, back(bad_group, st));
        assert_eq!(r.code, rc::SUBSCRIPTION_GROUP_NOT_EXIST, "{r:?}");
        assert_eq!(
            r.remark.as_deref(),
            Some(format!("subscription group not exist, {bad_group}").as_str())
        );
    }
    let r = invoke(&mut c, back("cg", SerializeType::Json));
    assert_eq!(r.code, rc::SUCCESS, "{r:?}");
}

#[test]
fn batch_send_stores_each_message_with_consecutive_offsets() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    let mut body = Vec::new();
    for i in 0..5 {
        let props =
            format::encode_properties([("TAGS", "b"), ("UNIQ_KEY", &format!("U{i}") as &str)]);
        format::encode_batch_entry(
            0,
            format!("batch-{i}").as_bytes(),
            props.as_bytes(),
            &mut body,
        );
    }
    let mut cmd = send_request("Batch", 0, "", &[], SerializeType::Json);
    cmd.code = req::SEND_BATCH_MESSAGE;
    cmd.set_ext("m", "true");
    cmd.body = Bytes::from(body);
    let r = invoke(&mut c, cmd);
    assert_eq!(r.code, rc::SUCCESS, "{r:?}");
    assert_eq!(r.ext_opt_str("msgId").unwrap().split(',').count(), 5);
    let p = invoke(
        &mut c,
        pull_request("Batch", 0, 0, 0, "*", SerializeType::Json),
    );
    let recs = records(&p.body);
    assert_eq!(recs.len(), 5);
    for (i, r) in recs.iter().enumerate() {
        assert_eq!(r.0, i as i64);
        assert_eq!(r.1, format!("batch-{i}").as_bytes());
    }
}

#[test]
fn standalone_namesrv_routes_to_a_registered_broker_and_drops_it_on_stop() {
    let ns = common::Namesrv::start();
    let mut broker = Broker::start_with_namesrv(&ns.addr(), &[]);
    let mut c = broker.client();
    assert_eq!(
        invoke(
            &mut c,
            send_request("ViaNs", 0, "x", &[], SerializeType::Json)
        )
        .code,
        rc::SUCCESS
    );
    let mut ns_client =
        ringmq::net::remoting_client::BlockingClient::connect(&ns.addr(), Duration::from_secs(5))
            .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let route = invoke(
            &mut ns_client,
            RemotingCommand::request(req::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", "ViaNs"),
        );
        if route.code == rc::SUCCESS {
            let v: serde_json::Value = serde_json::from_slice(&route.body).unwrap();
            assert_eq!(v["brokerDatas"][0]["brokerAddrs"]["0"], broker.addr());
            break;
        }
        assert!(
            Instant::now() < deadline,
            "topic never reached the name server: {route:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let cluster = invoke(
        &mut ns_client,
        RemotingCommand::request(req::GET_BROKER_CLUSTER_INFO),
    );
    let v: serde_json::Value = serde_json::from_slice(&cluster.body).unwrap();
    assert_eq!(
        v["clusterAddrTable"]["DefaultCluster"],
        serde_json::json!(["broker-a"])
    );
    broker.stop();
    let route = invoke(
        &mut ns_client,
        RemotingCommand::request(req::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", "ViaNs"),
    );
    assert_eq!(
        route.code,
        rc::TOPIC_NOT_EXIST,
        "an unregistered broker's topics are gone"
    );
}
