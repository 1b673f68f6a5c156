//! RocketMQ's SQL92 property filter: compile once ([`CompiledExpression::compile`]), evaluate
//! per message ([`CompiledExpression::matches`]).
//!
//! The language and its semantics are Java's (`filter/parser/SelectorParser.jj`,
//! `filter/expression/*`); see [`lexer`], [`parser`] and [`eval`] for the rules and the few
//! documented differences (all stricter: trailing tokens and over-deep or over-long expressions
//! are rejected).
//!
//! Files, each importing only the ones listed before it: `value` (values and Java's comparison
//! rules), `ast` (the tree), `limits`, `lookup`, `lexer`, `build` (tree nodes with Java's
//! parse-time checks), `parser`, `eval`.

use std::fmt;

use crate::filter::error::FilterError;

mod ast;
mod build;
pub mod eval;
mod lexer;
mod limits;
mod lookup;
mod parser;
mod value;

pub use limits::{EXPRESSION_LENGTH_MAX_BYTES, NESTING_DEPTH_MAX, TREE_DEPTH_MAX};
pub use lookup::PropertyLookup;
pub use value::{EvalError, NumberKind};

/// A parsed and checked SQL92 expression, ready to evaluate against many messages.
#[derive(Clone)]
pub struct CompiledExpression {
    source: Box<str>,
    root: ast::Expr,
}

impl fmt::Debug for CompiledExpression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledExpression")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl CompiledExpression {
    /// Parses and checks `text`. Errors are [`FilterError::Parse`] (with the character offset
    /// of the offending token) or [`FilterError::ExpressionTooLong`].
    pub fn compile(text: &str) -> Result<CompiledExpression, FilterError> {
        let root = parser::parse(text)?;
        Ok(CompiledExpression {
            source: text.into(),
            root,
        })
    }

    /// Heap bytes of the text and the compiled tree.
    pub fn heap_bytes(&self) -> usize {
        self.source.len() + self.root.heap_bytes()
    }

    /// The text this was compiled from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Three-valued result: `Some(true)`, `Some(false)`, or `None` (SQL NULL, e.g. a comparison
    /// with an absent property). An error means Java would have thrown.
    pub fn evaluate(&self, properties: &dyn PropertyLookup) -> Result<Option<bool>, EvalError> {
        match eval::evaluate(&self.root, properties)? {
            value::Value::Null => Ok(None),
            value::Value::Bool(value) => Ok(Some(value)),
            // The parser only accepts boolean roots.
            _ => Err(EvalError::NotBoolean),
        }
    }

    /// Whether a message with these properties is delivered: only a definite TRUE matches
    /// (NULL and errors do not), as in Java's `ExpressionMessageFilter`.
    pub fn matches(&self, properties: &dyn PropertyLookup) -> bool {
        match self.evaluate(properties) {
            Ok(result) => result == Some(true),
            Err(error) => {
                tracing::debug!(expression = %self.source, %error, "SQL92 filter evaluation failed; not delivering");
                false
            }
        }
    }
}

#[cfg(test)]
mod tests;
