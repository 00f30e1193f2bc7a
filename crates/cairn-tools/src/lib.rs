//! The built-in tools of cairn's agent loop — read_file, write_file, edit_file,
//! list_dir, search and shell (DESIGN §4.2, §10) — and the one path-safety check they
//! all use.
//!
//! # Guarantees
//!
//! 1. **Nothing outside the workspace.** [`Workspace::new`] opens the root once and
//!    keeps its descriptor; every file operation of a tool is an `*at` call on a
//!    directory reached beneath it by [`cairn_store::nofollow::open_beneath`] (`openat2`
//!    with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` on Linux, a component-wise
//!    `O_NOFOLLOW` walk elsewhere). Absolute paths, `..` components and symlinks
//!    anywhere on the path (even ones pointing inside the workspace) are refused, and a
//!    directory swapped for a symlink while a tool runs is refused, never followed. The
//!    rules are listed at [`Workspace::resolve`].
//! 2. **Never `.git`, never the store.** A path with a `.git` component, in any letter
//!    case, is refused (a write there cannot be rewound, and `.git/hooks` runs code), and
//!    so is a path into a directory given to [`Workspace::protect`] (cairn's store),
//!    recognised by device and inode under any name. search leaves both out.
//! 3. **Regular files only.** Files are opened with `O_NOFOLLOW | O_NONBLOCK` and checked
//!    on the opened descriptor: a FIFO, socket or device is refused at once (search
//!    skips and counts it), never read or waited on.
//! 4. **No partial files.** write_file and edit_file write a temporary file (named by
//!    [`cairn_store::safe::temp_name`], so captures skip crash leftovers) in the target's
//!    own directory, fsync it, rename it over the target inside that directory and fsync
//!    the directory. An existing file keeps its permission bits.
//! 5. **Bounded output.** read_file returns at most [`ToolConfig::max_read_bytes`];
//!    shell, list_dir and search at most [`ToolConfig::max_output_bytes`] (shell keeps
//!    the head and the tail). What was left out is always said.
//! 6. **Bounded time.** shell runs in its own process group, killed as a whole on
//!    timeout, on completion and on cancellation.
//! 7. **Declared idempotency.** Each tool says in [`ToolInfo::idempotent`] whether it
//!    may be re-run after a crash (DESIGN §4.1): read_file, list_dir and search are;
//!    write_file, edit_file and shell are not.
//! 8. **Errors are answers.** A tool never panics into and never returns a Rust error to
//!    the agent loop: bad arguments, missing files and refused paths come back as
//!    [`Outcome::Error`] with a message that says what was wrong and what to do.
//!
//! What it does not do:
//!
//! - **The shell tool is not a sandbox.** It runs whatever command the model writes,
//!   with the user's rights: the command can read, change or delete any file the user
//!   can — outside the workspace, in `.git` and in cairn's store included — reach the
//!   network, and start processes that leave its process group on purpose (`setsid`)
//!   and so survive the call. The path rules above bind the five file tools only.
//! - **The shell's environment is scrubbed, not sealed.** By default ([`ShellEnv`]) the
//!   command gets cairn's environment without the variables that look like secrets
//!   (names containing `KEY`, `SECRET`, `TOKEN`, `PASSWORD`, `AUTH`, …, URLs with a
//!   password) and without the model providers' and cairn's own (`OPENAI_*`,
//!   `ANTHROPIC_*`, `OPENROUTER_*`, `CAIRN_*`), unless the user passes names through
//!   ([`ShellEnv::pass_through`]). That keeps cairn from handing its own secrets to the
//!   command, and so to the model and the journal. It does not stop the command from
//!   reading secrets from files (`~/.aws/credentials`, `~/.netrc`, a `.env`), from a
//!   keychain or agent it finds, or from variables the scrub does not recognise, and
//!   whatever the command prints is recorded in the journal.
//! - The crate knows nothing of the journal. It targets Unix. The tools of MCP
//!   servers (the [`mcp`] module) run in the servers' own processes: these rules bind
//!   the built-in tools only, and an MCP tool can do whatever its server does.
//!
//! # Example
//!
//! ```
//! use cairn_tools::{Outcome, ToolConfig, Toolbox, Workspace};
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let ws = Workspace::new(dir.path())?;
//! let tools = Toolbox::builtin(ToolConfig::default());
//!
//! let wrote = tools
//!     .call(&ws, "write_file", &json!({"path": "notes/a.txt", "content": "hello\n"}))
//!     .await;
//! assert_eq!(wrote.outcome, Outcome::Ok);
//!
//! let read = tools.call(&ws, "read_file", &json!({"path": "notes/a.txt"})).await;
//! assert_eq!(read.output, "hello\n");
//!
//! let refused = tools.call(&ws, "read_file", &json!({"path": "../secret"})).await;
//! assert_eq!(refused.outcome, Outcome::Error);
//! assert!(refused.output.contains("leaves the workspace"));
//!
//! assert!(tools.is_idempotent("read_file"));
//! assert!(!tools.is_idempotent("shell"));
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

#[cfg(not(unix))]
compile_error!("cairn-tools supports Unix only: it relies on O_NOFOLLOW and process groups");

mod capture;
mod error;
mod fsio;
pub mod mcp;
mod preview;
mod shell_env;
mod sys;
mod tool;
mod toolbox;
mod tools;
mod workspace;

pub use error::{PathError, ToolError};
pub use preview::{preview, MAX_PREVIEW_BYTES, MAX_PREVIEW_LINES};
pub use shell_env::ShellEnv;
pub use tool::{McpHints, McpOrigin, Outcome, Tool, ToolConfig, ToolInfo, ToolOutput};
pub use toolbox::Toolbox;
pub use tools::{EditFile, ListDir, ReadFile, Search, Shell, WriteFile};
pub use workspace::{Access, Workspace};
