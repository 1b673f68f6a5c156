//! Issue 17: a second `ringmq` on an address already in use must fail at start, naming the
//! address and the setting that chose it, and leave the first one serving. Real processes of
//! the `ringmq` binary on 127.0.0.1 with free ports and temporary data dirs; every wait is
//! bounded.

mod common;

use std::io::Read;
use std::net::TcpListener;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::{broker_ports, free_port, free_port_except, invoke, Broker};
use ringmq::net::remoting_client::BlockingClient;
use ringmq::remoting::codes::{request_code, response_code};
use ringmq::remoting::command::RemotingCommand;

/// How long a process may take to start (and print that it listens) or to fail.
const PROCESS_TIMEOUT: Duration = Duration::from_secs(30);

/// A `ringmq` process: `args` and `env` on top of loopback-only settings.
fn ringmq(args: &[&str], env: &[(&str, String)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringmq"));
    cmd.args(args)
        .env("RINGMQ_BROKER_BIND_IP", "127.0.0.1")
        .env("RINGMQ_NAMESRV_BIND_IP", "127.0.0.1")
        .env("RINGMQ_SERVER_WORKER_THREADS", "2")
        .env("RINGMQ_METRICS_LISTEN", "127.0.0.1:0")
        .env("RINGMQ_LOG_LEVEL", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (key, value) in env {
        cmd.env(key, value);
    }
    cmd
}

/// Runs `cmd`, which must exit on its own within [`PROCESS_TIMEOUT`]; returns its status and
/// everything it wrote to stderr.
fn run_to_exit(mut cmd: Command) -> (ExitStatus, String) {
    let mut child = cmd.spawn().expect("spawn ringmq");
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + PROCESS_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for ringmq") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("ringmq did not exit within {PROCESS_TIMEOUT:?}; it started anyway");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status, reader.join().unwrap())
}

/// Asserts that a process failed at start and said why in `needles`.
fn assert_refused(status: ExitStatus, stderr: &str, needles: &[&str]) {
    assert!(!status.success(), "exited with {status}; stderr:\n{stderr}");
    for needle in needles {
        assert!(
            stderr.contains(needle),
            "stderr lacks {needle:?}:\n{stderr}"
        );
    }
}

/// A broker answers a request: it still serves.
fn assert_broker_serves(broker: &Broker) {
    let response = invoke(
        &mut broker.client(),
        RemotingCommand::request(request_code::GET_BROKER_RUNTIME_INFO),
    );
    assert_eq!(
        response.code,
        response_code::SUCCESS,
        "{:?}",
        response.remark
    );
}

/// A name server answers a route query (an unknown topic: it has no broker).
fn assert_namesrv_serves(addr: &str) {
    let mut client = BlockingClient::connect(addr, Duration::from_secs(10)).expect("connect");
    let response = invoke(
        &mut client,
        RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC)
            .with_ext("topic", "no-such-topic"),
    );
    assert_eq!(response.code, response_code::TOPIC_NOT_EXIST);
}

/// The settings of a broker with its own data dir and embedded name server port.
fn broker_env(dir: &tempfile::TempDir, listen_port: u16) -> Vec<(&'static str, String)> {
    vec![
        (
            "RINGMQ_STORE_ROOT_DIR",
            dir.path().join("store").display().to_string(),
        ),
        ("RINGMQ_BROKER_LISTEN_PORT", listen_port.to_string()),
        (
            "RINGMQ_NAMESRV_LISTEN_PORT",
            free_port_except(&[listen_port, listen_port.saturating_sub(2)]).to_string(),
        ),
    ]
}

/// Starts `cmd` and returns it once it printed `prefix` followed by the address it listens on
/// (the first one, for a broker), with that address. If it does not, the panic shows how the
/// process ended and the last lines it wrote.
fn start_listening(mut cmd: Command, prefix: &'static str) -> (Child, String) {
    const STDERR_LINES_KEPT: usize = 40;
    let mut child = cmd.spawn().expect("spawn ringmq");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let lines = std::sync::Arc::new(std::sync::Mutex::new(std::collections::VecDeque::new()));
    let kept = lines.clone();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if let Some(addrs) = line.strip_prefix(prefix) {
                let first = addrs.split(',').next().unwrap_or_default();
                let _ = tx.send(first.trim().to_string());
            }
            let mut kept = kept.lock().unwrap();
            if kept.len() == STDERR_LINES_KEPT {
                kept.pop_front();
            }
            kept.push_back(line);
        }
    });
    match rx.recv_timeout(PROCESS_TIMEOUT) {
        Ok(addr) => (child, addr),
        Err(_) => {
            let status = child.try_wait().ok().flatten();
            kill(child);
            let lines = lines.lock().unwrap();
            panic!(
                "ringmq did not print {prefix:?} within {PROCESS_TIMEOUT:?} (exit: {status:?}); \
                 its last lines:\n{}",
                Vec::from(lines.clone()).join("\n")
            );
        }
    }
}

/// A standalone name server on `port`, once it listens, with its address.
fn start_namesrv(port: u16) -> (Child, String) {
    let env = [("RINGMQ_NAMESRV_LISTEN_PORT", port.to_string())];
    start_listening(
        ringmq(&["namesrv"], &env),
        "ringmq name server listening on ",
    )
}

/// Stops a process started here, waiting for it.
fn kill(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_second_broker_on_the_same_port_exits_and_the_first_keeps_serving() {
    let first = Broker::start(&[("RINGMQ_BROKER_BIND_IP", "127.0.0.1")]);
    let dir = tempfile::tempdir().unwrap();
    let (status, stderr) = run_to_exit(ringmq(&["broker"], &broker_env(&dir, first.port)));
    assert_refused(
        status,
        &stderr,
        &[
            &format!("127.0.0.1:{}", first.port),
            "already in use",
            "RINGMQ_BROKER_LISTEN_PORT",
            "RINGMQ_BROKER_BIND_IP",
        ],
    );
    assert_broker_serves(&first);
}

/// How far below the listen port the fast port lies (`listenPort - 2`, as in Java).
const FAST_PORT_BELOW: u16 = 2;

/// A broker listen port, with a listener of this test already bound `held_below` under it (0:
/// on the listen port itself; [`FAST_PORT_BELOW`]: on its fast port), and the broker's other
/// ports free when probed. The held socket is the probe itself, never dropped and bound again:
/// in between, another test's socket could take the number (CI saw `AddrInUse` there).
fn broker_port_holding(held_below: u16) -> (TcpListener, u16) {
    for _ in 0..200 {
        let held = TcpListener::bind("127.0.0.1:0").unwrap();
        let Some(port) = held.local_addr().unwrap().port().checked_add(held_below) else {
            continue;
        };
        if port <= FAST_PORT_BELOW || port == u16::MAX {
            continue;
        }
        let others = [port - FAST_PORT_BELOW, port, port + 1]
            .into_iter()
            .filter(|p| *p != port - held_below);
        let probes: Result<Vec<_>, _> = others
            .map(|p| TcpListener::bind(("127.0.0.1", p)))
            .collect();
        if probes.is_ok() {
            return (held, port);
        }
    }
    panic!("no broker port with free neighbours found");
}

#[test]
fn a_port_held_by_another_program_fails_the_broker_main_or_fast() {
    for fast in [false, true] {
        let (_held, port) = broker_port_holding(if fast { FAST_PORT_BELOW } else { 0 });
        let held_port = port - if fast { FAST_PORT_BELOW } else { 0 };
        let dir = tempfile::tempdir().unwrap();
        let (status, stderr) = run_to_exit(ringmq(&["broker"], &broker_env(&dir, port)));
        let mut needles = vec![
            format!("127.0.0.1:{held_port}"),
            "already in use".to_string(),
            format!("RINGMQ_BROKER_LISTEN_PORT={port}"),
        ];
        if fast {
            needles.push("fast port, derived from the listen port".to_string());
            needles.push("RINGMQ_BROKER_FAST_PORT_ENABLED=false".to_string());
        }
        let needles: Vec<&str> = needles.iter().map(String::as_str).collect();
        assert_refused(status, &stderr, &needles);
        // The ports are bound before the store opens: a refused broker recovered nothing and
        // left no abort marker in its data dir.
        assert!(
            !dir.path().join("store").exists(),
            "a broker refused for its port opened its store"
        );
    }
}

#[test]
fn a_second_name_server_on_the_same_port_exits_and_the_first_keeps_serving() {
    let port = free_port();
    let (first, addr) = start_namesrv(port);
    assert_eq!(addr, format!("127.0.0.1:{port}"));
    let env = [("RINGMQ_NAMESRV_LISTEN_PORT", port.to_string())];
    let (status, stderr) = run_to_exit(ringmq(&["namesrv"], &env));
    assert_refused(
        status,
        &stderr,
        &[
            &addr,
            "already in use",
            "RINGMQ_NAMESRV_LISTEN_PORT",
            "RINGMQ_NAMESRV_BIND_IP",
        ],
    );
    assert_namesrv_serves(&addr);
    kill(first);
}

#[test]
fn a_port_held_by_another_program_fails_the_name_server() {
    let held = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port();
    let env = [("RINGMQ_NAMESRV_LISTEN_PORT", port.to_string())];
    let (status, stderr) = run_to_exit(ringmq(&["namesrv"], &env));
    assert_refused(
        status,
        &stderr,
        &[&format!("127.0.0.1:{port}"), "already in use"],
    );
}

#[test]
fn a_second_broker_on_the_same_data_dir_names_the_lock() {
    let first = Broker::start(&[("RINGMQ_BROKER_BIND_IP", "127.0.0.1")]);
    let (broker_port, namesrv_port) = broker_ports();
    let env = [
        (
            "RINGMQ_STORE_ROOT_DIR",
            first.store_dir().display().to_string(),
        ),
        ("RINGMQ_BROKER_LISTEN_PORT", broker_port.to_string()),
        ("RINGMQ_NAMESRV_LISTEN_PORT", namesrv_port.to_string()),
    ];
    let (status, stderr) = run_to_exit(ringmq(&["broker"], &env));
    let lock = first.store_dir().join("lock");
    assert_refused(
        status,
        &stderr,
        &[&lock.display().to_string(), "locked by another process"],
    );
    assert_broker_serves(&first);
}

#[test]
fn port_zero_picks_a_free_port() {
    let (namesrv, addr) = start_namesrv(0);
    assert!(!addr.ends_with(":0"), "{addr}");
    assert_namesrv_serves(&addr);
    kill(namesrv);

    // The fast port is listen port - 2, so it needs a real port; without it port 0 works.
    let dir = tempfile::tempdir().unwrap();
    let env = [
        (
            "RINGMQ_STORE_ROOT_DIR",
            dir.path().join("store").display().to_string(),
        ),
        ("RINGMQ_BROKER_LISTEN_PORT", "0".to_string()),
        ("RINGMQ_BROKER_FAST_PORT_ENABLED", "false".to_string()),
        ("RINGMQ_NAMESRV_LISTEN_PORT", "0".to_string()),
    ];
    let (broker, addr) = start_listening(ringmq(&["broker"], &env), "ringmq broker listening on ");
    assert!(!addr.ends_with(":0"), "{addr}");
    let mut client = BlockingClient::connect(&addr, Duration::from_secs(10)).expect("connect");
    let response = invoke(
        &mut client,
        RemotingCommand::request(request_code::GET_BROKER_RUNTIME_INFO),
    );
    assert_eq!(response.code, response_code::SUCCESS);
    kill(broker);
}

#[test]
fn a_killed_name_server_can_be_restarted_on_its_port_at_once() {
    let port = free_port();
    for _ in 0..3 {
        let (namesrv, addr) = start_namesrv(port);
        assert_namesrv_serves(&addr);
        // SIGKILL: the socket lingers a few ms, held by the dead process's io_uring.
        kill(namesrv);
    }
}
