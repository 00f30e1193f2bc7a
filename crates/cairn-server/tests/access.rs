//! Who may call `cairn serve` (DESIGN §8, "What a web page can do:
//! nothing"), over real HTTP: the loopback Host rule, another origin's
//! requests, JSON only for what changes something, the frame rules, and a
//! browser's login with a token.

use cairn_journal::*;
use cairn_server::{bind, ServeConfig};
use cairn_store::{RunId, Store};
use serde_json::{json, Value};

struct Server {
    _dir: tempfile::TempDir,
    store: Store,
    ws: std::path::PathBuf,
    base: String,
    port: u16,
}

async fn start(token: Option<&str>) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store")).unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let (addr, server) = bind(ServeConfig {
        store: store.clone(),
        listen: "127.0.0.1:0".parse().unwrap(),
        token: token.map(str::to_owned),
        launcher: None,
        live: Default::default(),
        bounds: Default::default(),
    })
    .await
    .unwrap();
    tokio::spawn(server);
    Server {
        _dir: dir,
        store,
        ws,
        base: format!("http://{addr}"),
        port: addr.port(),
    }
}

/// A session of two records, its workspace versioned, not held open.
fn session(s: &Server) -> RunId {
    let id = RunId::new();
    let meta = Meta {
        run: String::new(),
        created: now_rfc3339(),
        workspace: s.ws.display().to_string(),
        name: Some("guarded".into()),
        fingerprint: None,
        fork: None,
        routing: None,
        system_file: None,
    };
    let mut w = JournalWriter::create(&s.store, &id, meta).unwrap();
    w.append(&RecordBody::User(User {
        text: "hi".into(),
        origin: None,
    }))
    .unwrap();
    id
}

/// A client that follows no redirect (a 303 is looked at, not followed).
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// What a request got: its status and its body as JSON (Null when not).
async fn answer(r: reqwest::RequestBuilder) -> (u16, Value) {
    let r = r.send().await.unwrap();
    let status = r.status().as_u16();
    let body = r.text().await.unwrap();
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

/// How many sessions the store lists.
fn sessions(s: &Server) -> usize {
    cairn_sessions::list(&s.store).unwrap().len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_only_starts_with_127_is_refused_on_every_route() {
    let s = start(None).await;
    let id = session(&s);
    let c = client();
    let port = s.port;
    for host in [
        format!("127.0.0.1.evil.example:{port}"),
        format!("127.evil:{port}"),
        format!("localhost.evil.example:{port}"),
        format!("0x7f.1:{port}"),
        format!("2130706433:{port}"),
        format!("localhost.:{port}"),
        format!("127.0.0.1.:{port}"),
        format!("10.0.2.2:{port}"),
    ] {
        for (method, path) in [
            ("GET", "/".to_string()),
            ("GET", "/v1/sessions".into()),
            ("GET", format!("/v1/sessions/{id}/records")),
            ("POST", format!("/v1/sessions/{id}/fork")),
        ] {
            let req = c
                .request(method.parse().unwrap(), format!("{}{path}", s.base))
                .header("host", &host)
                .json(&json!({}));
            let (status, body) = answer(req).await;
            assert_eq!(status, 403, "{method} {path} with Host {host}");
            assert_eq!(body["error"]["code"], "cairn_host", "{host}");
        }
    }
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("127.0.0.2:{port}"),
        format!("[::1]:{port}"),
    ] {
        let req = c
            .get(format!("{}/v1/sessions", s.base))
            .header("host", &host);
        assert_eq!(answer(req).await.0, 200, "Host {host}");
    }
    assert_eq!(sessions(&s), 1, "no fork was made");
}

/// Every state-changing route, for session `id` and checkpoint `cp`.
fn mutations(id: &RunId, cp: &str) -> Vec<String> {
    vec![
        format!("/v1/sessions/{id}/fork"),
        format!("/v1/sessions/{id}/checkpoints"),
        format!("/v1/checkpoints/{cp}/restore"),
        format!("/v1/sessions/{id}/resume"),
        format!("/v1/sessions/{id}/suspend"),
        format!("/v1/sessions/{id}/rewind"),
        "/v1/sessions".into(),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_sites_request_changes_nothing() {
    let s = start(None).await;
    let id = session(&s);
    let c = client();
    // A checkpoint to restore, then a change a restore would undo.
    std::fs::write(s.ws.join("f.txt"), "saved\n").unwrap();
    let (status, cp) = answer(
        c.post(format!("{}/v1/sessions/{id}/checkpoints", s.base))
            .json(&json!({})),
    )
    .await;
    assert_eq!(status, 201, "{cp}");
    let cp = cp["id"].as_str().unwrap().to_string();
    std::fs::write(s.ws.join("f.txt"), "changed since\n").unwrap();
    let records = || {
        read_journal(&s.store.journal_path(&id), id.as_str())
            .unwrap()
            .records
            .len()
    };
    let before = records();

    let own = s.base.clone();
    // What a page on another site (or another port of this host) sends
    // without asking first: no content type, text/plain, a form's types,
    // and JSON from a fetch that the browser marks as cross-site.
    #[rustfmt::skip]
    let hostile: &[&[(&str, &str)]] = &[
        &[("origin", "http://evil.example")],
        &[("origin", "http://evil.example"), ("content-type", "text/plain")],
        &[("origin", "http://evil.example"), ("content-type", "application/x-www-form-urlencoded")],
        &[("origin", "http://127.0.0.1:1"), ("content-type", "application/json"), ("sec-fetch-site", "same-site")],
        &[("origin", "null"), ("content-type", "application/json")],
        &[("sec-fetch-site", "cross-site"), ("sec-fetch-mode", "navigate"), ("sec-fetch-dest", "document"), ("content-type", "text/plain")],
        // No Origin at all, as an old browser's form: not JSON, refused all the same.
        &[("content-type", "text/plain")],
        &[],
    ];
    for path in mutations(&id, &cp) {
        for headers in hostile {
            let mut req = c.post(format!("{own}{path}")).body("{}");
            for (k, v) in *headers {
                req = req.header(*k, *v);
            }
            let (status, body) = answer(req).await;
            assert!(
                status == 403 || status == 415,
                "POST {path} {headers:?}: {status} {body}"
            );
            let code = body["error"]["code"].as_str().unwrap();
            assert!(
                code == "cairn_cross_site" || code == "cairn_content_type",
                "{code}"
            );
        }
    }
    assert_eq!(sessions(&s), 1, "no fork was made");
    assert_eq!(records(), before, "nothing was journaled");
    assert_eq!(
        std::fs::read_to_string(s.ws.join("f.txt")).unwrap(),
        "changed since\n",
        "no restore ran"
    );
    let cps = cairn_checkpoint::list(&s.store, &id).unwrap();
    assert_eq!(cps.len(), 1, "no checkpoint was saved");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_servers_own_page_and_programs_still_change_things_with_json() {
    let s = start(None).await;
    let id = session(&s);
    let c = client();
    // The viewer's fetch: same origin, JSON.
    let (status, body) = answer(
        c.post(format!("{}/v1/sessions/{id}/fork", s.base))
            .header("origin", &s.base)
            .header("sec-fetch-site", "same-origin")
            .json(&json!({})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    // A program: JSON with no body at all is a request with nothing to say.
    let (status, body) = answer(
        c.post(format!("{}/v1/sessions/{id}/checkpoints", s.base))
            .header("content-type", "application/json"),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = answer(
        c.post(format!("{}/v1/sessions/{id}/fork", s.base))
            .header("content-type", "application/json"),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = answer(
        c.post(format!("{}/v1/sessions/{id}/fork", s.base))
            .header("content-type", "application/json")
            .body("{not json"),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(sessions(&s), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_page_can_frame_the_server_or_read_it_from_another_site() {
    let s = start(None).await;
    let c = client();
    for path in ["/", "/v1/sessions", "/openapi.json", "/v1/nothing"] {
        let r = c.get(format!("{}{path}", s.base)).send().await.unwrap();
        let h = r.headers();
        let csp = h
            .get("content-security-policy")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        assert!(csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
        assert_eq!(h.get("x-frame-options").unwrap(), "DENY", "{path}");
        assert_eq!(
            h.get("cross-origin-resource-policy").unwrap(),
            "same-origin",
            "{path}"
        );
        assert_eq!(h.get("x-content-type-options").unwrap(), "nosniff");
    }
    // Another site's image or script of an API route: refused before it
    // reaches the route; a link to the viewer opens it.
    let (status, _) = answer(
        c.get(format!("{}/v1/sessions", s.base))
            .header("sec-fetch-site", "cross-site")
            .header("sec-fetch-mode", "no-cors")
            .header("sec-fetch-dest", "image"),
    )
    .await;
    assert_eq!(status, 403);
    let r = c
        .get(format!("{}/", s.base))
        .header("sec-fetch-site", "cross-site")
        .header("sec-fetch-mode", "navigate")
        .header("sec-fetch-dest", "document")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
}

/// The `name=value` of a response's `Set-Cookie`, and its attributes.
fn set_cookie(r: &reqwest::Response) -> (String, String) {
    let v = r
        .headers()
        .get("set-cookie")
        .expect("a Set-Cookie")
        .to_str()
        .unwrap()
        .to_string();
    let (pair, attrs) = v.split_once(';').unwrap_or((&v, ""));
    (pair.trim().to_string(), attrs.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_in_the_url_is_exchanged_for_a_session_cookie_and_removed() {
    let s = start(Some("sekrit-token")).await;
    let c = client();
    let r = c
        .get(format!("{}/?token=sekrit-token&x=1", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 303);
    assert_eq!(r.headers().get("location").unwrap(), "/?x=1");
    let (cookie, attrs) = set_cookie(&r);
    assert!(
        !cookie.contains("sekrit-token"),
        "the cookie is not the token"
    );
    let attrs = attrs.to_ascii_lowercase();
    assert!(attrs.contains("httponly"), "{attrs}");
    assert!(attrs.contains("samesite=strict"), "{attrs}");
    assert!(attrs.contains("path=/"), "{attrs}");
    for path in ["/", "/v1/sessions", "/openapi.json"] {
        let r = c
            .get(format!("{}{path}", s.base))
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "{path} with the cookie");
    }
    // The cookie also admits what changes something (same origin, JSON).
    let (status, _) = answer(
        c.post(format!("{}/v1/sessions/{}/fork", s.base, RunId::new()))
            .header("cookie", &cookie)
            .json(&json!({})),
    )
    .await;
    assert_eq!(status, 404, "admitted, and the session does not exist");
    // The redirect stays on this server, whatever the path looks like.
    let r = c
        .get(format!("{}//evil.example/x?token=sekrit-token", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 303);
    assert_eq!(r.headers().get("location").unwrap(), "/");
    // A wrong token in the URL, a wrong cookie, the token as the cookie.
    let (name, _) = cookie.split_once('=').unwrap();
    for (url, cookie) in [
        (format!("{}/?token=wrong", s.base), None),
        (
            format!("{}/v1/sessions", s.base),
            Some(format!("{name}=0000")),
        ),
        (
            format!("{}/v1/sessions", s.base),
            Some(format!("{name}=sekrit-token")),
        ),
    ] {
        let mut req = c.get(&url);
        if let Some(k) = &cookie {
            req = req.header("cookie", k);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status().as_u16(), 401, "{url} {cookie:?}");
        assert!(r.headers().get("set-cookie").is_none());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_without_the_token_gets_a_login_form_that_posts_json() {
    let s = start(Some("sekrit-token")).await;
    let c = client();
    let r = c.get(format!("{}/", s.base)).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let csp = r
        .headers()
        .get("content-security-policy")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert!(r
        .headers()
        .get("content-type")
        .unwrap()
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    let page = r.text().await.unwrap();
    assert!(page.contains("type=\"password\""), "{page}");
    // The form posts through the page's own script, which says where.
    assert!(page.contains("<script src=\"/login.js\""), "{page}");
    assert!(!page.contains("sekrit-token"));

    let login = format!("{}/v1/login", s.base);
    let (status, body) = answer(c.post(&login).json(&json!({"token": "wrong"}))).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"]["code"], "cairn_token");
    // Another site cannot log the browser in (or probe the token).
    let (status, _) = answer(
        c.post(&login)
            .header("origin", "http://evil.example")
            .json(&json!({"token": "sekrit-token"})),
    )
    .await;
    assert_eq!(status, 403);
    let (status, _) = answer(
        c.post(&login)
            .header("content-type", "text/plain")
            .body(r#"{"token": "sekrit-token"}"#),
    )
    .await;
    assert_eq!(status, 415);
    let r = c
        .post(&login)
        .json(&json!({"token": "sekrit-token"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 204);
    let (cookie, _) = set_cookie(&r);
    let r = c
        .get(format!("{}/v1/sessions", s.base))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    // Each server has a cookie of its own: another server's does not admit.
    let other = start(Some("sekrit-token")).await;
    let r = c
        .get(format!("{}/v1/sessions", other.base))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_token_is_refused_at_start() {
    for token in ["", "   "] {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let r = bind(ServeConfig {
            store,
            listen: "127.0.0.1:0".parse().unwrap(),
            token: Some(token.into()),
            launcher: None,
            live: Default::default(),
            bounds: Default::default(),
        })
        .await;
        let Err(e) = r else {
            panic!("an empty token {token:?} was taken")
        };
        assert!(matches!(e, cairn_server::ServeError::EmptyToken), "{e}");
        assert!(e.to_string().contains("--token"), "{e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_address_gets_the_login_page_and_the_pages_run_only_their_own_scripts() {
    let s = start(Some("sekrit-token")).await;
    let c = client();
    // A shared link to a session, opened without the token: the login page.
    let r = c
        .get(format!("{}/s/some-session", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let csp = r.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    let scripts: Vec<&str> = csp
        .split(';')
        .map(str::trim)
        .filter(|d| d.starts_with("script-src"))
        .collect();
    assert_eq!(
        scripts,
        ["script-src 'self'"],
        "no inline script runs: {csp}"
    );
    let page = r.text().await.unwrap();
    assert!(
        page.contains("<script src=\"/login.js\" defer></script>"),
        "{page}"
    );
    // The login page's script loads without the token; the viewer's does not.
    let r = c.get(format!("{}/login.js", s.base)).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/javascript"));
    assert!(r.text().await.unwrap().contains("/v1/login"));
    let r = c.get(format!("{}/viewer.js", s.base)).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 401);
    // Only a page's own addresses get the login page; the API answers JSON.
    let r = c
        .get(format!("{}/s/a/records", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/json"));
    // With the token in the URL, the address is kept and the token dropped.
    let r = c
        .get(format!("{}/s/some-session?token=sekrit-token", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 303);
    assert_eq!(r.headers()["location"].to_str().unwrap(), "/s/some-session");
}
