//! Names and small rules of transactional messages (Java `TransactionalMessageUtil`,
//! `MessageConst`, `TopicValidator`, `MixAll.CID_SYS_RMQ_TRANS`), and the editing of a
//! message's properties the transaction flow needs.

use crate::store::format::{self, property_value};

/// Half (prepared) messages wait here, queue 0, until their producer ends them.
pub const HALF_TOPIC: &str = "RMQ_SYS_TRANS_HALF_TOPIC";
/// One op message per ended half message (its queue is the half message's queue).
pub const OP_HALF_TOPIC: &str = "RMQ_SYS_TRANS_OP_HALF_TOPIC";
/// Half messages checked back `transactionCheckMax` times without an answer.
pub const CHECK_MAX_TIME_TOPIC: &str = "TRANS_CHECK_MAX_TIME_TOPIC";
/// The consumer group whose offsets on the half and op queues record the check-back scan's
/// progress.
pub const CONSUMER_GROUP: &str = "CID_SYS_RMQ_TRANS";
/// Tag of an op message that removes half messages.
pub const REMOVE_TAG: &str = "d";
/// Separates half offsets in an op message body (Java 5 batches them, "12,13,").
pub const OFFSET_SEPARATOR: char = ',';
/// Queues of TRANS_CHECK_MAX_TIME_TOPIC (Java `TCMT_QUEUE_NUMS`).
pub const CHECK_MAX_TIME_TOPIC_QUEUE_NUMS: i32 = 1;
/// The one half queue (every half message is stored in queue 0).
pub const HALF_QUEUE_ID: i32 = 0;

/// Message property names of the transaction flow (Java `MessageConst`).
pub mod property {
    /// "true" on a message sent as a half message.
    pub const TRANSACTION_PREPARED: &str = "TRAN_MSG";
    pub const REAL_TOPIC: &str = "REAL_TOPIC";
    pub const REAL_QUEUE_ID: &str = "REAL_QID";
    pub const TRANSACTION_CHECK_TIMES: &str = "TRANSACTION_CHECK_TIMES";
    pub const CHECK_IMMUNITY_TIME_IN_SECONDS: &str = "CHECK_IMMUNITY_TIME_IN_SECONDS";
    /// The half queue offset of the first copy of a half message with an immunity time.
    pub const TRANSACTION_PREPARED_QUEUE_OFFSET: &str = "TRAN_PREPARED_QUEUE_OFFSET";
    pub const PRODUCER_GROUP: &str = "PGROUP";
    pub const UNIQ_KEY: &str = "UNIQ_KEY";
    pub const TAGS: &str = "TAGS";
    pub const DELAY: &str = "DELAY";
    /// Java `TransactionalMessageUtil.TRANSACTION_ID`.
    pub const TRANSACTION_ID: &str = "__transactionId__";
}

/// A message's properties as ordered pairs, edited the way Java edits its property map (a put
/// replaces, a clear removes) and encoded back with Java's separators.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Properties {
    pairs: Vec<(String, String)>,
}

impl Properties {
    /// Parses `\x01`/`\x02`-separated properties (the last of repeated names wins, as in
    /// Java's map).
    pub fn parse(encoded: &[u8]) -> Self {
        let mut props = Properties::default();
        for (name, value) in format::properties_iter(encoded) {
            props.put(
                &String::from_utf8_lossy(name),
                &String::from_utf8_lossy(value),
            );
        }
        props
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn put(&mut self, name: &str, value: &str) {
        match self.pairs.iter_mut().find(|(k, _)| k == name) {
            Some(pair) => pair.1 = value.to_string(),
            None => self.pairs.push((name.to_string(), value.to_string())),
        }
    }

    pub fn remove(&mut self, name: &str) {
        self.pairs.retain(|(k, _)| k != name);
    }

    pub fn encode(&self) -> String {
        format::encode_properties(self.pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    }
}

/// Whether a send carries a half message: TRAN_MSG is "true" (Java `Boolean.parseBoolean`),
/// except for a retry of a client older than 4.6.1, which kept the property on its retries
/// (reconsume times and a delay level both set).
pub fn is_prepared_send(properties: &[u8], reconsume_times: i32) -> bool {
    let prepared = property_value(properties, property::TRANSACTION_PREPARED.as_bytes())
        .is_some_and(|v| v.eq_ignore_ascii_case(b"true"));
    let delayed = property_value(properties, property::DELAY.as_bytes())
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| v.trim().parse::<i32>().ok())
        .is_some_and(|level| level > 0);
    prepared && !(reconsume_times > 0 && delayed)
}

/// Java `TransactionalMessageUtil.getImmunityTime`: the check immunity in ms of a half message
/// whose CHECK_IMMUNITY_TIME_IN_SECONDS is `seconds`, never less than `transaction_timeout_ms`.
pub fn immunity_time_ms(seconds: &str, transaction_timeout_ms: i64) -> i64 {
    let ms = seconds
        .trim()
        .parse::<i64>()
        .map_or(0, |s| s.saturating_mul(1000));
    ms.max(transaction_timeout_ms)
}

/// The body of an op message removing the half message at `half_queue_offset`.
pub fn op_body(half_queue_offset: i64) -> String {
    format!("{half_queue_offset}{OFFSET_SEPARATOR}")
}

/// The half queue offsets an op message body names (Java parses each with `Long.parseLong`
/// and logs the bad ones; those are skipped here too).
pub fn parse_op_body(body: &[u8]) -> Vec<i64> {
    String::from_utf8_lossy(body)
        .split(OFFSET_SEPARATOR)
        .filter_map(|s| s.trim().parse::<i64>().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_put_replaces_and_remove_clears() {
        let encoded = format::encode_properties([("A", "1"), ("B", "2"), ("A", "3")]);
        let mut p = Properties::parse(encoded.as_bytes());
        assert_eq!(p.get("A"), Some("3"));
        p.put("B", "x");
        p.put("C", "y");
        p.remove("A");
        assert_eq!(p.encode(), "B\u{1}x\u{2}C\u{1}y\u{2}");
    }

    #[test]
    fn a_prepared_send_is_tran_msg_true_except_an_old_clients_delayed_retry() {
        let props = |pairs: &[(&str, &str)]| format::encode_properties(pairs.iter().copied());
        assert!(is_prepared_send(
            props(&[("TRAN_MSG", "true")]).as_bytes(),
            0
        ));
        assert!(is_prepared_send(
            props(&[("TRAN_MSG", "TRUE")]).as_bytes(),
            0
        ));
        assert!(!is_prepared_send(
            props(&[("TRAN_MSG", "false")]).as_bytes(),
            0
        ));
        assert!(!is_prepared_send(props(&[("KEYS", "k")]).as_bytes(), 0));
        let retry = props(&[("TRAN_MSG", "true"), ("DELAY", "3")]);
        assert!(!is_prepared_send(retry.as_bytes(), 1));
        assert!(is_prepared_send(retry.as_bytes(), 0));
    }

    #[test]
    fn immunity_is_never_shorter_than_the_transaction_timeout() {
        assert_eq!(immunity_time_ms("10", 6_000), 10_000);
        assert_eq!(immunity_time_ms("2", 6_000), 6_000);
        assert_eq!(immunity_time_ms("x", 6_000), 6_000);
    }

    #[test]
    fn op_bodies_name_half_offsets_as_java_writes_them() {
        assert_eq!(op_body(12), "12,");
        assert_eq!(parse_op_body(b"12,"), [12]);
        assert_eq!(parse_op_body(b"12"), [12]);
        assert_eq!(parse_op_body(b"3,4,x,5,"), [3, 4, 5]);
    }
}
