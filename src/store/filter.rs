//! The store's two-step message filter hook.
//!
//! The store calls [`MessageFilter::is_matched_by_consume_queue`] with the tags code of each
//! ConsumeQueue unit before it reads the record (layer one: no CommitLog read for a miss), and
//! [`MessageFilter::is_matched_by_commit_log`] with the raw record bytes of each candidate
//! (layer two). Implementations live outside the store (`crate::filter`); the store only knows
//! this trait, so it stays ignorant of subscriptions and of the remoting protocol.

/// Decides which messages a pull returns. Mirrors Java's `MessageFilter`.
pub trait MessageFilter: Send + Sync {
    /// Layer one: `tags_code` is the ConsumeQueue unit's tags hash code (Java
    /// `String.hashCode()` of TAGS, widened to i64; 0 when the message has no tags).
    fn is_matched_by_consume_queue(&self, tags_code: i64) -> bool;

    /// Layer two: `record` is the whole stored record (RocketMQ CommitLog layout).
    fn is_matched_by_commit_log(&self, record: &[u8]) -> bool;
}

/// A filter that lets every message through.
#[derive(Debug, Clone, Copy, Default)]
pub struct AcceptAll;

impl MessageFilter for AcceptAll {
    fn is_matched_by_consume_queue(&self, _tags_code: i64) -> bool {
        true
    }

    fn is_matched_by_commit_log(&self, _record: &[u8]) -> bool {
        true
    }
}
