use super::*;

/// A request of `method` with `headers` (name, value), as an adapter reads it.
fn req<'a>(method: &'a str, headers: &'a [(&'a str, &'a str)]) -> Result<Request<'a>, Denied> {
    Request::read(method, |name| {
        headers
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_bytes())
            .collect::<Vec<_>>()
    })
}

/// A request's headers, in a table row.
type Headers<'a> = &'a [(&'a str, &'a str)];

fn open() -> Policy<'static> {
    Policy::new("server", None)
}

/// The code a request gets, or "ok".
fn verdict(policy: &Policy<'_>, method: &str, headers: &[(&str, &str)]) -> &'static str {
    match req(method, headers).and_then(|r| admit(policy, &r)) {
        Ok(_) => "ok",
        Err(d) => d.code,
    }
}

#[test]
fn only_localhost_and_loopback_ip_literals_are_loopback_names() {
    #[rustfmt::skip]
    let rows: &[(&str, bool)] = &[
        // Admitted: exactly localhost, or a loopback IP literal, with or without a port.
        ("localhost", true),
        ("localhost:7878", true),
        ("LocalHost:7878", true),
        ("127.0.0.1", true),
        ("127.0.0.1:7878", true),
        ("127.1.2.3:80", true),
        ("127.255.255.254", true),
        ("[::1]", true),
        ("[::1]:7878", true),
        ("[0:0:0:0:0:0:0:1]:7878", true),
        (" 127.0.0.1:7878 ", true),
        // Refused: rebinding names that only start like a loopback name.
        ("127.0.0.1.evil.example", false),
        ("127.0.0.1.evil.example:7878", false),
        ("127.evil", false),
        ("127.evil:7878", false),
        ("localhost.evil.example", false),
        ("localhost.evil.example:7878", false),
        ("evil.localhost", false),
        ("evil.example", false),
        // Refused: numbers in forms a resolver may read as 127.0.0.1.
        ("0x7f.1", false),
        ("0x7f000001", false),
        ("2130706433", false),
        ("2130706433:7878", false),
        ("127.1", false),
        ("0177.0.0.1", false),
        ("127.000.000.001", false),
        // Refused: trailing dots (a name looked up in DNS).
        ("localhost.", false),
        ("localhost.:7878", false),
        ("127.0.0.1.", false),
        ("127.0.0.1.:7878", false),
        // Refused: not loopback, or malformed.
        ("0.0.0.0", false),
        ("10.0.2.2:7878", false),
        ("192.168.1.2", false),
        ("[::ffff:127.0.0.1]", false),
        ("[::2]", false),
        ("::1", false),
        ("[::1", false),
        ("[::1]7878", false),
        ("[::1]:", false),
        ("localhost:", false),
        ("localhost:99999", false),
        ("localhost:80:80", false),
        ("localhost:+80", false),
        ("[localhost]", false),
        ("", false),
        (":7878", false),
    ];
    for (host, want) in rows {
        assert_eq!(is_loopback_host(host, false), *want, "Host: {host:?}");
    }
}

#[test]
fn a_host_that_only_starts_with_127_is_refused() {
    for host in [
        "127.0.0.1.evil.example",
        "127.evil",
        "localhost.evil.example",
    ] {
        let headers = [("host", host)];
        assert_eq!(verdict(&open(), "GET", &headers), Denied::HOST, "{host}");
    }
    assert_eq!(verdict(&open(), "GET", &[]), Denied::HOST, "no Host at all");
    assert_eq!(verdict(&open(), "GET", &[("host", "127.0.0.1:7878")]), "ok");
}

#[test]
fn the_guest_name_is_a_loopback_name_only_where_the_policy_says() {
    let headers = [("host", "10.0.2.2:8787")];
    assert_eq!(verdict(&open(), "POST", &headers), Denied::HOST);
    let vm = Policy {
        guest_host: true,
        ..open()
    };
    assert_eq!(verdict(&vm, "POST", &headers), "ok");
    assert!(is_loopback_host("10.0.2.2", true));
    assert!(!is_loopback_host("10.0.2.3", true));
    assert!(!is_loopback_host("10.0.2.2.evil.example", true));
}

#[test]
fn with_a_token_any_host_is_answered_but_only_with_the_token() {
    let p = Policy::new("server", Some("sekrit"));
    #[rustfmt::skip]
    let rows: &[(&[(&str, &str)], &str)] = &[
        (&[("host", "cairn.lan:7878"), ("x-cairn-token", "sekrit")], "ok"),
        (&[("host", "cairn.lan:7878"), ("authorization", "Bearer sekrit")], "ok"),
        (&[("host", "cairn.lan:7878"), ("authorization", "bearer  sekrit ")], "ok"),
        (&[("host", "127.0.0.1:7878")], Denied::TOKEN),
        (&[("host", "cairn.lan:7878"), ("x-cairn-token", "")], Denied::TOKEN),
        (&[("host", "cairn.lan:7878"), ("x-cairn-token", "sekri")], Denied::TOKEN),
        (&[("host", "cairn.lan:7878"), ("x-cairn-token", "sekrit2")], Denied::TOKEN),
        (&[("host", "cairn.lan:7878"), ("authorization", "sekrit")], Denied::TOKEN),
        (&[("host", "cairn.lan:7878"), ("authorization", "Basic sekrit")], Denied::TOKEN),
        (&[("host", "cairn.lan:7878"), ("authorization", "Bearer ")], Denied::TOKEN),
        // x-api-key and the cookie carry nothing unless the policy says so.
        (&[("host", "cairn.lan:7878"), ("x-api-key", "sekrit")], Denied::TOKEN),
        (&[("host", "cairn.lan:7878"), ("cookie", "cairn=sekrit")], Denied::TOKEN),
    ];
    for (headers, want) in rows {
        assert_eq!(verdict(&p, "GET", headers), *want, "{headers:?}");
    }
}

#[test]
fn an_anthropic_clients_key_carries_the_token_where_the_policy_allows_it() {
    let p = Policy {
        api_key: true,
        ..Policy::new("gateway", Some("sekrit"))
    };
    let r = req("POST", &[("host", "h"), ("x-api-key", "sekrit")]).unwrap();
    assert_eq!(admit(&p, &r), Ok(Carrier::ApiKey));
    let r = req("POST", &[("host", "h"), ("x-api-key", "sk-ant-other")]).unwrap();
    assert_eq!(admit(&p, &r).unwrap_err().code, Denied::TOKEN);
    let r = req("POST", &[("host", "h"), ("authorization", "Bearer sekrit")]).unwrap();
    assert_eq!(admit(&p, &r), Ok(Carrier::Bearer));
}

#[test]
fn the_session_cookie_admits_with_the_secret_not_the_token() {
    let p = Policy {
        session: Some(SessionCookie {
            name: "cairn_7878",
            secret: "c0ffee",
        }),
        ..Policy::new("server", Some("sekrit"))
    };
    #[rustfmt::skip]
    let rows: &[(&str, &str)] = &[
        ("cairn_7878=c0ffee", "ok"),
        ("a=b; cairn_7878=c0ffee; c=d", "ok"),
        // Another server on the host may set a cookie of the same name.
        ("cairn_7878=junk; cairn_7878=c0ffee", "ok"),
        ("cairn_7878=sekrit", Denied::TOKEN),
        ("cairn_7878=c0ffe", Denied::TOKEN),
        ("cairn_7878=", Denied::TOKEN),
        ("cairn_7879=c0ffee", Denied::TOKEN),
        ("xcairn_7878=c0ffee", Denied::TOKEN),
        ("cairn_7878", Denied::TOKEN),
    ];
    for (cookie, want) in rows {
        let headers = [("host", "h:7878"), ("cookie", *cookie)];
        assert_eq!(verdict(&p, "GET", &headers), *want, "Cookie: {cookie}");
    }
    // Two Cookie headers (HTTP/2 splits them): either may hold it.
    let r = req(
        "GET",
        &[
            ("host", "h"),
            ("cookie", "a=b"),
            ("cookie", "cairn_7878=c0ffee"),
        ],
    )
    .unwrap();
    assert_eq!(admit(&p, &r), Ok(Carrier::Cookie));
    // A cookie that is not text is skipped, not an error.
    let raw: &[u8] = b"x=\xff; cairn_7878=c0ffee";
    let r = Request::read("GET", |name| match name {
        "host" => vec![&b"h"[..]],
        "cookie" => vec![raw],
        _ => vec![],
    })
    .unwrap();
    assert_eq!(admit(&p, &r), Ok(Carrier::Cookie));
}

#[test]
fn another_origins_request_is_refused_and_a_top_level_navigation_is_not() {
    let host = ("host", "127.0.0.1:7878");
    let json = ("content-type", "application/json");
    #[rustfmt::skip]
    let rows: &[(&str, Headers, &str)] = &[
        // Programs send neither Origin nor Sec-Fetch-*.
        ("POST", &[host, json], "ok"),
        ("GET", &[host], "ok"),
        // The viewer's own requests.
        ("POST", &[host, json, ("origin", "http://127.0.0.1:7878"), ("sec-fetch-site", "same-origin")], "ok"),
        ("GET", &[host, ("sec-fetch-site", "same-origin"), ("sec-fetch-mode", "cors"), ("sec-fetch-dest", "empty")], "ok"),
        ("GET", &[host, ("sec-fetch-site", "none"), ("sec-fetch-mode", "navigate"), ("sec-fetch-dest", "document")], "ok"),
        // A link from another site to the viewer opens it.
        ("GET", &[host, ("sec-fetch-site", "cross-site"), ("sec-fetch-mode", "navigate"), ("sec-fetch-dest", "document")], "ok"),
        // Another site's page: fetch, a form, an image, a frame.
        ("POST", &[host, json, ("origin", "http://evil.example")], Denied::CROSS_SITE),
        ("POST", &[host, json, ("origin", "null")], Denied::CROSS_SITE),
        ("POST", &[host, json, ("origin", "http://127.0.0.1:8000"), ("sec-fetch-site", "same-site")], Denied::CROSS_SITE),
        ("POST", &[host, json, ("origin", "https://127.0.0.1:7878")], Denied::CROSS_SITE),
        ("POST", &[host, json, ("sec-fetch-site", "cross-site")], Denied::CROSS_SITE),
        ("POST", &[host, json, ("sec-fetch-site", "same-site")], Denied::CROSS_SITE),
        ("POST", &[host, ("sec-fetch-site", "cross-site"), ("sec-fetch-mode", "navigate"), ("sec-fetch-dest", "document"), ("content-type", "text/plain")], Denied::CROSS_SITE),
        ("GET", &[host, ("origin", "http://evil.example"), ("sec-fetch-site", "cross-site"), ("sec-fetch-mode", "cors")], Denied::CROSS_SITE),
        ("GET", &[host, ("sec-fetch-site", "cross-site"), ("sec-fetch-mode", "no-cors"), ("sec-fetch-dest", "image")], Denied::CROSS_SITE),
        ("GET", &[host, ("sec-fetch-site", "same-site"), ("sec-fetch-mode", "no-cors"), ("sec-fetch-dest", "script")], Denied::CROSS_SITE),
        ("GET", &[host, ("sec-fetch-site", "cross-site"), ("sec-fetch-mode", "navigate"), ("sec-fetch-dest", "iframe")], Denied::CROSS_SITE),
        ("GET", &[host, ("sec-fetch-site", "bogus")], Denied::CROSS_SITE),
    ];
    for (method, headers, want) in rows {
        assert_eq!(
            verdict(&open(), method, headers),
            *want,
            "{method} {headers:?}"
        );
    }
    // With a token the same holds, before the token is looked at.
    let p = Policy::new("server", Some("sekrit"));
    let headers = [
        host,
        json,
        ("origin", "http://evil.example"),
        ("x-cairn-token", "sekrit"),
    ];
    assert_eq!(verdict(&p, "POST", &headers), Denied::CROSS_SITE);
}

#[test]
fn a_state_changing_request_must_be_json_where_the_policy_says() {
    let p = Policy {
        json_only: true,
        ..open()
    };
    let host = ("host", "localhost:7878");
    #[rustfmt::skip]
    let rows: &[(&str, Option<&str>, &str)] = &[
        ("POST", Some("application/json"), "ok"),
        ("POST", Some("Application/JSON; charset=utf-8"), "ok"),
        ("DELETE", Some("application/json"), "ok"),
        ("GET", None, "ok"),
        ("HEAD", None, "ok"),
        ("POST", None, Denied::CONTENT_TYPE),
        ("POST", Some("text/plain"), Denied::CONTENT_TYPE),
        ("POST", Some("text/plain; charset=application/json"), Denied::CONTENT_TYPE),
        ("POST", Some("application/x-www-form-urlencoded"), Denied::CONTENT_TYPE),
        ("POST", Some("multipart/form-data; boundary=x"), Denied::CONTENT_TYPE),
        ("POST", Some("application/jsonx"), Denied::CONTENT_TYPE),
        ("PUT", None, Denied::CONTENT_TYPE),
    ];
    for (method, ct, want) in rows {
        let mut headers = vec![host];
        headers.extend(ct.map(|c| ("content-type", c)));
        assert_eq!(verdict(&p, method, &headers), *want, "{method} {ct:?}");
    }
    assert_eq!(
        verdict(&open(), "POST", &[host]),
        "ok",
        "the gateway's policy"
    );
}

#[test]
fn a_header_the_rule_reads_given_twice_is_refused() {
    for name in ["host", "origin", "x-cairn-token", "sec-fetch-site"] {
        let headers = [("host", "127.0.0.1"), (name, "127.0.0.1"), (name, "x")];
        let headers = if name == "host" {
            &headers[1..]
        } else {
            &headers[..]
        };
        assert_eq!(verdict(&open(), "GET", headers), Denied::HEADER, "{name}");
    }
    let r = Request::read("GET", |name| match name {
        "host" => vec![&b"127.0.0.1\xff"[..]],
        _ => vec![],
    });
    assert_eq!(r.unwrap_err().code, Denied::HEADER);
}

#[test]
fn secrets_compare_whole_and_an_empty_one_matches_nothing() {
    assert!(same_secret("abc", "abc"));
    assert!(!same_secret("abc", "abd"));
    assert!(!same_secret("abc", "ab"));
    assert!(!same_secret("abc", "abcd"));
    assert!(!same_secret("", ""));
    assert_eq!(bearer("Bearer x"), Some("x"));
    assert_eq!(bearer("BEARER x"), Some("x"));
    assert_eq!(bearer("Bearerx"), None);
    assert_eq!(bearer("Bearer"), None);
    assert_eq!(bearer("Basic x"), None);
}

#[test]
fn a_server_listens_beyond_loopback_only_with_a_token_that_is_not_blank() {
    let local: std::net::SocketAddr = "127.0.0.1:7878".parse().unwrap();
    let any: std::net::SocketAddr = "0.0.0.0:7878".parse().unwrap();
    assert_eq!(may_listen(local, None), Ok(()));
    assert_eq!(may_listen(any, None), Err(ListenRefused::NeedsToken));
    assert_eq!(may_listen(any, Some("t0k")), Ok(()));
    for blank in ["", "  ", "\t"] {
        assert_eq!(
            may_listen(local, Some(blank)),
            Err(ListenRefused::EmptyToken)
        );
        assert_eq!(may_listen(any, Some(blank)), Err(ListenRefused::EmptyToken));
    }
}
