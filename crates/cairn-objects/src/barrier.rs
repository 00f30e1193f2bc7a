//! When a batch of objects takes the file-system barrier (one `syncfs`
//! instead of an fsync per file, see `batch.rs`). Either way is as durable;
//! the rule is about cost: a barrier saves the fsyncs of every file the
//! batch stages, and costs writing out everything else the file system
//! holds dirty.

/// What one fsync the barrier saves is worth in other writers' dirty data
/// (see [`Barrier::FromWhenQuiet`]): about what a disk writes in the time
/// of one fsync's flush.
const OTHERS_DIRTY_PER_FILE: u64 = 256 << 10;

/// When a batch replaces its per-file fsyncs by the file-system barrier
/// (`syncfs`), which is used only where the kernel reports errors from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Barrier {
    /// From this many staged files on.
    From(usize),
    /// From this many staged files on, and only while the kernel holds
    /// little dirty data besides the batch's own: at most 256 KiB for each
    /// file it stages (`Dirty` + `Writeback` of `/proc/meminfo`). `syncfs` writes
    /// out every dirty page of the file system, so beside a writer (a build
    /// in the workspace) a barrier would make a small batch wait for, and
    /// flush early, all of the other's data; its own fsyncs wait for its own
    /// files only. For small batches committed often (the gateway's group
    /// commits), where the barrier saves only a few fsyncs.
    FromWhenQuiet(usize),
}

/// Whether a batch that stages `n` files of `own` bytes takes the barrier
/// under `rule`; `dirty` says how much the kernel holds dirty, and is asked
/// only when the rule depends on it (`None`, not known, declines).
pub(crate) fn takes_barrier(
    rule: Barrier,
    n: usize,
    own: u64,
    dirty: impl FnOnce() -> Option<u64>,
) -> bool {
    match rule {
        Barrier::From(min) => n >= min,
        Barrier::FromWhenQuiet(min) if n < min => false,
        Barrier::FromWhenQuiet(_) => {
            let allowed = (n as u64).saturating_mul(OTHERS_DIRTY_PER_FILE);
            dirty().is_some_and(|d| d.saturating_sub(own) <= allowed)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quiet_barrier_is_taken_only_while_little_else_is_dirty() {
        let per = OTHERS_DIRTY_PER_FILE;
        let never = || -> Option<u64> { panic!("asked for the dirty bytes") };
        // A fixed threshold never asks the kernel.
        assert!(takes_barrier(Barrier::From(2), 2, 0, never));
        assert!(!takes_barrier(Barrier::From(3), 2, 0, never));
        // Below its threshold neither does the quiet rule.
        assert!(!takes_barrier(Barrier::FromWhenQuiet(3), 2, 0, never));
        // Two files allow twice the allowance of others' dirty data, over
        // and above the batch's own pages.
        let own = 8192;
        assert!(takes_barrier(Barrier::FromWhenQuiet(2), 2, own, || Some(0)));
        assert!(takes_barrier(Barrier::FromWhenQuiet(2), 2, own, || Some(
            own + 2 * per
        )));
        assert!(!takes_barrier(Barrier::FromWhenQuiet(2), 2, own, || Some(
            own + 2 * per + 1
        )));
        // More files allow more; an unknown state declines.
        assert!(takes_barrier(Barrier::FromWhenQuiet(2), 300, own, || Some(
            own + 200 * per
        )));
        assert!(!takes_barrier(Barrier::FromWhenQuiet(2), 2, 0, || None));
    }
}
