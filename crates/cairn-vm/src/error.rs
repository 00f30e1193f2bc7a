//! The errors of whole-machine sessions, each saying what to do.

use std::path::PathBuf;

/// What went wrong with a VM session.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VmError {
    /// A program cairn needs to run a guest is not installed.
    #[error(
        "{tool} is not installed: install the Debian package {package} (apt-get install {package})"
    )]
    MissingTool {
        /// The program.
        tool: &'static str,
        /// The Debian package that provides it.
        package: &'static str,
    },
    /// No kernel for the default guest.
    #[error("no kernel for the guest: {why}. Install linux-image-cloud-amd64, or unpack it (`apt-get download linux-image-cloud-amd64 && dpkg-deb -x linux-image-*.deb DIR && cp DIR/boot/vmlinuz-* DIR/vmlinuz`) and set CAIRN_VM_KERNEL=DIR, or give --kernel K --initrd I")]
    NoKernel {
        /// What was looked for.
        why: String,
    },
    /// No accelerator boots the guest.
    #[error("the guest does not boot: {why}")]
    Accel {
        /// What each accelerator said.
        why: String,
    },
    /// The session's guest is not running.
    #[error("the guest is not running: {why}")]
    NotRunning {
        /// How it was found so.
        why: String,
    },
    /// The session's guest runs, and the operation would replace it.
    #[error("the guest of session {run} is running: stop it first (`cairn vm stop {run}`), then restore")]
    Running {
        /// The session.
        run: String,
    },
    /// The session has no machine.
    #[error("session {run} is not a VM session (see `cairn vm ls`)")]
    NotAMachine {
        /// The session.
        run: String,
    },
    /// The checkpoint holds no machine.
    #[error("checkpoint {id} holds no machine state: it was not saved from a running VM session")]
    NoMachineState {
        /// The checkpoint.
        id: String,
    },
    /// A bad argument.
    #[error("{0}")]
    Usage(String),
    /// The machine directory's configuration does not read.
    #[error("{path}: {reason}; the machine's configuration is damaged (its checkpoints are not: `cairn checkpoint ls` lists them)")]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// qemu's monitor said no, or did not answer.
    #[error("qemu's monitor: {0}")]
    Qmp(String),
    /// qemu or qemu-img failed.
    #[error("{what}{log}")]
    Qemu {
        /// What failed.
        what: String,
        /// The end of qemu's log, if any, prefixed.
        log: String,
    },
    /// Assembling the guest failed.
    #[error("assembling the guest: {0}")]
    Guest(String),
    /// IO on the machine directory.
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// On what.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A checkpoint error (a damaged chunk, a refused manifest…).
    #[error(transparent)]
    Checkpoint(#[from] cairn_checkpoint::CheckpointError),
    /// A session or journal error (the journal lock held…).
    #[error(transparent)]
    Session(#[from] cairn_sessions::SessionError),
    /// A journal error.
    #[error(transparent)]
    Journal(#[from] cairn_journal::JournalError),
    /// A store error (a durable write that failed).
    #[error(transparent)]
    Store(#[from] cairn_store::StoreError),
    /// The response store.
    #[error(transparent)]
    Calls(#[from] cairn_calls::CallsError),
}

impl VmError {
    pub(crate) fn io(action: &'static str, path: &std::path::Path, source: std::io::Error) -> Self {
        VmError::Io {
            action,
            path: path.to_path_buf(),
            source,
        }
    }

    /// The operation was refused (exit 4): the guest is not running, or is.
    pub fn is_refusal(&self) -> bool {
        matches!(self, VmError::NotRunning { .. } | VmError::Running { .. })
    }

    /// Bad input (exit 2).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            VmError::Usage(_)
                | VmError::NotAMachine { .. }
                | VmError::NoMachineState { .. }
                | VmError::MissingTool { .. }
                | VmError::NoKernel { .. }
        )
    }

    /// The machine's configuration is damaged (exit 3).
    pub fn is_integrity(&self) -> bool {
        matches!(self, VmError::Damaged { .. })
    }
}
