//! Who may talk to a cairn HTTP server (the gateway, and `cairn serve`):
//! the one implementation of the rule both keep.
//!
//! - With a token, every request must carry it (`x-cairn-token`, or
//!   `Authorization: Bearer TOKEN`); nothing else is checked.
//! - Without one, the server listens on loopback only (its caller refuses
//!   any other address) and refuses a `Host` that is not a loopback name,
//!   so a web page cannot reach it by rebinding a name of its own. One
//!   more name is a loopback name here: [`GUEST_HOST`], the address a qemu
//!   guest on user-mode networking reaches the host's loopback at (a VM
//!   session's programs calling the gateway, DESIGN §13). A connection to
//!   that address from anywhere else never arrives on a loopback listener,
//!   and a rebinding page sends its own name, so it opens nothing new.

use http::{HeaderMap, StatusCode};

/// The host's loopback as a qemu guest on user-mode networking sees it.
pub const GUEST_HOST: &str = "10.0.2.2";

/// Why a request is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denied {
    /// 401 (no or wrong token) or 403 (a foreign Host).
    pub status: StatusCode,
    /// `cairn_token` or `cairn_host`.
    pub code: &'static str,
    /// What to do about it.
    pub message: String,
}

/// Checks one request's headers against `token`; `what` names the server
/// in the messages ("gateway", "server").
///
/// # Errors
/// [`Denied`] when the request must not go on.
pub fn admit(token: Option<&str>, headers: &HeaderMap, what: &str) -> Result<(), Denied> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    match token {
        Some(token) => {
            let given = header("x-cairn-token").or_else(|| {
                header("authorization").and_then(|a| a.strip_prefix("Bearer ").map(str::to_owned))
            });
            if given.as_deref() == Some(token) {
                Ok(())
            } else {
                Err(Denied {
                    status: StatusCode::UNAUTHORIZED,
                    code: "cairn_token",
                    message: format!(
                        "this {what} needs its token: send it as `x-cairn-token` or `Authorization: Bearer TOKEN`"
                    ),
                })
            }
        }
        None => {
            let host = header("host").unwrap_or_default();
            let name = host.rsplit_once(':').map_or(host.as_str(), |(h, _)| h);
            let loopback = matches!(name, "localhost" | "127.0.0.1" | "[::1]" | GUEST_HOST)
                || name.starts_with("127.")
                || name.is_empty();
            if loopback {
                Ok(())
            } else {
                Err(Denied {
                    status: StatusCode::FORBIDDEN,
                    code: "cairn_host",
                    message: format!(
                        "this {what} answers loopback names only (localhost, 127.0.0.1); start it with --token to serve others"
                    ),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(h: &str) -> HeaderMap {
        let mut m = HeaderMap::new();
        m.insert("host", h.parse().unwrap());
        m
    }

    #[test]
    fn loopback_names_and_a_qemu_guests_name_for_the_host_are_admitted_without_a_token() {
        for h in [
            "localhost:7878",
            "127.0.0.1:7878",
            "127.1.2.3",
            "[::1]:80",
            "10.0.2.2:7878",
        ] {
            assert_eq!(admit(None, &host(h), "gateway"), Ok(()), "{h}");
        }
        for h in [
            "evil.example:7878",
            "10.0.2.3:7878",
            "192.168.1.2",
            "10.0.2.2.evil.example",
        ] {
            let denied = admit(None, &host(h), "gateway").unwrap_err();
            assert_eq!(denied.code, "cairn_host", "{h}");
        }
    }
}
