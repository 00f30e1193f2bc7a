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
//! Every session is held open (and so locked) for the gateway's life, so no
//! other writer interleaves with its records — except a visited one
//! ([`Filing::Visiting`]): a VM session, whose checkpoints, restores and
//! machine events the CLI appends while the guest's calls go on. It is
//! opened for each append and closed at once, waiting while another writer
//! holds it, so neither side is refused. Its records are single records
//! (one `model_call` each), so an interleaving splits nothing.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn_journal::{JournalError, RecordBody, Terminal, TerminalReason};
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
    open: Mutex<HashMap<String, SharedSession>>,
}

impl Sessions {
    pub(crate) fn new(store: &Store, filing: Filing) -> Self {
        Sessions {
            store: store.clone(),
            filing,
            open: Mutex::new(HashMap::new()),
        }
    }

    /// The session for a call from `client` (blocking: it may create or
    /// open a session).
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
        let slot = match client {
            Some(c) => format!("{}:{}", c.header.name(), c.id),
            None => String::new(),
        };
        let mut open = self.open.lock().map_err(|_| poisoned())?;
        if let Some(s) = open.get(&slot) {
            return Ok(Filed::Held(s.clone()));
        }
        let session = match client {
            Some(c) => self.client_session(&slot, c, workspace)?,
            None => Session::create_without_model(&self.store, workspace, default_name)?,
        };
        let shared = Arc::new(Mutex::new(session));
        open.insert(slot, shared.clone());
        Ok(Filed::Held(shared))
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

    /// Ends every session this gateway made or opened for its clients: a
    /// `terminal` saying the gateway stopped. A fixed session is its owner's
    /// to end.
    pub(crate) fn close(&self) -> Result<(), GatewayError> {
        if matches!(self.filing, Filing::Fixed(_) | Filing::Visiting(_)) {
            return Ok(());
        }
        let open = self.open.lock().map_err(|_| poisoned())?;
        for s in open.values() {
            let mut s = s.lock().map_err(|_| poisoned())?;
            let totals = s.state().totals;
            s.append(RecordBody::Terminal(Terminal {
                reason: TerminalReason::Completed,
                totals,
                detail: Some("the gateway stopped".into()),
            }))?;
        }
        Ok(())
    }
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

    /// Appends `records` durably, in one write.
    pub(crate) fn append_all(&self, records: Vec<RecordBody>) -> Result<(), GatewayError> {
        match self {
            Filed::Held(s) => {
                s.lock().map_err(|_| poisoned())?.append_all(records)?;
            }
            Filed::Visited { store, run } => {
                visit(store, run)?.append_all(records)?;
            }
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
