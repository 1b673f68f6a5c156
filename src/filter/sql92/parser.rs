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
//! - We bound the nesting depth ([`NESTING_DEPTH_MAX`]), the depth of the resulting tree
//!   ([`TREE_DEPTH_MAX`](super::TREE_DEPTH_MAX)) and the text length ([`EXPRESSION_LENGTH_MAX_BYTES`]), so hostile
//!   input can neither overflow the stack nor take unbounded time.

use std::borrow::Cow;
use std::collections::{HashSet, VecDeque};

use super::ast::{CompareOp, Expr, StringMatchOp};
use super::build::{
    as_boolean, between_node, compare_node, equal_node, logical_node, make, not_node,
    operand_token, parse_error, prefix_node, string_match_node, Node,
};
use super::lexer::{Keyword, Lexer, Token, TokenKind};
use super::limits::{EXPRESSION_LENGTH_MAX_BYTES, NESTING_DEPTH_MAX};
use super::value::Value;
use crate::filter::error::FilterError;

/// Parses `text` into a boolean expression tree.
pub(crate) fn parse(text: &str) -> Result<Expr, FilterError> {
    if text.len() > EXPRESSION_LENGTH_MAX_BYTES {
        return Err(FilterError::ExpressionTooLong {
            length_bytes: text.len(),
            length_max_bytes: EXPRESSION_LENGTH_MAX_BYTES,
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

/// A precedence-climbing parser. Recursion happens only through parentheses and prefix
/// operators, each counted against [`NESTING_DEPTH_MAX`]. The helpers that build nodes, read
/// operator tails or report errors are `#[inline(never)]`: inlined, their locals would sit in
/// every recursive frame (measured in a release build: 4 KiB per parenthesis level instead of under 2 KiB).
struct Parser<'a> {
    lexer: Lexer<'a>,
    /// At most two tokens: the grammar needs two for `NOT IN`, `NOT BETWEEN`, `IS NOT NULL`…
    lookahead: VecDeque<Token<'a>>,
    /// Parentheses and prefix operators currently open (bounded by [`NESTING_DEPTH_MAX`]).
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
        if self.nesting_depth >= NESTING_DEPTH_MAX {
            return Err(parse_error(
                position,
                format!(
                    "expression nests parentheses and prefix operators deeper than \
                     {NESTING_DEPTH_MAX} levels"
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
