//! Issue 14: `ringmq broker -c broker.conf` reads RocketMQ's own files. The fixtures under
//! tests/fixtures/ equal the distribution's `conf/broker.conf` and
//! `conf/2m-2s-async/broker-a.properties` / `broker-a-s.properties`. Real processes of the
//! `ringmq` binary on 127.0.0.1 with free ports and temporary data dirs; every wait is bounded.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{broker_ports, free_port, invoke};
use ringmq::net::remoting_client::BlockingClient;
use ringmq::remoting::codes::{request_code, response_code};
use ringmq::remoting::command::RemotingCommand;

const START_TIMEOUT: Duration = Duration::from_secs(30);

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn ringmq(args: &[&str], env: &[(&str, String)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringmq"));
    cmd.args(args)
        .env("RINGMQ_SERVER_WORKER_THREADS", "2")
        .env("RINGMQ_METRICS_LISTEN", "127.0.0.1:0")
        .env("RINGMQ_LOG_LEVEL", "info")
        .stdin(Stdio::null());
    for (key, value) in env {
        cmd.env(key, value);
    }
    cmd
}

/// A process that runs until stopped; its stderr lines so far are kept.
struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Running {
    fn spawn(mut cmd: Command) -> Running {
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn ringmq");
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Running {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for a stderr line containing `marker`; panics with the log if none comes.
    fn wait_for(&mut self, marker: &str) -> String {
        loop {
            match self.lines.recv_timeout(START_TIMEOUT) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(marker) {
                        return line;
                    }
                }
                Err(_) => panic!("no {marker:?} on stderr:\n{}", self.seen.join("\n")),
            }
        }
    }

    fn log(&self) -> String {
        self.seen.join("\n")
    }

    fn stop(mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let status = self.child.wait().expect("wait");
        assert!(status.success(), "exited with {status}");
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Ports and a data dir of its own for a broker started from a fixture, given by environment
/// variables, which override the file.
fn broker_env(store: &Path) -> (u16, Vec<(&'static str, String)>) {
    let (port, namesrv_port) = broker_ports();
    let env = vec![
        ("RINGMQ_BROKER_LISTEN_PORT", port.to_string()),
        ("RINGMQ_NAMESRV_LISTEN_PORT", namesrv_port.to_string()),
        ("RINGMQ_STORE_ROOT_DIR", store.display().to_string()),
        // The distribution's broker.conf names a name server on 127.0.0.1:9876; an empty
        // address (from the environment, which wins) runs the embedded one instead.
        ("RINGMQ_NAMESRV_ADDR", String::new()),
    ];
    (port, env)
}

fn assert_serves(port: u16) {
    let addr = format!("127.0.0.1:{port}");
    let mut client = BlockingClient::connect(&addr, Duration::from_secs(10)).expect("connect");
    let response = invoke(
        &mut client,
        RemotingCommand::request(request_code::GET_BROKER_RUNTIME_INFO),
    );
    assert_eq!(
        response.code,
        response_code::SUCCESS,
        "{:?}",
        response.remark
    );
}

fn run_to_exit(mut cmd: Command) -> Output {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("run ringmq")
}

#[test]
fn the_distribution_broker_conf_starts_a_broker_that_serves() {
    let tmp = tempfile::tempdir().unwrap();
    let (port, env) = broker_env(&tmp.path().join("store"));
    let conf = fixture("broker.conf");
    let mut broker = Running::spawn(ringmq(&["broker", "-c", conf.to_str().unwrap()], &env));
    broker.wait_for("ringmq broker listening");
    assert_serves(port);
    let log = broker.log();
    for key in ["deleteWhen", "enableAcl"] {
        assert!(
            log.lines()
                .any(|l| l.contains("broker.conf:") && l.contains(key)),
            "no warning naming {key}:\n{log}"
        );
    }
    assert!(
        log.contains("RINGMQ_STORE_FILE_RESERVED_TIME_HOURS=48"),
        "fileReservedTime of the file is in effect:\n{log}"
    );
    broker.stop();
}

#[test]
fn the_two_master_broker_a_properties_start_a_broker_that_serves() {
    let tmp = tempfile::tempdir().unwrap();
    let (port, env) = broker_env(&tmp.path().join("store"));
    let conf = fixture("broker-a.properties");
    // No subcommand: `ringmq -c FILE` runs the broker, as `mqbroker -c FILE`.
    let mut broker = Running::spawn(ringmq(&["-c", conf.to_str().unwrap()], &env));
    broker.wait_for("ringmq broker listening");
    assert_serves(port);
    broker.stop();
}

#[test]
fn the_slave_properties_start_a_slave_that_serves() {
    let tmp = tempfile::tempdir().unwrap();
    let (port, env) = broker_env(&tmp.path().join("store"));
    let conf = fixture("broker-a-s.properties");
    let mut broker = Running::spawn(ringmq(&["broker", "-c", conf.to_str().unwrap()], &env));
    broker.wait_for("ringmq broker listening");
    assert_serves(port);
    broker.stop();
}

#[test]
fn a_slave_with_the_master_id_is_refused_with_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, mut env) = broker_env(&tmp.path().join("store"));
    env.push(("RINGMQ_BROKER_ID", "0".to_string()));
    let conf = fixture("broker-a-s.properties");
    let out = run_to_exit(ringmq(&["broker", "-c", conf.to_str().unwrap()], &env));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("RINGMQ_BROKER_ID=\"0\" is invalid") && stderr.contains("SLAVE"),
        "{stderr}"
    );
    assert!(
        !tmp.path().join("store").exists(),
        "a refused broker leaves no data dir"
    );
}

#[test]
fn config_shows_each_value_with_its_source() {
    let conf = fixture("broker.conf");
    let env = [("RINGMQ_BROKER_LISTEN_PORT", "20911".to_string())];
    let out = run_to_exit(ringmq(&["config", "-c", conf.to_str().unwrap()], &env));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = conf.display();
    for want in [
        format!("RINGMQ_BROKER_NAME=broker-a  # {file}:17 brokerName\n"),
        format!("RINGMQ_STORE_FLUSH_POLICY=async  # {file}:22 flushDiskType\n"),
        "RINGMQ_BROKER_LISTEN_PORT=20911  # env\n".to_string(),
        "RINGMQ_STORE_MAX_MESSAGE_SIZE_BYTES=4194304  # default\n".to_string(),
        format!("# warning: {file}:19: deleteWhen: not supported by ringmq yet"),
    ] {
        assert!(stdout.contains(&want), "lacks {want:?}:\n{stdout}");
    }
    let out = run_to_exit(ringmq(
        &[
            "config",
            "-c",
            conf.to_str().unwrap(),
            "-n",
            "10.0.0.1:9876",
        ],
        &[],
    ));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("RINGMQ_NAMESRV_ADDR=10.0.0.1:9876  # flag -n\n"),
        "{stdout}"
    );
}

#[test]
fn a_bad_value_exits_2_naming_key_file_line_value_and_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let conf = tmp.path().join("broker.conf");
    std::fs::write(
        &conf,
        "brokerName=b\nfileReservedTime = two days\nnoSuchKey=1\n",
    )
    .unwrap();
    let out = run_to_exit(ringmq(&["config", "-c", conf.to_str().unwrap()], &[]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let want = format!(
        "{}:2: fileReservedTime=\"two days\" is invalid: not a whole number",
        conf.display()
    );
    assert!(stderr.contains(&want), "lacks {want:?}:\n{stderr}");
    let missing = tmp.path().join("absent.conf");
    let out = run_to_exit(ringmq(&["broker", "-c", missing.to_str().unwrap()], &[]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot read"), "{stderr}");
}

#[test]
fn namesrv_reads_its_listen_port_from_its_file() {
    let tmp = tempfile::tempdir().unwrap();
    let port = free_port();
    let conf = tmp.path().join("namesrv.properties");
    std::fs::write(&conf, format!("listenPort={port}\n")).unwrap();
    let mut namesrv = Running::spawn(ringmq(&["namesrv", "-c", conf.to_str().unwrap()], &[]));
    let line = namesrv.wait_for("ringmq name server listening");
    assert!(line.contains(&format!("127.0.0.1:{port}")), "{line}");
    namesrv.stop();
}

#[test]
fn help_lists_the_subcommands_and_bad_usage_exits_2() {
    let out = run_to_exit(ringmq(&["--help"], &[]));
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for word in [
        "broker",
        "namesrv",
        "config",
        "-c, --configFile",
        "-n, --namesrvAddr",
    ] {
        assert!(help.contains(word), "lacks {word}:\n{help}");
    }
    for sub in ["broker", "namesrv", "config"] {
        let out = run_to_exit(ringmq(&[sub, "--help"], &[]));
        assert!(out.status.success(), "{sub} --help");
    }
    let out = run_to_exit(ringmq(&["config", "--help"], &[]));
    assert!(String::from_utf8_lossy(&out.stdout).contains("--markdown"));
    let out = run_to_exit(ringmq(&["brokr"], &[]));
    assert_eq!(out.status.code(), Some(2));
}
