//! Many journals read at once from JetStream (`RemoteJournals::read_many`,
//! one pass over the stream) against a real `nats-server` on a loopback
//! port: each journal handed is what a read of it alone returns, however
//! the sessions' records interleave in the stream.
//!
//! `#[ignore]`d: `--ignored` runs them with `nats-server` on PATH (`.ci/run`
//! installs it, and runs them again on a current server); they fail when it
//! is missing.

use std::collections::BTreeMap;

use cairn_journal::{JournalWriter, Meta, RecordBody, RemoteJournalError, RemoteJournals, User};
use cairn_remote::{JetStreamConfig, JetStreamJournals};
use cairn_store::{RunId, Store};
use cairn_testkit::nats::{require, Nats};

fn meta() -> Meta {
    Meta {
        run: String::new(),
        created: "2026-01-01T00:00:00Z".into(),
        workspace: "/tmp/ws".into(),
        name: Some("many".into()),
        fingerprint: None,
        fork: None,
        routing: None,
        system_file: None,
    }
}

fn open(url: &str) -> JetStreamJournals {
    JetStreamJournals::open(url, JetStreamConfig::default())
        .unwrap_or_else(|e| panic!("opening {url}: {e}"))
}

/// `n` local journals, session `i` of `i % 9 + 1` records: each one's
/// lines.
fn journals(store: &Store, n: usize) -> Vec<(RunId, Vec<Vec<u8>>)> {
    (0..n)
        .map(|i| {
            let id = RunId::new();
            let mut w = JournalWriter::create(store, &id, meta()).unwrap();
            for t in 0..i % 9 {
                let text = format!("session {i} turn {t} {}", "x".repeat(i * 7 % 300));
                w.append(&RecordBody::User(User { text, origin: None }))
                    .unwrap();
            }
            drop(w);
            let bytes = std::fs::read(store.journal_path(&id)).unwrap();
            let lines = bytes
                .split_inclusive(|&b| b == b'\n')
                .filter(|l| l.ends_with(b"\n"))
                .map(<[u8]>::to_vec)
                .collect();
            (id, lines)
        })
        .collect()
}

/// Publishes the journals record by record, taking turns, so every
/// session's records are spread over the stream between the others'.
fn publish_interleaved(remote: &JetStreamJournals, all: &[(RunId, Vec<Vec<u8>>)]) {
    let longest = all.iter().map(|(_, l)| l.len()).max().unwrap_or(0);
    for seq in 0..longest {
        for (id, lines) in all {
            if let Some(line) = lines.get(seq) {
                remote.append(id.as_str(), seq as u64, line).unwrap();
            }
        }
    }
}

fn read_all(
    remote: &JetStreamJournals,
    runs: &[(String, u64)],
) -> Result<BTreeMap<String, Vec<u8>>, RemoteJournalError> {
    let mut got = BTreeMap::new();
    remote.read_many(runs, &mut |run, lines| {
        assert!(
            got.insert(run.to_owned(), lines).is_none(),
            "{run} handed twice"
        );
        true
    })?;
    Ok(got)
}

#[test]
#[ignore = "needs nats-server: .ci/run installs it"]
fn many_journals_read_in_one_pass_are_each_as_read_alone() {
    require();
    let nats = Nats::single();
    let remote = open(&nats.url("many"));
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let all = journals(&store, 90);
    publish_interleaved(&remote, &all);

    // Every journal, each byte for byte what a read of it alone returns.
    let runs = remote.runs().unwrap();
    assert_eq!(runs.len(), all.len());
    let got = read_all(&remote, &runs).unwrap();
    assert_eq!(got.len(), all.len());
    for (id, lines) in &all {
        let alone = remote.read(id.as_str()).unwrap().unwrap();
        assert_eq!(got[id.as_str()], alone, "{id}");
        assert_eq!(alone, lines.concat(), "{id}");
    }

    // Asked for fewer records than a journal holds (it grew since it was
    // counted): its first ones, at least that many. A session the store
    // does not hold is not handed, nor are sessions not asked for.
    let fewer: Vec<(String, u64)> = runs
        .iter()
        .step_by(3)
        .map(|(id, n)| (id.clone(), n.saturating_sub(2).max(1)))
        .chain([(RunId::new().to_string(), 4)])
        .collect();
    let got = read_all(&remote, &fewer).unwrap();
    assert_eq!(got.len(), fewer.len() - 1);
    for (id, want) in &fewer[..fewer.len() - 1] {
        let (_, lines) = all.iter().find(|(i, _)| i.as_str() == id).unwrap();
        let handed = &got[id];
        let records = handed.iter().filter(|&&b| b == b'\n').count();
        assert!(records as u64 >= *want, "{id}: {records} < {want}");
        assert_eq!(*handed, lines[..records].concat(), "{id}");
    }

    // Asked for more records than a journal holds: handed whole at the end
    // of the pass.
    let (id, lines) = &all[7];
    let more = [(id.to_string(), lines.len() as u64 + 3)];
    let got = read_all(&remote, &more).unwrap();
    assert_eq!(got[id.as_str()], lines.concat());

    // Stopped by the caller: nothing more is handed.
    let mut handed = 0;
    remote
        .read_many(&runs, &mut |_, _| {
            handed += 1;
            handed < 5
        })
        .unwrap();
    assert_eq!(handed, 5);

    // A journal read in one pass is appended to after its end as read
    // (the end noted by the pass fences the append).
    let (id, lines) = all.iter().find(|(_, l)| l.len() == 4).unwrap();
    let got = read_all(&remote, &[(id.to_string(), 4)]).unwrap();
    assert_eq!(got[id.as_str()], lines.concat());
    let (mut w, _) = JournalWriter::open(&store, id).unwrap();
    w.append(&RecordBody::User(User {
        text: "one more".into(),
        origin: None,
    }))
    .unwrap();
    drop(w);
    let bytes = std::fs::read(store.journal_path(id)).unwrap();
    let fifth = bytes.split_inclusive(|&b| b == b'\n').nth(4).unwrap();
    let appended = remote.append(id.as_str(), 4, fifth).unwrap();
    assert_eq!(appended.stored, 1);
    let after = remote.read(id.as_str()).unwrap().unwrap();
    assert_eq!(after, [lines.concat(), fifth.to_vec()].concat());
}

#[test]
#[ignore = "needs nats-server: .ci/run installs it"]
fn a_damaged_journal_in_a_pass_is_named_not_handed() {
    require();
    let nats = Nats::single();
    let remote = open(&nats.url("hurt"));
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let all = journals(&store, 6);
    publish_interleaved(&remote, &all);
    // A message of two lines on a session's subject, by another client.
    let damaged = RunId::new();
    let port = nats.nodes[0].port;
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let client = async_nats::connect(format!("127.0.0.1:{port}"))
            .await
            .unwrap();
        let js = async_nats::jetstream::new(client);
        js.publish(format!("hurt.runs.{damaged}"), "{}\n{}\n".into())
            .await
            .unwrap()
            .await
            .unwrap();
    });
    let runs = remote.runs().unwrap();
    let mut handed = Vec::new();
    let e = remote
        .read_many(&runs, &mut |run, _| {
            handed.push(run.to_owned());
            true
        })
        .unwrap_err();
    assert!(
        matches!(&e, RemoteJournalError::Damaged { run, .. } if *run == damaged.to_string()),
        "{e}"
    );
    assert!(e.to_string().contains("not one line"), "{e}");
    assert!(!handed.contains(&damaged.to_string()));
}
