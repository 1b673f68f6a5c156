//! The disk seen by clients, on the store's file system with failpoints: on a (simulated) full
//! disk a send is answered SERVICE_NOT_AVAILABLE with Java's remark, a pull still finds its
//! messages, and sends work again once a retention pass measures space; a metadata file that
//! cannot be written fails the admin request (or is retried by the persister) and never makes
//! the store read-only. Beside `tests.rs`, above every part.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::broker::controller::BrokerController;
use crate::broker::processor::pull::{self, pull_sys_flag};
use crate::broker::processor::{admin, send, Handled, RequestContext};
use crate::broker::tests::ready;
use crate::common::now_ms;
use crate::config::Config;
use crate::net::ConnectionContext;
use crate::remoting::codes::{request_code, response_code};
use crate::remoting::command::RemotingCommand;
use crate::remoting::headers::{PullMessageRequestHeader, SendMessageRequestHeader};
use crate::store::fs::fault::{Failpoint, FaultFs};

const TOPIC: &str = "DiskGuard";

fn addr() -> SocketAddr {
    "127.0.0.1:10911".parse().unwrap()
}

fn answer(ctrl: &BrokerController, request: &RemotingCommand) -> RemotingCommand {
    let (conn, _rx) = ConnectionContext::detached(1, addr(), addr(), 64);
    let cx = RequestContext { ctrl, conn: &conn };
    let handled = match request.code {
        request_code::SEND_MESSAGE_V2 => ready(send::send_message(&cx, request)),
        request_code::PULL_MESSAGE => ready(pull::pull_message(&cx, request)),
        request_code::UPDATE_AND_CREATE_TOPIC => {
            ready(admin::update_and_create_topic(&cx, request))
        }
        code => panic!("no handler for {code} in these tests"),
    };
    match handled {
        Ok(Handled::Response(response)) => response,
        Ok(_) => panic!("expected an answer at once"),
        Err(e) => e.into_response(request),
    }
}

fn send_request(body: &'static [u8]) -> RemotingCommand {
    let mut cmd = RemotingCommand::request(request_code::SEND_MESSAGE_V2);
    SendMessageRequestHeader {
        producer_group: "pg".into(),
        topic: TOPIC.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 0,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000,
        flag: 0,
        properties: Some(crate::store::format::encode_properties([("TAGS", "a")])),
        reconsume_times: Some(0),
        unit_mode: false,
        batch: false,
        max_reconsume_times: None,
        broker_name: None,
    }
    .encode(&mut cmd);
    cmd.with_body(bytes::Bytes::from_static(body))
}

fn pull_request() -> RemotingCommand {
    let header = PullMessageRequestHeader {
        consumer_group: "cg".to_string(),
        topic: TOPIC.to_string(),
        queue_id: 0,
        queue_offset: 0,
        max_msg_nums: 32,
        sys_flag: pull_sys_flag::SUBSCRIPTION,
        commit_offset: 0,
        suspend_timeout_millis: 0,
        subscription: Some("*".to_string()),
        sub_version: 0,
        expression_type: Some("TAG".to_string()),
        max_msg_bytes: None,
        request_source: None,
        proxy_froward_client_id: None,
    };
    let mut request = RemotingCommand::request(request_code::PULL_MESSAGE);
    header.encode(&mut request);
    request
}

#[test]
fn a_full_disk_refuses_sends_like_java_and_keeps_serving_pulls() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.store.root_dir = dir.path().join("store");
    let fs = Arc::new(FaultFs::new());
    fs.set_disk_used_percent(Some(50.0));
    let ctrl = crate::broker::startup::build_controller_on(config, Arc::clone(&fs) as _)
        .unwrap()
        .ctrl;
    let sent = answer(&ctrl, &send_request(b"before"));
    assert_eq!(sent.code, response_code::SUCCESS, "{:?}", sent.remark);
    fs.set_disk_used_percent(Some(92.5));
    ctrl.store.clean_files_periodically(now_ms()).unwrap();
    let refused = answer(&ctrl, &send_request(b"refused"));
    assert_eq!(refused.code, response_code::SERVICE_NOT_AVAILABLE);
    assert_eq!(
        refused.remark.as_deref(),
        Some(
            "service not available now. It may be caused by one of the following reasons: the \
             broker's disk is full [CL:  0.93 CQ:  0.93 INDEX: -1.00], messages are put to the \
             slave, message store has been shut down, etc."
        )
    );
    let pulled = answer(&ctrl, &pull_request());
    assert_eq!(pulled.code, response_code::SUCCESS, "{:?}", pulled.remark);
    fs.set_disk_used_percent(Some(70.0));
    ctrl.store.clean_files_periodically(now_ms()).unwrap();
    let again = answer(&ctrl, &send_request(b"again"));
    assert_eq!(again.code, response_code::SUCCESS, "{:?}", again.remark);
    ctrl.store.shutdown().unwrap();
}

fn create_topic(topic: &str) -> RemotingCommand {
    RemotingCommand::request(request_code::UPDATE_AND_CREATE_TOPIC)
        .with_ext("topic", topic)
        .with_ext("defaultTopic", "TBW102")
        .with_ext("readQueueNums", 4)
        .with_ext("writeQueueNums", 4)
        .with_ext("perm", 6)
        .with_ext("topicFilterType", "SINGLE_TAG")
        .with_ext("order", false)
}

#[test]
fn a_metadata_file_that_cannot_be_written_fails_its_request_and_never_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.store.root_dir = dir.path().join("store");
    let fs = Arc::new(FaultFs::new());
    let ctrl = crate::broker::startup::build_controller_on(config, Arc::clone(&fs) as _)
        .unwrap()
        .ctrl;
    // The admin update is answered after its write: the failed fsync is its answer.
    fs.arm(Failpoint::FsyncError, "topics.json.tmp", 1);
    let failed = answer(&ctrl, &create_topic("Admin"));
    assert_eq!(failed.code, response_code::SYSTEM_ERROR);
    let remark = failed.remark.unwrap_or_default();
    assert!(
        remark.starts_with("persisting broker metadata failed: fsync topics.json.tmp"),
        "{remark}"
    );
    assert_eq!(ctrl.store.is_read_only(), None, "metadata is not the store");
    let sent = answer(&ctrl, &send_request(b"still writable"));
    assert_eq!(sent.code, response_code::SUCCESS, "{:?}", sent.remark);
    let again = answer(&ctrl, &create_topic("Admin"));
    assert_eq!(again.code, response_code::SUCCESS, "{:?}", again.remark);
    let topics = std::fs::read_to_string(dir.path().join("store/config/topics.json")).unwrap();
    assert!(topics.contains("\"Admin\""));
    // A heartbeat-created group whose write fails stays marked, and the next write has it.
    fs.arm(Failpoint::RenameError, "subscriptionGroup.json", 1);
    ctrl.groups
        .find_or_auto_create("late-group")
        .unwrap()
        .unwrap();
    let err = ctrl.groups.persist_if_dirty().unwrap_err();
    assert!(err.to_string().starts_with("rename "), "{err}");
    assert!(ctrl.groups.persist_if_dirty().unwrap());
    let groups =
        std::fs::read_to_string(dir.path().join("store/config/subscriptionGroup.json")).unwrap();
    assert!(groups.contains("\"late-group\""));
    ctrl.store.shutdown().unwrap();
}
