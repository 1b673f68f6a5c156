//! Golden-byte tests for the remoting codec. Every expected frame here is written out by hand
//! from the layout Java `RemotingCommand` and `RocketMQSerializable` write, as docs/PROTOCOL.md
//! states it (not produced by the encoder under test).

use bytes::{BufMut, Bytes, BytesMut};
use proptest::prelude::*;
use ringmq::remoting::{
    decode_frame, encode_frame, encode_frame_header, request_code, response_code, CodecError,
    ExtFields, LanguageCode, RemotingCommand, SerializeType, CURRENT_VERSION, FLAG_ONEWAY,
    FLAG_RESPONSE, FRAME_SIZE_MAX_BYTES,
};

/// A frame built by hand: length prefix, header word, header, body.
fn hand_frame(serialize_type: u8, header: &[u8], body: &[u8]) -> BytesMut {
    let mut frame = BytesMut::new();
    frame.put_u32((4 + header.len() + body.len()) as u32);
    frame.put_u32((u32::from(serialize_type) << 24) | header.len() as u32);
    frame.put_slice(header);
    frame.put_slice(body);
    frame
}

fn decode_one(mut bytes: BytesMut) -> RemotingCommand {
    let cmd = decode_frame(&mut bytes, FRAME_SIZE_MAX_BYTES)
        .expect("valid frame")
        .expect("whole frame");
    assert!(bytes.is_empty(), "frame fully consumed");
    cmd
}

fn decode_err(mut bytes: BytesMut) -> CodecError {
    match decode_frame(&mut bytes, FRAME_SIZE_MAX_BYTES) {
        Err(error) => error,
        Ok(other) => panic!("expected an error, got {other:?}"),
    }
}

fn encode(cmd: &RemotingCommand) -> Vec<u8> {
    let mut out = BytesMut::new();
    encode_frame(cmd, &mut out).expect("encodes");
    out.to_vec()
}

// ---------------------------------------------------------------------------------------------
// Golden frames

#[test]
fn heart_beat_binary_frame_of_the_reference() {
    // A binary-header frame: HEART_BEAT (34), JAVA, version 479, opaque 7, flag 0, no remark, no ext.
    #[rustfmt::skip]
    let expected: [u8; 29] = [
        0x00, 0x00, 0x00, 0x19,             // length = 4 + 21
        0x01, 0x00, 0x00, 0x15,             // header word: ROCKETMQ, 21 bytes
        0x00, 0x22,                         // code 34
        0x00,                               // JAVA
        0x01, 0xDF,                         // version 479
        0x00, 0x00, 0x00, 0x07,             // opaque
        0x00, 0x00, 0x00, 0x00,             // flag
        0x00, 0x00, 0x00, 0x00,             // remark length
        0x00, 0x00, 0x00, 0x00,             // ext length
    ];
    let cmd = RemotingCommand::request(request_code::HEART_BEAT)
        .with_opaque(7)
        .with_serialize_type(SerializeType::RocketMq);
    assert_eq!(encode(&cmd), expected);
    assert_eq!(decode_one(BytesMut::from(&expected[..])), cmd);
}

#[test]
fn json_pull_request_frame_byte_for_byte() {
    let header = br#"{"code":11,"extFields":{"consumerGroup":"cg","queueId":"0","topic":"T"},"flag":0,"language":"JAVA","opaque":42,"serializeTypeCurrentRPC":"JSON","version":479}"#;
    assert_eq!(header.len(), 158);
    let mut expected = vec![0x00, 0x00, 0x00, 0xA4, 0x00, 0x00, 0x00, 0x9E];
    expected.extend_from_slice(header);
    expected.extend_from_slice(b"hi");

    let cmd = RemotingCommand::request(request_code::PULL_MESSAGE)
        .with_opaque(42)
        .with_ext("topic", "T")
        .with_ext("queueId", 0)
        .with_ext("consumerGroup", "cg")
        .with_body(Bytes::from_static(b"hi"));
    assert_eq!(encode(&cmd), expected);
    assert_eq!(decode_one(BytesMut::from(&expected[..])), cmd);
}

#[test]
fn json_error_response_frame_byte_for_byte() {
    let request = RemotingCommand::request(999).with_opaque(5);
    let response = RemotingCommand::response_to(
        &request,
        response_code::REQUEST_CODE_NOT_SUPPORTED,
        Some(" request type 999 not supported".into()),
    );
    let header = br#"{"code":3,"flag":1,"language":"JAVA","opaque":5,"remark":" request type 999 not supported","serializeTypeCurrentRPC":"JSON","version":479}"#;
    let expected = hand_frame(0, header, b"");
    assert_eq!(encode(&response), expected.to_vec());
    let back = decode_one(expected);
    assert_eq!(back, response);
    assert_eq!(back.flag, FLAG_RESPONSE);
}

#[test]
fn binary_frame_with_remark_ext_and_body() {
    #[rustfmt::skip]
    let header: Vec<u8> = vec![
        0x00, 0x01,                         // code SYSTEM_ERROR
        0x00,                               // JAVA
        0x01, 0xDF,                         // 479
        0x00, 0x00, 0x00, 0x09,             // opaque
        0x00, 0x00, 0x00, 0x01,             // flag: response
        0x00, 0x00, 0x00, 0x03, b'b', b'a', b'd',
        0x00, 0x00, 0x00, 0x13,             // ext length 19
        0x00, 0x05, b'q', b'u', b'e', b'u', b'e', 0x00, 0x00, 0x00, 0x01, b'3',
        0x00, 0x01, b't', 0x00, 0x00, 0x00, 0x00, // empty value: dropped on decode
    ];
    let frame = hand_frame(1, &header, b"\x00\x01");
    let cmd = decode_one(frame);
    assert_eq!(cmd.code, 1);
    assert_eq!(cmd.opaque, 9);
    assert!(cmd.is_response());
    assert_eq!(cmd.remark.as_deref(), Some("bad"));
    assert_eq!(
        cmd.ext_fields,
        ExtFields::from_iter([("queue".to_string(), "3".to_string())])
    );
    assert_eq!(&cmd.body[..], b"\x00\x01");
    assert_eq!(cmd.serialize_type, SerializeType::RocketMq);
}

#[test]
fn frame_header_for_zero_copy_body() {
    let cmd = RemotingCommand::request(request_code::HEART_BEAT)
        .with_opaque(7)
        .with_serialize_type(SerializeType::RocketMq);
    let mut out = BytesMut::new();
    encode_frame_header(&cmd, 100, &mut out).expect("encodes");
    assert_eq!(&out[..8], &[0x00, 0x00, 0x00, 0x7D, 0x01, 0x00, 0x00, 0x15]);
    assert_eq!(out.len(), 8 + 21);
}

// ---------------------------------------------------------------------------------------------
// Round trips

fn rich_command(serialize_type: SerializeType) -> RemotingCommand {
    let mut cmd = RemotingCommand::request(request_code::SEND_MESSAGE_V2)
        .with_opaque(i32::MIN)
        .with_remark("ünïcode \"quoted\" \\ \n")
        .with_ext("a", "pg")
        .with_ext("i", "KEYS\u{1}k1 k2\u{2}TAGS\u{1}a\u{2}")
        .with_ext("中文", "值")
        .with_body(Bytes::from_static(b"\x00\xFF body"))
        .with_serialize_type(serialize_type)
        .oneway();
    cmd.language = LanguageCode::Rust;
    cmd.version = 401;
    cmd
}

#[test]
fn round_trip_json_and_binary() {
    for serialize_type in [SerializeType::Json, SerializeType::RocketMq] {
        let cmd = rich_command(serialize_type);
        let bytes = encode(&cmd);
        assert_eq!(bytes[4], serialize_type.code());
        let back = decode_one(BytesMut::from(&bytes[..]));
        assert_eq!(back, cmd);
        assert_eq!(back.flag, FLAG_ONEWAY);
        // Re-encoding the decoded command is byte-identical (deterministic key order).
        assert_eq!(encode(&back), bytes);
    }
}

#[test]
fn several_frames_in_one_buffer() {
    let mut buf = BytesMut::new();
    let first = rich_command(SerializeType::Json);
    let second = rich_command(SerializeType::RocketMq).with_opaque(2);
    encode_frame(&first, &mut buf).expect("encodes");
    encode_frame(&second, &mut buf).expect("encodes");
    buf.put_slice(&[0x00, 0x00]); // start of a third frame
    assert_eq!(
        decode_frame(&mut buf, FRAME_SIZE_MAX_BYTES).expect("ok"),
        Some(first)
    );
    assert_eq!(
        decode_frame(&mut buf, FRAME_SIZE_MAX_BYTES).expect("ok"),
        Some(second)
    );
    assert_eq!(
        decode_frame(&mut buf, FRAME_SIZE_MAX_BYTES).expect("ok"),
        None
    );
    assert_eq!(&buf[..], &[0x00, 0x00]);
}

// ---------------------------------------------------------------------------------------------
// Lenient JSON decoding

fn decode_json(header: &str) -> RemotingCommand {
    decode_one(hand_frame(0, header.as_bytes(), b""))
}

#[test]
fn lenient_numeric_and_boolean_ext_values() {
    let cmd = decode_json(
        r#"{"code":11,"extFields":{"queueId":3,"queueOffset":-12345678901,"unitMode":false,"batch":true},"flag":0,"language":"GO","opaque":1,"serializeTypeCurrentRPC":"JSON","version":317}"#,
    );
    assert_eq!(cmd.ext_fields["queueId"], "3");
    assert_eq!(cmd.ext_i64("queueOffset"), Ok(-12_345_678_901));
    assert_eq!(cmd.ext_fields["unitMode"], "false");
    assert_eq!(cmd.ext_fields["batch"], "true");
    assert!(cmd.ext_bool("batch"));
    assert_eq!(cmd.language, LanguageCode::Go);
}

#[test]
fn lenient_missing_optional_keys() {
    // No serializeTypeCurrentRPC, remark, extFields, language or version.
    let cmd = decode_json(r#"{"code":34,"flag":0,"opaque":3}"#);
    assert_eq!(cmd.code, 34);
    assert_eq!(cmd.opaque, 3);
    assert_eq!(cmd.remark, None);
    assert!(cmd.ext_fields.is_empty());
    assert_eq!(cmd.language, LanguageCode::Java);
    assert_eq!(cmd.version, 0);
    assert_eq!(cmd.serialize_type, SerializeType::Json);
}

#[test]
fn lenient_serialize_type_field_is_not_authoritative() {
    // The key says ROCKETMQ but the frame says JSON: the frame wins (Java overwrites the key).
    let cmd = decode_json(r#"{"code":34,"serializeTypeCurrentRPC":"ROCKETMQ"}"#);
    assert_eq!(cmd.serialize_type, SerializeType::Json);
}

#[test]
fn lenient_cpp_client_header_with_acl_fields_and_trailing_newline() {
    // C++ 2.x style: jsoncpp FastWriter (trailing newline), empty remark, ACL keys with empty
    // values, keys in insertion order, plus keys unknown to us.
    let cmd = decode_json(
        "{\"code\":310,\"language\":\"CPP\",\"version\":401,\"opaque\":77,\"flag\":0,\"remark\":\"\",\"extFields\":{\"AccessKey\":\"\",\"Signature\":\"\",\"OnsChannel\":\"ALIYUN\",\"a\":\"pg\",\"b\":\"T\"},\"unknownTopLevel\":{\"x\":[1,2]}}\n",
    );
    assert_eq!(cmd.code, request_code::SEND_MESSAGE_V2);
    assert_eq!(cmd.language, LanguageCode::Cpp);
    assert_eq!(cmd.remark.as_deref(), Some(""));
    assert_eq!(cmd.ext_str("a"), Ok("pg"));
    assert_eq!(cmd.ext_str("AccessKey"), Ok(""));
    assert_eq!(cmd.ext_fields.len(), 5);
}

#[test]
fn lenient_trailing_whitespace_and_unknown_language() {
    let cmd = decode_json("{\"code\":1,\"language\":\"KOTLIN\"} \r\n\t");
    assert_eq!(cmd.language, LanguageCode::Other);
    // Responses are answered as JAVA.
    let resp = RemotingCommand::response_to(&cmd, 0, None);
    assert_eq!(resp.language, LanguageCode::Java);
}

// ---------------------------------------------------------------------------------------------
// Malformed input

#[test]
fn truncated_frames_need_more_bytes() {
    let bytes = encode(&rich_command(SerializeType::RocketMq));
    for cut in 0..bytes.len() {
        let mut buf = BytesMut::from(&bytes[..cut]);
        assert!(
            matches!(decode_frame(&mut buf, FRAME_SIZE_MAX_BYTES), Ok(None)),
            "cut at {cut}"
        );
        assert_eq!(buf.len(), cut, "nothing consumed");
    }
}

#[test]
fn truncated_binary_header_inside_a_whole_frame() {
    // Header word says 10 bytes, fewer than the 21 fixed bytes.
    let frame = hand_frame(1, &[0u8; 10], b"");
    assert!(matches!(
        decode_err(frame),
        CodecError::BadBinaryHeader { .. }
    ));
}

#[test]
fn oversize_frame() {
    let mut buf = BytesMut::new();
    buf.put_u32(FRAME_SIZE_MAX_BYTES as u32); // + 4 prefix bytes = one over the cap
    match decode_frame(&mut buf, FRAME_SIZE_MAX_BYTES) {
        Err(CodecError::FrameTooLarge {
            size_bytes,
            max_bytes,
        }) => {
            assert_eq!(size_bytes, FRAME_SIZE_MAX_BYTES + 4);
            assert_eq!(max_bytes, FRAME_SIZE_MAX_BYTES);
        }
        other => panic!("{other:?}"),
    }
    let mut buf = BytesMut::from(&[0x7F, 0xFF, 0xFF, 0xFF][..]);
    assert!(matches!(
        decode_frame(&mut buf, FRAME_SIZE_MAX_BYTES),
        Err(CodecError::FrameTooLarge { .. })
    ));
}

#[test]
fn negative_and_too_short_lengths() {
    assert!(matches!(
        decode_err(BytesMut::from(&[0x80, 0x00, 0x00, 0x00][..])),
        CodecError::NegativeLength { length: i32::MIN }
    ));
    assert!(matches!(
        decode_err(BytesMut::from(&[0x00, 0x00, 0x00, 0x00][..])),
        CodecError::FrameTooShort { length_bytes: 0 }
    ));
}

#[test]
fn bad_header_length() {
    // length 6 = header word + 2 bytes, but the word claims a 3-byte header.
    let frame = BytesMut::from(&[0, 0, 0, 6, 0, 0, 0, 3, b'{', b'}'][..]);
    assert!(matches!(
        decode_err(frame),
        CodecError::BadHeaderLength {
            header_len_bytes: 3,
            available_bytes: 2
        }
    ));
    // The maximum 24-bit header length in a tiny frame.
    let frame = BytesMut::from(&[0, 0, 0, 4, 1, 0xFF, 0xFF, 0xFF][..]);
    assert!(matches!(
        decode_err(frame),
        CodecError::BadHeaderLength { .. }
    ));
}

#[test]
fn unknown_serialize_type() {
    assert!(matches!(
        decode_err(hand_frame(7, b"{}", b"")),
        CodecError::UnknownSerializeType(7)
    ));
}

#[test]
fn garbage_json() {
    for header in [&b"not json"[..], b"{\"code\":", b"", b"{} {}", b"\xFF\xFE"] {
        assert!(
            matches!(
                decode_err(hand_frame(0, header, b"")),
                CodecError::HeaderJson { .. }
            ),
            "{header:?}"
        );
    }
    for header in [
        &b"[]"[..],
        b"42",
        b"{\"code\":\"eleven\"}",
        b"{\"extFields\":\"x\"}",
    ] {
        assert!(
            matches!(
                decode_err(hand_frame(0, header, b"")),
                CodecError::HeaderJsonField { .. }
            ),
            "{header:?}"
        );
    }
}

#[test]
fn binary_string_lengths_past_end() {
    let fixed_prefix: [u8; 13] = [0, 34, 0, 1, 0xDF, 0, 0, 0, 7, 0, 0, 0, 0];
    // Remark length 100 in a 21-byte header.
    let mut header = fixed_prefix.to_vec();
    header.extend_from_slice(&[0, 0, 0, 100, 0, 0, 0, 0]);
    assert!(matches!(
        decode_err(hand_frame(1, &header, b"")),
        CodecError::BadBinaryHeader {
            offset_bytes: 17,
            ..
        }
    ));
    // Ext length past the header end (the body must not count).
    let mut header = fixed_prefix.to_vec();
    header.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 9, 0, 1, b'k']);
    assert!(matches!(
        decode_err(hand_frame(1, &header, b"body bytes")),
        CodecError::BadBinaryHeader { .. }
    ));
    // Value length past the ext section.
    let mut header = fixed_prefix.to_vec();
    header.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 8, 0, 1, b'k', 0, 0, 0, 9, b'v']);
    assert!(matches!(
        decode_err(hand_frame(1, &header, b"")),
        CodecError::BadBinaryHeader { .. }
    ));
    // Negative remark length.
    let mut header = fixed_prefix.to_vec();
    header.extend_from_slice(&[0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0]);
    assert!(matches!(
        decode_err(hand_frame(1, &header, b"")),
        CodecError::BadBinaryHeader { .. }
    ));
}

#[test]
fn request_version_constant() {
    assert_eq!(CURRENT_VERSION, 479);
    assert_eq!(RemotingCommand::request(0).version, CURRENT_VERSION);
}

// ---------------------------------------------------------------------------------------------
// Properties

fn arb_command() -> impl Strategy<Value = RemotingCommand> {
    (
        any::<i16>(),
        0u8..14,
        any::<i16>(),
        any::<i32>(),
        0i32..4,
        proptest::option::of(".{1,20}"),
        proptest::collection::hash_map(".{1,8}", ".{1,12}", 0..6),
        proptest::collection::vec(any::<u8>(), 0..64),
        any::<bool>(),
    )
        .prop_map(
            |(code, language, version, opaque, flag, remark, ext_fields, body, binary)| {
                RemotingCommand {
                    code: i32::from(code),
                    language: LanguageCode::from_code(language),
                    version: i32::from(version),
                    opaque,
                    flag,
                    remark,
                    ext_fields: ext_fields.into_iter().collect(),
                    body: Bytes::from(body),
                    serialize_type: if binary {
                        SerializeType::RocketMq
                    } else {
                        SerializeType::Json
                    },
                }
            },
        )
}

proptest! {
    #[test]
    fn decode_frame_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let mut buf = BytesMut::from(&bytes[..]);
        // Keep decoding until an error or a need for more bytes; each step must make progress.
        while let Ok(Some(_)) = decode_frame(&mut buf, 256) {}
    }

    #[test]
    fn decode_frame_never_panics_on_plausible_frames(
        serialize_type in 0u8..3,
        header in proptest::collection::vec(any::<u8>(), 0..128),
        body in proptest::collection::vec(any::<u8>(), 0..16),
        extra_header_len in 0u32..4,
    ) {
        let mut frame = hand_frame(serialize_type, &header, &body);
        // Sometimes lie about the header length.
        let word = (u32::from(serialize_type) << 24) | (header.len() as u32 + extra_header_len);
        frame[4..8].copy_from_slice(&word.to_be_bytes());
        let _ = decode_frame(&mut frame, FRAME_SIZE_MAX_BYTES);
    }

    #[test]
    fn encode_decode_round_trip(cmd in arb_command()) {
        let mut buf = BytesMut::new();
        encode_frame(&cmd, &mut buf).expect("encodes");
        let back = decode_frame(&mut buf, FRAME_SIZE_MAX_BYTES)
            .expect("decodes")
            .expect("whole frame");
        prop_assert!(buf.is_empty());
        prop_assert_eq!(back, cmd);
    }
}
