//! Property access on a stored record without decoding or copying it.
//!
//! [`record_properties`] walks the fixed CommitLog record header (RocketMQ layout, Java
//! `MessageDecoder.decodeProperties`; docs/FORMAT.md) to the properties bytes;
//! [`RawProperties`] looks a key up by scanning the `name \x01 value \x02` pairs in place
//! (Java `MessageDecoder.string2messageProperties`). No map is built and the body is
//! never touched. This walk is deliberately minimal; `store::format` owns the full codec.

use std::borrow::Cow;

use super::sql92::PropertyLookup;
use crate::store::format;

pub use crate::store::format::FormatError as RecordError;

/// The properties bytes of a stored record (empty if it has none). `record` must start at the
/// record's TOTALSIZE. The walk is the store's record decoder (`store::format`), which borrows
/// every field in place: nothing is copied.
pub fn record_properties(record: &[u8]) -> Result<&[u8], RecordError> {
    format::decode_record(record).map(|r| r.properties)
}

/// A message's encoded properties, read in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawProperties<'a>(pub &'a [u8]);

impl<'a> RawProperties<'a> {
    /// The raw value bytes of `name`, with Java's parsing rules: pairs are split on `\x02`;
    /// a pair counts only if its first `\x01` leaves a non-empty name and a non-empty value;
    /// when a name repeats, the last pair wins (Java builds a HashMap).
    pub fn get_bytes(&self, name: &str) -> Option<&'a [u8]> {
        format::property_value(self.0, name.as_bytes())
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

    // Layout constants for building records by hand, independent of the store's encoder.
    pub(crate) const MESSAGE_MAGIC_CODE_V1: u32 = 0xDAA3_20A7;
    pub(crate) const MESSAGE_MAGIC_CODE_V2: u32 = 0xDAA3_20AB;
    pub(crate) const BORNHOST_V6_FLAG: u32 = 0x10;
    pub(crate) const STOREHOSTADDRESS_V6_FLAG: u32 = 0x20;
    const NAME_VALUE_SEPARATOR: u8 = 0x01;
    const PROPERTY_SEPARATOR: u8 = 0x02;

    /// Builds a record in the CommitLog layout (docs/FORMAT.md), as the store writes it.
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
        // Java `CommitLog.calMsgLength`: 91 + bodyLen + topicLen + propsLen for v1 with IPv4 hosts; 92 + … for v2.
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
            assert!(record_properties(&record[..cut]).is_err(), "cut at {cut}");
        }
        let mut blank = record.clone();
        blank[4..8].copy_from_slice(&0xCBD4_3194u32.to_be_bytes());
        assert!(record_properties(&blank).is_err());
        let mut negative_body = record.clone();
        negative_body[84..88].copy_from_slice(&(-5i32).to_be_bytes());
        assert!(record_properties(&negative_body).is_err());
        let mut huge_body = record.clone();
        huge_body[84..88].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(record_properties(&huge_body).is_err());
        // A TOTALSIZE that lies about the length is caught too.
        let mut short_total = record.clone();
        short_total[..4].copy_from_slice(&90u32.to_be_bytes());
        assert!(record_properties(&short_total).is_err());
        let mut negative_total = record;
        negative_total[..4].copy_from_slice(&(-1i32).to_be_bytes());
        assert!(record_properties(&negative_total).is_err());
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
