//! Reading rule files: the nested files a walk or a check meets.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::matcher::{Chain, Group, Link};
use super::rule::compile_file;
use super::{IgnoreRules, IgnoreWarning};

/// A nested rule file larger than this is not read (a warning says so).
const NESTED_FILE_MAX: u64 = 4 << 20;

impl IgnoreRules {
    /// The chain in force inside directory `dir` (relative, not the root),
    /// given its parent's, after the text of its own rule file: the file's
    /// rules apply below `dir` only, after every rule read before them.
    /// `source` names the file in matches and warnings.
    fn enter(&self, dir: &str, source: &Path, text: &[u8], up: &Chain) -> Chain {
        let mut warnings = Vec::new();
        let compiled = compile_file(source, text, dir, &mut warnings);
        if !warnings.is_empty() {
            self.warn(warnings);
        }
        if compiled.is_empty() {
            return up.clone();
        }
        let base = self.next.fetch_add(compiled.len(), Ordering::Relaxed);
        Chain(Some(Arc::new(Link {
            group: Group::new(base, compiled),
            up: up.clone(),
        })))
    }

    /// Reads the rule file of directory `dir` (relative) from the root, for
    /// a check outside a walk. A missing file, or one that is not a regular
    /// file, is none; an unreadable one is a warning.
    pub(super) fn read_nested(&self, dir: &str, up: &Chain) -> Chain {
        let Some(root) = &self.root else {
            return up.clone();
        };
        let path = root.join(dir).join(self.name);
        let opened = cairn_objects::open_nofollow(&path);
        self.read_opened(dir, &path, opened, up)
    }

    /// The chain in force in `dir` once its rule file is read, given the
    /// file as opened without following a symlink (the walk opens it in
    /// the directory, a check by path). The one rule for every nested file:
    /// missing, a symlink (never followed, as git does) or not a regular
    /// file is no file; unreadable or over [`NESTED_FILE_MAX`] bytes is a
    /// warning and adds no rules.
    pub(crate) fn read_opened(
        &self,
        dir: &str,
        path: &Path,
        opened: std::io::Result<std::fs::File>,
        up: &Chain,
    ) -> Chain {
        use std::io::Read;
        let warn = |w| {
            self.warn(vec![w]);
            up.clone()
        };
        let file = match opened {
            Ok(f) => f,
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ENOENT | libc::ELOOP | libc::ENOTDIR)
                ) =>
            {
                return up.clone()
            }
            Err(e) => return warn(unreadable(path, &e)),
        };
        let meta = match file.metadata() {
            Ok(m) => m,
            Err(e) => return warn(unreadable(path, &e)),
        };
        if !meta.is_file() {
            return up.clone();
        }
        if meta.len() > NESTED_FILE_MAX {
            return warn(too_large(path, meta.len()));
        }
        let mut text = Vec::new();
        if let Err(e) = file.take(NESTED_FILE_MAX).read_to_end(&mut text) {
            return warn(unreadable(path, &e));
        }
        self.enter(dir, path, &text, up)
    }
}

fn too_large(path: &Path, len: u64) -> IgnoreWarning {
    IgnoreWarning {
        source: path.to_owned(),
        line: 0,
        reason: format!("the file ({len} bytes) is over {NESTED_FILE_MAX} bytes; not read"),
    }
}

fn unreadable(path: &Path, e: &std::io::Error) -> IgnoreWarning {
    IgnoreWarning {
        source: path.to_owned(),
        line: 0,
        reason: format!("the file cannot be read ({e}); its rules do not apply"),
    }
}
