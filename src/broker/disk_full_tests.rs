//! The disk seen by clients, on the store's file system with failpoints: on a (simulated) full
//! disk a send is answered SERVICE_NOT_AVAILABLE with Java's remark, a pull still finds its
//! messages, and sends work again once a retention pass measures space; a metadata file that
//! cannot be written fails the admin request (or is retried by the persister) and never makes
//! the store read-only; a topic whose queue files cannot be made is made all the same. Beside
//! `tests.rs`, above every part.

use std::sync::Arc;

use crate::broker::controller::BrokerController;
use crate::broker::processor::pull::pull_sys_flag;
use crate::broker::test_support::{answer, answer_success, config_in, pull_request, send_request};
use crate::common::now_ms;
use crate::remoting::codes::{request_code, response_code};
use crate::remoting::command::RemotingCommand;
use crate::store::fs::fault::{Failpoint, FaultFs};

const TOPIC: &str = "DiskGuard";

/// A broker without sockets or threads on a [`FaultFs`] that reports `disk_used_percent` (the
/// real disk's with `None`), and its directory.
fn broker_on_fault_fs(
    disk_used_percent: Option<f64>,
) -> (Arc<BrokerController>, Arc<FaultFs>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultFs::new());
    fs.set_disk_used_percent(disk_used_percent);
    let ctrl =
        crate::broker::startup::build_controller_on(config_in(dir.path()), Arc::clone(&fs) as _)
            .unwrap()
            .ctrl;
    (ctrl, fs, dir)
}

#[test]
fn a_full_disk_refuses_sends_like_java_and_keeps_serving_pulls() {
    let (ctrl, fs, _dir) = broker_on_fault_fs(Some(50.0));
    answer_success(&ctrl, &send_request(TOPIC, b"before"));
    fs.set_disk_used_percent(Some(92.5));
    ctrl.store.clean_files_periodically(now_ms()).unwrap();
    let refused = answer(&ctrl, &send_request(TOPIC, b"refused"));
    assert_eq!(refused.code, response_code::SERVICE_NOT_AVAILABLE);
    assert_eq!(
        refused.remark.as_deref(),
        Some(
            "service not available now. It may be caused by one of the following reasons: the \
             broker's disk is full [CL:  0.93 CQ:  0.93 INDEX: -1.00], messages are put to the \
             slave, message store has been shut down, etc."
        )
    );
    answer_success(
        &ctrl,
        &pull_request("cg", TOPIC, pull_sys_flag::SUBSCRIPTION, 0),
    );
    fs.set_disk_used_percent(Some(70.0));
    ctrl.store.clean_files_periodically(now_ms()).unwrap();
    answer_success(&ctrl, &send_request(TOPIC, b"again"));
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
    let (ctrl, fs, dir) = broker_on_fault_fs(None);
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
    answer_success(&ctrl, &send_request(TOPIC, b"still writable"));
    answer_success(&ctrl, &create_topic("Admin"));
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

/// A topic made by UPDATE_AND_CREATE_TOPIC or by a send gets the files of its write queues at
/// once. When making them fails (no space), the topic is made all the same, and the first
/// send to a queue makes that queue's file itself.
#[test]
fn a_new_topic_gets_its_queue_files_and_failing_to_make_them_fails_nothing() {
    let (ctrl, fs, dir) = broker_on_fault_fs(None);
    let queue_file = |topic: &str, queue_id: i32| {
        dir.path().join(format!(
            "store/consumequeue/{topic}/{queue_id}/00000000000000000000"
        ))
    };
    answer_success(&ctrl, &create_topic("Admin"));
    assert!((0..4).all(|q| queue_file("Admin", q).exists()));
    // Auto-created from TBW102 with the header's 4 queues.
    answer_success(&ctrl, &send_request("Sent", b"first"));
    assert!((0..4).all(|q| queue_file("Sent", q).exists()));
    fs.arm(Failpoint::CreateEnospc, "consumequeue/Full/", 1);
    answer_success(&ctrl, &create_topic("Full"));
    assert!(ctrl.topics.select("Full").is_some());
    assert!((0..4).all(|q| !queue_file("Full", q).exists()));
    answer_success(&ctrl, &send_request("Full", b"made by the send"));
    assert!(queue_file("Full", 0).exists());
    assert_eq!(ctrl.store.max_offset_in_queue("Full", 0), 1);
    ctrl.store.shutdown().unwrap();
}
