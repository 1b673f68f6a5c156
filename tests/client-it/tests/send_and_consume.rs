//! Test 1: 10,000 messages with tags, keys and user properties over 4 queues; a push consumer
//! and a lite pull consumer (different groups) each get every message exactly once, intact.
//! Default (JSON) remoting headers; the binary-header variant is
//! `send_and_consume_binary_headers.rs`.

#![recursion_limit = "512"]

use std::time::Duration;

use ringmq_client_it::{run_bounded, scenarios, TestBroker};

const MESSAGE_COUNT: u64 = 10_000;
const TEST_TIMEOUT: Duration = Duration::from_secs(300);

#[test]
fn send_and_consume_json_headers() {
    let broker = TestBroker::start(&[]).expect("start broker");
    run_bounded("send_and_consume_json_headers", TEST_TIMEOUT, async {
        scenarios::send_and_consume(&broker.namesrv_addr(), MESSAGE_COUNT).await;
    });
}
