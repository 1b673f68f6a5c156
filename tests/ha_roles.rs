//! Master and slave roles with real processes (name server, master, slave on 127.0.0.1):
//! a slave refuses sends and answers pulls by its settings, both register under one broker
//! name, GET_BROKER_RUNTIME_INFO counts what each broker stored and served, and the slave's
//! metadata sync copies the master's tables without moving a slave-committed offset back.
//! Raw remoting frames, in both header encodings.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{invoke, Broker, Namesrv};
use ringmq::net::remoting_client::BlockingClient;
use ringmq::remoting::codes::{request_code as req, response_code as rc};
use ringmq::remoting::command::{RemotingCommand, SerializeType};

const BOTH: [SerializeType; 2] = [SerializeType::Json, SerializeType::RocketMq];

fn send(c: &mut BlockingClient, topic: &str, body: &str, st: SerializeType) -> RemotingCommand {
    invoke(
        c,
        common::send_v2(topic, 0, Bytes::from(body.to_string()), &[], 0, st),
    )
}

fn pull(c: &mut BlockingClient, topic: &str, offset: i64, st: SerializeType) -> RemotingCommand {
    invoke(
        c,
        common::pull(req::PULL_MESSAGE, topic, 0, offset, 32, 0, "*", 0, st),
    )
}

fn runtime_info(c: &mut BlockingClient, st: SerializeType) -> BTreeMap<String, String> {
    let r = invoke(
        c,
        RemotingCommand::request(req::GET_BROKER_RUNTIME_INFO).with_serialize_type(st),
    );
    assert_eq!(r.code, rc::SUCCESS, "{r:?}");
    let body: serde_json::Value = serde_json::from_slice(&r.body).expect("KVTable JSON");
    body["table"]
        .as_object()
        .expect("table")
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().expect("string value").to_string()))
        .collect()
}

fn num(info: &BTreeMap<String, String>, key: &str) -> i64 {
    info.get(key)
        .unwrap_or_else(|| panic!("no {key} in {info:?}"))
        .parse()
        .unwrap_or_else(|_| panic!("{key} = {:?} is no integer", info[key]))
}

fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Java 5.3's `prepareRuntimeInfo` keys (with the store's and its stats service's).
const JAVA_RUNTIME_KEYS: &[&str] = &[
    "bootTimestamp",
    "runtime",
    "putMessageEntireTimeMax",
    "putMessageTimesTotal",
    "putMessageFailedTimes",
    "putMessageSizeTotal",
    "putMessageDistributeTime",
    "putMessageAverageSize",
    "dispatchMaxBuffer",
    "getMessageEntireTimeMax",
    "putTps",
    "getFoundTps",
    "getMissTps",
    "getTotalTps",
    "getTransferredTps",
    "putLatency99",
    "putLatency999",
    "commitLogDiskRatio",
    "consumeQueueDiskRatio",
    "commitLogMinOffset",
    "commitLogMaxOffset",
    "brokerActive",
    "brokerVersionDesc",
    "brokerVersion",
    "msgPutTotalYesterdayMorning",
    "msgPutTotalTodayMorning",
    "msgPutTotalTodayNow",
    "msgGetTotalYesterdayMorning",
    "msgGetTotalTodayMorning",
    "msgGetTotalTodayNow",
    "dispatchBehindBytes",
    "pageCacheLockTimeMills",
    "earliestMessageTimeStamp",
    "startAcceptSendRequestTimeStamp",
    "timerReadBehind",
    "timerOffsetBehind",
    "timerCongestNum",
    "timerEnqueueTps",
    "timerDequeueTps",
    "remainTransientStoreBufferNumbs",
    "remainHowManyDataToFlush",
    "commitLogDirCapacity",
    "sendThreadPoolQueueSize",
    "sendThreadPoolQueueCapacity",
    "pullThreadPoolQueueSize",
    "pullThreadPoolQueueCapacity",
    "litePullThreadPoolQueueSize",
    "litePullThreadPoolQueueCapacity",
    "queryThreadPoolQueueSize",
    "queryThreadPoolQueueCapacity",
    "ackThreadPoolQueueSize",
    "ackThreadPoolQueueCapacity",
    "sendThreadPoolQueueHeadWaitTimeMills",
    "pullThreadPoolQueueHeadWaitTimeMills",
    "queryThreadPoolQueueHeadWaitTimeMills",
    "litePullThreadPoolQueueHeadWaitTimeMills",
    "ackThreadPoolQueueHeadWaitTimeMills",
    "EndTransactionQueueSize",
    "EndTransactionThreadPoolQueueCapacity",
];

#[test]
fn runtime_info_has_javas_keys_and_counts_sends_and_pulls() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    for st in BOTH {
        let before = runtime_info(&mut c, st);
        for key in JAVA_RUNTIME_KEYS {
            assert!(before.contains_key(*key), "{key} missing ({st:?})");
        }
        let topic = format!("Counted{st:?}");
        for i in 0..3 {
            let r = send(&mut c, &topic, &format!("m{i}"), st);
            assert_eq!(r.code, rc::SUCCESS, "{r:?}");
        }
        let p = pull(&mut c, &topic, 0, st);
        assert_eq!(p.code, rc::SUCCESS, "{p:?}");
        // One more pull that finds nothing: a miss for the store, nothing got.
        let miss = pull(&mut c, &topic, 3, st);
        assert_eq!(miss.code, rc::PULL_NOT_FOUND, "{miss:?}");
        let after = runtime_info(&mut c, st);
        let grew = |key: &str| num(&after, key) - num(&before, key);
        assert_eq!(grew("msgPutTotalTodayNow"), 3, "{st:?}");
        assert_eq!(grew("msgGetTotalTodayNow"), 3, "{st:?}");
        assert!(num(&after, "putMessageTimesTotal") >= 3);
        assert!(grew("commitLogMaxOffset") > 0);
        assert!(grew("putMessageSizeTotal") > 0);
        assert_eq!(after["brokerActive"], "true");
        assert_eq!(after["remainTransientStoreBufferNumbs"], "2147483647");
        assert!(num(&after, "earliestMessageTimeStamp") > 0);
        assert!(after["runtime"].starts_with("[ 0 days, 0 hours, "));
        let ratio: f64 = after["commitLogDiskRatio"].parse().expect("ratio");
        assert!((0.0..=1.0).contains(&ratio), "{ratio}");
    }
    // A delayed message counts once, when it is delivered to its topic (as Java: stored first
    // in the system topic SCHEDULE_TOPIC_XXXX, which the totals leave out).
    let before = num(
        &runtime_info(&mut c, SerializeType::Json),
        "msgPutTotalTodayNow",
    );
    let delayed = invoke(
        &mut c,
        common::send_v2(
            "CountedDelay",
            0,
            Bytes::from_static(b"later"),
            &[("DELAY", "1")],
            0,
            SerializeType::Json,
        ),
    );
    assert_eq!(delayed.code, rc::SUCCESS, "{delayed:?}");
    let now = num(
        &runtime_info(&mut c, SerializeType::Json),
        "msgPutTotalTodayNow",
    );
    assert_eq!(now, before, "not counted while it waits");
    wait_until("the delayed delivery", Duration::from_secs(15), || {
        num(
            &runtime_info(&mut c, SerializeType::Json),
            "msgPutTotalTodayNow",
        ) == before + 1
    });
    // The per-second samples: after ten of them the 10 s rates are numbers.
    wait_until("ten stats samples", Duration::from_secs(20), || {
        !runtime_info(&mut c, SerializeType::Json)["putTps"].starts_with(' ')
    });
    let info = runtime_info(&mut c, SerializeType::Json);
    let put_tps: f64 = info["putTps"].split(' ').next().unwrap().parse().unwrap();
    assert!(put_tps >= 0.0);
    assert_eq!(info["getTotalTps"].split(' ').count(), 3);
}

/// A name server, a master (`brokerId` 0) and a slave (`brokerId` 1) of broker "ha-roles".
struct Group {
    namesrv: Namesrv,
    master: Broker,
    slave: Broker,
}

fn start_group(slave_env: &[(&str, &str)]) -> Group {
    let namesrv = Namesrv::start();
    let common_env = [
        ("RINGMQ_BROKER_NAME", "ha-roles"),
        ("RINGMQ_BROKER_REGISTER_NAME_SERVER_PERIOD_MS", "1000"),
    ];
    let master = Broker::start_with_namesrv(&namesrv.addr(), &common_env);
    let mut env: Vec<(&str, &str)> = common_env.to_vec();
    env.extend_from_slice(&[
        ("RINGMQ_BROKER_ROLE", "SLAVE"),
        ("RINGMQ_BROKER_ID", "1"),
        ("RINGMQ_BROKER_SLAVE_SYNC_INTERVAL_MS", "300"),
    ]);
    env.extend_from_slice(slave_env);
    let slave = Broker::start_with_namesrv(&namesrv.addr(), &env);
    Group {
        namesrv,
        master,
        slave,
    }
}

fn create_topic(c: &mut BlockingClient, topic: &str) {
    let create = RemotingCommand::request(req::UPDATE_AND_CREATE_TOPIC)
        .with_ext("topic", topic)
        .with_ext("defaultTopic", "TBW102")
        .with_ext("readQueueNums", 4)
        .with_ext("writeQueueNums", 4)
        .with_ext("perm", 6)
        .with_ext("topicFilterType", "SINGLE_TAG");
    let r = invoke(c, create);
    assert_eq!(r.code, rc::SUCCESS, "{r:?}");
}

fn broker_addrs(route: &RemotingCommand) -> BTreeMap<String, String> {
    let v: serde_json::Value = serde_json::from_slice(&route.body).expect("route JSON");
    v["brokerDatas"][0]["brokerAddrs"]
        .as_object()
        .expect("brokerAddrs")
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect()
}

#[test]
fn a_slave_refuses_sends_registers_beside_its_master_and_redirects_pulls() {
    let g = start_group(&[]);
    let mut master = g.master.client();
    let mut slave = g.slave.client();
    create_topic(&mut master, "Roles");
    let mut ns = BlockingClient::connect(&g.namesrv.addr(), Duration::from_secs(5)).unwrap();
    wait_until("both brokers in the route", Duration::from_secs(15), || {
        let r = invoke(
            &mut ns,
            RemotingCommand::request(req::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", "Roles"),
        );
        r.code == rc::SUCCESS && broker_addrs(&r).len() == 2
    });
    let r = invoke(
        &mut ns,
        RemotingCommand::request(req::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", "Roles"),
    );
    let addrs = broker_addrs(&r);
    assert_eq!(addrs["0"], g.master.addr());
    assert_eq!(addrs["1"], g.slave.addr());
    wait_until(
        "the topic synced to the slave",
        Duration::from_secs(15),
        || {
            let r = invoke(
                &mut slave,
                RemotingCommand::request(req::GET_ALL_TOPIC_CONFIG),
            );
            String::from_utf8_lossy(&r.body).contains("\"Roles\"")
        },
    );
    for st in BOTH {
        let refused = send(&mut slave, "Roles", "to the slave", st);
        assert_eq!(refused.code, rc::SERVICE_NOT_AVAILABLE, "{refused:?}");
        let remark = refused.remark.unwrap_or_default();
        assert!(
            remark.contains("slave mode") && remark.contains("SLAVE"),
            "{remark}"
        );
        assert_eq!(send(&mut master, "Roles", "m", st).code, rc::SUCCESS);
        // slaveReadEnable off (the default): every pull goes back to the master, where it was.
        let p = pull(&mut slave, "Roles", 0, st);
        assert_eq!(p.code, rc::PULL_RETRY_IMMEDIATELY, "{p:?}");
        assert_eq!(p.ext_i64("suggestWhichBrokerId").unwrap(), 0);
        assert_eq!(p.ext_i64("nextBeginOffset").unwrap(), 0);
        assert!(p.body.is_empty());
    }
    // A send-back needs a master beside it.
    let back = invoke(
        &mut slave,
        RemotingCommand::request(req::CONSUMER_SEND_MSG_BACK)
            .with_ext("offset", 0)
            .with_ext("group", "cg")
            .with_ext("delayLevel", 0)
            .with_ext("unitMode", false),
    );
    assert_eq!(back.code, rc::SYSTEM_ERROR, "{back:?}");
    assert!(back
        .remark
        .unwrap_or_default()
        .contains("no master available"));
    let info = runtime_info(&mut slave, SerializeType::Json);
    assert_eq!(info["brokerActive"], "false");
    assert_eq!(num(&info, "msgPutTotalTodayNow"), 0);
}

fn query_offset(c: &mut BlockingClient, topic: &str, queue_id: i32) -> RemotingCommand {
    invoke(
        c,
        RemotingCommand::request(req::QUERY_CONSUMER_OFFSET)
            .with_ext("consumerGroup", "cg")
            .with_ext("topic", topic)
            .with_ext("queueId", queue_id),
    )
}

fn commit_offset(c: &mut BlockingClient, topic: &str, queue_id: i32, offset: i64) {
    let r = invoke(
        c,
        RemotingCommand::request(req::UPDATE_CONSUMER_OFFSET)
            .with_ext("consumerGroup", "cg")
            .with_ext("topic", topic)
            .with_ext("queueId", queue_id)
            .with_ext("commitOffset", offset),
    );
    assert_eq!(r.code, rc::SUCCESS, "{r:?}");
}

fn offset_of(c: &mut BlockingClient, topic: &str, queue_id: i32) -> Option<i64> {
    let r = query_offset(c, topic, queue_id);
    (r.code == rc::SUCCESS).then(|| r.ext_i64("offset").unwrap())
}

#[test]
fn the_slave_syncs_the_masters_tables_and_keeps_offsets_committed_to_it() {
    let g = start_group(&[]);
    let mut master = g.master.client();
    let mut slave = g.slave.client();
    create_topic(&mut master, "Synced");
    // A pull creates the group "cg" on the master; then offsets.
    let _ = pull(&mut master, "Synced", 0, SerializeType::Json);
    commit_offset(&mut master, "Synced", 0, 100);
    commit_offset(&mut master, "Synced", 1, 40);
    wait_until("the topic on the slave", Duration::from_secs(15), || {
        let r = invoke(
            &mut slave,
            RemotingCommand::request(req::GET_ALL_TOPIC_CONFIG),
        );
        String::from_utf8_lossy(&r.body).contains("\"Synced\"")
    });
    // A sync round may fall between the two commits, so wait for both.
    wait_until("the offsets on the slave", Duration::from_secs(15), || {
        offset_of(&mut slave, "Synced", 0) == Some(100)
            && offset_of(&mut slave, "Synced", 1) == Some(40)
    });
    // Groups and delay offsets, served by the master and persisted by the slave. The
    // slave syncs groups last (as Java's SlaveSynchronize does), so they may trail the
    // offsets by one round.
    wait_until("the group on the slave", Duration::from_secs(15), || {
        let groups = invoke(
            &mut slave,
            RemotingCommand::request(req::GET_ALL_SUBSCRIPTIONGROUP_CONFIG),
        );
        String::from_utf8_lossy(&groups.body).contains("\"cg\"")
    });
    let delay = invoke(
        &mut master,
        RemotingCommand::request(req::GET_ALL_DELAY_OFFSET),
    );
    assert_eq!(delay.code, rc::SUCCESS, "{delay:?}");
    let delay: serde_json::Value = serde_json::from_slice(&delay.body).unwrap();
    assert!(delay["offsetTable"].is_object(), "{delay}");
    let config = g.slave.store_dir().join("config");
    wait_until("the slave's files", Duration::from_secs(10), || {
        [
            "topics.json",
            "consumerOffset.json",
            "subscriptionGroup.json",
            "delayOffset.json",
        ]
        .iter()
        .all(|f| config.join(f).exists())
    });
    // A consumer commits to the slave (as while the master is away): the master's older
    // offset does not move it back (Java issue #1094) ...
    commit_offset(&mut slave, "Synced", 0, 150);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(offset_of(&mut slave, "Synced", 0), Some(150));
    // ... other queues still follow the master ...
    commit_offset(&mut master, "Synced", 1, 60);
    wait_until("queue 1 synced", Duration::from_secs(10), || {
        offset_of(&mut slave, "Synced", 1) == Some(60)
    });
    // ... and once the master has passed the slave's commit, the master leads again.
    commit_offset(&mut master, "Synced", 0, 170);
    wait_until("queue 0 synced", Duration::from_secs(10), || {
        offset_of(&mut slave, "Synced", 0) == Some(170)
    });
    // The slave persists what it synced (its own flush interval, so wait for it).
    wait_until(
        "the synced offsets on the slave's disk",
        Duration::from_secs(15),
        || {
            let Ok(bytes) = std::fs::read(config.join("consumerOffset.json")) else {
                return false;
            };
            let offsets: serde_json::Value = serde_json::from_slice(&bytes).expect("offset JSON");
            offsets["offsetTable"]["Synced@cg"].is_object()
        },
    );
}

fn pull_from(c: &mut BlockingClient, topic: &str, offset: i64, max: i32) -> RemotingCommand {
    invoke(
        c,
        common::pull(
            req::PULL_MESSAGE,
            topic,
            0,
            offset,
            max,
            0,
            "*",
            0,
            SerializeType::Json,
        ),
    )
}

/// 600 KiB of backlog against a memory window of 40 % of 1 MiB: a consumer at the start is
/// sent to the slave (brokerId 1, the group's whichBrokerWhenConsumeSlowly), the slave serves
/// it and sends it back once it caught up.
#[test]
fn a_consumer_behind_is_sent_to_the_slave_and_back_once_caught_up() {
    let env = [
        ("RINGMQ_BROKER_SLAVE_READ_ENABLED", "true"),
        ("RINGMQ_STORE_TOTAL_PHYSICAL_MEMORY_BYTES", "1048576"),
    ];
    let namesrv = Namesrv::start();
    let mut master_env = vec![("RINGMQ_BROKER_NAME", "split")];
    master_env.extend_from_slice(&env);
    let master = Broker::start_with_namesrv(&namesrv.addr(), &master_env);
    let mut slave_env = master_env.clone();
    slave_env.extend_from_slice(&[
        ("RINGMQ_BROKER_ROLE", "SLAVE"),
        ("RINGMQ_BROKER_ID", "1"),
        ("RINGMQ_BROKER_SLAVE_SYNC_INTERVAL_MS", "300"),
        ("RINGMQ_BROKER_REGISTER_NAME_SERVER_PERIOD_MS", "1000"),
    ]);
    let slave = Broker::start_with_namesrv(&namesrv.addr(), &slave_env);
    let mut m = master.client();
    let mut s = slave.client();
    let body = "x".repeat(4000);
    for _ in 0..150 {
        let r = send(&mut m, "Split", &body, SerializeType::Json);
        assert_eq!(r.code, rc::SUCCESS, "{r:?}");
    }
    let master_max = num(
        &runtime_info(&mut m, SerializeType::Json),
        "commitLogMaxOffset",
    );
    wait_until("the slave to replicate", Duration::from_secs(30), || {
        num(
            &runtime_info(&mut s, SerializeType::Json),
            "commitLogMaxOffset",
        ) == master_max
    });
    let info = runtime_info(&mut m, SerializeType::Json);
    assert_eq!(info["haConnectionNums"], "1");
    assert_eq!(info["haSlaveAckOffset"], master_max.to_string());
    assert_eq!(info["haSlaveFallBehindBytes"], "0");
    // On the master: behind → the slave; near the head → the master.
    let p = pull_from(&mut m, "Split", 0, 4);
    assert_eq!(p.code, rc::SUCCESS, "{p:?}");
    assert_eq!(p.ext_i64("suggestWhichBrokerId").unwrap(), 1);
    let p = pull_from(&mut m, "Split", 140, 4);
    assert_eq!(p.ext_i64("suggestWhichBrokerId").unwrap(), 0);
    // The slave needs the topic and the group from its master before it serves.
    wait_until(
        "the slave to know its master",
        Duration::from_secs(15),
        || !runtime_info(&mut s, SerializeType::Json)["haMasterAddr"].is_empty(),
    );
    wait_until("the topic synced", Duration::from_secs(15), || {
        let r = invoke(&mut s, RemotingCommand::request(req::GET_ALL_TOPIC_CONFIG));
        String::from_utf8_lossy(&r.body).contains("\"Split\"")
    });
    let before = num(
        &runtime_info(&mut s, SerializeType::Json),
        "msgGetTotalTodayNow",
    );
    let p = pull_from(&mut s, "Split", 0, 4);
    assert_eq!(p.code, rc::SUCCESS, "{p:?}");
    assert_eq!(
        p.ext_i64("suggestWhichBrokerId").unwrap(),
        1,
        "stay on the slave"
    );
    let p = pull_from(&mut s, "Split", 140, 4);
    assert_eq!(p.code, rc::SUCCESS, "{p:?}");
    assert_eq!(
        p.ext_i64("suggestWhichBrokerId").unwrap(),
        0,
        "back to the master"
    );
    let p = pull_from(&mut s, "Split", 150, 4);
    assert_eq!(p.code, rc::PULL_RETRY_IMMEDIATELY, "{p:?}");
    assert_eq!(p.ext_i64("nextBeginOffset").unwrap(), 150);
    let after = num(
        &runtime_info(&mut s, SerializeType::Json),
        "msgGetTotalTodayNow",
    );
    assert_eq!(after - before, 8, "the slave counts what it served");
}
