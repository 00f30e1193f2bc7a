//! Forks (DESIGN §3.3): a shared past, a divergent future, no copied history.
//!
//! A fork's `meta` pins `{parent, seq, hash}` — the parent's chain hash at
//! the last record they share — and its genesis derives from that pin, so the
//! child's chain continues the parent's prefix without copying it.
//!
//! A fork's **receipt** is the list of pins of every ancestor prefix it
//! consumed, nearest first, each with the byte range of the pinned line. A
//! lister checks a pin in O(1) by reading that one line: the chain makes
//! `h(seq)` = SHA-256(prev of line seq ‖ line seq) checkable from it alone.
//! Appends to a parent leave its prefix, and so the pin, intact; a changed or
//! truncated pinned line fails the check. A resume verifies every ancestor
//! prefix in full.

use cairn_journal::{scan_journal_bytes, ChainHash, ForkPin, JournalError, Record, RecordBody};
use cairn_store::{RunId, Store};
use serde::{Deserialize, Serialize};

use crate::lineage_lock::LineageLock;
use crate::SessionError;

/// The deepest fork chain followed (a guard against crafted cycles).
pub const MAX_DEPTH: usize = 10_000;

/// One ancestor prefix a fork consumed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pin {
    /// The ancestor run.
    pub run: String,
    /// The last record of it that is shared.
    pub seq: u64,
    /// Its `h(seq)`, hex.
    pub hash: String,
    /// Byte offset of line `seq` in the ancestor's journal.
    pub offset: u64,
    /// Length of that line without its newline.
    pub len: u64,
}

/// Where line `seq` ends in `bytes` (index of its `\n`), and where it starts.
pub(crate) fn line_bounds(bytes: &[u8], seq: u64) -> Option<(usize, usize)> {
    let mut start = 0usize;
    for n in 1..=seq {
        let end = start + bytes[start..].iter().position(|&b| b == b'\n')?;
        if n == seq {
            return Some((start, end));
        }
        start = end + 1;
    }
    None
}

/// The verified records 1..=seq of `run` and the pin of that prefix.
fn prefix(store: &Store, run: &str, seq: u64) -> Result<(Vec<Record>, Pin), String> {
    let id = RunId::parse(run).map_err(|e| e.to_string())?;
    let path = store.journal_path(&id);
    let bytes = std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let (start, end) = line_bounds(&bytes, seq)
        .ok_or_else(|| format!("it has fewer than {seq} complete records"))?;
    let scan = scan_journal_bytes(&path, &bytes[..end + 1], run).map_err(|e| e.to_string())?;
    let pin = Pin {
        run: run.to_owned(),
        seq,
        hash: scan.tail.to_hex(),
        offset: start as u64,
        len: (end - start) as u64,
    };
    Ok((scan.records, pin))
}

/// The records a session folds over — its ancestors' pinned prefixes, root
/// first, then its own — and its receipt (nearest pin first).
///
/// # Errors
/// [`SessionError::ForkPrefix`] when an ancestor prefix is missing, changed,
/// truncated, or does not hash to its pin.
pub fn lineage(
    store: &Store,
    run: &str,
    own: &[Record],
) -> Result<(Vec<Record>, Vec<Pin>), SessionError> {
    let mut chain: Vec<Vec<Record>> = vec![own.to_vec()];
    let mut receipt = Vec::new();
    let mut fork = fork_of(own);
    let mut seen = std::collections::HashSet::new();
    while let Some(pin) = fork {
        let fail = |reason: String| SessionError::ForkPrefix {
            run: run.to_owned(),
            ancestor: pin.parent.clone(),
            seq: pin.seq,
            reason,
        };
        if !seen.insert(pin.parent.clone()) || seen.len() > MAX_DEPTH {
            return Err(fail(
                "the fork chain loops or is deeper than cairn follows".into(),
            ));
        }
        let (records, got) = prefix(store, &pin.parent, pin.seq).map_err(&fail)?;
        if got.hash != pin.hash.to_hex() {
            return Err(fail(format!(
                "its chain hash there is {} but the fork pinned {}",
                &got.hash[..16],
                &pin.hash.to_hex()[..16]
            )));
        }
        fork = fork_of(&records);
        chain.push(records);
        receipt.push(got);
    }
    let all = chain.into_iter().rev().flatten().collect();
    Ok((all, receipt))
}

pub(crate) fn fork_of(records: &[Record]) -> Option<ForkPin> {
    match records.first().map(|r| &r.body) {
        Some(RecordBody::Meta(m)) => m.fork.clone(),
        _ => None,
    }
}

/// The longest pinned line a receipt may name; a longer one is not believed
/// (a receipt is projection bytes: its lengths size reads).
pub(crate) const MAX_PIN_LINE: u64 = 64 * 1024 * 1024;

/// Checks a receipt in O(depth) small reads: each pinned line is still there
/// and still hashes to its pin.
///
/// # Errors
/// The first pin that fails, with the reason (a pin whose length or offset
/// is out of bounds among them).
pub fn check_receipt(store: &Store, receipt: &[Pin]) -> Result<(), (Pin, String)> {
    for pin in receipt {
        check_pin(store, pin).map_err(|f| match f {
            PinFault::Unusable(why) | PinFault::Broken(why) => (pin.clone(), why),
        })?;
    }
    Ok(())
}

/// Why a projection's receipt was not accepted.
#[derive(Debug)]
pub(crate) enum ReceiptFault {
    /// The receipt is not one the record vouches for: it does not follow the
    /// fork pins of the `meta` records, or it names a line no journal could
    /// hold. The projection is ignored and rebuilt from the record.
    Unusable,
    /// An ancestor's pinned line changed or is gone: the fork is invalid.
    Broken(Pin, String),
}

/// Checks a projection's receipt against the lineage the records attest:
/// the first pin must be `fork` (the fork's own `meta` pin), each next pin
/// the fork pin in the `meta` of the ancestor before it, and the last
/// ancestor a root; and every pinned line must still hash to its pin.
pub(crate) fn check_lineage(
    store: &Store,
    fork: Option<&ForkPin>,
    receipt: &[Pin],
) -> Result<(), ReceiptFault> {
    let mut expected = fork.cloned();
    for pin in receipt {
        // More ancestors than the forks pin, or another one: not the record's.
        let Some(e) = expected.take() else {
            return Err(ReceiptFault::Unusable);
        };
        if e.parent != pin.run || e.seq != pin.seq || e.hash.to_hex() != pin.hash {
            return Err(ReceiptFault::Unusable);
        }
        check_pin(store, pin).map_err(|f| match f {
            PinFault::Unusable(_) => ReceiptFault::Unusable,
            PinFault::Broken(why) => ReceiptFault::Broken(pin.clone(), why),
        })?;
        let id = RunId::parse(&pin.run).map_err(|_| ReceiptFault::Unusable)?;
        let head = cairn_journal::read_head(&store.journal_path(&id))
            .map_err(|e| ReceiptFault::Broken(pin.clone(), e.to_string()))?;
        if let RecordBody::Meta(m) = head.record.body {
            expected = m.fork;
        }
    }
    // A receipt that stops before the root leaves ancestors unchecked.
    match expected {
        None => Ok(()),
        Some(_) => Err(ReceiptFault::Unusable),
    }
}

enum PinFault {
    Unusable(String),
    Broken(String),
}

fn check_pin(store: &Store, pin: &Pin) -> Result<(), PinFault> {
    let id = RunId::parse(&pin.run).map_err(|e| PinFault::Unusable(e.to_string()))?;
    if pin.len > MAX_PIN_LINE {
        return Err(PinFault::Unusable(format!(
            "the receipt names a pinned record of {} bytes, more than any cairn writes",
            pin.len
        )));
    }
    let end = pin
        .offset
        .checked_add(pin.len)
        .and_then(|e| e.checked_add(1))
        .ok_or_else(|| PinFault::Unusable("the receipt's offset is out of range".into()))?;
    let f = std::fs::File::open(store.journal_path(&id))
        .map_err(|e| PinFault::Broken(format!("the parent journal cannot be opened: {e}")))?;
    let size = f
        .metadata()
        .map_err(|e| PinFault::Broken(format!("the parent journal cannot be read: {e}")))?
        .len();
    if end > size {
        return Err(PinFault::Broken(
            "the parent journal was truncated before the pinned record".into(),
        ));
    }
    // Bounded by MAX_PIN_LINE and by the file's real size.
    let mut buf = vec![0u8; usize::try_from(pin.len + 1).unwrap_or(0)];
    {
        use std::os::unix::fs::FileExt;
        f.read_exact_at(&mut buf, pin.offset).map_err(|_| {
            PinFault::Broken("the parent journal was truncated before the pinned record".into())
        })?;
    }
    if buf.last() != Some(&b'\n') {
        return Err(PinFault::Broken("the pinned record changed length".into()));
    }
    let line = &buf[..buf.len() - 1];
    let header: Result<serde_json::Value, _> = serde_json::from_slice(line);
    let Ok(header) = header else {
        return Err(PinFault::Broken(
            "the pinned record no longer parses".into(),
        ));
    };
    let prev = header["prev"].as_str().and_then(ChainHash::from_hex);
    let seq = header["seq"].as_u64();
    match (prev, seq) {
        (Some(prev), Some(s)) if s == pin.seq && prev.next(line).to_hex() == pin.hash => Ok(()),
        _ => Err(PinFault::Broken("the pinned record's bytes changed".into())),
    }
}

/// Pins `parent` at `seq` (default: its last record) for a new fork.
///
/// # Errors
/// [`SessionError::BadForkPoint`], or read and verify errors of the parent.
pub fn pin_at(
    store: &Store,
    parent: &RunId,
    seq: Option<u64>,
) -> Result<(ForkPin, Pin), SessionError> {
    let read = ParentRead::of(store, parent)?;
    let (fork_pin, pin, _) = read.fork_point(seq)?;
    Ok((fork_pin, pin))
}

/// A parent's journal, read once and verified: every answer about the
/// fork point comes from these bytes, so no second read can disagree with
/// the first (a journal cut or rewritten in between).
pub(crate) struct ParentRead {
    parent: RunId,
    bytes: Vec<u8>,
    scan: cairn_journal::Scan,
}

impl ParentRead {
    /// Reads and verifies `parent`'s journal.
    pub(crate) fn of(store: &Store, parent: &RunId) -> Result<ParentRead, SessionError> {
        let path = store.journal_path(parent);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(JournalError::NotFound {
                    run: parent.to_string(),
                }
                .into())
            }
            Err(source) => {
                return Err(JournalError::Io {
                    action: "reading",
                    path,
                    source,
                }
                .into())
            }
        };
        let scan = scan_journal_bytes(&path, &bytes, parent.as_str())?;
        Ok(ParentRead {
            parent: parent.clone(),
            bytes,
            scan,
        })
    }

    /// The pin of the fork point `seq` (default: the last record), the
    /// receipt entry of that prefix, and the records it shares.
    ///
    /// # Errors
    /// [`SessionError::BadForkPoint`] when `seq` is 0 or past the records
    /// read (never a panic, whatever the bytes).
    pub(crate) fn fork_point(
        &self,
        seq: Option<u64>,
    ) -> Result<(ForkPin, Pin, &[Record]), SessionError> {
        let records = self.scan.records.len() as u64;
        let seq = seq.unwrap_or(records);
        let bad = || SessionError::BadForkPoint {
            run: self.parent.to_string(),
            records,
        };
        let n = usize::try_from(seq).map_err(|_| bad())?;
        if n == 0 {
            return Err(bad());
        }
        let upto = self.scan.records.get(..n).ok_or_else(bad)?;
        // h(seq): the `prev` of the record after it, or the tail for the last.
        let hash = match self.scan.records.get(n) {
            Some(next) => next.prev,
            None => self.scan.tail,
        };
        let (start, end) = line_bounds(&self.bytes, seq).ok_or_else(bad)?;
        let pin = Pin {
            run: self.parent.to_string(),
            seq,
            hash: hash.to_hex(),
            offset: start as u64,
            len: (end - start) as u64,
        };
        let fork_pin = ForkPin {
            parent: self.parent.to_string(),
            seq,
            hash,
        };
        Ok((fork_pin, pin, upto))
    }
}

/// Creates a fork of `parent` at `seq` (default: its last record): a new run
/// whose `meta` pins the parent's prefix and copies its configuration
/// (workspace, fingerprint, routing), followed by a `terminal: suspended`
/// record so it lists as resumable. Copies no records.
///
/// # Errors
/// [`SessionError::BadForkPoint`], read and verify errors of the parent's
/// lineage, write errors.
pub fn fork(
    store: &Store,
    parent: &RunId,
    seq: Option<u64>,
    workspace: Option<String>,
) -> Result<(RunId, cairn_journal::JournalWriter, cairn_journal::RunState), SessionError> {
    // Held until the fork's journal and projection exist: a removal of the
    // parent waits, or is waited for (then the parent is not found).
    let lineage = LineageLock::shared(store)?;
    fork_held(store, parent, seq, workspace, &lineage)
}

/// [`fork`], with the lineage lock held by the caller.
pub(crate) fn fork_held(
    store: &Store,
    parent: &RunId,
    seq: Option<u64>,
    workspace: Option<String>,
    _lineage: &LineageLock,
) -> Result<(RunId, cairn_journal::JournalWriter, cairn_journal::RunState), SessionError> {
    use cairn_journal::{JournalWriter, Meta, Terminal, TerminalReason};
    // The parent is read once; its configuration as of the fork point is
    // folded over its own ancestry.
    let read = ParentRead::of(store, parent)?;
    let (fork_pin, own_pin, upto) = read.fork_point(seq)?;
    let (records, parent_receipt) = lineage(store, parent.as_str(), upto)?;
    // The totals the fork inherits are the fold's, checked: a parent whose
    // terminals disagree with it is refused rather than copied forward.
    let state = crate::load::fold_lineage(store, parent, &records, &parent_receipt, upto.len())?;
    let id = RunId::new();
    let meta = Meta {
        run: id.to_string(),
        created: cairn_journal::now_rfc3339(),
        workspace: workspace.unwrap_or_else(|| state.workspace.clone()),
        name: Some(format!(
            "fork of {}",
            state.name.clone().unwrap_or_else(|| parent.to_string())
        )),
        fingerprint: state.fingerprint.clone(),
        fork: Some(fork_pin.clone()),
        routing: state.routing.clone(),
        system_file: state.system_file.clone(),
    };
    let mut writer = JournalWriter::create(store, &id, meta.clone())?;
    let mut child = state;
    let meta_record = Record {
        v: 1,
        seq: 1,
        prev: ChainHash::fork_genesis(&fork_pin.parent, fork_pin.seq, &fork_pin.hash),
        ts: writer.last_ts().to_owned(),
        body: RecordBody::Meta(Box::new(meta)),
    };
    child.apply(&meta_record);
    let terminal = writer.append_record(RecordBody::Terminal(Terminal {
        reason: TerminalReason::Suspended,
        totals: child.totals,
        detail: Some(format!(
            "forked from {parent} at seq {}; resume this session to continue",
            fork_pin.seq
        )),
    }))?;
    child.apply(&terminal);
    child.records = 2;
    let mut receipt = vec![own_pin];
    receipt.extend(parent_receipt);
    // Suspended: the child's projection must hold after its writer closes.
    writer.trim()?;
    crate::summary::refresh(store, &id, &child, &writer.tail().to_hex(), &receipt)?;
    Ok((id, writer, child))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fork point is taken from the one read of the parent: a seq past
    /// its records — as a second read of a journal cut in between used to
    /// give — is refused, never sliced into.
    #[test]
    fn a_fork_point_past_the_records_read_is_refused_not_a_panic() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(d.path()).unwrap();
        let id = RunId::new();
        let meta = cairn_journal::Meta {
            run: id.to_string(),
            created: cairn_journal::now_rfc3339(),
            workspace: "/ws".into(),
            name: None,
            fingerprint: None,
            fork: None,
            routing: None,
            system_file: None,
        };
        let mut w = cairn_journal::JournalWriter::create(&store, &id, meta).unwrap();
        for t in ["one", "two"] {
            w.append(&RecordBody::User(cairn_journal::User {
                text: t.into(),
                origin: None,
            }))
            .unwrap();
        }
        drop(w);
        let read = ParentRead::of(&store, &id).unwrap();
        for seq in [Some(0), Some(4), Some(5), Some(u64::MAX)] {
            match read.fork_point(seq) {
                Err(SessionError::BadForkPoint { records: 3, .. }) => {}
                other => panic!("{seq:?}: {:?}", other.map(|o| o.1)),
            }
        }
        for seq in 1..=3 {
            let (fork_pin, pin, upto) = read.fork_point(Some(seq)).unwrap();
            assert_eq!(upto.len() as u64, seq);
            assert_eq!(fork_pin.hash.to_hex(), pin.hash);
            // The pin is the one a lister checks line by line.
            check_receipt(&store, &[pin]).unwrap();
        }
        // The journal cut after the read changes nothing of what it answers.
        let bytes = std::fs::read(store.journal_path(&id)).unwrap();
        let (_, two) = line_bounds(&bytes, 2).unwrap();
        std::fs::write(store.journal_path(&id), &bytes[..=two]).unwrap();
        assert_eq!(read.fork_point(None).unwrap().2.len(), 3);
        assert!(matches!(
            ParentRead::of(&store, &id).unwrap().fork_point(Some(3)),
            Err(SessionError::BadForkPoint { records: 2, .. })
        ));
    }
}
