//! HEART_BEAT bodies as the C++ client cores write them (rocketmq-client-cpp 1.x and 2.x, under
//! the Go, Python and Node bindings), sent to the real `ringmq` process: enums as ordinals,
//! numbers as strings. The broker must read them as Java's fastjson does, register the group
//! and serve pulls on the heartbeat's subscription.

mod common;

use bytes::Bytes;
use common::{invoke, Broker};
use ringmq::net::remoting_client::BlockingClient;
use ringmq::remoting::codes::{request_code as req, response_code as rc};
use ringmq::remoting::command::{LanguageCode, RemotingCommand, SerializeType};

/// The subVersion both heartbeats carry; the pulls send it back in their header.
const SUB_VERSION: i64 = 1_700_000_000_000;

/// A 2.x core: enums as ordinals (CONSUME_FROM_LAST_OFFSET, CONSUME_PASSIVELY, CLUSTERING),
/// keys sorted (jsoncpp), numbers as numbers, plus a member Java does not know.
fn cpp_numeric_enums(client_id: &str, group: &str, topic: &str) -> String {
    format!(
        r#"{{"clientID":"{client_id}","consumerDataSet":[{{"consumeFromWhere":0,"consumeType":1,"groupName":"{group}","messageModel":1,"subscriptionDataSet":[{{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":{SUB_VERSION},"tagsSet":[],"topic":"{topic}"}}],"unitMode":false}}],"producerDataSet":[{{"groupName":"CLIENT_INNER_PRODUCER"}}],"someFutureField":[1,2]}}"#
    )
}

/// A 1.x core: subVersion as a string, classFilterMode as 0, no expressionType, and the
/// trailing newline jsoncpp's writer adds.
fn cpp_strings_for_numbers(client_id: &str, group: &str, topic: &str) -> String {
    format!(
        "{{\"clientID\":\"{client_id}\",\"consumerDataSet\":[{{\"consumeFromWhere\":\"4\",\"consumeType\":\"1\",\"groupName\":\"{group}\",\"messageModel\":1,\"subscriptionDataSet\":[{{\"classFilterMode\":0,\"codeSet\":[\"97\"],\"subString\":\"a\",\"subVersion\":\"{SUB_VERSION}\",\"tagsSet\":[\"a\"],\"topic\":\"{topic}\"}}],\"unitMode\":\"false\"}}],\"producerDataSet\":null}}\n"
    )
}

fn cpp_heartbeat(body: String) -> RemotingCommand {
    let mut cmd = RemotingCommand::request(req::HEART_BEAT).with_body(Bytes::from(body));
    cmd.language = LanguageCode::Cpp;
    cmd
}

/// A pull of queue 0 that relies on the subscription registered by heartbeat (no
/// FLAG_SUBSCRIPTION), sending the heartbeat's subVersion back as the C++ cores do.
fn registered_pull(group: &str, topic: &str) -> RemotingCommand {
    let mut cmd = common::pull(
        req::PULL_MESSAGE,
        topic,
        0,
        0,
        32,
        0,
        "",
        1_000,
        SerializeType::Json,
    );
    cmd.set_ext("consumerGroup", group);
    cmd.set_ext("sysFlag", 0);
    cmd.set_ext("subVersion", SUB_VERSION);
    cmd.ext_fields.remove("subscription");
    cmd.ext_fields.remove("expressionType");
    cmd
}

fn consumer_ids(c: &mut BlockingClient, group: &str) -> serde_json::Value {
    let list = invoke(
        c,
        RemotingCommand::request(req::GET_CONSUMER_LIST_BY_GROUP).with_ext("consumerGroup", group),
    );
    assert_eq!(list.code, rc::SUCCESS, "{list:?}");
    let v: serde_json::Value = serde_json::from_slice(&list.body).unwrap();
    v["consumerIdList"].clone()
}

/// Sends one tagged message to queue 0 of `topic` and checks it landed.
fn send_tagged(c: &mut BlockingClient, topic: &str, tag: &str) {
    let sent = invoke(
        c,
        common::send_v2(
            topic,
            0,
            Bytes::from_static(b"hello"),
            &[("TAGS", tag)],
            0,
            SerializeType::Json,
        ),
    );
    assert_eq!(sent.code, rc::SUCCESS, "{sent:?}");
}

#[test]
fn cpp_core_heartbeats_register_the_group_and_its_subscription() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    send_tagged(&mut c, "CppT", "a");
    send_tagged(&mut c, "CppS", "a");
    let shapes = [
        (
            "cpp2",
            "CppT",
            cpp_numeric_enums("127.0.0.1@1234", "cpp2", "CppT"),
        ),
        (
            "cpp1",
            "CppS",
            cpp_strings_for_numbers("127.0.0.1@5678", "cpp1", "CppS"),
        ),
    ];
    for (group, topic, body) in shapes {
        let hb = invoke(&mut c, cpp_heartbeat(body));
        assert_eq!(hb.code, rc::SUCCESS, "{group}: {hb:?}");
        let ids = consumer_ids(&mut c, group);
        let id = if group == "cpp2" {
            "127.0.0.1@1234"
        } else {
            "127.0.0.1@5678"
        };
        assert_eq!(ids, serde_json::json!([id]), "{group}");
        let pulled = invoke(&mut c, registered_pull(group, topic));
        assert_eq!(pulled.code, rc::SUCCESS, "{group}: {pulled:?}");
        assert!(!pulled.body.is_empty(), "{group}: the message comes back");
    }
}

/// CHECK_CLIENT_CONFIG's body (Java `CheckClientRequestBody`) is read the same lenient way: a
/// subVersion as a string and classFilterMode as 0 are fine, and a member Java does not know is
/// ignored.
#[test]
fn check_client_config_body_is_read_leniently() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    let body = format!(
        r#"{{"clientId":"127.0.0.1@1234","group":"g","namespace":null,"subscriptionData":{{"classFilterMode":0,"codeSet":["97"],"expressionType":"TAG","subString":"a","subVersion":"{SUB_VERSION}","tagsSet":["a"],"topic":"T"}},"extra":1}}"#
    );
    let check = invoke(
        &mut c,
        RemotingCommand::request(req::CHECK_CLIENT_CONFIG).with_body(Bytes::from(body)),
    );
    assert_eq!(check.code, rc::SUCCESS, "{check:?}");
    // Not JSON at all is still refused, naming the body.
    let bad = invoke(
        &mut c,
        RemotingCommand::request(req::CHECK_CLIENT_CONFIG).with_body(Bytes::from_static(b"{")),
    );
    assert_eq!(bad.code, rc::SYSTEM_ERROR, "{bad:?}");
    assert!(
        bad.remark
            .unwrap()
            .starts_with("CHECK_CLIENT_CONFIG body is not JSON"),
        "the remark names the body"
    );
}
