//! Message filtering: tags and SQL92 (Java `filter` module: `ExpressionMessageFilter`, `SqlFilter`).
//!
//! - [`tag`]: TAG subscriptions (`"*"` or `"TagA || TagB"`) and Java's `String.hashCode`.
//! - [`sql92`]: the SQL92 property-filter language: lexer, parser, evaluator.
//! - [`properties`]: finding a stored record's properties and reading them in place.
//! - [`expression_filter`]: [`ExpressionMessageFilter`], the store's two-layer
//!   [`MessageFilter`](crate::store::filter::MessageFilter) for one subscription.
//! - `error`: [`FilterError`].

mod error;
pub mod expression_filter;
pub mod properties;
pub mod sql92;
pub mod tag;

pub use error::FilterError;
pub use expression_filter::{ExpressionMessageFilter, SubscriptionExpression};
pub use sql92::{CompiledExpression, EvalError, PropertyLookup};
pub use tag::{java_string_hash_code, TagSubscription};
