//! Serde mirrors of the Java bodies the name server reads and writes.
//!
//! Field order follows fastjson's default (members sorted by name), so our JSON looks like the
//! Java broker's byte for byte where map order allows. Reading is lenient: every member has a
//! default (fastjson fills missing members with Java defaults) and unknown members are ignored;
//! fastjson's legacy unquoted integer map keys are handled by [`super::json::parse_lenient`].

use super::json::null_as_default;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

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

/// `RegisterBrokerBody` (uncompressed JSON form) as read by the name server.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RegisterBrokerBody {
    #[serde(deserialize_with = "null_as_default")]
    pub filter_server_list: Vec<String>,
    #[serde(deserialize_with = "null_as_default")]
    pub topic_config_serialize_wrapper: TopicConfigSerializeWrapper,
}

/// `QueueData`: one broker's queues of one topic.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct QueueData {
    #[serde(deserialize_with = "null_as_default")]
    pub broker_name: String,
    pub perm: i32,
    pub read_queue_nums: i32,
    /// ≤ 4.8 Java misspelled the key `topicSynFlag`; accept both.
    #[serde(alias = "topicSynFlag")]
    pub topic_sys_flag: i32,
    pub write_queue_nums: i32,
}

/// `BrokerData`: the addresses of one broker group (master id 0 plus slaves).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BrokerData {
    /// brokerId → "ip:port". serde_json writes the ids as quoted keys (standard JSON).
    #[serde(deserialize_with = "null_as_default")]
    pub broker_addrs: BTreeMap<i64, String>,
    #[serde(deserialize_with = "null_as_default")]
    pub broker_name: String,
    #[serde(deserialize_with = "null_as_default")]
    pub cluster: String,
    pub enable_acting_master: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone_name: Option<String>,
}

/// `TopicRouteData`: the GET_ROUTEINFO_BY_TOPIC body, and the REGISTER_TOPIC_IN_NAMESRV body.
///
/// rocketmq-client-rust has no serde defaults for `queueDatas`, `brokerDatas`,
/// `filterServerTable`, so they are always written. `topicQueueMappingByBroker` (5.x static
/// topics) is never written.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicRouteData {
    #[serde(deserialize_with = "null_as_default")]
    pub broker_datas: Vec<BrokerData>,
    /// brokerAddr → filter server addresses; usually `{}`.
    #[serde(deserialize_with = "null_as_default")]
    pub filter_server_table: BTreeMap<String, Vec<String>>,
    /// `"brokerName:num;brokerName:num"` for order topics (namesrv KV config; never set here).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub order_topic_conf: Option<String>,
    #[serde(deserialize_with = "null_as_default")]
    pub queue_datas: Vec<QueueData>,
}

/// `ClusterInfo`: the GET_BROKER_CLUSTER_INFO body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClusterInfo {
    /// brokerName → BrokerData.
    #[serde(deserialize_with = "null_as_default")]
    pub broker_addr_table: BTreeMap<String, BrokerData>,
    /// clusterName → brokerNames.
    #[serde(deserialize_with = "null_as_default")]
    pub cluster_addr_table: BTreeMap<String, BTreeSet<String>>,
}

/// `TopicList`: the GET_ALL_TOPIC_LIST_FROM_NAMESERVER body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicList {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broker_addr: Option<String>,
    #[serde(deserialize_with = "null_as_default")]
    pub topic_list: Vec<String>,
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
    fn broker_data_reads_legacy_keys_and_omits_null_zone() {
        let legacy = br#"{"brokerAddrs":{0:"a:1",1:"b:2"},"brokerName":"b","cluster":"c",
            "enableActingMaster":false}"#;
        let bd: BrokerData = parse_lenient(legacy, "BrokerData").unwrap();
        assert_eq!(bd.broker_addrs[&1], "b:2");
        let out = serde_json::to_string(&bd).unwrap();
        assert_eq!(
            out,
            r#"{"brokerAddrs":{"0":"a:1","1":"b:2"},"brokerName":"b","cluster":"c","enableActingMaster":false}"#
        );
    }

    #[test]
    fn queue_data_accepts_old_misspelled_sys_flag() {
        let qd: QueueData =
            parse_lenient(br#"{"brokerName":"b","topicSynFlag":3}"#, "QueueData").unwrap();
        assert_eq!(qd.topic_sys_flag, 3);
    }
}
