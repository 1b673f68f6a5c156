//! Orderly consumers (`MessageListenerOrderly`), which consume only queues they locked on the
//! broker with LOCK_BATCH_MQ (41) and give them back with UNLOCK_BATCH_MQ (42).
//!
//! One group, three phases, one log of every listener call (consumer, queue, seqs, start and
//! end time):
//! 1. consumer A alone gets every message of round 0;
//! 2. consumer B joins; round 1 is sent slowly while the group rebalances, and B must get
//!    some of it;
//! 3. A is shut down and a new member A2 starts; round 2 is sent slowly, and A2 must get
//!    some of it.
//!
//! Then: every message arrived, per queue in send order (a new holder may replay the few
//! messages its predecessor had not committed, never skip one), across the rebalance and the
//! restart, and no queue was ever in two consumers' listeners at once.

#![recursion_limit = "512"]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rocketmq_client_rust::{
    ClientResult, ConsumeOrderlyContext, ConsumeOrderlyStatus, DefaultMQProducer, SendStatus,
};
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_queue::MessageQueue;
use rocketmq_model::common::message::message_single::Message;

use ringmq_client_it::messages::build_message;
use ringmq_client_it::{
    check_message, run_bounded, shutdown_producer, shutdown_push_consumer,
    start_orderly_push_consumer, start_producer_with_topic, unique_name, wait_until, ClientEnv,
    TestBroker,
};

/// Messages per round (spread over the topic's queues by seq).
const ROUND: u64 = 200;
/// Bound on a round arriving, rebalances included (a client retries a refused lock at its
/// next rebalance, every 20 s).
const ROUND_TIMEOUT: Duration = Duration::from_secs(90);
const TEST_TIMEOUT: Duration = Duration::from_secs(360);
/// How long a listener call lasts at least, so that calls of two consumers on one queue would
/// overlap visibly if the locks let them.
const LISTENER_BUSY: Duration = Duration::from_millis(2);
const POLL: Duration = Duration::from_millis(100);
/// Most messages of one queue a new holder may consume again (see [`check_queue_order`]): the
/// client's consume batch is 1 message, so a handoff replays about one per rebalance.
const REPLAY_MAX: usize = 8;
/// Pause between the sends of rounds 1 and 2.
const SLOW_SEND_PAUSE: Duration = Duration::from_millis(150);

/// One listener call.
#[derive(Debug, Clone)]
struct Call {
    consumer: String,
    queue_id: i32,
    seqs: Vec<u64>,
    started: Instant,
    ended: Instant,
}

#[derive(Clone, Default)]
struct CallLog {
    calls: Arc<Mutex<Vec<Call>>>,
    problems: Arc<Mutex<Vec<String>>>,
}

impl CallLog {
    fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    fn received(&self) -> BTreeSet<u64> {
        let calls = self.calls.lock().unwrap();
        calls.iter().flat_map(|c| c.seqs.iter().copied()).collect()
    }

    fn consumed_by(&self, consumer: &str) -> usize {
        let calls = self.calls.lock().unwrap();
        calls.iter().filter(|c| c.consumer == consumer).count()
    }

    /// An orderly listener named `consumer` that records every call.
    fn listener(
        &self,
        consumer: &str,
        run: &str,
    ) -> impl Fn(&[&MessageExt], &mut ConsumeOrderlyContext) -> ClientResult<ConsumeOrderlyStatus>
           + Send
           + Sync
           + 'static {
        let (log, consumer, run) = (self.clone(), consumer.to_string(), run.to_string());
        move |msgs, ctx| {
            let started = Instant::now();
            let queue_id = ctx.get_message_queue().queue_id();
            let mut seqs = Vec::with_capacity(msgs.len());
            for msg in msgs {
                match check_message(msg, &run) {
                    Ok(seq) => seqs.push(seq),
                    Err(problem) => log.problems.lock().unwrap().push(problem),
                }
                if msg.queue_id() != queue_id {
                    let problem = format!(
                        "message of queue {} in a call for queue {queue_id}",
                        msg.queue_id()
                    );
                    log.problems.lock().unwrap().push(problem);
                }
            }
            std::thread::sleep(LISTENER_BUSY);
            let call = Call {
                consumer: consumer.clone(),
                queue_id,
                seqs,
                started,
                ended: Instant::now(),
            };
            log.calls.lock().unwrap().push(call);
            Ok(ConsumeOrderlyStatus::Success)
        }
    }
}

#[test]
fn orderly_consumers_keep_queue_order_through_rebalance_and_restart() {
    let broker = TestBroker::start(&[]).expect("start broker");
    let namesrv = broker.namesrv_addr();
    run_bounded(
        "orderly_consumers_keep_queue_order_through_rebalance_and_restart",
        TEST_TIMEOUT,
        three_phases(namesrv),
    );
    drop(broker);
}

async fn three_phases(namesrv: String) {
    let env = ClientEnv::new("orderly").expect("client runtime");
    let (topic, group, run) = (
        unique_name("it_orderly"),
        unique_name("it_orderly_cg"),
        unique_name("r"),
    );
    let producer = start_producer_with_topic(&env, &namesrv, &topic).await;
    let log = CallLog::default();
    let start = |name: &str| {
        start_orderly_push_consumer(&env, &namesrv, &group, &topic, log.listener(name, &run))
    };

    let a = start("A").await.expect("start consumer A");
    send_round(&producer, &topic, &run, 0).await;
    wait_for(&log, 0..ROUND, "round 0 (A alone)").await;

    let b = start("B").await.expect("start consumer B");
    send_round_slowly(&producer, &topic, &run, 1).await;
    wait_for(&log, 0..2 * ROUND, "round 1 (A and B)").await;
    assert!(log.consumed_by("B") > 0, "consumer B never got a queue");

    shutdown_push_consumer(a).await;
    let a2 = start("A2").await.expect("start consumer A2");
    send_round_slowly(&producer, &topic, &run, 2).await;
    wait_for(&log, 0..3 * ROUND, "round 2 (B and A2)").await;
    assert!(log.consumed_by("A2") > 0, "consumer A2 never got a queue");
    // Let late duplicates show.
    tokio::time::sleep(Duration::from_secs(2)).await;

    shutdown_push_consumer(a2).await;
    shutdown_push_consumer(b).await;
    shutdown_producer(producer).await;
    env.shutdown().await;

    let problems = log.problems.lock().unwrap().clone();
    assert!(problems.is_empty(), "bad messages: {problems:?}");
    check_queue_order(&log.calls());
    check_no_overlap(&log.calls());
}

/// Sends round `round` one message at a time (so send order is seq order), message `seq` to
/// queue `seq % queues`.
async fn send_round(producer: &DefaultMQProducer, topic: &str, run: &str, round: u64) {
    for seq in round * ROUND..(round + 1) * ROUND {
        send_one(producer, topic, run, seq).await;
    }
}

async fn send_one(producer: &DefaultMQProducer, topic: &str, run: &str, seq: u64) {
    let selector = |mqs: &[MessageQueue], _: &Message, seq: &u64| {
        let index = usize::try_from(*seq).ok()? % mqs.len().max(1);
        mqs.get(index).cloned()
    };
    let result = producer
        .send_with_selector(build_message(topic, run, seq), selector, seq)
        .await
        .unwrap_or_else(|e| panic!("send {seq}: {e}"))
        .unwrap_or_else(|| panic!("send {seq}: no result"));
    assert_eq!(result.send_status, SendStatus::SendOk, "send {seq}");
}

/// A round sent over about 30 s, longer than the clients' 20 s rebalance period, while a new
/// member's rebalance takes queues from the old ones: the old holder must unlock a queue
/// before the new member may lock it, and a refused lock is retried at the next rebalance.
async fn send_round_slowly(producer: &DefaultMQProducer, topic: &str, run: &str, round: u64) {
    for seq in round * ROUND..(round + 1) * ROUND {
        send_one(producer, topic, run, seq).await;
        tokio::time::sleep(SLOW_SEND_PAUSE).await;
    }
}

async fn wait_for(log: &CallLog, seqs: std::ops::Range<u64>, what: &str) {
    let arrived = wait_until(ROUND_TIMEOUT, POLL, || {
        let received = log.received();
        seqs.clone().all(|s| received.contains(&s))
    })
    .await;
    if !arrived {
        let received = log.received();
        let missing: Vec<u64> = seqs.filter(|s| !received.contains(s)).collect();
        panic!(
            "{what}: {} messages missing after {} s (first {:?})",
            missing.len(),
            ROUND_TIMEOUT.as_secs(),
            &missing[..missing.len().min(20)]
        );
    }
}

/// Per queue, in the order the listener calls started, each consumer's tenure (a run of calls
/// by one consumer) has strictly increasing seqs: the send order. A new holder may replay the
/// last few messages its predecessor consumed but had not committed (Java's orderly consumer
/// persists a queue's offset before waiting for the running call when it gives the queue up, so
/// RocketMQ promises order, not exactly once), but never skips one and never replays more than
/// [`REPLAY_MAX`].
fn check_queue_order(calls: &[Call]) {
    for (queue, calls) in by_queue(calls) {
        let all: BTreeSet<u64> = calls.iter().flat_map(|c| c.seqs.iter().copied()).collect();
        let mut max_so_far: Option<u64> = None;
        let mut replays = 0;
        for tenure in calls.chunk_by(|a, b| a.consumer == b.consumer) {
            let seqs: Vec<u64> = tenure.iter().flat_map(|c| c.seqs.iter().copied()).collect();
            let consumer = &tenure[0].consumer;
            assert!(
                seqs.windows(2).all(|w| w[0] < w[1]),
                "queue {queue}: consumer {consumer} out of order: {seqs:?}"
            );
            let (Some(&first), Some(max)) = (seqs.first(), max_so_far) else {
                max_so_far = seqs.last().copied().or(max_so_far);
                continue;
            };
            let next_unconsumed = all.range(max + 1..).next().copied();
            assert!(
                next_unconsumed.is_none_or(|next| first <= next),
                "queue {queue}: consumer {consumer} started at {first}, skipping {next_unconsumed:?}"
            );
            let replayed = seqs.iter().filter(|&&s| s <= max).count();
            if replayed > 0 {
                eprintln!("[client-it] queue {queue}: {consumer} replayed {replayed} message(s) from {first}");
            }
            replays += replayed;
            max_so_far = seqs.last().copied().max(max_so_far);
        }
        assert!(
            replays <= REPLAY_MAX,
            "queue {queue}: {replays} messages replayed"
        );
    }
}

/// The calls of each queue, in the order they started.
fn by_queue(calls: &[Call]) -> BTreeMap<i32, Vec<&Call>> {
    let mut by_queue: BTreeMap<i32, Vec<&Call>> = BTreeMap::new();
    for call in calls {
        by_queue.entry(call.queue_id).or_default().push(call);
    }
    for calls in by_queue.values_mut() {
        calls.sort_by_key(|c| c.started);
    }
    by_queue
}

/// No two consumers were ever in a listener call for the same queue at the same time.
fn check_no_overlap(calls: &[Call]) {
    for (queue, calls) in by_queue(calls) {
        for pair in calls.windows(2) {
            let (first, second) = (pair[0], pair[1]);
            assert!(
                second.started >= first.ended || first.consumer == second.consumer,
                "queue {queue} consumed by {} and {} at once",
                first.consumer,
                second.consumer
            );
        }
        let consumers: BTreeSet<&str> = calls.iter().map(|c| c.consumer.as_str()).collect();
        eprintln!("[client-it] queue {queue} consumed by {consumers:?}");
    }
}
