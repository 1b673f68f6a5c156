//! The `ringmq-bench` binary as the scripts use it: an `echo-server` child process, every
//! client kind against it through `-n`, JSON reports and SVG charts on disk, and `summary`.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

const BENCH: &str = env!("CARGO_BIN_EXE_ringmq-bench");

/// Kills the echo server when the test ends, even on panic.
struct Echo {
    child: Child,
    addr: String,
}

impl Drop for Echo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_echo() -> Echo {
    let mut child = Command::new(BENCH)
        .args([
            "echo-server",
            "--listen",
            "127.0.0.1:0",
            "-d",
            "120",
            "--echo-queues",
            "4",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn echo-server");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read address line");
    let addr = line
        .trim()
        .rsplit(' ')
        .next()
        .expect("address at the end of the line")
        .to_owned();
    assert!(addr.starts_with("127.0.0.1:"), "{line}");
    Echo { child, addr }
}

fn run(args: &[&str]) -> std::process::Output {
    let output = Command::new(BENCH)
        .args(args)
        .output()
        .expect("run ringmq-bench");
    assert!(
        output.status.success(),
        "ringmq-bench {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn read_report(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).expect("report written");
    serde_json::from_str(&text).expect("report is JSON")
}

/// Where the kinds write their reports.
struct Reports(tempfile::TempDir);

impl Reports {
    fn path(&self, name: &str) -> std::path::PathBuf {
        self.0.path().join(format!("{name}.json"))
    }

    /// The report path as a command-line argument.
    fn arg(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }
}

/// The kinds run in order against one echo server: the consumer reads what the producer sent,
/// and `summary` tabulates all four reports.
#[test]
fn every_kind_runs_against_the_echo_server_child() {
    let echo = start_echo();
    let reports = Reports(tempfile::tempdir().expect("tempdir"));
    producer_writes_report_and_svg(&echo, &reports);
    consumer_reads_what_the_producer_sent(&echo, &reports);
    e2e_consumes_everything_sent(&echo, &reports);
    catchup_reports_the_broker_cpu(&echo, &reports);
    summary_tabulates_every_report(&reports);
}

fn producer_writes_report_and_svg(echo: &Echo, reports: &Reports) {
    let report = |name: &str| reports.path(name);
    let p = |name: &str| reports.arg(name);
    run(&[
        "producer",
        "-n",
        &echo.addr,
        "-t",
        "CliT",
        "-w",
        "4",
        "-q",
        "400",
        "--progress",
        "false",
        "--report",
        &p("producer"),
        "--label",
        "P",
    ]);
    let producer = read_report(&report("producer"));
    assert_eq!(producer["parameters"]["kind"], "producer");
    assert_eq!(producer["results"]["send"]["messages"], 400);
    assert!(producer["results"]["send"]["latency_us"]["p99_99"]
        .as_u64()
        .is_some());
    assert!(producer["machine"]["cores"].as_u64().is_some());
    assert!(producer["git_revision"].as_str().is_some());
    let svg = std::fs::read_to_string(report("producer").with_extension("svg")).expect("svg");
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
}

fn consumer_reads_what_the_producer_sent(echo: &Echo, reports: &Reports) {
    let report = |name: &str| reports.path(name);
    let p = |name: &str| reports.arg(name);
    run(&[
        "consumer",
        "-n",
        &echo.addr,
        "-t",
        "CliT",
        "--from",
        "first",
        "-q",
        "400",
        "-d",
        "20",
        "--progress",
        "false",
        "--report",
        &p("consumer"),
    ]);
    assert_eq!(
        read_report(&report("consumer"))["results"]["consume"]["messages"],
        400
    );
}

fn e2e_consumes_everything_sent(echo: &Echo, reports: &Reports) {
    let report = |name: &str| reports.path(name);
    let p = |name: &str| reports.arg(name);
    run(&[
        "e2e",
        "-n",
        &echo.addr,
        "-t",
        "CliE",
        "-w",
        "2",
        "-r",
        "300",
        "-d",
        "1",
        "--progress",
        "false",
        "--report",
        &p("e2e"),
    ]);
    let e2e = read_report(&report("e2e"));
    assert_eq!(
        e2e["results"]["e2e"]["messages"],
        e2e["results"]["send"]["messages"]
    );
}

fn catchup_reports_the_broker_cpu(echo: &Echo, reports: &Reports) {
    let report = |name: &str| reports.path(name);
    let p = |name: &str| reports.arg(name);
    run(&[
        "catchup",
        "-n",
        &echo.addr,
        "-t",
        "CliK",
        "-y",
        "true",
        "-s",
        "512",
        "--backlog-bytes",
        "512000",
        "-d",
        "20",
        "--progress",
        "false",
        "--broker-pid",
        &echo.child.id().to_string(),
        "--report",
        &p("catchup"),
    ]);
    let catchup = read_report(&report("catchup"));
    assert_eq!(catchup["results"]["catchup"]["messages"], 1000);
    assert_eq!(catchup["extra"]["complete"], true);
    // The echo server stands in for the broker: its CPU over the consume phase is reported,
    // per GiB of the records it served (1000 bodies of 512 B plus their headers).
    let extra = &catchup["extra"];
    assert_eq!(extra["broker_pid"], echo.child.id());
    assert_eq!(extra["served_body_bytes"], 512_000);
    assert!(extra["served_record_bytes"].as_u64().expect("record bytes") > 512_000);
    for key in [
        "broker_cpu_user_s",
        "broker_cpu_sys_s",
        "broker_cpu_user_s_per_gib",
        "broker_cpu_sys_s_per_gib",
        "broker_cpu_total_s_per_gib",
    ] {
        assert!(
            extra[key].as_f64().is_some_and(|v| v >= 0.0),
            "{key}: {extra}"
        );
    }
}

fn summary_tabulates_every_report(reports: &Reports) {
    let p = |name: &str| reports.arg(name);
    let table = run(&[
        "summary",
        &p("producer"),
        &p("consumer"),
        &p("e2e"),
        &p("catchup"),
    ]);
    let table = String::from_utf8(table.stdout).expect("utf-8");
    assert_eq!(table.lines().count(), 2 + 6, "{table}");
    assert!(table.contains("| P | producer | send |"), "{table}");
}

#[test]
fn bad_flags_and_foreign_addresses_fail_cleanly() {
    for args in [
        &["producer", "-d", "10000"][..],
        &["producer", "-n", "192.0.2.7:9876", "--progress", "false"],
        &["echo-server", "--listen", "0.0.0.0:0"],
        &["wat"],
        // pid_max is at most 2^22: no such process.
        &["catchup", "--broker-pid", "4194304", "--skip-fill"],
    ] {
        let output = Command::new(BENCH).args(args).output().expect("run");
        assert!(!output.status.success(), "{args:?} should fail");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("ringmq-bench:"), "{args:?}: {stderr}");
    }
}
