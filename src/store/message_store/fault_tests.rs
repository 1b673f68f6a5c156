//! The store on a file system with failpoints ([`FaultFs`]): each named failure is returned to
//! the request that hit it, only a failed fsync of written data makes the store read-only, and
//! a reopen on the real file system recovers.

use std::path::Path;
use std::sync::Arc;

use super::tests::{config, msg, open, pull, put_until_second_file};
use super::MessageStore;
use crate::store::config::FlushPolicy;
use crate::store::error::StoreError;
use crate::store::filter::AcceptAll;
use crate::store::format;
use crate::store::fs::fault::{Failpoint, FaultFs};
use crate::store::io::IoEngine;

fn open_on(dir: &Path, fs: &Arc<FaultFs>, flush: FlushPolicy) -> Arc<MessageStore> {
    let mut cfg = config(dir);
    cfg.flush_policy = flush;
    MessageStore::open_on(cfg, Arc::new(IoEngine::new_pread()), Arc::clone(fs) as _).unwrap()
}

/// The bodies of queue T/0 from offset 0.
fn bodies(store: &MessageStore) -> Vec<Vec<u8>> {
    let got = store.get_message(&pull("T", 0, 0, 32, &AcceptAll)).unwrap();
    (0..got.message_count)
        .map(|k| format::decode_record(got.message(k)).unwrap().body.to_vec())
        .collect()
}

fn op_of(err: &StoreError) -> &'static str {
    match err {
        StoreError::Io { op, .. } => op,
        other => panic!("expected an I/O error, got {other:?}"),
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

/// A sync-flush store on `fs` whose first record, "first" in T/0, is durable.
fn sync_store_with_one_flushed(
    dir: &Path,
    fs: &Arc<FaultFs>,
) -> (
    Arc<MessageStore>,
    tokio::runtime::Runtime,
    crate::store::types::PutMessageResult,
) {
    let store = open_on(dir, fs, FlushPolicy::Sync);
    let rt = runtime();
    let first = store.put_message(&msg("T", 0, b"first", "A")).unwrap();
    rt.block_on(store.wait_flushed(first.end_phy_offset()))
        .unwrap();
    (store, rt, first)
}

/// Reopens on the real file system after a crash (drop without shutdown) and checks that the
/// queue holds exactly `expected` and takes appends.
fn reopen_recovers(dir: &Path, expected: &[&[u8]]) {
    let store = open(config(dir));
    assert!(store.recovery_report().abnormal);
    let got = bodies(&store);
    let want: Vec<Vec<u8>> = expected.iter().map(|b| b.to_vec()).collect();
    assert_eq!(got, want);
    assert_eq!(store.is_read_only(), None);
    let r = store
        .put_message(&msg("T", 0, b"after-reopen", "A"))
        .unwrap();
    assert_eq!(r.queue_offset, expected.len() as i64);
    store.shutdown().unwrap();
}

#[test]
fn a_short_write_fails_that_append_only_for_the_commit_log() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultFs::new());
    let store = open_on(dir.path(), &fs, FlushPolicy::Async);
    let first = store.put_message(&msg("T", 0, b"first", "A")).unwrap();
    fs.arm(Failpoint::ShortWrite, "commitlog", 1);
    let err = store
        .put_message(&msg("T", 0, b"second-is-lost", "A"))
        .unwrap_err();
    assert_eq!(op_of(&err), "pwrite");
    assert_eq!(fs.fired().len(), 1);
    assert_eq!(store.is_read_only(), None, "a write error is no poison");
    assert_eq!(store.max_offset_in_queue("T", 0), 1);
    let third = store.put_message(&msg("T", 0, b"third", "A")).unwrap();
    assert_eq!(third.wrote_phy_offset, first.end_phy_offset());
    assert_eq!(third.queue_offset, 1);
    assert_eq!(bodies(&store), vec![b"first".to_vec(), b"third".to_vec()]);
    drop(store);
    reopen_recovers(dir.path(), &[b"first", b"third"]);
}

/// ConsumeQueue units wait in the queue's tail: a short write of them by the append that must
/// write them first (the tail is full, or its unit starts the next file, as here) fails that
/// append only; the units already there stay readable, the next append writes them, and a
/// crash after loses nothing.
#[test]
fn a_short_consume_queue_write_fails_the_append_that_writes_the_tail_only() {
    use crate::store::consume_queue::CQ_TAIL_UNITS_MAX;
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultFs::new());
    let store = open_on(dir.path(), &fs, FlushPolicy::Async);
    let full = CQ_TAIL_UNITS_MAX as i64;
    for i in 0..full {
        store
            .put_message(&msg("T", 0, format!("m{i}").as_bytes(), "A"))
            .unwrap();
    }
    fs.arm(Failpoint::ShortWrite, "consumequeue", 1);
    let err = store.put_message(&msg("T", 0, b"lost", "A")).unwrap_err();
    assert_eq!(op_of(&err), "pwrite");
    assert_eq!(fs.fired().len(), 1);
    assert_eq!(store.is_read_only(), None, "a write error is no poison");
    assert_eq!(store.max_offset_in_queue("T", 0), full);
    let next = store.put_message(&msg("T", 0, b"next", "A")).unwrap();
    assert_eq!(next.queue_offset, full);
    // From two units before the tail's end on: the pulls stop at each file's end.
    let tail_bodies = |store: &MessageStore| {
        let mut out = Vec::new();
        let mut from = full - 2;
        while from < full + 1 {
            let got = store
                .get_message(&pull("T", 0, from, 32, &AcceptAll))
                .unwrap();
            assert!(got.message_count > 0, "nothing from {from}");
            for k in 0..got.message_count {
                out.push(format::decode_record(got.message(k)).unwrap().body.to_vec());
            }
            from = got.next_begin_offset;
        }
        out
    };
    let want = vec![
        format!("m{}", full - 2).into_bytes(),
        format!("m{}", full - 1).into_bytes(),
        b"next".to_vec(),
    ];
    assert_eq!(tail_bodies(&store), want);
    drop(store);
    let store = open(config(dir.path()));
    assert!(store.recovery_report().abnormal);
    assert_eq!(store.max_offset_in_queue("T", 0), full + 1);
    assert_eq!(tail_bodies(&store), want);
    store.shutdown().unwrap();
}

/// The flush writes every queue's waiting units before its fsyncs: a failed write there fails
/// the flush without poisoning, keeps the units (readable, and written by the next flush), and
/// a crash after loses none of them.
#[test]
fn a_failed_write_of_waiting_units_by_the_flush_keeps_them_for_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultFs::new());
    let mut cfg = config(dir.path());
    // The flush thread must not take the failpoint first.
    cfg.flush_consume_queue_interval_ms = 600_000;
    let store =
        MessageStore::open_on(cfg, Arc::new(IoEngine::new_pread()), Arc::clone(&fs) as _).unwrap();
    for body in [&b"one"[..], b"two", b"three"] {
        store.put_message(&msg("T", 0, body, "A")).unwrap();
    }
    fs.arm(Failpoint::ShortWrite, "consumequeue", 1);
    let err = store.flush().unwrap_err();
    assert_eq!(op_of(&err), "pwrite");
    assert_eq!(store.is_read_only(), None, "a write error is no poison");
    let want = vec![b"one".to_vec(), b"two".to_vec(), b"three".to_vec()];
    assert_eq!(bodies(&store), want);
    store.flush().unwrap();
    assert_eq!(fs.fired().len(), 1);
    drop(store);
    reopen_recovers(dir.path(), &[b"one", b"two", b"three"]);
}

#[test]
fn a_failed_fsync_of_written_data_makes_the_store_read_only_until_reopened() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultFs::new());
    let (store, rt, _first) = sync_store_with_one_flushed(dir.path(), &fs);
    fs.arm(Failpoint::FsyncError, "commitlog", 1);
    let second = store.put_message(&msg("T", 0, b"second", "A")).unwrap();
    let err = rt
        .block_on(store.wait_flushed(second.end_phy_offset()))
        .unwrap_err();
    // The fsync the append asked for may fail before the wait begins: then read-only.
    if !matches!(err, StoreError::Poisoned { .. }) {
        assert_flush_failed(&err);
    }
    // Never retried as if it had succeeded: the flushed offset stays below the record.
    assert!(store.flushed_phy_offset() < second.end_phy_offset());
    let reason = store
        .is_read_only()
        .expect("read-only after a failed fsync");
    assert!(reason.contains("fsync"), "{reason}");
    let refused = store.put_message(&msg("T", 0, b"third", "A")).unwrap_err();
    assert!(
        matches!(refused, StoreError::Poisoned { .. }),
        "{refused:?}"
    );
    // Pulls keep working.
    assert_eq!(bodies(&store)[0], b"first");
    drop(store);
    // The failed fsync was injected, the bytes are in the page cache: the reopen finds both.
    reopen_recovers(dir.path(), &[b"first", b"second"]);
}

/// The fsync's own error reaches the waiter, typed (the broker answers FLUSH_DISK_TIMEOUT).
fn assert_flush_failed(err: &StoreError) {
    match err {
        StoreError::FlushFailed { source } => assert_eq!(op_of(source), "fsync"),
        other => panic!("expected FlushFailed, got {other:?}"),
    }
    assert_eq!(
        err.put_status(),
        crate::store::types::PutMessageStatus::FlushDiskTimeout
    );
}

/// Many producers wait on one group commit whose fsync fails: every one of them hears the
/// failure (none waits for its timeout), later appends and waits say read-only, and no later
/// flush vouches for the bytes.
#[test]
fn a_failed_group_commit_fsync_fails_every_waiter_of_its_batch() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultFs::new());
    let (store, rt, first) = sync_store_with_one_flushed(dir.path(), &fs);
    let durable = store.flushed_phy_offset();
    // The next CommitLog fsync takes SLOW_FSYNC and fails: the producers below append and
    // wait during it. Armed twice: the second flusher may start its fsync beside the flush
    // thread's and take the failpoint first; with both failing no producer can be covered
    // by a good fsync, whichever thread started first.
    fs.arm(Failpoint::SlowFsyncError, "commitlog", 2);
    let started = std::time::Instant::now();
    let outcomes = std::thread::scope(|s| {
        let producers: Vec<_> = (0..8)
            .map(|k| {
                let store = &store;
                s.spawn(move || {
                    let body = format!("m{k}");
                    let put = store.put_message(&msg("T", 0, body.as_bytes(), "A"))?;
                    runtime().block_on(store.wait_flushed(put.end_phy_offset()))
                })
            })
            .collect();
        producers
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    // Well inside the sync flush timeout: the failure is told, not waited out.
    let timeout = std::time::Duration::from_millis(store.config().sync_flush_timeout_ms);
    assert!(started.elapsed() < timeout, "{:?}", started.elapsed());
    let mut failed = 0;
    for outcome in &outcomes {
        match outcome {
            Err(e @ StoreError::FlushFailed { .. }) => {
                assert_flush_failed(e);
                failed += 1;
            }
            // Appended (or waiting) only after the failure: refused as read-only.
            Err(StoreError::Poisoned { .. }) => {}
            other => panic!("a producer got {other:?}"),
        }
    }
    assert!(failed >= 1, "{outcomes:?}");
    assert!(store.is_read_only().is_some());
    assert_eq!(store.flushed_phy_offset(), durable);
    assert!(matches!(
        store.flush().unwrap_err(),
        StoreError::Poisoned { .. }
    ));
    assert!(matches!(
        rt.block_on(store.wait_flushed(first.end_phy_offset() + 1)),
        Err(StoreError::Poisoned { .. })
    ));
}

/// Waits (bounded) until `point` fired `times` times.
fn wait_fired(fs: &FaultFs, point: Failpoint, times: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while fs.fired().iter().filter(|(p, _)| *p == point).count() < times {
        assert!(
            std::time::Instant::now() < deadline,
            "{point:?} never fired"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Appends `body` to T/0 and waits for its group commit.
fn put_and_wait(store: &MessageStore, body: &[u8]) -> Result<i64, StoreError> {
    let put = store.put_message(&msg("T", 0, body, "A"))?;
    runtime().block_on(store.wait_flushed(put.end_phy_offset()))?;
    Ok(put.end_phy_offset())
}

/// One slow fsync, so the measured fsync time calls for the second flusher
/// (`SECOND_FLUSHER_MIN_FSYNC`); waits until the flush thread has said so.
fn measure_a_slow_fsync(store: &MessageStore, fs: &FaultFs) {
    fs.arm(Failpoint::SlowFsync, "commitlog", 1);
    put_and_wait(store, b"slow").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !store
        .inner
        .second_flusher_wanted
        .load(std::sync::atomic::Ordering::Relaxed)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "slow fsync not measured"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// With fsyncs measured slow, a producer that appends while the flush thread's fsync runs gets
/// an fsync of its own at once (the second flusher's) instead of waiting for that one to end;
/// both are told once their bytes are durable.
#[test]
fn a_producer_arriving_during_a_long_fsync_gets_its_own_fsync_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultFs::new());
    let (store, _rt, _first) = sync_store_with_one_flushed(dir.path(), &fs);
    measure_a_slow_fsync(&store, &fs);
    fs.arm(Failpoint::SlowFsync, "commitlog", 2);
    let (one, two) = std::thread::scope(|s| {
        let one = s.spawn(|| put_and_wait(&store, b"one"));
        // The measuring fsync fired once already: wait for the first of this test's.
        wait_fired(&fs, Failpoint::SlowFsync, 2);
        let two = s.spawn(|| put_and_wait(&store, b"two"));
        (one.join().unwrap(), two.join().unwrap())
    });
    let (one, two) = (one.unwrap(), two.unwrap());
    assert!(one < two);
    assert_eq!(
        fs.max_slow_fsyncs_at_once(),
        2,
        "the second fsync ran beside the first"
    );
    assert!(store.flushed_phy_offset() >= two);
    assert_eq!(store.is_read_only(), None);
}

/// The flush thread's fsync fails slowly while the second flusher's, started after it for a
/// later producer, succeeds at once: fsyncs are published in the order they started, so the
/// later success vouches for nothing, every producer hears of the failure and the flushed
/// offset stays.
#[test]
fn an_fsync_ending_after_an_earlier_failed_one_vouches_for_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultFs::new());
    let (store, _rt, _first) = sync_store_with_one_flushed(dir.path(), &fs);
    measure_a_slow_fsync(&store, &fs);
    let durable = store.flushed_phy_offset();
    fs.arm(Failpoint::SlowFsyncError, "commitlog", 1);
    let (one, two) = std::thread::scope(|s| {
        let one = s.spawn(|| put_and_wait(&store, b"one"));
        wait_fired(&fs, Failpoint::SlowFsyncError, 1);
        let two = s.spawn(|| put_and_wait(&store, b"two"));
        (one.join().unwrap(), two.join().unwrap())
    });
    assert_flush_failed(&one.unwrap_err());
    match two {
        Err(e @ StoreError::FlushFailed { .. }) => assert_flush_failed(&e),
        // Appended only after the failure was published.
        Err(StoreError::Poisoned { .. }) => {}
        other => panic!("the later producer got {other:?}"),
    }
    assert!(store.is_read_only().is_some());
    assert_eq!(store.flushed_phy_offset(), durable);
}

/// ENOSPC when creating or allocating the next CommitLog file, or a rename error while
/// putting it in place: the append that needed the file fails, nothing is poisoned, no
/// half-made file stays, and the next append creates the file.
#[test]
fn enospc_and_rename_errors_on_a_new_commit_log_file_fail_that_append_only() {
    for point in [
        Failpoint::CreateEnospc,
        Failpoint::AllocateEnospc,
        Failpoint::RenameError,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let fs = Arc::new(FaultFs::new());
        let store = open_on(dir.path(), &fs, FlushPolicy::Async);
        store.put_message(&msg("T", 0, b"first", "A")).unwrap();
        fs.arm(point, "commitlog/00000000000000004096", 1);
        let err = put_until_second_file(&store).unwrap_err();
        let expected_op = match point {
            Failpoint::CreateEnospc => "create",
            Failpoint::AllocateEnospc => "fallocate",
            _ => "rename",
        };
        assert_eq!(op_of(&err), expected_op, "{point:?}");
        assert_eq!(store.is_read_only(), None, "{point:?}");
        let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("commitlog"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n.len() != 20)
            .collect();
        assert!(leftovers.is_empty(), "{point:?}: {leftovers:?}");
        let offsets = put_until_second_file(&store).unwrap();
        let last = *offsets.last().unwrap();
        let got = store
            .get_message(&pull("T", 0, last, 1, &AcceptAll))
            .unwrap();
        assert_eq!(got.queue_offsets, vec![last], "{point:?}");
        let count = last as usize + 1;
        drop(store);
        let store = open(config(dir.path()));
        assert_eq!(store.max_offset_in_queue("T", 0), count as i64, "{point:?}");
        store.shutdown().unwrap();
    }
}

/// ENOSPC creating or allocating a ConsumeQueue file (a new queue, or the next file of one):
/// that append fails before its record is written, and the next one succeeds.
#[test]
fn enospc_on_a_consume_queue_file_fails_that_append_only() {
    for point in [Failpoint::CreateEnospc, Failpoint::AllocateEnospc] {
        let dir = tempfile::tempdir().unwrap();
        let fs = Arc::new(FaultFs::new());
        let store = open_on(dir.path(), &fs, FlushPolicy::Async);
        fs.arm(point, "consumequeue/T/0", 1);
        let end = store.max_phy_offset();
        let err = store.put_message(&msg("T", 0, b"m", "A")).unwrap_err();
        assert!(matches!(op_of(&err), "create" | "fallocate"), "{err:?}");
        assert_eq!(store.is_read_only(), None);
        assert_eq!(store.max_phy_offset(), end, "no record without its unit");
        let r = store.put_message(&msg("T", 0, b"first", "A")).unwrap();
        assert_eq!(r.queue_offset, 0);
        drop(store);
        reopen_recovers(dir.path(), &[b"first"]);
    }
}

/// A new ConsumeQueue file is made durable by the flush, not by the append that creates it: an
/// fsync failing there poisons like any fsync of written units, and the reopen rebuilds the
/// queue from the CommitLog.
#[test]
fn a_new_consume_queue_file_is_fsynced_by_the_flush_and_a_failure_there_poisons() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultFs::new());
    let store = open_on(dir.path(), &fs, FlushPolicy::Async);
    fs.arm(Failpoint::FsyncError, "consumequeue/T/0", 1);
    store.put_message(&msg("T", 0, b"first", "A")).unwrap();
    assert_eq!(
        fs.fired(),
        vec![],
        "the append made no fsync of the new file"
    );
    let err = store.flush().unwrap_err();
    assert_eq!(op_of(&err), "fsync");
    assert!(fs.fired()[0].1.contains("consumequeue/T/0"));
    assert!(store.is_read_only().is_some());
    drop(store);
    reopen_recovers(dir.path(), &[b"first"]);
}

/// A failing checkpoint fsync poisons (the checkpoint vouches for written data); shutdown
/// then says so, and the reopen (as after a crash) recovers everything.
#[test]
fn a_failed_checkpoint_fsync_is_reported_and_recovered_from() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultFs::new());
    let store = open_on(dir.path(), &fs, FlushPolicy::Async);
    store.put_message(&msg("T", 0, b"first", "A")).unwrap();
    fs.arm(Failpoint::FsyncError, "checkpoint", 1);
    let err = store.flush().unwrap_err();
    assert_eq!(op_of(&err), "fsync");
    assert!(store.is_read_only().is_some());
    assert!(matches!(
        store.shutdown().unwrap_err(),
        StoreError::Poisoned { .. }
    ));
    drop(store);
    reopen_recovers(dir.path(), &[b"first"]);
}

/// The disk guard on a simulated disk: above 85 % the oldest files go even though they have
/// not expired; above 90 % sends are refused with Java's remark while pulls go on; the disk
/// stays full down to 85 % and writes come back by themselves below it.
#[test]
fn the_disk_guard_cleans_forcibly_refuses_writes_when_full_and_recovers_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultFs::new());
    let store = open_on(dir.path(), &fs, FlushPolicy::Async);
    let now = crate::common::now_ms();
    let mut written = 0;
    while store.max_phy_offset() < 3 * 4096 + 100 {
        store.put_message(&msg("T", 0, &[5u8; 300], "A")).unwrap();
        written += 1;
    }
    let files = |store: &MessageStore| store.inner.commit_log.segments().len();
    assert_eq!(files(&store), 4);
    fs.set_disk_used_percent(Some(80.0));
    assert_eq!(
        store.clean_files_periodically(now).unwrap(),
        0,
        "nothing expired"
    );
    assert_eq!(store.disk_full(), None);
    fs.set_disk_used_percent(Some(86.0));
    assert_eq!(
        store.clean_files_periodically(now).unwrap(),
        3,
        "forcibly: every file but the last"
    );
    assert_eq!(files(&store), 1);
    assert_eq!(store.disk_full(), None, "85-90 %: cleaned, still writable");
    assert!(store.min_offset_in_queue("T", 0) > 0);
    store.put_message(&msg("T", 0, b"at-86", "A")).unwrap();
    written += 1;
    fs.set_disk_used_percent(Some(91.0));
    store.clean_files_periodically(now).unwrap();
    assert!(store.disk_full().is_some());
    let err = store
        .put_message(&msg("T", 0, b"refused", "A"))
        .unwrap_err();
    assert!(matches!(err, StoreError::DiskFull { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "service not available now. It may be caused by one of the following reasons: the \
         broker's disk is full [CL:  0.91 CQ:  0.91 INDEX: -1.00], messages are put to the \
         slave, message store has been shut down, etc."
    );
    assert_eq!(
        err.put_status(),
        crate::store::types::PutMessageStatus::ServiceNotAvailable
    );
    // Pulls go on.
    let min = store.min_offset_in_queue("T", 0);
    let got = store
        .get_message(&pull("T", 0, min, 32, &AcceptAll))
        .unwrap();
    assert_eq!(got.queue_offsets.last(), Some(&(written - 1)));
    // Between the two ratios a full disk stays full.
    fs.set_disk_used_percent(Some(87.0));
    store.clean_files_periodically(now).unwrap();
    assert!(store.disk_full().is_some());
    fs.set_disk_used_percent(Some(60.0));
    store.clean_files_periodically(now).unwrap();
    assert_eq!(store.disk_full(), None);
    let r = store.put_message(&msg("T", 0, b"back", "A")).unwrap();
    assert_eq!(r.queue_offset, written);
    store.shutdown().unwrap();
}

/// The retention thread runs the guard by itself: a full disk refuses writes, and writes come
/// back once space returns, without any call.
#[test]
fn writes_come_back_by_themselves_when_space_returns() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultFs::new());
    let mut cfg = config(dir.path());
    cfg.delete_check_interval_ms = 20;
    fs.set_disk_used_percent(Some(95.0));
    let store =
        MessageStore::open_on(cfg, Arc::new(IoEngine::new_pread()), Arc::clone(&fs) as _).unwrap();
    // Measured at open: refused from the first send.
    let err = store.put_message(&msg("T", 0, b"m", "A")).unwrap_err();
    assert!(matches!(err, StoreError::DiskFull { .. }), "{err:?}");
    fs.set_disk_used_percent(Some(40.0));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match store.put_message(&msg("T", 0, b"m", "A")) {
            Ok(r) => {
                assert_eq!(r.queue_offset, 0);
                break;
            }
            Err(StoreError::DiskFull { .. }) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => panic!("writes did not come back: {e:?}"),
        }
    }
    store.shutdown().unwrap();
}

/// Quarantine whose rename fails: the open fails naming the rename, nothing is truncated, and
/// the next open moves the tail aside.
#[test]
fn a_failed_rename_while_quarantining_fails_the_open_and_the_next_open_recovers() {
    use crate::store::config::CorruptionPolicy;
    let dir = tempfile::tempdir().unwrap();
    let store = open(config(dir.path()));
    let mut victim = None;
    let mut count = 0;
    while store.max_phy_offset() < 2 * 4096 + 100 {
        let r = store.put_message(&msg("T", 0, &[9u8; 200], "A")).unwrap();
        if count == 3 {
            victim = Some(r.wrote_phy_offset);
        }
        count += 1;
    }
    store.shutdown().unwrap();
    drop(store);
    let victim = victim.unwrap();
    let first = dir.path().join("commitlog/00000000000000000000");
    let mut bytes = std::fs::read(&first).unwrap();
    bytes[victim as usize + 88] ^= 1;
    std::fs::write(&first, &bytes).unwrap();
    let mut cfg = config(dir.path());
    cfg.corruption_policy = CorruptionPolicy::Quarantine;
    let fs = Arc::new(FaultFs::new());
    fs.arm(Failpoint::RenameError, ".corrupt-", 1);
    let err = MessageStore::open_on(
        cfg.clone(),
        Arc::new(IoEngine::new_pread()),
        Arc::clone(&fs) as _,
    )
    .unwrap_err();
    assert_eq!(op_of(&err), "rename");
    assert_eq!(std::fs::read(&first).unwrap(), bytes, "nothing truncated");
    let store = open(cfg);
    assert_eq!(store.max_phy_offset(), victim);
    assert_eq!(store.max_offset_in_queue("T", 0), 3);
    assert_eq!(store.recovery_report().quarantined_files.len(), 3);
    store.shutdown().unwrap();
}
