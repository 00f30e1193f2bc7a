//! The worker's rewinds (DESIGN §11): the points, a preview, the rewind to
//! a point through [`cairn_sessions::rewind_to_point`], `/undo` (the last
//! bank put back), and `/diff` of a turn.

use std::path::Path;

use super::*;

impl Worker {
    /// The user turns of this session's own journal, each with the files
    /// its model turns changed.
    pub(super) fn rewind_points(&self) -> Result<Vec<RewindPoint>, BoxError> {
        let Some((id, root)) = self.current() else {
            return Err("there is no session yet: send a message to start one".into());
        };
        let tracker = self.sessions.launcher.tracker(&id, Path::new(&root))?;
        Ok(cairn_sessions::rewind_points(
            self.sessions.launcher.store(),
            &id,
            &tracker,
        )?)
    }

    fn point(&self, i: usize) -> Result<(RewindPoint, NodeRef), BoxError> {
        let p = self
            .points
            .get(i)
            .cloned()
            .ok_or("that turn is no longer listed; open /rewind again")?;
        let node = p
            .node()
            .ok_or("no model turn ran after that message, so there are no files to put back")?;
        Ok((p, node))
    }

    pub(super) fn preview(&mut self, i: usize, action: RewindAction) {
        let mut run = || -> Result<Preview, BoxError> {
            let (_, node) = self.point(i)?;
            let (id, root) = self.current().ok_or("no session")?;
            let tracker = self.sessions.launcher.tracker(&id, Path::new(&root))?;
            let agent = self.agent.as_mut().ok_or("no session")?;
            let p = cairn_sessions::preview(
                agent.session_mut(),
                &tracker,
                &node,
                RestoreScope::Run,
                &cairn_workspace::NoProgress,
            )?;
            Ok(Preview {
                target: p
                    .target_label
                    .map(|l| l.to_string())
                    .unwrap_or_else(|| p.target.to_string()),
                changes: p.changes,
                left_alone: p.left_alone,
                bank: p.bank.snapshot.to_string(),
            })
        };
        match run() {
            Ok(preview) => self.send(Ev::Preview {
                point: i,
                action,
                preview,
            }),
            Err(e) => self.fail("rewind", e.as_ref()),
        }
    }

    pub(super) fn rewind(&mut self, i: usize, action: RewindAction) {
        let Some((id, root)) = self.current() else {
            return self.no_session();
        };
        let Some(point) = self.points.get(i).cloned() else {
            let e: BoxError = "that turn is no longer listed; open /rewind again".into();
            return self.fail("rewind", e.as_ref());
        };
        let done = (|| -> Result<cairn_sessions::PointRewound, BoxError> {
            let tracker = self.sessions.launcher.tracker(&id, Path::new(&root))?;
            let agent = self.agent.as_mut().ok_or("no session")?;
            Ok(cairn_sessions::rewind_to_point(
                agent.session_mut(),
                &tracker,
                &point,
                action,
                &cairn_workspace::NoProgress,
            )?)
        })();
        let done = match done {
            Ok(d) => d,
            Err(e) => return self.fail("rewind", e.as_ref()),
        };
        let info = done.report.map(|r| {
            self.last_bank = Some((id.clone(), r.bank.snapshot.clone()));
            let mut lines = vec![format!(
                "{} written, {} deleted, {} mode change(s)",
                r.written.len(),
                r.deleted.len(),
                r.modes.len()
            )];
            for l in &r.left_alone {
                lines.push(format!("left alone: {} ({})", l.path, l.reason));
            }
            for l in &r.failed {
                lines.push(format!("NOT RESTORED: {} ({})", l.path, l.reason));
            }
            lines.push(format!(
                "the state before is banked as {} ({}); /undo puts it back",
                r.bank.label, r.bank.snapshot
            ));
            Ev::Info {
                title: format!("files put back to before {}", point.name()),
                lines,
            }
        });
        if info.is_some() {
            self.count_snapshots();
        }
        // The fork's screen replaces the transcript: what the restore did
        // is shown on it.
        match done.fork {
            None => {}
            Some(Ok(child)) => self.open_fork(&id, &child, &point),
            Some(Err(e)) => self.fail("fork", &e),
        }
        if let Some(info) = info {
            self.send(info);
        }
    }

    /// Switches to `child`, the fork of `id` just before `point`'s message,
    /// the message put back in the composer.
    fn open_fork(&mut self, id: &RunId, child: &RunId, point: &RewindPoint) {
        self.agent = None;
        if self.switch(child, Some(point.text.clone())).is_err() {
            let _ = self.switch(id, None);
            return;
        }
        self.send(Ev::Notice(format!(
            "the conversation goes back to before {}: this is fork {child} of {id} (the parent keeps every turn: cairn resume {id})",
            point.name()
        )));
    }

    pub(super) fn undo(&mut self) {
        let Some((id, root)) = self.current() else {
            return self.no_session();
        };
        let store = self.sessions.launcher.store().clone();
        let bank = match self.last_bank.clone() {
            Some(b) => Some(b),
            None => match cairn_sessions::last_bank(&store, &id) {
                Ok(b) => b.map(|b| (id.clone(), b)),
                Err(e) => return self.fail("undo", &e),
            },
        };
        let Some((run, bank)) = bank else {
            return self.send(Ev::Failed(
                "nothing to undo: no rewind of this session banked a state".into(),
            ));
        };
        let result = (|| -> Result<cairn_workspace::RestoreReport, BoxError> {
            let root = if run == id {
                root.clone()
            } else {
                cairn_sessions::load(&store, &run)?.state.workspace
            };
            let tracker = self.sessions.launcher.tracker(&run, Path::new(&root))?;
            let target = cairn_sessions::RewindTarget::Snapshot(&bank);
            if run == id {
                let agent = self.agent.as_mut().ok_or("no session")?;
                Ok(cairn_sessions::rewind(
                    agent.session_mut(),
                    &tracker,
                    target,
                    &cairn_workspace::NoProgress,
                )?)
            } else {
                let mut other = cairn_sessions::Session::open(&store, &run)?;
                Ok(cairn_sessions::rewind(
                    &mut other,
                    &tracker,
                    target,
                    &cairn_workspace::NoProgress,
                )?)
            }
        })();
        match result {
            Ok(r) => {
                self.last_bank = Some((run, r.bank.snapshot.clone()));
                self.send(Ev::Info {
                    title: format!("undone: the files are as they were in bank {bank}"),
                    lines: vec![
                        format!(
                            "{} written, {} deleted, {} mode change(s)",
                            r.written.len(),
                            r.deleted.len(),
                            r.modes.len()
                        ),
                        format!(
                            "the state before the undo is banked as {}; /undo again reverses this",
                            r.bank.label
                        ),
                    ],
                });
            }
            Err(e) => self.fail("undo", e.as_ref()),
        }
        self.count_snapshots();
    }

    pub(super) fn diff(&self, n: Option<usize>) {
        let run = || -> Result<(String, Vec<String>), BoxError> {
            let points = self.rewind_points()?;
            let (id, root) = self.current().ok_or("no session")?;
            let tracker = self.sessions.launcher.tracker(&id, Path::new(&root))?;
            let point = match n {
                Some(n) => points.iter().find(|p| p.number == n).ok_or_else(|| {
                    format!(
                        "there is no user turn {n} (this session has {})",
                        points.len()
                    )
                })?,
                None => points
                    .iter()
                    .rev()
                    .find(|p| p.turn.is_some())
                    .ok_or("no turn of this session has run yet")?,
            };
            let turn = point.turn.ok_or("no model turn ran after that message")?;
            let from = tracker
                .resolve(&cairn_workspace::Label::parse(&format!("pre:turn:{turn}"))?)?
                .ok_or("its pre: snapshot is not in the index")?;
            let to = tracker.head()?.ok_or("the workspace has no snapshot")?;
            let changes = tracker.run_diff_stat(&from, &to)?;
            let mut lines: Vec<String> = changes.iter().map(stat_line).collect();
            if lines.is_empty() {
                lines.push("no file changed".into());
            }
            Ok((
                format!(
                    "what the session changed since {} began (your message {})",
                    point.name(),
                    point.number
                ),
                lines,
            ))
        };
        match run() {
            Ok((title, lines)) => self.send(Ev::Info { title, lines }),
            Err(e) => self.fail("diff", e.as_ref()),
        }
    }
}
