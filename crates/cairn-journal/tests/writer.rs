//! The writer: lock, torn-tail repair, poisoning, group commit.

mod common;

use std::io;

use cairn_journal::*;
use cairn_store::{RunId, Store};

#[test]
fn a_second_writer_is_refused_at_once_with_the_holder_named() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path()).unwrap();
    let id = RunId::new();
    let _w = JournalWriter::create(&store, &id, common::meta("/w")).unwrap();
    let started = std::time::Instant::now();
    let err = JournalWriter::open(&store, &id).unwrap_err();
    assert!(started.elapsed() < std::time::Duration::from_secs(1));
    match &err {
        JournalError::Locked {
            holder: Some(h), ..
        } => {
            assert_eq!(h.pid, std::process::id());
            assert!(!h.host.is_empty());
        }
        other => panic!("{other}"),
    }
    assert!(err
        .to_string()
        .contains(&format!("pid {}", std::process::id())));
}

#[test]
fn the_lock_is_released_when_the_writer_drops() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path()).unwrap();
    let id = RunId::new();
    drop(JournalWriter::create(&store, &id, common::meta("/w")).unwrap());
    let (mut w, scan) = JournalWriter::open(&store, &id).unwrap();
    assert_eq!(scan.records.len(), 1);
    assert_eq!(w.append(&common::user("x")).unwrap().seq, 2);
}

#[test]
fn the_writer_cuts_a_torn_tail_before_appending() {
    let d = tempfile::tempdir().unwrap();
    let (store, id, path) = common::sample(d.path());
    let good = std::fs::read(&path).unwrap();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    io::Write::write_all(&mut f, b"{\"v\":1,\"seq\":8,\"prev\":\"ab\0\0\0\0").unwrap();
    drop(f);
    let (mut w, scan) = JournalWriter::open(&store, &id).unwrap();
    assert_eq!(scan.torn.unwrap().offset as usize, good.len());
    assert_eq!(std::fs::metadata(&path).unwrap().len() as usize, good.len());
    w.append(&common::user("after repair")).unwrap();
    drop(w);
    let report = verify_journal(&path, id.as_str()).unwrap();
    assert!(
        report.ok() && !report.torn_tail && report.records == 8,
        "{report:?}"
    );
}

#[test]
fn damage_is_never_repaired_by_the_writer() {
    let d = tempfile::tempdir().unwrap();
    let (store, id, path) = common::sample(d.path());
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.iter().position(|&b| b == b'\n').unwrap() + 20;
    bytes[at] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let err = JournalWriter::open(&store, &id).unwrap_err();
    assert!(err.is_integrity(), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
}

struct FailSyncAfter {
    inner: Box<dyn JournalIo>,
    syncs_left: usize,
}

impl JournalIo for FailSyncAfter {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.inner.write_all(buf)
    }
    fn sync_data(&mut self) -> io::Result<()> {
        if self.syncs_left == 0 {
            return Err(io::Error::other("injected EIO"));
        }
        self.syncs_left -= 1;
        self.inner.sync_data()
    }
    fn discard(&mut self, len: u64) -> io::Result<()> {
        self.inner.discard(len)
    }
}

#[test]
fn a_failed_fsync_poisons_the_writer_and_it_never_retries() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path()).unwrap();
    let id = RunId::new();
    let mut w = JournalWriter::create(&store, &id, common::meta("/w")).unwrap();
    w.wrap_io(|inner| {
        Box::new(FailSyncAfter {
            inner,
            syncs_left: 1,
        })
    });
    w.append(&common::user("one")).unwrap();
    let err = w.append(&common::user("two")).unwrap_err();
    assert!(matches!(err, JournalError::Sync { .. }), "{err}");
    assert!(w.is_poisoned());
    let err = w.append(&common::user("three")).unwrap_err();
    assert!(matches!(err, JournalError::Poisoned { .. }), "{err}");
    assert_eq!(w.seq(), 2);
    let acked = w.len();
    drop(w);
    // The record whose fsync failed was cut from the file before the error
    // was returned: it is not in the page cache for the next writer to take
    // for a record, nor past the end a later sync would make durable.
    let path = store.journal_path(&id);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), acked);
    let (mut w, scan) = JournalWriter::open(&store, &id).unwrap();
    assert_eq!(scan.records.len(), 2);
    assert!(scan.torn.is_none());
    assert_eq!(w.append(&common::user("four")).unwrap().seq, 3);
    drop(w);
    let scan = read_journal(&path, id.as_str()).unwrap();
    let texts: Vec<_> = scan.records[1..]
        .iter()
        .map(|r| match &r.body {
            RecordBody::User(u) => u.text.as_str(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(texts, ["one", "four"]);
    assert!(verify_journal(&path, id.as_str()).unwrap().ok());
}

/// Writes the first half of what it is given, then fails (a disk that
/// fills in the middle of an append).
struct FailWriteHalfway {
    inner: Box<dyn JournalIo>,
}

impl JournalIo for FailWriteHalfway {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.inner.write_all(&buf[..buf.len() / 2])?;
        Err(io::Error::from_raw_os_error(28)) // ENOSPC
    }
    fn sync_data(&mut self) -> io::Result<()> {
        self.inner.sync_data()
    }
    fn discard(&mut self, len: u64) -> io::Result<()> {
        self.inner.discard(len)
    }
}

#[test]
fn a_failed_batch_or_copy_is_cut_from_the_file_and_the_next_writer_never_sees_it() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path()).unwrap();
    let id = RunId::new();
    let path = store.journal_path(&id);
    let mut w = JournalWriter::create(&store, &id, common::meta("/w")).unwrap();
    w.append(&common::user("kept")).unwrap();
    let acked = w.len();
    // A group commit whose fdatasync fails: none of its records stay.
    w.wrap_io(|inner| {
        Box::new(FailSyncAfter {
            inner,
            syncs_left: 0,
        })
    });
    let bodies: Vec<_> = (0..8).map(|i| common::user(&format!("lost {i}"))).collect();
    let err = w.append_batch(&bodies).unwrap_err();
    assert!(matches!(err, JournalError::Sync { .. }), "{err}");
    assert!(w.is_poisoned());
    assert_eq!(std::fs::metadata(&path).unwrap().len(), acked);
    drop(w);

    // Lines copied from another journal (`append_lines`) whose write stops
    // halfway: neither the whole lines nor the cut one stay.
    let (mut w, scan) = JournalWriter::open(&store, &id).unwrap();
    assert_eq!(scan.records.len(), 2);
    let other = Store::open(d.path().join("other")).unwrap();
    std::fs::create_dir_all(other.run_dir(&id)).unwrap();
    std::fs::write(other.journal_path(&id), std::fs::read(&path).unwrap()).unwrap();
    let (mut source, _) = JournalWriter::open(&other, &id).unwrap();
    for i in 0..4 {
        source
            .append(&common::user(&format!("copied {i}")))
            .unwrap();
    }
    source.trim().unwrap();
    drop(source);
    let copied = std::fs::read(other.journal_path(&id)).unwrap();
    w.wrap_io(|inner| Box::new(FailWriteHalfway { inner }));
    let err = w.append_lines(&copied[acked as usize..]).unwrap_err();
    assert!(matches!(err, JournalError::Write { .. }), "{err}");
    assert!(w.is_poisoned());
    drop(w);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), acked);
    let (mut w, scan) = JournalWriter::open(&store, &id).unwrap();
    assert_eq!(scan.records.len(), 2);
    assert!(scan.torn.is_none(), "nothing torn was left to cut");
    assert_eq!(w.append(&common::user("after")).unwrap().seq, 3);
    drop(w);
    assert!(verify_journal(&path, id.as_str()).unwrap().ok());
}

/// Fails every sync, and the cut that would discard the failed bytes too.
struct FailSyncAndCut {
    inner: Box<dyn JournalIo>,
}

impl JournalIo for FailSyncAndCut {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.inner.write_all(buf)
    }
    fn sync_data(&mut self) -> io::Result<()> {
        Err(io::Error::other("injected EIO"))
    }
    fn discard(&mut self, _: u64) -> io::Result<()> {
        Err(io::Error::other("injected EIO"))
    }
}

#[test]
fn a_writer_whose_cut_fails_too_stays_poisoned_and_reports_the_first_failure() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path()).unwrap();
    let id = RunId::new();
    let mut w = JournalWriter::create(&store, &id, common::meta("/w")).unwrap();
    w.wrap_io(|inner| Box::new(FailSyncAndCut { inner }));
    let err = w.append(&common::user("x")).unwrap_err();
    assert!(matches!(err, JournalError::Sync { .. }), "{err}");
    assert!(w.is_poisoned());
    let err = w.append(&common::user("y")).unwrap_err();
    assert!(matches!(err, JournalError::Poisoned { .. }), "{err}");
    assert_eq!(w.seq(), 1);
}

struct FailWrite;

impl JournalIo for FailWrite {
    fn write_all(&mut self, _: &[u8]) -> io::Result<()> {
        Err(io::Error::from_raw_os_error(28)) // ENOSPC
    }
    fn sync_data(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn discard(&mut self, _: u64) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_full_disk_poisons_the_writer_with_a_clear_message() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path()).unwrap();
    let id = RunId::new();
    let mut w = JournalWriter::create(&store, &id, common::meta("/w")).unwrap();
    w.wrap_io(|_| Box::new(FailWrite));
    let err = w.append(&common::user("x")).unwrap_err();
    assert!(err.to_string().contains("disk full"), "{err}");
    assert!(w.is_poisoned());
}

#[test]
fn a_batch_is_written_with_one_fsync_and_chains_like_single_appends() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path()).unwrap();
    let id = RunId::new();
    let mut w = JournalWriter::create(&store, &id, common::meta("/w")).unwrap();
    w.wrap_io(|inner| {
        Box::new(FailSyncAfter {
            inner,
            syncs_left: 1,
        })
    });
    let bodies: Vec<_> = (0..16).map(|i| common::user(&format!("m{i}"))).collect();
    let last = w.append_batch(&bodies).unwrap();
    assert_eq!(last.seq, 17);
    assert_eq!(last.hash, w.tail());
    drop(w);
    let report = verify_journal(&store.journal_path(&id), id.as_str()).unwrap();
    assert!(report.ok() && report.records == 17);
    assert_eq!(report.tail, last.hash);
}

#[test]
fn a_second_meta_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path()).unwrap();
    let id = RunId::new();
    let mut w = JournalWriter::create(&store, &id, common::meta("/w")).unwrap();
    let err = w
        .append(&RecordBody::Meta(Box::new(common::meta("/w"))))
        .unwrap_err();
    assert!(matches!(err, JournalError::InvalidAppend(_)));
    assert!(!w.is_poisoned());
}

#[test]
fn creating_an_existing_run_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path()).unwrap();
    let id = RunId::new();
    drop(JournalWriter::create(&store, &id, common::meta("/w")).unwrap());
    let err = JournalWriter::create(&store, &id, common::meta("/w")).unwrap_err();
    assert!(matches!(err, JournalError::Exists { .. }), "{err}");
}

#[test]
fn files_and_dirs_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let (store, id, path) = common::sample(d.path());
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(&store.lock_path(&id)), 0o600);
    assert_eq!(mode(&store.run_dir(&id)), 0o700);
    assert_eq!(mode(&store.runs_dir()), 0o700);
}

#[test]
fn a_fork_chains_from_its_pin() {
    let d = tempfile::tempdir().unwrap();
    let (store, parent, ppath) = common::sample(d.path());
    let report = verify_journal(&ppath, parent.as_str()).unwrap();
    let child = RunId::new();
    let mut meta = common::meta("/w");
    meta.fork = Some(ForkPin {
        parent: parent.to_string(),
        seq: 7,
        hash: report.tail,
    });
    let mut w = JournalWriter::create(&store, &child, meta).unwrap();
    w.append(&common::user("diverge")).unwrap();
    drop(w);
    let r = verify_journal(&store.journal_path(&child), child.as_str()).unwrap();
    assert!(r.ok() && r.records == 2, "{r:?}");
}

#[test]
fn records_appended_as_a_group_are_what_a_reader_reads() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path()).unwrap();
    let id = RunId::new();
    let mut w = JournalWriter::create(&store, &id, common::meta("/w")).unwrap();
    let bodies = vec![
        RecordBody::User(User {
            text: "one".into(),
            origin: None,
        }),
        RecordBody::User(User {
            text: "two".into(),
            origin: None,
        }),
        RecordBody::User(User {
            text: "three".into(),
            origin: None,
        }),
    ];
    let written = w.append_records(bodies).unwrap();
    drop(w);
    let scan = read_journal(&store.journal_path(&id), id.as_str()).unwrap();
    assert_eq!(scan.records.len(), 4);
    assert_eq!(&scan.records[1..], &written[..]);
}

#[test]
fn appends_overwrite_preallocated_zeros_that_are_cut_when_the_writer_closes() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let id = RunId::new();
    let mut w = JournalWriter::create(&store, &id, common::meta("/w")).unwrap();
    for i in 0..20 {
        w.append(&common::user(&format!("record {i}"))).unwrap();
    }
    let path = store.journal_path(&id);
    let physical = std::fs::metadata(&path).unwrap().len();
    assert_eq!(physical, PREALLOCATE_STEP, "the file is extended in steps");
    assert!(w.len() < physical);
    // While it runs: readers see the records and a preallocated tail, which
    // verify tells apart from a torn one; the ends are read past the zeros.
    let scan = read_journal(&path, id.as_str()).unwrap();
    assert_eq!(scan.records.len(), 21);
    let torn = scan.torn.unwrap();
    assert!(torn.zeros && torn.offset == w.len());
    let report = verify_journal(&path, id.as_str()).unwrap();
    assert!(report.ok() && report.preallocated_tail && !report.torn_tail);
    let ends = read_ends(&path, id.as_str())
        .unwrap()
        .expect("the ends past the zeros");
    assert_eq!(ends.tail.last().unwrap().seq, 21);
    let logical = w.len();
    drop(w);
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        logical,
        "the zeros are cut"
    );
    let report = verify_journal(&path, id.as_str()).unwrap();
    assert!(report.ok() && !report.preallocated_tail && !report.torn_tail);
    // A writer that died with its zeros in place: the next one cuts them.
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(logical + 4096).unwrap();
    drop(f);
    let (mut w, scan) = JournalWriter::open(&store, &id).unwrap();
    assert!(scan.torn.is_some_and(|t| t.zeros && t.len == 4096));
    w.append(&common::user("after")).unwrap();
    drop(w);
    let scan = read_journal(&path, id.as_str()).unwrap();
    assert_eq!(scan.records.len(), 22);
    assert!(scan.torn.is_none());
}
