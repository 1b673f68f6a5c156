//! The 40-byte header of an index file (Java `IndexHeader`), big-endian: the time and
//! CommitLog range of its entries, the slots in use and the next entry number. The file's
//! slots and entries are in [`crate::store::index_file`].

/// `IndexHeader.INDEX_HEADER_SIZE`.
pub const INDEX_HEADER_SIZE_BYTES: usize = 40;

/// The 40-byte header (Java `IndexHeader`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexHeader {
    /// @0: store time of the first entry.
    pub begin_timestamp_ms: i64,
    /// @8: store time of the last entry.
    pub end_timestamp_ms: i64,
    /// @16: CommitLog offset of the first entry's message.
    pub begin_phy_offset: i64,
    /// @24: CommitLog offset of the last entry's message.
    pub end_phy_offset: i64,
    /// @32: slots in use.
    pub hash_slot_count: i32,
    /// @36: the next entry number (entries are 1..indexCount-1); 1 in an empty file.
    pub index_count: i32,
}

impl Default for IndexHeader {
    fn default() -> Self {
        IndexHeader {
            begin_timestamp_ms: 0,
            end_timestamp_ms: 0,
            begin_phy_offset: 0,
            end_phy_offset: 0,
            hash_slot_count: 0,
            index_count: 1,
        }
    }
}

pub fn encode_index_header(h: &IndexHeader) -> [u8; INDEX_HEADER_SIZE_BYTES] {
    let mut out = [0u8; INDEX_HEADER_SIZE_BYTES];
    out[0..8].copy_from_slice(&h.begin_timestamp_ms.to_be_bytes());
    out[8..16].copy_from_slice(&h.end_timestamp_ms.to_be_bytes());
    out[16..24].copy_from_slice(&h.begin_phy_offset.to_be_bytes());
    out[24..32].copy_from_slice(&h.end_phy_offset.to_be_bytes());
    out[32..36].copy_from_slice(&h.hash_slot_count.to_be_bytes());
    out[36..40].copy_from_slice(&h.index_count.to_be_bytes());
    out
}

/// Decodes a header; an `indexCount` of 0 or less reads as 1 (Java `IndexHeader.load`).
pub fn decode_index_header(b: &[u8; INDEX_HEADER_SIZE_BYTES]) -> IndexHeader {
    let i64_at = |at: usize| i64::from_be_bytes(b[at..at + 8].try_into().unwrap_or_default());
    let i32_at = |at: usize| i32::from_be_bytes(b[at..at + 4].try_into().unwrap_or_default());
    IndexHeader {
        begin_timestamp_ms: i64_at(0),
        end_timestamp_ms: i64_at(8),
        begin_phy_offset: i64_at(16),
        end_phy_offset: i64_at(24),
        hash_slot_count: i32_at(32),
        index_count: i32_at(36).max(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_and_java_load_rule() {
        let h = IndexHeader {
            begin_timestamp_ms: 1,
            end_timestamp_ms: 2,
            begin_phy_offset: 3,
            end_phy_offset: 4,
            hash_slot_count: 5,
            index_count: 6,
        };
        assert_eq!(decode_index_header(&encode_index_header(&h)), h);
        let zero = decode_index_header(&[0u8; INDEX_HEADER_SIZE_BYTES]);
        assert_eq!(zero.index_count, 1);
    }
}
