//! Parser and evaluator tests. Expected results follow Java's `SelectorParser` and
//! `filter/expression/*` (several cases are taken from Java's `ExpressionTest`/`ParserTest`).

use std::cmp::Ordering;
use std::collections::HashMap;

use proptest::prelude::*;

use super::value::{compare_values, parse_java_double, Value};
use super::*;

fn props(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect()
}

fn compile(text: &str) -> CompiledExpression {
    CompiledExpression::compile(text).unwrap_or_else(|error| panic!("{text:?}: {error}"))
}

fn eval(text: &str, pairs: &[(&str, &str)]) -> Result<Option<bool>, EvalError> {
    compile(text).evaluate(&props(pairs))
}

/// Asserts the three-valued result (`Ok`) of each expression.
fn check(pairs: &[(&str, &str)], cases: &[(&str, Option<bool>)]) {
    let properties = props(pairs);
    for (text, expected) in cases {
        let compiled = compile(text);
        assert_eq!(
            compiled.evaluate(&properties),
            Ok(*expected),
            "{text:?} with {pairs:?}"
        );
        assert_eq!(compiled.matches(&properties), *expected == Some(true));
    }
}

fn parse_error(text: &str) -> (usize, String) {
    match CompiledExpression::compile(text) {
        Err(FilterError::Parse { position, message }) => (position, message),
        other => panic!("{text:?}: expected a parse error, got {other:?}"),
    }
}

const T: Option<bool> = Some(true);
const F: Option<bool> = Some(false);
const N: Option<bool> = None;

#[test]
fn comparison_operators_on_numbers() {
    let p = [("a", "5")];
    check(
        &p,
        &[
            ("a = 5", T),
            ("a = 6", F),
            ("a <> 5", F),
            ("a <> 6", T),
            ("a > 4", T),
            ("a > 5", F),
            ("a >= 5", T),
            ("a >= 6", F),
            ("a < 6", T),
            ("a < 5", F),
            ("a <= 5", T),
            ("a <= 4", F),
            ("5 = a", T),
            ("6 > a", T),
            ("4 >= a", F),
        ],
    );
}

#[test]
fn string_equality_and_escapes() {
    check(
        &[("a", "hello"), ("q", "it's"), ("TAGS", "''tag''")],
        &[
            ("a = 'hello'", T),
            ("a = 'Hello'", F),
            ("a <> 'hello'", F),
            ("'hello' = a", T),
            ("q = 'it''s'", T),
            ("TAGS is not null and TAGS='''''tag'''''", T),
            ("a is not null and a='hello'", T),
        ],
    );
}

#[test]
fn is_null_and_is_not_null() {
    check(
        &[("a", "1")],
        &[
            ("a IS NULL", F),
            ("a IS NOT NULL", T),
            ("b IS NULL", T),
            ("b IS NOT NULL", F),
            ("NULL IS NULL", T),
            ("1 IS NULL", F),
            ("(a = 1) IS NOT NULL", T),
            ("(b = 1) IS NULL", T),
        ],
    );
}

#[test]
fn between_and_not_between() {
    let cases = [
        ("a BETWEEN 2 AND 10", "2", T),
        ("a BETWEEN 2 AND 10", "10", T),
        ("a BETWEEN 2 AND 10", "3", T),
        ("a BETWEEN 2 AND 10", "1", F),
        ("a BETWEEN 2 AND 10", "11", F),
        ("a NOT BETWEEN 2 AND 10", "1", T),
        ("a NOT BETWEEN 2 AND 10", "11", T),
        ("a NOT BETWEEN 2 AND 10", "2", F),
        ("a NOT BETWEEN 2 AND 10", "10", F),
        ("a BETWEEN -5 AND 5", "-5", T),
        ("a BETWEEN -5 AND 5", "-6", F),
        ("a BETWEEN 1.5 AND 2.5", "2", F), // "2" vs Double literal: 2.0 is in range…
        ("a BETWEEN 1 AND 1", "1", T),
    ];
    for (text, value, expected) in cases {
        let expected = if value == "2" && text.contains("1.5") {
            T // … so it matches (the comment above is the point of this case).
        } else {
            expected
        };
        assert_eq!(
            eval(text, &[("a", value)]),
            Ok(expected),
            "{text} with a={value}"
        );
    }
    // A negated bound is not a constant for Java's order check, so this is accepted and
    // matches nothing.
    assert_eq!(eval("a BETWEEN 5 AND -5", &[("a", "0")]), Ok(F));
    // Absent property.
    check(
        &[],
        &[("a BETWEEN 1 AND 2", N), ("a NOT BETWEEN 1 AND 2", N)],
    );
}

#[test]
fn in_and_not_in() {
    let in_list = "a in ('3', '4', '5')";
    let not_in = "a not in ('3', '4', '5')";
    for value in ["3", "4", "5"] {
        check(&[("a", value)], &[(in_list, T), (not_in, F)]);
    }
    check(&[("a", "8")], &[(in_list, F), (not_in, T)]);
    check(&[], &[(in_list, N), (not_in, N)]);
    // Strings only, exact match.
    check(&[("a", "3.0")], &[(in_list, F)]);
    check(
        &[("a", "x")],
        &[("a IN ('x', 'x')", T), ("(a) IN ('x')", T)],
    );
    // A long list.
    let long: Vec<String> = (0..500).map(|i| format!("'k{i}'")).collect();
    let text = format!("a IN ({})", long.join(", "));
    assert_eq!(eval(&text, &[("a", "k499")]), Ok(T));
    assert_eq!(eval(&text, &[("a", "k500")]), Ok(F));
}

#[test]
fn contains_startswith_endswith() {
    check(
        &[("value", "axb")],
        &[
            ("value contains 'x'", T),
            ("value startswith 'ax'", T),
            ("value endswith 'xb'", T),
            ("value not contains 'x'", F),
            ("value not startswith 'ax'", F),
            ("value not endswith 'xb'", F),
            ("value contains 'u'", F),
            ("value not contains 'u'", T),
            ("value STARTSWITH 'b'", F),
            ("value NOT ENDSWITH 'a'", T),
            // Empty pattern: FALSE for both forms.
            ("value contains ''", F),
            ("value not contains ''", F),
            ("value startswith ''", F),
            ("value not endswith ''", F),
            ("'axb' contains 'x'", T),
            ("' ' contains ' '", T),
            ("' ' not startswith ' '", F),
            ("'s' endswith '\\'", F),
            // Absent property or non-string operand: FALSE, for the NOT forms too.
            ("missing contains 'x'", F),
            ("missing not contains 'x'", F),
            ("missing not endswith 'x'", F),
            ("-value contains 'x'", F),
            ("(value = 'axb') not contains 'x'", F),
            // Chained: the second applies to the boolean result, which is not a string.
            ("value contains 'a' contains 'b'", F),
        ],
    );
    // Unicode: code-point, not byte, semantics are irrelevant for containment; check anyway.
    check(
        &[("v", "héllo😀")],
        &[("v contains 'é'", T), ("v endswith '😀'", T)],
    );
}

#[test]
fn and_or_not_three_valued_logic() {
    // t = TRUE, f = FALSE, n = NULL (comparison with an absent property).
    let p = [("t", "1"), ("f", "0")];
    let truth = |name: &str| match name {
        "t" => "t = 1",
        "f" => "f = 1",
        _ => "n = 1",
    };
    let kleene_and = |a: Option<bool>, b: Option<bool>| match (a, b) {
        (Some(false), _) | (_, Some(false)) => F,
        (Some(true), Some(true)) => T,
        _ => N,
    };
    let kleene_or = |a: Option<bool>, b: Option<bool>| match (a, b) {
        (Some(true), _) | (_, Some(true)) => T,
        (Some(false), Some(false)) => F,
        _ => N,
    };
    let value = |name: &str| match name {
        "t" => T,
        "f" => F,
        _ => N,
    };
    for a in ["t", "f", "n"] {
        assert_eq!(
            eval(&format!("NOT ({})", truth(a)), &p),
            Ok(value(a).map(|b| !b))
        );
        for b in ["t", "f", "n"] {
            let and = format!("{} AND {}", truth(a), truth(b));
            let or = format!("{} OR {}", truth(a), truth(b));
            assert_eq!(eval(&and, &p), Ok(kleene_and(value(a), value(b))), "{and}");
            assert_eq!(eval(&or, &p), Ok(kleene_or(value(a), value(b))), "{or}");
        }
    }
    check(
        &[],
        &[
            ("TRUE", T),
            ("FALSE", F),
            ("NULL", N),
            ("NOT TRUE", F),
            ("NOT NULL", N),
            ("TRUE AND TRUE AND TRUE AND NULL", N),
            ("NULL OR FALSE OR TRUE", T),
        ],
    );
}

#[test]
fn precedence_not_binds_tighter_than_and_than_or() {
    let p = [("a", "1"), ("b", "0"), ("c", "0")];
    check(
        &p,
        &[
            // OR(a=1, AND(b=1, c=1)); (a=1 OR b=1) AND c=1 would be FALSE.
            ("a = 1 OR b = 1 AND c = 1", T),
            ("b = 1 AND c = 1 OR a = 1", T),
            ("(a = 1 OR b = 1) AND c = 1", F),
            // (NOT FALSE) AND FALSE; NOT (FALSE AND FALSE) would be TRUE.
            ("NOT FALSE AND FALSE", F),
            ("NOT (FALSE AND FALSE)", T),
            ("NOT FALSE OR TRUE", T),
            ("NOT NOT TRUE", T),
            ("NOT (a = 2)", T),
            // AND(a = 1, (NOT b) = 1) OR FALSE: `NOT b` is TRUE (b is not a Boolean), and a
            // Boolean against a number compares as "less", so `= 1` is FALSE.
            ("a = 1 AND NOT b = 1 OR FALSE", F),
        ],
    );
    // `NOT a = 'x'` is `(NOT a) = 'x'`: a Boolean compared with a string, which Java rejects
    // at run time (ClassCastException) whatever `a` is; so it never matches.
    assert_eq!(
        eval("NOT a = 'x'", &[("a", "y")]),
        Err(EvalError::BooleanWithString)
    );
    assert_eq!(eval("NOT a = 'x'", &[]), Ok(N));
    assert_eq!(eval("NOT (a = 'x')", &[("a", "y")]), Ok(T));
    // Comparisons bind tighter than AND: `a BETWEEN 1 AND 2 AND b = 0`.
    check(
        &p,
        &[
            ("a BETWEEN 1 AND 2 AND b = 0", T),
            ("a BETWEEN 2 AND 3 OR b = 0", T),
        ],
    );
}

#[test]
fn keywords_are_case_insensitive_properties_are_not() {
    check(
        &[("a", "3"), ("b", "5"), ("c", "6"), ("d", "1")],
        &[
            ("a=3 and b<>4 And c>5 AND d<=4", T),
            ("a=3  and    b<>4 And c>5 AND d<=4", T),
            ("a=4 or b<>4 Or c>5 OR d<=4", T),
            ("a Is Not Null aNd b bEtWeEn 1 AnD 9 oR fAlSe", T),
            ("A = 3", N),
            ("TRUE and true and True", T),
        ],
    );
}

#[test]
fn comments_are_ignored() {
    check(
        &[("a", "1")],
        &[
            ("a = 1 -- the rest is a comment AND FALSE", T),
            ("a = 1 -- comment\nAND FALSE", F),
            (
                "/* leading */ a /* mid */ = /**/ 1 /* trailing * / ** */",
                T,
            ),
        ],
    );
}

#[test]
fn null_semantics_match_java() {
    check(
        &[("a", "x")],
        &[
            // A comparison with an absent property is NULL, so not a match.
            ("missing = 'x'", N),
            ("missing <> 'x'", N),
            ("missing > 1", N),
            ("1 < missing", N),
            // Java's equality is asymmetric: a NULL right side makes it FALSE, not NULL.
            ("'x' = missing", F),
            ("'x' <> missing", T),
            ("a = missing", F),
            ("a <> missing", T),
            // Two absent properties are equal.
            ("missing = other", T),
            ("missing <> other", F),
            // A bare property is TRUE only if its value is a Boolean, which strings never are.
            ("a", F),
            ("missing", N),
            ("NOT a", T),
            ("a OR TRUE", T),
            // Negating a non-number yields NULL.
            ("-a = 1", N),
            ("-a IS NULL", T),
        ],
    );
    check(&[("flag", "true")], &[("flag", F), ("flag = TRUE", T)]);
}

#[test]
fn string_properties_convert_to_the_literal_type() {
    check(
        &[
            ("i", "42"),
            ("l", "3000000000"),
            ("d", "1.5"),
            ("n", "-7"),
            ("b", "TRUE"),
        ],
        &[
            ("i = 42", T),
            ("i = 42L", T),
            ("i = 42.0", T),
            ("i > 41.5", T),
            ("l = 3000000000", T),
            ("l > 2999999999", T),
            ("d = 1.5", T),
            ("d > 1.4", T),
            ("d < 1.6", T),
            ("n = -7", T),
            ("n < -6", T),
            ("n = - 7", T),
            ("n = -(7)", T),
            ("b = TRUE", T),
            ("b = FALSE", F),
            ("b <> FALSE", T),
            ("'x' = TRUE", F),
        ],
    );
    check(&[("b", "yes")], &[("b = TRUE", F), ("b = FALSE", T)]);
    // Two strings under an ordering operator are compared as doubles, not lexicographically.
    check(
        &[("a", "10"), ("b", "9"), ("c", "3.14"), ("e", "3.14")],
        &[
            ("a > b", T),
            ("a < b", F),
            ("c = e", T),
            ("c <> e", F),
            ("c >= e", T),
            // `=` on two strings is string equality: "10" and "10.0" differ.
            ("a = '10.0'", F),
        ],
    );
    // Java `Double.valueOf` rules for the string side.
    check(
        &[
            ("a", " 1.5 "),
            ("f", "1.5f"),
            ("x", "2e3"),
            ("nan", "NaN"),
            ("inf", "-Infinity"),
        ],
        &[
            ("a > 1.0", T),
            ("f > 1.0", T),
            ("x = 2000.0", T),
            ("nan > 1.0", T), // Java's Double.compareTo puts NaN above everything.
            ("nan = nan", T),
            ("inf < -1.0", T),
        ],
    );
}

#[test]
fn conversion_failures_are_errors_that_abort_the_whole_expression() {
    let p = [
        ("a", "abc"),
        ("d", "3.5"),
        ("big", "3000000000"),
        ("inf", "inf"),
    ];
    let cases: [(&str, EvalError); 14] = [
        ("a = 5", EvalError::NumberFormat(NumberKind::Integer)),
        ("a > 5", EvalError::NumberFormat(NumberKind::Integer)),
        ("a > 5L", EvalError::NumberFormat(NumberKind::Integer)), // 5L fits an Integer
        ("a > 3000000000", EvalError::NumberFormat(NumberKind::Long)),
        ("a > 1.5", EvalError::NumberFormat(NumberKind::Double)),
        ("d = 3", EvalError::NumberFormat(NumberKind::Integer)),
        ("big = 1", EvalError::NumberFormat(NumberKind::Integer)),
        // An Integer literal makes Java parse the property with Integer.valueOf, so a value
        // beyond 32 bits or with a fraction fails even where the comparison is obvious.
        (
            "big > 2147483647",
            EvalError::NumberFormat(NumberKind::Integer),
        ),
        ("d > 1", EvalError::NumberFormat(NumberKind::Integer)),
        ("inf > 1.0", EvalError::NumberFormat(NumberKind::Double)),
        ("a > d", EvalError::NumberFormat(NumberKind::Double)),
        (
            "a BETWEEN 1 AND 2",
            EvalError::NumberFormat(NumberKind::Integer),
        ),
        // The error is not local: Java's exception escapes the OR.
        (
            "a = 5 OR TRUE",
            EvalError::NumberFormat(NumberKind::Integer),
        ),
        // Java casts the wrong operand when a boolean meets a string on its right.
        ("TRUE = a", EvalError::BooleanWithString),
    ];
    for (text, error) in cases {
        assert_eq!(eval(text, &p), Err(error), "{text}");
        assert!(!compile(text).matches(&props(&p)), "{text}");
    }
    // Short-circuiting before the failing operand avoids the error, as in Java.
    check(
        &p,
        &[
            ("TRUE OR a = 5", T),
            ("FALSE AND a = 5", F),
            ("a contains '' ", F),
        ],
    );
    // Java's own cases: non-numeric BETWEEN bounds / values.
    assert!(eval(
        "a between up and low",
        &[("a", "3.14"), ("up", "up"), ("low", "low")]
    )
    .is_err());
    assert_eq!(eval("a between up and low", &[("a", "3.14")]), Ok(N));
    assert!(eval(
        "key is not null and key between 0 and 100",
        &[("key", "con")]
    )
    .is_err());
    // Hexadecimal floating-point strings are not supported (documented).
    assert!(eval("h > 1.0", &[("h", "0x1p3")]).is_err());
}

#[test]
fn numeric_literals_and_edge_cases() {
    check(
        &[],
        &[
            ("1 = 1.0", T),
            ("1.0 = 1", T),
            ("1 = 1L", T),
            ("2147483647 < 2147483648", T),
            ("2147483648 = 2147483648.0", T),
            ("3000000000 > 2", T),
            ("2 < 3000000000", T),
            ("1.5 > 1", T),
            ("1.5 < 3000000000", T),
            ("9223372036854775807 > 9223372036854775806", T),
            ("-2147483648 = -2147483648", T),
            ("- -5 = 5", T),
            ("-(-(5)) = +5", T),
            ("-1.5 < -1", T),
            ("5E10 = 50000000000", T),
            ("5e-1 = .5", T),
            ("5. = 5", T),
            ("007.5 = 7.5", T),
            ("1.7976931348623157E308 > 1", T),
            ("4.9E-324 > 0", T),
            // Incomparable (boolean with number) compares as "less": `=` is FALSE.
            ("(1 = 1) = 1", F),
            ("1 = (1 = 1)", F),
            ("(1 = 1) = TRUE", T),
            ("'a' = 'a'", T),
            ("'a' <> 'b'", T),
        ],
    );
    // The literal type decides the conversion of the string side.
    check(
        &[("a", "-2147483648"), ("b", "2147483648"), ("z", "-0")],
        &[
            ("a = -2147483648", T), // -(Long 2147483648): Long.valueOf("-2147483648")
            ("b = 2147483648", T),
            ("z = 0", T),
        ],
    );
}

#[test]
fn java_comparison_helpers() {
    use Value::{Bool, Double, Int, Long, Str};
    let s = |text: &'static str| Str(text.into());
    assert_eq!(
        compare_values(&Double(-0.0), &Double(0.0)),
        Ok(Ordering::Less)
    );
    assert_eq!(
        compare_values(&Double(f64::NAN), &Double(f64::INFINITY)),
        Ok(Ordering::Greater)
    );
    assert_eq!(
        compare_values(&Double(f64::NAN), &Double(-f64::NAN)),
        Ok(Ordering::Equal)
    );
    assert_eq!(compare_values(&Int(1), &Long(1)), Ok(Ordering::Equal));
    assert_eq!(
        compare_values(&Long(i64::MAX), &Double(9.223372036854776E18)),
        Ok(Ordering::Equal)
    );
    assert_eq!(
        compare_values(&Bool(false), &Bool(true)),
        Ok(Ordering::Less)
    );
    assert_eq!(compare_values(&Bool(true), &Int(0)), Ok(Ordering::Less));
    assert_eq!(compare_values(&Int(0), &Bool(true)), Ok(Ordering::Less));
    assert_eq!(compare_values(&s("TRUE"), &Bool(true)), Ok(Ordering::Equal));
    assert_eq!(
        compare_values(&Bool(true), &s("true")),
        Err(EvalError::BooleanWithString)
    );
    assert_eq!(compare_values(&s("+5"), &Int(5)), Ok(Ordering::Equal));
    assert!(
        compare_values(&s("5 "), &Int(5)).is_err(),
        "Integer.valueOf does not trim"
    );
    assert!(compare_values(&s(""), &Int(5)).is_err());
    assert!(compare_values(&s("-"), &Long(5)).is_err());
    assert!(compare_values(&s("2147483648"), &Int(5)).is_err());
    // UTF-16 order: U+FF61 sorts above a surrogate pair (U+1F600) in Java, below in UTF-8.
    assert_eq!(
        compare_values(&s("\u{ff61}"), &s("😀")),
        Ok(Ordering::Greater)
    );
    assert_eq!(
        compare_values(&Value::Null, &Int(1)),
        Err(EvalError::NullOperand)
    );

    for (text, expected) in [
        ("1", Some(1.0)),
        ("-1.5", Some(-1.5)),
        ("+.5", Some(0.5)),
        ("5.", Some(5.0)),
        ("1e3", Some(1000.0)),
        ("1E+3D", Some(1000.0)),
        ("\t 2.5d \n", Some(2.5)),
        ("Infinity", Some(f64::INFINITY)),
        ("-Infinity", Some(f64::NEG_INFINITY)),
        ("", None),
        (".", None),
        ("e5", None),
        ("1e", None),
        ("1.0ff", None),
        ("infinity", None),
        ("nan", None),
        ("1_000", None),
        ("0x10", None),
        ("1 2", None),
    ] {
        assert_eq!(parse_java_double(text).ok(), expected, "{text:?}");
    }
    assert!(parse_java_double("NaN").is_ok_and(f64::is_nan));
    assert!(parse_java_double("-NaN").is_ok_and(f64::is_nan));
}

/// Asserts that each text fails to compile at `position` with a message containing `message`.
fn check_parse_errors(cases: &[(&str, usize, &str)]) {
    for (text, position, message) in cases {
        let (got_position, got_message) = parse_error(text);
        assert_eq!(got_position, *position, "{text:?}: {got_message}");
        assert!(
            got_message.contains(message),
            "{text:?}: {got_message:?} should contain {message:?}"
        );
    }
}

/// Incomplete input, trailing tokens and unbalanced parentheses.
#[test]
fn structure_errors_report_position_and_reason() {
    check_parse_errors(&[
        ("", 0, "expected an expression, found end of input"),
        ("   ", 3, "expected an expression, found end of input"),
        ("a >", 3, "expected an expression, found end of input"),
        ("a = 1 AND", 9, "expected an expression"),
        (
            "a = 1 b = 2",
            6,
            "unexpected identifier b after a complete expression",
        ),
        ("a = 1)", 5, "unexpected ')' after a complete expression"),
        ("(a = 1", 6, "expected ')', found end of input"),
        ("((a = 1)", 8, "expected ')'"),
        ("a == 1", 3, "expected an expression, found '='"),
        (
            "a = 007",
            5,
            "unexpected number 0 after a complete expression",
        ),
        (
            "a NOT LIKE 'x'",
            2,
            "unexpected keyword NOT after a complete expression",
        ),
    ]);
}

/// Operands Java's `ComparisonExpression.create*` refuses.
#[test]
fn comparison_operand_errors_report_position_and_reason() {
    check_parse_errors(&[
        ("a = NULL", 2, "NULL cannot be compared with '=' or '<>'"),
        ("NULL <> a", 5, "NULL cannot be compared"),
        ("TRUE = 1", 5, "TRUE cannot be compared with 1"),
        ("FALSE = 'x'", 6, "FALSE cannot be compared with 'x'"),
        ("a > 'x'", 2, "'x' cannot be compared with '>'"),
        ("'x' <= a", 4, "'x' cannot be compared with '<='"),
        ("a >= TRUE", 2, "TRUE cannot be compared with '>='"),
        ("a < NULL", 2, "NULL cannot be compared with '<'"),
        ("(a = 1) > 2", 8, "cannot be compared with '>'"),
    ]);
}

/// `BETWEEN`, `IN`, `CONTAINS`/`STARTSWITH`/`ENDSWITH` and `IS` forms.
#[test]
fn between_in_and_string_match_errors_report_position_and_reason() {
    check_parse_errors(&[
        (
            "a BETWEEN 10 AND 0",
            2,
            "lower bound 10 is greater than upper bound 0",
        ),
        (" a between 10 and 0", 3, "lower bound"),
        ("a BETWEEN NULL AND 1", 2, "BETWEEN bounds cannot be NULL"),
        ("a BETWEEN 'x' AND 'y'", 2, "'x' cannot be compared"),
        ("a NOT BETWEEN 1 AND 'y'", 2, "'y' cannot be compared"),
        ("a BETWEEN 1 OR 2", 12, "expected AND in BETWEEN"),
        (
            "a and between 2 and 10",
            6,
            "expected an expression, found keyword BETWEEN",
        ),
        (
            "a IN (1, 2)",
            6,
            "expected a string literal, found number 1",
        ),
        ("a IN ()", 6, "expected a string literal, found ')'"),
        ("a IN 'x'", 5, "expected '(' after IN"),
        ("a IN ('x' 'y')", 10, "expected ',' or ')' in the IN list"),
        ("a IN ('x',)", 10, "expected a string literal"),
        (
            "'x' IN ('x')",
            4,
            "IN needs a property on its left, found 'x'",
        ),
        ("(a = 1) NOT IN ('x')", 8, "IN needs a property"),
        (
            "a CONTAINS x",
            11,
            "expected a string literal, found identifier x",
        ),
        (
            "value contains 123",
            15,
            "expected a string literal, found number 123",
        ),
        (
            "'axb' contains ",
            15,
            "expected a string literal, found end of input",
        ),
        ("a IS 1", 5, "expected NULL or NOT NULL after IS"),
        ("a IS NOT 1", 9, "expected NULL or NOT NULL after IS"),
    ]);
}

/// Non-boolean roots and operands, out-of-range literals and lexer errors.
#[test]
fn boolean_literal_and_lexer_errors_report_position_and_reason() {
    check_parse_errors(&[
        ("5", 0, "5 does not produce a boolean value"),
        ("'abc'", 0, "'abc' does not produce a boolean value"),
        ("-a", 0, "does not produce a boolean value"),
        ("a AND 5", 6, "5 does not produce a boolean value"),
        ("NOT 5", 4, "does not produce a boolean value"),
        ("TRUE OR 'x'", 8, "does not produce a boolean value"),
        (
            "a = 99999999999999999999",
            4,
            "does not fit in a 64-bit long",
        ),
        ("a > 100000000000000000000000", 4, "does not fit"),
        ("a > 9223372036854775808", 4, "does not fit"),
        ("a > -9223372036854775808", 5, "does not fit"),
        ("a > 0.0", 4, "smaller than Double.MIN_VALUE"),
        ("a > 1e-400", 4, "smaller than Double.MIN_VALUE"),
        ("a > 1e400", 4, "larger than Double.MAX_VALUE"),
        ("a = 'abc", 4, "unterminated string literal"),
        ("a = 1 /* never closed", 6, "unterminated /* comment"),
        ("a = 1 AND b ! 2", 12, "unexpected character '!'"),
        ("a = 1 AND ü = 2", 10, "unexpected character 'ü'"),
        ("'ü€' = x AND", 12, "expected an expression"),
    ]);
}

#[test]
fn parse_error_display_points_at_the_position() {
    let error = CompiledExpression::compile("a >").unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid SQL92 expression at character 3: expected an expression, found end of input"
    );
}

#[test]
fn nesting_depth_limit() {
    let nested = |depth: usize| format!("{}a = 1{}", "(".repeat(depth), ")".repeat(depth));
    assert_eq!(eval(&nested(NESTING_DEPTH_MAX), &[("a", "1")]), Ok(T));
    let (position, message) = parse_error(&nested(NESTING_DEPTH_MAX + 1));
    assert_eq!(position, NESTING_DEPTH_MAX);
    assert!(message.contains("deeper than 64 levels"), "{message}");

    let nots = |depth: usize| format!("{}TRUE", "NOT ".repeat(depth));
    assert_eq!(eval(&nots(NESTING_DEPTH_MAX), &[]), Ok(T));
    assert_eq!(
        parse_error(&nots(NESTING_DEPTH_MAX + 1)).0,
        4 * NESTING_DEPTH_MAX
    );

    let negations = |depth: usize| format!("{}1 = 1", "- ".repeat(depth));
    assert_eq!(eval(&negations(NESTING_DEPTH_MAX), &[]), Ok(T));
    assert_eq!(
        parse_error(&negations(NESTING_DEPTH_MAX + 1)).0,
        2 * NESTING_DEPTH_MAX
    );

    // Far beyond the limit: an error, not a stack overflow.
    let (position, _) = parse_error(&"(".repeat(60_000));
    assert_eq!(position, NESTING_DEPTH_MAX);
    assert_eq!(parse_error(&"NOT ".repeat(16_000)).0, 4 * NESTING_DEPTH_MAX);
}

#[test]
fn tree_depth_limit() {
    // `a = a = a …` grows the tree without nesting. n equalities make a tree n + 1 deep.
    let chain = |equalities: usize| format!("a{}", " = a".repeat(equalities));
    assert!(CompiledExpression::compile(&chain(TREE_DEPTH_MAX - 1)).is_ok());
    let (_, message) = parse_error(&chain(TREE_DEPTH_MAX));
    assert!(message.contains("tree is deeper than"), "{message}");
    assert!(CompiledExpression::compile(&chain(10_000)).is_err());
    let contains = format!("a{}", " CONTAINS 'x'".repeat(4_000));
    assert!(CompiledExpression::compile(&contains).is_err());
    let is_null = format!("a{}", " IS NULL".repeat(5_000));
    assert!(CompiledExpression::compile(&is_null).is_err());

    // Long AND/OR chains are flat and stay allowed.
    let terms: Vec<String> = (0..4_000).map(|i| format!("a = '{i}'")).collect();
    let or_chain = terms.join(" OR ");
    assert!(or_chain.len() < EXPRESSION_LENGTH_MAX_BYTES);
    assert_eq!(eval(&or_chain, &[("a", "3999")]), Ok(T));
    assert_eq!(eval(&or_chain, &[("a", "x")]), Ok(F));
    let and_chain = terms[..2_000].join(" AND ");
    assert_eq!(eval(&and_chain, &[("a", "0")]), Ok(F));
}

#[test]
fn length_limit() {
    let prefix = "a = '";
    let fill = EXPRESSION_LENGTH_MAX_BYTES - prefix.len() - 1;
    let at_limit = format!("{prefix}{}'", "x".repeat(fill));
    assert_eq!(at_limit.len(), EXPRESSION_LENGTH_MAX_BYTES);
    assert!(CompiledExpression::compile(&at_limit).is_ok());
    let over = format!("{prefix}{}'", "x".repeat(fill + 1));
    assert_eq!(
        CompiledExpression::compile(&over).unwrap_err(),
        FilterError::ExpressionTooLong {
            length_bytes: EXPRESSION_LENGTH_MAX_BYTES + 1,
            length_max_bytes: EXPRESSION_LENGTH_MAX_BYTES,
        }
    );
    // Java's float-overflow case (a 200 KB literal) is rejected by length before parsing.
    let huge = format!("a > 1{}.1", "1".repeat(200_000));
    assert!(matches!(
        CompiledExpression::compile(&huge),
        Err(FilterError::ExpressionTooLong { .. })
    ));
}

/// The deepest accepted expressions parse and evaluate within a small stack: 256 KiB
/// optimised (an eighth of a default 2 MiB thread stack; measured need 96-128 KiB), 1 MiB
/// unoptimised (every temporary gets its own stack slot; measured need under 512 KiB).
#[test]
fn deepest_expressions_fit_in_a_small_stack() {
    const STACK_BYTES: usize = if cfg!(debug_assertions) {
        1024 * 1024
    } else {
        256 * 1024
    };
    let handle = std::thread::Builder::new()
        .stack_size(STACK_BYTES)
        .spawn(|| {
            let p = props(&[("a", "1")]);
            let nested = format!(
                "{}a = 1{}",
                "(a = 1 AND ".repeat(NESTING_DEPTH_MAX - 1) + "(",
                ")".repeat(NESTING_DEPTH_MAX)
            );
            assert_eq!(compile(&nested).evaluate(&p), Ok(T));
            let nots = format!("{}(a = 1)", "NOT ".repeat(NESTING_DEPTH_MAX - 1));
            assert_eq!(compile(&nots).evaluate(&p), Ok(F));
            let chain = format!("a{}", " = a".repeat(TREE_DEPTH_MAX - 1));
            // `(a = a) = a` puts a Boolean left of a string: Java's ClassCastException.
            assert_eq!(
                compile(&chain).evaluate(&p),
                Err(EvalError::BooleanWithString)
            );
            let deep_error = format!("{}a = 1", "(".repeat(10_000));
            assert!(CompiledExpression::compile(&deep_error).is_err());
        })
        .expect("spawn test thread");
    handle.join().expect("no stack overflow");
}

#[test]
fn evaluates_raw_record_properties() {
    use crate::filter::properties::tests::encode_properties;
    use crate::filter::properties::RawProperties;
    let bytes = encode_properties(&[("TAGS", "TagA"), ("price", "12.5"), ("region", "eu-1")]);
    let raw = RawProperties(&bytes);
    let expression =
        compile("TAGS IN ('TagA', 'TagB') AND price > 10.0 AND region STARTSWITH 'eu'");
    assert_eq!(expression.evaluate(&raw), Ok(T));
    assert!(compile("KEYS IS NULL").matches(&raw));
    assert!(!compile("price > 20.0").matches(&raw));
    // As in Java, an Integer literal cannot be compared with "12.5".
    assert!(compile("price > 10").evaluate(&raw).is_err());
}

fn token_strategy() -> impl Strategy<Value = String> {
    let fixed = prop::sample::select(vec![
        "(",
        ")",
        ",",
        "=",
        "<>",
        "<",
        "<=",
        ">",
        ">=",
        "+",
        "-",
        "NOT",
        "AND",
        "OR",
        "BETWEEN",
        "IN",
        "TRUE",
        "FALSE",
        "NULL",
        "IS",
        "CONTAINS",
        "STARTSWITH",
        "ENDSWITH",
        "a",
        "b",
        "TAGS",
        "'x'",
        "''",
        "'1'",
        "0",
        "1",
        "2147483648",
        "9223372036854775808",
        "1.5",
        ".5",
        "5E10",
        "0.0",
        "1L",
        "--",
        "/*",
        "*/",
        "'",
        "\n",
        "!",
        "é",
    ])
    .prop_map(str::to_owned);
    prop_oneof![
        8 => fixed,
        1 => "[a-z]{1,3}",
        1 => "'[a-z]{0,3}'",
        1 => (0i64..100_000).prop_map(|n| n.to_string()),
    ]
}

fn fuzz_properties() -> HashMap<String, String> {
    props(&[
        ("a", "1"),
        ("b", "x"),
        ("TAGS", "TagA"),
        ("c", "true"),
        ("d", "NaN"),
    ])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn never_panics_on_arbitrary_text(text in ".{0,200}") {
        if let Ok(expression) = CompiledExpression::compile(&text) {
            let _ = expression.evaluate(&fuzz_properties());
        }
    }

    #[test]
    fn never_panics_on_token_soup(tokens in prop::collection::vec(token_strategy(), 0..40)) {
        let text = tokens.join(" ");
        match CompiledExpression::compile(&text) {
            Ok(expression) => {
                let _ = expression.evaluate(&fuzz_properties());
                let _ = expression.evaluate(&props(&[]));
            }
            Err(FilterError::Parse { position, .. }) => {
                prop_assert!(position <= text.chars().count());
            }
            Err(other) => prop_assert!(false, "unexpected error {other:?}"),
        }
        // Without separating spaces the tokens run together differently; still no panic.
        let _ = CompiledExpression::compile(&tokens.concat());
    }

    /// For generated well-formed comparisons, the compiled filter agrees with a direct
    /// computation of Java's integer semantics.
    #[test]
    fn integer_comparisons_agree_with_a_model(
        value in any::<i32>(),
        literal in any::<i32>(),
        op in prop::sample::select(vec!["=", "<>", "<", "<=", ">", ">="]),
    ) {
        let text = format!("a {op} {literal}");
        let expected = match op {
            "=" => value == literal,
            "<>" => value != literal,
            "<" => value < literal,
            "<=" => value <= literal,
            ">" => value > literal,
            _ => value >= literal,
        };
        let value_text = value.to_string();
        prop_assert_eq!(eval(&text, &[("a", value_text.as_str())]), Ok(Some(expected)));
    }
}
