//! The body of SEND_BATCH_MESSAGE (Java `MessageDecoder.encodeMessages`): every entry decodes
//! inside the body or the iteration stops with an error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringmq::store::format::batch_entries;

fuzz_target!(|data: &[u8]| {
    for entry in batch_entries(data) {
        if entry.is_err() {
            break;
        }
    }
});
