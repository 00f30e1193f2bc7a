//! cairn's whole-machine sessions (DESIGN §13): a qemu guest run as a
//! session, driven over QMP, whose memory, device state and disk are saved
//! as ONE checkpoint and restored or forked mid-thought.
//!
//! A VM session is an ordinary run (its journal holds `machine` records for
//! what happened to the guest, `checkpoint` records for its saves, and the
//! `model_call` records of the gateway when the guest calls a model through
//! it) plus a machine directory `<store>/machines/<run>/`:
//!
//! ```text
//! machine.json     the guest's configuration and its current generation
//! qmp.sock         qemu's monitor (one qemu per session at a time)
//! qemu.pid
//! gen-<ulid>/      one generation: a boot or a restore
//!   kernel initrd  what it booted (copied in: checkpoints carry them)
//!   base.raw       the disk (or disk.raw, restored from a checkpoint)
//!   top-*.qcow2    the overlays a save switched the disk to
//!   console.log    everything the guest wrote on its serial console
//! saving/          a save in progress (removed by the next save)
//! ```
//!
//! # Guarantees
//! - **One checkpoint or none**: a save stages the memory stream, the disk
//!   as it was at the pause, the kernel, the initrd and the configuration in
//!   `saving/` and publishes them through cairn-checkpoint as one named
//!   directory: listed only once complete, whenever the save is killed.
//! - **A short pause**: the guest is paused only while qemu writes its
//!   memory stream; at the pause its disk is switched to a new qcow2
//!   overlay, and the frozen layers are read after the guest runs again.
//! - **The guest always runs again**: a save continues the guest whatever
//!   failed after the pause, and a save after a killed one first cancels a
//!   migration left running and continues a guest left paused.
//! - **Restore checks before it starts**: every chunk is re-hashed as the
//!   checkpoint is written into a new generation; a damaged one fails the
//!   restore before qemu starts. A restore refuses while the session's
//!   guest runs.
//! - **Private and sparse**: every directory under `machines/` is `0700`
//!   and every file `0600`, the ones qemu makes included; raw disks keep
//!   no block of zeros allocated.
//! - **A stop ends the session**: `vm stop` journals `machine stopped` and
//!   an `interrupted` terminal; a restore (`machine restored`) runs it
//!   again.
//! - **The two ledgers**: before a restored guest is continued, a
//!   `reconcile` record names what the host saw after the checkpoint (the
//!   model calls journaled since, the console lines since) that the guest,
//!   woken at the checkpoint, does not remember.
//!
//! # Not guaranteed
//! - The guest's own writes are as durable as its disk's cache mode
//!   (writeback); a checkpoint is the durable point.
//! - A save killed after the pause leaves the guest paused until the next
//!   save, stop or restore (`cairn vm ls` shows it paused).
//!
//! Synchronous: qemu and qemu-img are child processes, QMP a Unix socket.
#![deny(missing_docs)]

mod checkpoint;
mod error;
mod files;
mod guest;
mod listing;
mod machine;
mod qmp;

pub use checkpoint::{
    fork, fork_at_checkpoint, restore, save, CheckpointFork, RestoreReport, VmSaveReport,
};
pub use error::VmError;
pub use guest::{Initramfs, Kernel, Node};
pub use listing::{list, stop, MachineInfo, Stopped};
pub use machine::{
    gateway_from_guest, is_machine, parse_size, start, Accel, MachineConfig, StartOptions, Started,
};
pub use qmp::Qmp;
