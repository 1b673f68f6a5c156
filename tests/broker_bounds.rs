//! Memory bounds a client's request must not get around, checked on the wire against a real
//! broker: subscription expressions, parked pulls per connection, the consumer offset table's
//! queue ids, and the size and entry count of a batch send.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{invoke, Broker};
use ringmq::net::remoting_client::BlockingClient;
use ringmq::remoting::codes::{request_code as req, response_code as rc};
use ringmq::remoting::command::{RemotingCommand, SerializeType};
use ringmq::store::format;

const SUSPEND: i32 = 0x2;
/// `RINGMQ_LONGPOLL_PARKED_PULLS_MAX_PER_CONNECTION` in the bound's test (the default, 65536,
/// is more than a test should park).
const PARKED_PULLS_MAX_PER_CONNECTION: i32 = 64;
/// W5's queues (256 topics of 8), all consumed over one connection.
const W5_QUEUES: i32 = 2048;

fn send(topic: &str, queue_id: i32, body: &str) -> RemotingCommand {
    common::send_v2(
        topic,
        queue_id,
        Bytes::from(body.to_string()),
        &[],
        0,
        SerializeType::Json,
    )
}

/// A broker with small CommitLog files (these tests store little, except the batch of too
/// many messages).
fn start(env: &[(&str, &str)]) -> Broker {
    let mut env = env.to_vec();
    env.push(("RINGMQ_STORE_COMMIT_LOG_FILE_SIZE_BYTES", "67108864"));
    Broker::start(&env)
}

/// Sends one message to queue 0 of `topic` and checks it was stored.
fn sent(c: &mut BlockingClient, topic: &str, body: &str) {
    let r = invoke(c, send(topic, 0, body));
    assert_eq!(r.code, rc::SUCCESS, "{r:?}");
}

fn pull(topic: &str, offset: i64, sys_flag: i32, sub: &str) -> RemotingCommand {
    common::pull(
        req::PULL_MESSAGE,
        topic,
        0,
        offset,
        32,
        sys_flag,
        sub,
        15_000,
        SerializeType::Json,
    )
}

/// A TAG subscription carried in the pull header is bounded like an SQL92 one: one past the
/// limit is refused with SUBSCRIPTION_PARSE_FAILED before anything is compiled or cached.
#[test]
fn an_over_long_tag_subscription_is_refused() {
    let broker = start(&[]);
    let mut c = broker.client();
    sent(&mut c, "TagLen", "m");
    let limit = ringmq::filter::tag::TAG_EXPRESSION_LENGTH_MAX_BYTES;
    let tags = |len: usize| {
        let mut text = "t||".repeat(len / 3);
        text.push_str(&"x".repeat(len - text.len()));
        text
    };
    let at_limit = invoke(&mut c, pull("TagLen", 1, 0, &tags(limit)));
    assert_eq!(at_limit.code, rc::PULL_NOT_FOUND, "{at_limit:?}");
    let over = invoke(&mut c, pull("TagLen", 1, 0, &tags(limit + 1)));
    assert_eq!(over.code, rc::SUBSCRIPTION_PARSE_FAILED, "{over:?}");
    let remark = over.remark.unwrap_or_default();
    assert!(remark.contains("limit"), "{remark}");
}

/// One connection parks at most `RINGMQ_LONGPOLL_PARKED_PULLS_MAX_PER_CONNECTION` pulls; the
/// next is answered at once, as when the hold table is full.
#[test]
fn a_connection_parks_a_bounded_number_of_pulls() {
    let cap_text = PARKED_PULLS_MAX_PER_CONNECTION.to_string();
    let broker = start(&[(
        "RINGMQ_LONGPOLL_PARKED_PULLS_MAX_PER_CONNECTION",
        cap_text.as_str(),
    )]);
    let mut c = broker.client();
    sent(&mut c, "Parks", "m");
    let cap = PARKED_PULLS_MAX_PER_CONNECTION;
    for opaque in 1..=cap {
        let mut parked = pull("Parks", 1, SUSPEND, "*");
        parked.opaque = opaque;
        c.send(&parked).unwrap();
    }
    let started = Instant::now();
    let mut over = pull("Parks", 1, SUSPEND, "*");
    over.opaque = cap + 1;
    c.send(&over).unwrap();
    let answer = c.read_command().unwrap();
    assert_eq!(answer.opaque, cap + 1, "answered first: {answer:?}");
    assert_eq!(answer.code, rc::PULL_NOT_FOUND);
    assert!(started.elapsed() < Duration::from_secs(5));
    // Another connection still parks: the bound is per connection.
    let mut other = broker.client();
    let mut parked = pull("Parks", 1, SUSPEND, "*");
    parked.opaque = cap + 2;
    other.send(&parked).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let mut producer = broker.client();
    sent(&mut producer, "Parks", "wake");
    let woken = other.read_command().unwrap();
    assert_eq!(
        (woken.opaque, woken.code),
        (cap + 2, rc::SUCCESS),
        "{woken:?}"
    );
}

/// By default one connection parks a pull for each of W5's 2,048 queues (one client consuming
/// them all, as a Java client instance does over its one connection per broker): none is
/// answered before a message arrives, so the client does not pull again and again. Here the
/// pulls wait on one queue, and one send answers them all.
#[test]
fn by_default_one_connection_parks_a_pull_per_queue_of_w5() {
    let broker = start(&[]);
    let mut c = broker.client();
    sent(&mut c, "ManyParks", "m");
    for opaque in 1..=W5_QUEUES {
        let mut parked = pull("ManyParks", 1, SUSPEND, "*");
        parked.opaque = opaque;
        c.send(&parked).unwrap();
    }
    // A pull answered at once (not parked) would come before this one's answer.
    let probe = RemotingCommand::request(req::GET_BROKER_RUNTIME_INFO).with_opaque(W5_QUEUES + 1);
    c.send(&probe).unwrap();
    let first = c.read_command().unwrap();
    assert_eq!(
        first.opaque,
        W5_QUEUES + 1,
        "a pull was not parked: {first:?}"
    );
    let mut producer = broker.client();
    sent(&mut producer, "ManyParks", "wake");
    let mut woken = 0;
    while woken < W5_QUEUES {
        let answer = c.read_command().unwrap();
        assert_eq!(answer.code, rc::SUCCESS, "{answer:?}");
        woken += 1;
    }
}

fn update_offset(topic: &str, queue_id: i32) -> RemotingCommand {
    RemotingCommand::request(req::UPDATE_CONSUMER_OFFSET)
        .with_ext("consumerGroup", "cg")
        .with_ext("topic", topic)
        .with_ext("queueId", queue_id)
        .with_ext("commitOffset", 1)
}

/// UPDATE_CONSUMER_OFFSET only for a queue the topic has: any other queue id would be one more
/// offset table entry, kept and persisted forever.
#[test]
fn an_offset_for_a_queue_the_topic_lacks_is_refused() {
    let broker = start(&[]);
    let mut c = broker.client();
    sent(&mut c, "Offsets", "m");
    // The pull creates group "cg".
    invoke(&mut c, pull("Offsets", 0, 0, "*"));
    assert_eq!(
        invoke(&mut c, update_offset("Offsets", 3)).code,
        rc::SUCCESS
    );
    for queue_id in [4, 1_000_000, -1] {
        let r = invoke(&mut c, update_offset("Offsets", queue_id));
        assert_eq!(r.code, rc::INVALID_PARAMETER, "queue {queue_id}: {r:?}");
        let remark = r.remark.unwrap_or_default();
        assert!(remark.contains("readQueueNums:[4]"), "{remark}");
    }
    let unknown = invoke(&mut c, update_offset("NoSuchTopic", 0));
    assert_eq!(unknown.code, rc::TOPIC_NOT_EXIST);
}

fn batch_send(topic: &str, body: Vec<u8>) -> RemotingCommand {
    let mut cmd = send(topic, 0, "");
    cmd.code = req::SEND_BATCH_MESSAGE;
    cmd.set_ext("m", "true");
    cmd.body = Bytes::from(body);
    cmd
}

fn batch_of(entries: usize, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..entries {
        format::encode_batch_entry(0, body, b"", &mut out);
    }
    out
}

/// A batch whose body is over maxMessageSize is refused whole with MESSAGE_ILLEGAL (Java's
/// `DefaultMessageStore` checks the batch body against it) and stores nothing.
#[test]
fn a_batch_over_the_max_message_size_stores_nothing() {
    let broker = start(&[("RINGMQ_STORE_MAX_MESSAGE_SIZE_BYTES", "65536")]);
    let mut c = broker.client();
    sent(&mut c, "BigBatch", "first");
    // Every entry is well under the limit; together they are over it.
    let body = batch_of(100, &[b'x'; 1000]);
    assert!(body.len() > 65536);
    let r = invoke(&mut c, batch_send("BigBatch", body));
    assert_eq!(r.code, rc::MESSAGE_ILLEGAL, "{:?}", r.remark);
    let p = invoke(&mut c, pull("BigBatch", 1, 0, "*"));
    assert_eq!(
        p.code,
        rc::PULL_NOT_FOUND,
        "nothing of the batch was stored"
    );
    let fits = batch_send("BigBatch", batch_of(60, &[b'x'; 1000]));
    assert_eq!(invoke(&mut c, fits).code, rc::SUCCESS);
}

/// A batch of more messages than one response can name is refused before anything is stored,
/// so the producer's retry cannot store them twice.
#[test]
fn a_batch_of_too_many_messages_stores_nothing() {
    let broker = start(&[("RINGMQ_STORE_MAX_MESSAGE_SIZE_BYTES", "16777216")]);
    let mut c = broker.client();
    sent(&mut c, "ManyBatch", "first");
    let max = ringmq::broker::processor::send::BATCH_MESSAGES_MAX;
    let r = invoke(&mut c, batch_send("ManyBatch", batch_of(max + 1, b"x")));
    assert_eq!(r.code, rc::MESSAGE_ILLEGAL, "{:?}", r.remark);
    let p = invoke(&mut c, pull("ManyBatch", 1, 0, "*"));
    assert_eq!(
        p.code,
        rc::PULL_NOT_FOUND,
        "nothing of the batch was stored"
    );
}
