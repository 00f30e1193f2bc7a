#![allow(dead_code)]
//! An agent over a scratch store and workspace, driven by the scripted
//! provider, and a look at what it journaled.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cairn_agent::{
    stop_pair, Agent, Events, Plan, PriceTable, Request, ResponseStore, Session, Stop, StopHandle,
};
use cairn_journal::{Outcome, Record, RecordBody, ToolCall};
use cairn_model::ProviderConfig;
use cairn_store::{RunId, Store};
use cairn_tools::{ToolConfig, Toolbox};
use serde_json::Value;

pub struct Rig {
    pub dir: tempfile::TempDir,
    pub store: Store,
    pub ws: PathBuf,
    pub script: PathBuf,
}

impl Rig {
    /// A store, an empty workspace, and a script of `turns`.
    pub fn new(turns: Value) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("store")).unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let ws = std::fs::canonicalize(ws).unwrap();
        let script = dir.path().join("script.json");
        std::fs::write(
            &script,
            serde_json::to_vec(&serde_json::json!({ "turns": turns })).unwrap(),
        )
        .unwrap();
        Rig {
            dir,
            store,
            ws,
            script,
        }
    }

    fn plan(&self) -> Plan {
        let request = Request {
            model: Some(format!("script:{}", self.script.display())),
            ..Request::default()
        };
        Plan::for_run(&request, None, None).unwrap()
    }

    /// A new session's agent, versioning the workspace.
    pub fn agent(&self) -> (Agent, StopHandle) {
        let plan = self.plan();
        let provider =
            cairn_model::provider_from_spec(&plan.spec, None, &ProviderConfig::default()).unwrap();
        let tools = Toolbox::builtin(ToolConfig::default());
        let meta = plan.meta(&self.ws, None, &tools.infos(), provider.base_url());
        let id = RunId::new();
        let session = Session::create(&self.store, &id, meta).unwrap();
        self.assemble(session, provider, tools, &plan)
    }

    /// The agent of session `id`, opened again (as `cairn resume` does).
    pub fn reopen(&self, id: &RunId) -> (Agent, StopHandle) {
        let plan = self.plan();
        let provider =
            cairn_model::provider_from_spec(&plan.spec, None, &ProviderConfig::default()).unwrap();
        let tools = Toolbox::builtin(ToolConfig::default());
        let session = Session::open(&self.store, id).unwrap();
        self.assemble(session, provider, tools, &plan)
    }

    fn assemble(
        &self,
        session: Session,
        provider: Box<dyn cairn_model::Provider>,
        tools: Toolbox,
        plan: &Plan,
    ) -> (Agent, StopHandle) {
        let id = session.id().clone();
        let (handle, stop): (StopHandle, Stop) = stop_pair();
        let ws = cairn_tools::Workspace::new(&self.ws)
            .and_then(|w| w.protect(self.store.root()))
            .unwrap();
        let tracker = cairn_workspace::Workspace::open(
            &self.store,
            &id,
            &self.ws,
            cairn_workspace::CaptureConfig::default(),
        )
        .unwrap();
        let agent = Agent::new(
            session,
            provider,
            tools,
            ws,
            plan.config(),
            ResponseStore::new(&self.store),
            Arc::new(PriceTable::default()),
            stop,
        )
        .with_tracker(tracker);
        (agent, handle)
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.ws.join(rel)
    }
}

/// The journal's records, as read back from disk.
pub fn records(agent: &Agent) -> Vec<Record> {
    let s = agent.session();
    cairn_journal::read_journal(&s.store().journal_path(s.id()), s.id().as_str())
        .unwrap()
        .records
}

/// Each record in a word: its kind, a snapshot's label, a result's outcome.
pub fn outline_of(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .map(|r| match &r.body {
            RecordBody::Snapshot(s) => s.label.clone(),
            RecordBody::ToolResult(t) => format!("tool_result:{}:{:?}", t.call, t.outcome),
            RecordBody::ToolStart(t) => format!("tool_start:{}", t.call),
            RecordBody::Reconcile(c) => format!("reconcile:{}", c.changed.join(",")),
            RecordBody::Terminal(t) => format!("terminal:{}", t.reason.as_str()),
            other => other.kind().to_string(),
        })
        .collect()
}

pub fn shell(id: &str, command: &str) -> Value {
    serde_json::json!({"id": id, "name": "shell", "arguments": {"command": command, "timeout_s": 60}})
}

pub fn exists(p: &Path) -> bool {
    p.exists()
}

/// Events kept for the test to look at.
#[derive(Default)]
pub struct Seen {
    pub asked: Vec<String>,
    pub finished: Vec<(String, Outcome)>,
    pub notices: Vec<String>,
}

impl Events for Seen {
    fn text(&mut self, _delta: &str) {}
    fn approval_needed(&mut self, call: &ToolCall) {
        self.asked.push(call.id.clone());
    }
    fn tool_finished(&mut self, call: &ToolCall, outcome: Outcome, _output: &str) {
        self.finished.push((call.id.clone(), outcome));
    }
    fn notice(&mut self, message: &str) {
        self.notices.push(message.to_owned());
    }
}
