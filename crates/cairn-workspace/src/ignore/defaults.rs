//! What cairn decides on its own: the rule file names, the default
//! excludes, and what is always excluded.

/// The project rule files, in order of preference: the first that exists at
/// the workspace root is the one used, there and in every directory below.
pub const IGNORE_FILES: [&str; 2] = [".cairnignore", ".gitignore"];

/// Trees excluded by default by their name alone: names no project uses
/// for source, because a tool owns them (dot-named tool directories,
/// `node_modules`, `__pycache__`).
///
/// A name that is also a plain word for source is not here: `target`
/// (a web framework's route directory, a package) and `venv`/`.venv` go by
/// evidence instead ([`crate::DEFAULT_MARKERS`]: a `CACHEDIR.TAG`, which
/// cargo writes in `target/`, or a `pyvenv.cfg`), so a directory is left
/// out for what it holds, never for what it is called. `vendor/` is
/// deliberately absent (committed source in Go projects), and so are
/// `dist/` and `build/`: they are often exactly what a run was asked to
/// produce, and rebuilding them needs a toolchain the operator may not have;
/// a `.gitignore` listing them is a packaging policy, not a recovery one. A
/// project re-includes any of these with a `!` rule (e.g. `!.next/`).
pub const DEFAULT_EXCLUDES: &[&str] = &[
    "node_modules/",
    "__pycache__/",
    ".pytest_cache/",
    ".mypy_cache/",
    ".ruff_cache/",
    ".tox/",
    ".nox/",
    ".next/",
    ".nuxt/",
    ".svelte-kit/",
    ".parcel-cache/",
    ".turbo/",
    ".gradle/",
];

/// Rules applied whatever the project's rules say: git's database (a
/// directory, or a file in a worktree or submodule) and cairn's temporary
/// files, by the one temp-name scheme (`cairn_store::safe::is_temp_name`:
/// every name starting with `TEMP_PREFIX`, whoever staged it — a restore,
/// a tool, a materialisation), so a crash leftover is never captured as the
/// run's work, and so never deleted by a restore either.
pub(crate) fn always_excluded() -> [String; 2] {
    [
        ".git".to_owned(),
        format!("{}*", globset::escape(cairn_store::safe::TEMP_PREFIX)),
    ]
}
