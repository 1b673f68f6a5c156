//! Transactional messages against the real `ringmq` process with raw frames, JSON and binary
//! headers: half messages (SEND_MESSAGE with TRAN_MSG=true), END_TRANSACTION (37) commit and
//! rollback, the op messages, CHECK_TRANSACTION_STATE (39) on the producer's connection, the
//! move to TRANS_CHECK_MAX_TIME_TOPIC, and a restart between the half message and its end.

mod common;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use common::{invoke, Broker};
use ringmq::net::remoting_client::BlockingClient;
use ringmq::remoting::codes::{request_code as req, response_code as rc};
use ringmq::remoting::command::{RemotingCommand, SerializeType};
use ringmq::remoting::headers::{EndTransactionRequestHeader, PullMessageRequestHeader};
use ringmq::store::format;

const TOPIC: &str = "TxT";
const GROUP: &str = "tx_pg";
const HALF_TOPIC: &str = "RMQ_SYS_TRANS_HALF_TOPIC";
const OP_TOPIC: &str = "RMQ_SYS_TRANS_OP_HALF_TOPIC";
const CHECK_MAX_TOPIC: &str = "TRANS_CHECK_MAX_TIME_TOPIC";
const PREPARED: i32 = 0x4;
const COMMIT: i32 = 0x8;
const ROLLBACK: i32 = 0xC;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A half message as a Java producer sends it: sysFlag PREPARED, TRAN_MSG=true, PGROUP.
fn half_request(queue_id: i32, body: &str, uniq: &str, st: SerializeType) -> RemotingCommand {
    let props = format::encode_properties([
        ("TRAN_MSG", "true"),
        ("PGROUP", GROUP),
        ("UNIQ_KEY", uniq),
        ("TAGS", "TagA"),
        ("WAIT", "true"),
    ]);
    send_request(queue_id, body, props, PREPARED, st)
}

fn send_request(
    queue_id: i32,
    body: &str,
    properties: String,
    sys_flag: i32,
    st: SerializeType,
) -> RemotingCommand {
    let mut header = common::send_v2_header(GROUP, TOPIC, queue_id);
    header.sys_flag = sys_flag;
    header.born_timestamp = now_ms();
    header.properties = Some(properties);
    common::send_v2_request(&header, Bytes::from(body.to_string()), st)
}

/// What a send of a half message answered: its half queue offset and CommitLog offset.
#[derive(Debug, Clone)]
struct Half {
    queue_offset: i64,
    commit_log_offset: i64,
    uniq: String,
}

fn send_half(c: &mut BlockingClient, queue_id: i32, body: &str, st: SerializeType) -> Half {
    let uniq = format!("UNIQ-{body}");
    let r = invoke(c, half_request(queue_id, body, &uniq, st));
    assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
    let msg_id = r.ext_opt_str("msgId").expect("msgId").to_string();
    let (_, commit_log_offset) = format::decode_offset_msg_id(&msg_id).expect("offset msgId");
    assert_eq!(r.ext_opt_str("transactionId"), Some(uniq.as_str()));
    Half {
        queue_offset: r.ext_i64("queueOffset").unwrap(),
        commit_log_offset,
        uniq,
    }
}

fn end_request(half: &Half, state: i32, from_check: bool, st: SerializeType) -> RemotingCommand {
    let mut cmd = RemotingCommand::request(req::END_TRANSACTION).with_serialize_type(st);
    EndTransactionRequestHeader {
        topic: Some(TOPIC.into()),
        producer_group: GROUP.into(),
        tran_state_table_offset: half.queue_offset,
        commit_log_offset: half.commit_log_offset,
        commit_or_rollback: state,
        from_transaction_check: from_check,
        msg_id: half.uniq.clone(),
        transaction_id: Some(half.uniq.clone()),
        broker_name: Some("broker-a".into()),
    }
    .encode(&mut cmd);
    cmd
}

fn pull(c: &mut BlockingClient, topic: &str, queue_id: i32, offset: i64) -> RemotingCommand {
    let mut cmd = RemotingCommand::request(req::PULL_MESSAGE);
    PullMessageRequestHeader {
        consumer_group: "tx_cg".into(),
        topic: topic.into(),
        queue_id,
        queue_offset: offset,
        max_msg_nums: 32,
        sys_flag: common::PULL_FLAG_SUBSCRIPTION,
        commit_offset: 0,
        suspend_timeout_millis: 0,
        subscription: Some("*".into()),
        sub_version: 0,
        expression_type: Some("TAG".into()),
        max_msg_bytes: None,
        request_source: None,
        proxy_froward_client_id: None,
    }
    .encode(&mut cmd);
    invoke(c, cmd)
}

/// A stored record as the tests look at it.
#[derive(Debug, Clone)]
struct Rec {
    topic: String,
    queue_id: i32,
    queue_offset: i64,
    sys_flag: i32,
    prepared_transaction_offset: i64,
    body: String,
    props: Vec<(String, String)>,
}

impl Rec {
    fn prop(&self, name: &str) -> Option<&str> {
        self.props
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

fn records(body: &[u8]) -> Vec<Rec> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let r = format::decode_record(&body[at..]).expect("record");
        out.push(Rec {
            topic: r.topic.to_string(),
            queue_id: r.queue_id,
            queue_offset: r.queue_offset,
            sys_flag: r.sys_flag,
            prepared_transaction_offset: r.prepared_transaction_offset,
            body: String::from_utf8_lossy(r.body).into_owned(),
            props: format::properties_iter(r.properties)
                .map(|(k, v)| {
                    (
                        String::from_utf8_lossy(k).into_owned(),
                        String::from_utf8_lossy(v).into_owned(),
                    )
                })
                .collect(),
        });
        at += r.total_size as usize;
    }
    out
}

/// Every message of a queue from offset 0 (none when the queue is empty); its topic must exist.
fn queue(c: &mut BlockingClient, topic: &str, queue_id: i32) -> Vec<Rec> {
    queue_of_created_topic(c, topic, queue_id).unwrap_or_else(|| {
        panic!("pull {topic}:{queue_id} answered TOPIC_NOT_EXIST");
    })
}

/// Every message of a queue from offset 0, or None while its topic does not exist yet: the
/// system topics (RMQ_SYS_TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC) are created by the
/// broker's first write to them, so a pull racing that write is answered TOPIC_NOT_EXIST.
fn queue_of_created_topic(c: &mut BlockingClient, topic: &str, queue_id: i32) -> Option<Vec<Rec>> {
    let r = pull(c, topic, queue_id, 0);
    match r.code {
        rc::SUCCESS => Some(records(&r.body)),
        rc::PULL_NOT_FOUND | rc::PULL_OFFSET_MOVED | rc::PULL_RETRY_IMMEDIATELY => Some(Vec::new()),
        rc::TOPIC_NOT_EXIST => None,
        code => panic!("pull {topic}:{queue_id} answered {code} {:?}", r.remark),
    }
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

fn producer_heartbeat(c: &mut BlockingClient, client_id: &str) {
    let body = serde_json::json!({
        "clientID": client_id,
        "consumerDataSet": [],
        "producerDataSet": [{"groupName": GROUP}, {"groupName": "CLIENT_INNER_PRODUCER"}]
    });
    let hb = RemotingCommand::request(req::HEART_BEAT).with_body(Bytes::from(body.to_string()));
    assert_eq!(invoke(c, hb).code, rc::SUCCESS);
}

/// Waits for a message in `topic`:`queue_id` (the broker writes asynchronously to us).
fn wait_for(c: &mut BlockingClient, topic: &str, queue_id: i32, count: usize) -> Vec<Rec> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let recs = queue_of_created_topic(c, topic, queue_id).unwrap_or_default();
        if recs.len() >= count {
            return recs;
        }
        assert!(Instant::now() < deadline, "{topic}:{queue_id} has {recs:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn commit_and_rollback(st: SerializeType) {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    create_topic(&mut c);
    let a = send_half(&mut c, 1, "committed", st);
    let b = send_half(&mut c, 1, "rolled-back", st);
    assert_eq!(
        (a.queue_offset, b.queue_offset),
        (0, 1),
        "half queue offsets"
    );
    assert!(
        queue(&mut c, TOPIC, 1).is_empty(),
        "half messages are not visible"
    );
    let halves = queue(&mut c, HALF_TOPIC, 0);
    assert_eq!(halves.len(), 2);
    assert_eq!(halves[0].prop("REAL_TOPIC"), Some(TOPIC));
    assert_eq!(halves[0].prop("REAL_QID"), Some("1"));
    assert_eq!(halves[0].prop("TRAN_MSG"), Some("true"));
    assert_eq!(halves[0].prop("__transactionId__"), Some(a.uniq.as_str()));
    assert_eq!(
        halves[0].sys_flag & 0xC,
        0,
        "stored with no transaction bits"
    );

    // A request-response END_TRANSACTION is answered; the oneway one only acts.
    let r = invoke(&mut c, end_request(&a, COMMIT, false, st));
    assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
    c.send(&end_request(&b, ROLLBACK, false, st).oneway())
        .unwrap();

    let ops = wait_for(&mut c, OP_TOPIC, 0, 2);
    let op_bodies: Vec<&str> = ops.iter().map(|o| o.body.as_str()).collect();
    assert_eq!(op_bodies, ["0,", "1,"]);
    assert!(ops.iter().all(|o| o.prop("TAGS") == Some("d")));

    let delivered = queue(&mut c, TOPIC, 1);
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    let m = &delivered[0];
    assert_eq!(
        (m.topic.as_str(), m.queue_id, m.queue_offset),
        (TOPIC, 1, 0)
    );
    assert_eq!(m.body, "committed");
    assert_eq!(m.sys_flag & 0xC, COMMIT);
    assert_eq!(m.prepared_transaction_offset, a.commit_log_offset);
    assert_eq!(m.prop("UNIQ_KEY"), Some(a.uniq.as_str()));
    assert_eq!(m.prop("TAGS"), Some("TagA"));
    assert_eq!(m.prop("PGROUP"), Some(GROUP));
    for gone in ["TRAN_MSG", "REAL_TOPIC", "REAL_QID"] {
        assert_eq!(m.prop(gone), None, "{gone}");
    }
    wrong_ends_are_refused(&mut c, &broker, st);
}

/// Java's codes and remarks for an END_TRANSACTION that names the wrong half message; a oneway
/// one is logged at warn with its code.
fn wrong_ends_are_refused(c: &mut BlockingClient, broker: &Broker, st: SerializeType) {
    let h = send_half(c, 2, "pending", st);
    let refused = |c: &mut BlockingClient, cmd: RemotingCommand| {
        let r = invoke(c, cmd);
        assert_eq!(r.code, rc::SYSTEM_ERROR, "{:?}", r.remark);
        r.remark.unwrap_or_default()
    };
    let mut other_group = end_request(&h, COMMIT, false, st);
    other_group.set_ext("producerGroup", "someone_else");
    assert_eq!(refused(c, other_group), "The producer group wrong");
    let wrong_offset = Half {
        queue_offset: h.queue_offset + 5,
        ..h.clone()
    };
    assert_eq!(
        refused(c, end_request(&wrong_offset, COMMIT, false, st)),
        "The transaction state table offset wrong"
    );
    let nowhere = Half {
        commit_log_offset: h.commit_log_offset + 1,
        ..h.clone()
    };
    assert_eq!(
        refused(c, end_request(&nowhere, COMMIT, false, st)),
        "Find prepared transaction message failed"
    );
    c.send(&end_request(&nowhere, COMMIT, false, st).oneway())
        .unwrap();
    let mut bad_state = end_request(&h, COMMIT, false, st);
    bad_state.set_ext("commitOrRollback", 5);
    assert_eq!(refused(c, bad_state), "commitOrRollback field wrong: 5");
    assert!(queue(c, TOPIC, 2).is_empty(), "nothing was committed");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !broker.log().contains("oneway request refused") {
        assert!(Instant::now() < deadline, "no warning:\n{}", broker.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = strip_ansi(&broker.log());
    let line = log
        .lines()
        .find(|l| l.contains("oneway request refused"))
        .unwrap();
    assert!(line.contains("WARN") && line.contains("code=37"), "{line}");
}

/// The log without terminal colour sequences.
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(ch) = chars.next() {
        if ch == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(ch);
        }
    }
    out
}

#[test]
fn commit_delivers_rollback_drops_and_both_write_op_messages_json() {
    commit_and_rollback(SerializeType::Json);
}

#[test]
fn commit_delivers_rollback_drops_and_both_write_op_messages_binary() {
    commit_and_rollback(SerializeType::RocketMq);
}

/// A send that says PREPARED in sysFlag without TRAN_MSG would be stored with no ConsumeQueue
/// unit: it is refused, not acknowledged. A broker with rejectTransactionMessage refuses half
/// messages with NO_PERMISSION.
#[test]
fn undeliverable_and_rejected_half_messages_are_refused() {
    let broker = Broker::start(&[("RINGMQ_BROKER_REJECT_TRANSACTION_MESSAGE", "true")]);
    let mut c = broker.client();
    create_topic(&mut c);
    let props = format::encode_properties([("PGROUP", GROUP)]);
    let r = invoke(
        &mut c,
        send_request(0, "x", props, PREPARED, SerializeType::Json),
    );
    assert_eq!(r.code, rc::MESSAGE_ILLEGAL, "{:?}", r.remark);
    assert!(r.remark.unwrap().contains("TRAN_MSG"));
    let r = invoke(&mut c, half_request(0, "y", "U", SerializeType::RocketMq));
    assert_eq!(r.code, rc::NO_PERMISSION, "{:?}", r.remark);
    assert_eq!(
        r.remark.as_deref(),
        Some("the broker[127.0.0.1] sending transaction message is forbidden")
    );
    assert!(queue(&mut c, TOPIC, 0).is_empty());
}

/// The next CHECK_TRANSACTION_STATE on `c` (other frames are skipped).
fn next_check(c: &mut BlockingClient, within: Duration) -> Option<RemotingCommand> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        match c.read_command() {
            Ok(cmd) if cmd.code == req::CHECK_TRANSACTION_STATE && !cmd.is_response() => {
                return Some(cmd)
            }
            Ok(_) => {}
            Err(_) => {} // the read timed out; try until the deadline
        }
    }
    None
}

/// The CHECK_TRANSACTION_STATE body read by a decoder written from Java's
/// `MessageDecoder.encode` (v1 magic, 1-byte topic length), not by ringmq's.
struct CheckedMessage {
    queue_id: i32,
    queue_offset: i64,
    phy_offset: i64,
    body: Vec<u8>,
    topic: String,
    properties: String,
}

fn decode_check_body(b: &[u8]) -> CheckedMessage {
    let i32_at = |at: usize| i32::from_be_bytes(b[at..at + 4].try_into().unwrap());
    let i64_at = |at: usize| i64::from_be_bytes(b[at..at + 8].try_into().unwrap());
    assert_eq!(i32_at(0) as usize, b.len(), "TOTALSIZE");
    assert_eq!(i32_at(4), 0xDAA3_20A7_u32 as i32, "MAGICCODE v1");
    let sys_flag = i32_at(36);
    assert_eq!(sys_flag & 0x30, 0, "IPv4 hosts");
    // 40 born timestamp, 48 born host (8), 56 store timestamp, 64 store host (8),
    // 72 reconsume times, 76 prepared transaction offset, 84 body length.
    let body_len = i32_at(84) as usize;
    let body = b[88..88 + body_len].to_vec();
    let mut at = 88 + body_len;
    let topic_len = b[at] as usize;
    let topic = String::from_utf8(b[at + 1..at + 1 + topic_len].to_vec()).unwrap();
    at += 1 + topic_len;
    let props_len = u16::from_be_bytes([b[at], b[at + 1]]) as usize;
    let properties = String::from_utf8(b[at + 2..at + 2 + props_len].to_vec()).unwrap();
    assert_eq!(at + 2 + props_len, b.len());
    assert_eq!(i32_at(8), (crc32fast::hash(&body) & 0x7FFF_FFFF) as i32);
    CheckedMessage {
        queue_id: i32_at(12),
        queue_offset: i64_at(20),
        phy_offset: i64_at(28),
        body,
        topic,
        properties,
    }
}

fn check_times(m: &CheckedMessage) -> Option<String> {
    format::property_value(m.properties.as_bytes(), b"TRANSACTION_CHECK_TIMES")
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

const FAST_CHECKS: &[(&str, &str)] = &[
    ("RINGMQ_BROKER_TRANSACTION_CHECK_INTERVAL_MS", "300"),
    ("RINGMQ_BROKER_TRANSACTION_TIMEOUT_MS", "500"),
];

/// An unended half message is checked back on its producer's connection after the timeout;
/// the producer's answer (oneway, fromTransactionCheck) commits the checked copy, and nothing
/// is checked again.
#[test]
fn an_unended_half_message_is_checked_back_and_committed_by_the_answer() {
    let broker = Broker::start(FAST_CHECKS);
    let mut c = broker.client();
    create_topic(&mut c);
    let mut producer = broker.client();
    producer_heartbeat(&mut producer, "127.0.0.1@tx-producer");
    let sent_ms = now_ms();
    let h = send_half(&mut c, 3, "checked", SerializeType::RocketMq);
    let check = next_check(&mut producer, Duration::from_secs(10)).expect("a check-back");
    assert!(now_ms() - sent_ms >= 500, "checked before the timeout");
    assert!(check.is_oneway());
    // Java's header names the topic the checked copy is stored in; the body names the real one.
    assert_eq!(check.ext_opt_str("topic"), Some(HALF_TOPIC));
    assert_eq!(check.ext_opt_str("msgId"), Some(h.uniq.as_str()));
    assert_eq!(check.ext_opt_str("transactionId"), Some(h.uniq.as_str()));
    assert_eq!(check.ext_opt_str("bname"), Some("broker-a"));
    let copy_offset = check.ext_i64("tranStateTableOffset").unwrap();
    let copy_phy = check.ext_i64("commitLogOffset").unwrap();
    assert_eq!(copy_offset, 1, "the checked copy follows the half message");
    let offset_msg_id = check.ext_opt_str("offsetMsgId").unwrap();
    assert_eq!(
        format::decode_offset_msg_id(offset_msg_id).unwrap().1,
        copy_phy
    );
    let m = decode_check_body(&check.body);
    assert_eq!((m.topic.as_str(), m.queue_id), (TOPIC, 3), "the real queue");
    assert_eq!((m.queue_offset, m.phy_offset), (copy_offset, copy_phy));
    assert_eq!(m.body, b"checked");
    assert_eq!(check_times(&m).as_deref(), Some("1"));
    assert!(queue(&mut c, TOPIC, 3).is_empty());

    let answered = Half {
        queue_offset: copy_offset,
        commit_log_offset: copy_phy,
        uniq: h.uniq.clone(),
    };
    producer
        .send(&end_request(&answered, COMMIT, true, SerializeType::Json).oneway())
        .unwrap();
    let delivered = wait_for(&mut c, TOPIC, 3, 1);
    assert_eq!(delivered.len(), 1);
    assert_eq!(delivered[0].body, "checked");
    assert!(
        next_check(&mut producer, Duration::from_millis(1500)).is_none(),
        "checked again after its end"
    );
    assert_eq!(queue(&mut c, TOPIC, 3).len(), 1, "delivered once");
}

/// A half message its producer never answers is checked transactionCheckMax times, then moved
/// to TRANS_CHECK_MAX_TIME_TOPIC; it never reaches its topic.
#[test]
fn a_half_message_checked_too_often_goes_to_trans_check_max_time_topic() {
    let mut env = FAST_CHECKS.to_vec();
    env.push(("RINGMQ_BROKER_TRANSACTION_CHECK_MAX", "2"));
    let broker = Broker::start(&env);
    let mut c = broker.client();
    create_topic(&mut c);
    let mut producer = broker.client();
    producer_heartbeat(&mut producer, "127.0.0.1@tx-silent");
    send_half(&mut c, 0, "abandoned", SerializeType::Json);
    let times: Vec<Option<String>> = (0..2)
        .map(|_| {
            let check = next_check(&mut producer, Duration::from_secs(10)).expect("a check");
            check_times(&decode_check_body(&check.body))
        })
        .collect();
    assert_eq!(times, [Some("1".to_string()), Some("2".to_string())]);
    let moved = wait_for(&mut c, CHECK_MAX_TOPIC, 0, 1);
    assert_eq!(moved.len(), 1);
    assert_eq!(moved[0].body, "abandoned");
    assert_eq!(moved[0].prop("REAL_TOPIC"), Some(TOPIC));
    assert_eq!(moved[0].prop("TRANSACTION_CHECK_TIMES"), Some("2"));
    assert!(next_check(&mut producer, Duration::from_millis(1200)).is_none());
    assert!(queue(&mut c, TOPIC, 0).is_empty());
}

/// A restart between a half message and its end, clean or (with sync flush, so the half
/// message was acknowledged after its fsync) by SIGKILL: the commit still delivers it.
#[test]
fn a_restart_between_half_and_end_still_delivers_on_commit() {
    let mut broker = Broker::start(&[("RINGMQ_STORE_FLUSH_POLICY", "sync")]);
    let mut c = broker.client();
    create_topic(&mut c);
    let a = send_half(&mut c, 1, "survives-stop", SerializeType::Json);
    drop(c);
    broker.stop();
    broker.restart();
    let mut c = broker.client();
    assert!(queue(&mut c, TOPIC, 1).is_empty());
    c.send(&end_request(&a, COMMIT, false, SerializeType::RocketMq).oneway())
        .unwrap();
    let delivered = wait_for(&mut c, TOPIC, 1, 1);
    assert_eq!(delivered[0].body, "survives-stop");

    let b = send_half(&mut c, 1, "survives-kill", SerializeType::RocketMq);
    drop(c);
    broker.kill_hard();
    broker.restart();
    let mut c = broker.client();
    let r = invoke(&mut c, end_request(&b, COMMIT, false, SerializeType::Json));
    assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
    let delivered = wait_for(&mut c, TOPIC, 1, 2);
    let bodies: Vec<&str> = delivered.iter().map(|m| m.body.as_str()).collect();
    assert_eq!(bodies, ["survives-stop", "survives-kill"]);
}

/// The check-back scan goes on from its saved progress (group CID_SYS_RMQ_TRANS) after a
/// restart instead of checking every old copy again.
#[test]
fn the_check_back_scan_resumes_from_its_saved_progress_after_a_restart() {
    let env = [
        ("RINGMQ_BROKER_TRANSACTION_CHECK_INTERVAL_MS", "1500"),
        ("RINGMQ_BROKER_TRANSACTION_TIMEOUT_MS", "100"),
    ];
    let mut broker = Broker::start(&env);
    let mut c = broker.client();
    create_topic(&mut c);
    let mut producer = broker.client();
    producer_heartbeat(&mut producer, "127.0.0.1@tx-restart");
    send_half(&mut c, 0, "unanswered", SerializeType::Json);
    let first = next_check(&mut producer, Duration::from_secs(10)).expect("a check");
    assert_eq!(first.ext_i64("tranStateTableOffset").unwrap(), 1);
    drop((c, producer));
    broker.stop();
    let offsets =
        std::fs::read_to_string(broker.store_dir().join("config/consumerOffset.json")).unwrap();
    assert!(
        offsets.contains("RMQ_SYS_TRANS_HALF_TOPIC@CID_SYS_RMQ_TRANS"),
        "{offsets}"
    );
    broker.restart();
    let mut producer = broker.client();
    producer_heartbeat(&mut producer, "127.0.0.1@tx-restart");
    let next = next_check(&mut producer, Duration::from_secs(10)).expect("a check");
    let m = decode_check_body(&next.body);
    let times: i64 = check_times(&m).unwrap().parse().unwrap();
    assert!(times >= 2, "the scan started over: {times}");
    assert_eq!(next.ext_i64("tranStateTableOffset").unwrap(), times);
}

/// Client values at the ends of i64 (a born timestamp of i64::MIN, a commitLogOffset near
/// i64::MAX) are refused with an answer; the broker stays up and serves the next request.
#[test]
fn end_transaction_with_extreme_values_is_answered_and_the_broker_stays_up() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    create_topic(&mut c);
    let props = format::encode_properties([
        ("TRAN_MSG", "true"),
        ("PGROUP", GROUP),
        ("UNIQ_KEY", "UNIQ-old"),
        ("CHECK_IMMUNITY_TIME_IN_SECONDS", "60"),
    ]);
    let mut send = send_request(0, "old", props, PREPARED, SerializeType::Json);
    send.set_ext("bornTimestamp", i64::MIN);
    let r = invoke(&mut c, send);
    assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
    let msg_id = r.ext_opt_str("msgId").unwrap().to_string();
    let old = Half {
        queue_offset: r.ext_i64("queueOffset").unwrap(),
        commit_log_offset: format::decode_offset_msg_id(&msg_id).unwrap().1,
        uniq: "UNIQ-old".into(),
    };
    // Answered either way (Java's wrapping age lets it through; a saturated one refuses it).
    let r = invoke(
        &mut c,
        end_request(&old, ROLLBACK, false, SerializeType::Json),
    );
    assert!(
        [rc::SUCCESS, rc::ILLEGAL_OPERATION].contains(&r.code),
        "{:?}",
        r.remark
    );
    for far in [i64::MAX, i64::MAX - 7, i64::MAX - 100] {
        let nowhere = Half {
            commit_log_offset: far,
            ..old.clone()
        };
        let r = invoke(
            &mut c,
            end_request(&nowhere, COMMIT, false, SerializeType::RocketMq),
        );
        assert_eq!(r.code, rc::SYSTEM_ERROR, "{:?}", r.remark);
        assert_eq!(
            r.remark.as_deref(),
            Some("Find prepared transaction message failed")
        );
    }
    let h = send_half(&mut c, 1, "after", SerializeType::Json);
    let r = invoke(&mut c, end_request(&h, COMMIT, false, SerializeType::Json));
    assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
}

/// A record that looks like a half message, forged inside an ordinary message's body at a
/// CommitLog offset the client then names: the half queue has no unit pointing there, so the
/// END_TRANSACTION is refused and nothing is delivered.
#[test]
fn an_end_naming_a_record_forged_inside_a_body_is_refused() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    create_topic(&mut c);
    let h = send_half(&mut c, 0, "real", SerializeType::Json);
    let forged = |phy_offset: i64| {
        let props = format::encode_properties([
            ("PGROUP", GROUP),
            ("REAL_TOPIC", TOPIC),
            ("REAL_QID", "0"),
            ("UNIQ_KEY", "FORGED"),
        ]);
        let mut bytes = Vec::new();
        format::encode_record(
            &format::RecordFields {
                queue_id: 0,
                flag: 0,
                queue_offset: h.queue_offset,
                phy_offset,
                sys_flag: 0,
                born_timestamp_ms: now_ms(),
                born_host: "127.0.0.1:5000".parse().unwrap(),
                store_timestamp_ms: now_ms(),
                store_host: "127.0.0.1:10911".parse().unwrap(),
                reconsume_times: 0,
                prepared_transaction_offset: 0,
                body: b"forged",
                topic: HALF_TOPIC.as_bytes(),
                properties: props.as_bytes(),
            },
            &mut bytes,
        );
        bytes
    };
    let send_plain = |c: &mut BlockingClient, body: Vec<u8>| {
        let props = format::encode_properties([("UNIQ_KEY", "PLAIN")]);
        let mut cmd = send_request(1, "", props, 0, SerializeType::Json);
        cmd.body = Bytes::from(body);
        let r = invoke(c, cmd);
        assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
        let msg_id = r.ext_opt_str("msgId").unwrap().to_string();
        format::decode_offset_msg_id(&msg_id).unwrap().1
    };
    // The first send shows where a body lands in its record and how long the record is.
    let probe = forged(0);
    let first = send_plain(&mut c, probe.clone());
    let stored = pull(&mut c, TOPIC, 1, 0).body;
    let at = stored
        .windows(probe.len())
        .position(|w| w == probe.as_slice())
        .expect("the body in the stored record") as i64;
    let record_len = format::decode_record(&stored).unwrap().total_size as i64;
    let second = first + record_len;
    let forged_offset = second + at;
    assert_eq!(send_plain(&mut c, forged(forged_offset)), second);
    let fake = Half {
        queue_offset: h.queue_offset,
        commit_log_offset: forged_offset,
        uniq: "FORGED".into(),
    };
    let r = invoke(
        &mut c,
        end_request(&fake, COMMIT, false, SerializeType::Json),
    );
    assert_eq!(r.code, rc::SYSTEM_ERROR, "{:?}", r.remark);
    assert_eq!(r.remark.as_deref(), Some("The commit log offset wrong"));
    assert!(queue(&mut c, TOPIC, 0).is_empty(), "nothing was committed");
    // The real half message still commits.
    let r = invoke(&mut c, end_request(&h, COMMIT, false, SerializeType::Json));
    assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
}
