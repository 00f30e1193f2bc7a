//! The lease bucket against real `nats-server`s (and moto's S3 for the
//! pool): the object pool's shared lease is renewed while an upload runs
//! longer than a lease, so a prune on another host waits; a share that
//! lapsed unrenewed refuses to publish; a lease write whose answer was lost
//! is this writer's, not "held by another"; a server killed under a lease
//! update is named unreachable, and a release that fails is reported.
//!
//! Leases here last 3 s (`JetStreamConfig::lease`), so a wait of a few
//! lease periods is the slow upload these tests are about.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use cairn_journal::{RemoteJournalError, RemoteJournals};
use cairn_objects::{
    prune_remote, upload, NoProgress, ObjectHash, ObjectPool, PutOutcome, RemoteEntry, RemoteError,
    RemoteObjects, StoreLock,
};
use cairn_remote::{JetStreamConfig, JetStreamJournals, S3Config, S3Objects};
use cairn_store::Store;
use cairn_testkit::nats::{AckCutter, Nats};
use cairn_testkit::s3::{Moto, KEY_ID, SECRET};

const LEASE: Duration = Duration::from_secs(3);

fn config(lease: Duration) -> JetStreamConfig {
    JetStreamConfig {
        lease,
        ack_timeout: Duration::from_secs(1),
        connect_timeout: Duration::from_secs(2),
        retries: 1,
        ..JetStreamConfig::default()
    }
}

fn open(url: &str) -> JetStreamJournals {
    open_with(url, LEASE)
}

fn open_with(url: &str, lease: Duration) -> JetStreamJournals {
    JetStreamJournals::open(url, config(lease)).unwrap_or_else(|e| panic!("opening {url}: {e}"))
}

/// Lets `d` pass: the time a lease takes to lapse is what is tested.
fn let_pass(d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One record line of a session (its bytes are not checked here).
fn record(seq: u64) -> Vec<u8> {
    format!("{{\"v\":1,\"seq\":{seq},\"kind\":\"user\",\"text\":\"x\"}}\n").into_bytes()
}

/// A remote whose put of one object waits until the test lets it go: an
/// upload as slow as the test wants.
struct Slow {
    inner: S3Objects,
    held: ObjectHash,
    entered: AtomicBool,
    gate: (Mutex<bool>, Condvar),
}

impl Slow {
    fn open(&self) {
        *self.gate.0.lock().unwrap() = true;
        self.gate.1.notify_all();
    }
}

impl RemoteObjects for Slow {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn contains(&self, hash: &ObjectHash) -> Result<bool, RemoteError> {
        self.inner.contains(hash)
    }
    fn put_create(&self, hash: &ObjectHash, stored: &[u8]) -> Result<PutOutcome, RemoteError> {
        if *hash == self.held {
            self.entered.store(true, Ordering::SeqCst);
            let mut open = self.gate.0.lock().unwrap();
            while !*open {
                open = self.gate.1.wait(open).unwrap();
            }
        }
        self.inner.put_create(hash, stored)
    }
    fn get(&self, hash: &ObjectHash) -> Result<Option<Vec<u8>>, RemoteError> {
        self.inner.get(hash)
    }
    fn list(
        &self,
        hex_prefix: &str,
        visit: &mut dyn FnMut(RemoteEntry),
    ) -> Result<(), RemoteError> {
        self.inner.list(hex_prefix, visit)
    }
}

/// Host A uploads, under the pool's shared lease, two objects: one it
/// finds already in the bucket (an interrupted capture's, that nothing
/// names yet) and one whose put takes three lease periods. Host B's prune
/// meanwhile is refused, because A's share is renewed; without renewal it
/// lapsed, B's prune took the pool and deleted the object A found there and
/// was about to name. Once A gives its share up, the prune goes.
#[test]
#[ignore = "needs nats-server and moto: .ci/run installs them"]
fn an_upload_longer_than_the_pool_lease_keeps_a_racing_prune_out() {
    cairn_testkit::nats::require();
    cairn_testkit::s3::require();
    let nats = Nats::single();
    let moto = Moto::start();
    moto.create_bucket("team");
    let s3 = || {
        S3Config::new()
            .endpoint(moto.endpoint())
            .region("us-east-1")
            .credentials(KEY_ID, SECRET)
            .allow_http(true)
            .open("s3://team/cairn")
            .unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let pool = ObjectPool::open(&store).unwrap();
    let lock = StoreLock::shared(&store).unwrap();
    let found = pool.put_bytes(&lock, b"found there already").unwrap().hash;
    let sent = pool.put_bytes(&lock, b"sent slowly").unwrap().hash;
    upload(&pool, &s3(), &[found], &NoProgress).unwrap();

    let a = open(&nats.url("team"));
    let b = open(&nats.url("team"));
    let share = a.pool_share().unwrap().expect("a share is taken");
    let slow = Arc::new(Slow {
        inner: s3(),
        held: sent,
        entered: AtomicBool::new(false),
        gate: (Mutex::new(false), Condvar::new()),
    });
    let uploading = {
        let slow = slow.clone();
        let pool = ObjectPool::open(&store).unwrap();
        std::thread::spawn(move || upload(&pool, slow.as_ref(), &[found, sent], &NoProgress))
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !slow.entered.load(Ordering::SeqCst) {
        assert!(
            Instant::now() < deadline,
            "the upload never reached its slow put"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The upload has found `found` there and is still sending `sent`.
    let_pass(LEASE * 3);

    let raced = match b.pool_exclusive() {
        Err(RemoteJournalError::Leased { .. }) => None,
        Ok(Some(token)) => {
            let pruned = prune_remote(&s3(), &[], Duration::ZERO, false).unwrap();
            b.pool_release(&token);
            Some(pruned)
        }
        other => panic!("the prune's lease: {other:?}"),
    };
    slow.open();
    let sent_report = uploading.join().unwrap().unwrap();
    assert_eq!(sent_report.present, 1, "{sent_report:?}");
    assert!(
        s3().contains(&found).unwrap(),
        "a prune that started during the upload deleted the object it found there: {raced:?}"
    );
    assert_eq!(
        raced, None,
        "the prune was not refused while the upload ran"
    );
    // The records naming both would be published here; then the share goes.
    a.append("run1", 0, &record(1)).unwrap();
    a.pool_release(&share);

    let token = b.pool_exclusive().unwrap().expect("the pool is free again");
    let pruned = prune_remote(&s3(), &[], Duration::ZERO, false).unwrap();
    b.pool_release(&token);
    assert_eq!(pruned.objects, 2, "nothing names them here: {pruned:?}");
}

/// The server is killed while a share is held, for longer than the lease:
/// its renewals get no answer and it lapses. With the server back, this
/// connection refuses to publish records (a prune elsewhere may have run),
/// saying so, until the share is given up.
#[test]
#[ignore = "needs nats-server: .ci/run installs it"]
fn a_pool_share_that_lapsed_unrenewed_refuses_to_publish() {
    cairn_testkit::nats::require();
    let mut nats = Nats::single();
    let url = nats.url("lapse");
    let a = open(&url);
    a.append("run1", 0, &record(1)).unwrap();
    let share = a.pool_share().unwrap().expect("a share is taken");
    nats.nodes[0].kill();
    let_pass(LEASE * 2);
    nats.nodes[0].start();
    let deadline = Instant::now() + Duration::from_secs(30);
    while a.runs().is_err() {
        assert!(Instant::now() < deadline, "the server did not come back");
        std::thread::sleep(Duration::from_millis(100));
    }
    let e = a.append("run1", 1, &record(2)).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("lapsed") && text.contains("nothing was published"),
        "{text}"
    );
    assert_eq!(a.read("run1").unwrap().unwrap(), record(1));
    a.pool_release(&share);
    a.append("run1", 1, &record(2)).unwrap();
}

/// A lease write reaches the server and its answer is cut off: the writer
/// reads it back and keeps it, never reports itself as another holder,
/// and gives it up so that the next one takes it at once.
#[test]
#[ignore = "needs nats-server: .ci/run installs it"]
fn a_lease_write_whose_answer_is_lost_is_this_writers_not_another_holders() {
    cairn_testkit::nats::require();
    let nats = Nats::single();
    let cutter = AckCutter::start(nats.nodes[0].port);
    // Leases long enough to outlast a lost answer's wait and read-back.
    let lease = Duration::from_secs(10);
    let a = open_with(&format!("nats://127.0.0.1:{}/lost", cutter.port), lease);
    let b = open_with(&nats.url("lost"), lease);

    // A prune's exclusive lease: stored, its answer lost.
    cutter.arm();
    let token = a
        .pool_exclusive()
        .unwrap_or_else(|e| panic!("the prune's own lease: {e}"))
        .expect("the exclusive lease is taken");
    assert_eq!(cutter.cuts(), 1, "the answer was cut off");
    let shared = b.pool_share();
    assert!(
        matches!(shared, Err(RemoteJournalError::Leased { .. })),
        "the exclusive lease is held: {shared:?}"
    );
    a.pool_release(&token);

    // An upload's shared lease: the same. Given up, nothing of it is left
    // to keep a prune out.
    cutter.arm();
    let share = a.pool_share().unwrap().expect("a share is taken");
    assert_eq!(cutter.cuts(), 2, "the answer was cut off");
    a.pool_release(&share);
    let token = b
        .pool_exclusive()
        .unwrap_or_else(|e| panic!("no share is left: {e}"))
        .expect("the pool is free");
    b.pool_release(&token);

    // A writer lease's renewal: the same, and given up at the revision the
    // lost answer would have named.
    let writer = a.lease("run1").unwrap();
    let_pass(lease / 2 + Duration::from_millis(100));
    cutter.arm();
    let writer = a.renew(writer).unwrap();
    assert_eq!(cutter.cuts(), 3, "the answer was cut off");
    a.release(writer).unwrap();
}

/// The server is killed between a lease being taken and its renewal and
/// release: both say the server cannot be reached, neither that the session
/// is held by someone, and the release is not reported done.
#[test]
#[ignore = "needs nats-server: .ci/run installs it"]
fn a_server_killed_under_a_lease_update_is_named_unreachable_not_held() {
    cairn_testkit::nats::require();
    let mut nats = Nats::single();
    let a = open(&nats.url("gone"));
    let renewing = a.lease("run1").unwrap();
    let releasing = a.lease("run2").unwrap();
    let_pass(LEASE / 2 + Duration::from_millis(100));
    nats.nodes[0].kill();

    let e = a.renew(renewing).unwrap_err();
    assert!(
        matches!(e, RemoteJournalError::Unreachable { .. }),
        "renewing: {e}"
    );
    assert!(
        e.to_string()
            .contains("renew the writer lease of session run1"),
        "{e}"
    );
    let e = a.release(releasing).unwrap_err();
    assert!(
        matches!(e, RemoteJournalError::Unreachable { .. }),
        "releasing: {e}"
    );
    let e = a.hold("run3").unwrap_err();
    assert!(
        matches!(e, RemoteJournalError::Unreachable { .. }),
        "taking: {e}"
    );
}
