//! `transaction.rs` with binary ("ROCKETMQ") remoting headers: a separate binary because the
//! client reads `ROCKETMQ_SERIALIZE_TYPE` once per process (see
//! `send_and_consume_binary_headers.rs`). Every test calls `use_binary_headers()` first.

#![recursion_limit = "512"]

mod transaction_scenario;

use ringmq_client_it::{
    header_encoding, run_bounded, skip_unless_restartable, use_binary_headers, TestBroker,
};
use transaction_scenario::{
    commit_rollback_unknown, restart_between_half_and_end, BROKER_ENV, TEST_TIMEOUT,
};

#[test]
fn commit_rollback_and_unknown_then_commit_on_check_back_binary_headers() {
    use_binary_headers();
    assert_eq!(header_encoding(), "ROCKETMQ");
    let broker = TestBroker::start(BROKER_ENV).expect("start broker");
    let namesrv = broker.namesrv_addr();
    run_bounded(
        "commit_rollback_and_unknown_then_commit_on_check_back_binary_headers",
        TEST_TIMEOUT,
        commit_rollback_unknown(namesrv),
    );
}

#[test]
fn a_broker_restart_between_half_and_end_still_delivers_on_commit_binary_headers() {
    use_binary_headers();
    let mut broker = TestBroker::start(BROKER_ENV).expect("start broker");
    let name = "a_broker_restart_between_half_and_end_still_delivers_on_commit_binary_headers";
    if skip_unless_restartable(&broker, name) {
        return;
    }
    let namesrv = broker.namesrv_addr();
    run_bounded(
        name,
        TEST_TIMEOUT,
        restart_between_half_and_end(&mut broker, namesrv),
    );
}
