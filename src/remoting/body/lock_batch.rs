//! The LOCK_BATCH_MQ / UNLOCK_BATCH_MQ bodies (Java `LockBatchRequestBody`,
//! `LockBatchResponseBody`, `UnlockBatchRequestBody`, and the `MessageQueue` they carry).
//!
//! Orderly consumers send them on every rebalance: the request names the queues a client wants
//! to own, the response the subset it now owns on this broker.

use serde::{Deserialize, Serialize};

use super::json::{lenient, null_as_default, parse_lenient, JsonBodyError};

/// Java `MessageQueue`: one queue of one topic on one broker.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct MessageQueue {
    #[serde(deserialize_with = "lenient")]
    pub topic: String,
    #[serde(deserialize_with = "lenient")]
    pub broker_name: String,
    /// Java writes a number; the C++ client's JSON writer quotes it.
    #[serde(deserialize_with = "lenient")]
    pub queue_id: i32,
}

/// Java `LockBatchRequestBody`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct LockBatchRequestBody {
    #[serde(deserialize_with = "lenient")]
    pub consumer_group: String,
    #[serde(deserialize_with = "lenient")]
    pub client_id: String,
    /// Only meaningful in Java's strict lock mode (locking on replicas too); ringmq has no
    /// replicas, so every lock is "this broker only".
    #[serde(deserialize_with = "lenient")]
    pub only_this_broker: bool,
    #[serde(deserialize_with = "null_as_default")]
    pub mq_set: Vec<MessageQueue>,
}

/// Java `UnlockBatchRequestBody` (same fields as the lock request).
pub type UnlockBatchRequestBody = LockBatchRequestBody;

/// Java `LockBatchResponseBody`: the queues the client now holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct LockBatchResponseBody {
    #[serde(rename = "lockOKMQSet", default, deserialize_with = "null_as_default")]
    pub lock_ok_mq_set: Vec<MessageQueue>,
}

impl LockBatchRequestBody {
    /// Reads a lock or unlock request body leniently (unknown fields ignored).
    pub fn parse(bytes: &[u8]) -> Result<Self, JsonBodyError> {
        parse_lenient(bytes, "LockBatchRequestBody")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mq(topic: &str, broker: &str, queue_id: i32) -> MessageQueue {
        MessageQueue {
            topic: topic.into(),
            broker_name: broker.into(),
            queue_id,
        }
    }

    #[test]
    fn java_client_lock_body_parses() {
        // As fastjson writes it for DefaultMQPushConsumer's RebalanceImpl.lockAll.
        let json = r#"{"clientId":"10.0.0.5@4242#1234567890","consumerGroup":"cg_order","mqSet":[{"brokerName":"broker-a","queueId":0,"topic":"TopicOrder"},{"brokerName":"broker-a","queueId":3,"topic":"TopicOrder"}],"onlyThisBroker":false}"#;
        let body = LockBatchRequestBody::parse(json.as_bytes()).unwrap();
        assert_eq!(body.consumer_group, "cg_order");
        assert_eq!(body.client_id, "10.0.0.5@4242#1234567890");
        assert!(!body.only_this_broker);
        assert_eq!(
            body.mq_set,
            vec![
                mq("TopicOrder", "broker-a", 0),
                mq("TopicOrder", "broker-a", 3)
            ]
        );
    }

    #[test]
    fn cpp_client_body_with_string_queue_ids_parses() {
        let json = r#"{ "consumerGroup" : "cg", "clientId" : "c1", "onlyThisBroker" : 1, "mqSet" : [ { "topic" : "T", "brokerName" : "b", "queueId" : "7" } ], "extra": {"x": 1} }"#;
        let body = LockBatchRequestBody::parse(json.as_bytes()).unwrap();
        assert_eq!(body.mq_set, vec![mq("T", "b", 7)]);
        assert!(body.only_this_broker);
    }

    #[test]
    fn missing_and_null_fields_read_as_empty() {
        let body = LockBatchRequestBody::parse(br#"{"consumerGroup":null,"mqSet":null}"#).unwrap();
        assert_eq!(body, LockBatchRequestBody::default());
        assert!(LockBatchRequestBody::parse(br#"{"mqSet":[{"queueId":"x"}]}"#).is_err());
        assert!(LockBatchRequestBody::parse(b"not json").is_err());
    }

    #[test]
    fn response_body_has_the_java_field_name() {
        let body = LockBatchResponseBody {
            lock_ok_mq_set: vec![mq("T", "broker-a", 2)],
        };
        assert_eq!(
            serde_json::to_string(&body).unwrap(),
            r#"{"lockOKMQSet":[{"topic":"T","brokerName":"broker-a","queueId":2}]}"#
        );
    }
}
