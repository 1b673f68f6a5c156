//! The benchmark kinds: how each one sets up, runs under the progress loop, and ends.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::args::{Args, StartFrom};
use crate::client::{Connection, ConnectionPool, QueueAddr};
use crate::consumer::{
    self, ConsumerConfig, ConsumerCtx, LatencyMode, StartPolicy, Subscription, HEARTBEAT_INTERVAL,
};
use crate::echo::EchoServer;
use crate::error::BenchError;
use crate::procstat::{self, BrokerCpu};
use crate::producer::{self, MessageFactory, SendPlan};
use crate::report::MeterResult;
use crate::stats::{Meter, Progress, TimelinePoint};

/// Control loop period: delayed pulls, completion checks.
pub const CONTROL_TICK: Duration = Duration::from_millis(10);
/// Progress line period.
pub const PROGRESS_INTERVAL: Duration = Duration::from_secs(1);
/// e2e: how long consumers may keep draining after the producers stop.
pub const E2E_DRAIN_WAIT: Duration = Duration::from_secs(5);
/// e2e: pause between starting the pulls and starting the producers, so the first pulls are
/// parked at the broker.
pub const E2E_SETTLE: Duration = Duration::from_millis(300);

/// What a run produced.
pub struct Outcome {
    pub results: Vec<MeterResult>,
    pub timeline: Vec<TimelinePoint>,
    pub extra: Value,
    pub error: Option<String>,
}

/// Runs `step` every [`CONTROL_TICK`] and the progress line every second until `duration`
/// passes, `stop` is set, or `step` returns true.
fn control_loop(
    progress: &mut Progress,
    duration: Duration,
    stop: &AtomicBool,
    mut step: impl FnMut() -> bool,
) {
    let mut next_progress = Instant::now() + PROGRESS_INTERVAL;
    let end = Instant::now() + duration;
    loop {
        if step() || stop.load(Ordering::Relaxed) {
            break;
        }
        let now = Instant::now();
        if now >= next_progress {
            progress.tick();
            next_progress += PROGRESS_INTERVAL;
        }
        if now >= end {
            break;
        }
        std::thread::sleep(CONTROL_TICK.min(end.saturating_duration_since(now)));
    }
}

fn take_fatal(fatal: &Mutex<Option<String>>) -> Option<String> {
    fatal.lock().unwrap_or_else(|e| e.into_inner()).take()
}

fn duration(args: &Args) -> Duration {
    Duration::from_secs(args.duration_s)
}

/// The consumer side of a run: `args`' subscription, batch size and commit choice for `group`.
fn consumer_ctx(
    args: &Args,
    group: String,
    latency: LatencyMode,
    meter: &Arc<Meter>,
    stop: &Arc<AtomicBool>,
    fatal: &Arc<Mutex<Option<String>>>,
) -> Arc<ConsumerCtx> {
    ConsumerCtx::new(
        ConsumerConfig {
            group,
            subscription: Subscription::new(args.filter_type, &args.expression),
            pull_batch: args.pull_batch,
            commit: args.commit,
            latency,
        },
        Arc::clone(meter),
        Arc::clone(stop),
        Arc::clone(fatal),
    )
}

/// `producer`.
pub fn run_producer(args: &Args) -> Result<Outcome, BenchError> {
    let namesrv = Connection::connect(&args.namesrv, args.serialize)?;
    let pool = Arc::new(ConnectionPool::new(args.serialize, args.connections));
    let factory = Arc::new(MessageFactory::new(args));
    let topics = args.topic_names();
    let (queues, missing) =
        producer::resolve_publish_queues(&namesrv, &topics, args.queues_per_topic)?;
    namesrv.close();
    let meter = Meter::new("send");
    let stop = Arc::new(AtomicBool::new(false));
    let fatal = Arc::new(Mutex::new(None));
    let mut progress = Progress::new(vec![Arc::clone(&meter)], args.progress);
    let running = producer::start(SendPlan::from_args(
        args,
        queues.clone(),
        &pool,
        factory,
        &meter,
        &stop,
        &fatal,
    ))?;
    progress.reset();
    control_loop(&mut progress, duration(args), &stop, || running.finished());
    stop.store(true, Ordering::Relaxed);
    running.join();
    let elapsed = progress.elapsed();
    pool.close_all();
    Ok(Outcome {
        results: vec![MeterResult::from_meter(&meter, elapsed)],
        timeline: progress.timeline,
        extra: json!({"queues": queues.len(), "auto_created_topics": missing.len()}),
        error: take_fatal(&fatal),
    })
}

/// `consumer`.
pub fn run_consumer(args: &Args) -> Result<Outcome, BenchError> {
    let namesrv = Connection::connect(&args.namesrv, args.serialize)?;
    let topics = args.topic_names();
    let queues = consumer::resolve_read_queues(&namesrv, &topics)?;
    namesrv.close();
    let pool = ConnectionPool::new(args.serialize, args.connections);
    let meter = Meter::new("consume");
    let stop = Arc::new(AtomicBool::new(false));
    let fatal = Arc::new(Mutex::new(None));
    let ctx = consumer_ctx(
        args,
        args.group.clone(),
        LatencyMode::FromBorn,
        &meter,
        &stop,
        &fatal,
    );
    let queue_count = queues.len();
    consumer::prepare(
        &ctx,
        &pool,
        &topics,
        queues,
        StartPolicy::Committed(args.from),
        args.from,
    )?;
    let mut progress = Progress::new(vec![Arc::clone(&meter)], args.progress);
    consumer::start_pulls(&ctx);
    let mut heartbeats = Heartbeats::new(&pool, &topics, args.from);
    control_loop(&mut progress, duration(args), &stop, || {
        ctx.run_delayed();
        heartbeats.tick(&ctx);
        args.count > 0 && meter.counts().messages >= args.count
    });
    let elapsed = progress.elapsed();
    consumer::finish(&ctx, &pool);
    Ok(Outcome {
        results: vec![MeterResult::from_meter(&meter, elapsed)],
        timeline: progress.timeline,
        extra: json!({
            "queues": queue_count,
            "filtered_by_client": ctx.filtered(),
            "pull_requests": ctx.pull_counts().0,
            "empty_pulls": ctx.pull_counts().1,
            "offsets_advanced": ctx.advanced(),
            "offset_gaps": ctx.gaps(),
        }),
        error: take_fatal(&fatal),
    })
}

/// Repeats the consumer heartbeat every [`HEARTBEAT_INTERVAL`], as Java clients do: brokers
/// drop consumer channels that stay silent for 120 s (`channelExpiredTimeout`).
struct Heartbeats<'a> {
    last: Instant,
    pool: &'a ConnectionPool,
    topics: &'a [String],
    from: StartFrom,
}

impl<'a> Heartbeats<'a> {
    fn new(pool: &'a ConnectionPool, topics: &'a [String], from: StartFrom) -> Self {
        Heartbeats {
            last: Instant::now(),
            pool,
            topics,
            from,
        }
    }

    fn tick(&mut self, ctx: &ConsumerCtx) {
        if self.last.elapsed() < HEARTBEAT_INTERVAL {
            return;
        }
        self.last = Instant::now();
        let tasks = ctx.tasks.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let mut brokers: Vec<&str> = tasks.iter().map(|t| t.queue.broker_addr.as_str()).collect();
        brokers.sort_unstable();
        brokers.dedup();
        for addr in brokers {
            if let Ok(conns) = self.pool.all(addr) {
                let sent = consumer::heartbeat(
                    &conns[0],
                    &ctx.group,
                    self.topics,
                    &ctx.subscription,
                    self.from,
                );
                if let Err(error) = sent {
                    ctx.meter.fail(|| format!("heartbeat: {error}"));
                }
            }
        }
    }
}

/// `e2e`: producers at a fixed rate plus consumers; latency = consume time − intended send
/// time stamped in the message.
pub fn run_e2e(args: &Args) -> Result<Outcome, BenchError> {
    let namesrv = Connection::connect(&args.namesrv, args.serialize)?;
    let topics = args.topic_names();
    let send_pool = Arc::new(ConnectionPool::new(args.serialize, args.connections));
    let pull_pool = ConnectionPool::new(args.serialize, args.connections);
    let factory = Arc::new(MessageFactory::new(args));
    let publish = producer::ensure_topics(
        &namesrv,
        &send_pool,
        &factory,
        &topics,
        args.queues_per_topic,
        args.send_timeout_ms,
    )?;
    let read_queues = consumer::resolve_read_queues(&namesrv, &topics)?;
    namesrv.close();

    let send_meter = Meter::new("send");
    let e2e_meter = Meter::new("e2e");
    let producer_stop = Arc::new(AtomicBool::new(false));
    let consumer_stop = Arc::new(AtomicBool::new(false));
    let fatal = Arc::new(Mutex::new(None));
    let read_count = read_queues.len();
    let ctx = consumer_ctx(
        args,
        args.group.clone(),
        LatencyMode::FromBorn,
        &e2e_meter,
        &consumer_stop,
        &fatal,
    );
    start_e2e_pulls(&ctx, &pull_pool, &topics, read_queues)?;

    let mut progress = Progress::new(
        vec![Arc::clone(&send_meter), Arc::clone(&e2e_meter)],
        args.progress,
    );
    let running = producer::start(SendPlan::from_args(
        args,
        publish.clone(),
        &send_pool,
        factory,
        &send_meter,
        &producer_stop,
        &fatal,
    ))?;
    progress.reset();
    let mut heartbeats = Heartbeats::new(&pull_pool, &topics, StartFrom::Last);
    control_loop(&mut progress, duration(args), &consumer_stop, || {
        ctx.run_delayed();
        heartbeats.tick(&ctx);
        running.finished() || producer_stop.load(Ordering::Relaxed)
    });
    producer_stop.store(true, Ordering::Relaxed);
    running.join();
    let send_elapsed = progress.elapsed();
    let sent = send_meter.counts().messages;
    // The e2e window ends with the last message consumed (not with the drain timeout).
    let e2e_elapsed = send_elapsed + drain(&mut progress, &ctx, &consumer_stop, sent);
    consumer::finish(&ctx, &pull_pool);
    send_pool.close_all();
    let consumed = e2e_meter.counts().messages;
    Ok(Outcome {
        results: vec![
            MeterResult::from_meter(&send_meter, send_elapsed),
            MeterResult::from_meter(&e2e_meter, e2e_elapsed),
        ],
        timeline: progress.timeline,
        extra: json!({
            "publish_queues": publish.len(),
            "read_queues": read_count,
            "sent": sent,
            "consumed": consumed,
            "not_consumed": sent.saturating_sub(consumed),
            "filtered_by_client": ctx.filtered(),
            "pull_requests": ctx.pull_counts().0,
            "empty_pulls": ctx.pull_counts().1,
            "offsets_advanced": ctx.advanced(),
            "offset_gaps": ctx.gaps(),
            "target_rate": args.rate,
            "sides": ctx.sides.to_json(),
        }),
        error: take_fatal(&fatal),
    })
}

/// Starts pulling every queue from its current end, then waits [`E2E_SETTLE`] so the first
/// pulls are parked at the broker before the producers start.
fn start_e2e_pulls(
    ctx: &Arc<ConsumerCtx>,
    pull_pool: &ConnectionPool,
    topics: &[String],
    read_queues: Vec<QueueAddr>,
) -> Result<(), BenchError> {
    consumer::prepare(
        ctx,
        pull_pool,
        topics,
        read_queues,
        StartPolicy::Latest,
        StartFrom::Last,
    )?;
    consumer::start_pulls(ctx);
    std::thread::sleep(E2E_SETTLE);
    Ok(())
}

/// Lets the consumers take what was `sent` (bounded by [`E2E_DRAIN_WAIT`]). Returns when, after
/// the drain started, the consumed count last changed.
fn drain(
    progress: &mut Progress,
    ctx: &Arc<ConsumerCtx>,
    consumer_stop: &AtomicBool,
    sent: u64,
) -> Duration {
    let drain_start = Instant::now();
    let mut last_count = ctx.meter.counts().messages;
    let mut last_change = Duration::ZERO;
    control_loop(progress, E2E_DRAIN_WAIT, consumer_stop, || {
        ctx.run_delayed();
        let count = ctx.meter.counts().messages;
        if count != last_count {
            last_count = count;
            last_change = drain_start.elapsed();
        }
        count >= sent
    });
    last_change
}

/// `catchup`: pre-fill a backlog (unless `--skip-fill`), then consume it from the first offset
/// as fast as possible with a fresh group. With `--broker-pid`, the broker's CPU time is sampled
/// right before the first pull and right after the last response (the fill is not counted).
pub fn run_catchup(args: &Args) -> Result<Outcome, BenchError> {
    if let Some(pid) = args.broker_pid {
        // Fail before a long fill, not after it.
        procstat::read_stat(pid)?;
    }
    let namesrv = Connection::connect(&args.namesrv, args.serialize)?;
    let topics = args.topic_names();
    let fatal = Arc::new(Mutex::new(None));
    let mut results = Vec::new();
    let mut fill_extra = Value::Null;
    if !args.skip_fill {
        let fill = fill_backlog(args, &namesrv, &topics, &fatal)?;
        results.push(fill.result);
        fill_extra = fill.extra;
        if let Some(error) = take_fatal(&fatal) {
            return Ok(Outcome {
                results,
                timeline: fill.timeline,
                extra: json!({"fill": fill_extra}),
                error: Some(error),
            });
        }
    }
    // A fresh connection: name servers close idle connections (Java after 120 s), and the
    // pre-fill may have taken longer than that.
    namesrv.close();
    let consume = consume_backlog(args, &topics, &fatal, fill_extra, "catchup")?;
    results.push(consume.result);
    let mut extra = consume.extra;
    let mut error = consume.error;
    // A failed warm pass is the report's error, with the first pass's figures kept. The
    // timeline (and the SVG) is the first pass's.
    if args.warm_pass && error.is_none() {
        error = warm_pass_blocker(&extra);
        if error.is_none() {
            match consume_backlog(args, &topics, &fatal, Value::Null, "catchup_warm") {
                Ok(warm) => {
                    results.push(warm.result);
                    extra["warm"] = warm.extra;
                    error = warm.error;
                }
                Err(e) => error = Some(format!("warm pass: {e}")),
            }
        }
    }
    Ok(Outcome {
        results,
        timeline: consume.timeline,
        extra,
        error,
    })
}

/// Why the warm pass must not run after a first pass whose `extra` is `first_extra`: only a
/// pass that read the whole backlog leaves all of it in the page cache.
fn warm_pass_blocker(first_extra: &Value) -> Option<String> {
    (first_extra["complete"] != true)
        .then(|| "warm pass skipped: the first pass did not consume the whole backlog".to_owned())
}

/// One timed phase of a run that reports a single meter.
struct Phase {
    result: MeterResult,
    timeline: Vec<TimelinePoint>,
    extra: Value,
    error: Option<String>,
}

/// Sends `--backlog-bytes` worth of messages as fast as possible, for at most
/// `--fill-duration`. A fatal send error is left in `fatal`.
fn fill_backlog(
    args: &Args,
    namesrv: &Connection,
    topics: &[String],
    fatal: &Arc<Mutex<Option<String>>>,
) -> Result<Phase, BenchError> {
    let pool = Arc::new(ConnectionPool::new(args.serialize, args.connections));
    let factory = Arc::new(MessageFactory::new(args));
    let publish = producer::ensure_topics(
        namesrv,
        &pool,
        &factory,
        topics,
        args.queues_per_topic,
        args.send_timeout_ms,
    )?;
    let count = args.backlog_bytes.div_ceil(args.body_size_bytes as u64);
    let meter = Meter::new("fill");
    let stop = Arc::new(AtomicBool::new(false));
    let mut progress = Progress::new(vec![Arc::clone(&meter)], args.progress);
    // The fill sends the whole backlog as fast as it can.
    let running = producer::start(SendPlan {
        count,
        rate: 0,
        ..SendPlan::from_args(args, publish, &pool, factory, &meter, &stop, fatal)
    })?;
    progress.reset();
    control_loop(
        &mut progress,
        Duration::from_secs(args.fill_duration_s),
        &stop,
        || running.finished(),
    );
    stop.store(true, Ordering::Relaxed);
    running.join();
    let elapsed = progress.elapsed();
    pool.close_all();
    let result = MeterResult::from_meter(&meter, elapsed);
    let extra = json!({"target_messages": count, "complete": result.messages >= count});
    Ok(Phase {
        result,
        timeline: progress.timeline,
        extra,
        error: None,
    })
}

/// Consumes every queue of `topics` from its first offset to the end it had when the run
/// started, with a fresh group, sampling the broker's CPU around it if asked to; measured by
/// the meter `meter_name`.
fn consume_backlog(
    args: &Args,
    topics: &[String],
    fatal: &Arc<Mutex<Option<String>>>,
    fill_extra: Value,
    meter_name: &'static str,
) -> Result<Phase, BenchError> {
    let namesrv = Connection::connect(&args.namesrv, args.serialize)?;
    let queues = consumer::resolve_read_queues(&namesrv, topics)?;
    namesrv.close();
    let group = format!(
        "{}_{meter_name}_{}",
        args.group,
        crate::stats::epoch_us() / 1000
    );
    let pool = ConnectionPool::new(args.serialize, args.connections);
    let meter = Meter::new(meter_name);
    let stop = Arc::new(AtomicBool::new(false));
    let ctx = consumer_ctx(
        args,
        group.clone(),
        LatencyMode::PullRoundTrip,
        &meter,
        &stop,
        fatal,
    );
    let queue_count = queues.len();
    consumer::prepare(
        &ctx,
        &pool,
        topics,
        queues,
        StartPolicy::BacklogToEnd,
        StartFrom::First,
    )?;
    let backlog_messages = backlog_messages(&ctx);
    let mut progress = Progress::new(vec![Arc::clone(&meter)], args.progress);
    let broker_cpu = args.broker_pid.map(BrokerCpu::start).transpose()?;
    consumer::start_pulls(&ctx);
    let mut heartbeats = Heartbeats::new(&pool, topics, StartFrom::First);
    control_loop(&mut progress, duration(args), &stop, || {
        ctx.run_delayed();
        heartbeats.tick(&ctx);
        ctx.all_done()
    });
    let elapsed = progress.elapsed();
    let complete = ctx.all_done();
    // Sampled before the final offset commits: only the consume phase is counted.
    let broker_cpu = broker_cpu
        .map(|cpu| cpu.finish(ctx.record_bytes(), meter.counts().bytes))
        .transpose();
    consumer::finish(&ctx, &pool);
    let result = MeterResult::from_meter(&meter, elapsed);
    let mut error = take_fatal(fatal);
    let mut extra = json!({
            "group": group,
            "queues": queue_count,
            "backlog_messages": backlog_messages,
            "complete": complete,
            "pull_requests": ctx.pull_counts().0,
            "empty_pulls": ctx.pull_counts().1,
            "offsets_advanced": ctx.advanced(),
            "offset_gaps": ctx.gaps(),
            "fill": fill_extra,
            "latency_meaning": "pull round trip of each non-empty batch",
    });
    add_broker_cpu(&mut extra, &mut error, broker_cpu);
    Ok(Phase {
        result,
        timeline: progress.timeline,
        extra,
        error,
    })
}

/// Messages between each queue's start and end offset.
fn backlog_messages(ctx: &ConsumerCtx) -> i64 {
    ctx.tasks
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|t| t.end_offset().unwrap_or(0) - t.next_offset())
        .sum()
}

/// Prints the broker's CPU use and adds it to the report; a broker that went away during the
/// run keeps the report and says why the CPU is missing.
fn add_broker_cpu(
    extra: &mut Value,
    error: &mut Option<String>,
    broker_cpu: Result<Option<procstat::BrokerCpuUse>, BenchError>,
) {
    match broker_cpu {
        Ok(None) => {}
        Ok(Some(cpu)) => {
            println!("{}", cpu.summary());
            if let (Value::Object(extra), Value::Object(fields)) = (extra, cpu.to_json()) {
                extra.extend(fields);
            }
        }
        Err(e) => *error = error.take().or(Some(e.to_string())),
    }
}

/// `echo-server`: serves until the duration ends (600 s unless `-d` says otherwise).
pub fn run_echo(args: &Args) -> Result<(), BenchError> {
    let threads = match args.echo_model {
        crate::echo_workers::EchoModel::Pool => Some(args.echo_threads),
        crate::echo_workers::EchoModel::PerConnection => None,
    };
    let server = EchoServer::start_with(&args.listen, args.echo_queues, threads)?;
    // Scripts wait for this line to learn the port.
    println!(
        "ringmq-bench echo-server listening on {}",
        server.local_addr()
    );
    match threads {
        Some(n) => eprintln!(
            "ringmq-bench echo-server listening on {} (a pool of {n} worker threads)",
            server.local_addr()
        ),
        None => eprintln!(
            "ringmq-bench echo-server listening on {} (two threads per connection)",
            server.local_addr()
        ),
    }
    std::thread::sleep(duration(args));
    server.shutdown();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_warm_pass_runs_only_after_a_complete_first_pass() {
        assert_eq!(warm_pass_blocker(&json!({"complete": true})), None);
        for first in [json!({"complete": false}), json!({})] {
            let reason = warm_pass_blocker(&first).expect("skipped");
            assert!(reason.contains("did not consume"), "{reason}");
        }
    }
}
