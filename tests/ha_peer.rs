//! ringmq's HA stream against an independent implementation of the protocol,
//! `tests/ha_peer/ha_peer.py` (Python 3, standard library, written from the protocol
//! description only): a Java-protocol slave follows a ringmq master, and a ringmq slave follows
//! a Java-protocol master; the bytes must be the master's CommitLog, byte for byte. The peer
//! also shows the master's heartbeats and housekeeping close, and a SYNC_MASTER whose slave
//! never acknowledges answering FLUSH_SLAVE_TIMEOUT.

mod common;
mod ha_common;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, invoke, send_v2, Broker};
use ha_common::{
    body, commit_log_end, files, plain_log, produce, store_env, wait_connected, FILE_SIZE,
};
use ringmq::remoting::codes::response_code;
use ringmq::remoting::command::SerializeType;

fn peer_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ha_peer/ha_peer.py")
}

fn peer(args: &[&str]) -> Command {
    let mut cmd = Command::new("python3");
    cmd.arg(peer_script())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// The JSON line the peer printed last.
fn summary(out: &Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| {
        panic!(
            "peer printed no summary ({e}): {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn master_with(env: &[(&'static str, &'static str)]) -> Broker {
    let mut all = store_env();
    all.extend_from_slice(env);
    Broker::start(&all)
}

/// Waits for the peer master on `port` to say it listens, then starts a ringmq slave of it
/// (store settings, then `extra`); returns the slave and the rest of the peer's stdout.
fn slave_of_peer_master(
    peer_master: &mut Child,
    port: u16,
    extra: &[(&str, &str)],
) -> (Broker, BufReader<ChildStdout>) {
    let mut stdout = BufReader::new(peer_master.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(line.contains("listening"), "peer master: {line}");
    let master_addr = format!("127.0.0.1:{port}");
    let mut env: Vec<(&str, &str)> = store_env().into_iter().collect();
    env.extend([
        ("RINGMQ_BROKER_ROLE", "SLAVE"),
        ("RINGMQ_BROKER_ID", "1"),
        ("RINGMQ_HA_MASTER_ADDRESS", master_addr.as_str()),
    ]);
    env.extend_from_slice(extra);
    (Broker::start(&env), stdout)
}

/// A peer slave of `master` that writes what it gets to `out_file` and never acknowledges
/// (15 s deadline).
fn no_ack_slave(master: &Broker, out_file: &Path) -> Command {
    peer(&[
        "slave",
        "--master",
        &ha_addr(master),
        "--out",
        out_file.to_str().unwrap(),
        "--no-ack",
        "--timeout-s",
        "15",
    ])
}

fn ha_addr(broker: &Broker) -> String {
    format!("127.0.0.1:{}", broker.port + 1)
}

/// The master's CommitLog bytes from `from` to `to`, across its files.
fn master_bytes(store: &Path, from: i64, to: i64) -> Vec<u8> {
    let file_size: i64 = FILE_SIZE.parse().unwrap();
    let mut out = Vec::new();
    for (name, bytes) in files(&store.join("commitlog")) {
        let start: i64 = name.parse().unwrap();
        let (lo, hi) = (from.max(start), to.min(start + file_size));
        if lo < hi {
            out.extend_from_slice(&bytes[(lo - start) as usize..(hi - start) as usize]);
        }
    }
    out
}

#[test]
fn a_java_protocol_slave_gets_the_masters_bytes_from_the_last_file_or_its_offset() {
    let master = master_with(&[]);
    produce(&master, 0..700, response_code::SUCCESS);
    let end = commit_log_end(&master.store_dir());
    let file_size: i64 = FILE_SIZE.parse().unwrap();
    assert!(end > 2 * file_size, "the messages cross files");
    let tmp = tempfile::tempdir().unwrap();
    for (offset, expected_start) in [(0, end - end % file_size), (file_size, file_size)] {
        let out_file = tmp.path().join(format!("from-{offset}"));
        let (offset_arg, until) = (offset.to_string(), end.to_string());
        let out = peer(&[
            "slave",
            "--master",
            &ha_addr(&master),
            "--out",
            out_file.to_str().unwrap(),
            "--offset",
            &offset_arg,
            "--until",
            &until,
            "--timeout-s",
            "20",
        ])
        .output()
        .unwrap();
        let s = summary(&out);
        assert_eq!(s["gap"], serde_json::Value::Null, "{s}");
        assert_eq!(s["start"], expected_start, "{s}");
        assert_eq!(s["end"], end, "{s}");
        let got = std::fs::read(&out_file).unwrap();
        assert!(
            got == master_bytes(&master.store_dir(), expected_start, end),
            "the peer's bytes from {expected_start} are not the master's CommitLog"
        );
    }
}

#[test]
fn a_ringmq_slave_follows_a_java_protocol_master() {
    let mut source = master_with(&[]);
    produce(&source, 0..500, response_code::SUCCESS);
    source.stop();
    let end = commit_log_end(&source.store_dir());
    let file_size: i64 = FILE_SIZE.parse().unwrap();
    let port = free_port();
    let (port_arg, dir) = (
        port.to_string(),
        source.store_dir().join("commitlog").display().to_string(),
    );
    let mut peer_master = peer(&[
        "master",
        "--port",
        &port_arg,
        "--commitlog",
        &dir,
        "--file-size",
        FILE_SIZE,
        "--batch",
        "10000",
        "--heartbeat-ms",
        "200",
    ])
    .spawn()
    .unwrap();
    let (slave, mut stdout) = slave_of_peer_master(&mut peer_master, port, &[]);
    // The peer exits (closing its stdout) once the slave acknowledged the end, or after its
    // own deadline.
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    let status = peer_master.wait().unwrap();
    let s: serde_json::Value = serde_json::from_str(rest.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("peer master summary ({e}): {rest} ({status})"));
    assert_eq!(s["requested"], 0, "{s}");
    assert_eq!(s["acked"], end, "the slave acknowledged the end: {s}");
    let start = end - end % file_size;
    let name = format!("{start:020}");
    let slave_file = std::fs::read(slave.store_dir().join("commitlog").join(&name)).unwrap();
    let source_file = std::fs::read(source.store_dir().join("commitlog").join(&name)).unwrap();
    assert!(
        slave_file == source_file,
        "the slave's CommitLog file {name} differs from the source's"
    );
    assert!(
        plain_log(&slave).contains("HA connected to master"),
        "{}",
        slave.log()
    );
}

#[test]
fn the_master_sends_heartbeats_and_closes_a_slave_silent_past_the_housekeeping_interval() {
    let master = master_with(&[
        ("RINGMQ_HA_SEND_HEARTBEAT_INTERVAL_MS", "300"),
        ("RINGMQ_HA_HOUSEKEEPING_INTERVAL_MS", "1500"),
    ]);
    let tmp = tempfile::tempdir().unwrap();
    let out_file = tmp.path().join("silent");
    let started = Instant::now();
    let out = no_ack_slave(&master, &out_file).output().unwrap();
    let elapsed = started.elapsed();
    let s = summary(&out);
    assert_eq!(s["closed_by_master"], true, "{s}");
    assert!(
        s["heartbeats"].as_u64().unwrap() >= 2,
        "empty frames every 300 ms: {s}"
    );
    assert!(
        elapsed >= Duration::from_millis(1500) && elapsed < Duration::from_secs(10),
        "closed after {elapsed:?}"
    );
}

#[test]
fn a_sync_master_whose_slave_never_acknowledges_answers_flush_slave_timeout() {
    let master = master_with(&[
        ("RINGMQ_BROKER_ROLE", "SYNC_MASTER"),
        ("RINGMQ_HA_SLAVE_TIMEOUT_MS", "500"),
    ]);
    let tmp = tempfile::tempdir().unwrap();
    let out_file = tmp.path().join("mute");
    let mute = no_ack_slave(&master, &out_file).spawn().unwrap();
    wait_connected(&master, 1);
    let mut client = master.client();
    let started = Instant::now();
    let response = invoke(
        &mut client,
        send_v2("HaTopic", 0, body(1), &[], 0, SerializeType::Json),
    );
    assert_eq!(response.code, response_code::FLUSH_SLAVE_TIMEOUT);
    assert!(started.elapsed() >= Duration::from_millis(500));
    assert!(
        response.ext_fields.contains_key("msgId"),
        "stored, as Java answers"
    );
    kill(mute);
}

fn kill(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_slave_reports_its_offset_every_heartbeat_and_leaves_a_silent_master() {
    let port = free_port();
    let port_arg = port.to_string();
    let mut mute = peer(&["master", "--port", &port_arg, "--mute"])
        .spawn()
        .unwrap();
    let (_slave, mut stdout) = slave_of_peer_master(
        &mut mute,
        port,
        &[
            ("RINGMQ_HA_SEND_HEARTBEAT_INTERVAL_MS", "300"),
            ("RINGMQ_HA_HOUSEKEEPING_INTERVAL_MS", "1500"),
        ],
    );
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    mute.wait().unwrap();
    let s: serde_json::Value =
        serde_json::from_str(rest.lines().last().unwrap_or_default()).unwrap();
    assert_eq!(s["closed_by_slave"], true, "{s}");
    let elapsed = s["elapsed_s"].as_f64().unwrap();
    assert!((1.4..10.0).contains(&elapsed), "{s}");
    // One report on connect, then one per 300 ms heartbeat.
    assert!(s["reports"].as_u64().unwrap() >= 4, "{s}");
}
