//! Which session a call through the gateway is journaled in (DESIGN §7,
//! "Client sessions").
//!
//! Rules, in order:
//! 1. A gateway given a session (`--run ID`, `--name NAME`, or the node of
//!    `cairn exec --gateway`) files every call there.
//! 2. Otherwise each client session — named by the client itself, Claude
//!    Code's `X-Claude-Code-Session-Id`, Codex's `session-id` or `thread-id`
//!    — gets one cairn session of its own. The pairing is kept in
//!    `<store>/gateway/clients/<sha256 of header and id>` (durably), so a
//!    restarted gateway files the client's next calls in the same session.
//! 3. Calls that name no client session go to one session made for them when
//!    the first arrives.
//!
//! A session is held open (and so locked) while the gateway uses it, so no
//! other writer interleaves with its records. What it holds is bounded:
//! 4. Of the sessions made or opened for client sessions (rules 2 and 3), at
//!    most `max_open` are held open (two descriptors each). Past that, the
//!    one used least recently that no call is using is ended with a
//!    `terminal` (its status then says nothing runs in it) and closed; the
//!    client's next call opens it again and continues it after that
//!    terminal. A session in use by a call is never closed under it, so the
//!    open set can pass `max_open` only by the calls in flight.
//!
//! A visited session ([`Filing::Visiting`]) is the exception: a VM session,
//! whose checkpoints, restores and machine events the CLI appends while the
//! guest's calls go on. It is opened for each append and closed at once,
//! waiting while another writer holds it, so neither side is refused. Its
//! records are single records (one `model_call` each), so an interleaving
//! splits nothing.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn_journal::{JournalError, ModelCall, RecordBody, Terminal, TerminalReason};
use cairn_sessions::{Session, SessionError};
use cairn_store::{durable, RunId, Store};

use crate::key::ClientSession;
use crate::GatewayError;

/// A session shared between the gateway and whoever else writes to it (the
/// exec node protocol). Appends lock it for one record at a time.
pub type SharedSession = Arc<Mutex<Session>>;

/// How calls are filed.
#[derive(Clone)]
pub enum Filing {
    /// Every call goes to this session.
    Fixed(SharedSession),
    /// Every call goes to this session, which others write to as well: it
    /// is opened for each append (a VM session, DESIGN §13).
    Visiting(RunId),
    /// By client session (rules 2 and 3).
    ByClient {
        /// Name of the session for calls that name no client session.
        default_name: String,
        /// The workspace recorded for sessions the gateway makes.
        workspace: PathBuf,
    },
}

/// The sessions of one gateway.
pub(crate) struct Sessions {
    store: Store,
    filing: Filing,
    max_open: usize,
    slots: Mutex<Slots>,
}

/// The client sessions seen, by `header:id` (`""` for calls naming none).
#[derive(Default)]
struct Slots {
    by_client: HashMap<String, Slot>,
    /// How many slots hold their session open.
    open: usize,
    /// A clock of uses, for least-recently-used.
    tick: u64,
}

/// One client session's cairn session: open, or closed while idle (rule 4).
struct Slot {
    run: RunId,
    session: Option<SharedSession>,
    used: u64,
}

impl Sessions {
    /// Sessions filed by `filing`, at most `max_open` of them held open
    /// (rule 4; at least one).
    pub(crate) fn new(store: &Store, filing: Filing, max_open: usize) -> Self {
        Sessions {
            store: store.clone(),
            filing,
            max_open: max_open.max(1),
            slots: Mutex::new(Slots::default()),
        }
    }

    /// The session for a call from `client` (blocking: it may create, open
    /// or close sessions).
    pub(crate) fn for_client(&self, client: Option<&ClientSession>) -> Result<Filed, GatewayError> {
        let (default_name, workspace) = match &self.filing {
            Filing::Fixed(s) => return Ok(Filed::Held(s.clone())),
            Filing::Visiting(run) => {
                return Ok(Filed::Visited {
                    store: self.store.clone(),
                    run: run.clone(),
                })
            }
            Filing::ByClient {
                default_name,
                workspace,
            } => (default_name, workspace),
        };
        let key = match client {
            Some(c) => format!("{}:{}", c.header.name(), c.id),
            None => String::new(),
        };
        let mut slots = self.slots.lock().map_err(|_| poisoned())?;
        slots.tick += 1;
        let tick = slots.tick;
        let shared = match slots.by_client.get_mut(&key) {
            Some(Slot {
                session: Some(s),
                used,
                ..
            }) => {
                *used = tick;
                return Ok(Filed::Held(s.clone()));
            }
            Some(slot) => {
                // Closed while idle: continued.
                let shared = Arc::new(Mutex::new(Session::open(&self.store, &slot.run)?));
                slot.session = Some(shared.clone());
                slot.used = tick;
                shared
            }
            None => {
                let session = match client {
                    Some(c) => self.client_session(&key, c, workspace)?,
                    None => Session::create_without_model(&self.store, workspace, default_name)?,
                };
                let run = session.id().clone();
                let shared = Arc::new(Mutex::new(session));
                slots.by_client.insert(
                    key,
                    Slot {
                        run,
                        session: Some(shared.clone()),
                        used: tick,
                    },
                );
                shared
            }
        };
        slots.open += 1;
        self.close_idle(&mut slots);
        Ok(Filed::Held(shared))
    }

    /// Closes the least recently used idle sessions while more than
    /// `max_open` are open (rule 4). A session that cannot be ended is
    /// closed all the same: its journal then ends without a terminal, as
    /// after a crash.
    fn close_idle(&self, slots: &mut Slots) {
        while slots.open > self.max_open {
            // Idle: nothing but this map holds it (a call holds a clone
            // from `for_client`, under this lock, until it is journaled).
            let idle = slots
                .by_client
                .values_mut()
                .filter(|s| {
                    s.session
                        .as_ref()
                        .is_some_and(|s| Arc::strong_count(s) == 1)
                })
                .min_by_key(|s| s.used);
            let Some(slot) = idle else { return };
            if let Some(shared) = slot.session.take() {
                if let Err(e) = end(
                    &shared,
                    "idle: the gateway closed it; its client's next call continues it",
                ) {
                    tracing::warn!(
                        "the idle session {} was closed without a terminal: {e}",
                        slot.run
                    );
                }
            }
            slots.open -= 1;
        }
    }

    /// Opens the session paired with a client session, or makes and pairs
    /// one.
    fn client_session(
        &self,
        slot: &str,
        client: &ClientSession,
        workspace: &std::path::Path,
    ) -> Result<Session, GatewayError> {
        use sha2::{Digest, Sha256};
        let dir = self.store.gateway_dir().join("clients");
        let path = dir.join(hex::encode(Sha256::digest(slot.as_bytes())));
        if let Ok(text) = std::fs::read_to_string(&path) {
            if let Ok(id) = RunId::parse(text.trim()) {
                if self.store.journal_path(&id).is_file() {
                    return Ok(Session::open(&self.store, &id)?);
                }
            }
        }
        let name = format!("{} {}", client_name(client), client.id);
        let session = Session::create_without_model(&self.store, workspace, &name)?;
        durable::create_dir_private(&self.store.gateway_dir())?;
        durable::create_dir_private(&dir)?;
        durable::write_atomic(&path, session.id().as_str().as_bytes())?;
        Ok(session)
    }

    /// Ends every session this gateway holds open for its clients: a
    /// `terminal` saying the gateway stopped (the ones closed while idle
    /// have theirs). A fixed session is its owner's to end. Every session
    /// that can be ended is; the first failure is reported.
    pub(crate) fn close(&self) -> Result<(), GatewayError> {
        if matches!(self.filing, Filing::Fixed(_) | Filing::Visiting(_)) {
            return Ok(());
        }
        let mut slots = self.slots.lock().map_err(|_| poisoned())?;
        let mut failed = None;
        for slot in slots.by_client.values_mut() {
            if let Some(s) = slot.session.take() {
                if let Err(e) = end(&s, "the gateway stopped") {
                    tracing::error!("the session {} was not ended: {e}", slot.run);
                    failed.get_or_insert(e);
                }
            }
        }
        slots.open = 0;
        failed.map_or(Ok(()), Err)
    }
}

/// Appends a `terminal` (completed: nothing runs in it) saying `detail`.
fn end(session: &SharedSession, detail: &str) -> Result<(), GatewayError> {
    let mut s = session.lock().map_err(|_| poisoned())?;
    let totals = s.state().totals;
    s.append(RecordBody::Terminal(Terminal {
        reason: TerminalReason::Completed,
        totals,
        detail: Some(detail.into()),
    }))?;
    Ok(())
}

/// How long an append to a visited session waits for another writer (a
/// checkpoint save holds the session while it streams the guest's memory and
/// disk).
const VISIT_WAIT: Duration = Duration::from_secs(120);

/// The session a call's records go to.
#[derive(Clone)]
pub(crate) enum Filed {
    /// One this gateway holds open.
    Held(SharedSession),
    /// One opened for each append ([`Filing::Visiting`]).
    Visited {
        /// The store.
        store: Store,
        /// The session.
        run: RunId,
    },
}

impl Filed {
    /// The session's id.
    pub(crate) fn run(&self) -> Result<RunId, GatewayError> {
        match self {
            Filed::Held(s) => Ok(s.lock().map_err(|_| poisoned())?.id().clone()),
            Filed::Visited { run, .. } => Ok(run.clone()),
        }
    }

    /// Appends `records` durably, in one write; then each model call is
    /// told to [`log_call`].
    pub(crate) fn append_all(&self, records: Vec<RecordBody>) -> Result<(), GatewayError> {
        let calls: Vec<ModelCall> = records
            .iter()
            .filter_map(|r| match r {
                RecordBody::ModelCall(m) => Some(m.clone()),
                _ => None,
            })
            .collect();
        let run = match self {
            Filed::Held(s) => {
                let mut s = s.lock().map_err(|_| poisoned())?;
                s.append_all(records)?;
                s.id().clone()
            }
            Filed::Visited { store, run } => {
                visit(store, run)?.append_all(records)?;
                run.clone()
            }
        };
        for m in &calls {
            log_call(&run, m);
        }
        Ok(())
    }
}

/// Opens a visited session, waiting up to [`VISIT_WAIT`] while another
/// process writes to it.
fn visit(store: &Store, run: &RunId) -> Result<Session, GatewayError> {
    let started = Instant::now();
    loop {
        match Session::open(store, run) {
            Err(SessionError::Journal(JournalError::Locked { .. }))
                if started.elapsed() < VISIT_WAIT =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return Ok(other?),
        }
    }
}

fn client_name(c: &ClientSession) -> &'static str {
    match c.header {
        crate::key::SessionHeader::ClaudeCode => "Claude Code session",
        crate::key::SessionHeader::CodexSession | crate::key::SessionHeader::CodexThread => {
            "Codex session"
        }
    }
}

fn poisoned() -> GatewayError {
    GatewayError::Internal {
        reason: "a session lock was poisoned by a panic".into(),
    }
}

/// One line per journaled model call, for whoever watches the gateway
/// (`cairn gateway` prints them unless `--quiet`): an `info` event of
/// target `cairn_gateway::call` with the session, route, model, status,
/// tokens, cost and whether it was replayed or bought. Never the request,
/// the response or a credential: only what the record's summary holds.
pub(crate) fn log_call(run: &RunId, m: &ModelCall) {
    let cost = match (m.cost.state, m.cost.usd) {
        (cairn_journal::CostState::Zero, _) => "$0".to_owned(),
        (cairn_journal::CostState::Known, Some(usd)) => format!("${usd:.4}"),
        _ => "cost unknown".to_owned(),
    };
    let how = if m.replay {
        "replayed"
    } else if m.error.is_some() {
        "failed"
    } else {
        "bought"
    };
    tracing::info!(
        target: "cairn_gateway::call",
        "{run} {} {} {} {} in / {} out, {cost}, {how}{}",
        m.endpoint,
        // The client's word: no control character reaches a terminal.
        m.model
            .as_deref()
            .unwrap_or("?")
            .chars()
            .filter(|c| !c.is_control())
            .take(80)
            .collect::<String>(),
        m.status,
        m.usage.input_tokens,
        m.usage.output_tokens,
        if m.delivered == cairn_journal::Delivered::ClientGone {
            ", client gone"
        } else {
            ""
        }
    );
}
