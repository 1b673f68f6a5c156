//! Pull responses sent by copy and by zero-copy (splice from the CommitLog files) are the same
//! bytes on the wire, across CommitLog file boundaries, under concurrency and pipe-pool
//! exhaustion; a client closing mid-transfer and retention deleting a segment mid-transfer are
//! handled. Runs the real `ringmq` binary (tests/common).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use common::{invoke, Broker};
use ringmq::remoting::codes::{request_code as req, response_code as rc};
use ringmq::remoting::command::{RemotingCommand, SerializeType};
use ringmq::remoting::frame::{decode_frame, encode_frame};
use ringmq::store::format;

fn send_request(topic: &str, queue_id: i32, body: Bytes, st: SerializeType) -> RemotingCommand {
    common::send_v2(topic, queue_id, body, &[("TAGS", "TagA")], 0, st)
}

#[allow(clippy::too_many_arguments)]
fn pull_request(
    code: i32,
    topic: &str,
    queue_id: i32,
    offset: i64,
    max_msg_nums: i32,
    sub: &str,
    st: SerializeType,
    opaque: i32,
) -> RemotingCommand {
    let mut cmd = common::pull(
        code,
        topic,
        queue_id,
        offset,
        max_msg_nums,
        0,
        sub,
        1_000,
        st,
    );
    cmd.opaque = opaque;
    cmd
}

/// Sends `request` and returns the raw bytes of the response frame (length prefix included).
fn raw_call(stream: &mut TcpStream, request: &RemotingCommand) -> Vec<u8> {
    let mut out = BytesMut::new();
    encode_frame(request, &mut out).unwrap();
    stream.write_all(&out).unwrap();
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).unwrap();
    let mut frame = len.to_vec();
    frame.resize(4 + u32::from_be_bytes(len) as usize, 0);
    stream.read_exact(&mut frame[4..]).unwrap();
    frame
}

fn decode(frame: &[u8]) -> RemotingCommand {
    let mut buf = BytesMut::from(frame);
    decode_frame(&mut buf, usize::MAX >> 1).unwrap().unwrap()
}

fn connect(broker: &Broker) -> TcpStream {
    let s = TcpStream::connect(broker.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

fn body_of(i: usize, len: usize) -> Bytes {
    let mut b = format!("msg-{i:06}-").into_bytes();
    b.resize(len, b'a' + (i % 26) as u8);
    Bytes::from(b)
}

/// Records of a pull body: (queue offset, body).
fn records(body: &[u8]) -> Vec<(i64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let r = format::decode_record(&body[at..]).expect("record");
        out.push((r.queue_offset, r.body.to_vec()));
        at += r.total_size as usize;
    }
    out
}

fn start(dir: &Path, mode: &str, extra: &[(&str, &str)]) -> Broker {
    let root = dir.display().to_string();
    let mut env = vec![
        ("RINGMQ_STORE_ROOT_DIR", root.as_str()),
        ("RINGMQ_TRANSFER_MODE", mode),
        ("RINGMQ_LOG_LEVEL", "info,ringmq::net::zerocopy=trace"),
    ];
    env.extend_from_slice(extra);
    Broker::start(&env)
}

/// `text` without ANSI colour sequences (the broker's log is coloured).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Bytes the broker spliced / copied for file ranges, from its trace log.
fn transfer_totals(log: &str) -> (u64, u64) {
    let log = strip_ansi(log);
    let field = |line: &str, name: &str| -> u64 {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .and_then(|v| v.trim_end_matches(',').parse().ok())
            .unwrap_or(0)
    };
    log.lines()
        .filter(|l| l.contains("file ranges sent"))
        .fold((0, 0), |(s, c), l| {
            (
                s + field(l, "spliced_bytes="),
                c + field(l, "copied_bytes="),
            )
        })
}

/// The pulls of the byte-for-byte comparison: every start offset of some queues in both header
/// encodings and both pull codes, with batch sizes that end inside and across files.
fn comparison_requests(max_offsets: &[(String, i32, i64)]) -> Vec<RemotingCommand> {
    let mut out = Vec::new();
    let mut opaque = 1000;
    for (topic, queue_id, max) in max_offsets {
        for offset in (0..=*max).step_by(3) {
            for (k, max_nums) in [1, 7, 32].into_iter().enumerate() {
                let st = if (offset as usize + k).is_multiple_of(2) {
                    SerializeType::Json
                } else {
                    SerializeType::RocketMq
                };
                let code = if k == 1 {
                    req::LITE_PULL_MESSAGE
                } else {
                    req::PULL_MESSAGE
                };
                opaque += 1;
                out.push(pull_request(
                    code, topic, *queue_id, offset, max_nums, "*", st, opaque,
                ));
            }
        }
    }
    // Filtered pulls take the copy path in every mode; they must still be identical.
    out.push(pull_request(
        req::PULL_MESSAGE,
        "ZcA",
        0,
        0,
        32,
        "TagA",
        SerializeType::Json,
        99,
    ));
    out
}

/// 256 KiB CommitLog files (64 KiB messages at most), two topics interleaved so a queue's
/// records are sometimes back to back and sometimes not, with sizes from 100 B to 40 KiB.
const SMALL_FILES: &[(&str, &str)] = &[
    ("RINGMQ_STORE_COMMIT_LOG_FILE_SIZE_BYTES", "262144"),
    ("RINGMQ_STORE_MAX_MESSAGE_SIZE_BYTES", "65536"),
];

fn fill_mixed(broker: &Broker) -> Vec<(String, i32, i64)> {
    let mut c = broker.client();
    let sizes = [100usize, 3000, 40_000, 700, 9000, 128, 20_000];
    let mut n = 0;
    for i in 0..300 {
        let (topic, queue) = match i % 5 {
            0..=2 => ("ZcA", 0),
            3 => ("ZcB", 1),
            _ => ("ZcA", 1),
        };
        // Runs of the same queue make contiguous ranges; the switches break them.
        let size = sizes[(i / 3) % sizes.len()];
        let r = invoke(
            &mut c,
            send_request(topic, queue, body_of(i, size), SerializeType::Json),
        );
        assert_eq!(r.code, rc::SUCCESS, "{r:?}");
        n += 1;
    }
    assert_eq!(n, 300);
    vec![
        ("ZcA".to_string(), 0, 180),
        ("ZcA".to_string(), 1, 60),
        ("ZcB".to_string(), 1, 60),
    ]
}

fn commit_log_files(root: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("commitlog"))
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    files.sort();
    files
}

#[test]
fn copy_zerocopy_and_auto_answer_the_same_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("store");
    let mut copy = start(&root, "copy", SMALL_FILES);
    let queues = fill_mixed(&copy);
    assert!(
        commit_log_files(&root).len() >= 4,
        "the data spans several CommitLog files"
    );
    let requests = comparison_requests(&queues);
    let mut s = connect(&copy);
    let expected: Vec<Vec<u8>> = requests.iter().map(|r| raw_call(&mut s, r)).collect();
    drop(s);
    copy.stop();
    assert_eq!(
        transfer_totals(&copy.log()),
        (0, 0),
        "copy mode sends no file ranges"
    );

    // Sanity of the reference answers: every pull found records, bodies as sent.
    let mut found = 0;
    for frame in &expected {
        let r = decode(frame);
        if r.code == rc::SUCCESS {
            found += 1;
            assert!(!records(&r.body).is_empty());
        }
    }
    assert!(found > 200, "{found}");

    for mode in ["zerocopy", "auto"] {
        let mut broker = start(&root, mode, SMALL_FILES);
        let mut s = connect(&broker);
        for (i, request) in requests.iter().enumerate() {
            let got = raw_call(&mut s, request);
            assert!(
                got == expected[i],
                "{mode}: response {i} differs from copy mode: {:?} vs {:?}",
                decode(&got),
                decode(&expected[i])
            );
        }
        // Pipelined: many requests in flight on one connection, answered in any order.
        let mut out = BytesMut::new();
        for request in &requests {
            encode_frame(request, &mut out).unwrap();
        }
        s.write_all(&out).unwrap();
        let mut seen = 0;
        while seen < requests.len() {
            let mut len = [0u8; 4];
            s.read_exact(&mut len).unwrap();
            let mut frame = len.to_vec();
            frame.resize(4 + u32::from_be_bytes(len) as usize, 0);
            s.read_exact(&mut frame[4..]).unwrap();
            let opaque = decode(&frame).opaque;
            let i = requests.iter().position(|r| r.opaque == opaque).unwrap();
            assert!(
                frame == expected[i],
                "{mode}: pipelined response {i} differs"
            );
            seen += 1;
        }
        drop(s);
        broker.stop();
        let (spliced, _copied) = transfer_totals(&broker.log());
        if mode == "zerocopy" {
            assert!(spliced > 1_000_000, "zerocopy spliced only {spliced} bytes");
        }
    }
}

#[test]
fn concurrent_transfers_beyond_the_pipe_pool_stay_identical() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("store");
    let mut copy = start(&root, "copy", SMALL_FILES);
    let queues = fill_mixed(&copy);
    let requests = comparison_requests(&queues);
    let mut s = connect(&copy);
    let expected: Vec<Vec<u8>> = requests.iter().map(|r| raw_call(&mut s, r)).collect();
    drop(s);
    copy.stop();

    let mut broker = start(&root, "zerocopy", SMALL_FILES);
    // More connections than pipes (16 per worker thread, 2 workers): some transfers find the
    // pool empty and fall back to read-and-write; all must answer the same bytes.
    let clients = 48;
    std::thread::scope(|scope| {
        for t in 0..clients {
            let (broker, requests, expected) = (&broker, &requests, &expected);
            scope.spawn(move || {
                let mut s = connect(broker);
                for (i, request) in requests.iter().enumerate().skip(t % 7).step_by(5) {
                    let got = raw_call(&mut s, request);
                    assert!(got == expected[i], "client {t}: response {i} differs");
                }
            });
        }
    });
    broker.stop();
    let (spliced, _) = transfer_totals(&broker.log());
    assert!(spliced > 0);
}

/// A large backlog of big messages; a pull answers up to `count` of them in one response.
fn big_backlog_env(
    reserved_hours: &'static str,
    delete_ms: &'static str,
) -> Vec<(&'static str, &'static str)> {
    vec![
        ("RINGMQ_STORE_COMMIT_LOG_FILE_SIZE_BYTES", "1048576"),
        ("RINGMQ_STORE_MAX_MESSAGE_SIZE_BYTES", "524288"),
        (
            "RINGMQ_STORE_MAX_TRANSFER_BYTES_ON_MESSAGE_IN_MEMORY",
            "67108864",
        ),
        ("RINGMQ_STORE_MAX_TRANSFER_COUNT_ON_MESSAGE_IN_MEMORY", "64"),
        ("RINGMQ_STORE_FILE_RESERVED_TIME_HOURS", reserved_hours),
        ("RINGMQ_STORE_DELETE_CHECK_INTERVAL_MS", delete_ms),
    ]
}

const BIG_BODY_BYTES: usize = 256 * 1024;

#[test]
fn client_closing_mid_transfer_leaves_the_broker_serving() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("store");
    let env = big_backlog_env("72", "10000");
    let mut broker = start(&root, "zerocopy", &env);
    let mut c = broker.client();
    for i in 0..48 {
        let r = invoke(
            &mut c,
            send_request("ZcBig", 0, body_of(i, BIG_BODY_BYTES), SerializeType::Json),
        );
        assert_eq!(r.code, rc::SUCCESS, "{r:?}");
    }
    // More aborted transfers than there are pipes: a pipe left with data is never reused, so
    // the pool must not run dry (that would turn every later transfer into a copy).
    for round in 0..40 {
        let mut s = connect(&broker);
        let request = pull_request(
            req::PULL_MESSAGE,
            "ZcBig",
            0,
            0,
            48,
            "*",
            SerializeType::Json,
            round,
        );
        let mut out = BytesMut::new();
        encode_frame(&request, &mut out).unwrap();
        s.write_all(&out).unwrap();
        let mut some = vec![0u8; 1000 + round as usize * 997];
        s.read_exact(&mut some).unwrap();
        // Closing with unread data sends RST: the broker's splice fails mid-range.
        drop(s);
    }
    let before = transfer_totals(&broker.log()).0;
    let mut s = connect(&broker);
    let frame = raw_call(
        &mut s,
        &pull_request(
            req::PULL_MESSAGE,
            "ZcBig",
            0,
            0,
            48,
            "*",
            SerializeType::Json,
            7,
        ),
    );
    let r = decode(&frame);
    assert_eq!(r.code, rc::SUCCESS);
    let recs = records(&r.body);
    assert_eq!(recs.len(), 48);
    for (i, (qo, body)) in recs.iter().enumerate() {
        assert_eq!(*qo, i as i64);
        assert!(body[..] == body_of(i, BIG_BODY_BYTES)[..], "record {i}");
    }
    // Give the log line a moment to be written.
    std::thread::sleep(Duration::from_millis(300));
    let after = transfer_totals(&broker.log()).0;
    assert!(
        after >= before + (48 * BIG_BODY_BYTES) as u64,
        "the last pull was spliced, not copied: {before} -> {after}"
    );
    broker.stop();
    let log = broker.log();
    assert!(!log.contains("panicked"), "{log}");
}

#[test]
fn retention_deleting_segments_mid_transfer_does_not_change_the_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("store");
    // Every file but the last is expired at once; the first retention pass runs 3 s after
    // start, while the pull below is still being read.
    let env = big_backlog_env("0", "3000");
    let mut broker = start(&root, "zerocopy", &env);
    let started = Instant::now();
    let mut c = broker.client();
    let count = 48usize;
    for i in 0..count {
        let r = invoke(
            &mut c,
            send_request("ZcDel", 0, body_of(i, BIG_BODY_BYTES), SerializeType::Json),
        );
        assert_eq!(r.code, rc::SUCCESS, "{r:?}");
    }
    let files = commit_log_files(&root);
    assert!(files.len() >= 10, "{files:?}");
    assert!(
        started.elapsed() < Duration::from_millis(2500),
        "filling took too long for this test's timing"
    );
    let s = connect(&broker);
    // A small receive window keeps most of the response in the broker until it is read.
    nix::sys::socket::setsockopt(&s, nix::sys::socket::sockopt::RcvBuf, &32768).unwrap();
    let mut s = s;
    let request = pull_request(
        req::PULL_MESSAGE,
        "ZcDel",
        0,
        0,
        count as i32,
        "*",
        SerializeType::Json,
        5,
    );
    let mut out = BytesMut::new();
    encode_frame(&request, &mut out).unwrap();
    s.write_all(&out).unwrap();
    let mut len = [0u8; 4];
    s.read_exact(&mut len).unwrap();
    let total = u32::from_be_bytes(len) as usize;
    let mut frame = len.to_vec();
    frame.resize(4 + total, 0);
    let mut at = 4;
    let reading = Instant::now();
    let mut deleted_while_reading = false;
    while at < frame.len() {
        let n = s
            .read(&mut frame[at..(at + 16 * 1024).min(4 + total)])
            .unwrap();
        assert!(n > 0, "broker closed mid-response");
        at += n;
        if !deleted_while_reading && !files[0].exists() {
            // More left than the broker's send buffer (tcp_wmem max 4 MiB), our receive
            // buffer and a pipe can hold: some of it was spliced after the unlink.
            deleted_while_reading = at < frame.len() - (4 << 20) - (512 << 10);
            assert!(
                deleted_while_reading,
                "retention ran too late: only {} bytes were left ({:?} after start, {:?} reading)",
                frame.len() - at,
                started.elapsed(),
                reading.elapsed()
            );
        }
        // About 2 MiB/s: the 12 MiB take 6 s; the retention pass comes about 1.5 s in.
        std::thread::sleep(Duration::from_millis(8));
    }
    assert!(
        deleted_while_reading,
        "retention never ran during the transfer"
    );
    let r = decode(&frame);
    assert_eq!(r.code, rc::SUCCESS);
    let recs = records(&r.body);
    assert_eq!(recs.len(), count);
    for (i, (qo, body)) in recs.iter().enumerate() {
        assert_eq!(*qo, i as i64);
        assert!(body[..] == body_of(i, BIG_BODY_BYTES)[..], "record {i}");
    }
    broker.stop();
}

/// A pull parked by long polling and woken by an arrival goes zero-copy too (the wake thread
/// queues a file frame on the connection), with the same bytes as the same pull answered at once.
#[test]
fn a_pull_woken_from_long_polling_is_spliced_with_the_same_bytes() {
    const SUSPEND: i32 = 0x2;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("store");
    let env = big_backlog_env("72", "10000");
    let mut broker = start(&root, "zerocopy", &env);
    let mut c = broker.client();
    let first = invoke(
        &mut c,
        send_request("ZcWoken", 0, body_of(0, 64), SerializeType::Json),
    );
    assert_eq!(first.code, rc::SUCCESS, "{first:?}");
    let parked_pull = |opaque| {
        let mut cmd = common::pull(
            req::PULL_MESSAGE,
            "ZcWoken",
            0,
            1,
            32,
            SUSPEND,
            "*",
            20_000,
            SerializeType::Json,
        );
        cmd.opaque = opaque;
        cmd
    };
    let mut s = connect(&broker);
    let mut out = BytesMut::new();
    encode_frame(&parked_pull(77), &mut out).unwrap();
    s.write_all(&out).unwrap();
    // Parked: nothing to read until a message arrives.
    std::thread::sleep(Duration::from_millis(500));
    s.set_nonblocking(true).unwrap();
    let mut probe = [0u8; 1];
    let early = s.read(&mut probe);
    assert!(
        matches!(&early, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the pull must be parked, got {early:?}"
    );
    s.set_nonblocking(false).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let before = transfer_totals(&broker.log()).0;
    let sent = invoke(
        &mut c,
        send_request(
            "ZcWoken",
            0,
            body_of(1, BIG_BODY_BYTES),
            SerializeType::Json,
        ),
    );
    assert_eq!(sent.code, rc::SUCCESS, "{sent:?}");
    let mut len = [0u8; 4];
    s.read_exact(&mut len).unwrap();
    let mut woken = len.to_vec();
    woken.resize(4 + u32::from_be_bytes(len) as usize, 0);
    s.read_exact(&mut woken[4..]).unwrap();
    let r = decode(&woken);
    assert_eq!(r.code, rc::SUCCESS, "{r:?}");
    assert_eq!(r.opaque, 77);
    assert_eq!(
        records(&r.body),
        vec![(1, body_of(1, BIG_BODY_BYTES).to_vec())]
    );
    // The same pull answered at once (the message is there now) is the same frame.
    let at_once = raw_call(&mut connect(&broker), &parked_pull(77));
    assert!(at_once == woken, "woken and immediate responses differ");
    std::thread::sleep(Duration::from_millis(300));
    let after = transfer_totals(&broker.log()).0;
    assert!(
        after >= before + 2 * BIG_BODY_BYTES as u64,
        "both responses were spliced, not copied: {before} -> {after}"
    );
    broker.stop();
    let log = broker.log();
    assert!(!log.contains("panicked"), "{log}");
}
