//! Transactional messages with rocketmq-client-rust's `TransactionMQProducer` (JSON headers):
//! a commit is delivered once, a rollback never, an unknown state is checked back and then
//! committed, and a broker restart between the half message and its end still delivers on
//! commit. The scenarios are in `transaction_scenario/`.

#![recursion_limit = "512"]

mod transaction_scenario;

use ringmq_client_it::{run_bounded, skip_unless_restartable, TestBroker};
use transaction_scenario::{
    commit_rollback_unknown, restart_between_half_and_end, BROKER_ENV, TEST_TIMEOUT,
};

#[test]
fn commit_rollback_and_unknown_then_commit_on_check_back() {
    let broker = TestBroker::start(BROKER_ENV).expect("start broker");
    let namesrv = broker.namesrv_addr();
    run_bounded(
        "commit_rollback_and_unknown_then_commit_on_check_back",
        TEST_TIMEOUT,
        commit_rollback_unknown(namesrv),
    );
}

#[test]
fn a_broker_restart_between_half_and_end_still_delivers_on_commit() {
    let mut broker = TestBroker::start(BROKER_ENV).expect("start broker");
    if skip_unless_restartable(
        &broker,
        "a_broker_restart_between_half_and_end_still_delivers_on_commit",
    ) {
        return;
    }
    let namesrv = broker.namesrv_addr();
    run_bounded(
        "a_broker_restart_between_half_and_end_still_delivers_on_commit",
        TEST_TIMEOUT,
        restart_between_half_and_end(&mut broker, namesrv),
    );
}
