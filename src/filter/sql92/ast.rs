//! The compiled expression tree that [`super::parser`] builds and [`super::eval`] walks.

use std::cmp::Ordering;
use std::collections::HashSet;

use super::value::Value;

/// `>`, `>=`, `<`, `<=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CompareOp {
    Greater,
    GreaterEqual,
    Less,
    LessEqual,
}

impl CompareOp {
    pub(super) fn symbol(self) -> &'static str {
        match self {
            CompareOp::Greater => ">",
            CompareOp::GreaterEqual => ">=",
            CompareOp::Less => "<",
            CompareOp::LessEqual => "<=",
        }
    }

    /// Whether `left op right` holds given `left.compareTo(right)`.
    pub(crate) fn holds(self, ordering: Ordering) -> bool {
        match self {
            CompareOp::Greater => ordering == Ordering::Greater,
            CompareOp::GreaterEqual => ordering != Ordering::Less,
            CompareOp::Less => ordering == Ordering::Less,
            CompareOp::LessEqual => ordering != Ordering::Greater,
        }
    }
}

/// `CONTAINS`, `STARTSWITH`, `ENDSWITH`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StringMatchOp {
    Contains,
    StartsWith,
    EndsWith,
}

/// A compiled expression tree.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expr {
    /// A literal. `TRUE`, `FALSE` and `NULL` are boolean expressions; numbers and strings are not.
    Constant(Value<'static>),
    /// A message property, looked up by its exact (case-sensitive) name.
    Property(Box<str>),
    /// Unary minus: negates a number, yields NULL for anything else.
    Negate(Box<Expr>),
    /// Three-valued NOT.
    Not(Box<Expr>),
    /// A property used where a boolean is needed: NULL if absent, its value if it is a
    /// Boolean, FALSE otherwise (Java `UnaryExpression.createBooleanCast`).
    BooleanCast(Box<Expr>),
    /// Three-valued AND of two or more operands, evaluated left to right, stopping at FALSE.
    And(Vec<Expr>),
    /// Three-valued OR of two or more operands, evaluated left to right, stopping at TRUE.
    Or(Vec<Expr>),
    /// `=` (and, wrapped in `Not`, `<>`; against `Constant(Null)`, `IS [NOT] NULL`).
    Equal(Box<Expr>, Box<Expr>),
    /// `>`, `>=`, `<`, `<=` (and the halves of `[NOT] BETWEEN`).
    Compare(CompareOp, Box<Expr>, Box<Expr>),
    /// `[NOT] CONTAINS | STARTSWITH | ENDSWITH 'pattern'`.
    StringMatch {
        op: StringMatchOp,
        negated: bool,
        operand: Box<Expr>,
        pattern: Box<str>,
    },
    /// `property [NOT] IN ('a', 'b', …)`.
    In {
        property: Box<str>,
        values: HashSet<Box<str>>,
        negated: bool,
    },
}

impl Expr {
    /// Java `instanceof BooleanExpression`.
    pub(super) fn is_boolean(&self) -> bool {
        match self {
            Expr::Constant(value) => matches!(value, Value::Null | Value::Bool(_)),
            Expr::Property(_) | Expr::Negate(_) => false,
            Expr::Not(_)
            | Expr::BooleanCast(_)
            | Expr::And(_)
            | Expr::Or(_)
            | Expr::Equal(..)
            | Expr::Compare(..)
            | Expr::StringMatch { .. }
            | Expr::In { .. } => true,
        }
    }

    /// Heap bytes below this node: boxed children, operand lists, names, patterns, `IN`
    /// sets and string constants (what a filter cache must account).
    pub(super) fn heap_bytes(&self) -> usize {
        const NODE: usize = std::mem::size_of::<Expr>();
        let boxed = |e: &Expr| NODE + e.heap_bytes();
        match self {
            Expr::Constant(Value::Str(text)) => match text {
                std::borrow::Cow::Owned(owned) => owned.capacity(),
                std::borrow::Cow::Borrowed(_) => 0,
            },
            Expr::Constant(_) => 0,
            Expr::Property(name) => name.len(),
            Expr::Negate(e) | Expr::Not(e) | Expr::BooleanCast(e) => boxed(e),
            Expr::And(operands) | Expr::Or(operands) => {
                operands.capacity() * NODE + operands.iter().map(Expr::heap_bytes).sum::<usize>()
            }
            Expr::Equal(left, right) | Expr::Compare(_, left, right) => boxed(left) + boxed(right),
            Expr::StringMatch {
                operand, pattern, ..
            } => boxed(operand) + pattern.len(),
            Expr::In {
                property, values, ..
            } => {
                let slots = values.capacity() * (std::mem::size_of::<Box<str>>() + 1);
                property.len() + slots + values.iter().map(|v| v.len()).sum::<usize>()
            }
        }
    }

    pub(super) fn describe(&self) -> String {
        match self {
            Expr::Constant(value) => value.describe(),
            Expr::Property(name) => format!("property {name}"),
            _ => "this expression".to_string(),
        }
    }
}
