//! The live stream's promises (DESIGN §8): reconnecting anywhere loses and
//! repeats nothing, a cursor older than the ring falls back to the journal
//! exactly, a cursor ahead is refused, a slow client is cut off without
//! slowing the producer, and the watermark closes the gap between a snapshot
//! and the live frames.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn_server::stream::{
    Backlog, CursorError, Ended, Frame, JournalSeq, LiveSeq, LiveStream, StreamLimits,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// What a client makes of the frames: whole records and whole deltas.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Item {
    Record(u64, String),
    Delta(String),
}

/// One step of a producer's script.
#[derive(Clone, Debug)]
enum Op {
    Record(String),
    Delta(String),
}

const END: &str = "\"END\"";

/// Joins split payloads back together; drops parts it cannot complete.
#[derive(Default)]
struct Reassembler {
    buf: String,
    next: Option<u32>,
    dropped: usize,
}

impl Reassembler {
    fn push(&mut self, f: &Frame) -> Option<Item> {
        let item = |record: Option<JournalSeq>, data: String| match record {
            Some(n) => Item::Record(n.0, data),
            None => Item::Delta(data),
        };
        let Some((i, n)) = f.part else {
            if self.next.take().is_some() {
                self.dropped += 1;
            }
            return Some(item(f.record, f.data.to_string()));
        };
        if i == 0 {
            if self.next.is_some() {
                self.dropped += 1;
            }
            self.buf.clear();
        } else if self.next != Some(i) {
            self.dropped += 1;
            self.next = None;
            return None;
        }
        self.buf.push_str(&f.data);
        if i + 1 == n {
            self.next = None;
            Some(item(f.record, std::mem::take(&mut self.buf)))
        } else {
            self.next = Some(i + 1);
            None
        }
    }

    /// Forgets a partial payload (the journal will supply the record whole).
    fn reset(&mut self) {
        self.next = None;
        self.buf.clear();
    }
}

/// A payload: short mostly, sometimes several times `big` bytes, with
/// multi-byte characters so splits must respect character boundaries.
fn payload(rng: &mut StdRng, n: usize, big: usize) -> String {
    let alphabet = ['a', 'b', 'é', '😀', 'z', ' ', 'ж'];
    let len = if rng.random_bool(0.1) {
        rng.random_range(big..big * 4)
    } else {
        rng.random_range(1..24)
    };
    let mut s = format!("{n}:");
    while s.len() < len {
        s.push(alphabet[rng.random_range(0..alphabet.len())]);
    }
    s
}

fn script(rng: &mut StdRng, ops: usize, big: usize) -> Vec<Op> {
    (0..ops)
        .map(|i| {
            let p = payload(rng, i, big);
            if rng.random_bool(0.3) {
                Op::Record(p)
            } else {
                Op::Delta(p)
            }
        })
        .collect()
}

/// The items a script means, in order.
fn items_of(ops: &[Op]) -> Vec<Item> {
    let mut n = 0;
    ops.iter()
        .map(|op| match op {
            Op::Record(p) => {
                n += 1;
                Item::Record(n, p.clone())
            }
            Op::Delta(p) => Item::Delta(p.clone()),
        })
        .collect()
}

/// The test's journal: the records the producer published, appended (as a
/// server does) before each record is published.
#[derive(Clone, Default)]
struct TestJournal(Arc<Mutex<Vec<String>>>);

impl TestJournal {
    fn append(&self, data: &str) -> JournalSeq {
        let mut j = self.0.lock().unwrap();
        j.push(data.to_owned());
        JournalSeq(j.len() as u64)
    }
    fn len(&self) -> u64 {
        self.0.lock().unwrap().len() as u64
    }
    /// Records (after, upto], as items.
    fn read(&self, after: u64, upto: u64) -> Vec<Item> {
        let j = self.0.lock().unwrap();
        (after + 1..=upto)
            .map(|n| Item::Record(n, j[n as usize - 1].clone()))
            .collect()
    }
}

fn run_op(stream: &LiveStream, journal: &TestJournal, op: &Op) -> LiveSeq {
    match op {
        Op::Record(p) => {
            let n = journal.append(p);
            stream.publish_record(n, p)
        }
        Op::Delta(p) => stream.publish_delta(p),
    }
}

/// Every buffered live frame, without waiting.
fn drain(live: &mut cairn_server::stream::Live) -> (Vec<Frame>, Option<Ended>) {
    let mut out = Vec::new();
    loop {
        match live.try_next() {
            Ok(Some(f)) => out.push(f),
            Ok(None) => return (out, None),
            Err(e) => return (out, Some(e)),
        }
    }
}

/// A client's view: checks seqs are dense and reassembles items.
struct Client {
    last: LiveSeq,
    re: Reassembler,
    items: Vec<Item>,
    done: bool,
}

impl Default for Client {
    fn default() -> Self {
        Client {
            last: LiveSeq(0),
            re: Reassembler::default(),
            items: Vec::new(),
            done: false,
        }
    }
}

impl Client {
    fn take(&mut self, f: &Frame) {
        assert_eq!(f.seq.0, self.last.0 + 1, "live seqs are dense, no repeats");
        self.last = f.seq;
        if let Some(item) = self.re.push(f) {
            self.done |= item == Item::Delta(END.into());
            self.items.push(item);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_reconnecting_at_random_points_gets_what_a_never_disconnected_client_got() {
    let big = 64;
    for seed in 0..8u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let ops = script(&mut rng, 1500, big);
        let limits = StreamLimits {
            max_frames: 1 << 16,
            max_frame_bytes: big,
            subscriber_frames: 1 << 16,
            ..StreamLimits::default()
        };
        let stream = Arc::new(LiveStream::new(limits));
        let journal = TestJournal::default();

        // Subscribed before the producer starts: sees every frame live.
        let mut steady = stream.subscribe(Some(LiveSeq(0))).unwrap();
        let steady_task = tokio::spawn(async move {
            let mut c = Client::default();
            while !c.done {
                let f = steady
                    .live
                    .next()
                    .await
                    .expect("the steady client is never cut off");
                c.take(&f);
            }
            c
        });

        let dropping = {
            let stream = Arc::clone(&stream);
            tokio::spawn(async move {
                let mut rng = StdRng::seed_from_u64(seed ^ 0xdead_beef);
                let mut c = Client::default();
                let mut connections = 0usize;
                while !c.done {
                    connections += 1;
                    let sub = stream.subscribe(Some(c.last)).unwrap();
                    let Backlog::Ring(backlog) = sub.backlog else {
                        panic!("the ring holds the whole run in this test");
                    };
                    assert_eq!(sub.head.0, c.last.0 + backlog.len() as u64);
                    let mut budget: usize = rng.random_range(1..60);
                    let mut live = sub.live;
                    for f in &backlog {
                        if budget == 0 || c.done {
                            break;
                        }
                        c.take(f);
                        budget -= 1;
                    }
                    while budget > 0 && !c.done {
                        let f = live.next().await.unwrap();
                        c.take(&f);
                        budget -= 1;
                    }
                    drop(live);
                    if rng.random_bool(0.3) {
                        tokio::time::sleep(Duration::from_micros(rng.random_range(0..300))).await;
                    } else {
                        tokio::task::yield_now().await;
                    }
                }
                (c, connections)
            })
        };

        let producer = {
            let stream = Arc::clone(&stream);
            let journal = journal.clone();
            let ops = ops.clone();
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed.wrapping_add(99));
                for op in &ops {
                    run_op(&stream, &journal, op);
                    if rng.random_bool(0.05) {
                        std::thread::sleep(Duration::from_micros(rng.random_range(0..200)));
                    }
                }
                stream.publish_delta(END);
            })
        };
        producer.join().unwrap();
        let steady = steady_task.await.unwrap();
        let (dropping, connections) = dropping.await.unwrap();

        let mut want = items_of(&ops);
        want.push(Item::Delta(END.into()));
        assert_eq!(steady.items, want, "seed {seed}: the steady client");
        assert_eq!(
            dropping.items, steady.items,
            "seed {seed}: the reconnecting client"
        );
        assert_eq!(dropping.last, steady.last);
        assert_eq!(dropping.re.dropped + steady.re.dropped, 0);
        assert!(
            connections > 30,
            "seed {seed}: only {connections} connections"
        );
    }
}

/// A stream driven in one thread, with a witness that receives every frame.
struct Recorded {
    stream: LiveStream,
    journal: TestJournal,
    witness: cairn_server::stream::Live,
    frames: Vec<Frame>,
}

impl Recorded {
    fn new(limits: StreamLimits) -> Recorded {
        let stream = LiveStream::new(StreamLimits {
            subscriber_frames: 1 << 20,
            ..limits
        });
        let witness = stream.subscribe(None).unwrap().live;
        Recorded {
            stream,
            journal: TestJournal::default(),
            witness,
            frames: Vec::new(),
        }
    }

    fn run(&mut self, op: &Op) {
        run_op(&self.stream, &self.journal, op);
        let (frames, end) = drain(&mut self.witness);
        assert_eq!(end, None);
        self.frames.extend(frames);
    }

    /// Every item with the live seq of its last frame.
    fn items(&self) -> Vec<(Item, LiveSeq)> {
        let mut re = Reassembler::default();
        let out = self
            .frames
            .iter()
            .filter_map(|f| re.push(f).map(|i| (i, f.seq)))
            .collect();
        assert_eq!(re.dropped, 0);
        out
    }

    /// The journal seq reached by frame `n`, counted independently: records
    /// whose last frame is at or before `n`.
    fn reached(&self, n: LiveSeq) -> JournalSeq {
        let count = self
            .items()
            .iter()
            .filter(|(i, s)| matches!(i, Item::Record(..)) && *s <= n)
            .count();
        JournalSeq(count as u64)
    }

    /// The live seq of the last frame of record `n` (0 for none).
    fn record_end(&self, n: JournalSeq) -> LiveSeq {
        self.items()
            .iter()
            .find(|(i, _)| matches!(i, Item::Record(r, _) if *r == n.0))
            .map_or(LiveSeq(0), |(_, s)| *s)
    }
}

/// What a client that fell back to the journal assembles.
fn assemble_fallback(
    journal: &TestJournal,
    after: JournalSeq,
    upto: JournalSeq,
    then: &[Frame],
    live: &mut cairn_server::stream::Live,
) -> (Vec<Item>, usize) {
    let mut items = journal.read(after.0, upto.0);
    let mut re = Reassembler::default();
    re.reset();
    let (rest, end) = drain(live);
    assert_eq!(end, None);
    let mut last: Option<LiveSeq> = None;
    for f in then.iter().chain(&rest) {
        if let Some(l) = last {
            assert_eq!(f.seq.0, l.0 + 1, "`then` and live are dense");
        }
        last = Some(f.seq);
        items.extend(re.push(f));
    }
    (items, re.dropped)
}

#[test]
fn a_cursor_older_than_the_ring_falls_back_to_exactly_the_journal_records_it_lacks() {
    let limits = StreamLimits {
        max_frame_bytes: 48,
        ..StreamLimits::default()
    };
    assert_eq!(limits.max_frames, 4096);
    let mut rng = StdRng::seed_from_u64(7);
    let mut r = Recorded::new(limits);
    // Split records and deltas early, so cursors older than the ring land
    // on their parts too.
    for k in 0..6 {
        r.run(&Op::Record(format!("{k}:{}", "é😀x".repeat(10 + 7 * k))));
        r.run(&Op::Delta(format!("{k}:{}", "ж".repeat(30 + 5 * k))));
        r.run(&Op::Delta(format!("short {k}")));
    }
    let mut i = 0;
    while r.stream.head().0 < 4200 {
        let op = script(&mut rng, 1, 48).remove(0);
        r.run(&op);
        i += 1;
    }
    // The in-flight turn: a record, then deltas (some split).
    r.run(&Op::Record(format!("turn {i}")));
    for k in 0..10 {
        r.run(&Op::Delta(payload(&mut rng, k, 48)));
    }
    let head = r.stream.head();
    let front = head.0 - 4096 + 1;
    assert!(head.0 >= 4200);

    // Subscribe with every cursor older than the ring.
    let mut subs = Vec::new();
    for n in 0..front - 1 {
        let sub = r.stream.subscribe(Some(LiveSeq(n))).unwrap();
        assert_eq!(sub.head, head);
        subs.push((LiveSeq(n), sub));
    }
    // A cursor just inside the ring still gets frames.
    let inside = r.stream.subscribe(Some(LiveSeq(front - 1))).unwrap();
    assert!(matches!(&inside.backlog, Backlog::Ring(f) if f.len() == 4096));

    // The run goes on.
    for _ in 0..200 {
        let op = script(&mut rng, 1, 48).remove(0);
        r.run(&op);
    }
    r.run(&Op::Delta(END.into()));

    let all = r.items();
    let on_record_parts = r.frames[..front as usize - 2]
        .iter()
        .filter(|f| f.record.is_some() && !f.completes())
        .count();
    assert!(
        on_record_parts > 10,
        "some cursors sit inside a split record"
    );
    let watermark_then = r.reached(head);
    for (n, mut sub) in subs {
        let Backlog::Journal {
            after,
            upto,
            then,
            gap,
        } = sub.backlog
        else {
            panic!("cursor {n} is older than the ring");
        };
        assert!(!gap, "cursor {n}: the in-flight deltas are in the ring");
        assert_eq!(
            after,
            r.reached(n),
            "cursor {n}: the journal seq it had reached"
        );
        let by_field = if n.0 == 0 {
            JournalSeq(0)
        } else {
            r.frames[n.0 as usize - 1].journal
        };
        assert_eq!(after, by_field, "cursor {n}: Frame.journal agrees");
        assert_eq!(upto, watermark_then);
        assert_eq!(sub.watermark, upto);
        let upto_end = r.record_end(upto);
        assert_eq!(then.first().map(|f| f.seq.0), Some(upto_end.0 + 1));

        let (got, dropped) = assemble_fallback(&r.journal, after, upto, &then, &mut sub.live);
        assert_eq!(dropped, 0, "cursor {n}");
        // What a never-disconnected client received, restricted to the
        // records it lacked and the deltas after record `upto`.
        let want: Vec<Item> = all
            .iter()
            .filter(|(item, s)| match item {
                Item::Record(k, _) => *k > after.0,
                Item::Delta(_) => *s > upto_end,
            })
            .map(|(item, _)| item.clone())
            .collect();
        assert_eq!(got, want, "cursor {n}");
        let seqs: Vec<u64> = got
            .iter()
            .filter_map(|i| match i {
                Item::Record(k, _) => Some(*k),
                Item::Delta(_) => None,
            })
            .collect();
        let expect: Vec<u64> = (after.0 + 1..=r.journal.len()).collect();
        assert_eq!(seqs, expect, "cursor {n}: every record once, in order");
    }
}

#[test]
fn in_flight_deltas_longer_than_the_ring_are_reported_as_a_gap() {
    let mut r = Recorded::new(StreamLimits::default());
    let mut rng = StdRng::seed_from_u64(3);
    for op in script(&mut rng, 100, 1000) {
        r.run(&op);
    }
    r.run(&Op::Record("the last record".into()));
    let last_record = r.stream.head();
    for k in 0..5000 {
        r.run(&Op::Delta(format!("delta {k}")));
    }
    let head = r.stream.head();
    let front = LiveSeq(head.0 - 4096 + 1);
    for n in [0, 50, last_record.0 - 1, last_record.0, last_record.0 + 3] {
        let n = LiveSeq(n);
        let mut sub = r.stream.subscribe(Some(n)).unwrap();
        let Backlog::Journal {
            after,
            upto,
            then,
            gap,
        } = sub.backlog
        else {
            panic!("cursor {n} is older than the ring");
        };
        assert!(gap, "cursor {n}");
        assert_eq!(then.len(), 4096);
        assert_eq!(then[0].seq, front);
        assert_eq!(then.last().unwrap().seq, head);
        assert_eq!(after, r.reached(n));
        assert_eq!(upto, JournalSeq(r.journal.len()));
        if n >= last_record {
            assert_eq!(after, upto, "nothing to fetch, only the lost deltas");
        }
        let (got, _) = assemble_fallback(&r.journal, after, upto, &then, &mut sub.live);
        let want: Vec<Item> = r
            .items()
            .into_iter()
            .filter(|(item, s)| match item {
                Item::Record(k, _) => *k > after.0,
                Item::Delta(_) => *s >= front,
            })
            .map(|(item, _)| item)
            .collect();
        assert_eq!(got, want, "cursor {n}");
    }
}

#[test]
fn the_ring_is_bounded_by_bytes_and_no_frame_exceeds_the_frame_limit() {
    let limits = StreamLimits {
        max_bytes: 1000,
        max_frame_bytes: 100,
        ..StreamLimits::default()
    };
    let mut r = Recorded::new(limits);
    for k in 0..50 {
        r.run(&Op::Delta(format!("{k:0>100}")));
    }
    let head = r.stream.head();
    let sub = r.stream.subscribe(Some(LiveSeq(head.0 - 10))).unwrap();
    assert!(matches!(&sub.backlog, Backlog::Ring(f) if f.len() == 10));
    let sub = r.stream.subscribe(Some(LiveSeq(head.0 - 11))).unwrap();
    assert!(matches!(sub.backlog, Backlog::Journal { gap: true, .. }));

    // A payload of multi-byte characters over the limit: parts at character
    // boundaries, each within the limit, in order.
    let text: String = "😀é".repeat(100);
    let before = r.stream.head();
    let last = r.stream.publish_record(JournalSeq(1), &text);
    let (frames, _) = drain(&mut r.witness);
    assert_eq!(frames.len() as u64, last.0 - before.0);
    assert!(frames.len() > 1);
    assert!(frames.iter().all(|f| f.data.len() <= 100));
    let count = frames.len() as u32;
    for (i, f) in frames.iter().enumerate() {
        assert_eq!(f.part, Some((i as u32, count)));
        assert_eq!(f.record, Some(JournalSeq(1)));
        // Only the last part covers the record.
        let covered = if f.completes() { 1 } else { 0 };
        assert_eq!(f.journal, JournalSeq(covered));
    }
    let joined: String = frames.iter().map(|f| &*f.data).collect();
    assert_eq!(joined, text);
}

#[test]
fn a_cursor_ahead_of_the_head_is_refused() {
    let stream = LiveStream::new(StreamLimits::default());
    assert!(matches!(
        stream.subscribe(Some(LiveSeq(1))),
        Err(CursorError::Ahead { .. })
    ));
    for k in 0..5 {
        stream.publish_delta(&format!("{k}"));
    }
    let err = stream.subscribe(Some(LiveSeq(6))).unwrap_err();
    assert_eq!(
        err,
        CursorError::Ahead {
            asked: LiveSeq(6),
            head: LiveSeq(5)
        }
    );
    assert!(err.to_string().starts_with("cursor_ahead: live seq 6"));
    let at_head = stream.subscribe(Some(LiveSeq(5))).unwrap();
    assert!(matches!(&at_head.backlog, Backlog::Ring(f) if f.is_empty()));
    assert_eq!(at_head.head, LiveSeq(5));
}

#[test]
fn a_subscriber_that_never_reads_is_cut_off_and_the_producer_never_waits() {
    let stream = LiveStream::new(StreamLimits::default());
    let journal = TestJournal::default();
    let mut idle = stream.subscribe(None).unwrap();
    let mut good = stream.subscribe(None).unwrap();
    let mut got = Vec::new();
    let mut slowest = Duration::ZERO;
    let started = Instant::now();
    for k in 0..100_000u64 {
        let t = Instant::now();
        if k % 10 == 0 {
            let n = journal.append("{}");
            stream.publish_record(n, &format!("{{\"record\":{k}}}"));
        } else {
            stream.publish_delta(&format!("{{\"delta\":{k}}}"));
        }
        slowest = slowest.max(t.elapsed());
        if k % 256 == 0 {
            let (frames, end) = drain(&mut good.live);
            assert_eq!(end, None);
            got.extend(frames);
        }
    }
    let elapsed = started.elapsed();
    let (frames, end) = drain(&mut good.live);
    assert_eq!(end, None);
    got.extend(frames);
    // Generous bounds: publishing 100,000 frames takes milliseconds.
    assert!(elapsed < Duration::from_secs(30), "took {elapsed:?}");
    assert!(
        slowest < Duration::from_secs(2),
        "one publish took {slowest:?}"
    );

    // The reading subscriber got every frame, in order, and is still on.
    assert_eq!(got.len(), 100_000);
    assert!(got.iter().enumerate().all(|(i, f)| f.seq.0 == i as u64 + 1));
    assert_eq!(stream.subscribers(), 1);
    stream.publish_delta("one more");
    assert_eq!(good.live.try_next().unwrap().unwrap().seq, LiveSeq(100_001));

    // The idle one reads what it had buffered, then learns why it ended.
    let (frames, end) = drain(&mut idle.live);
    assert_eq!(frames.len(), 1024);
    assert_eq!(frames.last().unwrap().seq, LiveSeq(1024));
    assert_eq!(end, Some(Ended::SlowClient));
    assert!(Ended::SlowClient.to_string().starts_with("slow_client"));

    // It reconnects from there: the ring moved on, so it gets the journal.
    let again = stream.subscribe(Some(LiveSeq(1024))).unwrap();
    let Backlog::Journal { after, upto, .. } = again.backlog else {
        panic!("1024 is older than the ring");
    };
    assert_eq!(after, frames.last().unwrap().journal);
    assert_eq!(upto, JournalSeq(10_000));
}

#[tokio::test]
async fn closing_ends_every_subscriber_after_what_it_buffered() {
    let stream = LiveStream::new(StreamLimits::default());
    let mut a = stream.subscribe(None).unwrap();
    stream.publish_delta("x");
    stream.close();
    assert!(stream.is_closed());
    assert_eq!(&*a.live.next().await.unwrap().data, "x");
    assert_eq!(a.live.next().await.unwrap_err(), Ended::Closed);
    let mut late = stream.subscribe(Some(LiveSeq(0))).unwrap();
    assert!(matches!(&late.backlog, Backlog::Ring(f) if f.len() == 1));
    assert_eq!(late.live.next().await.unwrap_err(), Ended::Closed);

    let dropped = LiveStream::new(StreamLimits::default());
    let mut b = dropped.subscribe(None).unwrap();
    drop(dropped);
    assert_eq!(b.live.next().await.unwrap_err(), Ended::Closed);
}

#[test]
fn a_snapshot_then_the_watermark_then_live_has_every_record_once() {
    for seed in 0..60u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let ops = script(&mut rng, 300, 40);
        let records = ops.iter().filter(|o| matches!(o, Op::Record(_))).count() as u64;
        let stream = Arc::new(LiveStream::new(StreamLimits {
            max_frame_bytes: 40,
            subscriber_frames: 1 << 16,
            ..StreamLimits::default()
        }));
        let journal = TestJournal::default();
        let producer = {
            let (stream, journal) = (Arc::clone(&stream), journal.clone());
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed + 1000);
                for op in &ops {
                    match op {
                        Op::Record(p) => {
                            let n = journal.append(p);
                            // Durable before published: a snapshot may see
                            // a record the stream has not announced yet.
                            if rng.random_bool(0.2) {
                                std::thread::sleep(Duration::from_micros(rng.random_range(0..500)));
                            }
                            stream.publish_record(n, p);
                        }
                        Op::Delta(p) => {
                            stream.publish_delta(p);
                        }
                    }
                    if rng.random_bool(0.1) {
                        std::thread::sleep(Duration::from_micros(rng.random_range(0..100)));
                    }
                }
                // The session ends: subscribers read what they hold, then Closed.
                stream.close();
            })
        };
        // The client: a snapshot of the journal up to J ...
        std::thread::sleep(Duration::from_micros(rng.random_range(0..3000)));
        let j = journal.len();
        let mut have = journal.read(0, j);
        // ... an injected delay while records are published (none at
        // times, so the snapshot can be ahead of the watermark) ...
        if rng.random_bool(0.6) {
            std::thread::sleep(Duration::from_micros(rng.random_range(0..3000)));
        }
        let mut sub = stream.subscribe(None).unwrap();
        // ... then (J, watermark] from the journal, then live.
        let covered = j.max(sub.watermark.0);
        have.extend(journal.read(j, sub.watermark.0));
        let mut re = Reassembler::default();
        loop {
            let f = match sub.live.try_next() {
                Ok(Some(f)) => f,
                Ok(None) => {
                    std::thread::sleep(Duration::from_micros(50));
                    continue;
                }
                Err(end) => {
                    assert_eq!(end, Ended::Closed, "seed {seed}");
                    break;
                }
            };
            if let Some(Item::Record(n, p)) = re.push(&f) {
                if n > covered {
                    have.push(Item::Record(n, p));
                }
            }
        }
        assert_eq!(
            re.dropped, 0,
            "subscribing never lands inside a record's parts"
        );
        producer.join().unwrap();
        let seqs: Vec<u64> = have
            .iter()
            .map(|i| match i {
                Item::Record(n, _) => *n,
                Item::Delta(_) => unreachable!(),
            })
            .collect();
        assert_eq!(seqs, (1..=records).collect::<Vec<_>>(), "seed {seed}");
        assert_eq!(have, journal.read(0, records));
    }
}
