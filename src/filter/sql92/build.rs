//! Building tree nodes with Java's parse-time checks (`ComparisonExpression.create*`,
//! `LogicExpression.create*`, `UnaryExpression.create*`, `ConstantExpression.create*`), and
//! the depth bound [`TREE_DEPTH_MAX`]. [`super::parser`] reads the tokens and calls these.
//!
//! Every builder is `#[inline(never)]` so that its locals stay out of the parser's recursive
//! frames (see [`super::parser`]).

use std::borrow::Cow;
use std::cmp::Ordering;

use super::ast::{CompareOp, Expr, StringMatchOp};
use super::lexer::{Keyword, TokenKind};
use super::limits::TREE_DEPTH_MAX;
use super::value::{compare_values, Value};
use crate::filter::error::FilterError;

/// A subtree with its depth (for [`TREE_DEPTH_MAX`]) and where it starts (for errors).
pub(super) struct Node {
    pub(super) expr: Expr,
    pub(super) depth: usize,
    pub(super) position: usize,
}

pub(super) fn parse_error(position: usize, message: impl Into<String>) -> FilterError {
    FilterError::Parse {
        position,
        message: message.into(),
    }
}

/// Java `asBooleanExpression`: boolean expressions pass, a bare property is cast, anything else
/// is an error.
#[inline(never)]
pub(super) fn as_boolean(node: Node) -> Result<Node, FilterError> {
    if node.expr.is_boolean() {
        return Ok(node);
    }
    if matches!(node.expr, Expr::Property(_)) {
        return make(
            Expr::BooleanCast(Box::new(node.expr)),
            node.depth,
            node.position,
        );
    }
    Err(parse_error(
        node.position,
        format!("{} does not produce a boolean value", node.expr.describe()),
    ))
}

/// Wraps `expr` whose deepest child has depth `children_depth`, enforcing [`TREE_DEPTH_MAX`].
#[inline(never)]
pub(super) fn make(
    expr: Expr,
    children_depth: usize,
    position: usize,
) -> Result<Node, FilterError> {
    let depth = children_depth + 1;
    if depth > TREE_DEPTH_MAX {
        return Err(parse_error(
            position,
            format!("expression tree is deeper than {TREE_DEPTH_MAX} levels"),
        ));
    }
    Ok(Node {
        expr,
        depth,
        position,
    })
}

/// Java `checkLessThanOperand`: only numbers and non-boolean expressions can be ordered.
#[inline(never)]
pub(super) fn check_orderable(
    node: &Node,
    op: &str,
    op_position: usize,
) -> Result<(), FilterError> {
    let orderable = match &node.expr {
        Expr::Constant(value) => value.is_number(),
        expr => !expr.is_boolean(),
    };
    if orderable {
        Ok(())
    } else {
        Err(parse_error(
            op_position,
            format!(
                "{} cannot be compared with '{op}': only numbers can be ordered",
                node.expr.describe()
            ),
        ))
    }
}

#[inline(never)]
pub(super) fn compare_node(
    op: CompareOp,
    left: Node,
    right: Node,
    op_position: usize,
) -> Result<Node, FilterError> {
    check_orderable(&left, op.symbol(), op_position)?;
    check_orderable(&right, op.symbol(), op_position)?;
    let depth = left.depth.max(right.depth);
    let position = left.position;
    make(
        Expr::Compare(op, Box::new(left.expr), Box::new(right.expr)),
        depth,
        position,
    )
}

/// Java `createEqual`: a NULL literal cannot be an operand (use IS NULL), and a boolean literal
/// on the left cannot be compared with a non-boolean literal.
#[inline(never)]
pub(super) fn equal_node(left: Node, right: Node, op_position: usize) -> Result<Node, FilterError> {
    for node in [&left, &right] {
        if matches!(node.expr, Expr::Constant(Value::Null)) {
            return Err(parse_error(
                op_position,
                "NULL cannot be compared with '=' or '<>'; use IS NULL or IS NOT NULL",
            ));
        }
    }
    if let (Expr::Constant(_), Expr::Constant(_)) = (&left.expr, &right.expr) {
        if left.expr.is_boolean() && !right.expr.is_boolean() {
            return Err(parse_error(
                op_position,
                format!(
                    "{} cannot be compared with {}",
                    left.expr.describe(),
                    right.expr.describe()
                ),
            ));
        }
    }
    let depth = left.depth.max(right.depth);
    let position = left.position;
    make(
        Expr::Equal(Box::new(left.expr), Box::new(right.expr)),
        depth,
        position,
    )
}

#[inline(never)]
pub(super) fn not_node(operand: Node) -> Result<Node, FilterError> {
    let position = operand.position;
    make(Expr::Not(Box::new(operand.expr)), operand.depth, position)
}

#[inline(never)]
pub(super) fn decimal_literal(text: &str, position: usize) -> Result<Value<'static>, FilterError> {
    // Java `ConstantExpression.createFromDecimal`: strip the suffix, parse as a long (out of
    // range is an error), narrow to an int when it fits.
    let digits = text.strip_suffix(['l', 'L']).unwrap_or(text);
    let value: i64 = digits.parse().map_err(|_| {
        parse_error(
            position,
            format!("integer literal {text} does not fit in a 64-bit long"),
        )
    })?;
    Ok(match i32::try_from(value) {
        Ok(int) => Value::Int(int),
        Err(_) => Value::Long(value),
    })
}

#[inline(never)]
pub(super) fn float_literal(text: &str, position: usize) -> Result<Value<'static>, FilterError> {
    // The lexer only produces `[0-9]*(.[0-9]*)?(E[+-]?[0-9]+)?` here, which Rust parses exactly
    // (correctly rounded, as Java's `new Double(text)`).
    let value: f64 = text
        .parse()
        .map_err(|_| parse_error(position, format!("float literal {text} is not a number")))?;
    // Java `ConstantExpression.createFloat` rejects values above Double.MAX_VALUE (here:
    // infinity) and below Double.MIN_VALUE, the smallest positive double. Literals are never
    // negative (minus is an operator), so the second rule rejects exactly the literals that are
    // or round to zero, `0.0` included. We keep that so a subscription is accepted or refused
    // the same way by both brokers; `0` (an integer) works in its place.
    if value.is_infinite() {
        return Err(parse_error(
            position,
            format!("float literal {text} is larger than Double.MAX_VALUE"),
        ));
    }
    if value < f64::from_bits(1) {
        return Err(parse_error(
            position,
            format!(
                "float literal {text} is smaller than Double.MIN_VALUE (RocketMQ rejects zero \
                 float literals; write 0)"
            ),
        ));
    }
    Ok(Value::Double(value))
}

/// `left OR right` / `left AND right`, flattened into one n-ary node. Kleene AND and OR with
/// left-to-right short-circuit are associative (also in which operand's error surfaces
/// first), so flattening changes no result, and long chains add no depth.
#[inline(never)]
pub(super) fn logical_node(is_or: bool, left: Node, right: Node) -> Result<Node, FilterError> {
    let left = as_boolean(left)?;
    let right = as_boolean(right)?;
    let position = left.position;
    let mut expr = left.expr;
    match (&mut expr, is_or) {
        (Expr::Or(operands), true) | (Expr::And(operands), false) => {
            operands.push(right.expr);
            let depth = left.depth.max(right.depth + 1);
            // The node exists; only its depth may have grown.
            make(expr, depth - 1, position)
        }
        _ => {
            let operands = vec![expr, right.expr];
            let expr = if is_or {
                Expr::Or(operands)
            } else {
                Expr::And(operands)
            };
            make(expr, left.depth.max(right.depth), position)
        }
    }
}

#[inline(never)]
pub(super) fn string_match_node(
    left: Node,
    op: StringMatchOp,
    negated: bool,
    pattern: Cow<'_, str>,
) -> Result<Node, FilterError> {
    let position = left.position;
    make(
        Expr::StringMatch {
            op,
            negated,
            operand: Box::new(left.expr),
            pattern: pattern.into(),
        },
        left.depth,
        position,
    )
}

/// A literal, an identifier, or an error for any other token where an operand must start.
#[inline(never)]
pub(super) fn operand_token(kind: TokenKind<'_>, position: usize) -> Result<Node, FilterError> {
    let value = match kind {
        TokenKind::String(value) => Value::Str(Cow::Owned(value.into_owned())),
        TokenKind::Decimal(text) => decimal_literal(text, position)?,
        TokenKind::Float(text) => float_literal(text, position)?,
        TokenKind::Keyword(Keyword::True) => Value::Bool(true),
        TokenKind::Keyword(Keyword::False) => Value::Bool(false),
        TokenKind::Keyword(Keyword::Null) => Value::Null,
        TokenKind::Identifier(name) => {
            return Ok(Node {
                expr: Expr::Property(name.into()),
                depth: 1,
                position,
            })
        }
        other => {
            return Err(parse_error(
                position,
                format!("expected an expression, found {other}"),
            ))
        }
    };
    Ok(Node {
        expr: Expr::Constant(value),
        depth: 1,
        position,
    })
}

#[inline(never)]
pub(super) fn prefix_node(
    operator: &TokenKind<'_>,
    operand: Node,
    position: usize,
) -> Result<Node, FilterError> {
    match operator {
        // Unary plus is the identity (Java returns the operand itself).
        TokenKind::Plus => Ok(Node {
            position,
            ..operand
        }),
        TokenKind::Minus => make(
            Expr::Negate(Box::new(operand.expr)),
            operand.depth,
            position,
        ),
        _ => {
            let operand = as_boolean(operand)?;
            make(Expr::Not(Box::new(operand.expr)), operand.depth, position)
        }
    }
}

/// Java `createBetween` (bounds checked when both are literals, then `>=` AND `<=`) and
/// `createNotBetween` (`<` OR `>`, no bound check).
#[inline(never)]
pub(super) fn between_node(
    value: Node,
    low: Node,
    high: Node,
    negated: bool,
    op_position: usize,
) -> Result<Node, FilterError> {
    let position = value.position;
    let value_copy = Node {
        expr: value.expr.clone(),
        depth: value.depth,
        position: value.position,
    };
    if negated {
        let below = compare_node(CompareOp::Less, value, low, op_position)?;
        let above = compare_node(CompareOp::Greater, value_copy, high, op_position)?;
        let depth = below.depth.max(above.depth);
        return make(Expr::Or(vec![below.expr, above.expr]), depth, position);
    }
    if let (Expr::Constant(low_value), Expr::Constant(high_value)) = (&low.expr, &high.expr) {
        if matches!(low_value, Value::Null) || matches!(high_value, Value::Null) {
            return Err(parse_error(op_position, "BETWEEN bounds cannot be NULL"));
        }
        // Java compares `high` with `low` and refuses an empty range.
        match compare_values(high_value, low_value) {
            Ok(Ordering::Less) => {
                return Err(parse_error(
                    op_position,
                    format!(
                        "BETWEEN lower bound {} is greater than upper bound {}",
                        low_value.describe(),
                        high_value.describe()
                    ),
                ))
            }
            Ok(_) => {}
            Err(error) => {
                return Err(parse_error(
                    op_position,
                    format!("BETWEEN bounds cannot be compared: {error}"),
                ))
            }
        }
    }
    let at_least = compare_node(CompareOp::GreaterEqual, value, low, op_position)?;
    let at_most = compare_node(CompareOp::LessEqual, value_copy, high, op_position)?;
    let depth = at_least.depth.max(at_most.depth);
    make(
        Expr::And(vec![at_least.expr, at_most.expr]),
        depth,
        position,
    )
}
