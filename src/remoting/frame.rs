//! Framing: `length: i32 | headerWord: i32 | header | body`.
//!
//! - `length` counts everything after itself (4 + header + body).
//! - `headerWord` = serialize type (high byte) << 24 | header length (low 24 bits).
//! - The body length is implicit: `length - 4 - header length`.
//!
//! Java source: `NettyDecoder` (a `LengthFieldBasedFrameDecoder`: field 4 bytes at offset 0,
//! stripped; max frame 16 MiB counting the length field), `NettyEncoder`,
//! `RemotingCommand.decode/encodeHeader`.
//!
//! Every decode error means the stream is out of sync or hostile, so the caller must close the
//! connection. The decoder never allocates for a frame before the whole (capped) frame is in
//! the buffer: the header and body are zero-copy slices of the caller's buffer.

use bytes::{Buf, BufMut, BytesMut};

use super::command::{RemotingCommand, SerializeType};
use super::error::CodecError;
use super::header_binary::{decode_binary_header, encode_binary_header};
use super::header_json::{decode_json_header, encode_json_header};

/// Largest accepted frame in bytes, counting the 4-byte length prefix. Java `NettyDecoder`
/// default (`com.rocketmq.remoting.frameMaxLength`); Java clients reject larger frames too, so
/// the encoder enforces the same cap.
pub const FRAME_SIZE_MAX_BYTES: usize = 16 * 1024 * 1024;
/// The `length` prefix.
pub const FRAME_LENGTH_PREFIX_BYTES: usize = 4;
/// The header word (serialize type + header length) that starts every frame body.
pub const FRAME_HEADER_WORD_BYTES: usize = 4;
/// The header length field of the header word is 24 bits wide.
pub const HEADER_LEN_MAX_BYTES: usize = 0x00FF_FFFF;

/// If `buf` holds a whole frame, remove it and return the decoded command. `Ok(None)` = need
/// more bytes (nothing is consumed). `Err` = the connection must be closed (negative, oversize
/// or too-short length, bad header length, unknown serialize type, bad header); the offending
/// frame is consumed if it was complete.
///
/// `frame_size_max_bytes` bounds the whole frame including the length prefix; oversize is
/// reported as soon as the length prefix is readable, before waiting for the bytes.
pub fn decode_frame(
    buf: &mut BytesMut,
    frame_size_max_bytes: usize,
) -> Result<Option<RemotingCommand>, CodecError> {
    let Some(prefix) = buf.get(..FRAME_LENGTH_PREFIX_BYTES) else {
        return Ok(None);
    };
    let length = i32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
    let length_bytes =
        usize::try_from(length).map_err(|_| CodecError::NegativeLength { length })?;
    let frame_bytes = length_bytes.saturating_add(FRAME_LENGTH_PREFIX_BYTES);
    if frame_bytes > frame_size_max_bytes {
        return Err(CodecError::FrameTooLarge {
            size_bytes: frame_bytes,
            max_bytes: frame_size_max_bytes,
        });
    }
    if length_bytes < FRAME_HEADER_WORD_BYTES {
        return Err(CodecError::FrameTooShort { length_bytes });
    }
    if buf.len() < frame_bytes {
        return Ok(None);
    }

    let mut frame = buf.split_to(frame_bytes).freeze();
    frame.advance(FRAME_LENGTH_PREFIX_BYTES);
    let word = frame.get_u32();
    let header_len_bytes = (word & 0x00FF_FFFF) as usize;
    // The high byte of a u32 always fits in u8.
    let type_code = (word >> 24) as u8;
    let available_bytes = length_bytes - FRAME_HEADER_WORD_BYTES;
    if header_len_bytes > available_bytes {
        return Err(CodecError::BadHeaderLength {
            header_len_bytes,
            available_bytes,
        });
    }
    let serialize_type =
        SerializeType::from_code(type_code).ok_or(CodecError::UnknownSerializeType(type_code))?;
    let header = frame.split_to(header_len_bytes);
    let mut cmd = match serialize_type {
        SerializeType::Json => decode_json_header(&header)?,
        SerializeType::RocketMq => decode_binary_header(&header)?,
    };
    cmd.body = frame;
    Ok(Some(cmd))
}

/// Appends the whole frame (length, header word, header in `cmd.serialize_type`, body).
/// On error `out` is left as it was.
pub fn encode_frame(cmd: &RemotingCommand, out: &mut BytesMut) -> Result<(), CodecError> {
    encode_frame_inner(cmd, cmd.body.len(), true, out)
}

/// Appends length + header word + header, declaring `body_len_bytes` of body that the caller
/// sends itself afterwards (zero-copy transfer). `cmd.body` is ignored. On error `out` is left
/// as it was.
pub fn encode_frame_header(
    cmd: &RemotingCommand,
    body_len_bytes: usize,
    out: &mut BytesMut,
) -> Result<(), CodecError> {
    encode_frame_inner(cmd, body_len_bytes, false, out)
}

fn encode_frame_inner(
    cmd: &RemotingCommand,
    body_len_bytes: usize,
    with_body: bool,
    out: &mut BytesMut,
) -> Result<(), CodecError> {
    let start = out.len();
    out.put_u64(0); // length and header word, patched below
    let header_start = out.len();
    let encoded = match cmd.serialize_type {
        SerializeType::Json => {
            encode_json_header(cmd, out);
            Ok(())
        }
        SerializeType::RocketMq => encode_binary_header(cmd, out),
    };
    let header_len_bytes = out.len() - header_start;
    let frame_bytes = FRAME_LENGTH_PREFIX_BYTES
        .saturating_add(FRAME_HEADER_WORD_BYTES)
        .saturating_add(header_len_bytes)
        .saturating_add(body_len_bytes);
    let checked = encoded.and(check_encoded_sizes(header_len_bytes, frame_bytes));
    if let Err(error) = checked {
        out.truncate(start);
        return Err(error);
    }
    // Both fit: frame_bytes <= FRAME_SIZE_MAX_BYTES < i32::MAX, header <= 24 bits.
    let length = (frame_bytes - FRAME_LENGTH_PREFIX_BYTES) as u32;
    let word = (u32::from(cmd.serialize_type.code()) << 24) | header_len_bytes as u32;
    out[start..start + 4].copy_from_slice(&length.to_be_bytes());
    out[start + 4..start + 8].copy_from_slice(&word.to_be_bytes());
    if with_body {
        out.put_slice(&cmd.body);
    }
    Ok(())
}

fn check_encoded_sizes(header_len_bytes: usize, frame_bytes: usize) -> Result<(), CodecError> {
    if header_len_bytes > HEADER_LEN_MAX_BYTES {
        Err(CodecError::HeaderTooLarge { header_len_bytes })
    } else if frame_bytes > FRAME_SIZE_MAX_BYTES {
        Err(CodecError::FrameTooLarge {
            size_bytes: frame_bytes,
            max_bytes: FRAME_SIZE_MAX_BYTES,
        })
    } else {
        Ok(())
    }
}

// Static check: the cap must fit the i32 length prefix.
const _: () = assert!(FRAME_SIZE_MAX_BYTES <= i32::MAX as usize);

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::remoting::command::LanguageCode;

    fn sample(serialize_type: SerializeType) -> RemotingCommand {
        RemotingCommand::request(11)
            .with_opaque(9)
            .with_ext("topic", "T")
            .with_remark("r")
            .with_body(Bytes::from_static(b"body"))
            .with_serialize_type(serialize_type)
    }

    #[test]
    fn round_trip_both_types_and_partial_input() {
        for serialize_type in [SerializeType::Json, SerializeType::RocketMq] {
            let cmd = sample(serialize_type);
            let mut wire = BytesMut::new();
            encode_frame(&cmd, &mut wire).expect("encodes");
            encode_frame(&cmd, &mut wire).expect("encodes");
            let one = wire.len() / 2;
            // Feed byte by byte: no frame until the last byte of the first one.
            let mut buf = BytesMut::new();
            for (index, byte) in wire[..one].iter().enumerate() {
                buf.put_u8(*byte);
                let got = decode_frame(&mut buf, FRAME_SIZE_MAX_BYTES).expect("no error");
                assert_eq!(got.is_some(), index == one - 1);
                if let Some(got) = got {
                    assert_eq!(got, cmd);
                }
            }
            assert!(buf.is_empty());
            let mut rest = BytesMut::from(&wire[one..]);
            let got = decode_frame(&mut rest, FRAME_SIZE_MAX_BYTES).expect("ok");
            assert_eq!(got, Some(cmd));
            assert!(rest.is_empty());
        }
    }

    #[test]
    fn frame_header_declares_external_body() {
        let cmd = sample(SerializeType::Json);
        let mut whole = BytesMut::new();
        encode_frame(&cmd, &mut whole).expect("encodes");
        let mut head = BytesMut::new();
        encode_frame_header(&cmd.clone().with_body(Bytes::new()), 4, &mut head).expect("ok");
        head.put_slice(b"body");
        assert_eq!(head, whole);
    }

    #[test]
    fn oversize_is_reported_from_the_prefix_alone() {
        let mut buf = BytesMut::from(&(1024i32).to_be_bytes()[..]);
        assert!(matches!(
            decode_frame(&mut buf, 1027),
            Err(CodecError::FrameTooLarge {
                size_bytes: 1028,
                max_bytes: 1027
            })
        ));
        let mut buf = BytesMut::from(&(1024i32).to_be_bytes()[..]);
        assert!(matches!(decode_frame(&mut buf, 1028), Ok(None)));
    }

    #[test]
    fn malformed_prefixes() {
        let mut buf = BytesMut::from(&(-1i32).to_be_bytes()[..]);
        assert!(matches!(
            decode_frame(&mut buf, FRAME_SIZE_MAX_BYTES),
            Err(CodecError::NegativeLength { length: -1 })
        ));
        let mut buf = BytesMut::from(&[0u8, 0, 0, 3, 0, 0, 0][..]);
        assert!(matches!(
            decode_frame(&mut buf, FRAME_SIZE_MAX_BYTES),
            Err(CodecError::FrameTooShort { length_bytes: 3 })
        ));
        let mut buf = BytesMut::from(&[0u8, 0, 0, 6, 0, 0, 0, 3, b'{', b'}'][..]);
        assert!(matches!(
            decode_frame(&mut buf, FRAME_SIZE_MAX_BYTES),
            Err(CodecError::BadHeaderLength {
                header_len_bytes: 3,
                available_bytes: 2
            })
        ));
        let mut buf = BytesMut::from(&[0u8, 0, 0, 6, 2, 0, 0, 2, b'{', b'}'][..]);
        assert!(matches!(
            decode_frame(&mut buf, FRAME_SIZE_MAX_BYTES),
            Err(CodecError::UnknownSerializeType(2))
        ));
    }

    #[test]
    fn encode_rejects_oversize_and_leaves_out_untouched() {
        let cmd = RemotingCommand::request(11);
        let mut out = BytesMut::from(&b"prev"[..]);
        assert!(matches!(
            encode_frame_header(&cmd, FRAME_SIZE_MAX_BYTES, &mut out),
            Err(CodecError::FrameTooLarge { .. })
        ));
        assert_eq!(&out[..], b"prev");
        let pop = RemotingCommand::request(200_050).with_serialize_type(SerializeType::RocketMq);
        assert!(encode_frame(&pop, &mut out).is_err());
        assert_eq!(&out[..], b"prev");
    }

    #[test]
    fn decoded_language_and_type() {
        let mut cmd = sample(SerializeType::RocketMq);
        cmd.language = LanguageCode::Go;
        let mut wire = BytesMut::new();
        encode_frame(&cmd, &mut wire).expect("encodes");
        assert_eq!(wire[4], 1, "type byte");
        let got = decode_frame(&mut wire, FRAME_SIZE_MAX_BYTES)
            .expect("ok")
            .expect("whole");
        assert_eq!(got.language, LanguageCode::Go);
        assert_eq!(got.serialize_type, SerializeType::RocketMq);
    }
}
