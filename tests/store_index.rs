//! The message index (Java `IndexFile`): files built by the store are compared byte for byte
//! with files this test builds from the layout in docs/FORMAT.md (its own decoder, its own
//! String.hashCode, no store code), and the index survives crashes, rebuilds and retention.
//! The index is built on a thread behind the writer: tests wait (bounded) for it to catch up.

mod store_common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ringmq::store::format;
use ringmq::store::{MessageStore, MessageToStore, StoreConfig};
use store_common::{msg, open, small_config};

const SLOTS: usize = 16;
const ENTRIES: usize = 8;

fn config(dir: &Path) -> StoreConfig {
    let mut cfg = small_config(dir);
    cfg.max_hash_slot_num = SLOTS as u32;
    cfg.max_index_num = ENTRIES as u32;
    cfg
}

fn keyed(topic: &str, keys: &str, uniq: &str) -> MessageToStore {
    let mut m = msg(topic, 0, b"body", "TagA");
    let mut pairs = vec![("TAGS", "TagA")];
    if !keys.is_empty() {
        pairs.push(("KEYS", keys));
    }
    if !uniq.is_empty() {
        pairs.push(("UNIQ_KEY", uniq));
    }
    m.properties = format::encode_properties(pairs);
    m
}

/// Waits, bounded, until the index thread has indexed every record written so far.
fn wait_indexed(store: &MessageStore) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while store.dispatch_behind_bytes() > 0 {
        assert!(Instant::now() < deadline, "index still behind after 10 s");
        std::thread::sleep(Duration::from_millis(2));
    }
}

// --- The independent side: written from docs/FORMAT.md ("Index file"). ---

/// `String.hashCode` over UTF-16 code units.
fn java_hash(s: &str) -> i32 {
    let mut h: i32 = 0;
    for unit in s.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(unit as i32);
    }
    h
}

fn key_hash(key: &str) -> i32 {
    let h = java_hash(key);
    if h == i32::MIN {
        0
    } else {
        h.abs()
    }
}

/// Builds the bytes of one index file from (key, phyOffset, storeTimestamp) puts.
struct ModelFile {
    bytes: Vec<u8>,
    begin_ts: i64,
    end_ts: i64,
    begin_phy: i64,
    end_phy: i64,
    slot_count: i32,
    count: i32,
}

impl ModelFile {
    fn new() -> Self {
        ModelFile {
            bytes: vec![0u8; 40 + SLOTS * 4 + ENTRIES * 20],
            begin_ts: 0,
            end_ts: 0,
            begin_phy: 0,
            end_phy: 0,
            slot_count: 0,
            count: 1,
        }
    }

    fn i32_at(&self, at: usize) -> i32 {
        i32::from_be_bytes(self.bytes[at..at + 4].try_into().unwrap())
    }

    fn put(&mut self, key: &str, phy: i64, ts: i64) {
        assert!((self.count as usize) < ENTRIES);
        let hash = key_hash(key);
        let slot_at = 40 + (hash as usize % SLOTS) * 4;
        let prev = self.i32_at(slot_at);
        let diff = if self.begin_ts <= 0 {
            0
        } else {
            ((ts - self.begin_ts) / 1000) as i32
        };
        let at = 40 + SLOTS * 4 + self.count as usize * 20;
        self.bytes[at..at + 4].copy_from_slice(&hash.to_be_bytes());
        self.bytes[at + 4..at + 12].copy_from_slice(&phy.to_be_bytes());
        self.bytes[at + 12..at + 16].copy_from_slice(&diff.to_be_bytes());
        self.bytes[at + 16..at + 20].copy_from_slice(&prev.to_be_bytes());
        self.bytes[slot_at..slot_at + 4].copy_from_slice(&self.count.to_be_bytes());
        if self.count <= 1 {
            self.begin_phy = phy;
            self.begin_ts = ts;
        }
        if prev == 0 {
            self.slot_count += 1;
        }
        self.count += 1;
        self.end_phy = phy;
        self.end_ts = ts;
    }

    fn finish(mut self) -> Vec<u8> {
        let mut h = Vec::new();
        for v in [self.begin_ts, self.end_ts, self.begin_phy, self.end_phy] {
            h.extend_from_slice(&v.to_be_bytes());
        }
        h.extend_from_slice(&self.slot_count.to_be_bytes());
        h.extend_from_slice(&self.count.to_be_bytes());
        self.bytes[..40].copy_from_slice(&h);
        self.bytes
    }
}

/// Walks a file the way a reader would: the phyOffsets of `key`, newest first.
fn decode_chain(bytes: &[u8], key: &str) -> Vec<i64> {
    let i32_at = |at: usize| i32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    let count = i32_at(36);
    let hash = key_hash(key);
    let mut next = i32_at(40 + (hash as usize % SLOTS) * 4);
    let mut out = Vec::new();
    while next > 0 && next < count {
        let at = 40 + SLOTS * 4 + next as usize * 20;
        if i32_at(at) == hash {
            out.push(i64::from_be_bytes(
                bytes[at + 4..at + 12].try_into().unwrap(),
            ));
        }
        next = i32_at(at + 16);
    }
    out
}

fn index_files(root: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("index"))
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    files.sort();
    files
}

// --- The tests. ---

#[test]
fn index_files_are_byte_exact_with_the_format_doc() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(config(dir.path()));
    // 3 + 2 + 1 + 2 = 8 keys: the first file takes 7 (entries 1..7), the 8th rolls.
    let msgs = [
        keyed("TopicA", "order-1 order-2", "UNIQ-1"),
        keyed("TopicA", "order-1", "UNIQ-2"),
        keyed("TopicA", "", "UNIQ-3"),
        keyed("TopicB", "order-1", "UNIQ-4"),
    ];
    let mut puts = Vec::new();
    for m in &msgs {
        let r = store.put_message(m).unwrap();
        puts.push((r.wrote_phy_offset, r.store_timestamp_ms));
    }
    store.shutdown().unwrap();
    let files = index_files(dir.path());
    assert_eq!(files.len(), 2, "{files:?}");
    for f in &files {
        let name = f.file_name().unwrap().to_str().unwrap();
        assert!(
            name.len() == 17 && name.bytes().all(|b| b.is_ascii_digit()),
            "{name}"
        );
    }
    let (mut first, mut second) = (ModelFile::new(), ModelFile::new());
    let order = [
        ("TopicA#UNIQ-1", 0),
        ("TopicA#order-1", 0),
        ("TopicA#order-2", 0),
        ("TopicA#UNIQ-2", 1),
        ("TopicA#order-1", 1),
        ("TopicA#UNIQ-3", 2),
        ("TopicB#UNIQ-4", 3),
    ];
    for (key, i) in order {
        first.put(key, puts[i].0, puts[i].1);
    }
    // A rolled file starts at the previous file's end.
    second.begin_phy = first.end_phy;
    second.end_phy = first.end_phy;
    second.begin_ts = first.end_ts;
    second.end_ts = first.end_ts;
    second.put("TopicB#order-1", puts[3].0, puts[3].1);
    let first = first.finish();
    let second = second.finish();
    let on_disk_first = std::fs::read(&files[0]).unwrap();
    let on_disk_second = std::fs::read(&files[1]).unwrap();
    assert_eq!(on_disk_first.len(), 40 + 16 * 4 + 8 * 20);
    assert!(
        on_disk_first == first,
        "first index file differs from the model"
    );
    assert!(
        on_disk_second == second,
        "second index file differs from the model"
    );
    assert_eq!(
        decode_chain(&on_disk_first, "TopicA#order-1"),
        vec![puts[1].0, puts[0].0]
    );
    assert_eq!(
        decode_chain(&on_disk_second, "TopicB#order-1"),
        vec![puts[3].0]
    );
}

fn query(store: &MessageStore, topic: &str, key: &str) -> Vec<i64> {
    store
        .query_message(topic, key, 32, (0, i64::MAX), usize::MAX)
        .unwrap()
        .messages
        .iter()
        .map(|m| format::decode_record(m).unwrap().phy_offset)
        .collect()
}

#[test]
fn query_finds_keys_and_unique_keys_across_files() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(config(dir.path()));
    let mut offsets = Vec::new();
    for i in 0..10 {
        let m = keyed("T", &format!("k{} shared", i % 3), &format!("U{i}"));
        offsets.push(store.put_message(&m).unwrap().wrote_phy_offset);
    }
    wait_indexed(&store);
    assert!(store.index_files().len() > 1);
    assert_eq!(query(&store, "T", "U7"), vec![offsets[7]]);
    assert_eq!(
        query(&store, "T", "k1"),
        vec![offsets[1], offsets[4], offsets[7]]
    );
    assert_eq!(query(&store, "T", "shared"), offsets);
    assert!(query(&store, "T", "nope").is_empty());
    assert!(query(&store, "Other", "k1").is_empty());
    let r = store
        .query_message("T", "shared", 4, (0, i64::MAX), usize::MAX)
        .unwrap();
    assert_eq!(r.messages.len(), 4);
    assert_eq!(r.index_last_update_phy_offset, offsets[9]);
    // The byte bound keeps the first record and stops before the one that would pass it.
    let one = r.messages[0].len();
    let r = store
        .query_message("T", "shared", 32, (0, i64::MAX), one + 1)
        .unwrap();
    assert_eq!(r.messages.len(), 1);
    // A time window before every message finds nothing.
    assert!(store
        .query_message("T", "k1", 32, (0, 1), usize::MAX)
        .unwrap()
        .messages
        .is_empty());
    store.shutdown().unwrap();
}

#[test]
fn crash_and_lost_index_are_rebuilt_from_the_commit_log() {
    let dir = tempfile::tempdir().unwrap();
    let mut offsets = Vec::new();
    {
        let store = open(config(dir.path()));
        for i in 0..5 {
            let m = keyed("T", "same", &format!("U{i}"));
            offsets.push(store.put_message(&m).unwrap().wrote_phy_offset);
        }
        store.flush().unwrap();
        for i in 5..9 {
            let m = keyed("T", "same", &format!("U{i}"));
            offsets.push(store.put_message(&m).unwrap().wrote_phy_offset);
        }
        // Dropped without shutdown: the last headers were never written.
    }
    let store = open(config(dir.path()));
    assert_eq!(query(&store, "T", "same"), offsets);
    assert_eq!(query(&store, "T", "U8"), vec![offsets[8]]);
    store.shutdown().unwrap();
    drop(store);
    // A clean restart indexes nothing again.
    let store = open(config(dir.path()));
    assert_eq!(store.recovery_report().index_records_rebuilt, 0);
    store.shutdown().unwrap();
    drop(store);
    std::fs::remove_dir_all(dir.path().join("index")).unwrap();
    let store = open(config(dir.path()));
    assert_eq!(store.recovery_report().index_records_rebuilt, 9);
    assert_eq!(query(&store, "T", "same"), offsets);
    store.shutdown().unwrap();
}

#[test]
fn retention_deletes_index_files_of_deleted_commit_log_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.commit_log_file_size_bytes = 4096;
    cfg.file_reserved_time_hours = 0;
    let store = open(cfg);
    let body = vec![b'x'; 900];
    for i in 0..20 {
        let mut m = keyed("T", "k", &format!("U{i}"));
        m.body = body.clone().into();
        store.put_message(&m).unwrap();
    }
    wait_indexed(&store);
    let before = store.index_files().len();
    assert!(before > 2, "{before}");
    let deleted = store.delete_expired_files(i64::MAX / 2).unwrap();
    assert!(deleted > 0);
    let after = store.index_files();
    assert!(after.len() < before, "{} -> {}", before, after.len());
    assert_eq!(index_files(dir.path()), after);
    // What is left still answers for the live messages.
    let live = query(&store, "T", "k");
    assert!(!live.is_empty());
    assert!(live.iter().all(|o| *o >= store.min_phy_offset()));
    store.shutdown().unwrap();
}

#[test]
fn disabled_index_writes_no_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.message_index_enable = false;
    let store = open(cfg);
    store.put_message(&keyed("T", "k", "U")).unwrap();
    assert_eq!(store.dispatch_behind_bytes(), 0);
    assert!(query(&store, "T", "k").is_empty());
    assert!(index_files(dir.path()).is_empty());
    store.shutdown().unwrap();
}

#[test]
fn index_thread_follows_the_writer_across_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.commit_log_file_size_bytes = 4096;
    let store = open(cfg.clone());
    let mut offsets = Vec::new();
    for i in 0..40 {
        let mut m = keyed("T", "k", &format!("U{i}"));
        m.body = vec![b'x'; 300].into();
        offsets.push(store.put_message(&m).unwrap().wrote_phy_offset);
    }
    // Several CommitLog files: the thread stepped over their BLANK fillers.
    assert!(offsets.last().unwrap() / 4096 >= 2);
    wait_indexed(&store);
    assert_eq!(store.dispatch_behind_bytes(), 0);
    for (i, offset) in offsets.iter().enumerate() {
        assert_eq!(query(&store, "T", &format!("U{i}")), vec![*offset]);
    }
    // A crash right after appends: the next open indexes what the thread had not.
    store.put_message(&keyed("T", "late", "U-late")).unwrap();
    drop(store);
    let store = open(cfg);
    assert_eq!(query(&store, "T", "late").len(), 1);
    store.shutdown().unwrap();
}
