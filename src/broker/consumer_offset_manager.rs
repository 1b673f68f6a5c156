//! Consumer offsets (Java `ConsumerOffsetManager`): `topic@group` → queueId → committed offset.
//!
//! Two levels, shaped by what a commit does (one per pull with the commit flag, one per queue per
//! UPDATE_CONSUMER_OFFSET), so that commits never take a lock and never write a cache line that
//! another thread's commit writes:
//!
//! 1. (topic, group) → [`GroupOffsets`], in [`OFFSET_SHARDS`] shards picked by one seeded
//!    foldhash of the two names. Each shard is an immutable `HashTable` behind an `ArcSwap`:
//!    a lookup is a thread-local-debt load (no shared counter), one probe and a comparison of the
//!    names. Only a group's first commit writes: it copies its shard's table with the new entry
//!    under the shard's insert mutex and swaps it in. Groups are few and long-lived, so that is
//!    rare.
//! 2. queueId → offset inside [`GroupOffsets`]: one `AtomicI64` per queue, each on its own cache
//!    line (two consumers of one group commit different queues from different runtime threads),
//!    in chunks allocated on first use. A commit is one atomic store. Queue ids outside
//!    `0..OFFSET_FAST_QUEUE_IDS` (none in practice: Java topics have 1 to a few hundred queues)
//!    go to a small locked map of their group.
//!
//! An earlier design sharded by (topic, group, queueId) with a mutex per shard; it was 0.84x a
//! single `RwLock<HashMap>` at 16k keys and 1.6x to 1.9x on one group, because every commit
//! still took a lock and hashed three names with SipHash (`docs/BENCHMARKS.md`).
//!
//! Entries live until the broker stops, as in Java, which only drops them on admin deletes that
//! ringmq does not serve. A committed `i64::MIN` reads back as "no offset" (it is the empty
//! slot's marker); QUERY_CONSUMER_OFFSET treats every negative offset that way anyway.
//!
//! Persistence: [`ConsumerOffsetManager::persist`] writes RocketMQ's `consumerOffset.json`
//! (`{"offsetTable":{"topic@group":{"0":120}}}`) through [`crate::broker::config_manager`], crash-safely,
//! and skips the write when the text equals the last one written. Loading accepts files written
//! by the Java broker (unquoted integer keys, extra members).

use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use arc_swap::ArcSwap;
use hashbrown::HashTable;

use super::config_manager::{
    self as persist, BackupUsed, ContentError, Loaded, MetadataFs, PersistError,
};

/// Number of (topic, group) shards. Only a group's first commit locks a shard (to copy it), so
/// this bounds how many first commits of different groups can run at once and how much each
/// copies: creating G groups copies about G² / (2 × OFFSET_SHARDS) entry pointers in all
/// (100,000 groups: about 20 M pointer copies, spread over their first commits).
pub const OFFSET_SHARDS: usize = 256;

/// Queue ids `0..OFFSET_FAST_QUEUE_IDS` are lock-free slots; others go to the group's locked map.
pub const OFFSET_FAST_QUEUE_IDS: usize = QUEUE_CHUNK_SLOTS * QUEUE_CHUNKS;

/// Slots per lazily allocated chunk: a group with up to 16 queues costs one chunk (1 KiB).
const QUEUE_CHUNK_SLOTS: usize = 16;

/// Chunks per group.
const QUEUE_CHUNKS: usize = 64;

/// Bits of the name hash that pick the shard: not the low bits (the shard's table indexes its
/// buckets with those) nor the top 7 (its probe tags), so both stay random within a shard.
const SHARD_SHIFT_BITS: u32 = 32;

/// An empty slot.
const NO_OFFSET: i64 = i64::MIN;

/// One queue's offset, alone on a cache line so commits of neighbouring queues from different
/// threads do not bounce one line between cores.
#[repr(align(64))]
struct Slot(AtomicI64);

type Chunk = [Slot; QUEUE_CHUNK_SLOTS];

fn empty_chunk() -> Box<Chunk> {
    Box::new(std::array::from_fn(|_| Slot(AtomicI64::new(NO_OFFSET))))
}

/// The committed offsets of one (topic, group).
struct GroupOffsets {
    topic: Box<str>,
    group: Box<str>,
    /// The name hash, kept so a shard's table can be rebuilt without hashing again.
    hash: u64,
    chunks: [OnceLock<Box<Chunk>>; QUEUE_CHUNKS],
    /// Queue ids outside the fast range.
    others: Mutex<BTreeMap<i32, i64>>,
}

impl GroupOffsets {
    fn new(topic: &str, group: &str, hash: u64) -> Self {
        GroupOffsets {
            topic: topic.into(),
            group: group.into(),
            hash,
            chunks: std::array::from_fn(|_| OnceLock::new()),
            others: Mutex::new(BTreeMap::new()),
        }
    }

    fn is(&self, topic: &str, group: &str) -> bool {
        *self.topic == *topic && *self.group == *group
    }

    fn others(&self) -> MutexGuard<'_, BTreeMap<i32, i64>> {
        // Poison only means a panic elsewhere while holding a plain map; the map is intact.
        self.others.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// (chunk, slot) of a fast queue id.
    fn position(queue_id: i32) -> Option<(usize, usize)> {
        let index = usize::try_from(queue_id).ok()?;
        (index < OFFSET_FAST_QUEUE_IDS)
            .then_some((index / QUEUE_CHUNK_SLOTS, index % QUEUE_CHUNK_SLOTS))
    }

    fn store(&self, queue_id: i32, offset: i64) {
        match Self::position(queue_id) {
            Some((chunk, slot)) => {
                // Release pairs with the Acquire loads of queries and snapshots.
                self.chunks[chunk].get_or_init(empty_chunk)[slot]
                    .0
                    .store(offset, Ordering::Release);
            }
            None => {
                self.others().insert(queue_id, offset);
            }
        }
    }

    fn load(&self, queue_id: i32) -> Option<i64> {
        match Self::position(queue_id) {
            Some((chunk, slot)) => {
                let offset = self.chunks[chunk].get()?[slot].0.load(Ordering::Acquire);
                (offset != NO_OFFSET).then_some(offset)
            }
            None => self.others().get(&queue_id).copied(),
        }
    }

    /// Every committed (queueId, offset), ascending by queue id.
    fn offsets(&self) -> BTreeMap<i32, i64> {
        let mut out = self.others().clone();
        for (c, chunk) in self.chunks.iter().enumerate() {
            let Some(chunk) = chunk.get() else { continue };
            for (s, slot) in chunk.iter().enumerate() {
                let offset = slot.0.load(Ordering::Acquire);
                if offset != NO_OFFSET {
                    // In range: c < QUEUE_CHUNKS and s < QUEUE_CHUNK_SLOTS, product ≤ 1024.
                    out.insert((c * QUEUE_CHUNK_SLOTS + s) as i32, offset);
                }
            }
        }
        out
    }
}

#[derive(Default)]
struct Shard {
    /// Immutable between swaps; replaced (copied with the new entry) when a group first commits.
    table: ArcSwap<HashTable<Arc<GroupOffsets>>>,
    /// Serializes the copy-and-swap of inserts so two first commits cannot drop each other.
    insert_lock: Mutex<()>,
}

/// The offset table plus its file.
pub struct ConsumerOffsetManager {
    shards: Box<[Shard]>,
    hasher: foldhash::fast::RandomState,
    path: PathBuf,
    /// The text written by the last successful persist; an equal snapshot is not rewritten.
    persisted_text: Mutex<Option<String>>,
    /// Where the file is written (the store's file system).
    pub fs: MetadataFs,
}

impl ConsumerOffsetManager {
    /// An empty table whose file is `<root>/config/consumerOffset.json`.
    pub fn new(store_root: &Path) -> Self {
        ConsumerOffsetManager {
            shards: (0..OFFSET_SHARDS).map(|_| Shard::default()).collect(),
            hasher: foldhash::fast::RandomState::default(),
            path: store_root.join("config").join("consumerOffset.json"),
            persisted_text: Mutex::new(None),
            fs: MetadataFs::default(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn name_hash(&self, topic: &str, group: &str) -> u64 {
        // `str` hashing ends each string with a marker, so ("ab", "c") and ("a", "bc") differ.
        self.hasher.hash_one((topic, group))
    }

    fn shard(&self, hash: u64) -> &Shard {
        &self.shards[(hash >> SHARD_SHIFT_BITS) as usize & (OFFSET_SHARDS - 1)]
    }

    /// Runs `f` on the group's offsets if the group has any.
    fn with_group<R>(
        &self,
        hash: u64,
        topic: &str,
        group: &str,
        f: impl FnOnce(&GroupOffsets) -> R,
    ) -> Option<R> {
        let table = self.shard(hash).table.load();
        table.find(hash, |g| g.is(topic, group)).map(|g| f(g))
    }

    /// Adds the group's entry unless a racing first commit already did.
    fn insert_group(&self, hash: u64, topic: &str, group: &str) {
        let shard = self.shard(hash);
        let _serialized = shard.insert_lock.lock().unwrap_or_else(|p| p.into_inner());
        let current = shard.table.load_full();
        if current.find(hash, |g| g.is(topic, group)).is_some() {
            return;
        }
        let mut next = HashTable::with_capacity(current.len() + 1);
        for g in current.iter() {
            next.insert_unique(g.hash, Arc::clone(g), |g: &Arc<GroupOffsets>| g.hash);
        }
        next.insert_unique(
            hash,
            Arc::new(GroupOffsets::new(topic, group, hash)),
            |g: &Arc<GroupOffsets>| g.hash,
        );
        shard.table.store(Arc::new(next));
    }

    /// Stores a committed offset (UPDATE_CONSUMER_OFFSET, or a pull with the commit flag).
    pub fn commit_offset(&self, group: &str, topic: &str, queue_id: i32, offset: i64) {
        let hash = self.name_hash(topic, group);
        self.commit_hashed(hash, group, topic, queue_id, offset);
    }

    fn commit_hashed(&self, hash: u64, group: &str, topic: &str, queue_id: i32, offset: i64) {
        let store = |g: &GroupOffsets| g.store(queue_id, offset);
        if self.with_group(hash, topic, group, store).is_none() {
            self.insert_group(hash, topic, group);
            let stored = self.with_group(hash, topic, group, store);
            assert!(stored.is_some(), "offset group missing right after insert");
        }
    }

    /// The committed offset, or None if the group never committed one for this queue.
    pub fn query_offset(&self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        let hash = self.name_hash(topic, group);
        self.with_group(hash, topic, group, |g| g.load(queue_id))
            .flatten()
    }

    /// All offsets of a group on a topic (admin and stats).
    pub fn query_group_offsets(&self, group: &str, topic: &str) -> BTreeMap<i32, i64> {
        let hash = self.name_hash(topic, group);
        self.with_group(hash, topic, group, GroupOffsets::offsets)
            .unwrap_or_default()
    }

    /// Snapshot `topic@group` → queueId → offset, sorted for stable output.
    pub fn snapshot(&self) -> BTreeMap<String, BTreeMap<i32, i64>> {
        let mut out = BTreeMap::new();
        for shard in self.shards.iter() {
            for g in shard.table.load().iter() {
                let offsets = g.offsets();
                if !offsets.is_empty() {
                    out.insert(format!("{}@{}", g.topic, g.group), offsets);
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

    /// Writes the file if the table changed since the last write. Returns whether it wrote.
    pub fn persist(&self) -> Result<bool, PersistError> {
        // Held across the write: the offset flusher and shutdown never write at once.
        let mut persisted = self
            .persisted_text
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let text = self.encode();
        if persisted.as_deref() == Some(text.as_str()) && self.path.exists() {
            return Ok(false);
        }
        persist::write_atomically_on(self.fs.get(), &self.path, text.as_bytes())?;
        *persisted = Some(text);
        Ok(true)
    }

    /// Loads the file (or its backup) into the table. Says whether the backup had to be used,
    /// so the caller can say so loudly.
    pub fn load(&self) -> Result<Option<BackupUsed>, PersistError> {
        match persist::load_with_backup(&self.path, parse_offset_file)? {
            Loaded::Missing => Ok(None),
            Loaded::Main(table) => {
                self.install(table);
                Ok(None)
            }
            Loaded::Backup(table, used) => {
                self.install(table);
                Ok(Some(used))
            }
        }
    }

    fn install(&self, table: Vec<(String, String, i32, i64)>) {
        for (topic, group, queue_id, offset) in table {
            self.commit_offset(&group, &topic, queue_id, offset);
        }
        // What was loaded need not be written back unchanged (the file may be Java's).
        *self
            .persisted_text
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(self.encode());
    }
}

/// Parses consumerOffset.json (ours or the Java broker's) into (topic, group, queue, offset).
pub(crate) fn parse_offset_file(
    text: &str,
) -> Result<Vec<(String, String, i32, i64)>, ContentError> {
    let table = persist::parse_offset_table(text)?;
    let mut out = Vec::new();
    for (key, queues) in &table {
        // topic@group: a group may not contain '@' but a topic cannot either, so split at the
        // first '@' like Java's `key.split("@")`.
        let (topic, group) = key
            .split_once('@')
            .ok_or_else(|| ContentError::KeyWithoutAt { key: key.clone() })?;
        let queues = queues
            .as_object()
            .ok_or_else(|| ContentError::NotAnObject { key: key.clone() })?;
        for (queue, offset) in queues {
            let (queue_id, offset) = persist::queue_offset(key, queue, offset)?;
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
    fn groups_with_equal_hashes_stay_apart() {
        let dir = tempfile::tempdir().unwrap();
        let m = ConsumerOffsetManager::new(dir.path());
        // Force different names onto one hash, as a 64-bit collision would.
        let hash = 0xDEAD_BEEF_0000_0001;
        m.commit_hashed(hash, "g", "T", 0, 1);
        m.commit_hashed(hash, "g", "U", 0, 2);
        m.commit_hashed(hash, "g", "U", 0, 3);
        let load = |topic| m.with_group(hash, topic, "g", |g| g.load(0)).flatten();
        assert_eq!(load("T"), Some(1));
        assert_eq!(load("U"), Some(3));
        assert_eq!(load("V"), None);
        assert_eq!(m.shard(hash).table.load().len(), 2);
    }

    #[test]
    fn queue_ids_outside_the_fast_range_and_the_marker_value() {
        let dir = tempfile::tempdir().unwrap();
        let m = ConsumerOffsetManager::new(dir.path());
        let big = OFFSET_FAST_QUEUE_IDS as i32;
        for (queue, offset) in [(-1, 4), (big, 5), (big - 1, 6), (15, 7), (16, 8)] {
            m.commit_offset("g", "T", queue, offset);
        }
        assert_eq!(m.query_offset("g", "T", -1), Some(4));
        assert_eq!(m.query_offset("g", "T", big), Some(5));
        assert_eq!(m.query_offset("g", "T", big - 1), Some(6));
        assert_eq!(m.query_offset("g", "T", 17), None);
        assert_eq!(
            m.query_group_offsets("g", "T"),
            BTreeMap::from([(-1, 4), (15, 7), (16, 8), (big - 1, 6), (big, 5)])
        );
        // i64::MIN is the empty slot's marker: it reads back as no offset.
        m.commit_offset("g", "T", 15, i64::MIN);
        assert_eq!(m.query_offset("g", "T", 15), None);
        m.commit_offset("g", "T", 15, 9);
        assert_eq!(m.query_offset("g", "T", 15), Some(9));
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
        let backup_used = m2.load().unwrap();
        assert!(backup_used.is_none(), "{backup_used:?}");
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
        let backup_used = m.load().unwrap();
        assert!(backup_used.is_none(), "{backup_used:?}");
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
        assert!(warning.to_string().contains(".bak"), "{warning}");
        assert_eq!(m2.query_offset("g", "T", 0), Some(10));
        std::fs::write(persist::backup_path(m.path()), b"x").unwrap();
        let m3 = ConsumerOffsetManager::new(dir.path());
        assert!(
            m3.load().is_err(),
            "both corrupt must be an error, not an empty table"
        );
    }

    /// After a load from the .bak, the corrupt main file must not become the next .bak: the
    /// next persist hard-links the current main file to .bak.
    #[test]
    fn a_corrupt_main_file_never_replaces_the_good_backup() {
        let dir = tempfile::tempdir().unwrap();
        let m = ConsumerOffsetManager::new(dir.path());
        m.commit_offset("g", "T", 0, 10);
        m.persist().unwrap();
        m.commit_offset("g", "T", 0, 20);
        m.persist().unwrap();
        let corrupt = b"{\"offsetTable\":{\"T@g\":{\"0\":2";
        std::fs::write(m.path(), corrupt).unwrap();
        let m2 = ConsumerOffsetManager::new(dir.path());
        let warning = m2.load().unwrap().expect("the backup was used");
        assert_eq!(m2.query_offset("g", "T", 0), Some(10));
        m2.commit_offset("g", "T", 1, 5);
        assert!(m2.persist().unwrap());
        let bak = std::fs::read(persist::backup_path(m.path())).unwrap();
        assert_ne!(
            bak,
            corrupt.to_vec(),
            "the corrupt file was linked over the backup"
        );
        assert!(persist::parse_offset_table(&String::from_utf8(bak).unwrap()).is_ok());
        m2.commit_offset("g", "T", 1, 6);
        m2.persist().unwrap();
        let m3 = ConsumerOffsetManager::new(dir.path());
        assert!(m3.load().unwrap().is_none(), "the main file is good again");
        assert_eq!(m3.query_offset("g", "T", 0), Some(10));
        assert_eq!(m3.query_offset("g", "T", 1), Some(6));
        let kept: Vec<_> = std::fs::read_dir(dir.path().join("config"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("consumerOffset.json.corrupt-"))
            .collect();
        assert_eq!(
            kept.len(),
            1,
            "the corrupt bytes are kept for a look: {kept:?}"
        );
        let kept = std::fs::read(dir.path().join("config").join(&kept[0])).unwrap();
        assert_eq!(kept, corrupt.to_vec());
        assert!(warning.to_string().contains(".corrupt-"), "{warning}");
    }

    #[test]
    fn a_group_with_up_to_16_queues_costs_about_2_kib() {
        // docs/ARCHITECTURE.md states ~2 KiB per (topic, group) with up to 16 queues: the
        // entry (chunk directory inline) plus one chunk.
        assert_eq!(std::mem::size_of::<Chunk>(), 1024);
        let entry = std::mem::size_of::<GroupOffsets>();
        assert!(
            (1024..=1280).contains(&entry),
            "GroupOffsets is {entry} bytes"
        );
    }

    #[test]
    fn racing_first_commits_of_the_same_groups_all_land() {
        let dir = tempfile::tempdir().unwrap();
        let m = std::sync::Arc::new(ConsumerOffsetManager::new(dir.path()));
        let start = std::sync::Arc::new(std::sync::Barrier::new(4));
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let (m, start) = (m.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    // Every thread's first commit of every group races the others' inserts.
                    for g in 0..200 {
                        m.commit_offset(&format!("g{g}"), "T", t, i64::from(g));
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        for g in 0..200 {
            let expected: BTreeMap<i32, i64> = (0..4).map(|t| (t, i64::from(g))).collect();
            assert_eq!(m.query_group_offsets(&format!("g{g}"), "T"), expected);
        }
        assert_eq!(m.snapshot().len(), 200);
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
