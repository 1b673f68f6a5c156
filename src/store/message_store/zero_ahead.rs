//! Zero-ahead: with `sync` flush and `zero_ahead_bytes` > 0 (off by default), a thread keeps
//! the CommitLog bytes just past the write position written with zeros, so the fsyncs that
//! producers wait for write data, not the block map.
//!
//! Why: CommitLog files are preallocated with `fallocate`, which leaves their blocks
//! *unwritten* (read as zeros without being written). The first write-back of such a block
//! converts it to written, a change to the file's block map, and the `fdatasync` after it
//! must write that metadata too: on ext4 the inode (without a journal) or a journal commit.
//! Measured on ext4 (docs/BENCHMARKS.md, "CommitLog zero-ahead"): W2's mean CommitLog flush
//! fell by a third with a 16 MiB window. Writing zeros ahead converts the blocks in the
//! background, once per chunk instead of once per group commit. PostgreSQL
//! zero-fills its WAL segments for the same reason; Java's `MappedFile.warmMappedFile`
//! (`warmMapedFileEnable`) writes zeros over a whole new file at creation. Here a window of
//! `zero_ahead_bytes` moves with the write position instead, so a new file costs no stall.
//!
//! Correctness rests on one rule: zeros are written only under the writer lock, and only past
//! the published write position (from the next page boundary), where no append or replica
//! write is in progress and no reader looks. Bytes there read as zeros already, so the
//! write changes no content. Its cost is that every CommitLog byte is written to the disk
//! twice, which is why it is off by default and only `sync` flush, where the fsync is on
//! each send's path, runs it.
//!
//! The zeros go out with [`FileSystem::start_writeback`](crate::store::fs::FileSystem),
//! which waits for nothing and consumes no writeback error: a failure of these pages is
//! reported to the next fsync of the file, the flush thread's, which poisons the store as for
//! any other failed fsync. A failed zero write only pauses this thread.

use std::ops::Range;
use std::time::Duration;

use super::{lock, Inner};
use crate::store::error::StoreError;

/// Bytes zeroed per hold of the writer lock: 16 page writes, tens of microseconds, which is
/// all an append can wait for it.
pub(super) const ZERO_AHEAD_CHUNK_BYTES: u64 = 64 * 1024;
/// How often the thread looks at the write position. At 100 MB/s of appends 10 ms is 1 MB,
/// well inside a window of several MiB.
const ZERO_AHEAD_POLL_MS: u64 = 10;
/// Pause after a failed zero write before the next try.
const ZERO_AHEAD_RETRY_MS: u64 = 1_000;
/// Zeros start at a page boundary: the page holding the write position is written already.
/// They are written one page per `pwrite`: the page cache sizes a new folio by the write
/// that creates it, and one 64 KiB write made 64 KiB folios (ext4 on Linux 6.18), which every
/// group commit then wrote back whole for a 1 KiB append; /proc/<pid>/io counted nine times
/// the bytes appended.
const PAGE_BYTES: i64 = 4096;
static ZERO_PAGE: [u8; PAGE_BYTES as usize] = [0; PAGE_BYTES as usize];

/// The next range of CommitLog offsets to zero, given the write position `max_phy_offset`
/// and `zeroed_until_phy_offset`, where the last zeroed range ended:
/// from the page boundary at or after it (or from what is zeroed already) to one chunk
/// further, while the zeroed bytes reach less than `window_bytes` past the write position.
/// Never past the end of the file holding the write position: the next file does not exist
/// until an append rolls into it.
pub(super) fn next_zero_range(
    zeroed_until_phy_offset: i64,
    max_phy_offset: i64,
    file_size_bytes: i64,
    window_bytes: i64,
    chunk_bytes: i64,
) -> Option<Range<i64>> {
    assert!(file_size_bytes > 0 && chunk_bytes > 0 && max_phy_offset >= 0);
    let file_start = max_phy_offset - max_phy_offset % file_size_bytes;
    let file_end = file_start + file_size_bytes;
    let in_file = max_phy_offset - file_start;
    let page_after = file_start + (in_file + PAGE_BYTES - 1) / PAGE_BYTES * PAGE_BYTES;
    // What was zeroed counts only in this file (up to its end, included) and past the write
    // position.
    let zeroed = if (file_start..=file_end).contains(&zeroed_until_phy_offset) {
        zeroed_until_phy_offset
    } else {
        0
    };
    let from = page_after.max(zeroed);
    let target = max_phy_offset.saturating_add(window_bytes).min(file_end);
    (from < target).then(|| from..(from + chunk_bytes).min(file_end))
}

impl Inner {
    /// The zero-ahead thread (`sync` flush with `zero_ahead_bytes` > 0).
    pub(super) fn zero_ahead_loop(&self) {
        let window_bytes = i64::try_from(self.config.zero_ahead_bytes).unwrap_or(i64::MAX);
        let mut zeroed_until_phy_offset = 0;
        let mut failing = false;
        loop {
            let pause_ms = match self.zero_ahead_pass(&mut zeroed_until_phy_offset, window_bytes) {
                Ok(()) => {
                    failing = false;
                    ZERO_AHEAD_POLL_MS
                }
                Err(e) => {
                    // Appends are not affected: they write over unconverted blocks as before.
                    if !failing {
                        tracing::warn!(error = %e, "zeroing ahead of the CommitLog write position failed; retrying");
                    }
                    failing = true;
                    ZERO_AHEAD_RETRY_MS
                }
            };
            if self.wait_for_stop(Duration::from_millis(pause_ms)) {
                return;
            }
        }
    }

    /// Zeroes chunks, one writer-lock hold each, until the window past the write position
    /// is zeroed, the file holding it ends, or the store stops taking writes;
    /// `zeroed_until_phy_offset` is where the last zeroed range ended, kept between passes.
    /// The write position never moves back while the store is open (only recovery, before
    /// this thread starts, cuts the log), so what was zeroed past it stays zeros.
    pub(super) fn zero_ahead_pass(
        &self,
        zeroed_until_phy_offset: &mut i64,
        window_bytes: i64,
    ) -> Result<(), StoreError> {
        let file_size_bytes = self.commit_log.file_size_bytes();
        loop {
            let writer = lock(&self.writer);
            if self.check_writable().is_err() {
                return Ok(());
            }
            let max_phy_offset = self.commit_log.max_phy_offset();
            let Some(range) = next_zero_range(
                *zeroed_until_phy_offset,
                max_phy_offset,
                file_size_bytes,
                window_bytes,
                ZERO_AHEAD_CHUNK_BYTES as i64,
            ) else {
                return Ok(());
            };
            // The file holding the write position exists once an append placed bytes in it.
            let Some(seg) = self.commit_log.segments().find(range.start) else {
                return Ok(());
            };
            let pos = (range.start - seg.start_offset) as u64;
            let len = (range.end - range.start) as u64;
            for page in (pos..pos + len).step_by(ZERO_PAGE.len()) {
                let page_len = (pos + len - page).min(ZERO_PAGE.len() as u64) as usize;
                self.fs
                    .write_at(&seg.file, &seg.path, &ZERO_PAGE[..page_len], page)?;
            }
            drop(writer);
            self.fs.start_writeback(&seg.file, &seg.path, pos, len)?;
            *zeroed_until_phy_offset = range.end;
            self.zero_ahead_bytes_written
                .fetch_add(len, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Sleeps up to `timeout`; true when the store is stopping.
    fn wait_for_stop(&self, timeout: Duration) -> bool {
        let signal = lock(&self.signal);
        if signal.stop {
            return true;
        }
        let (signal, _) = self
            .zero_ahead_cv
            .wait_timeout(signal, timeout)
            .unwrap_or_else(|e| e.into_inner());
        signal.stop
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: i64 = 1 << 20;
    const WINDOW: i64 = 64 * 1024;
    const CHUNK: i64 = 16 * 1024;

    fn range(zeroed: i64, max: i64) -> Option<Range<i64>> {
        next_zero_range(zeroed, max, FILE, WINDOW, CHUNK)
    }

    #[test]
    fn zeros_start_at_the_page_after_the_write_position() {
        assert_eq!(range(0, 0), Some(0..CHUNK));
        assert_eq!(range(0, 1), Some(4096..4096 + CHUNK));
        assert_eq!(range(0, 4096), Some(4096..4096 + CHUNK));
        assert_eq!(range(0, 5000), Some(8192..8192 + CHUNK));
    }

    #[test]
    fn zeroing_goes_on_from_what_is_zeroed_until_the_window_is_covered() {
        assert_eq!(range(CHUNK, 100), Some(CHUNK..2 * CHUNK));
        // The window reaches 100 + 64 KiB; the last chunk may pass it.
        assert_eq!(range(4 * CHUNK, 100), Some(4 * CHUNK..5 * CHUNK));
        assert_eq!(range(5 * CHUNK, 100), None);
        assert_eq!(range(WINDOW + 100, 100), None);
    }

    #[test]
    fn zeroing_stops_at_the_end_of_the_file_holding_the_write_position() {
        let max = FILE - 10_000;
        let r = range(0, max).unwrap();
        assert_eq!(r.start, FILE - 8192);
        assert_eq!(r.end, FILE);
        assert_eq!(range(FILE, max), None);
    }

    #[test]
    fn a_roll_into_the_next_file_starts_over_at_its_write_position() {
        // Zeroed to the end of file 0; the write position is now 200 bytes into file 1.
        assert_eq!(
            range(FILE, FILE + 200),
            Some(FILE + 4096..FILE + 4096 + CHUNK)
        );
    }

    #[test]
    fn a_zeroed_mark_before_the_write_position_is_not_trusted() {
        assert_eq!(range(8192, 40_000), Some(40_960..40_960 + CHUNK));
    }

    #[test]
    fn a_file_size_that_is_not_a_page_multiple_never_zeroes_past_the_file() {
        assert_eq!(next_zero_range(0, 5000, 6000, WINDOW, CHUNK), None);
        assert_eq!(
            next_zero_range(0, 6000 + 10, 6000, WINDOW, CHUNK),
            Some(6000 + 4096..12_000)
        );
    }
}

#[cfg(test)]
mod store_tests {
    use std::sync::atomic::Ordering;
    use std::time::{Duration, Instant};

    use super::ZERO_AHEAD_CHUNK_BYTES;
    use crate::store::config::FlushPolicy;
    use crate::store::filter::AcceptAll;
    use crate::store::format;
    use crate::store::message_store::tests::{config, msg, open, pull};

    use std::sync::Arc;

    use crate::store::fs::fault::{Failpoint, FaultFs};
    use crate::store::io::IoEngine;
    use crate::store::message_store::MessageStore;
    use crate::store::StoreError;

    const FILE_BYTES: u64 = 1 << 20;

    /// A sync-flush store of 1 MiB CommitLog files on `fs`, its zero-ahead thread off (a test
    /// runs the passes itself).
    fn store_without_thread(dir: &std::path::Path, fs: Arc<FaultFs>) -> Arc<MessageStore> {
        let mut cfg = config(dir);
        cfg.commit_log_file_size_bytes = FILE_BYTES;
        cfg.consume_queue_file_units = 4096;
        cfg.flush_policy = FlushPolicy::Sync;
        cfg.zero_ahead_bytes = 0;
        MessageStore::open_on(cfg, Arc::new(IoEngine::new_pread()), fs).unwrap()
    }

    #[test]
    fn a_pass_zeroes_one_window_from_the_page_after_the_write_position_and_no_more() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_without_thread(dir.path(), Arc::new(FaultFs::new()));
        let chunk = ZERO_AHEAD_CHUNK_BYTES as i64;
        let window = 2 * chunk;
        let mut zeroed_until = 0;
        // No CommitLog file yet: nothing to zero.
        store
            .inner
            .zero_ahead_pass(&mut zeroed_until, window)
            .unwrap();
        assert_eq!(
            store.inner.zero_ahead_bytes_written.load(Ordering::Relaxed),
            0
        );
        let first = store.put_message(&msg("T", 0, b"first", "A")).unwrap();
        store
            .inner
            .zero_ahead_pass(&mut zeroed_until, window)
            .unwrap();
        let end = first.end_phy_offset();
        assert!(end < 4096);
        assert_eq!(zeroed_until, 4096 + 2 * chunk);
        let written = || store.inner.zero_ahead_bytes_written.load(Ordering::Relaxed);
        assert_eq!(written(), 2 * ZERO_AHEAD_CHUNK_BYTES);
        // Covered: a second pass writes nothing.
        store
            .inner
            .zero_ahead_pass(&mut zeroed_until, window)
            .unwrap();
        assert_eq!(written(), 2 * ZERO_AHEAD_CHUNK_BYTES);
        // Appends move the write position past the first chunk: the window moves with it.
        let body = vec![b'y'; 1000];
        while store.max_phy_offset() < 4096 + chunk {
            store.put_message(&msg("T", 0, &body, "A")).unwrap();
        }
        store
            .inner
            .zero_ahead_pass(&mut zeroed_until, window)
            .unwrap();
        // Whole chunks from where the first pass stopped, up to a window past the position.
        let want_chunks =
            ((store.max_phy_offset() + window - 4096) as u64).div_ceil(chunk as u64) as i64;
        assert_eq!(zeroed_until, 4096 + want_chunks * chunk);
        assert_eq!(written(), want_chunks as u64 * ZERO_AHEAD_CHUNK_BYTES);
        assert_eq!(
            store
                .get_message(&pull("T", 0, 0, 1, &AcceptAll))
                .unwrap()
                .message_count,
            1
        );
    }

    #[test]
    fn a_failed_zero_write_fails_the_pass_only() {
        let dir = tempfile::tempdir().unwrap();
        let fs = Arc::new(FaultFs::new());
        let store = store_without_thread(dir.path(), Arc::clone(&fs));
        store.put_message(&msg("T", 0, b"first", "A")).unwrap();
        fs.arm(Failpoint::WriteEnospc, "commitlog", 1);
        let mut zeroed_until = 0;
        let err = store
            .inner
            .zero_ahead_pass(&mut zeroed_until, 4 * ZERO_AHEAD_CHUNK_BYTES as i64)
            .unwrap_err();
        assert!(
            matches!(err, StoreError::Io { op: "pwrite", .. }),
            "{err:?}"
        );
        assert_eq!(zeroed_until, 0);
        assert_eq!(store.is_read_only(), None);
        let second = store.put_message(&msg("T", 0, b"second", "A")).unwrap();
        assert_eq!(second.queue_offset, 1);
        store
            .inner
            .zero_ahead_pass(&mut zeroed_until, 4 * ZERO_AHEAD_CHUNK_BYTES as i64)
            .unwrap();
        assert_eq!(zeroed_until, 4096 + 4 * ZERO_AHEAD_CHUNK_BYTES as i64);
    }

    #[test]
    fn only_a_sync_flush_store_runs_the_thread() {
        for (flush, zero_ahead_bytes, runs) in [
            (FlushPolicy::Sync, WINDOW_BYTES, true),
            (FlushPolicy::Sync, 0, false),
            (FlushPolicy::Async, WINDOW_BYTES, false),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let mut cfg = config(dir.path());
            cfg.commit_log_file_size_bytes = FILE_BYTES;
            cfg.flush_policy = flush;
            cfg.zero_ahead_bytes = zero_ahead_bytes;
            let store = open(cfg);
            store.put_message(&msg("T", 0, b"first", "A")).unwrap();
            // The thread looks every 10 ms; a second is a hundred looks.
            let deadline = Instant::now() + Duration::from_secs(1);
            let written = || store.inner.zero_ahead_bytes_written.load(Ordering::Relaxed);
            while written() < WINDOW_BYTES && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            assert_eq!(written() > 0, runs, "{flush:?} {zero_ahead_bytes}");
            store.shutdown().unwrap();
        }
    }
    const WINDOW_BYTES: u64 = 4 * ZERO_AHEAD_CHUNK_BYTES;

    #[tokio::test]
    async fn zeros_follow_the_write_position_and_never_touch_a_record() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = config(dir.path());
        cfg.commit_log_file_size_bytes = FILE_BYTES;
        cfg.consume_queue_file_units = 4096;
        cfg.flush_policy = FlushPolicy::Sync;
        cfg.zero_ahead_bytes = WINDOW_BYTES;
        let store = open(cfg);
        let body = vec![b'x'; 1000];
        let mut last_end = 0;
        for i in 0..2500u32 {
            let mut b = body.clone();
            b[..4].copy_from_slice(&i.to_be_bytes());
            let r = store.put_message(&msg("T", 0, &b, "A")).unwrap();
            last_end = r.end_phy_offset();
        }
        store.wait_flushed(last_end).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let written = || store.inner.zero_ahead_bytes_written.load(Ordering::Relaxed);
        let in_file = last_end as u64 % FILE_BYTES;
        let want_now = (WINDOW_BYTES).min(FILE_BYTES - in_file.next_multiple_of(4096));
        while written() < want_now && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let written = written();
        // Every byte once, plus a window per file.
        assert!(written >= want_now, "{written}");
        assert!(
            written <= last_end as u64 + 3 * (WINDOW_BYTES + ZERO_AHEAD_CHUNK_BYTES),
            "{written}"
        );
        let mut next = 0i64;
        while next < 2500 {
            let got = store
                .get_message(&pull("T", 0, next, 32, &AcceptAll))
                .unwrap();
            assert!(got.message_count > 0, "nothing at {next}");
            for i in 0..got.message_count {
                let record = format::decode_record(got.message(i)).unwrap();
                assert_eq!(record.body[..4], (next as u32).to_be_bytes());
                assert!(record.body[4..].iter().all(|b| *b == b'x'));
                next += 1;
            }
        }
    }
}
