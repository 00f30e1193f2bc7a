//! When a call is served from the store and when it goes upstream (DESIGN
//! §7) — a pure function of what is stored and what the request says.
//!
//! The rules, in order, for a request whose key matches a stored response
//! that is servable (a complete 2xx answer):
//! 1. `--replay always` (a cassette, for evals and tests) or `--offline`:
//!    served.
//! 2. The stored response was not delivered complete to its client (the
//!    client went away, or cairn died before the last byte): served. This
//!    is the rule real clients need — Codex re-sends a cut stream with
//!    identical headers and Claude Code keeps its retry count at 0.
//! 3. The request is marked as a retry (`x-stainless-retry-count` > 0, or an
//!    `Idempotency-Key` seen before with the same key): served.
//! 4. Otherwise it goes upstream: a fresh request equal to one already
//!    delivered is a deliberate new sample.
//!
//! Without a servable match it goes upstream — unless `--offline`, where it
//! is an error naming the key. (An `Idempotency-Key` reused with another
//! body is refused before any of this, with 422.)

/// Which matches are served.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReplayMode {
    /// Retries only (rules 2 and 3). The default.
    #[default]
    Retries,
    /// Every match.
    Always,
}

/// How the gateway replays.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayPolicy {
    /// Which matches are served.
    pub mode: ReplayMode,
    /// Never go upstream: a miss is an error.
    pub offline: bool,
}

/// What is stored under the request's key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Match {
    /// A complete 2xx answer, which may be served.
    pub servable: bool,
    /// Its client got it whole.
    pub delivered: bool,
}

/// What to do with a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Serve the stored response.
    Serve,
    /// Buy it from the upstream.
    Upstream,
    /// `--offline` and nothing to serve.
    OfflineMiss,
}

/// The decision of the module doc for a request.
pub fn decide(
    policy: ReplayPolicy,
    stored: Option<Match>,
    marked_retry: bool,
    idempotency_seen: bool,
) -> Decision {
    match stored.filter(|m| m.servable) {
        Some(_) if policy.offline || policy.mode == ReplayMode::Always => Decision::Serve,
        Some(m) if !m.delivered => Decision::Serve,
        Some(_) if marked_retry || idempotency_seen => Decision::Serve,
        _ if policy.offline => Decision::OfflineMiss,
        _ => Decision::Upstream,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_replay_rules() {
        let retries = ReplayPolicy::default();
        let always = ReplayPolicy {
            mode: ReplayMode::Always,
            offline: false,
        };
        let offline = ReplayPolicy {
            mode: ReplayMode::Retries,
            offline: true,
        };
        let undelivered = Some(Match {
            servable: true,
            delivered: false,
        });
        let delivered = Some(Match {
            servable: true,
            delivered: true,
        });
        let failed = Some(Match {
            servable: false,
            delivered: false,
        });
        use Decision::*;
        let rows = [
            // (policy, stored, retry marker, idempotency seen, decision)
            (retries, None, false, false, Upstream),
            (retries, None, true, true, Upstream),
            (retries, undelivered, false, false, Serve),
            (retries, delivered, false, false, Upstream),
            (retries, delivered, true, false, Serve),
            (retries, delivered, false, true, Serve),
            (retries, failed, true, true, Upstream),
            (always, delivered, false, false, Serve),
            (always, None, false, false, Upstream),
            (offline, delivered, false, false, Serve),
            (offline, None, false, false, OfflineMiss),
            (offline, failed, false, false, OfflineMiss),
        ];
        for (i, (p, s, r, idem, want)) in rows.into_iter().enumerate() {
            assert_eq!(decide(p, s, r, idem), want, "row {i}");
        }
    }
}
