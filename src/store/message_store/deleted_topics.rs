//! Tombstones of deleted topics (DELETE_TOPIC_IN_BROKER). Deleting a topic removes its
//! ConsumeQueues but keeps its records in the CommitLog, as Java does; recovery re-dispatches
//! the records of its scan window to their queues, so without a mark it would bring a deleted
//! topic's queues back (and, finding them short of older units, rebuild every queue from the
//! first CommitLog file). A tombstone says: records of this topic below this CommitLog offset
//! belong to the deleted topic and are not dispatched. Java needs none because its reput
//! starts after the queues' end; ringmq's recovery re-validates a window instead.
//!
//! The tombstones live in `<root>/deletedTopics.json` (`{"topic": offset}`), written through a
//! temporary file, fsync and rename before any queue file is removed. A tombstone is dropped
//! once retention has deleted every record below it.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::store::error::StoreError;
use crate::store::fs::{self, FileSystem, SyncKind};

/// File name of the tombstones, in the store root.
pub const DELETED_TOPICS_FILE_NAME: &str = "deletedTopics.json";

#[derive(Debug)]
pub(super) struct DeletedTopics {
    path: PathBuf,
    /// topic → CommitLog offset at deletion.
    below: BTreeMap<String, i64>,
}

impl DeletedTopics {
    /// Reads the tombstones of the store at `root` (none when the file is missing).
    pub(super) fn load(root: &Path) -> Result<Self, StoreError> {
        let path = root.join(DELETED_TOPICS_FILE_NAME);
        let below = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| StoreError::Corrupted {
                path: path.clone(),
                offset: 0,
                reason: format!("not a deleted-topics file: {e}"),
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(StoreError::io("read", &path, e)),
        };
        Ok(DeletedTopics { path, below })
    }

    /// The tombstone offset of `topic`, if it was deleted.
    pub(super) fn offset(&self, topic: &str) -> Option<i64> {
        self.below.get(topic).copied()
    }

    /// True for a record of a deleted topic written before its deletion.
    pub(super) fn hides(&self, topic: &str, phy_offset: i64) -> bool {
        self.offset(topic).is_some_and(|below| phy_offset < below)
    }

    pub(super) fn topics(&self) -> Vec<(String, i64)> {
        self.below.iter().map(|(t, o)| (t.clone(), *o)).collect()
    }

    /// Marks `topic` deleted at `phy_offset` and drops tombstones retention made useless;
    /// persists.
    pub(super) fn insert(
        &mut self,
        topic: &str,
        phy_offset: i64,
        min_phy_offset: i64,
        file_system: &dyn FileSystem,
    ) -> Result<(), StoreError> {
        self.below.insert(topic.to_string(), phy_offset);
        self.below.retain(|_, below| *below > min_phy_offset);
        self.persist(file_system)
    }

    /// Drops tombstones no record is below any more; persists when one went.
    pub(super) fn prune(
        &mut self,
        min_phy_offset: i64,
        file_system: &dyn FileSystem,
    ) -> Result<(), StoreError> {
        let before = self.below.len();
        self.below.retain(|_, below| *below > min_phy_offset);
        if self.below.len() != before {
            self.persist(file_system)?;
        }
        Ok(())
    }

    fn persist(&self, file_system: &dyn FileSystem) -> Result<(), StoreError> {
        let text = serde_json::to_vec(&self.below)
            .map_err(|e| StoreError::io("encode", &self.path, std::io::Error::other(e)))?;
        let tmp = self.path.with_extension("json.tmp");
        let mut file =
            std::fs::File::create(&tmp).map_err(|e| StoreError::io("create", &tmp, e))?;
        file.write_all(&text)
            .map_err(|e| StoreError::io("write", &tmp, e))?;
        file_system.sync(&file, &tmp, SyncKind::All)?;
        drop(file);
        std::fs::rename(&tmp, &self.path).map_err(|e| StoreError::io("rename", &self.path, e))?;
        fs::sync_dir(file_system, self.path.parent().unwrap_or(Path::new(".")))
    }
}
