//! Resume reconciliation (DESIGN §4.4, §5.5): what happened while the
//! session was not executing — stopped, or waiting for a person's approval
//! — is found by comparing the workspace with the last snapshot, recorded
//! as a `reconcile` with a capture closing the window, and told to the
//! model and the person in their own words.

use super::*;

/// A non-executing window being closed by `resume:`: how it came about, in
/// the words the user and the model are told.
pub(super) enum Gap<'a> {
    /// The session stopped and is being resumed.
    Stopped,
    /// A person was deciding whether this call may run.
    Approval(&'a ToolCall),
}

impl Gap<'_> {
    /// When, for the model.
    fn model_when(&self) -> String {
        match self {
            Gap::Stopped => "while this session was stopped".into(),
            Gap::Approval(call) => format!(
                "while the user decided whether to run your {} call",
                call.name
            ),
        }
    }

    /// Outside what, for the model.
    fn outside(&self) -> &'static str {
        match self {
            Gap::Stopped => "it",
            Gap::Approval(_) => "this session",
        }
    }

    /// When, for the user.
    fn user_when(&self) -> String {
        match self {
            Gap::Stopped => "while the session was stopped".into(),
            Gap::Approval(call) => format!("while the {} call waited for approval", call.name),
        }
    }

    /// Since when, for the user.
    fn user_since(&self) -> String {
        match self {
            Gap::Stopped => "since it stopped".into(),
            Gap::Approval(call) => format!("while the {} call waited for approval", call.name),
        }
    }
}

impl Agent {
    /// `resume:turn:N` and the `reconcile` record: what changed while
    /// nothing of the run executed, on the record, and for the model.
    pub(super) async fn reconcile(&mut self, ev: &mut dyn Events) -> Result<(), AgentError> {
        // A turn whose `pre:` is the last boundary was cut short by a crash:
        // what changed since may be its work, so it is closed as the run's
        // (`fail:`) before `resume:` judges the rest.
        let crashed = self
            .session
            .state()
            .last_snapshot
            .as_ref()
            .and_then(|s| s.label.strip_prefix("pre:turn:"))
            .and_then(|n| n.parse::<u64>().ok());
        if let Some(n) = crashed {
            if self.boundaries.has_own_snapshots(&mut self.stop).await == Some(true) {
                self.boundary(Label::Fail, n, ev).await?;
            }
        }
        let n = self.session.state().next_turn();
        self.close_window(n, Gap::Stopped, ev).await
    }

    /// `resume:turn:N` closes a non-executing window: the capture is
    /// journaled, and so is a `reconcile` record of what changed in the
    /// window (which was not the run's doing); the model is told before its
    /// next turn.
    pub(super) async fn close_window(
        &mut self,
        n: u64,
        gap: Gap<'_>,
        ev: &mut dyn Events,
    ) -> Result<(), AgentError> {
        let Some(at) = boundaries::turn(n) else {
            return Ok(());
        };
        let label = Label::Resume(at);
        let base = self.inherited_base();
        let work = Work::Capture(label.clone(), base);
        let Some(taken) = self.boundaries.take(work, &mut self.stop).await else {
            return Ok(());
        };
        let Some(taken) = self.take(taken, ev)? else {
            return Ok(());
        };
        self.append(RecordBody::Snapshot(Snapshot {
            snapshot: taken.snapshot.to_string(),
            label: label.to_string(),
        }))?;
        let (changed, unknown) = match &taken.changed {
            Ok(list) => (list.clone(), None),
            Err(why) => (Vec::new(), Some(why.clone())),
        };
        // A window in which nothing changed needs no record: the capture
        // deduped onto the state before it, which the snapshot shows.
        if matches!(gap, Gap::Approval(_)) && changed.is_empty() && unknown.is_none() {
            return Ok(());
        }
        self.append(RecordBody::Reconcile(Reconcile {
            changed: changed.clone(),
            snapshot: Some(taken.snapshot.to_string()),
            unknown: unknown.clone(),
            machine: None,
        }))?;
        if let Some(why) = unknown {
            ev.notice(&format!(
                "what changed in the workspace {} is unknown ({why}); the model will be told",
                gap.user_when()
            ));
            self.tell(format!(
                "cairn: whether files in the workspace changed {} is unknown ({why}). Check the files you rely on before trusting what you saw earlier.",
                gap.model_when()
            ));
        } else if !changed.is_empty() {
            let shown: Vec<_> = changed.iter().take(50).map(String::as_str).collect();
            let more = changed.len().saturating_sub(shown.len());
            let msg = format!(
                "cairn: {}, {} file(s) in the workspace changed outside {}: {}{}. Take this into account before relying on what you saw earlier.",
                gap.model_when(),
                changed.len(),
                gap.outside(),
                shown.join(", "),
                if more > 0 { format!(" and {more} more") } else { String::new() }
            );
            ev.notice(&format!(
                "{} path(s) changed outside the session {}; the model will be told",
                changed.len(),
                gap.user_since()
            ));
            self.tell(msg);
        }
        Ok(())
    }

    /// Adds `msg` to what the model is told before its next turn.
    pub(super) fn tell(&mut self, msg: String) {
        self.note = Some(match self.note.take() {
            Some(earlier) => format!("{earlier}\n\n{msg}"),
            None => msg,
        });
    }

    /// For a fork that has no snapshot of its own yet: the last snapshot its
    /// lineage journaled, read from whichever ancestor holds it; `Ok(None)`
    /// when the lineage journaled none, `Err` when it did and no ancestor's
    /// copy reads (then what changed since is unknown, not "nothing").
    pub(super) fn inherited_base(&self) -> Result<Option<cairn_workspace::Manifest>, String> {
        let Some(last) = self.session.state().last_snapshot.as_ref() else {
            return Ok(None);
        };
        let sid = cairn_workspace::SnapshotId::parse(&last.snapshot)
            .map_err(|e| format!("the last journaled snapshot {}: {e}", last.snapshot))?;
        let mut why = format!("no session of this lineage holds snapshot {sid}");
        for run in std::iter::once(self.session.id().to_string())
            .chain(self.session.receipt().iter().map(|p| p.run.clone()))
        {
            let Ok(run) = cairn_store::RunId::parse(&run) else {
                continue;
            };
            match cairn_workspace::Manifest::read(self.session.store(), &run, &sid) {
                Ok(m) => return Ok(Some(m)),
                Err(cairn_workspace::WorkspaceError::NoSuchSnapshot { .. }) => {}
                Err(e) => why = e.to_string(),
            }
        }
        Err(why)
    }

    /// Journals what a boundary brings besides its snapshot: a `versioning`
    /// record when versioning stopped, notices for new coverage gaps.
    pub(super) fn take(
        &mut self,
        taken: Result<Option<Taken>, Stopped>,
        ev: &mut dyn Events,
    ) -> Result<Option<Taken>, AgentError> {
        match taken {
            Ok(Some(t)) => {
                for line in &t.news {
                    ev.notice(line);
                }
                Ok(Some(t))
            }
            Ok(None) => Ok(None),
            Err(stopped) => {
                ev.notice(&format!(
                    "workspace versioning stopped at {}: {}",
                    stopped.at, stopped.reason
                ));
                self.append(RecordBody::Versioning(Versioning {
                    state: VersioningState::Off,
                    at: Some(stopped.at),
                    reason: stopped.reason,
                }))?;
                Ok(None)
            }
        }
    }
}
