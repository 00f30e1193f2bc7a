//! Journals on JetStream against real `nats-server`s on loopback ports
//! (`cairn_testkit::nats`): byte-for-byte round trips, the fence under a
//! 1,000-round race between two connections, a lost acknowledgement,
//! refused stream configurations, an unreachable server, a node of a
//! 3-node cluster killed mid-run, and the whole server killed mid-append.
//!
//! The tests that need a server are `#[ignore]`d: `--ignored` runs them
//! with `nats-server` on PATH (`.ci/run` installs it); they fail when it is
//! missing. The unreachable-server test needs no server and always runs.

use std::fs::OpenOptions;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use cairn_journal::{
    scan_journal_bytes, JournalWriter, Meta, RecordBody, RemoteJournalError, RemoteJournals, User,
};
use cairn_remote::{JetStreamConfig, JetStreamJournals};
use cairn_store::{RunId, Store};
use cairn_testkit::nats::{free_port, require, AckCutter, Nats};

fn meta() -> Meta {
    Meta {
        run: String::new(),
        created: "2026-01-01T00:00:00Z".into(),
        workspace: "/tmp/ws".into(),
        name: Some("remote".into()),
        fingerprint: None,
        fork: None,
        routing: None,
        system_file: None,
    }
}

fn user(text: &str) -> RecordBody {
    RecordBody::User(User {
        text: text.into(),
        origin: None,
    })
}

fn open(url: &str) -> JetStreamJournals {
    JetStreamJournals::open(url, JetStreamConfig::default())
        .unwrap_or_else(|e| panic!("opening {url}: {e}"))
}

/// A local journal of `n` user records; its bytes.
fn local_journal(n: usize) -> (tempfile::TempDir, Store, RunId, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let id = RunId::new();
    let mut w = JournalWriter::create(&store, &id, meta()).unwrap();
    for i in 0..n {
        w.append(&user(&format!("turn {i}"))).unwrap();
    }
    drop(w);
    let bytes = std::fs::read(store.journal_path(&id)).unwrap();
    let bytes = trimmed(bytes);
    (dir, store, id, bytes)
}

/// The whole lines of a journal file (its preallocated tail cut).
fn trimmed(mut bytes: Vec<u8>) -> Vec<u8> {
    let end = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    bytes.truncate(end);
    bytes
}

#[test]
#[ignore = "needs nats-server: .ci/run installs it"]
fn a_journal_round_trips_byte_for_byte_and_appends_are_idempotent() {
    require();
    let nats = Nats::single();
    let remote = open(&nats.url("rt"));
    let (_d, _s, id, bytes) = local_journal(40);
    assert_eq!(remote.read(id.as_str()).unwrap(), None);
    let lines: Vec<&[u8]> = bytes.split_inclusive(|&b| b == b'\n').collect();
    let first: Vec<u8> = lines[..10].concat();
    let rest: Vec<u8> = lines[10..].concat();
    let a = remote.append(id.as_str(), 0, &first).unwrap();
    assert_eq!((a.stored, a.adopted), (10, 0));
    let b = remote.append(id.as_str(), 10, &rest).unwrap();
    assert_eq!(b.stored, lines.len() as u64 - 10);
    // The same records again: adopted, none stored twice.
    let again = remote.append(id.as_str(), 10, &rest).unwrap();
    assert_eq!((again.stored, again.adopted), (0, lines.len() as u64 - 10));

    // Another connection, as another host, reads exactly the file's bytes.
    let other = open(&nats.url("rt"));
    let read = other.read(id.as_str()).unwrap().unwrap();
    assert_eq!(read, bytes);
    let scan = scan_journal_bytes(std::path::Path::new("remote"), &read, id.as_str()).unwrap();
    assert_eq!(scan.records.len(), lines.len());
    assert_eq!(
        other.runs().unwrap(),
        vec![(id.to_string(), lines.len() as u64)]
    );

    // A record that is not the journal's own at its seq is refused.
    let (_d2, _s2, _id2, foreign) = local_journal(10);
    let theirs = foreign.split_inclusive(|&b| b == b'\n').nth(5).unwrap();
    let e = other.append(id.as_str(), 5, theirs).unwrap_err();
    assert!(
        matches!(e, RemoteJournalError::Conflict { seq: 6, .. }),
        "{e}"
    );
    assert_eq!(other.read(id.as_str()).unwrap().unwrap(), bytes);
}

/// Two writers (two connections with their own local journals) race for
/// every seq of one session, 1,000 rounds: each seq has exactly one
/// winner, the loser is refused with `Conflict`, and the journal verifies.
#[test]
#[ignore = "needs nats-server: .ci/run installs it"]
fn two_writers_race_for_a_thousand_rounds_and_each_seq_has_one_winner() {
    require();
    let rounds: u64 = std::env::var("CAIRN_RACE_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let nats = Nats::single();
    let url = nats.url("race");
    // The hosts' own journals in memory where there is a tmpfs: the race is
    // in the stream, not in their fsyncs.
    let dir = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let id = RunId::new();
    // Both hosts start from the same first record.
    let stores: Vec<Store> = (0..2)
        .map(|i| Store::open(dir.path().join(format!("host{i}"))).unwrap())
        .collect();
    drop(JournalWriter::create(&stores[0], &id, meta()).unwrap());
    let genesis = trimmed(std::fs::read(stores[0].journal_path(&id)).unwrap());
    std::fs::create_dir_all(stores[1].run_dir(&id)).unwrap();
    std::fs::write(stores[1].journal_path(&id), &genesis).unwrap();
    open(&url).append(id.as_str(), 0, &genesis).unwrap();

    let barrier = Arc::new(Barrier::new(2));
    let handles: Vec<_> = (0..2)
        .map(|host| {
            let (url, id, barrier) = (url.clone(), id.clone(), barrier.clone());
            let store = stores[host].clone();
            std::thread::spawn(move || {
                let remote = open(&url);
                let mut wins = Vec::new();
                for round in 0..rounds {
                    let after = round + 1;
                    let path = store.journal_path(&id);
                    let (mut w, _) = JournalWriter::open(&store, &id).unwrap();
                    let before = w.len();
                    w.append(&user(&format!("host {host} round {round}")))
                        .unwrap();
                    w.trim().unwrap();
                    drop(w);
                    let all = std::fs::read(&path).unwrap();
                    let line = all[usize::try_from(before).unwrap()..].to_vec();
                    barrier.wait();
                    let won = match remote.append(id.as_str(), after, &line) {
                        Ok(a) => {
                            assert_eq!(a.stored, 1, "round {round}");
                            true
                        }
                        Err(RemoteJournalError::Conflict { seq, .. }) => {
                            assert_eq!(seq, after + 1);
                            false
                        }
                        Err(e) => panic!("round {round}: {e}"),
                    };
                    barrier.wait();
                    if won {
                        wins.push(after + 1);
                    } else {
                        // Take the winner's record in place of ours.
                        let theirs = remote.read_after(id.as_str(), after).unwrap().unwrap();
                        assert_eq!(theirs.iter().filter(|&&b| b == b'\n').count(), 1);
                        OpenOptions::new()
                            .write(true)
                            .open(&path)
                            .unwrap()
                            .set_len(before)
                            .unwrap();
                        let (mut w, _) = JournalWriter::open(&store, &id).unwrap();
                        w.append_lines(&theirs).unwrap();
                        w.trim().unwrap();
                    }
                    barrier.wait();
                }
                wins
            })
        })
        .collect();
    let wins: Vec<Vec<u64>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let mut all: Vec<u64> = wins.concat();
    all.sort_unstable();
    let expected: Vec<u64> = (2..rounds + 2).collect();
    assert_eq!(all, expected, "every seq exactly one winner");
    assert!(
        wins.iter().all(|w| !w.is_empty()) || rounds < 20,
        "both writers won some rounds: {:?}",
        wins.iter().map(Vec::len).collect::<Vec<_>>()
    );
    let stored = open(&url).read(id.as_str()).unwrap().unwrap();
    let scan = scan_journal_bytes(std::path::Path::new("remote"), &stored, id.as_str()).unwrap();
    assert_eq!(scan.records.len() as u64, rounds + 1);
    // Both hosts' journals are the stored one.
    for s in &stores {
        assert_eq!(trimmed(std::fs::read(s.journal_path(&id)).unwrap()), stored);
    }
}

/// The connection is cut after a publish reached the server and before
/// its acknowledgement came back: the retry is recognised and adopted, and
/// the journal holds the record once.
#[test]
#[ignore = "needs nats-server: .ci/run installs it"]
fn a_lost_acknowledgement_is_adopted_not_duplicated() {
    require();
    let nats = Nats::single();
    let cutter = AckCutter::start(nats.nodes[0].port);
    let url = format!("nats://127.0.0.1:{}/lost", cutter.port);
    let remote = open(&url);
    let (_d, _s, id, bytes) = local_journal(5);
    let lines: Vec<&[u8]> = bytes.split_inclusive(|&b| b == b'\n').collect();
    remote.append(id.as_str(), 0, &lines[..3].concat()).unwrap();
    cutter.arm();
    let a = remote.append(id.as_str(), 3, lines[3]).unwrap();
    assert_eq!(cutter.cuts(), 1, "the acknowledgement was cut off");
    assert_eq!((a.stored, a.adopted), (0, 1), "the retry found it stored");
    remote.append(id.as_str(), 4, &lines[4..].concat()).unwrap();
    let direct = open(&nats.url("lost"));
    assert_eq!(direct.read(id.as_str()).unwrap().unwrap(), bytes);
}

/// A stream whose settings could drop records is refused, the setting
/// named; nothing is appended to it.
#[test]
#[ignore = "needs nats-server: .ci/run installs it"]
fn a_stream_that_could_drop_records_is_refused() {
    require();
    let nats = Nats::single();
    let port = nats.nodes[0].port;
    let rt = tokio::runtime::Runtime::new().unwrap();
    for (prefix, edit, named) in [
        ("aged", "max_age", "max_age"),
        ("old", "discard", "discard old"),
    ] {
        rt.block_on(async {
            let client = async_nats::connect(format!("127.0.0.1:{port}"))
                .await
                .unwrap();
            let js = async_nats::jetstream::new(client);
            let mut config = async_nats::jetstream::stream::Config {
                name: format!("CAIRN_{prefix}"),
                subjects: vec![format!("{prefix}.runs.>")],
                ..Default::default()
            };
            match edit {
                "max_age" => config.max_age = Duration::from_secs(3600),
                _ => {
                    config.discard = async_nats::jetstream::stream::DiscardPolicy::Old;
                    config.max_messages = 1000;
                }
            }
            js.create_stream(config).await.unwrap();
        });
        let e = JetStreamJournals::open(&nats.url(prefix), JetStreamConfig::default()).unwrap_err();
        assert!(matches!(e, RemoteJournalError::Unsafe { .. }), "{e}");
        let text = e.to_string();
        assert!(
            text.contains(named) && text.contains(&format!("CAIRN_{prefix}")),
            "{text}"
        );
    }
    // A stream cairn creates has safe settings and opens again.
    drop(open(&nats.url("fresh")));
    drop(open(&nats.url("fresh")));
}

#[test]
fn an_unreachable_server_is_named() {
    let port = free_port();
    let url = format!("nats://127.0.0.1:{port}/x");
    let config = JetStreamConfig {
        connect_timeout: Duration::from_secs(2),
        ..JetStreamConfig::default()
    };
    let e = JetStreamJournals::open(&url, config).unwrap_err();
    assert!(matches!(e, RemoteJournalError::Unreachable { .. }), "{e}");
    assert!(e.to_string().contains(&format!("127.0.0.1:{port}")), "{e}");
}

/// A 3-node cluster with a stream of 3 replicas: one node is killed while
/// records are appended; none acknowledged is lost and the appends go on.
#[test]
#[ignore = "needs nats-server: .ci/run installs it"]
fn a_cluster_loses_no_acknowledged_record_when_a_node_dies() {
    require();
    let mut nats = Nats::cluster();
    let url = format!("{}?replicas=3", nats.url("ha"));
    let config = JetStreamConfig {
        ack_timeout: Duration::from_secs(10),
        retries: 10,
        ..JetStreamConfig::default()
    };
    // The cluster elects its JetStream leader first.
    let remote = (0..60)
        .find_map(|_| match JetStreamJournals::open(&url, config.clone()) {
            Ok(r) => Some(r),
            Err(_) => {
                std::thread::sleep(Duration::from_millis(500));
                None
            }
        })
        .unwrap_or_else(|| panic!("the cluster did not come up:\n{}", nats.logs()));
    let (_d, _s, id, bytes) = local_journal(60);
    let lines: Vec<&[u8]> = bytes.split_inclusive(|&b| b == b'\n').collect();
    let mut acked = 0u64;
    for (i, line) in lines.iter().enumerate() {
        if i == 20 {
            nats.nodes[0].kill();
        }
        let a = remote
            .append(id.as_str(), i as u64, line)
            .unwrap_or_else(|e| panic!("record {} after a node died: {e}\n{}", i + 1, nats.logs()));
        acked += a.stored + a.adopted;
    }
    assert_eq!(acked, lines.len() as u64);
    let url2 = format!(
        "nats://127.0.0.1:{},127.0.0.1:{}/ha",
        nats.nodes[1].port, nats.nodes[2].port
    );
    // A new client on the surviving nodes: the streams the dead node led
    // elect new leaders first, which on a loaded machine can outlast one
    // request's timeout (CI saw "failed to get the bucket: timed out"), so
    // the reader is given the time an operator's retry would give it.
    let until = std::time::Instant::now() + Duration::from_secs(60);
    let read = loop {
        let got = JetStreamJournals::open(&url2, config.clone())
            .and_then(|reader| reader.read(id.as_str()));
        match got {
            Ok(read) => break read,
            Err(e) if std::time::Instant::now() < until => {
                eprintln!("reading after the node died: {e}; again");
                std::thread::sleep(Duration::from_millis(500));
            }
            Err(e) => panic!("reading after a node died: {e}\n{}", nats.logs()),
        }
    };
    assert_eq!(read.unwrap(), bytes);
}

/// The single server is killed while records are appended: what it holds
/// when it comes back is a verifiable prefix of what was sent, holding
/// every acknowledged record, and appending resumes from its end.
#[test]
#[ignore = "needs nats-server: .ci/run installs it"]
fn a_killed_server_leaves_a_verifiable_prefix_that_resumes() {
    require();
    let mut nats = Nats::single();
    let url = nats.url("kill");
    let (_d, _s, id, bytes) = local_journal(20_000);
    let lines: Vec<Vec<u8>> = bytes
        .split_inclusive(|&b| b == b'\n')
        .map(<[u8]>::to_vec)
        .collect();
    let config = JetStreamConfig {
        ack_timeout: Duration::from_secs(2),
        retries: 1,
        ..JetStreamConfig::default()
    };
    let writer = {
        let (url, id, lines, config) = (url.clone(), id.clone(), lines.clone(), config.clone());
        std::thread::spawn(move || {
            let remote = JetStreamJournals::open(&url, config).unwrap();
            let mut acked = 0u64;
            for (i, line) in lines.iter().enumerate() {
                match remote.append(id.as_str(), i as u64, line) {
                    Ok(_) => acked = i as u64 + 1,
                    Err(_) => break,
                }
            }
            acked
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    nats.nodes[0].kill();
    let acked = writer.join().unwrap();
    assert!(
        acked < lines.len() as u64,
        "the kill came after every append"
    );
    nats.nodes[0].start();
    let remote = (0..60)
        .find_map(|_| match JetStreamJournals::open(&url, config.clone()) {
            Ok(r) => Some(r),
            Err(_) => {
                std::thread::sleep(Duration::from_millis(250));
                None
            }
        })
        .unwrap_or_else(|| panic!("the server did not come back:\n{}", nats.logs()));
    let held = remote.read(id.as_str()).unwrap().unwrap();
    assert!(bytes.starts_with(&held), "a prefix of what was sent");
    let scan = scan_journal_bytes(std::path::Path::new("remote"), &held, id.as_str()).unwrap();
    let n = scan.records.len() as u64;
    assert!(n >= acked, "{n} records held, {acked} acknowledged");
    let rest: Vec<u8> = lines[usize::try_from(n).unwrap()..].concat();
    remote.append(id.as_str(), n, &rest).unwrap();
    assert_eq!(remote.read(id.as_str()).unwrap().unwrap(), bytes);
}
