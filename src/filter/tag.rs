//! TAG subscriptions: `"*"`, or tags joined by `||` (Java `FilterAPI.buildSubscriptionData`).

use std::collections::HashSet;

/// Longest accepted TAG expression. Java bounds it only by the frame (16 MiB), and a parsed
/// expression costs about ten times its text (a `String` and two hash-set slots per tag), so
/// one pull could pin tens of megabytes in the filter cache. 64 KiB, like the SQL92 limit,
/// still holds thousands of tags.
pub const TAG_EXPRESSION_LENGTH_MAX_BYTES: usize = 64 * 1024;

/// Subscribes to every tag (Java `SubscriptionData.SUB_ALL`).
pub const SUB_ALL: &str = "*";

/// Java `String.hashCode()`, the `tagsCode` stored in each ConsumeQueue unit (one definition,
/// in the store's format module).
pub use crate::store::format::java_string_hash_code;

/// Java `String.trim()`: strips every character `<= ' '` (not Unicode whitespace).
fn java_trim(text: &str) -> &str {
    text.trim_matches(|c: char| c <= ' ')
}

/// A parsed TAG subscription expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagSubscription {
    sub_all: bool,
    tags: HashSet<String>,
    codes: HashSet<i32>,
}

impl TagSubscription {
    /// Java `FilterAPI.buildSubscriptionData`: `""` or `"*"` subscribes to everything;
    /// otherwise the text is split on `||`, each part trimmed, empty parts dropped. (Java's
    /// client sends `null` as `""`; pass `""` for it.) A text such as `" || "` yields no tags and
    /// so matches nothing, as in Java.
    pub fn parse(sub_string: &str) -> TagSubscription {
        if sub_string.is_empty() || sub_string == SUB_ALL {
            return TagSubscription {
                sub_all: true,
                tags: HashSet::new(),
                codes: HashSet::new(),
            };
        }
        let tags: HashSet<String> = sub_string
            .split("||")
            .map(java_trim)
            .filter(|tag| !tag.is_empty())
            .map(str::to_owned)
            .collect();
        let codes = tags.iter().map(|tag| java_string_hash_code(tag)).collect();
        TagSubscription {
            sub_all: false,
            tags,
            codes,
        }
    }

    /// Heap bytes this subscription holds (its sets' slots and the tags' text), for the
    /// broker's filter cache to account.
    pub fn heap_bytes(&self) -> usize {
        let tag_slots = self.tags.capacity() * (std::mem::size_of::<String>() + 1);
        let tag_text: usize = self.tags.iter().map(String::capacity).sum();
        let code_slots = self.codes.capacity() * (std::mem::size_of::<i32>() + 1);
        tag_slots + tag_text + code_slots
    }

    /// Whether this subscribes to every tag.
    pub fn is_sub_all(&self) -> bool {
        self.sub_all
    }

    /// The subscribed tags (Java `tagsSet`); empty for [`SUB_ALL`].
    pub fn tags(&self) -> &HashSet<String> {
        &self.tags
    }

    /// The hash codes of the subscribed tags (Java `codeSet`); empty for [`SUB_ALL`].
    pub fn codes(&self) -> &HashSet<i32> {
        &self.codes
    }

    /// Layer one (ConsumeQueue): Java compares `(int) tagsCode` with the code set.
    pub fn matches_tags_code(&self, tags_code: i64) -> bool {
        // Java narrows with `Long.intValue()`, i.e. keeps the low 32 bits.
        self.sub_all || self.codes.contains(&(tags_code as i32))
    }

    /// Layer two (the message's real TAGS value, `None` if it has none): the exact string must
    /// be subscribed, so two tags with the same hash code are told apart. Java's broker lets
    /// such a collision through and relies on the client to drop it; we drop it here.
    pub fn matches_tag(&self, tag: Option<&str>) -> bool {
        self.sub_all || tag.is_some_and(|tag| self.tags.contains(tag))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_code_matches_java() {
        // Values computed by Java's String.hashCode().
        assert_eq!(java_string_hash_code(""), 0);
        assert_eq!(java_string_hash_code("a"), 97);
        assert_eq!(java_string_hash_code("TagA"), 2_598_919);
        assert_eq!(java_string_hash_code("hello"), 99_162_322);
        assert_eq!(java_string_hash_code("Aa"), java_string_hash_code("BB"));
        assert_eq!(java_string_hash_code("Aa"), 2112);
        // Wrapping: a long string overflows i32.
        assert_eq!(
            java_string_hash_code("The quick brown fox jumps over the lazy dog"),
            -609_428_141
        );
        // UTF-16 code units: 'é' is one unit (233), '😀' is a surrogate pair.
        assert_eq!(java_string_hash_code("é"), 233);
        assert_eq!(java_string_hash_code("😀"), 0xD83D * 31 + 0xDE00);
    }

    #[test]
    fn sub_all_forms() {
        for text in ["", "*"] {
            let subscription = TagSubscription::parse(text);
            assert!(subscription.is_sub_all(), "{text:?}");
            assert!(subscription.tags().is_empty());
            assert!(subscription.matches_tags_code(12345));
            assert!(subscription.matches_tag(None));
            assert!(subscription.matches_tag(Some("anything")));
        }
        // Only the exact "*" is SUB_ALL in Java.
        let spaced = TagSubscription::parse(" * ");
        assert!(!spaced.is_sub_all());
        assert!(spaced.tags().contains("*"));
    }

    #[test]
    fn splits_trims_and_drops_empty_tags() {
        let subscription = TagSubscription::parse(" TagA ||TagB||  || TagA||\tTagC\n");
        let mut tags: Vec<&str> = subscription.tags().iter().map(String::as_str).collect();
        tags.sort_unstable();
        assert_eq!(tags, ["TagA", "TagB", "TagC"]);
        let expected_codes: HashSet<i32> = ["TagA", "TagB", "TagC"]
            .iter()
            .map(|t| java_string_hash_code(t))
            .collect();
        assert_eq!(subscription.codes(), &expected_codes);
        // A single '|' is not a separator.
        assert!(TagSubscription::parse("a|b").tags().contains("a|b"));
        // Nothing but separators: subscribes to nothing.
        let nothing = TagSubscription::parse(" || ");
        assert!(!nothing.is_sub_all());
        assert!(!nothing.matches_tags_code(0));
        assert!(!nothing.matches_tag(Some("")));
        // Java's trim strips control characters but not non-ASCII spaces.
        assert!(TagSubscription::parse("\u{1}x\u{1f}").tags().contains("x"));
        assert!(TagSubscription::parse("\u{3000}x")
            .tags()
            .contains("\u{3000}x"));
    }

    #[test]
    fn layer_one_uses_the_low_32_bits_of_the_tags_code() {
        let subscription = TagSubscription::parse("TagA || TagB");
        let code = i64::from(java_string_hash_code("TagA"));
        assert!(subscription.matches_tags_code(code));
        assert!(subscription.matches_tags_code(code + (1 << 32)));
        assert!(!subscription.matches_tags_code(code + 1000));
        assert!(
            !subscription.matches_tags_code(0),
            "a message without tags has code 0"
        );
        let negative = TagSubscription::parse("The quick brown fox jumps over the lazy dog");
        assert!(negative.matches_tags_code(-609_428_141));
    }

    #[test]
    fn layer_two_rejects_hash_collisions() {
        let subscription = TagSubscription::parse("Aa");
        let collision_code = i64::from(java_string_hash_code("BB"));
        assert!(
            subscription.matches_tags_code(collision_code),
            "layer one cannot tell Aa from BB"
        );
        assert!(subscription.matches_tag(Some("Aa")));
        assert!(!subscription.matches_tag(Some("BB")));
        assert!(!subscription.matches_tag(None));
    }
}
