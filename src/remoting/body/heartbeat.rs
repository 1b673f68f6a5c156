//! The HEART_BEAT body (Java `HeartbeatData`, `ConsumerData`, `ProducerData`,
//! `SubscriptionData`).
//!
//! Read as fastjson reads it (see [`super::json`]): Java clients write enums by name and keys
//! sorted; the C++ cores write enums as ordinals, the 1.x core writes `subVersion` as a string,
//! and lists may be `null` or missing. Enum members are normalised to the Java constant names,
//! which is what the rest of the broker compares against.

use std::collections::BTreeSet;

use serde::{Deserialize, Deserializer, Serialize};

use super::json::{lenient, null_as_default, JavaEnum};

/// Java `ConsumeType` (package `common.protocol.heartbeat` in 4.x, `remoting.protocol.heartbeat`
/// in 5.x), in ordinal order; `CONSUME_POP` is 5.x.
pub const CONSUME_TYPE: JavaEnum = JavaEnum {
    name: "ConsumeType",
    constants: &["CONSUME_ACTIVELY", "CONSUME_PASSIVELY", "CONSUME_POP"],
};

/// Java `MessageModel` (beside `ConsumeType`), in ordinal order.
pub const MESSAGE_MODEL: JavaEnum = JavaEnum {
    name: "MessageModel",
    constants: &["BROADCASTING", "CLUSTERING"],
};

/// Java `org.apache.rocketmq.common.consumer.ConsumeFromWhere`, in ordinal order. The three
/// deprecated constants (1 to 3) still hold their places, and the C++ cores still send them.
pub const CONSUME_FROM_WHERE: JavaEnum = JavaEnum {
    name: "ConsumeFromWhere",
    constants: &[
        "CONSUME_FROM_LAST_OFFSET",
        "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
        "CONSUME_FROM_MIN_OFFSET",
        "CONSUME_FROM_MAX_OFFSET",
        "CONSUME_FROM_FIRST_OFFSET",
        "CONSUME_FROM_TIMESTAMP",
    ],
};

fn consume_type<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    CONSUME_TYPE.deserialize(deserializer)
}

fn message_model<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    MESSAGE_MODEL.deserialize(deserializer)
}

fn consume_from_where<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    CONSUME_FROM_WHERE.deserialize(deserializer)
}

/// Java `CheckClientRequestBody` (CHECK_CLIENT_CONFIG); its `clientId` and `namespace` are not
/// needed by the broker.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CheckClientRequestBody {
    #[serde(deserialize_with = "lenient")]
    pub group: String,
    pub subscription_data: Option<SubscriptionData>,
}

/// Java `SubscriptionData` as carried in heartbeats.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct SubscriptionData {
    #[serde(deserialize_with = "lenient")]
    pub class_filter_mode: bool,
    #[serde(deserialize_with = "lenient")]
    pub topic: String,
    #[serde(deserialize_with = "lenient")]
    pub sub_string: String,
    #[serde(deserialize_with = "lenient")]
    pub tags_set: BTreeSet<String>,
    #[serde(deserialize_with = "lenient")]
    pub code_set: BTreeSet<i32>,
    #[serde(deserialize_with = "lenient")]
    pub sub_version: i64,
    #[serde(deserialize_with = "lenient")]
    pub expression_type: Option<String>,
}

impl SubscriptionData {
    /// `TAG` unless the subscription says otherwise (null/empty mean TAG, as in Java).
    pub fn expression_type(&self) -> &str {
        match self.expression_type.as_deref() {
            None | Some("") => "TAG",
            Some(t) => t,
        }
    }
}

/// Java `ConsumerData`. The three enum members hold Java's constant names, whichever form
/// the client wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumerData {
    #[serde(deserialize_with = "lenient")]
    pub group_name: String,
    #[serde(deserialize_with = "consume_type")]
    pub consume_type: String,
    #[serde(deserialize_with = "message_model")]
    pub message_model: String,
    #[serde(deserialize_with = "consume_from_where")]
    pub consume_from_where: String,
    #[serde(deserialize_with = "null_as_default")]
    pub subscription_data_set: Vec<SubscriptionData>,
    #[serde(deserialize_with = "lenient")]
    pub unit_mode: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct ProducerData {
    #[serde(deserialize_with = "lenient")]
    pub group_name: String,
}

/// Java `HeartbeatData`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct HeartbeatData {
    #[serde(rename = "clientID", deserialize_with = "lenient")]
    pub client_id: String,
    #[serde(deserialize_with = "null_as_default")]
    pub producer_data_set: Vec<ProducerData>,
    #[serde(deserialize_with = "null_as_default")]
    pub consumer_data_set: Vec<ConsumerData>,
}

#[cfg(test)]
mod tests {
    use super::super::json::parse_lenient;
    use super::*;

    fn parse(json: &str) -> HeartbeatData {
        parse_lenient(json.as_bytes(), "HeartbeatData").unwrap_or_else(|e| panic!("{json}: {e}"))
    }

    #[test]
    fn check_client_request_body_from_java_and_without_subscription() {
        let java = br#"{"clientId":"127.0.0.1@1","group":"g","namespace":"","subscriptionData":{"classFilterMode":false,"codeSet":[],"expressionType":"SQL92","subString":"a > 1","subVersion":1700000000000,"tagsSet":[],"topic":"T"}}"#;
        let body: CheckClientRequestBody = parse_lenient(java, "CheckClientRequestBody").unwrap();
        assert_eq!(body.group, "g");
        let sub = body.subscription_data.unwrap();
        assert_eq!(
            (sub.topic.as_str(), sub.sub_string.as_str()),
            ("T", "a > 1")
        );
        assert_eq!(sub.expression_type(), "SQL92");
        let bare: CheckClientRequestBody = parse_lenient(
            br#"{"group":7,"subscriptionData":null}"#,
            "CheckClientRequestBody",
        )
        .unwrap();
        assert_eq!((bare.group.as_str(), bare.subscription_data), ("7", None));
    }

    #[test]
    fn heartbeat_json_from_a_java_client_parses() {
        let json = r#"{"clientID":"10.0.0.5@12345#987654321","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"cg","messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,"codeSet":[97],"expressionType":"TAG","subString":"a","subVersion":1700000000000,"tagsSet":["a"],"topic":"T"}],"unitMode":false}],"heartbeatFingerprint":0,"producerDataSet":[{"groupName":"pg"}],"withoutSub":false}"#;
        let hb: HeartbeatData = serde_json::from_str(json).unwrap();
        assert_eq!(hb.client_id, "10.0.0.5@12345#987654321");
        let sub = &hb.consumer_data_set[0].subscription_data_set[0];
        assert_eq!(sub.code_set, BTreeSet::from([97]));
        assert_eq!(sub.expression_type(), "TAG");
        assert_eq!(hb.producer_data_set[0].group_name, "pg");
        assert_eq!(hb, parse(json));
    }

    /// What a C++ core means by the body below, in Java's names.
    fn cpp_expected() -> HeartbeatData {
        HeartbeatData {
            client_id: "127.0.0.1@1234".into(),
            producer_data_set: vec![ProducerData {
                group_name: "CLIENT_INNER_PRODUCER".into(),
            }],
            consumer_data_set: vec![ConsumerData {
                group_name: "g".into(),
                consume_type: "CONSUME_PASSIVELY".into(),
                message_model: "CLUSTERING".into(),
                consume_from_where: "CONSUME_FROM_LAST_OFFSET".into(),
                subscription_data_set: vec![SubscriptionData {
                    topic: "T".into(),
                    sub_string: "*".into(),
                    sub_version: 1_700_000_000_000,
                    expression_type: Some("TAG".into()),
                    ..SubscriptionData::default()
                }],
                unit_mode: false,
            }],
        }
    }

    #[test]
    fn heartbeat_from_a_cpp_core_reads_enum_ordinals() {
        let json = r#"{"clientID":"127.0.0.1@1234","consumerDataSet":[{"consumeFromWhere":0,"consumeType":1,"groupName":"g","messageModel":1,"subscriptionDataSet":[{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":1700000000000,"tagsSet":[],"topic":"T"}],"unitMode":false}],"producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"}]}"#;
        assert_eq!(parse(json), cpp_expected());
        // The same body from a Java client (names) reads the same.
        let java = json
            .replace(
                r#""consumeFromWhere":0"#,
                r#""consumeFromWhere":"CONSUME_FROM_LAST_OFFSET""#,
            )
            .replace(r#""consumeType":1"#, r#""consumeType":"CONSUME_PASSIVELY""#)
            .replace(r#""messageModel":1"#, r#""messageModel":"CLUSTERING""#);
        assert_eq!(parse(&java), cpp_expected());
    }

    #[test]
    fn heartbeat_with_numbers_as_strings_nulls_and_unknown_members() {
        let json = r#"{"clientID":"127.0.0.1@1234","consumerDataSet":[{"consumeFromWhere":"0","consumeType":"1","groupName":"g","messageModel":"1","subscriptionDataSet":[{"classFilterMode":0,"codeSet":null,"expressionType":"TAG","filterClassSource":null,"subString":"*","subVersion":"1700000000000","tagsSet":null,"topic":"T"}],"unitMode":"false","unknown":{"a":[1]}}],"heartbeatFingerprint":"7","producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER","extra":1}],"withoutSub":0}"#;
        assert_eq!(parse(json), cpp_expected());
        // A producer-only C++ heartbeat: no consumer list at all, or null.
        for json in [
            r#"{"clientID":"c","producerDataSet":[{"groupName":"p"}]}"#,
            r#"{"clientID":"c","consumerDataSet":null,"producerDataSet":[{"groupName":"p"}]}"#,
        ] {
            let hb = parse(json);
            assert!(hb.consumer_data_set.is_empty());
            assert_eq!(hb.producer_data_set[0].group_name, "p");
        }
    }

    #[test]
    fn codes_and_tags_read_as_numbers_or_strings() {
        let json = r#"{"consumerDataSet":[{"subscriptionDataSet":[{"codeSet":["97",98],"tagsSet":["a",7],"classFilterMode":1,"subString":"a || b || 7"}]}]}"#;
        let sub = &parse(json).consumer_data_set[0].subscription_data_set[0];
        assert_eq!(sub.code_set, BTreeSet::from([97, 98]));
        assert_eq!(sub.tags_set, BTreeSet::from(["a".into(), "7".into()]));
        assert!(sub.class_filter_mode);
        assert_eq!(sub.expression_type(), "TAG");
    }

    #[test]
    fn every_enum_ordinal_reads_as_its_java_name() {
        for (table, member) in [
            (CONSUME_TYPE, "consumeType"),
            (MESSAGE_MODEL, "messageModel"),
            (CONSUME_FROM_WHERE, "consumeFromWhere"),
        ] {
            for (ordinal, name) in table.constants.iter().enumerate() {
                let consumer = |value: String| {
                    let json = format!(r#"{{"consumerDataSet":[{{"{member}":{value}}}]}}"#);
                    let c = parse(&json).consumer_data_set.remove(0);
                    [c.consume_type, c.message_model, c.consume_from_where]
                };
                let by_ordinal = consumer(ordinal.to_string());
                assert!(
                    by_ordinal.contains(&(*name).to_owned()),
                    "{member} {ordinal}"
                );
                assert_eq!(by_ordinal, consumer(format!(r#""{name}""#)));
            }
        }
        // The deprecated ConsumeFromWhere constants keep their ordinals.
        let c = &parse(r#"{"consumerDataSet":[{"consumeFromWhere":3}]}"#).consumer_data_set[0];
        assert_eq!(c.consume_from_where, "CONSUME_FROM_MAX_OFFSET");
        let c = &parse(r#"{"consumerDataSet":[{"consumeFromWhere":5}]}"#).consumer_data_set[0];
        assert_eq!(c.consume_from_where, "CONSUME_FROM_TIMESTAMP");
        // A broadcasting C++ consumer is seen as broadcasting.
        let c = &parse(r#"{"consumerDataSet":[{"messageModel":0}]}"#).consumer_data_set[0];
        assert_eq!(c.message_model, "BROADCASTING");
    }

    #[test]
    fn unknown_ordinals_are_errors_naming_the_enum() {
        for (json, java_enum) in [
            (
                r#"{"consumerDataSet":[{"messageModel":2}]}"#,
                "MessageModel",
            ),
            (
                r#"{"consumerDataSet":[{"consumeFromWhere":6}]}"#,
                "ConsumeFromWhere",
            ),
            (
                r#"{"consumerDataSet":[{"consumeType":"-1"}]}"#,
                "ConsumeType",
            ),
        ] {
            let err = parse_lenient::<HeartbeatData>(json.as_bytes(), "HeartbeatData").unwrap_err();
            assert!(err.to_string().contains(java_enum), "{json}: {err}");
        }
        // The remark quoted in docs/PROTOCOL.md.
        let json = br#"{"consumerDataSet":[{"consumeFromWhere":7}]}"#;
        let err = parse_lenient::<HeartbeatData>(json, "HeartbeatData").unwrap_err();
        assert!(
            err.source.to_string().starts_with(
                "invalid value: integer `7`, expected a ConsumeFromWhere name or an ordinal below 6 at line 1"
            ),
            "{err}"
        );
    }
}
