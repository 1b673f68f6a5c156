//! Tests of the harness itself (start, readiness, SIGKILL, restart, SIGTERM, early exit),
//! driving `fake-ringmq` (src/bin/fake-ringmq.rs) instead of the real broker.

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use ringmq_client_it::{BrokerProcess, HarnessError};

fn fake_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_fake-ringmq"))
}

fn connects(port: u16) -> bool {
    TcpStream::connect_timeout(
        &SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
        Duration::from_millis(500),
    )
    .is_ok()
}

fn starts(broker: &BrokerProcess) -> String {
    std::fs::read_to_string(broker.store_root().join("starts")).expect("starts file")
}

#[test]
fn start_kill_restart_stop() {
    let mut broker = BrokerProcess::start_with_binary(fake_binary(), &[]).expect("start fake");
    let ports = broker.ports();
    assert!(connects(ports.broker_port) && connects(ports.fast_port));
    assert!(connects(ports.namesrv_port));
    assert_eq!(
        broker.namesrv_addr(),
        format!("127.0.0.1:{}", ports.namesrv_port)
    );
    assert_eq!(starts(&broker), "1");

    broker.kill_hard().expect("kill");
    assert!(!broker.is_running());
    assert!(
        !connects(ports.broker_port),
        "port still open after SIGKILL"
    );
    assert!(matches!(broker.kill_hard(), Err(HarnessError::NotRunning)));

    broker.restart().expect("restart");
    assert_eq!(broker.ports(), ports, "restart keeps the ports");
    assert_eq!(starts(&broker), "2", "restart keeps the data dir");
    assert!(connects(ports.broker_port));
    assert_eq!(broker.start_count(), 2);

    // restart() of a running broker stops it with SIGTERM first.
    broker.restart().expect("restart while running");
    assert_eq!(starts(&broker), "3");

    let status = broker.stop().expect("stop");
    assert!(!status.success(), "SIGTERM ends the fake: {status}");
    assert!(!broker.is_running());
    let log = std::fs::read_to_string(broker.log_path()).expect("log");
    assert_eq!(log.matches("ringmq broker listening").count(), 3, "{log}");
}

#[test]
fn a_broker_that_exits_at_once_is_reported_with_its_log() {
    let error = BrokerProcess::start_with_binary(fake_binary(), &[("FAKE_RINGMQ_EXIT", "1")])
        .err()
        .expect("start must fail");
    match error {
        HarnessError::ExitedEarly {
            log_tail, status, ..
        } => {
            assert!(log_tail.contains("exiting as asked"), "{log_tail}");
            assert!(status.contains('3'), "{status}");
        }
        other => panic!("unexpected error: {other}"),
    }
}
