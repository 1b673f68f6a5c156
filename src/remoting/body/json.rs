//! Lenient JSON reading for bodies written by Java (fastjson).
//!
//! fastjson's default serializer writes non-string map keys without quotes
//! (`"brokerAddrs":{0:"10.0.0.1:10911"}`, apache/rocketmq issue #1445). That is not JSON, so a
//! strict parser rejects it. Every body we read first goes through serde_json as is; only when
//! that fails do we quote bare integer keys ([`quote_bare_integer_keys`]) and try once more.
//! Unknown members are ignored (no `deny_unknown_fields` anywhere), because Java adds fields
//! between versions.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use std::borrow::Cow;

/// A JSON body that could not be read even after quoting bare integer keys.
#[derive(Debug, thiserror::Error)]
#[error("invalid {what} JSON: {source}")]
pub struct JsonBodyError {
    /// Which body was being read (for the response remark).
    pub what: &'static str,
    #[source]
    pub source: serde_json::Error,
}

/// Parses `bytes` as `T`, accepting fastjson's legacy unquoted integer map keys.
///
/// `what` names the body in the error (`"RegisterBrokerBody"`).
pub fn parse_lenient<T: DeserializeOwned>(
    bytes: &[u8],
    what: &'static str,
) -> Result<T, JsonBodyError> {
    match serde_json::from_slice(bytes) {
        Ok(value) => Ok(value),
        Err(strict_err) => match quote_bare_integer_keys(bytes) {
            // Nothing to quote: the strict error is the honest one.
            Cow::Borrowed(_) => Err(JsonBodyError {
                what,
                source: strict_err,
            }),
            Cow::Owned(quoted) => {
                serde_json::from_slice(&quoted).map_err(|source| JsonBodyError { what, source })
            }
        },
    }
}

/// Returns `text` with every bare (unquoted) integer object key wrapped in double quotes:
/// `{0:"a",-1:"b"}` becomes `{"0":"a","-1":"b"}`. Text inside strings is never touched, and
/// integers in value position stay as they are. Returns `Cow::Borrowed` when nothing changed.
///
/// A key position is the first token after `{` or after a `,` that belongs to an object (not an
/// array); the scanner keeps a stack of open brackets to tell the two apart. The output is at
/// most `text.len() + 2 * (number of keys)` bytes, so it is bounded by twice the input.
pub fn quote_bare_integer_keys(text: &[u8]) -> Cow<'_, [u8]> {
    // One linear scan; most bodies are standard JSON and come back borrowed.
    let mut state = ScanState::default();
    let Some(mut key) = next_bare_key(text, 0, &mut state) else {
        return Cow::Borrowed(text);
    };
    let mut out = Vec::with_capacity(text.len() + 16);
    let mut copied_to = 0;
    loop {
        let (start, end) = key;
        out.extend_from_slice(&text[copied_to..start]);
        out.push(b'"');
        out.extend_from_slice(&text[start..end]);
        out.push(b'"');
        copied_to = end;
        match next_bare_key(text, end, &mut state) {
            Some(next) => key = next,
            None => break,
        }
    }
    out.extend_from_slice(&text[copied_to..]);
    Cow::Owned(out)
}

/// Scanner state carried between calls of [`next_bare_key`].
#[derive(Default)]
struct ScanState {
    /// Open brackets, innermost last: `true` = object, `false` = array.
    open_is_object: Vec<bool>,
    /// The next non-blank token is in key position.
    expect_key: bool,
}

/// Finds the next bare integer key at or after `from`; returns its byte range `[start, end)`.
fn next_bare_key(text: &[u8], from: usize, state: &mut ScanState) -> Option<(usize, usize)> {
    let mut i = from;
    while i < text.len() {
        let byte = text[i];
        match byte {
            b'"' => {
                state.expect_key = false;
                i = skip_string(text, i);
                continue;
            }
            b'{' => {
                state.open_is_object.push(true);
                state.expect_key = true;
            }
            b'[' => {
                state.open_is_object.push(false);
                state.expect_key = false;
            }
            b'}' | b']' => {
                state.open_is_object.pop();
                state.expect_key = false;
            }
            b',' => {
                state.expect_key = state.open_is_object.last().copied().unwrap_or(false);
            }
            b' ' | b'\t' | b'\r' | b'\n' => {}
            b'-' | b'0'..=b'9' if state.expect_key => {
                state.expect_key = false;
                let start = i;
                let mut end = i + 1;
                while end < text.len() && text[end].is_ascii_digit() {
                    end += 1;
                }
                let has_digit = text[start..end].iter().any(u8::is_ascii_digit);
                // Only a key when a colon follows (after optional blanks).
                let mut after = end;
                while after < text.len() && matches!(text[after], b' ' | b'\t' | b'\r' | b'\n') {
                    after += 1;
                }
                if has_digit && after < text.len() && text[after] == b':' {
                    return Some((start, end));
                }
                i = end;
                continue;
            }
            _ => state.expect_key = false,
        }
        i += 1;
    }
    None
}

/// `start` is at an opening quote; returns the index just past the closing quote (or the end of
/// the text for an unterminated string, which the JSON parser will then reject).
fn skip_string(text: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    while i < text.len() {
        match text[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    text.len()
}

/// serde helper: a JSON `null` (fastjson writes it for some unset fields) reads as the default.
pub fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn quoted(text: &str) -> String {
        String::from_utf8(quote_bare_integer_keys(text.as_bytes()).into_owned()).unwrap()
    }

    #[test]
    fn quotes_bare_integer_keys() {
        assert_eq!(
            quoted(r#"{"brokerAddrs":{0:"a:1",1:"b:2"}}"#),
            r#"{"brokerAddrs":{"0":"a:1","1":"b:2"}}"#
        );
        assert_eq!(
            quoted("{ -1 : 5 ,\n 12:7}"),
            r#"{ "-1" : 5 ,
 "12":7}"#
        );
    }

    #[test]
    fn standard_json_is_borrowed_unchanged() {
        let text = br#"{"a":[1,2,{"3":4}],"b":"x"}"#;
        assert!(matches!(quote_bare_integer_keys(text), Cow::Borrowed(_)));
    }

    #[test]
    fn leaves_strings_values_and_arrays_alone() {
        // A string that looks like an object with bare keys, escaped quotes, numbers in arrays
        // and in value position must all survive untouched.
        let text = r#"{"s":"{0:1,\"2:\":3}","arr":[1, 2,3],"v":10,"o":{7:[8,9]}}"#;
        assert_eq!(
            quoted(text),
            r#"{"s":"{0:1,\"2:\":3}","arr":[1, 2,3],"v":10,"o":{"7":[8,9]}}"#
        );
    }

    #[test]
    fn arrays_of_objects_keep_key_tracking() {
        assert_eq!(quoted(r#"[{0:"a"},{1:"b"}]"#), r#"[{"0":"a"},{"1":"b"}]"#);
    }

    #[test]
    fn parse_lenient_reads_legacy_and_standard() {
        #[derive(Deserialize)]
        struct Offsets {
            #[serde(rename = "offsetTable")]
            offset_table: BTreeMap<String, BTreeMap<i32, i64>>,
        }
        let legacy = br#"{"offsetTable":{"t@g":{0:120,1:98}},"unknown":true}"#;
        let parsed: Offsets = parse_lenient(legacy, "test").unwrap();
        assert_eq!(parsed.offset_table["t@g"][&1], 98);
        let standard = br#"{"offsetTable":{"t@g":{"0":5}}}"#;
        let parsed: Offsets = parse_lenient(standard, "test").unwrap();
        assert_eq!(parsed.offset_table["t@g"][&0], 5);
    }

    #[test]
    fn parse_lenient_reports_bad_json() {
        let err = parse_lenient::<BTreeMap<String, i32>>(b"{\"a\":", "Thing").unwrap_err();
        assert!(err.to_string().starts_with("invalid Thing JSON"), "{err}");
        assert!(parse_lenient::<BTreeMap<String, i32>>(b"{0:", "Thing").is_err());
    }

    proptest::proptest! {
        /// Legacy text built from arbitrary keys and hostile string values (quotes, braces,
        /// colons, digits, backslashes) quotes back to exactly the standard text and parses to
        /// the same document; the standard text passes through unchanged.
        #[test]
        fn legacy_quotes_back_to_standard(
            map in proptest::collection::btree_map(proptest::num::i64::ANY, "[0-9a-z:{},\\[\\]\"\\\\ ]{0,12}", 0..6),
            name in "[a-z\"{}0-9:]{0,8}",
        ) {
            let text = |m: &BTreeMap<i64, String>, quote_keys: bool| {
                let q = if quote_keys { "\"" } else { "" };
                let entries = m
                    .iter()
                    .map(|(k, v)| format!("{q}{k}{q}:{}", serde_json::to_string(v).unwrap()))
                    .collect::<Vec<_>>()
                    .join(",");
                format!(
                    "{{\"l\":[{{{entries}}}],\"m\":{{{entries}}},\"name\":{}}}",
                    serde_json::to_string(&name).unwrap()
                )
            };
            let (legacy, standard) = (text(&map, false), text(&map, true));
            proptest::prop_assert_eq!(quoted(&legacy), standard.clone());
            proptest::prop_assert!(matches!(quote_bare_integer_keys(standard.as_bytes()), Cow::Borrowed(_)));
            #[derive(Deserialize, PartialEq, Debug)]
            struct Doc { l: Vec<BTreeMap<i64, String>>, m: BTreeMap<i64, String>, name: String }
            let parsed: Doc = parse_lenient(legacy.as_bytes(), "Doc").unwrap();
            proptest::prop_assert_eq!(parsed, Doc { l: vec![map.clone()], m: map, name });
        }
    }

    #[test]
    fn null_reads_as_default() {
        #[derive(Deserialize)]
        struct S {
            #[serde(deserialize_with = "null_as_default")]
            m: BTreeMap<String, String>,
        }
        let s: S = serde_json::from_str(r#"{"m":null}"#).unwrap();
        assert!(s.m.is_empty());
    }
}
