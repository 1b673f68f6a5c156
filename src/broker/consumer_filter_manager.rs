//! Compiled subscription filters, compiled once per (group, topic, subscription version) and
//! shared by every pull and parked pull of that subscription (Java `ConsumerFilterManager`
//! keeps compiled SQL92 expressions the same way).
//!
//! The cache is bounded in bytes, not entries: one TAG or SQL92 filter may hold hundreds of
//! kilobytes (expressions up to 64 KiB, each tag a `String` and two set slots), so a count
//! bound alone let a few thousand pulls pin gigabytes. Every entry is charged its compiled
//! filter's heap bytes plus its keys and text ([`FILTER_CACHE_MAX_BYTES`]).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use crate::filter::{ExpressionMessageFilter, FilterError};

/// Bytes the cached filters may hold together. When a new filter would pass it, entries are
/// evicted (any, each is cheap to rebuild) until it fits. 64 MiB holds about a hundred
/// filters of the longest expressions, or hundreds of thousands of ordinary ones.
pub const FILTER_CACHE_MAX_BYTES: usize = 64 * 1024 * 1024;

struct Entry {
    sub_version: i64,
    expression_type: String,
    sub_string: String,
    filter: Arc<ExpressionMessageFilter>,
    /// What this entry is charged in [`Entries::accounted_bytes`].
    bytes: usize,
}

#[derive(Default)]
struct Entries {
    /// group → topic → entry, nested so a hit is probed with `&str` and allocates nothing.
    by_group: HashMap<String, HashMap<String, Entry>>,
    accounted_bytes: usize,
}

pub struct FilterCache {
    entries: RwLock<Entries>,
    max_bytes: usize,
}

impl Default for FilterCache {
    fn default() -> Self {
        Self::with_max_bytes(FILTER_CACHE_MAX_BYTES)
    }
}

/// Bytes charged for one cached filter: the compiled filter and the strings the entry keeps
/// (its text, type, and the group and topic keys, the group charged to every entry of it so
/// that removing any entry gives back what it was charged), plus the fixed parts.
fn entry_bytes(group: &str, topic: &str, expression_type: &str, sub_string: &str) -> usize {
    const FIXED: usize = std::mem::size_of::<Entry>()
        + std::mem::size_of::<ExpressionMessageFilter>()
        + 2 * std::mem::size_of::<usize>() // the Arc's counts
        + 2 * (std::mem::size_of::<String>() + 1); // the two map slots
    FIXED + group.len() + topic.len() + expression_type.len() + sub_string.len()
}

impl FilterCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// A cache holding at most `max_bytes` of filters (tests use a small one).
    pub fn with_max_bytes(max_bytes: usize) -> Self {
        FilterCache {
            entries: RwLock::new(Entries::default()),
            max_bytes,
        }
    }

    /// Bytes the cached filters are charged now (never above the bound once an insert is done).
    pub fn accounted_bytes(&self) -> usize {
        let entries = self.entries.read().unwrap_or_else(|p| p.into_inner());
        entries.accounted_bytes
    }

    /// The compiled filter for this subscription, compiling it on first use or when the
    /// subscription changed.
    pub fn get_or_compile(
        &self,
        group: &str,
        topic: &str,
        expression_type: &str,
        sub_string: &str,
        sub_version: i64,
    ) -> Result<Arc<ExpressionMessageFilter>, FilterError> {
        {
            let entries = self.entries.read().unwrap_or_else(|p| p.into_inner());
            if let Some(e) = entries.by_group.get(group).and_then(|g| g.get(topic)) {
                if e.sub_version == sub_version
                    && e.expression_type == expression_type
                    && e.sub_string == sub_string
                {
                    return Ok(e.filter.clone());
                }
            }
        }
        let filter = Arc::new(ExpressionMessageFilter::new(expression_type, sub_string)?);
        let bytes = entry_bytes(group, topic, expression_type, sub_string) + filter.heap_bytes();
        let entry = Entry {
            sub_version,
            expression_type: expression_type.to_string(),
            sub_string: sub_string.to_string(),
            filter: filter.clone(),
            bytes,
        };
        let mut entries = self.entries.write().unwrap_or_else(|p| p.into_inner());
        entries.remove(group, topic);
        if bytes > self.max_bytes {
            // Larger than the whole cache: served, never kept.
            return Ok(filter);
        }
        while entries.accounted_bytes + bytes > self.max_bytes && entries.evict_one() {}
        entries.accounted_bytes += bytes;
        entries
            .by_group
            .entry(group.to_string())
            .or_default()
            .insert(topic.to_string(), entry);
        Ok(filter)
    }
}

impl Entries {
    fn remove(&mut self, group: &str, topic: &str) {
        let Some(topics) = self.by_group.get_mut(group) else {
            return;
        };
        if let Some(old) = topics.remove(topic) {
            self.accounted_bytes -= old.bytes;
        }
        if topics.is_empty() {
            self.by_group.remove(group);
        }
    }

    /// Drops one entry (whichever the map yields first); false when there is none.
    fn evict_one(&mut self) -> bool {
        let Some((group, topics)) = self.by_group.iter_mut().next() else {
            return false;
        };
        if let Some(topic) = topics.keys().next().cloned() {
            let old = topics.remove(&topic).expect("key just seen");
            self.accounted_bytes -= old.bytes;
        }
        if topics.is_empty() {
            let group = group.clone();
            self.by_group.remove(&group);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::tag::TAG_EXPRESSION_LENGTH_MAX_BYTES;

    /// A TAG expression of about `len` bytes with many distinct tags.
    fn many_tags(len: usize, seed: usize) -> String {
        let mut text = String::new();
        let mut i = 0;
        while text.len() + 16 < len {
            text.push_str(&format!("t{seed}_{i}||"));
            i += 1;
        }
        text.push('x');
        text
    }

    #[test]
    fn a_big_filter_is_charged_its_parsed_size() {
        let cache = FilterCache::new();
        let text = many_tags(TAG_EXPRESSION_LENGTH_MAX_BYTES, 0);
        cache.get_or_compile("g", "t", "TAG", &text, 1).unwrap();
        let charged = cache.accounted_bytes();
        // The text, plus a String and hash-set slots per tag: several times the text.
        assert!(
            charged > 3 * text.len(),
            "{charged} for {} bytes",
            text.len()
        );
    }

    #[test]
    fn the_cache_stays_within_its_bytes_and_still_serves() {
        let max = 4 * 1024 * 1024;
        let cache = FilterCache::with_max_bytes(max);
        let mut last = None;
        for i in 0..200 {
            let text = many_tags(TAG_EXPRESSION_LENGTH_MAX_BYTES, i);
            let group = format!("g{i}");
            last = Some(cache.get_or_compile(&group, "t", "TAG", &text, 1).unwrap());
            assert!(cache.accounted_bytes() <= max, "after {i}");
        }
        assert!(cache.accounted_bytes() > max / 2, "the cache is used");
        // The newest entry is a hit: the same compiled filter comes back.
        let text = many_tags(TAG_EXPRESSION_LENGTH_MAX_BYTES, 199);
        let again = cache.get_or_compile("g199", "t", "TAG", &text, 1).unwrap();
        assert!(Arc::ptr_eq(&again, &last.unwrap()));
    }

    #[test]
    fn replacing_and_evicting_give_back_what_was_charged() {
        let cache = FilterCache::with_max_bytes(1 << 20);
        cache.get_or_compile("g", "t", "TAG", "a || b", 1).unwrap();
        let one = cache.accounted_bytes();
        cache.get_or_compile("g", "t", "TAG", "a || b", 2).unwrap();
        assert_eq!(
            cache.accounted_bytes(),
            one,
            "a new version replaces the old"
        );
        cache.get_or_compile("g", "u", "TAG", "a || b", 1).unwrap();
        assert!(cache.accounted_bytes() > one);
        // A filter larger than the whole cache is compiled but not kept.
        let tiny = FilterCache::with_max_bytes(64);
        tiny.get_or_compile("g", "t", "TAG", "a", 1).unwrap();
        assert_eq!(tiny.accounted_bytes(), 0);
    }

    #[test]
    fn an_sql92_filter_is_charged_its_tree() {
        let cache = FilterCache::new();
        let keys: Vec<String> = (0..2000).map(|i| format!("'k{i}'")).collect();
        let text = format!("a IN ({}) AND b > 1 AND c CONTAINS 'x'", keys.join(","));
        cache.get_or_compile("g", "t", "SQL92", &text, 1).unwrap();
        // The entry keeps the text twice (its key and the compiled source) and the IN set.
        let charged = cache.accounted_bytes();
        assert!(
            charged > 2 * text.len(),
            "{charged} for {} bytes",
            text.len()
        );
    }

    #[test]
    fn an_over_long_tag_expression_is_refused() {
        let cache = FilterCache::new();
        let text = "x".repeat(TAG_EXPRESSION_LENGTH_MAX_BYTES + 1);
        let error = cache.get_or_compile("g", "t", "", &text, 1).unwrap_err();
        assert!(matches!(error, FilterError::TagExpressionTooLong { .. }));
        assert_eq!(cache.accounted_bytes(), 0);
    }
}
