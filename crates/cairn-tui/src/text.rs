//! Text that reaches a terminal, and how it is laid out: the rule and the
//! layout are `cairn_store::text`, one implementation for every front end.

pub use cairn_store::text::{display_width, one_line, visible, wrap};
