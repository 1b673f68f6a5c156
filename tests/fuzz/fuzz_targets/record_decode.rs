//! The CommitLog record decoder (and the record head, the ConsumeQueue unit and the
//! checkpoint decoders recovery runs on bytes from disk).
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringmq::store::format::{decode_checkpoint, decode_cq_unit, decode_record, decode_record_head};

fuzz_target!(|data: &[u8]| {
    if let Ok(record) = decode_record(data) {
        assert!(record.total_size as usize <= data.len());
        let _ = record.body_crc_matches();
    }
    let _ = decode_record_head(data);
    let _ = decode_cq_unit(data);
    let _ = decode_checkpoint(data);
});
