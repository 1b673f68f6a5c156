//! Consumer offsets (Java `ConsumerOffsetManager`): `topic@group` → queueId → committed offset.
//!
//! The table is split into [`OFFSET_SHARDS`] shards chosen by a hash of (topic, group, queueId),
//! each behind its own small mutex. A commit touches one shard for a few nanoseconds, so commits
//! of different groups, and of different queues of one group, almost never wait for each other;
//! a single `RwLock<HashMap>` makes every commit (a write) exclusive. Lookups and commits allocate
//! nothing once a (topic, group) pair has been seen: the shard maps are nested by topic then group
//! so they can be probed with `&str`.
//!
//! Persistence: [`ConsumerOffsetManager::persist`] writes RocketMQ's `consumerOffset.json`
//! (`{"offsetTable":{"topic@group":{"0":120}}}`) through [`crate::broker::persist`], crash-safely.
//! Loading accepts files written by the Java broker (unquoted integer keys, extra members).

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::persist::{self, Loaded, PersistError};

/// Number of shards. A power of two well above the core count, so two commits on different
/// queues collide with probability 1/64.
pub const OFFSET_SHARDS: usize = 64;

type QueueOffsets = HashMap<i32, i64>;
type GroupMap = HashMap<String, QueueOffsets>;
type TopicMap = HashMap<String, GroupMap>;

/// The sharded offset table plus its file.
pub struct ConsumerOffsetManager {
    shards: Box<[Mutex<TopicMap>]>,
    hasher: std::collections::hash_map::RandomState,
    path: PathBuf,
    /// Bumped on every change; persist skips writing when nothing changed.
    version: AtomicU64,
    persisted_version: AtomicU64,
}

impl ConsumerOffsetManager {
    /// An empty table whose file is `<root>/config/consumerOffset.json`.
    pub fn new(store_root: &Path) -> Self {
        ConsumerOffsetManager {
            shards: (0..OFFSET_SHARDS)
                .map(|_| Mutex::new(TopicMap::new()))
                .collect(),
            hasher: std::collections::hash_map::RandomState::new(),
            path: store_root.join("config").join("consumerOffset.json"),
            version: AtomicU64::new(0),
            persisted_version: AtomicU64::new(0),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn shard(&self, topic: &str, group: &str, queue_id: i32) -> &Mutex<TopicMap> {
        let mut h = self.hasher.build_hasher();
        topic.hash(&mut h);
        group.hash(&mut h);
        queue_id.hash(&mut h);
        &self.shards[(h.finish() as usize) & (OFFSET_SHARDS - 1)]
    }

    /// Stores a committed offset (UPDATE_CONSUMER_OFFSET, or a pull with the commit flag).
    pub fn commit_offset(&self, group: &str, topic: &str, queue_id: i32, offset: i64) {
        let shard = self.shard(topic, group, queue_id);
        // A poisoned shard only means another thread panicked mid-insert of a plain map entry;
        // the map itself is still consistent, so keep serving.
        let mut map = shard.lock().unwrap_or_else(|p| p.into_inner());
        let groups = match map.get_mut(topic) {
            Some(g) => g,
            None => map.entry(topic.to_string()).or_default(),
        };
        let queues = match groups.get_mut(group) {
            Some(q) => q,
            None => groups.entry(group.to_string()).or_default(),
        };
        queues.insert(queue_id, offset);
        self.version.fetch_add(1, Ordering::Release);
    }

    /// The committed offset, or None if the group never committed one for this queue.
    pub fn query_offset(&self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        let map = self
            .shard(topic, group, queue_id)
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        map.get(topic)?.get(group)?.get(&queue_id).copied()
    }

    /// All offsets of a group on a topic (used by admin/stats).
    pub fn query_group_offsets(&self, group: &str, topic: &str) -> BTreeMap<i32, i64> {
        let mut out = BTreeMap::new();
        for shard in self.shards.iter() {
            let map = shard.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(queues) = map.get(topic).and_then(|g| g.get(group)) {
                out.extend(queues.iter().map(|(q, o)| (*q, *o)));
            }
        }
        out
    }

    /// Snapshot `topic@group` → queueId → offset, sorted for stable output.
    pub fn snapshot(&self) -> BTreeMap<String, BTreeMap<i32, i64>> {
        let mut out: BTreeMap<String, BTreeMap<i32, i64>> = BTreeMap::new();
        for shard in self.shards.iter() {
            let map = shard.lock().unwrap_or_else(|p| p.into_inner());
            for (topic, groups) in map.iter() {
                for (group, queues) in groups {
                    out.entry(format!("{topic}@{group}"))
                        .or_default()
                        .extend(queues.iter().map(|(q, o)| (*q, *o)));
                }
            }
        }
        out
    }

    /// RocketMQ's consumerOffset.json text for the current table.
    pub fn encode(&self) -> String {
        let table: BTreeMap<String, BTreeMap<String, i64>> = self
            .snapshot()
            .into_iter()
            .map(|(k, queues)| {
                (
                    k,
                    queues
                        .into_iter()
                        .map(|(q, o)| (q.to_string(), o))
                        .collect(),
                )
            })
            .collect();
        serde_json::json!({ "offsetTable": table }).to_string()
    }

    /// Writes the file if anything changed since the last write. Returns whether it wrote.
    pub fn persist(&self) -> Result<bool, PersistError> {
        let version = self.version.load(Ordering::Acquire);
        if version == self.persisted_version.load(Ordering::Acquire) && self.path.exists() {
            return Ok(false);
        }
        persist::write_atomically(&self.path, self.encode().as_bytes())?;
        self.persisted_version.store(version, Ordering::Release);
        Ok(true)
    }

    /// Loads the file (or its backup) into the table. Returns a warning text when the backup
    /// had to be used, so the caller can say so loudly.
    pub fn load(&self) -> Result<Option<String>, PersistError> {
        match persist::load_with_backup(&self.path, parse_offset_file)? {
            Loaded::Missing => Ok(None),
            Loaded::Main(table) => {
                self.install(table);
                Ok(None)
            }
            Loaded::Backup(table, problem) => {
                self.install(table);
                Ok(Some(format!(
                    "{} unusable ({problem}); loaded consumer offsets from {}",
                    self.path.display(),
                    persist::backup_path(&self.path).display()
                )))
            }
        }
    }

    fn install(&self, table: Vec<(String, String, i32, i64)>) {
        for (topic, group, queue_id, offset) in table {
            self.commit_offset(&group, &topic, queue_id, offset);
        }
        self.persisted_version
            .store(self.version.load(Ordering::Acquire), Ordering::Release);
    }
}

/// Parses consumerOffset.json (ours or the Java broker's) into (topic, group, queue, offset).
fn parse_offset_file(text: &str) -> Result<Vec<(String, String, i32, i64)>, String> {
    let value: serde_json::Value = serde_json::from_str(&persist::quote_bare_integer_keys(text))
        .map_err(|e| format!("not JSON: {e}"))?;
    let table = value
        .get("offsetTable")
        .and_then(|t| t.as_object())
        .ok_or("no offsetTable object")?;
    let mut out = Vec::new();
    for (key, queues) in table {
        // topic@group: a group may not contain '@' but a topic cannot either, so split at the
        // first '@' like Java's `key.split("@")`.
        let (topic, group) = key
            .split_once('@')
            .ok_or_else(|| format!("key `{key}` lacks @"))?;
        let queues = queues
            .as_object()
            .ok_or_else(|| format!("`{key}` is not an object"))?;
        for (queue, offset) in queues {
            let queue_id: i32 = queue
                .parse()
                .map_err(|_| format!("`{key}` has a bad queue id `{queue}`"))?;
            let offset = offset
                .as_i64()
                .ok_or_else(|| format!("`{key}` queue {queue} offset not integer"))?;
            out.push((topic.to_string(), group.to_string(), queue_id, offset));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_and_query() {
        let dir = tempfile::tempdir().unwrap();
        let m = ConsumerOffsetManager::new(dir.path());
        assert_eq!(m.query_offset("g", "T", 0), None);
        m.commit_offset("g", "T", 0, 10);
        m.commit_offset("g", "T", 3, 7);
        m.commit_offset("g2", "T", 0, 1);
        assert_eq!(m.query_offset("g", "T", 0), Some(10));
        assert_eq!(m.query_offset("g", "T", 3), Some(7));
        assert_eq!(m.query_offset("g2", "T", 0), Some(1));
        assert_eq!(m.query_offset("g", "T", 1), None);
        assert_eq!(
            m.query_group_offsets("g", "T"),
            BTreeMap::from([(0, 10), (3, 7)])
        );
    }

    #[test]
    fn persist_and_reload_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let m = ConsumerOffsetManager::new(dir.path());
        m.commit_offset("g", "T", 0, 10);
        m.commit_offset("g", "%RETRY%g", 0, 2);
        assert!(m.persist().unwrap());
        assert!(!m.persist().unwrap(), "unchanged table is not rewritten");
        let text = std::fs::read_to_string(m.path()).unwrap();
        assert!(text.contains(r#""T@g":{"0":10}"#), "{text}");
        let m2 = ConsumerOffsetManager::new(dir.path());
        assert_eq!(m2.load().unwrap(), None);
        assert_eq!(m2.query_offset("g", "T", 0), Some(10));
        assert_eq!(m2.query_offset("g", "%RETRY%g", 0), Some(2));
    }

    #[test]
    fn loads_java_written_file_with_unquoted_keys() {
        let dir = tempfile::tempdir().unwrap();
        let m = ConsumerOffsetManager::new(dir.path());
        std::fs::create_dir_all(m.path().parent().unwrap()).unwrap();
        let java = r#"{"offsetTable":{"TopicTest@please_rename_unique_group_name_4":{0:250,1:249,2:250,3:251}},"dataVersion":{"counter":3,"timestamp":1}}"#;
        std::fs::write(m.path(), java).unwrap();
        assert_eq!(m.load().unwrap(), None);
        assert_eq!(
            m.query_offset("please_rename_unique_group_name_4", "TopicTest", 3),
            Some(251)
        );
    }

    #[test]
    fn corrupt_file_falls_back_to_backup_loudly_and_never_to_zero() {
        let dir = tempfile::tempdir().unwrap();
        let m = ConsumerOffsetManager::new(dir.path());
        m.commit_offset("g", "T", 0, 10);
        m.persist().unwrap();
        m.commit_offset("g", "T", 0, 20);
        m.persist().unwrap();
        std::fs::write(m.path(), b"{\"offsetTable\":{\"T@g\":{\"0\":2").unwrap();
        let m2 = ConsumerOffsetManager::new(dir.path());
        let warning = m2
            .load()
            .unwrap()
            .expect("must warn about using the backup");
        assert!(warning.contains(".bak"), "{warning}");
        assert_eq!(m2.query_offset("g", "T", 0), Some(10));
        std::fs::write(persist::backup_path(m.path()), b"x").unwrap();
        let m3 = ConsumerOffsetManager::new(dir.path());
        assert!(
            m3.load().is_err(),
            "both corrupt must be an error, not an empty table"
        );
    }

    #[test]
    fn concurrent_commits_from_threads_all_land() {
        let dir = tempfile::tempdir().unwrap();
        let m = std::sync::Arc::new(ConsumerOffsetManager::new(dir.path()));
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for i in 0..1000 {
                        m.commit_offset(&format!("g{t}"), "T", i % 8, i64::from(i));
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        for t in 0..4 {
            assert_eq!(m.query_group_offsets(&format!("g{t}"), "T").len(), 8);
            assert_eq!(m.query_offset(&format!("g{t}"), "T", 7), Some(999));
        }
    }
}
