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
//! other writer interleaves with its records.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use cairn_journal::{RecordBody, Terminal, TerminalReason};
use cairn_sessions::Session;
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
    pub(crate) fn for_client(
        &self,
        client: Option<&ClientSession>,
    ) -> Result<SharedSession, GatewayError> {
        let (default_name, workspace) = match &self.filing {
            Filing::Fixed(s) => return Ok(s.clone()),
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
            return Ok(s.clone());
        }
        let session = match client {
            Some(c) => self.client_session(&slot, c, workspace)?,
            None => Session::create_without_model(&self.store, workspace, default_name)?,
        };
        let shared = Arc::new(Mutex::new(session));
        open.insert(slot, shared.clone());
        Ok(shared)
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
        if matches!(self.filing, Filing::Fixed(_)) {
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
