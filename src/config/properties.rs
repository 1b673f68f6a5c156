//! The text format of `java.util.Properties`, which RocketMQ's `BrokerStartup` reads broker.conf
//! with (`Properties.load`), so a file written for the Java broker reads the same here.
//!
//! - Lines end with `\n`, `\r` or `\r\n`. Whitespace (space, tab, form feed) before a key is
//!   skipped; blank lines are skipped.
//! - A line whose first non-blank character is `#` or `!` is a comment (only at the start of an
//!   entry: a continued line starting with `#` is content, and a comment never continues).
//! - An odd number of backslashes at the end of a line joins the next line, whose leading
//!   whitespace is dropped; an empty next line ends the entry.
//! - The key ends at the first unescaped `=`, `:` or whitespace; blanks around that separator
//!   are skipped, and a blank separator may be followed by one `=` or `:` (`key = value`).
//! - In keys and values `\t`, `\n`, `\r`, `\f` and `\uXXXX` are escapes and `\c` is `c` for any
//!   other character; a malformed `\u` is an error, as Java's `IllegalArgumentException`.
//! - A value keeps its trailing whitespace (Java does; the broker.conf reader trims it).

/// One `key=value` entry and the line it starts on (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Property {
    pub key: String,
    pub value: String,
    pub line: usize,
}

/// A `\u` escape not followed by four hex digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: malformed \\uXXXX escape in `{text}`")]
pub struct PropertiesError {
    pub line: usize,
    pub text: String,
}

/// The entries of `text` in file order (a key set twice appears twice; the last one wins, as in
/// Java's `Hashtable`).
pub fn parse(text: &str) -> Result<Vec<Property>, PropertiesError> {
    let lines = natural_lines(text);
    let mut entries = Vec::new();
    let mut next = 0;
    while next < lines.len() {
        let (line, raw) = lines[next];
        next += 1;
        let first = skip_blanks(raw);
        if first.is_empty() || first.starts_with(['#', '!']) {
            continue;
        }
        let mut logical: Vec<char> = first.chars().collect();
        while ends_in_odd_backslashes(&logical) {
            logical.pop();
            let Some(&(_, continued)) = lines.get(next) else {
                break;
            };
            next += 1;
            let continued = skip_blanks(continued);
            if continued.is_empty() {
                break;
            }
            logical.extend(continued.chars());
        }
        let (key, value) = split_entry(&logical);
        let unescape = |chars: &[char]| {
            unescape(chars).ok_or_else(|| PropertiesError {
                line,
                text: logical.iter().collect(),
            })
        };
        entries.push(Property {
            key: unescape(key)?,
            value: unescape(value)?,
            line,
        });
    }
    Ok(entries)
}

fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\u{c}')
}

fn skip_blanks(s: &str) -> &str {
    s.trim_start_matches(is_blank)
}

/// The file's lines with their 1-based numbers, split at `\n`, `\r` and `\r\n`.
fn natural_lines(text: &str) -> Vec<(usize, &str)> {
    let mut lines = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\n' || bytes[i] == b'\r' {
            lines.push((lines.len() + 1, &text[start..i]));
            if bytes[i] == b'\r' && bytes.get(i + 1) == Some(&b'\n') {
                i += 1;
            }
            start = i + 1;
        }
        i += 1;
    }
    if start < text.len() {
        lines.push((lines.len() + 1, &text[start..]));
    }
    lines
}

fn ends_in_odd_backslashes(chars: &[char]) -> bool {
    chars.iter().rev().take_while(|&&c| c == '\\').count() % 2 == 1
}

/// Splits a logical line into its raw (still escaped) key and value.
fn split_entry(chars: &[char]) -> (&[char], &[char]) {
    let mut key_end = chars.len();
    let mut value_start = chars.len();
    let mut has_separator = false;
    let mut escaped = false;
    for (i, &c) in chars.iter().enumerate() {
        if !escaped && (c == '=' || c == ':' || is_blank(c)) {
            key_end = i;
            value_start = i + 1;
            has_separator = c == '=' || c == ':';
            break;
        }
        escaped = c == '\\' && !escaped;
    }
    while let Some(&c) = chars.get(value_start) {
        if is_blank(c) {
            value_start += 1;
        } else if !has_separator && (c == '=' || c == ':') {
            has_separator = true;
            value_start += 1;
        } else {
            break;
        }
    }
    (&chars[..key_end], &chars[value_start.min(chars.len())..])
}

/// Resolves the escapes; `None` for a malformed `\uXXXX`.
fn unescape(chars: &[char]) -> Option<String> {
    let mut out = String::with_capacity(chars.len());
    let mut rest = chars.iter();
    while let Some(&c) = rest.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match rest.next() {
            Some('u') => {
                let mut code = 0u32;
                for _ in 0..4 {
                    code = code * 16 + rest.next()?.to_digit(16)?;
                }
                // A lone UTF-16 surrogate has no char; Java keeps it, ringmq replaces it.
                out.push(char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER));
            }
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some(&other) => out.push(other),
            // Only at the very end of the file (a continuation with nothing after it).
            None => {}
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(String, String)> {
        parse(text)
            .unwrap()
            .into_iter()
            .map(|p| (p.key, p.value))
            .collect()
    }

    fn pair(key: &str, value: &str) -> (String, String) {
        (key.to_string(), value.to_string())
    }

    #[test]
    fn the_three_separators_and_blanks_around_them() {
        assert_eq!(
            pairs("a=1\nb: 2\nc 3\n  d   =   4\ne\t:\t5\nf = = 6\ng\n"),
            vec![
                pair("a", "1"),
                pair("b", "2"),
                pair("c", "3"),
                pair("d", "4"),
                pair("e", "5"),
                pair("f", "= 6"),
                pair("g", ""),
            ]
        );
        // Trailing blanks stay in the value, as in Java.
        assert_eq!(pairs("k = v  "), vec![pair("k", "v  ")]);
    }

    #[test]
    fn comments_and_blank_lines() {
        let text =
            "# a comment\n! another\n\n   \n  # indented comment \\\nkey=value # not a comment\n";
        assert_eq!(pairs(text), vec![pair("key", "value # not a comment")]);
    }

    #[test]
    fn continuation_lines() {
        assert_eq!(
            pairs("list = a,\\\n       b,\\\n  # c\nnext=1"),
            vec![pair("list", "a,b,# c"), pair("next", "1")]
        );
        // An even number of backslashes is an escaped backslash, not a continuation.
        assert_eq!(
            pairs("path=C:\\\\\nx=1"),
            vec![pair("path", "C:\\"), pair("x", "1")]
        );
        // An empty line ends a continued entry; a continuation at the end of the file too.
        assert_eq!(
            pairs("a=1\\\n\nb=2\\"),
            vec![pair("a", "1"), pair("b", "2")]
        );
    }

    #[test]
    fn escapes_in_keys_and_values() {
        assert_eq!(
            pairs(r"my\ key\=x=tab\there\nnl\:\\ \q"),
            vec![pair("my key=x", "tab\there\nnl:\\ q")]
        );
        assert_eq!(pairs(r"k=\ leading"), vec![pair("k", " leading")]);
    }

    #[test]
    fn unicode_escapes() {
        assert_eq!(
            pairs(r"name=caf\u00e9 \u4E2D"),
            vec![pair("name", "café 中")]
        );
        let err = parse("ok=1\nbad=\\u12G4\n").unwrap_err();
        assert_eq!(err.line, 2);
        assert!(err.to_string().contains("malformed"), "{err}");
        assert!(parse("bad=\\u12").is_err());
    }

    #[test]
    fn line_numbers_and_line_ends() {
        let entries = parse("\r\n# x\r\na=1\rb=2\\\r\n 3\nc=4").unwrap();
        let lines: Vec<(&str, &str, usize)> = entries
            .iter()
            .map(|p| (p.key.as_str(), p.value.as_str(), p.line))
            .collect();
        assert_eq!(lines, vec![("a", "1", 3), ("b", "23", 4), ("c", "4", 6)]);
    }
}
