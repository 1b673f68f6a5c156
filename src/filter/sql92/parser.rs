//! Parser for RocketMQ's SQL92 filter language, building the tree that [`super::eval`]
//! evaluates. It is a precedence-climbing form of the recursive-descent grammar below.
//!
//! The grammar and the parse-time checks are those of Java's `SelectorParser.jj` and
//! `ComparisonExpression.create*`, from the loosest to the tightest binding (all binary levels
//! are left-associative; `AND`/`OR` chains become one n-ary node):
//!
//! ```text
//! expression := or
//! or         := and ( OR and )*
//! and        := equality ( AND equality )*
//! equality   := comparison ( '=' comparison | '<>' comparison | IS NULL | IS NOT NULL )*
//! comparison := unary ( ('>' | '>=' | '<' | '<=') unary
//!                     | [NOT] (CONTAINS | STARTSWITH | ENDSWITH) string
//!                     | [NOT] BETWEEN unary AND unary
//!                     | [NOT] IN '(' string ( ',' string )* ')' )*
//! unary      := '+' unary | '-' unary | NOT unary | primary
//! primary    := literal | identifier | '(' or ')'
//! ```
//!
//! So `NOT` binds tighter than every comparison: `NOT a = 'x'` is `(NOT a) = 'x'`, exactly as in
//! Java (write `NOT (a = 'x')`). Operands of `AND`, `OR`, `NOT` and the whole expression must be
//! boolean: a comparison, a logical operator, `TRUE`/`FALSE`/`NULL`, or a bare property (which
//! is true only if its value is a Boolean — never, for message properties, which are strings).
//!
//! Two deliberate differences from Java, both stricter:
//! - Java's parser stops after the first complete expression and ignores whatever follows
//!   (`a = 1 b = 2` means `a = 1`); we reject trailing tokens.
//! - We bound the nesting depth ([`MAX_NESTING_DEPTH`]), the depth of the resulting tree
//!   ([`MAX_TREE_DEPTH`]) and the text length ([`MAX_EXPRESSION_LENGTH_BYTES`]), so hostile
//!   input can neither overflow the stack nor take unbounded time.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::{HashSet, VecDeque};

use super::eval::{compare_values, Value};
use super::lexer::{Keyword, Lexer, Token, TokenKind};
use super::{MAX_EXPRESSION_LENGTH_BYTES, MAX_NESTING_DEPTH, MAX_TREE_DEPTH};
use crate::filter::FilterError;

/// `>`, `>=`, `<`, `<=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CompareOp {
    Greater,
    GreaterEqual,
    Less,
    LessEqual,
}

impl CompareOp {
    fn symbol(self) -> &'static str {
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
    fn is_boolean(&self) -> bool {
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

    fn describe(&self) -> String {
        match self {
            Expr::Constant(value) => value.describe(),
            Expr::Property(name) => format!("property {name}"),
            _ => "this expression".to_string(),
        }
    }
}

/// A subtree with its depth (for [`MAX_TREE_DEPTH`]) and where it starts (for errors).
struct Node {
    expr: Expr,
    depth: usize,
    position: usize,
}

fn parse_error(position: usize, message: impl Into<String>) -> FilterError {
    FilterError::Parse {
        position,
        message: message.into(),
    }
}

/// Parses `text` into a boolean expression tree.
pub(crate) fn parse(text: &str) -> Result<Expr, FilterError> {
    if text.len() > MAX_EXPRESSION_LENGTH_BYTES {
        return Err(FilterError::ExpressionTooLong {
            length_bytes: text.len(),
            max_length_bytes: MAX_EXPRESSION_LENGTH_BYTES,
        });
    }
    let mut parser = Parser {
        lexer: Lexer::new(text),
        lookahead: VecDeque::with_capacity(2),
        nesting_depth: 0,
    };
    let root = parser.expression(Level::Or)?;
    let trailing = parser.next()?;
    if trailing.kind != TokenKind::EndOfInput {
        return Err(parse_error(
            trailing.position,
            format!("unexpected {} after a complete expression", trailing.kind),
        ));
    }
    Ok(as_boolean(root)?.expr)
}

/// Java `asBooleanExpression`: boolean expressions pass, a bare property is cast, anything else
/// is an error.
#[inline(never)]
fn as_boolean(node: Node) -> Result<Node, FilterError> {
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

/// Wraps `expr` whose deepest child has depth `children_depth`, enforcing [`MAX_TREE_DEPTH`].
#[inline(never)]
fn make(expr: Expr, children_depth: usize, position: usize) -> Result<Node, FilterError> {
    let depth = children_depth + 1;
    if depth > MAX_TREE_DEPTH {
        return Err(parse_error(
            position,
            format!("expression tree is deeper than {MAX_TREE_DEPTH} levels"),
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
fn check_orderable(node: &Node, op: &str, op_position: usize) -> Result<(), FilterError> {
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
fn compare_node(
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
fn equal_node(left: Node, right: Node, op_position: usize) -> Result<Node, FilterError> {
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
fn not_node(operand: Node) -> Result<Node, FilterError> {
    let position = operand.position;
    make(Expr::Not(Box::new(operand.expr)), operand.depth, position)
}

#[inline(never)]
fn decimal_literal(text: &str, position: usize) -> Result<Value<'static>, FilterError> {
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
fn float_literal(text: &str, position: usize) -> Result<Value<'static>, FilterError> {
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

/// Binding strength of the infix and postfix operators, loosest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Or,
    And,
    Equality,
    Comparison,
}

/// An operator that follows an operand.
#[derive(Debug, Clone, Copy)]
enum Operator {
    Or,
    And,
    Equal,
    NotEqual,
    /// `IS NULL` / `IS NOT NULL`; the rest is read after `IS`.
    Is,
    Compare(CompareOp),
    StringMatch(StringMatchOp, bool),
    Between(bool),
    In(bool),
}

impl Operator {
    fn level(self) -> Level {
        match self {
            Operator::Or => Level::Or,
            Operator::And => Level::And,
            Operator::Equal | Operator::NotEqual | Operator::Is => Level::Equality,
            Operator::Compare(_)
            | Operator::StringMatch(..)
            | Operator::Between(_)
            | Operator::In(_) => Level::Comparison,
        }
    }

    /// The operator `kind` starts, if any; `negated` when it follows `NOT` (only the
    /// negatable comparison operators qualify then).
    fn from_token(kind: &TokenKind<'_>, negated: bool) -> Option<Operator> {
        let operator = match kind {
            TokenKind::Keyword(Keyword::Contains) => {
                Operator::StringMatch(StringMatchOp::Contains, negated)
            }
            TokenKind::Keyword(Keyword::StartsWith) => {
                Operator::StringMatch(StringMatchOp::StartsWith, negated)
            }
            TokenKind::Keyword(Keyword::EndsWith) => {
                Operator::StringMatch(StringMatchOp::EndsWith, negated)
            }
            TokenKind::Keyword(Keyword::Between) => Operator::Between(negated),
            TokenKind::Keyword(Keyword::In) => Operator::In(negated),
            _ if negated => return None,
            TokenKind::Keyword(Keyword::Or) => Operator::Or,
            TokenKind::Keyword(Keyword::And) => Operator::And,
            TokenKind::Keyword(Keyword::Is) => Operator::Is,
            TokenKind::Equal => Operator::Equal,
            TokenKind::NotEqual => Operator::NotEqual,
            TokenKind::Greater => Operator::Compare(CompareOp::Greater),
            TokenKind::GreaterEqual => Operator::Compare(CompareOp::GreaterEqual),
            TokenKind::Less => Operator::Compare(CompareOp::Less),
            TokenKind::LessEqual => Operator::Compare(CompareOp::LessEqual),
            _ => return None,
        };
        Some(operator)
    }
}

/// `left OR right` / `left AND right`, flattened into one n-ary node. Kleene AND and OR with
/// left-to-right short-circuit are associative (also in which operand's error surfaces
/// first), so flattening changes no result, and long chains add no depth.
#[inline(never)]
fn logical_node(is_or: bool, left: Node, right: Node) -> Result<Node, FilterError> {
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
fn string_match_node(
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
fn operand_token(kind: TokenKind<'_>, position: usize) -> Result<Node, FilterError> {
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

/// A precedence-climbing parser. Recursion happens only through parentheses and prefix
/// operators, each counted against [`MAX_NESTING_DEPTH`]. The helpers that build nodes, read
/// operator tails or report errors are `#[inline(never)]`: inlined, their locals would sit in
/// every recursive frame (measured in a release build: 4 KiB per parenthesis level instead of under 2 KiB).
struct Parser<'a> {
    lexer: Lexer<'a>,
    /// At most two tokens: the grammar needs two for `NOT IN`, `NOT BETWEEN`, `IS NOT NULL`…
    lookahead: VecDeque<Token<'a>>,
    /// Parentheses and prefix operators currently open (bounded by [`MAX_NESTING_DEPTH`]).
    nesting_depth: usize,
}

impl<'a> Parser<'a> {
    fn peek_nth(&mut self, index: usize) -> Result<&Token<'a>, FilterError> {
        while self.lookahead.len() <= index {
            let token = self.lexer.next_token()?;
            self.lookahead.push_back(token);
        }
        Ok(&self.lookahead[index])
    }

    fn next(&mut self) -> Result<Token<'a>, FilterError> {
        match self.lookahead.pop_front() {
            Some(token) => Ok(token),
            None => self.lexer.next_token(),
        }
    }

    #[inline(never)]
    fn expect(&mut self, kind: &TokenKind<'_>, what: &str) -> Result<Token<'a>, FilterError> {
        let token = self.next()?;
        if &token.kind == kind {
            Ok(token)
        } else {
            Err(parse_error(
                token.position,
                format!("expected {what}, found {}", token.kind),
            ))
        }
    }

    #[inline(never)]
    fn enter(&mut self, position: usize) -> Result<(), FilterError> {
        if self.nesting_depth >= MAX_NESTING_DEPTH {
            return Err(parse_error(
                position,
                format!(
                    "expression nests parentheses and prefix operators deeper than \
                     {MAX_NESTING_DEPTH} levels"
                ),
            ));
        }
        self.nesting_depth += 1;
        Ok(())
    }

    fn leave(&mut self) {
        debug_assert!(self.nesting_depth > 0);
        self.nesting_depth -= 1;
    }

    /// The operator at the current position (not consumed), its token count and position.
    #[inline(never)]
    fn peek_operator(&mut self) -> Result<Option<(Operator, usize, usize)>, FilterError> {
        let token = self.peek_nth(0)?;
        let position = token.position;
        if token.kind != TokenKind::Keyword(Keyword::Not) {
            return Ok(Operator::from_token(&token.kind, false).map(|op| (op, 1, position)));
        }
        // `NOT` in operator position must introduce a negatable operator (JavaCC
        // LOOKAHEAD(2)); otherwise the expression ends before it.
        let second = self.peek_nth(1)?;
        Ok(Operator::from_token(&second.kind, true).map(|op| (op, 2, position)))
    }

    /// Parses operands joined by operators of at least `min_level`.
    fn expression(&mut self, min_level: Level) -> Result<Node, FilterError> {
        let mut left = self.unary()?;
        while let Some((operator, token_count, position)) = self.peek_operator()? {
            if operator.level() < min_level {
                break;
            }
            for _ in 0..token_count {
                self.next()?;
            }
            left = self.apply(left, operator, position)?;
        }
        Ok(left)
    }

    /// Reads the right-hand side of `operator` (already consumed) and combines. Each arm is
    /// its own method so this frame, live across the recursion, stays small.
    fn apply(
        &mut self,
        left: Node,
        operator: Operator,
        position: usize,
    ) -> Result<Node, FilterError> {
        match operator {
            Operator::Or => self.logical(left, true),
            Operator::And => self.logical(left, false),
            Operator::Equal => self.equality(left, false, position),
            Operator::NotEqual => self.equality(left, true, position),
            Operator::Is => self.is_null(left),
            Operator::Compare(op) => self.ordering(left, op, position),
            Operator::StringMatch(op, negated) => self.string_match(left, op, negated),
            Operator::Between(negated) => self.between(left, negated, position),
            Operator::In(negated) => self.in_list(left, negated, position),
        }
    }

    #[inline(never)]
    fn logical(&mut self, left: Node, is_or: bool) -> Result<Node, FilterError> {
        let right = self.expression(if is_or { Level::And } else { Level::Equality })?;
        logical_node(is_or, left, right)
    }

    #[inline(never)]
    fn equality(
        &mut self,
        left: Node,
        negated: bool,
        position: usize,
    ) -> Result<Node, FilterError> {
        let right = self.expression(Level::Comparison)?;
        let equal = equal_node(left, right, position)?;
        if negated {
            not_node(equal)
        } else {
            Ok(equal)
        }
    }

    #[inline(never)]
    fn ordering(
        &mut self,
        left: Node,
        op: CompareOp,
        position: usize,
    ) -> Result<Node, FilterError> {
        let right = self.unary()?;
        compare_node(op, left, right, position)
    }

    #[inline(never)]
    fn string_match(
        &mut self,
        left: Node,
        op: StringMatchOp,
        negated: bool,
    ) -> Result<Node, FilterError> {
        let pattern = self.string_literal()?;
        string_match_node(left, op, negated, pattern)
    }

    /// `IS` has been consumed: `NULL` or `NOT NULL` follows.
    #[inline(never)]
    fn is_null(&mut self, left: Node) -> Result<Node, FilterError> {
        let mut token = self.next()?;
        let negated = token.kind == TokenKind::Keyword(Keyword::Not);
        if negated {
            token = self.next()?;
        }
        if token.kind != TokenKind::Keyword(Keyword::Null) {
            return Err(parse_error(
                token.position,
                format!("expected NULL or NOT NULL after IS, found {}", token.kind),
            ));
        }
        let position = left.position;
        let is_null = make(
            Expr::Equal(Box::new(left.expr), Box::new(Expr::Constant(Value::Null))),
            left.depth,
            position,
        )?;
        if negated {
            not_node(is_null)
        } else {
            Ok(is_null)
        }
    }

    /// `BETWEEN` has been consumed. Java `createBetween` / `createNotBetween`.
    #[inline(never)]
    fn between(
        &mut self,
        value: Node,
        negated: bool,
        op_position: usize,
    ) -> Result<Node, FilterError> {
        let low = self.unary()?;
        self.expect(&TokenKind::Keyword(Keyword::And), "AND in BETWEEN … AND …")?;
        let high = self.unary()?;
        between_node(value, low, high, negated, op_position)
    }

    /// `IN` has been consumed. Java `createInFilter`: the left side must be a property.
    #[inline(never)]
    fn in_list(
        &mut self,
        left: Node,
        negated: bool,
        op_position: usize,
    ) -> Result<Node, FilterError> {
        let Expr::Property(property) = left.expr else {
            return Err(parse_error(
                op_position,
                format!(
                    "IN needs a property on its left, found {}",
                    left.expr.describe()
                ),
            ));
        };
        self.expect(&TokenKind::LeftParen, "'(' after IN")?;
        let mut values = HashSet::new();
        values.insert(self.string_literal()?.into());
        loop {
            let token = self.next()?;
            match token.kind {
                TokenKind::Comma => {
                    values.insert(self.string_literal()?.into());
                }
                TokenKind::RightParen => break,
                other => {
                    return Err(parse_error(
                        token.position,
                        format!("expected ',' or ')' in the IN list, found {other}"),
                    ))
                }
            }
        }
        make(
            Expr::In {
                property,
                values,
                negated,
            },
            0,
            left.position,
        )
    }

    #[inline(never)]
    fn string_literal(&mut self) -> Result<Cow<'a, str>, FilterError> {
        let token = self.next()?;
        match token.kind {
            TokenKind::String(value) => Ok(value),
            other => Err(parse_error(
                token.position,
                format!("expected a string literal, found {other}"),
            )),
        }
    }

    /// A prefix operator (`+`, `-`, `NOT`) applied to an operand, a parenthesized expression,
    /// a literal, or a property.
    fn unary(&mut self) -> Result<Node, FilterError> {
        let token = self.next()?;
        let position = token.position;
        match token.kind {
            TokenKind::Plus | TokenKind::Minus | TokenKind::Keyword(Keyword::Not) => {
                self.enter(position)?;
                let operand = self.unary();
                self.leave();
                prefix_node(&token.kind, operand?, position)
            }
            TokenKind::LeftParen => {
                self.enter(position)?;
                let inner = self.parenthesized();
                self.leave();
                inner
            }
            kind => operand_token(kind, position),
        }
    }

    /// `(` has been consumed.
    fn parenthesized(&mut self) -> Result<Node, FilterError> {
        let inner = self.expression(Level::Or)?;
        self.expect(&TokenKind::RightParen, "')'")?;
        Ok(inner)
    }
}

#[inline(never)]
fn prefix_node(
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
fn between_node(
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
