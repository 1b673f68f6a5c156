//! ACL 1.0 (`RINGMQ_ACL_ENABLED`) over the wire, with raw remoting frames signed as Java's
//! `AclClientRPCHook` signs them: the right key, a wrong key, no key, a missing permission, an
//! admin code from a non-admin, an account's white-listed address, a reload of the file; and
//! the name server refusing a registration that would replace a live broker.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{invoke, pull_head, Broker};
use ringmq::acl::signature::sign_request;
use ringmq::net::remoting_client::BlockingClient;
use ringmq::remoting::body::register_broker::build_register_broker_request;
use ringmq::remoting::body::{DataVersion, TopicConfig};
use ringmq::remoting::codes::{request_code as req, response_code as rc};
use ringmq::remoting::command::{RemotingCommand, SerializeType};
use ringmq::remoting::headers::CreateTopicRequestHeader;

const TOPIC: &str = "AclTopic";

const PLAIN_ACL: &str = "\
accounts:
  - accessKey: producerAK
    secretKey: producerSK123
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - AclTopic=PUB
  - accessKey: consumerAK
    secretKey: consumerSK123
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - AclTopic=SUB
    groupPerms:
      - cg=SUB
  - accessKey: adminAK123
    secretKey: adminSK123
    admin: true
  - accessKey: whiteAK123
    secretKey: whiteSK123
    whiteRemoteAddress: 127.0.0.1
    defaultTopicPerm: DENY
";

fn write_acl(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("plain_acl.yml");
    std::fs::write(&path, text).unwrap();
    path
}

fn acl_broker(acl_file: &Path) -> Broker {
    Broker::start(&[
        ("RINGMQ_ACL_ENABLED", "true"),
        ("RINGMQ_ACL_FILE_PATH", acl_file.to_str().unwrap()),
    ])
}

fn send(topic: &str) -> RemotingCommand {
    common::send_v2(
        topic,
        0,
        Bytes::from_static(b"hello acl"),
        &[],
        0,
        SerializeType::Json,
    )
}

fn signed(mut request: RemotingCommand, access_key: &str, secret_key: &str) -> RemotingCommand {
    sign_request(&mut request, access_key, secret_key, None);
    request
}

fn expect_refused(client: &mut BlockingClient, request: RemotingCommand, remark: &str) {
    let response = invoke(client, request);
    assert_eq!(response.code, rc::NO_PERMISSION, "{response:?}");
    assert_eq!(response.remark.as_deref(), Some(remark));
}

fn create_topic(topic: &str) -> RemotingCommand {
    let mut cmd = RemotingCommand::request(req::UPDATE_AND_CREATE_TOPIC);
    CreateTopicRequestHeader {
        topic: topic.into(),
        default_topic: "TBW102".into(),
        read_queue_nums: 4,
        write_queue_nums: 4,
        perm: 6,
        topic_filter_type: "SINGLE_TAG".into(),
        topic_sys_flag: Some(0),
        order: false,
        attributes: None,
        force: false,
    }
    .encode(&mut cmd);
    cmd
}

#[test]
fn keys_signatures_and_permissions_are_checked_as_java_does() {
    let tmp = tempfile::tempdir().unwrap();
    let broker = acl_broker(&write_acl(tmp.path(), PLAIN_ACL));
    let mut c = broker.client();

    let ok = invoke(&mut c, signed(send(TOPIC), "producerAK", "producerSK123"));
    assert_eq!(ok.code, rc::SUCCESS, "right key: {ok:?}");

    expect_refused(
        &mut c,
        signed(send(TOPIC), "producerAK", "not-the-secret"),
        "Check signature failed for accessKey=producerAK",
    );
    expect_refused(&mut c, send(TOPIC), "No accessKey is configured");
    expect_refused(
        &mut c,
        signed(send(TOPIC), "strangerAK", "whatever1"),
        "No acl config for strangerAK",
    );
    // A signed request changed on the way no longer verifies.
    let mut tampered = signed(send(TOPIC), "producerAK", "producerSK123");
    tampered.body = Bytes::from_static(b"forged");
    expect_refused(
        &mut c,
        tampered,
        "Check signature failed for accessKey=producerAK",
    );

    // Permissions: the producer may not pull, nor send elsewhere; the consumer may pull.
    expect_refused(
        &mut c,
        signed(pull_head(TOPIC), "producerAK", "producerSK123"),
        "No permission for topic:AclTopic",
    );
    expect_refused(
        &mut c,
        signed(send("OtherTopic"), "producerAK", "producerSK123"),
        "No default permission for topic:OtherTopic",
    );
    let pulled = invoke(
        &mut c,
        signed(pull_head(TOPIC), "consumerAK", "consumerSK123"),
    );
    assert_eq!(pulled.code, rc::SUCCESS, "consumer pull: {pulled:?}");
    expect_refused(
        &mut c,
        signed(send(TOPIC), "consumerAK", "consumerSK123"),
        "No permission for topic:AclTopic",
    );

    // Admin codes.
    expect_refused(
        &mut c,
        signed(create_topic("AdminMade"), "producerAK", "producerSK123"),
        "Need admin permission for request code=17, but accessKey=producerAK is not",
    );
    expect_refused(
        &mut c,
        create_topic("AdminMade"),
        "No accessKey is configured",
    );
    let created = invoke(
        &mut c,
        signed(create_topic("AdminMade"), "adminAK123", "adminSK123"),
    );
    assert_eq!(created.code, rc::SUCCESS, "{created:?}");

    // An account's white-listed address needs no signature, and then no permission either.
    let white = send("AnyTopic").with_ext("AccessKey", "whiteAK123");
    assert_eq!(invoke(&mut c, white).code, rc::SUCCESS);
}

fn commit_offset(offset: i64) -> RemotingCommand {
    RemotingCommand::request(req::UPDATE_CONSUMER_OFFSET)
        .with_ext("consumerGroup", "cg")
        .with_ext("topic", TOPIC)
        .with_ext("queueId", 0)
        .with_ext("commitOffset", offset)
}

#[test]
fn a_refused_oneway_request_changes_nothing_and_gets_no_answer() {
    let tmp = tempfile::tempdir().unwrap();
    let broker = acl_broker(&write_acl(tmp.path(), PLAIN_ACL));
    let mut c = broker.client();
    let sent = invoke(&mut c, signed(send(TOPIC), "producerAK", "producerSK123"));
    assert_eq!(sent.code, rc::SUCCESS, "{sent:?}");
    // A pull creates the subscription group.
    let pulled = invoke(
        &mut c,
        signed(pull_head(TOPIC), "consumerAK", "consumerSK123"),
    );
    assert_eq!(pulled.code, rc::SUCCESS, "{pulled:?}");
    let ok = invoke(
        &mut c,
        signed(commit_offset(1), "consumerAK", "consumerSK123"),
    );
    assert_eq!(ok.code, rc::SUCCESS, "{ok:?}");
    // Oneway, signed with the wrong secret: refused (logged at warn) without an answer.
    let forged = signed(commit_offset(0), "consumerAK", "wrong-secret")
        .oneway()
        .with_opaque(77_001);
    c.send(&forged).unwrap();
    assert!(
        wait_until(|| broker.log().contains("oneway request refused")),
        "{}",
        broker.log()
    );
    let query = RemotingCommand::request(req::QUERY_CONSUMER_OFFSET)
        .with_ext("consumerGroup", "cg")
        .with_ext("topic", TOPIC)
        .with_ext("queueId", 0);
    let offset = |c: &mut BlockingClient| {
        let answer = invoke(c, signed(query.clone(), "consumerAK", "consumerSK123"));
        assert_ne!(answer.opaque, 77_001, "the oneway request was answered");
        assert_eq!(answer.code, rc::SUCCESS, "{answer:?}");
        answer.ext_i64("offset").unwrap()
    };
    assert_eq!(offset(&mut c), 1, "the forged commit changed the offset");
    // The same oneway commit, signed right, does change it.
    let genuine = signed(commit_offset(0), "consumerAK", "consumerSK123").oneway();
    c.send(&genuine).unwrap();
    assert!(wait_until(|| offset(&mut c) == 0));
}

/// Polls `condition` every 20 ms for up to 10 s.
fn wait_until(mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn binary_headers_are_signed_over_the_same_fields() {
    let tmp = tempfile::tempdir().unwrap();
    let broker = acl_broker(&write_acl(tmp.path(), PLAIN_ACL));
    let mut c = broker.client();
    let binary = send(TOPIC).with_serialize_type(SerializeType::RocketMq);
    let ok = invoke(
        &mut c,
        signed(binary.clone(), "producerAK", "producerSK123"),
    );
    assert_eq!(ok.code, rc::SUCCESS, "{ok:?}");
    expect_refused(
        &mut c,
        signed(binary, "producerAK", "wrong-secret"),
        "Check signature failed for accessKey=producerAK",
    );
}

#[test]
fn a_changed_file_is_reloaded() {
    let tmp = tempfile::tempdir().unwrap();
    let path = write_acl(tmp.path(), PLAIN_ACL);
    let broker = acl_broker(&path);
    let mut c = broker.client();
    let request = || signed(send(TOPIC), "producerAK", "producerSK123");
    assert_eq!(invoke(&mut c, request()).code, rc::SUCCESS);
    write_acl(
        tmp.path(),
        &PLAIN_ACL.replace("AclTopic=PUB", "AclTopic=DENY"),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let response = invoke(&mut c, request());
        if response.code == rc::NO_PERMISSION {
            assert_eq!(
                response.remark.as_deref(),
                Some("No permission for topic:AclTopic")
            );
            break;
        }
        assert!(Instant::now() < deadline, "the new rules never applied");
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn a_broker_with_acl_and_no_file_refuses_to_start() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("absent.yml");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .arg("broker")
        .env("RINGMQ_STORE_ROOT_DIR", tmp.path().join("store"))
        .env(
            "RINGMQ_BROKER_LISTEN_PORT",
            common::free_broker_port().to_string(),
        )
        .env(
            "RINGMQ_NAMESRV_LISTEN_PORT",
            common::free_port().to_string(),
        )
        .env("RINGMQ_METRICS_LISTEN", "")
        .env("RINGMQ_ACL_ENABLED", "true")
        .env("RINGMQ_ACL_FILE_PATH", &missing)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("absent.yml") && stderr.contains("RINGMQ_ACL_FILE_PATH"),
        "{stderr}"
    );
}

fn register(addr: &str) -> RemotingCommand {
    let topics = [
        TopicConfig::new(TOPIC, 4, 4, 6),
        TopicConfig::new("TBW102", 8, 8, 7),
    ];
    let dv = DataVersion {
        counter: 99,
        state_version: 0,
        timestamp: 1,
    };
    build_register_broker_request("DefaultCluster", "broker-a", addr, 0, addr, &topics, &dv)
}

/// A connection to the broker's name server from 127.0.0.2, another host than the broker's.
fn other_host_namesrv_client(broker: &Broker) -> BlockingClient {
    BlockingClient::connect_from(
        &broker.namesrv_addr(),
        std::net::Ipv4Addr::new(127, 0, 0, 2),
        Duration::from_secs(5),
    )
    .expect("connect from 127.0.0.2")
}

fn route_of(ns: &mut BlockingClient, topic: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let route = invoke(
            ns,
            RemotingCommand::request(req::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", topic),
        );
        if route.code == rc::SUCCESS {
            return String::from_utf8_lossy(&route.body).into_owned();
        }
        assert!(Instant::now() < deadline, "{topic} never routed: {route:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_name_server_refuses_to_replace_a_live_broker_from_another_connection() {
    let broker = Broker::start(&[]);
    // Another host than the broker's 127.0.0.1 (the same host on a new port is the broker
    // reconnected, which may take its entry over).
    let mut ns = other_host_namesrv_client(&broker);
    let before = route_of(&mut ns, "TBW102");
    assert!(before.contains(&broker.addr()), "{before}");

    let foreign = "127.0.0.1:1";
    let refused = invoke(&mut ns, register(foreign));
    assert_eq!(refused.code, rc::NO_PERMISSION, "{refused:?}");
    let remark = refused.remark.unwrap_or_default();
    assert!(
        remark.contains("broker broker-a[0] of cluster DefaultCluster is alive at")
            && remark.contains("registering 127.0.0.1:1 is refused"),
        "{remark}"
    );
    let unregister = RemotingCommand::request(req::UNREGISTER_BROKER)
        .with_ext("brokerName", "broker-a")
        .with_ext("brokerAddr", broker.addr())
        .with_ext("clusterName", "DefaultCluster")
        .with_ext("brokerId", 0);
    assert_eq!(invoke(&mut ns, unregister).code, rc::NO_PERMISSION);

    let after = route_of(&mut ns, "TBW102");
    assert!(
        after.contains(&broker.addr()) && !after.contains(foreign),
        "{after}"
    );
}

#[test]
fn an_acl_admin_may_replace_a_live_broker() {
    let tmp = tempfile::tempdir().unwrap();
    let broker = acl_broker(&write_acl(tmp.path(), PLAIN_ACL));
    let mut ns = other_host_namesrv_client(&broker);
    route_of(&mut ns, "TBW102");
    let foreign = "127.0.0.1:1";
    let not_admin = invoke(
        &mut ns,
        signed(register(foreign), "producerAK", "producerSK123"),
    );
    assert_eq!(not_admin.code, rc::NO_PERMISSION, "{not_admin:?}");
    let admin = invoke(
        &mut ns,
        signed(register(foreign), "adminAK123", "adminSK123"),
    );
    assert_eq!(admin.code, rc::SUCCESS, "{admin:?}");
    assert!(route_of(&mut ns, TOPIC).contains(foreign));
}
