//! The dashboard in a real browser: Debian's headless Chromium (`--headless --no-sandbox`)
//! loads `GET /` of a broker under traffic and the test reads the DOM it rendered: the topic
//! is listed and the send rate is not zero. It also saves a screenshot to docs/dashboard.png.
//!
//! Chromium is found as `chromium` on PATH (or `RINGMQ_TEST_CHROMIUM`); a missing browser
//! fails the test. scripts/test.sh installs Debian's package when it is missing, and only
//! where it cannot (no apt-get, or not root) sets `RINGMQ_TEST_SKIP_BROWSER=1`, which makes
//! this test say it is skipped and pass. The browser may reach only 127.0.0.1: every
//! other host name resolves to nothing and its background services are off.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use ringmq::remoting::codes::{request_code as req, response_code as rc};
use ringmq::remoting::command::{RemotingCommand, SerializeType};

const TOPIC: &str = "DashboardTopic";
/// The traffic thread stops by itself after this long, or this many sends.
const TRAFFIC_MAX: Duration = Duration::from_secs(90);
const TRAFFIC_SENDS_MAX: u64 = 200_000;
/// Pause between sends: a few hundred messages a second, light on a shared machine.
const SEND_PAUSE: Duration = Duration::from_millis(2);
/// How long one Chromium run may take.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(90);

fn chromium() -> PathBuf {
    if let Some(path) = std::env::var_os("RINGMQ_TEST_CHROMIUM") {
        return PathBuf::from(path);
    }
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("chromium"))
            .find(|p| p.is_file())
    });
    found.unwrap_or_else(|| {
        panic!(
            "no `chromium` on PATH: install Debian's package (`apt-get install -y chromium`; \
             scripts/test.sh does it) or set RINGMQ_TEST_CHROMIUM to the browser"
        )
    })
}

/// Runs headless Chromium with `args` then `url`, killed after [`BROWSER_TIMEOUT`]; returns
/// its stdout.
fn run_chromium(profile: &Path, args: &[&str], url: &str) -> String {
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--no-first-run",
            "--no-default-browser-check",
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromium");
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut out).ok();
        out
    });
    let deadline = Instant::now() + BROWSER_TIMEOUT;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "chromium exited with {status}");
            break;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within {BROWSER_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    reader.join().unwrap()
}

/// Sends to [`TOPIC`] and pulls queue 0 until `stop` (bounded in time and count); consumer
/// group `cg` commits half of what it pulled, so the page has a lag to show.
fn traffic(broker_addr: String, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut c = ringmq::net::remoting_client::BlockingClient::connect(
            &broker_addr,
            Duration::from_secs(10),
        )
        .expect("connect broker");
        let started = Instant::now();
        let (mut sent, mut next_offset) = (0u64, 0i64);
        while !stop.load(Ordering::Relaxed)
            && started.elapsed() < TRAFFIC_MAX
            && sent < TRAFFIC_SENDS_MAX
        {
            let body = Bytes::from(format!("dashboard message {sent}"));
            let queue = (sent % 4) as i32;
            let r = invoke(
                &mut c,
                send_v2(TOPIC, queue, body, &[], 0, SerializeType::Json),
            );
            assert_eq!(r.code, rc::SUCCESS, "{r:?}");
            sent += 1;
            if sent % 16 == 0 {
                let p = pull(
                    req::PULL_MESSAGE,
                    TOPIC,
                    0,
                    next_offset,
                    32,
                    0,
                    "*",
                    0,
                    SerializeType::Json,
                );
                let r = invoke(&mut c, p);
                if r.code == rc::SUCCESS {
                    next_offset = r.ext_i64("nextBeginOffset").unwrap_or(next_offset);
                }
                let commit = RemotingCommand::request(req::UPDATE_CONSUMER_OFFSET)
                    .with_ext("consumerGroup", "cg")
                    .with_ext("topic", TOPIC)
                    .with_ext("queueId", 0)
                    .with_ext("commitOffset", next_offset / 2);
                invoke(&mut c, commit);
            }
            std::thread::sleep(SEND_PAUSE);
        }
        sent
    })
}

/// Waits until `/api/stats` has seen a few rate samples with sends in them.
fn wait_for_rates(metrics_addr: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = http_get(metrics_addr, "/api/stats");
        assert_eq!(status, 200, "{body}");
        let stats: serde_json::Value = serde_json::from_str(&body).unwrap();
        let samples = stats["history"].as_array().map_or(0, Vec::len);
        if samples >= 3 && stats["rates"]["send_messages_per_s"].as_f64() > Some(0.0) {
            return;
        }
        assert!(Instant::now() < deadline, "no send rate after 30 s: {body}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The text of the element with `id` in `dom` (the first text node after its start tag).
fn element_text<'a>(dom: &'a str, id: &str) -> &'a str {
    let at = dom
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id} in the DOM:\n{dom}"));
    let rest = &dom[at..];
    let start = rest.find('>').unwrap() + 1;
    let end = rest[start..].find('<').unwrap() + start;
    &rest[start..end]
}

#[test]
fn the_dashboard_shows_the_topic_and_a_live_send_rate_in_chromium() {
    if std::env::var_os("RINGMQ_TEST_SKIP_BROWSER").is_some_and(|v| v == "1") {
        eprintln!("SKIPPED: RINGMQ_TEST_SKIP_BROWSER=1 (no chromium could be installed)");
        return;
    }
    let (broker, metrics_addr) = broker_with_metrics(&[]);
    let stop = Arc::new(AtomicBool::new(false));
    let sender = traffic(broker.addr(), stop.clone());
    wait_for_rates(&metrics_addr);
    let profile = tempfile::tempdir().unwrap();
    let url = format!("http://{metrics_addr}/");
    let dom = run_chromium(
        profile.path(),
        &["--virtual-time-budget=5000", "--dump-dom"],
        &url,
    );
    assert!(
        dom.contains(&format!("<td>{TOPIC}</td>")),
        "the topic table lists {TOPIC}:\n{dom}"
    );
    let rate: f64 = element_text(&dom, "send-rate")
        .replace(',', "")
        .parse()
        .unwrap();
    assert!(rate > 0.0, "send rate {rate} in:\n{dom}");
    assert_eq!(element_text(&dom, "broker-role"), "ASYNC_MASTER");
    assert_eq!(element_text(&dom, "ha-state"), "master, no slave connected");
    assert_eq!(element_text(&dom, "status"), "live");
    assert!(
        dom.contains("<td>cg</td>"),
        "the group with its lag:\n{dom}"
    );

    let screenshot = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/dashboard.png");
    let shot_arg = format!("--screenshot={}", screenshot.display());
    run_chromium(
        profile.path(),
        &[
            "--virtual-time-budget=5000",
            "--window-size=1200,1000",
            "--hide-scrollbars",
            &shot_arg,
        ],
        &url,
    );
    let png = std::fs::read(&screenshot).expect("chromium wrote the screenshot");
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000,
        "a real PNG"
    );

    stop.store(true, Ordering::Relaxed);
    assert!(sender.join().unwrap() > 0);
    drop(broker);
}
