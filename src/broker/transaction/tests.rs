//! The check-back scan against a real store (a controller from `startup`, no sockets): which
//! half messages it checks, how it moves its progress, and when it sets a message aside.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::broker::controller::BrokerController;
use crate::broker::startup::build_controller;
use crate::common::{now_ms, StopFlag};
use crate::config::Config;
use crate::store::format::{encode_properties, sys_flag};
use crate::store::MessageToStore;

use super::transactional_message_bridge::{fetch_consume_offset, put_half_message, write_op};
use super::transactional_message_service::{check, CheckReport, CheckSettings};
use super::transactional_message_util::{CHECK_MAX_TIME_TOPIC, HALF_TOPIC, OP_HALF_TOPIC};

const SETTINGS: CheckSettings = CheckSettings {
    transaction_timeout_ms: 1_000,
    transaction_check_max: 15,
    file_reserved_time_ms: 72 * 3_600_000,
};

fn controller() -> (Arc<BrokerController>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.store.root_dir = dir.path().join("store");
    (build_controller(config).unwrap().ctrl, dir)
}

/// Stores `count` half messages born a minute ago; returns their half queue offsets.
fn halves(ctrl: &BrokerController, count: usize) -> Vec<i64> {
    (0..count)
        .map(|i| {
            let msg = MessageToStore {
                topic: "TopicA".into(),
                queue_id: 1,
                flag: 0,
                body: Bytes::from(format!("m{i}")),
                properties: encode_properties([("TRAN_MSG", "true"), ("PGROUP", "pg")]),
                sys_flag: sys_flag::TRANSACTION_PREPARED_TYPE,
                born_timestamp_ms: now_ms() - 60_000,
                born_host: "127.0.0.1:5000".parse().unwrap(),
                reconsume_times: 0,
                prepared_transaction_offset: 0,
            };
            put_half_message(ctrl, msg).unwrap().queue_offset
        })
        .collect()
}

fn pass(ctrl: &BrokerController, settings: CheckSettings) -> CheckReport {
    // Messages stored in the pass's first millisecond are left for the next pass.
    std::thread::sleep(Duration::from_millis(5));
    check(ctrl, settings, &StopFlag::new()).unwrap()
}

/// Ended half messages are never checked, even when the op message ending one comes after
/// more than one read of op messages: the scan reads the op queue to its end before it checks.
#[test]
fn only_the_unended_half_message_is_checked_and_the_progress_moves_past_all() {
    let (ctrl, _dir) = controller();
    let offsets = halves(&ctrl, 40);
    // Ended in reverse order, so the op message of half 0 is the last of 39 (two reads later).
    for offset in offsets.iter().rev().filter(|o| **o != 20) {
        write_op(&ctrl, 0, *offset).unwrap();
    }
    let report = pass(&ctrl, SETTINGS);
    assert_eq!(
        report,
        CheckReport {
            half_offset: 40,
            op_offset: 39,
            checked: 1,
            discarded: 0
        }
    );
    assert_eq!(fetch_consume_offset(&ctrl, HALF_TOPIC, 0), 40);
    assert_eq!(fetch_consume_offset(&ctrl, OP_HALF_TOPIC, 0), 39);
    assert_eq!(
        ctrl.store.max_offset_in_queue(HALF_TOPIC, 0),
        41,
        "one checked copy"
    );

    // The next pass finds only the copy, checks it again, and moves past it.
    let report = pass(&ctrl, SETTINGS);
    assert_eq!((report.half_offset, report.checked), (41, 1));
    // Once the copy is ended, nothing is checked any more.
    write_op(&ctrl, 0, 41).unwrap();
    let report = pass(&ctrl, SETTINGS);
    assert_eq!(
        (report.half_offset, report.op_offset, report.checked),
        (42, 40, 0)
    );
}

/// A half message younger than the timeout holds the scan back until it is old enough.
#[test]
fn a_young_half_message_is_not_checked_yet() {
    let (ctrl, _dir) = controller();
    halves(&ctrl, 1);
    let patient = CheckSettings {
        transaction_timeout_ms: 120_000,
        ..SETTINGS
    };
    let report = pass(&ctrl, patient);
    assert_eq!((report.half_offset, report.checked), (0, 0));
    let report = pass(&ctrl, SETTINGS);
    assert_eq!((report.half_offset, report.checked), (1, 1));
}

/// After transactionCheckMax checks the message goes to TRANS_CHECK_MAX_TIME_TOPIC, once.
#[test]
fn a_message_checked_check_max_times_is_set_aside() {
    let (ctrl, _dir) = controller();
    halves(&ctrl, 1);
    let twice = CheckSettings {
        transaction_check_max: 2,
        ..SETTINGS
    };
    let checked: Vec<usize> = (0..4).map(|_| pass(&ctrl, twice).checked).collect();
    assert_eq!(checked, [1, 1, 0, 0]);
    assert_eq!(ctrl.store.max_offset_in_queue(CHECK_MAX_TIME_TOPIC, 0), 1);
    assert_eq!(fetch_consume_offset(&ctrl, HALF_TOPIC, 0), 3);
}
