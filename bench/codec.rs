//! The header codec on the hot path, in nanoseconds per operation: what a network thread spends
//! on the headers of one W3 message (a SEND_MESSAGE_V2 request and its response, a PULL_MESSAGE
//! request and the header of its response), without the sockets.
//!
//! Run: `cargo bench --bench codec` (env CODEC_BENCH_ITERATIONS, default 500000; 5 rounds, the
//! median is reported).

use std::hint::black_box;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use ringmq::remoting::headers::{
    PullMessageRequestHeader, PullMessageResponseHeader, SendMessageRequestHeader,
    SendMessageResponseHeader,
};
use ringmq::remoting::{
    decode_frame, encode_frame, encode_frame_header, request_code, response_code, RemotingCommand,
    SerializeType, FRAME_SIZE_MAX_BYTES,
};

// The broker's allocator (src/main.rs): what these allocations cost there.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const ROUNDS: usize = 5;

/// A SEND_MESSAGE_V2 request as the Java client sends it: V2 single-letter keys, a UNIQ_KEY and
/// WAIT properties, a 1 KiB body.
fn send_request_frame() -> Bytes {
    let properties = "UNIQ_KEY\u{1}7F00000100002A9F0000000000000001\u{2}WAIT\u{1}true\u{2}";
    let cmd = RemotingCommand::request(request_code::SEND_MESSAGE_V2)
        .with_opaque(4242)
        .with_serialize_type(SerializeType::RocketMq)
        .with_ext("a", "BenchProducerGroup")
        .with_ext("b", "BenchW3")
        .with_ext("c", "TBW102")
        .with_ext("d", 4)
        .with_ext("e", 3)
        .with_ext("f", 0)
        .with_ext("g", 1_765_000_000_123_i64)
        .with_ext("h", 0)
        .with_ext("i", properties)
        .with_ext("j", 0)
        .with_ext("k", false)
        .with_ext("m", false)
        .with_ext("n", "broker-a")
        .with_body(Bytes::from(vec![b'x'; 1024]));
    frame_of(&cmd)
}

/// A PULL_MESSAGE request of a long-polling push consumer.
fn pull_request_frame() -> Bytes {
    let cmd = RemotingCommand::request(request_code::PULL_MESSAGE)
        .with_opaque(4343)
        .with_serialize_type(SerializeType::RocketMq)
        .with_ext("consumerGroup", "BenchConsumerGroup")
        .with_ext("topic", "BenchW3")
        .with_ext("queueId", 3)
        .with_ext("queueOffset", 123_456_i64)
        .with_ext("maxMsgNums", 32)
        .with_ext("sysFlag", 3)
        .with_ext("commitOffset", 123_400_i64)
        .with_ext("suspendTimeoutMillis", 15_000_i64)
        .with_ext("subscription", "*")
        .with_ext("subVersion", 1_765_000_000_000_i64)
        .with_ext("expressionType", "TAG");
    frame_of(&cmd)
}

fn frame_of(cmd: &RemotingCommand) -> Bytes {
    let mut out = BytesMut::new();
    encode_frame(cmd, &mut out).expect("encodes");
    out.freeze()
}

/// Decodes `frame` as the reader does (from its read buffer), then its typed header.
fn decode_request<T>(frame: &Bytes, header: impl Fn(&RemotingCommand) -> T) {
    let mut buf = BytesMut::from(&frame[..]);
    let cmd = decode_frame(&mut buf, FRAME_SIZE_MAX_BYTES)
        .expect("decodes")
        .expect("whole");
    black_box(header(&cmd));
}

fn encode_send_response(out: &mut BytesMut) {
    let mut response =
        RemotingCommand::response(response_code::SUCCESS, 4242, SerializeType::RocketMq, None);
    SendMessageResponseHeader {
        msg_id: "7F00000100002A9F0000000000123400".to_owned(),
        queue_id: 3,
        queue_offset: 123_456,
        transaction_id: Some("7F00000100002A9F0000000000000001".to_owned()),
        batch_uniq_id: None,
        recall_handle: None,
    }
    .encode_with_region_and_trace(&mut response);
    out.clear();
    encode_frame(&response, out).expect("encodes");
    black_box(&out);
}

fn encode_pull_response(out: &mut BytesMut) {
    let mut response =
        RemotingCommand::response(response_code::SUCCESS, 4343, SerializeType::RocketMq, None);
    PullMessageResponseHeader {
        suggest_which_broker_id: 0,
        next_begin_offset: 123_457,
        min_offset: 0,
        max_offset: 123_457,
        offset_delta: None,
        topic_sys_flag: None,
        group_sys_flag: None,
        forbidden_type: None,
    }
    .encode(&mut response);
    out.clear();
    encode_frame_header(&response, 1_200, out).expect("encodes");
    black_box(&out);
}

/// Median ns per call of `op` over [`ROUNDS`] rounds of `iterations` calls.
fn measure(iterations: u32, mut op: impl FnMut()) -> f64 {
    let mut rounds: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..iterations {
                op();
            }
            started.elapsed().as_nanos() as f64 / f64::from(iterations)
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[ROUNDS / 2]
}

fn main() {
    let iterations: u32 = std::env::var("CODEC_BENCH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500_000);
    let send = send_request_frame();
    let pull = pull_request_frame();
    let mut out = BytesMut::with_capacity(4096);
    let rows = [
        (
            "decode SEND_MESSAGE_V2 frame + header",
            measure(iterations, || {
                decode_request(&send, |cmd| {
                    SendMessageRequestHeader::decode(cmd).expect("header")
                })
            }),
        ),
        (
            "encode send response frame",
            measure(iterations, || encode_send_response(&mut out)),
        ),
        (
            "decode PULL_MESSAGE frame + header",
            measure(iterations, || {
                decode_request(&pull, |cmd| {
                    PullMessageRequestHeader::decode(cmd).expect("header")
                })
            }),
        ),
        (
            "encode pull response header",
            measure(iterations, || encode_pull_response(&mut out)),
        ),
    ];
    println!("codec, {iterations} iterations x {ROUNDS} rounds, median of the rounds\n");
    println!("| operation | ns per call |");
    println!("| --- | ---: |");
    let mut total = 0.0;
    for (name, ns) in rows {
        println!("| {name} | {ns:.0} |");
        total += ns;
    }
    println!("| one W3 message's headers | {total:.0} |");
}
