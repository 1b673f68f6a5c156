//! The slave side of replication against a real master store: bytes copied in frames of odd
//! sizes (ending inside records and crossing files) give byte-identical CommitLog and
//! ConsumeQueue files, pulls on the slave, and a restart that resumes at the slave's end.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use super::MessageStore;
use crate::store::config::StoreConfig;
use crate::store::error::StoreError;
use crate::store::filter::AcceptAll;
use crate::store::format;
use crate::store::io::IoEngine;
use crate::store::types::{GetMessageRequest, GetMessageStatus, MessageToStore};

fn config(dir: &Path) -> StoreConfig {
    let mut cfg = StoreConfig::with_root(dir);
    cfg.commit_log_file_size_bytes = 4096;
    cfg.consume_queue_file_units = 8;
    cfg
}

fn open(dir: &Path) -> Arc<MessageStore> {
    MessageStore::open(config(dir), Arc::new(IoEngine::new_pread())).unwrap()
}

fn put(store: &MessageStore, queue_id: i32, i: usize) {
    let born: SocketAddr = "127.0.0.1:5000".parse().unwrap();
    let body = vec![b'a' + (i % 26) as u8; 50 + (i * 37) % 300];
    store
        .put_message(&MessageToStore {
            topic: "T".into(),
            queue_id,
            flag: 0,
            body: Bytes::from(body),
            properties: format::encode_properties([("TAGS", "x")]),
            sys_flag: 0,
            born_timestamp_ms: 1,
            born_host: born,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
        })
        .unwrap();
}

/// Copies the master's bytes from the slave's end on, `frame_bytes` at most per append.
fn replicate(master: &MessageStore, slave: &MessageStore, frame_bytes: usize) -> usize {
    let mut frames = 0;
    loop {
        let from = slave.max_phy_offset();
        let Some(region) = master.commit_log_region(from, frame_bytes) else {
            return frames;
        };
        assert_eq!(region.phy_offset(), from);
        let mut buf = BytesMut::new();
        master.read_regions(&[region], &mut buf).unwrap();
        slave.append_to_commit_log(from, &buf).unwrap();
        frames += 1;
    }
}

fn files_under(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let name = path.strip_prefix(root).unwrap().display().to_string();
                out.push((name, std::fs::read(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// Pulls from `from` until the queue's end; the status of the first pull and the count.
fn pull_all(store: &MessageStore, queue_id: i32, from: i64) -> (GetMessageStatus, usize) {
    let mut offset = from;
    let mut count = 0;
    let mut first = None;
    for _ in 0..100 {
        let r = store
            .get_message(&GetMessageRequest {
                group: "g",
                topic: "T",
                queue_id,
                queue_offset: offset,
                max_msg_nums: 32,
                filter: &AcceptAll,
            })
            .unwrap();
        first.get_or_insert(r.status);
        if r.status != GetMessageStatus::Found {
            break;
        }
        count += r.message_count;
        offset = r.next_begin_offset;
    }
    (first.unwrap(), count)
}

#[test]
fn a_slave_fed_in_odd_frames_holds_the_masters_files_byte_for_byte() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = open(md.path());
    let slave = open(sd.path());
    for i in 0..60 {
        put(&master, (i % 3) as i32, i);
    }
    assert!(master.max_phy_offset() > 3 * 4096, "the test crosses files");
    // 777 bytes: frames end inside records and at arbitrary points of a file.
    assert!(replicate(&master, &slave, 777) > 20);
    assert_eq!(slave.max_phy_offset(), master.max_phy_offset());
    for q in 0..3 {
        assert_eq!(slave.max_offset_in_queue("T", q), 20);
        assert_eq!(pull_all(&slave, q, 0), (GetMessageStatus::Found, 20));
    }
    slave.flush().unwrap();
    master.flush().unwrap();
    let pick = |root: &Path| {
        files_under(root)
            .into_iter()
            .filter(|(n, _)| n.starts_with("commitlog") || n.starts_with("consumequeue"))
            .collect::<Vec<_>>()
    };
    assert_eq!(pick(sd.path()), pick(md.path()));
}

#[test]
fn a_restarted_slave_resumes_at_its_end_even_after_a_partial_record() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = open(md.path());
    for i in 0..10 {
        put(&master, 0, i);
    }
    let slave = open(sd.path());
    replicate(&master, &slave, 4096);
    // Half of the next record only, then the slave stops.
    put(&master, 0, 10);
    let from = slave.max_phy_offset();
    let region = master.commit_log_region(from, 20).unwrap();
    let mut buf = BytesMut::new();
    master.read_regions(&[region], &mut buf).unwrap();
    slave.append_to_commit_log(from, &buf).unwrap();
    assert_eq!(
        slave.max_offset_in_queue("T", 0),
        10,
        "the partial record waits"
    );
    slave.shutdown().unwrap();
    drop(slave);
    let slave = open(sd.path());
    assert_eq!(
        slave.max_phy_offset(),
        from,
        "recovery cuts the partial record"
    );
    let gap = slave.append_to_commit_log(from + 1, b"x").unwrap_err();
    assert!(matches!(gap, StoreError::ReplicaOffsetMismatch { expected, .. } if expected == from));
    for i in 11..15 {
        put(&master, 0, i);
    }
    replicate(&master, &slave, 100);
    assert_eq!(slave.max_phy_offset(), master.max_phy_offset());
    assert_eq!(pull_all(&slave, 0, 0), (GetMessageStatus::Found, 15));
}

#[test]
fn a_new_slave_starts_at_the_offset_the_master_gives() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = open(md.path());
    for i in 0..40 {
        put(&master, 0, i);
    }
    let start = master.max_phy_offset() - master.max_phy_offset() % 4096;
    let slave = open(sd.path());
    // The master's heartbeat for an empty slave carries the start and no bytes.
    slave.append_to_commit_log(start, &[]).unwrap();
    assert_eq!(slave.max_phy_offset(), start);
    replicate(&master, &slave, 1000);
    assert_eq!(slave.max_phy_offset(), master.max_phy_offset());
    let first = slave.min_offset_in_queue("T", 0);
    assert!(first > 0, "the queue starts where the slave's log does");
    assert_eq!(slave.max_offset_in_queue("T", 0), 40);
    let (status, count) = pull_all(&slave, 0, first);
    assert_eq!(status, GetMessageStatus::Found);
    assert_eq!(count as i64, 40 - first);
    let name = format!("{start:020}");
    assert_eq!(
        std::fs::read(sd.path().join("commitlog").join(&name)).unwrap(),
        std::fs::read(md.path().join("commitlog").join(&name)).unwrap()
    );
}
