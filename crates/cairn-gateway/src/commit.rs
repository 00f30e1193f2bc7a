//! Group commit of purchases (DESIGN §7, "Order", step 2): the calls that
//! finish together are made durable together.
//!
//! One thread takes every purchase waiting to be made durable, stores all
//! their bodies and entries with one commit of the object pool (one
//! file-system barrier for a group of several, instead of an fsync per
//! file), then appends each session's `model_call` records with one write and
//! one fsync, and only then tells each purchase it may release its final
//! event. A call that finishes alone pays what it would alone; calls that
//! finish while another group commits wait for the next group, which is
//! never longer than one commit.

use std::collections::HashMap;
use std::sync::mpsc;

use cairn_journal::{ModelCall, RecordBody};
use tokio::sync::oneshot;

use crate::filing::Filed;
use crate::store::{Entry, GroupPut};
use crate::{GatewayError, ResponseStore};

/// From this many calls in a group on, the pool's barrier replaces the
/// per-file fsyncs.
const BARRIER_FROM: usize = 4;
/// At most this many calls in one group.
const MAX_GROUP: usize = 64;

/// One purchase to make durable.
pub(crate) struct Job {
    pub(crate) entry: Option<Entry>,
    pub(crate) body: Vec<u8>,
    pub(crate) request: Vec<u8>,
    pub(crate) record: ModelCall,
    pub(crate) session: Filed,
    pub(crate) done: oneshot::Sender<Result<(), String>>,
}

/// The committing thread's queue.
pub(crate) struct Committer {
    tx: std::sync::Mutex<mpsc::Sender<Job>>,
}

impl Committer {
    pub(crate) fn start(responses: ResponseStore) -> Result<Committer, GatewayError> {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("cairn-gateway-commit".into())
            .spawn(move || run(&responses, &rx))
            .map_err(|e| GatewayError::Internal {
                reason: format!("cannot start the commit thread: {e}"),
            })?;
        Ok(Committer {
            tx: std::sync::Mutex::new(tx),
        })
    }

    /// Makes a purchase durable: bodies, entry, record. Resolves when done.
    pub(crate) async fn commit(
        &self,
        job: impl FnOnce(oneshot::Sender<Result<(), String>>) -> Job,
    ) -> Result<(), GatewayError> {
        let (done, wait) = oneshot::channel();
        let sent = self.tx.lock().map_err(|_| poisoned())?.send(job(done));
        if sent.is_err() {
            return Err(GatewayError::Internal {
                reason: "the commit thread is gone".into(),
            });
        }
        match wait.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(reason)) => Err(GatewayError::Internal { reason }),
            Err(_) => Err(GatewayError::Internal {
                reason: "the commit thread dropped a purchase".into(),
            }),
        }
    }
}

fn run(responses: &ResponseStore, rx: &mpsc::Receiver<Job>) {
    while let Ok(first) = rx.recv() {
        let mut jobs = vec![first];
        while jobs.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(j) => jobs.push(j),
                Err(_) => break,
            }
        }
        let outcome = commit_group(responses, &mut jobs).map_err(|e| e.to_string());
        for j in jobs {
            let _ = j.done.send(outcome.clone());
        }
    }
}

fn commit_group(responses: &ResponseStore, jobs: &mut [Job]) -> Result<(), GatewayError> {
    let mut group: Vec<GroupPut> = jobs
        .iter_mut()
        .map(|j| GroupPut {
            entry: j.entry.take(),
            body: std::mem::take(&mut j.body),
            request: std::mem::take(&mut j.request),
            hashes: None,
        })
        .collect();
    responses.put_group(&mut group, BARRIER_FROM)?;
    // Each session's records in one append, in the order the calls came.
    let mut by_session: HashMap<cairn_store::RunId, (Filed, Vec<RecordBody>)> = HashMap::new();
    let mut order = Vec::new();
    for (j, g) in jobs.iter().zip(group) {
        let mut record = j.record.clone();
        if let Some((response, request)) = g.hashes {
            record.response = Some(response);
            record.request = Some(request);
        }
        let k = j.session.run()?;
        if !by_session.contains_key(&k) {
            order.push(k.clone());
        }
        by_session
            .entry(k)
            .or_insert_with(|| (j.session.clone(), Vec::new()))
            .1
            .push(RecordBody::ModelCall(record));
    }
    for k in order {
        if let Some((session, records)) = by_session.remove(&k) {
            session.append_all(records)?;
        }
    }
    Ok(())
}

fn poisoned() -> GatewayError {
    GatewayError::Internal {
        reason: "a lock was poisoned by a panic".into(),
    }
}
