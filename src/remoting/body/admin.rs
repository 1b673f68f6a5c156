//! The bodies of the admin request codes (Java `remoting.protocol.admin` and `.body`):
//! `TopicStatsTable` (GET_TOPIC_STATS_INFO), `ConsumeStats` (GET_CONSUME_STATS),
//! `ConsumerConnection` / `ProducerConnection` and their `Connection`s and `KVTable`
//! (`ResetOffsetBody` is in [`super::reset_offset`]).
//!
//! The broker writes them as fastjson does: members sorted by name, enums by constant name,
//! and the `MessageQueue`-keyed maps with object keys ([`super::object_keys`]). They read back
//! leniently (numbers as strings, enums as ordinals, unknown members, string or object keys),
//! so the admin tool reads what any RocketMQ broker sends.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

use super::heartbeat::{SubscriptionData, CONSUME_FROM_WHERE, CONSUME_TYPE, MESSAGE_MODEL};
use super::json::{lenient, null_as_default, JavaEnum, JsonBodyError};
use super::lock_batch::MessageQueue;
use super::object_keys::{object_key_map, parse_with_object_keys, write_object_key_map};

/// Java `LanguageCode`, in ordinal order (fastjson writes the name; ordinals are accepted).
pub const LANGUAGE_CODE: JavaEnum = JavaEnum {
    name: "LanguageCode",
    constants: &[
        "JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO",
        "PHP", "OMS", "RUST", "NODE_JS",
    ],
};

fn language<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    LANGUAGE_CODE.deserialize(deserializer)
}

fn consume_type<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    CONSUME_TYPE.deserialize(deserializer)
}

fn message_model<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    MESSAGE_MODEL.deserialize(deserializer)
}

fn consume_from_where<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    CONSUME_FROM_WHERE.deserialize(deserializer)
}

/// Java `TopicOffset`: one queue of GET_TOPIC_STATS_INFO.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicOffset {
    #[serde(deserialize_with = "lenient")]
    pub last_update_timestamp: i64,
    #[serde(deserialize_with = "lenient")]
    pub max_offset: i64,
    #[serde(deserialize_with = "lenient")]
    pub min_offset: i64,
}

/// Java `TopicStatsTable`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicStatsTable {
    #[serde(deserialize_with = "object_key_map")]
    pub offset_table: BTreeMap<MessageQueue, TopicOffset>,
    #[serde(deserialize_with = "lenient_f64")]
    pub topic_put_tps: f64,
}

/// Java `OffsetWrapper`: one queue of GET_CONSUME_STATS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OffsetWrapper {
    #[serde(deserialize_with = "lenient")]
    pub broker_offset: i64,
    #[serde(deserialize_with = "lenient")]
    pub consumer_offset: i64,
    #[serde(deserialize_with = "lenient")]
    pub last_timestamp: i64,
    #[serde(deserialize_with = "lenient")]
    pub pull_offset: i64,
}

/// Java `ConsumeStats`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumeStats {
    #[serde(deserialize_with = "lenient_f64")]
    pub consume_tps: f64,
    #[serde(deserialize_with = "object_key_map")]
    pub offset_table: BTreeMap<MessageQueue, OffsetWrapper>,
}

/// A double as fastjson reads one: a number, a numeric string, or null (0).
fn lenient_f64<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Num {
        N(f64),
        S(String),
    }
    match Option::<Num>::deserialize(deserializer)? {
        None => Ok(0.0),
        Some(Num::N(n)) => Ok(n),
        Some(Num::S(s)) if s.trim().is_empty() => Ok(0.0),
        Some(Num::S(s)) => s
            .trim()
            .parse()
            .map_err(|_| serde::de::Error::custom(format!("not a number: {s:?}"))),
    }
}

/// Writes a double as Java does (`0.0`, `1.5`; never an integer form).
fn java_double(value: f64) -> String {
    if value.is_finite() {
        let text =
            serde_json::Number::from_f64(value).map_or_else(|| "0.0".into(), |n| n.to_string());
        if text.contains(['.', 'e', 'E']) {
            text
        } else {
            format!("{text}.0")
        }
    } else {
        "0.0".into()
    }
}

impl TopicStatsTable {
    /// The body as the Java broker writes it.
    pub fn encode(&self) -> Result<String, serde_json::Error> {
        let mut out = String::from("{\"offsetTable\":");
        write_object_key_map(&mut out, &self.offset_table)?;
        out.push_str(",\"topicPutTps\":");
        out.push_str(&java_double(self.topic_put_tps));
        out.push('}');
        Ok(out)
    }

    pub fn parse(bytes: &[u8]) -> Result<Self, JsonBodyError> {
        parse_with_object_keys(bytes, "TopicStatsTable")
    }
}

impl ConsumeStats {
    /// The body as the Java broker writes it.
    pub fn encode(&self) -> Result<String, serde_json::Error> {
        let mut out = String::from("{\"consumeTps\":");
        out.push_str(&java_double(self.consume_tps));
        out.push_str(",\"offsetTable\":");
        write_object_key_map(&mut out, &self.offset_table)?;
        out.push('}');
        Ok(out)
    }

    pub fn parse(bytes: &[u8]) -> Result<Self, JsonBodyError> {
        parse_with_object_keys(bytes, "ConsumeStats")
    }
}

/// Java `Connection`: one client connection of a group.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Connection {
    #[serde(deserialize_with = "lenient")]
    pub client_addr: String,
    #[serde(deserialize_with = "lenient")]
    pub client_id: String,
    #[serde(deserialize_with = "language")]
    pub language: String,
    #[serde(deserialize_with = "lenient")]
    pub version: i32,
}

/// Java `ConsumerConnection` (GET_CONSUMER_CONNECTION_LIST).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumerConnection {
    #[serde(deserialize_with = "null_as_default")]
    pub connection_set: Vec<Connection>,
    #[serde(deserialize_with = "consume_from_where")]
    pub consume_from_where: String,
    #[serde(deserialize_with = "consume_type")]
    pub consume_type: String,
    #[serde(deserialize_with = "message_model")]
    pub message_model: String,
    #[serde(deserialize_with = "null_as_default")]
    pub subscription_table: BTreeMap<String, SubscriptionData>,
}

/// Java `ProducerConnection` (GET_PRODUCER_CONNECTION_LIST).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProducerConnection {
    #[serde(deserialize_with = "null_as_default")]
    pub connection_set: Vec<Connection>,
}

/// Java `KVTable` (GET_KVLIST_BY_NAMESPACE, and the broker runtime info table).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct KvTable {
    #[serde(deserialize_with = "lenient")]
    pub table: BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::super::json::parse_lenient;
    use super::*;

    fn mq(topic: &str, queue_id: i32) -> MessageQueue {
        MessageQueue {
            topic: topic.into(),
            broker_name: "broker-a".into(),
            queue_id,
        }
    }

    #[test]
    fn topic_stats_table_is_written_as_java_writes_it() {
        let mut t = TopicStatsTable::default();
        t.offset_table.insert(
            mq("T", 0),
            TopicOffset {
                min_offset: 0,
                max_offset: 3,
                last_update_timestamp: 1_700_000_000_123,
            },
        );
        assert_eq!(
            t.encode().unwrap(),
            r#"{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"lastUpdateTimestamp":1700000000123,"maxOffset":3,"minOffset":0}},"topicPutTps":0.0}"#
        );
        assert_eq!(
            TopicStatsTable::parse(t.encode().unwrap().as_bytes()).unwrap(),
            t
        );
    }

    #[test]
    fn consume_stats_from_java_and_from_rocketmq_rust_read_alike() {
        // fastjson's object keys, sorted members.
        let java = br#"{"consumeTps":1.5,"offsetTable":{{"brokerName":"broker-a","queueId":1,"topic":"T"}:{"brokerOffset":120,"consumerOffset":20,"lastTimestamp":1700000000000,"pullOffset":80}}}"#;
        // rocketmq-rust's any_key_map string keys, numbers as strings, an unknown member.
        let rust = br#"{"offsetTable":{"{\"topic\":\"T\",\"brokerName\":\"broker-a\",\"queueId\":1}":{"brokerOffset":"120","consumerOffset":20,"pullOffset":80,"lastTimestamp":1700000000000,"inflight":1}},"consumeTps":"1.5"}"#;
        let a = ConsumeStats::parse(java).unwrap();
        let b = ConsumeStats::parse(rust).unwrap();
        assert_eq!(a, b);
        let w = a.offset_table[&mq("T", 1)];
        assert_eq!(
            (w.broker_offset, w.consumer_offset, w.pull_offset),
            (120, 20, 80)
        );
        assert_eq!(a.encode().unwrap().as_bytes(), java);
    }

    #[test]
    fn consumer_connection_is_java_shaped_and_reads_ordinals() {
        let c = ConsumerConnection {
            connection_set: vec![Connection {
                client_addr: "127.0.0.1:5000".into(),
                client_id: "127.0.0.1@1".into(),
                language: "JAVA".into(),
                version: 479,
            }],
            consume_from_where: "CONSUME_FROM_LAST_OFFSET".into(),
            consume_type: "CONSUME_PASSIVELY".into(),
            message_model: "CLUSTERING".into(),
            subscription_table: BTreeMap::new(),
        };
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            r#"{"connectionSet":[{"clientAddr":"127.0.0.1:5000","clientId":"127.0.0.1@1","language":"JAVA","version":479}],"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","subscriptionTable":{}}"#
        );
        // A C++ core's shape: enums as ordinals, version as a string, nulls.
        let cpp = br#"{"connectionSet":[{"clientAddr":"127.0.0.1:5000","clientId":"127.0.0.1@1","language":0,"version":"479"}],"consumeFromWhere":0,"consumeType":1,"messageModel":1,"subscriptionTable":null,"extra":true}"#;
        let parsed: ConsumerConnection = parse_lenient(cpp, "ConsumerConnection").unwrap();
        assert_eq!(parsed, c);
    }

    #[test]
    fn kv_table_reads_numbers_as_strings() {
        let t: KvTable = parse_lenient(br#"{"table":{"a":"1","b":2}}"#, "KVTable").unwrap();
        assert_eq!(t.table["b"], "2");
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            r#"{"table":{"a":"1","b":"2"}}"#
        );
    }
}
