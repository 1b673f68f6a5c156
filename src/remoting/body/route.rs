//! Route bodies the name server answers with (`QueueData`, `BrokerData`, `TopicRouteData`,
//! `ClusterInfo`, `TopicList`).
//!
//! Field order follows fastjson's default (members sorted by name), so our JSON looks like the
//! Java name server's byte for byte where map order allows. Reading is lenient as fastjson is:
//! every member has a default, scalars are read by [`super::json::lenient`] (numbers as strings
//! and the reverse, `null` as the default) and unknown members are ignored; fastjson's legacy
//! unquoted integer map keys are handled by [`super::json::parse_lenient`].

use super::json::{lenient, null_as_default};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
/// `QueueData`: one broker's queues of one topic.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct QueueData {
    #[serde(deserialize_with = "lenient")]
    pub broker_name: String,
    #[serde(deserialize_with = "lenient")]
    pub perm: i32,
    #[serde(deserialize_with = "lenient")]
    pub read_queue_nums: i32,
    /// ≤ 4.8 Java misspelled the key `topicSynFlag`; accept both.
    #[serde(alias = "topicSynFlag", deserialize_with = "lenient")]
    pub topic_sys_flag: i32,
    #[serde(deserialize_with = "lenient")]
    pub write_queue_nums: i32,
}

/// `BrokerData`: the addresses of one broker group (master id 0 plus slaves).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BrokerData {
    /// brokerId → "ip:port". serde_json writes the ids as quoted keys (standard JSON).
    #[serde(deserialize_with = "lenient")]
    pub broker_addrs: BTreeMap<i64, String>,
    #[serde(deserialize_with = "lenient")]
    pub broker_name: String,
    #[serde(deserialize_with = "lenient")]
    pub cluster: String,
    #[serde(deserialize_with = "lenient")]
    pub enable_acting_master: bool,
    #[serde(skip_serializing_if = "Option::is_none", deserialize_with = "lenient")]
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
    #[serde(deserialize_with = "lenient")]
    pub filter_server_table: BTreeMap<String, Vec<String>>,
    /// `"brokerName:num;brokerName:num"` for order topics (namesrv KV config; never set here).
    #[serde(skip_serializing_if = "Option::is_none", deserialize_with = "lenient")]
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
    #[serde(deserialize_with = "lenient")]
    pub cluster_addr_table: BTreeMap<String, BTreeSet<String>>,
}

/// `TopicList`: the GET_ALL_TOPIC_LIST_FROM_NAMESERVER body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicList {
    #[serde(skip_serializing_if = "Option::is_none", deserialize_with = "lenient")]
    pub broker_addr: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub topic_list: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::super::json::parse_lenient;
    use super::*;

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

    #[test]
    fn route_bodies_read_numbers_as_strings_and_nulls() {
        let text = br#"{"brokerDatas":[{"brokerAddrs":{0:"a:1"},"brokerName":"b","cluster":"c",
            "enableActingMaster":0,"zoneName":null}],"filterServerTable":null,"orderTopicConf":null,
            "queueDatas":[{"brokerName":"b","perm":"6","readQueueNums":"4","topicSysFlag":null,
            "writeQueueNums":4.0}],"topicQueueMappingByBroker":null}"#;
        let route: TopicRouteData = parse_lenient(text, "TopicRouteData").unwrap();
        assert_eq!(
            route.queue_datas,
            [QueueData {
                broker_name: "b".into(),
                perm: 6,
                read_queue_nums: 4,
                topic_sys_flag: 0,
                write_queue_nums: 4,
            }]
        );
        let bd = &route.broker_datas[0];
        assert_eq!(bd.broker_addrs[&0], "a:1");
        assert!(!bd.enable_acting_master && bd.zone_name.is_none());
        assert!(route.filter_server_table.is_empty() && route.order_topic_conf.is_none());
    }

    #[test]
    fn cluster_info_and_topic_list_read_leniently() {
        let info: ClusterInfo = parse_lenient(
            br#"{"brokerAddrTable":{"b":{"brokerAddrs":{"0":"a:1"},"brokerName":"b"}},
                "clusterAddrTable":{"c":["b"],"d":null}}"#,
            "ClusterInfo",
        )
        .unwrap();
        assert_eq!(info.cluster_addr_table["c"], BTreeSet::from(["b".into()]));
        assert!(info.cluster_addr_table["d"].is_empty());
        let list: TopicList =
            parse_lenient(br#"{"brokerAddr":null,"topicList":["T",7]}"#, "TopicList").unwrap();
        assert_eq!(list.topic_list, ["T", "7"]);
        assert!(list.broker_addr.is_none());
    }
}
