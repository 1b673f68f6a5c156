//! The REGISTER_BROKER body in both directions: the name server decodes it (JSON, or the
//! zlib-compressed binary form), the broker builds the request.

use super::json::{lenient, null_as_default, parse_lenient, JsonBodyError, Lenient};
use super::topic_config::{DataVersion, TopicConfig, TopicConfigSerializeWrapper, TopicFilterType};
use crate::remoting::headers::RegisterBrokerRequestHeader;
use crate::remoting::{request_code, RemotingCommand};
use bytes::Bytes;
use serde::Deserialize;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Read;

/// `RegisterBrokerBody` (uncompressed JSON form) as read by the name server.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RegisterBrokerBody {
    #[serde(deserialize_with = "lenient")]
    pub filter_server_list: Vec<String>,
    #[serde(deserialize_with = "null_as_default")]
    pub topic_config_serialize_wrapper: TopicConfigSerializeWrapper,
}

/// `MQVersion.Version.V3_0_11.ordinal()`: older brokers send a bare
/// `TopicConfigSerializeWrapper` instead of a `RegisterBrokerBody`.
pub const VERSION_V3_0_11: i32 = 37;
/// `MQVersion.Version.V5_0_0.ordinal()`: from here the compressed body ends with the static
/// topic mappings.
pub const VERSION_V5_0_0: i32 = 413;

/// Cap on the inflated size of a compressed body. The frame itself is at most 16 MiB; JSON
/// topic configs compress about 10:1, so this admits any body a real broker sends (Java has no
/// cap) while a zip bomb cannot take more than this much memory.
pub const REGISTER_BODY_INFLATED_MAX_BYTES: u64 = 256 * 1024 * 1024;

/// `UtilAll.crc32`: CRC-32 (IEEE) of the body, top bit cleared so it fits a positive Java int.
pub fn body_crc32(body: &[u8]) -> i32 {
    // Masked to 31 bits, so the value is non-negative and the cast is lossless.
    (crc32fast::hash(body) & 0x7FFF_FFFF) as i32
}

/// A REGISTER_BROKER body that cannot be decoded.
#[derive(Debug, thiserror::Error)]
pub enum RegisterBodyError {
    #[error("cannot inflate the compressed body: {source}")]
    Inflate {
        #[source]
        source: std::io::Error,
    },
    #[error("the compressed body inflates to more than {max_bytes} bytes")]
    InflatedTooLarge { max_bytes: u64 },
    #[error("the compressed body ends inside {what}")]
    Truncated { what: &'static str },
    #[error("the compressed body has the negative length {length} for {what}")]
    NegativeLength { length: i32, what: &'static str },
    #[error("bad topic config entry `{entry}` in the compressed body: {reason}")]
    BadTopicConfig { entry: String, reason: &'static str },
    #[error(transparent)]
    Json(#[from] JsonBodyError),
}

/// Decodes a REGISTER_BROKER body (Java `RegisterBrokerBody.decode`). An empty body is an empty
/// registration (dataVersion all zero), as in Java. `broker_version` is the request's version.
pub fn decode_register_broker_body(
    body: &[u8],
    compressed: bool,
    broker_version: i32,
) -> Result<RegisterBrokerBody, RegisterBodyError> {
    if body.is_empty() {
        return Ok(RegisterBrokerBody::default());
    }
    if broker_version < VERSION_V3_0_11 {
        let wrapper: TopicConfigSerializeWrapper =
            parse_lenient(body, "TopicConfigSerializeWrapper")?;
        return Ok(RegisterBrokerBody {
            filter_server_list: Vec::new(),
            topic_config_serialize_wrapper: wrapper,
        });
    }
    if !compressed {
        return Ok(parse_lenient(body, "RegisterBrokerBody")?);
    }
    decode_compressed(body)
}

/// The compressed form: a zlib stream of `i32 len + DataVersion JSON`, `i32 topicCount`, per
/// topic `i32 len + TopicConfig.encode()` text, `i32 len + filterServerList JSON`, and (5.x)
/// static topic mappings, which we do not read.
fn decode_compressed(body: &[u8]) -> Result<RegisterBrokerBody, RegisterBodyError> {
    let mut inflated = Vec::new();
    flate2::read::ZlibDecoder::new(body)
        .take(REGISTER_BODY_INFLATED_MAX_BYTES + 1)
        .read_to_end(&mut inflated)
        .map_err(|source| RegisterBodyError::Inflate { source })?;
    if inflated.len() as u64 > REGISTER_BODY_INFLATED_MAX_BYTES {
        return Err(RegisterBodyError::InflatedTooLarge {
            max_bytes: REGISTER_BODY_INFLATED_MAX_BYTES,
        });
    }
    let mut reader = Reader {
        rest: &inflated[..],
    };
    let data_version: DataVersion =
        parse_lenient(reader.chunk("the data version")?, "DataVersion")?;
    let topic_count = reader.i32("the topic count")?;
    let mut topic_config_table = BTreeMap::new();
    // Each entry takes at least 4 bytes, so a bogus count fails on truncation, not on memory.
    for _ in 0..topic_count.max(0) {
        let entry = reader.chunk("a topic config")?;
        let topic_config = decode_topic_config_text(entry)?;
        topic_config_table.insert(topic_config.topic_name.clone(), topic_config);
    }
    let Lenient(filter_server_list) = parse_lenient::<Lenient<Vec<String>>>(
        reader.chunk("the filter server list")?,
        "filterServerList",
    )?;
    Ok(RegisterBrokerBody {
        filter_server_list,
        topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
            data_version,
            topic_config_table,
        },
    })
}

/// `TopicConfig.decode`: `name read write perm filterType [attributesJson]`, space-separated.
/// The text form carries no `topicSysFlag` or `order` (Java drops them too).
fn decode_topic_config_text(entry: &[u8]) -> Result<TopicConfig, RegisterBodyError> {
    let bad = |reason| RegisterBodyError::BadTopicConfig {
        entry: String::from_utf8_lossy(entry).into_owned(),
        reason,
    };
    let text = std::str::from_utf8(entry).map_err(|_| bad("not UTF-8"))?;
    let mut parts = text.splitn(6, ' ');
    let mut next = || parts.next().ok_or_else(|| bad("fewer than 5 fields"));
    let topic_name = next()?.to_owned();
    let read_queue_nums = next()?.parse().map_err(|_| bad("bad readQueueNums"))?;
    let write_queue_nums = next()?.parse().map_err(|_| bad("bad writeQueueNums"))?;
    let perm = next()?.parse().map_err(|_| bad("bad perm"))?;
    let topic_filter_type = match next()? {
        "SINGLE_TAG" => TopicFilterType::SingleTag,
        "MULTI_TAG" => TopicFilterType::MultiTag,
        _ => return Err(bad("bad topicFilterType")),
    };
    let attributes = match parts.next() {
        None | Some("") => BTreeMap::new(),
        // Java logs and ignores unparsable attributes.
        Some(json) => {
            parse_lenient::<Lenient<BTreeMap<String, String>>>(json.as_bytes(), "attributes")
                .map(|attributes| attributes.0)
                .unwrap_or_default()
        }
    };
    Ok(TopicConfig {
        attributes,
        perm,
        read_queue_nums,
        topic_filter_type,
        topic_name,
        write_queue_nums,
        ..TopicConfig::default()
    })
}

/// Big-endian length-prefixed reads over the inflated bytes.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn i32(&mut self, what: &'static str) -> Result<i32, RegisterBodyError> {
        let Some((word, rest)) = self.rest.split_first_chunk::<4>() else {
            return Err(RegisterBodyError::Truncated { what });
        };
        self.rest = rest;
        Ok(i32::from_be_bytes(*word))
    }

    fn chunk(&mut self, what: &'static str) -> Result<&'a [u8], RegisterBodyError> {
        let length = self.i32(what)?;
        let len = usize::try_from(length)
            .map_err(|_| RegisterBodyError::NegativeLength { length, what })?;
        if len > self.rest.len() {
            return Err(RegisterBodyError::Truncated { what });
        }
        let (chunk, rest) = self.rest.split_at(len);
        self.rest = rest;
        Ok(chunk)
    }
}

/// `TopicConfigAndMappingSerializeWrapper` as a 5.x broker writes it (static topic members
/// empty), so strict name servers find every member they expect.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WrapperOut<'a> {
    data_version: &'a DataVersion,
    mapping_data_version: DataVersion,
    topic_config_table: BTreeMap<&'a str, &'a TopicConfig>,
    topic_queue_mapping_detail_map: BTreeMap<String, ()>,
    topic_queue_mapping_info_map: BTreeMap<String, ()>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RegisterBrokerBodyOut<'a> {
    filter_server_list: [&'a str; 0],
    topic_config_serialize_wrapper: WrapperOut<'a>,
}

/// The broker side of REGISTER_BROKER (Java `BrokerOuterAPI.registerBrokerAll`): header
/// brokerName, brokerAddr, clusterName, haServerAddr, brokerId, enableActingMaster=false,
/// compressed=false, bodyCrc32; uncompressed JSON body. No heartbeatTimeoutMillis, so the name
/// server applies its default (120 s); re-register every 30 s.
///
/// Include every topic the broker serves, system topics too: a broker id's first registration
/// carrying exactly one topic is refused (see `RegisterBrokerError`).
pub fn build_register_broker_request(
    cluster_name: &str,
    broker_name: &str,
    broker_addr: &str,
    broker_id: i64,
    ha_server_addr: &str,
    topic_configs: &[TopicConfig],
    data_version: &DataVersion,
) -> RemotingCommand {
    let body = RegisterBrokerBodyOut {
        filter_server_list: [],
        topic_config_serialize_wrapper: WrapperOut {
            data_version,
            mapping_data_version: DataVersion {
                timestamp: data_version.timestamp,
                ..DataVersion::default()
            },
            topic_config_table: topic_configs
                .iter()
                .map(|tc| (tc.topic_name.as_str(), tc))
                .collect(),
            topic_queue_mapping_detail_map: BTreeMap::new(),
            topic_queue_mapping_info_map: BTreeMap::new(),
        },
    };
    // Only string keys, integers, strings and booleans: serializing cannot fail.
    let body = serde_json::to_vec(&body).unwrap_or_default();
    let header = RegisterBrokerRequestHeader {
        broker_name: broker_name.to_owned(),
        broker_addr: broker_addr.to_owned(),
        cluster_name: cluster_name.to_owned(),
        ha_server_addr: ha_server_addr.to_owned(),
        broker_id,
        heartbeat_timeout_millis: None,
        enable_acting_master: Some(false),
        compressed: false,
        body_crc32: body_crc32(&body),
        zone_name: None,
    };
    let mut request =
        RemotingCommand::request(request_code::REGISTER_BROKER).with_body(Bytes::from(body));
    header.encode(&mut request);
    request
}

/// Test helper and reference for the compressed form: what a Java broker with
/// `compressedRegister=true` sends (Java `RegisterBrokerBody.encode(true)`).
#[cfg(test)]
pub(crate) fn encode_compressed_for_test(
    data_version: &DataVersion,
    topic_configs: &[TopicConfig],
    filter_servers: &[&str],
) -> Vec<u8> {
    use std::io::Write;
    fn put_chunk(raw: &mut Vec<u8>, bytes: &[u8]) {
        raw.extend_from_slice(&(bytes.len() as i32).to_be_bytes());
        raw.extend_from_slice(bytes);
    }
    let mut raw = Vec::new();
    put_chunk(&mut raw, &serde_json::to_vec(data_version).unwrap());
    raw.extend_from_slice(&(topic_configs.len() as i32).to_be_bytes());
    for tc in topic_configs {
        let filter = match tc.topic_filter_type {
            TopicFilterType::SingleTag => "SINGLE_TAG",
            TopicFilterType::MultiTag => "MULTI_TAG",
        };
        let text = format!(
            "{} {} {} {} {} {}",
            tc.topic_name,
            tc.read_queue_nums,
            tc.write_queue_nums,
            tc.perm,
            filter,
            serde_json::to_string(&tc.attributes).unwrap()
        );
        put_chunk(&mut raw, text.as_bytes());
    }
    put_chunk(&mut raw, &serde_json::to_vec(filter_servers).unwrap());
    raw.extend_from_slice(&0i32.to_be_bytes()); // no static topic mappings
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(&raw).unwrap();
    encoder.finish().unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_is_masked_to_31_bits() {
        let crc = body_crc32(b"some body bytes");
        assert!(crc >= 0);
        assert_eq!(
            crc as u32,
            crc32fast::hash(b"some body bytes") & 0x7FFF_FFFF
        );
        assert_eq!(body_crc32(b""), 0);
    }

    #[test]
    fn built_request_round_trips_through_the_decoder() {
        let topics = [
            TopicConfig::new("A", 4, 4, 6),
            TopicConfig::new("B", 2, 1, 7),
        ];
        let dv = DataVersion {
            counter: 3,
            state_version: 0,
            timestamp: 1_700_000_000_000,
        };
        let req = build_register_broker_request(
            "C",
            "b",
            "1.2.3.4:10911",
            0,
            "1.2.3.4:10912",
            &topics,
            &dv,
        );
        assert_eq!(req.code, request_code::REGISTER_BROKER);
        assert_eq!(req.ext_fields["brokerId"], "0");
        assert_eq!(req.ext_fields["compressed"], "false");
        assert_eq!(
            req.ext_fields["bodyCrc32"],
            body_crc32(&req.body).to_string()
        );
        let json: serde_json::Value = serde_json::from_slice(&req.body).unwrap();
        assert_eq!(json["filterServerList"], serde_json::json!([]));
        assert_eq!(
            json["topicConfigSerializeWrapper"]["topicConfigTable"]["B"]["perm"],
            7
        );
        assert_eq!(
            json["topicConfigSerializeWrapper"]["topicQueueMappingInfoMap"],
            serde_json::json!({})
        );
        let body = decode_register_broker_body(&req.body, false, req.version).unwrap();
        let wrapper = body.topic_config_serialize_wrapper;
        assert_eq!(wrapper.data_version, dv);
        assert_eq!(wrapper.topic_config_table["A"], topics[0]);
        assert_eq!(wrapper.topic_config_table["B"], topics[1]);
    }

    #[test]
    fn compressed_body_decodes() {
        let mut tc = TopicConfig::new("T", 8, 8, 6);
        tc.attributes
            .insert("+message.type".into(), "NORMAL".into());
        let dv = DataVersion {
            counter: 9,
            state_version: 1,
            timestamp: 5,
        };
        let bytes = encode_compressed_for_test(
            &dv,
            &[tc.clone(), TopicConfig::new("U", 1, 1, 4)],
            &["f:1"],
        );
        let body = decode_register_broker_body(&bytes, true, VERSION_V5_0_0).unwrap();
        assert_eq!(body.filter_server_list, vec!["f:1".to_owned()]);
        assert_eq!(body.topic_config_serialize_wrapper.data_version, dv);
        assert_eq!(
            body.topic_config_serialize_wrapper.topic_config_table["T"],
            tc
        );
        assert_eq!(
            body.topic_config_serialize_wrapper.topic_config_table["U"].perm,
            4
        );
    }

    #[test]
    fn corrupt_compressed_bodies_are_errors() {
        assert!(matches!(
            decode_register_broker_body(b"not zlib at all", true, VERSION_V5_0_0),
            Err(RegisterBodyError::Inflate { .. })
        ));
        // A valid stream whose content stops inside the topic list.
        let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut encoder, &[0, 0, 0, 2, b'{', b'}', 0, 0, 0, 5]).unwrap();
        let truncated = encoder.finish().unwrap();
        assert!(matches!(
            decode_register_broker_body(&truncated, true, VERSION_V5_0_0),
            Err(RegisterBodyError::Truncated {
                what: "a topic config"
            })
        ));
    }

    #[test]
    fn bad_topic_config_text_is_an_error() {
        assert!(decode_topic_config_text(b"T 1 x 6 SINGLE_TAG").is_err());
        assert!(decode_topic_config_text(b"T 1 1 6").is_err());
        assert!(decode_topic_config_text(b"T 1 1 6 WEIRD").is_err());
        let tc = decode_topic_config_text(b"T 1 2 6 MULTI_TAG ").unwrap();
        assert_eq!((tc.read_queue_nums, tc.write_queue_nums), (1, 2));
    }

    #[test]
    fn old_brokers_send_a_bare_wrapper() {
        let body = br#"{"dataVersion":{"counter":1,"timestamp":2},"topicConfigTable":{"T":{"topicName":"T"}}}"#;
        let decoded = decode_register_broker_body(body, false, VERSION_V3_0_11 - 1).unwrap();
        assert_eq!(
            decoded.topic_config_serialize_wrapper.data_version.counter,
            1
        );
        assert!(decoded
            .topic_config_serialize_wrapper
            .topic_config_table
            .contains_key("T"));
    }

    /// A 5.x Java broker's body as fastjson writes it (sorted keys, the static-topic members
    /// present and ignored) and the same body with numbers as strings and nulls.
    #[test]
    fn java_broker_bodies_decode_with_numbers_as_strings() {
        let java = br#"{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":2,"stateVersion":0,"timestamp":1700000000000},"mappingDataVersion":{"counter":0,"stateVersion":0,"timestamp":1700000000000},"topicConfigTable":{"T":{"attributes":{},"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicMessageType":"NORMAL","topicName":"T","topicSysFlag":0,"writeQueueNums":4}},"topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":{}}}"#;
        let loose = br#"{"filterServerList":null,"topicConfigSerializeWrapper":{"dataVersion":{"counter":"2","timestamp":"1700000000000"},"topicConfigTable":{"T":{"attributes":null,"order":0,"perm":"6","readQueueNums":"4","topicFilterType":0,"topicName":"T","writeQueueNums":"4"}}}}"#;
        let expected = RegisterBrokerBody {
            filter_server_list: Vec::new(),
            topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
                data_version: DataVersion {
                    counter: 2,
                    state_version: 0,
                    timestamp: 1_700_000_000_000,
                },
                topic_config_table: BTreeMap::from([("T".into(), TopicConfig::new("T", 4, 4, 6))]),
            },
        };
        for body in [&java[..], &loose[..]] {
            let decoded = decode_register_broker_body(body, false, VERSION_V5_0_0).unwrap();
            assert_eq!(decoded, expected);
        }
    }
}
