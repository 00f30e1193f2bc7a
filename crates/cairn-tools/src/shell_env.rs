//! Which of cairn's environment variables the shell tool passes to its command.
//!
//! The rule is one pure function of a variable's name and value ([`ShellEnv::keeps`]),
//! so a table test pins it down; the shell starts from an empty environment and adds
//! only what the rule keeps.

use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};

/// Words that mark a variable as a secret wherever they occur in its name, in any
/// letter case. `AUTH` is checked apart, so that `AUTHOR` is not taken for it.
const SECRET_WORDS: [&str; 9] = [
    "KEY",
    "SECRET",
    "TOKEN",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "COOKIE",
    "WEBHOOK",
];

/// Name endings that mark a secret (`GITLAB_PAT`, `SMTP_PASS`, `MYSQL_PWD`,
/// `SENTRY_DSN`), in any letter case.
const SECRET_SUFFIXES: [&str; 4] = ["_PAT", "_PASS", "_PWD", "_DSN"];

/// The model providers' own variables and cairn's: the shell has no use for them.
const OWN_PREFIXES: [&str; 4] = ["OPENAI_", "ANTHROPIC_", "OPENROUTER_", "CAIRN_"];

/// The environment policy of the shell tool: by default it scrubs, passing the command
/// cairn's environment without the variables that look like secrets.
///
/// A variable is dropped when, in this order:
///
/// 1. its name is passed through by [`ShellEnv::pass_through`]: then it is **kept**,
///    whatever the rules below say (exact, case-sensitive names);
/// 2. its name contains, in any letter case, `KEY`, `SECRET`, `TOKEN`, `PASSWORD`,
///    `PASSWD`, `PASSPHRASE`, `CREDENTIAL`, `COOKIE`, `WEBHOOK`, or `AUTH` other than in
///    `AUTHOR` (`GIT_AUTHOR_NAME` is kept, `HTTP_AUTHORIZATION` and `SSH_AUTH_SOCK` are
///    dropped). This covers `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
///    `AWS_SESSION_TOKEN`, `GH_TOKEN`, `GITHUB_TOKEN`, `NPM_TOKEN`, `PGPASSWORD`,
///    `GOOGLE_APPLICATION_CREDENTIALS`;
/// 3. its name is `PAT`, or ends in `_PAT`, `_PASS`, `_PWD` or `_DSN` (`PWD` and
///    `OLDPWD` are kept);
/// 4. its name starts with `OPENAI_`, `ANTHROPIC_`, `OPENROUTER_` or `CAIRN_` (the
///    providers' variables and cairn's own);
/// 5. its value holds a URL with a user name or password (`scheme://user:pw@host`), as
///    `DATABASE_URL` or `https_proxy` often do.
///
/// Everything else (`PATH`, `HOME`, `LANG`, `TERM`, `AWS_REGION`, …) is kept.
///
/// What the scrub does not do: the command runs with the user's rights, so it can still
/// read secrets from files (`~/.aws/credentials`, `~/.netrc`, `~/.config/gh`, a `.env`
/// in the workspace) or ask a running agent (an `ssh-agent` socket found some other
/// way). It only keeps cairn from handing the command, and so the model and the
/// journal, the secrets in its own environment. Dropping `SSH_AUTH_SOCK` means git over
/// SSH cannot use the agent unless it is passed through.
///
/// ```
/// use cairn_tools::ShellEnv;
/// use std::ffi::OsStr;
///
/// let env = ShellEnv::default();
/// assert!(env.keeps(OsStr::new("PATH"), OsStr::new("/usr/bin")));
/// assert!(!env.keeps(OsStr::new("OPENAI_API_KEY"), OsStr::new("sk-…")));
/// // The binary fills this from `CAIRN_SHELL_PASS_ENV=NAME,NAME`.
/// let env = ShellEnv::default().pass_through_list("GH_TOKEN, SSH_AUTH_SOCK");
/// assert!(env.keeps(OsStr::new("GH_TOKEN"), OsStr::new("ghp_…")));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShellEnv {
    pass: BTreeSet<String>,
}

impl ShellEnv {
    /// The environment variable through which the cairn binary lets the user pass
    /// names through, as a comma-separated list for [`ShellEnv::pass_through_list`].
    /// The library never reads it itself.
    pub const PASS_THROUGH_VAR: &'static str = "CAIRN_SHELL_PASS_ENV";

    /// Passes the variables `names` (exact, case-sensitive) to the shell even when the
    /// scrub would drop them. Default: none.
    #[must_use]
    pub fn pass_through<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.pass.extend(names.into_iter().map(Into::into));
        self
    }

    /// [`ShellEnv::pass_through`] for a comma-separated list of names, as
    /// [`ShellEnv::PASS_THROUGH_VAR`] holds it: spaces around a name are ignored, and
    /// so are empty entries.
    #[must_use]
    pub fn pass_through_list(self, list: &str) -> Self {
        self.pass_through(list.split(',').map(str::trim).filter(|n| !n.is_empty()))
    }

    /// The names passed through, sorted.
    pub fn passed_through(&self) -> impl Iterator<Item = &str> {
        self.pass.iter().map(String::as_str)
    }

    /// Whether the variable `name=value` goes to the shell (the rules of the type).
    pub fn keeps(&self, name: &OsStr, value: &OsStr) -> bool {
        if name.to_str().is_some_and(|n| self.pass.contains(n)) {
            return true;
        }
        !looks_secret(&name.to_string_lossy(), &value.to_string_lossy())
    }

    /// The variables of `vars` that go to the shell, in their order.
    pub fn filter<I>(&self, vars: I) -> Vec<(OsString, OsString)>
    where
        I: IntoIterator<Item = (OsString, OsString)>,
    {
        vars.into_iter()
            .filter(|(name, value)| self.keeps(name, value))
            .collect()
    }
}

/// Rules 2–5 of [`ShellEnv`].
fn looks_secret(name: &str, value: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_WORDS.iter().any(|word| upper.contains(word))
        || has_auth(&upper)
        || upper == "PAT"
        || SECRET_SUFFIXES.iter().any(|end| upper.ends_with(end))
        || OWN_PREFIXES.iter().any(|start| upper.starts_with(start))
        || url_with_user(value)
}

/// `AUTH` anywhere but as the start of `AUTHOR` (`AUTHORIZATION` counts as `AUTH`).
fn has_auth(upper: &str) -> bool {
    upper.match_indices("AUTH").any(|(at, _)| {
        let rest = &upper[at..];
        !rest.starts_with("AUTHOR") || rest.starts_with("AUTHORIZ")
    })
}

/// Whether `value` holds `scheme://userinfo@host`.
fn url_with_user(value: &str) -> bool {
    value.match_indices("://").any(|(at, _)| {
        let authority = value[at + 3..]
            .split(['/', '?', '#', ' '])
            .next()
            .unwrap_or("");
        authority.contains('@')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scrub_drops_what_looks_secret_and_keeps_the_rest() {
        #[rustfmt::skip]
        let rows: &[(&str, &str, bool)] = &[
            // name                          value                              kept
            ("PATH",                          "/usr/bin:/bin",                   true),
            ("HOME",                          "/home/u",                         true),
            ("LANG",                          "C.UTF-8",                         true),
            ("TERM",                          "xterm",                           true),
            ("PWD",                           "/work",                           true),
            ("OLDPWD",                        "/",                               true),
            ("SHELL",                         "/bin/sh",                         true),
            ("RUST_LOG",                      "info",                            true),
            // Rule 2: words in the name, any case.
            ("AWS_ACCESS_KEY_ID",             "AKIA…",                           false),
            ("AWS_SECRET_ACCESS_KEY",         "…",                               false),
            ("AWS_SESSION_TOKEN",             "…",                               false),
            ("AWS_WEB_IDENTITY_TOKEN_FILE",   "/var/run/token",                  false),
            ("AWS_REGION",                    "eu-west-1",                       true),
            ("AWS_PROFILE",                   "dev",                             true),
            ("GH_TOKEN",                      "ghp_…",                           false),
            ("GITHUB_TOKEN",                  "ghs_…",                           false),
            ("github_token",                  "ghs_…",                           false),
            ("NPM_TOKEN",                     "…",                               false),
            ("CARGO_REGISTRY_TOKEN",          "…",                               false),
            ("HF_TOKEN",                      "…",                               false),
            ("GOOGLE_API_KEY",                "…",                               false),
            ("api_key",                       "…",                               false),
            ("STRIPE_SECRET",                 "sk_live_…",                       false),
            ("PGPASSWORD",                    "…",                               false),
            ("MYSQL_ROOT_PASSWD",             "…",                               false),
            ("GPG_PASSPHRASE",                "…",                               false),
            ("GOOGLE_APPLICATION_CREDENTIALS","/k.json",                         false),
            ("SESSION_COOKIE",                "…",                               false),
            ("SLACK_WEBHOOK_URL",             "https://hooks.slack.com/…",       false),
            ("SSH_AUTH_SOCK",                 "/tmp/ssh-agent.sock",             false),
            ("XAUTHORITY",                    "/home/u/.Xauthority",             true), // a path; "AUTHOR…"
            ("HTTP_AUTHORIZATION",            "Bearer …",                        false),
            ("GIT_AUTHOR_NAME",               "Ada",                             true),
            ("GIT_AUTHOR_EMAIL",              "ada@example.com",                 true),
            ("GIT_AUTHOR_AUTH",               "…",                               false),
            // Rule 3: endings.
            ("PAT",                           "…",                               false),
            ("AZURE_DEVOPS_EXT_PAT",          "…",                               false),
            ("gitlab_pat",                    "…",                               false),
            ("SMTP_PASS",                     "…",                               false),
            ("MYSQL_PWD",                     "…",                               false),
            ("SENTRY_DSN",                    "https://k@o.ingest.sentry.io/1",  false),
            ("PATCH_LEVEL",                   "3",                               true),
            ("COMPASS",                       "n",                               true),
            // Rule 4: the providers' and cairn's own.
            ("OPENAI_API_KEY",                "sk-…",                            false),
            ("OPENAI_BASE_URL",               "https://api.openai.com/v1",       false),
            ("OPENAI_ORG_ID",                 "org-…",                           false),
            ("ANTHROPIC_API_KEY",             "sk-ant-…",                        false),
            ("ANTHROPIC_BASE_URL",            "https://api.anthropic.com",       false),
            ("OPENROUTER_API_KEY",            "sk-or-…",                         false),
            ("CAIRN_STORE",                   "/home/u/.local/state/cairn",      false),
            ("CAIRN_SHELL_PASS_ENV",          "GH_TOKEN",                        false),
            // Rule 5: URLs that carry a user or password, whatever the name.
            ("DATABASE_URL",                  "postgres://app:pw@db:5432/app",   false),
            ("DATABASE_URL",                  "postgres://db:5432/app",          true),
            ("https_proxy",                   "http://u:pw@proxy:3128",          false),
            ("HTTPS_PROXY",                   "http://proxy:3128",               true),
            ("REPO",                          "https://ghp_x@github.com/o/r",    false),
            ("NOTE",                          "mail me at a@b.c",                true),
            ("LINK",                          "https://x.org/?u=a@b",            true),
        ];
        let env = ShellEnv::default();
        for (name, value, kept) in rows {
            assert_eq!(
                env.keeps(OsStr::new(name), OsStr::new(value)),
                *kept,
                "{name}={value}"
            );
        }
    }

    #[test]
    fn passed_through_names_are_kept_exactly_as_named() {
        let env = ShellEnv::default().pass_through_list(" GH_TOKEN ,, SSH_AUTH_SOCK,");
        assert_eq!(
            env.passed_through().collect::<Vec<_>>(),
            ["GH_TOKEN", "SSH_AUTH_SOCK"]
        );
        let keeps = |n: &str| env.keeps(OsStr::new(n), OsStr::new("v"));
        assert!(keeps("GH_TOKEN"));
        assert!(keeps("SSH_AUTH_SOCK"));
        assert!(!keeps("gh_token"), "names are case-sensitive");
        assert!(!keeps("GITHUB_TOKEN"));
        let vars = [("PATH", "/bin"), ("GH_TOKEN", "t"), ("OPENAI_API_KEY", "k")]
            .map(|(n, v)| (OsString::from(n), OsString::from(v)));
        let kept: Vec<_> = env.filter(vars).into_iter().map(|(n, _)| n).collect();
        assert_eq!(kept, ["PATH", "GH_TOKEN"]);
    }
}
