//! The command line of DESIGN §10, as clap types.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// `cairn --version`: the version and the commit it was built from
/// (`unknown` outside a git checkout, see build.rs).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("CAIRN_COMMIT"),
    ")"
);

/// Durable agent runs: every model turn and tool result in a hash-chained,
/// fsynced journal you can list, verify, resume and fork.
#[derive(Debug, Parser)]
#[command(
    name = "cairn",
    version = VERSION,
    about,
    long_about = None,
    propagate_version = true
)]
pub struct Cli {
    /// The store holding every session: a directory, or a shared store
    /// nats://HOST:PORT/PREFIX (objects at --objects) [env: CAIRN_STORE]
    /// [default: `store` in config.toml, else $XDG_STATE_HOME/cairn or
    /// ~/.local/state/cairn]
    #[arg(long, global = true, value_name = "DIR | URL")]
    pub store: Option<PathBuf>,

    /// Where a shared store (nats://…) keeps objects and manifests:
    /// s3://BUCKET[/PREFIX]; endpoint, region and credentials come from the
    /// AWS_* variables and are never stored
    #[arg(long, global = true, value_name = "S3_URL", env = "CAIRN_OBJECTS")]
    pub objects: Option<String>,

    /// Run as if cairn was started in DIR
    #[arg(short = 'C', global = true, value_name = "DIR")]
    pub directory: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Option<Command>,

    /// With no command, on a terminal: the interactive session's flags
    #[command(flatten)]
    pub tui: TuiArgs,
}

/// `cairn` with no command opens the terminal UI on a new session in this
/// directory; these are `run`'s flags for it.
#[derive(Debug, Args)]
pub struct TuiArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// A name for the session
    #[arg(long)]
    pub name: Option<String>,
    /// A file holding the system prompt
    #[arg(long, value_name = "FILE")]
    pub system: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start a session: the model works on TASK in this directory, every turn journaled
    Run(RunArgs),
    /// Resume a session where it stopped, optionally with a follow-up (alias: --resume)
    Resume(ResumeArgs),
    /// Resume the most recent session of this repository (alias: --continue)
    Continue(ContinueArgs),
    /// Run any command as a node of a session: its file changes become rewindable
    Exec(ExecArgs),
    /// Start Claude Code, Codex or aider with its model calls journaled and its file changes rewindable
    #[command(override_usage = "cairn wrap [OPTIONS] <AGENT> [-- ARGS…]")]
    Wrap(WrapArgs),
    /// Capture the workspace now into a session
    Snapshot(SnapshotArgs),
    /// List a session's workspace snapshots, or put files back as they were
    Rewind(RewindArgs),
    /// Show which paths the workspace rules exclude (like `git check-ignore`)
    CheckIgnore(CheckIgnoreArgs),
    /// Delete objects no snapshot or checkpoint names any more
    Prune(PruneArgs),
    /// Save, list, inspect, verify and restore whole-session checkpoints
    #[command(subcommand)]
    Checkpoint(CheckpointCommand),
    /// Branch a session: a new session sharing its past up to a record (alias: --fork)
    Fork(ForkArgs),
    /// Rebuild every session projection (meta.json, sessions.index) from the records
    Reindex,
    /// List the sessions of this repository, newest first (alias: --sessions)
    Sessions(SessionsArgs),
    /// Inspect or remove one session
    #[command(subcommand)]
    Session(SessionCommand),
    /// Check the hash chain of a session's journal and name the first bad record
    Verify(VerifyArgs),
    /// Run the model gateway: any agent's model calls journaled, never bought twice
    Gateway(GatewayArgs),
    /// Serve the store over HTTP: the JSON API, live event streams, the web viewer
    Serve(ServeArgs),
    /// Serve the store to MCP clients on stdin/stdout: list, read, diff, rewind, checkpoint and fork sessions
    Mcp(McpArgs),
    /// Copy sessions, with their ancestors and objects, to another store (a directory)
    #[command(override_usage = "cairn push [--json] (ID | --all) REMOTE")]
    Push(PushArgs),
    /// Copy a session, with its ancestors and objects, from another store (a directory)
    Pull(PullArgs),
    /// Whole-machine sessions: a qemu guest whose memory and disk checkpoint as one
    #[command(subcommand)]
    Vm(VmCommand),
    /// Show the effective configuration and where each value came from
    Config(ConfigArgs),
    /// Print a shell completion script (bash, zsh, fish, powershell, elvish)
    Completions(CompletionsArgs),
    /// Print the man page (or write one page per command into --dir)
    Man(ManArgs),
}

#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// Print JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell, e.g. `cairn completions bash > ~/.local/share/bash-completion/completions/cairn`
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write cairn.1 and one page per command (cairn-run.1 …) into DIR
    /// instead of printing cairn.1
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum VmCommand {
    /// Start a guest as a new session (the default guest: Debian's cloud kernel and busybox)
    #[command(
        override_usage = "cairn vm start [--name N] [--memory SIZE] [--disk IMAGE] [--kernel K --initrd I] [-- COMMAND]"
    )]
    Start(VmStartArgs),
    /// List the VM sessions and whether their guests run
    Ls(VmLsArgs),
    /// Stop a session's guest (its checkpoints stay; `cairn checkpoint restore` starts it again)
    Stop(SessionJsonArgs),
}

#[derive(Debug, Args)]
pub struct VmStartArgs {
    /// The session's name
    #[arg(long)]
    pub name: Option<String>,
    /// The guest's memory: MiB, or with a unit (512M, 1G)
    #[arg(long, value_name = "SIZE", default_value = "256M")]
    pub memory: String,
    /// A disk image to copy in as the guest's disk (/dev/vda; raw, qcow2…)
    /// [default: a new, empty ext4 disk of --disk-size]
    #[arg(long, value_name = "IMAGE")]
    pub disk: Option<PathBuf>,
    /// The size of a new disk
    #[arg(
        long,
        value_name = "SIZE",
        default_value = "1G",
        conflicts_with = "disk"
    )]
    pub disk_size: String,
    /// Point the default guest's OPENAI_BASE_URL and ANTHROPIC_BASE_URL at
    /// a `cairn gateway --run ID` listening at this host address
    /// (127.0.0.1:PORT is reached from the guest as 10.0.2.2:PORT)
    #[arg(long, value_name = "ADDR", conflicts_with = "kernel")]
    pub gateway: Option<std::net::SocketAddr>,
    /// Your own kernel (with --initrd) instead of the default guest
    #[arg(long, value_name = "K", requires = "initrd")]
    pub kernel: Option<PathBuf>,
    /// Your own initrd (with --kernel)
    #[arg(long, value_name = "I", requires = "kernel")]
    pub initrd: Option<PathBuf>,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
    /// What the default guest runs, in its disk (/mnt), by its shell
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct VmLsArgs {
    /// Print JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct PushArgs {
    /// Copy every session in the store
    #[arg(long)]
    pub all: bool,
    /// ID REMOTE, or REMOTE alone with --all. REMOTE: a store's directory
    /// (created when missing), file:///ABS/PATH, or nats://HOST:PORT/PREFIX
    /// (journals on JetStream; objects at --objects)
    #[arg(required = true, num_args = 1..=2, value_name = "ID | REMOTE")]
    pub args: Vec<String>,
    /// Print one JSON object
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct PullArgs {
    /// Session: an id, a unique prefix (4+ characters), its name, or @last
    pub id: String,
    /// The store to copy it from: a directory, file:///ABS/PATH, or
    /// nats://HOST:PORT/PREFIX (objects at --objects)
    pub remote: String,
    /// Print one JSON object
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct McpArgs {
    /// Serve MCP over streamable HTTP at http://ADDR/mcp instead of stdin/stdout
    /// (a non-loopback address needs --token)
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<std::net::SocketAddr>,
    /// With --listen: the token every request must carry (`Authorization: Bearer T`
    /// or `x-cairn-token`); on stdin/stdout there is nothing to check
    #[arg(
        long,
        value_name = "T",
        env = "CAIRN_MCP_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    // With --listen: what a client can make the server hold.
    #[command(flatten)]
    pub bounds: ListenArgs,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Where to listen (a non-loopback address needs --token)
    /// [env: CAIRN_SERVE_LISTEN] [default: `serve.listen` in config.toml, else 127.0.0.1:7878]
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<std::net::SocketAddr>,
    /// The token every request must carry (`Authorization: Bearer T` or `x-cairn-token`;
    /// a browser logs in once at / and holds a session cookie)
    #[arg(
        long,
        value_name = "T",
        env = "CAIRN_SERVE_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    // What a client can make the server hold.
    #[command(flatten)]
    pub bounds: ListenArgs,
}

/// The bounds of an HTTP server's connections, shared by `serve` and `mcp --listen`
/// (the same timeouts as the gateway's).
#[derive(Debug, Args, Clone, Copy)]
pub struct ListenArgs {
    /// Accept at most this many connections at once (more wait until one closes;
    /// each live stream a client follows holds one)
    #[arg(long, value_name = "N", default_value_t = 512,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
    /// Close a connection whose request head has not arrived within this
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
    pub header_timeout: std::time::Duration,
    /// Answer 408 (and close) when a request body has not arrived within this
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = humantime::parse_duration)]
    pub body_timeout: std::time::Duration,
}

impl ListenArgs {
    /// The library's bounds.
    pub fn bounds(self) -> cairn_gateway::ListenBounds {
        cairn_gateway::ListenBounds {
            max_connections: self.max_connections as usize,
            header_timeout: self.header_timeout,
            body_timeout: self.body_timeout,
        }
    }
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ReplayArg {
    /// Serve a stored response to a retry (the stored one was not delivered
    /// whole, or the request says it is a retry)
    Retries,
    /// Serve every stored match (a cassette, for evals and tests)
    Always,
}

/// The gateway's upstreams and replay rules, shared by `gateway` and `exec --gateway`.
#[derive(Debug, Args, Clone)]
pub struct UpstreamArgs {
    /// The OpenAI-compatible upstream [default: $OPENAI_BASE_URL, else
    /// `openai_base_url` in config.toml, else https://api.openai.com/v1]
    #[arg(long, value_name = "URL")]
    pub openai_upstream: Option<String>,
    /// The Anthropic upstream [default: $ANTHROPIC_BASE_URL, else
    /// `anthropic_base_url` in config.toml, else https://api.anthropic.com]
    #[arg(long, value_name = "URL")]
    pub anthropic_upstream: Option<String>,
    /// Which stored responses are served instead of bought
    #[arg(long, value_enum, default_value = "retries")]
    pub replay: ReplayArg,
    /// Never go upstream: a request with no stored response is an error
    #[arg(long)]
    pub offline: bool,
    /// Refuse request bodies larger than this (413)
    #[arg(long, value_name = "MB", default_value_t = 32)]
    pub max_body_mb: u64,
    /// Stop reading an upstream response larger than this (not kept; a failed model_call)
    #[arg(long, value_name = "MB", default_value_t = 128)]
    pub max_response_mb: u64,
    /// Stop reading a streamed response with an event larger than this (as --max-response-mb)
    #[arg(long, value_name = "MB", default_value_t = 32)]
    pub max_event_mb: u64,
    /// Close a connection whose request head has not arrived within this
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
    pub header_timeout: std::time::Duration,
    /// Answer 408 (and close) when a request body has not arrived within this
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = humantime::parse_duration)]
    pub body_timeout: std::time::Duration,
    /// Accept at most this many client connections at once (more wait until one closes)
    #[arg(long, value_name = "N", default_value_t = 512,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
    /// Once asked to stop, wait at most this for calls still reading their upstream
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
    pub stop_grace: std::time::Duration,
}

#[derive(Debug, Args)]
pub struct GatewayArgs {
    /// Where to listen (a non-loopback address needs --token)
    /// [env: CAIRN_GATEWAY_LISTEN] [default: `gateway.listen` in config.toml, else 127.0.0.1:7879]
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<std::net::SocketAddr>,
    /// Print no line per call (by default each call is logged on stderr:
    /// route, model, status, tokens, cost, replayed or bought)
    #[arg(long, short)]
    pub quiet: bool,
    /// Journal every call in this session [default: one session per client session]
    #[arg(long, value_name = "ID", conflicts_with = "name")]
    pub run: Option<String>,
    /// Journal every call in a new session of this name
    #[arg(long)]
    pub name: Option<String>,
    /// Clients must send this token (`x-cairn-token`, or as their key —
    /// `Authorization: Bearer T` or `x-api-key: T` — which is then replaced by
    /// $OPENAI_API_KEY / $ANTHROPIC_API_KEY upstream)
    #[arg(
        long,
        value_name = "T",
        env = "CAIRN_GATEWAY_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    #[command(flatten)]
    pub upstream: UpstreamArgs,
}

/// Model routing and limits, shared by run, resume and continue.
#[derive(Debug, Args, Clone, Default)]
pub struct ModelArgs {
    /// script:PATH | openai:MODEL (Chat Completions) | openai-responses:MODEL
    /// (Responses API: OpenAI's reasoning and Codex models) | anthropic:MODEL
    /// [env: CAIRN_MODEL for `run`] [default: `model` in config.toml, else
    /// openai:gpt-4.1 when OPENAI_API_KEY is set, else
    /// anthropic:claude-sonnet-4-5 when ANTHROPIC_API_KEY is]
    #[arg(long, value_name = "SPEC")]
    pub model: Option<String>,
    /// Base URL of an OpenAI-compatible or Anthropic endpoint (Ollama, vLLM, a proxy…);
    /// both OpenAI APIs read OPENAI_BASE_URL
    /// [default: $OPENAI_BASE_URL / $ANTHROPIC_BASE_URL, else config.toml's]
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Stop as budget_exhausted after N model turns
    #[arg(long, value_name = "N")]
    pub max_turns: Option<u64>,
    /// Stop as budget_exhausted after N tokens (input + output)
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u64>,
    /// Stop as budget_exhausted after this many US dollars
    #[arg(long, value_name = "USD")]
    pub max_cost: Option<f64>,
    /// Thinking mode: off | low | medium | high (or a token budget for Anthropic)
    #[arg(long, value_name = "MODE")]
    pub thinking: Option<String>,
    /// Ask on the terminal before such tool calls run: shell commands, or
    /// every call that may write (shell included); a "no" runs nothing
    /// [env: CAIRN_APPROVE] [default: `approve` in config.toml, else never]
    #[arg(long, value_name = "never|shell|writes")]
    pub approve: Option<cairn_agent::ApprovePolicy>,
}

/// MCP servers whose tools the agent is offered (DESIGN §17).
#[derive(Debug, Args)]
pub struct McpClientArgs {
    /// Start (or connect to) the MCP servers of this `mcpServers` JSON file
    /// (the format of Claude Code's .mcp.json: stdio and streamable HTTP
    /// servers) and offer their tools as mcp__SERVER__TOOL; give it again to
    /// resume
    #[arg(long, value_name = "CONFIG")]
    pub mcp: Option<PathBuf>,
    /// Show what the MCP servers write on standard error (hidden otherwise)
    #[arg(long, requires = "mcp")]
    pub mcp_stderr: bool,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub mcp: McpClientArgs,
    /// A name for the session
    #[arg(long)]
    pub name: Option<String>,
    /// A file holding the system prompt
    #[arg(long, value_name = "FILE")]
    pub system: Option<PathBuf>,
    /// Print only the summary object as JSON
    #[arg(long)]
    pub json: bool,
    /// What the agent should do; `-` reads it from standard input
    #[arg(required = true, num_args = 1.., value_name = "TASK")]
    pub task: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// Session: an id, a unique prefix (4+ characters), its name, or @last
    pub id: String,
    /// Open the terminal UI (what `cairn --resume ID` means on a terminal)
    #[arg(long, hide = true)]
    pub tui: bool,
    /// A follow-up message
    #[arg(num_args = 0.., value_name = "TEXT")]
    pub text: Vec<String>,
    /// Resume even though the configuration changed (recorded as an `override`)
    #[arg(long)]
    pub force: bool,
    /// Print only the summary object as JSON
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub mcp: McpClientArgs,
}

#[derive(Debug, Args)]
pub struct ContinueArgs {
    /// A follow-up message
    #[arg(num_args = 0.., value_name = "TEXT")]
    pub text: Vec<String>,
    /// Open the terminal UI (what `cairn --continue` means on a terminal)
    #[arg(long, hide = true)]
    pub tui: bool,
    /// Resume even though the configuration changed (recorded as an `override`)
    #[arg(long)]
    pub force: bool,
    /// Print only the summary object as JSON
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub mcp: McpClientArgs,
}

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// The session to record into [default: a new session]
    #[arg(long, value_name = "ID", env = "CAIRN_RUN")]
    pub run: Option<String>,
    /// The node name (iterations count from 1 per name within the session)
    #[arg(long, value_name = "NAME", default_value = "exec")]
    pub node: String,
    /// Print the summary object as JSON on stdout (the command's output goes to stderr)
    #[arg(long)]
    pub json: bool,
    /// Run a model gateway for the command: OPENAI_BASE_URL and ANTHROPIC_BASE_URL
    /// point at it, and its model calls are journaled in this session
    #[arg(long)]
    pub gateway: bool,
    #[command(flatten)]
    pub upstream: UpstreamArgs,
    /// The command and its arguments
    #[arg(last = true, required = true, num_args = 1.., value_name = "COMMAND")]
    pub command: Vec<std::ffi::OsString>,
}

/// `cairn wrap`: `cairn exec --gateway` for an agent cairn knows.
#[derive(Debug, Args)]
pub struct WrapArgs {
    /// The agent
    #[arg(value_name = "AGENT", value_parser = agent_parser())]
    pub agent: cairn_gateway::Agent,
    /// The agent's program [default: its name, found on PATH]
    #[arg(long, value_name = "PATH")]
    pub bin: Option<PathBuf>,
    /// Record into this session (to go on after a crash) [default: a new session named AGENT@REPO]
    #[arg(long, value_name = "ID")]
    pub run: Option<String>,
    /// Print the summary object as JSON on stdout (the agent's output goes to stderr)
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub upstream: UpstreamArgs,
    /// The agent's own arguments, after `--`
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<std::ffi::OsString>,
}

/// The agents `cairn wrap` takes, by name, each with what people call it.
fn agent_parser() -> impl clap::builder::TypedValueParser<Value = cairn_gateway::Agent> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    let names = cairn_gateway::Agent::ALL.map(|a| PossibleValue::new(a.name()).help(a.title()));
    PossibleValuesParser::new(names).try_map(|name| name.parse::<cairn_gateway::Agent>())
}

#[derive(Debug, Args)]
pub struct SnapshotArgs {
    /// The session [default: the newest session of this repository that is not running, or a new one]
    #[arg(long, value_name = "ID")]
    pub run: Option<String>,
    /// A label, e.g. `gate:1` [default: the next `snap:<n>`]
    #[arg(long)]
    pub label: Option<String>,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Scope {
    /// Only the paths the session itself changed from there on
    Run,
    /// The whole tree
    Full,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["list_snapshots", "to", "restore_snapshot"])))]
pub struct RewindArgs {
    /// Session: an id, a unique prefix (4+ characters), its name, or @last
    pub id: String,
    /// List snapshots newest first, with every label each carries
    #[arg(long)]
    pub list_snapshots: bool,
    /// Restore the state before NODE (e.g. `turn:3`, `exec:2`, `exec` for its latest iteration)
    #[arg(long, value_name = "NODE[:ITER]")]
    pub to: Option<String>,
    /// With --to: restore only what the session changed (run) or the whole tree (full)
    #[arg(long, value_enum, default_value = "run", requires = "to")]
    pub restore_scope: Scope,
    /// With --to turn:N: also fork the conversation at that turn, to continue from there
    #[arg(long, requires = "to")]
    pub fork: bool,
    /// Restore a snapshot by id, unique prefix or label (`bank:N`, as rewind prints it); always the whole tree
    #[arg(long, value_name = "SNAP")]
    pub restore_snapshot: Option<String>,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CheckIgnoreArgs {
    /// Also print the file, line and rule that decided each path
    #[arg(short, long)]
    pub verbose: bool,
    /// Paths to check, relative to the current directory
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum CheckpointCommand {
    /// Save the session as one checkpoint: journal position, workspace, and named paths
    Save(CheckpointSaveArgs),
    /// List a session's checkpoints, newest first
    Ls(SessionJsonArgs),
    /// Show one checkpoint
    Show(CheckpointIdArgs),
    /// Put a checkpoint's workspace and named paths back (after banking the current state)
    Restore(CheckpointIdArgs),
    /// Re-hash every chunk of a checkpoint
    Verify(CheckpointIdArgs),
    /// Logical vs stored bytes of a session's checkpoints, and the dedup ratio
    Stats(SessionJsonArgs),
}

#[derive(Debug, Args)]
pub struct CheckpointSaveArgs {
    /// Session: an id, a unique prefix (4+ characters), its name, or @last
    pub id: String,
    /// A file or directory to save too (a disk image, a memory dump…); repeatable
    #[arg(long = "path", value_name = "P")]
    pub paths: Vec<PathBuf>,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SessionJsonArgs {
    /// Session: an id, a unique prefix (4+ characters), its name, or @last
    pub id: String,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CheckpointIdArgs {
    /// Checkpoint: its id (cp_…) or a unique prefix of it (4+ characters)
    pub checkpoint: String,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Report what would be deleted, delete nothing
    #[arg(long)]
    pub dry_run: bool,
    /// On a shared store (nats://…) only: keep every object younger than this,
    /// named or not (an upload from another host may be about to be named)
    /// [default: 1h]
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub grace: Option<std::time::Duration>,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ForkArgs {
    /// The session to fork
    pub id: String,
    /// The last record to share, by seq, or a checkpoint (cp_…) [default: the last record]
    #[arg(long, value_name = "SEQ|CHECKPOINT")]
    pub at: Option<String>,
    /// The workspace of the new session [default: the parent's]; with --at CHECKPOINT,
    /// a new directory the checkpoint's workspace is written into
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Print the summary object as JSON
    #[arg(long)]
    pub json: bool,
    /// Open the terminal UI on the fork (what `cairn --fork ID` means on a terminal)
    #[arg(long, hide = true)]
    pub tui: bool,
    /// In the terminal UI: ask before such tool calls run
    #[arg(long, hide = true, value_name = "never|shell|writes")]
    pub approve: Option<cairn_agent::ApprovePolicy>,
}

#[derive(Debug, Args)]
pub struct SessionsArgs {
    /// List sessions of every repository
    #[arg(long, conflicts_with = "repo")]
    pub all: bool,
    /// List sessions of the repository at DIR [default: this directory's]
    #[arg(long, value_name = "DIR")]
    pub repo: Option<PathBuf>,
    /// Only sessions with this status (repeatable, or comma-separated);
    /// `interrupted`: no terminal record and no live writer (a crash)
    #[arg(
        long,
        value_name = "STATUS",
        value_delimiter = ',',
        value_parser = clap::builder::PossibleValuesParser::new(cairn_sessions::STATUSES)
    )]
    pub status: Vec<String>,
    /// At most N sessions, the newest first
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Print a JSON array
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum SessionCommand {
    /// Same as `cairn sessions`
    Ls(SessionsArgs),
    /// Show one session
    Show(ShowArgs),
    /// Delete a session's records (objects stay until `cairn prune`)
    Rm(RmArgs),
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Session: an id, a unique prefix (4+ characters), its name, or @last
    pub id: String,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
    /// Include every record
    #[arg(long)]
    pub transcript: bool,
}

#[derive(Debug, Args)]
pub struct RmArgs {
    /// Session: an id, a unique prefix (4+ characters), its name, or @last
    pub id: String,
    /// Also remove the forks that pin it (and their forks), instead of refusing
    #[arg(long)]
    pub with_forks: bool,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// Session: an id, a unique prefix (4+ characters), its name, or @last
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub id: Option<String>,
    /// Verify every session in the store
    #[arg(long)]
    pub all: bool,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
}

/// Whether the command line asks for JSON: a `--json` before any `--`
/// (what follows `--` is a command's own arguments, `cairn exec`'s).
pub fn wants_json(args: &[std::ffi::OsString]) -> bool {
    args.iter()
        .skip(1)
        .take_while(|a| *a != "--")
        .any(|a| a == "--json")
}

/// Rewrites the iteron-style aliases (`--sessions`, `--continue [TEXT]`,
/// `--resume ID [TEXT]`, `--fork ID`) into their subcommands, so
/// `cairn -C dir --resume ID "go on"` means `cairn -C dir resume ID "go on"`.
/// Only the first argument that is not a global option is considered.
pub fn rewrite_aliases(args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let mut out = Vec::with_capacity(args.len());
    let mut it = args.into_iter();
    if let Some(bin) = it.next() {
        out.push(bin);
    }
    let mut rest: Vec<_> = it.collect();
    let mut i = 0;
    while i < rest.len() {
        let a = rest[i].to_string_lossy().into_owned();
        if a == "-C" || a == "--store" {
            i += 2;
            continue;
        }
        if a.starts_with("--store=") || (a.starts_with("-C") && a.len() > 2) {
            i += 1;
            continue;
        }
        let sub = match a.as_str() {
            "--sessions" => Some("sessions"),
            "--continue" => Some("continue"),
            "--resume" => Some("resume"),
            "--fork" => Some("fork"),
            _ => None,
        };
        if let Some(sub) = sub {
            rest[i] = sub.into();
            // The alias opens the terminal UI where it can (DESIGN §11);
            // the subcommand spelled out stays the plain command.
            if sub != "sessions" {
                rest.insert(i + 1, "--tui".into());
            }
        }
        break;
    }
    out.extend(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rw(args: &[&str]) -> Vec<String> {
        rewrite_aliases(args.iter().map(|a| (*a).into()).collect())
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn aliases_become_subcommands() {
        assert_eq!(rw(&["cairn", "--sessions"]), ["cairn", "sessions"]);
        assert_eq!(
            rw(&["cairn", "-C", "d", "--resume", "X", "t"]),
            ["cairn", "-C", "d", "resume", "--tui", "X", "t"]
        );
        assert_eq!(
            rw(&["cairn", "--store=s", "--continue"]),
            ["cairn", "--store=s", "continue", "--tui"]
        );
        assert_eq!(
            rw(&["cairn", "--fork", "X"]),
            ["cairn", "fork", "--tui", "X"]
        );
        // Not an alias once a subcommand came first.
        assert_eq!(
            rw(&["cairn", "run", "--resume"]),
            ["cairn", "run", "--resume"]
        );
    }

    #[test]
    fn clap_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
