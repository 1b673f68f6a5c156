//! `ringmq admin` end to end: a real broker (with its embedded name server) and the `ringmq`
//! binary run as an operator runs it, checking what it prints and its exit codes.

mod common;

use std::process::{Command, Output};

use bytes::Bytes;
use common::{invoke, Broker};
use ringmq::net::remoting_client::BlockingClient;
use ringmq::remoting::codes::{request_code as req, response_code as rc};
use ringmq::remoting::command::{RemotingCommand, SerializeType};

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn admin(broker: &Broker, args: &[&str]) -> Run {
    let ns = broker.namesrv_addr();
    let mut all = vec!["admin", "-n", ns.as_str()];
    all.extend_from_slice(args);
    let Output {
        status,
        stdout,
        stderr,
    } = Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .args(&all)
        .env_remove("NAMESRV_ADDR")
        .output()
        .expect("run ringmq admin");
    Run {
        code: status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    }
}

/// Runs a verb that must succeed and returns what it printed.
fn ok(broker: &Broker, args: &[&str]) -> String {
    let r = admin(broker, args);
    assert_eq!(r.code, 0, "{args:?} failed: {}{}", r.stdout, r.stderr);
    r.stdout
}

fn ok_json(broker: &Broker, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = ok(broker, &all);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

/// Sends `n` messages with key `k<i>` to queue 0; returns their offset msgIds.
fn send(c: &mut BlockingClient, topic: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let key = format!("k{i}");
            let body = Bytes::from(format!("body-{i}"));
            let props = [("KEYS", key.as_str()), ("TAGS", "TagA")];
            let r = invoke(
                c,
                common::send_v2(topic, 0, body, &props, 0, SerializeType::Json),
            );
            assert_eq!(r.code, rc::SUCCESS, "{r:?}");
            r.ext_opt_str("msgId").unwrap().to_string()
        })
        .collect()
}

fn heartbeat(c: &mut BlockingClient, group: &str, topic: &str, producer_group: &str) {
    let body = serde_json::json!({
        "clientID": "127.0.0.1@cli",
        "consumerDataSet": [{
            "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "consumeType": "CONSUME_PASSIVELY",
            "groupName": group, "messageModel": "CLUSTERING", "unitMode": false,
            "subscriptionDataSet": [{"classFilterMode": false, "codeSet": [], "expressionType": "TAG",
                "subString": "TagA", "subVersion": 1, "tagsSet": ["TagA"], "topic": topic}]
        }],
        "producerDataSet": [{"groupName": producer_group}]
    });
    let r = invoke(
        c,
        RemotingCommand::request(req::HEART_BEAT).with_body(Bytes::from(body.to_string())),
    );
    assert_eq!(r.code, rc::SUCCESS, "{r:?}");
}

#[test]
fn topics_are_created_listed_routed_inspected_and_deleted() {
    let broker = Broker::start(&[]);
    let out = ok(
        &broker,
        &[
            "updateTopic",
            "-c",
            "DefaultCluster",
            "-t",
            "CliTopic",
            "-r",
            "2",
            "-w",
            "2",
        ],
    );
    assert!(
        out.contains(&format!("create topic to {} success.", broker.addr())),
        "{out}"
    );
    assert!(ok(&broker, &["topicList"]).lines().any(|l| l == "CliTopic"));
    let route = ok_json(&broker, &["topicRoute", "-t", "CliTopic"]);
    assert_eq!(route["queueDatas"][0]["writeQueueNums"], 2);
    assert_eq!(route["brokerDatas"][0]["brokerAddrs"]["0"], broker.addr());

    let mut c = broker.client();
    send(&mut c, "CliTopic", 3);
    let status = ok(&broker, &["topicStatus", "-t", "CliTopic"]);
    let header = status.lines().next().unwrap();
    assert!(header.starts_with("#Broker Name  #QID  #Min Offset  #Max Offset  #Last Updated"));
    let row: Vec<&str> = status.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(&row[..4], ["broker-a", "0", "0", "3"], "{status}");
    assert!(status.contains("Topic Put TPS: 0.0"), "{status}");
    let json = ok_json(&broker, &["topicStatus", "-t", "CliTopic"]);
    assert_eq!(json["queues"][0]["maxOffset"], 3);

    let out = ok(
        &broker,
        &["deleteTopic", "-t", "CliTopic", "-c", "DefaultCluster"],
    );
    assert!(out.contains("delete topic [CliTopic] from cluster [DefaultCluster] success."));
    assert!(out.contains("delete topic [CliTopic] from NameServer success."));
    let r = admin(&broker, &["topicRoute", "-t", "CliTopic"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .contains("TOPIC_NOT_EXIST (17): No topic route info"),
        "{}",
        r.stderr
    );
    let r = admin(&broker, &["topicStatus", "-t", "NoSuchTopic"]);
    assert_eq!(r.code, 1, "{}", r.stdout);
}

fn group_config(c: &mut BlockingClient, group: &str) -> serde_json::Value {
    let r = invoke(
        c,
        RemotingCommand::request(req::GET_ALL_SUBSCRIPTIONGROUP_CONFIG),
    );
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    v["subscriptionGroupTable"][group].clone()
}

#[test]
fn groups_progress_and_connections() {
    let broker = Broker::start(&[]);
    let addr = broker.addr();
    let mut c = broker.client();
    send(&mut c, "GroupTopic", 3);
    let args = [
        "updateSubGroup",
        "-b",
        &addr,
        "-g",
        "cliGroup",
        "-i",
        "1",
        "-w",
        "1",
        "-r",
        "3",
        "-s",
        "false",
    ];
    assert!(ok(&broker, &args).contains(&format!("create subscription group to {addr} success.")));
    let g = group_config(&mut c, "cliGroup");
    assert_eq!(
        (g["brokerId"].as_i64(), g["retryMaxTimes"].as_i64()),
        (Some(1), Some(3))
    );
    assert_eq!(g["consumeEnable"], false);
    let r = invoke(
        &mut c,
        RemotingCommand::request(req::UPDATE_CONSUMER_OFFSET)
            .with_ext("consumerGroup", "cliGroup")
            .with_ext("topic", "GroupTopic")
            .with_ext("queueId", 0)
            .with_ext("commitOffset", 1),
    );
    assert_eq!(r.code, rc::SUCCESS, "{r:?}");

    let progress = ok(&broker, &["consumerProgress", "-g", "cliGroup"]);
    let row = progress
        .lines()
        .find(|l| l.starts_with("GroupTopic") && l.split_whitespace().nth(2) == Some("0"))
        .unwrap_or_else(|| panic!("{progress}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        &cells[..6],
        ["GroupTopic", "broker-a", "0", "3", "1", "2"],
        "{progress}"
    );
    assert!(progress.contains("Consume Diff Total: 2"), "{progress}");
    let json = ok_json(
        &broker,
        &["consumerProgress", "-g", "cliGroup", "-t", "GroupTopic"],
    );
    assert_eq!(json["diffTotal"], 2);

    let out = ok(
        &broker,
        &[
            "deleteSubGroup",
            "-b",
            &addr,
            "-g",
            "cliGroup",
            "-r",
            "true",
        ],
    );
    assert!(
        out.contains("delete subscription group [cliGroup]"),
        "{out}"
    );
    assert!(group_config(&mut c, "cliGroup").is_null());
}

#[test]
fn connections_of_online_clients() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    send(&mut c, "GroupTopic", 1);
    let group = r#"{"groupName":"cliGroup"}"#;
    let r = invoke(
        &mut c,
        RemotingCommand::request(req::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
            .with_body(Bytes::from_static(group.as_bytes())),
    );
    assert_eq!(r.code, rc::SUCCESS, "{r:?}");
    // Nobody online yet: the broker's refusal, exit 1.
    let r = admin(&broker, &["consumerConnection", "-g", "cliGroup"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("the consumer group[cliGroup] not online"),
        "{}",
        r.stderr
    );
    heartbeat(&mut c, "cliGroup", "GroupTopic", "cliProducer");
    let out = ok(&broker, &["consumerConnection", "-g", "cliGroup"]);
    assert!(
        out.contains("127.0.0.1@cli") && out.contains("JAVA"),
        "{out}"
    );
    assert!(
        out.contains("Below is subscription:") && out.contains("TagA"),
        "{out}"
    );
    assert!(out.contains("MessageModel: CLUSTERING"), "{out}");
    let out = ok(
        &broker,
        &[
            "producerConnection",
            "-g",
            "cliProducer",
            "-t",
            "GroupTopic",
        ],
    );
    assert!(out.contains("127.0.0.1@cli"), "{out}");
}

#[test]
fn cluster_broker_status_and_broker_config() {
    let broker = Broker::start(&[]);
    let addr = broker.addr();
    let list = ok(&broker, &["clusterList"]);
    assert!(list.starts_with("#Cluster Name"), "{list}");
    let row = list.lines().nth(1).unwrap();
    assert!(
        row.starts_with("DefaultCluster") && row.contains(&addr),
        "{list}"
    );
    assert!(row.trim_end().ends_with("true"), "ACTIVATED: {list}");

    let status = ok(&broker, &["brokerStatus", "-b", &addr]);
    assert!(status
        .lines()
        .any(|l| l.starts_with("brokerVersionDesc") && l.contains(": ")));
    let status = ok_json(&broker, &["brokerStatus", "-c", "DefaultCluster"]);
    assert_eq!(status[&addr]["brokerActive"], "true");

    let config = ok(&broker, &["getBrokerConfig", "-b", &addr]);
    assert!(
        config.starts_with(&format!("============{addr}============")),
        "{config}"
    );
    assert!(config
        .lines()
        .any(|l| l.starts_with("brokerName") && l.ends_with("=  broker-a")));

    let r = admin(
        &broker,
        &[
            "updateBrokerConfig",
            "-b",
            &addr,
            "-k",
            "fileReservedTime",
            "-v",
            "1",
        ],
    );
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("NO_PERMISSION (16)") && r.stderr.contains("fileReservedTime"));
    ok(
        &broker,
        &[
            "updateBrokerConfig",
            "-c",
            "DefaultCluster",
            "-k",
            "brokerPermission",
            "-v",
            "4",
        ],
    );
    let config = ok_json(&broker, &["getBrokerConfig", "-c", "DefaultCluster"]);
    assert_eq!(config[&addr]["brokerPermission"], "4");
}

#[test]
fn messages_are_printed_viewed_and_searched() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    let ids = send(&mut c, "MsgTopic", 3);
    let printed = ok(&broker, &["printMsg", "-t", "MsgTopic"]);
    assert_eq!(
        printed.lines().filter(|l| l.starts_with("MSGID: ")).count(),
        3,
        "{printed}"
    );
    assert!(
        printed.contains("BODY: body-2") && printed.contains("keys=k1"),
        "{printed}"
    );
    let json = ok_json(&broker, &["printMsg", "-t", "MsgTopic", "-s", "TagB"]);
    assert_eq!(
        json["messages"].as_array().unwrap().len(),
        0,
        "tag filter: {json}"
    );

    let viewed = ok(&broker, &["queryMsgById", "-i", &ids[1]]);
    assert!(viewed.contains("Topic:               MsgTopic"), "{viewed}");
    assert!(viewed.contains("Message Body:        body-1"), "{viewed}");
    assert!(viewed.contains("Keys:                [k1]"), "{viewed}");

    // QUERY_MESSAGE: served by brokers with a message index; otherwise the broker's remark.
    let r = admin(&broker, &["queryMsgByKey", "-t", "MsgTopic", "-k", "k2"]);
    if r.code == 0 {
        let rows: Vec<Vec<&str>> = r
            .stdout
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(rows.len(), 1, "{}", r.stdout);
        assert_eq!(&rows[0][1..], ["0", "2"], "{}", r.stdout);
    } else {
        assert_eq!(r.code, 1);
        assert!(
            r.stderr.contains(&format!("{} answered", broker.addr())),
            "{}",
            r.stderr
        );
    }
    // INVOKE_BROKER_TO_RESET_OFFSET likewise.
    let r = admin(
        &broker,
        &[
            "resetOffsetByTime",
            "-g",
            "g",
            "-t",
            "MsgTopic",
            "-s",
            "now",
        ],
    );
    if r.code == 0 {
        assert!(r.stdout.contains("#brokerName"), "{}", r.stdout);
    } else {
        assert_eq!(r.code, 1);
        assert!(r.stderr.contains("answered"), "{}", r.stderr);
    }
}

#[test]
fn usage_errors_exit_non_zero_with_a_reason() {
    let out = Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .args(["admin", "topicList"])
        .env_remove("NAMESRV_ADDR")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no name server address"));
    let out = Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .args(["admin", "-n", "127.0.0.1:1", "noSuchVerb"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "clap refuses an unknown verb");
    let out = Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .args(["admin", "-n", "127.0.0.1:1", "topicList"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("127.0.0.1:1"));
    let help = Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .args(["admin", "updateSubGroup", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("--whichBrokerWhenConsumeSlowly") && help.contains("-w"),
        "{help}"
    );
}

/// A stand-in for a broker whose INVOKE_BROKER_TO_RESET_OFFSET says the group is offline: it
/// relays every request to the real name server or broker, answers 222 with
/// CONSUMER_NOT_ONLINE, and rewrites routes so the admin tool comes back to it.
fn offline_reset_proxy(namesrv: String, broker: String) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let me = listener.local_addr().unwrap().to_string();
    let proxy_addr = me.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let (namesrv, broker, me) = (namesrv.clone(), broker.clone(), me.clone());
            std::thread::spawn(move || {
                let mut buf = bytes::BytesMut::new();
                let mut chunk = [0u8; 65536];
                loop {
                    let request = loop {
                        match ringmq::remoting::decode_frame(&mut buf, 1 << 24) {
                            Ok(Some(cmd)) => break cmd,
                            Ok(None) => {}
                            Err(_) => return,
                        }
                        match stream.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    };
                    let mut response = if request.code == req::INVOKE_BROKER_TO_RESET_OFFSET {
                        RemotingCommand::response_to(
                            &request,
                            rc::CONSUMER_NOT_ONLINE,
                            Some("the consumer group not online".into()),
                        )
                    } else {
                        let to_namesrv =
                            [req::GET_ROUTEINFO_BY_TOPIC, req::GET_BROKER_CLUSTER_INFO]
                                .contains(&request.code);
                        let upstream = if to_namesrv { &namesrv } else { &broker };
                        let mut c =
                            BlockingClient::connect(upstream, std::time::Duration::from_secs(5))
                                .unwrap();
                        let mut r = c.invoke(request.clone()).unwrap();
                        if to_namesrv {
                            let text = String::from_utf8_lossy(&r.body).replace(&broker, &me);
                            r.body = Bytes::from(text);
                        }
                        r
                    };
                    response.opaque = request.opaque;
                    let mut out = bytes::BytesMut::new();
                    ringmq::remoting::encode_frame(&response, &mut out).unwrap();
                    if stream.write_all(&out).is_err() {
                        return;
                    }
                }
            });
        }
    });
    proxy_addr
}

#[test]
fn reset_offset_by_time_rolls_back_the_old_way_when_the_group_is_offline() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    send(&mut c, "ResetTopic", 4);
    let group = r#"{"groupName":"resetGroup"}"#;
    invoke(
        &mut c,
        RemotingCommand::request(req::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
            .with_body(Bytes::from_static(group.as_bytes())),
    );
    let commit = RemotingCommand::request(req::UPDATE_CONSUMER_OFFSET)
        .with_ext("consumerGroup", "resetGroup")
        .with_ext("topic", "ResetTopic")
        .with_ext("queueId", 0)
        .with_ext("commitOffset", 4);
    assert_eq!(invoke(&mut c, commit).code, rc::SUCCESS);
    let proxy = offline_reset_proxy(broker.namesrv_addr(), broker.addr());
    let out = Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .args([
            "admin",
            "-n",
            &proxy,
            "resetOffsetByTime",
            "-g",
            "resetGroup",
            "-t",
            "ResetTopic",
        ])
        .args(["-s", "0"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("#brokerName"), "{stdout}");
    let q = invoke(
        &mut c,
        RemotingCommand::request(req::QUERY_CONSUMER_OFFSET)
            .with_ext("consumerGroup", "resetGroup")
            .with_ext("topic", "ResetTopic")
            .with_ext("queueId", 0),
    );
    assert_eq!(
        q.ext_i64("offset").unwrap(),
        0,
        "rolled back to the start: {stdout}"
    );
}
