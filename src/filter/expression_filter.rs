//! The broker's message filter for one subscription (Java `ExpressionMessageFilter`).

use super::error::FilterError;
use super::properties::{record_properties, RawProperties};
use super::sql92::CompiledExpression;
use super::tag::{TagSubscription, TAG_EXPRESSION_LENGTH_MAX_BYTES};
use crate::store::filter::MessageFilter;

/// Java `ExpressionType.TAG`.
pub const EXPRESSION_TYPE_TAG: &str = "TAG";
/// Java `ExpressionType.SQL92`.
pub const EXPRESSION_TYPE_SQL92: &str = "SQL92";
/// Property holding a message's tag (Java `MessageConst.PROPERTY_TAGS`).
pub const PROPERTY_TAGS: &str = "TAGS";

/// What a subscription filters on.
#[derive(Debug, Clone)]
pub enum SubscriptionExpression {
    Tag(TagSubscription),
    Sql92(CompiledExpression),
}

/// Decides which messages one subscription receives, in two layers:
///
/// - ConsumeQueue (tags code only, before any CommitLog read): a TAG subscription keeps the
///   message if its tags code is one of the subscribed tags' hash codes (everything for `*`); an
///   SQL92 subscription keeps everything here (Java can consult a bloom filter here, which is
///   off by default and not implemented).
/// - CommitLog (the record's properties, read in place): a TAG subscription requires the
///   message's exact TAGS value to be subscribed, so a hash collision ("Aa" and "BB") is never
///   delivered. This is stricter than Java's broker, which passes collisions on and lets the
///   client drop them; the client would drop them anyway, so consumers see the same messages.
///   An SQL92 subscription evaluates its expression over the properties (TAGS included); only
///   a definite TRUE matches.
#[derive(Debug, Clone)]
pub struct ExpressionMessageFilter {
    expression: SubscriptionExpression,
}

impl ExpressionMessageFilter {
    /// Builds the filter for a subscription. `expression_type` is `""` or `"TAG"` for tags (a
    /// Java client's `null` type should be passed as `""`) or `"SQL92"`; anything else is
    /// [`FilterError::UnknownExpressionType`]. An SQL92 `sub_string` that does not compile is
    /// [`FilterError::Parse`] (or [`FilterError::ExpressionTooLong`]); a TAG `sub_string` over
    /// [`TAG_EXPRESSION_LENGTH_MAX_BYTES`] is [`FilterError::TagExpressionTooLong`].
    ///
    /// The broker's `enablePropertyFilter` switch (off by default in RocketMQ) is the caller's
    /// to enforce before building an SQL92 filter.
    pub fn new(
        expression_type: &str,
        sub_string: &str,
    ) -> Result<ExpressionMessageFilter, FilterError> {
        let expression = match expression_type {
            "" | EXPRESSION_TYPE_TAG => {
                if sub_string.len() > TAG_EXPRESSION_LENGTH_MAX_BYTES {
                    return Err(FilterError::TagExpressionTooLong {
                        length_bytes: sub_string.len(),
                        length_max_bytes: TAG_EXPRESSION_LENGTH_MAX_BYTES,
                    });
                }
                SubscriptionExpression::Tag(TagSubscription::parse(sub_string))
            }
            EXPRESSION_TYPE_SQL92 => {
                SubscriptionExpression::Sql92(CompiledExpression::compile(sub_string)?)
            }
            other => return Err(FilterError::UnknownExpressionType(other.to_owned())),
        };
        Ok(ExpressionMessageFilter { expression })
    }

    /// Heap bytes the compiled filter holds (not counting the struct itself), so a cache of
    /// filters can be bounded in bytes.
    pub fn heap_bytes(&self) -> usize {
        match &self.expression {
            SubscriptionExpression::Tag(tags) => tags.heap_bytes(),
            SubscriptionExpression::Sql92(expression) => expression.heap_bytes(),
        }
    }

    /// The parsed subscription.
    pub fn expression(&self) -> &SubscriptionExpression {
        &self.expression
    }

    /// Layer one, from a ConsumeQueue unit's tags code (also used by long polling on arrival).
    pub fn matches_tags_code(&self, tags_code: i64) -> bool {
        match &self.expression {
            SubscriptionExpression::Tag(tags) => tags.matches_tags_code(tags_code),
            SubscriptionExpression::Sql92(_) => true,
        }
    }

    /// Layer two, from a message's encoded properties (the bytes a record stores, or
    /// that an arrival event carries).
    pub fn matches_properties(&self, properties: &[u8]) -> bool {
        let properties = RawProperties(properties);
        match &self.expression {
            SubscriptionExpression::Tag(tags) => {
                if tags.is_sub_all() {
                    return true;
                }
                tags.matches_tag(properties.get_str(PROPERTY_TAGS).as_deref())
            }
            SubscriptionExpression::Sql92(expression) => expression.matches(&properties),
        }
    }

    /// Both layers, for long polling deciding whether an arriving message wakes a parked pull.
    pub fn matches_arrival(&self, tags_code: i64, properties: &[u8]) -> bool {
        self.matches_tags_code(tags_code) && self.matches_properties(properties)
    }
}

impl MessageFilter for ExpressionMessageFilter {
    fn is_matched_by_consume_queue(&self, tags_code: i64) -> bool {
        self.matches_tags_code(tags_code)
    }

    fn is_matched_by_commit_log(&self, record: &[u8]) -> bool {
        if let SubscriptionExpression::Tag(tags) = &self.expression {
            if tags.is_sub_all() {
                return true;
            }
        }
        match record_properties(record) {
            Ok(properties) => self.matches_properties(properties),
            Err(error) => {
                // The store hands us whole records; a malformed one is not delivered.
                tracing::warn!(%error, "cannot read the properties of a stored record; not delivering it");
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::properties::tests::MESSAGE_MAGIC_CODE_V1;
    use crate::filter::properties::tests::{build_record, encode_properties};
    use crate::filter::tag::java_string_hash_code;

    fn record(pairs: &[(&str, &str)]) -> Vec<u8> {
        build_record(
            MESSAGE_MAGIC_CODE_V1,
            0,
            b"body",
            b"TopicTest",
            &encode_properties(pairs),
        )
    }

    fn code(tag: &str) -> i64 {
        i64::from(java_string_hash_code(tag))
    }

    #[test]
    fn construction_by_type() {
        assert!(matches!(
            ExpressionMessageFilter::new("", "*").unwrap().expression(),
            SubscriptionExpression::Tag(t) if t.is_sub_all()
        ));
        assert!(matches!(
            ExpressionMessageFilter::new("TAG", "a||b").unwrap().expression(),
            SubscriptionExpression::Tag(t) if t.tags().len() == 2
        ));
        assert!(matches!(
            ExpressionMessageFilter::new("SQL92", "a > 1").unwrap().expression(),
            SubscriptionExpression::Sql92(e) if e.source() == "a > 1"
        ));
        assert_eq!(
            ExpressionMessageFilter::new("sql92", "a > 1").unwrap_err(),
            FilterError::UnknownExpressionType("sql92".into())
        );
        assert_eq!(
            ExpressionMessageFilter::new("CLASS", "x").unwrap_err(),
            FilterError::UnknownExpressionType("CLASS".into())
        );
        assert!(matches!(
            ExpressionMessageFilter::new("SQL92", "a >").unwrap_err(),
            FilterError::Parse { position: 3, .. }
        ));
        // Java rejects an empty SQL92 expression too.
        assert!(matches!(
            ExpressionMessageFilter::new("SQL92", "").unwrap_err(),
            FilterError::Parse { position: 0, .. }
        ));
    }

    #[test]
    fn tag_filter_two_layers() {
        let filter = ExpressionMessageFilter::new("TAG", "TagA || TagB").unwrap();
        assert!(filter.is_matched_by_consume_queue(code("TagA")));
        assert!(filter.is_matched_by_consume_queue(code("TagB")));
        assert!(!filter.is_matched_by_consume_queue(code("TagC")));
        assert!(!filter.is_matched_by_consume_queue(0));
        assert!(filter.is_matched_by_commit_log(&record(&[("TAGS", "TagA")])));
        assert!(!filter.is_matched_by_commit_log(&record(&[("TAGS", "TagC")])));
        assert!(!filter.is_matched_by_commit_log(&record(&[("KEYS", "TagA")])));
        assert!(!filter.is_matched_by_commit_log(&record(&[])));
    }

    #[test]
    fn tag_hash_collision_is_rejected_by_layer_two() {
        assert_eq!(code("Aa"), code("BB"));
        let filter = ExpressionMessageFilter::new("TAG", "Aa").unwrap();
        let collision = record(&[("TAGS", "BB")]);
        assert!(filter.is_matched_by_consume_queue(code("BB")));
        assert!(!filter.is_matched_by_commit_log(&collision));
        assert!(!filter.matches_arrival(code("BB"), &encode_properties(&[("TAGS", "BB")])));
        assert!(filter.is_matched_by_commit_log(&record(&[("TAGS", "Aa")])));
        assert!(filter.matches_arrival(code("Aa"), &encode_properties(&[("TAGS", "Aa")])));
    }

    #[test]
    fn sub_all_matches_everything_even_unreadable_records() {
        let filter = ExpressionMessageFilter::new("TAG", "*").unwrap();
        assert!(filter.is_matched_by_consume_queue(0));
        assert!(filter.is_matched_by_consume_queue(-17));
        assert!(filter.is_matched_by_commit_log(&record(&[])));
        assert!(filter.is_matched_by_commit_log(&[0u8; 3]));
        assert!(filter.matches_arrival(0, b""));
    }

    #[test]
    fn sql92_filter_passes_layer_one_and_evaluates_layer_two() {
        let filter = ExpressionMessageFilter::new("SQL92", "TAGS = 'TagA' AND price > 10").unwrap();
        assert!(filter.is_matched_by_consume_queue(code("TagZ")));
        assert!(filter.is_matched_by_commit_log(&record(&[("TAGS", "TagA"), ("price", "11")])));
        assert!(!filter.is_matched_by_commit_log(&record(&[("TAGS", "TagA"), ("price", "10")])));
        assert!(!filter.is_matched_by_commit_log(&record(&[("TAGS", "TagB"), ("price", "11")])));
        // Absent property: NULL, no match. Non-numeric: error, no match.
        assert!(!filter.is_matched_by_commit_log(&record(&[("TAGS", "TagA")])));
        assert!(!filter.is_matched_by_commit_log(&record(&[("TAGS", "TagA"), ("price", "x")])));
        // Corrupt record: no match, no panic.
        assert!(!filter.is_matched_by_commit_log(&[0u8; 10]));
        assert!(filter.matches_arrival(
            code("TagA"),
            &encode_properties(&[("price", "99"), ("TAGS", "TagA")])
        ));
        assert!(!filter.matches_arrival(code("TagA"), &encode_properties(&[("price", "99")])));
    }

    #[test]
    fn usable_as_a_store_filter_object() {
        let filter: Box<dyn MessageFilter> =
            Box::new(ExpressionMessageFilter::new("SQL92", "a IS NULL").unwrap());
        assert!(filter.is_matched_by_commit_log(&record(&[("b", "1")])));
        assert!(!filter.is_matched_by_commit_log(&record(&[("a", "1")])));
    }
}
