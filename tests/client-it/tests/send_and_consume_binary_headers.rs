//! Test 2: test 1 with binary ("ROCKETMQ") remoting headers.
//!
//! Why a separate test binary: rocketmq-client-rust reads `ROCKETMQ_SERIALIZE_TYPE` once per
//! process, when the first client runtime is created (the remoting command defaults are
//! process-wide and cannot be changed afterwards). Cargo runs each `tests/*.rs` file as its own
//! process, so this file can switch to binary headers without affecting the JSON tests. Every
//! test in this file must call `use_binary_headers()` before creating any client.

#![recursion_limit = "512"]

use std::time::Duration;

use ringmq_client_it::{header_encoding, run_bounded, scenarios, use_binary_headers, TestBroker};

const MESSAGE_COUNT: u64 = 10_000;
const TEST_TIMEOUT: Duration = Duration::from_secs(300);

#[test]
fn send_and_consume_binary_headers() {
    use_binary_headers();
    assert_eq!(header_encoding(), "ROCKETMQ");
    let broker = TestBroker::start(&[]).expect("start broker");
    run_bounded("send_and_consume_binary_headers", TEST_TIMEOUT, async {
        scenarios::send_and_consume(&broker.namesrv_addr(), MESSAGE_COUNT).await;
    });
}
