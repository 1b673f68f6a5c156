//! `filters.rs` with binary ("ROCKETMQ") remoting headers. A separate test binary because the
//! client reads `ROCKETMQ_SERIALIZE_TYPE` once per process (see
//! `send_and_consume_binary_headers.rs`); every test here calls `use_binary_headers()` first.

#![recursion_limit = "512"]

use std::time::Duration;

use ringmq_client_it::{header_encoding, run_bounded, scenarios, use_binary_headers, TestBroker};

const MESSAGE_COUNT: u64 = 400;
const TEST_TIMEOUT: Duration = Duration::from_secs(180);

#[test]
fn tag_and_sql92_filters_with_binary_headers() {
    use_binary_headers();
    assert_eq!(header_encoding(), "ROCKETMQ");
    let broker = TestBroker::start(&[]).expect("start broker");
    run_bounded(
        "tag_and_sql92_filters_with_binary_headers",
        TEST_TIMEOUT,
        async {
            scenarios::filters(&broker.namesrv_addr(), MESSAGE_COUNT).await;
        },
    );
}
