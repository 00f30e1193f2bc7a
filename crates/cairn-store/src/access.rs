//! Who may talk to a cairn HTTP server (`cairn serve`, the gateway): the
//! one implementation of the rule both keep (DESIGN §8, "What a web page
//! can do: nothing"). It reads header values as text and bytes, so it
//! pulls in no HTTP stack; each server calls it through a thin adapter.
//!
//! [`admit`] applies these rules, in order; the first that fails refuses:
//!
//! 1. **Host.** Without a token the server listens on loopback only (its
//!    `bind` refuses any other address), and a `Host` is admitted only when
//!    it is exactly `localhost` or an IP literal that is loopback
//!    (`127.0.0.0/8`, `[::1]`), with or without a port. A name that merely
//!    starts with `127.` (`127.0.0.1.evil.example`), a trailing dot, a
//!    number in another base (`0x7f.1`, `2130706433`) or a missing `Host`
//!    is refused (403 `cairn_host`): a web page that rebinds a name of its
//!    own to 127.0.0.1 sends that name. [`GUEST_HOST`] is admitted too,
//!    only when the policy says so (a gateway started for a VM session,
//!    whose guest reaches the host's loopback at that address). With a
//!    token the `Host` is not checked: a page cannot know the token.
//! 2. **Same origin.** A request carrying an `Origin` that is not
//!    `http://` + its own `Host` is refused (403 `cairn_cross_site`), and
//!    so is one whose `Sec-Fetch-Site` is anything but `same-origin` or
//!    `none` — except a safe method (GET, HEAD, OPTIONS) that is a
//!    top-level navigation (`Sec-Fetch-Mode: navigate`, `Sec-Fetch-Dest:
//!    document`), so a link to the viewer still opens it. Another port on
//!    the same host is another origin (and `same-site`): refused. Programs
//!    (SDKs, curl) send neither header.
//! 3. **JSON.** When the policy asks for it, a state-changing method (any
//!    but GET, HEAD, OPTIONS) needs `Content-Type: application/json` (415
//!    `cairn_content_type`): a page can send only `text/plain`, a form's
//!    types or no type without asking the server first, which it does not
//!    answer.
//! 4. **Token.** With a token, the request carries it (401 `cairn_token`):
//!    as `x-cairn-token`, `Authorization: Bearer TOKEN`, `x-api-key` where
//!    the policy allows it (the gateway: an Anthropic client's key), or a
//!    session cookie whose value is the server's own secret (never the
//!    token), where the policy names one (`cairn serve`'s login). Every
//!    comparison takes constant time ([`same_secret`]).
//!
//! A header the rule reads that is given twice, or (but for `Cookie`) is
//! not text, is refused (400 `cairn_header`): the rule never picks one of
//! two answers.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The host's loopback as a qemu guest on user-mode networking sees it.
pub const GUEST_HOST: &str = "10.0.2.2";

/// The address of [`GUEST_HOST`].
const GUEST_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 2);

/// What a server admits.
#[derive(Clone, Copy, Debug)]
pub struct Policy<'a> {
    /// The server's name in messages: `server`, `gateway`.
    pub what: &'a str,
    /// The token every request must carry; `None`: loopback names only.
    pub token: Option<&'a str>,
    /// Whether `x-api-key` may carry the token (the gateway, for an
    /// Anthropic client). Default no.
    pub api_key: bool,
    /// The session cookie that also admits, once a browser logged in.
    pub session: Option<SessionCookie<'a>>,
    /// Whether [`GUEST_HOST`] is a loopback name here (a gateway started
    /// for a VM session). Default no.
    pub guest_host: bool,
    /// Whether a state-changing method needs `Content-Type:
    /// application/json`. Default no.
    pub json_only: bool,
}

impl<'a> Policy<'a> {
    /// A policy of `what` with `token` and nothing else allowed.
    pub fn new(what: &'a str, token: Option<&'a str>) -> Policy<'a> {
        Policy {
            what,
            token,
            api_key: false,
            session: None,
            guest_host: false,
            json_only: false,
        }
    }
}

/// A session cookie: its name and the value that admits.
#[derive(Clone, Copy, Debug)]
pub struct SessionCookie<'a> {
    /// The cookie's name.
    pub name: &'a str,
    /// The secret its value must be.
    pub secret: &'a str,
}

/// How an admitted request was let in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Carrier {
    /// The server has no token: its `Host` was a loopback name.
    Loopback,
    /// `x-cairn-token`.
    CairnToken,
    /// `Authorization: Bearer TOKEN`.
    Bearer,
    /// `x-api-key`.
    ApiKey,
    /// The session cookie.
    Cookie,
}

/// Why a request is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Denied {
    /// The HTTP status: 400, 401, 403 or 415.
    pub status: u16,
    /// [`Denied::HOST`], [`Denied::CROSS_SITE`], [`Denied::CONTENT_TYPE`],
    /// [`Denied::TOKEN`] or [`Denied::HEADER`].
    pub code: &'static str,
    /// What was wrong and what to do.
    pub message: String,
}

impl Denied {
    /// 403: a `Host` that is not a loopback name, on a server without a token.
    pub const HOST: &'static str = "cairn_host";
    /// 403: another origin's request.
    pub const CROSS_SITE: &'static str = "cairn_cross_site";
    /// 415: a state-changing request that is not JSON.
    pub const CONTENT_TYPE: &'static str = "cairn_content_type";
    /// 401: no token, or a wrong one.
    pub const TOKEN: &'static str = "cairn_token";
    /// 400: a header the rule reads, given twice or not as text.
    pub const HEADER: &'static str = "cairn_header";

    /// True when only the token was missing: every other rule passed.
    pub fn wants_token(&self) -> bool {
        self.code == Denied::TOKEN
    }
}

/// The headers of one request that the rule reads.
#[derive(Clone, Debug, Default)]
pub struct Request<'a> {
    method: &'a str,
    host: Option<&'a str>,
    origin: Option<&'a str>,
    fetch_site: Option<&'a str>,
    fetch_mode: Option<&'a str>,
    fetch_dest: Option<&'a str>,
    content_type: Option<&'a str>,
    cairn_token: Option<&'a str>,
    authorization: Option<&'a str>,
    api_key: Option<&'a str>,
    cookies: Vec<&'a [u8]>,
}

impl<'a> Request<'a> {
    /// Reads a request: its method, and `header(name)`, every value of the
    /// header `name` (lowercase) as bytes, in order.
    ///
    /// # Errors
    /// [`Denied`] (400 `cairn_header`) for a header given twice or not as
    /// text.
    pub fn read<I>(method: &'a str, header: impl Fn(&str) -> I) -> Result<Request<'a>, Denied>
    where
        I: IntoIterator<Item = &'a [u8]>,
    {
        let one = |name: &str| -> Result<Option<&'a str>, Denied> {
            let mut values = header(name).into_iter();
            let Some(first) = values.next() else {
                return Ok(None);
            };
            let bad = |why: &str| Denied {
                status: 400,
                code: Denied::HEADER,
                message: format!("the `{name}` header {why}: send it once, as text"),
            };
            if values.next().is_some() {
                return Err(bad("is given more than once"));
            }
            std::str::from_utf8(first)
                .map(|v| Some(v.trim()))
                .map_err(|_| bad("is not text"))
        };
        Ok(Request {
            method,
            host: one("host")?,
            origin: one("origin")?,
            fetch_site: one("sec-fetch-site")?,
            fetch_mode: one("sec-fetch-mode")?,
            fetch_dest: one("sec-fetch-dest")?,
            content_type: one("content-type")?,
            cairn_token: one("x-cairn-token")?,
            authorization: one("authorization")?,
            api_key: one("x-api-key")?,
            // Cookies are shared by every server on the host: one that is
            // not text, or named twice, is another server's business.
            cookies: header("cookie").into_iter().collect(),
        })
    }

    /// Whether the method changes nothing (GET, HEAD, OPTIONS).
    pub fn is_safe(&self) -> bool {
        matches!(self.method, "GET" | "HEAD" | "OPTIONS")
    }
}

/// Applies the rules of the module doc to `req`.
///
/// # Errors
/// [`Denied`] when the request must not go on; a [`Denied::TOKEN`] means
/// every other rule passed.
pub fn admit(policy: &Policy<'_>, req: &Request<'_>) -> Result<Carrier, Denied> {
    let what = policy.what;
    if policy.token.is_none() && !is_loopback_host(req.host.unwrap_or(""), policy.guest_host) {
        return Err(Denied {
            status: 403,
            code: Denied::HOST,
            message: format!(
                "this {what} answers loopback names only (localhost, 127.0.0.1, [::1]), not `{}`; start it with --token to serve others",
                req.host.unwrap_or("")
            ),
        });
    }
    same_origin(req).map_err(|why| Denied {
        status: 403,
        code: Denied::CROSS_SITE,
        message: format!(
            "this {what} does not answer another site's page ({why}); open it at its own address"
        ),
    })?;
    if policy.json_only && !req.is_safe() && !is_json(req.content_type) {
        return Err(Denied {
            status: 415,
            code: Denied::CONTENT_TYPE,
            message: format!(
                "this {what} takes `Content-Type: application/json` on {}, not {}: send a JSON body (`{{}}` when there is nothing to say)",
                req.method,
                req.content_type.map_or("none".to_owned(), |t| format!("`{t}`"))
            ),
        });
    }
    let Some(token) = policy.token else {
        return Ok(Carrier::Loopback);
    };
    if req.cairn_token.is_some_and(|t| same_secret(token, t)) {
        return Ok(Carrier::CairnToken);
    }
    if req
        .authorization
        .and_then(bearer)
        .is_some_and(|t| same_secret(token, t))
    {
        return Ok(Carrier::Bearer);
    }
    if policy.api_key && req.api_key.is_some_and(|t| same_secret(token, t)) {
        return Ok(Carrier::ApiKey);
    }
    if let Some(session) = policy.session {
        let held = req
            .cookies
            .iter()
            .flat_map(|h| cookie_values(h, session.name))
            .any(|v| same_bytes(session.secret.as_bytes(), v));
        if held {
            return Ok(Carrier::Cookie);
        }
    }
    let carriers = match (policy.api_key, policy.session.is_some()) {
        (true, _) => "`x-cairn-token`, `Authorization: Bearer TOKEN` or `x-api-key`",
        (false, true) => {
            "`x-cairn-token` or `Authorization: Bearer TOKEN`, or log in at / with a browser"
        }
        (false, false) => "`x-cairn-token` or `Authorization: Bearer TOKEN`",
    };
    Err(Denied {
        status: 401,
        code: Denied::TOKEN,
        message: format!("this {what} needs its token: send it as {carriers}"),
    })
}

/// Why a server may not listen as it was asked to (rule 1, at start).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListenRefused {
    /// A token that is empty: it would admit anyone who sends an empty one.
    EmptyToken,
    /// An address that is not loopback, without a token.
    NeedsToken,
}

/// Whether a server may listen on `addr` with `token`: a token given is
/// not empty (blank), and an address other than loopback needs one. Each
/// server says the refusal in its own words (its flags and variables).
///
/// # Errors
/// [`ListenRefused`].
pub fn may_listen(addr: std::net::SocketAddr, token: Option<&str>) -> Result<(), ListenRefused> {
    if token.is_some_and(|t| t.trim().is_empty()) {
        return Err(ListenRefused::EmptyToken);
    }
    if token.is_none() && !addr.ip().is_loopback() {
        return Err(ListenRefused::NeedsToken);
    }
    Ok(())
}

/// Whether a `Host` header value is a loopback name: exactly `localhost`,
/// or a loopback IP literal (`[v6]` in brackets), each with or without a
/// port; with `guest`, [`GUEST_HOST`] too.
pub fn is_loopback_host(value: &str, guest: bool) -> bool {
    match parse_host(value) {
        Some(Name::Localhost) => true,
        Some(Name::Ip(ip)) => ip.is_loopback() || (guest && ip == IpAddr::V4(GUEST_IP)),
        None => false,
    }
}

/// A `Host` header's name, when it is one the rule can admit.
enum Name {
    Localhost,
    Ip(IpAddr),
}

/// `localhost[:PORT]`, `A.B.C.D[:PORT]` or `[V6][:PORT]`; `None` for any
/// other name, a malformed port, or anything else.
fn parse_host(value: &str) -> Option<Name> {
    let value = value.trim();
    let (name, port) = match value.strip_prefix('[') {
        Some(rest) => {
            let (inside, after) = rest.split_once(']')?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':')?),
            };
            return port
                .is_none_or(valid_port)
                .then(|| {
                    inside
                        .parse::<Ipv6Addr>()
                        .ok()
                        .map(|ip| Name::Ip(ip.into()))
                })
                .flatten();
        }
        None => match value.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (value, None),
        },
    };
    if !port.is_none_or(valid_port) {
        return None;
    }
    if name.eq_ignore_ascii_case("localhost") {
        return Some(Name::Localhost);
    }
    name.parse::<Ipv4Addr>().ok().map(|ip| Name::Ip(ip.into()))
}

fn valid_port(port: &str) -> bool {
    (1..=5).contains(&port.len())
        && port.bytes().all(|b| b.is_ascii_digit())
        && port.parse::<u16>().is_ok()
}

/// Rule 2: `Err` says why the request is another origin's.
fn same_origin(req: &Request<'_>) -> Result<(), String> {
    if let Some(origin) = req.origin {
        let own = req.host.map(|h| format!("http://{h}"));
        if !own.is_some_and(|own| own.eq_ignore_ascii_case(origin)) {
            return Err(format!("its Origin is `{origin}`"));
        }
    }
    match req.fetch_site {
        None => Ok(()),
        Some(s) if s.eq_ignore_ascii_case("same-origin") || s.eq_ignore_ascii_case("none") => {
            Ok(())
        }
        Some(s) => {
            let navigation = req
                .fetch_mode
                .is_some_and(|m| m.eq_ignore_ascii_case("navigate"))
                && req
                    .fetch_dest
                    .is_some_and(|d| d.eq_ignore_ascii_case("document"));
            if req.is_safe() && navigation {
                Ok(())
            } else {
                Err(format!("Sec-Fetch-Site: {s}"))
            }
        }
    }
}

/// Whether a `Content-Type` is `application/json` (parameters allowed).
fn is_json(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|t| {
        t.split(';')
            .next()
            .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
    })
}

/// The token of an `Authorization: Bearer TOKEN` value.
pub fn bearer(authorization: &str) -> Option<&str> {
    let (scheme, rest) = authorization.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| rest.trim())
        .filter(|t| !t.is_empty())
}

/// Whether `given` is `expected`, in time that does not depend on where
/// they differ (only on their lengths). An empty `expected` matches nothing.
pub fn same_secret(expected: &str, given: &str) -> bool {
    same_bytes(expected.as_bytes(), given.as_bytes())
}

fn same_bytes(expected: &[u8], given: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    !expected.is_empty() && bool::from(expected.ct_eq(given))
}

/// The values of every cookie called `name` in one `Cookie` header.
fn cookie_values<'h>(header: &'h [u8], name: &'h str) -> impl Iterator<Item = &'h [u8]> + 'h {
    header.split(|&b| b == b';').filter_map(move |pair| {
        let pair = pair.trim_ascii();
        let eq = pair.iter().position(|&b| b == b'=')?;
        (pair[..eq].trim_ascii() == name.as_bytes()).then(|| pair[eq + 1..].trim_ascii())
    })
}

#[cfg(test)]
mod tests;
