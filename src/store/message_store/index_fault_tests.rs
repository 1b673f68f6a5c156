//! The message index on a file system with failpoints ([`FaultFs`]), the same instance the
//! CommitLog and the ConsumeQueues use: a failed index write, read, file creation or
//! allocation is logged and retried by the index thread after [`INDEX_RETRY_DELAY_MS`]; a
//! failed index fsync is never taken as success (the keys since the last durable flush are
//! written again and fsynced afresh). Neither poisons the store: sends and pulls go on, and
//! once the fault clears the index catches up and finds every message written meanwhile.

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::reput::INDEX_RETRY_DELAY_MS;
use super::tests::{config, msg, pull};
use super::MessageStore;
use crate::store::config::StoreConfig;
use crate::store::error::StoreError;
use crate::store::filter::AcceptAll;
use crate::store::format;
use crate::store::fs::fault::{Failpoint, FaultFs};
use crate::store::fs::FileSystem;
use crate::store::io::IoEngine;
use crate::store::types::MessageToStore;

/// 7 keys per index file, so a few messages roll to a new one.
const INDEX_NUM: u32 = 8;
/// Bounds every wait of these tests.
const WAIT_MAX: Duration = Duration::from_secs(20);

/// Everything the process logs from the first call on (a global subscriber: the index thread
/// logs on its own thread). Tests look for their own directory's lines.
fn logs() -> &'static Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&buf);
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || Sink(Arc::clone(&sink)))
            .finish();
        tracing::subscriber::set_global_default(subscriber)
            .expect("no other test sets a global subscriber");
        buf
    })
}

struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The logged lines that name `dir` and contain `text`.
fn logged(dir: &Path, text: &str) -> usize {
    let all = String::from_utf8_lossy(&logs().lock().unwrap()).into_owned();
    let dir = dir.display().to_string();
    all.lines()
        .filter(|l| l.contains(&dir) && l.contains(text))
        .count()
}

fn index_config(dir: &Path) -> StoreConfig {
    let mut cfg = config(dir);
    cfg.max_hash_slot_num = 16;
    cfg.max_index_num = INDEX_NUM;
    // Only the tests (and the index thread's rolls) flush the index.
    cfg.flush_consume_queue_interval_ms = 3_600_000;
    cfg
}

fn open_on(cfg: StoreConfig, fs: &Arc<FaultFs>) -> Arc<MessageStore> {
    let fs: Arc<dyn FileSystem> = Arc::clone(fs) as _;
    MessageStore::open_on(cfg, Arc::new(IoEngine::new_pread()), fs).unwrap()
}

fn keyed(key: &str) -> MessageToStore {
    let mut m = msg("T", 0, format!("body of {key}").as_bytes(), "A");
    m.properties = format::encode_properties([("TAGS", "A"), ("KEYS", key)]);
    m
}

fn send(store: &MessageStore, keys: &[String]) {
    for key in keys {
        store.put_message(&keyed(key)).unwrap();
    }
}

fn keys(prefix: &str, count: usize) -> Vec<String> {
    (0..count).map(|i| format!("{prefix}-{i}")).collect()
}

/// The bodies QUERY_MESSAGE finds for `key`.
fn query(store: &MessageStore, key: &str) -> Result<Vec<Vec<u8>>, StoreError> {
    let found = store.query_message("T", key, 32, (0, i64::MAX), 1 << 20)?;
    Ok(found
        .messages
        .iter()
        .map(|r| format::decode_record(r).unwrap().body.to_vec())
        .collect())
}

/// Every key is found exactly once, with its own body.
fn assert_found(store: &MessageStore, keys: &[String]) {
    for key in keys {
        let bodies = query(store, key).unwrap();
        assert_eq!(bodies, vec![format!("body of {key}").into_bytes()], "{key}");
    }
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT_MAX;
    while !done() {
        assert!(Instant::now() < deadline, "{what} not within {WAIT_MAX:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn wait_indexed(store: &MessageStore) {
    wait_until("index caught up", || store.dispatch_behind_bytes() == 0);
}

/// Pulls queue T/0 from offset 0 to its end: the number of messages.
fn pulled(store: &MessageStore) -> usize {
    let mut offset = 0;
    let mut count = 0;
    for _ in 0..64 {
        let got = store
            .get_message(&pull("T", 0, offset, 64, &AcceptAll))
            .unwrap();
        if got.message_count == 0 {
            break;
        }
        count += got.message_count;
        offset = got.next_begin_offset;
    }
    count
}

fn index_file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("index"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The header's indexCount of an index file, read from the file.
fn index_count_on_disk(path: &Path) -> i32 {
    let bytes = std::fs::read(path).unwrap();
    i32::from_be_bytes(bytes[36..40].try_into().unwrap())
}

/// A failed entry write (EIO after half of it, or ENOSPC), a new index file that cannot be
/// created or allocated (ENOSPC, at the roll to the second file): sends and pulls go on, the
/// failure is logged, the index thread tries again only after INDEX_RETRY_DELAY_MS (appends
/// meanwhile do not hurry it), then indexes everything and every key is found; no half-made
/// index file stays, and a reopen on the real file system finds them all too.
#[test]
fn a_failed_index_write_is_logged_and_retried_while_sends_and_pulls_go_on() {
    logs();
    for point in [
        Failpoint::ShortWrite,
        Failpoint::WriteEnospc,
        Failpoint::CreateEnospc,
        Failpoint::AllocateEnospc,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let fs = Arc::new(FaultFs::new());
        let store = open_on(index_config(dir.path()), &fs);
        let before = keys("before", 3);
        send(&store, &before);
        wait_indexed(&store);
        assert_found(&store, &before);
        let started = Instant::now();
        fs.arm(point, "index/", 1);
        // Eight more keys: past the first file's seven entries.
        let during = keys("during", 8);
        send(&store, &during[..1]);
        for key in &during[1..] {
            store.put_message(&keyed(key)).unwrap();
            assert_eq!(store.is_read_only(), None, "{point:?}");
        }
        assert_eq!(pulled(&store), 11, "{point:?}: pulls go on");
        wait_until("the failpoint", || !fs.fired().is_empty());
        wait_indexed(&store);
        assert!(
            started.elapsed() >= Duration::from_millis(INDEX_RETRY_DELAY_MS),
            "{point:?}: retried after {:?}",
            started.elapsed()
        );
        assert_eq!(fs.fired().len(), 1, "{point:?}");
        assert_eq!(
            logged(dir.path(), "building the message index failed; retrying"),
            1,
            "{point:?}"
        );
        assert_found(&store, &before);
        assert_found(&store, &during);
        assert_eq!(store.is_read_only(), None, "{point:?}");
        store.put_message(&keyed("after")).unwrap();
        assert_eq!(
            index_file_names(dir.path()).len(),
            2,
            "{point:?}: no half-made file"
        );
        store.shutdown().unwrap();
        drop(store);
        let store = open_on(index_config(dir.path()), &Arc::new(FaultFs::new()));
        assert_eq!(store.recovery_report().index_records_rebuilt, 0);
        assert_found(&store, &before);
        assert_found(&store, &during);
        assert_found(&store, &["after".to_owned()]);
        store.shutdown().unwrap();
    }
}

/// A failed fsync of an index file (in the store's flush) is logged and never taken as
/// success: the index thread sets the file back to its last durable header and writes the
/// keys after it again (each once: the header counts every key once), the next flush fsyncs
/// them, and a crash right after loses none of them. The store stays writable throughout.
#[test]
fn a_failed_index_fsync_is_never_taken_as_success() {
    logs();
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultFs::new());
    let mut cfg = index_config(dir.path());
    cfg.max_index_num = 32;
    let store = open_on(cfg.clone(), &fs);
    let durable = keys("durable", 3);
    send(&store, &durable);
    wait_indexed(&store);
    store.flush().unwrap();
    let not_durable = keys("not-durable", 2);
    send(&store, &not_durable);
    wait_indexed(&store);
    fs.arm(Failpoint::FsyncError, "index/", 1);
    // The CommitLog, ConsumeQueue and checkpoint fsyncs succeed: the store's data is durable.
    store.flush().unwrap();
    assert_eq!(fs.fired().len(), 1);
    assert!(fs.fired()[0].1.contains("index/"));
    assert_eq!(store.is_read_only(), None);
    assert_eq!(logged(dir.path(), "index flush failed"), 1);
    let during = keys("during", 2);
    send(&store, &during);
    assert_eq!(pulled(&store), 7);
    wait_until("the index set back", || {
        logged(
            dir.path(),
            "indexing again from the last durable index flush",
        ) == 1
    });
    wait_indexed(&store);
    store.flush().unwrap();
    let all: Vec<String> = [durable, not_durable, during].concat();
    assert_found(&store, &all);
    let files = store.index_files();
    assert_eq!(files.len(), 1);
    assert_eq!(index_count_on_disk(&files[0]), 1 + all.len() as i32);
    // A crash now: everything was flushed afresh, nothing is indexed again.
    drop(store);
    let store = open_on(cfg, &Arc::new(FaultFs::new()));
    assert!(store.recovery_report().abnormal);
    assert_eq!(store.recovery_report().index_records_rebuilt, 0);
    assert_found(&store, &all);
    store.shutdown().unwrap();
}

/// A failed fsync when a full index file is flushed at the roll to the next one: the full
/// file is set back and filled again, and the roll happens afresh.
#[test]
fn a_failed_fsync_at_the_roll_fills_the_file_again() {
    logs();
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultFs::new());
    let store = open_on(index_config(dir.path()), &fs);
    let first = keys("first", 3);
    send(&store, &first);
    wait_indexed(&store);
    store.flush().unwrap();
    // The next fsync of an index file is the full first file's, at the roll.
    fs.arm(Failpoint::FsyncError, "index/", 1);
    let rest = keys("rest", 6);
    send(&store, &rest);
    wait_until("the failpoint", || !fs.fired().is_empty());
    wait_indexed(&store);
    assert_eq!(
        logged(dir.path(), "building the message index failed; retrying"),
        1
    );
    store.flush().unwrap();
    let all: Vec<String> = [first, rest].concat();
    assert_found(&store, &all);
    let files = store.index_files();
    assert_eq!(files.len(), 2);
    assert_eq!(index_count_on_disk(&files[0]), INDEX_NUM as i32);
    assert_eq!(index_count_on_disk(&files[1]), 1 + 2);
    drop(store);
    let store = open_on(index_config(dir.path()), &Arc::new(FaultFs::new()));
    assert_eq!(store.recovery_report().index_records_rebuilt, 0);
    assert_found(&store, &all);
    store.shutdown().unwrap();
}

/// A failed index read: a query gets the error (the next one answers), and a put that reads
/// the slots first (the first after an open) is retried by the index thread.
#[test]
fn a_failed_index_read_fails_that_query_and_is_retried_by_the_index_thread() {
    logs();
    let dir = tempfile::tempdir().unwrap();
    let store = open_on(index_config(dir.path()), &Arc::new(FaultFs::new()));
    let before = keys("before", 2);
    send(&store, &before);
    store.shutdown().unwrap();
    drop(store);
    let fs = Arc::new(FaultFs::new());
    let store = open_on(index_config(dir.path()), &fs);
    fs.arm(Failpoint::ReadError, "index/", 1);
    let err = query(&store, &before[0]).unwrap_err();
    assert!(matches!(err, StoreError::Io { op: "pread", .. }), "{err:?}");
    assert_found(&store, &before);
    fs.arm(Failpoint::ReadError, "index/", 1);
    let after = keys("after", 2);
    send(&store, &after);
    wait_until("the failpoint", || fs.fired().len() == 2);
    wait_indexed(&store);
    assert_eq!(
        logged(dir.path(), "building the message index failed; retrying"),
        1
    );
    assert_found(&store, &before);
    assert_found(&store, &after);
    assert_eq!(store.is_read_only(), None);
    store.shutdown().unwrap();
}
