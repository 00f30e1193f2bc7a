//! The default guest: a busybox initramfs around Debian's cloud kernel,
//! assembled by cairn from files the package manager installed.
//!
//! Invariants: the archive is written whole by temporary file and rename (a
//! half-written initramfs is never booted); a module is packed with every
//! module it depends on, dependencies first (the order `insmod` needs), and
//! one the kernel has built in is left out; a missing tool or kernel is an
//! error naming the Debian package that provides it.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::VmError;

/// The modules the guest loads: the virtio PCI transport, its disk and its
/// network card.
pub const GUEST_MODULES: &[&str] = &["virtio_pci", "virtio_mmio", "virtio_blk", "virtio_net"];

/// PID 1 of the default guest.
pub const INIT: &str = include_str!("init.sh");

/// Finds `name` on `PATH`, or in the administrator's directories (which a
/// user's `PATH` often lacks: `mkfs.ext4` is in `/sbin`).
pub fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// [`find_tool`], or the error naming the package to install.
///
/// # Errors
/// [`VmError::MissingTool`].
pub fn need_tool(name: &'static str, package: &'static str) -> Result<PathBuf, VmError> {
    find_tool(name).ok_or(VmError::MissingTool {
        tool: name,
        package,
    })
}

/// A kernel to boot: the image and the directory its modules are in.
#[derive(Clone, Debug)]
pub struct Kernel {
    /// The bzImage.
    pub image: PathBuf,
    /// `lib/modules/<version>`.
    pub modules: PathBuf,
}

impl Kernel {
    /// The kernel of the default guest: `CAIRN_VM_KERNEL` (a directory
    /// holding `vmlinuz` and `lib/modules/<version>/`, as
    /// `dpkg-deb -x linux-image-…-cloud-amd64.deb DIR` leaves it once
    /// `boot/vmlinuz-*` is copied to `DIR/vmlinuz`), else the newest
    /// readable `/boot/vmlinuz-<version>` with its `/lib/modules/<version>`.
    ///
    /// # Errors
    /// [`VmError::NoKernel`] saying what was looked for and how to get one.
    pub fn find() -> Result<Kernel, VmError> {
        if let Some(dir) = std::env::var_os("CAIRN_VM_KERNEL") {
            return Kernel::in_dir(Path::new(&dir)).map_err(|e| match e {
                VmError::NoKernel { why } => VmError::NoKernel {
                    why: format!("CAIRN_VM_KERNEL: {why}"),
                },
                other => other,
            });
        }
        let mut found: Vec<(String, PathBuf)> = std::fs::read_dir("/boot")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let version = name.strip_prefix("vmlinuz-")?.to_string();
                Some((version, e.path()))
            })
            .filter(|(v, p)| {
                Path::new("/lib/modules").join(v).join("kernel").is_dir()
                    && std::fs::File::open(p).is_ok()
            })
            .collect();
        found.sort();
        match found.pop() {
            Some((version, image)) => Ok(Kernel {
                image,
                modules: Path::new("/lib/modules").join(version),
            }),
            None => Err(VmError::NoKernel {
                why: "no readable /boot/vmlinuz-<version> with its /lib/modules/<version>, and CAIRN_VM_KERNEL is not set".into(),
            }),
        }
    }
}

impl Kernel {
    /// The kernel unpacked in `dir`: `dir/vmlinuz` and
    /// `dir/lib/modules/<version>/` (what `fetch-kernel.sh` leaves).
    ///
    /// # Errors
    /// [`VmError::NoKernel`] when either is missing.
    pub fn in_dir(dir: &Path) -> Result<Kernel, VmError> {
        let image = dir.join("vmlinuz");
        if !image.is_file() {
            return Err(VmError::NoKernel {
                why: format!("{} holds no vmlinuz", dir.display()),
            });
        }
        let modules = version_dir(&dir.join("lib/modules"))?;
        Ok(Kernel { image, modules })
    }
}

fn version_dir(versions: &Path) -> Result<PathBuf, VmError> {
    std::fs::read_dir(versions)
        .map_err(|e| VmError::NoKernel {
            why: format!("{}: {e}", versions.display()),
        })?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.join("kernel").is_dir())
        .ok_or_else(|| VmError::NoKernel {
            why: format!("no kernel modules under {}", versions.display()),
        })
}

/// One entry of an initramfs.
#[derive(Clone, Debug)]
pub enum Node {
    /// A directory.
    Dir,
    /// A regular file: its bytes and permission bits.
    File(Vec<u8>, u32),
    /// A character device: major, minor.
    Char(u32, u32),
}

/// An initramfs being assembled: paths (relative, `/`-separated) to nodes;
/// parent directories are added as entries are.
#[derive(Clone, Debug, Default)]
pub struct Initramfs {
    tree: BTreeMap<String, Node>,
}

impl Initramfs {
    /// An empty archive.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `node` at `path`, and every missing parent directory.
    pub fn put(&mut self, path: &str, node: Node) {
        let path = path.trim_start_matches('/');
        let mut at = String::new();
        for part in Path::new(path).parent().into_iter().flat_map(|p| p.iter()) {
            if !at.is_empty() {
                at.push('/');
            }
            at.push_str(&part.to_string_lossy());
            self.tree.entry(at.clone()).or_insert(Node::Dir);
        }
        self.tree.insert(path.to_string(), node);
    }

    /// Adds the file at `from` as `path`, with `mode`.
    ///
    /// # Errors
    /// The file cannot be read.
    pub fn put_file(&mut self, path: &str, from: &Path, mode: u32) -> Result<(), VmError> {
        let bytes = std::fs::read(from).map_err(|e| VmError::io("reading", from, e))?;
        self.put(path, Node::File(bytes, mode));
        Ok(())
    }

    /// Adds a binary and the shared libraries and loader it needs.
    ///
    /// # Errors
    /// A library is missing or unreadable.
    pub fn put_binary(&mut self, path: &str, from: &Path) -> Result<(), VmError> {
        self.put_file(path, from, 0o755)?;
        for lib in shared_libraries(from)? {
            self.put_file(&lib, Path::new(&lib), 0o755)?;
        }
        Ok(())
    }

    /// Adds `wanted` modules of `modules_dir` (`lib/modules/<version>`) and
    /// their dependencies under `modules/`, with `modules/order` naming them
    /// in the order to load them.
    ///
    /// # Errors
    /// A module is neither present nor built in, or cannot be read.
    pub fn put_modules(&mut self, modules_dir: &Path, wanted: &[&str]) -> Result<(), VmError> {
        let order = modules(modules_dir, wanted)?;
        let mut names = String::new();
        for (name, path) in &order {
            self.put(
                &format!("modules/{name}.ko"),
                Node::File(module_bytes(path)?, 0o644),
            );
            names.push_str(name);
            names.push('\n');
        }
        self.put("modules/order", Node::File(names.into_bytes(), 0o644));
        Ok(())
    }

    /// Writes the archive ("newc" cpio, as the kernel unpacks it) to `out`,
    /// whole or not at all.
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn write(&self, out: &Path) -> Result<(), VmError> {
        let dir = out.parent().unwrap_or(Path::new("."));
        let io = |e| VmError::io("writing the initramfs", out, e);
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
        {
            let mut w = std::io::BufWriter::new(tmp.as_file_mut());
            for (ino, (name, node)) in (1..).zip(&self.tree) {
                let (mode, nlink, rdev, data): (u32, u32, (u32, u32), &[u8]) = match node {
                    Node::Dir => (0o040755, 2, (0, 0), &[]),
                    Node::File(bytes, perm) => (0o100000 | perm, 1, (0, 0), bytes),
                    Node::Char(major, minor) => (0o020600, 1, (*major, *minor), &[]),
                };
                cpio_entry(&mut w, ino, name, mode, nlink, rdev, data).map_err(io)?;
            }
            cpio_entry(&mut w, 0, "TRAILER!!!", 0, 1, (0, 0), &[]).map_err(io)?;
            w.flush().map_err(io)?;
        }
        tmp.as_file().sync_all().map_err(io)?;
        tmp.persist(out).map_err(|e| io(e.error))?;
        cairn_store::durable::fsync_dir(dir)?;
        Ok(())
    }
}

/// One entry of a "newc" cpio archive.
fn cpio_entry(
    w: &mut impl Write,
    ino: u32,
    name: &str,
    mode: u32,
    nlink: u32,
    rdev: (u32, u32),
    data: &[u8],
) -> std::io::Result<()> {
    let too_big = || std::io::Error::other(format!("{name} is too large for a cpio archive"));
    let size = u32::try_from(data.len()).map_err(|_| too_big())?;
    let name_len = u32::try_from(name.len() + 1).map_err(|_| too_big())?;
    let fields = [
        ino, mode, 0, // uid
        0, // gid
        nlink, 0, // mtime
        size, 0, // devmajor
        0, // devminor
        rdev.0, rdev.1, name_len, 0, // check
    ];
    let mut header = String::from("070701");
    for f in fields {
        let _ = write!(header, "{f:08X}");
    }
    w.write_all(header.as_bytes())?;
    w.write_all(name.as_bytes())?;
    w.write_all(&[0])?;
    let pad = |n: usize| vec![0u8; (4 - n % 4) % 4];
    w.write_all(&pad(header.len() + name.len() + 1))?;
    w.write_all(data)?;
    w.write_all(&pad(data.len()))
}

/// The absolute paths of the shared libraries and dynamic loader a binary
/// needs, as `ldd` lists them; none for a static one.
///
/// # Errors
/// `ldd` cannot run, or says a library is not found.
pub fn shared_libraries(bin: &Path) -> Result<Vec<String>, VmError> {
    let ldd = need_tool("ldd", "libc-bin")?;
    let out = Command::new(ldd)
        .arg(bin)
        .output()
        .map_err(|e| VmError::io("running ldd on", bin, e))?;
    if !out.status.success() {
        // "not a dynamic executable": nothing to copy.
        return Ok(Vec::new());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut libs = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.contains("not found") {
            return Err(VmError::Guest(format!("ldd {}: {line}", bin.display())));
        }
        let path = match line.split_once("=>") {
            Some((_, right)) => right.trim(),
            None => line,
        };
        let path = path.split_whitespace().next().unwrap_or("");
        if path.starts_with('/') {
            libs.push(path.to_string());
        }
    }
    Ok(libs)
}

/// `wanted` and the modules they depend on, dependencies first, from
/// `modules_dir` (`lib/modules/<version>`); built-in ones left out.
///
/// # Errors
/// A module is neither present nor built in, or cannot be read.
pub fn modules(modules_dir: &Path, wanted: &[&str]) -> Result<Vec<(String, PathBuf)>, VmError> {
    let builtin = std::fs::read_to_string(modules_dir.join("modules.builtin")).unwrap_or_default();
    let mut index = HashMap::new();
    let mut stack = vec![modules_dir.join("kernel")];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d).map_err(|e| VmError::io("listing", &d, e))?;
        for e in entries {
            let p = e.map_err(|e| VmError::io("listing", &d, e))?.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Some(name) = p.file_name().and_then(|n| n.to_str()) {
                if let Some(stem) = [".ko", ".ko.xz", ".ko.zst"]
                    .iter()
                    .find_map(|s| name.strip_suffix(s))
                {
                    index.insert(stem.replace('-', "_"), p.clone());
                }
            }
        }
    }
    fn visit(
        name: &str,
        index: &HashMap<String, PathBuf>,
        builtin: &str,
        order: &mut Vec<(String, PathBuf)>,
    ) -> Result<(), VmError> {
        if order.iter().any(|(n, _)| n == name) {
            return Ok(());
        }
        let Some(path) = index.get(name) else {
            let built_in = builtin
                .lines()
                .any(|l| l.rsplit('/').next() == Some(&format!("{name}.ko")));
            return if built_in {
                Ok(())
            } else {
                Err(VmError::NoKernel {
                    why: format!("the kernel has no module {name}, nor has it built in"),
                })
            };
        };
        for dep in module_depends(&module_bytes(path)?) {
            visit(&dep, index, builtin, order)?;
        }
        order.push((name.to_string(), path.clone()));
        Ok(())
    }
    let mut order = Vec::new();
    for w in wanted {
        visit(w, &index, &builtin, &mut order)?;
    }
    Ok(order)
}

/// A module's bytes, decompressed (`xz`, `zstd`) when it is stored so.
///
/// # Errors
/// The file cannot be read, or its decompressor is missing or fails.
pub fn module_bytes(path: &Path) -> Result<Vec<u8>, VmError> {
    let name = path.to_string_lossy();
    let (tool, package) = if name.ends_with(".xz") {
        ("xz", "xz-utils")
    } else if name.ends_with(".zst") {
        ("zstd", "zstd")
    } else {
        return std::fs::read(path).map_err(|e| VmError::io("reading", path, e));
    };
    let out = Command::new(need_tool(tool, package)?)
        .arg("-dc")
        .arg(path)
        .output()
        .map_err(|e| VmError::io("decompressing", path, e))?;
    if !out.status.success() {
        return Err(VmError::Guest(format!("{tool} -dc {name}: {}", out.status)));
    }
    Ok(out.stdout)
}

/// The `depends=` of a module's `.modinfo`.
pub fn module_depends(ko: &[u8]) -> Vec<String> {
    let key = b"\0depends=";
    let Some(at) = ko.windows(key.len()).position(|w| w == key) else {
        return Vec::new();
    };
    let rest = &ko[at + key.len()..];
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    String::from_utf8_lossy(&rest[..end])
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.replace('-', "_"))
        .collect()
}

/// Builds the default guest's initramfs at `out`: busybox, the modules,
/// the init script, and `command` (a shell command line, run in `/mnt`, the
/// guest's disk) if any.
///
/// # Errors
/// A missing busybox or module; write errors.
pub fn default_initramfs(
    kernel: &Kernel,
    command: Option<&str>,
    env: &[(&str, String)],
    out: &Path,
) -> Result<(), VmError> {
    let busybox = find_tool("busybox")
        .filter(|p| is_static(p))
        .ok_or(VmError::MissingTool {
            tool: "busybox",
            package: "busybox-static",
        })?;
    let mut fs = Initramfs::new();
    for d in ["dev", "proc", "sys", "tmp", "mnt", "root", "etc", "run"] {
        fs.put(d, Node::Dir);
    }
    fs.put("dev/console", Node::Char(5, 1));
    fs.put("init", Node::File(INIT.as_bytes().to_vec(), 0o755));
    fs.put_binary("bin/busybox", &busybox)?;
    fs.put_modules(&kernel.modules, GUEST_MODULES)?;
    if let Some(c) = command {
        fs.put("cairn/command", Node::File(c.as_bytes().to_vec(), 0o644));
    }
    let mut vars = String::new();
    for (k, v) in env {
        let _ = writeln!(vars, "export {k}='{}'", v.replace('\'', "'\\''"));
    }
    fs.put("cairn/env", Node::File(vars.into_bytes(), 0o644));
    fs.write(out)
}

fn is_static(p: &Path) -> bool {
    shared_libraries(p).is_ok_and(|l| l.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_archive_lists_parents_before_children_and_ends_with_the_trailer() {
        let dir = tempfile::tempdir().unwrap();
        let mut fs = Initramfs::new();
        fs.put("a/b/c", Node::File(b"xyz".to_vec(), 0o644));
        fs.put("dev/console", Node::Char(5, 1));
        let out = dir.path().join("i.cpio");
        fs.write(&out).unwrap();
        let bytes = std::fs::read(&out).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        let a = text.find("a\0").unwrap();
        let b = text.find("a/b\0").unwrap();
        let c = text.find("a/b/c\0").unwrap();
        assert!(a < b && b < c);
        assert!(text.contains("xyz"));
        assert!(text[c..].contains("TRAILER!!!"));
        assert_eq!(bytes.len() % 4, 0);
        assert!(bytes.starts_with(b"070701"));
    }

    #[test]
    fn module_dependencies_are_read_from_modinfo() {
        let ko = b"\x7fELF....\0license=GPL\0depends=virtio,virtio-ring\0name=virtio_blk\0";
        assert_eq!(module_depends(ko), ["virtio", "virtio_ring"]);
        assert!(module_depends(b"\0depends=\0").is_empty());
        assert!(module_depends(b"no modinfo").is_empty());
    }
}
