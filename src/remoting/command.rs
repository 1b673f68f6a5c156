//! `RemotingCommand`: the one message shape of the RocketMQ remoting protocol (requests and
//! responses alike), plus lenient typed access to its custom header fields (extFields).
//!
//! Java source: `remoting/.../protocol/RemotingCommand.java`, `LanguageCode.java`,
//! `SerializeType.java`.

use bytes::Bytes;

use super::codes::CURRENT_VERSION;
pub use super::error::HeaderError;

/// Bit 0 of `flag` (Java `RPC_TYPE`): set on every response.
pub const FLAG_RESPONSE: i32 = 1;
/// Bit 1 of `flag` (Java `RPC_ONEWAY`): the sender expects no response, not even on error.
pub const FLAG_ONEWAY: i32 = 2;

/// How the header of a frame is serialized (high byte of the header word).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SerializeType {
    /// fastjson-style JSON object (the default of every Java client and broker).
    Json = 0,
    /// The compact big-endian binary layout of `RocketMQSerializable`.
    RocketMq = 1,
}

impl SerializeType {
    /// The byte carried in the header word.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// `None` for anything but 0 and 1.
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(Self::Json),
            1 => Some(Self::RocketMq),
            _ => None,
        }
    }

    /// The Java enum name, as carried in the JSON key `serializeTypeCurrentRPC`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Json => "JSON",
            Self::RocketMq => "ROCKETMQ",
        }
    }

    /// Parses the Java enum name (exact, like `Enum.valueOf`).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "JSON" => Some(Self::Json),
            "ROCKETMQ" => Some(Self::RocketMq),
            _ => None,
        }
    }
}

/// The sender's implementation language (Java `LanguageCode`). JSON headers carry the name,
/// binary headers the numeric code. Unknown names/codes decode as [`LanguageCode::Other`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LanguageCode {
    Java,
    Cpp,
    DotNet,
    Python,
    Delphi,
    Erlang,
    Ruby,
    Other,
    Http,
    Go,
    Php,
    Oms,
    Rust,
    NodeJs,
}

impl LanguageCode {
    /// Every variant, in code order (index == code).
    pub const ALL: [LanguageCode; 14] = [
        Self::Java,
        Self::Cpp,
        Self::DotNet,
        Self::Python,
        Self::Delphi,
        Self::Erlang,
        Self::Ruby,
        Self::Other,
        Self::Http,
        Self::Go,
        Self::Php,
        Self::Oms,
        Self::Rust,
        Self::NodeJs,
    ];

    /// The Java enum name, e.g. `"JAVA"`, `"NODE_JS"`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Java => "JAVA",
            Self::Cpp => "CPP",
            Self::DotNet => "DOTNET",
            Self::Python => "PYTHON",
            Self::Delphi => "DELPHI",
            Self::Erlang => "ERLANG",
            Self::Ruby => "RUBY",
            Self::Other => "OTHER",
            Self::Http => "HTTP",
            Self::Go => "GO",
            Self::Php => "PHP",
            Self::Oms => "OMS",
            Self::Rust => "RUST",
            Self::NodeJs => "NODE_JS",
        }
    }

    /// The numeric code of the binary header.
    pub fn code(self) -> u8 {
        match self {
            Self::Java => 0,
            Self::Cpp => 1,
            Self::DotNet => 2,
            Self::Python => 3,
            Self::Delphi => 4,
            Self::Erlang => 5,
            Self::Ruby => 6,
            Self::Other => 7,
            Self::Http => 8,
            Self::Go => 9,
            Self::Php => 10,
            Self::Oms => 11,
            Self::Rust => 12,
            Self::NodeJs => 13,
        }
    }

    /// Exact Java name; anything unknown is `Other` (a newer client must still be served).
    pub fn from_name(name: &str) -> Self {
        Self::ALL
            .iter()
            .copied()
            .find(|language| language.name() == name)
            .unwrap_or(Self::Other)
    }

    /// Numeric code; anything unknown is `Other`.
    pub fn from_code(code: u8) -> Self {
        Self::ALL
            .get(usize::from(code))
            .copied()
            .unwrap_or(Self::Other)
    }
}

pub use super::ext_fields::ExtFields;

/// One request or response. `body` is opaque bytes; `ext_fields` are the custom header fields,
/// all strings (Java stringifies numbers and booleans).
#[derive(Debug, Clone, PartialEq)]
pub struct RemotingCommand {
    /// Request code (requests) or response code (responses).
    pub code: i32,
    pub language: LanguageCode,
    /// The sender's `MQVersion` ordinal.
    pub version: i32,
    /// Request id; a response carries its request's opaque.
    pub opaque: i32,
    /// [`FLAG_RESPONSE`] | [`FLAG_ONEWAY`].
    pub flag: i32,
    pub remark: Option<String>,
    pub ext_fields: ExtFields,
    pub body: Bytes,
    /// How this command's header was (decode) or will be (encode) serialized.
    pub serialize_type: SerializeType,
}

impl RemotingCommand {
    /// A request: language Java, version [`CURRENT_VERSION`], JSON header, opaque 0, flag 0.
    pub fn request(code: i32) -> Self {
        Self {
            code,
            language: LanguageCode::Java,
            version: CURRENT_VERSION,
            opaque: 0,
            flag: 0,
            remark: None,
            ext_fields: ExtFields::default(),
            body: Bytes::new(),
            serialize_type: SerializeType::Json,
        }
    }

    /// A response to `req`: same opaque and serialize type, [`FLAG_RESPONSE`] set, language Java,
    /// version [`CURRENT_VERSION`], empty ext fields/body.
    ///
    /// The serialize type mirrors the request because old C++ clients ignore the type byte and
    /// always parse JSON (4.9.x Java behaves the same way).
    pub fn response_to(req: &RemotingCommand, code: i32, remark: Option<String>) -> Self {
        Self::response(code, req.opaque, req.serialize_type, remark)
    }

    /// [`RemotingCommand::response_to`] for a request known only by its opaque and serialize
    /// type (the request itself has moved on, e.g. into a handler that panicked).
    pub fn response(
        code: i32,
        opaque: i32,
        serialize_type: SerializeType,
        remark: Option<String>,
    ) -> Self {
        Self {
            code,
            language: LanguageCode::Java,
            version: CURRENT_VERSION,
            opaque,
            flag: FLAG_RESPONSE,
            remark,
            ext_fields: ExtFields::default(),
            body: Bytes::new(),
            serialize_type,
        }
    }

    /// True if [`FLAG_RESPONSE`] is set.
    pub fn is_response(&self) -> bool {
        self.flag & FLAG_RESPONSE != 0
    }

    /// True if [`FLAG_ONEWAY`] is set: no response may be sent.
    pub fn is_oneway(&self) -> bool {
        self.flag & FLAG_ONEWAY != 0
    }

    /// Builder: sets ext field `key` to `value.to_string()` (replacing any previous value).
    pub fn with_ext(mut self, key: &'static str, value: impl ToString) -> Self {
        self.ext_fields.insert(key, value.to_string());
        self
    }

    /// Builder: sets the body.
    pub fn with_body(mut self, body: Bytes) -> Self {
        self.body = body;
        self
    }

    /// Builder: sets the opaque.
    pub fn with_opaque(mut self, opaque: i32) -> Self {
        self.opaque = opaque;
        self
    }

    /// Builder: sets the remark.
    pub fn with_remark(mut self, remark: impl Into<String>) -> Self {
        self.remark = Some(remark.into());
        self
    }

    /// Builder: sets the header serialization.
    pub fn with_serialize_type(mut self, serialize_type: SerializeType) -> Self {
        self.serialize_type = serialize_type;
        self
    }

    /// Builder: sets [`FLAG_ONEWAY`].
    pub fn oneway(mut self) -> Self {
        self.flag |= FLAG_ONEWAY;
        self
    }

    /// Sets ext field `key` in place.
    pub fn set_ext(&mut self, key: &'static str, value: impl ToString) {
        self.ext_fields.insert(key, value.to_string());
    }

    /// A required string field. An empty value is returned as is (Java would give `""` too).
    ///
    /// `key` is `'static` so the error can name it without allocating; all callers pass
    /// literals.
    pub fn ext_str(&self, key: &'static str) -> Result<&str, HeaderError> {
        self.ext_opt_str(key)
            .ok_or(HeaderError::Missing { field: key })
    }

    /// An optional string field.
    pub fn ext_opt_str(&self, key: &str) -> Option<&str> {
        self.ext_fields.get(key).map(String::as_str)
    }

    /// A required `int` field, parsed like Java `Integer.parseInt`.
    pub fn ext_i32(&self, key: &'static str) -> Result<i32, HeaderError> {
        self.ext_opt_i32(key)?
            .ok_or(HeaderError::Missing { field: key })
    }

    /// A required `long` field, parsed like Java `Long.parseLong`.
    pub fn ext_i64(&self, key: &'static str) -> Result<i64, HeaderError> {
        self.ext_opt_i64(key)?
            .ok_or(HeaderError::Missing { field: key })
    }

    /// An optional `int` field. An empty value counts as absent (the binary header cannot
    /// carry empty strings at all, and C++ clients send empty placeholders).
    pub fn ext_opt_i32(&self, key: &'static str) -> Result<Option<i32>, HeaderError> {
        match self.ext_opt_str(key) {
            None | Some("") => Ok(None),
            Some(value) => parse_java_int(value)
                .map(Some)
                .ok_or_else(|| HeaderError::Invalid {
                    field: key,
                    value: value.to_owned(),
                    reason: "not a 32-bit integer",
                }),
        }
    }

    /// An optional `long` field; empty counts as absent.
    pub fn ext_opt_i64(&self, key: &'static str) -> Result<Option<i64>, HeaderError> {
        match self.ext_opt_str(key) {
            None | Some("") => Ok(None),
            Some(value) => parse_java_long(value)
                .map(Some)
                .ok_or_else(|| HeaderError::Invalid {
                    field: key,
                    value: value.to_owned(),
                    reason: "not a 64-bit integer",
                }),
        }
    }

    /// A boolean field, lenient like Java `Boolean.parseBoolean` ("true" in any case is true,
    /// everything else false) plus `"1"` as true. Missing is false.
    pub fn ext_bool(&self, key: &str) -> bool {
        self.ext_opt_bool(key).unwrap_or(false)
    }

    /// A boolean field that has a non-false default when absent: `None` if missing or empty,
    /// else the lenient parse of [`RemotingCommand::ext_bool`].
    pub fn ext_opt_bool(&self, key: &str) -> Option<bool> {
        match self.ext_opt_str(key) {
            None | Some("") => None,
            Some(value) => Some(parse_java_bool(value)),
        }
    }
}

/// Java `Integer.parseInt`: optional sign (`+` or `-`), ASCII digits, no whitespace, range
/// checked. `i32::from_str` accepts exactly that.
pub fn parse_java_int(value: &str) -> Option<i32> {
    value.parse::<i32>().ok()
}

/// Java `Long.parseLong`: same grammar as [`parse_java_int`], 64-bit.
pub fn parse_java_long(value: &str) -> Option<i64> {
    value.parse::<i64>().ok()
}

/// Java `Boolean.parseBoolean` (case-insensitive "true") extended with `"1"` (some non-Java
/// clients send numeric booleans). Everything else, including `"0"`, is false.
pub fn parse_java_bool(value: &str) -> bool {
    value.eq_ignore_ascii_case("true") || value == "1"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remoting::codes::{request_code, response_code};

    #[test]
    fn request_defaults() {
        let cmd = RemotingCommand::request(request_code::HEART_BEAT);
        assert_eq!(cmd.code, 34);
        assert_eq!(cmd.language, LanguageCode::Java);
        assert_eq!(cmd.version, CURRENT_VERSION);
        assert_eq!(cmd.opaque, 0);
        assert_eq!(cmd.flag, 0);
        assert_eq!(cmd.serialize_type, SerializeType::Json);
        assert!(!cmd.is_response());
        assert!(!cmd.is_oneway());
        assert!(cmd.clone().oneway().is_oneway());
    }

    #[test]
    fn response_mirrors_request() {
        let mut req = RemotingCommand::request(request_code::PULL_MESSAGE)
            .with_opaque(42)
            .with_serialize_type(SerializeType::RocketMq)
            .with_ext("topic", "T")
            .with_body(Bytes::from_static(b"x"));
        req.language = LanguageCode::Cpp;
        req.version = 401;
        let resp = RemotingCommand::response_to(&req, response_code::PULL_NOT_FOUND, None);
        assert_eq!(resp.opaque, 42);
        assert_eq!(resp.serialize_type, SerializeType::RocketMq);
        assert!(resp.is_response());
        assert!(!resp.is_oneway());
        assert_eq!(resp.language, LanguageCode::Java);
        assert_eq!(resp.version, CURRENT_VERSION);
        assert!(resp.ext_fields.is_empty());
        assert!(resp.body.is_empty());
        assert_eq!(resp.code, 19);
    }

    #[test]
    fn language_names_and_codes_round_trip() {
        for (index, language) in LanguageCode::ALL.iter().enumerate() {
            assert_eq!(usize::from(language.code()), index);
            assert_eq!(LanguageCode::from_code(language.code()), *language);
            assert_eq!(LanguageCode::from_name(language.name()), *language);
        }
        assert_eq!(LanguageCode::from_name("COBOL"), LanguageCode::Other);
        assert_eq!(LanguageCode::from_name("java"), LanguageCode::Other);
        assert_eq!(LanguageCode::from_code(14), LanguageCode::Other);
        assert_eq!(LanguageCode::from_code(255), LanguageCode::Other);
        assert_eq!(LanguageCode::NodeJs.name(), "NODE_JS");
        assert_eq!(LanguageCode::Rust.code(), 12);
    }

    #[test]
    fn serialize_type_codes() {
        assert_eq!(SerializeType::from_code(0), Some(SerializeType::Json));
        assert_eq!(SerializeType::from_code(1), Some(SerializeType::RocketMq));
        assert_eq!(SerializeType::from_code(2), None);
        assert_eq!(
            SerializeType::from_name("ROCKETMQ"),
            Some(SerializeType::RocketMq)
        );
        assert_eq!(SerializeType::Json.name(), "JSON");
    }

    #[test]
    fn ext_accessors() {
        let cmd = RemotingCommand::request(request_code::PULL_MESSAGE)
            .with_ext("topic", "T")
            .with_ext("queueId", 3)
            .with_ext("queueOffset", -5_000_000_000i64)
            .with_ext("bad", "12x")
            .with_ext("plus", "+7")
            .with_ext("space", " 7")
            .with_ext("big", "2147483648")
            .with_ext("empty", "")
            .with_ext("t", "TRUE")
            .with_ext("one", "1")
            .with_ext("zero", "0")
            .with_ext("yes", "yes");
        assert_eq!(cmd.ext_str("topic"), Ok("T"));
        assert_eq!(cmd.ext_str("empty"), Ok(""));
        assert_eq!(
            cmd.ext_str("nope"),
            Err(HeaderError::Missing { field: "nope" })
        );
        assert_eq!(cmd.ext_i32("queueId"), Ok(3));
        assert_eq!(cmd.ext_i64("queueOffset"), Ok(-5_000_000_000));
        assert_eq!(cmd.ext_i32("plus"), Ok(7));
        assert!(matches!(
            cmd.ext_i32("bad"),
            Err(HeaderError::Invalid { field: "bad", .. })
        ));
        assert!(cmd.ext_i32("space").is_err());
        assert!(cmd.ext_i32("big").is_err());
        assert_eq!(cmd.ext_i64("big"), Ok(2_147_483_648));
        assert!(cmd.ext_i32("queueOffset").is_err());
        assert_eq!(cmd.ext_opt_i32("empty"), Ok(None));
        assert_eq!(cmd.ext_opt_i64("nope"), Ok(None));
        assert_eq!(
            cmd.ext_i32("empty"),
            Err(HeaderError::Missing { field: "empty" })
        );
        assert!(cmd.ext_bool("t"));
        assert!(cmd.ext_bool("one"));
        assert!(!cmd.ext_bool("zero"));
        assert!(!cmd.ext_bool("yes"));
        assert!(!cmd.ext_bool("nope"));
        assert_eq!(cmd.ext_opt_bool("nope"), None);
        assert_eq!(cmd.ext_opt_bool("zero"), Some(false));
    }

    #[test]
    fn header_error_messages_name_the_field() {
        let missing = HeaderError::Missing { field: "topic" }.to_string();
        assert!(missing.contains("`topic`"), "{missing}");
        let invalid = HeaderError::Invalid {
            field: "queueId",
            value: "x".into(),
            reason: "not a 32-bit integer",
        }
        .to_string();
        assert!(
            invalid.contains("`queueId`") && invalid.contains("`x`"),
            "{invalid}"
        );
    }
}
