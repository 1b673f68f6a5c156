//! One encoded response for many woken pulls that asked the same thing (Java has no
//! counterpart: it re-executes and encodes every woken `PullRequest` on its own).
//!
//! When one arrival wakes many pulls whose answers differ only in their opaque, the answer is
//! encoded once ([`SharedFrame::new`]) and each pull gets a copy with its own opaque
//! ([`SharedFrame::for_opaque_in`]): two copies, cut from a chunk, instead of building, cloning and
//! encoding a command per pull. Byte for byte the frame `encode_frame` writes for the command
//! with that opaque (unit tests below, both header encodings).
//!
//! Where the opaque sits: in a JSON header it is the value of the top-level key `"opaque"`,
//! written as a decimal number (every string in the header is quoted and escapes its own
//! quotes, so `"opaque":` followed by a digit occurs only there); in a binary (ROCKETMQ)
//! header it is the 4 bytes after code (2), language (1) and version (2).

use std::borrow::Cow;

use bytes::{BufMut, Bytes, BytesMut};

use crate::remoting::command::{RemotingCommand, SerializeType};
use crate::remoting::frame::{encode_frame, encode_frame_header};

/// Bytes before the header: frame length (4) and header word (4).
const FRAME_PREFIX_BYTES: usize = 8;
/// Where a binary header keeps the opaque: after code (i16), language (u8), version (i16).
const BINARY_OPAQUE_AT: usize = 5;
/// The JSON key whose value is patched.
const JSON_OPAQUE_KEY: &[u8] = b"\"opaque\":";
/// How much longer a patched frame can be than its template: the template's opaque is "0",
/// the longest i32 in decimal ("-2147483648") is 11 characters.
const OPAQUE_GROWTH_MAX_BYTES: usize = 10;
/// Bytes of one allocation that [`FrameChunks`] cuts per-pull frames from.
pub const FRAME_CHUNK_BYTES: usize = 32 * 1024;

/// Where one drain's per-pull copies of a shared frame are written: each copy is cut from the
/// current chunk, and a new chunk is allocated when the next copy does not fit. A drain of
/// 100,000 woken pulls then makes one allocation per chunk rather than one per pull; each
/// per-pull allocation was a quarter of the wake thread's time, because the connection's
/// writer frees the frame on another thread (a lock on the allocating thread's arena). A chunk
/// is freed when the last frame cut from it has been written, so it can outlive the drain by
/// as long as that frame waits in its connection's write queue: at most one chunk per queued
/// frame, and the write queues are bounded.
#[derive(Default)]
pub struct FrameChunks {
    chunk: BytesMut,
}

impl FrameChunks {
    /// The current chunk, with at least `len_bytes` of room (a fresh chunk when it has less).
    fn room(&mut self, len_bytes: usize) -> &mut BytesMut {
        if self.chunk.capacity() - self.chunk.len() < len_bytes {
            self.chunk = BytesMut::with_capacity(len_bytes.max(FRAME_CHUNK_BYTES));
        }
        &mut self.chunk
    }
}

/// An encoded frame (or frame head) whose opaque can be replaced.
#[derive(Debug, Clone)]
pub struct SharedFrame {
    /// The frame encoded with opaque 0.
    bytes: Bytes,
    /// Where the opaque is: `(start, len)` within `bytes`.
    opaque_at: (usize, usize),
    serialize_type: SerializeType,
}

impl SharedFrame {
    /// Encodes `cmd` (with its body when `body_len_bytes` is None; else only the head of a
    /// frame declaring that many body bytes, sent by the caller). None when it cannot be
    /// encoded or the opaque cannot be found.
    pub fn new(cmd: &RemotingCommand, body_len_bytes: Option<usize>) -> Option<SharedFrame> {
        // The binary header keeps the opaque at a fixed place that every copy overwrites, so
        // `cmd` is encoded as it is. JSON writes it as a number: there the template's is 0,
        // found and replaced by each copy, which needs a copy of the command.
        let template = match cmd.serialize_type {
            SerializeType::RocketMq => Cow::Borrowed(cmd),
            SerializeType::Json => {
                let mut template = cmd.clone();
                template.opaque = 0;
                Cow::Owned(template)
            }
        };
        let mut out = BytesMut::new();
        match body_len_bytes {
            None => encode_frame(&template, &mut out).ok()?,
            Some(len) => encode_frame_header(&template, len, &mut out).ok()?,
        }
        let header_len_bytes =
            (u32::from_be_bytes(out[4..8].try_into().ok()?) & 0x00FF_FFFF) as usize;
        let header = &out[FRAME_PREFIX_BYTES..FRAME_PREFIX_BYTES + header_len_bytes];
        let opaque_at = match cmd.serialize_type {
            SerializeType::RocketMq => (FRAME_PREFIX_BYTES + BINARY_OPAQUE_AT, 4),
            SerializeType::Json => {
                let key = header.windows(JSON_OPAQUE_KEY.len() + 1).rposition(|w| {
                    w.starts_with(JSON_OPAQUE_KEY) && w[JSON_OPAQUE_KEY.len()] == b'0'
                })?;
                (FRAME_PREFIX_BYTES + key + JSON_OPAQUE_KEY.len(), 1)
            }
        };
        Some(SharedFrame {
            bytes: out.freeze(),
            opaque_at,
            serialize_type: cmd.serialize_type,
        })
    }

    /// The frame with `opaque` in place of the template's, in an allocation of its own.
    pub fn for_opaque(&self, opaque: i32) -> Bytes {
        let mut out = BytesMut::with_capacity(self.bytes.len() + OPAQUE_GROWTH_MAX_BYTES);
        self.write_for_opaque(opaque, &mut out);
        out.freeze()
    }

    /// The frame with `opaque` in place of the template's, cut from `chunks`' current chunk
    /// (see [`FrameChunks`]).
    pub fn for_opaque_in(&self, opaque: i32, chunks: &mut FrameChunks) -> Bytes {
        let out = chunks.room(self.bytes.len() + OPAQUE_GROWTH_MAX_BYTES);
        self.write_for_opaque(opaque, out);
        out.split().freeze()
    }

    /// Appends the frame with `opaque` in place of the template's to `out`.
    fn write_for_opaque(&self, opaque: i32, out: &mut BytesMut) {
        let (at, len) = self.opaque_at;
        let start = out.len();
        match self.serialize_type {
            SerializeType::RocketMq => {
                out.put_slice(&self.bytes[..at]);
                out.put_i32(opaque);
                out.put_slice(&self.bytes[at + len..]);
            }
            SerializeType::Json => {
                let digits = itoa_buf(opaque);
                let digits = digits.as_slice();
                let grow = digits.len() - len;
                out.put_slice(&self.bytes[..at]);
                out.put_slice(digits);
                out.put_slice(&self.bytes[at + len..]);
                // Frame length and header length both grow by the extra digits; both fit
                // (at most 10 more bytes than a frame that was encodable).
                let frame = &mut out[start..];
                let length =
                    u32::from_be_bytes(frame[0..4].try_into().expect("4 bytes")) + grow as u32;
                let word =
                    u32::from_be_bytes(frame[4..8].try_into().expect("4 bytes")) + grow as u32;
                frame[0..4].copy_from_slice(&length.to_be_bytes());
                frame[4..8].copy_from_slice(&word.to_be_bytes());
            }
        }
    }

    /// Bytes of the frame (or head) with opaque 0.
    pub fn len_bytes(&self) -> usize {
        self.bytes.len()
    }
}

/// `value` in decimal, as the JSON encoder writes it.
fn itoa_buf(value: i32) -> Digits {
    let mut out = Digits {
        buf: [0; 11],
        len: 0,
    };
    let negative = value < 0;
    let mut rest = i64::from(value).unsigned_abs();
    let mut tmp = [0u8; 11];
    let mut n = 0;
    loop {
        tmp[n] = b'0' + (rest % 10) as u8;
        n += 1;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    if negative {
        out.buf[0] = b'-';
        out.len = 1;
    }
    for &digit in tmp[..n].iter().rev() {
        out.buf[out.len] = digit;
        out.len += 1;
    }
    out
}

struct Digits {
    buf: [u8; 11],
    len: usize,
}

impl Digits {
    fn as_slice(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(serialize_type: SerializeType, body: &'static [u8]) -> RemotingCommand {
        let mut request = RemotingCommand::request(11).with_opaque(7);
        request.serialize_type = serialize_type;
        let mut response = RemotingCommand::response_to(&request, 0, Some("FOUND".to_string()));
        response.ext_fields.insert("nextBeginOffset", "12".into());
        response.ext_fields.insert("maxOffset", "13".into());
        // A value that looks like the key must not be patched.
        response.ext_fields.insert("note", "\"opaque\":0".into());
        response.body = Bytes::from_static(body);
        response
    }

    #[test]
    fn every_opaque_gives_the_frame_the_encoder_writes() {
        for serialize_type in [SerializeType::Json, SerializeType::RocketMq] {
            let cmd = response(serialize_type, b"records");
            let shared = SharedFrame::new(&cmd, None).expect("encodable");
            for opaque in [0, 1, 9, 10, 42, 123_456, i32::MAX, -1, -10, i32::MIN] {
                let mut with = cmd.clone();
                with.opaque = opaque;
                let mut expected = BytesMut::new();
                encode_frame(&with, &mut expected).unwrap();
                assert_eq!(
                    shared.for_opaque(opaque),
                    expected.freeze(),
                    "{serialize_type:?} opaque {opaque}"
                );
            }
        }
    }

    #[test]
    fn a_head_for_a_body_sent_apart_is_patched_the_same_way() {
        for serialize_type in [SerializeType::Json, SerializeType::RocketMq] {
            let cmd = response(serialize_type, b"");
            let shared = SharedFrame::new(&cmd, Some(4096)).expect("encodable");
            for opaque in [3, 77_777, -5] {
                let mut with = cmd.clone();
                with.opaque = opaque;
                let mut expected = BytesMut::new();
                encode_frame_header(&with, 4096, &mut expected).unwrap();
                assert_eq!(shared.for_opaque(opaque), expected.freeze());
            }
        }
    }

    #[test]
    fn frames_cut_from_one_chunk_are_each_the_encoders_frame() {
        for serialize_type in [SerializeType::Json, SerializeType::RocketMq] {
            let cmd = response(serialize_type, &[7u8; 3000]);
            let shared = SharedFrame::new(&cmd, None).expect("encodable");
            let mut chunks = FrameChunks::default();
            // Enough frames to fill several chunks, kept alive together.
            let opaques: Vec<i32> = (0..40).map(|i| i * 104_729 - 1_000_000).collect();
            let frames: Vec<Bytes> = opaques
                .iter()
                .map(|&o| shared.for_opaque_in(o, &mut chunks))
                .collect();
            for (&opaque, frame) in opaques.iter().zip(&frames) {
                let mut with = cmd.clone();
                with.opaque = opaque;
                let mut expected = BytesMut::new();
                encode_frame(&with, &mut expected).unwrap();
                assert_eq!(
                    frame,
                    &expected.freeze(),
                    "{serialize_type:?} opaque {opaque}"
                );
            }
            // Frames share chunks: far fewer allocations than frames.
            let distinct_chunks = frames
                .windows(2)
                .filter(|w| w[0].as_ptr().wrapping_add(w[0].len()) != w[1].as_ptr())
                .count()
                + 1;
            assert!(
                distinct_chunks <= 40 * 3100 / FRAME_CHUNK_BYTES + 1,
                "{distinct_chunks}"
            );
        }
    }

    #[test]
    fn a_frame_larger_than_a_chunk_gets_a_chunk_of_its_own() {
        let cmd = response(SerializeType::RocketMq, &[1u8; FRAME_CHUNK_BYTES + 100]);
        let shared = SharedFrame::new(&cmd, None).expect("encodable");
        let mut chunks = FrameChunks::default();
        let a = shared.for_opaque_in(5, &mut chunks);
        let b = shared.for_opaque_in(6, &mut chunks);
        assert_eq!(a, shared.for_opaque(5));
        assert_eq!(b, shared.for_opaque(6));
    }

    #[test]
    fn digits_match_to_string() {
        for v in [0, 5, -5, 1_000_000, i32::MAX, i32::MIN] {
            assert_eq!(itoa_buf(v).as_slice(), v.to_string().as_bytes());
        }
    }
}
