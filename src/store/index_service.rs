//! The message index (Java `IndexService`): the index files under `<root>/index/`, oldest
//! first, the last one being written. Messages are indexed as they are dispatched (the
//! append path, and recovery for the records after the index's end); queries walk the files
//! newest first. Every file operation goes through the store's [`FileSystem`].

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use crate::store::error::StoreError;
use crate::store::format::{self, sys_flag};
use crate::store::fs::{self, FileSystem};
use crate::store::index_file::{self, build_index_key, IndexFile, IndexHeader};

/// Java `MessageConst.PROPERTY_KEYS`.
pub const PROPERTY_KEYS: &[u8] = b"KEYS";
/// Java `MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX`.
pub const PROPERTY_UNIQ_KEY: &[u8] = b"UNIQ_KEY";
/// Java `MessageConst.KEY_SEPARATOR`.
pub const KEY_SEPARATOR: u8 = b' ';
/// Name of the directory of index files (`StorePathConfigHelper.getStorePathIndex`).
pub const INDEX_DIR_NAME: &str = "index";

/// The dimensions of the index files.
#[derive(Debug, Clone, Copy)]
pub struct IndexDimensions {
    /// `maxHashSlotNum`.
    pub hash_slot_num: i32,
    /// `maxIndexNum`.
    pub index_num: i32,
}

/// What one message contributes to the index.
#[derive(Debug, Clone, Copy)]
pub struct IndexedMessage<'a> {
    pub topic: &'a str,
    pub properties: &'a [u8],
    pub sys_flag: i32,
    pub phy_offset: i64,
    pub store_timestamp_ms: i64,
}

impl<'a> IndexedMessage<'a> {
    /// What the index takes of a decoded CommitLog record.
    pub fn of_record(record: &'a format::DecodedRecord<'a>) -> Self {
        IndexedMessage {
            topic: record.topic,
            properties: record.properties,
            sys_flag: record.sys_flag,
            phy_offset: record.phy_offset,
            store_timestamp_ms: record.store_timestamp_ms,
        }
    }
}

/// Java `QueryOffsetResult`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryOffsetResult {
    pub phy_offsets: Vec<i64>,
    pub index_last_update_timestamp_ms: i64,
    pub index_last_update_phy_offset: i64,
}

#[derive(Debug)]
pub struct IndexService {
    dir: PathBuf,
    dims: IndexDimensions,
    fs: Arc<dyn FileSystem>,
    files: RwLock<Arc<Vec<Arc<IndexFile>>>>,
    /// Serializes writers (the store's writer and recovery) and file creation.
    write_lock: Mutex<()>,
}

impl IndexService {
    /// Loads the index files of `<root>/index/` in name order (Java `IndexService.load`).
    pub fn open(
        root: &Path,
        dims: IndexDimensions,
        fs: Arc<dyn FileSystem>,
    ) -> Result<IndexService, StoreError> {
        let dir = root.join(INDEX_DIR_NAME);
        let mut names = Vec::new();
        match std::fs::read_dir(&dir) {
            Ok(entries) => {
                for entry in entries {
                    let entry = entry.map_err(|e| StoreError::io("read dir", &dir, e))?;
                    if let Some(name) = entry.file_name().to_str() {
                        if index_file::is_index_file_name(name) {
                            names.push(name.to_owned());
                        }
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError::io("read dir", &dir, e)),
        }
        names.sort();
        let files = names
            .iter()
            .map(|name| {
                let path = dir.join(name);
                IndexFile::open(Arc::clone(&fs), &path, dims.hash_slot_num, dims.index_num)
                    .map(Arc::new)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(IndexService {
            dir,
            dims,
            fs,
            files: RwLock::new(Arc::new(files)),
            write_lock: Mutex::new(()),
        })
    }

    pub fn files(&self) -> Arc<Vec<Arc<IndexFile>>> {
        Arc::clone(&self.files.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Repairs the last file after a crash (see [`IndexFile::repair_tail`]) and says from
    /// where recovery must index the CommitLog again: `(from, skip_from)` means records at
    /// `from` and after, except one starting exactly at `from` when `skip_from` (it is the
    /// last one already indexed).
    pub fn recovery_start(&self) -> Result<(i64, bool), StoreError> {
        let files = self.files();
        let Some(last) = files.last() else {
            return Ok((0, false));
        };
        let repaired = last.repair_tail()?;
        if repaired > 0 {
            tracing::warn!(
                entries = repaired,
                file = %last.path.display(),
                "index entries past the header's count dropped; they are indexed again"
            );
        }
        Ok(resume_point(&last.header()))
    }

    /// After a failed flush of the last file: sets it back to its last durable header (see
    /// [`IndexFile::rewind_to_durable`]) and says from where the CommitLog must be indexed
    /// again, as [`IndexService::recovery_start`] does; `None` when no flush failed. Only the
    /// last file can be in doubt: a full file is flushed before the next one is created, and
    /// never written again.
    pub fn rewind_after_failed_flush(&self) -> Result<Option<(i64, bool)>, StoreError> {
        let _guard = self.write_lock.lock().unwrap_or_else(|e| e.into_inner());
        let files = self.files();
        let Some(last) = files.last() else {
            return Ok(None);
        };
        debug_assert!(files.iter().rev().skip(1).all(|f| !f.is_in_doubt()));
        Ok(last.rewind_to_durable()?.map(|h| resume_point(&h)))
    }

    /// Java `IndexService.buildIndex`: indexes the UNIQ_KEY and each KEYS token of a message as
    /// `topic#key`; rolled-back transactions are not indexed. Full files roll to a new one.
    pub fn build_index(&self, msg: &IndexedMessage<'_>) -> Result<(), StoreError> {
        if msg.sys_flag & sys_flag::TRANSACTION_MASK == sys_flag::TRANSACTION_ROLLBACK_TYPE {
            return Ok(());
        }
        let uniq = format::property_value(msg.properties, PROPERTY_UNIQ_KEY);
        let keys = format::property_value(msg.properties, PROPERTY_KEYS);
        if uniq.is_none() && keys.is_none() {
            return Ok(());
        }
        let _guard = self.write_lock.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(uniq) = uniq {
            self.put_key(msg, &String::from_utf8_lossy(uniq))?;
        }
        if let Some(keys) = keys {
            for key in keys
                .split(|b| *b == KEY_SEPARATOR)
                .filter(|k| !k.is_empty())
            {
                self.put_key(msg, &String::from_utf8_lossy(key))?;
            }
        }
        Ok(())
    }

    /// Under `write_lock`.
    fn put_key(&self, msg: &IndexedMessage<'_>, key: &str) -> Result<(), StoreError> {
        let key_hash = index_file::index_key_hash_of(msg.topic, key);
        let mut file = self.last_writable_file(msg.store_timestamp_ms)?;
        // A file is full only after one put, so the second file always takes the key.
        for _ in 0..2 {
            if file.put_key_hash(key_hash, msg.phy_offset, msg.store_timestamp_ms)? {
                return Ok(());
            }
            file = self.last_writable_file(msg.store_timestamp_ms)?;
        }
        Err(StoreError::Corrupted {
            path: file.path.clone(),
            offset: msg.phy_offset,
            reason: "a new index file refused its first key".to_owned(),
        })
    }

    /// Java `getAndCreateLastIndexFile`: the last file, or a new one when there is none or it
    /// is full (the full one is flushed first). Under `write_lock`.
    fn last_writable_file(&self, now_ms: i64) -> Result<Arc<IndexFile>, StoreError> {
        let files = self.files();
        let (prev_end_phy, prev_end_ts) = match files.last() {
            Some(last) if !last.is_write_full() => return Ok(Arc::clone(last)),
            Some(last) => {
                last.flush()?;
                let h = last.header();
                (h.end_phy_offset, h.end_timestamp_ms)
            }
            None => (0, 0),
        };
        fs::ensure_dir(self.fs.as_ref(), &self.dir)?;
        let path = self.new_file_path(&files, now_ms.max(crate::common::now_ms()));
        let file = Arc::new(IndexFile::create(
            Arc::clone(&self.fs),
            path,
            (self.dims.hash_slot_num, self.dims.index_num),
            prev_end_phy,
            prev_end_ts,
        )?);
        let mut list: Vec<Arc<IndexFile>> = files.as_ref().clone();
        list.push(Arc::clone(&file));
        *self.files.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(list);
        Ok(file)
    }

    /// A name after every existing one (two files made in one millisecond, or a clock that
    /// stepped back, still sort in creation order).
    fn new_file_path(&self, files: &[Arc<IndexFile>], time_ms: i64) -> PathBuf {
        let last_name = files
            .last()
            .and_then(|f| f.path.file_name())
            .and_then(|n| n.to_str())
            .map(str::to_owned);
        let mut t = time_ms;
        loop {
            let name = index_file::index_file_name(t);
            if last_name.as_deref().is_none_or(|last| name.as_str() > last) {
                return self.dir.join(name);
            }
            t += 1;
        }
    }

    /// Java `IndexService.queryOffset`: newest file first, at most `max_num` offsets.
    pub fn query_offset(
        &self,
        topic: &str,
        key: &str,
        max_num: usize,
        begin_ms: i64,
        end_ms: i64,
    ) -> Result<QueryOffsetResult, StoreError> {
        let files = self.files();
        let mut result = QueryOffsetResult::default();
        if let Some(last) = files.last() {
            let h = last.header();
            result.index_last_update_timestamp_ms = h.end_timestamp_ms;
            result.index_last_update_phy_offset = h.end_phy_offset;
        }
        let key = build_index_key(topic, key);
        for file in files.iter().rev() {
            if file.is_time_matched(begin_ms, end_ms) {
                file.select_phy_offsets(&mut result.phy_offsets, &key, max_num, begin_ms, end_ms)?;
            }
            if file.header().begin_timestamp_ms < begin_ms || result.phy_offsets.len() >= max_num {
                break;
            }
        }
        Ok(result)
    }

    /// Java `IndexService.deleteExpiredFile`: deletes the oldest files (never the last) whose
    /// last message is below `min_phy_offset`. Returns how many.
    pub fn delete_expired(&self, min_phy_offset: i64) -> Result<usize, StoreError> {
        let _guard = self.write_lock.lock().unwrap_or_else(|e| e.into_inner());
        let files = self.files();
        let expired = files
            .iter()
            .take(files.len().saturating_sub(1))
            .take_while(|f| f.header().end_phy_offset < min_phy_offset)
            .count();
        if expired == 0 {
            return Ok(0);
        }
        let kept: Vec<Arc<IndexFile>> = files[expired..].to_vec();
        *self.files.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(kept);
        for file in &files[..expired] {
            fs::remove_file(self.fs.as_ref(), &file.path)?;
        }
        Ok(expired)
    }

    /// Writes the entries the last file holds in memory ([`IndexFile::publish`]): the index
    /// thread calls it after each step, so the entries of a step take one write.
    pub fn publish(&self) -> Result<(), StoreError> {
        let _guard = self.write_lock.lock().unwrap_or_else(|e| e.into_inner());
        match self.files().last() {
            Some(last) => last.publish(),
            None => Ok(()),
        }
    }

    /// Writes the header of every changed file and fsyncs it. Under `write_lock`: a header
    /// covers whole messages only (one taken between two keys of a message would end at that
    /// message, which recovery then skips as indexed, losing its other keys). The index
    /// thread waits for the fsync; the writer never does.
    pub fn flush(&self) -> Result<(), StoreError> {
        let _guard = self.write_lock.lock().unwrap_or_else(|e| e.into_inner());
        for file in self.files().iter() {
            file.flush()?;
        }
        Ok(())
    }
}

/// Where indexing resumes after a file whose header is `header`: `(from, skip_from)` as in
/// [`IndexService::recovery_start`]. Only a file holding entries has indexed the record at its
/// end whole. An empty one carries the previous file's end, and the message there may have
/// rolled between two keys (its later keys lost with this file's unwritten header): index it
/// again (queries drop the duplicate offsets of its earlier keys).
fn resume_point(header: &IndexHeader) -> (i64, bool) {
    (header.end_phy_offset, header.index_count > 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::fs::RealFs;

    const DIMS: IndexDimensions = IndexDimensions {
        hash_slot_num: 4,
        index_num: 4,
    };

    fn msg<'a>(properties: &'a [u8], phy_offset: i64, ts: i64) -> IndexedMessage<'a> {
        IndexedMessage {
            topic: "T",
            properties,
            sys_flag: 0,
            phy_offset,
            store_timestamp_ms: ts,
        }
    }

    #[test]
    fn keys_and_uniq_key_roll_files_and_query_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let svc = IndexService::open(dir.path(), DIMS, RealFs::shared()).unwrap();
        let props = format::encode_properties([("KEYS", "k1 k2"), ("UNIQ_KEY", "U1")]);
        svc.build_index(&msg(props.as_bytes(), 0, 1_000)).unwrap();
        let props2 = format::encode_properties([("KEYS", "k1")]);
        svc.build_index(&msg(props2.as_bytes(), 500, 2_000))
            .unwrap();
        // 3 entries per file: the 4th key rolled to a second file.
        assert_eq!(svc.files().len(), 2);
        let q = svc.query_offset("T", "k1", 10, 0, i64::MAX).unwrap();
        assert_eq!(q.phy_offsets, vec![500, 0]);
        assert_eq!(q.index_last_update_phy_offset, 500);
        let q = svc.query_offset("T", "U1", 10, 0, i64::MAX).unwrap();
        assert_eq!(q.phy_offsets, vec![0]);
        assert!(svc
            .query_offset("T2", "k1", 10, 0, i64::MAX)
            .unwrap()
            .phy_offsets
            .is_empty());
        // Retention keeps the last file.
        assert_eq!(svc.delete_expired(10_000).unwrap(), 1);
        assert_eq!(svc.files().len(), 1);
    }

    #[test]
    fn rollback_and_keyless_messages_are_not_indexed() {
        let dir = tempfile::tempdir().unwrap();
        let svc = IndexService::open(dir.path(), DIMS, RealFs::shared()).unwrap();
        let props = format::encode_properties([("KEYS", "k")]);
        let mut m = msg(props.as_bytes(), 0, 1_000);
        m.sys_flag = sys_flag::TRANSACTION_ROLLBACK_TYPE;
        svc.build_index(&m).unwrap();
        svc.build_index(&msg(b"", 10, 1_000)).unwrap();
        assert!(svc.files().is_empty());
        assert_eq!(svc.recovery_start().unwrap(), (0, false));
    }
}
