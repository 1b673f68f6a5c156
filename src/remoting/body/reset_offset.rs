//! The bodies of an offset reset (Java `ResetOffsetBody`, `ResetOffsetBodyForC`): the answer to
//! INVOKE_BROKER_TO_RESET_OFFSET (222) and the body of RESET_CONSUMER_CLIENT_OFFSET (220).
//!
//! Java's `ResetOffsetBody` is a `Map<MessageQueue, Long>`, which fastjson writes with the
//! queue object itself as the key (not valid JSON, but what every client parses):
//! `{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:5}}`, fields in fastjson's
//! alphabetical order. The C++ client gets a list instead (`ResetOffsetBodyForC`):
//! `{"offsetTable":[{"brokerName":"b","offset":5,"queueId":0,"topic":"t"}]}`. The broker writes
//! both; the admin tool reads the map a broker answers ([`ResetOffsetBody::parse`], as
//! leniently as every body: numbers as strings, unknown members, object or string keys).

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};

use super::json::{JsonBodyError, Lenient};
use super::lock_batch::MessageQueue;
use super::object_keys::{object_key_map, parse_with_object_keys};

/// Java `ResetOffsetBody` (and the C++ form): each queue with its new offset.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ResetOffsetBody {
    #[serde(deserialize_with = "offset_table")]
    pub offset_table: BTreeMap<MessageQueue, i64>,
}

/// The object-keyed map of offsets, each offset as fastjson reads a `Long`.
fn offset_table<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<MessageQueue, i64>, D::Error> {
    let table: BTreeMap<MessageQueue, Lenient<i64>> = object_key_map(deserializer)?;
    Ok(table
        .into_iter()
        .map(|(mq, offset)| (mq, offset.0))
        .collect())
}

impl ResetOffsetBody {
    /// Java's `ResetOffsetBody` as fastjson writes it (queue objects as keys) or as a string-keyed
    /// map.
    pub fn parse(bytes: &[u8]) -> Result<Self, JsonBodyError> {
        parse_with_object_keys(bytes, "ResetOffsetBody")
    }

    /// fastjson's text of `ResetOffsetBody`, queue objects as keys.
    pub fn encode(&self) -> Vec<u8> {
        self.encode_table(('{', '}'), |broker_name, queue_id, topic, offset| {
            format!(
                "{{\"brokerName\":{broker_name},\"queueId\":{queue_id},\"topic\":{topic}}}:{offset}"
            )
        })
    }

    /// fastjson's text of `ResetOffsetBodyForC` (a list of `MessageQueueForC`).
    pub fn encode_for_c(&self) -> Vec<u8> {
        self.encode_table(('[', ']'), |broker_name, queue_id, topic, offset| {
            format!(
                "{{\"brokerName\":{broker_name},\"offset\":{offset},\"queueId\":{queue_id},\"topic\":{topic}}}"
            )
        })
    }

    /// `{"offsetTable":<open>entry,entry<close>}`, each entry written by `entry` from the
    /// queue's JSON-quoted broker name, its queue id, its JSON-quoted topic and the offset.
    fn encode_table(
        &self,
        (open, close): (char, char),
        entry: impl Fn(&str, i32, &str, i64) -> String,
    ) -> Vec<u8> {
        let mut out = format!("{{\"offsetTable\":{open}");
        for (i, (mq, offset)) in self.offset_table.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&entry(
                &json_string(&mq.broker_name),
                mq.queue_id,
                &json_string(&mq.topic),
                *offset,
            ));
        }
        out.push(close);
        out.push('}');
        out.into_bytes()
    }
}

fn json_string(s: &str) -> String {
    // Serializing a &str cannot fail.
    serde_json::to_string(s).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mq(queue_id: i32) -> MessageQueue {
        MessageQueue {
            topic: "T\"1".into(),
            broker_name: "broker-a".into(),
            queue_id,
        }
    }

    fn body() -> ResetOffsetBody {
        ResetOffsetBody {
            offset_table: BTreeMap::from([(mq(0), 5), (mq(1), -1)]),
        }
    }

    #[test]
    fn golden_fastjson_map_with_object_keys() {
        assert_eq!(
            String::from_utf8(body().encode()).unwrap(),
            r#"{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T\"1"}:5,{"brokerName":"broker-a","queueId":1,"topic":"T\"1"}:-1}}"#
        );
        assert_eq!(
            String::from_utf8(ResetOffsetBody::default().encode()).unwrap(),
            r#"{"offsetTable":{}}"#
        );
    }

    #[test]
    fn golden_for_c_is_a_list() {
        let text = String::from_utf8(body().encode_for_c()).unwrap();
        assert_eq!(
            text,
            r#"{"offsetTable":[{"brokerName":"broker-a","offset":5,"queueId":0,"topic":"T\"1"},{"brokerName":"broker-a","offset":-1,"queueId":1,"topic":"T\"1"}]}"#
        );
        // The C++ form is plain JSON.
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["offsetTable"][0]["offset"], 5);
    }

    #[test]
    fn the_fastjson_map_reads_back() {
        let text = body().encode();
        assert_eq!(ResetOffsetBody::parse(&text).unwrap(), body());
        assert_eq!(
            ResetOffsetBody::parse(br#"{"offsetTable":{}}"#).unwrap(),
            ResetOffsetBody::default()
        );
    }

    #[test]
    fn a_lenient_body_reads_like_java_s() {
        // Numbers as strings, members in another order, an unknown member, and rocketmq-rust's
        // string keys holding the queue's JSON.
        let text = br#"{"extra":1,"offsetTable":{{"topic":"T\"1","queueId":"1","brokerName":"broker-a"}:"-1","{\"brokerName\":\"broker-a\",\"queueId\":0,\"topic\":\"T\\\"1\"}":5}}"#;
        assert_eq!(ResetOffsetBody::parse(text).unwrap(), body());
        assert!(ResetOffsetBody::parse(br#"{"offsetTable":{{"queueId":0}:"x"}}"#).is_err());
    }
}
