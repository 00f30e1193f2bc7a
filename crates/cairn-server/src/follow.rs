//! Following a journal that another process (a CLI run) is writing: the
//! journal's own follower (`cairn_journal::JournalFollower`), which applies
//! exactly the rules `cairn verify` applies, through the one incremental
//! reader. The server keeps no verifier of its own.

pub use cairn_journal::JournalError as FollowError;
pub use cairn_journal::JournalFollower as Follower;
