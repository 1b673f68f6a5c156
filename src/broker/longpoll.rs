//! Long polling: the hold table of parked pulls (Java `PullRequestHoldService` +
//! `NotifyMessageArrivingListener`).
//!
//! A pull that finds nothing is parked under its (topic, queueId) until a message for it
//! arrives or its suspend time is up. Design:
//! - The table maps (topic, queueId) to a [`QueueSlot`] through [`HOLD_SHARDS`] shards. A shard's
//!   `RwLock` is taken for writing only the first time a queue is ever seen; parking and waking
//!   take it shared, so they never wait on each other.
//! - Each slot keeps its parked pulls in a `Vec` behind its own mutex, plus the highest offset
//!   that has arrived (`AtomicI64`). Parking is one push under the slot's lock; a wake-up takes
//!   the whole vector out under the lock, decides outside it (filters may be costly), hands back
//!   every pull whose offset is now readable and whose filter matches the new message, and puts
//!   the rest back. Only pulls of the same queue ever share a lock, each for a push or a swap.
//! - Memory: a slot costs its `Vec` buffer, sized to the pulls it holds (grown one element
//!   at a time from empty, not to the usual minimum of four). A lock-free segment queue was
//!   used before; its first segment holds 31 pulls, so a queue with one parked pull cost
//!   ~8.8 KB, which missed the 1 KiB-per-parked-pull budget when pulls are spread over many
//!   queues (see `docs/BENCHMARKS.md`).
//! - Lost wake-up guard: the arrival path stores the new max offset *then* looks at the slot;
//!   the parking path pushes *then* reads the max offset and drains itself if a message slipped
//!   in between the pull's store lookup and its push (SeqCst on both sides, the Dekker pattern;
//!   the slot lock orders the push against the arrival's look).
//! - The periodic check ([`HoldTable::check_expired`], every 5 s by default) answers pulls whose
//!   time is up, drops pulls whose connection closed, and catches anything missed.
//! - The number of parked pulls is bounded: [`HoldTable::park`] refuses when the table holds
//!   `parked_pulls_max`, and the caller answers at once instead of growing memory.
//!
//! Time is passed in (`now_ms`), so the table is tested without a clock or a runtime.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

/// Shards of the (topic, queue) → slot map.
pub const HOLD_SHARDS: usize = 64;

/// What the table needs to know about a parked pull. The broker's parked pull carries its
/// request, connection and filter; the table only asks these questions.
pub trait ParkedPull: Send {
    /// The queue offset the pull asked for.
    fn request_offset(&self) -> i64;
    /// When the pull must be answered even if nothing arrived (ms, same clock as `now_ms`).
    fn deadline_ms(&self) -> i64;
    /// Whether an arriving message with this tags code and these raw properties
    /// (`name\x01value\x02`...) passes the pull's filter.
    fn matches(&self, tags_code: i64, properties: &[u8]) -> bool;
    /// The pull's connection is gone; it can be dropped without an answer.
    fn is_cancelled(&self) -> bool;
}

/// Why a parked pull leaves the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WakeReason {
    /// A matching message arrived at or past its offset.
    Arrived,
    /// Its time is up.
    Expired,
    /// The periodic check found the queue's max offset already past its offset.
    Readable,
}

/// A refused park: the pull is given back so the caller can answer it at once.
#[derive(Debug)]
pub struct TableFull<P>(pub P);

struct QueueSlot<P> {
    parked: Mutex<Vec<P>>,
    /// Highest "next offset" announced by arrivals (max offset of the queue).
    max_offset: AtomicI64,
}

impl<P> QueueSlot<P> {
    fn lock(&self) -> MutexGuard<'_, Vec<P>> {
        // A panic while holding the lock (only in a push or a swap) leaves the vector whole.
        self.parked.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push(&self, pull: P) {
        let mut parked = self.lock();
        if parked.capacity() == parked.len() && parked.len() < SLOT_GROW_EXACT_BELOW {
            // Grow one by one while small: most queues hold one or a few pulls.
            parked.reserve_exact(1);
        }
        parked.push(pull);
    }

    fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }
}

/// Below this many parked pulls a slot's vector grows by exactly one element; above it, by
/// doubling (amortised O(1) pushes when many pulls wait on one queue).
const SLOT_GROW_EXACT_BELOW: usize = 4;

/// topic → queueId → slot, nested so it can be probed with `&str` (no allocation per lookup).
type SlotMap<P> = HashMap<String, HashMap<i32, Arc<QueueSlot<P>>>>;

/// The bounded, sharded, lock-free-on-the-hot-path hold table.
pub struct HoldTable<P> {
    shards: Box<[RwLock<SlotMap<P>>]>,
    hasher: std::collections::hash_map::RandomState,
    parked_count: AtomicUsize,
    parked_pulls_max: usize,
}

impl<P: ParkedPull> HoldTable<P> {
    pub fn new(parked_pulls_max: usize) -> Self {
        assert!(parked_pulls_max > 0);
        HoldTable {
            shards: (0..HOLD_SHARDS)
                .map(|_| RwLock::new(HashMap::new()))
                .collect(),
            hasher: std::collections::hash_map::RandomState::new(),
            parked_count: AtomicUsize::new(0),
            parked_pulls_max,
        }
    }

    /// Pulls currently parked.
    pub fn len(&self) -> usize {
        self.parked_count.load(Ordering::Acquire)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn shard_index(&self, topic: &str, queue_id: i32) -> usize {
        let mut h = self.hasher.build_hasher();
        topic.hash(&mut h);
        queue_id.hash(&mut h);
        (h.finish() as usize) & (HOLD_SHARDS - 1)
    }

    fn slot(&self, topic: &str, queue_id: i32) -> Option<Arc<QueueSlot<P>>> {
        let shard = &self.shards[self.shard_index(topic, queue_id)];
        let map = shard.read().unwrap_or_else(|p| p.into_inner());
        map.get(topic)?.get(&queue_id).cloned()
    }

    fn slot_or_insert(&self, topic: &str, queue_id: i32) -> Arc<QueueSlot<P>> {
        if let Some(slot) = self.slot(topic, queue_id) {
            return slot;
        }
        let shard = &self.shards[self.shard_index(topic, queue_id)];
        let mut map = shard.write().unwrap_or_else(|p| p.into_inner());
        map.entry(topic.to_string())
            .or_default()
            .entry(queue_id)
            .or_insert_with(|| {
                Arc::new(QueueSlot {
                    parked: Mutex::new(Vec::new()),
                    max_offset: AtomicI64::new(-1),
                })
            })
            .clone()
    }

    /// Parks `pull` under (topic, queue_id). Returns pulls that must be answered now: normally
    /// none, but if a message arrived between the pull's store lookup and this call, the pull
    /// comes straight back with [`WakeReason::Readable`] (no lost wake-up).
    pub fn park(
        &self,
        topic: &str,
        queue_id: i32,
        pull: P,
    ) -> Result<Vec<(P, WakeReason)>, TableFull<P>> {
        // Reserve a place first so the bound holds under concurrency.
        let prev = self.parked_count.fetch_add(1, Ordering::AcqRel);
        if prev >= self.parked_pulls_max {
            self.parked_count.fetch_sub(1, Ordering::AcqRel);
            return Err(TableFull(pull));
        }
        let slot = self.slot_or_insert(topic, queue_id);
        let offset = pull.request_offset();
        slot.push(pull);
        std::sync::atomic::fence(Ordering::SeqCst);
        if slot.max_offset.load(Ordering::SeqCst) > offset {
            return Ok(self.drain(&slot, |p| {
                (p.request_offset() < slot.max_offset.load(Ordering::SeqCst))
                    .then_some(WakeReason::Readable)
            }));
        }
        Ok(Vec::new())
    }

    /// A message was dispatched to (topic, queue_id): `max_offset` is the queue's new max
    /// (next) offset. Returns the parked pulls to re-execute: those asking for an offset below
    /// `max_offset` whose filter matches this message.
    pub fn notify_message_arriving(
        &self,
        topic: &str,
        queue_id: i32,
        max_offset: i64,
        tags_code: i64,
        properties: &[u8],
    ) -> Vec<(P, WakeReason)> {
        let Some(slot) = self.slot(topic, queue_id) else {
            return Vec::new();
        };
        slot.max_offset.fetch_max(max_offset, Ordering::SeqCst);
        std::sync::atomic::fence(Ordering::SeqCst);
        if slot.is_empty() {
            return Vec::new();
        }
        self.drain(&slot, |p| {
            (p.request_offset() < max_offset && p.matches(tags_code, properties))
                .then_some(WakeReason::Arrived)
        })
    }

    /// The periodic check: returns pulls whose time is up, and pulls whose offset became
    /// readable (a missed wake-up); silently drops cancelled ones. `max_offset_of` gives the
    /// queue's current max offset from the store.
    pub fn check_expired(
        &self,
        now_ms: i64,
        mut max_offset_of: impl FnMut(&str, i32) -> i64,
    ) -> Vec<(P, WakeReason)> {
        let mut slots = Vec::new();
        for shard in self.shards.iter() {
            let map = shard.read().unwrap_or_else(|p| p.into_inner());
            for (topic, queues) in map.iter() {
                slots.extend(
                    queues
                        .iter()
                        .filter(|(_, s)| !s.is_empty())
                        .map(|(q, s)| (topic.clone(), *q, s.clone())),
                );
            }
        }
        let mut out = Vec::new();
        for (topic, queue_id, slot) in slots {
            let max_offset = max_offset_of(&topic, queue_id);
            slot.max_offset.fetch_max(max_offset, Ordering::SeqCst);
            out.extend(self.drain(&slot, |p| {
                if p.request_offset() < max_offset {
                    Some(WakeReason::Readable)
                } else if now_ms >= p.deadline_ms() {
                    Some(WakeReason::Expired)
                } else {
                    None
                }
            }));
        }
        out
    }

    /// Takes every parked pull out of `slot`, returns those `decide` picks (and drops cancelled
    /// ones), and puts the rest back.
    fn drain(
        &self,
        slot: &QueueSlot<P>,
        mut decide: impl FnMut(&P) -> Option<WakeReason>,
    ) -> Vec<(P, WakeReason)> {
        // Swap the vector out so parkers of this queue wait only for the swap, not the filters.
        let taken = std::mem::take(&mut *slot.lock());
        let mut woken = Vec::new();
        let mut keep = Vec::new();
        for p in taken {
            if p.is_cancelled() {
                self.parked_count.fetch_sub(1, Ordering::AcqRel);
                continue;
            }
            match decide(&p) {
                Some(reason) => {
                    self.parked_count.fetch_sub(1, Ordering::AcqRel);
                    woken.push((p, reason));
                }
                None => keep.push(p),
            }
        }
        if !keep.is_empty() {
            let mut parked = slot.lock();
            if parked.is_empty() {
                // Nobody parked meanwhile: hand the kept vector back as it is.
                *parked = keep;
            } else {
                parked.append(&mut keep);
            }
        }
        woken
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    #[derive(Debug)]
    /// A test pull: wants `offset`, expires at `deadline`, matches tags codes in `codes`
    /// (empty = all).
    struct Pull {
        id: u32,
        offset: i64,
        deadline: i64,
        codes: Vec<i64>,
        cancelled: Arc<AtomicBool>,
    }

    impl ParkedPull for Pull {
        fn request_offset(&self) -> i64 {
            self.offset
        }
        fn deadline_ms(&self) -> i64 {
            self.deadline
        }
        fn matches(&self, tags_code: i64, _properties: &[u8]) -> bool {
            self.codes.is_empty() || self.codes.contains(&tags_code)
        }
        fn is_cancelled(&self) -> bool {
            self.cancelled.load(Ordering::Acquire)
        }
    }

    fn pull(id: u32, offset: i64, deadline: i64, codes: &[i64]) -> Pull {
        Pull {
            id,
            offset,
            deadline,
            codes: codes.to_vec(),
            cancelled: Arc::new(AtomicBool::new(false)),
        }
    }

    fn ids(v: &[(Pull, WakeReason)]) -> Vec<(u32, WakeReason)> {
        let mut out: Vec<_> = v.iter().map(|(p, r)| (p.id, *r)).collect();
        out.sort_by_key(|(id, _)| *id);
        out
    }

    #[test]
    fn park_then_wake_on_arrival() {
        let t = HoldTable::new(10);
        assert!(t.park("T", 0, pull(1, 5, 15_000, &[])).unwrap().is_empty());
        assert_eq!(t.len(), 1);
        // An arrival on another queue wakes nothing.
        assert!(t.notify_message_arriving("T", 1, 6, 0, b"").is_empty());
        assert!(t.notify_message_arriving("U", 0, 6, 0, b"").is_empty());
        let woken = t.notify_message_arriving("T", 0, 6, 0, b"");
        assert_eq!(ids(&woken), vec![(1, WakeReason::Arrived)]);
        assert!(t.is_empty());
    }

    #[test]
    fn arrival_below_requested_offset_does_not_wake() {
        let t = HoldTable::new(10);
        t.park("T", 0, pull(1, 5, 15_000, &[])).unwrap();
        // max offset 5 means offsets 0..=4 exist; the pull wants 5.
        assert!(t.notify_message_arriving("T", 0, 5, 0, b"").is_empty());
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn non_matching_tag_does_not_wake() {
        let t = HoldTable::new(10);
        let tag_a = 2_598_919; // any code; the filter decides
        t.park("T", 0, pull(1, 0, 15_000, &[tag_a])).unwrap();
        t.park("T", 0, pull(2, 0, 15_000, &[])).unwrap();
        let woken = t.notify_message_arriving("T", 0, 1, 42, b"");
        assert_eq!(ids(&woken), vec![(2, WakeReason::Arrived)]);
        let woken = t.notify_message_arriving("T", 0, 2, tag_a, b"");
        assert_eq!(ids(&woken), vec![(1, WakeReason::Arrived)]);
    }

    #[test]
    fn expiry_answers_only_pulls_whose_time_is_up() {
        let t = HoldTable::new(10);
        t.park("T", 0, pull(1, 0, 1_000, &[])).unwrap();
        t.park("T", 0, pull(2, 0, 20_000, &[])).unwrap();
        assert!(t.check_expired(999, |_, _| 0).is_empty());
        assert_eq!(
            ids(&t.check_expired(1_000, |_, _| 0)),
            vec![(1, WakeReason::Expired)]
        );
        assert_eq!(t.len(), 1);
        // The check also catches a missed wake-up: the store says offset 0 is readable now.
        assert_eq!(
            ids(&t.check_expired(1_001, |_, _| 1)),
            vec![(2, WakeReason::Readable)]
        );
        assert!(t.is_empty());
    }

    #[test]
    fn full_table_refuses_and_gives_the_pull_back() {
        let t = HoldTable::new(2);
        t.park("T", 0, pull(1, 0, 1, &[])).unwrap();
        t.park("T", 1, pull(2, 0, 1, &[])).unwrap();
        let refused = t.park("T", 2, pull(3, 0, 1, &[])).unwrap_err();
        assert_eq!(refused.0.id, 3);
        assert_eq!(t.len(), 2);
        t.notify_message_arriving("T", 0, 1, 0, b"");
        assert!(
            t.park("T", 2, pull(4, 0, 1, &[])).is_ok(),
            "room again after a wake-up"
        );
    }

    #[test]
    fn closed_connection_drops_its_parked_pulls() {
        let t = HoldTable::new(10);
        let p = pull(1, 0, 15_000, &[]);
        let cancel = p.cancelled.clone();
        t.park("T", 0, p).unwrap();
        t.park("T", 0, pull(2, 0, 15_000, &[])).unwrap();
        cancel.store(true, Ordering::Release);
        let woken = t.check_expired(0, |_, _| 0);
        assert!(woken.is_empty());
        assert_eq!(t.len(), 1, "the cancelled pull is gone, the other stays");
        let woken = t.notify_message_arriving("T", 0, 1, 0, b"");
        assert_eq!(ids(&woken), vec![(2, WakeReason::Arrived)]);
    }

    #[test]
    fn a_slot_holds_room_for_its_pulls_only() {
        let t = HoldTable::new(10);
        t.park("T", 0, pull(1, 0, 15_000, &[])).unwrap();
        let slot = t.slot("T", 0).unwrap();
        assert_eq!(
            slot.lock().capacity(),
            1,
            "one parked pull, one element of room"
        );
        t.park("T", 0, pull(2, 0, 15_000, &[])).unwrap();
        assert_eq!(slot.lock().capacity(), 2);
        t.notify_message_arriving("T", 0, 1, 0, b"");
        assert_eq!(slot.lock().capacity(), 0, "a drained slot keeps no buffer");
    }

    #[test]
    fn message_arriving_before_park_is_not_lost() {
        let t = HoldTable::new(10);
        // The slot exists (an earlier pull parked and left) and a message arrives while the
        // next pull is between its store lookup and its park.
        t.park("T", 0, pull(1, 0, 15_000, &[])).unwrap();
        t.notify_message_arriving("T", 0, 1, 0, b"");
        let back = t.park("T", 0, pull(2, 0, 15_000, &[])).unwrap();
        assert_eq!(ids(&back), vec![(2, WakeReason::Readable)]);
        assert!(t.is_empty());
    }

    #[test]
    fn wakes_across_threads_without_losing_pulls() {
        let t = Arc::new(HoldTable::new(100_000));
        let parkers: Vec<_> = (0..2)
            .map(|th| {
                let t = t.clone();
                std::thread::spawn(move || {
                    let mut early = 0;
                    for i in 0..5_000u32 {
                        let q = (i % 16) as i32;
                        early += t
                            .park("T", q, pull(th * 100_000 + i, 0, i64::MAX, &[]))
                            .unwrap()
                            .len();
                    }
                    early
                })
            })
            .collect();
        let notifier = {
            let t = t.clone();
            std::thread::spawn(move || {
                let mut woken = 0;
                for round in 1..200 {
                    for q in 0..16 {
                        woken += t.notify_message_arriving("T", q, round, 0, b"").len();
                    }
                }
                woken
            })
        };
        let early: usize = parkers.into_iter().map(|h| h.join().unwrap()).sum();
        let mut woken = notifier.join().unwrap();
        for q in 0..16 {
            woken += t.notify_message_arriving("T", q, 1_000, 0, b"").len();
        }
        assert_eq!(
            early + woken,
            10_000,
            "every parked pull is answered exactly once"
        );
        assert!(t.is_empty());
    }
}
