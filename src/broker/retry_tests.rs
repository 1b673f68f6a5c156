//! Tests of the retry path through several broker parts (processors, the subscription group
//! table, the schedule service and the store): group names the broker refuses, send-back at
//! the largest reconsume count, and delayed messages the store will not take. They live beside
//! `tests.rs`, above every part, for the same reason.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::broker::controller::BrokerController;
use crate::broker::processor::pull::pull_sys_flag;
use crate::broker::schedule_message_service as schedule;
use crate::broker::test_support::{answer, answer_success, broker_with, local_addr, pull_request};
use crate::broker::topic_config_manager::SCHEDULE_TOPIC;
use crate::common::StopFlag;
use crate::remoting::codes::{request_code, response_code};
use crate::remoting::command::RemotingCommand;
use crate::store::filter::AcceptAll;
use crate::store::format::{self, encode_properties};
use crate::store::{GetMessageRequest, GetMessageStatus, MessageToStore};

/// A group name Java's `TopicValidator.validateGroup` refuses, made of path and control
/// characters.
const BAD_GROUP: &str = "../../x\u{1}";

/// A broker with `delay_levels` (`messageDelayLevel`), and its directory.
fn controller(delay_levels: &str) -> (Arc<BrokerController>, tempfile::TempDir) {
    broker_with(|config| config.broker.message_delay_level = delay_levels.to_string())
}

/// Stores `body` in `topic` queue `queue_id` as a producer would; returns its CommitLog offset.
fn put(
    ctrl: &BrokerController,
    topic: &str,
    queue_id: i32,
    properties: &[(&str, &str)],
    reconsume_times: i32,
) -> i64 {
    ctrl.store
        .put_message(&MessageToStore {
            topic: topic.to_string(),
            queue_id,
            flag: 0,
            body: Bytes::from_static(b"failing"),
            properties: encode_properties(properties.iter().copied()),
            sys_flag: 0,
            born_timestamp_ms: 1_700_000_000_000,
            born_host: local_addr(),
            reconsume_times,
            prepared_transaction_offset: 0,
        })
        .unwrap()
        .wrote_phy_offset
}

/// The reconsume counts of the messages in queue 0 of `topic`.
fn reconsume_counts(ctrl: &BrokerController, topic: &str) -> Vec<i32> {
    let result = ctrl
        .store
        .get_message(&GetMessageRequest {
            group: "retry-tests",
            topic,
            queue_id: 0,
            queue_offset: 0,
            max_msg_nums: 32,
            filter: &AcceptAll,
        })
        .unwrap();
    if result.status != GetMessageStatus::Found {
        return Vec::new();
    }
    (0..result.message_count)
        .map(|i| {
            format::decode_record(result.message(i))
                .unwrap()
                .reconsume_times
        })
        .collect()
}

fn send_back(offset: i64, group: &str) -> RemotingCommand {
    RemotingCommand::request(request_code::CONSUMER_SEND_MSG_BACK)
        .with_ext("offset", offset)
        .with_ext("group", group)
        .with_ext("delayLevel", 0)
}

/// Java's `AbstractSendMessageProcessor.consumerSendMsgBack` finds no config for a group
/// `SubscriptionGroupManager` will not create and answers SUBSCRIPTION_GROUP_NOT_EXIST; nothing
/// reaches the schedule queue, the topic table or the group table.
#[test]
fn a_send_back_for_a_group_java_refuses_is_answered_group_not_exist() {
    let (ctrl, _dir) = controller("1s 5s 10s");
    let offset = put(&ctrl, "Orig", 0, &[("TAGS", "t")], 0);
    let response = answer(&ctrl, &send_back(offset, BAD_GROUP));
    assert_eq!(response.code, response_code::SUBSCRIPTION_GROUP_NOT_EXIST);
    assert_eq!(
        response.remark.as_deref(),
        Some(format!("subscription group not exist, {BAD_GROUP}").as_str())
    );
    assert_eq!(ctrl.store.max_offset_in_queue(SCHEDULE_TOPIC, 2), 0);
    assert!(ctrl.topics.select(&format!("%RETRY%{BAD_GROUP}")).is_none());
    assert!(ctrl.groups.find(BAD_GROUP).is_none());
    // A good group still goes to its retry topic through delay level 3.
    answer_success(&ctrl, &send_back(offset, "cg"));
    assert_eq!(ctrl.store.max_offset_in_queue(SCHEDULE_TOPIC, 2), 1);
    ctrl.store.shutdown().unwrap();
}

fn heartbeat(groups: &[&str]) -> RemotingCommand {
    let consumers: Vec<serde_json::Value> = groups
        .iter()
        .map(|group| {
            serde_json::json!({
                "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                "consumeType": "CONSUME_PASSIVELY",
                "groupName": group, "messageModel": "CLUSTERING", "unitMode": false,
                "subscriptionDataSet": [{"classFilterMode": false, "codeSet": [],
                    "expressionType": "TAG", "subString": "*", "subVersion": 1,
                    "tagsSet": [], "topic": "Orig"}]
            })
        })
        .collect();
    let body = serde_json::json!({
        "clientID": "c1", "consumerDataSet": consumers, "producerDataSet": []
    });
    RemotingCommand::request(request_code::HEART_BEAT).with_body(Bytes::from(body.to_string()))
}

/// Java's `ClientManageProcessor.heartBeat` skips a consumer whose group it will not create
/// (no retry topic, no registration) and serves the others; a pull of that group is answered
/// SUBSCRIPTION_GROUP_NOT_EXIST like any unknown group (`PullMessageProcessor`).
#[test]
fn heartbeat_and_pull_of_a_group_java_refuses_create_nothing() {
    let (ctrl, _dir) = controller("1s 5s 10s");
    put(&ctrl, "Orig", 0, &[], 0);
    answer_success(&ctrl, &heartbeat(&[BAD_GROUP, "good"]));
    assert!(ctrl.consumers.group("good").is_some());
    assert!(ctrl.topics.select("%RETRY%good").is_some());
    assert!(ctrl.consumers.group(BAD_GROUP).is_none());
    assert!(ctrl.topics.select(&format!("%RETRY%{BAD_GROUP}")).is_none());
    assert!(ctrl.groups.find(BAD_GROUP).is_none());
    let response = answer(
        &ctrl,
        &pull_request(BAD_GROUP, "Orig", pull_sys_flag::SUBSCRIPTION, 0),
    );
    assert_eq!(
        response.code,
        response_code::SUBSCRIPTION_GROUP_NOT_EXIST,
        "{:?}",
        response.remark
    );
    ctrl.store.shutdown().unwrap();
}

/// A message whose reconsume count is already i32::MAX is past any maximum: it goes to the DLQ
/// and keeps that count (the count does not wrap to a negative one).
#[test]
fn a_send_back_at_the_largest_reconsume_count_goes_to_the_dlq() {
    let (ctrl, _dir) = controller("1s 5s 10s");
    let offset = put(&ctrl, "Orig", 0, &[], i32::MAX);
    answer_success(&ctrl, &send_back(offset, "cg"));
    assert_eq!(reconsume_counts(&ctrl, "%DLQ%cg"), [i32::MAX]);
    assert_eq!(ctrl.store.max_offset_in_queue(SCHEDULE_TOPIC, 2), 0);
    ctrl.store.shutdown().unwrap();
}

/// Parks a message for `real_topic` in level 3 of SCHEDULE_TOPIC_XXXX, as a send-back does.
fn park_for(ctrl: &BrokerController, real_topic: &str) {
    let props = [
        ("DELAY", "3"),
        ("REAL_TOPIC", real_topic),
        ("REAL_QID", "0"),
    ];
    put(ctrl, SCHEDULE_TOPIC, 2, &props, 1);
}

/// Runs the schedule service until `done` holds (10 s at most); returns whether it did.
fn schedule_until(ctrl: &Arc<BrokerController>, done: impl Fn() -> bool) -> bool {
    let stop = StopFlag::new();
    let thread = {
        let (ctrl, stop) = (Arc::clone(ctrl), stop.clone());
        std::thread::spawn(move || schedule::run(&ctrl, &stop))
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.raise();
    thread.join().unwrap();
    done()
}

/// A parked message the store refuses (an illegal real topic) and that has no dead-letter
/// topic either is dropped; the next message of the same level is delivered.
#[test]
fn an_undeliverable_delayed_message_does_not_hold_back_its_level() {
    let (ctrl, dir) = controller("0s 0s 0s");
    park_for(&ctrl, &format!("%RETRY%{BAD_GROUP}"));
    park_for(&ctrl, "%RETRY%good");
    let delivered = schedule_until(&ctrl, || !reconsume_counts(&ctrl, "%RETRY%good").is_empty());
    assert!(
        delivered,
        "the second message of level 3 was never delivered"
    );
    let offsets = std::fs::read_to_string(dir.path().join("store/config/delayOffset.json"));
    let offsets: serde_json::Value = serde_json::from_str(&offsets.unwrap()).unwrap();
    assert_eq!(offsets["offsetTable"]["3"], 2, "level 3 moved past both");
    ctrl.store.shutdown().unwrap();
}

/// A parked retry the store refuses goes to its group's DLQ when the DLQ topic is legal: a
/// group of 250 characters (longer than Java lets a broker create, possible in an old
/// subscriptionGroup.json) makes a retry topic over 255 characters and a DLQ topic of 255.
#[test]
fn an_undeliverable_retry_goes_to_the_dlq_of_its_group() {
    let (ctrl, _dir) = controller("0s 0s 0s");
    let group = "g".repeat(250);
    park_for(&ctrl, &format!("%RETRY%{group}"));
    let dlq = format!("%DLQ%{group}");
    let delivered = schedule_until(&ctrl, || !reconsume_counts(&ctrl, &dlq).is_empty());
    assert!(delivered, "the refused retry never reached {dlq}");
    assert!(ctrl.topics.select(&dlq).is_some());
    ctrl.store.shutdown().unwrap();
}
