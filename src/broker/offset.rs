//! Consumer offsets (Java `ConsumerOffsetManager`): `topic@group` → queueId → committed offset.
//!
//! The table is split into [`OFFSET_SHARDS`] shards chosen by a hash of (topic, group, queueId),
//! each behind its own small mutex, so commits of different groups, and of different queues of
//! one group, almost never wait for each other; a single `RwLock<HashMap>` makes every commit (a
//! write) exclusive.
//!
//! Inside a shard the entries are flat, keyed by that same 64-bit hash (SipHash with a random
//! key, so clients cannot aim collisions): a commit hashes its key once, and a lookup is one
//! probe plus a comparison of the stored names, with no allocation once the key exists. An
//! earlier layout nested topic → group → queue maps inside every shard; it hashed each key four
//! times and, because a group's queues land in different shards, kept one small map per
//! (topic, group) in every shard, which made a commit about 2.5x slower than a single-lock
//! table on one thread (`docs/BENCHMARKS.md`). Each shard also counts its own changes, so
//! commits on different shards share no cache line.
//!
//! Persistence: [`ConsumerOffsetManager::persist`] writes RocketMQ's `consumerOffset.json`
//! (`{"offsetTable":{"topic@group":{"0":120}}}`) through [`crate::broker::persist`], crash-safely.
//! Loading accepts files written by the Java broker (unquoted integer keys, extra members).

use std::collections::hash_map::Entry as MapEntry;
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use super::persist::{self, Loaded, PersistError};

/// Number of shards. A power of two well above the core count, so two commits on different
/// queues collide with probability 1/64.
pub const OFFSET_SHARDS: usize = 64;

/// Bits of the key hash that pick the shard. Not the low bits (the shard's map indexes its
/// buckets with those) nor the top 7 (its probe tags): taken from the middle, both stay random
/// within a shard.
const SHARD_SHIFT_BITS: u32 = 32;

/// One committed offset.
struct OffsetEntry {
    topic: Box<str>,
    group: Box<str>,
    queue_id: i32,
    offset: i64,
}

impl OffsetEntry {
    fn is(&self, topic: &str, group: &str, queue_id: i32) -> bool {
        self.queue_id == queue_id && *self.topic == *topic && *self.group == *group
    }
}

/// The map keys are already SipHash values: hashing them again would only cost time.
#[derive(Default)]
struct PrehashedKey(u64);

impl Hasher for PrehashedKey {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used (the keys are u64); fold anything else in anyway.
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

#[derive(Default)]
struct Shard {
    /// Key hash → entry.
    by_hash: HashMap<u64, OffsetEntry, BuildHasherDefault<PrehashedKey>>,
    /// Entries whose 64-bit hash equals another key's (practically never; kept for correctness).
    collided: Vec<OffsetEntry>,
    /// Changes made in this shard.
    version: u64,
}

impl Shard {
    fn entries(&self) -> impl Iterator<Item = &OffsetEntry> {
        self.by_hash.values().chain(self.collided.iter())
    }

    fn find(&self, hash: u64, topic: &str, group: &str, queue_id: i32) -> Option<&OffsetEntry> {
        match self.by_hash.get(&hash) {
            Some(e) if e.is(topic, group, queue_id) => Some(e),
            Some(_) => self.collided.iter().find(|e| e.is(topic, group, queue_id)),
            None => None,
        }
    }
}

/// The sharded offset table plus its file.
pub struct ConsumerOffsetManager {
    shards: Box<[Mutex<Shard>]>,
    hasher: std::collections::hash_map::RandomState,
    path: PathBuf,
    /// Sum of the shards' versions at the last write; persist skips writing when unchanged.
    persisted_version: AtomicU64,
}

impl ConsumerOffsetManager {
    /// An empty table whose file is `<root>/config/consumerOffset.json`.
    pub fn new(store_root: &Path) -> Self {
        ConsumerOffsetManager {
            shards: (0..OFFSET_SHARDS)
                .map(|_| Mutex::new(Shard::default()))
                .collect(),
            hasher: std::collections::hash_map::RandomState::new(),
            path: store_root.join("config").join("consumerOffset.json"),
            persisted_version: AtomicU64::new(0),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn key_hash(&self, topic: &str, group: &str, queue_id: i32) -> u64 {
        let mut h = self.hasher.build_hasher();
        // `str::hash` ends each string with a marker byte, so ("ab", "c") and ("a", "bc") differ.
        topic.hash(&mut h);
        group.hash(&mut h);
        queue_id.hash(&mut h);
        h.finish()
    }

    fn shard(&self, hash: u64) -> MutexGuard<'_, Shard> {
        let index = (hash >> SHARD_SHIFT_BITS) as usize & (OFFSET_SHARDS - 1);
        // A poisoned shard only means another thread panicked mid-insert of a plain map entry;
        // the map itself is still consistent, so keep serving.
        self.shards[index].lock().unwrap_or_else(|p| p.into_inner())
    }

    fn shards_locked(&self) -> impl Iterator<Item = MutexGuard<'_, Shard>> {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Stores a committed offset (UPDATE_CONSUMER_OFFSET, or a pull with the commit flag).
    pub fn commit_offset(&self, group: &str, topic: &str, queue_id: i32, offset: i64) {
        let hash = self.key_hash(topic, group, queue_id);
        self.commit_hashed(hash, group, topic, queue_id, offset);
    }

    fn commit_hashed(&self, hash: u64, group: &str, topic: &str, queue_id: i32, offset: i64) {
        let mut shard = self.shard(hash);
        let Shard {
            by_hash,
            collided,
            version,
        } = &mut *shard;
        *version += 1;
        let new_entry = || OffsetEntry {
            topic: topic.into(),
            group: group.into(),
            queue_id,
            offset,
        };
        match by_hash.entry(hash) {
            MapEntry::Vacant(slot) => {
                slot.insert(new_entry());
            }
            MapEntry::Occupied(mut slot) if slot.get().is(topic, group, queue_id) => {
                slot.get_mut().offset = offset;
            }
            MapEntry::Occupied(_) => {
                match collided.iter_mut().find(|e| e.is(topic, group, queue_id)) {
                    Some(e) => e.offset = offset,
                    None => collided.push(new_entry()),
                }
            }
        }
    }

    /// The committed offset, or None if the group never committed one for this queue.
    pub fn query_offset(&self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        let hash = self.key_hash(topic, group, queue_id);
        self.shard(hash)
            .find(hash, topic, group, queue_id)
            .map(|e| e.offset)
    }

    /// All offsets of a group on a topic (used by admin/stats; scans the table).
    pub fn query_group_offsets(&self, group: &str, topic: &str) -> BTreeMap<i32, i64> {
        let mut out = BTreeMap::new();
        for shard in self.shards_locked() {
            out.extend(
                shard
                    .entries()
                    .filter(|e| *e.topic == *topic && *e.group == *group)
                    .map(|e| (e.queue_id, e.offset)),
            );
        }
        out
    }

    /// Snapshot `topic@group` → queueId → offset, sorted for stable output.
    pub fn snapshot(&self) -> BTreeMap<String, BTreeMap<i32, i64>> {
        let mut out: BTreeMap<String, BTreeMap<i32, i64>> = BTreeMap::new();
        for shard in self.shards_locked() {
            for e in shard.entries() {
                out.entry(format!("{}@{}", e.topic, e.group))
                    .or_default()
                    .insert(e.queue_id, e.offset);
            }
        }
        out
    }

    /// Changes since the table was created (sum of the shards' counters).
    fn version(&self) -> u64 {
        self.shards_locked().map(|s| s.version).sum()
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
        let version = self.version();
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
            .store(self.version(), Ordering::Release);
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
    fn keys_with_equal_hashes_stay_apart() {
        let dir = tempfile::tempdir().unwrap();
        let m = ConsumerOffsetManager::new(dir.path());
        // Force two different keys onto one hash, as a 64-bit collision would.
        let hash = 0xDEAD_BEEF_0000_0001;
        m.commit_hashed(hash, "g", "T", 0, 1);
        m.commit_hashed(hash, "g", "U", 0, 2);
        m.commit_hashed(hash, "g", "U", 0, 3);
        let shard = m.shard(hash);
        assert_eq!(shard.find(hash, "T", "g", 0).map(|e| e.offset), Some(1));
        assert_eq!(shard.find(hash, "U", "g", 0).map(|e| e.offset), Some(3));
        assert_eq!(shard.find(hash, "V", "g", 0).map(|e| e.offset), None);
        assert_eq!(shard.collided.len(), 1);
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
