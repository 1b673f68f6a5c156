//! The properties string (`name\x01value\x02...`): iteration, lookup, the TAGS hash code and
//! the filter's view of it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringmq::filter::properties::RawProperties;
use ringmq::store::format::{properties_iter, property_value, tags_code};

fuzz_target!(|data: &[u8]| {
    for (name, value) in properties_iter(data) {
        assert!(name.len() + value.len() <= data.len());
    }
    let _ = property_value(data, b"TAGS");
    let _ = property_value(data, b"");
    let _ = tags_code(data);
    let props = RawProperties(data);
    let _ = props.get_str("TAGS");
    let _ = props.get_bytes("KEYS");
});
