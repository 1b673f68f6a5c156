//! Values of the SQL92 filter and Java's rules for comparing them
//! (`filter/expression/ComparisonExpression.java`, `ConstantExpression.java`).
//!
//! Message properties are strings; literals are Integer (fits 32 bits), Long, Double, String,
//! Boolean or NULL. An absent property is NULL.
//!
//! Promotion (Java `__compare` with string conversion on): Integer→Long→Double; a string meeting
//! a number or boolean is converted to the other side's type with Java's `Integer.valueOf` /
//! `Long.valueOf` / `Double.valueOf` / `Boolean.valueOf`; a failed conversion is an error.
//! Otherwise incomparable types compare as "less than". A boolean on the left of a string raises
//! a `ClassCastException` in Java (it casts the wrong operand); that is
//! [`EvalError::BooleanWithString`] here.

use std::borrow::Cow;
use std::cmp::Ordering;

/// A value during evaluation. Literals are `Value<'static>` owning their strings; evaluation
/// borrows them and property values, so evaluating copies nothing but converted numbers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value<'a> {
    Null,
    Bool(bool),
    /// Java Integer.
    Int(i32),
    /// Java Long.
    Long(i64),
    /// Java Double.
    Double(f64),
    Str(Cow<'a, str>),
}

impl Value<'_> {
    pub(crate) fn is_number(&self) -> bool {
        matches!(self, Value::Int(_) | Value::Long(_) | Value::Double(_))
    }

    pub(super) fn borrowed(&self) -> Value<'_> {
        match self {
            Value::Null => Value::Null,
            Value::Bool(value) => Value::Bool(*value),
            Value::Int(value) => Value::Int(*value),
            Value::Long(value) => Value::Long(*value),
            Value::Double(value) => Value::Double(*value),
            Value::Str(value) => Value::Str(Cow::Borrowed(value)),
        }
    }

    pub(crate) fn describe(&self) -> String {
        match self {
            Value::Null => "NULL".to_string(),
            Value::Bool(true) => "TRUE".to_string(),
            Value::Bool(false) => "FALSE".to_string(),
            Value::Int(value) => value.to_string(),
            Value::Long(value) => value.to_string(),
            Value::Double(value) => value.to_string(),
            Value::Str(value) => format!("'{}'", value.replace('\'', "''")),
        }
    }
}

/// The Java type a string failed to convert to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumberKind {
    Integer,
    Long,
    Double,
}

/// Why an evaluation failed. Java raises an exception in each case; the filter then does not
/// deliver the message. Carries no copy of the value, so a failing filter costs no allocation
/// per message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    /// A string could not be converted for a comparison (Java `NumberFormatException`).
    #[error("a string value is not a valid {0:?}")]
    NumberFormat(NumberKind),
    /// A boolean on the left was compared with a string on the right (Java
    /// `ClassCastException` in `ComparisonExpression.__compare`).
    #[error("a boolean cannot be compared with a string on its right")]
    BooleanWithString,
    /// A logical operator got a non-boolean operand (Java `ClassCastException`). The parser
    /// never builds such a tree; kept as an error rather than a panic.
    #[error("a logical operator got a non-boolean operand")]
    NotBoolean,
    /// A comparison reached NULL after the NULL checks (a Java `NullPointerException`). The
    /// evaluator never does this; kept as an error rather than a panic.
    #[error("NULL reached a typed comparison")]
    NullOperand,
}

/// Java `Double.compareTo`: NaN is above everything and equal to itself, -0.0 < 0.0.
pub(super) fn java_double_compare(left: f64, right: f64) -> Ordering {
    if left < right {
        return Ordering::Less;
    }
    if left > right {
        return Ordering::Greater;
    }
    java_double_bits(left).cmp(&java_double_bits(right))
}

/// Java `Double.doubleToLongBits`: all NaNs collapse to one canonical NaN.
fn java_double_bits(value: f64) -> i64 {
    const CANONICAL_NAN_BITS: i64 = 0x7ff8_0000_0000_0000;
    if value.is_nan() {
        CANONICAL_NAN_BITS
    } else {
        // Reinterpretation, as Java does; the sign bit makes negative values compare lower.
        value.to_bits() as i64
    }
}

/// Java `Integer.valueOf(String)`. Only ASCII digits (Java also takes other Unicode decimal
/// digits; property values with those are vanishingly rare).
fn parse_java_int(text: &str) -> Result<i32, EvalError> {
    text.parse()
        .map_err(|_| EvalError::NumberFormat(NumberKind::Integer))
}

/// Java `Long.valueOf(String)`.
fn parse_java_long(text: &str) -> Result<i64, EvalError> {
    text.parse()
        .map_err(|_| EvalError::NumberFormat(NumberKind::Long))
}

/// Java `Double.valueOf(String)`: surrounding characters `<= ' '` are trimmed, an optional
/// sign, then `NaN`, `Infinity`, or a decimal number with optional exponent and an optional
/// `f`/`F`/`d`/`D` suffix. Hexadecimal floating-point strings (`0x1p3`) are not supported.
pub(crate) fn parse_java_double(text: &str) -> Result<f64, EvalError> {
    const ERROR: EvalError = EvalError::NumberFormat(NumberKind::Double);
    let trimmed = text.trim_matches(|c: char| c <= ' ');
    let (negative, unsigned) = match trimmed.as_bytes().first() {
        Some(b'-') => (true, &trimmed[1..]),
        Some(b'+') => (false, &trimmed[1..]),
        _ => (false, trimmed),
    };
    let magnitude = match unsigned {
        "NaN" => f64::NAN,
        "Infinity" => f64::INFINITY,
        _ => {
            let number = unsigned
                .strip_suffix(['f', 'F', 'd', 'D'])
                .unwrap_or(unsigned);
            if !is_decimal_float(number) {
                return Err(ERROR);
            }
            number.parse::<f64>().map_err(|_| ERROR)?
        }
    };
    Ok(if negative { -magnitude } else { magnitude })
}

/// `[0-9]*(\.[0-9]*)?([eE][+-]?[0-9]+)?` with at least one mantissa digit.
fn is_decimal_float(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut index = 0;
    let mut mantissa_digits = 0;
    while index < bytes.len() && bytes[index].is_ascii_digit() {
        index += 1;
        mantissa_digits += 1;
    }
    if index < bytes.len() && bytes[index] == b'.' {
        index += 1;
        while index < bytes.len() && bytes[index].is_ascii_digit() {
            index += 1;
            mantissa_digits += 1;
        }
    }
    if mantissa_digits == 0 {
        return false;
    }
    if index < bytes.len() && matches!(bytes[index], b'e' | b'E') {
        index += 1;
        if index < bytes.len() && matches!(bytes[index], b'+' | b'-') {
            index += 1;
        }
        let exponent_start = index;
        while index < bytes.len() && bytes[index].is_ascii_digit() {
            index += 1;
        }
        if index == exponent_start {
            return false;
        }
    }
    index == bytes.len()
}

/// Java `Boolean.valueOf(String)`.
fn parse_java_boolean(text: &str) -> bool {
    text.eq_ignore_ascii_case("true")
}

/// Java `Object.equals` between two non-null values: same type and same value.
pub(super) fn java_equals(left: &Value<'_>, right: &Value<'_>) -> bool {
    match (left, right) {
        (Value::Bool(l), Value::Bool(r)) => l == r,
        (Value::Int(l), Value::Int(r)) => l == r,
        (Value::Long(l), Value::Long(r)) => l == r,
        (Value::Double(l), Value::Double(r)) => java_double_bits(*l) == java_double_bits(*r),
        (Value::Str(l), Value::Str(r)) => l == r,
        _ => false,
    }
}

/// Java `ComparisonExpression.__compare(left, right, true)` for two non-null values: convert
/// the operands to a common type, then `compareTo`. "Incomparable" is `Less` (Java's -1).
pub(crate) fn compare_values(left: &Value<'_>, right: &Value<'_>) -> Result<Ordering, EvalError> {
    use Value::{Bool, Double, Int, Long, Null, Str};
    Ok(match (left, right) {
        (Null, _) | (_, Null) => return Err(EvalError::NullOperand),
        (Bool(l), Bool(r)) => l.cmp(r),
        (Int(l), Int(r)) => l.cmp(r),
        (Long(l), Long(r)) => l.cmp(r),
        (Double(l), Double(r)) => java_double_compare(*l, *r),
        // Java `String.compareTo` orders by UTF-16 code units.
        (Str(l), Str(r)) => l.encode_utf16().cmp(r.encode_utf16()),

        (Bool(_), Str(_)) => return Err(EvalError::BooleanWithString),
        (Bool(_), _) => Ordering::Less,

        (Int(l), Long(r)) => i64::from(*l).cmp(r),
        (Int(l), Double(r)) => java_double_compare(f64::from(*l), *r),
        (Int(l), Str(r)) => l.cmp(&parse_java_int(r)?),
        (Int(_), Bool(_)) => Ordering::Less,

        (Long(l), Int(r)) => l.cmp(&i64::from(*r)),
        // Java widens long to double the same (possibly lossy) way.
        (Long(l), Double(r)) => java_double_compare(*l as f64, *r),
        (Long(l), Str(r)) => l.cmp(&parse_java_long(r)?),
        (Long(_), Bool(_)) => Ordering::Less,

        (Double(l), Int(r)) => java_double_compare(*l, f64::from(*r)),
        (Double(l), Long(r)) => java_double_compare(*l, *r as f64),
        (Double(l), Str(r)) => java_double_compare(*l, parse_java_double(r)?),
        (Double(_), Bool(_)) => Ordering::Less,

        (Str(l), Bool(r)) => parse_java_boolean(l).cmp(r),
        (Str(l), Int(r)) => parse_java_int(l)?.cmp(r),
        (Str(l), Long(r)) => parse_java_long(l)?.cmp(r),
        (Str(l), Double(r)) => java_double_compare(parse_java_double(l)?, *r),
    })
}
