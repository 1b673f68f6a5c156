//! Maps keyed by objects, as fastjson writes them.
//!
//! Java's admin bodies (`TopicStatsTable`, `ConsumeStats`) are `Map<MessageQueue, …>`, and
//! fastjson writes a map key that is an object as that object, unquoted:
//! `{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"maxOffset":3}}}`. That is not
//! JSON, but it is what the Java broker sends, what mqadmin and the dashboard read, and what
//! rocketmq-rust's protocol crate normalises on input; so ringmq writes it the same way
//! ([`write_object_key_map`]) and reads it back by first turning each object key into a string
//! holding its JSON text ([`quote_object_keys`]), then parsing those strings
//! ([`object_key_map`]). A body whose keys are already such strings (rocketmq-rust's
//! `any_key_map` form) reads the same way.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};

use super::json::{parse_lenient, skip_string, JsonBodyError};

/// Writes `entries` as a fastjson object-keyed map: each key as its JSON object with members
/// sorted by name (fastjson's order), each value as its JSON.
pub fn write_object_key_map<'a, K, V>(
    out: &mut String,
    entries: impl IntoIterator<Item = (&'a K, &'a V)>,
) -> Result<(), serde_json::Error>
where
    K: Serialize + 'a,
    V: Serialize + 'a,
{
    out.push('{');
    for (i, (key, value)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        // A `Value` object is a BTreeMap here: its members come out sorted.
        out.push_str(&serde_json::to_value(key)?.to_string());
        out.push(':');
        out.push_str(&serde_json::to_string(value)?);
    }
    out.push('}');
    Ok(())
}

/// Returns `text` with every object that stands in key position replaced by a JSON string of
/// its text: `{{"a":1}:2}` becomes `{"{\"a\":1}":2}`. Strings are never touched. Returns
/// `Cow::Borrowed` when there is no such key. The output is at most twice the input plus two
/// bytes per key.
pub fn quote_object_keys(text: &[u8]) -> Cow<'_, [u8]> {
    let mut out: Option<Vec<u8>> = None;
    let mut copied_to = 0;
    // Open brackets, innermost last: true = object.
    let mut open_is_object: Vec<bool> = Vec::new();
    let mut expect_key = false;
    let mut i = 0;
    while i < text.len() {
        match text[i] {
            b'"' => {
                expect_key = false;
                i = skip_string(text, i);
                continue;
            }
            b'{' if expect_key => {
                let end = matching_brace(text, i);
                let buf = out.get_or_insert_with(|| Vec::with_capacity(text.len() * 2));
                buf.extend_from_slice(&text[copied_to..i]);
                buf.push(b'"');
                for &b in &text[i..end] {
                    match b {
                        b'"' | b'\\' => buf.extend_from_slice(&[b'\\', b]),
                        b'\n' | b'\r' | b'\t' => buf.push(b' '),
                        _ => buf.push(b),
                    }
                }
                buf.push(b'"');
                copied_to = end;
                expect_key = false;
                i = end;
                continue;
            }
            b'{' => {
                open_is_object.push(true);
                expect_key = true;
            }
            b'[' => {
                open_is_object.push(false);
                expect_key = false;
            }
            b'}' | b']' => {
                open_is_object.pop();
                expect_key = false;
            }
            b',' => expect_key = open_is_object.last().copied().unwrap_or(false),
            b' ' | b'\t' | b'\r' | b'\n' => {}
            _ => expect_key = false,
        }
        i += 1;
    }
    match out {
        None => Cow::Borrowed(text),
        Some(mut buf) => {
            buf.extend_from_slice(&text[copied_to..]);
            Cow::Owned(buf)
        }
    }
}

/// `start` is at `{`; the index just past its matching `}` (or the end of the text, which the
/// JSON parser then rejects).
fn matching_brace(text: &[u8], start: usize) -> usize {
    let mut depth = 0usize;
    let mut i = start;
    while i < text.len() {
        match text[i] {
            b'"' => {
                i = skip_string(text, i);
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    text.len()
}

/// Parses a body that may hold object-keyed maps (and fastjson's bare integer keys).
pub fn parse_with_object_keys<T: DeserializeOwned>(
    bytes: &[u8],
    what: &'static str,
) -> Result<T, JsonBodyError> {
    parse_lenient(&quote_object_keys(bytes), what)
}

/// serde `deserialize_with` for a map whose keys are objects written as JSON strings (after
/// [`quote_object_keys`]): each key string is parsed, leniently, as `K`.
pub fn object_key_map<'de, D, K, V>(deserializer: D) -> Result<BTreeMap<K, V>, D::Error>
where
    D: Deserializer<'de>,
    K: DeserializeOwned + Ord,
    V: Deserialize<'de>,
{
    let raw = Option::<BTreeMap<String, V>>::deserialize(deserializer)?.unwrap_or_default();
    raw.into_iter()
        .map(|(key, value)| {
            parse_lenient::<K>(key.as_bytes(), "map key")
                .map(|k| (k, value))
                .map_err(|e| serde::de::Error::custom(format!("key {key:?}: {}", e.source)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remoting::body::lock_batch::MessageQueue;

    #[test]
    fn object_keys_become_strings_and_strings_stay() {
        let text =
            br#"{"t":{{"a":"x}","b":[1,{"c":2}]}:3, {"d":1} :{"e":{"f":1}}},"s":"{\"k\":1}:"}"#;
        let quoted = quote_object_keys(text);
        let v: serde_json::Value = serde_json::from_slice(&quoted).unwrap();
        let t = v["t"].as_object().unwrap();
        assert_eq!(t[r#"{"a":"x}","b":[1,{"c":2}]}"#], 3);
        assert_eq!(t[r#"{"d":1}"#]["e"]["f"], 1);
        assert_eq!(v["s"], r#"{"k":1}:"#);
        assert!(matches!(
            quote_object_keys(br#"{"a":{"b":1}}"#),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn object_key_map_round_trips_with_sorted_key_members() {
        let mq = MessageQueue {
            topic: "T".into(),
            broker_name: "b".into(),
            queue_id: 2,
        };
        let mut out = String::new();
        write_object_key_map(&mut out, [(&mq, &5i64)]).unwrap();
        assert_eq!(out, r#"{{"brokerName":"b","queueId":2,"topic":"T"}:5}"#);

        #[derive(Deserialize)]
        struct Body {
            #[serde(deserialize_with = "object_key_map")]
            m: BTreeMap<MessageQueue, i64>,
        }
        let body: Body =
            parse_with_object_keys(format!(r#"{{"m":{out}}}"#).as_bytes(), "B").unwrap();
        assert_eq!(body.m[&mq], 5);
        // rocketmq-rust's string keys, with the queue id as a string (C++ style).
        let body: Body = parse_with_object_keys(
            br#"{"m":{"{\"topic\":\"T\",\"brokerName\":\"b\",\"queueId\":\"2\"}":5}}"#,
            "B",
        )
        .unwrap();
        assert_eq!(body.m[&mq], 5);
    }
}
