//! `GET /metrics` of a real broker after traffic: every family is there, the counters moved,
//! the consumer lag is the store's max offset minus the committed offset, and an empty
//! `RINGMQ_METRICS_LISTEN` turns the listener off.

mod common;

use bytes::Bytes;
use common::*;
use ringmq::remoting::codes::{request_code as req, response_code as rc};
use ringmq::remoting::command::{RemotingCommand, SerializeType};

const TOPIC: &str = "MetricsTopic";

/// Sends ten messages, pulls them, commits offset 4 and makes one refused pull; returns the
/// refusal's response code.
fn send_ten(c: &mut ringmq::net::remoting_client::BlockingClient) -> i32 {
    for i in 0..10 {
        let body = Bytes::from(format!("message {i}"));
        let r = invoke(c, send_v2(TOPIC, 1, body, &[], 0, SerializeType::Json));
        assert_eq!(r.code, rc::SUCCESS, "{r:?}");
    }
    let p = pull(
        req::PULL_MESSAGE,
        TOPIC,
        1,
        0,
        32,
        0,
        "*",
        0,
        SerializeType::Json,
    );
    let r = invoke(c, p);
    assert_eq!(r.code, rc::SUCCESS, "{r:?}");
    let u = invoke(
        c,
        RemotingCommand::request(req::UPDATE_CONSUMER_OFFSET)
            .with_ext("consumerGroup", "cg")
            .with_ext("topic", TOPIC)
            .with_ext("queueId", 1)
            .with_ext("commitOffset", 4),
    );
    assert_eq!(u.code, rc::SUCCESS, "{u:?}");
    // A refusal, counted by its code: a pull of a queue the topic does not have.
    let bad = pull(
        req::PULL_MESSAGE,
        TOPIC,
        999,
        0,
        1,
        0,
        "*",
        0,
        SerializeType::Json,
    );
    let refused = invoke(c, bad).code;
    assert_ne!(refused, rc::SUCCESS);
    refused
}

/// The value of the series `name` (with its labels, as written), if present.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
}

#[test]
fn a_scrape_after_traffic_has_every_family_and_the_counts() {
    let (broker, metrics_addr) = broker_with_metrics(&[]);
    // Kept open over the scrape: one live connection.
    let mut client = broker.client();
    let refused_code = send_ten(&mut client);
    let (status, text) = http_get(&metrics_addr, "/metrics");
    assert_eq!(status, 200, "{text}");
    for family in [
        "ringmq_send_requests_total",
        "ringmq_send_messages_total",
        "ringmq_send_bytes_total",
        "ringmq_pull_requests_total",
        "ringmq_pull_messages_total",
        "ringmq_pull_bytes_total",
        "ringmq_send_latency_seconds",
        "ringmq_pull_latency_seconds",
        "ringmq_longpoll_wake_latency_seconds",
        "ringmq_longpoll_parked_pulls",
        "ringmq_request_errors_total",
        "ringmq_commitlog_size_bytes",
        "ringmq_commitlog_flush_latency_seconds",
        "ringmq_store_fsyncs_total",
        "ringmq_connections",
        "ringmq_consumer_lag_messages",
        "ringmq_broker_info",
    ] {
        assert!(
            text.contains(&format!("# TYPE {family} ")),
            "no family {family} in\n{text}"
        );
    }
    let topic = format!("{{topic=\"{TOPIC}\"}}");
    assert_eq!(
        value(&text, &format!("ringmq_send_requests_total{topic}")),
        Some(10.0)
    );
    assert_eq!(
        value(&text, &format!("ringmq_send_messages_total{topic}")),
        Some(10.0)
    );
    assert!(value(&text, &format!("ringmq_send_bytes_total{topic}")).unwrap() > 100.0);
    assert_eq!(
        value(&text, &format!("ringmq_pull_messages_total{topic}")),
        Some(10.0)
    );
    assert_eq!(
        value(&text, "ringmq_send_latency_seconds_count"),
        Some(10.0)
    );
    let lag = format!("ringmq_consumer_lag_messages{{group=\"cg\",topic=\"{TOPIC}\",queue=\"1\"}}");
    assert_eq!(value(&text, &lag), Some(6.0), "10 stored, 4 consumed");
    let refused = format!("ringmq_request_errors_total{{code=\"{refused_code}\"}}");
    assert!(value(&text, &refused).is_some_and(|n| n >= 1.0), "{text}");
    assert!(value(&text, "ringmq_commitlog_size_bytes").unwrap() > 0.0);
    assert!(value(&text, "ringmq_connections").unwrap() >= 1.0);
    assert!(
        text.contains("role=\"ASYNC_MASTER\""),
        "the broker's role is in its info: {text}"
    );
    assert!(
        !text.contains("ringmq_ha_lag_bytes"),
        "no HA lag until replication reports one"
    );
}

/// An empty RINGMQ_METRICS_LISTEN binds nothing: the broker listens on its remoting ports
/// only (its HA port too), not on the default 127.0.0.1:5557 nor anywhere else; a broker with
/// an address listens there too (the check can see a metrics listener).
#[test]
fn an_empty_listen_address_turns_metrics_off() {
    let (with, metrics_addr) = broker_with_metrics(&[]);
    let metrics_port: u16 = metrics_addr.rsplit(':').next().unwrap().parse().unwrap();
    assert!(
        with.listening_ports().contains(&metrics_port),
        "{:?}",
        with.listening_ports()
    );
    drop(with);

    let default_was_free = std::net::TcpStream::connect("127.0.0.1:5557").is_err();
    let broker = Broker::start(&[("RINGMQ_METRICS_LISTEN", "")]);
    send_v2_ok(&broker);
    let ports = broker.listening_ports();
    let remoting = [
        broker.port,
        broker.port - 2,
        broker.port + 1,
        broker.namesrv_port,
    ];
    let others: Vec<u16> = ports
        .iter()
        .copied()
        .filter(|p| !remoting.contains(p))
        .collect();
    assert!(others.is_empty(), "other listeners {others:?} of {ports:?}");
    if default_was_free {
        assert!(
            std::net::TcpStream::connect("127.0.0.1:5557").is_err(),
            "something listens on the default metrics address"
        );
    }
    assert!(!broker.log().contains("ringmq metrics"), "{}", broker.log());
}

fn send_v2_ok(broker: &Broker) {
    let mut c = broker.client();
    let r = invoke(
        &mut c,
        send_v2(
            TOPIC,
            0,
            Bytes::from_static(b"x"),
            &[],
            0,
            SerializeType::Json,
        ),
    );
    assert_eq!(r.code, rc::SUCCESS, "{r:?}");
}

#[test]
fn a_metrics_address_in_use_fails_the_start_naming_the_variable() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .arg("broker")
        .env("RINGMQ_STORE_ROOT_DIR", tempfile::tempdir().unwrap().path())
        .env("RINGMQ_BROKER_LISTEN_PORT", free_broker_port().to_string())
        .env("RINGMQ_NAMESRV_ADDR", "127.0.0.1:9")
        .env("RINGMQ_METRICS_LISTEN", &addr)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("RINGMQ_METRICS_LISTEN={addr}")),
        "{stderr}"
    );
}

/// PullSysFlag FLAG_SUSPEND: park when nothing is there.
const SUSPEND: i32 = 0x2;

/// Scrapes until `series` has a value `ok` accepts, for up to 10 s.
fn wait_for(metrics_addr: &str, series: &str, ok: impl Fn(f64) -> bool) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (_, text) = http_get(metrics_addr, "/metrics");
        if value(&text, series).is_some_and(&ok) {
            return text;
        }
        assert!(std::time::Instant::now() < deadline, "{series}:\n{text}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn long_polling_shows_the_parked_pull_and_the_wake_latency() {
    let (broker, metrics_addr) = broker_with_metrics(&[]);
    let mut producer = broker.client();
    send_v2_ok(&broker);
    let mut consumer = broker.client();
    let parked = pull(
        req::PULL_MESSAGE,
        TOPIC,
        0,
        1,
        32,
        SUSPEND,
        "*",
        20_000,
        SerializeType::Json,
    );
    consumer.send(&parked.with_opaque(77)).unwrap();
    wait_for(&metrics_addr, "ringmq_longpoll_parked_pulls", |n| n == 1.0);
    let body = Bytes::from_static(b"wake");
    let r = invoke(
        &mut producer,
        send_v2(TOPIC, 0, body, &[], 0, SerializeType::Json),
    );
    assert_eq!(r.code, rc::SUCCESS, "{r:?}");
    let woken = consumer.read_command().unwrap();
    assert_eq!((woken.opaque, woken.code), (77, rc::SUCCESS), "{woken:?}");
    let text = wait_for(
        &metrics_addr,
        "ringmq_longpoll_wake_latency_seconds_count",
        |n| n >= 1.0,
    );
    assert_eq!(value(&text, "ringmq_longpoll_parked_pulls"), Some(0.0));
}
