//! `TopicConfig`, its permission bits and the wrapper the broker registers with
//! (`common/TopicConfig.java`, `PermName.java`, `TopicConfigSerializeWrapper.java`).
//!
//! Field order follows fastjson's default (members sorted by name), so our JSON looks like the
//! Java broker's byte for byte where map order allows. Reading is lenient: every member has a
//! default (fastjson fills missing members with Java defaults) and unknown members are ignored.

use super::json::null_as_default;
use serde::{Deserialize, Serialize};
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

/// `TopicFilterType`: written by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum TopicFilterType {
    #[default]
    #[serde(rename = "SINGLE_TAG")]
    SingleTag,
    #[serde(rename = "MULTI_TAG")]
    MultiTag,
}

/// A broker's topic configuration, as in `topics.json` and in `RegisterBrokerBody`
/// (`common/TopicConfig.java`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicConfig {
    #[serde(deserialize_with = "null_as_default")]
    pub attributes: BTreeMap<String, String>,
    pub order: bool,
    pub perm: i32,
    pub read_queue_nums: i32,
    pub topic_filter_type: TopicFilterType,
    #[serde(deserialize_with = "null_as_default")]
    pub topic_name: String,
    pub topic_sys_flag: i32,
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
    pub counter: i64,
    pub state_version: i64,
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
}
