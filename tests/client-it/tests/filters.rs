//! Server-side filtering with JSON headers: a tag expression (`TagA || TagC`) and an SQL92
//! expression (`a > 5 AND region = 'east'`) each deliver exactly the matching messages, once.
//! The body is [`scenarios::filters`]; `filters_binary_headers.rs` runs it with binary headers.

#![recursion_limit = "512"]

use std::time::Duration;

use ringmq_client_it::{run_bounded, scenarios, TestBroker};

const MESSAGE_COUNT: u64 = 400;
const TEST_TIMEOUT: Duration = Duration::from_secs(180);

#[test]
fn tag_and_sql92_filters_deliver_exactly_the_matching_messages() {
    let broker = TestBroker::start(&[]).expect("start broker");
    run_bounded(
        "tag_and_sql92_filters_deliver_exactly_the_matching_messages",
        TEST_TIMEOUT,
        async {
            scenarios::filters(&broker.namesrv_addr(), MESSAGE_COUNT).await;
        },
    );
}
