//! The stored message record (docs/FORMAT.md, Java `MessageDecoder`): a minimal decoder for pull bodies and
//! an encoder for the echo server and tests, plus the properties string and the bench's
//! body stamp.
//!
//! Own code on purpose: the bench must not depend on the broker's store.

use crate::error::BenchError;

/// `MessageDecoder.MESSAGE_MAGIC_CODE` (v1: 1-byte topic length).
pub const MAGIC_V1: u32 = 0xDAA3_20A7;
/// `MESSAGE_MAGIC_CODE_V2` (2-byte topic length).
pub const MAGIC_V2: u32 = 0xDAA3_20AB;
/// `MessageSysFlag.BORNHOST_V6_FLAG`.
pub const BORNHOST_V6_FLAG: i32 = 0x10;
/// `MessageSysFlag.STOREHOSTADDRESS_V6_FLAG`.
pub const STOREHOST_V6_FLAG: i32 = 0x20;
/// `MessageSysFlag.COMPRESSED_FLAG`: the body is not the bytes the producer stamped.
pub const COMPRESSED_FLAG: i32 = 0x1;
/// Smallest possible record: fixed fields with IPv4 hosts, empty body/topic/properties.
pub const RECORD_MIN_BYTES: usize = 91;
/// `MessageConst.NAME_VALUE_SEPARATOR`.
pub const NAME_VALUE_SEPARATOR: u8 = 1;
/// `MessageConst.PROPERTY_SEPARATOR`.
pub const PROPERTY_SEPARATOR: u8 = 2;

/// The bench stamps the intended send time into the body: `"RQB1"` + µs since the Unix epoch
/// (i64, big-endian). Bodies shorter than this carry no stamp.
pub const STAMP_MAGIC: &[u8; 4] = b"RQB1";
pub const STAMP_BYTES: usize = 12;

/// One decoded record, borrowing from the pull body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    pub queue_id: i32,
    pub queue_offset: i64,
    pub physical_offset: i64,
    pub sys_flag: i32,
    pub born_timestamp_ms: i64,
    pub store_timestamp_ms: i64,
    pub body: &'a [u8],
    pub topic: &'a [u8],
    pub properties: &'a [u8],
}

impl Record<'_> {
    /// The bench stamp in the body, if there is one (µs since the epoch).
    pub fn stamp_us(&self) -> Option<i64> {
        if self.sys_flag & COMPRESSED_FLAG != 0 {
            return None;
        }
        read_stamp(self.body)
    }

    /// Send time in µs since the epoch: the body stamp, else the record's born timestamp.
    pub fn born_us(&self) -> i64 {
        self.stamp_us()
            .unwrap_or(self.born_timestamp_ms.saturating_mul(1000))
    }

    /// A property value.
    pub fn property(&self, key: &str) -> Option<&[u8]> {
        property(self.properties, key.as_bytes())
    }
}

/// Writes the stamp into the start of `body` if it is long enough.
pub fn write_stamp(body: &mut [u8], stamp_us: i64) {
    if body.len() >= STAMP_BYTES {
        body[..4].copy_from_slice(STAMP_MAGIC);
        body[4..12].copy_from_slice(&stamp_us.to_be_bytes());
    }
}

/// Reads the stamp written by [`write_stamp`].
pub fn read_stamp(body: &[u8]) -> Option<i64> {
    if body.len() >= STAMP_BYTES && &body[..4] == STAMP_MAGIC {
        let mut raw = [0u8; 8];
        raw.copy_from_slice(&body[4..12]);
        Some(i64::from_be_bytes(raw))
    } else {
        None
    }
}

/// Iterates over the records of a pull body. A malformed record ends the iteration with an
/// error (the rest of the body cannot be framed).
pub struct Records<'a> {
    buf: &'a [u8],
    pos: usize,
    failed: bool,
}

/// The records of `body`.
pub fn records(body: &[u8]) -> Records<'_> {
    Records {
        buf: body,
        pos: 0,
        failed: false,
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, BenchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.buf.len() {
            return None;
        }
        let result = decode_one(self.buf, self.pos);
        match &result {
            Ok((_, size)) => self.pos += size,
            Err(_) => self.failed = true,
        }
        Some(result.map(|(record, _)| record))
    }
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    start: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], BenchError> {
        let end = self.pos.checked_add(n).filter(|end| *end <= self.buf.len());
        let Some(end) = end else {
            return Err(BenchError::Record {
                offset_bytes: self.start,
                reason: "record runs past its TOTALSIZE",
            });
        };
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }
    fn u16(&mut self) -> Result<u16, BenchError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    fn i32(&mut self) -> Result<i32, BenchError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn i64(&mut self) -> Result<i64, BenchError> {
        let b = self.take(8)?;
        let mut raw = [0u8; 8];
        raw.copy_from_slice(b);
        Ok(i64::from_be_bytes(raw))
    }
}

fn decode_one(buf: &[u8], start: usize) -> Result<(Record<'_>, usize), BenchError> {
    let err = |reason| BenchError::Record {
        offset_bytes: start,
        reason,
    };
    let rest = &buf[start..];
    if rest.len() < 8 {
        return Err(err("truncated record header"));
    }
    let total = i32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
    let total = usize::try_from(total).map_err(|_| err("negative TOTALSIZE"))?;
    if total < RECORD_MIN_BYTES || total > rest.len() {
        return Err(err("TOTALSIZE out of range"));
    }
    let mut c = Cursor {
        buf: &rest[..total],
        pos: 4,
        start,
    };
    let magic = c.i32()? as u32;
    let v2 = match magic {
        MAGIC_V1 => false,
        MAGIC_V2 => true,
        _ => return Err(err("unknown MAGICCODE")),
    };
    let _body_crc = c.i32()?;
    let queue_id = c.i32()?;
    let _flag = c.i32()?;
    let queue_offset = c.i64()?;
    let physical_offset = c.i64()?;
    let sys_flag = c.i32()?;
    let born_timestamp_ms = c.i64()?;
    c.take(if sys_flag & BORNHOST_V6_FLAG != 0 {
        20
    } else {
        8
    })?;
    let store_timestamp_ms = c.i64()?;
    c.take(if sys_flag & STOREHOST_V6_FLAG != 0 {
        20
    } else {
        8
    })?;
    let _reconsume_times = c.i32()?;
    let _prepared_tx_offset = c.i64()?;
    let body_len = usize::try_from(c.i32()?).map_err(|_| err("negative BODYLEN"))?;
    let body = c.take(body_len)?;
    let topic_len = if v2 {
        usize::from(c.u16()?)
    } else {
        usize::from(c.take(1)?[0])
    };
    let topic = c.take(topic_len)?;
    // Java reads PROPLEN as a signed short and skips the properties when it is not positive.
    let prop_len = c.u16()? as i16;
    let properties = if prop_len > 0 {
        c.take(prop_len as usize)?
    } else {
        &[][..]
    };
    Ok((
        Record {
            queue_id,
            queue_offset,
            physical_offset,
            sys_flag,
            born_timestamp_ms,
            store_timestamp_ms,
            body,
            topic,
            properties,
        },
        total,
    ))
}

/// Looks `key` up in a properties string (`name \x01 value \x02 ...`).
pub fn property<'a>(properties: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    properties
        .split(|b| *b == PROPERTY_SEPARATOR)
        .filter_map(|pair| {
            let sep = pair.iter().position(|b| *b == NAME_VALUE_SEPARATOR)?;
            Some((&pair[..sep], &pair[sep + 1..]))
        })
        .find(|(name, _)| *name == key)
        .map(|(_, value)| value)
}

/// Appends `name \x01 value \x02`.
pub fn push_property(out: &mut String, name: &str, value: &str) {
    out.push_str(name);
    out.push(char::from(NAME_VALUE_SEPARATOR));
    out.push_str(value);
    out.push(char::from(PROPERTY_SEPARATOR));
}

/// The fields [`encode_record`] writes.
#[derive(Debug, Clone)]
pub struct RecordFields<'a> {
    pub queue_id: i32,
    pub queue_offset: i64,
    pub physical_offset: i64,
    pub born_timestamp_ms: i64,
    pub store_timestamp_ms: i64,
    /// IPv4 host and port for both BORNHOST and STOREHOST.
    pub host: ([u8; 4], i32),
    pub body: &'a [u8],
    pub topic: &'a [u8],
    pub properties: &'a [u8],
}

/// Appends a v1 record (IPv4 hosts, topic ≤ 255 bytes as one length byte; the body CRC is left 0
/// because the bench never checks it). Properties longer than `i16::MAX` are dropped.
pub fn encode_record(fields: &RecordFields<'_>, out: &mut Vec<u8>) {
    let topic = &fields.topic[..fields.topic.len().min(255)];
    let properties: &[u8] = if fields.properties.len() <= i16::MAX as usize {
        fields.properties
    } else {
        &[]
    };
    let total = RECORD_MIN_BYTES + fields.body.len() + topic.len() + properties.len();
    out.reserve(total);
    out.extend_from_slice(&(total as i32).to_be_bytes());
    out.extend_from_slice(&MAGIC_V1.to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes()); // BODYCRC
    out.extend_from_slice(&fields.queue_id.to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes()); // FLAG
    out.extend_from_slice(&fields.queue_offset.to_be_bytes());
    out.extend_from_slice(&fields.physical_offset.to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes()); // SYSFLAG
    out.extend_from_slice(&fields.born_timestamp_ms.to_be_bytes());
    out.extend_from_slice(&fields.host.0);
    out.extend_from_slice(&fields.host.1.to_be_bytes());
    out.extend_from_slice(&fields.store_timestamp_ms.to_be_bytes());
    out.extend_from_slice(&fields.host.0);
    out.extend_from_slice(&fields.host.1.to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes()); // RECONSUMETIMES
    out.extend_from_slice(&0i64.to_be_bytes()); // PREPARED_TX_OFFSET
    out.extend_from_slice(&(fields.body.len() as i32).to_be_bytes());
    out.extend_from_slice(fields.body);
    out.push(topic.len() as u8);
    out.extend_from_slice(topic);
    out.extend_from_slice(&(properties.len() as u16).to_be_bytes());
    out.extend_from_slice(properties);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(queue_offset: i64, body: &[u8], props: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_record(
            &RecordFields {
                queue_id: 3,
                queue_offset,
                physical_offset: 1000 + queue_offset,
                born_timestamp_ms: 1_700_000_000_123,
                store_timestamp_ms: 1_700_000_000_456,
                host: ([127, 0, 0, 1], 10911),
                body,
                topic: b"TopicA",
                properties: props,
            },
            &mut out,
        );
        out
    }

    #[test]
    fn round_trip_and_stamp() {
        let mut body = vec![b'x'; 64];
        write_stamp(&mut body, 1_700_000_000_123_456);
        let mut props = String::new();
        push_property(&mut props, "TAGS", "tag1");
        push_property(&mut props, "KEYS", "k");
        let mut buf = sample(7, &body, props.as_bytes());
        assert_eq!(buf.len(), 91 + 64 + 6 + props.len());
        buf.extend(sample(8, b"short", b""));
        let recs: Vec<_> = records(&buf).collect::<Result<_, _>>().expect("decodes");
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[0].queue_offset, 7);
        assert_eq!(recs[0].queue_id, 3);
        assert_eq!(recs[0].topic, b"TopicA");
        assert_eq!(recs[0].property("TAGS"), Some(&b"tag1"[..]));
        assert_eq!(recs[0].property("KEYS"), Some(&b"k"[..]));
        assert_eq!(recs[0].property("NONE"), None);
        assert_eq!(recs[0].born_us(), 1_700_000_000_123_456);
        assert_eq!(recs[1].stamp_us(), None);
        assert_eq!(recs[1].born_us(), 1_700_000_000_123_000);
        assert_eq!(recs[1].body, b"short");
    }

    #[test]
    fn ipv6_hosts_shift_fields() {
        // Rewrite a v4 record into one with v6 born and store hosts (+12 bytes each).
        let v4 = sample(1, b"body", b"");
        let mut v6 = Vec::new();
        v6.extend_from_slice(&((v4.len() + 24) as i32).to_be_bytes());
        v6.extend_from_slice(&v4[4..36]);
        v6.extend_from_slice(&(BORNHOST_V6_FLAG | STOREHOST_V6_FLAG).to_be_bytes());
        v6.extend_from_slice(&v4[40..48]); // born ts
        v6.extend_from_slice(&[0u8; 20]);
        v6.extend_from_slice(&v4[56..64]); // store ts
        v6.extend_from_slice(&[0u8; 20]);
        v6.extend_from_slice(&v4[72..]);
        let rec = records(&v6).next().expect("one").expect("decodes");
        assert_eq!(rec.body, b"body");
        assert_eq!(rec.store_timestamp_ms, 1_700_000_000_456);
        assert_eq!(rec.topic, b"TopicA");
    }

    #[test]
    fn malformed_records_are_errors() {
        let good = sample(1, b"abc", b"");
        let mut bad_magic = good.clone();
        bad_magic[4] = 0;
        let mut too_long = good.clone();
        too_long[3] = 0xFF;
        let mut body_overrun = good.clone();
        body_overrun[84..88].copy_from_slice(&1000i32.to_be_bytes());
        for buf in [
            &bad_magic[..],
            &too_long[..],
            &body_overrun[..],
            &good[..20],
        ] {
            let mut it = records(buf);
            assert!(it.next().expect("an item").is_err());
            assert!(it.next().is_none(), "iteration stops after an error");
        }
    }
}
