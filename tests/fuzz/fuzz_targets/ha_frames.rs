//! The HA slave's read path (Java `HAClient.dispatchReadRequest`): any bytes as the master's
//! stream, `[phyOffset i64][bodySize i32][body]` frames whose bodies are appended to a fresh
//! slave store's CommitLog (records completed by them are dispatched to their ConsumeQueues
//! and the message index). It must append, wait for more, or refuse with an error, never
//! panic; and a reopen of the store must recover what was appended. Also the master's side:
//! the slave's 8-byte offset report.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use ringmq::broker::ha::frame::{
    decode_frame_header, decode_offset_report, encode_frame_header, OFFSET_REPORT_BYTES,
};
use ringmq::broker::ha::ha_client::dispatch_frames;
use ringmq::store::io::IoEngine;
use ringmq::store::{MessageStore, StoreConfig};

fn config(dir: &std::path::Path) -> StoreConfig {
    let mut cfg = StoreConfig::with_root(dir);
    cfg.commit_log_file_size_bytes = 4096;
    cfg.consume_queue_file_units = 8;
    cfg.max_hash_slot_num = 16;
    cfg.max_index_num = 64;
    cfg
}

fuzz_target!(|data: &[u8]| {
    if let Some(report) = data.get(..OFFSET_REPORT_BYTES) {
        let _ = decode_offset_report(report.try_into().unwrap());
    }
    if let Some(header) = decode_frame_header(data) {
        let again = encode_frame_header(header.phy_offset, header.body_bytes);
        assert_eq!(decode_frame_header(&again), Some(header));
    }
    let dir = tempfile::tempdir().unwrap();
    let io = Arc::new(IoEngine::new_pread());
    let store = MessageStore::open(config(dir.path()), io.clone()).unwrap();
    let consumed = dispatch_frames(&store, data);
    if let Ok(consumed) = consumed {
        assert!(consumed <= data.len());
    }
    let max = store.max_phy_offset();
    if store.shutdown().is_ok() {
        drop(store);
        // Garbage bodies may be refused by recovery (the corruption policy), never a panic.
        if let Ok(store) = MessageStore::open(config(dir.path()), io) {
            assert!(store.max_phy_offset() <= max);
            let _ = store.shutdown();
        }
    }
});
