//! The properties string (`name\x01value\x02...`): iteration, lookup, the TAGS hash code and
//! the filter's view of it; and the transaction service's editable copy of it (parsed, encoded
//! back, parsed again to the same pairs), the op message body and the check immunity property.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringmq::broker::transaction::transactional_message_util::{
    immunity_time_ms, is_prepared_send, parse_op_body, Properties,
};
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
    let parsed = Properties::parse(data);
    let encoded = parsed.encode();
    assert_eq!(Properties::parse(encoded.as_bytes()), parsed);
    let _ = is_prepared_send(data, 1);
    let _ = parse_op_body(data);
    let _ = immunity_time_ms(&String::from_utf8_lossy(data), 6000);
});
