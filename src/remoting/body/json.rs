//! Lenient JSON reading for bodies written by Java (fastjson).
//!
//! fastjson's default serializer writes non-string map keys without quotes
//! (`"brokerAddrs":{0:"10.0.0.1:10911"}`, apache/rocketmq issue #1445). That is not JSON, so a
//! strict parser rejects it. Every body we read first goes through serde_json as is; only when
//! that fails do we quote bare integer keys ([`quote_bare_integer_keys`]) and try once more.
//! Unknown members are ignored (no `deny_unknown_fields` anywhere), because Java adds fields
//! between versions.
//!
//! fastjson is also lenient about the type of a member, and the C++ client cores
//! (rocketmq-client-cpp, under the Go, Python and Node bindings) rely on it: they write Java
//! enums as ordinals, some numbers as strings and booleans as 0/1. [`lenient`] (with the
//! [`Lenient`] newtype behind it) reads a field of a Java scalar type, or a list, set or map of
//! them, the way fastjson does; [`JavaEnum`] reads an enum by name or by ordinal and normalises
//! it to the Java name.

use serde::de::{self, DeserializeOwned, Unexpected, Visitor};
use serde::{Deserialize, Deserializer};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

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
pub(super) fn skip_string(text: &[u8], start: usize) -> usize {
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

/// A Java member type that fastjson reads leniently (see [`lenient`]).
pub trait LenientField: Sized {
    /// Reads `Self` from any JSON form fastjson would convert to it.
    fn deserialize_lenient<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error>;
}

/// A value of a Java member of type `T`, read as fastjson reads it: for collections of them
/// and for reading one on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Lenient<T>(pub T);

impl<'de, T: LenientField> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize_lenient(deserializer).map(Lenient)
    }
}

/// serde `deserialize_with` for a member of a Java scalar type, or a list, set or map of them,
/// read as fastjson reads it:
///
/// - `String`: a string, a number (its text) or a boolean (`"true"`/`"false"`);
/// - `i32`, `i64`: a number, an integral decimal (`11.0`), a numeric string (`"11"`, Java's
///   `parseLong` grammar; `""` is 0) or a boolean (1/0); out of range is an error;
/// - `bool`: `true`/`false`, `0`/`1`, or those as strings (`"true"` in any case, `"1"`);
/// - `Option<T>`: `null` is `None`, anything else is read as `T`;
/// - `Vec<T>`, `BTreeSet<T>`, `BTreeMap<K, T>`: each element or value as `T`.
///
/// `null` reads as the default everywhere (fastjson leaves the Java field at its default).
pub fn lenient<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: LenientField,
{
    T::deserialize_lenient(deserializer)
}

impl LenientField for String {
    fn deserialize_lenient<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StringVisitor)
    }
}

struct StringVisitor;

impl Visitor<'_> for StringVisitor {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string, a number or a boolean")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        Ok(v.to_owned())
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<String, E> {
        Ok(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_unit<E: de::Error>(self) -> Result<String, E> {
        Ok(String::new())
    }
}

/// Reads any JSON integer form as an `i128`, wide enough for every Java integer type, so the
/// range check happens once, against the field's own type.
struct IntegerVisitor;

impl Visitor<'_> for IntegerVisitor {
    type Value = i128;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an integer, an integral decimal or a numeric string")
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<i128, E> {
        Ok(i128::from(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<i128, E> {
        Ok(i128::from(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<i128, E> {
        // 2^63 bounds every Java integer type; beyond it (or with a fraction) it is no integer
        // a Java field could hold.
        const LIMIT: f64 = 9_223_372_036_854_775_808.0;
        if v.fract() == 0.0 && v.abs() <= LIMIT {
            // Integral and within ±2^63 (checked above), so the cast is exact.
            Ok(v as i128)
        } else {
            Err(E::invalid_value(Unexpected::Float(v), &self))
        }
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<i128, E> {
        // fastjson treats an empty string as null. Otherwise Java's grammar: an optional sign,
        // then ASCII digits (i128's parser takes exactly that, with no blanks).
        if v.is_empty() {
            return Ok(0);
        }
        v.parse()
            .map_err(|_| E::invalid_value(Unexpected::Str(v), &self))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<i128, E> {
        Ok(i128::from(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<i128, E> {
        Ok(0)
    }
}

/// `i32`, `i64`: any integer form, range-checked against the Java type.
macro_rules! lenient_integer {
    ($($int:ty => $java:literal),*) => {$(
        impl LenientField for $int {
            fn deserialize_lenient<'de, D: Deserializer<'de>>(
                deserializer: D,
            ) -> Result<Self, D::Error> {
                let wide = deserializer.deserialize_any(IntegerVisitor)?;
                <$int>::try_from(wide).map_err(|_| {
                    de::Error::custom(format_args!("{wide} is out of range for a Java {}", $java))
                })
            }
        }
    )*};
}

lenient_integer!(i32 => "int", i64 => "long");

impl LenientField for bool {
    fn deserialize_lenient<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(BoolVisitor)
    }
}

struct BoolVisitor;

impl Visitor<'_> for BoolVisitor {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a boolean, 0 or 1")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<bool, E> {
        Ok(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<bool, E> {
        match v {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(E::invalid_value(Unexpected::Signed(v), &self)),
        }
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<bool, E> {
        match v {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(E::invalid_value(Unexpected::Unsigned(v), &self)),
        }
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
        if v.eq_ignore_ascii_case("true") || v == "1" {
            Ok(true)
        } else if v.eq_ignore_ascii_case("false") || v == "0" || v.is_empty() {
            Ok(false)
        } else {
            Err(E::invalid_value(Unexpected::Str(v), &self))
        }
    }

    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
}

impl<T: LenientField> LenientField for Option<T> {
    fn deserialize_lenient<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Option::<Lenient<T>>::deserialize(deserializer)?;
        Ok(value.map(|inner| inner.0))
    }
}

impl<T: LenientField> LenientField for Vec<T> {
    fn deserialize_lenient<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let items = Option::<Vec<Lenient<T>>>::deserialize(deserializer)?.unwrap_or_default();
        Ok(items.into_iter().map(|item| item.0).collect())
    }
}

impl<T: LenientField + Ord> LenientField for BTreeSet<T> {
    fn deserialize_lenient<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let items = Option::<Vec<Lenient<T>>>::deserialize(deserializer)?.unwrap_or_default();
        Ok(items.into_iter().map(|item| item.0).collect())
    }
}

impl<K: DeserializeOwned + Ord, V: LenientField> LenientField for BTreeMap<K, V> {
    fn deserialize_lenient<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = Option::<BTreeMap<K, Lenient<V>>>::deserialize(deserializer)?.unwrap_or_default();
        Ok(map.into_iter().map(|(k, v)| (k, v.0)).collect())
    }
}

/// A Java enum as fastjson reads it: by constant name or by ordinal. Field types stay `String`
/// holding Java's constant name, because the broker compares and reports names
/// (`messageModel == "BROADCASTING"`); the C++ cores write the ordinal, so it is normalised
/// here, on input.
#[derive(Debug, Clone, Copy)]
pub struct JavaEnum {
    /// The Java enum's simple name, for error messages.
    pub name: &'static str,
    /// Its constants in declaration order: the index is the ordinal.
    pub constants: &'static [&'static str],
}

impl JavaEnum {
    /// Reads a constant: a name (exact, or in another case: normalised to Java's), an ordinal as
    /// a number or a numeric string, or `null` (the empty string, Java's null). A name this
    /// table does not know is kept as sent (a newer client's constant); an ordinal it does not
    /// know is an error, as in fastjson.
    pub fn deserialize<'de, D: Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<String, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn by_ordinal<E: de::Error>(self, ordinal: u64, unexpected: Unexpected) -> Result<String, E> {
        usize::try_from(ordinal)
            .ok()
            .and_then(|index| self.constants.get(index))
            .map(|name| (*name).to_owned())
            .ok_or_else(|| E::invalid_value(unexpected, &self))
    }
}

impl Visitor<'_> for JavaEnum {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "a {} name or an ordinal below {}",
            self.name,
            self.constants.len()
        )
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        // A Java constant name never parses as an integer, so any integer text is an ordinal.
        if let Ok(ordinal) = v.parse::<i64>() {
            return match u64::try_from(ordinal) {
                Ok(ordinal) => self.by_ordinal(ordinal, Unexpected::Str(v)),
                Err(_) => Err(E::invalid_value(Unexpected::Str(v), &self)),
            };
        }
        let known = self
            .constants
            .iter()
            .find(|name| name.eq_ignore_ascii_case(v));
        Ok(known.map_or(v, |name| *name).to_owned())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
        self.by_ordinal(v, Unexpected::Unsigned(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
        match u64::try_from(v) {
            Ok(ordinal) => self.by_ordinal(ordinal, Unexpected::Signed(v)),
            Err(_) => Err(E::invalid_value(Unexpected::Signed(v), &self)),
        }
    }

    fn visit_unit<E: de::Error>(self) -> Result<String, E> {
        Ok(String::new())
    }
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

    /// Every Java scalar type, and collections of them, the way fastjson writes and the C++
    /// cores write them.
    #[derive(Deserialize, Debug, Default, PartialEq)]
    #[serde(default)]
    struct Scalars {
        #[serde(deserialize_with = "lenient")]
        s: String,
        #[serde(deserialize_with = "lenient")]
        i: i32,
        #[serde(deserialize_with = "lenient")]
        l: i64,
        #[serde(deserialize_with = "lenient")]
        b: bool,
        #[serde(deserialize_with = "lenient")]
        o: Option<String>,
        #[serde(deserialize_with = "lenient")]
        codes: BTreeSet<i32>,
        #[serde(deserialize_with = "lenient")]
        names: Vec<String>,
        #[serde(deserialize_with = "lenient")]
        map: BTreeMap<String, String>,
    }

    fn scalars(text: &str) -> Scalars {
        parse_lenient(text.as_bytes(), "Scalars").unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn numbers_strings_and_booleans_cross_over() {
        let typed = scalars(
            r#"{"s":"x","i":7,"l":1700000000000,"b":true,"o":"TAG","codes":[97,98],"names":["a"],"map":{"k":"v"}}"#,
        );
        let crossed = scalars(
            r#"{"s":"x","i":"7","l":"1700000000000","b":"true","o":"TAG","codes":["97",98.0],"names":["a"],"map":{"k":"v"}}"#,
        );
        assert_eq!(typed, crossed);
        assert_eq!(typed.codes, BTreeSet::from([97, 98]));
        let other =
            scalars(r#"{"s":12,"i":7.0,"l":-3,"b":1,"o":5,"names":[1,true],"map":{"k":2}}"#);
        assert_eq!((other.s.as_str(), other.i, other.l), ("12", 7, -3));
        assert!(other.b);
        assert_eq!(other.o.as_deref(), Some("5"));
        assert_eq!(other.names, ["1", "true"]);
        assert_eq!(other.map["k"], "2");
        for (text, want) in [
            ("0", false),
            ("\"0\"", false),
            ("\"FALSE\"", false),
            ("\"\"", false),
            ("\"True\"", true),
        ] {
            assert_eq!(scalars(&format!(r#"{{"b":{text}}}"#)).b, want, "{text}");
        }
    }

    #[test]
    fn null_and_missing_are_defaults() {
        let nulls = scalars(
            r#"{"s":null,"i":null,"l":"","b":null,"o":null,"codes":null,"names":null,"map":null}"#,
        );
        assert_eq!(nulls, Scalars::default());
        assert_eq!(scalars("{}"), Scalars::default());
    }

    #[test]
    fn impossible_values_are_errors() {
        for text in [
            r#"{"i":2147483648}"#,
            r#"{"i":"12a"}"#,
            r#"{"i":" 1"}"#,
            r#"{"l":1.5}"#,
            r#"{"l":"9223372036854775808"}"#,
            r#"{"b":2}"#,
            r#"{"b":"yes"}"#,
            r#"{"s":[1]}"#,
            r#"{"codes":[{}]}"#,
        ] {
            let err = parse_lenient::<Scalars>(text.as_bytes(), "Scalars").unwrap_err();
            // The serde error stays the source, so the remark says what was wrong.
            assert!(std::error::Error::source(&err).is_some(), "{text}");
        }
        let err = parse_lenient::<Scalars>(br#"{"i":2147483648}"#, "Scalars").unwrap_err();
        assert!(
            err.to_string().contains("out of range for a Java int"),
            "{err}"
        );
    }

    const COLOR: JavaEnum = JavaEnum {
        name: "Color",
        constants: &["RED", "GREEN"],
    };

    fn color(text: &str) -> Result<String, serde_json::Error> {
        COLOR.deserialize(&mut serde_json::Deserializer::from_str(text))
    }

    #[test]
    fn java_enums_read_by_name_or_ordinal() {
        for (text, want) in [
            ("0", "RED"),
            ("1", "GREEN"),
            (r#""1""#, "GREEN"),
            (r#""GREEN""#, "GREEN"),
            (r#""green""#, "GREEN"),
            (r#""BLUE""#, "BLUE"),
            ("null", ""),
        ] {
            assert_eq!(color(text).unwrap(), want, "{text}");
        }
        for text in ["2", "-1", r#""7""#, r#""-1""#, "true", "1.5"] {
            let err = color(text).unwrap_err();
            assert!(err.to_string().contains("Color"), "{text}: {err}");
        }
    }
}
