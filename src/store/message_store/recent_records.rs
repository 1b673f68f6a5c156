//! The newest CommitLog records, kept in memory as the append wrote them, so a pull that keeps
//! up with the appends copies its records from here instead of reading them back from the file.
//!
//! Why: a consumer that keeps up pulls each record right after its append. Read through the io
//! engine, that is one io_uring submit-and-wait per pull on the network thread (about 4 % of the
//! broker's CPU in W3, docs/BENCHMARKS.md "The newest records served from memory"); read through
//! the file's mapping, it is a page fault per page written since the last pull
//! (`get/mapped.rs`, `MAPPED_READ_LAG_MIN_BYTES`). Java reads both kinds from its `MappedFile`s;
//! this window is ringmq's own, and a cache only: the file stays the record's truth, and a pull
//! whose records are not all here reads them as before.
//!
//! Layout: a few chunks of [`CHUNK_BYTES`], each holding back-to-back records from its start
//! offset. Only the writer (under the store's writer lock, through [`RecentWriter`]) adds bytes,
//! always past a chunk's `filled` mark, and publishes them by raising the mark (release); a
//! reader copies only bytes below the mark it loaded (acquire). Bytes below the mark never change
//! while the chunk is shared, so readers and the writer never touch the same byte at once. A chunk
//! leaves the window whole; the writer reuses it only when no reader holds it.

use std::collections::VecDeque;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard};

/// Bytes of one chunk. A batch of records larger than this is not kept (its pulls read the file).
pub(super) const CHUNK_BYTES: usize = 256 * 1024;

/// One run of back-to-back records, `[start_phy_offset, start_phy_offset + filled)`.
struct Chunk {
    start_phy_offset: i64,
    /// Bytes published to readers; only the writer raises it.
    filled: AtomicUsize,
    bytes: NonNull<u8>,
}

// SAFETY: the buffer is owned by the chunk. The writer writes only past `filled` and publishes
// with a release store; readers read only below the `filled` they loaded with acquire. The bytes
// below `filled` are not written again until the writer holds the chunk alone (`Arc::get_mut`).
unsafe impl Send for Chunk {}
// SAFETY: as for `Send`: shared access only ever reads published bytes.
unsafe impl Sync for Chunk {}

impl Chunk {
    fn new(start_phy_offset: i64) -> Chunk {
        let buffer: Box<[u8]> = vec![0u8; CHUNK_BYTES].into_boxed_slice();
        let bytes = NonNull::new(Box::into_raw(buffer).cast::<u8>()).expect("Box is never null");
        Chunk {
            start_phy_offset,
            filled: AtomicUsize::new(0),
            bytes,
        }
    }

    /// The published bytes.
    fn published(&self) -> &[u8] {
        let filled = self.filled.load(Ordering::Acquire);
        // SAFETY: `filled <= CHUNK_BYTES` and those bytes were written before the release store
        // that made `filled` this large; the writer never writes below `filled` while shared.
        unsafe { std::slice::from_raw_parts(self.bytes.as_ptr(), filled) }
    }

    fn end_phy_offset(&self) -> i64 {
        self.start_phy_offset + self.filled.load(Ordering::Relaxed) as i64
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        let slice = std::ptr::slice_from_raw_parts_mut(self.bytes.as_ptr(), CHUNK_BYTES);
        // SAFETY: `bytes` came from `Box::into_raw` of a `CHUNK_BYTES` boxed slice in `new`.
        drop(unsafe { Box::from_raw(slice) });
    }
}

/// The readers' side: the chunks of the window, oldest first.
#[derive(Default)]
pub(super) struct RecentRecords {
    chunks: RwLock<VecDeque<Arc<Chunk>>>,
}

impl std::fmt::Debug for RecentRecords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecentRecords").finish_non_exhaustive()
    }
}

/// A read view of the window, for copying several ranges under one lock.
pub(super) struct RecentView<'a> {
    chunks: RwLockReadGuard<'a, VecDeque<Arc<Chunk>>>,
}

impl RecentRecords {
    /// `None` when the window is empty (so a caller skips it at the cost of one lock).
    pub(super) fn view(&self) -> Option<RecentView<'_>> {
        let chunks = self.chunks.read().unwrap_or_else(|e| e.into_inner());
        (!chunks.is_empty()).then_some(RecentView { chunks })
    }

    /// Replaces `out` with the kept bytes from `phy_offset` on, at most `len_max` of them and
    /// no further than the chunk holding `phy_offset` (a chunk ends between records). False,
    /// with `out` untouched, when `phy_offset` is not kept.
    pub(super) fn copy_from(&self, phy_offset: i64, len_max: usize, out: &mut Vec<u8>) -> bool {
        let Some(view) = self.view() else {
            return false;
        };
        let Some((chunk, from)) = view.chunk_of(phy_offset) else {
            return false;
        };
        let bytes = chunk.published();
        if from >= bytes.len() {
            return false;
        }
        let to = bytes.len().min(from.saturating_add(len_max));
        out.clear();
        out.extend_from_slice(&bytes[from..to]);
        true
    }
}

impl RecentView<'_> {
    /// The bytes `[phy_offset, phy_offset + len)` if one chunk holds them all.
    pub(super) fn range(&self, phy_offset: i64, len: usize) -> Option<&[u8]> {
        let (chunk, from) = self.chunk_of(phy_offset)?;
        chunk.published().get(from..from.checked_add(len)?)
    }

    /// The newest chunk starting at or before `phy_offset`, and where `phy_offset` is in it.
    fn chunk_of(&self, phy_offset: i64) -> Option<(&Chunk, usize)> {
        // The newest chunks hold what most readers want: search from the back.
        let chunk = self
            .chunks
            .iter()
            .rev()
            .find(|c| c.start_phy_offset <= phy_offset)?;
        let from = usize::try_from(phy_offset - chunk.start_phy_offset).ok()?;
        Some((chunk, from))
    }
}

/// The writer's side, kept in the store's `Writer` (so only the writer-lock holder adds bytes).
#[derive(Debug)]
pub(super) struct RecentWriter {
    shared: Arc<RecentRecords>,
    chunks_max: usize,
}

impl RecentWriter {
    /// A window of `window_bytes` rounded down to whole chunks, two at least (0 keeps
    /// nothing), read through `shared`.
    pub(super) fn new(shared: Arc<RecentRecords>, window_bytes: u64) -> RecentWriter {
        let chunks = usize::try_from(window_bytes).unwrap_or(usize::MAX) / CHUNK_BYTES;
        // Two at least, so the chunk a pull is reading is not the one the writer starts over.
        let chunks_max = if window_bytes == 0 { 0 } else { chunks.max(2) };
        RecentWriter { shared, chunks_max }
    }

    /// Keeps `bytes`, the records just written at `phy_offset`. Called before they are
    /// published (the CommitLog's max offset raised), so a reader that finds a record's unit
    /// may find its bytes here.
    pub(super) fn push(&mut self, phy_offset: i64, bytes: &[u8]) {
        if self.chunks_max == 0 {
            return;
        }
        {
            // Most pushes continue the newest chunk: readers may go on copying meanwhile.
            let chunks = self.shared.chunks.read().unwrap_or_else(|e| e.into_inner());
            if let Some(last) = chunks
                .back()
                .filter(|last| continues(last, phy_offset, bytes))
            {
                write_past_filled(last, bytes);
                return;
            }
        }
        let mut chunks = self
            .shared
            .chunks
            .write()
            .unwrap_or_else(|e| e.into_inner());
        if chunks
            .back()
            .is_some_and(|last| phy_offset < last.end_phy_offset())
        {
            // Not seen on a master (its offsets only grow), but a cache that could hold two
            // versions of one offset must not: start over.
            chunks.clear();
        }
        if bytes.len() > CHUNK_BYTES {
            return;
        }
        self.start_chunk(&mut chunks, phy_offset);
        write_past_filled(chunks.back().expect("a chunk was just started"), bytes);
    }

    /// Appends a chunk starting at `phy_offset`, dropping the oldest beyond the window (reused
    /// when no reader holds it).
    fn start_chunk(&self, chunks: &mut VecDeque<Arc<Chunk>>, phy_offset: i64) {
        let mut spare = None;
        while chunks.len() >= self.chunks_max {
            let mut oldest = chunks.pop_front().expect("chunks_max >= 2");
            if let Some(chunk) = Arc::get_mut(&mut oldest) {
                chunk.start_phy_offset = phy_offset;
                *chunk.filled.get_mut() = 0;
                spare = Some(oldest);
            }
        }
        chunks.push_back(spare.unwrap_or_else(|| Arc::new(Chunk::new(phy_offset))));
    }
}

/// Whether `bytes` at `phy_offset` go right after `last`'s published bytes and fit in it.
fn continues(last: &Chunk, phy_offset: i64, bytes: &[u8]) -> bool {
    last.end_phy_offset() == phy_offset
        && last.filled.load(Ordering::Relaxed) + bytes.len() <= CHUNK_BYTES
}

/// Copies `bytes` past `chunk`'s published bytes and publishes them. Only the writer calls it
/// (through `&mut RecentWriter`), after checking they fit.
fn write_past_filled(chunk: &Chunk, bytes: &[u8]) {
    let filled = chunk.filled.load(Ordering::Relaxed);
    assert!(filled + bytes.len() <= CHUNK_BYTES);
    // SAFETY: only the writer writes, and only at or past `filled`, which no reader reads (they
    // read below the `filled` they load); the assertion keeps the copy inside the buffer.
    unsafe {
        std::ptr::copy_nonoverlapping(
            bytes.as_ptr(),
            chunk.bytes.as_ptr().add(filled),
            bytes.len(),
        );
    }
    chunk.filled.store(filled + bytes.len(), Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(window_bytes: u64) -> (Arc<RecentRecords>, RecentWriter) {
        let shared = Arc::new(RecentRecords::default());
        let writer = RecentWriter::new(shared.clone(), window_bytes);
        (shared, writer)
    }

    fn copy(shared: &RecentRecords, phy_offset: i64, len: usize) -> Option<Vec<u8>> {
        shared.view()?.range(phy_offset, len).map(<[u8]>::to_vec)
    }

    #[test]
    fn pushed_records_are_read_back_by_offset() {
        let (shared, mut writer) = window(4 * CHUNK_BYTES as u64);
        writer.push(1000, b"first");
        writer.push(1005, b"second");
        assert_eq!(copy(&shared, 1000, 5).as_deref(), Some(&b"first"[..]));
        assert_eq!(copy(&shared, 1005, 6).as_deref(), Some(&b"second"[..]));
        assert_eq!(copy(&shared, 1003, 4).as_deref(), Some(&b"stse"[..]));
        // Past what was pushed, or before it: not here.
        assert_eq!(copy(&shared, 1005, 7), None);
        assert_eq!(copy(&shared, 999, 2), None);
    }

    #[test]
    fn a_gap_starts_a_new_chunk_and_the_gap_is_never_served() {
        let (shared, mut writer) = window(4 * CHUNK_BYTES as u64);
        writer.push(0, b"aaaa");
        // The end of a CommitLog file (a BLANK is not kept) moves the next record on.
        writer.push(100, b"bbbb");
        assert_eq!(copy(&shared, 0, 4).as_deref(), Some(&b"aaaa"[..]));
        assert_eq!(copy(&shared, 100, 4).as_deref(), Some(&b"bbbb"[..]));
        assert_eq!(copy(&shared, 4, 4), None);
        assert_eq!(copy(&shared, 2, 4), None, "a range across the gap");
    }

    #[test]
    fn the_window_keeps_its_newest_chunks_only() {
        let (shared, mut writer) = window(2 * CHUNK_BYTES as u64);
        let record = vec![7u8; CHUNK_BYTES / 2];
        for i in 0..8 {
            writer.push(i * record.len() as i64, &record);
        }
        // 8 half chunks = 4 chunks written; the window keeps the last 2.
        let last = 7 * record.len() as i64;
        assert!(copy(&shared, last, record.len()).is_some());
        assert!(copy(&shared, 4 * record.len() as i64, record.len()).is_some());
        assert!(copy(&shared, 3 * record.len() as i64, record.len()).is_none());
        assert!(copy(&shared, 0, record.len()).is_none());
        assert_eq!(shared.chunks.read().unwrap().len(), 2);
    }

    #[test]
    fn a_chunk_a_reader_still_holds_is_not_reused() {
        let (shared, mut writer) = window(2 * CHUNK_BYTES as u64);
        writer.push(0, &vec![1u8; CHUNK_BYTES]);
        let held = shared.chunks.read().unwrap().front().unwrap().clone();
        writer.push(CHUNK_BYTES as i64, &vec![2u8; CHUNK_BYTES]);
        writer.push(2 * CHUNK_BYTES as i64, &vec![3u8; CHUNK_BYTES]);
        // The first chunk left the window, but its bytes stay what they were for its holder.
        assert_eq!(held.start_phy_offset, 0);
        assert!(held.published().iter().all(|b| *b == 1));
        assert_eq!(
            copy(&shared, 2 * CHUNK_BYTES as i64, 3).as_deref(),
            Some(&[3u8, 3, 3][..])
        );
    }

    #[test]
    fn an_offset_going_back_empties_the_window() {
        let (shared, mut writer) = window(4 * CHUNK_BYTES as u64);
        writer.push(0, b"old-bytes");
        writer.push(3, b"new");
        assert_eq!(copy(&shared, 3, 3).as_deref(), Some(&b"new"[..]));
        assert_eq!(
            copy(&shared, 0, 3),
            None,
            "nothing before the rewind is kept"
        );
    }

    #[test]
    fn records_larger_than_a_chunk_and_a_zero_window_keep_nothing() {
        let (shared, mut writer) = window(4 * CHUNK_BYTES as u64);
        writer.push(0, &vec![0u8; CHUNK_BYTES + 1]);
        assert!(shared.view().is_none());
        let (shared, mut writer) = window(0);
        writer.push(0, b"abc");
        assert!(shared.view().is_none());
        // Any other size keeps two chunks at least.
        let (shared, mut writer) = window(1);
        writer.push(0, b"abc");
        assert_eq!(copy(&shared, 0, 3).as_deref(), Some(&b"abc"[..]));
    }

    #[test]
    fn copy_from_stops_at_the_end_of_its_chunk() {
        let (shared, mut writer) = window(4 * CHUNK_BYTES as u64);
        writer.push(0, b"abcd");
        writer.push(10, b"efgh");
        let mut out = b"stale".to_vec();
        assert!(shared.copy_from(1, 100, &mut out));
        assert_eq!(out, b"bcd", "the first chunk ends at 4");
        assert!(shared.copy_from(10, 2, &mut out));
        assert_eq!(out, b"ef");
        assert!(!shared.copy_from(4, 1, &mut out), "the gap is not kept");
        assert!(!shared.copy_from(14, 1, &mut out), "nothing past the end");
        assert_eq!(out, b"ef", "untouched when not kept");
    }

    /// A reader on another thread sees only whole pushes, with the bytes that were pushed.
    #[test]
    fn a_concurrent_reader_sees_published_bytes_only() {
        let (shared, mut writer) = window(2 * CHUNK_BYTES as u64);
        let record_bytes = 1000usize;
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (shared, done) = (shared.clone(), done.clone());
            std::thread::spawn(move || {
                let mut seen = 0u64;
                loop {
                    // One more look after the writer is done, so a reader that only got the
                    // CPU then still reads something.
                    let finished = done.load(Ordering::Acquire);
                    let Some(view) = shared.view() else {
                        if finished {
                            break;
                        }
                        continue;
                    };
                    let newest = view.chunks.back().unwrap().end_phy_offset();
                    let at = newest - record_bytes as i64;
                    if at < 0 {
                        continue;
                    }
                    if let Some(bytes) = view.range(at, record_bytes) {
                        let tag = (at / record_bytes as i64) as u8;
                        assert!(bytes.iter().all(|b| *b == tag), "torn record at {at}");
                        seen += 1;
                    }
                    if finished {
                        break;
                    }
                }
                seen
            })
        };
        for i in 0..5_000i64 {
            let record = vec![i as u8; record_bytes];
            writer.push(i * record_bytes as i64, &record);
        }
        done.store(true, Ordering::Release);
        assert!(reader.join().unwrap() > 0);
    }
}
