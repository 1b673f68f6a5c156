//! Compiled subscription filters, compiled once per (group, topic, subscription version) and
//! shared by every pull and parked pull of that subscription (Java `ConsumerFilterManager`
//! keeps compiled SQL92 expressions the same way).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use crate::filter::{ExpressionMessageFilter, FilterError};

struct Entry {
    sub_version: i64,
    expression_type: String,
    sub_string: String,
    filter: Arc<ExpressionMessageFilter>,
}

/// Bound on cached filters: one per (group, topic) pair in use. Beyond it the cache is cleared
/// (each entry is cheap to rebuild) rather than grown without limit.
pub const FILTER_CACHE_ENTRIES_MAX: usize = 65_536;

#[derive(Default)]
pub struct FilterCache {
    /// group → topic → entry, nested so a hit is probed with `&str` and allocates nothing.
    entries: RwLock<HashMap<String, HashMap<String, Entry>>>,
}

impl FilterCache {
    pub fn new() -> Self {
        Self::default()
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
            if let Some(e) = entries.get(group).and_then(|g| g.get(topic)) {
                if e.sub_version == sub_version
                    && e.expression_type == expression_type
                    && e.sub_string == sub_string
                {
                    return Ok(e.filter.clone());
                }
            }
        }
        let filter = Arc::new(ExpressionMessageFilter::new(expression_type, sub_string)?);
        let mut entries = self.entries.write().unwrap_or_else(|p| p.into_inner());
        if entries.values().map(HashMap::len).sum::<usize>() >= FILTER_CACHE_ENTRIES_MAX {
            entries.clear();
        }
        entries.entry(group.to_string()).or_default().insert(
            topic.to_string(),
            Entry {
                sub_version,
                expression_type: expression_type.to_string(),
                sub_string: sub_string.to_string(),
                filter: filter.clone(),
            },
        );
        Ok(filter)
    }
}
