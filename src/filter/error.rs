//! The one error type of building a subscription's filter (TAG or SQL92).

/// Why a subscription's filter could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    /// The SQL92 expression is malformed. `position` is the character offset (0-based) of the
    /// offending token in the expression.
    #[error("invalid SQL92 expression at character {position}: {message}")]
    Parse { position: usize, message: String },
    /// The SQL92 expression is longer than [`crate::filter::sql92::EXPRESSION_LENGTH_MAX_BYTES`].
    #[error("SQL92 expression is {length_bytes} bytes long; the limit is {length_max_bytes}")]
    ExpressionTooLong {
        length_bytes: usize,
        length_max_bytes: usize,
    },
    /// The TAG expression is longer than [`crate::filter::tag::TAG_EXPRESSION_LENGTH_MAX_BYTES`].
    #[error("TAG expression is {length_bytes} bytes long; the limit is {length_max_bytes}")]
    TagExpressionTooLong {
        length_bytes: usize,
        length_max_bytes: usize,
    },
    /// The expression type is neither TAG nor SQL92.
    #[error("unknown filter expression type {0:?}; expected TAG or SQL92")]
    UnknownExpressionType(String),
}
