//! Which topic and group permissions a request needs (Java `PlainAccessResource.parse`, the
//! remoting half, as of RocketMQ 5.3). A group is checked as its retry topic `%RETRY%group`.
//!
//! | request | needs |
//! | --- | --- |
//! | SEND_MESSAGE (`topic`), SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE (`b`) | PUB on the topic; SUB when it is a retry topic |
//! | CONSUMER_SEND_MSG_BACK | SUB on the `group` |
//! | PULL_MESSAGE | SUB on the `topic` and the `consumerGroup` |
//! | QUERY_MESSAGE | SUB on the `topic` |
//! | HEART_BEAT | SUB on every consumer group and every topic it subscribes |
//! | UNREGISTER_CLIENT | SUB on the `consumerGroup`, if any |
//! | GET_CONSUMER_LIST_BY_GROUP | SUB on the `consumerGroup` |
//! | UPDATE_CONSUMER_OFFSET | SUB on the `consumerGroup` and the `topic` |
//!
//! Every other code needs only a valid signature, and the admin codes an admin account
//! ([`super::permission::ADMIN_CODES`]).

use std::collections::BTreeMap;

use super::error::AclError;
use super::permission::{PUB, SUB};
use crate::common::topic_validator::RETRY_GROUP_TOPIC_PREFIX;
use crate::remoting::body::heartbeat::HeartbeatData;
use crate::remoting::body::json::parse_lenient;
use crate::remoting::codes::request_code as code;
use crate::remoting::command::RemotingCommand;

/// `%RETRY%group`, the name a group's permission is kept under.
pub fn retry_topic(group: &str) -> String {
    format!("{RETRY_GROUP_TOPIC_PREFIX}{group}")
}

/// `PlainAccessResource.printStr`: `group:G` for a retry topic, else `topic:T`.
pub fn print_resource(resource: &str) -> String {
    match resource.strip_prefix(RETRY_GROUP_TOPIC_PREFIX) {
        // `KeyBuilder.parseGroup`: a POP retry topic v2 is `%RETRY%group+topic`.
        Some(rest) => {
            let group = match rest.split_once('+') {
                Some((group, topic)) if !topic.contains('+') => group,
                _ => rest,
            };
            format!("group:{group}")
        }
        None => format!("topic:{resource}"),
    }
}

/// Java decodes these headers with `decodeCommandCustomHeader`, which refuses a missing
/// `@CFNotNull` field with this text.
fn required<'a>(request: &'a RemotingCommand, field: &str) -> Result<&'a str, AclError> {
    request
        .ext_opt_str(field)
        .ok_or_else(|| AclError::BadRequest(format!("the custom field <{field}> is null")))
}

/// The permissions `request` needs, resource name → PUB/SUB bits (later entries replace
/// earlier ones, as Java's `HashMap.put`).
pub fn needed_permissions(request: &RemotingCommand) -> Result<BTreeMap<String, u8>, AclError> {
    let mut needed = BTreeMap::new();
    let mut add = |resource: Option<String>, perm: u8| {
        if let Some(resource) = resource {
            needed.insert(resource, perm);
        }
    };
    let ext = |field: &str| request.ext_opt_str(field).map(str::to_owned);
    let send_perm = |topic: &Option<String>| match topic {
        Some(t) if t.starts_with(RETRY_GROUP_TOPIC_PREFIX) => SUB,
        _ => PUB,
    };
    match request.code {
        code::SEND_MESSAGE => {
            let topic = ext("topic");
            let perm = send_perm(&topic);
            add(topic, perm);
        }
        code::SEND_MESSAGE_V2 | code::SEND_BATCH_MESSAGE => {
            let topic = ext("b");
            let perm = send_perm(&topic);
            add(topic, perm);
        }
        code::CONSUMER_SEND_MSG_BACK => add(ext("group").map(|g| retry_topic(&g)), SUB),
        code::PULL_MESSAGE => {
            add(ext("topic"), SUB);
            add(ext("consumerGroup").map(|g| retry_topic(&g)), SUB);
        }
        code::QUERY_MESSAGE => add(ext("topic"), SUB),
        code::HEART_BEAT => {
            let heartbeat: HeartbeatData = parse_lenient(&request.body, "HeartbeatData")
                .map_err(|e| AclError::BadRequest(e.to_string()))?;
            for consumer in &heartbeat.consumer_data_set {
                add(Some(retry_topic(&consumer.group_name)), SUB);
                for subscription in &consumer.subscription_data_set {
                    add(Some(subscription.topic.clone()), SUB);
                }
            }
        }
        code::UNREGISTER_CLIENT => {
            required(request, "clientID")?;
            add(ext("consumerGroup").map(|g| retry_topic(&g)), SUB);
        }
        code::GET_CONSUMER_LIST_BY_GROUP => {
            let group = required(request, "consumerGroup")?;
            add(Some(retry_topic(group)), SUB);
        }
        code::UPDATE_CONSUMER_OFFSET => {
            let group = required(request, "consumerGroup")?;
            let topic = required(request, "topic")?;
            required(request, "queueId")?;
            required(request, "commitOffset")?;
            add(Some(retry_topic(group)), SUB);
            add(Some(topic.to_owned()), SUB);
        }
        _ => {}
    }
    Ok(needed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn needs(request: &RemotingCommand) -> Vec<(String, u8)> {
        needed_permissions(request).unwrap().into_iter().collect()
    }

    fn pair(resource: &str, perm: u8) -> (String, u8) {
        (resource.to_owned(), perm)
    }

    #[test]
    fn sends_need_pub_on_the_topic() {
        let v1 = RemotingCommand::request(code::SEND_MESSAGE).with_ext("topic", "T");
        assert_eq!(needs(&v1), [pair("T", PUB)]);
        let v2 = RemotingCommand::request(code::SEND_MESSAGE_V2).with_ext("b", "T");
        assert_eq!(needs(&v2), [pair("T", PUB)]);
        let batch = RemotingCommand::request(code::SEND_BATCH_MESSAGE).with_ext("b", "%RETRY%g");
        assert_eq!(
            needs(&batch),
            [pair("%RETRY%g", SUB)],
            "a retry send is a consumer's"
        );
    }

    #[test]
    fn pulls_and_offsets_need_sub_on_topic_and_group() {
        let pull = RemotingCommand::request(code::PULL_MESSAGE)
            .with_ext("topic", "T")
            .with_ext("consumerGroup", "g");
        assert_eq!(needs(&pull), [pair("%RETRY%g", SUB), pair("T", SUB)]);
        let commit = RemotingCommand::request(code::UPDATE_CONSUMER_OFFSET)
            .with_ext("topic", "T")
            .with_ext("consumerGroup", "g")
            .with_ext("queueId", 0)
            .with_ext("commitOffset", 5);
        assert_eq!(needs(&commit), [pair("%RETRY%g", SUB), pair("T", SUB)]);
        let missing = RemotingCommand::request(code::UPDATE_CONSUMER_OFFSET).with_ext("topic", "T");
        assert_eq!(
            needed_permissions(&missing).unwrap_err().to_string(),
            "the custom field <consumerGroup> is null"
        );
        let back = RemotingCommand::request(code::CONSUMER_SEND_MSG_BACK).with_ext("group", "g");
        assert_eq!(needs(&back), [pair("%RETRY%g", SUB)]);
    }

    #[test]
    fn heartbeats_need_sub_on_their_groups_and_subscriptions() {
        let body = r#"{"clientID":"c","producerDataSet":[{"groupName":"pg"}],"consumerDataSet":[{"groupName":"cg","subscriptionDataSet":[{"topic":"T1"},{"topic":"T2"}]}]}"#;
        let hb = RemotingCommand::request(code::HEART_BEAT).with_body(Bytes::from(body));
        assert_eq!(
            needs(&hb),
            [pair("%RETRY%cg", SUB), pair("T1", SUB), pair("T2", SUB)],
            "producer groups need nothing"
        );
        let bad = RemotingCommand::request(code::HEART_BEAT).with_body(Bytes::from_static(b"{"));
        assert!(matches!(
            needed_permissions(&bad),
            Err(AclError::BadRequest(_))
        ));
    }

    #[test]
    fn other_codes_need_no_resource() {
        for c in [
            code::GET_ROUTEINFO_BY_TOPIC,
            code::UPDATE_AND_CREATE_TOPIC,
            code::QUERY_CONSUMER_OFFSET,
        ] {
            assert!(
                needs(&RemotingCommand::request(c).with_ext("topic", "T")).is_empty(),
                "{c}"
            );
        }
    }

    #[test]
    fn resources_print_as_java() {
        assert_eq!(print_resource("T"), "topic:T");
        assert_eq!(print_resource("%RETRY%g"), "group:g");
        assert_eq!(print_resource("%RETRY%g+T"), "group:g");
    }
}
