//! The two error types of the codec.
//!
//! [`CodecError`] means the byte stream cannot be trusted any more: the caller closes the
//! connection (Java's `NettyDecoder` does the same). [`HeaderError`] means one request carried a
//! bad custom header: the caller answers that request (Java throws `RemotingCommandException`,
//! which becomes a `SYSTEM_ERROR` response) and keeps the connection.

/// A custom header (extFields) field is missing or unparsable. The field is always named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("the request header field `{field}` is missing")]
    Missing { field: &'static str },
    #[error("the request header field `{field}` has an invalid value `{value}`: {reason}")]
    Invalid {
        field: &'static str,
        value: String,
        reason: &'static str,
    },
}

/// A frame could not be decoded or encoded. On decode the connection must be closed.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// The length prefix is negative (Java reads it as a signed int and rejects it).
    #[error("frame length {length} is negative")]
    NegativeLength { length: i32 },
    /// The length prefix is smaller than the 4-byte header word that must follow it.
    #[error("frame length {length_bytes} is shorter than the 4-byte header word")]
    FrameTooShort { length_bytes: usize },
    /// The frame (length prefix value, or the frame being encoded) exceeds the cap.
    #[error("frame of {size_bytes} bytes exceeds the maximum of {max_bytes} bytes")]
    FrameTooLarge { size_bytes: usize, max_bytes: usize },
    /// The header length in the header word is larger than the frame minus the header word.
    #[error(
        "header length {header_len_bytes} exceeds the {available_bytes} bytes left in the frame"
    )]
    BadHeaderLength {
        header_len_bytes: usize,
        available_bytes: usize,
    },
    /// An encoded header does not fit the 24-bit length of the header word.
    #[error("encoded header of {header_len_bytes} bytes does not fit in 24 bits")]
    HeaderTooLarge { header_len_bytes: usize },
    /// The high byte of the header word is neither 0 (JSON) nor 1 (ROCKETMQ).
    #[error("unknown serialize type {0}")]
    UnknownSerializeType(u8),
    /// The JSON header is not valid JSON or does not have the RemotingCommand shape.
    #[error("bad JSON header: {source}")]
    HeaderJson {
        #[source]
        source: serde_json::Error,
    },
    /// The JSON header parsed but one of its fields has an unusable value.
    #[error("bad JSON header field `{field}`: {reason}")]
    HeaderJsonField {
        field: &'static str,
        reason: &'static str,
    },
    /// The ROCKETMQ binary header is malformed; `offset_bytes` is where in the header.
    #[error("bad ROCKETMQ binary header at byte {offset_bytes}: {reason}")]
    BadBinaryHeader {
        reason: &'static str,
        offset_bytes: usize,
    },
    /// A value does not fit the ROCKETMQ binary header's field width (e.g. a code above
    /// `i16::MAX`, a key longer than `i16::MAX` bytes).
    #[error("cannot encode {field} = {value} in the ROCKETMQ binary header: {reason}")]
    NotBinaryEncodable {
        field: &'static str,
        value: i64,
        reason: &'static str,
    },
}
