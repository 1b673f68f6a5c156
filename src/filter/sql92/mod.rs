//! RocketMQ's SQL92 property filter: compile once ([`CompiledExpression::compile`]), evaluate
//! per message ([`CompiledExpression::matches`]).
//!
//! The language and its semantics are Java's (`filter/parser/SelectorParser.jj`,
//! `filter/expression/*`); see [`lexer`], [`parser`] and [`eval`] for the rules and the few
//! documented differences (all stricter: trailing tokens and over-deep or over-long expressions
//! are rejected).

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use super::FilterError;

pub mod eval;
mod lexer;
mod parser;

pub use eval::{EvalError, NumberKind};

/// Longest accepted expression text. Java has no limit; ours bounds compile time and the
/// compiled tree's memory. 64 KiB leaves room for long `IN` lists (thousands of keys) while a
/// subscription that long is already far outside normal use.
pub const MAX_EXPRESSION_LENGTH_BYTES: usize = 64 * 1024;

/// Deepest nesting of parentheses and prefix operators (`(`, `NOT`, `-`, `+`). Bounds the
/// parser's recursion (each level is a handful of stack frames). Hand-written filters rarely
/// nest beyond a few levels.
pub const MAX_NESTING_DEPTH: usize = 64;

/// Deepest compiled tree. Chains such as `a = b = c` or `a CONTAINS 'x' CONTAINS 'y'` grow the
/// tree without nesting, so this is bounded separately; it bounds the evaluator's recursion
/// (see the stack test below). `AND`/`OR` chains are flattened and do not add depth. Each
/// parenthesis level holds at most a logical node and a comparison, hence twice the nesting
/// limit plus room for the leaves.
pub const MAX_TREE_DEPTH: usize = 2 * MAX_NESTING_DEPTH + 8;

/// Read access to a message's properties by exact name.
pub trait PropertyLookup {
    /// The value of property `name`, or `None` when the message does not have it.
    fn get(&self, name: &str) -> Option<Cow<'_, str>>;
}

impl PropertyLookup for HashMap<String, String> {
    fn get(&self, name: &str) -> Option<Cow<'_, str>> {
        HashMap::get(self, name).map(|value| Cow::Borrowed(value.as_str()))
    }
}

/// A parsed and checked SQL92 expression, ready to evaluate against many messages.
#[derive(Clone)]
pub struct CompiledExpression {
    source: Box<str>,
    root: parser::Expr,
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

    /// The text this was compiled from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Three-valued result: `Some(true)`, `Some(false)`, or `None` (SQL NULL, e.g. a comparison
    /// with an absent property). An error means Java would have thrown.
    pub fn evaluate(&self, properties: &dyn PropertyLookup) -> Result<Option<bool>, EvalError> {
        match eval::evaluate(&self.root, properties)? {
            eval::Value::Null => Ok(None),
            eval::Value::Bool(value) => Ok(Some(value)),
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
