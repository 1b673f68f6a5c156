//! Pull throughput when 1 message in 100 matches, for a TAG and an SQL92 subscription, against
//! an unfiltered pull of the same backlog (issue: two-layer filtering).
//!
//! Run: `cargo bench --bench filter` (env FILTER_BENCH_MESSAGES, default 200000).
//!
//! The store consults layer one (the ConsumeQueue tags code) before it reads a record, and
//! layer two (the record bytes) only for candidates. A counting wrapper around the filter shows
//! how many records each subscription made the store read: for a tag subscription only the
//! matching 1%, for SQL92 (which needs the properties) every record.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use ringmq::filter::ExpressionMessageFilter;
use ringmq::store::filter::{AcceptAll, MessageFilter};
use ringmq::store::format::encode_properties;
use ringmq::store::io::{IoConfig, IoEngine};
use ringmq::store::{
    GetMessageRequest, GetMessageStatus, MessageStore, MessageToStore, StoreConfig,
};

struct Counting<'a> {
    inner: &'a dyn MessageFilter,
    layer_one: AtomicU64,
    layer_two: AtomicU64,
}

impl MessageFilter for Counting<'_> {
    fn is_matched_by_consume_queue(&self, tags_code: i64) -> bool {
        self.layer_one.fetch_add(1, Ordering::Relaxed);
        self.inner.is_matched_by_consume_queue(tags_code)
    }
    fn is_matched_by_commit_log(&self, record: &[u8]) -> bool {
        self.layer_two.fetch_add(1, Ordering::Relaxed);
        self.inner.is_matched_by_commit_log(record)
    }
}

struct Outcome {
    seconds: f64,
    matched: u64,
    layer_one: u64,
    layer_two: u64,
    pulls: u64,
}

fn drain(store: &MessageStore, filter: &dyn MessageFilter) -> Outcome {
    let counting = Counting {
        inner: filter,
        layer_one: AtomicU64::new(0),
        layer_two: AtomicU64::new(0),
    };
    let started = Instant::now();
    let mut offset = 0;
    let mut matched = 0u64;
    let mut pulls = 0u64;
    loop {
        let r = store
            .get_message(&GetMessageRequest {
                group: "bench",
                topic: "FilterBench",
                queue_id: 0,
                queue_offset: offset,
                max_msg_nums: 32,
                filter: &counting,
            })
            .expect("pull");
        pulls += 1;
        match r.status {
            GetMessageStatus::Found | GetMessageStatus::NoMatchedMessage => {
                matched += r.message_count as u64;
                offset = r.next_begin_offset;
            }
            _ => break,
        }
    }
    Outcome {
        seconds: started.elapsed().as_secs_f64(),
        matched,
        layer_one: counting.layer_one.load(Ordering::Relaxed),
        layer_two: counting.layer_two.load(Ordering::Relaxed),
        pulls,
    }
}

fn main() {
    let messages: u64 = std::env::var("FILTER_BENCH_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = StoreConfig::with_root(dir.path());
    config.commit_log_file_size_bytes = 256 * 1024 * 1024;
    let store = MessageStore::open(
        config,
        Arc::new(IoEngine::new(IoConfig::default()).expect("io engine")),
    )
    .expect("open store");
    let host: SocketAddr = "127.0.0.1:10911".parse().unwrap();
    let body = Bytes::from(vec![b'x'; 128]);
    for i in 0..messages {
        let matching = i % 100 == 0;
        let properties = if matching {
            encode_properties([("TAGS", "TagA"), ("region", "east"), ("a", "10")])
        } else {
            encode_properties([("TAGS", "TagB"), ("region", "west"), ("a", "1")])
        };
        let msg = MessageToStore {
            topic: "FilterBench".into(),
            queue_id: 0,
            flag: 0,
            body: body.clone(),
            properties,
            sys_flag: 0,
            born_timestamp_ms: 0,
            born_host: host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
        };
        store.put_message(&msg).expect("append");
    }
    let tag = ExpressionMessageFilter::new("TAG", "TagA").unwrap();
    let sql = ExpressionMessageFilter::new("SQL92", "region = 'east' AND a > 5").unwrap();
    // Warm the page cache once so every case reads hot data.
    drain(&store, &AcceptAll);
    println!("backlog: {messages} messages of 128 B, 1 in 100 matches; hot page cache\n");
    println!("| subscription | matched | CQ units checked (layer 1) | records read and checked (layer 2) | pulls | seconds | scanned msgs/s |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (name, filter) in [
        ("none (all)", &AcceptAll as &dyn MessageFilter),
        ("TAG `TagA`", &tag),
        ("SQL92 `region = 'east' AND a > 5`", &sql),
    ] {
        let mut best: Option<Outcome> = None;
        for _ in 0..3 {
            let o = drain(&store, filter);
            if best.as_ref().is_none_or(|b| o.seconds < b.seconds) {
                best = Some(o);
            }
        }
        let o = best.unwrap();
        println!(
            "| {name} | {} | {} | {} | {} | {:.3} | {:.0} |",
            o.matched,
            o.layer_one,
            o.layer_two,
            o.pulls,
            o.seconds,
            messages as f64 / o.seconds
        );
    }
    store.shutdown().expect("shutdown");
}
