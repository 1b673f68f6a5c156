//! The check-back scan against a real store (a controller from `startup`, no sockets): which
//! half messages it checks, how it moves its progress, and when it sets a message aside.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::broker::controller::BrokerController;
use crate::broker::test_support::broker_with;
use crate::common::{now_ms, StopFlag};
use crate::store::format::{encode_properties, sys_flag};
use crate::store::MessageToStore;

use super::transactional_message_bridge::{
    fetch_consume_offset, get_messages, put_half_message, write_op,
};
use super::transactional_message_service::{check, CheckReport, CheckSettings};
use super::transactional_message_util::{CHECK_MAX_TIME_TOPIC, HALF_TOPIC, OP_HALF_TOPIC};

const SETTINGS: CheckSettings = CheckSettings {
    transaction_timeout_ms: 1_000,
    transaction_check_max: 15,
    file_reserved_time_ms: 72 * 3_600_000,
};

fn controller() -> (Arc<BrokerController>, tempfile::TempDir) {
    broker_with(|_| {})
}

/// Stores `count` half messages born a minute ago; returns their half queue offsets.
fn halves(ctrl: &BrokerController, count: usize) -> Vec<i64> {
    halves_with(ctrl, count, &[])
}

/// As [`halves`], with more properties.
fn halves_with(ctrl: &BrokerController, count: usize, extra: &[(&str, &str)]) -> Vec<i64> {
    let mut props = vec![("TRAN_MSG", "true"), ("PGROUP", "pg")];
    props.extend_from_slice(extra);
    (0..count)
        .map(|i| {
            let msg = MessageToStore {
                topic: "TopicA".into(),
                queue_id: 1,
                flag: 0,
                body: Bytes::from(format!("m{i}")),
                properties: encode_properties(props.iter().copied()),
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

/// A half message inside a (huge) immunity time is renewed with its raised check count, so it
/// is still set aside after transactionCheckMax passes (Java `renewImmunityHalfMessageInner`).
#[test]
fn a_message_in_its_immunity_time_is_set_aside_after_check_max_passes() {
    let (ctrl, _dir) = controller();
    halves_with(&ctrl, 1, &[("CHECK_IMMUNITY_TIME_IN_SECONDS", "999999999")]);
    let twice = CheckSettings {
        transaction_check_max: 2,
        ..SETTINGS
    };
    let reports: Vec<CheckReport> = (0..4).map(|_| pass(&ctrl, twice)).collect();
    assert_eq!(reports.iter().map(|r| r.checked).sum::<usize>(), 0);
    assert_eq!(ctrl.store.max_offset_in_queue(CHECK_MAX_TIME_TOPIC, 0), 1);
    assert_eq!(fetch_consume_offset(&ctrl, HALF_TOPIC, 0), 3);
}

/// An unparsable TRAN_PREPARED_QUEUE_OFFSET is treated as absent: the scan moves on.
#[test]
fn an_unparsable_prepared_queue_offset_does_not_hold_the_scan() {
    let (ctrl, _dir) = controller();
    halves_with(
        &ctrl,
        1,
        &[
            ("CHECK_IMMUNITY_TIME_IN_SECONDS", "999999999"),
            ("TRAN_PREPARED_QUEUE_OFFSET", "not-a-number"),
        ],
    );
    let report = pass(&ctrl, SETTINGS);
    assert_eq!(report.half_offset, 1);
    assert_eq!(ctrl.store.max_offset_in_queue(HALF_TOPIC, 0), 2, "renewed");
}

/// A half message whose properties leave no room for TRANSACTION_CHECK_TIMES cannot be
/// stored again: it goes to TRANS_CHECK_MAX_TIME_TOPIC and the pass goes on to the next one.
#[test]
fn a_half_message_too_large_to_renew_does_not_abort_the_pass() {
    let (ctrl, _dir) = controller();
    // The longest padding the store takes: the renewed copy's TRANSACTION_CHECK_TIMES passes
    // the properties limit.
    let fits = |pad_len: usize| {
        let pad = "p".repeat(pad_len);
        let props = [
            ("TRAN_MSG", "true"),
            ("PGROUP", "pg"),
            ("PAD", pad.as_str()),
        ];
        let msg = MessageToStore {
            topic: "TopicA".into(),
            queue_id: 1,
            flag: 0,
            body: Bytes::from_static(b"big"),
            properties: encode_properties(props),
            sys_flag: sys_flag::TRANSACTION_PREPARED_TYPE,
            born_timestamp_ms: now_ms() - 60_000,
            born_host: "127.0.0.1:5000".parse().unwrap(),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
        };
        put_half_message(&ctrl, msg).is_ok()
    };
    let max = crate::store::format::PROPERTIES_MAX_BYTES;
    assert!(
        (0..200).any(|less| fits(max - 30 - less)),
        "no padding fits"
    );
    halves(&ctrl, 1);
    let report = pass(&ctrl, SETTINGS);
    assert_eq!(report.half_offset, 2);
    assert_eq!(report.checked, 1, "the second half message is checked");
    assert_eq!(report.discarded, 1);
    assert_eq!(ctrl.store.max_offset_in_queue(CHECK_MAX_TIME_TOPIC, 0), 1);
}

/// More op messages behind the op progress than a pass may hold (the bound is lowered in
/// tests), all behind one unended half message: passes still move on, the unended one is
/// checked back, and no ended half message ever is.
#[test]
fn more_op_messages_than_a_pass_holds_do_not_hold_the_scan_back() {
    let (ctrl, _dir) = controller();
    let offsets = halves(&ctrl, 300);
    for offset in offsets.iter().filter(|o| **o != 0) {
        write_op(&ctrl, 0, *offset).unwrap();
    }
    let first = pass(&ctrl, SETTINGS);
    assert_eq!(first.checked, 1, "the unended half message is checked back");
    let mut report = first;
    for _ in 0..20 {
        if report.op_offset == 299 {
            break;
        }
        report = pass(&ctrl, SETTINGS);
    }
    assert_eq!(
        report.op_offset, 299,
        "every op message is done: {report:?}"
    );
    assert!(report.half_offset >= 300, "{report:?}");
    // Every copy in the half queue is a copy of the unended message.
    let end = ctrl.store.max_offset_in_queue(HALF_TOPIC, 0);
    assert!(end > 300);
    let copies =
        get_messages(&ctrl, HALF_TOPIC, 0, 300, i32::try_from(end - 300).unwrap()).unwrap();
    for i in 0..copies.queue_offsets.len() {
        let record = crate::store::format::decode_record(copies.message(i)).unwrap();
        assert_eq!(record.body, b"m0");
    }
}
