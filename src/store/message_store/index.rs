//! The message index inside the store: rebuilt at open for the records after the index's end,
//! and queried by key (Java `DefaultMessageStore.queryMessage`). The index thread (`reput`)
//! indexes the records appended after the open.

use std::sync::Arc;

use bytes::Bytes;

use super::recovery::ChunkReader;
use super::Inner;
use crate::store::error::StoreError;
use crate::store::format::{self, decode_record_head, RecordHead};
use crate::store::index_service::IndexedMessage;
use crate::store::segment::{self, Segment};

/// Java `maxMsgsNumBatch`: most messages one query answers.
pub const QUERY_MESSAGES_MAX: usize = 64;
/// Java `DefaultMessageStore.queryMessage` retries with an earlier end time this many times.
const QUERY_TRIES: usize = 3;

/// Java `QueryMessageResult`: whole records, oldest first, and where the index ends.
#[derive(Debug, Clone, Default)]
pub struct QueryMessageResult {
    pub messages: Vec<Bytes>,
    pub index_last_update_timestamp_ms: i64,
    pub index_last_update_phy_offset: i64,
}

impl QueryMessageResult {
    pub fn buffer_total_size(&self) -> usize {
        self.messages.iter().map(Bytes::len).sum()
    }
}

impl Inner {
    /// Indexes the records the index lacks, from its end to `end_phy_offset` (Java's reput
    /// behind `IndexService.load`). Returns the records indexed.
    pub(super) fn rebuild_index(&self, end_phy_offset: i64) -> Result<u64, StoreError> {
        let Some(index) = &self.index else {
            return Ok(0);
        };
        let (index_end, skip_first) = index.recovery_start()?;
        let segs = self.commit_log.segments().snapshot();
        let from = index_end.max(self.commit_log.min_phy_offset());
        let skip_at = (skip_first && from == index_end).then_some(index_end);
        let mut indexed = 0u64;
        self.scan_records(&segs, from, end_phy_offset, &mut |record| {
            if Some(record.phy_offset) != skip_at {
                index.build_index(&IndexedMessage::of_record(record))?;
                indexed += 1;
            }
            Ok(())
        })?;
        index.flush()?;
        Ok(indexed)
    }

    /// Calls `each` for every record in `from..end` (records recovery already validated).
    fn scan_records(
        &self,
        segs: &[Arc<Segment>],
        from: i64,
        end: i64,
        each: &mut dyn FnMut(&format::DecodedRecord<'_>) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let file_size = self.commit_log.file_size_bytes();
        let mut reader = ChunkReader::default();
        let mut pos = from;
        while pos < end {
            let Some(seg) = segment::find_in(segs, pos, file_size as u64) else {
                break;
            };
            let in_file = pos - seg.start_offset;
            let room = (file_size - in_file) as usize;
            let head = reader.read(self, &seg, in_file as u64, 8.min(room))?;
            match decode_record_head(head) {
                Ok(RecordHead::Message { total_size, .. }) if total_size > 0 => {
                    let bytes = reader.read(self, &seg, in_file as u64, total_size as usize)?;
                    let record =
                        format::decode_record(bytes).map_err(|e| StoreError::Corrupted {
                            path: seg.path.clone(),
                            offset: pos,
                            reason: format!("record below the recovered end: {e}"),
                        })?;
                    each(&record)?;
                    pos += i64::from(total_size);
                }
                // A BLANK filler (or the zeroed end of a file): the next file.
                _ => pos = seg.start_offset + file_size,
            }
        }
        Ok(())
    }

    /// Java `DefaultMessageStore.queryMessage`: the records indexed under `topic#key` stored
    /// within `begin_ms..=end_ms`, at most `max_num` (and [`QUERY_MESSAGES_MAX`]) and, past
    /// the first record, at most `max_total_bytes` in all.
    pub(super) fn query_message(
        &self,
        topic: &str,
        key: &str,
        max_num: usize,
        (begin_ms, end_ms): (i64, i64),
        max_total_bytes: usize,
    ) -> Result<QueryMessageResult, StoreError> {
        let mut result = QueryMessageResult::default();
        let Some(index) = &self.index else {
            return Ok(result);
        };
        let max_num = max_num.min(QUERY_MESSAGES_MAX);
        let mut last_query_ms = end_ms;
        let mut total_bytes = 0usize;
        for _ in 0..QUERY_TRIES {
            let mut found = index.query_offset(topic, key, max_num, begin_ms, last_query_ms)?;
            if found.phy_offsets.is_empty() {
                break;
            }
            found.phy_offsets.sort_unstable();
            // A record whose index write was retried may be listed twice.
            found.phy_offsets.dedup();
            result.index_last_update_timestamp_ms = found.index_last_update_timestamp_ms;
            result.index_last_update_phy_offset = found.index_last_update_phy_offset;
            for (i, offset) in found.phy_offsets.iter().enumerate() {
                // An offset whose record is gone (retention) is skipped, as Java does.
                let Some(record) = self.look_message_by_offset(*offset)? else {
                    continue;
                };
                if i == 0 {
                    last_query_ms = format::record_store_timestamp(&record).unwrap_or(i64::MIN);
                }
                if !result.messages.is_empty() && total_bytes + record.len() > max_total_bytes {
                    break;
                }
                total_bytes += record.len();
                result.messages.push(record);
            }
            if !result.messages.is_empty() || last_query_ms < begin_ms {
                break;
            }
        }
        Ok(result)
    }
}
