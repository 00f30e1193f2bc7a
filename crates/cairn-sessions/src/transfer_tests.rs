use super::*;

fn h(n: u8) -> ChainHash {
    ChainHash([n; 32])
}

/// How two copies of a journal compare, by their chain hashes h(0..=n).
#[test]
fn plans_from_chain_hashes() {
    let src = [h(0), h(1), h(2), h(3)];
    for (dst, want) in [
        (None, Plan::Create),
        (Some(vec![h(0), h(1)]), Plan::Append),
        (Some(vec![h(0), h(1), h(2)]), Plan::Append),
        (Some(vec![h(0), h(1), h(2), h(3)]), Plan::UpToDate),
        (Some(vec![h(0), h(1), h(2), h(3), h(4)]), Plan::Ahead),
        (Some(vec![h(0), h(1), h(9)]), Plan::Diverged(2)),
        (Some(vec![h(0), h(1), h(9), h(9), h(9)]), Plan::Diverged(2)),
        (Some(vec![h(0), h(9)]), Plan::Diverged(1)),
        // Another genesis (another fork pin): the first record differs.
        (Some(vec![h(7), h(8)]), Plan::Diverged(1)),
    ] {
        assert_eq!(plan(&src, dst.as_deref()), want, "{dst:?}");
    }
}

use cairn_journal::{Cost, Meta, ModelCall, User};

struct Two {
    dir: tempfile::TempDir,
    a: Store,
    b: Store,
}

fn stores() -> Two {
    let dir = tempfile::tempdir().unwrap();
    let a = Store::open(dir.path().join("a")).unwrap();
    let b = Store::open(dir.path().join("b")).unwrap();
    Two { dir, a, b }
}

fn meta() -> Meta {
    Meta {
        run: String::new(),
        created: "2026-01-01T00:00:00Z".into(),
        workspace: "/tmp/ws".into(),
        name: Some("copied".into()),
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

fn call(request: &ObjectHash, response: &ObjectHash) -> RecordBody {
    RecordBody::ModelCall(ModelCall {
        endpoint: "/v1/chat/completions".into(),
        key: "k".into(),
        request: Some(request.to_hex()),
        response: Some(response.to_hex()),
        status: 200,
        cost: Cost::ZERO,
        ..ModelCall::default()
    })
}

fn noise(len: usize, mut x: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn copy(from: &Store, to: &Store, id: &RunId) -> Result<TransferReport, SessionError> {
    transfer(
        from,
        to,
        std::slice::from_ref(id),
        &cairn_objects::NoProgress,
    )
}

fn append(store: &Store, id: &RunId, text: &str) {
    let (mut w, _) = JournalWriter::open(store, id).unwrap();
    w.append(&user(text)).unwrap();
    w.trim().unwrap();
}

/// Every file below `dir` with its length, mtime and bytes.
fn files(dir: &Path) -> Vec<(PathBuf, u64, std::time::SystemTime, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                todo.push(p);
            } else {
                let bytes = std::fs::read(&p).unwrap_or_default();
                out.push((p, m.len(), m.modified().unwrap(), bytes));
            }
        }
    }
    out.sort();
    out
}

/// A session whose records name a blob and a chunked body: both arrive, the
/// journal is byte for byte the source's, a repeat reads no body and writes
/// nothing, and new records (either way) are appended exactly.
#[test]
fn a_session_and_the_bodies_it_names_are_copied_exactly_and_once() {
    let t = stores();
    let pool = ObjectPool::open(&t.a).unwrap();
    let lock = StoreLock::shared(&t.a).unwrap();
    let request = pool.put_bytes(&lock, b"{\"model\":\"m\"}").unwrap().hash;
    let batch = pool.batch(&lock);
    let response = batch.put_body(&noise(200 << 10, 7)).unwrap().hash;
    batch.commit(&cairn_objects::NoProgress).unwrap();
    drop(lock);
    assert!(pool.chunk_list(&response).unwrap().is_some());

    let id = RunId::new();
    let mut w = JournalWriter::create(&t.a, &id, meta()).unwrap();
    w.append_batch(&[user("hello"), call(&request, &response)])
        .unwrap();
    w.trim().unwrap();
    drop(w);

    let r = copy(&t.a, &t.b, &id).unwrap();
    let s = &r.sessions[0];
    assert_eq!(s.status, TransferStatus::Copied);
    // The request, the response's chunk list and its chunks.
    let list = pool.chunk_list(&response).unwrap().unwrap();
    let chunks = list
        .iter()
        .map(|c| c.hash)
        .collect::<std::collections::HashSet<_>>()
        .len() as u64;
    assert_eq!((s.records_copied, s.records), (3, 3));
    assert_eq!(s.objects_copied, 2 + chunks);
    assert!(s.bytes_copied > 0);
    assert_eq!(r.objects_copied, 2 + chunks);
    let journal = |st: &Store| std::fs::read(st.journal_path(&id)).unwrap();
    assert_eq!(journal(&t.a), journal(&t.b));
    let there = ObjectPool::at(&t.b);
    assert_eq!(there.get(&request).unwrap(), b"{\"model\":\"m\"}");
    assert_eq!(there.get(&response).unwrap(), noise(200 << 10, 7));
    // Listed there, from a projection the copy wrote.
    assert!(t.b.meta_path(&id).is_file());
    let listed = crate::list(&t.b).unwrap();
    assert_eq!(listed[0].tail, s.tail);

    // Again: nothing read (the source's objects are garbage now), nothing
    // written.
    for h in [&request, &response] {
        std::fs::write(pool.path_of(h), b"not an object").unwrap();
    }
    let before = files(t.b.root());
    let r = copy(&t.a, &t.b, &id).unwrap();
    assert_eq!(r.sessions[0].status, TransferStatus::UpToDate);
    assert_eq!((r.objects_copied, r.bytes_copied), (0, 0));
    assert_eq!(r.sessions[0].records_copied, 0);
    assert_eq!(files(t.b.root()), before);

    // New records in the source: only they are copied.
    append(&t.a, &id, "more");
    let r = copy(&t.a, &t.b, &id).unwrap();
    assert_eq!(r.sessions[0].records_copied, 1);
    assert_eq!(r.sessions[0].records, 4);
    assert_eq!(journal(&t.a), journal(&t.b));

    // The destination ahead: reported, nothing copied; the other way round
    // brings the record back.
    append(&t.b, &id, "written there");
    let before = files(t.b.root());
    let r = copy(&t.a, &t.b, &id).unwrap();
    assert_eq!(r.sessions[0].status, TransferStatus::RemoteAhead);
    assert_eq!(r.sessions[0].records, 5);
    assert_eq!(files(t.b.root()), before);
    let r = copy(&t.b, &t.a, &id).unwrap();
    assert_eq!(r.sessions[0].records_copied, 1);
    assert_eq!(journal(&t.a), journal(&t.b));

    // Diverged: refused, the destination untouched.
    append(&t.a, &id, "here");
    append(&t.b, &id, "there");
    let before = files(t.b.root());
    match copy(&t.a, &t.b, &id) {
        Err(SessionError::Diverged { run, seq }) => assert_eq!((run, seq), (id.to_string(), 6)),
        other => panic!("{other:?}"),
    }
    assert_eq!(files(t.b.root()), before);
}

/// A destination whose journal another process writes is refused, naming
/// the holder, when records must be appended.
#[test]
fn an_append_waits_for_no_writer() {
    let t = stores();
    let id = RunId::new();
    drop(JournalWriter::create(&t.a, &id, meta()).unwrap());
    copy(&t.a, &t.b, &id).unwrap();
    append(&t.a, &id, "more");
    let (_held, _) = JournalWriter::open(&t.b, &id).unwrap();
    match copy(&t.a, &t.b, &id) {
        Err(SessionError::Journal(JournalError::Locked { holder, .. })) => {
            assert_eq!(holder.unwrap().pid, std::process::id())
        }
        other => panic!("{other:?}"),
    }
}

/// A source that does not verify, or misses an object, writes no journal.
#[test]
fn a_damaged_source_or_a_missing_object_writes_no_journal() {
    let t = stores();
    let id = RunId::new();
    let mut w = JournalWriter::create(&t.a, &id, meta()).unwrap();
    w.append_batch(&[user("one"), user("two"), user("three")])
        .unwrap();
    w.trim().unwrap();
    drop(w);
    let path = t.a.journal_path(&id);
    let good = std::fs::read(&path).unwrap();
    let mut bad = good.clone();
    let at = bad.windows(3).position(|w| w == b"two").unwrap();
    bad[at] = b'T';
    std::fs::write(&path, &bad).unwrap();
    match copy(&t.a, &t.b, &id) {
        Err(SessionError::Journal(JournalError::Damaged { seq, .. })) => assert_eq!(seq, 3),
        other => panic!("{other:?}"),
    }
    assert!(!t.b.run_dir(&id).exists());

    let id = RunId::new();
    let absent = ObjectHash::of(b"never stored");
    let mut w = JournalWriter::create(&t.a, &id, meta()).unwrap();
    w.append(&call(&absent, &absent)).unwrap();
    drop(w);
    match copy(&t.a, &t.b, &id) {
        Err(SessionError::SourceObjectMissing { hash, run, .. }) => {
            assert_eq!((hash, run), (absent, id.to_string()))
        }
        other => panic!("{other:?}"),
    }
    assert!(!t.b.journal_path(&id).exists());
}

/// A fork is copied after its parent, and verifies there.
#[test]
fn a_fork_brings_its_parent_first() {
    let t = stores();
    let parent = RunId::new();
    let mut w = JournalWriter::create(&t.a, &parent, meta()).unwrap();
    w.append(&user("shared")).unwrap();
    w.trim().unwrap();
    drop(w);
    let (child, w, _) = crate::fork(&t.a, &parent, None, None).unwrap();
    drop(w);
    let r = copy(&t.a, &t.b, &child).unwrap();
    let ids: Vec<&str> = r.sessions.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, [parent.as_str(), child.as_str()]);
    for id in [&parent, &child] {
        assert!(crate::verify(&t.b, id).unwrap().ok(), "{id}");
        assert_eq!(
            std::fs::read(t.a.journal_path(id)).unwrap(),
            std::fs::read(t.b.journal_path(id)).unwrap()
        );
    }
    let listed = crate::list(&t.b).unwrap();
    assert!(listed.iter().all(|s| s.valid), "{listed:?}");

    // Without its parent, a fork is not copied at all.
    let c = Store::open(t.dir.path().join("c")).unwrap();
    std::fs::remove_dir_all(t.a.run_dir(&parent)).unwrap();
    match copy(&t.a, &c, &child) {
        Err(SessionError::ForkPrefix { run, ancestor, .. }) => {
            assert_eq!((run, ancestor), (child.to_string(), parent.to_string()))
        }
        other => panic!("{other:?}"),
    }
    assert!(!c.run_dir(&child).exists());
}

/// A symlink inside the destination is never written through.
#[test]
fn a_symlink_in_the_destination_is_refused() {
    let t = stores();
    let id = RunId::new();
    drop(JournalWriter::create(&t.a, &id, meta()).unwrap());
    let outside = t.dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, t.b.run_dir(&id)).unwrap();
    match copy(&t.a, &t.b, &id) {
        Err(SessionError::NotPlain { path, .. }) => assert_eq!(path, t.b.run_dir(&id)),
        other => panic!("{other:?}"),
    }
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
}

/// A manifest is written once: one the destination holds with other bytes
/// is refused, both files named, and nothing of the session is written.
#[test]
fn a_manifest_with_other_bytes_is_refused() {
    let t = stores();
    let id = RunId::new();
    drop(JournalWriter::create(&t.a, &id, meta()).unwrap());
    let name = "01ARZ3NDEKTSV4RRFFQ69G5FAV.json";
    let manifest = |label: &str| {
        format!(
            "{{\"version\":1,\"id\":\"01ARZ3NDEKTSV4RRFFQ69G5FAV\",\"parent\":null,\"label\":\"{label}\",\"created\":\"2026-01-01T00:00:00Z\",\"files\":0,\"bytes\":0,\"entries\":{{}},\"skipped\":[]}}"
        )
    };
    for (store, label) in [(&t.a, "post:exec:1"), (&t.b, "post:exec:2")] {
        std::fs::create_dir_all(store.snapshots_dir(&id)).unwrap();
        std::fs::write(store.snapshots_dir(&id).join(name), manifest(label)).unwrap();
    }
    let before = files(t.b.root());
    match copy(&t.a, &t.b, &id) {
        Err(SessionError::ManifestConflict {
            source_path,
            destination_path,
        }) => {
            assert_eq!(source_path, t.a.snapshots_dir(&id).join(name));
            assert_eq!(destination_path, t.b.snapshots_dir(&id).join(name));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(files(t.b.root()), before);
    // The same bytes are no conflict: the manifest is not written again.
    std::fs::write(t.b.snapshots_dir(&id).join(name), manifest("post:exec:1")).unwrap();
    let r = copy(&t.a, &t.b, &id).unwrap();
    assert_eq!(r.sessions[0].manifests_copied, 0);
    assert_eq!(r.sessions[0].status, TransferStatus::Copied);
}

/// Sessions copied side by side (how a push to a remote store copies
/// them): forks go in waves after their ancestors, every session arrives
/// whole and in lineage order in the report, and a session that fails is
/// the error while the others are copied complete.
#[test]
fn sessions_copied_side_by_side_keep_forks_after_their_ancestors() {
    let t = stores();
    let mut roots = Vec::new();
    for i in 0..12 {
        let id = RunId::new();
        let mut w = JournalWriter::create(&t.a, &id, meta()).unwrap();
        w.append_batch(&[user(&format!("root {i}")), user("two")])
            .unwrap();
        w.trim().unwrap();
        roots.push(id);
    }
    let fork_of = |parent: &RunId| {
        let (child, w, _) = crate::fork(&t.a, parent, None, None).unwrap();
        drop(w);
        append(&t.a, &child, "forked");
        child
    };
    let f1 = fork_of(&roots[0]);
    let f2 = fork_of(&f1);
    let f3 = fork_of(&f2);
    let g1 = fork_of(&roots[7]);
    // Asked for forks first: their ancestors still come first.
    let asked: Vec<RunId> = [f3.clone(), g1.clone()]
        .into_iter()
        .chain(roots.iter().cloned())
        .collect();
    let source = StoreSource::new(&t.a);
    let order = lineage_order(&source, &asked).unwrap();
    let waves = push::waves(&order);
    let named =
        |w: &[usize]| -> BTreeSet<RunId> { w.iter().map(|&i| order[i].0.clone()).collect() };
    assert_eq!(waves.len(), 4, "{waves:?}");
    assert_eq!(named(&waves[0]), roots.iter().cloned().collect());
    assert_eq!(named(&waves[1]), BTreeSet::from([f1.clone(), g1.clone()]));
    assert_eq!(named(&waves[2]), BTreeSet::from([f2.clone()]));
    assert_eq!(named(&waves[3]), BTreeSet::from([f3.clone()]));

    let r = push::copy_side_by_side(
        &source,
        || StoreDest::new(&t.b),
        &asked,
        &cairn_objects::NoProgress,
    )
    .unwrap();
    let ids: Vec<RunId> = r
        .sessions
        .iter()
        .map(|s| RunId::parse(&s.id).unwrap())
        .collect();
    assert_eq!(
        ids,
        order.iter().map(|(id, _)| id.clone()).collect::<Vec<_>>()
    );
    for (id, _) in &order {
        assert!(crate::verify(&t.b, id).unwrap().ok(), "{id}");
        assert_eq!(
            std::fs::read(t.a.journal_path(id)).unwrap(),
            std::fs::read(t.b.journal_path(id)).unwrap()
        );
    }
    // Again: nothing to copy.
    let again = push::copy_side_by_side(
        &source,
        || StoreDest::new(&t.b),
        &asked,
        &cairn_objects::NoProgress,
    )
    .unwrap();
    assert!(again
        .sessions
        .iter()
        .all(|s| s.status == TransferStatus::UpToDate));

    // Two damaged sessions among new ones: the first in lineage order is
    // the error, neither is written, the sessions taken before it are
    // copied, and no session is left in part.
    let c = Store::open(t.dir.path().join("c")).unwrap();
    for bad in [&roots[3], &roots[9]] {
        let path = t.a.journal_path(bad);
        let mut bytes = std::fs::read(&path).unwrap();
        // Record 1's text: record 2's `prev` no longer matches.
        let at = bytes.windows(4).position(|w| w == b"root").unwrap();
        bytes[at] = b'R';
        std::fs::write(&path, &bytes).unwrap();
    }
    match push::copy_side_by_side(
        &source,
        || StoreDest::new(&c),
        &roots,
        &cairn_objects::NoProgress,
    ) {
        Err(SessionError::Journal(JournalError::Damaged { path, .. })) => {
            assert_eq!(path, t.a.journal_path(&roots[3]))
        }
        other => panic!("{other:?}"),
    }
    for (i, id) in roots.iter().enumerate() {
        let path = c.journal_path(id);
        if i == 3 || i == 9 {
            assert!(!path.exists(), "{id}");
        } else if i < 3 || path.exists() {
            assert!(crate::verify(&c, id).unwrap().ok(), "{id}");
            assert_eq!(
                std::fs::read(t.a.journal_path(id)).unwrap(),
                std::fs::read(&path).unwrap()
            );
        }
    }
}
