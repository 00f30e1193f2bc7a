//! A VM session's status (DESIGN §2, §13): a guest stopped or found dead
//! is bookkeeping after the terminal that ends its stretch, a guest started
//! or restored is work. The fold and the ends of the journal agree.

mod common;

use cairn_journal::*;
use cairn_store::{RunId, Store};

fn machine(event: MachineEvent) -> RecordBody {
    RecordBody::Machine(Machine {
        event,
        checkpoint: None,
        pid: None,
        detail: None,
    })
}

fn interrupted() -> RecordBody {
    RecordBody::Terminal(Terminal {
        reason: TerminalReason::Interrupted,
        totals: Totals::default(),
        detail: None,
    })
}

#[test]
fn a_stopped_guest_ends_the_session_and_a_restored_one_runs_it_again() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path()).unwrap();
    let id = RunId::new();
    let mut w = JournalWriter::create(&store, &id, common::meta("/w")).unwrap();
    let interrupted_status = Status::Ended(TerminalReason::Interrupted);
    // (record appended, status after it)
    let steps = [
        (machine(MachineEvent::Started), Status::Running),
        (machine(MachineEvent::Stopped), Status::Running),
        (interrupted(), interrupted_status),
        // `vm stop` of a guest already gone, or a death noticed later.
        (machine(MachineEvent::Died), interrupted_status),
        (machine(MachineEvent::Stopped), interrupted_status),
        (machine(MachineEvent::Restored), Status::Running),
        (interrupted(), interrupted_status),
        (machine(MachineEvent::Started), Status::Running),
    ];
    for (i, (body, want)) in steps.iter().enumerate() {
        w.append(body).unwrap();
        let path = store.journal_path(&id);
        let scan = read_journal(&path, id.as_str()).unwrap();
        assert_eq!(fold(&scan.records).unwrap().status, *want, "step {i}");
        let ends = read_ends(&path, id.as_str()).unwrap().unwrap();
        assert_eq!(ends.tail.status(), *want, "step {i}, from the ends");
    }
}
