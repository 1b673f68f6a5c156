//! What recovery does with corruption before the end of the CommitLog: an invalid record (or a
//! hole of zeros) in a file that has a later file holding data. Truncating there would delete
//! every later file, so [`CorruptionPolicy`] decides: refuse to open (the default), or move the
//! bad tail aside, keep it, and open with the log ending at the invalid record.

use std::path::PathBuf;
use std::sync::Arc;

use super::recovery::read_into;
use super::Inner;
use crate::common::now_ms;
use crate::store::config::CorruptionPolicy;
use crate::store::error::StoreError;
use crate::store::fs;
use crate::store::segment::{self, segment_file_name, Segment};

/// Bytes copied per read while moving a bad tail aside.
const QUARANTINE_COPY_CHUNK_BYTES: usize = 1024 * 1024;

impl Inner {
    /// Applies the corruption policy to an invalid record at CommitLog offset `end` that has
    /// data after it. Returns the files moved aside.
    pub(super) fn handle_mid_log_corruption(
        &self,
        segs: &[Arc<Segment>],
        end: i64,
        reason: &str,
    ) -> Result<Vec<PathBuf>, StoreError> {
        let file_size = self.commit_log.file_size_bytes();
        let idx = segment::index_in(segs, end, file_size as u64)
            .expect("the scan ended inside a CommitLog file");
        let seg = &segs[idx];
        let in_file = end - seg.start_offset;
        match self.config.corruption_policy {
            CorruptionPolicy::Refuse => Err(StoreError::Corrupted {
                path: seg.path.clone(),
                offset: in_file,
                reason: format!(
                    "{reason} (CommitLog offset {end}); not starting, so nothing after it is \
                     truncated away: set the store corruption policy to quarantine \
                     (RINGMQ_STORE_CORRUPTION_POLICY=quarantine) to move the bad tail aside \
                     and start"
                ),
            }),
            CorruptionPolicy::Quarantine => self.quarantine(segs, idx, in_file, reason),
        }
    }

    /// Copies `segs[idx]` from `in_file` to its end into `<offset>.corrupt-<ms>`, renames every
    /// later file to `<name>.corrupt-<ms>` and drops them from the list. The copy and the
    /// renames are durable before recovery zeroes the tail.
    fn quarantine(
        &self,
        segs: &[Arc<Segment>],
        idx: usize,
        in_file: i64,
        reason: &str,
    ) -> Result<Vec<PathBuf>, StoreError> {
        let seg = &segs[idx];
        let dir = self.commit_log.segments().dir().to_path_buf();
        let suffix = format!(".corrupt-{}", now_ms());
        let copy_path = dir.join(format!(
            "{}{suffix}",
            segment_file_name(seg.start_offset + in_file)
        ));
        self.copy_tail(seg, in_file as u64, &copy_path)?;
        let mut moved = vec![copy_path];
        for later in &segs[idx + 1..] {
            let mut name = later.path.file_name().unwrap_or_default().to_os_string();
            name.push(&suffix);
            let to = dir.join(name);
            self.fs.rename(&later.path, &to)?;
            moved.push(to);
        }
        fs::sync_dir(self.fs.as_ref(), &dir)?;
        let next_start = seg.start_offset + self.commit_log.file_size_bytes();
        self.commit_log.segments().forget_from(next_start);
        tracing::warn!(
            file = %seg.path.display(),
            offset = in_file,
            %reason,
            kept = ?moved,
            "corrupt commit log tail moved aside; the log now ends at the invalid record"
        );
        Ok(moved)
    }

    fn copy_tail(&self, seg: &Segment, from: u64, to: &std::path::Path) -> Result<(), StoreError> {
        let file_size = self.commit_log.file_size_bytes() as u64;
        let out = self.fs.create(to)?;
        let mut buf = Vec::with_capacity(QUARANTINE_COPY_CHUNK_BYTES);
        let mut pos = from;
        while pos < file_size {
            let len = QUARANTINE_COPY_CHUNK_BYTES.min((file_size - pos) as usize);
            read_into(self, seg, pos, len, &mut buf)?;
            self.fs.write_at(&out, to, &buf, pos - from)?;
            pos += len as u64;
        }
        self.fs.sync(&out, to, fs::SyncKind::All)
    }
}
