//! Snapshot labels (DESIGN §5.3): the one place their text form is parsed and
//! printed.
//!
//! | label                 | written when                                  | interval ending here |
//! |-----------------------|-----------------------------------------------|----------------------|
//! | `pre:<node>:<iter>`   | a node starts (an alias of the previous capture) | the run's          |
//! | `post:<node>:<iter>`  | the node completed that iteration             | the run's            |
//! | `fail:<node>:<iter>`  | it did not (failure, interruption, cancel); OPENS a window | the run's |
//! | `pause:<node>:<iter>` | it waits on a human; OPENS a window           | the run's            |
//! | `resume:<node>:<iter>`| on every way back in; CLOSES the window       | not the run's        |
//! | `gate:<n>`            | the run reaches gate n                        | the run's            |
//! | `bank:<n>`            | a restore saves the current state first      | not the run's        |
//! | `snap:<n>`, `NAME`    | an operator's `cairn snapshot`                | not the run's        |
//!
//! Node names are 1–64 characters of `[0-9A-Za-z_.-]` (no `:`), iterations
//! count from 1, and numbers are written without leading zeros, so every
//! label has exactly one spelling.

use std::fmt;
use std::str::FromStr;

/// A label that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{shown}` is not a valid {what}: {reason}. Labels look like pre:NODE:ITER, post:NODE:ITER, fail:…, pause:…, resume:…, gate:N, bank:N, snap:N, or a plain name of letters, digits, `_`, `.` and `-`")]
pub struct LabelError {
    shown: String,
    what: &'static str,
    reason: &'static str,
}

fn err(s: &str, what: &'static str, reason: &'static str) -> LabelError {
    LabelError {
        shown: s.chars().take(80).collect(),
        what,
        reason,
    }
}

const NAME_MAX: usize = 64;
const KIND_WORDS: [&str; 8] = [
    "pre", "post", "fail", "pause", "resume", "gate", "bank", "snap",
];

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= NAME_MAX
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
        && s != "."
        && s != ".."
}

fn parse_number(s: &str, min: u32) -> Option<u32> {
    let canonical =
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    s.parse::<u32>().ok().filter(|n| canonical && *n >= min)
}

/// The name of a node: `exec`, `turn`, or whatever `cairn exec --node` gave.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeName(String);

impl NodeName {
    /// Validates a node name: 1–64 characters of `[0-9A-Za-z_.-]`.
    ///
    /// # Errors
    /// [`LabelError`] for anything else (a `:` included).
    pub fn parse(s: &str) -> Result<Self, LabelError> {
        if is_name(s) {
            Ok(NodeName(s.to_owned()))
        } else {
            Err(err(
                s,
                "node name",
                "node names are 1-64 characters of letters, digits, `_`, `.` and `-`",
            ))
        }
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for NodeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for NodeName {
    type Err = LabelError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        NodeName::parse(s)
    }
}

/// One iteration of one node: iterations count from 1 per node name within
/// a run.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeIter {
    /// The node.
    pub node: NodeName,
    /// Its iteration, from 1.
    pub iter: u32,
}

impl NodeIter {
    /// `node`, iteration `iter`.
    pub fn new(node: NodeName, iter: u32) -> Self {
        NodeIter { node, iter }
    }
}

impl fmt::Display for NodeIter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.node, self.iter)
    }
}

/// `NODE[:ITER]`, as `cairn rewind --to` takes it. Without an iteration it
/// means the node's latest iteration.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NodeRef {
    /// The node.
    pub node: NodeName,
    /// The iteration, or `None` for the latest.
    pub iter: Option<u32>,
}

impl NodeRef {
    /// Parses `NODE` or `NODE:ITER` (`turn:3`, `exec`, `exec:2`).
    ///
    /// # Errors
    /// [`LabelError`] when the node name or the iteration is invalid.
    pub fn parse(s: &str) -> Result<Self, LabelError> {
        match s.split_once(':') {
            None => Ok(NodeRef {
                node: NodeName::parse(s)?,
                iter: None,
            }),
            Some((node, iter)) => {
                let iter = parse_number(iter, 1).ok_or_else(|| {
                    err(s, "node reference", "the iteration must be a number from 1")
                })?;
                Ok(NodeRef {
                    node: NodeName::parse(node)?,
                    iter: Some(iter),
                })
            }
        }
    }
}

impl fmt::Display for NodeRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.iter {
            Some(i) => write!(f, "{}:{i}", self.node),
            None => write!(f, "{}", self.node),
        }
    }
}

impl FromStr for NodeRef {
    type Err = LabelError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        NodeRef::parse(s)
    }
}

/// The kind of a [`Label`], without its arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum LabelKind {
    /// `pre:`
    Pre,
    /// `post:`
    Post,
    /// `fail:`
    Fail,
    /// `pause:`
    Pause,
    /// `resume:`
    Resume,
    /// `gate:`
    Gate,
    /// `bank:`
    Bank,
    /// `snap:`
    Snap,
    /// A plain name.
    Named,
}

/// The name of a workspace boundary (see the module table).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Label {
    /// `pre:<node>:<iter>`: the state a node started from.
    Pre(NodeIter),
    /// `post:<node>:<iter>`: the node completed that iteration.
    Post(NodeIter),
    /// `fail:<node>:<iter>`: the node did not complete; opens a window.
    Fail(NodeIter),
    /// `pause:<node>:<iter>`: the node waits on a human; opens a window.
    Pause(NodeIter),
    /// `resume:<node>:<iter>`: a way back in; closes the window.
    Resume(NodeIter),
    /// `gate:<n>`.
    Gate(u32),
    /// `bank:<n>`: the state saved before restore n.
    Bank(u32),
    /// `snap:<n>`: an operator's capture without a name.
    Snap(u32),
    /// An operator's capture with a name.
    Named(String),
}

impl Label {
    /// Parses a label's text form.
    ///
    /// # Errors
    /// [`LabelError`] naming what is wrong.
    pub fn parse(s: &str) -> Result<Label, LabelError> {
        let Some((kind, rest)) = s.split_once(':') else {
            if KIND_WORDS.contains(&s) {
                return Err(err(
                    s,
                    "label",
                    "a label kind needs its arguments, e.g. pre:exec:1",
                ));
            }
            return if is_name(s) {
                Ok(Label::Named(s.to_owned()))
            } else {
                Err(err(
                    s,
                    "label",
                    "a plain name is 1-64 letters, digits, `_`, `.` or `-`",
                ))
            };
        };
        let node_iter = |rest: &str| -> Result<NodeIter, LabelError> {
            let (node, iter) = rest
                .rsplit_once(':')
                .ok_or_else(|| err(s, "label", "expected <kind>:<node>:<iteration>"))?;
            let iter = parse_number(iter, 1).ok_or_else(|| {
                err(
                    s,
                    "label",
                    "the iteration must be a number from 1, without leading zeros",
                )
            })?;
            Ok(NodeIter::new(NodeName::parse(node)?, iter))
        };
        let number = |rest: &str, min: u32| {
            parse_number(rest, min)
                .ok_or_else(|| err(s, "label", "expected a number without leading zeros"))
        };
        match kind {
            "pre" => node_iter(rest).map(Label::Pre),
            "post" => node_iter(rest).map(Label::Post),
            "fail" => node_iter(rest).map(Label::Fail),
            "pause" => node_iter(rest).map(Label::Pause),
            "resume" => node_iter(rest).map(Label::Resume),
            "gate" => number(rest, 0).map(Label::Gate),
            "bank" => number(rest, 1).map(Label::Bank),
            "snap" => number(rest, 1).map(Label::Snap),
            _ => Err(err(s, "label", "unknown label kind")),
        }
    }

    /// The kind, without arguments.
    pub fn kind(&self) -> LabelKind {
        match self {
            Label::Pre(_) => LabelKind::Pre,
            Label::Post(_) => LabelKind::Post,
            Label::Fail(_) => LabelKind::Fail,
            Label::Pause(_) => LabelKind::Pause,
            Label::Resume(_) => LabelKind::Resume,
            Label::Gate(_) => LabelKind::Gate,
            Label::Bank(_) => LabelKind::Bank,
            Label::Snap(_) => LabelKind::Snap,
            Label::Named(_) => LabelKind::Named,
        }
    }

    /// The node and iteration of a node boundary.
    pub fn node_iter(&self) -> Option<&NodeIter> {
        match self {
            Label::Pre(n)
            | Label::Post(n)
            | Label::Fail(n)
            | Label::Pause(n)
            | Label::Resume(n) => Some(n),
            _ => None,
        }
    }

    /// True for `pause:` and `fail:`, which open a window in which nothing of
    /// the run executes.
    pub fn opens_window(&self) -> bool {
        matches!(self, Label::Pause(_) | Label::Fail(_))
    }

    /// True when the changes between a snapshot's parent and the snapshot,
    /// captured under this label as its own, were made by the run.
    ///
    /// A capture under `resume:` closes a non-executing window, so what it
    /// records since its parent came from outside the run; so does a `bank:`
    /// (taken by a restore, with the run stopped) and an operator's
    /// `snap:`/named capture. Every other boundary ends a stretch in which
    /// the run was executing.
    pub fn by_run(&self) -> bool {
        !matches!(
            self,
            Label::Resume(_) | Label::Bank(_) | Label::Snap(_) | Label::Named(_)
        )
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Label::Pre(n) => write!(f, "pre:{n}"),
            Label::Post(n) => write!(f, "post:{n}"),
            Label::Fail(n) => write!(f, "fail:{n}"),
            Label::Pause(n) => write!(f, "pause:{n}"),
            Label::Resume(n) => write!(f, "resume:{n}"),
            Label::Gate(n) => write!(f, "gate:{n}"),
            Label::Bank(n) => write!(f, "bank:{n}"),
            Label::Snap(n) => write!(f, "snap:{n}"),
            Label::Named(s) => f.write_str(s),
        }
    }
}

impl FromStr for Label {
    type Err = LabelError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Label::parse(s)
    }
}

impl serde::Serialize for Label {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Label {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Label::parse(&s).map_err(serde::de::Error::custom)
    }
}
