//! A synchronous QMP client: one connection to one qemu's monitor socket.
//!
//! Invariants: every command waits for its own `return` or `error` (events
//! in between are skipped); a reply is read with a timeout, so a qemu that
//! stops answering is an error, never a hang.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::VmError;

/// How long one reply may take.
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);

/// A connection to qemu's monitor, capabilities negotiated.
pub struct Qmp {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Qmp {
    /// Connects to the monitor socket at `path`.
    ///
    /// # Errors
    /// [`VmError::NotRunning`] when nothing listens there (the guest is
    /// gone); [`VmError::Qmp`] for a monitor that does not speak QMP.
    pub fn connect(path: &Path) -> Result<Qmp, VmError> {
        let s = UnixStream::connect(path).map_err(|e| VmError::NotRunning {
            why: format!("its monitor {} does not answer ({e})", path.display()),
        })?;
        let qmp_err = |e: std::io::Error| VmError::Qmp(e.to_string());
        s.set_read_timeout(Some(REPLY_TIMEOUT)).map_err(qmp_err)?;
        let writer = s.try_clone().map_err(qmp_err)?;
        let mut q = Qmp {
            reader: BufReader::new(s),
            writer,
        };
        let greeting = q.read()?;
        if greeting.get("QMP").is_none() {
            return Err(VmError::Qmp(format!("unexpected greeting {greeting}")));
        }
        q.execute("qmp_capabilities", json!({}))?;
        Ok(q)
    }

    fn read(&mut self) -> Result<Value, VmError> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => Err(VmError::Qmp("qemu closed its monitor".into())),
            Ok(_) => serde_json::from_str(&line)
                .map_err(|e| VmError::Qmp(format!("a reply that is not JSON ({e}): {line:?}"))),
            Err(e) => Err(VmError::Qmp(format!("reading a reply: {e}"))),
        }
    }

    /// Runs `command` with `arguments`; its `return` value.
    ///
    /// # Errors
    /// [`VmError::Qmp`] with qemu's own error message.
    pub fn execute(&mut self, command: &str, arguments: Value) -> Result<Value, VmError> {
        let msg = if arguments.as_object().is_some_and(|o| o.is_empty()) {
            json!({ "execute": command })
        } else {
            json!({ "execute": command, "arguments": arguments })
        };
        writeln!(self.writer, "{msg}")
            .and_then(|()| self.writer.flush())
            .map_err(|e| VmError::Qmp(format!("sending {command}: {e}")))?;
        loop {
            let reply = self.read()?;
            if let Some(r) = reply.get("return") {
                return Ok(r.clone());
            }
            if let Some(e) = reply.get("error") {
                let desc = e
                    .get("desc")
                    .and_then(Value::as_str)
                    .unwrap_or("no reason given");
                return Err(VmError::Qmp(format!("{command}: {desc}")));
            }
            // An event: not the answer.
        }
    }

    /// The guest's run state (`running`, `paused`, `inmigrate`, `postmigrate`…).
    ///
    /// # Errors
    /// As [`Qmp::execute`].
    pub fn status(&mut self) -> Result<String, VmError> {
        let s = self.execute("query-status", json!({}))?;
        Ok(s.get("status")
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_string())
    }

    /// The state of the last migration (`none` when there was none).
    ///
    /// # Errors
    /// As [`Qmp::execute`].
    pub fn migration(&mut self) -> Result<Value, VmError> {
        self.execute("query-migrate", json!({}))
    }
}
