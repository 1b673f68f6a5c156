//! Long polling: the hold table of parked pulls (Java `PullRequestHoldService` +
//! `NotifyMessageArrivingListener`).
//!
//! A pull that finds nothing is parked under its (topic, queueId) until a message for it
//! arrives or its suspend time is up. Design:
//! - The table maps (topic, queueId) to a [`QueueSlot`] through [`HOLD_SHARDS`] shards. A shard's
//!   `RwLock` is taken for writing only the first time a queue is ever seen; parking and waking
//!   take it shared, so they never wait on each other.
//! - Each slot keeps its parked pulls in a lock-free stack ([`ParkedStack`]: an `AtomicPtr`
//!   head, push by compare-and-swap, take-all by one swap), plus the highest offset that has
//!   arrived (`AtomicI64`). Parking is one CAS; a wake-up swaps the whole stack out, decides
//!   outside any lock (filters may be costly), hands back every pull whose offset is now
//!   readable and whose filter matches the new message, and pushes the rest back. Nothing ever
//!   pops a single node, so the classic ABA problem of Treiber stacks cannot occur.
//! - Memory: one heap node per parked pull (the pull plus a pointer), nothing per idle queue
//!   but the slot itself. A segment queue was tried first; its first segment holds 31 pulls, so
//!   a queue with one parked pull cost ~8.8 KB, over the 1 KiB-per-parked-pull budget when
//!   pulls are spread over many queues (see `docs/BENCHMARKS.md`).
//! - Lost wake-up guards: the arrival path stores the new max offset *then* looks at the
//!   slot; the parking path pushes *then* reads the max offset and drains itself if a message
//!   slipped in between the pull's store lookup and its push (SeqCst on both sides, the Dekker
//!   pattern). Two drains can overlap (one holds the swapped-out pulls while the other finds the
//!   stack empty), so a drain that puts pulls back re-reads the max offset and drains again for
//!   readability if it moved meanwhile: at worst a spurious wake-up, never a lost one.
//! - The periodic check ([`HoldTable::check_expired`], every 5 s by default) answers pulls whose
//!   time is up, drops pulls whose connection closed, and catches anything missed.
//! - The number of parked pulls is bounded: [`HoldTable::park`] refuses when the table holds
//!   `parked_pulls_max`, and the caller answers at once instead of growing memory.
//!
//! Time is passed in (`now_ms`), so the table is tested without a clock or a runtime.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::marker::PhantomData;
use std::ptr;
use std::sync::atomic::{AtomicI64, AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

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

/// A lock-free stack of parked pulls (a Treiber stack without single pops).
struct ParkedStack<P> {
    head: AtomicPtr<Node<P>>,
    /// Nodes pushed and not yet taken, counted up before a push publishes its node and down
    /// as a chain yields it, so it is never below the nodes on the stack (an upper bound
    /// while pushes are in flight).
    len: AtomicUsize,
    /// Owns `P`s and hands them between threads like a `Mutex<P>` would: `Send + Sync` exactly
    /// when `P: Send`.
    _owns: PhantomData<Mutex<P>>,
}

struct Node<P> {
    pull: P,
    next: *mut Node<P>,
}

impl<P> ParkedStack<P> {
    fn new() -> Self {
        ParkedStack {
            head: AtomicPtr::new(ptr::null_mut()),
            len: AtomicUsize::new(0),
            _owns: PhantomData,
        }
    }

    fn push(&self, pull: P) {
        let node = Box::into_raw(Box::new(Node {
            pull,
            next: ptr::null_mut(),
        }));
        self.len.fetch_add(1, Ordering::AcqRel);
        let mut head = self.head.load(Ordering::Acquire);
        loop {
            // SAFETY: `node` is ours until the CAS below publishes it.
            unsafe { (*node).next = head };
            match self
                .head
                .compare_exchange_weak(head, node, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return,
                Err(current) => head = current,
            }
        }
    }

    /// Takes every parked pull (newest first).
    #[cfg(test)]
    fn take_all(&self) -> Vec<P> {
        self.take_chain().collect()
    }

    /// Takes every parked pull (newest first) as a chain that frees its nodes as it yields
    /// them, so a drain of 100,000 pulls builds no second list of them.
    fn take_chain(&self) -> Chain<'_, P> {
        Chain {
            node: self.head.swap(ptr::null_mut(), Ordering::AcqRel),
            len: &self.len,
            _owns: PhantomData,
        }
    }

    /// At least the pulls on the stack now (see `len`).
    fn len_bound(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    fn is_empty(&self) -> bool {
        self.head.load(Ordering::Acquire).is_null()
    }
}

impl<P> Drop for ParkedStack<P> {
    fn drop(&mut self) {
        drop(self.take_chain());
    }
}

/// Pulls taken out of a [`ParkedStack`] by one swap, owned exclusively.
struct Chain<'a, P> {
    node: *mut Node<P>,
    /// The stack's count, lowered per pull yielded.
    len: &'a AtomicUsize,
    _owns: PhantomData<P>,
}

impl<P> Iterator for Chain<'_, P> {
    type Item = P;

    fn next(&mut self) -> Option<P> {
        if self.node.is_null() {
            return None;
        }
        // SAFETY: the swap in `take_chain` made this chain exclusively ours; every node came
        // from `Box::into_raw` in `push` and is freed exactly once, here.
        let boxed = unsafe { Box::from_raw(self.node) };
        self.node = boxed.next;
        self.len.fetch_sub(1, Ordering::AcqRel);
        Some(boxed.pull)
    }
}

impl<P> Drop for Chain<'_, P> {
    fn drop(&mut self) {
        for pull in self.by_ref() {
            drop(pull);
        }
    }
}

struct QueueSlot<P> {
    parked: ParkedStack<P>,
    /// Highest "next offset" announced by arrivals (max offset of the queue).
    max_offset: AtomicI64,
}

impl<P> QueueSlot<P> {
    fn push(&self, pull: P) {
        self.parked.push(pull);
    }

    fn is_empty(&self) -> bool {
        self.parked.is_empty()
    }
}

/// topic → queueId → slot, nested so it can be probed with `&str` (no allocation per lookup).
/// foldhash, not SipHash: every park, arrival and drain looks a queue up here.
type Fold = foldhash::fast::RandomState;
type SlotMap<P> = HashMap<String, HashMap<i32, Arc<QueueSlot<P>>, Fold>, Fold>;

/// The bounded, sharded, lock-free-on-the-hot-path hold table.
pub struct HoldTable<P> {
    shards: Box<[RwLock<SlotMap<P>>]>,
    hasher: Fold,
    parked_pulls: AtomicUsize,
    parked_pulls_max: usize,
}

impl<P: ParkedPull> HoldTable<P> {
    pub fn new(parked_pulls_max: usize) -> Self {
        assert!(parked_pulls_max > 0);
        HoldTable {
            shards: (0..HOLD_SHARDS)
                .map(|_| RwLock::new(SlotMap::default()))
                .collect(),
            hasher: Fold::default(),
            parked_pulls: AtomicUsize::new(0),
            parked_pulls_max,
        }
    }

    /// Pulls currently parked.
    pub fn len(&self) -> usize {
        self.parked_pulls.load(Ordering::Acquire)
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
                    parked: ParkedStack::new(),
                    max_offset: AtomicI64::new(-1),
                })
            })
            .clone()
    }

    /// Parks `pull` under (topic, queue_id). Returns pulls that must be answered now: normally
    /// none, but if a message arrived between the pull's store lookup and this call, the pull
    /// comes straight back with [`WakeReason::Readable`] (no lost wake-up). `current_max_offset`
    /// reads the queue's max offset from the store *after* the push: the appender publishes its
    /// new max before it asks [`HoldTable::has_parked`], so one of the two always sees the
    /// other (SeqCst fences on both sides), even for the first pull ever parked on a queue.
    pub fn park(
        &self,
        topic: &str,
        queue_id: i32,
        pull: P,
        current_max_offset: impl FnOnce() -> i64,
    ) -> Result<Vec<(P, WakeReason)>, TableFull<P>> {
        // Reserve a place first so the bound holds under concurrency.
        let prev = self.parked_pulls.fetch_add(1, Ordering::AcqRel);
        if prev >= self.parked_pulls_max {
            self.parked_pulls.fetch_sub(1, Ordering::AcqRel);
            return Err(TableFull(pull));
        }
        let slot = self.slot_or_insert(topic, queue_id);
        let offset = pull.request_offset();
        slot.push(pull);
        std::sync::atomic::fence(Ordering::SeqCst);
        let store_max_offset = current_max_offset();
        let max_offset = slot
            .max_offset
            .fetch_max(store_max_offset, Ordering::SeqCst)
            .max(store_max_offset);
        if max_offset > offset {
            return Ok(self.drain(&slot, max_offset, |p| {
                (p.request_offset() < max_offset).then_some(WakeReason::Readable)
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
        self.drain(&slot, max_offset, |p| {
            (p.request_offset() < max_offset && p.matches(tags_code, properties))
                .then_some(WakeReason::Arrived)
        })
    }

    /// Whether any pull is parked on (topic, queue_id): the append path's cheap check, made
    /// after the store published the queue's new max offset (see [`HoldTable::park`]).
    pub fn has_parked(&self, topic: &str, queue_id: i32) -> bool {
        std::sync::atomic::fence(Ordering::SeqCst);
        self.slot(topic, queue_id).is_some_and(|s| !s.is_empty())
    }

    /// At least the pulls parked on (topic, queue_id) now (0 when none is): what the append
    /// path weighs before it answers woken pulls itself. Read after the store published the
    /// queue's new max offset, like [`HoldTable::has_parked`].
    pub fn parked_on(&self, topic: &str, queue_id: i32) -> usize {
        std::sync::atomic::fence(Ordering::SeqCst);
        self.slot(topic, queue_id)
            .filter(|s| !s.is_empty())
            .map_or(0, |s| s.parked.len_bound().max(1))
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
            out.extend(self.drain(&slot, max_offset, |p| {
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
    /// ones), and puts the rest back. `decided_max_offset` is the max offset `decide` judged by. If the
    /// slot's max offset is past it, or moves while the pulls are out of the slot (an arrival
    /// that found the slot empty), kept pulls that became readable are taken too, so an
    /// overlapping arrival is never lost.
    ///
    /// Starting from `decided_max_offset` rather than the slot's max matters when two drains overlap:
    /// an arrival handled on another wake thread may raise the slot's max and find the slot
    /// empty (its pulls are out here) before this drain reads the max; had this drain started
    /// from that raised max, it would see no change and keep a pull only the newer message can
    /// satisfy, until the periodic check.
    fn drain(
        &self,
        slot: &QueueSlot<P>,
        decided_max_offset: i64,
        mut decide: impl FnMut(&P) -> Option<WakeReason>,
    ) -> Vec<(P, WakeReason)> {
        let mut woken = Vec::new();
        let mut seen_max_offset = decided_max_offset;
        let mut kept = self.sift(slot, &mut decide, &mut woken);
        loop {
            std::sync::atomic::fence(Ordering::SeqCst);
            let current_max_offset = slot.max_offset.load(Ordering::SeqCst);
            if kept == 0 || current_max_offset <= seen_max_offset {
                return woken;
            }
            seen_max_offset = current_max_offset;
            let mut readable =
                |p: &P| (p.request_offset() < current_max_offset).then_some(WakeReason::Readable);
            kept = self.sift(slot, &mut readable, &mut woken);
        }
    }

    /// One pass: takes the slot's pulls, moves the picked ones to `woken`, drops cancelled
    /// ones, pushes the rest back. Returns how many were pushed back.
    fn sift(
        &self,
        slot: &QueueSlot<P>,
        decide: &mut dyn FnMut(&P) -> Option<WakeReason>,
        woken: &mut Vec<(P, WakeReason)>,
    ) -> usize {
        let mut kept = 0;
        for p in slot.parked.take_chain() {
            if p.is_cancelled() {
                self.parked_pulls.fetch_sub(1, Ordering::AcqRel);
                continue;
            }
            match decide(&p) {
                Some(reason) => {
                    self.parked_pulls.fetch_sub(1, Ordering::AcqRel);
                    woken.push((p, reason));
                }
                None => {
                    kept += 1;
                    slot.parked.push(p);
                }
            }
        }
        kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    #[derive(Debug)]
    /// A test pull: wants `offset`, expires at `deadline_ms`, matches tags codes in `codes`
    /// (empty = all).
    struct Pull {
        id: u32,
        offset: i64,
        deadline_ms: i64,
        codes: Vec<i64>,
        cancelled: Arc<AtomicBool>,
    }

    impl ParkedPull for Pull {
        fn request_offset(&self) -> i64 {
            self.offset
        }
        fn deadline_ms(&self) -> i64 {
            self.deadline_ms
        }
        fn matches(&self, tags_code: i64, _properties: &[u8]) -> bool {
            self.codes.is_empty() || self.codes.contains(&tags_code)
        }
        fn is_cancelled(&self) -> bool {
            self.cancelled.load(Ordering::Acquire)
        }
    }

    fn pull(id: u32, offset: i64, deadline_ms: i64, codes: &[i64]) -> Pull {
        Pull {
            id,
            offset,
            deadline_ms,
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
    fn parked_on_counts_the_pulls_of_one_queue_as_they_park_and_leave() {
        let t = HoldTable::new(10);
        assert_eq!(t.parked_on("T", 0), 0, "no slot yet");
        for id in 0..3 {
            assert!(t
                .park("T", 0, pull(id, 5, 15_000, &[7]), || -1)
                .unwrap()
                .is_empty());
        }
        assert!(t
            .park("T", 1, pull(9, 5, 15_000, &[]), || -1)
            .unwrap()
            .is_empty());
        assert_eq!(t.parked_on("T", 0), 3);
        assert_eq!(t.parked_on("T", 1), 1);
        // A message the filters refuse: every pull is taken out and put back.
        assert!(t.notify_message_arriving("T", 0, 6, 8, b"").is_empty());
        assert_eq!(t.parked_on("T", 0), 3);
        let woken = t.notify_message_arriving("T", 0, 6, 7, b"");
        assert_eq!(woken.len(), 3);
        assert_eq!(t.parked_on("T", 0), 0, "an emptied slot counts none");
        assert_eq!(t.parked_on("T", 1), 1);
    }

    #[test]
    fn park_then_wake_on_arrival() {
        let t = HoldTable::new(10);
        assert!(t
            .park("T", 0, pull(1, 5, 15_000, &[]), || -1)
            .unwrap()
            .is_empty());
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
        t.park("T", 0, pull(1, 5, 15_000, &[]), || -1).unwrap();
        // max offset 5 means offsets 0..=4 exist; the pull wants 5.
        assert!(t.notify_message_arriving("T", 0, 5, 0, b"").is_empty());
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn non_matching_tag_does_not_wake() {
        let t = HoldTable::new(10);
        let tag_a = 2_598_919; // any code; the filter decides
        t.park("T", 0, pull(1, 0, 15_000, &[tag_a]), || -1).unwrap();
        t.park("T", 0, pull(2, 0, 15_000, &[]), || -1).unwrap();
        let woken = t.notify_message_arriving("T", 0, 1, 42, b"");
        assert_eq!(ids(&woken), vec![(2, WakeReason::Arrived)]);
        let woken = t.notify_message_arriving("T", 0, 2, tag_a, b"");
        assert_eq!(ids(&woken), vec![(1, WakeReason::Arrived)]);
    }

    #[test]
    fn expiry_answers_only_pulls_whose_time_is_up() {
        let t = HoldTable::new(10);
        t.park("T", 0, pull(1, 0, 1_000, &[]), || -1).unwrap();
        t.park("T", 0, pull(2, 0, 20_000, &[]), || -1).unwrap();
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
        t.park("T", 0, pull(1, 0, 1, &[]), || -1).unwrap();
        t.park("T", 1, pull(2, 0, 1, &[]), || -1).unwrap();
        let refused = t.park("T", 2, pull(3, 0, 1, &[]), || -1).unwrap_err();
        assert_eq!(refused.0.id, 3);
        assert_eq!(t.len(), 2);
        t.notify_message_arriving("T", 0, 1, 0, b"");
        assert!(
            t.park("T", 2, pull(4, 0, 1, &[]), || -1).is_ok(),
            "room again after a wake-up"
        );
    }

    #[test]
    fn closed_connection_drops_its_parked_pulls() {
        let t = HoldTable::new(10);
        let p = pull(1, 0, 15_000, &[]);
        let cancel = p.cancelled.clone();
        t.park("T", 0, p, || -1).unwrap();
        t.park("T", 0, pull(2, 0, 15_000, &[]), || -1).unwrap();
        cancel.store(true, Ordering::Release);
        let woken = t.check_expired(0, |_, _| 0);
        assert!(woken.is_empty());
        assert_eq!(t.len(), 1, "the cancelled pull is gone, the other stays");
        let woken = t.notify_message_arriving("T", 0, 1, 0, b"");
        assert_eq!(ids(&woken), vec![(2, WakeReason::Arrived)]);
    }

    #[test]
    fn first_pull_on_a_queue_sees_a_message_that_arrived_before_its_park() {
        // No slot existed when the message arrived, so no arrival could reach the slot; the
        // store's max offset, read after the push, catches it.
        let t = HoldTable::new(10);
        let back = t.park("Fresh", 3, pull(1, 0, 15_000, &[]), || 1).unwrap();
        assert_eq!(ids(&back), vec![(1, WakeReason::Readable)]);
        assert!(t.is_empty());
        assert!(!t.has_parked("Fresh", 3));
        t.park("Fresh", 3, pull(2, 1, 15_000, &[]), || 1).unwrap();
        assert!(t.has_parked("Fresh", 3));
    }

    #[test]
    fn stack_keeps_every_pull_and_frees_them_on_drop() {
        let stack = ParkedStack::new();
        assert!(stack.is_empty());
        for id in 0..5 {
            stack.push(pull(id, 0, 0, &[]));
        }
        let mut ids: Vec<u32> = stack.take_all().into_iter().map(|p| p.id).collect();
        ids.sort();
        assert_eq!(ids, vec![0, 1, 2, 3, 4]);
        assert!(stack.is_empty());
        // Pulls left in a stack are dropped with it (their Arc counts fall back).
        let marker = Arc::new(AtomicBool::new(false));
        let p = Pull {
            id: 9,
            offset: 0,
            deadline_ms: 0,
            codes: vec![],
            cancelled: marker.clone(),
        };
        stack.push(p);
        assert_eq!(Arc::strong_count(&marker), 2);
        drop(stack);
        assert_eq!(Arc::strong_count(&marker), 1);
    }

    #[test]
    fn concurrent_pushes_and_takes_lose_nothing() {
        let stack = Arc::new(ParkedStack::new());
        let pushers: Vec<_> = (0..2u32)
            .map(|t| {
                let s = stack.clone();
                std::thread::spawn(move || {
                    for i in 0..20_000u32 {
                        s.push(pull(t * 100_000 + i, 0, 0, &[]));
                    }
                })
            })
            .collect();
        let mut seen = 0;
        while pushers.iter().any(|h| !h.is_finished()) {
            seen += stack.take_all().len();
        }
        for h in pushers {
            h.join().unwrap();
        }
        seen += stack.take_all().len();
        assert_eq!(seen, 40_000);
    }

    #[test]
    fn overlapping_drains_never_lose_an_arrival() {
        // A drain that holds the pulls while another arrival finds the slot empty re-checks
        // the max offset before returning.
        let t = HoldTable::new(10);
        t.park("T", 0, pull(1, 5, 15_000, &[]), || -1).unwrap();
        let slot = t.slot("T", 0).unwrap();
        slot.max_offset.fetch_max(5, Ordering::SeqCst);
        // Simulate: drain for arrival max=5 (pull wants 5, kept), while max moved to 6.
        let woken = t.drain(&slot, 5, |p| {
            slot.max_offset.fetch_max(6, Ordering::SeqCst);
            (p.request_offset() < 5).then_some(WakeReason::Arrived)
        });
        assert_eq!(ids(&woken), vec![(1, WakeReason::Readable)]);
        assert!(t.is_empty());
    }

    #[test]
    fn a_stale_arrival_drained_after_a_newer_one_raised_the_max_still_wakes() {
        // Two wake threads: the arrival of message 5 (max 6) raised the slot's max and found
        // the slot empty because the drain of the arrival of message 4 (max 5) had the pulls
        // out; that drain must not take the raised max as already judged.
        let t = HoldTable::new(10);
        t.park("T", 0, pull(1, 5, 15_000, &[]), || -1).unwrap();
        let slot = t.slot("T", 0).unwrap();
        // The newer arrival's fetch_max, then its emptiness check missing the pull.
        slot.max_offset.fetch_max(6, Ordering::SeqCst);
        let woken = t.notify_message_arriving("T", 0, 5, 0, b"");
        assert_eq!(ids(&woken), vec![(1, WakeReason::Readable)]);
        assert!(t.is_empty());
    }

    #[test]
    fn message_arriving_before_park_is_not_lost() {
        let t = HoldTable::new(10);
        // The slot exists (an earlier pull parked and left) and a message arrives while the
        // next pull is between its store lookup and its park.
        t.park("T", 0, pull(1, 0, 15_000, &[]), || -1).unwrap();
        t.notify_message_arriving("T", 0, 1, 0, b"");
        let back = t.park("T", 0, pull(2, 0, 15_000, &[]), || -1).unwrap();
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
                            .park("T", q, pull(th * 100_000 + i, 0, i64::MAX, &[]), || -1)
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
