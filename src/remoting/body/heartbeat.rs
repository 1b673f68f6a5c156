//! The HEART_BEAT body (Java `HeartbeatData`, `ConsumerData`, `ProducerData`,
//! `SubscriptionData`).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// Java `SubscriptionData` as carried in heartbeats.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct SubscriptionData {
    pub class_filter_mode: bool,
    pub topic: String,
    pub sub_string: String,
    pub tags_set: BTreeSet<String>,
    pub code_set: BTreeSet<i32>,
    pub sub_version: i64,
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

/// Java `ConsumerData`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumerData {
    pub group_name: String,
    pub consume_type: String,
    pub message_model: String,
    pub consume_from_where: String,
    pub subscription_data_set: Vec<SubscriptionData>,
    pub unit_mode: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct ProducerData {
    pub group_name: String,
}

/// Java `HeartbeatData`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct HeartbeatData {
    #[serde(rename = "clientID")]
    pub client_id: String,
    pub producer_data_set: Vec<ProducerData>,
    pub consumer_data_set: Vec<ConsumerData>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeat_json_from_a_java_client_parses() {
        let json = r#"{"clientID":"10.0.0.5@12345#987654321","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"cg","messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,"codeSet":[97],"expressionType":"TAG","subString":"a","subVersion":1700000000000,"tagsSet":["a"],"topic":"T"}],"unitMode":false}],"heartbeatFingerprint":0,"producerDataSet":[{"groupName":"pg"}],"withoutSub":false}"#;
        let hb: HeartbeatData = serde_json::from_str(json).unwrap();
        assert_eq!(hb.client_id, "10.0.0.5@12345#987654321");
        let sub = &hb.consumer_data_set[0].subscription_data_set[0];
        assert_eq!(sub.code_set, BTreeSet::from([97]));
        assert_eq!(sub.expression_type(), "TAG");
        assert_eq!(hb.producer_data_set[0].group_name, "pg");
    }
}
