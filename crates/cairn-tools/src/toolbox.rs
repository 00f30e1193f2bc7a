//! The set of tools the agent loop offers, by name.

use std::panic::AssertUnwindSafe;

use futures_util::FutureExt;

use crate::error::ToolError;
use crate::tool::{Tool, ToolConfig, ToolInfo, ToolOutput};
use crate::tools::{EditFile, ListDir, ReadFile, Search, Shell, WriteFile};
use crate::workspace::Workspace;

/// Tools by name, in a fixed order (the order of [`Toolbox::infos`], which feeds the
/// tool-set fingerprint of DESIGN §4.3).
pub struct Toolbox {
    tools: Vec<Box<dyn Tool>>,
}

impl std::fmt::Debug for Toolbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.tools.iter().map(|tool| tool.info().name))
            .finish()
    }
}

impl Toolbox {
    /// The built-in tools of DESIGN §4.2, in this order: read_file, write_file,
    /// edit_file, list_dir, search, shell.
    pub fn builtin(config: ToolConfig) -> Self {
        Self::empty()
            .with_tool(ReadFile::new(&config))
            .with_tool(WriteFile)
            .with_tool(EditFile)
            .with_tool(ListDir::new(&config))
            .with_tool(Search::new(&config))
            .with_tool(Shell::new(&config))
    }

    /// A toolbox with no tools.
    pub fn empty() -> Self {
        Self { tools: Vec::new() }
    }

    /// Adds `tool`, replacing a tool of the same name in place, or appending it.
    #[must_use]
    pub fn with_tool(self, tool: impl Tool + 'static) -> Self {
        self.with_boxed(Box::new(tool))
    }

    /// Adds a boxed tool, as [`Toolbox::with_tool`] does.
    #[must_use]
    pub fn with_boxed(mut self, boxed: Box<dyn Tool>) -> Self {
        let name = boxed.info().name;
        match self.tools.iter().position(|t| t.info().name == name) {
            Some(i) => self.tools[i] = boxed,
            None => self.tools.push(boxed),
        }
        self
    }

    /// The description of every tool, in order.
    pub fn infos(&self) -> Vec<ToolInfo> {
        self.tools.iter().map(|tool| tool.info()).collect()
    }

    /// The names of every tool, in order.
    pub fn names(&self) -> Vec<String> {
        self.tools
            .iter()
            .map(|tool| tool.info().name.into_owned())
            .collect()
    }

    /// The description of the tool called `name`, if any.
    pub fn info(&self, name: &str) -> Option<ToolInfo> {
        self.get(name).map(|tool| tool.info())
    }

    /// The tool called `name`, if any.
    pub fn get(&self, name: &str) -> Option<&dyn Tool> {
        self.tools
            .iter()
            .find(|tool| tool.info().name == name)
            .map(|tool| tool.as_ref())
    }

    /// Whether the tool called `name` declares itself idempotent; false for an
    /// unknown tool, so an unknown in-flight call is never re-run.
    pub fn is_idempotent(&self, name: &str) -> bool {
        self.get(name).is_some_and(|tool| tool.info().idempotent)
    }

    /// Whether the tool called `name` changes nothing; false for an unknown
    /// tool.
    pub fn is_read_only(&self, name: &str) -> bool {
        self.get(name).is_some_and(|tool| tool.info().read_only)
    }

    /// Calls the tool `name` with `arguments`. An unknown name, or a tool that
    /// panics, gives an [`Outcome::Error`](crate::Outcome::Error) saying so.
    pub async fn call(
        &self,
        ws: &Workspace,
        name: &str,
        arguments: &serde_json::Value,
    ) -> ToolOutput {
        let Some(tool) = self.get(name) else {
            return ToolError::UnknownTool {
                name: name.into(),
                available: self.names().join(", "),
            }
            .into();
        };
        match AssertUnwindSafe(tool.call(ws, arguments))
            .catch_unwind()
            .await
        {
            Ok(output) => output,
            Err(_) => ToolError::Crashed {
                tool: name.into(),
                reason: "it panicked".into(),
            }
            .into(),
        }
    }
}
