use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use super::get::MAPPED_READ_LAG_MIN_BYTES;
use super::{MessageStore, ABORT_FILE_NAME, PULL_MSG_SIZE_MAX_BYTES};
use crate::store::config::{FlushPolicy, StoreConfig};
use crate::store::error::StoreError;
use crate::store::filter::{AcceptAll, MessageFilter};
use crate::store::format;
use crate::store::io::IoEngine;
use crate::store::types::{GetMessageRequest, GetMessageStatus, MessageToStore, PutMessageStatus};

pub(super) fn config(dir: &Path) -> StoreConfig {
    let mut cfg = StoreConfig::with_root(dir);
    cfg.commit_log_file_size_bytes = 4096;
    cfg.consume_queue_file_units = 8;
    cfg
}

pub(super) fn open(cfg: StoreConfig) -> Arc<MessageStore> {
    MessageStore::open(cfg, Arc::new(IoEngine::new_pread())).unwrap()
}

/// A pull of group "g" (the store does not use the group).
pub(super) fn pull<'a>(
    topic: &'a str,
    queue_id: i32,
    queue_offset: i64,
    max_msg_nums: i32,
    filter: &'a dyn MessageFilter,
) -> GetMessageRequest<'a> {
    GetMessageRequest {
        group: "g",
        topic,
        queue_id,
        queue_offset,
        max_msg_nums,
        filter,
    }
}

pub(super) fn msg(topic: &str, queue_id: i32, body: &[u8], tags: &str) -> MessageToStore {
    let born: SocketAddr = "127.0.0.1:5000".parse().unwrap();
    MessageToStore {
        topic: topic.to_owned(),
        queue_id,
        flag: 0,
        body: Bytes::copy_from_slice(body),
        properties: format::encode_properties([("TAGS", tags)]),
        sys_flag: 0,
        born_timestamp_ms: 1,
        born_host: born,
        reconsume_times: 0,
        prepared_transaction_offset: 0,
    }
}

struct TagFilter(i64);
impl MessageFilter for TagFilter {
    fn is_matched_by_consume_queue(&self, tags_code: i64) -> bool {
        tags_code == self.0
    }
    fn is_matched_by_commit_log(&self, _record: &[u8]) -> bool {
        true
    }
}

struct RejectRecords;
impl MessageFilter for RejectRecords {
    fn is_matched_by_consume_queue(&self, _tags_code: i64) -> bool {
        true
    }
    fn is_matched_by_commit_log(&self, _record: &[u8]) -> bool {
        false
    }
}

#[test]
fn regions_carry_the_same_records_as_get_message() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(config(dir.path()));
    // Two queues interleaved, so queue 0's records are contiguous only in pairs of runs, and
    // enough data to roll over several 4 KiB files.
    for i in 0..120 {
        let q = if i % 3 == 0 { 1 } else { 0 };
        store
            .put_message(&msg("T", q, format!("body-{i:04}").as_bytes(), "A"))
            .unwrap();
    }
    assert!(store.max_phy_offset() > 3 * 4096);
    let mut crossed_files = false;
    let shapes = std::cell::Cell::new(0);
    for q in 0..2 {
        let max = store.max_offset_in_queue("T", q);
        for offset in (0..max + 3).chain([-1]) {
            for max_nums in [1, 3, 32] {
                let request = pull("T", q, offset, max_nums, &AcceptAll);
                crossed_files |= regions_match_get_message(&store, &request, &shapes);
            }
        }
    }
    assert!(crossed_files, "some pull spans two CommitLog files");
    assert!(shapes.get() > 100);
    // A layer-one filter applies to regions too; nothing found asks nothing.
    let located = store
        .get_message_regions(
            &pull("T", 0, 0, 32, &TagFilter(0)),
            PULL_MSG_SIZE_MAX_BYTES,
            &|_| unreachable!("nothing to choose"),
        )
        .unwrap();
    assert_eq!(located.result.status, GetMessageStatus::NoMatchedMessage);
    assert!(located.regions.unwrap().is_empty());
}

/// Pulls `request` as bytes, as regions and as regions declined, and checks the three agree.
/// Counts each shape `choose` sees in `shapes`; returns whether two regions lie in different
/// files.
fn regions_match_get_message(
    store: &MessageStore,
    request: &GetMessageRequest<'_>,
    shapes: &std::cell::Cell<usize>,
) -> bool {
    let copied = store.get_message(request).unwrap();
    let located = store
        .get_message_regions(request, PULL_MSG_SIZE_MAX_BYTES, &|shape| {
            assert!(shape.regions >= 1 && shape.regions <= shape.messages);
            shapes.set(shapes.get() + 1);
            true
        })
        .unwrap();
    let regions = located.regions.clone().unwrap();
    let r = &located.result;
    assert_eq!(r.status, copied.status);
    assert_eq!(r.next_begin_offset, copied.next_begin_offset);
    assert_eq!(
        (r.min_offset_in_queue, r.max_offset_in_queue),
        (copied.min_offset_in_queue, copied.max_offset_in_queue)
    );
    assert_eq!(r.message_locations, copied.message_locations);
    assert_eq!(r.queue_offsets, copied.queue_offsets);
    assert_eq!(r.buffer_total_size, copied.buffer_total_size);
    assert!(r.buffer.is_empty() && r.message_ranges.is_empty());
    let mut bytes = BytesMut::new();
    store.read_regions(&regions, &mut bytes).unwrap();
    assert_eq!(&bytes[..], &copied.buffer[..]);
    // Regions are maximal: two neighbours never continue each other in one file.
    let mut crossed_files = false;
    for w in regions.windows(2) {
        let same_file = Arc::ptr_eq(&w[0].segment, &w[1].segment);
        if !same_file {
            crossed_files = true;
        }
        assert!(!same_file || w[0].offset_bytes + w[0].len_bytes as u64 != w[1].offset_bytes);
    }
    let total: usize = regions.iter().map(|r| r.len_bytes).sum();
    assert_eq!(total, copied.buffer_total_size);
    // Choosing bytes gives exactly get_message's answer.
    let as_bytes = store
        .get_message_regions(request, PULL_MSG_SIZE_MAX_BYTES, &|_| false)
        .unwrap();
    if copied.message_count > 0 {
        assert!(as_bytes.regions.is_none());
    }
    assert_eq!(as_bytes.result, copied);
    crossed_files
}

#[test]
fn put_then_get_round_trips_and_rolls_files() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(config(dir.path()));
    let mut ends = Vec::new();
    for i in 0..100 {
        let r = store
            .put_message(&msg("T", 0, format!("body-{i}").as_bytes(), "A"))
            .unwrap();
        assert_eq!(r.queue_offset, i);
        ends.push(r.end_phy_offset());
    }
    assert!(
        store.max_phy_offset() > 4096,
        "the log rolled to a second file"
    );
    let mut offset = 0;
    while offset < 100 {
        let got = store
            .get_message(&pull("T", 0, offset, 32, &AcceptAll))
            .unwrap();
        assert_eq!(got.status, GetMessageStatus::Found);
        for (k, q) in got.queue_offsets.iter().enumerate() {
            let rec = format::decode_record(got.message(k)).unwrap();
            assert_eq!(rec.body, format!("body-{q}").as_bytes());
            assert_eq!(rec.queue_offset, *q);
            assert!(rec.body_crc_matches());
        }
        offset = got.next_begin_offset;
    }
    assert_eq!(offset, 100);
    store.shutdown().unwrap();
}

/// One row of `every_get_message_status_row`: a pull and what it must answer.
struct StatusRow {
    name: &'static str,
    topic: &'static str,
    offset: i64,
    filter: Box<dyn MessageFilter>,
    status: GetMessageStatus,
    next: i64,
}

/// The rows that need no store surgery, against 20 messages of topic `T` tagged A, B, A, ...
/// and an empty queue `Empty`.
fn status_rows() -> Vec<StatusRow> {
    use GetMessageStatus::*;
    let tag_a = i64::from(format::java_string_hash_code("A"));
    let tag_none = i64::from(format::java_string_hash_code("none"));
    let row = |name, topic, offset, filter: Box<dyn MessageFilter>, status, next| StatusRow {
        name,
        topic,
        offset,
        filter,
        status,
        next,
    };
    vec![
        row(
            "no queue",
            "Nope",
            5,
            Box::new(AcceptAll),
            NoMatchedLogicQueue,
            0,
        ),
        row(
            "empty queue",
            "Empty",
            3,
            Box::new(AcceptAll),
            NoMessageInQueue,
            0,
        ),
        row(
            "at max",
            "T",
            20,
            Box::new(AcceptAll),
            OffsetOverflowOne,
            20,
        ),
        row(
            "past max",
            "T",
            25,
            Box::new(AcceptAll),
            OffsetOverflowBadly,
            20,
        ),
        // The scan stops at the end of the CQ file holding the offset (8 units per file).
        row(
            "tags miss",
            "T",
            0,
            Box::new(TagFilter(tag_none)),
            NoMatchedMessage,
            8,
        ),
        row(
            "record miss",
            "T",
            9,
            Box::new(RejectRecords),
            NoMatchedMessage,
            16,
        ),
        row("found", "T", 0, Box::new(TagFilter(tag_a)), Found, 8),
    ]
}

#[test]
fn every_get_message_status_row() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("consumequeue/Empty/0")).unwrap();
    let store = open(config(dir.path()));
    for i in 0..20 {
        let tags = if i % 2 == 0 { "A" } else { "B" };
        store
            .put_message(&msg("T", 0, &[i as u8; 10], tags))
            .unwrap();
    }
    let tag_a = i64::from(format::java_string_hash_code("A"));
    use GetMessageStatus::*;
    for r in &status_rows() {
        let got = store
            .get_message(&pull(r.topic, 0, r.offset, 32, r.filter.as_ref()))
            .unwrap();
        assert_eq!(got.status, r.status, "{}", r.name);
        assert_eq!(got.next_begin_offset, r.next, "{}", r.name);
    }
    let found = store
        .get_message(&pull("T", 0, 0, 32, &TagFilter(tag_a)))
        .unwrap();
    assert_eq!(found.queue_offsets, vec![0, 2, 4, 6]);

    // OFFSET_TOO_SMALL: move the min as retention would.
    let cq = store.inner.find_queue("T", 0).unwrap();
    cq.set_min_offset_in_queue(4);
    let got = store.get_message(&pull("T", 0, 1, 32, &AcceptAll)).unwrap();
    assert_eq!((got.status, got.next_begin_offset), (OffsetTooSmall, 4));
    assert_eq!((got.min_offset_in_queue, got.max_offset_in_queue), (4, 20));

    // MESSAGE_WAS_REMOVING: CommitLog file gone while the CQ still points at it.
    store.inner.commit_log.segments().remove_front(1).unwrap();
    let got = store.get_message(&pull("T", 0, 4, 2, &AcceptAll)).unwrap();
    let first_live = store.min_phy_offset();
    assert!(first_live > 0);
    assert_eq!(got.status, MessageWasRemoving);

    // OFFSET_FOUND_NULL: the CQ file for the offset is gone; next = start of the next file.
    cq.segments().remove_front(1).unwrap();
    let got = store.get_message(&pull("T", 0, 5, 32, &AcceptAll)).unwrap();
    assert_eq!((got.status, got.next_begin_offset), (OffsetFoundNull, 8));
    drop(store);
}

#[test]
fn slave_does_not_correct_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.broker_role_slave = true;
    let store = open(cfg);
    let refused = store.put_message(&msg("T", 0, b"x", "A")).unwrap_err();
    assert!(matches!(refused, StoreError::SlaveReadOnly), "{refused}");
    // The message arrives from a master instead.
    let master_dir = tempfile::tempdir().unwrap();
    let master = open(config(master_dir.path()));
    master.put_message(&msg("T", 0, b"x", "A")).unwrap();
    let region = master.commit_log_region(0, 4096).unwrap();
    let mut bytes = BytesMut::new();
    master.read_regions(&[region], &mut bytes).unwrap();
    store.append_to_commit_log(0, &bytes).unwrap();
    let got = store.get_message(&pull("T", 0, 7, 32, &AcceptAll)).unwrap();
    assert_eq!(
        (got.status, got.next_begin_offset),
        (GetMessageStatus::OffsetOverflowBadly, 7)
    );
    let got = store
        .get_message(&pull("Nope", 0, 7, 32, &AcceptAll))
        .unwrap();
    assert_eq!(got.next_begin_offset, 7);
}

#[test]
fn bad_input_is_a_typed_error_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.max_message_size_bytes = 100;
    let store = open(cfg);
    let before = store.max_phy_offset();
    let big = msg("T", 0, &[0u8; 101], "A");
    assert!(matches!(
        store.put_message(&big),
        Err(StoreError::MessageTooLarge { .. })
    ));
    let long_topic = "x".repeat(128);
    assert!(matches!(
        store.put_message(&msg(&long_topic, 0, b"x", "A")),
        Err(StoreError::TopicIllegal { .. })
    ));
    assert!(matches!(
        store.put_message(&msg("bad topic", 0, b"x", "A")),
        Err(StoreError::TopicIllegal { .. })
    ));
    let mut props = msg("T", 0, b"x", "A");
    props.properties = "a".repeat(40_000);
    let err = store.put_message(&props).unwrap_err();
    assert!(matches!(err, StoreError::PropertiesTooLarge { .. }));
    assert_eq!(err.put_status(), PutMessageStatus::PropertiesSizeExceeded);
    assert!(matches!(
        store.put_message(&msg("T", -1, b"x", "A")),
        Err(StoreError::QueueIdIllegal { .. })
    ));
    // A record that cannot fit one CommitLog file.
    let mut cfg_small = config(&dir.path().join("b"));
    cfg_small.max_message_size_bytes = 10_000;
    let small = open(cfg_small);
    assert!(matches!(
        small.put_message(&msg("T", 0, &[0u8; 5000], "A")),
        Err(StoreError::MessageTooLarge { .. })
    ));
    assert_eq!(store.max_phy_offset(), before);
    assert_eq!(store.max_offset_in_queue("T", 0), 0);
}

#[tokio::test]
async fn a_failed_fsync_makes_the_store_read_only() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.flush_policy = FlushPolicy::Sync;
    let store = open(cfg);
    let ok = store.put_message(&msg("T", 0, b"a", "A")).unwrap();
    store.wait_flushed(ok.end_phy_offset()).await.unwrap();
    // What the flush path does when fdatasync returns an error.
    store
        .inner
        .poison("commit log fsync failed: EIO".to_owned());
    let reason = store.is_read_only().unwrap();
    assert!(reason.contains("EIO"));
    // Already-durable data stays acknowledged; nothing new is accepted or acknowledged.
    store.wait_flushed(ok.end_phy_offset()).await.unwrap();
    let err = store
        .wait_flushed(ok.end_phy_offset() + 1)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Poisoned { .. }));
    let err = store.put_message(&msg("T", 0, b"b", "A")).unwrap_err();
    assert!(matches!(err, StoreError::Poisoned { .. }));
    assert_eq!(err.put_status(), PutMessageStatus::ServiceNotAvailable);
    assert!(
        store.inner.flush_all().is_err(),
        "a flush is never retried as success"
    );
    // Reads still work.
    let got = store.get_message(&pull("T", 0, 0, 32, &AcceptAll)).unwrap();
    assert_eq!(got.status, GetMessageStatus::Found);
    // Shutdown refuses to mark the store clean.
    assert!(store.shutdown().is_err());
    assert!(dir.path().join(ABORT_FILE_NAME).exists());
}

#[test]
fn second_open_of_the_same_dir_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(config(dir.path()));
    let again = MessageStore::open(config(dir.path()), Arc::new(IoEngine::new_pread()));
    assert!(matches!(again, Err(StoreError::Locked { .. })));
    drop(store);
}

/// A poisoned store's flush thread sleeps whole intervals until shutdown; it used to spin on a
/// flush that was due and would never run (hundreds of thousands of wake-ups a second).
#[test]
fn a_poisoned_store_does_not_spin_its_flush_thread() {
    use std::sync::atomic::Ordering;
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.flush_interval_ms = 20;
    cfg.flush_consume_queue_interval_ms = 20;
    let store = open(cfg);
    store.inner.poison("test: a failed fsync".to_string());
    // Past both intervals: a due flush is what made the loop spin.
    std::thread::sleep(Duration::from_millis(100));
    let before = store.inner.flush_loop_wakeups.load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(200));
    let wakeups = store.inner.flush_loop_wakeups.load(Ordering::Relaxed) - before;
    // One wake-up per 20 ms interval, with room for a slow machine.
    assert!(wakeups <= 40, "{wakeups} flush-loop wake-ups in 200 ms");
    assert!(store.is_read_only().is_some());
}

/// Appends in a burst do not wake the index thread once each: it naps after catching up and
/// looks again by itself; every record is still indexed, and one appended after it went to
/// sleep wakes it.
#[test]
fn appends_in_a_burst_do_not_wake_the_index_thread_once_each() {
    use std::sync::atomic::Ordering;
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.message_index_enable = true;
    let store = open(cfg);
    let appends = 500;
    for k in 0..appends {
        let key = format!("k{k}");
        store
            .put_message(&msg("T", 0, key.as_bytes(), "A"))
            .unwrap();
    }
    let wait_indexed = || {
        let deadline = Instant::now() + Duration::from_secs(10);
        while store.dispatch_behind_bytes() > 0 {
            assert!(Instant::now() < deadline, "index not caught up");
            std::thread::sleep(Duration::from_millis(2));
        }
    };
    wait_indexed();
    let woken = store.inner.index_wakeups.load(Ordering::Relaxed);
    // Each append woke it before; a slow machine may let it fall asleep between a few.
    assert!(
        woken < appends / 2,
        "{woken} wake-ups for {appends} appends"
    );
    // Asleep now (well past its nap): the next append wakes it, well before its idle timeout.
    std::thread::sleep(Duration::from_millis(50));
    let started = Instant::now();
    store.put_message(&msg("T", 0, b"late", "A")).unwrap();
    wait_indexed();
    assert!(store.inner.index_wakeups.load(Ordering::Relaxed) > woken);
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
}

/// ConsumeQueue files keep Java's full size (300,000 units × 20 bytes, named by start) but are
/// sparse: a broker with thousands of queues must not hold 6 MB of disk for each.
#[test]
fn a_new_queue_holds_almost_no_disk_blocks() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = StoreConfig::with_root(dir.path());
    cfg.commit_log_file_size_bytes = 64 * 1024;
    assert_eq!(cfg.consume_queue_file_units, 300_000);
    let store = open(cfg.clone());
    for queue_id in 0..2 {
        for i in 0..3 {
            let r = store.put_message(&msg("T", queue_id, b"x", "A")).unwrap();
            assert_eq!(r.queue_offset, i);
        }
    }
    store.shutdown().unwrap();
    drop(store);
    let store = open(cfg);
    for queue_id in 0..2 {
        let path = dir
            .path()
            .join(format!("consumequeue/T/{queue_id}/00000000000000000000"));
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.len(), 6_000_000, "Java's file size stays");
        let allocated = meta.blocks() * 512;
        assert!(
            allocated < 1 << 20,
            "{allocated} bytes allocated for 3 units"
        );
        assert_eq!(store.max_offset_in_queue("T", queue_id), 3);
        let got = store
            .get_message(&pull("T", queue_id, 0, 32, &AcceptAll))
            .unwrap();
        assert_eq!(got.queue_offsets, vec![0, 1, 2]);
    }
    store.shutdown().unwrap();
}

/// A topic's queue files made when it is created: sparse, skipped for a queue that has a
/// file, taken over by the first appends, empty queues after a restart (clean or not), and
/// gone again with the topic.
#[test]
fn queue_files_made_with_a_new_topic_are_empty_queues_the_appends_take_over() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = StoreConfig::with_root(dir.path());
    cfg.commit_log_file_size_bytes = 64 * 1024;
    let put_offset = |store: &MessageStore, queue_id: i32, body: &[u8]| {
        let put = store.put_message(&msg("T", queue_id, body, "A")).unwrap();
        put.queue_offset
    };
    let store = open(cfg.clone());
    for _ in 0..2 {
        put_offset(&store, 1, b"x");
    }
    assert_eq!(store.create_queue_files("T", 4).unwrap(), 3);
    assert_eq!(store.create_queue_files("T", 4).unwrap(), 0, "made once");
    for queue_id in 0..4 {
        let path = dir
            .path()
            .join(format!("consumequeue/T/{queue_id}/00000000000000000000"));
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.len(), 6_000_000);
        if queue_id != 1 {
            assert_eq!(meta.blocks(), 0, "queue {queue_id} holds no blocks");
        }
    }
    assert_eq!(put_offset(&store, 2, b"y"), 0);
    store.shutdown().unwrap();
    drop(store);
    for abort in [false, true] {
        if abort {
            std::fs::write(dir.path().join(ABORT_FILE_NAME), b"").unwrap();
        }
        let store = open(cfg.clone());
        let max: Vec<i64> = (0..4).map(|q| store.max_offset_in_queue("T", q)).collect();
        assert_eq!(max, vec![0, 2, 1, 0], "abort={abort}");
        store.shutdown().unwrap();
    }
    let store = open(cfg.clone());
    assert_eq!(put_offset(&store, 3, b"z"), 0);
    let got = store.get_message(&pull("T", 3, 0, 32, &AcceptAll)).unwrap();
    assert_eq!(format::decode_record(&got.buffer).unwrap().body, b"z");
    store.delete_topic("T").unwrap();
    assert_eq!(store.create_queue_files("T", 2).unwrap(), 2, "made again");
    store.shutdown().unwrap();
    drop(store);
    let store = open(cfg.clone());
    assert_eq!(store.max_offset_in_queue("T", 0), 0);
    assert_eq!(put_offset(&store, 0, b"w"), 0);
    store.shutdown().unwrap();
    drop(store);
    let mut slave = cfg;
    slave.broker_role_slave = true;
    let store = open(slave);
    assert_eq!(
        store.create_queue_files("S", 2).unwrap(),
        0,
        "a slave makes none"
    );
    assert!(!dir.path().join("consumequeue/S").exists());
}

/// Appends until the CommitLog rolls into its second 4 KiB file; returns the queue offsets.
pub(super) fn put_until_second_file(store: &MessageStore) -> Result<Vec<i64>, StoreError> {
    let mut offsets = Vec::new();
    while store.max_phy_offset() <= 4096 {
        offsets.push(
            store
                .put_message(&msg("T", 0, &[7u8; 300], "A"))?
                .queue_offset,
        );
    }
    Ok(offsets)
}

/// What a failed fallocate (ENOSPC) left under the next CommitLog file's name: an empty or a
/// short file. The next append must take it over, not fail with EEXIST for ever.
#[test]
fn an_append_takes_over_a_half_made_next_commit_log_file() {
    for len in [0usize, 100] {
        let dir = tempfile::tempdir().unwrap();
        let store = open(config(dir.path()));
        store.put_message(&msg("T", 0, b"first", "A")).unwrap();
        let next = dir.path().join("commitlog/00000000000000004096");
        std::fs::write(&next, vec![0u8; len]).unwrap();
        let offsets = put_until_second_file(&store).unwrap();
        assert_eq!(std::fs::metadata(&next).unwrap().len(), 4096);
        let last = *offsets.last().unwrap();
        let got = store
            .get_message(&pull("T", 0, last, 1, &AcceptAll))
            .unwrap();
        assert_eq!(got.queue_offsets, vec![last]);
        assert!(
            store.max_phy_offset() > 4096,
            "the record is in the taken-over file"
        );
        store.shutdown().unwrap();
    }
}

/// A failed segment creation fails that request only: nothing was written, so the store is
/// not poisoned, and the next append tries again. (Root ignores directory permissions, so a
/// directory under the segment's name makes the creation fail.)
#[test]
fn a_failed_segment_creation_does_not_poison_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(config(dir.path()));
    store.put_message(&msg("T", 0, b"first", "A")).unwrap();
    let next = dir.path().join("commitlog/00000000000000004096");
    std::fs::create_dir(&next).unwrap();
    let err = put_until_second_file(&store).unwrap_err();
    assert!(matches!(err, StoreError::Io { .. }), "{err:?}");
    assert_eq!(store.is_read_only(), None);
    let failed_again = store.put_message(&msg("T", 0, b"again", "A"));
    assert!(failed_again.is_err());
    std::fs::remove_dir(&next).unwrap();
    let r = store.put_message(&msg("T", 0, b"after", "A")).unwrap();
    assert!(r.end_phy_offset() > 4096);
    assert_eq!(std::fs::metadata(&next).unwrap().len(), 4096);
    let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("commitlog"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.len() != 20)
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let got = store
        .get_message(&pull("T", 0, r.queue_offset, 1, &AcceptAll))
        .unwrap();
    assert_eq!(got.status, GetMessageStatus::Found);
    store.shutdown().unwrap();
}

/// The next ConsumeQueue file cannot be created: the append fails before its record is
/// written, and the store stays writable.
#[test]
fn a_failed_consume_queue_file_creation_fails_the_append_only() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(config(dir.path()));
    for i in 0..8 {
        assert_eq!(
            store
                .put_message(&msg("T", 0, b"m", "A"))
                .unwrap()
                .queue_offset,
            i
        );
    }
    let next = dir.path().join("consumequeue/T/0/00000000000000000160");
    std::fs::create_dir(&next).unwrap();
    let end = store.max_phy_offset();
    let err = store.put_message(&msg("T", 0, b"m", "A")).unwrap_err();
    assert!(matches!(err, StoreError::Io { .. }), "{err:?}");
    assert_eq!(store.is_read_only(), None);
    assert_eq!(store.max_phy_offset(), end, "no record without its unit");
    std::fs::remove_dir(&next).unwrap();
    assert_eq!(
        store
            .put_message(&msg("T", 0, b"m", "A"))
            .unwrap()
            .queue_offset,
        8
    );
    let got = store.get_message(&pull("T", 0, 8, 1, &AcceptAll)).unwrap();
    assert_eq!(got.queue_offsets, vec![8]);
    store.shutdown().unwrap();
}

#[test]
fn deleting_a_topic_drops_its_queues_and_keeps_the_commit_log() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(config(dir.path()));
    for i in 0..3 {
        store.put_message(&msg("Gone", i % 2, b"x", "a")).unwrap();
        store.put_message(&msg("Kept", 0, b"y", "a")).unwrap();
    }
    let stamp = store.message_store_timestamp("Gone", 0, 0).unwrap();
    assert!(stamp.is_some_and(|t| t > 0));
    assert_eq!(store.message_store_timestamp("Gone", 0, 2).unwrap(), None);
    let max_phy = store.max_phy_offset();
    let cq_dir = dir.path().join("consumequeue").join("Gone");
    assert!(cq_dir.is_dir());

    assert_eq!(store.delete_topic("Gone").unwrap(), 2);
    assert!(!cq_dir.exists());
    assert_eq!(store.max_offset_in_queue("Gone", 0), 0);
    assert_eq!(store.message_store_timestamp("Gone", 0, 0).unwrap(), None);
    assert_eq!(
        store.max_phy_offset(),
        max_phy,
        "the CommitLog keeps its records"
    );
    assert_eq!(store.max_offset_in_queue("Kept", 0), 3);
    assert_eq!(store.delete_topic("Gone").unwrap(), 0);
    // A new send starts the queue again from 0.
    let put = store.put_message(&msg("Gone", 0, b"z", "a")).unwrap();
    assert_eq!(put.queue_offset, 0);
}

#[test]
fn a_deleted_topic_stays_deleted_across_restarts_and_may_be_created_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(config(dir.path()));
    for _ in 0..3 {
        store.put_message(&msg("Gone", 0, b"x", "a")).unwrap();
        store.put_message(&msg("Kept", 0, b"y", "a")).unwrap();
    }
    store.delete_topic("Gone").unwrap();
    store.put_message(&msg("Again", 0, b"z", "a")).unwrap();
    store.shutdown().unwrap();
    drop(store);
    for abort in [false, true] {
        if abort {
            // A crash: recovery scans the whole CommitLog again.
            std::fs::write(dir.path().join(ABORT_FILE_NAME), b"").unwrap();
        }
        let store = open(config(dir.path()));
        assert!(!store.recovery_report().full_rebuild, "abort={abort}");
        assert_eq!(store.max_offset_in_queue("Gone", 0), 0, "abort={abort}");
        assert!(
            !dir.path().join("consumequeue/Gone").exists(),
            "abort={abort}"
        );
        assert_eq!(store.max_offset_in_queue("Kept", 0), 3);
        assert_eq!(store.max_offset_in_queue("Again", 0), 1);
        store.shutdown().unwrap();
    }
    // Created again after its deletion: the new queue survives a restart.
    let store = open(config(dir.path()));
    store.put_message(&msg("Gone", 0, b"new", "a")).unwrap();
    store.shutdown().unwrap();
    drop(store);
    std::fs::write(dir.path().join(ABORT_FILE_NAME), b"").unwrap();
    let store = open(config(dir.path()));
    assert_eq!(store.max_offset_in_queue("Gone", 0), 1);
    let got = store
        .get_message(&pull("Gone", 0, 0, 32, &AcceptAll))
        .unwrap();
    assert_eq!(got.message_count, 1);
    assert_eq!(format::decode_record(&got.buffer).unwrap().body, b"new");
}

#[test]
fn queues_left_by_a_stop_between_tombstone_and_file_removal_are_dropped_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(config(dir.path()));
    store.put_message(&msg("Gone", 0, b"x", "a")).unwrap();
    let end = store.max_phy_offset();
    store.shutdown().unwrap();
    drop(store);
    // As if the process stopped right after writing the tombstone.
    std::fs::write(
        dir.path().join(super::DELETED_TOPICS_FILE_NAME),
        format!(r#"{{"Gone":{end}}}"#),
    )
    .unwrap();
    let store = open(config(dir.path()));
    assert_eq!(store.max_offset_in_queue("Gone", 0), 0);
    assert!(!dir.path().join("consumequeue/Gone").exists());
}

/// Rejects (layer two) every record whose bytes hold `REJECT_MARK`.
struct TagAndMark(i64);
const REJECT_MARK: &[u8] = b"#reject#";
impl MessageFilter for TagAndMark {
    fn is_matched_by_consume_queue(&self, tags_code: i64) -> bool {
        tags_code == self.0
    }
    fn is_matched_by_commit_log(&self, record: &[u8]) -> bool {
        !record.windows(REJECT_MARK.len()).any(|w| w == REJECT_MARK)
    }
}

/// One queue record as the oracle sees it.
struct OracleRecord {
    size: usize,
    tag_a: bool,
    rejected: bool,
}

/// Java's `getMessage` loop, unit by unit, over the whole scan budget at once: which queue
/// offsets a pull finds and its nextBeginOffset.
fn oracle_pull(
    cfg: &StoreConfig,
    records: &[OracleRecord],
    offset: usize,
    max_nums: usize,
) -> (Vec<i64>, i64) {
    let budget = (cfg.max_filter_message_size_bytes.max(max_nums * 20)).div_ceil(20);
    let units_per_file = cfg.consume_queue_file_units as usize;
    let end = (offset + budget)
        .min(offset - offset % units_per_file + units_per_file)
        .min(records.len());
    let (bytes_max, count_max) = (
        cfg.max_transfer_bytes_on_message_in_memory,
        cfg.max_transfer_count_on_message_in_memory,
    );
    let (mut found, mut bytes, mut next) = (Vec::new(), 0usize, offset as i64);
    for (i, r) in records.iter().enumerate().take(end).skip(offset) {
        let count = found.len();
        let full = bytes >= PULL_MSG_SIZE_MAX_BYTES
            || (bytes > 0
                && count > 0
                && (count + 1 > max_nums
                    || bytes + r.size > PULL_MSG_SIZE_MAX_BYTES
                    || bytes + r.size > bytes_max
                    || count + 1 > count_max));
        if full {
            break;
        }
        next = i as i64 + 1;
        if r.tag_a && !r.rejected {
            found.push(i as i64);
            bytes += r.size;
        }
    }
    (found, next)
}

/// Stores 2,600 records in T:0: runs of tag A (a quarter of them rejected by the record
/// filter) between runs of tag B up to 1,200 long; returns them as the oracle sees them.
fn store_oracle_records(store: &MessageStore) -> Vec<OracleRecord> {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next_rand = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut records = Vec::new();
    let mut i = 0;
    while i < 2600 {
        // Runs of A (some rejected by the record filter) between runs of B up to 1,200 long.
        let (run, tag_a_run) = if next_rand(2) == 0 {
            (1 + next_rand(60), true)
        } else {
            (1 + next_rand(1200), false)
        };
        for _ in 0..run {
            let rejected = tag_a_run && next_rand(4) == 0;
            let mut body = vec![b'b'; 20 + next_rand(400) as usize];
            if rejected {
                body[..REJECT_MARK.len()].copy_from_slice(REJECT_MARK);
            }
            let tags = if tag_a_run { "A" } else { "B" };
            store.put_message(&msg("T", 0, &body, tags)).unwrap();
            let one = store.get_message(&pull("T", 0, i, 1, &AcceptAll)).unwrap();
            records.push(OracleRecord {
                size: one.message_locations[0].1 as usize,
                tag_a: tag_a_run,
                rejected,
            });
            i += 1;
        }
    }
    records
}

/// A pull reads the ConsumeQueue units of a full batch first and the rest of its scan budget
/// only when it runs past them; found records, byte and count limits and nextBeginOffset
/// stay exactly those of Java's one loop over the whole budget, for tag filters that skip
/// long runs (past the first read, across ConsumeQueue files) and record filters that reject
/// candidates of full and of unfilled batches.
#[test]
fn a_pull_that_runs_past_its_first_units_finds_what_one_loop_over_the_budget_finds() {
    // The three ways of reading records: from the newest records kept in memory and from the
    // CommitLog's mappings (rejected records moved over in the buffer in both), and through
    // the io engine.
    let window = crate::store::config::RECENT_RECORDS_DEFAULT_BYTES;
    for (read_mapped, recent_records_bytes) in [(false, window), (true, 0), (false, 0)] {
        pulls_match_the_oracle(read_mapped, recent_records_bytes);
    }
}

fn pulls_match_the_oracle(read_mapped: bool, recent_records_bytes: u64) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.read_mapped = read_mapped;
    cfg.recent_records_bytes = recent_records_bytes;
    cfg.commit_log_file_size_bytes = 256 * 1024;
    cfg.consume_queue_file_units = 1000;
    // Equal limits in memory and on disk: the oracle need not know which applies.
    cfg.max_transfer_bytes_on_message_in_memory = 6 * 1024;
    cfg.max_transfer_bytes_on_message_in_disk = 6 * 1024;
    cfg.max_transfer_count_on_message_in_memory = 32;
    cfg.max_transfer_count_on_message_in_disk = 32;
    let store = open(cfg.clone());
    let tag_a = i64::from(format::java_string_hash_code("A"));
    let records = store_oracle_records(&store);
    // Mapped reads are only for records this far behind the CommitLog's end.
    pad_commit_log(&store, MAPPED_READ_LAG_MIN_BYTES);
    let filter = TagAndMark(tag_a);
    let mut checked = 0;
    for offset in (0..records.len()).step_by(7) {
        for max_nums in [1, 4, 32] {
            let got = store
                .get_message(&pull("T", 0, offset as i64, max_nums, &filter))
                .unwrap();
            let (found, next) = oracle_pull(&cfg, &records, offset, max_nums as usize);
            assert_eq!(
                got.queue_offsets, found,
                "offset {offset}, maxMsgNums {max_nums}, mapped {read_mapped}, \
                 recent {recent_records_bytes}"
            );
            for (&(start, len), &o) in got.message_ranges.iter().zip(&found) {
                let record = format::decode_record(&got.buffer[start..start + len]).unwrap();
                assert_eq!(record.queue_offset, o, "record bytes of queue offset {o}");
            }
            assert_eq!(
                got.next_begin_offset, next,
                "offset {offset}, maxMsgNums {max_nums}"
            );
            let expected_bytes: usize = found.iter().map(|&o| records[o as usize].size).sum();
            assert_eq!(got.buffer_total_size, expected_bytes);
            let status = if found.is_empty() {
                GetMessageStatus::NoMatchedMessage
            } else {
                GetMessageStatus::Found
            };
            assert_eq!(got.status, status, "offset {offset}, maxMsgNums {max_nums}");
            checked += usize::from(next - offset as i64 > i64::from(max_nums) + 1);
        }
    }
    assert!(
        checked > 100,
        "many pulls ran past their first units: {checked}"
    );
    let files = store.inner.commit_log.segments().snapshot();
    let mapped_files = files.iter().filter(|f| f.mapping_in_use() == Some(true));
    assert_eq!(
        mapped_files.count() > 0,
        read_mapped,
        "records read from mappings"
    );
}

/// Records back to back in the CommitLog are read as one span and sliced apart: through the
/// io_uring engine with registered buffers smaller than a span (a span then takes several
/// buffers) and than a whole pull (a span bigger than the registered set), with another
/// queue's records interleaved in runs, every pull returns exactly its queue's records, in
/// order, whole.
#[test]
fn records_read_as_spans_come_back_whole_and_in_order() {
    use crate::store::io::{IoConfig, IoMode};
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.commit_log_file_size_bytes = 64 * 1024;
    cfg.consume_queue_file_units = 100;
    cfg.read_mapped = false;
    // Through the engine: not from the newest records in memory.
    cfg.recent_records_bytes = 0;
    let io = IoEngine::new(IoConfig {
        mode: IoMode::Uring,
        fixed_buffer_count: 2,
        fixed_buffer_size_bytes: 4096,
        ring_entries: 2,
        ..IoConfig::default()
    })
    .expect("io_uring must work on the test host");
    let store = MessageStore::open(cfg, Arc::new(io)).unwrap();
    let mut bodies: [Vec<Vec<u8>>; 2] = [Vec::new(), Vec::new()];
    for i in 0..400usize {
        // Runs of 1 to 40 records of queue 0, then one or two of queue 1.
        let q = usize::from(i % 41 >= 39 || i % 7 == 6 && i % 3 == 0);
        let body: Vec<u8> = (0..100 + (i * 37) % 900).map(|b| (b + i) as u8).collect();
        store.put_message(&msg("T", q as i32, &body, "A")).unwrap();
        bodies[q].push(body);
    }
    for (q, expected) in bodies.iter().enumerate() {
        for max_nums in [1, 7, 32] {
            let mut got = Vec::new();
            let mut offset = 0;
            while offset < expected.len() as i64 {
                let result = store
                    .get_message(&pull("T", q as i32, offset, max_nums, &AcceptAll))
                    .unwrap();
                assert_eq!(
                    result.status,
                    GetMessageStatus::Found,
                    "queue {q} at {offset}"
                );
                for &(start, len) in &result.message_ranges {
                    let record = format::decode_record(&result.buffer[start..start + len]).unwrap();
                    got.push(record.body.to_vec());
                }
                offset = result.next_begin_offset;
            }
            assert_eq!(&got, expected, "queue {q}, maxMsgNums {max_nums}");
        }
    }
}

/// Java's least-pages rule for the ConsumeQueue flush: a periodic flush that leaves a queue's
/// few new units unsynced writes no checkpoint, so after a crash that lost those units (and
/// the files made for them) recovery rebuilds them from the CommitLog: every message is
/// found again, though the CommitLog spans more files than recovery's usual tail.
#[test]
fn units_a_least_pages_flush_skipped_are_rebuilt_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    // No background flush: the test runs each one.
    cfg.flush_interval_ms = 3_600_000;
    cfg.flush_consume_queue_interval_ms = 3_600_000;
    assert_eq!(cfg.flush_consume_queue_least_pages, 2, "Java's default");
    let checkpoint = || {
        let bytes = std::fs::read(dir.path().join("checkpoint")).unwrap();
        format::decode_checkpoint(&bytes).unwrap()
    };
    let store = open(cfg.clone());
    for i in 0..3 {
        store
            .put_message(&msg("T", 0, format!("first {i}").as_bytes(), "a"))
            .unwrap();
    }
    store.inner.flush_all().unwrap();
    let thorough = checkpoint();
    for i in 0..120 {
        let body = format!("later {i} {}", "x".repeat(100));
        store
            .put_message(&msg("T", 0, body.as_bytes(), "a"))
            .unwrap();
    }
    let segments = store.inner.commit_log.segments().snapshot().len();
    assert!(segments > 4, "{segments} CommitLog files");
    store.inner.flush_commit_log().unwrap();
    store.inner.flush_consume_queues_least_pages().unwrap();
    assert_eq!(
        checkpoint(),
        thorough,
        "no checkpoint for a least-pages flush"
    );
    drop(store);

    // The crash lost what was never fsynced of the queue: the units after the first three,
    // and the files made for them.
    let queue_dir = dir.path().join("consumequeue/T/0");
    for entry in std::fs::read_dir(&queue_dir).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap() != "00000000000000000000" {
            std::fs::remove_file(path).unwrap();
        }
    }
    let first = queue_dir.join("00000000000000000000");
    let mut units = std::fs::read(&first).unwrap();
    units[3 * 20..].fill(0);
    std::fs::write(&first, units).unwrap();

    let store = open(cfg);
    assert_eq!(store.max_offset_in_queue("T", 0), 123);
    let mut found = 0;
    while found < 123 {
        let got = store
            .get_message(&pull("T", 0, found, 32, &AcceptAll))
            .unwrap();
        assert_eq!(got.status, GetMessageStatus::Found, "at offset {found}");
        found = got.next_begin_offset;
    }
    store.shutdown().unwrap();
}

/// Records at the CommitLog's end are read through the io engine, records far behind it from
/// the mapping, with the same bytes. A CommitLog file cut shorter under its mapping (what a
/// disk read error looks like to a mapped read: SIGBUS) fails the pull with the io engine's error instead of killing the
/// process, and the next pulls go on failing the same way (the mapping is not read again).
#[test]
fn a_commit_log_file_cut_under_its_mapping_fails_the_pull_not_the_process() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.commit_log_file_size_bytes = 256 * 1024;
    assert!(cfg.read_mapped, "mapped reads are the default");
    // What this test reads must come from the file, not from the newest records in memory.
    cfg.recent_records_bytes = 0;
    let store = open(cfg);
    for i in 0..3u8 {
        store.put_message(&msg("T", 0, &[i; 100], "A")).unwrap();
    }
    let first_file = store.inner.commit_log.segments().find(0).unwrap();
    let at_the_end = store.get_message(&pull("T", 0, 0, 32, &AcceptAll)).unwrap();
    assert_eq!(at_the_end.queue_offsets, vec![0, 1, 2]);
    assert_eq!(
        first_file.mapping_in_use(),
        None,
        "records at the end: io engine"
    );
    pad_commit_log(&store, MAPPED_READ_LAG_MIN_BYTES);
    let behind = store.get_message(&pull("T", 0, 0, 32, &AcceptAll)).unwrap();
    assert_eq!(behind.buffer, at_the_end.buffer);
    assert_eq!(
        first_file.mapping_in_use(),
        Some(true),
        "read from the mapping"
    );
    let file = dir
        .path()
        .join("commitlog")
        .join(crate::store::segment::segment_file_name(0));
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(0)
        .unwrap();
    for _ in 0..2 {
        let err = store
            .get_message(&pull("T", 0, 0, 32, &AcceptAll))
            .expect_err("the records are gone from the file");
        assert!(matches!(err, StoreError::Io { .. }), "{err:?}");
        assert_eq!(first_file.mapping_in_use(), Some(false), "poisoned");
    }
}

/// Appends messages of another topic until at least `bytes` follow what is stored now, so the
/// records before lie far enough behind the CommitLog's end for mapped reads.
fn pad_commit_log(store: &MessageStore, bytes: i64) {
    let until = store.max_phy_offset() + bytes;
    while store.max_phy_offset() < until {
        store
            .put_message(&msg("Pad", 0, &[0u8; 3000], "P"))
            .unwrap();
    }
}

/// A pull right after the append copies its records from the newest records kept in memory,
/// not from the file: with the file's copy of them overwritten, the pull still returns what
/// was appended, and with the window off the same pull reads the file and finds no record.
#[test]
fn a_pull_right_after_the_append_copies_its_records_from_memory() {
    for recent_records_bytes in [crate::store::config::RECENT_RECORDS_DEFAULT_BYTES, 0] {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = config(dir.path());
        cfg.commit_log_file_size_bytes = 256 * 1024;
        cfg.message_index_enable = false;
        cfg.recent_records_bytes = recent_records_bytes;
        let store = open(cfg);
        for i in 0..3u8 {
            store.put_message(&msg("T", 0, &[i; 100], "A")).unwrap();
        }
        let file = dir
            .path()
            .join("commitlog")
            .join(crate::store::segment::segment_file_name(0));
        let written = usize::try_from(store.max_phy_offset()).unwrap();
        let mut bytes = std::fs::read(&file).unwrap();
        bytes[..written].fill(0xEE);
        std::fs::write(&file, &bytes).unwrap();
        let got = store.get_message(&pull("T", 0, 0, 32, &AcceptAll));
        if recent_records_bytes > 0 {
            let got = got.expect("served from memory");
            assert_eq!(got.queue_offsets, vec![0, 1, 2]);
            for (i, &(start, len)) in got.message_ranges.iter().enumerate() {
                let record = format::decode_record(&got.buffer[start..start + len]).unwrap();
                assert_eq!(record.body, &[i as u8; 100][..]);
            }
        } else {
            assert!(
                got.is_err(),
                "read from the overwritten file: {:?}",
                got.map(|g| g.status)
            );
        }
    }
}
