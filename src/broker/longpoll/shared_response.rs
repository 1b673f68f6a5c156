//! One encoded response for many woken pulls that asked the same thing (Java has no
//! counterpart: it re-executes and encodes every woken `PullRequest` on its own).
//!
//! When one arrival wakes many pulls whose answers differ only in their opaque, the answer is
//! encoded once ([`SharedFrame::new`]) and each pull gets a copy with its own opaque
//! ([`SharedFrame::for_opaque`]): one allocation and two copies instead of building, cloning and
//! encoding a command per pull. Byte for byte the frame `encode_frame` writes for the command
//! with that opaque (unit tests below, both header encodings).
//!
//! Where the opaque sits: in a JSON header it is the value of the top-level key `"opaque"`,
//! written as a decimal number (every string in the header is quoted and escapes its own
//! quotes, so `"opaque":` followed by a digit occurs only there); in a binary (ROCKETMQ)
//! header it is the 4 bytes after code (2), language (1) and version (2).

use bytes::{BufMut, Bytes, BytesMut};

use crate::remoting::command::{RemotingCommand, SerializeType};
use crate::remoting::frame::{encode_frame, encode_frame_header};

/// Bytes before the header: frame length (4) and header word (4).
const FRAME_PREFIX_BYTES: usize = 8;
/// Where a binary header keeps the opaque: after code (i16), language (u8), version (i16).
const BINARY_OPAQUE_AT: usize = 5;
/// The JSON key whose value is patched.
const JSON_OPAQUE_KEY: &[u8] = b"\"opaque\":";

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
        let mut template = cmd.clone();
        template.opaque = 0;
        template.body = if body_len_bytes.is_some() {
            Bytes::new()
        } else {
            cmd.body.clone()
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

    /// The frame with `opaque` in place of the template's.
    pub fn for_opaque(&self, opaque: i32) -> Bytes {
        let (at, len) = self.opaque_at;
        match self.serialize_type {
            SerializeType::RocketMq => {
                let mut out = BytesMut::with_capacity(self.bytes.len());
                out.put_slice(&self.bytes[..at]);
                out.put_i32(opaque);
                out.put_slice(&self.bytes[at + len..]);
                out.freeze()
            }
            SerializeType::Json => {
                let digits = itoa_buf(opaque);
                let digits = digits.as_slice();
                let grow = digits.len() - len;
                let mut out = BytesMut::with_capacity(self.bytes.len() + grow);
                out.put_slice(&self.bytes[..at]);
                out.put_slice(digits);
                out.put_slice(&self.bytes[at + len..]);
                // Frame length and header length both grow by the extra digits; both fit
                // (at most 10 more bytes than a frame that was encodable).
                let length =
                    u32::from_be_bytes(out[0..4].try_into().expect("4 bytes")) + grow as u32;
                let word = u32::from_be_bytes(out[4..8].try_into().expect("4 bytes")) + grow as u32;
                out[0..4].copy_from_slice(&length.to_be_bytes());
                out[4..8].copy_from_slice(&word.to_be_bytes());
                out.freeze()
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
        response
            .ext_fields
            .insert("nextBeginOffset".into(), "12".into());
        response.ext_fields.insert("maxOffset".into(), "13".into());
        // A value that looks like the key must not be patched.
        response
            .ext_fields
            .insert("note".into(), "\"opaque\":0".into());
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
    fn digits_match_to_string() {
        for v in [0, 5, -5, 1_000_000, i32::MAX, i32::MIN] {
            assert_eq!(itoa_buf(v).as_slice(), v.to_string().as_bytes());
        }
    }
}
