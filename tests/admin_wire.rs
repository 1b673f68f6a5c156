//! The admin request codes against a real `ringmq` process, with raw frames in both header
//! encodings: subscription groups (200, 207), topic and consume stats (202, 208), connection
//! lists (203, 204), topic config and deletion (351, 215), broker config (25, 26), and the name
//! server's admin codes (216, 206, 106, KV config 100-102 and 219).

mod common;

use bytes::Bytes;
use common::{invoke, Broker};
use ringmq::net::remoting_client::BlockingClient;
use ringmq::remoting::body::admin::{
    ConsumeStats, ConsumerConnection, KvTable, ProducerConnection, TopicStatsTable,
};
use ringmq::remoting::body::json::parse_lenient;
use ringmq::remoting::body::lock_batch::MessageQueue;
use ringmq::remoting::codes::{request_code as req, response_code as rc};
use ringmq::remoting::command::{RemotingCommand, SerializeType};

const ENCODINGS: [SerializeType; 2] = [SerializeType::Json, SerializeType::RocketMq];

fn call(c: &mut BlockingClient, st: SerializeType, cmd: RemotingCommand) -> RemotingCommand {
    let r = invoke(c, cmd.with_serialize_type(st));
    assert_eq!(r.serialize_type, st, "answered in the request's encoding");
    r
}

fn send(c: &mut BlockingClient, topic: &str, queue_id: i32, n: usize) {
    for i in 0..n {
        let body = Bytes::from(format!("m{i}"));
        let r = invoke(
            c,
            common::send_v2(topic, queue_id, body, &[], 0, SerializeType::Json),
        );
        assert_eq!(r.code, rc::SUCCESS, "{r:?}");
    }
}

fn heartbeat(client_id: &str, group: &str, topic: &str, producer_group: &str) -> RemotingCommand {
    let body = serde_json::json!({
        "clientID": client_id,
        "consumerDataSet": [{
            "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "consumeType": "CONSUME_PASSIVELY",
            "groupName": group, "messageModel": "CLUSTERING", "unitMode": false,
            "subscriptionDataSet": [{"classFilterMode": false, "codeSet": [], "expressionType": "TAG",
                "subString": "*", "subVersion": 1, "tagsSet": [], "topic": topic}]
        }],
        "producerDataSet": [{"groupName": producer_group}]
    });
    RemotingCommand::request(req::HEART_BEAT).with_body(Bytes::from(body.to_string()))
}

/// Creates `group` and commits `offset` for its queue (the broker refuses offsets of unknown
/// groups).
fn commit(c: &mut BlockingClient, group: &str, topic: &str, queue_id: i32, offset: i64) {
    let body = format!(r#"{{"groupName":"{group}"}}"#);
    let r = invoke(
        c,
        RemotingCommand::request(req::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
            .with_body(Bytes::from(body)),
    );
    assert_eq!(r.code, rc::SUCCESS, "{r:?}");
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

fn mq(topic: &str, queue_id: i32) -> MessageQueue {
    MessageQueue {
        topic: topic.into(),
        broker_name: "broker-a".into(),
        queue_id,
    }
}

fn all_groups(c: &mut BlockingClient) -> serde_json::Value {
    let r = invoke(
        c,
        RemotingCommand::request(req::GET_ALL_SUBSCRIPTIONGROUP_CONFIG),
    );
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    v["subscriptionGroupTable"].clone()
}

#[test]
fn subscription_groups_are_created_leniently_deleted_and_persisted() {
    let mut broker = Broker::start(&[]);
    let mut c = broker.client();
    for (i, st) in ENCODINGS.into_iter().enumerate() {
        let group = format!("adminGroup{i}");
        // A C++-style body: numbers and booleans as strings, an unknown member.
        let body = format!(
            r#"{{"groupName":"{group}","consumeEnable":"false","retryMaxTimes":"3","brokerId":"1",
            "whichBrokerWhenConsumeSlowly":1,"consumeBroadcastEnable":0,"groupRetryPolicy":{{"type":"CUSTOMIZED"}}}}"#
        );
        let r = call(
            &mut c,
            st,
            RemotingCommand::request(req::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
                .with_body(Bytes::from(body)),
        );
        assert_eq!((r.code, r.remark.as_deref()), (rc::SUCCESS, None), "{r:?}");
        let g = &all_groups(&mut c)[&group];
        assert_eq!(g["consumeEnable"], false);
        assert_eq!(g["retryMaxTimes"], 3);
        assert_eq!(g["brokerId"], 1);
        assert_eq!(g["consumeBroadcastEnable"], false);
    }
    // An illegal group name: Java's INVALID_PARAMETER and remark.
    let r = invoke(
        &mut c,
        RemotingCommand::request(req::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
            .with_body(Bytes::from_static(br#"{"groupName":"a b"}"#)),
    );
    assert_eq!(r.code, rc::INVALID_PARAMETER);
    assert!(r.remark.unwrap().contains("illegal characters"));
    // A body that is not JSON.
    let r = invoke(
        &mut c,
        RemotingCommand::request(req::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
            .with_body(Bytes::from_static(b"{nope")),
    );
    assert_eq!(r.code, rc::SYSTEM_ERROR);

    // Persisted across a restart.
    broker.stop();
    broker.restart();
    let mut c = broker.client();
    assert_eq!(all_groups(&mut c)["adminGroup0"]["retryMaxTimes"], 3);

    // Delete, with cleanOffset dropping the committed offsets.
    commit(&mut c, "adminGroup1", "TBW102", 0, 5);
    let offsets = invoke(
        &mut c,
        RemotingCommand::request(req::GET_ALL_CONSUMER_OFFSET),
    );
    assert!(String::from_utf8_lossy(&offsets.body).contains("TBW102@adminGroup1"));
    for (i, st) in ENCODINGS.into_iter().enumerate() {
        let group = format!("adminGroup{i}");
        let r = call(
            &mut c,
            st,
            RemotingCommand::request(req::DELETE_SUBSCRIPTIONGROUP)
                .with_ext("groupName", &group)
                .with_ext("cleanOffset", true),
        );
        assert_eq!(r.code, rc::SUCCESS, "{r:?}");
        assert!(all_groups(&mut c).get(&group).is_none());
    }
    let offsets = invoke(
        &mut c,
        RemotingCommand::request(req::GET_ALL_CONSUMER_OFFSET),
    );
    assert!(!String::from_utf8_lossy(&offsets.body).contains("adminGroup1"));
    // A missing header field is Java's SYSTEM_ERROR naming it.
    let r = invoke(
        &mut c,
        RemotingCommand::request(req::DELETE_SUBSCRIPTIONGROUP),
    );
    assert_eq!(r.code, rc::SYSTEM_ERROR);
    assert!(r.remark.unwrap().contains("groupName"));
}

#[test]
fn topic_stats_and_consume_stats_are_java_shaped() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    send(&mut c, "StatsTopic", 1, 3);
    commit(&mut c, "statsGroup", "StatsTopic", 1, 2);
    for st in ENCODINGS {
        let r = call(
            &mut c,
            st,
            RemotingCommand::request(req::GET_TOPIC_STATS_INFO).with_ext("topic", "StatsTopic"),
        );
        assert_eq!(r.code, rc::SUCCESS, "{r:?}");
        let text = String::from_utf8(r.body.to_vec()).unwrap();
        // fastjson's object keys, as the Java broker writes them.
        assert!(
            text.contains(r#"{"brokerName":"broker-a","queueId":1,"topic":"StatsTopic"}:{"#),
            "{text}"
        );
        let table = TopicStatsTable::parse(&r.body).unwrap();
        assert_eq!(table.offset_table.len(), 4);
        let q1 = table.offset_table[&mq("StatsTopic", 1)];
        assert_eq!((q1.min_offset, q1.max_offset), (0, 3));
        assert!(q1.last_update_timestamp > 1_700_000_000_000);
        assert_eq!(
            table.offset_table[&mq("StatsTopic", 0)].last_update_timestamp,
            0
        );

        let r = call(
            &mut c,
            st,
            RemotingCommand::request(req::GET_TOPIC_STATS_INFO).with_ext("topic", "NoSuchTopic"),
        );
        assert_eq!(r.code, rc::TOPIC_NOT_EXIST);
        assert_eq!(r.remark.as_deref(), Some("topic[NoSuchTopic] not exist"));

        // By the group's committed topics (no topic in the header).
        let r = call(
            &mut c,
            st,
            RemotingCommand::request(req::GET_CONSUME_STATS)
                .with_ext("consumerGroup", "statsGroup"),
        );
        assert_eq!(r.code, rc::SUCCESS, "{r:?}");
        let text = String::from_utf8_lossy(&r.body);
        assert!(
            text.starts_with(r#"{"consumeTps":0.0,"offsetTable":{{"#),
            "{text}"
        );
        let stats = ConsumeStats::parse(&r.body).unwrap();
        assert_eq!(stats.offset_table.len(), 4);
        let w = stats.offset_table[&mq("StatsTopic", 1)];
        assert_eq!(
            (w.broker_offset, w.consumer_offset, w.pull_offset),
            (3, 2, 2)
        );
        assert!(w.last_timestamp > 1_700_000_000_000);
        let w0 = stats.offset_table[&mq("StatsTopic", 0)];
        assert_eq!(
            (w0.broker_offset, w0.consumer_offset, w0.last_timestamp),
            (0, 0, 0)
        );
    }
    // A group with no offsets has empty stats; an unknown topic in the list is skipped.
    let r = invoke(
        &mut c,
        RemotingCommand::request(req::GET_CONSUME_STATS)
            .with_ext("consumerGroup", "other")
            .with_ext("topicList", "NoSuchTopic;StatsTopic"),
    );
    let stats = ConsumeStats::parse(&r.body).unwrap();
    assert_eq!(stats.offset_table.len(), 4);
    assert_eq!(stats.offset_table[&mq("StatsTopic", 1)].consumer_offset, 0);
}

#[test]
fn connection_lists_name_clients_or_refuse_with_java_codes() {
    let broker = Broker::start(&[]);
    let mut member = broker.client();
    let r = invoke(
        &mut member,
        heartbeat("127.0.0.1@admin1", "connGroup", "ConnTopic", "connProducer"),
    );
    assert_eq!(r.code, rc::SUCCESS, "{r:?}");
    let mut c = broker.client();
    for st in ENCODINGS {
        let r = call(
            &mut c,
            st,
            RemotingCommand::request(req::GET_CONSUMER_CONNECTION_LIST)
                .with_ext("consumerGroup", "connGroup"),
        );
        assert_eq!(r.code, rc::SUCCESS, "{r:?}");
        let cc: ConsumerConnection = parse_lenient(&r.body, "ConsumerConnection").unwrap();
        assert_eq!(cc.connection_set.len(), 1);
        let conn = &cc.connection_set[0];
        assert_eq!(conn.client_id, "127.0.0.1@admin1");
        assert_eq!(conn.language, "JAVA");
        assert!(conn.client_addr.starts_with("127.0.0.1:"));
        assert_eq!(cc.consume_from_where, "CONSUME_FROM_FIRST_OFFSET");
        assert_eq!(cc.message_model, "CLUSTERING");
        assert_eq!(cc.subscription_table["ConnTopic"].sub_string, "*");

        let r = call(
            &mut c,
            st,
            RemotingCommand::request(req::GET_CONSUMER_CONNECTION_LIST)
                .with_ext("consumerGroup", "nobody"),
        );
        assert_eq!(r.code, rc::CONSUMER_NOT_ONLINE);
        assert_eq!(
            r.remark.as_deref(),
            Some("the consumer group[nobody] not online")
        );

        let r = call(
            &mut c,
            st,
            RemotingCommand::request(req::GET_PRODUCER_CONNECTION_LIST)
                .with_ext("producerGroup", "connProducer"),
        );
        assert_eq!(r.code, rc::SUCCESS, "{r:?}");
        let pc: ProducerConnection = parse_lenient(&r.body, "ProducerConnection").unwrap();
        assert_eq!(pc.connection_set[0].client_id, "127.0.0.1@admin1");

        let r = call(
            &mut c,
            st,
            RemotingCommand::request(req::GET_PRODUCER_CONNECTION_LIST)
                .with_ext("producerGroup", "nobody"),
        );
        assert_eq!(r.code, rc::SYSTEM_ERROR);
        assert_eq!(
            r.remark.as_deref(),
            Some("the producer group[nobody] not exist")
        );
    }
}

#[test]
fn topic_config_and_delete_topic_keep_the_commit_log() {
    let mut broker = Broker::start(&[]);
    let mut c = broker.client();
    send(&mut c, "DoomedTopic", 0, 2);
    send(&mut c, "DoomedTopic2", 0, 1);
    commit(&mut c, "dg", "DoomedTopic", 0, 1);
    let cq_dir = broker.store_dir().join("consumequeue").join("DoomedTopic");
    assert!(cq_dir.is_dir());
    for (i, st) in ENCODINGS.into_iter().enumerate() {
        let topic = ["DoomedTopic", "DoomedTopic2"][i];
        let r = call(
            &mut c,
            st,
            RemotingCommand::request(req::GET_TOPIC_CONFIG).with_ext("topic", topic),
        );
        assert_eq!(r.code, rc::SUCCESS, "{r:?}");
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["topicName"], topic);
        assert_eq!(v["writeQueueNums"], 4);

        let r = call(
            &mut c,
            st,
            RemotingCommand::request(req::DELETE_TOPIC_IN_BROKER).with_ext("topic", topic),
        );
        assert_eq!(r.code, rc::SUCCESS, "{r:?}");
        let r = call(
            &mut c,
            st,
            RemotingCommand::request(req::GET_TOPIC_CONFIG).with_ext("topic", topic),
        );
        assert_eq!(r.code, rc::TOPIC_NOT_EXIST);
        assert_eq!(
            r.remark,
            Some(format!("No topic in this broker. topic: {topic}"))
        );
    }
    assert!(!cq_dir.exists(), "the ConsumeQueue files are gone");
    let commit_log = broker.store_dir().join("commitlog");
    assert!(
        std::fs::read_dir(commit_log).unwrap().count() > 0,
        "the CommitLog stays"
    );
    let offsets = invoke(
        &mut c,
        RemotingCommand::request(req::GET_ALL_CONSUMER_OFFSET),
    );
    assert!(!String::from_utf8_lossy(&offsets.body).contains("DoomedTopic@dg"));
    let topics = invoke(&mut c, RemotingCommand::request(req::GET_ALL_TOPIC_CONFIG));
    assert!(!String::from_utf8_lossy(&topics.body).contains("DoomedTopic"));
    // System topics and blank names are refused as Java refuses them.
    for (topic, remark) in [
        (
            "SCHEDULE_TOPIC_XXXX",
            "The topic[SCHEDULE_TOPIC_XXXX] is conflict with system topic.",
        ),
        (
            "broker-a",
            "The topic[broker-a] is conflict with system topic.",
        ),
        (" ", "The specified topic is blank."),
    ] {
        let r = invoke(
            &mut c,
            RemotingCommand::request(req::DELETE_TOPIC_IN_BROKER).with_ext("topic", topic),
        );
        assert_eq!(
            (r.code, r.remark.as_deref()),
            (rc::INVALID_PARAMETER, Some(remark))
        );
    }
    // A restart does not bring the deleted topic's queues back from the CommitLog.
    broker.stop();
    broker.restart();
    assert!(!cq_dir.exists(), "recovery re-dispatched a deleted topic");
}

fn broker_config(c: &mut BlockingClient, st: SerializeType) -> (String, serde_json::Value) {
    let r = call(c, st, RemotingCommand::request(req::GET_BROKER_CONFIG));
    assert_eq!(r.code, rc::SUCCESS, "{r:?}");
    let version: serde_json::Value =
        serde_json::from_str(r.ext_opt_str("version").expect("version header")).unwrap();
    (String::from_utf8(r.body.to_vec()).unwrap(), version)
}

#[test]
fn broker_config_is_java_properties_and_only_live_keys_change() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    for st in ENCODINGS {
        let (text, version) = broker_config(&mut c, st);
        let props = ringmq::config::parse_properties(&text).unwrap();
        let get = |k: &str| props.iter().find(|p| p.key == k).map(|p| p.value.clone());
        assert_eq!(get("brokerName").as_deref(), Some("broker-a"));
        assert_eq!(get("brokerPermission").as_deref(), Some("6"));
        assert_eq!(get("flushDiskType").as_deref(), Some("ASYNC_FLUSH"));
        assert_eq!(get("listenPort"), Some(broker.port.to_string()));
        assert!(version["counter"].is_i64());
    }
    let (_, before) = broker_config(&mut c, SerializeType::Json);
    // A key ringmq reads at start only is refused by name, and nothing changes.
    let r = invoke(
        &mut c,
        RemotingCommand::request(req::UPDATE_BROKER_CONFIG).with_body(Bytes::from_static(
            b"brokerPermission=4\nfileReservedTime=1\n",
        )),
    );
    assert_eq!(r.code, rc::NO_PERMISSION);
    assert!(r.remark.unwrap().contains("fileReservedTime"));
    let r = invoke(
        &mut c,
        RemotingCommand::request(req::UPDATE_BROKER_CONFIG)
            .with_body(Bytes::from_static(b"brokerPermission=99")),
    );
    assert_eq!(r.code, rc::INVALID_PARAMETER);
    let (text, _) = broker_config(&mut c, SerializeType::Json);
    assert!(text.contains("brokerPermission=6\n"));
    // brokerPermission changes live: read-only refuses sends.
    for st in ENCODINGS {
        let r = call(
            &mut c,
            st,
            RemotingCommand::request(req::UPDATE_BROKER_CONFIG)
                .with_body(Bytes::from_static(b"brokerPermission=4")),
        );
        assert_eq!(r.code, rc::SUCCESS, "{r:?}");
    }
    let (text, after) = broker_config(&mut c, SerializeType::Json);
    assert!(text.contains("brokerPermission=4\n"));
    assert_eq!(
        after["counter"].as_i64(),
        before["counter"].as_i64().map(|n| n + 2)
    );
    let r = invoke(
        &mut c,
        common::send_v2(
            "RoTopic",
            0,
            Bytes::from_static(b"x"),
            &[],
            0,
            SerializeType::Json,
        ),
    );
    assert_eq!(r.code, rc::NO_PERMISSION, "{r:?}");
}

fn kv(code: i32, namespace: &str, key: Option<&str>, value: Option<&str>) -> RemotingCommand {
    let mut cmd = RemotingCommand::request(code).with_ext("namespace", namespace);
    if let Some(key) = key {
        cmd.set_ext("key", key);
    }
    if let Some(value) = value {
        cmd.set_ext("value", value);
    }
    cmd
}

const ORDER_NS: &str = "ORDER_TOPIC_CONFIG";

/// Waits until the name server routes `topic` (the broker registers new topics a moment after
/// the send that created them).
fn wait_routed(ns: &mut BlockingClient, topic: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while invoke(
        ns,
        RemotingCommand::request(req::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", topic),
    )
    .code
        != rc::SUCCESS
    {
        assert!(std::time::Instant::now() < deadline, "{topic} never routed");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn name_server_kv_config_is_java_shaped_and_persisted() {
    let mut broker = Broker::start(&[]);
    let mut ns = broker.namesrv_client();
    for st in ENCODINGS {
        let put = kv(
            req::PUT_KV_CONFIG,
            ORDER_NS,
            Some("OrderTopic"),
            Some("broker-a:4"),
        );
        assert_eq!(call(&mut ns, st, put).code, rc::SUCCESS);
        let r = call(
            &mut ns,
            st,
            kv(req::GET_KV_CONFIG, ORDER_NS, Some("OrderTopic"), None),
        );
        assert_eq!(
            (r.code, r.ext_opt_str("value")),
            (rc::SUCCESS, Some("broker-a:4"))
        );
        let r = call(
            &mut ns,
            st,
            kv(req::GET_KVLIST_BY_NAMESPACE, ORDER_NS, None, None),
        );
        let t: KvTable = parse_lenient(&r.body, "KVTable").unwrap();
        assert_eq!(t.table["OrderTopic"], "broker-a:4");
        let r = call(
            &mut ns,
            st,
            kv(req::GET_KV_CONFIG, ORDER_NS, Some("nope"), None),
        );
        assert_eq!(
            (r.code, r.remark.as_deref()),
            (
                rc::QUERY_NOT_FOUND,
                Some("No config item, Namespace: ORDER_TOPIC_CONFIG Key: nope")
            )
        );
        let r = call(
            &mut ns,
            st,
            kv(req::GET_KVLIST_BY_NAMESPACE, "none", None, None),
        );
        assert_eq!(
            (r.code, r.remark.as_deref()),
            (rc::QUERY_NOT_FOUND, Some("No config item, Namespace: none"))
        );
    }
    // Persisted beside the broker's store (embedded name server), and kept across a restart.
    let kv_file = broker.store_dir().join("namesrv").join("kvConfig.json");
    let text = std::fs::read_to_string(&kv_file).unwrap();
    assert_eq!(
        text,
        r#"{"configTable":{"ORDER_TOPIC_CONFIG":{"OrderTopic":"broker-a:4"}}}"#
    );
    broker.stop();
    broker.restart();
    let mut ns = broker.namesrv_client();
    let r = invoke(
        &mut ns,
        kv(req::GET_KV_CONFIG, ORDER_NS, Some("OrderTopic"), None),
    );
    assert_eq!(r.ext_opt_str("value"), Some("broker-a:4"));
    let r = invoke(
        &mut ns,
        kv(req::DELETE_KV_CONFIG, ORDER_NS, Some("OrderTopic"), None),
    );
    assert_eq!(r.code, rc::SUCCESS);
    let r = invoke(
        &mut ns,
        kv(req::GET_KV_CONFIG, ORDER_NS, Some("OrderTopic"), None),
    );
    assert_eq!(r.code, rc::QUERY_NOT_FOUND);
    // A missing header field names it.
    let r = invoke(&mut ns, RemotingCommand::request(req::PUT_KV_CONFIG));
    assert_eq!(r.code, rc::SYSTEM_ERROR);
    assert!(r.remark.unwrap().contains("namespace"));
}

#[test]
fn name_server_topic_list_cluster_info_and_topic_delete() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    send(&mut c, "NsTopic", 0, 1);
    send(&mut c, "NsTopic2", 0, 1);
    let mut ns = broker.namesrv_client();
    wait_routed(&mut ns, "NsTopic");
    wait_routed(&mut ns, "NsTopic2");
    for st in ENCODINGS {
        let r = call(
            &mut ns,
            st,
            RemotingCommand::request(req::GET_ALL_TOPIC_LIST_FROM_NAMESERVER),
        );
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert!(
            v["topicList"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t == "NsTopic"),
            "{v}"
        );
        let r = call(
            &mut ns,
            st,
            RemotingCommand::request(req::GET_BROKER_CLUSTER_INFO),
        );
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["clusterAddrTable"]["DefaultCluster"][0], "broker-a");
        assert_eq!(
            v["brokerAddrTable"]["broker-a"]["brokerAddrs"]["0"],
            broker.addr()
        );
    }
    // DELETE_TOPIC_IN_NAMESRV drops the route, for all clusters or for one.
    for (st, topic, cluster) in [
        (SerializeType::Json, "NsTopic", None),
        (SerializeType::RocketMq, "NsTopic2", Some("DefaultCluster")),
    ] {
        let mut cmd =
            RemotingCommand::request(req::DELETE_TOPIC_IN_NAMESRV).with_ext("topic", topic);
        if let Some(cluster) = cluster {
            cmd.set_ext("clusterName", cluster);
        }
        assert_eq!(call(&mut ns, st, cmd).code, rc::SUCCESS);
        let r = invoke(
            &mut ns,
            RemotingCommand::request(req::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", topic),
        );
        assert_eq!(r.code, rc::TOPIC_NOT_EXIST, "{topic}");
    }
}
