//! Test messages whose every field can be checked on receipt, and a log of deliveries.
//!
//! Message `seq` of a run carries: a body `"<run>:<seq>:"` followed by a length and bytes
//! derived from `seq` (all 256 byte values occur, so the body is binary), tag
//! `Tag<seq % 4>`, keys `key-<seq>` and `run-<run>`, and user properties `it_run`, `it_seq`
//! and `it_text` (non-ASCII text). [`check_message`] rebuilds the expectation from the seq in
//! the body and compares every field.

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;

use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_single::Message;

pub const PROP_RUN: &str = "it_run";
pub const PROP_SEQ: &str = "it_seq";
pub const PROP_TEXT: &str = "it_text";
/// Distinct tags used (`Tag0`..`Tag3`).
pub const TAG_COUNT: u64 = 4;
/// Bodies are the header plus 0..FILLER_MAX_BYTES filler bytes.
pub const FILLER_MAX_BYTES: u64 = 300;

pub fn expected_tag(seq: u64) -> String {
    format!("Tag{}", seq % TAG_COUNT)
}

pub fn expected_keys(run: &str, seq: u64) -> Vec<String> {
    vec![format!("key-{seq}"), format!("run-{run}")]
}

pub fn expected_text(seq: u64) -> String {
    format!("héllo wörld ✓ {seq}")
}

pub fn expected_body(run: &str, seq: u64) -> Vec<u8> {
    let mut body = format!("{run}:{seq}:").into_bytes();
    let filler = (seq.wrapping_mul(7919)) % FILLER_MAX_BYTES;
    body.extend((0..filler).map(|i| (seq.wrapping_add(i * 31) % 256) as u8));
    body
}

/// Builds message `seq` of run `run` for `topic`.
pub fn build_message(topic: &str, run: &str, seq: u64) -> Message {
    Message::builder()
        .topic(topic)
        .tags(expected_tag(seq))
        .keys(expected_keys(run, seq))
        .body(expected_body(run, seq))
        .raw_property(PROP_RUN, run)
        .and_then(|builder| builder.raw_property(PROP_SEQ, seq.to_string()))
        .and_then(|builder| builder.raw_property(PROP_TEXT, expected_text(seq)))
        .expect("it_* property names are not reserved by RocketMQ")
        .build_unchecked()
}

/// The seq encoded in a body of run `run`, if the body starts like one.
pub fn seq_of_body(run: &str, body: &[u8]) -> Option<u64> {
    let prefix = format!("{run}:");
    let rest = body.strip_prefix(prefix.as_bytes())?;
    let end = rest.iter().position(|&byte| byte == b':')?;
    std::str::from_utf8(&rest[..end]).ok()?.parse().ok()
}

/// Checks body, tags, keys and properties of a received message of run `run` against what
/// [`build_message`] sent; returns its seq, or a description of every mismatch.
pub fn check_message(msg: &MessageExt, run: &str) -> Result<u64, String> {
    let body = msg.body().map(|bytes| bytes.to_vec()).unwrap_or_default();
    let seq = seq_of_body(run, &body).ok_or_else(|| {
        format!(
            "body of msg {} does not start with {run:?}:<seq>: ({} bytes: {:?})",
            msg.msg_id(),
            body.len(),
            String::from_utf8_lossy(&body[..body.len().min(64)])
        )
    })?;
    let inner = msg.message_inner();
    let mut problems = Vec::new();
    if body != expected_body(run, seq) {
        problems.push(format!("body differs ({} bytes)", body.len()));
    }
    let tag = inner.tags().map(str::to_string);
    if tag.as_deref() != Some(expected_tag(seq).as_str()) {
        problems.push(format!("tags {tag:?}, expected {:?}", expected_tag(seq)));
    }
    let keys = inner.keys();
    if keys.as_ref() != Some(&expected_keys(run, seq)) {
        problems.push(format!(
            "keys {keys:?}, expected {:?}",
            expected_keys(run, seq)
        ));
    }
    for (name, expected) in [
        (PROP_RUN, run.to_string()),
        (PROP_SEQ, seq.to_string()),
        (PROP_TEXT, expected_text(seq)),
    ] {
        let actual = inner.property(name);
        if actual != Some(expected.as_str()) {
            problems.push(format!(
                "property {name} = {actual:?}, expected {expected:?}"
            ));
        }
    }
    if problems.is_empty() {
        Ok(seq)
    } else {
        Err(format!(
            "message seq {seq} (msg id {}, queue {}, offset {}): {}",
            msg.msg_id(),
            msg.queue_id(),
            msg.queue_offset(),
            problems.join("; ")
        ))
    }
}

/// What one consumer received: delivery count per seq, queues seen, and content problems.
#[derive(Default)]
pub struct DeliveryLog {
    inner: Mutex<DeliveryState>,
}

#[derive(Default, Clone)]
pub struct DeliveryState {
    /// seq -> how many times it was delivered.
    pub deliveries: BTreeMap<u64, u32>,
    /// Queue ids the messages came from.
    pub queues: HashSet<i32>,
    /// Content mismatches and foreign messages (first [`RECORDED_PROBLEMS_MAX`]).
    pub problems: Vec<String>,
    pub problem_count: usize,
}

/// Only this many problem descriptions are kept (all are counted).
pub const RECORDED_PROBLEMS_MAX: usize = 20;

impl DeliveryLog {
    /// Records one delivered message of run `run`.
    pub fn record(&self, msg: &MessageExt, run: &str) {
        let checked = check_message(msg, run);
        let mut state = self.lock();
        state.queues.insert(msg.queue_id());
        match checked {
            Ok(seq) => *state.deliveries.entry(seq).or_insert(0) += 1,
            Err(problem) => {
                state.problem_count += 1;
                if state.problems.len() < RECORDED_PROBLEMS_MAX {
                    state.problems.push(problem);
                }
            }
        }
    }

    /// Number of distinct seqs delivered.
    pub fn distinct(&self) -> usize {
        self.lock().deliveries.len()
    }

    /// Whether every seq of `seqs` was delivered at least once.
    pub fn has_all(&self, seqs: std::ops::Range<u64>) -> bool {
        let state = self.lock();
        seqs.into_iter()
            .all(|seq| state.deliveries.contains_key(&seq))
    }

    pub fn snapshot(&self) -> DeliveryState {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, DeliveryState> {
        // A panic inside a listener cannot leave the maps half-updated in a way that matters
        // for the assertions, so a poisoned lock is still read.
        self.inner
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }
}

impl DeliveryState {
    /// Asserts that no delivered message had a content problem (nor was a foreign one).
    #[track_caller]
    pub fn assert_no_problems(&self) {
        assert_eq!(
            self.problem_count, 0,
            "content problems: {:#?}",
            self.problems
        );
    }

    /// The seqs of `expected` that were never delivered, ascending.
    pub fn missing(&self, expected: impl IntoIterator<Item = u64>) -> Vec<u64> {
        let mut missing: Vec<u64> = expected
            .into_iter()
            .filter(|seq| !self.deliveries.contains_key(seq))
            .collect();
        missing.sort_unstable();
        missing
    }

    /// Asserts every seq in `expected` was delivered exactly once, nothing else was, and
    /// contents matched. `who` names the consumer in the failure message.
    pub fn assert_exactly_once(&self, who: &str, expected: impl IntoIterator<Item = u64>) {
        let expected: HashSet<u64> = expected.into_iter().collect();
        let missing = self.missing(expected.iter().copied());
        let duplicates: Vec<(u64, u32)> = self
            .deliveries
            .iter()
            .filter(|(_, &count)| count > 1)
            .map(|(&seq, &count)| (seq, count))
            .collect();
        let unexpected: Vec<u64> = self
            .deliveries
            .keys()
            .copied()
            .filter(|seq| !expected.contains(seq))
            .collect();
        assert!(
            self.problem_count == 0
                && missing.is_empty()
                && duplicates.is_empty()
                && unexpected.is_empty(),
            "{who}: {} distinct of {} expected; {} missing (first {:?}); {} duplicated (first \
             {:?}); {} unexpected (first {:?}); {} content problems: {:#?}",
            self.deliveries.len(),
            expected.len(),
            missing.len(),
            &missing[..missing.len().min(20)],
            duplicates.len(),
            &duplicates[..duplicates.len().min(20)],
            unexpected.len(),
            &unexpected[..unexpected.len().min(20)],
            self.problem_count,
            self.problems
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_roundtrips_seq() {
        for seq in [0, 1, 299, 300, 9_999, u64::MAX / 3] {
            let body = expected_body("r1", seq);
            assert_eq!(seq_of_body("r1", &body), Some(seq));
            assert_eq!(seq_of_body("r2", &body), None);
        }
        assert_eq!(seq_of_body("r1", b"r1:x:"), None);
        assert_eq!(seq_of_body("r1", b"r1:12"), None);
    }

    #[test]
    fn built_message_carries_all_fields() {
        let msg = build_message("T", "run", 42);
        assert_eq!(msg.tags(), Some("Tag2"));
        assert_eq!(msg.keys(), Some(expected_keys("run", 42)));
        assert_eq!(msg.property(PROP_SEQ), Some("42"));
        assert_eq!(msg.property(PROP_TEXT), Some(expected_text(42).as_str()));
        assert_eq!(msg.body_slice(), expected_body("run", 42).as_slice());
    }

    #[test]
    fn missing_and_has_all_see_the_gap() {
        let log = DeliveryLog::default();
        for seq in [0, 2] {
            let mut ext = MessageExt::default();
            ext.set_message_inner(build_message("T", "run", seq));
            log.record(&ext, "run");
        }
        assert!(log.has_all(0..1));
        assert!(!log.has_all(0..3));
        assert_eq!(log.snapshot().missing([3, 1, 0]), vec![1, 3]);
    }

    #[test]
    fn check_message_detects_a_wrong_tag() {
        let mut ext = MessageExt::default();
        ext.set_message_inner(build_message("T", "run", 7));
        assert_eq!(check_message(&ext, "run"), Ok(7));
        let mut wrong = build_message("T", "run", 7);
        wrong.set_tags("TagX".into());
        ext.set_message_inner(wrong);
        let problem = check_message(&ext, "run").expect_err("tag mismatch");
        assert!(problem.contains("tags"), "{problem}");
    }
}
