//! A pull's records copied from their CommitLog files' read-only mappings
//! ([`crate::store::mapped_file`]) instead of read through the io engine: one `memcpy` per
//! record, no read op; and when its ConsumeQueue units are copied from theirs. Used while
//! `StoreConfig::read_mapped` is on (the default), for pulls far enough behind the end.

use super::{not_a_record, record_head_matches, Candidate, CommitLogView, PullSpec, PullState};
use crate::store::config::StoreConfig;
use crate::store::consume_queue::UnitRead;
use crate::store::error::StoreError;
use crate::store::filter::MessageFilter;
use crate::store::types::GetMessageStatus;

/// Records closer than this to the CommitLog's end are read through the io engine even with
/// mapped reads on. A pull that follows the appends reads pages written since its last pull,
/// and each such page costs a page fault of its own the first time the mapping touches it (the
/// kernel maps neighbouring pages with a fault only when they are in the page cache already):
/// measured, that made W3 and W5 cost 1.5 to 2.6 µs more broker CPU per message. A reader this
/// far behind reads pages written long before, 16 per fault, and one engine read op per record
/// is the larger cost.
pub(in crate::store::message_store) const MAPPED_READ_LAG_MIN_BYTES: i64 = 1024 * 1024;

/// ConsumeQueue units this far behind their queue's end are copied from the file's mapping.
/// A pull that keeps up finds its units in the queue's in-memory tail or in a page written
/// since its last pull (a page fault of its own); one this far behind reads pages written long
/// before, where a fault maps 16 of them (3,264 units) and the engine's read op per pull is the
/// larger cost.
const MAPPED_UNIT_READ_LAG_MIN_UNITS: i64 = 4096;

/// How `pull` reads its ConsumeQueue units from their file.
pub(super) fn unit_read(config: &StoreConfig, pull: &PullSpec<'_>) -> UnitRead {
    let lag_units = pull.max_offset_in_queue - pull.queue_offset;
    if config.read_mapped && lag_units >= MAPPED_UNIT_READ_LAG_MIN_UNITS {
        UnitRead::Mapped
    } else {
        UnitRead::Engine
    }
}

/// Whether `candidates` are worth copying from the mapping: the last ends at least
/// [`MAPPED_READ_LAG_MIN_BYTES`] before the CommitLog's end.
pub(super) fn lags_enough(view: &CommitLogView, candidates: &[Candidate]) -> bool {
    candidates.last().is_some_and(|c| {
        view.max_phy_offset - (c.phy_offset + i64::from(c.size)) >= MAPPED_READ_LAG_MIN_BYTES
    })
}

/// Copies every candidate record into `state` and applies the record filter, as
/// `read_candidates` does. `None` when a candidate's file has no usable mapping or a copy
/// faulted (`SIGBUS`): `state` is as it was, and the caller reads through the io engine, which
/// reports the real error.
pub(super) fn read_candidates_mapped(
    view: &CommitLogView,
    candidates: &[Candidate],
    filter: &dyn MessageFilter,
    state: &mut PullState,
) -> Option<Result<bool, StoreError>> {
    let base = state.buffer.len();
    if copy_records(view, candidates, state).is_none() {
        state.buffer.truncate(base);
        return None;
    }
    Some(keep_matched(view, candidates, filter, state, base))
}

/// Appends the candidates' record bytes to `state.buffer`, back to back, one guarded copy per
/// run of candidates in the same file. `None` (with part of them appended) when a file cannot
/// be read through its mapping.
fn copy_records(
    view: &CommitLogView,
    candidates: &[Candidate],
    state: &mut PullState,
) -> Option<()> {
    let wanted: usize = candidates.iter().map(|c| c.size as usize).sum();
    state.buffer.reserve(wanted);
    let mut rest = candidates;
    while let Some(first) = rest.first() {
        let run_len = rest
            .iter()
            .take_while(|c| c.segment_index == first.segment_index)
            .count();
        let (run, after) = rest.split_at(run_len);
        let seg = view.segment(first);
        let map = seg.mapped()?;
        let buffer = &mut state.buffer;
        let copied = map.copy_guarded(|bytes| {
            for c in run {
                let from = (c.phy_offset - seg.start_offset) as usize;
                let record = bytes.get(from..from + c.size as usize)?;
                buffer.extend_from_slice(record);
            }
            Some(())
        });
        copied.ok()??;
        rest = after;
    }
    Some(())
}

/// Checks each copied record (from `base` in `state.buffer`, in candidate order) and keeps
/// those the record filter matches, moving them down over the rejected ones. Returns whether
/// any was rejected.
pub(super) fn keep_matched(
    view: &CommitLogView,
    candidates: &[Candidate],
    filter: &dyn MessageFilter,
    state: &mut PullState,
    base: usize,
) -> Result<bool, StoreError> {
    let (mut read_at, mut write_at) = (base, base);
    let mut rejected = false;
    for c in candidates {
        let size = c.size as usize;
        let record = &state.buffer[read_at..read_at + size];
        if !record_head_matches(record, c.size) {
            state.buffer.truncate(base);
            return Err(not_a_record(view, c));
        }
        if filter.is_matched_by_commit_log(record) {
            if write_at != read_at {
                state.buffer.copy_within(read_at..read_at + size, write_at);
            }
            state.message_ranges.push((write_at, size));
            state.add_found(c, size);
            write_at += size;
        } else {
            state.miss(c.unit_index, GetMessageStatus::NoMatchedMessage);
            rejected = true;
        }
        read_at += size;
    }
    state.buffer.truncate(write_at);
    Ok(rejected)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::filter::AcceptAll;

    fn spec_at(queue_offset: i64, max_offset_in_queue: i64) -> PullSpec<'static> {
        PullSpec {
            filter: &AcceptAll,
            queue_offset,
            max_offset_in_queue,
            max_msg_nums: 32,
            pull_size_max_bytes: crate::store::PULL_MSG_SIZE_MAX_BYTES,
        }
    }

    /// Units are copied from the mapping only for a pull far enough behind its queue's end,
    /// and never with mapped reads off.
    #[test]
    fn units_are_mapped_only_far_behind_the_queue_end() {
        let mut config = StoreConfig::default();
        let lag = MAPPED_UNIT_READ_LAG_MIN_UNITS;
        assert_eq!(
            unit_read(&config, &spec_at(10, 10 + lag - 1)),
            UnitRead::Engine
        );
        assert_eq!(unit_read(&config, &spec_at(10, 10 + lag)), UnitRead::Mapped);
        config.read_mapped = false;
        assert_eq!(unit_read(&config, &spec_at(10, 10 + lag)), UnitRead::Engine);
    }
}
