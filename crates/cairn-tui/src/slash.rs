//! The slash commands of the composer (DESIGN §11), parsed: a pure function
//! from the line typed to what it asks for, table-tested, so the screen's
//! state machine ([`crate::app`]) only decides what each one does now.

/// A slash command, as typed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Slash {
    /// `/help`, `/?`.
    Help,
    /// `/quit`, `/exit`, `/q`.
    Quit,
    /// `/cost`.
    Cost,
    /// `/pause`.
    Pause,
    /// `/rewind`.
    Rewind,
    /// `/undo`.
    Undo,
    /// `/fork`.
    Fork,
    /// `/tree`.
    Tree,
    /// `/diff [N]`: user turn N's changes, or the last turn's.
    Diff(Option<usize>),
    /// `/checkpoint [save]`.
    CheckpointSave,
    /// `/checkpoint list|ls`.
    CheckpointList,
    /// `/checkpoint restore CP`.
    CheckpointRestore(String),
    /// `/sessions`, and `/resume` without an argument.
    Sessions,
    /// `/resume ID`: an id, a unique prefix, a name or `@last`.
    Resume(String),
}

impl Slash {
    /// True for the commands that cannot race a stretch of work, which may
    /// run while the session works.
    pub fn runs_while_working(&self) -> bool {
        matches!(self, Slash::Help | Slash::Quit | Slash::Cost | Slash::Pause)
    }

    /// What the screen says while the worker carries it out, for the
    /// commands the worker carries out.
    pub fn busy_with(&self) -> Option<&'static str> {
        Some(match self {
            Slash::Rewind => "reading the turns",
            Slash::Undo => "undoing the last rewind",
            Slash::Fork => "forking",
            Slash::Tree => "reading the lineage",
            Slash::Diff(_) => "comparing snapshots",
            Slash::CheckpointSave => "saving a checkpoint",
            Slash::CheckpointList => "listing checkpoints",
            Slash::CheckpointRestore(_) => "restoring a checkpoint",
            Slash::Sessions => "listing sessions",
            _ => return None,
        })
    }
}

/// Parses `line` (which starts with `/`); the error says what is wrong
/// with it, for the transcript.
///
/// # Errors
/// An unknown command, or arguments the command does not take.
pub fn parse(line: &str) -> Result<Slash, String> {
    let mut words = line.split_whitespace();
    let name = words.next().unwrap_or("");
    let args: Vec<&str> = words.collect();
    Ok(match (name, args.as_slice()) {
        ("/help" | "/?", _) => Slash::Help,
        ("/quit" | "/exit" | "/q", _) => Slash::Quit,
        ("/cost", _) => Slash::Cost,
        ("/pause", _) => Slash::Pause,
        ("/rewind", _) => Slash::Rewind,
        ("/undo", _) => Slash::Undo,
        ("/fork", _) => Slash::Fork,
        ("/tree", _) => Slash::Tree,
        ("/diff", []) => Slash::Diff(None),
        ("/diff", [n]) => Slash::Diff(Some(n.parse::<usize>().map_err(|_| {
            format!("/diff {n}: give the number of a user turn (as /rewind lists them)")
        })?)),
        ("/checkpoint", [] | ["save"]) => Slash::CheckpointSave,
        ("/checkpoint", ["list" | "ls"]) => Slash::CheckpointList,
        ("/checkpoint", ["restore", id]) => Slash::CheckpointRestore((*id).to_owned()),
        ("/sessions", _) | ("/resume", []) => Slash::Sessions,
        ("/resume", [id]) => Slash::Resume((*id).to_owned()),
        _ => {
            return Err(format!(
                "{}: not a command here; /help lists them",
                crate::text::one_line(line, 60)
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_and_its_spellings() {
        let table: &[(&str, Slash)] = &[
            ("/help", Slash::Help),
            ("/?", Slash::Help),
            ("/quit", Slash::Quit),
            ("/exit", Slash::Quit),
            ("/q", Slash::Quit),
            ("/cost", Slash::Cost),
            ("/pause", Slash::Pause),
            ("/rewind", Slash::Rewind),
            ("/undo", Slash::Undo),
            ("/fork", Slash::Fork),
            ("/tree", Slash::Tree),
            ("/diff", Slash::Diff(None)),
            ("/diff 3", Slash::Diff(Some(3))),
            ("  /diff   2  ", Slash::Diff(Some(2))),
            ("/checkpoint", Slash::CheckpointSave),
            ("/checkpoint save", Slash::CheckpointSave),
            ("/checkpoint list", Slash::CheckpointList),
            ("/checkpoint ls", Slash::CheckpointList),
            (
                "/checkpoint restore cp_01",
                Slash::CheckpointRestore("cp_01".into()),
            ),
            ("/sessions", Slash::Sessions),
            ("/resume", Slash::Sessions),
            ("/resume @last", Slash::Resume("@last".into())),
        ];
        for (line, want) in table {
            assert_eq!(parse(line).as_ref(), Ok(want), "{line:?}");
        }
    }

    #[test]
    fn what_is_not_a_command_is_said() {
        for (line, says) in [
            ("/diff x", "give the number of a user turn"),
            ("/diff 1 2", "not a command here"),
            ("/checkpoint restore", "not a command here"),
            ("/checkpoint frobnicate", "not a command here"),
            ("/resume a b", "not a command here"),
            ("/nope", "not a command here"),
            ("/\u{1b}[31mred", "not a command here"),
        ] {
            let e = parse(line).unwrap_err();
            assert!(e.contains(says), "{line:?}: {e}");
            assert!(
                !e.contains('\u{1b}'),
                "{line:?}: an escape reached the screen"
            );
        }
    }

    #[test]
    fn only_commands_that_cannot_race_the_work_run_during_it() {
        for s in [Slash::Help, Slash::Quit, Slash::Cost, Slash::Pause] {
            assert!(s.runs_while_working(), "{s:?}");
            assert_eq!(s.busy_with(), None, "{s:?}");
        }
        for s in [
            Slash::Rewind,
            Slash::Undo,
            Slash::Fork,
            Slash::Tree,
            Slash::Diff(None),
            Slash::CheckpointSave,
            Slash::CheckpointList,
            Slash::CheckpointRestore("x".into()),
            Slash::Sessions,
        ] {
            assert!(!s.runs_while_working(), "{s:?}");
            assert!(s.busy_with().is_some(), "{s:?}");
        }
        assert!(!Slash::Resume("x".into()).runs_while_working());
    }
}
