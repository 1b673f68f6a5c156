//! Every byte layout of the store, in RocketMQ's exact format (big-endian throughout).
//! Nothing else in the store touches byte order. See `docs/FORMAT.md` for the full tables.
//!
//! CommitLog record (Java `CommitLog.DefaultAppendMessageCallback`, `MessageDecoder`), offsets
//! for IPv4 born and store hosts (an IPv6 host is 20 bytes instead of 8; later fields shift):
//!
//! | off | field              | width      |
//! |-----|--------------------|------------|
//! | 0   | TOTALSIZE          | 4          |
//! | 4   | MAGICCODE          | 4 (v1 `0xDAA320A7`, v2 `0xDAA320AB`) |
//! | 8   | BODYCRC            | 4 (CRC32 of body `& 0x7FFFFFFF`) |
//! | 12  | QUEUEID            | 4          |
//! | 16  | FLAG               | 4          |
//! | 20  | QUEUEOFFSET        | 8          |
//! | 28  | PHYSICALOFFSET     | 8          |
//! | 36  | SYSFLAG            | 4          |
//! | 40  | BORNTIMESTAMP      | 8          |
//! | 48  | BORNHOST           | 8 / 20     |
//! | 56  | STORETIMESTAMP     | 8          |
//! | 64  | STOREHOST          | 8 / 20     |
//! | 72  | RECONSUMETIMES     | 4          |
//! | 76  | PREPARED_TX_OFFSET | 8          |
//! | 84  | BODYLEN            | 4          |
//! | 88  | BODY               | BODYLEN    |
//! |     | TOPICLEN           | 1 (v1) / 2 (v2) |
//! |     | TOPIC              | TOPICLEN   |
//! |     | PROPLEN            | 2          |
//! |     | PROPERTIES         | PROPLEN    |
//!
//! BLANK filler closing a CommitLog file: `[TOTALSIZE = bytes left in file][0xCBD43194]`.
//!
//! ConsumeQueue unit (Java `ConsumeQueue.CQ_STORE_UNIT_SIZE`): commit log offset (8), size (4),
//! tags code (8).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// v1 record magic (`MessageDecoder.MESSAGE_MAGIC_CODE`).
pub const MAGIC_CODE_V1: i32 = 0xDAA3_20A7_u32 as i32;
/// v2 record magic (`MessageDecoder.MESSAGE_MAGIC_CODE_V2`): 2-byte topic length.
pub const MAGIC_CODE_V2: i32 = 0xDAA3_20AB_u32 as i32;
/// BLANK filler magic (`CommitLog.BLANK_MAGIC_CODE`).
pub const BLANK_MAGIC_CODE: i32 = 0xCBD4_3194_u32 as i32;
/// A record must leave room for the 8-byte BLANK filler (`END_FILE_MIN_BLANK_LENGTH`).
pub const END_FILE_BLANK_SIZE_MIN_BYTES: usize = 8;
/// Width of one ConsumeQueue unit.
pub const CQ_UNIT_SIZE_BYTES: usize = 20;
/// Properties are prefixed by a signed i16 length.
pub const PROPERTIES_MAX_BYTES: usize = i16::MAX as usize;
/// A v1 topic length is a signed byte.
pub const TOPIC_V1_MAX_BYTES: usize = 127;
/// A v2 topic length is 2 bytes; RocketMQ allows retry/DLQ topics up to 255 chars.
pub const TOPIC_V2_MAX_BYTES: usize = 255;

/// `MessageSysFlag` bits the store looks at.
pub mod sys_flag {
    pub const COMPRESSED: i32 = 0x1;
    pub const MULTI_TAGS: i32 = 0x2;
    pub const TRANSACTION_NOT_TYPE: i32 = 0;
    pub const TRANSACTION_PREPARED_TYPE: i32 = 0x4;
    pub const TRANSACTION_COMMIT_TYPE: i32 = 0x8;
    pub const TRANSACTION_ROLLBACK_TYPE: i32 = 0xC;
    pub const TRANSACTION_MASK: i32 = 0xC;
    pub const BORNHOST_V6: i32 = 0x10;
    pub const STOREHOST_V6: i32 = 0x20;
}

/// Byte positions inside a record (IPv4 born host for STORE_TIMESTAMP, as `MessageDecoder`).
pub mod pos {
    pub const TOTAL_SIZE: usize = 0;
    pub const MAGIC: usize = 4;
    pub const BODY_CRC: usize = 8;
    pub const QUEUE_ID: usize = 12;
    pub const FLAG: usize = 16;
    pub const QUEUE_OFFSET: usize = 20;
    pub const PHY_OFFSET: usize = 28;
    pub const SYS_FLAG: usize = 36;
    pub const BORN_TIMESTAMP: usize = 40;
    pub const BORN_HOST: usize = 48;
}

/// Fixed part of a record before BODY with IPv4 hosts (88) and the smallest possible record.
const FIXED_HEADER_IPV4_BYTES: usize = 88;
const HOST_IPV4_BYTES: usize = 8;
const HOST_IPV6_BYTES: usize = 20;
/// Bytes needed to read a record's STORETIMESTAMP whatever the born host family.
pub const STORE_TIMESTAMP_PROBE_BYTES: usize = pos::BORN_HOST + HOST_IPV6_BYTES + 8;

const PROPERTY_NAME_VALUE_SEPARATOR: u8 = 1;
const PROPERTY_SEPARATOR: u8 = 2;
/// `MessageConst.PROPERTY_TAGS`.
pub const PROPERTY_TAGS: &[u8] = b"TAGS";

/// Why bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("need {need} bytes, have {have}")]
    TooShort { need: usize, have: usize },
    #[error("unknown magic code {magic:#010x}")]
    BadMagic { magic: i32 },
    #[error("BLANK filler of {size} bytes")]
    Blank { size: i32 },
    #[error("field {field} has invalid length {len}")]
    BadLength { field: &'static str, len: i64 },
    #[error("record TOTALSIZE {total} disagrees with its fields ({computed})")]
    SizeMismatch { total: usize, computed: usize },
    #[error("topic is not UTF-8")]
    TopicNotUtf8,
    #[error("malformed message id {0:?}")]
    BadMessageId(String),
}

/// Fields the encoder needs; the encoder computes BODYCRC, TOTALSIZE and the host v6 flags.
#[derive(Debug, Clone, Copy)]
pub struct RecordFields<'a> {
    pub queue_id: i32,
    pub flag: i32,
    pub queue_offset: i64,
    pub phy_offset: i64,
    pub sys_flag: i32,
    pub born_timestamp_ms: i64,
    pub born_host: SocketAddr,
    pub store_timestamp_ms: i64,
    pub store_host: SocketAddr,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: i64,
    pub body: &'a [u8],
    pub topic: &'a [u8],
    pub properties: &'a [u8],
}

/// A record decoded in place: body, topic and properties borrow the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodedRecord<'a> {
    pub total_size: i32,
    pub magic_code: i32,
    pub body_crc: i32,
    pub queue_id: i32,
    pub flag: i32,
    pub queue_offset: i64,
    pub phy_offset: i64,
    pub sys_flag: i32,
    pub born_timestamp_ms: i64,
    pub born_host: SocketAddr,
    pub store_timestamp_ms: i64,
    pub store_host: SocketAddr,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: i64,
    pub body: &'a [u8],
    pub topic: &'a str,
    pub properties: &'a [u8],
}

impl DecodedRecord<'_> {
    /// True when BODYCRC matches the body (`CommitLog.checkMessageAndReturnSize`).
    pub fn body_crc_matches(&self) -> bool {
        body_crc(self.body) == self.body_crc
    }
}

/// Java `UtilAll.crc32(body) & 0x7FFFFFFF`.
pub fn body_crc(body: &[u8]) -> i32 {
    (crc32fast::hash(body) & 0x7FFF_FFFF) as i32
}

/// Whether a topic of this length needs the v2 layout (2-byte TOPICLEN).
pub fn needs_v2(topic_len_bytes: usize) -> bool {
    topic_len_bytes > TOPIC_V1_MAX_BYTES
}

/// Only NOT_TYPE and COMMIT_TYPE messages get a ConsumeQueue unit and a queue offset
/// (`CommitLogDispatcherBuildConsumeQueue`).
pub fn is_dispatched_to_consume_queue(sys_flag: i32) -> bool {
    matches!(
        sys_flag & sys_flag::TRANSACTION_MASK,
        sys_flag::TRANSACTION_NOT_TYPE | sys_flag::TRANSACTION_COMMIT_TYPE
    )
}

/// SYSFLAG with the born/store host v6 bits set to match the hosts.
pub fn sys_flag_for_hosts(sys_flag: i32, born_host: &SocketAddr, store_host: &SocketAddr) -> i32 {
    let mut flag = sys_flag & !(sys_flag::BORNHOST_V6 | sys_flag::STOREHOST_V6);
    if born_host.is_ipv6() {
        flag |= sys_flag::BORNHOST_V6;
    }
    if store_host.is_ipv6() {
        flag |= sys_flag::STOREHOST_V6;
    }
    flag
}

fn host_len(v6: bool) -> usize {
    if v6 {
        HOST_IPV6_BYTES
    } else {
        HOST_IPV4_BYTES
    }
}

/// TOTALSIZE of a record (`CommitLog.calMsgLength`).
pub fn record_size(
    sys_flag: i32,
    body_len: usize,
    topic_len: usize,
    properties_len: usize,
) -> usize {
    let born = host_len(sys_flag & sys_flag::BORNHOST_V6 != 0);
    let store = host_len(sys_flag & sys_flag::STOREHOST_V6 != 0);
    let topic_len_width = if needs_v2(topic_len) { 2 } else { 1 };
    FIXED_HEADER_IPV4_BYTES - 2 * HOST_IPV4_BYTES
        + born
        + store
        + body_len
        + topic_len_width
        + topic_len
        + 2
        + properties_len
}

/// Appends one record to `out`. The caller has validated the lengths (topic ≤ 255 bytes,
/// properties ≤ 32767 bytes, body ≤ i32::MAX); they are asserted here.
pub fn encode_record(fields: &RecordFields<'_>, out: &mut Vec<u8>) {
    assert!(fields.topic.len() <= TOPIC_V2_MAX_BYTES);
    assert!(fields.properties.len() <= PROPERTIES_MAX_BYTES);
    assert!(fields.body.len() <= i32::MAX as usize);
    let sys_flag = sys_flag_for_hosts(fields.sys_flag, &fields.born_host, &fields.store_host);
    let total = record_size(
        sys_flag,
        fields.body.len(),
        fields.topic.len(),
        fields.properties.len(),
    );
    let v2 = needs_v2(fields.topic.len());
    let start = out.len();
    out.reserve(total);
    put_i32(out, total as i32);
    put_i32(out, if v2 { MAGIC_CODE_V2 } else { MAGIC_CODE_V1 });
    put_i32(out, body_crc(fields.body));
    put_i32(out, fields.queue_id);
    put_i32(out, fields.flag);
    put_i64(out, fields.queue_offset);
    put_i64(out, fields.phy_offset);
    put_i32(out, sys_flag);
    put_i64(out, fields.born_timestamp_ms);
    put_host(out, &fields.born_host);
    put_i64(out, fields.store_timestamp_ms);
    put_host(out, &fields.store_host);
    put_i32(out, fields.reconsume_times);
    put_i64(out, fields.prepared_transaction_offset);
    put_i32(out, fields.body.len() as i32);
    out.extend_from_slice(fields.body);
    if v2 {
        out.extend_from_slice(&(fields.topic.len() as i16).to_be_bytes());
    } else {
        out.push(fields.topic.len() as u8);
    }
    out.extend_from_slice(fields.topic);
    out.extend_from_slice(&(fields.properties.len() as i16).to_be_bytes());
    out.extend_from_slice(fields.properties);
    debug_assert_eq!(out.len() - start, total);
}

/// Appends the 8-byte BLANK filler that closes a file with `remaining_bytes` left.
pub fn encode_blank(remaining_bytes: usize, out: &mut Vec<u8>) {
    assert!(remaining_bytes >= END_FILE_BLANK_SIZE_MIN_BYTES);
    assert!(remaining_bytes <= i32::MAX as usize);
    put_i32(out, remaining_bytes as i32);
    put_i32(out, BLANK_MAGIC_CODE);
}

/// What the first 8 bytes at a CommitLog position say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordHead {
    Message {
        total_size: i32,
        magic_code: i32,
    },
    Blank {
        total_size: i32,
    },
    /// Unknown magic (zeroed or torn area): the end of valid data.
    Invalid {
        total_size: i32,
        magic_code: i32,
    },
}

/// Reads TOTALSIZE and MAGICCODE.
pub fn decode_record_head(buf: &[u8]) -> Result<RecordHead, FormatError> {
    let total_size = get_i32(buf, pos::TOTAL_SIZE)?;
    let magic_code = get_i32(buf, pos::MAGIC)?;
    Ok(match magic_code {
        MAGIC_CODE_V1 | MAGIC_CODE_V2 => RecordHead::Message {
            total_size,
            magic_code,
        },
        BLANK_MAGIC_CODE => RecordHead::Blank { total_size },
        _ => RecordHead::Invalid {
            total_size,
            magic_code,
        },
    })
}

/// Decodes one record at the start of `buf` (which may hold more bytes after it).
/// Checks magic and that every length field agrees with TOTALSIZE; does not check the CRC.
pub fn decode_record(buf: &[u8]) -> Result<DecodedRecord<'_>, FormatError> {
    let total_size = get_i32(buf, pos::TOTAL_SIZE)?;
    let magic_code = get_i32(buf, pos::MAGIC)?;
    let v2 = match magic_code {
        MAGIC_CODE_V1 => false,
        MAGIC_CODE_V2 => true,
        BLANK_MAGIC_CODE => return Err(FormatError::Blank { size: total_size }),
        magic => return Err(FormatError::BadMagic { magic }),
    };
    if total_size < 0 {
        return Err(FormatError::BadLength {
            field: "TOTALSIZE",
            len: i64::from(total_size),
        });
    }
    let total = total_size as usize;
    if buf.len() < total {
        return Err(FormatError::TooShort {
            need: total,
            have: buf.len(),
        });
    }
    let rec = &buf[..total];
    let sys_flag = get_i32(rec, pos::SYS_FLAG)?;
    let (born_host, mut at) = get_host(rec, pos::BORN_HOST, sys_flag & sys_flag::BORNHOST_V6 != 0)?;
    let store_timestamp_ms = get_i64(rec, at)?;
    at += 8;
    let (store_host, next) = get_host(rec, at, sys_flag & sys_flag::STOREHOST_V6 != 0)?;
    at = next;
    let reconsume_times = get_i32(rec, at)?;
    let prepared_transaction_offset = get_i64(rec, at + 4)?;
    let body_len = get_len(get_i32(rec, at + 12)?, "BODYLEN")?;
    at += 16;
    let body = get_slice(rec, at, body_len)?;
    at += body_len;
    let topic_len = if v2 {
        let len = get_i16(rec, at)?;
        at += 2;
        get_len(i32::from(len), "TOPICLEN")?
    } else {
        let len = *rec.get(at).ok_or(FormatError::TooShort {
            need: at + 1,
            have: rec.len(),
        })? as i8;
        at += 1;
        get_len(i32::from(len), "TOPICLEN")?
    };
    let topic = std::str::from_utf8(get_slice(rec, at, topic_len)?)
        .map_err(|_| FormatError::TopicNotUtf8)?;
    at += topic_len;
    // Java decoders skip properties when PROPLEN <= 0.
    let properties_len = get_i16(rec, at)?.max(0) as usize;
    at += 2;
    let properties = get_slice(rec, at, properties_len)?;
    at += properties_len;
    if at != total {
        return Err(FormatError::SizeMismatch {
            total,
            computed: at,
        });
    }
    Ok(DecodedRecord {
        total_size,
        magic_code,
        body_crc: get_i32(rec, pos::BODY_CRC)?,
        queue_id: get_i32(rec, pos::QUEUE_ID)?,
        flag: get_i32(rec, pos::FLAG)?,
        queue_offset: get_i64(rec, pos::QUEUE_OFFSET)?,
        phy_offset: get_i64(rec, pos::PHY_OFFSET)?,
        sys_flag,
        born_timestamp_ms: get_i64(rec, pos::BORN_TIMESTAMP)?,
        born_host,
        store_timestamp_ms,
        store_host,
        reconsume_times,
        prepared_transaction_offset,
        body,
        topic,
        properties,
    })
}

/// STORETIMESTAMP of the record starting `buf` (needs [`STORE_TIMESTAMP_PROBE_BYTES`] at most).
pub fn record_store_timestamp(buf: &[u8]) -> Result<i64, FormatError> {
    let sys_flag = get_i32(buf, pos::SYS_FLAG)?;
    let born = host_len(sys_flag & sys_flag::BORNHOST_V6 != 0);
    get_i64(buf, pos::BORN_HOST + born)
}

// ---------------------------------------------------------------------------------------------
// Properties (Java `MessageDecoder.messageProperties2String`): `name \x01 value \x02` repeated.

/// Iterates `(name, value)` pairs the way Java `MessageDecoder.string2messageProperties` does:
/// segments without a separator in a valid position are skipped.
pub fn properties_iter(properties: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    properties
        .split(|b| *b == PROPERTY_SEPARATOR)
        .filter_map(|segment| {
            let sep = segment
                .iter()
                .position(|b| *b == PROPERTY_NAME_VALUE_SEPARATOR)?;
            // Java requires a non-empty name and a separator that is not the last char.
            if sep == 0 || sep + 1 >= segment.len() {
                return None;
            }
            Some((&segment[..sep], &segment[sep + 1..]))
        })
}

/// The value of `name`, if present (the last occurrence wins, like a Java HashMap put).
///
/// The same answer as looking `name` up among [`properties_iter`]'s pairs, found with a SIMD
/// scan for the separators (`memchr`) instead of a closure per byte: a send looks several
/// properties up, and the byte-wise walk was 6 % of the broker's samples under W1.
pub fn property_value<'a>(properties: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    // A pair's name is never empty and holds neither separator (it ends at the segment's
    // first name-value separator), so such a `name` matches nothing.
    if name.is_empty()
        || memchr::memchr2(PROPERTY_SEPARATOR, PROPERTY_NAME_VALUE_SEPARATOR, name).is_some()
    {
        return None;
    }
    let mut found = None;
    let mut start = 0;
    while start < properties.len() {
        let end = memchr::memchr(PROPERTY_SEPARATOR, &properties[start..])
            .map_or(properties.len(), |at| start + at);
        let segment = &properties[start..end];
        // `name` then the separator, then a value that is not empty (Java's rule, as in
        // `properties_iter`).
        if segment.len() > name.len() + 1
            && segment.starts_with(name)
            && segment[name.len()] == PROPERTY_NAME_VALUE_SEPARATOR
        {
            found = Some(&segment[name.len() + 1..]);
        }
        start = end + 1;
    }
    found
}

/// Encodes pairs with Java's separators, including the trailing `\x02`.
pub fn encode_properties<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut out = String::new();
    for (name, value) in pairs {
        out.push_str(name);
        out.push(char::from(PROPERTY_NAME_VALUE_SEPARATOR));
        out.push_str(value);
        out.push(char::from(PROPERTY_SEPARATOR));
    }
    out
}

/// Java `String.hashCode()`: `h = 31*h + c` over UTF-16 code units, wrapping.
pub fn java_string_hash_code(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// The ConsumeQueue tags code: hash of the TAGS property widened to i64, 0 without tags.
pub fn tags_code(properties: &[u8]) -> i64 {
    match property_value(properties, PROPERTY_TAGS) {
        Some(tags) => i64::from(java_string_hash_code(&String::from_utf8_lossy(tags))),
        None => 0,
    }
}

// ---------------------------------------------------------------------------------------------
// ConsumeQueue unit.

/// One 20-byte ConsumeQueue unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CqUnit {
    pub phy_offset: i64,
    pub size: i32,
    pub tags_code: i64,
}

impl CqUnit {
    /// Java's gap filler for a queue that starts mid-file (`ConsumeQueue.fillPreBlank`).
    pub const FILLER: CqUnit = CqUnit {
        phy_offset: 0,
        size: i32::MAX,
        tags_code: 0,
    };

    /// A unit counts as written when `offset >= 0 && size > 0` (`ConsumeQueue.recover`).
    pub fn is_valid(&self) -> bool {
        self.phy_offset >= 0 && self.size > 0
    }
}

pub fn encode_cq_unit(unit: &CqUnit) -> [u8; CQ_UNIT_SIZE_BYTES] {
    let mut out = [0u8; CQ_UNIT_SIZE_BYTES];
    out[0..8].copy_from_slice(&unit.phy_offset.to_be_bytes());
    out[8..12].copy_from_slice(&unit.size.to_be_bytes());
    out[12..20].copy_from_slice(&unit.tags_code.to_be_bytes());
    out
}

/// Decodes the unit at the start of `buf` (which must hold at least 20 bytes).
pub fn decode_cq_unit(buf: &[u8]) -> Result<CqUnit, FormatError> {
    Ok(CqUnit {
        phy_offset: get_i64(buf, 0)?,
        size: get_i32(buf, 8)?,
        tags_code: get_i64(buf, 12)?,
    })
}

// ---------------------------------------------------------------------------------------------
// Offset message id (Java `MessageDecoder.createMessageId`): store ip + port (i32) + phy offset
// (i64), uppercase hex.

pub fn encode_offset_msg_id(store_host: &SocketAddr, phy_offset: i64) -> String {
    let mut raw = Vec::with_capacity(28);
    put_host(&mut raw, store_host);
    put_i64(&mut raw, phy_offset);
    hex::encode_upper(raw)
}

pub fn decode_offset_msg_id(msg_id: &str) -> Result<(SocketAddr, i64), FormatError> {
    let bad = || FormatError::BadMessageId(msg_id.to_owned());
    if !msg_id.is_ascii() || (msg_id.len() != 32 && msg_id.len() != 56) {
        return Err(bad());
    }
    let mut raw = Vec::with_capacity(msg_id.len() / 2);
    for i in (0..msg_id.len()).step_by(2) {
        raw.push(u8::from_str_radix(&msg_id[i..i + 2], 16).map_err(|_| bad())?);
    }
    let (host, at) = get_host(&raw, 0, raw.len() == 28).map_err(|_| bad())?;
    Ok((host, get_i64(&raw, at).map_err(|_| bad())?))
}

// ---------------------------------------------------------------------------------------------
// Batch body (Java `MessageDecoder.encodeMessage`): per message
// TOTALSIZE:i32, MAGIC:i32, BODYCRC:i32, FLAG:i32, BODYLEN:i32, BODY, PROPLEN:i16, PROPERTIES.

/// One message inside a batch body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchEntry<'a> {
    pub flag: i32,
    pub body: &'a [u8],
    pub properties: &'a [u8],
    /// Byte range of `properties` inside the batch body.
    pub properties_start: usize,
}

/// Iterates the messages of a batch body, failing on the first malformed one.
pub fn batch_entries(body: &[u8]) -> BatchEntries<'_> {
    BatchEntries { body, at: 0 }
}

pub struct BatchEntries<'a> {
    body: &'a [u8],
    at: usize,
}

impl<'a> Iterator for BatchEntries<'a> {
    type Item = Result<BatchEntry<'a>, FormatError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.at >= self.body.len() {
            return None;
        }
        let result = decode_batch_entry(self.body, self.at);
        match &result {
            Ok((_, next)) => self.at = *next,
            Err(_) => self.at = self.body.len(),
        }
        Some(result.map(|(entry, _)| entry))
    }
}

fn decode_batch_entry(body: &[u8], start: usize) -> Result<(BatchEntry<'_>, usize), FormatError> {
    let total = get_len(get_i32(body, start)?, "TOTALSIZE")?;
    let flag = get_i32(body, start + 12)?;
    let body_len = get_len(get_i32(body, start + 16)?, "BODYLEN")?;
    let mut at = start + 20;
    let msg_body = get_slice(body, at, body_len)?;
    at += body_len;
    let properties_len = get_len(i32::from(get_i16(body, at)?), "PROPLEN")?;
    at += 2;
    let properties = get_slice(body, at, properties_len)?;
    let properties_start = at;
    at += properties_len;
    if at - start != total {
        return Err(FormatError::SizeMismatch {
            total,
            computed: at - start,
        });
    }
    let entry = BatchEntry {
        flag,
        body: msg_body,
        properties,
        properties_start,
    };
    Ok((entry, at))
}

/// Encodes one batch entry (what a client sends); used by tests and tools.
pub fn encode_batch_entry(flag: i32, body: &[u8], properties: &[u8], out: &mut Vec<u8>) {
    assert!(properties.len() <= PROPERTIES_MAX_BYTES);
    let total = 20 + body.len() + 2 + properties.len();
    put_i32(out, total as i32);
    put_i32(out, 0);
    put_i32(out, 0);
    put_i32(out, flag);
    put_i32(out, body.len() as i32);
    out.extend_from_slice(body);
    out.extend_from_slice(&(properties.len() as i16).to_be_bytes());
    out.extend_from_slice(properties);
}

// ---------------------------------------------------------------------------------------------
// Checkpoint file (`StoreCheckpoint`): 4 KiB, Java fields first, ringmq fields after them.

/// Size of the checkpoint file (one OS page, as Java).
pub const CHECKPOINT_FILE_SIZE_BYTES: usize = 4096;
/// Marks the ringmq part of the checkpoint ("RINGMQCP").
const CHECKPOINT_RINGMQ_MAGIC: u64 = 0x5249_4E47_4D51_4350;
/// Bytes covered by the checkpoint CRC.
const CHECKPOINT_CRC_COVERED_BYTES: usize = 64;

/// Contents of `<root>/checkpoint`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Checkpoint {
    /// @0: store timestamp of the last record known durable in the CommitLog.
    pub physic_msg_timestamp_ms: i64,
    /// @8: store timestamp of the last record whose ConsumeQueue unit is durable.
    pub logics_msg_timestamp_ms: i64,
    /// @16: index timestamp (we keep no index; written 0).
    pub index_msg_timestamp_ms: i64,
    /// @48 (ringmq): CommitLog offset up to which the CommitLog is fsynced.
    pub flushed_phy_offset: i64,
    /// @56 (ringmq): CommitLog offset (a record boundary) up to which every ConsumeQueue unit
    /// is fsynced. Recovery re-dispatches from here.
    pub cq_flushed_phy_offset: i64,
}

pub fn encode_checkpoint(cp: &Checkpoint) -> [u8; CHECKPOINT_FILE_SIZE_BYTES] {
    let mut out = [0u8; CHECKPOINT_FILE_SIZE_BYTES];
    out[0..8].copy_from_slice(&cp.physic_msg_timestamp_ms.to_be_bytes());
    out[8..16].copy_from_slice(&cp.logics_msg_timestamp_ms.to_be_bytes());
    out[16..24].copy_from_slice(&cp.index_msg_timestamp_ms.to_be_bytes());
    // @24 masterFlushedOffset and @32 confirmPhyOffset (Java 5.x HA fields) stay 0.
    out[40..48].copy_from_slice(&CHECKPOINT_RINGMQ_MAGIC.to_be_bytes());
    out[48..56].copy_from_slice(&cp.flushed_phy_offset.to_be_bytes());
    out[56..64].copy_from_slice(&cp.cq_flushed_phy_offset.to_be_bytes());
    let crc = crc32fast::hash(&out[..CHECKPOINT_CRC_COVERED_BYTES]);
    out[64..68].copy_from_slice(&crc.to_be_bytes());
    out
}

/// `None` when the file was not written by ringmq or is torn (CRC mismatch).
pub fn decode_checkpoint(buf: &[u8]) -> Option<Checkpoint> {
    if buf.len() < 68 {
        return None;
    }
    let magic = u64::from_be_bytes(buf[40..48].try_into().ok()?);
    let crc = u32::from_be_bytes(buf[64..68].try_into().ok()?);
    if magic != CHECKPOINT_RINGMQ_MAGIC || crc != crc32fast::hash(&buf[..64]) {
        return None;
    }
    Some(Checkpoint {
        physic_msg_timestamp_ms: get_i64(buf, 0).ok()?,
        logics_msg_timestamp_ms: get_i64(buf, 8).ok()?,
        index_msg_timestamp_ms: get_i64(buf, 16).ok()?,
        flushed_phy_offset: get_i64(buf, 48).ok()?,
        cq_flushed_phy_offset: get_i64(buf, 56).ok()?,
    })
}

// ---------------------------------------------------------------------------------------------
// Primitive big-endian helpers.

fn put_i32(out: &mut Vec<u8>, v: i32) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn put_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn put_host(out: &mut Vec<u8>, host: &SocketAddr) {
    match host.ip() {
        IpAddr::V4(ip) => out.extend_from_slice(&ip.octets()),
        IpAddr::V6(ip) => out.extend_from_slice(&ip.octets()),
    }
    put_i32(out, i32::from(host.port()));
}

fn get_slice(buf: &[u8], at: usize, len: usize) -> Result<&[u8], FormatError> {
    let end = at.checked_add(len).ok_or(FormatError::BadLength {
        field: "length",
        len: len as i64,
    })?;
    buf.get(at..end).ok_or(FormatError::TooShort {
        need: end,
        have: buf.len(),
    })
}

fn get_array<const N: usize>(buf: &[u8], at: usize) -> Result<[u8; N], FormatError> {
    let slice = get_slice(buf, at, N)?;
    let mut out = [0u8; N];
    out.copy_from_slice(slice);
    Ok(out)
}

fn get_i16(buf: &[u8], at: usize) -> Result<i16, FormatError> {
    Ok(i16::from_be_bytes(get_array(buf, at)?))
}

fn get_i32(buf: &[u8], at: usize) -> Result<i32, FormatError> {
    Ok(i32::from_be_bytes(get_array(buf, at)?))
}

fn get_i64(buf: &[u8], at: usize) -> Result<i64, FormatError> {
    Ok(i64::from_be_bytes(get_array(buf, at)?))
}

fn get_len(len: i32, field: &'static str) -> Result<usize, FormatError> {
    usize::try_from(len).map_err(|_| FormatError::BadLength {
        field,
        len: i64::from(len),
    })
}

/// Reads a host (IPv4 4 bytes or IPv6 16 bytes, then port as i32); returns it and the next
/// position. A port outside 0..=65535 is kept modulo 2^16, as Java's `InetSocketAddress`
/// would reject it; such records are only produced by foreign writers.
fn get_host(buf: &[u8], at: usize, v6: bool) -> Result<(SocketAddr, usize), FormatError> {
    if v6 {
        let ip: [u8; 16] = get_array(buf, at)?;
        let port = get_i32(buf, at + 16)?;
        let addr = SocketAddr::new(IpAddr::V6(Ipv6Addr::from(ip)), port as u16);
        Ok((addr, at + HOST_IPV6_BYTES))
    } else {
        let ip: [u8; 4] = get_array(buf, at)?;
        let port = get_i32(buf, at + 4)?;
        let addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::from(ip)), port as u16);
        Ok((addr, at + HOST_IPV4_BYTES))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `property_value` as it was: a look-up among `properties_iter`'s pairs.
    fn property_value_by_pairs<'a>(properties: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
        properties_iter(properties)
            .filter(|(key, _)| *key == name)
            .map(|(_, value)| value)
            .last()
    }

    proptest::proptest! {
        /// Property strings of names, values and stray separators in any order: the scan
        /// finds what the pairs say, for names present, absent, empty or holding a separator.
        #[test]
        fn property_value_agrees_with_the_pairs(
            properties in proptest::collection::vec(
                proptest::sample::select(vec![b'A', b'B', b'T', b'x', 1u8, 2u8]),
                0..40,
            ),
            name in proptest::collection::vec(
                proptest::sample::select(vec![b'A', b'B', b'T', 1u8, 2u8]),
                0..3,
            ),
        ) {
            proptest::prop_assert_eq!(
                property_value(&properties, &name),
                property_value_by_pairs(&properties, &name)
            );
        }
    }

    #[test]
    fn java_hash_code_matches_known_values() {
        // Values from Java: "".hashCode() == 0, "TagA".hashCode() == 2598919,
        // "hello".hashCode() == 99162322, "中文".hashCode() == 646394.
        assert_eq!(java_string_hash_code(""), 0);
        assert_eq!(java_string_hash_code("TagA"), 2_598_919);
        assert_eq!(java_string_hash_code("hello"), 99_162_322);
        assert_eq!(java_string_hash_code("中文"), 646_394);
        // Overflow wraps: "polygenelubricants".hashCode() == Integer.MIN_VALUE.
        assert_eq!(java_string_hash_code("polygenelubricants"), i32::MIN);
        // A non-BMP char hashes as two UTF-16 surrogates: 0xD83D*31 + 0xDE00.
        assert_eq!(java_string_hash_code("😀"), 0xD83D * 31 + 0xDE00);
    }

    #[test]
    fn properties_parse_like_java() {
        let props = encode_properties([("TAGS", "TagA"), ("KEYS", "k1 k2")]);
        assert_eq!(props, "TAGS\u{1}TagA\u{2}KEYS\u{1}k1 k2\u{2}");
        assert_eq!(
            property_value(props.as_bytes(), b"TAGS"),
            Some(&b"TagA"[..])
        );
        assert_eq!(property_value(props.as_bytes(), b"NONE"), None);
        // Segments without a usable separator are skipped.
        let odd = b"\x01x\x02ab\x02K\x01\x02K2\x01v\x02";
        let pairs: Vec<_> = properties_iter(odd).collect();
        assert_eq!(pairs, vec![(&b"K2"[..], &b"v"[..])]);
        assert_eq!(tags_code(props.as_bytes()), 2_598_919);
        assert_eq!(tags_code(b""), 0);
    }

    #[test]
    fn cq_unit_round_trip() {
        let unit = CqUnit {
            phy_offset: 0x0102_0304_0506_0708,
            size: 0x0A0B_0C0D,
            tags_code: -2,
        };
        let bytes = encode_cq_unit(&unit);
        assert_eq!(
            bytes,
            [
                1, 2, 3, 4, 5, 6, 7, 8, 0x0A, 0x0B, 0x0C, 0x0D, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                0xFF, 0xFE
            ]
        );
        assert_eq!(decode_cq_unit(&bytes), Ok(unit));
        assert!(decode_cq_unit(&bytes[..19]).is_err());
    }

    #[test]
    fn msg_id_matches_reference_example() {
        let host: SocketAddr = "10.0.0.1:10911".parse().unwrap();
        let id = encode_offset_msg_id(&host, 0);
        assert_eq!(id, "0A00000100002A9F0000000000000000");
        assert_eq!(decode_offset_msg_id(&id), Ok((host, 0)));
        // Uppercase, as Java's UtilAll.bytes2string writes it.
        let id = encode_offset_msg_id(&host, 0xAB_CDEF);
        assert_eq!(id, "0A00000100002A9F0000000000ABCDEF");
        let v6: SocketAddr = "[::1]:10911".parse().unwrap();
        let id6 = encode_offset_msg_id(&v6, 77);
        assert_eq!(id6.len(), 56);
        assert_eq!(decode_offset_msg_id(&id6), Ok((v6, 77)));
        assert!(decode_offset_msg_id("XYZ").is_err());
        assert!(decode_offset_msg_id("ZZ00000100002A9F0000000000000000").is_err());
    }

    #[test]
    fn decode_rejects_garbage_without_panicking() {
        assert!(decode_record(&[]).is_err());
        assert!(decode_record(&[0; 8]).is_err());
        let mut rec = Vec::new();
        let host: SocketAddr = "1.2.3.4:5".parse().unwrap();
        encode_record(
            &RecordFields {
                queue_id: 0,
                flag: 0,
                queue_offset: 0,
                phy_offset: 0,
                sys_flag: 0,
                born_timestamp_ms: 0,
                born_host: host,
                store_timestamp_ms: 0,
                store_host: host,
                reconsume_times: 0,
                prepared_transaction_offset: 0,
                body: b"x",
                topic: b"T",
                properties: b"",
            },
            &mut rec,
        );
        // Every truncation and every single-byte corruption either decodes or errors.
        for len in 0..rec.len() {
            assert!(decode_record(&rec[..len]).is_err());
        }
        for i in 0..rec.len() {
            let mut bad = rec.clone();
            bad[i] ^= 0xFF;
            let _ = decode_record(&bad);
        }
    }

    #[test]
    fn checkpoint_round_trip_and_torn_detection() {
        let cp = Checkpoint {
            physic_msg_timestamp_ms: 1,
            logics_msg_timestamp_ms: 2,
            index_msg_timestamp_ms: 0,
            flushed_phy_offset: 300,
            cq_flushed_phy_offset: 200,
        };
        let mut bytes = encode_checkpoint(&cp);
        assert_eq!(decode_checkpoint(&bytes), Some(cp));
        bytes[50] ^= 1;
        assert_eq!(decode_checkpoint(&bytes), None);
    }

    #[test]
    fn batch_entries_decode_and_reject_malformed() {
        let mut body = Vec::new();
        encode_batch_entry(1, b"one", b"A\x01B\x02", &mut body);
        encode_batch_entry(2, b"", b"", &mut body);
        let entries: Vec<_> = batch_entries(&body).collect::<Result<_, _>>().unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].flag, 1);
        assert_eq!(entries[0].body, b"one");
        assert_eq!(entries[0].properties, b"A\x01B\x02");
        assert_eq!(&body[entries[0].properties_start..][..4], b"A\x01B\x02");
        assert_eq!(entries[1].body, b"");
        body.pop();
        let results: Vec<_> = batch_entries(&body).collect();
        assert!(results.last().unwrap().is_err());
    }
}
