//! Tokenizer for RocketMQ's SQL92 filter language.
//!
//! Follows the token definitions of Java's `filter/parser/SelectorParser.jj`:
//! - whitespace is `' '`, `'\t'`, `'\n'`, `'\r'`, `'\f'` only (anything else is an error);
//! - comments are `-- … end of line` and `/* … */` (not nested);
//! - keywords (`NOT AND OR BETWEEN IN TRUE FALSE NULL IS CONTAINS STARTSWITH ENDSWITH`) and
//!   identifiers `[A-Za-z_$][A-Za-z0-9_$]*` are case-insensitive for keywords; an identifier
//!   that spells a keyword is that keyword;
//! - `DECIMAL_LITERAL` is `0` or `[1-9][0-9]*` with an optional `l`/`L` suffix (so `007` is
//!   three tokens, which the parser then rejects, as in Java; there are no hex or octal
//!   literals in the grammar);
//! - `FLOATING_POINT_LITERAL` is `5.`, `5.5`, `.5`, `5E10`, each with an optional exponent
//!   `E[+-]?[0-9]+` (case-insensitive);
//! - `STRING_LITERAL` is `'…'` with `''` standing for one quote; it may span lines.
//!
//! One deliberate difference: JavaCC only accepts a `--` comment that ends with a newline; at end
//! of input it falls back to two `-` tokens. We accept a `--` comment that runs to the end of the
//! input, because our parser (unlike Java's) rejects trailing tokens and `a = 1 -- note` is a
//! comment to every reader.
//!
//! Positions are character (Unicode scalar value) offsets from the start of the text.

use std::borrow::Cow;
use std::fmt;

use crate::filter::error::FilterError;

/// Reserved words, matched case-insensitively.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keyword {
    Not,
    And,
    Or,
    Between,
    In,
    True,
    False,
    Null,
    Is,
    Contains,
    StartsWith,
    EndsWith,
}

impl Keyword {
    const ALL: [(Keyword, &'static str); 12] = [
        (Keyword::Not, "NOT"),
        (Keyword::And, "AND"),
        (Keyword::Or, "OR"),
        (Keyword::Between, "BETWEEN"),
        (Keyword::In, "IN"),
        (Keyword::True, "TRUE"),
        (Keyword::False, "FALSE"),
        (Keyword::Null, "NULL"),
        (Keyword::Is, "IS"),
        (Keyword::Contains, "CONTAINS"),
        (Keyword::StartsWith, "STARTSWITH"),
        (Keyword::EndsWith, "ENDSWITH"),
    ];

    fn from_word(word: &str) -> Option<Keyword> {
        Keyword::ALL
            .iter()
            .find(|(_, spelling)| spelling.eq_ignore_ascii_case(word))
            .map(|(keyword, _)| *keyword)
    }

    pub(crate) fn spelling(self) -> &'static str {
        Keyword::ALL
            .iter()
            .find(|(keyword, _)| *keyword == self)
            .map_or("?", |(_, spelling)| spelling)
    }
}

/// One token. Text-carrying variants borrow from the expression where they can.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TokenKind<'a> {
    LeftParen,
    RightParen,
    Comma,
    Equal,
    NotEqual,
    Less,
    LessEqual,
    Greater,
    GreaterEqual,
    Plus,
    Minus,
    Keyword(Keyword),
    Identifier(&'a str),
    /// The literal's text as written, including an `l`/`L` suffix.
    Decimal(&'a str),
    /// The literal's text as written.
    Float(&'a str),
    /// The decoded value (`''` already turned into `'`).
    String(Cow<'a, str>),
    EndOfInput,
}

impl fmt::Display for TokenKind<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenKind::LeftParen => f.write_str("'('"),
            TokenKind::RightParen => f.write_str("')'"),
            TokenKind::Comma => f.write_str("','"),
            TokenKind::Equal => f.write_str("'='"),
            TokenKind::NotEqual => f.write_str("'<>'"),
            TokenKind::Less => f.write_str("'<'"),
            TokenKind::LessEqual => f.write_str("'<='"),
            TokenKind::Greater => f.write_str("'>'"),
            TokenKind::GreaterEqual => f.write_str("'>='"),
            TokenKind::Plus => f.write_str("'+'"),
            TokenKind::Minus => f.write_str("'-'"),
            TokenKind::Keyword(keyword) => write!(f, "keyword {}", keyword.spelling()),
            TokenKind::Identifier(name) => write!(f, "identifier {name}"),
            TokenKind::Decimal(text) | TokenKind::Float(text) => write!(f, "number {text}"),
            TokenKind::String(_) => f.write_str("string literal"),
            TokenKind::EndOfInput => f.write_str("end of input"),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Token<'a> {
    pub(crate) kind: TokenKind<'a>,
    /// Character offset of the token's first character.
    pub(crate) position: usize,
}

/// A lazy tokenizer: tokens are produced on demand, so an error late in the text does not hide
/// a syntax error earlier in it.
pub(crate) struct Lexer<'a> {
    text: &'a str,
    /// Byte offset of the next unread character.
    byte_offset: usize,
    /// Character offset of the next unread character.
    char_offset: usize,
}

fn lex_error(position: usize, message: impl Into<String>) -> FilterError {
    FilterError::Parse {
        position,
        message: message.into(),
    }
}

fn is_identifier_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == '$'
}

fn is_identifier_part(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '$'
}

impl<'a> Lexer<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Lexer {
            text,
            byte_offset: 0,
            char_offset: 0,
        }
    }

    fn peek_char(&self) -> Option<char> {
        self.text[self.byte_offset..].chars().next()
    }

    fn peek_char_at(&self, ahead: usize) -> Option<char> {
        self.text[self.byte_offset..].chars().nth(ahead)
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek_char()?;
        self.byte_offset += c.len_utf8();
        self.char_offset += 1;
        Some(c)
    }

    /// Consumes ASCII digits; returns how many.
    fn bump_digits(&mut self) -> usize {
        let mut count = 0;
        while self.peek_char().is_some_and(|c| c.is_ascii_digit()) {
            self.bump();
            count += 1;
        }
        count
    }

    /// Consumes `E[+-]?[0-9]+` if it is there in full; otherwise consumes nothing (JavaCC's
    /// longest match then ends the number before the `E`).
    fn bump_exponent(&mut self) -> bool {
        if !matches!(self.peek_char(), Some('e' | 'E')) {
            return false;
        }
        let digits_at = match self.peek_char_at(1) {
            Some('+' | '-') => 2,
            _ => 1,
        };
        if !self
            .peek_char_at(digits_at)
            .is_some_and(|c| c.is_ascii_digit())
        {
            return false;
        }
        for _ in 0..digits_at {
            self.bump();
        }
        self.bump_digits();
        true
    }

    /// Skips whitespace and comments.
    fn skip_trivia(&mut self) -> Result<(), FilterError> {
        loop {
            match self.peek_char() {
                Some(' ' | '\t' | '\n' | '\r' | '\u{c}') => {
                    self.bump();
                }
                Some('-') if self.peek_char_at(1) == Some('-') => {
                    while self.peek_char().is_some_and(|c| c != '\n' && c != '\r') {
                        self.bump();
                    }
                }
                Some('/') if self.peek_char_at(1) == Some('*') => {
                    let start = self.char_offset;
                    self.bump();
                    self.bump();
                    loop {
                        match self.bump() {
                            Some('*') if self.peek_char() == Some('/') => {
                                self.bump();
                                break;
                            }
                            Some(_) => {}
                            None => return Err(lex_error(start, "unterminated /* comment")),
                        }
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    pub(crate) fn next_token(&mut self) -> Result<Token<'a>, FilterError> {
        self.skip_trivia()?;
        let position = self.char_offset;
        let start_byte = self.byte_offset;
        let Some(c) = self.bump() else {
            return Ok(Token {
                kind: TokenKind::EndOfInput,
                position,
            });
        };
        let kind = match c {
            '(' => TokenKind::LeftParen,
            ')' => TokenKind::RightParen,
            ',' => TokenKind::Comma,
            '=' => TokenKind::Equal,
            '+' => TokenKind::Plus,
            '-' => TokenKind::Minus,
            '<' => match self.peek_char() {
                Some('>') => {
                    self.bump();
                    TokenKind::NotEqual
                }
                Some('=') => {
                    self.bump();
                    TokenKind::LessEqual
                }
                _ => TokenKind::Less,
            },
            '>' => {
                if self.peek_char() == Some('=') {
                    self.bump();
                    TokenKind::GreaterEqual
                } else {
                    TokenKind::Greater
                }
            }
            '\'' => self.string_literal(position)?,
            '.' if self.peek_char().is_some_and(|c| c.is_ascii_digit()) => {
                self.bump_digits();
                self.bump_exponent();
                TokenKind::Float(&self.text[start_byte..self.byte_offset])
            }
            '0'..='9' => self.number(c, start_byte),
            c if is_identifier_start(c) => {
                while self.peek_char().is_some_and(is_identifier_part) {
                    self.bump();
                }
                let word = &self.text[start_byte..self.byte_offset];
                match Keyword::from_word(word) {
                    Some(keyword) => TokenKind::Keyword(keyword),
                    None => TokenKind::Identifier(word),
                }
            }
            other => {
                return Err(lex_error(
                    position,
                    format!("unexpected character {other:?}"),
                ))
            }
        };
        Ok(Token { kind, position })
    }

    /// The opening quote is already consumed.
    fn string_literal(&mut self, position: usize) -> Result<TokenKind<'a>, FilterError> {
        let content_start = self.byte_offset;
        let mut has_escaped_quote = false;
        loop {
            match self.bump() {
                Some('\'') => {
                    if self.peek_char() == Some('\'') {
                        self.bump();
                        has_escaped_quote = true;
                    } else {
                        break;
                    }
                }
                Some(_) => {}
                None => return Err(lex_error(position, "unterminated string literal")),
            }
        }
        // The closing quote is one byte.
        let content = &self.text[content_start..self.byte_offset - 1];
        Ok(TokenKind::String(if has_escaped_quote {
            Cow::Owned(content.replace("''", "'"))
        } else {
            Cow::Borrowed(content)
        }))
    }

    /// `first` (a digit) is already consumed.
    fn number(&mut self, first: char, start_byte: usize) -> TokenKind<'a> {
        // Try the float forms first: they are the longer match whenever they apply
        // (`007.5` is a float even though `007` alone is three decimal tokens).
        let save = (self.byte_offset, self.char_offset);
        self.bump_digits();
        if self.peek_char() == Some('.') {
            self.bump();
            self.bump_digits();
            self.bump_exponent();
            return TokenKind::Float(&self.text[start_byte..self.byte_offset]);
        }
        if self.bump_exponent() {
            return TokenKind::Float(&self.text[start_byte..self.byte_offset]);
        }
        // DECIMAL_LITERAL: "0" | [1-9][0-9]*[lL]?
        if first == '0' {
            (self.byte_offset, self.char_offset) = save;
        } else if matches!(self.peek_char(), Some('l' | 'L')) {
            self.bump();
        }
        TokenKind::Decimal(&self.text[start_byte..self.byte_offset])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<TokenKind<'_>> {
        let mut lexer = Lexer::new(text);
        let mut out = Vec::new();
        loop {
            let token = lexer.next_token().expect("lexes");
            if token.kind == TokenKind::EndOfInput {
                return out;
            }
            out.push(token.kind);
        }
    }

    fn first_error(text: &str) -> FilterError {
        let mut lexer = Lexer::new(text);
        loop {
            match lexer.next_token() {
                Ok(token) if token.kind == TokenKind::EndOfInput => panic!("{text:?} lexed"),
                Ok(_) => {}
                Err(error) => return error,
            }
        }
    }

    #[test]
    fn operators_and_punctuation() {
        use TokenKind::*;
        assert_eq!(
            kinds("( ) , = <> < <= > >= + -"),
            vec![
                LeftParen,
                RightParen,
                Comma,
                Equal,
                NotEqual,
                Less,
                LessEqual,
                Greater,
                GreaterEqual,
                Plus,
                Minus
            ]
        );
        // No spaces needed; longest match.
        assert_eq!(kinds("a<>b"), kinds("a <> b"));
        assert_eq!(
            kinds("a>=-1"),
            vec![Identifier("a"), GreaterEqual, Minus, Decimal("1")]
        );
    }

    #[test]
    fn keywords_are_case_insensitive_and_identifiers_are_not_keywords() {
        use TokenKind::*;
        assert_eq!(
            kinds("not And oR BeTwEeN in true FALSE Null is contains StartsWith ENDSWITH"),
            super::Keyword::ALL
                .iter()
                .map(|(keyword, _)| Keyword(*keyword))
                .collect::<Vec<_>>()
        );
        assert_eq!(
            kinds("notx _a $b a1_$ Or1"),
            vec![
                Identifier("notx"),
                Identifier("_a"),
                Identifier("$b"),
                Identifier("a1_$"),
                Identifier("Or1")
            ]
        );
    }

    #[test]
    fn number_literals_follow_javacc_longest_match() {
        use TokenKind::*;
        assert_eq!(kinds("0"), vec![Decimal("0")]);
        assert_eq!(
            kinds("123 45L 6l"),
            vec![Decimal("123"), Decimal("45L"), Decimal("6l")]
        );
        assert_eq!(kinds("007"), vec![Decimal("0"), Decimal("0"), Decimal("7")]);
        assert_eq!(kinds("0L"), vec![Decimal("0"), Identifier("L")]);
        assert_eq!(kinds("007.5"), vec![Float("007.5")]);
        assert_eq!(
            kinds("1.5 .5 5. 5E10 5e-3 5.5E+2 .5e1"),
            vec![
                Float("1.5"),
                Float(".5"),
                Float("5."),
                Float("5E10"),
                Float("5e-3"),
                Float("5.5E+2"),
                Float(".5e1")
            ]
        );
        // An incomplete exponent is not part of the number.
        assert_eq!(kinds("5E"), vec![Decimal("5"), Identifier("E")]);
        assert_eq!(kinds("5e+"), vec![Decimal("5"), Identifier("e"), Plus]);
        assert_eq!(kinds("5.e"), vec![Float("5."), Identifier("e")]);
        assert_eq!(kinds("1.2.3"), vec![Float("1.2"), Float(".3")]);
        assert_eq!(kinds("12abc"), vec![Decimal("12"), Identifier("abc")]);
    }

    #[test]
    fn string_literals_decode_doubled_quotes() {
        use TokenKind::*;
        assert_eq!(kinds("'abc'"), vec![String(Cow::Borrowed("abc"))]);
        assert_eq!(kinds("''"), vec![String(Cow::Borrowed(""))]);
        assert_eq!(kinds("'it''s'"), vec![String(Cow::Owned("it's".into()))]);
        assert_eq!(kinds("''''"), vec![String(Cow::Owned("'".into()))]);
        assert_eq!(kinds("'a\nb'"), vec![String(Cow::Borrowed("a\nb"))]);
        assert_eq!(kinds("'ü€😀'"), vec![String(Cow::Borrowed("ü€😀"))]);
    }

    #[test]
    fn comments_and_whitespace_are_skipped() {
        use TokenKind::*;
        assert_eq!(
            kinds("a -- line comment\n= /* block * / comment **/ 1\t\r\u{c}"),
            vec![Identifier("a"), Equal, Decimal("1")]
        );
        // A line comment may end at end of input (documented difference from JavaCC).
        assert_eq!(kinds("a -- trailing"), vec![Identifier("a")]);
        assert_eq!(kinds("/**/a"), vec![Identifier("a")]);
    }

    #[test]
    fn positions_are_character_offsets() {
        let mut lexer = Lexer::new("'ü€' = x");
        assert_eq!(lexer.next_token().unwrap().position, 0);
        assert_eq!(lexer.next_token().unwrap().position, 5);
        let x = lexer.next_token().unwrap();
        assert_eq!(x.kind, TokenKind::Identifier("x"));
        assert_eq!(x.position, 7);
    }

    #[test]
    fn lexical_errors_carry_their_position() {
        let cases: [(&str, usize, &str); 8] = [
            ("a = 'abc", 4, "unterminated string"),
            ("a /* x", 2, "unterminated /* comment"),
            ("a = #", 4, "unexpected character '#'"),
            ("a != 1", 2, "unexpected character '!'"),
            ("a = 1 / 2", 6, "unexpected character '/'"),
            ("é = 1", 0, "unexpected character 'é'"),
            ("a\u{b}= 1", 1, "unexpected character"),
            ("a = .", 4, "unexpected character '.'"),
        ];
        for (text, position, message) in cases {
            match first_error(text) {
                FilterError::Parse {
                    position: got,
                    message: got_message,
                } => {
                    assert_eq!(got, position, "{text:?}");
                    assert!(got_message.contains(message), "{text:?}: {got_message}");
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
    }
}
