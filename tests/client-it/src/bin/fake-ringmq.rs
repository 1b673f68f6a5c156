//! A stand-in for `ringmq broker` used only to test the harness itself (tests/harness.rs):
//! binds the ports named by the same env vars, prints the readiness line, counts its starts
//! in the store dir, and accepts connections until it is killed. With FAKE_RINGMQ_EXIT=1 it
//! exits at once instead.

use std::io::Write;
use std::net::TcpListener;
use std::path::PathBuf;

fn port(name: &str) -> u16 {
    std::env::var(name)
        .unwrap_or_else(|_| panic!("{name} not set"))
        .parse()
        .unwrap_or_else(|_| panic!("{name} is not a port"))
}

fn main() {
    assert_eq!(std::env::args().nth(1).as_deref(), Some("broker"));
    if std::env::var("FAKE_RINGMQ_EXIT").as_deref() == Ok("1") {
        eprintln!("fake ringmq: exiting as asked");
        std::process::exit(3);
    }
    let store = PathBuf::from(std::env::var("RINGMQ_STORE_ROOT_DIR").expect("store dir"));
    let starts_path = store.join("starts");
    let starts: u32 = std::fs::read_to_string(&starts_path)
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(0);
    std::fs::write(&starts_path, (starts + 1).to_string()).expect("write starts");
    let broker_port = port("RINGMQ_BROKER_LISTEN_PORT");
    let listeners: Vec<TcpListener> = [
        broker_port,
        broker_port - 2,
        port("RINGMQ_NAMESRV_LISTEN_PORT"),
    ]
    .into_iter()
    .map(|p| TcpListener::bind(("127.0.0.1", p)).expect("bind"))
    .collect();
    eprintln!("fake: ringmq broker listening on 127.0.0.1:{broker_port}");
    std::io::stderr().flush().expect("flush");
    let handles: Vec<_> = listeners
        .into_iter()
        .map(|listener| {
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    drop(stream);
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().expect("accept thread");
    }
}
