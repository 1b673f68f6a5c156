//! The RocketMQ remoting protocol: pure codec, no I/O.
//!
//! - [`body`]: the JSON bodies shared by broker, name server and clients.
//! - [`codes`]: request/response codes with Java's names, [`codes::CURRENT_VERSION`].
//! - [`command`]: [`RemotingCommand`] and lenient typed access to its ext fields.
//! - [`frame`]: [`decode_frame`] / [`encode_frame`] / [`encode_frame_header`].
//! - [`header_json`], [`header_binary`]: the two header serializations (SerializeType 0 and 1).
//! - [`headers`]: typed custom headers (send, pull, offsets, client and name server requests).
//! - [`error`]: [`CodecError`] (close the connection) and [`HeaderError`] (answer the request).
//!
//! Wire format: docs/PROTOCOL.md (Java `RemotingCommand`, `RocketMQSerializable`).

pub mod body;
pub mod codes;
pub mod command;
pub mod error;
pub mod ext_fields;
pub mod frame;
pub mod header_binary;
pub mod header_json;
pub mod headers;

pub use codes::{request_code, response_code, CURRENT_VERSION};
pub use command::{
    ExtFields, LanguageCode, RemotingCommand, SerializeType, FLAG_ONEWAY, FLAG_RESPONSE,
};
pub use error::{CodecError, HeaderError};
pub use frame::{decode_frame, encode_frame, encode_frame_header, FRAME_SIZE_MAX_BYTES};
