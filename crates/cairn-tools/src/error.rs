//! Errors of the tools and of the path-safety check.
//!
//! Policy: a tool never hands a Rust error to the agent loop. Every failure below is
//! turned into an [`Outcome::Error`](crate::Outcome::Error) whose text is the error's
//! `Display`, which the model reads. So each message says what was wrong and what to
//! do instead, and names the path or tool involved. [`PathError`] is the refusal of
//! the path-safety check ([`Workspace::resolve`](crate::Workspace::resolve) and every
//! file tool); [`ToolError`] is everything else and wraps a [`PathError`] when a path
//! was refused.

use std::io;
use std::path::PathBuf;

/// Why the path-safety check ([`Workspace::resolve`](crate::Workspace::resolve), and
/// every file tool) refused a path.
///
/// `path` is always the text the caller gave, so the model sees its own input echoed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    /// The path was empty, or named the workspace root itself where a file was needed.
    #[error(
        "path `{path}` is empty or names the workspace root itself: \
         give a path relative to the workspace root, like `src/main.rs`"
    )]
    Empty {
        /// The path as given.
        path: String,
    },
    /// The path contained a NUL byte.
    #[error("path {path:?} contains a NUL byte: remove it")]
    Nul {
        /// The path as given.
        path: String,
    },
    /// The path was absolute (`/…`, `\…`, `~…` or a drive like `C:`).
    #[error(
        "path `{path}` is absolute: use a path relative to the workspace root, \
         like `src/main.rs`"
    )]
    Absolute {
        /// The path as given.
        path: String,
    },
    /// The path contained a `..` component.
    #[error(
        "path `{path}` leaves the workspace: use a path relative to the workspace root \
         without `..`"
    )]
    ParentComponent {
        /// The path as given.
        path: String,
    },
    /// A component of the path is `.git`, in any letter case.
    #[error(
        "path `{path}` is inside `.git`, which the tools never touch: a change there \
         cannot be rewound and its hooks run code; work on the files outside `.git`"
    )]
    Git {
        /// The path as given.
        path: String,
    },
    /// The path goes into, or names, a directory the workspace protects (cairn's store,
    /// see [`Workspace::protect`](crate::Workspace::protect)).
    #[error(
        "path `{path}` goes into the protected directory `{dir}`, which the tools never \
         touch (it holds cairn's own records): use a path elsewhere in the workspace"
    )]
    Protected {
        /// The path as given.
        path: String,
        /// The workspace-relative prefix that is the protected directory.
        dir: PathBuf,
    },
    /// The path breaks another rule of [`cairn_store::safe::RelPath`].
    #[error("path `{path}` is refused: {rule}")]
    Invalid {
        /// The path as given.
        path: String,
        /// The rule it breaks.
        rule: cairn_store::safe::PathRule,
    },
    /// A component of the path, possibly the last, is a symbolic link.
    #[error(
        "path `{path}` goes through the symbolic link `{link}`: symlinks are never \
         followed; use the path of the real file or directory instead"
    )]
    Symlink {
        /// The path as given.
        path: String,
        /// The workspace-relative prefix that is a symlink.
        link: PathBuf,
    },
    /// The path would resolve outside the workspace root. The descriptor-based check
    /// refuses such a path earlier (as `..`, absolute or a symlink), so this is kept for
    /// callers that match on it.
    #[error(
        "path `{path}` resolves outside the workspace: use a path inside the \
         workspace root"
    )]
    Escapes {
        /// The path as given.
        path: String,
    },
    /// Nothing exists at the path (reads only; writes create missing parents).
    #[error("`{path}` does not exist: check the name with list_dir or search")]
    NotFound {
        /// The path as given.
        path: String,
    },
    /// A component before the last is a file, not a directory.
    #[error("path `{path}` cannot be resolved: `{component}` is a file, not a directory")]
    NotADirectory {
        /// The path as given.
        path: String,
        /// The workspace-relative prefix that is not a directory.
        component: PathBuf,
    },
    /// A write was aimed at an existing directory.
    #[error("`{path}` is a directory: name a file to write, like `{path}/file.txt`")]
    IsADirectory {
        /// The path as given.
        path: String,
    },
    /// The filesystem could not be inspected.
    #[error("cannot inspect `{component}` while resolving `{path}`: {source}")]
    Io {
        /// The path as given.
        path: String,
        /// The workspace-relative prefix being inspected.
        component: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
}

/// Everything that can go wrong in a tool, in [`Workspace::new`](crate::Workspace::new)
/// or in [`Toolbox::call`](crate::Toolbox::call).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The workspace root given to [`Workspace::new`](crate::Workspace::new) cannot be used.
    #[error("cannot use `{path}` as the workspace root: {source}; pass an existing directory")]
    WorkspaceRoot {
        /// The root as given.
        path: PathBuf,
        /// Why it cannot be used.
        source: io::Error,
    },
    /// A path was refused by the path-safety check.
    #[error(transparent)]
    Path(#[from] PathError),
    /// The arguments did not match the tool's parameters.
    #[error("invalid arguments for `{tool}`: {reason}; expected {expected}")]
    BadArguments {
        /// The tool called.
        tool: &'static str,
        /// What was wrong.
        reason: String,
        /// The expected shape, e.g. `{"path": string}`.
        expected: &'static str,
    },
    /// No tool of that name exists in the toolbox.
    #[error("unknown tool `{name}`; available: {available}")]
    UnknownTool {
        /// The name asked for.
        name: String,
        /// The names that exist, comma separated.
        available: String,
    },
    /// A directory given to [`Workspace::protect`](crate::Workspace::protect) cannot be
    /// inspected.
    #[error(
        "cannot inspect `{path}`, a directory the tools must never touch: {source}; \
         check that it is a readable directory"
    )]
    Protect {
        /// The directory as given.
        path: PathBuf,
        /// Why it cannot be inspected.
        source: io::Error,
    },
    /// The workspace root is, or is inside, a directory the tools must never touch.
    #[error(
        "the workspace `{root}` is inside a directory the tools must never touch, \
         `{protected}` (cairn's store): run in a workspace outside it"
    )]
    ProtectedRoot {
        /// The canonical workspace root.
        root: PathBuf,
        /// The protected directory as given.
        protected: PathBuf,
    },
    /// A filesystem operation failed.
    #[error("cannot {action} `{path}`: {source}")]
    Io {
        /// What was being done, e.g. "read".
        action: &'static str,
        /// The workspace-relative path.
        path: String,
        /// The underlying error.
        source: io::Error,
    },
    /// read_file or edit_file was aimed at a directory.
    #[error("`{path}` is a directory: use list_dir to see what it contains")]
    IsADirectory {
        /// The workspace-relative path.
        path: String,
    },
    /// A file tool was aimed at a FIFO, socket, device or other file that is not a
    /// regular file (opening one could block or have side effects).
    #[error(
        "`{path}` is {kind}, not a regular file: the file tools only read and write \
         regular files"
    )]
    NotRegular {
        /// The workspace-relative path.
        path: String,
        /// What it is, e.g. `a FIFO (named pipe)`.
        kind: &'static str,
    },
    /// list_dir was aimed at a file.
    #[error("`{path}` is a file, not a directory: use read_file to read it")]
    NotADirectory {
        /// The workspace-relative path.
        path: String,
    },
    /// edit_file was aimed at a file that is not UTF-8 text.
    #[error("`{path}` is not UTF-8 text, so it cannot be edited: use write_file to replace it")]
    NotText {
        /// The workspace-relative path.
        path: String,
    },
    /// edit_file's `old` text does not occur in the file.
    #[error(
        "old text not found in `{path}`: read the file and copy the text to replace \
         exactly, including whitespace"
    )]
    OldTextNotFound {
        /// The workspace-relative path.
        path: String,
    },
    /// edit_file's `old` text occurs more than once.
    #[error(
        "old text occurs {count} times in `{path}`; include more context so that it \
         occurs exactly once"
    )]
    OldTextAmbiguous {
        /// The workspace-relative path.
        path: String,
        /// How many times it occurs (overlapping occurrences counted).
        count: usize,
    },
    /// The shell could not be started.
    #[error("cannot start `sh` for the command: {source}; check that `sh` is installed")]
    Spawn {
        /// The underlying error.
        source: io::Error,
    },
    /// A tool's task failed unexpectedly (it panicked or was cancelled).
    #[error(
        "tool `{tool}` failed unexpectedly: {reason}; this is a bug in the tool, try another way"
    )]
    Crashed {
        /// The tool called.
        tool: String,
        /// What happened.
        reason: String,
    },
}
