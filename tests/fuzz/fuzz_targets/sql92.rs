//! SQL92 filter expressions: compile any text; a compiled one evaluates against a message's
//! properties without panicking.
#![no_main]

use std::collections::HashMap;

use libfuzzer_sys::fuzz_target;
use ringmq::filter::CompiledExpression;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(expression) = CompiledExpression::compile(&text) {
        let mut props = HashMap::new();
        props.insert("a".to_string(), "5".to_string());
        props.insert("region".to_string(), "east".to_string());
        props.insert("TAGS".to_string(), "TagA".to_string());
        let _ = expression.evaluate(&props);
        let _ = expression.matches(&HashMap::<String, String>::new());
    }
});
