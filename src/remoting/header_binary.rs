//! The ROCKETMQ binary header (SerializeType 1).
//!
//! Java source: `RocketMQSerializable.rocketMQProtocolEncode/Decode`. Layout (big-endian):
//!
//! | field | width |
//! |---|---|
//! | code | i16 |
//! | language | u8 (LanguageCode code) |
//! | version | i16 |
//! | opaque | i32 |
//! | flag | i32 |
//! | remarkLen, remark | i32, UTF-8 |
//! | extLen | i32: byte length of the entries that follow |
//! | entries | repeated `keyLen: i16, key, valLen: i32, val` |
//!
//! **Empty strings are absent.** Java writes an empty remark as length 0 and decodes every
//! length-0 string as `null`, so `""` does not survive this encoding: an empty remark decodes as
//! `None`, and an ext entry whose key or value is empty is dropped on decode (a Java `map.put`
//! of a null key/value is invisible to header parsing). We do the same, and skip such entries
//! on encode.
//!
//! Decoding is strict about lengths: a negative length, or one that runs past the end of the
//! header (or an entry past the end of the ext section), is a [`CodecError::BadBinaryHeader`].
//! Bytes after the ext section are ignored, as Java does. Invalid UTF-8 is replaced by U+FFFD
//! like Java's decoder.

use bytes::{BufMut, Bytes, BytesMut};

use super::command::{LanguageCode, RemotingCommand, SerializeType};
use super::error::CodecError;
use super::ext_fields::{static_key, ExtFieldsDecoder, ExtKey};

/// code(2) + language(1) + version(2) + opaque(4) + flag(4) + remarkLen(4) + extLen(4).
pub const BINARY_HEADER_FIXED_BYTES: usize = 21;

/// Bytes of one ext field in a typical request header (2 + 4 bytes of lengths, a key and a
/// value; a SEND_MESSAGE_V2 header's one-letter keys average about 15 bytes a field), to size
/// the list before decoding.
const EXT_FIELD_BYTES_ESTIMATE: usize = 16;
/// Most ext fields the decoder makes room for up front; more grow the list as they come.
const EXT_FIELDS_PRESIZE_MAX: usize = 64;

/// Decodes a binary header into a command with an empty body and `serialize_type` ROCKETMQ.
pub fn decode_binary_header(header: &[u8]) -> Result<RemotingCommand, CodecError> {
    let mut reader = Reader { header, offset: 0 };
    let code = i32::from(reader.i16()?);
    let language = LanguageCode::from_code(reader.u8()?);
    let version = i32::from(reader.i16()?);
    let opaque = reader.i32()?;
    let flag = reader.i32()?;
    let remark_len = reader.len_i32("negative remark length")?;
    let remark = reader.string(remark_len, header.len(), "remark runs past the header end")?;

    let ext_len = reader.len_i32("negative ext fields length")?;
    let ext_end = reader
        .offset
        .checked_add(ext_len)
        .filter(|end| *end <= header.len())
        .ok_or(reader.error("ext fields run past the header end"))?;
    // Sized from the fields' bytes, so the list does not grow field by field (it showed in the
    // network threads' profiles); bounded, so a large header cannot make it allocate much.
    let capacity = (ext_len / EXT_FIELD_BYTES_ESTIMATE).min(EXT_FIELDS_PRESIZE_MAX);
    let mut ext_fields = ExtFieldsDecoder::with_capacity(capacity);
    while reader.offset < ext_end {
        let key_len =
            usize::try_from(reader.i16()?).map_err(|_| reader.error("negative ext key length"))?;
        let key = reader.key(key_len, ext_end, "ext key runs past the ext fields end")?;
        let value_len = reader.len_i32("negative ext value length")?;
        let value = reader.string(value_len, ext_end, "ext value runs past the ext fields end")?;
        if let (Some(key), Some(value)) = (key, value) {
            // Last wins on duplicate keys, like Java's `map.put`.
            ext_fields.push(key, value);
        }
    }
    let ext_fields = ext_fields.finish();

    Ok(RemotingCommand {
        code,
        language,
        version,
        opaque,
        flag,
        remark,
        ext_fields,
        body: Bytes::new(),
        serialize_type: SerializeType::RocketMq,
    })
}

/// Appends the binary header of `cmd` to `out`. On error `out` is left as it was.
///
/// Unlike Java, which silently truncates with a `(short)` cast, a code or version outside
/// `i16` is an error: a truncated code would be dispatched as a different request.
pub fn encode_binary_header(cmd: &RemotingCommand, out: &mut BytesMut) -> Result<(), CodecError> {
    let code = i16::try_from(cmd.code).map_err(|_| CodecError::NotBinaryEncodable {
        field: "code",
        value: i64::from(cmd.code),
        reason: "the binary header stores the code as i16",
    })?;
    let version = i16::try_from(cmd.version).map_err(|_| CodecError::NotBinaryEncodable {
        field: "version",
        value: i64::from(cmd.version),
        reason: "the binary header stores the version as i16",
    })?;
    let mut fields = cmd.ext_fields.sorted();
    fields.retain(|(key, value)| !key.is_empty() && !value.is_empty());
    let mut ext_len_bytes: usize = 0;
    for (key, value) in &fields {
        if i16::try_from(key.len()).is_err() {
            return Err(CodecError::NotBinaryEncodable {
                field: "ext key length",
                value: i64::try_from(key.len()).unwrap_or(i64::MAX),
                reason: "keys are limited to i16::MAX bytes",
            });
        }
        if i32::try_from(value.len()).is_err() {
            return Err(CodecError::NotBinaryEncodable {
                field: "ext value length",
                value: i64::MAX,
                reason: "longer than i32::MAX bytes",
            });
        }
        ext_len_bytes = ext_len_bytes
            .saturating_add(2 + key.len() + 4)
            .saturating_add(value.len());
    }
    let remark = cmd.remark.as_deref().unwrap_or("");
    let remark_len = i32::try_from(remark.len()).map_err(|_| CodecError::NotBinaryEncodable {
        field: "remark length",
        value: i64::try_from(remark.len()).unwrap_or(i64::MAX),
        reason: "longer than i32::MAX bytes",
    })?;
    let ext_len = i32::try_from(ext_len_bytes).map_err(|_| CodecError::NotBinaryEncodable {
        field: "ext fields length",
        value: i64::try_from(ext_len_bytes).unwrap_or(i64::MAX),
        reason: "longer than i32::MAX bytes",
    })?;

    out.reserve(BINARY_HEADER_FIXED_BYTES + remark.len() + ext_len_bytes);
    out.put_i16(code);
    out.put_u8(cmd.language.code());
    out.put_i16(version);
    out.put_i32(cmd.opaque);
    out.put_i32(cmd.flag);
    out.put_i32(remark_len);
    out.put_slice(remark.as_bytes());
    out.put_i32(ext_len);
    for (key, value) in fields {
        // Both lengths were range-checked above.
        out.put_i16(key.len() as i16);
        out.put_slice(key.as_bytes());
        out.put_i32(value.len() as i32);
        out.put_slice(value.as_bytes());
    }
    Ok(())
}

/// `bytes` as text, invalid UTF-8 replaced by U+FFFD. Valid UTF-8 (every header a client writes)
/// is copied as is; `from_utf8_lossy` alone walks the bytes chunk by chunk, which showed in the
/// network threads' profiles.
fn text_of(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.to_owned(),
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    }
}

/// A bounds-checked big-endian cursor over the header bytes.
struct Reader<'a> {
    header: &'a [u8],
    offset: usize,
}

impl<'a> Reader<'a> {
    fn error(&self, reason: &'static str) -> CodecError {
        CodecError::BadBinaryHeader {
            reason,
            offset_bytes: self.offset,
        }
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N], CodecError> {
        let bytes = self
            .header
            .get(self.offset..self.offset + N)
            .ok_or(self.error("header ends inside a fixed-width field"))?;
        self.offset += N;
        let mut array = [0u8; N];
        array.copy_from_slice(bytes);
        Ok(array)
    }

    fn u8(&mut self) -> Result<u8, CodecError> {
        Ok(self.take::<1>()?[0])
    }

    fn i16(&mut self) -> Result<i16, CodecError> {
        Ok(i16::from_be_bytes(self.take()?))
    }

    fn i32(&mut self) -> Result<i32, CodecError> {
        Ok(i32::from_be_bytes(self.take()?))
    }

    /// An i32 length that must not be negative.
    fn len_i32(&mut self, negative: &'static str) -> Result<usize, CodecError> {
        let start = self.offset;
        let length = self.i32()?;
        usize::try_from(length).map_err(|_| CodecError::BadBinaryHeader {
            reason: negative,
            offset_bytes: start,
        })
    }

    /// An ext key: `'static` when [`static_key`] knows it, else as [`Reader::string`].
    fn key(
        &mut self,
        len: usize,
        end: usize,
        past_end: &'static str,
    ) -> Result<Option<ExtKey>, CodecError> {
        Ok(self.bytes(len, end, past_end)?.map(|bytes| {
            static_key(bytes).map_or_else(|| ExtKey::Owned(text_of(bytes)), ExtKey::Borrowed)
        }))
    }

    /// `len` bytes of UTF-8 ending at or before `end`; length 0 is `None` (Java null).
    fn string(
        &mut self,
        len: usize,
        end: usize,
        past_end: &'static str,
    ) -> Result<Option<String>, CodecError> {
        Ok(self.bytes(len, end, past_end)?.map(text_of))
    }

    /// The next `len` bytes, which must end at or before `end`; length 0 is `None`.
    fn bytes(
        &mut self,
        len: usize,
        end: usize,
        past_end: &'static str,
    ) -> Result<Option<&'a [u8]>, CodecError> {
        if len == 0 {
            return Ok(None);
        }
        let stop = self
            .offset
            .checked_add(len)
            .filter(|stop| *stop <= end)
            .ok_or(self.error(past_end))?;
        let bytes = &self.header[self.offset..stop];
        self.offset = stop;
        Ok(Some(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(cmd: &RemotingCommand) -> Vec<u8> {
        let mut out = BytesMut::new();
        encode_binary_header(cmd, &mut out).expect("encodes");
        out.to_vec()
    }

    #[test]
    fn heart_beat_golden() {
        // A frame as Java `RocketMQSerializable.rocketMQProtocolEncode` writes it: HEART_BEAT, JAVA, version 479, opaque 7, flag 0.
        let cmd = RemotingCommand::request(34)
            .with_opaque(7)
            .with_serialize_type(SerializeType::RocketMq);
        let expected = [
            0x00, 0x22, 0x00, 0x01, 0xDF, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        assert_eq!(encode(&cmd), expected);
        assert_eq!(decode_binary_header(&expected).expect("decodes"), cmd);
    }

    #[test]
    fn remark_and_ext_layout() {
        let cmd = RemotingCommand::request(-3)
            .with_remark("hi")
            .with_ext("b", "22")
            .with_ext("a", "1")
            .with_ext("empty", "")
            .with_serialize_type(SerializeType::RocketMq);
        let mut expected = vec![0xFF, 0xFD, 0, 0x01, 0xDF, 0, 0, 0, 0, 0, 0, 0, 0];
        expected.extend_from_slice(&[0, 0, 0, 2, b'h', b'i']);
        expected.extend_from_slice(&[0, 0, 0, 17]);
        expected.extend_from_slice(&[0, 1, b'a', 0, 0, 0, 1, b'1']);
        expected.extend_from_slice(&[0, 1, b'b', 0, 0, 0, 2, b'2', b'2']);
        assert_eq!(encode(&cmd), expected);
        let back = decode_binary_header(&expected).expect("decodes");
        assert_eq!(back.code, -3);
        assert_eq!(back.remark.as_deref(), Some("hi"));
        assert_eq!(back.ext_fields.len(), 2);
        assert_eq!(back.ext_fields["b"], "22");
    }

    #[test]
    fn empty_strings_decode_as_absent() {
        let cmd = RemotingCommand::request(10).with_remark("");
        let bytes = encode(&cmd);
        assert_eq!(decode_binary_header(&bytes).expect("decodes").remark, None);
        // Hand-built entry with an empty value and one with an empty key: both dropped.
        let mut header = vec![0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        header.extend_from_slice(&[0, 0, 0, 14]);
        header.extend_from_slice(&[0, 1, b'k', 0, 0, 0, 0]);
        header.extend_from_slice(&[0, 0, 0, 0, 0, 1, b'v']);
        assert!(decode_binary_header(&header)
            .expect("decodes")
            .ext_fields
            .is_empty());
    }

    #[test]
    fn rejects_codes_outside_i16() {
        let cmd = RemotingCommand::request(200_050);
        let mut out = BytesMut::from(&b"keep"[..]);
        assert!(matches!(
            encode_binary_header(&cmd, &mut out),
            Err(CodecError::NotBinaryEncodable { field: "code", .. })
        ));
        assert_eq!(&out[..], b"keep");
    }

    #[test]
    fn rejects_lengths_past_the_end() {
        let base = encode(&RemotingCommand::request(10));
        // Truncated fixed part.
        for cut in 0..BINARY_HEADER_FIXED_BYTES {
            assert!(decode_binary_header(&base[..cut]).is_err(), "cut {cut}");
        }
        // Remark length past the end.
        let mut header = base.clone();
        header[13..17].copy_from_slice(&5i32.to_be_bytes());
        assert!(matches!(
            decode_binary_header(&header),
            Err(CodecError::BadBinaryHeader {
                offset_bytes: 17,
                ..
            })
        ));
        // Negative remark length.
        header[13..17].copy_from_slice(&(-1i32).to_be_bytes());
        assert!(matches!(
            decode_binary_header(&header),
            Err(CodecError::BadBinaryHeader {
                offset_bytes: 13,
                ..
            })
        ));
        // Ext length past the end.
        let mut header = base.clone();
        header[17..21].copy_from_slice(&1i32.to_be_bytes());
        assert!(decode_binary_header(&header).is_err());
        // Ext key length past the ext section.
        let mut header = base[..17].to_vec();
        header.extend_from_slice(&[0, 0, 0, 3, 0, 9, b'k']);
        assert!(decode_binary_header(&header).is_err());
        // Ext value length past the ext section (but within the header).
        let mut header = base[..17].to_vec();
        header.extend_from_slice(&[0, 0, 0, 8, 0, 1, b'k', 0, 0, 0, 2, b'v', b'w', b'x']);
        assert!(decode_binary_header(&header).is_err());
        // Negative key length.
        let mut header = base[..17].to_vec();
        header.extend_from_slice(&[0, 0, 0, 2, 0xFF, 0xFF]);
        assert!(decode_binary_header(&header).is_err());
        // Trailing bytes after the ext section are ignored like Java.
        let mut header = base.clone();
        header.extend_from_slice(b"junk");
        assert!(decode_binary_header(&header).is_ok());
    }
}
