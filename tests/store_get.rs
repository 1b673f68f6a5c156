//! Pull behaviour through the public API: batch-limit regimes, suggestPullingFromSlave, batch
//! appends, offsets by time, look-up by offset, arrival events, retention, flush.

mod store_common;

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use ringmq::store::format::{self, decode_record};
use ringmq::store::{
    AcceptAll, ArrivalListener, BatchToStore, BoundaryType, FlushPolicy, GetMessageStatus,
    StoreError,
};
use store_common::{msg, open, pull, small_config};

fn big_config(dir: &std::path::Path) -> ringmq::store::StoreConfig {
    let mut cfg = small_config(dir);
    cfg.commit_log_file_size_bytes = 4 * 1024 * 1024;
    cfg.consume_queue_file_units = 1000;
    cfg
}

#[test]
fn batch_limits_in_memory_and_on_disk() {
    // (total RAM, body size, expected count): RAM large => in-memory limits (32 msgs /
    // 256 KiB); RAM 0 => every message counts as on disk (8 msgs / 64 KiB).
    let ram_large = 64 * 1024 * 1024 * 1024u64;
    let table = [
        ("memory, count limit", ram_large, 100usize, 32usize),
        ("disk, count limit", 0, 100, 8),
        // ~10.1 KiB records: 256 KiB fits 25, 64 KiB fits 6.
        ("memory, byte limit", ram_large, 10 * 1024, 25),
        ("disk, byte limit", 0, 10 * 1024, 6),
    ];
    for (name, ram, body, expected) in table {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = big_config(dir.path());
        cfg.total_physical_memory_bytes = ram;
        let store = open(cfg);
        for _ in 0..60 {
            store
                .put_message(&msg("T", 0, &vec![7u8; body], "A"))
                .unwrap();
        }
        let got = store.get_message(&pull("T", 0, 0, 64, &AcceptAll)).unwrap();
        assert_eq!(got.status, GetMessageStatus::Found, "{name}");
        assert_eq!(got.message_count, expected, "{name}");
        assert_eq!(got.next_begin_offset, expected as i64, "{name}");
        assert_eq!(got.buffer_total_size, got.buffer.len(), "{name}");
        // The client's maxMsgNums caps both regimes.
        let got = store.get_message(&pull("T", 0, 0, 3, &AcceptAll)).unwrap();
        assert_eq!(got.message_count, 3, "{name}");
    }
}

#[test]
fn suggest_pulling_from_slave_when_far_behind() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = big_config(dir.path());
    // 40% of 10 KiB = 4 KiB of "memory".
    cfg.total_physical_memory_bytes = 10 * 1024;
    let store = open(cfg);
    for _ in 0..100 {
        store.put_message(&msg("T", 0, &[1u8; 100], "A")).unwrap();
    }
    let far = store.get_message(&pull("T", 0, 0, 1, &AcceptAll)).unwrap();
    assert!(far.suggest_pulling_from_slave);
    let near = store.get_message(&pull("T", 0, 99, 1, &AcceptAll)).unwrap();
    assert!(!near.suggest_pulling_from_slave);
}

#[test]
fn batch_put_gets_consecutive_offsets_and_ids() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(small_config(dir.path()));
    store.put_message(&msg("B", 1, b"first", "X")).unwrap();
    let mut body = Vec::new();
    for i in 0..5 {
        let props = format::encode_properties([("TAGS", "Y"), ("UNIQ_KEY", &format!("k{i}"))]);
        format::encode_batch_entry(i, format!("m{i}").as_bytes(), props.as_bytes(), &mut body);
    }
    let batch = BatchToStore {
        topic: "B".to_owned(),
        queue_id: 1,
        sys_flag: 0,
        born_timestamp_ms: 9,
        born_host: "127.0.0.1:1".parse().unwrap(),
        reconsume_times: 0,
        encoded_messages: Bytes::from(body),
    };
    let put = store.put_messages(&batch).unwrap();
    assert_eq!(put.message_count, 5);
    assert_eq!(put.queue_offset, 1);
    assert_eq!(put.msg_ids.len(), 5);
    let got = store.get_message(&pull("B", 1, 1, 32, &AcceptAll)).unwrap();
    assert_eq!(got.queue_offsets, vec![1, 2, 3, 4, 5]);
    for k in 0..5 {
        let rec = decode_record(got.message(k)).unwrap();
        assert_eq!(rec.body, format!("m{k}").as_bytes());
        assert_eq!(rec.flag, k as i32);
        let (host, phy) = format::decode_offset_msg_id(&put.msg_ids[k]).unwrap();
        assert_eq!((host, phy), (store.config().store_host, rec.phy_offset));
    }
    // Batches to retry topics and malformed bodies are refused without writing.
    let before = store.max_phy_offset();
    let retry = BatchToStore {
        topic: "%RETRY%g".to_owned(),
        ..batch.clone()
    };
    assert!(matches!(
        store.put_messages(&retry),
        Err(StoreError::MessageIllegal { .. })
    ));
    let torn = BatchToStore {
        encoded_messages: batch
            .encoded_messages
            .slice(..batch.encoded_messages.len() - 1),
        ..batch
    };
    assert!(matches!(
        store.put_messages(&torn),
        Err(StoreError::BatchMalformed { .. })
    ));
    assert_eq!(store.max_phy_offset(), before);
}

#[test]
fn offsets_by_time_and_lookup_by_offset() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(small_config(dir.path()));
    let mut times = Vec::new();
    let mut offsets = Vec::new();
    for i in 0..30 {
        let r = store.put_message(&msg("T", 0, &[i as u8], "A")).unwrap();
        times.push(r.store_timestamp_ms);
        offsets.push(r.wrote_phy_offset);
        if i % 10 == 9 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
    let t = times[15];
    let lower = store
        .offset_by_timestamp("T", 0, t, BoundaryType::Lower)
        .unwrap();
    let upper = store
        .offset_by_timestamp("T", 0, t, BoundaryType::Upper)
        .unwrap();
    assert_eq!(lower, times.iter().position(|x| *x == t).unwrap() as i64);
    assert_eq!(upper, times.iter().rposition(|x| *x == t).unwrap() as i64);
    assert_eq!(
        store
            .offset_by_timestamp("T", 0, 0, BoundaryType::Lower)
            .unwrap(),
        0
    );
    assert_eq!(
        store
            .offset_by_timestamp("T", 0, i64::MAX, BoundaryType::Lower)
            .unwrap(),
        30
    );
    assert_eq!(
        store
            .offset_by_timestamp("T", 0, i64::MAX, BoundaryType::Upper)
            .unwrap(),
        29
    );
    assert_eq!(
        store.earliest_message_store_time("T", 0).unwrap(),
        Some(times[0])
    );
    assert_eq!(store.earliest_message_store_time("None", 0).unwrap(), None);

    let rec = store.look_message_by_offset(offsets[7]).unwrap().unwrap();
    assert_eq!(decode_record(&rec).unwrap().body, &[7u8]);
    assert!(store
        .look_message_by_offset(offsets[7] + 1)
        .unwrap()
        .is_none());
    assert!(store
        .look_message_by_offset(store.max_phy_offset())
        .unwrap()
        .is_none());
}

#[derive(Default)]
struct Recorder(Mutex<Vec<(String, i32, i64, i64)>>);

impl ArrivalListener for Recorder {
    fn arriving(
        &self,
        topic: &str,
        queue_id: i32,
        next: i64,
        tags_code: i64,
        _ts: i64,
        props: &[u8],
    ) {
        assert!(format::property_value(props, b"TAGS").is_some());
        self.0
            .lock()
            .unwrap()
            .push((topic.to_owned(), queue_id, next, tags_code));
    }
}

#[test]
fn arrival_listener_sees_every_unit() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(small_config(dir.path()));
    let recorder = Arc::new(Recorder::default());
    store.set_arrival_listener(recorder.clone());
    store.put_message(&msg("T", 2, b"a", "TagA")).unwrap();
    store.put_message(&msg("T", 2, b"b", "TagA")).unwrap();
    let events = recorder.0.lock().unwrap().clone();
    let code = i64::from(format::java_string_hash_code("TagA"));
    assert_eq!(
        events,
        vec![("T".to_owned(), 2, 1, code), ("T".to_owned(), 2, 2, code)]
    );
}

#[test]
fn retention_deletes_old_files_and_moves_min_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = small_config(dir.path());
    cfg.commit_log_file_size_bytes = 8 * 1024;
    cfg.consume_queue_file_units = 16;
    let store = open(cfg);
    for i in 0..200 {
        store
            .put_message(&msg("T", 0, &[i as u8; 200], "A"))
            .unwrap();
    }
    let files_before = std::fs::read_dir(dir.path().join("commitlog"))
        .unwrap()
        .count();
    assert!(files_before > 3);
    // Nothing is older than 72 h yet.
    let now = ringmq_now_ms();
    assert_eq!(store.delete_expired_files(now).unwrap(), 0);
    let later = now + 73 * 3_600_000;
    let deleted = store.delete_expired_files(later).unwrap();
    assert_eq!(deleted, files_before - 1, "all but the file being written");
    let min_phy = store.min_phy_offset();
    assert!(min_phy > 0);
    let min = store.min_offset_in_queue("T", 0);
    assert!(min > 0);
    let got = store.get_message(&pull("T", 0, 0, 32, &AcceptAll)).unwrap();
    assert_eq!(
        (got.status, got.next_begin_offset),
        (GetMessageStatus::OffsetTooSmall, min)
    );
    let got = store
        .get_message(&pull("T", 0, min, 32, &AcceptAll))
        .unwrap();
    assert_eq!(got.status, GetMessageStatus::Found);
    assert!(got.message_locations[0].0 >= min_phy);
    // The message before min pointed at a deleted file.
    let cq_files = std::fs::read_dir(dir.path().join("consumequeue/T/0"))
        .unwrap()
        .count();
    assert!(
        cq_files < 200 / 16 + 1,
        "old ConsumeQueue files were deleted"
    );
    store.shutdown().unwrap();
    drop(store);
    // Reopening keeps the moved minimums.
    let mut cfg = small_config(dir.path());
    cfg.commit_log_file_size_bytes = 8 * 1024;
    cfg.consume_queue_file_units = 16;
    let store = open(cfg);
    assert_eq!(store.min_offset_in_queue("T", 0), min);
    assert_eq!(store.max_offset_in_queue("T", 0), 200);
}

fn ringmq_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[tokio::test]
async fn sync_flush_group_commit_acknowledges_after_fsync() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = small_config(dir.path());
    cfg.flush_policy = FlushPolicy::Sync;
    let store = open(cfg);
    let mut last = 0;
    for i in 0..50 {
        let r = store
            .put_message(&msg("T", 0, &[i as u8; 32], "A"))
            .unwrap();
        last = r.end_phy_offset();
    }
    store.wait_flushed(last).await.unwrap();
    assert!(store.flushed_phy_offset() >= last);
    // Concurrent appenders share fsyncs.
    let mut tasks = Vec::new();
    for t in 0..8 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..20 {
                let r = store
                    .put_message(&msg("T", t, &[i as u8; 16], "A"))
                    .unwrap();
                store.wait_flushed(r.end_phy_offset()).await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert!(store.is_read_only().is_none());
    store.shutdown().unwrap();
    assert!(!dir.path().join("abort").exists());
}

#[test]
fn pulls_racing_appends_never_skip_a_message() {
    // Regression: the CommitLog head was read before the ConsumeQueue units, so a unit written
    // in between looked like a removed message and was skipped while nextBeginOffset moved on.
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(open(big_config(dir.path())));
    let total = 20_000i64;
    let writer = {
        let store = store.clone();
        std::thread::spawn(move || {
            for _ in 0..total {
                store.put_message(&msg("Race", 0, b"payload", "A")).unwrap();
            }
        })
    };
    let mut next = 0i64;
    let mut seen = 0i64;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while seen < total {
        assert!(std::time::Instant::now() < deadline, "stalled at {next}");
        let got = store
            .get_message(&pull("Race", 0, next, 32, &AcceptAll))
            .unwrap();
        assert_ne!(
            got.status,
            GetMessageStatus::MessageWasRemoving,
            "at offset {next}"
        );
        for (i, queue_offset) in got.queue_offsets.iter().enumerate() {
            assert_eq!(*queue_offset, next + i as i64, "no gap");
        }
        if got.status == GetMessageStatus::Found {
            seen += got.message_count as i64;
            next = got.next_begin_offset;
            assert_eq!(next, seen);
        }
    }
    writer.join().unwrap();
}
