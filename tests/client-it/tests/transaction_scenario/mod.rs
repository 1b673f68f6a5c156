//! The transaction scenarios of `transaction.rs` (JSON headers) and
//! `transaction_binary_headers.rs`. Transactional messages with rocketmq-client-rust's
//! `TransactionMQProducer`: a commit is
//! delivered once, a rollback never, an unknown state is checked back by the broker
//! (CHECK_TRANSACTION_STATE) and the listener's commit then delivers it, and a broker restart
//! between the half message and its end still delivers on commit.
//!
//! The broker checks back every 2 s after a 2 s timeout (ringmq's RINGMQ_BROKER_TRANSACTION_*
//! settings): 15 checks outlast the producer's 10 s heartbeat period, so a check finds the
//! producer's connection before the message is set aside. An external broker keeps its own
//! settings, so the waits allow for its default check interval.

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use rocketmq_client_rust::{
    ClientConfig, ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, LocalTransactionState,
    SendStatus, TransactionListener, TransactionMQProducer,
};
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_single::Message;
use rocketmq_model::common::message::MessageTrait;

use ringmq_client_it::{
    shutdown_producer, shutdown_push_consumer, start_producer_with_topic, start_push_consumer,
    unique_name, ClientEnv, TestBroker,
};

pub const BROKER_ENV: &[(&str, &str)] = &[
    ("RINGMQ_BROKER_TRANSACTION_CHECK_INTERVAL_MS", "2000"),
    ("RINGMQ_BROKER_TRANSACTION_TIMEOUT_MS", "2000"),
];
/// Messages of each kind (commit, rollback, unknown then commit).
const PER_KIND: usize = 5;
/// Bound on a delivery, allowing for a check-back (an external broker checks every 30-60 s).
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(150);
/// After everything arrived, keep consuming this long to catch duplicates and rollbacks.
const GRACE: Duration = Duration::from_secs(4);
pub const TEST_TIMEOUT: Duration = Duration::from_secs(400);
const SEND_TIMEOUT_MS: u32 = 5000;
/// The shortest heartbeat period the client accepts.
const PRODUCER_HEARTBEAT_INTERVAL_MS: u32 = 10_000;

/// The local transaction's outcome is the body's first word: `commit`, `rollback`, `unknown`
/// (checked back: then committed) or `wait` (blocks until released, then commits).
#[derive(Default)]
struct Listener {
    /// Bodies checked back, with how often.
    checked: Mutex<BTreeMap<String, u32>>,
    gate: (Mutex<bool>, Condvar),
}

impl Listener {
    fn release(&self) {
        *self.gate.0.lock().unwrap() = true;
        self.gate.1.notify_all();
    }

    fn checked(&self) -> BTreeMap<String, u32> {
        self.checked.lock().unwrap().clone()
    }
}

fn body_text<B: AsRef<[u8]>>(body: Option<B>) -> String {
    body.map(|b| String::from_utf8_lossy(b.as_ref()).into_owned())
        .unwrap_or_default()
}

struct SharedListener(Arc<Listener>);

impl TransactionListener for SharedListener {
    fn execute_local_transaction(
        &self,
        msg: &dyn MessageTrait,
        _arg: Option<&(dyn Any + Send + Sync)>,
    ) -> LocalTransactionState {
        let body = body_text(msg.get_body());
        match body.split(':').next() {
            Some("commit") => LocalTransactionState::CommitMessage,
            Some("rollback") => LocalTransactionState::RollbackMessage,
            Some("wait") => {
                let (lock, cvar) = &self.0.gate;
                let released = cvar
                    .wait_timeout_while(lock.lock().unwrap(), Duration::from_secs(120), |r| !*r)
                    .unwrap();
                assert!(*released.0, "never released");
                LocalTransactionState::CommitMessage
            }
            _ => LocalTransactionState::Unknown,
        }
    }

    fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState {
        let body = body_text(msg.get_body());
        *self
            .0
            .checked
            .lock()
            .unwrap()
            .entry(body.clone())
            .or_default() += 1;
        if body.starts_with("rollback") {
            LocalTransactionState::RollbackMessage
        } else {
            LocalTransactionState::CommitMessage
        }
    }
}

/// Bodies a push consumer received, with how often.
type Deliveries = Arc<Mutex<BTreeMap<String, u32>>>;

async fn start_consumer(
    env: &ClientEnv,
    namesrv: &str,
    topic: &str,
) -> (rocketmq_client_rust::DefaultMQPushConsumer, Deliveries) {
    let deliveries: Deliveries = Arc::default();
    let log = Arc::clone(&deliveries);
    let listener = move |msgs: &[&MessageExt], _cx: &ConsumeConcurrentlyContext| {
        for msg in msgs {
            *log.lock()
                .unwrap()
                .entry(body_text(msg.get_body()))
                .or_default() += 1;
        }
        Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
    };
    let consumer = start_push_consumer(env, namesrv, &unique_name("it_tx_cg"), topic, listener)
        .await
        .expect("start push consumer");
    (consumer, deliveries)
}

async fn start_transaction_producer(
    env: &ClientEnv,
    namesrv: &str,
    listener: &Arc<Listener>,
) -> TransactionMQProducer {
    // Heartbeats every 10 s, so the broker knows the producer's connection (the one it checks
    // back on) soon after the first send, and again soon after a broker restart.
    let mut config = ClientConfig::new();
    config.set_heartbeat_broker_interval(PRODUCER_HEARTBEAT_INTERVAL_MS);
    let mut producer = TransactionMQProducer::builder(env.runtime())
        .client_config(config)
        .producer_group(unique_name("it_tx_pg"))
        .name_server_addr(namesrv.to_string())
        .send_msg_timeout(SEND_TIMEOUT_MS)
        .transaction_listener(SharedListener(Arc::clone(listener)))
        .build();
    producer.start().await.expect("start transaction producer");
    producer
}

/// Creates `topic` through a plain producer (the transaction producer has no admin calls).
async fn create_topic(env: &ClientEnv, namesrv: &str, topic: &str) {
    let producer = start_producer_with_topic(env, namesrv, topic).await;
    shutdown_producer(producer).await;
}

fn message(topic: &str, body: &str) -> Message {
    Message::builder()
        .topic(topic)
        .tags("TagTx")
        .body(body.as_bytes().to_vec())
        .build_unchecked()
}

async fn send(producer: &TransactionMQProducer, topic: &str, body: &str) -> LocalTransactionState {
    let result = producer
        .send_message_in_transaction::<(), _>(message(topic, body), None)
        .await
        .unwrap_or_else(|e| panic!("send {body}: {e}"));
    let send_result = result.send_result.expect("send result");
    assert_eq!(send_result.send_status, SendStatus::SendOk, "{body}");
    result.local_transaction_state.expect("local state")
}

/// Waits until `deliveries` holds every body of `expected`.
async fn wait_delivered(deliveries: &Deliveries, expected: &BTreeSet<String>) {
    let deadline = Instant::now() + DELIVERY_TIMEOUT;
    loop {
        let got: BTreeSet<String> = deliveries.lock().unwrap().keys().cloned().collect();
        if expected.is_subset(&got) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "missing {:?}",
            expected.difference(&got).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub async fn commit_rollback_unknown(namesrv: String) {
    let env = ClientEnv::new("transaction").expect("client runtime");
    let topic = unique_name("it_tx");
    create_topic(&env, &namesrv, &topic).await;
    let (consumer, deliveries) = start_consumer(&env, &namesrv, &topic).await;
    let listener = Arc::new(Listener::default());
    let mut producer = start_transaction_producer(&env, &namesrv, &listener).await;
    let kinds = [
        ("commit", LocalTransactionState::CommitMessage),
        ("rollback", LocalTransactionState::RollbackMessage),
        ("unknown", LocalTransactionState::Unknown),
    ];
    let mut bodies: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for i in 0..PER_KIND {
        for (kind, state) in kinds {
            let body = format!("{kind}:{i}");
            assert_eq!(send(&producer, &topic, &body).await, state, "{body}");
            bodies.entry(kind).or_default().insert(body);
        }
    }
    let expected: BTreeSet<String> = bodies["commit"]
        .union(&bodies["unknown"])
        .cloned()
        .collect();
    wait_delivered(&deliveries, &expected).await;
    tokio::time::sleep(GRACE).await;
    let got = deliveries.lock().unwrap().clone();
    let delivered: BTreeSet<String> = got.keys().cloned().collect();
    assert_eq!(
        delivered, expected,
        "rolled-back messages must never arrive"
    );
    assert!(
        got.values().all(|n| *n == 1),
        "delivered more than once: {got:?}"
    );
    let checked: BTreeSet<String> = listener.checked().keys().cloned().collect();
    assert_eq!(
        checked, bodies["unknown"],
        "only the unknown transactions are checked back"
    );
    shutdown_push_consumer(consumer).await;
    producer.shutdown().await;
    env.shutdown().await;
}

pub async fn restart_between_half_and_end(broker: &mut TestBroker, namesrv: String) {
    let env = ClientEnv::new("transaction-restart").expect("client runtime");
    let topic = unique_name("it_tx_restart");
    create_topic(&env, &namesrv, &topic).await;
    let listener = Arc::new(Listener::default());
    let mut producer = start_transaction_producer(&env, &namesrv, &listener).await;

    // The end comes after the restart: the local transaction waits for it.
    let producer_ref = &producer;
    let waiting = send(producer_ref, &topic, "wait:0");
    let restart = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        broker.restart().expect("restart the broker");
        listener.release();
    };
    let (state, ()) = tokio::join!(waiting, restart);
    assert_eq!(state, LocalTransactionState::CommitMessage);

    // An unknown state, then a restart: the check-back after it still commits.
    assert_eq!(
        send(&producer, &topic, "unknown:0").await,
        LocalTransactionState::Unknown
    );
    broker.restart().expect("restart the broker again");

    let (consumer, deliveries) = start_consumer(&env, &namesrv, &topic).await;
    let expected: BTreeSet<String> = ["wait:0", "unknown:0"].map(String::from).into();
    wait_delivered(&deliveries, &expected).await;
    tokio::time::sleep(GRACE).await;
    let got = deliveries.lock().unwrap().clone();
    assert_eq!(got.keys().cloned().collect::<BTreeSet<_>>(), expected);
    assert!(
        got.values().all(|n| *n == 1),
        "delivered more than once: {got:?}"
    );
    let checked: BTreeSet<String> = listener.checked().keys().cloned().collect();
    assert_eq!(
        checked,
        BTreeSet::from(["unknown:0".to_string()]),
        "the commit sent after the first restart ended its transaction without a check"
    );
    shutdown_push_consumer(consumer).await;
    producer.shutdown().await;
    env.shutdown().await;
}
