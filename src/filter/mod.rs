//! Message filtering: tags and SQL92 (Java `filter` module: `ExpressionMessageFilter`, `SqlFilter`).
//!
//! - [`tag`]: TAG subscriptions (`"*"` or `"TagA || TagB"`) and Java's `String.hashCode`.
//! - [`sql92`]: the SQL92 property-filter language: lexer, parser, evaluator.
//! - [`properties`]: finding a stored record's properties and reading them in place.
//! - [`expression_filter`]: [`ExpressionMessageFilter`], the store's two-layer
//!   [`MessageFilter`](crate::store::filter::MessageFilter) for one subscription.

pub mod expression_filter;
pub mod properties;
pub mod sql92;
pub mod tag;

pub use expression_filter::{ExpressionMessageFilter, SubscriptionExpression};
pub use sql92::{CompiledExpression, EvalError, PropertyLookup};
pub use tag::{java_string_hash_code, TagSubscription};

/// Why a subscription's filter could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    /// The SQL92 expression is malformed. `position` is the character offset (0-based) of the
    /// offending token in the expression.
    #[error("invalid SQL92 expression at character {position}: {message}")]
    Parse { position: usize, message: String },
    /// The SQL92 expression is longer than [`sql92::MAX_EXPRESSION_LENGTH_BYTES`].
    #[error("SQL92 expression is {length_bytes} bytes long; the limit is {max_length_bytes}")]
    ExpressionTooLong {
        length_bytes: usize,
        max_length_bytes: usize,
    },
    /// The expression type is neither TAG nor SQL92.
    #[error("unknown filter expression type {0:?}; expected TAG or SQL92")]
    UnknownExpressionType(String),
}
