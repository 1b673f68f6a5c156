//! A pull's records copied from the newest records kept in memory
//! ([`super::super::recent_records`]), when every candidate is still there: no read op and no
//! page fault. Otherwise the caller reads them from the file as before.

use super::mapped::keep_matched;
use super::{Candidate, CommitLogView, PullState};
use crate::store::error::StoreError;
use crate::store::filter::MessageFilter;
use crate::store::message_store::recent_records::RecentRecords;

/// Copies every candidate record into `state` and applies the record filter, as
/// `read_candidates` does. `None` when any candidate is not in memory: `state` is as it was.
pub(super) fn read_candidates_recent(
    recent: &RecentRecords,
    view: &CommitLogView,
    candidates: &[Candidate],
    filter: &dyn MessageFilter,
    state: &mut PullState,
) -> Option<Result<bool, StoreError>> {
    let window = recent.view()?;
    let base = state.buffer.len();
    let wanted: usize = candidates.iter().map(|c| c.size as usize).sum();
    state.buffer.reserve(wanted);
    for c in candidates {
        // A pull behind the window misses on its first record, before anything is copied.
        let Some(record) = window.range(c.phy_offset, c.size as usize) else {
            state.buffer.truncate(base);
            return None;
        };
        state.buffer.extend_from_slice(record);
    }
    drop(window);
    Some(keep_matched(view, candidates, filter, state, base))
}
