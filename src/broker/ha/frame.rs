//! The HA stream's two messages (Java `HAConnection` / `HAClient`), all integers big-endian:
//!
//! - slave → master: the slave's CommitLog max offset, 8 bytes (`i64`), on connect, after the
//!   bytes of each read were appended, and every heartbeat interval;
//! - master → slave: a frame `[phyOffset i64][bodySize i32][body]`: `bodySize` CommitLog bytes
//!   starting at `phyOffset`; `bodySize` 0 is a heartbeat.

/// Bytes of a slave's offset report.
pub const OFFSET_REPORT_BYTES: usize = 8;
/// Bytes of a frame header (Java `HAConnection.WriteSocketService.headerSize`).
pub const FRAME_HEADER_BYTES: usize = 12;
/// The slave's read buffer (Java `HAClient.READ_MAX_BUFFER_SIZE`): a frame larger than this
/// (header included) cannot be received and closes the connection.
pub const SLAVE_READ_BUFFER_BYTES: usize = 4 * 1024 * 1024;

/// The slave's report of its max offset.
pub fn encode_offset_report(max_phy_offset: i64) -> [u8; OFFSET_REPORT_BYTES] {
    max_phy_offset.to_be_bytes()
}

/// The offset in a report.
pub fn decode_offset_report(bytes: [u8; OFFSET_REPORT_BYTES]) -> i64 {
    i64::from_be_bytes(bytes)
}

/// A frame header for `body_bytes` bytes at `phy_offset`.
pub fn encode_frame_header(phy_offset: i64, body_bytes: i32) -> [u8; FRAME_HEADER_BYTES] {
    let mut out = [0u8; FRAME_HEADER_BYTES];
    out[..8].copy_from_slice(&phy_offset.to_be_bytes());
    out[8..].copy_from_slice(&body_bytes.to_be_bytes());
    out
}

/// A frame header: the body's CommitLog offset and its size in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    pub phy_offset: i64,
    pub body_bytes: i32,
}

/// The header at the start of `buf`, if 12 bytes are there.
pub fn decode_frame_header(buf: &[u8]) -> Option<FrameHeader> {
    let head: &[u8; FRAME_HEADER_BYTES] = buf.get(..FRAME_HEADER_BYTES)?.try_into().ok()?;
    let mut offset = [0u8; 8];
    offset.copy_from_slice(&head[..8]);
    let mut size = [0u8; 4];
    size.copy_from_slice(&head[8..]);
    Some(FrameHeader {
        phy_offset: i64::from_be_bytes(offset),
        body_bytes: i32::from_be_bytes(size),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_offset_report() {
        assert_eq!(
            encode_offset_report(0x0102_0304_0506_0708),
            [1, 2, 3, 4, 5, 6, 7, 8]
        );
        assert_eq!(encode_offset_report(1 << 30), [0, 0, 0, 0, 0x40, 0, 0, 0]);
        assert_eq!(decode_offset_report([0, 0, 0, 0, 0, 0, 0x01, 0x2c]), 300);
    }

    #[test]
    fn golden_frame_header() {
        // A 32 KiB batch at the start of the second 1 GiB file, then a heartbeat at 300.
        assert_eq!(
            encode_frame_header(1 << 30, 32 * 1024),
            [0, 0, 0, 0, 0x40, 0, 0, 0, 0, 0, 0x80, 0]
        );
        assert_eq!(
            encode_frame_header(300, 0),
            [0, 0, 0, 0, 0, 0, 0x01, 0x2c, 0, 0, 0, 0]
        );
        let header = decode_frame_header(&[0, 0, 0, 0, 0x40, 0, 0, 0, 0, 0, 0x80, 0, 9]).unwrap();
        assert_eq!(
            header,
            FrameHeader {
                phy_offset: 1 << 30,
                body_bytes: 32 * 1024
            }
        );
        assert_eq!(decode_frame_header(&[0; 11]), None);
    }
}
