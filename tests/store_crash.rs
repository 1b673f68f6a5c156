//! Crash recovery with really torn files, plus a child process killed while writing with
//! `sync` flush. After every reopen: every acknowledged record is served, nothing after a torn
//! record is served, and every ConsumeQueue equals a rebuild from the CommitLog.

mod store_common;

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ringmq::store::format::decode_record;
use ringmq::store::{AcceptAll, FlushPolicy, GetMessageStatus, MessageStore, StoreConfig};
use store_common::{msg, open, pull, rebuild_from_commit_log, served_units, small_config};

const FILE_SIZE: u64 = 16 * 1024;

fn config(dir: &Path) -> StoreConfig {
    let mut cfg = small_config(dir);
    cfg.commit_log_file_size_bytes = FILE_SIZE;
    cfg.consume_queue_file_units = 32;
    cfg
}

/// One appended message: where it went and what it holds.
#[derive(Debug, Clone)]
struct Written {
    topic: String,
    queue_id: i32,
    queue_offset: i64,
    phy: i64,
    size: i32,
    body: Vec<u8>,
}

/// Appends `n` messages over three queues, then "crashes" (drops without shutdown).
fn write_and_crash(dir: &Path, n: usize) -> Vec<Written> {
    let store = open(config(dir));
    let written = append(&store, 0, n);
    drop(store);
    assert!(dir.join("abort").exists(), "a crash leaves the abort file");
    written
}

fn append(store: &MessageStore, from: usize, n: usize) -> Vec<Written> {
    (from..from + n)
        .map(|i| {
            let (topic, queue_id) = [("A", 0), ("A", 1), ("B", 0)][i % 3];
            let body = format!("message-{i:05}-{}", "x".repeat(i % 50)).into_bytes();
            let r = store
                .put_message(&msg(topic, queue_id, &body, &format!("t{}", i % 4)))
                .unwrap();
            Written {
                topic: topic.to_owned(),
                queue_id,
                queue_offset: r.queue_offset,
                phy: r.wrote_phy_offset,
                size: r.wrote_bytes,
                body,
            }
        })
        .collect()
}

fn segment_path(dir: &Path, phy: i64) -> (PathBuf, u64) {
    let start = phy as u64 / FILE_SIZE * FILE_SIZE;
    (
        dir.join("commitlog").join(format!("{start:020}")),
        phy as u64 - start,
    )
}

/// Checks the three promises after a reopen.
fn verify(store: &MessageStore, dir: &Path, present: &[Written], absent: &[Written]) {
    for w in present {
        let got = store
            .get_message(&pull(&w.topic, w.queue_id, w.queue_offset, 1, &AcceptAll))
            .unwrap();
        assert_eq!(got.status, GetMessageStatus::Found, "{w:?}");
        let rec = decode_record(got.message(0)).unwrap();
        assert_eq!(rec.body, &w.body[..], "{w:?}");
        assert_eq!(
            (got.message_locations[0].0, got.message_locations[0].1),
            (w.phy, w.size)
        );
    }
    for w in absent {
        assert!(
            store.max_offset_in_queue(&w.topic, w.queue_id) <= w.queue_offset,
            "record after the torn one is still served: {w:?}"
        );
        assert!(store.max_phy_offset() <= w.phy, "{w:?}");
    }
    store.flush().unwrap();
    assert_eq!(
        served_units(store),
        rebuild_from_commit_log(dir, FILE_SIZE),
        "CQ == rebuild"
    );
}

/// After recovery the store appends where the log ends, with the right queue offsets.
fn verify_appends_continue(store: &MessageStore) {
    let next = store.max_offset_in_queue("A", 0);
    let r = store.put_message(&msg("A", 0, b"after", "t0")).unwrap();
    assert_eq!(r.queue_offset, next);
    assert!(r.wrote_phy_offset >= store.min_phy_offset());
}

#[test]
fn clean_shutdown_reopens_everything() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(config(dir.path()));
    let written = append(&store, 0, 600);
    store.shutdown().unwrap();
    drop(store);
    let store = open(config(dir.path()));
    let report = store.recovery_report().clone();
    assert!(!report.abnormal);
    assert!(!report.invalid_tail_found);
    // A clean restart validates only the last three files.
    let files = std::fs::read_dir(dir.path().join("commitlog"))
        .unwrap()
        .count() as u64;
    assert!(files > 3);
    assert_eq!(
        report.scanned_from_phy_offset as u64,
        (files - 3) * FILE_SIZE
    );
    verify(&store, dir.path(), &written, &[]);
    verify_appends_continue(&store);
}

#[test]
fn crash_restart_scans_from_the_checkpoint_not_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(config(dir.path()));
    let mut written = append(&store, 0, 900);
    store.flush().unwrap(); // writes the checkpoint
    written.extend(append(&store, 900, 20));
    drop(store);
    let store = open(config(dir.path()));
    let report = store.recovery_report().clone();
    assert!(report.abnormal);
    assert!(
        report.scanned_from_phy_offset > 0,
        "bounded by the checkpoint: {report:?}"
    );
    assert!(!report.full_rebuild);
    verify(&store, dir.path(), &written, &[]);
}

#[test]
fn segment_truncated_mid_record() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_and_crash(dir.path(), 500);
    let last = written.last().unwrap();
    let (path, pos) = segment_path(dir.path(), last.phy);
    let file = OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(pos + last.size as u64 / 2).unwrap();
    drop(file);
    let store = open(config(dir.path()));
    let report = store.recovery_report().clone();
    assert!(report.abnormal);
    assert!(report.invalid_tail_found);
    assert_eq!(report.end_phy_offset, last.phy);
    verify(
        &store,
        dir.path(),
        &written[..written.len() - 1],
        &written[written.len() - 1..],
    );
    verify_appends_continue(&store);
}

#[test]
fn zeroed_tail() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_and_crash(dir.path(), 500);
    // Zero the last three records as a lost page-cache write would.
    let first_lost = &written[written.len() - 3];
    let (path, pos) = segment_path(dir.path(), first_lost.phy);
    let file = OpenOptions::new().write(true).open(&path).unwrap();
    file.write_all_at(&vec![0u8; (FILE_SIZE - pos) as usize], pos)
        .unwrap();
    drop(file);
    let store = open(config(dir.path()));
    assert!(
        !store.recovery_report().invalid_tail_found,
        "zeros are a clean end"
    );
    assert!(store.recovery_report().cq_units_dropped >= 3);
    let cut = written.len() - 3;
    verify(&store, dir.path(), &written[..cut], &written[cut..]);
    verify_appends_continue(&store);
}

#[test]
fn corrupted_body_crc_cuts_the_log_there() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_and_crash(dir.path(), 500);
    let k = written.len() - 10;
    let victim = &written[k];
    let (path, pos) = segment_path(dir.path(), victim.phy);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    // The body starts 88 bytes into an IPv4 record; flip its first byte.
    let mut byte = [0u8; 1];
    file.read_exact_at(&mut byte, pos + 88).unwrap();
    byte[0] ^= 0x55;
    file.write_all_at(&byte, pos + 88).unwrap();
    drop(file);
    let store = open(config(dir.path()));
    assert!(store.recovery_report().invalid_tail_found);
    assert_eq!(store.recovery_report().end_phy_offset, victim.phy);
    verify(&store, dir.path(), &written[..k], &written[k..]);
    verify_appends_continue(&store);
}

#[test]
fn deleted_consume_queue_files_are_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    // A recent checkpoint, so recovery would normally scan only the tail.
    let store = open(config(dir.path()));
    let mut written = append(&store, 0, 800);
    store.flush().unwrap();
    written.extend(append(&store, 800, 10));
    drop(store);
    std::fs::remove_dir_all(dir.path().join("consumequeue/A")).unwrap();
    // Also drop the newest file of another queue.
    let b_dir = dir.path().join("consumequeue/B/0");
    let mut b_files: Vec<_> = std::fs::read_dir(&b_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    b_files.sort();
    std::fs::remove_file(b_files.last().unwrap()).unwrap();
    let store = open(config(dir.path()));
    assert!(
        store.recovery_report().full_rebuild,
        "{:?}",
        store.recovery_report()
    );
    verify(&store, dir.path(), &written, &[]);
    verify_appends_continue(&store);
}

#[test]
fn consume_queue_running_ahead_is_cut_back() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_and_crash(dir.path(), 500);
    // The CommitLog loses its last five records (zeroed) while the CQ keeps their units, and
    // queue B/0 gets extra units pointing far past the log.
    let cut = written.len() - 5;
    let (path, pos) = segment_path(dir.path(), written[cut].phy);
    let file = OpenOptions::new().write(true).open(&path).unwrap();
    file.write_all_at(&vec![0u8; (FILE_SIZE - pos) as usize], pos)
        .unwrap();
    drop(file);
    let b_last = written.iter().rev().find(|w| w.topic == "B").unwrap();
    let next_index = b_last.queue_offset + 1;
    let units_per_file = 32i64;
    let cq_file = dir.path().join("consumequeue/B/0").join(format!(
        "{:020}",
        next_index / units_per_file * units_per_file * 20
    ));
    if cq_file.exists() {
        let file = OpenOptions::new().write(true).open(&cq_file).unwrap();
        let mut unit = Vec::new();
        unit.extend_from_slice(&(b_last.phy + 1_000_000).to_be_bytes());
        unit.extend_from_slice(&100i32.to_be_bytes());
        unit.extend_from_slice(&0i64.to_be_bytes());
        file.write_all_at(&unit, (next_index % units_per_file * 20) as u64)
            .unwrap();
    }
    let store = open(config(dir.path()));
    assert!(store.recovery_report().cq_units_dropped >= 5);
    verify(&store, dir.path(), &written[..cut], &written[cut..]);
    verify_appends_continue(&store);
}

// ---------------------------------------------------------------------------------------------
// A real process killed with SIGKILL while appending with sync flush.

const CHILD_ENV: &str = "RINGMQ_STORE_CRASH_CHILD_DIR";
/// The child's `zero_ahead_bytes` (0 when unset).
const CHILD_ZERO_AHEAD_ENV: &str = "RINGMQ_STORE_CRASH_CHILD_ZERO_AHEAD_BYTES";

/// Runs only inside the re-executed child: append forever, print each acknowledged record.
#[test]
fn crash_child_entry() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut cfg = config(Path::new(&dir));
    cfg.flush_policy = FlushPolicy::Sync;
    cfg.zero_ahead_bytes = std::env::var(CHILD_ZERO_AHEAD_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let store = open(cfg);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let threads: Vec<_> = (0..3)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    .build()
                    .unwrap();
                for i in 0.. {
                    let body = format!("kill-{t}-{i:06}");
                    let r = store
                        .put_message(&msg("K", t, body.as_bytes(), "k"))
                        .unwrap();
                    rt.block_on(store.wait_flushed(r.end_phy_offset())).unwrap();
                    println!(
                        "ACK {t} {} {} {} {body}",
                        r.queue_offset, r.wrote_phy_offset, r.wrote_bytes
                    );
                }
            })
        })
        .collect();
    drop(rt);
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn sigkill_during_sync_flush_loses_no_acknowledged_record() {
    sigkill_during_sync_flush(0);
}

/// The same with the zero-ahead thread writing zeros past the write position of each 16 KiB
/// file (the window reaches every file's end, so it also runs across each roll).
#[test]
fn sigkill_during_sync_flush_with_zero_ahead_loses_no_acknowledged_record() {
    sigkill_during_sync_flush(FILE_SIZE);
}

fn sigkill_during_sync_flush(zero_ahead_bytes: u64) {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "crash_child_entry",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir.path())
        .env(CHILD_ZERO_AHEAD_ENV, zero_ahead_bytes.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let mut acked = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while acked.len() < 400 && Instant::now() < deadline {
        let Some(Ok(line)) = lines.next() else { break };
        if let Some(ack) = parse_ack(&line) {
            acked.push(ack);
        }
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // Lines written before the kill are acknowledged too.
    for line in lines.map_while(Result::ok) {
        if let Some(ack) = parse_ack(&line) {
            acked.push(ack);
        }
    }
    assert!(
        acked.len() >= 400,
        "child produced only {} acks",
        acked.len()
    );
    assert!(dir.path().join("abort").exists());
    let store = open(config(dir.path()));
    assert!(store.recovery_report().abnormal);
    verify(&store, dir.path(), &acked, &[]);
    verify_appends_continue(&store);
}

fn parse_ack(line: &str) -> Option<Written> {
    let mut parts = line.strip_prefix("ACK ")?.split(' ');
    let queue_id = parts.next()?.parse().ok()?;
    let queue_offset = parts.next()?.parse().ok()?;
    let phy = parts.next()?.parse().ok()?;
    let size = parts.next()?.parse().ok()?;
    let body = parts.next()?.as_bytes().to_vec();
    Some(Written {
        topic: "K".to_owned(),
        queue_id,
        queue_offset,
        phy,
        size,
        body,
    })
}
