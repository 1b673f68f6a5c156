//! Golden bytes: records and ConsumeQueue units built by hand from the layout in
//! docs/FORMAT.md (Java `CommitLog`, `ConsumeQueue`) decode to the expected fields, and our
//! encoder produces exactly those bytes.

use std::net::SocketAddr;

use ringmq::store::format::{
    self, decode_cq_unit, decode_record, encode_cq_unit, encode_record, CqUnit, RecordFields,
};

/// Builds bytes field by field, big-endian, exactly as the reference table lists them.
#[derive(Default)]
struct Hand(Vec<u8>);

impl Hand {
    fn i8(mut self, v: u8) -> Self {
        self.0.push(v);
        self
    }
    fn i16(mut self, v: i16) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn i32(mut self, v: i32) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn i64(mut self, v: i64) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn raw(mut self, v: &[u8]) -> Self {
        self.0.extend_from_slice(v);
        self
    }
}

const PROPS: &[u8] = b"TAGS\x01TagA\x02";

fn fields<'a>(topic: &'a [u8], born: &str, store: &str, sys_flag: i32) -> RecordFields<'a> {
    RecordFields {
        queue_id: 3,
        flag: 7,
        queue_offset: 42,
        phy_offset: 0x1_0000_0000,
        sys_flag,
        born_timestamp_ms: 1_700_000_000_000,
        born_host: born.parse::<SocketAddr>().unwrap(),
        store_timestamp_ms: 1_700_000_000_123,
        store_host: store.parse::<SocketAddr>().unwrap(),
        reconsume_times: 2,
        prepared_transaction_offset: 0,
        body: b"hello",
        topic,
        properties: PROPS,
    }
}

/// CRC32("hello") = 0x3610A686 (top bit already clear).
const HELLO_CRC: i32 = 0x3610_A686;

#[test]
fn v1_ipv4_record_golden() {
    // 91 + body 5 + topic 9 + props 10 = 115 bytes.
    let golden = Hand::default()
        .i32(115) // TOTALSIZE
        .i32(0xDAA3_20A7_u32 as i32) // MAGICCODE v1
        .i32(HELLO_CRC) // BODYCRC
        .i32(3) // QUEUEID
        .i32(7) // FLAG
        .i64(42) // QUEUEOFFSET
        .i64(0x1_0000_0000) // PHYSICALOFFSET
        .i32(0) // SYSFLAG
        .i64(1_700_000_000_000) // BORNTIMESTAMP
        .raw(&[192, 168, 1, 10])
        .i32(50_000) // BORNHOST
        .i64(1_700_000_000_123) // STORETIMESTAMP
        .raw(&[10, 0, 0, 1])
        .i32(10_911) // STOREHOST
        .i32(2) // RECONSUMETIMES
        .i64(0) // PREPARED_TX_OFFSET
        .i32(5) // BODYLEN
        .raw(b"hello")
        .i8(9) // TOPICLEN (1 byte)
        .raw(b"TopicTest")
        .i16(10) // PROPLEN
        .raw(PROPS)
        .0;
    assert_eq!(golden.len(), 115);
    // STORE_TIMESTAMP lives at byte 56 for an IPv4 born host (MessageDecoder constant).
    assert_eq!(&golden[56..64], &1_700_000_000_123_i64.to_be_bytes());

    let f = fields(b"TopicTest", "192.168.1.10:50000", "10.0.0.1:10911", 0);
    let mut encoded = Vec::new();
    encode_record(&f, &mut encoded);
    assert_eq!(encoded, golden);

    let rec = decode_record(&golden).unwrap();
    assert_eq!(rec.total_size, 115);
    assert_eq!(rec.magic_code, format::MAGIC_CODE_V1);
    assert_eq!(rec.body_crc, HELLO_CRC);
    assert!(rec.body_crc_matches());
    assert_eq!((rec.queue_id, rec.flag, rec.queue_offset), (3, 7, 42));
    assert_eq!(rec.phy_offset, 0x1_0000_0000);
    assert_eq!(rec.born_host, "192.168.1.10:50000".parse().unwrap());
    assert_eq!(rec.store_host, "10.0.0.1:10911".parse().unwrap());
    assert_eq!(rec.store_timestamp_ms, 1_700_000_000_123);
    assert_eq!(rec.reconsume_times, 2);
    assert_eq!(rec.body, b"hello");
    assert_eq!(rec.topic, "TopicTest");
    assert_eq!(rec.properties, PROPS);
    assert_eq!(
        format::record_store_timestamp(&golden).unwrap(),
        1_700_000_000_123
    );
    assert_eq!(format::tags_code(rec.properties), 2_598_919); // "TagA".hashCode()
}

#[test]
fn v2_long_topic_record_golden() {
    let topic = format!("%RETRY%{}", "g".repeat(193)); // 200 bytes > 127 => v2
                                                       // 92 + 5 + 200 + 10 = 307 bytes.
    let golden = Hand::default()
        .i32(307)
        .i32(0xDAA3_20AB_u32 as i32) // MAGICCODE v2
        .i32(HELLO_CRC)
        .i32(3)
        .i32(7)
        .i64(42)
        .i64(0x1_0000_0000)
        .i32(0)
        .i64(1_700_000_000_000)
        .raw(&[192, 168, 1, 10])
        .i32(50_000)
        .i64(1_700_000_000_123)
        .raw(&[10, 0, 0, 1])
        .i32(10_911)
        .i32(2)
        .i64(0)
        .i32(5)
        .raw(b"hello")
        .i16(200) // TOPICLEN (2 bytes in v2)
        .raw(topic.as_bytes())
        .i16(10)
        .raw(PROPS)
        .0;
    let f = fields(topic.as_bytes(), "192.168.1.10:50000", "10.0.0.1:10911", 0);
    let mut encoded = Vec::new();
    encode_record(&f, &mut encoded);
    assert_eq!(encoded, golden);
    let rec = decode_record(&golden).unwrap();
    assert_eq!(rec.magic_code, format::MAGIC_CODE_V2);
    assert_eq!(rec.topic, topic);
    assert_eq!(rec.properties, PROPS);
}

#[test]
fn ipv6_hosts_record_golden() {
    let born_ip: [u8; 16] = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01];
    let store_ip: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01];
    // 91 + 12 + 12 + 5 + 9 + 10 = 139 bytes; SYSFLAG has BORNHOST_V6 (0x10) | STOREHOST_V6 (0x20).
    let golden = Hand::default()
        .i32(139)
        .i32(0xDAA3_20A7_u32 as i32)
        .i32(HELLO_CRC)
        .i32(3)
        .i32(7)
        .i64(42)
        .i64(0x1_0000_0000)
        .i32(0x30)
        .i64(1_700_000_000_000)
        .raw(&born_ip)
        .i32(50_000)
        .i64(1_700_000_000_123)
        .raw(&store_ip)
        .i32(10_911)
        .i32(2)
        .i64(0)
        .i32(5)
        .raw(b"hello")
        .i8(9)
        .raw(b"TopicTest")
        .i16(10)
        .raw(PROPS)
        .0;
    // The encoder sets the v6 flags from the host families, whatever the caller passed.
    let f = fields(b"TopicTest", "[fe80::1]:50000", "[::1]:10911", 0);
    let mut encoded = Vec::new();
    encode_record(&f, &mut encoded);
    assert_eq!(encoded, golden);
    let rec = decode_record(&golden).unwrap();
    assert_eq!(rec.sys_flag, 0x30);
    assert_eq!(rec.born_host, "[fe80::1]:50000".parse().unwrap());
    assert_eq!(rec.store_host, "[::1]:10911".parse().unwrap());
    assert_eq!(rec.store_timestamp_ms, 1_700_000_000_123);
    assert_eq!(
        format::record_store_timestamp(&golden).unwrap(),
        1_700_000_000_123
    );

    // Mixed: IPv6 born host only.
    let f = fields(b"TopicTest", "[fe80::1]:50000", "10.0.0.1:10911", 0);
    let mut mixed = Vec::new();
    encode_record(&f, &mut mixed);
    assert_eq!(mixed.len(), 127);
    let rec = decode_record(&mixed).unwrap();
    assert_eq!(rec.sys_flag, 0x10);
    assert_eq!(rec.store_host, "10.0.0.1:10911".parse().unwrap());
}

#[test]
fn blank_filler_golden() {
    let mut out = Vec::new();
    format::encode_blank(4096, &mut out);
    assert_eq!(out, Hand::default().i32(4096).i32(0xCBD4_3194_u32 as i32).0);
    assert_eq!(
        format::decode_record_head(&out).unwrap(),
        format::RecordHead::Blank { total_size: 4096 }
    );
    assert!(decode_record(&out).is_err());
}

#[test]
fn consume_queue_unit_golden() {
    let golden = Hand::default()
        .i64(1_073_741_824) // commit log offset
        .i32(115) // size
        .i64(2_598_919) // tags code of "TagA"
        .0;
    assert_eq!(golden.len(), 20);
    let unit = CqUnit {
        phy_offset: 1_073_741_824,
        size: 115,
        tags_code: 2_598_919,
    };
    assert_eq!(encode_cq_unit(&unit).to_vec(), golden);
    assert_eq!(decode_cq_unit(&golden).unwrap(), unit);
    // Negative tags codes are sign-extended to 8 bytes.
    let neg = CqUnit {
        phy_offset: 0,
        size: 1,
        tags_code: i64::from(format::java_string_hash_code("polygenelubricants")),
    };
    assert_eq!(
        &encode_cq_unit(&neg)[12..],
        &(i32::MIN as i64).to_be_bytes()
    );
    // Java's filler unit.
    assert_eq!(
        encode_cq_unit(&CqUnit::FILLER).to_vec(),
        Hand::default().i64(0).i32(i32::MAX).i64(0).0
    );
}

#[test]
fn batch_body_golden() {
    // Java `MessageDecoder.encodeMessage`: TOTALSIZE, MAGIC(0), BODYCRC(0), FLAG, BODYLEN, BODY,
    // PROPLEN, PROPERTIES.
    let golden = Hand::default()
        .i32(20 + 5 + 2 + 10)
        .i32(0)
        .i32(0)
        .i32(7)
        .i32(5)
        .raw(b"hello")
        .i16(10)
        .raw(PROPS)
        .0;
    let mut encoded = Vec::new();
    format::encode_batch_entry(7, b"hello", PROPS, &mut encoded);
    assert_eq!(encoded, golden);
    let entries: Vec<_> = format::batch_entries(&golden)
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(
        (entries[0].flag, entries[0].body, entries[0].properties),
        (7, &b"hello"[..], PROPS)
    );
}
