//! Property access on a stored record without decoding or copying it.
//!
//! [`record_properties`] walks the fixed CommitLog record header (RocketMQ layout, protocol
//! reference §5.1, Java `MessageDecoder.decodeProperties`) to the properties bytes;
//! [`RawProperties`] looks a key up by scanning the `name \x01 value \x02` pairs in place
//! (§5.3, Java `MessageDecoder.string2messageProperties`). No map is built and the body is
//! never touched. This walk is deliberately minimal; `store::format` owns the full codec.

use std::borrow::Cow;

use super::sql92::PropertyLookup;

/// MAGICCODE of a v1 record (1-byte topic length).
pub const MESSAGE_MAGIC_CODE_V1: u32 = 0xDAA3_20A7;
/// MAGICCODE of a v2 record (2-byte topic length, 5.x, topics longer than 127 bytes).
pub const MESSAGE_MAGIC_CODE_V2: u32 = 0xDAA3_20AB;
/// MessageSysFlag BORNHOST_V6_FLAG: born host is a 16-byte IPv6 address.
pub const BORNHOST_V6_FLAG: u32 = 0x10;
/// MessageSysFlag STOREHOSTADDRESS_V6_FLAG: store host is a 16-byte IPv6 address.
pub const STOREHOSTADDRESS_V6_FLAG: u32 = 0x20;

/// Separates a property's name from its value.
pub const NAME_VALUE_SEPARATOR: u8 = 0x01;
/// Ends each property.
pub const PROPERTY_SEPARATOR: u8 = 0x02;

const MAGIC_CODE_POSITION: usize = 4;
const SYSFLAG_POSITION: usize = 36;
/// BORNHOST starts after TOTALSIZE, MAGICCODE, BODYCRC, QUEUEID, FLAG (4 each), QUEUEOFFSET,
/// PHYSICALOFFSET (8 each), SYSFLAG (4) and BORNTIMESTAMP (8).
const BORNHOST_POSITION: usize = 48;
/// IPv4 address + port; IPv6 is 16 + 4.
const HOST_IPV4_LENGTH: usize = 8;
const HOST_IPV6_LENGTH: usize = 20;
/// STORETIMESTAMP, between the two hosts.
const STORE_TIMESTAMP_LENGTH: usize = 8;
/// RECONSUMETIMES (4) + PREPARED_TX_OFFSET (8), between the store host and BODYLEN.
const AFTER_STORE_HOST_LENGTH: usize = 12;

/// Why a record's properties could not be located.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("record too short: {field} needs {needed_bytes} bytes, record has {available_bytes}")]
    Truncated {
        field: &'static str,
        needed_bytes: usize,
        available_bytes: usize,
    },
    #[error("not a message record: magic code {magic_code:#010x}")]
    UnknownMagicCode { magic_code: u32 },
    #[error("record field {field} has negative length {length}")]
    NegativeLength { field: &'static str, length: i32 },
}

fn read_array<const N: usize>(
    record: &[u8],
    position: usize,
    field: &'static str,
) -> Result<[u8; N], RecordError> {
    let end = position.saturating_add(N);
    record
        .get(position..end)
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or(RecordError::Truncated {
            field,
            needed_bytes: end,
            available_bytes: record.len(),
        })
}

/// Java reads lengths as signed big-endian integers; a negative one is corruption.
fn to_length(field: &'static str, length: i32) -> Result<usize, RecordError> {
    usize::try_from(length).map_err(|_| RecordError::NegativeLength { field, length })
}

fn i32_length_at(
    record: &[u8],
    position: usize,
    field: &'static str,
) -> Result<usize, RecordError> {
    to_length(
        field,
        i32::from_be_bytes(read_array(record, position, field)?),
    )
}

/// The properties bytes of a stored record (empty if it has none). `record` must start at the
/// record's TOTALSIZE; bytes past TOTALSIZE are ignored.
pub fn record_properties(record: &[u8]) -> Result<&[u8], RecordError> {
    let total_size = i32_length_at(record, 0, "TOTALSIZE")?;
    let record = record.get(..total_size).ok_or(RecordError::Truncated {
        field: "TOTALSIZE",
        needed_bytes: total_size,
        available_bytes: record.len(),
    })?;
    let magic_code = u32::from_be_bytes(read_array(record, MAGIC_CODE_POSITION, "MAGICCODE")?);
    let topic_length_size = match magic_code {
        MESSAGE_MAGIC_CODE_V1 => 1,
        MESSAGE_MAGIC_CODE_V2 => 2,
        _ => return Err(RecordError::UnknownMagicCode { magic_code }),
    };
    let sys_flag = u32::from_be_bytes(read_array(record, SYSFLAG_POSITION, "SYSFLAG")?);
    let host_length = |v6_flag: u32| {
        if sys_flag & v6_flag == 0 {
            HOST_IPV4_LENGTH
        } else {
            HOST_IPV6_LENGTH
        }
    };
    let body_length_position = BORNHOST_POSITION
        + host_length(BORNHOST_V6_FLAG)
        + STORE_TIMESTAMP_LENGTH
        + host_length(STOREHOSTADDRESS_V6_FLAG)
        + AFTER_STORE_HOST_LENGTH;
    let body_length = i32_length_at(record, body_length_position, "BODYLEN")?;
    let topic_length_position = body_length_position + 4 + body_length;
    let topic_length = if topic_length_size == 1 {
        // v1: a signed byte, so a v1 topic is at most 127 bytes.
        let [length] = read_array::<1>(record, topic_length_position, "TOPICLEN")?;
        to_length("TOPICLEN", i32::from(i8::from_be_bytes([length])))?
    } else {
        let length = read_array::<2>(record, topic_length_position, "TOPICLEN")?;
        to_length("TOPICLEN", i32::from(i16::from_be_bytes(length)))?
    };
    let properties_length_position = topic_length_position + topic_length_size + topic_length;
    let properties_length: [u8; 2] =
        read_array(record, properties_length_position, "PROPERTIESLEN")?;
    // Java skips properties whose (signed) length is not positive.
    let Ok(properties_length) = usize::try_from(i16::from_be_bytes(properties_length)) else {
        return Ok(&[]);
    };
    let start = properties_length_position + 2;
    let end = start + properties_length;
    record.get(start..end).ok_or(RecordError::Truncated {
        field: "PROPERTIES",
        needed_bytes: end,
        available_bytes: record.len(),
    })
}

/// A message's encoded properties, read in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawProperties<'a>(pub &'a [u8]);

impl<'a> RawProperties<'a> {
    /// The raw value bytes of `name`, with Java's parsing rules: pairs are split on `\x02`;
    /// a pair counts only if its first `\x01` leaves a non-empty name and a non-empty value;
    /// when a name repeats, the last pair wins (Java builds a HashMap).
    pub fn get_bytes(&self, name: &str) -> Option<&'a [u8]> {
        let name = name.as_bytes();
        let mut found = None;
        for pair in self.0.split(|&byte| byte == PROPERTY_SEPARATOR) {
            let Some(separator) = pair.iter().position(|&byte| byte == NAME_VALUE_SEPARATOR) else {
                continue;
            };
            let (pair_name, value) = (&pair[..separator], &pair[separator + 1..]);
            if !pair_name.is_empty() && !value.is_empty() && pair_name == name {
                found = Some(value);
            }
        }
        found
    }

    /// The value of `name` as text. Java decodes properties as UTF-8 replacing malformed
    /// sequences; valid UTF-8 (the normal case) is borrowed, not copied.
    pub fn get_str(&self, name: &str) -> Option<Cow<'a, str>> {
        self.get_bytes(name).map(String::from_utf8_lossy)
    }
}

impl PropertyLookup for RawProperties<'_> {
    fn get(&self, name: &str) -> Option<Cow<'_, str>> {
        self.get_str(name)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Builds a record in the CommitLog layout (§5.1), as the store writes it.
    pub(crate) fn build_record(
        magic_code: u32,
        sys_flag: u32,
        body: &[u8],
        topic: &[u8],
        properties: &[u8],
    ) -> Vec<u8> {
        let born_host_length = if sys_flag & BORNHOST_V6_FLAG == 0 {
            8
        } else {
            20
        };
        let store_host_length = if sys_flag & STOREHOSTADDRESS_V6_FLAG == 0 {
            8
        } else {
            20
        };
        let mut record = Vec::new();
        record.extend_from_slice(&0u32.to_be_bytes()); // TOTALSIZE, patched below
        record.extend_from_slice(&magic_code.to_be_bytes());
        record.extend_from_slice(&0x1234_5678u32.to_be_bytes()); // BODYCRC
        record.extend_from_slice(&3u32.to_be_bytes()); // QUEUEID
        record.extend_from_slice(&0u32.to_be_bytes()); // FLAG
        record.extend_from_slice(&42u64.to_be_bytes()); // QUEUEOFFSET
        record.extend_from_slice(&4096u64.to_be_bytes()); // PHYSICALOFFSET
        record.extend_from_slice(&sys_flag.to_be_bytes());
        record.extend_from_slice(&1_700_000_000_000u64.to_be_bytes()); // BORNTIMESTAMP
        record.extend(std::iter::repeat_n(0xAB, born_host_length));
        record.extend_from_slice(&1_700_000_000_001u64.to_be_bytes()); // STORETIMESTAMP
        record.extend(std::iter::repeat_n(0xCD, store_host_length));
        record.extend_from_slice(&0u32.to_be_bytes()); // RECONSUMETIMES
        record.extend_from_slice(&0u64.to_be_bytes()); // PREPARED_TX_OFFSET
        record.extend_from_slice(&(body.len() as u32).to_be_bytes());
        record.extend_from_slice(body);
        if magic_code == MESSAGE_MAGIC_CODE_V1 {
            record.push(topic.len() as u8);
        } else {
            record.extend_from_slice(&(topic.len() as u16).to_be_bytes());
        }
        record.extend_from_slice(topic);
        record.extend_from_slice(&(properties.len() as u16).to_be_bytes());
        record.extend_from_slice(properties);
        let total_size = record.len() as u32;
        record[..4].copy_from_slice(&total_size.to_be_bytes());
        record
    }

    pub(crate) fn encode_properties(pairs: &[(&str, &str)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (name, value) in pairs {
            out.extend_from_slice(name.as_bytes());
            out.push(NAME_VALUE_SEPARATOR);
            out.extend_from_slice(value.as_bytes());
            out.push(PROPERTY_SEPARATOR);
        }
        out
    }

    #[test]
    fn ipv4_v1_record_size_matches_the_reference_formula() {
        // §5.1: 91 + bodyLen + topicLen + propsLen for v1 with IPv4 hosts; 92 + … for v2.
        let properties = encode_properties(&[("TAGS", "TagA")]);
        let v1 = build_record(
            MESSAGE_MAGIC_CODE_V1,
            0,
            b"hello",
            b"TopicTest",
            &properties,
        );
        assert_eq!(v1.len(), 91 + 5 + 9 + properties.len());
        let v2 = build_record(
            MESSAGE_MAGIC_CODE_V2,
            0,
            b"hello",
            b"TopicTest",
            &properties,
        );
        assert_eq!(v2.len(), 92 + 5 + 9 + properties.len());
    }

    #[test]
    fn finds_properties_for_every_host_and_version_combination() {
        let properties = encode_properties(&[("TAGS", "TagA"), ("KEYS", "k1 k2"), ("a", "1")]);
        let body: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        for magic_code in [MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2] {
            for sys_flag in [
                0,
                BORNHOST_V6_FLAG,
                STOREHOSTADDRESS_V6_FLAG,
                BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG | 0x1,
            ] {
                let record = build_record(magic_code, sys_flag, &body, b"T", &properties);
                assert_eq!(
                    record_properties(&record),
                    Ok(properties.as_slice()),
                    "magic {magic_code:#x} sysflag {sys_flag:#x}"
                );
                // Trailing bytes (the next record) are ignored.
                let mut with_next = record.clone();
                with_next.extend_from_slice(&[0xFF; 64]);
                assert_eq!(record_properties(&with_next), Ok(properties.as_slice()));
            }
        }
        let long_topic = vec![b't'; 200];
        let record = build_record(MESSAGE_MAGIC_CODE_V2, 0, b"", &long_topic, &properties);
        assert_eq!(record_properties(&record), Ok(properties.as_slice()));
    }

    #[test]
    fn record_without_properties_has_an_empty_slice() {
        let record = build_record(MESSAGE_MAGIC_CODE_V1, 0, b"x", b"T", b"");
        assert_eq!(record_properties(&record), Ok(&[][..]));
    }

    #[test]
    fn malformed_records_are_errors_not_panics() {
        let properties = encode_properties(&[("TAGS", "TagA")]);
        let record = build_record(MESSAGE_MAGIC_CODE_V1, 0, b"body", b"T", &properties);
        // Every truncation of the buffer.
        for cut in 0..record.len() {
            assert!(
                matches!(
                    record_properties(&record[..cut]),
                    Err(RecordError::Truncated { .. })
                ),
                "cut at {cut}"
            );
        }
        let mut blank = record.clone();
        blank[4..8].copy_from_slice(&0xCBD4_3194u32.to_be_bytes());
        assert_eq!(
            record_properties(&blank),
            Err(RecordError::UnknownMagicCode {
                magic_code: 0xCBD4_3194
            })
        );
        let mut negative_body = record.clone();
        negative_body[84..88].copy_from_slice(&(-5i32).to_be_bytes());
        assert!(matches!(
            record_properties(&negative_body),
            Err(RecordError::NegativeLength {
                field: "BODYLEN",
                ..
            })
        ));
        let mut huge_body = record.clone();
        huge_body[84..88].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(matches!(
            record_properties(&huge_body),
            Err(RecordError::Truncated { .. })
        ));
        // A TOTALSIZE that lies about the length is caught too.
        let mut short_total = record.clone();
        short_total[..4].copy_from_slice(&90u32.to_be_bytes());
        assert!(record_properties(&short_total).is_err());
        let mut negative_total = record;
        negative_total[..4].copy_from_slice(&(-1i32).to_be_bytes());
        assert!(matches!(
            record_properties(&negative_total),
            Err(RecordError::NegativeLength {
                field: "TOTALSIZE",
                ..
            })
        ));
    }

    #[test]
    fn negative_properties_length_means_no_properties() {
        let mut record = build_record(MESSAGE_MAGIC_CODE_V1, 0, b"x", b"T", b"");
        let at = record.len() - 2;
        record[at..].copy_from_slice(&(-3i16).to_be_bytes());
        assert_eq!(record_properties(&record), Ok(&[][..]));
    }

    #[test]
    fn lookup_follows_java_string2message_properties() {
        let properties = encode_properties(&[("TAGS", "TagA"), ("a", "1"), ("b", "x\u{1}y")]);
        let raw = RawProperties(&properties);
        assert_eq!(raw.get_str("TAGS").as_deref(), Some("TagA"));
        assert_eq!(raw.get_str("a").as_deref(), Some("1"));
        // The value runs to the next \x02, so it may contain \x01.
        assert_eq!(raw.get_str("b").as_deref(), Some("x\u{1}y"));
        assert_eq!(raw.get_str("tags"), None, "names are case-sensitive");
        assert_eq!(raw.get_str("TAG"), None);
        assert_eq!(raw.get_str("c"), None);

        // Empty names or values are skipped; the last duplicate wins; no trailing separator.
        let raw = RawProperties(b"\x01v\x02k\x01\x02k\x01first\x02junk\x02k\x01last");
        assert_eq!(raw.get_str("k").as_deref(), Some("last"));
        assert_eq!(raw.get_str(""), None);
        assert_eq!(raw.get_str("junk"), None);
        let raw = RawProperties(b"k\x01v\x02k\x01\x02");
        assert_eq!(
            raw.get_str("k").as_deref(),
            Some("v"),
            "empty value is ignored"
        );

        // Non-UTF-8 values are decoded lossily, as Java does.
        let raw = RawProperties(b"k\x01a\xffb\x02");
        assert_eq!(raw.get_str("k").as_deref(), Some("a\u{fffd}b"));
        assert!(matches!(
            RawProperties(b"k\x01abc\x02").get_str("k"),
            Some(Cow::Borrowed("abc"))
        ));
        assert_eq!(RawProperties(b"").get_str("k"), None);
    }
}
