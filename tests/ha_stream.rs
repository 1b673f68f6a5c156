//! Master/slave replication with real processes on 127.0.0.1: a name server, a master and a
//! slave that finds its master through the name server. The slave's CommitLog and
//! ConsumeQueue files must equal the master's byte for byte; a restarted slave resumes from
//! its own end; a SYNC_MASTER acknowledges only what a slave has, and answers
//! SLAVE_NOT_AVAILABLE without one.

mod common;
mod ha_common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{invoke, send_v2, Broker, Namesrv};
use ha_common::{
    body, commit_log_bodies, files, plain_log, produce, store_env, wait_connected, wait_same_files,
    wait_until,
};
use ringmq::remoting::codes::response_code;
use ringmq::remoting::command::SerializeType;

fn start_master(namesrv: &Namesrv, role: &str) -> Broker {
    let mut env = store_env();
    env.push(("RINGMQ_BROKER_ROLE", role));
    Broker::start_with_namesrv(&namesrv.addr(), &env)
}

/// A slave given only its role, id and the name server (plus the harness's ports and dirs).
fn start_slave(namesrv: &Namesrv) -> Broker {
    let mut env = store_env();
    env.extend([("RINGMQ_BROKER_ROLE", "SLAVE"), ("RINGMQ_BROKER_ID", "1")]);
    Broker::start_with_namesrv(&namesrv.addr(), &env)
}

#[test]
fn a_slave_found_through_the_name_server_holds_the_masters_bytes_and_resumes_after_a_restart() {
    let namesrv = Namesrv::start();
    let master = start_master(&namesrv, "ASYNC_MASTER");
    let mut slave = start_slave(&namesrv);
    wait_connected(&master, 1);
    produce(&master, 0..600, response_code::SUCCESS);
    wait_same_files(&master, &slave, "commitlog");
    wait_same_files(&master, &slave, "consumequeue");
    assert!(
        files(&master.store_dir().join("commitlog")).len() >= 3,
        "the messages cross CommitLog files"
    );
    // A slave's store takes no sends: its CommitLog is the master's alone.
    let refused = invoke(
        &mut slave.client(),
        send_v2("HaTopic", 0, body(0), &[], 0, SerializeType::Json),
    );
    assert_eq!(refused.code, response_code::SERVICE_NOT_AVAILABLE);

    slave.stop();
    produce(&master, 600..800, response_code::SUCCESS);
    slave.restart();
    wait_same_files(&master, &slave, "commitlog");
    wait_same_files(&master, &slave, "consumequeue");
    // The restarted slave asked for its own end, not for a fresh start.
    let starts: Vec<String> = plain_log(&master)
        .lines()
        .filter(|l| l.contains("HA transfer starts"))
        .map(String::from)
        .collect();
    assert_eq!(starts.len(), 2, "{starts:?}");
    assert!(starts[0].contains("requested=0"), "{starts:?}");
    assert!(!starts[1].contains("requested=0"), "{starts:?}");
    assert_eq!(commit_log_bodies(&slave.store_dir()).len(), 800);
}

#[test]
fn a_sync_master_without_a_slave_answers_slave_not_available_but_stores() {
    let namesrv = Namesrv::start();
    let master = start_master(&namesrv, "SYNC_MASTER");
    let mut client = master.client();
    let response = invoke(
        &mut client,
        send_v2("HaTopic", 0, body(1), &[], 0, SerializeType::Json),
    );
    assert_eq!(response.code, response_code::SLAVE_NOT_AVAILABLE);
    assert!(
        response.ext_fields.contains_key("msgId"),
        "the message is stored and its id answered, as Java does"
    );
    // WAIT=false: nothing to wait for.
    let response = invoke(
        &mut client,
        send_v2(
            "HaTopic",
            0,
            body(2),
            &[("WAIT", "false")],
            0,
            SerializeType::Json,
        ),
    );
    assert_eq!(response.code, response_code::SUCCESS);
}

#[test]
fn every_message_a_sync_master_acknowledged_is_on_the_slave_after_a_sigkill() {
    let namesrv = Namesrv::start();
    let mut master = start_master(&namesrv, "SYNC_MASTER");
    let slave = start_slave(&namesrv);
    wait_connected(&master, 1);
    let acked = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let producer = {
        let (acked, stop) = (acked.clone(), stop.clone());
        let mut client = master.client();
        std::thread::spawn(move || {
            for i in 0..100_000 {
                if stop.load(Ordering::Acquire) {
                    return;
                }
                let request = send_v2(
                    "HaTopic",
                    (i % 4) as i32,
                    body(i),
                    &[],
                    0,
                    SerializeType::Json,
                );
                match client.invoke(request) {
                    Ok(r) if r.code == response_code::SUCCESS => acked.lock().unwrap().push(i),
                    Ok(r) => panic!("send {i} answered {} {:?}", r.code, r.remark),
                    Err(_) => return,
                }
            }
        })
    };
    wait_until("200 acknowledged sends", Duration::from_secs(60), || {
        acked.lock().unwrap().len() >= 200
    });
    master.kill_hard();
    stop.store(true, Ordering::Release);
    producer.join().unwrap();
    let acked = acked.lock().unwrap().clone();
    let on_slave: std::collections::HashSet<Vec<u8>> =
        commit_log_bodies(&slave.store_dir()).into_iter().collect();
    let missing: Vec<usize> = acked
        .iter()
        .copied()
        .filter(|i| !on_slave.contains(body(*i).as_ref()))
        .collect();
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged messages are not on the slave: {:?}",
        missing.len(),
        acked.len(),
        &missing[..missing.len().min(10)]
    );
}

#[test]
fn the_slave_reconnects_to_a_restarted_master_and_catches_up() {
    let namesrv = Namesrv::start();
    let mut master = start_master(&namesrv, "ASYNC_MASTER");
    let slave = start_slave(&namesrv);
    wait_connected(&master, 1);
    produce(&master, 0..100, response_code::SUCCESS);
    wait_same_files(&master, &slave, "commitlog");
    master.kill_hard();
    master.restart();
    produce(&master, 100..300, response_code::SUCCESS);
    // The slave reconnects within its 5 s retry and asks for its own end.
    wait_same_files(&master, &slave, "commitlog");
    wait_same_files(&master, &slave, "consumequeue");
    assert!(plain_log(&slave).matches("HA connected to master").count() >= 2);
    assert_eq!(commit_log_bodies(&slave.store_dir()).len(), 300);
}

#[test]
fn the_masters_metrics_show_the_slowest_slaves_lag() {
    let namesrv = Namesrv::start();
    let namesrv_addr = namesrv.addr();
    let mut env: Vec<(&str, &str)> = store_env().into_iter().collect();
    env.push(("RINGMQ_NAMESRV_ADDR", namesrv_addr.as_str()));
    let (master, metrics) = common::broker_with_metrics(&env);
    let slave = start_slave(&namesrv);
    wait_connected(&master, 1);
    produce(&master, 0..50, response_code::SUCCESS);
    wait_same_files(&master, &slave, "commitlog");
    wait_until("the lag gauge at 0", Duration::from_secs(10), || {
        let (status, text) = common::http_get(&metrics, "/metrics");
        status == 200 && text.lines().any(|l| l == "ringmq_ha_lag_bytes 0")
    });
}
