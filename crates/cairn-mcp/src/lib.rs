//! cairn as an MCP server (DESIGN §17): the session service's operations
//! as tools, so any agent that speaks the Model Context Protocol (Claude
//! Code, Codex, …) can list, read, diff, rewind (with its bank, so a rewind
//! is undone by rewinding to the bank), checkpoint and fork sessions of a
//! store — its own among them, when it runs under `cairn wrap`.
//!
//! A thin front end: each tool parses its arguments, makes the library
//! call the CLI and the HTTP API make for the same operation, and answers
//! with that call's result as JSON text (the shapes `--json` prints). A
//! failure is a tool error naming what was wrong and what to do, never a
//! protocol error, so the agent reads it.
//!
//! # Annotations
//! Every tool declares what it does to the world, and says it honestly:
//! - listings, a transcript page, snapshots, a diff, rewind points and
//!   checkpoints are `readOnlyHint` (and idempotent): they change nothing;
//! - a rewind preview, a checkpoint save and a fork write to the store
//!   (the preview banks the current files, as every rewind does) and change
//!   no workspace file: neither read-only nor destructive;
//! - a rewind and a checkpoint restore change the workspace's files:
//!   `destructiveHint`.
//!
//! None reaches outside the store and the sessions' workspaces
//! (`openWorldHint: false`).

use std::path::Path;

use cairn_store::{RunId, Store};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_handler, tool_router, ServerHandler};
use schemars::JsonSchema;
use serde::Serialize;

mod args;
pub mod http;

pub use args::*;

/// The most records one transcript page holds.
pub const MAX_PAGE: usize = 200;

/// The MCP server over one store.
#[derive(Clone)]
pub struct CairnMcp {
    store: Store,
    tool_router: ToolRouter<Self>,
}

impl std::fmt::Debug for CairnMcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CairnMcp")
            .field("store", &self.store.root())
            .finish_non_exhaustive()
    }
}

/// A tool's answer: JSON text, or an error the agent reads.
type Answer = Result<String, String>;

/// Runs `work` off the async runtime (the store's calls block) and renders
/// its value as JSON.
async fn answer<T: Serialize + Send + 'static>(
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Answer {
    let value = tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| format!("the operation stopped: {e}"))??;
    serde_json::to_string_pretty(&value).map_err(|e| format!("cannot render the answer: {e}"))
}

impl CairnMcp {
    /// A server over `store`.
    pub fn new(store: Store) -> Self {
        CairnMcp {
            store,
            tool_router: Self::tool_router(),
        }
    }

    /// Serves MCP on stdin and stdout until the client closes them.
    ///
    /// # Errors
    /// The transport fails before or while serving.
    pub async fn serve_stdio(self) -> Result<(), McpError> {
        use rmcp::ServiceExt;
        let running = self
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| McpError::Failed(e.to_string()))?;
        running
            .waiting()
            .await
            .map_err(|e| McpError::Failed(e.to_string()))?;
        Ok(())
    }
}

/// Why `cairn mcp` could not serve.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// What was asked cannot be served (an empty token, a non-loopback
    /// address without one, an address that cannot be bound): say so and
    /// change the command.
    #[error("cairn mcp: {0}")]
    Usage(String),
    /// The transport failed.
    #[error("cairn mcp: {0}")]
    Failed(String),
}

/// An existing session of `store`, from the id a client sent.
fn session(store: &Store, id: &str) -> Result<RunId, String> {
    let run = RunId::parse(id.trim())
        .map_err(|e| format!("`{id}` is not a session id ({e}): list_sessions gives them"))?;
    if !store.journal_path(&run).is_file() {
        return Err(format!(
            "no session {run} in the store {}: list_sessions gives the sessions there",
            store.root().display()
        ));
    }
    Ok(run)
}

/// The workspace versioning of an open session
/// ([`cairn_sessions::Session::tracker`]).
fn tracker(session: &cairn_sessions::Session) -> Result<cairn_workspace::Workspace, String> {
    session
        .tracker(cairn_workspace::CaptureConfig::default())
        .map_err(|e| e.to_string())
}

fn scope(s: Option<&str>) -> Result<cairn_workspace::RestoreScope, String> {
    match s {
        None | Some("run") => Ok(cairn_workspace::RestoreScope::Run),
        Some("full") => Ok(cairn_workspace::RestoreScope::Full),
        Some(other) => Err(format!(
            "scope `{other}`: use `run` (only what the session changed) or `full`"
        )),
    }
}

fn node(s: &str) -> Result<cairn_workspace::NodeRef, String> {
    cairn_workspace::NodeRef::parse(s).map_err(|e| {
        format!("`{s}` is not a point of the session ({e}): rewind_points lists them, as turn:N")
    })
}

fn snapshot(s: &str) -> Result<cairn_workspace::SnapshotId, String> {
    cairn_workspace::SnapshotId::parse(s)
        .map_err(|e| format!("`{s}` is not a snapshot id ({e}): list_snapshots lists them"))
}

/// What a rewind did.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Rewound {
    /// The restore report, as `cairn rewind --json` and the HTTP API give
    /// it: the files written and deleted, those left alone, and `bank`, the
    /// files as they were (rewind to `bank.snapshot` to undo this).
    #[serde(flatten)]
    #[schemars(with = "serde_json::Value")]
    pub report: cairn_workspace::RestoreReport,
    /// The fork made with `fork: true`.
    pub fork: Option<String>,
    /// Why that fork could not be made after the files went back.
    pub fork_error: Option<String>,
}

#[tool_router]
impl CairnMcp {
    #[tool(
        description = "List the store's sessions, newest first: id, name, status (running, interrupted, completed, …; invalid for one that does not verify), workspace, turns, records, cost, parent. Filters: repo (a directory: sessions of that repository), status, limit.",
        annotations(
            title = "List sessions",
            read_only_hint = true,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn list_sessions(&self, Parameters(a): Parameters<ListArgs>) -> Answer {
        let store = self.store.clone();
        answer(move || {
            let all = cairn_sessions::list(&store).map_err(|e| e.to_string())?;
            let filter = cairn_sessions::ListFilter {
                repository: a
                    .repo
                    .as_deref()
                    .map(|r| cairn_sessions::repository_root(Path::new(r))),
                statuses: a.status.into_iter().collect(),
                limit: a.limit,
            };
            Ok(filter.apply(all))
        })
        .await
    }

    #[tool(
        description = "One session's summary: status, turns, records, cost, workspace, parent, and whether its journal verifies.",
        annotations(
            title = "Show a session",
            read_only_hint = true,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn show_session(&self, Parameters(a): Parameters<SessionArgs>) -> Answer {
        let store = self.store.clone();
        answer(move || {
            let id = session(&store, &a.id)?;
            Ok(cairn_sessions::summarize(&store, &id))
        })
        .await
    }

    #[tool(
        description = "A page of a session's transcript: its verified journal records in order (user messages, model turns with their tool calls, tool results, snapshots, …), after the record `after` (default 0), at most `limit` (default 50, at most 200). `next_after` continues; `last_seq` is the journal's last record.",
        annotations(
            title = "Read a transcript",
            read_only_hint = true,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn transcript(&self, Parameters(a): Parameters<PageArgs>) -> Answer {
        let store = self.store.clone();
        answer(move || {
            let id = session(&store, &a.id)?;
            let limit = a.limit.unwrap_or(50);
            if limit == 0 || limit > MAX_PAGE {
                return Err(format!("limit must be between 1 and {MAX_PAGE}"));
            }
            let scan = cairn_journal::read_journal(&store.journal_path(&id), id.as_str())
                .map_err(|e| e.to_string())?;
            let last_seq = scan.records.last().map_or(0, |r| r.seq);
            let after = a.after.unwrap_or(0);
            let records: Vec<cairn_journal::Record> = scan
                .records
                .into_iter()
                .filter(|r| r.seq > after)
                .take(limit)
                .collect();
            let next_after = records.last().map(|r| r.seq).filter(|&s| s < last_seq);
            Ok(serde_json::json!({
                "records": records,
                "last_seq": last_seq,
                "next_after": next_after,
            }))
        })
        .await
    }

    #[tool(
        description = "A session's workspace snapshots (each turn's pre: and post: states, banks of rewinds), oldest first, with their labels.",
        annotations(
            title = "List snapshots",
            read_only_hint = true,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn list_snapshots(&self, Parameters(a): Parameters<SessionArgs>) -> Answer {
        let store = self.store.clone();
        answer(move || {
            let id = session(&store, &a.id)?;
            cairn_workspace::list_snapshots(&store, &id).map_err(|e| e.to_string())
        })
        .await
    }

    #[tool(
        description = "Every file that differs between two snapshots of a session, with line counts and a unified diff for text files. Reads the store only: the workspace is not touched.",
        annotations(
            title = "Diff two snapshots",
            read_only_hint = true,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn diff(&self, Parameters(a): Parameters<DiffArgs>) -> Answer {
        let store = self.store.clone();
        answer(move || {
            let id = session(&store, &a.id)?;
            let (from, to) = (snapshot(&a.from)?, snapshot(&a.to)?);
            let snaps = cairn_workspace::Snapshots::of(&store, &id);
            let changes = snaps.diff_stat(&from, &to).map_err(|e| e.to_string())?;
            changes
                .into_iter()
                .map(|c| {
                    let unified = snaps
                        .unified_diff(&from, &to, &c.path)
                        .map_err(|e| e.to_string())?;
                    let mut v = serde_json::to_value(&c).map_err(|e| e.to_string())?;
                    v["unified"] = serde_json::json!(unified);
                    Ok(v)
                })
                .collect::<Result<Vec<_>, String>>()
        })
        .await
    }

    #[tool(
        description = "The points a session can be rewound to: each message the person wrote, the model turn it started (rewind `to` turn:N) and the files its turns changed, shell commands included.",
        annotations(
            title = "List rewind points",
            read_only_hint = true,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn rewind_points(&self, Parameters(a): Parameters<SessionArgs>) -> Answer {
        let store = self.store.clone();
        answer(move || {
            let id = session(&store, &a.id)?;
            let points =
                cairn_sessions::points_of(&store, &id, cairn_workspace::CaptureConfig::default())
                    .map_err(|e| e.to_string())?;
            Ok(points
                .into_iter()
                .map(|p| {
                    serde_json::json!({
                        "name": p.name(), "number": p.number, "seq": p.seq,
                        "text": p.text, "turn": p.turn, "files": p.files,
                    })
                })
                .collect::<Vec<_>>())
        })
        .await
    }

    #[tool(
        description = "What a rewind of a session's files to a point (`to`, e.g. turn:3) would do now: the files it would write and delete, and those it would leave alone (edits made since by someone else). Changes no workspace file; records the current state in the store as a bank, as every rewind does.",
        annotations(
            title = "Preview a rewind",
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn rewind_preview(&self, Parameters(a): Parameters<PreviewArgs>) -> Answer {
        let store = self.store.clone();
        answer(move || {
            let id = session(&store, &a.id)?;
            let (n, scope) = (node(&a.to)?, scope(a.scope.as_deref())?);
            let mut s = cairn_sessions::Session::open(&store, &id).map_err(|e| e.to_string())?;
            let ws = tracker(&s)?;
            cairn_sessions::preview(&mut s, &ws, &n, scope, &cairn_workspace::NoProgress)
                .map_err(|e| e.to_string())
        })
        .await
    }

    #[tool(
        description = "Rewind a session's workspace files: to the state before a point (`to`, e.g. turn:3: undoes what that turn and every later one did to the files, shell commands included) or to a snapshot (`snapshot`: a bank, to undo a rewind). Files changed since by someone else are left alone and reported. The files as they were are banked first: the report's `bank` undoes this rewind. `scope`: run (default: only what the session changed) or full. `fork: true` also forks the conversation at that point. Refused while the session runs.",
        annotations(
            title = "Rewind files",
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn rewind(&self, Parameters(a): Parameters<RewindArgs>) -> Answer {
        let store = self.store.clone();
        answer(move || {
            let id = session(&store, &a.id)?;
            let scope = scope(a.scope.as_deref())?;
            let target = match (a.to.as_deref(), a.snapshot.as_deref(), a.fork) {
                (Some(n), None, _) => Ok(node(n)?),
                (None, Some(s), false) => Err(snapshot(s)?),
                (None, Some(_), true) => return Err(
                    "`fork` needs `to` (a point): a snapshot is not a point of the conversation"
                        .into(),
                ),
                _ => {
                    return Err(
                        "give exactly one of `to` (a point, e.g. turn:3) or `snapshot`".into(),
                    )
                }
            };
            let mut session =
                cairn_sessions::Session::open(&store, &id).map_err(|e| e.to_string())?;
            let ws = tracker(&session)?;
            let progress = &cairn_workspace::NoProgress;
            let fail = |e: cairn_sessions::SessionError| e.to_string();
            Ok(match target {
                Ok(n) if a.fork => {
                    let done =
                        cairn_sessions::rewind_and_fork(&mut session, &ws, &n, scope, progress)
                            .map_err(fail)?;
                    let (fork, fork_error) = match done.fork {
                        Ok(child) => (Some(child.to_string()), None),
                        Err(e) => (None, Some(e.to_string())),
                    };
                    Rewound {
                        report: done.report,
                        fork,
                        fork_error,
                    }
                }
                Ok(n) => Rewound {
                    report: cairn_sessions::rewind(
                        &mut session,
                        &ws,
                        cairn_sessions::RewindTarget::Node(&n, scope),
                        progress,
                    )
                    .map_err(fail)?,
                    fork: None,
                    fork_error: None,
                },
                Err(s) => Rewound {
                    report: cairn_sessions::rewind(
                        &mut session,
                        &ws,
                        cairn_sessions::RewindTarget::Snapshot(&s),
                        progress,
                    )
                    .map_err(fail)?,
                    fork: None,
                    fork_error: None,
                },
            })
        })
        .await
    }

    #[tool(
        description = "A session's checkpoints, oldest first: id, the record they were saved at, what they hold.",
        annotations(
            title = "List checkpoints",
            read_only_hint = true,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn list_checkpoints(&self, Parameters(a): Parameters<SessionArgs>) -> Answer {
        let store = self.store.clone();
        answer(move || {
            let id = session(&store, &a.id)?;
            cairn_checkpoint::list(&store, &id).map_err(|e| e.to_string())
        })
        .await
    }

    #[tool(
        description = "Save a checkpoint of a session: its conversation position and its workspace files, deduplicated in the store. Restore it with restore_checkpoint.",
        annotations(
            title = "Save a checkpoint",
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn save_checkpoint(&self, Parameters(a): Parameters<SessionArgs>) -> Answer {
        let store = self.store.clone();
        answer(move || {
            let id = session(&store, &a.id)?;
            let mut session =
                cairn_sessions::Session::open(&store, &id).map_err(|e| e.to_string())?;
            let ws = tracker(&session)?;
            // What `cairn checkpoint save --json` prints.
            cairn_sessions::save_checkpoint(
                &mut session,
                Some(&ws),
                Vec::new(),
                &cairn_workspace::NoProgress,
            )
            .map_err(|e| e.to_string())
        })
        .await
    }

    #[tool(
        description = "Restore a checkpoint: its session's workspace files go back to what the checkpoint holds (the files as they are now are banked first, and the report says how to undo).",
        annotations(
            title = "Restore a checkpoint",
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn restore_checkpoint(&self, Parameters(a): Parameters<CheckpointArgs>) -> Answer {
        let store = self.store.clone();
        answer(move || {
            let cp = cairn_checkpoint::CheckpointId::parse(a.checkpoint.trim()).map_err(|e| {
                format!(
                    "`{}` is not a checkpoint id ({e}): list_checkpoints lists them",
                    a.checkpoint
                )
            })?;
            let manifest = cairn_checkpoint::show(&store, &cp).map_err(|e| e.to_string())?;
            let run = manifest.run_id().map_err(|e| e.to_string())?;
            let mut session =
                cairn_sessions::Session::open(&store, &run).map_err(|e| e.to_string())?;
            let ws = tracker(&session)?;
            cairn_sessions::restore_checkpoint(&mut session, &cp, &ws, &cairn_workspace::NoProgress)
                .map_err(|e| e.to_string())
        })
        .await
    }

    #[tool(
        description = "Fork a session: a new session that shares its conversation up to record `at` (default: all of it) and goes on from there on its own. Changes neither the session nor any file.",
        annotations(
            title = "Fork a session",
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn fork(&self, Parameters(a): Parameters<ForkArgs>) -> Answer {
        let store = self.store.clone();
        answer(move || {
            let parent = session(&store, &a.id)?;
            let (child, writer, _) =
                cairn_sessions::fork(&store, &parent, a.at, None).map_err(|e| e.to_string())?;
            drop(writer);
            Ok(serde_json::json!({ "id": child.to_string(), "parent": parent.to_string() }))
        })
        .await
    }
}

#[tool_handler(
    router = self.tool_router,
    name = "cairn",
    instructions = "cairn keeps durable sessions of agent runs. Use list_sessions to find a session, transcript to read it, rewind_points and rewind to undo what its turns did to the files (shell commands included; the report's bank undoes a rewind), checkpoints to save and restore, fork to branch."
)]
impl ServerHandler for CairnMcp {}
