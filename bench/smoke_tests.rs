//! Short runs of every kind against an in-process echo server.

use crate::args::{parse, Args, Parsed};
use crate::echo::EchoServer;
use crate::kinds;

fn args(echo: &EchoServer, extra: &[&str]) -> Args {
    let addr = echo.local_addr().to_string();
    let mut argv = vec![extra[0], "-n", &addr, "--progress", "false"];
    argv.extend_from_slice(&extra[1..]);
    match parse(argv).expect("valid args") {
        Parsed::Run(args) => *args,
        Parsed::Help => panic!("help"),
    }
}

fn result<'a>(outcome: &'a kinds::Outcome, name: &str) -> &'a crate::report::MeterResult {
    outcome
        .results
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no {name} result"))
}

#[test]
fn producer_sync_and_async_against_echo() {
    let echo = EchoServer::start("127.0.0.1:0", 4).expect("echo");
    for (mode, threads) in [("false", "4"), ("true", "2")] {
        for serialize in ["json", "rocketmq"] {
            let a = args(
                &echo,
                &[
                    "producer",
                    "-t",
                    "SmokeP",
                    "-w",
                    threads,
                    "-y",
                    mode,
                    "-q",
                    "500",
                    "-d",
                    "20",
                    "-k",
                    "true",
                    "-l",
                    "2",
                    "-p",
                    "32",
                    "--serialize",
                    serialize,
                ],
            );
            let outcome = kinds::run_producer(&a).expect("runs");
            assert_eq!(outcome.error, None);
            let send = result(&outcome, "send");
            assert_eq!(send.messages, 500, "async={mode} {serialize}");
            assert_eq!(send.failures, 0);
            assert_eq!(
                send.histogram.len(),
                500,
                "one latency sample per acked send"
            );
            assert_eq!(send.bytes, 500 * 128);
        }
    }
    echo.shutdown();
}

#[test]
fn producer_fixed_rate_is_paced() {
    let echo = EchoServer::start("127.0.0.1:0", 4).expect("echo");
    let a = args(
        &echo,
        &[
            "producer",
            "-t",
            "SmokeRate",
            "-w",
            "2",
            "-r",
            "400",
            "-d",
            "1",
        ],
    );
    let outcome = kinds::run_producer(&a).expect("runs");
    let send = result(&outcome, "send");
    // 400/s for 1 s: the schedule allows ~400; never much more.
    assert!(
        (250..=420).contains(&send.messages),
        "sent {}",
        send.messages
    );
    echo.shutdown();
}

#[test]
fn consumer_reads_everything_sent_and_commits() {
    let echo = EchoServer::start("127.0.0.1:0", 4).expect("echo");
    let fill = args(
        &echo,
        &[
            "producer", "-t", "SmokeC", "-w", "2", "-q", "300", "-s", "64",
        ],
    );
    assert_eq!(
        result(&kinds::run_producer(&fill).expect("fills"), "send").messages,
        300
    );
    let consume = args(
        &echo,
        &[
            "consumer", "-t", "SmokeC", "-g", "cg1", "--from", "first", "-q", "300", "-d", "20",
        ],
    );
    let outcome = kinds::run_consumer(&consume).expect("consumes");
    assert_eq!(outcome.error, None);
    let consumed = result(&outcome, "consume");
    assert_eq!(consumed.messages, 300);
    assert_eq!(consumed.bytes, 300 * 64);
    assert_eq!(consumed.histogram.len(), 300);
    // The group committed its offsets: a second run from "first" starts at the end.
    let again = args(
        &echo,
        &[
            "consumer", "-t", "SmokeC", "-g", "cg1", "--from", "first", "-d", "1",
        ],
    );
    let outcome = kinds::run_consumer(&again).expect("consumes");
    assert_eq!(result(&outcome, "consume").messages, 0);
    echo.shutdown();
}

#[test]
fn consumer_tag_filter_drops_other_tags() {
    // Two queues and two tags sent round robin: queue 0 only ever sees tag0, queue 1 only
    // tag1 (the echo server's records carry the last properties sent to their queue).
    let echo = EchoServer::start("127.0.0.1:0", 2).expect("echo");
    let fill = args(
        &echo,
        &[
            "producer", "-t", "SmokeTag", "-w", "1", "-q", "100", "-l", "2",
        ],
    );
    kinds::run_producer(&fill).expect("fills");
    let consume = args(
        &echo,
        &[
            "consumer",
            "-t",
            "SmokeTag",
            "-g",
            "cgt",
            "--from",
            "first",
            "-e",
            "tag1 || tagX",
            "-d",
            "1",
        ],
    );
    let outcome = kinds::run_consumer(&consume).expect("consumes");
    // The echo server does not filter: the client-side re-check keeps tag1 only.
    assert_eq!(result(&outcome, "consume").messages, 50);
    assert_eq!(outcome.extra["filtered_by_client"], 50);
    assert_eq!(outcome.extra["offsets_advanced"], 100);
    echo.shutdown();
}

#[test]
fn e2e_consumes_what_it_sends_at_a_fixed_rate() {
    let echo = EchoServer::start("127.0.0.1:0", 4).expect("echo");
    let a = args(
        &echo,
        &[
            "e2e", "-t", "SmokeE", "--topics", "2", "-w", "2", "-r", "500", "-d", "1", "-s", "256",
        ],
    );
    let outcome = kinds::run_e2e(&a).expect("runs");
    assert_eq!(outcome.error, None);
    let sent = result(&outcome, "send").messages;
    let consumed = result(&outcome, "e2e");
    assert!(sent >= 250, "sent {sent}");
    assert_eq!(consumed.messages, sent);
    assert_eq!(consumed.histogram.len(), sent);
    // Loopback through an echo server: end-to-end well under a second.
    assert!(consumed.histogram.value_at_quantile(0.5) < 1_000_000);
    assert_eq!(outcome.extra["publish_queues"], 8);
    echo.shutdown();
}

#[test]
fn catchup_fills_and_drains_the_backlog_then_drains_it_again_warm() {
    let echo = EchoServer::start("127.0.0.1:0", 4).expect("echo");
    let a = args(
        &echo,
        &[
            "catchup",
            "-t",
            "SmokeK",
            "-w",
            "2",
            "-y",
            "true",
            "-s",
            "100",
            "--backlog-bytes",
            "200000",
            "-d",
            "20",
            "--warm-pass",
            "true",
        ],
    );
    let outcome = kinds::run_catchup(&a).expect("runs");
    assert_eq!(outcome.error, None);
    assert_eq!(result(&outcome, "fill").messages, 2000);
    assert_eq!(result(&outcome, "catchup").messages, 2000);
    assert_eq!(outcome.extra["complete"], true);
    assert_eq!(outcome.extra["backlog_messages"], 2000);
    // The warm pass consumes the same backlog again, with a group of its own.
    assert_eq!(result(&outcome, "catchup_warm").messages, 2000);
    assert_eq!(outcome.extra["warm"]["complete"], true);
    assert_ne!(outcome.extra["warm"]["group"], outcome.extra["group"]);
    echo.shutdown();
}

#[test]
fn non_loopback_name_server_is_refused() {
    let a = match parse(["producer", "-n", "192.0.2.1:9876", "--progress", "false"]).expect("args")
    {
        Parsed::Run(a) => *a,
        Parsed::Help => panic!("help"),
    };
    assert!(matches!(
        kinds::run_producer(&a),
        Err(crate::error::BenchError::NotLoopback { .. })
    ));
}
