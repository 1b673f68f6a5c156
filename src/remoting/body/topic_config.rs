//! `TopicConfig`, its permission bits and the wrapper the broker registers with
//! (`common/TopicConfig.java`, `PermName.java`, `TopicConfigSerializeWrapper.java`).
//!
//! Field order follows fastjson's default (members sorted by name), so our JSON looks like the
//! Java broker's byte for byte where map order allows. Reading is lenient as fastjson is (see
//! [`super::json::lenient`]): every member has a default (fastjson leaves missing and null
//! members at Java's defaults), numbers may come as strings and the reverse, the filter type by
//! name or ordinal, and unknown members are ignored.

use super::json::{lenient, null_as_default, JavaEnum, LenientField};
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;

/// Queue permission bits (`PermName.java`).
pub mod perm {
    /// Priority queue flag.
    pub const PERM_PRIORITY: i32 = 8;
    /// Consumers may read.
    pub const PERM_READ: i32 = 4;
    /// Producers may write.
    pub const PERM_WRITE: i32 = 2;
    /// New topics may inherit this topic's config (the auto-create template `TBW102`).
    pub const PERM_INHERIT: i32 = 1;
}

/// `TopicConfig.defaultReadQueueNums` / `defaultWriteQueueNums`.
pub const TOPIC_QUEUE_NUMS_DEFAULT: i32 = 16;

/// `TopicFilterType`: written by name, read by name or ordinal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub enum TopicFilterType {
    #[default]
    #[serde(rename = "SINGLE_TAG")]
    SingleTag,
    #[serde(rename = "MULTI_TAG")]
    MultiTag,
}

/// Java `org.apache.rocketmq.common.TopicFilterType`, in ordinal order.
const TOPIC_FILTER_TYPE: JavaEnum = JavaEnum {
    name: "TopicFilterType",
    constants: &["SINGLE_TAG", "MULTI_TAG"],
};

impl<'de> Deserialize<'de> for TopicFilterType {
    /// A name or an ordinal; `null` is Java's default, SINGLE_TAG. A name Java does not have
    /// is an error: there is no variant to hold it.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match TOPIC_FILTER_TYPE.deserialize(deserializer)?.as_str() {
            "SINGLE_TAG" | "" => Ok(Self::SingleTag),
            "MULTI_TAG" => Ok(Self::MultiTag),
            other => Err(serde::de::Error::unknown_variant(
                other,
                TOPIC_FILTER_TYPE.constants,
            )),
        }
    }
}

/// `readQueueNums`/`writeQueueNums` leniently; `null` leaves Java's default, 16.
fn queue_nums<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i32, D::Error> {
    Ok(Option::<i32>::deserialize_lenient(deserializer)?.unwrap_or(TOPIC_QUEUE_NUMS_DEFAULT))
}

/// `perm` leniently; `null` leaves Java's default, READ|WRITE.
fn perm_or_default<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i32, D::Error> {
    Ok(Option::<i32>::deserialize_lenient(deserializer)?
        .unwrap_or(perm::PERM_READ | perm::PERM_WRITE))
}

/// A broker's topic configuration, as in `topics.json` and in `RegisterBrokerBody`
/// (`common/TopicConfig.java`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicConfig {
    #[serde(deserialize_with = "lenient")]
    pub attributes: BTreeMap<String, String>,
    #[serde(deserialize_with = "lenient")]
    pub order: bool,
    #[serde(deserialize_with = "perm_or_default")]
    pub perm: i32,
    #[serde(deserialize_with = "queue_nums")]
    pub read_queue_nums: i32,
    pub topic_filter_type: TopicFilterType,
    #[serde(deserialize_with = "lenient")]
    pub topic_name: String,
    #[serde(deserialize_with = "lenient")]
    pub topic_sys_flag: i32,
    #[serde(deserialize_with = "queue_nums")]
    pub write_queue_nums: i32,
}

impl Default for TopicConfig {
    /// Java's defaults: 16/16 queues, perm READ|WRITE, SINGLE_TAG.
    fn default() -> Self {
        Self {
            attributes: BTreeMap::new(),
            order: false,
            perm: perm::PERM_READ | perm::PERM_WRITE,
            read_queue_nums: TOPIC_QUEUE_NUMS_DEFAULT,
            topic_filter_type: TopicFilterType::SingleTag,
            topic_name: String::new(),
            topic_sys_flag: 0,
            write_queue_nums: TOPIC_QUEUE_NUMS_DEFAULT,
        }
    }
}

impl TopicConfig {
    /// A topic with the given queue counts and permission, other fields at Java's defaults.
    pub fn new(
        topic_name: impl Into<String>,
        read_queue_nums: i32,
        write_queue_nums: i32,
        perm: i32,
    ) -> Self {
        Self {
            topic_name: topic_name.into(),
            read_queue_nums,
            write_queue_nums,
            perm,
            ..Self::default()
        }
    }
}

/// `DataVersion`: the broker bumps it on every topic config change. Equality is Java's
/// (`stateVersion`, `timestamp` and `counter` all equal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DataVersion {
    #[serde(deserialize_with = "lenient")]
    pub counter: i64,
    #[serde(deserialize_with = "lenient")]
    pub state_version: i64,
    #[serde(deserialize_with = "lenient")]
    pub timestamp: i64,
}

/// `TopicConfigSerializeWrapper` as the name server needs it. The 5.x static-topic members
/// (`topicQueueMappingInfoMap`, `topicQueueMappingDetailMap`, `mappingDataVersion`) are
/// ignored on input: static topics are not supported.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicConfigSerializeWrapper {
    #[serde(deserialize_with = "null_as_default")]
    pub data_version: DataVersion,
    #[serde(deserialize_with = "null_as_default")]
    pub topic_config_table: BTreeMap<String, TopicConfig>,
}

#[cfg(test)]
mod tests {
    use super::super::json::parse_lenient;
    use super::*;

    #[test]
    fn topic_config_json_matches_java_shape() {
        let json = serde_json::to_value(TopicConfig::new("T", 4, 4, 6)).unwrap();
        let expected = serde_json::json!({
            "attributes": {}, "order": false, "perm": 6, "readQueueNums": 4,
            "topicFilterType": "SINGLE_TAG", "topicName": "T", "topicSysFlag": 0,
            "writeQueueNums": 4
        });
        assert_eq!(json, expected);
    }

    #[test]
    fn topic_config_reads_java_json_with_nulls_and_unknown_members() {
        let text = br#"{"topicName":"T","readQueueNums":8,"writeQueueNums":2,"perm":7,
            "topicFilterType":"MULTI_TAG","attributes":null,"order":true,"topicMessageType":"NORMAL"}"#;
        let tc: TopicConfig = parse_lenient(text, "TopicConfig").unwrap();
        assert_eq!(tc.topic_name, "T");
        assert_eq!(
            (tc.read_queue_nums, tc.write_queue_nums, tc.perm),
            (8, 2, 7)
        );
        assert_eq!(tc.topic_filter_type, TopicFilterType::MultiTag);
        assert!(tc.order && tc.attributes.is_empty() && tc.topic_sys_flag == 0);
    }

    #[test]
    fn topic_config_reads_numbers_as_strings_and_the_filter_type_by_ordinal() {
        let text = br#"{"attributes":{"+message.type":"NORMAL","n":3},"order":"true","perm":"6",
            "readQueueNums":"8","topicFilterType":1,"topicName":"T","topicSysFlag":null,
            "writeQueueNums":8.0}"#;
        let tc: TopicConfig = parse_lenient(text, "TopicConfig").unwrap();
        let mut expected = TopicConfig::new("T", 8, 8, 6);
        expected.order = true;
        expected.topic_filter_type = TopicFilterType::MultiTag;
        expected
            .attributes
            .insert("+message.type".into(), "NORMAL".into());
        expected.attributes.insert("n".into(), "3".into());
        assert_eq!(tc, expected);
        // null leaves Java's defaults, which for queue counts and perm are not zero.
        let text = br#"{"topicName":"T","perm":null,"readQueueNums":null,"writeQueueNums":null,
            "topicFilterType":null,"order":null}"#;
        let tc: TopicConfig = parse_lenient(text, "TopicConfig").unwrap();
        assert_eq!(tc, TopicConfig::new("T", 16, 16, 6));
    }

    #[test]
    fn unknown_filter_types_are_errors() {
        for text in [
            &br#"{"topicFilterType":2}"#[..],
            br#"{"topicFilterType":"WEIRD"}"#,
        ] {
            let err = parse_lenient::<TopicConfig>(text, "TopicConfig").unwrap_err();
            let text = err.to_string();
            assert!(
                text.contains("TopicFilterType") || text.contains("SINGLE_TAG"),
                "names what is expected: {err}"
            );
        }
        let tc: TopicConfig = parse_lenient(br#"{"topicFilterType":"0"}"#, "TopicConfig").unwrap();
        assert_eq!(tc.topic_filter_type, TopicFilterType::SingleTag);
    }

    #[test]
    fn data_version_reads_numbers_as_strings() {
        let dv: DataVersion = parse_lenient(
            br#"{"counter":"3","stateVersion":null,"timestamp":"1700000000000"}"#,
            "DataVersion",
        )
        .unwrap();
        assert_eq!(
            dv,
            DataVersion {
                counter: 3,
                state_version: 0,
                timestamp: 1_700_000_000_000
            }
        );
    }
}
