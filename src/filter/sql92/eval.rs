//! Evaluation of a compiled SQL92 expression against a message's properties, with Java's
//! three-valued logic (`filter/expression/ComparisonExpression.java`, `LogicExpression.java`,
//! `UnaryExpression.java`). Values and the type promotion of comparisons are in
//! [`super::value`].
//!
//! - `=`: if exactly one side is NULL the result is NULL when the *left* side is NULL and FALSE
//!   when the right side is — Java's asymmetry, kept (`'x' <> missing` is TRUE,
//!   `missing <> 'x'` is NULL); two NULLs are equal. Otherwise Java `equals` (same type, same
//!   value), then a comparison after type promotion.
//! - `>`, `>=`, `<`, `<=`: NULL if either side is NULL (the right side is then not evaluated);
//!   two strings are both parsed as doubles (failure is an error).
//! - AND / OR / NOT are Kleene logic with left-to-right short-circuit.
//! - `[NOT] CONTAINS | STARTSWITH | ENDSWITH`: FALSE for an empty pattern or a non-string (or
//!   NULL) operand, for the NOT forms too.
//! - `[NOT] IN`: NULL for an absent property.
//!
//! An error aborts the whole evaluation, exactly as the exception does in Java (so
//! `a > 5 OR TRUE` with `a = 'abc'` is an error, not TRUE); the broker's filter treats an
//! error as "no match".

use std::cmp::Ordering;

use super::ast::{CompareOp, Expr, StringMatchOp};
use super::lookup::PropertyLookup;
use super::value::{compare_values, java_double_compare, java_equals, parse_java_double, Value};
pub use super::value::{EvalError, NumberKind};

/// Java's `(Boolean) value` cast inside AND/OR/NOT.
fn as_bool(value: Value<'_>) -> Result<Option<bool>, EvalError> {
    match value {
        Value::Null => Ok(None),
        Value::Bool(value) => Ok(Some(value)),
        _ => Err(EvalError::NotBoolean),
    }
}

fn from_bool(value: Option<bool>) -> Value<'static> {
    value.map_or(Value::Null, Value::Bool)
}

/// Evaluates `expr`. Recursion depth is bounded by [`super::TREE_DEPTH_MAX`]; each variant
/// has its own function so the frames on the recursive path stay small.
pub(crate) fn evaluate<'a>(
    expr: &'a Expr,
    properties: &'a dyn PropertyLookup,
) -> Result<Value<'a>, EvalError> {
    match expr {
        Expr::Constant(value) => Ok(value.borrowed()),
        Expr::Property(name) => Ok(properties.get(name).map_or(Value::Null, Value::Str)),
        Expr::Negate(operand) => negate(evaluate(operand, properties)?),
        Expr::Not(operand) => Ok(from_bool(
            as_bool(evaluate(operand, properties)?)?.map(|b| !b),
        )),
        Expr::BooleanCast(operand) => Ok(boolean_cast(evaluate(operand, properties)?)),
        Expr::And(operands) => logical(operands, false, properties),
        Expr::Or(operands) => logical(operands, true, properties),
        Expr::Equal(left, right) => equal(left, right, properties),
        Expr::Compare(op, left, right) => ordering(*op, left, right, properties),
        Expr::StringMatch {
            op,
            negated,
            operand,
            pattern,
        } => string_match(*op, *negated, operand, pattern, properties),
        Expr::In {
            property,
            values,
            negated,
        } => Ok(match properties.get(property) {
            None => Value::Null,
            Some(value) => Value::Bool(values.contains(value.as_ref()) != *negated),
        }),
    }
}

/// Java `UnaryExpression.createNegate`: numbers are negated (ints and longs wrap, as
/// `-Integer.MIN_VALUE` does in Java), anything else is NULL.
fn negate(value: Value<'_>) -> Result<Value<'_>, EvalError> {
    Ok(match value {
        Value::Int(value) => Value::Int(value.wrapping_neg()),
        Value::Long(value) => Value::Long(value.wrapping_neg()),
        Value::Double(value) => Value::Double(-value),
        _ => Value::Null,
    })
}

/// Java `UnaryExpression.createBooleanCast`.
fn boolean_cast(value: Value<'_>) -> Value<'static> {
    match value {
        Value::Null => Value::Null,
        Value::Bool(value) => Value::Bool(value),
        _ => Value::Bool(false),
    }
}

/// Kleene OR (`is_or`) or AND, left to right, stopping at the deciding value.
fn logical<'a>(
    operands: &'a [Expr],
    is_or: bool,
    properties: &'a dyn PropertyLookup,
) -> Result<Value<'a>, EvalError> {
    let mut saw_null = false;
    for operand in operands {
        match as_bool(evaluate(operand, properties)?)? {
            Some(value) if value == is_or => return Ok(Value::Bool(is_or)),
            Some(_) => {}
            None => saw_null = true,
        }
    }
    Ok(if saw_null {
        Value::Null
    } else {
        Value::Bool(!is_or)
    })
}

fn equal<'a>(
    left: &'a Expr,
    right: &'a Expr,
    properties: &'a dyn PropertyLookup,
) -> Result<Value<'a>, EvalError> {
    let left = evaluate(left, properties)?;
    let right = evaluate(right, properties)?;
    Ok(match (&left, &right) {
        (Value::Null, Value::Null) => Value::Bool(true),
        (Value::Null, _) => Value::Null,
        (_, Value::Null) => Value::Bool(false),
        _ => Value::Bool(
            java_equals(&left, &right) || compare_values(&left, &right)? == Ordering::Equal,
        ),
    })
}

fn ordering<'a>(
    op: CompareOp,
    left: &'a Expr,
    right: &'a Expr,
    properties: &'a dyn PropertyLookup,
) -> Result<Value<'a>, EvalError> {
    let left = evaluate(left, properties)?;
    if matches!(left, Value::Null) {
        return Ok(Value::Null);
    }
    let right = evaluate(right, properties)?;
    let ordering = match (&left, &right) {
        (_, Value::Null) => return Ok(Value::Null),
        (Value::Str(l), Value::Str(r)) => {
            java_double_compare(parse_java_double(l)?, parse_java_double(r)?)
        }
        _ => compare_values(&left, &right)?,
    };
    Ok(Value::Bool(op.holds(ordering)))
}

fn string_match<'a>(
    op: StringMatchOp,
    negated: bool,
    operand: &'a Expr,
    pattern: &str,
    properties: &'a dyn PropertyLookup,
) -> Result<Value<'a>, EvalError> {
    if pattern.is_empty() {
        return Ok(Value::Bool(false));
    }
    Ok(match evaluate(operand, properties)? {
        Value::Str(text) => {
            let found = match op {
                StringMatchOp::Contains => text.contains(pattern),
                StringMatchOp::StartsWith => text.starts_with(pattern),
                StringMatchOp::EndsWith => text.ends_with(pattern),
            };
            Value::Bool(found != negated)
        }
        _ => Value::Bool(false),
    })
}
