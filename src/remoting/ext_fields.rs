//! A command's custom header fields (Java `RemotingCommand.extFields`, a `HashMap<String,
//! String>`): a small map kept as a list.
//!
//! A header carries 4 to 20 fields, and every request and response builds and reads one. As a
//! hash map (foldhash) their inserts were a fifth of the header codec's time in
//! `cargo bench --bench codec`; a list needs no hashing, and its lookups compare the lengths of
//! a few short keys first. Keys are unique: inserting a key that is there replaces its value
//! (Java's `map.put`, so the last of duplicate keys on the wire wins).
//!
//! Keys the broker sets are `'static` strings, and so are the keys of the requests that come
//! once per message ([`static_key`]): a decoded SEND_MESSAGE_V2 or PULL_MESSAGE header
//! allocates only its values. Both cut the codec's time for one W3 message from 2.7 to 2.9 µs
//! to 1.7 to 1.9 µs (docs/BENCHMARKS.md).

use std::borrow::Cow;
use std::ops::Index;

/// Fields a header may carry before [`ExtFieldsDecoder`] stops checking each new key against
/// the ones before it and sorts them once at the end instead (a hostile header with many
/// thousands of fields stays `O(n log n)`).
const LINEAR_DUPLICATE_CHECK_MAX: usize = 64;

/// A field's key: the broker's own keys and the keys clients send most are `'static` strings,
/// so that neither setting nor decoding them allocates.
pub type ExtKey = Cow<'static, str>;

/// One-letter keys (SEND_MESSAGE_V2's `a` to `n` among them), indexed by `byte - b'a'`.
const ONE_LETTER_KEYS: [&str; 26] = [
    "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s",
    "t", "u", "v", "w", "x", "y", "z",
];

/// The `'static` key for `bytes` when it is one a request that comes once per message or pull
/// carries (SEND_MESSAGE_V2 and V1's `bname`, PULL_MESSAGE, the consumer-offset requests): a
/// decoded header then allocates only its values.
pub fn static_key(bytes: &[u8]) -> Option<&'static str> {
    if let [letter @ b'a'..=b'z'] = bytes {
        return Some(ONE_LETTER_KEYS[usize::from(letter - b'a')]);
    }
    Some(match bytes {
        b"consumerGroup" => "consumerGroup",
        b"topic" => "topic",
        b"queueId" => "queueId",
        b"queueOffset" => "queueOffset",
        b"maxMsgNums" => "maxMsgNums",
        b"sysFlag" => "sysFlag",
        b"commitOffset" => "commitOffset",
        b"suspendTimeoutMillis" => "suspendTimeoutMillis",
        b"subscription" => "subscription",
        b"subVersion" => "subVersion",
        b"expressionType" => "expressionType",
        b"maxMsgBytes" => "maxMsgBytes",
        b"requestSource" => "requestSource",
        b"bname" => "bname",
        _ => return None,
    })
}

/// `text` as a key: `'static` when [`static_key`] knows it, else a copy.
pub fn key_of(text: &str) -> ExtKey {
    static_key(text.as_bytes()).map_or_else(|| ExtKey::Owned(text.to_owned()), ExtKey::Borrowed)
}

/// Whether two keys are equal, rejecting most unequal ones by length and first byte before the
/// byte comparison (a call to `memcmp`): a lookup among a send header's one-letter keys makes
/// one such call, not one per key it passes.
fn same_key(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.as_bytes().first() == b.as_bytes().first() && a == b
}

/// The custom header fields of a command, unique by key. Their order means nothing: both
/// encoders write them sorted ([`ExtFields::sorted`]).
#[derive(Debug, Clone, Default)]
pub struct ExtFields {
    entries: Vec<(ExtKey, String)>,
}

impl ExtFields {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_capacity(capacity: usize) -> Self {
        ExtFields {
            entries: Vec::with_capacity(capacity),
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn reserve(&mut self, additional: usize) {
        self.entries.reserve(additional);
    }

    fn position(&self, key: &str) -> Option<usize> {
        self.entries.iter().position(|(k, _)| same_key(k, key))
    }

    pub fn get(&self, key: &str) -> Option<&String> {
        self.position(key).map(|index| &self.entries[index].1)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_some()
    }

    /// Sets `key` to `value`; returns the value it replaces.
    pub fn insert(&mut self, key: impl Into<ExtKey>, value: String) -> Option<String> {
        let key = key.into();
        match self.position(&key) {
            Some(index) => Some(std::mem::replace(&mut self.entries[index].1, value)),
            None => {
                self.entries.push((key, value));
                None
            }
        }
    }

    pub fn remove(&mut self, key: &str) -> Option<String> {
        let index = self.position(key)?;
        Some(self.entries.remove(index).1)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries
            .iter()
            .map(|(key, value)| (key.as_ref(), value.as_str()))
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(key, _)| key.as_ref())
    }

    /// The fields sorted by key: the order both header encoders write them in, so that a
    /// command always encodes to the same bytes.
    pub fn sorted(&self) -> Vec<(&str, &str)> {
        let mut fields: Vec<(&str, &str)> = self
            .entries
            .iter()
            .map(|(key, value)| (key.as_ref(), value.as_str()))
            .collect();
        // Keys are unique, so an unstable sort gives one order.
        fields.sort_unstable_by(|a, b| a.0.cmp(b.0));
        fields
    }
}

/// Equal when both hold the same keys with the same values, in any order (as two Java maps).
impl PartialEq for ExtFields {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self
                .entries
                .iter()
                .all(|(key, value)| other.get(key) == Some(value))
    }
}

impl Eq for ExtFields {}

impl Index<&str> for ExtFields {
    type Output = String;

    /// Panics when `key` is absent, as `HashMap`'s index does.
    fn index(&self, key: &str) -> &String {
        match self.get(key) {
            Some(value) => value,
            None => panic!("no ext field {key:?}"),
        }
    }
}

impl<K: Into<ExtKey>> FromIterator<(K, String)> for ExtFields {
    fn from_iter<I: IntoIterator<Item = (K, String)>>(iter: I) -> Self {
        let mut decoder = ExtFieldsDecoder::with_capacity(0);
        for (key, value) in iter {
            decoder.push(key.into(), value);
        }
        decoder.finish()
    }
}

/// Builds [`ExtFields`] from fields as they come off the wire, the last of duplicate keys
/// winning. Up to [`LINEAR_DUPLICATE_CHECK_MAX`] fields, a new key is compared with the earlier
/// ones only when a one-word summary of the keys seen says it may repeat one; past that, the
/// fields are sorted and deduplicated once in [`ExtFieldsDecoder::finish`].
#[derive(Debug)]
pub struct ExtFieldsDecoder {
    entries: Vec<(ExtKey, String)>,
    /// One bit per (length, first byte, last byte) class of the keys pushed so far.
    seen_classes: u64,
    /// More fields than the linear check covers came in: sort and deduplicate at the end.
    sort_at_finish: bool,
}

impl ExtFieldsDecoder {
    pub fn with_capacity(capacity: usize) -> Self {
        ExtFieldsDecoder {
            entries: Vec::with_capacity(capacity),
            seen_classes: 0,
            sort_at_finish: false,
        }
    }

    fn class_bit(key: &str) -> u64 {
        let bytes = key.as_bytes();
        let first = bytes.first().copied().unwrap_or(0);
        let last = bytes.last().copied().unwrap_or(0);
        // For a one-byte key (a SEND_MESSAGE_V2 header's `a` to `n`) the weights add up to 17,
        // odd, so 64 consecutive letters take 64 different bits.
        let mixed = (bytes.len() as u64)
            .wrapping_mul(31)
            .wrapping_add(u64::from(first).wrapping_mul(5))
            .wrapping_add(u64::from(last).wrapping_mul(12));
        1 << (mixed % 64)
    }

    pub fn push(&mut self, key: ExtKey, value: String) {
        if self.sort_at_finish || self.entries.len() >= LINEAR_DUPLICATE_CHECK_MAX {
            self.sort_at_finish = true;
            self.entries.push((key, value));
            return;
        }
        let bit = Self::class_bit(&key);
        if self.seen_classes & bit != 0 {
            if let Some(entry) = self.entries.iter_mut().find(|(k, _)| same_key(k, &key)) {
                entry.1 = value;
                return;
            }
        }
        self.seen_classes |= bit;
        self.entries.push((key, value));
    }

    pub fn finish(mut self) -> ExtFields {
        if self.sort_at_finish {
            // Stable: equal keys stay in wire order, and the last of each run is kept.
            self.entries.sort_by(|a, b| a.0.cmp(&b.0));
            let mut unique: Vec<(ExtKey, String)> = Vec::with_capacity(self.entries.len());
            for entry in self.entries {
                match unique.last_mut() {
                    Some(last) if last.0 == entry.0 => *last = entry,
                    _ => unique.push(entry),
                }
            }
            self.entries = unique;
        }
        ExtFields {
            entries: self.entries,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(fields: &[(&str, &str)]) -> Vec<(String, String)> {
        fields
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn insert_replaces_and_returns_the_old_value() {
        let mut fields = ExtFields::new();
        assert_eq!(fields.insert("a", "1".into()), None);
        assert_eq!(fields.insert("b", "2".into()), None);
        assert_eq!(fields.insert("a", "3".into()), Some("1".into()));
        assert_eq!(fields.len(), 2);
        assert_eq!(fields["a"], "3");
        assert_eq!(fields.remove("a"), Some("3".into()));
        assert_eq!(fields.remove("a"), None);
        assert!(!fields.contains_key("a"));
        assert_eq!(fields.get("b").map(String::as_str), Some("2"));
    }

    #[test]
    fn the_last_of_duplicate_keys_wins_with_few_fields() {
        let fields: ExtFields = pairs(&[("a", "1"), ("b", "2"), ("a", "3"), ("b", "4")])
            .into_iter()
            .collect();
        assert_eq!(fields.len(), 2);
        assert_eq!(fields["a"], "3");
        assert_eq!(fields["b"], "4");
    }

    #[test]
    fn the_last_of_duplicate_keys_wins_past_the_linear_check() {
        let mut decoder = ExtFieldsDecoder::with_capacity(0);
        for round in 0..3 {
            for i in 0..LINEAR_DUPLICATE_CHECK_MAX {
                decoder.push(format!("k{i}").into(), format!("{round}"));
            }
        }
        let fields = decoder.finish();
        assert_eq!(fields.len(), LINEAR_DUPLICATE_CHECK_MAX);
        for i in 0..LINEAR_DUPLICATE_CHECK_MAX {
            assert_eq!(fields[format!("k{i}").as_str()], "2", "k{i}");
        }
    }

    #[test]
    fn keys_of_one_class_are_still_told_apart() {
        // Same length, first and last byte: one class bit, three keys.
        let fields: ExtFields = pairs(&[("axb", "1"), ("ayb", "2"), ("azb", "3"), ("ayb", "4")])
            .into_iter()
            .collect();
        assert_eq!(fields.len(), 3);
        assert_eq!(fields["ayb"], "4");
        assert_eq!(fields["axb"], "1");
    }

    #[test]
    fn equality_ignores_order_and_sorted_orders_by_key() {
        let one: ExtFields = pairs(&[("b", "2"), ("a", "1")]).into_iter().collect();
        let two: ExtFields = pairs(&[("a", "1"), ("b", "2")]).into_iter().collect();
        let three: ExtFields = pairs(&[("a", "1"), ("b", "9")]).into_iter().collect();
        assert_eq!(one, two);
        assert_ne!(one, three);
        assert_eq!(one.sorted(), vec![("a", "1"), ("b", "2")]);
    }

    #[test]
    fn static_keys_are_the_bytes_they_stand_for() {
        for key in ONE_LETTER_KEYS {
            assert_eq!(static_key(key.as_bytes()), Some(key));
        }
        for key in [
            "consumerGroup",
            "queueOffset",
            "suspendTimeoutMillis",
            "bname",
        ] {
            assert_eq!(static_key(key.as_bytes()), Some(key));
        }
        for other in ["", "A", "ab", "consumergroup", "topic ", "\u{e9}"] {
            assert_eq!(static_key(other.as_bytes()), None, "{other:?}");
            assert!(matches!(key_of(other), ExtKey::Owned(ref k) if k == other));
        }
        // An admin request's key is not among them.
        assert_eq!(static_key(b"lo"), None);
        assert!(matches!(key_of("topic"), ExtKey::Borrowed("topic")));
    }

    #[test]
    #[should_panic(expected = "no ext field")]
    fn indexing_an_absent_key_panics_like_a_map() {
        let _ = &ExtFields::new()["missing"];
    }
}
