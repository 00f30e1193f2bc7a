//! The files of a machine directory: private, and its disks sparse.
//!
//! Invariants:
//! - Every directory under `<store>/machines/` is `0700` and every file
//!   `0600`, as everywhere in a store (its console log holds what the
//!   guest's programs printed). cairn's own go through cairn-store's
//!   private helpers; the ones qemu, qemu-img and mkfs make are made under
//!   umask `077` ([`private_umask`]) and set to `0600` once made
//!   ([`make_private`]), because a daemonized qemu sets its own umask
//!   (`027`) and a restored checkpoint carries the modes it was saved with.
//! - A raw disk keeps no block of zeros allocated ([`punch_zeros`]): a
//!   1 GiB disk a guest wrote a few megabytes to takes a few megabytes,
//!   however it was written (mkfs zeroing its journal, a checkpoint
//!   written back whole). A punched range reads as zeros, so the guest
//!   sees the same bytes; a crash while punching leaves every byte as it
//!   was.
//! - A generation is durable before anything names it
//!   ([`sync_generation`]): its files (the disk made by mkfs or qemu-img,
//!   which need not sync it, and the kernel and initrd, which may be hard
//!   links) and its directory's entries are fsynced before `machine.json`
//!   or a journaled `machine started` names the generation.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use cairn_store::durable::{DIR_MODE, FILE_MODE};

use crate::VmError;

/// The unit [`punch_zeros`] looks at: a block of zeros this long (and
/// aligned) is given back. Small enough to find a file system's metadata
/// gaps, large enough to read quickly.
const PUNCH_BLOCK: usize = 64 << 10;

/// Creates `dir` and its missing parents `0700` (their parents fsynced),
/// and makes `dir` itself `0700` if it was there already (a machine
/// directory made by an older cairn).
pub(crate) fn create_dir(dir: &Path) -> Result<(), VmError> {
    cairn_store::durable::create_dir_private(dir)?;
    set_mode(dir, DIR_MODE)
}

/// Opens `path` for appending, creating it `0600`.
pub(crate) fn open_append(path: &Path) -> Result<File, VmError> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(FILE_MODE)
        .open(path)
        .map_err(|e| VmError::io("creating", path, e))
}

/// Creates `path` empty and `0600` unless it is there: a file a child
/// process then opens keeps that mode.
pub(crate) fn create_empty(path: &Path) -> Result<(), VmError> {
    open_append(path).map(drop)
}

/// Makes a child process create its files `0600` and directories `0700`.
pub(crate) fn private_umask(cmd: &mut Command) -> &mut Command {
    // SAFETY: umask(2) is async-signal-safe and touches only the child.
    unsafe {
        cmd.pre_exec(|| {
            libc::umask(0o077);
            Ok(())
        })
    }
}

/// Sets `path` (a file, a socket or a directory, and what a directory
/// holds, recursively) to `0600` files and `0700` directories. What is not
/// there is skipped: a child may not have made it.
pub(crate) fn make_private(path: &Path) -> Result<(), VmError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(VmError::io("reading the mode of", path, e)),
    };
    if meta.file_type().is_symlink() {
        return Ok(());
    }
    if meta.is_dir() {
        set_mode(path, DIR_MODE)?;
        let entries = std::fs::read_dir(path).map_err(|e| VmError::io("listing", path, e))?;
        for e in entries {
            let e = e.map_err(|e| VmError::io("listing", path, e))?;
            make_private(&e.path())?;
        }
        return Ok(());
    }
    if meta.permissions().mode() & 0o777 != FILE_MODE {
        set_mode(path, FILE_MODE)?;
    }
    Ok(())
}

fn set_mode(path: &Path, mode: u32) -> Result<(), VmError> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| VmError::io("setting the mode of", path, e))
}

/// Copies `from` to `to`, a new `0600` file; a hard link where `from` is
/// private already (kernels and initrds are never written in place), so a
/// generation shares them with the one it was saved from.
pub(crate) fn copy_private(from: &Path, to: &Path) -> Result<(), VmError> {
    let private =
        std::fs::metadata(from).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o077 == 0);
    if private && std::fs::hard_link(from, to).is_ok() {
        return Ok(());
    }
    let mut src = File::open(from).map_err(|e| VmError::io("reading", from, e))?;
    let mut dst = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(to)
        .map_err(|e| VmError::io("creating", to, e))?;
    std::io::copy(&mut src, &mut dst).map_err(|e| VmError::io("copying", from, e))?;
    dst.sync_all().map_err(|e| VmError::io("syncing", to, e))?;
    Ok(())
}

/// Gives back to the file system every aligned block of zeros of the raw
/// disk at `path`, leaving its length and every byte as they read. Ranges
/// that are holes already are skipped. A file system that cannot punch
/// holes leaves the file as it is (not an error: the disk is only
/// larger).
///
/// # Errors
/// The file cannot be read, or punching fails otherwise.
pub(crate) fn punch_zeros(path: &Path) -> Result<(), VmError> {
    use std::os::unix::fs::FileExt;
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| VmError::io("opening", path, e))?;
    let len = f
        .metadata()
        .map_err(|e| VmError::io("reading the size of", path, e))?
        .len();
    let fd = f.as_raw_fd();
    let mut buf = vec![0u8; PUNCH_BLOCK];
    let mut at = 0u64;
    while at < len {
        // The next data at or after `at`: holes need no reading.
        let Some(data) = seek(fd, at, libc::SEEK_DATA) else {
            break;
        };
        let hole = seek(fd, data, libc::SEEK_HOLE).unwrap_or(len);
        // Whole blocks only: a partial one stays as it is.
        let mut block = data - data % PUNCH_BLOCK as u64;
        while block < hole {
            let n = (PUNCH_BLOCK as u64).min(len - block) as usize;
            f.read_exact_at(&mut buf[..n], block)
                .map_err(|e| VmError::io("reading", path, e))?;
            if n == PUNCH_BLOCK && buf.iter().all(|&b| b == 0) {
                let (Ok(off), Ok(size)) = (
                    libc::off_t::try_from(block),
                    libc::off_t::try_from(PUNCH_BLOCK),
                ) else {
                    break;
                };
                // SAFETY: fallocate on a descriptor we own; punching keeps
                // the size and makes the range read as zeros, which it is.
                let r = unsafe {
                    libc::fallocate(
                        fd,
                        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                        off,
                        size,
                    )
                };
                if r != 0 {
                    let e = std::io::Error::last_os_error();
                    if e.raw_os_error() == Some(libc::EOPNOTSUPP) {
                        return Ok(());
                    }
                    return Err(VmError::io("giving back the zeros of", path, e));
                }
            }
            block += PUNCH_BLOCK as u64;
        }
        at = hole.max(block);
    }
    Ok(())
}

/// Makes the generation `gen` durable: fsyncs every regular file in it,
/// then `gen` itself, so that after a power cut the generation that
/// `machine.json` and the journal name has its kernel, initrd and disk,
/// each whole. Called once the generation is assembled, before either
/// names it.
///
/// # Errors
/// A file or the directory cannot be opened or synced: the generation must
/// not be named (a failed sync is never retried).
pub(crate) fn sync_generation(gen: &Path) -> Result<(), VmError> {
    use cairn_store::storage;
    let entries = std::fs::read_dir(gen).map_err(|e| VmError::io("listing", gen, e))?;
    for e in entries {
        let e = e.map_err(|e| VmError::io("listing", gen, e))?;
        let path = e.path();
        let kind = e
            .file_type()
            .map_err(|e| VmError::io("reading the type of", &path, e))?;
        if !kind.is_file() {
            continue;
        }
        let f = File::open(&path).map_err(|e| VmError::io("opening", &path, e))?;
        storage::sync_all(&f, &path, "vm.generation")
            .map_err(|e| VmError::io("syncing", &path, e))?;
    }
    cairn_store::durable::fsync_dir_at(gen, "vm.generation.dir")?;
    Ok(())
}

/// `lseek(fd, from, whence)`; `None` past the end (ENXIO) or on error.
fn seek(fd: i32, from: u64, whence: i32) -> Option<u64> {
    let from = libc::off_t::try_from(from).ok()?;
    // SAFETY: lseek on a descriptor we own; it only moves the offset.
    let r = unsafe { libc::lseek(fd, from, whence) };
    u64::try_from(r).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777
    }

    /// Collects the syncs beneath one directory, in order.
    struct Syncs(std::path::PathBuf, std::sync::Mutex<Vec<String>>);

    impl cairn_store::storage::Recorder for Syncs {
        fn record(&self, op: cairn_store::storage::Op<'_>) {
            use cairn_store::storage::Op;
            let (kind, path) = match op {
                Op::SyncFile { path, .. } => ("file", path),
                Op::SyncDir { path, .. } => ("dir", path),
                _ => return,
            };
            if let Ok(rel) = path.strip_prefix(&self.0) {
                self.1
                    .lock()
                    .unwrap()
                    .push(format!("{kind} {}", rel.display()));
            }
        }
    }

    /// Every file of a generation (the disk mkfs made, a hard-linked
    /// kernel) is fsynced, then the generation's directory, so what
    /// `machine.json` then names survives a power cut.
    #[test]
    fn a_generation_s_files_then_its_directory_are_fsynced() {
        let root = tempfile::tempdir().unwrap();
        let gen = root.path().join("gen-1");
        create_dir(&gen).unwrap();
        let kept = root.path().join("kernel-elsewhere");
        std::fs::write(&kept, b"kernel").unwrap();
        std::fs::hard_link(&kept, gen.join("kernel")).unwrap();
        std::fs::write(gen.join("initrd"), b"initrd").unwrap();
        let disk = File::create(gen.join("base.raw")).unwrap();
        disk.set_len(1 << 20).unwrap();
        std::fs::create_dir(gen.join("not-a-file")).unwrap();
        let syncs = std::sync::Arc::new(Syncs(root.path().to_path_buf(), Default::default()));
        let _installed = cairn_store::storage::install(syncs.clone());
        sync_generation(&gen).unwrap();
        let mut got = syncs.1.lock().unwrap().clone();
        assert_eq!(
            got.pop().as_deref(),
            Some("dir gen-1"),
            "the directory last"
        );
        got.sort();
        assert_eq!(
            got,
            [
                "file gen-1/base.raw",
                "file gen-1/initrd",
                "file gen-1/kernel"
            ]
        );
    }

    #[test]
    fn directories_and_files_are_private_whatever_made_them() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("machines/r1/gen-1");
        create_dir(&dir).unwrap();
        for d in ["machines", "machines/r1", "machines/r1/gen-1"] {
            assert_eq!(mode(&root.path().join(d)), 0o700, "{d}");
        }
        // One an older cairn made open is closed.
        let old = root.path().join("machines/r0");
        std::fs::create_dir(&old).unwrap();
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o755)).unwrap();
        create_dir(&old).unwrap();
        assert_eq!(mode(&old), 0o700);

        create_empty(&dir.join("console.log")).unwrap();
        assert_eq!(mode(&dir.join("console.log")), 0o600);
        let log = dir.join("qemu.log");
        open_append(&log).unwrap().write_all(b"x").unwrap();
        assert_eq!(mode(&log), 0o600);

        // A child under the private umask.
        let out = dir.join("made-by-a-child");
        let status = private_umask(Command::new("sh").arg("-c").arg(format!(
            "echo x > '{}' && mkdir '{}.d'",
            out.display(),
            out.display()
        )))
        .status()
        .unwrap();
        assert!(status.success());
        assert_eq!(mode(&out), 0o600);
        assert_eq!(mode(&dir.join("made-by-a-child.d")), 0o700);

        // What a daemonized qemu or an old checkpoint left open.
        let open = dir.join("sub");
        std::fs::create_dir(&open).unwrap();
        std::fs::write(open.join("f"), b"x").unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(open.join("f"), std::fs::Permissions::from_mode(0o644)).unwrap();
        make_private(&dir).unwrap();
        assert_eq!(mode(&open), 0o700);
        assert_eq!(mode(&open.join("f")), 0o600);
        make_private(&dir.join("not-there")).unwrap();

        // A public kernel is copied private, a private one linked.
        let public = root.path().join("vmlinuz");
        std::fs::write(&public, b"kernel").unwrap();
        std::fs::set_permissions(&public, std::fs::Permissions::from_mode(0o644)).unwrap();
        copy_private(&public, &dir.join("kernel")).unwrap();
        assert_eq!(mode(&dir.join("kernel")), 0o600);
        assert_eq!(mode(&public), 0o644, "the source is not touched");
        assert_eq!(std::fs::read(dir.join("kernel")).unwrap(), b"kernel");
        copy_private(&dir.join("kernel"), &dir.join("kernel2")).unwrap();
        assert_eq!(
            std::fs::metadata(dir.join("kernel2")).unwrap().ino(),
            std::fs::metadata(dir.join("kernel")).unwrap().ino()
        );
    }

    #[test]
    fn a_disk_written_whole_keeps_only_its_data_allocated() {
        let dir = tempfile::tempdir().unwrap();
        let disk = dir.path().join("disk.raw");
        let size: u64 = 64 << 20;
        // Written whole, as a checkpoint is written back: zeros everywhere
        // but two regions (one not block-aligned) and the last byte.
        {
            let mut f = File::create(&disk).unwrap();
            let zeros = vec![0u8; 1 << 20];
            for _ in 0..size >> 20 {
                f.write_all(&zeros).unwrap();
            }
            f.write_all_at_helper(1 << 20, &[7u8; 4096]);
            f.write_all_at_helper((10 << 20) + 100, &[9u8; 200_000]);
            f.write_all_at_helper(size - 1, &[1]);
            f.sync_all().unwrap();
        }
        let before = std::fs::read(&disk).unwrap();
        let allocated = |p: &Path| std::fs::metadata(p).unwrap().blocks() * 512;
        assert!(allocated(&disk) >= size, "written whole, allocated whole");
        punch_zeros(&disk).unwrap();
        let after = std::fs::read(&disk).unwrap();
        assert_eq!(after.len() as u64, size);
        assert!(before == after, "every byte reads as it did");
        // Five 64 KiB blocks hold data (the 200,000 bytes straddle four),
        // with the file system's extent blocks besides.
        let kept = allocated(&disk);
        assert!(kept <= 1 << 20, "{kept} bytes still allocated of {size}");
        // Again: nothing changes, holes are skipped.
        punch_zeros(&disk).unwrap();
        assert_eq!(std::fs::read(&disk).unwrap(), before);
    }

    trait WriteAt {
        fn write_all_at_helper(&self, at: u64, bytes: &[u8]);
    }

    impl WriteAt for File {
        fn write_all_at_helper(&self, at: u64, bytes: &[u8]) {
            use std::os::unix::fs::FileExt;
            self.write_all_at(bytes, at).unwrap();
        }
    }
}
