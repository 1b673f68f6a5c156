//! One corrupt record in the middle of the CommitLog (record 10 of 300, spread over 3 files),
//! opened by the real `ringmq broker` process under both corruption policies:
//! - `refuse` (the default): the broker exits non-zero, naming the file and the byte offset,
//!   and the files are untouched;
//! - `quarantine`: the broker starts; the bad tail is kept in a `.corrupt-<ms>` copy and the
//!   later files are kept (renamed aside), byte for byte.
//!
//! Before the policy existed, the broker truncated at record 10 and deleted the two later
//! files with a WARN.

mod common;
mod store_common;

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ringmq::store::{AcceptAll, MessageStore, StoreConfig};
use store_common::{msg, open, pull, small_config};

/// The broker wants room for the largest message plus 64 KiB in a file.
const FILE_SIZE: u64 = 128 * 1024;
const MESSAGE_SIZE_MAX_BYTES: u64 = 4096;
const CQ_UNITS: u64 = 64;
const RECORDS: usize = 300;
const VICTIM: usize = 10;
/// Where the body starts in a record with IPv4 hosts.
const BODY_OFFSET_IN_RECORD: u64 = 88;

fn config(dir: &Path) -> StoreConfig {
    let mut cfg = small_config(dir);
    cfg.commit_log_file_size_bytes = FILE_SIZE;
    cfg.consume_queue_file_units = CQ_UNITS;
    cfg
}

fn commit_log_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("commitlog"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

/// Writes 300 records over three CommitLog files, shuts down cleanly and flips one body byte
/// of record 10. Returns the victim's CommitLog offset and the files' bytes before the flip.
fn corrupt_store(dir: &Path) -> (i64, Vec<Vec<u8>>) {
    let store = open(config(dir));
    let mut victim_phy = 0;
    for i in 0..RECORDS {
        let body = format!("corruption-{i:04}-{}", "y".repeat(900));
        let r = store
            .put_message(&msg("C", 0, body.as_bytes(), "t"))
            .unwrap();
        if i == VICTIM {
            victim_phy = r.wrote_phy_offset;
        }
    }
    store.shutdown().unwrap();
    drop(store);
    let files = commit_log_files(dir);
    assert_eq!(files.len(), 3, "{files:?}");
    let path = &files[0];
    assert!(victim_phy < FILE_SIZE as i64);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let at = victim_phy as u64 + BODY_OFFSET_IN_RECORD;
    let mut byte = [0u8; 1];
    file.read_exact_at(&mut byte, at).unwrap();
    byte[0] ^= 0x20;
    file.write_all_at(&byte, at).unwrap();
    file.sync_all().unwrap();
    let before = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
    (victim_phy, before)
}

/// Starts `ringmq broker` on the store; returns (exit status if it exited, its stderr).
fn run_broker(dir: &Path, policy: Option<&str>) -> (Option<std::process::ExitStatus>, String) {
    let (port, namesrv_port) = common::broker_ports();
    let log_path = dir.with_extension("log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringmq"));
    cmd.arg("broker")
        .env("RINGMQ_STORE_ROOT_DIR", dir)
        .env(
            "RINGMQ_STORE_COMMIT_LOG_FILE_SIZE_BYTES",
            FILE_SIZE.to_string(),
        )
        .env(
            "RINGMQ_STORE_CONSUME_QUEUE_FILE_UNITS",
            CQ_UNITS.to_string(),
        )
        .env(
            "RINGMQ_STORE_MAX_MESSAGE_SIZE_BYTES",
            MESSAGE_SIZE_MAX_BYTES.to_string(),
        )
        .env("RINGMQ_BROKER_LISTEN_PORT", port.to_string())
        .env("RINGMQ_NAMESRV_LISTEN_PORT", namesrv_port.to_string())
        .env("RINGMQ_SERVER_WORKER_THREADS", "1")
        // No metrics listener: the default port would clash between parallel tests.
        .env("RINGMQ_METRICS_LISTEN", "")
        .env("RINGMQ_LOG_LEVEL", "info")
        .env_remove("RINGMQ_STORE_CORRUPTION_POLICY")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    if let Some(policy) = policy {
        cmd.env("RINGMQ_STORE_CORRUPTION_POLICY", policy);
    }
    let mut child = cmd.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        let text = std::fs::read_to_string(&log_path).unwrap_or_default();
        if text.contains("ringmq broker listening") {
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            )
            .unwrap();
            let status = child.wait().unwrap();
            assert!(status.success(), "clean stop: {status}\n{text}");
            break None;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the broker neither started nor exited:\n{text}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (status, std::fs::read_to_string(&log_path).unwrap())
}

#[test]
fn refuse_is_the_default_and_names_the_file_and_the_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let (victim_phy, before) = corrupt_store(&dir);
    for policy in [None, Some("refuse")] {
        let (status, log) = run_broker(&dir, policy);
        let status = status.unwrap_or_else(|| panic!("{policy:?}: the broker started:\n{log}"));
        assert!(!status.success(), "{policy:?}: {status}\n{log}");
        let file = dir.join("commitlog").join(format!("{:020}", 0));
        assert!(
            log.contains(&file.display().to_string())
                && log.contains(&format!("at byte {victim_phy}")),
            "{policy:?}: the message names the file and the offset:\n{log}"
        );
        assert!(log.contains("body CRC"), "{log}");
        // Nothing was truncated or deleted.
        let files = commit_log_files(&dir);
        assert_eq!(files.len(), 3, "{files:?}");
        for (f, want) in files.iter().zip(&before) {
            assert!(std::fs::read(f).unwrap() == *want, "{f:?} changed");
        }
    }
}

#[test]
fn quarantine_keeps_the_bad_tail_and_the_later_files_and_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let (victim_phy, before) = corrupt_store(&dir);
    let (status, log) = run_broker(&dir, Some("quarantine"));
    assert!(status.is_none(), "the broker did not start:\n{log}");
    assert!(log.contains("corrupt commit log tail moved aside"), "{log}");
    let mut kept: Vec<PathBuf> = std::fs::read_dir(dir.join("commitlog"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".corrupt-"))
        .collect();
    kept.sort();
    assert_eq!(kept.len(), 3, "{kept:?}");
    // The copy of the bad tail, named by the CommitLog offset it starts at.
    let copy_name = kept[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        copy_name.starts_with(&format!("{victim_phy:020}.corrupt-")),
        "{copy_name}"
    );
    assert!(std::fs::read(&kept[0]).unwrap() == before[0][victim_phy as usize..]);
    // The later files, byte for byte.
    for (i, later) in kept[1..].iter().enumerate() {
        let name = later.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with(&format!("{:020}.corrupt-", (i as u64 + 1) * FILE_SIZE)),
            "{name}"
        );
        assert!(std::fs::read(later).unwrap() == before[i + 1], "{name}");
    }
    // The log now ends at the bad record; everything before it is served.
    let store: std::sync::Arc<MessageStore> = open(config(&dir));
    assert_eq!(store.max_phy_offset(), victim_phy);
    assert_eq!(store.max_offset_in_queue("C", 0), VICTIM as i64);
    let got = store.get_message(&pull("C", 0, 0, 32, &AcceptAll)).unwrap();
    assert_eq!(got.message_count, VICTIM);
    store.shutdown().unwrap();
}
