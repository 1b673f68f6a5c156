//! Topic and consumer group names, checked once for the broker and the store alike (Java
//! `TopicValidator`), and the retry and dead-letter topics built from a group.

/// Prefix of a consumer group's retry topic (Java `MixAll.RETRY_GROUP_TOPIC_PREFIX`).
pub const RETRY_GROUP_TOPIC_PREFIX: &str = "%RETRY%";
/// Prefix of a consumer group's dead-letter topic (Java `MixAll.DLQ_GROUP_TOPIC_PREFIX`).
pub const DLQ_GROUP_TOPIC_PREFIX: &str = "%DLQ%";
/// Java `TopicValidator.TOPIC_MAX_LENGTH` for ordinary topics.
pub const TOPIC_MAX_LENGTH: usize = 127;
/// Java `TopicValidator.RETRY_OR_DLQ_TOPIC_MAX_LENGTH`: retry and DLQ topics embed a group
/// name behind their prefix (and a topic too, for Java's pop retry topics), so they may be
/// longer than ordinary topics. The store writes them in the v2 record layout.
pub const SYSTEM_GROUP_TOPIC_MAX_LENGTH: usize = 255;
/// Java `TopicValidator.GROUP_MAX_LENGTH`: a group name is at most 120 characters, so the retry
/// topic made from it (`%RETRY%` + group) still fits an ordinary topic's 127.
pub const GROUP_MAX_LENGTH: usize = 120;
/// The characters of a topic or group name besides ASCII letters and digits (Java
/// `TopicValidator.VALID_CHAR_BIT_MAP`, `^[%|a-zA-Z0-9_-]+$`).
const NAME_PUNCTUATION: &str = "_%|-";

/// Why a topic name is refused. The texts are Java's remarks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopicNameError {
    #[error("the specified topic is blank")]
    Blank,
    #[error("the specified topic is longer than topic max length {max_length}")]
    TooLong { max_length: usize },
    #[error(
        "the specified topic[{topic}] contains illegal characters ({character:?}), allowing only ^[%|a-zA-Z0-9_-]+$"
    )]
    IllegalCharacter { topic: String, character: char },
}

/// Why a consumer group name is refused. The texts are Java's remarks
/// (`TopicValidator.validateGroup`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GroupNameError {
    #[error("The specified group is blank.")]
    Blank,
    #[error(
        "The specified group: {group}, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    )]
    IllegalCharacter { group: String },
    #[error("The specified group: {group}, is longer than group max length: {max_length}")]
    TooLong { group: String, max_length: usize },
}

/// The first character a topic or group name may not hold.
fn illegal_character(name: &str) -> Option<char> {
    name.chars()
        .find(|c| !(c.is_ascii_alphanumeric() || NAME_PUNCTUATION.contains(*c)))
}

/// Checks a consumer group name like Java's `TopicValidator.validateGroup`: not blank, only
/// `[A-Za-z0-9_%|-]`, at most [`GROUP_MAX_LENGTH`] characters. A group's name becomes part of
/// topic names, file names and the `topic@group` keys of `consumerOffset.json`, so a name that
/// fails here is never stored.
pub fn validate_group(group: &str) -> Result<(), GroupNameError> {
    if group.trim().is_empty() {
        return Err(GroupNameError::Blank);
    }
    // Characters first, as Java does; the text then echoes a name of legal characters only
    // when it is merely too long.
    if illegal_character(group).is_some() {
        return Err(GroupNameError::IllegalCharacter {
            group: group.to_string(),
        });
    }
    if group.len() > GROUP_MAX_LENGTH {
        return Err(GroupNameError::TooLong {
            group: group.to_string(),
            max_length: GROUP_MAX_LENGTH,
        });
    }
    Ok(())
}

/// The retry topic of `group` (Java `MixAll.getRetryTopic`), refused when it is not a topic
/// the store accepts: a message parked for it in `SCHEDULE_TOPIC_XXXX` could never be
/// delivered.
pub fn retry_topic(group: &str) -> Result<String, TopicNameError> {
    let topic = format!("{RETRY_GROUP_TOPIC_PREFIX}{group}");
    validate_topic(&topic, true)?;
    Ok(topic)
}

/// The dead-letter topic of `group` (Java `MixAll.getDLQTopic`), refused like [`retry_topic`].
pub fn dlq_topic(group: &str) -> Result<String, TopicNameError> {
    let topic = format!("{DLQ_GROUP_TOPIC_PREFIX}{group}");
    validate_topic(&topic, true)?;
    Ok(topic)
}

/// Whether `topic` is a retry or dead-letter topic of some group.
pub fn is_group_topic(topic: &str) -> bool {
    topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) || topic.starts_with(DLQ_GROUP_TOPIC_PREFIX)
}

/// Checks a topic name like Java's `TopicValidator.validateTopic`: not blank, only
/// `[A-Za-z0-9_%|-]`, at most [`TOPIC_MAX_LENGTH`] bytes, or [`SYSTEM_GROUP_TOPIC_MAX_LENGTH`]
/// for a retry or DLQ topic when `group_topic_long_allowed`.
pub fn validate_topic(topic: &str, group_topic_long_allowed: bool) -> Result<(), TopicNameError> {
    if topic.trim().is_empty() {
        return Err(TopicNameError::Blank);
    }
    let max_length = if group_topic_long_allowed && is_group_topic(topic) {
        SYSTEM_GROUP_TOPIC_MAX_LENGTH
    } else {
        TOPIC_MAX_LENGTH
    };
    if topic.len() > max_length {
        return Err(TopicNameError::TooLong { max_length });
    }
    if let Some(character) = illegal_character(topic) {
        return Err(TopicNameError::IllegalCharacter {
            topic: topic.to_string(),
            character,
        });
    }
    Ok(())
}

/// Java `TopicValidator.SYSTEM_TOPIC_SET`.
const SYSTEM_TOPICS: &[&str] = &[
    "TBW102",
    "SCHEDULE_TOPIC_XXXX",
    "BenchmarkTest",
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRACE_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "SELF_TEST_TOPIC",
    "OFFSET_MOVED_EVENT",
    "CHECKPOINT_TOPIC",
];
/// Java `TopicValidator.SYSTEM_TOPIC_PREFIX`.
pub const SYSTEM_TOPIC_PREFIX: &str = "rmq_sys_";

/// Java `TopicValidator.isSystemTopic`: the broker's own topics, which its message totals
/// leave out.
pub fn is_system_topic(topic: &str) -> bool {
    SYSTEM_TOPICS.contains(&topic) || topic.starts_with(SYSTEM_TOPIC_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_topics_are_javas() {
        assert!(is_system_topic("SCHEDULE_TOPIC_XXXX"));
        assert!(is_system_topic("rmq_sys_anything"));
        assert!(!is_system_topic("TopicTest"));
        assert!(!is_system_topic("%RETRY%g"));
    }

    #[test]
    fn topic_names_are_validated_like_java() {
        assert!(validate_topic("TopicTest", true).is_ok());
        assert!(validate_topic("a-b_c%d|e", true).is_ok());
        assert_eq!(validate_topic("", true), Err(TopicNameError::Blank));
        assert!(validate_topic("a b", true)
            .unwrap_err()
            .to_string()
            .contains("illegal"));
        assert!(validate_topic("a.b", true).is_err());
        assert!(validate_topic(&"x".repeat(127), true).is_ok());
        assert!(validate_topic(&"x".repeat(128), true)
            .unwrap_err()
            .to_string()
            .contains("127"));
        let long_retry = format!("%RETRY%{}", "g".repeat(200));
        assert!(validate_topic(&long_retry, true).is_ok());
        assert_eq!(
            validate_topic(&long_retry, false),
            Err(TopicNameError::TooLong { max_length: 127 })
        );
    }

    #[test]
    fn group_names_are_validated_like_java() {
        assert_eq!(validate_group("CID_orders-1|%"), Ok(()));
        assert_eq!(validate_group(&"g".repeat(120)), Ok(()));
        assert_eq!(validate_group(""), Err(GroupNameError::Blank));
        assert_eq!(validate_group("  "), Err(GroupNameError::Blank));
        let e = validate_group("../../x\u{1}").unwrap_err();
        assert_eq!(
            e.to_string(),
            "The specified group: ../../x\u{1}, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
        );
        for bad in ["a@b", "a b", "a.b", "a/b", "é"] {
            assert!(
                matches!(
                    validate_group(bad),
                    Err(GroupNameError::IllegalCharacter { .. })
                ),
                "{bad}"
            );
        }
        let long = "g".repeat(121);
        assert_eq!(
            validate_group(&long).unwrap_err().to_string(),
            format!("The specified group: {long}, is longer than group max length: 120")
        );
    }

    #[test]
    fn retry_and_dlq_topics_are_built_only_when_the_store_takes_them() {
        assert_eq!(retry_topic("cg").unwrap(), "%RETRY%cg");
        assert_eq!(dlq_topic("cg").unwrap(), "%DLQ%cg");
        assert!(matches!(
            retry_topic("../../x\u{1}"),
            Err(TopicNameError::IllegalCharacter { .. })
        ));
        assert!(dlq_topic("a b").is_err());
        // A group of the longest legal name makes a retry topic of an ordinary topic's length.
        let longest = "g".repeat(GROUP_MAX_LENGTH);
        assert_eq!(retry_topic(&longest).unwrap().len(), TOPIC_MAX_LENGTH);
        assert!(retry_topic(&"g".repeat(SYSTEM_GROUP_TOPIC_MAX_LENGTH)).is_err());
    }
}
