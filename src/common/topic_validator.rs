//! Topic names, checked once for the broker and the store alike (Java `TopicValidator`).

/// Prefix of a consumer group's retry topic (Java `MixAll.RETRY_GROUP_TOPIC_PREFIX`).
pub const RETRY_GROUP_TOPIC_PREFIX: &str = "%RETRY%";
/// Prefix of a consumer group's dead-letter topic (Java `MixAll.DLQ_GROUP_TOPIC_PREFIX`).
pub const DLQ_GROUP_TOPIC_PREFIX: &str = "%DLQ%";
/// Java `TopicValidator.TOPIC_MAX_LENGTH` for ordinary topics.
pub const TOPIC_MAX_LENGTH: usize = 127;
/// Retry and DLQ topics embed a group name (≤ 120 chars) behind their prefix.
pub const SYSTEM_GROUP_TOPIC_MAX_LENGTH: usize = 255;

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
    if let Some(character) = topic
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "_%|-".contains(*c)))
    {
        return Err(TopicNameError::IllegalCharacter {
            topic: topic.to_string(),
            character,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
