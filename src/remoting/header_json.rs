//! The JSON header (SerializeType 0), as written and read by Java's fastjson 1.x.
//!
//! Java source: `RemotingSerializable.encode/decode` applied to the `RemotingCommand` bean.
//!
//! Decoding is lenient like fastjson, because C++, Go, Python and Rust clients each write it a
//! little differently:
//! - every key is optional; missing `code`/`opaque`/`flag`/`version` are 0 and a missing
//!   `language` is JAVA (the Java bean's field defaults); unknown keys are ignored;
//! - ints may be JSON numbers or numeric strings;
//! - `language` may be a name (unknown names are OTHER) or a numeric code;
//! - `extFields` values may be strings, numbers or booleans (stored as their text, booleans as
//!   "true"/"false"); `null` values are dropped (Java's map would return null = absent);
//!   nested objects/arrays are kept as their compact JSON text (fastjson's String conversion);
//! - `serializeTypeCurrentRPC` is ignored: the frame's type byte is authoritative (Java
//!   overwrites the field on decode);
//! - whitespace (e.g. jsoncpp's trailing newline) around the object is allowed;
//! - invalid UTF-8 is replaced by U+FFFD, like Java's `new String(bytes, UTF_8)`.
//!
//! Encoding writes what fastjson writes: keys in alphabetical order, no whitespace, `remark`
//! and `extFields` omitted when absent/empty, ext values always JSON strings. Ext keys are
//! sorted too, so output is deterministic.

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{Map, Value};

use super::command::{ExtFields, LanguageCode, RemotingCommand, SerializeType};
use super::error::CodecError;
use super::ext_fields::{key_of, ExtFieldsDecoder};

/// Decodes a JSON header into a command with an empty body and `serialize_type` JSON.
pub fn decode_json_header(header: &[u8]) -> Result<RemotingCommand, CodecError> {
    let text = String::from_utf8_lossy(header);
    let root: Value =
        serde_json::from_str(&text).map_err(|source| CodecError::HeaderJson { source })?;
    let Value::Object(root) = root else {
        return Err(CodecError::HeaderJsonField {
            field: "<root>",
            reason: "the header is not a JSON object",
        });
    };
    Ok(RemotingCommand {
        code: int_field(&root, "code")?.unwrap_or(0),
        language: language_field(&root)?,
        version: int_field(&root, "version")?.unwrap_or(0),
        opaque: int_field(&root, "opaque")?.unwrap_or(0),
        flag: int_field(&root, "flag")?.unwrap_or(0),
        remark: remark_field(&root)?,
        ext_fields: ext_fields(&root)?,
        body: Bytes::new(),
        serialize_type: SerializeType::Json,
    })
}

/// Appends the JSON header of `cmd` (without length words) to `out`.
pub fn encode_json_header(cmd: &RemotingCommand, out: &mut BytesMut) {
    out.put_slice(b"{\"code\":");
    put_int(out, i64::from(cmd.code));
    if !cmd.ext_fields.is_empty() {
        out.put_slice(b",\"extFields\":{");
        for (index, (key, value)) in cmd.ext_fields.sorted().into_iter().enumerate() {
            if index > 0 {
                out.put_u8(b',');
            }
            put_json_string(out, key);
            out.put_u8(b':');
            put_json_string(out, value);
        }
        out.put_u8(b'}');
    }
    out.put_slice(b",\"flag\":");
    put_int(out, i64::from(cmd.flag));
    out.put_slice(b",\"language\":");
    put_json_string(out, cmd.language.name());
    out.put_slice(b",\"opaque\":");
    put_int(out, i64::from(cmd.opaque));
    if let Some(remark) = &cmd.remark {
        out.put_slice(b",\"remark\":");
        put_json_string(out, remark);
    }
    out.put_slice(b",\"serializeTypeCurrentRPC\":");
    put_json_string(out, cmd.serialize_type.name());
    out.put_slice(b",\"version\":");
    put_int(out, i64::from(cmd.version));
    out.put_u8(b'}');
}

fn put_int(out: &mut BytesMut, value: i64) {
    out.put_slice(value.to_string().as_bytes());
}

/// Writes `value` as a JSON string: `"` and `\` escaped, control characters as `\uXXXX`
/// (short forms for the common ones), everything else as raw UTF-8 like fastjson.
fn put_json_string(out: &mut BytesMut, value: &str) {
    out.put_u8(b'"');
    let bytes = value.as_bytes();
    let mut start = 0;
    for (index, &byte) in bytes.iter().enumerate() {
        let escape: &[u8] = match byte {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0C => b"\\f",
            0x00..=0x1F => b"",
            _ => continue,
        };
        out.put_slice(&bytes[start..index]);
        if escape.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.put_slice(b"\\u00");
            out.put_u8(HEX[usize::from(byte >> 4)]);
            out.put_u8(HEX[usize::from(byte & 0x0F)]);
        } else {
            out.put_slice(escape);
        }
        start = index + 1;
    }
    out.put_slice(&bytes[start..]);
    out.put_u8(b'"');
}

/// An int field: JSON number (integral, in range) or numeric string; `None` if missing or null.
fn int_field(root: &Map<String, Value>, field: &'static str) -> Result<Option<i32>, CodecError> {
    let bad = |reason| CodecError::HeaderJsonField { field, reason };
    match root.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(number)) => {
            let wide = if let Some(integer) = number.as_i64() {
                integer
            } else {
                // fastjson coerces an integral decimal like 11.0; anything else is an error.
                match number.as_f64() {
                    Some(float) if float.fract() == 0.0 && float.abs() <= f64::from(i32::MAX) => {
                        // In range and integral (checked above), so the cast is exact.
                        float as i64
                    }
                    _ => return Err(bad("not a 32-bit integer")),
                }
            };
            i32::try_from(wide)
                .map(Some)
                .map_err(|_| bad("not a 32-bit integer"))
        }
        Some(Value::String(text)) => text
            .parse::<i32>()
            .map(Some)
            .map_err(|_| bad("not a 32-bit integer")),
        Some(_) => Err(bad("expected a number")),
    }
}

fn language_field(root: &Map<String, Value>) -> Result<LanguageCode, CodecError> {
    match root.get("language") {
        None | Some(Value::Null) => Ok(LanguageCode::Java),
        Some(Value::String(name)) => Ok(LanguageCode::from_name(name)),
        Some(Value::Number(number)) => Ok(number
            .as_u64()
            .and_then(|code| u8::try_from(code).ok())
            .map_or(LanguageCode::Other, LanguageCode::from_code)),
        Some(_) => Err(CodecError::HeaderJsonField {
            field: "language",
            reason: "expected a language name",
        }),
    }
}

fn remark_field(root: &Map<String, Value>) -> Result<Option<String>, CodecError> {
    match root.get("remark") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(Value::Number(number)) => Ok(Some(number.to_string())),
        Some(Value::Bool(flag)) => Ok(Some(flag.to_string())),
        Some(_) => Err(CodecError::HeaderJsonField {
            field: "remark",
            reason: "expected a string",
        }),
    }
}

fn ext_fields(root: &Map<String, Value>) -> Result<ExtFields, CodecError> {
    let fields = match root.get("extFields") {
        None | Some(Value::Null) => return Ok(ExtFields::default()),
        Some(Value::Object(fields)) => fields,
        Some(_) => {
            return Err(CodecError::HeaderJsonField {
                field: "extFields",
                reason: "expected an object",
            })
        }
    };
    // JSON object keys are unique already; the decoder keeps a huge header's build linear.
    // Java clients send JSON headers by default, so their known keys are not copied either.
    let mut out = ExtFieldsDecoder::with_capacity(fields.len());
    for (key, value) in fields {
        let text = match value {
            Value::Null => continue,
            Value::String(text) => text.clone(),
            Value::Bool(flag) => flag.to_string(),
            Value::Number(number) => number.to_string(),
            // fastjson converts a nested value to its JSON text when the target is String.
            nested => nested.to_string(),
        };
        out.push(key_of(key), text);
    }
    Ok(out.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(text: &str) -> RemotingCommand {
        decode_json_header(text.as_bytes()).expect("decodes")
    }

    fn encode(cmd: &RemotingCommand) -> String {
        let mut out = BytesMut::new();
        encode_json_header(cmd, &mut out);
        String::from_utf8(out.to_vec()).expect("utf-8")
    }

    #[test]
    fn encodes_like_fastjson() {
        let cmd = RemotingCommand::request(11)
            .with_opaque(42)
            .with_ext("topic", "T")
            .with_ext("queueId", 0)
            .with_ext("consumerGroup", "cg");
        assert_eq!(
            encode(&cmd),
            r#"{"code":11,"extFields":{"consumerGroup":"cg","queueId":"0","topic":"T"},"flag":0,"language":"JAVA","opaque":42,"serializeTypeCurrentRPC":"JSON","version":479}"#
        );
        let resp = RemotingCommand::response_to(&cmd, 1, Some("a \"b\"\n\u{1}é".into()));
        assert_eq!(
            encode(&resp),
            "{\"code\":1,\"flag\":1,\"language\":\"JAVA\",\"opaque\":42,\"remark\":\"a \\\"b\\\"\\n\\u0001é\",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":479}"
        );
    }

    #[test]
    fn round_trips() {
        let cmd = RemotingCommand::request(310)
            .with_opaque(-7)
            .with_remark("r\\\t")
            .with_ext("a", "pg")
            .with_ext("", "")
            .with_ext("i", "KEYS\u{1}k\u{2}")
            .oneway();
        let back = decode(&encode(&cmd));
        assert_eq!(back, cmd);
    }

    #[test]
    fn lenient_values() {
        let cmd = decode(
            "{\"code\":\"10\",\"extFields\":{\"queueId\":3,\"unitMode\":false,\"batch\":true,\"n\":null,\"f\":1.5,\"o\":{\"x\":[1]}},\"opaque\":5.0,\"language\":\"SCALA\"}\r\n\t ",
        );
        assert_eq!(cmd.code, 10);
        assert_eq!(cmd.opaque, 5);
        assert_eq!(cmd.flag, 0);
        assert_eq!(cmd.version, 0);
        assert_eq!(cmd.language, LanguageCode::Other);
        assert_eq!(cmd.remark, None);
        assert_eq!(cmd.ext_fields["queueId"], "3");
        assert_eq!(cmd.ext_fields["unitMode"], "false");
        assert_eq!(cmd.ext_fields["batch"], "true");
        assert_eq!(cmd.ext_fields["f"], "1.5");
        assert_eq!(cmd.ext_fields["o"], "{\"x\":[1]}");
        assert!(!cmd.ext_fields.contains_key("n"));
    }

    #[test]
    fn language_defaults_and_codes() {
        assert_eq!(decode("{}").language, LanguageCode::Java);
        assert_eq!(decode("{\"language\":9}").language, LanguageCode::Go);
        assert_eq!(decode("{\"language\":900}").language, LanguageCode::Other);
        assert_eq!(decode("{\"language\":\"CPP\"}").language, LanguageCode::Cpp);
    }

    #[test]
    fn rejects_bad_shapes() {
        for (text, field) in [
            ("[1]", "<root>"),
            ("{\"code\":true}", "code"),
            ("{\"code\":2147483648}", "code"),
            ("{\"opaque\":\"x\"}", "opaque"),
            ("{\"flag\":1.5}", "flag"),
            ("{\"extFields\":[]}", "extFields"),
            ("{\"remark\":{}}", "remark"),
            ("{\"language\":[]}", "language"),
        ] {
            match decode_json_header(text.as_bytes()) {
                Err(CodecError::HeaderJsonField { field: got, .. }) => {
                    assert_eq!(got, field, "{text}")
                }
                other => panic!("{text}: {other:?}"),
            }
        }
        for text in ["", "{", "{\"code\":1} x", "nul"] {
            assert!(
                matches!(
                    decode_json_header(text.as_bytes()),
                    Err(CodecError::HeaderJson { .. })
                ),
                "{text}"
            );
        }
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        let cmd = decode_json_header(b"{\"remark\":\"a\xFFb\"}").expect("decodes");
        assert_eq!(cmd.remark.as_deref(), Some("a\u{FFFD}b"));
    }
}
