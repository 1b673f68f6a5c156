//! Master/slave replication with real processes on 127.0.0.1: a name server, a master and a
//! slave that finds its master through the name server. The slave's CommitLog and
//! ConsumeQueue files must equal the master's byte for byte; a restarted slave resumes from
//! its own end; a SYNC_MASTER acknowledges only what a slave has, and answers
//! SLAVE_NOT_AVAILABLE without one.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{invoke, send_v2, Broker, Namesrv};
use ringmq::remoting::codes::response_code;
use ringmq::remoting::command::SerializeType;
use ringmq::store::format::{self, RecordHead};

const FILE_SIZE: &str = "131072";

/// Small CommitLog files, so a few hundred messages cross several.
fn store_env() -> Vec<(&'static str, &'static str)> {
    vec![
        ("RINGMQ_STORE_COMMIT_LOG_FILE_SIZE_BYTES", FILE_SIZE),
        ("RINGMQ_STORE_MAX_MESSAGE_SIZE_BYTES", "4096"),
        ("RINGMQ_STORE_CONSUME_QUEUE_FILE_UNITS", "100"),
    ]
}

fn start_master(namesrv: &Namesrv, role: &str) -> Broker {
    let mut env = store_env();
    env.push(("RINGMQ_BROKER_ROLE", role));
    Broker::start_with_namesrv(&namesrv.addr(), &env)
}

/// A slave given only its role, id and the name server (plus the harness's ports and dirs).
fn start_slave(namesrv: &Namesrv) -> Broker {
    let mut env = store_env();
    env.extend([("RINGMQ_BROKER_ROLE", "SLAVE"), ("RINGMQ_BROKER_ID", "1")]);
    Broker::start_with_namesrv(&namesrv.addr(), &env)
}

fn wait_until(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
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
fn plain_log(broker: &Broker) -> String {
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
fn wait_connected(master: &Broker, times: usize) {
    wait_until("the slave to connect", Duration::from_secs(30), || {
        plain_log(master).matches("HA slave connected").count() >= times
    });
}

/// Every file under `dir`, by path relative to it.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
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

fn wait_same_files(master: &Broker, slave: &Broker, sub: &str) {
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

fn body(i: usize) -> Bytes {
    let mut b = format!("ha-message-{i:06}-").into_bytes();
    b.resize(300 + (i * 7) % 500, b'a' + (i % 26) as u8);
    Bytes::from(b)
}

fn produce(broker: &Broker, range: std::ops::Range<usize>, expect: i32) {
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

/// The bodies of every record in the CommitLog files of `store`.
fn commit_log_bodies(store: &Path) -> Vec<Vec<u8>> {
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

#[test]
fn a_slave_found_through_the_name_server_holds_the_masters_bytes_and_resumes_after_a_restart() {
    let namesrv = Namesrv::start();
    let master = start_master(&namesrv, "ASYNC_MASTER");
    let mut slave = start_slave(&namesrv);
    wait_connected(&master, 1);
    produce(&master, 0..600, response_code::SUCCESS);
    wait_same_files(&master, &slave, "commitlog");
    wait_same_files(&master, &slave, "consumequeue");
    assert!(
        files(&master.store_dir().join("commitlog")).len() >= 3,
        "the messages cross CommitLog files"
    );

    slave.stop();
    produce(&master, 600..800, response_code::SUCCESS);
    slave.restart();
    wait_same_files(&master, &slave, "commitlog");
    wait_same_files(&master, &slave, "consumequeue");
    // The restarted slave asked for its own end, not for a fresh start.
    let starts: Vec<String> = plain_log(&master)
        .lines()
        .filter(|l| l.contains("HA transfer starts"))
        .map(String::from)
        .collect();
    assert_eq!(starts.len(), 2, "{starts:?}");
    assert!(starts[0].contains("requested=0"), "{starts:?}");
    assert!(!starts[1].contains("requested=0"), "{starts:?}");
    assert_eq!(commit_log_bodies(&slave.store_dir()).len(), 800);
}

#[test]
fn a_sync_master_without_a_slave_answers_slave_not_available_but_stores() {
    let namesrv = Namesrv::start();
    let master = start_master(&namesrv, "SYNC_MASTER");
    let mut client = master.client();
    let response = invoke(
        &mut client,
        send_v2("HaTopic", 0, body(1), &[], 0, SerializeType::Json),
    );
    assert_eq!(response.code, response_code::SLAVE_NOT_AVAILABLE);
    assert!(
        response.ext_fields.contains_key("msgId"),
        "the message is stored and its id answered, as Java does"
    );
    // WAIT=false: nothing to wait for.
    let response = invoke(
        &mut client,
        send_v2(
            "HaTopic",
            0,
            body(2),
            &[("WAIT", "false")],
            0,
            SerializeType::Json,
        ),
    );
    assert_eq!(response.code, response_code::SUCCESS);
}

#[test]
fn every_message_a_sync_master_acknowledged_is_on_the_slave_after_a_sigkill() {
    let namesrv = Namesrv::start();
    let mut master = start_master(&namesrv, "SYNC_MASTER");
    let slave = start_slave(&namesrv);
    wait_connected(&master, 1);
    let acked = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let producer = {
        let (acked, stop) = (acked.clone(), stop.clone());
        let mut client = master.client();
        std::thread::spawn(move || {
            for i in 0..100_000 {
                if stop.load(Ordering::Acquire) {
                    return;
                }
                let request = send_v2(
                    "HaTopic",
                    (i % 4) as i32,
                    body(i),
                    &[],
                    0,
                    SerializeType::Json,
                );
                match client.invoke(request) {
                    Ok(r) if r.code == response_code::SUCCESS => acked.lock().unwrap().push(i),
                    Ok(r) => panic!("send {i} answered {} {:?}", r.code, r.remark),
                    Err(_) => return,
                }
            }
        })
    };
    wait_until("200 acknowledged sends", Duration::from_secs(60), || {
        acked.lock().unwrap().len() >= 200
    });
    master.kill_hard();
    stop.store(true, Ordering::Release);
    producer.join().unwrap();
    let acked = acked.lock().unwrap().clone();
    let on_slave: std::collections::HashSet<Vec<u8>> =
        commit_log_bodies(&slave.store_dir()).into_iter().collect();
    let missing: Vec<usize> = acked
        .iter()
        .copied()
        .filter(|i| !on_slave.contains(body(*i).as_ref()))
        .collect();
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged messages are not on the slave: {:?}",
        missing.len(),
        acked.len(),
        &missing[..missing.len().min(10)]
    );
}
