//! Helpers shared by the store integration tests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use ringmq::store::format::{self, decode_record_head, RecordHead};
use ringmq::store::io::IoEngine;
use ringmq::store::{
    AcceptAll, GetMessageRequest, GetMessageStatus, MessageFilter, MessageStore, MessageToStore,
    StoreConfig,
};

pub fn small_config(dir: &Path) -> StoreConfig {
    let mut cfg = StoreConfig::with_root(dir);
    cfg.commit_log_file_size_bytes = 64 * 1024;
    cfg.consume_queue_file_units = 64;
    cfg
}

pub fn open(cfg: StoreConfig) -> Arc<MessageStore> {
    MessageStore::open(cfg, Arc::new(IoEngine::new_pread())).expect("open store")
}

/// A pull of group "g" (the store does not use the group).
pub fn pull<'a>(
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

pub fn msg(topic: &str, queue_id: i32, body: &[u8], tags: &str) -> MessageToStore {
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

/// (commit log offset, size, tags code) per logical offset, per queue.
pub type QueueUnits = BTreeMap<(String, i32), BTreeMap<i64, (i64, i32, i64)>>;

/// Rebuilds every queue from the CommitLog files on disk, independently of the store.
pub fn rebuild_from_commit_log(root: &Path, file_size: u64) -> QueueUnits {
    let mut out = QueueUnits::new();
    let mut names: Vec<_> = std::fs::read_dir(root.join("commitlog"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    for path in names {
        let data = std::fs::read(&path).unwrap();
        let start: i64 = path.file_name().unwrap().to_str().unwrap().parse().unwrap();
        let mut pos = 0usize;
        while pos + 8 <= data.len() {
            match decode_record_head(&data[pos..]).unwrap() {
                RecordHead::Blank { .. } => break,
                RecordHead::Invalid { .. } => break,
                RecordHead::Message { total_size, .. } => {
                    let Ok(rec) = format::decode_record(&data[pos..]) else {
                        break;
                    };
                    if !rec.body_crc_matches() || rec.phy_offset != start + pos as i64 {
                        break;
                    }
                    out.entry((rec.topic.to_owned(), rec.queue_id))
                        .or_default()
                        .insert(
                            rec.queue_offset,
                            (
                                rec.phy_offset,
                                rec.total_size,
                                format::tags_code(rec.properties),
                            ),
                        );
                    pos += total_size as usize;
                }
            }
        }
        assert!(pos as u64 <= file_size);
    }
    out
}

/// Every queue as the store serves it.
pub fn served_units(store: &MessageStore) -> QueueUnits {
    let mut out = QueueUnits::new();
    for (topic, queue_id) in store.topic_queue_ids() {
        let entry = out.entry((topic.clone(), queue_id)).or_default();
        let mut offset = store.min_offset_in_queue(&topic, queue_id);
        let max = store.max_offset_in_queue(&topic, queue_id);
        while offset < max {
            let got = store
                .get_message(&pull(&topic, queue_id, offset, 32, &AcceptAll))
                .unwrap();
            assert_eq!(
                got.status,
                GetMessageStatus::Found,
                "{topic}/{queue_id}@{offset}"
            );
            for (k, q) in got.queue_offsets.iter().enumerate() {
                let rec = format::decode_record(got.message(k)).unwrap();
                assert_eq!(rec.queue_offset, *q);
                let (phy, size) = got.message_locations[k];
                entry.insert(*q, (phy, size, format::tags_code(rec.properties)));
            }
            offset = got.next_begin_offset;
        }
        if entry.is_empty() {
            out.remove(&(topic, queue_id));
        }
    }
    out
}
