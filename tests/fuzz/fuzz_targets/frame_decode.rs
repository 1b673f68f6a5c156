//! Frame decode, both header encodings: the framed decoder over any bytes (it must answer
//! `Ok(None)`, a command, or an error, never panic), and each header decoder on its own.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use ringmq::remoting::frame::decode_frame;
use ringmq::remoting::header_binary::decode_binary_header;
use ringmq::remoting::header_json::decode_json_header;

/// The broker's default frame limit (`RINGMQ_SERVER_FRAME_SIZE_MAX_BYTES`).
const FRAME_SIZE_MAX_BYTES: usize = 16 * 1024 * 1024;

fuzz_target!(|data: &[u8]| {
    let mut buf = BytesMut::from(data);
    // Several frames may share the buffer; each decoded frame consumes its bytes.
    while let Ok(Some(_)) = decode_frame(&mut buf, FRAME_SIZE_MAX_BYTES) {}
    let _ = decode_json_header(data);
    let _ = decode_binary_header(data);
});
