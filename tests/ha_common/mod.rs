//! Helpers of the HA tests: small CommitLog files, logs without colour, file trees and the
//! records of a CommitLog.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ringmq::remoting::command::SerializeType;
use ringmq::store::format::{self, RecordHead};

use crate::common::{invoke, send_v2, Broker};

pub const FILE_SIZE: &str = "131072";

/// Small CommitLog files, so a few hundred messages cross several.
pub fn store_env() -> Vec<(&'static str, &'static str)> {
    vec![
        ("RINGMQ_STORE_COMMIT_LOG_FILE_SIZE_BYTES", FILE_SIZE),
        ("RINGMQ_STORE_MAX_MESSAGE_SIZE_BYTES", "4096"),
        ("RINGMQ_STORE_CONSUME_QUEUE_FILE_UNITS", "100"),
    ]
}

pub fn wait_until(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out waiting for {what}");
}

/// The log without its colour escapes.
pub fn plain_log(broker: &Broker) -> String {
    let log = broker.log();
    let mut out = String::with_capacity(log.len());
    let mut chars = log.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Until the master accepted its `times`-th slave connection.
pub fn wait_connected(master: &Broker, times: usize) {
    wait_until("the slave to connect", Duration::from_secs(30), || {
        plain_log(master).matches("HA slave connected").count() >= times
    });
}

/// Every file under `dir`, by path relative to it.
pub fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                let name = path.strip_prefix(dir).unwrap().display().to_string();
                out.insert(name, bytes);
            }
        }
    }
    out
}

pub fn wait_same_files(master: &Broker, slave: &Broker, sub: &str) {
    let (m, s) = (master.store_dir().join(sub), slave.store_dir().join(sub));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (mf, sf) = (files(&m), files(&s));
        if !mf.is_empty() && mf == sf {
            return;
        }
        if Instant::now() > deadline {
            let names = |f: &BTreeMap<String, Vec<u8>>| f.keys().cloned().collect::<Vec<_>>();
            panic!(
                "{sub} of the slave differs from the master's: master {:?}, slave {:?}\nslave log:\n{}",
                names(&mf),
                names(&sf),
                slave.log()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The bodies of every record in the CommitLog files of `store`.
pub fn commit_log_bodies(store: &Path) -> Vec<Vec<u8>> {
    let file_size: usize = FILE_SIZE.parse().unwrap();
    let mut bodies = Vec::new();
    for bytes in files(&store.join("commitlog")).values() {
        let mut pos = 0usize;
        while pos + 8 <= bytes.len() {
            match format::decode_record_head(&bytes[pos..pos + 8]) {
                Ok(RecordHead::Message { total_size, .. })
                    if total_size > 0 && pos + total_size as usize <= file_size =>
                {
                    let Ok(record) = format::decode_record(&bytes[pos..pos + total_size as usize])
                    else {
                        break;
                    };
                    bodies.push(record.body.to_vec());
                    pos += total_size as usize;
                }
                _ => break,
            }
        }
    }
    bodies
}

/// The offset after the last record of the CommitLog files of `store` (fillers skipped).
pub fn commit_log_end(store: &Path) -> i64 {
    let file_size: usize = FILE_SIZE.parse().unwrap();
    let mut end = 0i64;
    for (name, bytes) in files(&store.join("commitlog")) {
        let start: i64 = name.parse().unwrap();
        let mut pos = 0usize;
        while pos + 8 <= bytes.len() {
            match format::decode_record_head(&bytes[pos..pos + 8]) {
                Ok(RecordHead::Message { total_size, .. }) if total_size > 0 => {
                    pos += total_size as usize
                }
                Ok(RecordHead::Blank { .. }) => pos = file_size,
                _ => break,
            }
            end = start + pos as i64;
        }
    }
    end
}

pub fn body(i: usize) -> Bytes {
    let mut b = format!("ha-message-{i:06}-").into_bytes();
    b.resize(300 + (i * 7) % 500, b'a' + (i % 26) as u8);
    Bytes::from(b)
}

pub fn produce(broker: &Broker, range: std::ops::Range<usize>, expect: i32) {
    let mut client = broker.client();
    for i in range {
        let request = send_v2(
            "HaTopic",
            (i % 4) as i32,
            body(i),
            &[],
            0,
            SerializeType::Json,
        );
        let response = invoke(&mut client, request);
        assert_eq!(response.code, expect, "send {i}: {:?}", response.remark);
    }
}
