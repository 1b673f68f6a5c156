//! The master's HA sending, copy against zero-copy (`sendfile`), through the broker's own
//! `HaConnection` on loopback.
//!
//! `nice cargo bench --bench ha_transfer -- [backlog_mib] [rounds]`
//!
//! Fills a store with `backlog_mib` MiB (default 256) of 1 KiB-body records (hot page cache),
//! then in each of `rounds` rounds (default 3) runs every mode and batch size in turn: a slave
//! socket in this process connects, reports offset 1 (the second byte: the whole log is sent),
//! reads and discards the frames and acks after each read, until it has the whole log. Prints,
//! per mode and batch, the median wall MiB/s and the master's CPU per GiB sent (the process's
//! CPU time minus the slave reader thread's own).

#[path = "common.rs"]
mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ringmq::broker::ha::frame::{decode_frame_header, encode_offset_report, FRAME_HEADER_BYTES};
use ringmq::broker::ha::group_transfer_service::GroupTransferService;
use ringmq::broker::ha::ha_connection::{
    BodyTransfer, ConnectionParams, HaConnection, TransferCounters,
};
use ringmq::common::StopFlag;
use ringmq::config::HaSection;
use ringmq::store::io::IoEngine;
use ringmq::store::{MessageStore, MessageToStore, StoreConfig};

const FILE_SIZE_BYTES: u64 = 64 << 20;
const BODY_BYTES: usize = 1024;
const BATCHES_BYTES: [usize; 4] = [4 * 1024, 16 * 1024, 32 * 1024, 256 * 1024];

fn fill(store: &MessageStore, backlog_mib: usize) {
    let body = Bytes::from(vec![b'x'; BODY_BYTES]);
    let born = "127.0.0.1:5000".parse().unwrap();
    while store.max_phy_offset() < (backlog_mib as i64) << 20 {
        store
            .put_message(&MessageToStore {
                topic: "BenchHa".into(),
                queue_id: 0,
                flag: 0,
                body: body.clone(),
                properties: String::new(),
                sys_flag: 0,
                born_timestamp_ms: 1,
                born_host: born,
                reconsume_times: 0,
                prepared_transaction_offset: 0,
            })
            .expect("put");
    }
}

/// Reads frames until `end`, acking after each read; returns the reader thread's CPU seconds.
fn slave(mut stream: TcpStream, end: i64) -> f64 {
    stream.write_all(&encode_offset_report(1)).expect("report");
    let mut buf = vec![0u8; 4 << 20];
    let (mut filled, mut offset) = (0usize, 1i64);
    while offset < end {
        let n = stream.read(&mut buf[filled..]).expect("read");
        assert!(n > 0, "master closed");
        filled += n;
        let mut pos = 0;
        while let Some(h) = decode_frame_header(&buf[pos..filled]) {
            let frame_end = pos + FRAME_HEADER_BYTES + h.body_bytes as usize;
            if frame_end > filled {
                break;
            }
            offset = h.phy_offset + i64::from(h.body_bytes);
            pos = frame_end;
        }
        buf.copy_within(pos..filled, 0);
        filled -= pos;
        stream
            .write_all(&encode_offset_report(offset))
            .expect("ack");
    }
    common::thread_cpu_s()
}

struct Run {
    mib_per_s: f64,
    master_cpu_s_per_gib: f64,
}

fn run(store: &Arc<MessageStore>, transfer: BodyTransfer, batch: usize) -> Run {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let end = store.max_phy_offset();
    let stop = StopFlag::new();
    let group = Arc::new(GroupTransferService::new(&HaSection::default()));
    let params = ConnectionParams {
        transfer_batch_bytes: batch,
        heartbeat_interval: Duration::from_secs(5),
        housekeeping_interval: Duration::from_secs(20),
        commit_log_file_size_bytes: FILE_SIZE_BYTES as i64,
        body_transfer: transfer,
    };
    let cpu_before = common::process_cpu_s();
    let started = Instant::now();
    let reader = std::thread::spawn(move || slave(TcpStream::connect(addr).unwrap(), end));
    let (stream, _) = listener.accept().unwrap();
    let counters = Arc::new(TransferCounters::default());
    let (conn, threads) =
        HaConnection::start(stream, store.clone(), group, params, counters, &stop).unwrap();
    let reader_cpu = reader.join().unwrap();
    let wall = started.elapsed();
    let cpu = common::process_cpu_s() - cpu_before;
    stop.raise();
    conn.close("bench done");
    for t in threads {
        t.join().unwrap();
    }
    let gib = (end - 1) as f64 / f64::from(1 << 30);
    Run {
        mib_per_s: gib * 1024.0 / wall.as_secs_f64(),
        master_cpu_s_per_gib: (cpu - reader_cpu) / gib,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let backlog_mib: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(256);
    let rounds: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(3);
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = StoreConfig::with_root(dir.path());
    cfg.commit_log_file_size_bytes = FILE_SIZE_BYTES;
    let store = MessageStore::open(cfg, Arc::new(IoEngine::new_pread())).unwrap();
    fill(&store, backlog_mib);
    store.flush().unwrap();
    let modes = [
        ("copy", BodyTransfer::Copy),
        ("zerocopy", BodyTransfer::ZeroCopy),
    ];
    let mut results: Vec<(String, usize, Vec<Run>)> = Vec::new();
    for (name, _) in &modes {
        for batch in BATCHES_BYTES {
            results.push(((*name).to_owned(), batch, Vec::new()));
        }
    }
    // Warm-up: the whole log once, untimed, so every mode reads a hot page cache.
    run(&store, BodyTransfer::Copy, BATCHES_BYTES[3]);
    for round in 0..rounds {
        for i in 0..results.len() {
            let idx = (i + round) % results.len();
            let (name, batch) = (results[idx].0.clone(), results[idx].1);
            let transfer = modes.iter().find(|(n, _)| *n == name).unwrap().1;
            let r = run(&store, transfer, batch);
            results[idx].2.push(r);
        }
    }
    println!("backlog {backlog_mib} MiB of {BODY_BYTES} B bodies, {rounds} rounds, medians");
    println!(
        "{:>9} {:>9} {:>10} {:>18}",
        "mode", "batch KiB", "MiB/s", "master CPU s/GiB"
    );
    for (name, batch, runs) in &results {
        let mib = median(runs.iter().map(|r| r.mib_per_s).collect());
        let cpu = median(runs.iter().map(|r| r.master_cpu_s_per_gib).collect());
        println!("{name:>9} {:>9} {mib:>10.0} {cpu:>18.3}", batch / 1024);
    }
    store.shutdown().unwrap();
}
